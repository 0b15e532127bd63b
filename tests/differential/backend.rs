//! The recording backend: a thread per connection, a strict HTTP/1.1 request parser of its own,
//! and a log of what each connection received.
//!
//! The parser accepts only what RFC 9112 allows without any leniency: CRLF line endings, token
//! names, no obs-fold, no control bytes, one `Content-Length` made of digits, `Transfer-Encoding`
//! exactly `chunked` and never with `Content-Length`, exactly one `Host` in HTTP/1.1, no `#` in
//! the target, an absolute-form authority equal to `Host`, and well-formed chunks. A proxy that
//! lets an ambiguous message through therefore shows here as a parse error.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What the backend answers to every request but a response case's first one.
pub const FIXED: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const FIXED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
const MAX_HEAD: usize = 256 * 1024;
/// Quiet time at the backend before a case ends.
const SETTLE_MS: u64 = 60;

/// How a received request's body was framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// One request as the backend parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Req {
    pub method: String,
    pub target: String,
    pub version: String,
    pub framing: Framing,
    /// Body bytes received (decoded for chunked).
    pub body: u64,
    /// The whole body arrived.
    pub complete: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
}

impl Req {
    pub fn describe(&self) -> String {
        let framing = match self.framing {
            Framing::None => "no body".to_string(),
            Framing::Length(n) => format!("cl={n}"),
            Framing::Chunked => format!("chunked body={}", self.body),
        };
        let partial = if self.complete {
            String::new()
        } else {
            format!(" (incomplete, {} body bytes)", self.body)
        };
        format!(
            "{} {} {} {framing}{partial}",
            self.method,
            crate::corpus::escape(self.target.as_bytes(), 40),
            self.version
        )
    }
}

/// What a backend connection saw, in arrival order across connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Request {
        conn: usize,
        req: Req,
    },
    /// The strict parser refused what arrived: an ambiguous message got through.
    ParseError {
        conn: usize,
        why: String,
        raw: String,
    },
    /// A head that never completed before the case ended.
    PartialHead {
        conn: usize,
        bytes: usize,
    },
}

struct State {
    events: Vec<Event>,
    /// A response case's bytes, for the next request, and whether to close after them.
    response: Option<(Vec<u8>, bool)>,
}

struct Shared {
    state: Mutex<State>,
    /// Milliseconds since `epoch` of the last accept or read: a case ends once this is old.
    last_activity: AtomicU64,
    epoch: Instant,
    generation: AtomicU64,
    open: AtomicUsize,
    conns: AtomicUsize,
    stop: AtomicBool,
}

pub struct Recorder {
    pub port: u16,
    shared: Arc<Shared>,
}

