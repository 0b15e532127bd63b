//! `ring NAME` and `log-forward NAME` sections.
//!
//! A ring is an in-memory buffer of log messages (`log ring@NAME` writes to it) that TCP syslog
//! servers (`server`) receive, octet-counted; a log-forward section receives syslog messages
//! on UDP (`dgram-bind`) and TCP (`bind`) sockets and sends them on to its `log` targets.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::log::{parse_target, FORMATS};
use super::ssl::{SslBindDraft, SslServerDraft};
use super::{Ctx, Keyword, Problem, Sections};
use crate::config::diag::Span;
use crate::config::model::{LogBind, LogTarget, Ring, RingServer};
use crate::config::values;
use crate::tls::client::{self, ServerTls, ServerVerify};
use crate::tls::server::BindDefaults;

macro_rules! kw {
    ($name:expr, $sections:expr, $parse:expr, $doc:expr) => {
        Keyword {
            name: $name,
            sections: $sections,
            misplaced_warns: false,
            parse: $parse,
            doc: $doc,
        }
    };
}

/// A `ring` section as its lines leave it.
#[derive(Debug, Clone)]
pub struct RingDraft {
    pub ring: Ring,
    pub span: Span,
    /// The global TLS defaults of `server ... ssl` lines (`ssl-default-server-*`,
    /// `ssl-server-verify`) and the bind defaults that hold `ca-base`/`crt-base`.
    pub ssl_server_defaults: Arc<client::ServerDefaults>,
    pub ssl_defaults: Arc<BindDefaults>,
}

/// A `log-forward` section as its lines leave it.
#[derive(Debug, Clone)]
pub struct LogForwardDraft {
    pub name: String,
    pub span: Span,
    /// `bind ADDR [ssl crt FILE ...]`: TCP listeners.
    pub binds: Vec<LogBind>,
    /// `dgram-bind ADDR`: UDP listeners.
    pub dgram_binds: Vec<SocketAddr>,
    pub logs: Vec<LogTarget>,
    pub maxconn: Option<u32>,
    pub timeout_client: Option<Duration>,
    /// The global TLS defaults of bind lines (`ssl-default-bind-*`, `crt-base`...).
    pub ssl_defaults: Arc<BindDefaults>,
}

pub static RING_KEYWORDS: &[Keyword<RingDraft>] = &[
    kw!(
        "description",
        Sections::RING,
        description,
        "Text shown by 'show events'."
    ),
    kw!(
        "format",
        Sections::RING,
        format,
        "How messages are stored and sent (rfc3164, rfc5424, raw...)."
    ),
    kw!(
        "maxlen",
        Sections::RING,
        maxlen,
        "Longest message kept; longer ones are cut."
    ),
    kw!(
        "size",
        Sections::RING,
        size,
        "The buffer's size in bytes: the oldest messages go first."
    ),
    kw!(
        "timeout",
        Sections::RING,
        timeout,
        "timeout connect|server: to connect to and write to its servers."
    ),
    kw!(
        "server",
        Sections::RING,
        server,
        "A TCP syslog server that receives the ring's messages (log-proto legacy|octet-count; over TLS with ssl, verify, ca-file, crt, sni str(NAME)...)."
    ),
];

pub static FORWARD_KEYWORDS: &[Keyword<LogForwardDraft>] = &[
    kw!(
        "bind",
        Sections::LOG_FORWARD,
        bind,
        "A TCP address to receive syslog messages on (octet-counted or one per line; over TLS with ssl crt FILE and the bind TLS options)."
    ),
    kw!(
        "dgram-bind",
        Sections::LOG_FORWARD,
        dgram_bind,
        "A UDP address to receive syslog messages on."
    ),
    kw!(
        "log",
        Sections::LOG_FORWARD,
        log,
        "Where received messages go (same syntax as a proxy's 'log')."
    ),
    kw!(
        "maxconn",
        Sections::LOG_FORWARD,
        maxconn,
        "Most TCP clients at once."
    ),
    kw!(
        "timeout",
        Sections::LOG_FORWARD,
        forward_timeout,
        "timeout client: how long a TCP client may stay silent."
    ),
];

/// A new ring's defaults, as HAProxy's: `format raw`, `maxlen` 1024... (HAProxy's
/// `BUFSIZE` for `size`). Its TLS defaults are filled in by the parser.
pub fn new_ring(name: &str, span: Span) -> RingDraft {
    RingDraft {
        ring: Ring {
            name: name.to_string(),
            description: None,
            format: "raw".into(),
            maxlen: 1024,
            size: 16384,
            timeout_connect: None,
            timeout_server: None,
            servers: Vec::new(),
        },
        span,
        ssl_server_defaults: Default::default(),
        ssl_defaults: Default::default(),
    }
}

