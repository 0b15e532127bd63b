//! Rule actions: what `http-request`, `http-response`, `http-after-response`, `tcp-request`,
//! `tcp-response` and `redirect` lines do, compiled once at load into typed values.
//!
//! # Model
//!
//! Every rule line becomes a [`Rule<A>`]: the action `A` ([`HttpReqAction`], [`HttpResAction`],
//! [`HttpAfterAction`], [`TcpReqAction`], [`TcpResAction`], or [`Redirect`] for the `redirect`
//! keyword), its optional condition ([`Cond`], `if`/`unless` already folded in), and where it
//! was written (its [`Span`] and text) for diagnostics and `--explain`. Values that are
//! log-format strings are [`LfString`]s; sample expressions are [`Expr`]s; names (backends,
//! userlists, variables) are already indices or ids.
//!
//! # Evaluation (for the runtime)
//!
//! A proxy keeps one list per rule set, evaluated in HAProxy's order (see
//! `config::model::Frontend`): each list is walked in order; a rule whose condition is false is
//! skipped; a rule whose action is *final* ([`HttpReqAction::is_final`]: allow, deny, reject,
//! tarpit, auth, redirect, return) stops the list. `allow` stops only the current list (the
//! next list still runs); the others end the transaction.
//!
//! # Compiling
//!
//! [`Compiler`] holds what compiling needs (names, the proxy's ACLs, capabilities). Each
//! `compile_*` function takes the words after the keyword (`deny deny_status 429 if bad`),
//! parses the action, then the condition, and returns the rule or a [`RuleError`] naming the
//! word at fault. Actions of later issues are a clear "not supported yet" error.

use std::time::Duration;

use super::lf::LfString;
use super::stick::{self, GptValue, ScAction, StickKind, StickRule, TrackSc};
use super::{compile_cond, Acls, Cond, Expr, Names, Phases, Polarity, RuleError, Scope};
use crate::config::diag::Span;

/// One rule: its action, its condition and where it was written.
#[derive(Debug)]
pub struct Rule<A> {
    pub action: A,
    /// `None`: the rule always applies.
    pub cond: Option<Cond>,
    /// `file:line` of the rule, for diagnostics and `--explain`.
    pub span: Span,
    /// The line as written (its words joined by single spaces).
    pub text: String,
}

/// A variable an action writes: `set-var(txn.name)`; `id` is the interned id the runtime's
/// [`super::Source::set_var`] takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarRef {
    pub scope: Scope,
    pub name: String,
    pub id: usize,
    /// `set-var(NAME,ifexists,...)`: when to set it.
    pub cond: super::vars::VarCond,
}

/// `redirect location|prefix|scheme`: where the target goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedirectKind {
    /// `Location: TARGET`.
    Location,
    /// `Location: TARGET` followed by the request's path (and query unless `drop-query`);
    /// `prefix /` means "the same path" (used with cookies).
    Prefix,
    /// `Location: TARGET://` + the request's Host + path (and query unless `drop-query`).
    Scheme,
}

/// A `redirect` line or `http-request|http-response redirect` action.
#[derive(Debug)]
pub struct Redirect {
    pub kind: RedirectKind,
    pub target: LfString,
    /// 301, 302 (default), 303, 307 or 308.
    pub code: u16,
    pub drop_query: bool,
    /// `append-slash` (with `drop-query`): add a `/` to a path that does not end with one.
    pub append_slash: bool,
    /// `ignore-empty`: no redirect when the target evaluates to an empty string.
    pub ignore_empty: bool,
    /// `set-cookie NAME[=VALUE]`: a `Set-Cookie: NAME=VALUE; path=/` header.
    pub set_cookie: Option<String>,
    /// `clear-cookie NAME[=]`: a `Set-Cookie: NAME=; Max-Age=0; path=/` header.
    pub clear_cookie: Option<String>,
}

/// The body of a generated reply.
#[derive(Debug)]
pub enum ReplyBody {
    /// No body.
    Empty,
    /// `string TEXT` / `file PATH` (read at load).
    Bytes(Vec<u8>),
    /// `lf-string FMT` / `lf-file PATH` (compiled at load).
    Format(LfString),
    /// `errorfile PATH`: a raw HTTP response (status line, head and body) sent as is (empty:
    /// the connection closes without a response).
    Raw(Vec<u8>),
    /// `default-errorfiles`, or `errorfiles NAME` for a status the section does not declare:
    /// the proxy's error page for the status (its `errorfile`, else the built-in one).
    ErrorPage,
}

/// A reply built by `deny`, `tarpit`, `return` (HAProxy 2.6's http-reply arguments).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// `content-type TYPE`, only with a body.
    pub content_type: Option<String>,
    pub body: ReplyBody,
    /// `hdr NAME FMT`, in order (not with `errorfile`).
    pub headers: Vec<(String, LfString)>,
}

impl Reply {
    /// A reply with HAProxy's built-in page for `status` (an `errorfile` of the proxy, when
    /// configured, replaces it at run time).
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            content_type: None,
            body: ReplyBody::Empty,
            headers: Vec::new(),
        }
    }

    /// True when nothing but the status was given: the runtime sends its error page for it.
    pub fn is_default(&self) -> bool {
        matches!(self.body, ReplyBody::Empty) && self.headers.is_empty()
    }
}

/// How `del-header NAME -m METHOD` compares header names.
#[derive(Debug)]
pub enum NameMatch {
    /// `str` (default): case-insensitive equality.
    Exact(String),
    Prefix(String),
    Suffix(String),
    Substring(String),
    Regex(regex::bytes::Regex),
}

/// `set-log-level LEVEL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// A syslog severity, 0 (emerg) to 7 (debug).
    Level(u8),
    /// `silent`: the transaction is not logged.
    Silent,
}

/// `normalize-uri` normalizers (HAProxy 2.6, experimental).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalizer {
    PathMergeSlashes,
    PathStripDot,
    PathStripDotdot { full: bool },
    PercentDecodeUnreserved { strict: bool },
    PercentToUppercase { strict: bool },
    QuerySortByName,
    FragmentStrip,
    FragmentEncode,
}

/// `set-timeout server|tunnel`: which timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutKind {
    Server,
    Tunnel,
}

/// A value given as a constant or as a sample expression evaluated per request.
#[derive(Debug)]
pub enum TimeValue {
    Fixed(Duration),
    /// An integer sample in milliseconds.
    Expr(Expr),
}

/// Where `capture` stores its sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureSlot {
    /// `len N`: a new capture slot of N bytes (after the proxy's `capture request header` slots).
    New { len: usize },
    /// `id N`: an existing slot.
    Id(usize),
}

/// The header actions shared by `http-request`, `http-response` and `http-after-response`.
#[derive(Debug)]
pub enum HeaderAction {
    /// `set-header NAME FMT`: remove every `NAME` header, add one.
    Set { name: String, value: LfString },
    /// `add-header NAME FMT`.
    Add { name: String, value: LfString },
    /// `del-header NAME [-m METHOD]`.
    Del { name: NameMatch },
    /// `replace-header NAME REGEX FMT`: on each whole `NAME` header line.
    Replace {
        name: String,
        regex: regex::bytes::Regex,
        replace: LfString,
    },
    /// `replace-value NAME REGEX FMT`: on each comma-separated value of `NAME`.
    ReplaceValue {
        name: String,
        regex: regex::bytes::Regex,
        replace: LfString,
    },
}

