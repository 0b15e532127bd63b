//! Conditions: `if|unless TERM...` with implicit AND, `||`/`or`, `!`, and anonymous ACLs in
//! braces, compiled against the proxy's declared ACLs.
//!
//! Why compiled to a flat OR of ANDs: that is the whole grammar (HAProxy has no parentheses),
//! and evaluation is then two loops that stop early, with every ACL already resolved to its
//! slot (no lookup by name per request). Names resolve when the condition is compiled, as in
//! HAProxy: an ACL not declared yet in the proxy is "no such ACL" (predefined ones excepted).
//! Evaluation is three-valued ([`Match`]) for content inspection; [`Cond::eval`] gives the
//! boolean the HTTP rules need.

use std::sync::Arc;

use super::acl::{compile_term, predefined, Acl, AclSlot, Acls, Match, PREDEFINED};
use super::sample::Eval;
use super::source::Source;
use super::{did_you_mean, err, Names, Phases, RuleError, Warning};

/// `if` or `unless`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polarity {
    If,
    Unless,
}

#[derive(Debug)]
struct Term {
    acl: AclSlot,
    neg: bool,
    /// The name as written (`{ ... }` for anonymous ACLs), for dumps and messages.
    name: Box<str>,
}

/// A compiled condition.
#[derive(Debug)]
pub struct Cond {
    pub polarity: Polarity,
    /// OR of ANDs.
    groups: Box<[Box<[Term]>]>,
}

/// Splits a rule's words at `if`/`unless`: the words before, and the polarity with the
/// condition's words, if any.
pub fn split_cond(words: &[String]) -> (&[String], Option<(Polarity, &[String])>) {
    match words.iter().position(|w| w == "if" || w == "unless") {
        Some(p) => {
            let pol = if words[p] == "if" {
                Polarity::If
            } else {
                Polarity::Unless
            };
            (&words[..p], Some((pol, &words[p + 1..])))
        }
        None => (words, None),
    }
}

/// Compiles the words after `if`/`unless`. ACL names resolve against `acls` (declared so far)
/// and the predefined ACLs; anonymous `{ ... }` ACLs are compiled here. Legacy spellings inside
/// braces produce warnings, returned with the condition.
pub fn compile_cond(
    words: &[String],
    polarity: Polarity,
    acls: &Acls,
    names: &dyn Names,
) -> Result<(Cond, Vec<Warning>), RuleError> {
    let mut warnings = Vec::new();
    let mut groups: Vec<Box<[Term]>> = Vec::new();
    let mut cur: Vec<Term> = Vec::new();
    let mut i = 0;
    let mut neg = false;
    if words.is_empty() {
        return err("missing condition after 'if' or 'unless'");
    }
    while i < words.len() {
        let mut w = words[i].as_str();
        // `!name` and `!{` carry their negation.
        while let Some(rest) = w.strip_prefix('!') {
            neg = !neg;
            w = rest;
        }
        if w.is_empty() {
            i += 1;
            continue;
        }
        match w {
            "||" | "or" => {
                if neg || cur.is_empty() {
                    return err(format!("'{w}' must follow an ACL"));
                }
                groups.push(std::mem::take(&mut cur).into());
                i += 1;
                continue;
            }
            "{" => {
                let Some(end) = words[i + 1..].iter().position(|w| w == "}") else {
                    return err("missing closing '}' in condition");
                };
                let body = &words[i + 1..i + 1 + end];
                if body.is_empty() {
                    return err("empty anonymous ACL '{ }' in condition");
                }
                let term = compile_term(body, names, &mut warnings).map_err(|e| {
                    RuleError::new(format!(
                        "error detected while parsing an anonymous ACL : {}",
                        e.message
                    ))
                })?;
                let slot = Arc::new(std::sync::OnceLock::new());
                let _ = slot.set(Acl {
                    terms: vec![term].into(),
                });
                cur.push(Term {
                    acl: slot,
                    neg,
                    name: format!("{{ {} }}", body.join(" ")).into(),
                });
                neg = false;
                i += end + 2;
                continue;
            }
            "}" => return err("unexpected '}' in condition"),
            _ => {}
        }
        let (n, name) = (neg, w);
        let slot = match acls.get(name).or_else(|| predefined(name, names)) {
            Some(s) => s,
            None => {
                let known: Vec<&str> = acls.names().chain(PREDEFINED.iter().map(|p| p.0)).collect();
                return err(format!(
                    "no such ACL : '{name}'{}",
                    did_you_mean(name, known.iter().copied())
                ));
            }
        };
        cur.push(Term {
            acl: slot,
            neg: n,
            name: name.into(),
        });
        neg = false;
        i += 1;
    }
    if neg {
        return err("'!' must be followed by an ACL");
    }
    if cur.is_empty() {
        return err("'||' must be followed by an ACL");
    }
    groups.push(cur.into());
    Ok((
        Cond {
            polarity,
            groups: groups.into(),
        },
        warnings,
    ))
}

