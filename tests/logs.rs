//! Golden tests for access logs: the same configuration and the same traffic go through Debian's
//! haproxy (`/usr/sbin/haproxy`, the reference) and through Bascule, each logging to a UDP socket
//! the test binds; the lines are compared field for field once what legitimately differs
//! (dates, client ports, pids, non-negative timer values) is masked by [`mask`].
//!
//! Without haproxy the tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use support::{free_port, TempDir, BIN, HAPROXY};

/// A backend whose answer depends on the path: `/404`, `/close` (closes without a word),
/// `/garbage` (not HTTP), `/midclose` (closes mid-body), `/sleep/MS`; anything else 200.
fn backend() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || serve(c));
        }
    });
    port
}

fn serve(mut c: TcpStream) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            // A chunked request body (one that ends in a zero-size chunk, no trailers).
            while !buf.windows(5).any(|w| w == b"0\r\n\r\n") {
                match c.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let end = buf.windows(5).position(|w| w == b"0\r\n\r\n").unwrap() + 5;
            buf.drain(..end);
        }
        match path.as_str() {
            "/chunked" => {
                let resp = "HTTP/1.1 200 X\r\nTransfer-Encoding: chunked\r\n\r\n\
                            5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
                if c.write_all(resp.as_bytes()).is_err() {
                    return;
                }
                continue;
            }
            "/close" => return,
            "/garbage" => {
                let _ = c.write_all(b"garbage\r\n\r\n");
                return;
            }
            "/midclose" => {
                let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
                thread::sleep(Duration::from_millis(50));
                return;
            }
            _ => {}
        }
        if let Some(ms) = path.strip_prefix("/sleep/") {
            thread::sleep(Duration::from_millis(ms.parse().unwrap_or(0)));
        }
        let status = if path == "/404" { 404 } else { 200 };
        let resp = format!("HTTP/1.1 {status} X\r\nContent-Length: 5\r\nX-Srv: s1\r\n\r\nhello");
        if c.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

struct Ports {
    http: u16,
    nosrv: u16,
    refused: u16,
    tcp: u16,
    custom: u16,
    legacy: u16,
    redisp: u16,
    fmt: u16,
    uid: u16,
    uid_early: u16,
    tcpfmt: u16,
    queue: u16,
    queue_hash: u16,
    last_rule: u16,
}

