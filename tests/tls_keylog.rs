//! `tune.ssl.keylog on`: the client random and the secrets of each handshake, read by the
//! `ssl_fc_client_random` and `ssl_fc_*_secret` fetches, are the ones the client itself logs
//! (`openssl s_client -keylogfile`), through haproxy 2.6 and through Bascule, TLS 1.3 and 1.2
//! (which has none of these secrets); and which fetches have a value, and of what length, is
//! the same in both.
#![allow(clippy::disallowed_methods)]

mod support;

use support::side::both;

const FIELDS: &[(&str, &str)] = &[
    ("cr", "ssl_fc_client_random,hex,lower"),
    (
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "ssl_fc_client_handshake_traffic_secret",
    ),
    (
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "ssl_fc_server_handshake_traffic_secret",
    ),
    ("CLIENT_TRAFFIC_SECRET_0", "ssl_fc_client_traffic_secret_0"),
    ("SERVER_TRAFFIC_SECRET_0", "ssl_fc_server_traffic_secret_0"),
    ("EXPORTER_SECRET", "ssl_fc_exporter_secret"),
    ("EARLY_EXPORTER_SECRET", "ssl_fc_early_exporter_secret"),
    (
        "CLIENT_EARLY_TRAFFIC_SECRET",
        "ssl_fc_client_early_traffic_secret",
    ),
];

/// One request through `openssl s_client VERSION -keylogfile`: the answer's fields (`label=value`)
/// and the key log the client wrote.
fn exchange(port: u16, version: &str, dir: &support::TempDir) -> (Vec<(String, String)>, String) {
    let log = dir.path(&format!("keys{version}.txt"));
    let _ = std::fs::remove_file(&log);
    let body = support::tls::openssl_get(
        port,
        &[version.as_ref(), "-keylogfile".as_ref(), log.as_os_str()],
    );
    let fields = body
        .split(' ')
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (fields, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn secrets_are_the_client_s_own_as_haproxy_gives_them() {
    let format: Vec<String> = FIELDS.iter().map(|(k, f)| format!("{k}=%[{f}]")).collect();
    let cfg = format!(
        "global\n    tune.ssl.keylog on\n\
         defaults\n    mode http\n    timeout client 2s\n    timeout server 2s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"{}\"\n",
        format.join(" ")
    );
    let dir = support::TempDir::new("keylog");
    both("keylog", &cfg, |bin, _, p2, _| {
        let mut shape = Vec::new();
        for version in ["-tls1_3", "-tls1_2"] {
            let (fields, keylog) = exchange(p2, version, &dir);
            let random = &fields.iter().find(|(k, _)| k == "cr").expect("cr").1;
            assert_eq!(random.len(), 64, "{bin} {version}: {fields:?}");
            for (label, value) in &fields {
                if label == "cr" || value.is_empty() {
                    continue;
                }
                // The client logged the same secret for the same client random.
                let line = format!("{label} {random} {value}");
                assert!(
                    keylog.lines().any(|l| l == line),
                    "{bin} {version}: {line} not in the client's key log:\n{keylog}"
                );
            }
            shape.push(
                fields
                    .iter()
                    .map(|(k, v)| format!("{k}:{}", v.len()))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        shape
    });
}

#[test]
fn without_keylog_there_are_no_secrets() {
    let cfg = "defaults\n    mode http\n    timeout client 2s\n    timeout server 2s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"s=%[ssl_fc_server_traffic_secret_0]\"\n";
    let dir = support::TempDir::new("nokeylog");
    both("no keylog", cfg, |_, _, p2, _| {
        let (fields, _) = exchange(p2, "-tls1_3", &dir);
        vec![format!("{fields:?}")]
    });
}
