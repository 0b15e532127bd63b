//! `crt-list` lines with SSL options of their own (`[alpn ...]`, `[ssl-min-ver ...]`,
//! `[ssl-max-ver ...]`, `[verify ...]`), side by side with Debian's haproxy 2.6: a handshake
//! gets the options of the line whose certificate SNI selects (the default certificate's line
//! without SNI), the bind line's for lines without options.
//!
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Arc;

use support::side::both;
use support::tls as client;
use support::TempDir;

const GLOBAL: &str = "defaults\n    mode http\n    timeout client 2s\n    timeout server 5s\n    timeout connect 2s\n";

/// What a client offering every test protocol sees for `sni` (`None`: no SNI sent).
fn seen(port: u16, sni: Option<&str>, tls12: bool) -> String {
    let mut c = (*client::config(&["foo", "bar", "baz", "http/1.1"], tls12)).clone();
    c.enable_sni = sni.is_some();
    let name = sni.unwrap_or("www.example.com");
    match client::connect(port, name, Arc::new(c)) {
        Ok(mut s) => {
            let r = client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            format!("{name}: {}", String::from_utf8_lossy(&r.body))
        }
        Err(_) => format!("{name}: handshake failed"),
    }
}

#[test]
fn each_line_s_options_apply_to_the_handshakes_of_its_certificate() {
    let dir = TempDir::new("crt-list");
    for f in [
        "www-ecdsa.pem",
        "wild-ecdsa.pem",
        "other-rsa.pem",
        "split.pem",
        "split.pem.key",
    ] {
        std::fs::copy(client::fixture(f), dir.path(f)).unwrap();
    }
    let list = dir.path("list.txt");
    let d = dir.0.display();
    std::fs::write(
        &list,
        format!(
            "{d}/www-ecdsa.pem [alpn http/1.1]\n\
             {d}/wild-ecdsa.pem [alpn foo,http/1.1 ssl-max-ver TLSv1.2] *.example.org\n\
             {d}/other-rsa.pem [ssl-min-ver TLSv1.3 alpn bar,http/1.1] other.example.net\n\
             {d}/split.pem\n"
        ),
    )
    .unwrap();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt-list {} alpn baz,http/1.1\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc_alpn] %[ssl_fc_protocol]\"\n",
        list.display()
    );
    both("crt-list options", &cfg, |_, _, p2, _| {
        let mut out = Vec::new();
        for tls12 in [false, true] {
            for sni in [
                Some("www.example.com"),
                Some("a.example.org"),
                Some("other.example.net"),
                Some("split.example.net"),
                None,
            ] {
                out.push(seen(p2, sni, tls12));
            }
        }
        assert_eq!(
            out,
            [
                "www.example.com: http/1.1 TLSv1.3",
                "a.example.org: foo TLSv1.2",
                "other.example.net: bar TLSv1.3",
                "split.example.net: baz TLSv1.3",
                "www.example.com: http/1.1 TLSv1.3",
                "www.example.com: http/1.1 TLSv1.2",
                "a.example.org: foo TLSv1.2",
                "other.example.net: handshake failed",
                "split.example.net: baz TLSv1.2",
                "www.example.com: http/1.1 TLSv1.2",
            ]
        );
        out
    });
}

#[test]
fn a_line_may_require_client_certificates_that_the_bind_line_does_not() {
    let dir = TempDir::new("crt-list-verify");
    for f in ["www-ecdsa.pem", "other-rsa.pem", "ca.pem"] {
        std::fs::copy(client::fixture(f), dir.path(f)).unwrap();
    }
    let list = dir.path("list.txt");
    std::fs::write(
        &list,
        format!(
            "{d}/www-ecdsa.pem\n{d}/other-rsa.pem [verify required ca-file {d}/ca.pem] other.example.net\n",
            d = dir.0.display()
        ),
    )
    .unwrap();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt-list {}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_c_used]\"\n",
        list.display()
    );
    both("crt-list verify", &cfg, |_, _, p2, _| {
        let mut out = Vec::new();
        for (sni, with_cert) in [
            ("www.example.com", false),
            ("other.example.net", false),
            ("other.example.net", true),
        ] {
            let c = if with_cert {
                client::config_with_cert("www-rsa.pem")
            } else {
                client::config(&[], false)
            };
            let r = client::connect(p2, sni, c)
                .and_then(|mut s| client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
            out.push(match r {
                Ok(r) => format!("{sni} {with_cert}: {}", String::from_utf8_lossy(&r.body)),
                Err(_) => format!("{sni} {with_cert}: failed"),
            });
        }
        assert_eq!(
            out,
            [
                "www.example.com false: 0",
                "other.example.net false: failed",
                "other.example.net true: 1",
            ]
        );
        out
    });
}

