//! The PROXY protocol header a load balancer in front sends before the client's bytes
//! (`bind ... accept-proxy`): version 1 (a text line) and version 2 (binary, with TLVs), read
//! as HAProxy 2.6 reads them (`conn_recv_proxy`).
//!
//! [`parse`] looks at the first bytes of a connection and says how long the header is, or
//! that more bytes are needed, or what is wrong, in HAProxy's words (they go into the log line
//! of a connection refused for it). It reads nothing past the header: the caller consumes
//! exactly [`Header::len`] bytes, so the client's own bytes stay in the socket.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The version 2 signature.
const V2_SIG: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// A version 1 line is at most this long, CRLF included.
const V1_MAX: usize = 107;
/// Largest `UNIQUE_ID` TLV HAProxy accepts.
const UNIQUE_ID_MAX: usize = 128;
/// Largest `AUTHORITY` TLV HAProxy accepts.
const AUTHORITY_MAX: usize = 255;

/// What a header said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    /// Its length: the bytes to consume.
    pub len: usize,
    /// The client's address and the address it connected to, when the header gave them
    /// (`None`: `UNKNOWN`, a `LOCAL` command or an unhandled family; the connection's own
    /// addresses stay).
    pub addrs: Option<(SocketAddr, SocketAddr)>,
    /// Version 2 TLVs HAProxy keeps: `AUTHORITY` (the SNI the first proxy saw) and
    /// `UNIQUE_ID`.
    pub authority: Option<Box<[u8]>>,
    pub unique_id: Option<Box<[u8]>>,
}

/// Why a header is refused, in HAProxy's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    NotHeader,
    Truncated,
    BadHeader,
    BadProto,
}

impl Error {
    pub fn words(self) -> &'static str {
        match self {
            Error::NotHeader => {
                "Received something which does not look like a PROXY protocol header"
            }
            Error::Truncated => "Truncated PROXY protocol header received",
            Error::BadHeader => "Received an invalid PROXY protocol header",
            Error::BadProto => "Received an unhandled protocol in the PROXY protocol header",
        }
    }
}

/// Parses the header at the start of `buf`. `Ok(None)`: more bytes are needed.
pub fn parse(buf: &[u8]) -> Result<Option<Header>, Error> {
    if buf.is_empty() {
        return Ok(None);
    }
    let n = buf.len().min(V2_SIG.len());
    if buf[..n] == V2_SIG[..n] {
        return if buf.len() < 16 { Ok(None) } else { v2(buf) };
    }
    let n = buf.len().min(6);
    if buf[..n] != b"PROXY "[..n] {
        return Err(Error::NotHeader);
    }
    v1(buf)
}

fn v1(buf: &[u8]) -> Result<Option<Header>, Error> {
    let Some(end) = buf.iter().take(V1_MAX).position(|&c| c == b'\n') else {
        return if buf.len() >= V1_MAX {
            Err(Error::BadHeader)
        } else {
            Ok(None)
        };
    };
    if end == 0 || buf[end - 1] != b'\r' {
        return Err(Error::BadHeader);
    }
    let line = std::str::from_utf8(&buf[6..end - 1]).map_err(|_| Error::BadHeader)?;
    let len = end + 1;
    if line.starts_with("UNKNOWN") {
        return Ok(Some(Header {
            len,
            ..Header::default()
        }));
    }
    let mut w = line.split(' ');
    let v6 = match w.next() {
        Some("TCP4") => false,
        Some("TCP6") => true,
        _ => return Err(Error::BadProto),
    };
    let ip = |s: Option<&str>| -> Result<IpAddr, Error> {
        let s = s.ok_or(Error::BadHeader)?;
        if v6 {
            s.parse::<Ipv6Addr>().map(IpAddr::V6)
        } else {
            s.parse::<Ipv4Addr>().map(IpAddr::V4)
        }
        .map_err(|_| Error::BadHeader)
    };
    let port = |s: Option<&str>| -> Result<u16, Error> {
        let s = s.ok_or(Error::BadHeader)?;
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(Error::BadHeader);
        }
        s.parse().map_err(|_| Error::BadHeader)
    };
    let (src, dst) = (ip(w.next())?, ip(w.next())?);
    let (sport, dport) = (port(w.next())?, port(w.next())?);
    if w.next().is_some() {
        return Err(Error::BadHeader);
    }
    Ok(Some(Header {
        len,
        addrs: Some((SocketAddr::new(src, sport), SocketAddr::new(dst, dport))),
        ..Header::default()
    }))
}

