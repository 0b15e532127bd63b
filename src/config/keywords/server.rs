//! The `server` and `default-server` lines: `server NAME ADDR:PORT [options]`.
//!
//! `default-server` changes the settings that the following `server` lines of the proxy start
//! from (and is inherited from `defaults`). Server host names are resolved here, at load time, as
//! HAProxy does without `resolvers`. Options Bascule implements go into the model; the other
//! HAProxy server options are recognised with their arity and reported as not supported yet.

use std::net::SocketAddr;
use std::time::Duration;

use super::{Ctx, Problem, ProxyDraft, ServerDefaults};
use crate::config::diag::suggest;
use crate::config::model::{AgentParams, CheckParams, Observe, OnError, Server, UnixAddr};
use crate::config::values;
use crate::tls::client::{self, ServerTls, ServerVerify};

/// Server options Bascule implements, with how many arguments each takes.
const SUPPORTED: &[(&str, usize)] = &[
    ("weight", 1),
    ("agent-check", 0),
    ("no-agent-check", 0),
    ("agent-addr", 1),
    ("agent-port", 1),
    ("agent-send", 1),
    ("agent-inter", 1),
    ("backup", 0),
    ("no-backup", 0),
    ("disabled", 0),
    ("enabled", 0),
    ("maxconn", 1),
    ("check", 0),
    ("no-check", 0),
    ("inter", 1),
    ("fastinter", 1),
    ("downinter", 1),
    ("rise", 1),
    ("fall", 1),
    ("port", 1),
    ("addr", 1),
    ("cookie", 1),
    ("send-proxy", 0),
    ("no-send-proxy", 0),
    ("send-proxy-v2", 0),
    ("no-send-proxy-v2", 0),
    ("proxy-v2-options", 1),
    ("pool-max-conn", 1),
    ("slowstart", 1),
    ("observe", 1),
    ("error-limit", 1),
    ("on-error", 1),
    ("init-addr", 1),
    ("socks4", 1),
    ("check-via-socks4", 0),
    ("check-send-proxy", 0),
    ("no-check-send-proxy", 0),
    ("proto", 1),
    ("track", 1),
];

/// HAProxy server options not supported yet, with how many arguments each takes.
const UNSUPPORTED: &[(&str, usize)] = &[
    ("allow-0rtt", 0),
    ("check-proto", 1),
    ("guid", 1),
    ("hash-key", 1),
    ("id", 1),
    ("init-state", 1),
    ("log-proto", 1),
    ("max-reuse", 1),
    ("maxqueue", 1),
    ("minconn", 1),
    ("namespace", 1),
    ("non-stick", 0),
    ("on-marked-down", 1),
    ("on-marked-up", 1),
    ("pool-conn-name", 1),
    ("pool-low-conn", 1),
    ("pool-purge-delay", 1),
    ("redir", 1),
    ("resolve-net", 1),
    ("resolve-opts", 1),
    ("resolve-prefer", 1),
    ("resolvers", 1),
    ("send-proxy-v2-ssl", 0),
    ("send-proxy-v2-ssl-cn", 0),
    ("shard", 1),
    ("sigalgs", 1),
    ("source", 1),
    ("stick", 0),
    ("tcp-ut", 1),
    ("tfo", 0),
    ("ws", 1),
];

fn check_time(word: &str, opt: &str) -> Result<Duration, String> {
    let d = values::timer(word).map_err(|e| format!("'{opt}': {e}"))?;
    if d.is_zero() {
        return Err(format!("'{opt}' must be greater than zero"));
    }
    Ok(d)
}

