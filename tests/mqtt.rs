//! The MQTT converters in a TCP-mode frontend, side by side with Debian's haproxy: real
//! MQTT 3.1.1 and 5.0 CONNECT packets (whole, split in two writes, cut short, invalid) through
//! `tcp-request content reject unless { req.payload(0,0),mqtt_is_valid }`, the fields
//! `mqtt_field_value` gives stored with `set-var` and logged, and what the client gets back
//! from an echo server. A field absent from a whole packet decides its ACL at once, without
//! waiting for the inspect delay. Rejected sessions are logged (`PR`) by both.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use support::side::{both, Run};
use support::Backend;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// MQTT 3.1.1, client "test_sub", user "test", password "passwd", will "willtopic" /
/// "willpayload".
const V311_WILL: &str = "103a00044d51545404ee003c0008746573745f737562000977696c6c746f706963\
    000b77696c6c7061796c6f61640004746573740006706173737764";
/// MQTT 3.1.1, empty client id, user "test", password "passwd", no will.
const V311_NO_WILL: &str = "101a00044d51545404c2003c00000004746573740006706173737764";
/// MQTT 3.1.1, client "c1", user "banned".
const V311_BANNED: &str = "101600044d5154540482003c00026331000662616e6e6564";
/// MQTT 5.0 with connect properties (maximum packet size 20, request problem information 1,
/// user properties) and will properties (content type "text/plain", response topic
/// "willrsptopic", user properties).
const V5_COMPLEX: &str = "107e00044d51545405ee003c1827000000141701260001610001622600016300\
    01642100140008746573745f7375622a03000a746578742f706c61696e08000c77696c6c727370746f7069\
    632600016500016626000167000168000977696c6c746f706963000b77696c6c7061796c6f616400047465\
    73740006706173737764";
/// MQTT 3.1 ("MQIsdp").
const V31: &str = "102400064d514973647003c200000008746573745f7375620004746573740006706173737764";
/// PINGREQ: not a first packet haproxy validates.
const PINGREQ: &str = "c000";
/// CONNECT with flags in its fixed header.
const BAD_FLAGS: &str = "111400044d5154540402003c0008746573745f737562";

/// How the client sends a packet.
#[derive(Clone, Copy)]
enum Send {
    Whole,
    /// The first bytes, a pause, then the rest: the rules wait for the whole packet.
    Split,
    /// The first bytes, then the client's end of stream.
    CutShort,
}

#[test]
fn mqtt_connect_fields_side_by_side() {
    let echo = Backend::echo();
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n\
         \x20   log 127.0.0.1:@LOG@ format raw local0\n\
         \x20   log-format \"%ts %B %U name=%[var(txn.name)] v=%[var(txn.ver)] fl=%[var(txn.flags)] ka=%[var(txn.ka)] id=%[var(txn.id)] u=%[var(txn.user)] p=%[var(txn.pass)] wt=%[var(txn.wt)] wp=%[var(txn.wp)] mps=%[var(txn.mps)] rpi=%[var(txn.rpi)] ct=%[var(txn.ct)] rt=%[var(txn.rt)] sei=%[var(txn.sei)]\"\n\
         \x20   tcp-request inspect-delay 5s\n\
         \x20   tcp-request content reject unless {{ req.payload(0,0),mqtt_is_valid }}\n\
         \x20   tcp-request content reject if {{ req.payload(0,0),mqtt_field_value(connect,username) -m str banned }}\n\
         \x20   tcp-request content reject if {{ req.payload(0,0),mqtt_field_value(connect,will_topic) -m str banned }}\n\
         \x20   tcp-request content set-var(txn.name) req.payload(0,0),mqtt_field_value(connect,protocol_name)\n\
         \x20   tcp-request content set-var(txn.ver) req.payload(0,0),mqtt_field_value(1,protocol_version)\n\
         \x20   tcp-request content set-var(txn.flags) req.payload(0,0),mqtt_field_value(CONNECT,flags)\n\
         \x20   tcp-request content set-var(txn.ka) req.payload(0,0),mqtt_field_value(connect,keepalive)\n\
         \x20   tcp-request content set-var(txn.id) req.payload(0,0),mqtt_field_value(connect,client_identifier)\n\
         \x20   tcp-request content set-var(txn.user) req.payload(0,0),mqtt_field_value(connect,username)\n\
         \x20   tcp-request content set-var(txn.pass) req.payload(0,0),mqtt_field_value(connect,password)\n\
         \x20   tcp-request content set-var(txn.wt) req.payload(0,0),mqtt_field_value(connect,will_topic)\n\
         \x20   tcp-request content set-var(txn.wp) req.payload(0,0),mqtt_field_value(connect,will_payload)\n\
         \x20   tcp-request content set-var(txn.mps) req.payload(0,0),mqtt_field_value(connect,39)\n\
         \x20   tcp-request content set-var(txn.rpi) req.payload(0,0),mqtt_field_value(connect,23)\n\
         \x20   tcp-request content set-var(txn.ct) req.payload(0,0),mqtt_field_value(connect,3)\n\
         \x20   tcp-request content set-var(txn.rt) req.payload(0,0),mqtt_field_value(connect,8)\n\
         \x20   tcp-request content set-var(txn.sei) req.payload(0,0),mqtt_field_value(connect,17)\n\
         \x20   default_backend be\n\
         backend be\n    server s1 127.0.0.1:{}\n",
        echo.port
    );
    let cases: &[(&str, Send)] = &[
        (V311_WILL, Send::Whole),
        (V311_NO_WILL, Send::Whole),
        (V311_BANNED, Send::Whole),
        (V5_COMPLEX, Send::Whole),
        (V5_COMPLEX, Send::Split),
        (V31, Send::Whole),
        (PINGREQ, Send::Whole),
        (BAD_FLAGS, Send::Whole),
        (V311_WILL, Send::CutShort),
    ];
    both("mqtt converters", &cfg, |bin, _, p2, run: &mut Run| {
        let mut seen = Vec::new();
        for (i, &(packet, how)) in cases.iter().enumerate() {
            let pkt = hex(packet);
            let mut c = TcpStream::connect(("127.0.0.1", p2)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
            let start = Instant::now();
            match how {
                Send::Whole => c.write_all(&pkt).unwrap(),
                Send::Split => {
                    c.write_all(&pkt[..10]).unwrap();
                    thread::sleep(Duration::from_millis(300));
                    c.write_all(&pkt[10..]).unwrap();
                }
                Send::CutShort => {
                    c.write_all(&pkt[..10]).unwrap();
                    c.shutdown(Shutdown::Write).unwrap();
                }
            }
            // The echo of an accepted packet, or the end of a rejected connection.
            let mut back = vec![0u8; pkt.len()];
            let mut got = 0;
            while got < back.len() {
                match c.read(&mut back[got..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            let elapsed = start.elapsed();
            // Whole packets are decided at once, including the rules on absent fields.
            if matches!(how, Send::Whole) {
                assert!(
                    elapsed < Duration::from_secs(2),
                    "{bin}: case {i} waited {elapsed:?}"
                );
            }
            let _ = c.shutdown(Shutdown::Write);
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            seen.push(format!("case {i}: {got} bytes back"));
            // Every session is logged, a rejected one with `PR`: its line is waited for before
            // the next connection (workers flush their lines independently).
            seen.extend(run.lines_n(1));
        }
        seen
    });
}
