//! Log-format strings in action values (`set-header X-Client %[src]`, `redirect location
//! /%[path]`, `use_backend be_%[req.hdr(host)]`, `return lf-string "..."`), compiled once.
//!
//! The syntax is HAProxy's log-format syntax (`doc/configuration.txt` §8.2.4) as it applies to
//! actions: `%[EXPR]` a sample expression (fetch and converters, compiled by [`Expr::compile`]),
//! `%{+Q}[EXPR]` the same quoted, `%ci`-style variables, `%%` a percent sign, and runs of spaces
//! that print as one space (HAProxy's separator: none before the first printed part). The lexer
//! already removed quotes and backslash escapes.
//!
//! Variables that are sample fetches in disguise become [`LfPart::Expr`] (`%ci` is `src`, `%fp`
//! is `dst_port`, `%b` is `be_name`, `%HP` is `path`, ...); the few that are not
//! (`%H`, `%pid`, `%ID`, `%rt`, `%t`, `%T`, `%Tl`, `%Ts`, `%ms`) become [`LfPart::Var`] for the
//! runtime to fill. A string without any `%` part is recognised at compile time:
//! [`LfString::literal`] gives its bytes, so the runtime writes it without evaluating anything.

use super::sample::to_bytes;
use super::{Eval, Expr, Names, Phases, RuleError, Source};

/// A `%` variable that is not a sample fetch: the runtime provides its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LfVar {
    /// `%H`: the host name.
    Hostname,
    /// `%pid`: the process id.
    Pid,
    /// `%ID`: the request's unique id (`unique-id-format`).
    UniqueId,
    /// `%rt`: the request counter (HAProxy's `%rt`).
    ReqCounter,
    /// `%t`: the accept date, `10/Oct/2000:13:55:36.123` (local time).
    Date,
    /// `%T`: the accept date in GMT, `10/Oct/2000:13:55:36 +0000`.
    DateGmt,
    /// `%Tl`: the accept date in local time with its offset.
    DateLocal,
    /// `%Ts`: the accept date as a Unix timestamp.
    Timestamp,
    /// `%ms`: the milliseconds of the accept date, three digits.
    Millis,
}

/// One piece of a compiled [`LfString`].
#[derive(Debug)]
pub enum LfPart {
    /// Bytes written as they are.
    Lit(Vec<u8>),
    /// A run of spaces: one space, unless nothing was written yet or a space was just written
    /// (HAProxy's separator).
    Sep,
    /// A sample expression; its value is written as text (`quote`: between double quotes).
    /// Nothing is written when the sample is absent.
    Expr { expr: Expr, quote: bool },
    /// A variable the runtime fills.
    Var { var: LfVar, quote: bool },
}

/// A compiled log-format string.
#[derive(Debug)]
pub struct LfString {
    /// The string as written (after unquoting), for messages and `--explain`.
    pub text: String,
    pub parts: Vec<LfPart>,
    /// `Some` when the string has no `%` part: the exact bytes to write.
    literal: Option<Vec<u8>>,
    phases: Phases,
}

/// `%` variables that are sample fetches, and the fetch they stand for.
const FETCH_VARS: &[(&str, &str)] = &[
    ("ci", "src"),
    ("cp", "src_port"),
    ("fi", "dst"),
    ("fp", "dst_port"),
    ("f", "fe_name"),
    ("b", "be_name"),
    ("s", "srv_name"),
    ("HM", "method"),
    ("HP", "path"),
    ("HU", "url"),
];

/// `%` variables the runtime fills.
const RUNTIME_VARS: &[(&str, LfVar)] = &[
    ("H", LfVar::Hostname),
    ("pid", LfVar::Pid),
    ("ID", LfVar::UniqueId),
    ("rt", LfVar::ReqCounter),
    ("t", LfVar::Date),
    ("T", LfVar::DateGmt),
    ("Tl", LfVar::DateLocal),
    ("Ts", LfVar::Timestamp),
    ("ms", LfVar::Millis),
];

/// HAProxy log-format variables that only make sense once a transaction is over (timers, byte
/// counts, termination state): valid in `log-format`, not supported in action values.
const LOG_ONLY_VARS: &[&str] = &[
    "bi", "bp", "si", "sp", "tr", "trg", "trl", "ft", "TR", "Tw", "Tc", "Tr", "Ta", "Th", "Ti",
    "Tq", "Tt", "Td", "Tu", "ST", "B", "U", "CC", "CS", "ts", "tsc", "ac", "fc", "bc", "sc", "rc",
    "sq", "bq", "hr", "hrl", "hs", "hsl", "r", "HPO", "HQ", "HV", "lc", "o", "ID", "sslc", "sslv",
];

