//! Layer-4 forwarding: moves bytes both ways between a client and a server connection.
//!
//! The two directions are independent half-duplex pumps joined in one task, so a direction that
//! is stalled on a slow writer never blocks the other one (a single loop that reads one side and
//! then blocks writing to the other can deadlock two peers that both write before reading).
//! End of stream on one side becomes `shutdown(SHUT_WR)` on the other side while the other
//! direction keeps flowing: that is TCP half-close, which protocols such as `rsh`-style "send
//! everything, then read the reply" depend on.
//!
//! Inactivity is bounded per side, as HAProxy does: a side is active when bytes are read from it
//! or written to it. Each side's timeout is chosen by [`SideTimeouts`]: the `-fin` timeout once
//! that side is half-closed, else the tunnel timeout when set, else the plain one.

use std::cell::Cell;
use std::io;
use std::time::Duration;

use super::stream::Stream;
use tokio::time::Instant;

use crate::base::pool::Pool;
use crate::config::model::{Backend, Frontend, ProxyOptions};
use crate::net::drained;
use crate::net::pipe::{self, Pipe};

/// The timeouts of one side (client or server) of a forwarded connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct SideTimeouts {
    /// `timeout client` / `timeout server`.
    pub idle: Option<Duration>,
    /// `timeout tunnel`: replaces `idle` once both sides are connected.
    pub tunnel: Option<Duration>,
    /// `timeout client-fin` / `timeout server-fin`: replaces the others once half-closed.
    pub fin: Option<Duration>,
}

impl SideTimeouts {
    /// The client side's timeouts of a session from frontend `fe` to backend `be`.
    pub fn client(fe: &Frontend, be: &Backend) -> Self {
        SideTimeouts {
            idle: fe.timeouts.client,
            tunnel: be.timeouts.tunnel,
            fin: fe.timeouts.client_fin,
        }
    }

    /// The server side's timeouts of a session to backend `be`.
    pub fn server(be: &Backend) -> Self {
        SideTimeouts {
            idle: be.timeouts.server,
            tunnel: be.timeouts.tunnel,
            fin: be.timeouts.server_fin,
        }
    }

    fn current(&self, half_closed: bool) -> Option<Duration> {
        if half_closed && self.fin.is_some() {
            return self.fin;
        }
        self.tunnel.or(self.idle)
    }
}

/// Which side a forwarding outcome concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Why forwarding stopped before both directions ended normally.
#[derive(Debug)]
pub enum ForwardError {
    /// No activity on that side for its timeout.
    Timeout(Side),
    /// A read or write on that side failed.
    Io(Side, io::Error),
}

impl std::fmt::Display for ForwardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForwardError::Timeout(side) => write!(f, "{side:?} side timed out"),
            ForwardError::Io(side, e) => write!(f, "{side:?} side: {e}"),
        }
    }
}

/// Byte counts of a forwarded connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transferred {
    /// From the client to the server.
    pub to_server: u64,
    /// From the server to the client.
    pub to_client: u64,
}

/// Activity bookkeeping of one side, shared by the two pumps and the watchdog of one session
/// (all in one task, so `Cell` suffices).
struct Activity {
    last: Cell<Instant>,
    /// Bytes read from this side and written to the other.
    moved: Cell<u64>,
    half_closed: Cell<bool>,
    timeouts: SideTimeouts,
}

impl Activity {
    fn new(timeouts: SideTimeouts) -> Self {
        Activity {
            last: Cell::new(Instant::now()),
            moved: Cell::new(0),
            half_closed: Cell::new(false),
            timeouts,
        }
    }

    fn touch(&self) {
        self.last.set(Instant::now());
    }

    fn deadline(&self) -> Option<Instant> {
        self.timeouts
            .current(self.half_closed.get())
            .map(|t| self.last.get() + t)
    }
}

/// How one direction moves its bytes: through a user-space buffer, or spliced through a kernel
/// pipe (`option splice-request` / `splice-response`), or spliced once the transfer looks bulky
/// (`option splice-auto`: after a read fills the whole buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpliceMode {
    #[default]
    Off,
    Auto,
    Always,
}

/// The splice modes of both directions of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Splice {
    /// Client to server.
    pub request: SpliceMode,
    /// Server to client.
    pub response: SpliceMode,
}

impl Splice {
    /// The modes the `option splice-*` flags of a frontend and a backend ask for (either proxy
    /// may enable them, as in HAProxy).
    pub fn of(fe: &ProxyOptions, be: &ProxyOptions) -> Self {
        let auto = fe.splice_auto || be.splice_auto;
        let mode = |always: bool| {
            if always {
                SpliceMode::Always
            } else if auto {
                SpliceMode::Auto
            } else {
                SpliceMode::Off
            }
        };
        Splice {
            request: mode(fe.splice_request || be.splice_request),
            response: mode(fe.splice_response || be.splice_response),
        }
    }
}

