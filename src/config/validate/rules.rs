//! The validate stage of rules: userlists, and every proxy's stored rule lines compiled into
//! [`ProxyRules`] once all backends, servers and userlists are known.
//!
//! ACLs are compiled in line order into the section's own [`Acls`] (a `defaults` section's
//! ACLs serve only its own rules, as in HAProxy), so a rule naming an ACL declared further
//! down is "no such ACL". Every error goes to the diagnostics list with the line, the section
//! and the rule as written; compiling goes on with the next line.

use std::collections::HashMap;

use crate::config::diag::{suggest, Diagnostic, Span};
use crate::config::keywords::rules::{RuleKind, RuleLine};
use crate::config::keywords::userlist::UserlistDraft;
use crate::config::keywords::ProxyDraft;
use crate::config::model::{BackendTarget, Balance, Capture, Mode, PersistRule, ProxyRules, Rule};
use crate::config::parser::label;
use crate::rules::action::{self, CaptureSlot, Compiler, HttpReqAction, TcpPhase, TcpReqAction};
use crate::rules::lf::LfString;
use crate::rules::userlist::{Password, User, Userlist};
use crate::rules::{compile_acl, Acls, NameTable, Names, RuleError};

/// Builds the userlists, reporting unknown cross-references and unusable hashes.
pub fn userlists(drafts: &[UserlistDraft], diags: &mut Vec<Diagnostic>) -> Vec<Userlist> {
    let mut out = Vec::new();
    for d in drafts {
        let section = label(crate::config::keywords::SectionKind::Userlist, &d.name);
        let groups: Vec<String> = d.groups.iter().map(|g| g.name.clone()).collect();
        let mut users: Vec<User> = Vec::new();
        for u in &d.users {
            if let Password::Hash(h) = &u.password {
                if let Err(e) = crate::rules::userlist::check_hash(h) {
                    diags.push(Diagnostic::alert(
                        Some(&u.span),
                        Some(&section),
                        format!("user '{}': {e}", u.name),
                    ));
                }
            }
            let mut idx = Vec::new();
            for g in &u.groups {
                match groups.iter().position(|x| x == g) {
                    Some(i) => idx.push(i),
                    None => diags.push(
                        Diagnostic::alert(
                            Some(&u.span),
                            Some(&section),
                            format!("no such group '{g}' specified in user '{}'", u.name),
                        )
                        .with_hint(suggest(g, groups.iter().map(String::as_str))),
                    ),
                }
            }
            users.push(User {
                name: u.name.clone(),
                password: u.password.clone(),
                groups: idx,
            });
        }
        for (gi, g) in d.groups.iter().enumerate() {
            for name in &g.users {
                match users.iter_mut().find(|u| &u.name == name) {
                    Some(u) => {
                        if !u.groups.contains(&gi) {
                            u.groups.push(gi);
                        }
                    }
                    None => diags.push(
                        Diagnostic::alert(
                            Some(&g.span),
                            Some(&section),
                            format!("no such user '{name}' specified in group '{}'", g.name),
                        )
                        .with_hint(suggest(name, d.users.iter().map(|u| u.name.as_str()))),
                    ),
                }
            }
        }
        out.push(Userlist {
            name: d.name.clone(),
            users,
            groups,
        });
    }
    out
}

/// What compiling every proxy's rules shares.
pub struct Env<'a> {
    pub names: &'a NameTable,
    /// Backend modes by index, to refuse a `use_backend` across modes.
    pub modes: &'a [Mode],
    pub experimental: bool,
}

fn push_unique(diags: &mut Vec<Diagnostic>, d: Diagnostic) {
    if !diags.contains(&d) {
        diags.push(d);
    }
}

