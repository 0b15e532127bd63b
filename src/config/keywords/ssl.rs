//! TLS words of the configuration: the `bind` options (`ssl`, `crt`, `crt-list`, `alpn`,
//! `ssl-min-ver`...) and the global defaults they start from (`ssl-default-bind-ciphers`,
//! `ssl-default-bind-options`, `crt-base`...).
//!
//! As in HAProxy, a bind line's own options win over the global defaults, `no-tlsv1x` and the
//! flags of `ssl-default-bind-options` add up, and a relative `crt`/`crt-list` path is taken
//! under `crt-base` (a relative `ca-file`/`crl-file` under `ca-base`). The settings are only
//! read here; the validate stage loads the files and builds the rustls configuration, so that
//! a bad certificate is reported against the bind line that names it.

use std::path::PathBuf;

use super::{Ctx, GlobalDraft, Problem};
use crate::tls::client::{ServerSsl, ServerVerify};
use crate::tls::params::Version;
use crate::tls::server::{BindSsl, CrtArg, Verify};

/// A bind line's TLS options as read: whether `ssl` was given, and the settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SslBindDraft {
    /// `ssl` on the line: without it the TLS options are an error (HAProxy ignores them).
    pub enabled: bool,
    pub settings: BindSsl,
}

/// The version bounds and flags that `bind`, `server` and their global defaults share.
trait VersionFlags {
    fn min_ver(&mut self) -> &mut Option<Version>;
    fn max_ver(&mut self) -> &mut Option<Version>;
    fn disabled(&mut self) -> &mut Vec<Version>;
    fn no_tls_tickets(&mut self) -> &mut bool;
    /// A flag only one side has (`strict-sni`...): `None` when `opt` is not one of them.
    fn own_flag(&mut self, opt: &str) -> Option<()>;
}

impl VersionFlags for BindSsl {
    fn min_ver(&mut self) -> &mut Option<Version> {
        &mut self.min_ver
    }
    fn max_ver(&mut self) -> &mut Option<Version> {
        &mut self.max_ver
    }
    fn disabled(&mut self) -> &mut Vec<Version> {
        &mut self.disabled
    }
    fn no_tls_tickets(&mut self) -> &mut bool {
        &mut self.no_tls_tickets
    }
    fn own_flag(&mut self, opt: &str) -> Option<()> {
        match opt {
            "prefer-client-ciphers" => self.prefer_client_ciphers = true,
            "strict-sni" => self.strict_sni = true,
            _ => return None,
        }
        Some(())
    }
}

impl VersionFlags for ServerSsl {
    fn min_ver(&mut self) -> &mut Option<Version> {
        &mut self.min_ver
    }
    fn max_ver(&mut self) -> &mut Option<Version> {
        &mut self.max_ver
    }
    fn disabled(&mut self) -> &mut Vec<Version> {
        &mut self.disabled
    }
    fn no_tls_tickets(&mut self) -> &mut bool {
        &mut self.no_tls_tickets
    }
    fn own_flag(&mut self, _: &str) -> Option<()> {
        None
    }
}

/// Options that only adjust versions and flags, shared by `bind`, `server` and the global
/// `ssl-default-bind-options`/`ssl-default-server-options`. Returns the words consumed, `None`
/// if `opt` is not one.
/// `ssl-default-bind-options` and `ssl-default-server-options`: every word a version or flag
/// option of `opts`; `expected` lists them for the error.
fn default_options(
    ctx: &mut Ctx<'_>,
    kw: &str,
    opts: &mut impl VersionFlags,
    expected: &str,
) -> Result<(), Problem> {
    let mut i = 1;
    while let Some(opt) = ctx.arg(i).map(str::to_string) {
        let value = ctx.arg(i + 1).map(str::to_string);
        match version_option(opts, &opt, value.as_deref()) {
            Some(Ok(n)) => i += n,
            Some(Err(e)) => return Err(format!("'{kw}': {e}").into()),
            None => {
                return Err(format!(
                    "'{kw}': option '{opt}' is not supported (expected {expected})"
                )
                .into())
            }
        }
    }
    Ok(())
}

