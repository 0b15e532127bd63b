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
//! - [`track`]: servers that track another (`server ... track`): the tracked server's state
//!   changes pushed down the chain, with their log lines.
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
pub mod table;
pub mod track;

pub use connect::{
    connect, connect_assigned, connect_to, pick, pick_queued, proxy_key, sni_of, Assigned,
    ClientAddrs, ConnectError, QueueSpot, ServerConn, ServerSlot, SniValues, Waiting, Watch,
};
pub use picker::{balance_key, sample_key, Picker};
pub use server::Outcome;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::config::model::{self, Balance, HashMethod};
use server::{admin, ServerState};
use table::ServerTable;

/// The tracking order of the next server added at run time with `track` (configured ones
/// are 0, ordered by their place in the file): see [`track::trackers`].
static NEXT_TRACK_SEQ: AtomicU64 = AtomicU64::new(1);

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
    pub servers: ServerTable,
    /// Bumped when the set of servers changes (`add server`, `del server`): each worker's
    /// picker rebuilds its tiers at its next pick.
    pub generation: AtomicU64,
    /// Workers counting connections (each new server's gauges have one line per worker).
    workers: usize,
    /// Woken when a connection to one of its servers closes, for sessions waiting on `maxconn`.
    slot_freed: Notify,
    /// Requests waiting for any server (the backend queue), for `show stat`.
    pub queued: AtomicU32,
    /// Most requests in the backend queue at once, ever (`qmax`).
    pub qmax: AtomicU32,
    /// Requests that left the backend queue with a server, ever (for `%bq`, as the servers'
    /// `queue_idx` for `%sq`).
    pub queue_idx: AtomicU32,
    /// Streams given to this backend per second over the last second (HAProxy's
    /// `be_sess_per_sec`: `be_sess_rate`, `rate` in `show stat`).
    sess_per_sec: crate::stick::freq::FreqCtr,
    /// The highest [`Self::sess_rate`] seen (`rate_max`).
    pub sps_max: AtomicU32,
    /// Streams given to this backend, ever (HAProxy's `be_counters.cum_conn`: `stot`).
    pub cum_sess: AtomicU64,
    /// Requests its own rules denied (`dreq`: HAProxy's `be_counters.denied_req`).
    pub denied_req: AtomicU64,
    /// Responses refused by `http-response deny` or `tcp-response content reject` (`dresp`).
    pub denied_resp: AtomicU64,
    /// Times it lost its last usable server (`chkdown`: HAProxy's `down_trans`).
    pub down_trans: AtomicU64,
    /// Picks that found no usable server, and requests that timed out in the backend's queue:
    /// connection failures of the backend's own, which `econ` adds to its servers' (HAProxy
    /// counts both in `failed_conns`).
    pub no_server: AtomicU64,
    /// Transfers of this backend that ended badly (`cli_abrt`, `srv_abrt`, `eresp`), its
    /// servers' included: HAProxy's `be_counters`, counted with the server's when there is one.
    pub aborts: server::Aborts,
    /// HTTP transactions that ended here with a status (`req_tot`, `hrsp_*`: counted at the
    /// end of the stream, as HAProxy's `be_counters.p.http`).
    pub http: crate::base::counter::HttpCounters,
    /// Bytes of the streams given to it (`bin`, `bout`).
    pub bytes: crate::base::counter::Bytes,
    /// Its streams' server connections established and reused, and their times (`connect`,
    /// `reuse`, `qtime`... `ttime_max`), its servers' together.
    pub streams: crate::base::counter::StreamStats,
    /// When the last stream was given to it, in ms since start plus one (0: never): `lastsess`.
    pub last_sess_ms: AtomicU64,
    /// Header and start-line rewrites that failed (`wrew`).
    pub failed_rewrites: AtomicU64,
    /// Most connections open to its servers at once, ever (`smax`).
    pub smax: AtomicU32,
    /// When it last lost its last usable server or got one back, in seconds since start
    /// (`lastchg`), and the seconds it spent without one before that (`downtime`).
    pub last_change_s: AtomicU64,
    pub down_time_s: AtomicU64,
    /// Some server has `send-proxy`, or no address or port of its own: sessions must learn the
    /// address the client connected to.
    send_proxy: AtomicBool,
    /// The round-robin position of each tier (active, backup), shared by every worker's picker
    /// so that the order is the process's, as in HAProxy.
    pub(super) rr_cursors: [crate::lb::Cursor; 2],
}

