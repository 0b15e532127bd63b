//! The rule phases of a transaction's request side, as methods of the [`Session`]:
//! `tcp-request content`, `http-request` (with `wait-for-body`), `redirect`, `use_backend`
//! and `use-server`, for the frontend and then the chosen backend; and answering a request
//! that a rule answered (deny, return, redirect, auth, tarpit) or rejected.
//!
//! [`policy`] evaluates the lists; this module lends it the session's parts and acts on the
//! verdict.

use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use crate::config::model::ProxyRules;
use crate::proto::h1::{BodyKind, RequestHead};

use super::policy::{self, Head, Stream, Verdict, Work};
use super::session::{Session, Step};
use super::txnlog;

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
                client: Some(&self.client),
                txn_vars: &p.vars,
                sess_vars: &self.sess_vars,
                timeouts: &mut self.overrides,
                local: self.dst,
                trace: None,
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
        if opts.http_buffer_request && head.body != BodyKind::None {
            let t = self.fe.timeouts.http_request.or(self.fe.timeouts.client);
            let t = t.unwrap_or(std::time::Duration::from_secs(5));
            self.wait_body(head, t, None).await;
        }
        let mut from = 0;
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
                    // Rejected before the HTTP analysers ran: HAProxy logs no request.
                    txn.has_request = false;
                    txn.request.clear();
                    if let Some(tl) = &mut txn.tl {
                        tl.headers = None;
                    }
                }
            }
            if matches!(v, Verdict::Continue) {
                v = policy::http_request(
                    &rules.http_request,
                    from,
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
            if matches!(v, Verdict::Continue) && !rules.redirects.is_empty() {
                v = policy::redirects(&rules.redirects, &st, &req, head, txn, &mut w, out);
            }
            let (peer, dst) = (st.peer, st.local);
            self.peer = peer;
            self.dst = dst;
            match v {
                Verdict::WaitBody {
                    next,
                    time,
                    at_least,
                } => {
                    self.wait_body(head, time, at_least).await;
                    from = next;
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
                let p = &mut self.scratch.0;
                let n = match self.client.write_all(&p.out).await {
                    Ok(()) => txnlog::counted_response(&p.out),
                    Err(_) => 0,
                };
                p.txn.answered(status, n as usize, term);
                if let Some(b) = backend {
                    p.txn.backend = Some(b);
                }
                self.emit_unless_silent();
                // The request's body, if any, was not read: the connection cannot go on.
                if close || head.body != BodyKind::None || !head.conn.keep_alive {
                    self.linger = true;
                    return Some(Step::End);
                }
                self.cbuf.consume(head.len);
                // The next request is a keep-alive one (its idle timeout, parking).
                self.first = false;
                self.idle_until = None;
                Some(Step::Next)
            }
        }
    }

    /// Phase: the frontend's `tcp-request connection` and `session` rules, at accept. False:
    /// a rule rejected the connection (closed without a log line, as HAProxy does).
    pub(super) fn connection_rules(&mut self) -> bool {
        let rules = Arc::clone(&self.fe.rules);
        if rules.tcp_request_connection.is_empty() && rules.tcp_request_session.is_empty() {
            return true;
        }
        let l = self.lend(None, 0);
        let Lent {
            mut st, txn, mut w, ..
        } = l;
        for list in [&rules.tcp_request_connection, &rules.tcp_request_session] {
            if let Verdict::Reject(_) = policy::tcp_content(list, &mut st, None, txn, &mut w) {
                return false;
            }
        }
        let (peer, dst) = (st.peer, st.local);
        self.peer = peer;
        self.dst = dst;
        true
    }

    /// Waits (up to `time`) until the request body is in the buffer, or `at_least` bytes of
    /// it, or the buffer is full (`wait-for-body`; `req.body` then reads it).
    async fn wait_body(
        &mut self,
        head: &RequestHead,
        time: std::time::Duration,
        at_least: Option<u64>,
    ) {
        let want = match head.body {
            BodyKind::None => return,
            BodyKind::Length(n) => n,
            BodyKind::Chunked | BodyKind::UntilClose => u64::MAX,
        };
        let want = at_least.map_or(want, |a| a.min(want));
        let deadline = tokio::time::Instant::now() + time;
        while ((self.cbuf.bytes().len() - head.len) as u64) < want && !self.cbuf.is_full() {
            match tokio::time::timeout_at(deadline, self.cbuf.fill(&mut self.client)).await {
                Ok(Ok(1..)) => {}
                _ => return,
            }
        }
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
}
