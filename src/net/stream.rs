//! A connected stream socket: TCP, UNIX (a path or a Linux abstract name), or TLS over either.
//!
//! HAProxy's listeners and servers take `unix@PATH`, plain `/paths` and `abns@NAME` as well as
//! IP addresses, and a session does the same work over either: reads, writes, half-closes and
//! splices. So the session code is written once over [`Stream`], a two-variant enum chosen at
//! accept or connect time, rather than over a trait object: each operation is a `match` on a
//! tag that the branch predictor learns per connection, with no allocation and no indirect
//! call, so the TCP path costs what it did with a bare `TcpStream`. Both variants are tokio
//! streams of the same shape (a registration and a descriptor); [`StdStream`] is the same pair
//! outside the reactor (a connection not registered yet, or parked while idle).
//!
//! A TLS connection ([`super::tls::TlsSock`], boxed: its rustls state is a few hundred bytes
//! that plain connections should not carry) offers the same readiness methods over plaintext.
//! What works on the descriptor itself does not apply to it: [`Stream::try_io`] refuses (so
//! `splice` is never tried on it; callers ask [`Stream::is_tls`] first). It leaves the reactor
//! with its rustls state ([`StdStream::Tls`]) when it idles with nothing in flight.
//!
//! A UNIX socket has no IP address: [`Stream::local_addr`] fails for it, as `getsockname`
//! gives nothing an IP consumer could use, and callers report what HAProxy reports (`unix`
//! and the listener's id in logs, no `src`/`dst` sample, no `X-Forwarded-For`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::tls::{ParkedTls, TlsSock};
use crate::config::model::UnixAddr;

/// A connected stream socket registered with the reactor.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsSock>),
}

/// A connected stream socket outside the reactor (non-blocking).
#[derive(Debug)]
pub enum StdStream {
    Tcp(std::net::TcpStream),
    Unix(StdUnixStream),
    /// A parked TLS connection (see [`Stream::into_std`]).
    Tls(Box<ParkedTls>),
}

/// Runs `$e` with `$s` bound to the socket of either variant.
macro_rules! either {
    ($v:expr, $s:ident => $e:expr) => {
        match $v {
            Stream::Tcp($s) => $e,
            Stream::Unix($s) => $e,
            Stream::Tls($s) => $e,
        }
    };
}

/// The error of a raw-descriptor operation asked of a TLS connection.
fn not_raw() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "a TLS connection's bytes go through its TLS state, not the raw socket",
    )
}

/// The error of an IP-only question asked of a UNIX socket.
fn no_ip() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "a UNIX socket has no IP address",
    )
}

impl Stream {
    /// Registers `s` with the current reactor.
    pub fn from_std(s: StdStream) -> io::Result<Stream> {
        Ok(match s {
            StdStream::Tcp(s) => Stream::Tcp(TcpStream::from_std(s)?),
            StdStream::Unix(s) => Stream::Unix(UnixStream::from_std(s)?),
            StdStream::Tls(p) => Stream::Tls(Box::new(TlsSock::resume(*p)?)),
        })
    }

    /// Takes the socket out of the reactor (a TLS connection with its rustls state, if
    /// [`Stream::can_park`]).
    pub fn into_std(self) -> io::Result<StdStream> {
        Ok(match self {
            Stream::Tcp(s) => StdStream::Tcp(s.into_std()?),
            Stream::Unix(s) => StdStream::Unix(s.into_std()?),
            Stream::Tls(s) => StdStream::Tls(Box::new(s.park()?)),
        })
    }

    /// Whether [`Stream::into_std`] may take the connection out of the reactor (a TLS
    /// connection with bytes in flight may not).
    pub fn can_park(&self) -> bool {
        match self {
            Stream::Tls(s) => s.can_park(),
            _ => true,
        }
    }

    /// Whether this is a TLS connection.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// The TLS connection, if this is one.
    pub fn tls(&self) -> Option<&TlsSock> {
        match self {
            Stream::Tls(s) => Some(s),
            _ => None,
        }
    }

    /// Whether this is a UNIX socket (TLS over one included).
    pub fn is_unix(&self) -> bool {
        match self {
            Stream::Unix(_) => true,
            Stream::Tls(s) => s.socket().is_unix(),
            Stream::Tcp(_) => false,
        }
    }

