//! An HTTP/2 request as the HTTP/1.1 head the session reads, translated as HAProxy 2.6's
//! `h2_make_htx_request` does.
//!
//! - `:authority` present: the target is the absolute URI `scheme://authority/path` (HAProxy's
//!   "normalized URI": logs and `url` show it, the server receives the path, see
//!   `proto::h1::Fixes::origin_form`), and `Host` is the authority, whatever `host` headers
//!   came (an HTTP/2 desync defence). Without it, the target is `:path` and `host` headers
//!   pass as they came.
//! - The scheme's default port is cut from the authority (`http://h:80/` is `http://h/`),
//!   HAProxy's scheme-based normalisation.
//! - `:path` must start with `/` or be `*`; connection-specific headers (`connection`,
//!   `keep-alive`, `proxy-connection`, `upgrade`, `transfer-encoding`) and a `te` other than
//!   `trailers` are refused: the stream is reset (HAProxy's stream error). The h2 crate refuses
//!   most of these already; they are checked again here, where the rule is written down.
//! - `content-length` must be digits, or a comma-separated list of equal ones, and all such
//!   headers must agree; anything else (an empty value, an empty list element as in `0,`)
//!   resets the stream, as HAProxy's `http_parse_cont_len_header` fails it (the h2 crate takes
//!   an empty value for 0).
//! - `cookie` headers, which HTTP/2 splits, are joined with `"; "` into one at the end.
//! - A body without `content-length` goes out chunked (HAProxy's H1 side adds
//!   `transfer-encoding: chunked`); a request without a body gets no framing header.
//!
//! The version on the line is `HTTP/1.1`: the session parses HTTP/1 and speaks it to the
//! server; it writes `HTTP/2.0` in its log line (`Session::h2`).

use http::request::Parts;
use http::Method;

/// The HTTP/1.1 head of one stream's request.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    pub bytes: Vec<u8>,
    /// The body goes out chunked (no `content-length` came and the stream is still open).
    pub chunked: bool,
    /// A `HEAD` request: the response has no body.
    pub head: bool,
}

/// Why a request is refused with `RST_STREAM(PROTOCOL_ERROR)`.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub &'static str);

