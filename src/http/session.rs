//! An HTTP/1 client connection: its transactions one after the other, each through HAProxy's
//! phases (see the chart in [`super`]), then keep-alive, parking or close.
//!
//! [`Session`] holds what outlives a transaction: the client socket and its read buffer, the
//! per-side deadlines, the scratch space, the server connection kept for the next request.
//! [`run`] is the loop; each phase is a method that returns what the next one needs, or a
//! [`Failure`] that [`Session::fail`] turns into the client's answer and the log line.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend;
use crate::backend::ClientAddrs;
use crate::config::model::{
    Backend as BackendConfig, Balance, Frontend as FrontendConfig, HdrNames, HttpConnMode,
};
use crate::net::deadline::{self, Deadline};
use crate::net::forward::{self, SideTimeouts};
use crate::net::lazy::LazyStream;
use crate::proto::h1::{BodyKind, RequestHead};
use crate::proto::proxy::V2Owned;
use crate::rules::vars::Vars;
use crate::session::facts::Addrs;
use crate::session::{self as tcp_session, WorkerCtx};
use crate::state::Shared;

use super::answer::{self, client_left, close_client, close_tls, Failure};
use super::buf::Buf;
use super::exchange::Outcome;
use super::policy::Overrides;
use super::request::{self, Next};
use super::scratch::Scratch;
use super::server::{self, Attached};

/// A keep-alive connection idles this long in its session task before it is parked.
///
/// A session task holds the state of a whole transaction (its future is sized for the largest
/// phase, a few KiB); a parked connection holds only its socket and idle deadline. Parking and
/// resuming cost a task each, nothing next to a 100 ms pause, and requests that follow each
/// other closely never park (the steady keep-alive path stays allocation-free).
pub(super) const PARK_AFTER: Duration = Duration::from_millis(100);

/// How a session task starts.
pub enum Start {
    /// A newly accepted connection.
    New,
    /// A parked keep-alive connection whose next request is arriving; it may idle until
    /// `idle_until` (`timeout http-keep-alive`) before its first byte. `since`: when its
    /// previous transaction ended (when it logs).
    Resumed {
        idle_until: Option<Instant>,
        since: Option<Instant>,
        /// The entries its `tcp-request connection|session` rules track.
        stick: Option<Box<crate::stick::track::Trackers>>,
        /// The session's addresses, when they differ from the connection's.
        sess: Option<Box<SessionState>>,
    },
    /// One stream of an HTTP/2 connection, from the gateway ([`super::h2`]): the client is
    /// its end of a socket pair, which carries one request. The connection's own rules ran
    /// already ([`connection`]).
    Stream(Box<StreamStart>),
}

/// How a session ended.
pub enum Ended {
    Closed,
    /// Idle between requests: held without a task until the next one.
    Parked(Parked),
    /// The client opened with the HTTP/2 preface on a listener without `proto` (HAProxy
    /// switches to HTTP/2 there): the connection goes to the HTTP/2 gateway.
    Http2(Box<Upgrade>),
}

/// A connection that opened with the HTTP/2 preface ([`Ended::Http2`]).
pub struct Upgrade {
    pub client: LazyStream,
    /// The bytes read so far (the preface, perhaps more), for the HTTP/2 side to read first.
    pub read: Vec<u8>,
    /// What the connection's rules, which ran already, left.
    pub facts: ConnFacts,
}

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How an HTTP/2 stream's session starts ([`Start::Stream`]).
pub struct StreamStart {
    /// The connection's own addresses (`fc_src`, `fc_dst`); the session's come as `run`'s.
    pub conn: Addrs,
    /// The TLS facts of the client's connection, if it is TLS.
    pub tls: Option<std::rc::Rc<crate::net::tls::Handshake>>,
    /// The connection's tracked entries ([`ConnFacts`]), shared with its other streams.
    pub stick: crate::stick::track::Trackers,
    /// The connection's `sess.` variables as its rules left them.
    pub sess_vars: Vars,
}

/// What a session holds beyond its connection, carried over a park when there is any: its
/// addresses when `tcp-request session` rules or a PROXY header made them differ from the
/// connection's, and its `sess.` variables.
#[derive(Debug, Default)]
pub struct SessionState {
    pub addrs: Addrs,
    pub vars: crate::rules::vars::Vars,
}

/// A keep-alive client connection between requests, to be held without a session task (see
/// `idle`) until its next request, then resumed with [`Start::Resumed`].
pub struct Parked {
    pub client: LazyStream,
    /// Its keep-alive deadline.
    pub idle_until: Option<Instant>,
    /// When its last transaction ended, for the next one's log line.
    pub since: Option<Instant>,
    /// The entries the connection tracks (boxed only when there are some); dropped with the
    /// connection, which releases them.
    pub stick: Option<Box<crate::stick::track::Trackers>>,
    /// The connection's addresses, as its `tcp-request connection` rules left them.
    pub conn: Addrs,
    /// The session's, when its `tcp-request session` rules changed them (boxed: rare).
    pub sess: Option<Box<SessionState>>,
}

/// A session's deadlines, one per side (see [`crate::net::deadline`]).
pub(super) struct Timers<'a> {
    pub client: Deadline<'a>,
    pub server: Deadline<'a>,
}

