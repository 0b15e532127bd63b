//! A client connection that joins the reactor only when it first has to wait.
//!
//! Registering a socket with tokio costs an `epoll_ctl(ADD)`, and dropping it an
//! `epoll_ctl(DEL)`. A short HTTP connection often never waits on its client: the request is in
//! the socket when it is accepted (or when a parked connection is resumed, see `idle`), and the
//! small response fits in the socket's send buffer. Such a connection is served with plain
//! non-blocking reads and writes, and closed without touching the reactor at all: two fewer
//! system calls per connection, on a path where the kernel's work is most of the cost. The first
//! read or write that would block registers the socket, and from then on it is an ordinary
//! tokio stream (a new registration reports the socket's current readiness, so no wake-up is
//! lost in between).
//!
//! It holds a TCP or a UNIX socket alike ([`crate::net::stream`]). A TLS connection is
//! registered from the start (its handshake waited on the socket already).

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stream::{StdStream, Stream};

/// A non-blocking stream socket, registered with the reactor on its first wait.
#[derive(Debug)]
pub struct LazyStream(State);

#[derive(Debug)]
enum State {
    /// Not registered: every operation is a plain non-blocking system call.
    Plain(StdStream),
    Registered(Stream),
    /// Only while switching from `Plain` to `Registered`, and after a failed registration.
    Gone,
}

impl LazyStream {
    /// Wraps `socket`, which must be in non-blocking mode. A parked TLS connection joins the
    /// reactor at once: its bytes go through rustls, never through a plain read.
    pub fn new(socket: StdStream) -> Self {
        match socket {
            StdStream::Tls(_) => match Stream::from_std(socket) {
                Ok(s) => LazyStream(State::Registered(s)),
                Err(_) => LazyStream(State::Gone),
            },
            plain => LazyStream(State::Plain(plain)),
        }
    }

    /// Whether the connection may leave the reactor to be parked (see `Stream::can_park`).
    pub fn can_park(&self) -> bool {
        match &self.0 {
            State::Registered(s) => s.can_park(),
            State::Plain(_) => true,
            State::Gone => false,
        }
    }

    /// Makes the close send a reset (`SO_LINGER` 0), as HAProxy closes a connection that a
    /// `tcp-request connection` rule rejected.
    pub fn reset_on_close(&self) {
        use std::os::fd::AsFd;
        let fd = match &self.0 {
            State::Plain(s) => s.as_fd(),
            State::Registered(s) => s.as_fd(),
            State::Gone => return,
        };
        let _ = socket2::SockRef::from(&fd).set_linger(Some(std::time::Duration::ZERO));
    }

    /// What the kernel knows of the connection (`TCP_INFO`); `None` for a UNIX socket or a
    /// connection that is gone.
    pub fn tcp_info(&self) -> Option<libc::tcp_info> {
        use std::os::fd::AsFd;
        let fd = match &self.0 {
            State::Plain(s) => s.as_fd(),
            State::Registered(s) => s.as_fd(),
            State::Gone => return None,
        };
        if self.is_unix() {
            return None;
        }
        crate::sys::tcp_info(fd).ok()
    }

    /// A TLS connection whose handshake is done.
    pub fn tls(socket: Box<super::tls::TlsSock>) -> Self {
        LazyStream(State::Registered(Stream::Tls(socket)))
    }

    /// The TLS connection, if this is one.
    pub fn as_tls(&self) -> Option<&super::tls::TlsSock> {
        match &self.0 {
            State::Registered(s) => s.tls(),
            _ => None,
        }
    }

    /// Whether this is a TLS connection (which is never parked: see `stream`).
    pub fn is_tls(&self) -> bool {
        self.as_tls().is_some()
    }

    /// Whether the socket has joined the reactor.
    pub fn is_registered(&self) -> bool {
        matches!(self.0, State::Registered(_))
    }

    /// The registered stream, registering it now if need be (for the code that waits on the
    /// socket directly: tunnels, splicing, peeking).
    pub fn registered(&mut self) -> io::Result<&Stream> {
        if let State::Plain(_) = self.0 {
            let State::Plain(socket) = std::mem::replace(&mut self.0, State::Gone) else {
                unreachable!("matched just above")
            };
            self.0 = State::Registered(Stream::from_std(socket)?);
        }
        match &self.0 {
            State::Registered(s) => Ok(s),
            _ => Err(gone()),
        }
    }

    /// Waits until the socket is readable (or closed).
    pub async fn readable(&mut self) -> io::Result<()> {
        self.registered()?.readable().await
    }

