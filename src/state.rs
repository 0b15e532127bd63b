//! The run-time state shared by every worker, built once from the model.
//!
//! Everything here is immutable after start except atomics (connection limits, server weights,
//! counters), so workers read it through an `Arc` without locking.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::backend::Backend;
use crate::base::counter::HttpCounters;
use crate::config::model::{self, Config};
use crate::log::sender::Outputs;
use crate::log::ProxyLog;
use crate::net::listener::Limit;
use crate::net::rate::Rate;
use crate::rules::userlist::Userlist;
use crate::rules::vars::Vars;
use crate::stick::freq::FreqCtr;

/// A frontend at run time: its configuration and its connection limits.
#[derive(Debug)]
pub struct Frontend {
    pub config: model::Frontend,
    /// Frontend `maxconn`.
    pub limit: Limit,
    /// Bind `maxconn`, one per entry of `config.binds`.
    pub bind_limits: Vec<Limit>,
    /// Access logs, captures and unique ids.
    pub log: ProxyLog,
    /// `rate-limit sessions`.
    pub sess_rate: Option<Rate>,
    /// What the frontend refused, for `show stat`.
    pub denied: Denied,
    /// What the frontend accepted and answered, for `show stat`.
    pub counters: FeCounters,
    /// A `listen` section's own backend half (the stream's backend until another is chosen).
    pub own_backend: Option<usize>,
}

/// A frontend's counts of its traffic, kept where HAProxy 2.6 keeps its `fe_counters`: the
/// sessions that passed the `tcp-request connection` and `session` rules (`stot`,
/// `cum_sess`), the requests that could not be read (`ereq`, `failed_req`: invalid, or
/// incomplete when the client closed or timed out), every HTTP request, read or failed
/// (`req_tot`), and the status of every HTTP transaction's final answer, the server's or
/// Bascule's (`hrsp_*`). The HTTP counts, written per request, are per worker
/// ([`HttpCounters`]); the others, per connection, relaxed atomic adds like [`Denied`].
#[derive(Debug)]
pub struct FeCounters {
    /// Connections accepted, before any rule (`conn_tot`, `cum_conn`).
    pub conn: AtomicU64,
    pub sess: AtomicU64,
    pub failed_req: AtomicU64,
    pub http: HttpCounters,
    /// Bytes from and to its clients (`bin`, `bout`).
    pub bytes: crate::base::counter::Bytes,
    /// Connections, sessions and HTTP requests per second over the last second (`conn_rate`,
    /// `rate`, `req_rate`), with the highest rates seen (`conn_rate_max`, `rate_max`,
    /// `req_rate_max`), as HAProxy's `proxy_inc_fe_conn_ctr`, `_sess_ctr` and `_req_ctr`.
    pub rates: [FreqCtr; 3],
    pub rate_max: [AtomicU32; 3],
    /// Most connections at once, ever (`smax`: HAProxy's `conn_max`).
    pub conn_max: AtomicU32,
    /// Requests its own rules answered (`http-request redirect|return`), before any backend
    /// was chosen (`intercepted`: HAProxy's `intercepted_req`).
    pub intercepted: AtomicU64,
    /// Header and start-line rewrites that failed (`wrew`: HAProxy's `failed_rewrites`).
    pub failed_rewrites: AtomicU64,
}

/// The rates of [`FeCounters::rates`]: connections, sessions, requests.
pub const CONN_RATE: usize = 0;
pub const SESS_RATE: usize = 1;
pub const REQ_RATE: usize = 2;

impl FeCounters {
    pub fn new(workers: usize) -> Self {
        FeCounters {
            conn: AtomicU64::new(0),
            sess: AtomicU64::new(0),
            failed_req: AtomicU64::new(0),
            http: HttpCounters::new(workers),
            bytes: crate::base::counter::Bytes::new(workers),
            rates: Default::default(),
            rate_max: Default::default(),
            conn_max: AtomicU32::new(0),
            intercepted: AtomicU64::new(0),
            failed_rewrites: AtomicU64::new(0),
        }
    }

    /// A connection accepted, `current` connections open now (it included).
    pub fn count_connection(&self, current: usize) {
        self.conn.fetch_add(1, Ordering::Relaxed);
        self.count_rate(CONN_RATE);
        let current = u32::try_from(current).unwrap_or(u32::MAX);
        self.conn_max.fetch_max(current, Ordering::Relaxed);
    }

    /// A session accepted.
    pub fn count_session(&self) {
        self.sess.fetch_add(1, Ordering::Relaxed);
        self.count_rate(SESS_RATE);
    }

    /// An HTTP request read (`req_tot`, `req_rate`) at `now` (ms since start).
    pub fn count_request_at(&self, now: u64) {
        self.http.count_req();
        self.count_rate_at(REQ_RATE, now);
    }

