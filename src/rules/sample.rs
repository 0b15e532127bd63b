//! Samples: the typed values fetches produce and converters transform, and HAProxy's implicit
//! casts between their types.
//!
//! Why this shape: evaluating a compiled rule must not allocate. A sample's bytes are therefore
//! either borrowed from the request (`Bytes::Ext`, e.g. a header value inside the session's
//! read buffer) or held in one of two scratch buffers of an [`Eval`] that the caller owns and
//! reuses (`Bytes::Buf`): a converter that makes new bytes reads its input from one buffer and
//! writes into the other, so a chain ping-pongs between them and their capacity is reused from
//! one request to the next. A sample names its buffer by index rather than borrowing it, so the
//! chain can keep a sample while writing the next one; [`Eval::value`] turns it into a
//! [`Value`] whose bytes are plain slices.
//!
//! The cast table is HAProxy's (`doc/configuration.txt` §7.3 and observed behaviour): `str`
//! to `sint` reads leading digits (`"12abc"` is 12, `"abc"` is 0, `""` fails), `bool`/`sint`
//! to `str` print decimals, `sint` to `ipv4` takes the low 32 bits, `ipv6` to `ipv4` works only
//! for v4-mapped addresses, `ipv4`/`ipv6`/`sint` to `bin` give network-order bytes.

use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A sample's type, as HAProxy names them. `Addr` is "ipv4 or ipv6" (what `src` returns) and
/// `Any` accepts everything; both only appear in type signatures, never in a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SmpType {
    Any,
    Bool,
    Sint,
    Addr,
    Ipv4,
    Ipv6,
    Str,
    Bin,
    Meth,
}

impl SmpType {
    /// HAProxy's name for the type, used in messages.
    pub fn name(self) -> &'static str {
        match self {
            SmpType::Any => "any",
            SmpType::Bool => "boolean",
            SmpType::Sint => "integer",
            SmpType::Addr => "address",
            SmpType::Ipv4 => "ipv4",
            SmpType::Ipv6 => "ipv6",
            SmpType::Str => "string",
            SmpType::Bin => "binary",
            SmpType::Meth => "method",
        }
    }
}

/// Whether a value of type `from` can be given where `to` is expected (HAProxy's cast table).
/// `Addr` as a source is castable when either address family is.
pub fn can_cast(from: SmpType, to: SmpType) -> bool {
    use SmpType::*;
    if from == to || to == Any || from == Any {
        return true;
    }
    match from {
        Addr => can_cast(Ipv4, to) || can_cast(Ipv6, to),
        Bool => matches!(to, Sint | Str),
        Sint => matches!(to, Bool | Addr | Ipv4 | Ipv6 | Str | Bin),
        Ipv4 => matches!(to, Sint | Addr | Ipv6 | Str | Bin),
        Ipv6 => matches!(to, Addr | Ipv4 | Str | Bin),
        Str => true,
        Bin => matches!(to, Str | Meth),
        Meth => matches!(to, Str | Bin),
        Any => true,
    }
}

/// Where a sample's bytes are: borrowed from the request or compiled rule, or in scratch
/// buffer `n` of the [`Eval`] in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bytes<'a> {
    Ext(&'a [u8]),
    Buf(u8),
}

