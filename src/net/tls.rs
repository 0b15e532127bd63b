//! A TLS connection over a TCP socket, with the readiness interface the sessions use
//! (`readable`, `try_read`, `try_write`, `writable`), driven by rustls directly.
//!
//! Sessions read and write sockets as "wait until ready, then try": no buffered stream trait,
//! no per-call allocation. [`TlsSock`] keeps that shape: `try_read` hands out plaintext that
//! rustls decrypted, reading records from the socket when it has none (`WouldBlock` when the
//! socket has none either); `try_write` hands plaintext to rustls and writes the records out.
//! One rule keeps a connection from stalling: records rustls holds because the socket was
//! full are written before any new plaintext is taken, and whoever waits to *read* also
//! watches for the socket to become writable and flushes them — a response accepted into
//! rustls always reaches the client even if the session goes back to reading at once.
//!
//! The handshake ([`TlsSock::accept`]) is bounded by the caller's timer (HAProxy bounds it by
//! `timeout client`). A failed handshake sends rustls's alert and reports the reason; what
//! rustls reports is kept for the log (`SSL handshake failure`).

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::{ServerConfig, ServerConnection};
use tokio::net::TcpStream;

/// At most this much plaintext is handed to rustls per `try_write` (one record's worth a few
/// times over), so that what it holds stays bounded.
const WRITE_CHUNK: usize = 4 * 16 * 1024;

/// `io::Read`/`io::Write` over a non-blocking socket, for rustls's `read_tls`/`write_tls`.
struct Raw<'a>(&'a TcpStream);

impl Read for Raw<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Raw<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A server-side TLS connection.
pub struct TlsSock {
    sock: TcpStream,
    conn: RefCell<ServerConnection>,
    /// rustls may hold decrypted bytes: `readable` answers at once.
    plaintext: Cell<bool>,
    /// The client closed the socket (or sent close_notify).
    eof: Cell<bool>,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsSock {
    /// Runs the server handshake on an accepted socket. Errors: the client left, the
    /// handshake failed (rustls's reason, after the alert was sent), or a socket error.
    pub async fn accept(sock: TcpStream, config: Arc<ServerConfig>) -> io::Result<TlsSock> {
        let conn = ServerConnection::new(config).map_err(tls_error)?;
        let s = TlsSock {
            sock,
            conn: RefCell::new(conn),
            plaintext: Cell::new(false),
            eof: Cell::new(false),
        };
        loop {
            while !s.flush()? {
                s.sock.writable().await?;
            }
            if !s.conn.borrow().is_handshaking() {
                return Ok(s);
            }
            match s.read_records() {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the client closed the connection during the TLS handshake",
                    ))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => s.sock.readable().await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads records from the socket into rustls and processes them. `Ok(0)`: end of stream.
    fn read_records(&self) -> io::Result<usize> {
        let mut conn = self.conn.borrow_mut();
        let n = conn.read_tls(&mut Raw(&self.sock))?;
        if n == 0 {
            self.eof.set(true);
        }
        match conn.process_new_packets() {
            Ok(state) => {
                if state.plaintext_bytes_to_read() > 0 || state.peer_has_closed() {
                    self.plaintext.set(true);
                }
            }
            Err(e) => {
                // Send the alert rustls queued, if the socket takes it.
                let _ = conn.write_tls(&mut Raw(&self.sock));
                return Err(tls_error(e));
            }
        }
        drop(conn);
        // Post-handshake messages (session tickets, key updates) go out when they can.
        self.flush().map(|_| n)
    }

    /// Writes what rustls holds. `Ok(true)`: nothing is left; `Ok(false)`: the socket is full.
    fn flush(&self) -> io::Result<bool> {
        let mut conn = self.conn.borrow_mut();
        while conn.wants_write() {
            match conn.write_tls(&mut Raw(&self.sock)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn pending_output(&self) -> bool {
        self.conn.borrow().wants_write()
    }

    /// Decrypted bytes into `buf`, reading records as needed: `WouldBlock` when neither
    /// rustls nor the socket has any, `Ok(0)` at the end of the stream.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let r = self.conn.borrow_mut().reader().read(buf);
            match r {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.plaintext.set(false),
                // The client closed without close_notify: an end of stream, as HAProxy takes it.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.eof.get() {
                return Ok(0);
            }
            self.read_records()?;
        }
    }

    /// Takes up to [`WRITE_CHUNK`] bytes of `buf` and writes their records; `WouldBlock` when
    /// records from before are still waiting for room in the socket.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        if !self.flush()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self
            .conn
            .borrow_mut()
            .writer()
            .write(&buf[..buf.len().min(WRITE_CHUNK)])?;
        self.flush()?;
        Ok(n)
    }

    /// Waits until `try_read` may have something: decrypted bytes, or records on the socket.
    /// Meanwhile, records waiting for room in the socket are written when it has some.
    pub async fn readable(&self) -> io::Result<()> {
        loop {
            if self.plaintext.get() || self.eof.get() {
                return Ok(());
            }
            if !self.pending_output() {
                return self.sock.readable().await;
            }
            tokio::select! {
                r = self.sock.readable() => return r,
                w = self.sock.writable() => {
                    w?;
                    self.flush()?;
                }
            }
        }
    }

    /// As [`TlsSock::readable`], for code that polls.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.plaintext.get() || self.eof.get() {
            return Poll::Ready(Ok(()));
        }
        if self.pending_output() {
            if let Poll::Ready(r) = self.sock.poll_write_ready(cx) {
                r?;
                self.flush()?;
                if !self.pending_output() {
                    // Flushed: the socket's write readiness no longer matters.
                } else {
                    cx.waker().wake_by_ref();
                }
            }
        }
        self.sock.poll_read_ready(cx)
    }

