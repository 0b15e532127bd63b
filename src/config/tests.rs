//! Whole-pipeline unit tests: text in, model or diagnostics out (inheritance, named defaults,
//! listen sections, ids, name resolution). Per-syntax tests live beside their parsers.

use std::time::Duration;

use super::model::{Balance, Mode};
use super::*;

fn ok(text: &str) -> Loaded {
    match load_str("t.cfg", text) {
        Ok(l) => l,
        Err(e) => panic!("unexpected errors:\n{e}"),
    }
}

fn errors(text: &str) -> Vec<String> {
    match load_str("t.cfg", text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect(),
    }
}

const TIMEOUTS: &str = "  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n";

#[test]
fn defaults_are_inherited_and_overridden() {
    let text = format!(
        "defaults\n  mode tcp\n{TIMEOUTS}  retries 5\n  balance static-rr\n  option redispatch\n  default-server inter 3s\n\
         frontend fe\n  bind :8080\n  default_backend be\n\
         backend be\n  timeout server 1m\n  server s1 127.0.0.1:80 check\n"
    );
    let l = ok(&text);
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    let be = &l.config.backends[0];
    assert_eq!(be.mode, Mode::Tcp);
    assert_eq!(be.retries, 5);
    assert_eq!(be.balance, Balance::StaticRr);
    assert_eq!(be.redispatch, Some(-1));
    assert_eq!(be.timeouts.server, Some(Duration::from_secs(60)));
    assert_eq!(be.timeouts.connect, Some(Duration::from_secs(5)));
    let check = be.servers[0].check.unwrap_or_else(|| unreachable!());
    assert_eq!(check.inter, Duration::from_secs(3));
    assert_eq!(check.fastinter, Duration::from_secs(3));
    assert_eq!((check.rise, check.fall), (2, 3));
    assert_eq!(l.config.frontends[0].default_backend, Some(0));
    assert_eq!(l.config.frontends[0].mode, Mode::Tcp);
}

#[test]
fn named_defaults_and_from() {
    let text = format!(
        "defaults base\n  mode http\n{TIMEOUTS}\
         defaults other\n  mode tcp\n{TIMEOUTS}\
         backend b1 from base\n\
         backend b2\n"
    );
    let l = ok(&text);
    assert_eq!(l.config.backends[0].mode, Mode::Http);
    // Without `from`, the most recent defaults section applies.
    assert_eq!(l.config.backends[1].mode, Mode::Tcp);
    let e = errors("defaults base\nbackend b from bsae\n");
    assert_eq!(
        e,
        ["[ALERT] t.cfg:2: backend 'b': 'from bsae': no defaults section named 'bsae' is declared before this line; did you mean 'base'?"]
    );
}

#[test]
fn listen_is_a_frontend_and_a_backend_sharing_an_id() {
    let text = format!(
        "defaults\n{TIMEOUTS}frontend fe\n  bind :1\n  default_backend app\n\
         listen app\n  bind :2\n  server a 127.0.0.1:9000\n  server b 127.0.0.1:9001 weight 0 backup\n"
    );
    let l = ok(&text);
    let c = &l.config;
    assert_eq!(c.frontends.len(), 2);
    assert_eq!(c.backends.len(), 1);
    assert_eq!(
        (c.frontends[0].id, c.frontends[1].id, c.backends[0].id),
        (1, 2, 2)
    );
    assert_eq!(c.frontends[1].default_backend, Some(0));
    assert_eq!(c.backends[0].servers[1].id, 2);
    assert!(c.backends[0].servers[1].backup);
    assert_eq!(c.backends[0].servers[1].weight, 0);
}

#[test]
fn log_global_expands_and_several_globals_merge() {
    let text = format!(
        "global\n  log stdout format raw local0\nglobal\n  nbthread 2\n  cpu-map auto:1/1-2 0-1\n\
         defaults\n  log global\n{TIMEOUTS}backend b\n  log 127.0.0.1:514 local1 info\n"
    );
    let l = ok(&text);
    let c = &l.config;
    assert_eq!(c.global.nbthread, Some(2));
    assert_eq!(c.global.cpu_map.len(), 2);
    assert_eq!(c.backends[0].logs.len(), 2);
    assert_eq!(c.backends[0].logs[1].level.as_deref(), Some("info"));
}

