//! Access logs and event logs, as HAProxy writes them.
//!
//! - [`format`] compiles `log-format` strings once at load and renders a [`record::Record`];
//! - [`record`] holds the facts of one session or transaction (timers, bytes, termination
//!   state, counters, captures);
//! - [`syslog`] frames a message for each target (`format rfc3164|rfc5424|...`, `len`);
//! - [`sender`] gets lines out without blocking a worker;
//! - [`ring`] keeps a `ring` section's messages and sends them to its TCP syslog servers;
//!   [`forward`] receives a `log-forward` section's messages; both speak TLS through the
//!   handshakes [`conn`] lets the process give them.
//!
//! [`ProxyLog`] is a proxy's logging, built from the model at start: its targets (facility,
//! level filter), its formats, its tag and what it captures.

pub mod conn;
pub mod format;
pub mod forward;
pub mod record;
pub mod ring;
pub mod sender;
pub mod syslog;

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use crate::config::keywords::log::{FACILITIES, LEVELS};
use crate::config::model::{Global, LogFormats, LogSample, LogTarget, ProxyOptions};
use crate::rules::{Eval, Source};
use format::Format;
use record::Record;
use sender::Outputs;
use syslog::{Framing, Header};

/// Syslog levels used by Bascule's own lines.
pub const LEVEL_EMERG: u8 = 0;
pub const LEVEL_ALERT: u8 = 1;
pub const LEVEL_ERR: u8 = 3;
pub const LEVEL_NOTICE: u8 = 5;
pub const LEVEL_INFO: u8 = 6;

/// One `log` line, resolved.
#[derive(Debug, Clone)]
struct Target {
    output: usize,
    framing: Framing,
    facility: u8,
    /// Lines less severe than this (a higher number) are not sent.
    max_level: u8,
    /// Lines more severe than this (a lower number) are sent at this level.
    min_level: u8,
    len: usize,
    /// `sample RANGES:SIZE`, with the count of lines offered to this target so far.
    sample: Option<Arc<(LogSample, AtomicU64)>>,
}

/// A proxy's logging.
#[derive(Debug)]
pub struct ProxyLog {
    targets: Vec<Target>,
    /// The access-log, structured-data and unique-id formats, compiled at load.
    pub formats: Arc<LogFormats>,
    tag: String,
    hostname: Option<String>,
    /// `%H`: the system's host name.
    system_host: String,
    pub dontlognull: bool,
    pub separate_errors: bool,
    /// `capture request header`: lower-case names and lengths.
    pub req_captures: Vec<(String, usize)>,
    pub res_captures: Vec<(String, usize)>,
    pub unique_id_header: Option<String>,
    log_counter: AtomicU64,
}

/// `%rt`: requests and TCP sessions counted process-wide (only when a format shows it).
static REQ_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Takes the next request number.
pub fn next_request_id() -> u64 {
    REQ_COUNTER.fetch_add(1, Ordering::Relaxed)
}

fn level_of(s: &Option<String>, default: u8) -> u8 {
    s.as_deref()
        .and_then(|l| LEVELS.iter().position(|x| *x == l))
        .map_or(default, |i| i as u8)
}

/// Resolves `log` lines into targets, opening their outputs in `outputs`.
fn build_targets(logs: &[LogTarget], outputs: &mut Outputs) -> Vec<Target> {
    let mut targets = Vec::new();
    for t in logs {
        match outputs.index(&t.address) {
            Ok(output) => targets.push(Target {
                output,
                // A ring frames lines its own way (`format` and `maxlen` of the ring).
                framing: Framing::parse(outputs.ring_of(output).map_or(&t.format, |r| &r.format)),
                facility: FACILITIES
                    .iter()
                    .position(|f| *f == t.facility)
                    .unwrap_or(16) as u8,
                max_level: level_of(&t.level, 7),
                min_level: level_of(&t.minlevel, 0),
                len: outputs
                    .ring_of(output)
                    .map_or(t.len.unwrap_or(1024), |r| r.maxlen),
                sample: t.sample.clone().map(|s| Arc::new((s, AtomicU64::new(0)))),
            }),
            Err(e) => eprintln!("[ALERT] cannot open log target {:?}: {e}", t.address),
        }
    }
    targets
}

