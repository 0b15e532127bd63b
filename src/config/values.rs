//! Value syntaxes shared by many keywords: times, sizes, numbers, addresses, CPU sets.
//!
//! Each function turns one word into a typed value or an error message that says what was
//! expected; the caller adds the file, line, section and keyword. Keeping them here means that
//! `timeout client 5s`, `inter 5s` and `hard-stop-after 5s` accept exactly the same words.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Parses a time: digits then an optional unit `us`, `ms`, `s`, `m`, `h`, `d` (none: ms).
pub fn time(word: &str) -> Result<Duration, String> {
    let digits = word.chars().take_while(char::is_ascii_digit).count();
    let (num, unit) = word.split_at(digits);
    if num.is_empty() {
        return Err(format!(
            "expected a time such as '5s' (units: us, ms, s, m, h, d; none means ms), got '{word}'"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("time '{word}' is too large"))?;
    let per_unit_us: u64 = match unit {
        "us" => 1,
        "" | "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => {
            return Err(format!(
                "unknown time unit '{unit}' in '{word}' (units: us, ms, s, m, h, d; none means ms)"
            ))
        }
    };
    n.checked_mul(per_unit_us)
        .map(Duration::from_micros)
        .ok_or_else(|| format!("time '{word}' is too large"))
}

/// Parses a time used as a timer: like [`time`], at most 2^31-1 ms (HAProxy's limit, ~24.8 days).
pub fn timer(word: &str) -> Result<Duration, String> {
    let d = time(word)?;
    if d.as_millis() > i32::MAX as u128 {
        return Err(format!(
            "time '{word}' is too large: the maximum is 2147483647ms (about 24.8 days)"
        ));
    }
    Ok(d)
}

/// Parses a size in bytes: digits then an optional `k`, `m` or `g` (1024-based).
pub fn size(word: &str) -> Result<u64, String> {
    let digits = word.chars().take_while(char::is_ascii_digit).count();
    let (num, unit) = word.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("expected a size such as '16k' (units: k, m, g), got '{word}'"))?;
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => {
            return Err(format!(
                "unknown size unit '{unit}' in '{word}' (units: k, m, g)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{word}' is too large"))
}

/// Parses an unsigned integer of type `T`, naming `what` in the error.
pub fn number<T: std::str::FromStr>(word: &str, what: &str) -> Result<T, String> {
    word.parse()
        .map_err(|_| format!("expected {what}, got '{word}'"))
}

/// Parses a strictly positive `u32` (connection limits).
pub fn positive(word: &str) -> Result<u32, String> {
    match number::<u32>(word, "a positive integer")? {
        0 => Err("expected a positive integer, got '0'".into()),
        n => Ok(n),
    }
}

/// Parses a port number 1..=65535.
pub fn port(word: &str) -> Result<u16, String> {
    match word.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("expected a port number 1-65535, got '{word}'")),
    }
}

/// Parses `ADDR[/LEN]` as a network (address, prefix length); a bare address is a host.
pub fn network(word: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = match word.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (word, None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("expected a network such as '10.0.0.0/8', got '{word}'"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => {
            // An IPv4 mask such as 255.255.255.0 is also accepted, as HAProxy does.
            if let Ok(mask) = l.parse::<Ipv4Addr>() {
                let bits = u32::from(mask);
                if bits.leading_ones() + bits.trailing_zeros() != 32 || ip.is_ipv6() {
                    return Err(format!("invalid network mask in '{word}'"));
                }
                bits.leading_ones() as u8
            } else {
                match l.parse::<u8>() {
                    Ok(n) if n <= max => n,
                    _ => return Err(format!("invalid prefix length in '{word}' (0-{max})")),
                }
            }
        }
    };
    Ok((ip, len))
}

/// Address family forced by an `ipv4@` / `ipv6@` prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Any,
    V4,
    V6,
}

/// An address split into host and port text, before resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort<'a> {
    pub family: Family,
    /// The host without brackets; empty or `*` for a wildcard.
    pub host: &'a str,
    /// The text after the port separator, `None` when there is no port.
    pub port: Option<&'a str>,
}

/// An address word whose prefix names something other than an IP address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketPrefix {
    /// `fd@N`: an inherited socket.
    Fd(i32),
    /// `unix@PATH`, or a word starting with `/`.
    Unix(std::path::PathBuf),
    /// `abns@NAME`: a Linux abstract-namespace UNIX socket.
    Abns(String),
}

