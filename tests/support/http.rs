//! An HTTP/1.1 test backend and a raw client, written by hand (not with Bascule's parser) so
//! that what the backend sees is judged independently of the proxy's own code.
//!
//! The backend's behaviour is chosen by the request path: `/size/N` (N bytes, Content-Length),
//! `/chunked` (a chunked body with a trailer), `/chunked-slow` (the same, its end 200 ms later), `/te-gzip`, `/cl-te`, `/cl-differ`, `/cl-twice` (framing a proxy must refuse or normalise), `/204`, `/304`, `/health` (answers the status in `health`), `/then-close` (answers keep-alive, then closes), `/close` (close-delimited body),
//! `/garbage` (not HTTP), `/midclose` (closes halfway through its body), `/slow` (answers after
//! 2 s), `/sink` (counts a request body), `/sleep/MS` (answers after MS ms, counting how many run at once), `/stream/N` (streams N bytes), `/ws` (101 then echo); anything else answers `ok`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One request as the backend received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub head: String,
    pub body: Vec<u8>,
}

pub struct HttpBackend {
    pub port: u16,
    pub connections: Arc<AtomicUsize>,
    pub requests: Arc<Mutex<Vec<Seen>>>,
    /// The status `/health` answers (200 unless a test changes it).
    pub health: Arc<AtomicU16>,
    /// Most `/sleep/MS` requests ever in progress at once.
    pub max_active: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl HttpBackend {
    pub fn start() -> HttpBackend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let health = Arc::new(AtomicU16::new(200));
        let max_active = Arc::new(AtomicUsize::new(0));
        let active = Arc::new(AtomicUsize::new(0));
        let (c, r, s, h) = (
            connections.clone(),
            requests.clone(),
            stop.clone(),
            health.clone(),
        );
        let (ma, ac) = (max_active.clone(), active.clone());
        thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        let (r, h) = (r.clone(), h.clone());
                        let gauge = (ac.clone(), ma.clone());
                        thread::spawn(move || serve(conn, &r, &h, &gauge));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        HttpBackend {
            port,
            connections,
            requests,
            health,
            max_active,
            stop,
        }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for HttpBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads until `\r\n\r\n`; returns the head and any bytes read past it.
fn read_head(s: &mut TcpStream, pending: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(p) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..p + 4]).into_owned();
            pending.drain(..p + 4);
            return Some(head);
        }
        let mut buf = [0u8; 8192];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

pub fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn read_exact_pending(s: &mut TcpStream, pending: &mut Vec<u8>, n: usize) -> Option<Vec<u8>> {
    while pending.len() < n {
        let mut buf = [0u8; 8192];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(k) => pending.extend_from_slice(&buf[..k]),
        }
    }
    Some(pending.drain(..n).collect())
}

fn read_line(s: &mut TcpStream, pending: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(p) = pending.windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&pending[..p]).into_owned();
            pending.drain(..p + 2);
            return Some(line);
        }
        let mut buf = [0u8; 8192];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(k) => pending.extend_from_slice(&buf[..k]),
        }
    }
}

/// Reads a body framed as `head` says (decoding chunked).
pub fn read_body(s: &mut TcpStream, pending: &mut Vec<u8>, head: &str) -> Option<Vec<u8>> {
    if header(head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        loop {
            let line = read_line(s, pending)?;
            let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                // Trailers up to the empty line.
                while !read_line(s, pending)?.is_empty() {}
                return Some(body);
            }
            body.extend(read_exact_pending(s, pending, size)?);
            read_line(s, pending)?;
        }
    }
    let n = header(head, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
    read_exact_pending(s, pending, n)
}

