//! Rule keywords of proxy sections: `acl`, `http-request`, `http-response`,
//! `http-after-response`, `tcp-request`, `tcp-response`, `redirect`, `use_backend`,
//! `use-server`.
//!
//! At parse time a rule line is only checked for where it may appear and stored with its
//! words and span ([`RuleLine`]): an ACL must be declared before the rule that uses it, but a
//! rule may name a backend, server or userlist declared further down, so rules are compiled
//! in the validate stage (`config::validate::rules`) once every name is known. What is checked
//! here is what HAProxy checks while reading the line: the section, and the order of rule
//! sets (a rule placed after one that runs later gets HAProxy's warning).

use super::{Ctx, Problem, ProxyDraft, SectionKind};
use crate::config::diag::{suggest, Span};

/// Which rule set a stored line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    Acl,
    TcpRequestConnection,
    TcpRequestSession,
    TcpRequestContent,
    TcpResponseContent,
    HttpRequest,
    HttpResponse,
    HttpAfterResponse,
    Redirect,
    UseBackend,
    UseServer,
    /// `stick match|on|store-request|store-response`.
    Stick,
    ForcePersist,
    IgnorePersist,
    /// `stats admin if|unless COND`.
    StatsAdmin,
    /// `stats http-request ACTION [if|unless COND]`.
    StatsHttpRequest,
    /// `monitor fail if|unless COND`.
    MonitorFail,
}

impl RuleKind {
    /// Rank in HAProxy's request processing order, for the "will still be processed before"
    /// warnings; `None` for sets outside that order.
    fn rank(self) -> Option<usize> {
        Some(match self {
            RuleKind::TcpRequestConnection => 0,
            RuleKind::TcpRequestSession => 1,
            RuleKind::TcpRequestContent => 2,
            RuleKind::HttpRequest => 3,
            RuleKind::Redirect => 4,
            RuleKind::UseBackend => 5,
            _ => return None,
        })
    }
}

/// HAProxy's names of ranked rule sets, as "placed after ..." says them.
const AFTER: [&str; 6] = [
    "a 'tcp-request connection'",
    "a 'tcp-request session'",
    "a 'tcp-request content'",
    "an 'http-request'",
    "a 'redirect'",
    "a 'use_backend'",
];

/// A rule line as written, compiled in the validate stage.
#[derive(Debug, Clone)]
pub struct RuleLine {
    pub kind: RuleKind,
    /// Every word of the line, the keyword included.
    pub words: Vec<String>,
    pub span: Span,
}

impl RuleLine {
    /// The words after the keyword (and after `connection|session|content` for tcp rules).
    pub fn args(&self) -> &[String] {
        let skip = match self.kind {
            RuleKind::TcpRequestConnection
            | RuleKind::TcpRequestSession
            | RuleKind::TcpRequestContent
            | RuleKind::TcpResponseContent
            | RuleKind::StatsAdmin
            | RuleKind::StatsHttpRequest
            | RuleKind::MonitorFail => 2,
            _ => 1,
        };
        &self.words[skip.min(self.words.len())..]
    }

    /// The line as written, for `--explain` and messages.
    pub fn text(&self) -> String {
        self.words.join(" ")
    }
}

/// The rule lines a proxy inherits from its `defaults` section, evaluated before its own (as
/// HAProxy does); their ACLs are the defaults section's own.
#[derive(Debug, Clone)]
pub struct InheritedRules {
    /// The defaults section, as shown in messages.
    pub section: String,
    /// Its header line: the identity used to find proxies sharing it.
    pub span: Span,
    pub lines: Vec<RuleLine>,
}

impl InheritedRules {
    /// True when some line is a `tcp-request connection` or `session` rule (a backend may
    /// not inherit those).
    pub fn has_l4_session_rules(&self) -> bool {
        self.lines.iter().any(|l| {
            matches!(
                l.kind,
                RuleKind::TcpRequestConnection | RuleKind::TcpRequestSession
            )
        })
    }

