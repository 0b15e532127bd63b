//! The rule phases of a transaction's request side, as methods of the [`Session`]:
//! `tcp-request content`, `http-request` (with `wait-for-body`), `redirect`, `use_backend`
//! and `use-server`, for the frontend and then the chosen backend; and answering a request
//! that a rule answered (deny, return, redirect, auth, tarpit) or rejected.
//!
//! [`policy`] evaluates the lists; this module lends it the session's parts and acts on the
//! verdict.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use crate::config::model::{HdrNames, ProxyRules};
use crate::proto::h1::{BodyKind, RequestHead};
use crate::session::facts::Addrs;

use super::answer::{self, Failure};
use super::policy::{self, Head, Stream, Verdict, Work};
use super::session::{Refused, Session, Step};
use super::txnlog;
use super::{body, edit};

/// Whether a request for `target` is one for `monitor-uri URI`: as HAProxy compares them, the
/// target's path (from its first `/`, query included; absolute-form: after the authority) when
/// the URI starts with `/`, else the whole target, case-sensitively.
fn monitor_hit(uri: &[u8], target: &[u8]) -> bool {
    if target == uri {
        return true;
    }
    if uri.first() != Some(&b'/') {
        return false;
    }
    let path = match target.windows(3).position(|w| w == b"://") {
        Some(i) if target.first() != Some(&b'/') => {
            let after = &target[i + 3..];
            match after.iter().position(|&c| c == b'/') {
                Some(j) => &after[j..],
                None => &b""[..],
            }
        }
        _ => target,
    };
    path == uri
}

/// How a wait for the request body ended.
enum BodyWait {
    /// The body (or enough of it) is in the buffer, or the buffer is full.
    Ready,
    /// The client closed or failed first: go on with what came (HAProxy does too).
    Closed,
    /// Nothing came within the time allowed.
    TimedOut,
}

/// What a rule list borrows from the session: the stream, the request head, the log record,
/// scratch space, and the output buffers (a reply; early hints).
struct Lent<'a> {
    st: Stream<'a>,
    req: Head<'a>,
    txn: &'a mut super::txnlog::TxnLog,
    w: Work<'a>,
    out: &'a mut Vec<u8>,
    hints: &'a mut Vec<u8>,
}

