//! Agent checks (`agent-check`): every `agent-inter`, a connection to the server's agent
//! (`agent-addr`, `agent-port`), which is sent `agent-send` and answers one line. The line's
//! words set the server's weight (`75%`), connection limit (`maxconn:30`), administrative
//! state (`ready`, `drain`, `maint`) and operational state (`up`; `down`, `stopped`, `fail`),
//! as HAProxy's `tcpcheck_agent_expect_reply` reads them. An agent that cannot be reached, or
//! answers no complete line, changes nothing: connectivity is the health check's business.
//!
//! The agent runs beside the health check, also in maintenance (its `ready` may end it). A
//! server the agent said down stays DOWN whatever its health check says
//! ([`super::super::server::ServerState::agent_down`]) until the agent says `up`.
//!
//! With `option log-health-checks`, a change of the agent's status (its answer's `up` or
//! `down`, or an agent that cannot be reached) is logged as HAProxy 2.6 logs it: `Agent check
//! for server BE/SRV succeeded|failed, reason: ..., status: 1/1 UP` (an agent's rise and fall
//! are always 1).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::health::{log_change, Verdict};
use super::super::server::admin;
use super::Backends;
use crate::config::model::AgentParams;

/// What one agent line says; for each kind of word, the last one wins.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// `up` (true) or `down`/`stopped`/`fail` (false), with the word.
    pub health: Option<(bool, String)>,
    /// `ready`, `drain` or `maint`.
    pub admin: Option<String>,
    /// `N%`: the weight, in percent of the configured one.
    pub weight_pct: Option<u32>,
    /// `maxconn:N`.
    pub maxconn: Option<u32>,
    /// The text after `#`.
    pub description: String,
}

/// Reads an agent's answer: `None` until a whole line (ended by CR or LF) came. Words are
/// separated by spaces, tabs or commas, and compared without case; unknown words are ignored.
pub fn parse(bytes: &[u8]) -> Option<Reply> {
    let end = bytes.iter().position(|&c| c == b'\n' || c == b'\r')?;
    let line = String::from_utf8_lossy(&bytes[..end]);
    let (words, description) = match line.split_once('#') {
        Some((w, d)) => (w.to_string(), d.trim_start_matches([' ', '\t']).to_string()),
        None => (line.to_string(), String::new()),
    };
    let mut r = Reply {
        description,
        ..Reply::default()
    };
    for word in words.split([' ', '\t', ',']).filter(|w| !w.is_empty()) {
        let lower = word.to_ascii_lowercase();
        match lower.as_str() {
            "up" => r.health = Some((true, lower)),
            "down" | "stopped" | "fail" => r.health = Some((false, lower)),
            "ready" | "drain" | "maint" => r.admin = Some(lower),
            _ if word.starts_with(|c: char| c.is_ascii_digit()) && word.contains('%') => {
                let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
                r.weight_pct = digits.parse().ok();
            }
            _ => {
                if let Some(n) = lower.strip_prefix("maxconn:") {
                    r.maxconn = n.parse().ok();
                }
            }
        }
    }
    Some(r)
}

/// Runs the agent of server `server` of backend `b` for the life of the process.
pub(super) async fn run<B: Backends>(shared: &Arc<B>, b: usize, server: usize, a: AgentParams) {
    let be = &shared.backends()[b];
    let state = &be.servers[server];
    let connect_timeout = be
        .config
        .timeouts
        .connect
        .map_or(a.inter, |t| t.min(a.inter));
    let reply_timeout = be.config.timeouts.check.unwrap_or(a.inter);
    let mut last: LastStatus = None;
    loop {
        // `del server`: the agent goes with the server.
        if state.is_deleted() {
            return;
        }
        // `disable agent` pauses the agent.
        if !state.agent_enabled.load(Ordering::Relaxed) {
            tokio::time::sleep(a.inter).await;
            continue;
        }
        let started = Instant::now();
        let ip = a.addr.unwrap_or_else(|| state.addr.load().ip());
        let to = std::net::SocketAddr::new(ip, a.port);
        match ask(to, a.send.as_deref(), connect_timeout, reply_timeout).await {
            Ok(reply) => {
                if let Some(r) = reply.as_deref().and_then(parse) {
                    apply(shared, b, server, &r, started.elapsed(), &mut last);
                }
            }
            // The agent's health stays as it was: only the status changes.
            Err(v) => log_status(shared, b, server, &v, started.elapsed(), &mut last),
        }
        tokio::time::sleep(a.inter).await;
    }
}

