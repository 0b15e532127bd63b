//! Patterns and matching: the values an ACL compares a sample with, held in the structure that
//! makes each match method cheap, and maps (patterns with values) for the `map_*` converters.
//!
//! Why these structures: an ACL or map may hold thousands of entries (`-f FILE`) and is
//! consulted on every request. Exact strings go in a hash set (keys lower-cased for `-i`), or
//! when there are at most eight in a list compared one by one (cheaper than hashing), IP
//! networks in a prefix tree ([`super::iptree`]) whose lookup cost does not depend on their
//! number, regexes in one `RegexSet` compiled at load, integers in a list of ranges. Prefix,
//! suffix, substring, `dir` and `dom` matches scan a list in order (first match wins, which
//! maps rely on). A lookup returns the index of the matched entry, so ACLs and maps share it.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;

use super::relit::Literal;
use regex::bytes::{RegexSet, RegexSetBuilder};

use super::iptree::{parse_net, IpTree};
use super::sample::{cast, to_bytes, Eval, Sample, SmpType};
use super::{err, RuleError};

/// The hasher of exact-match sets and map keys: a folded multiply over 8 bytes at a time,
/// seeded once per set. Std's SipHash costs some 250 instructions for a host name, more than
/// the rest of the lookup; the keys come from the configuration and a lookup's probe length
/// depends on them, not on the request, so a request cannot make lookups slower.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHash(u64);

impl KeyHash {
    fn new() -> Self {
        // A per-set seed from std's random keys.
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        KeyHash(seed)
    }
}

impl BuildHasher for KeyHash {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(self.0)
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHasher(u64);

const MUL: u64 = 0x9E37_79B9_7F4A_7C15;

fn fold_mul(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = fold_mul(h ^ u64::from_le_bytes(w), MUL);
        }
        let r = chunks.remainder();
        if !r.is_empty() {
            let mut w = [0u8; 8];
            w[..r.len()].copy_from_slice(r);
            h = fold_mul(h ^ u64::from_le_bytes(w), MUL ^ r.len() as u64);
        }
        self.0 = h;
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = fold_mul(self.0 ^ n as u64, MUL);
    }
    fn finish(&self) -> u64 {
        fold_mul(self.0, MUL.rotate_left(29))
    }
}

/// A match method (`-m`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The sample exists.
    Found,
    /// The sample, as a boolean, is true.
    Bool,
    Int,
    Ip,
    /// Exact binary, patterns in hex.
    Bin,
    /// The length of the sample as a string, against integer patterns.
    Len,
    Str,
    Beg,
    End,
    Sub,
    Reg,
    Dir,
    Dom,
}

impl Method {
    pub fn parse(s: &str) -> Option<Method> {
        Some(match s {
            "found" => Method::Found,
            "bool" => Method::Bool,
            "int" => Method::Int,
            "ip" => Method::Ip,
            "bin" => Method::Bin,
            "len" => Method::Len,
            "str" => Method::Str,
            "beg" => Method::Beg,
            "end" => Method::End,
            "sub" => Method::Sub,
            "reg" => Method::Reg,
            "dir" => Method::Dir,
            "dom" => Method::Dom,
            _ => return None,
        })
    }
    /// The method's name, as in `-m NAME` (and `get map`'s `type=`).
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
    /// Every method's name, in declaration order.
    pub const NAMES: [&'static str; 13] = [
        "found", "bool", "int", "ip", "bin", "len", "str", "beg", "end", "sub", "reg", "dir", "dom",
    ];

    /// The method HAProxy uses for a sample of type `t` when none is given.
    pub fn default_for(t: SmpType) -> Method {
        match t {
            SmpType::Bool => Method::Bool,
            SmpType::Sint => Method::Int,
            SmpType::Addr | SmpType::Ipv4 | SmpType::Ipv6 => Method::Ip,
            SmpType::Bin => Method::Bin,
            _ => Method::Str,
        }
    }

    /// Whether this method takes integer patterns (and the `eq`/`lt`... operators).
    pub fn is_int(self) -> bool {
        matches!(self, Method::Int | Method::Len)
    }
}

/// A comparison operator before integer patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    Eq,
    Ge,
    Gt,
    Le,
    Lt,
}

impl IntOp {
    pub fn parse(s: &str) -> Option<IntOp> {
        Some(match s {
            "eq" => IntOp::Eq,
            "ge" => IntOp::Ge,
            "gt" => IntOp::Gt,
            "le" => IntOp::Le,
            "lt" => IntOp::Lt,
            _ => return None,
        })
    }
}

#[derive(Debug)]
enum Store {
    /// found / bool: nothing to store.
    Nothing,
    Ints(Vec<(i64, i64, u32)>),
    Ip(IpTree),
    Exact(HashMap<Box<[u8]>, u32, KeyHash>),
    /// Exact strings, at most [`FEW`] (what [`Patterns::finish`] makes of such an `Exact`):
    /// comparing each (its length first) costs less than hashing the sample. Keys are
    /// distinct, each with its first value, as in the hash set.
    Few(Vec<(Box<[u8]>, u32)>),
    List(Vec<(Box<[u8]>, u32)>),
    Reg {
        sources: Vec<(String, u32)>,
        /// The patterns that are literals ([`super::relit`]), by index in `sources`.
        lits: Vec<(usize, Literal)>,
        /// The others, in one set, and their indices in `sources`.
        set: Option<RegexSet>,
        in_set: Vec<usize>,
        /// The literal prefixes ([`Literal::required_prefix`]) of the regexes in the set, when
        /// each has one: a sample that starts with none of them matches none of the set.
        prefixes: Option<Box<[Box<[u8]>]>>,
    },
}

