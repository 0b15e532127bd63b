//! The typed, validated configuration: the only configuration type the runtime sees.
//!
//! Everything here is already resolved: times are [`Duration`]s, sizes are bytes, addresses are
//! [`SocketAddr`]s (hostnames were resolved at load), backend references are indices into
//! [`Config::backends`], and every default from a `defaults` section has been applied. The runtime
//! never re-parses a string, and the parser never imports a runtime type: this file is the valve
//! between the two.
//!
//! Keywords that Bascule parses but whose behaviour arrives with a later piece of work (logging,
//! the stats socket, HTTP options) are carried here too, so that the piece that implements them
//! only has to read the model.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A whole configuration, from every `-f` file, after validation.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub global: Global,
    /// `frontend` sections, then the frontend half of `listen` sections, in file order.
    pub frontends: Vec<Frontend>,
    /// `backend` sections, then the backend half of `listen` sections, in file order.
    pub backends: Vec<Backend>,
    /// `userlist` sections, in file order (`http_auth(NAME)` fetches hold indices into it).
    pub userlists: Vec<crate::rules::userlist::Userlist>,
    /// Variables the rules use, by id (`set-var(txn.x)` and `var(txn.x)` hold the id).
    pub vars: Vec<(crate::rules::Scope, String)>,
    /// The `proc` variables at start: global `set-var` lines evaluated, every `proc` variable
    /// the configuration names declared.
    pub proc_vars: crate::rules::vars::Vars,
    /// Stick tables, in declaration order (`show table` lists them last first); proxies
    /// and, later, `track-sc*` rules and `sc_*` fetches hold indices into it.
    pub tables: Vec<StickTable>,
    /// `peers` sections that replicate tables with remote peers (see [`crate::peers`]).
    pub peers: Vec<PeersSync>,
    /// `ring` sections (`log ring@NAME` targets), in file order.
    pub rings: Vec<Ring>,
    /// `log-forward` sections, in file order.
    pub log_forwards: Vec<LogForward>,
    /// The pattern files the rules' map converters and ACLs read (`show map`, `add acl`...).
    pub pat_files: Arc<crate::rules::patfile::PatFiles>,
}

/// A `ring` section: an in-memory buffer of log messages, sent on to TCP syslog servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    pub name: String,
    pub description: Option<String>,
    /// How messages are framed when stored (`format`; a `log` line's own format is not used).
    pub format: String,
    /// Longest message kept (`maxlen`); longer ones are cut.
    pub maxlen: usize,
    /// Bytes of messages kept (`size`): the oldest go first.
    pub size: usize,
    pub timeout_connect: Option<Duration>,
    pub timeout_server: Option<Duration>,
    pub servers: Vec<RingServer>,
}

/// A ring's `server NAME IP:PORT [log-proto legacy|octet-count] [ssl ...]`: a TCP syslog
/// server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingServer {
    pub name: String,
    pub addr: SocketAddr,
    /// `log-proto octet-count`: `LEN SP MSG` frames; otherwise (`legacy`) one message per
    /// line.
    pub octet_count: bool,
    /// `ssl`: the messages go over TLS (`config` is set; `sni` holds the constant name sent).
    pub tls: Option<Arc<crate::tls::client::ServerTls>>,
}

/// A `log-forward` section's `bind ADDR [ssl crt FILE ...]`: a TCP syslog listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBind {
    pub addr: SocketAddr,
    /// `ssl`: clients speak TLS.
    pub tls: Option<Arc<crate::tls::server::Built>>,
}

/// A `log-forward` section: syslog messages received on UDP and TCP, sent on to `logs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogForward {
    pub name: String,
    /// `bind`: TCP listeners.
    pub binds: Vec<LogBind>,
    /// `dgram-bind`: UDP listeners.
    pub dgram_binds: Vec<SocketAddr>,
    pub logs: Vec<LogTarget>,
    pub maxconn: Option<u32>,
    pub timeout_client: Option<Duration>,
}

/// One stick table: declared by a proxy's `stick-table` line (named after the proxy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StickTable {
    pub name: String,
    pub spec: crate::stick::TableSpec,
    /// The `peers` section replicating it (an index into [`Config::peers`]) and its name on
    /// the wire: `/NAME` for a peers section's `table NAME` (as haproxy sends it), the
    /// proxy's name otherwise.
    pub peers: Option<(usize, String)>,
}

/// A `peers` section with the local peer and at least one remote peer: the local peer
/// listens at `listen`, connects to each remote, and the tables naming the section are
/// replicated with HAProxy's peers protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeersSync {
    pub name: String,
    /// The local peer's name (`-L`, `localpeer`, else the host name).
    pub local: String,
    pub listen: ListenAddr,
    /// (name, address) of every other peer.
    pub remotes: Vec<(String, SocketAddr)>,
}

impl Config {
    /// The index in [`Config::tables`] of the table called `name` (what `table NAME`
    /// arguments resolve to).
    pub fn table_index(&self, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| t.name == name)
    }
}

pub use crate::rules::action::{
    HttpAfterAction, HttpReqAction, HttpResAction, Redirect, Rule, TcpReqAction, TcpResAction,
};

/// Where a `use_backend` line sends the request.
#[derive(Debug)]
pub enum BackendTarget {
    /// `use_backend NAME`: an index into [`Config::backends`].
    Static(usize),
    /// `use_backend be_%[req.hdr(host)]`: the name is computed per request; a name that is not
    /// a backend (or one in another mode) leaves the request to the next line / the default.
    Dynamic(crate::rules::lf::LfString),
}

/// One `use_backend` line; the first whose condition holds wins, `default_backend` after all.
pub type UseBackend = Rule<BackendTarget>;

/// One `use-server NAME [if COND]` line: an index into the backend's `servers`.
pub type UseServer = Rule<usize>;