impl LfString {
    /// Compiles `text` (an action's value word, already unquoted). Sample expressions are
    /// compiled against `names`; the error names the part at fault.
    pub fn compile(text: &str, names: &dyn Names) -> Result<LfString, RuleError> {
        let b = text.as_bytes();
        let mut parts: Vec<LfPart> = Vec::new();
        let mut lit: Vec<u8> = Vec::new();
        let mut phases = Phases::ALL;
        let flush = |lit: &mut Vec<u8>, parts: &mut Vec<LfPart>| {
            if !lit.is_empty() {
                // The word's encoded bytes (`\xE0`) are written as the bytes they stand for.
                let l = std::mem::take(lit);
                parts.push(LfPart::Lit(
                    crate::config::rawbytes::decode(&l).into_owned(),
                ));
            }
        };
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b' ' => {
                    flush(&mut lit, &mut parts);
                    while i < b.len() && b[i] == b' ' {
                        i += 1;
                    }
                    parts.push(LfPart::Sep);
                    continue;
                }
                b'%' => {}
                c => {
                    lit.push(c);
                    i += 1;
                    continue;
                }
            }
            i += 1;
            if b.get(i) == Some(&b'%') {
                lit.push(b'%');
                i += 1;
                continue;
            }
            let mut quote = false;
            if b.get(i) == Some(&b'{') {
                let end = text[i..].find('}').ok_or_else(|| {
                    RuleError::new(format!("missing '}}' after '%{{' in '{text}'"))
                })?;
                quote = parse_flags(&text[i + 1..i + end])?;
                i += end + 1;
            }
            if b.get(i) == Some(&b'[') {
                let end = closing_bracket(&b[i..])
                    .ok_or_else(|| RuleError::new(format!("missing ']' after '%[' in '{text}'")))?;
                let inner = &text[i + 1..i + end];
                if inner.is_empty() {
                    return Err(RuleError::new(format!(
                        "empty sample expression '%[]' in '{text}'"
                    )));
                }
                let expr = Expr::compile(inner, names)?;
                phases = phases.and(expr.phases());
                flush(&mut lit, &mut parts);
                parts.push(LfPart::Expr { expr, quote });
                i += end + 1;
                continue;
            }
            let start = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let name = &text[start..i];
            if name.is_empty() {
                return Err(RuleError::new(format!(
                    "a variable name or '[' is expected after '%' in '{text}' (write '%%' for a percent sign)"
                )));
            }
            flush(&mut lit, &mut parts);
            if let Some((_, fetch)) = FETCH_VARS.iter().find(|(n, _)| *n == name) {
                let expr = Expr::compile(fetch, names)?;
                phases = phases.and(expr.phases());
                parts.push(LfPart::Expr { expr, quote });
            } else if let Some((_, var)) = RUNTIME_VARS.iter().find(|(n, _)| *n == name) {
                parts.push(LfPart::Var { var: *var, quote });
            } else if LOG_ONLY_VARS.contains(&name) {
                return Err(RuleError::new(format!(
                    "format variable '%{name}' is not supported yet in action values (use a sample expression '%[...]')"
                )));
            } else {
                let known = FETCH_VARS
                    .iter()
                    .map(|(n, _)| *n)
                    .chain(RUNTIME_VARS.iter().map(|(n, _)| *n));
                let hint = crate::config::diag::suggest(name, known)
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                return Err(RuleError::new(format!(
                    "no such format variable '%{name}' in '{text}'{hint}"
                )));
            }
        }
        flush(&mut lit, &mut parts);
        let literal = parts
            .iter()
            .all(|p| matches!(p, LfPart::Lit(_) | LfPart::Sep))
            .then(|| render_literal(&parts));
        Ok(LfString {
            text: text.to_string(),
            parts,
            literal,
            phases,
        })
    }

    /// The bytes to write when the string has no `%` part (the common `set-header X value`),
    /// so that the runtime needs no evaluation.
    pub fn literal(&self) -> Option<&[u8]> {
        self.literal.as_deref()
    }

    /// Where the string can be evaluated: the intersection of its expressions' phases.
    pub fn phases(&self) -> Phases {
        self.phases
    }

    /// Appends the string's value for the stream `src` to `out`. `var` writes a runtime
    /// variable (`%H`, `%ID`...). An absent sample writes nothing, as in HAProxy's action
    /// values (its log lines write `-`).
    pub fn render<S: Source + ?Sized>(
        &self,
        src: &S,
        ev: &mut Eval,
        var: &dyn Fn(LfVar, &mut Vec<u8>),
        out: &mut Vec<u8>,
    ) {
        if let Some(l) = &self.literal {
            out.extend_from_slice(l);
            return;
        }
        let start = out.len();
        let mut last_space = true;
        for p in &self.parts {
            match p {
                LfPart::Lit(b) => {
                    out.extend_from_slice(b);
                    last_space = false;
                }
                LfPart::Sep => {
                    if !last_space && out.len() > start {
                        out.push(b' ');
                        last_space = true;
                    }
                }
                LfPart::Expr { expr, quote } => {
                    if *quote {
                        out.push(b'"');
                    }
                    // An absent sample writes nothing (HAProxy writes `-` only in log lines).
                    if let Some(b) = expr.eval(src, ev).and_then(|s| to_bytes(s, ev)) {
                        out.extend_from_slice(ev.get(b));
                    }
                    if *quote {
                        out.push(b'"');
                    }
                    last_space = false;
                }
                LfPart::Var { var: v, quote } => {
                    if *quote {
                        out.push(b'"');
                    }
                    var(*v, out);
                    if *quote {
                        out.push(b'"');
                    }
                    last_space = false;
                }
            }
        }
    }
}

