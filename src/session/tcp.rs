//! One client connection from accept to close, in TCP mode.
//!
//! The phases run in HAProxy's order: choose the backend (the first `use_backend`, else
//! `default_backend`), choose and connect to a server (with retries and redispatch, in
//! `backend`), then forward bytes both ways until both directions end, a side fails, or a side
//! stays idle past its timeout (in `net::forward`). Every path ends by dropping both sockets,
//! which closes them, and the session's limit slots, which lets a waiting worker accept again.

use std::cell::{Cell, OnceCell, RefCell};
use std::net::SocketAddr;

use tokio::time::Instant;

use super::facts::{Addrs, Kept, RuleList, RuleRef};
use super::{connect_term, Origin, WorkerCtx};
use crate::backend::{self, ClientAddrs};
use crate::config::model::Balance;
use crate::log::record::{Captured, Counters, Record, Timeline};
use crate::net::forward::{self, ForwardError, Side, SideTimeouts, Transferred};
use crate::net::stream::Stream;
use crate::rules::action::{Rule, TcpReqAction};
use crate::rules::vars::Vars;
use crate::state::Shared;

/// Runs a TCP-mode session for `client`, accepted by frontend `frontend`.
pub async fn run_tcp(
    shared: &Shared,
    ctx: &WorkerCtx,
    frontend: usize,
    client: Stream,
    origin: Origin,
    proxied: Option<&crate::proto::proxy::Header>,
) {
    let fe_state = &shared.frontends[frontend];
    let fe = &fe_state.config;
    let logging = fe_state.log.enabled();
    // The clock is read for the log only.
    let mut tl = logging.then(|| Timeline::new(Instant::now()));
    // A PROXY header's addresses are the session's (as in HAProxy 2.6); the connection's stay
    // the socket's.
    let fc = match proxied.and_then(|h| h.addrs) {
        Some(_) => Addrs {
            src: client.peer_addr().ok(),
            dst: None,
        },
        None => Addrs {
            src: origin.peer,
            dst: origin.local,
        },
    };
    // The client's address before any rule changed it (a PROXY header's if one came).
    let accept_peer = origin.peer;
    let mut who = Who {
        peer: origin.peer,
        dst: origin.local,
        fc,
        unix_listener: client.is_unix().then_some(origin.listener_id),
        listener_id: origin.listener_id,
        proxied,
    };
    // What the rules leave for the log line's `%[...]` (nothing is allocated until a rule
    // sets a variable or captures).
    let (txn_vars, sess_vars) = (RefCell::default(), RefCell::default());
    let mut captured = Captured::default();
    // The slots of `tcp-request content capture` rules, numbered with the proxy's others.
    let log = &fe_state.log;
    if !log.req_captures.is_empty() {
        captured.reset(log.req_captures.len(), log.res_captures.len());
    }
    // The entries `track-sc` rules track; dropping it (on any path out) releases them.
    let stick = crate::stick::track::Trackers::new();
    let stream = LogView {
        txn_vars: &txn_vars,
        sess_vars: &sess_vars,
        last_rule: Cell::new(None),
        stick: &stick,
    };
    // Keys `stick on|store-request|store-response` rules store with the server connected to.
    let mut stores = Vec::new();
    let sticky =
        |b: Option<usize>| b.is_some_and(|b| !shared.backends[b].config.rules.stick.is_empty());
    // The default backend's own `tcp-request content` rules run too.
    let be_rules = |b: Option<usize>| {
        b.is_some_and(|b| {
            !shared.backends[b]
                .config
                .rules
                .tcp_request_content
                .is_empty()
        })
    };
    let (chosen, stuck) = if fe.rules.use_backends.is_empty()
        && !has_tcp_rules(&fe.rules)
        && !sticky(fe.default_backend)
        && !be_rules(fe.default_backend)
    {
        // No rule to pass: a session at once (`tcp_rules` counts it after its rules).
        fe_state.counters.count_session();
        (fe.default_backend, None)
    } else {
        let sticks = (&stick, &mut stores);
        match tcp_rules(
            shared,
            frontend,
            &client,
            &mut who,
            &stream,
            &mut captured,
            sticks,
        )
        .await
        {
            Ok(b) => b,
            // Rejected by a connection or session rule: closed without a log line, as
            // HAProxy does (counted by `tcp_rules`).
            Err(Rejected::Connection) => {
                super::abort(client);
                return;
            }
            Err(Rejected::Session) => {
                if client.tls().is_some() || proxied.is_some() {
                    super::log_session_reject(shared, frontend, accept_peer, who.listener_id);
                }
                return;
            }
            // Rejected by a content rule: logged (`PR`), then closed once what the client sent
            // is read (a FIN, not the reset of unread bytes), as HAProxy does.
            Err(Rejected::Content { backend, seen }) => {
                shared.count_bytes(frontend, backend, None, seen, 0);
                if let Some(tl) = tl.as_ref().filter(|_| !unheard(fe_state, seen, &client)) {
                    let end = TcpEnd {
                        server: None,
                        retries: 0,
                        redispatched: false,
                        holds_server: false,
                        bytes: Transferred {
                            to_server: seen,
                            to_client: 0,
                        },
                        term: *b"PR",
                        server_local: None,
                        queues: (0, 0),
                        server_tls: None,
                    };
                    log_tcp(
                        shared, frontend, backend, &client, &who, tl, &end, &stream, &captured,
                    );
                }
                discard_pending(&client);
                // The FIN goes out now, before bytes arriving while the socket closes could
                // turn the close into a reset.
                let _ = socket2::SockRef::from(&client).shutdown(std::net::Shutdown::Write);
                return;
            }
        }
    };
    // What the rules made of the addresses.
    let (peer, dst) = (who.peer, who.dst);
    let Some(be_idx) = chosen else {
        trace(
            shared,
            format_args!("{}: no backend for {}, closing", fe.name, Shown(peer)),
        );
        return;
    };
    shared.backends[be_idx].count_session();
    let be = &shared.backends[be_idx];
    // What a `send-proxy-v2` header's TLVs say of the client: its TLS handshake's ALPN and
    // SNI, or the `AUTHORITY` a PROXY header brought.
    let v2 = match client.tls().map(|t| t.facts()) {
        _ if !be.send_proxy() => crate::proto::proxy::V2Owned::default(),
        tls => crate::proto::proxy::V2Owned {
            alpn: tls.and_then(|f| f.alpn.clone()),
            authority: proxied.and_then(|h| h.authority.clone()).or_else(|| {
                tls.and_then(|f| f.sni.as_ref())
                    .map(|s| s.as_bytes().into())
            }),
            unique_id: None,
        },
    };
    let addrs = ClientAddrs::of(|| dst.map_or_else(|| client.local_addr(), Ok), peer, be)
        .with_v2(v2.values());
    let key = match be.config.balance {
        Balance::Hash { .. } | Balance::RdpCookie { .. } => {
            sampled_key(shared, frontend, be_idx, &who, &client, &stream, &captured)
        }
        _ => backend::balance_key(&be.config, peer.map(|p| p.ip()), None, |_| None),
    };
    let mut be_queue = 0;
    let picked = match stuck {
        Some(server) => Ok((server, 0)),
        // The client is watched while it waits in the queue: one that leaves ends the session.
        None => {
            let watch = backend::Watch {
                client: Some(&client),
                waiting: None,
                abort_on_close: be.config.options.abortonclose,
            };
            backend::pick_queued(be, &ctx.pickers[be_idx], key, watch).await
        }
    };
    let connected = match picked {
        Ok((server, pos)) => {
            be_queue = pos;
            if let Some(tl) = &mut tl {
                tl.queued = Some(Instant::now());
            }
            let sni = sni_values(shared, frontend, be_idx, &who, &client, &stream);
            // The client is watched in a server's queue and between attempts: one that leaves
            // ends the session.
            let watch = backend::Watch {
                client: Some(&client),
                waiting: None,
                abort_on_close: be.config.options.abortonclose,
            };
            backend::connect_to(be, &ctx.pickers[be_idx], addrs, server, &sni, watch).await
        }
        Err(e) => Err(e),
    };
    if let Err(backend::ConnectError::ClientGone {
        server,
        reset: true,
        ..
    }) = &connected
    {
        // A reset while a retry was pending: HAProxy's client error on an established stream.
        be.count_abort(be.servers.find(server), backend::server::Abort::Client);
    }
    let conn = match connected {
        Ok(conn) => conn,
        Err(_) if unheard(fe_state, 0, &client) => return,
        Err(e) => {
            trace(
                shared,
                format_args!(
                    "{}/{}: {}: {e}, closing",
                    fe.name,
                    be.config.name,
                    Shown(peer)
                ),
            );
            if let Some(tl) = &mut tl {
                let mut queues = (0, be_queue);
                if let backend::ConnectError::QueueTimeout(spot)
                | backend::ConnectError::ClientLeftQueue { spot, .. } = &e
                {
                    // HAProxy's `Tw` runs until the request left the queue, as does its
                    // position there.
                    tl.queued = Some(Instant::now());
                    let (sq, bq) = spot.queues();
                    queues = (sq, be_queue + bq);
                }
                let (server, retries, redispatched) = match &e {
                    backend::ConnectError::Failed {
                        server,
                        attempts,
                        redispatched,
                        ..
                    } => (
                        be.servers.find(server),
                        attempts.saturating_sub(1),
                        *redispatched,
                    ),
                    backend::ConnectError::ClientGone {
                        server,
                        retries,
                        redispatched,
                        ..
                    } => (be.servers.find(server), *retries, *redispatched),
                    backend::ConnectError::QueueTimeout(spot)
                    | backend::ConnectError::ClientLeftQueue { spot, .. } => {
                        (spot.server, 0, false)
                    }
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
                    queues,
                    server_tls: None,
                };
                log_tcp(
                    shared,
                    frontend,
                    Some(be_idx),
                    &client,
                    &who,
                    tl,
                    &end,
                    &stream,
                    &captured,
                );
            }
            // HAProxy had read what the client sent while it waited: its close is a FIN.
            discard_pending(&client);
            return;
        }
    };
    if let Some(tl) = &mut tl {
        tl.connected = Some(Instant::now());
    }
    // A connection established (`connect`; TCP streams reuse none).
    be.count_connection(conn.slot.server(), false);
    if !be.config.rules.stick.is_empty() {
        stick_store(
            shared,
            frontend,
            be_idx,
            conn.slot.server(),
            &who,
            &mut stores,
        );
    }
    if be.config.options.srvtcpka && !conn.stream.is_unix() {
        let _ = socket2::SockRef::from(&conn.stream).set_keepalive(true);
    }
    // `option logasap`: the line goes out now that the server connection is up (HAProxy's
    // moment in TCP mode), with the bytes so far, and not again at the end.
    // The line of the session on `conn`, ended in `term` after `bytes` moved.
    let log_end = |tl: &Timeline, bytes, term, server_local| {
        let end = TcpEnd {
            server: Some(conn.slot.server()),
            retries: conn.retries,
            redispatched: conn.redispatched,
            holds_server: true,
            bytes,
            term,
            server_local,
            queues: (conn.srv_queue, be_queue + conn.be_queue),
            server_tls: conn.stream.tls().map(|t| t.facts()),
        };
        log_tcp(
            shared,
            frontend,
            Some(be_idx),
            &client,
            &who,
            tl,
            &end,
            &stream,
            &captured,
        );
    };
    let logged_early = match &tl {
        Some(tl) if fe.options.logasap => {
            log_end(tl, Default::default(), *b"--", None);
            true
        }
        _ => false,
    };
    let srv_name = &conn.slot.state().config.name;
    trace(
        shared,
        format_args!(
            "{}: {} -> {}/{srv_name} connected (retries {})",
            fe.name,
            Shown(peer),
            be.config.name,
            conn.retries
        ),
    );
    let bufsize = shared.global.tune_bufsize;
    // Bytes the client sent that went to the server while the response was inspected.
    let mut pre_sent = 0;
    let res_rules = &be.config.rules.tcp_response_content;
    if !res_rules.is_empty() {
        let at = ResInspect {
            shared,
            frontend,
            backend: be_idx,
            local: dst.or_else(|| client.local_addr().ok()),
            who: &who,
            stream: &stream,
            stick: &stick,
            tls: client.tls().map(|t| t.facts()),
            captured: &captured,
        };
        let delay = be.config.rules.res_inspect_delay;
        let (ok, sent, seen) = at.run(res_rules, delay, (&client, &conn.stream)).await;
        pre_sent = sent;
        if !ok {
            // `tcp-response content reject`: both sides close, the client gets nothing;
            // HAProxy counts what the server had sent (`%B`), and the refusal in `dresp`.
            shared.count_bytes(frontend, Some(be_idx), Some(conn.slot.server()), sent, seen);
            crate::state::Denied::count(&fe_state.denied.resp);
            be.count_denied_resp(Some(conn.slot.server()));
            if let (Some(tl), false, false) = (&tl, logged_early, unheard(fe_state, sent, &client))
            {
                let bytes = Transferred {
                    to_server: sent,
                    to_client: seen,
                };
                log_end(tl, bytes, *b"PD", None);
            }
            return;
        }
    }
    let client_t = SideTimeouts::client(fe, &be.config);
    let server_t = SideTimeouts::server(&be.config);
    let splice = forward::Splice::of(&fe.options, &be.config.options);
    // Boxed (one allocation per TCP session): inline, the forwarding state would enlarge the
    // task of every session, HTTP ones included, and each spawn copies the whole future.
    let forwarding =
        forward::forward_counted(&client, &conn.stream, client_t, server_t, bufsize, splice);
    let (mut bytes, result) = Box::pin(forwarding).await;
    bytes.to_server += pre_sent;
    let server = Some(conn.slot.server());
    shared.count_bytes(
        frontend,
        Some(be_idx),
        server,
        bytes.to_server,
        bytes.to_client,
    );
    // Its times, in the backend's and the server's averages (`qtime`... `ttime_max`).
    if let Some(times) = tl
        .as_ref()
        .and_then(|t| t.stat_times(Instant::now(), false))
    {
        be.streams.add_times(times);
        conn.slot.state().streams.add_times(times);
    }
    if stick.any() {
        let now = crate::base::clock::uptime_ms();
        stick.add_bytes(&shared.tables, bytes.to_server, bytes.to_client, now);
    }
    let term = match &result {
        Ok(t) => {
            trace(
                shared,
                format_args!(
                    "{}: {} closed: {} bytes in, {} bytes out",
                    fe.name,
                    Shown(peer),
                    t.to_server,
                    t.to_client
                ),
            );
            *b"--"
        }
        Err(e) => {
            trace(
                shared,
                format_args!("{}: {} aborted: {e}", fe.name, Shown(peer)),
            );
            match e {
                ForwardError::Timeout(Side::Client) => *b"cD",
                ForwardError::Timeout(Side::Server) => *b"sD",
                ForwardError::Io(Side::Client, _) => *b"CD",
                ForwardError::Io(Side::Server, _) => *b"SD",
            }
        }
    };
    for kind in super::aborts_of(term, None) {
        be.count_abort(Some(conn.slot.server()), *kind);
    }
    if let Some(tl) = tl.as_ref().filter(|_| !logged_early) {
        let log = &fe_state.log;
        if unheard(fe_state, bytes.to_server, &client) {
            return;
        }
        let server_local = log
            .uses(crate::log::format::uses::SERVER_LOCAL)
            .then(|| conn.stream.local_addr().ok())
            .flatten();
        log_end(tl, bytes, term, server_local);
    }
}

