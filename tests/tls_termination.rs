//! TLS termination (`bind ... ssl crt ...`), side by side with Debian's haproxy 2.6 (OpenSSL 3):
//! the same configuration and the same client (rustls) through both, comparing statuses,
//! headers, what the fetches say (`ssl_fc`, `ssl_fc_sni`, `ssl_fc_protocol`, ...), the log
//! lines (`%ft` shows `fe~`, `%sslv`, `%sslc`, and the `fe/bind: SSL handshake failure` lines of
//! failed handshakes), and which certificate SNI selects. Seed 004's frontend (`bind :80` +
//! `bind :443 ssl`, `redirect scheme https if !{ ssl_fc }`, keep-alive to the server) and seed
//! 003's WebSocket over TLS run through both. What only Bascule shows (TLS in TCP mode, a
//! large response before close_notify) is checked on Bascule.
//!
//! Without haproxy the side-by-side tests print "skipped" (and fail when `CI` is set).
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use support::http::HttpBackend;
use support::side::{both, mask, Run};
use support::tls::{self as client, leaf_of};
use support::{free_port, Backend, BIN};

const GLOBAL: &str = "global\n    log 127.0.0.1:@LOG@ format raw local0\n\
defaults\n    mode http\n    log global\n    timeout client 2s\n    timeout server 5s\n    timeout connect 2s\n";

#[test]
fn seed_004_redirects_clear_text_and_serves_tls_with_keep_alive() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P1@\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem name tls\n\
         \x20   log-format \"%ft %b/%s %ST %sslv %sslc %[ssl_fc] %[ssl_fc_sni] %[ssl_fc_protocol] %[ssl_fc_has_sni] %[ssl_fc_use_keysize]\"\n\
         \x20   redirect scheme https code 301 if !{{ ssl_fc }}\n\
         \x20   http-request set-header X-Proto %[ssl_fc_protocol]\n\
         \x20   http-request set-header X-Sni %[ssl_fc_sni]\n\
         \x20   default_backend be\n\
         backend be\n    server s1 127.0.0.1:{}\n",
        be.port
    );
    both("seed_004", &cfg, |_, p1, p2, run| {
        let mut seen = Vec::new();
        let mut plain = TcpStream::connect(("127.0.0.1", p1)).unwrap();
        let r = client::exchange(
            &mut plain,
            "GET /a?b=1 HTTP/1.1\r\nHost: www.example.com\r\n\r\n",
        )
        .unwrap();
        seen.push(format!("{} {:?}", r.status(), r.header("location")));
        // The redirect's line before the TLS connection opens: workers flush their lines
        // independently, so two connections' lines could otherwise come in either order.
        let mut logs = run.lines_n(1);
        let before = be.seen().len();
        let mut tls = client::connect(p2, "www.example.com", client::config(&[], false)).unwrap();
        for path in ["/one", "/two"] {
            let r = client::exchange(
                &mut tls,
                &format!("GET {path} HTTP/1.1\r\nHost: www.example.com\r\n\r\n"),
            )
            .unwrap();
            seen.push(format!(
                "{} {}",
                r.status(),
                String::from_utf8_lossy(&r.body)
            ));
        }
        drop(tls);
        let got = be.seen();
        for s in &got[before..] {
            seen.push(format!(
                "server saw {:?} {:?}",
                support::http::header(&s.head, "x-proto"),
                support::http::header(&s.head, "x-sni")
            ));
        }
        logs.extend(run.lines_n(2));
        seen.extend(logs.iter().map(|l| mask(l)));
        seen
    });
}

#[test]
fn fetches_and_logs_over_tls_1_2_and_1_3() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem alpn http/1.1\n\
         \x20   log-format \"%ft %ST %sslv %sslc\"\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc] %[ssl_fc_sni] %[ssl_fc_protocol] %[ssl_fc_cipher] %[ssl_fc_alpn] %[ssl_fc_is_resumed] %[ssl_fc_use_keysize] %[ssl_fc_alg_keysize] %[ssl_c_used]\"\n"
    );
    both("fetches", &cfg, |_, _, p2, run| {
        let (mut seen, mut logs) = (Vec::new(), Vec::new());
        for tls12 in [false, true] {
            let mut tls =
                client::connect(p2, "www.example.com", client::config(&["http/1.1"], tls12))
                    .unwrap();
            let r = client::exchange(&mut tls, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            seen.push(String::from_utf8_lossy(&r.body).into_owned());
            // Each connection's line before the next connection (workers flush independently).
            logs.extend(run.lines_n(1));
        }
        seen.extend(logs);
        seen
    });
}

