//! Servers added and removed at run time (`add server`, `del server` on the stats socket), side
//! by side with haproxy: a new server starts in maintenance, takes traffic once enabled, is
//! listed by `show servers state` and `show stat`, and `del server` removes it once it is in
//! maintenance again; the refusals answer with HAProxy's texts.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use support::http::{Client, HttpBackend};
use support::side::{both, Run};

/// `show servers state BE` rows as `id name op_state admin_state weight`.
fn state(run: &Run, be: &str) -> Vec<String> {
    run.cli(&format!("show servers state {be}"))
        .lines()
        .skip(2)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            format!("{} {} op={} admin={} w={}", f[2], f[3], f[5], f[6], f[7])
        })
        .collect()
}

/// `show stat` rows of backend `be`: `svname,status,weight,sid`.
fn stat(run: &Run, be: &str) -> Vec<String> {
    run.cli("show stat")
        .lines()
        .filter(|l| l.starts_with(&format!("{be},")))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            format!("{},{},{},{}", f[1], f[17], f[18], f[28])
        })
        .collect()
}

/// Waits until server `srv` of `be` has no connection open (`show stat` scur 0): the client
/// of the last request has closed, and the proxy may take a moment to see it.
fn wait_closed(run: &Run, be: &str, srv: &str) {
    let row = format!("{be},{srv},");
    cli_until(run, "show stat", |r| {
        r.lines()
            .find(|l| l.starts_with(&row))
            .and_then(|l| l.split(',').nth(4))
            == Some("0")
    });
}

fn status(port: u16) -> String {
    Client::connect(port).get("/").status.to_string()
}

/// `http-reuse never`: an idle server connection counts as attached, and HAProxy refuses to
/// delete a server that has one.
const CFG: &str = "global\n    stats socket @SOCK@ level admin\n\
    defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
    frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend test\n\
    backend test\n    balance roundrobin\n    http-reuse never\n    use-server pinned if { always_false }\n\
    \x20   server old 127.0.0.1:@P1@ disabled\n\
    \x20   server pinned 127.0.0.1:@P1@ disabled\n\
    backend fixed\n    balance static-rr\n\
    backend hashed\n    balance source\n    hash-type consistent\n";

#[test]
fn added_server_takes_traffic_once_enabled_and_is_deleted_in_maintenance() {
    let be = HttpBackend::start();
    let add = format!("add server test/new 127.0.0.1:{}", be.port);
    let mut seen = 0;
    both(
        "added_server_takes_traffic_once_enabled_and_is_deleted_in_maintenance",
        CFG,
        |_, _, port, run| {
            let mut out = vec![status(port)];
            out.push(run.cli(&add));
            // In maintenance until enabled: no traffic yet.
            out.push(status(port));
            out.extend(state(run, "test"));
            out.extend(stat(run, "test"));
            out.push(run.cli("enable server test/new"));
            out.push(status(port));
            out.push(status(port));
            out.extend(state(run, "test"));
            out.extend(stat(run, "test"));
            let now = be.seen().len();
            out.push(format!("backend saw {}", now - seen));
            seen = now;
            // Deleting needs maintenance.
            out.push(run.cli("del server test/new"));
            out.push(run.cli("disable server test/new"));
            out.push(status(port));
            wait_closed(run, "test", "new");
            out.push(run.cli("del server test/new"));
            out.push(run.cli("del server test/new"));
            out.extend(state(run, "test"));
            out.extend(stat(run, "test"));
            // The name is free again; the id is the smallest unused.
            out.push(run.cli(&add));
            out.extend(state(run, "test"));
            // Static servers can go too.
            out.push(run.cli("del server test/old"));
            out.extend(state(run, "test"));
            out
        },
    );
}

#[test]
fn refusals_answer_as_haproxy() {
    both("refusals_answer_as_haproxy", CFG, |_, _, _, run| {
        [
            "add server nope/s 127.0.0.1:1",
            "add server test",
            "add server test/",
            "add server test/s",
            "add server fixed/s 127.0.0.1:1",
            "add server test/old 127.0.0.1:1",
            "add server test/c 127.0.0.1:1 cookie c",
            "add server hashed/s 127.0.0.1:1",
            "del server nope/s",
            "del server test/zz",
            "del server test",
            "del server test/pinned",
            "enable server test/old",
            "del server test/old",
        ]
        .iter()
        .map(|c| format!("{c} => {:?}", run.cli(c)))
        .collect()
    });
}

/// Polls `cmd` until its answer satisfies `done` (or 5 s pass), and returns the last answer.
fn cli_until(run: &Run, cmd: &str, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let r = run.cli(cmd);
        if done(&r) || start.elapsed() > Duration::from_secs(5) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_with_a_connection_is_not_deleted() {
    let cfg = "global\n    stats socket @SOCK@ level admin\n\
        defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
        listen fe\n    bind 127.0.0.1:@P2@\n    balance leastconn\n";
    both(
        "a_server_with_a_connection_is_not_deleted",
        cfg,
        |_, _, port, run| {
            // One per run: a released one answers every later connection at once.
            let held = support::Backend::hold();
            let add = format!("add server fe/h 127.0.0.1:{}", held.port);
            let mut out = vec![run.cli(&add), run.cli("enable server fe/h")];
            let before = held.count();
            let mut c = support::connect(port);
            c.write_all(b"x").unwrap();
            let start = Instant::now();
            while held.count() == before && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(5));
            }
            out.push(format!("connected: {}", held.count() - before));
            // The proxy counts the connection once its connect completes.
            let scur = |r: &str| {
                r.lines()
                    .find(|l| l.starts_with("fe,h,"))
                    .and_then(|l| l.split(',').nth(4))
                    .unwrap_or("")
                    .to_string()
            };
            out.push(scur(&cli_until(run, "show stat", |r| scur(r) == "1")));
            out.push(run.cli("disable server fe/h"));
            out.push(run.cli("del server fe/h"));
            drop(c);
            held.release_all();
            out.push(cli_until(run, "del server fe/h", |r| r.contains("deleted")));
            out
        },
    );
}

