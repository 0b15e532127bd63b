//! Seeing state: the `stats socket` runtime API, answering `show stat` in HAProxy's CSV layout
//! (the same header and column order, so existing scripts and exporters keep working), plus
//! `show info` and `help`.
//!
//! The socket runs on the main thread's event loop, away from the workers. A command reads the
//! shared atomics (connection counts, weights, check results); nothing on the data path waits
//! for it. Like HAProxy's non-interactive mode, one connection carries one line of commands
//! separated by `;`, then is closed.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backend::CHECK_STATUS;
use crate::config::model::{StatsAddress, StatsSocket};
use crate::state::Shared;

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Marks the process start (for `lastchg` and `Uptime_sec`).
pub fn mark_start() {
    STARTED.get_or_init(Instant::now);
}

/// Milliseconds since [`mark_start`].
pub fn uptime_ms() -> u64 {
    STARTED.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Seconds since [`mark_start`].
pub fn uptime_secs() -> u64 {
    STARTED.get_or_init(Instant::now).elapsed().as_secs()
}

/// HAProxy's `show stat` columns 0 to 50, in order.
pub const COLUMNS: [&str; 51] = [
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
];

/// One CSV row: values by column name; the rest stay empty.
fn row(out: &mut String, values: &[(&str, String)]) {
    for col in COLUMNS {
        if let Some((_, v)) = values.iter().find(|(c, _)| *c == col) {
            out.push_str(v);
        }
        out.push(',');
    }
    out.push('\n');
}

/// The `show stat` output.
pub fn show_stat(shared: &Shared) -> String {
    let mut out = String::from("# ");
    out.push_str(&COLUMNS.join(","));
    out.push_str(",\n");
    for fe in &shared.frontends {
        let c = &fe.config;
        row(
            &mut out,
            &[
                ("pxname", c.name.clone()),
                ("svname", "FRONTEND".into()),
                ("scur", fe.limit.current().to_string()),
                ("slim", c.maxconn.map_or(String::new(), |m| m.to_string())),
                ("status", "OPEN".into()),
                ("pid", "1".into()),
                ("iid", c.id.to_string()),
                ("sid", "0".into()),
                ("type", "0".into()),
            ],
        );
    }
    for be in &shared.backends {
        let c = &be.config;
        let (mut scur, mut stot, mut econ, mut weight, mut act, mut bck) = (0u64, 0, 0, 0, 0, 0);
        let mut any_up = false;
        for s in &be.servers {
            let sc = &s.config;
            let cur = u64::from(s.cur_conns.get());
            let tot = s.total_conns.load(Ordering::Relaxed);
            let errs = s.conn_errors.load(Ordering::Relaxed);
            let w = s.weight.load(Ordering::Relaxed);
            let up = s.up.load(Ordering::Relaxed);
            let status = if sc.disabled {
                "MAINT".to_string()
            } else if sc.check.is_none() {
                "no check".to_string()
            } else if !up {
                "DOWN".to_string()
            } else if w == 0 {
                "DRAIN".to_string()
            } else {
                "UP".to_string()
            };
            let usable = !sc.disabled && up;
            if usable {
                any_up = true;
                weight += u64::from(w);
                if sc.backup {
                    bck += 1;
                } else {
                    act += 1;
                }
            }
            scur += cur;
            stot += tot;
            econ += errs;
            let ck = &s.check;
            let checked = sc.check.is_some();
            let opt = |v: String| if checked { v } else { String::new() };
            let code = ck.code.load(Ordering::Relaxed);
            row(
                &mut out,
                &[
                    ("pxname", c.name.clone()),
                    ("svname", sc.name.clone()),
                    ("qcur", s.queued.load(Ordering::Relaxed).to_string()),
                    ("scur", cur.to_string()),
                    ("slim", sc.maxconn.map_or(String::new(), |m| m.to_string())),
                    ("stot", tot.to_string()),
                    ("econ", errs.to_string()),
                    ("status", status),
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
                        (uptime_secs() - ck.last_change_s.load(Ordering::Relaxed)).to_string(),
                    ),
                    ("pid", "1".into()),
                    ("iid", c.id.to_string()),
                    ("sid", sc.id.to_string()),
                    ("lbtot", tot.to_string()),
                    ("type", "2".into()),
                    (
                        "check_status",
                        opt(CHECK_STATUS
                            .get(usize::from(ck.status.load(Ordering::Relaxed)))
                            .unwrap_or(&"UNK")
                            .to_string()),
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
                        opt(ck.duration_ms.load(Ordering::Relaxed).to_string()),
                    ),
                ],
            );
        }
        row(
            &mut out,
            &[
                ("pxname", c.name.clone()),
                ("svname", "BACKEND".into()),
                ("qcur", be.queued.load(Ordering::Relaxed).to_string()),
                ("scur", scur.to_string()),
                ("stot", stot.to_string()),
                ("econ", econ.to_string()),
                ("status", if any_up { "UP" } else { "DOWN" }.into()),
                ("weight", weight.to_string()),
                ("act", act.to_string()),
                ("bck", bck.to_string()),
                ("pid", "1".into()),
                ("iid", c.id.to_string()),
                ("sid", "0".into()),
                ("lbtot", stot.to_string()),
                ("type", "1".into()),
            ],
        );
    }
    out
}

