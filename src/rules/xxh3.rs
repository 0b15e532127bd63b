//! XXH3-64 with a seed: what HAProxy's `xxh3([seed])` converter returns (as a signed integer).
//!
//! Written from the public xxHash specification (`doc/xxhash_spec.md` of the xxHash project,
//! "XXH3 Algorithm Description"), not from any implementation: the input-size classes (empty,
//! 1-3, 4-8, 9-16, 17-128, 129-240 bytes, then stripes and blocks), the default 192-byte
//! secret and, above 240 bytes, the secret derived from a non-zero seed. Kept apart from
//! `hash` because it is the one hash with a table and several code paths; it allocates
//! nothing (a derived secret lives on the stack). Checked against Debian's libxxhash 0.8.1
//! and HAProxy's reg-test values.

const PRIME32_1: u64 = 0x9E37_79B1;
const PRIME32_2: u64 = 0x85EB_CA77;
const PRIME32_3: u64 = 0xC2B2_AE3D;
const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;
const PRIME_MX1: u64 = 0x1656_6791_9E37_79F9;
const PRIME_MX2: u64 = 0x9FB2_1C65_1E98_DF25;

const SECRET_LEN: usize = 192;

/// The specification's default secret.
const SECRET: [u8; SECRET_LEN] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
];

fn r32(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
}