fn v2(buf: &[u8]) -> Result<Option<Header>, Error> {
    let (ver_cmd, fam) = (buf[12], buf[13]);
    if ver_cmd & 0xf0 != 0x20 {
        return Err(Error::NotHeader);
    }
    let body = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let len = 16 + body;
    if buf.len() < len {
        return Ok(None);
    }
    let body = &buf[16..len];
    let mut h = Header {
        len,
        ..Header::default()
    };
    match ver_cmd & 0x0f {
        // LOCAL: a health check of the proxy in front; its own addresses stay.
        0x00 => return Ok(Some(h)),
        0x01 => {}
        _ => return Err(Error::BadHeader),
    }
    let tlvs = match fam {
        0x11 => {
            let a = body.get(..12).ok_or(Error::Truncated)?;
            let ip = |o: usize| IpAddr::V4(Ipv4Addr::new(a[o], a[o + 1], a[o + 2], a[o + 3]));
            let port = |o: usize| u16::from_be_bytes([a[o], a[o + 1]]);
            h.addrs = Some((
                SocketAddr::new(ip(0), port(8)),
                SocketAddr::new(ip(4), port(10)),
            ));
            &body[12..]
        }
        0x21 => {
            let a = body.get(..36).ok_or(Error::Truncated)?;
            let ip = |o: usize| {
                let b: [u8; 16] = a[o..o + 16].try_into().unwrap_or([0; 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            let port = |o: usize| u16::from_be_bytes([a[o], a[o + 1]]);
            h.addrs = Some((
                SocketAddr::new(ip(0), port(32)),
                SocketAddr::new(ip(16), port(34)),
            ));
            &body[36..]
        }
        // Another family (UNIX, unspecified): the connection's own addresses stay, and
        // what follows is not read, as in HAProxy.
        _ => return Ok(Some(h)),
    };
    tlv(tlvs, &mut h, &buf[..len])?;
    Ok(Some(h))
}

/// Reads the TLVs after the addresses: `AUTHORITY`, `UNIQUE_ID` kept, `CRC32C` checked over
/// the whole header (`header`, with the checksum's own bytes counted as zeros).
fn tlv(mut t: &[u8], h: &mut Header, header: &[u8]) -> Result<(), Error> {
    let start = header.len() - t.len();
    while !t.is_empty() {
        if t.len() < 3 {
            return Err(Error::Truncated);
        }
        let (kind, n) = (t[0], usize::from(u16::from_be_bytes([t[1], t[2]])));
        let v = t.get(3..3 + n).ok_or(Error::Truncated)?;
        match kind {
            0x02 => {
                if n > AUTHORITY_MAX {
                    return Err(Error::BadHeader);
                }
                h.authority = Some(v.into());
            }
            0x03 => {
                if n != 4 {
                    return Err(Error::BadHeader);
                }
                let at = start + (header.len() - start - t.len()) + 3;
                let mut copy = header.to_vec();
                copy[at..at + 4].fill(0);
                let want = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
                if crate::rules::hash::crc32c(&copy) != want {
                    return Err(Error::BadHeader);
                }
            }
            0x05 => {
                if n > UNIQUE_ID_MAX {
                    return Err(Error::BadHeader);
                }
                h.unique_id = Some(v.into());
            }
            _ => {}
        }
        t = &t[3 + n..];
    }
    Ok(())
}

/// `proxy-v2-options`: the TLVs `send-proxy-v2` adds to a server connection's header (the
/// client's ALPN goes in any case, as in HAProxy).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct V2Options {
    /// `authority`: the SNI the client sent (or the `AUTHORITY` a PROXY header brought).
    pub authority: bool,
    /// `crc32c`: a checksum of the header.
    pub crc32c: bool,
    /// `unique-id`: the stream's unique id (`unique-id-format`).
    pub unique_id: bool,
}

impl V2Options {
    /// Reads the comma-separated list of `proxy-v2-options`.
    pub fn parse(list: &str) -> Result<V2Options, String> {
        let mut o = V2Options::default();
        for w in list.split(',') {
            match w {
                "authority" => o.authority = true,
                "crc32c" => o.crc32c = true,
                "unique-id" => o.unique_id = true,
                "ssl" | "cert-cn" | "cert-key" | "cert-sig" | "ssl-cipher" => {
                    return Err(format!(
                        "'{w}': the SSL TLVs of the PROXY protocol are not supported yet"
                    ))
                }
                _ => return Err(format!("'{w}': proxy v2 option not implemented")),
            }
        }
        Ok(o)
    }

    pub fn any(self) -> bool {
        self.authority || self.crc32c || self.unique_id
    }
}

/// What a client connection gives a version 2 header's TLVs.
#[derive(Debug, Clone, Copy, Default)]
pub struct V2Values<'a> {
    /// The protocol the client's TLS handshake agreed on (`ALPN`, 0x01).
    pub alpn: Option<&'a [u8]>,
    /// `AUTHORITY` (0x02).
    pub authority: Option<&'a [u8]>,
    /// `UNIQUE_ID` (0x05); an empty one when the stream has none.
    pub unique_id: Option<&'a [u8]>,
}

/// [`V2Values`] owned: copied out of a session for the time of a connect (only for a
/// backend with a `send-proxy-v2` server).
#[derive(Debug, Clone, Default)]
pub struct V2Owned {
    pub alpn: Option<Box<[u8]>>,
    pub authority: Option<Box<[u8]>>,
    pub unique_id: Option<Box<[u8]>>,
}

impl V2Owned {
    pub fn values(&self) -> V2Values<'_> {
        V2Values {
            alpn: self.alpn.as_deref(),
            authority: self.authority.as_deref(),
            unique_id: self.unique_id.as_deref(),
        }
    }
}

