//! What an HTTP transaction records for its log line, and writing that line.
//!
//! A [`TxnLog`] lives in the session's scratch space (reused from transaction to transaction
//! and, through the worker's pool, from session to session), so recording costs no allocation
//! once its buffers have grown. Each phase of the transaction notes its instant and outcome;
//! [`TxnLog::emit`] renders the frontend's format when the transaction is over.

use std::cell::{Cell, OnceCell, RefCell};
use std::net::SocketAddr;

use tokio::time::Instant;

use crate::log::format::uses;
use crate::log::record::{Captured, Counters, Record, Timeline, UnixEnds};
use crate::net::lazy::LazyStream;
use crate::proto::h1::{HeaderIdx, RequestHead};
use crate::rules::vars::{Scopes, Vars};
use crate::session::facts::{Facts, Kept, ReqView, RuleRef, UniqueId};
use crate::state::Shared;

/// What the log formats' `%[...]` read beyond the transaction's own record: the client
/// socket (for `dst`) and the variables.
pub struct Stream<'a> {
    pub peer: Option<SocketAddr>,
    /// The listener id of a UNIX socket's client.
    pub unix_listener: Option<u32>,
    /// The id of the listener that accepted the client (`so_id`).
    pub listener_id: u32,
    /// The entries the session and the transaction track (`%[sc0_*]` in a log format).
    pub stick: Option<&'a crate::stick::track::Trackers>,
    pub client: &'a LazyStream,
    /// The destination `set-dst` or a PROXY protocol header gave (`None`: the socket's).
    pub local: Option<SocketAddr>,
    pub txn_vars: &'a RefCell<Vars>,
    pub sess_vars: &'a RefCell<Vars>,
    /// The TLS handshake of the transaction's server connection (`ssl_bc*`), if it has one.
    /// An HTTP/2 client's TLS handshake (see `policy::Stream::client_tls`).
    pub client_tls: Option<&'a crate::net::tls::Handshake>,
    pub server_tls: Option<&'a crate::net::tls::Handshake>,
    /// The PROXY protocol header the connection began with (`fc_pp_*`).
    pub proxied: Option<&'a crate::proto::proxy::Header>,
    /// The connection's own addresses (`fc_src`, `fc_dst`).
    pub fc: crate::session::facts::Addrs,
    /// Whether this is the connection's first request (`http_first_req`).
    pub first_req: bool,
}

/// The size HAProxy counts for a message head in `%B` and `%U`: the bytes of its internal
/// representation, not of the wire. That is the start line's three parts, each header's name
/// and value, and 21 bytes of structure; a `Connection` header that only says `close` or
/// `keep-alive` is not part of it. Measured against haproxy 2.6 (see tests/logs.rs).
pub fn counted_head(buf: &[u8], line: &[u8], headers: &[HeaderIdx]) -> u64 {
    let line = trim_eol(line);
    // The separators of the start line's three parts (a reason phrase may hold more): the
    // first one (early in the line), then whether another follows (a word-at-a-time search).
    let spaces = match line.iter().position(|&c| c == b' ') {
        None => 0,
        Some(i) => 1 + usize::from(line[i + 1..].contains(&b' ')),
    };
    let mut n = 21 + line.len() - spaces;
    // Counted for every message, logged or not (`show stat`'s `bin`/`bout`): the lengths come
    // from the parsed offsets; only a `Connection` header's value is read.
    for h in headers {
        if h.is_connection() && only_persistence(h.value(buf)) {
            continue;
        }
        n += h.name_value_len();
    }
    n as u64
}

/// Whether a `Connection` value only says `close` or `keep-alive` (HAProxy then keeps no such
/// header in its message). The usual single word is checked first, without splitting.
fn only_persistence(value: &[u8]) -> bool {
    let word = |t: &[u8]| t.eq_ignore_ascii_case(b"keep-alive") || t.eq_ignore_ascii_case(b"close");
    word(value) || value.split(|&c| c == b',').all(|t| word(t.trim_ascii()))
}