/// Up to how many exact strings are compared one by one rather than hashed (a host name or a
/// method against a handful of values).
const FEW: usize = 8;

/// The compiled patterns of one ACL line (or the keys of one map).
#[derive(Debug)]
pub struct Patterns {
    pub method: Method,
    pub icase: bool,
    store: Store,
    count: u32,
    /// `-m sub` with several patterns, for [`Patterns::matches`]: one search for any of them
    /// (the regex crate's literal search, a single pass over the sample) instead of one scan
    /// per pattern, which is what a user agent tested against a list of bot names costs when
    /// none is there, the common case. `lookup` (a map's first pattern in list order) keeps
    /// the scans.
    any_sub: Option<regex::bytes::Regex>,
}

impl Patterns {
    pub fn new(method: Method, icase: bool) -> Self {
        let store = match method {
            Method::Found | Method::Bool => Store::Nothing,
            Method::Int | Method::Len => Store::Ints(Vec::new()),
            Method::Ip => Store::Ip(IpTree::new()),
            Method::Str | Method::Bin => Store::Exact(HashMap::with_hasher(KeyHash::new())),
            Method::Reg => Store::Reg {
                sources: Vec::new(),
                lits: Vec::new(),
                set: None,
                in_set: Vec::new(),
                prefixes: None,
            },
            _ => Store::List(Vec::new()),
        };
        Patterns {
            method,
            icase,
            store,
            count: 0,
            any_sub: None,
        }
    }

