//! Backends at run time (layer 2): the servers' shared state, server choice, connecting with
//! retries and redispatch, and health, active and passive.
//!
//! Split by who owns what, from the bottom up (each file imports only those above it here):
//! - [`server`]: [`ServerState`], the per-server facts every worker and the checker share, in
//!   atomics, so reading them takes no lock.
//! - this file: [`Backend`], a backend's servers built once from the model and shared by every
//!   worker (behind the `Arc` of `state::Shared`), and the operator's changes to them.
//! - [`health`]: the rise/fall machine, check verdicts and the state-change log line, shared by
//!   active and passive health.
//! - [`passive`]: what live traffic says about a server (`observe`, `outlier-ejection`).
//! - [`picker`]: the per-worker balancer state ([`Picker`]) and the hash key.
//! - [`connect`](mod@connect): HAProxy's connection loop, queues and `send-proxy`.
//! - [`check`]: active health checks, one task per checked server for the whole process.
//!
//! The data path's entry points (pick, connect, the key, the outcome of a request) are
//! re-exported here, so a session says `backend::connect_to`.
//!
//! This layer may import `base`, `config::model`, `lb`, `log` and `net`; it must not import
//! `state`, `session`, `http` or `runtime`. What the checker needs from the process (the
//! backends and their log targets) comes through the [`check::Backends`] trait.

pub mod check;
pub mod connect;
pub mod health;
pub mod passive;
pub mod picker;
pub mod server;

pub use connect::{
    connect, connect_assigned, connect_to, pick, pick_queued, proxy_key, sni_of, Assigned,
    ClientAddrs, ConnectError, ServerConn, ServerSlot, SniValues,
};
pub use picker::{balance_key, Picker};
pub use server::Outcome;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

use tokio::sync::Notify;

use crate::base::atomic_addr::AtomicSocketAddr;
use crate::base::counter::Gauge;
use crate::config::model::{self, Balance, HashMethod};
use server::{admin, CheckStats, ServerState};

/// What an administrative change did, for the caller to log and follow up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminChange {
    /// Nothing changed.
    None,
    /// The server entered maintenance.
    EnteredMaint,
    /// The server left maintenance (it is UP again; its checks resume at once).
    LeftMaint,
    /// Only the drain flag changed.
    Drain,
}

/// Run-time state of one backend, shared by every worker.
#[derive(Debug)]
pub struct Backend {
    pub config: model::Backend,
    pub servers: Vec<ServerState>,
    /// Woken when a connection to one of its servers closes, for sessions waiting on `maxconn`.
    slot_freed: Notify,
    /// Requests waiting for any server (the backend queue), for `show stat`.
    pub queued: AtomicU32,
    /// Requests that left the backend queue with a server, ever (for `%bq`, as the servers'
    /// `queue_idx` for `%sq`).
    pub queue_idx: AtomicU32,
    /// Some server has `send-proxy`, or no address or port of its own: sessions must learn the
    /// address the client connected to.
    pub send_proxy: bool,
    /// The round-robin position of each tier (active, backup), shared by every worker's picker
    /// so that the order is the process's, as in HAProxy.
    pub(super) rr_cursors: [crate::lb::Cursor; 2],
}

impl Backend {
    pub fn new(config: model::Backend, workers: usize) -> Self {
        let servers = config
            .servers
            .iter()
            .map(|s| ServerState {
                weight: AtomicU32::new(s.weight),
                ramp_pct: AtomicU32::new(100),
                // A server declared `disabled` is in maintenance, hence stopped, as in HAProxy.
                up: AtomicBool::new(!s.disabled && !s.no_addr),
                stopping: AtomicBool::new(false),
                admin: AtomicU8::new(
                    if s.disabled {
                        admin::CMAINT | admin::FMAINT
                    } else {
                        0
                    } | if s.no_addr { admin::RMAINT } else { 0 },
                ),
                addr: AtomicSocketAddr::new(s.addr),
                check_enabled: AtomicBool::new(s.check.is_some()),
                check_wake: Notify::new(),
                cur_conns: Gauge::new(workers),
                total_conns: AtomicU64::new(0),
                conn_errors: AtomicU64::new(0),
                check: CheckStats {
                    health: AtomicU32::new(if s.disabled { 0 } else { s.rise }),
                    ..CheckStats::default()
                },
                live_errors: AtomicU32::new(0),
                passive: std::sync::atomic::AtomicU8::new(0),
                maxconn: AtomicU32::new(s.maxconn.unwrap_or(0)),
                smax: AtomicU32::new(0),
                qmax: AtomicU32::new(0),
                agent_down: AtomicBool::new(false),
                agent_enabled: AtomicBool::new(s.agent.is_some()),
                queued: AtomicU32::new(0),
                queue_idx: AtomicU32::new(0),
                outlier_errors: AtomicU32::new(0),
                ejected_until_ms: AtomicU64::new(0),
                config: s.clone(),
            })
            .collect();
        Backend {
            // A server without an address or a port takes the client's destination's: the
            // local address is then needed too.
            send_proxy: config.servers.iter().any(|s| {
                s.send_proxy
                    || s.send_proxy_v2
                    || (s.unix.is_none() && (s.addr.port() == 0 || s.addr.ip().is_unspecified()))
            }),
            config,
            servers,
            slot_freed: Notify::new(),
            queued: AtomicU32::new(0),
            queue_idx: AtomicU32::new(0),
            rr_cursors: Default::default(),
        }
    }

