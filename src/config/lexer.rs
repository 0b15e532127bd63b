//! Stage one, part one: configuration text to lines of words, each line with its [`Span`].
//!
//! This is HAProxy's word syntax: `#` starts a comment, words are separated by blanks, `"..."`
//! expands environment variables (`$VAR`, `${VAR}`, `${VAR-default}`, and `${VAR[*]}` which splits
//! the value into several words), `'...'` is literal, and a backslash escapes outside single
//! quotes. As in HAProxy 2.6, variables are expanded only inside double quotes: `${VAR}` there is
//! one word whatever it holds, and outside quotes it is kept as written, except in an address,
//! which the parser expands with [`expand_word`] as HAProxy's address parser does.
//!
//! The lexer works one line at a time ([`Lexer::line`]) because the environment it expands from
//! changes as it goes: `setenv` and friends in a `global` section apply to the lines after them,
//! including `.if` conditions. The conditional directives (`.if/.elif/.else/.endif`, evaluated by
//! [`super::cond`]) and the message directives (`.notice/.warning/.alert`) are handled here;
//! lexing knows nothing of sections or keywords, so the same code serves every file.
//!
//! Words are `String`s, but HAProxy's are bytes: a `\xHH` escape above 0x7F (and a byte of the
//! file that is not UTF-8, see [`super::rawbytes::from_file`]) is one reserved character that
//! the consumers of bytes decode ([`super::rawbytes`]).

use std::collections::HashMap;
use std::sync::Arc;

use super::diag::{Diagnostic, Span};

/// One non-empty configuration line, split into words (quotes and escapes already resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub span: Span,
    pub words: Vec<String>,
    /// Why the line could not be split (then `words` is empty). The parser reports it, because
    /// only the parser knows which section the line is in.
    pub error: Option<String>,
}

/// The environment variables configuration lines expand: the process environment at start,
/// changed in order by `setenv`, `presetenv`, `unsetenv` and `resetenv`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: HashMap<String, String>,
    /// `HAPROXY_LOCALPEER` came from `-L`: a global `localpeer` line does not change it.
    local_peer_from_cli: bool,
}

impl Env {
    /// The current process environment (variables whose name or value is not UTF-8 are left
    /// out: they cannot appear in a configuration file's text).
    pub fn from_process() -> Self {
        Env {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            local_peer_from_cli: false,
        }
    }

    /// An environment holding exactly `pairs`.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            local_peer_from_cli: false,
        }
    }

    /// Sets `HAPROXY_LOCALPEER` to the `-L` name, which a `localpeer` line cannot override.
    pub fn set_local_peer_from_cli(&mut self, name: &str) {
        self.set("HAPROXY_LOCALPEER", name);
        self.local_peer_from_cli = true;
    }

    /// Whether `HAPROXY_LOCALPEER` is the `-L` name.
    pub fn local_peer_from_cli(&self) -> bool {
        self.local_peer_from_cli
    }

    /// The variables, by name.
    pub fn into_map(self) -> HashMap<String, String> {
        self.vars
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// `setenv NAME VALUE`: sets or replaces.
    pub fn set(&mut self, name: &str, value: &str) {
        self.vars.insert(name.to_string(), value.to_string());
    }

    /// `presetenv NAME VALUE`: sets only when not set yet.
    pub fn preset(&mut self, name: &str, value: &str) {
        self.vars
            .entry(name.to_string())
            .or_insert_with(|| value.to_string());
    }

    /// `unsetenv NAME`.
    pub fn unset(&mut self, name: &str) {
        self.vars.remove(name);
    }

    /// `resetenv [NAME...]`: removes every variable but the ones named.
    pub fn reset(&mut self, keep: &[&str]) {
        self.vars.retain(|k, _| keep.contains(&k.as_str()));
    }
}

impl super::cond::CondEnv for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_owned)
    }
}

/// One open `.if` block.
#[derive(Debug)]
struct Block {
    /// Where its `.if` is, for "missing .endif".
    span: Span,
    /// Lines of the branch being read are kept.
    active: bool,
    /// Some branch of this block was taken already (later `.elif`/`.else` are not).
    taken: bool,
    /// The enclosing block is active (else nothing in this one is, and nothing is evaluated).
    outer_active: bool,
    /// `.else` was seen: only `.endif` may follow.
    in_else: bool,
}

