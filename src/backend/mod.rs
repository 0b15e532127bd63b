//! Backends at run time: server state shared by all workers, server choice, and connecting to a
//! server with retries and redispatch.
//!
//! Split by who owns what:
//! - [`Backend`] and [`ServerState`] are built once from the model and shared by every worker
//!   (behind an `Arc`). What changes at run time (effective weight, UP/DOWN, connection count)
//!   lives in atomics, so reading it takes no lock.
//! - [`Picker`] is the per-worker balancer state (round-robin scores): each worker owns its own,
//!   so picking a server never contends with another thread.
//! - [`connect`] runs HAProxy's connection loop: pick, connect within `timeout connect`, and on a
//!   refused or timed-out attempt retry up to `retries` times, on another server when `option
//!   redispatch` says so, otherwise on the same one after HAProxy's turn-around delay.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;

use crate::base::atomic_addr::AtomicSocketAddr;
use crate::base::counter::Gauge;
use crate::config::model::{self, Balance, HashFunction, HashMethod};
use crate::lb::chash::ConsistentHash;
use crate::lb::maglev::Maglev;
use crate::lb::map::MapHash;
use crate::lb::weighted::{ServerSet, ServerSpec};
use crate::lb::{SmoothRoundRobin, StaticRoundRobin};

/// A server's administrative flags, with HAProxy's values (`srv_admin_state` in `show servers
/// state`). Only the operator changes them; health checks never do.
pub mod check;

pub mod admin {
    /// Forced maintenance (`disable server`, `set server ... state maint`): no traffic at all,
    /// health checks paused.
    pub const FMAINT: u8 = 0x01;
    /// Declared `disabled` in the configuration. Only a memory of it: the server starts in
    /// forced maintenance too, and `enable server` clears that but keeps this flag.
    pub const CMAINT: u8 = 0x04;
    /// Forced drain (`set server ... state drain`): no new balanced traffic, weight kept.
    pub const FDRAIN: u8 = 0x08;
}

/// Run-time state of one server.
#[derive(Debug)]
pub struct ServerState {
    pub config: model::Server,
    /// The user weight (HAProxy's `uweight`: configured, or set with `set weight`); changing it
    /// changes the shares on every worker's next pick.
    pub weight: AtomicU32,
    /// `slowstart` ramp, in percent of [`Self::weight`] (100 when not ramping).
    pub ramp_pct: AtomicU32,
    /// Operational state: false once health checks (or an operator) mark it DOWN, and while in
    /// maintenance.
    pub up: AtomicBool,
    /// Operationally stopping (`set server ... health stopping`, HAProxy's NOLB): UP, but
    /// given no new balanced traffic.
    pub stopping: AtomicBool,
    /// [`admin`] flags.
    pub admin: AtomicU8,
    /// Where new connections go (`set server addr` changes it at run time).
    pub addr: AtomicSocketAddr,
    /// Health checks administratively enabled (`enable health` / `disable health`); false for
    /// a server without `check`.
    pub check_enabled: AtomicBool,
    /// Wakes the server's checker at once (leaving maintenance, `enable health`).
    pub check_wake: Notify,
    /// Connections currently open to this server, all workers together (one line per worker,
    /// see [`crate::base::counter`]).
    pub cur_conns: Gauge,
    /// Connections ever established (HAProxy's `stot`).
    pub total_conns: AtomicU64,
    /// Failed connection attempts (HAProxy's `econ`).
    pub conn_errors: AtomicU64,
    /// Last health-check result, for `show stat`: written by the one checker of this server.
    pub check: CheckStats,
    /// Consecutive errors seen on live traffic (`observe`).
    pub live_errors: AtomicU32,
    /// A passive-health verdict waiting for the checker (`on-error`): 0 none, else
    /// [`crate::backend::check::PASSIVE_FASTINTER`] and the like.
    pub passive: std::sync::atomic::AtomicU8,
    /// Requests waiting in this server's queue (`maxconn` reached), for `show stat`.
    pub queued: AtomicU32,
    /// Consecutive live errors counted by `outlier-ejection`.
    pub outlier_errors: AtomicU32,
    /// While ejected as an outlier: until when, in ms since start ([`crate::runtime::stats::uptime_ms`]);
    /// 0 when not ejected.
    pub ejected_until_ms: AtomicU64,
}

