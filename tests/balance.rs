//! End-to-end balancing algorithms: what each server sees when the algorithm is leastconn,
//! first, source or uri.
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use support::http::{Client, HttpBackend};
use support::*;

fn tcp_cfg(port: u16, balance: &str, servers: &[(u16, &str)]) -> String {
    let mut cfg = format!(
        "global\n    nbthread 2\n{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    balance {balance}\n",
        tcp_defaults()
    );
    for (i, (p, opts)) in servers.iter().enumerate() {
        cfg.push_str(&format!("    server s{i} 127.0.0.1:{p} {opts}\n"));
    }
    cfg
}

fn echo_once(port: u16) {
    let mut c = connect(port);
    c.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
}

#[test]
fn leastconn_sends_to_the_least_loaded_server() {
    let a = Backend::start(Behaviour::Echo);
    let b = Backend::start(Behaviour::Echo);
    let port = free_port();
    let _p = Proxy::start(
        &tcp_cfg(port, "leastconn", &[(a.port, ""), (b.port, "")]),
        port,
        &[],
    );
    let (a0, b0) = (a.count(), b.count());
    // One long connection lands on one server...
    let held = connect(port);
    assert!(eventually(Duration::from_secs(2), || a.count() + b.count()
        == a0 + b0 + 1));
    let held_on_a = a.count() > a0;
    // ...so every short one goes to the other (round-robin would alternate).
    for _ in 0..6 {
        echo_once(port);
        // Let the short session end so only the held one counts.
        let open = || {
            a.open.load(std::sync::atomic::Ordering::SeqCst)
                + b.open.load(std::sync::atomic::Ordering::SeqCst)
        };
        assert!(eventually(Duration::from_secs(2), || open() == 1));
        std::thread::sleep(Duration::from_millis(30));
    }
    let (da, db) = (a.count() - a0, b.count() - b0);
    if held_on_a {
        assert_eq!((da, db), (1, 6));
    } else {
        assert_eq!((da, db), (6, 1));
    }
    drop(held);
}

