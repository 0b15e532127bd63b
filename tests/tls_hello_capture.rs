//! The client's ClientHello lists (`tune.ssl.capture-buffer-size`): `ssl_fc_cipherlist_bin`,
//! `_hex`, `_xxh`, `ssl_fc_extlist_bin`, `ssl_fc_eclist_bin`, `ssl_fc_ecformats_bin` and
//! `ssl_fc_protocol_hello_id`, the parts of a JA3 fingerprint, through haproxy 2.6 and Bascule
//! for the same OpenSSL clients (TLS 1.3 and TLS 1.2), on a plain `ssl crt` bind and on a
//! `crt-list` one (whose ClientHello Bascule reads before choosing a configuration); without
//! the setting the fetches have no value in either.
#![allow(clippy::disallowed_methods)]

mod support;

use support::side::both;

const FETCHES: &str = "hid=%[ssl_fc_protocol_hello_id] c=%[ssl_fc_cipherlist_hex] \
    c1=%[ssl_fc_cipherlist_hex(1)] b=%[ssl_fc_cipherlist_bin,hex] x=%[ssl_fc_cipherlist_xxh] \
    e=%[ssl_fc_extlist_bin,hex] e1=%[ssl_fc_extlist_bin(1),hex] ec=%[ssl_fc_eclist_bin,hex] \
    ec1=%[ssl_fc_eclist_bin(1),hex] ef=%[ssl_fc_ecformats_bin,hex] s=%[ssl_fc_cipherlist_str] \
    s1=%[ssl_fc_cipherlist_str(1)]";

fn config(capture: &str, bind: &str) -> String {
    format!(
        "global\n{capture}defaults\n    mode http\n    timeout client 2s\n    timeout server 2s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@ ssl {bind}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"{FETCHES}\"\n"
    )
}

/// The answers to a TLS 1.3 and a TLS 1.2 `openssl s_client`.
fn answers(p2: u16) -> Vec<String> {
    ["-tls1_3", "-tls1_2"]
        .into_iter()
        .map(|version| support::tls::openssl_get(p2, &[version.as_ref()]))
        .collect()
}

#[test]
fn client_hello_lists_as_haproxy_captures_them() {
    let cfg = config(
        "    tune.ssl.capture-buffer-size 256\n",
        "crt @CRT@/www-ecdsa.pem",
    );
    both("hello lists", &cfg, |_, _, p2, _| {
        let seen = answers(p2);
        // Something was captured: the TLS 1.3 client offers TLS_AES_256_GCM_SHA384 (0x1302).
        assert!(seen[0].contains("c=1302"), "{seen:?}");
        seen
    });
}

#[test]
fn client_hello_lists_on_a_crt_list_bind_and_cut_at_the_capture_size() {
    let dir = support::TempDir::new("hello-crt-list");
    let crt = support::tls::fixture("www-ecdsa.pem");
    std::fs::write(
        dir.path("list.txt"),
        format!("{} [alpn http/1.1] www.example.com\n", crt.display()),
    )
    .unwrap();
    let cfg = config(
        "    tune.ssl.capture-cipherlist-size 8\n",
        &format!("crt-list {}", dir.path("list.txt").display()),
    );
    both("hello lists crt-list", &cfg, |_, _, p2, _| answers(p2));
}

#[test]
fn without_a_capture_size_the_lists_have_no_value() {
    let cfg = config("", "crt @CRT@/www-ecdsa.pem");
    both("no capture", &cfg, |_, _, p2, _| answers(p2));
}