    /// One more event in rate `which` (one atomic add, a rotation once a second), and its
    /// highest value.
    fn count_rate(&self, which: usize) {
        self.count_rate_at(which, crate::base::clock::uptime_ms());
    }

    fn count_rate_at(&self, which: usize, now: u64) {
        let n = self.rates[which].add(1000, now, 1);
        if n > self.rate_max[which].load(Ordering::Relaxed) {
            self.rate_max[which].fetch_max(n, Ordering::Relaxed);
        }
    }

    /// Rate `which` now.
    pub fn rate(&self, which: usize) -> u32 {
        self.rates[which].read(1000, crate::base::clock::uptime_ms())
    }

    /// A request that could not be read: a request and a failed one.
    pub fn count_bad_request(&self) {
        self.failed_req.fetch_add(1, Ordering::Relaxed);
        self.count_request_at(crate::base::clock::uptime_ms());
    }
}

/// A frontend's counts of refused traffic, as HAProxy keeps them (`fe_counters`) and `show
/// stat` shows them: connections a `tcp-request connection` rule rejected (`dcon`), sessions a
/// `tcp-request session` rule rejected (`dses`), requests a `tcp-request content` rule (of the
/// frontend or of its backend) or an `http-request deny|tarpit|reject` rejected (`dreq`).
#[derive(Debug, Default)]
pub struct Denied {
    pub conn: AtomicU64,
    pub sess: AtomicU64,
    pub req: AtomicU64,
    /// Responses an `http-response deny` or a `tcp-response content reject` refused (`dresp`).
    pub resp: AtomicU64,
}

impl Denied {
    /// Counts one in `counter` (one of the fields).
    pub fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// State shared by every worker for the life of the process.
#[derive(Debug)]
pub struct Shared {
    pub global: model::Global,
    pub frontends: Vec<Frontend>,
    pub backends: Vec<Backend>,
    /// Global `maxconn` (resolved: never unlimited).
    pub global_limit: Limit,
    /// Global `maxconnrate`, `maxsessrate` and `maxsslrate` (the last one paces TLS listeners
    /// only: each connection they accept is a new TLS handshake).
    pub conn_rate: Option<Rate>,
    pub sess_rate: Option<Rate>,
    pub ssl_rate: Option<Rate>,
    /// `-d`: trace connection events on stderr.
    pub debug: bool,
    /// A soft stop is under way (SIGUSR1): listeners are closed, open connections finish
    /// (the `stopping` fetch).
    pub stopping: std::sync::atomic::AtomicBool,
    /// Worker threads started.
    pub nbthread: usize,
    /// Every log destination.
    pub log_outputs: Arc<Outputs>,
    /// Each backend's logging (health checks, server state), indexed like `backends`.
    pub backend_logs: Vec<ProxyLog>,
    /// `userlist` sections, for `http_auth` and `http-request auth`.
    pub userlists: Vec<Userlist>,
    /// `proc.` variables.
    pub proc_vars: ArcSwap<Vars>,
    /// Variable names by id (`get var`).
    pub var_names: Vec<(crate::rules::Scope, String)>,
    /// Stick tables, in declaration order (`show table`, `clear table`, `set table`).
    pub tables: Vec<Arc<crate::stick::Table>>,
    /// The `peers` sections that replicate tables with remote peers.
    pub peers: Vec<crate::peers::Replication>,
    /// The certificate files of `bind ... ssl` lines, and the open `set ssl cert`
    /// transaction.
    pub certs: crate::tls::cli::Certs,
    /// The CA and CRL files the client certificate verifiers read (`... ssl ca-file|crl-file`).
    pub ca_files: crate::tls::cafiles::CaFiles,
    /// The `crt-list` files of bind lines (`show`/`add`/`del ssl crt-list`).
    pub crt_lists: crate::tls::crtlists::CrtLists,
    /// The `tls-ticket-keys` files, for `show tls-keys` and `set ssl tls-key`.
    pub ticket_keys: crate::tls::tickets::Registry,
    /// The `log-forward` sections (their sockets are bound and run by the process).
    pub log_forwards: Vec<Arc<crate::log::forward::Forwarder>>,
    /// The pattern files of the rules (`show map`, `add map`, `add acl`, `del acl`...).
    pub pat_files: Arc<crate::rules::patfile::PatFiles>,
}

impl Shared {
    /// The backend half of the `listen` section whose frontend half is `frontend` (the halves
    /// share their rules): where HAProxy counts a stream that chose no backend, the proxy
    /// being its own backend.
    pub fn listen_backend(&self, frontend: usize) -> Option<usize> {
        let fe = &self.frontends[frontend].config;
        let b = fe.default_backend?;
        Arc::ptr_eq(&self.backends[b].config.rules, &fe.rules).then_some(b)
    }

