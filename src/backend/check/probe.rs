//! The probes of an active check: a `tcp-check` script, an HTTP check request and the
//! judgement of its reply, each ending in a [`Verdict`] in HAProxy's words. They open their own
//! connection and read no shared state, so they can be tested without a backend.

use std::net::SocketAddr;

use crate::backend::health::Verdict;
use crate::config::model::{
    CheckStatus, CheckText, CustomExpect, ExpectReport, HttpCheckRules, HttpExpect, TcpCheckStep,
    TcpExpect, UnixAddr,
};
use crate::net::stream::Stream;

/// Where a check connects: an IP address and port, or the UNIX socket of a server that
/// listens on one.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Inet(SocketAddr),
    Unix(&'a UnixAddr),
    /// `check-via-socks4`: the destination, through the SOCKS4 proxy at `proxy`.
    Socks4 {
        proxy: SocketAddr,
        to: SocketAddr,
    },
}

/// The TLS of a check connection (`check-ssl`, or `ssl` checked on the server's port): the
/// configuration and the name (`check-sni`, else `verifyhost`, else the address).
pub struct CheckTls {
    pub config: std::sync::Arc<rustls::ClientConfig>,
    pub name: rustls::pki_types::ServerName<'static>,
}

/// Opens a check's connection within `timeout`, or gives the failed verdict in HAProxy's
/// words: a TCP connect that fails is a layer-4 problem (`L4CON`), "General socket error
/// (Network is unreachable)" when connect(2) itself failed, the OS's words alone when the
/// connection failed afterwards; a UNIX one fails in the connect call itself, which HAProxy
/// reports as a socket error (`SOCKERR`, "General socket error (Connection refused)"). With `tls`, the handshake follows within the same time; its
/// failure is a layer-6 problem (`L6RSP`, `L6TOUT`).
pub(super) async fn connect(
    target: Target<'_>,
    port: Option<u16>,
    timeout: std::time::Duration,
    tls: Option<&CheckTls>,
    proxy: Option<SendProxy>,
) -> Result<Stream, Verdict> {
    let started = tokio::time::Instant::now();
    let attempt = async {
        match target {
            Target::Inet(mut to) => {
                if let Some(p) = port {
                    to.set_port(p);
                }
                let mut s = tcp_connect(to).await?;
                if let Some(pp) = proxy {
                    send_proxy_header(&mut s, pp).await?;
                }
                Ok(Stream::Tcp(s))
            }
            Target::Socks4 { proxy, mut to } => {
                if let Some(p) = port {
                    to.set_port(p);
                }
                let mut s = tcp_connect(proxy).await?;
                crate::backend::connect::socks4_handshake(&mut s, to)
                    .await
                    .map_err(|e| Verdict {
                        info: Some(describe(&e)),
                        ..Verdict::new(false, "Layer4 connection problem")
                    })?;
                Ok(Stream::Tcp(s))
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

/// The PROXY protocol header a check sends first (`check-send-proxy`, or the server's own
/// `send-proxy[-v2]` when the check goes to the server's address and port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendProxy {
    V1,
    V2,
}

/// Sends the PROXY header of a check's connection: as HAProxy 2.6 makes it for a connection
/// without a stream, it announces the check connection's own addresses (its local address as
/// the source, the server's as the destination), with no TLV.
async fn send_proxy_header(s: &mut tokio::net::TcpStream, pp: SendProxy) -> Result<(), Verdict> {
    use tokio::io::AsyncWriteExt;
    let failed = |e: std::io::Error| Verdict {
        info: Some(describe(&e)),
        ..Verdict::new(false, "Layer4 connection problem")
    };
    let (src, dst) = (
        s.local_addr().map_err(failed)?,
        s.peer_addr().map_err(failed)?,
    );
    let mut out = Vec::with_capacity(108);
    match pp {
        SendProxy::V1 => {
            let mut line = [0u8; 108];
            let n = crate::backend::connect::proxy_v1_header(&mut line, src, dst);
            out.extend_from_slice(&line[..n]);
        }
        SendProxy::V2 => {
            let mut hdr = [0u8; 52];
            let n = crate::proto::proxy::write_v2(&mut hdr, Some((src, dst)));
            out.extend_from_slice(&hdr[..n]);
        }
    }
    s.write_all(&out).await.map_err(failed)
}

/// What one evaluation of an `expect` step on the bytes received so far decides.
enum Eval {
    /// More bytes are needed.
    Wait,
    /// The step passed; a custom expect may give the info of the check's result.
    Next(Option<String>),
    /// The check failed.
    Stop(Verdict),
}

/// A non-blocking TCP connect that tells, as HAProxy's checks do, a connect(2) that fails at
/// once (no route, refused by a local rule: "General socket error (...)") from a connection
/// that fails once under way (the OS's words).
async fn tcp_connect(to: SocketAddr) -> Result<tokio::net::TcpStream, Verdict> {
    use socket2::{Domain, Protocol, Socket, Type};
    let failed = |info: String| Verdict {
        info: Some(info),
        ..Verdict::new(false, "Layer4 connection problem")
    };
    let general = |e: std::io::Error| failed(format!("General socket error ({})", describe(&e)));
    let sock =
        Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP)).map_err(general)?;
    sock.set_nonblocking(true).map_err(general)?;
    match sock.connect(&to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(general(e)),
    }
    let stream =
        tokio::net::TcpStream::from_std(std::net::TcpStream::from(sock)).map_err(general)?;
    stream.writable().await.map_err(|e| failed(describe(&e)))?;
    match stream.take_error() {
        Ok(None) => Ok(stream),
        Ok(Some(e)) | Err(e) => Err(failed(describe(&e))),
    }
}

/// Runs a `tcp-check` script: steps in order, an implicit connect first when the script does
/// not start with one, as HAProxy's `tcpcheck_main` runs a rule set. A `send` empties the
/// bytes received; an `expect` reads (within `reply_timeout`) until it can decide, the peer
/// closes, or 16 KiB have arrived. `proto`: the script is a protocol check's rule set, whose
/// results carry no generic "TCPCHK ..." or "(tcp-check)" text.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_script(
    target: Target<'_>,
    steps: &[TcpCheckStep],
    regexes: &[Option<regex::bytes::Regex>],
    connect_timeout: std::time::Duration,
    reply_timeout: std::time::Duration,
    tls: Option<&CheckTls>,
    proto: bool,
    proxy: Option<SendProxy>,
) -> Verdict {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The script's own `connect` steps send no PROXY header; the implicit first connection
    // does, as HAProxy's default connect.
    let connect = |port: Option<u16>, pp| connect(target, port, connect_timeout, tls, pp);
    let mut stream = None;
    let mut received: Vec<u8> = Vec::new();
    // Whether the script did more than connect: HAProxy then reports a layer-7 success.
    let mut talked = false;
    // The info a custom expect gave for the check's success.
    let mut custom_info = None;
    // HAProxy says where a plain `tcp-check` script failed (not a protocol check's).
    let at = |mut v: Verdict, step: &str| {
        if !proto {
            let info = v.info.take().unwrap_or_default();
            v.info = Some(format!("{info}{step}"));
        }
        v
    };
    if !matches!(steps.first(), Some(TcpCheckStep::Connect { .. })) {
        match connect(None, proxy).await {
            Ok(s) => stream = Some(s),
            Err(v) => return at(v, " at initial connection step of tcp-check"),
        }
    }
    // The server closed (or the buffer filled): no more bytes will come.
    let mut last_read = false;
    for (n, step) in steps.iter().enumerate() {
        let step_no = n + 1;
        let is_last = n + 1 == steps.len();
        match step {
            TcpCheckStep::Connect { port } => match connect(*port, None).await {
                Ok(s) => {
                    stream = Some(s);
                    received.clear();
                    last_read = false;
                }
                Err(v) => {
                    let what = port.map_or(String::new(), |p| format!(" port {p}"));
                    return at(
                        v,
                        &format!(" at step {step_no} of tcp-check (connect{what})"),
                    );
                }
            },
            TcpCheckStep::Send(bytes) => {
                talked = true;
                // HAProxy empties its input buffer before each send.
                received.clear();
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
                pattern, report, ..
            } => {
                talked = true;
                let Some(s) = stream.as_mut() else {
                    return Verdict::new(false, "Layer4 connection problem");
                };
                let deadline = tokio::time::Instant::now() + reply_timeout;
                let mut chunk = [0u8; 2048];
                let info = loop {
                    let full = received.len() >= CHECK_REPLY_MAX;
                    let eval = eval_expect(
                        step,
                        regexes[n].as_ref(),
                        &received,
                        last_read || full,
                        is_last,
                        step_no,
                        proto,
                    );
                    match eval {
                        Eval::Next(info) => break info,
                        Eval::Stop(v) => return v,
                        Eval::Wait => {}
                    }
                    match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
                        Err(_) => {
                            let status = report.tout_status.unwrap_or(CheckStatus::L7Tout);
                            let what = describe_pattern(pattern);
                            let v = Verdict::new(false, status.reason());
                            return at(v, &format!(" at step {step_no} of tcp-check ({what})"));
                        }
                        Ok(Ok(0) | Err(_)) => {
                            last_read = true;
                            if received.is_empty() {
                                return Verdict {
                                    info: Some(format!(
                                        "TCPCHK got an empty response at step {step_no}"
                                    )),
                                    ..Verdict::new(false, "Layer7 invalid response")
                                };
                            }
                        }
                        Ok(Ok(k)) => received.extend_from_slice(&chunk[..k]),
                    }
                };
                if info.is_some() {
                    custom_info = info;
                }
            }
        }
    }
    match steps.last() {
        // As HAProxy: the last expect's `ok-status` and `on-success` (or what a custom expect
        // said), its `status-code`.
        Some(TcpCheckStep::Expect { report, .. }) => {
            let status = report.ok_status.unwrap_or(CheckStatus::L7Ok);
            let info = custom_info
                .or_else(|| report.on_success.as_ref().map(|t| render(t, &received)))
                .or_else(|| (!proto).then(|| "(tcp-check)".to_string()));
            Verdict {
                code: Some(status_code(report, &received)),
                info,
                ..Verdict::new(true, status.reason())
            }
        }
        _ if talked => Verdict {
            code: Some(0),
            info: Some("(tcp-check)".to_string()),
            ..Verdict::new(true, "Layer7 check passed")
        },
        // HAProxy says "(tcp-check)" for a script that only connected: it passed layer 4.
        _ => Verdict {
            info: Some("(tcp-check)".to_string()),
            ..Verdict::new(true, "Layer4 check passed")
        },
    }
}

