//! The first TLS record a client sends, read without decrypting anything: what `mode tcp`
//! rules need to route TLS they do not terminate (`req.ssl_hello_type`, `req.ssl_sni`,
//! `req.ssl_alpn`, `req.ssl_ec_ext`, `req.ssl_st_ext`, `req.ssl_ver`).
//!
//! As HAProxy does, only the first record is read, and it must hold the whole handshake
//! message: a record whose bytes have not all arrived is [`Hello::Incomplete`] (a rule waits
//! for more under `tcp-request inspect-delay`); anything else that is not a TLS handshake
//! record is [`Hello::NotTls`].

/// What the bytes received so far are.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello<'a> {
    /// Not enough bytes yet to tell, or to hold the whole message.
    Incomplete,
    /// Not a TLS (SSLv3 or later) handshake record.
    NotTls,
    Parsed(HelloInfo<'a>),
}

/// What a hello says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HelloInfo<'a> {
    /// The handshake type: 1 for a ClientHello, 2 for a ServerHello.
    pub hello_type: u8,
    /// The record layer's version (major, minor): `req.ssl_ver` is major × 65536 + minor.
    pub record_version: (u8, u8),
    /// The server_name extension's host name (ClientHello only).
    pub sni: Option<&'a [u8]>,
    /// The ALPN extension's protocol list, as sent: length-prefixed names.
    pub alpn: Option<&'a [u8]>,
    /// The supported_groups (elliptic curves) extension is present.
    pub ec_ext: bool,
    /// The session ticket extension is present.
    pub ticket_ext: bool,
}

impl<'a> HelloInfo<'a> {
    /// The ALPN protocol names, in the client's order.
    pub fn alpn_names(&self) -> impl Iterator<Item = &'a [u8]> {
        let mut rest = self.alpn.unwrap_or(&[]);
        std::iter::from_fn(move || {
            let (&len, tail) = rest.split_first()?;
            let name = tail.get(..usize::from(len))?;
            rest = &tail[usize::from(len)..];
            Some(name)
        })
    }
}

/// A cursor over big-endian fields; every read checks the length.
struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<usize> {
        Some(usize::from(self.u8()?) << 8 | usize::from(self.u8()?))
    }
    fn u24(&mut self) -> Option<usize> {
        Some(self.u16()? << 8 | usize::from(self.u8()?))
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let head = self.0.get(..n)?;
        self.0 = &self.0[n..];
        Some(head)
    }
}

/// Reads the first record of `buf`.
pub fn parse(buf: &[u8]) -> Hello<'_> {
    if buf.len() < 5 {
        // A first byte that cannot start a handshake record settles it already.
        return match buf.first() {
            Some(&b) if b != 0x16 => Hello::NotTls,
            Some(_) if buf.len() >= 2 && buf[1] < 3 => Hello::NotTls,
            _ => Hello::Incomplete,
        };
    }
    if buf[0] != 0x16 || buf[1] < 3 {
        return Hello::NotTls;
    }
    let record_len = usize::from(buf[3]) << 8 | usize::from(buf[4]);
    if record_len < 4 {
        return Hello::NotTls;
    }
    let Some(record) = buf.get(5..5 + record_len) else {
        return Hello::Incomplete;
    };
    let mut c = Cur(record);
    let (Some(hello_type), Some(hs_len)) = (c.u8(), c.u24()) else {
        return Hello::NotTls;
    };
    if hs_len > record_len - 4 {
        // The message continues in another record: HAProxy reads only the first.
        return Hello::NotTls;
    }
    let Some(body) = c.take(hs_len) else {
        return Hello::NotTls;
    };
    let mut info = HelloInfo {
        hello_type,
        record_version: (buf[1], buf[2]),
        ..Default::default()
    };
    if hello_type == 1 {
        if read_client_hello(body, &mut info).is_none() {
            return Hello::NotTls;
        }
    } else if hello_type != 2 {
        return Hello::NotTls;
    }
    Hello::Parsed(info)
}

/// The extensions of a ClientHello body. `None`: malformed.
fn read_client_hello<'a>(body: &'a [u8], info: &mut HelloInfo<'a>) -> Option<()> {
    let mut c = Cur(body);
    c.take(2 + 32)?; // client_version, random
    let sid = usize::from(c.u8()?);
    c.take(sid)?;
    let suites = c.u16()?;
    c.take(suites)?;
    let comp = usize::from(c.u8()?);
    c.take(comp)?;
    if c.0.is_empty() {
        return Some(()); // no extensions
    }
    let ext_len = c.u16()?;
    let mut exts = Cur(c.take(ext_len)?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let len = exts.u16()?;
        let data = exts.take(len)?;
        match kind {
            0 => info.sni = server_name(data),
            10 => info.ec_ext = true,
            16 => {
                let mut a = Cur(data);
                let list = a.u16()?;
                info.alpn = Some(a.take(list)?);
            }
            35 => info.ticket_ext = true,
            _ => {}
        }
    }
    Some(())
}

/// The host name of a server_name extension (the first entry of type host_name).
fn server_name(data: &[u8]) -> Option<&[u8]> {
    let mut c = Cur(data);
    let list = c.u16()?;
    let mut l = Cur(c.take(list)?);
    while !l.0.is_empty() {
        let kind = l.u8()?;
        let len = l.u16()?;
        let name = l.take(len)?;
        if kind == 0 {
            return Some(name);
        }
    }
    None
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

    #[test]
    fn reads_a_real_client_hello() {
        let hello = client_hello("www.example.com");
        let Hello::Parsed(info) = parse(&hello) else {
            panic!("not parsed: {:?}", parse(&hello));
        };
        assert_eq!(info.hello_type, 1);
        assert_eq!(info.sni, Some(&b"www.example.com"[..]));
        assert_eq!(
            info.alpn_names().collect::<Vec<_>>(),
            [&b"h2"[..], b"http/1.1"]
        );
        assert!(info.ec_ext);
        assert_eq!(info.record_version.0, 3);
    }

    #[test]
    fn every_prefix_is_incomplete_and_other_protocols_are_not_tls() {
        let hello = client_hello("a.test");
        for cut in 0..hello.len() {
            assert_eq!(parse(&hello[..cut]), Hello::Incomplete, "cut at {cut}");
        }
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        assert_eq!(parse(b"G"), Hello::NotTls);
        assert_eq!(
            parse(&[0x16, 2, 0, 0, 0]),
            Hello::NotTls,
            "SSLv2-era version"
        );
        // A record that claims a longer handshake than it holds.
        let mut bad = hello.clone();
        bad[6] = 0xff;
        assert_eq!(parse(&bad), Hello::NotTls);
    }

    #[test]
    fn garbage_never_panics() {
        let hello = client_hello("fuzz.test");
        for i in 5..hello.len() {
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut b = hello.clone();
                b[i] = v;
                let _ = parse(&b);
            }
        }
    }
}