/// Forwards between `client` and `server` until both directions have ended, one side fails or a
/// side stays inactive past its timeout. `bufsize` bounds the bytes held per direction in user
/// space; `splice` chooses, per direction, whether they pass through user space at all.
pub async fn forward(
    client: &Stream,
    server: &Stream,
    client_timeouts: SideTimeouts,
    server_timeouts: SideTimeouts,
    bufsize: usize,
    splice: Splice,
) -> Result<Transferred, ForwardError> {
    let (_, r) = forward_counted(
        client,
        server,
        client_timeouts,
        server_timeouts,
        bufsize,
        splice,
    )
    .await;
    r
}

/// Like [`forward`], also giving the bytes moved when forwarding failed (for logs).
pub async fn forward_counted(
    client: &Stream,
    server: &Stream,
    client_timeouts: SideTimeouts,
    server_timeouts: SideTimeouts,
    bufsize: usize,
    splice: Splice,
) -> (Transferred, Result<Transferred, ForwardError>) {
    let c = Activity::new(client_timeouts);
    let s = Activity::new(server_timeouts);
    let up = Direction {
        from: (client, &c, Side::Client),
        to: (server, &s, Side::Server),
        bufsize,
        splice: splice.request,
    };
    let down = Direction {
        from: (server, &s, Side::Server),
        to: (client, &c, Side::Client),
        bufsize,
        splice: splice.response,
    };
    let pumps = async { tokio::try_join!(up.pump(), down.pump()) };
    let watchdog = async {
        loop {
            let next = match (c.deadline(), s.deadline()) {
                (Some(a), Some(b)) => Some(if a <= b {
                    (a, Side::Client)
                } else {
                    (b, Side::Server)
                }),
                (Some(a), None) => Some((a, Side::Client)),
                (None, Some(b)) => Some((b, Side::Server)),
                (None, None) => None,
            };
            let Some((at, side)) = next else {
                return std::future::pending::<ForwardError>().await;
            };
            tokio::time::sleep_until(at).await;
            // Activity may have moved the deadline while we slept.
            let still = match side {
                Side::Client => c.deadline(),
                Side::Server => s.deadline(),
            };
            if still.is_some_and(|d| d <= Instant::now()) {
                return ForwardError::Timeout(side);
            }
        }
    };
    let r = tokio::select! {
        r = pumps => r.map(|(to_server, to_client)| Transferred { to_server, to_client }),
        e = watchdog => Err(e),
    };
    let moved = Transferred {
        to_server: c.moved.get(),
        to_client: s.moved.get(),
    };
    (moved, r)
}

/// Buffers kept per worker thread for reuse, so a short connection does not pay an allocation
/// and a 16 KiB zeroing per direction. Bounded: past `POOL_MAX` buffers, extras are freed; after
/// a burst, what stayed unused goes (see [`crate::base::pool`] and [`shrink_pool`]).
const POOL_MAX: usize = 256;

thread_local! {
    static POOL: Pool<Box<[u8]>> = const { Pool::new(POOL_MAX) };
}

/// Frees the buffers of this worker's pool that no transfer needed since the last call; returns
/// how many bytes. Called from the worker's periodic look (`runtime::reclaim`).
pub fn shrink_pool() -> usize {
    POOL.try_with(|p| p.shrink(|b| b.len())).unwrap_or(0)
}

/// A forwarding buffer borrowed from the worker's pool and given back when dropped.
pub(crate) struct PooledBuf(Box<[u8]>);

impl PooledBuf {
    pub(crate) fn take(size: usize) -> Self {
        let reused = POOL
            .try_with(|p| p.take_if(|b| b.len() == size))
            .ok()
            .flatten();
        PooledBuf(reused.unwrap_or_else(|| vec![0u8; size].into_boxed_slice()))
    }
}

impl std::ops::Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        // At thread exit the pool may be gone already: the buffer is then simply freed.
        let _ = POOL.try_with(|p| p.put(buf));
    }
}

/// One direction of a forwarded connection: a socket, its activity record and which side it is.
struct Direction<'a> {
    from: (&'a Stream, &'a Activity, Side),
    to: (&'a Stream, &'a Activity, Side),
    bufsize: usize,
    splice: SpliceMode,
}

