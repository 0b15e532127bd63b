//! Reading the PROXY protocol header of a connection accepted on an `accept-proxy` bind,
//! before anything else reads it (the TLS handshake, the HTTP parser, the TCP forwarder).
//!
//! The header is peeked, not read, then exactly its bytes are consumed, so the client's own
//! first bytes stay in the socket for whoever comes next (a version 1 line is often in the
//! same segment as the request). As in HAProxy (`conn_recv_proxy`), the first bytes that
//! arrive must hold the whole header: a part of one is refused as truncated (a peek cannot
//! wait for more of what it already saw).

use std::io;
use std::time::Duration;

use tokio::io::Interest;

use super::stream::StdStream;
use crate::proto::proxy::{self, Header};

/// Largest header accepted (HAProxy's: what fits its buffer).
const MAX_HEADER: usize = 16 * 1024;

/// Why no header was read, in HAProxy's words for the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The client closed, or sent nothing within `timeout client`.
    Closed,
    Timeout,
    Invalid(proxy::Error),
    Socket,
}

impl Failure {
    pub fn words(self) -> &'static str {
        match self {
            Failure::Closed => "Connection closed while waiting for PROXY protocol header",
            Failure::Timeout => "Timeout while waiting for PROXY protocol header",
            Failure::Invalid(e) => e.words(),
            Failure::Socket => "Error while waiting for PROXY protocol header",
        }
    }

    /// Nothing was received (`option dontlognull` logs nothing then).
    pub fn empty(self) -> bool {
        matches!(self, Failure::Closed | Failure::Timeout)
    }
}

/// A socket the header can be peeked from and consumed on.
trait Peek: std::os::fd::AsFd {
    async fn ready(&self) -> io::Result<()>;
    fn attempt<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
    fn read_now(&self, buf: &mut [u8]) -> io::Result<usize>;
}

impl Peek for tokio::net::TcpStream {
    async fn ready(&self) -> io::Result<()> {
        self.readable().await
    }
    fn attempt<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.try_io(Interest::READABLE, f)
    }
    fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.try_read(buf)
    }
}

impl Peek for tokio::net::UnixStream {
    async fn ready(&self) -> io::Result<()> {
        self.readable().await
    }
    fn attempt<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.try_io(Interest::READABLE, f)
    }
    fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.try_read(buf)
    }
}

/// Reads the header at the start of `stream` within `limit`; gives the stream back (its
/// next byte is the client's first) with what the header said.
pub async fn read_header(
    stream: StdStream,
    limit: Option<Duration>,
) -> Result<(StdStream, Header), Failure> {
    let deadline = limit.map(|l| tokio::time::Instant::now() + l);
    match stream {
        StdStream::Tcp(s) => {
            let s = tokio::net::TcpStream::from_std(s).map_err(|_| Failure::Socket)?;
            let h = on(&s, deadline).await?;
            let s = s.into_std().map_err(|_| Failure::Socket)?;
            Ok((StdStream::Tcp(s), h))
        }
        StdStream::Unix(s) => {
            let s = tokio::net::UnixStream::from_std(s).map_err(|_| Failure::Socket)?;
            let h = on(&s, deadline).await?;
            let s = s.into_std().map_err(|_| Failure::Socket)?;
            Ok((StdStream::Unix(s), h))
        }
        // A parked connection is never new: it read its header when it was.
        StdStream::Tls(_) => Err(Failure::Socket),
    }
}

async fn on(s: &impl Peek, deadline: Option<tokio::time::Instant>) -> Result<Header, Failure> {
    let mut buf = vec![0u8; MAX_HEADER];
    loop {
        let ready = s.ready();
        match deadline {
            Some(d) => match tokio::time::timeout_at(d, ready).await {
                Ok(r) => r.map_err(|_| Failure::Socket)?,
                Err(_) => return Err(Failure::Timeout),
            },
            None => ready.await.map_err(|_| Failure::Socket)?,
        }
        let n = match s.attempt(|| crate::sys::peek_nonblocking(s.as_fd(), &mut buf)) {
            Ok(n) => n,
            // A wake-up with nothing to read: wait again.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return Err(Failure::Socket),
        };
        if n == 0 {
            return Err(Failure::Closed);
        }
        return match proxy::parse(&buf[..n]) {
            Ok(Some(h)) => consume(s, h.len).map(|()| h),
            Ok(None) => Err(Failure::Invalid(proxy::Error::Truncated)),
            Err(e) => Err(Failure::Invalid(e)),
        };
    }
}

/// Reads and drops the header's `len` bytes, already in the socket.
fn consume(s: &impl Peek, len: usize) -> Result<(), Failure> {
    let mut sink = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = s.read_now(&mut sink[done..]).map_err(|_| Failure::Socket)?;
        if n == 0 {
            return Err(Failure::Socket);
        }
        done += n;
    }
    Ok(())
}