/// Compiles the rules of proxy `p` (inherited ones first). `own_backend` is the index of its
/// backend half, for `use-server`.
pub fn compile_proxy(
    p: &ProxyDraft,
    own_backend: Option<usize>,
    env: &Env<'_>,
    diags: &mut Vec<Diagnostic>,
) -> ProxyRules {
    let mut out = ProxyRules {
        inspect_delay: p.inspect_delay,
        res_inspect_delay: p.res_inspect_delay,
        ..ProxyRules::default()
    };
    let mut caps = Slots::new(p);
    if let Some(inh) = &p.inherited_rules {
        compile_lines(
            &inh.lines,
            &inh.section,
            p,
            own_backend,
            env,
            &mut caps,
            &mut out,
            diags,
        );
    }
    caps.inherited = Some(caps.added.len());
    compile_lines(
        &p.rule_lines,
        &label(p.kind, &p.name),
        p,
        own_backend,
        env,
        &mut caps,
        &mut out,
        diags,
    );
    out.req_captures = caps.finish(p);
    if let Some(page) = &p.stats {
        if (!page.users.is_empty() || page.realm.is_some()) && !out.stats_http_request.is_empty() {
            diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&label(p.kind, &p.name)),
                format!(
                    "proxy '{}': stats 'auth'/'realm' and 'http-request' can't be used at the same time.",
                    p.name
                ),
            ));
        }
        if p.mode == Mode::Http {
            out.stats = Some(page.clone());
        } else if p.kind != crate::config::keywords::SectionKind::Defaults {
            diags.push(Diagnostic::warning(
                Some(&p.span),
                Some(&label(p.kind, &p.name)),
                format!(
                    "'stats' statement ignored for proxy '{}' as it requires HTTP mode.",
                    p.name
                ),
            ));
        }
    }
    if p.kind.has_backend() {
        out.http_check = compile_http_check(p, env, diags);
        out.balance_hash = compile_balance_hash(p, env, diags);
    }
    warn_never_match(&out, p, diags);
    if !out.connection_at_accept() {
        let section = label(p.kind, &p.name);
        for r in &out.tcp_request_connection {
            if matches!(r.action, crate::rules::action::TcpReqAction::ExpectProxy) {
                diags.push(Diagnostic::alert(
                    Some(&r.span),
                    Some(&section),
                    "'tcp-request connection expect-proxy layer4' is supported in a list of \
                     'accept', 'reject' and 'expect-proxy' rules only: Bascule runs a list that \
                     tracks or sets variables or addresses after the handshakes"
                        .to_string(),
                ));
            }
        }
    }
    if p.mode == Mode::Http {
        warn_l6_in_http(&out, p, diags);
    }
    out
}

