//! `bascule --explain`: one request through a frontend's rules, without a socket.
//!
//! The dry run drives the executor the session uses ([`policy`]: the same functions, on the
//! same `Facts`, in the order of [`super::phases`] and [`super::session`]: the frontend's
//! `tcp-request content`, `http-request` and `redirect` rules, `use_backend` then
//! `default_backend`, the backend's lists, `use-server`, then the backend's balancer), with a
//! [`Trace`] that records every rule evaluated: its condition's value term by term, and the
//! effect of its action, read as the difference between the facts before it and the facts
//! the next rule (or the end of the list) sees. So what it prints is what the proxy does.
//!
//! Nothing here opens a socket: the run-time state is built from the configuration with its
//! log targets removed (a log output binds a socket), the client's local address is given,
//! and the balancer is a fresh [`Picker`] asked once.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::backend::{balance_key, sample_key, Picker};
use crate::config::model::{Balance, Config, ErrorFile, Mode, ProxyRules};
use crate::proto::h1::{self, HeaderIdx, RequestHead};
use crate::rules::source::Stored;
use crate::rules::vars::{Scopes, Vars};
use crate::rules::{Eval, Match, Scope, TermTrace};
use crate::session::facts::{Facts, ReqView, ResView};
use crate::state::Shared;

use super::policy::{self, Evaluated, Head, Overrides, Res, Stream, Trace, Verdict, Work};
use super::txnlog::TxnLog;

/// What to run: the request (a raw head), optionally a server's response, and where the
/// request comes from.
#[derive(Debug, Clone)]
pub struct Input {
    /// The request head as received (a body may follow it).
    pub request: Vec<u8>,
    /// A server's response head, for `http-response` and `http-after-response`.
    pub response: Option<Vec<u8>>,
    pub src: SocketAddr,
    /// The address the client connected to; `None`: the frontend's first `bind` address.
    pub dst: Option<SocketAddr>,
    /// The frontend by name; `None`: the first HTTP frontend.
    pub frontend: Option<String>,
    /// Servers taken as DOWN, `(backend, server)`.
    pub down: Vec<(String, String)>,
}