    /// Number of patterns added.
    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds one pattern, parsed for the method, with value index `val` (its position in a map;
    /// ignored by ACLs). `op` applies to an integer pattern.
    pub fn add(&mut self, pat: &str, op: Option<IntOp>, val: u32) -> Result<(), RuleError> {
        self.count += 1;
        let icase = self.icase;
        let fold = |s: &str| -> Box<[u8]> {
            if icase {
                crate::config::rawbytes::bytes(s)
                    .to_ascii_lowercase()
                    .into()
            } else {
                crate::config::rawbytes::bytes(s).into()
            }
        };
        let key = fold(pat);
        match &mut self.store {
            Store::Nothing => {}
            Store::Ints(v) => {
                let (lo, hi) = parse_range(pat, op)?;
                v.push((lo, hi, val));
            }
            Store::Ip(t) => {
                let Some((a, len)) = parse_net(pat) else {
                    return err(format!("'{pat}' is not a valid IPv4 or IPv6 address"));
                };
                t.insert(a, len, val);
            }
            Store::Exact(m) => {
                let key = if self.method == Method::Bin {
                    parse_hex(pat)?
                } else {
                    key
                };
                m.entry(key).or_insert(val);
            }
            Store::Few(v) => {
                if !v.iter().any(|(k, _)| *k == key) {
                    v.push((key, val));
                }
            }
            Store::List(v) => {
                let key = match self.method {
                    // `dir` and `dom` compare whole components: trim the delimiters the
                    // pattern may carry.
                    Method::Dir => trim_delims(&key, b"/?").into(),
                    Method::Dom => trim_delims(&key, b"/?.:").into(),
                    _ => key,
                };
                v.push((key, val));
            }
            Store::Reg { sources, .. } => {
                // Check each regex alone, so the error names it.
                if let Err(e) = regex::bytes::RegexBuilder::new(pat).unicode(false).build() {
                    return err(format!("invalid regex '{pat}': {e}"));
                }
                sources.push((pat.to_string(), val));
            }
        }
        Ok(())
    }

    /// Builds what needs all patterns at once (the regex set, of the regexes that are not
    /// literals). Call after the last `add`.
    pub fn finish(&mut self) -> Result<(), RuleError> {
        if let Store::Reg {
            sources,
            lits,
            set,
            in_set,
            prefixes,
        } = &mut self.store
        {
            lits.clear();
            in_set.clear();
            for (i, (pat, _)) in sources.iter().enumerate() {
                match Literal::parse(pat) {
                    Some(l) => lits.push((i, l)),
                    None => in_set.push(i),
                }
            }
            *set = None;
            if !in_set.is_empty() {
                let built = RegexSetBuilder::new(in_set.iter().map(|&i| &sources[i].0))
                    .case_insensitive(self.icase)
                    // Bytes, as PCRE without UTF mode sees them (and ASCII-only case folding).
                    .unicode(false)
                    .size_limit(64 << 20)
                    .build()
                    .map_err(|e| RuleError::new(format!("cannot compile the regexes: {e}")))?;
                *set = Some(built);
            }
            *prefixes = in_set
                .iter()
                .map(|&i| Literal::required_prefix(&sources[i].0))
                .collect();
        }
        if let (Method::Str, Store::Exact(m)) = (self.method, &self.store) {
            if m.len() <= FEW {
                let mut few: Vec<(Box<[u8]>, u32)> =
                    m.iter().map(|(k, &v)| (k.clone(), v)).collect();
                few.sort_unstable_by_key(|e| e.1);
                self.store = Store::Few(few);
            }
        }
        if let (Method::Sub, Store::List(v)) = (self.method, &self.store) {
            self.any_sub = any_of(v.iter().map(|p| &*p.0), self.icase);
        }
        Ok(())
    }

    /// Whether `s` matches any pattern (what an ACL needs: a regex set then only answers
    /// yes or no, which allocates nothing; finding which regex matched would).
    /// Whether `s` matches a pattern. Inline: an ACL's closure calls it for every value, and
    /// most stores go straight to [`Patterns::lookup`].
    #[inline]
    pub fn matches(&self, s: Sample<'_>, ev: &mut Eval) -> bool {
        if matches!(self.store, Store::Reg { .. }) || self.any_sub.is_some() {
            return self.matches_searched(s, ev);
        }
        self.lookup(s, ev).is_some()
    }

    /// [`Patterns::matches`] for regexes and `-m sub` lists, which search the sample.
    #[inline(never)]
    fn matches_searched(&self, s: Sample<'_>, ev: &mut Eval) -> bool {
        if let Store::Reg {
            lits,
            set,
            prefixes,
            ..
        } = &self.store
        {
            let Some(b) = to_bytes(s, ev) else {
                return false;
            };
            let hay = ev.get(b);
            return lits.iter().any(|(_, l)| l.matches(hay, self.icase))
                || set.as_ref().is_some_and(|set| {
                    self.may_match_set(prefixes.as_deref(), hay) && set.is_match(hay)
                });
        }
        if let Some(re) = &self.any_sub {
            return match to_bytes(s, ev) {
                Some(b) => re.is_match(ev.get(b)),
                None => false,
            };
        }
        self.lookup(s, ev).is_some()
    }

    /// Whether a regex of the set may match `hay`: no known prefixes, or `hay` starts with
    /// one of them.
    fn may_match_set(&self, prefixes: Option<&[Box<[u8]>]>, hay: &[u8]) -> bool {
        prefixes.is_none_or(|ps| ps.iter().any(|p| Literal::starts(hay, p, self.icase)))
    }

    /// The value index of the first pattern `s` matches (for `found` and `bool`, 0 when it
    /// matches).
    #[inline]
    pub fn lookup(&self, s: Sample<'_>, ev: &mut Eval) -> Option<u32> {
        // `-m found` and addresses against a network list, inline in the caller; the other
        // stores behind a call.
        match (&self.store, s) {
            (Store::Nothing, _) if self.method != Method::Bool => Some(0),
            (Store::Ip(t), Sample::Ipv4(a)) => t.lookup(IpAddr::V4(a)),
            _ => self.lookup_other(s, ev),
        }
    }

    /// [`Patterns::lookup`] for every store.
    #[inline(never)]
    fn lookup_other(&self, s: Sample<'_>, ev: &mut Eval) -> Option<u32> {
        match &self.store {
            Store::Nothing => match self.method {
                Method::Bool => match cast(s, SmpType::Bool, ev)? {
                    Sample::Bool(true) => Some(0),
                    _ => None,
                },
                _ => Some(0),
            },
            Store::Ints(v) => {
                let n = if self.method == Method::Len {
                    let b = to_bytes(s, ev)?;
                    ev.get(b).len() as i64
                } else {
                    match cast(s, SmpType::Sint, ev)? {
                        Sample::Sint(n) => n,
                        _ => return None,
                    }
                };
                v.iter()
                    .find(|(lo, hi, _)| *lo <= n && n <= *hi)
                    .map(|e| e.2)
            }
            Store::Ip(t) => match cast(s, SmpType::Addr, ev)? {
                Sample::Ipv4(a) => t.lookup(IpAddr::V4(a)),
                Sample::Ipv6(a) => t.lookup(IpAddr::V6(a)),
                _ => None,
            },
            Store::Exact(m) => {
                // `-m bin` reads a binary whole; the other methods a string.
                let b = if self.method == Method::Bin {
                    super::sample::to_bin(s, ev)?
                } else {
                    to_bytes(s, ev)?
                };
                if self.icase {
                    // Fold into the Eval's buffer (no allocation once it has grown).
                    let mut buf = std::mem::take(&mut ev.fold);
                    buf.clear();
                    super::hash::push_lower(ev.get(b), &mut buf);
                    let r = m.get(buf.as_slice()).copied();
                    ev.fold = buf;
                    r
                } else {
                    m.get(ev.get(b)).copied()
                }
            }
            Store::Few(v) => {
                let b = to_bytes(s, ev)?;
                let find = |hay: &[u8]| v.iter().find(|(p, _)| **p == *hay).map(|e| e.1);
                if self.icase {
                    // Folded 8 bytes at a time, then compared whole: cheaper than comparing
                    // byte by byte ignoring case.
                    let mut buf = std::mem::take(&mut ev.fold);
                    buf.clear();
                    super::hash::push_lower(ev.get(b), &mut buf);
                    let r = find(&buf);
                    ev.fold = buf;
                    r
                } else {
                    find(ev.get(b))
                }
            }
            Store::List(v) if matches!(self.method, Method::Beg | Method::End) => {
                // Patterns are lower-case under `-i`: compare the ends without folding the
                // whole sample (a user agent is some 100 bytes).
                let b = to_bytes(s, ev)?;
                let hay = ev.get(b);
                let hit = |p: &[u8]| {
                    let Some(rest) = hay.len().checked_sub(p.len()) else {
                        return false;
                    };
                    let end = if self.method == Method::Beg {
                        &hay[..p.len()]
                    } else {
                        &hay[rest..]
                    };
                    if self.icase {
                        end.eq_ignore_ascii_case(p)
                    } else {
                        end == p
                    }
                };
                v.iter().find(|(p, _)| hit(p)).map(|e| e.1)
            }
            Store::List(v) if self.method == Method::Sub => {
                // Under `-i` the patterns are lower-case: the search folds as it goes.
                let b = to_bytes(s, ev)?;
                let hay = ev.get(b);
                v.iter()
                    .find(|(p, _)| contains(hay, p, self.icase))
                    .map(|e| e.1)
            }
            Store::List(v) => {
                let b = to_bytes(s, ev)?;
                let mut buf = std::mem::take(&mut ev.fold);
                let hay: &[u8] = if self.icase {
                    buf.clear();
                    super::hash::push_lower(ev.get(b), &mut buf);
                    &buf
                } else {
                    ev.get(b)
                };
                let r = v
                    .iter()
                    .find(|(p, _)| match self.method {
                        Method::Dir => word_match(hay, p, b"/?"),
                        Method::Dom => word_match(hay, p, b"/?.:"),
                        _ => false,
                    })
                    .map(|e| e.1);
                ev.fold = buf;
                r
            }
            Store::Reg {
                sources,
                lits,
                set,
                in_set,
                prefixes,
            } => {
                let b = to_bytes(s, ev)?;
                let hay = ev.get(b);
                // The first matching pattern in list order (maps need it): the first literal
                // that matches, unless a regex before it does. The regex crate allocates its
                // match set here; ACLs use `matches`, which does not.
                let lit = lits
                    .iter()
                    .find(|(_, l)| l.matches(hay, self.icase))
                    .map(|l| l.0);
                // A literal before every regex of the set is the answer.
                let settled = lit.is_some_and(|a| in_set.first().is_none_or(|&f| a < f));
                let re = set.as_ref().filter(|_| !settled);
                let re = re.filter(|_| self.may_match_set(prefixes.as_deref(), hay));
                let re = re.and_then(|set| {
                    if in_set.len() == 1 {
                        set.is_match(hay).then_some(in_set[0])
                    } else {
                        set.matches(hay).iter().next().map(|k| in_set[k])
                    }
                });
                let first = match (lit, re) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => a.or(b)?,
                };
                Some(sources[first].1)
            }
        }
    }
}