    /// Adds a stream's bytes to `show stat`'s `bin` and `bout` of its frontend, its backend
    /// (the `listen` section's own when it chose none) and its server, as HAProxy's
    /// `stream_process_counters` does.
    pub fn count_bytes(
        &self,
        frontend: usize,
        backend: Option<usize>,
        server: Option<usize>,
        bytes_in: u64,
        bytes_out: u64,
    ) {
        if bytes_in | bytes_out == 0 {
            return;
        }
        self.frontends[frontend]
            .counters
            .bytes
            .add(bytes_in, bytes_out);
        let Some(be) = backend
            .or_else(|| self.listen_backend(frontend))
            .map(|b| &self.backends[b])
        else {
            return;
        };
        be.bytes.add(bytes_in, bytes_out);
        if let Some(srv) = server.and_then(|s| be.servers.get(s)) {
            srv.bytes.add(bytes_in, bytes_out);
        }
    }

    /// Builds the run-time state; `maxconn` is the resolved global limit.
    pub fn new(config: Config, maxconn: u32, debug: bool, nbthread: usize) -> Self {
        let mut outputs = Outputs::new();
        // The rings first: `log ring@NAME` targets name them.
        outputs.set_rings(
            config
                .rings
                .iter()
                .map(|r| Arc::new(crate::log::ring::Ring::new(r.clone())))
                .collect(),
        );
        let log_forwards = config
            .log_forwards
            .iter()
            .map(|f| Arc::new(crate::log::forward::Forwarder::new(f.clone(), &mut outputs)))
            .collect();
        let global = &config.global;
        let frontends = config
            .frontends
            .iter()
            .map(|f| Frontend {
                limit: Limit::new(f.maxconn),
                bind_limits: f.binds.iter().map(|b| Limit::new(b.maxconn)).collect(),
                log: ProxyLog::new(&f.logs, &f.options, f.formats.clone(), global, &mut outputs),
                sess_rate: Rate::new(f.rate_limit_sessions),
                denied: Denied::default(),
                counters: FeCounters::new(nbthread),
                own_backend: config.backends.iter().position(|b| b.id == f.id),
                config: f.clone(),
            })
            .collect();
        let backend_logs = config
            .backends
            .iter()
            .map(|b| {
                // A backend logs events only: no access-log formats.
                ProxyLog::new(&b.logs, &b.options, Arc::default(), global, &mut outputs)
            })
            .collect();
        let ticket_keys = crate::tls::tickets::Registry::new(
            config
                .frontends
                .iter()
                .flat_map(|f| &f.binds)
                .filter_map(|b| b.tls.as_ref()?.ticket_keys.as_ref()),
        );
        let certs = crate::tls::cli::Certs::with_servers(
            config
                .frontends
                .iter()
                .flat_map(|f| &f.binds)
                .filter_map(|b| b.tls.as_ref().map(|t| &t.store)),
            config
                .backends
                .iter()
                .flat_map(|b| &b.servers)
                .filter_map(|s| s.tls.as_ref()?.crt.as_ref()),
        )
        .with_del_ext(config.global.ssl.options.extra.del_ext);
        let verifiers: Vec<_> = config
            .frontends
            .iter()
            .flat_map(|f| &f.binds)
            .filter_map(|b| b.tls.as_ref())
            .flat_map(|t| t.verifiers())
            .collect();
        let ca_files =
            crate::tls::cafiles::CaFiles::new(verifiers.iter().flat_map(|v| v.sources()));
        let crt_lists = crate::tls::crtlists::CrtLists::new(
            config
                .frontends
                .iter()
                .flat_map(|f| &f.binds)
                .filter_map(|b| Some((b.tls.as_ref()?, b.location.as_str()))),
            config.global.ssl.crt_base.as_deref(),
        );
        let (conn_rate, sess_rate) = (
            Rate::new(config.global.maxconnrate),
            Rate::new(config.global.maxsessrate),
        );
        let peers = crate::peers::Replication::build(&config.peers, &config.tables);
        let backends: Vec<Backend> = config
            .backends
            .into_iter()
            .map(|b| Backend::new(b, nbthread))
            .collect();
        // Servers tracking one in maintenance start in maintenance too.
        crate::backend::track::init(&backends);
        Shared {
            conn_rate,
            sess_rate,
            ssl_rate: Rate::new(config.global.maxsslrate),
            global: config.global,
            frontends,
            backends,
            global_limit: Limit::new(Some(maxconn)),
            debug,
            stopping: std::sync::atomic::AtomicBool::new(false),
            nbthread,
            log_outputs: Arc::new(outputs),
            backend_logs,
            userlists: config.userlists,
            proc_vars: ArcSwap::from_pointee(config.proc_vars),
            var_names: config.vars,
            tables: config
                .tables
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let table = crate::stick::Table::new(&t.name, t.spec.clone());
                    let feed = t.peers.as_ref().and_then(|(s, _)| peers[*s].feed(i));
                    Arc::new(match feed {
                        Some(f) => table.with_feed(f),
                        None => table,
                    })
                })
                .collect(),
            peers,
            log_forwards,
            certs,
            ca_files,
            crt_lists,
            ticket_keys,
            pat_files: config.pat_files,
        }
    }

    fn limits(&self, frontend: usize, bind: usize) -> [&Limit; 3] {
        let fe = &self.frontends[frontend];
        [&self.global_limit, &fe.limit, &fe.bind_limits[bind]]
    }

    /// The per-second limits that pace a listener's accepts (counted at accept, but for
    /// `maxsslrate`, counted when a full handshake completes, as HAProxy counts it, the
    /// handshakes in flight holding their places meanwhile: see `net::rate`).
    fn rates(&self, frontend: usize, bind: usize) -> [Option<&Rate>; 4] {
        let [conn, sess, fe_sess] = self.counted_at_accept(frontend);
        let tls = self.frontends[frontend]
            .config
            .binds
            .get(bind)
            .is_some_and(|b| b.tls.is_some());
        [conn, sess, fe_sess, self.ssl_rate.as_ref().filter(|_| tls)]
    }

    fn counted_at_accept(&self, frontend: usize) -> [Option<&Rate>; 3] {
        [
            self.conn_rate.as_ref(),
            self.sess_rate.as_ref(),
            self.frontends[frontend].sess_rate.as_ref(),
        ]
    }

    /// Waits until the rate limits of `frontend` allow one more connection.
    pub async fn pace(&self, frontend: usize, bind: usize) {
        crate::net::rate::pace(&self.rates(frontend, bind)).await;
    }

    /// Counts an accepted connection in the rate limits of its frontend.
    pub fn count_accept(&self, frontend: usize) {
        crate::net::rate::count(&self.counted_at_accept(frontend));
    }

    /// Waits for a slot in the global, frontend and bind limits of a listener and takes it.
    pub async fn take_slots(self: &Arc<Self>, frontend: usize, bind: usize) -> SessionSlots {
        crate::net::listener::take_slots(self.limits(frontend, bind))
            .await
            .transfer();
        SessionSlots {
            shared: Arc::clone(self),
            frontend,
            bind,
            confirmed: false,
            handshake: std::cell::Cell::new(false),
        }
    }
}