fn version_option(
    s: &mut impl VersionFlags,
    opt: &str,
    value: Option<&str>,
) -> Option<Result<usize, String>> {
    let version = |w: Option<&str>| {
        let w =
            w.ok_or_else(|| format!("'{opt}' expects a version (SSLv3, TLSv1.0 .. TLSv1.3)"))?;
        Version::parse(w).ok_or_else(|| {
            format!("'{opt}': unknown version '{w}' (expected SSLv3, TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3)")
        })
    };
    let by_name = |name: &str| match name {
        "sslv3" => Some(Version::Ssl3),
        "tlsv10" => Some(Version::Tls10),
        "tlsv11" => Some(Version::Tls11),
        "tlsv12" => Some(Version::Tls12),
        "tlsv13" => Some(Version::Tls13),
        _ => None,
    };
    if let Some(v) = opt.strip_prefix("no-").and_then(by_name) {
        if !s.disabled().contains(&v) {
            s.disabled().push(v);
        }
        return Some(Ok(1));
    }
    if let Some(v) = opt.strip_prefix("force-").and_then(by_name) {
        *s.min_ver() = Some(v);
        *s.max_ver() = Some(v);
        return Some(Ok(1));
    }
    Some(match opt {
        "ssl-min-ver" => version(value).map(|v| {
            *s.min_ver() = Some(v);
            2
        }),
        "ssl-max-ver" => version(value).map(|v| {
            *s.max_ver() = Some(v);
            2
        }),
        "no-tls-tickets" => {
            *s.no_tls_tickets() = true;
            Ok(1)
        }
        _ => {
            s.own_flag(opt)?;
            Ok(1)
        }
    })
}

/// TLS options of `bind` that Bascule implements, for suggestions.
pub const BIND_OPTIONS: &[&str] = &[
    "ssl",
    "crt",
    "crt-list",
    "alpn",
    "npn",
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
    "ciphers",
    "ciphersuites",
    "curves",
    "ecdhe",
    "strict-sni",
    "verify",
    "ca-file",
    "ca-verify-file",
    "crl-file",
    "ca-ignore-err",
    "crt-ignore-err",
    "no-tls-tickets",
    "tls-ticket-keys",
    "no-ca-names",
    "prefer-client-ciphers",
];