    /// Usable servers (UP and not in maintenance), as HAProxy's `nbsrv(BACKEND)` counts them: the
    /// value the ACL work reads.
    /// Connections to this backend's servers and requests in its queues (HAProxy's beconn).
    pub fn conn_count(&self) -> u32 {
        let open: u32 = self.servers.iter().map(|s| s.cur_conns.get()).sum();
        let queued: u32 = self
            .servers
            .iter()
            .map(|s| s.queued.load(Ordering::Relaxed))
            .sum();
        open + queued + self.queued.load(Ordering::Relaxed)
    }

    pub fn nbsrv(&self) -> usize {
        self.servers.iter().filter(|s| s.usable()).count()
    }

    /// HAProxy's `srv_is_up(BACKEND/SERVER)`: `None` when there is no such server.
    pub fn srv_is_up(&self, name: &str) -> Option<bool> {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .map(|s| s.usable())
    }

    /// Sets a server's user weight (0..=256); every worker's balancer uses it at its next pick.
    pub fn set_weight(&self, server: usize, weight: u32) {
        if let Some(s) = self.servers.get(server) {
            s.weight.store(weight.min(256), Ordering::Relaxed);
        }
    }

    /// The algorithm only takes the weights it started with (HAProxy's static algorithms:
    /// `static-rr` and map-based hashing), so a weight may only go to 0 or back.
    pub fn static_weights(&self) -> bool {
        match self.config.balance {
            Balance::StaticRr => true,
            Balance::Source
            | Balance::Uri { .. }
            | Balance::UrlParam { .. }
            | Balance::Hdr { .. } => self.config.hash_type.method == HashMethod::MapBased,
            _ => false,
        }
    }

    /// Sets and clears [`admin`] flags of a server, applying HAProxy's transitions: entering
    /// maintenance stops the server (health 0, checks paused); leaving it brings the server
    /// back UP at once with a health of `rise`, so one failed check takes it down again, and
    /// wakes its checker.
    pub fn change_admin(&self, server: usize, set: u8, clear: u8) -> AdminChange {
        let s = &self.servers[server];
        let before = s.admin.load(Ordering::Relaxed);
        let after = (before & !clear) | set;
        if before == after {
            return AdminChange::None;
        }
        s.admin.store(after, Ordering::Relaxed);
        let (was, is) = (before & admin::MAINT != 0, after & admin::MAINT != 0);
        let change = match (was, is) {
            (false, true) => {
                s.up.store(false, Ordering::Relaxed);
                s.stopping.store(false, Ordering::Relaxed);
                s.check.health.store(0, Ordering::Relaxed);
                AdminChange::EnteredMaint
            }
            (true, false) => {
                if s.check_enabled.load(Ordering::Relaxed) {
                    let rise = s.config.check.map_or(s.config.rise, |c| c.rise);
                    s.check.health.store(rise, Ordering::Relaxed);
                }
                s.up.store(true, Ordering::Relaxed);
                AdminChange::LeftMaint
            }
            _ => AdminChange::Drain,
        };
        s.changed();
        if change == AdminChange::LeftMaint {
            s.check_wake.notify_one();
        }
        change
    }

    /// `set server ... health up|stopping|down`: forces the operational state (health to its
    /// maximum, or 0 for down); running checks may change it again.
    pub fn force_health(&self, server: usize, up: bool, stopping: bool) {
        let s = &self.servers[server];
        let c = &s.config;
        let health = if up {
            c.check
                .map_or(c.rise + c.fall, |k| k.rise.max(1) + k.fall.max(1))
                .saturating_sub(1)
        } else {
            0
        };
        s.check.health.store(health, Ordering::Relaxed);
        s.stopping.store(up && stopping, Ordering::Relaxed);
        s.up.store(up, Ordering::Relaxed);
        s.changed();
    }

    /// `enable health` / `disable health`. Disabling freezes the operational state as it is;
    /// enabling resumes checks at once. `false` when the server has no `check`.
    pub fn set_checks(&self, server: usize, on: bool) -> bool {
        let s = &self.servers[server];
        if on && s.config.check.is_none() {
            return false;
        }
        if s.check_enabled.swap(on, Ordering::Relaxed) != on {
            s.check.generation.fetch_add(1, Ordering::Release);
            if on {
                s.check_wake.notify_one();
            }
        }
        true
    }

    /// Servers usable now, active and backup, as HAProxy counts them in its logs.
    pub fn usable_counts(&self) -> (usize, usize) {
        self.servers
            .iter()
            .filter(|s| s.usable())
            .fold((0, 0), |(a, b), s| {
                if s.config.backup {
                    (a, b + 1)
                } else {
                    (a + 1, b)
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbsrv_and_srv_is_up_follow_state() {
        let cfg = crate::config::load_str(
            "t.cfg",
            "defaults\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\nbackend b\n  server a 127.0.0.1:1\n  server m 127.0.0.1:2 disabled\n  server c 127.0.0.1:3\n",
        )
        .unwrap()
        .config;
        let be = Backend::new(cfg.backends[0].clone(), 1);
        assert_eq!(be.nbsrv(), 2);
        be.servers[2].up.store(false, Ordering::Relaxed);
        assert_eq!(be.nbsrv(), 1);
        assert_eq!(be.srv_is_up("a"), Some(true));
        assert_eq!(be.srv_is_up("m"), Some(false));
        assert_eq!(be.srv_is_up("c"), Some(false));
        assert_eq!(be.srv_is_up("zz"), None);
    }
}