/// The compiled rules of one proxy, in the lists HAProxy evaluates, each in file order (rules
/// inherited from a named `defaults` section first).
///
/// Order on the request path (checked against haproxy 2.6): `tcp_request_connection` (at
/// accept), `tcp_request_session`, then `tcp_request_content` (bounded by `inspect_delay`),
/// then in HTTP mode `http_request`, then `redirects` (the `redirect` keyword runs after every
/// `http-request` rule, whatever the line order; HAProxy warns when a line suggests otherwise),
/// then `use_backends` (first match, else `default_backend`). The chosen backend's own
/// `tcp_request_content`, `http_request` and `redirects` run next, then its `use_servers`.
/// On the response path: the backend's `tcp_response_content` / `http_response`, then the
/// frontend's `http_response`, then `http_after_response` (backend's, then frontend's), which
/// also runs on responses Bascule generates.
///
/// A `listen` section's frontend and backend halves share one `ProxyRules` (the same `Arc`):
/// the runtime must run its lists once, not once per half, when a listen uses its own backend.
#[derive(Debug, Default)]
pub struct ProxyRules {
    pub tcp_request_connection: Vec<Rule<TcpReqAction>>,
    pub tcp_request_session: Vec<Rule<TcpReqAction>>,
    pub tcp_request_content: Vec<Rule<TcpReqAction>>,
    /// `tcp-request inspect-delay`: how long `tcp_request_content` may wait for data.
    pub inspect_delay: Option<Duration>,
    pub http_request: Vec<Rule<HttpReqAction>>,
    /// `redirect` lines (`http-request redirect` rules are in `http_request`).
    pub redirects: Vec<Rule<Redirect>>,
    /// `use_backend` lines (frontend side).
    pub use_backends: Vec<UseBackend>,
    /// `use-server` lines (backend side).
    pub use_servers: Vec<UseServer>,
    /// `stick match|on|store-request|store-response`, in order (a backend's).
    pub stick: Vec<Rule<crate::rules::stick::StickRule>>,
    /// `force-persist` and `ignore-persist` lines (backend side), evaluated once the backend
    /// is known: the first that matches applies.
    pub persist: Vec<Rule<PersistRule>>,
    pub http_response: Vec<Rule<HttpResAction>>,
    pub http_after_response: Vec<Rule<HttpAfterAction>>,
    pub tcp_response_content: Vec<Rule<TcpResAction>>,
    /// The backend's `http-check` steps, compiled (see [`HttpCheckStep`]).
    pub http_check: HttpCheckCode,
    /// `tcp-response inspect-delay`.
    pub res_inspect_delay: Option<Duration>,
    /// The request capture slots, in HAProxy's numbering: those the inherited rules add
    /// (`http-request capture ... len N`, `tcp-request content capture`), then the proxy's
    /// `capture request header`, `declare capture request` and slot-adding rules in line
    /// order (see `validate::rules::Slots`). Rule-added slots have no header name.
    pub req_captures: Vec<Capture>,
    /// The statistics page (`stats ...`; HTTP mode only), answered after the `http-request`
    /// rules of the proxy that has it, before its `redirect` lines.
    pub stats: Option<StatsPage>,
    /// `stats http-request` rules (allow, deny, auth), run when the page is asked for.
    pub stats_http_request: Vec<Rule<HttpReqAction>>,
    /// `stats admin if|unless COND`: the page offers and accepts server changes when one holds.
    pub stats_admin: Vec<Rule<()>>,
    /// `monitor fail if|unless COND` (frontend side): a `monitor-uri` request is answered
    /// 503 when one holds.
    pub monitor_fail: Vec<Rule<()>>,
    /// `balance hash EXPR` (backend side): the expression whose value is hashed.
    pub balance_hash: Option<crate::rules::Expr>,
}

/// The statistics page of a proxy, as its `stats` lines set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsPage {
    /// `stats uri` (default `/haproxy?stats`): compared with the request's path when it starts
    /// with `/`, as a prefix.
    pub uri: String,
    /// `stats realm`.
    pub realm: Option<String>,
    /// `stats auth USER:PASS`, in order (clear-text passwords, as HAProxy takes them).
    pub users: Vec<(String, String)>,
    /// `stats refresh`: the page asks the browser to reload it this often.
    pub refresh: Option<Duration>,
    /// `stats scope NAME` (`.`: the proxy itself): only these proxies are shown.
    pub scope: Vec<String>,
    pub hide_version: bool,
    pub show_legends: bool,
    pub show_modules: bool,
    /// `stats show-node [NAME]`: `Some(None)` shows the global `node` (or host name).
    pub show_node: Option<Option<String>>,
    /// `stats show-desc [TEXT]`: `Some(None)` shows the global `description`.
    pub show_desc: Option<Option<String>>,
}

impl Default for StatsPage {
    fn default() -> Self {
        StatsPage {
            uri: "/haproxy?stats".into(),
            realm: None,
            users: Vec::new(),
            refresh: None,
            scope: Vec::new(),
            hide_version: false,
            show_legends: false,
            show_modules: false,
            show_node: None,
            show_desc: None,
        }
    }
}

impl ProxyRules {
    /// Whether the `tcp-request connection` list runs at accept, before a PROXY protocol
    /// header is read and before a TLS handshake, as HAProxy runs it: when it is not empty and
    /// only accepts, rejects or says `expect-proxy` (which it must run there). A list that
    /// tracks, sets variables or addresses needs the session's state and runs with the
    /// `tcp-request session` list, after the handshakes; the configuration refuses
    /// `expect-proxy` in such a list.
    pub fn connection_at_accept(&self) -> bool {
        use crate::rules::action::TcpReqAction as A;
        !self.tcp_request_connection.is_empty()
            && self
                .tcp_request_connection
                .iter()
                .all(|r| matches!(r.action, A::Accept | A::Reject | A::ExpectProxy))
    }
}

/// The `global` section (several `global` sections merge into one).
#[derive(Debug, Clone)]
pub struct Global {
    /// `ssl-default-bind-*`, `crt-base`, `ca-base`: what bind lines' TLS settings start from.
    pub ssl: Arc<crate::tls::server::BindDefaults>,
    /// `ssl-default-server-*`, `ssl-server-verify`: what server lines' TLS settings start
    /// from.
    pub ssl_server: Arc<crate::tls::client::ServerDefaults>,
    /// The environment as the configuration left it (`setenv` and friends), for `env()`.
    pub env: std::collections::HashMap<String, String>,
    /// Process-wide connection limit. `None`: derived at start from the file descriptor limit.
    pub maxconn: Option<u32>,
    /// Worker threads. `None`: one per CPU the process may run on.
    pub nbthread: Option<usize>,
    /// Thread-to-CPU pinning from `cpu-map`, already expanded (`auto:` included).
    pub cpu_map: Vec<CpuMap>,
    pub daemon: bool,
    pub pidfile: Option<PathBuf>,
    /// `ulimit-n`: raise RLIMIT_NOFILE to this at start.
    pub ulimit_n: Option<u64>,
    /// `maxconnrate`: new connections per second, process-wide (accepts are paced).
    pub maxconnrate: Option<u32>,
    /// `maxsessrate`: new sessions per second, process-wide (accepts are paced).
    pub maxsessrate: Option<u32>,
    /// `maxsslrate`: new TLS connections per second on `ssl` listeners (accepts are paced).
    pub maxsslrate: Option<u32>,
    /// From `user` (resolved through the password database) or `uid`.
    pub uid: Option<u32>,
    /// From `group` (resolved through the group database) or `gid`.
    pub gid: Option<u32>,
    pub chroot: Option<PathBuf>,
    pub hard_stop_after: Option<Duration>,
    pub node: Option<String>,
    pub description: Option<String>,
    /// `log` lines of the global section (used by `log global` in proxies).
    pub logs: Vec<LogTarget>,
    /// `log-tag`: the syslog tag (HAProxy's default: the program name, `haproxy`).
    pub log_tag: Option<String>,
    /// `log-send-hostname [NAME]`: the host name put in syslog headers (the system's when the
    /// line gives none); `None`: no host name field.
    pub log_send_hostname: Option<String>,
    pub stats_sockets: Vec<StatsSocket>,
    /// `stats timeout`: idle timeout of a runtime API connection.
    pub stats_timeout: Option<Duration>,
    /// `stats maxconn`: concurrent runtime API connections.
    pub stats_maxconn: Option<u32>,
    /// `tune.bufsize`, bytes (HAProxy's default: 16384).
    pub tune_bufsize: usize,
    /// `tune.idle-pool.shared` (default `on`): a worker may take over an idle server
    /// connection another worker holds.
    pub idle_pool_shared: bool,
    /// `tune.maxrewrite`, bytes (HAProxy's default: 1024).
    pub tune_maxrewrite: usize,
    /// `expose-experimental-directives`: HAProxy's experimental keywords (`normalize-uri`)
    /// are accepted.
    pub expose_experimental: bool,
}

