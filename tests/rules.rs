//! Side-by-side tests of the rules engine: one configuration full of `acl`, `http-request`,
//! `http-response`, `http-after-response`, `tcp-request content`, `redirect`, `use_backend` and
//! `use-server` lines runs through Debian's haproxy 2.6 (the reference) and through Bascule, and
//! the same requests go through each. For every request the test compares
//!
//! - what the client got: every response head (1xx included), its status line and headers
//!   (names lower-cased, in order), its body, and whether the connection stayed open (a second
//!   request on it is answered or not);
//! - what the backend received: each request line and its headers (names lower-cased), and
//!   whether it came on the connection of the previous request;
//! - the log line (`option httplog`), with dates, ports and timer values masked.
//!
//! Each scenario ends with a marker request to a frontend of its own, whose log line closes the
//! scenario's lines (so a missing or extra line is caught where it happens).
//!
//! Deliberate differences (Bascule stricter or different on purpose) are listed in
//! [`DELIBERATE`]; the lines concerned are not compared field for field there, and the reason
//! is given.
//!
//! Without haproxy the test prints "skipped" (and fails when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::{free_port, TempDir, BIN, HAPROXY};

/// Differences that are deliberate: (scenario name, why). These scenarios are not compared
/// with haproxy; [`rules_match_haproxy`] checks Bascule's own answer for each instead.
const DELIBERATE: &[(&str, &str)] = &[
    (
        "normalize_dotdot",
        "haproxy 2.6.12 skips `normalize-uri path-strip-dotdot` when the rule has a condition \
         or follows another normalize-uri rule (observed; alone it works); Bascule applies it \
         as documented and as HAProxy's own reg-test (http-rules/normalize_uri) expects",
    ),
    (
        "normalize_percent",
        "the same haproxy 2.6.12 quirk for `percent-to-uppercase` and \
         `percent-decode-unreserved`: skipped under a condition",
    ),
];

/// What every recording backend saw: (server name, connection number, request head).
type Seen = Arc<Mutex<Vec<(String, usize, String)>>>;

/// A recording HTTP/1.1 backend named `name`: it records each request head, answers 200 with a
/// body `NAME` and the headers `x-srv: NAME`, `x-path: PATH`, `x-drop: 1` (or 404 for paths
/// ending in `/404`), and keeps the connection open.
fn recording_backend(name: &str, seen: &Seen) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (name, seen) = (name.to_string(), seen.clone());
    let conns = Arc::new(AtomicUsize::new(0));
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            let n = conns.fetch_add(1, Ordering::SeqCst);
            let (name, seen) = (name.clone(), seen.clone());
            thread::spawn(move || serve(c, &name, n, &seen));
        }
    });
    port
}

fn serve(mut c: TcpStream, name: &str, conn: usize, seen: &Seen) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        // A request body with a Content-Length (the tests send no other kind).
        let len = header(&head, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
        while buf.len() < len {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..len);
        seen.lock()
            .unwrap()
            .push((name.to_string(), conn, lower_names(&head)));
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        let status = if path.ends_with("/404") { 404 } else { 200 };
        let resp = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nX-Srv: {name}\r\nX-Path: {path}\r\nX-Drop: 1\r\n\r\n{name}",
            name.len()
        );
        if c.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The head with each header name lower-cased (values untouched), one line per header.
fn lower_names(head: &str) -> String {
    let mut out = Vec::new();
    for (i, l) in head.split("\r\n").enumerate() {
        if l.is_empty() {
            continue;
        }
        if i == 0 {
            out.push(l.to_string());
        } else if let Some((n, v)) = l.split_once(':') {
            out.push(format!("{}:{v}", n.to_ascii_lowercase()));
        } else {
            out.push(l.to_string());
        }
    }
    out.join("\n")
}

/// The ports of one run (the same for both proxies, which run one after the other).
struct Ports {
    fe: u16,
    bl: u16,
    maint: u16,
    maint_ok: u16,
    ssl: u16,
    ka: u16,
    mark: u16,
    after: u16,
    caps: u16,
}

struct Backends {
    main: u16,
    alt: u16,
    dyn_: u16,
    pair1: u16,
    pair2: u16,
    web1: u16,
    dead: u16,
}