fn description(r: &mut RingDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "a description")?;
    r.ring.description = Some(ctx.args[1..].join(" "));
    Ok(())
}

fn format(r: &mut RingDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let f = ctx.need(1, "a format")?;
    if !FORMATS.contains(&f) {
        return Err(format!(
            "unknown 'format' format '{f}' (expected one of {})",
            FORMATS.join(", ")
        )
        .into());
    }
    r.ring.format = f.to_string();
    ctx.no_more(1)
}

fn maxlen(r: &mut RingDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a length")?;
    let n: usize = values::number(v, "a length").map_err(|e| format!("'maxlen': {e}"))?;
    if n == 0 {
        return Err("'maxlen' must be a strictly positive value".into());
    }
    r.ring.maxlen = n;
    ctx.no_more(1)
}

fn size(r: &mut RingDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a size")?;
    let n = values::size(v).map_err(|e| format!("'size': {e}"))?;
    if n == 0 {
        return Err("'size' must be a strictly positive value".into());
    }
    r.ring.size = n as usize;
    ctx.no_more(1)
}

fn timeout(r: &mut RingDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let which = ctx.need(1, "'connect' or 'server'")?.to_string();
    let v = ctx.need(2, "a time")?;
    let d = values::timer(v).map_err(|e| format!("'timeout {which}': {e}"))?;
    match which.as_str() {
        "connect" => r.ring.timeout_connect = Some(d),
        "server" => r.ring.timeout_server = Some(d),
        other => {
            return Err(format!("'timeout' expects 'connect' or 'server', got '{other}'").into())
        }
    }
    ctx.no_more(2)
}

/// An `IP:PORT` word.
fn socket_addr(ctx: &Ctx<'_>, i: usize) -> Result<SocketAddr, Problem> {
    let w = ctx.need(i, "an address IP:PORT")?;
    let hp = values::split_host_port(w).map_err(|e| format!("'{w}': {e}"))?;
    let port = match hp.port {
        Some(p) if !p.is_empty() => values::port(p).map_err(|e| format!("'{w}': {e}"))?,
        _ => return Err(format!("'{w}': a port is needed").into()),
    };
    let ip = values::resolve_host(hp.host, hp.family).map_err(|e| format!("'{w}': {e}"))?;
    Ok(SocketAddr::new(ip, port))
}

/// The TLS options of a ring's `server` line: those of a proxy's server that make sense for
/// one connection that carries log messages (no checks, no per-request SNI, no reuse).
const RING_SERVER_TLS: &[&str] = &[
    "ssl",
    "no-ssl",
    "verify",
    "verifyhost",
    "no-verifyhost",
    "ca-file",
    "crl-file",
    "crt",
    "sni",
    "alpn",
    "ssl-min-ver",
    "ssl-max-ver",
    "no-sslv3",
    "no-tlsv10",
    "no-tlsv11",
    "no-tlsv12",
    "no-tlsv13",
    "force-sslv3",
    "force-tlsv10",
    "force-tlsv11",
    "force-tlsv12",
    "force-tlsv13",
    "no-tls-tickets",
    "tls-tickets",
    "ciphers",
    "ciphersuites",
    "curves",
];

fn server(r: &mut RingDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a server name")?.to_string();
    let addr = socket_addr(ctx, 2)?;
    let mut octet_count = false;
    let mut ssl = SslServerDraft::default();
    let mut i = 3;
    while let Some(opt) = ctx.arg(i) {
        if opt == "log-proto" {
            octet_count = match ctx.need(i + 1, "'legacy' or 'octet-count'")? {
                "legacy" => false,
                "octet-count" => true,
                other => {
                    return Err(format!(
                    "'server {name}': 'log-proto' expects 'legacy' or 'octet-count', got '{other}'"
                )
                    .into())
                }
            };
            i += 2;
            continue;
        }
        let arity = super::ssl::SERVER_OPTIONS
            .iter()
            .find(|(o, _)| *o == opt && RING_SERVER_TLS.contains(o))
            .map(|(_, n)| *n);
        let Some(arity) = arity else {
            return Err(format!(
                "'server {name}': option '{opt}' is not supported yet in a ring section"
            )
            .into());
        };
        let opt = opt.to_string();
        let value = ctx.arg(i + 1).map(str::to_string);
        super::ssl::server_option(&mut ssl, &opt, value.as_deref())
            .map_err(|e| format!("'server {name}': {e}"))?;
        i += 1 + arity;
    }
    let tls = if ssl.enabled {
        Some(ring_server_tls(r, &ssl, &name, ctx)?)
    } else {
        None
    };
    r.ring.servers.push(RingServer {
        name,
        addr,
        octet_count,
        tls,
    });
    Ok(())
}

