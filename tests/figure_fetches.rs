//! Fetches of proxy and server counters and settings (`fe_req_rate`, `be_conn_free`,
//! `srv_weight`, `be_server_timeout`, `fe_defbe`...), of the process (`hostname`, `thread`,
//! `nbproc`, `date_us`), of the client connection's `TCP_INFO` (`fc_rtt` and its family) and
//! of the `Authorization` header (`http_auth_type`, `http_auth_bearer`), with `baseq` and
//! `req.hdr_names`: the same configuration and requests through haproxy 2.6 and Bascule, the
//! answers compared.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::side::both;

/// Sends `req` on a new connection and returns the `x-f` header of the answer.
fn ask(port: u16, req: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .find_map(|l| l.strip_prefix("x-f: "))
        .unwrap_or("<no x-f header>")
        .to_string()
}

const GLOBAL: &str = "global\n    nbthread 1\n\
    defaults\n    mode http\n    timeout connect 1s\n    timeout client 4s\n    timeout server 3s\n";

#[test]
fn counters_settings_and_the_process_as_haproxy() {
    // A `listen` section is its own backend until another is chosen: the `be_*` fetches of
    // its request rules read it.
    let cfg = format!(
        "{GLOBAL}listen li\n    bind 127.0.0.1:@P2@\n    timeout tunnel 7s\n\
         \x20   server s1 127.0.0.1:@P1@ weight 7 maxconn 10\n\
         \x20   server s2 127.0.0.1:@P1@ weight 3 maxconn 5\n\
         \x20   server s3 127.0.0.1:@P1@ disabled\n\
         \x20   http-request return status 200 hdr x-f \"be=%[be_name] bsto=%[be_server_timeout] \
         btto=%[be_tunnel_timeout] bcf=%[be_conn_free] bcf2=%[be_conn_free(li)] \
         scf=%[srv_conn_free(li/s1)] sq=%[srv_queue(li/s2)] sw=%[srv_weight(li/s1)] \
         suw=%[srv_uweight(li/s2)] siw=%[srv_iweight(li/s1)] fct=%[fe_client_timeout] \
         defbe=%[fe_defbe] th=%[thread] np=%[nbproc] pr=%[proc] hn=%[hostname] \
         us=%[date_us,length,bool] rates=%[fe_req_rate,bool]/%[fe_sess_rate(li),bool]\"\n\
         frontend fe\n    bind 127.0.0.1:@P1@\n    timeout client 9s\n    default_backend bk\n\
         \x20   http-request return status 200 hdr x-f \"defbe=%[fe_defbe] fct=%[fe_client_timeout] \
         rates=%[fe_req_rate(fe)]/%[fe_sess_rate]\" if {{ fe_req_rate ge 1 }} {{ fe_req_rate le 3 }} \
         {{ fe_sess_rate le 3 }}\n\
         backend bk\n    server s 127.0.0.1:1 maxconn 2\n"
    );
    both("figures", &cfg, |_, p1, p2, _| {
        let get = "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
        vec![ask(p2, get), ask(p1, get)]
    });
}

#[test]
fn converters_naming_backends_and_servers_and_small_ones_as_haproxy() {
    let cfg = format!(
        "{GLOBAL}listen li\n    bind 127.0.0.1:@P2@\n\
         \x20   server s1 127.0.0.1:@P1@\n    server s2 127.0.0.1:@P1@\n\
         \x20   server s3 127.0.0.1:@P1@ disabled\n\
         \x20   http-request set-var(txn.a) str(x)\n\
         \x20   http-request return status 200 hdr x-f \"nb=%[str(li),nbsrv] nb2=%[str(bk),nbsrv] \
         nbx=%[str(nope),nbsrv] sq=%[str(li/s1),srv_queue] sq2=%[str(s2),srv_queue] \
         sqx=%[str(li/zz),srv_queue] cut=%[req.hdr(x-in),url_dec,cut_crlf] \
         h=%[int(258),htonl,hex] h2=%[int(-2),htonl,hex] \
         u=%[str(y),unset-var(txn.a)] a=%[var(txn.a)]\"\n\
         backend bk\n    server b1 127.0.0.1:@P1@\n    server b2 127.0.0.1:@P1@ disabled\n"
    );
    both("converters", &cfg, |_, _, p2, _| {
        vec![
            ask(
                p2,
                "GET / HTTP/1.1\r\nHost: h\r\nX-In: ab%0Dcd%0Aef\r\nConnection: close\r\n\r\n",
            ),
            ask(
                p2,
                "GET / HTTP/1.1\r\nHost: h\r\nX-In: %0Aab\r\nConnection: close\r\n\r\n",
            ),
        ]
    });
}