#[test]
fn first_fills_the_first_server_up_to_its_maxconn() {
    let a = Backend::start(Behaviour::Echo);
    let b = Backend::start(Behaviour::Echo);
    let port = free_port();
    let cfg = tcp_cfg(
        port,
        "first",
        &[(a.port, "maxconn 2"), (b.port, "maxconn 2")],
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let (a0, b0) = (a.count(), b.count());
    // One at a time: each connection reaches a server before the next one opens.
    let held: Vec<_> = (0..3)
        .map(|i| {
            let c = connect(port);
            assert!(eventually(Duration::from_secs(5), || a.count() - a0
                + b.count()
                - b0
                == i + 1));
            c
        })
        .collect();
    assert!(eventually(Duration::from_secs(2), || a.count() - a0 == 2
        && b.count() - b0 == 1));
    drop(held);
}

#[test]
fn source_keeps_a_client_on_one_server() {
    let a = Backend::start(Behaviour::Banner("a".into()));
    let b = Backend::start(Behaviour::Banner("b".into()));
    let port = free_port();
    let _p = Proxy::start(
        &tcp_cfg(port, "source", &[(a.port, ""), (b.port, "")]),
        port,
        &[],
    );
    let mut seen = std::collections::HashSet::new();
    for _ in 0..20 {
        let mut c = connect(port);
        seen.insert(read_all(&mut c));
    }
    assert_eq!(
        seen.len(),
        1,
        "one client address reached several servers: {seen:?}"
    );
}

#[test]
fn uri_hashing_keeps_each_path_on_one_server() {
    let a = HttpBackend::start();
    let b = HttpBackend::start();
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    balance uri\n    server a 127.0.0.1:{}\n    server b 127.0.0.1:{}\n",
        a.port, b.port
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let mut c = Client::connect(port);
    let paths: Vec<String> = (0..20).map(|i| format!("/size/{i}")).collect();
    for round in 0..3 {
        for p in &paths {
            // The query string is not part of the key by default.
            assert_eq!(c.get(&format!("{p}?round={round}")).status, 200);
        }
    }
    let on = |be: &HttpBackend| -> std::collections::HashMap<String, usize> {
        let mut m = std::collections::HashMap::new();
        for s in be.seen() {
            let path = s
                .head
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .split('?')
                .next()
                .unwrap_or("")
                .to_string();
            *m.entry(path).or_insert(0) += 1;
        }
        m
    };
    let (ma, mb) = (on(&a), on(&b));
    for p in &paths {
        let n = ma.get(p).copied().unwrap_or(0) + mb.get(p).copied().unwrap_or(0);
        assert_eq!(n, 3, "{p}");
        assert!(
            !ma.contains_key(p) || !mb.contains_key(p),
            "{p} reached both servers"
        );
    }
    assert!(
        !ma.is_empty() && !mb.is_empty(),
        "20 paths all hashed to one server"
    );
}

#[test]
fn stats_socket_show_stat_reports_servers_in_haproxy_csv() {
    let a = Backend::start(Behaviour::Echo);
    let mut dead = Backend::start(Behaviour::Echo);
    dead.stop();
    let dir = TempDir::new("stats");
    let sock = dir.path("admin.sock");
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} mode 600 level admin\n{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    server a 127.0.0.1:{} check inter 100ms\n    server dead 127.0.0.1:{} check inter 100ms fall 1\n    server spare 127.0.0.1:{} backup\n",
        sock.display(),
        tcp_defaults(),
        a.port,
        dead.port,
        a.port
    );
    let p = Proxy::start(&cfg, port, &[]);
    assert!(eventually(Duration::from_secs(2), || p
        .stderr()
        .contains("be/dead is DOWN")));
    echo_once(port);
    let ask = |cmd: &str| {
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.write_all(cmd.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let csv = ask("show stat\n");
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,check_duration,"),
        "{header}"
    );
    let cols: Vec<&str> = header.trim_start_matches("# ").split(',').collect();
    let field = |line: &str, name: &str| -> String {
        let i = cols.iter().position(|c| *c == name).unwrap();
        line.split(',').nth(i).unwrap_or("").to_string()
    };
    let find = |sv: &str| -> String {
        csv.lines()
            .find(|l| l.starts_with(&format!("be,{sv},")))
            .unwrap_or_else(|| panic!("no row for {sv} in:\n{csv}"))
            .to_string()
    };
    let row_a = find("a");
    assert_eq!(field(&row_a, "status"), "UP");
    assert_eq!(field(&row_a, "check_status"), "L4OK");
    assert!(field(&row_a, "stot").parse::<u64>().unwrap() >= 1);
    assert_eq!(field(&row_a, "type"), "2");
    let row_dead = find("dead");
    assert_eq!(field(&row_dead, "status"), "DOWN");
    assert_eq!(field(&row_dead, "check_status"), "L4CON");
    assert_eq!(field(&row_dead, "chkdown"), "1");
    let spare = find("spare");
    assert_eq!(
        (
            field(&spare, "status").as_str(),
            field(&spare, "bck").as_str()
        ),
        ("no check", "1")
    );
    let backend = find("BACKEND");
    assert_eq!(
        (
            field(&backend, "status").as_str(),
            field(&backend, "act").as_str()
        ),
        ("UP", "1")
    );
    assert!(csv.lines().any(|l| l.starts_with("fe,FRONTEND,")));
    assert!(
        csv.lines().all(|l| l.is_empty() || l.ends_with(',')),
        "{csv}"
    );
    assert!(!csv.contains("(null)"));
    assert!(ask("show info\n").contains("Name: Bascule"));
    assert!(ask("bogus\n").contains("Unknown command"));
}

fn http_maxconn_cfg(port: u16, be_port: u16, queue: &str) -> String {
    format!(
        "global\n    nbthread 2\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n    timeout queue {queue}\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{be_port} maxconn 2\n"
    )
}

#[test]
fn server_maxconn_is_never_exceeded_and_every_client_is_served() {
    let be = HttpBackend::start();
    let port = free_port();
    let _p = Proxy::start(&http_maxconn_cfg(port, be.port, "10s"), port, &[]);
    let clients: Vec<_> = (0..20)
        .map(|_| std::thread::spawn(move || Client::connect(port).get("/sleep/50").status))
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    let max = be.max_active.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        max <= 2,
        "the server saw {max} concurrent requests with maxconn 2"
    );
    assert_eq!(max, 2, "the queue never filled both slots");
}

#[test]
fn a_request_that_times_out_in_the_queue_gets_503() {
    let be = HttpBackend::start();
    let port = free_port();
    let _p = Proxy::start(&http_maxconn_cfg(port, be.port, "200ms"), port, &[]);
    let busy: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || Client::connect(port).get("/sleep/1000").status))
        .collect();
    // Both at the server (maxconn 2) before the next request comes.
    assert!(eventually(Duration::from_secs(5), || be.seen().len() == 2));
    let started = std::time::Instant::now();
    let r = Client::connect(port).get("/size/1");
    assert_eq!(r.status, 503);
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    for b in busy {
        assert_eq!(b.join().unwrap(), 200);
    }
}

