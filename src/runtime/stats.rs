//! Seeing state: the `stats socket` runtime API, answering `show stat` in HAProxy's CSV layout
//! (the same header and column order, so existing scripts and exporters keep working), plus
//! `show info` and `help`; the ticket keys (`show tls-keys`, `set ssl tls-key`, in
//! `tls::tickets`); the certificate commands (`show/set/commit/abort ssl cert`, in
//! `tls::cli`) take their PEM payload through the CLI's `<<` syntax.
//!
//! The socket runs on the main thread's event loop, away from the workers. A command reads the
//! shared atomics (connection counts, weights, check results); nothing on the data path waits
//! for it. Like HAProxy's non-interactive mode, one connection carries one line of commands
//! separated by `;`, then is closed.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backend::server::{admin, ServerState, CHECK_STATUS_CODE};
use crate::backend::Backend;
use crate::base::clock::uptime_secs;
use crate::config::model::{StatsAddress, StatsSocket};
use crate::state::Shared;
use crate::stats::admin::admin_change;
pub use crate::stats::csv::{server_status, show_stat, COLUMNS};

/// `show servers state` columns, HAProxy's version 1 layout.
pub const SERVERS_STATE_HEADER: &str = "# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port";

/// HAProxy's check state flags (`srv_check_state`).
const CHK_CONFIGURED: u8 = 0x02;
const CHK_ENABLED: u8 = 0x04;
const CHK_PAUSED: u8 = 0x08;

/// One `show servers state` line for server `s` of backend `be`, with HAProxy's numeric
/// encodings (operational state 0 stopped, 1 starting, 2 running, 3 stopping; admin flags;
/// check status, result, health and state flags).
pub fn server_state_line(out: &mut String, be: &Backend, s: &ServerState) {
    let c = &s.config;
    let addr = s.addr.load();
    let op = if !s.up.load(Ordering::Relaxed) {
        0
    } else if s.stopping.load(Ordering::Relaxed) {
        3
    } else if s.ramp_pct.load(Ordering::Relaxed) < 100 {
        1
    } else {
        2
    };
    let admin = s.admin.load(Ordering::Relaxed);
    let ck = &s.check;
    let check_state = if c.check.is_some() {
        let enabled = s.check_enabled.load(Ordering::Relaxed);
        CHK_CONFIGURED
            | if enabled { CHK_ENABLED } else { 0 }
            | if enabled && s.in_maint() {
                CHK_PAUSED
            } else {
                0
            }
    } else if admin & admin::CMAINT != 0 {
        // HAProxy pauses the (absent) checks of a server declared `disabled`, for good.
        CHK_PAUSED
    } else {
        0
    };
    let status = CHECK_STATUS_CODE
        .get(usize::from(ck.status.load(Ordering::Relaxed)))
        .copied()
        .unwrap_or(0);
    // HAProxy prints the check address as the agent's too (`addr` sets both), and the same
    // for the port.
    let check_addr = c.check_addr.map_or("-".to_string(), |a| a.to_string());
    let check_port = c.check_port.unwrap_or(0);
    // A server on a UNIX socket has no IP address and port to show.
    let (ip, port) = match c.unix {
        Some(_) => ("-".to_string(), 0),
        // No address (`init-addr none`).
        None if c.no_addr && addr.ip().is_unspecified() => ("-".to_string(), addr.port()),
        None => (addr.ip().to_string(), addr.port()),
    };
    let _ = writeln!(
        out,
        "{} {} {} {} {} {op} {admin} {} {} {} {status} {} {} {check_state} 0 0 0 - {} - {} {check_port} {check_addr} {check_addr} {check_port}",
        be.config.id,
        be.config.name,
        c.id,
        c.name,
        ip,
        s.weight.load(Ordering::Relaxed),
        c.weight,
        uptime_secs().saturating_sub(ck.last_change_s.load(Ordering::Relaxed)),
        ck.result_code(),
        ck.health.load(Ordering::Relaxed),
        port,
        s.use_ssl.load(Ordering::Relaxed),
    );
}

/// `show servers state [BACKEND]`.
pub fn show_servers_state(shared: &Shared, backend: Option<&str>) -> Result<String, String> {
    let selected: Vec<&Backend> = match backend {
        None => shared.backends.iter().collect(),
        Some(name) => match shared.backends.iter().find(|b| b.config.name == name) {
            Some(b) => vec![b],
            None => return Err("Can't find backend.\n".into()),
        },
    };
    let mut out = format!("1\n{SERVERS_STATE_HEADER}\n");
    for be in selected {
        for (_, s) in be.servers.live() {
            server_state_line(&mut out, be, s);
        }
    }
    Ok(out)
}

