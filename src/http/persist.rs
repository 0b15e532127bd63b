//! Cookie persistence in a transaction (`cookie`, `option persist`, `force-persist`,
//! `ignore-persist`, `capture cookie`), in HAProxy 2.6's order: once the backend is known the
//! persist rules run; after `use-server`, the request's `Cookie` headers are read (the server
//! they name is chosen unless it is down; HAProxy's edits are made to what the server will
//! see); after the `http-response` rules, the response's `Set-Cookie` headers are edited and
//! a cookie is inserted when the client did not come with a valid one (with
//! `Cache-control: private` under `nocache` when the response was cacheable). The letters of
//! `%tsc` and the `%CC`/`%CS` captures are left in the transaction's log record.
//!
//! The header grammar and edits are `proto::cookie`'s; this module finds the headers, reads
//! the servers' state and writes the edits back through `http::edit`.

use std::io::Write;

use crate::backend::server::ServerState;
use crate::config::model::{
    Backend as BackendConfig, CookiePersist, PersistRule, MAX_DYNAMIC_COOKIE_KEY as MAX_KEY,
};
use crate::proto::cookie::{self, Fate, Lookup, ReqRules, ReqScan, ResRules, ResState};
use crate::proto::h1::{HeaderIdx, RequestHead};

use super::edit;
use super::policy::{self, Res};
use super::session::Session;
use super::txnlog::TxnLog;

/// What a transaction carries from the request to the response.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Txn {
    pub scan: ReqScan,
    /// `force-persist` matched.
    pub force: bool,
    /// `ignore-persist` matched.
    pub ignore: bool,
    /// The server was assigned by the cookie or `use-server` (HAProxy's `SF_DIRECT`).
    pub direct: bool,
    /// The request may be cached (GET, HEAD, OPTIONS, TRACE), for `nocache`.
    pub cacheable_method: bool,
    pub post: bool,
}

/// The wall clock in seconds, as cookie dates count.
fn now_secs() -> u32 {
    (crate::log::now_us() / 1_000_000) as u32
}

/// A server's cookie: its `cookie VALUE`, else with `dynamic` and a key, 16 hex digits of the
/// XXH64 of the key, its current address and its port (HAProxy's `srv_set_dyncookie`).
pub(super) fn server_cookie<'b>(
    bec: &'b BackendConfig,
    s: &'b ServerState,
    buf: &'b mut [u8; 16],
) -> Option<&'b [u8]> {
    if let Some(c) = &s.config.cookie {
        return Some(c.as_bytes());
    }
    let ck = bec.cookie.as_ref()?;
    let key = bec.dynamic_cookie_key.as_ref().filter(|_| ck.dynamic)?;
    let addr = s.addr.load();
    let mut data = [0u8; MAX_KEY + 16 + 4];
    let k = key.as_bytes();
    if k.len() > MAX_KEY {
        return None; // refused at load
    }
    data[..k.len()].copy_from_slice(k);
    let mut n = k.len();
    match addr.ip() {
        std::net::IpAddr::V4(a) => {
            data[n..n + 4].copy_from_slice(&a.octets());
            n += 4;
        }
        std::net::IpAddr::V6(a) => {
            data[n..n + 16].copy_from_slice(&a.octets());
            n += 16;
        }
    }
    data[n..n + 4].copy_from_slice(&u32::from(s.config.addr.port()).to_be_bytes());
    n += 4;
    let h = cookie::xxh64(&data[..n], 0);
    let _ = write!(&mut buf[..], "{h:016x}");
    Some(&buf[..])
}

fn shows(ck: Option<&CookiePersist>) -> bool {
    ck.is_some_and(CookiePersist::shows_in_logs)
}

