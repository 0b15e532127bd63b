//! The rules engine's pure core: sample fetches, converters, patterns, ACLs and conditions,
//! compiled once from configuration words and evaluated per request without allocating.
//!
//! # Pipeline
//!
//! ```text
//! config words (already split and unquoted by config::lexer)
//!   └─ compile (config load; may read pattern and map files)
//!        expr::Expr::compile     "req.hdr(host),lower,map_dom(hosts.map,www)"
//!            fetch::Fetch          catalogue entry + typed arguments; backend/server/userlist
//!                                  names resolved to indices through `Names`
//!            conv::Conv*           type-checked against the previous output
//!        acl::compile_acl        "acl NAME EXPR [FLAGS] [OPERATOR] VALUE..." into `Acls`
//!            pattern::Patterns      hash set / prefix tree / regex set, chosen by match method
//!        cond::compile_cond      "if|unless TERM [||] ..." over `Acls` and anonymous `{ }` ACLs
//!   └─ eval (per request, on a worker)
//!        Cond::eval(&S, &mut Eval) -> bool        (or Cond::eval3 -> Match::Yes/No/Miss)
//!        Expr::eval(&S, &mut Eval) -> Option<Sample>; Eval::value(sample) -> Value
//! ```
//!
//! # What the runtime implements
//!
//! [`Source`] (in [`source`]) is everything evaluation reads: addresses, the request and
//! response heads by header index (so an HTTP/1 head kept as offsets answers without copying),
//! backend and server live facts by the indices resolved at compile time, variables, the clock
//! and a random number. Evaluation (conditions, ACLs, expressions, fetches, converters,
//! log-format strings) is generic over `S: Source + ?Sized`: the runtime's own source is
//! compiled in, its accessors inlined into the fetches (no indirect call per header or address
//! read), and a `&dyn Source` still works where one is all a caller has. [`Names`] is what
//! compilation asks the config layer: backend, server, frontend and userlist names to indices,
//! and variable names to ids.
//!
//! The runtime keeps one [`Eval`] per worker (or per session) and passes it to every
//! evaluation: converters that make new bytes write into its two buffers in turn, so in
//! steady state nothing is allocated (tests/rules_alloc.rs counts).
//!
//! # Phases
//!
//! Each fetch says where it is usable ([`Phases`]: connection, session, request, response).
//! [`expr::Expr::phases`] and [`cond::Cond::acl_phases`] give where they can run, so the config layer
//! can report a response fetch in `http-request` as HAProxy does (an error for a sample
//! expression, a "will never match" warning for an ACL).
//!
//! # API at a glance
//!
//! ```text
//! compile (config layer)                                   evaluate (runtime)
//! acl::compile_acl(name, &words, &dyn Names, &mut Acls)    Cond::eval(&S, &mut Eval) -> bool
//!     -> Result<Vec<Warning>, RuleError>                   Cond::eval3(..) -> Match::{Yes, No, Miss}
//! Acls::finish()          (end of the proxy section)       Expr::eval(&S, &mut Eval)
//! cond::split_cond(&words) -> (before, Some((Polarity, rest)))   -> Option<Sample>
//! cond::compile_cond(rest, Polarity, &Acls, &dyn Names)    Eval::value(Sample) -> Value (bytes resolved)
//!     -> Result<(Cond, Vec<Warning>), RuleError>
//! expr::Expr::compile("fetch,conv(..)", &dyn Names) -> Result<Expr, RuleError>
//! Expr::out_type(), Expr::phases(), Cond::acl_phases()     (diagnostics: wrong phase)
//! ```
//!
//! Deliberate differences from haproxy 2.6: `acl X nbsrv(b) -lt 2` is accepted with a warning
//! (haproxy rejects `-lt`); an empty condition (`if` alone) and a dangling `||` are errors
//! (haproxy accepts them); `-i` applies to every pattern of the line, also those of a `-f`
//! file given before it.
//!
//! Layer 1: no I/O at evaluation, no sockets, threads or clock (time comes from `Source::now`).
//! Pattern and map files are read at compile time, relative to the current directory, each
//! once ([`Names::pat_file`]); what is built from them may be rebuilt later from new entries
//! when the runtime API changes a file ([`patfile`]), never by evaluation.

