//! One client connection from accept to close, in TCP mode.
//!
//! The phases run in HAProxy's order: choose the backend (the first `use_backend`, else
//! `default_backend`), choose and connect to a server (with retries and redispatch, in
//! `backend`), then forward bytes both ways until both directions end, a side fails, or a side
//! stays idle past its timeout (in `forward`). Every path ends by dropping both sockets, which
//! closes them, and the session's limit slots, which lets a waiting worker accept again.

use std::cell::RefCell;
use std::net::SocketAddr;

use tokio::net::TcpStream;

use crate::backend::{self, ClientAddrs, Picker};
use crate::forward::{self, SideTimeouts};
use crate::state::Shared;

/// Per-worker state sessions share: the balancer state of every backend and the idle server
/// connections (HTTP mode) of this worker. Only this worker's tasks touch it, so `RefCell`.
pub struct WorkerCtx {
    pub pickers: Vec<RefCell<Picker>>,
    /// Idle server connections per backend, most recently used last.
    idle: Vec<RefCell<Vec<IdleConn>>>,
}

/// An idle, reusable server connection.
pub struct IdleConn {
    pub server: usize,
    pub stream: TcpStream,
    pub since: tokio::time::Instant,
}

/// Idle server connections kept per backend and worker; beyond this, extras are closed.
const MAX_IDLE_PER_BACKEND: usize = 64;

impl WorkerCtx {
    pub fn new(shared: &Shared) -> Self {
        WorkerCtx {
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

    /// Keeps an idle server connection for reuse (aborts it if the pool is full).
    pub fn put_idle(&self, backend: usize, server: usize, stream: TcpStream) {
        let mut pool = self.idle[backend].borrow_mut();
        if pool.len() < MAX_IDLE_PER_BACKEND {
            pool.push(IdleConn {
                server,
                stream,
                since: tokio::time::Instant::now(),
            });
        } else {
            abort(stream);
        }
    }

    /// Takes the most recently idled connection to `server` of `backend`, dropping on the way
    /// the ones idle for longer than `max_idle`.
    pub fn take_idle(
        &self,
        backend: usize,
        server: usize,
        max_idle: std::time::Duration,
    ) -> Option<IdleConn> {
        let mut pool = self.idle[backend].borrow_mut();
        // The pool is in idling order: expired connections are at the front. One clock read
        // when nothing has expired.
        let now = tokio::time::Instant::now();
        let expired = pool
            .iter()
            .position(|c| now.duration_since(c.since) <= max_idle)
            .unwrap_or(pool.len());
        for c in pool.drain(..expired) {
            abort(c.stream);
        }
        let pos = pool.iter().rposition(|c| c.server == server)?;
        Some(pool.remove(pos))
    }
}

/// Closes an idle server connection with a reset rather than a FIN, as HAProxy does: nothing
/// is in flight on it, and the proxy, closing first, would otherwise keep the socket in
/// TIME_WAIT for a minute (kernel work per connection, and one local port held per connection
/// closed, which a connection-per-request load runs out of).
pub fn abort(stream: TcpStream) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
}

/// Runs a TCP-mode session for `client`, accepted by frontend `frontend`.
pub async fn run_tcp(
    shared: &Shared,
    ctx: &WorkerCtx,
    frontend: usize,
    client: TcpStream,
    peer: SocketAddr,
) {
    let fe = &shared.frontends[frontend].config;
    let Some(be_idx) = fe.use_backends.first().copied().or(fe.default_backend) else {
        trace(
            shared,
            format_args!("{}: no backend for {peer}, closing", fe.name),
        );
        return;
    };
    let be = &shared.backends[be_idx];
    let addrs = ClientAddrs::of(|| client.local_addr(), peer, be);
    let key = backend::balance_key(&be.config, peer.ip(), None, |_| None);
    let conn = match backend::connect(be, &ctx.pickers[be_idx], addrs, key).await {
        Ok(conn) => conn,
        Err(e) => {
            trace(
                shared,
                format_args!("{}/{}: {peer}: {e}, closing", fe.name, be.config.name),
            );
            return;
        }
    };
    if be.config.options.srvtcpka {
        let _ = socket2::SockRef::from(&conn.stream).set_keepalive(true);
    }
    let srv_name = &conn.slot.state().config.name;
    trace(
        shared,
        format_args!(
            "{}: {peer} -> {}/{srv_name} connected (retries {})",
            fe.name, be.config.name, conn.retries
        ),
    );
    let client_t = SideTimeouts::client(fe, &be.config);
    let server_t = SideTimeouts::server(&be.config);
    let bufsize = shared.global.tune_bufsize;
    let splice = forward::Splice::of(&fe.options, &be.config.options);
    // Boxed (one allocation per TCP session): inline, the forwarding state would enlarge the
    // task of every session, HTTP ones included, and each spawn copies the whole future.
    let forwarding = forward::forward(&client, &conn.stream, client_t, server_t, bufsize, splice);
    let result = Box::pin(forwarding).await;
    match result {
        Ok(t) => trace(
            shared,
            format_args!(
                "{}: {peer} closed: {} bytes in, {} bytes out",
                fe.name, t.to_server, t.to_client
            ),
        ),
        Err(e) => trace(shared, format_args!("{}: {peer} aborted: {e}", fe.name)),
    }
}

/// A `-d` trace line on stderr.
fn trace(shared: &Shared, msg: std::fmt::Arguments<'_>) {
    if shared.debug {
        eprintln!("[debug] {msg}");
    }
}