/// Applies one supported option (with its value, if it takes one) to `sd`.
fn apply_option(sd: &mut ServerDefaults, opt: &str, value: Option<&str>) -> Result<(), String> {
    let v = || value.ok_or_else(|| format!("option '{opt}' expects a value"));
    match opt {
        "weight" => {
            let w: u32 =
                values::number(v()?, "a weight 0-256").map_err(|e| format!("'weight': {e}"))?;
            if w > 256 {
                return Err(format!("'weight': must be between 0 and 256, got {w}"));
            }
            sd.weight = w;
        }
        "backup" => sd.backup = true,
        "no-backup" => sd.backup = false,
        "disabled" => sd.disabled = true,
        "enabled" => sd.disabled = false,
        "maxconn" => {
            // 0 is HAProxy's documented "no limit" for servers.
            let n: u32 = values::number(v()?, "a connection limit")
                .map_err(|e| format!("'maxconn': {e}"))?;
            sd.maxconn = (n > 0).then_some(n);
        }
        "agent-check" => sd.agent_check = true,
        "no-agent-check" => sd.agent_check = false,
        "agent-addr" => {
            let host = v()?;
            sd.agent_addr = Some(
                values::resolve_host(host, values::Family::Any)
                    .map_err(|e| format!("'agent-addr': {e}"))?,
            );
        }
        "agent-port" => {
            sd.agent_port = Some(values::port(v()?).map_err(|e| format!("'agent-port': {e}"))?)
        }
        "agent-send" => sd.agent_send = Some(v()?.to_string()),
        "agent-inter" => sd.agent_inter = Some(check_time(v()?, opt)?),
        "check" => sd.check = true,
        "no-check" => sd.check = false,
        "init-addr" => {
            let list = v()?;
            for m in list.split(',') {
                if !matches!(m, "last" | "libc" | "none") && m.parse::<std::net::IpAddr>().is_err() {
                    return Err(format!(
                        "'init-addr': '{m}' is not a method (last, libc, none, or an IP address)"
                    ));
                }
            }
            sd.init_addr = Some(list.to_string());
        }
        "inter" => sd.inter = check_time(v()?, opt)?,
        "fastinter" => sd.fastinter = Some(check_time(v()?, opt)?),
        "downinter" => sd.downinter = Some(check_time(v()?, opt)?),
        "rise" => sd.rise = values::positive(v()?).map_err(|e| format!("'rise': {e}"))?,
        "fall" => sd.fall = values::positive(v()?).map_err(|e| format!("'fall': {e}"))?,
        "port" => sd.check_port = Some(values::port(v()?).map_err(|e| format!("'port': {e}"))?),
        "addr" => {
            let host = v()?;
            sd.check_addr = Some(
                values::resolve_host(host, values::Family::Any)
                    .map_err(|e| format!("'addr': {e}"))?,
            );
        }
        "cookie" => sd.cookie = Some(v()?.to_string()),
        "send-proxy" => sd.send_proxy = true,
        "socks4" => {
            let w = v()?;
            let hp = values::split_host_port(w).map_err(|e| format!("'socks4': {e}"))?;
            let port = match hp.port {
                Some(p) if !p.is_empty() => values::port(p).map_err(|e| format!("'socks4': {e}"))?,
                _ => return Err(format!("'socks4': '{w}' needs a port")),
            };
            let ip = values::resolve_host(hp.host, hp.family)
                .map_err(|e| format!("'socks4': {e}"))?;
            sd.socks4 = Some(std::net::SocketAddr::new(ip, port));
        }
        "check-via-socks4" => sd.check_via_socks4 = true,
        "check-send-proxy" => sd.check_send_proxy = true,
        "no-check-send-proxy" => sd.check_send_proxy = false,
        "send-proxy-v2" => sd.send_proxy_v2 = true,
        "no-send-proxy-v2" => sd.send_proxy_v2 = false,
        "proxy-v2-options" => {
            sd.proxy_v2_options = crate::proto::proxy::V2Options::parse(v()?)
                .map_err(|e| format!("'proxy-v2-options': {e}"))?;
        }
        "pool-max-conn" => {
            let n: i64 = values::number(v()?, "a number of connections (-1: no limit)")
                .map_err(|e| format!("'pool-max-conn': {e}"))?;
            sd.pool_max_conn = match n {
                -1 => None,
                n if n >= 0 => Some(u32::try_from(n).unwrap_or(u32::MAX)),
                n => return Err(format!("'pool-max-conn': {n} is not -1 or a positive number")),
            };
        }
        "proto" => sd.proto = Some(crate::config::model::Mux::parse(v()?)?),
        "slowstart" => sd.slowstart = Some(check_time(v()?, opt)?),
        "observe" => {
            sd.observe = Some(match v()? {
                "layer4" => Observe::Layer4,
                "layer7" => Observe::Layer7,
                other => return Err(format!("'observe': expected layer4 or layer7, got '{other}'")),
            })
        }
        "error-limit" => {
            sd.error_limit = values::positive(v()?).map_err(|e| format!("'error-limit': {e}"))?
        }
        "on-error" => {
            sd.on_error = match v()? {
                "fastinter" => OnError::FastInter,
                "fail-check" => OnError::FailCheck,
                "sudden-death" => OnError::SuddenDeath,
                "mark-down" => OnError::MarkDown,
                other => {
                    return Err(format!(
                        "'on-error': expected fastinter, fail-check, sudden-death or mark-down, got '{other}'"
                    ))
                }
            }
        }
        "no-send-proxy" => sd.send_proxy = false,
        "track" => sd.track = Some(v()?.to_string()),
        _ => return Err(format!("unknown option '{opt}'")),
    }
    Ok(())
}