/// What a TCP session's rules leave for its log line: variables, the last final rule.
struct LogView<'a> {
    txn_vars: &'a RefCell<Vars>,
    sess_vars: &'a RefCell<Vars>,
    last_rule: Cell<Option<RuleRef>>,
    /// The entries the session tracks (`%[sc0_*]` in a log format).
    stick: &'a crate::stick::track::Trackers,
}

/// How a TCP session ended, for its log line.
struct TcpEnd<'a> {
    server: Option<usize>,
    retries: u32,
    redispatched: bool,
    /// The session still counts in its server's connections.
    holds_server: bool,
    bytes: Transferred,
    term: [u8; 2],
    server_local: Option<SocketAddr>,
    /// The positions in the server's and the backend's queues (`%sq`, `%bq`).
    queues: (u32, u32),
    /// The server connection's TLS handshake (`ssl_bc*` in a log format).
    server_tls: Option<&'a crate::net::tls::Handshake>,
}

/// Writes the `option tcplog` (or `log-format`) line of a TCP session; without a backend
/// (`be_idx` `None`: a frontend's rule ended it), the frontend stands for it, as in HAProxy.
#[allow(clippy::too_many_arguments)]
fn log_tcp(
    shared: &Shared,
    frontend: usize,
    be_idx: Option<usize>,
    client: &Stream,
    who: &Who<'_>,
    tl: &Timeline,
    end: &TcpEnd<'_>,
    stream: &LogView<'_>,
    captured: &Captured,
) {
    use crate::log::format::uses;
    let fe_state = &shared.frontends[frontend];
    let log = &fe_state.log;
    let be = be_idx.map(|b| &shared.backends[b]);
    let now = Instant::now();
    let srv = end.server.zip(be).map(|(s, be)| &be.servers[s]);
    let own = u32::from(end.holds_server);
    let counters = Counters {
        actconn: shared.global_limit.current() as u32,
        feconn: fe_state.limit.current() as u32,
        beconn: match be {
            Some(be) if log.uses(uses::BE_CONN) => be.conn_count().saturating_sub(own),
            _ => 0,
        },
        srvconn: srv.map_or(0, |s| s.cur_conns.get().saturating_sub(own)),
        retries: end.retries,
        redispatched: end.redispatched,
        srv_queue: end.queues.0,
        be_queue: end.queues.1,
    };
    let facts = super::facts::Facts {
        shared,
        frontend,
        backend: be_idx,
        server: end.server,
        peer: who.peer,
        unix_listener: who.unix_listener,
        listener_id: who.listener_id,
        client: None,
        sock: Some(std::os::fd::AsFd::as_fd(client)),
        tls: client.tls().map(|t| t.facts()),
        server_tls: end.server_tls,
        local: OnceCell::from(if log.uses(uses::LOCAL_ADDR) {
            who.dst.or_else(|| client.local_addr().ok())
        } else {
            None
        }),
        payload: None,
        res_payload: None,
        req: None,
        res: None,
        captured: Some(captured),
        vars: crate::rules::vars::Scopes {
            txn: stream.txn_vars,
            sess: stream.sess_vars,
            proc: &shared.proc_vars,
        },
        wait_over: true,
        kept: Kept {
            last_rule: stream.last_rule.get(),
            ..Kept::default()
        },
        stick: Some(stream.stick),
        proxied: who.proxied,
        fc: who.fc,
    };
    let mut rec = Record {
        frontend: &fe_state.config.name,
        backend: Some(be.map_or(&fe_state.config.name, |b| &b.config.name)),
        server: srv.map(|s| s.config.name.as_str()),
        client: who.peer,
        unix: crate::log::record::UnixEnds {
            listener: who.unix_listener,
            server: srv.is_some_and(|s| s.config.unix.is_some()),
        },
        local: crate::rules::Source::dst(&facts),
        server_local: end.server_local,
        server_addr: srv.map(|s| s.config.addr),
        times: tl.times(now, now, crate::log::now_us()),
        status: None,
        bytes_out: end.bytes.to_client,
        bytes_in: end.bytes.to_server,
        term: end.term,
        cookie_state: *b"--",
        cookie_req: None,
        cookie_res: None,
        counters,
        request: None,
        captures: captured,
        unique_id: None,
        hostname: "",
        req_counter: if log.uses(uses::REQ_COUNTER) {
            crate::log::next_request_id()
        } else {
            0
        },
        log_counter: 0,
    };
    let error = end.term != *b"--" || end.retries > 0;
    let level = if error && log.separate_errors {
        crate::log::LEVEL_ERR
    } else {
        crate::log::LEVEL_INFO
    };
    log.access(&shared.log_outputs, level, &mut rec, &facts);
}

