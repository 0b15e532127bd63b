//! `show stat`: HAProxy's statistics in its CSV layout (the same header and column order, so
//! existing scripts and exporters keep working). The stats socket and the statistics page
//! (`<uri>;csv`) print the same lines; the page's HTML and JSON views read them too.
//!
//! Columns that do not apply to a line stay empty, as HAProxy leaves them; so do those of
//! HAProxy's extra modules (`ssl_*`, `h2_*`, `h1_*`), which Bascule does not count. Counters
//! of features Bascule does not have (compression, cache) print 0, as HAProxy's when unused.

use std::sync::atomic::Ordering;

use crate::backend::server::{admin, ServerState, CHECK_DESC, CHECK_STATUS};
use crate::base::clock::uptime_secs;
use crate::base::counter::HttpCounters;
use crate::config::model::{Balance, Mode};
use crate::state::Shared;

/// HAProxy 2.6's `show stat` columns, in order (its statistics modules' after the `-`).
pub const COLUMNS: [&str; 128] = [
    "pxname",
    "svname",
    "qcur",
    "qmax",
    "scur",
    "smax",
    "slim",
    "stot",
    "bin",
    "bout",
    "dreq",
    "dresp",
    "ereq",
    "econ",
    "eresp",
    "wretr",
    "wredis",
    "status",
    "weight",
    "act",
    "bck",
    "chkfail",
    "chkdown",
    "lastchg",
    "downtime",
    "qlimit",
    "pid",
    "iid",
    "sid",
    "throttle",
    "lbtot",
    "tracked",
    "type",
    "rate",
    "rate_lim",
    "rate_max",
    "check_status",
    "check_code",
    "check_duration",
    "hrsp_1xx",
    "hrsp_2xx",
    "hrsp_3xx",
    "hrsp_4xx",
    "hrsp_5xx",
    "hrsp_other",
    "hanafail",
    "req_rate",
    "req_rate_max",
    "req_tot",
    "cli_abrt",
    "srv_abrt",
    "comp_in",
    "comp_out",
    "comp_byp",
    "comp_rsp",
    "lastsess",
    "last_chk",
    "last_agt",
    "qtime",
    "ctime",
    "rtime",
    "ttime",
    "agent_status",
    "agent_code",
    "agent_duration",
    "check_desc",
    "agent_desc",
    "check_rise",
    "check_fall",
    "check_health",
    "agent_rise",
    "agent_fall",
    "agent_health",
    "addr",
    "cookie",
    "mode",
    "algo",
    "conn_rate",
    "conn_rate_max",
    "conn_tot",
    "intercepted",
    "dcon",
    "dses",
    "wrew",
    "connect",
    "reuse",
    "cache_lookups",
    "cache_hits",
    "srv_icur",
    "src_ilim",
    "qtime_max",
    "ctime_max",
    "rtime_max",
    "ttime_max",
    "eint",
    "idle_conn_cur",
    "safe_conn_cur",
    "used_conn_cur",
    "need_conn_est",
    "uweight",
    "agg_server_status",
    "agg_server_check_status",
    "agg_check_status",
    "-",
    "ssl_sess",
    "ssl_reused_sess",
    "ssl_failed_handshake",
    "h2_headers_rcvd",
    "h2_data_rcvd",
    "h2_settings_rcvd",
    "h2_rst_stream_rcvd",
    "h2_goaway_rcvd",
    "h2_detected_conn_protocol_errors",
    "h2_detected_strm_protocol_errors",
    "h2_rst_stream_resp",
    "h2_goaway_resp",
    "h2_open_connections",
    "h2_backend_open_streams",
    "h2_total_connections",
    "h2_backend_total_streams",
    "h1_open_connections",
    "h1_open_streams",
    "h1_total_connections",
    "h1_total_streams",
    "h1_bytes_in",
    "h1_bytes_out",
    "h1_spliced_bytes_in",
    "h1_spliced_bytes_out",
];

/// What a line describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Frontend,
    Server,
    Backend,
}