/// Health-check figures of a server (`show stat` columns check_status, check_code,
/// check_duration, chkfail, chkdown, lastchg).
#[derive(Debug, Default)]
pub struct CheckStats {
    /// Index into [`CHECK_STATUS`]; 0 until the first check.
    pub status: std::sync::atomic::AtomicU8,
    /// HTTP status of the last layer-7 check, 0 if none.
    pub code: std::sync::atomic::AtomicU16,
    /// Duration of the last check, ms.
    pub duration_ms: AtomicU32,
    /// Failed checks while UP.
    pub failures: AtomicU64,
    /// UP to DOWN transitions.
    pub downs: AtomicU64,
    /// When the state last changed, as seconds since the process started.
    pub last_change_s: AtomicU64,
    /// HAProxy's health counter, 0 to `rise + fall - 1`: UP from `rise` on. A server starts
    /// at `rise` ("up, but will fall down at first failure" as HAProxy says).
    pub health: AtomicU32,
    /// Bumped when someone other than the checker changes the state (operator, passive health),
    /// so that the checker starts again from the shared state.
    pub generation: AtomicU32,
}

/// HAProxy's check status words, indexed by [`CheckStats::status`].
pub const CHECK_STATUS: [&str; 8] = [
    "INI", "L4OK", "L4TOUT", "L4CON", "L7OK", "L7TOUT", "L7RSP", "L7STS",
];

/// HAProxy's numbers for [`CHECK_STATUS`] (`enum healthcheck_status`: `srv_check_status` in
/// `show servers state`), same order.
pub const CHECK_STATUS_CODE: [u8; 8] = [1, 6, 7, 8, 15, 12, 13, 17];

impl CheckStats {
    /// HAProxy's `srv_check_result`: 0 before any check, 3 passed, 2 failed.
    pub fn result_code(&self) -> u8 {
        match CHECK_STATUS.get(usize::from(self.status.load(Ordering::Relaxed))) {
            Some(&"INI") | None => 0,
            Some(&"L4OK") | Some(&"L7OK") => 3,
            Some(_) => 2,
        }
    }
}

impl ServerState {
    /// Whether `outlier-ejection` has this server out now (ends the ejection once it expired;
    /// reads the clock only for an ejected server).
    pub fn is_ejected(&self) -> bool {
        let until = self.ejected_until_ms.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        if crate::runtime::stats::uptime_ms() < until {
            return true;
        }
        self.ejected_until_ms.store(0, Ordering::Relaxed);
        false
    }

    /// In forced maintenance.
    pub fn in_maint(&self) -> bool {
        self.admin.load(Ordering::Relaxed) & admin::FMAINT != 0
    }

    /// Draining: no new balanced traffic.
    pub fn draining(&self) -> bool {
        self.admin.load(Ordering::Relaxed) & admin::FDRAIN != 0
    }

    /// UP and not in maintenance (a draining server is usable, with no weight).
    pub fn usable(&self) -> bool {
        self.up.load(Ordering::Relaxed) && !self.in_maint()
    }

    /// The user weight scaled by the `slowstart` ramp (HAProxy's effective weight, before
    /// drain): what `show stat` reports.
    pub fn effective_weight(&self) -> u32 {
        let w = self.weight.load(Ordering::Relaxed);
        let pct = self.ramp_pct.load(Ordering::Relaxed);
        if pct >= 100 {
            w
        } else {
            (w * pct).div_ceil(100)
        }
    }

