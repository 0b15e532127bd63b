//! Stage one, part two: lines to sections, and each line of a section to its keyword's parser.
//!
//! This file knows the section headers (`global`, `defaults [NAME] [from NAME]`,
//! `frontend|backend|listen NAME [from NAME]`) and how a proxy inherits from a `defaults`
//! section: the most recent one, or the named one after `from`. It holds no keyword list: every
//! other line goes to [`keywords::apply`], which looks the keyword up in the registry.

use std::collections::HashMap;

use super::diag::{suggest, Diagnostic};
use super::keywords::{self, GlobalDraft, ProxyDraft, SectionKind};
use super::lexer::Line;

/// HAProxy sections Bascule does not read yet; their bodies are skipped after one error.
const OTHER_SECTIONS: &[&str] = &[
    "resolvers",
    "mailers",
    "cache",
    "program",
    "crt-store",
    "fcgi-app",
    "traces",
    "acme",
    "log-profile",
    "dynamic-update",
];

/// Everything the sections say, before names are resolved.
#[derive(Debug, Default)]
pub struct Parsed {
    pub global: GlobalDraft,
    /// `frontend`, `backend` and `listen` sections in file order (`defaults` are folded in).
    pub proxies: Vec<ProxyDraft>,
    /// `userlist` sections in file order (a repeated name is warned about and skipped).
    pub userlists: Vec<keywords::userlist::UserlistDraft>,
    /// `peers` sections in file order (a repeated name is an error).
    pub peers: Vec<keywords::peers::PeersDraft>,
    /// `http-errors` sections in file order (a repeated name is an error).
    pub http_errors: Vec<keywords::http_errors::HttpErrorsDraft>,
    /// `ring` sections in file order (a repeated name is an error).
    pub rings: Vec<keywords::ring::RingDraft>,
    /// `log-forward` sections in file order (a repeated name is an error).
    pub log_forwards: Vec<keywords::ring::LogForwardDraft>,
    /// Named `defaults` sections that hold rules, kept so that their rules are checked even
    /// when no proxy inherits them.
    pub rule_defaults: Vec<ProxyDraft>,
}

/// How a section is shown in messages: `global`, `defaults`, `frontend 'web'`.
pub fn label(kind: SectionKind, name: &str) -> String {
    if name.is_empty() {
        kind.word().to_string()
    } else {
        format!("{} '{name}'", kind.word())
    }
}

/// The section the following lines belong to.
enum Current {
    /// Before the first section of a file.
    Outside,
    /// Inside a section that is not read (its header was reported).
    Skipped,
    Global,
    Proxy(Box<ProxyDraft>),
    Userlist(keywords::userlist::UserlistDraft),
    Peers(keywords::peers::PeersDraft),
    HttpErrors(keywords::http_errors::HttpErrorsDraft),
    Ring(Box<keywords::ring::RingDraft>),
    LogForward(Box<keywords::ring::LogForwardDraft>),
}

/// Builder state across all files.
struct State {
    parsed: Parsed,
    /// Named `defaults` sections; a later one with the same name replaces the earlier one.
    named_defaults: HashMap<String, ProxyDraft>,
    /// The most recent `defaults` section, used by proxies without `from`.
    last_defaults: Option<ProxyDraft>,
}

impl State {
    fn close(&mut self, current: Current) {
        if let Current::Userlist(u) = current {
            self.parsed.userlists.push(u);
            return;
        }
        if let Current::Peers(p) = current {
            self.parsed.peers.push(p);
            return;
        }
        if let Current::HttpErrors(h) = current {
            self.parsed.http_errors.push(h);
            return;
        }
        if let Current::Ring(r) = current {
            self.parsed.rings.push(*r);
            return;
        }
        if let Current::LogForward(f) = current {
            self.parsed.log_forwards.push(*f);
            return;
        }
        if let Current::Proxy(p) = current {
            if p.kind == SectionKind::Defaults {
                if !p.name.is_empty() {
                    self.named_defaults.insert(p.name.clone(), (*p).clone());
                }
                if p.rule_lines
                    .iter()
                    .any(|l| keywords::rules::is_rule(l.kind))
                {
                    self.parsed.rule_defaults.push((*p).clone());
                }
                self.last_defaults = Some(*p);
            } else {
                self.parsed.proxies.push(*p);
            }
        }
    }
}

