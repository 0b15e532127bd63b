//! What Bascule declares about itself to HAProxy tooling: the HAProxy version whose behaviour it
//! follows, its build target and the HAProxy feature list (`-vv`, `feature()` in `-cc` and `.if`).
//!
//! Scripts written for HAProxy (its regression tests, packaging scripts) read the first line of
//! `-vv` for `HAProxy version X`, the `Feature list : +A -B` line, and ask
//! `haproxy -cc 'version_atleast(2.5-dev0)'` or `-cc 'feature(OPENSSL)'` to decide whether a
//! test applies. Bascule answers from here, and every answer must be true of Bascule today: a
//! feature is `+` only when what HAProxy means by it works here.

/// The HAProxy release whose configuration language and behaviour Bascule follows (its
/// reference in development and tests is HAProxy 2.6). `version_atleast()` and
/// `version_before()` compare against it.
pub const HAPROXY_COMPAT_VERSION: &str = "2.6.0";

/// Bascule's own version.
pub const BASCULE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version string shown after `HAProxy version`: the compatibility version with Bascule's own
/// as a suffix, the way distributions suffix HAProxy's (`2.6.12-1+deb12u4`).
pub fn version_string() -> String {
    format!("{HAPROXY_COMPAT_VERSION}-bascule-{BASCULE_VERSION}")
}

/// HAProxy's feature names with whether Bascule has them, and why, in `-vv` order.
pub const FEATURES: &[(&str, bool, &str)] = &[
    ("51DEGREES", false, "no device detection"),
    (
        "ACCEPT4",
        true,
        "connections are accepted non-blocking with accept4(2)",
    ),
    ("BACKTRACE", false, "no backtrace dumps"),
    ("CLOSEFROM", false, "not used"),
    ("CPU_AFFINITY", true, "cpu-map pins worker threads"),
    ("CRYPT_H", false, "no userlist passwords"),
    ("DEVICEATLAS", false, "no device detection"),
    ("DL", false, "no dynamic loading"),
    ("ENGINE", false, "no OpenSSL engines"),
    ("EPOLL", true, "the event loops use epoll"),
    ("EVPORTS", false, "Solaris only"),
    (
        "GETADDRINFO",
        true,
        "host names resolve through getaddrinfo",
    ),
    ("KQUEUE", false, "BSD only"),
    ("LIBCRYPT", false, "no userlist passwords"),
    (
        "LINUX_SPLICE",
        true,
        "option splice-* forwards with splice(2)",
    ),
    (
        "LINUX_TPROXY",
        false,
        "'source ... usesrc' is not supported (bind 'transparent' is)",
    ),
    ("LUA", false, "no Lua"),
    ("MEMORY_PROFILING", false, "no memory profiling"),
    ("NETFILTER", false, "no original-destination lookup"),
    ("NS", false, "no network namespaces"),
    ("OBSOLETE_LINKER", false, "not applicable"),
    // TLS is rustls (over aws-lc-rs), configured with HAProxy's OpenSSL keywords: the feature
    // reg-tests and scripts gate TLS on. The library probes (`ssllib_name_startswith`,
    // `openssl_version_atleast`) stay false: it is not OpenSSL.
    (
        "OPENSSL",
        true,
        "TLS through rustls, configured with HAProxy's SSL keywords",
    ),
    ("OT", false, "no OpenTracing"),
    // Regular expressions (`-m reg`, `path_reg`, `map_reg`, `regsub`, `replace-*`, checks'
    // `rstring`/`rstatus`) work, through Rust's regex crate: PCRE2 is what scripts test for
    // regex support, as OPENSSL is for TLS. Its syntax lacks PCRE's backreferences and
    // lookaround: such a pattern is a load-time error naming it. PCRE (version 1) and the JIT
    // flags stay false.
    ("PCRE", false, "regexes use Rust's regex crate (see PCRE2)"),
    (
        "PCRE2",
        true,
        "regexes through Rust's regex crate (no backreferences or lookaround)",
    ),
    ("PCRE2_JIT", false, "no PCRE2"),
    ("PCRE_JIT", false, "no PCRE"),
    ("POLL", false, "epoll only"),
    ("PRCTL", false, "not used"),
    ("PROCCTL", false, "FreeBSD only"),
    ("PROMEX", false, "no Prometheus exporter"),
    ("QUIC", false, "no QUIC"),
    ("RT", false, "not used"),
    ("SLZ", false, "no compression yet"),
    ("STATIC_PCRE", false, "no PCRE"),
    ("STATIC_PCRE2", false, "no PCRE2"),
    ("SYSTEMD", false, "no sd_notify (-Ws)"),
    ("TFO", false, "no TCP Fast Open"),
    ("THREAD", true, "nbthread worker threads"),
    ("THREAD_DUMP", false, "no thread dumps"),
    (
        "TPROXY",
        false,
        "'source ... usesrc' is not supported (bind 'transparent' is)",
    ),
    ("WURFL", false, "no device detection"),
    ("ZLIB", false, "no compression yet"),
];