    /// Waits until the socket is readable (or closed).
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
            // Polled rather than awaited: `TlsSock::readable`'s future is several times the
            // size of a socket's, and this future (moved into each timer on the request path)
            // takes the size of its largest arm.
            Stream::Tls(s) => std::future::poll_fn(|cx| s.poll_read_ready(cx)).await,
        }
    }

    /// Waits until the socket reports an error (a reset from the peer), whatever is unread.
    /// Never resolves for a TLS connection.
    pub async fn error_ready(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.ready(Interest::ERROR).await.map(drop),
            Stream::Unix(s) => s.ready(Interest::ERROR).await.map(drop),
            Stream::Tls(_) => std::future::pending().await,
        }
    }

    /// Waits until the peer ends its side (`Ok(false)`: its FIN came in) or resets the
    /// connection (`Ok(true)`), whatever bytes are still unread: new bytes only clear the
    /// readiness and the wait goes on. Never resolves for a TLS connection.
    pub async fn end_ready(&self) -> io::Result<bool> {
        let would_block = || Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock));
        loop {
            let r = match self {
                Stream::Tcp(s) => s.ready(Interest::READABLE | Interest::ERROR).await?,
                Stream::Unix(s) => s.ready(Interest::READABLE | Interest::ERROR).await?,
                Stream::Tls(_) => return std::future::pending().await,
            };
            if r.is_error() {
                return Ok(true);
            }
            if r.is_read_closed() {
                return Ok(false);
            }
            // Bytes, not the end: the readiness is cleared and the next event awaited.
            let _ = match self {
                Stream::Tcp(s) => s.try_io(Interest::READABLE, would_block),
                Stream::Unix(s) => s.try_io(Interest::READABLE, would_block),
                Stream::Tls(_) => Ok(()),
            };
        }
    }

    /// Waits until the socket is writable.
    pub async fn writable(&self) -> io::Result<()> {
        either!(self, s => s.writable().await)
    }

    /// Reads what is there without waiting: `WouldBlock` when nothing is.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        either!(self, s => s.try_read(buf))
    }

    /// Writes what the socket takes without waiting: `WouldBlock` when it takes nothing.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        either!(self, s => s.try_write(buf))
    }

    /// Runs a system call `f` on the socket, clearing the readiness for `interest` when it
    /// returns `WouldBlock` (as tokio's `try_io`). Refused for a TLS connection.
    pub fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        match self {
            Stream::Tcp(s) => s.try_io(interest, f),
            Stream::Unix(s) => s.try_io(interest, f),
            Stream::Tls(_) => Err(not_raw()),
        }
    }

    /// Ends the write side (a FIN; for TLS, close_notify and the records still held first).
    pub async fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tls(s) => s.shutdown().await,
            s => socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write),
        }
    }

    /// Polls for read readiness.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => s.poll_read_ready(cx))
    }

    /// Peeks at the next bytes without waiting: `WouldBlock` when none are there, 0 when the
    /// peer closed.
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => {
                let mut rb = ReadBuf::new(buf);
                let mut cx = Context::from_waker(std::task::Waker::noop());
                match s.poll_peek(&mut cx, &mut rb) {
                    Poll::Ready(r) => r,
                    Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
                }
            }
            Stream::Unix(s) => s.try_io(Interest::READABLE, || {
                crate::sys::peek_nonblocking(s.as_fd(), buf)
            }),
            Stream::Tls(s) => s.try_peek(buf),
        }
    }

    /// Whether the peer has ended its side (its FIN came in), as the reactor last saw the
    /// socket (`EPOLLRDHUP`, which a peek cannot see behind unread bytes): every byte before
    /// the end is in the socket then, so a peek made after this says `true` sees the whole
    /// input. No system call. Always false for TLS, whose end is known only once its records
    /// are read.
    pub fn input_ended(&self) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let closed = |r: Poll<io::Result<tokio::io::Ready>>| matches!(r, Poll::Ready(Ok(r)) if r.is_read_closed());
        match self {
            Stream::Tcp(s) => closed(std::future::Future::poll(
                std::pin::pin!(s.ready(Interest::READABLE)),
                &mut cx,
            )),
            Stream::Unix(s) => closed(std::future::Future::poll(
                std::pin::pin!(s.ready(Interest::READABLE)),
                &mut cx,
            )),
            Stream::Tls(_) => false,
        }
    }

    /// Peeks at the next bytes, waiting for some (0: the peer closed).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.peek(buf).await,
            Stream::Tls(s) => s.peek(buf).await,
            Stream::Unix(_) => loop {
                self.readable().await?;
                match self.try_peek(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    r => return r,
                }
            },
        }
    }

    /// The local IP address of a TCP connection; an error for a UNIX socket, which has none.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.local_addr(),
            Stream::Tls(s) => s.socket().local_addr(),
            Stream::Unix(_) => Err(no_ip()),
        }
    }

    /// The peer's IP address of a TCP connection; an error for a UNIX socket.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr(),
            Stream::Tls(s) => s.socket().peer_addr(),
            Stream::Unix(_) => Err(no_ip()),
        }
    }

    /// Connects to a UNIX socket: a path, or an abstract name (padded as HAProxy pads it, see
    /// [`unix_sockaddr`]). A full backlog on the other side fails with `WouldBlock`, which the
    /// caller counts as a failed attempt.
    pub async fn connect_unix(addr: &UnixAddr) -> io::Result<Stream> {
        let to = unix_sockaddr(addr)?;
        let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        socket.set_cloexec(true)?;
        match socket.connect(&to) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let stream = UnixStream::from_std(StdUnixStream::from(std::os::fd::OwnedFd::from(socket)))?;
        stream.writable().await?;
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
        Ok(Stream::Unix(stream))
    }
}