impl Recorder {
    pub fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("recorder bind");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                events: Vec::new(),
                response: None,
            }),
            last_activity: AtomicU64::new(0),
            epoch: Instant::now(),
            generation: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            conns: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let sh = shared.clone();
        thread::spawn(move || {
            while !sh.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        sh.touch();
                        let id = sh.conns.fetch_add(1, Ordering::SeqCst);
                        sh.open.fetch_add(1, Ordering::SeqCst);
                        let sh = sh.clone();
                        thread::spawn(move || {
                            serve(conn, id, &sh);
                            sh.open.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Recorder { port, shared }
    }

    /// Starts a case: forgets earlier events; `response` answers the case's first request.
    pub fn begin(&self, response: Option<(Vec<u8>, bool)>) {
        let mut st = self.shared.state.lock().unwrap();
        st.events.clear();
        st.response = response;
    }

    /// Ends a case: waits until the proxy has sent nothing for a while (so that late
    /// connections are counted in the case that caused them), closes every backend connection
    /// (each records what it still held) and returns the case's events.
    pub fn end(&self) -> Vec<Event> {
        let called = self.shared.now_ms();
        loop {
            let now = self.shared.now_ms();
            let last = self.shared.last_activity.load(Ordering::SeqCst).max(called);
            if now >= last + SETTLE_MS || now >= called + 2000 {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(3);
        while self.shared.open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(2));
        }
        let mut st = self.shared.state.lock().unwrap();
        st.response = None;
        std::mem::take(&mut st.events)
    }
}

impl Shared {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn touch(&self) {
        self.last_activity.store(self.now_ms(), Ordering::SeqCst);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }
}

fn serve(mut conn: TcpStream, id: usize, sh: &Shared) {
    let generation = sh.generation.load(Ordering::SeqCst);
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let record = |e: Event| sh.state.lock().unwrap().events.push(e);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16384];
    // The request at the front of the buffer was already sent 100 (Continue).
    let mut continued = false;
    loop {
        // Answer every complete request in the buffer, in order.
        loop {
            match parse_request(&buf) {
                Parsed::Incomplete(Some(req)) => {
                    // RFC 9110 10.1.1: a server that waits for the body of a request that
                    // expects 100-continue sends 100 first.
                    if req.expect_continue && !continued {
                        continued = true;
                        if conn.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
                            return;
                        }
                    }
                    break;
                }
                Parsed::Incomplete(None) => break,
                Parsed::Error(why) => {
                    let raw = crate::corpus::escape(&buf, 300);
                    record(Event::ParseError { conn: id, why, raw });
                    return;
                }
                Parsed::Done(req, used) => {
                    continued = false;
                    let head = req.method == "HEAD";
                    buf.drain(..used);
                    let response = {
                        let mut st = sh.state.lock().unwrap();
                        st.events.push(Event::Request { conn: id, req });
                        st.response.take()
                    };
                    let (bytes, close) = match &response {
                        Some((b, close)) => (&b[..], *close),
                        None if head => (FIXED_HEAD, false),
                        None => (FIXED, false),
                    };
                    if conn.write_all(bytes).is_err() {
                        return;
                    }
                    if close {
                        let _ = conn.shutdown(std::net::Shutdown::Write);
                        // Drain so that closing sends FIN rather than a reset.
                        let deadline = Instant::now() + Duration::from_millis(200);
                        while Instant::now() < deadline
                            && sh.generation.load(Ordering::SeqCst) == generation
                        {
                            match conn.read(&mut chunk) {
                                Ok(0) => break,
                                Ok(_) => {}
                                Err(e) if timed_out(&e) => {}
                                Err(_) => break,
                            }
                        }
                        return;
                    }
                }
            }
        }
        if sh.generation.load(Ordering::SeqCst) != generation {
            break;
        }
        match conn.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                sh.touch();
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if timed_out(&e) => {}
            Err(_) => break,
        }
    }
    // The connection ends with bytes that did not make a whole request.
    match parse_request(&buf) {
        Parsed::Incomplete(Some(req)) => record(Event::Request { conn: id, req }),
        Parsed::Incomplete(None) if !buf.is_empty() => record(Event::PartialHead {
            conn: id,
            bytes: buf.len(),
        }),
        _ => {}
    }
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

pub enum Parsed {
    /// More bytes are needed; `Some` once the head is complete (the body is not).
    Incomplete(Option<Req>),
    Error(String),
    /// A whole request and the bytes it used.
    Done(Req, usize),
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A head's lines (without their CRLF) and its length, empty line included.
type Head<'a> = (Vec<&'a [u8]>, usize);

/// Splits `buf` at CRLF line ends up to the empty line; `Ok(None)`: not complete yet.
fn head_lines(buf: &[u8]) -> Result<Option<Head<'_>>, String> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < buf.len() {
        match buf[i] {
            b'\n' => return Err(format!("bare LF at byte {i}")),
            b'\r' => {
                let Some(&next) = buf.get(i + 1) else {
                    return Ok(None);
                };
                if next != b'\n' {
                    return Err(format!("bare CR at byte {i}"));
                }
                let line = &buf[start..i];
                i += 2;
                start = i;
                if line.is_empty() {
                    if lines.is_empty() {
                        return Err("empty line before the request line".into());
                    }
                    return Ok(Some((lines, i)));
                }
                lines.push(line);
            }
            _ => i += 1,
        }
    }
    if buf.len() > MAX_HEAD {
        return Err("head larger than 256 KiB".into());
    }
    Ok(None)
}

/// A header line: token name, colon, value of VCHAR / SP / HTAB / obs-text.
fn header(line: &[u8]) -> Result<(String, &[u8]), String> {
    let shown = || crate::corpus::escape(line, 60);
    if line[0] == b' ' || line[0] == b'\t' {
        return Err(format!("obs-fold line {}", shown()));
    }
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or_else(|| format!("header line without a colon: {}", shown()))?;
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return Err(format!("invalid header name: {}", shown()));
    }
    let value = &line[colon + 1..];
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(format!("control byte in a header value: {}", shown()));
    }
    let trimmed =
        value
            .iter()
            .position(|&b| b != b' ' && b != b'\t')
            .map_or(&value[value.len()..], |s| {
                let e = value
                    .iter()
                    .rposition(|&b| b != b' ' && b != b'\t')
                    .unwrap();
                &value[s..=e]
            });
    Ok((String::from_utf8_lossy(name).to_ascii_lowercase(), trimmed))
}

