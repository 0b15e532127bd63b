//! The probes of an active check: a `tcp-check` script, an HTTP check request and the
//! judgement of its reply, each ending in a [`Verdict`] in HAProxy's words. They open their own
//! connection and read no shared state, so they can be tested without a backend.

use std::net::SocketAddr;

use crate::backend::health::Verdict;
use crate::config::model::{HttpCheckRules, HttpExpect, TcpCheckStep, TcpExpect, UnixAddr};
use crate::net::stream::Stream;

/// Where a check connects: an IP address and port, or the UNIX socket of a server that
/// listens on one.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Inet(SocketAddr),
    Unix(&'a UnixAddr),
}

/// The TLS of a check connection (`check-ssl`, or `ssl` checked on the server's port): the
/// configuration and the name (`check-sni`, else `verifyhost`, else the address).
pub struct CheckTls {
    pub config: std::sync::Arc<rustls::ClientConfig>,
    pub name: rustls::pki_types::ServerName<'static>,
}

/// Opens a check's connection within `timeout`, or gives the failed verdict in HAProxy's
/// words: a TCP connect that fails is a layer-4 problem (`L4CON`); a UNIX one fails in the
/// connect call itself, which HAProxy reports as a socket error (`SOCKERR`, "General socket
/// error (Connection refused)"). With `tls`, the handshake follows within the same time; its
/// failure is a layer-6 problem (`L6RSP`, `L6TOUT`).
pub(super) async fn connect(
    target: Target<'_>,
    port: Option<u16>,
    timeout: std::time::Duration,
    tls: Option<&CheckTls>,
) -> Result<Stream, Verdict> {
    let started = tokio::time::Instant::now();
    let attempt = async {
        match target {
            Target::Inet(mut to) => {
                if let Some(p) = port {
                    to.set_port(p);
                }
                tokio::net::TcpStream::connect(to)
                    .await
                    .map(Stream::Tcp)
                    .map_err(|e| Verdict {
                        info: Some(describe(&e)),
                        ..Verdict::new(false, "Layer4 connection problem")
                    })
            }
            Target::Unix(addr) => Stream::connect_unix(addr).await.map_err(|e| Verdict {
                info: Some(format!("General socket error ({})", describe(&e))),
                ..Verdict::new(false, "Socket error")
            }),
        }
    };
    let stream = match tokio::time::timeout(timeout, attempt).await {
        Err(_) => return Err(Verdict::new(false, "Layer4 timeout")),
        Ok(r) => r?,
    };
    let (tls, sock) = match (tls, stream) {
        (Some(tls), Stream::Tcp(sock)) => (tls, sock),
        (_, stream) => return Ok(stream),
    };
    let left = timeout.saturating_sub(started.elapsed());
    match crate::net::tls::TlsSock::connect(
        sock,
        std::sync::Arc::clone(&tls.config),
        tls.name.clone(),
        Some(left),
    )
    .await
    {
        Ok(s) => Ok(Stream::Tls(Box::new(s))),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            Err(Verdict::new(false, "Layer6 timeout"))
        }
        Err(e) => Err(Verdict {
            info: Some(e.to_string()),
            ..Verdict::new(false, "Layer6 invalid response")
        }),
    }
}

