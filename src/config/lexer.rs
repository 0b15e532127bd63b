//! Stage one, part one: configuration text to lines of words, each line with its [`Span`].
//!
//! This is HAProxy's word syntax: `#` starts a comment, words are separated by blanks, `"..."`
//! expands environment variables (`$VAR`, `${VAR}`, `${VAR-default}`), `'...'` is literal, and a
//! backslash escapes outside single quotes. Lexing knows nothing of sections or keywords, so the
//! same code serves every file. The `.alert/.warning/.notice/.diag` directives are handled here;
//! `.if` blocks are reported as not supported yet and skipped whole.

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

/// Where the lexer reads environment variables (the process environment, or a map in tests).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Splits `text` (the contents of file `file`, ranked `file_index` among the loaded files) into
/// lines of words. A line that cannot be split comes back with its error and no words; problems
/// with directives are pushed to `diags`.
pub fn lex(
    text: &str,
    file: &Arc<str>,
    file_index: usize,
    env: EnvLookup<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Line> {
    let mut out = Vec::new();
    // Depth of `.if` blocks being skipped (conditions are not evaluated yet).
    let mut skipping = 0usize;
    for (n, raw) in text.split('\n').enumerate() {
        let span = Span {
            file_index,
            file: Arc::clone(file),
            line: u32::try_from(n + 1).unwrap_or(u32::MAX),
        };
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let words = match split_words(raw, env) {
            Ok(words) => words,
            Err(msg) => {
                if skipping == 0 {
                    out.push(Line {
                        span,
                        words: Vec::new(),
                        error: Some(msg),
                    });
                }
                continue;
            }
        };
        let Some(first) = words.first() else { continue };
        match first.as_str() {
            ".if" => {
                if skipping == 0 {
                    diags.push(Diagnostic::alert(
                        Some(&span),
                        None,
                        "'.if' conditional blocks are not supported yet; the block up to its '.endif' is skipped",
                    ));
                }
                skipping += 1;
            }
            ".endif" if skipping > 0 => skipping -= 1,
            _ if skipping > 0 => {}
            ".elif" | ".else" | ".endif" => diags.push(Diagnostic::alert(
                Some(&span),
                None,
                format!("'{first}' without a matching '.if'"),
            )),
            ".alert" => diags.push(Diagnostic::alert(Some(&span), None, words[1..].join(" "))),
            ".warning" => diags.push(Diagnostic::warning(Some(&span), None, words[1..].join(" "))),
            ".notice" | ".diag" => {}
            _ => out.push(Line {
                span,
                words,
                error: None,
            }),
        }
    }
    if skipping > 0 {
        let span = Span {
            file_index,
            file: Arc::clone(file),
            line: u32::try_from(text.split('\n').count()).unwrap_or(u32::MAX),
        };
        diags.push(Diagnostic::alert(
            Some(&span),
            None,
            "missing '.endif' at the end of the file",
        ));
    }
    out
}

/// Quoting state while scanning a line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Double,
    Single,
}

/// Splits one line into words, or says why it cannot.
fn split_words(line: &str, env: EnvLookup<'_>) -> Result<Vec<String>, String> {
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
                '$' => i = expand(&chars, i, &mut cur, env)?,
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
            out.push(char::from(byte));
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

/// Expands the environment variable reference at `chars[i]` (a `$`) into `out`; returns the index
/// after it. A `$` not followed by a name is kept as is.
fn expand(chars: &[char], i: usize, out: &mut String, env: EnvLookup<'_>) -> Result<usize, String> {
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
        if name.ends_with("[*]") {
            return Err(format!(
                "'${{{inner}}}': splitting a variable into words is not supported yet"
            ));
        }
        if name.is_empty() || !name.chars().all(is_name) {
            return Err(format!(
                "invalid environment variable name in '${{{inner}}}'"
            ));
        }
        match env(name) {
            Some(v) => out.push_str(&v),
            None => out.push_str(default.unwrap_or("")),
        }
        return Ok(end + 1);
    }
    let len = chars[i + 1..].iter().take_while(|&&c| is_name(c)).count();
    if len == 0 {
        out.push('$');
        return Ok(i + 1);
    }
    let name: String = chars[i + 1..i + 1 + len].iter().collect();
    if let Some(v) = env(&name) {
        out.push_str(&v);
    }
    Ok(i + 1 + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "PORT" => Some("8080".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn words(line: &str) -> Result<Vec<String>, String> {
        split_words(line, &env)
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
    }

    #[test]
    fn env_vars_expand_only_in_double_quotes() {
        assert_eq!(ok(r#""$PORT" $PORT"#), ["8080", "$PORT"]);
        assert_eq!(
            ok(r#""${PORT}x" "${NOPE-9}" "${NOPE}" "a$""#),
            ["8080x", "9", "", "a$"]
        );
        assert_eq!(ok(r#""${EMPTY-d}""#), [""]);
        assert!(words(r#""${PORT""#).is_err());
        assert!(words(r#""${A[*]}""#).is_err());
    }

    #[test]
    fn unterminated_quotes_are_errors() {
        assert!(words(r#"bind "*:80"#).is_err());
        assert!(words("bind '*:80").is_err());
    }

    #[test]
    fn lines_carry_spans_and_if_blocks_are_skipped() {
        let file: Arc<str> = "t.cfg".into();
        let mut diags = Vec::new();
        let text =
            "global\r\n\n.if defined(X)\n  maxconn 1\n.endif\n  nbthread 2\n.warning \"hey\"\n";
        let lines = lex(&format!("{text}bad \"quote\n"), &file, 0, &env, &mut diags);
        let got: Vec<(u32, String)> = lines
            .iter()
            .map(|l| (l.span.line, l.words.join(" ")))
            .collect();
        assert_eq!(
            got,
            [
                (1, "global".to_string()),
                (6, "nbthread 2".to_string()),
                (8, String::new())
            ]
        );
        assert!(lines[2].error.is_some());
        assert_eq!(diags.len(), 2);
        assert!(diags[0].is_error());
        assert_eq!(diags[1].to_string(), "[WARNING] t.cfg:7: hey");
    }
}