/// Applies one TLS option of a `bind` line. Returns the words consumed, or `None` when `opt`
/// is not a TLS option Bascule implements.
pub fn bind_option(
    draft: &mut SslBindDraft,
    opt: &str,
    value: Option<&str>,
    ctx: &mut Ctx<'_>,
) -> Option<Result<usize, String>> {
    if let Some(r) = version_option(&mut draft.settings, opt, value) {
        return Some(r.map_err(|e| format!("'bind': {e}")));
    }
    let s = &mut draft.settings;
    let need = |what: &str| {
        value
            .map(str::to_string)
            .ok_or_else(|| format!("'bind': option '{opt}' expects {what}"))
    };
    Some(match opt {
        "ssl" => {
            draft.enabled = true;
            Ok(1)
        }
        "crt" => need("a certificate file or directory").map(|v| {
            s.crts.push(CrtArg::Crt(PathBuf::from(v)));
            2
        }),
        "crt-list" => need("a crt-list file").map(|v| {
            s.crts.push(CrtArg::CrtList(PathBuf::from(v)));
            2
        }),
        "alpn" => need("a comma-separated protocol list such as 'h2,http/1.1'").and_then(|v| {
            let list: Vec<Vec<u8>> = v
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| p.as_bytes().to_vec())
                .collect();
            if list.iter().any(|p| p.len() > 255) || list.is_empty() {
                return Err(format!("'bind': 'alpn {v}': protocol names are 1 to 255 bytes"));
            }
            s.alpn = list;
            Ok(2)
        }),
        "npn" => need("a protocol list").map(|v| {
            ctx.warn(format!(
                "'bind': 'npn {v}' ignored: rustls does not implement NPN (obsolete, replaced by ALPN; use 'alpn')"
            ));
            2
        }),
        "ciphers" => need("a cipher list").map(|v| {
            s.ciphers = Some(v);
            2
        }),
        "ciphersuites" => need("a TLS 1.3 cipher suite list").map(|v| {
            s.ciphersuites = Some(v);
            2
        }),
        "curves" | "ecdhe" => need("a curve list").map(|v| {
            s.curves = Some(v);
            2
        }),
        "verify" => need("none, optional or required").and_then(|v| {
            s.verify = match v.as_str() {
                "none" => Verify::None,
                "optional" => Verify::Optional,
                "required" => Verify::Required,
                other => {
                    return Err(format!(
                        "'bind': 'verify': expected none, optional or required, got '{other}'"
                    ))
                }
            };
            Ok(2)
        }),
        "ca-file" => need("a CA file").map(|v| {
            s.ca_file = Some(PathBuf::from(v));
            2
        }),
        "ca-verify-file" => need("a CA file").map(|v| {
            s.ca_verify_file = Some(PathBuf::from(v));
            2
        }),
        "crl-file" => need("a CRL file").map(|v| {
            s.crl_file = Some(PathBuf::from(v));
            2
        }),
        "no-ca-names" => {
            s.no_ca_names = true;
            Ok(1)
        }
        "tls-ticket-keys" => need("a file of base64 ticket keys").map(|v| {
            s.tls_ticket_keys = Some(PathBuf::from(v));
            2
        }),
        "ca-ignore-err" | "crt-ignore-err" => need("a list of error ids or 'all'").and_then(|v| {
            let list = crate::tls::verify::Ignore::parse(opt, &v).map_err(|e| format!("'bind': {e}"))?;
            if opt == "ca-ignore-err" {
                s.ca_ignore_err = list;
            } else {
                s.crt_ignore_err = list;
            }
            Ok(2)
        }),
        _ => return None,
    })
}

/// A server line's TLS options as read, from the `default-server` it starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SslServerDraft {
    /// `ssl` (`no-ssl` undoes it): traffic goes over TLS.
    pub enabled: bool,
    /// HAProxy's `use_ssl`: 1 after `ssl`, -1 after `no-ssl`, 0 when neither was said (what
    /// `show servers state` shows as `srv_use_ssl`).
    pub use_ssl: i8,
    /// `no-ssl` undid an `ssl` (of the `default-server`): the TLS settings are built anyway,
    /// so that `set server ... ssl on` can turn them on at run time, as in HAProxy.
    pub prepared: bool,
    /// `check-ssl` (`no-check-ssl` undoes it): checks go over TLS.
    pub check_ssl: bool,
    pub settings: ServerSsl,
    /// `sni EXPR`, compiled by the validate stage.
    pub sni: Option<String>,
    pub check_sni: Option<String>,
    pub check_alpn: Option<Vec<Vec<u8>>>,
}

/// TLS options of `server` and `default-server` that Bascule implements, with their arity.
pub const SERVER_OPTIONS: &[(&str, usize)] = &[
    ("ssl", 0),
    ("no-ssl", 0),
    ("check-ssl", 0),
    ("no-check-ssl", 0),
    ("verify", 1),
    ("verifyhost", 1),
    ("no-verifyhost", 0),
    ("ca-file", 1),
    ("crl-file", 1),
    ("crt", 1),
    ("sni", 1),
    ("check-sni", 1),
    ("alpn", 1),
    ("check-alpn", 1),
    ("ssl-reuse", 0),
    ("no-ssl-reuse", 0),
    ("ssl-min-ver", 1),
    ("ssl-max-ver", 1),
    ("no-sslv3", 0),
    ("no-tlsv10", 0),
    ("no-tlsv11", 0),
    ("no-tlsv12", 0),
    ("no-tlsv13", 0),
    ("force-sslv3", 0),
    ("force-tlsv10", 0),
    ("force-tlsv11", 0),
    ("force-tlsv12", 0),
    ("force-tlsv13", 0),
    ("no-tls-tickets", 0),
    ("tls-tickets", 0),
    ("ciphers", 1),
    ("ciphersuites", 1),
    ("curves", 1),
    ("npn", 1),
];