#[test]
fn language_picks_as_haproxy_picks() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n\
         \x20   http-request return status 200 hdr x-f \"l=%[req.fhdr(accept-language),language(fr;en;de-CH)] \
         d=%[req.fhdr(accept-language),language(es;it,en)]\"\n"
    );
    both("language", &cfg, |_, _, p2, _| {
        [
            "fr-FR,fr;q=0.9,en;q=0.8",
            "en;q=0.5, de-CH;q=0.7, fr;q=0.6",
            "de;q=1.0,de-CH;q=0.4",
            "it;q=0, en;q=0.001",
            "es-ES ; q = 0.3 , en;q=0.2",
            "*, en;q=0.9",
            "fr;q=0,en;q=0",
            "en;q=1.5,fr",
            "en;level=1;q=0.5, fr;q=0.4",
            "  ,, fr  ",
            "",
        ]
        .iter()
        .map(|h| {
            ask(
                p2,
                &format!(
                    "GET / HTTP/1.1\r\nHost: h\r\nAccept-Language: {h}\r\nConnection: close\r\n\r\n"
                ),
            )
        })
        .collect()
    });
}

#[test]
fn typed_response_fetches_and_aliases_as_haproxy() {
    // The server is the proxy's own second frontend, answering with the headers read.
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         \x20   http-request set-var(txn.u) urlp_val(n)\n\
         \x20   http-request set-var(txn.p) req_proto_http\n\
         backend be\n    server s 127.0.0.1:@P1@\n\
         \x20   http-response set-header x-f \"ip=%[res.hdr_ip(x-ip)] ip2=%[shdr_ip(x-ip,1)] \
         val=%[res.hdr_val(x-num)] val2=%[shdr_val(x-num)] cv=%[res.cook_val(v)] cv2=%[scook_val(w)] \
         ver=%[capture.res.ver] u=%[var(txn.u)] p=%[var(txn.p)] hdrs=%[res.hdrs,length]\"\n\
         frontend origin\n    bind 127.0.0.1:@P1@\n\
         \x20   http-request return status 200 hdr x-ip 10.1.2.3 hdr x-ip 192.0.2.9 hdr x-num 17 \
         hdr set-cookie v=42 hdr set-cookie w=x7\n"
    );
    both("typed res", &cfg, |_, _, p2, _| {
        vec![ask(
            p2,
            "GET /a?m=1&n=-12 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        )]
    });
}

#[test]
fn stopping_is_true_during_a_soft_stop_as_haproxy_says() {
    let be = support::http::HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         backend be\n    server s 127.0.0.1:{}\n\
         \x20   http-response set-header x-f \"stopping=%[stopping]\"\n",
        be.port
    );
    both("stopping", &cfg, |_, _, p2, run| {
        let before = ask(
            p2,
            "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        );
        // A response that arrives after the signal: its rules run while the process stops.
        let pid = run.pid();
        let signal = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            support::signal(pid, "-USR1");
        });
        let during = ask(
            p2,
            "GET /sleep/900 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        );
        signal.join().unwrap();
        vec![before, during]
    });
}

#[test]
fn tcp_info_of_the_client_connection_as_haproxy() {
    // Loopback: a round trip of some microseconds (under a millisecond: 0 ms), nothing
    // unacknowledged, lost or retransmitted when the request is read, the kernel's default
    // reordering (3).
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n\
         \x20   acl rtt_us fc_rtt(us) gt 0\n    acl rtt_ms fc_rtt(ms) lt 1000\n\
         \x20   acl var fc_rttvar(us) gt 0\n    acl var_ms fc_rttvar lt 1000\n\
         \x20   http-request set-var(txn.rtt) bool(1) if rtt_us rtt_ms var var_ms\n\
         \x20   http-request return status 200 hdr x-f \"un=%[fc_unacked] sk=%[fc_sacked] \
         re=%[fc_retrans] fa=%[fc_fackets] lo=%[fc_lost] ro=%[fc_reordering] \
         rtt=%[var(txn.rtt)]\"\n"
    );
    both("tcp_info", &cfg, |_, _, p2, _| {
        vec![ask(
            p2,
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        )]
    });
}

