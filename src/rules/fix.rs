//! The FIX protocol (Financial Information eXchange) converters `fix_is_valid` and
//! `fix_tag_value(TAG)`, as haproxy 2.6 reads a message (its `src/fix.c`, read for behaviour):
//! `TAG=VALUE` fields separated by SOH (0x01), BeginString (8) first, BodyLength (9) second,
//! MsgType (35) third, CheckSum (10) last: three digits, the sum of the bytes before it modulo
//! 256. A message cut short is "need more data" (no value, so a `tcp-request content` rule
//! waits within its inspect delay), not invalid.

/// The field separator.
const SOH: u8 = 0x01;
/// The shortest message haproxy looks at.
const MIN_SIZE: usize = 26;

const BEGIN_STRING: u32 = 8;
const BODY_LENGTH: u32 = 9;
const CHECKSUM: u32 = 10;
const MSG_TYPE: u32 = 35;

/// What `fix_is_valid` finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    Valid,
    Invalid,
    NeedMore,
}

/// What `fix_tag_value` finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagValue<'a> {
    Found(&'a [u8]),
    /// A malformed field first, or the CheckSum field without the tag.
    Invalid,
    NeedMore,
}

/// haproxy's `read_uint`: leading digits (wrapping), and how many bytes they took.
fn read_uint(s: &[u8]) -> (u32, usize) {
    let mut v: u32 = 0;
    let mut n = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
        n += 1;
    }
    (v, n)
}

/// The version strings haproxy knows, with the highest tag number each defines.
const VERSIONS: &[(&[u8], u32)] = &[
    (b"FIX.4.0", 140),
    (b"FIX.4.1", 211),
    (b"FIX.4.2", 446),
    (b"FIX.4.3", 659),
    (b"FIX.4.4", 956),
    (b"FIXT.1.1", 1621),
];

/// A tag number: all digits, not 0, and (when the version is known) defined by it or in the
/// user range 10000-19999. 0: not a valid tag.
fn check_id(tag: &[u8], version: Option<u32>) -> u32 {
    let (id, n) = read_uint(tag);
    if n != tag.len() || id == 0 {
        return 0;
    }
    match version {
        None => id,
        Some(_) if (10000..=19999).contains(&id) => id,
        Some(max) if id <= max => id,
        Some(_) => 0,
    }
}

/// The number of a tag named in `fix_tag_value(TAG)`: digits, or one of the names haproxy
/// knows (any case).
pub fn tag_id(name: &str) -> Option<u32> {
    let id = check_id(name.as_bytes(), None);
    if id != 0 {
        return Some(id);
    }
    let names: [(&str, u32); 6] = [
        ("MsgType", MSG_TYPE),
        ("CheckSum", CHECKSUM),
        ("BodyLength", BODY_LENGTH),
        ("TargetCompID", 56),
        ("BeginString", BEGIN_STRING),
        ("SenderCompID", 49),
    ];
    names
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|n| n.1)
}

/// The next field of `msg` at `p`: (tag, value), or what stops the parse. A field ends at the
/// first SOH after the first `=` (haproxy looks for `=` first, across separators).
fn field(msg: &[u8], p: usize) -> Result<(&[u8], &[u8]), bool> {
    let rest = &msg[p..];
    // `Err(true)`: need more data; `Err(false)`: invalid.
    let eq = rest.iter().position(|&c| c == b'=').ok_or(true)?;
    let len = rest[eq..].iter().position(|&c| c == SOH).ok_or(true)?;
    if eq == 0 {
        return Err(false);
    }
    Ok((&rest[..eq], &rest[eq + 1..eq + len]))
}

/// `fix_is_valid`: the message's first fields, tag numbers, body length and checksum.
pub fn validate(msg: &[u8]) -> Validity {
    if msg.len() < MIN_SIZE {
        return Validity::NeedMore;
    }
    let mut p = 0;
    let mut version: Option<u32> = None;
    let (mut sum, mut count, mut body_len) = (0u8, 0u32, 0u32);
    let mut body: Option<usize> = None;
    while p < msg.len() {
        let (tag, value) = match field(msg, p) {
            Ok(f) => f,
            Err(true) => return Validity::NeedMore,
            Err(false) => return Validity::Invalid,
        };
        let id = check_id(tag, version);
        if id == 0 {
            return Validity::Invalid;
        }
        count += 1;
        match count {
            1 => {
                if id != BEGIN_STRING || value.len() < 7 {
                    return Validity::Invalid;
                }
                match VERSIONS.iter().find(|v| v.0 == value) {
                    Some(v) => version = Some(v.1),
                    None => return Validity::Invalid,
                }
            }
            2 => {
                let (n, used) = read_uint(value);
                if id != BODY_LENGTH || used != value.len() || n == 0 {
                    return Validity::Invalid;
                }
                body_len = n;
                body = Some(p + tag.len() + value.len() + 2);
            }
            3 if id != MSG_TYPE => return Validity::Invalid,
            c if c > 3 && id == CHECKSUM => {
                let start = body.unwrap_or(p);
                if body_len as usize != p - start || value.len() != 3 {
                    return Validity::Invalid;
                }
                let (want, _) = read_uint(value);
                return if u32::from(sum) == want {
                    Validity::Valid
                } else {
                    Validity::Invalid
                };
            }
            _ => {}
        }
        for &c in tag.iter().chain(b"=").chain(value).chain(&[SOH]) {
            sum = sum.wrapping_add(c);
        }
        p += tag.len() + value.len() + 2;
    }
    if body.is_some() {
        Validity::NeedMore
    } else {
        Validity::Invalid
    }
}