/// What outlives one transaction of a client connection.
pub(super) struct Session<'s, 'd> {
    pub shared: &'s Shared,
    pub ctx: &'s WorkerCtx,
    pub frontend: usize,
    pub fe: &'s FrontendConfig,
    pub client: LazyStream,
    /// The client's address (`None`: a UNIX socket's client), or the one `set-src` gave.
    pub peer: Option<SocketAddr>,
    /// The accepting listener's id when the client came through a UNIX socket (for logs).
    pub unix_listener: Option<u32>,
    /// The id of the listener that accepted the client (`so_id`).
    pub listener_id: u32,
    /// Bytes read from the client and not yet forwarded.
    pub cbuf: Buf,
    pub scratch: Scratch,
    pub timers: Timers<'d>,
    /// The server connection of the previous transaction, kept for the next one.
    pub attached: Option<Attached<'s>>,
    /// No transaction has run yet (`http-reuse safe`, the first request's timeouts).
    pub first: bool,
    /// The transaction in progress is the connection's first (`http_first_req`).
    pub first_req: bool,
    /// A resumed connection's keep-alive deadline, for its first request.
    pub idle_until: Option<Instant>,
    /// When the previous transaction ended: the next one's clock starts there (when logging).
    pub since: Option<Instant>,
    pub logging: bool,
    /// The client may still be sending when the session ends: see [`close_client`].
    pub linger: bool,
    /// `sess.` variables.
    pub sess_vars: RefCell<Vars>,
    /// A rule edited this transaction's request head (it is in the scratch's edit buffer).
    pub edited: bool,
    /// What this transaction's rules changed (`set-timeout`, `set-log-level`).
    pub overrides: Overrides,
    /// The destination address `set-dst` gave this transaction (`None`: the socket's).
    pub dst: Option<SocketAddr>,
    /// The connection's addresses (a PROXY protocol header's, then `tcp-request connection
    /// set-src|set-dst`): `fc_src`, `fc_dst`.
    pub conn: Addrs,
    /// The session's (after `tcp-request session` rules): each transaction's `src` and `dst`
    /// start from them.
    pub sess: Addrs,
    /// That header (`fc_rcvd_proxy`, `fc_pp_*`).
    pub proxied: Option<std::rc::Rc<crate::proto::proxy::Header>>,
    /// The stick-table entries this connection (`tcp-request connection|session`) and this
    /// transaction (`tcp-request content`, `http-request`) track.
    pub stick: crate::stick::track::Trackers,
    /// Keys `stick on|store-request` rules will store with the server that answers.
    pub stick_stores: Vec<(usize, crate::stick::Key)>,
    /// Cookie persistence facts of this transaction.
    pub persist: super::persist::Txn,
    /// The client's request is `HEAD` (before any rule changed its method).
    pub head_request: bool,
    /// The client opened with the HTTP/2 preface: the session ends, and the connection goes
    /// to the HTTP/2 gateway ([`Ended::Http2`]).
    pub upgrade: bool,
    /// The client speaks HTTP/2 through the gateway ([`super::h2`]): the log line says
    /// `HTTP/2.0`, an absolute target goes to the server in origin form.
    pub h2: bool,
    /// The TLS facts of an HTTP/2 client's connection (`ssl_fc*`; the session's own client
    /// is a socket pair).
    pub outer_tls: Option<std::rc::Rc<crate::net::tls::Handshake>>,
}

/// After a transaction: go on with the next request, or end the session.
pub(super) enum Step {
    Next,
    End,
}

/// Runs an HTTP-mode session for `client`, accepted by frontend `frontend`, until the
/// connection closes (`None`) or idles long enough between requests to be parked.
pub async fn run(
    shared: &Shared,
    ctx: &WorkerCtx,
    frontend: usize,
    client: LazyStream,
    (conn, proxied): (Addrs, Option<std::rc::Rc<crate::proto::proxy::Header>>),
    (listener_id, unix): (u32, bool),
    start: Start,
) -> Ended {
    let fe = &shared.frontends[frontend].config;
    let mut client_sleep = pin!(deadline::sleep());
    let mut server_sleep = pin!(deadline::sleep());
    let timers = Timers {
        client: Deadline::new(client_sleep.as_mut()),
        server: Deadline::new(server_sleep.as_mut()),
    };
    // The connection's addresses (`fc_src`) and the session's, which a PROXY header gave
    // (as in HAProxy 2.6; the connection's stay the socket's).
    let fc = match (&start, proxied.as_ref().and_then(|h| h.addrs)) {
        (Start::New, Some(_)) => Addrs {
            src: client.peer_addr().ok(),
            dst: None,
        },
        (Start::Stream(st), _) => st.conn,
        _ => conn,
    };
    let mut s = Session::new(
        shared,
        ctx,
        frontend,
        client,
        (fc, conn, proxied),
        (listener_id, unix),
        timers,
    );
    let now = s.logging.then(Instant::now);
    match start {
        Start::New => s.since = now,
        Start::Stream(start) => {
            let StreamStart {
                tls,
                stick,
                sess_vars,
                ..
            } = *start;
            // The connection's rules ran in the gateway (`connection`): this stream starts
            // with what they left, and may reuse a server connection another stream left
            // (`http-reuse safe`: not the client connection's first request). Each stream
            // is a first request of its own (`http_first_req`), as in HAProxy.
            s.first = false;
            s.first_req = true;
            s.since = now;
            s.h2 = true;
            s.outer_tls = tls;
            s.stick = stick;
            s.sess_vars = RefCell::new(sess_vars);
        }
        Start::Resumed {
            idle_until,
            since,
            stick,
            sess,
        } => {
            s.first = false;
            s.idle_until = idle_until;
            s.since = since;
            s.stick = stick.map(|b| *b).unwrap_or_default();
            if let Some(st) = sess {
                let SessionState { addrs, vars } = *st;
                s.sess = addrs;
                s.sess_vars = RefCell::new(vars);
            }
        }
    }
    let mut parked = None;
    if s.first {
        if let Err(refused) = s.connection_rules() {
            match refused {
                Refused::Connection => s.client.reset_on_close(),
                // After a handshake the session was embryonic: HAProxy logs its end.
                Refused::Session if s.client.is_tls() || s.proxied.is_some() => {
                    crate::session::log_session_reject(s.shared, s.frontend, s.peer, s.listener_id);
                }
                Refused::Session => {}
            }
            return Ended::Closed;
        }
        // Its connection and session rules passed: a session, as HAProxy counts it.
        shared.frontends[frontend].counters.count_session();
    }
    loop {
        s.scratch.0.txn.start(s.logging, s.since);
        // `txn.`, `req.` and `res.` variables last one transaction (the scratch space, and
        // its store, is reused by the next one and by other sessions).
        s.scratch.0.vars.get_mut().clear();
        // A stream's `set-src` and `set-dst` last one transaction (HAProxy 2.6 sets them on
        // the stream); each starts from the session's.
        s.peer = s.sess.src;
        s.first_req = s.first || s.h2;
        s.edited = false;
        s.overrides = Overrides::default();
        s.dst = s.sess.dst;
        s.persist = Default::default();
        let mut head = match s.read_head().await {
            Ok(head) => head,
            Err(park) => {
                parked = park;
                break;
            }
        };
        let step = s.transaction(&mut head).await;
        // An HTTP/2 stream's session has no next request: its server connection goes back to
        // the pool now, before this task yields and the gateway relays the response's last
        // bytes, so that the client's next stream finds it there (HAProxy's is idle as soon
        // as the response ends).
        if s.h2 {
            if let Some(a) = s.attached.take() {
                let bec = &shared.backends[a.backend].config;
                server::release(ctx, Some(a), bec);
            }
            // Then the gateway learns that the transaction is over: it ends a response
            // without a body (`HEAD`, 204, 304) only now, after the server's body was drained
            // and its connection went back to the pool, as HAProxy ends the stream at the end
            // of the message it received (see `h2::response::relay`).
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut s.client).await;
        }
        if s.stick.any() {
            // The stream ends: its bytes go to every tracked entry, and the entries it
            // tracked (`tcp-request content`, `http-request`) are released.
            let now = crate::base::clock::uptime_ms();
            let txn = &s.scratch.0.txn;
            s.stick
                .add_bytes(&shared.tables, txn.bytes_in, txn.bytes_out, now);
            s.stick.release_stream(now);
        }
        match step {
            Step::Next => s.since = s.logging.then(Instant::now),
            Step::End => break,
        }
    }
    if s.upgrade {
        let read = s.cbuf.bytes().to_vec();
        let facts = ConnFacts {
            conn: s.conn,
            sess: s.sess,
            stick: std::mem::take(&mut s.stick),
            sess_vars: s.sess_vars.take(),
        };
        let Session { client, .. } = s;
        return Ended::Http2(Box::new(Upgrade {
            client,
            read,
            facts,
        }));
    }
    // Parked or closing, the client gives its server connection back to the pool.
    if let Some(a) = s.attached.take() {
        let bec = &shared.backends[a.backend].config;
        server::release(ctx, Some(a), bec);
    }
    let stick = s
        .stick
        .any()
        .then(|| Box::new(std::mem::take(&mut s.stick)));
    let Session {
        client,
        since,
        conn,
        sess,
        sess_vars,
        ..
    } = s;
    let vars = sess_vars.into_inner();
    match parked {
        Some(idle_until) => Ended::Parked(Parked {
            client,
            idle_until,
            since,
            stick,
            conn,
            sess: (sess != conn || !vars.is_empty())
                .then(|| Box::new(SessionState { addrs: sess, vars })),
        }),
        None => {
            if s.linger {
                Box::pin(close_client(client, fe.timeouts.client)).await;
            } else if client.is_tls() {
                // rustls may still hold the end of the last response: close_notify goes after
                // it, within `timeout client`.
                Box::pin(close_tls(client, fe.timeouts.client)).await;
            }
            Ended::Closed
        }
    }
}

