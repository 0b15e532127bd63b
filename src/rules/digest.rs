//! Message digests and HMACs for the `digest(ALG)`, `hmac(ALG,KEY)` and `sha2([BITS])`
//! converters.
//!
//! Why here and not in `hash.rs`: these are cryptographic digests chosen by name, as
//! OpenSSL's `EVP_get_digestbyname` does for haproxy 2.6. The SHA families come from
//! aws-lc-rs (already built for rustls); MD5, which aws-lc-rs does not expose, is written
//! out below (RFC 1321), and HMAC (RFC 2104) is built over either, so every supported name
//! works in both converters. A name haproxy knows but Bascule does not (ripemd160, sm3,
//! blake2...) is refused at load with the list of supported names.

use aws_lc_rs::digest as aws;

/// A digest algorithm Bascule can compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    Md5,
    Sha(&'static aws::Algorithm),
}

/// The names accepted, as OpenSSL spells them (compared without case, like OpenSSL 3).
const NAMES: &[(&str, &str)] = &[
    ("md5", "md5"),
    ("sha1", "sha1"),
    ("sha-1", "sha1"),
    ("sha224", "sha224"),
    ("sha-224", "sha224"),
    ("sha2-224", "sha224"),
    ("sha256", "sha256"),
    ("sha-256", "sha256"),
    ("sha2-256", "sha256"),
    ("sha384", "sha384"),
    ("sha-384", "sha384"),
    ("sha2-384", "sha384"),
    ("sha512", "sha512"),
    ("sha-512", "sha512"),
    ("sha2-512", "sha512"),
    ("sha512-256", "sha512-256"),
    ("sha-512/256", "sha512-256"),
    ("sha2-512/256", "sha512-256"),
    ("sha3-256", "sha3-256"),
    ("sha3-384", "sha3-384"),
    ("sha3-512", "sha3-512"),
];

/// The supported names, for error messages.
pub const SUPPORTED: &str =
    "md5, sha1, sha224, sha256, sha384, sha512, sha512-256, sha3-256, sha3-384, sha3-512";

impl Algo {
    /// The algorithm an OpenSSL digest name designates, if Bascule computes it.
    pub fn by_name(name: &str) -> Option<Algo> {
        let (_, canon) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))?;
        Some(match *canon {
            "md5" => Algo::Md5,
            "sha1" => Algo::Sha(&aws::SHA1_FOR_LEGACY_USE_ONLY),
            "sha224" => Algo::Sha(&aws::SHA224),
            "sha256" => Algo::Sha(&aws::SHA256),
            "sha384" => Algo::Sha(&aws::SHA384),
            "sha512" => Algo::Sha(&aws::SHA512),
            "sha512-256" => Algo::Sha(&aws::SHA512_256),
            "sha3-256" => Algo::Sha(&aws::SHA3_256),
            "sha3-384" => Algo::Sha(&aws::SHA3_384),
            _ => Algo::Sha(&aws::SHA3_512),
        })
    }

    /// SHA-2 by output size in bits (`sha2(224|256|384|512)`).
    pub fn sha2(bits: i64) -> Option<Algo> {
        Some(Algo::Sha(match bits {
            224 => &aws::SHA224,
            256 => &aws::SHA256,
            384 => &aws::SHA384,
            512 => &aws::SHA512,
            _ => return None,
        }))
    }

    fn block_len(self) -> usize {
        match self {
            Algo::Md5 => 64,
            Algo::Sha(a) => a.block_len(),
        }
    }

    fn start(self) -> Ctx {
        match self {
            Algo::Md5 => Ctx::Md5(Md5::new()),
            Algo::Sha(a) => Ctx::Sha(aws::Context::new(a)),
        }
    }
}

/// A digest in progress.
enum Ctx {
    Md5(Md5),
    Sha(aws::Context),
}

impl Ctx {
    fn update(&mut self, data: &[u8]) {
        match self {
            Ctx::Md5(m) => m.update(data),
            Ctx::Sha(c) => c.update(data),
        }
    }
    fn finish(self, out: &mut Vec<u8>) {
        match self {
            Ctx::Md5(m) => out.extend_from_slice(&m.finish()),
            Ctx::Sha(c) => out.extend_from_slice(c.finish().as_ref()),
        }
    }
}

/// Appends the digest of `data` to `out`.
pub fn digest(algo: Algo, data: &[u8], out: &mut Vec<u8>) {
    let mut c = algo.start();
    c.update(data);
    c.finish(out);
}