/// Writes `fmt` with `\0`..`\9` replaced by the groups of `caps` (`map_regm` values).
fn expand_groups(fmt: &[u8], caps: &regex::bytes::Captures<'_>, out: &mut Vec<u8>) {
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] == b'\\' && fmt.get(i + 1).is_some_and(u8::is_ascii_digit) {
            if let Some(m) = caps.get((fmt[i + 1] - b'0') as usize) {
                out.extend_from_slice(m.as_bytes());
            }
            i += 2;
            continue;
        }
        out.push(fmt[i]);
        i += 1;
    }
}

/// The position of the first byte of `hay` equal to `a` or `b`, looked for 8 bytes at a time
/// (the lowest lane a SWAR zero-byte test flags is exact).
pub(crate) fn find_either(hay: &[u8], a: u8, b: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let lanes = |w: u64, c: u8| {
        let x = w ^ (ONES * u64::from(c));
        x.wrapping_sub(ONES) & !x & HIGH
    };
    let word = |at: usize| u64::from_le_bytes(hay[at..at + 8].try_into().unwrap_or([0; 8]));
    let n = hay.len();
    if n < 8 {
        return hay.iter().position(|&c| c == a || c == b);
    }
    let mut i = 0;
    while i + 8 <= n {
        let w = word(i);
        let m = lanes(w, a) | lanes(w, b);
        if m != 0 {
            return Some(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    if i == n {
        return None;
    }
    // The last eight bytes, overlapping the word before (whose bytes had no match).
    let w = word(n - 8);
    let m = lanes(w, a) | lanes(w, b);
    (m != 0).then(|| n - 8 + (m.trailing_zeros() / 8) as usize)
}

/// A search for any of `pats` (lower-case under `icase`, matched in either case as HAProxy's
/// `-i`: ASCII only), when there are several, all ASCII and non-empty; `None` otherwise (or if
/// the set is too large to compile), and [`contains`] scans for each in turn.
fn any_of<'p>(pats: impl Iterator<Item = &'p [u8]>, icase: bool) -> Option<regex::bytes::Regex> {
    let mut alt = String::from(if icase { "(?i-u)(?:" } else { "(?-u)(?:" });
    let mut n = 0;
    for p in pats {
        if p.is_empty() || !p.is_ascii() {
            return None;
        }
        if n > 0 {
            alt.push('|');
        }
        alt.push_str(&regex::escape(std::str::from_utf8(p).ok()?));
        n += 1;
    }
    alt.push(')');
    if n < 2 {
        return None;
    }
    regex::bytes::RegexBuilder::new(&alt)
        .unicode(false)
        .size_limit(16 << 20)
        .build()
        .ok()
}

/// Whether `needle` occurs in `hay` (`icase`: `needle` is lower-case and letters of `hay`
/// match in either case): a scan for its first byte, then a compare at each hit (a compare at
/// every position costs a `memcmp` call each: 300 of them for a user agent and four needles).
fn contains(hay: &[u8], needle: &[u8], icase: bool) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    let Some(last) = hay.len().checked_sub(needle.len()) else {
        return false;
    };
    let upper = if icase {
        first.to_ascii_uppercase()
    } else {
        first
    };
    let mut i = 0;
    while i <= last {
        match find_either(&hay[i..=last], first, upper) {
            None => return false,
            Some(p) => {
                i += p + 1;
                let cand = &hay[i..i + rest.len()];
                let same = if icase {
                    cand.eq_ignore_ascii_case(rest)
                } else {
                    cand == rest
                };
                if same {
                    return true;
                }
            }
        }
    }
    false
}

fn trim_delims<'b>(mut s: &'b [u8], delims: &[u8]) -> &'b [u8] {
    while let [c, rest @ ..] = s {
        if !delims.contains(c) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., c] = s {
        if !delims.contains(c) {
            break;
        }
        s = rest;
    }
    s
}

