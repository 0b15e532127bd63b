//! The `bind` line: `bind ADDR[,ADDR...] [options]`, one [`Bind`] per address and port.
//!
//! Addresses take HAProxy's forms (`1.2.3.4:80`, `*:80`, `:80`, `[::]:443`, `ipv4@`/`ipv6@`
//! prefixes, port ranges `8000-8010`). The socket options Bascule implements are parsed into the
//! model; the TLS, PROXY-protocol and other HAProxy bind options are recognised (with their number
//! of arguments, so the rest of the line is still checked) and reported as not supported yet.
//! UNIX stream sockets (`unix@PATH`, a plain `/path`, `abns@NAME`) take `mode`, `user`, `uid`,
//! `group` and `gid` for their file; as in HAProxy, an IP bind accepts and ignores them.

use std::net::SocketAddr;

use super::{Ctx, Problem, ProxyDraft};
use crate::config::diag::suggest;
use crate::config::model::{Bind, ListenAddr, Mux, UnixAddr, UnixPerms};
use crate::config::values;

/// Bind options Bascule implements (for suggestions).
const SUPPORTED: &[&str] = &[
    "name",
    "backlog",
    "maxconn",
    "v4v6",
    "v6only",
    "transparent",
    "accept-proxy",
    "mode",
    "user",
    "uid",
    "group",
    "gid",
    "proto",
];

/// HAProxy bind options not supported yet, with how many arguments each takes.
const UNSUPPORTED: &[(&str, usize)] = &[
    ("accept-netscaler-cip", 1),
    ("allow-0rtt", 0),
    ("ca-sign-file", 1),
    ("ca-sign-pass", 1),
    ("defer-accept", 0),
    ("expose-fd", 1),
    ("generate-certificates", 0),
    ("id", 1),
    ("interface", 1),
    ("level", 1),
    ("mss", 1),
    ("namespace", 1),
    ("nice", 1),
    ("process", 1),
    ("quic-cc-algo", 1),
    ("quic-force-retry", 0),
    ("severity-output", 1),
    ("sigalgs", 1),
    ("client-sigalgs", 1),
    ("tcp-ut", 1),
    ("tfo", 0),
    ("thread", 1),
];

/// How many arguments an unsupported bind option takes, or `None` if it is not a HAProxy one.
pub fn unsupported_arity(option: &str) -> Option<usize> {
    UNSUPPORTED
        .iter()
        .find(|(n, _)| *n == option)
        .map(|(_, a)| *a)
}

/// Expands one address word (`HOST:PORT` or `HOST:LOW-HIGH`) into socket addresses.
pub fn expand_address(word: &str) -> Result<Vec<SocketAddr>, String> {
    let hp = values::split_host_port(word)?;
    let port = hp.port.ok_or_else(|| {
        format!("address '{word}' has no port (expected HOST:PORT, '*:PORT' or ':PORT')")
    })?;
    let (low, high) = match port.split_once('-') {
        Some((a, b)) => (values::port(a)?, values::port(b)?),
        None => {
            let p = values::port(port)?;
            (p, p)
        }
    };
    if low > high {
        return Err(format!("port range '{port}' in '{word}' goes backwards"));
    }
    let ip = values::resolve_host(hp.host, hp.family)?;
    Ok((low..=high).map(|p| SocketAddr::new(ip, p)).collect())
}

/// Reads one address word of a `bind` line: `fd@N`, a UNIX socket (`unix@PATH`, `/path`,
/// `abns@NAME`), or an IP form expanded by [`expand_address`].
pub fn listen_addresses(word: &str) -> Result<Vec<ListenAddr>, String> {
    match values::socket_prefix(word)? {
        Some(values::SocketPrefix::Fd(fd)) => Ok(vec![ListenAddr::Fd(fd)]),
        Some(values::SocketPrefix::Unix(path)) => Ok(vec![ListenAddr::Unix(UnixAddr::Path(path))]),
        Some(values::SocketPrefix::Abns(name)) => {
            Ok(vec![ListenAddr::Unix(UnixAddr::Abstract(name))])
        }
        None => Ok(expand_address(word)?
            .into_iter()
            .map(ListenAddr::Inet)
            .collect()),
    }
}