/// A comma-separated ALPN list (`h2,http/1.1`).
fn alpn_list(v: &str) -> Result<Vec<Vec<u8>>, String> {
    let list: Vec<Vec<u8>> = v
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.as_bytes().to_vec())
        .collect();
    if list.iter().any(|p| p.len() > 255) || list.is_empty() {
        return Err(format!("'alpn {v}': protocol names are 1 to 255 bytes"));
    }
    Ok(list)
}

/// Applies one TLS option of a `server` or `default-server` line (one of [`SERVER_OPTIONS`]);
/// `value` is the next word. Returns a warning to report, if any.
pub fn server_option(
    d: &mut SslServerDraft,
    opt: &str,
    value: Option<&str>,
) -> Result<Option<String>, String> {
    if let Some(r) = version_option(&mut d.settings, opt, value) {
        return r.map(|_| None);
    }
    let need = |what: &str| value.ok_or_else(|| format!("option '{opt}' expects {what}"));
    let s = &mut d.settings;
    match opt {
        "ssl" => {
            d.enabled = true;
            d.use_ssl = 1;
        }
        "no-ssl" => {
            d.prepared |= d.use_ssl == 1;
            d.enabled = false;
            d.use_ssl = -1;
        }
        "check-ssl" => d.check_ssl = true,
        "no-check-ssl" => d.check_ssl = false,
        "verify" => {
            s.verify = Some(match need("none or required")? {
                "none" => ServerVerify::None,
                "required" => ServerVerify::Required,
                other => {
                    return Err(format!(
                        "'verify': expected none or required, got '{other}'"
                    ))
                }
            })
        }
        "verifyhost" => s.verifyhost = Some(need("a host name")?.to_string()),
        "no-verifyhost" => s.verifyhost = None,
        "ca-file" => s.ca_file = Some(PathBuf::from(need("a CA file")?)),
        "crl-file" => s.crl_file = Some(PathBuf::from(need("a CRL file")?)),
        "crt" => s.crt = Some(PathBuf::from(need("a certificate file")?)),
        "sni" => d.sni = Some(need("a sample expression such as 'req.hdr(host)'")?.to_string()),
        "check-sni" => d.check_sni = Some(need("a server name")?.to_string()),
        "alpn" => s.alpn = alpn_list(need("a protocol list such as 'http/1.1'")?)?,
        "check-alpn" => {
            d.check_alpn = Some(alpn_list(need("a protocol list such as 'http/1.1'")?)?)
        }
        "ssl-reuse" => s.no_ssl_reuse = false,
        "no-ssl-reuse" => s.no_ssl_reuse = true,
        "tls-tickets" => s.no_tls_tickets = false,
        "ciphers" => s.ciphers = Some(need("a cipher list")?.to_string()),
        "ciphersuites" => s.ciphersuites = Some(need("a TLS 1.3 cipher suite list")?.to_string()),
        "curves" => s.curves = Some(need("a curve list")?.to_string()),
        "npn" => {
            return Ok(Some(format!(
                "'npn {}' ignored: rustls does not implement NPN (obsolete, replaced by ALPN; use 'alpn')",
                need("a protocol list")?
            )))
        }
        _ => return Err(format!("unknown option '{opt}'")),
    }
    Ok(None)
}

/// Said of `ssl-dh-param-file` and `tune.ssl.default-dh-param`.
const DHE_WARNING: &str = "DHE cipher suites cannot be offered (rustls implements no finite-field Diffie-Hellman): TLS 1.2 clients that offer no ECDHE suite are refused";

