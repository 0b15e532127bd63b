//! Keywords of proxy sections (`defaults`, `frontend`, `backend`, `listen`): mode, routing,
//! timeouts, limits, balancing, logging, and the entry points of `bind`, `server` and `option`.

use super::http_errors::ErrorLine;
use super::{
    bind, log, option, rules, server, Ctx, Keyword, LogEntry, NameRef, Problem, ProxyDraft,
    Sections,
};
use crate::config::diag::suggest;
use crate::config::model::{Balance, ErrorFile, Mode, Timeouts};
use crate::config::values;

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
    ($name:expr, $sections:expr, warns, $parse:expr, $doc:expr) => {
        Keyword {
            name: $name,
            sections: $sections,
            misplaced_warns: true,
            parse: $parse,
            doc: $doc,
        }
    };
}

/// The proxy keywords.
pub static KEYWORDS: &[Keyword<ProxyDraft>] = &[
    kw!("mode", Sections::PROXIES, mode, "Proxy mode: tcp or http."),
    kw!(
        "stick-table",
        Sections::PROXY_ONLY,
        super::stick::stick_table,
        "The proxy's stick table: stick-table type T [len N] size N [expire T] [nopurge] [store D,...]."
    ),
    kw!(
        "bind",
        Sections::FE_ONLY,
        bind::parse,
        "Listening addresses: bind ADDR[,ADDR...] [options]."
    ),
    kw!(
        "default_backend",
        Sections::FE,
        default_backend,
        "Backend used when no use_backend applies."
    ),
    kw!(
        "use_backend",
        Sections::FE_ONLY,
        rules::use_backend,
        "Route to a backend: use_backend NAME|FMT [if|unless COND]."
    ),
    kw!(
        "use-server",
        Sections::BE_ONLY,
        warns,
        rules::use_server,
        "Route to a server of this backend: use-server NAME [if|unless COND]."
    ),
    kw!(
        "stick",
        Sections::BE,
        warns,
        rules::stick,
        "Server persistence through a stick table: stick match|on|store-request|store-response EXPR [table T] [if|unless COND]."
    ),
    kw!(
        "acl",
        Sections::PROXIES,
        rules::acl,
        "Declare an ACL: acl NAME CRITERION [FLAGS] [OPERATOR] VALUE..."
    ),
    kw!(
        "http-request",
        Sections::PROXIES,
        rules::http_request,
        "An http-request rule: ACTION [ARGS] [if|unless COND]."
    ),
    kw!(
        "http-response",
        Sections::PROXIES,
        rules::http_response,
        "An http-response rule: ACTION [ARGS] [if|unless COND]."
    ),
    kw!(
        "http-after-response",
        Sections::PROXIES,
        rules::http_after_response,
        "An http-after-response rule, also run on generated responses."
    ),
    kw!(
        "tcp-request",
        Sections::PROXIES,
        rules::tcp_request,
        "tcp-request connection|session|content ACTION [if|unless COND], or inspect-delay TIME."
    ),
    kw!(
        "tcp-response",
        Sections::PROXIES,
        rules::tcp_response,
        "tcp-response content ACTION [if|unless COND], or inspect-delay TIME."
    ),
    kw!(
        "redirect",
        Sections::PROXY_ONLY,
        rules::redirect,
        "redirect location|prefix|scheme TARGET [code N] [options] [if|unless COND]."
    ),
    kw!(
        "timeout",
        Sections::PROXIES,
        timeout,
        "Set a timeout: timeout KIND TIME."
    ),
    kw!(
        "backlog",
        Sections::FE,
        backlog,
        "The listen backlog of the proxy's binds that set none (default: its maxconn)."
    ),
    kw!(
        "maxconn",
        Sections::FE,
        warns,
        maxconn,
        "Frontend limit of concurrent connections."
    ),
    kw!(
        "rate-limit",
        Sections::FE,
        warns,
        rate_limit,
        "Pace new sessions: rate-limit sessions N (per second; excess connections wait in the backlog)."
    ),
    kw!(
        "cookie",
        Sections::BE,
        warns,
        super::persist::cookie,
        "Cookie persistence: cookie NAME [rewrite|insert|prefix] [indirect] [nocache] [postonly] [preserve] [httponly] [secure] [domain D]... [maxidle T] [maxlife T] [dynamic] [attr A]..."
    ),
    kw!(
        "dynamic-cookie-key",
        Sections::BE,
        warns,
        super::persist::dynamic_cookie_key,
        "The secret of 'cookie ... dynamic' server cookies."
    ),
    kw!(
        "force-persist",
        Sections::BE_ONLY,
        warns,
        rules::force_persist,
        "Follow the persistence cookie even to a down server: force-persist if|unless COND."
    ),
    kw!(
        "ignore-persist",
        Sections::BE_ONLY,
        warns,
        rules::ignore_persist,
        "Ignore the persistence cookie: ignore-persist if|unless COND."
    ),
    kw!(
        "retries",
        Sections::BE,
        warns,
        retries,
        "Connection retries after a failed attempt."
    ),
    kw!(
        "http-check",
        Sections::BE,
        http_check,
        "HTTP health-check request and expectation: http-check send ... | expect [!] status|string ..."
    ),
    kw!(
        "tcp-check",
        Sections::BE,
        tcp_check,
        "A step of a tcp-check health check: connect [port N] | send S | send-binary HEX | expect [!] string|binary|rstring P."
    ),
    kw!(
        "errorloc",
        Sections::PROXIES,
        errorloc,
        "Answers a generated error CODE with a 302 redirect to URL instead: errorloc CODE URL."
    ),
    kw!(
        "errorloc302",
        Sections::PROXIES,
        errorloc,
        "Answers a generated error CODE with a 302 redirect to URL instead: errorloc302 CODE URL."
    ),
    kw!(
        "errorloc303",
        Sections::PROXIES,
        errorloc,
        "Answers a generated error CODE with a 303 redirect to URL instead: errorloc303 CODE URL."
    ),
    kw!(
        "errorfile",
        Sections::PROXIES,
        errorfile,
        "Replaces a generated error response by a raw HTTP response read from a file."
    ),
    kw!(
        "stats",
        Sections::PROXIES,
        super::stats::stats,
        "The statistics web page: enable, uri, realm, auth, refresh, scope, admin, http-request, hide-version, show-legends, show-node, show-desc."
    ),
    kw!(
        "monitor",
        Sections::FE,
        rules::monitor,
        "monitor fail if|unless COND: a monitor-uri request is answered 503 when COND holds."
    ),
    kw!(
        "monitor-uri",
        Sections::FE,
        monitor_uri,
        "A URI answered 200 by the proxy itself, before any rule and without a log line."
    ),
    kw!(
        "errorfiles",
        Sections::PROXIES,
        errorfiles,
        "Takes error responses from an http-errors section: errorfiles NAME [CODE...]."
    ),
    kw!(
        "http-error",
        Sections::PROXIES,
        http_error,
        "The response for a generated status: http-error status N [content-type T] [default-errorfiles | errorfile F | errorfiles NAME | file F | string S | lf-file F | lf-string FMT] [hdr NAME FMT]..."
    ),
    kw!(
        "persist",
        Sections::BE,
        persist,
        "Sends an RDP connection to the server its broker cookie names: persist rdp-cookie[(NAME)] (NAME defaults to msts)."
    ),
    kw!(
        "hash-type",
        Sections::BE,
        hash_type,
        "Key-to-server mapping for balance source/uri: map-based|consistent|maglev [sdbm|djb2|wt6|crc32|none] [avalanche]."
    ),
    kw!(
        "outlier-ejection",
        Sections::BE,
        outlier_ejection,
        "Bascule extension: eject a server after N consecutive live errors: outlier-ejection consecutive N [ejection-time T] [max-percent P]."
    ),
    kw!(
        "retry-on",
        Sections::BE,
        retry_on,
        "Failures a retry may follow: none, conn-failure, empty-response, junk-response, response-timeout, 0rtt-rejected, 404, 408, 425, 500, 501, 502, 503, 504, all-retryable-errors."
    ),
    kw!(
        "http-reuse",
        Sections::BE,
        http_reuse,
        "Idle server connection sharing: never, safe (default), aggressive or always."
    ),
    kw!(
        "balance",
        Sections::BE,
        balance,
        "Server choice algorithm: roundrobin or static-rr."
    ),
    kw!(
        "option",
        Sections::PROXIES,
        |p, c| option::apply(p, c, false),
        "Turn an option on: option NAME [args]."
    ),
    kw!(
        "no",
        Sections::PROXIES,
        no,
        "Negate a setting: no option NAME, no log."
    ),
    kw!(
        "log",
        Sections::PROXIES,
        log_line,
        "Log target: log global, or log TARGET ... FACILITY [LEVEL]."
    ),
    kw!(
        "log-format",
        Sections::PROXIES,
        log_format,
        "The access-log line: log-format STRING (%ci, %t, %ST, ...)."
    ),
    kw!(
        "log-format-sd",
        Sections::PROXIES,
        log_format_sd,
        "The structured-data part of RFC 5424 log lines: log-format-sd STRING."
    ),
    kw!(
        "log-tag",
        Sections::PROXIES,
        log_tag,
        "The syslog tag of this proxy's lines (else the global log-tag)."
    ),
    kw!(
        "capture",
        Sections::FE_ONLY,
        capture,
        "Log a header: capture request|response header NAME len N (shown by %hr/%hs)."
    ),
    kw!(
        "declare",
        Sections::FE_ONLY,
        declare,
        "A capture slot for http-request/http-response capture ... id N: declare capture request|response len N."
    ),
    kw!(
        "unique-id-format",
        Sections::PROXIES,
        unique_id_format,
        "A unique id per request (%ID): unique-id-format STRING."
    ),
    kw!(
        "unique-id-header",
        Sections::PROXIES,
        unique_id_header,
        "Send the unique id to the server in this request header."
    ),
    kw!(
        "disabled",
        Sections::PROXIES,
        |p, c| {
            p.disabled = true;
            c.no_more(0)
        },
        "Do not start this proxy."
    ),
    kw!(
        "enabled",
        Sections::PROXIES,
        |p, c| {
            p.disabled = false;
            c.no_more(0)
        },
        "Start this proxy (the default)."
    ),
    kw!(
        "description",
        Sections::PROXIES,
        description,
        "Free text describing this proxy."
    ),
    kw!(
        "id",
        Sections::PROXY_ONLY,
        |p, c| {
            let w = c.need(1, "a proxy id (a number above 0)")?;
            let id: u32 = values::number(w, "a proxy id (a number above 0)")?;
            if id == 0 {
                return Err("custom id has to be > 0".into());
            }
            p.id = Some(id);
            c.no_more(1)
        },
        "The proxy's numeric id (iid in show stat): id N."
    ),
    kw!(
        "server",
        Sections::BE_ONLY,
        server::parse,
        "A server: server NAME ADDR:PORT [options]."
    ),
    kw!(
        "default-server",
        Sections::BE,
        server::parse_default,
        "Options the following servers start from."
    ),
    kw!(
        "contimeout",
        Sections::PROXIES,
        |_, _| legacy("contimeout", "timeout connect"),
        "Removed; use 'timeout connect'."
    ),
    kw!(
        "clitimeout",
        Sections::PROXIES,
        |_, _| legacy("clitimeout", "timeout client"),
        "Removed; use 'timeout client'."
    ),
    kw!(
        "srvtimeout",
        Sections::PROXIES,
        |_, _| legacy("srvtimeout", "timeout server"),
        "Removed; use 'timeout server'."
    ),
];

