//! A TLS client for tests: rustls over a blocking `TcpStream`, trusting the test CA of
//! `tests/tls` (see `tests/tls/make.sh`), with the HTTP/1.1 exchange helpers the TLS tests use.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use super::IO_TIMEOUT;

/// A file of `tests/tls`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tls")
        .join(name)
}

/// The first certificate of a PEM file (a `crt` bundle's leaf), DER.
pub fn leaf_of(name: &str) -> Vec<u8> {
    CertificateDer::pem_file_iter(fixture(name))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}

/// A client configuration trusting the test CA, offering `alpn`, limited to TLS 1.2 when
/// `tls12_only`.
pub fn config(alpn: &[&str], tls12_only: bool) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
        .unwrap();
    let builder = if tls12_only {
        ClientConfig::builder_with_protocol_versions(&[&rustls::version::TLS12])
    } else {
        ClientConfig::builder()
    };
    let mut c = builder.with_root_certificates(roots).with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    Arc::new(c)
}

/// A client configuration trusting the test CA and showing the certificate (and key) of the
/// bundle `crt` (a file of `tests/tls`).
pub fn config_with_cert(crt: &str) -> Arc<ClientConfig> {
    use rustls::pki_types::PrivateKeyDer;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap())
        .unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture(crt))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(fixture(crt)).unwrap();
    Arc::new(
        ClientConfig::builder()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap(),
    )
}

pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// Connects to 127.0.0.1:`port` and completes a handshake sending `sni`.
pub fn connect(port: u16, sni: &str, config: Arc<ClientConfig>) -> io::Result<TlsStream> {
    let sock = TcpStream::connect(("127.0.0.1", port))?;
    sock.set_read_timeout(Some(IO_TIMEOUT))?;
    sock.set_write_timeout(Some(IO_TIMEOUT))?;
    let name = ServerName::try_from(sni.to_string()).map_err(io::Error::other)?;
    let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut s = StreamOwned::new(conn, sock);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// The certificate the server presented (DER).
pub fn peer_leaf(s: &TlsStream) -> Vec<u8> {
    s.conn.peer_certificates().unwrap()[0].as_ref().to_vec()
}

/// An HTTP/1.1 response as read: head and body (Content-Length framed, else until the end).
#[derive(Debug)]
pub struct Response {
    pub head: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn status(&self) -> u16 {
        self.head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        super::http::header(&self.head, name)
    }
}

/// Sends `request` and reads one response from `s` (any byte stream).
pub fn exchange<S: Read + Write>(s: &mut S, request: &str) -> io::Result<Response> {
    s.write_all(request.as_bytes())?;
    s.flush()?;
    read_response(s)
}

/// Reads one response: the head, then a Content-Length body or everything until the end.
///
/// It never reads past a Content-Length body, so responses to pipelined requests that arrive
/// in one TLS record are read one at a time.
pub fn read_response<S: Read>(s: &mut S) -> io::Result<Response> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if read_some(s, &mut byte)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let mut body = Vec::new();
    let mut chunk = [0u8; 16384];
    let length = super::http::header(&head, "content-length").and_then(|v| v.parse().ok());
    match length {
        Some(len) => {
            while body.len() < len {
                let want = (len - body.len()).min(chunk.len());
                let n = read_some(s, &mut chunk[..want])?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        None if head.starts_with("HTTP/1.1 101") => {}
        None => loop {
            let n = read_some(s, &mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        },
    }
    Ok(Response { head, body })
}

/// A read where a TLS peer that closes without close_notify counts as an end of stream.
fn read_some<S: Read>(s: &mut S, chunk: &mut [u8]) -> io::Result<usize> {
    match s.read(chunk) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        r => r,
    }
}

/// Whether the peer sent close_notify before closing (a clean TLS close).
pub fn closed_cleanly(s: &mut TlsStream) -> bool {
    let mut b = [0u8; 64];
    matches!(s.read(&mut b), Ok(0))
}

/// One `GET /` with `Connection: close` through `openssl s_client -quiet ARGS -connect
/// 127.0.0.1:PORT` (OpenSSL's client sends the same hello every time, where rustls orders its
/// extensions at random): the last line the answer ends with (its body, for a one-line body).
pub fn openssl_get(port: u16, args: &[&std::ffi::OsStr]) -> String {
    use std::process::{Command, Stdio};
    let mut c = Command::new("openssl")
        .args(["s_client", "-quiet"])
        .args(args)
        .arg("-connect")
        .arg(format!("127.0.0.1:{port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client");
    c.stdin
        .take()
        .unwrap()
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let _ = c.wait();
    out.lines().last().unwrap_or("<no answer>").to_string()
}
