//! Keywords of the `global` section: process settings, logging targets, the stats socket, tuning,
//! and the OpenSSL-era or multi-process keywords that real configurations still carry (accepted
//! with a warning that says why they have no effect).

use std::path::PathBuf;

use super::{log, Ctx, GlobalDraft, Keyword, Problem, Sections};
use crate::config::diag::Span;
use crate::config::model::{StatsAddress, StatsSocket};
use crate::config::values;

/// Highest thread number `cpu-map` accepts (HAProxy's MAX_THREADS without thread groups).
pub const MAX_THREADS: usize = 64;
/// Highest CPU number `cpu-map` accepts.
pub const MAX_CPUS: usize = 4095;

/// Which threads a `cpu-map` line names (1-based, as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadSel {
    All,
    Odd,
    Even,
    Set(Vec<usize>),
}

/// One `cpu-map` line, resolved against `nbthread` once every `global` section is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMapLine {
    pub span: Span,
    /// `auto:`: spread the threads one CPU each instead of giving each thread the whole set.
    pub auto: bool,
    pub threads: ThreadSel,
    pub cpus: Vec<usize>,
}

macro_rules! kw {
    ($name:expr, $parse:expr, $doc:expr) => {
        Keyword {
            name: $name,
            sections: Sections::GLOBAL,
            misplaced_warns: false,
            parse: $parse,
            doc: $doc,
        }
    };
}