/// Appends HMAC(`key`, `data`) to `out` (RFC 2104).
pub fn hmac(algo: Algo, key: &[u8], data: &[u8], out: &mut Vec<u8>) {
    const MAX_BLOCK: usize = 144; // SHA3-224's rate, the largest block of any digest here
    let block = algo.block_len();
    let mut k = [0u8; MAX_BLOCK];
    if key.len() > block {
        let mut short = Vec::with_capacity(64);
        digest(algo, key, &mut short);
        k[..short.len()].copy_from_slice(&short);
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut pad = [0u8; MAX_BLOCK];
    for (p, b) in pad.iter_mut().zip(&k).take(block) {
        *p = b ^ 0x36;
    }
    let mut inner = algo.start();
    inner.update(&pad[..block]);
    inner.update(data);
    let mark = out.len();
    inner.finish(out);
    for (p, b) in pad.iter_mut().zip(&k).take(block) {
        *p = b ^ 0x5c;
    }
    let mut outer = algo.start();
    outer.update(&pad[..block]);
    outer.update(&out[mark..]);
    out.truncate(mark);
    outer.finish(out);
}

/// MD5 (RFC 1321), streaming.
struct Md5 {
    state: [u32; 4],
    buf: [u8; 64],
    used: usize,
    len: u64,
}

const S: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

/// floor(abs(sin(i + 1)) * 2^32), computed once rather than written out.
fn md5_k() -> &'static [u32; 64] {
    static K: std::sync::OnceLock<[u32; 64]> = std::sync::OnceLock::new();
    K.get_or_init(|| {
        let mut k = [0u32; 64];
        for (i, v) in k.iter_mut().enumerate() {
            *v = ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32;
        }
        k
    })
}

impl Md5 {
    fn new() -> Md5 {
        Md5 {
            state: [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476],
            buf: [0; 64],
            used: 0,
            len: 0,
        }
    }

    fn update(&mut self, mut data: &[u8]) {
        self.len = self.len.wrapping_add(data.len() as u64);
        while !data.is_empty() {
            let n = (64 - self.used).min(data.len());
            self.buf[self.used..self.used + n].copy_from_slice(&data[..n]);
            self.used += n;
            data = &data[n..];
            if self.used == 64 {
                let block = self.buf;
                self.block(&block);
                self.used = 0;
            }
        }
    }

    fn finish(mut self) -> [u8; 16] {
        let bits = self.len.wrapping_mul(8);
        self.update(&[0x80]);
        while self.used != 56 {
            self.update(&[0]);
        }
        self.update(&bits.to_le_bytes());
        let mut out = [0u8; 16];
        for (o, s) in out.chunks_mut(4).zip(self.state) {
            o.copy_from_slice(&s.to_le_bytes());
        }
        out
    }

    fn block(&mut self, block: &[u8; 64]) {
        let k = md5_k();
        let mut m = [0u32; 16];
        for (w, c) in m.iter_mut().zip(block.chunks(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        let [mut a, mut b, mut c, mut d] = self.state;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        for (s, v) in self.state.iter_mut().zip([a, b, c, d]) {
            *s = s.wrapping_add(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|c| format!("{c:02x}")).collect()
    }
    fn dg(name: &str, data: &[u8]) -> String {
        let mut o = Vec::new();
        digest(Algo::by_name(name).unwrap(), data, &mut o);
        hex(&o)
    }
    fn mac(name: &str, key: &[u8], data: &[u8]) -> String {
        let mut o = b"prefix".to_vec();
        hmac(Algo::by_name(name).unwrap(), key, data, &mut o);
        assert_eq!(&o[..6], b"prefix");
        hex(&o[6..])
    }

    #[test]
    fn md5_rfc1321_vectors() {
        assert_eq!(dg("md5", b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(dg("MD5", b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            dg(
                "md5",
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
            ),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    #[test]
    fn sha_vectors_and_names() {
        // Values from the haproxy reg-test converter/digest.vtc's input "1".
        assert_eq!(dg("sha1", b"1"), "356a192b7913b04c54574d18c28d46e6395428ab");
        assert_eq!(
            dg("SHA-256", b"1"),
            "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"
        );
        assert_eq!(
            dg("sha2-224", b"1"),
            "e25388fde8290dc286a6164fa2d97e551b53498dcbf7bc378eb1f178"
        );
        assert_eq!(
            dg("sha3-256", b"abc"),
            "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532"
        );
        assert!(Algo::by_name("ripemd160").is_none());
        assert!(Algo::sha2(100).is_none());
        assert_eq!(Algo::sha2(512), Algo::by_name("sha512"));
    }

    #[test]
    fn hmac_rfc_vectors() {
        // RFC 2202 and RFC 4231 test case 2, and a key longer than the block (RFC 4231 case 6).
        assert_eq!(
            mac("md5", b"Jefe", b"what do ya want for nothing?"),
            "750c783e6ab0b503eaa86e310a5db738"
        );
        assert_eq!(
            mac("sha1", b"Jefe", b"what do ya want for nothing?"),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
        assert_eq!(
            mac("sha256", b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            mac("sha512", &[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First"),
            "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"
        );
        // haproxy 2.6: `str(1),hmac(sha1,a2V5)` (key "key"), from converter/hmac.vtc.
        assert_eq!(
            mac("sha1", b"key", b"1"),
            "e23feb105f9622241bf23db1638cd2b4208b1f53"
        );
    }
}
