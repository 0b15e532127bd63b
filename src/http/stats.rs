//! Serving the statistics page (`stats enable`) from an HTTP session: after the `http-request`
//! rules of the proxy that has it and before its `redirect` lines, as HAProxy's stats applet
//! takes the request. The page itself (views, options, admin actions) is `crate::stats::page`;
//! this module runs the `stats http-request` rules, `stats auth` and `stats admin`, and writes
//! the response where the rule phases expect an answer, so that `http-after-response` rules
//! and the log treat it as any response the proxy generates.

use std::io::Write as _;

use crate::config::model::{ProxyRules, StatsPage};
use crate::proto::h1::{BodyKind, RequestHead};
use crate::rules::Source as _;

use super::policy::{self, Head, Stream, Verdict, Work};
use super::txnlog::TxnLog;

/// HAProxy's realm for the page's authentication when none is configured.
const DEFAULT_REALM: &str = "HAProxy Statistics";

/// What serving the page needs besides the rule phases' loans.
pub(super) struct Page<'a> {
    pub rules: &'a ProxyRules,
    pub page: &'a StatsPage,
    /// The proxy whose page it is.
    pub proxy: &'a str,
    /// The body was already waited for once.
    pub waited: bool,
    /// The shared state, owned (an admin change may start a slow start).
    pub shared: &'a std::sync::Arc<crate::state::Shared>,
}

/// What became of a request for the page.
pub(super) enum Served {
    /// Not a request for the page.
    No,
    /// A verdict for the rule phases; `body`: the request body's length when it was read
    /// whole (the connection can go on after the answer).
    Yes {
        verdict: Verdict,
        body: Option<usize>,
    },
}

/// Serves the request if it is for the page.
#[allow(clippy::too_many_arguments)]
pub(super) fn serve(
    p: Page<'_>,
    st: &mut Stream<'_>,
    req: &mut Head<'_>,
    head: &mut RequestHead,
    txn: &mut TxnLog,
    w: &mut Work<'_>,
    out: &mut Vec<u8>,
    hints: &mut Vec<u8>,
    errorfiles: &[&[crate::config::model::ErrorFile]],
) -> Served {
    let (method, target) = {
        let buf = req.buf();
        let method = head.method(buf).to_vec();
        let mut tmp = Vec::new();
        let target = head.target(buf, &mut tmp).to_vec();
        (method, target)
    };
    if !crate::stats::page::hit(p.page, &method, &target) {
        return Served::No;
    }
    let yes = |verdict| Served::Yes {
        verdict,
        body: None,
    };
    if !p.rules.stats_http_request.is_empty() {
        let v = policy::http_request(
            &p.rules.stats_http_request,
            0,
            true,
            st,
            req,
            head,
            txn,
            w,
            out,
            hints,
            errorfiles,
            DEFAULT_REALM,
        );
        match v {
            Verdict::Continue | Verdict::WaitBody { .. } => {}
            // HAProxy aborts the stream after the page's authentication request.
            Verdict::Answer {
                status: 401,
                term,
                delay,
                ..
            } => {
                return yes(Verdict::Answer {
                    status: 401,
                    term,
                    close: true,
                    delay,
                })
            }
            v => return yes(v),
        }
    }
    // Answered by the page: HAProxy counts the request its applet serves in `intercepted`
    // when the page is the frontend's.
    policy::count_intercepted(st);
    let proc = &st.shared.proc_vars;
    let admin = {
        let f = policy::facts(st, Some(policy::req_view(req, head)), None, txn, proc);
        if !p.page.users.is_empty() {
            let mut cred = Vec::new();
            let ok = f.auth_basic(&mut cred).is_some_and(|c| {
                let (user, pass) = (&cred[..c], &cred[c + 1..]);
                p.page
                    .users
                    .iter()
                    .any(|(u, pw)| u.as_bytes() == user && pw.as_bytes() == pass)
            });
            if !ok {
                let realm = p.page.realm.as_deref().unwrap_or(DEFAULT_REALM);
                policy::page(401, out, false);
                policy::insert_header(out, b"www-authenticate", |v| {
                    let _ = write!(v, "Basic realm=\"{realm}\"");
                });
                // HAProxy aborts the stream after it (no `connection: close` said).
                return yes(Verdict::Answer {
                    status: 401,
                    term: *b"LR",
                    close: true,
                    delay: None,
                });
            }
        }
        p.rules
            .stats_admin
            .iter()
            .any(|r| policy::applies(r, &f, w.ev, None))
    };
    // The admin form's body: wait for it once (a POST without admin rights is refused
    // without reading it).
    let mut body = Vec::new();
    let mut body_len = (head.body == BodyKind::None).then_some(0);
    if method == b"POST" && admin {
        let bytes = &req.raw[req.len.min(req.raw.len())..];
        match head.body {
            BodyKind::Length(n) if bytes.len() as u64 >= n => {
                body.extend_from_slice(&bytes[..n as usize]);
                body_len = Some(n as usize);
            }
            BodyKind::Chunked => {
                if let Some((_, used)) = super::body::whole_chunked(bytes) {
                    super::body::append_dechunked(bytes, &mut body);
                    body_len = Some(used);
                }
            }
            _ => {}
        }
        if body_len.is_none() && !p.waited {
            let fe = &st.shared.frontends[st.frontend].config;
            return yes(Verdict::WaitBody {
                next: p.rules.http_request.len(),
                strict: true,
                time: fe
                    .timeouts
                    .http_request
                    .or(fe.timeouts.client)
                    .unwrap_or(std::time::Duration::from_secs(5)),
                at_least: None,
            });
        }
    }
    let reply = crate::stats::page::answer(
        p.shared,
        p.page,
        &crate::stats::page::Request {
            method: &method,
            target: &target,
            body: &body,
            admin,
            proxy: p.proxy,
        },
    );
    out.clear();
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\ncache-control: no-cache\r\n",
        reply.status, reply.reason
    );
    for (k, v) in &reply.headers {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    if reply.status == 200 {
        let _ = write!(out, "content-length: {}\r\n", reply.body.len());
    }
    if !head.conn.keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if method != b"HEAD" {
        out.extend_from_slice(reply.body.as_bytes());
    }
    Served::Yes {
        verdict: Verdict::Answer {
            status: reply.status,
            term: *b"LR",
            close: false,
            delay: None,
        },
        body: body_len,
    }
}
