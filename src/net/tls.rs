//! A TLS connection over a TCP or UNIX stream socket, with the readiness interface the sessions use
//! (`readable`, `try_read`, `try_write`, `writable`), driven by rustls directly: the client
//! side of a listener (`bind ... ssl`) and the server side of a `server ... ssl`.
//!
//! Sessions read and write sockets as "wait until ready, then try": no buffered stream trait,
//! no per-call allocation. [`TlsSock`] keeps that shape: `try_read` hands out plaintext that
//! rustls decrypted, reading records from the socket when it has none (`WouldBlock` when the
//! socket has none either); `try_write` hands plaintext to rustls and writes the records out.
//! One rule keeps a connection from stalling: records rustls holds because the socket was
//! full are written before any new plaintext is taken, and whoever waits to *read* also
//! watches for the socket to become writable and flushes them — a response accepted into
//! rustls always reaches the client even if the session goes back to reading at once.
//!
//! Fewer segments per connection, where the kernel's work is a large part of a handshake's
//! cost: post-handshake records (session tickets) that come due when the client's first
//! request is already decrypted wait for the response and leave in its system call; a last
//! response takes close_notify along ([`TlsSock::close_after_write`]); and the records written
//! after close_notify are sent with `MSG_MORE`, so the shutdown's FIN leaves in their segment.
//!
//! The handshakes ([`TlsSock::accept`], [`TlsSock::connect`]) are bounded by the caller's timer
//! (HAProxy bounds a client's by `timeout client`, a server's by `timeout connect`). A failed handshake sends rustls's alert and reports the reason; what
//! rustls reports is kept for the log (`SSL handshake failure`).

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::rules::source::PeerCert;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};
use tokio::net::{TcpStream, UnixStream};

/// At most this much plaintext is handed to rustls per `try_write` (one record's worth a few
/// times over), so that what it holds stays bounded.
const WRITE_CHUNK: usize = 4 * 16 * 1024;

/// The socket under a TLS connection: TCP, or a UNIX stream socket (`bind unix@PATH ssl`, as
/// HAProxy terminates TLS on any stream listener).
#[derive(Debug)]
pub enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// The same outside the reactor (a parked connection).
#[derive(Debug)]
pub enum StdSock {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl From<TcpStream> for Sock {
    fn from(s: TcpStream) -> Sock {
        Sock::Tcp(s)
    }
}

impl From<UnixStream> for Sock {
    fn from(s: UnixStream) -> Sock {
        Sock::Unix(s)
    }
}

/// Runs `$e` with `$s` bound to the socket of either variant.
macro_rules! either {
    ($v:expr, $s:ident => $e:expr) => {
        match $v {
            Sock::Tcp($s) => $e,
            Sock::Unix($s) => $e,
        }
    };
}

impl Sock {
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        either!(self, s => s.try_read(buf))
    }
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        either!(self, s => s.try_write(buf))
    }
    fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        either!(self, s => s.try_write_vectored(bufs))
    }
    /// As `try_write_vectored`, telling TCP that more follows (`MSG_MORE`): the bytes wait in
    /// the socket for the FIN of the `shutdown` that comes next, and leave in its segment.
    fn try_write_more(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.try_io(tokio::io::Interest::WRITABLE, || {
                socket2::SockRef::from(s)
                    .send_vectored_with_flags(bufs, libc::MSG_MORE | libc::MSG_NOSIGNAL)
            }),
            Sock::Unix(s) => s.try_write_vectored(bufs),
        }
    }
    async fn readable(&self) -> io::Result<()> {
        either!(self, s => s.readable().await)
    }
    async fn writable(&self) -> io::Result<()> {
        either!(self, s => s.writable().await)
    }
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => s.poll_read_ready(cx))
    }
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => s.poll_write_ready(cx))
    }
    fn into_std(self) -> io::Result<StdSock> {
        Ok(match self {
            Sock::Tcp(s) => StdSock::Tcp(s.into_std()?),
            Sock::Unix(s) => StdSock::Unix(s.into_std()?),
        })
    }
    fn from_std(s: StdSock) -> io::Result<Sock> {
        Ok(match s {
            StdSock::Tcp(s) => Sock::Tcp(TcpStream::from_std(s)?),
            StdSock::Unix(s) => Sock::Unix(UnixStream::from_std(s)?),
        })
    }

    /// The local IP address; an error for a UNIX socket, which has none.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Sock::Tcp(s) => s.local_addr(),
            Sock::Unix(_) => Err(no_ip()),
        }
    }

    /// The peer's IP address; an error for a UNIX socket, which has none.
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Sock::Tcp(s) => s.peer_addr(),
            Sock::Unix(_) => Err(no_ip()),
        }
    }

    /// Whether this is a UNIX socket.
    pub fn is_unix(&self) -> bool {
        matches!(self, Sock::Unix(_))
    }
}