/// Runs a `tcp-check` script: steps in order, an implicit connect first when the script does
/// not start with one. An `expect` reads (within `reply_timeout`) until its pattern shows up,
/// the peer closes, or 16 KiB have arrived.
pub(super) async fn run_script(
    target: Target<'_>,
    steps: &[TcpCheckStep],
    regexes: &[Option<regex::bytes::Regex>],
    connect_timeout: std::time::Duration,
    reply_timeout: std::time::Duration,
    tls: Option<&CheckTls>,
) -> Verdict {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let connect = |port: Option<u16>| connect(target, port, connect_timeout, tls);
    let mut stream = None;
    let mut received: Vec<u8> = Vec::new();
    // Whether the script did more than connect: HAProxy then reports a layer-7 success.
    let mut talked = false;
    if !matches!(steps.first(), Some(TcpCheckStep::Connect { .. })) {
        match connect(None).await {
            Ok(s) => stream = Some(s),
            Err(v) => return v,
        }
    }
    for (n, step) in steps.iter().enumerate() {
        let step_no = n + 1;
        match step {
            TcpCheckStep::Connect { port } => match connect(*port).await {
                Ok(s) => {
                    stream = Some(s);
                    received.clear();
                }
                Err(v) => return v,
            },
            TcpCheckStep::Send(bytes) => {
                talked = true;
                let Some(s) = stream.as_mut() else {
                    return Verdict::new(false, "Layer4 connection problem");
                };
                if let Err(e) = s.write_all(bytes).await {
                    return Verdict {
                        info: Some(describe(&e)),
                        ..Verdict::new(false, "Layer4 connection problem")
                    };
                }
            }
            TcpCheckStep::Expect {
                negate,
                pattern,
                min_recv,
            } => {
                talked = true;
                let Some(s) = stream.as_mut() else {
                    return Verdict::new(false, "Layer4 connection problem");
                };
                let matches = |buf: &[u8]| match pattern {
                    TcpExpect::Bytes(b) => buf.windows(b.len().max(1)).any(|w| w == &b[..]),
                    TcpExpect::Regex(_) => regexes[n].as_ref().is_some_and(|r| r.is_match(buf)),
                };
                // Read until the answer is conclusive, as HAProxy's `tcpcheck_eval_expect`:
                // `min-recv` bytes when given, else a match (a mismatch may still change).
                let conclusive = |buf: &[u8]| match min_recv {
                    Some(n) => buf.len() >= *n,
                    None => matches(buf),
                };
                let read_until = async {
                    let mut chunk = [0u8; 2048];
                    while !conclusive(&received) && received.len() < CHECK_REPLY_MAX {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(k) => received.extend_from_slice(&chunk[..k]),
                        }
                    }
                };
                let (kind, shown) = match pattern {
                    TcpExpect::Bytes(b) => ("string", String::from_utf8_lossy(b).into_owned()),
                    TcpExpect::Regex(r) => ("rstring", r.clone()),
                };
                if tokio::time::timeout(reply_timeout, read_until)
                    .await
                    .is_err()
                {
                    return Verdict {
                        info: Some(format!(
                            " at step {step_no} of tcp-check (expect {kind} '{shown}')"
                        )),
                        ..Verdict::new(false, "Layer7 timeout")
                    };
                }
                if matches(&received) == *negate {
                    let info = if received.is_empty() {
                        format!("TCPCHK got an empty response at step {step_no}")
                    } else {
                        let what = match pattern {
                            TcpExpect::Bytes(_) => format!("'{shown}'"),
                            TcpExpect::Regex(_) => "(regex)".to_string(),
                        };
                        if *negate {
                            format!("TCPCHK matched unwanted content {what} at step {step_no}")
                        } else {
                            format!("TCPCHK did not match content {what} at step {step_no}")
                        }
                    };
                    return Verdict {
                        info: Some(info),
                        ..Verdict::new(false, "Layer7 invalid response")
                    };
                }
            }
        }
    }
    // HAProxy says "(tcp-check)" either way; a script that only connected passed layer 4.
    let info = Some("(tcp-check)".to_string());
    if talked {
        Verdict {
            code: Some(0),
            info,
            ..Verdict::new(true, "Layer7 check passed")
        }
    } else {
        Verdict {
            info,
            ..Verdict::new(true, "Layer4 check passed")
        }
    }
}

/// The bytes of an HTTP check request (`option httpchk` plus `http-check send`).
pub fn http_request(h: &crate::config::model::HttpCheck, rules: &HttpCheckRules) -> Vec<u8> {
    let method = rules.method.as_deref().unwrap_or(&h.method);
    let uri = rules.uri.as_deref().unwrap_or(&h.uri);
    let version = rules.version.as_deref().unwrap_or(&h.version);
    let mut out = format!("{method} {uri} {version}\r\n");
    for (n, v) in &rules.headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    if let Some(body) = &rules.body {
        out.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    out.push_str("connection: close\r\n\r\n");
    if let Some(body) = &rules.body {
        out.push_str(body);
    }
    out.into_bytes()
}

/// Most bytes of a check reply that are read (HAProxy reads one buffer).
const CHECK_REPLY_MAX: usize = 16 * 1024;

pub(super) async fn http_exchange(mut stream: Stream, request: &[u8]) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request).await?;
    let mut reply = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    while reply.len() < CHECK_REPLY_MAX {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
    }
    Ok(reply)
}