impl Backend {
    pub fn new(config: model::Backend, workers: usize) -> Self {
        let servers = ServerTable::new(
            config
                .servers
                .iter()
                .map(|s| ServerState::new(s, workers, false)),
        );
        Backend {
            send_proxy: AtomicBool::new(config.servers.iter().any(needs_local)),
            config,
            servers,
            slot_freed: Notify::new(),
            queued: AtomicU32::new(0),
            qmax: AtomicU32::new(0),
            queue_idx: AtomicU32::new(0),
            sess_per_sec: crate::stick::freq::FreqCtr::new(),
            sps_max: AtomicU32::new(0),
            cum_sess: AtomicU64::new(0),
            denied_req: AtomicU64::new(0),
            denied_resp: AtomicU64::new(0),
            down_trans: AtomicU64::new(0),
            no_server: AtomicU64::new(0),
            aborts: server::Aborts::default(),
            http: crate::base::counter::HttpCounters::new(workers),
            bytes: crate::base::counter::Bytes::new(workers),
            streams: crate::base::counter::StreamStats::new(workers),
            last_sess_ms: AtomicU64::new(0),
            smax: AtomicU32::new(0),
            failed_rewrites: AtomicU64::new(0),
            last_change_s: AtomicU64::new(0),
            down_time_s: AtomicU64::new(0),
            rr_cursors: Default::default(),
            generation: AtomicU64::new(0),
            workers,
        }
    }

    /// Counts a stream given to this backend (after `use_backend`), as HAProxy's
    /// `proxy_inc_be_ctr`: one atomic add, a rotation once a second.
    pub fn count_session(&self) {
        self.count_session_at(crate::base::clock::uptime_ms());
    }

    /// [`Backend::count_session`] at `now` (ms since start), read by the caller.
    pub fn count_session_at(&self, now: u64) {
        self.cum_sess.fetch_add(1, Ordering::Relaxed);
        let n = self.sess_per_sec.add(1000, now, 1);
        self.sps_max.fetch_max(n, Ordering::Relaxed);
        self.last_sess_ms.store(now + 1, Ordering::Relaxed);
    }

    /// A server connection a stream got from `server`: established, or `reused` (`connect`,
    /// `reuse` of the backend and of the server, as HAProxy's `connect_server` counts them).
    pub fn count_connection(&self, server: usize, reused: bool) {
        self.streams.count_connection(reused);
        if let Some(s) = self.servers.get(server) {
            s.streams.count_connection(reused);
        }
    }