/// A head made of a start line and `Name: value` lines (`--request`, `--response`, `-H`).
pub fn head_from_lines(start: &str, headers: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(start.as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in headers {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Runs `input` through `config` and returns the report. `Err`: the input names a frontend,
/// backend or server the configuration does not have.
pub fn explain(mut config: Config, input: &Input) -> Result<String, String> {
    let fe_idx = match &input.frontend {
        Some(name) => config
            .frontends
            .iter()
            .position(|f| &f.name == name)
            .ok_or_else(|| format!("no frontend named '{name}'"))?,
        None => config
            .frontends
            .iter()
            .position(|f| f.mode == Mode::Http && !f.disabled)
            .ok_or("no HTTP frontend: --explain runs HTTP requests")?,
    };
    if config.frontends[fe_idx].mode != Mode::Http {
        return Err(format!(
            "frontend '{}' is in TCP mode: --explain runs HTTP requests",
            config.frontends[fe_idx].name
        ));
    }
    let mut down = Vec::new();
    for (b, s) in &input.down {
        let bi = config
            .backends
            .iter()
            .position(|x| &x.name == b)
            .ok_or_else(|| format!("--down {b}/{s}: no backend named '{b}'"))?;
        let si = config.backends[bi]
            .servers
            .iter()
            .position(|x| &x.name == s)
            .ok_or_else(|| format!("--down {b}/{s}: backend '{b}' has no server '{s}'"))?;
        down.push((bi, si));
    }
    // A log output opens a socket (or starts a thread): the dry run logs nothing.
    config.global.logs.clear();
    config.frontends.iter_mut().for_each(|f| f.logs.clear());
    config.backends.iter_mut().for_each(|b| b.logs.clear());
    let var_names = std::mem::take(&mut config.vars);
    let maxconn = config.global.maxconn.unwrap_or(1024);
    let shared = Shared::new(config, maxconn, false, 1);
    for (b, s) in down {
        shared.backends[b].force_health(s, false, false);
    }

    let mut r = Report::default();
    let fe = &shared.frontends[fe_idx].config;
    let dst = input.dst.or_else(|| {
        fe.binds.iter().find_map(|b| match b.addr {
            crate::config::model::ListenAddr::Inet(a) => Some(a),
            _ => None,
        })
    });
    let first_line = input
        .request
        .split(|&c| c == b'\n')
        .next()
        .unwrap_or_default();
    let _ = writeln!(
        r.text,
        "request: {}  (frontend {}, src {}, dst {})",
        String::from_utf8_lossy(first_line).trim_end(),
        fe.name,
        input.src,
        dst.map_or_else(|| "unknown".to_string(), |d| d.to_string())
    );

    // The head as `read_head` takes it: the same parser, the same buffer limit.
    let raw = &input.request[..];
    let mut headers = Vec::new();
    let bufsize = shared.global.tune_bufsize;
    let parsed = match h1::parse_request(raw, &mut headers) {
        Ok(Some(h)) if h.len <= bufsize => Ok(h),
        Ok(Some(_)) => Err(h1::too_large(&raw[..bufsize])),
        Ok(None) if raw.len() >= bufsize => Err(h1::too_large(&raw[..bufsize])),
        Ok(None) => {
            let _ = writeln!(
                r.text,
                "outcome: the request head is incomplete (no empty line after it): the proxy \
                 would wait for the rest, then answer 408 Request Timeout"
            );
            return Ok(r.text);
        }
        Err(e) => Err(e),
    };
    let mut head = match parsed {
        Ok(h) => h,
        Err(e) => {
            let _ = writeln!(
                r.text,
                "outcome: rejected by the HTTP parser before any rule: {} {} ({})",
                e.status,
                h1::reason(e.status),
                e.reason
            );
            return Ok(r.text);
        }
    };
    print_servers(&shared, &mut r.text);

    let tracer = Tracer {
        vars: &var_names,
        ..Tracer::default()
    };
    let txn_vars = RefCell::new(Vars::default());
    let sess_vars = RefCell::new(Vars::default());
    let mut overrides = Overrides::default();
    let mut st = Stream {
        shared: &shared,
        frontend: fe_idx,
        backend: None,
        server: None,
        peer: Some(input.src),
        fc: crate::session::facts::Addrs {
            src: Some(input.src),
            dst,
        },
        first_req: true,
        listener_id: 0,
        proxied: None,
        client: None,
        local: dst,
        txn_vars: &txn_vars,
        sess_vars: &sess_vars,
        timeouts: &mut overrides,
        trace: Some(&tracer),
        stick: None,
        stick_level: crate::stick::track::Level::Stream,
        server_tls: None,
        client_tls: None,
    };
    let (mut edited, mut is_edited) = (Vec::new(), false);
    let mut req = Head {
        raw,
        edited: &mut edited,
        is_edited: &mut is_edited,
        headers: &mut headers,
        len: head.len,
    };
    let mut txn = TxnLog::default();
    let (mut ev, mut val, mut tmp) = (Eval::new(), Vec::new(), Vec::new());
    let mut w = Work {
        ev: &mut ev,
        val: &mut val,
        tmp: &mut tmp,
    };
    let (mut out, mut hints) = (Vec::new(), Vec::new());
    let mut x = Run {
        tracer: &tracer,
        txn: &mut txn,
        out: &mut out,
        hints: &mut hints,
    };

    // The frontend's request rules.
    let fe_rules = Arc::clone(&fe.rules);
    if fe_rules.has_request_rules() {
        let errorfiles = [&fe.errorfiles[..], &[][..]];
        let label = format!("frontend {}", fe.name);
        let v = x.request_rules(
            &fe_rules,
            &label,
            &mut st,
            &mut req,
            &mut head,
            &mut w,
            &errorfiles,
            &fe.name,
        );
        if x.answered(v, &label, &mut r) {
            r.lines(&tracer);
            return Ok(r.text);
        }
    }

    // use_backend, then default_backend.
    let label = format!("frontend {}", fe.name);
    let mut chosen = None;
    if !fe_rules.use_backends.is_empty() {
        tracer.begin(&label);
        chosen = policy::use_backend(&fe_rules.use_backends, &st, &req, &head, x.txn, &mut w);
        tracer.settle(&tracer.state(&st, Some(view(&req, &head)), None));
        let lines = &mut tracer.lines.borrow_mut()[tracer.start.get()..];
        let n = lines.len();
        for (i, l) in lines.iter_mut().enumerate() {
            if l.held {
                l.effects.push(match (i + 1 == n, chosen) {
                    (true, Some(b)) => format!("backend {}", shared.backends[b].config.name),
                    _ => "no backend of that name in this mode: next line".to_string(),
                });
            }
        }
    }
    let how = match chosen {
        Some(_) => {
            let l = tracer.lines.borrow();
            format!("use_backend at {}", l.last().map_or("", |l| &l.span))
        }
        None => "default_backend".to_string(),
    };
    let Some(be_idx) = chosen.or(fe.default_backend) else {
        r.lines(&tracer);
        let _ = writeln!(
            r.text,
            "outcome: no use_backend applies and there is no default_backend: 503 Service \
             Unavailable"
        );
        return Ok(r.text);
    };
    let be = &shared.backends[be_idx];
    let bec = &be.config;
    st.backend = Some(be_idx);
    r.notes.push(format!("backend {} ({how})", bec.name));

    // The backend's own request rules (a `listen` shares its frontend's: they ran).
    if !Arc::ptr_eq(&bec.rules, &fe_rules) && bec.rules.has_request_rules() {
        let errorfiles = [&bec.errorfiles[..], &fe.errorfiles[..]];
        let label = format!("backend {}", bec.name);
        let v = x.request_rules(
            &bec.rules,
            &label,
            &mut st,
            &mut req,
            &mut head,
            &mut w,
            &errorfiles,
            &bec.name,
        );
        if x.answered(v, &label, &mut r) {
            r.lines(&tracer);
            return Ok(r.text);
        }
    }

    // use-server, then the balancer.
    let mut server = None;
    if !bec.rules.use_servers.is_empty() {
        tracer.begin(&format!("backend {}", bec.name));
        // The dry run reports the first matching rule, usable or not.
        let s = policy::use_server(
            &bec.rules.use_servers,
            &st,
            &req,
            &head,
            x.txn,
            &mut w,
            |_| true,
        );
        tracer.settle(&tracer.state(&st, Some(view(&req, &head)), None));
        if let Some(s) = s {
            let name = &be.servers[s].config.name;
            let usable = be.servers[s].usable();
            if let Some(l) = tracer.lines.borrow_mut().last_mut() {
                l.effects.push(if usable {
                    format!("server {name}")
                } else {
                    format!("server {name} is not usable (DOWN or in maintenance): ignored")
                });
            }
            if usable {
                server = Some((s, "use-server".to_string()));
            }
        }
    }
    // The persistence cookie (HAProxy reads it after use-server, which it then leaves as is).
    let before = server.as_ref().map(|(s, _)| *s);
    let (by_cookie, letter) = super::persist::explain_cookies(be, &mut req, before, w.tmp);
    if let (Some(letter), Some(ck)) = (letter, bec.cookie.as_ref()) {
        let what = match letter {
            b'V' => "names a usable server",
            b'D' => "names a server that is down",
            b'I' => "names no server",
            b'E' => "expired (maxidle)",
            b'O' => "too old (maxlife)",
            b'U' => "not used (use-server chose)",
            _ => "absent",
        };
        r.notes
            .push(format!("cookie {}: {what} ({})", ck.name, letter as char));
    }
    if before.is_none() {
        if let Some(s) = by_cookie {
            server = Some((
                s,
                format!("cookie {}", bec.cookie.as_ref().map_or("", |c| &c.name)),
            ));
        }
    }
    // The backend's `stick match|on|store-request` rules, over this process's tables (a dry
    // run's start empty: a match finds nothing, a store says what it would keep).
    if !bec.rules.stick.is_empty() {
        let assigned = server.as_ref().map(|(s, _)| *s);
        let mut stores = Vec::new();
        let stuck = policy::stick_request(
            &bec.rules.stick,
            &st,
            &req,
            &head,
            x.txn,
            &mut w,
            assigned,
            bec.options.persist,
            &mut stores,
        );
        match stuck {
            Some(s) if assigned.is_none() => {
                server = Some((s, "stick table".to_string()));
            }
            _ if assigned.is_none() => r
                .notes
                .push("stick rules: no stored server for this request (tables start empty)".into()),
            _ => {}
        }
        for (t, key) in &stores {
            let table = &st.shared.tables[*t];
            r.notes.push(format!(
                "stick: key '{}' will be stored in table {} with the server that answers",
                table.spec.key.format(key),
                table.name
            ));
        }
    }
    if server.is_none() {
        let key = match (&bec.balance, &bec.rules.balance_hash) {
            (Balance::Hash { .. }, Some(e)) => {
                policy::balance_sample(e, &st, &req, &head, x.txn, &mut w)
                    .then(|| sample_key(bec, w.val))
            }
            // An HTTP request carries no RDP cookie.
            (Balance::Hash { .. } | Balance::RdpCookie { .. }, _) => None,
            _ => {
                let buf = req.buf();
                let target = head.target(buf, w.tmp);
                let hdrs = &req.headers[..];
                let header =
                    |name: &str| hdrs.iter().find(|h| h.is(buf, name)).map(|h| h.value(buf));
                balance_key(bec, st.peer.map(|p| p.ip()), Some(target), header)
            }
        };
        let picked = Picker::new(be).pick(be, None, key);
        let algo = balance_name(&bec.balance);
        let why = match key {
            Some(k) => format!("balance {algo}: key {k:#010x}"),
            None if is_hashed(&bec.balance) => {
                format!("balance {algo}: nothing to hash, round-robin")
            }
            None => format!("balance {algo}: first pick of a fresh balancer"),
        };
        match picked {
            Some(s) => server = Some((s, why)),
            None => {
                r.lines(&tracer);
                let _ = writeln!(
                    r.text,
                    "outcome: backend {}: no usable server ({why}): 503 Service Unavailable",
                    bec.name
                );
                return Ok(r.text);
            }
        }
    }
    let (srv, why) = server.unwrap_or_default();
    st.server = Some(srv);
    let srv_cfg = &be.servers[srv].config;
    r.notes
        .push(format!("server {} {} ({why})", srv_cfg.name, srv_cfg.addr));
    r.lines(&tracer);

    let mut fwd = Vec::new();
    super::request::write_head(
        &mut fwd,
        req.buf(),
        req.headers,
        &head,
        fe,
        bec,
        super::exchange::conn_mode(fe, bec),
        st.peer,
        st.local,
        None,
    );
    let _ = writeln!(
        r.text,
        "outcome: sent to backend {}, server {}",
        bec.name, srv_cfg.name
    );
    for n in &r.notes {
        let _ = writeln!(r.text, "  {n}");
    }
    if !x.hints.is_empty() {
        let _ = writeln!(r.text, "early hints sent first:");
        print_head(x.hints, &mut r.text);
    }
    let _ = writeln!(r.text, "forwarded request:");
    print_head(&fwd, &mut r.text);

    if let Some(raw) = &input.response {
        explain_response(raw, &head, req.buf(), &mut st, &mut x, &mut w, &mut r);
    }
    Ok(r.text)
}

/// The response path: the backend's `http-response` rules, the frontend's, then the
/// `http-after-response` ones, as `exchange::response_rules` runs them.
fn explain_response(
    raw: &[u8],
    req: &RequestHead,
    req_buf: &[u8],
    st: &mut Stream<'_>,
    x: &mut Run<'_, '_>,
    w: &mut Work<'_>,
    r: &mut Report,
) {
    let mut headers = Vec::new();
    let mut head = match h1::parse_response(raw, &mut headers, req.is_head(req_buf)) {
        Ok(Some(h)) => h,
        Ok(None) => {
            let _ = writeln!(r.text, "response: incomplete head (no empty line after it)");
            return;
        }
        Err(e) => {
            let _ = writeln!(
                r.text,
                "response: rejected by the HTTP parser: {} {} ({})",
                e.status,
                h1::reason(e.status),
                e.reason
            );
            return;
        }
    };
    let shared = st.shared;
    let Some(be_idx) = st.backend else { return };
    let be = &shared.backends[be_idx].config;
    let fe = &shared.frontends[st.frontend].config;
    let same = Arc::ptr_eq(&be.rules, &fe.rules);
    let errorfiles = [&be.errorfiles[..], &fe.errorfiles[..]];
    let (mut edited, mut is_edited) = (Vec::new(), false);
    let len = head.len;
    let mut res = Res {
        msg: Head {
            raw,
            edited: &mut edited,
            is_edited: &mut is_edited,
            headers: &mut headers,
            len,
        },
        head: &mut head,
    };
    let tracer = x.tracer;
    let mark = tracer.lines.borrow().len();
    let lists = [
        (&be.rules, format!("backend {}", be.name)),
        (&fe.rules, format!("frontend {}", fe.name)),
    ];
    let lists = &lists[..if same { 1 } else { 2 }];
    let mut verdict = Verdict::Continue;
    for (rules, label) in lists {
        if rules.http_response.is_empty() {
            continue;
        }
        tracer.begin(label);
        // `wait-for-body`: the dry run's response has all the body it will get; go on.
        let (mut from, mut strict) = (0, true);
        verdict = loop {
            match policy::http_response(
                &rules.http_response,
                st,
                &mut res,
                x.txn,
                w,
                x.out,
                &errorfiles,
                from,
                strict,
            ) {
                Verdict::WaitBody {
                    next, strict: s, ..
                } => (from, strict) = (next, s),
                v => break v,
            }
        };
        let now = tracer.state(st, None, Some(res_view(&res)));
        tracer.end_list(&now, &verdict, rules.http_response.len(), x.out);
        if !matches!(verdict, Verdict::Continue) {
            break;
        }
    }
    if matches!(verdict, Verdict::Continue) {
        for (rules, label) in lists {
            if rules.http_after_response.is_empty() {
                continue;
            }
            tracer.begin(label);
            let ok =
                policy::http_after_response(&rules.http_after_response, st, &mut res, x.txn, w);
            let now = tracer.state(st, None, Some(res_view(&res)));
            let end = if ok {
                Verdict::Continue
            } else {
                Verdict::Answer {
                    status: 500,
                    term: *b"PH",
                    close: true,
                    delay: None,
                }
            };
            tracer.end_list(&now, &end, rules.http_after_response.len(), x.out);
            if !ok {
                break;
            }
        }
    }
    if tracer.lines.borrow().len() > mark {
        let _ = writeln!(r.text, "response rules:");
        r.lines_from(tracer, mark);
    }
    match verdict {
        Verdict::Answer { status, .. } => {
            let _ = writeln!(
                r.text,
                "outcome: the response is replaced by a rule: {status} {}",
                h1::reason(status)
            );
            print_head(x.out, &mut r.text);
        }
        _ => {
            let _ = writeln!(r.text, "response to the client:");
            let buf = res.msg.buf();
            let mut lines = Vec::new();
            lines.extend_from_slice(buf[res.head.start_line.clone()].trim_ascii_end());
            lines.extend_from_slice(b"\r\n");
            for h in res.msg.headers.iter() {
                lines.extend_from_slice(h.name(buf));
                lines.extend_from_slice(b": ");
                lines.extend_from_slice(h.value(buf));
                lines.extend_from_slice(b"\r\n");
            }
            print_head(&lines, &mut r.text);
        }
    }
}

/// What the dry run borrows across phases.
struct Run<'t, 'a> {
    tracer: &'t Tracer<'a>,
    txn: &'t mut TxnLog,
    out: &'t mut Vec<u8>,
    hints: &'t mut Vec<u8>,
}

impl Run<'_, '_> {
    /// `tcp-request content`, `http-request` and `redirect` rules of one proxy, as
    /// `Session::request_rules` runs them (`wait-for-body`: there is no body to wait for, the
    /// list goes on).
    #[allow(clippy::too_many_arguments)]
    fn request_rules(
        &mut self,
        rules: &ProxyRules,
        label: &str,
        st: &mut Stream<'_>,
        req: &mut Head<'_>,
        head: &mut RequestHead,
        w: &mut Work<'_>,
        errorfiles: &[&[ErrorFile]],
        realm: &str,
    ) -> Verdict {
        let t = self.tracer;
        let (mut from, mut strict) = (0, true);
        loop {
            let mut v = Verdict::Continue;
            if from == 0 && !rules.tcp_request_content.is_empty() {
                t.begin(label);
                let list = &rules.tcp_request_content;
                v = policy::tcp_content(list, st, Some((&*req, &*head)), self.txn, w);
                let now = t.state(st, Some(view(req, head)), None);
                t.end_list(&now, &v, rules.tcp_request_content.len(), self.out);
            }
            if matches!(v, Verdict::Continue) && !rules.http_request.is_empty() {
                t.begin(label);
                v = policy::http_request(
                    &rules.http_request,
                    from,
                    strict,
                    st,
                    req,
                    head,
                    self.txn,
                    w,
                    self.out,
                    self.hints,
                    errorfiles,
                    realm,
                );
                let now = t.state(st, Some(view(req, head)), None);
                t.end_list(&now, &v, rules.http_request.len() - from, self.out);
            }
            if matches!(v, Verdict::Continue) && !rules.redirects.is_empty() {
                t.begin(label);
                v = policy::redirects(&rules.redirects, st, req, head, self.txn, w, self.out);
                let now = t.state(st, Some(view(req, head)), None);
                t.end_list(&now, &v, rules.redirects.len(), self.out);
            }
            match v {
                Verdict::WaitBody {
                    next, strict: s, ..
                } => (from, strict) = (next, s),
                v => return v,
            }
        }
    }

    /// Reports a verdict that ends the transaction; `false`: it goes on.
    fn answered(&mut self, v: Verdict, label: &str, r: &mut Report) -> bool {
        let rule = self.tracer.last_held();
        let by = rule.map_or_else(|| label.to_string(), |s| format!("{s} ({label})"));
        match v {
            Verdict::Continue | Verdict::WaitBody { .. } => return false,
            Verdict::Reject(_) => {
                r.lines(self.tracer);
                let _ = writeln!(
                    r.text,
                    "outcome: connection closed without an answer (reject) by {by}"
                );
            }
            Verdict::Answer { status, delay, .. } => {
                r.lines(self.tracer);
                let tarpit = delay.map_or(String::new(), |d| {
                    format!(
                        ", after holding the connection {} ms (tarpit)",
                        d.as_millis()
                    )
                });
                let _ = writeln!(
                    r.text,
                    "outcome: answered with {status} {} by {by}{tarpit}",
                    h1::reason(status)
                );
                print_head(self.out, &mut r.text);
            }
        }
        if !self.hints.is_empty() {
            let _ = writeln!(r.text, "early hints sent first:");
            print_head(self.hints, &mut r.text);
        }
        true
    }
}

fn view<'a>(h: &'a Head<'_>, head: &'a RequestHead) -> ReqView<'a> {
    ReqView {
        buf: h.buf(),
        head,
        headers: h.headers,
        received: h.raw.len(),
        body: None,
    }
}

fn res_view<'a>(r: &'a Res<'_, '_>) -> ResView<'a> {
    ResView {
        buf: r.msg.buf(),
        head: r.head,
        headers: r.msg.headers,
    }
}

