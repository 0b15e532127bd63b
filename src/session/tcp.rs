//! One client connection from accept to close, in TCP mode.
//!
//! The phases run in HAProxy's order: choose the backend (the first `use_backend`, else
//! `default_backend`), choose and connect to a server (with retries and redispatch, in
//! `backend`), then forward bytes both ways until both directions end, a side fails, or a side
//! stays idle past its timeout (in `net::forward`). Every path ends by dropping both sockets,
//! which closes them, and the session's limit slots, which lets a waiting worker accept again.

use std::net::SocketAddr;

use tokio::net::TcpStream;

use tokio::time::Instant;

use super::{connect_term, WorkerCtx};
use crate::backend::{self, ClientAddrs};
use crate::log::record::{Counters, Record, Timeline};
use crate::net::forward::{self, ForwardError, Side, SideTimeouts, Transferred};
use crate::state::Shared;

/// Runs a TCP-mode session for `client`, accepted by frontend `frontend`.
pub async fn run_tcp(
    shared: &Shared,
    ctx: &WorkerCtx,
    frontend: usize,
    client: TcpStream,
    peer: SocketAddr,
) {
    let fe_state = &shared.frontends[frontend];
    let fe = &fe_state.config;
    let logging = fe_state.log.enabled();
    // The clock is read for the log only.
    let mut tl = logging.then(|| Timeline::new(Instant::now()));
    let Some(be_idx) = fe.rules.first_static_backend().or(fe.default_backend) else {
        trace(
            shared,
            format_args!("{}: no backend for {peer}, closing", fe.name),
        );
        return;
    };
    let be = &shared.backends[be_idx];
    let addrs = ClientAddrs::of(|| client.local_addr(), peer, be);
    let key = backend::balance_key(&be.config, peer.ip(), None, |_| None);
    let connected = match backend::pick(be, &ctx.pickers[be_idx], key).await {
        Ok(server) => {
            if let Some(tl) = &mut tl {
                tl.queued = Some(Instant::now());
            }
            backend::connect_to(be, &ctx.pickers[be_idx], addrs, server).await
        }
        Err(e) => Err(e),
    };
    let conn = match connected {
        Ok(conn) => conn,
        Err(e) => {
            trace(
                shared,
                format_args!("{}/{}: {peer}: {e}, closing", fe.name, be.config.name),
            );
            if let Some(tl) = &tl {
                let (server, retries, redispatched) = match &e {
                    backend::ConnectError::Failed {
                        server,
                        attempts,
                        redispatched,
                        ..
                    } => (
                        be.config.servers.iter().position(|s| s.name == *server),
                        attempts.saturating_sub(1),
                        *redispatched,
                    ),
                    _ => (None, 0, false),
                };
                let term = connect_term(&e);
                let end = TcpEnd {
                    server,
                    retries,
                    redispatched,
                    holds_server: false,
                    bytes: Transferred::default(),
                    term,
                    server_local: None,
                };
                log_tcp(shared, frontend, be_idx, &client, peer, tl, &end);
            }
            return;
        }
    };
    if let Some(tl) = &mut tl {
        tl.connected = Some(Instant::now());
    }
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
    let forwarding =
        forward::forward_counted(&client, &conn.stream, client_t, server_t, bufsize, splice);
    let (bytes, result) = Box::pin(forwarding).await;
    let term = match &result {
        Ok(t) => {
            trace(
                shared,
                format_args!(
                    "{}: {peer} closed: {} bytes in, {} bytes out",
                    fe.name, t.to_server, t.to_client
                ),
            );
            *b"--"
        }
        Err(e) => {
            trace(shared, format_args!("{}: {peer} aborted: {e}", fe.name));
            match e {
                ForwardError::Timeout(Side::Client) => *b"cD",
                ForwardError::Timeout(Side::Server) => *b"sD",
                ForwardError::Io(Side::Client, _) => *b"CD",
                ForwardError::Io(Side::Server, _) => *b"SD",
            }
        }
    };
    if let Some(tl) = &tl {
        let log = &fe_state.log;
        if log.dontlognull && bytes.to_server == 0 && term == *b"--" {
            return;
        }
        let server_local = log
            .uses(crate::log::format::uses::SERVER_LOCAL)
            .then(|| conn.stream.local_addr().ok())
            .flatten();
        let end = TcpEnd {
            server: Some(conn.slot.server),
            retries: conn.retries,
            redispatched: conn.redispatched,
            holds_server: true,
            bytes,
            term,
            server_local,
        };
        log_tcp(shared, frontend, be_idx, &client, peer, tl, &end);
    }
}

/// How a TCP session ended, for its log line.
struct TcpEnd {
    server: Option<usize>,
    retries: u32,
    redispatched: bool,
    /// The session still counts in its server's connections.
    holds_server: bool,
    bytes: Transferred,
    term: [u8; 2],
    server_local: Option<SocketAddr>,
}

/// Writes the `option tcplog` (or `log-format`) line of a TCP session.
fn log_tcp(
    shared: &Shared,
    frontend: usize,
    be_idx: usize,
    client: &TcpStream,
    peer: SocketAddr,
    tl: &Timeline,
    end: &TcpEnd,
) {
    use crate::log::format::uses;
    let fe_state = &shared.frontends[frontend];
    let log = &fe_state.log;
    let be = &shared.backends[be_idx];
    let now = Instant::now();
    let srv = end.server.map(|s| &be.servers[s]);
    let own = u32::from(end.holds_server);
    let counters = Counters {
        actconn: shared.global_limit.current() as u32,
        feconn: fe_state.limit.current() as u32,
        beconn: if log.uses(uses::BE_CONN) {
            be.conn_count().saturating_sub(own)
        } else {
            0
        },
        srvconn: srv.map_or(0, |s| s.cur_conns.get().saturating_sub(own)),
        retries: end.retries,
        redispatched: end.redispatched,
        srv_queue: 0,
        be_queue: 0,
    };
    let captured = crate::log::record::Captured::default();
    let mut rec = Record {
        frontend: &fe_state.config.name,
        backend: Some(&be.config.name),
        server: srv.map(|s| s.config.name.as_str()),
        client: peer,
        local: if log.uses(uses::LOCAL_ADDR) {
            client.local_addr().ok()
        } else {
            None
        },
        server_local: end.server_local,
        server_addr: srv.map(|s| s.config.addr),
        times: tl.times(now, now, crate::log::now_us()),
        status: None,
        bytes_out: end.bytes.to_client,
        bytes_in: end.bytes.to_server,
        term: end.term,
        counters,
        request: None,
        captures: &captured,
        unique_id: None,
        hostname: "",
        req_counter: if log.uses(uses::REQ_COUNTER) {
            crate::log::next_request_id()
        } else {
            0
        },
        log_counter: 0,
        header: None,
    };
    let error = end.term != *b"--" || end.retries > 0;
    let level = if error && log.separate_errors {
        crate::log::LEVEL_ERR
    } else {
        crate::log::LEVEL_INFO
    };
    log.access(&shared.log_outputs, level, &mut rec);
}

/// A `-d` trace line on stderr.
fn trace(shared: &Shared, msg: std::fmt::Arguments<'_>) {
    if shared.debug {
        eprintln!("[debug] {msg}");
    }
}