/// The `global` keywords.
pub static KEYWORDS: &[Keyword<GlobalDraft>] = &[
    kw!(
        "expose-experimental-directives",
        expose_experimental,
        "Allow HAProxy's experimental directives (such as the normalize-uri action)."
    ),
    kw!(
        "maxconn",
        maxconn,
        "Process-wide limit of concurrent connections."
    ),
    kw!(
        "maxconnrate",
        maxconnrate,
        "Process-wide limit of new connections per second (accepts wait, as in HAProxy)."
    ),
    kw!(
        "maxsessrate",
        maxsessrate,
        "Process-wide limit of new sessions per second (accepts wait, as in HAProxy)."
    ),
    kw!(
        "maxsslrate",
        maxsslrate,
        "Process-wide limit of new TLS sessions per second (for TLS listeners, not supported yet)."
    ),
    kw!("nbthread", nbthread, "Number of worker threads."),
    kw!(
        "cpu-map",
        cpu_map,
        "Pin threads to CPUs: cpu-map [auto:]1[/THREADS] CPUS."
    ),
    kw!("daemon", daemon, "Run in the background."),
    kw!("pidfile", pidfile, "Write the process id to this file."),
    kw!(
        "ulimit-n",
        ulimit_n,
        "Raise the open file limit to this value at start."
    ),
    kw!(
        "user",
        user,
        "Switch to this user (from /etc/passwd) after binding."
    ),
    kw!(
        "group",
        group,
        "Switch to this group (from /etc/group) after binding."
    ),
    kw!("uid", uid, "Switch to this numeric user id after binding."),
    kw!(
        "unix-bind",
        unix_bind,
        "Defaults of the UNIX socket binds that follow: prefix, mode, user/uid, group/gid."
    ),
    kw!("gid", gid, "Switch to this numeric group id after binding."),
    kw!(
        "chroot",
        chroot,
        "Change root to this directory after binding."
    ),
    kw!(
        "hard-stop-after",
        hard_stop_after,
        "Longest time a soft stop may take."
    ),
    kw!("node", node, "Node name shown in stats and logs."),
    kw!(
        "description",
        description,
        "Free text describing this instance."
    ),
    kw!(
        "log",
        log_line,
        "A log target: log TARGET [len N] [format F] [sample RANGES:SIZE] FACILITY [LEVEL [MINLEVEL]]."
    ),
    kw!(
        "log-tag",
        log_tag,
        "The syslog tag of every log line (default: haproxy)."
    ),
    kw!(
        "log-send-hostname",
        log_send_hostname,
        "Put a host name in syslog headers: log-send-hostname [NAME] (default: the system's)."
    ),
    kw!(
        "stats",
        stats,
        "Runtime API settings: stats socket|timeout|maxconn."
    ),
    kw!(
        "tune.bufsize",
        tune_bufsize,
        "Size of each I/O buffer, in bytes."
    ),
    kw!(
        "tune.idle-pool.shared",
        tune_idle_pool_shared,
        "Share idle server connections between threads: only 'off' (Bascule's pools are per thread)."
    ),
    kw!(
        "tune.maxrewrite",
        tune_maxrewrite,
        "Buffer space kept free for header rewrites."
    ),
    kw!(
        "insecure-fork-wanted",
        insecure_wanted,
        "HAProxy's permission to create processes after start-up: changes nothing, Bascule never does."
    ),
    kw!(
        "insecure-setuid-wanted",
        insecure_wanted,
        "HAProxy's permission to run setuid programs after start-up: changes nothing, Bascule never does."
    ),
    kw!(
        "nbproc",
        nbproc,
        "Obsolete process count: only 1 is accepted."
    ),
    kw!(
        "maxsslconn",
        no_tls,
        "A limit of TLS connections besides maxconn (no effect yet: maxconn bounds them)."
    ),
    kw!(
        "tune.ssl.cachesize",
        super::ssl::global_keyword,
        "Sessions each TLS listener keeps for resumption without tickets (default 20000)."
    ),
    kw!(
        "tune.ssl.maxrecord",
        super::ssl::global_keyword,
        "The largest TLS record payload sent (0: 16384)."
    ),
    kw!(
        "tune.ssl.hard-maxrecord",
        super::ssl::global_keyword,
        "The largest TLS record payload sent (as tune.ssl.maxrecord)."
    ),
    kw!(
        "tune.ssl.keylog",
        super::ssl::global_keyword,
        "on: each handshake's secrets kept for the ssl_fc_*_secret fetches (a key log line)."
    ),
    kw!(
        "tune.ssl.capture-buffer-size",
        super::ssl::global_keyword,
        "Bytes of each ClientHello list kept for the ssl_fc_cipherlist_* fetches (0: none)."
    ),
    kw!(
        "tune.ssl.capture-cipherlist-size",
        super::ssl::global_keyword,
        "The former name of tune.ssl.capture-buffer-size."
    ),
    kw!(
        "tune.ssl.default-dh-param",
        super::ssl::global_keyword,
        "DH parameter size for DHE suites (checked as HAProxy checks it; rustls offers no DHE suite)."
    ),
    kw!(
        "tune.ssl.*",
        no_tls,
        "Other OpenSSL tuning (no effect: says why)."
    ),
    kw!(
        "ssl-load-extra-files",
        super::ssl::global_keyword,
        "Which files beside a 'crt' are read: key (FILE.key), bundle (FILE.rsa/.ecdsa/.dsa); all (default) or none."
    ),
    kw!(
        "ssl-load-extra-del-ext",
        super::ssl::global_keyword,
        "The key of 'foo.crt' is 'foo.key' rather than 'foo.crt.key'."
    ),
    kw!(
        "ssl-default-bind-ciphers",
        super::ssl::global_keyword,
        "TLS <= 1.2 cipher suites of bind lines without 'ciphers'."
    ),
    kw!(
        "ssl-default-bind-ciphersuites",
        super::ssl::global_keyword,
        "TLS 1.3 cipher suites of bind lines without 'ciphersuites'."
    ),
    kw!(
        "ssl-default-bind-curves",
        super::ssl::global_keyword,
        "Key exchange groups of bind lines without 'curves'."
    ),
    kw!(
        "ssl-default-bind-options",
        super::ssl::global_keyword,
        "Version bounds and flags every ssl bind line starts from."
    ),
    kw!(
        "ssl-default-bind-*",
        no_tls,
        "Other default TLS settings of binds (no effect yet)."
    ),
    kw!(
        "ssl-default-server-ciphers",
        super::ssl::global_keyword,
        "TLS <= 1.2 cipher suites of ssl servers without 'ciphers'."
    ),
    kw!(
        "ssl-default-server-ciphersuites",
        super::ssl::global_keyword,
        "TLS 1.3 cipher suites of ssl servers without 'ciphersuites'."
    ),
    kw!(
        "ssl-default-server-options",
        super::ssl::global_keyword,
        "Version bounds and flags every ssl server starts from."
    ),
    kw!(
        "ssl-default-server-*",
        no_tls,
        "Other default TLS settings of servers (no effect yet)."
    ),
    kw!(
        "ssl-dh-param-file",
        super::ssl::global_keyword,
        "DH parameters for DHE suites (read and checked as HAProxy does; rustls offers no DHE suite)."
    ),
    kw!(
        "ssl-server-verify",
        super::ssl::global_keyword,
        "Server certificate verification by default: none or required."
    ),
    kw!(
        "ssl-engine",
        no_tls,
        "OpenSSL engine (no effect: Bascule does not use OpenSSL)."
    ),
    kw!(
        "ssl-mode-async",
        no_tls,
        "OpenSSL async mode (no effect: Bascule does not use OpenSSL)."
    ),
    kw!(
        "ca-base",
        super::ssl::global_keyword,
        "Directory under which relative ca-file and crl-file paths are read."
    ),
    kw!(
        "crt-base",
        super::ssl::global_keyword,
        "Directory under which relative crt and crt-list paths are read."
    ),
    kw!(
        "setenv",
        setenv,
        "Set an environment variable for the following lines: setenv NAME VALUE."
    ),
    kw!(
        "set-var",
        set_var,
        "Set a proc variable at load: set-var proc.NAME EXPR."
    ),
    kw!(
        "set-var-fmt",
        set_var,
        "Set a proc variable at load from a format: set-var-fmt proc.NAME FMT."
    ),
    kw!(
        "localpeer",
        localpeer,
        "The local peer's name in peers sections (-L wins): localpeer NAME."
    ),
    kw!(
        "presetenv",
        setenv,
        "Set an environment variable unless it is set: presetenv NAME VALUE."
    ),
    kw!(
        "unsetenv",
        unsetenv,
        "Remove environment variables: unsetenv NAME..."
    ),
    kw!(
        "resetenv",
        resetenv,
        "Remove every environment variable but the ones named: resetenv [NAME...]."
    ),
    kw!(
        "thread-groups",
        thread_groups,
        "Number of thread groups: only 1 (every thread in one group)."
    ),
    kw!(
        "spread-checks",
        spread_checks,
        "Random spread of check intervals, in percent (no effect yet)."
    ),
    kw!(
        "max-spread-checks",
        spread_checks,
        "Longest delay between first checks (no effect yet)."
    ),
];

