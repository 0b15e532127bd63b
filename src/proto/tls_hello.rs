//! The first bytes a client sends, read as a TLS (or SSLv2) hello without decrypting anything:
//! what `mode tcp` rules need to route TLS they do not terminate (`req.ssl_hello_type`,
//! `req.ssl_sni`, `req.ssl_alpn`, `req.ssl_ec_ext`, `req.ssl_st_ext`, `req.ssl_ver`).
//!
//! Why one function per fetch rather than one parse: HAProxy 2.6 checks different things for
//! each (`req.ssl_hello_type` accepts any record type from 0x14 to 0x17 and any handshake type,
//! `req.ssl_ver` reads SSLv2 hellos too, the extension fetches want a ClientHello), and a
//! configuration that routes on them must see the same answers, on the same bytes, at the
//! same moment. Each function follows HAProxy's checks in order and answers:
//!
//! - `Ok(value)`;
//! - `Err(Fail::Short)`: the bytes so far are the beginning of what the fetch reads, and more
//!   may decide it (HAProxy's `SMP_F_MAY_CHANGE`: a `tcp-request content` rule waits for more
//!   within `tcp-request inspect-delay`);
//! - `Err(Fail::No)`: not a hello this fetch understands, or it lacks what is asked (no
//!   sample, final).
//!
//! One deliberate difference: HAProxy asks for the handshake message's length counted from
//! the end of the record header, 4 bytes short of the whole message, and reads those last
//! bytes from its buffer whether they arrived or not. Here a read past the bytes received is
//! `Short`, so such a message is decided when its last bytes arrive (a client sends its hello
//! at once, so this only matters to a hello cut in its last 4 bytes).
//!
//! Only the bytes at the start of the request are read (HAProxy reads its buffer's input from
//! its start). No allocation; every read is bounds-checked.

/// Why a fetch has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fail {
    /// More bytes may give a value.
    Short,
    /// No value, and more bytes will not change that.
    No,
}

/// A fetch's answer over the bytes received so far.
pub type Read<T> = Result<T, Fail>;

/// The byte at `i`, or `Short` when it has not arrived.
fn at(buf: &[u8], i: usize) -> Read<usize> {
    buf.get(i).map(|&b| usize::from(b)).ok_or(Fail::Short)
}

fn u16_at(buf: &[u8], i: usize) -> Read<usize> {
    Ok(at(buf, i)? << 8 | at(buf, i + 1)?)
}

/// Record types HAProxy takes for the SSLv3 header format: change_cipher_spec, alert,
/// handshake, application_data, and 0xFF.
fn sslv3_record(b: u8) -> bool {
    (0x14..=0x17).contains(&b) || b == 0xff
}

/// `req.ssl_hello_type`: the handshake type of the first record (1: ClientHello, 2:
/// ServerHello), once the whole handshake message it announces has arrived.
pub fn hello_type(buf: &[u8]) -> Read<i64> {
    let Some(&first) = buf.first() else {
        return Err(Fail::Short);
    };
    if !sslv3_record(first) {
        return Err(Fail::No);
    }
    if buf.len() < 9 {
        return Err(Fail::Short);
    }
    if buf[1] < 3 {
        return Err(Fail::No);
    }
    if u16_at(buf, 3)? < 4 {
        return Err(Fail::No);
    }
    let hs_len = at(buf, 6)? << 16 | u16_at(buf, 7)?;
    if buf.len() < 9 + hs_len {
        return Err(Fail::Short);
    }
    Ok(buf[5] as i64)
}

