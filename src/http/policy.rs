//! Running a proxy's rule lists on a transaction: `tcp-request content`, `http-request`,
//! `redirect`, `use_backend`, `use-server`, `http-response` and `http-after-response`.
//!
//! The lists were compiled at load (`crate::rules`); here each rule's condition is evaluated
//! over [`Facts`] (a handful of references, built per rule because the previous action may
//! have edited the head it reads) and its action applied. Header and start-line edits go
//! through [`super::edit`], which keeps the head as offsets, so nothing is re-parsed. A rule
//! that answers (deny, return, redirect, auth, tarpit) writes the response into the session's
//! output buffer and says how the transaction ends; the session sends it.
//!
//! The steady path allocates nothing: values are rendered into the session's scratch vectors,
//! and an unedited head is read where it was received.

use std::cell::{OnceCell, RefCell};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::config::model::{
    BackendTarget, ErrorFile, HdrNames, PersistRule, UseBackend, UseServer,
};
use crate::net::lazy::LazyStream;
use crate::proto::h1::{self, HeaderIdx, RequestHead, ResponseHead};
use crate::rules::action::{
    CaptureSlot, HeaderAction, HttpAfterAction, HttpReqAction, HttpResAction, LogLevel, NameMatch,
    Redirect, RedirectKind, Reply, ReplyBody, Rule, TcpReqAction, TcpResAction, TimeValue,
    TimeoutKind, VarAction,
};
use crate::rules::lf::{LfString, LfVar};
use crate::rules::sample::to_bytes;
use crate::rules::stick::StickRule;
use crate::rules::vars::{Scopes, Vars};
use crate::rules::{Eval, Source, Value};
use crate::session::facts::{Addrs, Facts, ReqView, ResView, RuleList, RuleRef};
use crate::state::Shared;
use crate::stick::track::{Event, Level, Trackers};

use super::edit;
use super::txnlog::{Term, TxnLog};

/// The stream a rule list runs on: what does not belong to one message.
pub(super) struct Stream<'a> {
    pub shared: &'a Shared,
    pub frontend: usize,
    pub backend: Option<usize>,
    pub server: Option<usize>,
    /// The client address, as `set-src` may have changed it.
    /// `None`: a UNIX socket's client, which has no address.
    pub peer: Option<SocketAddr>,
    /// The id of the listener that accepted the client (`so_id`; 0 in a dry run).
    pub listener_id: u32,
    /// The client socket, asked for the local address when a rule reads `dst`; `None` with
    /// `local` given instead (`bascule --explain` has no socket).
    pub client: Option<&'a LazyStream>,
    pub local: Option<SocketAddr>,
    pub txn_vars: &'a RefCell<Vars>,
    pub sess_vars: &'a RefCell<Vars>,
    /// `set-timeout server|tunnel` for this transaction.
    pub timeouts: &'a mut Overrides,
    /// `bascule --explain`: told of every rule evaluated. `None` on the data path, where it
    /// costs one branch per rule.
    pub trace: Option<&'a dyn Trace>,
    /// The session's tracked stick-table entries, and the level a `track-sc` of the running
    /// list tracks at (`tcp-request connection|session`: the session's).
    pub stick: Option<&'a Trackers>,
    pub stick_level: Level,
    /// The TLS handshake of the server connection (`ssl_bc*` in response rules).
    pub server_tls: Option<&'a crate::net::tls::Handshake>,
    /// The TLS handshake of an HTTP/2 client's connection, which `client` (its end of the
    /// gateway's socket pair) does not have (`ssl_fc*`).
    pub client_tls: Option<&'a crate::net::tls::Handshake>,
    /// The PROXY protocol header the connection began with (`fc_pp_*`).
    pub proxied: Option<&'a crate::proto::proxy::Header>,
    /// The connection's own addresses (`fc_src`, `fc_dst`).
    pub fc: Addrs,
    /// Whether this is the connection's first request (`http_first_req`).
    pub first_req: bool,
}

/// What a dry run (`bascule --explain`, `super::explain`) learns from the executor: each rule
/// whose condition was evaluated, in order, with the facts it was evaluated on and before its
/// action runs. The effect of the action shows in the facts of the next call (edited head,
/// variables, source address) or in the list's verdict.
pub(super) trait Trace {
    fn rule(&self, rule: Evaluated<'_>, f: &Facts<'_>, ev: &mut Eval);
}

/// A rule as [`Trace::rule`] sees it.
pub(super) struct Evaluated<'r> {
    pub span: &'r crate::config::diag::Span,
    /// The line as written, its keyword included.
    pub text: &'r str,
    pub cond: Option<&'r crate::rules::Cond>,
    /// Whether the condition held (no condition: true).
    pub held: bool,
}

/// Per-transaction settings that rules change.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Overrides {
    pub server: Option<Duration>,
    pub tunnel: Option<Duration>,
    /// `set-log-level silent`.
    pub silent: bool,
}

/// A message head being evaluated and edited: read in `raw` until the first edit copies it
/// into `edited`.
pub(super) struct Head<'a> {
    pub raw: &'a [u8],
    pub edited: &'a mut Vec<u8>,
    pub is_edited: &'a mut bool,
    pub headers: &'a mut Vec<HeaderIdx>,
    /// The head's length in `raw`.
    pub len: usize,
}

impl Head<'_> {
    pub fn buf(&self) -> &[u8] {
        if *self.is_edited {
            self.edited
        } else {
            self.raw
        }
    }

    /// The edit buffer, the head copied into it first if this is the first edit.
    pub(super) fn edit(&mut self) -> (&mut Vec<u8>, &mut Vec<HeaderIdx>) {
        if !*self.is_edited {
            edit::begin(self.edited, self.raw, self.len);
            *self.is_edited = true;
        }
        (self.edited, self.headers)
    }
}

/// Scratch space for evaluations: the rules engine's buffers and two vectors for values.
pub(super) struct Work<'a> {
    pub ev: &'a mut Eval,
    pub val: &'a mut Vec<u8>,
    pub tmp: &'a mut Vec<u8>,
}

/// How a rule list ends for the transaction.
#[derive(Debug)]
pub(super) enum Verdict {
    /// The list ran out, or said `allow`/`accept`: go on.
    Continue,
    /// Answer with the response written to the output buffer, then keep the client (unless
    /// `close`); `delay`: `tarpit` holds the connection this long first.
    Answer {
        status: u16,
        term: Term,
        close: bool,
        delay: Option<Duration>,
    },
    /// Close without an answer (`reject`).
    Reject(Term),
    /// `wait-for-body`: buffer the message body (up to `at_least` bytes, at most `time`), then
    /// run the list again from rule `next`, with `strict-mode` as it was (`strict`: haproxy
    /// keeps it across the wait and resets it only when a list starts or ends).
    WaitBody {
        next: usize,
        strict: bool,
        time: Duration,
        at_least: Option<u64>,
    },
}

pub(super) fn facts<'a>(
    st: &'a Stream<'_>,
    req: Option<ReqView<'a>>,
    res: Option<ResView<'a>>,
    txn: &'a TxnLog,
    proc: &'a arc_swap::ArcSwap<Vars>,
) -> Facts<'a> {
    Facts {
        shared: st.shared,
        frontend: st.frontend,
        backend: st.backend,
        server: st.server,
        peer: st.peer,
        // (A rule that reads the unique id early renders it without the UNIX listener id.)
        unix_listener: None,
        listener_id: st.listener_id,
        client: st.client,
        sock: None,
        tls: st.client_tls,
        server_tls: st.server_tls,
        local: st
            .local
            .map_or_else(OnceCell::new, |a| OnceCell::from(Some(a))),
        payload: None,
        res_payload: None,
        req,
        res,
        captured: Some(&txn.captured),
        vars: Scopes {
            txn: st.txn_vars,
            sess: st.sess_vars,
            proc,
        },
        wait_over: true,
        kept: crate::session::facts::Kept {
            unique_id: Some(&txn.uid),
            last_rule: txn.last_rule.get(),
            first_req: Some(st.first_req),
            timeouts: (st.timeouts.server, st.timeouts.tunnel),
            request_line: (!txn.request.is_empty()).then_some(txn.request.as_slice()),
            // The method once the request head is gone (a response Bascule generated).
            method: (!txn.request.is_empty())
                .then(|| txn.request.split(|&c| c == b' ').next())
                .flatten(),
            ..Default::default()
        },
        stick: st.stick,
        proxied: st.proxied,
        fc: st.fc,
    }
}