/// A `-d` trace line on stderr.
fn trace(shared: &Shared, msg: std::fmt::Arguments<'_>) {
    if shared.debug {
        eprintln!("[debug] {msg}");
    }
}

/// Whether a proxy has rules a TCP-mode session runs before connecting.
fn has_tcp_rules(r: &crate::config::model::ProxyRules) -> bool {
    !(r.tcp_request_connection.is_empty()
        && r.tcp_request_session.is_empty()
        && r.tcp_request_content.is_empty())
}

/// Runs the TCP-mode rules of a new session: the frontend's `tcp-request connection`,
/// `session` and `content` rules (the last over the bytes the client sent, waiting for more
/// within `tcp-request inspect-delay` while a condition cannot be decided yet), `use_backend`,
/// then the chosen backend's `tcp-request content` rules. An error: a rule rejected the
/// connection (counted in the frontend's `dcon`, `dses` or `dreq`, as HAProxy counts them);
/// `Ok(backend)` otherwise (`Ok(None)`: no backend applies).
async fn tcp_rules(
    shared: &Shared,
    frontend: usize,
    client: &Stream,
    who: &mut Who<'_>,
    stream: &LogView<'_>,
    captured: &mut Captured,
    (stick, stores): (
        &crate::stick::track::Trackers,
        &mut Vec<(usize, crate::stick::Key)>,
    ),
) -> Result<(Option<usize>, Option<usize>), Rejected> {
    use crate::config::model::BackendTarget;
    use crate::state::Denied;
    let fe = &shared.frontends[frontend].config;
    let denied = &shared.frontends[frontend].denied;
    let local = who.dst.or_else(|| client.local_addr().ok());
    who.fc.dst = who.fc.dst.or_else(|| client.local_addr().ok());
    let mut ev = crate::rules::Eval::new();
    let mut val = Vec::new();
    let mut payload = Vec::new();
    let mut st = TcpState {
        shared,
        frontend,
        backend: None,
        local: Cell::new(who.fc.dst),
        fc: Cell::new(who.fc),
        txn_vars: stream.txn_vars,
        sess_vars: stream.sess_vars,
        last_rule: &stream.last_rule,
        unix_listener: who.unix_listener,
        listener_id: who.listener_id,
        stick,
        tls: client.tls().map(|t| t.facts()),
        sock: Some(std::os::fd::AsFd::as_fd(client)),
        level: crate::stick::track::Level::Session,
        proxied: who.proxied,
    };
    let r = &fe.rules;
    // The connection list ran at accept if it could (`ProxyRules::connection_at_accept`: it
    // changed no address then). Here, it sees and changes the connection's addresses
    // (`fc_src`); a PROXY header's, which HAProxy receives after it, are the session's from
    // then on.
    if !r.connection_at_accept() {
        let mut conn_peer = who.fc.src;
        let list = &r.tcp_request_connection;
        let verdict = st.run(list, &mut conn_peer, &[], true, &mut ev, &mut val, captured);
        if verdict == Tcp::Reject {
            Denied::count(&denied.conn);
            return Err(Rejected::Connection);
        }
        who.fc = Addrs {
            src: conn_peer,
            dst: st.local.get(),
        };
        st.fc.set(who.fc);
        if who.proxied.and_then(|h| h.addrs).is_some() {
            st.local.set(local);
        } else {
            who.peer = conn_peer;
        }
    }
    let peer = &mut who.peer;
    let list = &r.tcp_request_session;
    if st.run(list, peer, &[], true, &mut ev, &mut val, captured) == Tcp::Reject {
        Denied::count(&denied.sess);
        return Err(Rejected::Session);
    }
    shared.frontends[frontend].counters.count_session();
    if stick.any() {
        let now = crate::base::clock::uptime_ms();
        stick.count(&shared.tables, crate::stick::track::Event::Session, now);
    }
    st.level = crate::stick::track::Level::Stream;
    if !st
        .inspect(
            &r.tcp_request_content,
            r.inspect_delay,
            client,
            peer,
            &mut payload,
            &mut ev,
            &mut val,
            captured,
        )
        .await
    {
        Denied::count(&denied.req);
        let seen = payload.len() as u64;
        return Err(Rejected::Content {
            backend: None,
            seen,
        });
    }
    let mut chosen = None;
    for rule in &r.use_backends {
        let f = st.facts(*peer, &payload, captured);
        if !rule.cond.as_ref().is_none_or(|c| c.eval(&f, &mut ev)) {
            continue;
        }
        match &rule.action {
            BackendTarget::Static(b) => chosen = Some(*b),
            BackendTarget::Dynamic(lf) => {
                val.clear();
                lf.render(&f, &mut ev, &|_, _| {}, &mut val);
                chosen = shared
                    .backends
                    .iter()
                    .position(|b| b.config.name.as_bytes() == &val[..] && b.config.mode == fe.mode);
            }
        }
        if chosen.is_some() {
            break;
        }
    }
    let chosen = chosen.or(fe.default_backend);
    if let Some(b) = chosen {
        let be_rules = &shared.backends[b].config.rules;
        if !std::sync::Arc::ptr_eq(be_rules, r) {
            st.backend = Some(b);
            let (list, delay) = (&be_rules.tcp_request_content, be_rules.inspect_delay);
            if !st
                .inspect(
                    list,
                    delay,
                    client,
                    peer,
                    &mut payload,
                    &mut ev,
                    &mut val,
                    captured,
                )
                .await
            {
                Denied::count(&denied.req);
                let seen = payload.len() as u64;
                return Err(Rejected::Content {
                    backend: Some(b),
                    seen,
                });
            }
        }
    }
    // `persist rdp-cookie`, then the backend's `stick match|on|store-request` rules (which
    // match only when no server is assigned yet), over what the client sent.
    let mut stuck = None;
    if let Some(b) = chosen {
        let config = &shared.backends[b].config;
        stuck = config
            .rdp_persist
            .as_deref()
            .and_then(|name| rdp_persisted(&shared.backends[b], name, &payload));
        let rules = &config.rules.stick;
        if !rules.is_empty() {
            st.backend = Some(b);
            let f = st.facts(*peer, &payload, captured);
            let persist = config.options.persist;
            stuck = super::stick::stick_request(rules, &f, &mut ev, stuck, persist, stores);
        }
    }
    who.dst = st.local.get();
    Ok((chosen, stuck))
}