/// With consistent or Maglev hashing, taking one server down moves only the keys it held.
#[test]
fn consistent_and_maglev_move_only_the_keys_of_a_server_that_goes_down() {
    for method in ["consistent", "maglev"] {
        let bes: Vec<HttpBackend> = (0..3).map(|_| HttpBackend::start()).collect();
        let port = free_port();
        let mut cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
             backend be\n    balance uri\n    hash-type {method} sdbm avalanche\n    option httpchk GET /health\n"
        );
        for (i, b) in bes.iter().enumerate() {
            cfg.push_str(&format!(
                "    server s{i} 127.0.0.1:{} check inter 100ms fall 1 rise 1\n",
                b.port
            ));
        }
        let p = Proxy::start(&cfg, port, &[]);
        let paths: Vec<String> = (0..60).map(|i| format!("/obj/{i}")).collect();
        let owner = |c: &mut Client, path: &str| -> usize {
            let before: Vec<usize> = bes.iter().map(|b| b.seen().len()).collect();
            assert_eq!(c.get(path).status, 200);
            (0..3)
                .find(|&i| {
                    bes[i].seen()[before[i]..]
                        .iter()
                        .any(|s| s.head.starts_with(&format!("GET {path} ")))
                })
                .expect("some server answered")
        };
        let mut c = Client::connect(port);
        let first: Vec<usize> = paths.iter().map(|p| owner(&mut c, p)).collect();
        assert!(
            (0..3).all(|i| first.contains(&i)),
            "{method}: a server got no key"
        );
        bes[0]
            .health
            .store(500, std::sync::atomic::Ordering::SeqCst);
        assert!(eventually(Duration::from_secs(2), || p
            .stderr()
            .contains("Server be/s0 is DOWN")));
        let mut c = Client::connect(port);
        let second: Vec<usize> = paths.iter().map(|p| owner(&mut c, p)).collect();
        // Consistent hashing moves exactly the DOWN server's keys; Maglev nearly so (its
        // table is refilled, which may shift a few slots: allow 1 in 10 of the others).
        let mut moved_others = 0;
        for (k, (a, b)) in first.iter().zip(&second).enumerate() {
            assert_ne!(*b, 0, "{method}: {} still on the DOWN server", paths[k]);
            if *a != 0 && a != b {
                moved_others += 1;
            }
        }
        let others = first.iter().filter(|&&a| a != 0).count();
        let allowed = if method == "consistent" {
            0
        } else {
            others / 10
        };
        assert!(
            moved_others <= allowed,
            "{method}: {moved_others} of {others} keys of the live servers moved"
        );
    }
}

#[test]
fn backups_take_over_first_only_unless_allbackups() {
    for (option, want_both) in [("", false), ("    option allbackups\n", true)] {
        let a = Backend::start(Behaviour::Banner("a".into()));
        let b1 = Backend::start(Behaviour::Banner("b1".into()));
        let b2 = Backend::start(Behaviour::Banner("b2".into()));
        let port = free_port();
        let cfg = format!(
            "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n{option}\
             server a 127.0.0.1:{} disabled\n    server b1 127.0.0.1:{} backup\n    server b2 127.0.0.1:{} backup\n",
            tcp_defaults(),
            a.port,
            b1.port,
            b2.port
        );
        let _p = Proxy::start(&cfg, port, &[]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10 {
            let mut c = connect(port);
            seen.insert(String::from_utf8_lossy(&read_all(&mut c)).into_owned());
        }
        let want: std::collections::HashSet<String> = if want_both {
            ["b1", "b2"].iter().map(|s| s.to_string()).collect()
        } else {
            ["b1"].iter().map(|s| s.to_string()).collect()
        };
        assert_eq!(seen, want, "with {option:?}");
        assert_eq!(a.count(), 0);
    }
}

#[test]
fn random_spreads_by_weight() {
    let a = Backend::start(Behaviour::Banner("a".into()));
    let b = Backend::start(Behaviour::Banner("b".into()));
    let port = free_port();
    let cfg = tcp_cfg(
        port,
        "random(1)",
        &[(a.port, "weight 3"), (b.port, "weight 1")],
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let (a0, b0) = (a.count(), b.count());
    for _ in 0..400 {
        let mut c = connect(port);
        assert!(!read_all(&mut c).is_empty());
    }
    let (na, nb) = (a.count() - a0, b.count() - b0);
    // A random draw: 300/100 expected, ±5 standard deviations (about ±43).
    assert!((257..=343).contains(&na) && na + nb == 400, "a={na} b={nb}");
}

#[test]
fn url_param_and_hdr_keep_a_value_on_one_server() {
    for (balance, request) in [
        (
            "url_param user",
            "GET /p?x=1&user={v} HTTP/1.1\r\nHost: a\r\n\r\n",
        ),
        (
            "hdr(x-tenant)",
            "GET / HTTP/1.1\r\nHost: a\r\nX-Tenant: {v}\r\n\r\n",
        ),
        (
            "hdr(host) use_domain_only",
            "GET / HTTP/1.1\r\nHost: www.{v}.com\r\n\r\n",
        ),
    ] {
        let a = HttpBackend::start();
        let b = HttpBackend::start();
        let port = free_port();
        let cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
             backend be\n    balance {balance}\n    hash-type map-based sdbm avalanche\n    server a 127.0.0.1:{}\n    server b 127.0.0.1:{}\n",
            a.port, b.port
        );
        let _p = Proxy::start(&cfg, port, &[]);
        let mut c = Client::connect(port);
        let mut owners = std::collections::HashMap::new();
        for round in 0..3 {
            for v in 0..20 {
                let (sa, sb) = (a.seen().len(), b.seen().len());
                c.send(request.replace("{v}", &format!("v{v}")).as_bytes());
                assert_eq!(c.response(false).unwrap().status, 200);
                let on_a = a.seen().len() > sa;
                assert!(on_a || b.seen().len() > sb);
                let prev = owners.insert(v, on_a);
                if round > 0 {
                    assert_eq!(prev, Some(on_a), "{balance}: value v{v} moved");
                }
            }
        }
        let on_a = owners.values().filter(|x| **x).count();
        assert!(
            on_a > 0 && on_a < 20,
            "{balance}: 20 values all on one server"
        );
    }
}

#[test]
fn slowstart_ramps_a_returning_server_up() {
    let a = Backend::start(Behaviour::Banner("a".into()));
    let mut b = Backend::start(Behaviour::Banner("b".into()));
    let b_port = b.port;
    let port = free_port();
    let cfg = tcp_cfg(
        port,
        "roundrobin",
        &[
            (a.port, "weight 20 check inter 100ms fall 1 rise 1"),
            (
                b_port,
                "weight 20 check inter 100ms fall 1 rise 1 slowstart 2s",
            ),
        ],
    );
    let p = Proxy::start(&cfg, port, &[]);
    b.stop();
    assert!(eventually(Duration::from_secs(2), || p
        .stderr()
        .contains("be/s1 is DOWN")));
    // Bring b back: a fresh banner server on its port.
    let l = std::net::TcpListener::bind(("127.0.0.1", b_port)).unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let _ = c.write_all(b"b");
        }
    });
    assert!(eventually(Duration::from_secs(2), || p
        .stderr()
        .contains("be/s1 is UP")));
    let share_of_b = |n: usize| {
        (0..n)
            .filter(|_| {
                let mut c = connect(port);
                read_all(&mut c) == b"b"
            })
            .count()
    };
    // Just back: b's weight is a small fraction of a's.
    let early = share_of_b(40);
    std::thread::sleep(Duration::from_millis(2300));
    // Ramp over: equal weights, half the traffic.
    let late = share_of_b(40);
    assert!(early <= 8, "b got {early} of 40 right after coming back");
    assert!(
        (17..=23).contains(&late),
        "b got {late} of 40 after the ramp"
    );
}

