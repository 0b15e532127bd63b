//! HAProxy's peers protocol on the wire (version 2.1, what haproxy 2.x speaks), so that
//! Bascule and haproxy processes can be peers of one another.
//!
//! A session opens with text lines: the connecting side sends `HAProxyS 2.1`, the name it
//! gives the peer it calls, and `<its own name> <pid> <relative pid>`; the accepting side
//! answers a status line (`200` when it takes the session). Then both sides send binary
//! messages: a class byte and a type byte; stick-table messages (types with bit 7 set) carry
//! a length and a payload. Numbers are HAProxy's variable-length integers ([`put_varint`]).
//!
//! The stick-table messages Bascule sends and reads:
//! - `DEFINE` (a table's id on this session, name, key type and size, stored data types,
//!   expiry and each rate's period) — it also makes the table the current one;
//! - `UPDATE_TIMED` (update id, remaining expiry, key, every stored value in data type
//!   order); `UPDATE`, `INCUPDATE`, `INCUPDATE_TIMED` are read too;
//! - `ACK` (a table's id and the last update id received);
//! - and the control messages `RESYNC_REQ` / `RESYNC_FINISHED` / `RESYNC_CONFIRM` and
//!   `HEARTBEAT`, which have no payload.

use crate::stick::{DataType, Key, KeyType};

/// The first word of the hello line, and the version Bascule speaks.
pub const PROTO: &str = "HAProxyS";
pub const MAJOR: u32 = 2;
pub const MINOR: u32 = 1;

/// Status codes of the handshake.
pub mod status {
    pub const SUCCESS: u16 = 200;
    pub const TRY_AGAIN: u16 = 300;
    pub const ERR_PROTO: u16 = 501;
    pub const ERR_VERSION: u16 = 502;
    pub const ERR_HOST: u16 = 503;
    pub const ERR_PEER: u16 = 504;
}

/// Message classes.
pub const CLASS_CONTROL: u8 = 0;
pub const CLASS_ERROR: u8 = 1;
pub const CLASS_STICKTABLE: u8 = 10;

/// Control messages.
pub const CTRL_RESYNC_REQ: u8 = 0;
pub const CTRL_RESYNC_FINISHED: u8 = 1;
pub const CTRL_RESYNC_PARTIAL: u8 = 2;
pub const CTRL_RESYNC_CONFIRM: u8 = 3;
pub const CTRL_HEARTBEAT: u8 = 4;

/// Stick-table messages.
pub const STKT_UPDATE: u8 = 0x80;
pub const STKT_INCUPDATE: u8 = 0x81;
pub const STKT_DEFINE: u8 = 0x82;
pub const STKT_SWITCH: u8 = 0x83;
pub const STKT_ACK: u8 = 0x84;
pub const STKT_UPDATE_TIMED: u8 = 0x85;
pub const STKT_INCUPDATE_TIMED: u8 = 0x86;

/// The largest message payload accepted (haproxy's is its buffer size, 16 kB by default).
pub const MAX_PAYLOAD: usize = 64 * 1024;

/// How many server names a session's dictionary caches (haproxy's
/// `PEER_STKT_CACHE_MAX_ENTRIES`): their ids on the wire are 1 to this.
pub const DICT_ENTRIES: usize = 128;

/// Appends `v` as HAProxy's variable-length integer: below 240 one byte; else the low 4 bits
/// with the top nibble set, then 7 bits per byte with bit 7 set on all but the last.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 0xf0 {
        out.push(v as u8);
        return;
    }
    out.push((v as u8) | 0xf0);
    v = (v - 0xf0) >> 4;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v = (v - 0x80) >> 7;
    }
    out.push(v as u8);
}

/// Reads a variable-length integer at `*pos`, moving it past; `None` if `buf` ends first.
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut i = u64::from(*buf.get(*pos)?);
    *pos += 1;
    if i >= 0xf0 {
        let mut shift = 4u32;
        loop {
            let b = *buf.get(*pos)?;
            *pos += 1;
            if shift > 63 {
                return None;
            }
            i = i.wrapping_add(u64::from(b) << shift);
            shift += 7;
            if b < 0x80 {
                break;
            }
        }
    }
    Some(i)
}

/// A message found at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub class: u8,
    pub ty: u8,
    /// Where the payload is in the buffer.
    pub payload: std::ops::Range<usize>,
    /// The message's whole length.
    pub len: usize,
}

/// One message at the start of `buf`. `Ok(None)` while incomplete; an error for a payload
/// over [`MAX_PAYLOAD`].
pub fn frame(buf: &[u8]) -> Result<Option<Frame>, String> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (class, ty) = (buf[0], buf[1]);
    if ty & 0x80 == 0 {
        return Ok(Some(Frame {
            class,
            ty,
            payload: 2..2,
            len: 2,
        }));
    }
    let mut pos = 2;
    let Some(len) = get_varint(buf, &mut pos) else {
        // A length is at most 9 bytes: more without its end is no length.
        return if buf.len() > 11 {
            Err("bad message length".into())
        } else {
            Ok(None)
        };
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > MAX_PAYLOAD {
        return Err(format!("message of {len} bytes is too large"));
    }
    if buf.len() < pos + len {
        return Ok(None);
    }
    Ok(Some(Frame {
        class,
        ty,
        payload: pos..pos + len,
        len: pos + len,
    }))
}