/// Whether `option dontlognull` keeps a session's line back: the client sent nothing (`sent`
/// bytes went on, none wait in the socket), whatever the session's end, as HAProxy 2.6 logs
/// a stream only `if (!(fe->options & PR_O_NULLNOLOG) || req->total)`.
fn unheard(fe: &crate::state::Frontend, sent: u64, client: &Stream) -> bool {
    fe.log.dontlognull && sent == 0 && peek_now(client, &mut Vec::new(), 1).0 == 0
}

/// Which rule list rejected a TCP session.
enum Rejected {
    /// `tcp-request connection`: closed with a reset, not logged.
    Connection,
    /// `tcp-request session`: closed, not logged.
    Session,
    /// `tcp-request content` of the frontend (`backend` `None`) or of `backend`: logged with
    /// `PR`; `seen`: the bytes of the client the rules read.
    Content { backend: Option<usize>, seen: u64 },
}

/// Reads and drops what the client sent and nobody read (the rules only peeked at it), so
/// that closing sends a FIN: the kernel answers the close of a socket with unread bytes with a
/// reset, and HAProxy, which had read them, closes with a FIN.
fn discard_pending(client: &Stream) {
    let mut buf = [0u8; 4096];
    // Bounded: a client still sending gets the reset.
    for _ in 0..64 {
        match client.try_read(&mut buf) {
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
}

/// Commits a TCP session's stick stores once it is connected to `server`, after the backend's
/// `stick store-response` rules (which see no response in TCP mode: HAProxy stores when the
/// server's first bytes arrive, Bascule when the connection is established).
fn stick_store(
    shared: &Shared,
    frontend: usize,
    be: usize,
    server: usize,
    who: &Who<'_>,
    stores: &mut Vec<(usize, crate::stick::Key)>,
) {
    let vars = std::cell::RefCell::default();
    let f = super::facts::Facts {
        shared,
        frontend,
        backend: Some(be),
        server: Some(server),
        peer: who.peer,
        unix_listener: None,
        listener_id: 0,
        client: None,
        sock: None,
        tls: None,
        server_tls: None,
        local: std::cell::OnceCell::new(),
        payload: None,
        res_payload: None,
        req: None,
        res: None,
        captured: None,
        vars: crate::rules::vars::Scopes {
            txn: &vars,
            sess: &vars,
            proc: &shared.proc_vars,
        },
        wait_over: true,
        kept: Default::default(),
        stick: None,
        proxied: who.proxied,
        fc: who.fc,
    };
    let mut ev = crate::rules::Eval::new();
    let rules = &shared.backends[be].config.rules.stick;
    super::stick::stick_store(rules, &f, &mut ev, stores);
}

/// What a TCP-mode rule list decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tcp {
    /// The list ran out, or said `accept`.
    Go,
    Reject,
    /// A condition needs more data than the client sent so far.
    Wait,
}

/// Who a TCP session's client is, as its rules leave it and its log line reads it.
#[derive(Clone, Copy)]
struct Who<'a> {
    /// The session's and stream's client address (`src`).
    peer: Option<SocketAddr>,
    /// Where it connected (`dst`; `None`: the socket's local address).
    dst: Option<SocketAddr>,
    /// The connection's own addresses (`fc_src`, `fc_dst`).
    fc: Addrs,
    /// The listener id of a UNIX socket's client.
    unix_listener: Option<u32>,
    /// The id of the listener that accepted it (`so_id`).
    listener_id: u32,
    /// The PROXY protocol header the connection began with.
    proxied: Option<&'a crate::proto::proxy::Header>,
}

