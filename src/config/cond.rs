//! Conditional expressions: the language of `.if`/`.elif` lines and of `bascule -cc EXPR`.
//!
//! ```text
//! expr := and ( "||" and )*
//! and  := term ( "&&" term )*
//! term := "!" term | "(" expr ")" | INTEGER | PREDICATE "(" [ARG ("," ARG)*] ")"
//! ```
//!
//! An integer is true when it is not zero; an empty expression is false. Predicates:
//! `defined(VAR)`, `feature(NAME)`, `streq(A,B)`, `strneq(A,B)`, `version_atleast(V)`,
//! `version_before(V)`, and the TLS-library ones `openssl_version_atleast(V)`,
//! `openssl_version_before(V)` and `ssllib_name_startswith(S)`, which are false because Bascule's
//! TLS library is rustls, not OpenSSL or one of its forks. Arguments are the raw text between `(`, `,` and `)`, blanks included,
//! as in HAProxy (`streq(a, a)` is false). The whole expression is parsed before it is evaluated,
//! so a syntax error is reported even in a branch that `&&`/`||` would skip.

use std::cmp::Ordering;

/// What predicates look at: the environment (as modified by `setenv` so far) and the build.
pub trait CondEnv {
    /// The value of environment variable `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

impl<F: Fn(&str) -> Option<String>> CondEnv for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

/// A predicate with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pred {
    Defined(String),
    Feature(String),
    StrEq(String, String),
    StrNeq(String, String),
    VersionAtLeast(Version),
    VersionBefore(Version),
    /// `openssl_version_atleast`, `openssl_version_before`, `ssllib_name_startswith`: the TLS
    /// library is rustls, none of those, so they are false.
    NoTlsLibrary,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expr {
    Const(bool),
    Pred(Pred),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// A version as HAProxy writes them: `2.6`, `2.6.12`, `2.5-dev0`, `2.4-rc1`, `v3.0-pre2`.
/// Development versions come before pre-releases, which come before release candidates, which
/// come before the release; missing numbers count as 0. Text after the numbers and the
/// dev/pre/rc tag (`-1+deb12u4`, `-bascule-0.1.0`) is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    numbers: [u32; 4],
    /// 0 dev, 1 pre, 2 rc, 3 release.
    stage: u8,
    stage_number: u32,
}

impl Version {
    /// Parses a version; `None` when it does not start with `MAJOR.MINOR` or `MAJOR`.
    pub fn parse(text: &str) -> Option<Version> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let (head, tail) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
            Some(i) => (&text[..i], &text[i..]),
            None => (text, ""),
        };
        let mut numbers = [0u32; 4];
        let parts: Vec<&str> = head.split('.').collect();
        if parts.len() > 4 || parts.iter().any(|p| p.is_empty()) {
            return None;
        }
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            *slot = part.parse().ok()?;
        }
        let mut v = Version {
            numbers,
            stage: 3,
            stage_number: 0,
        };
        if let Some(rest) = tail.strip_prefix('-') {
            for (tag, stage) in [("dev", 0), ("pre", 1), ("rc", 2)] {
                if let Some(n) = rest.strip_prefix(tag) {
                    let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
                    v.stage = stage;
                    v.stage_number = digits.parse().unwrap_or(0);
                    break;
                }
            }
        } else if !tail.is_empty() && !tail.starts_with('+') {
            return None;
        }
        Some(v)
    }

    /// The version Bascule declares (see [`crate::compat::HAPROXY_COMPAT_VERSION`]).
    pub fn ours() -> Version {
        Version::parse(crate::compat::HAPROXY_COMPAT_VERSION).unwrap_or(Version {
            numbers: [0; 4],
            stage: 3,
            stage_number: 0,
        })
    }
}

/// Parses and evaluates `text`; `Err` says what is wrong and where (1-based character position).
pub fn eval(text: &str, env: &dyn CondEnv) -> Result<bool, String> {
    let expr = parse(text)?;
    Ok(evaluate(&expr, env))
}