fn serve(
    mut s: TcpStream,
    seen: &Mutex<Vec<Seen>>,
    health: &AtomicU16,
    (active, max_active): &(Arc<AtomicUsize>, Arc<AtomicUsize>),
) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut pending = Vec::new();
    while let Some(head) = read_head(&mut s, &mut pending) {
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        if path == "/sink" {
            // Counts a Content-Length body without keeping it (bounded memory for 1 GiB).
            let n: u64 = header(&head, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
            let mut got = pending.len() as u64;
            pending.clear();
            let mut buf = vec![0u8; 65536];
            while got < n {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(k) => got += k as u64,
                }
            }
            let body = format!("got {got}");
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            continue;
        }
        if let Some(n) = path.strip_prefix("/stream/") {
            // Streams N bytes without building them in memory.
            let n: u64 = n.parse().unwrap_or(0);
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n");
            let chunk = vec![b'z'; 65536];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                if s.write_all(&chunk[..k]).is_err() {
                    return;
                }
                left -= k as u64;
            }
            continue;
        }
        if header(&head, "expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
            let _ = s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let Some(body) = read_body(&mut s, &mut pending, &head) else {
            return;
        };
        seen.lock().unwrap().push(Seen {
            head: head.clone(),
            body: body.clone(),
        });
        let is_head = head.starts_with("HEAD ");
        let reply: Vec<u8> = if let Some(ms) = path.strip_prefix("/sleep/") {
            let now = active.fetch_add(1, Ordering::SeqCst) + 1;
            max_active.fetch_max(now, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(ms.parse().unwrap_or(0)));
            active.fetch_sub(1, Ordering::SeqCst);
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nslept".to_vec()
        } else if let Some(n) = path.strip_prefix("/size/") {
            let n: usize = n.parse().unwrap_or(0);
            let mut r =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nX-Backend-Case: Kept\r\n\r\n")
                    .into_bytes();
            if !is_head {
                r.extend(std::iter::repeat_n(b'x', n));
            }
            r
        } else {
            match path.as_str() {
                "/chunked" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n4\r\nWiki\r\n5;e=1\r\npedia\r\n0\r\nX-T: done\r\n\r\n".to_vec(),
                "/chunked-slow" => {
                    // The body's end comes later than its start.
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n");
                    thread::sleep(Duration::from_millis(200));
                    b"5\r\npedia\r\n0\r\nX-T: done\r\n\r\n".to_vec()
                }
                "/te-gzip" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n".to_vec(),
                "/cl-te" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n".to_vec(),
                "/cl-differ" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok".to_vec(),
                "/cl-twice" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok".to_vec(),
                "/204" => b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
                "/health" => {
                    let code = health.load(Ordering::SeqCst);
                    format!("HTTP/1.1 {code} Health\r\nContent-Length: 0\r\n\r\n").into_bytes()
                }
                "/then-close" => {
                    // A keep-alive answer, then the server closes anyway (idle timeout race).
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nby");
                    thread::sleep(Duration::from_millis(50));
                    return;
                }
                "/304" => b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n".to_vec(),
                "/close" => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end");
                    return;
                }
                "/garbage" => {
                    let _ = s.write_all(b"this is not http\r\n\r\n");
                    return;
                }
                "/midclose" => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten!!");
                    return;
                }
                "/slow" => {
                    thread::sleep(Duration::from_secs(2));
                    b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow".to_vec()
                }
                "/ws" => {
                    let _ = s.write_all(
                        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                    );
                    let mut buf = [0u8; 4096];
                    if !pending.is_empty() {
                        let _ = s.write_all(&pending);
                    }
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    return;
                }
                _ => {
                    let body = format!("ok {}", body.len());
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
                }
            }
        };
        if s.write_all(&reply).is_err() {
            return;
        }
        if header(&head, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
            || head.contains("HTTP/1.0\r\n") && header(&head, "connection").is_none()
        {
            return;
        }
    }
}

/// A raw HTTP client on one connection.
pub struct Client {
    pub s: TcpStream,
    pending: Vec<u8>,
}

/// A response as the client received it.
#[derive(Debug)]
pub struct Response {
    pub head: String,
    pub status: u16,
    pub body: Vec<u8>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        Client::connect_to("127.0.0.1", port)
    }

    /// A client of `host:port`.
    pub fn connect_to(host: &str, port: u16) -> Client {
        let s = TcpStream::connect((host, port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Client {
            s,
            pending: Vec::new(),
        }
    }

    pub fn send(&mut self, raw: &[u8]) {
        self.s.write_all(raw).unwrap();
    }

    /// Reads one response; `head_request`: no body expected.
    pub fn response(&mut self, head_request: bool) -> Option<Response> {
        let head = read_head(&mut self.s, &mut self.pending)?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        let body = if head_request || status == 204 || status == 304 || (100..200).contains(&status)
        {
            Vec::new()
        } else if header(&head, "content-length").is_none()
            && header(&head, "transfer-encoding").is_none()
        {
            let mut rest = std::mem::take(&mut self.pending);
            let _ = self.s.read_to_end(&mut rest);
            rest
        } else {
            read_body(&mut self.s, &mut self.pending, &head)?
        };
        Some(Response { head, status, body })
    }

    /// Sends a GET and reads its response.
    pub fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        self.response(false).expect("a response")
    }

    /// Whether the server closed the connection (an end of stream or a reset within the timeout).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        // An end of stream, or a reset (the other side closed with the response still being
        // read, or with a linger of 0): either way the connection is over.
        match self.s.read(&mut b) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }
}