/// Applies one of the UNIX socket options (`mode`, `user`, `uid`, `group`, `gid`) to `perms`;
/// `None` when `opt` is not one of them. Shared with `stats socket`, which takes them too.
pub fn unix_perm_option(
    perms: &mut UnixPerms,
    opt: &str,
    value: Option<&str>,
) -> Option<Result<(), String>> {
    let what = match opt {
        "mode" => "an octal permission such as 600",
        "user" => "a user name",
        "group" => "a group name",
        "uid" | "gid" => "a numeric id",
        _ => return None,
    };
    let Some(v) = value else {
        return Some(Err(format!("option '{opt}' expects {what}")));
    };
    let lookup = |path, what| {
        super::global::lookup_in(path, v, what).map_err(|p| format!("'{opt}': {}", p.message))
    };
    let numeric = || values::number(v, what).map_err(|e| format!("'{opt}': {e}"));
    Some((|| {
        match opt {
            "mode" => {
                perms.mode = Some(u32::from_str_radix(v, 8).map_err(|_| {
                    format!("'mode' expects an octal permission such as 600, got '{v}'")
                })?)
            }
            "user" => perms.uid = Some(lookup("/etc/passwd", "user")?),
            "group" => perms.gid = Some(lookup("/etc/group", "group")?),
            "uid" => perms.uid = Some(numeric()?),
            _ => perms.gid = Some(numeric()?),
        }
        Ok(())
    })())
}