/// `show backend`.
pub fn show_backend(shared: &Shared) -> String {
    let mut out = String::from("# name\n");
    for be in &shared.backends {
        out.push_str(&be.config.name);
        out.push('\n');
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
    // The accept rate limits (`maxconnrate`, `maxsessrate`; 0: none) as HAProxy reports them,
    // and the rates, which are counted only when limited.
    let now = crate::base::clock::uptime_ms();
    for (name, r) in [("Conn", &shared.conn_rate), ("Sess", &shared.sess_rate)] {
        if let Some(r) = r {
            let _ = writeln!(out, "{name}Rate: {}", r.current(now));
        }
        let _ = writeln!(
            out,
            "{name}RateLimit: {}",
            r.as_ref().map_or(0, |r| r.limit())
        );
    }
    let _ = writeln!(out, "DroppedLogs: {}", shared.log_outputs.dropped());
    if let Some(node) = &shared.global.node {
        let _ = writeln!(out, "node: {node}");
    }
    out
}

/// The commands Bascule answers, in HAProxy's `help` layout (HAProxy's wording where the
/// command does what HAProxy's does).
const HELP: &[(&str, &str)] = &[
    (
        "abort ssl cert <certfile>",
        "abort a transaction for a certificate file",
    ),
    ("add acl [@<ver>] <acl> <pattern>", "add an acl entry"),
    (
        "add map [@<ver>] <map> <key> <val>",
        "add a map entry (payload supported instead of key/val)",
    ),
    ("add server <bk>/<srv>", "create a new server"),
    (
        "add ssl crt-list <list> <cert> [opts]*",
        "add to crt-list file <list> a line <cert> or a payload",
    ),
    (
        "abort ssl ca-file <cafile>",
        "abort a transaction for a CA file",
    ),
    (
        "abort ssl crl-file <crlfile>",
        "abort a transaction for a CRL file",
    ),
    ("commit ssl ca-file <cafile>", "commit a CA file"),
    ("commit ssl cert <certfile>", "commit a certificate file"),
    ("commit ssl crl-file <crlfile>", "commit a CRL file"),
    (
        "del acl <acl> [<key>|#<ref>]",
        "delete acl entries matching <key>",
    ),
    (
        "del map <map> [<key>|#<ref>]",
        "delete map entries matching <key>",
    ),
    ("del server <bk>/<srv>", "remove a dynamically added server"),
    ("del ssl ca-file <cafile>", "delete an unused CA file"),
    ("del ssl crl-file <crlfile>", "delete an unused CRL file"),
    (
        "del ssl cert <certfile>",
        "delete an unused certificate file",
    ),
    (
        "del ssl crt-list <list> <cert[:line]>",
        "delete a line <cert> from crt-list file <list>",
    ),
    ("disable agent", "disable agent checks"),
    ("disable health", "disable health checks"),
    (
        "disable server (DEPRECATED)",
        "disable a server for maintenance (use 'set server' instead)",
    ),
    ("enable agent", "enable agent checks"),
    ("enable health", "enable health checks"),
    (
        "enable server  (DEPRECATED)",
        "enable a disabled server (use 'set server' instead)",
    ),
    ("clear acl [@<ver>] <acl>", "clear the contents of this acl"),
    ("clear map [@<ver>] <map>", "clear the contents of this map"),
    (
        "clear table <table> [<filter>]*",
        "remove an entry from a table (filter: data/key)",
    ),
    (
        "get acl <acl> <value>",
        "report the patterns matching a sample for an ACL",
    ),
    (
        "get map <acl> <value>",
        "report the keys and values matching a sample for a map",
    ),
    (
        "get var <name>",
        "retrieve contents of a process-wide variable",
    ),
    ("get weight <bk>/<srv>", "report a server's current weight"),
    (
        "new ssl ca-file <cafile>",
        "create a new CA file to be used in a crt-list",
    ),
    (
        "new ssl crl-file <crlfile>",
        "create a new CRL file to be used in a crt-list",
    ),
    (
        "new ssl cert <certfile>",
        "create a new certificate file to be used in a crt-list or a directory",
    ),
    (
        "set server <bk>/<srv> [opts]",
        "change a server's state, weight or address",
    ),
    ("set ssl ca-file <cafile> <payload>", "replace a CA file"),
    ("set ssl crl-file <crlfile> <payload>", "replace a CRL file"),
    (
        "set ssl cert <certfile> <payload>",
        "replace a certificate file",
    ),
    (
        "set ssl tls-key [id|file] <key>",
        "set the next TLS key for the <id> or <file> listener to <key>",
    ),
    (
        "set table <table> key <k> [data.* <v>]*",
        "update or create a table entry's data",
    ),
    ("set map <map> [<key>|#<ref>] <value>", "modify a map entry"),
    (
        "set weight <bk>/<srv>  (DEPRECATED)",
        "change a server's weight (use 'set server' instead)",
    ),
    (
        "show backend",
        "list backends in the current running config",
    ),
    ("show events [<sink>] [-w] [-n]", "show event sink state"),
    ("show info", "report information about the running process"),
    (
        "show acl [@<ver>] <acl>]",
        "report available acls or dump an acl's contents",
    ),
    (
        "show map [@ver] [map]",
        "report available maps or dump a map's contents",
    ),
    (
        "show servers state [<backend>]",
        "dump volatile server information (all or for a single backend)",
    ),
    (
        "show ssl cert [<certfile>]",
        "display the SSL certificates used in memory, or the details of a file",
    ),
    (
        "show ssl ca-file [<cafile>[:<index>]]",
        "display the SSL CA files used in memory, or the details of a <cafile>",
    ),
    (
        "show ssl crl-file [<crlfile>]",
        "display the SSL CRL files used in memory, or the details of a <crlfile>",
    ),
    (
        "show ssl crt-list [-n] [<list>]",
        "show the list of crt-lists or the content of a crt-list file <list>",
    ),
    ("show stat", "report counters for each proxy and server"),
    (
        "show tls-keys [id|*]",
        "show tls keys references or dump tls ticket keys when id specified",
    ),
    (
        "show table [<table> [<filter>]*]",
        "report table usage stats or dump this table's contents (filter: data/key)",
    ),
    ("help", "list all commands"),
    ("prompt", "toggle interactive mode with prompt"),
    ("quit", "disconnect"),
];

fn help_list(first_line: &str) -> String {
    let mut out = String::from(first_line);
    for (cmd, what) in HELP {
        let _ = writeln!(out, "  {cmd:<40}: {what}");
    }
    out
}

/// What one command asks of the connection besides its output.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Output to send (then the empty line that ends every answer).
    Text(String),
    /// `prompt`: toggle interactive mode.
    TogglePrompt,
    /// `experimental-mode on|off`: allow the experimental commands on this connection.
    Experimental(bool),
    /// `quit`: close now.
    Quit,
}

/// Finds `BACKEND/SERVER`, with HAProxy's error replies.
fn lookup<'a>(shared: &'a Shared, arg: Option<&str>) -> Result<(&'a Backend, usize), String> {
    let need = || "Require 'backend/server'.\n".to_string();
    let (be, srv) = arg.and_then(|a| a.split_once('/')).ok_or_else(need)?;
    if srv.is_empty() {
        return Err(need());
    }
    let be = shared
        .backends
        .iter()
        .find(|b| b.config.name == be)
        .ok_or("No such backend.\n")?;
    let i = be.servers.find(srv).ok_or("No such server.\n")?;
    Ok((be, i))
}