    /// The weight balancing uses: the effective weight, 0 while draining or stopping.
    pub fn lb_weight(&self) -> u32 {
        if self.draining() || self.stopping.load(Ordering::Relaxed) {
            0
        } else {
            self.effective_weight()
        }
    }

    /// Health checks are running: configured, enabled, and not paused by maintenance.
    pub fn checking(&self) -> bool {
        self.check_enabled.load(Ordering::Relaxed) && !self.in_maint()
    }

    /// Records a state change made from outside the checker, for `lastchg` and the checker.
    fn changed(&self) {
        self.check
            .last_change_s
            .store(crate::runtime::stats::uptime_secs(), Ordering::Relaxed);
        self.check.generation.fetch_add(1, Ordering::Release);
    }

    /// The weight the balancer sees now: 0 when the server must not get a new connection.
    fn pick_weight(&self) -> u32 {
        if !self.usable() {
            return 0;
        }
        if self.is_ejected() {
            return 0;
        }
        if let Some(max) = self.config.maxconn {
            if self.cur_conns.get() >= max {
                return 0;
            }
        }
        self.lb_weight()
    }
}

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
    /// Some server has `send-proxy`: sessions must learn the address the client connected to.
    pub send_proxy: bool,
}

/// Why no server connection could be made.
#[derive(Debug)]
pub enum ConnectError {
    /// No server is usable (all down, disabled, drained, or full past `timeout queue`).
    NoServer,
    /// Every usable server stayed full for `timeout queue`.
    QueueTimeout,
    /// Every attempt failed; the last error is kept.
    Failed {
        server: String,
        attempts: u32,
        last: io::Error,
    },
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::NoServer => f.write_str("no server available"),
            ConnectError::QueueTimeout => f.write_str("timed out in the queue"),
            ConnectError::Failed {
                server,
                attempts,
                last,
            } => write!(
                f,
                "connection to server '{server}' failed after {attempts} attempt(s): {last}"
            ),
        }
    }
}

/// One unit of a server's connection count, released when dropped (also when a connect in
/// flight is abandoned), so `maxconn` stays exact.
pub struct ServerSlot<'a> {
    backend: &'a Backend,
    pub server: usize,
}

impl<'a> ServerSlot<'a> {
    /// Counts one more connection on `server` until the slot is dropped, unless that would
    /// exceed the server's `maxconn` (the count is checked and raised in one atomic step, so
    /// workers racing for the last slot cannot both get it).
    pub fn try_take(backend: &'a Backend, server: usize) -> Option<Self> {
        let s = &backend.servers[server];
        match s.config.maxconn {
            None => s.cur_conns.incr(),
            Some(max) => {
                if !s.cur_conns.incr_shared_below(max) {
                    return None;
                }
            }
        }
        Some(ServerSlot { backend, server })
    }

    pub fn state(&self) -> &ServerState {
        &self.backend.servers[self.server]
    }

    pub fn backend(&self) -> &'a Backend {
        self.backend
    }
}

impl Drop for ServerSlot<'_> {
    fn drop(&mut self) {
        let s = &self.backend.servers[self.server];
        if s.config.maxconn.is_some() {
            s.cur_conns.decr_shared();
            self.backend.slot_freed.notify_waiters();
        } else {
            s.cur_conns.decr();
        }
    }
}

