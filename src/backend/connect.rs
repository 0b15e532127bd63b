//! Connecting to a server: HAProxy's connection loop (pick, connect within `timeout connect`,
//! and on a refused or timed-out attempt retry up to `retries` times, on another server when
//! `option redispatch` says so, otherwise on the same one after HAProxy's turn-around delay),
//! the queues where a request waits for a server under its `maxconn`, the PROXY v1 line
//! of `send-proxy`, and the TLS handshake of `server ... ssl`.
//!
//! The handshake is part of the connect, as in HAProxy: `timeout connect` bounds the TCP
//! connect and the handshake together (`%Tc` covers both), and a failed handshake is a failed
//! attempt (retried, redispatched, `SC` when none succeeds). The SNI of each connection comes
//! from the caller ([`SniValues`]: the backend's `sni` expressions evaluated on the stream).
//!
//! Each attempt's outcome goes to passive health ([`super::passive::observe`]), which records
//! it on the server's state; the connector never calls the checker.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;

use crate::net::stream::Stream;

use super::passive::observe;
use super::picker::Picker;
use super::server::{Outcome, ServerState};
use super::Backend;
use crate::config::model::{Balance, Server};

/// Why no server connection could be made.
#[derive(Debug)]
pub enum ConnectError {
    /// No server is usable (all down, disabled, drained, or full past `timeout queue`).
    NoServer,
    /// Every usable server stayed full for `timeout queue` (`sQ`; counted in `econ`).
    QueueTimeout(QueueSpot),
    /// The client of a TCP-mode session left while its session waited in a queue: it closed
    /// having sent nothing (`CQ`), or reset its connection (`CD`, counted in `cli_abrt`).
    /// HAProxy notices either at once and frees the place in the queue.
    ClientLeftQueue { spot: QueueSpot, reset: bool },
    /// Every attempt failed; the last error is kept.
    Failed {
        server: String,
        attempts: u32,
        /// A retry went to another server (`option redispatch`): `%rc` shows a `+`.
        redispatched: bool,
        last: io::Error,
    },
    /// The client of a TCP-mode session ended its side, having sent nothing, while a failed
    /// attempt waited to be retried (HAProxy's client abort during connection retries:
    /// `CC`, or `CD` for a reset).
    ClientGone {
        server: String,
        /// The attempts that had failed.
        retries: u32,
        redispatched: bool,
        /// The client reset the connection rather than closing it.
        reset: bool,
    },
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::NoServer => f.write_str("no server available"),
            ConnectError::QueueTimeout(_) => f.write_str("timed out in the queue"),
            ConnectError::ClientLeftQueue { reset, .. } => write!(
                f,
                "the client {} while waiting in the queue",
                if *reset { "reset" } else { "left" }
            ),
            ConnectError::Failed {
                server,
                attempts,
                last,
                ..
            } => write!(
                f,
                "connection to server '{server}' failed after {attempts} attempt(s): {last}"
            ),
            ConnectError::ClientGone {
                server, retries, ..
            } => write!(
                f,
                "the client left while the connection to server '{server}' waited for a retry \
                 ({retries} attempt(s) failed)"
            ),
        }
    }
}

/// One unit of a server's connection count, released when dropped (also when a connect in
/// flight is abandoned), so `maxconn` stays exact.
pub struct ServerSlot<'a> {
    backend: &'a Backend,
    /// The server's index (u32: a slot, with its flag, fits in 16 bytes, which keeps a
    /// session's server connection within the 128 bytes moved without a `memcpy` call).
    server: u32,
    /// Counted on the gauge's shared line, against a limit (the server had a `maxconn` when
    /// the slot was taken; an agent may change it meanwhile).
    limited: bool,
}