/// Writes the version 2 header with its TLVs into `out`, in HAProxy's order (`CRC32C`,
/// `ALPN`, `AUTHORITY`, `UNIQUE_ID`), the checksum computed last over the whole header.
pub fn write_v2_tlvs(
    out: &mut Vec<u8>,
    addrs: Option<(SocketAddr, SocketAddr)>,
    opts: V2Options,
    values: V2Values<'_>,
) {
    fn tlv(out: &mut Vec<u8>, kind: u8, v: &[u8]) {
        let v = &v[..v.len().min(usize::from(u16::MAX))];
        out.push(kind);
        out.extend_from_slice(&(v.len() as u16).to_be_bytes());
        out.extend_from_slice(v);
    }
    let mut fixed = [0u8; 52];
    let n = write_v2(&mut fixed, addrs);
    out.clear();
    out.extend_from_slice(&fixed[..n]);
    let crc_at = opts.crc32c.then(|| {
        tlv(out, 0x03, &[0; 4]);
        out.len() - 4
    });
    if let Some(a) = values.alpn {
        tlv(out, 0x01, a);
    }
    if let Some(a) = values.authority.filter(|_| opts.authority) {
        tlv(out, 0x02, a);
    }
    if opts.unique_id {
        tlv(out, 0x05, values.unique_id.unwrap_or_default());
    }
    let len = u16::try_from(out.len() - 16).unwrap_or(u16::MAX);
    out[14..16].copy_from_slice(&len.to_be_bytes());
    if let Some(at) = crc_at {
        let sum = crate::rules::hash::crc32c(out);
        out[at..at + 4].copy_from_slice(&sum.to_be_bytes());
    }
}

