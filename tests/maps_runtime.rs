//! Map files changed on the stats socket (`add map`, `set map`, `del map`, `clear map`,
//! `show map`, `get map`), side by side with Debian's haproxy: after each command, the
//! requests see the new entries through every converter that reads the file (here one that
//! maps to a string and one that maps to an integer), and the answers are haproxy's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::side::both;
use support::TempDir;

/// What the frontend answers for `Host: host`: the string and the integer the map gives.
fn lookup(port: u16, host: &str) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut b = Vec::new();
    let _ = c.read_to_end(&mut b);
    let text = String::from_utf8_lossy(&b).into_owned();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    format!("{host} -> {body}")
}

/// An answer with the entry identifiers (addresses in haproxy) masked.
fn ids_masked(s: &str) -> String {
    s.split('\n')
        .map(|line| {
            line.split(' ')
                .map(|w| if w.starts_with("0x") { "0xID" } else { w })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn map_commands_change_what_requests_see_as_in_haproxy() {
    let dir = TempDir::new("maps");
    let map = dir.path("hosts.map");
    std::fs::write(&map, "# hosts\na.example 1\nb.example 2\n").unwrap();
    let map = map.to_str().unwrap().to_string();
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n\
         defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[req.hdr(host),map_str({map},none)] %[req.hdr(host),map_str_int({map},0)]\"\n"
    );
    both("maps at runtime", &cfg, |_, _, p2, run| {
        let mut seen = vec![lookup(p2, "a.example"), lookup(p2, "c.example")];
        let mut cli = |cmd: &str| {
            let answer = run.cli(cmd);
            seen.push(format!("{cmd} => {}", ids_masked(&answer)));
            answer
        };
        cli(&format!("add map {map} c.example 3"));
        cli(&format!("set map {map} a.example 7"));
        cli(&format!("del map {map} b.example"));
        cli(&format!("del map {map} b.example"));
        cli(&format!("show map {map}"));
        cli(&format!("get map {map} c.example"));
        cli(&format!("get map {map} z.example"));
        cli("show map /nonexistent.map");
        cli(&format!("set map {map} nothere 1"));
        // A value the integer converter cannot read: refused (haproxy's wording differs).
        let refused = run.cli(&format!("add map {map} d.example notanumber"));
        let mut seen2 = vec![format!("refused: {}", !refused.trim().is_empty())];
        for h in ["a.example", "b.example", "c.example", "d.example"] {
            seen2.push(lookup(p2, h));
        }
        seen.extend(seen2);
        seen.push(format!("clear => {}", run.cli(&format!("clear map {map}"))));
        seen.push(lookup(p2, "a.example"));
        seen.push(format!("show => {:?}", run.cli(&format!("show map {map}"))));
        seen
    });
}

/// What the frontend answers for `User-Agent: agent` and a request from 127.0.0.1: 403 when
/// the agent is in the pattern file (`-i`), or the source in the network file.
fn status(port: u16, agent: &str) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(
        format!("GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: {agent}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut b = Vec::new();
    let _ = c.read_to_end(&mut b);
    let text = String::from_utf8_lossy(&b).into_owned();
    format!("{agent} -> {}", text.get(9..12).unwrap_or("none"))
}

#[test]
fn acl_commands_change_what_requests_see_as_in_haproxy() {
    let dir = TempDir::new("acls");
    let agents = dir.path("agents.acl");
    std::fs::write(&agents, "# bots\ncurl/8.0\nEvil Bot\n").unwrap();
    let nets = dir.path("nets.acl");
    std::fs::write(&nets, "10.0.0.0/8\n").unwrap();
    let (agents, nets) = (agents.to_str().unwrap(), nets.to_str().unwrap());
    let cfg = format!(
        "global\n    stats socket @SOCK@ level admin\n\
         defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend fe\n    bind 127.0.0.1:@P2@\n\
         \x20   http-request deny if {{ req.hdr(user-agent) -i -m str -f {agents} }}\n\
         \x20   http-request deny deny_status 429 if {{ src -f {nets} }}\n\
         \x20   http-request return status 200\n"
    );
    both("acls at runtime", &cfg, |_, _, p2, run| {
        let mut seen = vec![status(p2, "EVIL BOT"), status(p2, "Mon User Agent;")];
        let mut cli = |cmd: &str| {
            let answer = run.cli(cmd);
            seen.push(format!("{cmd} => {}", ids_masked(&answer)));
        };
        // An escaped space and semicolon stay in the pattern (HAProxy's CLI escapes).
        cli(&format!(r"add acl {agents} Mon\ User\ Agent\;"));
        cli(&format!("show acl {agents}"));
        cli(&format!(r"get acl {agents} mon\ user\ agent\;"));
        cli(&format!("get acl {agents} nobody"));
        cli(&format!("del acl {agents} curl/8.0"));
        cli(&format!("del acl {agents} curl/8.0"));
        cli(&format!("add acl {nets} 127.0.0.0/8"));
        cli(&format!("show acl {nets}"));
        cli("show acl /nonexistent.acl");
        cli(&format!("show map {agents}"));
        seen.push(status(p2, "Mon User Agent;"));
        seen.push(status(p2, "curl/8.0"));
        run.cli(&format!("clear acl {nets}"));
        seen.push(status(p2, "curl/8.0"));
        seen.push(status(p2, "Evil Bot"));
        seen
    });
}