impl<'a> ServerSlot<'a> {
    /// Counts one more connection on `server` until the slot is dropped, unless that would
    /// exceed the server's `maxconn` (the count is checked and raised in one atomic step, so
    /// workers racing for the last slot cannot both get it).
    pub fn try_take(backend: &'a Backend, server: usize) -> Option<Self> {
        let index = u32::try_from(server).ok()?;
        let s = &backend.servers[server];
        let limit = s.maxconn();
        match limit {
            None => s.cur_conns.incr(),
            Some(max) => {
                if !s.cur_conns.incr_shared_below(max) {
                    return None;
                }
            }
        }
        // The most at once, for `show stat` (a read first: the maximum rarely moves).
        let cur = s.cur_conns.get();
        if cur > s.smax.load(Ordering::Relaxed) {
            s.smax.fetch_max(cur, Ordering::Relaxed);
        }
        // Its connections in use (the idle ones in a pool apart), for `need_conn_est`.
        let used = cur.saturating_sub(s.idle.get());
        if used > s.used_max.load(Ordering::Relaxed) {
            s.used_max.fetch_max(used, Ordering::Relaxed);
        }
        // The backend's (`smax`: the most of its `scur`, its servers' connections together).
        let total = backend.servers.iter().map(|s| s.cur_conns.get()).sum();
        if total > backend.smax.load(Ordering::Relaxed) {
            backend.smax.fetch_max(total, Ordering::Relaxed);
        }
        Some(ServerSlot {
            backend,
            server: index,
            limited: limit.is_some(),
        })
    }

    /// The server's index in its backend.
    pub fn server(&self) -> usize {
        self.server as usize
    }

    pub fn state(&self) -> &ServerState {
        &self.backend.servers[self.server()]
    }

    pub fn backend(&self) -> &'a Backend {
        self.backend
    }
}

impl Drop for ServerSlot<'_> {
    fn drop(&mut self) {
        let s = &self.backend.servers[self.server()];
        if self.limited {
            s.cur_conns.decr_shared();
            self.backend.slot_freed.notify_waiters();
        } else {
            s.cur_conns.decr();
        }
    }
}

/// Where a request waited when it left a queue without a server: the server whose queue it
/// was (`None`: the backend's), and its position as HAProxy logs it (`%sq` or `%bq`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSpot {
    pub server: Option<usize>,
    pub pos: u32,
}

impl QueueSpot {
    /// The positions for `%sq` and `%bq`.
    pub fn queues(self) -> (u32, u32) {
        match self.server {
            Some(_) => (self.pos, 0),
            None => (0, self.pos),
        }
    }
}

/// Where a request waits now, for a caller that may abandon the wait itself (HTTP's
/// `abortonclose`, which watches its client around the whole connect): the queue and the
/// request's arrival there, set while it waits, so that the caller learns it left a queue
/// (`CQ`, its position and `Tw`) rather than a connect (`CC`).
#[derive(Debug, Default)]
pub struct Waiting(std::cell::Cell<Option<(Option<usize>, u32)>>);

impl Waiting {
    /// The queue the request waits in now and its position there, if it waits in one.
    pub fn spot(&self, backend: &Backend) -> Option<QueueSpot> {
        let (server, arrived) = self.0.get()?;
        let idx = match server {
            Some(s) => &backend.servers.get(s)?.queue_idx,
            None => &backend.queue_idx,
        };
        Some(QueueSpot {
            server,
            pos: idx
                .load(Ordering::Relaxed)
                .wrapping_sub(arrived)
                .wrapping_add(1),
        })
    }
}

/// What a connect watches while it waits: the client of a TCP-mode session (it ends the wait
/// when it leaves), and where an HTTP request waits ([`Waiting`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Watch<'a> {
    pub client: Option<&'a Stream>,
    pub waiting: Option<&'a Waiting>,
    /// The backend's `option abortonclose`: a TCP client that closes ends its wait even when
    /// its bytes wait for the server (HAProxy's `back_may_abort_req`).
    pub abort_on_close: bool,
}

/// An established connection to a server.
pub struct ServerConn<'a> {
    pub stream: Stream,
    pub slot: ServerSlot<'a>,
    /// Connection attempts that failed before this one succeeded.
    pub retries: u32,
    /// A retry went to another server (`option redispatch`).
    pub redispatched: bool,
    /// The position this request had in the server's queue (`%sq`), 0 when it did not wait
    /// there; and in the backend's queue on a redispatch (`%bq`, added to the first pick's).
    pub srv_queue: u32,
    pub be_queue: u32,
}