/// True when `name` is a feature Bascule has (unknown names are false, as in HAProxy).
pub fn has_feature(name: &str) -> bool {
    FEATURES.iter().any(|(n, on, _)| *n == name && *on)
}

/// The `Feature list : +A -B ...` line of `-vv`.
pub fn feature_list() -> String {
    let words: Vec<String> = FEATURES
        .iter()
        .map(|(n, on, _)| format!("{}{n}", if *on { '+' } else { '-' }))
        .collect();
    format!("Feature list : {}", words.join(" "))
}

/// The build target in HAProxy's `TARGET` terms (`linux-glibc`), with Rust's triple parts.
pub fn build_target() -> String {
    let os = std::env::consts::OS;
    let libc = if cfg!(target_env = "gnu") {
        "glibc"
    } else if cfg!(target_env = "musl") {
        "musl"
    } else {
        "libc"
    };
    format!("{os}-{libc}")
}

/// What `-v` (and, with build details, `-vv`) prints.
pub fn version_text(verbose: bool) -> String {
    let mut s = format!(
        "HAProxy version {} - Bascule {BASCULE_VERSION}, following HAProxy {}'s behaviour\n\
         Bascule version {BASCULE_VERSION} - a load balancer that reads HAProxy's configuration\n",
        version_string(),
        HAPROXY_COMPAT_VERSION
    );
    if verbose {
        s.push_str(&format!(
            "Build options :\n  TARGET  = {}\n  CPU     = {}\n  CC      = rustc\n  OPTIONS = \n\n{}\n\n",
            build_target(),
            std::env::consts::ARCH,
            feature_list()
        ));
        s.push_str(
            "Default settings :\n  bufsize = 16384, maxrewrite = 1024\n\n\
             Built with multi-threading support (nbthread).\n\
             Built with TLS support through rustls (aws-lc-rs), configured with HAProxy's SSL keywords (not OpenSSL).\n\
             TLS library supports : TLSv1.2 TLSv1.3\n\
             Built without compression support.\n\
             Built with PCRE2-style regexes through Rust's regex crate (no backreferences or lookaround).\n\n\
             Available polling systems :\n      epoll : pref=300,  test result OK\n\
             Total: 1 (1 usable), will use epoll.\n\n\
             Available multiplexer protocols :\n\
             (protocols marked as <default> cannot be specified using 'proto' keyword)\n\
             \x20        h2 : mode=HTTP  side=FE|BE  mux=H2 (through an HTTP/1.1 gateway, h2 crate)\n\
             \x20 <default> : mode=HTTP  side=FE|BE  mux=H1\n\
             \x20        h1 : mode=HTTP  side=FE|BE  mux=H1\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_are_unique_and_listed() {
        for (i, (n, _, why)) in FEATURES.iter().enumerate() {
            assert!(!why.is_empty());
            assert!(!FEATURES[..i].iter().any(|(m, _, _)| m == n), "{n}");
        }
        let line = feature_list();
        assert!(line.contains("+OPENSSL") && line.contains("+THREAD"));
        assert!(has_feature("THREAD") && !has_feature("ZLIB") && !has_feature("nope"));
    }

    #[test]
    fn version_lines() {
        let v = version_text(true);
        let first = v.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("HAProxy version 2.6.0-bascule-"),
            "{first}"
        );
        assert!(v.contains("\nFeature list : "));
        assert!(v.contains("TARGET  = linux-"));
        assert!(!version_text(false).contains("Feature list"));
    }
}
