//! `crt-list` files: `CRTFILE [[SSLOPTIONS...]] [[!]SNIFILTER...]` per line.
//!
//! A line's options (HAProxy's `sslbindconf`) override the bind line's for handshakes that
//! pick the line's certificate: `alpn`, `ssl-min-ver`/`ssl-max-ver`, `ciphers`,
//! `ciphersuites`, `curves` (`ecdhe`), `verify` with `ca-file`/`ca-verify-file`/`crl-file`,
//! `no-ca-names`, and `npn` (accepted and ignored, as on a bind line). Such a line gets a
//! rustls configuration of its own, chosen from the ClientHello (see
//! `server::Built::config_for`). `allow-0rtt` is accepted without effect (no early data:
//! clients send their request after the handshake). Options Bascule cannot honour
//! (`sigalgs`, `client-sigalgs`, `ocsp-update`) are errors naming the file and line.

use std::path::{Path, PathBuf};

use super::params::Version;
use super::server::Verify;

/// The SSL options of one `crt-list` line; `None`: the bind line's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineSsl {
    pub alpn: Option<Vec<Vec<u8>>>,
    pub min_ver: Option<Version>,
    pub max_ver: Option<Version>,
    pub ciphers: Option<String>,
    pub ciphersuites: Option<String>,
    pub curves: Option<String>,
    pub verify: Option<Verify>,
    pub ca_file: Option<PathBuf>,
    pub crl_file: Option<PathBuf>,
    pub no_ca_names: bool,
    /// `allow-0rtt`: accepted, without effect (Bascule takes no TLS 1.3 early data: a client
    /// sends its request after the handshake instead).
    pub allow_0rtt: bool,
    /// `ca-verify-file`: CAs that check client certificates without being named.
    pub ca_verify_file: Option<PathBuf>,
}

impl LineSsl {
    /// The options as `show ssl crt-list` prints them: HAProxy's order and words.
    pub fn show(&self) -> String {
        let mut w: Vec<String> = Vec::new();
        if let Some(a) = &self.alpn {
            let list: Vec<String> = a
                .iter()
                .map(|p| String::from_utf8_lossy(p).into())
                .collect();
            w.push(format!("alpn {}", list.join(",")));
        }
        match self.verify {
            Some(Verify::None) => w.push("verify none".into()),
            Some(Verify::Optional) => w.push("verify optional".into()),
            Some(Verify::Required) => w.push("verify required".into()),
            None => {}
        }
        if self.no_ca_names {
            w.push("no-ca-names".into());
        }
        if self.allow_0rtt {
            w.push("allow-0rtt".into());
        }
        if let Some(f) = &self.ca_file {
            w.push(format!("ca-file {}", f.display()));
        }
        if let Some(f) = &self.ca_verify_file {
            w.push(format!("ca-verify-file {}", f.display()));
        }
        if let Some(f) = &self.crl_file {
            w.push(format!("crl-file {}", f.display()));
        }
        for (name, v) in [
            ("ciphers", &self.ciphers),
            ("ciphersuites", &self.ciphersuites),
            ("curves", &self.curves),
        ] {
            if let Some(v) = v {
                w.push(format!("{name} {v}"));
            }
        }
        if let Some(v) = self.min_ver {
            w.push(format!("ssl-min-ver {}", v.name()));
        }
        if let Some(v) = self.max_ver {
            w.push(format!("ssl-max-ver {}", v.name()));
        }
        format!("[{}]", w.join(" "))
    }
}

/// One line of a `crt-list` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrtListLine {
    pub crt: PathBuf,
    pub filters: Vec<String>,
    /// The line's own SSL options, if it has any (`[]` is none).
    pub ssl: Option<LineSsl>,
    /// `crt-list 'FILE' line N`, for errors about the line.
    pub at: String,
    /// The line's number in its file (`show ssl crt-list -n`).
    pub line: usize,
    /// Warnings about the line (`npn`).
    pub warnings: Vec<String>,
}

/// Reads a `crt-list` file; errors name the file and the line. A relative certificate is
/// under `crt_base` (`crt-base`) as in HAProxy; without one, relative to the working directory,
/// or else to the list's directory.
pub fn read(path: &Path, crt_base: Option<&Path>) -> Result<Vec<CrtListLine>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("unable to load crt-list '{shown}': {e}"))?;
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("crt-list '{shown}' line {}", n + 1);
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut parsed = parse_line(line, &at, crt_base, Some(dir))?;
        parsed.line = n + 1;
        out.push(parsed);
    }
    if out.is_empty() {
        return Err(format!("crt-list '{shown}' holds no certificate"));
    }
    Ok(out)
}