fn config(p: &Ports, b: &Backends, sink: u16, dir: &TempDir) -> String {
    let agents = dir.path("agents.lst");
    std::fs::write(&agents, "curl\n# a comment\nwget\n\nlynx\n").unwrap();
    let hosts = dir.path("hosts.map");
    std::fs::write(
        &hosts,
        "# host -> tier\nwww.example.com gold\napi.example.com silver\n",
    )
    .unwrap();
    let regm = dir.path("regm.map");
    std::fs::write(&regm, "^([a-z]+)\\.(example)\\.com$ \\2:\\1\n^dyn$ plain\n").unwrap();
    let regm = regm.display();
    let agents = agents.display();
    let hosts = hosts.display();
    let cli = dir.path("cli.sock");
    let cli = cli.display();
    format!(
        r#"global
    log 127.0.0.1:{sink} local0
    stats socket {cli}
    expose-experimental-directives
defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 3s
    timeout server 2s
    timeout tarpit 200ms

userlist ul
    group admins users alice
    user alice insecure-password secret
    user bob password $5$saltsalt$OIdfjX.u4Y3SJ4I2bX8w5BMf1VAUhHABNUirScDzZi3

frontend fe
    bind 127.0.0.1:{fe}
    capture request header X-Cap len 8
    capture response header X-Srv len 10
    # seed 000: a blacklist that must not block 127.0.0.1
    acl blacklist src 10.0.0.0/8 192.168.0.0/16
    tcp-request content reject if blacklist
    tcp-request content accept if {{ req.hdr(x-tcp) acc }}
    tcp-request content reject if {{ req.hdr(x-tcp) -m found }}
    acl p_hdr path_beg /hdr
    acl is_auth path_beg /auth
    acl agent hdr(user-agent) -i -f {agents}
    http-request set-header X-Conn %[req.hdr(connection)] if {{ path /ka-conn }}
    http-request allow if {{ path_beg /allow }}
    http-request deny if {{ path /deny }}
    http-request deny deny_status 429 if {{ path /deny429 }}
    http-request deny status 451 content-type text/plain string "no way" hdr x-why blocked if {{ path /denybody }}
    http-request return if {{ path /ret0 }}
    http-request return status 201 content-type text/plain string "made" hdr x-a b hdr X-Up %[path] if {{ path /ret }}
    http-request return status 200 content-type "text/plain; charset=utf-8" lf-string "p=%[path] h=%[req.hdr(host),lower] ua=%[req.hdr(user-agent),upper] m=%[method]" if {{ path_beg /retlf }}
    http-request return status 404 if {{ path /ret404 }}
    http-request redirect location /elsewhere code 301 if {{ path /r/loc }}
    http-request redirect location /lf/%[req.hdr(host)]%[path] if {{ path /r/loclf }}
    http-request redirect prefix http://p.example code 302 if {{ path_beg /r/prefix }}
    http-request redirect prefix https://p.example drop-query if {{ path_beg /r/dq }}
    http-request redirect scheme https code 308 if {{ path_beg /r/scheme }}
    http-request redirect location /x code 303 set-cookie SEEN=1 if {{ path /r/cookie }}
    http-request redirect location /x code 307 clear-cookie OLD if {{ path /r/clear }}
    http-request redirect prefix / append-slash if {{ path_beg /r/slash }}
    http-request auth realm Private if is_auth !{{ http_auth(ul) }}
    http-request deny if {{ path_beg /auth/admin }} !{{ http_auth_group(ul) admins }}
    http-request set-header X-User %[http_auth_group(ul)] if is_auth
    http-request set-header X-Auth-Sent "%[http_auth_user]/%[http_auth_pass]" if is_auth
    http-request tarpit if {{ path /tarpit }}
    http-request tarpit deny_status 403 if {{ path /tarpit403 }}
    http-request reject if {{ path /reject }}
    http-request set-header X-Set %[path] if p_hdr
    http-request add-header X-Add one if p_hdr
    http-request add-header X-Add two if p_hdr
    http-request set-header X-Dup replaced if p_hdr
    http-request del-header X-Drop if p_hdr
    http-request del-header x-beg- -m beg if p_hdr
    http-request del-header zzsub -m sub if p_hdr
    http-request del-header ^x-re[0-9]$ -m reg if p_hdr
    http-request replace-header X-Rep ^(\w+)-(\w+)$ \2-\1 if p_hdr
    http-request replace-value X-Vals ^a(.*)$ A\1 if p_hdr
    http-request set-header X-Empty %[req.hdr(x-absent)] if p_hdr
    http-request set-path /new%[path] if {{ path_beg /sp/ }}
    http-request set-pathq /pq?x=1 if {{ path_beg /spq }}
    http-request set-query q=%[path] if {{ path_beg /sq }}
    http-request set-uri /u/%[method] if {{ path_beg /su }}
    http-request set-method PUT if {{ path_beg /sm }}
    http-request replace-path /rp/(.*) /replaced/\1 if {{ path_beg /rp/ }}
    http-request replace-uri ^/ru/(.*) /RU/\1 if {{ path_beg /ru/ }}
    http-request set-var(txn.tag) str(hello) if {{ path_beg /var }}
    http-request set-var(txn.len) path,length if {{ path_beg /var }}
    http-request set-var(sess.seen) str(yes) if {{ path_beg /var }}
    http-request set-header X-Tag %[var(txn.tag)]-%[var(txn.len)]-%[var(sess.seen)] if {{ path_beg /var }}
    http-request unset-var(txn.tag) if {{ path_beg /var/unset }}
    http-request set-header X-After %[var(txn.tag)] if {{ path_beg /var }}
    http-request capture req.hdr(x-cap2) len 5 if {{ path_beg /cap }}
    http-request set-log-level silent if {{ path_beg /silent }}
    http-request set-src req.hdr(x-real-ip) if {{ req.hdr(x-real-ip) -m found }}
    http-request set-header X-Src %[src] if {{ path_beg /src }}
    http-request normalize-uri path-merge-slashes if {{ path_beg /norm }}
    http-request normalize-uri path-strip-dotdot if {{ path_beg /norm/dd }}
    http-request normalize-uri path-strip-dot if {{ path_beg /norm/dd }}
    http-request normalize-uri query-sort-by-name if {{ path_beg /norm/q }}
    http-request normalize-uri percent-to-uppercase if {{ path_beg /norm/pct }}
    http-request normalize-uri percent-decode-unreserved if {{ path_beg /norm/pct }}
    http-request early-hint link "</style.css>; rel=preload" if {{ path /hint }}
    http-request early-hint link "</app.js>; rel=preload" if {{ path /hint }}
    http-request set-header X-Acl-i 1 if {{ path /acl }} {{ hdr(x-k) -i HeLLo }}
    http-request set-header X-Acl-beg 1 if {{ path /acl }} {{ hdr(x-k) -m beg hel }}
    http-request set-header X-Acl-sub 1 if {{ path /acl }} {{ hdr(x-k) -m sub ll }}
    http-request set-header X-Acl-reg 1 if {{ path /acl }} {{ hdr(x-k) -m reg ^h.l+o$ }}
    http-request set-header X-Acl-dom 1 if {{ path /acl }} {{ hdr(host) -m dom example.com }}
    http-request set-header X-Acl-end 1 if {{ path /acl }} {{ hdr(x-k) -m end llo }}
    http-request set-header X-Acl-len 1 if {{ path /acl }} {{ hdr(x-k) -m len 5 }}
    http-request set-header X-Acl-found 1 if {{ path /acl }} {{ hdr(x-k) -m found }}
    http-request set-header X-Acl-file 1 if {{ path /acl }} agent
    http-request set-header X-Acl-int 1 if {{ path /acl }} {{ req.hdr_cnt(x-k) gt 1 }}
    http-request set-header X-Map %[req.hdr(host),lower,map({hosts},unknown)] if {{ path /acl }}
    http-request set-header X-Regm %[req.hdr(host),lower,map_regm({regm},none)] if {{ path /acl }}
    http-request set-header X-Pre %[req.ver]-GET if {{ path /pre }} METH_GET
    http-request set-header X-Pre-11 1 if {{ path /pre }} HTTP_1.1
    http-request set-header X-Pre-10 1 if {{ path /pre }} HTTP_1.0
    http-request set-header X-Pre-lh 1 if {{ path /pre }} LOCALHOST
    http-request set-header X-Pre-post 1 if {{ path /pre }} METH_POST
    http-request set-header X-Pre-content 1 if {{ path /pre }} HTTP_CONTENT
    http-request set-header X-Pre-true 1 if {{ path /pre }} TRUE HTTP
    http-request set-header X-Pre-false 1 if {{ path /pre }} FALSE
    http-request set-header X-Pre-slash 1 if {{ path /pre }} HTTP_URL_SLASH
    http-request set-header X-C1 %[req.hdr(x-in),lower]|%[req.hdr(x-in),upper]|%[req.hdr(x-in),base64]|%[req.hdr(x-in),crc32] if {{ path /conv }}
    http-request set-header X-C2 %[req.hdr(x-in),field(2,-)]|%[req.hdr(x-in),regsub(-,_,g)]|%[req.hdr(x-in),json]|%[req.hdr(x-in),url_dec] if {{ path /conv }}
    http-request set-header X-C3 %[req.hdr(x-in),hex]|%[req.hdr(x-in),length]|%[req.hdr(x-in),bytes(1,3)]|%[req.hdr(x-in),word(2,-)]|%[src,ipmask(24)] if {{ path /conv }}
    http-request set-header X-C4 %[req.hdr(x-in),djb2]|%[req.hdr(x-in),sdbm]|%[req.hdr(x-in),wt6]|%[req.hdr(x-in),xxh32] if {{ path /conv }}
    http-request set-header X-C5 %[req.hdr(x-in),url_dec,json(utf8s)]|%[str(x),concat(-,txn.none,-)]|%[int(5),add(3),mul(2),sub(1),div(3),mod(4)] if {{ path /conv }}
    # issue 16: sha1, crc32c, xxh3 (x-in is 17 bytes, or 300 in converters_long)
    http-request set-header X-C9 %[req.hdr(x-in),sha1,hex]|%[req.hdr(x-in),crc32c]|%[req.hdr(x-in),crc32c(1)]|%[req.hdr(x-in),xxh3]|%[req.hdr(x-in),xxh3(-5)]|%[req.hdr(x-in),bytes(0,7),xxh3(3)]|%[req.hdr(x-in),bytes(0,150),xxh3(9)] if {{ path /conv }}
    # json_query: strings, numbers (%g, or 'int'), booleans; nothing for null, objects, arrays
    http-request set-header X-JQ %[req.fhdr(x-json),json_query('$.a')]|%[req.fhdr(x-json),json_query('$.a','int')]|%[req.fhdr(x-json),json_query('$.b.c')]|%[req.fhdr(x-json),json_query('$.arr[1]')]|%[req.fhdr(x-json),json_query('$.t'),add(5)]|%[req.fhdr(x-json),json_query('$.d\\.k')]|%[req.fhdr(x-json),json_query('$.n')]|%[req.fhdr(x-json),json_query('$.s')]|%[req.fhdr(x-json),json_query('$.arr')] if {{ path /jq }}
    # a binary cast to a string stops at its first NUL (reg-test sample_fetches/hashes)
    http-request set-header X-C10 %[bin(61006263),length]|%[bin(61006263),bytes(1),length]|%[bin(6100),upper,hex]|%[bin(6100),json]|%[bin(6100)]|%[bin(61006263),crc32]|%[int(1),hex] if {{ path /conv }}
    http-request set-header X-C11 str if {{ path /conv }} {{ bin(61006263) -m str a }}
    http-request set-header X-C12 bin if {{ path /conv }} {{ bin(61006263) -m bin 61006263 }}
    # issue 15: `\xHH` is the byte, in quotes or not, wherever a value takes bytes
    http-request set-header X-C6 "%[str(\xE0),json(utf8)]|%[str(-\xE0-),json(utf8s)]|%[str(\xC3\xA9),json(utf8)]|%[str(a\xE0\x41),hex]|%[req.hdr(x-in),concat(\xFF,txn.none,\xFE),hex]" if {{ path /conv }}
    http-request set-header X-C7 \xC3\xA9t"\xE9" if {{ path /conv }}
    http-request set-header X-C8 1 if {{ path /conv }} {{ req.hdr(x-in),url_dec -m sub \xC3\xA9 }}
    http-request return status 200 content-type text/plain string "r\xE9t\xC3\xA9" if {{ path /retraw }}
    redirect location /legacy code 302 if {{ path /r/keyword }}
    redirect prefix /pfx if {{ path_beg /r/kwprefix }}
    http-request redirect location /from-rule if {{ path /r/both }}
    redirect location /from-keyword if {{ path /r/both }}
    use_backend be_alt if {{ path_beg /alt }}
    use_backend be_alt if {{ hdr(x-be) alt }}
    use_backend be_alt if {{ src 10.1.2.3 }}
    use_backend be_alt if {{ path_beg /nb }} {{ nbsrv(be_main) ge 1 }}
    use_backend be_alt if {{ path_beg /var/be }} {{ var(txn.tag) -m str hello }}
    use_backend be_%[req.hdr(host),lower] if {{ path_beg /dyn }}
    use_backend be_pair if {{ path_beg /pair }}
    default_backend be_main
    http-response set-header X-Resp %[status] if {{ res.hdr(x-path) -m beg /rs }}
    http-response del-header X-Drop if {{ res.hdr(x-path) -m beg /rs }}
    http-response set-status 299 reason Fine if {{ res.hdr(x-path) -m beg /rs/status }}
    http-response set-status 298 if {{ res.hdr(x-path) -m beg /rs/nostatus }}
    http-response deny if {{ res.hdr(x-path) -m beg /rs/deny }}
    http-response return status 203 content-type text/plain string "swapped" if {{ res.hdr(x-path) -m beg /rs/return }}
    http-response replace-header X-Srv ^(.*)$ srv-\1 if {{ res.hdr(x-path) -m beg /rs }}
    http-response add-header X-Via fe if {{ res.hdr(x-path) -m beg /rs }}

frontend fe_after
    bind 127.0.0.1:{after}
    http-request deny if {{ path /deny }}
    http-request return status 200 string "ret" content-type text/plain if {{ path /ret }}
    http-request redirect location /x if {{ path /redir }}
    http-request auth realm R if {{ path /auth }}
    use_backend be_none if {{ path /nosrv }}
    http-response set-header X-Resp r if {{ res.hdr(x-path) -m beg /rs }}
    http-after-response set-header X-After yes
    http-after-response add-header X-Status %[status]
    http-after-response del-header X-Drop
    http-after-response set-status 202 if {{ status 200 }} {{ res.hdr(x-path) -m beg /st }}
    default_backend be_main

frontend fe_bl
    bind 127.0.0.1:{bl}
    acl blacklist src 10.0.0.0/8 127.0.0.0/8
    tcp-request content reject if blacklist
    default_backend be_main

frontend fe_maint
    bind 127.0.0.1:{maint}
    acl service_down nbsrv(web) lt 2
    redirect prefix http://maintenance.example.com code 302 if service_down
    default_backend web

frontend fe_maint_ok
    bind 127.0.0.1:{maint_ok}
    acl service_down nbsrv(web_ok) lt 2
    redirect prefix http://maintenance.example.com code 302 if service_down
    default_backend web_ok

frontend fe_ssl
    bind 127.0.0.1:{ssl}
    redirect scheme https code 301 if !{{ ssl_fc }}
    default_backend be_main

frontend fe_ka
    bind 127.0.0.1:{ka}
    http-request set-header Connection keep-alive
    default_backend be_ka

frontend fe_mark
    bind 127.0.0.1:{mark}
    http-request return status 200

backend be_main
    option forwardfor
    server s1 127.0.0.1:{main}

backend be_none

backend be_alt
    server alt 127.0.0.1:{alt}

backend be_dyn
    server dyn 127.0.0.1:{dyn_}

backend be_pair
    balance roundrobin
    use-server s2 if {{ hdr(x-srv) 2 }}
    use-server s1 if {{ hdr(x-srv) 1 }}
    server s1 127.0.0.1:{pair1}
    server s2 127.0.0.1:{pair2}

backend web
    server w1 127.0.0.1:{web1}
    server w2 127.0.0.1:{dead} check inter 100ms fall 1

backend web_ok
    server w1 127.0.0.1:{web1}
    server w2 127.0.0.1:{pair2}

backend be_ka
    server k1 127.0.0.1:{main}

# Issue 15: request capture slots are numbered in one list, in line order, those that a named
# defaults section's rules add first: here 0 host (inherited), 1 x-a, 2 X-Cap, 3 the declared
# slot, 4 x-c. The last section of the file, so that no other inherits these defaults.
defaults caps_def
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 3s
    timeout server 2s
    http-request capture req.hdr(host) len 12

frontend fe_caps from caps_def
    bind 127.0.0.1:{caps}
    http-request capture req.hdr(x-a) len 4
    capture request header X-Cap len 8
    declare capture request len 6
    http-request capture req.hdr(x-b) id 3
    tcp-request content capture req.hdr(x-c) len 5
    http-request return status 200 hdr X-C0 "%[capture.req.hdr(0)]" hdr X-C1 "%[capture.req.hdr(1)]" hdr X-C2 "%[capture.req.hdr(2)]" hdr X-C3 "%[capture.req.hdr(3)]" hdr X-C4 "%[capture.req.hdr(4)]" hdr X-C5 "%[capture.req.hdr(5)]"
"#,
        fe = p.fe,
        bl = p.bl,
        maint = p.maint,
        maint_ok = p.maint_ok,
        ssl = p.ssl,
        ka = p.ka,
        mark = p.mark,
        after = p.after,
        caps = p.caps,
        main = b.main,
        alt = b.alt,
        dyn_ = b.dyn_,
        pair1 = b.pair1,
        pair2 = b.pair2,
        web1 = b.web1,
        dead = b.dead,
    )
}

