//! The `option NAME [args]` and `no option NAME` lines of proxy sections.
//!
//! Options are a keyword family of their own: each is one [`OptionKw`] record (name, sections
//! where it means something, parser, whether `no option` may negate it, doc). HAProxy options that
//! Bascule does not implement yet are listed so that they are reported as such.

use super::{Ctx, Problem, ProxyDraft, Sections};
use crate::config::diag::suggest;
use crate::config::model::{
    ForwardFor, HdrNames, HttpCheck, HttpConnMode, HTTPLOG_CLF_FORMAT, HTTPLOG_FORMAT,
    HTTPSLOG_FORMAT, TCPLOG_FORMAT,
};
use crate::config::values;

/// Parser of one option: `negated` is true for `no option NAME`; `args` are the words after NAME.
type OptionFn = fn(&mut ProxyDraft, &[String], bool) -> Result<(), Problem>;

/// One `option` keyword.
pub struct OptionKw {
    pub name: &'static str,
    /// Sections where the option has an effect; elsewhere it is ignored with a warning.
    pub sections: Sections,
    pub negatable: bool,
    pub parse: OptionFn,
    pub doc: &'static str,
}

macro_rules! flag {
    ($field:ident) => {
        |p: &mut ProxyDraft, args: &[String], negated: bool| {
            no_args(args)?;
            p.options.$field = !negated;
            Ok(())
        }
    };
}

