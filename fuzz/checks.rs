//! Property checks for Bascule's parsers, one public function per fuzz target. Each takes the raw
//! input and panics (with the property's name) when a property fails.
//!
//! This one file is compiled twice: by each fuzz target under `fuzz/fuzz_targets/` (nightly,
//! cargo-fuzz) and by the seed replay test `tests/fuzz_seeds.rs` (stable, `cargo test`), both
//! through `#[path]`. So the committed seeds replay exactly what the fuzzers check, and neither
//! copy can drift from the other. A file included by path was chosen over a module of the
//! library because the checks are test code: they use only Bascule's public API, and putting
//! them in `src/` (even behind a feature) would ship them in the crate or give CI a second
//! configuration to build.
//!
//! The checks are properties, not only "no panic", and each is kept cheap (a few parses of the
//! input): the HTTP targets run tens of thousands of inputs a second. By target:
//! - heads: parsing is deterministic and does not depend on what the caller's header vector
//!   held; a complete head lies inside the buffer; only empty lines come before its start line,
//!   which holds the method and target; its header lines follow end to end and it ends with an
//!   empty line; each header's name, value and line ranges nest inside its line; the bare-LF
//!   fix is noted exactly when a line has one; `copy_head` reproduces the head's bytes with a
//!   keep-all filter, the start line with a keep-none filter and exactly the kept lines
//!   otherwise (or, for a head that needs fixes, CRLF lines with one `Content-Length`); the head
//!   as forwarded parses again to the same framing, method, target and headers with nothing
//!   left to fix; the framing decision agrees with the headers (one `Host` in HTTP/1.1, never
//!   both `Content-Length` and `Transfer-Encoding`, no coding but a single `chunked`, a length
//!   only from agreeing `Content-Length` values); and a prefix of the input never gives a
//!   different complete head or a different error;
//! - chunked bodies: feeding the input at once, byte by byte, split at a point chosen from the
//!   input, or in pieces of seven bytes gives the same result, consumed count, state and
//!   de-chunked data (`feed_data`'s ranges, in order inside each piece); a body stops exactly
//!   after the empty line that ends its trailers, and consumes nothing more;
//! - configuration: loading never panics, is deterministic, fails exactly when an alert is
//!   reported, and every diagnostic points at a line of the text in file order.

use std::ops::Range;

use bascule::config::{self, Diagnostic};
use bascule::proto::h1::{self, BodyKind, Chunked, Fixes, H1Error, HeaderIdx, HopByHop};

/// A cut point in `0..=data.len()` derived from the input's bytes, so that seeds stay plain
/// files (no control byte up front) while the fuzzer still steers the cut by mutating them.
fn cut_of(data: &[u8]) -> usize {
    let mut h: u32 = 0x811c_9dc5; // FNV-1a
    for &b in data {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h as usize % (data.len() + 1)
}

/// RFC 9110 token characters (method and header names).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim(v: &[u8]) -> &[u8] {
    let s = v.iter().position(|b| !b.is_ascii_whitespace());
    let e = v.iter().rposition(|b| !b.is_ascii_whitespace());
    match (s, e) {
        (Some(s), Some(e)) => &v[s..=e],
        _ => &[],
    }
}

/// The values of every header called `name`, split at commas and trimmed, in order.
fn list_values<'b>(buf: &'b [u8], headers: &[HeaderIdx], name: &str) -> Vec<&'b [u8]> {
    headers
        .iter()
        .filter(|h| h.is(buf, name))
        .flat_map(|h| h.value(buf).split(|&b| b == b','))
        .map(trim)
        .collect()
}

fn count(buf: &[u8], headers: &[HeaderIdx], name: &str) -> usize {
    headers.iter().filter(|h| h.is(buf, name)).count()
}

/// How many header lines a head keeping every header is forwarded with: one `Content-Length`
/// stands for several equal ones.
fn forwarded_count(buf: &[u8], headers: &[HeaderIdx], fixes: &Fixes) -> usize {
    let lengths = count(buf, headers, "content-length");
    if fixes.merge_length {
        headers.len() - lengths + 1
    } else {
        headers.len()
    }
}

