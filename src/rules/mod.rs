//! TEMPORARY STUB of the rules engine core (branch `rules-core` owns this file): just enough of
//! its announced API for the configuration side to compile until that branch is merged.

pub mod action;
pub mod lf;
pub mod userlist;

use std::cell::RefCell;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    pub message: String,
}
impl RuleError {
    pub fn new(message: impl Into<String>) -> Self {
        RuleError { message: message.into() }
    }
}
impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub message: String,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Phases(pub u8);
impl Phases {
    pub const CONN: Phases = Phases(1);
    pub const SESS: Phases = Phases(2);
    pub const REQ: Phases = Phases(4);
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Proc,
    Sess,
    Txn,
    Req,
    Res,
}
impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        Some(match s {
            "proc" => Scope::Proc,
            "sess" => Scope::Sess,
            "txn" => Scope::Txn,
            "req" => Scope::Req,
            "res" => Scope::Res,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Scope::Proc => "proc",
            Scope::Sess => "sess",
            Scope::Txn => "txn",
            Scope::Req => "req",
            Scope::Res => "res",
        }
    }
}
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
    fn backend_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn server_names(&self, be: usize) -> Vec<String> {
        let _ = be;
        Vec::new()
    }
}
#[derive(Debug, Default)]
pub struct NameTable {
    pub backends: Vec<(String, Vec<String>)>,
    pub frontends: Vec<String>,
    pub userlists: Vec<String>,
    pub vars: RefCell<Vec<(Scope, String)>>,
}
impl Names for NameTable {
    fn backend(&self, name: &str) -> Option<usize> {
        self.backends.iter().position(|b| b.0 == name)
    }
    fn server(&self, be: usize, name: &str) -> Option<usize> {
        self.backends.get(be)?.1.iter().position(|s| s == name)
    }
    fn frontend(&self, name: &str) -> Option<usize> {
        self.frontends.iter().position(|f| f == name)
    }
    fn userlist(&self, name: &str) -> Option<usize> {
        self.userlists.iter().position(|u| u == name)
    }
    fn var(&self, scope: Scope, name: &str) -> usize {
        let mut vars = self.vars.borrow_mut();
        if let Some(i) = vars.iter().position(|v| v.0 == scope && v.1 == name) {
            return i;
        }
        vars.push((scope, name.to_string()));
        vars.len() - 1
    }
    fn backend_names(&self) -> Vec<String> {
        self.backends.iter().map(|b| b.0.clone()).collect()
    }
}
/// Stub expression: checks the fetch name against a short list.
#[derive(Clone, Debug)]
pub struct Expr {
    pub text: String,
    phases: Phases,
}
impl Expr {
    pub fn compile(word: &str, _names: &dyn Names) -> Result<Expr, RuleError> {
        let fetch = word.split([',', '(']).next().unwrap_or("");
        let known = ["src", "dst", "src_port", "dst_port", "path", "req.hdr", "hdr", "res.hdr", "status", "str", "int", "ssl_fc", "nbsrv", "var", "method", "fe_name", "be_name", "srv_name", "url", "query", "base"];
        if !known.contains(&fetch) {
            return Err(RuleError::new(format!("unknown fetch method '{fetch}'")));
        }
        let phases = match fetch {
            "res.hdr" | "status" => Phases::RES,
            "path" | "req.hdr" | "hdr" | "method" | "url" | "query" | "base" => Phases::REQ,
            _ => Phases::ALL,
        };
        Ok(Expr { text: word.to_string(), phases })
    }
    pub fn phases(&self) -> Phases {
        self.phases
    }
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polarity {
    If,
    Unless,
}
#[derive(Clone, Debug)]
pub struct Cond {
    pub words: Vec<String>,
    phases: Phases,
}
impl Cond {
    pub fn phases(&self) -> Phases {
        self.phases
    }
}
#[derive(Clone, Debug, Default)]
pub struct Acls {
    pub names: Vec<(String, Phases)>,
}
pub fn compile_acl(name: &str, words: &[String], names: &dyn Names, acls: &mut Acls) -> Result<Vec<Warning>, RuleError> {
    let e = Expr::compile(words.first().map_or("", String::as_str), names)?;
    acls.names.push((name.to_string(), e.phases()));
    Ok(Vec::new())
}
pub fn compile_cond(words: &[String], _p: Polarity, acls: &Acls, names: &dyn Names) -> Result<Cond, RuleError> {
    let mut phases = Phases::ALL;
    let mut i = 0;
    while i < words.len() {
        let w = words[i].trim_start_matches('!');
        if w == "{" {
            let end = words[i..].iter().position(|x| x == "}").ok_or_else(|| RuleError::new("missing '}'"))?;
            phases = phases.and(Expr::compile(&words[i + 1], names)?.phases());
            i += end + 1;
            continue;
        }
        if w != "||" && w != "or" && !w.is_empty() {
            match acls.names.iter().rev().find(|a| a.0 == w) {
                Some(a) => phases = phases.and(a.1),
                None if matches!(w, "TRUE" | "FALSE") => {}
                None => return Err(RuleError::new(format!("no such ACL : '{w}'"))),
            }
        }
        i += 1;
    }
    Ok(Cond { words: words.to_vec(), phases })
}
