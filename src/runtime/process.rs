//! The life of the process: bind, daemonize, write the pidfile, start the workers, signal older
//! processes, then wait for a signal and stop hard or softly.
//!
//! The order matters. Listeners are bound first so that an address in use is reported on the
//! terminal, before `-D` forks; the fork happens before any thread or runtime exists; privileges
//! are dropped after binding (ports below 1024) and after the pidfile is written; older processes
//! named by `-sf`/`-st` are signalled only once our workers accept, so no connection finds the
//! port closed.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};

use crate::cli::{OldProcessSignal, Options};
use crate::config::model::Config;
use crate::net::listener::{self, BoundListener};
use crate::runtime::worker::{self, WorkerListener, WorkerSpec};
use crate::state::Shared;
use crate::sys;

/// Why the process could not run.
#[derive(Debug)]
pub struct RunError(pub String);

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunError {}

fn err(context: impl std::fmt::Display, e: impl std::fmt::Display) -> RunError {
    RunError(format!("{context}: {e}"))
}

/// Descriptors HAProxy reserves beyond its listeners, checks and threads (`global.maxsock`
/// starts at 10), and those its CLI frontend may hold when there is a stats socket (its
/// `maxconn`, 10): the ideal `maxconn` is HAProxy's to the unit (`show stat`'s `slim`).
const RESERVED_FDS: u64 = 10;
const CLI_FDS: u64 = 10;

/// Binds every listener, starts the workers, and blocks until the process is told to stop.
/// How often expired stick-table entries are removed (HAProxy removes each at its expiry; a
/// lookup already treats an expired entry as absent, so only `used`, `table_cnt` and memory
/// wait for this pass).
const TABLE_PURGE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Removes expired stick-table entries periodically, on this (the main) thread: each shard is
/// locked in turn for one pass over it.
fn spawn_table_purge(shared: &Arc<Shared>) {
    if !shared.tables.iter().any(|t| t.spec.expire.is_some()) {
        return;
    }
    let shared = Arc::clone(shared);
    tokio::task::spawn_local(async move {
        let mut tick = tokio::time::interval(TABLE_PURGE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = crate::base::clock::uptime_ms();
            for t in &shared.tables {
                t.purge(now);
            }
        }
    });
}

/// The TLS handshakes of rings (`server ... ssl`) and log-forward listeners (`bind ... ssl`),
/// given to `log`, which sits below `net::tls` and cannot run them itself.
struct LogTls;

impl crate::log::conn::Handshakes for LogTls {
    fn connect(
        &self,
        sock: tokio::net::TcpStream,
        tls: &crate::tls::client::ServerTls,
        addr: std::net::SocketAddr,
        limit: Option<std::time::Duration>,
    ) -> crate::log::conn::Handshake {
        let config = tls.config.clone();
        let name = tls.name(tls.sni.as_deref(), addr.ip());
        Box::pin(async move {
            let config = config.ok_or_else(|| io::Error::other("a ring server without 'ssl'"))?;
            let s = crate::net::tls::TlsSock::connect(sock, config, name, limit).await?;
            Ok(Box::new(crate::net::stream::Stream::Tls(Box::new(s))) as Box<_>)
        })
    }

    fn accept(
        &self,
        sock: tokio::net::TcpStream,
        tls: Arc<crate::tls::server::Built>,
        limit: Option<std::time::Duration>,
    ) -> crate::log::conn::Handshake {
        use crate::net::tls::TlsSock;
        Box::pin(async move {
            // `crt-list` lines with options of their own: the ClientHello chooses.
            let s = if tls.has_lines() {
                TlsSock::accept_by_hello(sock, |h| tls.config_for(h), limit, 0).await?
            } else {
                TlsSock::accept(sock, Arc::clone(&tls.config), limit, 0).await?
            };
            Ok(Box::new(crate::net::stream::Stream::Tls(Box::new(s))) as Box<_>)
        })
    }
}