#[test]
fn failed_handshakes_are_logged_in_haproxys_words() {
    for extra in ["", "    option dontlognull\n"] {
        let cfg = format!(
            "{GLOBAL}{extra}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-rsa.pem name secure\n\
             \x20   bind 127.0.0.1:@P1@ ssl crt @CRT@/www-rsa.pem\n\
             \x20   option httplog\n    http-request return status 200\n"
        );
        both("handshake failures", &cfg, |_, p1, p2, run| {
            let mut seen = Vec::new();
            // Clear text on a TLS port.
            let mut s = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut b = Vec::new();
            let _ = s.read_to_end(&mut b);
            // Workers flush their log lines independently: one scenario at a time, each
            // scenario's line waited for before the next connection opens.
            let mut logs = run.lines_n(1);
            // A connection that sends nothing and closes; then one on the unnamed bind. Under
            // dontlognull the silent ones are not logged (a surplus still shows: `lines_n`
            // takes what follows within its quiet gap).
            let silent_logged = usize::from(extra.is_empty());
            drop(TcpStream::connect(("127.0.0.1", p2)).unwrap());
            logs.extend(run.lines_n(silent_logged));
            let mut s = TcpStream::connect(("127.0.0.1", p1)).unwrap();
            s.write_all(b"\x16\x03\x01\x00\x05abcde").unwrap();
            let _ = s.read_to_end(&mut b);
            logs.extend(run.lines_n(1));
            // A client that says nothing until `timeout client` (2 s) ends the handshake.
            let mut s = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
            let n = s.read(&mut [0u8; 16]).unwrap_or(99);
            seen.push(format!("silent client read {n}"));
            logs.extend(run.lines_n(silent_logged));
            seen.extend(logs.iter().map(|l| mask(l)));
            seen
        });
    }
}

#[test]
fn sni_picks_the_certificate_and_strict_sni_refuses_unknown_names() {
    for strict in ["", " strict-sni"] {
        let cfg = format!(
            "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem crt @CRT@/wild-ecdsa.pem{strict}\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc_sni]\"\n"
        );
        both("sni", &cfg, |_, _, p2, _| {
            let mut seen = Vec::new();
            for name in ["www.example.com", "a.example.org", "other.example.net"] {
                let c = client::config(&[], false);
                match client::connect(p2, name, c) {
                    Ok(mut s) => {
                        let leaf = client::peer_leaf(&s);
                        let which = if leaf == leaf_of("www-ecdsa.pem") {
                            "www"
                        } else if leaf == leaf_of("wild-ecdsa.pem") {
                            "wild"
                        } else {
                            "other"
                        };
                        // An unknown name gets the default certificate, which the client
                        // rejects (wrong name) unless it matched.
                        let r = client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
                        seen.push(format!(
                            "{name}: {which} {:?}",
                            r.map(|r| String::from_utf8_lossy(&r.body).into_owned())
                                .map_err(|e| e.kind())
                        ));
                    }
                    Err(e) => seen.push(format!("{name}: refused ({})", e.kind())),
                }
            }
            seen
        });
    }
}

