//! Writing heads to forward, and HAProxy's built-in error responses.
//!
//! This file owns the bytes we put on the wire for a head. Forwarded heads are rebuilt from the
//! parsed spans: the start line from its parts, every kept header line copied byte-for-byte (case,
//! order and spacing preserved) and re-terminated with CRLF, hop-by-hop headers skipped, extra
//! headers appended. Nothing is re-encoded and nothing is allocated: the output is a caller slice.

use std::io::Write as _;
use std::net::IpAddr;

use super::{ErrorKind, H1Error, HeaderKind, HeaderRange, RequestHead, ResponseHead, Side};

/// How to transform a head while forwarding it.
#[derive(Clone, Copy, Debug)]
pub struct Rewrite<'a> {
    /// Drop Connection, Keep-Alive, Proxy-Connection, TE and headers nominated by Connection.
    pub strip_hop_by_hop: bool,
    /// Keep the `Upgrade` header (tunnel or WebSocket being set up); dropped otherwise when
    /// `strip_hop_by_hop` is set. Re-add `Connection: upgrade` through `connection`.
    pub keep_upgrade: bool,
    /// Extra header names to drop, case-insensitive (e.g. an incoming `X-Forwarded-For` when
    /// `option forwardfor` is not `if-none`).
    pub remove: &'a [&'a [u8]],
    /// Headers appended after the kept ones, as `name: value`.
    pub add: &'a [(&'a [u8], &'a [u8])],
    /// If set, a `connection: <value>` header is appended (e.g. `close`, `keep-alive`, `upgrade`).
    pub connection: Option<&'a [u8]>,
}

impl Default for Rewrite<'_> {
    fn default() -> Self {
        Rewrite {
            strip_hop_by_hop: true,
            keep_upgrade: false,
            remove: &[],
            add: &[],
            connection: None,
        }
    }
}

/// Writes `method SP target SP version CRLF`, the kept headers, `rw.add`, and the empty line.
///
/// Contract: `buf` and `headers` are those the head was parsed from. Returns the number of bytes
/// written to `out`, or an [`ErrorKind::OutputTooSmall`] internal error (nothing usable written).
pub fn write_request_head(
    buf: &[u8],
    head: &RequestHead,
    headers: &[HeaderRange],
    rw: &Rewrite<'_>,
    out: &mut [u8],
) -> Result<usize, H1Error> {
    let mut w = Out::new(out);
    w.put(head.method.get(buf))?;
    w.put(b" ")?;
    w.put(head.target.get(buf))?;
    w.put(b" ")?;
    w.put(head.version.as_bytes())?;
    w.put(b"\r\n")?;
    write_fields(&mut w, buf, headers, rw)?;
    Ok(w.pos)
}

/// Writes `version SP status SP reason CRLF`, the kept headers, `rw.add`, and the empty line.
///
/// Same contract as [`write_request_head`].
pub fn write_response_head(
    buf: &[u8],
    head: &ResponseHead,
    headers: &[HeaderRange],
    rw: &Rewrite<'_>,
    out: &mut [u8],
) -> Result<usize, H1Error> {
    let mut w = Out::new(out);
    w.put(head.version.as_bytes())?;
    w.put(b" ")?;
    let code = head.status.min(999);
    w.put(&[
        b'0' + (code / 100) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
    ])?;
    w.put(b" ")?;
    w.put(head.reason.get(buf))?;
    w.put(b"\r\n")?;
    write_fields(&mut w, buf, headers, rw)?;
    Ok(w.pos)
}

fn write_fields(
    w: &mut Out<'_>,
    buf: &[u8],
    headers: &[HeaderRange],
    rw: &Rewrite<'_>,
) -> Result<(), H1Error> {
    for h in headers {
        if rw.strip_hop_by_hop
            && (h.hop_by_hop || (h.kind == HeaderKind::Upgrade && !rw.keep_upgrade))
        {
            continue;
        }
        let name = h.name.get(buf);
        if rw.remove.iter().any(|r| r.eq_ignore_ascii_case(name)) {
            continue;
        }
        w.put(h.line.get(buf))?;
        w.put(b"\r\n")?;
    }
    for (name, value) in rw.add {
        w.put(name)?;
        w.put(b": ")?;
        w.put(value)?;
        w.put(b"\r\n")?;
    }
    if let Some(value) = rw.connection {
        w.put(b"connection: ")?;
        w.put(value)?;
        w.put(b"\r\n")?;
    }
    w.put(b"\r\n")
}