/// True when `name` is a valid proxy name (HAProxy allows letters, digits, `-_.:`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// Parses a section header line whose first word is a section keyword. Returns the new current
/// section, reporting problems in `diags`.
fn open_section(
    state: &State,
    kind: SectionKind,
    line: &Line,
    diags: &mut Vec<Diagnostic>,
) -> Current {
    let w = &line.words;
    let span = &line.span;
    let err = |diags: &mut Vec<Diagnostic>, msg: String| {
        diags.push(Diagnostic::alert(Some(span), None, msg))
    };
    if kind == SectionKind::Global {
        if let Some(extra) = w.get(1) {
            err(
                diags,
                format!("'global': unexpected word '{extra}' (the global section takes no name)"),
            );
        }
        return Current::Global;
    }
    // Split `NAME [from DEFAULTS]`; `defaults` may have no name.
    let (name, rest) = match w.get(1).map(String::as_str) {
        Some("from") if kind == SectionKind::Defaults => ("", &w[1..]),
        Some(n) => (n, &w[2..]),
        None if kind == SectionKind::Defaults => ("", &w[1..]),
        None => {
            err(diags, format!("'{}' expects a name", kind.word()));
            return Current::Skipped;
        }
    };
    if !name.is_empty() && !valid_name(name) {
        err(
            diags,
            format!(
                "'{} {name}': invalid name (use letters, digits, '-', '_', '.' and ':')",
                kind.word()
            ),
        );
    }
    let from = match rest {
        [] => None,
        [f, d] if f == "from" => Some(d.as_str()),
        [f] if f == "from" => {
            err(
                diags,
                format!(
                    "'{} {name} from' expects the name of a defaults section",
                    kind.word()
                ),
            );
            None
        }
        [extra, ..] => {
            err(
                diags,
                format!(
                    "'{} {name}': unexpected word '{extra}' (expected 'from DEFAULTS')",
                    kind.word()
                ),
            );
            None
        }
    };
    let base = match from {
        Some(d) => match state.named_defaults.get(d) {
            Some(b) => Some(b),
            None => {
                let hint = suggest(d, state.named_defaults.keys().map(String::as_str));
                diags.push(
                    Diagnostic::alert(
                        Some(span),
                        Some(&label(kind, name)),
                        format!("'from {d}': no defaults section named '{d}' is declared before this line"),
                    )
                    .with_hint(hint),
                );
                None
            }
        },
        None if kind == SectionKind::Defaults => None,
        None => state.last_defaults.as_ref(),
    };
    if let Some(b) = base {
        let has_rules = b
            .rule_lines
            .iter()
            .any(|l| keywords::rules::is_rule(l.kind));
        if has_rules && kind == SectionKind::Defaults {
            diags.push(Diagnostic::alert(
                Some(span),
                Some(&label(kind, name)),
                format!("a defaults section cannot inherit from a defaults section defining TCP/HTTP rules ({} at {})", label(b.kind, &b.name), b.span),
            ));
        } else if has_rules && kind == SectionKind::Listen {
            diags.push(Diagnostic::alert(
                Some(span),
                Some(&label(kind, name)),
                format!("a listen section cannot inherit from a defaults section defining TCP/HTTP rules ({} at {})", label(b.kind, &b.name), b.span),
            ));
        }
    }
    let mut draft = match base {
        Some(b) => ProxyDraft::inherit(b, kind, name, span.clone()),
        None => ProxyDraft::inherit(&ProxyDraft::builtin(span.clone()), kind, name, span.clone()),
    };
    draft.ssl_defaults = state.parsed.global.global.ssl.clone();
    draft.ssl_server_defaults = state.parsed.global.global.ssl_server.clone();
    Current::Proxy(Box::new(draft))
}