/// A plain WebSocket server: answers the upgrade of RFC 6455's example key, then echoes.
fn websocket_server() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 65536];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let _ = c.write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                      Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                );
                while let Ok(n) = c.read(&mut b) {
                    if n == 0 || c.write_all(&b[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn websocket_over_tls_reaches_a_plain_server() {
    let ws = websocket_server();
    let cfg = format!(
        "{GLOBAL}    timeout tunnel 5s\nfrontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:{ws}\n"
    );
    both("wss", &cfg, |bin, _, p2, _| {
        let mut tls = client::connect(p2, "www.example.com", client::config(&[], false)).unwrap();
        let r = client::exchange(
            &mut tls,
            "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
        let mut seen = vec![r.status().to_string()];
        for msg in [&b"hello over wss"[..], &[7u8; 40000][..]] {
            tls.write_all(msg).unwrap();
            tls.flush().unwrap();
            let mut back = vec![0u8; msg.len()];
            tls.read_exact(&mut back)
                .unwrap_or_else(|e| panic!("{bin}: {e} after {:?}", r.head));
            seen.push(format!("echoed {} bytes: {}", msg.len(), back == msg));
        }
        seen
    });
}

#[test]
fn a_large_response_before_close_arrives_whole_then_close_notify() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-rsa.pem\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:{}\n",
        be.port
    );
    both("large response", &cfg, |_, _, p2, _| {
        let mut tls = client::connect(p2, "www.example.com", client::config(&[], false)).unwrap();
        tls.write_all(b"GET /size/3000000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        // Read slowly at first, so the proxy's socket fills and its records wait.
        thread::sleep(Duration::from_millis(300));
        let r = client::read_response(&mut tls).unwrap();
        let whole = r.body.len() == 3_000_000 && r.body.iter().all(|&b| b == b'x');
        vec![
            r.status().to_string(),
            format!("whole body: {whole}"),
            format!("close_notify: {}", client::closed_cleanly(&mut tls)),
        ]
    });
}

/// A request that leaves with the client's Finished (as `openssl s_time` and browsers send it)
/// finds it decrypted when the handshake ends: Bascule keeps the session tickets for the response
/// and, the connection closing after it, sends close_notify with it too. The client must still
/// get all three: the response, a clean close and a ticket its next connection resumes with.
#[test]
fn a_request_sent_with_the_finished_gets_tickets_response_and_close_notify() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n    default_backend be\n\
         \x20   http-response set-header X-Resumed %[ssl_fc_is_resumed]\n\
         backend be\n    server s1 127.0.0.1:{}\n",
        be.port
    );
    both("request with finished", &cfg, |_, _, p2, _| {
        let config = client::config(&[], false);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let sock = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let name = rustls::pki_types::ServerName::try_from("www.example.com").unwrap();
            let mut conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
            // Written before the handshake: rustls sends it right behind its Finished.
            conn.writer()
                .write_all(b"GET /size/64 HTTP/1.0\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut tls = rustls::StreamOwned::new(conn, sock);
            let r = client::read_response(&mut tls).unwrap();
            seen.push(format!(
                "{} {} resumed {:?} close_notify {}",
                r.status(),
                r.body.len(),
                r.header("x-resumed"),
                client::closed_cleanly(&mut tls)
            ));
        }
        seen
    });
}

#[test]
fn tls_in_tcp_mode_forwards_clear_text_both_ways() {
    let echo = Backend::echo();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    mode tcp\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem alpn h2,http/1.1\n\
         \x20   log-format \"%ft %ts %sslv %[ssl_fc_alpn]\"\n    default_backend be\n\
         backend be\n    mode tcp\n    server s1 127.0.0.1:{}\n",
        echo.port
    );
    both("tcp mode", &cfg, |_, _, p2, run| {
        let c = client::config(&["h2"], false);
        let mut tls = client::connect(p2, "www.example.com", c).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let writer_data = data.clone();
        let mut seen = vec![format!("alpn {:?}", tls.conn.alpn_protocol())];
        // Write and read at once: more than the socket buffers hold.
        let mut back = Vec::new();
        let mut off = 0;
        tls.sock.set_nonblocking(false).unwrap();
        while back.len() < data.len() {
            if off < writer_data.len() {
                let end = (off + 16384).min(writer_data.len());
                tls.write_all(&writer_data[off..end]).unwrap();
                off = end;
            }
            let mut b = [0u8; 65536];
            if off >= writer_data.len() || back.len() + 65536 < off {
                let n = tls.read(&mut b).unwrap();
                assert!(n > 0, "early end after {}", back.len());
                back.extend_from_slice(&b[..n]);
            }
        }
        seen.push(format!("echo intact: {}", back == data));
        tls.conn.send_close_notify();
        let _ = tls.conn.write_tls(&mut tls.sock);
        seen.push(format!(
            "close_notify back: {}",
            client::closed_cleanly(&mut tls)
        ));
        seen.extend(run.lines_n(1));
        seen
    });
}

