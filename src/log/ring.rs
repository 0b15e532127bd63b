//! `ring` sections: an in-memory buffer of log messages (`log ring@NAME`), kept up to `size`
//! bytes (the oldest go first) for `show events NAME`, and sent to each of the ring's TCP
//! syslog `server`s as HAProxy's sink forwarders send them: one message per line, or
//! octet-counted (`LEN SP MSG`, RFC 6587) with `log-proto octet-count`.
//!
//! Workers never wait for a ring: a line goes into a bounded channel with `try_send` (a full
//! channel drops the line and counts it, like every other log output); one task on the main
//! thread moves lines into the buffer, and one task per server sends what it has not sent yet,
//! reconnecting when the server goes away. A server connected late gets the messages still in
//! the buffer, from the oldest.
//!
//! A server with `ssl` gets its messages over TLS: the handshake, which `log` cannot run
//! itself (see [`super::conn`]), is the process's, within the ring's `timeout connect`.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Mutex, Notify};

use super::conn::{Conn, Handshakes};
use crate::config::model;

/// Lines a ring's channel holds before its task has taken them.
const QUEUE: usize = 8192;
/// How long a forwarder waits before connecting again after a failure.
const RETRY: Duration = Duration::from_secs(1);

/// The messages a ring keeps, numbered in arrival order.
#[derive(Debug, Default)]
struct Buf {
    msgs: VecDeque<(u64, Vec<u8>)>,
    bytes: usize,
    next: u64,
}

impl Buf {
    fn push(&mut self, msg: Vec<u8>, size: usize) {
        self.bytes += msg.len();
        self.msgs.push_back((self.next, msg));
        self.next += 1;
        while self.bytes > size {
            match self.msgs.pop_front() {
                Some((_, m)) => self.bytes -= m.len(),
                None => break,
            }
        }
    }

    /// The messages from number `from` on, octet-counted (`LEN SP MSG`) or one per line,
    /// and the number after the last.
    fn frames_from(&self, from: u64, octet_count: bool) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let mut next = from;
        for (n, m) in self.msgs.iter().filter(|(n, _)| *n >= from) {
            if octet_count {
                out.extend_from_slice(m.len().to_string().as_bytes());
                out.push(b' ');
                out.extend_from_slice(m);
            } else {
                out.extend_from_slice(m);
                out.push(b'\n');
            }
            next = n + 1;
        }
        (out, next.max(from))
    }
}

/// One ring.
#[derive(Debug)]
pub struct Ring {
    pub config: model::Ring,
    tx: mpsc::Sender<Vec<u8>>,
    rx: Mutex<Option<mpsc::Receiver<Vec<u8>>>>,
    buf: Mutex<Buf>,
    arrived: Notify,
    /// Lines the full channel refused (`show events`).
    dropped: std::sync::atomic::AtomicU64,
}

impl Ring {
    pub fn new(config: model::Ring) -> Ring {
        let (tx, rx) = mpsc::channel(QUEUE);
        Ring {
            config,
            tx,
            rx: Mutex::new(Some(rx)),
            buf: Mutex::new(Buf::default()),
            arrived: Notify::new(),
            dropped: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Offers a framed line (its newline removed, cut to `maxlen`); false if the ring's
    /// channel is full (the line is dropped).
    pub fn offer(&self, line: &[u8]) -> bool {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = &line[..line.len().min(self.config.maxlen)];
        let ok = self.tx.try_send(line.to_vec()).is_ok();
        if !ok {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        ok
    }

    /// Lines dropped because the ring's channel was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `show events NAME`: the messages kept, one per line; `None` while the buffer is being
    /// written (the caller may ask again).
    pub fn show(&self) -> Option<String> {
        let b = self.buf.try_lock().ok()?;
        let mut out = String::new();
        for (_, m) in &b.msgs {
            out.push_str(&String::from_utf8_lossy(m));
            out.push('\n');
        }
        Some(out)
    }
}

/// Runs ring `ring` on this thread: takes lines into its buffer and starts a forwarder per
/// server (`tls` runs the handshakes of `ssl` servers). Returns at once if it already runs.
pub fn spawn(ring: &Arc<Ring>, tls: &Rc<dyn Handshakes>) {
    let Some(mut rx) = ring.rx.try_lock().ok().and_then(|mut r| r.take()) else {
        return;
    };
    for i in 0..ring.config.servers.len() {
        tokio::task::spawn_local(forward(Arc::clone(ring), i, Rc::clone(tls)));
    }
    let ring = Arc::clone(ring);
    tokio::task::spawn_local(async move {
        while let Some(line) = rx.recv().await {
            ring.buf.lock().await.push(line, ring.config.size);
            while let Ok(line) = rx.try_recv() {
                ring.buf.lock().await.push(line, ring.config.size);
            }
            ring.arrived.notify_waiters();
        }
    });
}

/// Sends the ring's messages to server `i`, connecting again after a failure; the messages
/// of a failed write are sent again on the next connection (if still kept).
async fn forward(ring: Arc<Ring>, i: usize, tls: Rc<dyn Handshakes>) {
    let srv = &ring.config.servers[i];
    let connect_t = ring
        .config
        .timeout_connect
        .unwrap_or(Duration::from_secs(5));
    let write_t = ring.config.timeout_server;
    let mut sent = 0u64;
    loop {
        let Some(mut s) = connect(srv, connect_t, tls.as_ref()).await else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        loop {
            let arrived = ring.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let (frames, next) = ring.buf.lock().await.frames_from(sent, srv.octet_count);
            if frames.is_empty() {
                arrived.await;
                continue;
            }
            let w = async {
                s.write_all(&frames).await?;
                s.flush().await
            };
            let ok = match write_t {
                Some(t) => matches!(tokio::time::timeout(t, w).await, Ok(Ok(()))),
                None => w.await.is_ok(),
            };
            if !ok {
                break;
            }
            sent = next;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Connects to a ring server, and runs the TLS handshake of an `ssl` one, all within
/// `limit`; `None` if either fails.
async fn connect(
    srv: &model::RingServer,
    limit: Duration,
    tls: &dyn Handshakes,
) -> Option<Box<dyn Conn>> {
    let deadline = tokio::time::Instant::now() + limit;
    let conn = tokio::time::timeout_at(deadline, tokio::net::TcpStream::connect(srv.addr));
    let sock = conn.await.ok()?.ok()?;
    match &srv.tls {
        None => Some(Box::new(sock)),
        Some(t) => {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            tls.connect(sock, t, srv.addr, Some(left)).await.ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_messages_go_first_and_frames_are_octet_counted() {
        let mut b = Buf::default();
        for m in ["one", "two", "three"] {
            b.push(m.as_bytes().to_vec(), 8);
        }
        // "two" + "three" = 8 bytes fit; "one" went.
        assert_eq!(b.msgs.len(), 2);
        let (frames, next) = b.frames_from(0, true);
        assert_eq!(frames, b"3 two5 three");
        assert_eq!(next, 3);
        assert_eq!(b.frames_from(3, true), (Vec::new(), 3));
        assert_eq!(b.frames_from(2, true).0, b"5 three");
        assert_eq!(b.frames_from(0, false).0, b"two\nthree\n");
    }
}