/// The `show info` output (a subset of HAProxy's fields).
pub fn show_info(shared: &Shared) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Name: Bascule");
    let _ = writeln!(out, "Version: {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(out, "Pid: {}", std::process::id());
    let _ = writeln!(out, "Uptime_sec: {}", uptime_secs());
    let _ = writeln!(out, "Nbthread: {}", shared.nbthread);
    let _ = writeln!(out, "Maxconn: {}", shared.global_limit.max());
    let _ = writeln!(out, "CurrConns: {}", shared.global_limit.current());
    if let Some(node) = &shared.global.node {
        let _ = writeln!(out, "node: {node}");
    }
    out
}

/// Answers one line of `;`-separated commands.
pub fn answer(shared: &Shared, line: &str) -> String {
    let mut out = String::new();
    for cmd in line.split(';').map(str::trim).filter(|c| !c.is_empty()) {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        match words.as_slice() {
            ["show", "stat", ..] => out.push_str(&show_stat(shared)),
            ["show", "info", ..] => out.push_str(&show_info(shared)),
            ["help"] => out.push_str(
                "The following commands are valid at this level:\n  help           : this message\n  show info      : report information about the running process\n  show stat      : report counters for each proxy and server\n",
            ),
            _ => {
                let _ = writeln!(
                    out,
                    "Unknown command: '{cmd}'. Bascule supports: help, show info, show stat."
                );
            }
        }
        out.push('\n');
    }
    out
}

/// Binds every `stats socket` and serves it on the current runtime.
pub fn spawn_sockets(shared: &Arc<Shared>, sockets: &[StatsSocket]) -> std::io::Result<()> {
    for s in sockets {
        match &s.address {
            StatsAddress::Unix(path) => {
                // A socket file left by an earlier run would make bind fail.
                if path.exists() {
                    let _ = std::fs::remove_file(path);
                }
                let l = tokio::net::UnixListener::bind(path).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot bind stats socket '{}': {e}", path.display()),
                    )
                })?;
                if let Some(mode) = s.mode {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
                }
                let shared = Arc::clone(shared);
                tokio::spawn(async move {
                    while let Ok((conn, _)) = l.accept().await {
                        tokio::spawn(serve(Arc::clone(&shared), conn));
                    }
                });
            }
            StatsAddress::Tcp(addr) => {
                let l = std::net::TcpListener::bind(addr).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot bind stats socket {addr}: {e}"))
                })?;
                serve_tcp(shared, l)?;
            }
            StatsAddress::Abns(name) => {
                use std::os::linux::net::SocketAddrExt;
                let bind = || {
                    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                    std::os::unix::net::UnixListener::bind_addr(&addr)
                };
                let l = bind().map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot bind stats socket 'abns@{name}': {e}"),
                    )
                })?;
                serve_unix(shared, l)?;
            }
            StatsAddress::Fd(fd) => {
                // An inherited listening socket: TCP (as VTest passes them) or UNIX.
                let fail = |msg: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, msg);
                let owned = crate::sys::dup_inherited(*fd).map_err(|e| {
                    fail(format!(
                        "stats socket 'fd@{fd}': descriptor is not open: {e}"
                    ))
                })?;
                let sock = socket2::SockRef::from(&owned);
                if sock.r#type()? != socket2::Type::STREAM || !sock.is_listener()? {
                    return Err(fail(format!(
                        "stats socket 'fd@{fd}': not a listening stream socket"
                    )));
                }
                if sock.domain()? == socket2::Domain::UNIX {
                    serve_unix(shared, std::os::unix::net::UnixListener::from(owned))?;
                } else {
                    serve_tcp(shared, std::net::TcpListener::from(owned))?;
                }
            }
        }
    }
    Ok(())
}

/// Serves a stats socket on a bound TCP listener.
fn serve_tcp(shared: &Arc<Shared>, l: std::net::TcpListener) -> std::io::Result<()> {
    l.set_nonblocking(true)?;
    let l = tokio::net::TcpListener::from_std(l)?;
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        while let Ok((conn, _)) = l.accept().await {
            tokio::spawn(serve(Arc::clone(&shared), conn));
        }
    });
    Ok(())
}

/// Serves a stats socket on a bound UNIX listener.
fn serve_unix(shared: &Arc<Shared>, l: std::os::unix::net::UnixListener) -> std::io::Result<()> {
    l.set_nonblocking(true)?;
    let l = tokio::net::UnixListener::from_std(l)?;
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        while let Ok((conn, _)) = l.accept().await {
            tokio::spawn(serve(Arc::clone(&shared), conn));
        }
    });
    Ok(())
}

/// Reads one command line (bounded, with the `stats timeout`), answers, closes.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut conn: S,
) {
    let timeout = shared
        .global
        .stats_timeout
        .unwrap_or(std::time::Duration::from_secs(10));
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    let read = async {
        while !buf.contains(&b'\n') && buf.len() < 64 * 1024 {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    if tokio::time::timeout(timeout, read).await.is_err() {
        return;
    }
    let line = String::from_utf8_lossy(&buf);
    let line = line.lines().next().unwrap_or("");
    let reply = answer(&shared, line);
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}