#[test]
fn client_certificates_required_optional_and_missing() {
    for verify in ["required", "optional"] {
        let cfg = format!(
            "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-rsa.pem verify {verify} ca-file @CRT@/ca.pem name mtls\n\
             \x20   log-format \"%ft %ST %[ssl_c_used] %[ssl_c_s_dn(CN)]\"\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_c_used] %[ssl_fc_has_crt] %[ssl_c_verify] %[ssl_c_s_dn] %[ssl_c_i_dn] %[ssl_c_s_dn(CN)] %[ssl_c_i_dn(CN,1)] %[ssl_c_serial,hex] %[ssl_c_notbefore] %[ssl_c_notafter] %[ssl_c_version] %[ssl_c_sha1,hex] %[ssl_c_der,hex] %[ssl_c_sig_alg] %[ssl_c_key_alg] %[ssl_c_chain_der,hex]\"\n"
        );
        both("client certificates", &cfg, |_, _, p2, run| {
            let (mut seen, mut logs) = (Vec::new(), Vec::new());
            for with_cert in [true, false] {
                let c = if with_cert {
                    client::config_with_cert("www-ecdsa.pem")
                } else {
                    client::config(&[], false)
                };
                // TLS 1.3 sends the client's certificate after the server's Finished: a refusal
                // shows on the first read.
                let got = client::connect(p2, "www.example.com", c).and_then(|mut s| {
                    client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                });
                seen.push(match got {
                    Ok(r) => format!("{}: {}", r.status(), String::from_utf8_lossy(&r.body)),
                    Err(e) => format!("refused ({:?})", e.kind()),
                });
                // Each connection's line before the next connection (workers flush their
                // lines independently).
                logs.extend(run.lines_n(1));
            }
            seen.extend(logs.iter().map(|l| mask(l)));
            seen
        });
    }
}

#[test]
fn sessions_resume_with_tickets_and_with_the_cache() {
    for tickets in ["", " no-tls-tickets"] {
        let cfg = format!(
            "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem{tickets}\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc_is_resumed] %[ssl_fc_protocol]\"\n"
        );
        both("resumption", &cfg, |_, _, p2, _| {
            let mut seen = Vec::new();
            for tls12 in [false, true] {
                // One client configuration: its session store carries the session over.
                let c = client::config(&[], tls12);
                for _ in 0..3 {
                    let mut s = client::connect(p2, "www.example.com", c.clone()).unwrap();
                    let r = client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                    seen.push(String::from_utf8_lossy(&r.body).into_owned());
                }
            }
            seen
        });
    }
}

/// A socket that keeps a copy of every byte it reads.
struct Tee {
    sock: TcpStream,
    seen: Vec<u8>,
}

impl Read for Tee {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = self.sock.read(b)?;
        self.seen.extend_from_slice(&b[..n]);
        Ok(n)
    }
}

impl Write for Tee {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.sock.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.sock.flush()
    }
}

