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
}

impl Resp {
    pub fn describe(&self) -> String {
        let mut s = format!("{} {} body={}", self.status, self.framing, self.body);
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

/// Reads until the connection closes or stays quiet; `head_first`: the first request was HEAD.
pub fn read_responses(s: &mut TcpStream, head_first: bool, http10: bool) -> Got {
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
                let (_, rest, _) = parse_all(&buf, head_first, http10, false);
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
    let (responses, rest, partial) = parse_all(&buf, head_first, http10, closed);
    let trailing = if rest.is_empty() {
        None
    } else if partial {
        Some(format!("unfinished response ({} bytes)", rest.len()))
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

/// Closes a client connection (both ways).
pub fn close(s: TcpStream) {
    let _ = s.shutdown(Shutdown::Both);
}

/// Splits `buf` into responses; returns them, the unparsed rest, and whether that rest looks
/// like the start of a response. `eof`: the connection closed, so a close-delimited body ends.
fn parse_all(buf: &[u8], head_first: bool, http10: bool, eof: bool) -> (Vec<Resp>, &[u8], bool) {
    let mut out = Vec::new();
    let mut at = 0;
    let mut head = head_first;
    while at < buf.len() {
        match parse_response(&buf[at..], head, http10, eof) {
            One::Done(r, used) => {
                let interim = (100..200).contains(&r.status) && r.status != 101;
                out.push(r);
                at += used;
                if !interim {
                    head = false;
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

fn parse_response(b: &[u8], head_request: bool, http10: bool, eof: bool) -> One {
    if !b.starts_with(b"HTTP/") && !(b.len() < 5 && b"HTTP/".starts_with(b)) {
        return One::Garbage;
    }
    let Some(end) = b.windows(4).position(|w| w == b"\r\n\r\n") else {
        // A head ending in bare LFs is ambiguous but still a head.
        if let Some(end) = b.windows(2).position(|w| w == b"\n\n") {
            return finish(b, end + 2, head_request, http10, eof, true);
        }
        return One::Incomplete;
    };
    finish(b, end + 4, head_request, http10, eof, false)
}

fn finish(b: &[u8], head_len: usize, head_request: bool, http10: bool, eof: bool, lf: bool) -> One {
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
    if lf || head.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r') {
        ambiguous.push("bare LF".into());
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
    let bodiless = head_request || (100..200).contains(&status) || status == 204 || status == 304;
    let rest = &b[head_len..];
    let (framing, body, used) = if bodiless {
        ("none".to_string(), 0, head_len)
    } else if te.last().is_some_and(|t| t.ends_with("chunked")) {
        match crate::backend::chunked(rest) {
            Ok((n, Some(used))) => ("chunked".to_string(), n as usize, head_len + used),
            Ok((_, None)) if !eof => return One::Incomplete,
            Ok((n, None)) => {
                ambiguous.push("chunked body cut by close".into());
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
                ambiguous.push("body cut by close".into());
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
        },
        used,
    )
}