impl<'s> Session<'s, '_> {
    fn lend(&mut self, backend: Option<usize>, head_len: usize) -> Lent<'_> {
        let p = &mut self.scratch.0;
        Lent {
            st: Stream {
                shared: self.shared,
                frontend: self.frontend,
                backend,
                server: None,
                peer: self.peer,
                fc: self.conn,
                first_req: self.first_req,
                listener_id: self.listener_id,
                proxied: self.proxied.as_deref(),
                client: Some(&self.client),
                txn_vars: &p.vars,
                sess_vars: &self.sess_vars,
                timeouts: &mut self.overrides,
                local: self.dst,
                trace: None,
                stick: Some(&self.stick),
                stick_level: crate::stick::track::Level::Stream,
                server_tls: None,
                client_tls: self.outer_tls.as_deref(),
            },
            req: Head {
                raw: self.cbuf.bytes(),
                edited: &mut p.edited,
                is_edited: &mut self.edited,
                headers: &mut p.headers,
                len: head_len,
            },
            txn: &mut p.txn,
            w: Work {
                ev: &mut p.eval,
                val: &mut p.val,
                tmp: &mut p.tmp,
            },
            out: &mut p.out,
            hints: &mut p.hints,
        }
    }

    /// Runs `f` over the request as the rule lists see it, with `backend` chosen.
    pub(super) fn with_request<T>(
        &mut self,
        backend: usize,
        head: &RequestHead,
        f: impl FnOnce(&Stream<'_>, &Head<'_>, &super::txnlog::TxnLog, &mut Work<'_>) -> T,
    ) -> T {
        let Lent {
            st,
            req,
            txn,
            mut w,
            ..
        } = self.lend(Some(backend), head.len);
        f(&st, &req, txn, &mut w)
    }

    /// Phases: the `tcp-request content`, `http-request` and `redirect` rules of `rules` (the
    /// frontend's, or the chosen backend's: `backend`). `Some` ends the transaction there.
    pub(super) async fn request_rules(
        &mut self,
        rules: &Arc<ProxyRules>,
        head: &mut RequestHead,
        backend: Option<usize>,
    ) -> Option<Step> {
        // `option http-buffer-request`: the body first, so that `req.body` sees it.
        let opts = match backend {
            Some(b) => &self.shared.backends[b].config.options,
            None => &self.fe.options,
        };
        // HAProxy waits within `timeout http-request` (and the client's inactivity timeout).
        if opts.http_buffer_request && head.body != BodyKind::None {
            let t = self.fe.timeouts.http_request;
            if let BodyWait::TimedOut = self.wait_body(head, t, None).await {
                return Some(self.body_timeout(backend).await);
            }
        }
        let restrict = opts.restrict_hdr_names;
        let (mut from, mut strict) = (0, true);
        let fe = self.fe;
        // The statistics page (`stats enable`): whether its body was waited for, and the
        // length of a request body it read whole.
        let (ctx, mut stats_waited, mut stats_body) = (self.ctx, false, None);
        let verdict = loop {
            let (name, errorfiles) = match backend {
                Some(b) => {
                    let be = &self.shared.backends[b].config;
                    (&be.name, [&be.errorfiles[..], &self.fe.errorfiles[..]])
                }
                None => (&self.fe.name, [&self.fe.errorfiles[..], &[][..]]),
            };
            let l = self.lend(backend, head.len);
            let Lent {
                mut st,
                mut req,
                txn,
                mut w,
                out,
                hints,
            } = l;
            let mut v = Verdict::Continue;
            if from == 0 && !rules.tcp_request_content.is_empty() {
                let list = &rules.tcp_request_content;
                v = policy::tcp_content(list, &mut st, Some((&req, &*head)), txn, &mut w);
                if let Verdict::Reject(_) = v {
                    policy::count_fe_dreq(&st);
                    if let Some(tl) = &mut txn.tl {
                        tl.headers = None;
                    }
                    // The frontend's rules reject before the HTTP analysers ran: HAProxy logs
                    // no request then (`<BADREQ>`); the backend's run after them.
                    if backend.is_none() {
                        txn.has_request = false;
                        txn.request.clear();
                    }
                }
            }
            if from == 0 && backend.is_none() && matches!(v, Verdict::Continue) {
                // The HTTP analysers start: HAProxy counts the request on the entries
                // tracked so far (an entry tracked later counts it when tracked).
                if let Some(tr) = st.stick {
                    tr.count_request(&st.shared.tables, crate::base::clock::uptime_ms());
                }
            }
            // `monitor-uri`: after the `tcp-request` rules, before any `http-request` one; the
            // proxy's 200 page (the client kept), never logged.
            if let (None, 0, Verdict::Continue, Some(uri)) = (backend, from, &v, &fe.monitor_uri) {
                if monitor_hit(uri.as_bytes(), head.target(req.buf(), w.tmp)) {
                    // `monitor fail if|unless COND`: 503 when a condition holds.
                    let failing =
                        policy::monitor_fails(&rules.monitor_fail, &st, &req, head, txn, &mut w);
                    let status = if failing { 503 } else { 200 };
                    if let Some(reply) = super::answer::format_page(status, fe, None) {
                        let r = Some(policy::req_view(&req, head));
                        policy::write_error_reply(reply, &st, r, txn, &mut w, out);
                    } else if head.conn.keep_alive {
                        super::answer::error_response_keep(status, out, fe, None);
                    } else {
                        super::answer::error_response(status, out, fe, None);
                    }
                    st.timeouts.silent = true;
                    v = Verdict::Answer {
                        status,
                        term: *b"LR",
                        close: false,
                        delay: None,
                    };
                }
            }
            if matches!(v, Verdict::Continue) {
                v = policy::http_request(
                    &rules.http_request,
                    from,
                    strict,
                    &mut st,
                    &mut req,
                    head,
                    txn,
                    &mut w,
                    out,
                    hints,
                    &errorfiles,
                    name,
                );
            }
            if matches!(v, Verdict::Continue) && restrict != HdrNames::Preserve {
                v = policy::restrict_hdr_names(
                    restrict,
                    &st,
                    &mut req,
                    head,
                    txn,
                    &mut w,
                    out,
                    &errorfiles,
                );
            }
            if let (Verdict::Continue, Some(page)) = (&v, &rules.stats) {
                let p = super::stats::Page {
                    rules,
                    page,
                    proxy: name,
                    waited: stats_waited,
                    shared: &ctx.shared,
                };
                let r = super::stats::serve(
                    p,
                    &mut st,
                    &mut req,
                    head,
                    txn,
                    &mut w,
                    out,
                    hints,
                    &errorfiles,
                );
                if let super::stats::Served::Yes { verdict, body } = r {
                    (v, stats_body) = (verdict, body);
                    stats_waited |= matches!(v, Verdict::WaitBody { .. });
                }
            }
            if matches!(v, Verdict::Continue) && !rules.redirects.is_empty() {
                v = policy::redirects(&rules.redirects, &st, &req, head, txn, &mut w, out);
            }
            let (peer, dst) = (st.peer, st.local);
            self.peer = peer;
            self.dst = dst;
            match v {
                Verdict::WaitBody {
                    next,
                    strict: s,
                    time,
                    at_least,
                } => {
                    if let BodyWait::TimedOut = self.wait_body(head, Some(time), at_least).await {
                        return Some(self.body_timeout(backend).await);
                    }
                    (from, strict) = (next, s);
                }
                v => break v,
            }
        };
        if !self.scratch.0.hints.is_empty() {
            // Complete `103` responses (see `policy::http_request`), counted in the log's
            // bytes as HAProxy counts them.
            let p = &mut self.scratch.0;
            let hints = &mut p.hints;
            if self.client.write_all(hints).await.is_ok() {
                let mut rest = &hints[..];
                while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
                    p.txn.bytes_out += txnlog::counted_response(&rest[..end + 4]);
                    rest = &rest[end + 4..];
                }
            }
            hints.clear();
        }
        match verdict {
            Verdict::Continue | Verdict::WaitBody { .. } => None,
            Verdict::Reject(term) => {
                // HAProxy leaves the request time unset (`TR` -1) when a rule rejects.
                self.scratch.0.txn.mark(|tl, _| tl.headers = None);
                self.scratch.0.txn.term = term;
                self.emit_unless_silent();
                Some(Step::End)
            }
            Verdict::Answer {
                status,
                term,
                close,
                delay,
            } => {
                if term == *b"PR" || term == *b"PT" {
                    // HAProxy reads a denied or tarpitted request's cookies for its log.
                    self.denied_cookies(backend, head);
                }
                if let Some(d) = delay {
                    tokio::time::sleep(d).await;
                    // As HAProxy logs a tarpit: no request time (`TR` -1), and the wait counted
                    // as queue time from the start of the transaction (`Tw`).
                    self.scratch.0.txn.mark(|tl, now| {
                        tl.request = None;
                        tl.headers = None;
                        tl.queued = Some(now);
                    });
                }
                let status = self.after_response_generated(backend, status);
                self.count_request_bytes(head);
                let p = &mut self.scratch.0;
                let empty = p.out.is_empty();
                // The request's body, if any, was not read (the statistics page may have read
                // it whole): the connection cannot go on. An empty reply (an empty errorfile)
                // closes it too, as in HAProxy.
                let read = stats_body.filter(|_| matches!(term, [b'L', b'R']));
                let closing = close
                    || empty
                    || (head.body != BodyKind::None && read.is_none())
                    || !head.conn.keep_alive;
                if !empty {
                    answer::mark_connection(&mut p.out, closing, head.minor == 0);
                }
                let n = match self.client.write_all(&p.out).await {
                    Ok(()) => txnlog::counted_response(&p.out),
                    Err(_) => 0,
                };
                p.txn.answered(status, n as usize, term);
                if let Some(b) = backend {
                    p.txn.backend = Some(b);
                }
                self.emit_unless_silent();
                if closing {
                    self.linger = true;
                    return Some(Step::End);
                }
                self.cbuf.consume(head.len + read.unwrap_or(0));
                // The next request is a keep-alive one (its idle timeout, parking).
                self.first = false;
                self.idle_until = None;
                Some(Step::Next)
            }
        }
    }

    /// Phase: the frontend's `tcp-request connection` and `session` rules, at accept. An
    /// error: a rule rejected the connection, which is closed without a log line and counted
    /// (`dcon`, `dses`), as HAProxy does; the caller closes it (with a reset for the
    /// connection rules).
    pub(super) fn connection_rules(&mut self) -> Result<(), Refused> {
        let rules = Arc::clone(&self.fe.rules);
        if rules.tcp_request_connection.is_empty() && rules.tcp_request_session.is_empty() {
            return Ok(());
        }
        let denied = &self.shared.frontends[self.frontend].denied;
        let l = self.lend(None, 0);
        let Lent {
            mut st, txn, mut w, ..
        } = l;
        st.stick_level = crate::stick::track::Level::Session;
        // The connection list ran at accept if it could (`ProxyRules::connection_at_accept`:
        // it changed no address then). Here, it sees and changes the connection's addresses
        // (`fc_src`); a PROXY header's, which HAProxy receives after it, are the session's
        // from then on.
        if !rules.connection_at_accept() {
            (st.peer, st.local) = (st.fc.src, st.fc.dst);
            let list = &rules.tcp_request_connection;
            if let Verdict::Reject(_) = policy::tcp_content(list, &mut st, None, txn, &mut w) {
                crate::state::Denied::count(&denied.conn);
                return Err(Refused::Connection);
            }
            st.fc = Addrs {
                src: st.peer,
                dst: st.local,
            };
            if let Some((src, dst)) = st.proxied.and_then(|h| h.addrs) {
                (st.peer, st.local) = (Some(src), Some(dst));
            }
        }
        let list = &rules.tcp_request_session;
        if let Verdict::Reject(_) = policy::tcp_content(list, &mut st, None, txn, &mut w) {
            crate::state::Denied::count(&denied.sess);
            return Err(Refused::Session);
        }
        // The session is accepted: HAProxy counts it on the entries tracked so far.
        if let Some(tr) = st.stick.filter(|t| t.any()) {
            tr.count(
                &st.shared.tables,
                crate::stick::track::Event::Session,
                crate::base::clock::uptime_ms(),
            );
        }
        let (fc, peer, dst) = (st.fc, st.peer, st.local);
        self.conn = fc;
        self.sess = Addrs { src: peer, dst };
        self.peer = peer;
        self.dst = dst;
        Ok(())
    }

    /// Waits until the request body is in the buffer, or `at_least` bytes of its data, or the
    /// buffer is full (`wait-for-body`, `option http-buffer-request`; `req.body` then reads
    /// it), as HAProxy's `http_wait_for_msg_body`: within `time` if given, and while the
    /// client sends within its inactivity timeout (`timeout client`). A client that expects
    /// `100 Continue` gets it first (its `Expect` header is then not forwarded).
    async fn wait_body(
        &mut self,
        head: &mut RequestHead,
        time: Option<Duration>,
        at_least: Option<u64>,
    ) -> BodyWait {
        let at_least = at_least.unwrap_or(0);
        let ready = |cbuf: &super::buf::Buf| {
            cbuf.is_full() || body::body_ready(head.body, &cbuf.bytes()[head.len..], at_least)
        };
        if ready(&self.cbuf) {
            return BodyWait::Ready;
        }
        if head.conn.expect_continue {
            if self
                .client
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .is_err()
            {
                return BodyWait::Closed;
            }
            let p = &mut self.scratch.0;
            let buf = if self.edited {
                &p.edited[..]
            } else {
                self.cbuf.bytes()
            };
            edit::delete(buf, &mut p.headers, |n, _| {
                n.eq_ignore_ascii_case(b"expect")
            });
            head.conn.expect_continue = false;
        }
        let now = Instant::now();
        let deadline = time.map(|t| now + t);
        let idle = self.fe.timeouts.client;
        while !ready(&self.cbuf) {
            let now = Instant::now();
            let limit = match (deadline, idle.map(|i| now + i)) {
                (Some(d), Some(i)) => Some(d.min(i)),
                (d, i) => d.or(i),
            };
            let fill = self.cbuf.fill(&mut self.client);
            let filled = match limit {
                Some(l) => tokio::time::timeout_at(l.into(), fill).await,
                None => Ok(fill.await),
            };
            match filled {
                Ok(Ok(1..)) => {}
                Ok(_) => return BodyWait::Closed,
                Err(_) => return BodyWait::TimedOut,
            }
        }
        BodyWait::Ready
    }

    /// The request body did not come in time: HAProxy 2.6 answers 408 and closes, logged with
    /// the request never complete (`TR` -1) and `cR`.
    async fn body_timeout(&mut self, backend: Option<usize>) -> Step {
        let txn = &mut self.scratch.0.txn;
        txn.mark(|tl, _| tl.headers = None);
        if backend.is_some() {
            txn.backend = backend;
        }
        let shared = self.shared;
        let be = backend.map(|b| &shared.backends[b].config);
        self.fail(Failure::Respond(408, *b"cR"), be).await
    }

    /// `use_backend` lines, in order.
    pub(super) fn use_backend(&mut self, head: &RequestHead) -> Option<usize> {
        let rules = Arc::clone(&self.fe.rules);
        let l = self.lend(None, head.len);
        let Lent {
            st,
            req,
            txn,
            mut w,
            ..
        } = l;
        policy::use_backend(&rules.use_backends, &st, &req, head, txn, &mut w)
    }

    /// `balance hash EXPR` of backend `be`: the hash of the expression's value for the
    /// request, `None` (round-robin) when it gives none.
    pub(super) fn balance_hash(&mut self, be: usize, head: &RequestHead) -> Option<u32> {
        let shared = self.shared;
        let config = &shared.backends[be].config;
        let expr = config.rules.balance_hash.as_ref()?;
        let Lent {
            st,
            req,
            txn,
            mut w,
            ..
        } = self.lend(Some(be), head.len);
        policy::balance_sample(expr, &st, &req, head, txn, &mut w)
            .then(|| crate::backend::sample_key(config, w.val))
    }

    /// `stick match|on|store-request` lines of backend `be`: the server a stored key names
    /// when none is `assigned` yet (see [`policy::stick_request`]); the keys to store go to
    /// the session's pending stores.
    pub(super) fn stick_request(
        &mut self,
        be: usize,
        head: &RequestHead,
        assigned: Option<usize>,
    ) -> Option<usize> {
        let backend = &self.shared.backends[be];
        if backend.config.rules.stick.is_empty() {
            return assigned;
        }
        let rules = Arc::clone(&backend.config.rules);
        let persist = backend.config.options.persist || self.persist.force;
        let mut stores = std::mem::take(&mut self.stick_stores);
        let l = self.lend(Some(be), head.len);
        let Lent {
            st,
            req,
            txn,
            mut w,
            ..
        } = l;
        let s = policy::stick_request(
            &rules.stick,
            &st,
            &req,
            head,
            txn,
            &mut w,
            assigned,
            persist,
            &mut stores,
        );
        self.stick_stores = stores;
        s
    }

    /// `use-server` lines of backend `be`: a server they name, if it is usable.
    pub(super) fn use_server(&mut self, be: usize, head: &RequestHead) -> Option<usize> {
        let backend = &self.shared.backends[be];
        let force = self.persist.force;
        if backend.config.rules.use_servers.is_empty() {
            return None;
        }
        let rules = Arc::clone(&backend.config.rules);
        let l = self.lend(Some(be), head.len);
        let Lent {
            st,
            req,
            txn,
            mut w,
            ..
        } = l;
        // As HAProxy does, a rule naming a down server is passed over (unless `option
        // persist` or `force-persist`) and the next one is tried.
        let persist = backend.config.options.persist || force;
        let may = |s: usize| backend.servers[s].usable() || persist;
        policy::use_server(&rules.use_servers, &st, &req, head, txn, &mut w, may)
    }

    /// Phase: the SNI of the servers of backend `be` (`server ... ssl sni EXPR`), evaluated
    /// on this request into `out` (cleared when the backend has no `sni`). `out` is the
    /// scratch's, taken by the caller: its strings are rewritten in place, so a keep-alive
    /// request allocates nothing here.
    pub(super) fn sni_values(
        &mut self,
        be: usize,
        head: &RequestHead,
        out: &mut Vec<Option<String>>,
    ) {
        let shared = self.shared;
        let exprs = &shared.backends[be].config.sni_exprs;
        if exprs.is_empty() {
            out.clear();
            return;
        }
        let l = self.lend(Some(be), head.len);
        let Lent {
            st,
            req,
            txn,
            mut w,
            ..
        } = l;
        policy::sni_values(exprs, &st, &req, head, txn, &mut w, out)
    }
}

#[cfg(test)]
mod tests {
    use super::monitor_hit;

    #[test]
    fn monitor_uri_matches_as_haproxy() {
        let cases: [(&str, &str, bool); 7] = [
            ("/health", "/health", true),
            ("/health", "/hEAlth", false),
            ("/health", "/health?x=1", false),
            ("/health", "http://www.haproxy.org/health", true),
            (
                "http://www.haproxy.org/health",
                "http://www.haproxy.org/health",
                true,
            ),
            ("http://www.haproxy.org/health", "/health", false),
            ("/", "http://a", false),
        ];
        for (uri, target, want) in cases {
            assert_eq!(
                monitor_hit(uri.as_bytes(), target.as_bytes()),
                want,
                "{uri} vs {target}"
            );
        }
    }
}
