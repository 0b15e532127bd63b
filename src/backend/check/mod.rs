//! Active health checks: a TCP connect (or, with `option httpchk`, an HTTP request judged by
//! `http-check expect`) to each server that has `check`, once per server for the
//! whole process (not once per worker), with HAProxy's `inter`/`fastinter`/`downinter`,
//! `rise`/`fall`, `addr`/`port` and `timeout check`.
//!
//! Results land in the server's shared `up` flag, which every worker's balancer reads at its next
//! pick. State changes are logged in HAProxy's words, so operators' log alerts keep matching.
//!
//! The rise/fall logic is a small pure [`Health`] state machine; the task around it only connects
//! and sleeps.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::backend::Backend;
use crate::config::model::{
    CheckParams, HttpCheckRules, HttpExpect, Observe, OnError, TcpCheckStep, TcpExpect,
};
use crate::state::Shared;

/// Rise/fall bookkeeping of one server.
///
/// ```text
///   UP ──(fall consecutive failures)──▶ DOWN
///   DOWN ──(rise consecutive successes)──▶ UP
/// ```
/// A server starts UP, as in HAProxy, so traffic flows before the first check completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health {
    pub up: bool,
    /// Consecutive results against the current state (failures while UP, successes while DOWN).
    pub streak: u32,
}

/// What one check result did to the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    None,
    WentDown,
    WentUp,
}

impl Health {
    pub fn new() -> Self {
        Health {
            up: true,
            streak: 0,
        }
    }

    /// Records a check result.
    pub fn record(&mut self, ok: bool, rise: u32, fall: u32) -> Transition {
        if ok == self.up {
            self.streak = 0;
            return Transition::None;
        }
        self.streak += 1;
        let needed = if self.up { fall } else { rise };
        if self.streak < needed.max(1) {
            return Transition::None;
        }
        self.up = ok;
        self.streak = 0;
        if ok {
            Transition::WentUp
        } else {
            Transition::WentDown
        }
    }

    /// The state matching HAProxy's health counter `value` (0 to `rise + fall - 1`, UP from
    /// `rise` on), for a server that is `up` or not.
    pub fn from_value(up: bool, value: u32, rise: u32, fall: u32) -> Self {
        let (rise, fall) = (rise.max(1), fall.max(1));
        let streak = if up {
            (rise + fall - 1).saturating_sub(value).min(fall - 1)
        } else {
            value.min(rise - 1)
        };
        Health { up, streak }
    }

    /// HAProxy's health counter for this state (see [`Health::from_value`]).
    pub fn value(&self, rise: u32, fall: u32) -> u32 {
        let (rise, fall) = (rise.max(1), fall.max(1));
        if self.up {
            rise + fall - 1 - self.streak.min(fall - 1)
        } else {
            self.streak.min(rise - 1)
        }
    }

    /// The interval before the next check: `fastinter` while changing state, `downinter`
    /// while DOWN, `inter` otherwise.
    pub fn interval(&self, p: &CheckParams) -> Duration {
        if self.streak > 0 {
            p.fastinter
        } else if self.up {
            p.inter
        } else {
            p.downinter
        }
    }
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

/// Starts one check task per checked server on the current runtime.
pub fn spawn_all(shared: &Arc<Shared>) {
    let checked: Vec<(usize, usize)> = shared
        .backends
        .iter()
        .enumerate()
        .flat_map(|(b, be)| {
            be.servers
                .iter()
                .enumerate()
                // Servers in maintenance get a checker too: it waits until they leave it.
                .filter(|(_, s)| s.config.check.is_some())
                .map(move |(s, _)| (b, s))
        })
        .collect();
    let n = checked.len() as u32;
    for (k, (b, s)) in checked.into_iter().enumerate() {
        // Spread the first checks over one interval so servers are not all probed at once.
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            let Some(params) = shared.backends[b].servers[s].config.check else {
                return;
            };
            let offset = params.inter * (k as u32) / n.max(1);
            tokio::time::sleep(offset).await;
            run(&shared, b, s, params).await;
        });
    }
}

