//! One request and its response on a server connection: the rewritten head goes out, then the
//! body (after the server's `100 Continue` when the client asked for one); the response head
//! is read (1xx interim responses pass through), rewritten and sent with the body bytes that
//! came with it, and the body streams to its end. The result says which sides stay open.

use std::sync::Arc;
use std::time::Duration;

use crate::net::stream::Stream as Socket;
use tokio::io::AsyncWriteExt;

use crate::backend;
use crate::config::model::{Backend as BackendConfig, Frontend as FrontendConfig, HttpConnMode};
use crate::net::deadline::Elapsed;
use crate::net::forward;
use crate::net::lazy::LazyStream;
use crate::proto::h1::{self, BodyKind, RequestHead, ResponseHead};

use super::answer::{body_term, client_gone, Failure};
use super::body::{self, BodyError};
use super::buf::Buf;
use super::policy::{self, Head, Res, Stream, Verdict, Work};
use super::request;
use super::server::Attached;
use super::session::{Session, Timers};
use super::txnlog::{self, Term};

/// Where the request head is: in the client buffer as received, or in the edit buffer once a
/// rule changed it (see `edit`).
pub(super) fn head_buf<'a>(edited: bool, edit_buf: &'a [u8], cbuf: &'a Buf) -> &'a [u8] {
    if edited {
        edit_buf
    } else {
        cbuf.bytes()
    }
}

/// How a completed transaction leaves the connections.
pub(super) enum Outcome {
    KeepBoth,
    KeepClient,
    /// `request_read`: the request was read whole (its body too), so the client has nothing
    /// more to send unless it pipelined past a `Connection: close`.
    CloseClient {
        keep_server: bool,
        request_read: bool,
    },
    Upgraded,
}

/// The connection mode of a transaction: the stricter of the frontend's and the backend's.
pub(super) fn conn_mode(fe: &FrontendConfig, be: &BackendConfig) -> HttpConnMode {
    let (f, b) = (fe.options.http_conn_mode, be.options.http_conn_mode);
    if f == HttpConnMode::Close || b == HttpConnMode::Close {
        HttpConnMode::Close
    } else if f == HttpConnMode::ServerClose || b == HttpConnMode::ServerClose {
        HttpConnMode::ServerClose
    } else {
        HttpConnMode::KeepAlive
    }
}

/// What an exchange knows about its request once, and where it stands.
struct Exchange<'x> {
    req: &'x RequestHead,
    mode: HttpConnMode,
    client_t: Option<Duration>,
    server_t: Option<Duration>,
    splice: forward::Splice,
    /// A bodyless idempotent request that may be sent again: its head stays in the client
    /// buffer until the response starts.
    safe: bool,
    may_retry: bool,
    /// Read before the head leaves the client buffer (its offsets die with it).
    is_head: bool,
    /// The client asked `HEAD` but a rule (`set-method`) sent another method: the response
    /// body is read from the server and dropped, as HAProxy's client side drops it.
    drop_body: bool,
    is_connect: bool,
    body_sent: bool,
    head_consumed: bool,
    /// `option abortonclose`: a client that leaves while its response is awaited cancels it.
    watch_client: bool,
}

impl Exchange<'_> {
    /// The failure to report for `status`/`term`, or a retry when the request may be sent
    /// again and `allowed` (the `retry-on` condition holds).
    fn retry_if(&self, allowed: bool, status: u16, term: Term) -> Failure {
        if self.safe && self.may_retry && allowed {
            Failure::Retry
        } else {
            Failure::Respond(status, term)
        }
    }

    /// Streams the request body to the server, counting what went out in `sent`.
    async fn send_request_body(
        &self,
        client: &mut LazyStream,
        cbuf: &mut Buf,
        server: &mut Socket,
        timers: &mut Timers<'_>,
        sent: &mut u64,
    ) -> Result<(), Failure> {
        let timeouts = (self.client_t, self.server_t);
        let deadlines = (&mut timers.client, &mut timers.server);
        let splice = self.splice.request;
        body::send_body(
            client,
            cbuf,
            server,
            self.req.body,
            timeouts,
            deadlines,
            splice,
            sent,
        )
        .await
        .map_err(|e| match e {
            // As before logs existed: a bad chunk is answered, a silent side gets 504.
            BodyError::Invalid(status) => Failure::Respond(status, *b"PD"),
            BodyError::SrcTimeout | BodyError::DstTimeout => {
                Failure::Respond(504, body_term(e, true))
            }
            _ => Failure::Close(body_term(e, true)),
        })
    }
}