/// Whether an HTTP/2 request's target is the absolute URI the gateway made of `:scheme`
/// `http` or `https` and `:authority` (HAProxy's "normalized URI", sent to servers as its
/// path).
fn is_normalized_uri(target: &[u8]) -> bool {
    let lower = |n: usize| target.get(..n).map(<[u8]>::to_ascii_lowercase);
    lower(7).is_some_and(|p| p == b"http://") || lower(8).is_some_and(|p| p == b"https://")
}

/// Which rule list rejected a connection at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `tcp-request connection`: HAProxy closes with a reset.
    Connection,
    /// `tcp-request session`.
    Session,
}

/// What an HTTP/2 connection's `tcp-request connection` and `session` rules left for its
/// streams: the addresses (`set-src`, `set-dst`), the entries they track, the `sess.`
/// variables.
pub struct ConnFacts {
    /// The connection's addresses (`fc_src`, `fc_dst`) and the session's.
    pub conn: Addrs,
    pub sess: Addrs,
    pub stick: crate::stick::track::Trackers,
    pub sess_vars: Vars,
}

/// Runs the frontend's `tcp-request connection` and `session` rules for an HTTP/2 client
/// connection, once, as HAProxy runs them at accept (an HTTP/1 session runs them itself, in
/// [`run`]). `Err(Some(_))`: a rule rejected the connection (counted); `Err(None)`: the rules
/// could not run.
pub fn connection(
    shared: &Shared,
    ctx: &WorkerCtx,
    frontend: usize,
    (fc, sess, proxied): (
        Addrs,
        Addrs,
        Option<std::rc::Rc<crate::proto::proxy::Header>>,
    ),
    listener: (u32, bool),
    tls: Option<std::rc::Rc<crate::net::tls::Handshake>>,
) -> Result<ConnFacts, Option<Refused>> {
    let rules = &shared.frontends[frontend].config.rules;
    if rules.tcp_request_connection.is_empty() && rules.tcp_request_session.is_empty() {
        shared.frontends[frontend].counters.count_session();
        return Ok(ConnFacts {
            conn: fc,
            sess,
            stick: Default::default(),
            sess_vars: Vars::default(),
        });
    }
    // The rules read no byte of the client: a socket pair whose other end is closed stands
    // for it (the session needs a client stream).
    let (ours, _) = std::os::unix::net::UnixStream::pair().map_err(|_| None)?;
    ours.set_nonblocking(true).map_err(|_| None)?;
    let client = LazyStream::new(crate::net::stream::StdStream::Unix(ours));
    let mut client_sleep = pin!(deadline::sleep());
    let mut server_sleep = pin!(deadline::sleep());
    let timers = Timers {
        client: Deadline::new(client_sleep.as_mut()),
        server: Deadline::new(server_sleep.as_mut()),
    };
    let addrs = (fc, sess, proxied);
    let mut s = Session::new(shared, ctx, frontend, client, addrs, listener, timers);
    s.outer_tls = tls;
    s.connection_rules().map_err(Some)?;
    shared.frontends[frontend].counters.count_session();
    Ok(ConnFacts {
        conn: s.conn,
        sess: s.sess,
        stick: std::mem::take(&mut s.stick),
        sess_vars: s.sess_vars.take(),
    })
}

impl<'s, 'd> Session<'s, 'd> {
    /// A session for `client` before its first transaction (what [`Start`] changes is set by
    /// the caller).
    fn new(
        shared: &'s Shared,
        ctx: &'s WorkerCtx,
        frontend: usize,
        client: LazyStream,
        (conn, sess, proxied): (
            Addrs,
            Addrs,
            Option<std::rc::Rc<crate::proto::proxy::Header>>,
        ),
        (listener_id, unix): (u32, bool),
        timers: Timers<'d>,
    ) -> Self {
        Session {
            shared,
            ctx,
            frontend,
            fe: &shared.frontends[frontend].config,
            client,
            peer: sess.src,
            unix_listener: unix.then_some(listener_id),
            listener_id,
            cbuf: Buf::new(shared.global.tune_bufsize),
            scratch: Scratch::take(),
            timers,
            attached: None,
            first: true,
            first_req: true,
            idle_until: None,
            since: None,
            logging: shared.frontends[frontend].log.enabled(),
            linger: false,
            sess_vars: RefCell::default(),
            edited: false,
            overrides: Overrides::default(),
            dst: sess.dst,
            conn,
            sess,
            proxied,
            stick: Default::default(),
            stick_stores: Vec::new(),
            persist: Default::default(),
            head_request: false,
            upgrade: false,
            h2: false,
            outer_tls: None,
        }
    }
}