/// The variable actions shared by every rule set.
#[derive(Debug)]
pub enum VarAction {
    /// `set-var(SCOPE.NAME) EXPR`.
    Set { var: VarRef, expr: Expr },
    /// `set-var-fmt(SCOPE.NAME) FMT`.
    SetFmt { var: VarRef, fmt: LfString },
    /// `unset-var(SCOPE.NAME)`.
    Unset { var: VarRef },
}

/// An `http-request` action.
#[derive(Debug)]
pub enum HttpReqAction {
    /// Stop evaluating `http-request` rules; the request goes on.
    Allow,
    /// Answer with `reply` (default 403) and close.
    Deny(Reply),
    /// Close the connection without a response.
    Reject,
    /// Hold the connection for `timeout tarpit`, then answer `reply` (default 500).
    Tarpit(Reply),
    /// Answer 401 (407 in a proxy... not supported) with `WWW-Authenticate: Basic realm=...`.
    Auth {
        realm: Option<String>,
    },
    Redirect(Redirect),
    /// `return`: answer `reply` (default 200).
    Return(Reply),
    Header(HeaderAction),
    SetPath(LfString),
    SetPathQ(LfString),
    SetQuery(LfString),
    SetUri(LfString),
    SetMethod(LfString),
    /// `replace-path REGEX FMT`.
    ReplacePath {
        regex: regex::bytes::Regex,
        replace: LfString,
    },
    /// `replace-pathq REGEX FMT`.
    ReplacePathQ {
        regex: regex::bytes::Regex,
        replace: LfString,
    },
    /// `replace-uri REGEX FMT`.
    ReplaceUri {
        regex: regex::bytes::Regex,
        replace: LfString,
    },
    Var(VarAction),
    Capture {
        expr: Expr,
        slot: CaptureSlot,
    },
    SetLogLevel(LogLevel),
    /// `strict-mode on|off`: whether a failed rewrite by a later rule of the list is an error
    /// (500) or skipped.
    StrictMode(bool),
    NormalizeUri(Normalizer),
    /// `early-hint NAME FMT`: a header of a 103 Early Hints response sent at once.
    EarlyHint {
        name: String,
        value: LfString,
    },
    SetTimeout {
        which: TimeoutKind,
        value: TimeValue,
    },
    SetSrc(Expr),
    SetDst(Expr),
    SetSrcPort(Expr),
    SetDstPort(Expr),
    /// `wait-for-body time T [at-least SIZE]`.
    WaitForBody {
        time: Duration,
        at_least: Option<u64>,
    },
    TrackSc(TrackSc),
    Sc(ScAction),
}

impl HttpReqAction {
    /// True when the action stops the `http-request` list.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            HttpReqAction::Allow
                | HttpReqAction::Deny(_)
                | HttpReqAction::Reject
                | HttpReqAction::Tarpit(_)
                | HttpReqAction::Auth { .. }
                | HttpReqAction::Redirect(_)
                | HttpReqAction::Return(_)
        )
    }
}

/// An `http-response` action.
#[derive(Debug)]
pub enum HttpResAction {
    Allow,
    /// Replace the response with `reply` (default 502).
    Deny(Reply),
    Return(Reply),
    Redirect(Redirect),
    Header(HeaderAction),
    /// `set-status N [reason TEXT]`.
    SetStatus {
        status: u16,
        reason: Option<String>,
    },
    Var(VarAction),
    /// `capture EXPR id N`: a `declare capture response` slot.
    Capture {
        expr: Expr,
        id: usize,
    },
    SetLogLevel(LogLevel),
    /// `strict-mode on|off`, as for `http-request`.
    StrictMode(bool),
    WaitForBody {
        time: Duration,
        at_least: Option<u64>,
    },
    Sc(ScAction),
    TrackSc(TrackSc),
}

impl HttpResAction {
    /// True when the action stops the `http-response` list.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            HttpResAction::Allow
                | HttpResAction::Deny(_)
                | HttpResAction::Return(_)
                | HttpResAction::Redirect(_)
        )
    }
}

/// An `http-after-response` action (HAProxy 2.6's list: header actions, `set-status`,
/// variables, `allow`); also applied to responses Bascule generates.
#[derive(Debug)]
pub enum HttpAfterAction {
    Allow,
    Header(HeaderAction),
    SetStatus {
        status: u16,
        reason: Option<String>,
    },
    Var(VarAction),
    /// `strict-mode on|off`, as for `http-request`: whether a failed rewrite by a later rule
    /// of the list replaces the response with a 500.
    StrictMode(bool),
}

/// A `tcp-request connection|session|content` action.
#[derive(Debug)]
pub enum TcpReqAction {
    /// Stop this list; the connection goes on.
    Accept,
    /// Close the connection.
    Reject,
    Var(VarAction),
    /// `capture EXPR len N` (content only).
    /// `capture EXPR len N`: `slot` is the request capture slot (after the `capture request
    /// header` ones), numbered by the config layer.
    Capture {
        expr: Expr,
        len: usize,
        slot: usize,
    },
    SetSrc(Expr),
    SetDst(Expr),
    SetSrcPort(Expr),
    SetDstPort(Expr),
    TrackSc(TrackSc),
    Sc(ScAction),
    /// `expect-proxy layer4` (`tcp-request connection` only): the connection begins with a
    /// PROXY protocol header, read before anything else (a TLS handshake included), as if the
    /// bind said `accept-proxy`.
    ExpectProxy,
}

/// A `tcp-response content` action.
#[derive(Debug)]
pub enum TcpResAction {
    Accept,
    Reject,
    Var(VarAction),
}

/// Which `tcp-request` rule set a line belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpPhase {
    Connection,
    Session,
    Content,
}

impl TcpPhase {
    pub fn word(self) -> &'static str {
        match self {
            TcpPhase::Connection => "connection",
            TcpPhase::Session => "session",
            TcpPhase::Content => "content",
        }
    }

    fn phases(self) -> Phases {
        match self {
            TcpPhase::Connection => Phases::CONN,
            TcpPhase::Session => Phases::SESS,
            TcpPhase::Content => Phases::REQ,
        }
    }
}

/// What compiling a rule needs to know about its proxy and the whole configuration.
pub struct Compiler<'a> {
    pub names: &'a dyn Names,
    /// The proxy's ACLs declared before the rule.
    pub acls: &'a Acls,
    /// The proxy has a backend side (`set-timeout`).
    pub has_backend: bool,
    /// `expose-experimental-directives` is set in `global` (`normalize-uri`).
    pub experimental: bool,
    /// Request capture slots declared so far (`capture ... id N` refers to them).
    pub req_captures: usize,
    /// Response capture slots.
    pub res_captures: usize,
    /// Warnings raised while compiling (the caller reports them with the rule's span).
    pub warnings: Vec<String>,
}

/// The words of an action, consumed left to right; the condition is split off beforehand.
struct Args<'w> {
    /// The rule keyword and action, for messages (`http-request set-header`).
    what: String,
    words: &'w [String],
    pos: usize,
}

impl<'w> Args<'w> {
    fn next(&mut self, expected: &str) -> Result<&'w str, RuleError> {
        let w = self
            .words
            .get(self.pos)
            .ok_or_else(|| RuleError::new(format!("'{}' expects {expected}", self.what)))?;
        self.pos += 1;
        Ok(w)
    }

    fn peek(&self) -> Option<&'w str> {
        self.words.get(self.pos).map(String::as_str)
    }

    fn done(&self) -> Result<(), RuleError> {
        match self.peek() {
            None => Ok(()),
            Some(w) => Err(RuleError::new(format!(
                "'{}' expects either 'if' or 'unless' followed by a condition but found '{w}'",
                self.what
            ))),
        }
    }
}

