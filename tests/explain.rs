//! `bascule --explain`: the real binary on tests/explain/*.cfg, its report compared with
//! golden files (tests/explain/NAME.out). The reports hold nothing that varies between runs:
//! addresses are given, balancers are fresh.
//!
//! Run with `BLESS=1` to rewrite the golden files from the current output (then review the
//! diff).

use std::path::Path;
use std::process::Command;

/// (golden file name, arguments after `--explain -f web.cfg`).
const CASES: &[(&str, &[&str])] = &[
    // An ACL that matches: the first rule denies.
    (
        "acl_matches",
        &[
            "--src",
            "10.1.2.3:4000",
            "--request",
            "GET /index.html HTTP/1.1",
            "-H",
            "Host: www.example.com",
        ],
    ),
    // No rule answers: default_backend, round-robin's first pick.
    (
        "acl_does_not_match",
        &[
            "--src",
            "127.0.0.1:4000",
            "--request",
            "GET /index.html HTTP/1.1",
            "-H",
            "Host: www.example.com",
        ],
    ),
    // set-header, then an ACL on that header: use_backend api, its own rules.
    (
        "header_then_acl",
        &[
            "--request",
            "GET /api/v1 HTTP/1.1",
            "-H",
            "Host: www.example.com",
        ],
    ),
    // nbsrv(api) drops below 2 with a server down: the backend answers 503.
    (
        "nbsrv_down",
        &[
            "--down",
            "api/p2",
            "--request",
            "GET /api/v1 HTTP/1.1",
            "-H",
            "Host: www.example.com",
        ],
    ),
    // redirect scheme, with the Location it would send.
    (
        "redirect",
        &[
            "--request",
            "GET /x?a=1 HTTP/1.1",
            "-H",
            "Host: old.example.com",
        ],
    ),
    // use_backend by Host, balance uri (a hash key), and the response rules.
    (
        "use_backend_by_host",
        &[
            "--request",
            "GET /x?a=1 HTTP/1.1",
            "-H",
            "Host: static.example.com",
            "--response",
            "HTTP/1.1 200 OK",
            "-H",
            "Content-Length: 0",
        ],
    ),
    // A request the strict parser rejects before any rule.
    (
        "bad_request",
        &[
            "--request",
            "GET / HTTP/1.1",
            "-H",
            "Host: a",
            "-H",
            "Host: b",
        ],
    ),
    // Edits of the request line and headers, set-src, allow, forwardfor, the response path.
    (
        "rewrite_and_response",
        &[
            "--frontend",
            "rewrite",
            "--request",
            "GET /old/a HTTP/1.1",
            "-H",
            "Host: h",
            "-H",
            "X-Debug: 1",
            "-H",
            "X-Real-IP: 203.0.113.7",
            "--response",
            "HTTP/1.1 200 OK",
            "-H",
            "Server: nginx",
            "-H",
            "Content-Length: 2",
        ],
    ),
    // dst: the frontend's bind address unless given.
    (
        "dst_given",
        &[
            "--frontend",
            "rewrite",
            "--dst",
            "192.0.2.80:443",
            "--request",
            "GET / HTTP/1.1",
            "-H",
            "Host: h",
        ],
    ),
];

/// Cookie persistence, on tests/explain/sticky.cfg: (golden file name, arguments).
const COOKIE_CASES: &[(&str, &[&str])] = &[
    // The persistence cookie picks the server, and `insert indirect` removes it.
    (
        "cookie_valid",
        &[
            "--request",
            "GET / HTTP/1.1",
            "-H",
            "Host: h",
            "-H",
            "Cookie: a=1; SRV=k2",
        ],
    ),
    // A cookie naming a server that is down: balanced instead.
    (
        "cookie_down",
        &[
            "--down",
            "sticky/k2",
            "--request",
            "GET / HTTP/1.1",
            "-H",
            "Host: h",
            "-H",
            "Cookie: SRV=k2",
        ],
    ),
];

