//! Request and response heads: httparse for the syntax, then our framing and connection rules.
//!
//! This file owns the decision "where does this message's body end", the one place where request
//! smuggling is won or lost (RFC 9112 §6), plus connection persistence (§9.3), `Expect` and the
//! hop-by-hop set. httparse validates the bytes (token names, value bytes, no obs-fold, no space
//! before the colon); we turn its borrowed slices into [`Span`]s so the caller keeps ownership of
//! its read buffer and nothing is allocated.

use std::mem::MaybeUninit;

use super::{
    is_tchar, trim_ows, ErrorKind, H1Error, HeaderKind, HeaderRange, HeaderSlots, Limits, Side,
    Span, Status, Version,
};

/// How the body of a message is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body at all (GET without CL, HEAD responses, 1xx, 204, 304, 2xx to CONNECT).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding, to be forwarded unchanged and validated by [`super::ChunkedDecoder`].
    Chunked,
    /// Until the server closes the connection (responses only).
    CloseDelimited,
}

/// Request methods the codec cares about; the original bytes stay in [`RequestHead::method`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Connect,
    Options,
    Trace,
    Patch,
    Other,
}

impl Method {
    /// Methods are case-sensitive (RFC 9110 §9.1).
    pub fn of(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"CONNECT" => Method::Connect,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }
}

/// Connection semantics of one message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnInfo {
    /// The connection may carry another message after this one (RFC 9112 §9.3): HTTP/1.1 without
    /// `close`, HTTP/1.0 with `keep-alive` and without `close`; never after a close-delimited body.
    pub persistent: bool,
    /// `Connection: close` token seen.
    pub close: bool,
    /// `Connection: keep-alive` token seen.
    pub keep_alive: bool,
    /// `Connection: upgrade` token seen.
    pub upgrade_token: bool,
    /// An `Upgrade` header is present (meaningful only with `upgrade_token`).
    pub upgrade: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request (ignored for HTTP/1.0, RFC 9110 §10.1.1).
    pub expect_continue: bool,
}

/// A parsed request head; every byte range points into the caller's buffer, headers are in the
/// [`HeaderSlots`] passed to [`parse_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub method: Span,
    pub method_kind: Method,
    pub target: Span,
    pub version: Version,
    pub body: BodyKind,
    pub conn: ConnInfo,
}

/// A parsed response head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub version: Version,
    pub status: u16,
    pub reason: Span,
    pub body: BodyKind,
    pub conn: ConnInfo,
    /// 1xx other than 101: the final response is still to come on this connection.
    pub interim: bool,
    /// After this head the connection is a raw tunnel (101, or 2xx to CONNECT).
    pub tunnel: bool,
}

/// Parses a request head at the start of `buf`.
///
/// Contract: `buf` holds bytes received so far (pipelined data after the head is fine: the
/// returned length says where the head ends). Call again from the start with more bytes on
/// [`Status::Partial`]. On `Complete`, `slots.headers()` holds the headers; on error the
/// connection must be answered with `err.status()` and closed. Never allocates, never panics.
pub fn parse_request<const N: usize>(
    buf: &[u8],
    slots: &mut HeaderSlots<N>,
    limits: &Limits,
) -> Result<Status<RequestHead>, H1Error> {
    const SIDE: Side = Side::Request;
    slots.set_len(0);
    let (window, full) = window(buf, limits);
    let max = limits.max_headers.min(N);
    let mut scratch: [MaybeUninit<httparse::Header<'_>>; N] = [const { MaybeUninit::uninit() }; N];
    let mut req = httparse::Request::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req,
        window,
        scratch.get_mut(..max).unwrap_or(&mut []),
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if full => return Err(too_large(window, SIDE)),
        Ok(httparse::Status::Partial) => return Ok(Status::Partial),
        Err(e) => return Err(map_httparse(e, SIDE)),
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(H1Error::new(ErrorKind::StartLine, SIDE));
    };
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let base = window.as_ptr() as usize;
    let method_span = span_of(base, method.as_bytes());
    let target_span = span_of(base, target.as_bytes());
    fill_slots(window, len, req.headers, slots, SIDE)?;
    let headers = slots.headers();

    let framing = framing(window, headers, version, SIDE)?;
    let mut hosts = 0usize;
    let mut expect_continue = false;
    for h in headers {
        match h.kind {
            HeaderKind::Host => hosts += 1,
            HeaderKind::Expect => {
                expect_continue |= h.value.get(window).eq_ignore_ascii_case(b"100-continue")
            }
            _ => {}
        }
    }
    if hosts > 1 {
        return Err(H1Error::new(ErrorKind::DuplicateHost, SIDE));
    }
    if hosts == 0 && version == Version::Http11 {
        return Err(H1Error::new(ErrorKind::MissingHost, SIDE));
    }
    let body = match framing {
        Framing::None => BodyKind::None,
        Framing::Length(n) => BodyKind::Length(n),
        Framing::Chunked => BodyKind::Chunked,
        // Requests are never close-delimited (RFC 9112 §6.3 rule 6): only exactly `chunked`.
        Framing::OtherCodings => return Err(H1Error::new(ErrorKind::BadTransferEncoding, SIDE)),
    };
    let mut conn = mark_connection(window, slots);
    conn.expect_continue = expect_continue && version == Version::Http11;
    conn.persistent = persistent(version, &conn);
    Ok(Status::Complete(
        RequestHead {
            method: method_span,
            method_kind: Method::of(method.as_bytes()),
            target: target_span,
            version,
            body,
            conn,
        },
        len,
    ))
}