/// Splits `words` at the first `if` or `unless` and compiles the condition after it.
fn split_cond<'w>(
    words: &'w [String],
    c: &mut Compiler<'_>,
    phases: Phases,
    what: &str,
) -> Result<(&'w [String], Option<Cond>), RuleError> {
    let Some(at) = words
        .iter()
        .skip(1)
        .position(|w| w == "if" || w == "unless")
        .map(|i| i + 1)
    else {
        return Ok((words, None));
    };
    let polarity = if words[at] == "if" {
        Polarity::If
    } else {
        Polarity::Unless
    };
    let rest = &words[at + 1..];
    if rest.is_empty() {
        return Err(RuleError::new(format!(
            "'{what}': '{}' expects a condition",
            words[at]
        )));
    }
    let (cond, warnings) = compile_cond(rest, polarity, c.acls, c.names)?;
    c.warnings.extend(
        warnings
            .into_iter()
            .map(|w| format!("'{what}': {}", w.message)),
    );
    let _ = phases;
    Ok((&words[..at], Some(cond)))
}

/// Reports `expr` used where its fetches are not available, as HAProxy does for sample
/// expressions (an error).
fn check_phases(got: Phases, want: Phases, what: &str, text: &str) -> Result<(), RuleError> {
    if got.contains(want) {
        return Ok(());
    }
    Err(RuleError::new(format!(
        "'{what}': '{text}' uses a sample fetch that is not available here ({})",
        describe(want)
    )))
}

/// A rule set's phase, in words.
fn describe(p: Phases) -> &'static str {
    match p {
        Phases::CONN => "'tcp-request connection' rules see only the connection's addresses",
        Phases::SESS => "'tcp-request session' rules run before any request data is read",
        Phases::REQ => "request rules run before any response exists",
        Phases::RES => "response rules run after the request is gone",
        _ => "wrong phase",
    }
}

fn expr(word: &str, c: &Compiler<'_>, phase: Phases, what: &str) -> Result<Expr, RuleError> {
    let e = Expr::compile(word, c.names)?;
    check_phases(e.phases(), phase, what, word)?;
    Ok(e)
}

fn lf(word: &str, c: &Compiler<'_>, phase: Phases, what: &str) -> Result<LfString, RuleError> {
    let l = LfString::compile(word, c.names)?;
    check_phases(l.phases(), phase, what, word)?;
    Ok(l)
}

/// A regex as HAProxy's (PCRE or POSIX) reads it: on bytes, `\w` and `-i` ASCII-only.
fn regex(word: &str, what: &str) -> Result<regex::bytes::Regex, RuleError> {
    regex::bytes::RegexBuilder::new(word)
        .unicode(false)
        .build()
        .map_err(|e| {
            RuleError::new(format!(
                "'{what}': bad regular expression '{word}': {}",
                regex_error(&e)
            ))
        })
}

