//! What an HTTP transaction records for its log line, and writing that line.
//!
//! A [`TxnLog`] lives in the session's scratch space (reused from transaction to transaction
//! and, through the worker's pool, from session to session), so recording costs no allocation
//! once its buffers have grown. Each phase of the transaction notes its instant and outcome;
//! [`TxnLog::emit`] renders the frontend's format when the transaction is over.

use std::net::SocketAddr;

use tokio::time::Instant;

use crate::log::format::uses;
use crate::log::record::{Captured, Counters, Record, Timeline, UnixEnds};
use crate::proto::h1::HeaderIdx;
use crate::state::Shared;

/// The size HAProxy counts for a message head in `%B` and `%U`: the bytes of its internal
/// representation, not of the wire. That is the start line's three parts, each header's name
/// and value, and 21 bytes of structure; a `Connection` header that only says `close` or
/// `keep-alive` is not part of it. Measured against haproxy 2.6 (see tests/logs.rs).
pub fn counted_head(buf: &[u8], line: &[u8], headers: &[HeaderIdx]) -> u64 {
    let line = trim_eol(line);
    let spaces = line.iter().filter(|&&c| c == b' ').count().min(2);
    let mut n = 21 + line.len() - spaces;
    for h in headers {
        let (name, value) = (h.name(buf), h.value(buf));
        if h.is_connection()
            && value.split(|&c| c == b',').all(|t| {
                let t = t.trim_ascii();
                t.eq_ignore_ascii_case(b"close") || t.eq_ignore_ascii_case(b"keep-alive")
            })
        {
            continue;
        }
        n += name.len() + value.len();
    }
    n as u64
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
    /// The request line, copied before the head leaves the buffer.
    pub request: Vec<u8>,
    pub has_request: bool,
    pub captured: Captured,
    pub unique_id: Vec<u8>,
    pub has_uid: bool,
    pub backend: Option<usize>,
    pub server: Option<usize>,
    /// This session still counts in its server's connections at log time.
    pub holds_server: bool,
    pub retries: u32,
    /// A connect retry went to another server (`%rc` shows a `+`).
    pub redispatched: bool,
    pub server_local: Option<SocketAddr>,
    /// The cookie persistence letters of `%tsc` (see `http::persist`).
    pub cookie_state: [u8; 2],
    /// `capture cookie`: the request's cookie (`%CC`) and the response's (`%CS`).
    pub cookie_req: Vec<u8>,
    pub has_cookie_req: bool,
    pub cookie_res: Vec<u8>,
    pub has_cookie_res: bool,
}

impl Default for TxnLog {
    fn default() -> Self {
        TxnLog {
            on: false,
            tl: None,
            status: None,
            bytes_out: 0,
            bytes_in: 0,
            term: *b"--",
            request: Vec::new(),
            has_request: false,
            captured: Captured::default(),
            unique_id: Vec::new(),
            has_uid: false,
            backend: None,
            server: None,
            holds_server: false,
            retries: 0,
            redispatched: false,
            server_local: None,
            cookie_state: *b"--",
            cookie_req: Vec::new(),
            has_cookie_req: false,
            cookie_res: Vec::new(),
            has_cookie_res: false,
        }
    }
}

impl TxnLog {
    /// The transaction ends with `status`, of which `bytes` went to the client (Bascule's own
    /// answer, or what was sent of the server's), in termination state `term`.
    pub fn answered(&mut self, status: u16, bytes: usize, term: Term) {
        self.status = Some(status);
        self.bytes_out += bytes as u64;
        self.term = term;
    }