fn config(p: &Ports, be: u16, dead: u16, sink: u16) -> String {
    format!(
        r#"global
    log 127.0.0.1:{sink} local0
defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 3s
    timeout server 1s
    timeout http-request 1s
frontend fe
    bind 127.0.0.1:{http}
    default_backend be
frontend fe_nosrv
    bind 127.0.0.1:{nosrv}
    default_backend nosrv
frontend fe_ref
    bind 127.0.0.1:{refused}
    default_backend refused
frontend fe_tcp
    bind 127.0.0.1:{tcp}
    mode tcp
    option tcplog
    default_backend be_tcp
frontend fe_custom
    bind 127.0.0.1:{custom}
    capture request header User-Agent len 5
    capture request header Host len 20
    capture response header X-Srv len 10
    stick-table type ip size 10 store http_req_cnt,conn_cnt
    http-request track-sc0 src
    log-format "sc0=%[sc0_http_req_cnt]/%[sc0_conn_cnt]/%[sc0_tracked] ci=%ci fi=%fi ft=%ft f=%f b=%b s=%s si=%si sp=%sp TR=%TR Tw=%Tw Tc=%Tc Tr=%Tr Ta=%Ta Th=%Th Ti=%Ti Tq=%Tq Tt=%Tt Td=%Td ST=%ST B=%B U=%U CC=%CC CS=%CS ts=%ts tsc=%tsc ac=%ac fc=%fc bc=%bc sc=%sc rc=%rc sq=%sq bq=%bq hr=%hr hrl=%hrl hs=%hs hsl=%hsl r=%{{+Q}}r HM=%HM HU=%HU HP=%HP HPO=%HPO HQ=%HQ HV=%HV Qb=%{{+Q}}b Xci=%{{+X}}ci src=%[src] dst=%[dst] fen=%[fe_name] ben=%[be_name] Ehr=%{{+E}}hr %%"
    default_backend be
backend be
    server s1 127.0.0.1:{be}
backend be_tcp
    mode tcp
    server s1 127.0.0.1:{be}
backend nosrv
backend refused
    server s1 127.0.0.1:{dead}
frontend fe_fmt
    bind 127.0.0.1:{fmt}
    capture request header X-Foo len 4
    capture response header X-Srv len 10
    http-request set-var(txn.h) req.hdr(x-foo)
    http-request set-var(txn.n) int(40) if {{ path_beg /p }}
    http-request deny if {{ path_beg /denied }}
    log-format "v=%[var(txn.h)] lo=%[var(txn.h),lower] b64=%[var(txn.h),base64] map=%[var(txn.h),lower,map(MAPFILE,nomatch)] abs=%[var(txn.nope)] qabs=%{{+Q}}[var(txn.nope)] q=%{{+Q}}[var(txn.h)] e=%{{+E}}[var(txn.h)] qe=%{{+Q,+E}}[var(txn.h)] x=%{{+X}}[src] meth=%[method] st=%[status] cap=%[capture.req.hdr(0)] scap=%{{+Q}}[capture.res.hdr(0)] be=%[be_name] srv=%[srv_name] fe=%[fe_name,upper] n=%[var(txn.n),add(2)] net=%[src,ipmask(8)] len=%[var(txn.h),length] c=%[str(a),concat(-,txn.h)]"
    default_backend be
frontend fe_uid
    bind 127.0.0.1:{uid}
    http-request set-var(txn.u) str(ruled)
    unique-id-format %[req.hdr(x-foo),lower,base64]-%{{+E}}[req.hdr(x-foo)]-%[method]-%{{+Q}}[var(txn.nope)]-%[path,upper]-%[var(txn.u)]
    unique-id-header X-Uid
    log-format "uid=%ID quid=%{{+Q}}ID fetch=%[unique-id,length] m=%[method] be=%[be_name] http=%[req.proto_http] r=%{{+Q}}r"
    default_backend be
frontend fe_uid_early
    bind 127.0.0.1:{uid_early}
    http-request set-header X-Early %[unique-id]
    http-request set-var(txn.u) str(ruled)
    unique-id-format %[req.hdr(x-foo)]-%[var(txn.u)]-%[uuid,length]
    log-format "uid=%ID"
    default_backend be
frontend fe_tcpfmt
    bind 127.0.0.1:{tcpfmt}
    mode tcp
    tcp-request content set-var(txn.t) str(tv)
    tcp-request content accept
    log-format "v=%[var(txn.t),upper] abs=%[var(txn.nope)] be=%[be_name] srv=%[srv_name] meth=%[method] q=%{{+Q}}[be_name] x=%{{+X}}[dst_port] lr=%[last_rule_line]"
    default_backend be_tcp
frontend fe_last_rule
    bind 127.0.0.1:{last_rule}
    log-format "%HP lr=%[last_rule_line] file=%[last_rule_file,length] st=%ST"
    http-request set-var(txn.p) path
    http-request allow if {{ path_beg /allow }}
    http-request deny if {{ path_beg /deny }}
    http-request return status 200 if {{ path_beg /return }}
    http-response deny if {{ var(txn.p) -m beg /resdeny /allow/resdeny }}
    http-after-response allow if {{ var(txn.p) -m beg /after }}
    default_backend be
frontend fe_queue
    bind 127.0.0.1:{queue}
    log-format "%HP sq/bq=%sq/%bq %ts %ST"
    default_backend be_queue
backend be_queue
    timeout queue 5s
    server s1 127.0.0.1:{be} maxconn 1
frontend fe_queue_hash
    bind 127.0.0.1:{queue_hash}
    log-format "%HP sq/bq=%sq/%bq %ts %ST"
    default_backend be_queue_hash
backend be_queue_hash
    balance uri
    timeout queue 5s
    server s1 127.0.0.1:{be} maxconn 1
frontend fe_redisp
    bind 127.0.0.1:{redisp}
    default_backend redisp
backend redisp
    option redispatch
    retries 2
    server dead 127.0.0.1:{dead}
    server s1 127.0.0.1:{be}
defaults
    mode http
    log global
    timeout connect 1s
    timeout client 3s
    timeout server 1s
frontend fe_legacy
    bind 127.0.0.1:{legacy}
    default_backend be
frontend fe_legacy_tcp
    bind 127.0.0.1:{legacy_tcp}
    mode tcp
    default_backend be_tcp
"#,
        http = p.http,
        nosrv = p.nosrv,
        refused = p.refused,
        tcp = p.tcp,
        custom = p.custom,
        legacy = p.legacy,
        legacy_tcp = p.legacy + 1,
        redisp = p.redisp,
        fmt = p.fmt,
        uid = p.uid,
        uid_early = p.uid_early,
        tcpfmt = p.tcpfmt,
        queue = p.queue,
        queue_hash = p.queue_hash,
        last_rule = p.last_rule,
    )
}

