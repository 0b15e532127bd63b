//! Sans-IO HTTP/1.x codec: head parsing, framing decision, body decoding and head writing.
//!
//! This module owns the vocabulary shared by its parts ([`Span`], [`HeaderRange`],
//! [`HeaderSlots`], [`Limits`], [`H1Error`]); the parts own one job each:
//! `head` (request/response heads, framing, connection semantics), `body` (Content-Length and
//! chunked decoders), `write` (forwarded heads and HAProxy-style error responses).
//! It exists so that the HTTP engine never looks at raw bytes itself, and so that every framing
//! decision an attacker can influence (request smuggling) is made in one place, tested in one table.
//!
//! # Public API at a glance
//!
//! ```text
//! // Once per connection (no allocation afterwards):
//! let limits = Limits::default();            // tune.bufsize - tune.maxrewrite, tune.http.maxhdr
//! let mut slots = HeaderSlots::<101>::new(); // caller-owned, fixed capacity
//!
//! // Heads: the buffer stays the caller's; results are offsets into it.
//! parse_request(buf: &[u8], slots: &mut HeaderSlots<N>, limits: &Limits)
//!     -> Result<Status<RequestHead>, H1Error>
//! parse_response(buf: &[u8], slots: &mut HeaderSlots<N>, limits: &Limits, request_method: Method)
//!     -> Result<Status<ResponseHead>, H1Error>
//! // Status::Complete(head, consumed_len) | Status::Partial (read more, call again from the start)
//! // slots.headers() -> &[HeaderRange]  (name / value / line spans, kind, hop-by-hop flag)
//! // span.get(buf) -> &[u8]
//!
//! // Bodies: head.body is BodyKind::{None, Length(n), Chunked, CloseDelimited}
//! let mut dec = BodyDecoder::new(head.body, &limits, Side::Request);
//! dec.feed(input: &[u8]) -> Result<Progress, H1Error>
//! // Progress { consumed, data: Range<usize> (payload inside input), done }
//! // Forward input[..consumed] unchanged (pass-through), call again with the rest.
//! // ChunkedDecoder / LengthDecoder are usable directly too.
//!
//! // Writing (into a caller buffer, never allocating):
//! write_request_head(buf, &head, slots.headers(), &Rewrite, out: &mut [u8]) -> Result<usize, H1Error>
//! write_response_head(buf, &head, slots.headers(), &Rewrite, out: &mut [u8]) -> Result<usize, H1Error>
//! error_response(status: u16) -> &'static [u8]   // HAProxy 2.6 texts, 400 403 408 500 502 503 504 …
//! format_ip(ip, &mut [u8; 45]) -> &[u8]          // for X-Forwarded-For without allocation
//!
//! // Errors: one struct, one mapping to HTTP status.
//! H1Error { kind: ErrorKind, side: Side }.status() -> u16   // 400/414/431 client, 502 server, 500 internal
//! ```
//!
//! # Decisions on ambiguous input (RFC 9112 / RFC 9110), summarised
//!
//! * Bare LF as a line terminator in heads is accepted (RFC 9112 §2.2 allows it, httparse and
//!   HAProxy accept it), but the writer re-terminates every forwarded line with CRLF, so a server
//!   never sees a bare LF from us. A CR not followed by LF is an error. Chunk-size lines, chunk data
//!   terminators and trailers require strict CRLF (they are forwarded unchanged).
//! * Obs-fold (continuation lines), whitespace before the colon, NUL/CR/control bytes in names or
//!   values: rejected (400 on requests, 502 on responses).
//! * Both Content-Length and Transfer-Encoding: rejected on both sides (RFC 9112 §6.1 lets a
//!   server drop CL; HAProxy 2.6 does and then closes, we refuse: stricter, simpler).
//! * Several Content-Length values (headers or comma list): merged when all identical, else
//!   rejected; empty, signed, non-digit or > 2^63-1 values are rejected; empty list elements too.
//! * Transfer-Encoding in requests must be exactly one `chunked` coding (case-insensitive, empty
//!   list elements ignored); anything else (`gzip, chunked`, `chunked, identity`, `identity`,
//!   `xchunked`, `chunked;x`, chunked twice) → 400. In responses `chunked` must be last and
//!   appear once; a final coding other than chunked means close-delimited (RFC 9112 §6.3 rule 4).
//! * HTAB anywhere in a Content-Length or Transfer-Encoding line is rejected: RFC-valid OWS, but a
//!   known TE.TE obfuscation that some servers mis-handle, and no real client sends it.
//! * HTTP/1.0 message with Transfer-Encoding: rejected (RFC 9112 §6.1 "faulty framing").
//! * HTTP/1.1 request without Host, or any request with several Host headers: 400.
//! * `Connection` may nominate extra hop-by-hop headers; nominating Host, Content-Length or
//!   Transfer-Encoding is ignored (never strip framing because a client asked to).
//! * `Trailer` is not hop-by-hop (RFC 9110 §6.6.2); TE, Keep-Alive, Proxy-Connection, Connection
//!   and Upgrade (unless the caller keeps it for a tunnel) are.