impl Session<'_, '_> {
    /// Sends `req` on `conn` and relays the response (phases: connect is done; request out,
    /// response head, response out). `may_retry`: retries are left for a request that fails
    /// in a retryable way.
    pub(super) async fn exchange(
        &mut self,
        req: &RequestHead,
        conn: &mut Attached<'_>,
        be: &BackendConfig,
        may_retry: bool,
    ) -> Result<Outcome, Failure> {
        let fe = self.fe;
        let buf = head_buf(self.edited, &self.scratch.0.edited, &self.cbuf);
        let mut x = Exchange {
            req,
            mode: conn_mode(fe, be),
            client_t: fe.timeouts.client,
            server_t: be.timeouts.server,
            splice: forward::Splice::of(&fe.options, &be.options),
            safe: req.body == BodyKind::None && req.idempotent(buf),
            may_retry,
            is_head: req.is_head(buf),
            drop_body: self.head_request && !req.is_head(buf),
            is_connect: req.method(buf) == b"CONNECT",
            body_sent: req.body == BodyKind::None,
            head_consumed: false,
            watch_client: fe.options.abortonclose || be.options.abortonclose,
        };
        self.send_request(&mut x, conn, be).await?;
        let res = self.response_head(&mut x, conn, be).await?;
        self.send_response(&x, res, conn).await
    }

    /// Phase: the request head, rewritten, then its body unless the client waits for `100
    /// Continue`.
    async fn send_request(
        &mut self,
        x: &mut Exchange<'_>,
        conn: &mut Attached<'_>,
        be: &BackendConfig,
    ) -> Result<(), Failure> {
        let req = x.req;
        let parts = &mut self.scratch.0;
        let buf = head_buf(self.edited, &parts.edited, &self.cbuf);
        let uid_header = self.shared.frontends[self.frontend]
            .log
            .unique_id_header
            .as_deref();
        let uid = uid_header.and(parts.txn.uid.get());
        let unique_id = uid_header.zip(uid.as_deref()).map(|(h, id)| (h, &id[..]));
        let (fe, peer) = (self.fe, self.peer);
        // `option originalto` needs the address the client connected to (one syscall).
        let wants_dst = fe.options.originalto.is_some() || be.options.originalto.is_some();
        let local = match self.dst {
            Some(d) => Some(d),
            None => wants_dst.then(|| self.client.local_addr().ok()).flatten(),
        };
        request::write_head(
            &mut parts.out,
            buf,
            &parts.headers,
            req,
            fe,
            be,
            x.mode,
            peer,
            local,
            unique_id,
        );
        // Counted for the log's `%U`, `show stat`'s `bin` and stick tables (`bytes_in_*`,
        // even when an `http-response` rule tracks the stream later).
        let line = &buf[req.start_line.clone()];
        parts.txn.bytes_in = txnlog::counted_head(buf, line, &parts.headers);
        let write = conn.stream.write_all(&parts.out);
        if !matches!(
            self.timers.server.within(x.server_t, write).await,
            Ok(Ok(()))
        ) {
            let ro = &be.retry_on;
            return Err(x.retry_if(conn.reused || ro.empty_response, 502, *b"SH"));
        }
        if req.body != BodyKind::None {
            self.cbuf.consume(req.len);
            x.head_consumed = true;
        }
        if !req.conn.expect_continue {
            let sent = &mut parts.txn.bytes_in;
            let (client, cbuf, timers) = (&mut self.client, &mut self.cbuf, &mut self.timers);
            x.send_request_body(client, cbuf, &mut conn.stream, timers, sent)
                .await?;
            x.body_sent = true;
        }
        Ok(())
    }