/// A sample during evaluation (see the module doc for `Bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample<'a> {
    Bool(bool),
    Sint(i64),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    Str(Bytes<'a>),
    Bin(Bytes<'a>),
    Meth(Bytes<'a>),
}

impl<'a> Sample<'a> {
    pub fn ty(&self) -> SmpType {
        match self {
            Sample::Bool(_) => SmpType::Bool,
            Sample::Sint(_) => SmpType::Sint,
            Sample::Ipv4(_) => SmpType::Ipv4,
            Sample::Ipv6(_) => SmpType::Ipv6,
            Sample::Str(_) => SmpType::Str,
            Sample::Bin(_) => SmpType::Bin,
            Sample::Meth(_) => SmpType::Meth,
        }
    }
    /// A string sample borrowing `b`.
    pub fn str(b: &'a [u8]) -> Self {
        Sample::Str(Bytes::Ext(b))
    }
    fn bytes(&self) -> Option<Bytes<'a>> {
        match *self {
            Sample::Str(b) | Sample::Bin(b) | Sample::Meth(b) => Some(b),
            _ => None,
        }
    }
}

/// A sample with its bytes resolved: what the runtime reads after an evaluation (a header
/// value to set, a backend name) and what it stores in a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'b> {
    Bool(bool),
    Sint(i64),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    Str(&'b [u8]),
    Bin(&'b [u8]),
    Meth(&'b [u8]),
}

impl<'b> Value<'b> {
    /// The value as a sample borrowing the same bytes.
    pub fn sample(self) -> Sample<'b> {
        match self {
            Value::Bool(b) => Sample::Bool(b),
            Value::Sint(i) => Sample::Sint(i),
            Value::Ipv4(a) => Sample::Ipv4(a),
            Value::Ipv6(a) => Sample::Ipv6(a),
            Value::Str(b) => Sample::Str(Bytes::Ext(b)),
            Value::Bin(b) => Sample::Bin(Bytes::Ext(b)),
            Value::Meth(b) => Sample::Meth(Bytes::Ext(b)),
        }
    }
    /// The bytes of a string, binary or method value.
    pub fn as_bytes(&self) -> Option<&'b [u8]> {
        match *self {
            Value::Str(b) | Value::Bin(b) | Value::Meth(b) => Some(b),
            _ => None,
        }
    }
}

/// The scratch space of evaluations: the caller owns one (per worker or per session) and
/// passes it to every evaluation; buffers are cleared, never freed, so after the first
/// requests an evaluation allocates nothing.
#[derive(Debug, Default)]
pub struct Eval {
    bufs: [Vec<u8>; 2],
    /// A variable read by a converter argument (`concat`, `strcmp`, `add(txn.x)`).
    pub(crate) var: Vec<u8>,
    /// A sample folded to lower case for `-i` matching.
    pub(crate) fold: Vec<u8>,
    /// Capture positions for the regexes of actions (`replace-path`, `replace-header`...), one
    /// per pattern, made the first time each runs: `Regex::captures` allocates every time.
    locs: Vec<(Box<str>, regex::bytes::CaptureLocations)>,
    /// Values of sample expressions already evaluated while an `http-request` list runs.
    pub memo: super::memo::Memo,
    /// Set by a protocol converter over buffered bytes (`fix_*`, `mqtt_*`) that gave no value
    /// because the message is incomplete (haproxy's `SMP_F_MAY_CHANGE`): an ACL on it stays
    /// undecided while more bytes may come. Whoever reads it clears it first.
    pub(crate) need_more: bool,
}

impl Eval {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `re` on `hay`: the positions of its groups if it matches. Allocates only the first
    /// time a pattern is seen (at most 64 are kept, for the rule lists of one process).
    pub fn captures(
        &mut self,
        re: &regex::bytes::Regex,
        hay: &[u8],
    ) -> Option<&regex::bytes::CaptureLocations> {
        let i = match self.locs.iter().position(|(s, _)| **s == *re.as_str()) {
            Some(i) => i,
            None => {
                if self.locs.len() >= 64 {
                    self.locs.remove(0);
                }
                self.locs.push((re.as_str().into(), re.capture_locations()));
                self.locs.len() - 1
            }
        };
        let locs = &mut self.locs[i].1;
        re.captures_read(locs, hay)?;
        Some(locs)
    }

    /// Records the value of memoized expression `id` (see [`super::memo`]).
    pub(crate) fn memo_put(&mut self, id: u32, s: Option<Sample<'_>>) {
        use super::memo::Entry;
        let memo = &mut self.memo;
        let mut bytes = |kind: u8, b: Bytes<'_>| {
            let v: &[u8] = match b {
                Bytes::Ext(v) => v,
                Bytes::Buf(i) => &self.bufs[i as usize],
            };
            let start = memo.bytes.len() as u32;
            memo.bytes.extend_from_slice(v);
            Entry::Bytes(kind, start, memo.bytes.len() as u32)
        };
        let e = match s {
            None => Entry::None,
            Some(Sample::Bool(b)) => Entry::Bool(b),
            Some(Sample::Sint(i)) => Entry::Sint(i),
            Some(Sample::Ipv4(a)) => Entry::Ipv4(a),
            Some(Sample::Ipv6(a)) => Entry::Ipv6(a),
            Some(Sample::Str(b)) => bytes(0, b),
            Some(Sample::Bin(b)) => bytes(1, b),
            Some(Sample::Meth(b)) => bytes(2, b),
        };
        memo.entries.push((id, e));
    }

    /// A memoized value as a sample (its bytes copied to a scratch buffer).
    pub(crate) fn memo_sample<'s>(&mut self, e: super::memo::Entry) -> Option<Sample<'s>> {
        use super::memo::Entry;
        Some(match e {
            Entry::None => return None,
            Entry::Bool(b) => Sample::Bool(b),
            Entry::Sint(i) => Sample::Sint(i),
            Entry::Ipv4(a) => Sample::Ipv4(a),
            Entry::Ipv6(a) => Sample::Ipv6(a),
            Entry::Bytes(kind, start, end) => {
                let out = &mut self.bufs[0];
                out.clear();
                out.extend_from_slice(&self.memo.bytes[start as usize..end as usize]);
                let b = Bytes::Buf(0);
                match kind {
                    0 => Sample::Str(b),
                    1 => Sample::Bin(b),
                    _ => Sample::Meth(b),
                }
            }
        })
    }

    /// The bytes a sample names.
    pub fn get<'s>(&'s self, b: Bytes<'s>) -> &'s [u8] {
        match b {
            Bytes::Ext(s) => s,
            Bytes::Buf(i) => &self.bufs[i as usize],
        }
    }

    /// `b` cut before its first NUL byte: HAProxy's binary-to-string cast (observed with
    /// haproxy 2.6.12: `bin(61006263),length` is 1, and reg-test sample_fetches/hashes).
    fn until_nul<'s>(&mut self, b: Bytes<'s>) -> Bytes<'s> {
        let nul = |s: &[u8]| s.iter().position(|&c| c == 0);
        match b {
            Bytes::Ext(s) => Bytes::Ext(nul(s).map_or(s, |p| &s[..p])),
            Bytes::Buf(i) => {
                let buf = &mut self.bufs[i as usize];
                if let Some(p) = nul(buf) {
                    buf.truncate(p);
                }
                b
            }
        }
    }

    /// `s` with its bytes resolved.
    pub fn value<'s>(&'s self, s: Sample<'s>) -> Value<'s> {
        match s {
            Sample::Bool(b) => Value::Bool(b),
            Sample::Sint(i) => Value::Sint(i),
            Sample::Ipv4(a) => Value::Ipv4(a),
            Sample::Ipv6(a) => Value::Ipv6(a),
            Sample::Str(b) => Value::Str(self.get(b)),
            Sample::Bin(b) => Value::Bin(self.get(b)),
            Sample::Meth(b) => Value::Meth(self.get(b)),
        }
    }

    /// A cleared buffer that `input` does not use, with its index.
    pub(crate) fn out_for(&mut self, input: Option<Bytes<'_>>) -> (u8, &mut Vec<u8>) {
        let i = match input {
            Some(Bytes::Buf(0)) => 1,
            _ => 0,
        };
        let b = &mut self.bufs[i as usize];
        b.clear();
        (i, b)
    }

    /// The bytes of `input` and a cleared other buffer to write the output into; returns the
    /// output's index too.
    pub(crate) fn io<'s>(&'s mut self, input: Bytes<'s>) -> (&'s [u8], &'s mut Vec<u8>, u8) {
        let [a, b] = &mut self.bufs;
        match input {
            Bytes::Ext(s) => {
                a.clear();
                (s, a, 0)
            }
            Bytes::Buf(0) => {
                b.clear();
                (a, b, 1)
            }
            Bytes::Buf(_) => {
                a.clear();
                (b, a, 0)
            }
        }
    }

    /// Both scratch buffers and the variable buffer, for converters that read a variable.
    pub(crate) fn io_var<'s>(
        &'s mut self,
        input: Bytes<'s>,
    ) -> (&'s [u8], &'s mut Vec<u8>, u8, &'s mut Vec<u8>) {
        let var = &mut self.var;
        let [a, b] = &mut self.bufs;
        match input {
            Bytes::Ext(s) => {
                a.clear();
                (s, a, 0, var)
            }
            Bytes::Buf(0) => {
                b.clear();
                (a, b, 1, var)
            }
            Bytes::Buf(_) => {
                a.clear();
                (b, a, 0, var)
            }
        }
    }
}

