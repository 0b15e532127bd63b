//! `http-request normalize-uri`: HAProxy 2.6's URI normalizers, as pure functions from a
//! request target to the normalised one (origin-form: path, then `?query`, then `#fragment`).

use crate::rules::action::Normalizer;

/// Applies `n` to `target`, writing the result to `out` (cleared first). Returns false when
/// the target is left as it is (a strict normalizer that met an invalid escape, or no change
/// is possible).
pub fn apply(n: Normalizer, target: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let (path, rest) = split_path(target);
    match n {
        Normalizer::PathMergeSlashes => {
            let mut prev_slash = false;
            for &c in path {
                if c == b'/' && prev_slash {
                    continue;
                }
                prev_slash = c == b'/';
                out.push(c);
            }
            out.extend_from_slice(rest);
        }
        Normalizer::PathStripDot => {
            let segs: Vec<&[u8]> = path.split(|&c| c == b'/').collect();
            let last = segs.len() - 1;
            for (i, s) in segs.iter().enumerate() {
                if *s == b"." && i != 0 {
                    // A trailing `/.` keeps its slash.
                    if i == last {
                        out.push(b'/');
                    }
                    continue;
                }
                if i != 0 {
                    out.push(b'/');
                }
                out.extend_from_slice(s);
            }
            out.extend_from_slice(rest);
        }
        Normalizer::PathStripDotdot { full } => {
            let mut kept: Vec<&[u8]> = Vec::new();
            let segs: Vec<&[u8]> = path.split(|&c| c == b'/').skip(1).collect();
            let n = segs.len();
            let mut trailing = false;
            for (i, s) in segs.into_iter().enumerate() {
                if s == b".." {
                    match kept.last() {
                        Some(_) => {
                            kept.pop();
                        }
                        // Above the root: kept unless `full`.
                        None if !full => kept.push(s),
                        None => {}
                    }
                    trailing = i == n - 1;
                } else {
                    kept.push(s);
                    trailing = false;
                }
            }
            if !path.starts_with(b"/") {
                return false;
            }
            for s in &kept {
                out.push(b'/');
                out.extend_from_slice(s);
            }
            if trailing || out.is_empty() {
                out.push(b'/');
            }
            out.extend_from_slice(rest);
        }
        Normalizer::PercentDecodeUnreserved { strict } => {
            let mut i = 0;
            while i < target.len() {
                let c = target[i];
                if c == b'%' {
                    match hex_pair(target, i + 1) {
                        Some(v) if is_unreserved(v) => {
                            out.push(v);
                            i += 3;
                            continue;
                        }
                        Some(_) => {}
                        None if strict => return false,
                        None => {}
                    }
                }
                out.push(c);
                i += 1;
            }
        }
        Normalizer::PercentToUppercase { strict } => {
            let mut i = 0;
            while i < target.len() {
                let c = target[i];
                if c == b'%' {
                    if hex_pair(target, i + 1).is_some() {
                        out.push(b'%');
                        out.push(target[i + 1].to_ascii_uppercase());
                        out.push(target[i + 2].to_ascii_uppercase());
                        i += 3;
                        continue;
                    }
                    if strict {
                        return false;
                    }
                }
                out.push(c);
                i += 1;
            }
        }
        Normalizer::QuerySortByName => {
            out.extend_from_slice(path);
            let (query, frag) = match rest.iter().position(|&c| c == b'#') {
                Some(p) => (&rest[..p], &rest[p..]),
                None => (rest, &rest[rest.len()..]),
            };
            if let Some(q) = query.strip_prefix(b"?") {
                let mut params: Vec<&[u8]> = q.split(|&c| c == b'&').collect();
                // A stable sort on the name: parameters of the same name keep their order.
                params.sort_by(|a, b| name_of(a).cmp(name_of(b)));
                out.push(b'?');
                for (i, p) in params.iter().enumerate() {
                    if i > 0 {
                        out.push(b'&');
                    }
                    out.extend_from_slice(p);
                }
            }
            out.extend_from_slice(frag);
        }
        Normalizer::FragmentStrip => {
            let end = target
                .iter()
                .position(|&c| c == b'#')
                .unwrap_or(target.len());
            out.extend_from_slice(&target[..end]);
        }
        Normalizer::FragmentEncode => {
            for &c in target {
                if c == b'#' {
                    out.extend_from_slice(b"%23");
                } else {
                    out.push(c);
                }
            }
        }
    }
    true
}

/// The path (up to `?` or `#`) and the rest.
fn split_path(target: &[u8]) -> (&[u8], &[u8]) {
    let end = target
        .iter()
        .position(|&c| c == b'?' || c == b'#')
        .unwrap_or(target.len());
    target.split_at(end)
}

fn name_of(param: &[u8]) -> &[u8] {
    let end = param.iter().position(|&c| c == b'=').unwrap_or(param.len());
    &param[..end]
}

fn hex_pair(b: &[u8], i: usize) -> Option<u8> {
    let h = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    Some(h(*b.get(i)?)? << 4 | h(*b.get(i + 1)?)?)
}

fn is_unreserved(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(n: Normalizer, t: &str) -> String {
        let mut out = Vec::new();
        assert!(apply(n, t.as_bytes(), &mut out));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn normalizers_as_haproxy_documents_them() {
        assert_eq!(
            norm(Normalizer::PathMergeSlashes, "//a///b/?x//y"),
            "/a/b/?x//y"
        );
        assert_eq!(norm(Normalizer::PathStripDot, "/a/./b/.?q"), "/a/b/?q");
        let dotdot = Normalizer::PathStripDotdot { full: false };
        assert_eq!(norm(dotdot, "/a/b/../c"), "/a/c");
        assert_eq!(norm(dotdot, "/a/.."), "/");
        assert_eq!(norm(dotdot, "/../a"), "/../a");
        let full = Normalizer::PathStripDotdot { full: true };
        assert_eq!(norm(full, "/../a"), "/a");
        let dec = Normalizer::PercentDecodeUnreserved { strict: false };
        assert_eq!(norm(dec, "/%61%2F%7e"), "/a%2F~");
        let up = Normalizer::PercentToUppercase { strict: false };
        assert_eq!(norm(up, "/%2f%aa"), "/%2F%AA");
        assert_eq!(
            norm(Normalizer::QuerySortByName, "/p?b=1&a=2&b=0#f"),
            "/p?a=2&b=1&b=0#f"
        );
        assert_eq!(norm(Normalizer::FragmentStrip, "/p?q#frag"), "/p?q");
        assert_eq!(norm(Normalizer::FragmentEncode, "/p#frag"), "/p%23frag");
        let strict = Normalizer::PercentToUppercase { strict: true };
        assert!(!apply(strict, b"/%zz", &mut Vec::new()));
    }
}