/// `req.ssl_ver`: the protocol version the client hello offers, major × 65536 + minor (the
/// ClientHello's version for SSLv3 and later, not the record's; SSLv2 hellos are read too),
/// once the whole first record has arrived.
pub fn version(buf: &[u8]) -> Read<i64> {
    let Some(&first) = buf.first() else {
        return Err(Fail::Short);
    };
    let (version, msg_len, left);
    if sslv3_record(first) {
        if buf.len() < 11 {
            return Err(Fail::Short);
        }
        let record = (buf[1] as i64) << 16 | buf[2] as i64;
        let len = u16_at(buf, 3)?;
        if record < 0x30000 || !(6..=(1 << 14) + 2048).contains(&len) {
            return Err(Fail::No);
        }
        version = (buf[9] as i64) << 16 | buf[10] as i64;
        (msg_len, left) = (len, buf.len() - 5);
    } else {
        // SSLv2 header: 2 bytes (15-bit length) or 3 (14-bit length and a padding length).
        let (rlen, plen, hdr) = if first & 0x80 != 0 {
            if buf.len() < 3 {
                return Err(Fail::Short);
            }
            (usize::from(first & 0x7f) << 8 | usize::from(buf[1]), 0, 2)
        } else {
            if buf.len() < 4 {
                return Err(Fail::Short);
            }
            let rlen = usize::from(first & 0x3f) << 8 | usize::from(buf[1]);
            (rlen, usize::from(buf[2]), 3)
        };
        if buf[hdr] != 0x01 {
            return Err(Fail::No);
        }
        let body = hdr + 1;
        if buf.len() - body < 8 {
            return Err(Fail::Short);
        }
        version = (buf[body] as i64) << 16 | buf[body + 1] as i64;
        let cipher_len = u16_at(buf, body + 2)?;
        let sid_len = u16_at(buf, body + 4)?;
        let challenge_len = u16_at(buf, body + 6)?;
        if cipher_len % 3 != 0
            || (sid_len != 0 && sid_len != 16)
            || !(16..=32).contains(&challenge_len)
            || rlen != 9 + cipher_len + sid_len + challenge_len
        {
            return Err(Fail::No);
        }
        msg_len = cipher_len + sid_len + challenge_len + plen;
        left = buf.len() - body - 8;
    }
    if left < msg_len {
        return Err(Fail::Short);
    }
    Ok(version)
}

/// One extension of a ClientHello: `at` is where its type is in the buffer, `len` the length
/// of its data, `left` the bytes of the extension list from `at` on.
struct Ext {
    at: usize,
    kind: usize,
    len: usize,
    left: usize,
}

/// Walks the extensions of the ClientHello that starts `buf`, as HAProxy's extension fetches
/// do, until `on` returns a value. `Ok(None)`: no extension gave one.
fn walk<T>(buf: &[u8], mut on: impl FnMut(&Ext) -> Read<Option<T>>) -> Read<Option<T>> {
    // Record header: a handshake record of SSLv3 or later, long enough for extensions.
    let Some(&first) = buf.first() else {
        return Err(Fail::Short);
    };
    if first != 0x16 {
        return Err(Fail::No);
    }
    if at(buf, 1)? < 3 {
        return Err(Fail::No);
    }
    if u16_at(buf, 3)? < 1 + 3 + 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + 2 {
        return Err(Fail::No);
    }
    // Handshake header: a ClientHello of a plausible length, all there (see the module doc).
    if at(buf, 5)? != 0x01 {
        return Err(Fail::No);
    }
    let mut hs_len = at(buf, 6)? << 16 | u16_at(buf, 7)?;
    if hs_len < 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + 2 {
        return Err(Fail::No);
    }
    if buf.len() - 5 < hs_len {
        return Err(Fail::Short);
    }
    let mut p = 9;
    // client_version (TLS 1.0 or later), random, session id.
    if at(buf, p)? < 3 || at(buf, p + 1)? < 1 {
        return Err(Fail::No);
    }
    let sid = at(buf, p + 34)?;
    if sid > 32 || sid > hs_len - 35 {
        return Err(Fail::No);
    }
    hs_len -= 35 + sid;
    p += 35 + sid;
    // Cipher suites: at least one.
    if hs_len < 4 {
        return Err(Fail::No);
    }
    let suites = u16_at(buf, p)?;
    if suites < 2 || suites > hs_len {
        return Err(Fail::No);
    }
    // What is left may be short of the two bytes the next check counts on (HAProxy's int
    // goes negative there): saturate, the check then fails as it does in HAProxy.
    let mut left = hs_len.saturating_sub(2 + suites);
    p += 2 + suites;
    // Compression methods: at least one.
    if left < 2 {
        return Err(Fail::No);
    }
    let comp = at(buf, p)?;
    if comp < 1 || comp > left {
        return Err(Fail::No);
    }
    left -= 1 + comp;
    p += 1 + comp;
    // The extension list.
    if left < 2 {
        return Err(Fail::No);
    }
    let list = u16_at(buf, p)?;
    if list > left - 2 {
        return Err(Fail::No);
    }
    let mut left = list;
    p += 2;
    while left >= 4 {
        let ext = Ext {
            at: p,
            kind: u16_at(buf, p)?,
            len: u16_at(buf, p + 2)?,
            left,
        };
        if ext.len > left - 4 {
            return Err(Fail::No);
        }
        if let Some(v) = on(&ext)? {
            return Ok(Some(v));
        }
        left -= 4 + ext.len;
        p += 4 + ext.len;
    }
    Ok(None)
}