pub fn run(config: Config, opts: &Options) -> Result<(), RunError> {
    crate::base::clock::mark_start();
    if let Some(mb) = opts.memory_limit_mb {
        sys::set_data_limit(mb.saturating_mul(1 << 20))
            .map_err(|e| err(format!("cannot limit memory to {mb} MB (-m)"), e))?;
    }
    // The global maxconn first: it is the listen backlog of a frontend that sets neither
    // `backlog` nor `maxconn`.
    let binds = config
        .frontends
        .iter()
        .filter(|f| !f.disabled)
        .map(|f| f.binds.len() as u64)
        .sum();
    let maxconn = resolve_maxconn(&config, binds)?;
    let listeners = bind_all(&config, maxconn)?;
    // `log-forward` sockets too, so that an error shows before `-D` forks.
    let forward_socks = config
        .log_forwards
        .iter()
        .map(crate::log::forward::bind)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err("log-forward", e))?;

    let daemon = (opts.daemon || config.global.daemon) && !opts.debug && !opts.foreground;
    let pidfile = opts.pidfile.clone().or(config.global.pidfile.clone());
    if daemon {
        match sys::fork().map_err(|e| err("cannot fork into the background", e))? {
            sys::Forked::Parent { child } => {
                if let Some(p) = &pidfile {
                    write_pidfile(p, child)?;
                }
                std::process::exit(0);
            }
            sys::Forked::Child => sys::detach().map_err(|e| err("cannot detach", e))?,
        }
    } else if let Some(p) = &pidfile {
        write_pidfile(p, std::process::id() as i32)?;
    }
    // From here on, every exit path removes the pidfile.
    let _pidfile_guard = PidfileGuard(pidfile);

    if let Some(dir) = &config.global.chroot {
        sys::chroot(dir).map_err(|e| err(format!("cannot chroot to '{}'", dir.display()), e))?;
    }
    sys::drop_privileges(config.global.uid, config.global.gid)
        .map_err(|e| err("cannot change user or group", e))?;

    let nbthread = config
        .global
        .nbthread
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let cpu_map = config.global.cpu_map.clone();
    let shared = Arc::new(Shared::new(config, maxconn, opts.debug, nbthread));

    // Local, so that with `nbthread 1` the worker's `!Send` sessions run on this thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build_local(tokio::runtime::LocalOptions::default())
        .map_err(|e| err("cannot start the main event loop", e))?;
    rt.block_on(supervise(
        shared,
        (listeners, forward_socks),
        nbthread,
        cpu_map,
        opts,
    ))
}