#[test]
fn a_stopped_server_is_down_within_inter_times_fall() {
    let a = Backend::start(Behaviour::Echo);
    let mut b = Backend::start(Behaviour::Echo);
    let port = free_port();
    let cfg = tcp_cfg(
        port,
        "roundrobin",
        &[
            (a.port, "check inter 200ms fall 3"),
            (b.port, "check inter 200ms fall 3 rise 2"),
        ],
    );
    let p = Proxy::start(&cfg, port, &[]);
    std::thread::sleep(Duration::from_millis(300));
    b.stop();
    let stopped = std::time::Instant::now();
    assert!(eventually(Duration::from_secs(3), || p
        .stderr()
        .contains("be/s1 is DOWN")));
    let took = stopped.elapsed();
    // inter × fall = 600 ms, plus one interval of slack for where the cycle was, plus a
    // little for polling.
    assert!(took <= Duration::from_millis(950), "DOWN after {took:?}");
    assert!(
        took >= Duration::from_millis(350),
        "DOWN after only {took:?}"
    );
}

#[test]
fn observe_layer7_marks_down_a_server_answering_5xx() {
    let a = HttpBackend::start();
    let b = HttpBackend::start();
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    option httpchk GET /health\n\
         server a 127.0.0.1:{} check inter 5s observe layer7 error-limit 3 on-error mark-down\n\
         server b 127.0.0.1:{} check inter 5s observe layer7 error-limit 3 on-error mark-down\n",
        a.port, b.port
    );
    let p = Proxy::start(&cfg, port, &[]);
    let mut c = Client::connect(port);
    // From now on b answers 500 on /health; its next check is 5 s away, so only live traffic
    // (requests for /health through the proxy) can see it.
    b.health.store(500, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..8 {
        let _ = c.get("/health");
    }
    assert!(
        eventually(Duration::from_secs(2), || p
            .stderr()
            .contains("Server be/b is DOWN, reason: Health analyze")),
        "{}",
        p.stderr()
    );
    // DOWN: everything goes to a now.
    let before = b.seen().len();
    for _ in 0..5 {
        assert_eq!(c.get("/size/1").status, 200);
    }
    assert_eq!(b.seen().len(), before);
}

