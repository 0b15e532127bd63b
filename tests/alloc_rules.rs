//! The steady-state HTTP/1 keep-alive path allocates nothing per request with a rule-heavy
//! configuration either.
//!
//! As tests/alloc_keepalive.rs (a counting global allocator, Bascule in-process, a client and a
//! backend that allocate nothing), with the frontend of bench/rules.cfg: ACLs on the path, the
//! query, headers, a cookie and a 10,000-network file, a 10,000-entry map looked up per request,
//! `set-header` with `%[...]` values, `set-var` then `var` in a later condition, `del-header`,
//! `capture` and `capture request header`, path rewrites, and response rules. Every rule acts
//! or is evaluated on each request; a warm-up lets the per-session buffers grow first. The counting
//! allocator is `alloc_support`'s.
#![allow(clippy::disallowed_methods)]

mod alloc_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n\
xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

const REQUEST: &[u8] = b"GET /static/v3/64.png?lang=fr&v=20261125 HTTP/1.1\r\n\
Host: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: image/avif,image/webp,*/*;q=0.8\r\n\
Accept-Language: fr-FR,fr;q=0.9,en;q=0.5\r\n\
Cookie: session=4f9c2a7d1b; lang=fr\r\n\
X-Forwarded-For: 198.51.100.7\r\n\
X-Debug: 1\r\n\r\n";

/// Sends `req` and reads one response (a fixed size); returns its status line's code.
fn request(c: &mut TcpStream, req: &[u8], buf: &mut [u8; 4096]) -> u16 {
    c.write_all(req).unwrap();
    let mut got = 0;
    loop {
        let n = c.read(&mut buf[got..]).unwrap();
        assert!(n > 0, "proxy closed the connection");
        got += n;
        // Our backend's response, or a short one the rules wrote: its head then its body.
        if let Some(end) = buf[..got].windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if got >= end + 4 + len {
                return head[9..12].parse().unwrap();
            }
        }
    }
}

const RULES: &str = "\
    acl static_path  path_beg /static/ /img/ /assets/ /favicon
    acl image        path_end .png .jpg .jpeg .gif .webp .svg
    acl legacy       path_reg ^/v[0-9]+/legacy/ \\.php$ ^/cgi-bin/
    acl api_path     path_beg /api/
    acl admin_path   path_beg -i /admin /wp-admin /phpmyadmin
    acl host_www     hdr(host) -i www.example.com example.com
    acl host_api     hdr(host) -i api.example.com
    acl host_known   req.hdr(host),lower,map(DIR/hosts.map) -m found
    acl bot          hdr_sub(user-agent) -i bot crawler spider scrapy
    acl cli_agent    hdr_beg(user-agent) -i curl/ wget/ python-requests/
    acl blocked_src  src -f DIR/networks.lst
    acl internal_src src 10.0.0.0/8 172.16.0.0/12 192.168.0.0/16
    acl read_method  method GET HEAD OPTIONS
    acl write_method method POST PUT PATCH DELETE
    acl debug_param  url_param(debug) -m str 1 true yes
    acl many_xff     req.hdr_cnt(x-forwarded-for) gt 3
    acl has_auth     req.hdr(authorization) -m found
    acl wants_fr     req.hdr(accept-language) -m beg fr
    acl has_session  req.cook(session) -m found
    acl trusted      var(txn.trusted) -m bool
    capture request header Host len 32
    http-request deny deny_status 403 if blocked_src || bot || legacy || admin_path !internal_src
    http-request redirect location /login code 302 if api_path write_method !has_auth
    http-request set-var(txn.tag) req.hdr(host),lower,map(DIR/hosts.map,none)
    http-request set-var(txn.trusted) bool(1) if host_known read_method !cli_agent !many_xff
    http-request set-header X-Tag %[req.hdr(host),lower,map(DIR/hosts.map,none)]
    http-request set-header X-Client %[src] if !internal_src
    http-request set-header X-Static %[var(txn.tag)] if static_path || image
    http-request del-header X-Debug unless debug_param internal_src
    http-request capture req.hdr(user-agent) len 64
    http-request set-header X-Lang fr if trusted wants_fr has_session host_www || host_api
    http-request add-header X-Via %[var(txn.tag)]-%[src]:%[src_port]
    http-request set-path /static/v3/64.png if { path_beg /static/ }
    http-request replace-path ^/static/(.*)$ /static/\\1
    http-request set-query %[query]
    http-request replace-header User-Agent ^(Mozilla)/(.*)$ \\1/\\2
    http-response set-header X-Tag %[var(txn.tag)]
    http-response add-header X-Rules 10
    http-response del-header X-Nothing
    http-response del-header x-pow -m beg
    http-response del-header -trace -m sub
    http-after-response set-header X-After %[var(txn.trusted)]
";

#[test]
fn rule_heavy_keep_alive_requests_do_not_allocate() {
    let dir = std::env::temp_dir().join(format!("bascule-alloc-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut map = String::from("www.example.com web\napi.example.com api\n");
    for i in 0..9_998u32 {
        map.push_str(&format!("h{i}.example.net tag{}\n", i % 7));
    }
    std::fs::write(dir.join("hosts.map"), map).unwrap();
    let nets: String = (0..10_000u32)
        .map(|i| format!("10.{}.{}.0/24\n", i >> 8, i & 255))
        .collect();
    std::fs::write(dir.join("networks.lst"), nets).unwrap();

    let be = TcpListener::bind("127.0.0.1:0").unwrap();
    let be_port = be.local_addr().unwrap().port();
    std::thread::spawn(move || alloc_support::backend(be, RESPONSE));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let rules = RULES.replace("DIR", dir.to_str().unwrap());
    let cfg = format!(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n{rules}    default_backend be\n\
         backend be\n    server s 127.0.0.1:{be_port}\n"
    );
    let loaded = bascule::config::load_str("alloc-rules.cfg", &cfg).expect("valid config");
    alloc_support::run_in_process(loaded.config);
    let mut c = alloc_support::connect_when_listening(port);
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    // The rules do run: a bot is denied, on its own connection.
    {
        let mut d = TcpStream::connect(("127.0.0.1", port)).unwrap();
        d.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let bot = String::from_utf8_lossy(REQUEST).replace("Gecko/20100101", "Googlebot/2.1");
        assert_eq!(request(&mut d, bot.as_bytes(), &mut buf), 403);
    }
    // Warm up: buffers, pools and the server connection are set up by now.
    for _ in 0..1_000 {
        assert_eq!(request(&mut c, REQUEST, &mut buf), 200);
    }
    let before = alloc_support::allocations();
    const N: u64 = 10_000;
    for _ in 0..N {
        request(&mut c, REQUEST, &mut buf);
    }
    let allocated = alloc_support::allocations() - before;
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        allocated < N / 100,
        "{allocated} heap allocations during {N} keep-alive requests ({:.2} per request)",
        allocated as f64 / N as f64
    );
}
