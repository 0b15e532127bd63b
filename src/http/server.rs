//! The session's side of server connections: the one it holds between transactions, the
//! worker's pool of idle ones it may take (as `http-reuse` allows) and give back, and new ones
//! made through the backend's connect path (retries, redispatch).

use std::io;
use std::time::Duration;

use crate::backend::{self, ClientAddrs, ServerSlot};
use crate::config::model::{Backend as BackendConfig, HttpConnMode, HttpReuse, Mux};
use crate::net::stream::Stream;
use crate::session::{self, IdleConn, WorkerCtx};
use crate::state::Shared;

use super::buf::Buf;

/// A server connection in use by a session, kept between its transactions.
pub(super) struct Attached<'a> {
    pub backend: usize,
    pub stream: Stream,
    pub slot: ServerSlot<'a>,
    pub sbuf: Buf,
    /// Served a request before: it may have been closed by the server meanwhile.
    pub reused: bool,
    /// Connection attempts that failed before this connection was made (`%rc`).
    pub retries: u32,
    /// One of those retries went to another server (`option redispatch`).
    pub redispatched: bool,
    /// The position the request had in the server's queue, and in the backend's on a
    /// redispatch (`%sq`, `%bq`).
    pub srv_queue: u32,
    pub be_queue: u32,
}

/// How long an idle server connection stays in the pool (HAProxy's `pool-purge-delay` default).
const POOL_IDLE: Duration = Duration::from_secs(5);

/// Below this idle time a pooled connection is reused without probing it first.
const FRESH_IDLE: Duration = Duration::from_millis(200);

/// Whether this transaction may take an idle connection another session left (`http-reuse`;
/// `safe` keeps a client's first request on a connection of its own).
pub(super) fn may_reuse(bec: &BackendConfig, first: bool) -> bool {
    match bec.http_reuse {
        HttpReuse::Never => false,
        HttpReuse::Safe => !first,
        HttpReuse::Aggressive | HttpReuse::Always => true,
    }
}

/// Gives a reusable server connection back to this worker's idle pool, or aborts it when the
/// backend does not keep server connections (see [`session::abort`]).
pub(super) fn release(ctx: &WorkerCtx, conn: Option<Attached<'_>>, bec: &BackendConfig) {
    let Some(a) = conn else { return };
    if bec.options.http_conn_mode != HttpConnMode::KeepAlive
        || bec.http_reuse == HttpReuse::Never
        || !a.sbuf.bytes().is_empty()
    {
        session::abort(a.stream);
        return;
    }
    let server = a.slot.server;
    ctx.put_idle(a.backend, server, a.stream);
}

/// Takes an idle pooled connection to `server` (when allowed) or connects a new one, starting
/// with `server` and following the backend's retry rules.
#[allow(clippy::too_many_arguments)]
pub(super) async fn server_conn<'a>(
    shared: &'a Shared,
    ctx: &WorkerCtx,
    be_idx: usize,
    server: usize,
    reuse_pool: bool,
    addrs: ClientAddrs,
    bufsize: usize,
    assigned: backend::Assigned,
    sni: backend::SniValues<'_>,
) -> Result<Attached<'a>, backend::ConnectError> {
    let be = &shared.backends[be_idx];
    if reuse_pool {
        let want = backend::sni_of(&be.servers[server], sni);
        while let Some(IdleConn {
            server,
            stream,
            since,
        }) = ctx.take_idle(be_idx, server, want, POOL_IDLE)
        {
            // A connection idle for a moment may have been closed by its server: probe it
            // (one syscall). Under load connections are idle for microseconds and the probe is
            // skipped; a late close is still caught by the retry of safe requests.
            if since.elapsed() > FRESH_IDLE && !still_open(&stream) {
                continue;
            }
            // At its maxconn, the server takes no more: this idle connection closes and the
            // request queues through the connect path below.
            let Some(slot) = ServerSlot::try_take(be, server) else {
                break;
            };
            return Ok(Attached {
                backend: be_idx,
                stream,
                slot,
                sbuf: Buf::new(bufsize),
                reused: true,
                retries: 0,
                redispatched: false,
                srv_queue: 0,
                be_queue: 0,
            });
        }
    }
    let c =
        backend::connect_assigned(be, &ctx.pickers[be_idx], addrs, server, assigned, sni).await?;
    let server_cfg = &be.config.servers[c.slot.server];
    let stream = if speaks_h2(server_cfg, &c.stream) {
        // The session writes HTTP/1.1 to a gateway that speaks HTTP/2 to the server.
        match super::h2::client::over_h2(c.stream) {
            Ok(s) => s,
            Err(last) => {
                return Err(backend::ConnectError::Failed {
                    server: server_cfg.name.clone(),
                    attempts: c.retries + 1,
                    redispatched: c.redispatched,
                    last,
                })
            }
        }
    } else {
        c.stream
    };
    Ok(Attached {
        backend: be_idx,
        stream,
        slot: c.slot,
        sbuf: Buf::new(bufsize),
        reused: false,
        retries: c.retries,
        redispatched: c.redispatched,
        srv_queue: c.srv_queue,
        be_queue: c.be_queue,
    })
}

/// Whether a new connection to `server` speaks HTTP/2: the line says `proto h2`, or ALPN chose
/// `h2` on a TLS connection and the line does not force `proto h1`.
fn speaks_h2(server: &crate::config::model::Server, stream: &Stream) -> bool {
    match server.proto {
        Some(Mux::H2) => true,
        Some(Mux::H1) => false,
        None => stream
            .tls()
            .is_some_and(|t| t.facts().alpn.as_deref() == Some(b"h2")),
    }
}

/// Whether an idle server connection still looks usable: nothing to read, not closed.
fn still_open(s: &Stream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.try_read(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}