/// Parses a response head at the start of `buf`; `request_method` is the method of the request
/// it answers (HEAD and CONNECT change the framing).
///
/// Same contract as [`parse_request`]; errors map to 502.
pub fn parse_response<const N: usize>(
    buf: &[u8],
    slots: &mut HeaderSlots<N>,
    limits: &Limits,
    request_method: Method,
) -> Result<Status<ResponseHead>, H1Error> {
    const SIDE: Side = Side::Response;
    slots.set_len(0);
    let (window, full) = window(buf, limits);
    let max = limits.max_headers.min(N);
    let mut scratch: [MaybeUninit<httparse::Header<'_>>; N] = [const { MaybeUninit::uninit() }; N];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        window,
        scratch.get_mut(..max).unwrap_or(&mut []),
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if full => return Err(too_large(window, SIDE)),
        Ok(httparse::Status::Partial) => return Ok(Status::Partial),
        Err(e) => return Err(map_httparse(e, SIDE)),
    };
    let (Some(minor), Some(code), Some(reason)) = (resp.version, resp.code, resp.reason) else {
        return Err(H1Error::new(ErrorKind::StartLine, SIDE));
    };
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let base = window.as_ptr() as usize;
    let reason_span = if reason.is_empty() {
        Span::EMPTY
    } else {
        span_of(base, reason.as_bytes())
    };
    fill_slots(window, len, resp.headers, slots, SIDE)?;
    let framing = framing(window, slots.headers(), version, SIDE)?;
    let mut conn = mark_connection(window, slots);

    let interim = (100..200).contains(&code) && code != 101;
    let tunnel = code == 101 || (request_method == Method::Connect && (200..300).contains(&code));
    // RFC 9112 §6.3 rules 1 and 2: these never have a body, whatever the headers say (the
    // headers were still validated above, so conflicting framing is still an error).
    let bodiless = request_method == Method::Head
        || (100..200).contains(&code)
        || code == 204
        || code == 304
        || (request_method == Method::Connect && (200..300).contains(&code));
    let body = if bodiless {
        BodyKind::None
    } else {
        match framing {
            Framing::Chunked => BodyKind::Chunked,
            Framing::Length(n) => BodyKind::Length(n),
            Framing::OtherCodings | Framing::None => BodyKind::CloseDelimited,
        }
    };
    conn.persistent = persistent(version, &conn) && body != BodyKind::CloseDelimited && !tunnel;
    Ok(Status::Complete(
        ResponseHead {
            version,
            status: code,
            reason: reason_span,
            body,
            conn,
            interim,
            tunnel,
        },
        len,
    ))
}

/// The part of `buf` a head may occupy, and whether that part is already at the limit.
fn window<'a>(buf: &'a [u8], limits: &Limits) -> (&'a [u8], bool) {
    let cap = limits.max_head.min(u32::MAX as usize);
    match buf.get(..cap) {
        Some(w) => (w, true),
        None => (buf, false),
    }
}

/// The head did not fit: 414 if even the first line did not end, else 431 (requests).
fn too_large(window: &[u8], side: Side) -> H1Error {
    // Leading empty lines are skipped by httparse (RFC 9112 §2.2), skip them here too.
    let mut rest = window;
    while let [b'\r' | b'\n', tail @ ..] = rest {
        rest = tail;
    }
    let kind = if rest.contains(&b'\n') {
        ErrorKind::HeadTooLarge
    } else {
        ErrorKind::UriTooLong
    };
    H1Error::new(kind, side)
}