fn maxconn(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a positive integer")?;
    g.global.maxconn = Some(values::positive(v).map_err(|e| format!("'maxconn': {e}"))?);
    ctx.no_more(1)
}

fn nbthread(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a number of threads")?;
    let n = values::positive(v).map_err(|e| format!("'nbthread': {e}"))? as usize;
    if n > MAX_THREADS {
        return Err(
            format!("'nbthread': at most {MAX_THREADS} threads are supported, got {n}").into(),
        );
    }
    g.global.nbthread = Some(n);
    ctx.no_more(1)
}

/// Parses the `[auto:]PROC[/THREADS]` word.
fn cpu_map_threads(word: &str) -> Result<(bool, ThreadSel), String> {
    let (auto, rest) = match word.strip_prefix("auto:") {
        Some(r) => (true, r),
        None => (false, word),
    };
    let (proc_, threads) = match rest.split_once('/') {
        Some((p, t)) => (p, Some(t)),
        None => (rest, None),
    };
    if !matches!(proc_, "1" | "all" | "odd" | "1-1") {
        return Err(format!(
            "process '{proc_}' in '{word}': Bascule runs one process, so it must be 1 or 'all' (use 'nbthread' and a '1/THREADS' set for threads)"
        ));
    }
    let sel = match threads {
        None | Some("all") => ThreadSel::All,
        Some("odd") => ThreadSel::Odd,
        Some("even") => ThreadSel::Even,
        Some(set) => {
            let v = values::int_set(set, MAX_THREADS)
                .map_err(|e| format!("thread set in '{word}': {e}"))?;
            if v.contains(&0) {
                return Err(format!(
                    "thread set in '{word}': threads are numbered from 1"
                ));
            }
            ThreadSel::Set(v)
        }
    };
    Ok((auto, sel))
}