/// The report being written: the text so far, and what goes under the outcome.
#[derive(Default)]
struct Report {
    text: String,
    notes: Vec<String>,
    /// Rule lines already written.
    written: usize,
}

impl Report {
    /// Writes the rule lines recorded since the last call, aligned.
    fn lines(&mut self, t: &Tracer<'_>) {
        let from = self.written;
        self.lines_from(t, from);
    }

    fn lines_from(&mut self, t: &Tracer<'_>, from: usize) {
        let lines = t.lines.borrow();
        let lines = &lines[from.min(lines.len())..];
        self.written = from + lines.len();
        if lines.is_empty() {
            return;
        }
        let prefix = |l: &Line| format!("{}  {}  {}", l.span, l.label, l.text);
        let width = lines
            .iter()
            .map(|l| prefix(l).chars().count())
            .max()
            .unwrap_or(0)
            .min(90);
        for l in lines {
            let p = prefix(l);
            let _ = write!(
                self.text,
                "{p:width$}  -> {}",
                if l.held { "yes" } else { "no" }
            );
            if !l.terms.is_empty() {
                let _ = write!(self.text, " ({})", l.terms);
            }
            if !l.effects.is_empty() {
                let _ = write!(self.text, ": {}", l.effects.join("; "));
            }
            self.text.push('\n');
        }
    }
}

