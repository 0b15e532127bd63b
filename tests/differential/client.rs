//! The client side of a case: send bytes, read until the proxy goes quiet or closes, and split
//! what arrived into responses with a parser of its own that also notes anything ambiguous.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Silence after a complete response before the client decides nothing more is coming.
const QUIET_DONE: Duration = Duration::from_millis(180);
/// Silence with nothing (or only part of a response) received.
const QUIET_WAITING: Duration = Duration::from_millis(700);
const READ_CAP: Duration = Duration::from_secs(4);

/// One response as the client parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resp {
    pub status: u16,
    /// How the body was delimited: `cl=N`, `chunked`, `close`, `none`.
    pub framing: String,
    pub body: usize,
    /// Something a strict client would not accept, or would read differently from another.
    pub ambiguous: Option<String>,
    /// The connection closed before the body's end (the server's truncation, passed on).
    pub truncated: bool,
}

impl Resp {
    pub fn describe(&self) -> String {
        let mut s = format!("{} {} body={}", self.status, self.framing, self.body);
        if self.truncated {
            s.push_str(" TRUNCATED");
        }
        if let Some(a) = &self.ambiguous {
            s.push_str(&format!(" AMBIGUOUS({a})"));
        }
        s
    }
}

/// What the client got on one connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Got {
    pub responses: Vec<Resp>,
    /// Bytes after the last response that do not parse as one (or an unfinished response).
    pub trailing: Option<String>,
    pub closed: bool,
}

pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(3),
    )
    .expect("connect to the proxy");
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Writes `bytes` (a proxy that closes early may refuse the rest: that is not an error here).
pub fn send(s: &mut TcpStream, bytes: &[u8]) {
    let _ = s.write_all(bytes);
}

/// What the client asked, as far as reading the answer depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Other,
    /// The first request was HEAD: its response has no body.
    Head,
    /// The first request was CONNECT: a 2xx answer has no body and starts a tunnel.
    Connect,
}

impl Asked {
    pub fn of(request: &[u8]) -> Asked {
        if request.starts_with(b"HEAD ") {
            Asked::Head
        } else if request.starts_with(b"CONNECT ") {
            Asked::Connect
        } else {
            Asked::Other
        }
    }
}

/// Reads until the connection closes or stays quiet; `asked` is the first request's kind and
/// `http10` whether it was an HTTP/1.0 request.
pub fn read_responses(s: &mut TcpStream, asked: Asked, http10: bool) -> Got {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let start = Instant::now();
    let mut last = start;
    let mut closed = false;
    loop {
        match s.read(&mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                last = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let (_, rest, _) = parse_all(&buf, asked, http10, false);
                let quiet = if !buf.is_empty() && rest.is_empty() {
                    QUIET_DONE
                } else {
                    QUIET_WAITING
                };
                if last.elapsed() >= quiet || start.elapsed() >= READ_CAP {
                    break;
                }
            }
            Err(_) => {
                // A reset: the connection is gone.
                closed = true;
                break;
            }
        }
    }
    let (responses, rest, partial) = parse_all(&buf, asked, http10, closed);
    let trailing = if rest.is_empty() {
        None
    } else if partial {
        Some(format!("unfinished response ({} bytes)", rest.len()))
    } else if is_http2_settings(rest) {
        // The client's bytes were the HTTP/2 preface and the proxy switched to HTTP/2: what it
        // offers in its SETTINGS is no HTTP/1 matter.
        Some("an HTTP/2 SETTINGS frame".to_string())
    } else {
        Some(format!(
            "unparsable bytes {}",
            crate::corpus::escape(rest, 40)
        ))
    };
    Got {
        responses,
        trailing,
        closed,
    }
}

/// Whether `b` starts with an HTTP/2 SETTINGS frame on stream 0 (type 4, not an ACK).
fn is_http2_settings(b: &[u8]) -> bool {
    b.len() >= 9 && b[3] == 4 && b[4] == 0 && b[5..9] == [0, 0, 0, 0]
}

/// Closes a client connection (both ways).
pub fn close(s: TcpStream) {
    let _ = s.shutdown(Shutdown::Both);
}

/// Splits `buf` into responses; returns them, the unparsed rest, and whether that rest looks
/// like the start of a response. `eof`: the connection closed, so a close-delimited body ends.
fn parse_all(buf: &[u8], asked: Asked, http10: bool, eof: bool) -> (Vec<Resp>, &[u8], bool) {
    let mut out = Vec::new();
    let mut at = 0;
    let mut asked = asked;
    while at < buf.len() {
        match parse_response(&buf[at..], asked, http10, eof) {
            One::Done(r, used) => {
                let interim = (100..200).contains(&r.status) && r.status != 101;
                out.push(r);
                at += used;
                if !interim {
                    asked = Asked::Other;
                }
            }
            One::Incomplete => return (out, &buf[at..], true),
            One::Garbage => return (out, &buf[at..], false),
        }
    }
    (out, &buf[at..], false)
}

