//! `set-var` and `set-var-fmt` in `global`: `proc` variables set once, in line order, while
//! the configuration loads (as HAProxy does, so `-c` evaluates them too), and what `get var`
//! on the stats socket prints.
//!
//! Only samples that need no stream are allowed there (constants, `var`, `env`, `date`,
//! `rand`, `uuid`...): HAProxy refuses `src` or `req.hdr` in the global section, and so does
//! this, naming the fetch.

use std::cell::RefCell;
use std::collections::HashMap;

use super::lf::LfPart;
use super::lf::LfString;
use super::source::Stored;
use super::vars::{VarCond, Vars};
use super::{Eval, Expr, Names, RuleError, Scope, Source, Value};

/// A `set-var`/`set-var-fmt` line of `global`, compiled.
#[derive(Debug)]
pub struct ProcVar {
    pub id: usize,
    pub value: ProcValue,
}

#[derive(Debug)]
pub enum ProcValue {
    Expr(Expr),
    Fmt(LfString),
}

/// Fetches whose value needs no stream, allowed in `global`.
const NO_STREAM: &[&str] = &[
    "int",
    "str",
    "bool",
    "bin",
    "ipv4",
    "ipv6",
    "meth",
    "var",
    "env",
    "date",
    "rand",
    "uuid",
    "always_true",
    "always_false",
];

fn check_fetch(e: &Expr, line: &str) -> Result<(), RuleError> {
    let name = e.fetch.def.name;
    if NO_STREAM.contains(&name) {
        return Ok(());
    }
    Err(RuleError::new(format!(
        "'{line}': fetch method '{name}' needs a stream (a connection or a request), none of which is available in the global section"
    )))
}

/// Compiles `set-var NAME EXPR` or `set-var-fmt NAME FMT` (`words` is the whole line).
pub fn compile(words: &[String], names: &dyn Names) -> Result<ProcVar, RuleError> {
    let kw = words.first().map_or("set-var", String::as_str);
    let fmt = kw == "set-var-fmt";
    let line = words.join(" ");
    let (Some(var), Some(value)) = (
        words.get(1).filter(|w| !w.is_empty()),
        words.get(2).filter(|w| !w.is_empty()),
    ) else {
        return Err(RuleError::new(format!(
            "'{kw}' requires a process-wide variable name ('proc.<name>') and {}.",
            if fmt {
                "a format string"
            } else {
                "a sample expression"
            }
        )));
    };
    if let Some(extra) = words.get(3) {
        return Err(RuleError::new(format!(
            "'{line}': unexpected word '{extra}' (a global '{kw}' takes a name and one value, no condition)"
        )));
    }
    let (scope, name) = var
        .split_once('.')
        .and_then(|(s, n)| Some((Scope::parse(s)?, n)))
        .filter(|(_, n)| !n.is_empty())
        .ok_or_else(|| {
            RuleError::new(format!(
                "'{kw}': invalid variable name '{var}'. A variable name must start with its scope, 'proc' here"
            ))
        })?;
    if scope != Scope::Proc {
        return Err(RuleError::new(format!(
            "'{kw}': cannot set variable '{var}', only scope 'proc' is permitted in the global section."
        )));
    }
    let value = if fmt {
        let l = LfString::compile(value, names)?;
        for p in &l.parts {
            match p {
                LfPart::Expr { expr, .. } => check_fetch(expr, &line)?,
                LfPart::Var { .. } => {
                    return Err(RuleError::new(format!(
                        "'{line}': only %[...] samples are available in the global section"
                    )))
                }
                LfPart::Lit(_) | LfPart::Sep => {}
            }
        }
        ProcValue::Fmt(l)
    } else {
        let e = Expr::compile(value, names)?;
        check_fetch(&e, &line)?;
        ProcValue::Expr(e)
    };
    Ok(ProcVar {
        id: names.var(Scope::Proc, name),
        value,
    })
}

/// What a global `set-var` reads: the `proc` variables set so far and the environment.
struct LoadSource<'a> {
    vars: RefCell<Vars>,
    env: &'a HashMap<String, String>,
}

impl Source for LoadSource<'_> {
    fn var(&self, scope: Scope, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        (scope == Scope::Proc)
            .then(|| self.vars.borrow().get(id, out))
            .flatten()
    }
    fn set_var(&self, scope: Scope, id: usize, v: Value<'_>) {
        if scope == Scope::Proc {
            self.vars.borrow_mut().set(id, v);
        }
    }
    fn set_var_if(&self, scope: Scope, id: usize, v: Value<'_>, cond: VarCond) {
        if scope == Scope::Proc {
            self.vars.borrow_mut().set_if(id, v, cond);
        }
    }
    fn env(&self, name: &str) -> Option<&[u8]> {
        self.env.get(name).map(|v| v.as_bytes())
    }
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }
    fn random(&self) -> u32 {
        crate::base::clock::random_u32()
    }
}