#[test]
fn tcp_check_script_sends_and_expects() {
    // A tiny line protocol: a greeting, then PONG for each PING. A `send` empties what the
    // check received so far, as in haproxy: the last expect sees the PONG alone.
    let good = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let good_port = good.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in good.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = c.write_all(b"+OK ready\r\n");
                let mut buf = [0u8; 64];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if buf[..n].starts_with(b"PING") {
                        let _ = c.write_all(b"+PONG\r\n");
                    }
                }
            });
        }
    });
    let bad = Backend::start(Behaviour::Banner("-ERR unknown\r\n".into()));
    // Greets, then never answers PING: the last expect times out.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mute_port = mute.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in mute.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = c.write_all(b"+OK ready\r\n");
                let mut buf = [0u8; 64];
                while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    let port = free_port();
    let cfg = format!(
        "{}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n\
         option tcp-check\n    tcp-check connect\n    tcp-check expect string +OK\n\
         tcp-check send \"PING\\r\\n\"\n    tcp-check expect rstring ^\\+PONG\\r\\n\n\
         server good 127.0.0.1:{good_port} check inter 100ms fall 2 rise 1\n\
         server bad 127.0.0.1:{} check inter 100ms fall 2 rise 1\n\
         server mute 127.0.0.1:{} check inter 100ms fall 2 rise 1\n",
        tcp_defaults(),
        bad.port,
        mute_port
    );
    let p = Proxy::start(&cfg, port, &[]);
    assert!(
        eventually(Duration::from_secs(3), || p
            .stderr()
            .contains("Server be/bad is DOWN")),
        "{}",
        p.stderr()
    );
    assert!(
        p.stderr()
            .contains("reason: Layer7 invalid response, info: \"TCPCHK did not match content '+OK' at step 2\""),
        "{}",
        p.stderr()
    );
    // haproxy 2.6's words for a regex that timed out (it does not show the regex).
    assert!(
        eventually(Duration::from_secs(3), || {
            p.stderr().contains(
            "Server be/mute is DOWN, reason: Layer7 timeout, info: \" at step 4 of tcp-check (expect regex)\""
        )
        }),
        "{}",
        p.stderr()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(!p.stderr().contains("be/good is DOWN"), "{}", p.stderr());
}

#[test]
fn retry_on_status_sends_a_safe_request_elsewhere() {
    for (retry_on, all_ok) in [("retry-on 503", true), ("retry-on conn-failure", false)] {
        let a = HttpBackend::start();
        let b = HttpBackend::start();
        b.health.store(503, std::sync::atomic::Ordering::SeqCst);
        let port = free_port();
        let cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
             backend be\n    retries 2\n    {retry_on}\n    server a 127.0.0.1:{}\n    server b 127.0.0.1:{}\n",
            a.port, b.port
        );
        let _p = Proxy::start(&cfg, port, &[]);
        let mut c = Client::connect(port);
        let statuses: Vec<u16> = (0..10).map(|_| c.get("/health").status).collect();
        if all_ok {
            assert!(
                statuses.iter().all(|s| *s == 200),
                "{retry_on}: {statuses:?}"
            );
            // A POST is not safe to send twice: it is not retried, so some get b's 503.
            let posts: Vec<u16> = (0..4)
                .map(|_| {
                    c.send(b"POST /health HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
                    c.response(false).unwrap().status
                })
                .collect();
            assert!(posts.contains(&503), "{retry_on}: POST answers {posts:?}");
        } else {
            assert!(statuses.contains(&503), "{retry_on}: {statuses:?}");
        }
    }
}

#[test]
fn outlier_ejection_takes_a_failing_server_out_for_a_while() {
    let bes: Vec<HttpBackend> = (0..3).map(|_| HttpBackend::start()).collect();
    bes[1]
        .health
        .store(503, std::sync::atomic::Ordering::SeqCst);
    bes[2]
        .health
        .store(503, std::sync::atomic::Ordering::SeqCst);
    let port = free_port();
    let mut cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    outlier-ejection consecutive 3 ejection-time 1s max-percent 34\n"
    );
    for (i, b) in bes.iter().enumerate() {
        cfg.push_str(&format!("    server s{i} 127.0.0.1:{}\n", b.port));
    }
    let p = Proxy::start(&cfg, port, &[]);
    let mut c = Client::connect(port);
    for _ in 0..12 {
        let _ = c.get("/health");
    }
    assert!(
        eventually(Duration::from_secs(2), || p
            .stderr()
            .contains("ejected as an outlier")),
        "{}",
        p.stderr()
    );
    // The cap (34% of 3 servers: one) keeps the other failing server in.
    assert_eq!(
        p.stderr().matches("ejected as an outlier").count(),
        1,
        "{}",
        p.stderr()
    );
    let ejected = if p.stderr().contains("be/s1 ejected") {
        1
    } else {
        2
    };
    let seen = |i: usize| bes[i].seen().len();
    let before = seen(ejected);
    for _ in 0..6 {
        let _ = c.get("/size/1");
    }
    assert_eq!(seen(ejected), before, "an ejected server got traffic");
    // After the ejection time it is back.
    std::thread::sleep(Duration::from_millis(1200));
    for _ in 0..6 {
        let _ = c.get("/size/1");
    }
    assert!(
        seen(ejected) > before,
        "the server did not come back after its ejection time"
    );
}

