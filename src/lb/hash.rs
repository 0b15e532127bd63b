//! HAProxy's key hash functions (`hash-type ... sdbm|djb2|wt6|crc32|none [avalanche]`).
//!
//! A hashing balance algorithm (`source`, `uri`, `url_param`, `hdr`, `hash`, `rdp-cookie`) turns
//! a key into a 32-bit value, then a lookup structure ([`super::map`], [`super::chash`],
//! [`super::maglev`]) turns that value into a server. For Bascule to be a drop-in replacement,
//! the same key must give the same 32-bit value as in HAProxy, so these functions reproduce the
//! behaviour of HAProxy's `hash_sdbm`, `hash_djb2`, `hash_wt6`, `hash_crc32` and `full_hash`
//! bit for bit. The tests check them against values printed by HAProxy 2.6 itself (its `sdbm`,
//! `djb2`, `wt6` and `crc32` converters, whose optional argument applies the same avalanche).
//!
//! Defaults to remember (HAProxy doc, `hash-type`): the function defaults to `sdbm`; with
//! `hash-type consistent` and no function given, HAProxy uses `sdbm` *with* `avalanche`.
//! `balance source` does not use these functions at all: see [`super::key::source_hash`].

/// The hash function named on a `hash-type` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HashFn {
    /// sdbm (the default).
    #[default]
    Sdbm,
    /// Dan Bernstein's djb2 (`hash * 33 + c`).
    Djb2,
    /// HAProxy's own wt6.
    Wt6,
    /// CRC-32 (IEEE 802.3, reflected, as in Ethernet, gzip and PNG).
    Crc32,
    /// `none`: the key is not hashed; its leading decimal integer is the hash (for keys already
    /// hashed by a converter).
    None,
}

impl HashFn {
    /// Parses the configuration keyword (`sdbm`, `djb2`, `wt6`, `crc32`, `none`).
    pub fn from_keyword(word: &str) -> Option<HashFn> {
        match word {
            "sdbm" => Some(HashFn::Sdbm),
            "djb2" => Some(HashFn::Djb2),
            "wt6" => Some(HashFn::Wt6),
            "crc32" => Some(HashFn::Crc32),
            "none" => Some(HashFn::None),
            _ => None,
        }
    }
}

/// Hashes `key` with `f`, then applies [`avalanche`] when asked (the `avalanche` modifier).
pub fn hash(f: HashFn, key: &[u8], avalanche: bool) -> u32 {
    let h = match f {
        HashFn::Sdbm => sdbm(key),
        HashFn::Djb2 => djb2(key),
        HashFn::Wt6 => wt6(key),
        HashFn::Crc32 => crc32(key),
        HashFn::None => leading_integer(key),
    };
    if avalanche {
        self::avalanche(h)
    } else {
        h
    }
}