/// `buf[from..from + len]`, or `Short` when it has not all arrived.
fn slice(buf: &[u8], from: usize, len: usize) -> Read<&[u8]> {
    buf.get(from..from + len).ok_or(Fail::Short)
}

/// `req.ssl_sni`: the host name of the server_name extension, when its first entry is one.
pub fn sni(buf: &[u8]) -> Read<&[u8]> {
    let found = walk(buf, |e| {
        if e.kind != 0 {
            return Ok(None);
        }
        if e.len < 2 {
            return Err(Fail::No);
        }
        let list = u16_at(buf, e.at + 4)?;
        if list < 4 || list + 6 > e.left {
            return Err(Fail::No);
        }
        if at(buf, e.at + 6)? != 0 {
            // Not a host name: HAProxy goes on with the next extension.
            return Ok(None);
        }
        let len = u16_at(buf, e.at + 7)?;
        slice(buf, e.at + 9, len).map(Some)
    })?;
    found.ok_or(Fail::No)
}

/// `req.ssl_alpn`: the ALPN protocol name at offset `pos` of the extension (0 for the first),
/// and the offset of the next one if there is one (names come in the client's order of
/// preference; an ACL tries each).
pub fn alpn(buf: &[u8], pos: usize) -> Read<(&[u8], Option<usize>)> {
    let found = walk(buf, |e| {
        if e.kind != 16 {
            return Ok(None);
        }
        if e.len < 3 {
            return Err(Fail::No);
        }
        // Offsets count from the extension's type: 4 bytes of header, 2 of list length.
        let off = pos.max(6);
        let len = at(buf, e.at + off)?;
        if len + off - 3 > e.len {
            return Err(Fail::No);
        }
        let name = slice(buf, e.at + off + 1, len)?;
        let next = (len + off - 3 < e.len).then_some(off + len + 1);
        Ok(Some((name, next)))
    })?;
    found.ok_or(Fail::No)
}

/// `req.ssl_ec_ext`: the supported_groups (elliptic curves) extension is present. Absent:
/// no value (not false), as in HAProxy.
pub fn ec_ext(buf: &[u8]) -> Read<bool> {
    let found = walk(buf, |e| Ok((e.kind == 10).then_some(true)))?;
    found.ok_or(Fail::No)
}