/// The options Bascule implements.
pub static OPTIONS: &[OptionKw] = &[
    OptionKw {
        name: "forwardfor",
        sections: Sections::PROXIES,
        negatable: true,
        parse: forwardfor,
        doc: "Add X-Forwarded-For: forwardfor [except NET] [header NAME] [if-none].",
    },
    OptionKw {
        name: "http-keep-alive",
        sections: Sections::PROXIES,
        negatable: true,
        parse: |p, a, n| conn_mode(p, a, n, HttpConnMode::KeepAlive),
        doc: "Keep client and server connections alive (default).",
    },
    OptionKw {
        name: "http-server-close",
        sections: Sections::PROXIES,
        negatable: true,
        parse: |p, a, n| conn_mode(p, a, n, HttpConnMode::ServerClose),
        doc: "Close the server connection after each response.",
    },
    OptionKw {
        name: "httpclose",
        sections: Sections::PROXIES,
        negatable: true,
        parse: |p, a, n| conn_mode(p, a, n, HttpConnMode::Close),
        doc: "Close both connections after each response.",
    },
    OptionKw {
        name: "redispatch",
        sections: Sections::BE,
        negatable: true,
        parse: redispatch,
        doc: "Let retries go to another server: redispatch [INTERVAL].",
    },
    OptionKw {
        name: "persist",
        sections: Sections::BE,
        negatable: true,
        parse: flag!(persist),
        doc: "Let a persistence cookie lead to a server that is down.",
    },
    OptionKw {
        name: "allbackups",
        sections: Sections::BE,
        negatable: true,
        parse: flag!(allbackups),
        doc: "Balance over all backup servers when no active one is left, not only the first.",
    },
    OptionKw {
        name: "log-health-checks",
        sections: Sections::BE,
        negatable: true,
        parse: flag!(log_health_checks),
        doc:
            "Log every change of a health check's result or health, not only server state changes.",
    },
    OptionKw {
        name: "originalto",
        sections: Sections::PROXIES,
        negatable: true,
        parse: originalto,
        doc: "Add X-Original-To (the address the client connected to): originalto [except NET] [header NAME].",
    },
    OptionKw {
        name: "http-buffer-request",
        sections: Sections::PROXIES,
        negatable: true,
        parse: flag!(http_buffer_request),
        doc:
            "Wait for the request body (within timeout http-request) before the http-request rules.",
    },
    OptionKw {
        name: "abortonclose",
        sections: Sections::BE,
        negatable: true,
        parse: flag!(abortonclose),
        doc: "Drop queued requests whose client has gone.",
    },
    OptionKw {
        name: "httplog",
        sections: Sections::FE,
        // HAProxy: "negation/default is not supported for option 'httplog'".
        negatable: false,
        parse: httplog,
        doc: "Log in HAProxy's HTTP format: httplog [clf].",
    },
    OptionKw {
        name: "httpslog",
        sections: Sections::FE,
        negatable: false,
        parse: httpslog,
        doc: "Log in HAProxy's HTTPS format: httplog's, then the TLS facts (errors, resumption, SNI, version, cipher).",
    },
    OptionKw {
        name: "tcplog",
        sections: Sections::FE,
        // HAProxy: "negation/default is not supported for option 'tcplog'".
        negatable: false,
        parse: tcplog,
        doc: "Log in HAProxy's TCP format.",
    },
    OptionKw {
        name: "dontlognull",
        sections: Sections::FE,
        negatable: true,
        parse: flag!(dontlognull),
        doc: "Do not log connections that carried no data.",
    },
    OptionKw {
        name: "logasap",
        sections: Sections::FE,
        negatable: true,
        parse: flag!(logasap),
        doc: "Log a transaction as soon as the server's response head arrives (TCP: once connected).",
    },
    OptionKw {
        name: "log-separate-errors",
        sections: Sections::FE,
        negatable: true,
        parse: flag!(log_separate_errors),
        doc: "Log failed sessions at level err instead of info.",
    },
    OptionKw {
        name: "clitcpka",
        sections: Sections::FE,
        negatable: true,
        parse: flag!(clitcpka),
        doc: "TCP keep-alive on client connections.",
    },
    OptionKw {
        name: "srvtcpka",
        sections: Sections::BE,
        negatable: true,
        parse: flag!(srvtcpka),
        doc: "TCP keep-alive on server connections.",
    },
    OptionKw {
        name: "tcpka",
        sections: Sections::PROXIES,
        negatable: true,
        parse: tcpka,
        doc: "TCP keep-alive on both sides.",
    },
    OptionKw {
        name: "splice-auto",
        sections: Sections::PROXIES,
        negatable: true,
        parse: flag!(splice_auto),
        doc: "Use splice(2) when it looks worth it.",
    },
    OptionKw {
        name: "splice-request",
        sections: Sections::PROXIES,
        negatable: true,
        parse: flag!(splice_request),
        doc: "Use splice(2) from client to server.",
    },
    OptionKw {
        name: "splice-response",
        sections: Sections::PROXIES,
        negatable: true,
        parse: flag!(splice_response),
        doc: "Use splice(2) from server to client.",
    },
    OptionKw {
        name: "tcp-check",
        sections: Sections::BE,
        negatable: true,
        parse: tcp_check,
        doc: "Health checks run tcp-check rules.",
    },
    OptionKw {
        name: "httpchk",
        sections: Sections::BE,
        negatable: true,
        parse: httpchk,
        doc: "HTTP health checks: httpchk [METH URI [VER]] or httpchk URI.",
    },
    OptionKw {
        name: "mysql-check",
        sections: Sections::BE,
        negatable: false,
        parse: |p, a, _| proto_check(p, "mysql-check", a),
        doc: "MySQL health checks: mysql-check [user USER [post-41|pre-41]].",
    },
    OptionKw {
        name: "pgsql-check",
        sections: Sections::BE,
        negatable: false,
        parse: |p, a, _| proto_check(p, "pgsql-check", a),
        doc: "PostgreSQL health checks: pgsql-check user USER.",
    },
    OptionKw {
        name: "redis-check",
        sections: Sections::BE,
        negatable: false,
        parse: |p, a, _| proto_check(p, "redis-check", a),
        doc: "Redis health checks (PING, answered +PONG).",
    },
    OptionKw {
        name: "smtpchk",
        sections: Sections::BE,
        negatable: false,
        parse: |p, a, _| proto_check(p, "smtpchk", a),
        doc: "SMTP health checks: smtpchk [HELO|EHLO DOMAIN].",
    },
    OptionKw {
        name: "ldap-check",
        sections: Sections::BE,
        negatable: false,
        parse: |p, a, _| proto_check(p, "ldap-check", a),
        doc: "LDAPv3 health checks (an anonymous bind).",
    },
    OptionKw {
        name: "http-restrict-req-hdr-names",
        sections: Sections::PROXIES,
        negatable: false,
        parse: restrict_hdr_names,
        doc: "Request header names with characters other than [0-9a-zA-Z-]: preserve, delete or reject (403).",
    },
];