#[test]
fn lines_are_added_and_deleted_at_run_time_like_haproxys() {
    let dir = TempDir::new("crt-list-cli");
    for f in ["www-ecdsa.pem", "other-rsa.pem"] {
        std::fs::copy(client::fixture(f), dir.path(f)).unwrap();
    }
    let d = dir.0.display().to_string();
    let list = format!("{d}/list.txt");
    std::fs::write(
        &list,
        format!("# the first line is a comment\n{d}/www-ecdsa.pem\n"),
    )
    .unwrap();
    let other = format!("{d}/other-rsa.pem");
    let payload = std::fs::read_to_string(dir.path("other-rsa.pem")).unwrap();
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl strict-sni crt-list {list}\n\
         \x20   http-request return status 200\n"
    );
    both("crt-list at run time", &cfg, |_, _, p2, run| {
        let served = |sni: &str| match client::connect(p2, sni, client::config(&[], false)) {
            Ok(s) if client::peer_leaf(&s) == client::leaf_of("other-rsa.pem") => "other-rsa",
            Ok(_) => "another certificate",
            Err(_) => "refused",
        };
        let out = vec![
            run.cli("show ssl crt-list"),
            run.cli(&format!("show ssl crt-list -n {list}/")),
            run.cli(&format!("new ssl cert {other}")),
            run.cli(&format!("new ssl cert {other}")),
            run.cli(&format!("add ssl crt-list {list} {other}")),
            run.cli(&format!("set ssl cert {other} <<\n{}\n", payload.trim_end())),
            run.cli(&format!("commit ssl cert {other}")),
            served("other.example.net").to_string(),
            run.cli(&format!(
                "add ssl crt-list {list} <<\n{other} [allow-0rtt ssl-min-ver TLSv1.2 verify none] other.example.net !www.example.com\n"
            )),
            served("other.example.net").to_string(),
            run.cli(&format!("add ssl crt-list {list}// {other}")),
            run.cli(&format!("show ssl crt-list -n {list}")),
            run.cli(&format!("show ssl crt-list {list}")),
            run.cli(&format!("add ssl crt-list {d}/nope.txt {other}")),
            run.cli(&format!(
                "add ssl crt-list {list} <<\n{other} [ca-file {d}/ca.pem] other.example.net\n"
            )),
            run.cli(&format!("del ssl cert {other}")),
            run.cli(&format!("del ssl crt-list {list} {other}")),
            run.cli(&format!("del ssl crt-list {list} {other}:9")),
            run.cli(&format!("del ssl crt-list {list} {other}:x")),
            run.cli(&format!("del ssl crt-list {list} {other}:3")),
            run.cli(&format!("del ssl crt-list {list} {other}:4")),
            served("other.example.net").to_string(),
            // Under strict-sni there is no default certificate: the last line goes too.
            run.cli(&format!("del ssl crt-list {list} {d}/www-ecdsa.pem")),
            run.cli(&format!("show ssl cert {other}"))
                .lines()
                .filter(|l| l.starts_with("Status"))
                .collect(),
            run.cli(&format!("del ssl cert {other}")),
            run.cli(&format!("del ssl cert {other}")),
        ];
        assert_eq!(out[7], "refused");
        assert_eq!(out[9], "other-rsa");
        assert_eq!(out[21], "refused");
        assert_eq!(
            out[11],
            format!(
                "# {list}\n{d}/www-ecdsa.pem:2\n{other}:3 [verify none allow-0rtt ssl-min-ver TLSv1.2] other.example.net !www.example.com\n{other}:4\n\n"
            )
        );
        out
    });
}

#[test]
fn the_default_certificate_of_a_bind_is_not_deleted() {
    let dir = TempDir::new("crt-list-default");
    std::fs::copy(client::fixture("www-ecdsa.pem"), dir.path("www-ecdsa.pem")).unwrap();
    let d = dir.0.display().to_string();
    let list = format!("{d}/list.txt");
    std::fs::write(&list, format!("{d}/www-ecdsa.pem\n")).unwrap();
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt-list {list}\n\
         \x20   http-request return status 200\n"
    );
    both("default certificate", &cfg, |_, _, _, run| {
        let cfg_path = run.dir.path("p.cfg").display().to_string();
        let out = vec![run
            .cli(&format!("del ssl crt-list {list} {d}/www-ecdsa.pem"))
            .replace(&cfg_path, "CFG")];
        assert_eq!(
            out,
            [format!("Can't delete the entry: certificate '{d}/www-ecdsa.pem' cannot be deleted, it is used as default certificate by the following frontends:\n\t- CFG:9\n\n\n")]
        );
        out
    });
}