enum One {
    Done(Resp, usize),
    Incomplete,
    Garbage,
}

/// The length of the head at the start of `b`: up to the first empty line, where a line ends
/// with LF, CRLF accepted. `None`: no empty line yet.
fn head_end(b: &[u8]) -> Option<usize> {
    let mut start = 0;
    while let Some(p) = b[start..].iter().position(|&c| c == b'\n') {
        let line = &b[start..start + p];
        start += p + 1;
        if line.is_empty() || line == b"\r" {
            return Some(start);
        }
    }
    None
}

fn parse_response(b: &[u8], asked: Asked, http10: bool, eof: bool) -> One {
    let may_be_http = b.starts_with(b"HTTP/") || (b.len() < 5 && b"HTTP/".starts_with(b));
    if !may_be_http {
        return One::Garbage;
    }
    match head_end(b) {
        Some(n) => finish(b, n, asked, http10, eof),
        None => One::Incomplete,
    }
}

fn finish(b: &[u8], head_len: usize, asked: Asked, http10: bool, eof: bool) -> One {
    let head = &b[..head_len];
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let status_line = lines.next().unwrap_or("");
    let Some(status) = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
    else {
        return One::Garbage;
    };
    let mut ambiguous: Vec<String> = Vec::new();
    let mut truncated = false;
    if head
        .iter()
        .enumerate()
        .any(|(i, &c)| c == b'\n' && (i == 0 || head[i - 1] != b'\r'))
    {
        ambiguous.push("bare LF".into());
    }
    if head
        .iter()
        .enumerate()
        .any(|(i, &c)| c == b'\r' && head.get(i + 1) != Some(&b'\n'))
    {
        ambiguous.push("bare CR".into());
    }
    let mut cl: Vec<String> = Vec::new();
    let mut te: Vec<String> = Vec::new();
    for l in lines.filter(|l| !l.is_empty()) {
        if l.starts_with([' ', '\t']) {
            ambiguous.push("obs-fold".into());
            continue;
        }
        let Some((name, value)) = l.split_once(':') else {
            ambiguous.push("header without colon".into());
            continue;
        };
        if name.ends_with([' ', '\t']) {
            ambiguous.push("space before colon".into());
        } else if name.is_empty()
            || !name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
        {
            ambiguous.push(format!("header name {name:?}"));
        }
        if value.bytes().any(|c| (c < 0x20 && c != b'\t') || c == 0x7f) {
            ambiguous.push(format!("control byte in header {name:?}"));
        }
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => cl.push(value.trim().to_string()),
            "transfer-encoding" => te.push(value.trim().to_ascii_lowercase()),
            _ => {}
        }
    }
    if cl.len() > 1 {
        ambiguous.push(format!("{} Content-Length", cl.len()));
    }
    if !te.is_empty() && !cl.is_empty() {
        ambiguous.push("Content-Length with Transfer-Encoding".into());
    }
    if !te.is_empty() && (te.len() > 1 || te[0] != "chunked") {
        ambiguous.push(format!("Transfer-Encoding {:?}", te.join(", ")));
    }
    if !te.is_empty() && http10 {
        ambiguous.push("Transfer-Encoding to an HTTP/1.0 client".into());
    }
    let bodiless = asked == Asked::Head
        || (asked == Asked::Connect && (200..300).contains(&status))
        || (100..200).contains(&status)
        || status == 204
        || status == 304;
    let rest = &b[head_len..];
    let (framing, body, used) = if bodiless {
        ("none".to_string(), 0, head_len)
    } else if te.last().is_some_and(|t| t.ends_with("chunked")) {
        match crate::backend::chunked(rest) {
            Ok((n, Some(used))) => ("chunked".to_string(), n as usize, head_len + used),
            Ok((_, None)) if !eof => return One::Incomplete,
            Ok((n, None)) => {
                truncated = true;
                ("chunked".to_string(), n as usize, b.len())
            }
            Err(e) => {
                ambiguous.push(format!("bad chunked body: {e}"));
                ("chunked".to_string(), rest.len(), b.len())
            }
        }
    } else if let Some(v) = cl.first() {
        match v.parse::<usize>() {
            Ok(n) if rest.len() >= n => (format!("cl={n}"), n, head_len + n),
            Ok(_) if !eof => return One::Incomplete,
            Ok(n) => {
                truncated = true;
                (format!("cl={n}"), rest.len(), b.len())
            }
            Err(_) => {
                ambiguous.push(format!("Content-Length {v:?}"));
                ("cl=?".to_string(), rest.len(), b.len())
            }
        }
    } else if !eof {
        return One::Incomplete;
    } else {
        ("close".to_string(), rest.len(), b.len())
    };
    One::Done(
        Resp {
            status,
            framing,
            body,
            ambiguous: (!ambiguous.is_empty()).then(|| ambiguous.join("; ")),
            truncated,
        },
        used,
    )
}