/// `req.ssl_st_ext`: 0 without a SessionTicket extension, 1 with an empty one, 2 with a
/// ticket in it.
pub fn st_ext(buf: &[u8]) -> Read<i64> {
    let found = walk(buf, |e| {
        Ok((e.kind == 35).then_some(if e.len > 0 { 2 } else { 1 }))
    })?;
    Ok(found.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello as rustls sends it, for `host` with ALPN h2 and http/1.1.
    fn client_hello(host: &str) -> Vec<u8> {
        use std::sync::Arc;
        let mut cfg = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let mut c = rustls::ClientConnection::new(
            Arc::new(cfg),
            rustls::pki_types::ServerName::try_from(host.to_string()).unwrap(),
        )
        .unwrap();
        let mut out = Vec::new();
        c.write_tls(&mut out).unwrap();
        out
    }

    fn alpn_names(buf: &[u8]) -> Vec<&[u8]> {
        let (mut out, mut pos) = (Vec::new(), Some(0));
        while let Some(p) = pos {
            let (name, next) = alpn(buf, p).unwrap();
            out.push(name);
            pos = next;
        }
        out
    }

    #[test]
    fn reads_a_real_client_hello() {
        let hello = client_hello("www.example.com");
        assert_eq!(hello_type(&hello), Ok(1));
        assert_eq!(sni(&hello), Ok(&b"www.example.com"[..]));
        assert_eq!(alpn_names(&hello), [&b"h2"[..], b"http/1.1"]);
        assert_eq!(ec_ext(&hello), Ok(true));
        // rustls offers an empty session ticket extension when it has no ticket.
        assert_eq!(st_ext(&hello), Ok(1));
        // TLS 1.3 hellos say TLS 1.2 (3.3) in their legacy version field.
        assert_eq!(version(&hello), Ok(0x30003));
    }

    #[test]
    fn every_prefix_may_change_but_the_last_four_bytes_are_not_waited_for_by_hello_type() {
        let hello = client_hello("a.test");
        for cut in hello.len() - 4..hello.len() {
            assert_eq!(hello_type(&hello[..cut]), Err(Fail::Short), "cut at {cut}");
            assert_eq!(version(&hello[..cut]), Err(Fail::Short), "cut at {cut}");
        }
        for cut in 0..hello.len() - 4 {
            let b = &hello[..cut];
            assert_eq!(hello_type(b), Err(Fail::Short), "hello_type cut at {cut}");
            assert_eq!(sni(b), Err(Fail::Short), "sni cut at {cut}");
            assert_eq!(ec_ext(b), Err(Fail::Short), "ec_ext cut at {cut}");
            assert_eq!(st_ext(b), Err(Fail::Short), "st_ext cut at {cut}");
            assert_eq!(alpn(b, 0).err(), Some(Fail::Short), "alpn cut at {cut}");
            assert_eq!(version(b), Err(Fail::Short), "version cut at {cut}");
        }
    }

    #[test]
    fn other_protocols_are_final_at_once() {
        for other in [&b"GET / HTTP/1.1\r\n"[..], b"SSH-2.0-x\r\n"] {
            assert_eq!(hello_type(other), Err(Fail::No), "{other:?}");
            assert_eq!(sni(other), Err(Fail::No), "{other:?}");
            assert_eq!(version(other), Err(Fail::No), "{other:?}");
        }
        // One byte settles it for all but `req.ssl_ver`, which may still see an SSLv2 hello.
        assert_eq!(hello_type(b"G"), Err(Fail::No));
        assert_eq!(sni(b"G"), Err(Fail::No));
        assert_eq!(version(b"G"), Err(Fail::Short));
        // HAProxy's order of checks: `req.ssl_hello_type` wants 9 bytes before the version.
        assert_eq!(hello_type(b"\x16\x02"), Err(Fail::Short));
        assert_eq!(sni(b"\x16\x02"), Err(Fail::No));
        // A record of another type: `req.ssl_hello_type` reads it, the extension fetches not.
        let mut alert = client_hello("x.test");
        alert[0] = 0x15;
        assert_eq!(hello_type(&alert), Ok(1));
        assert_eq!(sni(&alert), Err(Fail::No));
        // A handshake shorter than a ClientHello with extensions.
        assert_eq!(sni(&[0x16, 3, 1, 0, 10, 1, 0, 0, 6]), Err(Fail::No));
    }

    #[test]
    fn absent_extensions() {
        // A minimal ClientHello: one suite, one compression method, one unknown extension.
        let mut body = vec![3, 3];
        body.extend([0u8; 32]);
        body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend([0, 4, 0xff, 0x01, 0, 0]);
        let mut hello = vec![0x16, 3, 1, 0, (body.len() + 4) as u8, 1, 0, 0];
        hello.push(body.len() as u8);
        hello.extend(&body);
        assert_eq!(hello_type(&hello), Ok(1));
        assert_eq!(sni(&hello), Err(Fail::No));
        assert_eq!(ec_ext(&hello), Err(Fail::No));
        assert_eq!(alpn(&hello, 0).err(), Some(Fail::No));
        assert_eq!(st_ext(&hello), Ok(0));
    }

    #[test]
    fn sslv2_hello_version() {
        // SSLv2-format hello offering SSL 3.0: 3 ciphers (9 bytes), no session id, 16-byte
        // challenge.
        let mut h = vec![0x80, 9 + 9 + 16, 0x01, 3, 0, 0, 9, 0, 0, 0, 16];
        h.extend([0u8; 9 + 16]);
        assert_eq!(version(&h), Ok(0x30000));
        assert_eq!(version(&h[..h.len() - 1]), Err(Fail::Short));
        assert_eq!(hello_type(&h), Err(Fail::No));
    }

    #[test]
    fn garbage_never_panics() {
        let hello = client_hello("fuzz.test");
        for i in 0..hello.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut b = hello.clone();
                b[i] = v;
                for cut in [b.len(), b.len() - 3, i + 1] {
                    let b = &b[..cut];
                    let _ = (hello_type(b), version(b), sni(b), ec_ext(b), st_ext(b));
                    let _ = (alpn(b, 0), alpn(b, 9), alpn(b, 300));
                }
            }
        }
    }
}

