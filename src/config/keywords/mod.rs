//! The keyword registry: one record per keyword, and the dispatch that applies a line to a draft.
//!
//! Each family of keywords lives in its own file and exports a table of [`Keyword`] records (name,
//! sections that allow it, parser, one-line doc). HAProxy keywords that Bascule does not implement
//! yet are listed as [`Unsupported`] records, so that they are reported as such instead of as
//! unknown. [`apply`] is the only code that looks keywords up: the section parser holds no list.

pub mod bind;
pub mod global;
pub mod http_errors;
pub mod log;
pub mod option;
pub mod peers;
pub mod persist;
pub mod proto_check;
pub mod proxy;
pub mod ring;
pub mod rules;
pub mod server;
pub mod ssl;
pub mod stats;
pub mod stick;
pub mod unsupported;
pub mod userlist;

use super::diag::{suggest, Diagnostic, Span};
use super::model::{Balance, Bind, LogTarget, Mode, ProxyOptions, Server, Timeouts};

/// The kinds of sections Bascule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionKind {
    Global,
    Defaults,
    Frontend,
    Backend,
    Listen,
    Userlist,
    Peers,
    HttpErrors,
    Ring,
    LogForward,
}

impl SectionKind {
    /// The section keyword, as written in the file.
    pub fn word(self) -> &'static str {
        match self {
            SectionKind::Global => "global",
            SectionKind::Defaults => "defaults",
            SectionKind::Frontend => "frontend",
            SectionKind::Backend => "backend",
            SectionKind::Listen => "listen",
            SectionKind::Userlist => "userlist",
            SectionKind::Peers => "peers",
            SectionKind::HttpErrors => "http-errors",
            SectionKind::Ring => "ring",
            SectionKind::LogForward => "log-forward",
        }
    }

    fn bit(self) -> u16 {
        match self {
            SectionKind::Global => 1,
            SectionKind::Defaults => 2,
            SectionKind::Frontend => 4,
            SectionKind::Backend => 8,
            SectionKind::Listen => 16,
            SectionKind::Userlist => 32,
            SectionKind::Peers => 64,
            SectionKind::HttpErrors => 128,
            SectionKind::Ring => 256,
            SectionKind::LogForward => 512,
        }
    }

    /// True for sections that accept connections (frontend side).
    pub fn has_frontend(self) -> bool {
        matches!(self, SectionKind::Frontend | SectionKind::Listen)
    }

    /// True for sections that connect to servers (backend side).
    pub fn has_backend(self) -> bool {
        matches!(self, SectionKind::Backend | SectionKind::Listen)
    }
}

/// A set of section kinds where a keyword is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sections(u16);

impl Sections {
    pub const GLOBAL: Sections = Sections(1);
    /// Every proxy section, `defaults` included.
    pub const PROXIES: Sections = Sections(2 | 4 | 8 | 16);
    /// Sections with a frontend side, and `defaults`.
    pub const FE: Sections = Sections(2 | 4 | 16);
    /// Sections with a backend side, and `defaults`.
    pub const BE: Sections = Sections(2 | 8 | 16);
    /// Frontend-side sections only (not `defaults`).
    pub const FE_ONLY: Sections = Sections(4 | 16);
    /// Backend-side sections only (not `defaults`).
    pub const BE_ONLY: Sections = Sections(8 | 16);
    /// `frontend`, `backend` and `listen`, not `defaults`.
    pub const PROXY_ONLY: Sections = Sections(4 | 8 | 16);
    pub const ALL: Sections = Sections(31);
    pub const USERLIST: Sections = Sections(32);
    pub const PEERS: Sections = Sections(64);
    pub const HTTP_ERRORS: Sections = Sections(128);
    pub const RING: Sections = Sections(256);
    pub const LOG_FORWARD: Sections = Sections(512);

    pub fn contains(self, kind: SectionKind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// The section words of this set, for messages ("frontend and listen").
    pub fn describe(self) -> String {
        let kinds = [
            SectionKind::Global,
            SectionKind::Defaults,
            SectionKind::Frontend,
            SectionKind::Backend,
            SectionKind::Listen,
            SectionKind::Userlist,
            SectionKind::Peers,
            SectionKind::HttpErrors,
            SectionKind::Ring,
            SectionKind::LogForward,
        ];
        let words: Vec<&str> = kinds
            .iter()
            .filter(|k| self.contains(**k))
            .map(|k| k.word())
            .collect();
        match words.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            Some((last, _)) => (*last).to_string(),
            None => String::new(),
        }
    }
}

/// What is wrong with a line, as returned by a keyword parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    pub hint: Option<String>,
}