/// Header layout shared by requests and responses, and what `copy_head` makes of the head with
/// three filters; returns the head as forwarded with every header kept.
fn check_layout(
    buf: &[u8],
    head_len: usize,
    line: Range<usize>,
    fixes: &Fixes,
    headers: &[HeaderIdx],
) -> Vec<u8> {
    assert!(head_len <= buf.len(), "head longer than the buffer");
    let head = &buf[..head_len];
    assert!(
        head[..line.start].iter().all(|&b| b == b'\r' || b == b'\n'),
        "only empty lines before the start line"
    );
    assert!(
        line.start < line.end
            && line.end <= head_len
            && head[..line.end].ends_with(b"\n")
            && !head[line.start..line.end - 1].contains(&b'\n'),
        "the start line is one line"
    );
    let mut at = line.end;
    for h in headers {
        let (n0, n1) = (h.name.0 as usize, h.name.1 as usize);
        let (v0, v1) = (h.value.0 as usize, h.value.1 as usize);
        let (l0, l1) = (h.line.0 as usize, h.line.1 as usize);
        assert_eq!(l0, at, "header lines follow the start line end to end");
        assert!(
            n0 == l0 && n0 < n1 && n1 < v0 && v0 <= v1 && v1 < l1 && l1 <= head_len,
            "header ranges nest inside the head: {h:?}"
        );
        assert!(head[n0..n1].iter().all(|&b| is_tchar(b)), "name is a token");
        assert_eq!(head[n1], b':', "colon right after the name");
        assert!(
            head[n1 + 1..v0].iter().all(|&b| b == b' ' || b == b'\t'),
            "only blanks between colon and value"
        );
        assert!(
            !head[v0..v1]
                .iter()
                .any(|&b| b == b'\r' || b == b'\n' || b == 0),
            "no CR, LF or NUL in a value"
        );
        let tail = &head[v1..l1];
        let blank =
            |(i, &b): (usize, &u8)| b == b' ' || b == b'\t' || (b == b'\r' && i == tail.len() - 2);
        assert!(
            tail.ends_with(b"\n") && tail[..tail.len() - 1].iter().enumerate().all(blank),
            "a value is followed by blanks and the line ending only"
        );
        at = l1;
    }
    assert!(
        matches!(&head[at..], b"\r\n" | b"\n"),
        "the head ends with one empty line after the last header"
    );
    let bare = head[line.start..at]
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || head[line.start + i - 1] != b'\r'));
    assert_eq!(
        fixes.bare_lf, bare,
        "bare LF noted exactly when a line has one"
    );

    // copy_head, as the proxy calls it, with three filters.
    let keep_some = |i: usize| i % 3 != 1;
    let mut all = Vec::new();
    h1::copy_head(head, line.clone(), headers, fixes, &mut all, |_| true);
    let mut none = Vec::new();
    h1::copy_head(head, line.clone(), headers, fixes, &mut none, |_| false);
    let mut some = Vec::new();
    let mut i = 0;
    h1::copy_head(head, line.clone(), headers, fixes, &mut some, |_| {
        i += 1;
        keep_some(i - 1)
    });
    if !fixes.any() {
        assert_eq!(all, &head[line.start..at], "copy_head keeping every header");
        assert_eq!(none, &head[line.clone()], "copy_head keeping no header");
        let mut want = head[line.clone()].to_vec();
        for (i, h) in headers.iter().enumerate() {
            if keep_some(i) {
                want.extend_from_slice(h.line(head));
            }
        }
        assert_eq!(some, want, "copy_head keeping some headers");
    } else {
        // Rewritten line by line: CRLF endings, several Content-Length lines become one.
        let lines = |kept: &mut dyn Iterator<Item = &HeaderIdx>| -> usize {
            let (mut n, mut lengths) = (1, 0);
            for h in kept {
                if fixes.merge_length && h.is(head, "content-length") {
                    lengths = 1;
                } else {
                    n += 1;
                }
            }
            n + lengths
        };
        for (out, n, what) in [
            (&all, lines(&mut headers.iter()), "every"),
            (&none, 1, "no"),
            (
                &some,
                lines(
                    &mut headers
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| keep_some(*i))
                        .map(|(_, h)| h),
                ),
                "some",
            ),
        ] {
            let crlf = out.windows(2).filter(|w| w == b"\r\n").count();
            let lf = out.iter().filter(|&&b| b == b'\n').count();
            assert!(
                out.ends_with(b"\r\n") && crlf == lf && lf == n,
                "copy_head keeping {what} header rewrites to {n} CRLF lines: {:?}",
                String::from_utf8_lossy(out)
            );
        }
    }
    all
}

