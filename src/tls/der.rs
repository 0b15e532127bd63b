//! Just enough DER to read a certificate's subject: the attributes of an X.509 `Name`
//! (RFC 5280 §4.1.2.4) as (OID, value) pairs, for the common name that HAProxy indexes beside
//! the DNS names of the subject alternative names.
//!
//! webpki gives the subject as the raw content of its `SEQUENCE`; this walks it without a
//! general ASN.1 library. Malformed input yields fewer attributes, never a panic.

/// The OID of `commonName` (2.5.4.3), DER-encoded.
pub const OID_CN: &[u8] = &[0x55, 0x04, 0x03];

/// One TLV: (tag, content, rest of the input).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The attributes of a `Name`'s content (a sequence of SETs of `AttributeTypeAndValue`), in
/// order: (OID bytes, value bytes as encoded: UTF8String, PrintableString...).
pub fn name_attributes(mut name: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    while let Some((0x31, mut set, rest)) = tlv(name) {
        while let Some((0x30, atv, more)) = tlv(set) {
            if let Some((0x06, oid, value)) = tlv(atv) {
                if let Some((_, v, _)) = tlv(value) {
                    out.push((oid, v));
                }
            }
            set = more;
        }
        name = rest;
    }
    out
}

/// The subject's common name, when it is text.
pub fn common_name(subject: &[u8]) -> Option<String> {
    name_attributes(subject)
        .into_iter()
        .find(|(oid, _)| *oid == OID_CN)
        .and_then(|(_, v)| std::str::from_utf8(v).ok().map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SET { SEQUENCE { OID 2.5.4.3, UTF8String "a.test" } }` then `O=x`.
    const SUBJECT: &[u8] = &[
        0x31, 0x0f, 0x30, 0x0d, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x06, b'a', b'.', b't', b'e',
        b's', b't', 0x31, 0x0a, 0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x01, b'x',
    ];

    #[test]
    fn reads_the_common_name() {
        assert_eq!(common_name(SUBJECT).as_deref(), Some("a.test"));
        let attrs = name_attributes(SUBJECT);
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[1], (&[0x55, 0x04, 0x0a][..], &b"x"[..]));
    }

    #[test]
    fn truncated_input_yields_what_is_whole() {
        for cut in 0..SUBJECT.len() {
            let attrs = name_attributes(&SUBJECT[..cut]);
            assert!(attrs.len() <= 1, "cut at {cut}");
        }
        assert_eq!(common_name(&[0x31, 0x85, 0xff]), None);
    }
}