/// An established connection to a server.
pub struct ServerConn<'a> {
    pub stream: TcpStream,
    pub slot: ServerSlot<'a>,
    /// Connection attempts that failed before this one succeeded.
    pub retries: u32,
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
                up: AtomicBool::new(!s.disabled),
                stopping: AtomicBool::new(false),
                admin: AtomicU8::new(if s.disabled {
                    admin::CMAINT | admin::FMAINT
                } else {
                    0
                }),
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
                queued: AtomicU32::new(0),
                outlier_errors: AtomicU32::new(0),
                ejected_until_ms: AtomicU64::new(0),
                config: s.clone(),
            })
            .collect();
        Backend {
            send_proxy: config.servers.iter().any(|s| s.send_proxy),
            config,
            servers,
            slot_freed: Notify::new(),
            queued: AtomicU32::new(0),
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
        let (was, is) = (before & admin::FMAINT != 0, after & admin::FMAINT != 0);
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

/// Per-worker balancer state for one backend: one object per tier (active, backup).
#[derive(Debug)]
pub struct Picker {
    tiers: [Tier; 2],
}

#[derive(Debug)]
struct Tier {
    /// Indices into `Backend::servers` of the servers in this tier.
    members: Vec<usize>,
    algo: Algo,
}

#[derive(Debug)]
enum Algo {
    Smooth(SmoothRoundRobin),
    Static(StaticRoundRobin),
    /// Rotating start so that ties are shared.
    LeastConn {
        next: usize,
    },
    First,
    /// Power of `draws` choices; `rng` is this worker's xorshift state.
    Random {
        draws: u32,
        rng: u64,
    },
    /// Hashing of the caller's key into a table; round-robin when there is no key.
    Hashed {
        table: HashTable,
        rr: SmoothRoundRobin,
    },
}

#[derive(Debug)]
enum HashTable {
    Map(MapHash),
    Consistent(ConsistentHash),
    Maglev(Maglev),
}

impl HashTable {
    fn servers(&self) -> &ServerSet {
        match self {
            HashTable::Map(t) => t.servers(),
            HashTable::Consistent(t) => t.servers(),
            HashTable::Maglev(t) => t.servers(),
        }
    }

    /// Brings the table's view of server k up to date with the shared state (cheap when
    /// nothing changed: a comparison per server).
    fn sync(&mut self, k: usize, up: bool, weight: u32) {
        let (was_up, was_w) = (self.servers().is_up(k), self.servers().weight(k));
        if was_up != up {
            match self {
                HashTable::Map(t) => t.set_usable(k, up),
                HashTable::Consistent(t) => t.set_usable(k, up),
                HashTable::Maglev(t) => t.set_usable(k, up),
            }
        }
        if was_w != weight {
            match self {
                HashTable::Map(t) => t.set_weight(k, weight),
                HashTable::Consistent(t) => t.set_weight(k, weight),
                HashTable::Maglev(t) => t.set_weight(k, weight),
            }
        }
    }

    fn pick(&mut self, hash: Option<u32>, avoid: Option<usize>) -> Option<Option<usize>> {
        Some(match (self, hash) {
            (HashTable::Map(t), Some(h)) => t.pick(h, avoid),
            (HashTable::Map(t), None) => t.pick_rr(avoid),
            (HashTable::Consistent(t), Some(h)) => t.pick(h, avoid),
            (HashTable::Consistent(t), None) => t.pick_rr(avoid),
            (HashTable::Maglev(t), Some(h)) => t.pick(h, avoid),
            // No key and no round-robin of its own: the caller falls back.
            (HashTable::Maglev(_), None) => return None,
        })
    }
}

impl Picker {
    pub fn new(backend: &Backend) -> Self {
        let tier = |backup: bool| {
            let members: Vec<usize> = (0..backend.servers.len())
                .filter(|&i| backend.servers[i].config.backup == backup)
                .collect();
            let algo = match &backend.config.balance {
                Balance::RoundRobin => Algo::Smooth(SmoothRoundRobin::new(members.len())),
                Balance::StaticRr => {
                    let w: Vec<u32> = members
                        .iter()
                        .map(|&i| backend.servers[i].config.weight)
                        .collect();
                    Algo::Static(StaticRoundRobin::new(&w))
                }
                Balance::LeastConn => Algo::LeastConn { next: 0 },
                Balance::First => Algo::First,
                Balance::Random { draws } => Algo::Random {
                    draws: *draws,
                    rng: random_seed(),
                },
                Balance::Source
                | Balance::Uri { .. }
                | Balance::UrlParam { .. }
                | Balance::Hdr { .. } => {
                    let specs: Vec<ServerSpec> = members
                        .iter()
                        .map(|&i| {
                            let c = &backend.servers[i].config;
                            ServerSpec::new(&c.name, c.weight).with_id(c.id)
                        })
                        .collect();
                    let table = match backend.config.hash_type.method {
                        HashMethod::MapBased => HashTable::Map(MapHash::new(&specs)),
                        HashMethod::Consistent => {
                            HashTable::Consistent(ConsistentHash::new(&specs))
                        }
                        HashMethod::Maglev => HashTable::Maglev(Maglev::new(&specs)),
                    };
                    Algo::Hashed {
                        table,
                        rr: SmoothRoundRobin::new(members.len()),
                    }
                }
            };
            Tier { members, algo }
        };
        Picker {
            tiers: [tier(false), tier(true)],
        }
    }

    /// Picks a server: active servers first, backup ones only when no active one is usable.
    /// `avoid` is a server that just failed; it is skipped unless it is the only usable one.
    /// `key` is the hash of what the backend balances on (`source`, `uri`), computed by the
    /// caller.
    pub fn pick(
        &mut self,
        backend: &Backend,
        avoid: Option<usize>,
        key: Option<u32>,
    ) -> Option<usize> {
        for (t, tier) in self.tiers.iter_mut().enumerate() {
            // Without `option allbackups`, HAProxy sends everything to the first usable backup
            // server (in declaration order), the next one only if it fails.
            if t == 1 && !backend.config.options.allbackups {
                let usable = |i: &usize| backend.servers[*i].pick_weight() > 0;
                return tier
                    .members
                    .iter()
                    .copied()
                    .filter(usable)
                    .find(|&i| Some(i) != avoid)
                    .or_else(|| tier.members.iter().copied().find(usable));
            }
            for allow_avoided in [false, true] {
                let members = &tier.members;
                let weight = |k: usize| {
                    let i = members[k];
                    if !allow_avoided && Some(i) == avoid {
                        0
                    } else {
                        backend.servers[i].pick_weight()
                    }
                };
                let conns = |k: usize| backend.servers[members[k]].cur_conns.get();
                let n = members.len();
                let picked = match &mut tier.algo {
                    Algo::Smooth(rr) => rr.pick(weight),
                    Algo::Static(rr) => rr.pick(|k| weight(k) > 0),
                    Algo::LeastConn { next } => {
                        *next = next.wrapping_add(1);
                        crate::lb::leastconn::least_conn(n, *next % n.max(1), weight, conns)
                    }
                    Algo::First => crate::lb::leastconn::first(
                        n,
                        |k| weight(k) > 0,
                        conns,
                        |k| backend.servers[members[k]].config.maxconn,
                    ),
                    Algo::Random { draws, rng } => {
                        crate::lb::random::pick(n, *draws, rng, weight, conns)
                    }
                    Algo::Hashed { table, rr } => {
                        for (k, &i) in members.iter().enumerate() {
                            let s = &backend.servers[i];
                            table.sync(k, s.usable(), s.lb_weight());
                        }
                        let avoid_k = if allow_avoided {
                            None
                        } else {
                            avoid.and_then(|a| members.iter().position(|&i| i == a))
                        };
                        match table.pick(key, avoid_k) {
                            Some(p) => p,
                            None => rr.pick(weight),
                        }
                    }
                };
                if let Some(k) = picked {
                    return Some(members[k]);
                }
                if avoid.is_none() {
                    break;
                }
            }
        }
        None
    }
}

/// A distinct non-zero seed for each worker's random balancer.
fn random_seed() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ SEQ.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)) | 1
}