    /// True when some line is a `tcp-response content` rule (a frontend may not inherit
    /// those).
    pub fn has_tcp_response_rules(&self) -> bool {
        self.lines
            .iter()
            .any(|l| l.kind == RuleKind::TcpResponseContent)
    }
}

/// True when a line of kind `kind` makes a `defaults` section one "defining TCP/HTTP rules".
pub fn is_rule(kind: RuleKind) -> bool {
    kind != RuleKind::Acl
}

/// Refuses rule keywords in an anonymous `defaults` section, as HAProxy 2.6 does.
fn named_defaults(p: &ProxyDraft, ctx: &Ctx<'_>, what: &str) -> Result<(), Problem> {
    if p.kind == SectionKind::Defaults && p.name.is_empty() {
        return Err(format!(
            "'{what}' is not allowed in an anonymous 'defaults' section (name the section and inherit it with 'from NAME')"
        )
        .into());
    }
    let _ = ctx;
    Ok(())
}

/// Stores the line, after HAProxy's ordering warning.
fn push(p: &mut ProxyDraft, ctx: &mut Ctx<'_>, kind: RuleKind, kw: &str) {
    if let Some(rank) = kind.rank() {
        if let Some(later) = (rank + 1..AFTER.len()).find(|r| p.seen_ranks & (1 << r) != 0) {
            ctx.warn(format!(
                "a '{kw}' rule placed after {} rule will still be processed before",
                AFTER[later]
            ));
        }
        p.seen_ranks |= 1 << rank;
    }
    p.rule_lines.push(RuleLine {
        kind,
        words: ctx.args.to_vec(),
        span: ctx.span.clone(),
    });
}

/// `monitor fail if|unless COND`: a `monitor-uri` request is answered 503 when COND holds.
pub(super) fn monitor(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if ctx.kind == SectionKind::Defaults {
        return Err("'monitor' not allowed in 'defaults' section.".into());
    }
    if ctx.arg(1) != Some("fail") {
        return Err("'monitor' only supports 'fail'.".into());
    }
    if !matches!(ctx.arg(2), Some("if" | "unless")) {
        return Err(
            "'monitor fail' requires either 'if' or 'unless' followed by a condition.".into(),
        );
    }
    push(p, ctx, RuleKind::MonitorFail, "monitor fail");
    Ok(())
}

pub(super) fn acl(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    named_defaults(p, ctx, "acl")?;
    ctx.need(1, "an ACL name and a criterion")?;
    ctx.need(2, "a criterion after the ACL name")?;
    push(p, ctx, RuleKind::Acl, "acl");
    Ok(())
}

pub(super) fn http_request(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    named_defaults(p, ctx, "http-request")?;
    ctx.need(1, "an action")?;
    push(p, ctx, RuleKind::HttpRequest, "http-request");
    Ok(())
}

pub(super) fn http_response(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    named_defaults(p, ctx, "http-response")?;
    ctx.need(1, "an action")?;
    push(p, ctx, RuleKind::HttpResponse, "http-response");
    Ok(())
}

pub(super) fn http_after_response(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    named_defaults(p, ctx, "http-after-response")?;
    ctx.need(1, "an action")?;
    push(p, ctx, RuleKind::HttpAfterResponse, "http-after-response");
    Ok(())
}

pub(super) fn tcp_request(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    named_defaults(p, ctx, "tcp-request")?;
    let which = ctx.need(1, "'connection', 'session', 'content' or 'inspect-delay'")?;
    let kind = match which {
        "inspect-delay" => {
            let v = ctx.need(2, "a time")?;
            p.inspect_delay = Some(
                crate::config::values::time(v)
                    .map_err(|e| format!("'tcp-request inspect-delay {v}': {e}"))?,
            );
            return ctx.no_more(2);
        }
        "connection" => RuleKind::TcpRequestConnection,
        "session" => RuleKind::TcpRequestSession,
        "content" => RuleKind::TcpRequestContent,
        other => {
            let hint = suggest(other, ["connection", "session", "content", "inspect-delay"]);
            return Err(Problem::with_hint(
                format!("'tcp-request' expects 'connection', 'session', 'content' or 'inspect-delay', not '{other}'"),
                hint,
            ));
        }
    };
    if kind != RuleKind::TcpRequestContent && p.kind == SectionKind::Backend {
        return Err(format!(
            "'tcp-request {which}' is not allowed in a backend section (it runs when a frontend accepts a connection)"
        )
        .into());
    }
    ctx.need(2, "an action")?;
    push(p, ctx, kind, "tcp-request");
    Ok(())
}

