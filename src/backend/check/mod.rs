//! Active health checks: a TCP connect (or, with `option httpchk`, an HTTP request judged by
//! `http-check expect`; with `option tcp-check` or a protocol check such as `option
//! mysql-check`, a `tcp-check` script) to each server that has `check`, once per server for the
//! whole process (not once per worker), with HAProxy's `inter`/`fastinter`/`downinter`,
//! `rise`/`fall`, `addr`/`port` and `timeout check`.
//!
//! Results land in the server's shared `up` flag, which every worker's balancer reads at its next
//! pick. State changes are logged in HAProxy's words, so operators' log alerts keep matching.
//!
//! The rise/fall logic is a small pure [`Health`] state machine (in [`super::health`]); the
//! probes (`tcp-check` scripts, HTTP requests) are in `probe`, the judgement of an HTTP
//! check's response by its `http-check` steps in `http`; the task here only schedules, probes
//! and records. Passive health leaves its verdicts on the server's state
//! ([`super::server::ServerState::passive`]); the task applies them on its next round. Agents
//! (`agent-check`) run beside, one task per server that has one (`agent`).

pub mod agent;
pub mod http;
pub mod probe;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::health::{log_change, Health, Transition, Verdict};
use super::server::{CHECK_STATUS, PASSIVE_FAIL_CHECK, PASSIVE_FASTINTER, PASSIVE_SUDDEN_DEATH};
use super::Backend;
use crate::config::model::{CheckParams, TcpCheckStep, TcpExpect};
use probe::{describe, http_exchange, http_request, run_script, Target};

/// What the checker needs from the process: the backends, alive as long as a check task runs,
/// and where each backend's events are logged. `state::Shared` provides it; a trait, so that
/// the checker (layer 2) does not import the layer that owns it.
pub trait Backends: Send + Sync + 'static {
    /// Every backend, indexed as in the configuration.
    fn backends(&self) -> &[Backend];
    /// Sends an event line (a check result, a state change) to backend `b`'s log targets at
    /// `level`, when it has any.
    fn log_event(&self, b: usize, level: u8, text: &str);
}

/// Starts one check task per checked server on the current runtime.
pub fn spawn_all<B: Backends>(shared: &Arc<B>) {
    let checked: Vec<(usize, usize)> = shared
        .backends()
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
    // Agents (`agent-check`) run on their own, from the start.
    for (b, be) in shared.backends().iter().enumerate() {
        for (s, srv) in be.servers.iter().enumerate() {
            if let Some(a) = srv.config.agent.clone() {
                let shared = Arc::clone(shared);
                tokio::spawn(async move { agent::run(&shared, b, s, a).await });
            }
        }
    }
    let n = checked.len() as u32;
    for (k, (b, s)) in checked.into_iter().enumerate() {
        // Spread the first checks over one interval so servers are not all probed at once.
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            let Some(params) = shared.backends()[b].servers[s].config.check else {
                return;
            };
            let offset = params.inter * (k as u32) / n.max(1);
            tokio::time::sleep(offset).await;
            run(&shared, b, s, params).await;
        });
    }
}

/// Starts the check and agent tasks of server `s` of backend `b`, added at run time (`add
/// server`) on the current runtime, the one running the others. They start paused, as the
/// server's checks are disabled until `enable health` / `enable agent`.
pub fn spawn_server<B: Backends>(shared: &Arc<B>, b: usize, s: usize) {
    let srv = &shared.backends()[b].servers[s];
    if let Some(a) = srv.config.agent.clone() {
        let shared = Arc::clone(shared);
        tokio::spawn(async move { agent::run(&shared, b, s, a).await });
    }
    if let Some(params) = srv.config.check {
        let shared = Arc::clone(shared);
        tokio::spawn(async move { run(&shared, b, s, params).await });
    }
}