impl ProxyLog {
    /// Builds a proxy's logging from its `log` lines, options and compiled formats, opening
    /// outputs in `outputs`.
    pub fn new(
        logs: &[LogTarget],
        opts: &ProxyOptions,
        formats: Arc<LogFormats>,
        global: &Global,
        outputs: &mut Outputs,
    ) -> ProxyLog {
        let targets = build_targets(logs, outputs);
        let caps = |response: bool| {
            opts.captures
                .iter()
                .filter(|c| c.response == response)
                .map(|c| (c.name.to_ascii_lowercase(), c.len))
                .collect()
        };
        ProxyLog {
            targets,
            formats,
            tag: opts
                .log_tag
                .clone()
                .or(global.log_tag.clone())
                .unwrap_or_else(|| "haproxy".to_string()),
            hostname: global.log_send_hostname.clone(),
            system_host: crate::sys::hostname(),
            dontlognull: opts.dontlognull,
            separate_errors: opts.log_separate_errors,
            req_captures: caps(false),
            res_captures: caps(true),
            unique_id_header: opts.unique_id_header.clone(),
            log_counter: AtomicU64::new(0),
        }
    }

    /// Whether lines go anywhere.
    pub fn enabled(&self) -> bool {
        !self.targets.is_empty()
    }

    /// Whether the access-log format (if any) needs what [`format::uses`] names.
    pub fn uses(&self, what: u64) -> bool {
        let f = &self.formats;
        f.access.as_ref().is_some_and(|f| f.uses(what))
            || f.sd.as_ref().is_some_and(|f| f.uses(what))
    }

    /// The access-log format; `None`: HAProxy's legacy "Connect from" line at accept.
    pub fn format(&self) -> Option<&Format> {
        self.formats.access.as_ref()
    }

    /// Whether `%[status]` has a value in this proxy's lines (see [`Format::waits`]).
    pub fn status_at_log(&self) -> bool {
        let f = &self.formats;
        !(f.access.as_ref().is_some_and(Format::waits) || f.sd.as_ref().is_some_and(Format::waits))
    }

    /// The `unique-id-format`, if any.
    pub fn unique_id(&self) -> Option<&Format> {
        self.formats.unique_id.as_ref()
    }