/// HAProxy options not supported yet.
pub const UNSUPPORTED: &[&str] = &[
    "accept-invalid-http-request",
    "accept-invalid-http-response",
    "accept-unsafe-violations-in-http-request",
    "accept-unsafe-violations-in-http-response",
    "checkcache",
    "contstats",
    "disable-h2-upgrade",
    "dontlog-normal",
    "external-check",
    "h1-case-adjust-bogus-client",
    "h1-case-adjust-bogus-server",
    "http-drop-request-trailers",
    "http-drop-response-trailers",
    "http-ignore-probes",
    "http-no-delay",
    "http-pretend-keepalive",
    "http-use-htx",
    "http-use-proxy-header",
    "http_proxy",
    "idle-close-on-response",
    "independent-streams",
    "nolinger",
    "prefer-last-server",
    "socket-stats",
    "spop-check",
    "ssl-hello-chk",
    "tcp-smart-accept",
    "tcp-smart-connect",
    "transparent",
];

fn no_args(args: &[String]) -> Result<(), Problem> {
    match args.first() {
        None => Ok(()),
        Some(w) => Err(format!("unexpected extra word '{w}'").into()),
    }
}

fn conn_mode(
    p: &mut ProxyDraft,
    args: &[String],
    negated: bool,
    mode: HttpConnMode,
) -> Result<(), Problem> {
    no_args(args)?;
    p.options.http_conn_mode = if negated {
        HttpConnMode::KeepAlive
    } else {
        mode
    };
    Ok(())
}

fn httplog(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    let clf = match args.first().map(String::as_str) {
        None => false,
        Some("clf") if args.len() == 1 => true,
        Some(w) => {
            return Err(format!("unexpected extra word '{w}' (only 'clf' may follow)").into())
        }
    };
    p.options.httplog = !negated;
    if negated {
        if p.options.log_format.as_deref() == Some(HTTPLOG_FORMAT)
            || p.options.log_format.as_deref() == Some(HTTPLOG_CLF_FORMAT)
        {
            p.options.log_format = None;
        }
        return Ok(());
    }
    p.options.tcplog = false;
    let f = if clf {
        HTTPLOG_CLF_FORMAT
    } else {
        HTTPLOG_FORMAT
    };
    p.options.log_format = Some(f.to_string());
    Ok(())
}

fn httpslog(p: &mut ProxyDraft, args: &[String], _negated: bool) -> Result<(), Problem> {
    no_args(args)?;
    // As `option httplog`, it falls back to `option tcplog` on a TCP proxy.
    p.options.httplog = true;
    p.options.tcplog = false;
    p.options.log_format = Some(HTTPSLOG_FORMAT.to_string());
    Ok(())
}

fn tcplog(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    no_args(args)?;
    p.options.tcplog = !negated;
    if negated {
        if p.options.log_format.as_deref() == Some(TCPLOG_FORMAT) {
            p.options.log_format = None;
        }
        return Ok(());
    }
    p.options.httplog = false;
    p.options.log_format = Some(TCPLOG_FORMAT.to_string());
    Ok(())
}

fn tcpka(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    no_args(args)?;
    p.options.clitcpka = !negated;
    p.options.srvtcpka = !negated;
    Ok(())
}

/// What `option forwardfor` and `option originalto` share: `except NET`, `header NAME`, and
/// flags (`if-none`).
struct HeaderOption {
    except: Option<(std::net::IpAddr, u8)>,
    header: String,
    flags: Vec<String>,
}

fn header_option_args(
    args: &[String],
    default_header: &str,
    flags: &[&str],
) -> Result<HeaderOption, Problem> {
    let (mut except, mut header, mut seen) = (None, default_header.to_string(), Vec::new());
    let mut i = 0;
    while let Some(w) = args.get(i) {
        match w.as_str() {
            "except" => {
                let net = args
                    .get(i + 1)
                    .ok_or("'except' expects a network such as 10.0.0.0/8")?;
                except = Some(values::network(net).map_err(|e| format!("'except': {e}"))?);
                i += 2;
            }
            "header" => {
                let name = args.get(i + 1).ok_or("'header' expects a header name")?;
                if name.is_empty() {
                    return Err("'header' expects a non-empty header name".into());
                }
                header = name.clone();
                i += 2;
            }
            f if flags.contains(&f) => {
                seen.push(f.to_string());
                i += 1;
            }
            other => {
                let known: Vec<&str> = ["except", "header"].iter().chain(flags).copied().collect();
                let hint = suggest(other, known.iter().copied());
                let (last, first) = known.split_last().expect("two names at least");
                return Err(Problem::with_hint(
                    format!(
                        "unknown argument '{other}' (expected {} or {last})",
                        first.join(", ")
                    ),
                    hint,
                ));
            }
        }
    }
    Ok(HeaderOption {
        except,
        header,
        flags: seen,
    })
}