/// What the global TLS keywords set (`ssl-default-bind-*`, `crt-base`, `ca-base`), or `None`
/// when the keyword is not one of them.
pub fn global_keyword(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kw = ctx.kw().to_string();
    if kw.starts_with("ssl-default-server-") || kw == "ssl-server-verify" {
        return server_global(g, ctx, &kw);
    }
    let d = std::sync::Arc::make_mut(&mut g.global.ssl);
    match kw.as_str() {
        "ssl-default-bind-ciphers" => {
            d.ciphers = Some(ctx.need(1, "a cipher list")?.to_string());
            ctx.no_more(1)
        }
        "ssl-default-bind-ciphersuites" => {
            d.ciphersuites = Some(ctx.need(1, "a TLS 1.3 cipher suite list")?.to_string());
            ctx.no_more(1)
        }
        "ssl-default-bind-curves" => {
            d.curves = Some(ctx.need(1, "a curve list")?.to_string());
            ctx.no_more(1)
        }
        "ssl-default-bind-options" => default_options(
            ctx,
            &kw,
            &mut d.options,
            "ssl-min-ver, ssl-max-ver, no-sslv3, no-tlsv1x, force-tlsv1x, no-tls-tickets, prefer-client-ciphers, strict-sni",
        ),
        "tune.ssl.cachesize" => {
            let n = ctx.need(1, "a number of sessions")?;
            let n: usize = n
                .parse()
                .map_err(|_| format!("'{kw}' expects a number of sessions, not '{n}'"))?;
            d.options.session_cache = Some(n);
            ctx.no_more(1)
        }
        "tune.ssl.keylog" => {
            d.options.keylog = match ctx.need(1, "'on' or 'off'")? {
                "on" => true,
                "off" => false,
                other => return Err(format!("'{kw}' expects 'on' or 'off', not '{other}'").into()),
            };
            ctx.no_more(1)
        }
        "tune.ssl.capture-buffer-size" | "tune.ssl.capture-cipherlist-size" => {
            let n = ctx.need(1, "a size in bytes")?;
            d.options.capture = n
                .parse()
                .map_err(|_| format!("'{kw}' expects a size in bytes, not '{n}'"))?;
            ctx.no_more(1)
        }
        "tune.ssl.maxrecord" | "tune.ssl.hard-maxrecord" => {
            let n = ctx.need(1, "a record size in bytes")?;
            let n: usize = n
                .parse()
                .map_err(|_| format!("'{kw}' expects a size in bytes, not '{n}'"))?;
            // 0 is HAProxy's "no limit"; rustls takes 32 to 16384 bytes of payload.
            d.options.max_record = match n {
                0 => None,
                32..=16384 => Some(n),
                _ => return Err(format!("'{kw}': {n} is out of range (0, or 32 to 16384)").into()),
            };
            ctx.no_more(1)
        }
        "ssl-load-extra-files" | "ssl-load-extra-del-ext" => {
            let mut extra = d.options.extra;
            if kw == "ssl-load-extra-del-ext" {
                extra.del_ext = true;
                ctx.no_more(0)?;
            } else {
                let mut words = Vec::new();
                while let Some(w) = ctx.arg(words.len() + 1) {
                    words.push(w.to_string());
                }
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                extra.parse_files(&words)?;
            }
            d.options.extra = extra;
            std::sync::Arc::make_mut(&mut g.global.ssl_server)
                .options
                .extra = extra;
            Ok(())
        }
        // HAProxy's checks and words (cfgparse-ssl.c); what the parameters would enable is
        // refused where a bind names DHE suites (see `tls::dh`).
        "ssl-dh-param-file" => {
            let path = match ctx.arg(1) {
                Some(p) if !p.is_empty() => p.to_string(),
                _ => return Err(format!("'{kw}' expects a file path as an argument.").into()),
            };
            ctx.no_more(1)?;
            crate::tls::dh::read(std::path::Path::new(&path)).map_err(|e| {
                format!("'{kw}': unable to load DH parameters from file <{path}> ({e}).")
            })?;
            d.options.dh = Some(format!("'{kw} {path}'"));
            ctx.warn(format!("'{kw}': {DHE_WARNING}"));
            Ok(())
        }
        "tune.ssl.default-dh-param" => {
            let v = match ctx.arg(1) {
                Some(v) if !v.is_empty() => v,
                _ => return Err(format!("'{kw}' expects an integer argument.").into()),
            };
            let n = crate::tls::dh::atoi(v);
            ctx.no_more(1)?;
            if n < 1024 {
                return Err(format!("'{kw}' expects a value >= 1024.").into());
            }
            // HAProxy uses a DH file (global or a certificate's) before this size.
            if d.options.dh.is_none() {
                d.options.dh = Some(format!("'{kw} {n}'"));
            }
            ctx.warn(format!("'{kw}': {DHE_WARNING}"));
            Ok(())
        }
        "crt-base" => {
            d.crt_base = Some(PathBuf::from(ctx.need(1, "a directory")?));
            ctx.no_more(1)
        }
        "ca-base" => {
            d.ca_base = Some(PathBuf::from(ctx.need(1, "a directory")?));
            ctx.no_more(1)
        }
        _ => Err(format!("'{kw}' is a HAProxy keyword that Bascule does not support yet").into()),
    }
}