/// `fix_tag_value(TAG)`: the value of the first field numbered `tag`.
pub fn tag_value(msg: &[u8], tag: u32) -> TagValue<'_> {
    let mut p = 0;
    while p < msg.len() {
        let (t, v) = match field(msg, p) {
            Ok(f) => f,
            Err(true) => return TagValue::NeedMore,
            Err(false) => return TagValue::Invalid,
        };
        let id = check_id(t, None);
        if id == 0 {
            return TagValue::Invalid;
        }
        if id == tag {
            return TagValue::Found(v);
        }
        if id == CHECKSUM {
            return TagValue::Invalid;
        }
        p += t.len() + v.len() + 2;
    }
    TagValue::NeedMore
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message from fields written with `|` for SOH.
    fn msg(s: &str) -> Vec<u8> {
        s.bytes().map(|c| if c == b'|' { SOH } else { c }).collect()
    }

    #[test]
    fn logons_of_each_version_are_valid() {
        // Messages of haproxy's reg-test converter/fix.vtc.
        for m in [
            "8=FIX.4.0|9=70|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-10:54:19.617|98=0|108=30|10=090|",
            "8=FIX.4.4|9=102|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98=0|108=30|141=Y|553=Username|554=Password|10=252|",
            "8=FIXT.1.1|9=116|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:13:22.624|1128=7|98=0|108=30|141=Y|553=Username|554=Password|1137=7|10=204|",
        ] {
            assert_eq!(validate(&msg(m)), Validity::Valid, "{m}");
        }
    }

    #[test]
    fn malformed_messages_are_invalid_and_short_ones_need_more() {
        let good = "8=FIX.4.4|9=102|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98=0|108=30|141=Y|553=Username|554=Password|10=252|";
        for bad in [
            // Empty tag, tag without '=', first/second/third tag out of place.
            "8=FIX.4.4|9=100|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|=0|108=30|141=Y|553=Username|554=Password|10=252|",
            "8=FIX.4.4|9=100|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98|108=30|141=Y|553=Username|554=Password|10=252|",
            "9=102|8=FIX.4.4|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98=0|108=30|141=Y|553=Username|554=Password|10=252|",
            "8=FIX.4.4|35=A|9=102|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98=0|108=30|141=Y|553=Username|554=Password|10=252|",
            // Wrong body length, wrong checksum, a tag the version does not define.
            "8=FIX.4.4|9=100|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98=0|108=30|141=Y|553=Username|554=Password|10=252|",
            "8=FIX.4.4|9=102|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98=0|108=30|141=Y|553=Username|554=Password|10=251|",
            "8=FIX.4.0|9=70|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-10:54:19.617|98=0|999=30|10=090|",
        ] {
            assert_eq!(validate(&msg(bad)), Validity::Invalid, "{bad}");
        }
        let m = msg(good);
        assert_eq!(validate(&m[..20]), Validity::NeedMore);
        assert_eq!(validate(&m[..60]), Validity::NeedMore);
        assert_eq!(validate(&m[..m.len() - 1]), Validity::NeedMore);
    }

    #[test]
    fn tag_values_by_number_or_name() {
        let m = msg("8=FIX.4.4|9=102|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.528|98=0|108=30|141=Y|553=Username|554=Password|10=252|");
        let get = |name: &str| tag_value(&m, tag_id(name).unwrap());
        assert_eq!(get("BeginString"), TagValue::Found(b"FIX.4.4"));
        assert_eq!(get("bodylength"), TagValue::Found(b"102"));
        assert_eq!(get("35"), TagValue::Found(b"A"));
        assert_eq!(get("SenderCompID"), TagValue::Found(b"CLIENT1"));
        assert_eq!(get("TargetCompID"), TagValue::Found(b"EXECUTOR"));
        assert_eq!(get("CheckSum"), TagValue::Found(b"252"));
        assert_eq!(get("1137"), TagValue::Invalid);
        assert_eq!(tag_value(&m[..30], 49), TagValue::NeedMore);
        assert_eq!(tag_id("Nope"), None);
        assert_eq!(tag_id("0"), None);
    }
}