/// Whether `p` appears in `hay` as whole components: preceded by the start or a delimiter,
/// followed by the end or a delimiter (HAProxy's `dir` and `dom`).
fn word_match(hay: &[u8], p: &[u8], delims: &[u8]) -> bool {
    if p.is_empty() {
        return false;
    }
    let mut i = 0;
    while i + p.len() <= hay.len() {
        if &hay[i..i + p.len()] == p
            && (i == 0 || delims.contains(&hay[i - 1]))
            && (i + p.len() == hay.len() || delims.contains(&hay[i + p.len()]))
        {
            return true;
        }
        i += 1;
    }
    false
}

fn parse_hex(s: &str) -> Result<Box<[u8]>, RuleError> {
    let h = s.as_bytes();
    if h.len() % 2 != 0 {
        return err(format!(
            "'{s}' is not a binary pattern (an even number of hex digits)"
        ));
    }
    let mut v = Vec::with_capacity(h.len() / 2);
    for p in h.chunks(2) {
        match (super::hash::hex_val(p[0]), super::hash::hex_val(p[1])) {
            (Some(a), Some(b)) => v.push(a << 4 | b),
            _ => return err(format!("'{s}' is not a binary pattern (hex digits)")),
        }
    }
    Ok(v.into())
}

/// An integer pattern: `N`, `N:M`, `:M`, `N:`, or `N` after an operator.
fn parse_range(s: &str, op: Option<IntOp>) -> Result<(i64, i64), RuleError> {
    let num = |t: &str| -> Result<i64, RuleError> {
        t.parse::<i64>()
            .map_err(|_| RuleError::new(format!("'{s}' is not a number")))
    };
    if let Some(op) = op {
        let n = num(s)?;
        return Ok(match op {
            IntOp::Eq => (n, n),
            IntOp::Ge => (n, i64::MAX),
            IntOp::Gt => (n.saturating_add(1), i64::MAX),
            IntOp::Le => (i64::MIN, n),
            IntOp::Lt => (i64::MIN, n.saturating_sub(1)),
        });
    }
    match s.split_once(':') {
        None => {
            let n = num(s)?;
            Ok((n, n))
        }
        Some((a, b)) => {
            let lo = if a.is_empty() { i64::MIN } else { num(a)? };
            let hi = if b.is_empty() { i64::MAX } else { num(b)? };
            if a.is_empty() && b.is_empty() {
                return err(format!("'{s}' is not a number"));
            }
            Ok((lo, hi))
        }
    }
}

/// Reads a pattern or map file: one entry a line, leading and trailing blanks removed, blank
/// lines and lines starting with `#` skipped. Each entry comes with its 1-based line number.
pub fn read_lines(path: &str) -> Result<Vec<(usize, String)>, RuleError> {
    let text = std::fs::read(path)
        .map_err(|e| RuleError::new(format!("failed to open pattern file <{path}>: {e}")))?;
    let text = String::from_utf8_lossy(&text);
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_matches([' ', '\t', '\r']).to_string()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .collect())
}

/// Splits a map line into its key and its value (the rest of the line, blanks trimmed).
pub fn split_map_line(line: &str) -> (&str, &str) {
    match line.find([' ', '\t']) {
        Some(p) => (&line[..p], line[p..].trim_matches([' ', '\t'])),
        None => (line, ""),
    }
}

/// A map value, already parsed for the converter's output type.
#[derive(Clone, Debug, PartialEq)]
pub enum MapValue {
    Str(Box<[u8]>),
    Int(i64),
    Ip(IpAddr),
}

/// A map loaded at compile time: keys in [`Patterns`], values by index.
#[derive(Debug)]
pub struct Map {
    pub keys: Patterns,
    pub values: Vec<MapValue>,
    pub default: Option<MapValue>,
    /// `map_regm`: each key's regex, by value index, whose groups `\1`..`\9` in the value
    /// stand for (empty for every other map).
    pub backrefs: Vec<regex::bytes::Regex>,
}

