//! X.509 version 1 certificates (servers' and clients'), and client certificates checked by
//! `bind ... verify` as haproxy (OpenSSL) checks them, side by side with Debian's haproxy 2.6:
//! version 1 certificates and a version 1 CRL (what HAProxy's own tests use), OpenSSL's error codes in `ssl_c_verify`, `ssl_c_err`,
//! `ssl_c_ca_err`, and `crt-ignore-err` waiving some of them. The proxy is its own client:
//! `server ... ssl crt FILE` lines present the certificates (as in HAProxy's reg-tests), so
//! the client side's loading of version 1 certificates is exercised too.
//!
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use support::http::Client;
use support::side::both;

const GLOBAL: &str = "defaults\n    mode http\n    timeout client 2s\n    timeout server 5s\n    timeout connect 2s\n";

/// A clear listener on @P2@ whose path picks the certificate a server line presents to the
/// TLS listener on @P1@, which answers with what it found. TLS 1.2: a refused certificate
/// fails the server's handshake before any request is sent (503; in TLS 1.3 the client may
/// have sent its request already, a 502, or not, a race).
fn config(bind_opts: &str) -> String {
    let mut cfg = format!(
        "{GLOBAL}frontend clear\n    bind 127.0.0.1:@P2@\n    use_backend %[path,field(2,/)]\n\
         frontend tls\n    bind 127.0.0.1:@P1@ ssl crt @CRT@/www-ecdsa.pem ca-file @CRT@/ca.pem {bind_opts}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_c_used] %[ssl_c_verify] %[ssl_c_err] %[ssl_c_ca_err] %[ssl_c_ca_err_depth]\"\n"
    );
    for (name, crt) in [
        ("v1", " crt @CRT@/client-v1.pem"),
        ("expired", " crt @CRT@/client-expired.pem"),
        ("revoked", " crt @CRT@/client-revoked.pem"),
        ("stranger", " crt @CRT@/client-stranger.pem"),
        ("none", ""),
    ] {
        cfg.push_str(&format!(
            "backend {name}\n    server s 127.0.0.1:@P1@ ssl verify none ssl-max-ver TLSv1.2{crt}\n"
        ));
    }
    cfg
}

fn answers(p2: u16) -> Vec<String> {
    ["v1", "expired", "revoked", "stranger", "none"]
        .iter()
        .map(|b| {
            let r = Client::connect(p2).get(&format!("/{b}"));
            match r.status {
                200 => format!("{b}: {}", String::from_utf8_lossy(&r.body)),
                s => format!("{b}: {s}"),
            }
        })
        .collect()
}

#[test]
fn version_1_certificates_and_openssl_s_error_codes() {
    let cfg = config("verify optional crl-file @CRT@/crl.pem crt-ignore-err 10");
    both("client auth, some errors waived", &cfg, |_, _, p2, _| {
        let out = answers(p2);
        assert_eq!(
            out,
            [
                "v1: 1 0 0 0 0",
                // Expired (10), waived; revoked (23) is not; the stranger is self-signed (18).
                "expired: 1 10 10 0 0",
                "revoked: 503",
                "stranger: 503",
                "none: 0 0 0 0 0",
            ]
        );
        out
    });
}

#[test]
fn every_error_waived_and_a_certificate_required() {
    let cfg = config("verify required crl-file @CRT@/crl.pem crt-ignore-err all");
    both("client auth, all waived", &cfg, |_, _, p2, _| {
        let out = answers(p2);
        assert_eq!(
            out,
            [
                "v1: 1 0 0 0 0",
                "expired: 1 10 10 0 0",
                "revoked: 1 23 23 0 0",
                // Self-signed (18, the first error about it), then no CRL from its issuer (3, the
                // last error met: the result).
                "stranger: 1 3 18 0 0",
                "none: 503",
            ]
        );
        out
    });
}

/// A clear listener on @P2@ whose one server shows `client-v1.pem` to the TLS listener on
/// @P1@, which waives every error and answers with the certificate's name, what verifying it
/// found and whether the session was resumed (haproxy does not resume these sessions, Bascule
/// does: that part is Bascule's alone).
const ROTATION: &str = "global\n    stats socket @SOCK@ level admin\n\
defaults\n    mode http\n    timeout client 2s\n    timeout server 5s\n    timeout connect 2s\n\
frontend clear\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
backend be\n    server s 127.0.0.1:@P1@ ssl verify none crt @CRT@/client-v1.pem\n\
frontend tls\n    bind 127.0.0.1:@P1@ ssl crt @CRT@/www-ecdsa.pem ca-file @CRT@/ca.pem verify optional crt-ignore-err all\n\
\x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_c_s_dn(CN)] %[ssl_c_verify] %[ssl_fc_is_resumed]\"\n";