impl Default for Global {
    fn default() -> Self {
        Global {
            ssl: Default::default(),
            ssl_server: Default::default(),
            env: Default::default(),
            maxconn: None,
            nbthread: None,
            cpu_map: Vec::new(),
            daemon: false,
            pidfile: None,
            ulimit_n: None,
            maxconnrate: None,
            maxsessrate: None,
            maxsslrate: None,
            uid: None,
            gid: None,
            chroot: None,
            hard_stop_after: None,
            node: None,
            description: None,
            logs: Vec::new(),
            log_tag: None,
            log_send_hostname: None,
            stats_sockets: Vec::new(),
            stats_timeout: None,
            stats_maxconn: None,
            tune_bufsize: 16384,
            idle_pool_shared: true,
            tune_maxrewrite: 1024,
            expose_experimental: false,
        }
    }
}

/// One resolved `cpu-map` entry: worker thread `thread` (0-based) may run on `cpus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMap {
    pub thread: usize,
    pub cpus: Vec<usize>,
}

/// Where a `log` line sends messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogAddress {
    Stdout,
    Stderr,
    /// `ip:port` or `udp@ip:port` (port 514 when omitted).
    Udp(SocketAddr),
    /// A UNIX datagram socket such as `/dev/log`.
    Unix(PathBuf),
    /// `abns@NAME`: a UNIX datagram socket in Linux's abstract namespace.
    Abns(String),
    /// `fd@N` (other than 1 and 2, which are `stdout` and `stderr`): an inherited descriptor
    /// (a pipe, a terminal, a socket), one write per line.
    Fd(i32),
    /// `ring@NAME`: the ring section NAME.
    Ring(String),
}

/// A parsed `log` line (`log <target> [len N] [format F] [sample RANGES:SIZE] <facility> [<level> [<minlevel>]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTarget {
    pub address: LogAddress,
    pub len: Option<usize>,
    /// `rfc3164` (default), `rfc5424`, `short`, `raw`, `iso`, `timed`, `priority`.
    pub format: String,
    pub facility: String,
    pub level: Option<String>,
    pub minlevel: Option<String>,
    /// `sample RANGES:SIZE`: of each `size` lines in a row, only those at the (1-based)
    /// positions of `ranges` go to this target (HAProxy's log load balancing).
    pub sample: Option<LogSample>,
}

/// A `log ... sample RANGES:SIZE` argument: sorted ranges that do not overlap, all within
/// `size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSample {
    pub ranges: Vec<(u32, u32)>,
    pub size: u32,
}

impl LogSample {
    /// Whether the line at 0-based position `n` of the stream of lines goes out.
    pub fn takes(&self, n: u64) -> bool {
        let pos = n % u64::from(self.size.max(1)) + 1;
        self.ranges
            .iter()
            .any(|&(lo, hi)| (u64::from(lo)..=u64::from(hi)).contains(&pos))
    }

    /// Parses `RANGES:SIZE` as HAProxy does: `N` or `LOW-HIGH` ranges, comma-separated,
    /// numbered from 1, not overlapping; a size at least the highest limit.
    pub fn parse(word: &str) -> Result<LogSample, String> {
        let (ranges, size) = word.split_once(':').ok_or("missing sample size")?;
        let mut out: Vec<(u32, u32)> = Vec::new();
        for r in ranges.split(',') {
            let bad = || format!("wrong sample range '{r}'");
            let num = |s: &str| s.parse::<u32>().ok().filter(|&n| n > 0);
            let (lo, hi) = match r.split_once('-') {
                None => {
                    let n = num(r).ok_or_else(bad)?;
                    (n, n)
                }
                Some((a, b)) => {
                    let (lo, hi) = (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?);
                    if hi <= lo {
                        return Err(bad());
                    }
                    (lo, hi)
                }
            };
            if out
                .iter()
                .any(|&(a, b)| (a..=b).contains(&lo) || (a..=b).contains(&hi))
            {
                return Err("ranges are overlapping".into());
            }
            out.push((lo, hi));
        }
        let size = size
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("wrong sample size '{size}' for sample range '{word}'"))?;
        let highest = out.iter().map(|r| r.1).max().unwrap_or(0);
        if size < highest {
            return Err(format!(
                "sample size {size} should be greater or equal to {highest} the maximum of the high ranges limits"
            ));
        }
        out.sort_unstable();
        Ok(LogSample { ranges: out, size })
    }
}

/// `option tcplog`, as the `log-format` it stands for.
pub const TCPLOG_FORMAT: &str =
    "%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq";

/// `option httplog`, as the `log-format` it stands for.
pub const HTTPLOG_FORMAT: &str = "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r";

/// `option httpslog` (HAProxy 2.6's `default_https_log_format`), as the `log-format` it
/// stands for: `option httplog`'s and the TLS facts.
pub const HTTPSLOG_FORMAT: &str = "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r %[fc_err]/%[ssl_fc_err,hex]/%[ssl_c_err]/%[ssl_c_ca_err]/%[ssl_fc_is_resumed] %[ssl_fc_sni]/%sslv/%sslc";

/// `option httplog clf`, as the `log-format` it stands for.
pub const HTTPLOG_CLF_FORMAT: &str = "%{+Q}o %{-Q}ci - - [%trg] %r %ST %B \"\" \"\" %cp %ms %ft %b %s %TR %Tw %Tc %Tr %Ta %tsc %ac %fc %bc %sc %rc %sq %bq %CC %CS %hrl %hsl";

/// A `capture request header NAME len N` or `capture response header NAME len N` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    pub response: bool,
    /// The header captured; empty for a slot only rules write (`declare capture`).
    pub name: String,
    /// At most this many bytes of the value are kept.
    pub len: usize,
    /// Where it is declared (file rank, line): slots are numbered in line order.
    pub at: (usize, u32),
}

/// A `stats socket` line (the runtime API arrives with a later issue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsSocket {
    /// A UNIX socket path, or `ipv4@`/`ipv6@`/plain `ip:port` as a TCP address.
    pub address: StatsAddress,
    /// `mode`, `user`/`uid`, `group`/`gid`: the socket file of a UNIX socket.
    pub unix_perms: UnixPerms,
    /// `user`, `operator` or `admin` (HAProxy's default is `operator`).
    pub level: String,
    pub expose_fd_listeners: bool,
}

/// Where a stats socket listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsAddress {
    /// `unix@PATH` or a plain path.
    Unix(PathBuf),
    /// `abns@NAME`: a Linux abstract-namespace UNIX socket (no file).
    Abns(String),
    /// `ipv4@`/`ipv6@`/plain `ip:port`.
    Tcp(SocketAddr),
    /// `fd@N`: a listening socket (TCP or UNIX) inherited from the parent process.
    Fd(i32),
}