/// Writes the version 2 header `send-proxy-v2` sends for a connection from `src` to `dst`
/// into `out` (52 bytes suffice) and returns its length: `PROXY` over TCP4, or TCP6 when
/// either address is IPv6 (an IPv4 one then mapped), `LOCAL` without addresses (a UNIX
/// socket's client), as haproxy writes it.
pub fn write_v2(out: &mut [u8; 52], addrs: Option<(SocketAddr, SocketAddr)>) -> usize {
    out[..12].copy_from_slice(&V2_SIG);
    let (cmd_fam, body) = match addrs {
        None => ((0x20, 0x00), 0),
        Some((SocketAddr::V4(s), SocketAddr::V4(d))) => {
            out[16..20].copy_from_slice(&s.ip().octets());
            out[20..24].copy_from_slice(&d.ip().octets());
            out[24..26].copy_from_slice(&s.port().to_be_bytes());
            out[26..28].copy_from_slice(&d.port().to_be_bytes());
            ((0x21, 0x11), 12)
        }
        Some((s, d)) => {
            let v6 = |a: SocketAddr| match a.ip() {
                IpAddr::V4(ip) => ip.to_ipv6_mapped().octets(),
                IpAddr::V6(ip) => ip.octets(),
            };
            out[16..32].copy_from_slice(&v6(s));
            out[32..48].copy_from_slice(&v6(d));
            out[48..50].copy_from_slice(&s.port().to_be_bytes());
            out[50..52].copy_from_slice(&d.port().to_be_bytes());
            ((0x21, 0x21), 36)
        }
    };
    out[12] = cmd_fam.0;
    out[13] = cmd_fam.1;
    out[14..16].copy_from_slice(&(body as u16).to_be_bytes());
    16 + body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn version_1() {
        let h = parse(b"PROXY TCP4 192.168.0.1 10.0.0.2 56324 443\r\nGET /").unwrap();
        let h = h.unwrap();
        assert_eq!(h.len, 43);
        assert_eq!(h.addrs, Some((sa("192.168.0.1:56324"), sa("10.0.0.2:443"))));
        let h = parse(b"PROXY TCP6 ::1 2001:db8::2 1 2\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.addrs, Some((sa("[::1]:1"), sa("[2001:db8::2]:2"))));
        let h = parse(b"PROXY UNKNOWN anything\r\n").unwrap().unwrap();
        assert_eq!((h.len, h.addrs), (24, None));
        // Incomplete, then wrong.
        assert_eq!(parse(b"PROX").unwrap(), None);
        assert_eq!(parse(b"PROXY TCP4 1.2.3.4").unwrap(), None);
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Err(Error::NotHeader));
        assert_eq!(
            parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"),
            Err(Error::BadHeader)
        );
        assert_eq!(
            parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n"),
            Err(Error::BadHeader)
        );
        assert_eq!(
            parse(b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n"),
            Err(Error::BadHeader)
        );
        assert_eq!(
            parse(b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n"),
            Err(Error::BadProto)
        );
        assert_eq!(
            parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 2\r\n"),
            Err(Error::BadHeader)
        );
        assert_eq!(parse(&[b'P'; 200]), Err(Error::NotHeader));
        let mut long = b"PROXY ".to_vec();
        long.extend_from_slice(&[b'x'; 150]);
        assert_eq!(parse(&long), Err(Error::BadHeader));
    }

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut b = V2_SIG.to_vec();
        b.extend_from_slice(&[0x20 | cmd, fam]);
        b.extend_from_slice(&(body.len() as u16).to_be_bytes());
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn version_2() {
        // The reg-test's bytes: TCP4 127.0.0.1:42 -> 127.0.0.1:1337, UNIQUE_ID "12345".
        let body = [
            0x7f, 0, 0, 1, 0x7f, 0, 0, 1, 0, 0x2a, 0x05, 0x39, 0x05, 0, 5, b'1', b'2', b'3', b'4',
            b'5',
        ];
        let mut b = v2(1, 0x11, &body);
        b.extend_from_slice(b"GET /");
        let h = parse(&b).unwrap().unwrap();
        assert_eq!(h.len, 16 + body.len());
        assert_eq!(h.addrs, Some((sa("127.0.0.1:42"), sa("127.0.0.1:1337"))));
        assert_eq!(h.unique_id.as_deref(), Some(&b"12345"[..]));
        // Every prefix waits for more.
        for n in 0..16 + body.len() {
            assert_eq!(parse(&b[..n]).unwrap(), None, "{n}");
        }
        // LOCAL, and a family not handled: no addresses.
        assert_eq!(parse(&v2(0, 0x11, &body)).unwrap().unwrap().addrs, None);
        assert_eq!(parse(&v2(1, 0x31, &[0; 216])).unwrap().unwrap().addrs, None);
        // Too short for its family, a TLV cut, an unknown command, a bad version.
        assert_eq!(parse(&v2(1, 0x11, &[0; 8])), Err(Error::Truncated));
        assert_eq!(parse(&v2(1, 0x11, &body[..15])), Err(Error::Truncated));
        assert_eq!(parse(&v2(2, 0x11, &body)), Err(Error::BadHeader));
        let mut bad = v2(1, 0x11, &body);
        bad[12] = 0x11;
        assert_eq!(parse(&bad), Err(Error::NotHeader));
    }

    #[test]
    fn written_version_2_reads_back() {
        let mut out = [0u8; 52];
        for (s, d, want) in [
            (
                "10.0.0.1:1000",
                "10.0.0.2:80",
                ("10.0.0.1:1000", "10.0.0.2:80"),
            ),
            ("[2001:db8::1]:5", "[::1]:6", ("[2001:db8::1]:5", "[::1]:6")),
            ("10.0.0.1:7", "[::1]:8", ("[::ffff:10.0.0.1]:7", "[::1]:8")),
        ] {
            let n = write_v2(&mut out, Some((sa(s), sa(d))));
            let h = parse(&out[..n]).unwrap().unwrap();
            assert_eq!(h.len, n);
            assert_eq!(h.addrs, Some((sa(want.0), sa(want.1))));
        }
        let n = write_v2(&mut out, None);
        assert_eq!((n, out[12], out[13]), (16, 0x20, 0));
        assert_eq!(parse(&out[..n]).unwrap().unwrap().addrs, None);
    }

    #[test]
    fn written_tlvs_read_back_with_a_valid_checksum() {
        let mut out = Vec::new();
        let opts = V2Options::parse("crc32c,authority,unique-id").unwrap();
        let values = V2Values {
            alpn: Some(b"h2"),
            authority: Some(b"example.com"),
            unique_id: Some(b"ID-1"),
        };
        let addrs = Some((sa("10.0.0.1:1000"), sa("10.0.0.2:80")));
        write_v2_tlvs(&mut out, addrs, opts, values);
        let h = parse(&out).unwrap().unwrap();
        assert_eq!(h.len, out.len());
        assert_eq!(h.authority.as_deref(), Some(&b"example.com"[..]));
        assert_eq!(h.unique_id.as_deref(), Some(&b"ID-1"[..]));
        // A corrupted byte fails the checksum.
        let last = out.len() - 1;
        out[last] ^= 1;
        assert_eq!(parse(&out), Err(Error::BadHeader));
        // Without options, only the ALPN goes.
        write_v2_tlvs(&mut out, addrs, V2Options::default(), values);
        assert_eq!(out.len(), 16 + 12 + 3 + 2);
        assert!(V2Options::parse("ssl").is_err());
        assert!(V2Options::parse("unique-id,bogus").is_err());
    }

    #[test]
    fn version_2_checksum_and_authority() {
        let mut body = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2];
        body.extend_from_slice(&[0x02, 0, 3, b'a', b'.', b'b']);
        body.extend_from_slice(&[0x03, 0, 4, 0, 0, 0, 0]);
        let mut b = v2(1, 0x11, &body);
        let sum = crate::rules::hash::crc32c(&b);
        let at = b.len() - 4;
        b[at..].copy_from_slice(&sum.to_be_bytes());
        let h = parse(&b).unwrap().unwrap();
        assert_eq!(h.authority.as_deref(), Some(&b"a.b"[..]));
        b[at] ^= 1;
        assert_eq!(parse(&b), Err(Error::BadHeader));
    }
}