/// HAProxy's string-to-integer cast: an optional sign then leading digits; anything after is
/// ignored, no digit gives 0, an empty string fails.
pub fn str_to_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for &c in digits.iter().take_while(|c| c.is_ascii_digit()) {
        v = v.wrapping_mul(10).wrapping_add((c - b'0') as i64);
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

fn parse_ipv4(s: &[u8]) -> Option<Ipv4Addr> {
    std::str::from_utf8(s).ok()?.parse().ok()
}
fn parse_ipv6(s: &[u8]) -> Option<Ipv6Addr> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Appends `n` in decimal (what `write!` prints, without the formatting machinery: `%[src]`
/// and integer samples are printed on every request of some rule sets).
pub(crate) fn write_int(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    let mut v = n.unsigned_abs();
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    loop {
        k -= 1;
        digits[k] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[k..]);
}

/// Appends a dotted-quad IPv4 address.
pub(crate) fn write_ipv4(out: &mut Vec<u8>, a: Ipv4Addr) {
    // Digits written into a stack array and appended once (`%[src]` in a header is common):
    // a quarter of what four `write_int`s cost.
    let mut text = [0u8; 15];
    let mut n = 0;
    for (i, o) in a.octets().into_iter().enumerate() {
        if i > 0 {
            text[n] = b'.';
            n += 1;
        }
        if o >= 100 {
            text[n] = b'0' + o / 100;
            n += 1;
        }
        if o >= 10 {
            text[n] = b'0' + o / 10 % 10;
            n += 1;
        }
        text[n] = b'0' + o % 10;
        n += 1;
    }
    out.extend_from_slice(&text[..n]);
}

/// Casts `s` to `to`, writing new bytes (a printed number or address) into a scratch buffer of
/// `ev`. `None` when HAProxy's cast fails or does not exist.
///
/// Inline: most casts are to the sample's own type or to `Any` (every converter and match
/// casts its input), and a call costs more than that test.
#[inline]
pub fn cast<'a>(s: Sample<'a>, to: SmpType, ev: &mut Eval) -> Option<Sample<'a>> {
    let ty = s.ty();
    // An address is already an `Addr` (what IP patterns and `ipmask` ask for).
    if to == SmpType::Any
        || ty == to
        || (to == SmpType::Addr && matches!(ty, SmpType::Ipv4 | SmpType::Ipv6))
    {
        return Some(s);
    }
    convert(s, to, ev)
}