/// How a timed-out expect names its pattern in the info, in HAProxy's words.
fn describe_pattern(pattern: &TcpExpect) -> String {
    match pattern {
        TcpExpect::Bytes(b) => format!("expect string '{}'", String::from_utf8_lossy(b)),
        TcpExpect::Regex(_) => "expect regex".into(),
        TcpExpect::HexRegex(_) => "expect binary regex".into(),
        TcpExpect::Custom(_) => "expect custom function".into(),
    }
}

/// Evaluates `expect` step `step` on the bytes `received` so far, as HAProxy's
/// `tcpcheck_eval_expect`: without `last_read`, wait while fewer bytes than the pattern (or
/// than `min-recv`) came, and on a mismatch when there is no `min-recv` (more bytes may still
/// match); then a match (or, negated, its absence) passes and anything else fails with the
/// step's `error-status` and `on-error` text.
fn eval_expect(
    step: &TcpCheckStep,
    regex: Option<&regex::bytes::Regex>,
    received: &[u8],
    last_read: bool,
    is_last: bool,
    step_no: usize,
    proto: bool,
) -> Eval {
    let TcpCheckStep::Expect {
        negate,
        pattern,
        min_recv,
        report,
    } = step
    else {
        return Eval::Next(None);
    };
    if let TcpExpect::Custom(c) = pattern {
        return custom(*c, received, last_read, is_last, report);
    }
    if !last_read {
        let short = match pattern {
            TcpExpect::Bytes(b) => received.len() < b.len(),
            _ => false,
        };
        if short || min_recv.is_some_and(|m| received.len() < m) {
            return Eval::Wait;
        }
    }
    let matched = match pattern {
        TcpExpect::Bytes(b) => received.windows(b.len().max(1)).any(|w| w == &b[..]),
        TcpExpect::Regex(_) => regex.is_some_and(|r| r.is_match(received)),
        TcpExpect::HexRegex(_) => {
            let mut hex = Vec::with_capacity(received.len() * 2);
            for b in received {
                hex.extend_from_slice(format!("{b:02X}").as_bytes());
            }
            regex.is_some_and(|r| r.is_match(&hex))
        }
        TcpExpect::Custom(_) => false,
    };
    if !matched && !last_read && min_recv.is_none() {
        return Eval::Wait;
    }
    if matched != *negate {
        return Eval::Next(None);
    }
    let status = report.error_status.unwrap_or(CheckStatus::L7Rsp);
    let info = match &report.on_error {
        Some(t) => Some(render(t, received)),
        None if proto => None,
        None => {
            let what = match pattern {
                TcpExpect::Bytes(b) => {
                    format!("'{}'", String::from_utf8_lossy(b))
                }
                TcpExpect::Regex(_) => "(regex)".to_string(),
                TcpExpect::HexRegex(_) => "(binary regex)".to_string(),
                TcpExpect::Custom(_) => "(custom function)".to_string(),
            };
            Some(if *negate {
                format!("TCPCHK matched unwanted content {what} at step {step_no}")
            } else {
                format!("TCPCHK did not match content {what} at step {step_no}")
            })
        }
    };
    Eval::Stop(Verdict {
        code: Some(status_code(report, received)),
        info,
        ..Verdict::new(false, status.reason())
    })
}