impl From<String> for Problem {
    fn from(message: String) -> Self {
        Problem {
            message,
            hint: None,
        }
    }
}

impl From<&str> for Problem {
    fn from(message: &str) -> Self {
        Problem::from(message.to_string())
    }
}

impl Problem {
    /// A problem with a "did you mean" hint.
    pub fn with_hint(message: String, hint: Option<String>) -> Self {
        Problem { message, hint }
    }
}

/// Everything a keyword parser may look at besides its target: the words, where they are, and
/// where to report extra problems (several per line are possible, parsing continues).
pub struct Ctx<'a> {
    /// The line's words; `args[0]` is the keyword.
    pub args: &'a [String],
    pub span: &'a Span,
    pub kind: SectionKind,
    /// The section as shown in messages: `global`, `frontend 'web'`.
    pub section: &'a str,
    pub diags: &'a mut Vec<Diagnostic>,
}

impl Ctx<'_> {
    /// The keyword of the line.
    pub fn kw(&self) -> &str {
        self.args.first().map_or("", String::as_str)
    }

    /// Word `i`, if present.
    pub fn arg(&self, i: usize) -> Option<&str> {
        self.args.get(i).map(String::as_str)
    }

    /// Word `i`, or an error saying that `what` was expected after the keyword.
    pub fn need(&self, i: usize, what: &str) -> Result<&str, Problem> {
        self.arg(i).ok_or_else(|| {
            let before = self.args[..i.min(self.args.len())].join(" ");
            Problem::from(format!("'{before}' expects {what}"))
        })
    }

    /// Fails if there are words after index `last`.
    pub fn no_more(&self, last: usize) -> Result<(), Problem> {
        match self.args.get(last + 1) {
            None => Ok(()),
            Some(extra) => Err(format!(
                "'{}': unexpected extra word '{extra}'",
                self.args[..=last].join(" ")
            )
            .into()),
        }
    }

    /// Reports a warning on this line.
    pub fn warn(&mut self, message: impl Into<String>) {
        let d = Diagnostic::warning(Some(self.span), Some(self.section), message);
        self.diags.push(d);
    }

    /// Reports a notice on this line: information, never a failure (not even with
    /// `zero-warning`/`-dW`).
    pub fn notice(&mut self, message: impl Into<String>) {
        let d = Diagnostic::notice(Some(self.span), Some(self.section), message);
        self.diags.push(d);
    }

    /// Reports an error on this line and lets the parser continue with the rest of the line.
    pub fn error(&mut self, problem: impl Into<Problem>) {
        let p = problem.into();
        let d = Diagnostic::alert(Some(self.span), Some(self.section), p.message).with_hint(p.hint);
        self.diags.push(d);
    }
}

/// A parser: applies the line in [`Ctx`] to the draft `T`.
pub type ParseFn<T> = fn(&mut T, &mut Ctx<'_>) -> Result<(), Problem>;

/// One keyword: its name, where it is allowed, its parser and a one-line doc.
pub struct Keyword<T: 'static> {
    /// The first word of the line; a trailing `*` makes it a prefix (`tune.ssl.*`).
    pub name: &'static str,
    pub sections: Sections,
    /// In a proxy section lacking the needed side: warn and ignore (HAProxy's behaviour for
    /// settings such as `maxconn` in a backend) instead of failing.
    pub misplaced_warns: bool,
    pub parse: ParseFn<T>,
    pub doc: &'static str,
}

/// A HAProxy keyword that Bascule recognises but does not implement yet.
pub struct Unsupported {
    /// A trailing `*` makes it a prefix.
    pub name: &'static str,
    pub sections: Sections,
}

/// True when `word` matches a record name (exact, or by prefix for names ending in `*`).
pub fn matches(name: &str, word: &str) -> bool {
    match name.strip_suffix('*') {
        Some(prefix) => word.starts_with(prefix),
        None => name == word,
    }
}

/// Where a keyword is allowed, in any table, if it is known at all.
fn known_sections(word: &str) -> Option<Sections> {
    let mut bits = 0u16;
    for (name, sections) in all_names() {
        if matches(name, word) {
            bits |= sections.0;
        }
    }
    (bits != 0).then_some(Sections(bits))
}

