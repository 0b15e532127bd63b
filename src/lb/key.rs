//! Key extraction for the hashing `balance` algorithms: which bytes of a request HAProxy
//! hashes for `balance uri`, `url_param`, `hdr(<name>) use_domain_only` and `source`, and the
//! server address an RDP broker cookie names (`persist rdp-cookie`).
//!
//! The bytes must be exactly HAProxy's (`get_server_uh`, `get_server_ph`, `get_server_hh`,
//! `get_server_sh` in `src/backend.c`), or the same request would reach a different server than
//! under HAProxy. Everything here is pure: slices in, sub-slices or a 32-bit value out, no
//! allocation. A `None` means "no key": HAProxy then falls back to round-robin (see
//! `pick_rr` in [`super::map`] and [`super::chash`]).
//!
//! The resulting bytes are hashed with [`super::hash::hash`], except for `balance source`,
//! which HAProxy folds into 32 bits itself ([`source_hash`]).

use std::net::IpAddr;

/// Options of `balance uri [len N] [depth N] [whole] [path-only]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UriOptions {
    /// `whole`: keep the query string (by default hashing stops at `?`).
    pub whole: bool,
    /// `path-only`: start at the path's first `/`, skipping `scheme://authority` of an
    /// absolute URI, so HTTP/1 origin-form and HTTP/2 URIs hash alike.
    pub path_only: bool,
    /// `len N`: hash at most the first N bytes (0 = no limit).
    pub len: usize,
    /// `depth N`: hash at most N directory levels, i.e. stop before the (N+1)th `/`
    /// (0 = no limit).
    pub depth: usize,
}

/// The part of request URI `uri` that `balance uri` hashes.
///
/// Order of the cuts, as in HAProxy: `path-only` first, then `len`, then the scan that stops
/// at `?` (unless `whole`) or at the (depth+1)th `/`. `None` only with `path-only` when the URI
/// has no path (`*`, authority-form).
pub fn uri_key<'a>(uri: &'a [u8], opts: &UriOptions) -> Option<&'a [u8]> {
    let mut key = uri;
    if opts.path_only {
        key = path_of(key)?;
    }
    if opts.len > 0 && key.len() > opts.len {
        key = &key[..opts.len];
    }
    let mut slashes = 0;
    for (i, &c) in key.iter().enumerate() {
        if c == b'/' {
            slashes += 1;
            if opts.depth > 0 && slashes == opts.depth + 1 {
                return Some(&key[..i]);
            }
        } else if c == b'?' && !opts.whole {
            return Some(&key[..i]);
        }
    }
    Some(key)
}

/// The path (with its query) of an origin-form (`/p?q`) or absolute-form
/// (`scheme://authority/p?q`) request target; an absolute URI without a path gives an empty
/// path. `None` for targets with no path at all (`*`, `host:port`).
fn path_of(uri: &[u8]) -> Option<&[u8]> {
    if uri.first() == Some(&b'/') {
        return Some(uri);
    }
    let scheme_end = uri.windows(3).position(|w| w == b"://")?;
    let authority = scheme_end + 3;
    let path = uri[authority..]
        .iter()
        .position(|&c| c == b'/' || c == b'?')
        .map_or(uri.len(), |p| authority + p);
    Some(&uri[path..])
}

/// The value of query parameter `name` in request URI `uri`, for `balance url_param <name>`.
///
/// Parameters are looked for after the first `?`, at the start of each `&`-separated field;
/// the name is compared byte for byte (case-sensitive) and must be followed by `=`. The value
/// runs to the next `&` or the end; it may be empty (HAProxy hashes the empty value then).
/// `None` when there is no query string or no such parameter.
pub fn url_param<'a>(uri: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let query_start = uri.iter().position(|&c| c == b'?')? + 1;
    uri[query_start..].split(|&c| c == b'&').find_map(|field| {
        let value = field.strip_prefix(name)?;
        value.strip_prefix(b"=")
    })
}

/// The "main domain" part of a `Host`-like header value, for `balance hdr(<name>)
/// use_domain_only`: the label just before the last dot, e.g. `1wt` for `haproxy.1wt.eu` and
/// `example` for `www.example.com:8080`. Without a dot after the first byte the whole value is
/// used, as HAProxy does (`localhost`, `[::1]:80`, `.com`).
pub fn domain_only(value: &[u8]) -> &[u8] {
    let Some(last_dot) = value
        .get(1..)
        .and_then(|v| v.iter().rposition(|&c| c == b'.'))
    else {
        return value;
    };
    let end = last_dot + 1;
    let start = value[..end]
        .iter()
        .rposition(|&c| c == b'.')
        .map_or(0, |p| p + 1);
    &value[start..end]
}