#[test]
fn a_server_s_certificate_rotates_and_resumed_sessions_keep_their_verdict() {
    let path = support::tls::fixture("client-v1.pem");
    let path = path.display();
    let expired = std::fs::read_to_string(support::tls::fixture("client-expired.pem")).unwrap();
    both("server crt rotation", ROTATION, |bin, _, p2, run| {
        let mut resumed = Vec::new();
        let mut get = || {
            let body = String::from_utf8_lossy(&Client::connect(p2).get("/").body).into_owned();
            let (seen, flag) = body.rsplit_once(' ').unwrap();
            resumed.push(flag == "1");
            seen.to_string()
        };
        let mut out = vec![get(), get()];
        let shown = run.cli(&format!("show ssl cert {path}"));
        out.extend(
            shown
                .lines()
                .filter(|l| l.starts_with("Subject:"))
                .map(String::from),
        );
        out.push(run.cli(&format!("set ssl cert {path} <<\n{}\n", expired.trim_end())));
        out.push(run.cli(&format!("commit ssl cert {path}")));
        // The sessions made with the old certificate are not resumed: a full handshake
        // shows the new one; the next connection (resumed by Bascule) is still expired (10).
        out.extend([get(), get()]);
        if bin == support::BIN {
            assert_eq!(resumed, [false, true, false, true]);
        }
        let shown = run.cli(&format!("show ssl cert {path}"));
        out.extend(
            shown
                .lines()
                .filter(|l| l.starts_with("Subject:"))
                .map(String::from),
        );
        assert_eq!(
            out,
            [
                "client-v1 0".to_string(),
                "client-v1 0".to_string(),
                "Subject: /CN=client-v1".to_string(),
                format!("Transaction created for certificate {path}!\n\n"),
                format!("Committing {path}.\nSuccess!\n\n"),
                "client-expired 10".to_string(),
                "client-expired 10".to_string(),
                "Subject: /CN=client-expired".to_string(),
            ]
        );
        out
    });
}

#[test]
fn a_server_showing_a_version_1_certificate() {
    // TLS 1.2 and 1.3: the handshake signature is checked with the certificate's key either way.
    let cfg = format!(
        "{GLOBAL}frontend clear\n    bind 127.0.0.1:@P2@\n    use_backend %[path,field(2,/)]\n\
         \x20   http-response set-header x-server \"%[ssl_bc_protocol] %[ssl_s_s_dn(CN)] %[ssl_s_version]\"\n\
         frontend tls\n    bind 127.0.0.1:@P1@ ssl crt @CRT@/server-v1.pem\n\
         \x20   http-request return status 200\n\
         backend tls12\n    server s 127.0.0.1:@P1@ ssl verify none ssl-max-ver TLSv1.2\n\
         backend tls13\n    server s 127.0.0.1:@P1@ ssl verify none\n\
         backend verified\n    retries 0\n    server s 127.0.0.1:@P1@ ssl verify required ca-file @CRT@/ca.pem sni str(server-v1)\n\
         backend verifyhost\n    retries 0\n    server s 127.0.0.1:@P1@ ssl verify required ca-file @CRT@/ca.pem verifyhost server-v1\n\
         backend wrong_name\n    retries 0\n    server s 127.0.0.1:@P1@ ssl verify required ca-file @CRT@/ca.pem sni str(other.example.net)\n\
         backend wrong_ca\n    retries 0\n    server s 127.0.0.1:@P1@ ssl verify required ca-file @CRT@/client-stranger.pem sni str(server-v1)\n"
    );
    both("server with a v1 certificate", &cfg, |_, _, p2, _| {
        let out: Vec<String> = [
            "tls12",
            "tls13",
            "verified",
            "verifyhost",
            "wrong_name",
            "wrong_ca",
        ]
        .iter()
        .map(|b| {
            let r = Client::connect(p2).get(&format!("/{b}"));
            format!(
                "{} {}",
                r.status,
                support::http::header(&r.head, "x-server").unwrap_or("-")
            )
        })
        .collect();
        assert_eq!(
            out,
            [
                "200 TLSv1.2 server-v1 1",
                "200 TLSv1.3 server-v1 1",
                // verify required: the chain as OpenSSL checks it, the name as HAProxy does.
                "200 TLSv1.3 server-v1 1",
                "200 TLSv1.3 server-v1 1",
                "503 -",
                "503 -",
            ]
        );
        out
    });
}

#[test]
fn ca_verify_file_verifies_as_ca_file_does() {
    // The test CA is in ca-verify-file only (ca-file holds the stranger): it verifies
    // client-v1 all the same.
    let cfg = config("verify required crt-ignore-err all").replace(
        "ca-file @CRT@/ca.pem",
        "ca-file @CRT@/client-stranger.pem ca-verify-file @CRT@/ca.pem",
    );
    both("ca-verify-file", &cfg, |_, _, p2, _| {
        let out = answers(p2);
        assert_eq!(
            out,
            [
                "v1: 1 0 0 0 0",
                "expired: 1 10 10 0 0",
                "revoked: 1 0 0 0 0",
                "stranger: 1 0 0 0 0",
                "none: 503",
            ]
        );
        out
    });
}