/// [`cast`] between two different types.
#[inline(never)]
fn convert<'a>(s: Sample<'a>, to: SmpType, ev: &mut Eval) -> Option<Sample<'a>> {
    use SmpType as T;
    let print = |ev: &mut Eval, input: Option<Bytes<'_>>, f: &dyn Fn(&mut Vec<u8>)| {
        let (i, out) = ev.out_for(input);
        f(out);
        Bytes::Buf(i)
    };
    Some(match (s, to) {
        (Sample::Bool(b), T::Sint) => Sample::Sint(b as i64),
        (Sample::Bool(b), T::Str) => {
            Sample::Str(print(ev, None, &|o| o.push(if b { b'1' } else { b'0' })))
        }
        (Sample::Sint(i), T::Bool) => Sample::Bool(i != 0),
        (Sample::Sint(i), T::Str) => Sample::Str(print(ev, None, &|o| write_int(o, i))),
        (Sample::Sint(i), T::Ipv4 | T::Addr) => Sample::Ipv4(Ipv4Addr::from(i as u32)),
        (Sample::Sint(i), T::Ipv6) => Sample::Ipv6(Ipv4Addr::from(i as u32).to_ipv6_mapped()),
        (Sample::Sint(i), T::Bin) => {
            Sample::Bin(print(ev, None, &|o| o.extend_from_slice(&i.to_be_bytes())))
        }
        (Sample::Ipv4(a), T::Sint) => Sample::Sint(u32::from(a) as i64),
        (Sample::Ipv4(a), T::Addr) => Sample::Ipv4(a),
        (Sample::Ipv4(a), T::Ipv6) => Sample::Ipv6(a.to_ipv6_mapped()),
        (Sample::Ipv4(a), T::Str) => Sample::Str(print(ev, None, &|o| write_ipv4(o, a))),
        (Sample::Ipv4(a), T::Bin) => {
            Sample::Bin(print(ev, None, &|o| o.extend_from_slice(&a.octets())))
        }
        (Sample::Ipv6(a), T::Addr) => Sample::Ipv6(a),
        (Sample::Ipv6(a), T::Ipv4) => Sample::Ipv4(a.to_ipv4_mapped()?),
        (Sample::Ipv6(a), T::Str) => Sample::Str(print(ev, None, &|o| {
            let _ = write!(o, "{a}");
        })),
        (Sample::Ipv6(a), T::Bin) => {
            Sample::Bin(print(ev, None, &|o| o.extend_from_slice(&a.octets())))
        }
        (Sample::Str(b), T::Bool) => Sample::Bool(str_to_int(ev.get(b))? != 0),
        (Sample::Str(b), T::Sint) => Sample::Sint(str_to_int(ev.get(b))?),
        (Sample::Str(b), T::Ipv4) => Sample::Ipv4(parse_ipv4(ev.get(b))?),
        (Sample::Str(b), T::Ipv6) => Sample::Ipv6(parse_ipv6(ev.get(b))?),
        (Sample::Str(b), T::Addr) => {
            let v = ev.get(b);
            match parse_ipv4(v) {
                Some(a) => Sample::Ipv4(a),
                None => Sample::Ipv6(parse_ipv6(v)?),
            }
        }
        (Sample::Str(b), T::Bin) => Sample::Bin(b),
        (Sample::Str(b) | Sample::Bin(b), T::Meth) => Sample::Meth(b),
        (Sample::Bin(b), T::Str) => Sample::Str(ev.until_nul(b)),
        (Sample::Meth(b), T::Str) => Sample::Str(b),
        (Sample::Meth(b), T::Bin) => Sample::Bin(b),
        _ => return None,
    })
}

