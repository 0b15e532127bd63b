//! Access logs and event logs, as HAProxy writes them.
//!
//! - [`format`] compiles `log-format` strings once at load and renders a [`record::Record`];
//! - [`record`] holds the facts of one session or transaction (timers, bytes, termination
//!   state, counters, captures);
//! - [`syslog`] frames a message for each target (`format rfc3164|rfc5424|...`, `len`);
//! - [`sender`] gets lines out without blocking a worker.
//!
//! [`ProxyLog`] is a proxy's logging, built from the model at start: its targets (facility,
//! level filter), its formats, its tag and what it captures.

pub mod format;
pub mod record;
pub mod sender;
pub mod syslog;

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::keywords::log::{FACILITIES, LEVELS};
use crate::config::model::{Global, LogTarget, ProxyOptions};
use format::{Context, Format};
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
}

/// A proxy's logging.
#[derive(Debug)]
pub struct ProxyLog {
    targets: Vec<Target>,
    /// The access-log format; `None`: HAProxy's legacy "Connect from" line at accept.
    pub format: Option<Format>,
    sd: Option<Format>,
    tag: String,
    hostname: Option<String>,
    /// `%H`: the system's host name.
    system_host: String,
    pub dontlognull: bool,
    pub separate_errors: bool,
    /// `capture request header`: lower-case names and lengths.
    pub req_captures: Vec<(String, usize)>,
    pub res_captures: Vec<(String, usize)>,
    pub unique_id: Option<Format>,
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

impl ProxyLog {
    /// Builds a proxy's logging from its `log` lines and options, opening outputs in
    /// `outputs`. Formats were checked at load, so compiling cannot fail here but for a bug.
    pub fn new(
        logs: &[LogTarget],
        opts: &ProxyOptions,
        global: &Global,
        http: bool,
        outputs: &mut Outputs,
    ) -> ProxyLog {
        let mut targets = Vec::new();
        for t in logs {
            match outputs.index(&t.address) {
                Ok(output) => targets.push(Target {
                    output,
                    framing: Framing::parse(&t.format),
                    facility: FACILITIES
                        .iter()
                        .position(|f| *f == t.facility)
                        .unwrap_or(16) as u8,
                    max_level: level_of(&t.level, 7),
                    min_level: level_of(&t.minlevel, 0),
                    len: t.len.unwrap_or(1024),
                }),
                Err(e) => eprintln!("[ALERT] cannot open log target {:?}: {e}", t.address),
            }
        }
        let compile = |s: &Option<String>, ctx| {
            s.as_deref().and_then(|s| match Format::compile(s, ctx) {
                Ok(f) => Some(f),
                Err(e) => {
                    eprintln!("[ALERT] log format '{s}': {e}");
                    None
                }
            })
        };
        // `option httplog` on a TCP proxy falls back to `option tcplog`, as in HAProxy.
        let mut format = opts.log_format.clone();
        if !http && opts.httplog && format.as_deref().is_some_and(|f| f.contains("%TR")) {
            format = Some(crate::config::model::TCPLOG_FORMAT.to_string());
        }
        let caps = |response: bool| {
            opts.captures
                .iter()
                .filter(|c| c.response == response)
                .map(|c| (c.name.to_ascii_lowercase(), c.len))
                .collect()
        };
        ProxyLog {
            targets,
            format: compile(&format, Context::Log),
            sd: compile(&opts.log_format_sd, Context::Log),
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
            unique_id: compile(&opts.unique_id_format, Context::UniqueId),
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
        self.format.as_ref().is_some_and(|f| f.uses(what))
            || self.sd.as_ref().is_some_and(|f| f.uses(what))
    }

    /// Renders and sends the access-log line of `rec` at `level`.
    pub fn access<'a>(&'a self, outputs: &Outputs, level: u8, rec: &mut Record<'a>) {
        let Some(format) = &self.format else { return };
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
            format.render(rec, msg);
            if let Some(f) = &self.sd {
                f.render(rec, sd);
            }
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