/// Every record name with its sections, over all tables.
fn all_names() -> impl Iterator<Item = (&'static str, Sections)> {
    global::KEYWORDS
        .iter()
        .map(|k| (k.name, k.sections))
        .chain(proxy::KEYWORDS.iter().map(|k| (k.name, k.sections)))
        .chain(userlist::KEYWORDS.iter().map(|k| (k.name, k.sections)))
        .chain(peers::KEYWORDS.iter().map(|k| (k.name, k.sections)))
        .chain(http_errors::KEYWORDS.iter().map(|k| (k.name, k.sections)))
        .chain(ring::RING_KEYWORDS.iter().map(|k| (k.name, k.sections)))
        .chain(ring::FORWARD_KEYWORDS.iter().map(|k| (k.name, k.sections)))
        .chain(unsupported::KEYWORDS.iter().map(|k| (k.name, k.sections)))
}

/// Applies one line to `target` using `table`: finds the record for the first word and runs its
/// parser; reports unsupported, misplaced and unknown keywords (with a suggestion).
pub fn apply<T>(
    table: &[Keyword<T>],
    target: &mut T,
    words: &[String],
    span: &Span,
    kind: SectionKind,
    section: &str,
    diags: &mut Vec<Diagnostic>,
) {
    let Some(word) = words.first() else { return };
    let mut ctx = Ctx {
        args: words,
        span,
        kind,
        section,
        diags,
    };
    let here = |s: Sections| s.contains(kind);
    if let Some(k) = table
        .iter()
        .find(|k| matches(k.name, word) && here(k.sections))
    {
        if let Err(p) = (k.parse)(target, &mut ctx) {
            ctx.error(p);
        }
        return;
    }
    if let Some(k) = table
        .iter()
        .find(|k| matches(k.name, word) && k.misplaced_warns)
    {
        let side = if k.sections.contains(SectionKind::Frontend) {
            "frontend"
        } else {
            "backend"
        };
        ctx.warn(format!(
            "'{word}' ignored because a {} section has no {side} side (it belongs in {} sections)",
            kind.word(),
            k.sections.describe()
        ));
        return;
    }
    if unsupported::KEYWORDS
        .iter()
        .any(|u| matches(u.name, word) && here(u.sections))
    {
        ctx.error(format!(
            "'{word}' is a HAProxy keyword that Bascule does not support yet"
        ));
        return;
    }
    if let Some(sections) = known_sections(word) {
        ctx.error(format!(
            "'{word}' is not allowed in a {} section (it belongs in {} sections)",
            kind.word(),
            sections.describe()
        ));
        return;
    }
    let candidates = all_names()
        .filter(|(_, s)| here(*s))
        .map(|(n, _)| n.trim_end_matches('*'));
    let hint = suggest(word, candidates);
    ctx.error(Problem::with_hint(
        format!("unknown keyword '{word}'"),
        hint,
    ));
}

/// A `log` line of a proxy, kept unexpanded until the global section is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEntry {
    /// `log global`: the global section's targets.
    Global,
    Target(LogTarget),
}

/// The `default-server` settings that each following `server` line starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerDefaults {
    /// `init-addr METHOD,...`, as written (checked when parsed).
    pub init_addr: Option<String>,
    pub weight: u32,
    pub backup: bool,
    pub disabled: bool,
    pub maxconn: Option<u32>,
    pub check: bool,
    pub inter: std::time::Duration,
    pub fastinter: Option<std::time::Duration>,
    pub downinter: Option<std::time::Duration>,
    pub rise: u32,
    pub fall: u32,
    pub check_port: Option<u16>,
    pub check_addr: Option<std::net::IpAddr>,
    pub cookie: Option<String>,
    pub send_proxy: bool,
    pub send_proxy_v2: bool,
    pub proxy_v2_options: crate::proto::proxy::V2Options,
    pub pool_max_conn: Option<u32>,
    pub socks4: Option<std::net::SocketAddr>,
    pub check_via_socks4: bool,
    /// `check-send-proxy` (`no-check-send-proxy` clears it).
    pub check_send_proxy: bool,
    /// `proto h1|h2`.
    pub proto: Option<crate::config::model::Mux>,
    pub slowstart: Option<std::time::Duration>,
    pub observe: Option<crate::config::model::Observe>,
    pub error_limit: u32,
    pub on_error: crate::config::model::OnError,
    /// `ssl`, `verify`, `sni`, `check-ssl`...
    pub ssl: ssl::SslServerDraft,
    /// `agent-check` / `no-agent-check`.
    pub agent_check: bool,
    pub agent_addr: Option<std::net::IpAddr>,
    pub agent_port: Option<u16>,
    pub agent_send: Option<String>,
    pub agent_inter: Option<std::time::Duration>,
    /// `track [BACKEND/]SERVER`, as written (resolved in the validate stage).
    pub track: Option<String>,
}