/// The connection-limit slots of one session, released when the session ends. Reserved while
/// the worker accepts (a count does not show them), confirmed once it has a connection.
pub struct SessionSlots {
    shared: Arc<Shared>,
    frontend: usize,
    bind: usize,
    confirmed: bool,
    /// A TLS handshake is in flight and holds a place in `maxsslrate`.
    handshake: std::cell::Cell<bool>,
}

impl SessionSlots {
    /// The accept succeeded: the slots now count a connection. On a TLS listener under
    /// `maxsslrate` its handshake holds a place in the rate until [`SessionSlots::handshake_done`].
    pub fn confirm(&mut self) {
        for l in self.shared.limits(self.frontend, self.bind) {
            l.confirm();
        }
        self.confirmed = true;
        if self.shared.ssl_rate.is_none() {
            return;
        }
        if let [.., Some(ssl)] = self.shared.rates(self.frontend, self.bind) {
            ssl.begin();
            self.handshake.set(true);
        }
    }

    /// The connection's TLS handshake is over: counted in `maxsslrate` when it was a full one
    /// (`full`), as HAProxy counts it; a resumed or failed one gives its place back.
    pub fn handshake_done(&self, full: bool) {
        if self.handshake.replace(false) {
            if let Some(ssl) = &self.shared.ssl_rate {
                ssl.end(full, crate::base::clock::uptime_ms());
            }
        }
    }
}

impl Drop for SessionSlots {
    fn drop(&mut self) {
        self.handshake_done(false);
        for l in self.shared.limits(self.frontend, self.bind) {
            if self.confirmed {
                l.release();
            } else {
                l.release_reserved();
            }
        }
    }
}

/// The checker reads the backends and logs their events through this (it sits below `state`).
impl crate::backend::check::Backends for Shared {
    fn backends(&self) -> &[Backend] {
        &self.backends
    }

    fn log_event(&self, b: usize, level: u8, text: &str) {
        let log = &self.backend_logs[b];
        if log.enabled() {
            log.event(&self.log_outputs, level, text);
        }
    }
}