/// The sample expression of a backend's `balance hash EXPR`: an error, as HAProxy's, when it
/// does not compile or reads what a request does not have (a response).
fn compile_balance_hash(
    p: &ProxyDraft,
    env: &Env<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<crate::rules::Expr> {
    let Balance::Hash { expr, at } = &p.balance else {
        return None;
    };
    let compiled = crate::rules::Expr::compile(expr, env.names).and_then(|e| {
        if e.phases().contains(crate::rules::Phases::REQ) {
            Ok(e)
        } else {
            Err(RuleError::new(
                "it reads what only a response has, and the server is chosen before any response",
            ))
        }
    });
    match compiled {
        Ok(e) => Some(e),
        Err(e) => {
            diags.push(Diagnostic::alert(
                Some(at),
                Some(&label(p.kind, &p.name)),
                format!("'balance hash' expression '{expr}': {}", e.message),
            ));
            None
        }
    }
}

/// Compiles a backend's `http-check` steps: the log-format patterns and regular expressions
/// of its `expect hdr|fhdr` lines and its variable actions. Their variables are numbered in a
/// table of the check's own: a check sees its `check.` variables and no stream's.
fn compile_http_check(
    p: &ProxyDraft,
    env: &Env<'_>,
    diags: &mut Vec<Diagnostic>,
) -> crate::config::model::HttpCheckCode {
    use crate::config::model::{HdrMatch, HttpCheckStep, HttpCheckStepCode, HttpExpect};
    let names = NameTable::default();
    let acls = Acls::new();
    let section = label(p.kind, &p.name);
    let mut steps = Vec::new();
    for step in &p.options.http_check.steps {
        let code = match step {
            HttpCheckStep::Expect {
                expect: HttpExpect::Hdr { name, value, .. },
                ..
            } => {
                let lf = |pat: Option<&crate::config::model::HdrPattern>| {
                    pat.filter(|p| p.lf)
                        .and_then(|p| LfString::compile(&p.text, &names).ok())
                };
                let re = |pat: Option<&crate::config::model::HdrPattern>, icase: bool| {
                    // On bytes, ASCII-only, as HAProxy's regexes read them.
                    pat.filter(|p| p.how == HdrMatch::Reg).and_then(|p| {
                        regex::bytes::RegexBuilder::new(&p.text)
                            .unicode(false)
                            .case_insensitive(icase)
                            .build()
                            .ok()
                    })
                };
                for pat in [Some(name), value.as_ref()].into_iter().flatten() {
                    if pat.lf {
                        if let Err(e) = LfString::compile(&pat.text, &names) {
                            diags.push(Diagnostic::alert(
                                Some(&p.span),
                                Some(&section),
                                format!("'http-check expect': {}", e.message),
                            ));
                        }
                    }
                }
                HttpCheckStepCode::Expect {
                    name_lf: lf(Some(name)),
                    value_lf: lf(value.as_ref()),
                    // Header names compare without case, values with.
                    name_re: re(Some(name), true),
                    value_re: re(value.as_ref(), false),
                }
            }
            HttpCheckStep::Expect { .. } => HttpCheckStepCode::Expect {
                name_lf: None,
                value_lf: None,
                name_re: None,
                value_re: None,
            },
            HttpCheckStep::Var { words, at } => {
                let mut c = Compiler {
                    names: &names,
                    acls: &acls,
                    has_backend: true,
                    experimental: env.experimental,
                    req_captures: 0,
                    res_captures: 0,
                    warnings: Vec::new(),
                };
                match action::compile_check_var(words, &mut c) {
                    Ok(v) => HttpCheckStepCode::Var(v),
                    Err(e) => {
                        diags.push(Diagnostic::alert(
                            Some(&super::span_of(at, p)),
                            Some(&section),
                            e.message,
                        ));
                        continue;
                    }
                }
            }
        };
        steps.push(code);
    }
    let vars = names.vars.borrow().len();
    crate::config::model::HttpCheckCode { steps, vars }
}

/// HAProxy's warning for a condition that reads the raw request bytes (`req.len`,
/// `req.ssl_sni`, ...) in an HTTP proxy, whose buffer holds parsed messages: the fetch never
/// has a value there.
fn warn_l6_in_http(out: &ProxyRules, p: &ProxyDraft, diags: &mut Vec<Diagnostic>) {
    let section = label(p.kind, &p.name);
    let mut check = |cond: &Option<crate::rules::Cond>, span: &Span| {
        if cond.as_ref().is_some_and(|c| c.reads_l6()) {
            let msg = "L6 sample fetches ignored on HTTP proxies";
            push_unique(diags, Diagnostic::warning(Some(span), Some(&section), msg));
        }
    };
    macro_rules! each {
        ($($list:ident),*) => { $(for r in &out.$list { check(&r.cond, &r.span); })* };
    }
    each!(
        use_backends,
        use_servers,
        stick,
        tcp_request_connection,
        tcp_request_session
    );
    each!(
        tcp_request_content,
        tcp_response_content,
        http_request,
        redirects
    );
    each!(http_response, http_after_response);
}

/// The numbering of a proxy's request capture slots. HAProxy keeps one list per frontend and
/// numbers each slot when its line is parsed: a frontend starts with a copy of its `defaults`
/// section's list (the slots its inherited `http-request capture ... len` rules add), then its
/// own `capture request header`, `declare capture request` and slot-adding rules follow in
/// line order. Rules are compiled in that order, so a slot's number is known when its rule is
/// compiled: the inherited slots, the proxy's declared slots above its line, and the slots its
/// rules added before.
struct Slots {
    /// Where the proxy's own `capture request header` and `declare capture request` lines are
    /// (file rank, line), in order.
    declared: Vec<(usize, u32)>,
    /// Request slots that rules added, in the order they were added: (where, length).
    added: Vec<((usize, u32), usize)>,
    /// How many of `added` came from the inherited rules: `None` while those are compiled.
    inherited: Option<usize>,
    /// Request and response slots known so far, for `capture ... id N` checks.
    known: (usize, usize),
}

impl Slots {
    fn new(p: &ProxyDraft) -> Self {
        let declared: Vec<_> = p
            .options
            .captures
            .iter()
            .filter(|c| !c.response)
            .map(|c| c.at)
            .collect();
        let res = p.options.captures.len() - declared.len();
        Slots {
            known: (declared.len(), res),
            declared,
            added: Vec::new(),
            inherited: None,
        }
    }

    /// Adds a slot of length `len` for the rule at `span`; returns its number.
    fn add(&mut self, span: &Span, len: usize) -> usize {
        let at = (span.file_index, span.line);
        let declared_above = match self.inherited {
            None => 0,
            Some(_) => self.declared.iter().filter(|&&d| d < at).count(),
        };
        let n = self.added.len() + declared_above;
        self.added.push((at, len));
        n
    }

    /// The proxy's request slots in number order (rule-added slots have no header name).
    fn finish(self, p: &ProxyDraft) -> Vec<Capture> {
        let slot = |&(at, len): &((usize, u32), usize)| Capture {
            response: false,
            name: String::new(),
            len,
            at,
        };
        let (inherited, own) = self.added.split_at(self.inherited.unwrap_or(0));
        let mut out: Vec<Capture> = inherited.iter().map(slot).collect();
        let mut own = own.iter().peekable();
        for c in p.options.captures.iter().filter(|c| !c.response) {
            while let Some(r) = own.next_if(|r| r.0 < c.at) {
                out.push(slot(r));
            }
            out.push(c.clone());
        }
        out.extend(own.map(slot));
        out
    }
}

/// HAProxy's "will never match" warnings: an ACL whose fetches cannot run in its rule's phase
/// (a response fetch in `http-request`, a request fetch in `tcp-request connection`...).
/// Checked once the proxy's ACLs are final.
fn warn_never_match(out: &ProxyRules, p: &ProxyDraft, diags: &mut Vec<Diagnostic>) {
    use crate::rules::Phases;
    let side = if p.kind.has_frontend() {
        "frontend"
    } else {
        "backend"
    };
    let section = label(p.kind, &p.name);
    let mut check = |cond: &Option<crate::rules::Cond>,
                     span: &Span,
                     phase: Phases,
                     kind: &str,
                     rule: &str| {
        let Some(cond) = cond else { return };
        for (name, phases) in cond.acl_phases() {
            if phases.0 & phase.0 != 0 {
                continue;
            }
            let msg = if name.starts_with('{') {
                format!(
                    "anonymous acl will never match in '{kind}' because it uses keywords which are incompatible with '{side} {rule}'"
                )
            } else {
                format!(
                    "acl '{name}' will never match because it only involves keywords that are incompatible with '{side} {rule}'"
                )
            };
            push_unique(diags, Diagnostic::warning(Some(span), Some(&section), msg));
        }
    };
    for r in &out.tcp_request_connection {
        let k = "tcp-request connection";
        check(
            &r.cond,
            &r.span,
            Phases::CONN,
            k,
            "tcp-request connection rule",
        );
    }
    for r in &out.tcp_request_session {
        let k = "tcp-request session";
        check(
            &r.cond,
            &r.span,
            Phases::SESS,
            k,
            "tcp-request session rule",
        );
    }
    for r in &out.tcp_request_content {
        let k = "tcp-request content";
        check(&r.cond, &r.span, Phases::REQ, k, "tcp-request content rule");
    }
    for r in &out.http_request {
        check(
            &r.cond,
            &r.span,
            Phases::REQ,
            "http-request",
            "http-request header rule",
        );
    }
    for r in &out.redirects {
        check(&r.cond, &r.span, Phases::REQ, "redirect", "redirect rule");
    }
    for r in &out.use_backends {
        check(
            &r.cond,
            &r.span,
            Phases::REQ,
            "use_backend",
            "use-backend rule",
        );
    }
    for r in &out.use_servers {
        check(
            &r.cond,
            &r.span,
            Phases::REQ,
            "use-server",
            "use-server rule",
        );
    }
    for r in &out.persist {
        let kw = match r.action {
            PersistRule::Force => "force-persist",
            PersistRule::Ignore => "ignore-persist",
        };
        check(&r.cond, &r.span, Phases::REQ, kw, "persist rule");
    }
    for r in &out.http_response {
        check(
            &r.cond,
            &r.span,
            Phases::RES,
            "http-response",
            "http-response header rule",
        );
    }
    for r in &out.http_after_response {
        let k = "http-after-response";
        check(&r.cond, &r.span, Phases::RES, k, "http-after-response rule");
    }
    for r in &out.tcp_response_content {
        let k = "tcp-response content";
        check(
            &r.cond,
            &r.span,
            Phases::RES,
            k,
            "tcp-response content rule",
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn compile_lines(
    lines: &[RuleLine],
    section: &str,
    p: &ProxyDraft,
    own_backend: Option<usize>,
    env: &Env<'_>,
    caps: &mut Slots,
    out: &mut ProxyRules,
    diags: &mut Vec<Diagnostic>,
) {
    let mut acls = Acls::new();
    for line in lines {
        let span = &line.span;
        let err = |diags: &mut Vec<Diagnostic>, e: RuleError| {
            push_unique(
                diags,
                Diagnostic::alert(
                    Some(span),
                    Some(section),
                    format!("'{}': {}", line.text(), e.message),
                ),
            );
        };
        if line.kind == RuleKind::Acl {
            let name = &line.words[1];
            match compile_acl(name, &line.words[2..], env.names, &mut acls) {
                Ok(warnings) => {
                    for w in warnings {
                        push_unique(
                            diags,
                            Diagnostic::warning(
                                Some(span),
                                Some(section),
                                format!("acl '{name}': {}", w.message),
                            ),
                        );
                    }
                }
                Err(e) => err(
                    diags,
                    RuleError::new(format!("acl '{name}': {}", e.message)),
                ),
            }
            continue;
        }
        let mut c = Compiler {
            names: env.names,
            acls: &acls,
            has_backend: p.kind.has_backend(),
            experimental: env.experimental,
            req_captures: caps.known.0,
            res_captures: caps.known.1,
            warnings: Vec::new(),
        };
        let args = line.args();
        let res: Result<(), RuleError> = (|| {
            match line.kind {
                RuleKind::HttpRequest => {
                    let (mut a, cond) = action::compile_http_request(args, &mut c)?;
                    if let HttpReqAction::Capture { slot, .. } = &mut a {
                        if let CaptureSlot::New { len } = *slot {
                            *slot = CaptureSlot::Id(caps.add(span, len));
                        }
                    }
                    out.http_request.push(mk(a, cond, line));
                }
                RuleKind::HttpResponse => {
                    let (a, cond) = action::compile_http_response(args, &mut c)?;
                    out.http_response.push(mk(a, cond, line));
                }
                RuleKind::HttpAfterResponse => {
                    let (a, cond) = action::compile_http_after_response(args, &mut c)?;
                    out.http_after_response.push(mk(a, cond, line));
                }
                RuleKind::TcpRequestConnection
                | RuleKind::TcpRequestSession
                | RuleKind::TcpRequestContent => {
                    let phase = match line.kind {
                        RuleKind::TcpRequestConnection => TcpPhase::Connection,
                        RuleKind::TcpRequestSession => TcpPhase::Session,
                        _ => TcpPhase::Content,
                    };
                    let (mut a, cond) = action::compile_tcp_request(phase, args, &mut c)?;
                    if let TcpReqAction::Capture { len, slot, .. } = &mut a {
                        *slot = caps.add(span, *len);
                    }
                    let list = match phase {
                        TcpPhase::Connection => &mut out.tcp_request_connection,
                        TcpPhase::Session => &mut out.tcp_request_session,
                        TcpPhase::Content => &mut out.tcp_request_content,
                    };
                    list.push(mk(a, cond, line));
                }
                RuleKind::TcpResponseContent => {
                    let (a, cond) = action::compile_tcp_response(args, &mut c)?;
                    out.tcp_response_content.push(mk(a, cond, line));
                }
                RuleKind::Redirect => {
                    let (a, cond) = action::compile_redirect(args, &mut c)?;
                    out.redirects.push(mk(a, cond, line));
                }
                RuleKind::UseBackend => {
                    let name = &line.words[1];
                    let target = if name.contains('%') {
                        BackendTarget::Dynamic(LfString::compile(name, env.names)?)
                    } else {
                        let Some(i) = env.names.backend(name) else {
                            let hint =
                                suggest(name, env.names.backends.iter().map(|b| b.0.as_str()))
                                    .map(|h| format!("; {h}"))
                                    .unwrap_or_default();
                            return Err(RuleError::new(format!("no backend named '{name}'{hint}")));
                        };
                        if env.modes[i] != p.mode {
                            return Err(RuleError::new(format!(
                                "backend '{name}' is in mode {} but the frontend is in mode {}; the modes must match",
                                mode_word(env.modes[i]),
                                mode_word(p.mode)
                            )));
                        }
                        BackendTarget::Static(i)
                    };
                    let cond = action::compile_condition(&line.words[2..], &mut c)?;
                    out.use_backends.push(mk(target, cond, line));
                }
                RuleKind::UseServer => {
                    let name = &line.words[1];
                    let be = own_backend.ok_or_else(|| RuleError::new("no backend side"))?;
                    let Some(i) = env.names.server(be, name) else {
                        let hint =
                            suggest(name, env.names.backends[be].1.iter().map(String::as_str))
                                .map(|h| format!("; {h}"))
                                .unwrap_or_default();
                        return Err(RuleError::new(format!(
                            "no server named '{name}' in this backend{hint}"
                        )));
                    };
                    let cond = action::compile_condition(&line.words[2..], &mut c)?;
                    out.use_servers.push(mk(i, cond, line));
                }
                RuleKind::Stick => {
                    let (rule, cond) = action::compile_stick(args, &mut c)?;
                    out.stick.push(mk(rule, cond, line));
                }
                RuleKind::ForcePersist | RuleKind::IgnorePersist => {
                    let cond = action::compile_condition(&line.words[1..], &mut c)?;
                    let kind = if line.kind == RuleKind::ForcePersist {
                        PersistRule::Force
                    } else {
                        PersistRule::Ignore
                    };
                    out.persist.push(mk(kind, cond, line));
                }
                RuleKind::StatsHttpRequest => {
                    let (a, cond) = action::compile_http_request(args, &mut c)?;
                    out.stats_http_request.push(mk(a, cond, line));
                }
                RuleKind::MonitorFail => {
                    let cond = action::compile_condition(args, &mut c)?;
                    out.monitor_fail.push(mk((), cond, line));
                }
                RuleKind::StatsAdmin => {
                    let cond = action::compile_condition(args, &mut c)?;
                    out.stats_admin.push(mk((), cond, line));
                }
                RuleKind::Acl => unreachable!("handled above"),
            }
            Ok(())
        })();
        for w in std::mem::take(&mut c.warnings) {
            push_unique(diags, Diagnostic::warning(Some(span), Some(section), w));
        }
        caps.known = (c.req_captures, c.res_captures);
        if let Err(e) = res {
            err(diags, e);
        }
    }
    acls.finish();
}

fn mk<A>(action: A, cond: Option<crate::rules::Cond>, line: &RuleLine) -> Rule<A> {
    Rule {
        action,
        cond,
        span: line.span.clone(),
        text: line.text(),
    }
}

fn mode_word(m: Mode) -> &'static str {
    match m {
        Mode::Tcp => "tcp",
        Mode::Http => "http",
    }
}

/// HAProxy's checks of proxies sharing a `defaults` section with rules: frontends and backends
/// may not both inherit it, a backend may not inherit `tcp-request connection|session`, and a
/// frontend may not inherit `tcp-response content`.
pub fn check_inheritance(proxies: &[ProxyDraft], diags: &mut Vec<Diagnostic>) {
    // defaults header span -> (first frontend-side user, first backend-side user)
    let mut users: HashMap<Span, (bool, bool)> = HashMap::new();
    for p in proxies {
        let Some(inh) = &p.inherited_rules else {
            continue;
        };
        let section = label(p.kind, &p.name);
        if p.kind == crate::config::keywords::SectionKind::Listen {
            continue; // refused by the parser
        }
        if p.kind.has_backend() && inh.has_l4_session_rules() {
            diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&section),
                format!(
                    "a backend section cannot inherit from a defaults section defining 'tcp-request connection' or 'tcp-request session' rules ({} at {})",
                    inh.section, inh.span
                ),
            ));
        }
        if !p.kind.has_backend() && inh.has_tcp_response_rules() {
            diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&section),
                format!(
                    "a frontend section cannot inherit from a defaults section defining 'tcp-response content' rules ({} at {})",
                    inh.section, inh.span
                ),
            ));
        }
        let e = users.entry(inh.span.clone()).or_default();
        let (fe, be) = (p.kind.has_frontend(), p.kind.has_backend());
        if (fe && e.1) || (be && e.0) {
            diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&section),
                format!(
                    "frontends and backends cannot inherit from the same defaults section if it defines TCP/HTTP rules ({} at {})",
                    inh.section, inh.span
                ),
            ));
        }
        e.0 |= fe;
        e.1 |= be;
    }
}