fn map_httparse(e: httparse::Error, side: Side) -> H1Error {
    let kind = match e {
        httparse::Error::HeaderName => ErrorKind::HeaderName,
        httparse::Error::HeaderValue => ErrorKind::HeaderValue,
        httparse::Error::NewLine => ErrorKind::NewLine,
        httparse::Error::TooManyHeaders => ErrorKind::TooManyHeaders,
        httparse::Error::Status | httparse::Error::Token | httparse::Error::Version => {
            ErrorKind::StartLine
        }
    };
    H1Error::new(kind, side)
}

/// Offset of `part` (a sub-slice of the buffer starting at address `base`) as a [`Span`].
fn span_of(base: usize, part: &[u8]) -> Span {
    // Only addresses are compared, never dereferenced: this is ordinary safe arithmetic.
    let start = (part.as_ptr() as usize).saturating_sub(base);
    let end = start.saturating_add(part.len());
    Span {
        start: u32::try_from(start).unwrap_or(u32::MAX),
        end: u32::try_from(end).unwrap_or(u32::MAX),
    }
}

/// Converts httparse's headers into spans, computes each line's extent and kind.
fn fill_slots<const N: usize>(
    window: &[u8],
    head_len: usize,
    parsed: &[httparse::Header<'_>],
    slots: &mut HeaderSlots<N>,
    side: Side,
) -> Result<usize, H1Error> {
    let base = window.as_ptr() as usize;
    let n = parsed.len().min(N);
    let out = slots.slots_mut();
    for (i, h) in parsed.iter().take(n).enumerate() {
        let name = span_of(base, h.name.as_bytes());
        // httparse gives an empty value a zero-length slice at the start of the (absent) value.
        let value = span_of(base, h.value);
        let kind = HeaderKind::of(h.name.as_bytes());
        if let Some(slot) = out.get_mut(i) {
            *slot = HeaderRange {
                name,
                value,
                line: Span {
                    start: name.start,
                    end: name.start,
                },
                kind,
                hop_by_hop: matches!(
                    kind,
                    HeaderKind::Connection
                        | HeaderKind::KeepAlive
                        | HeaderKind::ProxyConnection
                        | HeaderKind::Te
                ),
            };
        }
    }
    // A line ends where the next one starts, minus its terminator (LF or CRLF). The last
    // header's "next line" is the empty line closing the head.
    let mut next_start = empty_line_start(window, head_len);
    for slot in out.iter_mut().take(n).rev() {
        let end = line_content_end(window, next_start);
        if end < slot.name.end as usize {
            return Err(H1Error::new(ErrorKind::NewLine, side));
        }
        slot.line.end = u32::try_from(end).unwrap_or(u32::MAX);
        next_start = slot.name.start as usize;
    }
    slots.set_len(n);
    Ok(n)
}

/// Start of the empty line that ends a head of `head_len` bytes.
fn empty_line_start(window: &[u8], head_len: usize) -> usize {
    if head_len >= 2 && window.get(head_len - 2) == Some(&b'\r') {
        head_len - 2
    } else {
        head_len.saturating_sub(1)
    }
}

/// Given the start of a line, the end of the previous line's content (before its LF / CRLF).
fn line_content_end(window: &[u8], next_start: usize) -> usize {
    let lf = next_start.saturating_sub(1);
    if lf >= 1 && window.get(lf - 1) == Some(&b'\r') {
        lf - 1
    } else {
        lf
    }
}

/// Raw framing information before the per-side decision.
enum Framing {
    None,
    Length(u64),
    Chunked,
    /// Transfer-Encoding whose final coding is not chunked.
    OtherCodings,
}

/// Largest body length accepted (HAProxy stores lengths as signed 64-bit).
const MAX_LENGTH: u64 = i64::MAX as u64;

/// The anti-smuggling rules of RFC 9112 §6 on Content-Length and Transfer-Encoding.
fn framing(
    buf: &[u8],
    headers: &[HeaderRange],
    version: Version,
    side: Side,
) -> Result<Framing, H1Error> {
    let err = |kind| Err(H1Error::new(kind, side));
    let mut length: Option<u64> = None;
    let mut te_seen = false;
    let mut codings = 0usize;
    let mut chunked_count = 0usize;
    let mut last_is_chunked = false;
    let mut request_ok = true; // every coding so far is a bare `chunked`
    for h in headers {
        if !matches!(
            h.kind,
            HeaderKind::ContentLength | HeaderKind::TransferEncoding
        ) {
            continue;
        }
        if h.line.get(buf).contains(&b'\t') {
            return err(ErrorKind::ObfuscatedFraming);
        }
        let value = h.value.get(buf);
        if h.kind == HeaderKind::ContentLength {
            if value.is_empty() {
                return err(ErrorKind::BadContentLength);
            }
            for elem in value.split(|&b| b == b',') {
                let Some(n) = parse_length(trim_ows(elem)) else {
                    return err(ErrorKind::BadContentLength);
                };
                match length {
                    Some(prev) if prev != n => return err(ErrorKind::ConflictingContentLength),
                    _ => length = Some(n),
                }
            }
            continue;
        }
        te_seen = true;
        for elem in value.split(|&b| b == b',') {
            let elem = trim_ows(elem);
            if elem.is_empty() {
                continue; // RFC 9110 §5.6.1.2: empty list elements are ignored
            }
            let name_len = elem.iter().position(|&b| b == b';').unwrap_or(elem.len());
            let (name, params) = elem.split_at(name_len);
            let name = trim_ows(name);
            if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
                return err(ErrorKind::BadTransferEncoding);
            }
            codings += 1;
            if name.eq_ignore_ascii_case(b"chunked") {
                // chunked takes no parameters and is applied at most once (RFC 9112 §7).
                if !params.is_empty() || chunked_count > 0 {
                    return err(ErrorKind::BadTransferEncoding);
                }
                chunked_count += 1;
                last_is_chunked = true;
            } else {
                if last_is_chunked {
                    // chunked must be the final coding.
                    return err(ErrorKind::BadTransferEncoding);
                }
                request_ok = false;
            }
        }
    }
    if te_seen {
        if version == Version::Http10 {
            return err(ErrorKind::TransferEncodingInHttp10);
        }
        if length.is_some() {
            return err(ErrorKind::LengthAndChunked);
        }
        if codings == 0 {
            return err(ErrorKind::BadTransferEncoding);
        }
        if side == Side::Request && !(request_ok && codings == 1 && last_is_chunked) {
            return err(ErrorKind::BadTransferEncoding);
        }
        return Ok(if last_is_chunked {
            Framing::Chunked
        } else {
            Framing::OtherCodings
        });
    }
    Ok(match length {
        Some(n) => Framing::Length(n),
        None => Framing::None,
    })
}