impl Session<'_, '_> {
    /// Phase (once the backend is known, when it has cookie persistence or the frontend
    /// captures a cookie): `force-persist` / `ignore-persist`, and what the response side
    /// will need of the request. `self.persist` was reset when the transaction started.
    pub(super) fn persist_rules(&mut self, be_idx: usize, head: &RequestHead) {
        let buf = super::exchange::head_buf(self.edited, &self.scratch.0.edited, &self.cbuf);
        let m = head.method(buf);
        self.persist.post = m == b"POST";
        self.persist.cacheable_method = matches!(m, b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE");
        if shows(self.shared.backends[be_idx].config.cookie.as_ref()) {
            self.scratch.0.txn.cookie_state = *b"NN";
        }
        let rules = &self.shared.backends[be_idx].config.rules;
        if rules.persist.is_empty() {
            return;
        }
        let rules = std::sync::Arc::clone(rules);
        match self.with_request(be_idx, head, |st, req, txn, w| {
            policy::persist_rule(&rules.persist, st, req, head, txn, w)
        }) {
            Some(PersistRule::Force) => self.persist.force = true,
            Some(PersistRule::Ignore) => self.persist.ignore = true,
            None => {}
        }
    }

    /// Phase (after `use-server`, which chose `assigned` if any): the request's cookies.
    /// Returns the server the transaction goes to without balancing, if any.
    pub(super) fn request_cookies(
        &mut self,
        be_idx: usize,
        head: &RequestHead,
        assigned: Option<usize>,
    ) -> Option<usize> {
        self.scan_cookies(Some(be_idx), head, assigned)
    }

    /// A request denied or tarpitted by a rule: HAProxy reads its cookies anyway, for the
    /// log (`%CC`, the third letter of `%tsc`). `backend`: the backend whose rules denied it
    /// (`None`: the frontend's, which for a `listen` section are its backend's).
    pub(super) fn denied_cookies(&mut self, backend: Option<usize>, head: &RequestHead) {
        let own = self.fe.default_backend.filter(|&b| {
            std::sync::Arc::ptr_eq(&self.shared.backends[b].config.rules, &self.fe.rules)
        });
        let be = backend.or(own);
        if let Some(b) = be {
            if shows(self.shared.backends[b].config.cookie.as_ref()) {
                self.scratch.0.txn.cookie_state = *b"NN";
            }
        }
        // The server the cookie names is the stream's target: HAProxy logs it.
        if let (Some(b), Some(server)) = (be, self.scan_cookies(be, head, None)) {
            self.scratch.0.txn.backend = Some(b);
            self.scratch.0.txn.server = Some(server);
        }
    }

    /// The request's `Cookie` headers, for backend `be_idx` (its persistence cookie) and the
    /// frontend's `capture cookie`.
    fn scan_cookies(
        &mut self,
        be_idx: Option<usize>,
        head: &RequestHead,
        assigned: Option<usize>,
    ) -> Option<usize> {
        let shared = self.shared;
        self.persist.direct = assigned.is_some();
        self.persist.scan.assigned = assigned;
        let Some(be) = be_idx.map(|b| &shared.backends[b]) else {
            if self.fe.options.capture_cookie.is_some() {
                let no_servers = |_: &[u8]| Lookup::Unknown;
                self.cookie_headers(None, head, no_servers);
            }
            return assigned;
        };
        let bec = &be.config;
        let ck = bec.cookie.as_ref();
        let capture = self.fe.options.capture_cookie.as_ref();
        if ck.is_none() && capture.is_none() {
            return assigned;
        }
        let persist = bec.options.persist || self.persist.force;
        let lookup = |val: &[u8]| {
            let mut down = false;
            for (k, s) in be.servers.live() {
                let mut b = [0u8; 16];
                if server_cookie(bec, s, &mut b) != Some(val) {
                    continue;
                }
                let up = s.usable();
                if up || persist {
                    return Lookup::Assign(k, up);
                }
                down = true;
            }
            if down {
                Lookup::Down
            } else {
                Lookup::Unknown
            }
        };
        self.cookie_headers(ck, head, lookup)
    }

    /// Runs the request scan over every `Cookie` header, writing the edits back; returns
    /// the server assigned.
    fn cookie_headers(
        &mut self,
        ck: Option<&CookiePersist>,
        head: &RequestHead,
        lookup: impl FnMut(&[u8]) -> Lookup + Copy,
    ) -> Option<usize> {
        let assigned = self.persist.scan.assigned;
        let capture = self.fe.options.capture_cookie.as_ref();
        let rules = ReqRules {
            name: ck.map(|c| c.name.as_bytes()),
            prefix: ck.is_some_and(|c| c.prefix),
            strip: ck.is_some_and(|c| c.insert && c.indirect),
            maxidle: ck.map_or(0, |c| c.maxidle),
            maxlife: ck.map_or(0, |c| c.maxlife),
            capture: capture.map(|(n, l)| (n.as_bytes(), *l)),
            now: now_secs(),
            ignore: self.persist.ignore,
        };
        let p = &mut self.scratch.0;
        let mut scan = self.persist.scan;
        let mut value = std::mem::take(&mut p.tmp);
        let mut i = 0;
        while i < p.headers.len() {
            let buf: &[u8] = if self.edited {
                &p.edited
            } else {
                self.cbuf.bytes()
            };
            let h = &p.headers[i];
            if !h.is(buf, "cookie") {
                i += 1;
                continue;
            }
            value.clear();
            value.extend_from_slice(h.value(buf));
            let cap = &mut p.txn.cookie_req;
            let fate = cookie::scan_request_header(&mut value, &rules, &mut scan, cap, lookup);
            if fate != Fate::Unchanged && !self.edited {
                edit::begin(&mut p.edited, self.cbuf.bytes(), head.len);
                self.edited = true;
            }
            match fate {
                Fate::Unchanged => i += 1,
                Fate::Changed => {
                    edit::set_value(&mut p.edited, &mut p.headers, i, &value);
                    i += 1;
                }
                Fate::Removed => {
                    p.headers.remove(i);
                }
            }
        }
        p.tmp = value;
        p.txn.has_cookie_req = scan.captured;
        if shows(ck) {
            p.txn.cookie_state = [scan.state.letter(), b'N'];
        }
        self.persist.scan = scan;
        if assigned.is_none() && scan.assigned.is_some() {
            self.persist.direct = true;
        }
        scan.assigned
    }
}

/// The request's cookies for `--explain`: the same scan and edits as a live request (without
/// `force-persist`/`ignore-persist`, which the dry run does not evaluate), over `req`.
/// Returns the server assigned and the cookie state letter.
pub(super) fn explain_cookies(
    be: &crate::backend::Backend,
    req: &mut policy::Head<'_>,
    assigned: Option<usize>,
    tmp: &mut Vec<u8>,
) -> (Option<usize>, Option<u8>) {
    let bec = &be.config;
    let Some(ck) = bec.cookie.as_ref() else {
        return (assigned, None);
    };
    let rules = ReqRules {
        name: Some(ck.name.as_bytes()),
        prefix: ck.prefix,
        strip: ck.insert && ck.indirect,
        maxidle: ck.maxidle,
        maxlife: ck.maxlife,
        capture: None,
        now: now_secs(),
        ignore: false,
    };
    let persist = bec.options.persist;
    let lookup = |val: &[u8]| {
        let mut down = false;
        for (k, s) in be.servers.live() {
            let mut b = [0u8; 16];
            if server_cookie(bec, s, &mut b) != Some(val) {
                continue;
            }
            if s.usable() || persist {
                return Lookup::Assign(k, s.usable());
            }
            down = true;
        }
        if down {
            Lookup::Down
        } else {
            Lookup::Unknown
        }
    };
    let mut scan = ReqScan {
        assigned,
        ..Default::default()
    };
    let mut cap = Vec::new();
    let mut i = 0;
    while i < req.headers.len() {
        let buf = req.buf();
        if !req.headers[i].is(buf, "cookie") {
            i += 1;
            continue;
        }
        tmp.clear();
        tmp.extend_from_slice(req.headers[i].value(buf));
        match cookie::scan_request_header(tmp, &rules, &mut scan, &mut cap, lookup) {
            Fate::Unchanged => i += 1,
            Fate::Changed => {
                let (ebuf, headers) = req.edit();
                edit::set_value(ebuf, headers, i, tmp);
                i += 1;
            }
            Fate::Removed => {
                let (_, headers) = req.edit();
                headers.remove(i);
            }
        }
    }
    (scan.assigned, Some(scan.state.letter()))
}

/// What the response side reads besides the response: the backend, who answered, and the
/// transaction's persistence facts.
pub(super) struct ResCtx<'a> {
    pub be: &'a crate::backend::Backend,
    pub capture: Option<&'a (String, usize)>,
    pub persist: &'a Txn,
    pub server: usize,
    /// A retry left the server the request was assigned to.
    pub redispatched: bool,
}