/// The result of one check, in HAProxy's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub ok: bool,
    pub reason: &'static str,
    /// The HTTP status, for layer-7 results.
    pub code: Option<u16>,
    pub info: Option<String>,
}

impl Verdict {
    /// HAProxy's short status name of this result (`L4OK`, `L7STS`...), as `show stat` shows it.
    pub fn status_word(&self) -> &'static str {
        match (self.reason, self.ok) {
            ("Layer4 check passed", _) => "L4OK",
            ("Layer4 timeout", _) => "L4TOUT",
            ("Layer4 connection problem", _) => "L4CON",
            ("Layer7 timeout", _) => "L7TOUT",
            ("Layer7 invalid response", _) => "L7RSP",
            (_, true) => "L7OK",
            (_, false) => "L7STS",
        }
    }

    /// `, reason: ...[, code: N][, info: "..."], check duration: Nms`, as HAProxy appends to
    /// check and state-change lines. The code shows for the statuses that carry one (L7OK,
    /// L7STS); the info is escaped as HAProxy does (non-printable bytes and `"` as `#XX`).
    pub fn describe(&self, ms: u128) -> String {
        let mut out = format!(", reason: {}", self.reason);
        if let (Some(code), "L7OK" | "L7STS") = (self.code, self.status_word()) {
            out.push_str(&format!(", code: {code}"));
        }
        if let Some(info) = self.info.as_deref().filter(|i| !i.is_empty()) {
            out.push_str(", info: \"");
            for ch in info.chars() {
                if ch == '"' || ch.is_control() {
                    out.push_str(&format!("#{:02X}", ch as u32 & 0xff));
                } else {
                    out.push(ch);
                }
            }
            out.push('"');
        }
        out.push_str(&format!(", check duration: {ms}ms"));
        out
    }

    fn new(ok: bool, reason: &'static str) -> Self {
        Verdict {
            ok,
            reason,
            code: None,
            info: None,
        }
    }
}