/// One scenario: a name, the frontend port, the requests sent on one connection (the
/// connection's liveness is checked after the last one), and the client's source address.
struct Scenario {
    name: &'static str,
    port: fn(&Ports) -> u16,
    requests: Vec<String>,
    from: Option<[u8; 4]>,
}

/// A GET with `Host: www.example.com` (unless `extra` has a Host of its own) and `extra`.
fn get(path: &str, extra: &str) -> String {
    let host = if extra.to_ascii_lowercase().contains("host:") {
        ""
    } else {
        "Host: www.example.com\r\n"
    };
    format!("GET {path} HTTP/1.1\r\n{host}User-Agent: t\r\n{extra}\r\n")
}

fn sc(name: &'static str, requests: Vec<String>) -> Scenario {
    Scenario {
        name,
        port: |p| p.fe,
        requests,
        from: None,
    }
}

fn on(name: &'static str, port: fn(&Ports) -> u16, requests: Vec<String>) -> Scenario {
    Scenario {
        name,
        port,
        requests,
        from: None,
    }
}

fn scenarios() -> Vec<Scenario> {
    let basic = |u: &str, p: &str| {
        use std::fmt::Write;
        let raw = format!("{u}:{p}");
        // base64 by hand (no dependency).
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in raw.as_bytes().chunks(3) {
            let n = (c[0] as u32) << 16
                | (*c.get(1).unwrap_or(&0) as u32) << 8
                | *c.get(2).unwrap_or(&0) as u32;
            for i in 0..4 {
                if i <= c.len() {
                    out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        let mut h = String::new();
        let _ = write!(h, "Authorization: Basic {out}\r\n");
        h
    };
    vec![
        sc("plain", vec![get("/plain", "X-Cap: captured-long\r\n")]),
        sc("allow", vec![get("/allow", "")]),
        sc("deny", vec![get("/deny", "")]),
        sc("deny_status", vec![get("/deny429", "")]),
        sc("deny_body", vec![get("/denybody", "")]),
        sc("return_empty", vec![get("/ret0", "")]),
        sc("return_string", vec![get("/ret", "")]),
        sc(
            "return_lf",
            vec![get("/retlf?a=1", "Host: WWW.Example.COM\r\n")],
        ),
        sc("return_404", vec![get("/ret404", "")]),
        sc("redirect_location", vec![get("/r/loc?x=1", "")]),
        sc("redirect_location_lf", vec![get("/r/loclf", "")]),
        sc("redirect_prefix", vec![get("/r/prefix/a?b=c", "")]),
        sc("redirect_drop_query", vec![get("/r/dq/a?b=c", "")]),
        sc("redirect_scheme", vec![get("/r/scheme/a?b=c", "")]),
        sc("redirect_set_cookie", vec![get("/r/cookie", "")]),
        sc("redirect_clear_cookie", vec![get("/r/clear", "")]),
        sc("redirect_append_slash", vec![get("/r/slash/dir?q", "")]),
        sc("redirect_keyword", vec![get("/r/keyword", "")]),
        sc("redirect_keyword_prefix", vec![get("/r/kwprefix/z", "")]),
        sc("redirect_rule_before_keyword", vec![get("/r/both", "")]),
        sc("auth_none", vec![get("/auth/x", "")]),
        sc("auth_wrong", vec![get("/auth/x", &basic("alice", "nope"))]),
        sc("auth_clear_ok", vec![get("/auth/x", &basic("alice", "secret"))]),
        sc("auth_crypt_ok", vec![get("/auth/x", &basic("bob", "hunter2"))]),
        sc("auth_crypt_wrong", vec![get("/auth/x", &basic("bob", "hunter3"))]),
        sc(
            "auth_group_ok",
            vec![get("/auth/admin", &basic("alice", "secret"))],
        ),
        sc(
            "auth_group_no",
            vec![get("/auth/admin", &basic("bob", "hunter2"))],
        ),
        sc("tarpit", vec![get("/tarpit", "")]),
        sc("tarpit_status", vec![get("/tarpit403", "")]),
        sc("reject", vec![get("/reject", "")]),
        sc(
            "headers",
            vec![get(
                "/hdr",
                "X-Drop: a\r\nX-Beg-One: 1\r\nx-beg-two: 2\r\nAzzsubB: 3\r\nX-Re1: 4\r\nX-Re12: 5\r\nX-Dup: a\r\nX-Dup: b\r\nX-Rep: left-right\r\nX-Vals: abc, xyz,aq\r\nX-Keep: k\r\n",
            )],
        ),
        sc("set_path", vec![get("/sp/a?q=1", "")]),
        sc("set_pathq", vec![get("/spq/a?q=1", "")]),
        sc("set_query", vec![get("/sq/a?q=1", "")]),
        sc("set_uri", vec![get("/su/a?q=1", "")]),
        sc("set_method", vec![get("/sm/a", "")]),
        sc("replace_path", vec![get("/rp/a/b?q=1", "")]),
        sc("replace_uri", vec![get("/ru/a/b?q=1", "")]),
        sc("vars", vec![get("/var/x", "")]),
        sc("vars_unset", vec![get("/var/unset", "")]),
        sc("vars_use_backend", vec![get("/var/be", "")]),
        sc(
            "capture",
            vec![get("/cap", "X-Cap: abcdefghijkl\r\nX-Cap2: 123456789\r\n")],
        ),
        // (HAProxy happens to open a new server connection for a request after a silent one
        // on the same client connection; which connection carries a request is not part of
        // the comparison, so the next request is a scenario of its own.)
        sc("silent", vec![get("/silent", "")]),
        sc(
            "set_src_xff",
            vec![get("/src", "X-Real-IP: 10.1.2.3\r\n")],
        ),
        sc("normalize_slashes", vec![get("/norm//a///b?z=1", "")]),
        sc("normalize_dotdot", vec![get("/norm/dd/a/b/../c/./d?z=1", "")]),
        sc("normalize_query", vec![get("/norm/q/a?z=1&a=%2f&m", "")]),
        sc("normalize_percent", vec![get("/norm/pct/%7e%2fa%41?q=%2f", "")]),
        sc("early_hint", vec![get("/hint", "")]),
        sc(
            "acl_flags_1",
            vec![get("/acl", "X-K: hello\r\nUser-Agent: CURL\r\n")],
        ),
        sc(
            "acl_flags_2",
            vec![get(
                "/acl",
                "Host: API.example.com\r\nX-K: HeLLo\r\nX-K: help\r\nUser-Agent: Lynx\r\n",
            )],
        ),
        sc(
            "acl_flags_3",
            vec![get("/acl", "Host: example.org\r\nUser-Agent: other\r\n")],
        ),
        sc("predefined_get", vec![get("/pre", "")]),
        sc(
            "predefined_post",
            vec!["POST /pre HTTP/1.0\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc".to_string()],
        ),
        sc(
            "converters",
            vec![get("/conv", "X-In: aB-c%20D-\"eé\"c\r\n")],
        ),
        sc(
            "converters_absent",
            vec![get("/conv", "")],
        ),
        sc("return_raw_bytes", vec![get("/retraw", "")]),
        sc("json_query_0", vec![get("/jq", "X-Json: {\"a\":\"x\\\"y\",\"b\":{\"c\":12},\"arr\":[1, \"two\" ,3],\"n\":null,\"t\":true,\"s\":\"a\\/b\",\"d.k\":5}\r\n")]),
        sc("json_query_1", vec![get("/jq", "X-Json: {\"a\":4.5e2,\"s\":\"\\u0041\\u00e9\\u0100\"}\r\n")]),
        sc("json_query_2", vec![get("/jq", "X-Json: {\"a\":-4.7,\"t\":false}\r\n")]),
        sc("json_query_3", vec![get("/jq", "X-Json: {\"s\":\"\\u0041\\u00e9z\"}\r\n")]),
        sc("json_query_4", vec![get("/jq", "X-Json: {\"a\":12345678901234567890}\r\n")]),
        sc("json_query_5", vec![get("/jq", "X-Json: {\"a\":1.5e-7,\"b\":{\"d\":1,\"c\":\"z\"}}\r\n")]),
        sc("json_query_6", vec![get("/jq", "X-Json: {\"a\":123456789}\r\n")]),
        sc("json_query_7", vec![get("/jq", "X-Json: {\"a\":9007199254740993}\r\n")]),
        sc("json_query_8", vec![get("/jq", "X-Json: {\"x\":{\"a\":1},\"a\":2,\"a\":3}\r\n")]),
        sc("json_query_9", vec![get("/jq", "X-Json: {\"a\":\"x\"\r\n")]),
        sc("json_query_10", vec![get("/jq", "X-Json: nonsense\r\n")]),
        sc(
            "converters_long",
            vec![get("/conv", &format!("X-In: {}\r\n", "aB-c%20D-xyz0123".repeat(19)))],
        ),
        sc("use_backend_path", vec![get("/alt/x", "")]),
        sc("use_backend_hdr", vec![get("/x", "X-Be: alt\r\n")]),
        sc("use_backend_nbsrv", vec![get("/nb", "")]),
        sc(
            "use_backend_src",
            vec![get("/src-be", "X-Real-IP: 10.1.2.3\r\n")],
        ),
        sc("use_backend_dynamic", vec![get("/dyn/a", "Host: DYN\r\n")]),
        sc(
            "use_backend_dynamic_missing",
            vec![get("/dyn/b", "Host: nope\r\n")],
        ),
        sc("use_server_2", vec![get("/pair/a", "X-Srv: 2\r\n")]),
        sc(
            "use_server_1_twice",
            vec![
                get("/pair/b", "X-Srv: 1\r\n"),
                get("/pair/c", "X-Srv: 1\r\n"),
            ],
        ),
        sc("response_rules", vec![get("/rs/a", "")]),
        sc("response_set_status", vec![get("/rs/status", "")]),
        sc("response_set_status_noreason", vec![get("/rs/nostatus", "")]),
        sc("response_deny", vec![get("/rs/deny", "")]),
        sc("response_return", vec![get("/rs/return", "")]),
        sc("response_404", vec![get("/rs/404", "")]),
        sc("tcp_content_accept", vec![get("/tcp", "X-Tcp: acc\r\n")]),
        sc("tcp_content_reject", vec![get("/tcp", "X-Tcp: rej\r\n")]),
        sc(
            "keepalive_three",
            vec![get("/a", ""), get("/deny", ""), get("/ret", "")],
        ),
        on("after_served", |p| p.after, vec![get("/rs/x", "")]),
        on(
            "capture_slots_in_line_order",
            |p| p.caps,
            vec![get(
                "/caps",
                "X-A: aaaaaa\r\nX-Cap: cap\r\nX-B: bbbbbbbbb\r\nX-C: cc\r\n",
            )],
        ),
        on("after_set_status", |p| p.after, vec![get("/st/x", "")]),
        on("after_deny", |p| p.after, vec![get("/deny", "")]),
        on("after_return", |p| p.after, vec![get("/ret", "")]),
        on("after_redirect", |p| p.after, vec![get("/redir", "")]),
        on("after_auth", |p| p.after, vec![get("/auth", "")]),
        on("after_no_server", |p| p.after, vec![get("/nosrv", "")]),
        on(
            "after_bad_request",
            |p| p.after,
            vec!["GET /a HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n".to_string()],
        ),
        on("blacklist_127", |p| p.bl, vec![get("/x", "")]),
        on("maintenance_one_down", |p| p.maint, vec![get("/m?q=1", "")]),
        on("maintenance_both_up", |p| p.maint_ok, vec![get("/m", "")]),
        on("ssl_fc_redirect", |p| p.ssl, vec![get("/s?q=1", "")]),
        on(
            "connection_keep_alive_header",
            |p| p.ka,
            vec![get("/k1", ""), get("/k2", "")],
        ),
        Scenario {
            name: "locahost_from_127_0_0_2",
            port: |p| p.fe,
            requests: vec![get("/pre", "")],
            from: Some([127, 0, 0, 2]),
        },
    ]
}

/// One response as the client read it: every head (1xx first), then the body.
fn read_response(s: &mut TcpStream, head_request: bool) -> Option<(Vec<String>, String)> {
    let mut buf = Vec::new();
    let mut heads = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => {
                    if buf.is_empty() && heads.is_empty() {
                        return None;
                    }
                    heads.push(format!(
                        "<partial> {}",
                        String::from_utf8_lossy(&buf).escape_debug()
                    ));
                    return Some((heads, String::new()));
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let norm = lower_names(&head);
        heads.push(norm);
        if (100..200).contains(&status) {
            continue;
        }
        let len = header(&head, "content-length").map(|v| v.parse::<usize>().unwrap_or(0));
        let body_len = match len {
            _ if head_request || status == 204 || status == 304 => 0,
            Some(n) => n,
            None => usize::MAX,
        };
        while buf.len() < body_len {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = String::from_utf8_lossy(&buf[..buf.len().min(body_len)]).to_string();
        return Some((heads, body));
    }
}

/// What one scenario produced.
#[derive(Debug, PartialEq)]
struct Outcome {
    responses: Vec<String>,
    open_after: bool,
    backend: Vec<String>,
    logs: Vec<String>,
}

impl Outcome {
    /// The parts of `self` (haproxy's) and `o` (Bascule's) that differ.
    fn diff(&self, o: &Outcome) -> String {
        let mut out = String::new();
        let mut part = |what: &str, h: &[String], b: &[String]| {
            if h != b {
                out.push_str(&format!(
                    "  {what}:\n    haproxy: {h:?}\n    bascule: {b:?}\n"
                ));
            }
        };
        part("responses", &self.responses, &o.responses);
        part("backend received", &self.backend, &o.backend);
        part("logs", &self.logs, &o.logs);
        if self.open_after != o.open_after {
            out.push_str(&format!(
                "  open after: haproxy {} bascule {}\n",
                self.open_after, o.open_after
            ));
        }
        out
    }
}

fn connect_from(port: u16, from: Option<[u8; 4]>) -> TcpStream {
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let s = match from {
        None => TcpStream::connect(to).unwrap(),
        Some(ip) => {
            let sock =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.bind(&SocketAddr::from((ip, 0)).into()).unwrap();
            sock.connect(&to.into()).unwrap();
            sock.into()
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
    s
}

fn run_scenario(
    sc: &Scenario,
    p: &Ports,
    seen: &Seen,
    sink: &UdpSocket,
    cli: &std::path::Path,
    n: usize,
) -> Outcome {
    seen.lock().unwrap().clear();
    let mut s = connect_from((sc.port)(p), sc.from);
    let mut responses = Vec::new();
    let mut open = true;
    for r in &sc.requests {
        if s.write_all(r.as_bytes()).is_err() {
            open = false;
            responses.push("<write failed>".to_string());
            break;
        }
        match read_response(&mut s, r.starts_with("HEAD ")) {
            Some((heads, body)) => {
                let mut text = heads.join("\n--\n");
                text.push_str("\n\n");
                text.push_str(&body);
                responses.push(text);
            }
            None => {
                open = false;
                responses.push("<closed without a response>".to_string());
                break;
            }
        }
    }
    // Is the connection still usable? A last request to a path every frontend answers.
    if open {
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let probe = "GET /probe-open HTTP/1.1\r\nHost: x\r\n\r\n";
        open = s.write_all(probe.as_bytes()).is_ok()
            && read_response(&mut s, false).is_some_and(|(h, _)| h[0].starts_with("HTTP/1.1 "));
    }
    drop(s);
    // The scenario's session over (its line then goes out at once) before the marker's
    // connection opens: the marker may be served by another worker, and workers flush their
    // lines independently.
    settle(cli);
    // Server connections are named in the order they appear in the scenario (c0, c1...).
    let mut conns: Vec<(String, usize)> = Vec::new();
    let backend = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, head)| !head.contains("/probe-open"))
        .map(|(name, conn, head)| {
            let key = (name.clone(), *conn);
            let c = conns.iter().position(|k| *k == key).unwrap_or_else(|| {
                conns.push(key);
                conns.len() - 1
            });
            format!("[{name} c{c}]\n{head}")
        })
        .collect::<Vec<_>>();
    // The marker closes the scenario's log lines.
    let marker = format!("/mark/{n}");
    let mut m = connect_from(p.mark, None);
    let _ = m.write_all(
        format!("GET {marker} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let _ = read_response(&mut m, false);
    drop(m);
    // (The next scenario waits for the marker's session to end: its connection counts.)
    let mut logs = Vec::new();
    let deadline = Instant::now() + support::LOG_WAIT;
    while Instant::now() < deadline {
        let mut b = [0u8; 65536];
        match sink.recv(&mut b) {
            Ok(len) => {
                let line = String::from_utf8_lossy(&b[..len]).to_string();
                if line.contains(&format!("\"GET {marker} ")) {
                    break;
                }
                if line.contains("/probe-open") {
                    continue;
                }
                logs.push(mask(&line, p));
            }
            Err(_) => break,
        }
    }
    Outcome {
        responses,
        open_after: open,
        backend,
        logs,
    }
}

/// Masks what differs between two runs: the syslog date and pid, ports, dates, and timer
/// values (a timer that is -1 stays -1: whether a stage was reached is compared).
fn mask(line: &str, p: &Ports) -> String {
    let mut line = line.to_string();
    for (port, name) in [(p.fe, "P_FE"), (p.after, "P_AFTER"), (p.bl, "P_BL")] {
        line = line.replace(&format!(":{port} "), &format!(":{name} "));
    }
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
        let tok = if i == 0 && tok.contains(':') {
            format!("{}:CPORT", tok.split(':').next().unwrap())
        } else if tok.starts_with('[') && tok.ends_with(']') && tok.contains('/') {
            "[DATE]".to_string()
        } else if i == 4 && tok.contains('/') {
            tok.split('/').map(num).collect::<Vec<_>>().join("/")
        } else {
            tok.to_string()
        };
        out.push(tok);
    }
    format!("{head}{}", out.join(" "))
}

fn start(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (up to 10 s) until the proxy serves no client connection (`show info` says
/// `CurrConns: 0`), so that a scenario's log line does not count the previous scenario's
/// connection while its close is still being processed.
fn settle(cli: &std::path::Path) {
    support::settle(cli, Duration::from_secs(10));
}

/// Whether `show stat` on `cli` shows server `srv` of `backend` DOWN.
fn down(cli: &std::path::Path, backend: &str, srv: &str) -> bool {
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(cli) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(b"show stat\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .any(|f| f.len() > 17 && f[0] == backend && f[1] == srv && f[17].starts_with("DOWN"))
}

fn run_through(program: &str, p: &Ports, b: &Backends, seen: &Seen) -> Vec<Outcome> {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let dir = TempDir::new("rules");
    let cfg = dir.path("p.cfg");
    std::fs::write(&cfg, config(p, b, sink.local_addr().unwrap().port(), &dir)).unwrap();
    let mut child = if program == "haproxy" {
        start(Command::new(HAPROXY).arg("-db").arg("-f").arg(&cfg))
    } else {
        start(Command::new(BIN).arg("-db").arg("-f").arg(&cfg))
    };
    let mut up = false;
    for _ in 0..150 {
        if TcpStream::connect(("127.0.0.1", p.mark)).is_ok() {
            up = true;
            break;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    if !up {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "{program} did not start:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Let the health check take the dead server down; drain the probe's line.
    let cli = dir.path("cli.sock");
    assert!(
        support::eventually(Duration::from_secs(10), || down(&cli, "web", "w2")),
        "{program}: web/w2 never went DOWN"
    );
    let mut buf = [0u8; 65536];
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while sink.recv(&mut buf).is_ok() {}
    sink.set_read_timeout(Some(support::LOG_WAIT)).unwrap();
    let out = scenarios()
        .iter()
        .enumerate()
        .map(|(n, s)| {
            settle(&cli);
            run_scenario(s, p, seen, &sink, &cli, n)
        })
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    out
}

#[test]
fn rules_match_haproxy() {
    if !support::have_haproxy("the rules side-by-side test") {
        return;
    }
    let seen: Seen = Arc::default();
    let b = Backends {
        main: recording_backend("main", &seen),
        alt: recording_backend("alt", &seen),
        dyn_: recording_backend("dyn", &seen),
        pair1: recording_backend("pair1", &seen),
        pair2: recording_backend("pair2", &seen),
        web1: recording_backend("web1", &seen),
        dead: free_port(),
    };
    // Distinct ports: the listeners are held until all are chosen (both proxies bind with
    // SO_REUSEPORT, so two frontends given one port would share its connections).
    let held: Vec<TcpListener> = (0..9)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let port = |i: usize| held[i].local_addr().unwrap().port();
    let p = Ports {
        fe: port(0),
        bl: port(1),
        maint: port(2),
        maint_ok: port(3),
        ssl: port(4),
        ka: port(5),
        mark: port(6),
        after: port(7),
        caps: port(8),
    };
    drop(held);
    let reference = run_through("haproxy", &p, &b, &seen);
    let ours = run_through("bascule", &p, &b, &seen);
    let names: Vec<_> = scenarios().iter().map(|s| s.name).collect();
    let mut diffs = Vec::new();
    for ((name, h), o) in names.iter().zip(&reference).zip(&ours) {
        if DELIBERATE.iter().any(|(n, _)| n == name) {
            continue;
        }
        if h != o {
            diffs.push(format!("=== {name}\n{}", h.diff(o)));
        }
    }
    if std::env::var_os("RULES_DUMP").is_some() {
        for (name, h) in names.iter().zip(&reference) {
            println!("=== {name}\n{h:#?}");
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    // The comparison compared something: a few facts of the reference itself.
    let by = |n: &str| &reference[names.iter().position(|x| *x == n).unwrap()];
    assert!(by("deny").responses[0].starts_with("HTTP/1.1 403"));
    assert!(by("deny").open_after);
    assert!(by("reject").responses[0].contains("closed without"));
    assert!(by("maintenance_one_down").responses[0].starts_with("HTTP/1.1 302"));
    assert!(by("maintenance_both_up").responses[0].starts_with("HTTP/1.1 200"));
    assert!(by("blacklist_127").responses[0].contains("closed without"));
    assert!(by("plain").responses[0].starts_with("HTTP/1.1 200"));
    assert!(by("ssl_fc_redirect").responses[0].starts_with("HTTP/1.1 301"));
    assert!(by("silent").logs.is_empty());
    assert!(by("plain").logs.len() == 1);
    assert!(by("early_hint").responses[0].starts_with("HTTP/1.1 103"));
    // The deliberate differences: Bascule's own answers.
    let ours_by = |n: &str| &ours[names.iter().position(|x| *x == n).unwrap()];
    assert!(
        ours_by("normalize_dotdot").backend[0].contains("GET /norm/dd/a/c/d?z=1 HTTP/1.1"),
        "{:?}",
        ours_by("normalize_dotdot")
    );
    assert!(
        ours_by("normalize_percent").backend[0].contains("GET /norm/pct/~%2FaA?q=%2F HTTP/1.1"),
        "{:?}",
        ours_by("normalize_percent")
    );
    assert!(by("after_no_server").responses[0].contains("\nx-after: yes\nx-status: 503\n"));
}

/// Seed 000 as written (`nbsrv(web) -lt 2`): haproxy 2.6 refuses the `-lt` flag, Bascule
/// loads it with a warning and reads it as `lt` (see `src/rules/mod.rs`), so this part is
/// checked on Bascule alone.
#[test]
fn seed_000_dash_lt_loads_with_a_warning() {
    let dir = TempDir::new("rules-seed");
    let cfg = dir.path("seed.cfg");
    std::fs::write(
        &cfg,
        format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n\
             frontend fe\n    bind 127.0.0.1:{}\n    acl blacklist src 10.0.0.0/8 192.168.0.0/16\n    \
             tcp-request content reject if blacklist\n    acl service_down nbsrv(web) -lt 2\n    \
             redirect prefix http://maintenance.example.com code 302 if service_down\n    \
             default_backend web\nbackend web\n    server a 127.0.0.1:1\n    server b 127.0.0.1:2\n",
            free_port()
        ),
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("-c")
        .arg("-f")
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("WARNING") && err.contains("-lt"), "{err}");
}