#[test]
fn cookie_reports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/explain");
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    for (name, args) in COOKIE_CASES {
        let out = Command::new(env!("CARGO_BIN_EXE_bascule"))
            .current_dir(&root)
            .args(["-q", "--explain", "-f", "sticky.cfg"])
            .args(*args)
            .output()
            .unwrap();
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        let golden = root.join(format!("{name}.out"));
        if bless {
            std::fs::write(&golden, &got).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        assert_eq!(got, expected, "{name}: report differs");
    }
}

#[test]
fn stick_rules_say_what_they_would_store() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/explain");
    let out = Command::new(env!("CARGO_BIN_EXE_bascule"))
        .current_dir(&root)
        .args([
            "-q",
            "--explain",
            "-f",
            "stick.cfg",
            "--request",
            "GET / HTTP/1.1",
        ])
        .args(["-H", "Host: h", "-H", "x-user: u1"])
        .output()
        .unwrap();
    let r = String::from_utf8_lossy(&out.stdout);
    assert!(
        r.contains("stick rules: no stored server for this request"),
        "{r}"
    );
    assert!(
        r.contains("stick: key 'u1' will be stored in table be with the server that answers"),
        "{r}"
    );
    assert!(r.contains("outcome: sent to backend be, server s1"), "{r}");
}

fn run(args: &[&str]) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/explain");
    Command::new(env!("CARGO_BIN_EXE_bascule"))
        .current_dir(root)
        .args(["-q", "--explain", "-f", "web.cfg"])
        .args(args)
        .output()
        .expect("run bascule")
}

#[test]
fn golden_reports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/explain");
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    for (name, args) in CASES {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        let got = String::from_utf8(out.stdout).unwrap();
        let path = root.join(format!("{name}.out"));
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            failures.push(format!("--- {name} (want)\n{want}--- {name} (got)\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn specific_lines() {
    let report = |args: &[&str]| String::from_utf8(run(args).stdout).unwrap();
    let r = report(&[
        "--src",
        "10.9.9.9",
        "--request",
        "GET / HTTP/1.1",
        "-H",
        "Host: a",
    ]);
    assert!(r.contains(
        "http-request deny if blacklist  -> yes (blacklist: yes [src = 10.9.9.9]): 403 Forbidden (stops)"
    ), "{r}");
    let r = report(&["--request", "GET /api HTTP/1.1", "-H", "Host: a"]);
    assert!(r.contains("adds \"X-Tag: api\""), "{r}");
    assert!(
        r.contains("(tagged: yes [req.hdr = \"api\"]): backend api"),
        "{r}"
    );
    assert!(r.contains("outcome: sent to backend api, server p1"), "{r}");
    let r = report(&[
        "--down",
        "api/p1",
        "--down",
        "api/p2",
        "--request",
        "GET /api HTTP/1.1",
        "-H",
        "Host: a",
    ]);
    assert!(r.contains("(unless: healthy: no [nbsrv = 0])"), "{r}");
    let r = report(&[
        "--request",
        "GET /x HTTP/1.1",
        "-H",
        "Host: old.example.com",
    ]);
    assert!(
        r.contains("301 Moved Permanently Location: https://old.example.com/x (stops)"),
        "{r}"
    );
}

#[test]
fn command_line_errors() {
    let out = run(&[
        "--frontend",
        "nope",
        "--request",
        "GET / HTTP/1.1",
        "-H",
        "Host: a",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no frontend named 'nope'"));
    let out = run(&[
        "--down",
        "app/zz",
        "--request",
        "GET / HTTP/1.1",
        "-H",
        "Host: a",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no server 'zz'"));
    // A configuration with errors: the usual diagnostics, exit 1 as with -c.
    let out = Command::new(env!("CARGO_BIN_EXE_bascule"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/explain"))
        .args([
            "--explain",
            "-f",
            "broken.cfg",
            "--request",
            "GET / HTTP/1.1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken.cfg:3") && err.contains("configuration has errors"),
        "{err}"
    );
}