/// Whether retry number `retry` (1-based) of `retries` goes to another server, per
/// `option redispatch [interval]`: positive P redispatches every P-th retry, negative N the
/// N-th retry before the last one and after (-1: the last retry only).
fn redispatches(interval: Option<i32>, retry: u32, retries: u32) -> bool {
    match interval {
        None | Some(0) => false,
        Some(p) if p > 0 => retry % (p as u32) == 0,
        Some(n) => i64::from(retry) >= i64::from(retries) + 1 + i64::from(n),
    }
}

/// Where the client connection came from and arrived, for `send-proxy`, and what a
/// `send-proxy-v2` header's TLVs say of it.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddrs<'a> {
    /// `None`: a UNIX socket's client, which has no address (the PROXY line says `UNKNOWN`).
    pub peer: Option<SocketAddr>,
    /// Learnt (one `getsockname`) only when the backend has [`Backend::send_proxy`].
    pub local: Option<SocketAddr>,
    pub v2: crate::proto::proxy::V2Values<'a>,
}

impl<'a> ClientAddrs<'a> {
    /// The addresses of a client connection from `peer`, as `backend` needs them: the local
    /// one (a system call) only for the PROXY protocol.
    pub fn of(
        local_addr: impl FnOnce() -> std::io::Result<SocketAddr>,
        peer: Option<SocketAddr>,
        backend: &Backend,
    ) -> Self {
        ClientAddrs {
            peer,
            local: backend.send_proxy().then(|| local_addr().ok()).flatten(),
            v2: Default::default(),
        }
    }

    /// With `v2` for the TLVs of a `send-proxy-v2` header.
    pub fn with_v2(self, v2: crate::proto::proxy::V2Values<'a>) -> ClientAddrs<'a> {
        ClientAddrs { v2, ..self }
    }
}

/// The PROXY protocol header `server` sends first on a connection for `client`
/// (`send-proxy`, `send-proxy-v2` with its TLVs; haproxy sends v2 when a server has both), into
/// `out`; nothing without either.
pub fn proxy_header(
    server: &Server,
    client: &ClientAddrs<'_>,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    out.clear();
    let local = |what: &str| {
        client.local.ok_or_else(|| {
            io::Error::other(format!(
                "{what}: the client connection's local address is unknown"
            ))
        })
    };
    if server.send_proxy_v2 {
        let addrs = match client.peer {
            Some(peer) => Some((peer, local("send-proxy-v2")?)),
            // A UNIX socket's client: a LOCAL header, as haproxy sends.
            None => None,
        };
        let opts = server.proxy_v2_options;
        crate::proto::proxy::write_v2_tlvs(out, addrs, opts, client.v2);
    } else if server.send_proxy {
        match client.peer {
            Some(peer) => {
                let mut line = [0u8; 108];
                let n = proxy_v1_header(&mut line, peer, local("send-proxy")?);
                out.extend_from_slice(&line[..n]);
            }
            // A UNIX socket's client has no address to announce: HAProxy says UNKNOWN.
            None => out.extend_from_slice(b"PROXY UNKNOWN\r\n"),
        }
    }
    Ok(())
}

/// What tells connections to `server` apart for reuse (HAProxy's hash of the PROXY header): a
/// connection that began with a PROXY header serves only streams that would send the same
/// one (the same client, the same TLVs); 0 for a server that sends none.
pub fn proxy_key(server: &Server, client: &ClientAddrs<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    if !(server.send_proxy || server.send_proxy_v2) {
        return 0;
    }
    let mut header = Vec::new();
    if proxy_header(server, client, &mut header).is_err() {
        return u64::MAX;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    header.hash(&mut h);
    h.finish() | 1
}

/// The values of a backend's `sni` expressions (its `sni_exprs`) for one stream: a TLS
/// server whose `sni_slot` points to a value sends it as SNI; `None` sends none.
pub type SniValues<'a> = &'a [Option<String>];

/// Connects to a server of `backend`, following HAProxy's retry and redispatch rules.
pub async fn connect<'a>(
    backend: &'a Backend,
    picker: &std::cell::RefCell<Picker>,
    client: ClientAddrs<'_>,
    key: Option<u32>,
    sni: SniValues<'_>,
) -> Result<ServerConn<'a>, ConnectError> {
    let first = pick(backend, picker, key).await?;
    connect_to(backend, picker, client, first, sni, Watch::default()).await
}

