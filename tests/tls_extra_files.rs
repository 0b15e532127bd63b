//! `ssl-load-extra-files` and `ssl-load-extra-del-ext`, side by side with Debian's haproxy 2.6:
//! `crt bun.pem` loads the bundle `bun.pem.rsa` + `bun.pem.ecdsa` when `bun.pem` does not exist
//! (the default, or `bundle`), `foo.crt`'s key is `foo.key` under `ssl-load-extra-del-ext`;
//! which configurations load (`-c`) agrees with haproxy's verdicts.
//!
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::process::Command;

use support::side::both;
use support::tls::{self as client, leaf_of};
use support::{have_haproxy, TempDir, BIN, HAPROXY};

const DEFAULTS: &str = "defaults\n    mode http\n    timeout client 2s\n    timeout server 2s\n    timeout connect 2s\n";

fn files(dir: &TempDir) {
    for (from, to) in [
        ("www-rsa.pem", "bun.pem.rsa"),
        ("www-ecdsa.pem", "bun.pem.ecdsa"),
        ("split.pem", "split.pem"),
        ("split.pem.key", "split.pem.key"),
        ("split.pem", "s.crt"),
        ("split.pem.key", "s.key"),
    ] {
        std::fs::copy(client::fixture(from), dir.path(to)).unwrap();
    }
}

#[test]
fn bundles_and_del_ext_serve_handshakes() {
    let dir = TempDir::new("extra-files");
    files(&dir);
    let d = dir.0.display();
    let cfg = format!(
        "global\n    ssl-load-extra-del-ext\n{DEFAULTS}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt {d}/bun.pem crt {d}/s.crt\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc_sni]\"\n"
    );
    let (ecdsa, split) = (leaf_of("www-ecdsa.pem"), leaf_of("split.pem"));
    both("extra files", &cfg, |bin, _, p2, _| {
        let mut out = Vec::new();
        for (sni, want) in [("www.example.com", &ecdsa), ("split.example.net", &split)] {
            let mut s = client::connect(p2, sni, client::config(&[], false)).unwrap();
            assert!(client::peer_leaf(&s) == *want, "{bin} {sni}");
            let r = client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            out.push(String::from_utf8_lossy(&r.body).into_owned());
        }
        out
    });
}

#[test]
fn which_configurations_load_agrees_with_haproxy() {
    if !have_haproxy("extra files -c") {
        return;
    }
    let dir = TempDir::new("extra-files-c");
    files(&dir);
    for global in [
        "",
        "ssl-load-extra-files none",
        "ssl-load-extra-files key",
        "ssl-load-extra-files bundle sctl",
        "ssl-load-extra-del-ext",
        "ssl-load-extra-files bogus",
        "ssl-load-extra-files all none",
    ] {
        for crt in ["bun.pem", "split.pem", "s.crt"] {
            let cfg = dir.path("c.cfg");
            std::fs::write(
                &cfg,
                format!(
                    "global\n    {global}\n{DEFAULTS}frontend fe\n    bind 127.0.0.1:8443 ssl crt {}\n    http-request return status 200\n",
                    dir.path(crt).display()
                ),
            )
            .unwrap();
            let ok = |bin: &str| {
                Command::new(bin)
                    .args(["-c", "-f", cfg.to_str().unwrap()])
                    .output()
                    .unwrap()
                    .status
                    .success()
            };
            assert_eq!(
                ok(HAPROXY),
                ok(BIN),
                "[{global}] crt {crt}: haproxy vs Bascule"
            );
        }
    }
}

#[test]
fn under_del_ext_set_ssl_cert_foo_key_replaces_the_key_of_foo_crt() {
    let dir = TempDir::new("extra-del-ext-cli");
    files(&dir);
    let d = dir.0.display();
    let cfg = format!(
        "global\n    ssl-load-extra-del-ext\n    stats socket @SOCK@ level admin\n{DEFAULTS}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt {d}/s.crt\n\
         \x20   http-request return status 200\n"
    );
    let next = std::fs::read_to_string(client::fixture("next-www.pem")).unwrap();
    let at = next.find("-----BEGIN PRIVATE KEY-----").unwrap();
    let (chain, key) = (next[..at].trim_end(), next[at..].trim_end());
    both("del-ext set ssl cert .key", &cfg, |_, _, _, run| {
        let out = vec![
            run.cli(&format!("set ssl cert {d}/s.crt <<\n{chain}\n")),
            run.cli(&format!("set ssl cert {d}/s.key <<\n{key}\n")),
            run.cli(&format!("commit ssl cert {d}/s.crt")),
            run.cli(&format!("show ssl cert {d}/s.crt"))
                .lines()
                .filter(|l| l.starts_with("Subject:"))
                .collect(),
            // Without a transaction, `s.key` alone is about `s.crt` too.
            run.cli(&format!("set ssl cert {d}/s.key <<\n{key}\n")),
            run.cli(&format!("abort ssl cert {d}/s.crt")),
        ];
        assert_eq!(
            out,
            [
                format!("Transaction created for certificate {d}/s.crt!\n\n"),
                format!("Transaction updated for certificate {d}/s.crt!\n\n"),
                format!("Committing {d}/s.crt.\nSuccess!\n\n"),
                "Subject: /C=FR/O=Bascule Tests/CN=www.example.com".to_string(),
                format!("Transaction created for certificate {d}/s.crt!\n\n"),
                format!("Transaction aborted for certificate '{d}/s.crt'!\n\n"),
            ]
        );
        out
    });
}
