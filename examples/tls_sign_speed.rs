//! The raw speed of the signature a full TLS 1.3 handshake costs the server, through the path
//! Bascule's handshakes take: a `crt` bundle loaded by `tls::cert` (rustls's aws-lc-rs key
//! provider), the scheme rustls picks for an OpenSSL client, then `Signer::sign` on a
//! handshake-sized message. It is the figure to set beside `openssl speed -seconds 3 rsa2048`
//! (or `ecdsap256`) when a handshake benchmark (bench/tls.sh) puts the private-key operation
//! first in the profile: it tells whether the aws-lc we build is as fast as OpenSSL's.
//!
//! Usage: `cargo run --release --example tls_sign_speed -- [SECONDS] [BUNDLE...]` (default 3 s,
//! tests/tls/www-rsa.pem and tests/tls/www-ecdsa.pem). Pin it as the benchmark pins the proxy
//! (`taskset -c 0`) for comparable figures.

use std::path::Path;
use std::time::{Duration, Instant};

use rustls::SignatureScheme;

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let secs: f64 = match args.peek().and_then(|a| a.parse().ok()) {
        Some(s) => {
            args.next();
            s
        }
        None => 3.0,
    };
    let mut files: Vec<String> = args.collect();
    if files.is_empty() {
        files = vec![
            "tests/tls/www-rsa.pem".to_string(),
            "tests/tls/www-ecdsa.pem".to_string(),
        ];
    }
    // What an OpenSSL 3 client offers, in its order: rustls takes the first its key can do.
    let offered = [
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::ECDSA_NISTP384_SHA384,
        SignatureScheme::ECDSA_NISTP521_SHA512,
        SignatureScheme::ED25519,
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::RSA_PSS_SHA384,
        SignatureScheme::RSA_PSS_SHA512,
    ];
    // A TLS 1.3 CertificateVerify signs 64 spaces, a context string and a transcript hash.
    let message = [0x20u8; 64 + 34 + 48];
    for file in &files {
        let cert = match bascule::tls::cert::load_file(Path::new(file)) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("tls_sign_speed: {file}: {e}");
                std::process::exit(1);
            }
        };
        let Some(signer) = cert.key.key.choose_scheme(&offered) else {
            eprintln!("tls_sign_speed: {file}: no scheme among an OpenSSL client's");
            std::process::exit(1);
        };
        let scheme = signer.scheme();
        let until = Instant::now() + Duration::from_secs_f64(secs);
        let start = Instant::now();
        let mut n = 0u64;
        while Instant::now() < until {
            for _ in 0..16 {
                let sig = signer.sign(&message).expect("sign");
                std::hint::black_box(sig);
            }
            n += 16;
        }
        let took = start.elapsed().as_secs_f64();
        println!(
            "{file}: {scheme:?}: {n} signatures in {took:.2}s: {:.1} sign/s, {:.1} µs each",
            n as f64 / took,
            took * 1e6 / n as f64
        );
    }
}