/// Picks a server for a new request, waiting (up to `timeout queue`) when every usable server
/// is at its `maxconn`.
pub async fn pick(
    backend: &Backend,
    picker: &std::cell::RefCell<Picker>,
    key: Option<u32>,
) -> Result<usize, ConnectError> {
    Ok(pick_or_wait(backend, picker, None, key, Watch::default())
        .await?
        .0)
}

/// [`pick`], with the position the request had in the backend's queue (`%bq`; 0 when it did
/// not wait). `watch`: the client of a TCP-mode session, watched while it waits in the queue
/// ([`ConnectError::ClientLeftQueue`]), and where the request waits ([`Waiting`]).
pub async fn pick_queued(
    backend: &Backend,
    picker: &std::cell::RefCell<Picker>,
    key: Option<u32>,
    watch: Watch<'_>,
) -> Result<(usize, u32), ConnectError> {
    pick_or_wait(backend, picker, None, key, watch).await
}

/// Like [`connect`], with the first attempt on `first` (already chosen by the balancer), and
/// `watch` as in [`connect_assigned`].
pub async fn connect_to<'a>(
    backend: &'a Backend,
    picker: &std::cell::RefCell<Picker>,
    client: ClientAddrs<'_>,
    first: usize,
    sni: SniValues<'_>,
    watch: Watch<'_>,
) -> Result<ServerConn<'a>, ConnectError> {
    let assigned = Assigned::default();
    connect_assigned(backend, picker, client, first, assigned, sni, watch).await
}

/// How the first server was chosen, for redispatch: HAProxy's `SF_DIRECT` (a persistence
/// cookie or `use-server` named it) and `SF_FORCE_PRST` (`force-persist`: never redispatch).
#[derive(Debug, Clone, Copy, Default)]
pub struct Assigned {
    pub direct: bool,
    pub force: bool,
}