/// A bounded cursor over the caller's output slice.
struct Out<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl<'a> Out<'a> {
    fn new(out: &'a mut [u8]) -> Self {
        Out { out, pos: 0 }
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), H1Error> {
        let end = self.pos.checked_add(bytes.len());
        match end.and_then(|end| self.out.get_mut(self.pos..end)) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.pos += bytes.len();
                Ok(())
            }
            None => Err(H1Error::new(ErrorKind::OutputTooSmall, Side::Internal)),
        }
    }
}

/// Formats an IP address (for `X-Forwarded-For`) into `scratch` without allocating.
/// 45 bytes hold the longest IPv6 text form (`ffff:…:255.255.255.255`).
pub fn format_ip(ip: IpAddr, scratch: &mut [u8; 45]) -> &[u8] {
    let total = scratch.len();
    let mut cursor: &mut [u8] = &mut scratch[..];
    let written = match write!(cursor, "{ip}") {
        Ok(()) => total - cursor.len(),
        Err(_) => 0,
    };
    scratch.get(..written).unwrap_or(&[])
}

/// HAProxy 2.6's built-in error responses, byte for byte as it sends them after its HTX layer
/// (lower-case names, `connection: close` last). 414 and 431 do not exist in HAProxy 2.6 (it
/// answers 400); they are written in the same style with RFC 9110 reason phrases.
mod texts {
    pub const E400: &[u8] = b"HTTP/1.1 400 Bad request\r\ncontent-length: 90\r\ncache-control: no-cache\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n<html><body><h1>400 Bad request</h1>\nYour browser sent an invalid request.\n</body></html>\n";
    pub const E403: &[u8] = b"HTTP/1.1 403 Forbidden\r\ncontent-length: 93\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>403 Forbidden</h1>\nRequest forbidden by administrative rules.\n</body></html>\n";
    pub const E408: &[u8] = b"HTTP/1.1 408 Request Time-out\r\ncontent-length: 110\r\ncache-control: no-cache\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n<html><body><h1>408 Request Time-out</h1>\nYour browser didn't send a complete request in time.\n</body></html>\n";
    pub const E413: &[u8] = b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 106\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>413 Payload Too Large</h1>\nThe request entity exceeds the maximum allowed.\n</body></html>\n";
    pub const E414: &[u8] = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 82\r\ncache-control: no-cache\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n<html><body><h1>414 URI Too Long</h1>\nThe request URI is too long.\n</body></html>\n";
    pub const E431: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 107\r\ncache-control: no-cache\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n<html><body><h1>431 Request Header Fields Too Large</h1>\nThe request headers are too large.\n</body></html>\n";
    pub const E500: &[u8] = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 97\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>500 Internal Server Error</h1>\nAn internal server error occurred.\n</body></html>\n";
    pub const E502: &[u8] = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 107\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>502 Bad Gateway</h1>\nThe server returned an invalid or incomplete response.\n</body></html>\n";
    pub const E503: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 107\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>\n";
    pub const E504: &[u8] = b"HTTP/1.1 504 Gateway Time-out\r\ncontent-length: 92\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>504 Gateway Time-out</h1>\nThe server didn't respond in time.\n</body></html>\n";
}

/// The complete response (head and body) to send for an error status; unknown statuses get the
/// 500 text. 400, 408, 414 and 431 carry `connection: close`: the request stream is unusable.
pub fn error_response(status: u16) -> &'static [u8] {
    match status {
        400 => texts::E400,
        403 => texts::E403,
        408 => texts::E408,
        413 => texts::E413,
        414 => texts::E414,
        431 => texts::E431,
        502 => texts::E502,
        503 => texts::E503,
        504 => texts::E504,
        _ => texts::E500,
    }
}