#[test]
fn references_modes_and_duplicates() {
    let text = format!(
        "defaults\n{TIMEOUTS}frontend fe\n  bind :1\n  mode http\n  use_backend bee\n  default_backend be\n\
         backend be\nbackend be\n  server s 127.0.0.1:1\n  server s 127.0.0.1:2\n"
    );
    let e = errors(&text);
    assert_eq!(
        e,
        [
            "[ALERT] t.cfg:8: frontend 'fe': 'use_backend bee': no backend named 'bee'; did you mean 'be'?".to_string(),
            "[ALERT] t.cfg:9: frontend 'fe': 'default_backend be': backend 'be' is in mode tcp but frontend 'fe' is in mode http; the modes must match".to_string(),
            "[ALERT] t.cfg:11: backend 'be': backend name 'be' is already used by backend 'be' declared at t.cfg:10".to_string(),
            "[ALERT] t.cfg:13: backend 'be': server name 's' is already used by the server declared at t.cfg:12".to_string(),
        ]
    );
}

#[test]
fn errors_do_not_stop_parsing() {
    let e =
        errors("global\n  maxconn x\n  nbthrad 2\nfrontend f\n  bind :1\n  timeout client 5q\n");
    assert_eq!(e.len(), 3, "{e:?}");
}

#[test]
fn no_input_panics() {
    // Every prefix of a realistic file, and the file with each line removed, must load or fail
    // with diagnostics, never panic.
    let text = include_str!("../../tests/configs/valid.cfg");
    let cut: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(7).collect();
    for i in cut {
        let _ = load_str("p.cfg", &text[..i]);
    }
    let lines: Vec<&str> = text.lines().collect();
    for skip in 0..lines.len() {
        let t: Vec<&str> = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != skip)
            .map(|(_, l)| *l)
            .collect();
        let _ = load_str("p.cfg", &t.join("\n"));
    }
    for odd in [
        "\\",
        "\"${",
        "\"$",
        "'",
        "bind",
        "frontend",
        "defaults from",
        "global\ncpu-map",
        "global\nlog",
        "listen x\nbind :1-",
        "backend b\nserver",
        "backend b\nserver s [::1",
    ] {
        let _ = load_str("p.cfg", odd);
    }
}

#[test]
fn idle_pool_shared_and_log_health_checks() {
    let cfg = |v: &str| {
        format!(
            "global\n  tune.idle-pool.shared {v}\ndefaults\n{TIMEOUTS}\
             backend be\n  option log-health-checks\n  server s 127.0.0.1:80 check\n"
        )
    };
    let l = ok(&cfg("off"));
    assert!(l.config.backends[0].options.log_health_checks);
    assert!(!l.config.global.idle_pool_shared);
    assert!(ok(&cfg("on")).config.global.idle_pool_shared);
    let bad = errors(&cfg("maybe"));
    assert!(
        bad[0].contains("expects either 'on' or 'off' but got 'maybe'"),
        "{bad:?}"
    );
}

/// Fuzzing regression (fuzz/seeds/config/regress_tune_no_line): the comparison of
/// `tune.maxrewrite` with `tune.bufsize` was reported without a line.
#[test]
fn fuzz_regress_tune_maxrewrite_alert_has_a_line() {
    let text = "global\n  tune.bufsize 1k\n  tune.maxrewrite 4k\n  maxconn 10\n";
    assert_eq!(
        errors(text),
        ["[ALERT] t.cfg:3: global: 'tune.maxrewrite' (4096) must be smaller than 'tune.bufsize' (1024)"]
    );
}