/// Where a `bind` listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// An IP address and port (`1.2.3.4:80`, `*:80`, `ipv4@`, `ipv6@`).
    Inet(SocketAddr),
    /// `unix@PATH`, a plain `/path` or `abns@NAME`: a UNIX stream socket.
    Unix(UnixAddr),
    /// `fd@N`: a stream socket (TCP or UNIX) inherited from the parent process, already bound
    /// and listening.
    Fd(i32),
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Inet(a) => write!(f, "{a}"),
            ListenAddr::Unix(u) => write!(f, "{u}"),
            ListenAddr::Fd(n) => write!(f, "fd@{n}"),
        }
    }
}

/// A UNIX stream socket's address: a file system path, or a name in Linux's abstract
/// namespace (`abns@`, no file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnixAddr {
    Path(PathBuf),
    Abstract(String),
}

impl std::fmt::Display for UnixAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnixAddr::Path(p) => write!(f, "{}", p.display()),
            UnixAddr::Abstract(n) => write!(f, "abns@{n}"),
        }
    }
}

/// What the `mode`, `user`/`uid` and `group`/`gid` bind options ask of a UNIX socket's file
/// (HAProxy applies them to the file before renaming it into place; abstract sockets and
/// IP binds ignore them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnixPerms {
    /// Permission bits (octal on the line); `None`: the umask decides.
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// `mode tcp` or `mode http`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Tcp,
    Http,
}

/// Every `timeout` kind. `None` means "not set": the runtime decides what that means (for
/// `client`/`server`/`connect`, HAProxy's meaning is "no timeout" and it warns at load).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Option<Duration>,
    pub client: Option<Duration>,
    pub server: Option<Duration>,
    pub queue: Option<Duration>,
    pub tunnel: Option<Duration>,
    pub http_request: Option<Duration>,
    pub http_keep_alive: Option<Duration>,
    pub check: Option<Duration>,
    pub client_fin: Option<Duration>,
    pub server_fin: Option<Duration>,
    /// `timeout tarpit`: how long `http-request tarpit` holds a connection (default: `timeout
    /// connect`).
    pub tarpit: Option<Duration>,
}

/// HTTP connection handling (`option http-keep-alive|http-server-close|httpclose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpConnMode {
    #[default]
    KeepAlive,
    ServerClose,
    Close,
}

/// An `errorfile`: the status it replaces and the raw HTTP response read (and checked) at load;
/// or an `http-error` whose headers or body are log-format strings (`reply`), rendered for
/// each transaction that gets the status (`response` is then empty).
#[derive(Debug, Clone)]
pub struct ErrorFile {
    pub status: u16,
    pub response: Vec<u8>,
    pub reply: Option<Arc<crate::rules::action::Reply>>,
}

/// Bascule extension `outlier-ejection`: a server with `consecutive` errors in a row on live
/// traffic (failed connects, 5xx answers) is taken out of balancing for `ejection_time`, as long
/// as no more than `max_percent` of the backend's servers are out at once (at least one may be).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutlierEjection {
    pub consecutive: u32,
    pub ejection_time: Duration,
    pub max_percent: u32,
}

/// `retry-on`: which failures a retry may follow. A layer-7 retry (anything but `conn-failure`)
/// is made only for a request that is safe to send again: idempotent and without a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryOn {
    pub conn_failure: bool,
    pub empty_response: bool,
    pub junk_response: bool,
    pub response_timeout: bool,
    /// Final response statuses that trigger a retry (`500`, `502`, ...).
    pub statuses: Vec<u16>,
}

impl Default for RetryOn {
    /// HAProxy's default: `retry-on conn-failure`.
    fn default() -> Self {
        RetryOn {
            conn_failure: true,
            empty_response: false,
            junk_response: false,
            response_timeout: false,
            statuses: Vec::new(),
        }
    }
}

/// `http-reuse`: which idle server connections a request may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpReuse {
    /// Idle connections are never shared between sessions.
    Never,
    /// A session's first request gets a connection of its own; later ones may reuse idle ones.
    #[default]
    Safe,
    /// Any request may reuse an idle connection that has already served a request (every
    /// pooled connection has).
    Aggressive,
    /// Any request may reuse any idle connection.
    Always,
}

/// `option forwardfor [except NET] [header NAME] [if-none]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardFor {
    /// A network (address, prefix length) whose clients get no header.
    pub except: Option<(std::net::IpAddr, u8)>,
    /// Header name, `X-Forwarded-For` unless `header` says otherwise.
    pub header: String,
    pub if_none: bool,
}

/// `option originalto [except NET] [header NAME]`: the address the client connected to, in
/// `X-Original-To` (unless it is in `except`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginalTo {
    pub except: Option<(std::net::IpAddr, u8)>,
    pub header: String,
}

/// `option httpchk [METH URI [VER]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpCheck {
    pub method: String,
    pub uri: String,
    pub version: String,
}

/// What an HTTP health check expects (`http-check expect [!] status CODES | string TEXT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpExpect {
    /// The status is in one of these inclusive ranges (`200`, `200-399`, `200,204`).
    Status(Vec<(u16, u16)>),
    /// The response body contains this text.
    String(String),
    /// The status code (as text) matches this regular expression (checked at load).
    RStatus(String),
    /// The response body matches this regular expression (checked at load).
    RString(String),
    /// `hdr` / `fhdr` (`full`: each header line's whole value, not its comma-separated
    /// values): a header whose name matches `name` and, when given, one of whose values
    /// matches `value`.
    Hdr {
        full: bool,
        name: HdrPattern,
        value: Option<HdrPattern>,
    },
}

/// A header name or value pattern of `http-check expect hdr|fhdr`: `-m str|beg|end|sub|reg`
/// (names compare without case), a log-format string (`name-lf`, `value-lf`) when `lf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HdrPattern {
    pub how: HdrMatch,
    pub text: String,
    pub lf: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HdrMatch {
    Str,
    Beg,
    End,
    Sub,
    Reg,
}

/// One `http-check expect` or variable action, run in order on the check's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpCheckStep {
    Expect {
        negate: bool,
        expect: HttpExpect,
    },
    /// `set-var(check.NAME) EXPR`, `set-var-fmt(...) FMT` or `unset-var(...)`: the words
    /// after `http-check`, compiled in the validate stage (see [`HttpCheckCode`]); `at` is
    /// the line, as `file:line`.
    Var {
        words: Vec<String>,
        at: String,
    },
}

/// What the validate stage compiles of a backend's [`HttpCheckStep`]s, at the same places:
/// the log-format patterns and regular expressions of an `expect`, the action of a
/// variable step. Variables are numbered in a table of the check's own (only checks see
/// `check.` variables); `vars` is how many.
#[derive(Debug, Default)]
pub struct HttpCheckCode {
    pub steps: Vec<HttpCheckStepCode>,
    pub vars: usize,
}