/// One rule evaluated.
struct Line {
    span: String,
    label: String,
    text: String,
    held: bool,
    /// Each term of the condition with its value.
    terms: String,
    /// What the action did.
    effects: Vec<String>,
}

/// The facts a rule's effect shows in, as text: the start line, the header lines, the
/// variables (by id) and the client address.
#[derive(PartialEq)]
struct State {
    start: String,
    headers: Vec<String>,
    vars: Vec<Option<String>>,
    peer: Option<SocketAddr>,
}

impl State {
    /// What changed from `self` to `now`.
    fn diff(&self, now: &State, names: &[(Scope, String)], out: &mut Vec<String>) {
        if self.start != now.start {
            out.push(format!("{:?} becomes {:?}", self.start, now.start));
        }
        let mut old: Vec<&String> = self.headers.iter().collect();
        let mut added = Vec::new();
        for h in &now.headers {
            match old.iter().position(|o| *o == h) {
                Some(p) => {
                    old.remove(p);
                }
                None => added.push(h),
            }
        }
        for h in old {
            out.push(format!("removes {h:?}"));
        }
        for h in added {
            out.push(format!("adds {h:?}"));
        }
        for (id, (a, b)) in self.vars.iter().zip(&now.vars).enumerate() {
            if a != b {
                let (scope, name) = &names[id];
                let var = format!("{}.{name}", scope.name());
                out.push(match b {
                    Some(v) => format!("{var} = {v}"),
                    None => format!("unsets {var}"),
                });
            }
        }
        if self.peer != now.peer {
            if let Some(p) = now.peer {
                out.push(format!("src becomes {p}"));
            }
        }
    }
}