/// HAProxy 2.6 (checked with its own binary and reg-test checks/http-check-send): a proxy's own
/// `option httpchk` or `http-check` line drops the check it inherited from defaults (its
/// `http-check send|expect` lines, and with an `http-check` line the request line too);
/// without either, the whole check applies.
#[test]
fn own_option_httpchk_replaces_inherited_http_check_rules() {
    let text = format!(
        "defaults\n{TIMEOUTS}  option httpchk GET /status HTTP/1.1\n  http-check send hdr Host h\n  \
         http-check expect status 204\n\
         backend own\n  option httpchk\n  server s 127.0.0.1:80 check\n\
         backend inherits\n  server s 127.0.0.1:80 check\n\
         backend adds\n  http-check send hdr X 1\n  option httpchk\n  server s 127.0.0.1:80 check\n"
    );
    let l = ok(&text);
    let be = |n: &str| l.config.backends.iter().find(|b| b.name == n).unwrap();
    let own = &be("own").options;
    assert_eq!(own.http_check, Default::default());
    assert_eq!(own.httpchk.as_ref().unwrap().method, "OPTIONS");
    let inherits = &be("inherits").options;
    assert_eq!(
        inherits.http_check.headers,
        [("Host".to_string(), "h".to_string())]
    );
    assert!(!inherits.http_check.steps.is_empty());
    let adds = &be("adds").options;
    assert_eq!(
        adds.http_check.headers,
        [("X".to_string(), "1".to_string())]
    );
    assert!(adds.http_check.steps.is_empty());
    assert_eq!(adds.httpchk.as_ref().unwrap().method, "OPTIONS");
    let text = format!(
        "defaults
{TIMEOUTS}  option httpchk GET /status HTTP/1.1
  http-check send hdr Host h
         backend own_send
  http-check send hdr Host o
  server s 127.0.0.1:80 check
"
    );
    let l = ok(&text);
    let o = &l.config.backends[0].options;
    assert_eq!(
        o.http_check.headers,
        [("Host".to_string(), "o".to_string())]
    );
    let req = o.httpchk.as_ref().unwrap();
    assert_eq!(
        (&*req.method, &*req.uri, &*req.version),
        ("OPTIONS", "/", "HTTP/1.0")
    );
}

#[test]
fn unix_bind_sets_the_defaults_of_the_unix_binds_after_it() {
    use super::model::{ListenAddr, UnixAddr, UnixPerms};
    let l = ok(&format!(
        "defaults\n  mode tcp\n{TIMEOUTS}\
         frontend early\n  bind unix@/run/early.sock\n  default_backend b\n\
         global\n  unix-bind prefix /chroot mode 640 uid 7\n\
         frontend late\n  bind unix@/run/a.sock\n  bind /run/b.sock mode 600 gid 9\n  bind abns@c\n  bind 127.0.0.1:80\n  default_backend b\n\
         backend b\n  server s unix@/run/s.sock\n"
    ));
    let binds = |fe: &str| -> Vec<(ListenAddr, UnixPerms)> {
        let f = l.config.frontends.iter().find(|f| f.name == fe).unwrap();
        f.binds
            .iter()
            .map(|b| (b.addr.clone(), b.unix_perms))
            .collect()
    };
    let path = |p: &str| ListenAddr::Unix(UnixAddr::Path(p.into()));
    let perms = |mode, uid, gid| UnixPerms { mode, uid, gid };
    // Read before `unix-bind`: untouched, as in HAProxy.
    assert_eq!(
        binds("early"),
        [(path("/run/early.sock"), UnixPerms::default())]
    );
    assert_eq!(
        binds("late"),
        [
            (
                path("/chroot/run/a.sock"),
                perms(Some(0o640), Some(7), None)
            ),
            (
                path("/chroot/run/b.sock"),
                perms(Some(0o600), Some(7), Some(9))
            ),
            // An abstract socket has no file to own.
            (
                ListenAddr::Unix(UnixAddr::Abstract("c".into())),
                UnixPerms::default()
            ),
            (
                ListenAddr::Inet("127.0.0.1:80".parse().unwrap()),
                UnixPerms::default()
            ),
        ]
    );
    let b = l.config.backends.iter().find(|b| b.name == "b").unwrap();
    assert_eq!(
        b.servers[0].unix,
        Some(UnixAddr::Path("/run/s.sock".into()))
    );
}