/// Whether retry number `retry` (1-based) of `retries` goes to another server, per
/// `option redispatch [interval]`: positive P redispatches every P-th retry, negative N the
/// N-th retry before the last one and after (-1: the last retry only).
fn redispatches(interval: Option<i32>, retry: u32, retries: u32) -> bool {
    match interval {
        None | Some(0) => false,
        Some(p) if p > 0 => retry % (p as u32) == 0,
        Some(n) => i64::from(retry) >= i64::from(retries) + 1 + i64::from(n),
    }
}

/// The hash a backend balances on, as HAProxy computes it: `balance source` folds the client
/// address (with `avalanche` if set); `balance uri` hashes the chosen part of the request target
/// with the `hash-type` function. `None` for other algorithms, or a target with no such part.
/// `header(name)` gives a request header's value (HTTP mode).
pub fn balance_key<'r>(
    config: &model::Backend,
    client: std::net::IpAddr,
    target: Option<&'r [u8]>,
    header: impl Fn(&str) -> Option<&'r [u8]>,
) -> Option<u32> {
    use crate::lb::{hash, key};
    let t = config.hash_type;
    let f = match t.function {
        HashFunction::Sdbm => hash::HashFn::Sdbm,
        HashFunction::Djb2 => hash::HashFn::Djb2,
        HashFunction::Wt6 => hash::HashFn::Wt6,
        HashFunction::Crc32 => hash::HashFn::Crc32,
        HashFunction::None => hash::HashFn::None,
    };
    let k = match &config.balance {
        Balance::Source => return Some(key::source_hash(client, t.avalanche)),
        Balance::Uri {
            whole,
            path_only,
            len,
            depth,
        } => {
            let opts = key::UriOptions {
                whole: *whole,
                path_only: *path_only,
                len: len.map_or(0, |l| l as usize),
                depth: depth.map_or(0, |d| d as usize),
            };
            key::uri_key(target?, &opts)?
        }
        Balance::UrlParam { name } => key::url_param(target?, name.as_bytes())?,
        Balance::Hdr {
            name,
            use_domain_only,
        } => {
            let v = header(name)?;
            if *use_domain_only {
                key::domain_only(v)
            } else {
                v
            }
        }
        _ => return None,
    };
    Some(hash::hash(f, k, t.avalanche))
}