/// Reads the `fd@`, `unix@`, `abns@` prefixes (and plain `/paths`) once for every keyword that
/// takes an address: `None` when the word is an IP address form (`ipv4@`, `ipv6@`, plain), left
/// to [`split_host_port`].
pub fn socket_prefix(word: &str) -> Result<Option<SocketPrefix>, String> {
    let word = without_stream(word);
    if let Some(n) = word.strip_prefix("fd@") {
        let fd = n.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            format!("'{word}': 'fd@' expects a file descriptor number, got '{n}'")
        })?;
        return Ok(Some(SocketPrefix::Fd(fd)));
    }
    // HAProxy's limits: `sun_path` is 108 bytes; a path also needs its terminating NUL and
    // room for the `.PID.tmp` suffix it is first bound under, an abstract name its leading NUL.
    let too_long = |max: usize| format!("socket path '{word}' too long (max {max})");
    if let Some(path) = word.strip_prefix("unix@") {
        if path.is_empty() {
            return Err(format!("'{word}': 'unix@' expects a socket path"));
        }
        if path.len() > 97 {
            return Err(too_long(97));
        }
        return Ok(Some(SocketPrefix::Unix(path.into())));
    }
    if word.starts_with('/') {
        if word.len() > 97 {
            return Err(too_long(97));
        }
        return Ok(Some(SocketPrefix::Unix(word.into())));
    }
    if let Some(name) = word.strip_prefix("abns@") {
        if name.is_empty() {
            return Err(format!("'{word}': 'abns@' expects a socket name"));
        }
        if name.len() > 107 {
            return Err(too_long(107));
        }
        return Ok(Some(SocketPrefix::Abns(name.to_string())));
    }
    Ok(None)
}

/// Prefixes that name transports Bascule cannot use yet.
const UNSUPPORTED_PREFIXES: &[&str] = &[
    "unix@",
    "abns@",
    "abnsz@",
    "fd@",
    "sockpair@",
    "quic4@",
    "quic6@",
    "quic@",
    "tcp@",
    "tcp4@",
    "tcp6@",
    "udp@",
    "udp4@",
    "udp6@",
    "uxst@",
    "uxdg@",
    "rhttp@",
    "ring@",
    "dgram+",
];

/// HAProxy 3's `stream+` prefix only says "a stream socket", which every address Bascule takes
/// is: it is read and dropped (`stream+127.0.0.1:80`, `stream+fd@3`).
fn without_stream(word: &str) -> &str {
    word.strip_prefix("stream+").unwrap_or(word)
}

/// Splits `[ipv4@|ipv6@]HOST[:PORT]` (`[V6]:PORT` for IPv6 with a port; an IPv6 address without
/// brackets is taken whole as a host when it parses as one, else its last colon starts the port).
pub fn split_host_port(word: &str) -> Result<HostPort<'_>, String> {
    let word = without_stream(word);
    let (family, rest) = if let Some(r) = word.strip_prefix("ipv4@") {
        (Family::V4, r)
    } else if let Some(r) = word.strip_prefix("ipv6@") {
        (Family::V6, r)
    } else {
        if word.starts_with('/') {
            return Err(format!(
                "UNIX socket address '{word}' is not supported yet (an IP address and port are required)"
            ));
        }
        if let Some(p) = UNSUPPORTED_PREFIXES.iter().find(|p| word.starts_with(**p)) {
            return Err(format!(
                "address prefix '{p}' in '{word}' is not supported yet (use ipv4@, ipv6@ or a plain address)"
            ));
        }
        (Family::Any, word)
    };
    if let Some(r) = rest.strip_prefix('[') {
        let (host, after) = r
            .split_once(']')
            .ok_or_else(|| format!("missing ']' in address '{word}'"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| format!("expected ':PORT' after ']' in address '{word}'"))?,
            ),
        };
        return Ok(HostPort { family, host, port });
    }
    if rest.parse::<Ipv6Addr>().is_ok() {
        return Ok(HostPort {
            family,
            host: rest,
            port: None,
        });
    }
    Ok(match rest.rsplit_once(':') {
        Some((host, port)) => HostPort {
            family,
            host,
            port: Some(port),
        },
        None => HostPort {
            family,
            host: rest,
            port: None,
        },
    })
}