/// Opens a `peers NAME` section.
fn open_peers(state: &State, line: &Line, diags: &mut Vec<Diagnostic>) -> Current {
    let span = &line.span;
    let Some(name) = line.words.get(1) else {
        diags.push(Diagnostic::alert(
            Some(span),
            None,
            "'peers' expects a name",
        ));
        return Current::Skipped;
    };
    if !valid_name(name) {
        diags.push(Diagnostic::alert(
            Some(span),
            None,
            format!("'peers {name}': invalid name (use letters, digits, '-', '_', '.' and ':')"),
        ));
    }
    if let Some(extra) = line.words.get(2) {
        diags.push(Diagnostic::alert(
            Some(span),
            None,
            format!("'peers {name}': unexpected word '{extra}'"),
        ));
    }
    if let Some(first) = state.parsed.peers.iter().find(|p| &p.name == name) {
        diags.push(Diagnostic::alert(
            Some(span),
            None,
            format!(
                "'peers {name}': a peers section of this name is already declared at {}",
                first.span
            ),
        ));
        return Current::Skipped;
    }
    Current::Peers(keywords::peers::PeersDraft {
        name: name.clone(),
        span: span.clone(),
        peers: Vec::new(),
        tables: Vec::new(),
        bind: None,
        disabled: false,
    })
}

/// The section parser, fed one line at a time (so that the lexer can read the environment as
/// `setenv` lines leave it, see [`Parser::env`]).
pub struct Parser {
    state: State,
    current: Current,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new(super::lexer::Env::default())
    }
}

impl Parser {
    /// A parser whose `setenv` lines start from `env`.
    pub fn new(env: super::lexer::Env) -> Self {
        let mut parsed = Parsed::default();
        parsed.global.local_peer = env.get("HAPROXY_LOCALPEER").map(str::to_string);
        parsed.global.env = env;
        Parser {
            state: State {
                parsed,
                named_defaults: HashMap::new(),
                last_defaults: None,
            },
            current: Current::Outside,
        }
    }

    /// The environment as the lines read so far leave it.
    pub fn env(&self) -> &super::lexer::Env {
        &self.state.parsed.global.env
    }

    /// Starts a new file: each file starts on a section boundary.
    pub fn start_file(&mut self) {
        let current = std::mem::replace(&mut self.current, Current::Outside);
        self.state.close(current);
    }

    /// Ends the parse and returns the drafts.
    pub fn finish(mut self) -> Parsed {
        self.start_file();
        self.state.parsed
    }