/// What live traffic said about a server, for passive health (`observe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The connection was established.
    Layer4Ok,
    /// The connection failed (refused, timed out).
    Layer4Error,
    /// A valid HTTP response that is not a server error.
    Layer7Ok,
    /// A 5xx response (but 501 and 505).
    Layer7Error,
}

/// Where the client connection came from and arrived, for `send-proxy`.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddrs {
    pub peer: SocketAddr,
    /// Learnt (one `getsockname`) only when the backend has [`Backend::send_proxy`].
    pub local: Option<SocketAddr>,
}

impl ClientAddrs {
    /// The addresses of a client connection from `peer`, as `backend` needs them: the local
    /// one (a system call) only for the PROXY protocol.
    pub fn of(
        local_addr: impl FnOnce() -> std::io::Result<SocketAddr>,
        peer: SocketAddr,
        backend: &Backend,
    ) -> Self {
        ClientAddrs {
            peer,
            local: backend.send_proxy.then(|| local_addr().ok()).flatten(),
        }
    }
}

/// Connects to a server of `backend`, following HAProxy's retry and redispatch rules.
pub async fn connect<'a>(
    backend: &'a Backend,
    picker: &std::cell::RefCell<Picker>,
    client: ClientAddrs,
    key: Option<u32>,
) -> Result<ServerConn<'a>, ConnectError> {
    let first = pick(backend, picker, key).await?;
    connect_to(backend, picker, client, first).await
}

/// Picks a server for a new request, waiting (up to `timeout queue`) when every usable server
/// is at its `maxconn`.
pub async fn pick(
    backend: &Backend,
    picker: &std::cell::RefCell<Picker>,
    key: Option<u32>,
) -> Result<usize, ConnectError> {
    pick_or_wait(backend, picker, None, key).await
}