/// The [`Trace`] of a dry run: records each rule, and attributes what changed between two
/// rules to the first one.
#[derive(Default)]
struct Tracer<'a> {
    vars: &'a [(Scope, String)],
    /// Which proxy's rules run now (`frontend web`).
    label: RefCell<String>,
    lines: RefCell<Vec<Line>>,
    /// Where the current list's lines start.
    start: std::cell::Cell<usize>,
    /// The last rule that held, with the facts before its action.
    pending: RefCell<Option<(usize, State)>>,
}

impl Tracer<'_> {
    fn begin(&self, label: &str) {
        *self.label.borrow_mut() = label.to_string();
        self.start.set(self.lines.borrow().len());
    }

    fn state(&self, st: &Stream<'_>, req: Option<ReqView<'_>>, res: Option<ResView<'_>>) -> State {
        let vars = Scopes {
            txn: st.txn_vars,
            sess: st.sess_vars,
            proc: &st.shared.proc_vars,
        };
        self.state_of(req, res, &vars, st.peer)
    }

    fn state_of(
        &self,
        req: Option<ReqView<'_>>,
        res: Option<ResView<'_>>,
        vars: &Scopes<'_>,
        peer: Option<SocketAddr>,
    ) -> State {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let lines = |buf: &[u8], start: std::ops::Range<usize>, headers: &[HeaderIdx]| {
            let hs = headers
                .iter()
                .map(|h| format!("{}: {}", text(h.name(buf)), text(h.value(buf))))
                .collect();
            (text(buf[start].trim_ascii_end()), hs)
        };
        let (start, headers) = match (req, res) {
            (_, Some(r)) => lines(r.buf, r.head.start_line.clone(), r.headers),
            (Some(r), None) => lines(r.buf, r.head.start_line.clone(), r.headers),
            (None, None) => (String::new(), Vec::new()),
        };
        let mut buf = Vec::new();
        let vars = self
            .vars
            .iter()
            .enumerate()
            .map(|(id, (scope, _))| {
                buf.clear();
                vars.get(*scope, id, &mut buf).map(|k| match k {
                    Stored::Bool(b) => b.to_string(),
                    Stored::Sint(i) => i.to_string(),
                    Stored::Ipv4(a) => a.to_string(),
                    Stored::Ipv6(a) => a.to_string(),
                    Stored::Str | Stored::Meth => format!("{:?}", text(&buf)),
                    Stored::Bin => buf.iter().map(|c| format!("{c:02x}")).collect(),
                })
            })
            .collect();
        State {
            start,
            headers,
            vars,
            peer,
        }
    }

    /// Gives the last rule that held what changed since it ran.
    fn settle(&self, now: &State) {
        if let Some((i, before)) = self.pending.borrow_mut().take() {
            let mut lines = self.lines.borrow_mut();
            before.diff(now, self.vars, &mut lines[i].effects);
        }
    }

    /// The end of a list of `len` rules (from where it started) with verdict `v`: the last
    /// rule that held gets its effect and, if it ended the list, why.
    fn end_list(&self, now: &State, v: &Verdict, len: usize, out: &[u8]) {
        self.settle(now);
        let mut lines = self.lines.borrow_mut();
        let evaluated = lines.len() - self.start.get();
        let Some(last) = lines.last_mut().filter(|l| l.held && evaluated > 0) else {
            return;
        };
        match v {
            Verdict::Continue if evaluated < len => last.effects.push("stops this list".into()),
            Verdict::Continue => {}
            Verdict::Reject(_) => last.effects.push("closes the connection (stops)".into()),
            Verdict::WaitBody { .. } => last
                .effects
                .push("no body in a dry run: goes on at the next rule".into()),
            Verdict::Answer { status, .. } => {
                let mut e = format!("{status} {}", h1::reason(*status));
                if let Some(loc) = header_of(out, "location") {
                    let _ = write!(e, " Location: {loc}");
                }
                e.push_str(" (stops)");
                last.effects.push(e);
            }
        }
    }

    /// The span of the last rule that held, if any.
    fn last_held(&self) -> Option<String> {
        let lines = self.lines.borrow();
        lines.iter().rev().find(|l| l.held).map(|l| l.span.clone())
    }
}