fn legacy(old: &str, new: &str) -> Result<(), Problem> {
    Err(format!("'{old}' was removed from HAProxy (2.1); use '{new}' instead").into())
}

fn mode(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let m = ctx.need(1, "'tcp' or 'http'")?;
    p.mode = match m {
        "tcp" => Mode::Tcp,
        "http" => Mode::Http,
        "health" | "log" | "spop" => {
            return Err(
                format!("'mode {m}' is a HAProxy mode that Bascule does not support yet").into(),
            )
        }
        other => {
            return Err(Problem::with_hint(
                format!("'mode': unknown mode '{other}' (expected tcp or http)"),
                suggest(other, ["tcp", "http"]),
            ))
        }
    };
    ctx.no_more(1)
}

fn name_ref(ctx: &Ctx<'_>) -> Result<NameRef, Problem> {
    let name = ctx.need(1, "a backend name")?;
    Ok(NameRef {
        name: name.to_string(),
        span: ctx.span.clone(),
    })
}

fn default_backend(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    p.default_backend = Some(name_ref(ctx)?);
    ctx.no_more(1)
}

/// Which side of a proxy a timeout belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Front,
    Back,
    Both,
}

type TimeoutSlot = fn(&mut Timeouts) -> &mut Option<std::time::Duration>;

/// The `timeout` kinds: name, side, where the value goes.
static TIMEOUTS: &[(&str, Side, TimeoutSlot)] = &[
    ("connect", Side::Back, |t| &mut t.connect),
    ("client", Side::Front, |t| &mut t.client),
    ("server", Side::Back, |t| &mut t.server),
    ("queue", Side::Back, |t| &mut t.queue),
    ("tunnel", Side::Back, |t| &mut t.tunnel),
    ("http-request", Side::Both, |t| &mut t.http_request),
    ("http-keep-alive", Side::Both, |t| &mut t.http_keep_alive),
    ("check", Side::Back, |t| &mut t.check),
    ("client-fin", Side::Front, |t| &mut t.client_fin),
    ("server-fin", Side::Back, |t| &mut t.server_fin),
    ("tarpit", Side::Both, |t| &mut t.tarpit),
];