/// The socket address of a UNIX address as HAProxy binds and connects it: a path as is; an
/// abstract name padded with zeros to the whole `sun_path` (HAProxy passes the full
/// `sockaddr_un` size), so that Bascule and HAProxy reach each other's `abns@` sockets.
pub fn unix_sockaddr(addr: &UnixAddr) -> io::Result<socket2::SockAddr> {
    use std::os::unix::ffi::OsStrExt;
    const SUN_PATH: usize = 108;
    match addr {
        UnixAddr::Path(p) => socket2::SockAddr::unix(p),
        UnixAddr::Abstract(name) => {
            let mut bytes = [0u8; SUN_PATH];
            let name = name.as_bytes();
            if name.len() >= SUN_PATH {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "abstract socket name too long (at most {} bytes)",
                        SUN_PATH - 1
                    ),
                ));
            }
            bytes[1..=name.len()].copy_from_slice(name);
            socket2::SockAddr::unix(std::ffi::OsStr::from_bytes(&bytes))
        }
    }
}

impl StdStream {
    /// Whether this is a UNIX socket (TLS over one included).
    pub fn is_unix(&self) -> bool {
        match self {
            StdStream::Unix(_) => true,
            StdStream::Tls(p) => p.socket().is_unix(),
            StdStream::Tcp(_) => false,
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
            Stream::Tls(s) => s.socket().as_fd(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl AsFd for StdStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            StdStream::Tcp(s) => s.as_fd(),
            StdStream::Unix(s) => s.as_fd(),
            StdStream::Tls(p) => p.socket().as_fd(),
        }
    }
}

impl AsRawFd for StdStream {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

// The TLS arms of the poll functions below live out of line: inline, their loops made the
// functions too large to inline into their callers, which cost the TCP path ~100 instructions a
// request (measured with bench/callgrind.sh).

#[inline(never)]
fn tls_poll_read(s: &TlsSock, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
    loop {
        match s.try_read(buf.initialize_unfilled()) {
            Ok(n) => {
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::task::ready!(s.poll_read_ready(cx))?
            }
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

#[inline(never)]
fn tls_poll_write(s: &TlsSock, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(s.poll_write_ready(cx))?;
        match s.try_write(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return Poll::Ready(r),
        }
    }
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => tls_poll_read(s, cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => tls_poll_write(s, cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => s.poll_flushed(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => s.poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn unix_paths_and_abstract_names_connect() {
        let dir = std::env::temp_dir().join(format!("bascule-stream-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let l = tokio::net::UnixListener::bind(&path).unwrap();
        let mut c = Stream::connect_unix(&UnixAddr::Path(path.clone()))
            .await
            .unwrap();
        let (mut a, _) = l.accept().await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut b = [0u8; 4];
        a.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"ping");
        let mut p = [0u8; 8];
        a.write_all(b"pong").await.unwrap();
        assert_eq!(c.peek(&mut p).await.unwrap(), 4);
        assert_eq!(c.try_peek(&mut p).unwrap(), 4, "a peek leaves the bytes");
        assert_eq!(c.try_read(&mut p).unwrap(), 4);
        assert!(c.local_addr().is_err(), "no IP address");
        let _ = std::fs::remove_file(&path);

        // An abstract name is padded to the whole sun_path, as HAProxy does.
        let name = format!("bascule-test-{}", std::process::id());
        let sa = unix_sockaddr(&UnixAddr::Abstract(name.clone())).unwrap();
        assert_eq!(sa.len() as usize, 2 + 108);
        let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        s.bind(&sa).unwrap();
        s.listen(1).unwrap();
        assert!(Stream::connect_unix(&UnixAddr::Abstract(name))
            .await
            .is_ok());
        let refused = Stream::connect_unix(&UnixAddr::Abstract("bascule-none".into())).await;
        assert!(refused.is_err());
    }
}