async fn run(shared: &Arc<Shared>, b: usize, server: usize, p: CheckParams) {
    let be = &shared.backends[b];
    let state = &be.servers[server];
    // `timeout check` bounds the connect (as `timeout connect` does otherwise) and the reply.
    let connect_timeout = be
        .config
        .timeouts
        .connect
        .map_or(p.inter, |t| t.min(p.inter));
    let reply_timeout = be.config.timeouts.check.unwrap_or(p.inter);
    let request = be
        .config
        .options
        .httpchk
        .as_ref()
        .map(|h| http_request(h, &be.config.options.http_check));
    let script = be
        .config
        .options
        .tcp_check
        .then_some(&be.config.options.tcp_check_steps);
    // The patterns were checked at load; compiled once per checker here.
    let regexes: Vec<Option<regex::bytes::Regex>> = be
        .config
        .options
        .tcp_check_steps
        .iter()
        .map(|step| match step {
            TcpCheckStep::Expect {
                pattern: TcpExpect::Regex(r),
                ..
            } => regex::bytes::Regex::new(r).ok(),
            _ => None,
        })
        .collect();
    // HAProxy starts a server UP at the lowest UP health (`rise`): one failed check takes it
    // DOWN, one passed check makes it fully UP.
    let mut health = Health::from_value(
        state.up.load(Ordering::Relaxed),
        state.check.health.load(Ordering::Relaxed),
        p.rise,
        p.fall,
    );
    // The status of the last result (`INI` before the first): `option log-health-checks` logs
    // a result when the status or the health changes.
    let mut last_status = "INI";
    let mut generation = state.check.generation.load(Ordering::Acquire);
    loop {
        // In maintenance or with `disable health`, checks pause (the state stays as it is)
        // until the operator wakes them.
        if !state.checking() {
            let _ = tokio::time::timeout(p.inter, state.check_wake.notified()).await;
            continue;
        }
        // The operator or passive health changed the state: start again from it.
        let now_gen = state.check.generation.load(Ordering::Acquire);
        let shared_up = state.up.load(Ordering::Relaxed);
        if now_gen != generation || shared_up != health.up {
            generation = now_gen;
            let value = state.check.health.load(Ordering::Relaxed);
            health = Health::from_value(shared_up, value, p.rise, p.fall);
        }
        match state.passive.swap(0, Ordering::Relaxed) {
            PASSIVE_FAIL_CHECK => {
                let _ = apply_passive_failures(&mut health, shared, b, server, &p, 1);
            }
            PASSIVE_SUDDEN_DEATH if health.up => {
                // Leave one failure before DOWN: the next failed check (or error) decides.
                let missing = p.fall.saturating_sub(1).saturating_sub(health.streak);
                let _ = apply_passive_failures(&mut health, shared, b, server, &p, missing);
            }
            PASSIVE_FASTINTER if health.up && health.streak == 0 => {
                // No verdict yet: check again soon.
                tokio::time::sleep(p.fastinter.min(p.inter)).await;
            }
            _ => {}
        }
        // The server's address may have changed (`set server addr`); `addr` and `port` on the
        // server line still win.
        let current = state.addr.load();
        let target = std::net::SocketAddr::new(
            state.config.check_addr.unwrap_or(current.ip()),
            state.config.check_port.unwrap_or(current.port()),
        );
        let started = Instant::now();
        let verdict = if let Some(steps) = script {
            run_script(target, steps, &regexes, connect_timeout, reply_timeout).await
        } else {
            match tokio::time::timeout(connect_timeout, TcpStream::connect(target)).await {
                Err(_) => Verdict::new(false, "Layer4 timeout"),
                Ok(Err(e)) => Verdict {
                    info: Some(describe(&e)),
                    ..Verdict::new(false, "Layer4 connection problem")
                },
                Ok(Ok(stream)) => match &request {
                    None => Verdict::new(true, "Layer4 check passed"),
                    Some(req) => {
                        let expect = &be.config.options.http_check.expect;
                        match tokio::time::timeout(reply_timeout, http_exchange(stream, req)).await
                        {
                            Err(_) => Verdict::new(false, "Layer7 timeout"),
                            Ok(Err(e)) => Verdict {
                                info: Some(describe(&e)),
                                ..Verdict::new(false, "Layer7 invalid response")
                            },
                            Ok(Ok(reply)) => judge_http(&reply, expect.as_ref()),
                        }
                    }
                },
            }
        };
        let took = started.elapsed().as_millis();
        // Maintenance or a state change came while the check ran: its result is stale.
        if !state.checking() || state.check.generation.load(Ordering::Acquire) != generation {
            continue;
        }
        let was_up = health.up;
        let value_before = health.value(p.rise, p.fall);
        let change = health.record(verdict.ok, p.rise, p.fall);
        let c = &state.check;
        let status_word = verdict.status_word();
        if be.config.options.log_health_checks
            && (status_word != last_status || health.value(p.rise, p.fall) != value_before)
        {
            log_result(shared, b, server, &verdict, took, &health, &p);
        }
        last_status = status_word;
        let idx = crate::backend::CHECK_STATUS
            .iter()
            .position(|w| *w == status_word)
            .unwrap_or(0);
        c.status.store(idx as u8, Ordering::Relaxed);
        c.code.store(verdict.code.unwrap_or(0), Ordering::Relaxed);
        c.duration_ms
            .store(took.min(u128::from(u32::MAX)) as u32, Ordering::Relaxed);
        if !verdict.ok && was_up {
            c.failures.fetch_add(1, Ordering::Relaxed);
        }
        c.health
            .store(health.value(p.rise, p.fall), Ordering::Relaxed);
        if change != Transition::None {
            state.stopping.store(false, Ordering::Relaxed);
            state.up.store(health.up, Ordering::Relaxed);
            c.last_change_s
                .store(crate::runtime::stats::uptime_secs(), Ordering::Relaxed);
            if change == Transition::WentDown {
                c.downs.fetch_add(1, Ordering::Relaxed);
            }
            if change == Transition::WentUp {
                if let Some(ramp) = state.config.slowstart {
                    tokio::spawn(slow_start(Arc::clone(shared), b, server, ramp));
                }
            }
            log_change(be, server, health.up, &verdict, took, Some(shared));
        }
        let _ = tokio::time::timeout(health.interval(&p), state.check_wake.notified()).await;
    }
}