impl<'s> Session<'s, '_> {
    /// Whether a first request that did not parse is the HTTP/2 preface, on a listener that
    /// does not force a version (`proto`): HAProxy then speaks HTTP/2 on the connection.
    fn opens_http2(&self) -> bool {
        let b = self.cbuf.bytes();
        let bind = usize::try_from(self.listener_id)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.fe.binds.get(i));
        self.first
            && !self.h2
            && bind.is_some_and(|b| b.proto.is_none())
            // `PRI * HTTP/2` is where the HTTP/1 parser gives up, and says enough.
            && b.len() >= 12
            && H2_PREFACE.starts_with(&b[..b.len().min(H2_PREFACE.len())])
    }

    /// Logs the transaction in progress, unless a rule said `set-log-level silent`.
    pub(super) fn emit_unless_silent(&self) {
        // (`log_line` checks `silent`; the transaction's end is counted either way.)
        self.emit();
    }

    /// Logs the transaction in progress (when the frontend logs), unless a rule said
    /// `set-log-level silent`.
    pub(super) fn emit(&self) {
        self.emit_with(None);
    }

    /// As [`Session::emit`], for a transaction whose server connection is `server` (its TLS
    /// facts are what `ssl_bc*` read in the log format). The transaction is over: its status
    /// is counted first, logged or not.
    fn emit_with(&self, server: Option<&Attached<'_>>) {
        self.count_end();
        self.log_line(server);
    }

    /// Counts the end of the transaction where HAProxy counts the end of a stream: its bytes,
    /// its final status (if it has one) in the frontend's `hrsp_*`, and when a backend was
    /// chosen, in the backend's `hrsp_*` and `req_tot`. Once per transaction.
    fn count_end(&self) {
        let txn = &self.scratch.0.txn;
        if txn.ended.replace(true) {
            return;
        }
        let shared = self.shared;
        // Its bytes (`bin`, `bout`) in the frontend's, the backend's and the server's counts,
        // as HAProxy's `stream_process_counters` adds them.
        let (bytes_in, bytes_out) = (txn.bytes_in, txn.bytes_out);
        shared.count_bytes(self.frontend, txn.backend, txn.server, bytes_in, bytes_out);
        // Its times, in the backend's and the server's averages (`qtime`... `ttime_max`).
        if let (Some(tl), Some(be)) = (&txn.tl, txn.backend.map(|b| &shared.backends[b])) {
            let http = be.config.mode == crate::config::model::Mode::Http;
            if let Some(times) = tl.stat_times(Instant::now(), http) {
                be.streams.add_times(times);
                if let Some(srv) = txn.server.and_then(|s| be.servers.get(s)) {
                    srv.streams.add_times(times);
                }
            }
        }
        if txn.term != *b"--" {
            if let Some(be) = txn.backend.map(|b| &shared.backends[b]) {
                for kind in crate::session::aborts_of(txn.term, txn.status) {
                    be.count_abort(txn.server, *kind);
                }
            }
        }
        let Some(status) = txn.status else { return };
        shared.frontends[self.frontend]
            .counters
            .http
            .count_rsp(status);
        if let Some(be) = txn.backend.map(|b| &shared.backends[b]) {
            if be.config.mode == crate::config::model::Mode::Http {
                be.http.count_rsp(status);
                be.http.count_req();
            }
        }
    }

    /// Writes the transaction's log line now (`option logasap` before its end, else
    /// [`Session::emit_with`]).
    pub(super) fn log_line(&self, server: Option<&Attached<'_>>) {
        if self.overrides.silent || self.scratch.0.txn.logged {
            return;
        }
        let st = super::txnlog::Stream {
            fc: self.conn,
            first_req: self.first_req,
            peer: self.peer,
            unix_listener: self.unix_listener,
            listener_id: self.listener_id,
            proxied: self.proxied.as_deref(),
            stick: Some(&self.stick),
            client: &self.client,
            local: self.dst,
            txn_vars: &self.scratch.0.vars,
            sess_vars: &self.sess_vars,
            server_tls: server.and_then(|c| c.stream.tls()).map(|t| t.facts()),
            client_tls: self.outer_tls.as_deref(),
        };
        self.scratch.0.txn.emit(self.shared, self.frontend, &st);
    }

    /// Counts the request head in `bytes_in` if nothing went to a server (HAProxy counts it
    /// also when a rule or an error answers): for `bin`, the log's `%U` and tracked entries.
    pub(super) fn count_request_bytes(&mut self, head: &RequestHead) {
        if self.scratch.0.txn.bytes_in == 0 {
            let p = &self.scratch.0;
            let buf = super::exchange::head_buf(self.edited, &p.edited, &self.cbuf);
            let line = &buf[head.start_line.clone()];
            let n = super::txnlog::counted_head(buf, line, &p.headers);
            self.scratch.0.txn.bytes_in = n;
        }
    }

    /// Answers a failed transaction (or closes), logs it and ends the session. `be`: the
    /// backend chosen so far, whose `errorfile` wins over the frontend's.
    pub(super) async fn fail(&mut self, failure: Failure, be: Option<&BackendConfig>) -> Step {
        let (status, term) = match failure {
            Failure::Respond(status, term) => (status, term),
            // A retryable failure with no retry left: the server closed without answering.
            Failure::Retry => (502, *b"SH"),
            Failure::Close(term) => {
                self.scratch.0.txn.term = term;
                self.emit();
                return Step::End;
            }
        };
        if matches!(status, 502 | 504) && matches!(term[0], b'S' | b's') && self.stick.any() {
            // The server failed to answer (closed, timed out, sent garbage): HAProxy counts
            // an HTTP failure on the tracked entries.
            let now = crate::base::clock::uptime_ms();
            self.stick.count(
                &self.shared.tables,
                crate::stick::track::Event::HttpFail,
                now,
            );
        }
        self.generated_page(status, be, None, false);
        // HAProxy runs `http-after-response` on the errors it sends once a stream exists.
        let status = self.after_response_generated(self.scratch.0.txn.backend, status);
        let n = answer::send_counted(&mut self.client, &self.scratch.0.out).await;
        self.scratch.0.txn.answered(status, n, term);
        self.emit();
        self.linger = true;
        Step::End
    }

    /// A failure before anything went to a server (no backend, no server, no connection). As
    /// HAProxy does, a keep-alive client (HTTP/1.1, or HTTP/1.0 with `connection: keep-alive`,
    /// told so in the answer) whose request has no body gets the error and keeps its
    /// connection; any other failure is [`Session::fail`]'s.
    async fn fail_early(
        &mut self,
        failure: Failure,
        be: Option<&BackendConfig>,
        head: &RequestHead,
    ) -> Step {
        self.count_request_bytes(head);
        let close = |m: HttpConnMode| m == HttpConnMode::Close;
        let keep = head.body == BodyKind::None
            && head.conn.keep_alive
            && !close(self.fe.options.http_conn_mode)
            && !be.is_some_and(|b| close(b.options.http_conn_mode));
        let Failure::Respond(status, term) = failure else {
            return self.fail(failure, be).await;
        };
        if !keep {
            return self.fail(failure, be).await;
        }
        self.generated_page(status, be, Some(head), true);
        if self.scratch.0.out.is_empty() {
            // An empty errorfile: close without a response, as HAProxy does.
            return self.fail(failure, be).await;
        }
        let status = self.after_response_generated(self.scratch.0.txn.backend, status);
        answer::mark_connection(&mut self.scratch.0.out, false, head.minor == 0);
        let n = answer::send_counted(&mut self.client, &self.scratch.0.out).await;
        self.scratch.0.txn.answered(status, n, term);
        self.emit();
        self.cbuf.consume(head.len);
        self.first = false;
        self.idle_until = None;
        Step::Next
    }

    /// Phase: the request head. `Err` ends the session: `Some` to park the connection until
    /// the given keep-alive deadline, `None` to close it (after answering and logging a bad or
    /// late request).
    async fn read_head(&mut self) -> Result<RequestHead, Option<Option<Instant>>> {
        let mut started = None;
        let parts = &mut self.scratch.0;
        let next = request::read_request(
            &mut self.client,
            &mut self.cbuf,
            &mut parts.headers,
            self.fe,
            self.first,
            self.idle_until,
            &mut self.timers.client,
            &mut started,
            self.h2,
        );
        let failure = match next.await {
            Ok(Next::Head(head)) => {
                let (bytes, txn) = (self.cbuf.bytes(), &mut parts.txn);
                let (shared, fe) = (self.shared, self.frontend);
                // One more request read (`req_tot`, `req_rate`), as HAProxy counts it once
                // parsed; the clock read once for the rates this transaction counts in.
                txn.clock_ms = crate::base::clock::uptime_ms();
                shared.frontends[fe].counters.count_request_at(txn.clock_ms);
                txn.request_head(shared, fe, started, bytes, &head, &parts.headers);
                let mut head = head;
                self.head_request = head.is_head(bytes);
                if self.h2 {
                    head.h2 = true;
                    txn.http2_request(&bytes[head.target.clone()]);
                    head.fixes.origin_form = is_normalized_uri(&bytes[head.target.clone()]);
                }
                return Ok(head);
            }
            Ok(Next::Idle { idle_until }) => return Err(Some(idle_until)),
            Ok(Next::Closed) => {
                // A connection that never sent a byte is logged as a bad request, as HAProxy
                // does (unless `option dontlognull`).
                if self.first {
                    parts.txn.term = *b"CR";
                    parts.txn.status = Some(400);
                    self.emit();
                    self.count_bad_request();
                }
                return Err(None);
            }
            Err(failure) => failure,
        };
        if self.opens_http2() {
            self.upgrade = true;
            return Err(None);
        }
        match failure {
            Failure::Respond(status, term) => {
                // Answered before any stream exists: HAProxy counts no bytes for it, and its
                // multiplexer sends the page raw (an `http-error` page with log-format strings
                // is rendered all the same).
                if answer::format_page(status, self.fe, None).is_some() {
                    self.generated_page(status, None, None, false);
                } else {
                    answer::raw_error_response(status, &mut self.scratch.0.out, self.fe);
                }
                let parts = &mut self.scratch.0;
                answer::send_counted(&mut self.client, &parts.out).await;
                let txn = &mut parts.txn;
                txn.mark(|tl, _| tl.request = tl.request.or(Some(tl.accept)));
                txn.status = Some(status);
                txn.term = term;
                self.linger = true;
            }
            Failure::Close(term) => {
                let txn = &mut self.scratch.0.txn;
                txn.status = Some(400);
                txn.term = term;
            }
            Failure::Retry => return Err(None),
        }
        let txn = &mut self.scratch.0.txn;
        // A head that never parsed never entered HAProxy's channel: `%U` and `bin` stay 0.
        txn.bytes_in = 0;
        let partial = !self.cbuf.bytes().is_empty();
        // A keep-alive connection closing between requests is no request: HAProxy has no
        // stream to count then (nor a status in `hrsp_*`).
        let request = self.first || partial;
        txn.ended.set(!request);
        self.emit();
        if request {
            self.count_bad_request();
        }
        Err(None)
    }

    /// A request that failed before its head was whole (closed, timed out, invalid) counts
    /// as a request and a failed one on the frontend (`req_tot`, `ereq`), and as a request and
    /// an HTTP error on the tracked entries, as HAProxy counts it.
    fn count_bad_request(&self) {
        self.shared.frontends[self.frontend]
            .counters
            .count_bad_request();
        if self.stick.any() {
            let now = crate::base::clock::uptime_ms();
            let tables = &self.shared.tables;
            self.stick
                .count(tables, crate::stick::track::Event::HttpReq, now);
            self.stick
                .count(tables, crate::stick::track::Event::HttpErr, now);
        }
    }

    /// Phases after the request head: backend, server, connection, the exchange (with its
    /// retries), then what stays open.
    async fn transaction(&mut self, head: &mut RequestHead) -> Step {
        let shared = self.shared;
        let fe_rules = &self.fe.rules;
        let fe_phase = fe_rules.has_request_rules()
            || self.fe.options.http_buffer_request
            || self.fe.monitor_uri.is_some()
            || self.fe.options.restrict_hdr_names != HdrNames::Preserve;
        if fe_phase {
            if let Some(step) = self.request_rules(fe_rules, head, None).await {
                return step;
            }
        } else {
            self.stick
                .count_request(&shared.tables, crate::base::clock::uptime_ms());
        }
        let Some(be_idx) = self.choose_backend(head) else {
            return self
                .fail_early(Failure::Respond(503, *b"SC"), None, head)
                .await;
        };
        let be = &shared.backends[be_idx];
        be.count_session_at(self.scratch.0.txn.clock_ms);
        let bec = &be.config;
        self.scratch.0.txn.backend = Some(be_idx);
        // A backend's own rules (a `listen` shares its frontend's: they ran already).
        let own_rules = !std::sync::Arc::ptr_eq(&bec.rules, fe_rules);
        let be_phase = bec.rules.has_request_rules()
            || bec.options.http_buffer_request
            || bec.options.restrict_hdr_names != HdrNames::Preserve;
        if own_rules && be_phase {
            if let Some(step) = self.request_rules(&bec.rules, head, Some(be_idx)).await {
                return step;
            }
        }
        self.stick_stores.clear();
        // Cookie persistence only where configured: the common path pays one test.
        let cookies = bec.cookie.is_some()
            || !bec.rules.persist.is_empty()
            || self.fe.options.capture_cookie.is_some();
        if cookies {
            self.persist_rules(be_idx, head);
        }
        let forced = self.use_server(be_idx, head);
        let assigned = if cookies {
            self.request_cookies(be_idx, head, forced)
        } else {
            self.persist.direct = forced.is_some();
            forced
        };
        self.unique_id_now(be_idx, head);
        // `stick match|on` after the cookie, as HAProxy's sticking rules come after
        // persistence: a server the cookie chose stays.
        let stuck = self.stick_request(be_idx, head, assigned);
        if assigned.is_none() && stuck.is_some() {
            self.persist.direct = true;
        }
        let server = match stuck {
            Some(server) => {
                // The server is assigned without waiting: no queue time, but not "-1".
                self.scratch.0.txn.mark(|tl, now| tl.queued = Some(now));
                server
            }
            None => match self.choose_server(be_idx, head).await {
                Ok(server) => server,
                Err(f) => return self.fail_early(f, Some(bec), head).await,
            },
        };
        // The scratch's SNI buffer, taken for the transaction (a move, no allocation) so
        // that the session can be borrowed while it is read; given back below.
        let mut sni = std::mem::take(&mut self.scratch.0.sni);
        self.sni_values(be_idx, head, &mut sni);
        let mut conn = match self.connect(be_idx, server, &sni).await {
            Ok(conn) => conn,
            Err(f) => {
                self.scratch.0.sni = sni;
                return self.fail_early(f, Some(bec), head).await;
            }
        };
        self.first = false;
        self.idle_until = None;

        // A retry goes out on a new connection after a new server pick (which moves
        // round-robin on).
        let mut attempt = 0;
        let result = loop {
            let r = self
                .exchange(head, &mut conn, bec, attempt < bec.retries)
                .await;
            if !matches!(r, Err(Failure::Retry)) || attempt >= bec.retries {
                break r;
            }
            attempt += 1;
            self.scratch.0.txn.retries = attempt;
            // A server the cookie (or `use-server`) chose is tried again, as HAProxy keeps
            // its target; a balanced one is picked anew.
            let picked = if self.persist.direct && !conn.redispatched {
                Ok(conn.slot.server())
            } else {
                let key = self.balance_key(be_idx, head);
                backend::pick(be, &self.ctx.pickers[be_idx], key).await
            };
            let fresh = match picked {
                Ok(server) => {
                    let reuse = server::Reuse::None;
                    self.new_conn(be_idx, server, reuse, &sni).await.ok()
                }
                Err(_) => None,
            };
            match fresh {
                Some(c) => {
                    conn = c;
                    be.count_connection(conn.slot.server(), false);
                    self.scratch.0.txn.server = Some(conn.slot.server());
                }
                None => break Err(Failure::Respond(503, *b"SC")),
            }
        };
        self.scratch.0.sni = sni;
        let txn = &mut self.scratch.0.txn;
        let log = &shared.frontends[self.frontend].log;
        if txn.on && log.uses(crate::log::format::uses::SERVER_LOCAL) {
            txn.server_local = conn.stream.local_addr().ok();
        }
        match result {
            Ok(outcome) => self.settle(outcome, conn, bec).await,
            Err(f) => {
                drop(conn);
                self.fail(f, Some(bec)).await
            }
        }
    }

    /// Phase: the backend: the first `use_backend` whose condition holds, else
    /// `default_backend`.
    fn choose_backend(&mut self, head: &RequestHead) -> Option<usize> {
        let rules = &self.fe.rules.use_backends;
        if rules.is_empty() {
            return self.fe.default_backend;
        }
        self.use_backend(head).or(self.fe.default_backend)
    }

    /// Phase: the server, picked by the backend's balancer (waiting in its queue when every
    /// server is full). A client that leaves while its request waits in the queue cancels it
    /// (`CQ`) as HAProxy 2.6 notices it: only when the frontend has `option abortonclose`
    /// (through `defaults` or a `listen` section: a `frontend` section ignores it), which has
    /// its connection read; then a reset cancels the request (counted in `cli_abrt`), and a
    /// close does when the backend has the option too. Otherwise the request waits for a
    /// server or `timeout queue`, a reset only counted ([`counting_resets`]).
    async fn choose_server(&mut self, be_idx: usize, head: &RequestHead) -> Result<usize, Failure> {
        let be = &self.shared.backends[be_idx];
        let key = self.balance_key(be_idx, head);
        let picker = &self.ctx.pickers[be_idx];
        let waiting = backend::Waiting::default();
        let watch = backend::Watch {
            client: None,
            waiting: Some(&waiting),
            ..Default::default()
        };
        let pick = backend::pick_queued(be, picker, key, watch);
        let picked = if self.fe.options.abortonclose {
            let be_abort = be.config.options.abortonclose;
            tokio::pin!(pick);
            tokio::select! {
                // Polled in order: the client's leaving counts only while it waits.
                biased;
                r = &mut pick => Some(r),
                gone = client_left(&mut self.client) => match gone {
                    Some(true) => {
                        let server = waiting.spot(be).and_then(|s| s.server);
                        be.count_abort(server, backend::server::Abort::Client);
                        None
                    }
                    Some(false) if be_abort => None,
                    _ => Some(pick.await),
                },
            }
        } else {
            Some(counting_resets(pick, &mut self.client, be, &waiting).await)
        };
        match picked {
            None => {
                // HAProxy counts the time spent in the queue until the client left (`Tw`),
                // and logs its position there.
                let spot = waiting.spot(be).unwrap_or_default();
                self.queue_left(spot);
                Err(Failure::Close(*b"CQ"))
            }
            Some(Ok((server, pos))) => {
                let txn = &mut self.scratch.0.txn;
                txn.mark(|tl, now| tl.queued = Some(now));
                txn.be_queue = pos;
                Ok(server)
            }
            Some(Err(e)) => {
                if let backend::ConnectError::QueueTimeout(spot) = &e {
                    self.queue_left(*spot);
                }
                Err(Failure::Respond(503, tcp_session::connect_term(&e)))
            }
        }
    }

    /// A request that left a queue without a server (`timeout queue`): `Tw` ends now, and
    /// the log shows the queue's server and the request's position in it, as HAProxy's.
    fn queue_left(&mut self, spot: backend::QueueSpot) {
        let txn = &mut self.scratch.0.txn;
        txn.mark(|tl, now| tl.queued = Some(now));
        let (sq, bq) = spot.queues();
        txn.srv_queue = sq;
        txn.be_queue += bq;
        if spot.server.is_some() {
            txn.server = spot.server;
        }
    }

    /// Computes the transaction's unique id where HAProxy does (after the request rules,
    /// before the server is chosen), unless a rule read it already.
    fn unique_id_now(&self, be_idx: usize, head: &RequestHead) {
        if self.shared.frontends[self.frontend]
            .log
            .unique_id()
            .is_none()
        {
            return;
        }
        let parts = &self.scratch.0;
        let buf = super::exchange::head_buf(self.edited, &parts.edited, &self.cbuf);
        let req = crate::session::facts::ReqView {
            buf,
            head,
            headers: &parts.headers,
            received: self.cbuf.bytes().len(),
            body: None,
        };
        let st = super::txnlog::Stream {
            fc: self.conn,
            first_req: self.first_req,
            peer: self.peer,
            unix_listener: self.unix_listener,
            listener_id: self.listener_id,
            proxied: self.proxied.as_deref(),
            stick: Some(&self.stick),
            client: &self.client,
            local: self.dst,
            txn_vars: &parts.vars,
            sess_vars: &self.sess_vars,
            server_tls: None,
            client_tls: self.outer_tls.as_deref(),
        };
        let txn = &parts.txn;
        txn.unique_id_now(self.shared, self.frontend, &st, req, be_idx);
    }

    /// The hash key of a hash-based balancer (`balance uri`, `hdr`, `source`...) for `head`.
    fn balance_key(&mut self, be_idx: usize, head: &RequestHead) -> Option<u32> {
        let shared = self.shared;
        let be = &shared.backends[be_idx];
        match &be.config.balance {
            Balance::Hash { .. } => return self.balance_hash(be_idx, head),
            // An HTTP request carries no RDP cookie: round-robin, as in HAProxy.
            Balance::RdpCookie { .. } => return None,
            _ => {}
        }
        let parts = &mut self.scratch.0;
        let bytes = super::exchange::head_buf(self.edited, &parts.edited, &self.cbuf);
        let target = head.target(bytes, &mut parts.target);
        let headers = &parts.headers;
        let header = |name: &str| {
            headers
                .iter()
                .find(|h| h.is(bytes, name))
                .map(|h| h.value(bytes))
        };
        backend::balance_key(&be.config, self.peer.map(|p| p.ip()), Some(target), header)
    }

    /// Phase: a connection to the chosen server: the session's own if it goes there, else an
    /// idle one (as `http-reuse` allows), else a new one (retries, redispatch).
    async fn connect(
        &mut self,
        be_idx: usize,
        server: usize,
        sni: backend::SniValues<'_>,
    ) -> Result<Attached<'s>, Failure> {
        let shared = self.shared;
        // A connection made for another SNI is not used for this request (HAProxy keys
        // server connections by their SNI), nor one whose PROXY header said other things.
        let want = backend::sni_of(&shared.backends[be_idx].servers[server], sni);
        let proxy_key = if shared.backends[be_idx].send_proxy() {
            let v2 = self.v2_values(be_idx);
            let addrs = self.client_addrs(be_idx, &v2);
            backend::proxy_key(&shared.backends[be_idx].servers[server].config, &addrs)
        } else {
            0
        };
        if self.attached.as_ref().is_some_and(|a| {
            a.backend != be_idx
                || a.slot.server() != server
                || a.proxy_key != proxy_key
                || a.stream.tls().and_then(|t| t.facts().sni.as_deref()) != want
        }) {
            if let Some(old) = self.attached.take() {
                let old_bec = &shared.backends[old.backend].config;
                server::release(self.ctx, Some(old), old_bec);
            }
        }
        let bec = &shared.backends[be_idx].config;
        let conn = match self.attached.take() {
            Some(a) => {
                // A stream sent to the server, as HAProxy counts one on a reused connection.
                a.slot.state().count_session_at(self.scratch.0.txn.clock_ms);
                a
            }
            None => {
                let reuse = server::may_reuse(bec, self.first);
                let (ctx, bufsize) = (self.ctx, self.cbuf.cap);
                let v2 = self.v2_values(be_idx);
                let addrs = self.client_addrs(be_idx, &v2);
                let assigned = backend::Assigned {
                    direct: self.persist.direct,
                    force: self.persist.force,
                };
                let waiting = backend::Waiting::default();
                let conn = server::server_conn(
                    shared,
                    ctx,
                    be_idx,
                    server,
                    reuse,
                    addrs,
                    bufsize,
                    assigned,
                    sni,
                    Some(&waiting),
                );
                let (fe_abort, be_abort) = (self.fe.options.abortonclose, bec.options.abortonclose);
                let conn = if fe_abort || be_abort {
                    // `option abortonclose`: a client that goes away while its connection is
                    // being set up (retries included) cancels it (HAProxy logs `CC`, no status);
                    // while it waits in the server's queue, as in `choose_server` (`CQ`).
                    let be = &shared.backends[be_idx];
                    tokio::pin!(conn);
                    tokio::select! {
                        // Polled in order: the client's leaving counts only while it waits.
                        biased;
                        r = &mut conn => r,
                        gone = client_left(&mut self.client) => {
                            match (gone, waiting.spot(be)) {
                                (None, _) => conn.await,
                                (Some(reset), Some(spot)) => {
                                    if reset {
                                        be.count_abort(spot.server, backend::server::Abort::Client);
                                    }
                                    if fe_abort && (reset || be_abort) {
                                        self.queue_left(spot);
                                        return Err(Failure::Close(*b"CQ"));
                                    }
                                    conn.await
                                }
                                (Some(_), None) => {
                                    self.scratch.0.txn.server = Some(server);
                                    return Err(Failure::Close(*b"CC"));
                                }
                            }
                        }
                    }
                } else {
                    let be = &shared.backends[be_idx];
                    counting_resets(conn, &mut self.client, be, &waiting).await
                };
                match conn {
                    Ok(c) => c,
                    Err(e) => {
                        if let backend::ConnectError::QueueTimeout(spot) = &e {
                            self.queue_left(*spot);
                        }
                        let txn = &mut self.scratch.0.txn;
                        if let backend::ConnectError::Failed {
                            attempts,
                            redispatched,
                            ..
                        } = &e
                        {
                            txn.server = Some(server);
                            txn.retries = attempts.saturating_sub(1);
                            txn.redispatched = *redispatched;
                        }
                        return Err(Failure::Respond(503, tcp_session::connect_term(&e)));
                    }
                }
            }
        };
        shared.backends[be_idx].count_connection(conn.slot.server(), conn.reused);
        let txn = &mut self.scratch.0.txn;
        txn.mark(|tl, now| tl.connected = Some(now));
        txn.server = Some(conn.slot.server());
        txn.retries = conn.retries;
        txn.redispatched = conn.redispatched;
        txn.srv_queue = conn.srv_queue;
        txn.be_queue += conn.be_queue;
        Ok(conn)
    }

    /// What the TLVs of a `send-proxy-v2` header say of this client and transaction (the
    /// ALPN and SNI of its TLS handshake, or the `AUTHORITY` a PROXY header brought, and the
    /// unique id), copied only for a backend that sends PROXY headers.
    fn v2_values(&self, be_idx: usize) -> V2Owned {
        if !self.shared.backends[be_idx].send_proxy() {
            return V2Owned::default();
        }
        let tls = self.client.as_tls().map(|t| t.facts());
        let proxied = self.proxied.as_ref().and_then(|h| h.authority.clone());
        V2Owned {
            alpn: tls.and_then(|f| f.alpn.clone()),
            authority: proxied.or_else(|| {
                tls.and_then(|f| f.sni.as_ref())
                    .map(|s| s.as_bytes().into())
            }),
            unique_id: self.scratch.0.txn.uid.get().map(|u| u.as_slice().into()),
        }
    }

    /// This transaction's client, as the connect path of backend `be_idx` needs it (`v2`: see
    /// [`Session::v2_values`]).
    fn client_addrs<'v>(&self, be_idx: usize, v2: &'v V2Owned) -> ClientAddrs<'v> {
        let dst = self.dst;
        let local = || dst.map_or_else(|| self.client.local_addr(), Ok);
        ClientAddrs::of(local, self.peer, &self.shared.backends[be_idx]).with_v2(v2.values())
    }

    /// A server connection from the pool (when `reuse`) or a new one.
    async fn new_conn(
        &self,
        be_idx: usize,
        server: usize,
        reuse: server::Reuse,
        sni: backend::SniValues<'_>,
    ) -> Result<Attached<'s>, backend::ConnectError> {
        let (shared, ctx, bufsize) = (self.shared, self.ctx, self.cbuf.cap);
        let v2 = self.v2_values(be_idx);
        let addrs = self.client_addrs(be_idx, &v2);
        let assigned = backend::Assigned {
            direct: self.persist.direct,
            force: self.persist.force,
        };
        server::server_conn(
            shared, ctx, be_idx, server, reuse, addrs, bufsize, assigned, sni, None,
        )
        .await
    }

    /// Phase: after the response, what stays open: both sides (the server connection is kept
    /// for the next request), the client only, neither; or the connection becomes a tunnel.
    /// Logs the transaction.
    async fn settle(
        &mut self,
        outcome: Outcome,
        mut conn: Attached<'s>,
        bec: &BackendConfig,
    ) -> Step {
        match outcome {
            Outcome::KeepBoth => {
                // A second request carried to the end proves it reusable.
                conn.proven |= conn.reused;
                conn.reused = true;
                conn.retries = 0;
                conn.redispatched = false;
                (conn.srv_queue, conn.be_queue) = (0, 0);
                conn.sbuf.release_if_empty();
                self.scratch.0.txn.holds_server = true;
                self.emit_with(Some(&conn));
                // Between transactions the connection is an idle one, as in HAProxy: it counts
                // in the server's `pool-max-conn`, and is closed when others fill it already.
                let max = self.ctx.shared.backends[conn.backend].servers[conn.slot.server()]
                    .config
                    .pool_max_conn;
                if self.ctx.idle_room((conn.backend, conn.slot.server()), max) {
                    self.attached = Some(conn);
                }
                Step::Next
            }
            Outcome::KeepClient => {
                // Logged while the connection is held (its TLS facts are read), so its count
                // in the server's connections is taken out (`%sc`).
                self.scratch.0.txn.holds_server = true;
                self.emit_with(Some(&conn));
                drop(conn);
                Step::Next
            }
            Outcome::Upgraded => {
                self.tunnel(conn, bec).await;
                Step::End
            }
            Outcome::CloseClient {
                keep_server,
                request_read,
            } => {
                self.scratch.0.txn.holds_server = true;
                self.emit_with(Some(&conn));
                if keep_server {
                    server::release(self.ctx, Some(conn), bec);
                }
                self.linger = !request_read;
                Step::End
            }
        }
    }

    /// After a `101` to an upgrade (or a 2xx to CONNECT): bytes both ways until both ends
    /// close, under `timeout tunnel`; then the transaction is logged.
    async fn tunnel(&mut self, conn: Attached<'s>, bec: &BackendConfig) {
        let fe = self.fe;
        let t = SideTimeouts::client(fe, bec);
        let st = SideTimeouts::server(bec);
        let splice = forward::Splice::of(&fe.options, &bec.options);
        let bufsize = self.cbuf.cap;
        let Ok(client) = self.client.registered() else {
            return;
        };
        // Boxed: a tunnel is rare, and inline its state would enlarge every session task (each
        // spawn copies the whole future).
        let tunnel = forward::forward_counted(client, &conn.stream, t, st, bufsize, splice);
        let (moved, r) = Box::pin(tunnel).await;
        let txn = &mut self.scratch.0.txn;
        txn.bytes_out += moved.to_client;
        txn.bytes_in += moved.to_server;
        txn.term = match r {
            Ok(_) => *b"--",
            Err(forward::ForwardError::Timeout(forward::Side::Client)) => *b"cD",
            Err(forward::ForwardError::Timeout(forward::Side::Server)) => *b"sD",
            Err(forward::ForwardError::Io(forward::Side::Client, _)) => *b"CD",
            Err(forward::ForwardError::Io(forward::Side::Server, _)) => *b"SD",
        };
        txn.holds_server = true;
        self.emit_with(Some(&conn));
    }
}

/// Awaits `wait` (a pick or a connect that may wait in a queue, as `waiting` tells). A client
/// that resets its connection while the request waits in a queue is counted in `cli_abrt`
/// (the backend's, and the server's when it is that server's queue), as HAProxy 2.6 counts
/// it, though the request keeps its place (only `abortonclose` ends the wait). The client is
/// watched only once the request waits: a request that gets its server at once costs one
/// more poll.
async fn counting_resets<T>(
    wait: impl std::future::Future<Output = T>,
    client: &mut LazyStream,
    be: &backend::Backend,
    waiting: &backend::Waiting,
) -> T {
    use std::task::Poll;
    let mut wait = pin!(wait);
    let first = std::future::poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx))).await;
    if let Poll::Ready(r) = first {
        return r;
    }
    let (Some(spot), Ok(stream)) = (waiting.spot(be), client.registered()) else {
        return wait.await;
    };
    tokio::select! {
        biased;
        r = &mut wait => r,
        _ = stream.error_ready() => {
            be.count_abort(spot.server, backend::server::Abort::Client);
            wait.await
        }
    }
}