#[derive(Debug)]
pub enum HttpCheckStepCode {
    Expect {
        name_lf: Option<crate::rules::lf::LfString>,
        value_lf: Option<crate::rules::lf::LfString>,
        name_re: Option<regex::bytes::Regex>,
        value_re: Option<regex::bytes::Regex>,
    },
    Var(crate::rules::action::VarAction),
}

/// One `tcp-check` step, run in order by a `option tcp-check` health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpCheckStep {
    /// `connect [port N]`: (re)connect, to another port if given.
    Connect { port: Option<u16> },
    /// `send STRING` / `send-binary HEX`.
    Send(Vec<u8>),
    /// `expect [min-recv N] [!] string S | binary HEX | rstring REGEX | rbinary REGEX`, with
    /// what the check reports ([`ExpectReport`]). With `min_recv`, the answer is judged once
    /// that many bytes came (HAProxy's bounded match), else as soon as it matches or the
    /// server closes.
    Expect {
        negate: bool,
        pattern: TcpExpect,
        min_recv: Option<usize>,
        report: ExpectReport,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpExpect {
    /// The bytes received so far contain these (`string`, `binary`).
    Bytes(Vec<u8>),
    /// The bytes received so far match this regular expression (`rstring`), checked at load.
    Regex(String),
    /// The bytes received so far, written as upper-case hex digits, match this regular
    /// expression (`rbinary`), checked at load.
    HexRegex(String),
    /// A protocol check's own reading of the reply (HAProxy's `expect custom`).
    Custom(CustomExpect),
}

/// The replies protocol checks read themselves (HAProxy's custom expect functions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomExpect {
    /// `option mysql-check`: the server's initial handshake packet (or its error packet).
    MysqlHandshake,
    /// `option mysql-check user U`: the packet after the handshake, answering the login.
    MysqlOk,
    /// `option ldap-check`: the LDAPv3 bind response and its result code.
    LdapBind,
}

/// What a `tcp-check expect` reports: `ok-status`, `error-status`, `tout-status`, the
/// `on-success` and `on-error` texts, and `status-code` (HAProxy's defaults when `None`:
/// L7OK, L7RSP, L7TOUT, a generic text, no code).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectReport {
    pub ok_status: Option<CheckStatus>,
    pub error_status: Option<CheckStatus>,
    pub tout_status: Option<CheckStatus>,
    pub on_success: Option<CheckText>,
    pub on_error: Option<CheckText>,
    /// `status-code res.payload(OFFSET,LENGTH)`: the check's code read from the reply.
    pub status_code: Option<(usize, usize)>,
}

/// A check result status an expect may report (`L7OK`, `L7STS`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    L4Ok,
    L4Tout,
    L4Con,
    L6Ok,
    L6Tout,
    L6Rsp,
    L7Ok,
    L7OkC,
    L7Tout,
    L7Rsp,
    L7Sts,
}

impl CheckStatus {
    /// HAProxy's name of the status, as `ok-status`/`error-status`/`tout-status` take it.
    pub fn parse(word: &str) -> Option<CheckStatus> {
        use CheckStatus as S;
        Some(match word {
            "L4OK" => S::L4Ok,
            "L4TOUT" => S::L4Tout,
            "L4CON" => S::L4Con,
            "L6OK" => S::L6Ok,
            "L6TOUT" => S::L6Tout,
            "L6RSP" => S::L6Rsp,
            "L7OK" => S::L7Ok,
            "L7OKC" => S::L7OkC,
            "L7TOUT" => S::L7Tout,
            "L7RSP" => S::L7Rsp,
            "L7STS" => S::L7Sts,
            _ => return None,
        })
    }

    /// The reason HAProxy's check lines give for the status.
    pub fn reason(self) -> &'static str {
        use CheckStatus as S;
        match self {
            S::L4Ok => "Layer4 check passed",
            S::L4Tout => "Layer4 timeout",
            S::L4Con => "Layer4 connection problem",
            S::L6Ok => "Layer6 check passed",
            S::L6Tout => "Layer6 timeout",
            S::L6Rsp => "Layer6 invalid response",
            S::L7Ok => "Layer7 check passed",
            S::L7OkC => "Layer7 check conditionally passed",
            S::L7Tout => "Layer7 timeout",
            S::L7Rsp => "Layer7 invalid response",
            S::L7Sts => "Layer7 wrong status",
        }
    }

    /// True for the statuses of a passed check.
    pub fn passed(self) -> bool {
        matches!(
            self,
            CheckStatus::L4Ok | CheckStatus::L6Ok | CheckStatus::L7Ok | CheckStatus::L7OkC
        )
    }
}

/// The info text of a check result (`on-success`, `on-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckText {
    /// A fixed text.
    Fixed(String),
    /// The reply from byte `from` on (HAProxy's `%[res.payload(FROM,0)]`), with leading
    /// spaces removed (`ltrim(' ')`) and cut at the first CR or LF (`cut_crlf`) when asked.
    Reply {
        from: usize,
        ltrim: bool,
        cut_crlf: bool,
    },
}

/// A protocol check (`option mysql-check`, `pgsql-check`, `redis-check`, `smtpchk`,
/// `ldap-check`): HAProxy's predefined `tcp-check` rule set for it, built at load with the
/// option's arguments (user name, greeting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoCheck {
    /// The option, for messages (`mysql-check`).
    pub name: &'static str,
    pub steps: Vec<TcpCheckStep>,
}

/// `http-check send` and `http-check expect` lines of a backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpCheckRules {
    /// `send meth M`, `uri U`, `ver V`: override `option httpchk`'s values.
    pub method: Option<String>,
    pub uri: Option<String>,
    pub version: Option<String>,
    /// `send hdr NAME VALUE`, in order.
    pub headers: Vec<(String, String)>,
    /// `send body TEXT`.
    pub body: Option<String>,
    /// `expect [!] ...` and `set-var`/`unset-var` lines, in order; without an expect, any
    /// 2xx or 3xx status passes (HAProxy's default).
    pub steps: Vec<HttpCheckStep>,
}