fn cpu_map(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let which = ctx.need(1, "[auto:]1[/THREADS] followed by a CPU set")?;
    let (auto, threads) = cpu_map_threads(which).map_err(|e| format!("'cpu-map': {e}"))?;
    ctx.need(2, "a CPU set such as '0-3,5'")?;
    let mut cpus = Vec::new();
    for w in &ctx.args[2..] {
        cpus.extend(values::int_set(w, MAX_CPUS).map_err(|e| format!("'cpu-map': CPU set: {e}"))?);
    }
    cpus.sort_unstable();
    cpus.dedup();
    g.cpu_maps.push(CpuMapLine {
        span: ctx.span.clone(),
        auto,
        threads,
        cpus,
    });
    Ok(())
}

fn daemon(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.daemon = true;
    ctx.no_more(0)
}

/// A per-second rate limit (`maxconnrate`, `maxsessrate`, `maxsslrate`).
fn rate(ctx: &Ctx<'_>) -> Result<u32, Problem> {
    let kw = ctx.kw().to_string();
    let v = ctx.need(1, "a number of connections per second")?;
    let n = values::positive(v).map_err(|e| format!("'{kw}': {e}"))?;
    ctx.no_more(1)?;
    Ok(n)
}

fn maxconnrate(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.maxconnrate = Some(rate(ctx)?);
    Ok(())
}

fn maxsessrate(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.maxsessrate = Some(rate(ctx)?);
    Ok(())
}

fn maxsslrate(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.maxsslrate = Some(rate(ctx)?);
    Ok(())
}

fn pidfile(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.pidfile = Some(PathBuf::from(ctx.need(1, "a file path")?));
    ctx.no_more(1)
}

fn ulimit_n(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a number of file descriptors")?;
    let n: u64 = values::number(v, "a number of file descriptors")
        .map_err(|e| format!("'ulimit-n': {e}"))?;
    g.global.ulimit_n = Some(n);
    ctx.no_more(1)
}

/// Finds `name` in a colon-separated database (`/etc/passwd`, `/etc/group`) and returns the
/// number in its third field.
pub fn lookup_id(db_text: &str, name: &str) -> Option<u32> {
    db_text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let mut fields = l.split(':');
            (fields.next() == Some(name))
                .then(|| fields.nth(1).and_then(|id| id.parse().ok()))
                .flatten()
        })
}

/// Resolves a user or group name through `path` (`/etc/passwd` or `/etc/group`).
pub(super) fn lookup_in(path: &str, name: &str, what: &str) -> Result<u32, Problem> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {path} to resolve {what} '{name}': {e}"))?;
    lookup_id(&text, name)
        .ok_or_else(|| Problem::from(format!("unknown {what} '{name}' (not found in {path})")))
}

fn user(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a user name")?;
    g.global.uid =
        Some(lookup_in("/etc/passwd", name, "user").map_err(|p| format!("'user': {}", p.message))?);
    ctx.no_more(1)
}

fn group(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a group name")?;
    g.global.gid = Some(
        lookup_in("/etc/group", name, "group").map_err(|p| format!("'group': {}", p.message))?,
    );
    ctx.no_more(1)
}