/// Like [`connect`], with the first attempt on `first` (already chosen by the balancer).
pub async fn connect_to<'a>(
    backend: &'a Backend,
    picker: &std::cell::RefCell<Picker>,
    client: ClientAddrs,
    first: usize,
) -> Result<ServerConn<'a>, ConnectError> {
    let cfg = &backend.config;
    let connect_timeout = cfg.timeouts.connect;
    let mut server = first;
    let mut attempt = 0u32;
    loop {
        let slot = match ServerSlot::try_take(backend, server) {
            Some(slot) => slot,
            None => wait_for_slot(backend, server).await?,
        };
        let s = slot.state();
        match connect_once(s, connect_timeout, client).await {
            Ok(stream) => {
                s.total_conns.fetch_add(1, Ordering::Relaxed);
                crate::backend::check::observe(backend, server, Outcome::Layer4Ok);
                return Ok(ServerConn {
                    stream,
                    slot,
                    retries: attempt,
                });
            }
            Err(e) => {
                s.conn_errors.fetch_add(1, Ordering::Relaxed);
                crate::backend::check::observe(backend, server, Outcome::Layer4Error);
                let retries = if cfg.retry_on.conn_failure {
                    cfg.retries
                } else {
                    0
                };
                if attempt >= retries {
                    return Err(ConnectError::Failed {
                        server: s.config.name.clone(),
                        attempts: attempt + 1,
                        last: e,
                    });
                }
                drop(slot);
                attempt += 1;
                // As HAProxy does, a round-robin backend with `option redispatch` moves a failed
                // attempt to another server at once, whatever the interval: the turn-around
                // pause only helps when the same server is tried again.
                let immediate = cfg.redispatch.is_some()
                    && matches!(cfg.balance, Balance::RoundRobin | Balance::StaticRr);
                if immediate || redispatches(cfg.redispatch, attempt, cfg.retries) {
                    server = pick_or_wait(backend, picker, Some(server), None).await?;
                } else {
                    // HAProxy's turn-around: give a refusing server a moment, bounded by the
                    // connect timeout.
                    let pause = connect_timeout
                        .map_or(Duration::from_secs(1), |t| t.min(Duration::from_secs(1)));
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

/// Picks a server, waiting up to `timeout queue` (else `timeout connect`) when every usable
/// server is at its `maxconn`.
async fn pick_or_wait(
    backend: &Backend,
    picker: &std::cell::RefCell<Picker>,
    avoid: Option<usize>,
    key: Option<u32>,
) -> Result<usize, ConnectError> {
    if let Some(i) = picker.borrow_mut().pick(backend, avoid, key) {
        return Ok(i);
    }
    let any_limited = backend
        .servers
        .iter()
        .any(|s| s.config.maxconn.is_some() && s.usable());
    if !any_limited {
        return Err(ConnectError::NoServer);
    }
    queue_wait(backend, &backend.queued, || {
        picker.borrow_mut().pick(backend, avoid, key)
    })
    .await
}

/// The per-server queue: waits (up to `timeout queue`, else `timeout connect`) for a slot
/// under `server`'s `maxconn`. Hash-based algorithms land here when their server is full, as
/// in HAProxy, instead of sending the key elsewhere.
async fn wait_for_slot(backend: &Backend, server: usize) -> Result<ServerSlot<'_>, ConnectError> {
    queue_wait(backend, &backend.servers[server].queued, || {
        ServerSlot::try_take(backend, server)
    })
    .await
}

/// Waits in a queue (counted in `queued`) until `attempt` succeeds, retrying each time a server
/// connection of the backend closes, for at most `timeout queue` (else `timeout connect`).
async fn queue_wait<T>(
    backend: &Backend,
    queued: &AtomicU32,
    mut attempt: impl FnMut() -> Option<T>,
) -> Result<T, ConnectError> {
    let _queued = Queued::enter(queued);
    let wait = backend
        .config
        .timeouts
        .queue
        .or(backend.config.timeouts.connect);
    let deadline = wait.map(|w| tokio::time::Instant::now() + w);
    loop {
        let freed = backend.slot_freed.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        if let Some(found) = attempt() {
            return Ok(found);
        }
        match deadline {
            Some(d) => {
                if tokio::time::timeout_at(d, freed).await.is_err() {
                    return Err(ConnectError::QueueTimeout);
                }
            }
            None => freed.await,
        }
    }
}

/// One request waiting in a queue, counted for `show stat` (`qcur`) while it waits.
struct Queued<'a>(&'a AtomicU32);

impl<'a> Queued<'a> {
    fn enter(counter: &'a AtomicU32) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Queued(counter)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn connect_once(
    server: &ServerState,
    timeout: Option<Duration>,
    client: ClientAddrs,
) -> io::Result<TcpStream> {
    let addr = server.addr.load();
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_nodelay(true)?;
    let fut = socket.connect(addr);
    let mut stream = match timeout {
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))??,
        None => fut.await?,
    };
    if server.config.send_proxy {
        let mut line = [0u8; 108];
        let local = client.local.ok_or_else(|| {
            io::Error::other("send-proxy: the client connection's local address is unknown")
        })?;
        let n = proxy_v1_header(&mut line, client.peer, local);
        stream.write_all(&line[..n]).await?;
    }
    Ok(stream)
}

/// Writes a PROXY protocol v1 header for a connection from `src` to `dst` into `out` (108
/// bytes always suffice) and returns its length.
pub fn proxy_v1_header(out: &mut [u8; 108], src: SocketAddr, dst: SocketAddr) -> usize {
    use std::io::Write;
    let mut cur = io::Cursor::new(&mut out[..]);
    let family = match (src, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => "TCP4",
        (SocketAddr::V6(_), SocketAddr::V6(_)) => "TCP6",
        _ => "UNKNOWN",
    };
    let r = if family == "UNKNOWN" {
        write!(cur, "PROXY UNKNOWN\r\n")
    } else {
        write!(
            cur,
            "PROXY {family} {} {} {} {}\r\n",
            src.ip(),
            dst.ip(),
            src.port(),
            dst.port()
        )
    };
    debug_assert!(r.is_ok(), "a PROXY v1 line is at most 107 bytes");
    cur.position() as usize
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
    fn redispatch_interval_follows_haproxy() {
        // default -1: only the last retry.
        let on: Vec<_> = (1..=3).map(|r| redispatches(Some(-1), r, 3)).collect();
        assert_eq!(on, [false, false, true]);
        let on: Vec<_> = (1..=3).map(|r| redispatches(Some(1), r, 3)).collect();
        assert_eq!(on, [true, true, true]);
        let on: Vec<_> = (1..=4).map(|r| redispatches(Some(2), r, 4)).collect();
        assert_eq!(on, [false, true, false, true]);
        assert!(!redispatches(None, 3, 3));
    }

    #[test]
    fn proxy_v1_lines() {
        let mut buf = [0u8; 108];
        let n = proxy_v1_header(
            &mut buf,
            "127.0.0.1:4000".parse().unwrap(),
            "127.0.0.2:80".parse().unwrap(),
        );
        assert_eq!(&buf[..n], b"PROXY TCP4 127.0.0.1 127.0.0.2 4000 80\r\n");
        let n = proxy_v1_header(
            &mut buf,
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
                .parse()
                .unwrap(),
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
                .parse()
                .unwrap(),
        );
        assert_eq!(n, 104);
        let n = proxy_v1_header(
            &mut buf,
            "127.0.0.1:1".parse().unwrap(),
            "[::1]:2".parse().unwrap(),
        );
        assert_eq!(&buf[..n], b"PROXY UNKNOWN\r\n");
    }
}