impl Direction<'_> {
    /// Moves bytes until `from` ends its stream, then shuts down `to`'s write side. Returns the
    /// number of bytes moved.
    async fn pump(self) -> Result<u64, ForwardError> {
        let (from, src, src_side) = self.from;
        let (to, dst, dst_side) = self.to;
        let read_err = |e| ForwardError::Io(src_side, e);
        let write_err = |e| ForwardError::Io(dst_side, e);
        // Without a pipe (none asked for, or none to be had: out of descriptors), bytes go
        // through a buffer, taken from the worker's pool at the first read.
        // TLS bytes are encrypted or decrypted in user space: never spliced.
        let splice = if from.is_tls() || to.is_tls() {
            SpliceMode::Off
        } else {
            self.splice
        };
        let mut pipe = match splice {
            SpliceMode::Always => Pipe::take().ok(),
            _ => None,
        };
        let mut buf: Option<PooledBuf> = None;
        let mut total = 0u64;
        loop {
            let n = if let Some(pipe) = pipe.as_mut() {
                let n = pipe.fill(from, pipe::CHUNK).await.map_err(read_err)?;
                src.touch();
                if n == 0 {
                    break;
                }
                pipe.drain(to).await.map_err(write_err)?;
                n
            } else {
                let b = buf.get_or_insert_with(|| PooledBuf::take(self.bufsize));
                let n = read(from, b).await.map_err(read_err)?;
                src.touch();
                if n == 0 {
                    break;
                }
                write_all(to, &b[..n]).await.map_err(write_err)?;
                if splice == SpliceMode::Auto && n == b.len() {
                    // A full buffer: a bulk transfer, worth a pipe from now on.
                    pipe = Pipe::take().ok();
                    if pipe.is_some() {
                        buf = None;
                    }
                }
                n
            };
            dst.touch();
            total += n as u64;
            src.moved.set(total);
        }
        src.half_closed.set(true);
        dst.half_closed.set(true);
        // A peer that already closed both ways makes shutdown fail with ENOTCONN: the direction
        // is over either way.
        let _ = to.shutdown_write().await;
        Ok(total)
    }
}

/// Reads what `from` has, waiting until it has something; 0 at end of stream.
async fn read(from: &Stream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        from.readable().await?;
        match from.try_read(buf) {
            Ok(n) => {
                if n > 0 && n < buf.len() {
                    drained(from);
                }
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes all of `bytes` to `to`, waiting while it cannot take more.
async fn write_all(to: &Stream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        to.writable().await?;
        match to.try_write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn pair() -> (Stream, Stream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        (Stream::Tcp(a), Stream::Tcp(b))
    }

    fn unix_pair() -> (Stream, Stream) {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        (Stream::Unix(a), Stream::Unix(b))
    }

    #[test]
    fn timeouts_choose_fin_then_tunnel_then_idle() {
        let t = SideTimeouts {
            idle: Some(Duration::from_secs(1)),
            tunnel: Some(Duration::from_secs(2)),
            fin: Some(Duration::from_secs(3)),
        };
        assert_eq!(t.current(false), Some(Duration::from_secs(2)));
        assert_eq!(t.current(true), Some(Duration::from_secs(3)));
        let t = SideTimeouts {
            idle: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        assert_eq!(t.current(true), Some(Duration::from_secs(1)));
    }

    #[tokio::test]
    async fn half_close_both_ways_and_counts() {
        half_close_both_ways(Splice::default(), false).await;
        half_close_both_ways(Splice::default(), true).await;
    }

    fn both_ways(mode: SpliceMode) -> Splice {
        Splice {
            request: mode,
            response: mode,
        }
    }

    #[tokio::test]
    async fn half_close_both_ways_spliced() {
        half_close_both_ways(both_ways(SpliceMode::Always), false).await;
        // splice(2) moves bytes between a TCP and a UNIX socket just as well.
        half_close_both_ways(both_ways(SpliceMode::Always), true).await;
    }

    #[tokio::test]
    async fn half_close_both_ways_splice_auto() {
        half_close_both_ways(both_ways(SpliceMode::Auto), false).await;
        half_close_both_ways(both_ways(SpliceMode::Auto), true).await;
    }

    /// Forwards between a TCP client and a TCP server, or a UNIX one when `unix_server`.
    async fn half_close_both_ways(splice: Splice, unix_server: bool) {
        let (mut client_far, client) = pair().await;
        let (server, mut server_far) = if unix_server {
            unix_pair()
        } else {
            pair().await
        };
        let fwd = forward(
            &client,
            &server,
            SideTimeouts::default(),
            SideTimeouts::default(),
            1024,
            splice,
        );
        let peers = async {
            client_far.write_all(b"hello").await.unwrap();
            client_far.shutdown().await.unwrap();
            let mut got = Vec::new();
            server_far.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"hello");
            // The other direction still flows after the client's half-close.
            let reply: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
            server_far.write_all(&reply).await.unwrap();
            server_far.shutdown().await.unwrap();
            let mut back = Vec::new();
            client_far.read_to_end(&mut back).await.unwrap();
            assert!(
                back == reply,
                "{} bytes came back, not the same",
                back.len()
            );
        };
        let (t, ()) = tokio::join!(fwd, peers);
        assert_eq!(
            t.unwrap(),
            Transferred {
                to_server: 5,
                to_client: 1_000_000
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_client_times_out() {
        let (_client_far, client) = pair().await;
        let (server, _server_far) = pair().await;
        let client_t = SideTimeouts {
            idle: Some(Duration::from_millis(300)),
            ..Default::default()
        };
        let r = forward(
            &client,
            &server,
            client_t,
            SideTimeouts::default(),
            64,
            Splice::default(),
        )
        .await;
        assert!(
            matches!(r, Err(ForwardError::Timeout(Side::Client))),
            "{r:?}"
        );
    }
}