/// The `proc` variables at start: the global lines evaluated in order (a sample that is
/// absent leaves its variable unset, as in HAProxy), and every `proc` variable the
/// configuration names declared (HAProxy creates them while parsing, so `ifexists` holds).
pub fn initial(
    lines: &[ProcVar],
    declared: impl IntoIterator<Item = usize>,
    env: &HashMap<String, String>,
) -> Vars {
    let src = LoadSource {
        vars: RefCell::new(Vars::default()),
        env,
    };
    let mut ev = Eval::new();
    let mut text = Vec::new();
    for l in lines {
        match &l.value {
            ProcValue::Expr(e) => {
                if let Some(s) = e.eval(&src, &mut ev) {
                    let v = ev.value(s);
                    src.set_var(Scope::Proc, l.id, v);
                }
            }
            ProcValue::Fmt(f) => {
                text.clear();
                f.render(&src, &mut ev, &|_, _| {}, &mut text);
                src.set_var(Scope::Proc, l.id, Value::Str(&text));
            }
        }
    }
    let mut vars = src.vars.into_inner();
    for id in declared {
        vars.declare(id);
    }
    vars
}

/// `set var` on the stats socket: `line` evaluated over the current `proc` store; the new
/// store.
pub fn apply(line: &ProcVar, current: &Vars, env: &HashMap<String, String>) -> Vars {
    let src = LoadSource {
        vars: RefCell::new(current.clone()),
        env,
    };
    let mut ev = Eval::new();
    let mut text = Vec::new();
    match &line.value {
        ProcValue::Expr(e) => {
            if let Some(s) = e.eval(&src, &mut ev) {
                let v = ev.value(s);
                src.set_var(Scope::Proc, line.id, v);
            }
        }
        ProcValue::Fmt(f) => {
            f.render(&src, &mut ev, &|_, _| {}, &mut text);
            src.set_var(Scope::Proc, line.id, Value::Str(&text));
        }
    }
    src.vars.into_inner()
}

/// The reply of `get var NAME` (HAProxy's format), from the `proc` store. As in HAProxy, a
/// value is a message without its own newline (the CLI's end-of-answer newline ends it); an
/// error ends with one, then the empty line.
pub fn show(name: &str, id: Option<usize>, vars: &Vars) -> String {
    let mut bytes = Vec::new();
    let Some(kind) = id.and_then(|id| vars.get(id, &mut bytes)) else {
        return "Variable not found.\n".to_string();
    };
    let (ty, text) = match kind {
        Stored::Bool(b) => ("bool", u8::from(b).to_string()),
        Stored::Sint(i) => ("sint", i.to_string()),
        Stored::Ipv4(a) => ("ipv4", a.to_string()),
        Stored::Ipv6(a) => ("ipv6", a.to_string()),
        Stored::Str => ("str", printable(&bytes)),
        Stored::Bin => ("bin", printable(&bytes)),
        Stored::Meth => ("meth", printable(&bytes)),
    };
    format!("{name}: type={ty} value=<{text}>")
}

/// Printable ASCII as is, anything else as `.` (HAProxy's `isprint` filter).
fn printable(b: &[u8]) -> String {
    b.iter()
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                c as char
            } else {
                '.'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::NameTable;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn global_lines_evaluate_in_order() {
        let names = NameTable::default();
        let lines: Vec<ProcVar> = [
            "set-var proc.int12 int(12)",
            "set-var proc.int5 var(proc.str60,60),div(proc.int12)",
            "set-var proc.str1 str(this)",
            "set-var-fmt proc.str %[var(proc.str1)]-%[var(proc.int5)]",
            "set-var proc.home env(HOME)",
        ]
        .iter()
        .map(|l| compile(&words(l), &names).unwrap())
        .collect();
        let mut env = HashMap::new();
        env.insert("HOME".to_string(), "/root".to_string());
        let vars = initial(&lines, [], &env);
        let id = |n: &str| names.var(Scope::Proc, n);
        assert_eq!(
            show("proc.int5", Some(id("int5")), &vars),
            "proc.int5: type=sint value=<5>"
        );
        assert_eq!(
            show("proc.str", Some(id("str")), &vars),
            "proc.str: type=str value=<this-5>"
        );
        assert_eq!(
            show("proc.home", Some(id("home")), &vars),
            "proc.home: type=str value=</root>"
        );
        assert_eq!(show("proc.none", None, &vars), "Variable not found.\n");
    }

    #[test]
    fn what_haproxy_refuses() {
        let names = NameTable::default();
        let e = |l: &str| compile(&words(l), &names).unwrap_err().message;
        assert!(e("set-var proc.a src").contains("'src' needs a stream"));
        assert!(e("set-var txn.a int(1)").contains("only scope 'proc'"));
        assert!(e("set-var proc.f").contains("requires a process-wide variable name"));
        assert!(e("set-var proc.e str(a) if TRUE").contains("unexpected word 'if'"));
    }
}