#[test]
fn tune_ssl_maxrecord_caps_the_records_sent() {
    let be = HttpBackend::start();
    let cfg = format!(
        "global\n    tune.ssl.maxrecord 1400\n{}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:{}\n",
        GLOBAL.trim_start_matches("global\n"),
        be.port
    );
    both("maxrecord", &cfg, |_, _, p2, _| {
        let sock = TcpStream::connect(("127.0.0.1", p2)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let name = rustls::pki_types::ServerName::try_from("www.example.com").unwrap();
        let conn = rustls::ClientConnection::new(client::config(&[], false), name).unwrap();
        let mut s = rustls::StreamOwned::new(
            conn,
            Tee {
                sock,
                seen: Vec::new(),
            },
        );
        let r = client::exchange(&mut s, "GET /size/20000 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        // Application-data records (type 23): payload, content type and a 16-byte tag.
        let mut largest = 0;
        let mut at = &s.sock.seen[..];
        while at.len() >= 5 {
            let len = usize::from(u16::from_be_bytes([at[3], at[4]]));
            if at[0] == 23 {
                largest = largest.max(len);
            }
            at = &at[(5 + len).min(at.len())..];
        }
        vec![
            format!("{} {}", r.status(), r.body.len()),
            format!(
                "records at most 1400 + 17 bytes: {}",
                largest <= 1417 && largest > 1000
            ),
        ]
    });
}

#[test]
fn an_idle_tls_connection_serves_again_after_a_pause() {
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}    timeout http-keep-alive 5s\nfrontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:{}\n",
        be.port
    );
    both("idle tls", &cfg, |_, _, p2, _| {
        let mut seen = Vec::new();
        let mut tls = client::connect(p2, "www.example.com", client::config(&[], false)).unwrap();
        // Pauses longer than Bascule's 100 ms before parking an idle connection.
        for (i, pause) in [0u64, 300, 600, 250].into_iter().enumerate() {
            thread::sleep(Duration::from_millis(pause));
            let r = client::exchange(
                &mut tls,
                &format!("GET /size/{} HTTP/1.1\r\nHost: x\r\n\r\n", 1000 * (i + 1)),
            )
            .unwrap();
            seen.push(format!("{} {}", r.status(), r.body.len()));
        }
        seen
    });
    // Bascule alone (haproxy 2.6 now and then closes such a connection instead of answering):
    // a pipelined pair wakes a connection parked with its TLS state.
    let port = free_port();
    let _run = Run::start(BIN, &cfg.replace("@P2@", &port.to_string()), port);
    let mut tls = client::connect(port, "www.example.com", client::config(&[], false)).unwrap();
    for _ in 0..3 {
        let r = client::exchange(&mut tls, "GET /size/5 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(r.body.len(), 5);
        thread::sleep(Duration::from_millis(300));
        tls.write_all(
            b"GET /size/7 HTTP/1.1\r\nHost: x\r\n\r\nGET /size/9 HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .unwrap();
        for len in [7, 9] {
            let r = client::read_response(&mut tls).unwrap();
            assert_eq!((r.status(), r.body.len()), (200, len));
        }
        thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn maxsslrate_paces_tls_accepts_and_refuses_none() {
    let cfg = format!(
        "global\n    maxsslrate 20\n{}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n\
         \x20   http-request return status 200 content-type text/plain string ok\n",
        GLOBAL.trim_start_matches("global\n")
    );
    both("maxsslrate", &cfg, |_, _, p2, _| {
        let wave = || {
            let t0 = std::time::Instant::now();
            let handles: Vec<_> = (0..40)
                .map(|_| {
                    thread::spawn(move || {
                        let c = client::config(&[], false);
                        let mut s = client::connect(p2, "www.example.com", c).ok()?;
                        let r =
                            client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
                        (r.status() == 200).then(|| t0.elapsed())
                    })
                })
                .collect();
            let done: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let served = done.iter().flatten().count();
            (served, done.into_iter().flatten().max().unwrap_or_default())
        };
        // The first wave goes through at the rate of 20 (Bascule holds the handshakes in
        // flight against the room, as haproxy caps each accept batch at it); the next 40 find
        // the last second's handshakes over the rate and wait for them to fade, however the
        // waves fall against the counter's seconds.
        let (first, _) = wave();
        let (second, last) = wave();
        vec![
            format!("served {first} then {second} of 40"),
            format!(
                "second wave paced: {}",
                last >= Duration::from_millis(500) && last < Duration::from_secs(6)
            ),
        ]
    });
}

#[test]
fn ssl_f_fetches_name_the_certificate_sni_chose() {
    let f = "%[ssl_f_s_dn] %[ssl_f_i_dn] %[ssl_f_s_dn(CN)] %[ssl_f_i_dn(,0,rfc2253)] %[ssl_f_serial,hex] %[ssl_f_notbefore] %[ssl_f_notafter] %[ssl_f_version] %[ssl_f_sha1,hex] %[ssl_f_der,hex,length] %[ssl_f_sig_alg] %[ssl_f_key_alg] %[ssl_fc_is_resumed]";
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem crt @CRT@/wild-ecdsa.pem\n\
         \x20   log-format \"%ST %[ssl_f_s_dn(CN)] %[ssl_f_sha1,hex]\"\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"{f}\"\n"
    );
    both("ssl_f", &cfg, |_, _, p2, run| {
        let (mut seen, mut logs) = (Vec::new(), Vec::new());
        for name in ["www.example.com", "a.example.org"] {
            // One client configuration, twice: the second connection resumes, and is still
            // told of the certificate SNI chose.
            let c = client::config(&[], false);
            for _ in 0..2 {
                let mut s = client::connect(p2, name, c.clone()).unwrap();
                let r = client::exchange(&mut s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                seen.push(format!("{name}: {}", String::from_utf8_lossy(&r.body)));
                // Each connection's line before the next connection (workers flush their
                // lines independently).
                logs.extend(run.lines_n(1));
            }
        }
        seen.extend(logs);
        seen
    });
}

#[test]
fn option_httpslog_logs_the_tls_facts_as_haproxy_does() {
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:@P2@ ssl crt @CRT@/www-ecdsa.pem\n    bind 127.0.0.1:@P1@\n\
         \x20   option httpslog\n    http-request return status 200\n"
    );
    both("httpslog", &cfg, |_, p1, p2, run| {
        for tls12 in [false, true] {
            let mut tls =
                client::connect(p2, "www.example.com", client::config(&[], tls12)).unwrap();
            client::exchange(&mut tls, "GET /s HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        }
        let mut plain = TcpStream::connect(("127.0.0.1", p1)).unwrap();
        client::exchange(&mut plain, "GET /p HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        // The timers vary: the frontend, the status and what follows the request are kept.
        // Each worker drains its own log buffer, so lines of connections served by different
        // workers may arrive in either order: the lines are compared sorted.
        let mut seen: Vec<String> = run
            .lines_n(3)
            .iter()
            .map(|l| {
                let words: Vec<&str> = l.split(' ').collect();
                let tail = l.rsplit_once('"').map_or("", |(_, t)| t);
                format!("{} {}{tail}", words[2], words[5])
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                // Without TLS the TLS fetches have no value (ssl_fc_is_resumed is false).
                "fe 200 0/-/-/-/0 -/-/-",
                "fe~ 200 0/0000000000000000/0/0/0 www.example.com/TLSv1.2/ECDHE-ECDSA-AES256-GCM-SHA384",
                "fe~ 200 0/0000000000000000/0/0/0 www.example.com/TLSv1.3/TLS_AES_256_GCM_SHA384",
            ]
        );
        seen
    });
}

/// A TLS client over the UNIX socket at `path`, sending `sni`.
fn connect_unix(
    path: &std::path::Path,
    sni: &str,
) -> rustls::StreamOwned<rustls::ClientConnection, std::os::unix::net::UnixStream> {
    let sock = std::os::unix::net::UnixStream::connect(path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(client::config(&[], false), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, sock);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).unwrap();
    }
    s
}

#[test]
fn tls_on_a_unix_socket_bind_in_http_and_tcp_mode() {
    // A plain TCP frontend tells the harness the proxy is up; the TLS ones listen on UNIX
    // sockets beside the stats socket's path.
    let be = HttpBackend::start();
    let cfg = format!(
        "{GLOBAL}    timeout http-keep-alive 5s\n\
         frontend up\n    bind 127.0.0.1:@P2@\n    http-request return status 200\n\
         frontend fe\n    bind unix@@SOCK@.http ssl crt @CRT@/www-ecdsa.pem crt @CRT@/www-rsa.pem name tlsunix\n\
         \x20   log-format \"%ci %ft %b %ST %sslv %[ssl_fc] %[ssl_fc_sni] %[ssl_fc_protocol]\"\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[ssl_fc] %[ssl_fc_sni] %[ssl_fc_is_resumed] %[ssl_fc_protocol]\" if {{ path /facts }}\n\
         \x20   default_backend be\n\
         backend be\n    server s1 127.0.0.1:{}\n\
         frontend tcpfe\n    mode tcp\n    bind unix@@SOCK@.tcp ssl crt @CRT@/www-ecdsa.pem\n\
         \x20   log-format \"%ci %ft %b %sslv\"\n    default_backend tcpbe\n\
         backend tcpbe\n    mode tcp\n    server s1 127.0.0.1:{}\n",
        be.port, be.port
    );
    both("tls on unix", &cfg, |_, _, _, run| {
        let mut seen = Vec::new();
        let http = run.dir.path("stats.sock.http");
        let mut tls = connect_unix(&http, "www.example.com");
        let r = client::exchange(&mut tls, "GET /facts HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        seen.push(format!(
            "{} {}",
            r.status(),
            String::from_utf8_lossy(&r.body)
        ));
        // Past Bascule's 100 ms before an idle connection parks: it parks with its TLS state
        // on the UNIX socket, and serves again.
        thread::sleep(Duration::from_millis(300));
        let r = client::exchange(&mut tls, "GET /size/1000 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        seen.push(format!("{} {}", r.status(), r.body.len()));
        drop(tls);
        // The HTTP connection's lines before the TCP one opens (workers flush independently).
        let mut logs = run.lines_n(2);
        // TCP mode: the bytes go to the server in clear text.
        let tcp = run.dir.path("stats.sock.tcp");
        let mut tls = connect_unix(&tcp, "www.example.com");
        let r = client::exchange(
            &mut tls,
            "GET /size/10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        seen.push(format!("{} {}", r.status(), r.body.len()));
        drop(tls);
        logs.extend(run.lines_n(1));
        seen.extend(logs.iter().map(|l| mask(l)));
        seen
    });
}