    /// Phase: the final response head, passing 1xx interim responses through (and sending the
    /// request body after a `100 Continue`). Feeds passive health checks (`observe`).
    async fn response_head(
        &mut self,
        x: &mut Exchange<'_>,
        conn: &mut Attached<'_>,
        be: &BackendConfig,
    ) -> Result<ResponseHead, Failure> {
        let req = x.req;
        let ro = &be.retry_on;
        let is_head = x.is_head;
        let parts = &mut self.scratch.0;
        loop {
            let parsed = loop {
                match h1::parse_response(conn.sbuf.bytes(), &mut parts.rheaders, is_head) {
                    Ok(Some(r)) => break r,
                    Ok(None) => {}
                    Err(e) => return Err(x.retry_if(ro.junk_response, e.status, *b"PH")),
                }
                if conn.sbuf.is_full() {
                    return Err(Failure::Respond(502, *b"PH"));
                }
                let nothing_yet = conn.sbuf.bytes().is_empty();
                let fill = self
                    .timers
                    .server
                    .within(x.server_t, conn.sbuf.fill(&mut conn.stream));
                let filled = if x.watch_client {
                    // `option abortonclose`: a client that goes away cancels its pending request.
                    tokio::select! {
                        // Polled in order: the client's leaving counts only while it waits.
                        biased;
                        r = fill => r,
                        gone = client_gone(&mut self.client) => {
                            if gone {
                                // As HAProxy 2.6 does (`http_wait_for_response`): a 400 sent
                                // after the client, logged with it, `CH`.
                                return Err(Failure::Respond(400, *b"CH"));
                            }
                            x.watch_client = false;
                            continue;
                        }
                    }
                } else {
                    fill.await
                };
                match filled {
                    Ok(Ok(0)) | Ok(Err(_)) if nothing_yet => {
                        return Err(x.retry_if(conn.reused || ro.empty_response, 502, *b"SH"))
                    }
                    Ok(Ok(0)) | Ok(Err(_)) => return Err(Failure::Respond(502, *b"SH")),
                    Ok(Ok(_)) => {}
                    Err(Elapsed) => return Err(x.retry_if(ro.response_timeout, 504, *b"sH")),
                }
            };
            if !x.head_consumed && ro.statuses.contains(&parsed.status) && x.safe && x.may_retry {
                // `retry-on <status>`: this answer is dropped with its connection.
                return Err(Failure::Retry);
            }
            if !x.head_consumed {
                self.cbuf.consume(req.len);
                x.head_consumed = true;
            }
            // HAProxy counts each head the server sends, interim ones too, on the server
            // (`req_tot`, `hrsp_*`).
            let srv = &self.shared.backends[conn.backend].servers[conn.slot.server()];
            srv.http.count_req();
            srv.http.count_rsp(parsed.status);
            if !(100..200).contains(&parsed.status) {
                let bad =
                    (500..600).contains(&parsed.status) && !matches!(parsed.status, 501 | 505);
                let outcome = if bad {
                    backend::Outcome::Layer7Error
                } else {
                    backend::Outcome::Layer7Ok
                };
                crate::backend::passive::observe(conn.slot.backend(), conn.slot.server(), outcome);
                // HAProxy counts the server's 4xx and 5xx on the tracked entries here.
                if self.stick.any() {
                    let now = crate::base::clock::uptime_ms();
                    self.stick
                        .count_status(&self.shared.tables, parsed.status, now);
                }
                // `stick on|store-request|store-response`: the server answered, its keys are
                // stored now (HAProxy's store rules run when the response arrives).
                let stick_rules = &self.shared.backends[conn.backend].config.rules.stick;
                if !self.stick_stores.is_empty()
                    || stick_rules
                        .iter()
                        .any(|r| r.action.kind == crate::rules::stick::StickKind::StoreResponse)
                {
                    let st = Stream {
                        shared: self.shared,
                        frontend: self.frontend,
                        backend: Some(conn.backend),
                        server: Some(conn.slot.server()),
                        peer: self.peer,
                        fc: self.conn,
                        first_req: self.first_req,
                        listener_id: self.listener_id,
                        proxied: self.proxied.as_deref(),
                        client: Some(&self.client),
                        txn_vars: &parts.vars,
                        sess_vars: &self.sess_vars,
                        timeouts: &mut self.overrides,
                        local: self.dst,
                        trace: None,
                        stick: Some(&self.stick),
                        stick_level: crate::stick::track::Level::Stream,
                        server_tls: conn.stream.tls().map(|t| t.facts()),
                        client_tls: self.outer_tls.as_deref(),
                    };
                    let res = crate::session::facts::ResView {
                        buf: conn.sbuf.bytes(),
                        head: &parsed,
                        headers: &parts.rheaders,
                    };
                    let mut w = Work {
                        ev: &mut parts.eval,
                        val: &mut parts.val,
                        tmp: &mut parts.tmp,
                    };
                    super::policy::stick_store(
                        stick_rules,
                        &st,
                        Some(res),
                        &parts.txn,
                        &mut w,
                        &mut self.stick_stores,
                    );
                }
            }
            if parsed.status == 101 && !req.conn.upgrade {
                // Switching protocols nobody asked for: the client would take what follows for
                // the response to its request.
                return Err(Failure::Respond(502, *b"PH"));
            }
            if (100..200).contains(&parsed.status) && parsed.status != 101 {
                let len = parsed.len;
                if self
                    .client
                    .write_all(&conn.sbuf.bytes()[..len])
                    .await
                    .is_err()
                {
                    return Err(Failure::Close(*b"CH"));
                }
                conn.sbuf.consume(len);
                if parsed.status == 100 && !x.body_sent {
                    let sent = &mut parts.txn.bytes_in;
                    let (client, cbuf, timers) =
                        (&mut self.client, &mut self.cbuf, &mut self.timers);
                    x.send_request_body(client, cbuf, &mut conn.stream, timers, sent)
                        .await?;
                    x.body_sent = true;
                }
                continue;
            }
            return Ok(parsed);
        }
    }