impl std::os::fd::AsFd for Sock {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        either!(self, s => s.as_fd())
    }
}

impl StdSock {
    /// The local IP address; an error for a UNIX socket, which has none.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            StdSock::Tcp(s) => s.local_addr(),
            StdSock::Unix(_) => Err(no_ip()),
        }
    }

    /// The peer's IP address; an error for a UNIX socket, which has none.
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            StdSock::Tcp(s) => s.peer_addr(),
            StdSock::Unix(_) => Err(no_ip()),
        }
    }

    /// Whether this is a UNIX socket.
    pub fn is_unix(&self) -> bool {
        matches!(self, StdSock::Unix(_))
    }
}

impl std::os::fd::AsFd for StdSock {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            StdSock::Tcp(s) => s.as_fd(),
            StdSock::Unix(s) => s.as_fd(),
        }
    }
}

fn no_ip() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "a UNIX socket has no IP address",
    )
}

/// `io::Read`/`io::Write` over a non-blocking socket, for rustls's `read_tls`/`write_tls`.
struct Raw<'a>(&'a Sock);

/// The client's first records, copied as rustls reads them until they hold a whole
/// ClientHello, whose lists are then kept (`tune.ssl.capture-buffer-size`); nothing is copied
/// when the size is 0.
struct Capture {
    /// Bytes kept of each list (0: no capture).
    size: usize,
    raw: Vec<u8>,
    lists: Option<crate::proto::tls_hello::HelloLists>,
}

impl Capture {
    /// The most bytes copied looking for the hello: one record of the largest size.
    const MAX_RAW: usize = 5 + 16384;

    fn new(size: usize) -> Capture {
        Capture {
            size,
            raw: Vec::new(),
            lists: None,
        }
    }

    /// Whether reads are still to be copied.
    fn wanted(&self) -> bool {
        self.size > 0 && self.lists.is_none() && self.raw.len() < Self::MAX_RAW
    }

    fn reader<'a>(&'a mut self, sock: &'a Sock) -> CaptureRead<'a> {
        CaptureRead { sock, cap: self }
    }

    fn lists(&mut self) -> Option<Box<crate::proto::tls_hello::HelloLists>> {
        self.raw = Vec::new();
        self.lists.take().map(Box::new)
    }
}

/// A read of the socket that [`Capture`] copies.
struct CaptureRead<'a> {
    sock: &'a Sock,
    cap: &'a mut Capture,
}

impl Read for CaptureRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.try_read(buf)?;
        if self.cap.wanted() {
            let room = Capture::MAX_RAW - self.cap.raw.len();
            self.cap.raw.extend_from_slice(&buf[..n.min(room)]);
            self.cap.lists =
                crate::proto::tls_hello::HelloLists::parse(&self.cap.raw, self.cap.size);
        }
        Ok(n)
    }
}

impl Read for Raw<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Raw<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    /// rustls hands every record it holds at once (a server's first flight is five or six);
    /// without this, `io::Write`'s default would send them one `sendto` each — one segment
    /// each — where OpenSSL writes the flight in one.
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// [`Raw`] for the last records of a connection (close_notify queued, the socket's shutdown
/// next): they go out with the FIN, one segment instead of two.
struct RawLast<'a>(&'a Sock);