    /// Waits until `try_write` may take bytes: records from before are written out.
    pub async fn writable(&self) -> io::Result<()> {
        while !self.flush()? {
            self.sock.writable().await?;
        }
        Ok(())
    }

    /// Sends close_notify and writes what is left, waiting at most until the caller's timer
    /// stops it.
    pub async fn close(&self) -> io::Result<()> {
        self.conn.borrow_mut().send_close_notify();
        self.writable().await
    }

    /// The socket underneath (addresses, socket options; never its bytes).
    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// The server name the client asked for (`ssl_fc_sni`).
    pub fn sni(&self) -> Option<String> {
        self.conn.borrow().server_name().map(str::to_string)
    }

    /// The protocol ALPN chose (`ssl_fc_alpn`).
    pub fn alpn(&self) -> Option<Vec<u8>> {
        self.conn.borrow().alpn_protocol().map(<[u8]>::to_vec)
    }

    /// The protocol version as HAProxy logs it (`%sslv`: `TLSv1.3`).
    pub fn version(&self) -> &'static str {
        match self.conn.borrow().protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "",
        }
    }

    /// The cipher suite by OpenSSL's name, as HAProxy logs it (`%sslc`).
    pub fn cipher(&self) -> &'static str {
        use rustls::CipherSuite as C;
        match self
            .conn
            .borrow()
            .negotiated_cipher_suite()
            .map(|s| s.suite())
        {
            Some(C::TLS13_AES_128_GCM_SHA256) => "TLS_AES_128_GCM_SHA256",
            Some(C::TLS13_AES_256_GCM_SHA384) => "TLS_AES_256_GCM_SHA384",
            Some(C::TLS13_CHACHA20_POLY1305_SHA256) => "TLS_CHACHA20_POLY1305_SHA256",
            Some(C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) => "ECDHE-ECDSA-AES128-GCM-SHA256",
            Some(C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) => "ECDHE-RSA-AES128-GCM-SHA256",
            Some(C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384) => "ECDHE-ECDSA-AES256-GCM-SHA384",
            Some(C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) => "ECDHE-RSA-AES256-GCM-SHA384",
            Some(C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256) => {
                "ECDHE-ECDSA-CHACHA20-POLY1305"
            }
            Some(C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256) => "ECDHE-RSA-CHACHA20-POLY1305",
            _ => "",
        }
    }

    /// Whether the session was resumed (`ssl_fc_is_resumed`).
    pub fn resumed(&self) -> bool {
        self.conn.borrow().handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::server::{build, BindSsl, CrtArg};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use std::path::Path;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name)
    }

    fn client_config() -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
            .unwrap();
        let mut c = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(c)
    }

    /// Echoes until the client closes, through the readiness interface only.
    async fn echo(s: &TlsSock) -> usize {
        let mut buf = vec![0u8; 8192];
        let mut total = 0;
        loop {
            s.readable().await.unwrap();
            let n = match s.try_read(&mut buf) {
                Ok(0) => return total,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            };
            total += n;
            let mut off = 0;
            while off < n {
                s.writable().await.unwrap();
                match s.try_write(&buf[off..n]) {
                    Ok(w) => off += w,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn handshake_then_a_megabyte_each_way_over_real_sockets() {
        let built = build(&BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-ecdsa.pem"))],
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            ..Default::default()
        })
        .unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut sock = std::net::TcpStream::connect(addr).unwrap();
            let mut conn = rustls::ClientConnection::new(
                client_config(),
                ServerName::try_from("www.example.com").unwrap(),
            )
            .unwrap();
            let mut tls = rustls::Stream::new(&mut conn, &mut sock);
            // 256 KiB at a time, then read it back: more than the socket buffers hold, so
            // the server's records wait for room and must be flushed as the client reads.
            let data: Vec<u8> = (0..1_048_576u32).map(|i| (i % 251) as u8).collect();
            let mut back = Vec::new();
            let mut buf = vec![0u8; 65536];
            for chunk in data.chunks(256 * 1024) {
                tls.write_all(chunk).unwrap();
                tls.flush().unwrap();
                let want = back.len() + chunk.len();
                while back.len() < want {
                    let n = tls.read(&mut buf).unwrap();
                    assert!(n > 0, "early end after {} bytes", back.len());
                    back.extend_from_slice(&buf[..n]);
                }
            }
            assert!(back == data, "echo differs");
            conn.send_close_notify();
            conn.write_tls(&mut sock).unwrap();
        });
        let (sock, _) = l.accept().await.unwrap();
        let s = TlsSock::accept(sock, built.config.clone()).await.unwrap();
        assert_eq!(s.sni().as_deref(), Some("www.example.com"));
        assert_eq!(s.alpn().as_deref(), Some(&b"http/1.1"[..]));
        assert_eq!(s.version(), "TLSv1.3");
        assert!(!s.cipher().is_empty());
        assert!(!s.resumed());
        assert_eq!(echo(&s).await, 1_048_576);
        client.join().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_client_that_speaks_no_tls_fails_the_handshake() {
        let built = build(&BindSsl {
            crts: vec![CrtArg::Crt(fixture("www-rsa.pem"))],
            ..Default::default()
        })
        .unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut sock = std::net::TcpStream::connect(addr).unwrap();
            sock.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut out = Vec::new();
            let _ = sock.read_to_end(&mut out);
            out
        });
        let (sock, _) = l.accept().await.unwrap();
        let e = TlsSock::accept(sock, built.config.clone())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        let alert = client.join().unwrap();
        assert_eq!(alert.first(), Some(&0x15), "a TLS alert record: {alert:?}");
    }
}
