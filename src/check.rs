//! Active health checks: a TCP connect to each server that has `check`, once per server for the
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
use crate::config::model::CheckParams;
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
                .filter(|(_, s)| s.config.check.is_some() && !s.config.disabled)
                .map(move |(s, _)| (b, s))
        })
        .collect();
    let n = checked.len() as u32;
    for (k, (b, s)) in checked.into_iter().enumerate() {
        // Spread the first checks over one interval so servers are not all probed at once.
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            let be = &shared.backends[b];
            let Some(params) = be.servers[s].config.check else {
                return;
            };
            let offset = params.inter * (k as u32) / n.max(1);
            tokio::time::sleep(offset).await;
            run(be, s, params).await;
        });
    }
}

async fn run(be: &Backend, server: usize, p: CheckParams) {
    let state = &be.servers[server];
    let timeout = be
        .config
        .timeouts
        .check
        .or(be.config.timeouts.connect)
        .map_or(p.inter, |t| t.min(p.inter));
    let mut health = Health::new();
    loop {
        let started = Instant::now();
        let result = tokio::time::timeout(timeout, TcpStream::connect(p.addr)).await;
        let took = started.elapsed().as_millis();
        let (ok, reason, info) = match result {
            Ok(Ok(_stream)) => (true, "Layer4 check passed", None),
            Ok(Err(e)) => (false, "Layer4 connection problem", Some(describe(&e))),
            Err(_) => (false, "Layer4 timeout", None),
        };
        let change = health.record(ok, p.rise, p.fall);
        if change != Transition::None {
            state.up.store(health.up, Ordering::Relaxed);
            log_change(be, server, health.up, reason, info.as_deref(), took);
        }
        tokio::time::sleep(health.interval(&p)).await;
    }
}

/// An OS error as HAProxy's check info shows it ("Connection refused").
fn describe(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn log_change(be: &Backend, server: usize, up: bool, reason: &str, info: Option<&str>, ms: u128) {
    let name = &be.servers[server].config.name;
    let (active, backup) = be.servers.iter().fold((0, 0), |(a, b), s| {
        let usable = !s.config.disabled && s.up.load(Ordering::Relaxed);
        match (usable, s.config.backup) {
            (true, false) => (a + 1, b),
            (true, true) => (a, b + 1),
            _ => (a, b),
        }
    });
    let info = info.map_or(String::new(), |i| format!(", info: \"{i}\""));
    let sessions = be.servers[server].cur_conns.load(Ordering::Relaxed);
    if up {
        eprintln!(
            "[WARNING] Server {}/{name} is UP, reason: {reason}{info}, check duration: {ms}ms. \
             {active} active and {backup} backup servers online. 0 sessions requeued, 0 total in queue.",
            be.config.name
        );
    } else {
        eprintln!(
            "[WARNING] Server {}/{name} is DOWN, reason: {reason}{info}, check duration: {ms}ms. \
             {active} active and {backup} backup servers left. {sessions} sessions active, 0 requeued, 0 remaining in queue.",
            be.config.name
        );
        if active + backup == 0 {
            eprintln!(
                "[ALERT] backend '{}' has no server available!",
                be.config.name
            );
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
    fn os_errors_read_like_haproxy() {
        let e = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(describe(&e), "Connection refused");
    }
}
