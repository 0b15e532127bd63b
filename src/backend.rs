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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;

use crate::config::model::{self, Balance, HashFunction, HashMethod};
use crate::counter::Gauge;
use crate::lb::chash::ConsistentHash;
use crate::lb::maglev::Maglev;
use crate::lb::map::MapHash;
use crate::lb::weighted::{ServerSet, ServerSpec};
use crate::lb::{SmoothRoundRobin, StaticRoundRobin};

/// Run-time state of one server.
#[derive(Debug)]
pub struct ServerState {
    pub config: model::Server,
    /// Effective weight; changing it changes round-robin shares on the next pick.
    pub weight: AtomicU32,
    /// Operational state: false once health checks (or an operator) mark it DOWN.
    pub up: AtomicBool,
    /// Connections currently open to this server, all workers together (one line per worker,
    /// see [`crate::counter`]).
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
    /// [`crate::check::PASSIVE_FASTINTER`] and the like.
    pub passive: std::sync::atomic::AtomicU8,
    /// Requests waiting in this server's queue (`maxconn` reached), for `show stat`.
    pub queued: AtomicU32,
    /// Consecutive live errors counted by `outlier-ejection`.
    pub outlier_errors: AtomicU32,
    /// While ejected as an outlier: until when, in ms since start ([`crate::stats::uptime_ms`]);
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
}

/// HAProxy's check status words, indexed by [`CheckStats::status`].
pub const CHECK_STATUS: [&str; 8] = [
    "INI", "L4OK", "L4TOUT", "L4CON", "L7OK", "L7TOUT", "L7RSP", "L7STS",
];

impl ServerState {
    /// Whether `outlier-ejection` has this server out now (ends the ejection once it expired;
    /// reads the clock only for an ejected server).
    pub fn is_ejected(&self) -> bool {
        let until = self.ejected_until_ms.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        if crate::stats::uptime_ms() < until {
            return true;
        }
        self.ejected_until_ms.store(0, Ordering::Relaxed);
        false
    }

    /// The weight the balancer sees now: 0 when the server must not get a new connection.
    fn pick_weight(&self) -> u32 {
        if self.config.disabled || !self.up.load(Ordering::Relaxed) {
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
        self.weight.load(Ordering::Relaxed)
    }
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
                up: AtomicBool::new(true),
                cur_conns: Gauge::new(workers),
                total_conns: AtomicU64::new(0),
                conn_errors: AtomicU64::new(0),
                check: CheckStats::default(),
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
        self.servers
            .iter()
            .filter(|s| !s.config.disabled && s.up.load(Ordering::Relaxed))
            .count()
    }

    /// HAProxy's `srv_is_up(BACKEND/SERVER)`: `None` when there is no such server.
    pub fn srv_is_up(&self, name: &str) -> Option<bool> {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .map(|s| !s.config.disabled && s.up.load(Ordering::Relaxed))
    }

    /// Sets a server's effective weight (0..=256); takes effect on the next pick of every worker
    /// for `balance roundrobin`.
    pub fn set_weight(&self, server: usize, weight: u32) {
        if let Some(s) = self.servers.get(server) {
            s.weight.store(weight.min(256), Ordering::Relaxed);
        }
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
                            let up = !s.config.disabled && s.up.load(Ordering::Relaxed);
                            table.sync(k, up, s.weight.load(Ordering::Relaxed));
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
                crate::check::observe(backend, server, Outcome::Layer4Ok);
                return Ok(ServerConn {
                    stream,
                    slot,
                    retries: attempt,
                });
            }
            Err(e) => {
                s.conn_errors.fetch_add(1, Ordering::Relaxed);
                crate::check::observe(backend, server, Outcome::Layer4Error);
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
        .any(|s| s.config.maxconn.is_some() && !s.config.disabled && s.up.load(Ordering::Relaxed));
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
    let addr = server.config.addr;
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