/// The `option` keywords of a proxy, after inheritance from `defaults` and `no option` negation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyOptions {
    pub forwardfor: Option<ForwardFor>,
    pub originalto: Option<OriginalTo>,
    pub http_conn_mode: HttpConnMode,
    pub abortonclose: bool,
    /// `option http-buffer-request`: the request body is waited for (within `timeout
    /// http-request`, as much as the buffer holds) before the `http-request` rules run.
    pub http_buffer_request: bool,
    /// `option log-health-checks`: log each check result that changes the check's status or
    /// the server's health, and shorten state-change lines accordingly.
    pub log_health_checks: bool,
    /// `option allbackups`: use every backup server, not only the first usable one.
    pub allbackups: bool,
    pub httplog: bool,
    pub tcplog: bool,
    pub dontlognull: bool,
    /// `option logasap`: the line goes out when the response head arrives (TCP mode: when the
    /// server connection is up), its total times and byte count prefixed with `+`.
    pub logasap: bool,
    /// `option log-separate-errors`: traffic lines of failed sessions go out at level `err`.
    pub log_separate_errors: bool,
    /// The access-log format: `log-format`, or the one `option httplog`/`tcplog` stands for.
    /// `None`: HAProxy's legacy line ("Connect from ... to ...") at accept.
    pub log_format: Option<String>,
    /// `log-format-sd`: the structured-data field of RFC 5424 lines.
    pub log_format_sd: Option<String>,
    /// `log-tag` of the proxy (else the global one).
    pub log_tag: Option<String>,
    /// `capture request|response header` and `declare capture`, in order. In a model
    /// frontend, the request ones are every request slot in HAProxy's numbering, those that
    /// rules add included ([`ProxyRules::req_captures`]).
    pub captures: Vec<Capture>,
    /// `unique-id-format`: a request's unique id (`%ID`).
    pub unique_id_format: Option<String>,
    /// `unique-id-header`: the request header that carries the unique id to the server.
    pub unique_id_header: Option<String>,
    /// Where `log-format`, `log-format-sd` and `unique-id-format` (or the `option httplog`
    /// / `tcplog` standing for a format) were written, for the validate stage's messages.
    pub format_spans: FormatSpans,
    pub clitcpka: bool,
    pub srvtcpka: bool,
    pub splice_auto: bool,
    pub splice_request: bool,
    pub splice_response: bool,
    pub tcp_check: bool,
    pub httpchk: Option<HttpCheck>,
    /// `http-check send|expect` (used with `option httpchk`).
    pub http_check: HttpCheckRules,
    /// `tcp-check` steps (used with `option tcp-check`).
    pub tcp_check_steps: Vec<TcpCheckStep>,
    /// A protocol check, which replaces `option tcp-check` and `option httpchk` (the last
    /// check option of a proxy wins, as in HAProxy).
    pub proto_check: Option<ProtoCheck>,
    /// `option persist`: a client's cookie may lead to a server that is down.
    pub persist: bool,
    /// `capture cookie NAME len N` (frontend side): `%CC` and `%CS`.
    pub capture_cookie: Option<(String, usize)>,
    /// `option http-restrict-req-hdr-names`: what becomes of a request header whose name has
    /// a character other than a letter, a digit or `-`.
    pub restrict_hdr_names: HdrNames,
}

/// `option http-restrict-req-hdr-names preserve|delete|reject`. Such names (`X_Forwarded`)
/// are legal in HTTP but read as the `-` spelling by CGI-like servers, which lets a client
/// smuggle a header past rules that look for the real one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HdrNames {
    /// Forwarded as they came (HAProxy's default).
    #[default]
    Preserve,
    /// Removed from the request.
    Delete,
    /// The request is denied with a 403.
    Reject,
}

/// `cookie NAME [rewrite|insert|prefix] [indirect] [nocache] [postonly] [preserve] [httponly]
/// [secure] [domain D]... [maxidle T] [maxlife T] [dynamic] [attr A]...`: cookie persistence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CookiePersist {
    pub name: String,
    pub rewrite: bool,
    pub insert: bool,
    pub prefix: bool,
    pub indirect: bool,
    pub nocache: bool,
    pub postonly: bool,
    pub preserve: bool,
    pub httponly: bool,
    pub secure: bool,
    /// The `domain` values joined as HAProxy writes them (`a; domain=b`).
    pub domain: Option<String>,
    /// Seconds; 0: not set.
    pub maxidle: u32,
    pub maxlife: u32,
    /// Servers without a `cookie` get one hashed from `dynamic-cookie-key`, address and port.
    pub dynamic: bool,
    /// The `attr` values joined with `; `.
    pub attrs: Option<String>,
}

impl CookiePersist {
    /// HAProxy shows the cookie letters of `%tsc` only with one of these modes (`PR_CK_ANY`).
    pub fn shows_in_logs(&self) -> bool {
        self.rewrite || self.insert || self.prefix || self.indirect
    }
}

/// The longest `dynamic-cookie-key` Bascule takes: a server's cookie is hashed from a fixed
/// buffer at each use.
pub const MAX_DYNAMIC_COOKIE_KEY: usize = 1024;

/// `force-persist` or `ignore-persist`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistRule {
    Force,
    Ignore,
}

/// One listening address of a frontend. Comma lists and port ranges in a `bind` line become one
/// `Bind` each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub addr: ListenAddr,
    /// `name`: listener name, for logs and stats.
    pub name: Option<String>,
    pub backlog: Option<u32>,
    pub maxconn: Option<u32>,
    /// `v4v6`: an IPv6 wildcard also takes IPv4.
    pub v4v6: bool,
    /// `v6only`: an IPv6 socket takes IPv6 only.
    pub v6only: bool,
    /// `transparent`: IP_TRANSPARENT, to bind a non-local address.
    pub transparent: bool,
    /// `accept-proxy`: every connection starts with a PROXY protocol header (v1 or v2) whose
    /// addresses replace the connection's own (`proto::proxy`).
    pub accept_proxy: bool,
    /// `mode`, `user`, `uid`, `group`, `gid`: the socket file of a UNIX bind.
    pub unix_perms: UnixPerms,
    /// Where the `bind` line is, as `file:line`, for errors raised when binding.
    pub location: String,
    /// `ssl`: the line's certificates and the rustls configuration they built (one per
    /// line, shared by its addresses).
    pub tls: Option<Arc<crate::tls::server::Built>>,
    /// `proto h1|h2`: the HTTP version clients speak, whatever ALPN says (`None`: HTTP/1.1,
    /// or what a TLS handshake's ALPN chose).
    pub proto: Option<Mux>,
}

/// An HTTP multiplexer a `bind` or `server` line names with `proto` (HAProxy's mux names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mux {
    /// `h1`: HTTP/1.x.
    H1,
    /// `h2`: HTTP/2 from the first byte (prior knowledge, "h2c" in clear text).
    H2,
}

impl Mux {
    /// Reads a `proto` word; `Err` says why it is refused.
    pub fn parse(word: &str) -> Result<Mux, String> {
        match word {
            "h1" => Ok(Mux::H1),
            "h2" => Ok(Mux::H2),
            "fcgi" | "h3" | "quic" => Err(format!(
                "'proto': MUX protocol '{word}' is a HAProxy protocol that Bascule does not support yet"
            )),
            other => Err(format!(
                "'proto': unknown MUX protocol '{other}' (expected h1 or h2)"
            )),
        }
    }
}

impl ProxyRules {
    /// Whether a request passes through rules of this proxy before its backend is chosen
    /// (`tcp-request content`, `http-request`, `redirect`).
    pub fn has_request_rules(&self) -> bool {
        !(self.tcp_request_content.is_empty()
            && self.http_request.is_empty()
            && self.redirects.is_empty()
            && self.stats.is_none())
    }

    /// Whether responses pass through rules of this proxy.
    pub fn has_response_rules(&self) -> bool {
        !(self.http_response.is_empty()
            && self.http_after_response.is_empty()
            && self.tcp_response_content.is_empty())
    }