/// The text of a string made of literals and separators, as HAProxy prints it.
fn render_literal(parts: &[LfPart]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut last_space = true;
    for p in parts {
        match p {
            LfPart::Lit(b) => {
                out.extend_from_slice(b);
                last_space = false;
            }
            LfPart::Sep if !last_space => {
                out.push(b' ');
                last_space = true;
            }
            _ => {}
        }
    }
    out
}

/// The index of the `]` closing the `[` at `b[0]`, skipping brackets nested in arguments
/// (`%[req.hdr(x),regsub(\[a\],b)]`).
pub(crate) fn closing_bracket(b: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut paren = 0usize;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'(' => paren += 1,
            b')' => paren = paren.saturating_sub(1),
            b'[' if paren == 0 => depth += 1,
            b']' if paren == 0 => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Parses `+Q`, `-Q` and the other flags HAProxy accepts; returns whether `+Q` is on.
fn parse_flags(s: &str) -> Result<bool, RuleError> {
    let mut quote = false;
    for flag in s.split(',').filter(|f| !f.is_empty()) {
        let (on, name) = match flag.as_bytes()[0] {
            b'+' => (true, &flag[1..]),
            b'-' => (false, &flag[1..]),
            _ => {
                return Err(RuleError::new(format!(
                    "bad format flags '{{{s}}}': expected +FLAG or -FLAG"
                )))
            }
        };
        match name {
            "Q" => quote = on,
            // Hexadecimal and escaping change only log-oriented renderings.
            "X" | "E" => {}
            other => {
                return Err(RuleError::new(format!(
                    "unknown format flag '{other}' in '{{{s}}}'"
                )))
            }
        }
    }
    Ok(quote)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::NameTable;

    fn lf(s: &str) -> Result<LfString, RuleError> {
        LfString::compile(s, &NameTable::default())
    }

    #[test]
    fn plain_text_is_a_literal() {
        let l = lf("keep-alive").unwrap();
        assert_eq!(l.literal(), Some(&b"keep-alive"[..]));
        assert_eq!(lf("100%% sure").unwrap().literal(), Some(&b"100% sure"[..]));
        // HAProxy's separators: a run of spaces prints once, none before the first part.
        assert_eq!(lf("  a   b ").unwrap().literal(), Some(&b"a b "[..]));
        assert_eq!(lf("").unwrap().literal(), Some(&b""[..]));
        // Bytes the lexer encoded (`\xE9`) are written as themselves.
        let mut w = "é ".to_string();
        crate::config::rawbytes::push_byte(&mut w, 0xE9);
        assert_eq!(lf(&w).unwrap().literal(), Some(&b"\xC3\xA9 \xE9"[..]));
    }

    #[test]
    fn samples_and_variables_compile() {
        let l = lf("%[req.hdr(host)]%[path]").unwrap();
        assert!(l.literal().is_none());
        assert_eq!(l.parts.len(), 2);
        assert!(l.phases().contains(Phases::REQ));
        let l = lf("%ci:%cp by %pid at %T").unwrap();
        assert!(matches!(l.parts[0], LfPart::Expr { .. }));
        assert!(matches!(l.parts[1], LfPart::Lit(ref b) if b == b":"));
        assert!(matches!(
            l.parts.last(),
            Some(LfPart::Var {
                var: LfVar::DateGmt,
                quote: false
            })
        ));
        let l = lf("%{+Q}[src]").unwrap();
        assert!(matches!(l.parts[0], LfPart::Expr { quote: true, .. }));
        let l = lf("x-%[res.hdr(a)]").unwrap();
        assert!(!l.phases().contains(Phases::REQ));
    }

    #[test]
    fn errors_name_the_part() {
        let e = |s| lf(s).unwrap_err().message;
        assert!(e("%[src").contains("missing ']'"));
        assert!(e("%[]").contains("empty sample"));
        assert!(e("%zz").contains("no such format variable '%zz'"));
        assert!(e("%Tw").contains("not supported yet"));
        assert!(e("%{+Z}[src]").contains("unknown format flag 'Z'"));
        assert!(e("a % b").contains("expected after '%'"));
        assert!(e("%cj").contains("did you mean"));
    }
}
