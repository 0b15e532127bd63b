//! Regexes that are only a literal, anchored or not: `\.php$`, `^/cgi-bin/`, `^/health$`.
//!
//! Why: most `path_reg`/`hdr_reg` patterns in real configurations are of this shape, and the
//! regex crate spends tens of nanoseconds setting up any search, even over a 20-byte path,
//! where a suffix or prefix comparison costs a few. An ACL line's regexes are split at load
//! time: those recognised here are tested as literals, the others stay in the line's regex
//! set. Only ASCII patterns are recognised (with `unicode(false)` a non-ASCII character's
//! meaning is the regex crate's to decide); `$` is the end of the sample, as the regex crate
//! reads it (samples never end with the newline PCRE's `$` would also accept).

/// Where a literal must stand in the sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// `^lit$`
    Whole,
    /// `^lit`
    Start,
    /// `lit$`
    End,
    /// `lit`
    Anywhere,
}

/// A regex that is a literal: where it is anchored and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Literal {
    pub anchor: Anchor,
    pub bytes: Box<[u8]>,
}

impl Literal {
    /// Recognises `pat` when it is a literal, with an optional `^` first and `$` last and
    /// metacharacters escaped with `\`; `None` for anything else (a class, a repetition, an
    /// alternation, a group, `.`, an escape that is not a punctuation character...).
    pub fn parse(pat: &str) -> Option<Literal> {
        let b = pat.as_bytes();
        if !b.is_ascii() {
            return None;
        }
        let (start, b) = match b {
            [b'^', rest @ ..] => (true, rest),
            _ => (false, b),
        };
        let mut out = Vec::with_capacity(b.len());
        let mut end = false;
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            match c {
                b'\\' => {
                    let &e = b.get(i + 1)?;
                    // `\d`, `\w`, `\b`, `\n`, `\x41`, `\<` (a word start)... are not literals.
                    if !e.is_ascii_punctuation() || e == b'<' || e == b'>' {
                        return None;
                    }
                    out.push(e);
                    i += 2;
                    continue;
                }
                b'$' if i + 1 == b.len() => end = true,
                b'.' | b'[' | b']' | b'(' | b')' | b'*' | b'+' | b'?' | b'{' | b'}' | b'|'
                | b'^' | b'$' => return None,
                // `(?x)` and friends would change what spaces mean; a plain space is a literal.
                _ => out.push(c),
            }
            i += 1;
        }
        let anchor = match (start, end) {
            (true, true) => Anchor::Whole,
            (true, false) => Anchor::Start,
            (false, true) => Anchor::End,
            (false, false) => Anchor::Anywhere,
        };
        Some(Literal {
            anchor,
            bytes: out.into(),
        })
    }

    /// The literal bytes every match of `pat` starts the sample with, when `pat` is anchored
    /// (`^/v[0-9]+/legacy/` gives `/v`): a regex that is not a literal can still be ruled out
    /// by a comparison before the regex crate sets up a search. `None` when there is no such
    /// prefix or the pattern has an alternation (`^/a|b` matches `xb`) or non-ASCII bytes. A
    /// literal byte followed by `*`, `?` or `{` may be absent and is not part of the prefix.
    pub fn required_prefix(pat: &str) -> Option<Box<[u8]>> {
        let b = pat.as_bytes();
        if !b.is_ascii() {
            return None;
        }
        // An unescaped `|` anywhere (even in a class, where it is a plain byte): no prefix.
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'|' => return None,
                _ => i += 1,
            }
        }
        let b = b.strip_prefix(b"^")?;
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => match b.get(i + 1) {
                    Some(&e) if e.is_ascii_punctuation() && e != b'<' && e != b'>' => {
                        out.push(e);
                        i += 2;
                    }
                    _ => break,
                },
                b'*' | b'?' | b'{' => {
                    out.pop();
                    break;
                }
                b'.' | b'[' | b']' | b'(' | b')' | b'+' | b'}' | b'^' | b'$' => break,
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        (!out.is_empty()).then(|| out.into())
    }

    /// Whether `hay` starts with `prefix` (`icase`: ASCII letters in either case).
    pub fn starts(hay: &[u8], prefix: &[u8], icase: bool) -> bool {
        hay.len() >= prefix.len()
            && if icase {
                hay[..prefix.len()].eq_ignore_ascii_case(prefix)
            } else {
                &hay[..prefix.len()] == prefix
            }
    }

    /// Whether `hay` matches (`icase`: ASCII letters in either case, as the regex's `-i`).
    pub fn matches(&self, hay: &[u8], icase: bool) -> bool {
        let lit = &*self.bytes;
        let eq = |a: &[u8]| {
            if icase {
                a.eq_ignore_ascii_case(lit)
            } else {
                a == lit
            }
        };
        match self.anchor {
            Anchor::Whole => eq(hay),
            Anchor::Start => hay.len() >= lit.len() && eq(&hay[..lit.len()]),
            Anchor::End => hay.len() >= lit.len() && eq(&hay[hay.len() - lit.len()..]),
            Anchor::Anywhere => {
                lit.is_empty() || (hay.len() >= lit.len() && hay.windows(lit.len()).any(eq))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(p: &str) -> Option<(Anchor, String)> {
        Literal::parse(p).map(|l| (l.anchor, String::from_utf8(l.bytes.into()).unwrap()))
    }

    #[test]
    fn recognises_anchored_literals_and_refuses_the_rest() {
        assert_eq!(lit(r"\.php$"), Some((Anchor::End, ".php".into())));
        assert_eq!(lit("^/cgi-bin/"), Some((Anchor::Start, "/cgi-bin/".into())));
        assert_eq!(lit("^/health$"), Some((Anchor::Whole, "/health".into())));
        assert_eq!(lit("admin"), Some((Anchor::Anywhere, "admin".into())));
        assert_eq!(lit(r"^/a\?b\$"), Some((Anchor::Start, "/a?b$".into())));
        assert_eq!(lit("^$"), Some((Anchor::Whole, String::new())));
        for p in [
            "^/v[0-9]+/legacy/",
            ".php$",
            "a|b",
            "(a)",
            "a*",
            r"\d+",
            r"\bword",
            "a$b",
            "^^a",
            "é$",
            r"a\",
            "a{2}",
        ] {
            assert_eq!(lit(p), None, "{p}");
        }
    }

    /// Each recognised literal answers as the regex crate does on the same haystacks.
    #[test]
    fn answers_as_the_regex_does() {
        let hays: &[&[u8]] = &[
            b"",
            b"/index.php",
            b"/index.php/x",
            b"/cgi-bin/a",
            b"/x/cgi-bin/",
            b"/health",
            b"/HEALTH",
            b"/healthz",
            b"/a?b$c",
        ];
        for p in [
            r"\.php$",
            "^/cgi-bin/",
            "cgi-bin",
            "^/health$",
            r"^/a\?b\$",
            "^$",
            "",
            r"\.PHP$",
        ] {
            for icase in [false, true] {
                let l = Literal::parse(p).unwrap();
                let re = regex::bytes::RegexBuilder::new(p)
                    .unicode(false)
                    .case_insensitive(icase)
                    .build()
                    .unwrap();
                for h in hays {
                    assert_eq!(
                        l.matches(h, icase),
                        re.is_match(h),
                        "{p} icase={icase} on {:?}",
                        String::from_utf8_lossy(h)
                    );
                }
            }
        }
    }

    #[test]
    fn required_prefixes() {
        let pre =
            |p: &str| Literal::required_prefix(p).map(|b| String::from_utf8(b.into()).unwrap());
        assert_eq!(pre("^/v[0-9]+/legacy/").as_deref(), Some("/v"));
        assert_eq!(pre(r"^/a\.b(c)").as_deref(), Some("/a.b"));
        assert_eq!(pre("^/ab?c").as_deref(), Some("/a"));
        assert_eq!(pre("^/ab*").as_deref(), Some("/a"));
        assert_eq!(pre("^/ab{0,2}").as_deref(), Some("/a"));
        assert_eq!(pre("^/ab+").as_deref(), Some("/ab"));
        assert_eq!(pre(r"^/x\|y").as_deref(), Some("/x|y"));
        for p in [
            "/v[0-9]", "^a?", "^[ab]", "^/a|b", "^(/a|/b)", r"^\d", "^.a", "^^a", "^é", "",
        ] {
            assert_eq!(pre(p), None, "{p}");
        }
    }

    /// A sample without the prefix is never matched by the regex (the prefix is necessary).
    #[test]
    fn a_sample_without_the_prefix_does_not_match() {
        let hays: &[&[u8]] = &[
            b"",
            b"/",
            b"/v",
            b"/v3/legacy/",
            b"/V3/LEGACY/",
            b"/static/v3/64.png",
            b"/a",
            b"/ac",
            b"/abbc",
            b"/A.Bc",
            b"/x|y",
            b"/xy",
        ];
        for p in [
            "^/v[0-9]+/legacy/",
            r"^/a\.b(c)",
            "^/ab?c",
            "^/ab*",
            "^/ab+",
            r"^/x\|y",
            "^/A",
        ] {
            let pre = Literal::required_prefix(p).unwrap();
            for icase in [false, true] {
                let re = regex::bytes::RegexBuilder::new(p)
                    .unicode(false)
                    .case_insensitive(icase)
                    .build()
                    .unwrap();
                for h in hays {
                    if re.is_match(h) {
                        assert!(
                            Literal::starts(h, &pre, icase),
                            "{p} icase={icase} on {:?}",
                            String::from_utf8_lossy(h)
                        );
                    }
                }
            }
        }
    }
}