/// `unix-bind`: defaults of the UNIX socket binds parsed after it, as in HAProxy, which
/// applies them when it reads a `bind` line: `prefix` is prepended to a bind's path (an
/// abstract name, a `stats socket` and a server keep theirs), and `mode`, `user`/`uid`,
/// `group`/`gid` apply where the bind sets none.
#[derive(Debug, Clone, Default)]
pub struct UnixBind {
    pub prefix: Option<String>,
    pub perms: crate::config::model::UnixPerms,
}

impl UnixBind {
    /// Applies these defaults to a bind just parsed; an error when the prefixed path is too
    /// long for a UNIX socket.
    pub fn apply(&self, bind: &mut crate::config::model::Bind) -> Result<(), String> {
        use crate::config::model::{ListenAddr, UnixAddr};
        let ListenAddr::Unix(UnixAddr::Path(path)) = &mut bind.addr else {
            return Ok(());
        };
        if let Some(prefix) = &self.prefix {
            let mut full = std::ffi::OsString::from(prefix);
            full.push(path.as_os_str());
            if full.len() > 97 {
                return Err(format!(
                    "socket path '{}' too long (max 97)",
                    full.to_string_lossy()
                ));
            }
            *path = full.into();
        }
        let p = &mut bind.unix_perms;
        p.mode = p.mode.or(self.perms.mode);
        p.uid = p.uid.or(self.perms.uid);
        p.gid = p.gid.or(self.perms.gid);
        Ok(())
    }
}

fn unix_bind(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "at least one of prefix, mode, user, uid, group, gid")?;
    let mut i = 1;
    while let Some(opt) = ctx.arg(i) {
        let value = ctx.arg(i + 1);
        if opt == "prefix" {
            let v = value.ok_or("'unix-bind': 'prefix' expects a path")?;
            g.unix_bind.prefix = Some(v.to_string());
        } else {
            match super::bind::unix_perm_option(&mut g.unix_bind.perms, opt, value) {
                Some(Ok(())) => {}
                Some(Err(e)) => return Err(format!("'unix-bind': {e}").into()),
                None => {
                    return Err(format!(
                        "'unix-bind': unknown option '{opt}' (expected prefix, mode, user, uid, group or gid)"
                    )
                    .into())
                }
            }
        }
        i += 2;
    }
    Ok(())
}

fn uid(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a numeric user id")?;
    g.global.uid = Some(values::number(v, "a numeric user id").map_err(|e| format!("'uid': {e}"))?);
    ctx.no_more(1)
}

fn gid(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a numeric group id")?;
    g.global.gid =
        Some(values::number(v, "a numeric group id").map_err(|e| format!("'gid': {e}"))?);
    ctx.no_more(1)
}

fn chroot(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.chroot = Some(PathBuf::from(ctx.need(1, "a directory")?));
    ctx.no_more(1)
}

fn hard_stop_after(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a time")?;
    g.global.hard_stop_after =
        Some(values::timer(v).map_err(|e| format!("'hard-stop-after': {e}"))?);
    ctx.no_more(1)
}

fn node(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.node = Some(ctx.need(1, "a node name")?.to_string());
    ctx.no_more(1)
}

fn description(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "some text")?;
    g.global.description = Some(ctx.args[1..].join(" "));
    Ok(())
}

fn log_tag(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let tag = ctx.need(1, "a tag")?;
    g.global.log_tag = Some(tag.to_string());
    ctx.no_more(1)
}

fn log_send_hostname(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = match ctx.arg(1) {
        Some(n) => n.to_string(),
        None => crate::sys::hostname(),
    };
    g.global.log_send_hostname = Some(name);
    ctx.no_more(1)
}

fn log_line(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if ctx.arg(1) == Some("global") {
        return Err("'log global' is only meaningful in proxy sections".into());
    }
    g.global.logs.push(log::parse_target(ctx)?);
    Ok(())
}