pub fn parse_request(buf: &[u8]) -> Parsed {
    let (lines, head_len) = match head_lines(buf) {
        Ok(Some(x)) => x,
        Ok(None) => return Parsed::Incomplete(None),
        Err(e) => return Parsed::Error(e),
    };
    match request_head(&lines) {
        Err(e) => Parsed::Error(e),
        Ok(req) => body(req, &buf[head_len..], head_len),
    }
}

fn request_head(lines: &[&[u8]]) -> Result<Req, String> {
    let line = lines[0];
    let shown = crate::corpus::escape(line, 80);
    let parts: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(format!("request line is not three parts: {shown}"));
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(format!("invalid method: {shown}"));
    }
    if target.is_empty() || !target.iter().all(|&b| (0x21..0x7f).contains(&b)) {
        return Err(format!("invalid target: {shown}"));
    }
    if target.contains(&b'#') {
        return Err(format!("fragment in the target: {shown}"));
    }
    if version != b"HTTP/1.1" && version != b"HTTP/1.0" {
        return Err(format!("invalid version: {shown}"));
    }
    let mut cl: Vec<&[u8]> = Vec::new();
    let mut te: Vec<&[u8]> = Vec::new();
    let mut hosts: Vec<String> = Vec::new();
    let mut expect_continue = false;
    for l in &lines[1..] {
        let (name, value) = header(l)?;
        match name.as_str() {
            "expect" => expect_continue = value.eq_ignore_ascii_case(b"100-continue"),
            "content-length" => cl.push(value),
            "transfer-encoding" => te.push(value),
            "host" => hosts.push(String::from_utf8_lossy(value).to_ascii_lowercase()),
            _ => {}
        }
    }
    let v11 = version == b"HTTP/1.1";
    if hosts.len() > 1 || (v11 && hosts.is_empty()) {
        return Err(format!("{} Host headers", hosts.len()));
    }
    let framing = match (&cl[..], &te[..]) {
        ([], []) => Framing::None,
        ([v], []) => {
            if v.is_empty() || v.len() > 15 || !v.iter().all(u8::is_ascii_digit) {
                return Err(format!(
                    "invalid Content-Length {:?}",
                    String::from_utf8_lossy(v)
                ));
            }
            Framing::Length(std::str::from_utf8(v).unwrap().parse().unwrap())
        }
        ([], [v]) if v.eq_ignore_ascii_case(b"chunked") && v11 => Framing::Chunked,
        ([], [v]) => {
            return Err(format!(
                "Transfer-Encoding {:?} in {}",
                String::from_utf8_lossy(v),
                String::from_utf8_lossy(version)
            ))
        }
        ([_, ..], [_, ..]) => return Err("Content-Length with Transfer-Encoding".into()),
        (c, []) => return Err(format!("{} Content-Length headers", c.len())),
        (_, t) => return Err(format!("{} Transfer-Encoding headers", t.len())),
    };
    let target_s = String::from_utf8_lossy(target).into_owned();
    let lower = target_s.to_ascii_lowercase();
    if let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    {
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        // Without a Host (HTTP/1.0), the target's authority is the only one.
        if hosts.first().is_some_and(|h| h != authority) || authority.is_empty() {
            return Err(format!(
                "absolute-form authority {authority:?} differs from Host {:?}",
                hosts.first()
            ));
        }
    }
    let req = Req {
        method: String::from_utf8_lossy(method).into_owned(),
        target: target_s,
        version: String::from_utf8_lossy(version).into_owned(),
        framing,
        body: 0,
        complete: false,
        expect_continue,
    };
    Ok(req)
}

fn body(mut req: Req, rest: &[u8], head_len: usize) -> Parsed {
    match req.framing {
        Framing::None | Framing::Length(0) => {
            req.complete = true;
            Parsed::Done(req, head_len)
        }
        Framing::Length(n) => {
            if (rest.len() as u64) < n {
                req.body = rest.len() as u64;
                Parsed::Incomplete(Some(req))
            } else {
                req.body = n;
                req.complete = true;
                Parsed::Done(req, head_len + n as usize)
            }
        }
        Framing::Chunked => match chunked(rest) {
            Err(e) => Parsed::Error(e),
            Ok((n, None)) => {
                req.body = n;
                Parsed::Incomplete(Some(req))
            }
            Ok((n, Some(used))) => {
                req.body = n;
                req.complete = true;
                Parsed::Done(req, head_len + used)
            }
        },
    }
}