/// Resolves a host (IP literal, `*`/empty wildcard, or a name through the system resolver) to an
/// IP address of the wanted family.
pub fn resolve_host(host: &str, family: Family) -> Result<IpAddr, String> {
    if host.is_empty() || host == "*" {
        return Ok(match family {
            Family::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        });
    }
    let found: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => (host, 0)
            .to_socket_addrs()
            .map_err(|e| format!("could not resolve host name '{host}': {e}"))?
            .map(|sa| sa.ip())
            .collect(),
    };
    found
        .into_iter()
        .find(|ip| match family {
            Family::Any => true,
            Family::V4 => ip.is_ipv4(),
            Family::V6 => ip.is_ipv6(),
        })
        .ok_or_else(|| match family {
            Family::V4 => format!("'{host}' has no IPv4 address"),
            Family::V6 => format!("'{host}' has no IPv6 address"),
            Family::Any => format!("could not resolve host name '{host}'"),
        })
}

/// Parses `HOST:PORT` with a required port into one socket address.
pub fn socket_addr(word: &str) -> Result<SocketAddr, String> {
    let hp = split_host_port(word)?;
    let port = hp
        .port
        .ok_or_else(|| format!("address '{word}' has no port (expected HOST:PORT)"))?;
    let port = self::port(port)?;
    Ok(SocketAddr::new(resolve_host(hp.host, hp.family)?, port))
}

