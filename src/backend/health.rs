//! The words of server health, shared by active checks ([`super::check`]) and passive health
//! ([`super::passive`]): the rise/fall state machine ([`Health`]), a result in HAProxy's terms
//! ([`Verdict`]), and the state-change line ([`log_change`]) operators' log alerts match.
//!
//! Pure bookkeeping and formatting, below both the checker and passive health (hence below the
//! connector): it imports only [`Backend`], `config::model` and the `log` levels.

use std::time::Duration;

use super::Backend;
use crate::config::model::CheckParams;

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
            ("Socket error", _) => "SOCKERR",
            ("Layer6 check passed", _) => "L6OK",
            ("Layer6 timeout", _) => "L6TOUT",
            ("Layer6 invalid response", _) => "L6RSP",
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

    pub(super) fn new(ok: bool, reason: &'static str) -> Self {
        Verdict {
            ok,
            reason,
            code: None,
            info: None,
        }
    }
}

/// Reports a server's state change on stderr and through `to_logs` (level, line) to the
/// backend's `log` targets: UP at level notice, DOWN at level alert, as HAProxy does.
pub fn log_change(
    be: &Backend,
    server: usize,
    up: bool,
    v: &Verdict,
    ms: u128,
    to_logs: &dyn Fn(u8, &str),
) {
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
    let state = if up { OpState::Up } else { OpState::Down };
    log_state(be, server, state, &details, false, to_logs);
}

/// A server's operational state, as a state-change line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpState {
    Down,
    Stopping,
    Up,
}

/// "Server BE/SRV is UP|DOWN|stopping" followed by `details` (`, reason: ...`, ` via BE/SRV`)
/// and the backend's counts, on stderr and to the logs: DOWN at level alert (notice when the
/// server was stopping or draining), the others at notice; then HAProxy's alert when the
/// backend has no usable server left.
pub fn log_state(
    be: &Backend,
    server: usize,
    state: OpState,
    details: &str,
    was_stopping: bool,
    to_logs: &dyn Fn(u8, &str),
) {
    let s = &be.servers[server];
    let (active, backup) = be.usable_counts();
    let head = format!("{}{}", kind(be, server), name(be, server));
    let sessions = s.cur_conns.get();
    match state {
        OpState::Up | OpState::Stopping => {
            let word = if state == OpState::Up {
                "UP"
            } else {
                "stopping"
            };
            let text = format!(
                "{head} is {word}{details}. \
                 {active} active and {backup} backup servers online. 0 sessions requeued, 0 total in queue."
            );
            eprintln!("[WARNING] {text}");
            to_logs(crate::log::LEVEL_NOTICE, &text);
            if state == OpState::Up && active + backup == 1 {
                // The backend had no usable server: its time without one ends.
                server_back(be);
            }
            // A stopping server takes no new traffic: it may have been the last one.
            let weighted = s.weight.load(std::sync::atomic::Ordering::Relaxed) > 0;
            if state == OpState::Stopping
                && active + backup == 0
                && weighted
                && !s.draining()
                && !was_stopping
            {
                no_server_left(be, to_logs);
            }
        }
        OpState::Down => {
            let text = format!(
                "{head} is DOWN{details}. \
                 {active} active and {backup} backup servers left. {sessions} sessions active, 0 requeued, 0 remaining in queue."
            );
            eprintln!("[WARNING] {text}");
            let level = if was_stopping {
                crate::log::LEVEL_NOTICE
            } else {
                crate::log::LEVEL_ALERT
            };
            to_logs(level, &text);
            // Only when this server was the last one taking traffic.
            if active + backup == 0 && !was_stopping && s.lb_weight() > 0 {
                no_server_left(be, to_logs);
            }
        }
    }
}

/// "Server " or "Backup Server ".
fn kind(be: &Backend, server: usize) -> &'static str {
    if be.servers[server].config.backup {
        "Backup Server "
    } else {
        "Server "
    }
}

fn name(be: &Backend, server: usize) -> String {
    format!("{}/{}", be.config.name, be.servers[server].config.name)
}

/// HAProxy's alert when a backend's last usable server went away, counted in its `chkdown`
/// (HAProxy's `set_backend_down`).
fn no_server_left(be: &Backend, to_logs: &dyn Fn(u8, &str)) {
    be.down_trans
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    be.last_change_s.store(
        crate::base::clock::uptime_secs(),
        std::sync::atomic::Ordering::Relaxed,
    );
    // HAProxy quotes the name on stderr only.
    eprintln!(
        "[ALERT] backend '{}' has no server available!",
        be.config.name
    );
    let text = format!("backend {} has no server available!", be.config.name);
    to_logs(crate::log::LEVEL_EMERG, &text);
}

/// A backend without a usable server got one back: its `downtime` grows by the time it spent
/// without, and its `lastchg` starts again (HAProxy's `srv_update_status`).
fn server_back(be: &Backend) {
    use std::sync::atomic::Ordering::Relaxed;
    let now = crate::base::clock::uptime_secs();
    let since = be.last_change_s.swap(now, Relaxed);
    be.down_time_s.fetch_add(now.saturating_sub(since), Relaxed);
}