fn originalto(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    if negated {
        no_args(args)?;
        p.options.originalto = None;
        return Ok(());
    }
    let o = header_option_args(args, "X-Original-To", &[])?;
    p.options.originalto = Some(crate::config::model::OriginalTo {
        except: o.except,
        header: o.header,
    });
    Ok(())
}

fn forwardfor(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    if negated {
        no_args(args)?;
        p.options.forwardfor = None;
        return Ok(());
    }
    let o = header_option_args(args, "X-Forwarded-For", &["if-none"])?;
    p.options.forwardfor = Some(ForwardFor {
        except: o.except,
        header: o.header,
        if_none: !o.flags.is_empty(),
    });
    Ok(())
}

fn redispatch(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    if negated {
        no_args(args)?;
        p.redispatch = None;
        return Ok(());
    }
    let interval = match args.first() {
        None => -1,
        Some(w) => values::number::<i32>(w, "a retry interval (an integer)")?,
    };
    if let Some(w) = args.get(1) {
        return Err(format!("unexpected extra word '{w}'").into());
    }
    // An interval of 0 disables redispatching, as in HAProxy.
    p.redispatch = (interval != 0).then_some(interval);
    Ok(())
}

/// `option http-restrict-req-hdr-names preserve|delete|reject`.
fn restrict_hdr_names(p: &mut ProxyDraft, args: &[String], _: bool) -> Result<(), Problem> {
    let mode = match args.first().map(String::as_str) {
        Some("preserve") => HdrNames::Preserve,
        Some("delete") => HdrNames::Delete,
        Some("reject") => HdrNames::Reject,
        Some(w) => {
            return Err(format!(
                "invalid parameter '{w}': expects 'preserve', 'reject' or 'delete'"
            )
            .into())
        }
        None => return Err("missing parameter: expects 'preserve', 'reject' or 'delete'".into()),
    };
    no_args(&args[1..])?;
    p.options.restrict_hdr_names = mode;
    Ok(())
}

/// `option tcp-check`: replaces any other check option (the last one wins, as in HAProxy).
fn tcp_check(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    no_args(args)?;
    p.options.tcp_check = !negated;
    if !negated {
        p.options.httpchk = None;
        p.options.proto_check = None;
    }
    Ok(())
}

/// A protocol check option (see [`super::proto_check`]): replaces any other check option.
fn proto_check(p: &mut ProxyDraft, name: &str, args: &[String]) -> Result<(), Problem> {
    let built = super::proto_check::build(name, args).ok_or("not a protocol check")??;
    p.options.proto_check = Some(built);
    p.options.tcp_check = false;
    p.options.httpchk = None;
    Ok(())
}

fn httpchk(p: &mut ProxyDraft, args: &[String], negated: bool) -> Result<(), Problem> {
    if negated {
        no_args(args)?;
        p.options.httpchk = None;
        return Ok(());
    }
    p.options.tcp_check = false;
    p.options.proto_check = None;
    let (method, uri, version) = match args {
        [] => ("OPTIONS", "/", "HTTP/1.0"),
        [uri] => ("OPTIONS", uri.as_str(), "HTTP/1.0"),
        [m, uri] => (m.as_str(), uri.as_str(), "HTTP/1.0"),
        [m, uri, v] => (m.as_str(), uri.as_str(), v.as_str()),
        _ => return Err("expects at most METHOD URI VERSION".into()),
    };
    if p.http_check_inherited {
        // A proxy's own `option httpchk` starts its check anew: the `http-check send` and
        // `expect` lines of the defaults no longer apply (HAProxy 2.6 does the same).
        p.options.http_check = Default::default();
        p.http_check_inherited = false;
    }
    p.options.httpchk = Some(HttpCheck {
        method: method.to_string(),
        uri: uri.to_string(),
        version: version.to_string(),
    });
    Ok(())
}