/// One line (not empty, not a comment): `at` names it in errors. A relative certificate is
/// under `crt_base`, else relative to the working directory, or else to `dir`.
pub fn parse_line(
    line: &str,
    at: &str,
    crt_base: Option<&Path>,
    dir: Option<&Path>,
) -> Result<CrtListLine, String> {
    let (crt, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim_start();
    let (opts, filters) = match rest.strip_prefix('[') {
        Some(r) => match r.split_once(']') {
            Some((o, f)) => (Some(o), f),
            None => return Err(format!("{at}: '[' without its closing ']'")),
        },
        None => (None, rest),
    };
    let mut warnings = Vec::new();
    let ssl = match opts {
        Some(o) => options(o, &mut warnings).map_err(|e| format!("{at}: {e}"))?,
        None => None,
    };
    let crt_path = Path::new(crt);
    let crt = match (crt_base, dir) {
        (Some(base), _) if crt_path.is_relative() => base.join(crt_path),
        (None, Some(dir)) if crt_path.is_relative() && !crt_path.exists() => dir.join(crt_path),
        _ => crt_path.to_path_buf(),
    };
    Ok(CrtListLine {
        crt,
        filters: filters.split_whitespace().map(str::to_string).collect(),
        ssl,
        at: at.to_string(),
        line: 0,
        warnings,
    })
}

/// Parses the words between `[` and `]`; `None` when there are none.
fn options(text: &str, warnings: &mut Vec<String>) -> Result<Option<LineSsl>, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return Ok(None);
    }
    let mut s = LineSsl::default();
    let mut i = 0;
    while i < words.len() {
        let opt = words[i];
        let value = words.get(i + 1).copied();
        let need = |what: &str| value.ok_or_else(|| format!("'{opt}' expects {what}"));
        let version = || {
            let w = need("a version (TLSv1.2, TLSv1.3...)")?;
            Version::parse(w).ok_or_else(|| {
                format!("'{opt}': unknown version '{w}' (expected SSLv3, TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3)")
            })
        };
        let mut used = 2;
        match opt {
            "alpn" => {
                let v = need("a comma-separated protocol list such as 'h2,http/1.1'")?;
                let list: Vec<Vec<u8>> = v
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(|p| p.as_bytes().to_vec())
                    .collect();
                if list.is_empty() || list.iter().any(|p| p.len() > 255) {
                    return Err(format!("'alpn {v}': protocol names are 1 to 255 bytes"));
                }
                s.alpn = Some(list);
            }
            "ssl-min-ver" => s.min_ver = Some(version()?),
            "ssl-max-ver" => s.max_ver = Some(version()?),
            "ciphers" => s.ciphers = Some(need("a cipher list")?.to_string()),
            "ciphersuites" => {
                s.ciphersuites = Some(need("a TLS 1.3 cipher suite list")?.to_string())
            }
            "curves" | "ecdhe" => s.curves = Some(need("a curve list")?.to_string()),
            "verify" => {
                s.verify = Some(match need("none, optional or required")? {
                    "none" => Verify::None,
                    "optional" => Verify::Optional,
                    "required" => Verify::Required,
                    other => {
                        return Err(format!(
                            "'verify': expected none, optional or required, got '{other}'"
                        ))
                    }
                })
            }
            "ca-file" => s.ca_file = Some(PathBuf::from(need("a CA file")?)),
            "crl-file" => s.crl_file = Some(PathBuf::from(need("a CRL file")?)),
            "no-ca-names" => {
                s.no_ca_names = true;
                used = 1;
            }
            "npn" => warnings.push(format!(
                "'npn {}' ignored: rustls does not implement NPN (obsolete, replaced by ALPN; use 'alpn')",
                need("a protocol list")?
            )),
            "ocsp-update" => {
                return Err(
                    "'ocsp-update': Bascule does not staple OCSP responses (rustls is given none)"
                        .into(),
                )
            }
            "allow-0rtt" => {
                s.allow_0rtt = true;
                used = 1;
            }
            "ca-verify-file" => {
                s.ca_verify_file = Some(PathBuf::from(need("a CA file")?));
            }
            "sigalgs" | "client-sigalgs" => {
                return Err(format!(
                    "'{opt}' is not supported (as on a bind line); set the options Bascule implements: alpn, ssl-min-ver, ssl-max-ver, ciphers, ciphersuites, curves, verify, ca-file, crl-file, no-ca-names"
                ))
            }
            other => {
                return Err(format!(
                    "unknown SSL option '{other}' (a crt-list line takes alpn, ssl-min-ver, ssl-max-ver, ciphers, ciphersuites, curves, ecdhe, verify, ca-file, crl-file, no-ca-names, npn)"
                ))
            }
        }
        i += used;
    }
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(text: &str) -> Result<Option<LineSsl>, String> {
        options(text, &mut Vec::new())
    }

    #[test]
    fn options_parse_and_refuse_with_reasons() {
        assert_eq!(opts(" ").unwrap(), None);
        let s = opts("alpn h2,http/1.1 ssl-min-ver TLSv1.3 verify required ca-file ca.pem no-ca-names ecdhe X25519")
            .unwrap()
            .unwrap();
        assert_eq!(s.alpn, Some(vec![b"h2".to_vec(), b"http/1.1".to_vec()]));
        assert_eq!(s.min_ver, Some(Version::Tls13));
        assert_eq!(s.verify, Some(Verify::Required));
        assert_eq!(s.ca_file, Some(PathBuf::from("ca.pem")));
        assert!(s.no_ca_names);
        assert_eq!(s.curves.as_deref(), Some("X25519"));
        assert!(opts("ocsp-update on").unwrap_err().contains("OCSP"));
        assert!(opts("sigalgs RSA+SHA256")
            .unwrap_err()
            .contains("not supported"));
        assert!(opts("alpn").unwrap_err().contains("expects"));
        assert!(opts("ssl-min-ver TLSv9").unwrap_err().contains("TLSv9"));
        assert!(opts("bogus")
            .unwrap_err()
            .contains("unknown SSL option 'bogus'"));
        let mut w = Vec::new();
        assert!(options("npn h2", &mut w).unwrap().is_some());
        assert_eq!(w.len(), 1);
    }
}
