//! Differential HTTP/1 test: every case of `requests.txt` and `responses.txt` goes through
//! Debian's haproxy 2.6 (the reference) and through Bascule, each in front of a recording backend
//! with a strict parser of its own (`backend.rs`), and the outcomes are compared.
//!
//! An outcome is what the client got (statuses, and for response cases the framing and body
//! length of each response; unparsable bytes; whether the connection closed) and what the backend
//! received (each request's method, target, version, framing and body length, or the strict
//! parser's error). For response cases it also says whether a second request reused the server
//! connection the case's response came on.
//!
//! Bascule passes a case when its outcome equals haproxy's, or when it is stricter (it answered an
//! error where haproxy went on, forwarded a prefix of what haproxy forwarded, closed where haproxy
//! kept the connection) and the case's `stricter:` line says why. An ambiguous message that
//! reaches the backend or the client through Bascule always fails.
//!
//! The table of outcomes goes to `$CARGO_TARGET_TMPDIR/CONFORMANCE.md`, and to
//! `docs/CONFORMANCE.md` with `UPDATE_CONFORMANCE=1`.
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

#[path = "../support/mod.rs"]
mod support;

mod backend;
mod client;
mod corpus;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use backend::{Event, Recorder};
use corpus::Case;

const HAPROXY: &str = "/usr/sbin/haproxy";
/// Frontend/backend pairs per proxy: cases are spread over them and run concurrently.
const LANES: usize = 3;
const DEFAULT_REQUEST: &[u8] = b"GET /r HTTP/1.1\r\nHost: a\r\n\r\n";
const SECOND_REQUEST: &[u8] = b"GET /second HTTP/1.1\r\nHost: a\r\n\r\n";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Request,
    Response,
}

/// One case through one proxy.
#[derive(Debug, Clone, Default)]
struct Outcome {
    client: client::Got,
    backend: Vec<Event>,
    /// Response cases: what the second request got.
    second: Option<client::Got>,
    /// Response cases: the second request reached the backend on the connection that carried
    /// the case's response (`None`: one of them did not reach it).
    reused: Option<bool>,
}

impl Outcome {
    fn client_text(got: &client::Got, detailed: bool) -> String {
        // A 100 (Continue) depends on when the proxy forwarded the body, not on framing: the
        // request cases leave it out (the backend sends one when it waits for a body).
        let mut parts: Vec<String> = got
            .responses
            .iter()
            .filter(|r| detailed || r.status != 100)
            .map(|r| {
                if detailed {
                    r.describe()
                } else {
                    match &r.ambiguous {
                        Some(a) => format!("{} AMBIGUOUS({a})", r.status),
                        None => r.status.to_string(),
                    }
                }
            })
            .collect();
        if parts.is_empty() {
            parts.push("no response".into());
        }
        let mut s = parts.join(" + ");
        if let Some(t) = &got.trailing {
            s.push_str(&format!(" + {t}"));
        }
        s.push_str(if got.closed { ", closed" } else { ", open" });
        s
    }

    fn backend_text(&self) -> String {
        if self.backend.is_empty() {
            return "nothing".into();
        }
        self.backend
            .iter()
            .map(|e| match e {
                Event::Request { req, .. } => req.describe(),
                Event::ParseError { why, .. } => format!("PARSE ERROR: {why}"),
                Event::PartialHead { bytes, .. } => format!("partial head ({bytes} bytes)"),
            })
            .collect::<Vec<_>>()
            .join(" + ")
    }

    fn second_text(&self) -> Option<String> {
        let second = self.second.as_ref()?;
        let reuse = match self.reused {
            Some(true) => "same server connection",
            Some(false) => "new server connection",
            None => "server connection n/a",
        };
        Some(format!("{} ({reuse})", Outcome::client_text(second, true)))
    }

    /// The parts that are compared, as shown in the table.
    fn parts(&self, kind: Kind) -> Vec<(&'static str, String)> {
        let mut v = vec![
            (
                "client",
                Outcome::client_text(&self.client, kind == Kind::Response),
            ),
            ("backend", self.backend_text()),
        ];
        if let Some(s) = self.second_text() {
            v.push(("next request", s));
        }
        v
    }

