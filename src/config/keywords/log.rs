//! The `log` line shared by `global` and proxy sections:
//! `log <target> [len N] [format F] [sample R:S] <facility> [<level> [<minlevel>]]`.
//!
//! It lives apart from both sections because both parse it the same way; `log global` and
//! `no log` only exist in proxies and are handled there.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{Ctx, Problem};
use crate::config::diag::suggest;
use crate::config::model::{LogAddress, LogTarget};
use crate::config::values;

/// Syslog facilities, in their numeric order.
pub const FACILITIES: &[&str] = &[
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
    "ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

/// Syslog levels, from the most to the least severe.
pub const LEVELS: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// Log formats HAProxy knows.
pub const FORMATS: &[&str] = &[
    "rfc3164", "rfc5424", "short", "raw", "iso", "timed", "priority", "local",
];

/// Parses a log target word.
fn address(word: &str) -> Result<LogAddress, String> {
    match word {
        "stdout" => return Ok(LogAddress::Stdout),
        "stderr" => return Ok(LogAddress::Stderr),
        _ => {}
    }
    if let Some(path) = word.strip_prefix("unix@") {
        return Ok(LogAddress::Unix(PathBuf::from(path)));
    }
    if word.starts_with('/') {
        return Ok(LogAddress::Unix(PathBuf::from(word)));
    }
    match values::socket_prefix(word)? {
        Some(values::SocketPrefix::Abns(name)) => return Ok(LogAddress::Abns(name)),
        // As in HAProxy, `stdout` and `stderr` are `fd@1` and `fd@2`.
        Some(values::SocketPrefix::Fd(1)) => return Ok(LogAddress::Stdout),
        Some(values::SocketPrefix::Fd(2)) => return Ok(LogAddress::Stderr),
        Some(values::SocketPrefix::Fd(n)) => return Ok(LogAddress::Fd(n)),
        _ => {}
    }
    let (family, rest) = if let Some(r) = word.strip_prefix("udp@") {
        (values::Family::Any, r)
    } else if let Some(r) = word.strip_prefix("udp4@") {
        (values::Family::V4, r)
    } else if let Some(r) = word.strip_prefix("udp6@") {
        (values::Family::V6, r)
    } else {
        if let Some(name) = word.strip_prefix("ring@") {
            return Ok(LogAddress::Ring(name.to_string()));
        }
        for p in ["tcp@", "tcp4@", "tcp6@", "backend@"] {
            if word.starts_with(p) {
                return Err(format!(
                    "log target '{word}': '{p}' targets are not supported yet (use stdout, stderr, a UDP address or a UNIX socket path)"
                ));
            }
        }
        (values::Family::Any, word)
    };
    let hp = values::split_host_port(rest)?;
    let family = match (family, hp.family) {
        (values::Family::Any, f) => f,
        (f, _) => f,
    };
    // No port, or an empty one (`log :`, what `${ADDR}:${PORT}` gives with both unset): the
    // syslog port, as HAProxy takes it.
    let port = match hp.port {
        None | Some("") => 514,
        Some(p) => values::port(p)?,
    };
    let ip = values::resolve_host(hp.host, family)?;
    Ok(LogAddress::Udp(SocketAddr::new(ip, port)))
}

/// Parses the words after `log` (index 1 on) into a target.
pub fn parse_target(ctx: &Ctx<'_>) -> Result<LogTarget, Problem> {
    let target = ctx.need(
        1,
        "a target (stdout, stderr, an address or a UNIX socket path)",
    )?;
    let address = address(target).map_err(|e| format!("'log': {e}"))?;
    let mut t = LogTarget {
        address,
        len: None,
        format: "rfc3164".to_string(),
        facility: String::new(),
        level: None,
        minlevel: None,
        sample: None,
    };
    let mut i = 2;
    loop {
        match ctx.arg(i) {
            Some("len") => {
                let v = ctx.need(i + 1, "a message length")?;
                let n: usize =
                    values::number(v, "a message length").map_err(|e| format!("'log' len: {e}"))?;
                if !(80..=65535).contains(&n) {
                    return Err(format!("'log' len: must be between 80 and 65535, got {n}").into());
                }
                t.len = Some(n);
                i += 2;
            }
            Some("format") => {
                let v = ctx.need(i + 1, "a log format")?;
                if !FORMATS.contains(&v) {
                    let hint = suggest(v, FORMATS.iter().copied());
                    return Err(Problem::with_hint(
                        format!("'log': unknown format '{v}'"),
                        hint,
                    ));
                }
                t.format = v.to_string();
                i += 2;
            }
            Some("sample") => {
                let v = ctx.need(i + 1, "RANGES:SIZE")?;
                let sample = crate::config::model::LogSample::parse(v)
                    .map_err(|e| format!("'log' sample: {e}"))?;
                t.sample = Some(sample);
                i += 2;
            }
            _ => break,
        }
    }
    let facility = ctx.need(i, "a syslog facility such as 'local0'")?;
    if !FACILITIES.contains(&facility) {
        let hint = suggest(facility, FACILITIES.iter().copied());
        return Err(Problem::with_hint(
            format!("'log': unknown syslog facility '{facility}'"),
            hint,
        ));
    }
    t.facility = facility.to_string();
    for (slot, idx) in [(&mut t.level, i + 1), (&mut t.minlevel, i + 2)] {
        if let Some(level) = ctx.arg(idx) {
            if !LEVELS.contains(&level) {
                let hint = suggest(level, LEVELS.iter().copied());
                return Err(Problem::with_hint(
                    format!("'log': unknown syslog level '{level}'"),
                    hint,
                ));
            }
            *slot = Some(level.to_string());
        }
    }
    ctx.no_more(i + 2)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::LogSample;

    #[test]
    fn samples_are_read_as_haproxy_reads_them() {
        let s = LogSample::parse("5,1-3:8").unwrap();
        assert_eq!(s.ranges, [(1, 3), (5, 5)]);
        let taken: Vec<u64> = (0..16).filter(|&n| s.takes(n)).collect();
        assert_eq!(taken, [0, 1, 2, 4, 8, 9, 10, 12]);
        for bad in [
            "1,2", "0:4", "3-2:4", "1-3,2:4", "1-5:4", "1:0", "x:2", "1:",
        ] {
            assert!(LogSample::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn targets() {
        assert_eq!(address("stdout"), Ok(LogAddress::Stdout));
        assert_eq!(address("/dev/log"), Ok(LogAddress::Unix("/dev/log".into())));
        assert_eq!(
            address("127.0.0.1"),
            Ok(LogAddress::Udp(SocketAddr::from(([127, 0, 0, 1], 514))))
        );
        assert_eq!(
            address("udp@127.0.0.1:1514"),
            Ok(LogAddress::Udp(SocketAddr::from(([127, 0, 0, 1], 1514))))
        );
        assert_eq!(
            address(":"),
            Ok(LogAddress::Udp(SocketAddr::from(([0, 0, 0, 0], 514))))
        );
        assert_eq!(address("abns@logs"), Ok(LogAddress::Abns("logs".into())));
        assert_eq!(address("fd@1"), Ok(LogAddress::Stdout));
        assert_eq!(address("fd@2"), Ok(LogAddress::Stderr));
        assert_eq!(address("fd@5"), Ok(LogAddress::Fd(5)));
        assert!(address("fd@x").is_err());
        assert_eq!(address("ring@buf"), Ok(LogAddress::Ring("buf".into())));
        assert!(address("1.2.3.4:0").is_err());
    }
}