/// `timeout` kinds HAProxy has that Bascule does not support yet.
const UNSUPPORTED_TIMEOUTS: &[&str] = &["client-hs"];

fn timeout(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kind = ctx
        .need(1, "a kind (connect, client, server, ...) and a time")?
        .to_string();
    let Some((_, side, slot)) = TIMEOUTS.iter().find(|(n, _, _)| *n == kind) else {
        if UNSUPPORTED_TIMEOUTS.contains(&kind.as_str()) {
            return Err(format!(
                "'timeout {kind}' is a HAProxy keyword that Bascule does not support yet"
            )
            .into());
        }
        let hint = suggest(
            &kind,
            TIMEOUTS
                .iter()
                .map(|t| t.0)
                .chain(UNSUPPORTED_TIMEOUTS.iter().copied()),
        );
        return Err(Problem::with_hint(
            format!("'timeout': unknown timeout kind '{kind}'"),
            hint,
        ));
    };
    let v = ctx.need(2, "a time such as '5s'")?;
    let d = values::timer(v).map_err(|e| format!("'timeout {kind}': {e}"))?;
    ctx.no_more(2)?;
    let misplaced = match side {
        Side::Front => ctx.kind == super::SectionKind::Backend,
        Side::Back => ctx.kind == super::SectionKind::Frontend,
        Side::Both => false,
    };
    if misplaced {
        let missing = if *side == Side::Front {
            "frontend"
        } else {
            "backend"
        };
        ctx.warn(format!(
            "'timeout {kind}' ignored because a {} section has no {missing} side",
            ctx.kind.word()
        ));
        return Ok(());
    }
    *slot(&mut p.timeouts) = Some(d);
    Ok(())
}

fn maxconn(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a positive integer")?;
    p.maxconn = Some(values::positive(v).map_err(|e| format!("'maxconn': {e}"))?);
    ctx.no_more(1)
}

fn backlog(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a number of connections")?;
    p.backlog = Some(values::positive(v).map_err(|e| format!("'backlog': {e}"))?);
    ctx.no_more(1)
}

fn retries(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let v = ctx.need(1, "a number of retries")?;
    p.retries = values::number(v, "a number of retries (0 or more)")
        .map_err(|e| format!("'retries': {e}"))?;
    ctx.no_more(1)
}

fn http_check(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    use crate::config::model::HttpExpect;
    let sub = ctx.need(1, "'send' or 'expect'")?;
    if p.http_check_inherited {
        // A proxy's own `http-check` lines replace the whole check it inherited, request line
        // included: it starts again from `option httpchk`'s default request (HAProxy 2.6).
        p.options.http_check = Default::default();
        if p.options.httpchk.is_some() {
            p.options.httpchk = Some(crate::config::model::HttpCheck {
                method: "OPTIONS".into(),
                uri: "/".into(),
                version: "HTTP/1.0".into(),
            });
        }
        p.http_check_inherited = false;
    }
    let rules = &mut p.options.http_check;
    match sub {
        "send" => {
            let mut i = 2;
            while let Some(word) = ctx.arg(i) {
                let value = |k: usize| {
                    ctx.arg(k)
                        .map(str::to_string)
                        .ok_or_else(|| format!("'http-check send {word}' needs a value"))
                };
                match word {
                    "meth" => rules.method = Some(value(i + 1)?),
                    "uri" => rules.uri = Some(value(i + 1)?),
                    "ver" => rules.version = Some(value(i + 1)?),
                    "body" => rules.body = Some(value(i + 1)?),
                    "hdr" => {
                        let name = value(i + 1)?;
                        let v = ctx
                            .arg(i + 2)
                            .ok_or_else(|| format!("'http-check send hdr {name}' needs a value"))?;
                        rules.headers.push((name, v.to_string()));
                        i += 1;
                    }
                    "uri-lf" | "body-lf" | "comment" => {
                        return Err(format!("'http-check send {word}' is not supported yet").into())
                    }
                    other => {
                        let hint = suggest(other, ["meth", "uri", "ver", "hdr", "body"]);
                        return Err(Problem::with_hint(
                            format!("'http-check send': unknown option '{other}' (expected meth, uri, ver, hdr or body)"),
                            hint,
                        ));
                    }
                }
                i += 2;
            }
            Ok(())
        }
        "expect" => {
            let mut i = 2;
            let negate = ctx.arg(i) == Some("!");
            if negate {
                i += 1;
            }
            let kind = ctx.need(i, "'status' or 'string'")?;
            if kind == "hdr" || kind == "fhdr" {
                let (expect, end) = hdr_expect(ctx, i)?;
                rules
                    .steps
                    .push(crate::config::model::HttpCheckStep::Expect { negate, expect });
                return ctx.no_more(end);
            }
            let pattern = ctx.need(i + 1, "a pattern")?;
            let expect = match kind {
                "status" => {
                    let mut ranges = Vec::new();
                    for part in pattern.split(',') {
                        let (a, b) = part.split_once('-').unwrap_or((part, part));
                        let parse = |x: &str| {
                            x.parse::<u16>()
                                .ok()
                                .filter(|c| (100..=599).contains(c))
                                .ok_or_else(|| format!("'http-check expect status': '{part}' is not a status code or range"))
                        };
                        ranges.push((parse(a)?, parse(b)?));
                    }
                    HttpExpect::Status(ranges)
                }
                "string" => HttpExpect::String(pattern.to_string()),
                "rstatus" | "rstring" => {
                    regex::bytes::Regex::new(pattern).map_err(|e| {
                        format!("'http-check expect {kind}': invalid regular expression: {e}")
                    })?;
                    if kind == "rstatus" {
                        HttpExpect::RStatus(pattern.to_string())
                    } else {
                        HttpExpect::RString(pattern.to_string())
                    }
                }
                "custom" | "string-lf" | "binary-lf" => {
                    return Err(format!("'http-check expect {kind}' is not supported yet (supported: status, string, rstatus, rstring, hdr, fhdr)").into())
                }
                other => {
                    let hint =
                        suggest(other, ["status", "string", "rstatus", "rstring", "hdr", "fhdr"]);
                    return Err(Problem::with_hint(
                        format!("'http-check expect': unknown match '{other}'"),
                        hint,
                    ));
                }
            };
            rules
                .steps
                .push(crate::config::model::HttpCheckStep::Expect { negate, expect });
            ctx.no_more(i + 1)
        }
        _ if sub.starts_with("set-var(")
            || sub.starts_with("set-var-fmt(")
            || sub.starts_with("unset-var(") =>
        {
            // Compiled in the validate stage, with the check's own variables.
            rules.steps.push(crate::config::model::HttpCheckStep::Var {
                words: ctx.args[1..].to_vec(),
                at: ctx.span.to_string(),
            });
            Ok(())
        }
        "disable-on-404" | "send-state" | "connect" | "comment" | "set-var" | "unset-var" => {
            Err(format!("'http-check {sub}' is not supported yet").into())
        }
        other => {
            let hint = suggest(
                other,
                ["send", "expect", "connect", "disable-on-404", "send-state"],
            );
            Err(Problem::with_hint(
                format!("'http-check': unknown action '{other}'"),
                hint,
            ))
        }
    }
}