/// Issue 15 (reg-test http-rules/default_rules): request capture slots form one list in line
/// order, the slots of the rules inherited from a named `defaults` first.
#[test]
fn capture_slots_are_numbered_in_line_order_inherited_first() {
    let text = format!(
        "defaults d\n  mode http\n{TIMEOUTS}  http-request capture hdr(host) len 64\n\
         frontend fe from d\n  bind :8080\n  http-request capture hdr(x-a) len 4\n\
         capture request header X-Cap len 8\n  declare capture response len 3\n\
         declare capture request len 6\n  tcp-request content capture hdr(x-c) len 5\n\
         http-request capture hdr(x-b) id 3\n  http-request return status 200\n"
    );
    let l = ok(&text);
    let fe = &l.config.frontends[0];
    let slots: Vec<(bool, &str, usize)> = fe
        .options
        .captures
        .iter()
        .map(|c| (c.response, c.name.as_str(), c.len))
        .collect();
    assert_eq!(
        slots,
        [
            (false, "", 64),
            (false, "", 4),
            (false, "X-Cap", 8),
            (false, "", 6),
            (false, "", 5),
            (true, "", 3),
        ]
    );
}

/// HAProxy's rules about who may inherit a `defaults` section's rules: a backend not its
/// `tcp-request connection|session` rules, a frontend not its `tcp-response content` ones.
#[test]
fn rule_inheritance_follows_the_proxy_side() {
    let fe = format!(
        "defaults d\n{TIMEOUTS}  tcp-response inspect-delay 5s\n  tcp-response content accept\n\
         frontend fe from d\n  mode tcp\n  bind 127.0.0.1:8000\n"
    );
    let e = errors(&fe);
    assert!(
        e.iter().any(|m| m.contains("t.cfg:7")
            && m.contains("a frontend section cannot inherit")
            && m.contains("'tcp-response content'")),
        "{e:?}"
    );
    let be = format!(
        "defaults d\n{TIMEOUTS}  tcp-request session accept\n\
         backend be from d\n  mode tcp\n  server s 127.0.0.1:80\n"
    );
    let e = errors(&be);
    assert!(
        e.iter()
            .any(|m| m.contains("a backend section cannot inherit")),
        "{e:?}"
    );
}

/// Proxy ids as HAProxy numbers them: explicit `id`s kept, the others the first free id from
/// a counter that every proxy moves on (from 2 with a stats socket, whose CLI proxy is
/// first); a repeated `id` is an error naming both.
#[test]
fn proxy_ids_follow_haproxys_numbering() {
    let text = format!(
        "global\n  stats socket /tmp/bascule-ids.sock\ndefaults\n{TIMEOUTS}\
         listen fe1\n  bind :1\nlisten fe2\n  id 1\n  bind :2\nlisten fe3\n  id 2\n  bind :3\n\
         backend be\n  server s 127.0.0.1:80\n"
    );
    let l = ok(&text);
    let ids: Vec<u32> = l.config.frontends.iter().map(|f| f.id).collect();
    assert_eq!(ids, [3, 1, 2]);
    assert_eq!(l.config.backends[3].id, 6);
    let text = format!("defaults\n{TIMEOUTS}listen a\n  bind :1\nlisten b\n  bind :2\n");
    let ids: Vec<u32> = ok(&text).config.frontends.iter().map(|f| f.id).collect();
    assert_eq!(ids, [1, 2]);
    let dup =
        format!("defaults\n{TIMEOUTS}listen a\n  id 3\n  bind :1\nlisten b\n  id 3\n  bind :2\n");
    let e = errors(&dup);
    assert!(
        e.iter()
            .any(|m| m.contains("reuses same custom id as proxy a")),
        "{e:?}"
    );
    assert!(!errors(&format!(
        "defaults\n{TIMEOUTS}listen a\n  id 0\n  bind :1\n"
    ))
    .is_empty());
}