fn stats(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let sub = ctx.need(1, "'socket', 'timeout' or 'maxconn'")?;
    match sub {
        "socket" => {
            let socket = stats_socket(ctx)?;
            g.global.stats_sockets.push(socket);
            Ok(())
        }
        "timeout" => {
            let v = ctx.need(2, "a time")?;
            g.global.stats_timeout =
                Some(values::timer(v).map_err(|e| format!("'stats timeout': {e}"))?);
            ctx.no_more(2)
        }
        "maxconn" => {
            let v = ctx.need(2, "a positive integer")?;
            g.global.stats_maxconn =
                Some(values::positive(v).map_err(|e| format!("'stats maxconn': {e}"))?);
            ctx.no_more(2)
        }
        "bind-process" => {
            ctx.warn("'stats bind-process' has no effect: Bascule runs one process");
            Ok(())
        }
        other => {
            let hint = crate::config::diag::suggest(other, ["socket", "timeout", "maxconn"]);
            Err(Problem::with_hint(
                format!("'stats {other}': unknown stats setting in global (expected socket, timeout or maxconn)"),
                hint,
            ))
        }
    }
}

/// `stats socket <path|ipv4@ip:port|ip:port> [mode M] [level L] [expose-fd listeners] [process P]`.
fn stats_socket(ctx: &mut Ctx<'_>) -> Result<StatsSocket, Problem> {
    let addr = ctx.need(2, "a UNIX socket path or an address")?;
    let prefix = values::socket_prefix(addr).map_err(|e| format!("'stats socket': {e}"))?;
    let address = match prefix {
        Some(values::SocketPrefix::Fd(fd)) => StatsAddress::Fd(fd),
        Some(values::SocketPrefix::Unix(path)) => StatsAddress::Unix(path),
        Some(values::SocketPrefix::Abns(name)) => StatsAddress::Abns(name),
        // A relative path (no colon, no prefix) is a UNIX socket too.
        None if !addr.contains(':') && !addr.contains('@') => {
            StatsAddress::Unix(PathBuf::from(addr))
        }
        None => StatsAddress::Tcp(
            values::socket_addr(addr).map_err(|e| format!("'stats socket': {e}"))?,
        ),
    };
    let mut socket = StatsSocket {
        address,
        unix_perms: Default::default(),
        level: "operator".to_string(),
        expose_fd_listeners: false,
    };
    let mut i = 3;
    while let Some(opt) = ctx.arg(i) {
        let value = ctx.arg(i + 1).map(str::to_owned);
        let need = |what: &str| {
            value
                .clone()
                .ok_or_else(|| Problem::from(format!("'stats socket': '{opt}' expects {what}")))
        };
        match opt {
            "mode" | "user" | "uid" | "group" | "gid" => {
                let v = value.as_deref();
                if let Some(Err(e)) = super::bind::unix_perm_option(&mut socket.unix_perms, opt, v)
                {
                    return Err(format!("'stats socket': {e}").into());
                }
                i += 2;
            }
            "level" => {
                let v = need("user, operator or admin")?;
                if !matches!(v.as_str(), "user" | "operator" | "admin") {
                    return Err(format!(
                        "'stats socket': 'level' expects user, operator or admin, got '{v}'"
                    )
                    .into());
                }
                socket.level = v;
                i += 2;
            }
            "expose-fd" => {
                let v = need("'listeners'")?;
                if v != "listeners" {
                    return Err(format!(
                        "'stats socket': 'expose-fd' expects 'listeners', got '{v}'"
                    )
                    .into());
                }
                socket.expose_fd_listeners = true;
                i += 2;
            }
            "process" => {
                need("a process set")?;
                ctx.warn("'process' on a stats socket has no effect: Bascule runs one process");
                i += 2;
            }
            other => {
                if let Some(arity) = super::bind::unsupported_arity(other) {
                    ctx.error(format!(
                        "'stats socket': option '{other}' is a HAProxy option that Bascule does not support yet"
                    ));
                    i += 1 + arity;
                } else {
                    let hint = crate::config::diag::suggest(
                        other,
                        ["mode", "level", "expose-fd", "process"],
                    );
                    ctx.error(Problem::with_hint(
                        format!("'stats socket': unknown option '{other}'"),
                        hint,
                    ));
                    i += 1;
                }
            }
        }
    }
    Ok(socket)
}