/// The lexer of one file: the `.if` blocks open so far.
#[derive(Debug)]
pub struct Lexer {
    file: Arc<str>,
    file_index: usize,
    blocks: Vec<Block>,
}

impl Lexer {
    /// A lexer for file `file`, ranked `file_index` among the loaded files.
    pub fn new(file: &Arc<str>, file_index: usize) -> Self {
        Lexer {
            file: Arc::clone(file),
            file_index,
            blocks: Vec::new(),
        }
    }

    fn active(&self) -> bool {
        self.blocks.last().is_none_or(|b| b.active)
    }

    /// Lexes line `number` (1-based) of the file. Returns the line when it is for the parser:
    /// not empty, not a directive, not in a skipped `.if` branch. A line that cannot be split
    /// comes back with its error and no words; problems with directives are pushed to `diags`.
    pub fn line(
        &mut self,
        number: usize,
        raw: &str,
        env: &Env,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Line> {
        let span = Span {
            file_index: self.file_index,
            file: Arc::clone(&self.file),
            line: u32::try_from(number).unwrap_or(u32::MAX),
        };
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let words = match split_words(raw, env) {
            Ok(words) => words,
            Err(msg) => {
                return self.active().then_some(Line {
                    span,
                    words: Vec::new(),
                    error: Some(msg),
                });
            }
        };
        let first = words.first()?;
        let alert = |diags: &mut Vec<Diagnostic>, msg: String| {
            diags.push(Diagnostic::alert(Some(&span), None, msg));
        };
        match first.as_str() {
            ".if" => {
                let outer_active = self.active();
                let active = outer_active && self.condition(&words, env, &span, diags);
                self.blocks.push(Block {
                    span: span.clone(),
                    active,
                    taken: active,
                    outer_active,
                    in_else: false,
                });
            }
            ".elif" | ".else" => {
                let is_else = first == ".else";
                let Some(b) = self.blocks.last() else {
                    alert(diags, format!("'{first}' without a matching '.if'"));
                    return None;
                };
                if b.in_else {
                    alert(
                        diags,
                        format!("'{first}' after '.else' (only '.endif' may follow)"),
                    );
                    return None;
                }
                if is_else && words.len() > 1 {
                    alert(
                        diags,
                        format!("'.else' takes no argument, got '{}'", words[1]),
                    );
                }
                let (outer_active, taken) = (b.outer_active, b.taken);
                let active = outer_active
                    && !taken
                    && (is_else || self.condition(&words, env, &span, diags));
                if let Some(b) = self.blocks.last_mut() {
                    b.active = active;
                    b.taken |= active;
                    b.in_else = is_else;
                }
            }
            ".endif" => {
                if words.len() > 1 {
                    alert(
                        diags,
                        format!("'.endif' takes no argument, got '{}'", words[1]),
                    );
                }
                if self.blocks.pop().is_none() {
                    alert(diags, "'.endif' without a matching '.if'".to_string());
                }
            }
            _ if !self.active() => {}
            ".alert" | ".warning" | ".notice" | ".diag" => {
                if let Some(extra) = words.get(2) {
                    alert(
                        diags,
                        format!("unexpected argument '{extra}' for '{first}': use quotes if the message should contain spaces"),
                    );
                    return None;
                }
                let msg = words.get(1).cloned().unwrap_or_default();
                match first.as_str() {
                    ".alert" => alert(diags, msg),
                    ".warning" => diags.push(Diagnostic::warning(Some(&span), None, msg)),
                    ".notice" => diags.push(Diagnostic::notice(Some(&span), None, msg)),
                    // `.diag` speaks only in HAProxy's diagnostic mode (-dD), which Bascule
                    // does not have.
                    _ => {}
                }
            }
            _ => {
                return Some(Line {
                    span,
                    words,
                    error: None,
                })
            }
        }
        None
    }

    /// Evaluates the condition of a `.if`/`.elif` line; an invalid one is an error and false.
    fn condition(
        &self,
        words: &[String],
        env: &Env,
        span: &Span,
        diags: &mut Vec<Diagnostic>,
    ) -> bool {
        let text = words[1..].join(" ");
        match super::cond::eval(&text, env) {
            Ok(b) => b,
            Err(e) => {
                diags.push(Diagnostic::alert(
                    Some(span),
                    None,
                    format!("'{}': {e}", words[0]),
                ));
                false
            }
        }
    }

    /// Ends the file: every `.if` still open is an error, reported at its line.
    pub fn finish(self, diags: &mut Vec<Diagnostic>) {
        for b in self.blocks {
            diags.push(Diagnostic::alert(
                Some(&b.span),
                None,
                "'.if' without a matching '.endif' before the end of the file",
            ));
        }
    }
}

/// Lexes a whole file at once with a fixed environment (for tests and tools; the loader goes
/// line by line so that `setenv` applies to the lines after it).
pub fn lex(
    text: &str,
    file: &Arc<str>,
    file_index: usize,
    env: &Env,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Line> {
    let mut lexer = Lexer::new(file, file_index);
    let lines = text
        .split('\n')
        .enumerate()
        .filter_map(|(n, raw)| lexer.line(n + 1, raw, env, diags))
        .collect();
    lexer.finish(diags);
    lines
}

/// Quoting state while scanning a line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Double,
    Single,
}

/// Splits one line into words, or says why it cannot.
pub fn split_words(line: &str, env: &Env) -> Result<Vec<String>, String> {
    let chars: Vec<char> = line.chars().collect();
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote = Quote::None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                } else {
                    cur.push(c);
                }
                i += 1;
            }
            Quote::Double => match c {
                '"' => {
                    quote = Quote::None;
                    i += 1;
                }
                '\\' => i = escape(&chars, i, &mut cur)?,
                '$' => i = expand(&chars, i, &mut cur, &mut words, env)?,
                _ => {
                    cur.push(c);
                    i += 1;
                }
            },
            Quote::None => {
                match c {
                    ' ' | '\t' => {
                        if in_word {
                            words.push(std::mem::take(&mut cur));
                            in_word = false;
                        }
                        i += 1;
                        continue;
                    }
                    '#' => break,
                    '"' => {
                        quote = Quote::Double;
                        i += 1;
                    }
                    '\'' => {
                        quote = Quote::Single;
                        i += 1;
                    }
                    '\\' => i = escape(&chars, i, &mut cur)?,
                    _ => {
                        cur.push(c);
                        i += 1;
                    }
                }
                in_word = true;
            }
        }
    }
    match quote {
        Quote::Double => return Err("unterminated double quote (\") on this line".into()),
        Quote::Single => return Err("unterminated single quote (') on this line".into()),
        Quote::None => {}
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Expands the environment variable references of one word as written (`${VAR}`,
/// `${VAR-default}`, `$VAR`), keeping it one word: what HAProxy's address parser does.
pub fn expand_word(word: &str, env: &Env) -> Result<String, String> {
    let chars: Vec<char> = word.chars().collect();
    let mut out = String::new();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '$' {
            i = expand(&chars, i, &mut out, &mut pieces, env)?;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    pieces.push(out);
    Ok(pieces.join(" "))
}

/// Resolves the backslash escape at `chars[i]` into `out`; returns the index after it.
/// Unknown escapes keep their backslash (regular expressions rely on that, as in HAProxy).
fn escape(chars: &[char], i: usize, out: &mut String) -> Result<usize, String> {
    let Some(&next) = chars.get(i + 1) else {
        out.push('\\');
        return Ok(i + 1);
    };
    let plain = match next {
        ' ' | '#' | '\\' | '"' | '\'' | '$' => next,
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'x' => {
            let hex: String = chars.iter().skip(i + 2).take(2).collect();
            let byte = (hex.len() == 2)
                .then(|| u8::from_str_radix(&hex, 16).ok())
                .flatten()
                .ok_or_else(|| {
                    format!("invalid escape '\\x{hex}': expected two hexadecimal digits")
                })?;
            super::rawbytes::push_byte(out, byte);
            return Ok(i + 4);
        }
        _ => {
            out.push('\\');
            out.push(next);
            return Ok(i + 2);
        }
    };
    out.push(plain);
    Ok(i + 2)
}

/// Expands the environment variable reference at `chars[i]` (a `$`) into `cur`; returns the index
/// after it. A `$` not followed by a name is kept as is. `${NAME[*]}` splits the value on blanks:
/// its first piece ends the current word, the last one starts the next (finished words go to
/// `words`).
fn expand(
    chars: &[char],
    i: usize,
    cur: &mut String,
    words: &mut Vec<String>,
    env: &Env,
) -> Result<usize, String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if chars.get(i + 1) == Some(&'{') {
        let start = i + 2;
        let end = chars[start..]
            .iter()
            .position(|&c| c == '}')
            .map(|p| start + p)
            .ok_or("unterminated '${' in a double-quoted word: expected '}'")?;
        let inner: String = chars[start..end].iter().collect();
        let (name, default) = match inner.split_once('-') {
            Some((name, default)) => (name, Some(default)),
            None => (inner.as_str(), None),
        };
        let (name, split) = match name.strip_suffix("[*]") {
            Some(n) => (n, true),
            None => (name, false),
        };
        if name.is_empty() || !name.chars().all(is_name) {
            return Err(format!(
                "invalid environment variable name in '${{{inner}}}'"
            ));
        }
        let value = env.get(name).or(default).unwrap_or("");
        if split {
            let mut pieces = value.split([' ', '\t']).filter(|p| !p.is_empty());
            if let Some(first) = pieces.next() {
                cur.push_str(first);
                for p in pieces {
                    words.push(std::mem::take(cur));
                    cur.push_str(p);
                }
            }
        } else {
            cur.push_str(value);
        }
        return Ok(end + 1);
    }
    let len = chars[i + 1..].iter().take_while(|&&c| is_name(c)).count();
    if len == 0 {
        cur.push('$');
        return Ok(i + 1);
    }
    let name: String = chars[i + 1..i + 1 + len].iter().collect();
    if let Some(v) = env.get(&name) {
        cur.push_str(v);
    }
    Ok(i + 1 + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env::from_pairs([("PORT", "8080"), ("EMPTY", ""), ("LIST", " a  b c ")])
    }

    fn words(line: &str) -> Result<Vec<String>, String> {
        split_words(line, &env())
    }

    fn ok(line: &str) -> Vec<String> {
        words(line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    #[test]
    fn splits_on_blanks_and_drops_comments() {
        assert_eq!(ok("  bind  *:80\t# http"), ["bind", "*:80"]);
        assert_eq!(ok("# only a comment"), Vec::<String>::new());
        assert_eq!(ok("a#b"), ["a"]);
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            ok(r#"x "a b" 'c $PORT' d\ e"#),
            ["x", "a b", "c $PORT", "d e"]
        );
        assert_eq!(ok(r#"a"b"'c'"#), ["abc"]);
        assert_eq!(ok(r#""""#), [""]);
        assert_eq!(ok(r"\#\\\x41\t"), ["#\\A\t"]);
        assert_eq!(ok(r#""q\"q""#), ["q\"q"]);
        assert_eq!(ok(r"^\d+$"), [r"^\d+$"]);
        assert!(words(r"\xZZ").is_err());
        // `\xHH` is the byte, also above 0x7F (encoded, see `rawbytes`).
        let w = ok(r#"\xE0 "-\xc3\xa9-""#);
        assert_eq!(&*super::super::rawbytes::bytes(&w[0]), b"\xE0");
        assert_eq!(&*super::super::rawbytes::bytes(&w[1]), "-é-".as_bytes());
    }

    #[test]
    fn address_words_expand_as_written() {
        assert_eq!(
            expand_word("127.0.0.1:${PORT}", &env()).unwrap(),
            "127.0.0.1:8080"
        );
        assert_eq!(expand_word("${NOPE-h}:$PORT", &env()).unwrap(), "h:8080");
        assert_eq!(expand_word("fd@${NOPE}", &env()).unwrap(), "fd@");
        assert!(expand_word("${PORT", &env()).is_err());
    }

    #[test]
    fn env_vars_expand_only_in_double_quotes() {
        assert_eq!(ok(r#""$PORT" $PORT ${PORT}"#), ["8080", "$PORT", "${PORT}"]);
        assert_eq!(
            ok(r#""${PORT}x" "${NOPE-9}" "${NOPE}" "a$""#),
            ["8080x", "9", "", "a$"]
        );
        assert_eq!(ok(r#""${EMPTY-d}""#), [""]);
        assert!(words(r#""${PORT""#).is_err());
        assert!(words(r#""${A-B""#).is_err());
        assert!(words(r#""${A.B}""#).is_err());
    }

    #[test]
    fn a_quoted_value_is_one_word_unless_split_with_star() {
        assert_eq!(ok(r#"k "${LIST}""#), ["k", " a  b c "]);
        assert_eq!(ok(r#"k "${LIST[*]}" z"#), ["k", "a", "b", "c", "z"]);
        assert_eq!(ok(r#"k "x${LIST[*]}y""#), ["k", "xa", "b", "cy"]);
        assert_eq!(ok(r#"k "${NOPE[*]}""#), ["k", ""]);
    }

    #[test]
    fn unterminated_quotes_are_errors() {
        assert!(words(r#"bind "*:80"#).is_err());
        assert!(words("bind '*:80").is_err());
    }

    fn lex_text(text: &str, env: &Env) -> (Vec<(u32, String)>, Vec<String>) {
        let file: Arc<str> = "t.cfg".into();
        let mut diags = Vec::new();
        let lines = lex(text, &file, 0, env, &mut diags);
        let lines = lines
            .iter()
            .map(|l| (l.span.line, l.words.join(" ")))
            .collect();
        (lines, diags.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn lines_carry_spans_and_false_branches_are_skipped() {
        let text = "global\r\n\n.if defined(X)\n  maxconn 1\n.endif\n  nbthread 2\n.warning \"hey\"\nbad \"quote\n";
        let (lines, diags) = lex_text(text, &env());
        assert_eq!(
            lines,
            [
                (1, "global".to_string()),
                (6, "nbthread 2".to_string()),
                (8, String::new())
            ]
        );
        assert_eq!(diags, ["[WARNING] t.cfg:7: hey"]);
    }

    #[test]
    fn if_elif_else_nest() {
        let text = "\
.if defined(PORT)
a
.if 0
b
.elif streq(\"$PORT\",8080)
c
.if 1
d
.endif
.else
e
.endif
.elif 1
f
.else
g
.endif
.if 0
.if 1
h
.else
i
.endif
.elif 0
j
.else
k
.notice \"in else\"
.endif
";
        let (lines, diags) = lex_text(text, &env());
        let kept: Vec<&str> = lines.iter().map(|(_, w)| w.as_str()).collect();
        assert_eq!(kept, ["a", "c", "d", "k"]);
        assert_eq!(diags, ["[NOTICE] t.cfg:28: in else"]);
    }

    #[test]
    fn directive_errors_name_the_line() {
        let (_, diags) = lex_text(".else\n.endif\n.if 1\n.else\n.elif 1\n.endif\n", &env());
        assert_eq!(
            diags,
            [
                "[ALERT] t.cfg:1: '.else' without a matching '.if'",
                "[ALERT] t.cfg:2: '.endif' without a matching '.if'",
                "[ALERT] t.cfg:5: '.elif' after '.else' (only '.endif' may follow)",
            ]
        );
        let (lines, diags) = lex_text("a\n.if foo(\nb\n.endif\n.if 1\nc\n", &env());
        assert_eq!(lines.len(), 2);
        assert!(
            diags[0].starts_with("[ALERT] t.cfg:2: '.if': unknown predicate 'foo'"),
            "{diags:?}"
        );
        assert_eq!(
            diags[1],
            "[ALERT] t.cfg:5: '.if' without a matching '.endif' before the end of the file"
        );
        let (_, diags) = lex_text(".alert \"stop\"\n.notice a b\n", &env());
        assert_eq!(diags[0], "[ALERT] t.cfg:1: stop");
        assert!(diags[1].contains("unexpected argument 'b' for '.notice'"));
    }
}