impl Trace for Tracer<'_> {
    fn rule(&self, rule: Evaluated<'_>, f: &Facts<'_>, ev: &mut Eval) {
        let now = self.state_of(f.req, f.res, &f.vars, f.peer);
        self.settle(&now);
        let terms = rule
            .cond
            .map(|c| describe_terms(c.polarity, &c.explain(f, ev)))
            .unwrap_or_default();
        let mut lines = self.lines.borrow_mut();
        lines.push(Line {
            span: rule.span.to_string(),
            label: self.label.borrow().clone(),
            text: rule.text.to_string(),
            held: rule.held,
            terms,
            effects: Vec::new(),
        });
        if rule.held {
            *self.pending.borrow_mut() = Some((lines.len() - 1, now));
        }
    }
}

/// `blacklist: no [src = 127.0.0.1], !{ ssl_fc }: yes [ssl_fc = false]`.
fn describe_terms(polarity: crate::rules::Polarity, groups: &[Vec<TermTrace<'_>>]) -> String {
    let word = |m: Match| match m {
        Match::Yes => "yes",
        Match::No => "no",
        Match::Miss => "not yet known",
    };
    let mut s = String::new();
    if polarity == crate::rules::Polarity::Unless {
        s.push_str("unless: ");
    }
    for (i, g) in groups.iter().enumerate() {
        if i > 0 {
            s.push_str(" || ");
        }
        for (j, t) in g.iter().enumerate() {
            if j > 0 {
                s.push_str(", ");
            }
            let r = if t.neg { t.result.negate() } else { t.result };
            let _ = write!(s, "{}{}: {}", if t.neg { "!" } else { "" }, t.name, word(r));
            let fetched: Vec<String> = t
                .fetched
                .iter()
                .map(|(name, vals)| {
                    if vals.is_empty() {
                        format!("{name} absent")
                    } else {
                        format!("{name} = {}", vals.join(" "))
                    }
                })
                .collect();
            if !fetched.is_empty() {
                let _ = write!(s, " [{}]", fetched.join("; "));
            }
        }
    }
    s
}

fn balance_name(b: &Balance) -> String {
    match b {
        Balance::RoundRobin => "roundrobin".into(),
        Balance::StaticRr => "static-rr".into(),
        Balance::LeastConn => "leastconn".into(),
        Balance::First => "first".into(),
        Balance::Random { .. } => "random".into(),
        Balance::UrlParam { name } => format!("url_param {name}"),
        Balance::Hdr { name, .. } => format!("hdr({name})"),
        Balance::Source => "source".into(),
        Balance::Uri { .. } => "uri".into(),
        Balance::Hash { expr, .. } => format!("hash {expr}"),
        Balance::RdpCookie { name } => format!("rdp-cookie({name})"),
    }
}

fn is_hashed(b: &Balance) -> bool {
    matches!(
        b,
        Balance::UrlParam { .. }
            | Balance::Hdr { .. }
            | Balance::Source
            | Balance::Uri { .. }
            | Balance::Hash { .. }
            | Balance::RdpCookie { .. }
    )
}

/// Every backend's servers and whether they are usable (`--down`, `disabled`).
fn print_servers(shared: &Shared, text: &mut String) {
    for b in &shared.backends {
        if b.servers.is_empty() {
            continue;
        }
        let list: Vec<String> = b
            .servers
            .iter()
            .map(|s| {
                let state = if s.usable() { "UP" } else { "DOWN" };
                let backup = if s.config.backup { " backup" } else { "" };
                format!("{} {state}{backup}", s.config.name)
            })
            .collect();
        let _ = writeln!(
            text,
            "servers: backend {}: {}",
            b.config.name,
            list.join(", ")
        );
    }
}

/// The value of header `name` in a head written to `buf`.
fn header_of(buf: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(buf);
    let head = text.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// A head, one line each, indented (the body's length if one follows).
fn print_head(buf: &[u8], text: &mut String) {
    let s = String::from_utf8_lossy(buf);
    let (head, body) = s.split_once("\r\n\r\n").unwrap_or((&s, ""));
    for l in head.trim_end_matches("\r\n").split("\r\n") {
        let _ = writeln!(text, "  {l}");
    }
    if !body.is_empty() {
        let _ = writeln!(text, "  ({} bytes of body)", body.len());
    }
}