/// `outlier-ejection` (Bascule extension, after Envoy's outlier detection): count consecutive
/// live errors; at the threshold, eject the server for a while unless too many already are.
fn outlier(
    be: &Backend,
    server: usize,
    outcome: crate::backend::Outcome,
    o: crate::config::model::OutlierEjection,
) {
    use crate::backend::Outcome;
    let state = &be.servers[server];
    let http = be.config.mode == crate::config::model::Mode::Http;
    match outcome {
        Outcome::Layer4Error | Outcome::Layer7Error => {}
        // In HTTP a connect succeeding says nothing yet: only a good answer clears the count.
        Outcome::Layer7Ok | Outcome::Layer4Ok if !(http && outcome == Outcome::Layer4Ok) => {
            state.outlier_errors.store(0, Ordering::Relaxed);
            return;
        }
        _ => return,
    }
    let n = state.outlier_errors.fetch_add(1, Ordering::Relaxed) + 1;
    if n < o.consecutive || state.is_ejected() {
        return;
    }
    state.outlier_errors.store(0, Ordering::Relaxed);
    let total = be.servers.len();
    let ejected = be.servers.iter().filter(|s| s.is_ejected()).count();
    let allowed = (total * o.max_percent as usize / 100).max(1);
    if ejected >= allowed {
        return;
    }
    let until = crate::runtime::stats::uptime_ms() + o.ejection_time.as_millis() as u64;
    state
        .ejected_until_ms
        .store(until.max(1), Ordering::Relaxed);
    eprintln!(
        "[WARNING] Server {}/{} ejected as an outlier after {n} consecutive errors, for {} ms ({} of {total} servers ejected).",
        be.config.name,
        state.config.name,
        o.ejection_time.as_millis(),
        ejected + 1
    );
}

/// Records `n` failures from passive health as failed checks.
fn apply_passive_failures(
    health: &mut Health,
    shared: &Arc<Shared>,
    b: usize,
    server: usize,
    p: &CheckParams,
    n: u32,
) -> Transition {
    let be = &shared.backends[b];
    let state = &be.servers[server];
    for _ in 0..n {
        let change = health.record(false, p.rise, p.fall);
        state
            .check
            .health
            .store(health.value(p.rise, p.fall), Ordering::Relaxed);
        if change == Transition::WentDown {
            state.up.store(false, Ordering::Relaxed);
            state.check.downs.fetch_add(1, Ordering::Relaxed);
            let v = Verdict::new(false, "Health analyze");
            log_change(be, server, false, &v, 0, Some(shared));
            return Transition::WentDown;
        }
    }
    Transition::None
}

/// Passive verdicts handed to the checker (`ServerState::passive`).
pub const PASSIVE_FASTINTER: u8 = 1;
pub const PASSIVE_FAIL_CHECK: u8 = 2;
pub const PASSIVE_SUDDEN_DEATH: u8 = 3;

