//! `log-forward` sections: syslog messages received on UDP (`dgram-bind`, one message per
//! datagram) and TCP (`bind`: octet-counted `LEN SP MSG` frames, or one message per line, as
//! RFC 6587 allows both) are read ([`super::syslog::parse`]) and sent on to the section's
//! `log` targets, each in its own format, with the received facility, level, host, tag, pid,
//! message id and structured data.
//!
//! The sockets are bound at start with the other listeners (an error stops the start); the
//! receivers run on the main thread and send with the same non-blocking outputs as every log
//! line. A `bind ... ssl` listener's clients speak TLS: the handshake, which `log` cannot run
//! itself (see [`super::conn`]), is the process's, within `timeout client`.

use std::io;
use std::net::{TcpListener, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::conn::{Conn, Handshakes};
use super::sender::{self, Outputs};
use super::syslog;
use super::Target;
use crate::config::model;

/// Longest message read (HAProxy's default `tune.bufsize` bounds it likewise).
const MAX_MSG: usize = 64 * 1024;

/// A `log-forward` section with its targets resolved.
#[derive(Debug)]
pub struct Forwarder {
    pub config: model::LogForward,
    targets: Vec<Target>,
}

impl Forwarder {
    pub fn new(config: model::LogForward, outputs: &mut Outputs) -> Forwarder {
        let targets = super::build_targets(&config.logs, outputs);
        Forwarder { config, targets }
    }

    /// Sends one received message on to every target that takes its level.
    pub fn handle(&self, outputs: &Outputs, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        let r = syslog::parse(line);
        let now = super::now_us();
        for t in &self.targets {
            if r.level > t.max_level {
                continue;
            }
            let level = r.level.max(t.min_level);
            sender::queue(outputs, t.output, |out| {
                syslog::frame_received(out, t.framing, level, now, &r, t.len)
            });
        }
    }
}

/// A section's sockets, bound.
#[derive(Debug)]
pub struct Bound {
    udp: Vec<UdpSocket>,
    /// With the TLS configuration of a `bind ... ssl`.
    tcp: Vec<(TcpListener, Option<Arc<crate::tls::server::Built>>)>,
}

/// Binds a section's sockets (non-blocking).
pub fn bind(config: &model::LogForward) -> io::Result<Bound> {
    let mut b = Bound {
        udp: Vec::new(),
        tcp: Vec::new(),
    };
    for a in &config.dgram_binds {
        let s = UdpSocket::bind(a).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("log-forward '{}': cannot bind UDP {a}: {e}", config.name),
            )
        })?;
        s.set_nonblocking(true)?;
        b.udp.push(s);
    }
    for bind in &config.binds {
        let a = bind.addr;
        let s = TcpListener::bind(a).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("log-forward '{}': cannot bind {a}: {e}", config.name),
            )
        })?;
        s.set_nonblocking(true)?;
        b.tcp.push((s, bind.tls.clone()));
    }
    Ok(b)
}

/// Runs the receivers of `fwd` on this thread (`tls` runs the handshakes of `bind ... ssl`).
pub fn spawn(
    fwd: Arc<Forwarder>,
    bound: Bound,
    outputs: Arc<Outputs>,
    tls: &Rc<dyn Handshakes>,
) -> io::Result<()> {
    for s in bound.udp {
        let s = tokio::net::UdpSocket::from_std(s)?;
        let (fwd, outputs) = (Arc::clone(&fwd), Arc::clone(&outputs));
        tokio::task::spawn_local(async move {
            let mut buf = vec![0u8; MAX_MSG];
            loop {
                match s.recv(&mut buf).await {
                    Ok(n) => fwd.handle(&outputs, &buf[..n]),
                    Err(_) => tokio::task::yield_now().await,
                }
            }
        });
    }
    let clients = Rc::new(std::cell::Cell::new(0u32));
    for (l, bind_tls) in bound.tcp {
        let l = tokio::net::TcpListener::from_std(l)?;
        let (fwd, outputs, clients) = (Arc::clone(&fwd), Arc::clone(&outputs), Rc::clone(&clients));
        let tls = Rc::clone(tls);
        tokio::task::spawn_local(async move {
            loop {
                let Ok((s, _)) = l.accept().await else {
                    tokio::task::yield_now().await;
                    continue;
                };
                if fwd.config.maxconn.is_some_and(|m| clients.get() >= m) {
                    drop(s);
                    continue;
                }
                clients.set(clients.get() + 1);
                let (fwd, outputs, clients) =
                    (Arc::clone(&fwd), Arc::clone(&outputs), Rc::clone(&clients));
                let (bind_tls, tls) = (bind_tls.clone(), Rc::clone(&tls));
                tokio::task::spawn_local(async move {
                    let conn: Option<Box<dyn Conn>> = match bind_tls {
                        None => Some(Box::new(s)),
                        Some(t) => tls.accept(s, t, fwd.config.timeout_client).await.ok(),
                    };
                    if let Some(conn) = conn {
                        read_stream(&fwd, &outputs, conn).await;
                    }
                    clients.set(clients.get() - 1);
                });
            }
        });
    }
    Ok(())
}

/// Reads one TCP client's messages until it closes, fails, sends a bad frame or stays silent
/// longer than `timeout client`.
async fn read_stream(fwd: &Forwarder, outputs: &Outputs, s: Box<dyn Conn>) {
    let idle = fwd.config.timeout_client;
    let mut r = BufReader::new(s);
    let mut msg = Vec::new();
    loop {
        let step = async {
            let first = r.fill_buf().await.ok()?.first().copied()?;
            msg.clear();
            if first.is_ascii_digit() {
                // Octet counting: `LEN SP MSG`.
                let mut len = Vec::new();
                r.read_until(b' ', &mut len).await.ok()?;
                let n: usize = std::str::from_utf8(len.strip_suffix(b" ")?)
                    .ok()?
                    .parse()
                    .ok()?;
                if n > MAX_MSG {
                    return None;
                }
                msg.resize(n, 0);
                r.read_exact(&mut msg).await.ok()?;
            } else {
                // Non-transparent framing: one message per line.
                let n = r.read_until(b'\n', &mut msg).await.ok()?;
                if n == 0 || msg.len() > MAX_MSG {
                    return None;
                }
            }
            Some(())
        };
        let done = match idle {
            Some(t) => tokio::time::timeout(t, step).await.ok().flatten(),
            None => step.await,
        };
        if done.is_none() {
            return;
        }
        fwd.handle(outputs, &msg);
    }
}