fn parse_value(v: &str, out: SmpType) -> Result<MapValue, RuleError> {
    Ok(match out {
        SmpType::Sint => MapValue::Int(
            v.parse()
                .map_err(|_| RuleError::new(format!("map value '{v}' is not an integer")))?,
        ),
        SmpType::Addr | SmpType::Ipv4 | SmpType::Ipv6 => MapValue::Ip(
            v.parse()
                .map_err(|_| RuleError::new(format!("map value '{v}' is not an IP address")))?,
        ),
        _ => MapValue::Str(v.as_bytes().into()),
    })
}

impl Map {
    /// Loads `path` (`key value` lines) for match `method`, values typed `out`.
    pub fn load(
        path: &str,
        method: Method,
        out: SmpType,
        default: Option<&str>,
    ) -> Result<Map, RuleError> {
        let lines = read_lines(path)?;
        let pairs: Vec<(usize, &str, &str)> = lines
            .iter()
            .map(|(n, l)| {
                let (k, v) = split_map_line(l);
                (*n, k, v)
            })
            .collect();
        Self::from_pairs(path, &pairs, method, out, default)
    }

    /// Builds a map from `(line, key, value)` entries (`path` names them in errors).
    pub fn from_pairs(
        path: &str,
        pairs: &[(usize, &str, &str)],
        method: Method,
        out: SmpType,
        default: Option<&str>,
    ) -> Result<Map, RuleError> {
        let mut keys = Patterns::new(method, false);
        let mut values = Vec::with_capacity(pairs.len());
        for (line, k, v) in pairs {
            // (Line 0: an entry the runtime API added, not read from the file.)
            let at = |e: RuleError| match line {
                0 => RuleError::new(format!("{path}: {}", e.message)),
                _ => RuleError::new(format!("{path}:{line}: {}", e.message)),
            };
            keys.add(k, None, values.len() as u32).map_err(at)?;
            values.push(parse_value(v, out).map_err(at)?);
        }
        keys.finish()?;
        let default = default.map(|d| parse_value(d, out)).transpose()?;
        Ok(Map {
            keys,
            values,
            default,
            backrefs: Vec::new(),
        })
    }

    /// Makes this regex map a `map_regm` one: a value's `\1`..`\9` are replaced by the groups
    /// of the key regex that matched.
    pub fn with_backrefs(mut self) -> Result<Map, RuleError> {
        if let Store::Reg { sources, .. } = &self.keys.store {
            let mut res = Vec::with_capacity(sources.len());
            for (pat, _) in sources {
                let re = regex::bytes::RegexBuilder::new(pat)
                    .case_insensitive(self.keys.icase)
                    .unicode(false)
                    .build()
                    .map_err(|e| RuleError::new(format!("invalid regex '{pat}': {e}")))?;
                res.push(re);
            }
            self.backrefs = res;
        }
        Ok(self)
    }