    /// The first `use_backend` line that needs no evaluation (no condition, a static name).
    /// Conditional and dynamic lines need the runtime's rule evaluation, wired separately.
    pub fn first_static_backend(&self) -> Option<usize> {
        self.use_backends
            .iter()
            .find_map(|r| match (&r.action, &r.cond) {
                (BackendTarget::Static(i), None) => Some(*i),
                _ => None,
            })
    }
}

/// The lines of a proxy's format keywords (see [`ProxyOptions::format_spans`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormatSpans {
    pub log_format: Option<crate::config::diag::Span>,
    pub log_format_sd: Option<crate::config::diag::Span>,
    pub unique_id_format: Option<crate::config::diag::Span>,
}

/// A `frontend` section, or the frontend half of a `listen` section.
#[derive(Debug, Clone)]
pub struct Frontend {
    pub name: String,
    /// Proxy id (`iid` in `show stat`), unique among all proxies, from 1 in file order.
    pub id: u32,
    pub mode: Mode,
    pub binds: Vec<Bind>,
    /// Frontend `maxconn`. `None`: no frontend limit (the global one still applies).
    pub maxconn: Option<u32>,
    /// `backlog N`: the listen backlog of binds that set none (else derived from `maxconn`).
    pub backlog: Option<u32>,
    /// `default_backend`, as an index into [`Config::backends`]. For a `listen` section, its own
    /// backend half unless it names another.
    pub default_backend: Option<usize>,
    /// `monitor-uri URI`: requests for it are answered 200 before any `http-request` rule,
    /// and not logged (a URI starting with `/` is compared with the request's path).
    pub monitor_uri: Option<String>,
    /// The proxy's rules, `use_backend` lines included (see [`ProxyRules`] for the order).
    pub rules: std::sync::Arc<ProxyRules>,
    pub timeouts: Timeouts,
    pub options: ProxyOptions,
    /// `errorfile CODE PATH`: raw HTTP responses sent instead of the built-in ones.
    pub errorfiles: Vec<ErrorFile>,
    /// `log` lines of this proxy (`log global` already expanded to the global targets).
    pub logs: Vec<LogTarget>,
    /// `disabled` on the proxy: parsed, the proxy is not started.
    pub disabled: bool,
    /// The proxy's own stick table (`stick-table`), an index into [`Config::tables`].
    pub table: Option<usize>,
    /// The compiled `log-format`, `log-format-sd` and `unique-id-format`.
    pub formats: std::sync::Arc<LogFormats>,
    /// `rate-limit sessions N`: at most N new sessions per second (accepts are paced).
    pub rate_limit_sessions: Option<u32>,
}

/// A frontend's log formats, compiled (their `%[...]` are rule expressions, resolved against
/// the same names as the rules). The strings are in [`ProxyOptions`].
#[derive(Debug, Default)]
pub struct LogFormats {
    /// The access-log line: `log-format`, or the one `option httplog`/`tcplog` stands for
    /// (`option httplog` on a TCP frontend falls back to the `tcplog` one, as in HAProxy).
    /// `None`: HAProxy's legacy "Connect from" line at accept.
    pub access: Option<crate::log::format::Format>,
    /// `log-format-sd`.
    pub sd: Option<crate::log::format::Format>,
    /// `unique-id-format`.
    pub unique_id: Option<crate::log::format::Format>,
}

/// How a backend picks a server (`balance`). Algorithms not listed here are rejected at load as
/// "not supported yet".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Balance {
    /// Smooth weighted round-robin; weights may change at run time.
    #[default]
    RoundRobin,
    /// Weighted round-robin over the weights given at start; cheaper, but static.
    StaticRr,
    /// Fewest connections per unit of weight; ties shared round-robin.
    LeastConn,
    /// The first server (in declaration order) below its `maxconn`.
    First,
    /// `random[(DRAWS)]`: the least loaded of DRAWS weighted random draws (default 2).
    Random { draws: u32 },
    /// `url_param NAME`: a hash of that query-string parameter (HTTP only); round-robin when
    /// the request has none.
    UrlParam { name: String },
    /// `hdr(NAME) [use_domain_only]`: a hash of that request header (HTTP only); round-robin
    /// when the request has none.
    Hdr { name: String, use_domain_only: bool },
    /// A hash of the client's address (map-based).
    Source,
    /// `hash EXPR`: a hash of what the sample expression gives, as binary (compiled into the
    /// backend's [`ProxyRules::balance_hash`]; `at` is the `balance` line, for its
    /// diagnostics); round-robin when it gives nothing.
    Hash { expr: String, at: super::diag::Span },
    /// `rdp-cookie[(NAME)]`: a hash of the RDP cookie NAME (`mstshash` by default) of the
    /// connection's first bytes (TCP mode, after `tcp-request content` has waited for them);
    /// round-robin without one.
    RdpCookie { name: String },
    /// A hash of the request URI (HTTP only): the path, or the whole target with `whole`,
    /// cut to `len` characters or `depth` directories.
    Uri {
        whole: bool,
        /// `path-only`: skip `scheme://authority` of an absolute URI.
        path_only: bool,
        len: Option<u32>,
        depth: Option<u32>,
    },
}

/// `hash-type`: how `balance source|uri` maps a key to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HashType {
    pub method: HashMethod,
    pub function: HashFunction,
    /// `avalanche`: mix the hash before use.
    pub avalanche: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashMethod {
    /// A static table of servers repeated by weight (HAProxy's default).
    #[default]
    MapBased,
    /// A ring of points per server: a change moves only that server's keys.
    Consistent,
    /// Bascule extension: a Maglev lookup table of 65,537 entries built from server names, the
    /// same on every worker and every instance.
    Maglev,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashFunction {
    #[default]
    Sdbm,
    Djb2,
    Wt6,
    Crc32,
    None,
}

/// Active health-check parameters of a server with `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckParams {
    /// `inter`: interval between checks (HAProxy's default: 2 s).
    pub inter: Duration,
    /// `fastinter`: interval while the server is changing state (default: `inter`).
    pub fastinter: Duration,
    /// `downinter`: interval while the server is DOWN (default: `inter`).
    pub downinter: Duration,
    /// `rise`: consecutive successes to go UP (default 2).
    pub rise: u32,
    /// `fall`: consecutive failures to go DOWN (default 3).
    pub fall: u32,
    /// Where checks go at start: `addr` and `port` override the server's address and port.
    /// At run time the checker follows the server's current address (`set server addr`)
    /// unless `addr`/`port` were given ([`Server::check_addr`], [`Server::check_port`]).
    pub addr: SocketAddr,
}

/// What live traffic counts as a server error for passive health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observe {
    /// Connection failures.
    Layer4,
    /// Connection failures and HTTP 5xx responses (except 501 and 505) or invalid responses.
    Layer7,
}

/// `on-error`: the reaction to `error-limit` consecutive live errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Check at `fastinter` until a check settles the state.
    #[default]
    FastInter,
    /// Count as one failed health check.
    FailCheck,
    /// Count as enough failed checks to leave only one before DOWN.
    SuddenDeath,
    /// Mark the server DOWN at once (checks bring it back).
    MarkDown,
}