/// A check text: fixed, or read from the reply. HAProxy keeps the info as a C string, so it
/// ends at the first NUL byte.
fn render(text: &CheckText, received: &[u8]) -> String {
    let bytes = match text {
        CheckText::Fixed(t) => return t.clone(),
        CheckText::Reply {
            from,
            ltrim,
            cut_crlf,
        } => {
            let mut b = received.get(*from..).unwrap_or_default();
            if *ltrim {
                let skip = b.iter().take_while(|&&c| c == b' ').count();
                b = &b[skip..];
            }
            if *cut_crlf {
                let end = b.iter().position(|&c| c == b'\r' || c == b'\n');
                b = &b[..end.unwrap_or(b.len())];
            }
            b
        }
    };
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The check's code: `status-code res.payload(OFFSET,LENGTH)` read as an integer, else 0.
fn status_code(report: &ExpectReport, received: &[u8]) -> u16 {
    let Some((off, len)) = report.status_code else {
        return 0;
    };
    let end = (off + len).min(received.len());
    received
        .get(off..end)
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// The protocol checks' own readers of a reply (HAProxy's custom expect functions).
fn custom(
    c: CustomExpect,
    received: &[u8],
    last_read: bool,
    is_last: bool,
    report: &ExpectReport,
) -> Eval {
    match c {
        CustomExpect::MysqlHandshake => mysql_packet(received, 0, last_read, is_last),
        CustomExpect::MysqlOk => {
            // The packet after the handshake: skip the handshake (header and payload).
            let Some(h) = received.get(..3) else {
                return mysql_packet(received, usize::MAX / 2, last_read, is_last);
            };
            let hslen = 4 + (h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16);
            mysql_packet(received, hslen, last_read, is_last)
        }
        CustomExpect::LdapBind => ldap_bind(received, last_read, report),
    }
}

/// Reads the MySQL packet at `offset`: an error packet (`0xff`) fails with its code and
/// message (L7STS); otherwise, on the last step, the server's version (a NUL-terminated
/// string at byte 5 of its handshake) is the check's info.
fn mysql_packet(received: &[u8], offset: usize, last_read: bool, is_last: bool) -> Eval {
    let truncated = || {
        if last_read {
            Eval::Stop(Verdict::new(false, "Layer7 invalid response"))
        } else {
            Eval::Wait
        }
    };
    let Some(h) = received.get(offset..offset.saturating_add(4)) else {
        return truncated();
    };
    let plen = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
    if received.len() < offset + plen + 4 {
        return truncated();
    }
    if received.get(offset + 4) == Some(&0xff) {
        let code = received
            .get(offset + 5..offset + 7)
            .map_or(0, |c| u16::from(c[0]) | u16::from(c[1]) << 8);
        let desc = received.get(offset + 7..).unwrap_or_default();
        return Eval::Stop(Verdict {
            code: Some(code),
            info: Some(render(
                &CheckText::Reply {
                    from: 0,
                    ltrim: false,
                    cut_crlf: false,
                },
                desc,
            )),
            ..Verdict::new(false, "Layer7 wrong status")
        });
    }
    if !is_last {
        return Eval::Next(None);
    }
    let version = received.get(5..).unwrap_or_default();
    let end = version
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(version.len());
    Eval::Next(Some(String::from_utf8_lossy(&version[..end]).into_owned()))
}

/// Reads an LDAPv3 bind response (RFC 4511): the message length (short form, or long form on
/// 2 or 4 bytes), message id 1, a bindResponse, then its result code, which must be 0.
fn ldap_bind(received: &[u8], last_read: bool, report: &ExpectReport) -> Eval {
    let not_ldap = || {
        let status = report.error_status.unwrap_or(CheckStatus::L7Rsp);
        Eval::Stop(Verdict {
            info: Some("Not LDAPv3 protocol".to_string()),
            ..Verdict::new(false, status.reason())
        })
    };
    let too_short = || {
        if last_read {
            Eval::Stop(Verdict::new(false, "Layer7 invalid response"))
        } else {
            Eval::Wait
        }
    };
    let Some(&first) = received.get(1) else {
        return too_short();
    };
    let (nbytes, msglen) = if first & 0x80 != 0 {
        let nbytes = usize::from(first & 0x7f);
        let Some(len) = received.get(2..2 + nbytes) else {
            return too_short();
        };
        match nbytes {
            2 | 4 => (
                nbytes,
                len.iter().fold(0usize, |a, &b| a << 8 | usize::from(b)),
            ),
            _ => return not_ldap(),
        }
    } else {
        (0, usize::from(first))
    };
    if received.len() < 2 + nbytes + msglen {
        return too_short();
    }
    let mut p = 2 + nbytes;
    if received.get(p..p + 4) != Some(&[0x02, 0x01, 0x01, 0x61][..]) {
        return not_ldap();
    }
    p += 4;
    // The length of the bindResponse, skipped.
    match received.get(p) {
        Some(&b) if b & 0x80 != 0 => p += 1 + usize::from(b & 0x7f),
        Some(_) => p += 1,
        None => return not_ldap(),
    }
    if received.get(p..p + 2) != Some(&[0x0a, 0x01][..]) {
        return not_ldap();
    }
    let Some(&code) = received.get(p + 2) else {
        return not_ldap();
    };
    if code != 0 {
        return Eval::Stop(Verdict {
            code: Some(u16::from(code)),
            info: Some("See RFC: http://tools.ietf.org/html/rfc4511#section-4.1.9".to_string()),
            ..Verdict::new(false, "Layer7 wrong status")
        });
    }
    Eval::Next(Some("Success".to_string()))
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
pub fn judge_http(reply: &[u8], expect: Option<(bool, &HttpExpect)>) -> Verdict {
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
            negate,
            ranges.iter().any(|(a, b)| (*a..=*b).contains(&status)),
            "status",
        ),
        Some((negate, HttpExpect::String(text))) => (
            negate,
            body.windows(text.len().max(1))
                .any(|w| w == text.as_bytes()),
            "content",
        ),
        // The patterns compiled at load; a check runs every few seconds, so compiling again
        // here costs nothing that matters.
        Some((negate, HttpExpect::RStatus(re))) => (
            negate,
            regex::Regex::new(re).is_ok_and(|r| r.is_match(&status.to_string())),
            "status",
        ),
        Some((negate, HttpExpect::RString(re))) => (
            negate,
            regex::bytes::Regex::new(re).is_ok_and(|r| r.is_match(body)),
            "content",
        ),
        // Headers are judged with the check's other steps (`super::http`); alone, no header
        // is known to match.
        Some((negate, HttpExpect::Hdr { .. })) => (negate, false, "header"),
    };
    let ok = matched != negate;
    let mut v = Verdict {
        code: Some(status),
        ..Verdict::new(ok, "Layer7 check passed")
    };
    if !ok {
        if what == "status" || what == "header" {
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
        assert!(
            !judge_http(
                b"HTTP/1.1 301 Moved\r\n\r\n",
                exact.as_ref().map(|(n, e)| (*n, e))
            )
            .ok
        );
        let not_503 = Some((true, HttpExpect::Status(vec![(503, 503)])));
        assert!(
            judge_http(
                b"HTTP/1.1 500 x\r\n\r\n",
                not_503.as_ref().map(|(n, e)| (*n, e))
            )
            .ok
        );
        let text = Some((false, HttpExpect::String("healthy".into())));
        assert!(
            judge_http(
                b"HTTP/1.1 200 OK\r\n\r\nI am healthy",
                text.as_ref().map(|(n, e)| (*n, e))
            )
            .ok
        );
        assert!(
            !judge_http(
                b"HTTP/1.1 200 OK\r\n\r\nsick",
                text.as_ref().map(|(n, e)| (*n, e))
            )
            .ok
        );
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
        let v = judge_http(
            b"HTTP/1.1 200 OK\r\n\r\nbody",
            text.as_ref().map(|(n, e)| (*n, e)),
        );
        assert_eq!(v.reason, "Layer7 invalid response");
        assert_eq!(v.status_word(), "L7RSP");
    }

    #[test]
    fn os_errors_read_like_haproxy() {
        let e = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(describe(&e), "Connection refused");
    }
}