/// `hdr|fhdr name[-lf] [-m METH] NAME [value[-lf] [-m METH] VALUE]` from word `i` (`hdr`):
/// the expectation, and the index of its last word.
fn hdr_expect(
    ctx: &Ctx<'_>,
    i: usize,
) -> Result<(crate::config::model::HttpExpect, usize), Problem> {
    use crate::config::model::{HdrMatch, HdrPattern, HttpExpect};
    let kind = ctx.args[i].as_str();
    // One pattern: `KW [-m METH] TEXT` from word `j`, `KW` being `base` or `base-lf`.
    let pattern = |j: usize, base: &str| -> Result<Option<(HdrPattern, usize)>, Problem> {
        let Some(word) = ctx.arg(j) else {
            return Ok(None);
        };
        let lf = match word.strip_prefix(base) {
            Some("") => false,
            Some("-lf") => true,
            _ => return Ok(None),
        };
        let (how, at) = if ctx.arg(j + 1) == Some("-m") {
            let m = ctx.need(
                j + 2,
                "a matching method ('str', 'beg', 'end', 'sub' or 'reg')",
            )?;
            let how = match m {
                "str" => HdrMatch::Str,
                "beg" => HdrMatch::Beg,
                "end" => HdrMatch::End,
                "sub" => HdrMatch::Sub,
                "reg" => HdrMatch::Reg,
                other => {
                    return Err(format!("'http-check expect {kind}': '-m' only supports 'str', 'beg', 'end', 'sub' or 'reg' (got '{other}')").into())
                }
            };
            (how, j + 3)
        } else {
            (HdrMatch::Str, j + 1)
        };
        let text = ctx.need(at, "a pattern")?.to_string();
        if how == HdrMatch::Reg {
            if lf {
                return Err(format!("'http-check expect {kind}': log-format string is not supported with a regex matching method").into());
            }
            // As the validate stage compiles it: ASCII-only, names without case.
            regex::bytes::RegexBuilder::new(&text)
                .unicode(false)
                .case_insensitive(base == "name")
                .build()
                .map_err(|e| {
                    format!("'http-check expect {kind}': invalid regular expression: {e}")
                })?;
        }
        Ok(Some((HdrPattern { how, text, lf }, at)))
    };
    let (name, at) = pattern(i + 1, "name")?.ok_or_else(|| {
        format!("'http-check expect {kind}' expects the name keyword as first argument followed by a pattern")
    })?;
    let (value, end) = match pattern(at + 1, "value")? {
        Some((v, end)) => (Some(v), end),
        None => (None, at),
    };
    let full = kind == "fhdr";
    Ok((HttpExpect::Hdr { full, name, value }, end))
}

fn hex_bytes(hex: &str) -> Result<Vec<u8>, String> {
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("'{hex}' is not an even number of hex digits"));
    }
    Ok((0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0))
        .collect())
}

