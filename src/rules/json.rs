//! `json_query(PATH[,int])`: one value out of a JSON document, without building the document.
//!
//! HAProxy documents the converter (`doc/configuration.txt`, "json_query") as reading the
//! JSON types string, boolean and number: a number is printed as C's `%g` does (`4.5e2` is
//! `450`, `0.1` stays `0.1`), or with `int` read as an integer (its leading digits, as
//! `strtoll` reads them, within ±(2^53-1)); objects, arrays and `null` give nothing. The path
//! is `$` followed by `.key` (a `\.` is a dot inside the key) and `[N]` steps.
//!
//! Where haproxy 2.6.12 departs from JSON, we follow it (each seen side by side, see
//! `tests/rules.rs`): `\u00XX` is the byte XX (not the character's UTF-8), a `\u` escape
//! above U+00FF or a `\/` makes the string unreadable (no value); the first of duplicate keys is taken; the document after
//! the value found is not checked. The walk is a forward scan over the bytes: it descends
//! only along the path and skips everything else by counting brackets, so it allocates
//! nothing and its recursion depth is the path's length.

/// What the path led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Found<'a> {
    /// The bytes between the quotes, still escaped.
    Str(&'a [u8]),
    /// The number as written.
    Num(&'a [u8]),
    Bool(bool),
    /// `null`, an object or an array: HAProxy gives nothing for them.
    Other,
}

fn ws(d: &[u8], mut i: usize) -> usize {
    while i < d.len() && matches!(d[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// The index after the string whose opening quote is at `i`.
fn string_end(d: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < d.len() {
        match d[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index after the value starting at `i` (after blanks).
fn skip(d: &[u8], i: usize) -> Option<usize> {
    let i = ws(d, i);
    match *d.get(i)? {
        b'"' => string_end(d, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < d.len() {
                match d[j] {
                    b'"' => {
                        j = string_end(d, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let n = d[i..]
                .iter()
                .take_while(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                .count();
            (n > 0).then_some(i + n)
        }
    }
}

/// One step of a path: a key (raw, `\.` not yet unescaped) or an index; and the rest.
enum Step<'p> {
    Key(&'p [u8]),
    Index(usize),
}

fn next_step(p: &[u8]) -> Option<(Step<'_>, &[u8])> {
    match *p.first()? {
        b'.' => {
            let mut end = 1;
            while end < p.len() && !matches!(p[end], b'.' | b'[') {
                end += if p[end] == b'\\' { 2 } else { 1 };
            }
            let end = end.min(p.len());
            Some((Step::Key(&p[1..end]), &p[end..]))
        }
        b'[' => {
            let close = p.iter().position(|&c| c == b']')?;
            let n = std::str::from_utf8(&p[1..close]).ok()?.parse().ok()?;
            Some((Step::Index(n), &p[close + 1..]))
        }
        _ => None,
    }
}

/// Whether a raw key (between quotes, escapes kept) is the path's key (`\.` stands for `.`).
fn key_is(raw: &[u8], want: &[u8]) -> bool {
    let mut w = want.iter().copied().peekable();
    let mut r = raw.iter().copied();
    loop {
        let wc = match w.next() {
            Some(b'\\') => w.next(),
            c => c,
        };
        match (wc, r.next()) {
            (None, None) => return true,
            (a, b) if a == b => {}
            _ => return false,
        }
    }
}

/// The value at `path` (`$...`) in document `d`.
pub fn query<'a>(d: &'a [u8], path: &[u8]) -> Option<Found<'a>> {
    let rest = path.strip_prefix(b"$")?;
    at(d, ws(d, 0), rest)
}

fn at<'a>(d: &'a [u8], i: usize, path: &[u8]) -> Option<Found<'a>> {
    let i = ws(d, i);
    let Some((step, rest)) = next_step(path) else {
        if !path.is_empty() {
            return None;
        }
        let end = skip(d, i)?;
        return Some(match d[i] {
            b'"' => Found::Str(&d[i + 1..end - 1]),
            b'{' | b'[' => Found::Other,
            _ => match &d[i..end] {
                b"true" => Found::Bool(true),
                b"false" => Found::Bool(false),
                b"null" => Found::Other,
                n if matches!(n[0], b'-' | b'0'..=b'9') => Found::Num(n),
                _ => return None,
            },
        });
    };
    match (step, *d.get(i)?) {
        (Step::Key(want), b'{') => {
            let mut j = ws(d, i + 1);
            while *d.get(j)? == b'"' {
                let kend = string_end(d, j)?;
                let key = &d[j + 1..kend - 1];
                let v = ws(d, kend);
                if *d.get(v)? != b':' {
                    return None;
                }
                if key_is(key, want) {
                    return at(d, v + 1, rest);
                }
                j = ws(d, skip(d, v + 1)?);
                match *d.get(j)? {
                    b',' => j = ws(d, j + 1),
                    _ => return None,
                }
            }
            None
        }
        (Step::Index(n), b'[') => {
            let mut j = ws(d, i + 1);
            for _ in 0..n {
                j = ws(d, skip(d, j)?);
                if *d.get(j)? != b',' {
                    return None;
                }
                j += 1;
            }
            if *d.get(ws(d, j))? == b']' {
                return None;
            }
            at(d, j, rest)
        }
        _ => None,
    }
}

/// Appends the unescaped string `raw` (between quotes); false when it holds an escape haproxy
/// 2.6 cannot read (see the module doc).
pub fn unescape(raw: &[u8], out: &mut Vec<u8>) -> bool {
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        let c = match raw.get(i + 1) {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'b') => 8,
            Some(b'f') => 12,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                let hex = raw.get(i + 2..i + 6);
                let v = hex
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u32::from_str_radix(h, 16).ok());
                match v {
                    Some(v) if v < 0x100 => {
                        out.push(v as u8);
                        i += 6;
                        continue;
                    }
                    _ => return false,
                }
            }
            _ => return false,
        };
        out.push(c);
        i += 2;
    }
    true
}

/// The number as an integer (`int`): its leading sign and digits, within ±(2^53-1).
pub fn to_int(num: &[u8]) -> Option<i64> {
    const MAX: i64 = (1 << 53) - 1;
    let (neg, digits) = match num.first() {
        Some(b'-') => (true, &num[1..]),
        Some(b'+') => (false, &num[1..]),
        _ => (false, num),
    };
    let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return Some(0);
    }
    let mut v: i64 = 0;
    for &c in &digits[..n] {
        v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    let v = if neg { -v } else { v };
    (-MAX..=MAX).contains(&v).then_some(v)
}

/// Appends `v` as C's `printf("%g")` does: six significant digits, exponent form below 1e-4
/// or from 1e6, trailing zeros cut.
pub fn write_g(out: &mut Vec<u8>, v: f64) {
    use std::io::Write;
    if !v.is_finite() {
        out.extend_from_slice(match (v.is_nan(), v < 0.0) {
            (true, _) => b"nan",
            (_, true) => b"-inf",
            _ => b"inf",
        });
        return;
    }
    let start = out.len();
    let _ = write!(out, "{v:.5e}");
    let e = start + out[start..].iter().position(|&c| c == b'e').unwrap_or(0);
    let exp: i32 = std::str::from_utf8(&out[e + 1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cut_zeros = |out: &mut Vec<u8>, from: usize| {
        if out[from..].contains(&b'.') {
            while out.last() == Some(&b'0') {
                out.pop();
            }
            if out.last() == Some(&b'.') {
                out.pop();
            }
        }
    };
    if (-4..6).contains(&exp) {
        out.truncate(start);
        let _ = write!(out, "{:.*}", (5 - exp) as usize, v);
        cut_zeros(out, start);
    } else {
        out.truncate(e);
        cut_zeros(out, start);
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(doc: &str, path: &str) -> Option<Found<'static>> {
        let doc: &'static str = Box::leak(doc.to_string().into_boxed_str());
        query(doc.as_bytes(), path.as_bytes())
    }

    #[test]
    fn paths_find_values() {
        let doc =
            r#" {"a":"x\"y","b":{"c":12,"d":[1, "two" ,{"e":true}]},"n":null,"d.k":5,"a":"dup"} "#;
        assert_eq!(q(doc, "$.a"), Some(Found::Str(br#"x\"y"#)));
        assert_eq!(q(doc, "$.b.c"), Some(Found::Num(b"12")));
        assert_eq!(q(doc, "$.b.d[1]"), Some(Found::Str(b"two")));
        assert_eq!(q(doc, "$.b.d[2].e"), Some(Found::Bool(true)));
        assert_eq!(q(doc, "$.b.d[3]"), None);
        assert_eq!(q(doc, "$.b"), Some(Found::Other));
        assert_eq!(q(doc, "$.n"), Some(Found::Other));
        assert_eq!(q(doc, r"$.d\.k"), Some(Found::Num(b"5")));
        assert_eq!(q(doc, "$.zz"), None);
        assert_eq!(q(doc, "a"), None);
        assert_eq!(q("42", "$"), Some(Found::Num(b"42")));
        // haproxy reads what comes before a defect.
        assert_eq!(q(r#"{"a":"x""#, "$.a"), Some(Found::Str(b"x")));
        assert_eq!(q("{\"a\":tru}", "$.a"), None);
        assert_eq!(q("nonsense", "$.a"), None);
    }

    #[test]
    fn strings_unescape_as_haproxy_reads_them() {
        let mut o = Vec::new();
        assert!(unescape(br#"a\"\\\n\t\u0041\u00e9\u0000"#, &mut o));
        assert_eq!(o, b"a\"\\\n\tA\xe9\0");
        assert!(!unescape(br"\u0100", &mut Vec::new()));
        assert!(!unescape(br"\u12", &mut Vec::new()));
        assert!(!unescape(br"a\/b", &mut Vec::new()));
    }

    /// Values read from haproxy 2.6.12 (`json_query('$.a')` and `json_query('$.a','int')`).
    #[test]
    fn numbers_print_as_haproxy_prints_them() {
        for (num, g, int) in [
            ("4.5e2", "450", Some(4)),
            ("-4.7", "-4.7", Some(-4)),
            ("12345678901234567890", "1.23457e+19", None),
            ("1e300", "1e+300", Some(1)),
            ("0.1", "0.1", Some(0)),
            ("123456789", "1.23457e+08", Some(123_456_789)),
            ("9007199254740993", "9.0072e+15", None),
            ("-0", "-0", Some(0)),
            ("1.5e-7", "1.5e-07", Some(1)),
            ("100000", "100000", Some(100_000)),
            ("1234567", "1.23457e+06", Some(1_234_567)),
            ("0.000012345", "1.2345e-05", Some(0)),
            ("2.5", "2.5", Some(2)),
        ] {
            let mut o = Vec::new();
            write_g(&mut o, num.parse().unwrap());
            assert_eq!(String::from_utf8(o).unwrap(), g, "{num}");
            assert_eq!(to_int(num.as_bytes()), int, "{num}");
        }
    }
}