fn conn(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
    s
}

/// Reads until the proxy closes, then closes (as a client that got its answer does).
fn drain(mut s: TcpStream) {
    let mut b = [0u8; 4096];
    while let Ok(1..) = s.read(&mut b) {}
}

fn req(path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n{extra}\r\n").into_bytes()
}

/// The traffic, in order; each scenario waits for its line before the next starts.
fn traffic(p: &Ports, sink: &UdpSocket, cli: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let expect = |n: usize, lines: &mut Vec<String>| {
        // (The sink waits up to LOG_WAIT for each line.)
        for _ in 0..n {
            let mut b = [0u8; 65536];
            match sink.recv(&mut b) {
                Ok(len) => lines.push(String::from_utf8_lossy(&b[..len]).to_string()),
                Err(_) => lines.push("<no line>".to_string()),
            }
        }
        // Both proxies log before a lingering close is over: let the session end, so that
        // the next line's connection counts do not depend on that race.
        settle(cli);
    };
    // Two keep-alive requests, the second a 404 that closes.
    let mut s = conn(p.http);
    s.write_all(&req("/a", "")).unwrap();
    let mut b = [0u8; 1024];
    let _ = s.read(&mut b);
    thread::sleep(Duration::from_millis(50));
    s.write_all(&req("/404", "Connection: close\r\n")).unwrap();
    drain(s);
    expect(2, &mut lines);
    // A bad request (400, PR).
    let mut s = conn(p.http);
    s.write_all(b"GARBAGE\r\n\r\n").unwrap();
    drain(s);
    expect(1, &mut lines);
    // No server (503, SC).
    let mut s = conn(p.nosrv);
    s.write_all(&req("/x", "")).unwrap();
    drain(s);
    expect(1, &mut lines);
    // The server closes without answering (502, SH), answers garbage (502, PH), closes
    // mid-body (SD).
    for path in ["/close", "/garbage", "/midclose"] {
        let mut s = conn(p.http);
        s.write_all(&req(path, "")).unwrap();
        drain(s);
        expect(1, &mut lines);
    }
    // A client that connects and leaves (CR), one that leaves mid-head (CR), one too slow (408).
    drop(conn(p.http));
    expect(1, &mut lines);
    let mut s = conn(p.http);
    s.write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
    thread::sleep(Duration::from_millis(100));
    drop(s);
    expect(1, &mut lines);
    let mut s = conn(p.http);
    s.write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
    drain(s);
    expect(1, &mut lines);
    // A server too slow (504, sH).
    let mut s = conn(p.http);
    s.write_all(&req("/sleep/1500", "")).unwrap();
    drain(s);
    expect(1, &mut lines);
    // Connection refused, retried 3 times (503, SC).
    let mut s = conn(p.refused);
    s.write_all(&req("/x", "")).unwrap();
    drain(s);
    expect(1, &mut lines);
    // The first server refuses, the request is redispatched to the second (200, rc=+1).
    let mut s = conn(p.redisp);
    s.write_all(&req("/a", "Connection: close\r\n")).unwrap();
    drain(s);
    expect(1, &mut lines);
    // TCP: a request answered, the client closes (--); an empty session (--).
    let mut s = conn(p.tcp);
    s.write_all(&req("/a", "")).unwrap();
    let _ = s.read(&mut b);
    drop(s);
    expect(1, &mut lines);
    // The empty session closes once its server connection is up: closed earlier, it races
    // the connection (haproxy then logs `CC` and no connect time).
    let s = conn(p.tcp);
    assert!(
        support::eventually(Duration::from_secs(5), || server_conns(cli, "be_tcp") == 1),
        "the empty TCP session never reached its server"
    );
    drop(s);
    expect(1, &mut lines);
    // A frontend that logs without a format: HAProxy's legacy line at accept, HTTP and TCP.
    for port in [p.legacy, p.legacy + 1] {
        let mut s = conn(port);
        s.write_all(&req("/a", "Connection: close\r\n")).unwrap();
        drain(s);
        expect(1, &mut lines);
    }
    // Chunked bodies both ways: %B and %U count the data, not the chunk framing.
    let mut s = conn(p.custom);
    s.write_all(
        b"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    )
    .unwrap();
    drain(s);
    expect(1, &mut lines);
    // Many variables at once, with captures.
    let mut s = conn(p.custom);
    s.write_all(
        b"GET /p/a?q=1&r=2 HTTP/1.1\r\nHost: x\r\nUser-Agent: te\"s]t\\long\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    drain(s);
    expect(1, &mut lines);
    // Sample expressions: variables set by rules, converters, absent samples, flags.
    for (path, extra) in [
        ("/p/a", "X-Foo: He\"l]l\\o Wd\r\n"),
        ("/q", "X-Foo: KEY\r\n"),
        ("/q", ""),
        ("/denied", "X-Foo: KEY\r\n"),
    ] {
        let mut s = conn(p.fmt);
        s.write_all(&req(path, &format!("{extra}Connection: close\r\n")))
            .unwrap();
        drain(s);
        expect(1, &mut lines);
    }
    // A unique id with converters, sent to the server and logged; computed after the request
    // rules, unless a rule reads it first.
    for port in [p.uid, p.uid_early] {
        let mut s = conn(port);
        s.write_all(&req("/u/v", "X-Foo: Ab\"c]\r\nConnection: close\r\n"))
            .unwrap();
        drain(s);
        expect(1, &mut lines);
    }
    // A bad request: no stream, so no unique id and no backend.
    let mut s = conn(p.uid);
    s.write_all(b"GARBAGE\r\n\r\n").unwrap();
    drain(s);
    expect(1, &mut lines);
    // TCP mode: a variable set by a content rule, HTTP-only samples absent.
    let mut s = conn(p.tcpfmt);
    s.write_all(&req("/a", "")).unwrap();
    let _ = s.read(&mut b);
    drop(s);
    expect(1, &mut lines);
    // The last final rule that ran, for each kind of rule list (none for `/plain`).
    for path in [
        "/plain",
        "/allow",
        "/deny",
        "/return",
        "/resdeny",
        "/allow/resdeny",
        "/after",
    ] {
        let mut s = conn(p.last_rule);
        s.write_all(&req(path, "Connection: close\r\n")).unwrap();
        drain(s);
        expect(1, &mut lines);
    }
    // Queues: a server at its maxconn 1 busy with a first request, a second one waits in the
    // backend's queue (round-robin) or in the server's (a hash picks the server first).
    for (port, backend) in [(p.queue, "be_queue"), (p.queue_hash, "be_queue_hash")] {
        let first = thread::spawn(move || {
            let mut s = conn(port);
            s.write_all(&req("/sleep/300", "Connection: close\r\n"))
                .unwrap();
            drain(s);
        });
        assert!(
            support::eventually(Duration::from_secs(5), || server_conns(cli, backend) == 1),
            "the first request never reached the server"
        );
        let mut s = conn(port);
        s.write_all(&req("/sleep/300", "Connection: close\r\n"))
            .unwrap();
        drain(s);
        first.join().unwrap();
        expect(2, &mut lines);
        // Two connections, perhaps on two workers, which flush their lines independently:
        // the pair is compared in an order of its own (its masked text).
        let n = lines.len();
        lines[n - 2..].sort_by_key(|l| mask(l, p));
    }
    lines
}

/// The current sessions of server `s1` of `backend`, from `show stat`.
fn server_conns(cli: &Path, backend: &str) -> u64 {
    let Ok(mut s) = UnixStream::connect(cli) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(b"show stat\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.len() > 4 && f[0] == backend && f[1] == "s1")
        .and_then(|f| f[4].parse().ok())
        .unwrap_or(0)
}

/// Masks what differs between two runs: the syslog date and pid, client and server-side ports,
/// dates, and timer values (a timer that is -1 stays -1: whether a stage was reached is compared).
fn mask(line: &str, p: &Ports) -> String {
    let mut line = line.to_string();
    for (port, name) in [
        (p.http, "P_HTTP"),
        (p.nosrv, "P_NOSRV"),
        (p.refused, "P_REF"),
        (p.tcp, "P_TCP"),
        (p.custom, "P_CUSTOM"),
        (p.redisp, "P_REDISP"),
        (p.legacy, "P_LEGACY"),
        (p.legacy + 1, "P_LEGACY_TCP"),
        (p.fmt, "P_FMT"),
        (p.uid, "P_UID"),
        (p.uid_early, "P_UID_EARLY"),
        (p.tcpfmt, "P_TCPFMT"),
        (p.queue, "P_QUEUE"),
        (p.queue_hash, "P_QUEUE_HASH"),
        (p.last_rule, "P_LAST_RULE"),
    ] {
        line = line.replace(&format!(":{port} "), &format!(":{name} "));
    }
    // `<134>Nov 24 06:44:02 haproxy[1234]: ` -> `<134>DATE haproxy[PID]: `
    let (head, msg) = match line.find("]: ") {
        Some(i) => line.split_at(i + 3),
        None => ("", line.as_str()),
    };
    let head = match (head.find('>'), head.find(" haproxy[")) {
        (Some(a), Some(_)) => format!("{}DATE haproxy[PID]: ", &head[..=a]),
        _ => head.to_string(),
    };
    let num = |t: &str| {
        if t == "-1" || t.parse::<i64>().is_err() {
            t.to_string()
        } else {
            "N".to_string()
        }
    };
    let mut out = Vec::new();
    for (i, tok) in msg.trim_end().split(' ').enumerate() {
        let tok = if i == 2 && msg.starts_with("Connect from ") {
            // The legacy line's client address.
            format!("{}:CPORT", tok.split(':').next().unwrap())
        } else if i == 0 && tok.contains(':') && !tok.contains('=') {
            // ci:cp
            format!("{}:CPORT", tok.split(':').next().unwrap())
        } else if tok.starts_with('[') && tok.ends_with(']') && tok.contains('/') {
            "[DATE]".to_string()
        } else if i == 4 && tok.contains('/') {
            tok.split('/').map(num).collect::<Vec<_>>().join("/")
        } else if let Some((k, v)) = tok.split_once('=') {
            let masked = match k {
                "Xci" => v.to_string(),
                _ if k.starts_with('T') => num(v),
                _ => v.to_string(),
            };
            format!("{k}={masked}")
        } else {
            tok.to_string()
        };
        out.push(tok);
    }
    format!("{head}{}", out.join(" "))
}

/// Waits until the proxy serves no connection (its `show info` says `CurrConns: 0`; neither
/// haproxy nor Bascule counts the CLI's own connection), at most 5 s.
fn settle(cli: &Path) {
    assert!(
        support::settle(cli, Duration::from_secs(5)),
        "the proxy still holds a connection 5 s after its log line"
    );
}

fn start(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn run_through(program: &str, p: &Ports, be: u16, dead: u16) -> Vec<String> {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(support::LOG_WAIT)).unwrap();
    let dir = TempDir::new("logs");
    let cfg = dir.path("p.cfg");
    let cli = dir.path("cli.sock");
    let map = dir.path("hosts.map");
    std::fs::write(&map, "key mapped\nhe\"l]l\\o mapped2\n").unwrap();
    let text = config(p, be, dead, sink.local_addr().unwrap().port())
        .replace("MAPFILE", &map.display().to_string())
        .replacen(
            "global\n",
            &format!("global\n    stats socket {} level admin\n", cli.display()),
            1,
        );
    std::fs::write(&cfg, text).unwrap();
    let mut child = if program == "haproxy" {
        start(Command::new(HAPROXY).arg("-db").arg("-f").arg(&cfg))
    } else {
        start(Command::new(BIN).arg("-f").arg(&cfg))
    };
    // Wait for the listeners.
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", p.custom)).is_ok() {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    // The probe connection above is logged by both (an empty connection): read it.
    let mut b = [0u8; 65536];
    let _ = sink.recv(&mut b);
    settle(&cli);
    let lines = traffic(p, &sink, &cli);
    let _ = child.kill();
    let _ = child.wait();
    lines.iter().map(|l| mask(l, p)).collect()
}

/// A free port whose successor is free too (the legacy frontends take both).
fn free_port_pair() -> u16 {
    support::free_ports(2)
}

#[test]
fn access_logs_match_haproxy_field_for_field() {
    if !support::have_haproxy("the log golden tests") {
        return;
    }
    let be = backend();
    let dead = free_port();
    let ports = || Ports {
        http: free_port(),
        nosrv: free_port(),
        refused: free_port(),
        tcp: free_port(),
        custom: free_port(),
        legacy: free_port_pair(),
        redisp: free_port(),
        fmt: free_port(),
        uid: free_port(),
        uid_early: free_port(),
        tcpfmt: free_port(),
        queue: free_port(),
        queue_hash: free_port(),
        last_rule: free_port(),
    };
    let p = ports();
    let reference = run_through("haproxy", &p, be, dead);
    let ours = run_through("bascule", &p, be, dead);
    let mut diffs = Vec::new();
    for (i, (h, b)) in reference.iter().zip(&ours).enumerate() {
        if h != b {
            diffs.push(format!("line {i}:\n  haproxy: {h}\n  bascule: {b}"));
        }
    }
    assert_eq!(reference.len(), ours.len());
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    // The comparison must have compared something.
    assert!(reference.iter().any(|l| l.contains("\"GET /a HTTP/1.1\"")));
    assert!(reference.iter().any(|l| l.contains(" SC-- ")));
    // The tracked entry is visible at log time (its request counted).
    assert!(
        reference.iter().any(|l| l.contains("sc0=1/")),
        "{reference:#?}"
    );
    assert!(reference.iter().any(|l| l.contains("map=mapped ")));
    assert!(reference.iter().any(|l| l.contains(" st=200 ")));
    assert!(reference
        .iter()
        .any(|l| l.contains("uid=- quid=\"\" fetch=- m=- be=- http=- r=\"<BADREQ>\"")));
    assert!(reference.iter().any(|l| l.contains(" st=- ")));
    assert!(reference.iter().any(|l| l.contains("uid=Ab\"c]--36")));
    assert!(reference.iter().any(|l| l.contains("/plain lr=- file=- ")));
    assert!(reference
        .iter()
        .any(|l| l.contains("/deny lr=") && !l.contains("lr=- ")));
    assert!(reference.iter().any(|l| l.contains("sq/bq=0/1 ")));
    assert!(reference.iter().any(|l| l.contains("sq/bq=1/0 ")));
    assert!(reference
        .iter()
        .any(|l| l.contains("uid=YWIiY10=-Ab\\\"c\\]-GET--/U/V-ruled ")));
}