impl Write for RawLast<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write_more(&[io::IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_more(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TLS connection: accepted from a client, or opened to a server.
pub struct TlsSock {
    sock: Sock,
    conn: RefCell<Connection>,
    /// rustls may hold decrypted bytes: `readable` answers at once.
    plaintext: Cell<bool>,
    /// The client closed the socket (or sent close_notify).
    eof: Cell<bool>,
    /// close_notify was queued.
    closing: Cell<bool>,
    /// The last flush left records behind: the socket was full.
    blocked: Cell<bool>,
    /// The write that takes the rest of the caller's bytes is the connection's last: close_notify
    /// goes out behind it, in the same system call ([`TlsSock::close_after_write`]).
    close_next: Cell<bool>,
    /// What the handshake settled.
    facts: Handshake,
}

/// An idle TLS connection out of the reactor (see `net::idle`): the socket and the rustls
/// state, boxed, so that a parked connection holds no task.
pub struct ParkedTls {
    sock: StdSock,
    conn: Connection,
    facts: Handshake,
}

impl ParkedTls {
    /// The socket (for the parking's epoll set).
    pub fn socket(&self) -> &StdSock {
        &self.sock
    }
}

impl std::fmt::Debug for ParkedTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedTls")
            .field("sock", &self.sock)
            .finish_non_exhaustive()
    }
}

/// The peer closed the connection, or the time ran out, before the handshake completed;
/// `empty`: the peer sent nothing at all (a connection `option dontlognull` does not log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unfinished {
    pub empty: bool,
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the TLS handshake did not complete")
    }
}

impl std::error::Error for Unfinished {}

/// How HAProxy words a failed handshake in its log (`fe/bind: <words>`), and whether the
/// connection sent nothing at all.
pub fn handshake_failure(e: &io::Error) -> (&'static str, bool) {
    let empty = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<Unfinished>())
        .is_some_and(|c| c.empty);
    match e.kind() {
        io::ErrorKind::TimedOut => ("Timeout during SSL handshake", empty),
        io::ErrorKind::UnexpectedEof => ("Connection closed during SSL handshake", empty),
        _ => ("SSL handshake failure", false),
    }
}

/// Waits for `wait` until `deadline`: past it, `TimedOut` with [`Unfinished`].
async fn within(
    deadline: Option<tokio::time::Instant>,
    empty: bool,
    wait: impl std::future::Future<Output = io::Result<()>>,
) -> io::Result<()> {
    let Some(d) = deadline else {
        return wait.await;
    };
    match tokio::time::timeout_at(d, wait).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            Unfinished { empty },
        )),
    }
}