    /// Starts a transaction whose clock starts at `accept` (when the frontend logs).
    pub fn start(&mut self, on: bool, accept: Option<Instant>) {
        self.on = on;
        self.tl = accept.map(Timeline::new);
        self.status = None;
        self.bytes_out = 0;
        self.bytes_in = 0;
        self.term = *b"--";
        self.request.clear();
        self.has_request = false;
        self.unique_id.clear();
        self.has_uid = false;
        self.backend = None;
        self.server = None;
        self.holds_server = false;
        self.retries = 0;
        self.redispatched = false;
        self.server_local = None;
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

    /// The request head is complete: notes its line, captures its headers and computes the
    /// unique id.
    #[allow(clippy::too_many_arguments)]
    pub fn request_head(
        &mut self,
        shared: &Shared,
        frontend: usize,
        started: Option<Instant>,
        buf: &[u8],
        line: std::ops::Range<usize>,
        headers: &[HeaderIdx],
        peer: Option<SocketAddr>,
        unix_listener: Option<u32>,
        local: impl Fn() -> Option<SocketAddr>,
    ) {
        let log = &shared.frontends[frontend].log;
        if let Some(tl) = &mut self.tl {
            tl.request = started;
            tl.headers = Some(Instant::now());
        }
        if self.on {
            self.request.extend_from_slice(trim_eol(&buf[line]));
            self.has_request = true;
        }
        // `capture request header` slots, then those `http-request capture` rules added.
        let rule_slots = shared.frontends[frontend]
            .config
            .rules
            .sample_captures
            .len();
        self.captured
            .reset(log.req_captures.len() + rule_slots, log.res_captures.len());
        for (k, (name, len)) in log.req_captures.iter().enumerate() {
            if let Some(h) = headers.iter().rev().find(|h| h.is(buf, name)) {
                self.captured.set(false, k, h.value(buf), *len);
            }
        }
        if let Some(f) = &log.unique_id {
            let header = |name: &str| {
                headers
                    .iter()
                    .rev()
                    .find(|h| h.is(buf, name))
                    .map(|h| h.value(buf))
            };
            let now = Instant::now();
            let tl = self.tl.unwrap_or_else(|| Timeline::new(now));
            let captured = Captured::default();
            let rec = Record {
                frontend: &shared.frontends[frontend].config.name,
                backend: None,
                server: None,
                client: peer,
                unix: UnixEnds {
                    listener: unix_listener,
                    server: false,
                },
                local: if f.uses(uses::LOCAL_ADDR) {
                    local()
                } else {
                    None
                },
                server_local: None,
                server_addr: None,
                times: tl.times(now, now, crate::log::now_us()),
                status: None,
                bytes_out: 0,
                bytes_in: 0,
                term: *b"--",
                cookie_state: *b"--",
                cookie_req: None,
                cookie_res: None,
                counters: Counters::default(),
                request: Some(&buf[..0]),
                captures: &captured,
                unique_id: None,
                hostname: "",
                req_counter: if f.uses(uses::REQ_COUNTER) {
                    crate::log::next_request_id()
                } else {
                    0
                },
                log_counter: 0,
                header: Some(&header),
            };
            self.unique_id.clear();
            f.render(&rec, &mut self.unique_id);
            self.has_uid = true;
        }
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
    pub fn emit(
        &self,
        shared: &Shared,
        frontend: usize,
        peer: Option<SocketAddr>,
        unix_listener: Option<u32>,
        local: impl Fn() -> Option<SocketAddr>,
    ) {
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
            srv_queue: 0,
            be_queue: 0,
        };
        let mut rec = Record {
            frontend: &fe_state.config.name,
            backend: be.map(|b| b.config.name.as_str()),
            server: srv.map(|s| s.config.name.as_str()),
            client: peer,
            unix: UnixEnds {
                listener: unix_listener,
                server: srv.is_some_and(|s| s.config.unix.is_some()),
            },
            local: if log.uses(uses::LOCAL_ADDR) {
                local()
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
            request: self.has_request.then_some(self.request.as_slice()),
            captures: &self.captured,
            unique_id: self.has_uid.then_some(self.unique_id.as_slice()),
            hostname: "",
            req_counter: if log.uses(uses::REQ_COUNTER) {
                crate::log::next_request_id()
            } else {
                0
            },
            log_counter: 0,
            header: None,
        };
        let level = if error && log.separate_errors {
            crate::log::LEVEL_ERR
        } else {
            crate::log::LEVEL_INFO
        };
        log.access(&shared.log_outputs, level, &mut rec);
    }
}