fn tcp_check(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    use crate::config::model::{CheckStatus, CheckText, ExpectReport, TcpCheckStep, TcpExpect};
    let action = ctx.need(1, "connect, send, send-binary, expect or comment")?;
    let step = match action {
        "connect" => {
            let port = match (ctx.arg(2), ctx.arg(3)) {
                (None, _) => None,
                (Some("port"), Some(v)) => {
                    Some(values::port(v).map_err(|e| format!("'tcp-check connect port': {e}"))?)
                }
                (Some(other), _) => {
                    return Err(format!("'tcp-check connect': option '{other}' is not supported yet (supported: port N)").into())
                }
            };
            TcpCheckStep::Connect { port }
        }
        "send" => TcpCheckStep::Send(ctx.need(2, "the string to send")?.as_bytes().to_vec()),
        "send-binary" => TcpCheckStep::Send(
            hex_bytes(ctx.need(2, "hex digits")?)
                .map_err(|e| format!("'tcp-check send-binary': {e}"))?,
        ),
        "expect" => {
            let mut min_recv = None;
            let mut negate = false;
            let mut report = ExpectReport::default();
            // The options, before or after the match (HAProxy reads them in any order).
            let mut options = |i: &mut usize, negate: &mut bool| -> Result<bool, Problem> {
                let word = ctx.arg(*i);
                let status = |w: &str| {
                    CheckStatus::parse(w).ok_or_else(|| {
                        Problem::from(format!(
                            "'tcp-check expect {}': unknown status '{w}' (expected one of L4OK, L4TOUT, L4CON, L6OK, L6TOUT, L6RSP, L7OK, L7OKC, L7TOUT, L7RSP, L7STS)",
                            word.unwrap_or_default()
                        ))
                    })
                };
                match word {
                    Some("min-recv") => {
                        let n = ctx.need(*i + 1, "a number of bytes")?;
                        min_recv = Some(
                            values::number::<usize>(n, "a number of bytes")
                                .map_err(|e| format!("'tcp-check expect min-recv': {e}"))?,
                        );
                    }
                    // HAProxy's labels for the check's log lines; Bascule's say the step.
                    Some("comment") => {
                        ctx.need(*i + 1, "a comment")?;
                    }
                    Some("ok-status") => {
                        let st = status(ctx.need(*i + 1, "a check status")?)?;
                        if !st.passed() {
                            return Err(format!("'tcp-check expect ok-status': '{}' is not a passed status (expected L4OK, L6OK, L7OK or L7OKC)", ctx.args[*i + 1]).into());
                        }
                        report.ok_status = Some(st);
                    }
                    Some("error-status") => {
                        let st = status(ctx.need(*i + 1, "a check status")?)?;
                        if st.passed() {
                            return Err(format!(
                                "'tcp-check expect error-status': '{}' is a passed status",
                                ctx.args[*i + 1]
                            )
                            .into());
                        }
                        report.error_status = Some(st);
                    }
                    Some("tout-status") => {
                        let st = status(ctx.need(*i + 1, "a check status")?)?;
                        if !matches!(
                            st,
                            CheckStatus::L4Tout | CheckStatus::L6Tout | CheckStatus::L7Tout
                        ) {
                            return Err(format!("'tcp-check expect tout-status': '{}' is not a timeout status (expected L4TOUT, L6TOUT or L7TOUT)", ctx.args[*i + 1]).into());
                        }
                        report.tout_status = Some(st);
                    }
                    Some(w @ ("on-success" | "on-error")) => {
                        let text = ctx.need(*i + 1, "a text")?;
                        if text.contains('%') {
                            return Err(format!("'tcp-check expect {w}': log-format texts are not supported yet (a fixed text is)").into());
                        }
                        let text = Some(CheckText::Fixed(text.to_string()));
                        if w == "on-success" {
                            report.on_success = text;
                        } else {
                            report.on_error = text;
                        }
                    }
                    Some("status-code") => {
                        return Err("'tcp-check expect status-code' is not supported yet".into())
                    }
                    Some("!") => {
                        *negate = !*negate;
                        *i += 1;
                        return Ok(true);
                    }
                    _ => return Ok(false),
                }
                *i += 2;
                Ok(true)
            };
            let mut i = 2;
            while options(&mut i, &mut negate)? {}
            // `!rstring` as one word, as HAProxy reads it.
            let word = ctx.need(i, "string, binary, rstring or rbinary")?;
            let kind = match word.strip_prefix('!') {
                Some(k) => {
                    negate = !negate;
                    k
                }
                None => word,
            };
            let pat = ctx.need(i + 1, "a pattern")?;
            let regex = |what: &str| {
                regex::bytes::Regex::new(pat)
                    .map(|_| pat.to_string())
                    .map_err(|e| {
                        format!("'tcp-check expect {what}': invalid regular expression: {e}")
                    })
            };
            let pattern = match kind {
                "string" => TcpExpect::Bytes(pat.as_bytes().to_vec()),
                "binary" => TcpExpect::Bytes(
                    hex_bytes(pat).map_err(|e| format!("'tcp-check expect binary': {e}"))?,
                ),
                "rstring" => TcpExpect::Regex(regex(kind)?),
                "rbinary" => TcpExpect::HexRegex(regex(kind)?),
                "string-lf" | "binary-lf" | "custom" => {
                    return Err(format!("'tcp-check expect {kind}' is not supported yet (supported: string, binary, rstring, rbinary)").into())
                }
                other => {
                    return Err(Problem::with_hint(
                        format!("'tcp-check expect': unknown match '{other}'"),
                        suggest(other, ["string", "binary", "rstring", "rbinary"]),
                    ))
                }
            };
            let mut j = i + 2;
            let mut after_negate = false;
            while options(&mut j, &mut after_negate)? {}
            if after_negate {
                return Err("'tcp-check expect': '!' must come before the match".into());
            }
            ctx.no_more(j - 1)?;
            TcpCheckStep::Expect {
                negate,
                pattern,
                min_recv,
                report,
            }
        }
        "comment" => return Ok(()),
        "send-lf" | "send-binary-lf" | "set-var" | "unset-var" => {
            return Err(format!("'tcp-check {action}' is not supported yet").into())
        }
        other => {
            return Err(Problem::with_hint(
                format!("'tcp-check': unknown action '{other}'"),
                suggest(
                    other,
                    ["connect", "send", "send-binary", "expect", "comment"],
                ),
            ))
        }
    };
    p.options.tcp_check_steps.push(step);
    Ok(())
}

/// Statuses Bascule generates and `errorfile` may replace (HAProxy's list).
const ERRORFILE_CODES: &[u16] = &[
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 414, 425, 429, 431, 500, 501, 502, 503, 504,
];

/// The status of an error response (one of [`ERRORFILE_CODES`]).
fn error_status(code: &str, what: &str) -> Result<u16, Problem> {
    code.parse()
        .ok()
        .filter(|c| ERRORFILE_CODES.contains(c))
        .ok_or_else(|| {
            format!("'{what}': status '{code}' is not one Bascule generates (expected one of {ERRORFILE_CODES:?})").into()
        })
}

/// Reads `errorfile CODE FILE` (a proxy's or an `http-errors` section's line), checked as
/// HAProxy checks it (see [`crate::config::values::raw_http_response`]).
pub(super) fn read_errorfile(ctx: &Ctx<'_>) -> Result<ErrorFile, Problem> {
    let code = ctx.need(1, "an HTTP status code")?;
    let path = ctx.need(2, "the path of a file holding a raw HTTP response")?;
    let status = error_status(code, "errorfile")?;
    let response = std::fs::read(path)
        .map_err(|e| format!("'errorfile {status}': cannot read '{path}': {e}"))?;
    crate::config::values::raw_http_response(&response)
        .map_err(|e| format!("'errorfile {status}': '{path}': {e}"))?;
    Ok(ErrorFile {
        status,
        response,
        reply: None,
    })
}

fn errorfile(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let file = read_errorfile(ctx)?;
    p.errorfiles.push(ErrorLine::File(file));
    ctx.no_more(2)
}

/// `errorloc|errorloc302|errorloc303 CODE URL`: the error page for CODE becomes a redirect to
/// URL, the response HAProxy builds for it (302, or 303 for `errorloc303`).
fn errorloc(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kw = ctx.args[0].as_str();
    let code = ctx.need(1, "an HTTP status code")?;
    let url = ctx.need(2, "a URL to redirect to")?;
    let status = error_status(code, kw)?;
    let line = if kw == "errorloc303" {
        "HTTP/1.1 303 See Other"
    } else {
        "HTTP/1.1 302 Found"
    };
    let response = format!(
        "{line}\r\ncache-control: no-cache\r\ncontent-length: 0\r\nlocation: {url}\r\n\r\n"
    );
    p.errorfiles.push(ErrorLine::File(ErrorFile {
        status,
        response: response.into_bytes(),
        reply: None,
    }));
    ctx.no_more(2)
}

fn monitor_uri(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    // As in HAProxy, the last one wins.
    p.monitor_uri = Some(ctx.need(1, "a URI")?.to_string());
    ctx.no_more(1)
}

fn errorfiles(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx
        .need(1, "the name of an http-errors section")?
        .to_string();
    let codes = ctx.args[2..]
        .iter()
        .map(|c| error_status(c, "errorfiles"))
        .collect::<Result<Vec<u16>, Problem>>()?;
    p.errorfiles.push(ErrorLine::Section {
        name,
        codes: (!codes.is_empty()).then_some(codes),
        span: ctx.span.clone(),
    });
    Ok(())
}