/// sdbm: `h = c + (h << 6) + (h << 16) - h` over the bytes, from 0, modulo 2^32.
pub fn sdbm(key: &[u8]) -> u32 {
    key.iter().fold(0u32, |h, &c| {
        u32::from(c)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

/// djb2: `h = h * 33 + c` over the bytes, from 5381, modulo 2^32.
pub fn djb2(key: &[u8]) -> u32 {
    key.iter().fold(5381u32, |h, &c| {
        h.wrapping_mul(33).wrapping_add(u32::from(c))
    })
}

/// wt6: two 32-bit lanes mixed with data-dependent rotations, designed for HAProxy.
///
/// Each byte is folded into both lanes (xor into one, add into the other, both inverted); the
/// lanes are then rotated left by the current steps and swapped, and the next steps come from
/// 16 bits of the mixed lanes (low 5 bits and top 5 bits). A rotation by 0 leaves the lane
/// unchanged, which is what HAProxy's shift pair does on the machines it runs on.
pub fn wt6(key: &[u8]) -> u32 {
    let mut h0: u32 = 0xa53c_965a;
    let mut h1: u32 = 0x5ca6_953a;
    let mut step0: u32 = 6;
    let mut step1: u32 = 18;
    for &c in key {
        let c = u32::from(c);
        h0 = !(h0 ^ c);
        h1 = !(h1.wrapping_add(c));
        let rotated1 = h1.rotate_left(step0);
        h1 = h0.rotate_left(step1);
        h0 = rotated1;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        step0 = t & 0x1f;
        step1 = t >> 11;
    }
    h0 ^ h1
}

/// CRC-32/IEEE (polynomial 0xEDB88320 reflected, initial and final value all ones).
///
/// Computed bit by bit like HAProxy's `hash_crc32`: keys are short and a 1 kB table would
/// only cost cache.
pub fn crc32(key: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &c in key {
        crc ^= u32::from(c);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xedb8_8320 & mask);
        }
    }
    !crc
}

/// The `avalanche` modifier: HAProxy's `full_hash`, Bob Jenkins' 6-step 32-bit integer mix,
/// then a multiplication by 3221225473 (a prime close to 3/4 of 2^32) to spread values around
/// the consistent-hashing ring. Also used to place the ring points of [`super::chash`].
pub fn avalanche(a: u32) -> u32 {
    let mut a = a;
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(3_221_225_473)
}

/// `hash-type ... none`: the key is read as a decimal integer (optional sign, then digits; it
/// stops at the first other byte) and truncated to 32 bits. A key with no digits hashes to 0.
fn leading_integer(key: &[u8]) -> u32 {
    let (negative, digits) = match key.first() {
        Some(b'-') => (true, &key[1..]),
        Some(b'+') => (false, &key[1..]),
        _ => (false, key),
    };
    let value = digits
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0u64, |v, &c| {
            v.wrapping_mul(10).wrapping_add(u64::from(c - b'0'))
        });
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    value as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values printed by HAProxy 2.6.12 (`%[str(KEY),sdbm]`, `...,sdbm(1)` for the
    /// avalanche variant, and likewise for djb2, wt6 and crc32).
    #[test]
    fn matches_haproxy() {
        #[rustfmt::skip]
        let cases: &[(&str, HashFn, bool, u32)] = &[
            ("hello", HashFn::Sdbm, false, 684_824_882),
            ("hello", HashFn::Djb2, false, 261_238_937),
            ("hello", HashFn::Wt6, false, 3_538_347_703),
            ("hello", HashFn::Crc32, false, 907_060_870),
            ("hello", HashFn::Sdbm, true, 2_061_535_398),
            ("hello", HashFn::Djb2, true, 1_119_739_105),
            ("hello", HashFn::Wt6, true, 140_457_739),
            ("hello", HashFn::Crc32, true, 3_902_247_103),
            ("123456789", HashFn::Sdbm, false, 1_755_344_949),
            ("123456789", HashFn::Djb2, false, 902_675_330),
            ("123456789", HashFn::Wt6, false, 2_225_171_485),
            ("123456789", HashFn::Crc32, false, 0xCBF4_3926),
            ("a", HashFn::Sdbm, false, 97),
            ("a", HashFn::Djb2, false, 177_670),
            ("a", HashFn::Wt6, false, 1_900_802_597),
            ("a", HashFn::Crc32, false, 3_904_355_907),
            ("a", HashFn::Crc32, true, 1_288_200_982),
            ("www.example.com", HashFn::Wt6, false, 612_436_471),
            ("www.example.com", HashFn::Sdbm, true, 1_242_975_261),
        ];
        for &(key, f, aval, want) in cases {
            let got = hash(f, key.as_bytes(), aval);
            assert_eq!(got, want, "hash({f:?}, {key:?}, avalanche={aval})");
        }
    }

    #[test]
    fn empty_key() {
        assert_eq!(sdbm(b""), 0);
        assert_eq!(djb2(b""), 5381);
        assert_eq!(crc32(b""), 0);
        assert_eq!(wt6(b""), 0xa53c_965a ^ 0x5ca6_953a);
    }

    #[test]
    fn none_reads_the_leading_integer() {
        let cases: &[(&str, u32)] = &[
            ("1234", 1234),
            ("42abc", 42),
            ("-1", u32::MAX),
            ("+7", 7),
            ("", 0),
            ("x", 0),
            ("4294967297", 1),
        ];
        for &(key, want) in cases {
            assert_eq!(hash(HashFn::None, key.as_bytes(), false), want, "{key:?}");
        }
    }

    #[test]
    fn keywords() {
        for (word, f) in [
            ("sdbm", HashFn::Sdbm),
            ("djb2", HashFn::Djb2),
            ("wt6", HashFn::Wt6),
            ("crc32", HashFn::Crc32),
            ("none", HashFn::None),
        ] {
            assert_eq!(HashFn::from_keyword(word), Some(f));
        }
        assert_eq!(HashFn::from_keyword("md5"), None);
        assert_eq!(HashFn::default(), HashFn::Sdbm);
    }
}