/// The stream facts a TCP-mode session's rules read.
struct TcpState<'a> {
    shared: &'a Shared,
    frontend: usize,
    backend: Option<usize>,
    /// The destination, as `set-dst` rules leave it.
    local: Cell<Option<SocketAddr>>,
    /// The connection's addresses (`fc_src`, `fc_dst`).
    fc: Cell<Addrs>,
    txn_vars: &'a std::cell::RefCell<crate::rules::vars::Vars>,
    sess_vars: &'a std::cell::RefCell<crate::rules::vars::Vars>,
    /// The last `tcp-request content accept|reject` that ran.
    last_rule: &'a Cell<Option<RuleRef>>,
    /// The listener id of a UNIX socket's client.
    unix_listener: Option<u32>,
    /// The id of the listener that accepted the client (`so_id`).
    listener_id: u32,
    stick: &'a crate::stick::track::Trackers,
    /// The client's TLS handshake, if it is TLS.
    tls: Option<&'a crate::net::tls::Handshake>,
    /// The client's socket (`fc_rtt` and the other `TCP_INFO` fetches).
    sock: Option<std::os::fd::BorrowedFd<'a>>,
    /// The PROXY protocol header the connection began with (`fc_pp_*`).
    proxied: Option<&'a crate::proto::proxy::Header>,
    /// Where a `track-sc` of the running list tracks.
    level: crate::stick::track::Level,
}

/// `persist rdp-cookie(NAME)`: the server whose IPv4 address and port the RDP connection's
/// cookie NAME names (a session broker's `msts=ADDR.PORT.`), as HAProxy picks it: the first
/// such server that is usable, or any with `option persist`.
fn rdp_persisted(be: &backend::Backend, name: &str, payload: &[u8]) -> Option<usize> {
    let v = crate::rules::fetch::rdp_cookie(payload, Some(name.as_bytes())).ok()?;
    let want = SocketAddr::V4(crate::lb::key::rdp_broker_address(v)?);
    let persist = be.config.options.persist;
    be.servers
        .live()
        .find(|(_, s)| s.config.unix.is_none() && s.addr.load() == want && (persist || s.usable()))
        .map(|(k, _)| k)
}