    /// Phases: the backend's `http-response` rules, then the frontend's, then the
    /// `http-after-response` ones, on the final response head. `Some` when a rule replaced
    /// the response (`deny`, `return`, `redirect`): the reply went out and the server
    /// connection is not kept (also when `wait-for-body` timed out: a 504). `redited`: the
    /// head is now in the edit buffer.
    async fn response_rules(
        &mut self,
        res: &mut ResponseHead,
        conn: &mut Attached<'_>,
        redited: &mut bool,
    ) -> Option<Result<Outcome, Failure>> {
        let be_idx = conn.backend;
        let shared = self.shared;
        let be_rules = &shared.backends[be_idx].config.rules;
        let fe_rules = &self.fe.rules;
        let same = Arc::ptr_eq(be_rules, fe_rules);
        let be_state = &self.shared.backends[be_idx];
        let cookies = be_state.config.cookie.is_some() || self.fe.options.capture_cookie.is_some();
        if !be_rules.has_response_rules() && !fe_rules.has_response_rules() && !cookies {
            return None;
        }
        let be = &shared.backends[be_idx].config;
        let errorfiles = [&be.errorfiles[..], &self.fe.errorfiles[..]];
        let lists = [Some(be_rules), (!same).then_some(fe_rules)];
        let received_head = {
            let sbytes = conn.sbuf.bytes();
            let line = &sbytes[res.start_line.clone()];
            txnlog::counted_head(sbytes, line, &self.scratch.0.rheaders)
        };
        // Where the `http-response` lists resume after a `wait-for-body`: list, rule.
        let (mut list, mut from, mut strict) = (0, 0, true);
        // The backend's `tcp-response content` rules run once, before the first list.
        let mut inspected = be_rules.tcp_response_content.is_empty();
        let verdict = loop {
            let p = &mut self.scratch.0;
            let mut st = Stream {
                shared,
                frontend: self.frontend,
                backend: Some(be_idx),
                server: Some(conn.slot.server()),
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
                server_tls: conn.stream.tls().map(|t| t.facts()),
                client_tls: self.outer_tls.as_deref(),
            };
            let mut r = Res {
                msg: Head {
                    raw: conn.sbuf.bytes(),
                    edited: &mut p.redited,
                    is_edited: redited,
                    headers: &mut p.rheaders,
                    len: res.len,
                },
                head: res,
            };
            let mut w = Work {
                ev: &mut p.eval,
                val: &mut p.val,
                tmp: &mut p.tmp,
            };
            let txn = &mut p.txn;
            let out = &mut p.out;
            let mut verdict = Verdict::Continue;
            if !inspected {
                inspected = true;
                let rules = &be_rules.tcp_response_content;
                verdict = policy::tcp_response(rules, &mut st, &r, txn, &mut w);
            }
            while matches!(verdict, Verdict::Continue) && list < lists.len() {
                if let Some(rules) = lists[list] {
                    verdict = policy::http_response(
                        &rules.http_response,
                        &mut st,
                        &mut r,
                        txn,
                        &mut w,
                        out,
                        &errorfiles,
                        from,
                        strict,
                    );
                    if !matches!(verdict, Verdict::Continue) {
                        break;
                    }
                }
                (list, from, strict) = (list + 1, 0, true);
            }
            if let Verdict::WaitBody {
                next,
                strict: s,
                time,
                at_least,
            } = verdict
            {
                (from, strict) = (next, s);
                if self.wait_response_body(res, conn, time, at_least).await {
                    continue;
                }
                // Time ran out: as HAProxy 2.6 (`http_wait_for_msg_body`), a 504 in place of
                // the response, the client kept, logged as a server timeout (`sR`) with the
                // server's bytes counted.
                self.generated_page(504, Some(be), None, true);
                break Verdict::Answer {
                    status: 504,
                    term: *b"sR",
                    close: false,
                    delay: None,
                };
            }
            if matches!(verdict, Verdict::Continue) {
                if cookies {
                    let x = super::persist::ResCtx {
                        be: be_state,
                        capture: self.fe.options.capture_cookie.as_ref(),
                        persist: &self.persist,
                        server: conn.slot.server(),
                        redispatched: conn.redispatched,
                    };
                    super::persist::response_cookies(&x, txn, w.tmp, &mut r);
                }
                let mut ok = true;
                for rules in lists.into_iter().flatten() {
                    ok = policy::http_after_response(
                        &rules.http_after_response,
                        &mut st,
                        &mut r,
                        txn,
                        &mut w,
                    );
                    if !ok {
                        break;
                    }
                }
                if ok {
                    return None;
                }
                // A rewrite failed in strict mode: haproxy answers 500 instead (its
                // `http-after-response` rules then run on that page).
                break policy::rewrite_failed(out, &errorfiles, *b"PH");
            }
            break verdict;
        };
        // `tcp-response content reject`: both connections close, the client gets nothing.
        // HAProxy rejects before it reads the response as HTTP: no status is logged.
        if let Verdict::Reject(term) = verdict {
            self.scratch.0.txn.status = None;
            return Some(Err(Failure::Close(term)));
        }
        let Verdict::Answer { status, term, .. } = verdict else {
            return None;
        };
        // What the server sent, as HAProxy counts it when a rule replaces the response: the
        // head as received (counted before any rule edited it) and the body bytes that came
        // with it.
        let received = received_head
            + match res.body {
                BodyKind::Length(len) => {
                    (conn.sbuf.bytes().len() - res.len).min(len as usize) as u64
                }
                _ => 0,
            };
        let status = self.after_response_generated(Some(be_idx), status);
        let p = &mut self.scratch.0;
        let n = match self.client.write_all(&p.out).await {
            Ok(()) => txnlog::counted_response(&p.out),
            Err(_) => 0,
        };
        // As HAProxy logs it: the server's response (its head as received and the body bytes
        // that came with it) counts too, and there is no server response time (`Tr` -1).
        p.txn.mark(|tl, _| tl.response = None);
        p.txn.answered(status, (n + received) as usize, term);
        Some(Ok(Outcome::KeepClient))
    }