/// Passive health: records what live traffic said about a server with `observe`, and after
/// `error-limit` consecutive errors applies `on-error`. Called from the data path: a couple of
/// atomic operations, and nothing at all for servers without `observe`.
pub fn observe(be: &Backend, server: usize, outcome: crate::backend::Outcome) {
    use crate::backend::Outcome;
    let state = &be.servers[server];
    if let Some(o) = be.config.outlier {
        outlier(be, server, outcome, o);
    }
    let Some(level) = state.config.observe else {
        return;
    };
    // A layer-4 observer judges connections only; a layer-7 one also judges responses, and
    // only a good response clears its count.
    match (level, outcome) {
        (_, Outcome::Layer4Error) | (Observe::Layer7, Outcome::Layer7Error) => {}
        (Observe::Layer4, Outcome::Layer4Ok) | (Observe::Layer7, Outcome::Layer7Ok) => {
            state.live_errors.store(0, Ordering::Relaxed);
            return;
        }
        _ => return,
    }
    let n = state.live_errors.fetch_add(1, Ordering::Relaxed) + 1;
    if n < state.config.error_limit {
        return;
    }
    state.live_errors.store(0, Ordering::Relaxed);
    match state.config.on_error {
        OnError::MarkDown => {
            if state.up.swap(false, Ordering::Relaxed) {
                state.check.health.store(0, Ordering::Relaxed);
                state.check.generation.fetch_add(1, Ordering::Release);
                state.check.downs.fetch_add(1, Ordering::Relaxed);
                state
                    .check
                    .last_change_s
                    .store(crate::runtime::stats::uptime_secs(), Ordering::Relaxed);
                let v = Verdict {
                    info: Some(format!("{n} consecutive errors on live traffic")),
                    ..Verdict::new(false, "Health analyze")
                };
                log_change(be, server, false, &v, 0, None);
            }
        }
        OnError::FastInter => state.passive.store(PASSIVE_FASTINTER, Ordering::Relaxed),
        OnError::FailCheck => state.passive.store(PASSIVE_FAIL_CHECK, Ordering::Relaxed),
        OnError::SuddenDeath => state.passive.store(PASSIVE_SUDDEN_DEATH, Ordering::Relaxed),
    }
}

/// Steps of a `slowstart` ramp.
const RAMP_STEPS: u32 = 20;

/// `slowstart`: the effective weight climbs from 1/20 of the user weight to all of it over
/// `ramp`, so a server back from DOWN (or from maintenance) is not flooded at once. The ramp
/// stops if the server goes DOWN again; balancers read the weight at each pick, so each step
/// applies at once. The user weight itself (`get weight`) is left alone.
pub async fn slow_start(shared: Arc<Shared>, b: usize, server: usize, ramp: std::time::Duration) {
    let state = &shared.backends[b].servers[server];
    for step in 1..=RAMP_STEPS {
        if !state.usable() {
            break;
        }
        state
            .ramp_pct
            .store(step * 100 / RAMP_STEPS, Ordering::Relaxed);
        tokio::time::sleep(ramp / RAMP_STEPS).await;
    }
    state.ramp_pct.store(100, Ordering::Relaxed);
}

