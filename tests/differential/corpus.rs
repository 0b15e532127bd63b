//! The corpus files: `requests.txt` and `responses.txt`, read at test time.
//!
//! A case is a block that starts with `[name]` and holds `key: value` lines:
//!
//! - `source:` where the shape comes from (a paper, a CVE); optional.
//! - `note:` what the case probes; optional.
//! - `stricter:` why Bascule deliberately answers an error where haproxy forwards, or closes where
//!   haproxy keeps a connection open; only cases with this line may be stricter than haproxy.
//! - `data:` bytes; several `data:` lines are concatenated. For request cases they are what the
//!   client sends; for response cases, what the backend answers to the first request.
//! - `request:` (responses only) what the client sends instead of the default
//!   `GET /r HTTP/1.1` with a `Host`; several lines are concatenated.
//! - `then: close` (responses only): the backend closes after writing `data`.
//!
//! Escapes in `data:` and `request:` values: `\r`, `\n`, `\t`, `\0`, `\\`, `\xNN`, and
//! `\[N:TEXT]`, TEXT (itself escaped, without `]`) repeated N times. Nothing else is trimmed or
//! added, so a trailing space is written `\x20`. Lines starting with `#` and blank lines between
//! cases are comments.

use std::collections::HashSet;

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub source: String,
    pub note: String,
    pub stricter: Option<String>,
    pub data: Vec<u8>,
    pub request: Option<Vec<u8>>,
    pub close_after: bool,
}

/// Parses a corpus file; `responses` allows the response-only keys. Panics with `file:line` on
/// a malformed line, a duplicate name or a case without data.
pub fn parse(file: &str, text: &str, responses: bool) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut names = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let at = || format!("{file}:{}", i + 1);
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .unwrap_or_else(|| panic!("{}: a case header is `[name]`", at()));
            assert!(
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b'|'),
                "{}: case name {name:?} must be printable ASCII without spaces or `|`",
                at()
            );
            assert!(
                names.insert(name.to_string()),
                "{}: duplicate case {name}",
                at()
            );
            cases.push(Case {
                name: name.to_string(),
                source: String::new(),
                note: String::new(),
                stricter: None,
                data: Vec::new(),
                request: None,
                close_after: false,
            });
            continue;
        }
        let case = cases
            .last_mut()
            .unwrap_or_else(|| panic!("{}: a line before the first `[name]`", at()));
        let (key, value) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("{}: expected `key: value`", at()));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match key {
            "source" => case.source = value.to_string(),
            "note" => join(&mut case.note, value),
            "stricter" => join(case.stricter.get_or_insert_with(String::new), value),
            "data" => case
                .data
                .extend(unescape(value).unwrap_or_else(|e| panic!("{}: {e}", at()))),
            "request" if responses => case
                .request
                .get_or_insert_with(Vec::new)
                .extend(unescape(value).unwrap_or_else(|e| panic!("{}: {e}", at()))),
            "then" if responses && value == "close" => case.close_after = true,
            _ => panic!("{}: unknown key {key:?}", at()),
        }
    }
    for c in &cases {
        assert!(!c.data.is_empty(), "{file}: case {} has no data", c.name);
    }
    cases
}

fn join(s: &mut String, more: &str) {
    if !s.is_empty() {
        s.push(' ');
    }
    s.push_str(more);
}

/// Expands the escapes described in the module documentation.
pub fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let Some(&c) = b.get(i + 1) else {
            return Err("a lone `\\` at the end of a line".into());
        };
        i += 2;
        match c {
            b'r' => out.push(b'\r'),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'0' => out.push(0),
            b'\\' => out.push(b'\\'),
            b'x' => {
                let hex = s
                    .get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or("`\\x` needs two hex digits")?;
                out.push(hex);
                i += 2;
            }
            b'[' => {
                let close = s[i..].find(']').ok_or("`\\[` without `]`")? + i;
                let (count, text) = s[i..close]
                    .split_once(':')
                    .ok_or("`\\[N:TEXT]` needs a `:`")?;
                let count: usize = count.parse().map_err(|_| "`\\[N:` needs a number")?;
                let text = unescape(text)?;
                for _ in 0..count {
                    out.extend_from_slice(&text);
                }
                i = close + 1;
            }
            _ => return Err(format!("unknown escape `\\{}`", c as char)),
        }
    }
    Ok(out)
}

/// Bytes as a corpus line would write them (for the report), shortened past `max` bytes.
pub fn escape(b: &[u8], max: usize) -> String {
    let mut s = String::new();
    for &c in b.iter().take(max) {
        match c {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    if b.len() > max {
        s.push_str(&format!("...({} bytes)", b.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip() {
        assert_eq!(unescape(r"a\r\n\t\x00\\").unwrap(), b"a\r\n\t\0\\");
        assert_eq!(unescape(r"\[3:ab]c").unwrap(), b"abababc");
        assert_eq!(unescape(r"\[2:\x41]").unwrap(), b"AA");
        assert!(unescape(r"\q").is_err());
        assert!(unescape(r"\x4").is_err());
        assert_eq!(escape(b"a\r\n\x01", 10), r"a\r\n\x01");
    }

    #[test]
    fn blocks_parse() {
        let c = parse(
            "t",
            "# c\n[one]\nsource: S\nnote: a\nnote: b\ndata: x\\r\ndata: y\n\n[two]\ndata: z\nrequest: q\nthen: close\n",
            true,
        );
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].note, "a b");
        assert_eq!(c[0].data, b"x\ry");
        assert!(c[1].close_after);
        assert_eq!(c[1].request.as_deref(), Some(&b"q"[..]));
    }
}