/// `add server BACKEND/NAME ADDR[:PORT] [options]`: a new server, in maintenance until
/// `enable server`, its checks (if any) started here, paused until `enable health`. As in
/// HAProxy, the refusals before the server is parsed are single lines; the parser's messages
/// and the success are followed by an empty line.
fn add_server(shared: &Arc<Shared>, words: &[&str]) -> String {
    let Some((be_name, name)) = words
        .get(2)
        .and_then(|a| a.split_once('/'))
        .filter(|(_, s)| !s.is_empty())
    else {
        return "Require 'backend/server'.".into();
    };
    let Some(b) = shared
        .backends
        .iter()
        .position(|x| x.config.name == be_name)
    else {
        return "No such backend.".into();
    };
    let be = &shared.backends[b];
    if !be.supports_dynamic() {
        return "Backend must use a dynamic load balancing to support dynamic servers.".into();
    }
    if words.len() < 4 {
        return "'server' expects <name> and <addr>[:<port>] as arguments.\n".into();
    }
    let args: Vec<&str> = std::iter::once(name)
        .chain(words[3..].iter().copied())
        .collect();
    let mut server = match crate::config::keywords::server::parse_dynamic(&args, &shared.global) {
        Ok(s) => s,
        Err(e) => return format!("{e}\n"),
    };
    // `track [BACKEND/]SERVER`: resolved among the servers there now.
    let tracked = match server.track_name.as_deref() {
        None => None,
        Some(word) => match crate::backend::track::resolve_dynamic(&shared.backends, b, word) {
            Ok(t) => Some(t),
            Err(e) => return format!("{e}\n"),
        },
    };
    server.track = tracked;
    let crt = server.tls.as_ref().and_then(|t| t.crt.clone());
    if let Some(slot) = &crt {
        if let Err(e) = shared.certs.attach_server(slot) {
            return format!("{e}\n");
        }
    }
    match be.add_server(server) {
        Ok(i) => {
            // The tracked server may not be removed any more, as in HAProxy.
            if let Some((tb, ts)) = tracked {
                shared.backends[tb].servers[ts]
                    .pinned
                    .store(true, Ordering::Relaxed);
            }
            crate::backend::check::spawn_server(shared, b, i);
            "New server registered.\n".into()
        }
        Err(e) => {
            if let Some(slot) = &crt {
                shared.certs.detach_server(slot);
            }
            format!("{e}\n")
        }
    }
}

/// Parses a weight as HAProxy's `set weight` does: an absolute 0 to 256, or a percentage of
/// the initial weight (capped at 256). Errors are HAProxy's texts.
pub fn parse_weight(arg: &str, initial: u32) -> Result<u32, &'static str> {
    let t = arg.trim_start();
    let digits_at = usize::from(t.starts_with(['+', '-']));
    let digits = t[digits_at..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    if digits == 0 {
        return Err("Empty weight string empty or preceded by garbage");
    }
    let end = digits_at + digits;
    let value: i64 = t[..end]
        .trim_start_matches('+')
        .parse()
        .unwrap_or(if t.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        });
    let (relative, rest) = match t[end..].strip_prefix('%') {
        Some(rest) => (true, rest),
        None => (false, &t[end..]),
    };
    if !rest.is_empty() {
        return Err("Trailing garbage in weight string");
    }
    if relative {
        if value < 0 {
            return Err("Relative weight must be positive.\n");
        }
        let w = i128::from(initial) * i128::from(value) / 100;
        Ok(w.min(256) as u32)
    } else if !(0..=256).contains(&value) {
        Err("Absolute weight can only be between 0 and 256 inclusive.\n")
    } else {
        Ok(value as u32)
    }
}

fn set_weight(be: &Backend, i: usize, arg: Option<&str>) -> String {
    let Some(arg) = arg else {
        return "Require <weight> or <weight%>.\n".into();
    };
    let initial = be.servers[i].config.weight;
    match parse_weight(arg, initial) {
        Err(e) => e.into(),
        Ok(w) if w != 0 && w != initial && be.static_weights() => {
            "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'.\n"
                .into()
        }
        Ok(w) => {
            be.set_weight(i, w);
            String::new()
        }
    }
}

/// `set server BE/SRV addr A [port P]`, replying as HAProxy does.
fn set_addr(shared: &Arc<Shared>, be: &Backend, i: usize, words: &[&str]) -> String {
    const BY: &str = " by 'stats socket command'\n";
    let Some(ip_word) = words.first() else {
        return "set server <b>/<s> addr requires an address and optionally a port.\n".into();
    };
    let Ok(ip) = ip_word.parse::<std::net::IpAddr>() else {
        return format!("Invalid addr '{ip_word}'{BY}");
    };
    let s = &be.servers[i];
    if s.config.no_addr && s.addr.load().ip().is_unspecified() {
        // haproxy 2.6 cannot give an address to a server that never had one (its family is
        // unknown), but takes it out of maintenance all the same.
        if let Some(b) = shared.backends.iter().position(|x| std::ptr::eq(x, be)) {
            crate::backend::check::change_admin(shared, b, i, 0, admin::RMAINT);
        }
        return format!(
            "Update for the current server address family is only supported through configuration file{BY}"
        );
    }
    if s.config.unix.is_some() {
        return format!(
            "Update for the current server address family is only supported through configuration file{BY}"
        );
    }
    let old = s.addr.load();
    let mut msg = if old.ip() == ip {
        "no need to change the addr".to_string()
    } else {
        format!("IP changed from '{}' to '{ip}'", old.ip())
    };
    let mut port = old.port();
    if words.get(1) == Some(&"port") {
        let p = words.get(2).copied().unwrap_or("");
        msg.push_str(", ");
        if p.starts_with(['+', '-']) {
            msg.push_str("can't change <port> to port map: port offsets are not supported");
        } else if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            let _ = write!(msg, "problem converting port '{p}' to an int");
        } else {
            match p.parse::<u16>() {
                Ok(n) if n > 0 => {
                    if n == port {
                        msg.push_str("no need to change the port");
                    } else {
                        let _ = write!(msg, "port changed from '{port}' to '{n}'");
                        port = n;
                    }
                }
                _ => {
                    let _ = write!(msg, "port '{p}' is out of range (1 to 65535)");
                }
            }
        }
    }
    let new = std::net::SocketAddr::new(ip, port);
    if new != old {
        s.addr.store(new);
        eprintln!(
            "[WARNING] {}/{} changed its IP from {} to {} by stats socket command.",
            be.config.name, s.config.name, old, new
        );
    }
    msg.push_str(BY);
    msg
}

