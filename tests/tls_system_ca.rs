//! `ca-file @system-ca` and `ca-file DIR`, side by side with Debian's haproxy 2.6: a server
//! whose certificate the test CA signed is refused with the system's CAs (the test CA is not
//! among them, and `SSL_CERT_DIR` does not change that in haproxy 2.6.12 either) and accepted
//! with a directory holding the test CA.
//!
//! One test in this file: it sets `SSL_CERT_DIR` for the proxies it starts.
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use support::side::{both, Run};
use support::tls as client;
use support::{free_port, TempDir};

const DEFAULTS: &str = "defaults\n    mode http\n    timeout client 2s\n    timeout server 2s\n    timeout connect 2s\n";

fn status(port: u16) -> String {
    let mut s = support::connect(port);
    let r = client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    format!("{} {}", r.status(), String::from_utf8_lossy(&r.body))
}

#[test]
fn system_cas_and_ca_directories_verify_servers() {
    let dir = TempDir::new("system-ca");
    std::fs::create_dir_all(dir.path("cas")).unwrap();
    std::fs::copy(client::fixture("ca.pem"), dir.path("cas/test-ca.pem")).unwrap();
    // OpenSSL looks a CA up in a directory by its subject's hash: `openssl rehash` links it.
    let rehash = std::process::Command::new("openssl")
        .args(["rehash", dir.path("cas").to_str().unwrap()])
        .status();
    assert!(rehash.is_ok_and(|s| s.success()), "openssl rehash");
    // The TLS server the proxies talk to: Bascule terminating with a test-CA certificate.
    let tls_port = free_port();
    let _server = Run::start(
        support::BIN,
        &format!(
            "{DEFAULTS}frontend tls\n    bind 127.0.0.1:{tls_port} ssl crt @CRT@/www-ecdsa.pem\n\
             \x20   http-request return status 200 content-type text/plain string verified\n"
        ),
        tls_port,
    );
    let cfg = |ca: &str| {
        format!(
            "{DEFAULTS}frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
             backend be\n    server s1 127.0.0.1:{tls_port} ssl verify required ca-file {ca} sni str(www.example.com)\n"
        )
    };
    let cas = dir.path("cas");
    for (ca, env, want) in [
        ("@system-ca", None, "503"),
        ("@system-ca", Some(&cas), "503"),
        (cas.to_str().unwrap(), None, "200 verified"),
    ] {
        match env {
            Some(d) => std::env::set_var("SSL_CERT_DIR", d),
            None => std::env::remove_var("SSL_CERT_DIR"),
        }
        both("system ca", &cfg(ca), |bin, _, p2, _| {
            let got = status(p2);
            assert!(got.starts_with(want), "{bin} {ca} {env:?}: {got}");
            vec![got.split_whitespace().next().unwrap().to_string()]
        });
    }
}