fn evaluate(e: &Expr, env: &dyn CondEnv) -> bool {
    match e {
        Expr::Const(b) => *b,
        Expr::Not(e) => !evaluate(e, env),
        Expr::And(a, b) => evaluate(a, env) && evaluate(b, env),
        Expr::Or(a, b) => evaluate(a, env) || evaluate(b, env),
        Expr::Pred(p) => match p {
            Pred::Defined(name) => env.var(name).is_some(),
            Pred::Feature(name) => crate::compat::has_feature(name),
            Pred::StrEq(a, b) => a == b,
            Pred::StrNeq(a, b) => a != b,
            Pred::VersionAtLeast(v) => Version::ours().cmp(v) != Ordering::Less,
            Pred::VersionBefore(v) => Version::ours().cmp(v) == Ordering::Less,
            Pred::NoTlsLibrary => false,
        },
    }
}

struct Parser<'a> {
    chars: Vec<char>,
    pos: usize,
    text: &'a str,
}

fn parse(text: &str) -> Result<Expr, String> {
    let mut p = Parser {
        chars: text.chars().collect(),
        pos: 0,
        text,
    };
    p.blanks();
    if p.pos == p.chars.len() {
        return Ok(Expr::Const(false));
    }
    let e = p.or()?;
    p.blanks();
    if let Some(c) = p.peek() {
        return Err(p.error(format!("unexpected character '{c}' after the expression")));
    }
    Ok(e)
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        let n = s.chars().count();
        if self.chars[self.pos..].iter().take(n).copied().eq(s.chars()) {
            self.pos += n;
            true
        } else {
            false
        }
    }

    fn error(&self, msg: String) -> String {
        format!(
            "{msg} in condition '{}' at position {}",
            self.text,
            self.pos + 1
        )
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        loop {
            self.blanks();
            if !self.eat("||") {
                return Ok(left);
            }
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.term()?;
        loop {
            self.blanks();
            if !self.eat("&&") {
                return Ok(left);
            }
            let right = self.term()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
    }

    fn term(&mut self) -> Result<Expr, String> {
        self.blanks();
        match self.peek() {
            None => Err(self.error("missing term at the end".into())),
            Some('!') => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.term()?)))
            }
            Some('(') => {
                self.pos += 1;
                let e = self.or()?;
                self.blanks();
                if !self.eat(")") {
                    return Err(self.error("expected ')'".into()));
                }
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => self.integer(),
            Some(c) if c.is_ascii_alphabetic() || c == '_' => self.predicate(),
            Some(c) => Err(self.error(format!("unexpected character '{c}'"))),
        }
    }

    fn integer(&mut self) -> Result<Expr, String> {
        let start = self.pos;
        if matches!(self.peek(), Some('-' | '+')) {
            self.pos += 1;
        }
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.pos += 1;
        }
        let word: String = self.chars[start..self.pos].iter().collect();
        let digits = word.trim_start_matches(['-', '+']);
        let value = match digits
            .strip_prefix("0x")
            .or_else(|| digits.strip_prefix("0X"))
        {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => digits.parse::<i64>(),
        };
        match value {
            Ok(v) => Ok(Expr::Const(v != 0)),
            Err(_) => {
                self.pos = start;
                Err(self.error(format!("invalid integer '{word}'")))
            }
        }
    }

    fn predicate(&mut self) -> Result<Expr, String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().collect();
        let arity = match name.as_str() {
            "defined" | "feature" | "version_atleast" | "version_before" => 1,
            "openssl_version_atleast" | "openssl_version_before" | "ssllib_name_startswith" => 1,
            "streq" | "strneq" => 2,
            _ => {
                self.pos = start;
                return Err(self.error(format!("unknown predicate '{name}'")));
            }
        };
        if !self.eat("(") {
            return Err(self.error(format!("expected '(' after predicate '{name}'")));
        }
        let mut args = Vec::new();
        loop {
            let a = self.pos;
            while self.peek().is_some_and(|c| c != ',' && c != ')') {
                self.pos += 1;
            }
            args.push(self.chars[a..self.pos].iter().collect::<String>());
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(_) => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error(format!("missing ')' after '{name}('"))),
            }
        }
        // `f()` has one empty argument, which one-argument predicates accept.
        if args.len() != arity {
            return Err(self.error(format!(
                "predicate '{name}' takes {arity} argument{}, got {}",
                if arity == 1 { "" } else { "s" },
                args.len()
            )));
        }
        let version = |s: &str| {
            Version::parse(s).ok_or_else(|| {
                format!(
                    "predicate '{name}': invalid version '{s}' (expected e.g. 2.6, 2.5.1 or 2.6-dev0) in condition '{}'",
                    self.text
                )
            })
        };
        let mut args = args.into_iter();
        let mut next = || args.next().unwrap_or_default();
        Ok(Expr::Pred(match name.as_str() {
            "defined" => Pred::Defined(next()),
            "feature" => Pred::Feature(next()),
            "streq" => Pred::StrEq(next(), next()),
            "strneq" => Pred::StrNeq(next(), next()),
            "version_atleast" => Pred::VersionAtLeast(version(&next())?),
            "version_before" => Pred::VersionBefore(version(&next())?),
            _ => Pred::NoTlsLibrary,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "SET").then(|| "v".to_string())
    }

    fn t(text: &str) -> bool {
        eval(text, &env).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn operators_and_precedence() {
        assert!(t("1"));
        assert!(!t("0"));
        assert!(!t(""));
        assert!(!t("   "));
        assert!(t("-1") && t("0x10") && !t("0x0"));
        assert!(t("!0") && t("!!1") && t("! 0"));
        assert!(t("1 && 0 || 1"));
        assert!(!t("0 || 1 && 0"));
        assert!(t("(1 && (0 || 1)) && !(0)"));
        assert!(t("1&&1"));
    }

    #[test]
    fn predicates() {
        assert!(t("defined(SET)") && !t("defined(UNSET)") && !t("defined()"));
        assert!(t("streq(a b,a b)") && !t("streq(a, a)") && t("strneq(a,b)"));
        assert!(t("feature(THREAD)") && t("feature(OPENSSL)") && !t("feature(NOPE)"));
        assert!(!t("openssl_version_atleast(1.1.1)") && !t("ssllib_name_startswith(AWS-LC)"));
        assert!(t(
            "version_atleast(2.5-dev0) && version_atleast(2.6) && version_atleast(2.6-dev0)"
        ));
        assert!(t(
            "version_atleast(v2.6.0) && version_atleast(2) && !version_atleast(3)"
        ));
        assert!(!t("version_atleast(2.6.1)") && !t("version_atleast(3.0-dev0)"));
        assert!(t(
            "version_before(2.7-dev0) && version_before(2.6.1) && !version_before(2.6)"
        ));
        // The whole expression is checked, even what short-circuiting skips.
        assert!(eval("streq(a,a) || foo(", &env).is_err());
    }

    #[test]
    fn errors() {
        for bad in [
            "1 2",
            "(1",
            "1 &&",
            "foo",
            "enabled(X)",
            "streq(a)",
            "streq(a,b,c)",
            "feature(A,B)",
            "defined(X",
            "version_atleast(abc)",
            "1x",
            "&& 1",
        ] {
            assert!(eval(bad, &env).is_err(), "{bad}");
        }
        let e = eval("1 2", &env).unwrap_err();
        assert!(e.contains("'2'") && e.contains("position 3"), "{e}");
    }

    #[test]
    fn versions_order_like_haproxy() {
        let v = |s: &str| Version::parse(s).unwrap_or_else(|| panic!("{s}"));
        assert!(v("2.6-dev0") < v("2.6-pre1"));
        assert!(v("2.6-pre1") < v("2.6-rc1"));
        assert!(v("2.6-rc1") < v("2.6"));
        assert_eq!(v("2.6"), v("2.6.0"));
        assert!(v("2.6") < v("2.6.1") && v("2.5.14") < v("2.6-dev0"));
        assert_eq!(v("2.6.12-1+deb12u4"), v("2.6.12"));
        assert_eq!(v("2.6.0-bascule-0.1.0"), v("2.6.0"));
        assert!(Version::parse("x").is_none() && Version::parse("2..6").is_none());
    }
}