/// `set server BE/SRV ...`.
fn set_server(shared: &Arc<Shared>, words: &[&str]) -> String {
    let (be, i) = match lookup(shared, words.get(2).copied()) {
        Ok(found) => found,
        Err(e) => return e,
    };
    let s = &be.servers[i];
    let arg = words.get(4).copied();
    match words.get(3).copied() {
        Some("state") => {
            use crate::backend::server::admin::{FDRAIN, FMAINT};
            match arg {
                Some("ready") => admin_change(shared, be, i, 0, FMAINT | FDRAIN),
                Some("drain") => admin_change(shared, be, i, FDRAIN, FMAINT),
                Some("maint") => admin_change(shared, be, i, FMAINT, FDRAIN),
                _ => return "'set server <srv> state' expects 'ready', 'drain' and 'maint'.\n".into(),
            }
            String::new()
        }
        Some("weight") => set_weight(be, i, arg),
        Some("health") => {
            let (up, stopping) = match arg {
                Some("up") => (true, false),
                Some("stopping") => (true, true),
                Some("down") => (false, false),
                _ => {
                    return "'set server <srv> health' expects 'up', 'stopping', or 'down'.\n"
                        .into()
                }
            };
            if s.config.track.is_some() {
                return "cannot change health on a tracking server.\n".into();
            }
            crate::stats::admin::force_health(shared, be, i, up, stopping, "CLI");
            String::new()
        }
        Some("addr") => set_addr(shared, be, i, &words[4..]),
        Some("agent") => {
            if !s.agent_enabled.load(Ordering::Relaxed) {
                return "agent checks are not enabled on this server.\n".into();
            }
            let up = match arg {
                Some("up") => true,
                Some("down") => false,
                _ => return "'set server <srv> agent' expects 'up' or 'down'.\n".into(),
            };
            let Some(b) = shared.backends.iter().position(|x| std::ptr::eq(x, be)) else {
                return String::new();
            };
            let v = crate::backend::health::Verdict {
                ok: up,
                reason: "changed from CLI",
                code: None,
                info: None,
            };
            crate::backend::check::agent::set_health(shared, b, i, up, &v, Default::default());
            String::new()
        }
        Some(what @ ("agent-addr" | "agent-port" | "agent-send")) => {
            if s.config.agent.is_none() {
                "agent checks are not enabled on this server".into()
            } else {
                format!("'set server <srv> {what}' is not supported by Bascule yet.\n")
            }
        }
        Some(what @ ("check-addr" | "check-port")) => {
            if s.config.check.is_none() {
                "health checks are not enabled on this server".into()
            } else {
                format!("'set server <srv> {what}' is not supported by Bascule yet.\n")
            }
        }
        Some("fqdn") => {
            "set server <b>/<s> fqdn failed because no resolution is configured.\n".into()
        }
        Some("ssl") => set_ssl(s, arg),
        _ => "usage: set server <backend>/<server> addr | agent | agent-addr | agent-port | agent-send | check-addr | check-port | fqdn | health | ssl | state | weight\n".into(),
    }
}

/// `set server B/S ssl on|off`: turns TLS on or off for the server's new connections, as
/// HAProxy's `srv_set_ssl`; only for a server whose TLS settings were built (its line or its
/// `default-server` said `ssl`). Connections already open, held by sessions or idle in the
/// workers' pools (at most `POOL_IDLE`), keep serving until they close: each is valid for the
/// server as it was made.
fn set_ssl(s: &ServerState, arg: Option<&str>) -> String {
    if s.dynamic {
        return "'set server <srv> ssl' not supported on dynamic servers\n".into();
    }
    if s.config
        .tls
        .as_ref()
        .and_then(|t| t.config.as_ref())
        .is_none()
    {
        return "'set server <srv> ssl' cannot be set.  default-server should define ssl settings\n"
            .into();
    }
    let v = match arg {
        Some("on") => 1,
        Some("off") => 0,
        _ => return "'set server <srv> ssl' expects 'on' or 'off'.\n".into(),
    };
    s.use_ssl.store(v, Ordering::Relaxed);
    "server ssl setting updated.\n".into()
}

/// The modes of one CLI connection.
#[derive(Debug, Default, Clone, Copy)]
struct CliMode {
    /// `prompt`: interactive.
    prompt: bool,
    /// `experimental-mode on`.
    experimental: bool,
}

/// Runs one command (one of the `;`-separated parts of a line), outside experimental mode.
pub fn execute(shared: &Arc<Shared>, cmd: &str) -> Reply {
    execute_in(shared, cmd, false, None)
}

/// `set var NAME [expr|fmt] VALUE` (experimental in HAProxy): sets a `proc` variable from a
/// stream-free expression or format, evaluated now. Nothing is answered on success.
fn set_var(shared: &Shared, words: &[&str]) -> String {
    let Some(name) = words.get(2) else {
        return "Missing process-wide variable identifier.\n".into();
    };
    let (kind, value) = match (words.get(3), words.get(4)) {
        (None, _) => return "Missing either 'expr', 'fmt' or expression.\n".into(),
        (Some(v), None) => ("set-var", *v),
        (Some(&"fmt"), Some(v)) => ("set-var-fmt", *v),
        (Some(&"expr"), Some(v)) => ("set-var", *v),
        (Some(other), Some(_)) => {
            // (HAProxy's formatted errors carry no newline of their own: the answer's ends it.)
            return format!(
                "'set var': arg type must be either 'expr' or 'fmt' but got '{other}'."
            );
        }
    };
    if !name.starts_with("proc.") {
        return format!(
            "'set var': cannot set variable '{name}', only scope 'proc' is permitted here."
        );
    }
    let names = crate::rules::NameTable {
        vars: std::cell::RefCell::new(shared.var_names.clone()),
        ..Default::default()
    };
    let words = [kind.to_string(), name.to_string(), value.to_string()];
    let line = match crate::rules::proc_vars::compile(&words, &names) {
        Ok(l) => l,
        Err(e) => return e.message,
    };
    shared
        .proc_vars
        .rcu(|cur| crate::rules::proc_vars::apply(&line, cur, &shared.global.env));
    String::new()
}