pub(super) fn req_view<'a>(h: &'a Head<'_>, head: &'a RequestHead) -> ReqView<'a> {
    // The body bytes read with the head (all of them after `wait-for-body`); a chunked body
    // is not de-chunked here, so `req.body` does not see one.
    let body = match head.body {
        crate::proto::h1::BodyKind::Length(n) if h.raw.len() > h.len => {
            let end = (h.len as u64 + n).min(h.raw.len() as u64) as usize;
            Some(&h.raw[h.len..end])
        }
        _ => None,
    };
    ReqView {
        buf: h.buf(),
        head,
        headers: h.headers,
        received: h.raw.len(),
        body,
    }
}

/// The facts a request's rules read: the stream, and the request head as `req` holds it now.
#[inline]
pub(super) fn req_facts<'a>(
    st: &'a Stream<'_>,
    req: &'a Head<'_>,
    head: &'a RequestHead,
    txn: &'a TxnLog,
) -> Facts<'a> {
    facts(
        st,
        Some(req_view(req, head)),
        None,
        txn,
        &st.shared.proc_vars,
    )
}

/// Writes a runtime format variable (`%H`, `%pid`, `%ID`...).
fn lf_var<'a>(f: &'a Facts<'_>) -> impl Fn(LfVar, &mut Vec<u8>) + 'a {
    move |v, out| match v {
        LfVar::Hostname => out.extend_from_slice(crate::sys::hostname().as_bytes()),
        LfVar::Pid => {
            let _ = write!(out, "{}", std::process::id());
        }
        LfVar::UniqueId => {
            f.unique_id(out);
        }
        LfVar::ReqCounter => {
            let _ = write!(out, "{}", crate::log::next_request_id());
        }
        LfVar::Timestamp => {
            let _ = write!(out, "{}", crate::log::now_us() / 1_000_000);
        }
        LfVar::Millis => {
            let _ = write!(out, "{:03}", (crate::log::now_us() / 1000) % 1000);
        }
        LfVar::Date | LfVar::DateGmt | LfVar::DateLocal => {
            let now = crate::log::now_us();
            let (gmt, offset) = (v == LfVar::DateGmt, v == LfVar::DateLocal);
            crate::log::format::write_date(out, now, gmt, offset);
        }
    }
}

fn render(lf: &LfString, f: &Facts<'_>, ev: &mut Eval, out: &mut Vec<u8>) {
    out.clear();
    lf.render(f, ev, &lf_var(f), out);
}

/// Notes rule `index` of `rules` (a list `of` picks out of a proxy's rules) as the
/// transaction's last final rule (`last_rule_file`, `last_rule_line`): the frontend's when the
/// list is the frontend's, else the backend's.
fn note_final<A>(
    st: &Stream<'_>,
    txn: &TxnLog,
    list: RuleList,
    rules: &[Rule<A>],
    index: usize,
    of: fn(&crate::config::model::ProxyRules) -> &[Rule<A>],
) {
    let fe = &st.shared.frontends[st.frontend].config.rules;
    let backend = if std::ptr::eq(of(fe).as_ptr(), rules.as_ptr()) {
        None
    } else {
        st.backend
    };
    txn.last_rule.set(Some(RuleRef {
        backend,
        list,
        index,
    }));
}

/// Evaluates a rule's condition (no condition: true), telling `trace` if there is one.
pub(super) fn applies<A>(
    rule: &Rule<A>,
    f: &Facts<'_>,
    ev: &mut Eval,
    trace: Option<&dyn Trace>,
) -> bool {
    let held = rule.cond.as_ref().is_none_or(|c| c.eval(f, ev));
    if let Some(t) = trace {
        let (span, text, cond) = (&rule.span, &*rule.text, rule.cond.as_ref());
        t.rule(
            Evaluated {
                span,
                text,
                cond,
                held,
            },
            f,
            ev,
        );
    }
    held
}

/// A request refused by `http-request deny`, `tarpit`, `reject` or `option
/// http-restrict-req-hdr-names reject` counts in the frontend's `dreq` (HAProxy's
/// `denied_req`; an `auth` challenge does not), and in its backend's once one was chosen (a
/// backend's own rules refused it), as HAProxy 2.6 counts it.
pub(super) fn count_dreq(st: &Stream<'_>) {
    count_fe_dreq(st);
    if let Some(b) = st.backend {
        crate::state::Denied::count(&st.shared.backends[b].denied_req);
    }
}

/// A response refused by `http-response deny` or `tcp-response content reject` counts in the
/// frontend's, the backend's and the server's `dresp` (HAProxy's `denied_resp`).
fn count_dresp(st: &Stream<'_>) {
    crate::state::Denied::count(&st.shared.frontends[st.frontend].denied.resp);
    if let Some(b) = st.backend {
        st.shared.backends[b].count_denied_resp(st.server);
    }
}

/// A request the frontend's own rules answered (`http-request redirect|return`, `redirect`,
/// its statistics page) before a backend was chosen, or a `listen` section's: counted in
/// `intercepted` (HAProxy's `intercepted_req`, counted when the stream's backend is still its
/// frontend).
pub(super) fn count_intercepted(st: &Stream<'_>) {
    let own = st.shared.listen_backend(st.frontend);
    if st.backend.is_none() || st.backend == own {
        crate::state::Denied::count(&st.shared.frontends[st.frontend].counters.intercepted);
    }
}

/// A header or start-line rewrite that failed for want of room in the buffer (`tune.maxrewrite`),
/// whether `strict-mode` then refuses the message or not: counted in `wrew` (HAProxy's
/// `failed_rewrites`) of the frontend, of the backend when one was chosen (a `listen`
/// section's counts once, as its frontend) and of the server when there is one.
fn count_wrew(st: &Stream<'_>) {
    let shared = st.shared;
    crate::state::Denied::count(&shared.frontends[st.frontend].counters.failed_rewrites);
    let Some(b) = st
        .backend
        .filter(|b| shared.listen_backend(st.frontend) != Some(*b))
    else {
        return;
    };
    let be = &shared.backends[b];
    crate::state::Denied::count(&be.failed_rewrites);
    if let Some(srv) = st.server.and_then(|s| be.servers.get(s)) {
        crate::state::Denied::count(&srv.failed_rewrites);
    }
}

/// A request refused by a `tcp-request content reject` counts in the frontend's `dreq` only,
/// whichever proxy's rule refused it (HAProxy's `tcp_inspect_request`).
pub(super) fn count_fe_dreq(st: &Stream<'_>) {
    crate::state::Denied::count(&st.shared.frontends[st.frontend].denied.req);
}

/// A request denied by `http-request deny`, `tarpit` or `auth` counts as an HTTP error on the
/// tracked entries (HAProxy 2.6 does; `return` with a 4xx status does not).
fn count_denied(st: &Stream<'_>) {
    if let Some(tr) = st.stick {
        tr.count(
            &st.shared.tables,
            Event::HttpErr,
            crate::base::clock::uptime_ms(),
        );
    }
}

/// `option http-restrict-req-hdr-names delete|reject` of a proxy, after its `http-request`
/// rules as in HAProxy: a header whose name has a character other than a letter, a digit or
/// `-` is removed, or the request is denied (403, counted and logged as `deny`).
#[allow(clippy::too_many_arguments)]
pub(super) fn restrict_hdr_names(
    mode: HdrNames,
    st: &Stream<'_>,
    req: &mut Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
    errorfiles: &[&[ErrorFile]],
) -> Verdict {
    fn restricted(name: &[u8]) -> bool {
        name.iter()
            .any(|&c| !c.is_ascii_alphanumeric() && c != b'-')
    }
    let first = {
        let buf = req.buf();
        req.headers.iter().position(|h| restricted(h.name(buf)))
    };
    let Some(first) = first else {
        return Verdict::Continue;
    };
    match mode {
        HdrNames::Preserve => Verdict::Continue,
        HdrNames::Delete => {
            let (buf, headers) = req.edit();
            edit::delete_from(buf, headers, first, |n, _| restricted(n));
            Verdict::Continue
        }
        HdrNames::Reject => {
            let f = req_facts(st, req, head, txn);
            write_reply(&Reply::status(403), true, &f, w, out, errorfiles);
            count_denied(st);
            count_dreq(st);
            answer(403, *b"PR", false)
        }
    }
}

/// What a `set-src|set-dst` (an address, the port kept) or `set-src-port|set-dst-port` (a
/// port, the address kept) action gives.
#[derive(Clone, Copy)]
enum AddrPart {
    Ip(IpAddr),
    Port(u16),
}

