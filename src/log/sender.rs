//! Getting log lines out without ever blocking a worker.
//!
//! Each worker thread appends framed lines to a buffer of its own (no lock, no allocation once
//! the buffer has grown) and wakes its flusher task, which runs after the current session step
//! and sends everything queued with non-blocking calls: a UDP `sendto` or a UNIX datagram send
//! per line. A line that the kernel would not take at once (a full socket buffer), or that finds
//! the per-worker buffer full, is dropped and counted ([`Outputs::dropped`], `DroppedLogs` in
//! `show info`) rather than waited for. `stdout` and `stderr` may be pipes or terminals that
//! block: their lines go through a bounded queue to one writer thread, started only when such a
//! target is configured; a full queue drops too. An inherited `fd@N` target is written the same
//! way, by a thread of its own. An `abns@NAME` target is a UNIX datagram socket in the abstract
//! namespace, addressed as HAProxy addresses it (the name padded with zeros to the whole
//! `sun_path`).
//!
//! On a thread without a flusher (the main thread's health checks when workers run on threads
//! of their own), a line is sent at once, with the same non-blocking calls.

use std::cell::RefCell;
use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};

use tokio::sync::Notify;

use crate::config::model::LogAddress;

/// Lines a worker may hold before its flusher has run; beyond, lines are dropped.
const MAX_PENDING_LINES: usize = 4096;
const MAX_PENDING_BYTES: usize = 1 << 20;
/// Lines queued for the stdout/stderr writer thread.
const STREAM_QUEUE: usize = 8192;
/// A worker's buffer above this size is given back after a flush.
const KEEP_BYTES: usize = 64 * 1024;

enum Output {
    Udp {
        sock: UdpSocket,
        addr: SocketAddr,
    },
    Unix {
        sock: UnixDatagram,
        path: PathBuf,
    },
    Abns {
        sock: UnixDatagram,
        addr: std::os::unix::net::SocketAddr,
    },
    Stream(SyncSender<Vec<u8>>),
    /// `ring@NAME`: the ring takes lines without waiting (see `log::ring`).
    Ring(std::sync::Arc<super::ring::Ring>),
}

/// Every log destination of the process, opened once at start.
pub struct Outputs {
    list: Vec<Output>,
    addrs: Vec<LogAddress>,
    dropped: AtomicU64,
    /// The `ring` sections, which `ring@NAME` targets name.
    rings: Vec<std::sync::Arc<super::ring::Ring>>,
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outputs")
            .field("addrs", &self.addrs)
            .field("dropped", &self.dropped)
            .finish()
    }
}

impl Outputs {
    /// No destination yet; [`Outputs::index`] adds them.
    pub fn new() -> Self {
        Outputs {
            list: Vec::new(),
            addrs: Vec::new(),
            dropped: AtomicU64::new(0),
            rings: Vec::new(),
        }
    }

    /// Makes the rings known to `ring@NAME` targets (before any is indexed).
    pub fn set_rings(&mut self, rings: Vec<std::sync::Arc<super::ring::Ring>>) {
        self.rings = rings;
    }

    /// The rings, in file order.
    pub fn rings(&self) -> &[std::sync::Arc<super::ring::Ring>] {
        &self.rings
    }

    /// The ring output `i` writes to, if it is one (its format and length apply, not the
    /// `log` line's).
    pub fn ring_of(&self, i: usize) -> Option<&crate::config::model::Ring> {
        match self.list.get(i)? {
            Output::Ring(r) => Some(&r.config),
            _ => None,
        }
    }