/// `s` as an integer, through the cast table (bool, sint, ipv4, str).
pub fn to_int(s: Sample<'_>, ev: &mut Eval) -> Option<i64> {
    match cast(s, SmpType::Sint, ev)? {
        Sample::Sint(i) => Some(i),
        _ => None,
    }
}

/// `s` as an IP address, through the cast table (addresses, integers, strings that read as
/// one): what `set-src` and `set-dst` take, as HAProxy casts their sample.
pub fn to_ip(s: Sample<'_>, ev: &mut Eval) -> Option<std::net::IpAddr> {
    match cast(s, SmpType::Addr, ev)? {
        Sample::Ipv4(a) => Some(a.into()),
        Sample::Ipv6(a) => Some(a.into()),
        _ => None,
    }
}

/// `s` as a string's bytes (what a log-format, a capture or a string match reads): strings
/// and methods as they are, a binary up to its first NUL (HAProxy's cast), other types printed
/// into a scratch buffer.
pub fn to_bytes<'a>(s: Sample<'a>, ev: &mut Eval) -> Option<Bytes<'a>> {
    match s {
        Sample::Str(b) | Sample::Meth(b) => Some(b),
        _ => cast(s, SmpType::Str, ev)?.bytes(),
    }
}

/// `s` as a binary's bytes (what `-m bin` matches): strings, binaries and methods whole,
/// integers and addresses in network order.
pub fn to_bin<'a>(s: Sample<'a>, ev: &mut Eval) -> Option<Bytes<'a>> {
    match s.bytes() {
        Some(b) => Some(b),
        None => cast(s, SmpType::Bin, ev)?.bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_addresses_print_as_write_does() {
        for n in [0, 7, 10, -1, -10, 1234567890, i64::MIN, i64::MAX] {
            let mut o = Vec::new();
            write_int(&mut o, n);
            assert_eq!(o, n.to_string().as_bytes());
        }
        for a in [
            "0.0.0.0",
            "127.0.0.1",
            "255.255.255.255",
            "10.20.0.100",
            "1.22.103.9",
            "100.0.10.99",
        ] {
            let mut o = Vec::new();
            write_ipv4(&mut o, a.parse().unwrap());
            assert_eq!(o, a.as_bytes());
        }
    }

    fn s(ev: &mut Eval, v: Sample<'_>) -> String {
        let b = to_bytes(v, ev).unwrap();
        String::from_utf8_lossy(ev.get(b)).into_owned()
    }

    #[test]
    fn str_to_int_as_haproxy() {
        // haproxy 2.6: str(12abc),add(1)=13; str(abc),add(1)=1; str(-12),add(1)=-11;
        // str( 12),add(1)=1; str(),bool fails.
        assert_eq!(str_to_int(b"12abc"), Some(12));
        assert_eq!(str_to_int(b"abc"), Some(0));
        assert_eq!(str_to_int(b"-12"), Some(-12));
        assert_eq!(str_to_int(b" 12"), Some(0));
        assert_eq!(str_to_int(b""), None);
    }

    #[test]
    fn casts() {
        let mut ev = Eval::new();
        assert_eq!(s(&mut ev, Sample::Sint(-5)), "-5");
        assert_eq!(s(&mut ev, Sample::Bool(true)), "1");
        assert_eq!(
            s(&mut ev, Sample::Ipv4(Ipv4Addr::new(127, 0, 0, 1))),
            "127.0.0.1"
        );
        assert_eq!(s(&mut ev, Sample::Ipv6(Ipv6Addr::LOCALHOST)), "::1");
        // int(-1),ipmask(32) = 255.255.255.255; int(4294967296) = 0.0.0.0
        assert_eq!(
            cast(Sample::Sint(-1), SmpType::Ipv4, &mut ev),
            Some(Sample::Ipv4(Ipv4Addr::BROADCAST))
        );
        assert_eq!(
            cast(Sample::Sint(1 << 32), SmpType::Ipv4, &mut ev),
            Some(Sample::Ipv4(Ipv4Addr::UNSPECIFIED))
        );
        assert_eq!(cast(Sample::str(b"aa"), SmpType::Ipv4, &mut ev), None);
        assert_eq!(
            cast(Sample::str(b"1.2.3.4"), SmpType::Addr, &mut ev),
            Some(Sample::Ipv4(Ipv4Addr::new(1, 2, 3, 4)))
        );
        assert_eq!(
            cast(Sample::Ipv6(Ipv6Addr::LOCALHOST), SmpType::Ipv4, &mut ev),
            None
        );
        assert_eq!(
            cast(Sample::str(b"yes"), SmpType::Bool, &mut ev),
            Some(Sample::Bool(false))
        );
        // A binary becomes a string up to its first NUL, borrowed or in a buffer.
        assert_eq!(
            cast(Sample::Bin(Bytes::Ext(b"a\0bc")), SmpType::Str, &mut ev),
            Some(Sample::Str(Bytes::Ext(b"a")))
        );
        let (_, out, i) = ev.io(Bytes::Ext(b""));
        out.extend_from_slice(b"\0x");
        let got = cast(Sample::Bin(Bytes::Buf(i)), SmpType::Str, &mut ev).unwrap();
        assert_eq!(ev.value(got), Value::Str(b""));
        assert!(can_cast(SmpType::Addr, SmpType::Str));
        assert!(!can_cast(SmpType::Bool, SmpType::Ipv4));
        assert!(!can_cast(SmpType::Meth, SmpType::Sint));
    }

    #[test]
    fn io_ping_pongs() {
        let mut ev = Eval::new();
        let (inp, out, i) = ev.io(Bytes::Ext(b"ab"));
        out.extend_from_slice(inp);
        out.push(b'c');
        assert_eq!(i, 0);
        let (inp, out, j) = ev.io(Bytes::Buf(i));
        out.extend_from_slice(inp);
        out.push(b'd');
        assert_eq!(j, 1);
        assert_eq!(ev.get(Bytes::Buf(j)), b"abcd");
    }
}