/// The key of `balance source`: the client address folded into 32 bits the way HAProxy does it
/// (the xor of its big-endian 32-bit words: the IPv4 address itself, or the four words of an
/// IPv6 address), then mixed by [`super::hash::avalanche`] when `hash-type ... avalanche` is
/// set. Note that HAProxy does NOT apply the `hash-type` function (sdbm...) here.
pub fn source_hash(addr: IpAddr, avalanche: bool) -> u32 {
    let h = match addr {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(a) => a
            .octets()
            .chunks_exact(4)
            .fold(0, |h, w| h ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]])),
    };
    if avalanche {
        super::hash::avalanche(h)
    } else {
        h
    }
}

/// The client address as bytes in network order (4 for IPv4, 16 for IPv6): the key of
/// `balance hash src`, which, unlike `balance source`, goes through the `hash-type` function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrBytes {
    buf: [u8; 16],
    len: u8,
}

impl AddrBytes {
    /// Captures `addr`'s bytes.
    pub fn new(addr: IpAddr) -> Self {
        let mut buf = [0u8; 16];
        let len = match addr {
            IpAddr::V4(a) => {
                buf[..4].copy_from_slice(&a.octets());
                4
            }
            IpAddr::V6(a) => {
                buf = a.octets();
                16
            }
        };
        AddrBytes { buf, len }
    }