/// Runs one command; `experimental`: `experimental-mode on` was given on this connection;
/// `payload`: the lines that followed a command ending with a `<<` word (the word is dropped).
fn execute_in(shared: &Arc<Shared>, cmd: &str, experimental: bool, payload: Option<&str>) -> Reply {
    use crate::backend::server::admin::{FDRAIN, FMAINT};
    let owned = cli_words(cmd);
    let mut words: Vec<&str> = owned.iter().map(String::as_str).collect();
    if payload.is_some() {
        words.pop();
    }
    let server = |f: &dyn Fn(&Backend, usize) -> String| match lookup(shared, words.get(2).copied())
    {
        Ok((be, i)) => f(be, i),
        Err(e) => e,
    };
    let text = match words.as_slice() {
        ["prompt", ..] => return Reply::TogglePrompt,
        ["experimental-mode", "on"] => return Reply::Experimental(true),
        ["experimental-mode", "off"] => return Reply::Experimental(false),
        ["experimental-mode", ..] => format!(
            "experimental-mode is {}\n",
            if experimental { "ON" } else { "OFF" }
        ),
        ["set", "var", ..] if !experimental => {
            "This command is restricted to experimental mode only.\n".to_string()
        }
        ["set", "var", ..] => set_var(shared, &words),
        ["quit", ..] => return Reply::Quit,
        ["help", ..] => help_list("The following commands are valid at this level:\n"),
        ["show", "stat", args @ ..] => crate::stats::csv::show_stat_args(shared, args),
        ["show", "events"] => {
            let mut out = String::from(
                "Supported events sinks are listed below. Add -w(wait), -n(new). Any key to stop\n",
            );
            for r in shared.log_outputs.rings() {
                let _ = writeln!(
                    out,
                    "    {:<10} : type=buffer, {} dropped, {}",
                    r.config.name,
                    r.dropped(),
                    r.config.description.as_deref().unwrap_or("")
                );
            }
            out
        }
        ["show", "events", name, opts @ ..] => {
            match shared
                .log_outputs
                .rings()
                .iter()
                .find(|r| r.config.name == *name)
            {
                None => "No such event sink\n".into(),
                Some(_) if !opts.is_empty() => {
                    "'show events' options (-w, -n) are not supported by Bascule yet.\n".into()
                }
                Some(r) => r.show().unwrap_or_default(),
            }
        }
        ["show", "info", ..] => show_info(shared),
        ["show", "backend", ..] => show_backend(shared),
        ["show" | "get" | "add" | "set" | "del" | "clear" | "prepare" | "commit", "map" | "acl", ..] => {
            shared.pat_files.command(&words, payload)
        }
        ["show", "table", rest @ ..] => {
            crate::stick::show::show_table(&shared.tables, rest, crate::base::clock::uptime_ms())
        }
        ["clear", "table", rest @ ..] => {
            crate::stick::show::clear_table(&shared.tables, rest, crate::base::clock::uptime_ms())
        }
        ["set", "table", rest @ ..] => {
            crate::stick::show::set_table(&shared.tables, rest, crate::base::clock::uptime_ms())
        }
        ["show", "ssl", "cert", rest @ ..] => shared.certs.show(rest.first().copied()),
        ["set", "ssl", "cert", ..] => shared.certs.set(words.get(3).copied(), payload),
        ["commit", "ssl", "cert", ..] => shared.certs.commit(words.get(3).copied()),
        ["abort", "ssl", "cert", ..] => shared.certs.abort(words.get(3).copied()),
        ["new", "ssl", "cert", ..] => shared.certs.new_cert(words.get(3).copied()),
        [verb @ ("new" | "set" | "commit" | "abort" | "del" | "show"), "ssl", file @ ("ca-file" | "crl-file"), ..] =>
        {
            use crate::tls::cafiles::Kind;
            let kind = if *file == "ca-file" {
                Kind::Ca
            } else {
                Kind::Crl
            };
            let arg = words.get(3).copied();
            let f = &shared.ca_files;
            match *verb {
                "new" => f.new_file(kind, arg),
                "set" => f.set(kind, arg, payload),
                "commit" => f.commit(kind, arg),
                "abort" => f.abort(kind, arg),
                "del" => f.del(kind, arg),
                _ => f.show(kind, arg),
            }
        }
        ["del", "ssl", "cert", ..] => shared.certs.del_cert(words.get(3).copied()),
        ["show", "ssl", "crt-list", rest @ ..] => shared.crt_lists.show(rest),
        ["add", "ssl", "crt-list", ..] => shared.crt_lists.add(
            &shared.certs,
            &shared.ca_files,
            words.get(3).copied(),
            words.get(4).copied(),
            payload,
        ),
        ["del", "ssl", "crt-list", ..] => shared.crt_lists.del(
            &shared.certs,
            &shared.ca_files,
            words.get(3).copied(),
            words.get(4).copied(),
        ),
        ["show", "tls-keys", rest @ ..] => shared.ticket_keys.show(rest.first().copied()),
        ["set", "ssl", "tls-key", ..] => shared
            .ticket_keys
            .set(words.get(3).copied(), words.get(4).copied()),
        ["show", "servers", "state", rest @ ..] => {
            show_servers_state(shared, rest.first().copied()).unwrap_or_else(|e| e)
        }
        ["get", "var"] => "Missing process-wide variable identifier.\n".to_string(),
        ["get", "var", name, ..] => {
            let id = name.strip_prefix("proc.").and_then(|n| {
                shared
                    .var_names
                    .iter()
                    .position(|(s, v)| *s == crate::rules::Scope::Proc && v == n)
            });
            crate::rules::proc_vars::show(name, id, &shared.proc_vars.load())
        }
        ["get", "weight", ..] => server(&|be, i| {
            let s = &be.servers[i];
            format!(
                "{} (initial {})\n",
                s.weight.load(Ordering::Relaxed),
                s.config.weight
            )
        }),
        ["set", "weight", ..] => server(&|be, i| set_weight(be, i, words.get(3).copied())),
        ["set", "server", ..] => set_server(shared, &words),
        ["add", "server", ..] => add_server(shared, &words),
        // HAProxy answers `del server` with single-line messages (no empty line after).
        ["del", "server", ..] => match lookup(shared, words.get(2).copied()) {
            Ok((be, i)) => match be.del_server(i) {
                Ok(()) => {
                    if let Some(slot) = be.servers[i]
                        .config
                        .tls
                        .as_ref()
                        .and_then(|t| t.crt.as_ref())
                    {
                        shared.certs.detach_server(slot);
                    }
                    "Server deleted.".into()
                }
                Err(e) => e.into(),
            },
            Err(e) => e.trim_end().to_string(),
        },
        ["disable", "server", ..] => server(&|be, i| {
            admin_change(shared, be, i, FMAINT, FDRAIN);
            String::new()
        }),
        ["enable", "server", ..] => server(&|be, i| {
            admin_change(shared, be, i, 0, FMAINT);
            String::new()
        }),
        ["disable", "health", ..] => server(&|be, i| {
            be.set_checks(i, false);
            String::new()
        }),
        ["enable", "health", ..] => server(&|be, i| {
            if be.set_checks(i, true) {
                String::new()
            } else {
                "Health check was not configured on this server, cannot enable.\n".into()
            }
        }),
        ["disable", "agent", ..] => server(&|be, i| {
            be.servers[i].agent_enabled.store(false, Ordering::Relaxed);
            String::new()
        }),
        ["enable", "agent", ..] => server(&|be, i| {
            let s = &be.servers[i];
            if s.config.agent.is_none() {
                return "Agent was not configured on this server, cannot enable.\n".into();
            }
            s.agent_enabled.store(true, Ordering::Relaxed);
            String::new()
        }),
        _ => help_list("Unknown command. Please enter one of the following commands only:\n"),
    };
    Reply::Text(text)
}

