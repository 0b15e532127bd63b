//! Sessions (layer 3): one client connection from accept to close. TCP mode is [`tcp`]; HTTP
//! mode is `crate::http`, beside this module.
//!
//! This file holds what both kinds of session share: the per-worker context ([`WorkerCtx`]:
//! balancer state and idle server connections), closing a server connection with a reset
//! ([`abort`]), and the termination state of a failed connect ([`connect_term`]). It sits
//! below both session kinds, so `http` uses it without `session` ever importing `http`.
//!
//! Sessions may import `state` and every layer below it (`backend`, `net`, `log`, `proto`,
//! `config`, `base`); they must not import `runtime`, which starts them.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Duration;

use crate::backend::server::Abort;
use crate::backend::{self, Picker};
use crate::net::stream::Stream;
use crate::state::Shared;

pub mod accept;
pub mod facts;
pub mod stick;
pub mod takeover;
pub mod tcp;

/// Where a client connection comes from, as logs and rules report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The client's address; `None` for a client of a UNIX socket, which has none (HAProxy's
    /// `src` then has no value and its logs show `unix`).
    pub peer: Option<SocketAddr>,
    /// The id of the listener that accepted it: HAProxy's, from 1 in `bind` order within the
    /// frontend (`%cp` and `%fp` show it for a UNIX socket).
    pub listener_id: u32,
    /// The address the client connected to, when a PROXY protocol header gave it
    /// (`accept-proxy`); `None`: the socket's own, asked when needed.
    pub local: Option<SocketAddr>,
}

/// Per-worker state sessions share: the balancer state of every backend and the idle server
/// connections (HTTP mode) of this worker. Only this worker's tasks touch it, so `RefCell`.
pub struct WorkerCtx {
    pub pickers: Vec<RefCell<Picker>>,
    /// Idle server connections per backend, most recently used last. Each one counts on this
    /// worker's line of its server's [`backend::ServerState::idle`] while it is here.
    idle: Vec<RefCell<Vec<IdleConn>>>,
    /// This worker's number, from 0.
    id: usize,
    /// Every worker, to take over an idle connection another one holds ([`takeover`]).
    peers: takeover::Peers,
    /// The shared state, owned: what a session starts that outlives it (the slow start an
    /// admin change on the statistics page begins) holds it.
    pub shared: std::sync::Arc<Shared>,
}

/// An idle, reusable server connection.
pub struct IdleConn {
    pub server: usize,
    pub stream: Stream,
    pub since: tokio::time::Instant,
    /// What tells it apart when it began with a PROXY header ([`backend::proxy_key`]; 0:
    /// none).
    pub proxy_key: u64,
    /// It carried two requests or more: proven reusable (`http-reuse aggressive`).
    pub proven: bool,
}

/// Idle server connections kept per backend and worker; beyond this, extras are closed.
const MAX_IDLE_PER_BACKEND: usize = 64;

/// How long an idle server connection stays in a pool (HAProxy's `pool-purge-delay` default).
pub const POOL_IDLE: Duration = Duration::from_secs(5);

impl WorkerCtx {
    /// The context of worker `id`, one of `peers`.
    pub fn new(shared: &std::sync::Arc<Shared>, id: usize, peers: takeover::Peers) -> Self {
        WorkerCtx {
            id,
            peers,
            shared: std::sync::Arc::clone(shared),
            pickers: shared
                .backends
                .iter()
                .map(|b| RefCell::new(Picker::new(b)))
                .collect(),
            idle: shared
                .backends
                .iter()
                .map(|_| RefCell::new(Vec::new()))
                .collect(),
        }
    }

    /// The idle-connection gauge of `server` of `backend` (none for a server deleted).
    fn idle_gauge(&self, backend: usize, server: usize) -> Option<&crate::base::counter::Gauge> {
        Some(&self.shared.backends.get(backend)?.servers.get(server)?.idle)
    }