/// The last line of a regex error (the first lines repeat the pattern with a caret).
fn regex_error(e: &regex::Error) -> String {
    let s = e.to_string();
    let last = s.lines().last().unwrap_or(&s).trim();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

/// `set-var(txn.name)` → the variable, interned.
fn var_of(action: &str, c: &Compiler<'_>) -> Result<VarRef, RuleError> {
    let inner = action
        .split_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .ok_or_else(|| {
            RuleError::new(format!(
                "'{action}': expects a variable name between parentheses, as in '{}(txn.name)'",
                action.split('(').next().unwrap_or(action)
            ))
        })?;
    let mut words = inner.split(',');
    let inner = words.next().unwrap_or_default();
    let mut cond = super::vars::VarCond::NONE;
    for w in words {
        if base(action) == "unset-var" {
            return Err(RuleError::new(format!(
                "'{action}': unset-var takes only a variable name"
            )));
        }
        if !cond.add(w) {
            return Err(RuleError::new(format!(
                "'{action}': unknown condition \"{w}\" (expected ifexists, ifnotexists, ifempty, ifnotempty, ifset, ifnotset, ifgt or iflt)"
            )));
        }
    }
    let bad = || {
        RuleError::new(format!(
            "invalid variable name '{inner}'. A variable name must start with its scope. The scope can be 'proc', 'sess', 'txn', 'req' or 'res'"
        ))
    };
    let (scope, name) = inner.split_once('.').ok_or_else(bad)?;
    let scope = Scope::parse(scope).ok_or_else(bad)?;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    {
        return Err(RuleError::new(format!(
            "invalid variable name '{inner}': use letters, digits, '_' and '.'"
        )));
    }
    Ok(VarRef {
        scope,
        name: name.to_string(),
        id: c.names.var(scope, name),
        cond,
    })
}

/// The action's base name: `set-var(txn.x)` → `set-var`.
fn base(action: &str) -> &str {
    action.split('(').next().unwrap_or(action)
}

fn var_action(
    action: &str,
    a: &mut Args<'_>,
    c: &Compiler<'_>,
    phase: Phases,
) -> Result<Option<VarAction>, RuleError> {
    Ok(Some(match base(action) {
        "set-var" => {
            let var = var_of(action, c)?;
            let e = expr(a.next("a sample expression")?, c, phase, &a.what)?;
            VarAction::Set { var, expr: e }
        }
        "set-var-fmt" => {
            let var = var_of(action, c)?;
            let fmt = lf(a.next("a log-format string")?, c, phase, &a.what)?;
            VarAction::SetFmt { var, fmt }
        }
        "unset-var" => VarAction::Unset {
            var: var_of(action, c)?,
        },
        _ => return Ok(None),
    }))
}

fn header_action(
    action: &str,
    a: &mut Args<'_>,
    c: &Compiler<'_>,
    phase: Phases,
) -> Result<Option<HeaderAction>, RuleError> {
    Ok(Some(match action {
        "set-header" | "add-header" => {
            let name = a.next("a header name and a log-format value")?.to_string();
            let value = lf(
                a.next("a log-format value after the header name")?,
                c,
                phase,
                &a.what,
            )?;
            if action == "set-header" {
                HeaderAction::Set { name, value }
            } else {
                HeaderAction::Add { name, value }
            }
        }
        "del-header" => {
            let name = a.next("a header name")?;
            let mut m = NameMatch::Exact(name.to_string());
            if a.peek() == Some("-m") {
                a.pos += 1;
                m = match a.next("a match method (str, beg, end, sub or reg) after '-m'")? {
                    "str" => NameMatch::Exact(name.to_string()),
                    "beg" => NameMatch::Prefix(name.to_ascii_lowercase()),
                    "end" => NameMatch::Suffix(name.to_ascii_lowercase()),
                    "sub" => NameMatch::Substring(name.to_ascii_lowercase()),
                    "reg" => NameMatch::Regex(
                        regex::bytes::RegexBuilder::new(name)
                            .case_insensitive(true)
                            .unicode(false)
                            .build()
                            .map_err(|e| {
                                RuleError::new(format!(
                                    "'{}': bad regular expression '{name}': {}",
                                    a.what,
                                    regex_error(&e)
                                ))
                            })?,
                    ),
                    other => {
                        return Err(RuleError::new(format!(
                        "'{}': unknown match method '{other}' (expected str, beg, end, sub or reg)",
                        a.what
                    )))
                    }
                };
            }
            HeaderAction::Del { name: m }
        }
        "replace-header" | "replace-value" => {
            let name = a
                .next("a header name, a regex and a replacement")?
                .to_string();
            let re = regex(a.next("a regex and a replacement")?, &a.what)?;
            let replace = lf(a.next("a replacement after the regex")?, c, phase, &a.what)?;
            if action == "replace-header" {
                HeaderAction::Replace {
                    name,
                    regex: re,
                    replace,
                }
            } else {
                HeaderAction::ReplaceValue {
                    name,
                    regex: re,
                    replace,
                }
            }
        }
        _ => return Ok(None),
    }))
}

/// HAProxy statuses a reply may carry.
fn status_code(word: &str, what: &str) -> Result<u16, RuleError> {
    word.parse::<u16>()
        .ok()
        .filter(|s| (200..=599).contains(s))
        .ok_or_else(|| {
            RuleError::new(format!(
                "'{what}': unexpected status code '{word}' (expected 200 to 599)"
            ))
        })
}

fn read_file(path: &str, what: &str) -> Result<Vec<u8>, RuleError> {
    std::fs::read(path)
        .map_err(|e| RuleError::new(format!("'{what}': cannot read file '{path}': {e}")))
}

/// Parses HAProxy's http-reply arguments: `[status|deny_status N] [content-type T]
/// [string|lf-string|file|lf-file|errorfile ARG] [hdr NAME FMT]*`, stopping at the end.
fn reply(
    a: &mut Args<'_>,
    c: &mut Compiler<'_>,
    phase: Phases,
    default_status: u16,
    status_words: &[&str],
) -> Result<Reply, RuleError> {
    let mut r = Reply::status(default_status);
    let mut has_body = false;
    let mut errorfile = false;
    // `errorfiles NAME`, looked up once the status is known.
    let mut section: Option<&str> = None;
    while let Some(w) = a.peek() {
        a.pos += 1;
        match w {
            _ if status_words.contains(&w) => {
                r.status = status_code(a.next("a status code")?, &a.what)?;
            }
            "content-type" => r.content_type = Some(a.next("a content type")?.to_string()),
            "string" | "lf-string" | "file" | "lf-file" | "errorfile" | "errorfiles"
            | "default-errorfiles" => {
                if has_body {
                    return Err(RuleError::new(format!(
                        "'{}': '{w}' conflicts with the body already given (one of string, lf-string, file, lf-file, errorfile, errorfiles, default-errorfiles)",
                        a.what
                    )));
                }
                has_body = true;
                if w == "default-errorfiles" {
                    errorfile = true;
                    r.body = ReplyBody::ErrorPage;
                    continue;
                }
                let arg = a.next("an argument")?;
                r.body = match w {
                    "string" => ReplyBody::Bytes(crate::config::rawbytes::bytes(arg).into_owned()),
                    "lf-string" => ReplyBody::Format(lf(arg, c, phase, &a.what)?),
                    "file" => ReplyBody::Bytes(read_file(arg, &a.what)?),
                    "lf-file" => {
                        let text = read_file(arg, &a.what)?;
                        let text = String::from_utf8_lossy(&text);
                        ReplyBody::Format(lf(&text, c, phase, &a.what)?)
                    }
                    "errorfile" => {
                        errorfile = true;
                        let raw = read_file(arg, &a.what)?;
                        crate::config::values::raw_http_response(&raw)
                            .map_err(|e| RuleError::new(format!("'{}': '{arg}': {e}", a.what)))?;
                        ReplyBody::Raw(raw)
                    }
                    _ => {
                        errorfile = true;
                        section = Some(arg);
                        ReplyBody::ErrorPage
                    }
                };
            }
            "hdr" => {
                let name = a.next("a header name and a value after 'hdr'")?.to_string();
                let lname = name.to_ascii_lowercase();
                if matches!(
                    lname.as_str(),
                    "content-length" | "transfer-encoding" | "content-type"
                ) {
                    return Err(RuleError::new(format!(
                        "'{}': header '{name}' may not be set with 'hdr' (it is computed)",
                        a.what
                    )));
                }
                let value = lf(a.next("a value after the header name")?, c, phase, &a.what)?;
                r.headers.push((name, value));
            }
            _ => {
                a.pos -= 1;
                break;
            }
        }
    }
    if let Some(name) = section {
        match c.names.http_error(name, r.status) {
            None => {
                return Err(RuleError::new(format!(
                    "'{}': unknown http-errors section '{name}'",
                    a.what
                )))
            }
            Some(Some(raw)) => r.body = ReplyBody::Raw(raw),
            Some(None) => {
                // As HAProxy 2.6 does: `deny` and `tarpit` (which set the transaction's status
                // first) fall back on the proxy's error page, `return` on an empty reply.
                let error_action = status_words.contains(&"deny_status");
                if !error_action {
                    r.body = ReplyBody::Empty;
                }
                c.warnings.push(format!(
                    "'{}': status '{}' not declared in http-errors section '{name}' ({})",
                    a.what,
                    r.status,
                    if error_action {
                        "the proxy's error page is used"
                    } else {
                        "an empty reply is sent"
                    }
                ));
            }
        }
    }
    if errorfile && (r.content_type.is_some() || !r.headers.is_empty()) {
        return Err(RuleError::new(format!(
            "'{}': 'errorfile' takes neither 'content-type' nor 'hdr' (the file is a whole response)",
            a.what
        )));
    }
    let non_empty = match &r.body {
        ReplyBody::Bytes(b) => !b.is_empty(),
        ReplyBody::Format(f) => f.literal().is_none_or(|l| !l.is_empty()),
        _ => false,
    };
    if non_empty && r.content_type.is_none() {
        return Err(RuleError::new(format!(
            "'{}': a content type must be given ('content-type TYPE') with a non-empty body",
            a.what
        )));
    }
    if !has_body && r.content_type.take().is_some() {
        c.warnings.push(format!(
            "'{}': content-type ignored because neither errorfile nor body is given",
            a.what
        ));
    }
    if non_empty && (r.status == 204 || r.status == 304) {
        return Err(RuleError::new(format!(
            "'{}': no body is allowed with status {}",
            a.what, r.status
        )));
    }
    Ok(r)
}

/// Compiles the words of an `http-error` line (after `http-error`) whose headers or body are
/// log-format strings: HAProxy's http-reply arguments, rendered when the error is sent, when
/// the request is known (so request fetches are allowed, as HAProxy allows them).
pub fn compile_http_error(words: &[String], c: &mut Compiler<'_>) -> Result<Reply, RuleError> {
    let mut a = Args {
        what: "http-error".into(),
        words,
        pos: 0,
    };
    let r = reply(&mut a, c, Phases::REQ, 200, &["status"])?;
    match a.peek() {
        None => Ok(r),
        Some(w) => Err(RuleError::new(format!(
            "'http-error': unexpected argument '{w}'"
        ))),
    }
}

/// Parses `location|prefix|scheme TARGET` and the options after `redirect`, in any order as
/// HAProxy reads them (`redirect code 301 location /x` is the same rule as
/// `redirect location /x code 301`; a second type word replaces the first, as in HAProxy).
fn redirect_args(a: &mut Args<'_>, c: &Compiler<'_>, phase: Phases) -> Result<Redirect, RuleError> {
    let mut kind_target: Option<(RedirectKind, LfString)> = None;
    // The options, until the type and target are known.
    let mut r = RedirectOpts {
        code: 302,
        drop_query: false,
        append_slash: false,
        ignore_empty: false,
        set_cookie: None,
        clear_cookie: None,
    };
    while let Some(w) = a.peek() {
        a.pos += 1;
        match w {
            "location" | "prefix" | "scheme" => {
                let kind = match w {
                    "location" => RedirectKind::Location,
                    "prefix" => RedirectKind::Prefix,
                    _ => RedirectKind::Scheme,
                };
                let target = lf(
                    a.next("a target after the redirect type")?,
                    c,
                    phase,
                    &a.what,
                )?;
                kind_target = Some((kind, target));
            }
            "code" => {
                let v = a.next("an HTTP status code")?;
                r.code = v
                    .parse()
                    .ok()
                    .filter(|c| [301, 302, 303, 307, 308].contains(c))
                    .ok_or_else(|| {
                        RuleError::new(format!(
                            "'{}': 'code': unsupported HTTP code '{v}' (must be one of 301, 302, 303, 307 or 308)",
                            a.what
                        ))
                    })?;
            }
            "drop-query" => r.drop_query = true,
            "append-slash" => r.append_slash = true,
            "ignore-empty" => r.ignore_empty = true,
            "set-cookie" => r.set_cookie = Some(a.next("a cookie NAME[=VALUE]")?.to_string()),
            "clear-cookie" => {
                r.clear_cookie = Some(a.next("a cookie NAME")?.trim_end_matches('=').to_string())
            }
            other if kind_target.is_none() => {
                let hint = crate::config::diag::suggest(other, ["location", "prefix", "scheme"])
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default();
                return Err(RuleError::new(format!(
                    "'{}': expects 'location', 'prefix' or 'scheme', not '{other}'{hint}",
                    a.what
                )));
            }
            other => {
                let opts = [
                    "code",
                    "drop-query",
                    "append-slash",
                    "ignore-empty",
                    "set-cookie",
                    "clear-cookie",
                ];
                let hint = crate::config::diag::suggest(other, opts)
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default();
                return Err(RuleError::new(format!(
                    "'{}': unexpected word '{other}' (expected code, drop-query, append-slash, ignore-empty, set-cookie, clear-cookie, if or unless){hint}",
                    a.what
                )));
            }
        }
    }
    let Some((kind, target)) = kind_target else {
        return Err(RuleError::new(format!(
            "'{}': expects 'location', 'prefix' or 'scheme' and a target",
            a.what
        )));
    };
    Ok(Redirect {
        kind,
        target,
        code: r.code,
        drop_query: r.drop_query,
        append_slash: r.append_slash,
        ignore_empty: r.ignore_empty,
        set_cookie: r.set_cookie,
        clear_cookie: r.clear_cookie,
    })
}

/// A redirect's options (see [`Redirect`]), read before its type and target may be.
struct RedirectOpts {
    code: u16,
    drop_query: bool,
    append_slash: bool,
    ignore_empty: bool,
    set_cookie: Option<String>,
    clear_cookie: Option<String>,
}

/// `strict-mode`'s argument.
fn on_off(a: &mut Args<'_>) -> Result<bool, RuleError> {
    match a.next("'on' or 'off'")? {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(RuleError::new(format!(
            "'{}': expects 'on' or 'off', found '{other}'",
            a.what
        ))),
    }
}

fn log_level(word: &str, what: &str) -> Result<LogLevel, RuleError> {
    const LEVELS: [&str; 8] = [
        "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
    ];
    if word == "silent" {
        return Ok(LogLevel::Silent);
    }
    LEVELS
        .iter()
        .position(|l| *l == word)
        .map(|i| LogLevel::Level(i as u8))
        .ok_or_else(|| {
            let hint = crate::config::diag::suggest(word, LEVELS.iter().copied().chain(["silent"]))
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            RuleError::new(format!(
                "'{what}': unknown log level '{word}' (expected emerg, alert, crit, err, warning, notice, info, debug or silent){hint}"
            ))
        })
}

fn wait_for_body(a: &mut Args<'_>) -> Result<(Duration, Option<u64>), RuleError> {
    let mut time = None;
    let mut at_least = None;
    while let Some(w) = a.peek() {
        a.pos += 1;
        match w {
            "time" => {
                let v = a.next("a time")?;
                time = Some(
                    crate::config::values::time(v)
                        .map_err(|e| RuleError::new(format!("'{}': 'time {v}': {e}", a.what)))?,
                );
            }
            "at-least" => {
                let v = a.next("a size")?;
                at_least =
                    Some(crate::config::values::size(v).map_err(|e| {
                        RuleError::new(format!("'{}': 'at-least {v}': {e}", a.what))
                    })?);
            }
            _ => {
                a.pos -= 1;
                break;
            }
        }
    }
    let time = time.ok_or_else(|| {
        RuleError::new(format!(
            "'{}' expects 'time <time>' [at-least <size>]",
            a.what
        ))
    })?;
    Ok((time, at_least))
}

fn capture_slot(
    a: &mut Args<'_>,
    allow_len: bool,
    declared: usize,
) -> Result<CaptureSlot, RuleError> {
    let kw = a.next(if allow_len {
        "'len N' or 'id N' after the sample expression"
    } else {
        "'id N' after the sample expression"
    })?;
    let v = a.next("a number")?;
    let n: usize = v
        .parse()
        .map_err(|_| RuleError::new(format!("'{}': '{kw} {v}': expects a number", a.what)))?;
    match kw {
        "len" if allow_len => {
            if n == 0 {
                return Err(RuleError::new(format!(
                    "'{}': 'len' must be at least 1",
                    a.what
                )));
            }
            Ok(CaptureSlot::New { len: n })
        }
        "id" => {
            if n >= declared {
                return Err(RuleError::new(format!(
                    "'{}': unable to find capture id '{n}' (the proxy declares {declared} capture slots)",
                    a.what
                )));
            }
            Ok(CaptureSlot::Id(n))
        }
        other => Err(RuleError::new(format!(
            "'{}': expects '{}', found '{other}'",
            a.what,
            if allow_len { "len' or 'id" } else { "id" }
        ))),
    }
}

/// HAProxy 2.6 actions of each rule set that belong to later work: "not supported yet".
const LATER_ACTIONS: &[&str] = &[
    "track-sc",
    "use-service",
    "cache-use",
    "cache-store",
    "do-resolve",
    "set-map",
    "del-map",
    "add-acl",
    "del-acl",
    "silent-drop",
    "send-spoe-group",
    "set-mark",
    "set-tos",
    "set-nice",
    "set-priority-class",
    "set-priority-offset",
    "disable-l7-retry",
    "strict-mode",
    "wait-for-handshake",
    "ot-group",
    "expect-netscaler-cip",
    "switch-mode",
    "set-bandwidth-limit",
];

const HTTP_REQ_ACTIONS: &[&str] = &[
    "allow",
    "deny",
    "reject",
    "tarpit",
    "auth",
    "redirect",
    "return",
    "set-header",
    "add-header",
    "del-header",
    "replace-header",
    "replace-value",
    "set-path",
    "set-pathq",
    "set-query",
    "set-uri",
    "set-method",
    "replace-path",
    "replace-pathq",
    "replace-uri",
    "set-var",
    "set-var-fmt",
    "unset-var",
    "capture",
    "set-log-level",
    "normalize-uri",
    "early-hint",
    "set-timeout",
    "set-src",
    "set-dst",
    "set-src-port",
    "set-dst-port",
    "wait-for-body",
    "strict-mode",
];

const HTTP_RES_ACTIONS: &[&str] = &[
    "allow",
    "deny",
    "return",
    "redirect",
    "set-header",
    "add-header",
    "del-header",
    "replace-header",
    "replace-value",
    "set-status",
    "set-var",
    "set-var-fmt",
    "unset-var",
    "capture",
    "set-log-level",
    "wait-for-body",
    "strict-mode",
];

const HTTP_AFTER_ACTIONS: &[&str] = &[
    "allow",
    "set-header",
    "add-header",
    "del-header",
    "replace-header",
    "replace-value",
    "set-status",
    "set-var",
    "set-var-fmt",
    "unset-var",
    "strict-mode",
];

const TCP_REQ_ACTIONS: &[&str] = &[
    "accept",
    "reject",
    "set-var",
    "set-var-fmt",
    "unset-var",
    "capture",
    "set-src",
    "set-dst",
    "set-src-port",
    "set-dst-port",
    "expect-proxy",
];

const TCP_RES_ACTIONS: &[&str] = &[
    "accept",
    "reject",
    "close",
    "set-var",
    "set-var-fmt",
    "unset-var",
];

/// The error for an action that is not in `known`: "not supported yet" for a HAProxy action of
/// a later issue, else "unknown" with the nearest known action.
fn unknown_action(what: &str, action: &str, known: &[&str], later: &[&str]) -> RuleError {
    let b = base(action);
    if later.contains(&b) || LATER_ACTIONS.contains(&b) || b.starts_with("lua.") {
        return RuleError::new(format!(
            "'{what} {b}' is a HAProxy action that Bascule does not support yet"
        ));
    }
    let hint = crate::config::diag::suggest(b, known.iter().copied())
        .map(|h| format!("; {h}"))
        .unwrap_or_default();
    RuleError::new(format!(
        "'{what}': unknown action '{b}' (expected one of {}){hint}",
        known.join(", ")
    ))
}

/// A stick-table action: `track-sc0|1|2 KEY [table T]` or an
/// `sc-inc-gpc*` / `sc-set-gpt*` action. `None` for another action.
enum StickAct {
    Track(TrackSc),
    Sc(ScAction),
}

fn stick_action(
    action: &str,
    a: &mut Args<'_>,
    c: &Compiler<'_>,
    phase: Phases,
) -> Result<Option<StickAct>, RuleError> {
    if let Some(slot) = stick::track_slot(action) {
        let slot = slot?;
        let key = expr(a.next("a sample expression (the key)")?, c, phase, &a.what)?;
        let table = if a.peek() == Some("table") {
            a.pos += 1;
            let name = a.next("a table name after 'table'")?;
            c.names.table(name).ok_or_else(|| {
                RuleError::new(format!(
                    "'{}': unable to find table '{name}'{}",
                    a.what,
                    super::did_you_mean(name, c.names.table_names().iter().map(String::as_str))
                ))
            })?
        } else {
            c.names.current_table().ok_or_else(|| {
                RuleError::new(format!(
                    "'{}': no stick table to track in: declare one with 'stick-table' in this proxy or name one with 'table NAME' (a defaults section has none and must name one)",
                    a.what
                ))
            })?
        };
        return Ok(Some(StickAct::Track(TrackSc { slot, key, table })));
    }
    let Some(parsed) = stick::sc_action_name(action) else {
        return Ok(None);
    };
    let (slot, cnt, rate, idx, set) = parsed?;
    if !set {
        return Ok(Some(StickAct::Sc(ScAction::Inc {
            slot,
            cnt,
            rate,
            idx,
        })));
    }
    let v = a.next("an integer or a sample expression")?;
    let value = match v.parse::<i64>() {
        Ok(i) => GptValue::Int(i),
        Err(_) => GptValue::Expr(expr(v, c, phase, &a.what)?),
    };
    Ok(Some(StickAct::Sc(ScAction::SetGpt {
        slot,
        data: cnt,
        idx,
        value,
    })))
}

/// Common preamble: the action word, the words before the condition, and the condition.
fn start<'w>(
    kw: &str,
    words: &'w [String],
    c: &mut Compiler<'_>,
    phase: Phases,
) -> Result<(&'w str, Args<'w>, Option<Cond>), RuleError> {
    let action = words
        .first()
        .map(String::as_str)
        .ok_or_else(|| RuleError::new(format!("'{kw}' expects an action")))?;
    let what = format!("{kw} {action}");
    let (head, cond) = split_cond(words, c, phase, &what)?;
    Ok((
        action,
        Args {
            what,
            words: head,
            pos: 1,
        },
        cond,
    ))
}