    /// Reads what is there without waiting: `WouldBlock` when nothing is.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.0 {
            State::Plain(s) => read_retrying(s, buf),
            State::Registered(s) => s.try_read(buf),
            State::Gone => Err(gone()),
        }
    }

    /// Peeks at the next bytes, waiting for some (0: the peer closed).
    pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.registered()?.peek(buf).await
    }

    /// The local IP address of the connection (an error for a UNIX socket, which has none).
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match &self.0 {
            State::Plain(StdStream::Tcp(s)) => s.local_addr(),
            State::Plain(StdStream::Tls(p)) => p.socket().local_addr(),
            State::Plain(StdStream::Unix(_)) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a UNIX socket has no IP address",
            )),
            State::Registered(s) => s.local_addr(),
            State::Gone => Err(gone()),
        }
    }

    /// The peer's IP address (an error for a UNIX socket, which has none).
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match &self.0 {
            State::Plain(StdStream::Tcp(s)) => s.peer_addr(),
            State::Plain(StdStream::Tls(p)) => p.socket().peer_addr(),
            State::Plain(StdStream::Unix(_)) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a UNIX socket has no IP address",
            )),
            State::Registered(s) => s.peer_addr(),
            State::Gone => Err(gone()),
        }
    }

    /// Whether this is a UNIX socket.
    pub fn is_unix(&self) -> bool {
        match &self.0 {
            State::Plain(s) => s.is_unix(),
            State::Registered(s) => s.is_unix(),
            State::Gone => false,
        }
    }

    /// The socket, out of the reactor, for holding while idle (see `idle`).
    pub fn into_std(self) -> io::Result<StdStream> {
        match self.0 {
            State::Plain(s) => Ok(s),
            State::Registered(s) => s.into_std(),
            State::Gone => Err(gone()),
        }
    }

    fn as_tokio(&mut self) -> io::Result<Pin<&mut Stream>> {
        self.registered()?;
        match &mut self.0 {
            State::Registered(s) => Ok(Pin::new(s)),
            _ => Err(gone()),
        }
    }
}

fn gone() -> io::Error {
    io::Error::other("the socket could not be registered with the reactor")
}

fn read_retrying(s: &StdStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        let r = match s {
            StdStream::Tcp(s) => (&*s).read(buf),
            StdStream::Unix(s) => (&*s).read(buf),
            StdStream::Tls(_) => return Err(gone()),
        };
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

fn write_retrying(s: &StdStream, buf: &[u8]) -> io::Result<usize> {
    loop {
        let r = match s {
            StdStream::Tcp(s) => (&*s).write(buf),
            StdStream::Unix(s) => (&*s).write(buf),
            StdStream::Tls(_) => return Err(gone()),
        };
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

impl AsyncRead for LazyStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let State::Plain(s) = &this.0 {
            match read_retrying(s, buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        match this.as_tokio() {
            Ok(s) => s.poll_read(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for LazyStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let State::Plain(s) = &this.0 {
            match write_retrying(s, buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
        match this.as_tokio() {
            Ok(s) => s.poll_write(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Plain writes go straight to the socket; a TLS connection may hold records.
        match &mut self.get_mut().0 {
            State::Registered(s @ Stream::Tls(_)) => Pin::new(s).poll_flush(cx),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.0 {
            State::Plain(StdStream::Tcp(s)) => Poll::Ready(s.shutdown(std::net::Shutdown::Write)),
            State::Plain(StdStream::Unix(s)) => Poll::Ready(s.shutdown(std::net::Shutdown::Write)),
            State::Plain(StdStream::Tls(_)) => Poll::Ready(Err(gone())),
            State::Registered(s) => Pin::new(s).poll_shutdown(cx),
            State::Gone => Poll::Ready(Err(gone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use tokio::net::TcpStream;

    async fn pair() -> (LazyStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (LazyStream::new(StdStream::Tcp(s.into_std().unwrap())), peer)
    }

    #[tokio::test]
    async fn a_unix_socket_works_the_same() {
        let (a, mut peer) = tokio::net::UnixStream::pair().unwrap();
        let mut s = LazyStream::new(StdStream::Unix(a.into_std().unwrap()));
        assert!(s.is_unix() && s.local_addr().is_err());
        peer.write_all(b"hi").await.unwrap();
        let mut b = [0u8; 4];
        let n = s.read(&mut b).await.unwrap();
        assert_eq!(&b[..n], b"hi");
        s.write_all(b"yo").await.unwrap();
        s.shutdown().await.unwrap();
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"yo");
        let reader = tokio::spawn(async move {
            let n = s.read(&mut b).await.unwrap();
            (s.is_registered(), n)
        });
        tokio::task::yield_now().await;
        peer.write_all(b"x").await.unwrap();
        assert_eq!(reader.await.unwrap(), (true, 1));
    }

    #[tokio::test]
    async fn data_already_there_is_read_without_registering() {
        let (mut s, mut peer) = pair().await;
        peer.write_all(b"hello").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let mut b = [0u8; 16];
        let n = s.read(&mut b).await.unwrap();
        assert_eq!(&b[..n], b"hello");
        s.write_all(b"back").await.unwrap();
        assert!(!s.is_registered(), "no wait, no registration");
        let n = peer.read(&mut b).await.unwrap();
        assert_eq!(&b[..n], b"back");
    }

    #[tokio::test]
    async fn a_read_that_would_block_registers_and_wakes_up() {
        let (mut s, mut peer) = pair().await;
        let reader = tokio::spawn(async move {
            let mut b = [0u8; 16];
            let n = s.read(&mut b).await.unwrap();
            (s.is_registered(), b[..n].to_vec())
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        peer.write_all(b"late").await.unwrap();
        let (registered, got) = reader.await.unwrap();
        assert!(registered);
        assert_eq!(got, b"late");
    }

    #[tokio::test]
    async fn try_read_and_shutdown_work_unregistered() {
        let (mut s, mut peer) = pair().await;
        let mut b = [0u8; 4];
        let e = s.try_read(&mut b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        s.shutdown().await.unwrap();
        assert!(!s.is_registered());
        assert_eq!(peer.read(&mut b).await.unwrap(), 0, "the peer sees the FIN");
        let std = s.into_std().unwrap();
        drop(std);
    }
}