/// Applies the options from word `start` on to `sd`, reporting each bad option and continuing.
fn apply_options(sd: &mut ServerDefaults, ctx: &mut Ctx<'_>, start: usize) {
    // `server NAME` names the server in messages; `default-server` has no name.
    let kw = match ctx.arg(1) {
        Some(name) if start > 1 => format!("{} {name}", ctx.kw()),
        _ => ctx.kw().to_string(),
    };
    let mut i = start;
    while let Some(opt) = ctx.arg(i).map(str::to_owned) {
        if let Some((_, arity)) = super::ssl::SERVER_OPTIONS.iter().find(|(n, _)| *n == opt) {
            match super::ssl::server_option(&mut sd.ssl, &opt, ctx.arg(i + 1)) {
                Ok(Some(w)) => ctx.warn(format!("'{kw}': {w}")),
                Ok(None) => {}
                Err(e) => ctx.error(format!("'{kw}': {e}")),
            }
            i += 1 + arity;
        } else if let Some((_, arity)) = SUPPORTED.iter().find(|(n, _)| *n == opt) {
            if let Err(e) = apply_option(sd, &opt, ctx.arg(i + 1)) {
                ctx.error(format!("'{kw}': {e}"));
            }
            i += 1 + arity;
        } else if let Some((_, arity)) = UNSUPPORTED.iter().find(|(n, _)| *n == opt) {
            ctx.error(format!(
                "'{kw}': option '{opt}' is a HAProxy option that Bascule does not support yet"
            ));
            i += 1 + arity;
        } else {
            let hint = suggest(
                &opt,
                SUPPORTED
                    .iter()
                    .chain(super::ssl::SERVER_OPTIONS)
                    .chain(UNSUPPORTED)
                    .map(|(n, _)| *n),
            );
            ctx.error(Problem::with_hint(
                format!("'{kw}': unknown option '{opt}'"),
                hint,
            ));
            i += 1;
        }
    }
}

/// `default-server [options]`.
pub fn parse_default(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "at least one server option")?;
    apply_options(&mut p.server_defaults, ctx, 1);
    Ok(())
}

/// Where a server line points: an IP address and port, or a UNIX socket.
#[derive(Debug, PartialEq, Eq)]
enum ServerAddr {
    Inet(SocketAddr),
    Unix(UnixAddr),
}

/// Resolves the address word of a server line: `ADDR:PORT`, `unix@PATH`, `/path`, `abns@NAME`.
fn server_addr(word: &str) -> Result<ServerAddr, String> {
    match values::socket_prefix(word)? {
        Some(values::SocketPrefix::Unix(path)) => {
            return Ok(ServerAddr::Unix(UnixAddr::Path(path)))
        }
        Some(values::SocketPrefix::Abns(name)) => {
            return Ok(ServerAddr::Unix(UnixAddr::Abstract(name)))
        }
        Some(values::SocketPrefix::Fd(_)) => {
            return Err(format!(
                "'{word}': a server cannot use an inherited socket (fd@); give an address"
            ))
        }
        None => {}
    }
    let hp = values::split_host_port(word)?;
    let port = match hp.port {
        // No port: the client's destination port (see `backend::connect`).
        None | Some("") => 0,
        Some(p) if p.starts_with('+') || p.starts_with('-') => {
            return Err(format!(
                "port offset '{p}' in '{word}' is not supported yet (an absolute port is required)"
            ))
        }
        Some(p) => values::port(p)?,
    };
    Ok(ServerAddr::Inet(SocketAddr::new(
        values::resolve_host(hp.host, hp.family)?,
        port,
    )))
}