/// The key of a `balance hash EXPR` or `balance rdp-cookie(NAME)` backend: the hash of what
/// the expression gives (as binary) or of the RDP cookie, read from the bytes the client has
/// sent so far (those `tcp-request content` rules waited for), as HAProxy reads its buffer
/// when it assigns the server; `None` (round-robin) when there is no such value.
fn sampled_key(
    shared: &Shared,
    frontend: usize,
    be_idx: usize,
    who: &Who<'_>,
    client: &Stream,
    stream: &LogView<'_>,
    captured: &Captured,
) -> Option<u32> {
    let config = &shared.backends[be_idx].config;
    let mut payload = Vec::new();
    let (n, _) = peek_now(client, &mut payload, shared.global.tune_bufsize);
    payload.truncate(n);
    if let Balance::RdpCookie { name } = &config.balance {
        let v = crate::rules::fetch::rdp_cookie(&payload, Some(name.as_bytes())).ok()?;
        return (!v.is_empty()).then(|| backend::sample_key(config, v));
    }
    let expr = config.rules.balance_hash.as_ref()?;
    let payload = Some(&payload[..]);
    let facts = backend_facts(
        shared,
        frontend,
        be_idx,
        who,
        client,
        stream,
        payload,
        Some(captured),
    );
    let mut ev = crate::rules::Eval::new();
    let b = expr
        .eval(&facts, &mut ev)
        .and_then(|s| crate::rules::sample::to_bin(s, &mut ev))?;
    Some(backend::sample_key(config, ev.get(b)))
}

/// What the rules read of a TCP-mode stream once its backend `be_idx` is chosen, outside the
/// rule lists (a `balance hash` expression, a server's `sni`): `payload`, the bytes the client
/// sent so far, if they are offered.
#[allow(clippy::too_many_arguments)]
fn backend_facts<'a>(
    shared: &'a Shared,
    frontend: usize,
    be_idx: usize,
    who: &'a Who<'_>,
    client: &'a Stream,
    stream: &'a LogView<'_>,
    payload: Option<&'a [u8]>,
    captured: Option<&'a Captured>,
) -> super::facts::Facts<'a> {
    super::facts::Facts {
        shared,
        frontend,
        backend: Some(be_idx),
        server: None,
        peer: who.peer,
        unix_listener: who.unix_listener,
        listener_id: who.listener_id,
        client: None,
        sock: Some(std::os::fd::AsFd::as_fd(client)),
        tls: client.tls().map(|t| t.facts()),
        server_tls: None,
        // `None` in `who`: the socket's own address.
        local: OnceCell::from(who.dst.or_else(|| client.local_addr().ok())),
        payload,
        res_payload: None,
        req: None,
        res: None,
        captured,
        vars: crate::rules::vars::Scopes {
            txn: stream.txn_vars,
            sess: stream.sess_vars,
            proc: &shared.proc_vars,
        },
        wait_over: true,
        kept: Kept::default(),
        stick: Some(stream.stick),
        proxied: who.proxied,
        fc: who.fc,
    }
}

/// The values of backend `be_idx`'s `sni` expressions for this connection (`sni
/// ssl_fc_sni` bridges the client's SNI; the buffered payload is not offered to them).
fn sni_values(
    shared: &Shared,
    frontend: usize,
    be_idx: usize,
    who: &Who<'_>,
    client: &Stream,
    stream: &LogView<'_>,
) -> Vec<Option<String>> {
    let exprs = &shared.backends[be_idx].config.sni_exprs;
    if exprs.is_empty() {
        return Vec::new();
    }
    let facts = backend_facts(shared, frontend, be_idx, who, client, stream, None, None);
    let mut ev = crate::rules::Eval::new();
    exprs
        .iter()
        .map(|e| {
            let b = e
                .eval(&facts, &mut ev)
                .and_then(|s| crate::rules::sample::to_bytes(s, &mut ev))?;
            Some(String::from_utf8_lossy(ev.get(b)).into_owned())
        })
        .collect()
}