/// `bind ADDR[,ADDR...] [options]`.
pub fn parse(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let list = ctx
        .need(1, "an address such as '*:80' or ':80'")?
        .to_string();
    let mut template = Bind {
        addr: ListenAddr::Inet(SocketAddr::from(([0, 0, 0, 0], 0))),
        name: None,
        backlog: None,
        maxconn: None,
        v4v6: false,
        v6only: false,
        transparent: false,
        accept_proxy: false,
        unix_perms: UnixPerms::default(),
        location: ctx.span.to_string(),
        tls: None,
        proto: None,
    };
    let mut ssl = super::ssl::SslBindDraft::default();
    let mut i = 2;
    while let Some(opt) = ctx.arg(i).map(str::to_owned) {
        let value = ctx.arg(i + 1).map(str::to_owned);
        let need = |what: &str| {
            value
                .clone()
                .ok_or_else(|| format!("'bind': option '{opt}' expects {what}"))
        };
        let step = match opt.as_str() {
            "name" => need("a name").map(|v| {
                template.name = Some(v);
                2
            }),
            "backlog" => need("a positive integer")
                .and_then(|v| values::positive(&v).map_err(|e| format!("'bind': 'backlog': {e}")))
                .map(|n| {
                    template.backlog = Some(n);
                    2
                }),
            "maxconn" => need("a positive integer")
                .and_then(|v| values::positive(&v).map_err(|e| format!("'bind': 'maxconn': {e}")))
                .map(|n| {
                    template.maxconn = Some(n);
                    2
                }),
            "v4v6" => {
                template.v4v6 = true;
                Ok(1)
            }
            "v6only" => {
                template.v6only = true;
                Ok(1)
            }
            "transparent" => {
                template.transparent = true;
                Ok(1)
            }
            "accept-proxy" => {
                template.accept_proxy = true;
                Ok(1)
            }
            "proto" => need("a MUX protocol such as 'h2'").and_then(|v| {
                template.proto = Some(Mux::parse(&v).map_err(|e| format!("'bind': {e}"))?);
                Ok(2)
            }),
            "mode" | "user" | "uid" | "group" | "gid" => {
                match unix_perm_option(&mut template.unix_perms, &opt, value.as_deref()) {
                    Some(Err(e)) => Err(format!("'bind': {e}")),
                    _ => Ok(2),
                }
            }
            other if super::ssl::BIND_OPTIONS.contains(&other) => {
                match super::ssl::bind_option(&mut ssl, other, value.as_deref(), ctx) {
                    Some(step) => step,
                    None => Ok(1),
                }
            }
            other => match unsupported_arity(other) {
                Some(arity) => {
                    ctx.error(format!(
                        "'bind': option '{other}' is a HAProxy option that Bascule does not support yet"
                    ));
                    Ok(1 + arity)
                }
                None => {
                    let hint = suggest(
                        other,
                        SUPPORTED
                            .iter()
                            .chain(super::ssl::BIND_OPTIONS)
                            .chain(UNSUPPORTED.iter().map(|(n, _)| n))
                            .copied(),
                    );
                    ctx.error(Problem::with_hint(
                        format!("'bind': unknown option '{other}'"),
                        hint,
                    ));
                    Ok(1)
                }
            },
        };
        match step {
            Ok(n) => i += n,
            Err(e) => {
                ctx.error(e);
                i += 2;
            }
        }
    }
    if ssl.enabled {
        let settings = p.ssl_defaults.apply(&ssl.settings);
        match crate::tls::server::build(&settings) {
            Ok(built) => {
                for w in &built.warnings {
                    ctx.warn(format!("'bind': {w}"));
                }
                template.tls = Some(std::sync::Arc::new(built));
            }
            Err(e) => ctx.error(format!("'bind': {e}")),
        }
    } else if ssl.settings != Default::default() {
        ctx.warn(
            "'bind': TLS options without 'ssl': this address serves clear text (as haproxy does); add 'ssl' to terminate TLS",
        );
    }
    if template.v4v6 && template.v6only {
        ctx.error("'bind': 'v4v6' and 'v6only' contradict each other");
    }
    for word in list.split(',') {
        match listen_addresses(word) {
            Ok(addrs) => {
                for addr in addrs {
                    // A UNIX socket ignores them, as in HAProxy.
                    if let ListenAddr::Fd(_) = addr {
                        for (set, opt) in [
                            (template.v4v6, "v4v6"),
                            (template.v6only, "v6only"),
                            (template.transparent, "transparent"),
                        ] {
                            if set {
                                ctx.error(format!("'bind {word}': option '{opt}' cannot apply to an inherited socket (it is already bound)"));
                            }
                        }
                    }
                    p.binds.push(Bind {
                        addr,
                        ..template.clone()
                    });
                }
            }
            Err(e) => ctx.error(format!("'bind': {e}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap_or_else(|_| unreachable!("{s}"))
    }

    #[test]
    fn unix_permission_options() {
        let mut p = UnixPerms::default();
        for (opt, v) in [("mode", "640"), ("uid", "12"), ("group", "root")] {
            assert_eq!(unix_perm_option(&mut p, opt, Some(v)), Some(Ok(())));
        }
        assert_eq!(
            p,
            UnixPerms {
                mode: Some(0o640),
                uid: Some(12),
                gid: Some(0)
            }
        );
        assert!(matches!(
            unix_perm_option(&mut p, "mode", Some("9")),
            Some(Err(_))
        ));
        assert!(matches!(
            unix_perm_option(&mut p, "user", Some("no-such-user-x")),
            Some(Err(_))
        ));
        assert!(matches!(
            unix_perm_option(&mut p, "gid", None),
            Some(Err(_))
        ));
        assert_eq!(unix_perm_option(&mut p, "name", Some("x")), None);
    }

    #[test]
    fn address_forms() {
        let cases: &[(&str, &[&str])] = &[
            ("1.2.3.4:80", &["1.2.3.4:80"]),
            ("*:80", &["0.0.0.0:80"]),
            (":80", &["0.0.0.0:80"]),
            ("[::]:443", &["[::]:443"]),
            (":::443", &["[::]:443"]),
            ("ipv6@:80", &["[::]:80"]),
            ("ipv4@*:80", &["0.0.0.0:80"]),
            (
                "127.0.0.1:8000-8002",
                &["127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002"],
            ),
        ];
        for (word, want) in cases {
            let want: Vec<SocketAddr> = want.iter().map(|s| sa(s)).collect();
            assert_eq!(expand_address(word), Ok(want), "{word}");
        }
        assert_eq!(listen_addresses("fd@3"), Ok(vec![ListenAddr::Fd(3)]));
        assert_eq!(
            listen_addresses("ipv4@127.0.0.1:80"),
            Ok(vec![ListenAddr::Inet(sa("127.0.0.1:80"))])
        );
        for bad in ["fd@", "fd@x", "fd@-1", "unix@", "abns@"] {
            assert!(listen_addresses(bad).is_err(), "{bad}");
        }
        assert_eq!(
            listen_addresses("unix@/tmp/s"),
            Ok(vec![ListenAddr::Unix(UnixAddr::Path("/tmp/s".into()))])
        );
        assert_eq!(listen_addresses("/tmp/s"), listen_addresses("unix@/tmp/s"));
        assert_eq!(
            listen_addresses("abns@x"),
            Ok(vec![ListenAddr::Unix(UnixAddr::Abstract("x".into()))])
        );
        for bad in [
            "1.2.3.4",
            "*:0",
            "*:70000",
            "*:90-80",
            "/tmp/s",
            "ipv4@[::1]:80",
        ] {
            assert!(expand_address(bad).is_err(), "{bad}");
        }
    }
}