#[test]
fn a_hashed_request_queues_on_its_own_full_server() {
    let a = HttpBackend::start();
    let b = HttpBackend::start();
    let port = free_port();
    let cfg = format!(
        "global\n    nbthread 2\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n    timeout queue 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    balance uri\n    server a 127.0.0.1:{} maxconn 1\n    server b 127.0.0.1:{} maxconn 1\n",
        a.port, b.port
    );
    let _p = Proxy::start(&cfg, port, &[]);
    // Four concurrent requests for one URI: one server, one at a time, none sent elsewhere.
    let clients: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || Client::connect(port).get("/sleep/150").status))
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    let (na, nb) = (a.seen().len(), b.seen().len());
    assert!((na, nb) == (4, 0) || (na, nb) == (0, 4), "a={na} b={nb}");
    let max = |be: &HttpBackend| be.max_active.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(max(&a).max(max(&b)), 1, "maxconn 1 exceeded");
}

/// The servers met by `n` sequential connections through `program` (Bascule or haproxy, 2
/// threads) to a backend balanced by `balance` over servers of `weights`. A second frontend
/// (`mark`) answers the readiness probe, so the measured backend's order starts untouched.
fn rr_sequence(program: &str, balance: &str, weights: &[u32], n: usize) -> Vec<String> {
    let servers: Vec<Backend> = (0..weights.len())
        .map(|i| Backend::banner(&format!("s{i}")))
        .collect();
    let (port, mark) = (free_port(), free_port());
    let mut cfg = format!(
        "global\n    nbthread 2\n{}listen mark\n    bind 127.0.0.1:{mark}\n    server x 127.0.0.1:{}\n\
         listen px\n    bind 127.0.0.1:{port}\n    balance {balance}\n",
        tcp_defaults(),
        servers[0].port
    );
    for (i, (s, w)) in servers.iter().zip(weights).enumerate() {
        cfg.push_str(&format!(
            "    server s{i} 127.0.0.1:{} weight {w}\n",
            s.port
        ));
    }
    let dir = TempDir::new("rr");
    let path = dir.path("p.cfg");
    std::fs::write(&path, cfg).unwrap();
    let bin = if program == "haproxy" { HAPROXY } else { BIN };
    let mut child = std::process::Command::new(bin)
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = eventually(Duration::from_secs(5), || {
        std::net::TcpStream::connect(("127.0.0.1", mark)).is_ok()
    });
    let seq = (0..n)
        .map(|_| {
            let mut c = connect(port);
            String::from_utf8_lossy(&read_all(&mut c)).into_owned()
        })
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(up, "{program} did not start");
    seq
}

/// Round-robin is one order for the whole process, as in HAProxy (reg-test balance-rr.vtc):
/// with 2 worker threads, consecutive connections meet the servers in declaration order
/// whichever thread accepts them, and weights hold over each cycle. Compared with haproxy 2.6.
#[test]
fn round_robin_order_is_process_wide_as_in_haproxy() {
    let run_both = |balance: &str, weights: &[u32], n: usize| {
        let ours = rr_sequence("bascule", balance, weights, n);
        let theirs = have_haproxy("round-robin order side by side")
            .then(|| rr_sequence("haproxy", balance, weights, n));
        (ours, theirs)
    };
    for balance in ["roundrobin", "static-rr"] {
        let want: Vec<String> = (0..10).map(|k| format!("s{}", k % 4)).collect();
        let (ours, theirs) = run_both(balance, &[1, 1, 1, 1], 10);
        assert_eq!(ours, want, "bascule, balance {balance}");
        if let Some(theirs) = theirs {
            assert_eq!(theirs, want, "haproxy, balance {balance}");
        }
        // Weights 2:1:1: each cycle of 4 connections gives s0 two and the others one each.
        let (ours, theirs) = run_both(balance, &[2, 1, 1], 8);
        for (who, seq) in [("bascule", Some(ours)), ("haproxy", theirs)] {
            let Some(seq) = seq else { continue };
            for cycle in seq.chunks(4) {
                let mut c = [0; 3];
                for s in cycle {
                    c[usize::from(s.as_bytes()[1] - b'0')] += 1;
                }
                assert_eq!(c, [2, 1, 1], "{who}, balance {balance}: {seq:?}");
            }
        }
    }
}