/// `http-error status N ...`: HAProxy's http-reply arguments, for a status Bascule generates.
/// A reply with a fixed body is built once here; one whose body or headers are log-format
/// strings (`lf-string`, `lf-file`, `%` in a `hdr` value) is kept as words and compiled with
/// the proxy's rules (see [`ErrorLine::Format`]), then rendered for each error it answers.
fn http_error(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let mut status = None;
    let mut log_format = false;
    let mut content_type: Option<&str> = None;
    let mut headers: Vec<(&str, &str)> = Vec::new();
    // The reply's source: None until given.
    let mut source: Option<(&str, Option<&str>)> = None;
    let mut i = 1;
    while let Some(w) = ctx.arg(i) {
        match w {
            "status" => {
                status = Some(error_status(
                    ctx.need(i + 1, "a status code")?,
                    "http-error",
                )?);
                i += 2;
            }
            "content-type" => {
                content_type = Some(ctx.need(i + 1, "a content type")?);
                i += 2;
            }
            "hdr" => {
                let name = ctx.need(i + 1, "a header name and a value")?;
                let value = ctx.need(i + 2, "a header name and a value")?;
                log_format |= value.contains('%');
                let lname = name.to_ascii_lowercase();
                if !matches!(
                    lname.as_str(),
                    "content-length" | "transfer-encoding" | "content-type"
                ) {
                    headers.push((name, value));
                }
                i += 3;
            }
            "default-errorfiles" | "errorfile" | "errorfiles" | "file" | "string" | "lf-file"
            | "lf-string" => {
                if let Some((given, _)) = source {
                    return Err(format!(
                        "'http-error': unexpected '{w}' argument, '{given}' already defined"
                    )
                    .into());
                }
                log_format |= w.starts_with("lf-");
                if w == "default-errorfiles" {
                    source = Some((w, None));
                    i += 1;
                } else {
                    source = Some((w, Some(ctx.need(i + 1, "an argument")?)));
                    i += 2;
                }
            }
            other => {
                return Err(Problem::with_hint(
                    format!("'http-error': unknown keyword '{other}'"),
                    suggest(
                        other,
                        [
                            "status",
                            "content-type",
                            "hdr",
                            "default-errorfiles",
                            "errorfile",
                            "errorfiles",
                            "file",
                            "string",
                            "lf-file",
                            "lf-string",
                        ],
                    ),
                ))
            }
        }
    }
    let status = status.ok_or("'http-error' expects at least 'status N'")?;
    if log_format {
        p.errorfiles.push(ErrorLine::Format {
            status,
            words: ctx.args[1..].to_vec(),
            span: ctx.span.clone(),
        });
        return Ok(());
    }
    let line = match source {
        Some(("default-errorfiles", _)) => ErrorLine::Builtin(status),
        Some(("errorfile", Some(path))) => {
            let response = std::fs::read(path)
                .map_err(|e| format!("'http-error': cannot read '{path}': {e}"))?;
            crate::config::values::raw_http_response(&response)
                .map_err(|e| format!("'http-error': '{path}': {e}"))?;
            ErrorLine::File(ErrorFile {
                status,
                response,
                reply: None,
            })
        }
        Some(("errorfiles", Some(name))) => ErrorLine::Section {
            name: name.to_string(),
            codes: Some(vec![status]),
            span: ctx.span.clone(),
        },
        // No source: HAProxy's empty reply (the status line, `hdr` lines, `content-length: 0`).
        None | Some(("file" | "string", _)) => {
            let (kind, arg) = source.map_or(("string", ""), |(k, a)| (k, a.unwrap_or("")));
            let body = if kind == "file" {
                std::fs::read(arg).map_err(|e| format!("'http-error': cannot read '{arg}': {e}"))?
            } else {
                arg.as_bytes().to_vec()
            };
            if !body.is_empty() && content_type.is_none() {
                return Err("'http-error': a content type must be given ('content-type TYPE') with a non-empty body".into());
            }
            if !body.is_empty() && matches!(status, 204 | 304) {
                return Err(
                    format!("'http-error': no body is allowed with status {status}").into(),
                );
            }
            // The response as `http-request return` writes it (see `http::policy`).
            let mut raw =
                format!("HTTP/1.1 {status} {}\r\n", crate::proto::h1::reason(status)).into_bytes();
            for (name, value) in &headers {
                if !value.is_empty() {
                    raw.extend_from_slice(
                        format!("{}: {value}\r\n", name.to_ascii_lowercase()).as_bytes(),
                    );
                }
            }
            raw.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
            if let Some(ct) = content_type.filter(|_| !body.is_empty()) {
                raw.extend_from_slice(format!("content-type: {ct}\r\n").as_bytes());
            }
            raw.extend_from_slice(b"\r\n");
            raw.extend_from_slice(&body);
            ErrorLine::File(ErrorFile {
                status,
                response: raw,
                reply: None,
            })
        }
        Some(_) => return Err("'http-error': missing argument".into()),
    };
    p.errorfiles.push(line);
    Ok(())
}

fn persist(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let Some(how) = ctx.arg(1) else {
        return Err("'persist' expects 'rdp-cookie' option".into());
    };
    let name = match how.strip_prefix("rdp-cookie") {
        Some("") => "msts",
        Some(rest) => rest
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .map(|(n, _)| n)
            .filter(|n| !n.is_empty())
            .ok_or("'persist rdp-cookie(name)' requires an rdp cookie name")?,
        None => {
            return Err(Problem::with_hint(
                format!("'persist': unknown persist method '{how}'"),
                suggest(how, ["rdp-cookie"]),
            ))
        }
    };
    p.rdp_persist = Some(name.to_string());
    ctx.no_more(1)
}

fn hash_type(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    use crate::config::model::{HashFunction, HashMethod, HashType};
    let method = match ctx.need(1, "map-based, consistent or maglev")? {
        "map-based" => HashMethod::MapBased,
        "consistent" => HashMethod::Consistent,
        "maglev" => HashMethod::Maglev,
        other => {
            return Err(Problem::with_hint(
                format!(
                "'hash-type': unknown method '{other}' (expected map-based, consistent or maglev)"
            ),
                suggest(other, ["map-based", "consistent", "maglev"]),
            ))
        }
    };
    let mut t = HashType {
        method,
        ..HashType::default()
    };
    let mut i = 2;
    while let Some(w) = ctx.arg(i) {
        match w {
            "sdbm" => t.function = HashFunction::Sdbm,
            "djb2" => t.function = HashFunction::Djb2,
            "wt6" => t.function = HashFunction::Wt6,
            "crc32" => t.function = HashFunction::Crc32,
            "none" => t.function = HashFunction::None,
            "avalanche" => t.avalanche = true,
            other => {
                return Err(Problem::with_hint(
                    format!("'hash-type': unknown option '{other}' (expected sdbm, djb2, wt6, crc32, none or avalanche)"),
                    suggest(other, ["sdbm", "djb2", "wt6", "crc32", "none", "avalanche"]),
                ))
            }
        }
        i += 1;
    }
    p.hash_type = t;
    Ok(())
}