/// Answers one line of `;`-separated commands in non-interactive mode (what one connection
/// without `prompt` gets): each answer followed by an empty line.
pub fn answer(shared: &Arc<Shared>, line: &str) -> String {
    let mut out = String::new();
    let mut prompt = CliMode::default();
    run_line(shared, line, None, &mut prompt, &mut out);
    out
}

/// Runs the `;`-separated commands of a line, the last one with the line's `payload` if its
/// last word is `<<`. `false` when the connection must close (`quit`).
fn run_line(
    shared: &Arc<Shared>,
    line: &str,
    payload: Option<&str>,
    mode: &mut CliMode,
    out: &mut String,
) -> bool {
    let cmds = split_commands(line);
    for (i, cmd) in cmds.iter().enumerate() {
        let marked =
            i + 1 == cmds.len() && cli_words(cmd).last().map(String::as_str) == Some(PAYLOAD);
        if !run_one(shared, cmd, payload.filter(|_| marked), mode, out) {
            return false;
        }
    }
    true
}

/// The commands of a line: separated by `;`, except an escaped `\;` (the escape is kept for
/// [`cli_words`]).
fn split_commands(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b';' => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&line[start.min(line.len())..]);
    out
}

/// The words of a command, as HAProxy's CLI reads them: separated by spaces or tabs, a
/// backslash making the next character part of the word (`Mon\ User\ Agent\;` is one word,
/// `Mon User Agent;`).
fn cli_words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut started = false;
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                started = true;
            }
            ' ' | '\t' | '\r' | '\n' => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            c => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(cur);
    }
    out
}

/// The word that ends a command whose payload follows, up to an empty line.
const PAYLOAD: &str = "<<";

/// Runs one command and appends its framed answer to `out`: the text, a newline, and the
/// prompt in interactive mode. `false` when the connection must close (`quit`).
fn run_one(
    shared: &Arc<Shared>,
    cmd: &str,
    payload: Option<&str>,
    mode: &mut CliMode,
    out: &mut String,
) -> bool {
    match execute_in(shared, cmd, mode.experimental, payload) {
        Reply::Quit => return false,
        Reply::TogglePrompt => mode.prompt = !mode.prompt,
        Reply::Experimental(on) => mode.experimental = on,
        Reply::Text(t) => out.push_str(&t),
    }
    out.push('\n');
    if mode.prompt {
        out.push_str("> ");
    }
    true
}

/// The listen backlog of a UNIX stats socket (the one std's `UnixListener::bind` gives).
const STATS_BACKLOG: i32 = 128;