#[test]
fn ca_and_crl_files_made_at_run_time_serve_an_added_crt_list_line() {
    let dir = support::TempDir::new("cafile-cli");
    let d = dir.0.display().to_string();
    let list = format!("{d}/list.txt");
    std::fs::write(
        &list,
        "@CRT@/www-ecdsa.pem\n".replace(
            "@CRT@",
            support::tls::fixture("")
                .to_str()
                .unwrap()
                .trim_end_matches('/'),
        ),
    )
    .unwrap();
    let ca = std::fs::read_to_string(support::tls::fixture("ca.pem")).unwrap();
    let crl = std::fs::read_to_string(support::tls::fixture("crl.pem")).unwrap();
    let other = support::tls::fixture("other-rsa.pem").display().to_string();
    // The bind trusts only the stranger: client-v1 fails with 20/21 (waived), until a line
    // whose CA is the test CA serves other.example.net.
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n{GLOBAL}frontend clear\n    bind 127.0.0.1:@P2@\n    use_backend %[path,field(2,/)]\n\
         frontend tls\n    bind 127.0.0.1:@P1@ ssl strict-sni crt-list {list} ca-file @CRT@/client-stranger.pem verify required crt-ignore-err all\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_c_verify]\"\n\
         backend www\n    server s 127.0.0.1:@P1@ ssl verify none ssl-max-ver TLSv1.2 sni str(www.example.com) crt @CRT@/client-v1.pem\n\
         backend other\n    server s 127.0.0.1:@P1@ ssl verify none ssl-max-ver TLSv1.2 sni str(other.example.net) crt @CRT@/client-revoked.pem\n"
    );
    both("ca-file and crl-file at run time", &cfg, |_, _, p2, run| {
        let get = |b: &str| {
            let r = Client::connect(p2).get(&format!("/{b}"));
            format!("{b}: {} {}", r.status, String::from_utf8_lossy(&r.body))
        };
        let details = |cmd: &str| -> String {
            run.cli(cmd)
                .lines()
                .filter(|l| {
                    l.starts_with("Status")
                        || l.starts_with("Issuer")
                        || l.starts_with("Serial Number")
                        || l.contains("certificate(s)")
                        || l.starts_with("Version")
                })
                .map(|l| format!("{l}\n"))
                .collect()
        };
        let mut out = vec![get("www")];
        for (kind, name, content) in [("ca-file", "ca.mem", &ca), ("crl-file", "crl.mem", &crl)] {
            out.push(run.cli(&format!("new ssl {kind} {name}")));
            out.push(run.cli(&format!("new ssl {kind} {name}")));
            out.push(run.cli(&format!(
                "set ssl {kind} nope.pem <<\n{}\n",
                content.trim_end()
            )));
            out.push(run.cli(&format!(
                "set ssl {kind} {name} <<\n{}\n",
                content.trim_end()
            )));
            out.push(details(&format!("show ssl {kind} *{name}")));
            out.push(run.cli(&format!("commit ssl {kind} {name}")));
            out.push(details(&format!("show ssl {kind} {name}")));
        }
        // CA and CRL files share their names.
        out.push(run.cli("new ssl crl-file ca.mem"));
        // (haproxy lists @system-ca too, which it loads for its HTTP client.)
        out.push(
            run.cli("show ssl ca-file")
                .lines()
                .filter(|l| l.contains(".mem"))
                .collect(),
        );
        out.push(run.cli(&format!("new ssl cert {other}")));
        out.push(run.cli(&format!(
            "set ssl cert {other} <<\n{}\n",
            std::fs::read_to_string(&other).unwrap().trim_end()
        )));
        out.push(run.cli(&format!("commit ssl cert {other}")));
        out.push(run.cli(&format!("add ssl crt-list {list} <<\n{other} [ca-file ca.mem crl-file crl.mem] other.example.net\n")));
        // The line's CA trusts the client, its CRL revokes it (waived): 23.
        out.push(get("other"));
        out.push(run.cli("del ssl ca-file ca.mem"));
        out.push(run.cli(&format!("del ssl crt-list {list} {other}")));
        out.push(run.cli("del ssl ca-file ca.mem"));
        out.push(run.cli("del ssl crl-file crl.mem"));
        out.push(get("other"));
        assert_eq!(out[0], "www: 200 21");
        assert!(out.contains(&"other: 200 23".to_string()), "{out:?}");
        out
    });
}