    /// The value for `s`, or the default; `None` when neither.
    pub fn lookup<'m>(&'m self, s: Sample<'_>, ev: &mut Eval) -> Option<Sample<'m>> {
        let hit = self.keys.lookup(s, ev);
        if let (Some(i), false) = (hit, self.backrefs.is_empty()) {
            if let (Some(MapValue::Str(v)), Some(re)) =
                (self.values.get(i as usize), self.backrefs.get(i as usize))
            {
                let b = to_bytes(s, ev)?;
                let (input, out, n) = ev.io(b);
                let caps = re.captures(input)?;
                expand_groups(v, &caps, out);
                return Some(Sample::Str(super::sample::Bytes::Buf(n)));
            }
        }
        let v = match hit {
            Some(i) => self.values.get(i as usize)?,
            None => self.default.as_ref()?,
        };
        Some(match v {
            MapValue::Str(b) => Sample::str(b),
            MapValue::Int(i) => Sample::Sint(*i),
            MapValue::Ip(IpAddr::V4(a)) => Sample::Ipv4(*a),
            MapValue::Ip(IpAddr::V6(a)) => Sample::Ipv6(*a),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::sample::Value;

    fn pats(m: Method, icase: bool, list: &[&str]) -> Patterns {
        let mut p = Patterns::new(m, icase);
        for (i, s) in list.iter().enumerate() {
            p.add(s, None, i as u32).unwrap();
        }
        p.finish().unwrap();
        p
    }

    fn hit(p: &Patterns, s: &str) -> Option<u32> {
        p.lookup(Sample::str(s.as_bytes()), &mut Eval::new())
    }

    /// A few exact strings are compared one by one, more are hashed: both answer alike, with
    /// and without `-i`, duplicates keeping their first index.
    #[test]
    fn few_exact_strings_answer_as_the_hash_set() {
        let few = ["www.example.com", "Example.com", "www.example.com", "GET"];
        let mut many: Vec<String> = few.iter().map(|s| s.to_string()).collect();
        many.extend((0..20).map(|i| format!("filler{i}.example")));
        for icase in [false, true] {
            let fold = |v: &[&str]| -> Vec<String> {
                v.iter()
                    .map(|s| {
                        if icase {
                            s.to_ascii_lowercase()
                        } else {
                            s.to_string()
                        }
                    })
                    .collect()
            };
            let a = fold(&few);
            let b = fold(&many.iter().map(String::as_str).collect::<Vec<_>>());
            let p = pats(
                Method::Str,
                icase,
                &a.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            let q = pats(
                Method::Str,
                icase,
                &b.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            assert!(matches!(p.store, Store::Few(_)));
            assert!(matches!(q.store, Store::Exact(_)));
            for hay in [
                "www.example.com",
                "WWW.Example.COM",
                "example.com",
                "Example.com",
                "get",
                "GET",
                "",
                "www.example.co",
            ] {
                assert_eq!(hit(&p, hay), hit(&q, hay), "{hay} icase={icase}");
            }
            assert_eq!(hit(&p, "www.example.com"), Some(0));
        }
    }

    /// `-m sub` with several patterns: the one-pass search answers as the per-pattern scans
    /// (which `lookup` keeps), with and without `-i`, special characters included.
    #[test]
    fn sub_search_of_several_patterns_agrees_with_the_scans() {
        let needles = ["bot", "Crawler", "a.b", "(x)", "spi+der", "z"];
        let hays = [
            "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
            "Googlebot/2.1",
            "GOOGLEBOT",
            "my CRAWLER",
            "axb",
            "a.b",
            "f(x)g",
            "spi+der",
            "spiider",
            "",
            "Z",
        ];
        for icase in [false, true] {
            let list: Vec<String> = needles
                .iter()
                .map(|n| {
                    if icase {
                        n.to_ascii_lowercase()
                    } else {
                        n.to_string()
                    }
                })
                .collect();
            let refs: Vec<&str> = list.iter().map(String::as_str).collect();
            let p = pats(Method::Sub, icase, &refs);
            assert!(p.any_sub.is_some());
            for h in hays {
                let mut ev = Eval::new();
                let fast = p.matches(Sample::str(h.as_bytes()), &mut ev);
                let slow = p.lookup(Sample::str(h.as_bytes()), &mut ev).is_some();
                assert_eq!(fast, slow, "{h:?} icase={icase}");
            }
        }
        // One pattern, an empty one or a non-ASCII one: the scans.
        assert!(pats(Method::Sub, false, &["bot"]).any_sub.is_none());
        assert!(pats(Method::Sub, false, &["bot", ""]).any_sub.is_none());
        assert!(pats(Method::Sub, true, &["bot", "é"]).any_sub.is_none());
    }

    #[test]
    fn either_byte_is_found_first() {
        let hay = b"0123456789abcdefghijklmnopqrstuvwxyz";
        for i in 0..hay.len() {
            let (a, b) = (hay[i], hay[(i * 7 + 3) % hay.len()]);
            let want = hay.iter().position(|&c| c == a || c == b);
            assert_eq!(find_either(hay, a, b), want);
            assert_eq!(find_either(&hay[i..], a, b), Some(0));
        }
        assert_eq!(find_either(hay, b'!', b'?'), None);
        assert_eq!(find_either(b"", b'!', b'?'), None);
        // A lane that borrows from the one below it is not reported first.
        assert_eq!(find_either(b"\x01\x00\x01\x00zzzz", 0, 0), Some(1));
        // Every length and position, the tail word included (it overlaps the word before).
        for len in 0..40 {
            for at in 0..=len {
                let mut hay = vec![b'x'; len];
                if at < len {
                    hay[at] = b'?';
                }
                let want = (at < len).then_some(at);
                assert_eq!(find_either(&hay, b'?', b'&'), want, "{len} {at}");
                assert_eq!(find_either(&hay, b'&', b'?'), want, "{len} {at}");
            }
        }
    }

    #[test]
    fn substrings_are_found_anywhere() {
        for (hay, needle, want) in [
            ("abc", "", true),
            ("", "a", false),
            ("abc", "abc", true),
            ("abc", "abcd", false),
            ("xxabcabd", "abd", true),
            ("aab", "ab", true),
            ("Mozilla/5.0 (compatible; Googlebot/2.1)", "bot", true),
            ("Mozilla/5.0 (X11; Linux x86_64)", "bot", false),
            ("abab", "b", true),
            ("abab", "bb", false),
        ] {
            assert_eq!(
                contains(hay.as_bytes(), needle.as_bytes(), false),
                want,
                "{hay} {needle}"
            );
            let upper = hay.to_ascii_uppercase();
            assert_eq!(
                contains(upper.as_bytes(), needle.as_bytes(), true),
                want,
                "{upper} {needle}"
            );
            assert_eq!(
                contains(hay.as_bytes(), needle.as_bytes(), true),
                want,
                "{hay} {needle}"
            );
        }
    }

    #[test]
    fn string_methods() {
        assert_eq!(hit(&pats(Method::Str, false, &["/a", "/b"]), "/b"), Some(1));
        assert_eq!(hit(&pats(Method::Str, false, &["/a"]), "/A"), None);
        assert_eq!(hit(&pats(Method::Str, true, &["/A"]), "/a"), Some(0));
        assert_eq!(
            hit(&pats(Method::Beg, false, &["/api", "/"]), "/api/x"),
            Some(0)
        );
        assert_eq!(hit(&pats(Method::End, true, &[".JPG"]), "/x.jpg"), Some(0));
        assert_eq!(
            hit(&pats(Method::Sub, false, &["adm"]), "/x/admin"),
            Some(0)
        );
        assert_eq!(
            hit(&pats(Method::Reg, false, &["^/a", "x$"]), "/bx"),
            Some(1)
        );
        assert_eq!(hit(&pats(Method::Reg, true, &["^/A"]), "/a"), Some(0));
        assert_eq!(
            hit(&pats(Method::Dir, false, &["img"]), "/static/img/a.png"),
            Some(0)
        );
        assert_eq!(
            hit(&pats(Method::Dir, false, &["img"]), "/static/imgs/a.png"),
            None
        );
        assert_eq!(
            hit(
                &pats(Method::Dom, false, &["example.com"]),
                "www.example.com:80"
            ),
            Some(0)
        );
        assert_eq!(
            hit(
                &pats(Method::Dom, false, &["example.com"]),
                "www.myexample.com"
            ),
            None
        );
        assert_eq!(hit(&pats(Method::Len, false, &["3:5"]), "abcd"), Some(0));
    }

    #[test]
    fn int_ranges_and_operators() {
        let p = pats(Method::Int, false, &["1", "10:20", ":0", "100:"]);
        let mut ev = Eval::new();
        for (v, want) in [
            (1, Some(0)),
            (15, Some(1)),
            (-5, Some(2)),
            (1000, Some(3)),
            (50, None),
        ] {
            assert_eq!(p.lookup(Sample::Sint(v), &mut ev), want, "{v}");
        }
        let mut p = Patterns::new(Method::Int, false);
        p.add("2", Some(IntOp::Lt), 0).unwrap();
        assert_eq!(p.lookup(Sample::Sint(1), &mut ev), Some(0));
        assert_eq!(p.lookup(Sample::Sint(2), &mut ev), None);
        assert!(Patterns::new(Method::Int, false)
            .add("foo", None, 0)
            .is_err());
    }

    #[test]
    fn ip_patterns() {
        let p = pats(Method::Ip, false, &["10.0.0.0/8", "::1", "192.168.1.1"]);
        let mut ev = Eval::new();
        let s = |a: &str| match a.parse::<IpAddr>().unwrap() {
            IpAddr::V4(a) => Sample::Ipv4(a),
            IpAddr::V6(a) => Sample::Ipv6(a),
        };
        assert_eq!(p.lookup(s("10.2.3.4"), &mut ev), Some(0));
        assert_eq!(p.lookup(s("::1"), &mut ev), Some(1));
        assert_eq!(p.lookup(s("192.168.1.2"), &mut ev), None);
        // A string sample is cast to an address.
        assert_eq!(hit(&p, "192.168.1.1"), Some(2));
        let e = Patterns::new(Method::Ip, false)
            .add("foo.bar", None, 0)
            .unwrap_err();
        assert_eq!(e.message, "'foo.bar' is not a valid IPv4 or IPv6 address");
    }

    #[test]
    fn maps() {
        let pairs = [(2, "abc", "val1"), (3, "ab", "val2"), (5, "zz*", "val3")];
        let mut ev = Eval::new();
        let m = Map::from_pairs("m.map", &pairs, Method::Str, SmpType::Str, Some("def")).unwrap();
        let got = m.lookup(Sample::str(b"abc"), &mut ev).unwrap();
        assert_eq!(ev.value(got), Value::Str(b"val1"));
        let got = m.lookup(Sample::str(b"zzz"), &mut ev).unwrap();
        assert_eq!(ev.value(got), Value::Str(b"def"));
        let m = Map::from_pairs("m.map", &pairs, Method::Beg, SmpType::Str, None).unwrap();
        let got = m.lookup(Sample::str(b"abcd"), &mut ev).unwrap();
        assert_eq!(ev.value(got), Value::Str(b"val1"));
        assert!(m.lookup(Sample::str(b"x"), &mut ev).is_none());
        let e = Map::from_pairs("m.map", &[(4, "1", "x")], Method::Int, SmpType::Sint, None)
            .unwrap_err();
        assert_eq!(e.message, "m.map:4: map value 'x' is not an integer");
    }

    #[test]
    fn map_lines() {
        assert_eq!(split_map_line("abc  val 1"), ("abc", "val 1"));
        assert_eq!(split_map_line("abc"), ("abc", ""));
    }

    #[test]
    fn regm_values_take_the_groups_of_the_key() {
        let pairs = [(1, r"^([a-z]+)\.(org)$", r"\1_AND_\2"), (2, "^x", r"\1-")];
        let m = Map::from_pairs("t", &pairs, Method::Reg, SmpType::Str, None)
            .unwrap()
            .with_backrefs()
            .unwrap();
        let mut ev = Eval::new();
        let s = m.lookup(Sample::str(b"example.org"), &mut ev).unwrap();
        assert_eq!(ev.value(s), Value::Str(b"example_AND_org"));
        // A group the regex does not have is empty.
        let s = m.lookup(Sample::str(b"xy"), &mut ev).unwrap();
        assert_eq!(ev.value(s), Value::Str(b"-"));
        assert!(m.lookup(Sample::str(b"nope"), &mut ev).is_none());
    }
}