/// Judges an HTTP check reply: the status line must parse; then the expectation (default: any
/// 2xx or 3xx status) decides.
pub fn judge_http(reply: &[u8], expect: Option<&(bool, HttpExpect)>) -> Verdict {
    let status = reply
        .strip_prefix(b"HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.parse::<u16>().ok());
    let Some(status) = status else {
        return Verdict::new(false, "Layer7 invalid response");
    };
    let body = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(&[][..], |p| &reply[p + 4..]);
    let (negate, matched, what) = match expect {
        None => (false, (200..400).contains(&status), "status"),
        Some((negate, HttpExpect::Status(ranges))) => (
            *negate,
            ranges.iter().any(|(a, b)| (*a..=*b).contains(&status)),
            "status",
        ),
        Some((negate, HttpExpect::String(text))) => (
            *negate,
            body.windows(text.len().max(1))
                .any(|w| w == text.as_bytes()),
            "content",
        ),
        // The patterns compiled at load; a check runs every few seconds, so compiling again
        // here costs nothing that matters.
        Some((negate, HttpExpect::RStatus(re))) => (
            *negate,
            regex::Regex::new(re).is_ok_and(|r| r.is_match(&status.to_string())),
            "status",
        ),
        Some((negate, HttpExpect::RString(re))) => (
            *negate,
            regex::bytes::Regex::new(re).is_ok_and(|r| r.is_match(body)),
            "content",
        ),
    };
    let ok = matched != negate;
    let mut v = Verdict {
        code: Some(status),
        ..Verdict::new(ok, "Layer7 check passed")
    };
    if !ok {
        if what == "status" {
            // HAProxy shows the reason phrase of the status line.
            v.reason = "Layer7 wrong status";
            let line_end = reply
                .iter()
                .position(|&c| c == b'\r' || c == b'\n')
                .unwrap_or(reply.len());
            let phrase = reply.get(13..line_end).unwrap_or_default();
            v.info = Some(String::from_utf8_lossy(phrase).trim().to_string());
        } else {
            v.reason = "Layer7 invalid response";
            v.info = Some("HTTP content check did not match".to_string());
        }
    }
    v
}

/// An OS error as HAProxy's check info shows it ("Connection refused").
pub(super) fn describe(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_replies_are_judged_like_haproxy() {
        let ok = judge_http(b"HTTP/1.1 204 No Content\r\n\r\n", None);
        assert!(ok.ok && ok.code == Some(204));
        let bad = judge_http(b"HTTP/1.0 500 Oops\r\n\r\n", None);
        assert_eq!((bad.ok, bad.reason), (false, "Layer7 wrong status"));
        assert_eq!(bad.info.as_deref(), Some("Oops"));
        let exact = Some((false, HttpExpect::Status(vec![(200, 200)])));
        assert!(!judge_http(b"HTTP/1.1 301 Moved\r\n\r\n", exact.as_ref()).ok);
        let not_503 = Some((true, HttpExpect::Status(vec![(503, 503)])));
        assert!(judge_http(b"HTTP/1.1 500 x\r\n\r\n", not_503.as_ref()).ok);
        let text = Some((false, HttpExpect::String("healthy".into())));
        assert!(judge_http(b"HTTP/1.1 200 OK\r\n\r\nI am healthy", text.as_ref()).ok);
        assert!(!judge_http(b"HTTP/1.1 200 OK\r\n\r\nsick", text.as_ref()).ok);
        assert_eq!(
            judge_http(b"SSH-2.0\r\n", None).reason,
            "Layer7 invalid response"
        );
    }

    #[test]
    fn http_check_request_bytes() {
        let h = crate::config::model::HttpCheck {
            method: "GET".into(),
            uri: "/health".into(),
            version: "HTTP/1.1".into(),
        };
        let rules = HttpCheckRules {
            headers: vec![("Host".into(), "www".into())],
            ..Default::default()
        };
        assert_eq!(
            http_request(&h, &rules),
            b"GET /health HTTP/1.1\r\nHost: www\r\nconnection: close\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn http_failures_show_the_reason_phrase() {
        let v = judge_http(b"HTTP/1.1 503 Service Unavailable\r\n\r\n", None);
        assert_eq!(v.info.as_deref(), Some("Service Unavailable"));
        let text = Some((false, HttpExpect::String("nothere".into())));
        let v = judge_http(b"HTTP/1.1 200 OK\r\n\r\nbody", text.as_ref());
        assert_eq!(v.reason, "Layer7 invalid response");
        assert_eq!(v.status_word(), "L7RSP");
    }

    #[test]
    fn os_errors_read_like_haproxy() {
        let e = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(describe(&e), "Connection refused");
    }
}