/// The server each of `values` lands on through a `balance` backend over `servers` (HTTP
/// backends, named by their index in the answer list), one request per value with
/// `X-User: VALUE` (none for an empty value).
fn http_owners(port: u16, servers: &[HttpBackend], values: &[String]) -> Vec<String> {
    let mut c = Client::connect(port);
    values
        .iter()
        .map(|v| {
            let before: Vec<usize> = servers.iter().map(|s| s.seen().len()).collect();
            let hdr = if v.is_empty() {
                String::new()
            } else {
                format!("X-User: {v}\r\n")
            };
            c.send(format!("GET /p HTTP/1.1\r\nHost: a\r\n{hdr}\r\n").as_bytes());
            assert_eq!(c.response(false).map(|r| r.status), Some(200), "{v}");
            let on = servers
                .iter()
                .zip(&before)
                .position(|(s, b)| s.seen().len() > *b);
            format!("{v}->{}", on.map_or("?".into(), |i| format!("s{i}")))
        })
        .collect()
}

/// `balance hash EXPR` hashes what the expression gives, as binary (strings whole, integers
/// in 8 bytes, network order), with the backend's `hash-type`: each value lands on the same
/// server as through haproxy 2.6, map-based and consistent, string and integer samples.
#[test]
fn balance_hash_expr_lands_each_value_where_haproxy_does() {
    let servers: Vec<HttpBackend> = (0..3).map(|_| HttpBackend::start()).collect();
    let values: Vec<String> = (0..24).map(|k| format!("user{k}")).collect();
    for (expr, hash_type) in [
        ("req.hdr(x-user)", "map-based sdbm"),
        ("req.hdr(x-user),lower", "consistent sdbm avalanche"),
        ("req.hdr(x-user),crc32", "map-based djb2"),
    ] {
        let mut cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             listen px\n    bind 127.0.0.1:@P2@\n    balance hash {expr}\n    hash-type {hash_type}\n"
        );
        for (i, s) in servers.iter().enumerate() {
            cfg.push_str(&format!("    server s{i} 127.0.0.1:{}\n", s.port));
        }
        support::side::both(&format!("balance hash {expr}"), &cfg, |_, _, p2, _| {
            assert!(eventually(Duration::from_secs(5), || {
                std::net::TcpStream::connect(("127.0.0.1", p2)).is_ok()
            }));
            let seen = http_owners(p2, &servers, &values);
            let used: std::collections::HashSet<&str> =
                seen.iter().map(|s| &s[s.len() - 2..]).collect();
            assert!(
                used.len() > 1,
                "{expr}: every value on one server: {seen:?}"
            );
            seen
        });
    }
}

/// Without the value, a `balance hash` backend goes round (as haproxy does), and the
/// configuration errors are haproxy's: no expression, a second argument, an unknown fetch, a
/// response fetch.
#[test]
fn balance_hash_without_a_value_goes_round_and_bad_expressions_are_refused() {
    let servers: Vec<HttpBackend> = (0..2).map(|_| HttpBackend::start()).collect();
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         listen px\n    bind 127.0.0.1:{port}\n    balance hash req.hdr(x-user)\n    server s0 127.0.0.1:{}\n    server s1 127.0.0.1:{}\n",
        servers[0].port, servers[1].port
    );
    let _p = Proxy::start(&cfg, port, &[]);
    let none = vec![String::new(); 4];
    let seen = http_owners(port, &servers, &none);
    assert_eq!(seen, ["->s0", "->s1", "->s0", "->s1"]);

    for (balance, want) in [
        ("hash", "'balance hash' requires a sample expression"),
        (
            "hash src extra",
            "'balance hash' takes no other argument (got 'extra')",
        ),
        (
            "hash nosuchfetch",
            "'balance hash' expression 'nosuchfetch': unknown fetch",
        ),
        (
            "hash res.hdr(x)",
            "'balance hash' expression 'res.hdr(x)': it reads what only a response has",
        ),
        ("rdp-cookie()", "'balance rdp-cookie': missing cookie name"),
    ] {
        let cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             backend be\n    balance {balance}\n    server s0 127.0.0.1:1\n"
        );
        let (ok, out) = support::check_config(&cfg);
        assert!(!ok, "{balance}: accepted");
        assert!(out.contains(want), "{balance}: {out}");
    }
}

/// The first bytes of an RDP connection request carrying `Cookie: mstshash=USER`: the TPKT
/// and X.224 headers (11 bytes), then the cookie line.
fn rdp_request(user: &str) -> Vec<u8> {
    let cookie = format!("Cookie: mstshash={user}\r\n");
    let len = 11 + cookie.len();
    let mut b = vec![
        3,
        0,
        (len >> 8) as u8,
        len as u8,
        (len - 5) as u8,
        0xe0,
        0,
        0,
        0,
        0,
        0,
    ];
    b.extend_from_slice(cookie.as_bytes());
    b
}