/// Builds a ring server's TLS client configuration with the global defaults applied, as a
/// proxy's `server ... ssl` does. `sni` must be a constant (`str(NAME)`): a ring connection
/// has no request to read a name from.
fn ring_server_tls(
    r: &RingDraft,
    d: &SslServerDraft,
    name: &str,
    ctx: &mut Ctx<'_>,
) -> Result<Arc<ServerTls>, Problem> {
    let sni = match &d.sni {
        None => None,
        Some(expr) => match expr
            .strip_prefix("str(")
            .and_then(|v| v.strip_suffix(')'))
        {
            Some(v) if !v.is_empty() => Some(v.to_string()),
            _ => {
                return Err(format!(
                    "'server {name}': 'sni {expr}': only a constant 'str(NAME)' is supported in a ring section (there is no request to read a name from)"
                )
                .into())
            }
        },
    };
    let base = &r.ssl_defaults;
    let mut settings = r.ssl_server_defaults.apply(
        &d.settings,
        base.ca_base.as_deref(),
        base.crt_base.as_deref(),
    );
    settings.sends_sni = sni.is_some();
    let slot = match &settings.crt {
        None => None,
        Some(path) => Some(client::ClientCertSlot::new(
            crate::tls::cert::load_file_with(path, settings.extra)
                .map_err(|e| format!("'server {name}': {e}"))?,
        )),
    };
    let (config, warnings) = client::build_with(&settings, ServerVerify::Required, slot.clone())
        .map_err(|e| format!("'server {name}': {e}"))?;
    for w in warnings {
        ctx.warn(format!("'server {name}': {w}"));
    }
    Ok(Arc::new(ServerTls {
        config: Some(config),
        check: None,
        sni,
        sni_slot: None,
        check_sni: None,
        verifyhost: settings.verifyhost.clone(),
        crt: slot,
    }))
}

fn bind(f: &mut LogForwardDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let addr = socket_addr(ctx, 1)?;
    let mut ssl = SslBindDraft::default();
    let mut i = 2;
    while let Some(opt) = ctx.arg(i) {
        let opt = opt.to_string();
        let value = ctx.arg(i + 1).map(str::to_string);
        match super::ssl::bind_option(&mut ssl, &opt, value.as_deref(), ctx) {
            Some(Ok(n)) => i += n,
            Some(Err(e)) => return Err(e.into()),
            None => {
                return Err(format!(
                    "'bind': option '{opt}' is not supported yet in a log-forward section"
                )
                .into())
            }
        }
    }
    let tls = if ssl.enabled {
        let built = crate::tls::server::build(&f.ssl_defaults.apply(&ssl.settings))
            .map_err(|e| format!("'bind': {e}"))?;
        for w in &built.warnings {
            ctx.warn(format!("'bind': {w}"));
        }
        Some(Arc::new(built))
    } else {
        if ssl.settings != Default::default() {
            ctx.warn(
                "'bind': TLS options without 'ssl': this address receives clear text (as haproxy does); add 'ssl' to terminate TLS",
            );
        }
        None
    };
    f.binds.push(LogBind { addr, tls });
    Ok(())
}

fn dgram_bind(f: &mut LogForwardDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let addr = socket_addr(ctx, 1)?;
    if let Some(opt) = ctx.arg(2) {
        return Err(format!("'dgram-bind': option '{opt}' is not supported yet").into());
    }
    f.dgram_binds.push(addr);
    Ok(())
}

fn log(f: &mut LogForwardDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if ctx.arg(1) == Some("global") {
        return Err("'log global' is not supported yet in a log-forward section".into());
    }
    f.logs.push(parse_target(ctx)?);
    Ok(())
}

fn maxconn(f: &mut LogForwardDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a number")?;
    f.maxconn = Some(values::number(v, "a number").map_err(|e| format!("'maxconn': {e}"))?);
    ctx.no_more(1)
}

fn forward_timeout(f: &mut LogForwardDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let which = ctx.need(1, "'client'")?;
    if which != "client" {
        return Err(
            format!("'timeout' expects 'client' in a log-forward section, got '{which}'").into(),
        );
    }
    let v = ctx.need(2, "a time")?;
    f.timeout_client = Some(values::timer(v).map_err(|e| format!("'timeout client': {e}"))?);
    ctx.no_more(2)
}