    /// Counts an idle connection to `server` of `backend` in or out of its gauges (`incr`: one
    /// more, else one less): all of them, and apart those proven reusable (`safe_conn_cur`).
    fn count_idle(&self, backend: usize, server: usize, proven: bool, incr: bool) {
        let Some(s) = self
            .shared
            .backends
            .get(backend)
            .and_then(|b| b.servers.get(server))
        else {
            return;
        };
        for g in [Some(&s.idle), proven.then_some(&s.idle_safe)]
            .into_iter()
            .flatten()
        {
            if incr {
                g.incr();
            } else {
                g.decr();
            }
        }
    }

    /// Keeps an idle server connection for reuse (aborts it if this worker's pool is full, or
    /// if the process holds the server's `pool-max-conn` idle connections already).
    pub fn put_idle(
        &self,
        (backend, server, proxy_key): (usize, usize, u64),
        stream: Stream,
        proven: bool,
        max: Option<u32>,
    ) {
        if self.idle_room((backend, server), max)
            && self.idle[backend].borrow().len() < MAX_IDLE_PER_BACKEND
        {
            self.count_idle(backend, server, proven, true);
            let mut pool = self.idle[backend].borrow_mut();
            pool.push(IdleConn {
                server,
                stream,
                since: tokio::time::Instant::now(),
                proxy_key,
                proven,
            });
        } else {
            abort(stream);
        }
    }

    /// Whether the process has room for one more idle connection to `server` under its
    /// `pool-max-conn` (`max`), all workers' pools together, as HAProxy counts it.
    pub fn idle_room(&self, (backend, server): (usize, usize), max: Option<u32>) -> bool {
        max.is_none_or(|m| self.idle_gauge(backend, server).is_none_or(|g| g.get() < m))
    }

    /// Closes the connections of `backend`'s `pool` idle for longer than `max_idle`. The pool is
    /// in idling order: they are at its front. One clock read when none has expired.
    fn drop_expired(&self, backend: usize, pool: &mut Vec<IdleConn>, max_idle: Duration) {
        let now = tokio::time::Instant::now();
        let expired = pool
            .iter()
            .position(|c| now.duration_since(c.since) <= max_idle)
            .unwrap_or(pool.len());
        for c in pool.drain(..expired) {
            self.count_idle(backend, c.server, c.proven, false);
            abort(c.stream);
        }
    }

    /// Closes this worker's server connections idle for longer than [`POOL_IDLE`], also when no
    /// request comes to take one (HAProxy purges its idle connections after
    /// `pool-purge-delay`): a server's connections are not left half-closed in the pool after
    /// the server timed them out. The worker runs it every second.
    pub fn purge_idle(&self) {
        for (backend, pool) in self.idle.iter().enumerate() {
            self.drop_expired(backend, &mut pool.borrow_mut(), POOL_IDLE);
        }
    }

    /// Takes the most recently idled connection to `server` of `backend` made with the SNI
    /// `sni` (none for a clear connection), dropping on the way the ones idle for longer
    /// than `max_idle`. As HAProxy keys its idle connections by their SNI, a request is never
    /// sent over a connection made for another name, nor over one whose PROXY header announced
    /// another client (`proxy_key`).
    pub fn take_idle(
        &self,
        (backend, server, proxy_key): (usize, usize, u64),
        sni: Option<&str>,
        only_proven: bool,
        max_idle: Duration,
    ) -> Option<IdleConn> {
        let mut pool = self.idle[backend].borrow_mut();
        self.drop_expired(backend, &mut pool, max_idle);
        let pos = pool.iter().rposition(|c| {
            c.server == server
                && c.proxy_key == proxy_key
                && (!only_proven || c.proven)
                && c.stream.tls().and_then(|t| t.facts().sni.as_deref()) == sni
        })?;
        self.count_idle(backend, server, pool[pos].proven, false);
        Some(pool.remove(pos))
    }
}

/// Closes an idle server connection with a reset rather than a FIN, as HAProxy does: nothing
/// is in flight on it, and the proxy, closing first, would otherwise keep the socket in
/// TIME_WAIT for a minute (kernel work per connection, and one local port held per connection
/// closed, which a connection-per-request load runs out of).
pub fn abort(stream: Stream) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
}