/// What HAProxy counts for a whole response that Bascule generated (see [`counted_head`]).
pub fn counted_response(bytes: &[u8]) -> u64 {
    let mut headers = Vec::new();
    match crate::proto::h1::parse_response(bytes, &mut headers, false) {
        Ok(Some(head)) => {
            let line = &bytes[head.start_line.clone()];
            counted_head(bytes, line, &headers) + (bytes.len() - head.len) as u64
        }
        _ => bytes.len() as u64,
    }
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A termination state: what ended the transaction, at which stage (HAProxy's `%ts`).
pub type Term = [u8; 2];

/// The log facts of the transaction in progress.
pub struct TxnLog {
    /// The frontend logs (else nothing is recorded but what unique ids need).
    pub on: bool,
    pub tl: Option<Timeline>,
    pub status: Option<u16>,
    pub bytes_out: u64,
    pub bytes_in: u64,
    pub term: Term,
    /// The status of the server's response as it went to the client (`None` when the client
    /// got a response Bascule made), for a log line's `%[status]`.
    pub server_status: Option<u16>,
    /// The request line, copied before the head leaves the buffer.
    pub request: Vec<u8>,
    pub has_request: bool,
    pub captured: Captured,
    pub uid: UniqueId,
    pub backend: Option<usize>,
    pub server: Option<usize>,
    /// This session still counts in its server's connections at log time.
    pub holds_server: bool,
    pub retries: u32,
    /// A connect retry went to another server (`%rc` shows a `+`).
    pub redispatched: bool,
    pub server_local: Option<SocketAddr>,
    /// `%sq` and `%bq`: the positions the transaction had in the server's and the backend's
    /// queues, as HAProxy counts them (0: it did not wait there).
    pub srv_queue: u32,
    pub be_queue: u32,
    /// The last final rule that ran (a cell: the rule executor notes it while the facts it
    /// evaluates borrow the record).
    pub last_rule: Cell<Option<RuleRef>>,
    /// The cookie persistence letters of `%tsc` (see `http::persist`).
    pub cookie_state: [u8; 2],
    /// `capture cookie`: the request's cookie (`%CC`) and the response's (`%CS`).
    pub cookie_req: Vec<u8>,
    pub has_cookie_req: bool,
    pub cookie_res: Vec<u8>,
    pub has_cookie_res: bool,
    /// The line went out already (`option logasap`): the end of the transaction logs nothing.
    pub logged: bool,
    /// The transaction's end was counted in `show stat` (a cell: counted from `&self`).
    pub ended: Cell<bool>,
    /// When its request head was read, in ms since start: the one clock reading the rates it
    /// counts in (the frontend's requests, the backend's and the server's sessions) share,
    /// as HAProxy's share its loop's `now_ms`.
    pub clock_ms: u64,
}

impl Default for TxnLog {
    fn default() -> Self {
        TxnLog {
            on: false,
            clock_ms: 0,
            tl: None,
            status: None,
            bytes_out: 0,
            bytes_in: 0,
            term: *b"--",
            server_status: None,
            request: Vec::new(),
            has_request: false,
            captured: Captured::default(),
            uid: UniqueId::default(),
            backend: None,
            server: None,
            holds_server: false,
            retries: 0,
            redispatched: false,
            server_local: None,
            srv_queue: 0,
            be_queue: 0,
            last_rule: Cell::new(None),
            cookie_state: *b"--",
            cookie_req: Vec::new(),
            has_cookie_req: false,
            cookie_res: Vec::new(),
            has_cookie_res: false,
            logged: false,
            ended: Cell::new(false),
        }
    }
}

impl TxnLog {
    /// The transaction ends with `status`, of which `bytes` went to the client (Bascule's own
    /// answer, or what was sent of the server's), in termination state `term`.
    pub fn answered(&mut self, status: u16, bytes: usize, term: Term) {
        self.status = Some(status);
        self.server_status = None;
        self.bytes_out += bytes as u64;
        self.term = term;
    }

    /// Starts a transaction whose clock starts at `accept` (when the frontend logs).
    pub fn start(&mut self, on: bool, accept: Option<Instant>) {
        self.on = on;
        self.logged = false;
        self.ended.set(false);
        self.tl = accept.map(Timeline::new);
        self.status = None;
        self.bytes_out = 0;
        self.bytes_in = 0;
        self.term = *b"--";
        self.server_status = None;
        self.request.clear();
        self.has_request = false;
        self.uid.reset(None);
        self.backend = None;
        self.server = None;
        self.holds_server = false;
        self.retries = 0;
        self.redispatched = false;
        self.server_local = None;
        self.srv_queue = 0;
        self.be_queue = 0;
        self.last_rule.set(None);
        self.cookie_state = *b"--";
        self.has_cookie_req = false;
        self.has_cookie_res = false;
    }

    /// Notes an instant in the timeline (read from the clock only when logging).
    pub fn mark(&mut self, set: fn(&mut Timeline, Instant)) {
        if let Some(tl) = &mut self.tl {
            set(tl, Instant::now());
        }
    }

    /// The request came over HTTP/2: its logged line says `HTTP/2.0`, as HAProxy's does.
    pub fn http2_request(&mut self, _target: &[u8]) {
        if self.has_request && self.request.ends_with(b"HTTP/1.1") {
            let n = self.request.len();
            self.request[n - 3..].copy_from_slice(b"2.0");
        }
    }

    /// The request head is complete: notes its line, captures its headers and starts the
    /// unique id's clock (the id itself is computed at its first use).
    pub fn request_head(
        &mut self,
        shared: &Shared,
        frontend: usize,
        started: Option<Instant>,
        buf: &[u8],
        head: &RequestHead,
        headers: &[HeaderIdx],
    ) {
        let log = &shared.frontends[frontend].log;
        if let Some(tl) = &mut self.tl {
            tl.request = started;
            tl.headers = Some(Instant::now());
        }
        // Kept whether or not the transaction is logged: `capture.req.method|uri|ver` read
        // it after the head is gone (a copy into a reused buffer).
        self.request
            .extend_from_slice(trim_eol(&buf[head.start_line.clone()]));
        self.has_request = self.on;
        // Every request slot, in HAProxy's numbering; the `capture request header` ones are
        // filled now, the others (no name) by rules.
        self.captured
            .reset(log.req_captures.len(), log.res_captures.len());
        for (k, (name, len)) in log.req_captures.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            if let Some(h) = headers.iter().rev().find(|h| h.is(buf, name)) {
                self.captured.set(false, k, h.value(buf), *len);
            }
        }
        if log.unique_id().is_some() {
            // The id's dates and timers count from the transaction's start.
            let tl = self.tl.unwrap_or_else(|| Timeline::new(Instant::now()));
            self.uid.reset(Some(tl));
        }
    }

    /// Computes the unique id (if the frontend has a `unique-id-format` and no rule read it
    /// yet) where HAProxy does: after the request rules, before the server is chosen.
    pub fn unique_id_now(
        &self,
        shared: &Shared,
        frontend: usize,
        st: &Stream<'_>,
        req: ReqView<'_>,
        backend: usize,
    ) {
        let kept = Kept {
            unique_id: Some(&self.uid),
            ..Kept::default()
        };
        let mut facts = facts(shared, frontend, st, Some(req), &self.captured, kept);
        facts.backend = Some(backend);
        facts.ensure_unique_id();
    }

    /// Captures the response headers of the final response.
    pub fn response_head(
        &mut self,
        shared: &Shared,
        frontend: usize,
        buf: &[u8],
        headers: &[HeaderIdx],
    ) {
        self.mark(|tl, now| tl.response = Some(now));
        let log = &shared.frontends[frontend].log;
        for (k, (name, len)) in log.res_captures.iter().enumerate() {
            if let Some(h) = headers.iter().rev().find(|h| h.is(buf, name)) {
                self.captured.set(true, k, h.value(buf), *len);
            }
        }
    }

    /// Writes the transaction's line, if the frontend logs.
    pub fn emit(&self, shared: &Shared, frontend: usize, st: &Stream<'_>) {
        let Some(tl) = &self.tl else { return };
        let fe_state = &shared.frontends[frontend];
        let log = &fe_state.log;
        if !log.enabled() {
            return;
        }
        let error =
            self.term != *b"--" || self.retries > 0 || self.status.is_some_and(|s| s >= 500);
        if log.dontlognull && !self.has_request && self.bytes_in == 0 {
            return;
        }
        let be = self.backend.map(|b| &shared.backends[b]);
        let srv = be.zip(self.server).map(|(b, s)| &b.servers[s]);
        let own = u32::from(self.holds_server);
        let now = Instant::now();
        let counters = Counters {
            actconn: shared.global_limit.current() as u32,
            feconn: fe_state.limit.current() as u32,
            beconn: match be {
                Some(b) if log.uses(uses::BE_CONN) => b.conn_count().saturating_sub(own),
                _ => 0,
            },
            srvconn: srv.map_or(0, |s| s.cur_conns.get().saturating_sub(own)),
            retries: self.retries,
            redispatched: self.redispatched,
            srv_queue: self.srv_queue,
            be_queue: self.be_queue,
        };
        let request = self.has_request.then_some(self.request.as_slice());
        // Without a request there was no stream (HAProxy logs such a connection from its
        // session): no unique id, no backend.
        let stream = request.is_some();
        let kept = Kept {
            method: request.and_then(|r| r.split(|&c| c == b' ').next()),
            status: self.server_status.filter(|_| log.status_at_log()),
            unique_id: stream.then_some(&self.uid),
            last_rule: self.last_rule.get(),
            request_line: request,
            frontend_as_backend: stream,
            first_req: None,
            timeouts: Default::default(),
        };
        let mut facts = facts(shared, frontend, st, None, &self.captured, kept);
        facts.backend = self.backend;
        facts.server = self.server;
        // HAProxy computes a unique id nobody asked for yet when it logs a stream.
        facts.ensure_unique_id();
        let uid = self.uid.get();
        let mut rec = Record {
            frontend: &fe_state.config.name,
            backend: be.map(|b| b.config.name.as_str()),
            server: srv.map(|s| s.config.name.as_str()),
            client: st.peer,
            unix: UnixEnds {
                listener: st.unix_listener,
                server: srv.is_some_and(|s| s.config.unix.is_some()),
            },
            local: if log.uses(uses::LOCAL_ADDR) {
                crate::rules::Source::dst(&facts)
            } else {
                None
            },
            server_local: self.server_local,
            server_addr: srv.map(|s| s.config.addr),
            times: tl.times(now, now, crate::log::now_us()),
            status: self.status,
            bytes_out: self.bytes_out,
            bytes_in: self.bytes_in,
            term: self.term,
            cookie_state: self.cookie_state,
            cookie_req: self.has_cookie_req.then_some(self.cookie_req.as_slice()),
            cookie_res: self.has_cookie_res.then_some(self.cookie_res.as_slice()),
            counters,
            request,
            captures: &self.captured,
            unique_id: uid.as_deref().map(Vec::as_slice),
            hostname: "",
            req_counter: if log.uses(uses::REQ_COUNTER) {
                crate::log::next_request_id()
            } else {
                0
            },
            log_counter: 0,
        };
        let level = if error && log.separate_errors {
            crate::log::LEVEL_ERR
        } else {
            crate::log::LEVEL_INFO
        };
        log.access(&shared.log_outputs, level, &mut rec, &facts);
    }
}

/// The facts of the transaction for its formats (a handful of references).
fn facts<'a>(
    shared: &'a Shared,
    frontend: usize,
    st: &Stream<'a>,
    req: Option<ReqView<'a>>,
    captured: &'a Captured,
    kept: Kept<'a>,
) -> Facts<'a> {
    Facts {
        shared,
        frontend,
        backend: None,
        server: None,
        peer: st.peer,
        unix_listener: st.unix_listener,
        listener_id: st.listener_id,
        client: Some(st.client),
        sock: None,
        tls: st.client_tls,
        server_tls: st.server_tls,
        local: st
            .local
            .map_or_else(OnceCell::new, |a| OnceCell::from(Some(a))),
        payload: None,
        res_payload: None,
        req,
        res: None,
        captured: Some(captured),
        vars: Scopes {
            txn: st.txn_vars,
            sess: st.sess_vars,
            proc: &shared.proc_vars,
        },
        wait_over: true,
        kept: Kept {
            first_req: Some(st.first_req),
            ..kept
        },
        stick: st.stick,
        proxied: st.proxied,
        fc: st.fc,
    }
}

#[cfg(test)]
mod tests {
    use super::counted_response;

    /// The sizes HAProxy 2.6 logs (`%B`) for these responses: 21 + the start line without its
    /// two separators + each header's name and value, a `Connection` that only says `close` or
    /// `keep-alive` left out, + the body.
    #[test]
    fn heads_are_counted_as_haproxy_counts_them() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello";
        assert_eq!(counted_response(r), 21 + 13 + 15 + 5);
        // A reason with spaces: still two separators; `Connection` with another token counts.
        let r = b"HTTP/1.1 404 Not Found\r\nConnection: close, x\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(counted_response(r), 21 + 20 + 18 + 15);
        // No reason phrase: one separator.
        let r = b"HTTP/1.1 204\r\nConnection: Close\r\n\r\n";
        assert_eq!(counted_response(r), 21 + 11);
    }
}