/// Gives the stream's client address (`src`) or the address it connected to (`dst`, now
/// `dst_now`) the part an action computed. A UNIX socket's client has no port to change, as
/// in HAProxy.
fn set_address(st: &mut Stream<'_>, src: bool, new: Option<AddrPart>, dst_now: Option<SocketAddr>) {
    let Some(new) = new else { return };
    let old = if src { st.peer } else { dst_now };
    let changed = match (new, old) {
        (AddrPart::Ip(ip), old) => Some(SocketAddr::new(ip, old.map_or(0, |a| a.port()))),
        (AddrPart::Port(p), Some(mut a)) => {
            a.set_port(p);
            Some(a)
        }
        (AddrPart::Port(_), None) => None,
    };
    match (changed, src) {
        (Some(a), true) => st.peer = Some(a),
        (Some(a), false) => st.local = Some(a),
        (None, _) => {}
    }
}

/// Runs `http-request` rules from rule `from` on the request, with the rules engine's memo on
/// (`rules::memo`: an expression several rules evaluate is evaluated once while nothing it
/// reads changes).
#[allow(clippy::too_many_arguments)]
pub(super) fn http_request(
    rules: &[Rule<HttpReqAction>],
    from: usize,
    strict_from: bool,
    st: &mut Stream<'_>,
    req: &mut Head<'_>,
    head: &mut RequestHead,
    txn: &mut TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
    hints: &mut Vec<u8>,
    errorfiles: &[&[ErrorFile]],
    realm: &str,
) -> Verdict {
    w.ev.memo.start();
    let v = http_request_list(
        rules,
        from,
        strict_from,
        st,
        req,
        head,
        txn,
        w,
        out,
        hints,
        errorfiles,
        realm,
    );
    w.ev.memo.stop();
    v
}

/// Whether an `http-request` action leaves every memoized value as it was: it changes no
/// head, no address, nothing a memoizable expression reads.
fn keeps_memo(a: &HttpReqAction) -> bool {
    use HttpReqAction as A;
    matches!(
        a,
        A::Var(_) | A::Capture { .. } | A::SetLogLevel(_) | A::StrictMode(_)
    )
}

#[allow(clippy::too_many_arguments)]
fn http_request_list(
    rules: &[Rule<HttpReqAction>],
    from: usize,
    strict_from: bool,
    st: &mut Stream<'_>,
    req: &mut Head<'_>,
    head: &mut RequestHead,
    txn: &mut TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
    hints: &mut Vec<u8>,
    errorfiles: &[&[ErrorFile]],
    realm: &str,
) -> Verdict {
    // `strict-mode`: on at the start of each list (haproxy resets it per rule set), as it was
    // when the list resumes after `wait-for-body`.
    let mut strict = strict_from;
    // The previous action may have changed what memoized values were computed from: the memo
    // is emptied before the next rule (the action itself still read it, before its edit).
    let mut dirty = false;
    // The facts are built again only after an action that changed what they borrow (the head,
    // the stream): such an action ends with `continue 'facts`.
    let mut next = from;
    'facts: while next < rules.len() {
        let f = req_facts(st, req, head, txn);
        while next < rules.len() {
            let (i, rule) = (next, &rules[next]);
            next += 1;
            if dirty {
                w.ev.memo.clear();
                dirty = false;
            }
            if !applies(rule, &f, w.ev, st.trace) {
                continue;
            }
            dirty = !keeps_memo(&rule.action);
            use HttpReqAction as A;
            let last = matches!(
                rule.action,
                A::Allow
                    | A::Deny(_)
                    | A::Tarpit(_)
                    | A::Reject
                    | A::Auth { .. }
                    | A::Redirect(_)
                    | A::Return(_)
            );
            if last {
                note_final(st, txn, RuleList::HttpRequest, rules, i, |r| {
                    &r.http_request
                });
            }
            match &rule.action {
                HttpReqAction::Allow => return Verdict::Continue,
                HttpReqAction::Deny(reply) => {
                    let builtin = write_reply(reply, true, &f, w, out, errorfiles);
                    count_denied(st);
                    count_dreq(st);
                    // HAProxy's own 400 and 408 pages say `Connection: close`, and it closes.
                    let close = builtin && matches!(reply.status, 400 | 408);
                    return answer(reply.status, *b"PR", close);
                }
                HttpReqAction::Tarpit(reply) => {
                    write_reply(reply, true, &f, w, out, errorfiles);
                    count_denied(st);
                    count_dreq(st);
                    let be = st.backend.map(|b| &st.shared.backends[b].config);
                    let fe = &st.shared.frontends[st.frontend].config;
                    let t = be
                        .and_then(|b| b.timeouts.tarpit.or(b.timeouts.connect))
                        .or(fe.timeouts.tarpit)
                        .or(fe.timeouts.connect)
                        .unwrap_or(Duration::ZERO);
                    // The connection stays open after the answer, as HAProxy 2.6 keeps it.
                    return Verdict::Answer {
                        status: reply.status,
                        term: *b"PT",
                        close: false,
                        delay: Some(t),
                    };
                }
                HttpReqAction::Reject => {
                    count_dreq(st);
                    return Verdict::Reject(*b"PR");
                }
                HttpReqAction::TrackSc(t) => {
                    if let Some(tr) = st.stick {
                        crate::session::stick::track(t, &f, tr, Level::Stream, w.ev, true, None);
                    }
                }
                HttpReqAction::Sc(a) => crate::rules::stick::run_sc(a, &f, w.ev),
                HttpReqAction::Auth { realm: r } => {
                    let realm = r.as_deref().unwrap_or(realm);
                    count_denied(st);
                    page(401, out, false);
                    insert_header(out, b"www-authenticate", |v| {
                        let _ = write!(v, "Basic realm=\"{realm}\"");
                    });
                    // HAProxy keeps the connection (the client retries with credentials).
                    return answer(401, *b"LR", false);
                }
                HttpReqAction::Redirect(r) => {
                    if let Some(v) = redirect(r, &f, Some(req_view(req, head)), w, out) {
                        count_intercepted(st);
                        return v;
                    }
                }
                HttpReqAction::Return(reply) => {
                    count_intercepted(st);
                    write_reply(reply, false, &f, w, out, errorfiles);
                    return answer(reply.status, *b"LR", false);
                }
                HttpReqAction::StrictMode(on) => strict = *on,
                HttpReqAction::Header(h) => {
                    plan_header(h, &f, w);
                    if !rewrite_header(h, req, head.start_line.len(), st, w) && strict {
                        return rewrite_failed(out, errorfiles, *b"PR");
                    }
                    continue 'facts;
                }
                HttpReqAction::SetPath(_)
                | HttpReqAction::SetPathQ(_)
                | HttpReqAction::SetQuery(_)
                | HttpReqAction::SetUri(_)
                | HttpReqAction::SetMethod(_)
                | HttpReqAction::ReplacePath { .. }
                | HttpReqAction::ReplacePathQ { .. }
                | HttpReqAction::ReplaceUri { .. }
                | HttpReqAction::NormalizeUri(_) => {
                    if !new_request_line(&rule.action, req.buf(), head, &f, w) {
                        continue;
                    }
                    if !request_line_fits(st, req, head, w) {
                        if strict {
                            return rewrite_failed(out, errorfiles, *b"PR");
                        }
                        continue;
                    }
                    let (buf, _) = req.edit();
                    edit::set_request_line(buf, head, w.val, w.tmp);
                    continue 'facts;
                }
                HttpReqAction::Var(v) => var_action(v, &f, w),
                HttpReqAction::Capture { expr, slot } => {
                    let k = match slot {
                        CaptureSlot::Id(k) | CaptureSlot::New { len: k } => *k,
                    };
                    let len = capture_len(st, k);
                    if captured(expr, &f, w) {
                        txn.captured.set(false, k, w.val, len);
                        continue 'facts;
                    }
                }
                HttpReqAction::SetLogLevel(l) => {
                    st.timeouts.silent = *l == LogLevel::Silent;
                    continue 'facts;
                }
                HttpReqAction::EarlyHint { name, value } => {
                    render(value, &f, w.ev, w.val);
                    if hints.is_empty() || hints.ends_with(b"\r\n\r\n") {
                        hints.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\n");
                    }
                    hints.extend_from_slice(name.as_bytes());
                    hints.extend_from_slice(b": ");
                    hints.extend_from_slice(w.val);
                    hints.extend_from_slice(b"\r\n");
                    // As in HAProxy, a run of unconditional `early-hint` rules makes one 103;
                    // the response ends at the last rule of the run (or before a conditional one).
                    let next = rules.get(i + 1);
                    let more = next.is_some_and(|n| {
                        matches!(n.action, HttpReqAction::EarlyHint { .. }) && n.cond.is_none()
                    });
                    if !more {
                        hints.extend_from_slice(b"\r\n");
                    }
                }
                HttpReqAction::SetTimeout { which, value } => {
                    let t = match value {
                        TimeValue::Fixed(d) => Some(*d),
                        TimeValue::Expr(e) => e
                            .eval(&f, w.ev)
                            .and_then(|s| crate::rules::sample::to_int(s, w.ev))
                            .filter(|&ms| ms > 0)
                            .map(|ms| Duration::from_millis(ms as u64)),
                    };
                    if let Some(t) = t {
                        match which {
                            TimeoutKind::Server => st.timeouts.server = Some(t),
                            TimeoutKind::Tunnel => st.timeouts.tunnel = Some(t),
                        }
                        continue 'facts;
                    }
                }
                HttpReqAction::SetSrc(e) | HttpReqAction::SetDst(e) => {
                    let ip = e
                        .eval(&f, w.ev)
                        .and_then(|s| crate::rules::sample::to_ip(s, w.ev));
                    let (src, dst) = (matches!(rule.action, HttpReqAction::SetSrc(_)), f.dst());
                    set_address(st, src, ip.map(AddrPart::Ip), dst);
                    continue 'facts;
                }
                HttpReqAction::SetSrcPort(e) | HttpReqAction::SetDstPort(e) => {
                    let port = e
                        .eval(&f, w.ev)
                        .and_then(|s| crate::rules::sample::to_int(s, w.ev));
                    let (src, dst) = (matches!(rule.action, HttpReqAction::SetSrcPort(_)), f.dst());
                    set_address(st, src, port.map(|p| AddrPart::Port(p as u16)), dst);
                    continue 'facts;
                }
                HttpReqAction::WaitForBody { time, at_least } => {
                    return Verdict::WaitBody {
                        next: i + 1,
                        strict,
                        time: *time,
                        at_least: *at_least,
                    };
                }
            }
        }
    }
    Verdict::Continue
}