mod body;
mod head;
mod write;

pub use body::{BodyDecoder, ChunkedDecoder, ChunkedState, LengthDecoder, Progress};
pub use head::{
    parse_request, parse_response, BodyKind, ConnInfo, Method, RequestHead, ResponseHead,
};
pub use write::{error_response, format_ip, write_request_head, write_response_head, Rewrite};

use std::fmt;

/// HAProxy's `tune.http.maxhdr` default: the number of header slots most callers want.
pub const DEFAULT_MAX_HEADERS: usize = 101;

/// A byte range `start..end` inside the buffer a head was parsed from.
///
/// `u32` keeps a [`HeaderRange`] at 28 bytes; heads are bounded by [`Limits::max_head`], far below
/// 4 GiB, and the parser clamps to `u32::MAX` anyway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub const EMPTY: Span = Span { start: 0, end: 0 };

    /// The bytes of this span in `buf`; empty if the span does not fit (never panics).
    pub fn get<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        buf.get(self.start as usize..self.end as usize)
            .unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Headers the codec recognises, so the engine never compares names again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderKind {
    Other,
    Host,
    ContentLength,
    TransferEncoding,
    Connection,
    KeepAlive,
    ProxyConnection,
    Te,
    Upgrade,
    Expect,
    Trailer,
}

impl HeaderKind {
    /// Classifies a header name, case-insensitively.
    pub fn of(name: &[u8]) -> HeaderKind {
        const TABLE: [(&[u8], HeaderKind); 10] = [
            (b"host", HeaderKind::Host),
            (b"content-length", HeaderKind::ContentLength),
            (b"transfer-encoding", HeaderKind::TransferEncoding),
            (b"connection", HeaderKind::Connection),
            (b"keep-alive", HeaderKind::KeepAlive),
            (b"proxy-connection", HeaderKind::ProxyConnection),
            (b"te", HeaderKind::Te),
            (b"upgrade", HeaderKind::Upgrade),
            (b"expect", HeaderKind::Expect),
            (b"trailer", HeaderKind::Trailer),
        ];
        for (n, k) in TABLE {
            if n.len() == name.len() && n.eq_ignore_ascii_case(name) {
                return k;
            }
        }
        HeaderKind::Other
    }
}

/// One header line, as offsets into the buffer it was parsed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderRange {
    /// The field name, exactly as received (case preserved).
    pub name: Span,
    /// The field value, leading and trailing whitespace trimmed.
    pub value: Span,
    /// The whole line from the name to just before its CRLF or LF: what the writer copies.
    pub line: Span,
    pub kind: HeaderKind,
    /// True when the header must not be forwarded by a proxy: Connection, Keep-Alive,
    /// Proxy-Connection, TE, or a name listed in a Connection header. `Upgrade` is not flagged
    /// here: the writer drops it unless [`Rewrite::keep_upgrade`] is set.
    pub hop_by_hop: bool,
}

impl HeaderRange {
    pub const EMPTY: HeaderRange = HeaderRange {
        name: Span::EMPTY,
        value: Span::EMPTY,
        line: Span::EMPTY,
        kind: HeaderKind::Other,
        hop_by_hop: false,
    };
}

/// Caller-owned, fixed-capacity storage for the headers of one head.
///
/// Allocate once per connection (or embed in the connection struct) and reuse for every message:
/// parsing never allocates. `N` is the hard maximum; [`Limits::max_headers`] may lower it at run
/// time (HAProxy's `tune.http.maxhdr`). Parsing uses a stack scratch array of `N` httparse headers
/// (32 bytes each), so keep `N` in the hundreds, not the tens of thousands.
#[derive(Clone, Debug)]
pub struct HeaderSlots<const N: usize = DEFAULT_MAX_HEADERS> {
    slots: [HeaderRange; N],
    len: usize,
}

impl<const N: usize> HeaderSlots<N> {
    pub fn new() -> Self {
        HeaderSlots {
            slots: [HeaderRange::EMPTY; N],
            len: 0,
        }
    }

    /// The headers of the last successfully parsed head (empty after a partial or an error).
    pub fn headers(&self) -> &[HeaderRange] {
        self.slots.get(..self.len).unwrap_or(&[])
    }

    pub(crate) fn slots_mut(&mut self) -> &mut [HeaderRange; N] {
        &mut self.slots
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(N);
    }
}