impl std::fmt::Debug for TlsSock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSock")
            .field("sock", &self.sock)
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsSock {
    /// Runs the server handshake on an accepted socket. Errors: the client left, the
    /// handshake failed (rustls's reason, after the alert was sent), or a socket error.
    pub async fn accept(
        sock: impl Into<Sock>,
        config: Arc<ServerConfig>,
        limit: Option<Duration>,
        capture: usize,
    ) -> io::Result<TlsSock> {
        let conn = ServerConnection::new(config).map_err(tls_error)?;
        let deadline = limit.map(|l| tokio::time::Instant::now() + l);
        let hello = Capture::new(capture);
        Self::handshake(
            sock.into(),
            Connection::Server(conn),
            deadline,
            false,
            hello,
        )
        .await
    }

    /// As [`TlsSock::accept`], with the configuration chosen from the client's hello (a
    /// `crt-list` line's own options): the ClientHello is read first, then `choose` gives the
    /// configuration the handshake goes on with, all within `limit`.
    pub async fn accept_by_hello(
        sock: impl Into<Sock>,
        choose: impl FnOnce(&rustls::server::ClientHello<'_>) -> Arc<ServerConfig>,
        limit: Option<Duration>,
        capture: usize,
    ) -> io::Result<TlsSock> {
        let sock = sock.into();
        let deadline = limit.map(|l| tokio::time::Instant::now() + l);
        let mut acceptor = rustls::server::Acceptor::default();
        let mut got_bytes = false;
        let mut hello = Capture::new(capture);
        let accepted = loop {
            match acceptor.read_tls(&mut hello.reader(&sock)) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        Unfinished { empty: !got_bytes },
                    ))
                }
                Ok(_) => got_bytes = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    within(deadline, !got_bytes, sock.readable()).await?;
                    continue;
                }
                Err(e) => return Err(e),
            }
            match acceptor.accept() {
                Ok(Some(a)) => break a,
                Ok(None) => {}
                Err((e, mut alert)) => {
                    let _ = alert.write_all(&mut Raw(&sock));
                    return Err(tls_error(e));
                }
            }
        };
        let config = choose(&accepted.client_hello());
        // As in `handshake`: the costly first flight waits behind the runnable tasks.
        tokio::task::yield_now().await;
        match accepted.into_connection(config) {
            Ok(conn) => {
                // The resolver ran in `into_connection`: take what it chose before an await
                // lets another handshake on this thread run its own.
                let chosen = crate::tls::sni::take_chosen();
                let mut s =
                    Self::handshake(sock, Connection::Server(conn), deadline, true, hello).await?;
                if s.facts.served.is_none() {
                    s.facts.served = chosen;
                }
                Ok(s)
            }
            Err((e, mut alert)) => {
                let _ = alert.write_all(&mut Raw(&sock));
                Err(tls_error(e))
            }
        }
    }

    /// Runs the client handshake with a server, sending `name` as SNI when it is a name.
    pub async fn connect(
        sock: TcpStream,
        config: Arc<ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
        limit: Option<Duration>,
    ) -> io::Result<TlsSock> {
        // The name sent, kept (as `sni`) so that a pooled connection is reused only for
        // requests with the same SNI.
        let sent = match (&name, config.enable_sni) {
            (rustls::pki_types::ServerName::DnsName(n), true) => Some(Box::from(n.as_ref())),
            _ => None,
        };
        let conn = ClientConnection::new(config, name).map_err(tls_error)?;
        let deadline = limit.map(|l| tokio::time::Instant::now() + l);
        let mut s = Self::handshake(
            Sock::Tcp(sock),
            Connection::Client(conn),
            deadline,
            false,
            Capture::new(0),
        )
        .await?;
        s.facts.sni = sent;
        Ok(s)
    }

    /// Runs a handshake until `deadline`: `TimedOut` (with [`Unfinished`]) past it.
    /// `got_bytes`: the peer already sent some (its hello, read by an `Acceptor`).
    async fn handshake(
        sock: Sock,
        conn: Connection,
        deadline: Option<tokio::time::Instant>,
        mut got_bytes: bool,
        mut hello: Capture,
    ) -> io::Result<TlsSock> {
        let mut served = None;
        let mut verified = None;
        // What an `Acceptor` already fed rustls may have logged secrets (`tls::keylog`).
        let mut secrets = crate::tls::keylog::take();
        let mut yielded = got_bytes;
        let mut s = TlsSock {
            sock,
            conn: RefCell::new(conn),
            plaintext: Cell::new(false),
            eof: Cell::new(false),
            closing: Cell::new(false),
            blocked: Cell::new(false),
            close_next: Cell::new(false),
            facts: Handshake::default(),
        };
        loop {
            let done = !s.conn.borrow().is_handshaking();
            // A server handshake that ends with the client's first request already decrypted
            // (TLS 1.3: the request follows the client's Finished at once) leaves the session
            // tickets in rustls: they go out with the response, one write and one segment
            // fewer. (A client's Finished always leaves now: the server waits for it.)
            let server = matches!(*s.conn.borrow(), Connection::Server(_));
            if !(done && server && s.plaintext.get()) {
                while !s.flush()? {
                    within(deadline, !got_bytes, s.sock.writable()).await?;
                }
            }
            if done {
                let served = served.take();
                s.facts = Handshake::of(&s.conn.borrow());
                s.facts.served = served;
                s.facts.verify = verified.unwrap_or_default();
                s.facts.hello = hello.lists();
                s.facts.secrets = secrets.map(Box::new);
                return Ok(s);
            }
            if !yielded && matches!(*s.conn.borrow(), Connection::Server(_)) {
                // A client's first flight costs the key exchange and the signature, the bulk of
                // a handshake: it waits behind the tasks already runnable, so that a flood of
                // new connections does not hold up the established ones.
                yielded = true;
                tokio::task::yield_now().await;
            }
            let r = match hello.wanted() {
                true => s.read_records_from(&mut hello.reader(&s.sock)),
                false => s.read_records(),
            };
            // The certificate resolver, if it ran in that call, left its choice here.
            if let Some(c) = crate::tls::sni::take_chosen() {
                served = Some(c);
            }
            // And the key log, the secrets it was given.
            if let Some(k) = crate::tls::keylog::take() {
                secrets.get_or_insert_with(Default::default).merge(k);
            }
            // So did the client certificate verifier, with what it found.
            if let Some(v) = crate::tls::verify::take_outcome() {
                verified = Some(v);
            }
            match r {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        Unfinished { empty: !got_bytes },
                    ))
                }
                Ok(_) => got_bytes = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    within(deadline, !got_bytes, s.sock.readable()).await?
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads records from the socket into rustls and processes them. `Ok(0)`: end of stream.
    fn read_records(&self) -> io::Result<usize> {
        self.read_records_from(&mut Raw(&self.sock))
    }

    /// As [`TlsSock::read_records`], reading through `from` (the socket, or a copy of what it
    /// gives: [`Capture`]).
    fn read_records_from(&self, from: &mut dyn Read) -> io::Result<usize> {
        let mut conn = self.conn.borrow_mut();
        let n = conn.read_tls(from)?;
        if n == 0 {
            self.eof.set(true);
        }
        let data = match conn.process_new_packets() {
            Ok(state) => {
                let data = state.plaintext_bytes_to_read() > 0;
                if data || state.peer_has_closed() {
                    self.plaintext.set(true);
                }
                data
            }
            Err(e) => {
                // Send the alert rustls queued, if the socket takes it.
                let _ = conn.write_tls(&mut Raw(&self.sock));
                return Err(tls_error(e));
            }
        };
        drop(conn);
        // Post-handshake messages (session tickets, key updates) go out when they can: now,
        // or, when the records brought data to answer, with the answer (`try_write`; whoever
        // waits to read flushes them too, see `poll_read_ready`).
        if data {
            Ok(n)
        } else {
            self.flush().map(|_| n)
        }
    }

    /// Writes what rustls holds. `Ok(true)`: nothing is left; `Ok(false)`: the socket is full.
    fn flush(&self) -> io::Result<bool> {
        let mut conn = self.conn.borrow_mut();
        let last = self.closing.get();
        while conn.wants_write() {
            let written = match last {
                true => conn.write_tls(&mut RawLast(&self.sock)),
                false => conn.write_tls(&mut Raw(&self.sock)),
            };
            match written {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked.set(true);
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        self.blocked.set(false);
        Ok(true)
    }

    fn pending_output(&self) -> bool {
        self.conn.borrow().wants_write()
    }

    /// Decrypted bytes into `buf`, reading records as needed: `WouldBlock` when neither
    /// rustls nor the socket has any, `Ok(0)` at the end of the stream.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let r = self.conn.borrow_mut().reader().read(buf);
            match r {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.plaintext.set(false),
                // The client closed without close_notify: an end of stream, as HAProxy takes it.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.eof.get() {
                return Ok(0);
            }
            self.read_records()?;
        }
    }

    /// Takes up to [`WRITE_CHUNK`] bytes of `buf` and writes their records; `WouldBlock` when
    /// records from before are still waiting for room in the socket. Records held while the
    /// socket had room (session tickets kept for the response) go out in the same system call.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        if self.blocked.get() && !self.flush()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = {
            let mut conn = self.conn.borrow_mut();
            let n = conn.writer().write(&buf[..buf.len().min(WRITE_CHUNK)])?;
            if n == buf.len() && self.close_next.replace(false) {
                self.closing.set(true);
                conn.send_close_notify();
            }
            n
        };
        self.flush()?;
        Ok(n)
    }

    /// The next write that takes the rest of its caller's bytes ends what this side sends:
    /// close_notify is queued behind them and leaves in the same system call (the session
    /// then shuts the socket down). For a last response whose bytes are all at hand.
    pub fn close_after_write(&self) {
        self.close_next.set(true);
    }

    /// Waits until `try_read` has something: decrypted bytes, or the end of the stream.
    /// Meanwhile, records waiting for room in the socket are written when it has some.
    pub async fn readable(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_read_ready(cx)).await
    }

    /// As [`TlsSock::readable`], for code that polls. The socket's readiness is checked by
    /// reading its records: a stale readiness (left by a read that did not drain the socket)
    /// or records that carry no data (a session ticket, a key update) do not wake the caller,
    /// so an idle connection is seen idle (and parked).
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.plaintext.get() || self.eof.get() {
                return Poll::Ready(Ok(()));
            }
            if self.pending_output() {
                if let Poll::Ready(r) = self.sock.poll_write_ready(cx) {
                    r?;
                    if self.flush()? {
                        // Flushed: the socket's write readiness no longer matters.
                    } else {
                        cx.waker().wake_by_ref();
                    }
                }
            }
            std::task::ready!(self.sock.poll_read_ready(cx))?;
            match self.read_records() {
                Ok(_) => {}
                // `try_read` cleared the readiness: the next poll registers the waker.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Waits until `try_write` may take bytes: the socket has room for the records rustls
    /// holds (records held while it had room leave with the next write).
    pub async fn writable(&self) -> io::Result<()> {
        while self.blocked.get() && !self.flush()? {
            self.sock.writable().await?;
        }
        Ok(())
    }

    /// Waits until every record rustls holds is written.
    async fn flushed(&self) -> io::Result<()> {
        while !self.flush()? {
            self.sock.writable().await?;
        }
        Ok(())
    }

    /// Sends close_notify and writes what is left, waiting at most until the caller's timer
    /// stops it.
    pub async fn close(&self) -> io::Result<()> {
        if !self.closing.replace(true) {
            self.conn.borrow_mut().send_close_notify();
        }
        self.flushed().await
    }

    /// Whether the connection may be parked: nothing decrypted waits to be read, no record
    /// waits to be written, the peer has not closed, no close_notify was sent.
    pub fn can_park(&self) -> bool {
        if self.plaintext.get() {
            // The flag is set when records are decrypted and cleared by a read that finds
            // nothing: a read that took the last byte leaves it set. rustls knows.
            if let Ok(state) = self.conn.borrow_mut().process_new_packets() {
                if state.plaintext_bytes_to_read() == 0 && !state.peer_has_closed() {
                    self.plaintext.set(false);
                }
            }
        }
        !self.plaintext.get() && !self.eof.get() && !self.closing.get() && !self.pending_output()
    }

    /// Takes the connection out of the reactor to park it (see [`TlsSock::can_park`]).
    pub fn park(self) -> io::Result<ParkedTls> {
        if !self.can_park() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "a TLS connection with bytes in flight is not parked",
            ));
        }
        Ok(ParkedTls {
            sock: self.sock.into_std()?,
            conn: self.conn.into_inner(),
            facts: self.facts,
        })
    }

    /// A parked connection back in the reactor (a new registration reports the socket's
    /// current readiness, so the bytes that woke it are seen).
    pub fn resume(p: ParkedTls) -> io::Result<TlsSock> {
        Ok(TlsSock {
            sock: Sock::from_std(p.sock)?,
            conn: RefCell::new(p.conn),
            plaintext: Cell::new(false),
            eof: Cell::new(false),
            closing: Cell::new(false),
            blocked: Cell::new(false),
            close_next: Cell::new(false),
            facts: p.facts,
        })
    }

    /// The socket underneath (addresses, socket options; never its bytes).
    pub fn socket(&self) -> &Sock {
        &self.sock
    }

    /// A resumed session's client certificate, checked again by `verifier` (rustls keeps the
    /// chain in the session, not what verifying it found).
    pub fn reverify(&mut self, verifier: &crate::tls::verify::ClientVerifier) {
        if self.facts.resumed {
            if let Some(chain) = &self.facts.peer_certs {
                self.facts.verify = verifier.resumed(chain);
            }
        }
    }

    /// What the handshake settled, for fetches and logs.
    pub fn facts(&self) -> &Handshake {
        &self.facts
    }

    /// Decrypted bytes copied into `buf` without consuming them: `WouldBlock` when none are
    /// decrypted yet (records are read as `try_read` reads them), `Ok(0)` at the end of the
    /// stream. At most one record's worth is shown at a time.
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        use std::io::BufRead;
        loop {
            {
                let mut conn = self.conn.borrow_mut();
                let mut reader = conn.reader();
                match reader.fill_buf() {
                    Ok(b) => {
                        let n = b.len().min(buf.len());
                        buf[..n].copy_from_slice(&b[..n]);
                        return Ok(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.plaintext.set(false),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                    Err(e) => return Err(e),
                }
            }
            if self.eof.get() {
                return Ok(0);
            }
            self.read_records()?;
        }
    }

    /// Peeks at decrypted bytes, waiting for some (0: the peer closed).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.readable().await?;
            match self.try_peek(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    /// Ends the write side: close_notify, every record still held, then the socket's FIN.
    pub async fn shutdown(&self) -> io::Result<()> {
        self.close().await?;
        self.sock_shutdown()
    }

    fn sock_shutdown(&self) -> io::Result<()> {
        socket2::SockRef::from(&self.sock).shutdown(std::net::Shutdown::Write)
    }

    /// As [`TlsSock::shutdown`], for code that polls.
    pub fn poll_shutdown(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.closing.replace(true) {
            self.conn.borrow_mut().send_close_notify();
        }
        loop {
            if self.flush()? {
                return Poll::Ready(self.sock_shutdown());
            }
            std::task::ready!(self.sock.poll_write_ready(cx))?;
        }
    }

    /// As [`TlsSock::writable`], for code that polls.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if !self.blocked.get() || self.flush()? {
                return Poll::Ready(Ok(()));
            }
            std::task::ready!(self.sock.poll_write_ready(cx))?;
        }
    }

    /// As [`TlsSock::flushed`], for code that polls (`AsyncWrite::poll_flush`).
    pub fn poll_flushed(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.flush()? {
                return Poll::Ready(Ok(()));
            }
            std::task::ready!(self.sock.poll_write_ready(cx))?;
        }
    }
}