    /// Renders and sends the access-log line of `rec` at `level`; `src` answers its `%[...]`.
    pub fn access<'a>(
        &'a self,
        outputs: &Outputs,
        level: u8,
        rec: &mut Record<'a>,
        src: &dyn Source,
    ) {
        let Some(format) = &self.formats.access else {
            return;
        };
        if !self.enabled() {
            return;
        }
        if format.uses(format::uses::LOG_COUNTER) {
            rec.log_counter = self.log_counter.fetch_add(1, Ordering::Relaxed);
        }
        rec.hostname = &self.system_host;
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let (msg, sd) = &mut *s;
            msg.clear();
            sd.clear();
            with_eval(|ev| {
                format.render(rec, src, ev, msg);
                if let Some(f) = &self.formats.sd {
                    f.render(rec, src, ev, sd);
                }
            });
            self.send(outputs, level, msg, Some(sd));
        });
    }

    /// The line HAProxy logs at accept for a frontend that logs without a format (neither
    /// `option httplog`, `option tcplog` nor `log-format`):
    /// `Connect from 127.0.0.1:56940 to 127.0.0.1:80 (fe/HTTP)`.
    pub fn connect_line(
        &self,
        outputs: &Outputs,
        fe: &crate::config::model::Frontend,
        peer: Option<std::net::SocketAddr>,
        local: Option<std::net::SocketAddr>,
        listener_id: u32,
    ) {
        use std::fmt::Write;
        let mode = match fe.mode {
            crate::config::model::Mode::Http => "HTTP",
            crate::config::model::Mode::Tcp => "TCP",
        };
        // Addresses as HAProxy prints them: an IPv6 address has no brackets.
        let mut line = String::with_capacity(96);
        let Some(peer) = peer else {
            // A UNIX socket's client: HAProxy names the listener by its id.
            let _ = write!(line, "Connect to unix:{listener_id} ({}/{mode})", fe.name);
            self.send(outputs, LEVEL_INFO, line.as_bytes(), None);
            return;
        };
        let _ = write!(line, "Connect from {}:{} to ", peer.ip(), peer.port());
        match local {
            Some(l) => {
                let _ = write!(line, "{}:{}", l.ip(), l.port());
            }
            None => line.push('-'),
        }
        let _ = write!(line, " ({}/{mode})", fe.name);
        self.send(outputs, LEVEL_INFO, line.as_bytes(), None);
    }

    /// The line HAProxy logs for a connection that ended before it became a stream (a failed
    /// TLS handshake): `127.0.0.1:40432 [24/Nov/2026:15:06:43.345] fe/1: SSL handshake
    /// failure`, the listener named by its `name` or else its id; at level `err` under
    /// `option log-separate-errors`, else `info`.
    pub fn embryonic_line(
        &self,
        outputs: &Outputs,
        fe: &crate::config::model::Frontend,
        peer: Option<std::net::SocketAddr>,
        listener_id: u32,
        accepted_us: i64,
        words: &str,
    ) {
        use std::io::Write;
        if !self.enabled() {
            return;
        }
        let mut line = Vec::with_capacity(96);
        let _ = match peer {
            Some(p) => write!(line, "{}:{} [", p.ip(), p.port()),
            None => write!(line, "unix:{listener_id} ["),
        };
        format::write_date(&mut line, accepted_us, false, false);
        let bind = usize::try_from(listener_id)
            .ok()
            .and_then(|i| fe.binds.get(i.checked_sub(1)?))
            .and_then(|b| b.name.as_deref());
        let _ = match bind {
            Some(name) => write!(line, "] {}/{name}: {words}", fe.name),
            None => write!(line, "] {}/{listener_id}: {words}", fe.name),
        };
        let level = if self.separate_errors {
            LEVEL_ERR
        } else {
            LEVEL_INFO
        };
        self.send(outputs, level, &line, None);
    }

    /// Sends an event line (health checks, server state) at `level`.
    pub fn event(&self, outputs: &Outputs, level: u8, text: &str) {
        self.send(outputs, level, text.as_bytes(), None);
    }

    fn send(&self, outputs: &Outputs, level: u8, msg: &[u8], sd: Option<&[u8]>) {
        let now_us = now_us();
        let hdr = Header {
            tag: &self.tag,
            hostname: self.hostname.as_deref(),
            pid: pid(),
            sd,
        };
        for t in &self.targets {
            if level > t.max_level {
                continue;
            }
            // Sampling counts the lines this target would take, whichever worker sends them.
            if let Some(s) = &t.sample {
                if !s.0.takes(s.1.fetch_add(1, Ordering::Relaxed)) {
                    continue;
                }
            }
            // `minlevel` caps severity: a more severe line goes out at that level.
            let level = level.max(t.min_level);
            sender::queue(outputs, t.output, |out| {
                syslog::frame(out, t.framing, t.facility, level, now_us, &hdr, msg, t.len)
            });
        }
    }
}

thread_local! {
    /// The message and structured data being rendered, reused line after line.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = RefCell::new((Vec::with_capacity(512), Vec::new()));
}

thread_local! {
    /// The scratch space of the `%[...]` evaluations of log formats.
    static EVAL: RefCell<Eval> = RefCell::new(Eval::new());
}

/// Runs `f` with this thread's evaluation scratch space (a fresh one if it is in use: a
/// unique id computed while a log line is rendered).
pub fn with_eval<R>(f: impl FnOnce(&mut Eval) -> R) -> R {
    EVAL.with(|e| match e.try_borrow_mut() {
        Ok(mut ev) => f(&mut ev),
        Err(_) => f(&mut Eval::new()),
    })
}

/// This process's id, read once (`getpid` is a system call each time).
fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Wall-clock microseconds since the Unix epoch.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}