/// The lists of a ClientHello that the `ssl_fc_cipherlist_*`, `ssl_fc_extlist_bin`,
/// `ssl_fc_eclist_bin`, `ssl_fc_ecformats_bin` and `ssl_fc_protocol_hello_id` fetches return
/// (the parts of a JA3 fingerprint), as the client sent them: each list's raw bytes, cut at
/// the capture size (`tune.ssl.capture-buffer-size`), as HAProxy keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HelloLists {
    /// The ClientHello's `legacy_version` (0x0303 for TLS 1.2 and 1.3).
    pub version: u16,
    /// Cipher suites, two bytes each.
    pub ciphers: Vec<u8>,
    /// All of them, whatever the capture size (`ssl_fc_cipherlist_xxh` hashes the whole list).
    pub all_ciphers: Vec<u8>,
    /// Extension types in order, two bytes each.
    pub extensions: Vec<u8>,
    /// The `supported_groups` extension's groups, two bytes each.
    pub groups: Vec<u8>,
    /// The `ec_point_formats` extension's formats, one byte each.
    pub formats: Vec<u8>,
}

impl HelloLists {
    /// The lists of the ClientHello that begins `records` (the client's first TLS records,
    /// as received; a hello may span several), each cut at `cap` bytes. `None`: not a
    /// complete ClientHello.
    pub fn parse(records: &[u8], cap: usize) -> Option<HelloLists> {
        // The handshake message, its record headers taken out.
        let mut msg = Vec::new();
        let mut rest = records;
        while rest.len() >= 5 && rest[0] == 0x16 {
            let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
            let body = rest.get(5..5 + len)?;
            msg.extend_from_slice(body);
            rest = &rest[5 + len..];
            if msg.len() >= 4 && msg.len() >= 4 + usize::from_be_bytes(len24(&msg)) {
                break;
            }
        }
        if msg.len() < 4 || msg[0] != 1 {
            return None;
        }
        let hello = msg.get(4..4 + usize::from_be_bytes(len24(&msg)))?;
        let mut r = Reader(hello);
        let version = r.u16()?;
        r.take(32)?;
        let sid = usize::from(r.u8()?);
        r.take(sid)?;
        let n = usize::from(r.u16()?);
        let ciphers = r.take(n)?;
        let n = usize::from(r.u8()?);
        r.take(n)?;
        // One budget of `cap` bytes for all the lists, filled in the hello's order (ciphers,
        // extension types, groups, point formats): what does not fit is cut, as HAProxy's
        // single capture buffer cuts it.
        let mut left = cap;
        let mut keep = |from: &[u8], unit: usize| {
            let n = from.len().min(left) / unit * unit;
            left -= n;
            from[..n].to_vec()
        };
        let mut lists = HelloLists {
            version,
            ciphers: keep(ciphers, 1),
            all_ciphers: ciphers.to_vec(),
            ..HelloLists::default()
        };
        if r.0.is_empty() {
            return Some(lists);
        }
        let n = usize::from(r.u16()?);
        let mut exts = Reader(r.take(n)?);
        let (mut types, mut groups, mut formats) = (Vec::new(), &[][..], &[][..]);
        while !exts.0.is_empty() {
            let kind = exts.u16()?;
            let n = usize::from(exts.u16()?);
            let mut data = Reader(exts.take(n)?);
            types.extend_from_slice(&kind.to_be_bytes());
            match kind {
                0x000a => {
                    let n = usize::from(data.u16()?);
                    groups = data.take(n)?;
                }
                0x000b => {
                    let n = usize::from(data.u8()?);
                    formats = data.take(n)?;
                }
                _ => {}
            }
        }
        lists.extensions = keep(&types, 2);
        lists.groups = keep(groups, 2);
        lists.formats = keep(formats, 1);
        Some(lists)
    }
}