async fn run<B: Backends>(shared: &Arc<B>, b: usize, server: usize, p: CheckParams) {
    let be = &shared.backends()[b];
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
    // A protocol check's rule set, else the proxy's own `tcp-check` rules.
    let opts = &be.config.options;
    let proto = opts.proto_check.is_some();
    let script = match &opts.proto_check {
        Some(p) => Some(&p.steps),
        None => opts.tcp_check.then_some(&opts.tcp_check_steps),
    };
    // The patterns were checked at load; compiled once per checker here.
    let regexes: Vec<Option<regex::bytes::Regex>> = script
        .into_iter()
        .flatten()
        .map(|step| match step {
            TcpCheckStep::Expect {
                pattern: TcpExpect::Regex(r) | TcpExpect::HexRegex(r),
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
    // The check's own variables (`http-check set-var(check.NAME)`).
    let check_vars = std::cell::RefCell::new(crate::rules::vars::Vars::default());
    loop {
        // `del server`: the server is gone, and its checker with it.
        if state.is_deleted() {
            return;
        }
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
        // A server on a UNIX socket is checked there.
        let current = state.addr.load();
        let dest = std::net::SocketAddr::new(
            state.config.check_addr.unwrap_or(current.ip()),
            state.config.check_port.unwrap_or(current.port()),
        );
        let target = match (&state.config.unix, state.config.socks4) {
            (Some(unix), _) => Target::Unix(unix),
            (None, Some(proxy)) if state.config.check_via_socks4 => {
                Target::Socks4 { proxy, to: dest }
            }
            (None, _) => Target::Inet(dest),
        };
        // `check-ssl` (or `ssl` checked on the server's own port): the check runs over TLS.
        let tls = state.config.tls.as_ref().and_then(|t| {
            Some(probe::CheckTls {
                config: t.check.clone()?,
                name: t.check_name(current.ip()),
            })
        });
        let send_proxy = state
            .checks_send_proxy()
            .then_some(if state.config.send_proxy_v2 {
                probe::SendProxy::V2
            } else {
                probe::SendProxy::V1
            });
        let started = Instant::now();
        let verdict = if let Some(steps) = script {
            let tls = tls.as_ref();
            let (c, r) = (connect_timeout, reply_timeout);
            run_script(target, steps, &regexes, c, r, tls, proto, send_proxy).await
        } else {
            match probe::connect(target, None, connect_timeout, tls.as_ref(), send_proxy).await {
                Err(v) => v,
                Ok(stream) => match &request {
                    None if tls.is_some() => Verdict::new(true, "Layer6 check passed"),
                    None => Verdict::new(true, "Layer4 check passed"),
                    Some(req) => {
                        let steps = &be.config.options.http_check.steps;
                        let code = &be.config.rules.http_check;
                        match tokio::time::timeout(reply_timeout, http_exchange(stream, req)).await
                        {
                            Err(_) => Verdict::new(false, "Layer7 timeout"),
                            Ok(Err(e)) => Verdict {
                                info: Some(describe(&e)),
                                ..Verdict::new(false, "Layer7 invalid response")
                            },
                            Ok(Ok(reply)) => http::judge(&reply, steps, code, &check_vars),
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
        let idx = CHECK_STATUS
            .iter()
            .position(|w| *w == status_word)
            .unwrap_or(0);
        c.status.store(idx as u8, Ordering::Relaxed);
        c.code.store(verdict.code.unwrap_or(0), Ordering::Relaxed);
        // A string only when the words change (a failing server's usually do not).
        let desc = verdict.info.as_deref().unwrap_or("");
        if c.desc.load().as_deref().map_or("", String::as_str) != desc {
            c.desc.store(Some(Arc::new(desc.to_string())));
        }
        c.duration_ms
            .store(took.min(u128::from(u32::MAX)) as u32, Ordering::Relaxed);
        if !verdict.ok && was_up {
            c.failures.fetch_add(1, Ordering::Relaxed);
        }
        c.health
            .store(health.value(p.rise, p.fall), Ordering::Relaxed);
        // A server its agent said down stays DOWN: the check going up changes nothing seen.
        let held_down = change == Transition::WentUp && state.agent_down.load(Ordering::Relaxed);
        if change != Transition::None && !held_down {
            state.stopping.store(false, Ordering::Relaxed);
            state.up.store(health.up, Ordering::Relaxed);
            c.last_change_s
                .store(crate::base::clock::uptime_secs(), Ordering::Relaxed);
            if change == Transition::WentDown {
                c.downs.fetch_add(1, Ordering::Relaxed);
            }
            if change == Transition::WentUp {
                if let Some(ramp) = state.config.slowstart {
                    tokio::spawn(slow_start(Arc::clone(shared), b, server, ramp));
                }
            }
            log_change(be, server, health.up, &verdict, took, &|level, text| {
                shared.log_event(b, level, text)
            });
            follow(shared, b, server);
        }
        let _ = tokio::time::timeout(health.interval(&p), state.check_wake.notified()).await;
    }
}

/// Has the servers tracking server `server` of backend `b` follow its new operational state.
pub fn follow<B: Backends>(shared: &Arc<B>, b: usize, server: usize) {
    let mut up = Vec::new();
    super::track::follow_op(
        shared.backends(),
        b,
        server,
        &|b, level, text| shared.log_event(b, level, text),
        &mut up,
    );
    ramp_up(shared, &up);
}

/// Starts the `slowstart` ramps of tracking servers that came back UP.
fn ramp_up<B: Backends>(shared: &Arc<B>, servers: &[(usize, usize)]) {
    for &(b, s) in servers {
        if let Some(ramp) = shared.backends()[b].servers[s].config.slowstart {
            tokio::spawn(slow_start(Arc::clone(shared), b, s, ramp));
        }
    }
}

/// Applies an administrative change to server `server` of backend `b` (and the servers that
/// track it), logged as HAProxy logs it.
pub fn change_admin<B: Backends>(
    shared: &Arc<B>,
    b: usize,
    server: usize,
    set: u8,
    clear: u8,
) -> super::AdminChange {
    let mut up = Vec::new();
    let change = super::track::change_admin(
        shared.backends(),
        b,
        server,
        set,
        clear,
        &|b, level, text| shared.log_event(b, level, text),
        &mut up,
    );
    ramp_up(shared, &up);
    change
}

/// Records `n` failures from passive health as failed checks.
fn apply_passive_failures<B: Backends>(
    health: &mut Health,
    shared: &Arc<B>,
    b: usize,
    server: usize,
    p: &CheckParams,
    n: u32,
) -> Transition {
    let be = &shared.backends()[b];
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
            log_change(be, server, false, &v, 0, &|level, text| {
                shared.log_event(b, level, text)
            });
            follow(shared, b, server);
            return Transition::WentDown;
        }
    }
    Transition::None
}

/// Steps of a `slowstart` ramp.
const RAMP_STEPS: u32 = 20;

/// `slowstart`: the effective weight climbs from 1/20 of the user weight to all of it over
/// `ramp`, so a server back from DOWN (or from maintenance) is not flooded at once. The ramp
/// stops if the server goes DOWN again; balancers read the weight at each pick, so each step
/// applies at once. The user weight itself (`get weight`) is left alone.
pub async fn slow_start<B: Backends>(
    shared: Arc<B>,
    b: usize,
    server: usize,
    ramp: std::time::Duration,
) {
    let state = &shared.backends()[b].servers[server];
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

/// `option log-health-checks`: reports one check result on stderr and to the backend's log
/// targets at level notice, in HAProxy's words:
/// `Health check for [backup ]server BE/SRV succeeded|failed, reason: ..., status: R/F UP|DOWN.`
fn log_result<B: Backends>(
    shared: &Arc<B>,
    b: usize,
    server: usize,
    v: &Verdict,
    ms: u128,
    health: &Health,
    p: &CheckParams,
) {
    let be = &shared.backends()[b];
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
    shared.log_event(b, crate::log::LEVEL_NOTICE, &text);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::health::tests::params;

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
}