    fn text(&self, kind: Kind) -> String {
        self.parts(kind)
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn ambiguity(&self) -> Option<String> {
        for e in &self.backend {
            if let Event::ParseError { why, raw, .. } = e {
                return Some(format!(
                    "an ambiguous request reached the backend ({why}): {raw}"
                ));
            }
        }
        let all = self.client.responses.iter().chain(
            self.second
                .as_ref()
                .map(|s| &s.responses[..])
                .unwrap_or(&[]),
        );
        for r in all {
            if let Some(a) = &r.ambiguous {
                return Some(format!("an ambiguous response reached the client: {a}"));
            }
        }
        None
    }
}

enum Verdict {
    Equal,
    /// Both proxies refused, and the server saw no complete request (or response relay) more
    /// from one than from the other; the reason says how the outcomes still differ.
    SameRefusal(String),
    Stricter(String),
    Fail(String),
}

/// The requests the backend received whole: an incomplete request (a head whose body never
/// came, cut when the proxy closed the connection or the case ended) is not one a server can
/// act on, so it does not count when outcomes are compared (the table still shows it).
fn settled(o: &Outcome) -> Vec<String> {
    o.backend
        .iter()
        .filter_map(|e| match e {
            Event::Request { req, .. } if req.complete => Some(req.describe()),
            Event::Request { .. } | Event::PartialHead { .. } => None,
            Event::ParseError { why, .. } => Some(format!("PARSE ERROR: {why}")),
        })
        .collect()
}

fn is_error(status: u16) -> bool {
    status >= 400
}

/// A response as compared: a refusal (an error status, or a body cut short by a close) is
/// `refused` whatever its status; request cases compare statuses, response cases also framing
/// and body length.
fn response_key(kind: Kind, r: &client::Resp) -> String {
    if is_error(r.status) || r.truncated {
        return "refused".into();
    }
    match kind {
        Kind::Request => r.status.to_string(),
        Kind::Response => r.describe(),
    }
}

/// A response as compared by [`verdict`]: two are equal when their keys are.
struct RespKey {
    /// See [`response_key`].
    key: String,
    status: u16,
    body: usize,
    ambiguous: bool,
}

impl PartialEq for RespKey {
    fn eq(&self, other: &RespKey) -> bool {
        self.key == other.key
    }
}

impl RespKey {
    /// Bascule's response `self` is no looser than haproxy's `h`: the same, or the same status
    /// and body where haproxy relayed an ambiguous message and Bascule a clean one.
    fn no_looser_than(&self, h: &RespKey) -> bool {
        self == h
            || (h.ambiguous
                && !self.ambiguous
                && self.key != "refused"
                && self.status == h.status
                && self.body == h.body)
    }
}

/// The outcome as compared by [`verdict`].
#[derive(PartialEq)]
struct Key {
    responses: Vec<RespKey>,
    trailing: Option<String>,
    closed: bool,
    backend: Vec<String>,
    second: Option<Vec<String>>,
    reused: Option<bool>,
}

fn key(kind: Kind, o: &Outcome) -> Key {
    let responses = o
        .client
        .responses
        .iter()
        .filter(|r| kind == Kind::Response || r.status != 100)
        .map(|r| RespKey {
            key: response_key(kind, r),
            status: r.status,
            body: r.body,
            ambiguous: r.ambiguous.is_some(),
        })
        .collect();
    Key {
        responses,
        trailing: o.client.trailing.clone(),
        closed: o.client.closed,
        backend: settled(o),
        second: o.second.as_ref().map(|s| {
            s.responses
                .iter()
                .map(|r| response_key(Kind::Response, r))
                .collect()
        }),
        reused: o.reused,
    }
}

/// Bascule's outcome `b` against haproxy's `h`.
fn verdict(kind: Kind, case: &Case, h: &Outcome, b: &Outcome) -> Verdict {
    if let Some(why) = b.ambiguity() {
        return Verdict::Fail(why);
    }
    if h.parts(kind) == b.parts(kind) {
        return Verdict::Equal;
    }
    let (hk, bk) = (key(kind, h), key(kind, b));
    if hk == bk {
        let mut why = Vec::new();
        let statuses = |o: &Outcome| {
            o.client
                .responses
                .iter()
                .map(|r| {
                    if r.truncated {
                        format!("{} cut short", r.status)
                    } else {
                        r.status.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" + ")
        };
        if statuses(h) != statuses(b) {
            why.push(format!(
                "both refuse, haproxy with {}, Bascule with {}",
                statuses(h),
                statuses(b)
            ));
        }
        if h.backend_text() != b.backend_text() {
            why.push(
                "an incomplete request reached the server through one of them only (cut before \
                 its end: no server acts on it)"
                    .to_string(),
            );
        }
        return Verdict::SameRefusal(why.join("; "));
    }
    // Stricter: Bascule forwarded a prefix of what haproxy forwarded, its responses are
    // haproxy's up to one refusal (or fewer), it closed whenever haproxy closed, it sent the
    // client no bytes haproxy did not, and a second request fared no better.
    let prefix =
        bk.backend.len() <= hk.backend.len() && hk.backend[..bk.backend.len()] == bk.backend[..];
    let common = hk
        .responses
        .iter()
        .zip(&bk.responses)
        .take_while(|(h, b)| b.no_looser_than(h))
        .count();
    let responses_ok = bk.responses.len() == common
        || (bk.responses.len() == common + 1 && bk.responses[common].key == "refused");
    let trailing_ok = bk.trailing.is_none() || bk.trailing == hk.trailing;
    let closed_ok = !hk.closed || bk.closed;
    let second_ok = {
        let reuse_ok = hk.reused == Some(true) || bk.reused != Some(true);
        let refused = bk
            .second
            .as_ref()
            .is_none_or(|s| s.iter().all(|r| r == "refused"));
        reuse_ok && (hk.second == bk.second || refused)
    };
    if prefix && responses_ok && trailing_ok && closed_ok && second_ok {
        return match &case.stricter {
            Some(why) => Verdict::Stricter(why.clone()),
            None => Verdict::Fail(
                "Bascule is stricter than haproxy here, but the case has no `stricter:` reason"
                    .into(),
            ),
        };
    }
    let mut why = Vec::new();
    if !prefix {
        why.push("the backend received something haproxy did not forward");
    }
    if !responses_ok {
        why.push("the client got different responses");
    }
    if !trailing_ok {
        why.push("the client got bytes haproxy did not send");
    }
    if !closed_ok {
        why.push("Bascule kept open a connection haproxy closed");
    }
    if !second_ok {
        why.push("the next request fared differently");
    }
    Verdict::Fail(why.join("; "))
}

/// A running haproxy.
struct Haproxy {
    child: Child,
    dir: support::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_ports(ports: &[u16], child: &mut Child, log: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for &p in ports {
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{what} exited early ({status}):\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            if TcpStream::connect(("127.0.0.1", p)).is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "{what} did not listen on {p}");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The configuration both proxies run: one frontend per lane, each to its own backend.
fn config(ports: &[u16], servers: &[u16]) -> String {
    let mut cfg = String::from(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n    option http-keep-alive\n",
    );
    for (i, (p, s)) in ports.iter().zip(servers).enumerate() {
        cfg.push_str(&format!(
            "frontend fe{i}\n    bind 127.0.0.1:{p}\n    default_backend be{i}\nbackend be{i}\n    server s{i} 127.0.0.1:{s}\n"
        ));
    }
    cfg
}

fn start_haproxy(bin: &str, cfg: &str, ports: &[u16]) -> Haproxy {
    let dir = support::TempDir::new("haproxy");
    let path = dir.path("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap();
    let log = dir.path("stderr");
    let mut child = Command::new(bin)
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.path("stdout")).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn haproxy");
    wait_ports(ports, &mut child, &log, "haproxy");
    Haproxy { child, dir }
}

fn first_line(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == b'\n').unwrap_or(b.len());
    &b[..end]
}

fn run_request(port: u16, rec: &Recorder, case: &Case) -> Outcome {
    rec.begin(None);
    let mut s = client::connect(port);
    client::send(&mut s, &case.data);
    let http10 = first_line(&case.data).windows(8).any(|w| w == b"HTTP/1.0");
    let got = client::read_responses(&mut s, client::Asked::of(&case.data), http10);
    client::close(s);
    let backend = rec.end();
    Outcome {
        client: got,
        backend,
        second: None,
        reused: None,
    }
}

fn run_response(port: u16, rec: &Recorder, case: &Case) -> Outcome {
    rec.begin(Some((case.data.clone(), case.close_after)));
    let request = case.request.as_deref().unwrap_or(DEFAULT_REQUEST);
    let mut s = client::connect(port);
    client::send(&mut s, request);
    let http10 = first_line(request).windows(8).any(|w| w == b"HTTP/1.0");
    let got = client::read_responses(&mut s, client::Asked::of(request), http10);
    let mut s2 = if got.closed {
        client::close(s);
        client::connect(port)
    } else {
        s
    };
    client::send(&mut s2, SECOND_REQUEST);
    let second = client::read_responses(&mut s2, client::Asked::Other, false);
    client::close(s2);
    let backend = rec.end();
    let conn_of = |second: bool| {
        backend.iter().find_map(|e| match e {
            Event::Request { conn, req } if (req.target == "/second") == second => Some(*conn),
            _ => None,
        })
    };
    let reused = match (conn_of(false), conn_of(true)) {
        (Some(a), Some(b)) => Some(a == b),
        _ => None,
    };
    Outcome {
        client: got,
        backend,
        second: Some(second),
        reused,
    }
}

/// Runs `cases` of `kind` through the proxy listening on `ports` (one lane per port and
/// recorder), lanes concurrently; outcomes in case order.
fn run_all(kind: Kind, cases: &[Case], ports: &[u16], recs: &[Recorder]) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = vec![Outcome::default(); cases.len()];
    thread::scope(|scope| {
        let handles: Vec<_> = ports
            .iter()
            .zip(recs)
            .enumerate()
            .map(|(lane, (&port, rec))| {
                scope.spawn(move || {
                    cases
                        .iter()
                        .enumerate()
                        .skip(lane)
                        .step_by(ports.len())
                        .map(|(i, c)| {
                            let o = match kind {
                                Kind::Request => run_request(port, rec, c),
                                Kind::Response => run_response(port, rec, c),
                            };
                            (i, o)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, o) in h.join().expect("a lane panicked") {
                out[i] = o;
            }
        }
    });
    out
}

struct Row<'a> {
    kind: Kind,
    case: &'a Case,
    h: Outcome,
    b: Outcome,
    verdict: Verdict,
}

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('<', "&lt;")
}

fn report(rows: &[Row], requests: usize, responses: usize) -> String {
    let mut s = String::from(
        "# HTTP/1 conformance: Bascule against haproxy 2.6\n\n\
         Generated by `tests/differential/` (do not edit by hand). Regenerate with:\n\n\
         ```sh\nUPDATE_CONFORMANCE=1 cargo test --test differential\n```\n\n\
         Every case of `tests/differential/requests.txt` and `tests/differential/responses.txt` is sent \
         over real sockets on 127.0.0.1 through Debian's haproxy 2.6 (`/usr/sbin/haproxy`, the \
         reference) and through Bascule, both running the same configuration (one `mode http` \
         frontend per lane, `option http-keep-alive`, `nbthread 1`) in front of a recording backend \
         started by the test. The backend parses what it receives with a strict HTTP/1.1 parser of \
         its own (CRLF only, token names, no obs-fold or control bytes, one digits-only \
         `Content-Length`, `Transfer-Encoding` exactly `chunked` and never with `Content-Length`, \
         one `Host`, no `#` in the target, an absolute-form authority equal to `Host`, well-formed \
         chunks) and answers `200` with `Content-Length: 2`; in response cases it answers the \
         case's bytes to the first request instead.\n\n\
         Each outcome gives what the client got (statuses; in response cases each response's \
         framing and body length; `closed` or `open` once the proxy went quiet), what the backend \
         received (each request's method, target, version, framing, body length, or `PARSE \
         ERROR`), and in response cases what a second request got and whether it reused the \
         server connection. A case passes when Bascule's outcome equals haproxy's; or both refuse \
         (`equal refusal`: error statuses may differ, and a request head that one proxy had \
         already sent before refusing its body counts as nothing, since the server sees it cut \
         short); or Bascule is stricter (an error where haproxy went on, less forwarded, a connection closed that \
         haproxy kept) for the reason the case gives; anything looser fails the test, and so does \
         any ambiguous message that Bascule lets reach the backend or the client.\n\n",
    );
    let count = |k: Kind, f: &dyn Fn(&Verdict) -> bool| {
        rows.iter().filter(|r| r.kind == k && f(&r.verdict)).count()
    };
    for (kind, title, n) in [
        (Kind::Request, "Requests", requests),
        (Kind::Response, "Responses", responses),
    ] {
        s.push_str(&format!(
            "## {title}\n\n{n} cases: {} equal, {} equal refusals, {} stricter, {} failing.\n\n\
             | case | source | haproxy 2.6 | Bascule | verdict |\n|---|---|---|---|---|\n",
            count(kind, &|v| matches!(v, Verdict::Equal)),
            count(kind, &|v| matches!(v, Verdict::SameRefusal(_))),
            count(kind, &|v| matches!(v, Verdict::Stricter(_))),
            count(kind, &|v| matches!(v, Verdict::Fail(_))),
        ));
        for r in rows.iter().filter(|r| r.kind == kind) {
            let verdict = match &r.verdict {
                Verdict::Equal => "equal".to_string(),
                Verdict::SameRefusal(why) => format!("equal refusal: {why}"),
                Verdict::Stricter(why) => format!("stricter: {why}"),
                Verdict::Fail(why) => format!("**FAIL**: {why}"),
            };
            s.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                r.case.name,
                md(&r.case.source),
                md(&r.h.text(kind)),
                md(&r.b.text(kind)),
                md(&verdict)
            ));
        }
        s.push('\n');
    }
    s
}

fn load(name: &str, responses: bool) -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/differential")
        .join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    corpus::parse(name, &text, responses)
}

/// `DIFF_ONLY=name,name`: run only these cases (for debugging; the table is then partial and
/// docs/CONFORMANCE.md is not written).
fn only() -> Option<Vec<String>> {
    std::env::var("DIFF_ONLY")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect())
}

#[test]
fn corpus_is_large_enough() {
    let req = load("requests.txt", false);
    let resp = load("responses.txt", true);
    assert!(req.len() >= 150, "{} request cases", req.len());
    assert!(resp.len() >= 50, "{} response cases", resp.len());
}

#[test]
fn bascule_is_never_looser_than_haproxy() {
    let haproxy = std::env::var("BASCULE_DIFF_HAPROXY").unwrap_or_else(|_| HAPROXY.to_string());
    if !Path::new(&haproxy).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{haproxy} is missing: CI must install haproxy (see .ci/run)"
        );
        eprintln!("skipped: haproxy not installed ({haproxy})");
        return;
    }
    let mut requests = load("requests.txt", false);
    let mut responses = load("responses.txt", true);
    let only = only();
    if let Some(names) = &only {
        requests.retain(|c| names.contains(&c.name));
        responses.retain(|c| names.contains(&c.name));
    }
    let started = Instant::now();

    let h_recs: Vec<Recorder> = (0..LANES).map(|_| Recorder::start()).collect();
    let b_recs: Vec<Recorder> = (0..LANES).map(|_| Recorder::start()).collect();
    let h_ports: Vec<u16> = (0..LANES).map(|_| support::free_port()).collect();
    let b_ports: Vec<u16> = (0..LANES).map(|_| support::free_port()).collect();
    let servers = |recs: &[Recorder]| recs.iter().map(|r| r.port).collect::<Vec<_>>();
    let _haproxy = start_haproxy(&haproxy, &config(&h_ports, &servers(&h_recs)), &h_ports);
    let _bascule = support::Proxy::start(&config(&b_ports, &servers(&b_recs)), b_ports[0], &[]);
    let _ = &_haproxy.dir;

    let mut rows = Vec::new();
    for (kind, cases) in [(Kind::Request, &requests), (Kind::Response, &responses)] {
        let (h, b) = thread::scope(|scope| {
            let h = scope.spawn(|| run_all(kind, cases, &h_ports, &h_recs));
            let b = scope.spawn(|| run_all(kind, cases, &b_ports, &b_recs));
            (h.join().unwrap(), b.join().unwrap())
        });
        for ((case, h), b) in cases.iter().zip(h).zip(b) {
            let verdict = verdict(kind, case, &h, &b);
            rows.push(Row {
                kind,
                case,
                h,
                b,
                verdict,
            });
        }
    }
    let elapsed = started.elapsed();

    let text = report(&rows, requests.len(), responses.len());
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("CONFORMANCE.md");
    std::fs::write(&tmp, &text).unwrap();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/CONFORMANCE.md");
    if only.is_some() {
        for r in &rows {
            eprintln!(
                "{}\n  haproxy: {:?}\n  bascule: {:?}",
                r.case.name, r.h, r.b
            );
        }
    } else if std::env::var_os("UPDATE_CONFORMANCE").is_some() {
        std::fs::write(&docs, &text).unwrap();
        eprintln!("wrote {}", docs.display());
    } else if std::fs::read_to_string(&docs).ok().as_deref() != Some(&text) {
        eprintln!(
            "note: docs/CONFORMANCE.md differs from this run's table ({}); \
             regenerate it with UPDATE_CONFORMANCE=1",
            tmp.display()
        );
    }
    eprintln!(
        "{} request and {} response cases in {:.1} s; table in {}",
        requests.len(),
        responses.len(),
        elapsed.as_secs_f64(),
        tmp.display()
    );
    for r in &rows {
        if r.case.stricter.is_some() && matches!(r.verdict, Verdict::Equal) {
            eprintln!(
                "note: case {} has a `stricter:` reason but Bascule equals haproxy there",
                r.case.name
            );
        }
    }

    let failures: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.verdict {
            Verdict::Fail(why) => Some(format!(
                "- {} ({}): {why}\n    bytes:   {}\n    haproxy: {}\n    bascule: {}",
                r.case.name,
                if r.kind == Kind::Request {
                    "request"
                } else {
                    "response"
                },
                corpus::escape(&r.case.data, 300),
                r.h.text(r.kind),
                r.b.text(r.kind)
            )),
            _ => None,
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases fail (Bascule looser than or different from haproxy):\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}