impl Default for ServerDefaults {
    fn default() -> Self {
        ServerDefaults {
            init_addr: None,
            weight: 1,
            backup: false,
            disabled: false,
            maxconn: None,
            check: false,
            inter: std::time::Duration::from_secs(2),
            fastinter: None,
            downinter: None,
            rise: 2,
            fall: 3,
            check_port: None,
            check_addr: None,
            cookie: None,
            send_proxy: false,
            send_proxy_v2: false,
            proxy_v2_options: Default::default(),
            pool_max_conn: None,
            socks4: None,
            check_via_socks4: false,
            check_send_proxy: false,
            proto: None,
            track: None,
            slowstart: None,
            observe: None,
            error_limit: 10,
            on_error: crate::config::model::OnError::FastInter,
            ssl: Default::default(),
            agent_check: false,
            agent_addr: None,
            agent_port: None,
            agent_send: None,
            agent_inter: None,
        }
    }
}

/// A backend or frontend name referenced by a keyword, with the line that references it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRef {
    pub name: String,
    pub span: Span,
}

/// A proxy section (`defaults`, `frontend`, `backend`, `listen`) as its lines describe it, before
/// names are resolved. A new proxy starts as a copy of its `defaults` draft.
#[derive(Debug, Clone)]
pub struct ProxyDraft {
    pub kind: SectionKind,
    pub name: String,
    /// The section header line.
    pub span: Span,
    /// The global TLS defaults as they stood when the section opened (HAProxy applies them to
    /// a bind line when it reads `ssl`).
    pub ssl_defaults: std::sync::Arc<crate::tls::server::BindDefaults>,
    /// The global server TLS defaults likewise (applied when a server line is read).
    pub ssl_server_defaults: std::sync::Arc<crate::tls::client::ServerDefaults>,
    pub mode: Mode,
    pub binds: Vec<Bind>,
    pub maxconn: Option<u32>,
    /// `backlog N`.
    pub backlog: Option<u32>,
    pub default_backend: Option<NameRef>,
    /// `monitor-uri URI`.
    pub monitor_uri: Option<String>,
    /// Rule lines (`acl`, `http-request`, `use_backend`, ...) in file order, compiled in the
    /// validate stage.
    pub rule_lines: Vec<rules::RuleLine>,
    /// The rule lines of the `defaults` section this proxy inherits, run before its own.
    pub inherited_rules: Option<std::sync::Arc<rules::InheritedRules>>,
    /// Rule sets seen so far (bits of `RuleKind::rank`), for HAProxy's ordering warnings.
    pub seen_ranks: u8,
    /// `tcp-request inspect-delay`.
    pub inspect_delay: Option<std::time::Duration>,
    /// `tcp-response inspect-delay`.
    pub res_inspect_delay: Option<std::time::Duration>,
    pub timeouts: Timeouts,
    pub options: ProxyOptions,
    pub redispatch: Option<i32>,
    pub balance: Balance,
    pub retries: u32,
    pub http_reuse: crate::config::model::HttpReuse,
    pub hash_type: crate::config::model::HashType,
    /// `persist rdp-cookie[(NAME)]`: the cookie's name.
    pub rdp_persist: Option<String>,
    pub retry_on: crate::config::model::RetryOn,
    pub outlier: Option<crate::config::model::OutlierEjection>,
    /// `errorfile`, `errorfiles` and `http-error` lines in order (resolved by validate).
    pub errorfiles: Vec<http_errors::ErrorLine>,
    pub logs: Vec<LogEntry>,
    pub disabled: bool,
    /// `id N`: the proxy's number (`iid`), else one is given in HAProxy's way.
    pub id: Option<u32>,
    pub description: Option<String>,
    pub server_defaults: ServerDefaults,
    pub servers: Vec<Server>,
    /// The `http-check` rules came from the defaults section: the proxy's own `option httpchk`
    /// replaces them, as in HAProxy.
    pub http_check_inherited: bool,
    /// The proxy's `stick-table` line (not inherited: `defaults` cannot have one).
    pub stick_table: Option<stick::TableLine>,
    /// `cookie` (inherited from `defaults`), with the line that set it.
    pub cookie: Option<(crate::config::model::CookiePersist, Span)>,
    /// `dynamic-cookie-key` (inherited from `defaults`).
    pub dynamic_cookie_key: Option<String>,
    /// `rate-limit sessions N` (inherited from `defaults`).
    pub rate_limit_sessions: Option<u32>,
    /// The statistics page (`stats ...`), inherited from `defaults` until the proxy's own
    /// first `stats` line.
    pub stats: Option<crate::config::model::StatsPage>,
    /// A `stats` line of this proxy was read (see [`stats`]).
    pub stats_own: bool,
}