fn answer(status: u16, term: Term, close: bool) -> Verdict {
    Verdict::Answer {
        status,
        term,
        close,
        delay: None,
    }
}

/// The length of request capture slot `k` (the frontend's list holds every slot, those that
/// rules added included).
fn capture_len(st: &Stream<'_>, k: usize) -> usize {
    let fe = &st.shared.frontends[st.frontend];
    fe.log.req_captures.get(k).map_or(0, |(_, len)| *len)
}

/// The path of a request target (absolute-form: after the authority) and what follows it.
fn path_of(target: &[u8]) -> (&[u8], &[u8]) {
    // Only a target that does not start with `/` has a scheme and authority (a `://` in an
    // origin-form target's query is not one).
    let absolute = !target.starts_with(b"/");
    let scheme_end = target
        .windows(3)
        .position(|w| w == b"://")
        .filter(|_| absolute);
    let start = match scheme_end {
        Some(p) => {
            let rest = &target[p + 3..];
            p + 3 + rest.iter().position(|&c| c == b'/').unwrap_or(rest.len())
        }
        None => 0,
    };
    let t = &target[start..];
    let end = t
        .iter()
        .position(|&c| c == b'?' || c == b'#')
        .unwrap_or(t.len());
    (&target[start..start + end], &target[start + end..])
}

/// The new target for `set-path`, `set-pathq`, `set-query` or `set-uri` with value `v`.
fn rewrite_target(action: &HttpReqAction, target: &[u8], v: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (path, rest) = path_of(target);
    let before = &target[..target.len() - path.len() - rest.len()];
    match action {
        HttpReqAction::SetPath(_) => {
            out.extend_from_slice(before);
            out.extend_from_slice(v);
            out.extend_from_slice(rest);
        }
        HttpReqAction::SetPathQ(_) => {
            out.extend_from_slice(before);
            out.extend_from_slice(v);
            if let Some(p) = rest.iter().position(|&c| c == b'#') {
                out.extend_from_slice(&rest[p..]);
            }
        }
        HttpReqAction::SetQuery(_) => {
            out.extend_from_slice(before);
            out.extend_from_slice(path);
            let frag = rest.iter().position(|&c| c == b'#').map(|p| &rest[p..]);
            if !v.is_empty() {
                out.push(b'?');
                out.extend_from_slice(v);
            }
            if let Some(frag) = frag {
                out.extend_from_slice(frag);
            }
        }
        _ => out.extend_from_slice(v),
    }
}

/// Whether one of the frontend's `monitor fail if|unless COND` lines holds for a
/// `monitor-uri` request.
pub(super) fn monitor_fails(
    rules: &[Rule<()>],
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
) -> bool {
    if rules.is_empty() {
        return false;
    }
    let f = req_facts(st, req, head, txn);
    rules.iter().any(|r| applies(r, &f, w.ev, st.trace))
}

/// Evaluates `balance hash`'s expression on the request into `w.val`, as binary (what HAProxy
/// hashes: strings whole, integers and addresses in network order); false when it yields
/// nothing.
pub(super) fn balance_sample(
    expr: &crate::rules::Expr,
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
) -> bool {
    let f = req_facts(st, req, head, txn);
    let Some(b) = expr
        .eval(&f, w.ev)
        .and_then(|s| crate::rules::sample::to_bin(s, w.ev))
    else {
        return false;
    };
    w.val.clear();
    w.val.extend_from_slice(w.ev.get(b));
    true
}

/// Evaluates a capture's expression into `w.val`; false when it yields nothing.
fn captured(expr: &crate::rules::Expr, f: &Facts<'_>, w: &mut Work<'_>) -> bool {
    let Some(b) = expr.eval(f, w.ev).and_then(|s| to_bytes(s, w.ev)) else {
        return false;
    };
    w.val.clear();
    w.val.extend_from_slice(w.ev.get(b));
    true
}

/// Writes `fmt` with `\0`..`\9` replaced by the groups of the regex that matched `hay`.
fn expand(fmt: &[u8], hay: &[u8], caps: &regex::bytes::CaptureLocations, out: &mut Vec<u8>) {
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] == b'\\' && i + 1 < fmt.len() && fmt[i + 1].is_ascii_digit() {
            let g = (fmt[i + 1] - b'0') as usize;
            if let Some((a, b)) = caps.get(g) {
                out.extend_from_slice(&hay[a..b]);
            }
            i += 2;
            continue;
        }
        out.push(fmt[i]);
        i += 1;
    }
}

/// Renders what a header action writes (the value, the replacement) into `Work::val`, while
/// the facts are borrowed.
fn plan_header(h: &HeaderAction, f: &Facts<'_>, w: &mut Work<'_>) {
    match h {
        HeaderAction::Set { value, .. } | HeaderAction::Add { value, .. } => {
            render(value, f, w.ev, w.val);
        }
        HeaderAction::Replace { replace, .. } | HeaderAction::ReplaceValue { replace, .. } => {
            render(replace, f, w.ev, w.val);
        }
        HeaderAction::Del { .. } => {}
    }
}

/// Whether header name `name` matches a `del-header -m` pattern, ignoring case (the
/// patterns of `beg`, `end` and `sub` are lower-case since load time). Nothing is allocated.
fn name_matches(m: &NameMatch, name: &[u8]) -> bool {
    match m {
        NameMatch::Exact(n) => name.eq_ignore_ascii_case(n.as_bytes()),
        NameMatch::Prefix(p) => name
            .get(..p.len())
            .is_some_and(|n| n.eq_ignore_ascii_case(p.as_bytes())),
        NameMatch::Suffix(p) => name
            .len()
            .checked_sub(p.len())
            .is_some_and(|at| name[at..].eq_ignore_ascii_case(p.as_bytes())),
        NameMatch::Substring(p) => {
            p.is_empty()
                || name
                    .windows(p.len())
                    .any(|w| w.eq_ignore_ascii_case(p.as_bytes()))
        }
        NameMatch::Regex(r) => r.is_match(name),
    }
}

/// Room for a rewrite, as haproxy 2.6 has it. haproxy keeps a message (its head and the body
/// bytes received with it) in one buffer of `tune.bufsize` bytes and stops receiving
/// `tune.maxrewrite` bytes short of its end, so that rules can grow the head; a rewrite that
/// does not fit fails (a "failed rewrite": a 500 in strict mode, skipped otherwise, see
/// `strict-mode`). Bascule holds the head apart from the body but counts the same way: the
/// body bytes that came with the head (at most what haproxy would have received) plus the
/// head as the rewrite leaves it must fit in `tune.bufsize`.
#[derive(Clone, Copy)]
pub(super) struct Room<'g> {
    pub global: &'g crate::config::model::Global,
    /// The start line's length, line ending included.
    pub start_line: usize,
}