/// Resolves a server's address by its `init-addr` methods, in order: `libc` (the resolver),
/// `last` (the address a server-state file kept: Bascule reads none, so it finds nothing),
/// `none` (no address: the server starts in maintenance, as HAProxy leaves it until a
/// resolver or `set server addr` gives it one), or an IP address with the line's port.
fn init_addr(word: &str, methods: &str, no_addr: &mut bool) -> Result<ServerAddr, String> {
    let mut failed = None;
    let port = || -> Result<u16, String> {
        match values::split_host_port(word)?.port {
            None | Some("") => Ok(0),
            Some(p) => values::port(p),
        }
    };
    for m in methods.split(',') {
        match m {
            "libc" => match server_addr(word) {
                Ok(a) => return Ok(a),
                Err(e) => failed = Some(e),
            },
            "last" => {}
            "none" => {
                *no_addr = true;
                return Ok(ServerAddr::Inet(SocketAddr::new(
                    std::net::Ipv4Addr::UNSPECIFIED.into(),
                    port()?,
                )));
            }
            ip => {
                if let Ok(ip) = ip.parse::<std::net::IpAddr>() {
                    return Ok(ServerAddr::Inet(SocketAddr::new(ip, port()?)));
                }
            }
        }
    }
    Err(failed.unwrap_or_else(|| format!("no 'init-addr' method gave '{word}' an address")))
}

/// `server NAME ADDR:PORT [options]`.
pub fn parse(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a server name and an address")?.to_string();
    let addr_word = ctx.need(2, "an address such as '10.0.0.1:80'")?.to_string();
    let mut sd = p.server_defaults.clone();
    apply_options(&mut sd, ctx, 3);
    let mut no_addr = false;
    let resolved = match &sd.init_addr {
        None => server_addr(&addr_word),
        Some(methods) => init_addr(&addr_word, methods, &mut no_addr),
    };
    let (addr, unix) = match resolved.map_err(|e| format!("'server {name}': {e}"))? {
        ServerAddr::Inet(a) => (a, None),
        ServerAddr::Unix(u) => {
            if sd.check_addr.is_some() {
                return Err(format!(
                    "'server {name}': option 'addr' (an IP address for checks) on a UNIX socket server is not supported yet"
                )
                .into());
            }
            (SocketAddr::from(([0, 0, 0, 0], 0)), Some(u))
        }
    };
    if sd.check && sd.track.is_some() {
        return Err(format!(
            "'server {name}': unable to enable checks and tracking at the same time!"
        )
        .into());
    }
    // As HAProxy: a server without an address (`0.0.0.0`, or no host at all) and no check
    // `addr` may be checked without a port; its checks then fail to connect.
    let no_address = addr.ip().is_unspecified() && sd.check_addr.is_none();
    if sd.check && unix.is_none() && addr.port() == 0 && !no_address && sd.check_port.is_none() {
        return Err(format!(
            "server '{name}' has neither service port nor check port (give it 'port N' for its checks)"
        )
        .into());
    }
    let check = sd.check.then(|| CheckParams {
        inter: sd.inter,
        fastinter: sd.fastinter.unwrap_or(sd.inter),
        downinter: sd.downinter.unwrap_or(sd.inter),
        rise: sd.rise,
        fall: sd.fall,
        addr: SocketAddr::new(
            sd.check_addr.unwrap_or(addr.ip()),
            sd.check_port.unwrap_or(addr.port()),
        ),
    });
    // As in HAProxy, the agent's port defaults to the check `port`.
    let agent = match (sd.agent_check, sd.agent_port.or(sd.check_port)) {
        (false, _) => None,
        (true, None) => {
            return Err(format!(
                "'server {name}': 'agent-check' needs 'agent-port' (the port the agent listens on)"
            )
            .into())
        }
        (true, Some(port)) => {
            if unix.is_some() && sd.agent_addr.is_none() {
                return Err(format!(
                    "'server {name}': 'agent-check' on a UNIX socket server needs 'agent-addr'"
                )
                .into());
            }
            Some(AgentParams {
                addr: sd.agent_addr,
                port,
                send: sd.agent_send.clone(),
                inter: sd.agent_inter.unwrap_or(sd.inter),
            })
        }
    };
    let tls = server_tls(p, &sd, &name, ctx);
    if unix.is_some() && tls.is_some() {
        return Err(format!(
            "'server {name}': 'ssl'/'check-ssl' on a UNIX socket server is not supported yet (TLS to servers goes over TCP)"
        )
        .into());
    }
    p.servers.push(Server {
        name,
        id: u32::try_from(p.servers.len() + 1).unwrap_or(u32::MAX),
        addr,
        unix,
        weight: sd.weight,
        backup: sd.backup,
        disabled: sd.disabled,
        no_addr,
        maxconn: sd.maxconn,
        check,
        cookie: sd.cookie,
        send_proxy: sd.send_proxy,
        send_proxy_v2: sd.send_proxy_v2,
        proxy_v2_options: sd.proxy_v2_options,
        pool_max_conn: sd.pool_max_conn,
        socks4: sd.socks4,
        check_via_socks4: sd.check_via_socks4,
        check_send_proxy: sd.check_send_proxy,
        use_ssl: sd.ssl.use_ssl,
        proto: sd.proto,
        slowstart: sd.slowstart,
        observe: sd.observe,
        error_limit: sd.error_limit,
        on_error: sd.on_error,
        check_addr: sd.check_addr,
        check_port: sd.check_port,
        rise: sd.rise,
        fall: sd.fall,
        tls,
        agent,
        location: ctx.span.to_string(),
        pinned: false,
        track_name: sd.track.clone(),
        track: None,
    });
    Ok(())
}