/// A handshake message's 24-bit length, widened for `usize::from_be_bytes`.
fn len24(msg: &[u8]) -> [u8; std::mem::size_of::<usize>()] {
    let mut b = [0u8; std::mem::size_of::<usize>()];
    let n = b.len();
    b[n - 3..].copy_from_slice(&msg[1..4]);
    b
}

/// Reads a ClientHello's fields in order, every read bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
}

/// Whether a two-byte value is a GREASE value (RFC 8701: 0x0A0A, 0x1A1A... 0xFAFA), which
/// the fetches' filter option leaves out.
pub fn is_grease(v: [u8; 2]) -> bool {
    v[0] == v[1] && v[0] & 0x0f == 0x0a
}

#[cfg(test)]
mod lists_tests {
    use super::*;

    #[test]
    fn a_client_hello_s_lists_as_sent_and_cut_at_the_capture_size() {
        let mut hello = vec![0x03, 0x03];
        hello.extend([7u8; 32]);
        hello.push(0); // no session id
        hello.extend([0, 6, 0x0a, 0x0a, 0x13, 0x01, 0xc0, 0x2b]);
        hello.extend([1, 0]); // null compression
        let exts: Vec<u8> = [
            &[0x00, 0x0a, 0, 6, 0, 4, 0x00, 0x1d, 0x00, 0x17][..],
            &[0x00, 0x0b, 0, 2, 1, 0][..],
            &[0x00, 0x2b, 0, 3, 2, 0x03, 0x04][..],
        ]
        .concat();
        hello.extend((exts.len() as u16).to_be_bytes());
        hello.extend(&exts);
        let mut msg = vec![1, 0, 0, hello.len() as u8];
        msg.extend(&hello);
        // Split over two records, as a large hello is.
        let (a, b) = msg.split_at(20);
        let mut records = vec![0x16, 3, 1, 0, a.len() as u8];
        records.extend(a);
        records.extend([0x16, 3, 3, 0, b.len() as u8]);
        records.extend(b);
        let l = HelloLists::parse(&records, 128).unwrap();
        assert_eq!(l.version, 0x0303);
        assert_eq!(l.ciphers, [0x0a, 0x0a, 0x13, 0x01, 0xc0, 0x2b]);
        assert_eq!(l.extensions, [0x00, 0x0a, 0x00, 0x0b, 0x00, 0x2b]);
        assert_eq!(l.groups, [0x00, 0x1d, 0x00, 0x17]);
        assert_eq!(l.formats, [0]);
        // One budget for all the lists, in order: 6 bytes of ciphers leave 2 for extensions.
        let cut = HelloLists::parse(&records, 8).unwrap();
        assert_eq!(cut.ciphers.len(), 6);
        assert_eq!(cut.extensions, [0x00, 0x0a]);
        assert!(cut.groups.is_empty() && cut.formats.is_empty());
        assert_eq!(cut.all_ciphers.len(), 6);
        assert!(HelloLists::parse(&records[..records.len() - 1], 128).is_none());
        assert!(is_grease([0x0a, 0x0a]) && is_grease([0xfa, 0xfa]) && !is_grease([0x13, 0x01]));
    }
}