pub(super) fn tcp_response(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    named_defaults(p, ctx, "tcp-response")?;
    if p.kind == SectionKind::Frontend {
        return Err(
            "'tcp-response' is only allowed in backend and listen sections and named defaults sections"
                .into(),
        );
    }
    match ctx.need(1, "'content' or 'inspect-delay'")? {
        "inspect-delay" => {
            let v = ctx.need(2, "a time")?;
            p.res_inspect_delay = Some(
                crate::config::values::time(v)
                    .map_err(|e| format!("'tcp-response inspect-delay {v}': {e}"))?,
            );
            ctx.no_more(2)
        }
        "content" => {
            ctx.need(2, "an action")?;
            push(p, ctx, RuleKind::TcpResponseContent, "tcp-response");
            Ok(())
        }
        other => Err(
            format!("'tcp-response' expects 'content' or 'inspect-delay', not '{other}'").into(),
        ),
    }
}

pub(super) fn redirect(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "'location', 'prefix' or 'scheme' and a target")?;
    push(p, ctx, RuleKind::Redirect, "redirect");
    Ok(())
}

pub(super) fn use_backend(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "a backend name")?;
    if let Some(w) = ctx.arg(2) {
        if w != "if" && w != "unless" {
            return Err(format!(
                "'use_backend {}': expects 'if' or 'unless' followed by a condition, not '{w}'",
                ctx.args[1]
            )
            .into());
        }
    }
    push(p, ctx, RuleKind::UseBackend, "use_backend");
    Ok(())
}

pub(super) fn stick(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if p.kind == SectionKind::Defaults {
        return Err("'stick' is not allowed in a 'defaults' section".into());
    }
    let which = ctx.need(1, "'on', 'match', 'store-request' or 'store-response'")?;
    let all = ["on", "match", "store-request", "store-response"];
    if !all.contains(&which) {
        let hint = suggest(which, all);
        return Err(Problem::with_hint(
            format!(
                "'stick' expects 'on', 'match', 'store-request' or 'store-response', not '{which}'"
            ),
            hint,
        ));
    }
    ctx.need(2, "a fetch method")?;
    push(p, ctx, RuleKind::Stick, "stick");
    Ok(())
}

pub(super) fn use_server(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "a server name")?;
    if let Some(w) = ctx.arg(2) {
        if w != "if" && w != "unless" {
            return Err(format!(
                "'use-server {}': expects 'if' or 'unless' followed by a condition, not '{w}'",
                ctx.args[1]
            )
            .into());
        }
    }
    push(p, ctx, RuleKind::UseServer, "use-server");
    Ok(())
}

/// `force-persist if|unless COND` and `ignore-persist if|unless COND`.
fn persist_rule(p: &mut ProxyDraft, ctx: &mut Ctx<'_>, kind: RuleKind) -> Result<(), Problem> {
    let kw = ctx.kw().to_string();
    match ctx.arg(1) {
        Some("if") | Some("unless") if ctx.arg(2).is_some() => {}
        _ => {
            return Err(
                format!("'{kw}' requires either 'if' or 'unless' followed by a condition").into(),
            )
        }
    }
    push(p, ctx, kind, &kw);
    Ok(())
}

pub(super) fn force_persist(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    persist_rule(p, ctx, RuleKind::ForcePersist)
}

pub(super) fn ignore_persist(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    persist_rule(p, ctx, RuleKind::IgnorePersist)
}