/// Like [`connect_to`], for a server chosen as `assigned` says. With `option redispatch`, a
/// failed attempt on a server that is down (reached through `option persist`) goes to
/// another at once, as does one on a balanced (not direct) round-robin pick.
///
/// `watch`: the client connection of a TCP-mode session, watched only while the request waits
/// in a queue (see [`queue_wait`]) or a failed attempt waits out the turn-around pause
/// (HAProxy's `SC_ST_TAR`), so that a healthy connect costs nothing more: when it ends its
/// side having sent nothing, the connect ends ([`ConnectError::ClientGone`]), as HAProxy
/// aborts a stream whose request channel is empty and shut. A client whose bytes wait for the
/// server keeps the retries going. And where an HTTP request waits ([`Waiting`]).
///
/// Counted as HAProxy counts them: a failed attempt that will be retried in `wretr` of its
/// server (`wredis` when the retry goes to another one), a connection whose last attempt
/// failed in `econ`.
pub async fn connect_assigned<'a>(
    backend: &'a Backend,
    picker: &std::cell::RefCell<Picker>,
    client: ClientAddrs<'_>,
    first: usize,
    assigned: Assigned,
    sni: SniValues<'_>,
    watch: Watch<'_>,
) -> Result<ServerConn<'a>, ConnectError> {
    let cfg = &backend.config;
    let mut direct = assigned.direct;
    let connect_timeout = cfg.timeouts.connect;
    let mut server = first;
    let mut attempt = 0u32;
    let mut redispatched = false;
    let (mut srv_queue, mut be_queue) = (0, 0);
    loop {
        let slot = match ServerSlot::try_take(backend, server) {
            Some(slot) => slot,
            None => {
                let (slot, pos) = wait_for_slot(backend, server, watch).await?;
                srv_queue += pos;
                slot
            }
        };
        let s = slot.state();
        match connect_once(s, connect_timeout, client, sni).await {
            Ok(stream) => {
                s.count_session();
                observe(backend, server, Outcome::Layer4Ok);
                return Ok(ServerConn {
                    stream,
                    slot,
                    retries: attempt,
                    redispatched,
                    srv_queue,
                    be_queue,
                });
            }
            Err(e) => {
                observe(backend, server, Outcome::Layer4Error);
                let retries = if cfg.retry_on.conn_failure {
                    cfg.retries
                } else {
                    0
                };
                if attempt >= retries {
                    s.conn_errors.fetch_add(1, Ordering::Relaxed);
                    return Err(ConnectError::Failed {
                        server: s.config.name.clone(),
                        attempts: attempt + 1,
                        redispatched,
                        last: e,
                    });
                }
                let down = !s.usable();
                drop(slot);
                attempt += 1;
                // As HAProxy does, a round-robin backend with `option redispatch` moves a failed
                // attempt to another server at once, whatever the interval: the turn-around
                // pause only helps when the same server is tried again. A server a cookie led
                // to is left at once only when it is down; `force-persist` never leaves it.
                let may = cfg.redispatch.is_some() && !assigned.force;
                let rr = matches!(cfg.balance, Balance::RoundRobin | Balance::StaticRr);
                let immediate = may && (down || (!direct && rr));
                if immediate || (may && redispatches(cfg.redispatch, attempt, cfg.retries)) {
                    let (next, pos) =
                        pick_or_wait(backend, picker, Some(server), None, watch).await?;
                    let prev = &backend.servers[server];
                    let counter = if next == server {
                        &prev.retries
                    } else {
                        &prev.redispatches
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    (server, be_queue) = (next, be_queue + pos);
                    redispatched = true;
                    direct = false;
                } else {
                    let prev = &backend.servers[server];
                    prev.retries.fetch_add(1, Ordering::Relaxed);
                    // HAProxy's turn-around: give a refusing server a moment, bounded by the
                    // connect timeout.
                    let pause = connect_timeout
                        .map_or(Duration::from_secs(1), |t| t.min(Duration::from_secs(1)));
                    match watch.client {
                        None => tokio::time::sleep(pause).await,
                        Some(c) => {
                            if let Some(reset) = pause_watching(c, pause).await {
                                return Err(ConnectError::ClientGone {
                                    server: prev.config.name.clone(),
                                    retries: attempt,
                                    redispatched,
                                    reset,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Sleeps `pause` unless `client` ends its side first with nothing unread before the end:
/// `Some(reset)` then (`reset`: it reset the connection). A client with bytes waiting is not
/// watched further (they are for the server, which a retry may still reach).
async fn pause_watching(client: &Stream, pause: Duration) -> Option<bool> {
    let sleep = tokio::time::sleep(pause);
    tokio::pin!(sleep);
    let mut watching = true;
    loop {
        tokio::select! {
            biased;
            () = &mut sleep => return None,
            r = client.readable(), if watching => {
                if r.is_err() {
                    return Some(true);
                }
                match client.try_peek(&mut [0u8; 1]) {
                    Ok(0) => return Some(false),
                    Ok(_) => watching = false,
                    // A stale readiness, cleared by the peek.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return Some(true),
                }
            }
        }
    }
}

/// Picks a server, waiting up to `timeout queue` (else `timeout connect`) when every usable
/// server is at its `maxconn`; with the position the request had in the backend queue.
async fn pick_or_wait(
    backend: &Backend,
    picker: &std::cell::RefCell<Picker>,
    avoid: Option<usize>,
    key: Option<u32>,
    watch: Watch<'_>,
) -> Result<(usize, u32), ConnectError> {
    if let Some(i) = picker.borrow_mut().pick(backend, avoid, key) {
        return Ok((i, 0));
    }
    let any_limited = backend
        .servers
        .iter()
        .any(|s| s.maxconn().is_some() && s.usable());
    if !any_limited {
        backend.no_server.fetch_add(1, Ordering::Relaxed);
        return Err(ConnectError::NoServer);
    }
    let queue = Queue {
        server: None,
        queued: &backend.queued,
        qmax: &backend.qmax,
        idx: &backend.queue_idx,
    };
    queue_wait(backend, queue, watch, || {
        picker.borrow_mut().pick(backend, avoid, key)
    })
    .await
}

/// The per-server queue: waits (up to `timeout queue`, else `timeout connect`) for a slot
/// under `server`'s `maxconn`. Hash-based algorithms land here when their server is full, as
/// in HAProxy, instead of sending the key elsewhere.
async fn wait_for_slot<'a>(
    backend: &'a Backend,
    server: usize,
    watch: Watch<'_>,
) -> Result<(ServerSlot<'a>, u32), ConnectError> {
    let s = &backend.servers[server];
    let queue = Queue {
        server: Some(server),
        queued: &s.queued,
        qmax: &s.qmax,
        idx: &s.queue_idx,
    };
    queue_wait(backend, queue, watch, || {
        ServerSlot::try_take(backend, server)
    })
    .await
}

/// One of a backend's queues: its own (`server` is `None`) or a server's.
struct Queue<'a> {
    server: Option<usize>,
    /// Requests waiting in it (`qcur`).
    queued: &'a AtomicU32,
    /// The most that waited at once (`qmax`).
    qmax: &'a AtomicU32,
    /// Requests that left it with a server, ever (for the positions).
    idx: &'a AtomicU32,
}

/// Waits in `queue` until `attempt` succeeds, retrying each time a server connection of the
/// backend closes, for at most `timeout queue` (else `timeout connect`). Returns what `attempt`
/// gave and the request's position in the queue as HAProxy logs it: one more than the
/// requests that left the queue while it waited.
///
/// `watch`: the client of a TCP-mode session. As HAProxy's `back_may_abort_req` aborts a
/// queued stream whose client reset its connection, or closed it with nothing waiting for
/// the server, such a client ends the wait at once (its place in the queue freed for the
/// next). A client whose bytes wait for the server and that closes keeps its place; one that
/// resets still ends it.
async fn queue_wait<T>(
    backend: &Backend,
    queue: Queue<'_>,
    watch: Watch<'_>,
    mut attempt: impl FnMut() -> Option<T>,
) -> Result<(T, u32), ConnectError> {
    let _queued = Queued::enter(queue.queued, queue.qmax);
    let arrived = queue.idx.load(Ordering::Relaxed);
    // Cleared on every return; left set when the caller drops the wait.
    let waiting = watch.waiting.map(|w| {
        w.0.set(Some((queue.server, arrived)));
        &w.0
    });
    let done = || {
        if let Some(w) = waiting {
            w.set(None);
        }
    };
    let spot = || QueueSpot {
        server: queue.server,
        pos: queue
            .idx
            .load(Ordering::Relaxed)
            .wrapping_sub(arrived)
            .wrapping_add(1),
    };
    let wait = backend
        .config
        .timeouts
        .queue
        .or(backend.config.timeouts.connect);
    let deadline = wait.map(|w| tokio::time::Instant::now() + w);
    let mut left = watch
        .client
        .map(|c| ClientWatch::new(c, watch.abort_on_close));
    loop {
        let freed = backend.slot_freed.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        if let Some(found) = attempt() {
            done();
            let left = queue.idx.fetch_add(1, Ordering::Relaxed);
            return Ok((found, left.wrapping_sub(arrived).wrapping_add(1)));
        }
        let expired = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let gone = async {
            match left.as_mut() {
                Some(w) => w.left().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = freed => {}
            () = expired => {
                done();
                // HAProxy counts the timeout in `econ` (`failed_conns`), the server's when it
                // was its queue.
                match queue.server {
                    Some(s) => &backend.servers[s].conn_errors,
                    None => &backend.no_server,
                }
                .fetch_add(1, Ordering::Relaxed);
                return Err(ConnectError::QueueTimeout(spot()));
            }
            reset = gone => {
                done();
                if reset {
                    backend.count_abort(queue.server, super::server::Abort::Client);
                }
                return Err(ConnectError::ClientLeftQueue { spot: spot(), reset });
            }
        }
    }
}

/// A TCP-mode client watched while its session waits (see [`queue_wait`]).
struct ClientWatch<'a> {
    client: &'a Stream,
    /// Bytes wait for the server: only a reset still counts, or a close under
    /// `abort_on_close`.
    has_bytes: bool,
    abort_on_close: bool,
}

impl<'a> ClientWatch<'a> {
    fn new(client: &'a Stream, abort_on_close: bool) -> Self {
        ClientWatch {
            client,
            has_bytes: false,
            abort_on_close,
        }
    }

    /// Resolves when the client left as HAProxy would notice it: `true` for a reset, `false`
    /// for a close with nothing sent (or with bytes sent, under `option abortonclose`).
    /// Pending forever otherwise.
    async fn left(&mut self) -> bool {
        loop {
            if self.has_bytes && self.abort_on_close {
                return self.client.end_ready().await.unwrap_or(true);
            }
            if self.has_bytes {
                // Level-triggered readiness would spin on the unread bytes: only the error
                // readiness of a reset is awaited now.
                let _ = self.client.error_ready().await;
                return true;
            }
            if self.client.readable().await.is_err() {
                return true;
            }
            match self.client.try_peek(&mut [0u8; 1]) {
                Ok(0) => return false,
                Ok(_) => self.has_bytes = true,
                // A stale readiness, cleared by the peek.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return true,
            }
        }
    }
}

/// One request waiting in a queue, counted for `show stat` (`qcur`) while it waits.
struct Queued<'a>(&'a AtomicU32);

impl<'a> Queued<'a> {
    /// Counts one more in `counter`, and the new count in `max` when it is more.
    fn enter(counter: &'a AtomicU32, max: &AtomicU32) -> Self {
        let now = counter.fetch_add(1, Ordering::Relaxed) + 1;
        max.fetch_max(now, Ordering::Relaxed);
        Queued(counter)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The SNI a new connection to `server` sends, from the stream's [`SniValues`].
pub fn sni_of<'v>(server: &ServerState, sni: SniValues<'v>) -> Option<&'v str> {
    if !server.ssl_on() {
        return None;
    }
    let slot = server.config.tls.as_ref()?.sni_slot?;
    sni.get(slot)?.as_deref().filter(|s| !s.is_empty())
}

async fn connect_once(
    server: &ServerState,
    timeout: Option<Duration>,
    client: ClientAddrs<'_>,
    sni: SniValues<'_>,
) -> io::Result<Stream> {
    let started = tokio::time::Instant::now();
    // A UNIX connect's future is boxed (one allocation per UNIX connection) so that the
    // session's future, which holds this one, stays the size the TCP path needs.
    let addr = server.addr.load();
    if server.config.no_addr && addr.ip().is_unspecified() {
        return Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "the server has no address (init-addr none)",
        ));
    }
    let addr = to_destination(addr, client.local);
    let mut stream = match (&server.config.unix, server.config.socks4) {
        (None, None) => Stream::Tcp(within(timeout, connect_tcp(addr)).await?),
        // Through a SOCKS4 proxy: its grant within the same connect time.
        (None, Some(proxy)) => Stream::Tcp(
            within(timeout, async {
                let mut s = connect_tcp(proxy).await?;
                socks4_handshake(&mut s, addr).await?;
                Ok(s)
            })
            .await?,
        ),
        (Some(unix), _) => within(timeout, Box::pin(Stream::connect_unix(unix))).await?,
    };
    let mut header = Vec::new();
    proxy_header(&server.config, &client, &mut header)?;
    if !header.is_empty() {
        stream.write_all(&header).await?;
    }
    let Some(config) = server.tls_config() else {
        return Ok(stream);
    };
    // `ssl`: the handshake, within what is left of `timeout connect`. (A UNIX server with
    // `ssl` is refused at load.)
    let Stream::Tcp(sock) = stream else {
        return Err(io::Error::other("ssl: only TCP servers are supported"));
    };
    let tls = server.config.tls.as_deref().expect("checked above");
    let name = tls.name(sni_of(server, sni), addr.ip());
    let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
    let sock = Box::pin(crate::net::tls::TlsSock::connect(
        sock,
        std::sync::Arc::clone(config),
        name,
        left,
    ))
    .await?;
    Ok(Stream::Tls(Box::new(sock)))
}

/// Runs a connect attempt within the backend's `timeout connect`, if any.
async fn within<T>(
    timeout: Option<Duration>,
    attempt: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match timeout {
        Some(t) => tokio::time::timeout(t, attempt)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))?,
        None => attempt.await,
    }
}

/// Opens a TCP connection to `addr` (no Nagle delay: requests and responses go out whole).
/// A server written without an address (`:`, `0.0.0.0`) or without a port connects to the
/// client's destination address or port, as in HAProxy.
fn to_destination(mut addr: SocketAddr, local: Option<SocketAddr>) -> SocketAddr {
    if let Some(local) = local {
        if addr.ip().is_unspecified() {
            addr.set_ip(local.ip());
        }
        if addr.port() == 0 {
            addr.set_port(local.port());
        }
    }
    addr
}

/// Asks the SOCKS4 proxy at the other end of `s` to connect to `to` (`server ... socks4`,
/// `check-via-socks4`), and waits for its grant.
pub async fn socks4_handshake<S>(s: &mut S, to: SocketAddr) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncReadExt;
    let req = crate::proto::socks4::request(to).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "socks4: an IPv6 destination cannot be reached through SOCKS4",
        )
    })?;
    s.write_all(&req).await?;
    let mut reply = [0u8; crate::proto::socks4::REPLY_LEN];
    s.read_exact(&mut reply).await?;
    if !crate::proto::socks4::granted(&reply) {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!(
                "socks4: the proxy refused the connection (status {:#04x})",
                reply[1]
            ),
        ));
    }
    Ok(())
}