/// Phase (after the `http-response` rules): the response's `Set-Cookie` headers, and the
/// persistence cookie inserted when the client needs one. `value`: scratch space.
pub(super) fn response_cookies(
    x: &ResCtx<'_>,
    txn: &mut TxnLog,
    value: &mut Vec<u8>,
    r: &mut Res<'_, '_>,
) {
    let bec = &x.be.config;
    let ck = bec.cookie.as_ref();
    let status = r.head.status;
    if (ck.is_none() && x.capture.is_none()) || (status < 200 && status != 101) {
        return;
    }
    let direct = x.persist.direct && !x.redispatched;
    let mut cbuf = [0u8; 16];
    let srv_cookie = server_cookie(bec, &x.be.servers[x.server], &mut cbuf);
    let rules = ResRules {
        name: ck.map(|c| c.name.as_bytes()),
        insert: ck.is_some_and(|c| c.insert),
        indirect: ck.is_some_and(|c| c.indirect),
        rewrite: ck.is_some_and(|c| c.rewrite),
        prefix: ck.is_some_and(|c| c.prefix),
        preserve: ck.is_some_and(|c| c.preserve),
        server_cookie: srv_cookie,
        direct,
        ignore: x.persist.ignore,
        capture: x.capture.map(|(n, l)| (n.as_bytes(), *l)),
    };
    let mut state = ResState::None;
    let (mut found, mut captured) = (false, false);
    // As HAProxy does: every `Set-Cookie` header, then every `Set-Cookie2` one.
    for cookie2 in [false, true] {
        let name = if cookie2 { "set-cookie2" } else { "set-cookie" };
        let mut i = 0;
        while i < r.msg.headers.len() {
            let buf = r.msg.buf();
            let h = &r.msg.headers[i];
            if !h.is(buf, name) {
                i += 1;
                continue;
            }
            value.clear();
            value.extend_from_slice(h.value(buf));
            let cap = &mut txn.cookie_res;
            let (st, f, c) = (&mut state, &mut found, &mut captured);
            match cookie::scan_set_cookie(value, cookie2, &rules, st, f, c, cap) {
                Fate::Unchanged => i += 1,
                Fate::Changed => {
                    let (ebuf, headers) = r.msg.edit();
                    edit::set_value(ebuf, headers, i, value);
                    i += 1;
                }
                Fate::Removed => {
                    let (_, headers) = r.msg.edit();
                    headers.remove(i);
                }
            }
        }
    }
    txn.has_cookie_res = captured;
    let Some(ck) = ck else { return };
    let scan = &x.persist.scan;
    let now = i64::from(now_secs());
    let last = i64::from(scan.last_date);
    let refresh =
        (ck.maxidle != 0 || scan.last_date != 0) && (scan.last_date == 0 || last - now < 0);
    let dates =
        (ck.maxlife != 0 && scan.first_date == 0) || (ck.maxlife == 0 && scan.first_date != 0);
    let insert = ck.insert
        && !(found && ck.preserve)
        && (!direct || refresh || dates)
        && (!ck.postonly || x.persist.post)
        && !x.persist.ignore;
    if insert {
        value.clear();
        match srv_cookie {
            None => {
                let _ = write!(
                    value,
                    "{}=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/",
                    ck.name
                );
            }
            Some(c) => {
                value.extend_from_slice(ck.name.as_bytes());
                value.push(b'=');
                value.extend_from_slice(c);
                if ck.maxidle != 0 || ck.maxlife != 0 {
                    let stamp = ((now + 3) >> 2) as u32;
                    value.push(cookie::DATE_DELIM);
                    value.extend_from_slice(&cookie::s30_to_b64(stamp));
                    if ck.maxlife != 0 {
                        let first = match scan.first_date {
                            0 => stamp,
                            d => d >> 2,
                        };
                        value.push(cookie::DATE_DELIM);
                        value.extend_from_slice(&cookie::s30_to_b64(first));
                    }
                }
                value.extend_from_slice(b"; path=/");
            }
        }
        if let Some(d) = &ck.domain {
            let _ = write!(value, "; domain={d}");
        }
        if ck.httponly {
            value.extend_from_slice(b"; HttpOnly");
        }
        if ck.secure {
            value.extend_from_slice(b"; Secure");
        }
        if let Some(a) = &ck.attrs {
            let _ = write!(value, "; {a}");
        }
        let (ebuf, headers) = r.msg.edit();
        edit::add(ebuf, headers, b"Set-Cookie", value);
        state = if srv_cookie.is_some() && direct {
            ResState::Updated
        } else {
            ResState::Inserted
        };
        if ck.nocache && cacheable(x.persist.cacheable_method, status, ebuf, headers) {
            edit::add(ebuf, headers, b"Cache-control", b"private");
        }
    }
    if ck.shows_in_logs() {
        txn.cookie_state[1] = state.letter();
    }
}