#[test]
fn tcp_info_in_tcp_mode_rules_and_logs_as_haproxy() {
    let echo = support::Backend::echo();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    mode tcp\n    bind 127.0.0.1:@P2@\n\
         \x20   log 127.0.0.1:@LOG@ format raw local0\n\
         \x20   log-format \"rtt=%[fc_rtt(us),bool] ro=%[fc_reordering] lo=%[fc_lost] \
         rule=%[var(sess.ro)]\"\n\
         \x20   tcp-request content set-var(sess.ro) fc_reordering\n\
         \x20   default_backend be\n\
         backend be\n    mode tcp\n    server s 127.0.0.1:{}\n",
        echo.port
    );
    both("tcp_info tcp", &cfg, |_, _, p2, run| {
        let mut s = TcpStream::connect(("127.0.0.1", p2)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        s.read_exact(&mut got).unwrap();
        drop(s);
        let mut lines = run.lines_n(1);
        lines.insert(0, String::from_utf8_lossy(&got).into_owned());
        lines
    });
}

#[test]
fn rdp_cookies_in_tcp_mode_as_haproxy() {
    let echo = support::Backend::echo();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    mode tcp\n    bind 127.0.0.1:@P2@\n\
         \x20   log 127.0.0.1:@LOG@ format raw local0\n\
         \x20   log-format \"c=%[var(sess.c)] m=%[var(sess.m)] x=%[var(sess.x)] n=%[var(sess.n)] \
         rdp=%[var(sess.rdp)]\"\n\
         \x20   tcp-request inspect-delay 500ms\n\
         \x20   tcp-request content set-var(sess.c) req.rdp_cookie\n\
         \x20   tcp-request content set-var(sess.m) rdp_cookie(MSTSHASH)\n\
         \x20   tcp-request content set-var(sess.x) req.rdp_cookie(other)\n\
         \x20   tcp-request content set-var(sess.n) req.rdp_cookie_cnt\n\
         \x20   tcp-request content set-var(sess.rdp) bool(1) if RDP_COOKIE\n\
         \x20   tcp-request content accept if RDP_COOKIE\n\
         \x20   tcp-request content accept if WAIT_END\n\
         \x20   default_backend be\n\
         backend be\n    mode tcp\n    server s 127.0.0.1:{}\n",
        echo.port
    );
    // TPKT and X.224 headers, then the cookie line and what follows it.
    let rdp = |line: &[u8]| {
        let mut p = vec![3, 0, 0, 0, 0, 0xe0, 0, 0, 0, 0, 0];
        p.extend_from_slice(line);
        p.extend_from_slice(&[1, 0, 8, 0, 0, 0, 0, 0]);
        p
    };
    let firsts = [
        rdp(b"Cookie: mstshash=alice\r\n"),
        rdp(b"Cookie:    msTShash=bob\r\n"),
        rdp(b"Cookie: other=x;y\r\n"),
        rdp(b"Cookie: nothing\r\n"),
        rdp(b"Not a cookie at all\r\n"),
    ];
    both("rdp", &cfg, |_, _, p2, run| {
        let mut seen = Vec::new();
        for first in &firsts {
            let mut s = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(first).unwrap();
            let mut back = vec![0u8; first.len()];
            s.read_exact(&mut back).unwrap();
            drop(s);
            seen.extend(run.lines_n(1));
        }
        seen
    });
}

#[test]
fn authorization_schemes_base_with_query_and_header_names_as_haproxy() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n\
         \x20   http-request return status 200 hdr x-f \"type=%[http_auth_type] \
         bearer=%[http_auth_bearer] other=%[http_auth_bearer(x-token)] baseq=%[baseq] \
         names=%[req.hdr_names] names2=%[req.hdr_names(;)]\"\n"
    );
    both("auth", &cfg, |_, _, p2, _| {
        [
            "Authorization: Bearer tok123\r\nConnection: keep-alive, Close\r\n",
            "Authorization: Basic dTpw\r\nX-Token: Bearer other\r\n",
            "authorization: bearer   spaced out\r\n",
            "Authorization: Negotiate abc\r\nConnection: upgrade\r\nUpgrade: x\r\n",
            "Authorization: Bearer\r\nX-Token: bearer  t2\r\n",
            "",
        ]
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let path = if i % 2 == 0 { "/p/a?q=1&r" } else { "/p/b" };
            ask(
                p2,
                &format!(
                    "GET {path} HTTP/1.1\r\nHost: Example.com\r\n{h}Connection: close\r\n\r\n"
                ),
            )
        })
        .collect()
    });
}