async fn connect_tcp(addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_nodelay(true)?;
    socket.connect(addr).await
}

/// Writes a PROXY protocol v1 header for a connection from `src` to `dst` into `out` (108
/// bytes always suffice) and returns its length.
pub fn proxy_v1_header(out: &mut [u8; 108], src: SocketAddr, dst: SocketAddr) -> usize {
    use std::io::Write;
    let mut cur = io::Cursor::new(&mut out[..]);
    let family = match (src, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => "TCP4",
        (SocketAddr::V6(_), SocketAddr::V6(_)) => "TCP6",
        _ => "UNKNOWN",
    };
    let r = if family == "UNKNOWN" {
        write!(cur, "PROXY UNKNOWN\r\n")
    } else {
        write!(
            cur,
            "PROXY {family} {} {} {} {}\r\n",
            src.ip(),
            dst.ip(),
            src.port(),
            dst.port()
        )
    };
    debug_assert!(r.is_ok(), "a PROXY v1 line is at most 107 bytes");
    cur.position() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_spot_gives_the_server_or_the_backend_position() {
        let srv = QueueSpot {
            server: Some(2),
            pos: 3,
        };
        assert_eq!(srv.queues(), (3, 0));
        let be = QueueSpot {
            server: None,
            pos: 1,
        };
        assert_eq!(be.queues(), (0, 1));
        // Not waiting: nothing to say.
        assert_eq!(Waiting::default().0.get(), None);
    }

    #[test]
    fn redispatch_interval_follows_haproxy() {
        // default -1: only the last retry.
        let on: Vec<_> = (1..=3).map(|r| redispatches(Some(-1), r, 3)).collect();
        assert_eq!(on, [false, false, true]);
        let on: Vec<_> = (1..=3).map(|r| redispatches(Some(1), r, 3)).collect();
        assert_eq!(on, [true, true, true]);
        let on: Vec<_> = (1..=4).map(|r| redispatches(Some(2), r, 4)).collect();
        assert_eq!(on, [false, true, false, true]);
        assert!(!redispatches(None, 3, 3));
    }

    #[test]
    fn proxy_v1_lines() {
        let mut buf = [0u8; 108];
        let n = proxy_v1_header(
            &mut buf,
            "127.0.0.1:4000".parse().unwrap(),
            "127.0.0.2:80".parse().unwrap(),
        );
        assert_eq!(&buf[..n], b"PROXY TCP4 127.0.0.1 127.0.0.2 4000 80\r\n");
        let n = proxy_v1_header(
            &mut buf,
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
                .parse()
                .unwrap(),
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
                .parse()
                .unwrap(),
        );
        assert_eq!(n, 104);
        let n = proxy_v1_header(
            &mut buf,
            "127.0.0.1:1".parse().unwrap(),
            "[::1]:2".parse().unwrap(),
        );
        assert_eq!(&buf[..n], b"PROXY UNKNOWN\r\n");
    }
}