impl<'a> TcpState<'a> {
    fn facts<'f>(
        &'f self,
        peer: Option<SocketAddr>,
        payload: &'f [u8],
        captured: &'f crate::log::record::Captured,
    ) -> super::facts::Facts<'f> {
        super::facts::Facts {
            shared: self.shared,
            frontend: self.frontend,
            backend: self.backend,
            server: None,
            peer,
            unix_listener: self.unix_listener,
            listener_id: self.listener_id,
            client: None,
            sock: self.sock,
            tls: self.tls,
            server_tls: None,
            local: std::cell::OnceCell::from(self.local.get()),
            payload: Some(payload),
            res_payload: None,
            req: None,
            res: None,
            captured: Some(captured),
            vars: crate::rules::vars::Scopes {
                txn: self.txn_vars,
                sess: self.sess_vars,
                proc: &self.shared.proc_vars,
            },
            wait_over: true,
            kept: Default::default(),
            stick: Some(self.stick),
            proxied: self.proxied,
            fc: self.fc.get(),
        }
    }

    /// Notes rule `index` of `rules` as the last final rule when `rules` is a
    /// `tcp-request content` list (HAProxy keeps none for the connection and session lists,
    /// which run before the stream exists).
    fn note_final(&self, rules: &[Rule<TcpReqAction>], index: usize) {
        let of = |i: Option<usize>| match i {
            None => &self.shared.frontends[self.frontend].config.rules,
            Some(b) => &self.shared.backends[b].config.rules,
        };
        let backend = [None, self.backend]
            .into_iter()
            .find(|&b| std::ptr::eq(of(b).tcp_request_content.as_ptr(), rules.as_ptr()));
        if let Some(backend) = backend {
            self.last_rule.set(Some(RuleRef {
                backend,
                list: RuleList::TcpRequestContent,
                index,
            }));
        }
    }

    /// Runs `rules` once over `payload`, from the first. `wait_over`: no more data will come
    /// (no inspect delay, or it expired, or the client ended its side), so an undecided
    /// condition counts as false; else an undecided one stops the list, which runs again from
    /// its first rule when more bytes come, as HAProxy 2.6's `tcp_inspect_request` does (it
    /// resumes only an action that yielded): an action before it runs again (a variable set
    /// to `req.len` holds the last length; a `track-sc` already tracking is left).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        rules: &[crate::rules::action::Rule<crate::rules::action::TcpReqAction>],
        peer: &mut Option<SocketAddr>,
        payload: &[u8],
        wait_over: bool,
        ev: &mut crate::rules::Eval,
        val: &mut Vec<u8>,
        captured: &mut crate::log::record::Captured,
    ) -> Tcp {
        use crate::rules::action::{TcpReqAction, VarAction};
        use crate::rules::{Match, Source, Value};
        for (i, rule) in rules.iter().enumerate() {
            let mut f = self.facts(*peer, payload, captured);
            f.wait_over = wait_over;
            match rule.cond.as_ref().map_or(Match::Yes, |c| c.eval3(&f, ev)) {
                Match::Yes => {}
                Match::No => continue,
                Match::Miss if wait_over => continue,
                Match::Miss => return Tcp::Wait,
            }
            if matches!(rule.action, TcpReqAction::Accept | TcpReqAction::Reject) {
                self.note_final(rules, i);
            }
            match &rule.action {
                TcpReqAction::Accept => return Tcp::Go,
                TcpReqAction::Reject => return Tcp::Reject,
                // Run at accept (`runtime::worker`): a list that has it never runs here.
                TcpReqAction::ExpectProxy => {}
                TcpReqAction::Var(VarAction::Set { var, expr }) => {
                    if let Some(s) = expr.eval(&f, ev) {
                        let v = ev.value(s);
                        f.set_var_if(var.scope, var.id, v, var.cond);
                    }
                }
                TcpReqAction::Var(VarAction::SetFmt { var, fmt }) => {
                    val.clear();
                    fmt.render(&f, ev, &|_, _| {}, val);
                    f.set_var_if(var.scope, var.id, Value::Str(val), var.cond);
                }
                TcpReqAction::Var(VarAction::Unset { var }) => f.vars.unset(var.scope, var.id),
                TcpReqAction::TrackSc(t) => {
                    super::stick::track(t, &f, self.stick, self.level, ev, false, None);
                }
                TcpReqAction::Sc(a) => crate::rules::stick::run_sc(a, &f, ev),
                TcpReqAction::Capture { expr, len, slot } => {
                    val.clear();
                    if let Some(b) = expr
                        .eval(&f, ev)
                        .and_then(|s| crate::rules::sample::to_bytes(s, ev))
                    {
                        val.extend_from_slice(ev.get(b));
                        captured.set(false, *slot, val, *len);
                    }
                }
                TcpReqAction::SetSrc(e) | TcpReqAction::SetDst(e) => {
                    let ip = e
                        .eval(&f, ev)
                        .and_then(|s| crate::rules::sample::to_ip(s, ev));
                    let dst = self.local.get();
                    match (ip, &rule.action) {
                        (Some(ip), TcpReqAction::SetSrc(_)) => {
                            *peer = Some(SocketAddr::new(ip, peer.map_or(0, |p| p.port())));
                        }
                        (Some(ip), _) => {
                            let port = dst.map_or(0, |d| d.port());
                            self.local.set(Some(SocketAddr::new(ip, port)));
                        }
                        (None, _) => {}
                    }
                }
                TcpReqAction::SetSrcPort(e) | TcpReqAction::SetDstPort(e) => {
                    let port = e
                        .eval(&f, ev)
                        .and_then(|s| crate::rules::sample::to_int(s, ev));
                    match (port, &rule.action, self.local.get()) {
                        // A UNIX socket's client has no port to change (as in HAProxy).
                        (Some(p), TcpReqAction::SetSrcPort(_), _) => {
                            if let Some(peer) = peer.as_mut() {
                                peer.set_port(p as u16);
                            }
                        }
                        (Some(p), _, Some(mut d)) => {
                            d.set_port(p as u16);
                            self.local.set(Some(d));
                        }
                        _ => {}
                    }
                }
            }
        }
        Tcp::Go
    }

    /// `tcp-request content` rules over what the client sent, peeked (it stays in the socket
    /// for the forwarding): while a condition cannot be decided and `delay` has not expired,
    /// wait for more bytes and run the list again. False: rejected.
    #[allow(clippy::too_many_arguments)]
    async fn inspect(
        &self,
        rules: &[crate::rules::action::Rule<crate::rules::action::TcpReqAction>],
        delay: Option<std::time::Duration>,
        client: &Stream,
        peer: &mut Option<SocketAddr>,
        payload: &mut Vec<u8>,
        ev: &mut crate::rules::Eval,
        val: &mut Vec<u8>,
        captured: &mut crate::log::record::Captured,
    ) -> bool {
        if rules.is_empty() {
            return true;
        }
        let Some(delay) = delay else {
            let (n, _) = peek_now(client, payload, self.shared.global.tune_bufsize);
            payload.truncate(n);
            return self.run(rules, peer, payload, true, ev, val, captured) != Tcp::Reject;
        };
        let deadline = Instant::now() + delay;
        loop {
            // The end of the input first: once the client's FIN is in, the peek that follows
            // sees every byte before it.
            let ended = client.input_ended();
            let (n, closed) = peek_now(client, payload, self.shared.global.tune_bufsize);
            // A client that ended its side sends nothing more: the rules decide at once on
            // what it sent (HAProxy's rules are final once the request channel is shut:
            // `WAIT_END` is true, `req.len` final).
            let over = closed
                || ended
                || Instant::now() >= deadline
                || n == self.shared.global.tune_bufsize;
            // What later rules (`use_backend`, the backend's) read: the bytes seen, no more.
            payload.truncate(n);
            match self.run(rules, peer, payload, over, ev, val, captured) {
                Tcp::Go => return true,
                Tcp::Reject => return false,
                Tcp::Wait => {}
            }
            // Wait for more than the `n` bytes seen, for the end of the input, or for the
            // delay's end. A peek leaves the socket readable, so readiness cannot say "more":
            // look again every few ms (only while a rule is undecided within its inspect
            // delay).
            if over {
                return true;
            }
            let mut probe = Vec::new();
            while Instant::now() < deadline {
                tokio::time::sleep(INSPECT_POLL.min(deadline - Instant::now())).await;
                let (m, closed) = peek_now(client, &mut probe, n + 1);
                if m > n || m == 0 && n > 0 || closed || client.input_ended() {
                    break;
                }
            }
        }
    }
}