/// Translates `parts`; `end_of_stream`: the HEADERS frame ended the stream (no body).
pub fn translate(parts: &Parts, end_of_stream: bool) -> Result<Head, Refused> {
    if parts.method == Method::CONNECT {
        return Err(Refused("CONNECT is not supported over HTTP/2"));
    }
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .ok_or(Refused("missing :path"))?;
    if !(path.starts_with('/') || path == "*") {
        return Err(Refused(":path is neither an absolute path nor '*'"));
    }
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    let authority = parts.uri.authority().map(|a| a.as_str());
    let host = match (authority, parts.uri.scheme_str()) {
        (Some(a), Some(scheme)) => {
            let a = without_default_port(scheme, a);
            out.extend_from_slice(scheme.as_bytes());
            out.extend_from_slice(b"://");
            out.extend_from_slice(a.as_bytes());
            if path != "*" {
                out.extend_from_slice(path.as_bytes());
            }
            Some(a)
        }
        _ => {
            out.extend_from_slice(path.as_bytes());
            None
        }
    };
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(h) = host {
        line(&mut out, b"host", h.as_bytes());
    }
    let mut cookie: Option<Vec<u8>> = None;
    let mut length: Option<u64> = None;
    for (name, value) in &parts.headers {
        let n = name.as_str();
        match n {
            "connection" | "proxy-connection" | "keep-alive" | "upgrade" | "transfer-encoding" => {
                return Err(Refused("connection-specific header"));
            }
            "te" if value.as_bytes() != b"trailers" => {
                return Err(Refused("te other than trailers"));
            }
            "host" if host.is_some() => continue,
            "content-length" => {
                let n =
                    content_length(value.as_bytes()).ok_or(Refused("invalid content-length"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(Refused("content-length values differ"));
                }
                length = Some(n);
            }
            "cookie" => {
                match &mut cookie {
                    Some(c) => {
                        c.extend_from_slice(b"; ");
                        c.extend_from_slice(value.as_bytes());
                    }
                    None => cookie = Some(value.as_bytes().to_vec()),
                }
                continue;
            }
            _ => {}
        }
        line(&mut out, n.as_bytes(), value.as_bytes());
    }
    if let Some(c) = cookie {
        line(&mut out, b"cookie", &c);
    }
    let chunked = !end_of_stream && length.is_none();
    if chunked {
        line(&mut out, b"transfer-encoding", b"chunked");
    }
    out.extend_from_slice(b"\r\n");
    Ok(Head {
        bytes: out,
        chunked,
        head: parts.method == Method::HEAD,
    })
}

/// A `content-length` value: one length, or a list of equal ones, each digits between optional
/// blanks; `None` for anything else (empty value or element, other characters, overflow,
/// lengths that differ).
fn content_length(value: &[u8]) -> Option<u64> {
    let mut length = None;
    for word in value.split(|&b| b == b',') {
        let word = word.trim_ascii();
        if word.is_empty() || !word.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = std::str::from_utf8(word).ok()?.parse::<u64>().ok()?;
        if length.is_some_and(|l| l != n) {
            return None;
        }
        length = Some(n);
    }
    length
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// `authority` without its port when that is the scheme's default (`:80` for http, `:443`
/// for https), as HAProxy's `http_scheme_based_normalize` cuts it.
fn without_default_port<'a>(scheme: &str, authority: &'a str) -> &'a str {
    let digits = authority
        .bytes()
        .rev()
        .take_while(u8::is_ascii_digit)
        .count();
    let (rest, port) = authority.split_at(authority.len() - digits);
    let Some(host) = rest.strip_suffix(':') else {
        return authority;
    };
    let default = if scheme.eq_ignore_ascii_case("http") {
        "80"
    } else if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        return authority;
    };
    if port == default {
        host
    } else {
        authority
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn text(h: &Head) -> String {
        String::from_utf8(h.bytes.clone()).unwrap()
    }

    #[test]
    fn authority_makes_an_absolute_target_and_the_host() {
        let p = parts(
            "GET",
            "http://hostname/a?b",
            &[("host", "other"), ("x", "1")],
        );
        let h = translate(&p, true).unwrap();
        assert_eq!(
            text(&h),
            "GET http://hostname/a?b HTTP/1.1\r\nhost: hostname\r\nx: 1\r\n\r\n"
        );
        assert!(!h.chunked && !h.head);
    }

    #[test]
    fn without_authority_the_path_and_host_headers_pass() {
        let p = parts("HEAD", "/x", &[("host", "h")]);
        let h = translate(&p, true).unwrap();
        assert_eq!(text(&h), "HEAD /x HTTP/1.1\r\nhost: h\r\n\r\n");
        assert!(h.head);
    }

    #[test]
    fn default_ports_are_cut_others_kept() {
        for (uri, target, host) in [
            ("http://h:80/", "http://h/", "h"),
            ("http://h:8080/", "http://h:8080/", "h:8080"),
            ("https://h:443/", "https://h/", "h"),
            ("https://h:80/", "https://h:80/", "h:80"),
            ("http://[::1]:80/", "http://[::1]/", "[::1]"),
        ] {
            let h = translate(&parts("GET", uri, &[]), true).unwrap();
            assert_eq!(
                text(&h),
                format!("GET {target} HTTP/1.1\r\nhost: {host}\r\n\r\n"),
                "{uri}"
            );
        }
    }

    #[test]
    fn cookies_are_joined_at_the_end() {
        let p = parts(
            "GET",
            "/",
            &[("cookie", "c1=foo"), ("a", "b"), ("cookie", "c2=bar")],
        );
        let h = translate(&p, true).unwrap();
        assert_eq!(
            text(&h),
            "GET / HTTP/1.1\r\na: b\r\ncookie: c1=foo; c2=bar\r\n\r\n"
        );
    }

    #[test]
    fn a_body_without_length_is_chunked() {
        let h = translate(&parts("POST", "/", &[]), false).unwrap();
        assert!(h.chunked);
        assert!(text(&h).ends_with("transfer-encoding: chunked\r\n\r\n"));
        let h = translate(&parts("POST", "/", &[("content-length", "3")]), false).unwrap();
        assert!(!h.chunked);
        let h = translate(&parts("POST", "/", &[]), true).unwrap();
        assert_eq!(text(&h), "POST / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn content_length_must_be_digits_and_agree() {
        for ok in ["0", "12", " 2 ", "2, 2", "2,2,2"] {
            let p = parts("POST", "/", &[("content-length", ok)]);
            assert!(translate(&p, false).is_ok(), "{ok:?}");
        }
        for bad in [
            "",
            " ",
            "0,",
            ",0",
            "1,2",
            "1 2",
            "+1",
            "-1",
            "0x1",
            "99999999999999999999",
        ] {
            let p = parts("POST", "/", &[("content-length", bad)]);
            assert!(translate(&p, false).is_err(), "{bad:?}");
        }
        let p = parts(
            "POST",
            "/",
            &[("content-length", "2"), ("content-length", "2")],
        );
        assert!(translate(&p, false).is_ok());
        let p = parts(
            "POST",
            "/",
            &[("content-length", "2"), ("content-length", "3")],
        );
        assert!(translate(&p, false).is_err());
    }

    #[test]
    fn bad_paths_and_connection_headers_are_refused() {
        assert!(translate(&parts("GET", "*", &[]), true).is_ok());
        for h in ["connection", "keep-alive", "upgrade", "transfer-encoding"] {
            assert!(
                translate(&parts("GET", "/", &[(h, "x")]), true).is_err(),
                "{h}"
            );
        }
        assert!(translate(&parts("GET", "/", &[("te", "gzip")]), true).is_err());
        assert!(translate(&parts("GET", "/", &[("te", "trailers")]), true).is_ok());
    }
}