/// The framing decision agrees with the headers, whichever message it is.
fn check_framing(buf: &[u8], headers: &[HeaderIdx], body: BodyKind) {
    let te = list_values(buf, headers, "transfer-encoding");
    let cl = list_values(buf, headers, "content-length");
    let has_te = count(buf, headers, "transfer-encoding") > 0;
    let has_cl = count(buf, headers, "content-length") > 0;
    assert!(
        !(has_te && has_cl),
        "accepted both Content-Length and Transfer-Encoding"
    );
    if has_te {
        let chunked = te
            .iter()
            .filter(|t| t.eq_ignore_ascii_case(b"chunked"))
            .count();
        assert!(
            chunked == 1
                && te
                    .last()
                    .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked")),
            "accepted a Transfer-Encoding whose only final coding is not chunked"
        );
    }
    let cl_is = |n: u64| {
        cl.iter()
            .all(|v| std::str::from_utf8(v).ok().and_then(|v| v.parse().ok()) == Some(n))
    };
    if has_cl {
        assert!(
            cl.iter()
                .all(|v| !v.is_empty() && v.iter().all(u8::is_ascii_digit)),
            "accepted a Content-Length that is not digits"
        );
    }
    match body {
        BodyKind::Chunked => assert!(has_te, "chunked body without Transfer-Encoding"),
        BodyKind::Length(n) => assert!(n > 0 && !has_te && cl_is(n), "body length {n}"),
        BodyKind::None | BodyKind::UntilClose => {}
    }
}

/// Parses a prefix of the input and compares with the whole input's result: shorter input may
/// only be incomplete, or give the same complete head (with the same headers) or the same error.
fn check_prefix<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    cut: usize,
    whole: &Result<Option<T>, H1Error>,
    whole_headers: &[HeaderIdx],
    head_len: impl Fn(&T) -> usize,
    parse: impl Fn(&[u8], &mut Vec<HeaderIdx>) -> Result<Option<T>, H1Error>,
) {
    let mut headers = Vec::new();
    match parse(&data[..cut], &mut headers) {
        Ok(None) => {
            if let Ok(Some(head)) = whole {
                assert!(
                    cut < head_len(head),
                    "a prefix of {cut} bytes holding the whole head is incomplete"
                );
            }
        }
        Ok(Some(head)) => {
            assert_eq!(
                whole,
                &Ok(Some(head)),
                "a prefix of {cut} bytes gives another head"
            );
            assert_eq!(
                whole_headers, headers,
                "a prefix of {cut} bytes gives other headers"
            );
        }
        Err(e) => assert_eq!(
            whole,
            &Err(e),
            "a prefix of {cut} bytes gives another error"
        ),
    }
}

/// Properties of `h1::parse_request` (and of `copy_head` and `HopByHop` on what it accepts).
pub fn request_head(data: &[u8]) {
    let mut headers = Vec::new();
    let whole = h1::parse_request(data, &mut headers);
    let mut again = vec![HeaderIdx::default(); 3];
    assert_eq!(h1::parse_request(data, &mut again), whole, "deterministic");
    let mut len = data.len() + 1;
    if let Ok(Some(head)) = &whole {
        assert_eq!(again, headers, "deterministic headers");
        len = head.len;
        let line = head.start_line.clone();
        let mut forwarded = check_layout(data, head.len, line.clone(), &head.fixes, &headers);
        let (m, t) = (head.method.clone(), head.target.clone());
        assert!(
            line.start == m.start
                && m.start < m.end
                && m.end < t.start
                && t.start < t.end
                && t.end < line.end,
            "method and target lie in the start line, in order"
        );
        assert!(
            !data[t.clone()].contains(&b'#'),
            "no fragment in the target"
        );
        // The server must read the forwarded head as the proxy did, with nothing left to fix.
        forwarded.extend_from_slice(b"\r\n");
        let mut again = Vec::new();
        let Ok(Some(next)) = h1::parse_request(&forwarded, &mut again) else {
            panic!(
                "the forwarded head does not parse: {:?}",
                String::from_utf8_lossy(&forwarded)
            );
        };
        assert_eq!(next.len, forwarded.len(), "the forwarded head is one head");
        assert_eq!(
            next.fixes,
            Fixes::default(),
            "the forwarded head needs no fix"
        );
        assert_eq!(
            (next.minor, next.body, next.conn, next.takes_chunked),
            (head.minor, head.body, head.conn, head.takes_chunked),
            "the forwarded head frames the message the same way"
        );
        assert_eq!(next.method(&forwarded), head.method(data), "same method");
        let mut target = data[t.clone()].to_vec();
        if let Some((a, b)) = head.fixes.default_port {
            target.drain(a as usize - t.start..b as usize - t.start);
        }
        assert_eq!(&forwarded[next.target.clone()], &target[..], "same target");
        assert_eq!(
            again.len(),
            forwarded_count(data, &headers, &head.fixes),
            "same headers"
        );
        assert!(data[m].iter().all(|&b| is_tchar(b)), "method is a token");
        assert!(count(data, &headers, "host") <= 1, "at most one Host");
        assert!(
            data[t].iter().all(|&b| b > b' ' && b != 0x7f),
            "no blank or control byte in the target"
        );
        assert!(head.minor <= 1, "HTTP/1.0 or HTTP/1.1");
        if head.minor == 1 {
            assert_eq!(count(data, &headers, "host"), 1, "one Host in HTTP/1.1");
        }
        check_framing(data, &headers, head.body);
        assert_ne!(
            head.body,
            BodyKind::UntilClose,
            "a request body is delimited"
        );
        if head.body == BodyKind::Chunked {
            assert_eq!(head.minor, 1, "chunked only in HTTP/1.1");
        }
        for upgrading in [false, true] {
            let hop = HopByHop::new(data, &headers, &head.conn, upgrading);
            for h in &headers {
                if h.is(data, "connection") || h.is(data, "keep-alive") {
                    assert!(hop.is(h), "Connection and Keep-Alive are hop-by-hop");
                }
            }
        }
    }
    for cut in [cut_of(data), len - 1] {
        if cut <= data.len() {
            check_prefix(data, cut, &whole, &headers, |h| h.len, h1::parse_request);
        }
    }
}