/// Compiles the words after `http-request`.
pub fn compile_http_request(
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<(HttpReqAction, Option<Cond>), RuleError> {
    let phase = Phases::REQ;
    let (action, mut a, cond) = start("http-request", words, c, phase)?;
    let a = &mut a;
    if let Some(h) = header_action(action, a, c, phase)? {
        a.done()?;
        return Ok((HttpReqAction::Header(h), cond));
    }
    if let Some(v) = var_action(action, a, c, phase)? {
        a.done()?;
        return Ok((HttpReqAction::Var(v), cond));
    }
    if let Some(st) = stick_action(action, a, c, phase)? {
        a.done()?;
        return Ok((
            match st {
                StickAct::Track(t) => HttpReqAction::TrackSc(t),
                StickAct::Sc(x) => HttpReqAction::Sc(x),
            },
            cond,
        ));
    }
    let act = match action {
        "allow" => HttpReqAction::Allow,
        "reject" => HttpReqAction::Reject,
        "deny" => HttpReqAction::Deny(reply(a, c, phase, 403, &["deny_status", "status"])?),
        "tarpit" => HttpReqAction::Tarpit(reply(a, c, phase, 500, &["deny_status", "status"])?),
        "return" => HttpReqAction::Return(reply(a, c, phase, 200, &["status"])?),
        "auth" => {
            let mut realm = None;
            if a.peek() == Some("realm") {
                a.pos += 1;
                realm = Some(a.next("a realm")?.to_string());
            }
            HttpReqAction::Auth { realm }
        }
        "redirect" => HttpReqAction::Redirect(redirect_args(a, c, phase)?),
        "set-path" | "set-pathq" | "set-query" | "set-uri" | "set-method" => {
            let v = lf(a.next("a log-format string")?, c, phase, &a.what)?;
            match action {
                "set-path" => HttpReqAction::SetPath(v),
                "set-pathq" => HttpReqAction::SetPathQ(v),
                "set-query" => HttpReqAction::SetQuery(v),
                "set-uri" => HttpReqAction::SetUri(v),
                _ => HttpReqAction::SetMethod(v),
            }
        }
        "replace-path" | "replace-pathq" | "replace-uri" => {
            let re = regex(a.next("a regex and a replacement")?, &a.what)?;
            let replace = lf(a.next("a replacement after the regex")?, c, phase, &a.what)?;
            match action {
                "replace-path" => HttpReqAction::ReplacePath { regex: re, replace },
                "replace-pathq" => HttpReqAction::ReplacePathQ { regex: re, replace },
                _ => HttpReqAction::ReplaceUri { regex: re, replace },
            }
        }
        "capture" => {
            let e = expr(a.next("a sample expression")?, c, phase, &a.what)?;
            let slot = capture_slot(a, true, c.req_captures)?;
            if let CaptureSlot::New { .. } = slot {
                c.req_captures += 1;
            }
            HttpReqAction::Capture { expr: e, slot }
        }
        "set-log-level" => HttpReqAction::SetLogLevel(log_level(a.next("a log level")?, &a.what)?),
        "strict-mode" => HttpReqAction::StrictMode(on_off(a)?),
        "normalize-uri" => {
            if !c.experimental {
                return Err(RuleError::new(
                    "'normalize-uri' action is experimental, it must be allowed with a global 'expose-experimental-directives'",
                ));
            }
            let n = a.next("a normalizer")?;
            let flag = |a: &mut Args<'_>, f: &str| {
                let on = a.peek() == Some(f);
                if on {
                    a.pos += 1;
                }
                on
            };
            HttpReqAction::NormalizeUri(match n {
                "path-merge-slashes" => Normalizer::PathMergeSlashes,
                "path-strip-dot" => Normalizer::PathStripDot,
                "path-strip-dotdot" => Normalizer::PathStripDotdot {
                    full: flag(a, "full"),
                },
                "percent-decode-unreserved" => Normalizer::PercentDecodeUnreserved {
                    strict: flag(a, "strict"),
                },
                "percent-to-uppercase" => Normalizer::PercentToUppercase {
                    strict: flag(a, "strict"),
                },
                "query-sort-by-name" => Normalizer::QuerySortByName,
                "fragment-strip" => Normalizer::FragmentStrip,
                "fragment-encode" => Normalizer::FragmentEncode,
                other => {
                    let all = [
                        "path-merge-slashes",
                        "path-strip-dot",
                        "path-strip-dotdot",
                        "percent-decode-unreserved",
                        "percent-to-uppercase",
                        "query-sort-by-name",
                        "fragment-strip",
                        "fragment-encode",
                    ];
                    let hint = crate::config::diag::suggest(other, all)
                        .map(|h| format!("; {h}"))
                        .unwrap_or_default();
                    return Err(RuleError::new(format!(
                        "'{}': unknown normalizer '{other}'{hint}",
                        a.what
                    )));
                }
            })
        }
        "early-hint" => {
            let name = a.next("a header name and a value")?.to_string();
            let value = lf(a.next("a value after the header name")?, c, phase, &a.what)?;
            HttpReqAction::EarlyHint { name, value }
        }
        "set-timeout" => {
            if !c.has_backend {
                return Err(RuleError::new(
                    "'http-request set-timeout': the proxy has no backend side (use it in a backend or listen section)",
                ));
            }
            let which = match a.next("'server' or 'tunnel' and a value")? {
                "server" => TimeoutKind::Server,
                "tunnel" => TimeoutKind::Tunnel,
                other => {
                    return Err(RuleError::new(format!(
                        "'{}': supports 'server' and 'tunnel' (got '{other}')",
                        a.what
                    )))
                }
            };
            let v = a.next("a time or a sample expression")?;
            let value = if v.starts_with(|c: char| c.is_ascii_digit()) {
                TimeValue::Fixed(
                    crate::config::values::time(v)
                        .map_err(|e| RuleError::new(format!("'{}': '{v}': {e}", a.what)))?,
                )
            } else {
                TimeValue::Expr(expr(v, c, phase, &a.what)?)
            };
            HttpReqAction::SetTimeout { which, value }
        }
        "set-src" | "set-dst" | "set-src-port" | "set-dst-port" => {
            let e = expr(a.next("a sample expression")?, c, phase, &a.what)?;
            match action {
                "set-src" => HttpReqAction::SetSrc(e),
                "set-dst" => HttpReqAction::SetDst(e),
                "set-src-port" => HttpReqAction::SetSrcPort(e),
                _ => HttpReqAction::SetDstPort(e),
            }
        }
        "wait-for-body" => {
            let (time, at_least) = wait_for_body(a)?;
            HttpReqAction::WaitForBody { time, at_least }
        }
        _ => {
            return Err(unknown_action(
                "http-request",
                action,
                HTTP_REQ_ACTIONS,
                &[],
            ))
        }
    };
    a.done()?;
    Ok((act, cond))
}