    /// `http-response wait-for-body`: reads the response body into the server buffer until it
    /// is all there, or `at_least` bytes of its data, or the buffer is full, within `time` and
    /// the server's inactivity timeout. False: the time ran out first. A server that closes
    /// ends the wait too (true): the body is then forwarded as it came, as HAProxy does.
    async fn wait_response_body(
        &mut self,
        res: &ResponseHead,
        conn: &mut Attached<'_>,
        time: std::time::Duration,
        at_least: Option<u64>,
    ) -> bool {
        let at_least = at_least.unwrap_or(0);
        let deadline = tokio::time::Instant::now() + time;
        let idle = self.shared.backends[conn.backend].config.timeouts.server;
        loop {
            let sbuf = &conn.sbuf;
            if sbuf.is_full() || body::body_ready(res.body, &sbuf.bytes()[res.len..], at_least) {
                return true;
            }
            let limit = idle.map_or(deadline, |i| deadline.min(tokio::time::Instant::now() + i));
            match tokio::time::timeout_at(limit, conn.sbuf.fill(&mut conn.stream)).await {
                Ok(Ok(1..)) => {}
                Ok(_) => return true,
                Err(_) => return false,
            }
        }
    }

    /// The `http-after-response` rules (the backend's, then the frontend's) on a response
    /// Bascule generated itself, in the output buffer (`deny`, `return`, `redirect`, `auth`,
    /// `tarpit`, an error): HAProxy runs them on its own responses too. An edited head is
    /// written back into the buffer, before the body.
    /// Returns the response's status, which a rule may have changed.
    pub(super) fn after_response_generated(&mut self, backend: Option<usize>, status: u16) -> u16 {
        let fe_rules = &self.fe.rules;
        let be_rules = backend
            .map(|b| &self.shared.backends[b].config.rules)
            .filter(|r| !Arc::ptr_eq(r, fe_rules));
        let lists = [be_rules, Some(fe_rules)];
        if lists
            .iter()
            .flatten()
            .all(|r| r.http_after_response.is_empty())
        {
            return status;
        }
        let p = &mut self.scratch.0;
        let out = std::mem::take(&mut p.out);
        let Ok(Some(mut head)) = h1::parse_response(&out, &mut p.rheaders, false) else {
            p.out = out;
            return status;
        };
        let mut edited = false;
        let mut failed = false;
        {
            let mut st = Stream {
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
                local: self.dst,
                txn_vars: &p.vars,
                sess_vars: &self.sess_vars,
                timeouts: &mut self.overrides,
                trace: None,
                stick: Some(&self.stick),
                stick_level: crate::stick::track::Level::Stream,
                server_tls: None,
                client_tls: self.outer_tls.as_deref(),
            };
            let mut r = Res {
                msg: Head {
                    raw: &out,
                    edited: &mut p.redited,
                    is_edited: &mut edited,
                    headers: &mut p.rheaders,
                    len: head.len,
                },
                head: &mut head,
            };
            let mut w = Work {
                ev: &mut p.eval,
                val: &mut p.val,
                tmp: &mut p.tmp,
            };
            for rules in lists.into_iter().flatten() {
                if !policy::http_after_response(
                    &rules.http_after_response,
                    &mut st,
                    &mut r,
                    &mut p.txn,
                    &mut w,
                ) {
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            // A rewrite failed in strict mode: as haproxy (`http_reply_and_close`), a 500 in
            // its place, its rules run on it too, unless the page was a 500 already (then
            // sent as it is).
            self.scratch.0.out = out;
            let be = backend.map(|b| &self.shared.backends[b].config);
            self.generated_page(500, be, None, true);
            if status == 500 {
                return 500;
            }
            return self.after_response_generated(backend, 500);
        }
        if !edited {
            p.out = out;
            return status;
        }
        let mut new = std::mem::take(&mut p.tmp);
        new.clear();
        let start = head.start_line.clone();
        h1::copy_head(
            &p.redited,
            start,
            &p.rheaders,
            &head.fixes,
            &mut new,
            |_| true,
        );
        new.extend_from_slice(b"\r\n");
        new.extend_from_slice(&out[head.len..]);
        p.tmp = out;
        p.out = new;
        head.status
    }

    /// Writes the response for a status Bascule generates to the scratch's `out` (see
    /// [`super::answer::error_response`]); an `http-error` page with log-format strings is
    /// rendered on this transaction, with the request `head` when it is still buffered.
    /// `keep`: the connection stays open (the built-in page then says nothing of closing).
    pub(super) fn generated_page(
        &mut self,
        status: u16,
        be: Option<&BackendConfig>,
        head: Option<&RequestHead>,
        keep: bool,
    ) {
        let fe = self.fe;
        let Some(reply) = super::answer::format_page(status, fe, be) else {
            let out = &mut self.scratch.0.out;
            if keep {
                super::answer::error_response_keep(status, out, fe, be);
            } else {
                super::answer::error_response(status, out, fe, be);
            }
            return;
        };
        let p = &mut self.scratch.0;
        let buf = head_buf(self.edited, &p.edited, &self.cbuf);
        let req = head.map(|head| crate::session::facts::ReqView {
            buf,
            head,
            headers: &p.headers,
            received: buf.len(),
            body: None,
        });
        let st = Stream {
            shared: self.shared,
            frontend: self.frontend,
            backend: p.txn.backend,
            server: p.txn.server,
            peer: self.peer,
            fc: self.conn,
            first_req: self.first_req,
            listener_id: self.listener_id,
            proxied: self.proxied.as_deref(),
            client: Some(&self.client),
            local: self.dst,
            txn_vars: &p.vars,
            sess_vars: &self.sess_vars,
            timeouts: &mut self.overrides,
            trace: None,
            stick: Some(&self.stick),
            stick_level: crate::stick::track::Level::Stream,
            server_tls: None,
            client_tls: self.outer_tls.as_deref(),
        };
        let mut w = Work {
            ev: &mut p.eval,
            val: &mut p.val,
            tmp: &mut p.tmp,
        };
        policy::write_error_reply(reply, &st, req, &p.txn, &mut w, &mut p.out);
    }

    /// Phase: the response head, rewritten, with the body bytes that came with it in the same
    /// write, then the rest of the body (de-chunked for a client that cannot read chunked).
    async fn send_response(
        &mut self,
        x: &Exchange<'_>,
        mut res: ResponseHead,
        conn: &mut Attached<'_>,
    ) -> Result<Outcome, Failure> {
        let req = x.req;
        {
            let p = &mut self.scratch.0;
            p.txn.status = Some(res.status);
            p.txn
                .response_head(self.shared, self.frontend, conn.sbuf.bytes(), &p.rheaders);
        }
        // `http-response` and `http-after-response` rules may edit the head (then it is in the
        // edit buffer) or replace the response.
        // HAProxy counts the response as the server sent it, before any rule edits it.
        let received = {
            let (sbytes, p) = (conn.sbuf.bytes(), &self.scratch.0);
            let line = &sbytes[res.start_line.clone()];
            txnlog::counted_head(sbytes, line, &p.rheaders)
        };
        if self.fe.options.logasap && self.scratch.0.txn.on {
            // HAProxy logs here, once the head is read and before the response rules, with
            // what the buffer holds as the byte count.
            let txn = &mut self.scratch.0.txn;
            let counted = txn.bytes_out;
            txn.server_status = Some(res.status);
            txn.bytes_out = received + (conn.sbuf.bytes().len() - res.len) as u64;
            // Logged, not over: the transaction's status is counted at its end.
            self.log_line(None);
            let txn = &mut self.scratch.0.txn;
            txn.bytes_out = counted;
            txn.logged = true;
        }
        let mut redited = false;
        if let Some(answer) = self.response_rules(&mut res, conn, &mut redited).await {
            // The client stays when it would have after the server's answer (the server
            // connection, its response unread, does not).
            // An empty reply (an empty errorfile) closes the client, as in HAProxy.
            let keep = req.conn.keep_alive
                && x.mode != HttpConnMode::Close
                && x.body_sent
                && !self.scratch.0.out.is_empty();
            return match answer {
                Ok(Outcome::KeepClient) if !keep => Ok(Outcome::CloseClient {
                    keep_server: false,
                    request_read: x.body_sent,
                }),
                other => other,
            };
        }
        let txn = &mut self.scratch.0.txn;
        (txn.status, txn.server_status) = (Some(res.status), Some(res.status));
        let parts = &mut self.scratch.0;
        let txn = &mut parts.txn;
        let out = &mut parts.out;
        let rheaders = &parts.rheaders;
        let client = &mut self.client;
        let sbytes = conn.sbuf.bytes();
        let hbuf: &[u8] = if redited { &parts.redited } else { sbytes };
        // A 2xx answer to CONNECT has no body: the connection becomes a tunnel (RFC 9110 §9.3.6).
        let tunnel = x.is_connect && (200..300).contains(&res.status);
        if tunnel {
            res.body = BodyKind::None;
        }
        let upgraded = res.status == 101 && req.conn.upgrade || tunnel;
        // A client that cannot read chunked (HTTP/1.0) gets the data alone: with a Content-Length
        // when the whole body came with the head, else delimited by the connection's close.
        let dechunk = res.body == BodyKind::Chunked && !req.takes_chunked && !x.drop_body;
        let whole = match dechunk {
            true => body::whole_chunked(&sbytes[res.len..]),
            false => None,
        };
        let client_keep = req.conn.keep_alive
            && x.mode != HttpConnMode::Close
            && res.body != BodyKind::UntilClose
            && !(dechunk && whole.is_none())
            && x.body_sent;
        let server_keep = res.conn.keep_alive && x.mode == HttpConnMode::KeepAlive && x.body_sent;

        out.clear();
        let hop = h1::HopByHop::new(hbuf, rheaders, &res.conn, upgraded);
        let start = res.start_line.clone();
        h1::copy_head(hbuf, start, rheaders, &res.fixes, out, |h| {
            !(hop.is(h) || dechunk && h.is(hbuf, "transfer-encoding"))
        });
        // As haproxy's HTTP/1 multiplexer says it, by the version of the response as forwarded
        // and the client's: `close` only where HTTP/1.1 would otherwise mean keep-alive (an
        // HTTP/1.0 response already means close), `keep-alive` where either side is HTTP/1.0.
        let connection: &[u8] = match () {
            _ if tunnel => b"",
            _ if upgraded => b"Connection: upgrade\r\n",
            _ if !client_keep && res.minor == 0 => b"",
            _ if !client_keep => b"Connection: close\r\n",
            _ if req.minor == 0 || res.minor == 0 => b"Connection: keep-alive\r\n",
            _ => b"",
        };
        out.extend_from_slice(connection);
        // Body bytes that came with the head go out in the same write.
        let mut body = res.body;
        let mut pre = 0;
        if let Some((len, used)) = whole {
            use std::io::Write;
            let _ = write!(out, "Content-Length: {len}\r\n\r\n");
            body::append_dechunked(&sbytes[res.len..res.len + used], out);
            pre = used;
            body = BodyKind::None;
        } else {
            out.extend_from_slice(b"\r\n");
        }
        if let (BodyKind::Length(n), false) = (body, x.drop_body) {
            pre = (n.min((sbytes.len() - res.len) as u64)) as usize;
            out.extend_from_slice(&sbytes[res.len..res.len + pre]);
            body = match n - pre as u64 {
                0 => BodyKind::None,
                left => BodyKind::Length(left),
            };
        }
        if !client_keep && !upgraded && body == BodyKind::None {
            // The whole response is in `out` and the connection ends after it: over TLS,
            // close_notify leaves with it.
            if let Some(tls) = client.as_tls() {
                tls.close_after_write();
            }
        }
        match self
            .timers
            .client
            .within(x.client_t, client.write_all(out))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(Failure::Close(*b"CD")),
            Err(Elapsed) => return Err(Failure::Close(*b"cD")),
        }
        // A chunked body counts its data and one byte for its end (see `body::send_body`).
        let data = whole.map_or(pre as u64, |(len, _)| len + 1);
        txn.bytes_out += received + data;
        conn.sbuf.consume(res.len + pre);

        if upgraded {
            // Bytes that arrived behind the heads belong to the tunnel.
            if !conn.sbuf.bytes().is_empty() && client.write_all(conn.sbuf.bytes()).await.is_err() {
                return Err(Failure::Close(*b"CD"));
            }
            let cbuf = self.cbuf.bytes();
            if !cbuf.is_empty() && conn.stream.write_all(cbuf).await.is_err() {
                return Err(Failure::Close(*b"SD"));
            }
            return Ok(Outcome::Upgraded);
        }

        // The response body, streamed to the client. An error here comes after the head went
        // out, so the client can only be disconnected.
        let timeouts = (x.server_t, x.client_t);
        let deadlines = (&mut self.timers.server, &mut self.timers.client);
        let sent = if x.drop_body {
            let mut dropped = 0;
            body::send_body(
                &mut conn.stream,
                &mut conn.sbuf,
                &mut body::Discard,
                body,
                timeouts,
                deadlines,
                forward::SpliceMode::Off,
                &mut dropped,
            )
            .await
        } else if dechunk && body != BodyKind::None {
            body::send_dechunked(
                &mut conn.stream,
                &mut conn.sbuf,
                client,
                out,
                timeouts,
                deadlines,
                &mut txn.bytes_out,
            )
            .await
        } else {
            let splice = x.splice.response;
            body::send_body(
                &mut conn.stream,
                &mut conn.sbuf,
                client,
                body,
                timeouts,
                deadlines,
                splice,
                &mut txn.bytes_out,
            )
            .await
        };
        sent.map_err(|e| Failure::Close(body_term(e, false)))?;

        // Bytes past the end of the response are a server error: never reuse that connection.
        let server_keep = server_keep && conn.sbuf.bytes().is_empty();
        Ok(match (client_keep, server_keep) {
            (true, true) => Outcome::KeepBoth,
            (true, false) => Outcome::KeepClient,
            (false, keep_server) => Outcome::CloseClient {
                keep_server,
                request_read: x.body_sent,
            },
        })
    }
}