impl<const N: usize> Default for HeaderSlots<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Hard limits, from the configuration. Checked before any work that they bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest head (request/status line + headers + empty line) accepted, in bytes.
    /// HAProxy: `tune.bufsize - tune.maxrewrite` = 16384 - 1024.
    pub max_head: usize,
    /// Largest number of header lines (HAProxy `tune.http.maxhdr`); capped by the slots' `N`.
    pub max_headers: usize,
    /// Largest total size of a chunked body's trailer section, in bytes.
    pub max_trailers: usize,
    /// Largest chunk extension (`;name=value...`) on one chunk-size line, in bytes.
    pub max_chunk_ext: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 16384 - 1024,
            max_headers: DEFAULT_MAX_HEADERS,
            max_trailers: 16384 - 1024,
            max_chunk_ext: 1024,
        }
    }
}

/// HTTP/1.x minor version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

impl Version {
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Version::Http10 => b"HTTP/1.0",
            Version::Http11 => b"HTTP/1.1",
        }
    }
}

/// Result of parsing a head from a buffer that may not hold all of it yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status<T> {
    /// The head is complete; the `usize` is its length (the body starts there).
    Complete(T, usize),
    /// More bytes are needed; call again with the same buffer grown.
    Partial,
}

/// Which peer produced the faulty bytes (decides the status code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The client sent it: 4xx.
    Request,
    /// The server sent it: 502.
    Response,
    /// Our own fault (e.g. output buffer too small): 500.
    Internal,
}

/// What went wrong, precisely enough for logs and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request line did not end within `max_head` (414).
    UriTooLong,
    /// The head did not end within `max_head` (431 on requests).
    HeadTooLarge,
    /// More header lines than allowed (431 on requests).
    TooManyHeaders,
    /// Malformed start line (method, target, version or status).
    StartLine,
    /// Invalid header name: bad byte, space before the colon, obs-fold, missing colon.
    HeaderName,
    /// Invalid header value byte (control character, NUL, lone CR).
    HeaderValue,
    /// Line terminator error (CR without LF).
    NewLine,
    /// Content-Length empty, signed, non-digit, overflowing or with empty list elements.
    BadContentLength,
    /// Several Content-Length values that differ.
    ConflictingContentLength,
    /// Both Content-Length and Transfer-Encoding.
    LengthAndChunked,
    /// Transfer-Encoding not acceptable (see the module doc for the exact rule).
    BadTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 message.
    TransferEncodingInHttp10,
    /// HTAB in a Content-Length or Transfer-Encoding line (obfuscation).
    ObfuscatedFraming,
    /// HTTP/1.1 request without Host.
    MissingHost,
    /// Several Host headers.
    DuplicateHost,
    /// Chunk size not hex, empty, preceded by whitespace, or larger than 2^63-1.
    BadChunkSize,
    /// Chunk extension too long or containing invalid bytes.
    BadChunkExtension,
    /// Missing CRLF after a chunk-size line or chunk data.
    BadChunkTerminator,
    /// Trailer section malformed.
    BadTrailer,
    /// Trailer section larger than `max_trailers`.
    TrailersTooLarge,
    /// The output buffer given to a writer is too small.
    OutputTooSmall,
}

/// The data-path error of this codec: a kind and the side it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct H1Error {
    pub kind: ErrorKind,
    pub side: Side,
}

impl H1Error {
    pub const fn new(kind: ErrorKind, side: Side) -> Self {
        H1Error { kind, side }
    }

    /// The one mapping from codec errors to the HTTP status sent to the client.
    pub fn status(&self) -> u16 {
        match self.side {
            Side::Internal => 500,
            Side::Response => 502,
            Side::Request => match self.kind {
                ErrorKind::UriTooLong => 414,
                ErrorKind::HeadTooLarge | ErrorKind::TooManyHeaders => 431,
                ErrorKind::OutputTooSmall => 500,
                _ => 400,
            },
        }
    }

    /// The HAProxy-style response to send for this error.
    pub fn response(&self) -> &'static [u8] {
        error_response(self.status())
    }
}

impl fmt::Display for H1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Request => "request",
            Side::Response => "response",
            Side::Internal => "internal",
        };
        write!(
            f,
            "invalid HTTP/1 {side}: {:?} ({})",
            self.kind,
            self.status()
        )
    }
}

impl std::error::Error for H1Error {}

/// Trims leading and trailing SP/HTAB.
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// RFC 9110 tchar.
pub(crate) fn is_tchar(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9'
        | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+'
        | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// Field-value byte: HTAB, SP, VCHAR, obs-text.
pub(crate) fn is_value_byte(b: u8) -> bool {
    b == b'\t' || (b' '..=0x7e).contains(&b) || b >= 0x80
}

#[cfg(test)]
mod tests;