    /// Applies one lexed line.
    pub fn feed(&mut self, mut line: Line, diags: &mut Vec<Diagnostic>) {
        if let Err(e) = expand_address(&mut line.words, &self.state.parsed.global.env) {
            line.error = Some(e);
        }
        let state = &mut self.state;
        let current = &mut self.current;
        if let Some(msg) = &line.error {
            let section = match &*current {
                Current::Global => Some("global".to_string()),
                Current::Proxy(p) => Some(label(p.kind, &p.name)),
                Current::Userlist(u) => Some(label(SectionKind::Userlist, &u.name)),
                Current::Peers(p) => Some(label(SectionKind::Peers, &p.name)),
                Current::HttpErrors(h) => Some(label(SectionKind::HttpErrors, &h.name)),
                Current::Ring(r) => Some(label(SectionKind::Ring, &r.ring.name)),
                Current::LogForward(f) => Some(label(SectionKind::LogForward, &f.name)),
                Current::Outside | Current::Skipped => None,
            };
            diags.push(Diagnostic::alert(
                Some(&line.span),
                section.as_deref(),
                msg.as_str(),
            ));
            return;
        }
        let Some(first) = line.words.first() else {
            return;
        };
        let kind = match first.as_str() {
            "global" => Some(SectionKind::Global),
            "defaults" => Some(SectionKind::Defaults),
            "frontend" => Some(SectionKind::Frontend),
            "backend" => Some(SectionKind::Backend),
            "listen" => Some(SectionKind::Listen),
            _ => None,
        };
        if let Some(kind) = kind {
            state.close(std::mem::replace(current, Current::Skipped));
            *current = open_section(state, kind, &line, diags);
            return;
        }
        if first == "userlist" {
            state.close(std::mem::replace(current, Current::Skipped));
            let Some(name) = line.words.get(1) else {
                diags.push(Diagnostic::alert(
                    Some(&line.span),
                    None,
                    "'userlist' expects a name",
                ));
                return;
            };
            if state.parsed.userlists.iter().any(|u| &u.name == name) {
                diags.push(Diagnostic::warning(
                    Some(&line.span),
                    None,
                    format!("ignoring duplicated userlist '{name}' (its lines are skipped)"),
                ));
                return;
            }
            if let Some(extra) = line.words.get(2) {
                diags.push(Diagnostic::alert(
                    Some(&line.span),
                    None,
                    format!("'userlist {name}': unexpected word '{extra}'"),
                ));
            }
            *current = Current::Userlist(keywords::userlist::UserlistDraft {
                name: name.clone(),
                span: line.span.clone(),
                users: Vec::new(),
                groups: Vec::new(),
            });
            return;
        }
        if first == "peers" {
            state.close(std::mem::replace(current, Current::Skipped));
            state.parsed.global.peers_seen = true;
            *current = open_peers(state, &line, diags);
            return;
        }
        if first == "http-errors" {
            state.close(std::mem::replace(current, Current::Skipped));
            let Some(name) = line.words.get(1) else {
                diags.push(Diagnostic::alert(
                    Some(&line.span),
                    None,
                    "missing name for http-errors section",
                ));
                return;
            };
            if let Some(prev) = state.parsed.http_errors.iter().find(|h| &h.name == name) {
                diags.push(Diagnostic::alert(
                    Some(&line.span),
                    None,
                    format!(
                        "http-errors section '{name}' already exists (declared at {}:{})",
                        prev.span.file, prev.span.line
                    ),
                ));
                return;
            }
            *current = Current::HttpErrors(keywords::http_errors::HttpErrorsDraft {
                name: name.clone(),
                span: line.span.clone(),
                files: Vec::new(),
            });
            return;
        }
        if first == "ring" || first == "log-forward" {
            state.close(std::mem::replace(current, Current::Skipped));
            let Some(name) = line.words.get(1) else {
                diags.push(Diagnostic::alert(
                    Some(&line.span),
                    None,
                    format!("'{first}' expects a name"),
                ));
                return;
            };
            let taken = if first == "ring" {
                state
                    .parsed
                    .rings
                    .iter()
                    .find(|r| &r.ring.name == name)
                    .map(|r| r.span.clone())
            } else {
                state
                    .parsed
                    .log_forwards
                    .iter()
                    .find(|f| &f.name == name)
                    .map(|f| f.span.clone())
            };
            if let Some(prev) = taken {
                diags.push(Diagnostic::alert(
                    Some(&line.span),
                    None,
                    format!(
                        "'{first} {name}': a section of this name is already declared at {prev}"
                    ),
                ));
                return;
            }
            if let Some(extra) = line.words.get(2) {
                diags.push(Diagnostic::alert(
                    Some(&line.span),
                    None,
                    format!("'{first} {name}': unexpected word '{extra}'"),
                ));
            }
            let global = &state.parsed.global.global;
            *current = if first == "ring" {
                let mut r = keywords::ring::new_ring(name, line.span.clone());
                r.ssl_server_defaults = global.ssl_server.clone();
                r.ssl_defaults = global.ssl.clone();
                Current::Ring(Box::new(r))
            } else {
                Current::LogForward(Box::new(keywords::ring::LogForwardDraft {
                    name: name.clone(),
                    span: line.span.clone(),
                    binds: Vec::new(),
                    dgram_binds: Vec::new(),
                    logs: Vec::new(),
                    maxconn: None,
                    timeout_client: None,
                    ssl_defaults: global.ssl.clone(),
                }))
            };
            return;
        }
        if OTHER_SECTIONS.contains(&first.as_str()) {
            diags.push(Diagnostic::alert(
                Some(&line.span),
                None,
                format!("'{first}' is a HAProxy section that Bascule does not support yet; its lines are skipped"),
            ));
            state.close(std::mem::replace(current, Current::Skipped));
            return;
        }
        match current {
            Current::Outside => {
                let hint = suggest(
                    first,
                    ["global", "defaults", "frontend", "backend", "listen"],
                );
                diags.push(
                    Diagnostic::alert(
                        Some(&line.span),
                        None,
                        format!("'{first}' is outside of any section (a file must start with global, defaults, frontend, backend or listen)"),
                    )
                    .with_hint(hint),
                );
                *current = Current::Skipped;
            }
            Current::Skipped => {}
            Current::Global => keywords::apply(
                keywords::global::KEYWORDS,
                &mut state.parsed.global,
                &line.words,
                &line.span,
                SectionKind::Global,
                "global",
                diags,
            ),
            Current::Userlist(u) => {
                let section = label(SectionKind::Userlist, &u.name);
                keywords::apply(
                    keywords::userlist::KEYWORDS,
                    u,
                    &line.words,
                    &line.span,
                    SectionKind::Userlist,
                    &section,
                    diags,
                );
            }
            Current::Peers(p) => {
                let section = label(SectionKind::Peers, &p.name);
                keywords::apply(
                    keywords::peers::KEYWORDS,
                    p,
                    &line.words,
                    &line.span,
                    SectionKind::Peers,
                    &section,
                    diags,
                );
            }
            Current::Ring(r) => {
                let section = label(SectionKind::Ring, &r.ring.name);
                keywords::apply(
                    keywords::ring::RING_KEYWORDS,
                    r.as_mut(),
                    &line.words,
                    &line.span,
                    SectionKind::Ring,
                    &section,
                    diags,
                );
            }
            Current::LogForward(f) => {
                let section = label(SectionKind::LogForward, &f.name);
                keywords::apply(
                    keywords::ring::FORWARD_KEYWORDS,
                    f.as_mut(),
                    &line.words,
                    &line.span,
                    SectionKind::LogForward,
                    &section,
                    diags,
                );
            }
            Current::HttpErrors(h) => {
                let section = label(SectionKind::HttpErrors, &h.name);
                keywords::apply(
                    keywords::http_errors::KEYWORDS,
                    h,
                    &line.words,
                    &line.span,
                    SectionKind::HttpErrors,
                    &section,
                    diags,
                );
            }
            Current::Proxy(p) => {
                let section = label(p.kind, &p.name);
                let kind = p.kind;
                let binds_before = p.binds.len();
                keywords::apply(
                    keywords::proxy::KEYWORDS,
                    p.as_mut(),
                    &line.words,
                    &line.span,
                    kind,
                    &section,
                    diags,
                );
                // `unix-bind` applies to the UNIX binds read after it, as in HAProxy.
                let unix_bind = &state.parsed.global.unix_bind;
                for b in p.binds.iter_mut().skip(binds_before) {
                    if let Err(e) = unix_bind.apply(b) {
                        diags.push(Diagnostic::alert(
                            Some(&line.span),
                            Some(&section),
                            format!("'bind': {e}"),
                        ));
                    }
                }
            }
        }
    }
}

/// HAProxy's address parser expands environment variables itself, so an address word takes
/// `${VAR}` even outside double quotes (`bind :${PORT}`, `server s ${HOST}:80`, `log
/// ${ADDR}:514 local0`), where other words keep it as written. The address is the word after
/// `bind`, `log` and `source`, and the one after the name of `server` and `stats socket`.
fn expand_address(words: &mut [String], env: &super::lexer::Env) -> Result<(), String> {
    let at = match words.first().map(String::as_str) {
        Some("bind" | "log" | "source") => 1,
        Some("server" | "peer") => 2,
        Some("stats") if words.get(1).map(String::as_str) == Some("socket") => 2,
        _ => return Ok(()),
    };
    if let Some(w) = words.get_mut(at) {
        if w.contains('$') {
            *w = super::lexer::expand_word(w, env)?;
        }
    }
    Ok(())
}

/// Parses already lexed files (each a list of lines) into drafts.
pub fn parse(files: Vec<Vec<Line>>, diags: &mut Vec<Diagnostic>) -> Parsed {
    let mut parser = Parser::default();
    for lines in files {
        parser.start_file();
        for line in lines {
            parser.feed(line, diags);
        }
    }
    parser.finish()
}