/// Server options HAProxy refuses on `add server` (keywords without its dynamic flag) that
/// Bascule otherwise implements.
const NOT_DYNAMIC: &[&str] = &["cookie", "init-addr", "socks4"];

/// The server of an `add server BACKEND/NAME ADDR [options]` command: `words` are `NAME ADDR
/// [options]`. As in HAProxy, `default-server` lines do not apply to it (a dynamic server
/// starts from the built-in settings), the `global` TLS defaults (`ssl-default-server-*`,
/// `ca-base`, `crt-base`) do. The error is the command's reply.
pub fn parse_dynamic(
    words: &[&str],
    global: &crate::config::model::Global,
) -> Result<Server, String> {
    let mut i = 2;
    while let Some(&opt) = words.get(i) {
        if NOT_DYNAMIC.contains(&opt) {
            return Err(format!("'{opt}' option is not accepted for dynamic server"));
        }
        let arity = SUPPORTED
            .iter()
            .chain(super::ssl::SERVER_OPTIONS)
            .chain(UNSUPPORTED)
            .find(|(n, _)| *n == opt)
            .map_or(0, |(_, a)| *a);
        i += 1 + arity;
    }
    let span = crate::config::Span {
        file_index: 0,
        file: std::sync::Arc::from("cli"),
        line: 0,
    };
    let mut draft = ProxyDraft::builtin(span.clone());
    draft.kind = super::SectionKind::Backend;
    draft.ssl_defaults = global.ssl.clone();
    draft.ssl_server_defaults = global.ssl_server.clone();
    // HAProxy expands environment variables in an address it parses (`str2sa_range`), and the
    // CLI has no other expansion: `add server b/s ${HOST}:80` takes the process's `HOST` (as
    // the configuration's `setenv` lines left the environment).
    let args: Vec<String> = std::iter::once("server".to_string())
        .chain(words.iter().enumerate().map(|(i, w)| {
            if i == 1 {
                env_expand(w, |n| global.env.get(n).cloned())
            } else {
                w.to_string()
            }
        }))
        .collect();
    // HAProxy does not resolve a dynamic server's host name (it stays without an address);
    // Bascule says so rather than resolving it, which would also block the stats socket.
    if let Some(addr) = args.get(2) {
        if matches!(values::socket_prefix(addr), Ok(None)) {
            if let Ok(hp) = values::split_host_port(addr) {
                let host = hp.host;
                if !host.is_empty() && host != "*" && host.parse::<std::net::IpAddr>().is_err() {
                    return Err(format!(
                        "'{addr}': host names of servers added at run time are not resolved (HAProxy leaves such a server without an address); give an IP address"
                    ));
                }
            }
        }
    }
    let mut diags = Vec::new();
    let mut ctx = Ctx {
        args: &args,
        span: &span,
        kind: super::SectionKind::Backend,
        section: "cli",
        diags: &mut diags,
    };
    let parsed = parse(&mut draft, &mut ctx);
    let mut errors: Vec<String> = diags
        .iter()
        .filter(|d| d.severity == crate::config::Severity::Alert)
        .map(|d| d.message.clone())
        .collect();
    if let Err(p) = parsed {
        errors.push(p.message);
    }
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    let mut server = draft.servers.pop().ok_or("no server parsed")?;
    server.location = "cli".into();
    Ok(server)
}

