//! `so_id` and `so_name` side by side with haproxy 2.6: listeners are numbered from 1 in bind
//! order within their frontend (each address of a `bind` line is one listener), and `so_name`
//! is the `name` of the bind line, absent without one.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{eventually, free_port, Proxy, TempDir, HAPROXY};

fn config(ports: &[u16; 3]) -> String {
    format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 2s\n    timeout server 2s\n\
         frontend fe\n    bind 127.0.0.1:{},127.0.0.1:{} name first\n    bind 127.0.0.1:{}\n\
         \x20   http-request return status 200 hdr x-so \"id=%[so_id] name=%[so_name]\"\n",
        ports[0], ports[1], ports[2]
    )
}

fn ask(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .find(|l| l.to_ascii_lowercase().starts_with("x-so:"))
        .unwrap_or("<none>")
        .to_string()
}

#[test]
fn listener_id_and_name_match_haproxy() {
    if !support::have_haproxy("listener_id_and_name_match_haproxy") {
        return;
    }
    let h = [free_port(), free_port(), free_port()];
    let b = [free_port(), free_port(), free_port()];
    let dir = TempDir::new("so");
    std::fs::write(dir.path("h.cfg"), config(&h)).unwrap();
    let mut hp = Command::new(HAPROXY)
        .arg("-db")
        .arg("-f")
        .arg(dir.path("h.cfg"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _bp = Proxy::start(&config(&b), b[2], &[]);
    assert!(eventually(Duration::from_secs(5), || h
        .iter()
        .all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok())));
    let theirs: Vec<String> = h.iter().map(|p| ask(*p)).collect();
    let ours: Vec<String> = b.iter().map(|p| ask(*p)).collect();
    let _ = hp.kill();
    let _ = hp.wait();
    assert!(theirs[0].contains("id=1 name=first"), "{theirs:?}");
    assert_eq!(ours, theirs);
}