    /// The index of `addr`'s output, opening it on first use. Sockets are non-blocking.
    pub fn index(&mut self, addr: &LogAddress) -> io::Result<usize> {
        if let Some(i) = self.addrs.iter().position(|a| a == addr) {
            return Ok(i);
        }
        let out = match addr {
            LogAddress::Udp(a) => {
                let bind: SocketAddr = if a.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let sock = UdpSocket::bind(bind)?;
                sock.set_nonblocking(true)?;
                Output::Udp { sock, addr: *a }
            }
            LogAddress::Unix(p) => {
                let sock = UnixDatagram::unbound()?;
                sock.set_nonblocking(true)?;
                Output::Unix {
                    sock,
                    path: p.clone(),
                }
            }
            LogAddress::Abns(name) => {
                use std::os::linux::net::SocketAddrExt;
                let mut padded = [0u8; 107];
                let n = name.len().min(padded.len());
                padded[..n].copy_from_slice(&name.as_bytes()[..n]);
                let sock = UnixDatagram::unbound()?;
                sock.set_nonblocking(true)?;
                Output::Abns {
                    sock,
                    addr: std::os::unix::net::SocketAddr::from_abstract_name(padded)?,
                }
            }
            LogAddress::Ring(name) => match self.rings.iter().find(|r| &r.config.name == name) {
                Some(r) => Output::Ring(std::sync::Arc::clone(r)),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("no ring section named '{name}'"),
                    ))
                }
            },
            LogAddress::Stdout => writer_thread(Box::new(io::stdout()))?,
            LogAddress::Stderr => writer_thread(Box::new(io::stderr()))?,
            LogAddress::Fd(n) => {
                let fd = crate::sys::dup_inherited(*n).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("log target 'fd@{n}': descriptor is not open: {e}"),
                    )
                })?;
                writer_thread(Box::new(std::fs::File::from(fd)))?
            }
        };
        self.list.push(out);
        self.addrs.push(addr.clone());
        Ok(self.list.len() - 1)
    }

    /// Lines dropped rather than waited for.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn drop_line(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends one line now, without blocking.
    fn send_now(&self, dest: usize, line: &[u8]) {
        let ok = match &self.list[dest] {
            Output::Udp { sock, addr } => sock.send_to(line, addr).is_ok(),
            Output::Unix { sock, path } => sock.send_to(line, path).is_ok(),
            Output::Abns { sock, addr } => sock.send_to_addr(line, addr).is_ok(),
            Output::Ring(r) => r.offer(line),
            Output::Stream(tx) => match tx.try_send(line.to_vec()) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
        };
        if !ok {
            self.drop_line();
        }
    }
}

/// An output whose lines a thread of its own writes to `to` (a pipe or a terminal may block),
/// through a bounded queue.
fn writer_thread(mut to: Box<dyn Write + Send>) -> io::Result<Output> {
    let (tx, rx) = sync_channel::<Vec<u8>>(STREAM_QUEUE);
    std::thread::Builder::new()
        .name("bascule-log".into())
        .spawn(move || {
            while let Ok(line) = rx.recv() {
                let _ = to.write_all(&line);
            }
        })?;
    Ok(Output::Stream(tx))
}

impl Default for Outputs {
    fn default() -> Self {
        Outputs::new()
    }
}

/// This thread's lines waiting for its flusher.
#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    /// (output, end offset in `buf`).
    lines: Vec<(usize, usize)>,
    /// The flusher of this thread, if one runs.
    flusher: Option<Rc<Notify>>,
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Queues one line for `dest`, written by `write` (which appends it to the buffer it is given),
/// or sends it at once on a thread without a flusher.
pub fn queue(outputs: &Outputs, dest: usize, write: impl FnOnce(&mut Vec<u8>)) {
    let mut write = Some(write);
    let queued = PENDING
        .try_with(|p| {
            let mut p = p.borrow_mut();
            if p.flusher.is_none() {
                return false;
            }
            if p.lines.len() >= MAX_PENDING_LINES || p.buf.len() >= MAX_PENDING_BYTES {
                outputs.drop_line();
                return true;
            }
            let was_empty = p.lines.is_empty();
            if let Some(w) = write.take() {
                w(&mut p.buf);
            }
            let end = p.buf.len();
            p.lines.push((dest, end));
            if was_empty {
                if let Some(n) = &p.flusher {
                    n.notify_one();
                }
            }
            true
        })
        .unwrap_or(false);
    if !queued {
        if let Some(w) = write.take() {
            let mut line = Vec::with_capacity(256);
            w(&mut line);
            outputs.send_now(dest, &line);
        }
    }
}

/// Runs this worker's flusher: sends what [`queue`] collected, each time it is woken.
pub async fn flusher(outputs: std::sync::Arc<Outputs>) {
    let notify = Rc::new(Notify::new());
    PENDING.with(|p| p.borrow_mut().flusher = Some(Rc::clone(&notify)));
    loop {
        notify.notified().await;
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let mut start = 0;
            for &(dest, end) in &p.lines {
                outputs.send_now(dest, &p.buf[start..end]);
                start = end;
            }
            p.lines.clear();
            p.buf.clear();
            if p.buf.capacity() > KEEP_BYTES {
                p.buf = Vec::new();
            }
        });
    }
}