/// The status an agent's check last reported (`L7OK`, `L4CON`...): a line is logged when it
/// changes.
type LastStatus = Option<&'static str>;

/// With `option log-health-checks`, logs the agent's result `v` if its status differs from
/// the last one, at level notice, in HAProxy's words.
fn log_status<B: Backends>(
    shared: &Arc<B>,
    b: usize,
    server: usize,
    v: &Verdict,
    took: Duration,
    last: &mut LastStatus,
) {
    let status = v.status_word();
    if last.replace(status) == Some(status) {
        return;
    }
    let be = &shared.backends()[b];
    if !be.config.options.log_health_checks {
        return;
    }
    let srv = &be.servers[server];
    let agent_up = !srv.agent_down.load(Ordering::Relaxed);
    let text = agent_line(
        &be.config.name,
        &srv.config.name,
        srv.config.backup,
        v,
        took.as_millis(),
        agent_up,
        srv.weight.load(Ordering::Relaxed) == 0,
    );
    eprintln!("[WARNING] {text}");
    shared.log_event(b, crate::log::LEVEL_NOTICE, &text);
}

/// The text of an agent's `log-health-checks` line: HAProxy's health line with "Agent", and
/// the agent's own health (rise and fall 1): `1/1 UP` (`DRAIN` at weight 0) or `0/1 DOWN`.
fn agent_line(
    be: &str,
    srv: &str,
    backup: bool,
    v: &Verdict,
    ms: u128,
    agent_up: bool,
    drained: bool,
) -> String {
    let status = match (agent_up, drained) {
        (true, false) => "1/1 UP",
        (true, true) => "1/1 DRAIN",
        (false, _) => "0/1 DOWN",
    };
    format!(
        "Agent check for {}server {be}/{srv} {}{}, status: {status}.",
        if backup { "backup " } else { "" },
        if v.ok { "succeeded" } else { "failed" },
        v.describe(ms),
    )
}

/// Connects to the agent, sends `send` and reads its answer (at most 1 KiB), within the
/// timeouts: `Ok(None)` when it sent no whole answer in time, the check's verdict when it
/// could not be reached.
async fn ask(
    to: std::net::SocketAddr,
    send: Option<&str>,
    connect_timeout: Duration,
    reply_timeout: Duration,
) -> Result<Option<Vec<u8>>, Verdict> {
    let mut s = match super::probe::connect(
        super::probe::Target::Inet(to),
        None,
        connect_timeout,
        None,
        None,
    )
    .await?
    {
        crate::net::stream::Stream::Tcp(s) => s,
        _ => return Ok(None),
    };
    let exchange = async {
        if let Some(text) = send {
            s.write_all(text.as_bytes()).await.ok()?;
        }
        let mut got = Vec::new();
        let mut chunk = [0u8; 512];
        while !got.iter().any(|&c| c == b'\n' || c == b'\r') && got.len() < 1024 {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(k) => got.extend_from_slice(&chunk[..k]),
            }
        }
        Some(got)
    };
    Ok(tokio::time::timeout(reply_timeout, exchange)
        .await
        .ok()
        .flatten())
}