pub mod acl;
pub mod action;
pub mod ciphers;
pub mod cond;
pub mod conv;
pub mod digest;
pub mod expr;
pub mod fetch;
pub mod fix;
pub mod hash;
pub mod iptree;
pub mod json;
pub mod jwt;
pub mod lf;
pub mod memo;
pub mod mqtt;
pub mod patfile;
pub mod pattern;
pub mod proc_vars;
pub mod relit;
pub mod sample;
pub mod source;
pub mod stick;
pub mod userlist;
pub mod vars;
pub mod xxh3;

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

pub use acl::{compile_acl, Acl, Acls, Match};
pub use cond::{compile_cond, split_cond, Cond, Polarity, TermTrace};
pub use expr::Expr;
pub use sample::{Eval, Sample, SmpType, Value};
pub use source::{Scope, Source, TestSource};

/// A compile error: the message names the word at fault and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    pub message: String,
}

impl RuleError {
    pub fn new(message: impl Into<String>) -> Self {
        RuleError {
            message: message.into(),
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuleError {}

pub(crate) fn err<T>(message: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError::new(message))
}

/// A compile warning (a legacy spelling accepted): the config layer prints it with file:line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub message: String,
}

/// " (did you mean 'x'?)" or "" — the config layer's suggestion algorithm.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    match crate::config::diag::suggest(word, candidates) {
        Some(s) => format!(" ({s})"),
        None => String::new(),
    }
}

/// Where a fetch (and so an expression or condition) can be evaluated: a set of phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Phases(pub u8);

impl Phases {
    /// `tcp-request connection`: only the connection's addresses are known.
    pub const CONN: Phases = Phases(1);
    /// `tcp-request session`.
    pub const SESS: Phases = Phases(2);
    /// Request analysis: `tcp-request content`, `http-request`, `use_backend`, `redirect`.
    pub const REQ: Phases = Phases(4);
    /// Response analysis: `http-response`, `tcp-response content`.
    pub const RES: Phases = Phases(8);
    pub const ALL: Phases = Phases(15);
    pub const NONE: Phases = Phases(0);

    pub fn contains(self, other: Phases) -> bool {
        self.0 & other.0 == other.0
    }
    pub fn and(self, other: Phases) -> Phases {
        Phases(self.0 & other.0)
    }
    pub fn or(self, other: Phases) -> Phases {
        Phases(self.0 | other.0)
    }
}

/// What compilation asks the config layer: names to indices. Backend, server, frontend and
/// userlist indices are the ones the runtime's [`Source`] answers by; `var` interns a variable
/// name (the same scope and name always give the same id).
pub trait Names {
    fn backend(&self, name: &str) -> Option<usize>;
    fn server(&self, be: usize, name: &str) -> Option<usize>;
    fn frontend(&self, name: &str) -> Option<usize> {
        let _ = name;
        None
    }
    fn userlist(&self, name: &str) -> Option<usize> {
        let _ = name;
        None
    }
    fn var(&self, scope: Scope, name: &str) -> usize;
    /// The raw response `http-errors` section `section` declares for `status`: `None` when
    /// there is no such section, `Some(None)` when it does not declare that status.
    fn http_error(&self, section: &str, status: u16) -> Option<Option<Vec<u8>>> {
        let _ = (section, status);
        None
    }
    /// The memo id of a sample expression's text (the same text, the same id; see
    /// [`memo`]). `None`: this configuration layer does not memoize.
    fn expr_id(&self, text: &str) -> Option<u32> {
        let _ = text;
        None
    }
    /// Known backend names, for "did you mean" (compile time only).
    fn backend_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// Known server names of a backend, for "did you mean".
    fn server_names(&self, be: usize) -> Vec<String> {
        let _ = be;
        Vec::new()
    }
    /// The stick table of the proxy named `name` (an index into the process's tables).
    fn table(&self, name: &str) -> Option<usize> {
        let _ = name;
        None
    }
    /// The stick table of the proxy whose rules are being compiled (`src_*` and `track-sc`
    /// without a table argument).
    fn current_table(&self) -> Option<usize> {
        None
    }
    /// Known stick table names, for "did you mean".
    fn table_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// The entries of pattern file `path` (`two_columns`: a map, or an ACL's `-M`; `as_map`:
    /// for a map converter, else an ACL line) and its index. A configuration layer with a
    /// runtime keeps its pattern files together (each read once, changed by `add map`,
    /// `add acl`...: see [`patfile`]); by default the file is read for this caller alone.
    fn pat_file(
        &self,
        path: &str,
        two_columns: bool,
        as_map: bool,
    ) -> Result<(usize, patfile::Entries), RuleError> {
        let _ = as_map;
        Ok((0, Arc::new(patfile::read(path, two_columns)?)))
    }
    /// Registers what was built from pattern files `files` (as [`Names::pat_file`] numbered
    /// them), to be rebuilt when the runtime API changes one. By default nothing changes them.
    fn pat_user(&self, files: &[usize], user: Arc<dyn patfile::FileUser>) {
        let _ = (files, user);
    }
}