/// Properties of `h1::parse_response`, for a response to GET and to HEAD.
pub fn response_head(data: &[u8]) {
    let mut headers = Vec::new();
    let whole = h1::parse_response(data, &mut headers, false);
    let mut again = vec![HeaderIdx::default(); 3];
    assert_eq!(
        h1::parse_response(data, &mut again, false),
        whole,
        "deterministic"
    );
    let mut to_head = Vec::new();
    let head_res = h1::parse_response(data, &mut to_head, true);
    let mut len = data.len() + 1;
    match (&whole, &head_res) {
        (Ok(Some(r)), Ok(Some(h))) => {
            assert_eq!(again, headers, "deterministic headers");
            assert_eq!(to_head, headers, "same headers for a response to HEAD");
            assert_eq!(
                (h.status, h.minor, h.len, h.body),
                (r.status, r.minor, r.len, BodyKind::None),
                "a response to HEAD is the same head without a body"
            );
            len = r.len;
            let mut forwarded = check_layout(data, r.len, r.start_line.clone(), &r.fixes, &headers);
            assert!(
                data[r.start_line.clone()].starts_with(b"HTTP/1."),
                "the status line starts with the version"
            );
            forwarded.extend_from_slice(b"\r\n");
            let mut again = Vec::new();
            let Ok(Some(next)) = h1::parse_response(&forwarded, &mut again, false) else {
                panic!(
                    "the forwarded head does not parse: {:?}",
                    String::from_utf8_lossy(&forwarded)
                );
            };
            assert_eq!(next.len, forwarded.len(), "the forwarded head is one head");
            assert_eq!(
                next.fixes,
                Fixes::default(),
                "the forwarded head needs no fix"
            );
            assert_eq!(
                (next.status, next.minor, next.body, next.conn),
                (r.status, r.minor, r.body, r.conn),
                "the forwarded head frames the message the same way"
            );
            assert_eq!(
                again.len(),
                forwarded_count(data, &headers, &r.fixes),
                "same headers"
            );
            assert!(r.minor <= 1, "HTTP/1.0 or HTTP/1.1");
            if (100..200).contains(&r.status) || r.status == 204 || r.status == 304 {
                assert_eq!(r.body, BodyKind::None, "status {} has no body", r.status);
            }
            check_framing(data, &headers, r.body);
            if r.body == BodyKind::UntilClose {
                assert!(
                    !r.conn.keep_alive,
                    "a body up to the close ends the connection"
                );
                assert_eq!(count(data, &headers, "content-length"), 0, "no length");
            }
        }
        (Ok(None), Ok(None)) => {}
        (Err(a), Err(b)) => assert_eq!(a.status, b.status, "same error to GET and HEAD"),
        _ => panic!("the response to GET gives {whole:?} but the one to HEAD {head_res:?}"),
    }
    let parse = |b: &[u8], h: &mut Vec<HeaderIdx>| h1::parse_response(b, h, false);
    for cut in [cut_of(data), len - 1] {
        if cut <= data.len() {
            check_prefix(data, cut, &whole, &headers, |h| h.len, parse);
        }
    }
}