/// Appends a stick-table message of type `ty` with `payload`.
pub fn put_message(out: &mut Vec<u8>, ty: u8, payload: &[u8]) {
    out.push(CLASS_STICKTABLE);
    out.push(ty);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Appends a control message.
pub fn put_control(out: &mut Vec<u8>, ty: u8) {
    out.extend_from_slice(&[CLASS_CONTROL, ty]);
}

/// The key type's number on the wire, and its size (a string's includes haproxy's NUL).
pub fn key_type(k: KeyType) -> (u64, u64) {
    match k {
        KeyType::Integer => (2, 4),
        KeyType::Ip => (4, 4),
        KeyType::Ipv6 => (5, 16),
        KeyType::String { len } => (6, len as u64 + 1),
        KeyType::Binary { len } => (7, len as u64),
    }
}

/// Appends `key` as an update message carries it.
pub fn put_key(out: &mut Vec<u8>, kt: KeyType, key: &Key) {
    match (kt, key) {
        (KeyType::String { .. }, Key::Bytes(b)) => {
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        (_, Key::Bytes(b)) => out.extend_from_slice(b),
        (_, Key::Ip(a)) => out.extend_from_slice(a),
        (_, Key::Ipv6(a)) => out.extend_from_slice(a),
        (_, Key::Integer(v)) => out.extend_from_slice(&v.to_be_bytes()),
    }
}

/// Reads a key of type `kt` at `*pos`.
pub fn get_key(buf: &[u8], pos: &mut usize, kt: KeyType) -> Option<Key> {
    let mut take = |n: usize| -> Option<&[u8]> {
        let b = buf.get(*pos..*pos + n)?;
        *pos += n;
        Some(b)
    };
    match kt {
        KeyType::Integer => {
            let b = take(4)?;
            Some(Key::Integer(u32::from_be_bytes(b.try_into().ok()?)))
        }
        KeyType::Ip => Some(Key::Ip(take(4)?.try_into().ok()?)),
        KeyType::Ipv6 => Some(Key::Ipv6(take(16)?.try_into().ok()?)),
        KeyType::Binary { len } => kt.key_from_bytes(take(len)?),
        KeyType::String { .. } => {
            let n = usize::try_from(get_varint(buf, pos)?).ok()?;
            let b = buf.get(*pos..pos.checked_add(n)?)?;
            *pos += n;
            kt.key_from_bytes(b)
        }
    }
}

/// A data type's number on the wire (haproxy's `STKTABLE_DT_*`, Bascule's declaration
/// order).
pub fn data_bit(d: DataType) -> u64 {
    1u64 << d.index()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        out
    }

    #[test]
    fn varints_as_haproxy_encodes_them() {
        // The boundaries of haproxy's peers.c (PEER_ENC_*BYTES_MIN).
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(239), [239]);
        assert_eq!(enc(240), [0xf0, 0]);
        assert_eq!(enc(2287).len(), 2);
        assert_eq!(enc(2288).len(), 3);
        assert_eq!(enc(264_431).len(), 3);
        assert_eq!(enc(264_432).len(), 4);
        assert_eq!(enc(33_818_864).len(), 5);
        assert_eq!(enc(u64::MAX).len(), 10);
        for v in [
            0,
            1,
            239,
            240,
            241,
            1000,
            2287,
            2288,
            70_000,
            1 << 32,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let b = enc(v);
            let mut pos = 0;
            assert_eq!(get_varint(&b, &mut pos), Some(v), "{v}");
            assert_eq!(pos, b.len());
            // Cut short: no value.
            let mut pos = 0;
            assert_eq!(get_varint(&b[..b.len() - 1], &mut pos), None, "{v}");
        }
    }

    #[test]
    fn frames_wait_for_their_payload() {
        let mut m = Vec::new();
        put_control(&mut m, CTRL_HEARTBEAT);
        put_message(&mut m, STKT_ACK, &[1, 0, 0, 0, 7]);
        let f = |class, ty, payload, len| {
            Some(Frame {
                class,
                ty,
                payload,
                len,
            })
        };
        assert_eq!(frame(&m).unwrap(), f(0, 4, 2..2, 2));
        let rest = &m[2..];
        assert_eq!(frame(&rest[..4]).unwrap(), None);
        assert_eq!(frame(rest).unwrap(), f(10, 0x84, 3..8, 8));
        let mut big = vec![10, 0x80];
        put_varint(&mut big, 1 << 20);
        assert!(frame(&big).is_err());
    }

    #[test]
    fn keys_round_trip() {
        let cases = [
            (KeyType::Ip, Key::Ip([10, 0, 0, 1])),
            (KeyType::Ipv6, Key::Ipv6([7; 16])),
            (KeyType::Integer, Key::Integer(0x0102_0304)),
            (
                KeyType::String { len: 32 },
                Key::Bytes(b"c1".as_slice().into()),
            ),
            (
                KeyType::Binary { len: 4 },
                Key::Bytes([1, 2, 3, 4].as_slice().into()),
            ),
        ];
        for (kt, key) in cases {
            let mut b = Vec::new();
            put_key(&mut b, kt, &key);
            let mut pos = 0;
            assert_eq!(get_key(&b, &mut pos, kt), Some(key));
            assert_eq!(pos, b.len());
        }
        let mut b = Vec::new();
        put_key(&mut b, KeyType::Integer, &Key::Integer(1));
        assert_eq!(b, [0, 0, 0, 1]);
    }
}
