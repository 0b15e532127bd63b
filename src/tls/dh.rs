//! Finite-field Diffie-Hellman parameters: `ssl-dh-param-file FILE` and
//! `tune.ssl.default-dh-param BITS`, read and checked as HAProxy 2.6 reads them.
//!
//! In HAProxy they make the TLS 1.2 DHE suites (`DHE-RSA-AES256-GCM-SHA384`...) usable: without
//! DH parameters OpenSSL never negotiates one. rustls (with aws-lc-rs, like AWS-LC under
//! HAProxy) implements no finite-field Diffie-Hellman, so Bascule cannot offer a DHE suite
//! whatever the parameters. What can be exact is: the argument checks and their errors, the file
//! read as OpenSSL reads it (a PEM `DH PARAMETERS` or `X9.42 DH PARAMETERS` block, DER inside),
//! and what the parameters change when nothing names a DHE suite — nothing, as in HAProxy,
//! since server preference picks an ECDHE suite first. What cannot be honoured is said at
//! load: a bind whose cipher list names DHE suites while DH parameters are configured would
//! negotiate them in HAProxy with a client that has no ECDHE suite: a warning when ECDHE
//! suites remain in its list, an error when they were all DHE (see `tls::server`'s check).

use std::path::Path;

/// The size in bits of the prime of the DH parameters in `path` (HAProxy's error otherwise).
pub fn read(path: &Path) -> Result<u32, String> {
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    params_in(&text).ok_or_else(|| "no DH PARAMETERS block in it".to_string())?
}

/// The DH parameters of a PEM file's first `DH PARAMETERS` block: `None` when it has none, the
/// prime's size in bits, or why the block is unusable.
pub fn params_in(pem: &[u8]) -> Option<Result<u32, String>> {
    let text = String::from_utf8_lossy(pem);
    let (begin, end) = ["DH PARAMETERS", "X9.42 DH PARAMETERS"]
        .iter()
        .find_map(|label| {
            let b = format!("-----BEGIN {label}-----");
            let e = format!("-----END {label}-----");
            let start = text.find(&b)? + b.len();
            let stop = text[start..].find(&e)? + start;
            Some((start, stop))
        })?;
    let b64: Vec<u8> = text[begin..end]
        .bytes()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let mut der = Vec::new();
    if !crate::rules::hash::base64_decode(&b64, &mut der) {
        return Some(Err("the DH PARAMETERS block is not base64".into()));
    }
    Some(prime_bits(&der).ok_or_else(|| "the DH PARAMETERS block is not DER DH parameters".into()))
}

/// PKCS #3 `DHParameter ::= SEQUENCE { prime INTEGER, base INTEGER, ... }` (X9.42 starts
/// the same way): the prime's size in bits, if the base is there too.
fn prime_bits(der: &[u8]) -> Option<u32> {
    let (tag, seq, rest) = tlv(der)?;
    if tag != 0x30 || !rest.is_empty() {
        return None;
    }
    let (tag, prime, after) = tlv(seq)?;
    if tag != 0x02 {
        return None;
    }
    let (tag, base, _) = tlv(after)?;
    if tag != 0x02 || base.is_empty() {
        return None;
    }
    let digits: &[u8] = {
        let skip = prime.iter().take_while(|b| **b == 0).count();
        &prime[skip..]
    };
    let first = *digits.first()?;
    Some(u32::try_from(digits.len()).ok()? * 8 - first.leading_zeros())
}

/// One DER tag-length-value: the tag, the value, what follows.
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&l0, mut b) = b.split_first()?;
    let len = if l0 < 0x80 {
        usize::from(l0)
    } else {
        let n = usize::from(l0 & 0x7f);
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n]
            .iter()
            .fold(0usize, |a, &d| (a << 8) | usize::from(d));
        b = &b[n..];
        len
    };
    (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
}

/// C's `atoi`, as HAProxy reads `tune.ssl.default-dh-param`: leading blanks, a sign, the
/// digits that follow (0 when there are none; what comes after them is ignored).
pub fn atoi(s: &str) -> i64 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |a, d| {
            a.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    if neg {
        -n
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A toy group: a 64-bit prime 0xC5E3A583B425D373, base 2.
    const TOY: &str =
        "-----BEGIN DH PARAMETERS-----\nMA4CCQDF46WDtCXTcwIBAg==\n-----END DH PARAMETERS-----\n";

    #[test]
    fn the_prime_size_of_a_pem_block() {
        assert_eq!(params_in(TOY.as_bytes()), Some(Ok(64)));
        let x942 = TOY.replace("DH PARAMETERS", "X9.42 DH PARAMETERS");
        assert_eq!(params_in(x942.as_bytes()), Some(Ok(64)));
        assert_eq!(params_in(b"-----BEGIN CERTIFICATE-----\nAA==\n"), None);
        let bad = TOY.replace("MA4CCQDF46WDtCXTcwIBAg==", "MAA=");
        assert!(params_in(bad.as_bytes()).unwrap().is_err());
    }

    #[test]
    fn a_file_openssl_wrote_and_a_file_without_parameters() {
        // `openssl genpkey -genparam -algorithm DH -pkeyopt dh_param:ffdhe2048`.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls");
        assert_eq!(read(&dir.join("ffdhe2048.dh")), Ok(2048));
        assert_eq!(
            read(&dir.join("www-rsa.pem")),
            Err("no DH PARAMETERS block in it".to_string())
        );
        assert!(read(&dir.join("missing.dh")).is_err());
    }

    #[test]
    fn atoi_reads_as_c_does() {
        assert_eq!(atoi("2048"), 2048);
        assert_eq!(atoi("  4096bits"), 4096);
        assert_eq!(atoi("abc"), 0);
        assert_eq!(atoi("-1"), -1);
        assert_eq!(atoi(""), 0);
    }
}