/// What a handshake settled, read once when it completes (fetches and log lines read it
/// without touching rustls).
#[derive(Debug, Default, Clone)]
pub struct Handshake {
    /// The server name the client asked for (`ssl_fc_sni`); on a server connection, the
    /// name sent.
    pub sni: Option<Box<str>>,
    /// The protocol ALPN chose (`ssl_fc_alpn`).
    pub alpn: Option<Box<[u8]>>,
    /// The protocol version as HAProxy names it (`%sslv`, `ssl_fc_protocol`: `TLSv1.3`).
    pub version: &'static str,
    /// The cipher suite by OpenSSL's name (`%sslc`, `ssl_fc_cipher`).
    pub cipher: &'static str,
    /// The cipher's secret key size in bits (`ssl_fc_use_keysize`).
    pub key_bits: u32,
    /// Whether the session was resumed (`ssl_fc_is_resumed`).
    pub resumed: bool,
    /// The peer's certificate chain, leaf first (DER), when it sent one.
    pub peer_certs: Option<Box<[Vec<u8>]>>,
    /// A client certificate's fields, for the `ssl_c_*` fetches (accepted connections only).
    pub client: Option<Box<PeerCert>>,
    /// The certificate this side served (accepted connections, when a rule reads `ssl_f_*`).
    pub served: Option<Arc<crate::tls::cert::Cert>>,
    /// What verifying the client's certificate found (accepted connections).
    pub verify: crate::tls::verify::Outcome,
    /// The client's ClientHello lists (`tune.ssl.capture-buffer-size`: the
    /// `ssl_fc_cipherlist_*` fetches).
    pub hello: Option<Box<crate::proto::tls_hello::HelloLists>>,
    /// The handshake's secrets (`tune.ssl.keylog on`: the `ssl_fc_*_secret` fetches).
    pub secrets: Option<Box<crate::tls::keylog::Secrets>>,
}