fn r64(b: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The low and high halves of the 128-bit product, folded by xor.
fn fold(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

fn avalanche(mut x: u64) -> u64 {
    x ^= x >> 37;
    x = x.wrapping_mul(PRIME_MX1);
    x ^ (x >> 32)
}

fn avalanche_xxh64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(PRIME64_2);
    x ^= x >> 29;
    x = x.wrapping_mul(PRIME64_3);
    x ^ (x >> 32)
}

/// 16 bytes of input mixed with 16 bytes of secret and the seed.
fn mix16(d: &[u8], at: usize, s: &[u8], so: usize, seed: u64) -> u64 {
    fold(
        r64(d, at) ^ r64(s, so).wrapping_add(seed),
        r64(d, at + 8) ^ r64(s, so + 8).wrapping_sub(seed),
    )
}

/// `XXH3_64bits_withSeed(data, seed)`.
pub fn xxh3_64(d: &[u8], seed: u64) -> u64 {
    let s = &SECRET;
    let len = d.len();
    let len64 = len as u64;
    match len {
        0 => avalanche_xxh64(seed ^ r64(s, 56) ^ r64(s, 64)),
        1..=3 => {
            let combined = u64::from(d[len - 1])
                | (len64 << 8)
                | (u64::from(d[0]) << 16)
                | (u64::from(d[len >> 1]) << 24);
            avalanche_xxh64(((r32(s, 0) ^ r32(s, 4)).wrapping_add(seed)) ^ combined)
        }
        4..=8 => {
            let seed = seed ^ (u64::from((seed as u32).swap_bytes()) << 32);
            let combined = r32(d, len - 4) | (r32(d, 0) << 32);
            let mut v = ((r64(s, 8) ^ r64(s, 16)).wrapping_sub(seed)) ^ combined;
            v ^= v.rotate_left(49) ^ v.rotate_left(24);
            v = v.wrapping_mul(PRIME_MX2);
            v ^= (v >> 35).wrapping_add(len64);
            v = v.wrapping_mul(PRIME_MX2);
            v ^ (v >> 28)
        }
        9..=16 => {
            let lo = ((r64(s, 24) ^ r64(s, 32)).wrapping_add(seed)) ^ r64(d, 0);
            let hi = ((r64(s, 40) ^ r64(s, 48)).wrapping_sub(seed)) ^ r64(d, len - 8);
            avalanche(
                len64
                    .wrapping_add(lo.swap_bytes())
                    .wrapping_add(hi)
                    .wrapping_add(fold(lo, hi)),
            )
        }
        17..=128 => {
            let mut acc = len64.wrapping_mul(PRIME64_1);
            let rounds = (len - 1) / 32 + 1;
            for i in (0..rounds).rev() {
                acc = acc.wrapping_add(mix16(d, i * 16, s, i * 32, seed));
                acc = acc.wrapping_add(mix16(d, len - i * 16 - 16, s, i * 32 + 16, seed));
            }
            avalanche(acc)
        }
        129..=240 => {
            let mut acc = len64.wrapping_mul(PRIME64_1);
            for i in 0..8 {
                acc = acc.wrapping_add(mix16(d, i * 16, s, i * 16, seed));
            }
            acc = avalanche(acc);
            for i in 8..len / 16 {
                acc = acc.wrapping_add(mix16(d, i * 16, s, (i - 8) * 16 + 3, seed));
            }
            avalanche(acc.wrapping_add(mix16(d, len - 16, s, 119, seed)))
        }
        _ => {
            let mut derived = SECRET;
            if seed != 0 {
                for (i, w) in derived.chunks_exact_mut(8).enumerate() {
                    let v = r64(&SECRET, i * 8);
                    let v = if i % 2 == 0 {
                        v.wrapping_add(seed)
                    } else {
                        v.wrapping_sub(seed)
                    };
                    w.copy_from_slice(&v.to_le_bytes());
                }
            }
            long(d, &derived)
        }
    }
}

/// Inputs above 240 bytes: 64-byte stripes accumulated into eight lanes, scrambled after each
/// block of 16 stripes, then merged.
fn long(d: &[u8], s: &[u8; SECRET_LEN]) -> u64 {
    let mut acc = [
        PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1,
    ];
    let accumulate = |acc: &mut [u64; 8], stripe: &[u8], so: usize| {
        for i in 0..8 {
            let v = r64(stripe, i * 8);
            let k = v ^ r64(s, so + i * 8);
            acc[i ^ 1] = acc[i ^ 1].wrapping_add(v);
            acc[i] = acc[i].wrapping_add((k & 0xFFFF_FFFF).wrapping_mul(k >> 32));
        }
    };
    const STRIPES: usize = (SECRET_LEN - 64) / 8;
    const BLOCK: usize = 64 * STRIPES;
    let len = d.len();
    // Every full block but the last bytes (even when they make a full block).
    let full_blocks = (len - 1) / BLOCK;
    for b in 0..full_blocks {
        let block = &d[b * BLOCK..(b + 1) * BLOCK];
        for n in 0..STRIPES {
            accumulate(&mut acc, &block[n * 64..], n * 8);
        }
        for (i, a) in acc.iter_mut().enumerate() {
            *a ^= *a >> 47;
            *a ^= r64(s, SECRET_LEN - 64 + i * 8);
            *a = a.wrapping_mul(PRIME32_1);
        }
    }
    let last = &d[full_blocks * BLOCK..];
    for n in 0..(last.len() - 1) / 64 {
        accumulate(&mut acc, &last[n * 64..], n * 8);
    }
    accumulate(&mut acc, &d[len - 64..], SECRET_LEN - 71);
    let mut h = len as u64;
    h = h.wrapping_mul(PRIME64_1);
    for i in 0..4 {
        h = h.wrapping_add(fold(
            acc[i * 2] ^ r64(s, 11 + i * 16),
            acc[i * 2 + 1] ^ r64(s, 11 + i * 16 + 8),
        ));
    }
    avalanche(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One input per size class and block boundary: bytes 0, 1, 2... of the given length.
    /// Expected values from Debian's libxxhash 0.8.1 (`XXH3_64bits_withSeed`).
    #[test]
    fn matches_the_reference_library() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 3) as u8).collect();
        for &(len, seed, want) in EXPECTED {
            assert_eq!(xxh3_64(&data[..len], seed), want, "len {len} seed {seed}");
        }
    }

    /// HAProxy's reg-test sample_fetches/hashes: bytes 0 to 255.
    #[test]
    fn matches_haproxy() {
        let d: Vec<u8> = (0..=255).collect();
        assert_eq!(xxh3_64(&d, 0) as i64, -7_779_787_747_613_135_503);
        assert_eq!(xxh3_64(&d, 1) as i64, 5_930_632_130_106_562_027);
    }

    const EXPECTED: &[(usize, u64, u64)] = &[
        (0, 0x0, 0x2d06800538d394c2),
        (0, 0x1, 0x4dc5b0cc826f6703),
        (0, 0xdeadbeef12345678, 0x7e54c675487019a4),
        (0, 0xffffffffffffffff, 0x4c093276ae47a555),
        (1, 0x0, 0x13e608bc156defed),
        (1, 0x1, 0x49787df7898ccbb7),
        (2, 0x0, 0x1c9074b93943b86c),
        (2, 0x1, 0x669034e5bc550ce6),
        (3, 0x0, 0xa9088dda485b481c),
        (3, 0x1, 0x7901214716755f60),
        (3, 0xdeadbeef12345678, 0xd449a1ae1fa42576),
        (3, 0xffffffffffffffff, 0x962ee7d551766d62),
        (4, 0x0, 0x6d9253b16c8b1ed3),
        (4, 0x1, 0xe81680856eceb4db),
        (5, 0x0, 0x998620e10e3a4b37),
        (5, 0x1, 0x7bf070b092354abd),
        (8, 0x0, 0x60539db630471163),
        (8, 0x1, 0x19148e536d069082),
        (8, 0xdeadbeef12345678, 0xed8649cddd2e0b87),
        (8, 0xffffffffffffffff, 0x03c9ff6ac7b8c00e),
        (9, 0x0, 0xfeff668361d723a8),
        (9, 0x1, 0x8208ac133147a751),
        (15, 0x0, 0x9ec169f4a98231c1),
        (15, 0x1, 0xe3023c9188d59d53),
        (16, 0x0, 0xb8c859b0f030b585),
        (16, 0x1, 0xf6a6d83d8ce63bd4),
        (16, 0xdeadbeef12345678, 0xbde83ff9a3f4c2fb),
        (16, 0xffffffffffffffff, 0x0e4e1775a9e53905),
        (17, 0x0, 0x714a04408e79b80f),
        (17, 0x1, 0x92506c214b19ed1b),
        (31, 0x0, 0xed41ac283d0674b3),
        (31, 0x1, 0xfbd59fe858b382b0),
        (32, 0x0, 0x19ff4ee1d6ba1a55),
        (32, 0x1, 0x5b44bf66a382bea6),
        (33, 0x0, 0x3e44983ad21679c8),
        (33, 0x1, 0xfd1c8b264247be96),
        (64, 0x0, 0x287eb1fa9e4be2c1),
        (64, 0x1, 0x0ec7ce80153bc4dc),
        (127, 0x0, 0x998fa0631fd78d0b),
        (127, 0x1, 0xa4eefc34eb404479),
        (128, 0x0, 0x67425a03650261bf),
        (128, 0x1, 0xfd32b4b9456ca09a),
        (128, 0xdeadbeef12345678, 0x72f94e585135e057),
        (128, 0xffffffffffffffff, 0x6ed816ea3249411b),
        (129, 0x0, 0xc664bf3311c6abc4),
        (129, 0x1, 0x7b4c88ffebd88bcc),
        (130, 0x0, 0xa620cbbc569eeeab),
        (130, 0x1, 0xe1b1f4737cabbab0),
        (200, 0x0, 0x746cd0025327bf5b),
        (200, 0x1, 0xb226d4c34d8738d2),
        (239, 0x0, 0x1d861931c1f3cafa),
        (239, 0x1, 0x22d6423ba720c1c1),
        (240, 0x0, 0x64556dc6b462a6cf),
        (240, 0x1, 0x86a09925a87a4699),
        (240, 0xdeadbeef12345678, 0x61a19e5ec1d75505),
        (240, 0xffffffffffffffff, 0xb4e78031047bdf69),
        (241, 0x0, 0x8beadd3a8874fe17),
        (241, 0x1, 0x35969643e9fd05d4),
        (241, 0xdeadbeef12345678, 0xb0c1b11040845062),
        (241, 0xffffffffffffffff, 0x7534988fa427f36b),
        (255, 0x0, 0xb67b6637a76e6c39),
        (255, 0x1, 0x93b9d6c9bcd37ccd),
        (256, 0x0, 0x3c38817f6d79c0da),
        (256, 0x1, 0xea51753cb6592955),
        (1023, 0x0, 0xd26986a0b85dcc44),
        (1023, 0x1, 0x298e1ec83f9d6e47),
        (1024, 0x0, 0x9b81661c641c72b1),
        (1024, 0x1, 0x03c840c38eb48549),
        (1024, 0xdeadbeef12345678, 0x3ce7ff0b33e4fe6d),
        (1024, 0xffffffffffffffff, 0x11609e0923fee8ee),
        (1025, 0x0, 0x806c2072ed713576),
        (1025, 0x1, 0x525ef649ab7d7d78),
        (1088, 0x0, 0x2f8781e01841f0da),
        (1088, 0x1, 0xdef68165c2af4087),
        (2047, 0x0, 0xe36fcecaa2c0ecba),
        (2047, 0x1, 0x99471ac7a9e50e2f),
        (2048, 0x0, 0xabe604813ba62ed1),
        (2048, 0x1, 0x612acba3f5e5259c),
        (2049, 0x0, 0x55aed42c9f1554b6),
        (2049, 0x1, 0xa6d8604d1f8370e7),
        (2999, 0x0, 0xc61d8aac87f86f7a),
        (2999, 0x1, 0xab1ce7e5269d804c),
        (2999, 0xdeadbeef12345678, 0xb2daff6418c252d1),
        (2999, 0xffffffffffffffff, 0x5a707a3ac7f7f482),
    ];
}