/// Runs a `tcp-check` script: steps in order, an implicit connect first when the script does
/// not start with one. An `expect` reads (within `reply_timeout`) until its pattern shows up,
/// the peer closes, or 16 KiB have arrived.
async fn run_script(
    addr: std::net::SocketAddr,
    steps: &[TcpCheckStep],
    regexes: &[Option<regex::bytes::Regex>],
    connect_timeout: std::time::Duration,
    reply_timeout: std::time::Duration,
) -> Verdict {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let connect = |port: Option<u16>| {
        let mut to = addr;
        if let Some(p) = port {
            to.set_port(p);
        }
        async move {
            match tokio::time::timeout(connect_timeout, TcpStream::connect(to)).await {
                Err(_) => Err(Verdict::new(false, "Layer4 timeout")),
                Ok(Err(e)) => Err(Verdict {
                    info: Some(describe(&e)),
                    ..Verdict::new(false, "Layer4 connection problem")
                }),
                Ok(Ok(s)) => Ok(s),
            }
        }
    };
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
            TcpCheckStep::Expect { negate, pattern } => {
                talked = true;
                let Some(s) = stream.as_mut() else {
                    return Verdict::new(false, "Layer4 connection problem");
                };
                let matches = |buf: &[u8]| match pattern {
                    TcpExpect::Bytes(b) => buf.windows(b.len().max(1)).any(|w| w == &b[..]),
                    TcpExpect::Regex(_) => regexes[n].as_ref().is_some_and(|r| r.is_match(buf)),
                };
                let read_until = async {
                    let mut chunk = [0u8; 2048];
                    while !matches(&received) && received.len() < CHECK_REPLY_MAX {
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
                    && !*negate
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

async fn http_exchange(mut stream: TcpStream, request: &[u8]) -> std::io::Result<Vec<u8>> {
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
fn describe(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// `option log-health-checks`: reports one check result on stderr and to the backend's log
/// targets at level notice, in HAProxy's words:
/// `Health check for [backup ]server BE/SRV succeeded|failed, reason: ..., status: R/F UP|DOWN.`
fn log_result(
    shared: &Arc<Shared>,
    b: usize,
    server: usize,
    v: &Verdict,
    ms: u128,
    health: &Health,
    p: &CheckParams,
) {
    let be = &shared.backends[b];
    let srv = &be.servers[server];
    let text = result_line(
        &be.config.name,
        &srv.config.name,
        srv.config.backup,
        v,
        ms,
        health.value(p.rise, p.fall),
        p,
        srv.weight.load(Ordering::Relaxed) == 0,
    );
    eprintln!("[WARNING] {text}");
    let log = &shared.backend_logs[b];
    if log.enabled() {
        log.event(&shared.log_outputs, crate::log::LEVEL_NOTICE, &text);
    }
}

/// The text of a `log-health-checks` line. `value` is HAProxy's health counter: from `rise` on
/// the server is UP and shows `value - rise + 1` out of `fall`, below it DOWN with `value` out
/// of `rise`; an UP server of weight 0 shows DRAIN.
#[allow(clippy::too_many_arguments)]
pub fn result_line(
    be: &str,
    srv: &str,
    backup: bool,
    v: &Verdict,
    ms: u128,
    value: u32,
    p: &CheckParams,
    drained: bool,
) -> String {
    let (rise, fall) = (p.rise.max(1), p.fall.max(1));
    let status = if value >= rise {
        let word = if drained { "DRAIN" } else { "UP" };
        format!("{}/{fall} {word}", value - rise + 1)
    } else {
        format!("{value}/{rise} DOWN")
    };
    format!(
        "Health check for {}server {be}/{srv} {}{}, status: {status}.",
        if backup { "backup " } else { "" },
        if v.ok { "succeeded" } else { "failed" },
        v.describe(ms),
    )
}

/// Reports a server's state change on stderr and, when the backend has `log` targets (and
/// `shared` is known), to them: UP at level notice, DOWN at level alert, as HAProxy does.
fn log_change(
    be: &Backend,
    server: usize,
    up: bool,
    v: &Verdict,
    ms: u128,
    shared: Option<&Arc<Shared>>,
) {
    let to_logs = |level: u8, text: &str| {
        let Some(shared) = shared else { return };
        let Some(b) = shared.backends.iter().position(|x| std::ptr::eq(x, be)) else {
            return;
        };
        let log = &shared.backend_logs[b];
        if log.enabled() {
            log.event(&shared.log_outputs, level, text);
        }
    };
    let name = &be.servers[server].config.name;
    let (active, backup) = be.usable_counts();
    // With `option log-health-checks` the check line already told why: HAProxy leaves the
    // details out of the state-change line.
    let details = if be.config.options.log_health_checks {
        String::new()
    } else if v.reason == "Health analyze" {
        // Passive health has no check duration.
        let mut d = v.describe(0);
        d.truncate(d.rfind(", check duration").unwrap_or(d.len()));
        d
    } else {
        v.describe(ms)
    };
    let kind = if be.servers[server].config.backup {
        "Backup Server"
    } else {
        "Server"
    };
    let sessions = be.servers[server].cur_conns.get();
    if up {
        let text = format!(
            "{kind} {}/{name} is UP{details}. \
             {active} active and {backup} backup servers online. 0 sessions requeued, 0 total in queue.",
            be.config.name
        );
        eprintln!("[WARNING] {text}");
        to_logs(crate::log::LEVEL_NOTICE, &text);
    } else {
        let text = format!(
            "{kind} {}/{name} is DOWN{details}. \
             {active} active and {backup} backup servers left. {sessions} sessions active, 0 requeued, 0 remaining in queue.",
            be.config.name
        );
        eprintln!("[WARNING] {text}");
        to_logs(crate::log::LEVEL_ALERT, &text);
        if active + backup == 0 {
            // HAProxy quotes the name on stderr only.
            eprintln!(
                "[ALERT] backend '{}' has no server available!",
                be.config.name
            );
            let text = format!("backend {} has no server available!", be.config.name);
            to_logs(crate::log::LEVEL_EMERG, &text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> CheckParams {
        CheckParams {
            inter: Duration::from_secs(2),
            fastinter: Duration::from_millis(500),
            downinter: Duration::from_secs(5),
            rise: 2,
            fall: 3,
            addr: "127.0.0.1:1".parse().unwrap(),
        }
    }

    #[test]
    fn falls_after_fall_failures_and_rises_after_rise_successes() {
        let p = params();
        let mut h = Health::new();
        assert_eq!(h.interval(&p), p.inter);
        assert_eq!(h.record(false, 2, 3), Transition::None);
        assert_eq!(h.interval(&p), p.fastinter);
        // A success while UP resets the failure streak.
        assert_eq!(h.record(true, 2, 3), Transition::None);
        assert_eq!(h.record(false, 2, 3), Transition::None);
        assert_eq!(h.record(false, 2, 3), Transition::None);
        assert_eq!(h.record(false, 2, 3), Transition::WentDown);
        assert!(!h.up);
        assert_eq!(h.interval(&p), p.downinter);
        assert_eq!(h.record(true, 2, 3), Transition::None);
        assert_eq!(h.record(true, 2, 3), Transition::WentUp);
        assert!(h.up);
    }

    #[test]
    fn health_counter_round_trips_haproxy_values() {
        let (rise, fall) = (2, 3);
        for up in [true, false] {
            for v in 0..=rise + fall - 1 {
                let h = Health::from_value(up, v, rise, fall);
                let back = h.value(rise, fall);
                if up {
                    // UP spans rise..=rise+fall-1; lower values read as the lowest UP one.
                    assert_eq!(back, v.max(rise), "up {v}");
                } else {
                    assert_eq!(back, v.min(rise - 1), "down {v}");
                }
            }
        }
        // Leaving maintenance: UP with a health of `rise`, so one failure takes it down.
        let mut h = Health::from_value(true, rise, rise, fall);
        assert_eq!(h.record(false, rise, fall), Transition::WentDown);
        assert_eq!(h.value(rise, fall), 0);
        assert_eq!(Health::new().value(rise, fall), rise + fall - 1);
    }

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
    fn result_lines_read_like_haproxy() {
        let p = CheckParams {
            rise: 2,
            fall: 3,
            ..params()
        };
        let v = Verdict {
            code: Some(503),
            info: Some("Service \"Unavailable\"".into()),
            ..Verdict::new(false, "Layer7 wrong status")
        };
        assert_eq!(
            result_line("be", "s1", false, &v, 4, 3, &p, false),
            "Health check for server be/s1 failed, reason: Layer7 wrong status, code: 503, \
             info: \"Service #22Unavailable#22\", check duration: 4ms, status: 2/3 UP."
        );
        // No code for statuses that do not carry one; DOWN counts towards `rise`.
        let v = Verdict {
            code: Some(200),
            ..Verdict::new(false, "Layer7 invalid response")
        };
        assert_eq!(
            result_line("be", "s1", true, &v, 0, 1, &p, false),
            "Health check for backup server be/s1 failed, reason: Layer7 invalid response, \
             check duration: 0ms, status: 1/2 DOWN."
        );
        let ok = Verdict::new(true, "Layer4 check passed");
        assert!(result_line("be", "s1", false, &ok, 0, 4, &p, true).ends_with("3/3 DRAIN."));
        // HAProxy's initial health (`rise`): one failure takes the server down.
        let mut h = Health::from_value(true, p.rise, p.rise, p.fall);
        assert_eq!(h.record(false, p.rise, p.fall), Transition::WentDown);
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