impl Cond {
    /// Three-valued evaluation (HAProxy's `acl_exec_cond` then the polarity).
    pub fn eval3<S: Source + ?Sized>(&self, src: &S, ev: &mut Eval) -> Match {
        // The most common condition, `if ACL` (or `unless !ACL`...): one term, no loops.
        if let [g] = &*self.groups {
            if let [t] = &**g {
                let r = match t.acl.get() {
                    Some(acl) => acl.eval(src, ev),
                    None => Match::No,
                };
                return match (t.neg, self.polarity) {
                    (false, Polarity::If) | (true, Polarity::Unless) => r,
                    _ => r.negate(),
                };
            }
        }
        let mut any = Match::No;
        for g in self.groups.iter() {
            let mut all = Match::Yes;
            for t in g.iter() {
                let r = match t.acl.get() {
                    Some(acl) => acl.eval(src, ev),
                    // Not finished: the config layer forgot `Acls::finish`; match nothing.
                    None => Match::No,
                };
                let r = if t.neg { r.negate() } else { r };
                match r {
                    Match::No => {
                        all = Match::No;
                        break;
                    }
                    Match::Miss => all = Match::Miss,
                    Match::Yes => {}
                }
            }
            match all {
                Match::Yes => {
                    any = Match::Yes;
                    break;
                }
                Match::Miss => any = Match::Miss,
                Match::No => {}
            }
        }
        match self.polarity {
            Polarity::If => any,
            Polarity::Unless => any.negate(),
        }
    }

    /// Whether the condition holds (a `Miss` counts as not holding).
    pub fn eval<S: Source + ?Sized>(&self, src: &S, ev: &mut Eval) -> bool {
        self.eval3(src, ev) == Match::Yes
    }

    /// Where the condition can be evaluated: for each ACL it uses, the phases of its
    /// fetches. Valid once the proxy's `Acls` are finished. The config layer warns, as
    /// HAProxy does, when an ACL cannot run in the rule's phase ("will never match").
    pub fn acl_phases(&self) -> impl Iterator<Item = (&str, Phases)> {
        self.groups.iter().flat_map(|g| {
            g.iter()
                .map(|t| (&*t.name, t.acl.get().map_or(Phases::ALL, |a| a.phases())))
        })
    }

    /// Whether an ACL of the condition reads the raw request bytes (HAProxy's
    /// `SMP_USE_L6REQ`), which an HTTP proxy does not keep. Valid once the proxy's `Acls` are
    /// finished.
    pub fn reads_l6(&self) -> bool {
        self.groups.iter().flatten().any(|t| {
            t.acl
                .get()
                .is_some_and(|a| a.terms.iter().any(|line| line.expr.fetch.def.id.reads_l6()))
        })
    }