impl Room<'_> {
    /// Whether a rewrite fits that appends at most `appended` bytes to the edit buffer and
    /// changes the head's size by `delta` (computed only when the cheap bound is not enough).
    fn fits(
        self,
        msg: &Head<'_>,
        appended: usize,
        delta: impl FnOnce(&[u8], &[HeaderIdx]) -> isize,
    ) -> bool {
        let bufsize = self.global.tune_bufsize;
        let recv_max = bufsize.saturating_sub(self.global.tune_maxrewrite);
        let body = msg.raw.len().min(recv_max).saturating_sub(msg.len);
        let limit = bufsize.saturating_sub(body);
        // The edit buffer holds every live line once (and dead ones): a bound of the head.
        let upper = if *msg.is_edited {
            msg.edited.len()
        } else {
            msg.len
        };
        if upper + appended <= limit {
            return true;
        }
        let buf = msg.buf();
        let lines: usize = msg
            .headers
            .iter()
            .map(|h| (h.line.1 - h.line.0) as usize)
            .sum();
        let now = (self.start_line + lines + 2) as isize;
        now + delta(buf, msg.headers) <= limit as isize
    }
}

/// Applies a header rewrite; false when it failed for lack of room (`room`: checked, as in
/// `http-request` and `http-response`; `None`: never fails).
fn apply_header(
    h: &HeaderAction,
    msg: &mut Head<'_>,
    w: &mut Work<'_>,
    room: Option<Room<'_>>,
) -> bool {
    let line_len = |name: &[u8], value: &[u8]| name.len() + value.len() + 4;
    match h {
        HeaderAction::Set { name, .. } => {
            let (n, v) = (name.as_bytes(), &w.val[..]);
            let add = line_len(n, v);
            let ok = room.is_none_or(|r| {
                r.fits(msg, add, |buf, headers| {
                    let gone: usize = headers
                        .iter()
                        .filter(|h| h.name(buf).eq_ignore_ascii_case(n))
                        .map(|h| (h.line.1 - h.line.0) as usize)
                        .sum();
                    add as isize - gone as isize
                })
            });
            if !ok {
                return false;
            }
            let (buf, headers) = msg.edit();
            edit::set(buf, headers, n, v);
        }
        HeaderAction::Add { name, .. } => {
            let add = line_len(name.as_bytes(), w.val);
            if !room.is_none_or(|r| r.fits(msg, add, |_, _| add as isize)) {
                return false;
            }
            let (buf, headers) = msg.edit();
            edit::add(buf, headers, name.as_bytes(), w.val);
        }
        HeaderAction::Del { name } => {
            // An exact name is looked for by length first, without reading the buffer.
            let first = {
                let buf = msg.buf();
                match name {
                    NameMatch::Exact(n) => msg
                        .headers
                        .iter()
                        .position(|h| h.name_len() == n.len() && h.is(buf, n)),
                    _ => msg
                        .headers
                        .iter()
                        .position(|h| name_matches(name, h.name(buf))),
                }
            };
            if let Some(first) = first {
                let (buf, headers) = msg.edit();
                edit::delete_from(buf, headers, first, |n, _| name_matches(name, n));
            }
        }
        HeaderAction::Replace { name, regex, .. }
        | HeaderAction::ReplaceValue { name, regex, .. } => {
            let per_value = matches!(h, HeaderAction::ReplaceValue { .. });
            for i in 0..msg.headers.len() {
                let buf = msg.buf();
                let hd = msg.headers[i];
                if !hd.is(buf, name) {
                    continue;
                }
                let value = hd.value(buf);
                w.tmp.clear();
                let mut changed = false;
                if per_value {
                    // Each value is replaced where it stands: the separators and the spaces
                    // around the values stay as they were (as HAProxy does).
                    for (k, item) in value.split(|&c| c == b',').enumerate() {
                        if k > 0 {
                            w.tmp.push(b',');
                        }
                        let trimmed = item.trim_ascii();
                        let lead = item.len() - item.trim_ascii_start().len();
                        w.tmp.extend_from_slice(&item[..lead]);
                        match w.ev.captures(regex, trimmed) {
                            Some(caps) => {
                                expand(w.val, trimmed, caps, w.tmp);
                                changed = true;
                            }
                            None => w.tmp.extend_from_slice(trimmed),
                        }
                        w.tmp.extend_from_slice(&item[lead + trimmed.len()..]);
                    }
                } else if let Some(caps) = w.ev.captures(regex, value) {
                    expand(w.val, value, caps, w.tmp);
                    changed = true;
                }
                if changed {
                    // As haproxy: the values replaced so far stay, the rest is left alone.
                    let (old, new) = (value.len(), w.tmp.len());
                    let add = line_len(hd.name(buf), w.tmp);
                    if !room.is_none_or(|r| r.fits(msg, add, |_, _| new as isize - old as isize)) {
                        return false;
                    }
                    let new = std::mem::take(w.tmp);
                    let (buf, headers) = msg.edit();
                    edit::set_value(buf, headers, i, &new);
                    *w.tmp = new;
                }
            }
        }
    }
    true
}

/// The request line `method target HTTP/1.x` would fit (`set-path`, `replace-uri`...).
/// The request line a request-line action makes, the method in `w.val` and the target in
/// `w.tmp` (the old ones point into the buffer about to be edited). False: the action leaves
/// the line as it is (a `replace-*` regex that does not match, `normalize-uri` changing
/// nothing).
fn new_request_line(
    action: &HttpReqAction,
    buf: &[u8],
    head: &RequestHead,
    f: &Facts<'_>,
    w: &mut Work<'_>,
) -> bool {
    let target = &buf[head.target.clone()];
    match action {
        HttpReqAction::SetMethod(lf) => {
            render(lf, f, w.ev, w.val);
            w.tmp.clear();
            w.tmp.extend_from_slice(target);
            return true;
        }
        HttpReqAction::SetPath(lf)
        | HttpReqAction::SetPathQ(lf)
        | HttpReqAction::SetQuery(lf)
        | HttpReqAction::SetUri(lf) => {
            render(lf, f, w.ev, w.val);
            rewrite_target(action, target, w.val, w.tmp);
        }
        HttpReqAction::ReplacePath { regex, replace }
        | HttpReqAction::ReplacePathQ { regex, replace }
        | HttpReqAction::ReplaceUri { regex, replace } => {
            render(replace, f, w.ev, w.val);
            // The part the regex sees, as a range of the target: an absolute-form target keeps
            // its scheme and authority in front of the path.
            let (path, rest) = path_of(target);
            let path_start = target.len() - path.len() - rest.len();
            let (start, end) = match action {
                HttpReqAction::ReplacePath { .. } => (path_start, path_start + path.len()),
                HttpReqAction::ReplacePathQ { .. } => (
                    path_start,
                    target
                        .iter()
                        .position(|&c| c == b'#')
                        .unwrap_or(target.len()),
                ),
                _ => (0, target.len()),
            };
            let part = &target[start..end];
            let Some(caps) = w.ev.captures(regex, part) else {
                return false;
            };
            w.tmp.clear();
            w.tmp.extend_from_slice(&target[..start]);
            expand(w.val, part, caps, w.tmp);
            w.tmp.extend_from_slice(&target[end..]);
        }
        HttpReqAction::NormalizeUri(n) => {
            if !super::normalize::apply(*n, target, w.tmp) || w.tmp[..] == *target {
                return false;
            }
        }
        _ => return false,
    }
    w.val.clear();
    w.val.extend_from_slice(head.method(buf));
    true
}

/// Applies a planned header action to a message whose start line is `start_line` bytes long,
/// within the buffer's room. False, the rewrite counted as failed (`wrew`), when it did not
/// fit.
fn rewrite_header(
    h: &HeaderAction,
    msg: &mut Head<'_>,
    start_line: usize,
    st: &Stream<'_>,
    w: &mut Work<'_>,
) -> bool {
    let room = Room {
        global: &st.shared.global,
        start_line,
    };
    if apply_header(h, msg, w, Some(room)) {
        return true;
    }
    count_wrew(st);
    false
}