fn outlier_ejection(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    use crate::config::model::OutlierEjection;
    let mut o = OutlierEjection {
        consecutive: 5,
        ejection_time: std::time::Duration::from_secs(30),
        max_percent: 10,
    };
    let mut i = 1;
    while let Some(w) = ctx.arg(i) {
        let v = ctx.need(i + 1, "a value")?;
        match w {
            "consecutive" => {
                o.consecutive =
                    values::positive(v).map_err(|e| format!("'outlier-ejection consecutive': {e}"))?
            }
            "ejection-time" => {
                o.ejection_time = values::time(v)
                    .map_err(|e| format!("'outlier-ejection ejection-time': {e}"))?
            }
            "max-percent" => {
                o.max_percent = values::number(v, "a percentage")
                    .ok()
                    .filter(|p: &u32| *p <= 100)
                    .ok_or_else(|| format!("'outlier-ejection max-percent' expects 0 to 100, got '{v}'"))?
            }
            other => {
                return Err(Problem::with_hint(
                    format!("'outlier-ejection': unknown option '{other}' (expected consecutive, ejection-time or max-percent)"),
                    suggest(other, ["consecutive", "ejection-time", "max-percent"]),
                ))
            }
        }
        i += 2;
    }
    p.outlier = Some(o);
    Ok(())
}

fn retry_on(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    use crate::config::model::RetryOn;
    ctx.need(1, "one or more failure kinds")?;
    let mut r = RetryOn {
        conn_failure: false,
        ..RetryOn::default()
    };
    let mut i = 1;
    while let Some(w) = ctx.arg(i) {
        match w {
            "none" => {
                r = RetryOn {
                    conn_failure: false,
                    ..RetryOn::default()
                }
            }
            "conn-failure" => r.conn_failure = true,
            "empty-response" => r.empty_response = true,
            "junk-response" => r.junk_response = true,
            "response-timeout" => r.response_timeout = true,
            // Early data needs TLS 1.3, which Bascule does not terminate yet: nothing to retry.
            "0rtt-rejected" => {}
            "all-retryable-errors" => {
                r.conn_failure = true;
                r.empty_response = true;
                r.junk_response = true;
                r.response_timeout = true;
                r.statuses.extend([500, 502, 503, 504]);
            }
            code if matches!(
                code,
                "401" | "403" | "404" | "408" | "425" | "500" | "501" | "502" | "503" | "504"
            ) =>
            {
                r.statuses.push(code.parse().unwrap_or(0));
            }
            other => {
                return Err(Problem::with_hint(
                    format!("'retry-on': unknown failure kind '{other}'"),
                    suggest(
                        other,
                        [
                            "none",
                            "conn-failure",
                            "empty-response",
                            "junk-response",
                            "response-timeout",
                            "0rtt-rejected",
                            "all-retryable-errors",
                        ],
                    ),
                ))
            }
        }
        i += 1;
    }
    p.retry_on = r;
    Ok(())
}

fn http_reuse(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    use crate::config::model::HttpReuse;
    let v = ctx.need(1, "never, safe, aggressive or always")?;
    p.http_reuse = match v {
        "never" => HttpReuse::Never,
        "safe" => HttpReuse::Safe,
        "aggressive" => HttpReuse::Aggressive,
        "always" => HttpReuse::Always,
        other => {
            let hint = suggest(other, ["never", "safe", "aggressive", "always"]);
            return Err(Problem::with_hint(
                format!("'http-reuse': unknown mode '{other}' (expected never, safe, aggressive or always)"),
                hint,
            ));
        }
    };
    ctx.no_more(1)
}

/// Algorithms HAProxy has that Bascule does not support yet (matched before any `(`).
const UNSUPPORTED_BALANCE: &[&str] = &["log-hash", "sticky"];

fn balance(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let algo = ctx.need(1, "an algorithm such as 'roundrobin'")?;
    let base = algo.split('(').next().unwrap_or(algo);
    match base {
        "roundrobin" => p.balance = Balance::RoundRobin,
        "static-rr" => p.balance = Balance::StaticRr,
        "leastconn" => p.balance = Balance::LeastConn,
        "first" => p.balance = Balance::First,
        "url_param" => {
            let name = ctx.need(2, "a query-string parameter name")?;
            if ctx.arg(3).is_some() {
                return Err(format!("'balance url_param {name}': options after the name ('check_post', ...) are not supported yet").into());
            }
            p.balance = Balance::UrlParam {
                name: name.to_string(),
            };
            return Ok(());
        }
        "hdr" => {
            let name = algo
                .strip_prefix("hdr(")
                .and_then(|r| r.strip_suffix(')'))
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("'balance {algo}': expected hdr(<name>)"))?;
            let use_domain_only = match ctx.arg(2) {
                None => false,
                Some("use_domain_only") => true,
                Some(other) => {
                    return Err(format!("'balance hdr': unknown option '{other}' (expected use_domain_only)").into())
                }
            };
            p.balance = Balance::Hdr {
                name: name.to_string(),
                use_domain_only,
            };
            return ctx.no_more(2 + usize::from(use_domain_only));
        }
        "random" => {
            let draws = match algo.strip_prefix("random") {
                Some("") => 2,
                Some(rest) => rest
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("'balance {algo}': expected random or random(N) with N > 0"))?,
                None => 2,
            };
            p.balance = Balance::Random { draws };
        }
        "source" => p.balance = Balance::Source,
        "hash" => {
            let Some(expr) = ctx.arg(2) else {
                return Err("'balance hash' requires a sample expression".into());
            };
            if let Some(extra) = ctx.arg(3) {
                return Err(format!("'balance hash' takes no other argument (got '{extra}')").into());
            }
            p.balance = Balance::Hash {
                expr: expr.to_string(),
                at: ctx.span.clone(),
            };
            return Ok(());
        }
        "rdp-cookie" => {
            let name = match algo.strip_prefix("rdp-cookie") {
                Some("") => "mstshash",
                Some(rest) => rest
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .filter(|n| !n.is_empty())
                    .ok_or("'balance rdp-cookie': missing cookie name (rdp-cookie(NAME))")?,
                None => unreachable!("the algorithm's base is rdp-cookie"),
            };
            p.balance = Balance::RdpCookie {
                name: name.to_string(),
            };
        }
        "uri" => {
            let (mut whole, mut path_only, mut len, mut depth) = (false, false, None, None);
            let mut i = 2;
            while let Some(w) = ctx.arg(i) {
                match w {
                    "whole" => whole = true,
                    "path-only" => path_only = true,
                    "len" | "depth" => {
                        let v = ctx.need(i + 1, "a number")?;
                        let n = values::number(v, "a positive number")
                            .ok()
                            .filter(|n: &u32| *n > 0)
                            .ok_or_else(|| format!("'balance uri {w}' expects a positive number, got '{v}'"))?;
                        if w == "len" {
                            len = Some(n);
                        } else {
                            depth = Some(n);
                        }
                        i += 1;
                    }
                    other => {
                        return Err(Problem::with_hint(
                            format!("'balance uri': unknown option '{other}' (expected whole, path-only, len N or depth N)"),
                            suggest(other, ["whole", "path-only", "len", "depth"]),
                        ))
                    }
                }
                i += 1;
            }
            p.balance = Balance::Uri {
                whole,
                path_only,
                len,
                depth,
            };
            return Ok(());
        }
        _ if UNSUPPORTED_BALANCE.contains(&base) => {
            return Err(format!(
                "'balance {base}' is not supported yet (supported: roundrobin, static-rr, leastconn, first, source, uri, url_param, hdr, random, rdp-cookie, hash)"
            )
            .into())
        }
        other => {
            let hint = suggest(
                other,
                ["roundrobin", "static-rr", "leastconn", "first", "source", "uri", "url_param", "hdr", "random", "rdp-cookie", "hash"]
                    .into_iter()
                    .chain(UNSUPPORTED_BALANCE.iter().copied()),
            );
            return Err(Problem::with_hint(
                format!("'balance': unknown algorithm '{other}'"),
                hint,
            ));
        }
    }
    ctx.no_more(1)
}

