//! HAProxy keywords Bascule recognises but does not implement yet, per section.
//!
//! Listing them keeps the promise that a real haproxy.cfg never gets "unknown keyword" for a
//! valid HAProxy keyword: it gets "does not support yet" instead, which tells the user the
//! configuration is fine for HAProxy and the gap is ours.

use super::{Sections, Unsupported};

macro_rules! table {
    ($($sections:expr => [$($name:expr),* $(,)?]),* $(,)?) => {
        &[$($(Unsupported { name: $name, sections: $sections },)*)*]
    };
}

/// The known-but-unsupported keywords.
pub static KEYWORDS: &[Unsupported] = table![
    Sections::GLOBAL => [
        "master-worker", "mworker-max-reloads", "thread-group", "server-state-file", "server-state-base",
        "h1-case-adjust", "h1-case-adjust-file", "tune.*", "lua-load", "lua-load-per-thread",
        "lua-prepend-path", "busy-polling", "set-dumpable", "external-check", "strict-limits",
        "nosplice", "noepoll", "nopoll", "nokqueue", "noevports", "noreuseport", "nogetaddrinfo",
        "maxpipes", "maxcompcpuusage", "maxcomprate",
        "maxzlibmem", "issuers-chain-path",
        "ssl-propquery", "ssl-provider", "ssl-provider-path", "ssl-skip-self-issued-ca", "grace",
        "quiet", "debug", "zero-warning", "pp2-never-send-local", "close-spread-time", "numa-cpu-mapping",
        "profiling.*", "anonkey", "httpclient.*", "fd-hard-limit", "cluster-secret", "stats-file",
        "hard-stop-after-*", "default-path", "log-format", "limited-quic", "no-quic", "uid-*",
        "deviceatlas-*", "51degrees-*", "wurfl-*", "harden.*", "ocsp-update.*", "dns-accept-family",
        "max-checks-per-thread", "prealloc-fd", "shm-stats-file", "warn-blocked-traffic-after",
    ],
    Sections::PROXIES => [
        "hash-balance-factor", "error-log-format",
        "log-steps",
        "compression", "filter", "monitor-net", "fullconn",
        "dispatch", "server-template", "source",
        "http-send-name-header", "email-alert",
        "external-check", "load-server-state-from-file", "server-state-file-name",
        "max-keep-alive-queue", "bind-process", "guid",
        "clitcpka-cnt", "clitcpka-idle", "clitcpka-intvl", "srvtcpka-cnt",
        "srvtcpka-idle", "srvtcpka-intvl", "reqadd", "reqrep", "rspadd", "rsprep",
        "reqdel", "rspdel", "reqirep", "rspirep", "reqallow", "reqdeny", "reqtarpit", "reqpass",
        "block", "redisp", "redispatch", "grace", "transparent", "appsession", "use-fcgi-app",
        "quic-initial",
    ],
    Sections::PEERS => ["log", "default-bind", "default-server", "shards", "timeout"],
];