/// Whether the request line made of `w.val` (the method) and `w.tmp` (the target) fits the
/// buffer's room in place of the head's (`set-path`, `replace-uri`, `normalize-uri`...); when
/// it does not, the rewrite is counted as failed (`wrew`).
fn request_line_fits(st: &Stream<'_>, msg: &Head<'_>, head: &RequestHead, w: &Work<'_>) -> bool {
    let room = Room {
        global: &st.shared.global,
        start_line: head.start_line.len(),
    };
    let new = w.val.len() + w.tmp.len() + 12;
    let fits = room.fits(msg, new, |_, _| {
        new as isize - head.start_line.len() as isize
    });
    if !fits {
        count_wrew(st);
    }
    fits
}

/// A failed rewrite in strict mode: haproxy's internal error, a 500 (the proxy's errorfile
/// if it has one) and the connection closed; `term` says where (`PR` for a request rule,
/// `PH` for a response rule).
pub(super) fn rewrite_failed(
    out: &mut Vec<u8>,
    errorfiles: &[&[ErrorFile]],
    term: Term,
) -> Verdict {
    out.clear();
    match errorfiles
        .iter()
        .flat_map(|e| e.iter())
        .find(|e| e.status == 500)
    {
        Some(e) => out.extend_from_slice(&e.response),
        None => h1::error_page(500, true, out),
    }
    answer(500, term, true)
}

fn var_action(v: &VarAction, f: &Facts<'_>, w: &mut Work<'_>) {
    match v {
        VarAction::Set { var, expr } => {
            if let Some(s) = expr.eval(f, w.ev) {
                let val = w.ev.value(s);
                f.set_var_if(var.scope, var.id, val, var.cond);
            }
        }
        VarAction::SetFmt { var, fmt } => {
            render(fmt, f, w.ev, w.val);
            f.set_var_if(var.scope, var.id, Value::Str(w.val), var.cond);
        }
        VarAction::Unset { var } => f.vars.unset(var.scope, var.id),
    }
}

/// Writes the built-in page for `status` (HAProxy's texts) to `out`, with `connection: close`
/// when the connection closes after it.
pub(super) fn page(status: u16, out: &mut Vec<u8>, close: bool) {
    out.clear();
    h1::error_page(status, close, out);
}

/// Inserts a header line at the end of the head in `out` (before its empty line).
pub(super) fn insert_header(out: &mut Vec<u8>, name: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
    let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
        return;
    };
    // Appended, then rotated into place: no second buffer.
    let (at, before) = (end + 2, out.len());
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    value(out);
    out.extend_from_slice(b"\r\n");
    let added = out.len() - before;
    out[at..].rotate_right(added);
}

/// Writes the `http-error` page `reply` to `out`, its log-format strings rendered on the
/// stream (`req`: the request head, when still known).
pub(super) fn write_error_reply(
    reply: &Reply,
    st: &Stream<'_>,
    req: Option<ReqView<'_>>,
    txn: &TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
) {
    let f = facts(st, req, None, txn, &st.shared.proc_vars);
    write_reply(reply, false, &f, w, out, &[]);
}