/// A strict chunked body: `1*HEXDIG [;ext] CRLF data CRLF`, a last chunk and trailer lines.
/// Returns the data length so far and, once complete, the bytes used.
pub fn chunked(b: &[u8]) -> Result<(u64, Option<usize>), String> {
    let mut i = 0;
    let mut total = 0u64;
    loop {
        let Some(eol) = b[i..].windows(2).position(|w| w == b"\r\n") else {
            if b[i..].contains(&b'\n') {
                return Err("bare LF in a chunk-size line".into());
            }
            if b.len() - i > 4096 {
                return Err("chunk-size line longer than 4 KiB".into());
            }
            return Ok((total, None));
        };
        let line = &b[i..i + eol];
        let shown = crate::corpus::escape(line, 60);
        let (size, ext) = match line.iter().position(|&c| c == b';') {
            Some(p) => (&line[..p], Some(&line[p + 1..])),
            None => (line, None),
        };
        if size.is_empty() || size.len() > 15 || !size.iter().all(u8::is_ascii_hexdigit) {
            return Err(format!("invalid chunk size {shown:?}"));
        }
        if let Some(ext) = ext {
            if ext.is_empty()
                || ext
                    .iter()
                    .any(|&c| !(is_tchar(c) || b"=\";\t ".contains(&c)))
            {
                return Err(format!("invalid chunk extension {shown:?}"));
            }
        }
        let n = u64::from_str_radix(std::str::from_utf8(size).unwrap(), 16).unwrap();
        i += eol + 2;
        if n == 0 {
            // Trailer section: header lines, then an empty line.
            loop {
                let Some(eol) = b[i..].windows(2).position(|w| w == b"\r\n") else {
                    if b[i..].contains(&b'\n') {
                        return Err("bare LF in the trailer section".into());
                    }
                    return Ok((total, None));
                };
                let line = &b[i..i + eol];
                i += eol + 2;
                if line.is_empty() {
                    return Ok((total, Some(i)));
                }
                if line.contains(&b'\n') || line.contains(&b'\r') {
                    return Err("bare CR or LF in the trailer section".into());
                }
                header(line)?;
            }
        }
        let avail = (b.len() - i) as u64;
        if avail < n {
            return Ok((total + avail, None));
        }
        total += n;
        i += n as usize;
        match b.get(i..i + 2) {
            Some(b"\r\n") => i += 2,
            Some(other) => {
                return Err(format!(
                    "chunk data not followed by CRLF: {:?}",
                    crate::corpus::escape(other, 4)
                ))
            }
            None if b.len() > i && b[i] != b'\r' => {
                return Err("chunk data not followed by CRLF".into())
            }
            None => return Ok((total, None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(b: &[u8]) -> Req {
        match parse_request(b) {
            Parsed::Done(r, n) => {
                assert_eq!(n, b.len());
                r
            }
            Parsed::Error(e) => panic!("error {e}"),
            Parsed::Incomplete(_) => panic!("incomplete"),
        }
    }

    fn err(b: &[u8]) -> String {
        match parse_request(b) {
            Parsed::Error(e) => e,
            _ => panic!("accepted {}", String::from_utf8_lossy(b)),
        }
    }

    #[test]
    fn strict_parser() {
        let r = done(b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!((r.framing, r.body), (Framing::Length(3), 3));
        let r = done(b"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nT: x\r\n\r\n");
        assert_eq!((r.framing, r.body), (Framing::Chunked, 3));
        err(b"GET / HTTP/1.1\nHost: h\r\n\r\n");
        err(b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx");
        err(b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n");
        err(b"GET /#x HTTP/1.1\r\nHost: h\r\n\r\n");
        err(b"GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n");
        err(b"GET / HTTP/1.1\r\nHost: h\r\n x\r\n\r\n");
        err(
            b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0x1\r\na\r\n0\r\n\r\n",
        );
        assert!(matches!(
            parse_request(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab"),
            Parsed::Incomplete(Some(Req { body: 2, .. }))
        ));
        done(b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n");
    }
}
