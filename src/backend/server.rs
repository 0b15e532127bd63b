//! The facts about one server that every part of a backend shares: administrative flags,
//! operational state, weights, address, connection counts and health-check figures, all in
//! atomics that the data path only reads (or bumps with one atomic operation).
//!
//! This is the bottom of `backend`: the picker, the connector, passive health and the checker
//! all read and write [`ServerState`], and it imports none of them. A passive-health verdict is
//! left here ([`ServerState::passive`]) by the data path for the checker to apply, so the
//! connector never calls into the checker.

use std::sync::atomic::{AtomicBool, AtomicI8, AtomicU32, AtomicU64, AtomicU8, Ordering};

use tokio::sync::Notify;

use crate::base::atomic_addr::AtomicSocketAddr;
use crate::base::clock;
use crate::base::counter::Gauge;
use crate::config::model;
use crate::stick::freq::FreqCtr;

/// The period of a server's session rate: one second.
const RATE_PERIOD_MS: u32 = 1000;

/// A server's administrative flags, with HAProxy's values (`srv_admin_state` in `show servers
/// state`). Only the operator changes them; health checks never do.
pub mod admin {
    /// Forced maintenance (`disable server`, `set server ... state maint`): no traffic at all,
    /// health checks paused.
    pub const FMAINT: u8 = 0x01;
    /// Maintenance inherited from the server this one tracks (`track`), or from the one that
    /// server tracks: set and cleared with the tracked server's.
    pub const IMAINT: u8 = 0x02;
    /// Declared `disabled` in the configuration. Only a memory of it: the server starts in
    /// forced maintenance too, and `enable server` clears that but keeps this flag.
    pub const CMAINT: u8 = 0x04;
    /// Forced drain (`set server ... state drain`): no new balanced traffic, weight kept.
    pub const FDRAIN: u8 = 0x08;
    /// Drain inherited from the tracked server.
    pub const IDRAIN: u8 = 0x10;
    /// Any of the drain flags.
    pub const DRAIN: u8 = FDRAIN | IDRAIN;
    /// No address yet (`init-addr ...,none` and the name did not resolve): in maintenance
    /// until `set server addr` gives it one (HAProxy's "MAINT (resolution)").
    pub const RMAINT: u8 = 0x20;
    /// Any of the maintenance flags (HAProxy's `SRV_ADMF_MAINT`).
    pub const MAINT: u8 = FMAINT | IMAINT | RMAINT;
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
    /// Idle connections to this server in the workers' pools, each worker on its own line: a
    /// worker whose pool has none looks here for one it may take over from another
    /// (`crate::session::takeover`), and `pool-max-conn` bounds the total.
    pub idle: Gauge,
    /// Of those, the ones that carried more than one request, proven reusable (HAProxy's safe
    /// idle connections: `safe_conn_cur`; the others are `idle_conn_cur`).
    pub idle_safe: Gauge,
    /// HAProxy's `use_ssl`: traffic goes over TLS while it is 1 (`ssl`, or `set server ...
    /// ssl on`); -1 after `no-ssl`, 0 after `set server ... ssl off`.
    pub use_ssl: AtomicI8,
    /// Streams ever sent to this server, over a connection opened for them or reused (HAProxy's
    /// `cum_sess`: `stot`).
    pub total_conns: AtomicU64,
    /// Sessions per second over the last second (HAProxy's `sess_per_sec`: `rate` in `show
    /// stat`, `srv_sess_rate`), counted with [`Self::total_conns`].
    sess_per_sec: FreqCtr,
    /// The highest [`Self::sess_rate`] seen (`rate_max`).
    pub sps_max: AtomicU32,
    /// Connections that failed for good, their retries spent (HAProxy's `econ`, counted when
    /// the last attempt fails, not at each one).
    pub conn_errors: AtomicU64,
    /// Failed attempts retried on this server (HAProxy's `wretr`).
    pub retries: AtomicU64,
    /// Failed attempts retried on another server (HAProxy's `wredis`).
    pub redispatches: AtomicU64,
    /// Response heads received from this server, interim ones included (`req_tot`, `hrsp_*`:
    /// HAProxy's `counters.p.http`, counted as each head arrives).
    pub http: crate::base::counter::HttpCounters,
    /// Bytes of the streams sent to it (`bin`, `bout`).
    pub bytes: crate::base::counter::Bytes,
    /// Its connections established and reused, and its streams' times (`connect`, `reuse`,
    /// `qtime`... `ttime_max`).
    pub streams: crate::base::counter::StreamStats,
    /// When the last stream was sent to it, in ms since start plus one (0: never): `lastsess`.
    pub last_sess_ms: AtomicU64,
    /// Header and start-line rewrites that failed (`wrew`).
    pub failed_rewrites: AtomicU64,
    /// Most connections in use at once (not idle in a pool), ever: `need_conn_est`.
    pub used_max: AtomicU32,
    /// Its responses refused by `http-response deny` or `tcp-response content reject` (`dresp`).
    pub denied_resp: AtomicU64,
    /// Transfers with it that ended badly (`cli_abrt`, `srv_abrt`, `eresp`).
    pub aborts: Aborts,
    /// Last health-check result, for `show stat`: written by the one checker of this server.
    pub check: CheckStats,
    /// Consecutive errors seen on live traffic (`observe`).
    pub live_errors: AtomicU32,
    /// A passive-health verdict waiting for the checker (`on-error`): 0 none, else
    /// [`PASSIVE_FASTINTER`] and the like.
    pub passive: std::sync::atomic::AtomicU8,
    /// Most connections open at once, ever (`smax` in `show stat`).
    pub smax: AtomicU32,
    /// Most requests in this server's queue at once, ever (`qmax`).
    pub qmax: AtomicU32,
    /// The server's connection limit now (`maxconn`, which an agent may change), 0 for none:
    /// read through [`ServerState::maxconn`].
    pub maxconn: AtomicU32,
    /// The agent (`agent-check`) said the server is down (`down`, `stopped`, `fail`): it stays
    /// DOWN whatever its health check says, until the agent says `up`.
    pub agent_down: AtomicBool,
    /// The agent runs (`agent-check`, not paused by `disable agent`).
    pub agent_enabled: AtomicBool,
    /// Requests waiting in this server's queue (`maxconn` reached), for `show stat`.
    pub queued: AtomicU32,
    /// Requests that left this server's queue with a slot, ever: a request's `%sq` is how
    /// many left between its arrival and its own departure, plus one (HAProxy's queue index).
    pub queue_idx: AtomicU32,
    /// Consecutive live errors counted by `outlier-ejection`.
    pub outlier_errors: AtomicU32,
    /// While ejected as an outlier: until when, in ms since start ([`clock::uptime_ms`]);
    /// 0 when not ejected.
    pub ejected_until_ms: AtomicU64,
    /// Removed with `del server`: never picked nor shown again; its slot and index stay (see
    /// [`super::table`]).
    pub deleted: AtomicBool,
    /// Something points to this server (see `model::Server::pinned`), or a server added at run
    /// time tracks it: `del server` refuses to remove it.
    pub pinned: AtomicBool,
    /// Added at run time (`add server`): no server may track it, as in HAProxy.
    pub dynamic: bool,
    /// When this server started tracking another (`track`), in HAProxy's order: the configured
    /// servers in file order, then the added ones as they come. A tracked server tells the
    /// latest first (see [`super::track`]).
    pub track_seq: u64,
}