/// `option NAME [args]` (`negated` false) or `no option NAME` (`negated` true); `ctx.args`
/// starts with `option` or `no`.
pub fn apply(p: &mut ProxyDraft, ctx: &mut Ctx<'_>, negated: bool) -> Result<(), Problem> {
    let first = usize::from(negated) + 1;
    let prefix = if negated { "no option" } else { "option" };
    let name = ctx.need(first, "an option name")?.to_string();
    let args = &ctx.args[first + 1..];
    let Some(opt) = OPTIONS.iter().find(|o| o.name == name) else {
        if UNSUPPORTED.contains(&name.as_str()) {
            return Err(format!(
                "'{prefix} {name}' is a HAProxy keyword that Bascule does not support yet"
            )
            .into());
        }
        let hint = suggest(
            &name,
            OPTIONS
                .iter()
                .map(|o| o.name)
                .chain(UNSUPPORTED.iter().copied()),
        );
        return Err(Problem::with_hint(
            format!("'{prefix}': unknown option '{name}'"),
            hint,
        ));
    };
    if negated && !opt.negatable {
        return Err(format!("'no option {name}': this option cannot be negated").into());
    }
    if !opt.sections.contains(ctx.kind) {
        let side = if opt.sections.contains(super::SectionKind::Frontend) {
            "frontend"
        } else {
            "backend"
        };
        ctx.warn(format!(
            "'{prefix} {name}' ignored because a {} section has no {side} side",
            ctx.kind.word()
        ));
        return Ok(());
    }
    (opt.parse)(p, args, negated).map_err(|e| Problem {
        message: format!("'{prefix} {name}': {}", e.message),
        hint: e.hint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::diag::Span;

    fn draft() -> ProxyDraft {
        ProxyDraft::builtin(Span {
            file_index: 0,
            file: "t".into(),
            line: 1,
        })
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn forwardfor_arguments() {
        let mut p = draft();
        assert_eq!(
            forwardfor(
                &mut p,
                &words("except 127.0.0.0/8 header X-Real-IP if-none"),
                false
            ),
            Ok(())
        );
        let ff = p
            .options
            .forwardfor
            .clone()
            .unwrap_or_else(|| unreachable!());
        assert_eq!(ff.header, "X-Real-IP");
        assert!(ff.if_none);
        assert_eq!(ff.except.map(|e| e.1), Some(8));
        assert!(forwardfor(&mut p, &words("bogus"), false).is_err());
        assert_eq!(forwardfor(&mut p, &[], true), Ok(()));
        assert_eq!(p.options.forwardfor, None);
    }

    #[test]
    fn restrict_hdr_names_takes_one_of_three_words() {
        let mut p = draft();
        assert_eq!(p.options.restrict_hdr_names, HdrNames::Preserve);
        assert_eq!(restrict_hdr_names(&mut p, &words("delete"), false), Ok(()));
        assert_eq!(p.options.restrict_hdr_names, HdrNames::Delete);
        assert_eq!(restrict_hdr_names(&mut p, &words("reject"), false), Ok(()));
        assert_eq!(p.options.restrict_hdr_names, HdrNames::Reject);
        assert!(restrict_hdr_names(&mut p, &[], false).is_err());
        assert!(restrict_hdr_names(&mut p, &words("drop"), false).is_err());
        assert!(restrict_hdr_names(&mut p, &words("delete x"), false).is_err());
        assert_eq!(p.options.restrict_hdr_names, HdrNames::Reject);
    }

    #[test]
    fn redispatch_and_httpchk() {
        let mut p = draft();
        assert_eq!(redispatch(&mut p, &[], false), Ok(()));
        assert_eq!(p.redispatch, Some(-1));
        assert_eq!(redispatch(&mut p, &words("3"), false), Ok(()));
        assert_eq!(p.redispatch, Some(3));
        assert_eq!(redispatch(&mut p, &[], true), Ok(()));
        assert_eq!(p.redispatch, None);
        assert_eq!(
            httpchk(&mut p, &words("GET /health HTTP/1.1"), false),
            Ok(())
        );
        assert_eq!(
            p.options.httpchk.as_ref().map(|c| c.uri.as_str()),
            Some("/health")
        );
        assert_eq!(httpchk(&mut p, &[], false), Ok(()));
        assert_eq!(
            p.options.httpchk.as_ref().map(|c| c.method.as_str()),
            Some("OPTIONS")
        );
    }
}