/// Starts the workers and handles signals until the process must exit.
async fn supervise(
    shared: Arc<Shared>,
    (listeners, forward_socks): (Vec<BoundListener>, Vec<crate::log::forward::Bound>),
    nbthread: usize,
    cpu_map: Vec<crate::config::model::CpuMap>,
    opts: &Options,
) -> Result<(), RunError> {
    // Signal handlers first, so a signal that arrives during start-up is not lost.
    let mut term = signal(SignalKind::terminate()).map_err(|e| err("signal setup", e))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| err("signal setup", e))?;
    let mut usr1 = signal(SignalKind::user_defined1()).map_err(|e| err("signal setup", e))?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let mut handles = Vec::with_capacity(nbthread);
    let (peers, inboxes) = crate::session::takeover::peers(nbthread);
    for (id, inbox) in inboxes.into_iter().enumerate() {
        let mut mine = Vec::with_capacity(listeners.len());
        for l in &listeners {
            let socket = l
                .socket
                .try_clone()
                .map_err(|e| err("cannot share a listener with a worker", e))?;
            mine.push(WorkerListener {
                frontend: l.frontend,
                bind: l.bind,
                socket,
            });
        }
        let cpus = cpu_map
            .iter()
            .rev()
            .find(|m| m.thread == id)
            .map(|m| m.cpus.clone());
        let spec = WorkerSpec {
            id,
            cpus,
            listeners: mine,
            peers: Arc::clone(&peers),
            inbox,
        };
        if nbthread == 1 {
            // The only worker runs on this thread: the process then has one thread, and the
            // kernel looks up its descriptors without taking a reference on each (fdget's
            // single-threaded fast path), on every socket call of the data path.
            let (shared, stop, done) = (Arc::clone(&shared), stop_rx.clone(), done_tx.clone());
            tokio::task::spawn_local(async move {
                worker::run_here(spec, shared, stop).await;
                let _ = done.send(id);
            });
        } else {
            let h = worker::spawn(spec, Arc::clone(&shared), stop_rx.clone(), done_tx.clone())
                .map_err(|e| err("cannot start a worker thread", e))?;
            handles.push(h);
        }
    }
    // Health checks and the stats socket run here, once for the whole process.
    crate::backend::check::spawn_all(&shared);
    crate::runtime::stats::spawn_sockets(&shared, &shared.global.stats_sockets)
        .map_err(|e| err("stats socket", e))?;
    spawn_table_purge(&shared);
    // Rings and log-forward sections run here too, with the TLS handshakes they need.
    let log_tls: std::rc::Rc<dyn crate::log::conn::Handshakes> = std::rc::Rc::new(LogTls);
    for ring in shared.log_outputs.rings() {
        crate::log::ring::spawn(ring, &log_tls);
    }
    for (f, socks) in shared.log_forwards.iter().zip(forward_socks) {
        crate::log::forward::spawn(
            Arc::clone(f),
            socks,
            Arc::clone(&shared.log_outputs),
            &log_tls,
        )
        .map_err(|e| err("log-forward", e))?;
    }
    crate::peers::spawn(&shared.peers, &shared.tables).map_err(|e| err("peers", e))?;
    // The workers hold their own descriptors; ours would keep the port open after a soft stop.
    drop(listeners);
    drop(done_tx);

    if let Some((which, pids)) = &opts.old_pids {
        let sig = match which {
            OldProcessSignal::Finish => sys::Signal::Usr1,
            OldProcessSignal::Terminate => sys::Signal::Term,
        };
        for &pid in pids {
            if let Err(e) = sys::kill(pid, sig) {
                eprintln!("[WARNING] cannot signal old process {pid}: {e}");
            }
        }
    }

    let mut finished = 0;
    let mut hard_deadline: Option<tokio::time::Instant> = None;
    loop {
        let deadline = async {
            match hard_deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
            _ = deadline => {
                eprintln!("[WARNING] hard-stop-after expired: stopping with connections still open");
                return Ok(());
            }
            _ = usr1.recv() => {
                if !*stop_tx.borrow() {
                    if opts.debug {
                        eprintln!("[debug] SIGUSR1: soft stop, listeners closed");
                    }
                    shared.stopping.store(true, std::sync::atomic::Ordering::Relaxed);
                    let _ = stop_tx.send(true);
                    hard_deadline = shared
                        .global
                        .hard_stop_after
                        .map(|d| tokio::time::Instant::now() + d);
                }
            }
            id = done_rx.recv() => match id {
                Some(_) => {
                    finished += 1;
                    if finished == nbthread {
                        break;
                    }
                }
                None => break,
            },
        }
    }
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

/// Binds every listener of every enabled frontend, reporting all failures at once.
///
/// A bind's listen backlog is its own `backlog`, else its frontend's `backlog`, else its
/// frontend's `maxconn`, which defaults to the global `maxconn`, as in HAProxy 2.6 (the kernel
/// caps it at `net.core.somaxconn`).
fn bind_all(config: &Config, global_maxconn: u32) -> Result<Vec<BoundListener>, RunError> {
    let mut bound = Vec::new();
    let mut errors = Vec::new();
    for (fi, fe) in config.frontends.iter().enumerate() {
        if fe.disabled {
            continue;
        }
        let default_backlog = fe.backlog.or(fe.maxconn).unwrap_or(global_maxconn);
        for (bi, b) in fe.binds.iter().enumerate() {
            match listener::bind(b, default_backlog) {
                Ok(socket) => bound.push(BoundListener {
                    frontend: fi,
                    bind: bi,
                    socket,
                }),
                Err(e) => errors.push(listener::bind_error(&b.addr, &fe.name, &b.location, &e)),
            }
        }
    }
    if errors.is_empty() {
        Ok(bound)
    } else {
        Err(RunError(errors.join("\nbascule: ")))
    }
}