/// `setenv NAME VALUE` / `presetenv NAME VALUE`, applied at once: the lines after it expand the
/// new value (the lexer reads [`GlobalDraft::env`]).
fn setenv(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kw = ctx.kw().to_string();
    // HAProxy takes an empty word as a missing one.
    let (Some(name), Some(value)) = (
        ctx.arg(1).filter(|n| !n.is_empty()),
        ctx.arg(2).filter(|v| !v.is_empty()),
    ) else {
        return Err(format!("'{kw}' expects a name and a value").into());
    };
    ctx.no_more(2)?;
    if kw == "presetenv" {
        g.env.preset(name, value);
    } else {
        g.env.set(name, value);
    }
    Ok(())
}

/// `set-var`/`set-var-fmt`: kept for the validate stage, which compiles them with the rules
/// and evaluates them in line order.
fn set_var(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.set_vars.push((ctx.args.to_vec(), ctx.span.clone()));
    Ok(())
}

/// `localpeer NAME`: names this process in `peers` sections, unless `-L` did; like
/// HAProxy, it also sets `HAPROXY_LOCALPEER` for the following lines.
fn localpeer(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a peer name")?.to_string();
    ctx.no_more(1)?;
    if g.env.local_peer_from_cli() {
        ctx.warn(format!(
            "'localpeer {name}' ignored: the command line's -L names the local peer"
        ));
        return Ok(());
    }
    if g.peers_seen {
        ctx.warn(format!(
            "'localpeer {name}' ignored: it must come before the peers sections"
        ));
        return Ok(());
    }
    g.env.set("HAPROXY_LOCALPEER", &name);
    g.local_peer = Some(name);
    Ok(())
}

/// `unsetenv NAME...`.
fn unsetenv(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "at least one variable name")?;
    for name in &ctx.args[1..] {
        g.env.unset(name);
    }
    Ok(())
}

/// `resetenv [NAME...]`.
fn resetenv(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let keep: Vec<&str> = ctx.args[1..].iter().map(String::as_str).collect();
    g.env.reset(&keep);
    Ok(())
}

/// `thread-groups N`: Bascule's threads form a single group, which is what `1` asks for.
fn thread_groups(_: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a number of thread groups")?;
    let n = values::positive(v).map_err(|e| format!("'thread-groups': {e}"))?;
    ctx.no_more(1)?;
    if n != 1 {
        return Err(format!(
            "'thread-groups {n}': only one thread group is supported (all threads share one group)"
        )
        .into());
    }
    Ok(())
}

fn tune_bufsize(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a size")?;
    let n = values::size(v).map_err(|e| format!("'tune.bufsize': {e}"))?;
    if !(1024..=(1 << 30)).contains(&n) {
        return Err(format!("'tune.bufsize': must be between 1k and 1g, got '{v}'").into());
    }
    g.global.tune_bufsize = n as usize;
    g.tune_span = Some(ctx.span.clone());
    ctx.no_more(1)
}

/// `tune.idle-pool.shared on|off`: whether a worker may take over an idle server connection
/// another worker holds (`on`, HAProxy's default) or uses only its own (`off`).
fn tune_idle_pool_shared(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.args.get(1).map_or("", String::as_str);
    g.global.idle_pool_shared = match v {
        "on" => true,
        "off" => false,
        _ => {
            return Err(format!(
                "'tune.idle-pool.shared' expects either 'on' or 'off' but got '{v}'."
            )
            .into())
        }
    };
    ctx.no_more(1)
}

