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
use crate::tls::params::Version;
use crate::tls::server::{BindSsl, CrtArg, Verify};

/// A bind line's TLS options as read: whether `ssl` was given, and the settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SslBindDraft {
    /// `ssl` on the line: without it the TLS options are an error (HAProxy ignores them).
    pub enabled: bool,
    pub settings: BindSsl,
}

/// Options that only adjust versions and flags, shared by `bind` and
/// `ssl-default-bind-options`. Returns the words consumed, `None` if `opt` is not one.
fn version_option(
    s: &mut BindSsl,
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
    let disable = |s: &mut BindSsl, v: Version| {
        if !s.disabled.contains(&v) {
            s.disabled.push(v);
        }
    };
    Some(match opt {
        "ssl-min-ver" => version(value).map(|v| {
            s.min_ver = Some(v);
            2
        }),
        "ssl-max-ver" => version(value).map(|v| {
            s.max_ver = Some(v);
            2
        }),
        "no-sslv3" => {
            disable(s, Version::Ssl3);
            Ok(1)
        }
        "no-tlsv10" => {
            disable(s, Version::Tls10);
            Ok(1)
        }
        "no-tlsv11" => {
            disable(s, Version::Tls11);
            Ok(1)
        }
        "no-tlsv12" => {
            disable(s, Version::Tls12);
            Ok(1)
        }
        "no-tlsv13" => {
            disable(s, Version::Tls13);
            Ok(1)
        }
        "force-sslv3" | "force-tlsv10" | "force-tlsv11" | "force-tlsv12" | "force-tlsv13" => {
            let v = match opt {
                "force-sslv3" => Version::Ssl3,
                "force-tlsv10" => Version::Tls10,
                "force-tlsv11" => Version::Tls11,
                "force-tlsv12" => Version::Tls12,
                _ => Version::Tls13,
            };
            s.min_ver = Some(v);
            s.max_ver = Some(v);
            Ok(1)
        }
        "no-tls-tickets" => {
            s.no_tls_tickets = true;
            Ok(1)
        }
        "prefer-client-ciphers" => {
            s.prefer_client_ciphers = true;
            Ok(1)
        }
        "strict-sni" => {
            s.strict_sni = true;
            Ok(1)
        }
        _ => return None,
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
    "crl-file",
    "ca-ignore-err",
    "crt-ignore-err",
    "no-tls-tickets",
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
        "crl-file" => need("a CRL file").map(|v| {
            s.crl_file = Some(PathBuf::from(v));
            2
        }),
        "ca-ignore-err" | "crt-ignore-err" => need("a list of error ids or 'all'").map(|v| {
            ctx.warn(format!(
                "'bind': '{opt} {v}' has no effect: rustls reports verification errors by kind, not OpenSSL's ids, and a failed client certificate is refused"
            ));
            2
        }),
        _ => return None,
    })
}

/// What the global TLS keywords set (`ssl-default-bind-*`, `crt-base`, `ca-base`), or `None`
/// when the keyword is not one of them.
pub fn global_keyword(g: &mut GlobalDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let kw = ctx.kw().to_string();
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
        "ssl-default-bind-options" => {
            let mut i = 1;
            while let Some(opt) = ctx.arg(i).map(str::to_string) {
                let value = ctx.arg(i + 1).map(str::to_string);
                match version_option(&mut d.options, &opt, value.as_deref()) {
                    Some(Ok(n)) => i += n,
                    Some(Err(e)) => return Err(format!("'{kw}': {e}").into()),
                    None => {
                        return Err(format!(
                            "'{kw}': option '{opt}' is not supported (expected ssl-min-ver, ssl-max-ver, no-sslv3, no-tlsv1x, force-tlsv1x, no-tls-tickets, prefer-client-ciphers, strict-sni)"
                        )
                        .into())
                    }
                }
            }
            Ok(())
        }
        "tune.ssl.cachesize" => {
            let n = ctx.need(1, "a number of sessions")?;
            let n: usize = n
                .parse()
                .map_err(|_| format!("'{kw}' expects a number of sessions, not '{n}'"))?;
            d.options.session_cache = Some(n);
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