/// What feeding the input gives: the result (total consumed, or the first error), the final
/// state, and the body's data as `feed_data` reported it.
type Fed = (Result<usize, H1Error>, Chunked, Vec<u8>);

/// Feeds `data` to a fresh decoder in pieces of the sizes `piece` gives (0 means the rest).
fn feed_pieces(data: &[u8], mut piece: impl FnMut() -> usize) -> Fed {
    let mut c = Chunked::default();
    let mut body = Vec::new();
    let mut total = 0;
    let mut rest = data;
    while !rest.is_empty() {
        let k = match piece() {
            0 => rest.len(),
            k => k.min(rest.len()),
        };
        let mut end = 0;
        let fed = c.feed_data(&rest[..k], |r| {
            assert!(
                end <= r.start && r.start < r.end && r.end <= k,
                "data ranges in order"
            );
            end = r.end;
            body.extend_from_slice(&rest[r]);
        });
        match fed {
            Ok(n) if n < k => {
                assert!(c.is_done(), "stopped early without being done");
                return (Ok(total + n), c, body);
            }
            Ok(n) => total += n,
            Err(e) => return (Err(e), c, body),
        }
        rest = &rest[k..];
    }
    (Ok(total), c, body)
}

/// Properties of the chunked-body decoder `h1::Chunked`.
pub fn chunked(data: &[u8]) {
    let whole = feed_pieces(data, || 0);
    let mut state = whole.1;
    assert_eq!(
        Chunked::default().feed(data),
        whole.0,
        "feed and feed_data agree"
    );
    if let Ok(n) = whole.0 {
        assert!(n <= data.len(), "consumed more than given");
        if state.is_done() {
            assert!(
                n >= 5 && data[..n].ends_with(b"\n"),
                "a body ends with the LF of its final empty line"
            );
            assert!(
                whole.2.len() <= n - 5,
                "the data is shorter than its encoding"
            );
            assert_eq!(state.feed(&data[n..]), Ok(0), "nothing more once done");
            assert!(state.is_done(), "done stays done");
        } else {
            assert_eq!(n, data.len(), "consumed everything while not done");
        }
    }
    let cut = cut_of(data);
    let mut first = true;
    let split = feed_pieces(data, || {
        if std::mem::take(&mut first) {
            cut.max(1)
        } else {
            0
        }
    });
    assert_eq!(split, whole, "split at {cut}");
    assert_eq!(feed_pieces(data, || 1), whole, "byte by byte");
    assert_eq!(feed_pieces(data, || 7), whole, "pieces of 7");
}

/// Properties of the configuration loader (lexer, parser and validation) on any text.
pub fn config(data: &[u8]) {
    const NAME: &str = "fuzz.cfg";
    let text = String::from_utf8_lossy(data).into_owned();
    let lines = text.split('\n').count();
    let texts = [(NAME.to_string(), text)];
    let env = || config::lexer::Env::from_pairs([("PORT", "8080"), ("ADDR", "127.0.0.1")]);
    let load = || config::load_texts(&texts, env(), Vec::new());
    let result = load();
    let diags = match &result {
        Ok(loaded) => &loaded.warnings,
        Err(e) => &e.diagnostics,
    };
    assert_eq!(
        result.is_err(),
        diags.iter().any(Diagnostic::is_error),
        "fails exactly when an alert is reported"
    );
    let mut last = 0;
    for d in diags {
        let rendered = d.to_string();
        let span = d
            .span
            .as_ref()
            .unwrap_or_else(|| panic!("diagnostic without a line: {rendered}"));
        assert_eq!((span.file_index, &*span.file), (0, NAME), "{rendered}");
        let line = span.line as usize;
        assert!(
            (1..=lines).contains(&line),
            "line {line} outside the text's {lines} lines: {rendered}"
        );
        assert!(line >= last, "diagnostics in file order");
        last = line;
    }
    let rendered = |r: &Result<config::Loaded, config::LoadError>| -> Vec<String> {
        match r {
            Ok(l) => l.warnings.iter().map(ToString::to_string).collect(),
            Err(e) => e.diagnostics.iter().map(ToString::to_string).collect(),
        }
    };
    assert_eq!(
        rendered(&load()),
        rendered(&result),
        "deterministic diagnostics"
    );
}