impl Handshake {
    fn of(conn: &Connection) -> Handshake {
        let sni = match conn {
            Connection::Server(c) => c.server_name().map(Box::from),
            Connection::Client(_) => None,
        };
        // The peer's certificate: a client's (`ssl_c_*`) or a server's (`ssl_s_*`).
        let client = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|leaf| crate::tls::der::cert_info(leaf.as_ref()))
            .map(Box::new);
        let (cipher, key_bits) = cipher_name(conn.negotiated_cipher_suite().map(|s| s.suite()));
        Handshake {
            sni,
            alpn: conn.alpn_protocol().map(Box::from),
            version: match conn.protocol_version() {
                Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
                Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
                _ => "",
            },
            cipher,
            key_bits,
            resumed: conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            peer_certs: conn
                .peer_certificates()
                .map(|c| c.iter().map(|d| d.as_ref().to_vec()).collect()),
            client,
            served: None,
            verify: Default::default(),
            hello: None,
            secrets: None,
        }
    }
}

/// A cipher suite by OpenSSL's name, as HAProxy logs it, and its key size in bits.
fn cipher_name(suite: Option<rustls::CipherSuite>) -> (&'static str, u32) {
    use rustls::CipherSuite as C;
    match suite {
        Some(C::TLS13_AES_128_GCM_SHA256) => ("TLS_AES_128_GCM_SHA256", 128),
        Some(C::TLS13_AES_256_GCM_SHA384) => ("TLS_AES_256_GCM_SHA384", 256),
        Some(C::TLS13_CHACHA20_POLY1305_SHA256) => ("TLS_CHACHA20_POLY1305_SHA256", 256),
        Some(C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) => ("ECDHE-ECDSA-AES128-GCM-SHA256", 128),
        Some(C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) => ("ECDHE-RSA-AES128-GCM-SHA256", 128),
        Some(C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384) => ("ECDHE-ECDSA-AES256-GCM-SHA384", 256),
        Some(C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) => ("ECDHE-RSA-AES256-GCM-SHA384", 256),
        Some(C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256) => {
            ("ECDHE-ECDSA-CHACHA20-POLY1305", 256)
        }
        Some(C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256) => {
            ("ECDHE-RSA-CHACHA20-POLY1305", 256)
        }
        _ => ("", 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::server::{build, BindSsl, CrtArg};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use std::path::Path;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name)
    }

    fn client_config() -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
            .unwrap();
        let mut c = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(c)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_records_rustls_holds_go_out_in_one_write() {
        // rustls's `write_tls` hands all its records to one `write_vectored`: each must be
        // taken, not only the first (the first flight is one segment, as OpenSSL sends it).
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        let sock = Sock::Tcp(server);
        let parts = [
            &b"ServerHello"[..],
            b"EncryptedExtensions",
            b"Certificate",
            b"Finished",
        ];
        let bufs: Vec<io::IoSlice<'_>> = parts.iter().map(|p| io::IoSlice::new(p)).collect();
        let n = Raw(&sock).write_vectored(&bufs).unwrap();
        assert_eq!(n, parts.iter().map(|p| p.len()).sum::<usize>());
        let mut got = vec![0u8; n];
        let mut r = client.into_std().unwrap();
        r.set_nonblocking(false).unwrap();
        r.read_exact(&mut got).unwrap();
        assert_eq!(got, parts.concat());
    }

    /// Echoes until the client closes, through the readiness interface only.
    async fn echo(s: &TlsSock) -> usize {
        let mut buf = vec![0u8; 8192];
        let mut total = 0;
        loop {
            s.readable().await.unwrap();
            let n = match s.try_read(&mut buf) {
                Ok(0) => return total,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            };
            total += n;
            let mut off = 0;
            while off < n {
                s.writable().await.unwrap();
                match s.try_write(&buf[off..n]) {
                    Ok(w) => off += w,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn handshake_then_a_megabyte_each_way_over_real_sockets() {
        let built = build(&BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-ecdsa.pem"))],
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            ..Default::default()
        })
        .unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut sock = std::net::TcpStream::connect(addr).unwrap();
            let mut conn = rustls::ClientConnection::new(
                client_config(),
                ServerName::try_from("www.example.com").unwrap(),
            )
            .unwrap();
            let mut tls = rustls::Stream::new(&mut conn, &mut sock);
            // 256 KiB at a time, then read it back: more than the socket buffers hold, so
            // the server's records wait for room and must be flushed as the client reads.
            let data: Vec<u8> = (0..1_048_576u32).map(|i| (i % 251) as u8).collect();
            let mut back = Vec::new();
            let mut buf = vec![0u8; 65536];
            for chunk in data.chunks(256 * 1024) {
                tls.write_all(chunk).unwrap();
                tls.flush().unwrap();
                let want = back.len() + chunk.len();
                while back.len() < want {
                    let n = tls.read(&mut buf).unwrap();
                    assert!(n > 0, "early end after {} bytes", back.len());
                    back.extend_from_slice(&buf[..n]);
                }
            }
            assert!(back == data, "echo differs");
            conn.send_close_notify();
            conn.write_tls(&mut sock).unwrap();
        });
        let (sock, _) = l.accept().await.unwrap();
        let s = TlsSock::accept(sock, built.config.clone(), None, 0)
            .await
            .unwrap();
        let f = s.facts();
        assert_eq!(f.sni.as_deref(), Some("www.example.com"));
        assert_eq!(f.alpn.as_deref(), Some(&b"http/1.1"[..]));
        assert_eq!(f.version, "TLSv1.3");
        assert!(!f.cipher.is_empty() && f.key_bits >= 128);
        assert!(!f.resumed && f.peer_certs.is_none());
        assert_eq!(echo(&s).await, 1_048_576);
        client.join().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_client_that_speaks_no_tls_fails_the_handshake() {
        let built = build(&BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-rsa.pem"))],
            ..Default::default()
        })
        .unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut sock = std::net::TcpStream::connect(addr).unwrap();
            sock.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut out = Vec::new();
            let _ = sock.read_to_end(&mut out);
            out
        });
        let (sock, _) = l.accept().await.unwrap();
        let e = TlsSock::accept(sock, built.config.clone(), None, 0)
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        let alert = client.join().unwrap();
        assert_eq!(alert.first(), Some(&0x15), "a TLS alert record: {alert:?}");
    }
}