/// One line of `show stat`: values by column name; the other columns are empty.
#[derive(Debug, Clone)]
pub struct Line {
    pub kind: Kind,
    pub values: Vec<(&'static str, String)>,
}

impl Line {
    fn new(kind: Kind, proxy: &str, name: &str, mut values: Vec<(&'static str, String)>) -> Line {
        values.insert(0, ("pxname", proxy.to_string()));
        values.insert(1, ("svname", name.to_string()));
        Line { kind, values }
    }

    /// The value of column `col` (empty when the line has none).
    pub fn get(&self, col: &str) -> &str {
        self.values
            .iter()
            .find(|(c, _)| *c == col)
            .map_or("", |(_, v)| v.as_str())
    }

    /// The proxy's name.
    pub fn proxy(&self) -> &str {
        self.get("pxname")
    }

    /// The line's name: FRONTEND, BACKEND or the server's.
    pub fn name(&self) -> &str {
        self.get("svname")
    }
}

/// The CSV header line, with its `# ` and trailing comma as HAProxy prints them.
pub fn header() -> String {
    let mut out = String::from("# ");
    for c in COLUMNS {
        out.push_str(c);
        out.push(',');
    }
    out.push('\n');
    out
}

/// `lines` in CSV, header first.
pub fn csv(lines: &[Line]) -> String {
    let mut out = header();
    for l in lines {
        for col in COLUMNS {
            if col == "-" {
                // HAProxy's mark between its own columns and its modules', on every line.
                out.push('-');
            } else {
                push_field(&mut out, l.get(col));
            }
            out.push(',');
        }
        out.push('\n');
    }
    out
}

/// Appends `v` as HAProxy's `csv_enc` writes a text field: in double quotes, its own doubled,
/// when it holds a comma, a quote or a line break (a check's reply text may).
fn push_field(out: &mut String, v: &str) {
    if !v.contains([',', '"', '\n', '\r']) {
        out.push_str(v);
        return;
    }
    out.push('"');
    out.push_str(&v.replace('"', "\"\""));
    out.push('"');
}

/// The `show stat` output: every proxy.
pub fn show_stat(shared: &Shared) -> String {
    csv(&lines(shared, &|_| true))
}

/// `show stat [{IID|PROXY} TYPE SID] ...` (`args`: the words after `show stat`), as HAProxy
/// bounds it: only proxy IID (-1: any), only the kinds of line in the bit mask TYPE (1
/// frontends, 2 backends, 4 servers; -1: all), only server SID of that proxy (-1: any).
pub fn show_stat_args(shared: &Shared, args: &[&str]) -> String {
    let [who, ty, sid, ..] = args else {
        return show_stat(shared);
    };
    // A proxy's name, else its number (atoi: a word that is not one reads as 0).
    let atoi = |w: &str| -> i64 {
        let digits = w.trim_start();
        let neg = digits.starts_with('-');
        let body: String = digits
            .trim_start_matches(['-', '+'])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let v = body.parse::<i64>().unwrap_or(0);
        if neg {
            -v
        } else {
            v
        }
    };
    let by_name = lines(shared, &|_| true)
        .into_iter()
        .find(|l| l.proxy() == *who)
        .map(|l| atoi(l.get("iid")));
    let iid = by_name.unwrap_or_else(|| atoi(who));
    if iid == 0 {
        return "No such proxy.\n".to_string();
    }
    let (ty, sid) = (atoi(ty), atoi(sid));
    let kept: Vec<Line> = lines(shared, &|_| true)
        .into_iter()
        .filter(|l| {
            let line_iid = atoi(l.get("iid"));
            if iid != -1 && line_iid != iid {
                return false;
            }
            let bit = match l.kind {
                Kind::Frontend => 1,
                Kind::Backend => 2,
                Kind::Server => 4,
            };
            if ty & bit == 0 {
                return false;
            }
            l.kind != Kind::Server || sid == -1 || atoi(l.get("sid")) == sid
        })
        .collect();
    csv(&kept)
}

/// The `hrsp_*` columns of `c`.
fn hrsp(c: &HttpCounters) -> [(&'static str, String); 6] {
    let [r1, r2, r3, r4, r5, other] = c.responses();
    [
        ("hrsp_1xx", r1.to_string()),
        ("hrsp_2xx", r2.to_string()),
        ("hrsp_3xx", r3.to_string()),
        ("hrsp_4xx", r4.to_string()),
        ("hrsp_5xx", r5.to_string()),
        ("hrsp_other", other.to_string()),
    ]
}

/// `bin` and `bout`.
fn bytes(b: &crate::base::counter::Bytes) -> [(&'static str, String); 2] {
    let (i, o) = b.get();
    [("bin", i.to_string()), ("bout", o.to_string())]
}

fn mode_word(m: Mode) -> &'static str {
    match m {
        Mode::Tcp => "tcp",
        Mode::Http => "http",
    }
}

/// The `algo` column: HAProxy's name of the balance algorithm.
fn algo_word(b: &Balance) -> &'static str {
    match b {
        Balance::RoundRobin => "roundrobin",
        Balance::StaticRr => "static-rr",
        Balance::LeastConn => "leastconn",
        Balance::First => "first",
        Balance::Random { .. } => "random",
        Balance::Source => "source",
        Balance::Uri { .. } => "uri",
        Balance::UrlParam { .. } => "url_param",
        Balance::Hdr { .. } => "hdr",
        #[allow(unreachable_patterns)]
        _ => "",
    }
}

/// The `addr` column: the server's address and port (empty for a UNIX socket).
fn addr_of(s: &ServerState) -> String {
    if s.config.unix.is_some() {
        return String::new();
    }
    s.addr.load().to_string()
}

/// A server's `status` column, as HAProxy words it: MAINT, DRAIN, NOLB, "no check", and UP or
/// DOWN with the health progress ("UP 1/3": one more failure of three takes it down, "DOWN
/// 1/2": one success of two so far).
pub fn server_status(s: &ServerState) -> String {
    status_via(s, s, None)
}

/// HAProxy's status of server `s` whose checks are those of `r`: `s` itself, or for a server
/// that tracks another (`track`), the end of its tracking chain; `via` is the server it
/// tracks directly (`BE/SRV`), named when `s` inherited its maintenance.
pub fn status_via(s: &ServerState, r: &ServerState, via: Option<&str>) -> String {
    let flags = s.admin.load(Ordering::Relaxed);
    if flags & admin::FMAINT == 0 && flags & admin::RMAINT != 0 {
        return "MAINT (resolution)".into();
    }
    if let (true, Some(via)) = (flags & admin::IMAINT != 0, via) {
        return format!("MAINT (via {via})");
    }
    if s.in_maint() {
        return "MAINT".into();
    }
    let (rise, fall) = match r.config.check {
        Some(c) => (c.rise.max(1), c.fall.max(1)),
        None => (r.config.rise.max(1), r.config.fall.max(1)),
    };
    let health = r.check.health.load(Ordering::Relaxed);
    let checking = r.check_enabled.load(Ordering::Relaxed);
    if !s.up.load(Ordering::Relaxed) {
        if r.agent_down.load(Ordering::Relaxed) {
            return "DOWN (agent)".into();
        }
        return if checking && health > 0 {
            format!("DOWN {health}/{rise}")
        } else {
            "DOWN".into()
        };
    }
    let going_down = checking && health < rise + fall - 1;
    let progress = format!("{}/{fall}", (health + 1).saturating_sub(rise));
    if s.stopping.load(Ordering::Relaxed) {
        return if going_down {
            format!("NOLB {progress}")
        } else {
            "NOLB".into()
        };
    }
    match (s.draining(), going_down, checking) {
        (true, true, _) => format!("DRAIN {progress}"),
        (true, false, _) => "DRAIN".into(),
        (false, true, _) => format!("UP {progress}"),
        (false, false, true) => "UP".into(),
        (false, false, false) => "no check".into(),
    }
}

/// `col` at 0 for each column: counters of features Bascule does not have (compression,
/// cache), which HAProxy prints as 0 when they are not used; and `eint`, HAProxy's internal
/// errors (a failed allocation, an analyser in a state it cannot handle), which Bascule does
/// not tell apart from the errors it counts elsewhere.
fn zero(cols: &[&'static str]) -> Vec<(&'static str, String)> {
    cols.iter().map(|c| (*c, "0".to_string())).collect()
}

/// The columns at 0 on every line (see [`zero`]).
const ALWAYS_ZERO: [&str; 5] = ["comp_in", "comp_out", "comp_byp", "comp_rsp", "eint"];

/// A frontend's `maxconn`: its own, else the global one, as HAProxy resolves it.
fn fe_maxconn(shared: &Shared, fe: &crate::state::Frontend) -> u64 {
    fe.config
        .maxconn
        .map_or(shared.global_limit.max() as u64, u64::from)
}

/// A backend's `fullconn` (`slim`): Bascule has no `fullconn` keyword, so HAProxy's default,
/// a tenth (rounded up, at least 1) of the `maxconn` of the frontends that may send it
/// traffic: those whose `default_backend` it is, or a `use_backend` line names (each frontend
/// once), a `listen` section's own.
fn fullconn(shared: &Shared, b: usize) -> u64 {
    use crate::config::model::BackendTarget;
    let total: u64 = shared
        .frontends
        .iter()
        .enumerate()
        .filter(|(i, fe)| {
            let c = &fe.config;
            let default = c.default_backend == Some(b) || shared.listen_backend(*i) == Some(b);
            default
                || c.rules
                    .use_backends
                    .iter()
                    .any(|r| matches!(r.action, BackendTarget::Static(t) if t == b))
        })
        .map(|(_, fe)| fe_maxconn(shared, fe))
        .sum();
    total.div_ceil(10).max(1)
}

/// A frontend's columns of any mode: its rates (`rate`, `req_rate`, `conn_rate`), their
/// highest values, its session rate limit (`rate_lim`: `rate-limit sessions`, 0 for none),
/// its most connections at once (`smax`), its failed rewrites (`wrew`) and the columns at 0.
fn frontend_columns(fe: &crate::state::Frontend) -> Vec<(&'static str, String)> {
    use crate::state::{CONN_RATE, REQ_RATE, SESS_RATE};
    let c = &fe.counters;
    let max = |k: usize| c.rate_max[k].load(Ordering::Relaxed).to_string();
    let mut v = vec![
        ("wrew", load(&c.failed_rewrites)),
        ("smax", c.conn_max.load(Ordering::Relaxed).to_string()),
        ("rate", c.rate(SESS_RATE).to_string()),
        ("rate_max", max(SESS_RATE)),
        (
            "rate_lim",
            fe.config.rate_limit_sessions.unwrap_or(0).to_string(),
        ),
        ("req_rate", c.rate(REQ_RATE).to_string()),
        ("req_rate_max", max(REQ_RATE)),
        ("conn_rate", c.rate(CONN_RATE).to_string()),
        ("conn_rate_max", max(CONN_RATE)),
    ];
    v.extend(zero(&ALWAYS_ZERO));
    v
}

/// The columns of a backend's or a server's [`StreamStats`](crate::base::counter::StreamStats)
/// and its `lastsess` (seconds since its last stream, -1 for never).
fn stream_columns(
    streams: &crate::base::counter::StreamStats,
    last_sess_ms: &std::sync::atomic::AtomicU64,
) -> Vec<(&'static str, String)> {
    let (connect, reuse) = streams.connections();
    let [q, c, r, t] = streams.averages();
    let [qm, cm, rm, tm] = streams.maxima();
    let last = match last_sess_ms.load(Ordering::Relaxed) {
        0 => -1,
        ms => (uptime_secs().saturating_sub((ms - 1) / 1000)) as i64,
    };
    vec![
        ("connect", connect.to_string()),
        ("reuse", reuse.to_string()),
        ("lastsess", last.to_string()),
        ("qtime", q.to_string()),
        ("ctime", c.to_string()),
        ("rtime", r.to_string()),
        ("ttime", t.to_string()),
        ("qtime_max", qm.to_string()),
        ("ctime_max", cm.to_string()),
        ("rtime_max", rm.to_string()),
        ("ttime_max", tm.to_string()),
    ]
}

/// A server's connection gauges: idle in the workers' pools (`srv_icur`), of which those that
/// carried one request only (`idle_conn_cur`) and those proven reusable (`safe_conn_cur`), in
/// use (`used_conn_cur`), and the estimate of those needed (`need_conn_est`: the most in use
/// at once, at least 1 as HAProxy starts it; HAProxy's idle connection task lets its estimate
/// decay towards those in use every `pool-purge-delay`, Bascule's does not).
fn idle_columns(s: &ServerState) -> Vec<(&'static str, String)> {
    let idle = s.idle.get();
    let safe = s.idle_safe.get().min(idle);
    let used = s.cur_conns.get().saturating_sub(idle);
    let need = s.used_max.load(Ordering::Relaxed).max(used).max(1);
    vec![
        ("srv_icur", idle.to_string()),
        ("idle_conn_cur", (idle - safe).to_string()),
        ("safe_conn_cur", safe.to_string()),
        ("used_conn_cur", used.to_string()),
        ("need_conn_est", need.to_string()),
    ]
}

/// A counter's value as `show stat` writes it.
fn load(counter: &std::sync::atomic::AtomicU64) -> String {
    counter.load(Ordering::Relaxed).to_string()
}

/// The lines of `show stat` for the proxies `keep` accepts (by name), each proxy's in
/// HAProxy's order (its frontend, its servers, its backend), proxies in file order.
pub fn lines(shared: &Shared, keep: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut out: Vec<(u32, u8, Line)> = Vec::new();
    for fe in &shared.frontends {
        let c = &fe.config;
        if !keep(&c.name) {
            continue;
        }
        let mode = mode_word(c.mode);
        let counted = &fe.counters;
        let mut values = vec![
            ("scur", fe.limit.current().to_string()),
            ("stot", counted.sess.load(Ordering::Relaxed).to_string()),
            (
                "ereq",
                counted.failed_req.load(Ordering::Relaxed).to_string(),
            ),
            ("req_tot", counted.http.requests().to_string()),
            ("conn_tot", counted.conn.load(Ordering::Relaxed).to_string()),
        ];
        values.extend(bytes(&counted.bytes));
        if c.mode == Mode::Http {
            values.extend(hrsp(&counted.http));
        }
        values.extend(frontend_columns(fe));
        if c.mode == Mode::Http {
            values.extend(zero(&["cache_lookups", "cache_hits"]));
            values.push(("intercepted", load(&counted.intercepted)));
        }
        values.extend([
            ("slim", fe_maxconn(shared, fe).to_string()),
            ("dreq", fe.denied.req.load(Ordering::Relaxed).to_string()),
            ("dresp", fe.denied.resp.load(Ordering::Relaxed).to_string()),
            ("dcon", fe.denied.conn.load(Ordering::Relaxed).to_string()),
            ("dses", fe.denied.sess.load(Ordering::Relaxed).to_string()),
            ("status", "OPEN".into()),
            ("pid", "1".into()),
            ("iid", c.id.to_string()),
            ("sid", "0".into()),
            ("type", "0".into()),
            ("mode", mode.into()),
        ]);
        let line = Line::new(Kind::Frontend, &c.name, "FRONTEND", values);
        out.push((c.id, 0, line));
    }
    for (b, be) in shared.backends.iter().enumerate() {
        let c = &be.config;
        if !keep(&c.name) {
            continue;
        }
        let mode = mode_word(c.mode);
        let (mut scur, mut stot, mut econ) = (0u64, 0, 0);
        let (mut wretr, mut wredis) = (0u64, 0u64);
        // Servers taking balanced traffic now, and their weights, per tier.
        let (mut act, mut bck, mut w_act, mut w_bck) = (0u32, 0u32, 0u64, 0u64);
        for (_, s) in be.servers.live() {
            let sc = &s.config;
            let cur = u64::from(s.cur_conns.get());
            let tot = s.total_conns.load(Ordering::Relaxed);
            let errs = s.conn_errors.load(Ordering::Relaxed);
            let retr = s.retries.load(Ordering::Relaxed);
            let redis = s.redispatches.load(Ordering::Relaxed);
            let w = s.effective_weight();
            if s.usable() && s.lb_weight() > 0 {
                if sc.backup {
                    bck += 1;
                    w_bck += u64::from(s.lb_weight());
                } else {
                    act += 1;
                    w_act += u64::from(s.lb_weight());
                }
            }
            scur += cur;
            stot += tot;
            econ += errs;
            wretr += retr;
            wredis += redis;
            let via = crate::backend::track::via_name(&shared.backends, s);
            let ck = &s.check;
            let checked = sc.check.is_some();
            let opt = |v: String| if checked { v } else { String::new() };
            // As HAProxy: the last check's figures only while checks run (enabled, not paused
            // by maintenance), its duration once a check completed.
            let running = checked && s.checking();
            let live = |v: String| if running { v } else { String::new() };
            let status_idx = ck.status.load(Ordering::Relaxed);
            let code = ck.code.load(Ordering::Relaxed);
            let (rise, fall) = match sc.check {
                Some(k) => (k.rise, k.fall),
                None => (sc.rise, sc.fall),
            };
            out.push((
                c.id,
                1,
                Line::new(
                    Kind::Server,
                    &c.name,
                    &sc.name,
                    vec![
                        ("qcur", s.queued.load(Ordering::Relaxed).to_string()),
                        ("qmax", s.qmax.load(Ordering::Relaxed).to_string()),
                        ("scur", cur.to_string()),
                        ("smax", s.smax.load(Ordering::Relaxed).to_string()),
                        ("slim", s.maxconn().map_or(String::new(), |m| m.to_string())),
                        ("stot", tot.to_string()),
                        ("econ", errs.to_string()),
                        ("wretr", retr.to_string()),
                        ("wredis", redis.to_string()),
                        ("dresp", s.denied_resp.load(Ordering::Relaxed).to_string()),
                        ("eresp", load(&s.aborts.resp)),
                        ("cli_abrt", load(&s.aborts.client)),
                        ("srv_abrt", load(&s.aborts.server)),
                        (
                            "status",
                            status_via(
                                s,
                                crate::backend::track::reference(&shared.backends, s),
                                via.as_deref(),
                            ),
                        ),
                        ("weight", w.to_string()),
                        ("act", u8::from(!sc.backup).to_string()),
                        ("bck", u8::from(sc.backup).to_string()),
                        (
                            "chkfail",
                            opt(ck.failures.load(Ordering::Relaxed).to_string()),
                        ),
                        ("chkdown", opt(ck.downs.load(Ordering::Relaxed).to_string())),
                        (
                            "lastchg",
                            uptime_secs()
                                .saturating_sub(ck.last_change_s.load(Ordering::Relaxed))
                                .to_string(),
                        ),
                        ("pid", "1".into()),
                        ("iid", c.id.to_string()),
                        ("sid", sc.id.to_string()),
                        ("lbtot", tot.to_string()),
                        ("type", "2".into()),
                        (
                            "check_status",
                            live(
                                CHECK_STATUS
                                    .get(usize::from(status_idx))
                                    .unwrap_or(&"UNK")
                                    .to_string(),
                            ),
                        ),
                        (
                            "check_code",
                            if code > 0 {
                                code.to_string()
                            } else {
                                String::new()
                            },
                        ),
                        (
                            "check_duration",
                            if status_idx == 0 {
                                String::new()
                            } else {
                                live(ck.duration_ms.load(Ordering::Relaxed).to_string())
                            },
                        ),
                        ("mode", mode.into()),
                        ("addr", addr_of(s)),
                        ("check_rise", live(rise.to_string())),
                        ("check_fall", live(fall.to_string())),
                        (
                            "check_health",
                            live(ck.health.load(Ordering::Relaxed).to_string()),
                        ),
                        ("uweight", s.weight.load(Ordering::Relaxed).to_string()),
                        ("tracked", via.unwrap_or_default()),
                        ("rate", s.sess_rate().to_string()),
                        ("rate_max", s.sps_max.load(Ordering::Relaxed).to_string()),
                        (
                            "check_desc",
                            live(
                                CHECK_DESC
                                    .get(usize::from(status_idx))
                                    .unwrap_or(&"Unknown")
                                    .to_string(),
                            ),
                        ),
                        (
                            "last_chk",
                            live(
                                ck.desc
                                    .load()
                                    .as_deref()
                                    .map_or(String::new(), String::clone),
                            ),
                        ),
                    ],
                ),
            ));
            let values = &mut out.last_mut().expect("just pushed").2.values;
            values.extend(bytes(&s.bytes));
            if c.mode == Mode::Http {
                values.push(("req_tot", s.http.requests().to_string()));
                values.extend(hrsp(&s.http));
            }
            values.extend(stream_columns(&s.streams, &s.last_sess_ms));
            values.push(("wrew", load(&s.failed_rewrites)));
            values.push(("eint", "0".into()));
            values.extend(idle_columns(s));
        }
        // As HAProxy: the backend's weight is its active servers', or its backups' when no
        // active server takes traffic.
        let weight = if act > 0 { w_act } else { w_bck };
        out.push((
            c.id,
            2,
            Line::new(
                Kind::Backend,
                &c.name,
                "BACKEND",
                vec![
                    ("qcur", be.queued.load(Ordering::Relaxed).to_string()),
                    ("qmax", be.qmax.load(Ordering::Relaxed).to_string()),
                    ("scur", scur.to_string()),
                    ("stot", be.cum_sess.load(Ordering::Relaxed).to_string()),
                    ("dreq", be.denied_req.load(Ordering::Relaxed).to_string()),
                    ("dresp", be.denied_resp.load(Ordering::Relaxed).to_string()),
                    ("eresp", load(&be.aborts.resp)),
                    ("cli_abrt", load(&be.aborts.client)),
                    ("srv_abrt", load(&be.aborts.server)),
                    ("chkdown", be.down_trans.load(Ordering::Relaxed).to_string()),
                    (
                        "econ",
                        (econ + be.no_server.load(Ordering::Relaxed)).to_string(),
                    ),
                    ("wretr", wretr.to_string()),
                    ("wredis", wredis.to_string()),
                    (
                        "status",
                        // As HAProxy: a backend without servers is UP.
                        if act + bck > 0 || be.servers.live().next().is_none() {
                            "UP"
                        } else {
                            "DOWN"
                        }
                        .into(),
                    ),
                    ("weight", weight.to_string()),
                    ("act", act.to_string()),
                    ("bck", bck.to_string()),
                    ("pid", "1".into()),
                    ("iid", c.id.to_string()),
                    ("sid", "0".into()),
                    ("lbtot", stot.to_string()),
                    ("type", "1".into()),
                    ("mode", mode.into()),
                    ("algo", algo_word(&c.balance).into()),
                    ("uweight", weight.to_string()),
                    ("rate", be.sess_rate().to_string()),
                    ("rate_max", be.sps_max.load(Ordering::Relaxed).to_string()),
                ],
            ),
        ));
        let values = &mut out.last_mut().expect("just pushed").2.values;
        values.extend(bytes(&be.bytes));
        if c.mode == Mode::Http {
            values.push(("req_tot", be.http.requests().to_string()));
            values.extend(hrsp(&be.http));
            values.extend(zero(&["cache_lookups", "cache_hits"]));
        }
        values.extend(stream_columns(&be.streams, &be.last_sess_ms));
        values.push(("wrew", load(&be.failed_rewrites)));
        values.extend(zero(&ALWAYS_ZERO));
        let now = uptime_secs();
        let last_change = be.last_change_s.load(Ordering::Relaxed);
        let mut down = be.down_time_s.load(Ordering::Relaxed);
        if weight == 0 {
            // Without a server now: the current stretch counts too (HAProxy's `be_downtime`).
            down += now.saturating_sub(last_change);
        }
        values.extend([
            ("smax", be.smax.load(Ordering::Relaxed).to_string()),
            ("slim", fullconn(shared, b).to_string()),
            ("lastchg", now.saturating_sub(last_change).to_string()),
        ]);
        // HAProxy's aggregated status gauges, which its CSV always leaves at 0 (its
        // Prometheus exporter alone fills them).
        values.extend(zero(&[
            "agg_server_status",
            "agg_server_check_status",
            "agg_check_status",
        ]));
        if be.servers.live().next().is_some() {
            values.push(("downtime", down.to_string()));
        }
    }
    // Stable: a proxy's servers stay in declaration order.
    out.sort_by_key(|(id, rank, _)| (*id, *rank));
    out.into_iter().map(|(_, _, l)| l).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_fields_are_quoted_as_haproxy_csv_enc_does() {
        let mut out = String::new();
        for v in ["Connection refused", "a,b", "say \"hi\"", ""] {
            push_field(&mut out, v);
            out.push('|');
        }
        assert_eq!(out, "Connection refused|\"a,b\"|\"say \"\"hi\"\"\"||");
    }
}
