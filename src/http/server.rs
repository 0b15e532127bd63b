//! The session's side of server connections: the one it holds between transactions, the
//! worker's pool of idle ones it may take (as `http-reuse` allows) and give back, the other
//! workers' pools when its own has none (`session::takeover`), and new ones made through the
//! backend's connect path (retries, redispatch).

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
    /// It carried two requests to the end: proven reusable (`http-reuse aggressive`). (A bool
    /// rather than a count keeps this struct within the 128 bytes moved without a `memcpy`
    /// call: it is moved several times per request.)
    pub proven: bool,
    /// Connection attempts that failed before this connection was made (`%rc`).
    pub retries: u32,
    /// One of those retries went to another server (`option redispatch`).
    pub redispatched: bool,
    /// The position the request had in the server's queue, and in the backend's on a
    /// redispatch (`%sq`, `%bq`).
    pub srv_queue: u32,
    pub be_queue: u32,
    /// What its PROXY header said, if it began with one ([`backend::proxy_key`]).
    pub proxy_key: u64,
}

/// Below this idle time a pooled connection is reused without probing it first.
const FRESH_IDLE: Duration = Duration::from_millis(200);

/// Which idle connections another session left this transaction may take (`http-reuse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reuse {
    None,
    /// Only connections already proven reusable: they carried more than one request
    /// (`aggressive`, for a client's first request).
    Proven,
    Any,
}

/// What `http-reuse` lets this transaction take from the pool: `safe` keeps a client's first
/// request on a connection of its own, `aggressive` sends it only over a proven connection.
pub(super) fn may_reuse(bec: &BackendConfig, first: bool) -> Reuse {
    match (bec.http_reuse, first) {
        (HttpReuse::Never, _) | (HttpReuse::Safe, true) => Reuse::None,
        (HttpReuse::Aggressive, true) => Reuse::Proven,
        _ => Reuse::Any,
    }
}

/// Gives a reusable server connection back to this worker's idle pool, or aborts it when the
/// backend does not keep server connections (see [`session::abort`]).
pub(super) fn release(ctx: &WorkerCtx, conn: Option<Attached<'_>>, bec: &BackendConfig) {
    let Some(a) = conn else { return };
    let srv = &ctx.shared.backends[a.backend].servers[a.slot.server()].config;
    if bec.options.http_conn_mode != HttpConnMode::KeepAlive
        || bec.http_reuse == HttpReuse::Never
        || !a.sbuf.bytes().is_empty()
        || srv.pool_max_conn == Some(0)
    {
        session::abort(a.stream);
        return;
    }
    let key = (a.backend, a.slot.server(), a.proxy_key);
    ctx.put_idle(key, a.stream, a.proven, srv.pool_max_conn);
}

/// Takes an idle pooled connection to `server` (when allowed) or connects a new one, starting
/// with `server` and following the backend's retry rules.
#[allow(clippy::too_many_arguments)]
pub(super) async fn server_conn<'a>(
    shared: &'a Shared,
    ctx: &WorkerCtx,
    be_idx: usize,
    server: usize,
    reuse_pool: Reuse,
    addrs: ClientAddrs<'_>,
    bufsize: usize,
    assigned: backend::Assigned,
    sni: backend::SniValues<'_>,
    waiting: Option<&backend::Waiting>,
) -> Result<Attached<'a>, backend::ConnectError> {
    let be = &shared.backends[be_idx];
    if reuse_pool != Reuse::None {
        let want = backend::sni_of(&be.servers[server], sni);
        let proxy_key = backend::proxy_key(&be.servers[server].config, &addrs);
        let key = (be_idx, server, proxy_key);
        let proven = reuse_pool == Reuse::Proven;
        // This worker's pool first, then (as HAProxy's threads take over each other's idle
        // connections) the other workers'.
        let mut elsewhere = false;
        loop {
            let found = if elsewhere {
                ctx.take_idle_elsewhere(key, want, proven).await
            } else {
                ctx.take_idle(key, want, proven, session::POOL_IDLE)
            };
            let Some(IdleConn {
                server,
                stream,
                since,
                proven: was_proven,
                ..
            }) = found
            else {
                if elsewhere {
                    break;
                }
                elsewhere = true;
                continue;
            };
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
            // A stream sent to the server, as HAProxy counts one on a reused connection
            // (`connect_assigned` counts those it opens).
            slot.state().count_session();
            return Ok(Attached {
                backend: be_idx,
                stream,
                slot,
                sbuf: Buf::new(bufsize),
                reused: true,
                proven: was_proven,
                retries: 0,
                redispatched: false,
                srv_queue: 0,
                be_queue: 0,
                proxy_key,
            });
        }
    }
    let picker = &ctx.pickers[be_idx];
    let watch = backend::Watch {
        client: None,
        waiting,
        ..Default::default()
    };
    let c = backend::connect_assigned(be, picker, addrs, server, assigned, sni, watch).await?;
    let server_cfg = &be.servers[c.slot.server()].config;
    let proxy_key = backend::proxy_key(server_cfg, &addrs);
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
        proven: false,
        retries: c.retries,
        redispatched: c.redispatched,
        srv_queue: c.srv_queue,
        be_queue: c.be_queue,
        proxy_key,
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
#[cfg(test)]
mod tests {
    /// A session moves its server connection several times per request: within 128 bytes
    /// the moves are inline copies, beyond it each is a `memcpy` call (measured with
    /// callgrind: about 200 more instructions per keep-alive request at 136 bytes).
    #[test]
    fn a_server_connection_moves_without_memcpy() {
        assert!(std::mem::size_of::<super::Attached<'static>>() <= 128);
    }
}