/// What the backend's `tcp-response content` rules read in TCP mode, besides the server's
/// bytes.
struct ResInspect<'a> {
    shared: &'a Shared,
    frontend: usize,
    backend: usize,
    local: Option<SocketAddr>,
    who: &'a Who<'a>,
    stream: &'a LogView<'a>,
    stick: &'a crate::stick::track::Trackers,
    tls: Option<&'a crate::net::tls::Handshake>,
    captured: &'a Captured,
}

impl ResInspect<'_> {
    /// Runs `rules` over what the server sent first (peeked: the bytes stay for the
    /// forwarding), waiting for more within `delay` while a condition cannot be decided, as
    /// haproxy's `tcp_inspect_response`; meanwhile what the client sends goes to the server
    /// (a server that answers a request has to get it). False: a rule rejected (or a side
    /// failed); with the number of bytes moved to the server and the number the server sent.
    /// A server that ended its side ends the delay (its bytes are all there is).
    async fn run(
        &self,
        rules: &[crate::rules::action::Rule<crate::rules::action::TcpResAction>],
        delay: Option<std::time::Duration>,
        (client, server): (&Stream, &Stream),
    ) -> (bool, u64, u64) {
        let who = self.who;
        use crate::rules::action::{TcpResAction as A, VarAction};
        use crate::rules::{Source, Value};
        let max = self.shared.global.tune_bufsize;
        // Without an inspect delay the rules run once, at once, on whatever the server sent
        // (observed with haproxy 2.6: usually nothing yet).
        let deadline = delay.map(|d| Instant::now() + d);
        let mut closed = false;
        let mut buf = Vec::new();
        let mut ev = crate::rules::Eval::new();
        let mut val = Vec::new();
        let mut next;
        let (mut sent, mut relay, mut client_open) = (0u64, Vec::new(), true);
        loop {
            // The server's end first (see `TcpState::inspect`): the peek then sees every byte.
            let ended = server.input_ended();
            let (n, _) = peek_now(server, &mut buf, max);
            buf.truncate(n);
            let over = deadline.is_none_or(|d| Instant::now() >= d) || n == max || closed || ended;
            // Each run starts at the first rule, as HAProxy's `tcp_inspect_response`.
            next = 0;
            let f = super::facts::Facts {
                shared: self.shared,
                frontend: self.frontend,
                backend: Some(self.backend),
                server: None,
                peer: who.peer,
                unix_listener: who.unix_listener,
                listener_id: who.listener_id,
                client: None,
                sock: None,
                tls: self.tls,
                server_tls: None,
                local: std::cell::OnceCell::from(self.local),
                payload: None,
                res_payload: Some(&buf),
                req: None,
                res: None,
                captured: Some(self.captured),
                vars: crate::rules::vars::Scopes {
                    txn: self.stream.txn_vars,
                    sess: self.stream.sess_vars,
                    proc: &self.shared.proc_vars,
                },
                wait_over: over,
                kept: Default::default(),
                stick: Some(self.stick),
                proxied: who.proxied,
                fc: who.fc,
            };
            while let Some(rule) = rules.get(next) {
                let m = rule
                    .cond
                    .as_ref()
                    .map_or(crate::rules::Match::Yes, |c| c.eval3(&f, &mut ev));
                match m {
                    crate::rules::Match::Miss => break,
                    crate::rules::Match::No => {
                        next += 1;
                        continue;
                    }
                    crate::rules::Match::Yes => next += 1,
                }
                if matches!(rule.action, A::Accept | A::Reject) {
                    // The last final rule (`last_rule_file`, `last_rule_line`).
                    self.stream.last_rule.set(Some(RuleRef {
                        backend: Some(self.backend),
                        list: RuleList::TcpResponseContent,
                        index: next - 1,
                    }));
                }
                match &rule.action {
                    A::Accept => return (true, sent, n as u64),
                    A::Reject => return (false, sent, n as u64),
                    A::Var(VarAction::Set { var, expr }) => {
                        if let Some(s) = expr.eval(&f, &mut ev) {
                            let v = ev.value(s);
                            f.set_var_if(var.scope, var.id, v, var.cond);
                        }
                    }
                    A::Var(VarAction::SetFmt { var, fmt }) => {
                        val.clear();
                        fmt.render(&f, &mut ev, &|_, _| {}, &mut val);
                        f.set_var_if(var.scope, var.id, Value::Str(&val), var.cond);
                    }
                    A::Var(VarAction::Unset { var }) => f.vars.unset(var.scope, var.id),
                }
            }
            if next >= rules.len() || over {
                return (true, sent, n as u64);
            }
            // Wait for more than the `n` bytes seen, or for the delay's end (see `inspect`).
            let mut probe = Vec::new();
            loop {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if client_open {
                    relay.resize(max, 0);
                    match client.try_read(&mut relay) {
                        Ok(0) => client_open = false,
                        Ok(k) => {
                            if write_all(server, &relay[..k]).await.is_err() {
                                return (false, sent, n as u64);
                            }
                            sent += k as u64;
                            continue;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return (false, sent, n as u64),
                    }
                }
                let nap = deadline.map_or(INSPECT_POLL, |d| INSPECT_POLL.min(d - now));
                tokio::time::sleep(nap).await;
                probe.resize(n + 1, 0);
                match server.try_peek(&mut probe) {
                    Ok(m) if m > n => break,
                    // The server ended its side after the bytes seen.
                    Ok(_) if server.input_ended() => break,
                    Ok(0) => {
                        // The server closed: decide on what it sent.
                        closed = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
        }
    }
}

/// Writes all of `b` to `s`.
async fn write_all(s: &Stream, mut b: &[u8]) -> std::io::Result<()> {
    while !b.is_empty() {
        s.writable().await?;
        match s.try_write(b) {
            Ok(n) => b = &b[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How often an undecided `tcp-request content` rule looks for more bytes.
const INSPECT_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// Peeks at what the client sent so far (at most `max` bytes) into `buf`, without waiting;
/// returns how many, and whether the stream ended with nothing before the end (a peek cannot
/// see the end behind bytes not yet read).
fn peek_now(client: &Stream, buf: &mut Vec<u8>, max: usize) -> (usize, bool) {
    buf.resize(max, 0);
    match client.try_peek(buf) {
        // The end of the stream, with nothing before it.
        Ok(0) => (0, max > 0),
        Ok(n) => (n, false),
        Err(_) => (0, false),
    }
}

/// A client address in a `-d` trace line (`unix` for a UNIX socket's client).
struct Shown(Option<SocketAddr>);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("unix"),
        }
    }
}
