//! A tiny HTTP/1.0 server for the demo: answers every request with "hello from <name>".
//!
//! Usage: `demo_backend <listen-addr> <name>`. It exists so that `examples/demo.sh` can show
//! traffic flowing through Bascule on a fresh machine without any other software.

use std::io::{Read, Write};
use std::net::TcpListener;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(name)) = (args.next(), args.next()) else {
        eprintln!("usage: demo_backend <listen-addr> <name>");
        std::process::exit(2);
    };
    let listener = match TcpListener::bind(&addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("demo_backend: cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        // Read the request head (up to the blank line, or whatever arrives in one go).
        let mut buf = [0u8; 4096];
        let mut seen = Vec::new();
        while let Ok(n) = conn.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if seen.windows(4).any(|w| w == b"\r\n\r\n") || seen.len() > 65536 {
                break;
            }
        }
        let body = format!("hello from {name}\n");
        let reply = format!(
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = conn.write_all(reply.as_bytes());
    }
}