/// Writes `reply` to `out`. `page_default`: a reply with nothing but a status is the error
/// page for it (`deny`, `tarpit`: the proxy's `errorfile`, else the built-in one), where a
/// bare `return` sends an empty body. Returns whether that was the built-in page.
fn write_reply(
    reply: &Reply,
    page_default: bool,
    f: &Facts<'_>,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
    errorfiles: &[&[ErrorFile]],
) -> bool {
    out.clear();
    if page_default && reply.is_default() || matches!(reply.body, ReplyBody::ErrorPage) {
        let custom = errorfiles
            .iter()
            .flat_map(|e| e.iter())
            .find(|e| e.status == reply.status);
        match custom {
            // An `http-error` page with log-format strings, rendered here.
            Some(ErrorFile { reply: Some(r), .. }) => {
                write_reply(r, false, f, w, out, &[]);
            }
            Some(e) => out.extend_from_slice(&e.response),
            None => {
                h1::error_page(reply.status, false, out);
                return true;
            }
        }
        return false;
    }
    if let ReplyBody::Raw(raw) = &reply.body {
        out.extend_from_slice(raw);
        return false;
    }
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\n",
        reply.status,
        h1::reason(reply.status)
    );
    for (name, value) in &reply.headers {
        render(value, f, w.ev, w.val);
        // HAProxy leaves out a reply header whose value is empty.
        if w.val.is_empty() {
            continue;
        }
        out.extend(name.bytes().map(|c| c.to_ascii_lowercase()));
        out.extend_from_slice(b": ");
        out.extend_from_slice(w.val);
        out.extend_from_slice(b"\r\n");
    }
    w.tmp.clear();
    match &reply.body {
        ReplyBody::Bytes(b) => w.tmp.extend_from_slice(b),
        ReplyBody::Format(lf) => {
            render(lf, f, w.ev, w.val);
            w.tmp.extend_from_slice(w.val);
        }
        ReplyBody::Empty | ReplyBody::Raw(_) | ReplyBody::ErrorPage => {}
    }
    if !matches!(reply.status, 204 | 304) {
        let _ = write!(out, "content-length: {}\r\n", w.tmp.len());
    }
    if let Some(ct) = &reply.content_type {
        let _ = write!(out, "content-type: {ct}\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(w.tmp);
    false
}

/// Writes the redirect `r` for the request to `out`; `None` when it does not apply (an empty
/// location with `ignore-empty`).
fn redirect(
    r: &Redirect,
    f: &Facts<'_>,
    req: Option<ReqView<'_>>,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
) -> Option<Verdict> {
    render(&r.target, f, w.ev, w.val);
    if w.val.is_empty() && r.ignore_empty {
        return None;
    }
    let (path, rest) = match req {
        Some(v) => path_of(&v.buf[v.head.target.clone()]),
        None => (&b"/"[..], &b""[..]),
    };
    let query = rest
        .iter()
        .position(|&c| c == b'#')
        .map_or(rest, |p| &rest[..p]);
    w.tmp.clear();
    // As HAProxy 2.6 does, `append-slash` looks at the end of what was written, query
    // included (so it is meant for use with `drop-query`).
    let with_path = |tmp: &mut Vec<u8>| {
        tmp.extend_from_slice(path);
        if !r.drop_query {
            tmp.extend_from_slice(query);
        }
        let written = path.len() + if r.drop_query { 0 } else { query.len() };
        if r.append_slash && (written == 0 || !tmp.ends_with(b"/")) {
            tmp.push(b'/');
        }
    };
    match r.kind {
        RedirectKind::Location => w.tmp.extend_from_slice(w.val),
        RedirectKind::Prefix => {
            // A prefix of "/" keeps the path alone.
            if w.val[..] != *b"/" {
                w.tmp.extend_from_slice(w.val);
            }
            with_path(w.tmp);
        }
        RedirectKind::Scheme => {
            let host = req.and_then(|v| {
                v.headers
                    .iter()
                    .find(|h| h.is(v.buf, "host"))
                    .map(|h| h.value(v.buf))
            });
            w.tmp.extend_from_slice(w.val);
            w.tmp.extend_from_slice(b"://");
            w.tmp.extend_from_slice(host.unwrap_or(b""));
            with_path(w.tmp);
        }
    }
    out.clear();
    let _ = write!(out, "HTTP/1.1 {} {}\r\n", r.code, h1::reason(r.code));
    out.extend_from_slice(b"content-length: 0\r\nlocation: ");
    out.extend_from_slice(w.tmp);
    out.extend_from_slice(b"\r\n");
    if matches!(r.code, 302 | 303 | 307) {
        out.extend_from_slice(b"cache-control: no-cache\r\n");
    }
    if let Some(c) = &r.set_cookie {
        let _ = write!(out, "set-cookie: {c}; path=/;\r\n");
    }
    if let Some(c) = &r.clear_cookie {
        let _ = write!(out, "set-cookie: {c}; path=/; Max-Age=0;\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Some(answer(r.code, *b"LR", false))
}

/// Runs `redirect` lines (after the proxy's `http-request` rules).
#[allow(clippy::too_many_arguments)]
pub(super) fn redirects(
    rules: &[Rule<Redirect>],
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
) -> Verdict {
    let proc = &st.shared.proc_vars;
    for rule in rules {
        let view = req_view(req, head);
        let f = facts(st, Some(view), None, txn, proc);
        if !applies(rule, &f, w.ev, st.trace) {
            continue;
        }
        if let Some(v) = redirect(&rule.action, &f, Some(view), w, out) {
            count_intercepted(st);
            return v;
        }
    }
    Verdict::Continue
}

/// The backend the `use_backend` lines choose, if one applies (`default_backend` is the
/// caller's).
pub(super) fn use_backend(
    rules: &[UseBackend],
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
) -> Option<usize> {
    for rule in rules {
        let f = req_facts(st, req, head, txn);
        if !applies(rule, &f, w.ev, st.trace) {
            continue;
        }
        match &rule.action {
            BackendTarget::Static(b) => return Some(*b),
            BackendTarget::Dynamic(lf) => {
                render(lf, &f, w.ev, w.val);
                let name = &w.val[..];
                let mode = st.shared.frontends[st.frontend].config.mode;
                // A name that is not a backend of this mode leaves it to the next line.
                if let Some(b) = st
                    .shared
                    .backends
                    .iter()
                    .position(|b| b.config.name.as_bytes() == name && b.config.mode == mode)
                {
                    return Some(b);
                }
            }
        }
    }
    None
}

/// The server the `use-server` lines choose, if one applies.
pub(super) fn use_server(
    rules: &[UseServer],
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
    may: impl Fn(usize) -> bool,
) -> Option<usize> {
    rules
        .iter()
        .find(|rule| {
            let f = req_facts(st, req, head, txn);
            applies(rule, &f, w.ev, st.trace) && may(rule.action)
        })
        .map(|rule| rule.action)
}

/// The values of a backend's `sni` expressions for this request (as strings; no value when
/// an expression yields none), written over `out`'s strings.
pub(super) fn sni_values(
    exprs: &[std::sync::Arc<crate::rules::Expr>],
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<Option<String>>,
) {
    out.resize(exprs.len(), None);
    for (e, slot) in exprs.iter().zip(out.iter_mut()) {
        let f = req_facts(st, req, head, txn);
        let Some(b) = e.eval(&f, w.ev).and_then(|s| to_bytes(s, w.ev)) else {
            *slot = None;
            continue;
        };
        let text = String::from_utf8_lossy(w.ev.get(b));
        match slot {
            Some(s) => {
                s.clear();
                s.push_str(&text);
            }
            None => *slot = Some(text.into_owned()),
        }
    }
}

/// The first `force-persist`/`ignore-persist` line whose condition holds.
pub(super) fn persist_rule(
    rules: &[Rule<PersistRule>],
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
) -> Option<PersistRule> {
    rules
        .iter()
        .find(|rule| {
            let f = req_facts(st, req, head, txn);
            applies(rule, &f, w.ev, st.trace)
        })
        .map(|rule| rule.action)
}

/// Runs a backend's `stick match|on|store-request` rules on the request: see
/// [`crate::session::stick::stick_request`].
#[allow(clippy::too_many_arguments)]
pub(super) fn stick_request(
    rules: &[Rule<StickRule>],
    st: &Stream<'_>,
    req: &Head<'_>,
    head: &RequestHead,
    txn: &TxnLog,
    w: &mut Work<'_>,
    assigned: Option<usize>,
    persist: bool,
    stores: &mut Vec<(usize, crate::stick::Key)>,
) -> Option<usize> {
    let f = req_facts(st, req, head, txn);
    crate::session::stick::stick_request(rules, &f, w.ev, assigned, persist, stores)
}

/// Runs a backend's `stick store-response` rules on the response and commits every pending
/// store: see [`crate::session::stick::stick_store`].
pub(super) fn stick_store(
    rules: &[Rule<StickRule>],
    st: &Stream<'_>,
    res: Option<ResView<'_>>,
    txn: &TxnLog,
    w: &mut Work<'_>,
    stores: &mut Vec<(usize, crate::stick::Key)>,
) {
    let proc = &st.shared.proc_vars;
    let f = facts(st, None, res, txn, proc);
    crate::session::stick::stick_store(rules, &f, w.ev, stores);
}

/// Runs `tcp-request` rules: `content` ones over a request whose head is parsed (HTTP mode,
/// `req`), `connection` and `session` ones at accept (`None`).
pub(super) fn tcp_content(
    rules: &[Rule<TcpReqAction>],
    st: &mut Stream<'_>,
    req: Option<(&Head<'_>, &RequestHead)>,
    txn: &mut TxnLog,
    w: &mut Work<'_>,
) -> Verdict {
    let proc = &st.shared.proc_vars;
    for (i, rule) in rules.iter().enumerate() {
        let view = req.map(|(r, h)| req_view(r, h));
        let f = facts(st, view, None, txn, proc);
        if !applies(rule, &f, w.ev, st.trace) {
            continue;
        }
        if matches!(rule.action, TcpReqAction::Accept | TcpReqAction::Reject) {
            let list = RuleList::TcpRequestContent;
            note_final(st, txn, list, rules, i, |r| &r.tcp_request_content);
        }
        match &rule.action {
            TcpReqAction::Accept => return Verdict::Continue,
            TcpReqAction::Reject => return Verdict::Reject(*b"PR"),
            // Run at accept (`runtime::worker`): a list that has it never runs here.
            TcpReqAction::ExpectProxy => {}
            TcpReqAction::Var(v) => var_action(v, &f, w),
            TcpReqAction::TrackSc(t) => {
                if let Some(tr) = st.stick {
                    crate::session::stick::track(t, &f, tr, st.stick_level, w.ev, true, None);
                }
            }
            TcpReqAction::Sc(a) => crate::rules::stick::run_sc(a, &f, w.ev),
            TcpReqAction::Capture {
                expr, len, slot, ..
            } => {
                if captured(expr, &f, w) {
                    txn.captured.set(false, *slot, w.val, *len);
                }
            }
            TcpReqAction::SetSrc(e) | TcpReqAction::SetDst(e) => {
                let ip = e
                    .eval(&f, w.ev)
                    .and_then(|s| crate::rules::sample::to_ip(s, w.ev));
                let (src, dst) = (matches!(rule.action, TcpReqAction::SetSrc(_)), f.dst());
                set_address(st, src, ip.map(AddrPart::Ip), dst);
            }
            TcpReqAction::SetSrcPort(e) | TcpReqAction::SetDstPort(e) => {
                let port = e
                    .eval(&f, w.ev)
                    .and_then(|s| crate::rules::sample::to_int(s, w.ev));
                let (src, dst) = (matches!(rule.action, TcpReqAction::SetSrcPort(_)), f.dst());
                set_address(st, src, port.map(|p| AddrPart::Port(p as u16)), dst);
            }
        }
    }
    Verdict::Continue
}

/// A response head being evaluated and edited.
pub(super) struct Res<'a, 'h> {
    pub msg: Head<'a>,
    pub head: &'h mut ResponseHead,
}

fn res_view<'a>(r: &'a Res<'_, '_>) -> ResView<'a> {
    ResView {
        buf: r.msg.buf(),
        head: r.head,
        headers: r.msg.headers,
    }
}

/// Runs a backend's `tcp-response content` rules on the response, before its `http-response`
/// rules (HAProxy's response inspection comes first). In HTTP mode the response head is all
/// there, so conditions are decided at once (`WAIT_END` holds). `accept` ends the list,
/// `reject` closes both connections without a response (`PD`, as HAProxy logs it).
pub(super) fn tcp_response(
    rules: &[Rule<TcpResAction>],
    st: &mut Stream<'_>,
    res: &Res<'_, '_>,
    txn: &TxnLog,
    w: &mut Work<'_>,
) -> Verdict {
    let proc = &st.shared.proc_vars;
    for (i, rule) in rules.iter().enumerate() {
        let f = facts(st, None, Some(res_view(res)), txn, proc);
        if !applies(rule, &f, w.ev, st.trace) {
            continue;
        }
        if matches!(rule.action, TcpResAction::Accept | TcpResAction::Reject) {
            let list = RuleList::TcpResponseContent;
            note_final(st, txn, list, rules, i, |r| &r.tcp_response_content);
        }
        match &rule.action {
            TcpResAction::Accept => return Verdict::Continue,
            TcpResAction::Reject => {
                count_dresp(st);
                return Verdict::Reject(*b"PD");
            }
            TcpResAction::Var(v) => var_action(v, &f, w),
        }
    }
    Verdict::Continue
}

/// Runs `http-response` rules on the response head.
#[allow(clippy::too_many_arguments)]
pub(super) fn http_response(
    rules: &[Rule<HttpResAction>],
    st: &mut Stream<'_>,
    res: &mut Res<'_, '_>,
    txn: &mut TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
    errorfiles: &[&[ErrorFile]],
    from: usize,
    strict_from: bool,
) -> Verdict {
    let proc = &st.shared.proc_vars;
    // `strict-mode`: on at the start of each list (haproxy resets it per rule set), as it was
    // when the list resumes after `wait-for-body`.
    let mut strict = strict_from;
    // As in `http_request_list`: the facts are built again only after an action that changed
    // what they borrow.
    let mut next = from;
    'facts: while next < rules.len() {
        let f = facts(st, None, Some(res_view(res)), txn, proc);
        while next < rules.len() {
            let (i, rule) = (next, &rules[next]);
            next += 1;
            if !applies(rule, &f, w.ev, st.trace) {
                continue;
            }
            use HttpResAction as A;
            if matches!(
                rule.action,
                A::Allow | A::Deny(_) | A::Return(_) | A::Redirect(_)
            ) {
                let list = RuleList::HttpResponse;
                note_final(st, txn, list, rules, i, |r| &r.http_response);
            }
            match &rule.action {
                HttpResAction::Allow => return Verdict::Continue,
                HttpResAction::Sc(a) => crate::rules::stick::run_sc(a, &f, w.ev),
                HttpResAction::TrackSc(t) => {
                    if let Some(tr) = st.stick {
                        let status = Some(res.head.status);
                        crate::session::stick::track(t, &f, tr, Level::Stream, w.ev, true, status);
                    }
                }
                HttpResAction::Deny(reply) => {
                    write_reply(reply, true, &f, w, out, errorfiles);
                    count_dresp(st);
                    return answer(reply.status, *b"PH", false);
                }
                HttpResAction::Return(reply) => {
                    write_reply(reply, false, &f, w, out, errorfiles);
                    return answer(reply.status, *b"LH", false);
                }
                HttpResAction::Redirect(r) => {
                    if let Some(v) = redirect(r, &f, None, w, out) {
                        return v;
                    }
                }
                HttpResAction::StrictMode(on) => strict = *on,
                HttpResAction::Header(h) => {
                    plan_header(h, &f, w);
                    let line = res.head.start_line.len();
                    if !rewrite_header(h, &mut res.msg, line, st, w) && strict {
                        return rewrite_failed(out, errorfiles, *b"PH");
                    }
                    continue 'facts;
                }
                HttpResAction::SetStatus { status, reason } => {
                    // `HTTP/1.x NNN reason\r\n`
                    let reason_len = reason
                        .as_deref()
                        .map_or_else(|| h1::reason(*status).len(), str::len);
                    let new = 15 + reason_len;
                    let room = Room {
                        global: &st.shared.global,
                        start_line: res.head.start_line.len(),
                    };
                    let old = res.head.start_line.len();
                    if !room.fits(&res.msg, new, |_, _| new as isize - old as isize) {
                        count_wrew(st);
                        if strict {
                            return rewrite_failed(out, errorfiles, *b"PH");
                        }
                        continue;
                    }
                    let (buf, _) = res.msg.edit();
                    edit::set_status(buf, res.head, *status, reason.as_deref().map(str::as_bytes));
                    continue 'facts;
                }
                HttpResAction::Var(v) => var_action(v, &f, w),
                HttpResAction::Capture { expr, id } => {
                    let val = captured(expr, &f, w).then_some(&w.val[..]);
                    let len = st.shared.frontends[st.frontend]
                        .log
                        .res_captures
                        .get(*id)
                        .map_or(0, |c| c.1);
                    if let Some(v) = val {
                        txn.captured.set(true, *id, v, len);
                        continue 'facts;
                    }
                }
                HttpResAction::SetLogLevel(l) => {
                    st.timeouts.silent = *l == LogLevel::Silent;
                    continue 'facts;
                }
                HttpResAction::WaitForBody { time, at_least } => {
                    return Verdict::WaitBody {
                        next: i + 1,
                        strict,
                        time: *time,
                        at_least: *at_least,
                    };
                }
            }
        }
    }
    Verdict::Continue
}

/// Runs `http-after-response` rules on a response about to be sent. False: a rewrite failed
/// in strict mode (haproxy then answers 500 instead, `PH`).
pub(super) fn http_after_response(
    rules: &[Rule<HttpAfterAction>],
    st: &mut Stream<'_>,
    res: &mut Res<'_, '_>,
    txn: &mut TxnLog,
    w: &mut Work<'_>,
) -> bool {
    let proc = &st.shared.proc_vars;
    // `strict-mode`: on at the start of each list, as haproxy resets it per rule set.
    let mut strict = true;
    for (i, rule) in rules.iter().enumerate() {
        let f = facts(st, None, Some(res_view(res)), txn, proc);
        if !applies(rule, &f, w.ev, st.trace) {
            continue;
        }
        if matches!(rule.action, HttpAfterAction::Allow) {
            let list = RuleList::HttpAfterResponse;
            note_final(st, txn, list, rules, i, |r| &r.http_after_response);
        }
        match &rule.action {
            HttpAfterAction::Allow => return true,
            HttpAfterAction::StrictMode(on) => strict = *on,
            HttpAfterAction::Header(h) => {
                plan_header(h, &f, w);
                let line = res.head.start_line.len();
                if !rewrite_header(h, &mut res.msg, line, st, w) && strict {
                    return false;
                }
            }
            HttpAfterAction::SetStatus { status, reason } => {
                let (buf, _) = res.msg.edit();
                edit::set_status(buf, res.head, *status, reason.as_deref().map(str::as_bytes));
            }
            HttpAfterAction::Var(v) => var_action(v, &f, w),
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_rewritten_piece_by_piece() {
        let mut out = Vec::new();
        let names = crate::rules::NameTable::default();
        let lf = |s: &str| LfString::compile(s, &names).unwrap();
        let set = |a: HttpReqAction, t: &str, v: &str, out: &mut Vec<u8>| {
            rewrite_target(&a, t.as_bytes(), v.as_bytes(), out);
            String::from_utf8(out.clone()).unwrap()
        };
        assert_eq!(
            set(HttpReqAction::SetPath(lf("x")), "/a?q=1", "/b", &mut out),
            "/b?q=1"
        );
        assert_eq!(
            set(HttpReqAction::SetQuery(lf("x")), "/a?q=1", "z=2", &mut out),
            "/a?z=2"
        );
        assert_eq!(
            set(HttpReqAction::SetQuery(lf("x")), "/a?q=1", "", &mut out),
            "/a"
        );
        assert_eq!(
            set(HttpReqAction::SetPathQ(lf("x")), "/a?q=1", "/b?c", &mut out),
            "/b?c"
        );
        assert_eq!(
            set(
                HttpReqAction::SetPath(lf("x")),
                "http://h/a?q",
                "/n",
                &mut out
            ),
            "http://h/n?q"
        );
        assert_eq!(
            set(HttpReqAction::SetUri(lf("x")), "/a", "/u?v", &mut out),
            "/u?v"
        );
    }

    #[test]
    fn a_header_goes_before_the_end_of_the_head() {
        let mut out = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 4\r\n\r\nbody".to_vec();
        insert_header(&mut out, b"www-authenticate", |v| {
            v.extend_from_slice(b"Basic realm=\"x\"")
        });
        assert_eq!(
            out,
            b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 4\r\nwww-authenticate: Basic realm=\"x\"\r\n\r\nbody"
        );
    }

    #[test]
    fn header_names_match_ignoring_case() {
        let m = |k: NameMatch, n: &str| name_matches(&k, n.as_bytes());
        assert!(m(NameMatch::Exact("X-Debug".into()), "x-debug"));
        assert!(!m(NameMatch::Exact("X-Debug".into()), "x-debugs"));
        assert!(m(NameMatch::Prefix("x-".into()), "X-Debug"));
        assert!(!m(NameMatch::Prefix("x-debug-".into()), "X-Debug"));
        assert!(m(NameMatch::Suffix("-id".into()), "X-Request-ID"));
        assert!(!m(NameMatch::Suffix("-id".into()), "id"));
        assert!(m(NameMatch::Substring("req".into()), "X-REQUEST-id"));
        assert!(m(NameMatch::Substring(String::new()), "any"));
        assert!(!m(NameMatch::Substring("longer-than-name".into()), "x"));
    }

    #[test]
    fn back_references_expand() {
        let re = regex::bytes::Regex::new("^(a+)(b*)$").unwrap();
        let mut ev = Eval::new();
        let caps = ev.captures(&re, b"aabb").unwrap();
        let mut out = Vec::new();
        expand(br"x\2-\1\\", b"aabb", caps, &mut out);
        assert_eq!(out, b"xbb-aa\\\\");
    }
}