    /// Evaluates every term on its own, for `bascule --explain`: no short-circuit, and each
    /// ACL line's fetched values rendered as text. Slow (it allocates); the data path uses
    /// [`Cond::eval`]. Groups are OR'ed, terms within a group AND'ed, as compiled.
    pub fn explain<S: Source + ?Sized>(&self, src: &S, ev: &mut Eval) -> Vec<Vec<TermTrace<'_>>> {
        self.groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|t| {
                        let Some(acl) = t.acl.get() else {
                            return TermTrace {
                                name: &t.name,
                                neg: t.neg,
                                result: Match::No,
                                fetched: Vec::new(),
                            };
                        };
                        let fetched = acl
                            .terms
                            .iter()
                            .map(|line| {
                                let mut values = Vec::new();
                                line.expr.eval_each(src, ev, |s, ev| {
                                    if values.len() < 8 {
                                        values.push(render_value(ev.value(s)));
                                    }
                                    false
                                });
                                (line.expr.fetch.def.name, values)
                            })
                            .collect();
                        TermTrace {
                            name: &t.name,
                            neg: t.neg,
                            result: acl.eval(src, ev),
                            fetched,
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// The condition as written, normalised (`if a !b || { src 10.0.0.0/8 }`).
    pub fn describe(&self) -> String {
        let mut s = String::from(match self.polarity {
            Polarity::If => "if",
            Polarity::Unless => "unless",
        });
        for (i, g) in self.groups.iter().enumerate() {
            if i > 0 {
                s.push_str(" ||");
            }
            for t in g.iter() {
                s.push(' ');
                if t.neg {
                    s.push('!');
                }
                s.push_str(&t.name);
            }
        }
        s
    }
}

/// One term of a condition as [`Cond::explain`] reports it.
#[derive(Debug)]
pub struct TermTrace<'c> {
    /// The ACL's name as written (`{ ... }` for an anonymous one).
    pub name: &'c str,
    /// Written with `!`.
    pub neg: bool,
    /// The ACL's own result, before `!`.
    pub result: Match,
    /// For each line of the ACL: its fetch's name and the values it gave (none: absent).
    pub fetched: Vec<(&'static str, Vec<String>)>,
}

/// A sample value as `--explain` prints it.
fn render_value(v: super::Value<'_>) -> String {
    use super::Value;
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Sint(i) => i.to_string(),
        Value::Ipv4(a) => a.to_string(),
        Value::Ipv6(a) => a.to_string(),
        Value::Str(b) | Value::Meth(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Bin(b) => b.iter().map(|c| format!("{c:02x}")).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::acl::compile_acl;
    use crate::rules::source::TestSource;
    use crate::rules::NameTable;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn setup() -> (Acls, NameTable) {
        let n = NameTable::default();
        let mut acls = Acls::new();
        compile_acl("is_api", &w("path_beg /api"), &n, &mut acls).unwrap();
        compile_acl("is_admin", &w("path_beg /admin"), &n, &mut acls).unwrap();
        compile_acl("local", &w("src 127.0.0.0/8"), &n, &mut acls).unwrap();
        (acls, n)
    }

    fn check(acls: &Acls, n: &NameTable, cond: &str, path: &str) -> bool {
        let words = w(cond);
        let (pol, rest) = match words[0].as_str() {
            "if" => (Polarity::If, &words[1..]),
            _ => (Polarity::Unless, &words[1..]),
        };
        let (c, _) = compile_cond(rest, pol, acls, n).unwrap_or_else(|e| panic!("{cond}: {e}"));
        c.eval(&TestSource::get(path, &[]), &mut Eval::new())
    }

    #[test]
    fn grammar() {
        let (mut acls, n) = setup();
        acls.finish();
        let cases = [
            ("if is_api", "/api/x", true),
            ("if is_api", "/x", false),
            ("unless is_api", "/x", true),
            ("if is_api local", "/api", true),
            ("if is_api !local", "/api", false),
            ("if is_api ! local", "/api", false),
            ("if is_admin || is_api", "/api", true),
            ("if is_admin or is_api", "/api", true),
            ("if is_admin || is_api !local", "/api", false),
            ("if { path /x }", "/x", true),
            ("if !{ path /x }", "/x", false),
            ("if ! { path /x } || TRUE", "/x", true),
            ("if FALSE || { src 10.0.0.0/8 } || LOCALHOST", "/", true),
            ("unless TRUE", "/", false),
            // One term (evaluated without the loops), each polarity with and without `!`.
            ("if !is_api", "/x", true),
            ("if !is_api", "/api", false),
            ("unless is_api", "/api", false),
            ("unless !is_api", "/api", true),
            ("unless !is_api", "/x", false),
            ("unless { path /x }", "/x", false),
        ];
        for (c, path, want) in cases {
            assert_eq!(check(&acls, &n, c, path), want, "{c} {path}");
        }
    }

    #[test]
    fn later_lines_extend_an_acl_already_used() {
        // haproxy 2.6: `acl a path /x`, `http-request deny if a`, `acl a path /y`: /y denied.
        let n = NameTable::default();
        let mut acls = Acls::new();
        compile_acl("a", &w("path /x"), &n, &mut acls).unwrap();
        let (c, _) = compile_cond(&w("a"), Polarity::If, &acls, &n).unwrap();
        compile_acl("a", &w("path /y"), &n, &mut acls).unwrap();
        acls.finish();
        assert!(c.eval(&TestSource::get("/y", &[]), &mut Eval::new()));
        assert!(c.eval(&TestSource::get("/x", &[]), &mut Eval::new()));
        assert!(!c.eval(&TestSource::get("/z", &[]), &mut Eval::new()));
    }

    #[test]
    fn errors() {
        let (acls, n) = setup();
        let e = compile_cond(&w("later"), Polarity::If, &acls, &n).unwrap_err();
        assert_eq!(e.message, "no such ACL : 'later'");
        let e = compile_cond(&w("is_apj"), Polarity::If, &acls, &n).unwrap_err();
        assert_eq!(e.message, "no such ACL : 'is_apj' (did you mean 'is_api'?)");
        assert!(compile_cond(&w("{ path /x"), Polarity::If, &acls, &n).is_err());
        assert!(compile_cond(&w("is_api ||"), Polarity::If, &acls, &n).is_err());
        assert!(compile_cond(&w("|| is_api"), Polarity::If, &acls, &n).is_err());
        assert!(compile_cond(&w("is_api !"), Polarity::If, &acls, &n).is_err());
        assert!(compile_cond(&[], Polarity::If, &acls, &n).is_err());
        let e = compile_cond(&w("{ pth /x }"), Polarity::If, &acls, &n).unwrap_err();
        assert!(e.message.contains("unknown fetch method 'pth'"), "{e}");
    }

    #[test]
    fn phases_and_describe() {
        let n = NameTable::default();
        let mut acls = Acls::new();
        compile_acl("st", &w("status 500"), &n, &mut acls).unwrap();
        let (c, _) = compile_cond(&w("st || !{ src 10.0.0.1 }"), Polarity::If, &acls, &n).unwrap();
        acls.finish();
        let ph: Vec<_> = c.acl_phases().collect();
        assert_eq!(ph[0], ("st", Phases::RES));
        assert_eq!(ph[1].1, Phases::ALL);
        assert_eq!(c.describe(), "if st || !{ src 10.0.0.1 }");
    }

    /// Compiled rules are built once and shared by every worker thread.
    #[test]
    fn compiled_rules_are_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<Cond>();
        shared::<crate::rules::Expr>();
        shared::<crate::rules::Acls>();
    }

    #[test]
    fn split_at_if() {
        let words = w("backend_x if a b");
        let (before, cond) = split_cond(&words);
        assert_eq!(before, &w("backend_x")[..]);
        assert_eq!(cond.unwrap().0, Polarity::If);
    }
}