    /// A response refused by `http-response deny` or `tcp-response content reject` from
    /// `server`: counted in the frontend's, the backend's and the server's `dresp`, as HAProxy
    /// counts it (the frontend's is the caller's).
    pub fn count_denied_resp(&self, server: Option<usize>) {
        self.denied_resp.fetch_add(1, Ordering::Relaxed);
        if let Some(s) = server {
            self.servers[s].denied_resp.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A transfer that ended badly (`kind`), with `server` when the stream had one: counted in
    /// the backend's and the server's counters, as HAProxy counts `cli_aborts`, `srv_aborts`
    /// and `failed_resp`. Called on error paths only.
    pub fn count_abort(&self, server: Option<usize>, kind: server::Abort) {
        self.aborts.count(kind);
        if let Some(s) = server.and_then(|s| self.servers.get(s)) {
            s.aborts.count(kind);
        }
    }

    /// Streams per second over the last second (`be_sess_rate`).
    pub fn sess_rate(&self) -> u32 {
        self.sess_per_sec
            .read(1000, crate::base::clock::uptime_ms())
    }

    /// Some server has `send-proxy`, or no address or port of its own: sessions must learn the
    /// address the client connected to.
    pub fn send_proxy(&self) -> bool {
        self.send_proxy.load(Ordering::Relaxed)
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
        self.servers.find(name).map(|i| self.servers[i].usable())
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
        self.change_admin_following(server, set, clear, true)
    }

    /// [`Self::change_admin`] for a server whose state may follow another's: leaving
    /// maintenance, it comes back UP only if `tracked_up` (the server it tracks is UP; true
    /// for a server that tracks none), as HAProxy's `srv_update_status` decides.
    pub fn change_admin_following(
        &self,
        server: usize,
        set: u8,
        clear: u8,
        tracked_up: bool,
    ) -> AdminChange {
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
                // HAProxy counts a running server going into maintenance as a transition
                // to DOWN (`chkdown`).
                if s.up.swap(false, Ordering::Relaxed) {
                    s.check.downs.fetch_add(1, Ordering::Relaxed);
                }
                s.stopping.store(false, Ordering::Relaxed);
                s.check.health.store(0, Ordering::Relaxed);
                AdminChange::EnteredMaint
            }
            (true, false) => {
                if s.check_enabled.load(Ordering::Relaxed) {
                    let rise = s.config.check.map_or(s.config.rise, |c| c.rise);
                    s.check.health.store(rise, Ordering::Relaxed);
                }
                s.up.store(tracked_up, Ordering::Relaxed);
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
        if !up && s.up.load(Ordering::Relaxed) && !s.in_maint() {
            s.check.downs.fetch_add(1, Ordering::Relaxed);
        }
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

    /// Whether `add server` may give this backend a server: HAProxy allows it only with a
    /// load-balancing algorithm that takes servers in and out at run time (not `static-rr` nor
    /// map-based hashing).
    pub fn supports_dynamic(&self) -> bool {
        !self.static_weights()
    }

    /// `add server`: appends `server` (its `id` chosen here), in maintenance, and has every
    /// worker's picker take it in. Returns its index, or HAProxy's reason for refusing it.
    /// Called by the stats socket, which runs its commands one at a time on the main thread:
    /// the name check and the append do not race with another `add server`.
    pub fn add_server(&self, mut server: model::Server) -> Result<usize, &'static str> {
        if self.servers.find(&server.name).is_some() {
            return Err("Already exists a server with the same name in backend.");
        }
        // As HAProxy: the smallest id no server has.
        let used: Vec<u32> = self.servers.live().map(|(_, s)| s.config.id).collect();
        server.id = (1..).find(|id| !used.contains(id)).unwrap_or(u32::MAX);
        let local = needs_local(&server);
        let mut state = ServerState::new(&server, self.workers, true);
        if server.track.is_some() {
            state.track_seq = NEXT_TRACK_SEQ.fetch_add(1, Ordering::Relaxed);
        }
        state
            .check
            .last_change_s
            .store(crate::base::clock::uptime_secs(), Ordering::Relaxed);
        let i = self
            .servers
            .push(state)
            .ok_or("No room left for another server in this backend.")?;
        if local {
            self.send_proxy.store(true, Ordering::Relaxed);
        }
        self.generation.fetch_add(1, Ordering::Release);
        Ok(i)
    }

    /// `del server`: removes server `i` for good, with HAProxy's conditions and texts: it must
    /// be in maintenance, with no connection nor queued request, and nothing in the
    /// configuration may point to it. Its checker stops at its next round. A worker that picked
    /// the server just before it entered maintenance may still complete that one connection:
    /// the slot stays valid (HAProxy isolates its threads instead).
    pub fn del_server(&self, i: usize) -> Result<(), &'static str> {
        let s = &self.servers[i];
        if s.pinned.load(Ordering::Relaxed) {
            return Err("This server cannot be removed at runtime due to other configuration elements pointing to it.");
        }
        if !s.in_maint() {
            return Err("Only servers in maintenance mode can be deleted.");
        }
        if s.cur_conns.get() > 0 || s.queued.load(Ordering::Relaxed) > 0 {
            return Err("Server still has connections attached to it, cannot remove it.");
        }
        s.deleted.store(true, Ordering::Relaxed);
        s.check_enabled.store(false, Ordering::Relaxed);
        s.agent_enabled.store(false, Ordering::Relaxed);
        s.check.generation.fetch_add(1, Ordering::Release);
        s.check_wake.notify_one();
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Servers taking balanced traffic now, active and backup, as HAProxy counts them in its
    /// logs and `nbsrv` (`srv_act`, `srv_bck`): UP, out of maintenance, with a weight (not
    /// draining nor stopping).
    pub fn usable_counts(&self) -> (usize, usize) {
        self.servers
            .iter()
            .filter(|s| s.usable() && s.lb_weight() > 0)
            .fold((0, 0), |(a, b), s| {
                if s.config.backup {
                    (a, b + 1)
                } else {
                    (a + 1, b)
                }
            })
    }
}

/// A server without an address or a port takes the client's destination's, and `send-proxy`
/// sends it: the session must learn the local address.
fn needs_local(s: &model::Server) -> bool {
    s.send_proxy
        || s.send_proxy_v2
        || (s.unix.is_none() && (s.addr.port() == 0 || s.addr.ip().is_unspecified()))
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

    #[test]
    fn add_and_del_server_follow_haproxy() {
        let cfg = crate::config::load_str(
            "t.cfg",
            "defaults\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\nbackend b\n  use-server p if { always_false }\n  server p 127.0.0.1:1\n  server a 127.0.0.1:2\n",
        )
        .unwrap()
        .config;
        let be = Backend::new(cfg.backends[0].clone(), 1);
        let mut picker = Picker::new(&be);
        let mut new = cfg.backends[0].servers[1].clone();
        new.name = "n".into();
        assert_eq!(be.add_server(new.clone()), Ok(2));
        assert_eq!(
            be.add_server(new.clone()),
            Err("Already exists a server with the same name in backend.")
        );
        assert_eq!(be.servers[2].config.id, 3);
        // In maintenance: never picked until enabled, then picked after the rebuild.
        be.change_admin(1, admin::FMAINT, 0);
        assert_eq!(picker.pick(&be, None, None), Some(0));
        be.change_admin(0, admin::FMAINT, 0);
        assert_eq!(picker.pick(&be, None, None), None);
        be.change_admin(2, 0, admin::FMAINT);
        assert_eq!(picker.pick(&be, None, None), Some(2));
        assert_eq!(
            be.del_server(0),
            Err("This server cannot be removed at runtime due to other configuration elements pointing to it.")
        );
        assert_eq!(
            be.del_server(2),
            Err("Only servers in maintenance mode can be deleted.")
        );
        be.change_admin(2, admin::FMAINT, 0);
        assert_eq!(be.del_server(1), Ok(()));
        assert_eq!(be.servers.find("a"), None);
        // The smallest free id goes to the next server.
        new.name = "m".into();
        assert_eq!(be.add_server(new), Ok(3));
        assert_eq!(be.servers[3].config.id, 2);
    }
}