/// Applies an agent's answer in HAProxy's order: administrative state, weight, connection
/// limit, then operational state.
fn apply<B: Backends>(
    shared: &Arc<B>,
    b: usize,
    server: usize,
    r: &Reply,
    took: Duration,
    last: &mut LastStatus,
) {
    let be = &shared.backends()[b];
    let state = &be.servers[server];
    match r.admin.as_deref() {
        Some("maint") => super::change_admin(shared, b, server, admin::FMAINT, 0),
        Some("drain") => super::change_admin(shared, b, server, admin::FDRAIN, 0),
        Some(_) => super::change_admin(shared, b, server, 0, admin::FMAINT | admin::FDRAIN),
        None => super::super::AdminChange::None,
    };
    if let Some(pct) = r.weight_pct {
        let w = u64::from(state.config.weight) * u64::from(pct) / 100;
        be.set_weight(server, u32::try_from(w).unwrap_or(u32::MAX));
    }
    if let Some(n) = r.maxconn {
        state.maxconn.store(n, Ordering::Relaxed);
    }
    let Some((up, word)) = &r.health else {
        return;
    };
    // HAProxy's words: "via agent : down (the description)".
    let info = if r.description.is_empty() {
        format!("via agent : {word}")
    } else {
        format!("via agent : {word} ({})", r.description)
    };
    let v = Verdict {
        code: Some(0),
        info: Some(info),
        ..Verdict::new(
            *up,
            if *up {
                "Layer7 check passed"
            } else {
                "Layer7 wrong status"
            },
        )
    };
    // HAProxy sets the agent's health, logs its check line, then changes the server's state.
    state.agent_down.store(!up, Ordering::Relaxed);
    log_status(shared, b, server, &v, took, last);
    set_health(shared, b, server, *up, &v, took);
}

/// The agent's verdict on a server (from its answer, or `set server ... agent up|down`): a
/// server the agent says down goes DOWN; one it says up comes back UP when its health check
/// (if any) agrees and no maintenance holds it. A change is logged with `v`.
pub fn set_health<B: Backends>(
    shared: &Arc<B>,
    b: usize,
    server: usize,
    up: bool,
    v: &Verdict,
    took: Duration,
) {
    let be = &shared.backends()[b];
    let state = &be.servers[server];
    let was_up = state.up.load(Ordering::Relaxed);
    state.agent_down.store(!up, Ordering::Relaxed);
    let healthy = state.config.check.is_none()
        || state.check.health.load(Ordering::Relaxed) >= state.config.rise;
    let now_up = if up {
        was_up || (healthy && !state.in_maint())
    } else {
        false
    };
    if now_up == was_up {
        return;
    }
    state.up.store(now_up, Ordering::Relaxed);
    let c = &state.check;
    c.last_change_s
        .store(crate::base::clock::uptime_secs(), Ordering::Relaxed);
    if !now_up {
        c.downs.fetch_add(1, Ordering::Relaxed);
    }
    // The health checker starts again from the state the agent left.
    c.generation.fetch_add(1, Ordering::AcqRel);
    log_change(be, server, now_up, v, took.as_millis(), &|level, text| {
        shared.log_event(b, level, text)
    });
    super::follow(shared, b, server);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_lines_are_read_like_haproxy() {
        let r = parse(b"75%,maxconn:30,maint,down\n").unwrap();
        assert_eq!(r.weight_pct, Some(75));
        assert_eq!(r.maxconn, Some(30));
        assert_eq!(r.admin.as_deref(), Some("maint"));
        assert_eq!(r.health, Some((false, "down".into())));
        let r = parse(b"UP ready\t50% # back from upgrade\r\n").unwrap();
        assert_eq!(r.health, Some((true, "up".into())));
        assert_eq!(r.admin.as_deref(), Some("ready"));
        assert_eq!(r.weight_pct, Some(50));
        assert_eq!(r.description, "back from upgrade");
        // Only a whole line counts; the last word of a kind wins; unknown words are ignored.
        assert_eq!(parse(b"up"), None);
        let r = parse(b"down up bogus drain\n").unwrap();
        assert_eq!(r.health, Some((true, "up".into())));
        assert_eq!(r.admin.as_deref(), Some("drain"));
    }
}