fn tune_maxrewrite(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a size")?;
    let n = values::size(v).map_err(|e| format!("'tune.maxrewrite': {e}"))?;
    g.global.tune_maxrewrite =
        usize::try_from(n).map_err(|_| format!("'tune.maxrewrite': '{v}' is too large"))?;
    g.tune_span = Some(ctx.span.clone());
    ctx.no_more(1)
}

fn nbproc(_: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a number of processes")?;
    let n: u32 =
        values::number(v, "a number of processes").map_err(|e| format!("'nbproc': {e}"))?;
    ctx.no_more(1)?;
    if n == 1 {
        ctx.warn("'nbproc 1' has no effect: Bascule runs one process with 'nbthread' threads");
        Ok(())
    } else {
        Err(format!("'nbproc {n}': Bascule runs one process (HAProxy 2.5 removed nbproc); use 'nbthread {n}' instead").into())
    }
}

/// `insecure-fork-wanted` and `insecure-setuid-wanted` lift HAProxy's guards against
/// starting processes (external checks, Lua's `os.execute`) or setuid programs once it runs.
/// Bascule starts neither, so there is nothing to permit: accepted, with a notice saying so.
fn insecure_wanted(_: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kw = ctx.kw().to_string();
    ctx.no_more(0)?;
    let what = if kw == "insecure-fork-wanted" {
        "a process"
    } else {
        "a setuid program"
    };
    ctx.notice(format!(
        "'{kw}' changes nothing: Bascule never starts {what} once it runs (no external checks, no Lua), so there is nothing to permit"
    ));
    Ok(())
}

fn no_tls(_: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kw = ctx.kw().to_string();
    let why = match kw.as_str() {
        "tune.ssl.lifetime" => {
            "rustls keeps sessions until the cache evicts them, and tickets for its own lifetime"
        }
        "tune.ssl.force-private-cache" => "each listener has its own session cache already",
        "tune.ssl.ssl-ctx-cache-size" => "Bascule does not generate certificates",
        "maxsslconn" => "TLS connections count against maxconn like the others",
        _ => "Bascule does not implement this TLS setting yet",
    };
    ctx.warn(format!("'{kw}' has no effect: {why}"));
    Ok(())
}

fn spread_checks(_: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kw = ctx.kw().to_string();
    ctx.need(1, "a value")?;
    ctx.warn(format!(
        "'{kw}' has no effect: Bascule does not spread health checks yet"
    ));
    ctx.no_more(1)
}

fn expose_experimental(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    g.global.expose_experimental = true;
    ctx.no_more(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_map_thread_words() {
        assert_eq!(cpu_map_threads("1/1"), Ok((false, ThreadSel::Set(vec![1]))));
        assert_eq!(cpu_map_threads("1/all"), Ok((false, ThreadSel::All)));
        assert_eq!(cpu_map_threads("1"), Ok((false, ThreadSel::All)));
        assert_eq!(
            cpu_map_threads("auto:1/1-2"),
            Ok((true, ThreadSel::Set(vec![1, 2])))
        );
        assert_eq!(cpu_map_threads("all/odd"), Ok((false, ThreadSel::Odd)));
        assert!(cpu_map_threads("2/1").is_err());
        assert!(cpu_map_threads("1/0").is_err());
        assert!(cpu_map_threads("1/65").is_err());
    }

    #[test]
    fn id_databases() {
        let db = "# comment\nroot:x:0:0:root:/root:/bin/sh\nhaproxy:x:104:110::/var/lib/haproxy:/usr/sbin/nologin\n";
        assert_eq!(lookup_id(db, "haproxy"), Some(104));
        assert_eq!(lookup_id(db, "root"), Some(0));
        assert_eq!(lookup_id(db, "nobody"), None);
        assert_eq!(lookup_id("grp:x:12:a,b\n", "grp"), Some(12));
    }
}