/// Binds every `stats socket` and serves it on the current runtime.
pub fn spawn_sockets(shared: &Arc<Shared>, sockets: &[StatsSocket]) -> std::io::Result<()> {
    for s in sockets {
        match &s.address {
            StatsAddress::Unix(path) => {
                // Bound as a UNIX bind is (a temporary name renamed into place, which
                // replaces a stale file), with the socket's `mode`, `user` and `group`.
                let addr = crate::config::model::UnixAddr::Path(path.clone());
                let l = crate::net::listener::bind_unix(&addr, s.unix_perms, STATS_BACKLOG)
                    .map_err(|e| {
                        std::io::Error::new(
                            e.kind(),
                            format!("cannot bind stats socket '{}': {e}", path.display()),
                        )
                    })?;
                serve_unix(shared, l)?;
            }
            StatsAddress::Tcp(addr) => {
                let l = std::net::TcpListener::bind(addr).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot bind stats socket {addr}: {e}"))
                })?;
                serve_tcp(shared, l)?;
            }
            StatsAddress::Abns(name) => {
                // Padded as HAProxy pads abstract names, so the same clients reach it.
                let addr = crate::config::model::UnixAddr::Abstract(name.clone());
                let l = crate::net::listener::bind_unix(&addr, s.unix_perms, STATS_BACKLOG)
                    .map_err(|e| {
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

/// Serves one connection, as HAProxy's CLI does: commands come one line at a time, `;`
/// separating several on a line, each answer followed by an empty line. Without `prompt` the
/// connection closes once every line received so far is answered; after `prompt` it stays
/// open, each answer ending with a `> ` prompt, until `quit`, `prompt` again with nothing
/// left to read, the peer closing, or `stats timeout` of silence.
///
/// A line ending with `<<` announces a payload (`set ssl cert FILE <<`): the lines after it,
/// up to an empty one, go to its last command; in interactive mode each line of it is
/// answered with a `+ ` prompt. A payload cut by the peer's close is dropped unanswered.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut conn: S,
) {
    const MAX_LINE: usize = 64 * 1024;
    let timeout = shared
        .global
        .stats_timeout
        .unwrap_or(std::time::Duration::from_secs(10));
    let mut buf: Vec<u8> = Vec::with_capacity(256);
    let mut chunk = [0u8; 4096];
    let mut prompt = CliMode::default();
    let mut eof = false;
    // The command line and the payload lines read so far, while a payload comes.
    let mut collecting: Option<(String, String)> = None;
    loop {
        // Answer every complete line already received.
        let mut out = String::new();
        let mut quit = false;
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line[..nl]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if let Some((_, body)) = collecting.as_mut() {
                if !line.is_empty() {
                    body.push_str(line);
                    body.push('\n');
                    if prompt.prompt {
                        out.push_str("+ ");
                    }
                    if body.len() > MAX_LINE {
                        quit = true;
                        break;
                    }
                    continue;
                }
                let (cmd, body) = collecting.take().unwrap_or_default();
                if !run_line(&shared, &cmd, Some(&body), &mut prompt, &mut out) {
                    quit = true;
                    break;
                }
                continue;
            }
            if line.ends_with(PAYLOAD) {
                collecting = Some((line.to_string(), String::new()));
                if prompt.prompt {
                    out.push_str("+ ");
                }
                continue;
            }
            if !run_line(&shared, line, None, &mut prompt, &mut out) {
                quit = true;
                break;
            }
        }
        if !out.is_empty() && conn.write_all(out.as_bytes()).await.is_err() {
            return;
        }
        // Non-interactive: done once what was sent is answered (a line cut by the peer's
        // close is answered too, a payload cut by it is not).
        let answered = !prompt.prompt && !out.is_empty() && collecting.is_none();
        if quit || answered || eof || buf.len() > MAX_LINE {
            if eof && !quit && !buf.is_empty() && collecting.is_none() {
                let line = String::from_utf8_lossy(&buf).into_owned();
                let mut last = String::new();
                if !line.ends_with(PAYLOAD) {
                    run_line(&shared, &line, None, &mut prompt, &mut last);
                }
                let _ = conn.write_all(last.as_bytes()).await;
            }
            break;
        }
        match tokio::time::timeout(timeout, conn.read(&mut chunk)).await {
            Err(_) | Ok(Err(_)) => break,
            Ok(Ok(0)) => eof = true,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::server::admin::{CMAINT, FDRAIN, FMAINT};
    use crate::backend::AdminChange;

    /// Escaped spaces and semicolons stay in their word, as in HAProxy's CLI.
    #[test]
    fn escapes_keep_spaces_and_semicolons_in_a_word() {
        assert_eq!(
            split_commands(r"add acl f Mon\ User\ Agent\;;show acl f"),
            [r"add acl f Mon\ User\ Agent\;", "show acl f"]
        );
        assert_eq!(
            cli_words(r"add acl  f Mon\ User\ Agent\; \\x"),
            ["add", "acl", "f", "Mon User Agent;", r"\x"]
        );
        assert_eq!(split_commands("show info"), ["show info"]);
        assert!(cli_words("  ").is_empty());
    }

    fn shared(cfg: &str) -> Arc<Shared> {
        let text = format!(
            "defaults\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n{cfg}"
        );
        let config = crate::config::load_str("t.cfg", &text).unwrap().config;
        Arc::new(Shared::new(config, 100, false, 1))
    }

    fn text(r: Reply) -> String {
        match r {
            Reply::Text(t) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn show_events_lists_rings_and_names_unknown_ones() {
        let sh = shared("ring r1\n  description \"My ring\"\n  size 1024\n");
        assert_eq!(
            text(execute(&sh, "show events")),
            "Supported events sinks are listed below. Add -w(wait), -n(new). Any key to stop\n    r1         : type=buffer, 0 dropped, My ring\n"
        );
        assert_eq!(
            text(execute(&sh, "show events nosuch")),
            "No such event sink\n"
        );
        // Nothing stored yet (the ring's task is not running in this test).
        assert_eq!(text(execute(&sh, "show events r1")), "");
    }

    #[test]
    fn weights_parse_like_haproxy() {
        let cases: &[(&str, u32, Result<u32, &str>)] = &[
            ("5", 3, Ok(5)),
            ("+5", 3, Ok(5)),
            ("05", 3, Ok(5)),
            ("0", 3, Ok(0)),
            ("256", 3, Ok(256)),
            ("50%", 3, Ok(1)),
            ("1000%", 3, Ok(30)),
            ("100000%", 3, Ok(256)),
            ("0%", 3, Ok(0)),
            (
                "257",
                3,
                Err("Absolute weight can only be between 0 and 256 inclusive.\n"),
            ),
            (
                "-1",
                3,
                Err("Absolute weight can only be between 0 and 256 inclusive.\n"),
            ),
            ("-5%", 3, Err("Relative weight must be positive.\n")),
            (
                "abc",
                3,
                Err("Empty weight string empty or preceded by garbage"),
            ),
            (
                "",
                3,
                Err("Empty weight string empty or preceded by garbage"),
            ),
            ("5x", 3, Err("Trailing garbage in weight string")),
            ("50%x", 3, Err("Trailing garbage in weight string")),
            ("0x10", 3, Err("Trailing garbage in weight string")),
            (
                "99999999999999999999999",
                3,
                Err("Absolute weight can only be between 0 and 256 inclusive.\n"),
            ),
        ];
        for &(arg, initial, want) in cases {
            assert_eq!(parse_weight(arg, initial), want, "{arg}");
        }
    }

    #[test]
    fn admin_states_combine_with_health_as_haproxy_does() {
        let sh = shared(
            "backend be\n  server a 127.0.0.1:1 check rise 2 fall 3\n  server b 127.0.0.1:2\n  server c 127.0.0.1:3 disabled\n",
        );
        let be = &sh.backends[0];
        let (a, c) = (&be.servers[0], &be.servers[2]);
        assert_eq!(c.admin.load(Ordering::Relaxed), CMAINT | FMAINT);
        assert!(!c.usable());
        assert_eq!(server_status(c), "MAINT");
        // Before its first check a server is UP with a health of `rise`: one failure away.
        assert_eq!(server_status(a), "UP 1/3");
        assert_eq!(server_status(&be.servers[1]), "no check");

        assert_eq!(
            be.change_admin(0, FMAINT, FDRAIN),
            AdminChange::EnteredMaint
        );
        assert!(!a.usable() && !a.checking());
        assert_eq!(a.check.health.load(Ordering::Relaxed), 0);
        assert_eq!(be.change_admin(0, FMAINT, FDRAIN), AdminChange::None);
        // `drain` from maintenance leaves it: UP, health `rise`, no weight for balancing.
        assert_eq!(be.change_admin(0, FDRAIN, FMAINT), AdminChange::LeftMaint);
        assert!(a.usable() && a.draining());
        assert_eq!((a.lb_weight(), a.effective_weight()), (0, 1));
        assert_eq!(server_status(a), "DRAIN 1/3");
        assert_eq!(be.change_admin(0, 0, FMAINT | FDRAIN), AdminChange::Drain);
        assert_eq!(a.lb_weight(), 1);

        // `enable server` on a server declared disabled keeps the memory of it.
        assert_eq!(be.change_admin(2, 0, FMAINT), AdminChange::LeftMaint);
        assert_eq!(c.admin.load(Ordering::Relaxed), CMAINT);
        assert!(c.usable());

        be.force_health(1, true, true);
        assert_eq!(server_status(&be.servers[1]), "NOLB");
        assert_eq!(be.servers[1].lb_weight(), 0);
        be.force_health(1, false, false);
        assert_eq!(server_status(&be.servers[1]), "DOWN");
        assert!(!be.set_checks(1, true), "no check configured");
        assert!(be.set_checks(0, false));
        be.force_health(0, true, false);
        assert_eq!(server_status(a), "no check");
    }

    #[test]
    fn servers_state_rows_use_haproxy_encodings() {
        let sh = shared(
            "backend be\n  balance static-rr\n  server a 127.0.0.1:80 weight 3 check port 81 addr 127.0.0.2\n  server b [::1]:82 disabled\n",
        );
        let out = show_servers_state(&sh, Some("be")).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "1");
        assert_eq!(lines[1], SERVERS_STATE_HEADER);
        let cols = |l: &str| -> Vec<String> { l.split(' ').map(str::to_string).collect() };
        let a = cols(lines[2]);
        let b = cols(lines[3]);
        assert_eq!(a.len(), 25);
        // be_id is 1: no stats socket in this configuration.
        assert_eq!(
            &a[..9],
            ["1", "be", "1", "a", "127.0.0.1", "2", "0", "3", "3"]
        );
        assert_eq!(
            &a[10..],
            [
                "1",
                "0",
                "2",
                "6",
                "0",
                "0",
                "0",
                "-",
                "80",
                "-",
                "0",
                "81",
                "127.0.0.2",
                "127.0.0.2",
                "81"
            ]
        );
        assert_eq!(&b[3..9], ["b", "::1", "0", "5", "1", "1"]);
        assert_eq!(&b[12..14], ["0", "8"]);
        assert_eq!(
            show_servers_state(&sh, Some("nope")),
            Err("Can't find backend.\n".into())
        );
        assert!(sh.backends[0].static_weights());
    }

    #[test]
    fn commands_reply_and_act() {
        let sh =
            shared("backend be\n  server a 127.0.0.1:80\nbackend two\n  server x 127.0.0.1:81\n");
        let s = &sh.backends[0].servers[0];
        assert_eq!(text(execute(&sh, "show backend")), "# name\nbe\ntwo\n");
        assert_eq!(text(execute(&sh, "set weight be/a 7")), "");
        assert_eq!(s.weight.load(Ordering::Relaxed), 7);
        assert_eq!(text(execute(&sh, "get weight be/a")), "7 (initial 1)\n");
        assert_eq!(text(execute(&sh, "get weight be/zz")), "No such server.\n");
        assert_eq!(
            text(execute(&sh, "disable server nope/a")),
            "No such backend.\n"
        );
        assert_eq!(
            text(execute(&sh, "enable server be")),
            "Require 'backend/server'.\n"
        );
        assert_eq!(text(execute(&sh, "disable server be/a")), "");
        assert!(s.in_maint());
        assert_eq!(text(execute(&sh, "set server be/a state ready")), "");
        assert!(s.usable());
        assert_eq!(
            text(execute(&sh, "set server be/a addr 10.0.0.1 port 99")),
            "IP changed from '127.0.0.1' to '10.0.0.1', port changed from '80' to '99' by 'stats socket command'\n"
        );
        assert_eq!(s.addr.load(), "10.0.0.1:99".parse().unwrap());
        assert_eq!(
            text(execute(&sh, "set server be/a addr 10.0.0.1 port +1")),
            "no need to change the addr, can't change <port> to port map: port offsets are not supported by 'stats socket command'\n"
        );
        assert_eq!(s.addr.load(), "10.0.0.1:99".parse().unwrap());
        assert_eq!(execute(&sh, "prompt"), Reply::TogglePrompt);
        assert_eq!(execute(&sh, "quit"), Reply::Quit);
        assert!(text(execute(&sh, "")).starts_with("Unknown command. Please enter one"));
        assert!(text(execute(&sh, "help")).contains(
            "\n  get weight <bk>/<srv>                   : report a server's current weight\n"
        ));
        // Non-interactive framing: an empty line after each answer; `quit` ends the line.
        assert_eq!(
            answer(
                &sh,
                "get weight be/a; get weight two/x;quit;get weight be/a"
            ),
            "7 (initial 1)\n\n1 (initial 1)\n\n"
        );
        assert_eq!(
            answer(&sh, "prompt;show backend"),
            "\n> # name\nbe\ntwo\n\n> "
        );
    }
}