/// Compiles the words after `http-response`.
pub fn compile_http_response(
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<(HttpResAction, Option<Cond>), RuleError> {
    let phase = Phases::RES;
    let (action, mut a, cond) = start("http-response", words, c, phase)?;
    let a = &mut a;
    if let Some(h) = header_action(action, a, c, phase)? {
        a.done()?;
        return Ok((HttpResAction::Header(h), cond));
    }
    if let Some(v) = var_action(action, a, c, phase)? {
        a.done()?;
        return Ok((HttpResAction::Var(v), cond));
    }
    if let Some(st) = stick_action(action, a, c, phase)? {
        a.done()?;
        return Ok((
            match st {
                StickAct::Track(t) => HttpResAction::TrackSc(t),
                StickAct::Sc(x) => HttpResAction::Sc(x),
            },
            cond,
        ));
    }
    let act = match action {
        "allow" => HttpResAction::Allow,
        "deny" => HttpResAction::Deny(reply(a, c, phase, 502, &["deny_status", "status"])?),
        "return" => HttpResAction::Return(reply(a, c, phase, 200, &["status"])?),
        "redirect" => HttpResAction::Redirect(redirect_args(a, c, phase)?),
        "set-status" => {
            let (status, reason) = set_status(a)?;
            HttpResAction::SetStatus { status, reason }
        }
        "capture" => {
            let e = expr(a.next("a sample expression")?, c, phase, &a.what)?;
            let CaptureSlot::Id(id) = capture_slot(a, false, c.res_captures)? else {
                unreachable!("len is refused for http-response capture")
            };
            HttpResAction::Capture { expr: e, id }
        }
        "set-log-level" => HttpResAction::SetLogLevel(log_level(a.next("a log level")?, &a.what)?),
        "strict-mode" => HttpResAction::StrictMode(on_off(a)?),
        "wait-for-body" => {
            let (time, at_least) = wait_for_body(a)?;
            HttpResAction::WaitForBody { time, at_least }
        }
        _ => {
            return Err(unknown_action(
                "http-response",
                action,
                HTTP_RES_ACTIONS,
                &[],
            ))
        }
    };
    a.done()?;
    Ok((act, cond))
}

fn set_status(a: &mut Args<'_>) -> Result<(u16, Option<String>), RuleError> {
    let v = a.next("a status code")?;
    let status = v
        .parse::<u16>()
        .ok()
        .filter(|s| (100..=999).contains(s))
        .ok_or_else(|| RuleError::new(format!("'{}': invalid status code '{v}'", a.what)))?;
    let mut reason = None;
    if a.peek() == Some("reason") {
        a.pos += 1;
        reason = Some(a.next("a reason")?.to_string());
    }
    Ok((status, reason))
}

/// Compiles the words after `http-after-response`.
pub fn compile_http_after_response(
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<(HttpAfterAction, Option<Cond>), RuleError> {
    let phase = Phases::RES;
    let (action, mut a, cond) = start("http-after-response", words, c, phase)?;
    let a = &mut a;
    if let Some(h) = header_action(action, a, c, phase)? {
        a.done()?;
        return Ok((HttpAfterAction::Header(h), cond));
    }
    if let Some(v) = var_action(action, a, c, phase)? {
        a.done()?;
        return Ok((HttpAfterAction::Var(v), cond));
    }
    let act = match action {
        "allow" => HttpAfterAction::Allow,
        "strict-mode" => HttpAfterAction::StrictMode(on_off(a)?),
        "set-status" => {
            let (status, reason) = set_status(a)?;
            HttpAfterAction::SetStatus { status, reason }
        }
        _ => {
            return Err(unknown_action(
                "http-after-response",
                action,
                HTTP_AFTER_ACTIONS,
                &["capture"],
            ))
        }
    };
    a.done()?;
    Ok((act, cond))
}

/// Compiles the words after `tcp-request connection|session|content`.
pub fn compile_tcp_request(
    phase_kw: TcpPhase,
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<(TcpReqAction, Option<Cond>), RuleError> {
    let phase = phase_kw.phases();
    let kw = format!("tcp-request {}", phase_kw.word());
    let (action, mut a, cond) = start(&kw, words, c, phase)?;
    let a = &mut a;
    if let Some(v) = var_action(action, a, c, phase)? {
        a.done()?;
        return Ok((TcpReqAction::Var(v), cond));
    }
    if let Some(st) = stick_action(action, a, c, phase)? {
        a.done()?;
        return Ok((
            match st {
                StickAct::Track(t) => TcpReqAction::TrackSc(t),
                StickAct::Sc(x) => TcpReqAction::Sc(x),
            },
            cond,
        ));
    }
    let act = match action {
        "accept" => TcpReqAction::Accept,
        "reject" => TcpReqAction::Reject,
        "capture" => {
            if phase_kw != TcpPhase::Content {
                return Err(RuleError::new(format!(
                    "'{kw} capture' is not allowed: captures need a stream ('tcp-request content' rules)"
                )));
            }
            let e = expr(a.next("a sample expression")?, c, phase, &a.what)?;
            let CaptureSlot::New { len } = capture_slot_len(a)? else {
                unreachable!()
            };
            c.req_captures += 1;
            TcpReqAction::Capture {
                expr: e,
                len,
                slot: 0,
            }
        }
        "expect-proxy" => {
            // haproxy 2.6's words (tcp_rules.c), without the proxy, which the config layer
            // names.
            let layer = a.next("'layer4'").unwrap_or("");
            if layer != "layer4" {
                return Err(RuleError::new(format!(
                    "'{kw} expect-proxy' only supports 'layer4' (got '{layer}')"
                )));
            }
            if phase_kw != TcpPhase::Connection {
                return Err(RuleError::new(format!(
                    "'expect-proxy layer4' is not allowed in '{kw}' rules"
                )));
            }
            TcpReqAction::ExpectProxy
        }
        "set-src" | "set-dst" | "set-src-port" | "set-dst-port" => {
            let e = expr(a.next("a sample expression")?, c, phase, &a.what)?;
            match action {
                "set-src" => TcpReqAction::SetSrc(e),
                "set-dst" => TcpReqAction::SetDst(e),
                "set-src-port" => TcpReqAction::SetSrcPort(e),
                _ => TcpReqAction::SetDstPort(e),
            }
        }
        _ => {
            return Err(unknown_action(
                &kw,
                action,
                TCP_REQ_ACTIONS,
                &["set-log-level"],
            ))
        }
    };
    a.done()?;
    Ok((act, cond))
}

fn capture_slot_len(a: &mut Args<'_>) -> Result<CaptureSlot, RuleError> {
    match a.peek() {
        Some("len") => capture_slot(a, true, 0),
        Some(other) => Err(RuleError::new(format!(
            "'{}': expects 'len', found '{other}'",
            a.what
        ))),
        None => Err(RuleError::new(format!(
            "'{}' expects 'len N' after the sample expression",
            a.what
        ))),
    }
}

/// Compiles the words of an `http-check set-var(...)`, `set-var-fmt(...)` or `unset-var(...)`
/// line (after `http-check`): evaluated on the check's response.
pub fn compile_check_var(words: &[String], c: &mut Compiler<'_>) -> Result<VarAction, RuleError> {
    let action = words
        .first()
        .map(String::as_str)
        .ok_or_else(|| RuleError::new("'http-check' expects an action"))?;
    let mut a = Args {
        what: format!("http-check {}", base(action)),
        words,
        pos: 1,
    };
    let v = var_action(action, &mut a, c, Phases::RES)?
        .ok_or_else(|| RuleError::new(format!("'http-check': unknown action '{action}'")))?;
    match a.peek() {
        None => Ok(v),
        Some(w) => Err(RuleError::new(format!(
            "'{}': unexpected argument '{w}'",
            a.what
        ))),
    }
}

/// Compiles the words after `tcp-response content`.
pub fn compile_tcp_response(
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<(TcpResAction, Option<Cond>), RuleError> {
    let phase = Phases::RES;
    let (action, mut a, cond) = start("tcp-response content", words, c, phase)?;
    let a = &mut a;
    if let Some(v) = var_action(action, a, c, phase)? {
        a.done()?;
        return Ok((TcpResAction::Var(v), cond));
    }
    let act = match action {
        "accept" => TcpResAction::Accept,
        "reject" => TcpResAction::Reject,
        "close" => {
            return Err(RuleError::new(
                "'tcp-response content close' is not supported yet (supported: accept, reject, set-var, unset-var, set-var-fmt)",
            ))
        }
        _ => {
            return Err(unknown_action(
                "tcp-response content",
                action,
                TCP_RES_ACTIONS,
                &["set-log-level"],
            ))
        }
    };
    a.done()?;
    Ok((act, cond))
}

/// Compiles the words after the `redirect` keyword (`location|prefix|scheme TARGET ...`).
pub fn compile_redirect(
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<(Redirect, Option<Cond>), RuleError> {
    let phase = Phases::REQ;
    let (head, cond) = split_cond(words, c, phase, "redirect")?;
    let mut a = Args {
        what: "redirect".to_string(),
        words: head,
        pos: 0,
    };
    let r = redirect_args(&mut a, c, phase)?;
    a.done()?;
    Ok((r, cond))
}

/// Compiles the words after `stick` (`on|match|store-request|store-response EXPR [table T]
/// [if|unless COND]`). The table defaults to the backend's own.
pub fn compile_stick(
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<(StickRule, Option<Cond>), RuleError> {
    let which = words.first().map(String::as_str).ok_or_else(|| {
        RuleError::new("'stick' expects 'on', 'match', 'store-request' or 'store-response'")
    })?;
    let kind = match which {
        "on" => StickKind::On,
        "match" => StickKind::Match,
        "store-request" => StickKind::StoreRequest,
        "store-response" => StickKind::StoreResponse,
        other => {
            return Err(RuleError::new(format!(
                "'stick' expects 'on', 'match', 'store-request' or 'store-response', not '{other}'"
            )))
        }
    };
    let phase = if kind == StickKind::StoreResponse {
        Phases::RES
    } else {
        Phases::REQ
    };
    let what = format!("stick {which}");
    let (head, cond) = split_cond(words, c, phase, &what)?;
    let mut a = Args {
        what,
        words: head,
        pos: 1,
    };
    let key = expr(a.next("a fetch method")?, c, phase, &a.what)?;
    let table = if a.peek() == Some("table") {
        a.pos += 1;
        let name = a.next("a table name after 'table'")?;
        c.names.table(name).ok_or_else(|| {
            RuleError::new(format!(
                "'{}': unable to find table '{name}'{}",
                a.what,
                super::did_you_mean(name, c.names.table_names().iter().map(String::as_str))
            ))
        })?
    } else {
        c.names.current_table().ok_or_else(|| {
            RuleError::new(format!(
                "'{}': the backend has no stick table (declare one with 'stick-table' or name one with 'table NAME')",
                a.what
            ))
        })?
    };
    a.done()?;
    Ok((StickRule { kind, key, table }, cond))
}

/// Compiles a bare condition (`use_backend NAME if COND`, `force-persist if COND`): `words`
/// starts with `if` or `unless`.
pub fn compile_condition(
    words: &[String],
    c: &mut Compiler<'_>,
) -> Result<Option<Cond>, RuleError> {
    let Some(first) = words.first() else {
        return Ok(None);
    };
    let polarity = match first.as_str() {
        "if" => Polarity::If,
        "unless" => Polarity::Unless,
        other => {
            return Err(RuleError::new(format!(
                "expects either 'if' or 'unless' followed by a condition but found '{other}'"
            )))
        }
    };
    if words.len() < 2 {
        return Err(RuleError::new(format!("'{first}' expects a condition")));
    }
    let (cond, warnings) = compile_cond(&words[1..], polarity, c.acls, c.names)?;
    c.warnings.extend(warnings.into_iter().map(|w| w.message));
    Ok(Some(cond))
}

#[cfg(test)]
mod tests;
