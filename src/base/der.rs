//! The one DER primitive several layers read with (X.509 certificates in `tls::der`, the
//! public keys of `rules::jwt`): a tag, a length and contents, bounds-checked, no allocation.

/// One TLV at the start of `input`: (tag, contents, the rest of the input); `None` when the
/// length is malformed or runs past the input.
pub fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_lengths_and_truncations() {
        assert_eq!(
            tlv(&[0x04, 2, 7, 8, 9]),
            Some((0x04, &[7u8, 8][..], &[9u8][..]))
        );
        let mut long = vec![0x30, 0x81, 130];
        long.extend([1u8; 130]);
        assert_eq!(tlv(&long).map(|t| t.1.len()), Some(130));
        assert_eq!(tlv(&[0x04, 3, 7, 8]), None);
        assert_eq!(tlv(&[0x04, 0x80]), None);
        assert_eq!(tlv(&[0x04]), None);
    }
}