#[test]
fn ring_servers_and_log_forward_binds_take_tls_options() {
    let crt = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls");
    let l = ok(&format!(
        "global\n  insecure-fork-wanted\n\
         ring r\n  server a 127.0.0.1:6514 ssl verify required ca-file {crt}/ca.pem sni str(www.example.com)\n\
         \x20 server b 127.0.0.1:6515 log-proto octet-count\n\
         log-forward f\n  bind 127.0.0.1:6514 ssl crt {crt}/www-ecdsa.pem\n  bind 127.0.0.1:6515\n  log ring@r local0\n"
    ));
    let r = &l.config.rings[0];
    let tls = r.servers[0].tls.as_ref().unwrap_or_else(|| unreachable!());
    assert!(tls.config.is_some());
    assert_eq!(tls.sni.as_deref(), Some("www.example.com"));
    assert!(r.servers[1].tls.is_none());
    let f = &l.config.log_forwards[0];
    assert!(f.binds[0].tls.is_some());
    assert!(f.binds[1].tls.is_none());
    // `insecure-fork-wanted` changes nothing here, and says so without a warning.
    let notice = l
        .warnings
        .iter()
        .find(|d| d.to_string().contains("insecure-fork-wanted"))
        .unwrap_or_else(|| unreachable!());
    assert!(notice.to_string().starts_with("[NOTICE]"));

    let errs = errors(
        "ring r\n  server a 127.0.0.1:6514 ssl verify none sni req.hdr(host)\n\
         \x20 server b 127.0.0.1:6515 ssl verify none check\n\
         \x20 server c 127.0.0.1:6516 ssl\n\
         log-forward f\n  bind 127.0.0.1:6514 ssl\n  bind 127.0.0.1:6515 accept-proxy\n",
    );
    assert_eq!(errs.len(), 5, "{errs:#?}");
    assert!(
        errs[0].contains("only a constant 'str(NAME)'"),
        "{}",
        errs[0]
    );
    assert!(errs[1].contains("option 'check' is not supported yet in a ring section"));
    assert!(errs[2].contains("no CA file specified"), "{}", errs[2]);
    assert!(errs[3].contains("'bind'"), "{}", errs[3]);
    assert!(errs[4].contains("option 'accept-proxy' is not supported yet"));
}

#[test]
fn track_resolves_with_haproxys_refusals() {
    let l = ok(&format!(
        "defaults\n{TIMEOUTS}backend a\n  server s 127.0.0.1:80 check\n  server t 127.0.0.1:80 track s\n  server u 127.0.0.1:80 track b/v\n\
         backend b\n  server v 127.0.0.1:80 track a/t\n  server w 127.0.0.1:80 track a/s\n"
    ));
    let (a, b) = (&l.config.backends[0], &l.config.backends[1]);
    assert_eq!(a.servers[1].track, Some((0, 0)));
    assert_eq!(a.servers[2].track, Some((1, 0)));
    assert_eq!(b.servers[0].track, Some((0, 1)));
    // Tracked servers may not be removed at run time; trackers may.
    assert!(a.servers[0].pinned && a.servers[1].pinned && b.servers[0].pinned);
    assert!(!a.servers[2].pinned && !b.servers[1].pinned);
    let errs = errors(&format!(
        "defaults\n{TIMEOUTS}backend a\n  server n 127.0.0.1:80\n  server t 127.0.0.1:80 track n\n\
         \x20 server x 127.0.0.1:80 track y\n  server y 127.0.0.1:80 track x\n\
         \x20 server m 127.0.0.1:80 track zz\n  server p 127.0.0.1:80 track nob/n\n\
         \x20 server c 127.0.0.1:80 track x check\n"
    ));
    assert_eq!(errs.len(), 5, "{errs:#?}");
    assert!(errs[0].ends_with(
        "'server t': unable to use a/n for tracking as it does not have any check nor agent enabled."
    ));
    assert!(errs[1].ends_with(
        "'server y': unable to track a/x as it belongs to a tracking chain looping back to a/y."
    ));
    assert!(errs[2].ends_with("'server m': unable to find required server 'zz' for tracking."));
    assert!(errs[3].ends_with("'server p': unable to find required proxy 'nob' for tracking."));
    assert!(errs[4].ends_with("'server c': unable to enable checks and tracking at the same time!"));
}

#[test]
fn a_server_without_address_may_be_checked_without_a_port() {
    ok(&format!(
        "defaults\n{TIMEOUTS}backend a\n  server s : check\n  server t 0.0.0.0 check\n"
    ));
    let errs = errors(&format!(
        "defaults\n{TIMEOUTS}backend a\n  server s 127.0.0.1 check\n  server t 0.0.0.0 check addr 127.0.0.1\n"
    ));
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs
        .iter()
        .all(|e| e.contains("has neither service port nor check port")));
}