/// A `server` line, with `default-server` values applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    /// Server id (`sid` in `show stat`), from 1 in order within its backend.
    pub id: u32,
    /// The server's IP address and port; unused (`0.0.0.0:0`) when [`Server::unix`] is set.
    pub addr: SocketAddr,
    /// `unix@PATH`, a plain `/path` or `abns@NAME`: the server listens on a UNIX stream
    /// socket, which connections and checks use instead of `addr`.
    pub unix: Option<UnixAddr>,
    /// 0..=256, default 1. 0 means the server takes no new traffic from the balancer.
    pub weight: u32,
    pub backup: bool,
    pub disabled: bool,
    /// `init-addr ...,none` and no address found: the server starts without one, in
    /// maintenance until `set server addr` gives it one.
    pub no_addr: bool,
    pub maxconn: Option<u32>,
    /// `check` and its timings; `None` when the server is not checked.
    pub check: Option<CheckParams>,
    pub cookie: Option<String>,
    /// `send-proxy`: send a PROXY protocol v1 header on each new server connection.
    pub send_proxy: bool,
    /// `send-proxy-v2`: the PROXY protocol version 2 header instead (`proto::proxy::write_v2`).
    pub send_proxy_v2: bool,
    /// `proxy-v2-options`: the TLVs the v2 header carries besides the client's ALPN.
    pub proxy_v2_options: crate::proto::proxy::V2Options,
    /// `pool-max-conn N`: at most N idle connections to the server in the pools (`None`: -1,
    /// no limit; 0: none is kept).
    pub pool_max_conn: Option<u32>,
    /// `socks4 IP:PORT`: connections go through this SOCKS4 proxy (`proto::socks4`).
    pub socks4: Option<SocketAddr>,
    /// `check-via-socks4`: health checks go through it too.
    pub check_via_socks4: bool,
    /// `check-send-proxy`, as written (`ServerState::checks_send_proxy` decides).
    pub check_send_proxy: bool,
    /// HAProxy's `use_ssl` as the line left it: 1 (`ssl`), -1 (`no-ssl`), 0 (neither). Traffic
    /// goes over TLS while the server's state says 1 (`set server ... ssl on|off` changes it).
    pub use_ssl: i8,
    /// `proto h1|h2`: the HTTP version spoken to the server, whatever ALPN says (`None`:
    /// HTTP/1.1, or what the TLS handshake's ALPN chose).
    pub proto: Option<Mux>,
    /// `slowstart`: after going UP again, the weight ramps up from ~0 over this time.
    pub slowstart: Option<Duration>,
    /// `observe layer4|layer7`: passive health from live traffic.
    pub observe: Option<Observe>,
    /// `error-limit`: consecutive live errors that trigger `on-error` (default 10).
    pub error_limit: u32,
    /// `on-error`: what `error-limit` errors do (default `fastinter`).
    pub on_error: OnError,
    /// `addr`: where checks go instead of the server's address (which may change at run time).
    pub check_addr: Option<std::net::IpAddr>,
    /// `port`: the port checks use instead of the server's port.
    pub check_port: Option<u16>,
    /// `rise`, also known for an unchecked server: a server starts with this much health, as
    /// in HAProxy (`show servers state` reports it).
    pub rise: u32,
    /// `fall`, also known for an unchecked server (HAProxy's health counter tops at
    /// `rise + fall - 1`).
    pub fall: u32,
    /// `ssl` or `check-ssl`: the TLS configurations built at load.
    pub tls: Option<Arc<crate::tls::client::ServerTls>>,
    /// `agent-check` with its `agent-*` options; `None` when the server has no agent.
    pub agent: Option<AgentParams>,
    /// Where the `server` line is, as `file:line`.
    pub location: String,
    /// Other configuration elements point to it (`use-server`, a sample fetch such as
    /// `srv_sess_rate(BE/SRV)`, a server that tracks it): `del server` refuses to remove it,
    /// as HAProxy does.
    pub pinned: bool,
    /// `track [BACKEND/]SERVER` as written: the server has no check of its own, its state
    /// follows the tracked server's.
    pub track_name: Option<String>,
    /// The tracked server (backend index, server index), resolved in the validate stage (for
    /// a server added at run time, by `add server`).
    pub track: Option<(usize, usize)>,
}

/// An agent check (`agent-check`): every `inter`, a connection to the agent, which answers
/// one line of words that set the server's weight, `maxconn`, administrative and
/// operational state (HAProxy's `agent-check`, `agent-addr`, `agent-port`, `agent-send`,
/// `agent-inter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentParams {
    /// `agent-addr`: else the server's address.
    pub addr: Option<std::net::IpAddr>,
    /// `agent-port` (required).
    pub port: u16,
    /// `agent-send`: what is sent once connected.
    pub send: Option<String>,
    /// `agent-inter`, else `inter`.
    pub inter: Duration,
}

/// A `backend` section, or the backend half of a `listen` section.
#[derive(Debug, Clone)]
pub struct Backend {
    pub name: String,
    /// Proxy id (`iid`), unique among all proxies.
    pub id: u32,
    pub mode: Mode,
    pub balance: Balance,
    /// `hash-type`, for `balance source` and `balance uri`.
    pub hash_type: HashType,
    /// `persist rdp-cookie[(NAME)]`: an RDP connection whose cookie NAME (a Windows session
    /// broker's `msts=IP.PORT.`) names a server's IPv4 address and port goes to that server
    /// (if usable, or down with `option persist`), before balancing (TCP mode).
    pub rdp_persist: Option<String>,
    pub servers: Vec<Server>,
    pub timeouts: Timeouts,
    /// `retries` (HAProxy's default: 3): connection attempts after the first.
    pub retries: u32,
    /// `option redispatch [INTERVAL]`: `None` when off; the interval otherwise (default -1: the
    /// last retry goes to another server; a positive P: every P-th retry does).
    pub redispatch: Option<i32>,
    /// `retry-on`.
    pub retry_on: RetryOn,
    /// `outlier-ejection` (Bascule extension), off unless configured.
    pub outlier: Option<OutlierEjection>,
    /// `http-reuse` (HTTP mode).
    pub http_reuse: HttpReuse,
    pub options: ProxyOptions,
    /// `errorfile CODE PATH`, as on frontends; a backend's take precedence once it is chosen.
    pub errorfiles: Vec<ErrorFile>,
    pub logs: Vec<LogTarget>,
    pub disabled: bool,
    /// The proxy's rules, `use-server` lines included; shared with the frontend half of a
    /// `listen` section (see [`ProxyRules`]).
    pub rules: std::sync::Arc<ProxyRules>,
    /// The proxy's own stick table (`stick-table`), an index into [`Config::tables`]; a
    /// `listen` section's frontend and backend halves share it.
    pub table: Option<usize>,
    /// `cookie`: cookie persistence (HTTP mode).
    pub cookie: Option<CookiePersist>,
    /// `dynamic-cookie-key`, for `cookie ... dynamic`.
    pub dynamic_cookie_key: Option<String>,
    /// The distinct `sni` expressions of its servers (a server's `tls.sni_slot` indexes
    /// them), evaluated once per new server connection.
    pub sni_exprs: Vec<Arc<crate::rules::Expr>>,
}