#[test]
fn an_added_server_is_checked_once_health_is_enabled() {
    let be = HttpBackend::start();
    // A closed port for the check: the server goes DOWN once its checks run.
    let closed = support::free_port();
    let add = format!(
        "add server test/chk 127.0.0.1:{} check port {closed} inter 100 fall 1 rise 1",
        be.port
    );
    both(
        "an_added_server_is_checked_once_health_is_enabled",
        CFG,
        |_, _, port, run| {
            let mut out = vec![run.cli(&add), run.cli("enable server test/chk")];
            // Checks start disabled on an added server: it stays UP.
            out.push(status(port));
            out.extend(stat(run, "test"));
            out.push(run.cli("enable health test/chk"));
            let chk_status = |r: &str| {
                r.lines()
                    .find(|l| l.starts_with("test,chk,"))
                    .and_then(|l| l.split(',').nth(17))
                    .unwrap_or("")
                    .to_string()
            };
            let r = cli_until(run, "show stat", |r| chk_status(r) == "DOWN");
            out.push(chk_status(&r));
            out.push(status(port));
            out
        },
    );
}

#[test]
fn an_added_server_shows_the_stored_certificate_and_a_deleted_one_releases_it() {
    let crt = support::tls::fixture("client-v1.pem");
    let crt = crt.to_str().unwrap();
    let other = support::tls::fixture("client-expired.pem");
    let cfg = "global\n    stats socket @SOCK@ level admin\n\
        defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
        frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend test\n\
        backend test\n    server s1 127.0.0.1:@P1@ ssl verify none crt @CRT@/client-v1.pem\n\
        listen tls\n    bind 127.0.0.1:@P1@ ssl crt @CRT@/server-v1.pem\n\
        \x20   http-request return status 200 content-type text/plain string ok\n";
    let cert_status = |run: &Run| {
        run.cli(&format!("show ssl cert {crt}"))
            .lines()
            .find(|l| l.starts_with("Status:"))
            .unwrap_or("")
            .to_string()
    };
    both(
        "an_added_server_shows_the_stored_certificate_and_a_deleted_one_releases_it",
        cfg,
        |_, tls_port, port, run| {
            let mut out = vec![status(port), cert_status(run)];
            out.push(run.cli("disable server test/s1"));
            wait_closed(run, "test", "s1");
            out.push(run.cli("del server test/s1"));
            out.push(cert_status(run));
            out.push(status(port));
            // A file the configuration did not load is refused.
            out.push(run.cli(&format!(
                "add server test/x 127.0.0.1:{tls_port} ssl verify none crt {}",
                other.display()
            )));
            out.push(run.cli(&format!(
                "add server test/s2 127.0.0.1:{tls_port} ssl verify none crt {crt}"
            )));
            out.push(cert_status(run));
            out.push(run.cli("enable server test/s2"));
            out.push(status(port));
            out
        },
    );
}

#[test]
fn an_added_server_serves_keep_alive() {
    let be = HttpBackend::start();
    let cfg = "global\n    stats socket @SOCK@ level admin\n\
        defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
        frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend test\n\
        backend test\n    balance leastconn\n    http-reuse always\n";
    let add = format!("add server test/new 127.0.0.1:{}", be.port);
    both(
        "an_added_server_serves_keep_alive",
        cfg,
        |_, _, port, run| {
            let mut out = vec![run.cli(&add), run.cli("enable server test/new")];
            // Three requests on one client connection, then one on another (the server
            // connection goes back to the idle pool between them).
            let mut c = Client::connect(port);
            for _ in 0..3 {
                out.push(c.get("/").status.to_string());
            }
            out.push(status(port));
            out
        },
    );
}

#[test]
fn the_statistics_page_lists_added_servers_and_not_deleted_ones() {
    let cfg = "global\n    stats socket @SOCK@ level admin\n\
        defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
        frontend fe\n    bind 127.0.0.1:@P2@\n    stats enable\n    stats uri /st\n    default_backend test\n\
        backend test\n    balance roundrobin\n    server old 127.0.0.1:@P1@ disabled\n";
    both(
        "the_statistics_page_lists_added_servers_and_not_deleted_ones",
        cfg,
        |_, p1, port, run| {
            let rows = |port: u16| {
                let r = Client::connect(port).get("/st;csv");
                String::from_utf8_lossy(&r.body)
                    .lines()
                    .filter(|l| l.starts_with("test,"))
                    .map(|l| {
                        let f: Vec<&str> = l.split(',').collect();
                        format!("{},{},{}", f[0], f[1], f[17])
                    })
                    .collect::<Vec<String>>()
            };
            let mut out = vec![run.cli(&format!("add server test/new 127.0.0.1:{p1}"))];
            out.extend(rows(port));
            out.push(run.cli("del server test/old"));
            out.extend(rows(port));
            out
        },
    );
}