/// The line of a `tcp-request session reject` after a handshake (TLS, or a PROXY header):
/// HAProxy 2.6 then kills an embryonic session (`session_kill_embryonic`), whose line is
/// `127.0.0.1:40432 [date] fe/bind: Success` (its connection has no error code), unless
/// `option dontlognull`. Without a handshake the session is not embryonic and nothing is
/// logged. The date is when the rules ran (HAProxy's is the accept's, before the handshake).
pub fn log_session_reject(
    shared: &Shared,
    frontend: usize,
    peer: Option<SocketAddr>,
    listener_id: u32,
) {
    let fe = &shared.frontends[frontend];
    if fe.config.options.dontlognull {
        return;
    }
    fe.log.embryonic_line(
        &shared.log_outputs,
        &fe.config,
        peer,
        listener_id,
        crate::log::now_us(),
        "Success",
    );
}

/// What a stream that ended with termination state `term` (and `status`, in HTTP) counts in
/// its backend's and server's `cli_abrt`, `srv_abrt` and `eresp`, as HAProxy 2.6 counts them:
/// an abort while data moved (`D`) by its side (a reset from the server also fails the
/// response); a server that failed to give a response head (`SH`, `sH`, a `PH` 502: HAProxy's
/// `failed_resp`); a client that left while its response was awaited (`CH`). A client that
/// reset its connection in a queue was counted when it left (see `backend::connect`).
pub fn aborts_of(term: [u8; 2], status: Option<u16>) -> &'static [Abort] {
    match (term, status) {
        ([b'C' | b'c', b'D'], _) | ([b'C', b'H'], _) => &[Abort::Client],
        ([b'S', b'D'], _) => &[Abort::Resp, Abort::Server],
        ([b's', b'D'], _) => &[Abort::Server],
        ([b'S' | b's', b'H'], Some(502 | 504)) | ([b'P', b'H'], Some(502)) => &[Abort::Resp],
        _ => &[],
    }
}

/// The termination state of a session that got no server connection: a queue timeout (`sQ`),
/// a connect timeout (`sC`), a client that left between attempts (`CC`, `CD` for a reset) or
/// in a queue (`CQ`, `CD` for a reset), or a refused connection or no usable server (`SC`).
pub fn connect_term(e: &backend::ConnectError) -> [u8; 2] {
    match e {
        backend::ConnectError::QueueTimeout(_) => *b"sQ",
        backend::ConnectError::ClientLeftQueue { reset: false, .. } => *b"CQ",
        backend::ConnectError::ClientLeftQueue { reset: true, .. } => *b"CD",
        // The client closed (or reset) while a retry was pending.
        backend::ConnectError::ClientGone { reset: false, .. } => *b"CC",
        backend::ConnectError::ClientGone { reset: true, .. } => *b"CD",
        backend::ConnectError::Failed { last, .. }
            if last.kind() == std::io::ErrorKind::TimedOut =>
        {
            *b"sC"
        }
        _ => *b"SC",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aborts_follow_the_termination_state_as_haproxy_counts_them() {
        assert_eq!(aborts_of(*b"--", Some(200)), &[] as &[Abort]);
        assert_eq!(aborts_of(*b"CD", None), &[Abort::Client]);
        assert_eq!(aborts_of(*b"cD", None), &[Abort::Client]);
        assert_eq!(aborts_of(*b"CH", Some(400)), &[Abort::Client]);
        assert_eq!(aborts_of(*b"SD", None), &[Abort::Resp, Abort::Server]);
        assert_eq!(aborts_of(*b"sD", None), &[Abort::Server]);
        assert_eq!(aborts_of(*b"SH", Some(502)), &[Abort::Resp]);
        assert_eq!(aborts_of(*b"sH", Some(504)), &[Abort::Resp]);
        assert_eq!(aborts_of(*b"PH", Some(502)), &[Abort::Resp]);
        // A request the client left, a queue timeout, a refused connect: none of them.
        assert_eq!(aborts_of(*b"CQ", None), &[] as &[Abort]);
        assert_eq!(aborts_of(*b"sQ", Some(503)), &[] as &[Abort]);
        assert_eq!(aborts_of(*b"SC", Some(503)), &[] as &[Abort]);
        assert_eq!(aborts_of(*b"CR", Some(400)), &[] as &[Abort]);
    }
}