/// `ssl-default-server-ciphers|-ciphersuites|-options` and `ssl-server-verify`.
fn server_global(g: &mut GlobalDraft, ctx: &mut Ctx<'_>, kw: &str) -> Result<(), Problem> {
    let d = std::sync::Arc::make_mut(&mut g.global.ssl_server);
    match kw {
        "ssl-default-server-ciphers" => {
            d.ciphers = Some(ctx.need(1, "a cipher list")?.to_string());
            ctx.no_more(1)
        }
        "ssl-default-server-ciphersuites" => {
            d.ciphersuites = Some(ctx.need(1, "a TLS 1.3 cipher suite list")?.to_string());
            ctx.no_more(1)
        }
        "ssl-server-verify" => {
            d.verify = Some(match ctx.need(1, "none or required")? {
                "none" => ServerVerify::None,
                "required" => ServerVerify::Required,
                other => {
                    return Err(format!("'{kw}': expected none or required, got '{other}'").into())
                }
            });
            ctx.no_more(1)
        }
        _ => default_options(
            ctx,
            kw,
            &mut d.options,
            "ssl-min-ver, ssl-max-ver, no-sslv3, no-tlsv1x, force-tlsv1x, no-tls-tickets",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(d: &mut SslServerDraft, words: &[&str]) {
        let mut i = 0;
        while i < words.len() {
            let (_, arity) = SERVER_OPTIONS.iter().find(|(n, _)| *n == words[i]).unwrap();
            server_option(d, words[i], words.get(i + 1).copied()).unwrap();
            i += 1 + arity;
        }
    }

    #[test]
    fn server_options_start_from_default_server_and_undo_it() {
        let mut d = SslServerDraft::default();
        apply(
            &mut d,
            &[
                "ssl",
                "verify",
                "none",
                "verifyhost",
                "h",
                "no-ssl-reuse",
                "no-tlsv12",
                "alpn",
                "h2,http/1.1",
                "sni",
                "req.hdr(host)",
            ],
        );
        // A server line inherits it, then undoes parts.
        let mut s = d.clone();
        apply(
            &mut s,
            &[
                "no-ssl",
                "no-verifyhost",
                "ssl-reuse",
                "check-ssl",
                "force-tlsv13",
            ],
        );
        assert!(!s.enabled && s.check_ssl);
        assert_eq!(s.settings.verify, Some(ServerVerify::None));
        assert_eq!(s.settings.verifyhost, None);
        assert!(!s.settings.no_ssl_reuse);
        assert_eq!(s.settings.disabled, [Version::Tls12]);
        assert_eq!(s.settings.min_ver, Some(Version::Tls13));
        assert_eq!(s.settings.alpn, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert_eq!(s.sni.as_deref(), Some("req.hdr(host)"));
        assert!(server_option(&mut s, "verify", Some("optional")).is_err());
        assert!(server_option(&mut s, "alpn", Some(",")).is_err());
        assert!(server_option(&mut s, "ssl-min-ver", Some("TLSv9")).is_err());
    }
}
