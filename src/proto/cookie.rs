//! Cookie persistence on the wire (`cookie NAME insert|rewrite|prefix ...`), sans-IO: reading
//! the persistence cookie out of a request's `Cookie` headers and editing them as HAProxy 2.6
//! does, editing a response's `Set-Cookie` headers, and the small encodings the cookie carries
//! (the 30-bit base64 dates of `maxidle`/`maxlife`, XXH64 for `dynamic` cookies).
//!
//! HAProxy edits these headers in place with its own tolerant grammar (RFC 2109 `$` attributes,
//! `,` and `;` as separators, quoted values, spaces around `=` removed); a client or server that
//! relies on the exact bytes sees the same bytes through Bascule, so the edits below follow
//! HAProxy's, byte for byte (checked side by side with haproxy 2.6 in `tests/cookie.rs`). The
//! functions work on a copy of one header value; the caller writes it back (`http::persist`).

/// Separates the server's identifier from the application's value in `prefix` mode.
pub const PREFIX_DELIM: u8 = b'~';
/// Separates the server's identifier from the dates in `insert` mode with `maxidle`/`maxlife`.
pub const DATE_DELIM: u8 = b'|';

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A 30-bit value as 5 base64 characters, most significant first (HAProxy's `s30tob64`).
pub fn s30_to_b64(v: u32) -> [u8; 5] {
    let mut out = [0u8; 5];
    for (i, c) in out.iter_mut().enumerate() {
        *c = B64[((v >> (24 - 6 * i)) & 0x3f) as usize];
    }
    out
}

/// The 30-bit value of 5 base64 characters, `None` if one is not base64 (padding included).
pub fn b64_to_s30(s: &[u8]) -> Option<u32> {
    let mut out = 0u32;
    for &c in s.get(..5)? {
        let d = B64.iter().position(|&b| b == c)? as u32;
        out = (out << 6) | d;
    }
    Some(out)
}

/// XXH64 of `data` (the hash HAProxy's `dynamic` cookies are made of).
pub fn xxh64(data: &[u8], seed: u64) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    const P5: u64 = 0x27D4_EB2F_1656_67C5;
    fn round(acc: u64, input: u64) -> u64 {
        acc.wrapping_add(input.wrapping_mul(P2))
            .rotate_left(31)
            .wrapping_mul(P1)
    }
    fn merge(acc: u64, val: u64) -> u64 {
        (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
    }
    let u64_at = |p: &[u8]| u64::from_le_bytes(p[..8].try_into().unwrap_or([0; 8]));
    let u32_at = |p: &[u8]| u32::from_le_bytes(p[..4].try_into().unwrap_or([0; 4]));
    let mut rest = data;
    let mut h = if data.len() >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 32 {
            for (k, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, u64_at(&rest[8 * k..]));
            }
            rest = &rest[32..];
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for acc in v {
            h = merge(h, acc);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(data.len() as u64);
    while rest.len() >= 8 {
        h ^= round(0, u64_at(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        h ^= u64::from(u32_at(rest)).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}

/// What the client's cookie said (the third character of `%tsc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReqState {
    /// `N`: no persistence cookie.
    #[default]
    None,
    /// `I`: it names no server.
    Invalid,
    /// `D`: it names a server that is down.
    Down,
    /// `V`: it names a usable server, which was chosen.
    Valid,
    /// `E`: its last visit is older than `maxidle`.
    Expired,
    /// `O`: its first visit is older than `maxlife`.
    Old,
    /// `U`: persistence was ignored (`ignore-persist`) or the server already chosen.
    Unused,
}

impl ReqState {
    pub fn letter(self) -> u8 {
        match self {
            ReqState::None => b'N',
            ReqState::Invalid => b'I',
            ReqState::Down => b'D',
            ReqState::Valid => b'V',
            ReqState::Expired => b'E',
            ReqState::Old => b'O',
            ReqState::Unused => b'U',
        }
    }
}

/// What was done to the response's persistence cookie (the fourth character of `%tsc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResState {
    /// `N`: nothing.
    #[default]
    None,
    /// `P`: the server's cookie passed through untouched.
    Passed,
    /// `D`: the server's cookie was deleted.
    Deleted,
    /// `I`: a cookie was inserted.
    Inserted,
    /// `R`: the server's cookie was rewritten (or prefixed).
    Rewritten,
    /// `U`: the client's cookie was refreshed (its dates).
    Updated,
}

impl ResState {
    pub fn letter(self) -> u8 {
        match self {
            ResState::None => b'N',
            ResState::Passed => b'P',
            ResState::Deleted => b'D',
            ResState::Inserted => b'I',
            ResState::Rewritten => b'R',
            ResState::Updated => b'U',
        }
    }
}

/// What the request scan needs from the configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReqRules<'a> {
    /// The persistence cookie's name, when the backend has one.
    pub name: Option<&'a [u8]>,
    pub prefix: bool,
    /// `insert indirect`: the persistence cookie is removed before the request goes out.
    pub strip: bool,
    pub maxidle: u32,
    pub maxlife: u32,
    /// `capture cookie NAME len N` of the frontend.
    pub capture: Option<(&'a [u8], usize)>,
    /// The wall clock, in seconds since the epoch.
    pub now: u32,
    /// `ignore-persist` matched.
    pub ignore: bool,
}

/// The server a cookie value leads to, as the caller's lookup says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// This server, usable (`true`) or down but persisted to (`option persist`, `force-persist`).
    Assign(usize, bool),
    /// Servers carry this value but none may take the request.
    Down,
    /// No server carries this value.
    Unknown,
}

/// What the request scan learnt, over all of a request's `Cookie` headers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReqScan {
    pub state: ReqState,
    /// The server the cookie assigned (also set by the caller when `use-server` chose one).
    pub assigned: Option<usize>,
    /// The assigned server is down (only with `option persist` or `force-persist`).
    pub assigned_down: bool,
    /// Dates the cookie carried (seconds, multiples of 4; 0: none).
    pub last_date: u32,
    pub first_date: u32,
    /// Where the captured `name=value` ends in the caller's capture buffer (`None`: nothing).
    pub captured: bool,
}

fn sp(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// The end of a cookie value starting at `from`: the first unquoted `,` or `;`, or `end`.
fn value_end(v: &[u8], from: usize, end: usize) -> usize {
    let (mut quoted, mut pair) = (false, false);
    for (i, &c) in v.iter().enumerate().take(end).skip(from) {
        if pair {
            pair = false;
        } else if quoted {
            if c == b'\\' {
                pair = true;
            } else if c == b'"' {
                quoted = false;
            }
        } else if c == b'"' {
            quoted = true;
        } else if c == b',' || c == b';' {
            return i;
        }
    }
    end
}

/// Removes the cookies from `from` (the delimiter before them, or 0) up to `next` (the
/// delimiter before the cookie kept), keeping one delimiter and a space between what is left,
/// as HAProxy does. Returns where the kept cookie's delimiter now is and the length change.
fn delete_values(v: &mut Vec<u8>, from: usize, next: usize) -> (usize, isize) {
    let end = v.len();
    let (mut prev, mut next) = (from, next);
    if prev == 0 {
        if next < end {
            next += 1;
        }
        while next < end && sp(v[next]) {
            next += 1;
        }
    } else {
        while prev > 0 && sp(v[prev - 1]) {
            prev -= 1;
        }
        let new_from = prev;
        if next < end {
            v[prev] = v[next];
            prev += 1;
            next += 1;
            if prev + 1 < next {
                v[prev] = b' ';
                prev += 1;
            }
            while next < end && sp(v[next]) {
                next += 1;
            }
        }
        v.drain(prev..next);
        return (new_from, prev as isize - next as isize);
    }
    v.drain(prev..next);
    (from, prev as isize - next as isize)
}

/// One cookie's positions in a header value (see [`parse_one`]).
struct Parts {
    att_beg: usize,
    att_end: usize,
    equal: usize,
    val_beg: usize,
    val_end: usize,
    next: usize,
}

/// Finds the cookie that starts after `prev` (at `prev` for the first one); `comma` makes `,`
/// end a name too (request `Cookie` headers).
fn parse_one(v: &[u8], prev: usize, first: bool, comma: bool) -> Parts {
    let len = v.len();
    let mut att_beg = if first { prev } else { prev + 1 };
    while att_beg < len && sp(v[att_beg]) {
        att_beg += 1;
    }
    let (mut equal, mut att_end) = (att_beg, att_beg);
    while equal < len {
        let c = v[equal];
        if c == b'=' || c == b';' || (comma && c == b',') {
            break;
        }
        equal += 1;
        if !sp(c) {
            att_end = equal;
        }
    }
    if equal < len && v[equal] == b'=' {
        let mut val_beg = equal + 1;
        while val_beg < len && sp(v[val_beg]) {
            val_beg += 1;
        }
        let next = value_end(v, val_beg, len);
        let mut val_end = next;
        while val_end > val_beg && sp(v[val_end - 1]) {
            val_end -= 1;
        }
        Parts {
            att_beg,
            att_end,
            equal,
            val_beg,
            val_end,
            next,
        }
    } else {
        Parts {
            att_beg,
            att_end,
            equal,
            val_beg: equal,
            val_end: equal,
            next: equal,
        }
    }
}

/// Removes the spaces around a cookie's `=`, as HAProxy does before anything else (captures
/// and rewrites see `name=value`).
fn strip_equal(v: &mut Vec<u8>, p: &mut Parts) {
    if p.att_end == p.equal && p.val_beg == p.equal + 1 {
        return;
    }
    let after = p.val_beg - (p.equal + 1);
    v.drain(p.equal + 1..p.val_beg);
    let before = p.equal - p.att_end;
    v.drain(p.att_end..p.equal);
    let removed = before + after;
    p.equal = p.att_end;
    p.val_beg = p.equal + 1;
    p.val_end -= removed;
    p.next -= removed;
}

/// Captures `name=value` into `cap` when it is the first cookie starting with the captured
/// name.
fn capture(v: &[u8], p: &Parts, rule: Option<(&[u8], usize)>, done: &mut bool, cap: &mut Vec<u8>) {
    let Some((name, len)) = rule else { return };
    if *done || p.val_end - p.att_beg < name.len() || !v[p.att_beg..].starts_with(name) {
        return;
    }
    cap.clear();
    let end = p.val_end.min(p.att_beg + len);
    cap.extend_from_slice(&v[p.att_beg..end]);
    *done = true;
}

/// What became of a header after an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Unchanged,
    Changed,
    Removed,
}

/// Scans one `Cookie` header value `v` (edited in place) for the persistence cookie: its
/// server (through `lookup`), its dates and state, the `capture cookie` text (into `cap`), and
/// the edits HAProxy makes (the `SRV~` of `prefix` mode removed, the cookie itself removed in
/// `insert indirect` mode, spaces around `=` removed). `scan` carries over from one header to
/// the next.
pub fn scan_request_header(
    v: &mut Vec<u8>,
    rules: &ReqRules<'_>,
    scan: &mut ReqScan,
    cap: &mut Vec<u8>,
    mut lookup: impl FnMut(&[u8]) -> Lookup,
) -> Fate {
    let orig_len = v.len();
    let mut changed = false;
    let mut del_from: Option<usize> = None;
    let mut preserve = false;
    let mut prev = 0;
    let mut first = true;
    while prev < v.len() {
        let mut p = parse_one(v, prev, first, true);
        first = false;
        if p.att_beg < v.len() && v[p.att_beg] == b'$' {
            prev = p.next;
            continue;
        }
        if p.equal == p.next {
            // Not a cookie (no `=`): kept, and what was marked for deletion before it goes.
            preserve = true;
            if let Some(df) = del_from.take() {
                let (_, delta) = delete_values(v, df, prev);
                p.next = (p.next as isize + delta) as usize;
                changed = true;
            }
            prev = p.next;
            continue;
        }
        let before = v.len();
        strip_equal(v, &mut p);
        changed |= v.len() != before;
        capture(v, &p, rules.capture, &mut scan.captured, cap);
        let ours = rules.name.is_some_and(|n| &v[p.att_beg..p.att_end] == n);
        if ours {
            let mut delim;
            if rules.prefix {
                delim = v[p.val_beg..p.val_end]
                    .iter()
                    .position(|&c| c == PREFIX_DELIM)
                    .map_or(p.val_end, |i| p.val_beg + i);
            } else {
                delim = p.val_end;
                if let Some(i) = v[p.val_beg..p.val_end]
                    .iter()
                    .position(|&c| c == DATE_DELIM)
                {
                    delim = p.val_beg + i;
                    let bar = delim + 1;
                    if p.val_end - bar >= 5 {
                        if let Some(d) = b64_to_s30(&v[bar..]).filter(|&d| d > 0) {
                            scan.last_date = d.wrapping_shl(2);
                        }
                    }
                    if let Some(j) = v[bar..p.val_end].iter().position(|&c| c == DATE_DELIM) {
                        let bar2 = bar + j;
                        if p.val_end - bar2 > 5 {
                            if let Some(d) = b64_to_s30(&v[bar2 + 1..]).filter(|&d| d > 0) {
                                scan.first_date = d.wrapping_shl(2);
                            }
                        }
                    }
                }
            }
            let now = i64::from(rules.now);
            let too_far = |d: u32, max: u32| {
                (now - i64::from(d)) as i32 > max as i32 || (i64::from(d) - now) as i32 > 86400
            };
            if scan.first_date != 0 && rules.maxlife != 0 && too_far(scan.first_date, rules.maxlife)
            {
                scan.state = ReqState::Old;
                delim = p.val_beg;
                scan.first_date = 0;
                scan.last_date = 0;
            } else if scan.last_date != 0
                && rules.maxidle != 0
                && too_far(scan.last_date, rules.maxidle)
            {
                scan.state = ReqState::Expired;
                delim = p.val_beg;
                scan.first_date = 0;
                scan.last_date = 0;
            }
            let skip = delim == p.val_beg || rules.ignore || scan.assigned.is_some();
            let mut found = false;
            if !skip {
                match lookup(&v[p.val_beg..delim]) {
                    Lookup::Assign(server, up) => {
                        scan.state = if up { ReqState::Valid } else { ReqState::Down };
                        scan.assigned = Some(server);
                        scan.assigned_down = !up;
                        found = true;
                    }
                    Lookup::Down => scan.state = ReqState::Down,
                    Lookup::Unknown => {}
                }
            }
            if !found && scan.state == ReqState::None {
                scan.state = if rules.ignore || scan.assigned.is_some() {
                    ReqState::Unused
                } else {
                    ReqState::Invalid
                };
            }
            if rules.prefix && delim != p.val_end {
                v.drain(p.val_beg..delim + 1);
                let d = delim + 1 - p.val_beg;
                p.next -= d;
                del_from = None;
                preserve = true;
                changed = true;
            } else if del_from.is_none() && rules.strip {
                del_from = Some(prev);
            }
        } else {
            preserve = true;
            if let Some(df) = del_from.take() {
                let (_, delta) = delete_values(v, df, prev);
                p.next = (p.next as isize + delta) as usize;
                changed = true;
            }
        }
        prev = p.next;
    }
    if let Some(df) = del_from {
        if preserve {
            v.truncate(df);
        } else {
            v.clear();
        }
    }
    if v.len() != orig_len || changed {
        if v.is_empty() && orig_len != 0 {
            Fate::Removed
        } else {
            Fate::Changed
        }
    } else {
        Fate::Unchanged
    }
}

/// What the response side knows of the transaction.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResRules<'a> {
    pub name: Option<&'a [u8]>,
    pub insert: bool,
    pub indirect: bool,
    pub rewrite: bool,
    pub prefix: bool,
    pub preserve: bool,
    /// The server's cookie value (the response came from a server).
    pub server_cookie: Option<&'a [u8]>,
    /// The server was chosen by the client's cookie (or `use-server`): HAProxy's `SF_DIRECT`.
    pub direct: bool,
    pub ignore: bool,
    pub capture: Option<(&'a [u8], usize)>,
}

/// The end of a header value element starting at `from`: the first unquoted `,`, or `end`.
fn element_end(v: &[u8], from: usize, end: usize) -> usize {
    let (mut quoted, mut pair) = (false, false);
    for (i, &c) in v.iter().enumerate().take(end).skip(from) {
        if pair {
            pair = false;
        } else if quoted {
            if c == b'\\' {
                pair = true;
            } else if c == b'"' {
                quoted = false;
            }
        } else if c == b'"' {
            quoted = true;
        } else if c == b',' {
            return i;
        }
    }
    end
}

/// Scans one `Set-Cookie` header value `v` (one cookie per header: an `Expires` date may hold
/// a comma), or with `cookie2` one `Set-Cookie2` value (cookies separated by commas), edited
/// in place: the persistence cookie is left alone (`preserve`), deleted (`insert`, or
/// `indirect` on a direct access), rewritten to the server's value (`rewrite`) or prefixed
/// with it (`prefix`). `found`: the server sent the persistence cookie; `captured`/`cap`:
/// `capture cookie`.
#[allow(clippy::too_many_arguments)]
pub fn scan_set_cookie(
    v: &mut Vec<u8>,
    cookie2: bool,
    rules: &ResRules<'_>,
    state: &mut ResState,
    found: &mut bool,
    captured: &mut bool,
    cap: &mut Vec<u8>,
) -> Fate {
    let mut fate = Fate::Unchanged;
    let mut prev = 0;
    let mut first = true;
    while prev < v.len() {
        let mut p = parse_one(v, prev, first, cookie2);
        first = false;
        if p.next < v.len() {
            // Past the value: the attributes, up to the next cookie (`Set-Cookie2`) or the end.
            p.next = if cookie2 {
                element_end(v, p.next, v.len())
            } else {
                v.len()
            };
        }
        if p.equal == p.val_end {
            prev = p.next;
            continue;
        }
        let before = v.len();
        strip_equal(v, &mut p);
        if v.len() != before {
            fate = Fate::Changed;
        }
        capture(v, &p, rules.capture, captured, cap);
        let ours = !rules.ignore && rules.name.is_some_and(|n| &v[p.att_beg..p.att_end] == n);
        if ours {
            *found = true;
            *state = ResState::Passed;
            if rules.preserve {
                // The server's own cookie stays as it is.
            } else if rules.insert || (rules.direct && rules.indirect) {
                *state = ResState::Deleted;
                if prev == 0 && p.next == v.len() {
                    return Fate::Removed;
                }
                let (at, _) = delete_values(v, prev, p.next);
                p.next = at;
                fate = Fate::Changed;
            } else if let Some(c) = rules.server_cookie {
                if rules.rewrite {
                    let old = p.val_end - p.val_beg;
                    v.splice(p.val_beg..p.val_end, c.iter().copied());
                    p.next = p.next + c.len() - old;
                    *state = ResState::Rewritten;
                    fate = Fate::Changed;
                } else if rules.prefix {
                    let ins = c.iter().copied().chain(std::iter::once(PREFIX_DELIM));
                    v.splice(p.val_beg..p.val_beg, ins);
                    p.next += c.len() + 1;
                    *state = ResState::Rewritten;
                    fate = Fate::Changed;
                }
            }
        }
        prev = p.next;
    }
    fate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_in_five_characters() {
        assert_eq!(&s30_to_b64(0), b"AAAAA");
        for v in [1u32, 63, 64, 441_000_000, (1 << 30) - 1] {
            assert_eq!(b64_to_s30(&s30_to_b64(v)), Some(v));
        }
        assert_eq!(b64_to_s30(b"AA=AA"), None);
        assert_eq!(b64_to_s30(b"AAA"), None);
    }

    #[test]
    fn xxh64_matches_the_reference_vectors() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        // Past one 32-byte stripe.
        let long = b"Nobody inspects the spammish repetition";
        assert_eq!(xxh64(long, 0), 0xFBCE_A83C_8A37_8BF1);
    }

    fn scan(header: &str, rules: ReqRules<'_>) -> (String, Fate, ReqScan) {
        let mut v = header.as_bytes().to_vec();
        let mut s = ReqScan::default();
        let mut cap = Vec::new();
        let fate = scan_request_header(&mut v, &rules, &mut s, &mut cap, |val| match val {
            b"s1" => Lookup::Assign(0, true),
            b"s2" => Lookup::Down,
            _ => Lookup::Unknown,
        });
        (String::from_utf8(v).unwrap(), fate, s)
    }

    #[test]
    fn insert_indirect_removes_the_cookie_wherever_it_is() {
        let r = ReqRules {
            name: Some(b"SRV"),
            strip: true,
            ..Default::default()
        };
        let (v, f, s) = scan("SRV=s1", r);
        assert_eq!(
            (v.as_str(), f, s.state, s.assigned),
            ("", Fate::Removed, ReqState::Valid, Some(0))
        );
        assert_eq!(scan("a=1; SRV=s1", r).0, "a=1");
        assert_eq!(scan("SRV=s1; a=1", r).0, "a=1");
        assert_eq!(scan("a=1; SRV=s1; b=2", r).0, "a=1; b=2");
        // HAProxy leaves a space after the delimiter it keeps.
        assert_eq!(scan("a=1;SRV=s1;b=2", r).0, "a=1; b=2");
        assert_eq!(scan("a = 1 ; b=2", r).0, "a=1 ; b=2");
        let (v, f, s) = scan("a=1; SRV=s2", r);
        assert_eq!(
            (v.as_str(), f, s.state),
            ("a=1", Fate::Changed, ReqState::Down)
        );
        assert_eq!(scan("SRV=zz", r).2.state, ReqState::Invalid);
        assert_eq!(scan("a=1", r).1, Fate::Unchanged);
    }

    #[test]
    fn prefix_mode_removes_the_server_part() {
        let r = ReqRules {
            name: Some(b"JSESSIONID"),
            prefix: true,
            ..Default::default()
        };
        let (v, _, s) = scan("x=1; JSESSIONID=s1~abc", r);
        assert_eq!(
            (v.as_str(), s.state),
            ("x=1; JSESSIONID=abc", ReqState::Valid)
        );
        let (v, f, s) = scan("JSESSIONID=abc", r);
        assert_eq!(
            (v.as_str(), f, s.state),
            ("JSESSIONID=abc", Fate::Unchanged, ReqState::Invalid)
        );
    }

    #[test]
    fn dates_expire_cookies() {
        let now = 1_700_000_000u32;
        let old = s30_to_b64((now - 100) >> 2);
        let header = format!("SRV=s1|{}", std::str::from_utf8(&old).unwrap());
        let r = ReqRules {
            name: Some(b"SRV"),
            maxidle: 60,
            now,
            ..Default::default()
        };
        let (_, _, s) = scan(&header, r);
        assert_eq!((s.state, s.assigned), (ReqState::Expired, None));
        let r = ReqRules { maxidle: 600, ..r };
        let (_, _, s) = scan(&header, r);
        assert_eq!((s.state, s.last_date), (ReqState::Valid, (now - 100) & !3));
    }

    #[test]
    fn arbitrary_headers_never_panic() {
        // Every string of a small alphabet full of delimiters, in every mode: the scanners
        // must neither panic nor loop, and edits keep the value within its bytes.
        let alphabet = b"SRV=; ,|~\"\\$aA ";
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            let mut x = seed;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.rotate_left(5).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    alphabet[(x >> 59) as usize % alphabet.len()]
                })
                .collect();
            for mode in 0..4 {
                let r = ReqRules {
                    name: Some(b"SRV"),
                    prefix: mode == 1,
                    strip: mode == 2,
                    maxidle: if mode == 3 { 10 } else { 0 },
                    maxlife: if mode == 3 { 10 } else { 0 },
                    capture: Some((b"S", 4)),
                    now: 1_700_000_000,
                    ignore: false,
                };
                let mut v = bytes.clone();
                let mut scan = ReqScan::default();
                let mut cap = Vec::new();
                scan_request_header(&mut v, &r, &mut scan, &mut cap, |_| Lookup::Assign(0, true));
                assert!(v.len() <= bytes.len());
                let rr = ResRules {
                    name: Some(b"SRV"),
                    insert: mode == 2,
                    indirect: mode == 2,
                    rewrite: mode == 0,
                    prefix: mode == 1,
                    server_cookie: Some(b"s1"),
                    direct: true,
                    capture: Some((b"S", 4)),
                    ..Default::default()
                };
                for cookie2 in [false, true] {
                    let mut v = bytes.clone();
                    let (mut st, mut f, mut c) = (ResState::None, false, false);
                    scan_set_cookie(&mut v, cookie2, &rr, &mut st, &mut f, &mut c, &mut cap);
                }
            }
        }
    }

    #[test]
    fn set_cookie_edits() {
        let run = |h: &str, r: ResRules<'_>| {
            let mut v = h.as_bytes().to_vec();
            let (mut st, mut found, mut c) = (ResState::None, false, false);
            let f = scan_set_cookie(
                &mut v,
                false,
                &r,
                &mut st,
                &mut found,
                &mut c,
                &mut Vec::new(),
            );
            (String::from_utf8(v).unwrap(), f, st)
        };
        let rw = ResRules {
            name: Some(b"SRV"),
            rewrite: true,
            server_cookie: Some(b"s1"),
            ..Default::default()
        };
        assert_eq!(
            run("SRV=app; path=/", rw),
            ("SRV=s1; path=/".into(), Fate::Changed, ResState::Rewritten)
        );
        let pfx = ResRules {
            rewrite: false,
            prefix: true,
            ..rw
        };
        assert_eq!(run("SRV = app", pfx).0, "SRV=s1~app");
        let ins = ResRules {
            rewrite: false,
            insert: true,
            ..rw
        };
        assert_eq!(run("SRV=x", ins).1, Fate::Removed);
        let keep = ResRules {
            preserve: true,
            ..ins
        };
        assert_eq!(run("SRV=x", keep).2, ResState::Passed);
        assert_eq!(run("other=x", ins).2, ResState::None);
    }
}