fn no(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    match ctx.need(1, "'option NAME' or 'log'")? {
        "option" => option::apply(p, ctx, true),
        "log" => {
            p.logs.clear();
            ctx.no_more(1)
        }
        other => {
            Err(format!("'no {other}': only 'no option NAME' and 'no log' are supported").into())
        }
    }
}

fn log_line(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if ctx.arg(1) == Some("global") {
        p.logs.push(LogEntry::Global);
        return ctx.no_more(1);
    }
    p.logs.push(LogEntry::Target(log::parse_target(ctx)?));
    Ok(())
}

/// The one word of a format keyword. It is compiled in the validate stage, once the names
/// its `%[...]` expressions may refer to (backends, servers, variables) are all known.
fn format_arg(ctx: &Ctx<'_>) -> Result<String, Problem> {
    let f = ctx.need(1, "a format string")?;
    if ctx.args.len() > 2 {
        return Err(format!(
            "'{}' expects one argument (quote the format, or escape its spaces with '\\ ')",
            ctx.kw()
        )
        .into());
    }
    Ok(f.to_string())
}

/// HAProxy accepts the access-log formats in a backend and ignores them: a backend's
/// transactions are logged by their frontend.
fn ignored_in_backend(ctx: &mut Ctx<'_>) {
    if ctx.kind == super::SectionKind::Backend {
        let kw = ctx.kw().to_string();
        ctx.warn(format!("'{kw}' directive is ignored in backends"));
    }
}

fn log_format(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let f = format_arg(ctx)?;
    ignored_in_backend(ctx);
    p.options.log_format = Some(f);
    p.options.format_spans.log_format = Some(ctx.span.clone());
    Ok(())
}

fn log_format_sd(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    p.options.log_format_sd = Some(format_arg(ctx)?);
    ignored_in_backend(ctx);
    p.options.format_spans.log_format_sd = Some(ctx.span.clone());
    Ok(())
}

fn unique_id_format(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    p.options.unique_id_format = Some(format_arg(ctx)?);
    p.options.format_spans.unique_id_format = Some(ctx.span.clone());
    Ok(())
}

fn unique_id_header(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let h = ctx.need(1, "a header name")?;
    p.options.unique_id_header = Some(h.to_string());
    ctx.no_more(1)
}

fn log_tag(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let t = ctx.need(1, "a tag")?;
    p.options.log_tag = Some(t.to_string());
    ctx.no_more(1)
}

/// `declare capture request|response len N`: a capture slot that rules fill (`capture ... id
/// N`), shown by `%hr`/`%hs` with the header captures, in line order.
fn declare(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if ctx.need(1, "'capture'")? != "capture" {
        return Err(format!("'declare {}': only 'declare capture' exists", ctx.args[1]).into());
    }
    let response = match ctx.need(2, "'request' or 'response'")? {
        "request" => false,
        "response" => true,
        other => {
            return Err(
                format!("'declare capture {other}': expected 'request' or 'response'").into(),
            )
        }
    };
    if ctx.need(3, "'len'")? != "len" {
        return Err("'declare capture': expected 'len N'".into());
    }
    let len: usize = values::number(ctx.need(4, "a length")?, "a length")
        .map_err(|e| format!("'declare capture' len: {e}"))?;
    if len == 0 {
        return Err("'declare capture' len: must be at least 1".into());
    }
    ctx.no_more(4)?;
    // No header name: a slot only rules write.
    p.options.captures.push(crate::config::model::Capture {
        response,
        name: String::new(),
        len,
        at: (ctx.span.file_index, ctx.span.line),
    });
    Ok(())
}

fn capture(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let response = match ctx.need(1, "'request' or 'response'")? {
        "request" => false,
        "response" => true,
        "cookie" => return super::persist::capture_cookie(p, ctx),
        other => {
            return Err(format!(
                "'capture {other}': expected 'request header' or 'response header'"
            )
            .into())
        }
    };
    if ctx.need(2, "'header'")? != "header" {
        return Err(format!(
            "'capture {}': only 'header NAME len N' is supported",
            ctx.args[1]
        )
        .into());
    }
    let name = ctx.need(3, "a header name")?.to_string();
    if ctx.need(4, "'len'")? != "len" {
        return Err("'capture': expected 'len N' after the header name".into());
    }
    let len: usize = values::number(ctx.need(5, "a length")?, "a length")
        .map_err(|e| format!("'capture' len: {e}"))?;
    if len == 0 {
        return Err("'capture' len: must be at least 1".into());
    }
    ctx.no_more(5)?;
    p.options.captures.push(crate::config::model::Capture {
        response,
        name,
        len,
        at: (ctx.span.file_index, ctx.span.line),
    });
    Ok(())
}

/// `rate-limit sessions N`.
fn rate_limit(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if ctx.need(1, "'sessions'")? != "sessions" {
        return Err(format!(
            "'rate-limit' only supports 'sessions' (got '{}')",
            ctx.args[1]
        )
        .into());
    }
    let v = ctx.need(2, "a number of sessions per second")?;
    let n: u32 = values::number(v, "a number of sessions per second")
        .map_err(|e| format!("'rate-limit sessions': {e}"))?;
    ctx.no_more(2)?;
    // HAProxy: 0 means no limit.
    p.rate_limit_sessions = (n > 0).then_some(n);
    Ok(())
}

fn description(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.need(1, "some text")?;
    p.description = Some(ctx.args[1..].join(" "));
    Ok(())
}