/// The error responses of an `http-errors` section: each status with its raw response.
pub type ErrorPages = Vec<(u16, Vec<u8>)>;

/// A ready-made [`Names`] over plain lists; the config layer may use it or its own.
#[derive(Debug, Default)]
pub struct NameTable {
    /// Backends in index order, each with its servers in index order.
    pub backends: Vec<(String, Vec<String>)>,
    pub frontends: Vec<String>,
    pub userlists: Vec<String>,
    /// `http-errors` sections: name, then each status with its raw response.
    pub http_errors: Vec<(String, ErrorPages)>,
    /// Interned variables: the id is the position.
    pub vars: RefCell<Vec<(Scope, String)>>,
    /// Stick tables in index order (named after their proxies).
    pub tables: Vec<String>,
    /// The table of the proxy being compiled, set by the config layer before each proxy.
    pub current_table: std::cell::Cell<Option<usize>>,
    /// Interned texts of memoizable sample expressions: the id is the position.
    pub exprs: RefCell<Vec<String>>,
    /// Servers the compiled rules named (backend, server), in lookup order: `del server`
    /// may not remove them.
    pub referenced: RefCell<Vec<(usize, usize)>>,
    /// The pattern files the map converters and ACL lines read, for the runtime API.
    pub pat_files: RefCell<patfile::PatFiles>,
}

impl Names for NameTable {
    fn backend(&self, name: &str) -> Option<usize> {
        self.backends.iter().position(|b| b.0 == name)
    }
    fn server(&self, be: usize, name: &str) -> Option<usize> {
        let s = self.backends.get(be)?.1.iter().position(|s| s == name)?;
        self.referenced.borrow_mut().push((be, s));
        Some(s)
    }
    fn frontend(&self, name: &str) -> Option<usize> {
        self.frontends.iter().position(|f| f == name)
    }
    fn userlist(&self, name: &str) -> Option<usize> {
        self.userlists.iter().position(|u| u == name)
    }
    fn http_error(&self, section: &str, status: u16) -> Option<Option<Vec<u8>>> {
        let (_, files) = self.http_errors.iter().find(|h| h.0 == section)?;
        Some(
            files
                .iter()
                .rev()
                .find(|f| f.0 == status)
                .map(|f| f.1.clone()),
        )
    }
    fn var(&self, scope: Scope, name: &str) -> usize {
        let mut vars = self.vars.borrow_mut();
        if let Some(i) = vars.iter().position(|v| v.0 == scope && v.1 == name) {
            return i;
        }
        vars.push((scope, name.to_string()));
        vars.len() - 1
    }
    fn expr_id(&self, text: &str) -> Option<u32> {
        let mut exprs = self.exprs.borrow_mut();
        let i = match exprs.iter().position(|e| e == text) {
            Some(i) => i,
            None => {
                exprs.push(text.to_string());
                exprs.len() - 1
            }
        };
        u32::try_from(i).ok()
    }
    fn backend_names(&self) -> Vec<String> {
        self.backends.iter().map(|b| b.0.clone()).collect()
    }
    fn server_names(&self, be: usize) -> Vec<String> {
        self.backends
            .get(be)
            .map(|b| b.1.clone())
            .unwrap_or_default()
    }
    fn table(&self, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| t == name)
    }
    fn current_table(&self) -> Option<usize> {
        self.current_table.get()
    }
    fn table_names(&self) -> Vec<String> {
        self.tables.clone()
    }
    fn pat_file(
        &self,
        path: &str,
        two_columns: bool,
        as_map: bool,
    ) -> Result<(usize, patfile::Entries), RuleError> {
        self.pat_files.borrow_mut().open(path, two_columns, as_map)
    }
    fn pat_user(&self, files: &[usize], user: Arc<dyn patfile::FileUser>) {
        self.pat_files.borrow_mut().add_user(files, user);
    }
}