    /// The address bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// The server address a Windows session broker's RDP cookie names (`persist rdp-cookie`): its
/// value is `ADDR.PORT.`, the IPv4 address as the decimal of its four bytes read as a
/// little-endian integer and the port as the decimal of its two bytes swapped (the network
/// order integers of a little-endian host, as HAProxy compares them), e.g. `16777226.15629.0000`
/// for 10.0.0.1:3389. Decimals wrap to their width as C's `strtoul` into a narrower integer
/// does; `None` when the dots are not where they must be.
pub fn rdp_broker_address(cookie: &[u8]) -> Option<std::net::SocketAddrV4> {
    fn decimal(b: &[u8]) -> (u64, &[u8]) {
        let end = b
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(b.len());
        let v = b[..end].iter().fold(0u64, |v, &c| {
            v.saturating_mul(10).saturating_add(u64::from(c - b'0'))
        });
        (v, &b[end..])
    }
    let (addr, rest) = decimal(cookie);
    let rest = rest.strip_prefix(b".")?;
    let (port, rest) = decimal(rest);
    rest.strip_prefix(b".")?;
    let ip = std::net::Ipv4Addr::from((addr as u32).to_le_bytes());
    Some(std::net::SocketAddrV4::new(ip, (port as u16).swap_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(b: Option<&[u8]>) -> Option<&str> {
        b.map(|b| std::str::from_utf8(b).unwrap())
    }

    #[test]
    fn uri_options() {
        let none = UriOptions::default();
        let whole = UriOptions {
            whole: true,
            ..none
        };
        let len = |n| UriOptions { len: n, ..none };
        let depth = |n| UriOptions { depth: n, ..none };
        let path_only = UriOptions {
            path_only: true,
            ..none
        };
        let cases: &[(&str, UriOptions, Option<&str>)] = &[
            ("/a/b/c?x=1", none, Some("/a/b/c")),
            ("/a/b/c?x=1", whole, Some("/a/b/c?x=1")),
            ("/a/b/c?x=1", len(4), Some("/a/b")),
            ("/a/b/c?x=1", len(100), Some("/a/b/c")),
            ("/a/b/c?x=1", depth(1), Some("/a")),
            ("/a/b/c?x=1", depth(2), Some("/a/b")),
            ("/a/b/c?x=1", depth(3), Some("/a/b/c")),
            ("/a/b/?x=/y/z", depth(3), Some("/a/b/")),
            (
                "/a/b/?x=/y/z",
                UriOptions {
                    depth: 3,
                    whole: true,
                    ..none
                },
                Some("/a/b/?x="),
            ),
            (
                "/a/b/c",
                UriOptions {
                    len: 4,
                    depth: 1,
                    ..none
                },
                Some("/a"),
            ),
            (
                "http://h.example:80/a/b?q",
                none,
                Some("http://h.example:80/a/b"),
            ),
            ("http://h.example:80/a/b?q", path_only, Some("/a/b")),
            (
                "http://h.example:80/a/b?q",
                UriOptions {
                    depth: 1,
                    ..path_only
                },
                Some("/a"),
            ),
            ("http://h.example?q", path_only, Some("")),
            ("/a?q", path_only, Some("/a")),
            ("*", path_only, None),
            ("", none, Some("")),
        ];
        for (uri, opts, want) in cases {
            assert_eq!(
                show(uri_key(uri.as_bytes(), opts)),
                *want,
                "{uri:?} {opts:?}"
            );
        }
    }

    #[test]
    fn url_params() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("/p?user=42&x=1", "user", Some("42")),
            ("/p?x=1&user=42", "user", Some("42")),
            ("/p?x=1&user=42&user=7", "user", Some("42")),
            ("/p?xuser=1&user=2", "user", Some("2")),
            ("/p?user=", "user", Some("")),
            ("/p?user", "user", None),
            ("/p?User=1", "user", None),
            ("/p?a=1", "user", None),
            ("/p/user=1", "user", None),
            ("/p?a=b?user=3", "user", None),
            ("/p?&&user=x%20y", "user", Some("x%20y")),
        ];
        for (uri, name, want) in cases {
            let got = show(url_param(uri.as_bytes(), name.as_bytes()));
            assert_eq!(got, *want, "{uri:?} {name:?}");
        }
    }

    #[test]
    fn domains() {
        let cases: &[(&str, &str)] = &[
            ("haproxy.1wt.eu", "1wt"),
            ("www.example.com:8080", "example"),
            ("example.com", "example"),
            ("a.b.c.d.example.org", "example"),
            ("localhost", "localhost"),
            ("localhost:8080", "localhost:8080"),
            (".com", ".com"),
            ("example.com.", "com"),
            ("10.1.2.3:80", "2"),
            ("[::1]:80", "[::1]:80"),
            ("", ""),
        ];
        for (value, want) in cases {
            let got = std::str::from_utf8(domain_only(value.as_bytes())).unwrap();
            assert_eq!(got, *want, "{value:?}");
        }
    }

    #[test]
    fn source_keys() {
        let cases: &[(&str, u32)] = &[
            ("10.0.0.1", 0x0a00_0001),
            ("192.168.1.20", 0xc0a8_0114),
            ("::1", 1),
            ("2001:db8::1", 0x2001_0db8 ^ 1),
            ("::ffff:10.0.0.1", 0x0000_ffff ^ 0x0a00_0001),
        ];
        for (addr, want) in cases {
            let ip: IpAddr = addr.parse().unwrap();
            assert_eq!(source_hash(ip, false), *want, "{addr}");
            assert_eq!(source_hash(ip, true), crate::lb::hash::avalanche(*want));
        }
        let v4 = AddrBytes::new("10.0.0.1".parse().unwrap());
        assert_eq!(v4.as_bytes(), [10, 0, 0, 1]);
        let v6 = AddrBytes::new("2001:db8::1".parse().unwrap());
        assert_eq!(v6.as_bytes().len(), 16);
        assert_eq!(v6.as_bytes()[..4], [0x20, 0x01, 0x0d, 0xb8]);
    }

    /// Servers a real HAProxy 2.6.12 chose (`hash-type map-based`, three servers of weight 1,
    /// so server = sdbm(key) mod 3 + 1) for each `balance` variant and request.
    #[test]
    fn keys_match_haproxy() {
        let uris = [
            "/a/b/c?x=1",
            "/a/bb/c",
            "/abc/d/e",
            "/x/y",
            "/q?r",
            "/a/b/?x=/y/z",
            "/zz/top/deep/er",
            "/0/1/2/3",
        ];
        // The first request was sent as `http://h.example:80/a/b?q`: HAProxy drops the
        // scheme's default port from the URI before any balancing (scheme-based
        // normalization), so the HTTP layer must hand over the normalized URI shown here.
        let absolute = [
            "http://h.example/a/b?q",
            "http://other/a/b?q",
            "/a/b?q",
            "http://x.y/zz/top/deep/er",
            "http://x.y/0/1/2/3",
            "http://x.y/k7",
            "http://x.y/k3/q",
        ];
        let none = UriOptions::default();
        let path_only = UriOptions {
            path_only: true,
            ..none
        };
        #[rustfmt::skip]
        let uri_cases: &[(&str, UriOptions, &[&str], &str)] = &[
            ("uri depth 2", UriOptions { depth: 2, ..none }, &uris, "3 2 1 2 2 3 1 2"),
            ("uri len 5", UriOptions { len: 5, ..none }, &uris, "2 2 3 2 2 2 1 1"),
            ("uri whole", UriOptions { whole: true, ..none }, &uris, "2 2 3 2 2 3 2 1"),
            ("uri depth 3 whole", UriOptions { depth: 3, whole: true, ..none }, &uris,
             "2 2 3 2 2 2 2 3"),
            ("uri path-only", path_only, &absolute, "3 3 3 2 1 1 3"),
            ("uri path-only depth 1", UriOptions { depth: 1, ..path_only }, &absolute,
             "1 1 1 2 3 1 3"),
            ("uri", none, &absolute, "2 2 3 3 1 3 2"),
        ];
        let server = |key: &[u8]| (crate::lb::hash::sdbm(key) % 3 + 1).to_string();
        for (what, opts, inputs, want) in uri_cases {
            let got: Vec<String> = inputs
                .iter()
                .map(|u| uri_key(u.as_bytes(), opts).map_or("-".into(), server))
                .collect();
            assert_eq!(got.join(" "), *want, "balance {what}");
        }

        let hosts = [
            ("haproxy.1wt.eu", "2"),
            ("www.example.com:8080", "2"),
            ("10.1.2.3:80", "3"),
            (".com", "3"),
            ("localhost", "1"),
            ("example.com.", "2"),
            ("a.b.c.d.example.org", "2"),
            ("foo.bar", "1"),
            ("x.qq.zz", "2"),
            ("1.2.3.4", "1"),
        ];
        for (host, want) in hosts {
            assert_eq!(
                server(domain_only(host.as_bytes())),
                want,
                "hdr(host) use_domain_only {host}"
            );
        }

        // Requests without the parameter fell back to round-robin there: not compared.
        let params = [
            ("/p?user=42&x=1", "1"),
            ("/p?x=1&user=43", "2"),
            ("/p?xuser=1&user=abc", "3"),
            ("/p?user=zzz", "2"),
            ("/p?user=hello", "3"),
        ];
        for (uri, want) in params {
            let value = url_param(uri.as_bytes(), b"user").unwrap();
            assert_eq!(server(value), want, "url_param user {uri}");
        }
    }

    /// `balance source` through a real HAProxy 2.6.12 (weights 1 2 3), clients bound to
    /// 127.0.7i.13i for i = 1..=12: the address fold, with and without avalanche, feeds both
    /// lookup structures exactly as there.
    #[test]
    fn source_matches_haproxy() {
        use crate::lb::chash::ConsistentHash;
        use crate::lb::map::MapHash;
        use crate::lb::weighted::ServerSpec;
        let specs: Vec<_> = [1, 2, 3]
            .iter()
            .enumerate()
            .map(|(i, &w)| ServerSpec::new(&format!("s{}", i + 1), w))
            .collect();
        let map = MapHash::new(&specs);
        let ring = ConsistentHash::new(&specs);
        let cases: &[(&str, bool, bool, &str)] = &[
            ("map-based", false, false, "3 2 3 1 3 2 3 2 3 1 3 2"),
            (
                "map-based sdbm avalanche",
                false,
                true,
                "1 1 2 3 2 3 3 3 3 1 2 3",
            ),
            ("consistent", true, true, "2 3 3 2 1 3 3 3 3 3 1 2"),
            ("consistent sdbm", true, false, "2 2 2 2 2 2 2 2 2 2 2 2"),
        ];
        for &(what, consistent, aval, want) in cases {
            let got: Vec<String> = (1..=12u8)
                .map(|i| {
                    let ip = IpAddr::from([127, 0, i * 7, i * 13]);
                    let h = source_hash(ip, aval);
                    let s = if consistent {
                        ring.pick(h, None)
                    } else {
                        map.pick(h, None)
                    };
                    s.map_or("-".into(), |s| (s + 1).to_string())
                })
                .collect();
            assert_eq!(got.join(" "), want, "hash-type {what}");
        }
    }

    #[test]
    fn affinity_is_stable_across_rebuilds() {
        // Same inputs, same server: the key is extracted, hashed and looked up again after
        // the servers went down and up.
        use crate::lb::hash::{hash, HashFn};
        use crate::lb::map::MapHash;
        use crate::lb::weighted::ServerSpec;
        let specs: Vec<_> = (0..4)
            .map(|i| ServerSpec::new(&format!("s{i}"), 1))
            .collect();
        let mut m = MapHash::new(&specs);
        let uris = ["/a/x?1", "/b/y?2", "/c/z?3", "/d/w?4"];
        let pick = |m: &MapHash, uri: &str| {
            let key = uri_key(uri.as_bytes(), &UriOptions::default()).unwrap();
            m.pick(hash(HashFn::Sdbm, key, false), None)
        };
        let before: Vec<_> = uris.iter().map(|u| pick(&m, u)).collect();
        m.set_usable(2, false);
        m.set_usable(2, true);
        let after: Vec<_> = uris.iter().map(|u| pick(&m, u)).collect();
        assert_eq!(before, after);
        let ip: IpAddr = "198.51.100.7".parse().unwrap();
        let s = m.pick(source_hash(ip, false), None);
        m.set_weight(0, 5);
        m.set_weight(0, 1);
        assert_eq!(m.pick(source_hash(ip, false), None), s);
    }

    #[test]
    fn an_rdp_broker_cookie_names_an_address_and_port() {
        let a = |c: &str| rdp_broker_address(c.as_bytes()).map(|a| a.to_string());
        assert_eq!(a("16777226.15629.0000").as_deref(), Some("10.0.0.1:3389"));
        assert_eq!(a("16777343.36895.").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(a("16777226.15629"), None);
        assert_eq!(a("16777226"), None);
        assert_eq!(a("x.1."), None);
    }
}