/// HAProxy's `env_expand`: each `$NAME` or `${NAME}` (a name of letters, digits and `_`)
/// becomes the variable's value, empty when it is not set.
fn env_expand(word: &str, var: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(d) = rest.find('$') {
        out.push_str(&rest[..d]);
        let after = &rest[d + 1..];
        let braced = after.starts_with('{');
        let name_start = usize::from(braced);
        let name_len = after[name_start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len() - name_start);
        let name = &after[name_start..name_start + name_len];
        out.push_str(&var(name).unwrap_or_default());
        let mut next = name_start + name_len;
        if braced && after[next..].starts_with('}') {
            next += 1;
        }
        rest = &after[next..];
    }
    out.push_str(rest);
    out
}

/// Builds the TLS configurations of a server line (`ssl` for traffic; `check-ssl`, or `ssl`
/// without a check `port`/`addr`, for checks), with the global defaults applied. A file that
/// does not load is an error on this line, naming the file.
fn server_tls(
    p: &ProxyDraft,
    sd: &ServerDefaults,
    name: &str,
    ctx: &mut Ctx<'_>,
) -> Option<std::sync::Arc<ServerTls>> {
    let d = &sd.ssl;
    // HAProxy: `ssl` makes checks TLS too, unless they go to another port or address.
    let check_tls = sd.check
        && (d.check_ssl || (d.enabled && sd.check_port.is_none() && sd.check_addr.is_none()));
    // Built for traffic when it is on, or when `set server ... ssl on` may turn it on.
    let traffic = d.enabled || d.prepared;
    if !traffic && !check_tls {
        return None;
    }
    let base = &p.ssl_defaults;
    let mut settings = p.ssl_server_defaults.apply(
        &d.settings,
        base.ca_base.as_deref(),
        base.crt_base.as_deref(),
    );
    settings.sends_sni = d.sni.is_some();
    let default_verify = ServerVerify::Required;
    // The `crt`, loaded once for traffic and checks alike (one certificate to rotate).
    let slot = match &settings.crt {
        None => None,
        Some(path) => match crate::tls::cert::load_file_with(path, settings.extra) {
            Ok(c) => Some(client::ClientCertSlot::new(c)),
            Err(e) => {
                ctx.error(format!("'server {name}': {e}"));
                return None;
            }
        },
    };
    let mut build = |s: &crate::tls::client::ServerSsl| match client::build_with(
        s,
        default_verify,
        slot.clone(),
    ) {
        Ok((config, warnings)) => {
            for w in warnings {
                ctx.warn(format!("'server {name}': {w}"));
            }
            Some(config)
        }
        Err(e) => {
            ctx.error(format!("'server {name}': {e}"));
            None
        }
    };
    let config = if traffic {
        Some(build(&settings)?)
    } else {
        None
    };
    let check = if check_tls {
        let mut s = settings.clone();
        s.sends_sni = d.check_sni.is_some();
        if let Some(alpn) = &d.check_alpn {
            s.alpn = alpn.clone();
        }
        if d.enabled && s == settings {
            config.clone()
        } else {
            Some(build(&s)?)
        }
    } else {
        None
    };
    Some(std::sync::Arc::new(ServerTls {
        config,
        check,
        sni: d.sni.clone(),
        sni_slot: None,
        check_sni: d.check_sni.clone(),
        verifyhost: settings.verifyhost.clone(),
        crt: slot,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_servers_parse_as_haproxy_allows() {
        let mut global = crate::config::load_str(
            "t.cfg",
            "defaults\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n",
        )
        .unwrap()
        .config
        .global;
        global.env.insert("IP".into(), "127.0.0.2".into());
        let s = parse_dynamic(&["n", "${IP}:80", "check", "weight", "3"], &global).unwrap();
        assert_eq!(s.addr, "127.0.0.2:80".parse().unwrap());
        assert_eq!((s.weight, s.check.is_some(), s.id), (3, true, 1));
        assert_eq!(
            parse_dynamic(&["n", "127.0.0.1:80", "cookie", "c"], &global).unwrap_err(),
            "'cookie' option is not accepted for dynamic server"
        );
        assert!(parse_dynamic(&["n", "localhost:80"], &global)
            .unwrap_err()
            .contains("not resolved"));
        assert!(parse_dynamic(&["n", "127.0.0.1:80", "bogus"], &global)
            .unwrap_err()
            .contains("unknown option 'bogus'"));
    }

    #[test]
    fn env_expand_as_haproxy() {
        let var = |n: &str| (n == "P").then(|| "80".to_string());
        assert_eq!(env_expand("a:${P}", var), "a:80");
        assert_eq!(env_expand("a:$P", var), "a:80");
        assert_eq!(env_expand("${X}+a", var), "+a");
        assert_eq!(env_expand("${P", var), "80");
        assert_eq!(env_expand("a$", var), "a");
        assert_eq!(env_expand("plain", var), "plain");
    }

    #[test]
    fn options_apply_in_order() {
        let mut sd = ServerDefaults::default();
        for (opt, v) in [
            ("weight", Some("10")),
            ("check", None),
            ("inter", Some("5s")),
            ("rise", Some("1")),
            ("maxconn", Some("0")),
            ("addr", Some("127.0.0.2")),
        ] {
            assert_eq!(apply_option(&mut sd, opt, v), Ok(()), "{opt}");
        }
        assert_eq!(sd.weight, 10);
        assert!(sd.check);
        assert_eq!(sd.inter, Duration::from_secs(5));
        assert_eq!(sd.rise, 1);
        assert_eq!(sd.maxconn, None);
        assert!(apply_option(&mut sd, "weight", Some("257")).is_err());
        assert!(apply_option(&mut sd, "inter", Some("0")).is_err());
        assert!(apply_option(&mut sd, "fall", Some("0")).is_err());
        assert!(apply_option(&mut sd, "port", None).is_err());
    }

    #[test]
    fn addresses_without_a_port_take_the_destination_port() {
        assert_eq!(
            server_addr("127.0.0.1:80"),
            Ok(ServerAddr::Inet(SocketAddr::from(([127, 0, 0, 1], 80))))
        );
        for (word, unix) in [
            ("unix@/run/s.sock", UnixAddr::Path("/run/s.sock".into())),
            ("/run/s.sock", UnixAddr::Path("/run/s.sock".into())),
            ("abns@be", UnixAddr::Abstract("be".into())),
        ] {
            assert_eq!(server_addr(word), Ok(ServerAddr::Unix(unix)), "{word}");
        }
        assert!(server_addr("fd@3").is_err());
        // No port: the client's destination port (0 until the connection).
        let v4 = |a: [u8; 4], p| Ok(ServerAddr::Inet(SocketAddr::from((a, p))));
        assert_eq!(server_addr("127.0.0.1"), v4([127, 0, 0, 1], 0));
        assert_eq!(server_addr(":"), v4([0, 0, 0, 0], 0));
        assert!(server_addr("127.0.0.1:+1").is_err());
        assert!(server_addr("localhost:8080").is_ok());
    }
}
