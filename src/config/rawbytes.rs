//! Configuration words that carry arbitrary bytes, inside a Rust `String`.
//!
//! HAProxy's configuration is bytes: `\xE0` in a word (quoted or not) is the byte 0xE0, and a
//! file may hold bytes that are not UTF-8; both reach the values that use them as they are
//! (`str(\xE0)`, a `set-header` value, a `return string`). Bascule's words are `String`s, which
//! keeps file:line diagnostics, keyword look-ups and the thousands of `&str` comparisons simple,
//! so a byte that is not UTF-8 text is encoded as one reserved character: byte `b` (0x80 to
//! 0xFF) is `U+10FF00 + b`, a private-use code point of plane 16 that no configuration writes.
//! The lexer encodes (`\xHH` escapes of 0x80 and above, bytes of the file that are not UTF-8,
//! and, so that the encoding stays lossless, a reserved character written literally, as its four
//! UTF-8 bytes); the consumers that need bytes decode ([`bytes`]): sample fetch and converter
//! arguments, ACL patterns, log-format literals, `return` strings. Everything else sees the
//! word as text, where such a character can only make a keyword or value not match, with the
//! usual diagnostic.

use std::borrow::Cow;

/// The first reserved code point: byte 0x80.
const FIRST: u32 = 0x10FF80;

/// Appends byte `b` to `out`: as the ASCII character when below 0x80, else encoded.
pub fn push_byte(out: &mut String, b: u8) {
    match b {
        0..=0x7F => out.push(char::from(b)),
        _ => out.push(encoded(b)),
    }
}

fn encoded(b: u8) -> char {
    // 0x10FF00 + b is at most 0x10FFFF, a valid scalar value (not a surrogate).
    char::from_u32(0x10FF00 + u32::from(b)).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// Appends character `c` read from a configuration, keeping the encoding lossless: a reserved
/// character written as such is appended as its UTF-8 bytes, each encoded.
pub fn push_char(out: &mut String, c: char) {
    if u32::from(c) >= FIRST {
        let mut buf = [0; 4];
        for &b in c.encode_utf8(&mut buf).as_bytes() {
            push_byte(out, b);
        }
    } else {
        out.push(c);
    }
}

/// The text of a configuration file: its UTF-8 as it is, each byte that is not UTF-8 encoded
/// (and reserved characters escaped, see [`push_char`]).
pub fn from_file(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_char(&mut out, c);
        }
        for &b in chunk.invalid() {
            push_byte(&mut out, b);
        }
    }
    out
}

/// Whether `s` holds an encoded byte.
pub fn has_raw(s: &str) -> bool {
    // Every reserved character starts with 0xF4 0x8F 0xBE or 0xF4 0x8F 0xBF.
    s.as_bytes()
        .windows(3)
        .any(|w| w[0] == 0xF4 && w[1] == 0x8F && w[2] >= 0xBE)
}

/// The bytes a word stands for: its UTF-8, with each encoded byte decoded. Borrows when the
/// word holds none.
pub fn bytes(s: &str) -> Cow<'_, [u8]> {
    if !has_raw(s) {
        return Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        let u = u32::from(c);
        if u >= FIRST {
            out.push((u - 0x10FF00) as u8);
        } else {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    Cow::Owned(out)
}

/// [`bytes`] over UTF-8 that was cut from a word at character boundaries (a log-format
/// literal gathered byte by byte).
pub fn decode(utf8: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(utf8) {
        Ok(s) if has_raw(s) => Cow::Owned(bytes(s).into_owned()),
        _ => Cow::Borrowed(utf8),
    }
}

/// The word for messages: encoded bytes shown as `\xHH`, as they were written.
pub fn display(s: &str) -> Cow<'_, str> {
    if !has_raw(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let u = u32::from(c);
        if u >= FIRST {
            out.push_str(&format!("\\x{:02X}", u - 0x10FF00));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips() {
        let mut s = String::new();
        for b in 0..=255u8 {
            push_byte(&mut s, b);
        }
        let want: Vec<u8> = (0..=255).collect();
        assert_eq!(&*bytes(&s), &want[..]);
        assert_eq!(&*decode(s.as_bytes()), &want[..]);
        assert!(has_raw(&s));
    }

    #[test]
    fn text_is_borrowed_unchanged() {
        let s = "héllo \u{10FF7F} 日本";
        assert!(!has_raw(s));
        assert!(matches!(bytes(s), Cow::Borrowed(_)));
        assert_eq!(&*bytes(s), s.as_bytes());
        assert_eq!(display(s), s);
    }

    #[test]
    fn files_keep_their_bytes() {
        let file = b"a \xE0\xFF b \xC3\xA9 \xF4\x8F\xBE\x80";
        let text = from_file(file);
        assert_eq!(&*bytes(&text), &file[..]);
        assert_eq!(display(&text), "a \\xE0\\xFF b é \\xF4\\x8F\\xBE\\x80");
    }

    #[test]
    fn a_reserved_character_written_literally_stays_itself() {
        let mut s = String::new();
        push_char(&mut s, '\u{10FFE0}');
        assert_eq!(&*bytes(&s), "\u{10FFE0}".as_bytes());
    }
}