/// Transfers that ended badly, as HAProxy counts them in a backend's and a server's
/// counters for `show stat`. Counted only where a transfer fails, so a request that goes well
/// costs nothing.
#[derive(Debug, Default)]
pub struct Aborts {
    /// Aborted by the client (`cli_abrt`): it closed or reset its connection, or its timeout
    /// struck, while data moved; or it reset it while its request waited in a queue.
    pub client: AtomicU64,
    /// Aborted by the server (`srv_abrt`): it closed or reset its connection, or its timeout
    /// struck, while data moved.
    pub server: AtomicU64,
    /// Responses that failed (`eresp`): a read error on the server's side, a response that
    /// could not be parsed, a server that closed or timed out before its response.
    pub resp: AtomicU64,
}

/// Which of [`Aborts`] counts one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    Client,
    Server,
    Resp,
}

impl Aborts {
    /// Counts one of `kind`.
    pub fn count(&self, kind: Abort) {
        let counter = match kind {
            Abort::Client => &self.client,
            Abort::Server => &self.server,
            Abort::Resp => &self.resp,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
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
    /// The last check's own words (HAProxy's `check.desc`: "Connection refused", a reply's
    /// text...), `last_chk` in `show stat`; written by the checker when they change.
    pub desc: arc_swap::ArcSwapOption<String>,
}

/// HAProxy's check status words, indexed by [`CheckStats::status`].
pub const CHECK_STATUS: [&str; 12] = [
    "INI", "L4OK", "L4TOUT", "L4CON", "L7OK", "L7TOUT", "L7RSP", "L7STS", "SOCKERR", "L6OK",
    "L6TOUT", "L6RSP",
];

/// HAProxy's descriptions of [`CHECK_STATUS`] (`check_desc` in `show stat`), same order.
pub const CHECK_DESC: [&str; 12] = [
    "Initializing",
    "Layer4 check passed",
    "Layer4 timeout",
    "Layer4 connection problem",
    "Layer7 check passed",
    "Layer7 timeout",
    "Layer7 invalid response",
    "Layer7 wrong status",
    "Socket error",
    "Layer6 check passed",
    "Layer6 timeout",
    "Layer6 invalid response",
];

/// HAProxy's numbers for [`CHECK_STATUS`] (`enum healthcheck_status`: `srv_check_status` in
/// `show servers state`), same order.
pub const CHECK_STATUS_CODE: [u8; 12] = [1, 6, 7, 8, 15, 12, 13, 17, 5, 9, 10, 11];

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
    /// A server as the configuration (or `add server`) describes it; `workers` is the number of
    /// workers counting its connections. A server declared `disabled`, or added at run time
    /// (`dynamic`), starts in maintenance.
    /// Whether its traffic goes over TLS now.
    pub fn ssl_on(&self) -> bool {
        self.use_ssl.load(Ordering::Relaxed) == 1
    }

    /// The TLS configuration of its traffic, while traffic goes over TLS.
    pub fn tls_config(&self) -> Option<&std::sync::Arc<rustls::ClientConfig>> {
        let config = self.config.tls.as_ref()?.config.as_ref()?;
        self.ssl_on().then_some(config)
    }

    /// Whether its health checks begin with a PROXY header: `check-send-proxy`, or, as HAProxy
    /// 2.6 decides for a server of the configuration (not one added at run time), the
    /// server's own `send-proxy[-v2]` when the checks go to its address and port.
    pub fn checks_send_proxy(&self) -> bool {
        let c = &self.config;
        c.check_send_proxy
            || (!self.dynamic
                && (c.send_proxy || c.send_proxy_v2)
                && c.check_port.is_none()
                && c.check_addr.is_none())
    }

    pub fn new(s: &model::Server, workers: usize, dynamic: bool) -> Self {
        let maint = s.disabled || dynamic;
        ServerState {
            weight: AtomicU32::new(s.weight),
            ramp_pct: AtomicU32::new(100),
            // A server in maintenance is stopped, as in HAProxy.
            up: AtomicBool::new(!maint && !s.no_addr),
            stopping: AtomicBool::new(false),
            admin: AtomicU8::new(
                if s.disabled {
                    admin::CMAINT | admin::FMAINT
                } else if dynamic {
                    admin::FMAINT
                } else {
                    0
                } | if s.no_addr { admin::RMAINT } else { 0 },
            ),
            addr: AtomicSocketAddr::new(s.addr),
            // An added server's checks wait for `enable health` (and `enable agent`).
            check_enabled: AtomicBool::new(s.check.is_some() && !dynamic),
            check_wake: Notify::new(),
            cur_conns: Gauge::new(workers),
            idle: Gauge::new(workers),
            idle_safe: Gauge::new(workers),
            use_ssl: AtomicI8::new(s.use_ssl),
            total_conns: AtomicU64::new(0),
            conn_errors: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            redispatches: AtomicU64::new(0),
            check: CheckStats {
                health: AtomicU32::new(if maint { 0 } else { s.rise }),
                ..CheckStats::default()
            },
            live_errors: AtomicU32::new(0),
            passive: std::sync::atomic::AtomicU8::new(0),
            maxconn: AtomicU32::new(s.maxconn.unwrap_or(0)),
            smax: AtomicU32::new(0),
            qmax: AtomicU32::new(0),
            agent_down: AtomicBool::new(false),
            agent_enabled: AtomicBool::new(s.agent.is_some() && !dynamic),
            queued: AtomicU32::new(0),
            queue_idx: AtomicU32::new(0),
            outlier_errors: AtomicU32::new(0),
            ejected_until_ms: AtomicU64::new(0),
            deleted: AtomicBool::new(false),
            pinned: AtomicBool::new(s.pinned),
            dynamic,
            track_seq: 0,
            sess_per_sec: FreqCtr::new(),
            sps_max: AtomicU32::new(0),
            http: crate::base::counter::HttpCounters::new(workers),
            bytes: crate::base::counter::Bytes::new(workers),
            streams: crate::base::counter::StreamStats::new(workers),
            last_sess_ms: AtomicU64::new(0),
            used_max: AtomicU32::new(0),
            failed_rewrites: AtomicU64::new(0),
            denied_resp: AtomicU64::new(0),
            aborts: Aborts::default(),
            config: s.clone(),
        }
    }

    /// Counts a stream sent to this server (over a connection established or reused): `stot`, the rate of
    /// the last second and its highest value, as HAProxy's `srv_inc_sess_ctr`.
    pub fn count_session(&self) {
        self.count_session_at(clock::uptime_ms());
    }

    /// [`ServerState::count_session`] at `now` (ms since start), read by the caller.
    pub fn count_session_at(&self, now: u64) {
        self.total_conns.fetch_add(1, Ordering::Relaxed);
        let n = self.sess_per_sec.add(RATE_PERIOD_MS, now, 1);
        self.sps_max.fetch_max(n, Ordering::Relaxed);
        self.last_sess_ms.store(now + 1, Ordering::Relaxed);
    }

    /// Sessions per second over the last second (`srv_sess_rate`, `rate` in `show stat`).
    pub fn sess_rate(&self) -> u32 {
        self.sess_per_sec.read(RATE_PERIOD_MS, clock::uptime_ms())
    }

    /// Removed with `del server`.
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Relaxed)
    }

    /// Whether `outlier-ejection` has this server out now (ends the ejection once it expired;
    /// reads the clock only for an ejected server).
    pub fn is_ejected(&self) -> bool {
        let until = self.ejected_until_ms.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        if clock::uptime_ms() < until {
            return true;
        }
        self.ejected_until_ms.store(0, Ordering::Relaxed);
        false
    }

    /// In maintenance (forced, or for want of an address).
    pub fn in_maint(&self) -> bool {
        self.admin.load(Ordering::Relaxed) & admin::MAINT != 0
    }

    /// Draining (forced or inherited): no new balanced traffic.
    pub fn draining(&self) -> bool {
        self.admin.load(Ordering::Relaxed) & admin::DRAIN != 0
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
    pub(super) fn changed(&self) {
        self.check
            .last_change_s
            .store(clock::uptime_secs(), Ordering::Relaxed);
        self.check.generation.fetch_add(1, Ordering::Release);
    }

    /// The weight that places the server in a round-robin order: 0 when it is out of the
    /// order (down, in maintenance, ejected, drained). Being full is not a reason: a full server
    /// keeps its turns and is skipped while full, so filling up does not reshape the order.
    pub(super) fn schedule_weight(&self) -> u32 {
        if !self.usable() || self.is_ejected() {
            return 0;
        }
        self.lb_weight()
    }

    /// The connection limit now: the configured `maxconn`, or what an agent set since.
    pub fn maxconn(&self) -> Option<u32> {
        Some(self.maxconn.load(Ordering::Relaxed)).filter(|&m| m > 0)
    }

    /// The weight the balancer sees now: 0 when the server must not get a new connection.
    pub(super) fn pick_weight(&self) -> u32 {
        if let Some(max) = self.maxconn() {
            if self.cur_conns.get() >= max {
                return 0;
            }
        }
        self.schedule_weight()
    }
}

/// Passive verdicts handed to the checker (`ServerState::passive`).
pub const PASSIVE_FASTINTER: u8 = 1;
pub const PASSIVE_FAIL_CHECK: u8 = 2;
pub const PASSIVE_SUDDEN_DEATH: u8 = 3;

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