/// `1*DIGIT`, at most [`MAX_LENGTH`]; no sign, no whitespace.
fn parse_length(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if n > MAX_LENGTH {
            return None;
        }
    }
    Some(n)
}

/// Reads the Connection tokens, flags nominated headers as hop-by-hop, returns the flags.
fn mark_connection<const N: usize>(buf: &[u8], slots: &mut HeaderSlots<N>) -> ConnInfo {
    let mut info = ConnInfo::default();
    let n = slots.headers().len();
    let all = slots.slots_mut();
    for i in 0..n {
        let Some(h) = all.get(i).copied() else { break };
        match h.kind {
            HeaderKind::Upgrade => info.upgrade = true,
            HeaderKind::Connection => {}
            _ => continue,
        }
        if h.kind != HeaderKind::Connection {
            continue;
        }
        for token in h.value.get(buf).split(|&b| b == b',') {
            let token = trim_ows(token);
            if token.is_empty() {
                continue;
            }
            if token.eq_ignore_ascii_case(b"close") {
                info.close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                info.keep_alive = true;
            } else if token.eq_ignore_ascii_case(b"upgrade") {
                info.upgrade_token = true;
            } else {
                for other in all.iter_mut().take(n) {
                    let protected = matches!(
                        other.kind,
                        HeaderKind::Host | HeaderKind::ContentLength | HeaderKind::TransferEncoding
                    );
                    if !protected && other.name.get(buf).eq_ignore_ascii_case(token) {
                        other.hop_by_hop = true;
                    }
                }
            }
        }
    }
    info
}

/// RFC 9112 §9.3 persistence from the version and the Connection tokens.
fn persistent(version: Version, conn: &ConnInfo) -> bool {
    !conn.close && (version == Version::Http11 || conn.keep_alive)
}