#[test]
fn a_bad_rtt_unit_is_refused_at_load() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:0\n    http-request set-var(txn.r) fc_rtt(s)\n"
    );
    let (ok, err) = support::check_config(&cfg);
    assert!(!ok, "{err}");
    assert!(
        err.contains("fc_rtt") && err.contains("'ms' or 'us'"),
        "{err}"
    );
}

/// The deprecated `cookie` (the request's `Cookie` in request rules, the response's
/// `Set-Cookie` in response rules), `req.hdrs_bin`/`res.hdrs_bin` (SPOE's length-prefixed
/// list), the `*_is_local` tests on local and foreign addresses (`set-src`), and `payload` /
/// `payload_lv` and `res.ssl_hello_type` in TCP mode.
#[test]
fn legacy_names_binary_headers_and_local_addresses_as_haproxy() {
    let srv = support::http::HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}listen li\n    bind 127.0.0.1:@P2@\n\
         \x20   http-request set-src req.hdr(x-src) if {{ req.hdr(x-src) -m found }}\n\
         \x20   http-request set-var-fmt(txn.f) \"ck=%[cookie(a)]\"\n\
         \x20   http-request set-var(txn.h) req.hdrs_bin,hex\n\
         \x20   http-request set-var-fmt(txn.l) \"sl=%[src_is_local] dl=%[dst_is_local] fsl=%[fc_src_is_local] fdl=%[fc_dst_is_local] maj=%[fc_http_major]\"\n\
         \x20   http-response set-header x-f \"%[var(txn.f)] sck=%[cookie(a)] %[var(txn.l)] rh=%[res.hdrs_bin,length]\"\n\
         \x20   http-response set-header x-h %[var(txn.h)]\n\
         \x20   server s 127.0.0.1:{}\n",
        srv.port
    );
    both("legacy http fetches", &cfg, |_, _, p2, _| {
        let mut out = Vec::new();
        for (extra, long) in [("", 3), ("X-Src: 10.9.9.9\r\n", 300)] {
            let req = format!(
                "GET /x HTTP/1.1\r\nHost: h\r\nCookie: b=0; a=1\r\nX-Long: {}\r\n{extra}Connection: close\r\n\r\n",
                "v".repeat(long)
            );
            let mut s = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut got = String::new();
            let _ = s.read_to_string(&mut got);
            out.extend(
                got.lines()
                    .filter(|l| l.starts_with("x-f") || l.starts_with("x-h"))
                    .map(String::from),
            );
        }
        out
    });
}

/// `cur_server_timeout` and `cur_tunnel_timeout`: 0 in the request rules until a
/// `set-timeout` rule sets them, then its value; in the response rules the value set, else
/// the backend's, as haproxy 2.6 answers.
#[test]
fn current_timeouts_follow_set_timeout_as_haproxy() {
    let srv = support::http::HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@\n    default_backend be\n\
         backend be\n    timeout server 3s\n    timeout tunnel 7s\n\
         \x20   http-request set-var(txn.a) cur_server_timeout\n\
         \x20   http-request set-var(txn.t) cur_tunnel_timeout\n\
         \x20   http-request set-timeout server 5s if {{ path /set }}\n\
         \x20   http-request set-timeout tunnel 9s if {{ path /set }}\n\
         \x20   http-request set-var(txn.b) cur_server_timeout\n\
         \x20   http-request set-var(txn.u) cur_tunnel_timeout\n\
         \x20   http-response set-header x-f \"%[var(txn.a)] %[var(txn.t)] %[var(txn.b)] %[var(txn.u)] %[cur_server_timeout] %[cur_tunnel_timeout]\"\n\
         \x20   server s 127.0.0.1:{}\n",
        srv.port
    );
    both("current timeouts", &cfg, |_, _, p2, _| {
        ["/", "/set"]
            .iter()
            .map(|p| {
                ask(
                    p2,
                    &format!("GET {p} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"),
                )
            })
            .collect()
    });
}
