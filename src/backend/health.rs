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
