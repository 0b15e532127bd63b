//! `backlog N` (the proxy's) and `bind ... backlog N`: the listen backlog each socket gets, as
//! `ss -ltn` reports it (its Send-Q for a listener), side by side with haproxy 2.6. Without
//! `ss` (package iproute2) the test says "skipped", and fails under CI.
#![allow(clippy::disallowed_methods)]

mod support;

use support::side::both;

/// The backlog of the listener on 127.0.0.1:`port`, from `ss -ltn`.
fn backlog(port: u16) -> String {
    let out = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .expect("ss runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(2)
        .unwrap_or("no listener")
        .to_string()
}

#[test]
fn backlog_sets_the_listen_queue_of_binds_without_their_own() {
    if std::process::Command::new("ss").arg("-V").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "ss is missing under CI");
        eprintln!("skipped: ss (iproute2) is missing");
        return;
    }
    // Without `backlog`, the frontend's `maxconn`, which defaults to the global one (below
    // 128 too: no floor).
    for (global, proxy, want) in [
        ("", "    backlog 333\n    maxconn 500\n", "333"),
        ("", "    maxconn 500\n", "500"),
        ("", "    maxconn 50\n", "50"),
        ("global\n    maxconn 300\n", "", "300"),
        ("global\n    maxconn 300\n", "    maxconn 1000\n", "1000"),
    ] {
        let cfg = format!(
            "{global}defaults\n    mode http\n    timeout client 2s\n    timeout server 2s\n    timeout connect 1s\n\
             frontend fe\n    bind 127.0.0.1:@P2@\n    bind 127.0.0.1:@P1@ backlog 77\n{proxy}\
             \x20   default_backend be\nbackend be\n    server s 127.0.0.1:1\n"
        );
        both("backlog", &cfg, |_, p1, p2, _| {
            let got = vec![backlog(p2), backlog(p1)];
            assert_eq!(got, [want, "77"]);
            got
        });
    }
}