/// What an administrative change did to a server, for its log lines: the flags before and
/// after, whether it was UP (and stopping) before, and the server it tracks (`BE/SRV`), if any.
#[derive(Debug, Clone, Copy)]
pub struct AdminStep<'a> {
    pub before: u8,
    pub after: u8,
    pub was_up: bool,
    pub was_stopping: bool,
    pub via: Option<&'a str>,
}

/// Reports an administrative change in HAProxy's words (`srv_update_status`): entering or
/// leaving maintenance or drain, forced or inherited from a tracked server.
pub fn log_admin(be: &Backend, server: usize, step: AdminStep<'_>, to_logs: &dyn Fn(u8, &str)) {
    use super::server::admin::{DRAIN, FDRAIN, FMAINT, IMAINT, MAINT};
    let AdminStep {
        before,
        after,
        was_up,
        was_stopping,
        via,
    } = step;
    let s = &be.servers[server];
    let head = format!("{}{}", kind(be, server), name(be, server));
    let via_part = via.map_or(String::new(), |v| format!(" via {v}"));
    let notice = |text: String| {
        eprintln!("[WARNING] {text}");
        to_logs(crate::log::LEVEL_NOTICE, &text);
    };
    let (was_maint, is_maint) = (before & MAINT != 0, after & MAINT != 0);
    if !was_maint && is_maint {
        // The inherited kind names the server it comes from.
        let via = if after & FMAINT == 0 {
            via_part
        } else {
            String::new()
        };
        if !was_up {
            notice(format!("{head} was DOWN and now enters maintenance{via}."));
            return;
        }
        let (a, b) = be.usable_counts();
        let text = format!(
            "{head} is going DOWN for maintenance{via}. {a} active and {b} backup servers left. {} sessions active, 0 requeued, 0 remaining in queue.",
            s.cur_conns.get()
        );
        eprintln!("[WARNING] {text}");
        let draining = before & DRAIN != 0 || was_stopping;
        let weighted = s.weight.load(std::sync::atomic::Ordering::Relaxed) > 0;
        to_logs(
            if draining {
                crate::log::LEVEL_NOTICE
            } else {
                crate::log::LEVEL_ALERT
            },
            &text,
        );
        if a + b == 0 && !draining && weighted {
            no_server_left(be, to_logs);
        }
        return;
    }
    // An address given to a server that had none (`set server addr`): HAProxy names the host
    // that resolves again, which Bascule does not keep; it says nothing.
    if was_maint && before & (FMAINT | IMAINT) == 0 {
        return;
    }
    if was_maint && !is_maint {
        let state = if s.up.load(std::sync::atomic::Ordering::Relaxed) {
            "UP"
        } else {
            "DOWN"
        };
        let ready = if after & DRAIN != 0 { "DRAIN" } else { "READY" };
        let why = if before & IMAINT != 0 && after & IMAINT == 0 {
            "leaving maintenance"
        } else {
            "leaving forced maintenance"
        };
        notice(format!("{head} is {state}/{ready} ({why})."));
        return;
    }
    if was_maint {
        if before & FMAINT != 0 && after & FMAINT == 0 {
            notice(format!(
                "{head} is leaving forced maintenance but remains in maintenance{via_part}."
            ));
        } else if before & IMAINT != 0 && after & IMAINT == 0 {
            notice(format!("{head} remains in forced maintenance."));
        }
        return;
    }
    // Drain, out of maintenance.
    let (was_drain, is_drain) = (before & DRAIN != 0, after & DRAIN != 0);
    let state = if s.up.load(std::sync::atomic::Ordering::Relaxed) {
        "UP"
    } else {
        "DOWN"
    };
    if !was_drain && is_drain {
        let via = if after & FDRAIN == 0 {
            via_part
        } else {
            String::new()
        };
        let (a, b) = be.usable_counts();
        let counts = if s.up.load(std::sync::atomic::Ordering::Relaxed) {
            format!(
                "{a} active and {b} backup servers online. 0 sessions requeued, 0 total in queue"
            )
        } else {
            format!(
                "{a} active and {b} backup servers left. {} sessions active, 0 requeued, 0 remaining in queue",
                s.cur_conns.get()
            )
        };
        notice(format!("{head} enters drain state{via}. {counts}."));
        let weighted = s.weight.load(std::sync::atomic::Ordering::Relaxed) > 0;
        if a + b == 0 && was_up && !was_stopping && weighted {
            no_server_left(be, to_logs);
        }
    } else if was_drain && !is_drain {
        // HAProxy tests the flags after the change, where no drain flag is left: every exit
        // from drain reads as leaving the forced one.
        notice(format!("{head} is {state} (leaving forced drain)."));
    } else if is_drain && before != after {
        if after & FDRAIN == 0 {
            notice(format!(
                "{head} is leaving forced drain but remains in drain mode{via_part}."
            ));
        } else {
            notice(format!("{head} remains in forced drain mode."));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Check parameters for tests (also used by the checker's tests).
    pub(crate) fn params() -> CheckParams {
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
}