impl ProxyDraft {
    /// HAProxy's built-in defaults, for a section that inherits from no `defaults`.
    pub fn builtin(span: Span) -> Self {
        ProxyDraft {
            kind: SectionKind::Defaults,
            name: String::new(),
            span,
            ssl_defaults: Default::default(),
            ssl_server_defaults: Default::default(),
            mode: Mode::Tcp,
            binds: Vec::new(),
            maxconn: None,
            backlog: None,
            default_backend: None,
            monitor_uri: None,
            rule_lines: Vec::new(),
            inherited_rules: None,
            seen_ranks: 0,
            inspect_delay: None,
            res_inspect_delay: None,
            timeouts: Timeouts::default(),
            options: ProxyOptions::default(),
            redispatch: None,
            balance: Balance::RoundRobin,
            retries: 3,
            http_reuse: crate::config::model::HttpReuse::Safe,
            hash_type: crate::config::model::HashType::default(),
            rdp_persist: None,
            retry_on: crate::config::model::RetryOn::default(),
            outlier: None,
            errorfiles: Vec::new(),
            logs: Vec::new(),
            disabled: false,
            id: None,
            description: None,
            server_defaults: ServerDefaults::default(),
            servers: Vec::new(),
            http_check_inherited: false,
            stick_table: None,
            cookie: None,
            dynamic_cookie_key: None,
            rate_limit_sessions: None,
            stats: None,
            stats_own: false,
        }
    }

    /// A new proxy section `kind NAME` starting from the `defaults` draft `base`: settings are
    /// inherited, per-proxy things (binds, servers, routes, state) are not.
    pub fn inherit(base: &ProxyDraft, kind: SectionKind, name: &str, span: Span) -> Self {
        ProxyDraft {
            kind,
            name: name.to_string(),
            span,
            binds: Vec::new(),
            rule_lines: Vec::new(),
            inherited_rules: base
                .rule_lines
                .iter()
                .any(|l| rules::is_rule(l.kind))
                .then(|| {
                    std::sync::Arc::new(rules::InheritedRules {
                        section: crate::config::parser::label(base.kind, &base.name),
                        span: base.span.clone(),
                        lines: base.rule_lines.clone(),
                    })
                }),
            seen_ranks: 0,
            servers: Vec::new(),
            disabled: false,
            id: None,
            description: None,
            http_check_inherited: base.options.http_check != Default::default(),
            stick_table: None,
            stats_own: false,
            ..base.clone()
        }
    }
}

/// The merged `global` sections, plus what can only be resolved once all of them are read.
#[derive(Debug, Clone, Default)]
pub struct GlobalDraft {
    pub global: super::model::Global,
    /// `cpu-map` lines in order, resolved once `nbthread` is known.
    pub cpu_maps: Vec<global::CpuMapLine>,
    /// The last `tune.bufsize` or `tune.maxrewrite` line: where their comparison is reported.
    pub tune_span: Option<Span>,
    /// The environment configuration lines expand, as `setenv` and friends leave it.
    pub env: super::lexer::Env,
    /// The local peer's name (`-L`, a `localpeer` line, else the host name), which names the
    /// peer of a `peers` section that is this process.
    pub local_peer: Option<String>,
    /// A `peers` section was read: a later `localpeer` line is ignored (as in HAProxy).
    pub peers_seen: bool,
    /// `set-var` and `set-var-fmt` lines, compiled and evaluated by the validate stage.
    pub set_vars: Vec<(Vec<String>, Span)>,
    /// `unix-bind`: what the UNIX socket binds parsed after it default to.
    pub unix_bind: global::UnixBind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_has_a_doc_and_a_unique_name_per_section() {
        for (name, _) in all_names() {
            assert!(!name.is_empty());
        }
        for k in global::KEYWORDS {
            assert!(!k.doc.is_empty(), "{}", k.name);
        }
        for k in proxy::KEYWORDS {
            assert!(!k.doc.is_empty(), "{}", k.name);
            assert!(
                !unsupported::KEYWORDS
                    .iter()
                    .any(|u| u.name == k.name && (u.sections.0 & k.sections.0) != 0),
                "{} is both supported and unsupported",
                k.name
            );
        }
    }

    #[test]
    fn sections_describe_themselves() {
        assert_eq!(Sections::FE_ONLY.describe(), "frontend and listen");
        assert_eq!(Sections::BE.describe(), "defaults, backend and listen");
        assert_eq!(Sections::GLOBAL.describe(), "global");
    }

    #[test]
    fn prefix_names_match() {
        assert!(matches("tune.ssl.*", "tune.ssl.default-dh-param"));
        assert!(!matches("tune.ssl.*", "tune.bufsize"));
        assert!(matches("mode", "mode"));
    }
}