/// Parses a set of non-negative integers: `N`, `A-B`, comma lists of those (`0-3,5`).
pub fn int_set(word: &str, max: usize) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in word.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) else {
            return Err(format!(
                "expected a number, a range such as '0-3' or a comma list of those, got '{word}'"
            ));
        };
        if a > b {
            return Err(format!("range '{part}' goes backwards"));
        }
        if b > max {
            return Err(format!("'{part}' is out of range (maximum {max})"));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Checks an error message file (`errorfile`, `http-errors`, `http-request deny ... errorfile`)
/// as HAProxy 2.6 does when it loads one (`http_str_to_htx`): an empty file is allowed (the
/// connection then closes without a response); anything else must be a whole HTTP/1.x
/// response head (a status other than 1xx but 101), without chunked encoding, and with exactly
/// the body its `Content-Length` announces (none for 204 and 304). Returns why not.
pub fn raw_http_response(raw: &[u8]) -> Result<(), String> {
    if raw.is_empty() {
        return Ok(());
    }
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|p| p + 2))
        .ok_or("unable to parse headers (no end of head)")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "unable to parse headers")?;
    let mut lines = head.lines();
    let start = lines.next().unwrap_or("");
    let mut parts = start.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let status = parts.next().unwrap_or("");
    let v = version.as_bytes();
    if v.len() != 8
        || !version.starts_with("HTTP/")
        || !v[5].is_ascii_digit()
        || v[6] != b'.'
        || !v[7].is_ascii_digit()
    {
        return Err(format!("invalid http version ({version})"));
    }
    let status: u16 = match status.parse() {
        Ok(s) if status.len() == 3 => s,
        _ => return Err(format!("invalid status code ({status})")),
    };
    if status < 200 && status != 101 {
        return Err(format!(
            "invalid http status code for an error message ({status})"
        ));
    }
    let mut length = None;
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("unable to parse headers (line '{line}')"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            return Err("chunk-encoded payload not supported".into());
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("invalid content-length ({value})"))?,
            );
        }
    }
    let body = raw.len() - end;
    if matches!(status, 204 | 304) || length == Some(0) {
        if body > 0 {
            return Err("message payload not expected".into());
        }
    } else if let Some(len) = length {
        if len != body {
            return Err(format!(
                "payload size does not match the announced content-length ({body} != {len})"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_paths_have_haproxy_limits() {
        let path = |n: usize| format!("/{}", "x".repeat(n - 1));
        assert!(socket_prefix(&path(97)).is_ok());
        assert_eq!(
            socket_prefix(&path(98)),
            Err(format!("socket path '{}' too long (max 97)", path(98)))
        );
        assert!(socket_prefix(&format!("unix@{}", path(98))).is_err());
        assert!(socket_prefix(&format!("abns@{}", "y".repeat(107))).is_ok());
        assert!(socket_prefix(&format!("abns@{}", "y".repeat(108))).is_err());
    }

    #[test]
    fn the_stream_prefix_is_read_and_dropped() {
        assert_eq!(socket_prefix("stream+fd@3"), Ok(Some(SocketPrefix::Fd(3))));
        let hp = split_host_port("stream+127.0.0.1:80").unwrap();
        assert_eq!((hp.host, hp.port), ("127.0.0.1", Some("80")));
        assert!(split_host_port("dgram+127.0.0.1:80").is_err());
    }

    #[test]
    fn times_take_units_and_default_to_ms() {
        let cases = [
            ("0", 0),
            ("150", 150_000),
            ("150ms", 150_000),
            ("10us", 10),
            ("5s", 5_000_000),
            ("2m", 120_000_000),
            ("1h", 3_600_000_000),
            ("1d", 86_400_000_000),
        ];
        for (word, us) in cases {
            assert_eq!(time(word), Ok(Duration::from_micros(us)), "{word}");
        }
        for bad in ["", "s", "5x", "5 s", "5sec", "-1", "99999999999999999999"] {
            assert!(time(bad).is_err(), "{bad}");
        }
        assert!(timer("25d").is_err());
        assert!(timer("24d").is_ok());
    }

    #[test]
    fn sizes_are_1024_based() {
        assert_eq!(size("16384"), Ok(16384));
        assert_eq!(size("16k"), Ok(16384));
        assert_eq!(size("1m"), Ok(1 << 20));
        assert_eq!(size("2G"), Ok(2 << 30));
        assert!(size("1t").is_err());
        assert!(size("k").is_err());
    }

    #[test]
    fn host_port_forms() {
        let hp = |w| split_host_port(w).unwrap_or_else(|e| panic!("{w}: {e}"));
        assert_eq!(hp("1.2.3.4:80").host, "1.2.3.4");
        assert_eq!(hp("1.2.3.4:80").port, Some("80"));
        assert_eq!(hp("*:80").host, "*");
        assert_eq!(hp(":80").host, "");
        assert_eq!(hp("[::1]:443").host, "::1");
        assert_eq!(hp("[::1]").port, None);
        assert_eq!(hp(":::80").host, "::");
        assert_eq!(hp("2001:db8::1").port, None);
        assert_eq!(hp("ipv6@:80").family, Family::V6);
        assert_eq!(hp("ipv4@10.0.0.1:80").family, Family::V4);
        assert_eq!(hp("host.example:8000-8010").port, Some("8000-8010"));
        assert!(split_host_port("/var/run/x.sock").is_err());
        assert!(split_host_port("unix@x.sock").is_err());
        assert!(split_host_port("[::1:80").is_err());
    }

    #[test]
    fn hosts_resolve_with_family() {
        assert_eq!(
            resolve_host("*", Family::V6),
            Ok(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
        );
        assert_eq!(
            resolve_host("", Family::Any),
            Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        );
        assert!(resolve_host("127.0.0.1", Family::V6).is_err());
        assert!(resolve_host("localhost", Family::Any).is_ok());
        assert_eq!(
            socket_addr("127.0.0.1:9000"),
            Ok("127.0.0.1:9000".parse().unwrap_or_else(|_| unreachable!()))
        );
        assert!(socket_addr("127.0.0.1").is_err());
        assert!(socket_addr("127.0.0.1:0").is_err());
    }

    #[test]
    fn networks_and_sets() {
        assert_eq!(
            network("10.0.0.0/8"),
            Ok(("10.0.0.0".parse().unwrap_or_else(|_| unreachable!()), 8))
        );
        assert_eq!(network("10.0.0.0/255.255.0.0").map(|n| n.1), Ok(16));
        assert_eq!(network("::1").map(|n| n.1), Ok(128));
        assert!(network("10.0.0.0/33").is_err());
        assert_eq!(int_set("0-3,5", 64), Ok(vec![0, 1, 2, 3, 5]));
        assert_eq!(int_set("7", 64), Ok(vec![7]));
        assert!(int_set("3-1", 64).is_err());
        assert!(int_set("a", 64).is_err());
        assert!(int_set("65", 64).is_err());
    }

    #[test]
    fn raw_http_responses_as_haproxy_loads_them() {
        let ok: [&[u8]; 5] = [
            b"",
            b"HTTP/1.1 503 Busy\r\ncontent-length: 2\r\n\r\nno",
            b"HTTP/1.0 403 Forbidden\r\n\r\nanything until the close",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 400 Bad\nContent-Length: 0\n\n",
        ];
        for raw in ok {
            assert_eq!(
                raw_http_response(raw),
                Ok(()),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
        let bad: [(&[u8], &str); 7] = [
            (b"hello", "no end of head"),
            (b"HTTP/2 200 OK\r\n\r\n", "invalid http version"),
            (b"HTTP/1.1 100 Continue\r\n\r\n", "invalid http status code"),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                "chunk-encoded",
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nab",
                "(2 != 3)",
            ),
            (b"HTTP/1.1 304 NM\r\n\r\nx", "payload not expected"),
            (
                b"HTTP/1.1 200 OK\r\nbroken\r\n\r\n",
                "unable to parse headers",
            ),
        ];
        for (raw, want) in bad {
            let got = raw_http_response(raw).unwrap_err();
            assert!(got.contains(want), "{got} (wanted {want})");
        }
    }
}