/// The banner of the server each of 18 RDP connections (9 users, twice each) meets through
/// the proxy listening on `port`.
fn rdp_owners(port: u16) -> Vec<String> {
    assert!(eventually(Duration::from_secs(5), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }));
    (0..18)
        .map(|k| {
            let user = format!("user{}", k % 9);
            let mut c = connect(port);
            c.write_all(&rdp_request(&user)).unwrap();
            let banner = String::from_utf8_lossy(&read_all(&mut c)).into_owned();
            format!("{user}->{banner}")
        })
        .collect()
}

/// `balance rdp-cookie` (TCP mode, with `tcp-request content` waiting for the cookie) keeps a
/// user on one server, the one haproxy 2.6 picks. `balance hash req.rdp_cookie(mstshash)`
/// hashes the same bytes, so it picks the same servers; it is not compared with haproxy,
/// whose `balance hash` reads only the bytes not yet scheduled for forwarding (unlike its
/// `rdp-cookie`, which rewinds), so that its first connection may find none and go round.
#[test]
fn balance_rdp_cookie_lands_each_user_where_haproxy_does() {
    let servers: Vec<Backend> = (0..3).map(|i| Backend::banner(&format!("s{i}"))).collect();
    let cfg = |balance: &str| {
        let mut cfg = format!(
            "{}listen px\n    bind 127.0.0.1:@P2@\n    tcp-request inspect-delay 2s\n    tcp-request content accept if RDP_COOKIE\n    balance {balance}\n",
            tcp_defaults()
        );
        for (i, s) in servers.iter().enumerate() {
            cfg.push_str(&format!("    server s{i} 127.0.0.1:{}\n", s.port));
        }
        cfg
    };
    let mut ours = Vec::new();
    for balance in ["rdp-cookie", "rdp-cookie(mstshash)"] {
        support::side::both(
            &format!("balance {balance}"),
            &cfg(balance),
            |bin, _, p2, _| {
                let seen = rdp_owners(p2);
                let used: std::collections::HashSet<&str> =
                    seen.iter().map(|s| &s[s.len() - 2..]).collect();
                assert!(
                    used.len() > 1,
                    "{balance}: every user on one server: {seen:?}"
                );
                if bin == BIN {
                    ours = seen.clone();
                }
                seen
            },
        );
    }
    let port = free_port();
    let hash = cfg("hash req.rdp_cookie(mstshash)").replace("@P2@", &port.to_string());
    let _p = Proxy::start(&hash, port, &[]);
    let seen = rdp_owners(port);
    if !ours.is_empty() {
        assert_eq!(seen, ours, "balance hash req.rdp_cookie(mstshash)");
    }
    let mut c = connect(port);
    c.write_all(b"no cookie here, just bytes").unwrap();
    assert!(
        !read_all(&mut c).is_empty(),
        "a connection without the cookie is served"
    );
}

/// `persist rdp-cookie`: an RDP connection whose broker cookie (`msts=ADDR.PORT.`) names a
/// server goes to it whatever the balancer says; one naming no server, or without the
/// cookie, is balanced. Side by side with haproxy.
#[test]
fn persist_rdp_cookie_sends_a_connection_to_the_server_its_cookie_names() {
    let servers: Vec<Backend> = (0..3).map(|i| Backend::banner(&format!("s{i}"))).collect();
    let msts = |port: u16| {
        let addr = u32::from_le_bytes([127, 0, 0, 1]);
        format!("Cookie: msts={addr}.{}.0000\r\n", port.swap_bytes())
    };
    let mut cfg = format!(
        "{}listen px\n    bind 127.0.0.1:@P2@\n    tcp-request inspect-delay 2s\n    tcp-request content accept if RDP_COOKIE\n    persist rdp-cookie\n    balance roundrobin\n",
        tcp_defaults()
    );
    for (i, s) in servers.iter().enumerate() {
        cfg.push_str(&format!("    server s{i} 127.0.0.1:{}\n", s.port));
    }
    let cookies = [
        msts(servers[2].port),
        msts(servers[2].port),
        msts(servers[1].port),
        msts(1),
        "Cookie: mstshash=bob\r\n".to_string(),
        msts(servers[2].port),
    ];
    support::side::both("persist rdp-cookie", &cfg, |_, _, p2, _| {
        assert!(eventually(Duration::from_secs(5), || {
            std::net::TcpStream::connect(("127.0.0.1", p2)).is_ok()
        }));
        cookies
            .iter()
            .map(|line| {
                let len = 11 + line.len();
                let mut b = vec![3, 0, (len >> 8) as u8, len as u8, (len - 5) as u8, 0xe0];
                b.extend_from_slice(&[0; 5]);
                b.extend_from_slice(line.as_bytes());
                let mut c = connect(p2);
                c.write_all(&b).unwrap();
                String::from_utf8_lossy(&read_all(&mut c)).into_owned()
            })
            .collect()
    });
}