/// Applies `ulimit-n` and returns the global maxconn: the configured one (raising the descriptor
/// limit to fit it when allowed), or HAProxy 2.6's ideal one (`compute_ideal_maxconn`): the
/// larger of the soft and hard descriptor limits at start, less ten, the listeners (stats
/// sockets included, and ten for their CLI), the checks and agents and three per thread, halved (two descriptors per connection; with splice, a pipe
/// for every other connection: two fifths). What cannot be applied is said on stderr, and the
/// process starts with what could be.
fn resolve_maxconn(config: &Config, listeners: u64) -> Result<u32, RunError> {
    let g = &config.global;
    let (boot_soft, boot_hard) = sys::nofile_limit().map_err(|e| err("getrlimit", e))?;
    if let Some(n) = g.ulimit_n {
        if let Err(e) = sys::set_nofile_limit(n) {
            // As HAProxy does (without `strict-limits`): the most the system allows, and a
            // warning.
            let _ = sys::set_nofile_limit(boot_hard);
            let (soft, _) = sys::nofile_limit().map_err(|e| err("getrlimit", e))?;
            eprintln!(
                "[WARNING] 'ulimit-n {n}': cannot raise the open file limit that far ({e}); \
                 it is {soft} (the hard limit), which applies"
            );
        }
    }
    let (mut soft, hard) = sys::nofile_limit().map_err(|e| err("getrlimit", e))?;
    let checks = config
        .backends
        .iter()
        .flat_map(|b| &b.servers)
        .map(|s| u64::from(s.check.is_some()) + u64::from(s.agent.is_some()))
        .sum::<u64>();
    // Each stats socket listens, and their CLI frontend may hold its `maxconn`.
    let sockets = g.stats_sockets.len() as u64;
    let cli = sockets + if sockets > 0 { CLI_FDS } else { 0 };
    let threads = g
        .nbthread
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        as u64;
    let overhead = RESERVED_FDS + listeners + cli + checks + 3 * threads;
    let maxconn = match g.maxconn {
        Some(m) => m,
        None => {
            let remain = boot_soft.max(boot_hard).saturating_sub(overhead);
            let splice = config
                .frontends
                .iter()
                .map(|f| &f.options)
                .chain(config.backends.iter().map(|b| &b.options))
                .any(|o| o.splice_auto || o.splice_request || o.splice_response);
            let ideal = if splice { 2 * remain / 5 } else { remain / 2 };
            ideal.clamp(100, u64::from(u32::MAX)) as u32
        }
    };
    let needed = u64::from(maxconn) * 2 + overhead;
    if soft < needed && g.ulimit_n.is_none() {
        let target = needed.min(hard);
        if sys::set_nofile_limit(target).is_ok() {
            soft = target;
        }
    }
    if soft < needed {
        eprintln!(
            "[WARNING] global maxconn {maxconn} needs {needed} file descriptors but the limit is \
             {soft}: maxconn {maxconn} applies, and connections past about {} will fail to open",
            soft.saturating_sub(overhead) / 2
        );
    }
    Ok(maxconn)
}

fn write_pidfile(path: &Path, pid: i32) -> Result<(), RunError> {
    std::fs::write(path, format!("{pid}\n"))
        .map_err(|e| err(format!("cannot write pidfile '{}'", path.display()), e))
}

/// Removes the pidfile when the process leaves `run`, whichever way.
struct PidfileGuard(Option<PathBuf>);

impl Drop for PidfileGuard {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            if let Err(e) = std::fs::remove_file(p) {
                if e.kind() != io::ErrorKind::NotFound {
                    eprintln!("[WARNING] cannot remove pidfile '{}': {e}", p.display());
                }
            }
        }
    }
}