/// Whether a response is cacheable, as haproxy 2.6 judges it for `nocache`: the request's
/// method allows it (`method`) and the status is cacheable by default (RFC 7231 §6.1); a
/// `Pragma: no-cache` forbids it; then each `Cache-Control` value in order: `public` makes it
/// cacheable, `private`, `no-cache`, `no-store`, `max-age=0` and `s-maxage=0` not; and a
/// response with neither freshness information (`max-age`, `s-maxage`, `Expires`) nor a
/// validator (`ETag`, `Last-Modified`) is not (observed on haproxy 2.6.12).
fn cacheable(method: bool, status: u16, buf: &[u8], headers: &[HeaderIdx]) -> bool {
    let by_status = matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 404 | 405 | 410 | 414 | 501
    );
    if headers
        .iter()
        .any(|h| h.is(buf, "pragma") && h.value(buf).eq_ignore_ascii_case(b"no-cache"))
    {
        return false;
    }
    let mut ok = method && by_status;
    let mut fresh = false;
    for h in headers.iter().filter(|h| h.is(buf, "cache-control")) {
        for v in h.value(buf).split(|&c| c == b',') {
            let v = v.trim_ascii();
            let starts = |p: &[u8]| v.len() >= p.len() && v[..p.len()].eq_ignore_ascii_case(p);
            if v.eq_ignore_ascii_case(b"public") {
                ok = true;
            } else if [
                &b"private"[..],
                b"no-cache",
                b"no-store",
                b"max-age=0",
                b"s-maxage=0",
            ]
            .iter()
            .any(|x| v.eq_ignore_ascii_case(x))
            {
                ok = false;
            } else if starts(b"s-maxage") || starts(b"max-age") {
                fresh = true;
            }
        }
    }
    let known = |n: &str| headers.iter().any(|h| h.is(buf, n));
    ok && (fresh || known("expires") || known("etag") || known("last-modified"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::h1;

    #[test]
    fn cacheability_follows_haproxy() {
        let check = |status: u16, raw: &str| {
            let mut hs = Vec::new();
            let head = h1::parse_response(raw.as_bytes(), &mut hs, false)
                .unwrap()
                .unwrap();
            cacheable(true, status, &raw.as_bytes()[..head.len], &hs)
        };
        assert!(!check(200, "HTTP/1.1 200 OK\r\n\r\n"));
        assert!(check(200, "HTTP/1.1 200 OK\r\nETag: \"x\"\r\n\r\n"));
        assert!(!check(302, "HTTP/1.1 302 Found\r\n\r\n"));
        assert!(!check(
            200,
            "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nExpires: 0\r\n\r\n"
        ));
        assert!(!check(
            200,
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=5, private\r\n\r\n"
        ));
        assert!(check(
            200,
            "HTTP/1.1 200 OK\r\nCache-Control: no-store, public, max-age=9\r\n\r\n"
        ));
    }
}
