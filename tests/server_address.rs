//! Server addresses HAProxy allows beyond `IP:PORT`, side by side with haproxy: no port (the
//! client's destination port is used), and `init-addr none` for a name that does not resolve
//! (the server starts without an address, in maintenance, and takes no traffic).
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::TcpListener;

use support::http::{Client, HttpBackend};
use support::side::both;

#[test]
fn a_server_without_port_or_address_as_haproxy_reads_it() {
    let be = HttpBackend::start();
    // The frontend listens on another loopback address with the backend's port number: the
    // port-less server connects to 127.0.0.1 on the port the client called.
    let port = be.port;
    if TcpListener::bind(("127.0.0.2", port)).is_err() {
        println!("skipped: 127.0.0.2:{port} is taken");
        return;
    }
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.2:{port}\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         backend be\n    balance roundrobin\n\
         \x20   server gone unresolvable.invalid:80 init-addr last,libc,none\n\
         \x20   server here 127.0.0.1 check port {port} inter 100\n"
    );
    let mut seen = 0;
    both(
        "a_server_without_port_or_address_as_haproxy_reads_it",
        &cfg,
        |_, _, _, run| {
            let mut out = Vec::new();
            for _ in 0..4 {
                let mut c = Client::connect_to("127.0.0.2", port);
                out.push(c.get("/").status.to_string());
            }
            // The unresolved server is in maintenance; the other up (checked on `port`).
            let state = run.cli("show servers state be");
            out.extend(state.lines().skip(2).filter(|l| !l.is_empty()).map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                format!("{} {} admin={}", f[3], f[4], f[6])
            }));
            // `show stat`'s status of each.
            let stat = run.cli("show stat");
            out.extend(
                stat.lines()
                    .filter(|l| l.starts_with("be,g") || l.starts_with("be,h"))
                    .map(|l| {
                        l.split(',')
                            .take(2)
                            .chain(l.split(',').nth(17))
                            .collect::<Vec<_>>()
                            .join(",")
                    }),
            );
            // An address given at run time takes it out of maintenance.
            out.push(run.cli(&format!("set server be/gone addr 127.0.0.1 port {port}")));
            let state = run.cli("show servers state be");
            out.extend(state.lines().skip(2).filter(|l| !l.is_empty()).map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                format!("{} {} {} admin={}", f[3], f[4], f[5], f[6])
            }));
            let now = be.seen().len();
            out.push(format!("backend saw {}", now - seen));
            seen = now;
            out
        },
    );
}
