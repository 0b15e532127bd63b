//! What rules read from a stream: the runtime's side of [`rules::Source`].
//!
//! [`Facts`] borrows what the session already holds (addresses, the request head as offsets
//! into its buffer, the response head, the shared backend state, the variables) and answers
//! each fetch with a slice or an atomic load. It is built for each rule evaluation (a handful
//! of references, no allocation) because an action between two rules may edit the head it
//! looks at.
//!
//! Log formats read a stream through the same `Facts`, built when the line is written: the
//! heads are gone by then, so what the transaction kept ([`Kept`]: method, status, unique id,
//! last final rule) answers instead. The unique id ([`UniqueId`]) is computed by its first
//! reader, over the facts of that moment, as HAProxy computes it.
//!
//! [`rules::Source`]: crate::rules::Source

use std::cell::{Cell, OnceCell, Ref, RefCell};
use std::net::SocketAddr;

use tokio::time::Instant;

use crate::log::format::uses;
use crate::log::record::{Captured, Counters, Record, Timeline};
use crate::net::lazy::LazyStream;
use crate::net::tls::Handshake;
use crate::proto::h1::{HeaderIdx, RequestHead, ResponseHead};
use crate::rules::source::{Figure, Named, SslInfo, Stored, TcpFigure};
use crate::rules::{Scope, Source, Value};
use crate::state::{Shared, REQ_RATE, SESS_RATE};

use crate::rules::vars::Scopes;

/// A request head as the session holds it: offsets into `buf`.
#[derive(Clone, Copy)]
pub struct ReqView<'a> {
    pub buf: &'a [u8],
    pub head: &'a RequestHead,
    pub headers: &'a [HeaderIdx],
    /// Bytes of the request received so far (`req.len`).
    pub received: usize,
    /// The body bytes buffered with the head (`wait-for-body`), for `req.body`.
    pub body: Option<&'a [u8]>,
}

/// A response head as the session holds it.
#[derive(Clone, Copy)]
pub struct ResView<'a> {
    pub buf: &'a [u8],
    pub head: &'a ResponseHead,
    pub headers: &'a [HeaderIdx],
}

/// A transaction's unique id (`unique-id-format`), computed once, at its first use: when a
/// rule reads it (`unique-id`, `%ID`), else where HAProxy computes it, after the request rules
/// and before the server is chosen, else for the log line. Kept in the session's scratch space
/// (its buffer is reused from transaction to transaction).
#[derive(Debug, Default)]
pub struct UniqueId {
    state: Cell<UidState>,
    bytes: RefCell<Vec<u8>>,
    /// The transaction's timeline, for the format's dates and timers.
    timeline: Cell<Option<Timeline>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum UidState {
    /// Not computed (or no `unique-id-format`).
    #[default]
    Unset,
    /// Being computed: a format that reads its own id gets nothing.
    Busy,
    Set,
}

impl UniqueId {
    /// A new transaction whose clock is `timeline`: the id is to be computed again.
    pub fn reset(&mut self, timeline: Option<Timeline>) {
        self.state.set(UidState::Unset);
        self.bytes.get_mut().clear();
        self.timeline.set(timeline);
    }

    /// The id, once computed.
    pub fn get(&self) -> Option<Ref<'_, Vec<u8>>> {
        if self.state.get() != UidState::Set {
            return None;
        }
        self.bytes.try_borrow().ok()
    }
}

/// Which rule list of a proxy a [`RuleRef`] points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleList {
    TcpRequestContent,
    HttpRequest,
    HttpResponse,
    HttpAfterResponse,
    TcpResponseContent,
}

/// A rule that ran, by place, for `last_rule_file` and `last_rule_line`: whose rules
/// (`None`: the frontend's, else the backend's), which list, which position. Copied, not
/// borrowed, so that the transaction's record needs no lifetime; resolved only when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleRef {
    pub backend: Option<usize>,
    pub list: RuleList,
    pub index: usize,
}

/// What a transaction keeps beyond its heads: its unique id (for the `unique-id` fetch) and,
/// for its log line once the heads are gone, the method and status (HAProxy keeps them in
/// the transaction too; its log formats may read `method` and `status`).
#[derive(Clone, Copy, Default)]
pub struct Kept<'a> {
    /// The request's method, read when `req` is `None`.
    pub method: Option<&'a [u8]>,
    /// The response's status, read when `res` is `None`.
    pub status: Option<u16>,
    /// The transaction's unique id (computed by the first reader).
    pub unique_id: Option<&'a UniqueId>,
    /// The last final rule that ran (`accept`, `allow`, `deny`, `redirect`, `return`...).
    pub last_rule: Option<RuleRef>,
    /// The request line as received (`capture.req.method`, `capture.req.uri`,
    /// `capture.req.ver`).
    pub request_line: Option<&'a [u8]>,
    /// For a log line: a stream that has no backend yet names its frontend as its backend, as
    /// HAProxy's does (`be_name`, `be_id`; a `listen` section is its own backend).
    pub frontend_as_backend: bool,
    /// Whether the transaction is its connection's first (`http_first_req`; `None`: not an
    /// HTTP transaction).
    pub first_req: Option<bool>,
    /// The stream's server and tunnel timeouts as `set-timeout` rules left them (`None`: not
    /// set).
    pub timeouts: (Option<std::time::Duration>, Option<std::time::Duration>),
}

/// Everything a rule may read about one stream.
pub struct Facts<'a> {
    pub shared: &'a Shared,
    pub frontend: usize,
    pub backend: Option<usize>,
    pub server: Option<usize>,
    /// `None`: a UNIX socket's client, which has no address (`src` has no value).
    pub peer: Option<SocketAddr>,
    /// The listener id of a UNIX socket's client (logs show `unix` and this id as its port).
    pub unix_listener: Option<u32>,
    /// The id of the listener that accepted the client (`so_id`; 0: none, as in a dry run).
    pub listener_id: u32,
    /// The client socket, asked for its local address only when a rule reads `dst` (`None`:
    /// `local` is given, or unknown).
    pub client: Option<&'a LazyStream>,
    /// The client's socket when `client` is not given (TCP mode), for `TCP_INFO` (`fc_rtt`).
    pub sock: Option<std::os::fd::BorrowedFd<'a>>,
    /// The TLS handshake of a client that is not `client` (TCP mode), if it is TLS.
    pub tls: Option<&'a Handshake>,
    /// The TLS handshake of the stream's server connection (`ssl_bc*`), once connected to a
    /// `server ... ssl`.
    pub server_tls: Option<&'a Handshake>,
    pub local: OnceCell<Option<SocketAddr>>,
    /// In TCP mode, the bytes the client sent so far (`tcp-request content` inspection).
    pub payload: Option<&'a [u8]>,
    /// In TCP mode, the bytes the server sent so far (`tcp-response content` inspection).
    pub res_payload: Option<&'a [u8]>,
    pub req: Option<ReqView<'a>>,
    pub res: Option<ResView<'a>>,
    pub captured: Option<&'a Captured>,
    pub vars: Scopes<'a>,
    /// `tcp-request inspect-delay` is over (or there is none): `WAIT_END`.
    pub wait_over: bool,
    pub kept: Kept<'a>,
    /// The session's tracked stick-table entries (`None`: no rule of the proxy tracks).
    pub stick: Option<&'a crate::stick::track::Trackers>,
    /// The PROXY protocol header the connection began with (`accept-proxy`).
    pub proxied: Option<&'a crate::proto::proxy::Header>,
    /// The connection's own addresses (`fc_src`, `fc_dst`).
    pub fc: Addrs,
}

/// A client address and the address it connected to, at one of the levels HAProxy 2.6 keeps
/// them: the connection's (the socket's, a PROXY header's, then what `tcp-request connection
/// set-src|set-dst` made of them: `fc_src`, `fc_dst`), the session's (after `tcp-request
/// session` rules), and each stream's (after `tcp-request content` and `http-request` rules:
/// `src`, `dst`), each starting from the level above.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Addrs {
    /// `None`: a UNIX socket's client, which has no address.
    pub src: Option<SocketAddr>,
    /// `None`: the socket's local address, asked when needed.
    pub dst: Option<SocketAddr>,
}

impl<'a> Facts<'a> {
    /// Computes the transaction's unique id over these facts if nobody did yet (and the
    /// frontend has a `unique-id-format`).
    pub fn ensure_unique_id(&self) {
        let Some(cell) = self.kept.unique_id else {
            return;
        };
        if cell.state.get() != UidState::Unset {
            return;
        }
        let fe = &self.shared.frontends[self.frontend];
        let Some(f) = fe.log.unique_id() else {
            return;
        };
        let Ok(mut bytes) = cell.bytes.try_borrow_mut() else {
            return;
        };
        let mut out = std::mem::take(&mut *bytes);
        drop(bytes);
        cell.state.set(UidState::Busy);
        out.clear();
        let now = Instant::now();
        let tl = cell.timeline.get().unwrap_or_else(|| Timeline::new(now));
        let none = Captured::default();
        let rec = Record {
            frontend: &fe.config.name,
            backend: None,
            server: None,
            client: self.peer,
            unix: crate::log::record::UnixEnds {
                listener: self.unix_listener,
                server: false,
            },
            local: if f.uses(uses::LOCAL_ADDR) {
                self.dst()
            } else {
                None
            },
            server_local: None,
            server_addr: None,
            times: tl.times(now, now, crate::log::now_us()),
            status: None,
            bytes_out: 0,
            bytes_in: 0,
            term: *b"--",
            cookie_state: *b"--",
            cookie_req: None,
            cookie_res: None,
            counters: Counters::default(),
            request: Some(b""),
            captures: self.captured.unwrap_or(&none),
            unique_id: None,
            hostname: "",
            req_counter: if f.uses(uses::REQ_COUNTER) {
                crate::log::next_request_id()
            } else {
                0
            },
            log_counter: 0,
        };
        crate::log::with_eval(|ev| f.render(&rec, self, ev, &mut out));
        if let Ok(mut bytes) = cell.bytes.try_borrow_mut() {
            *bytes = out;
        }
        cell.state.set(UidState::Set);
    }

    fn header(view: Option<(&'a [u8], &'a [HeaderIdx])>, i: usize) -> Option<(&'a [u8], &'a [u8])> {
        let (buf, headers) = view?;
        let h = headers.get(i)?;
        Some((h.name(buf), h.value(buf)))
    }

    /// The first header at `from` or after named `name` (lower-case) and the next one of
    /// that name: one pass over the index, names of another length skipped without reading
    /// them, a name of the same length compared eight bytes at a time.
    fn header_named(
        view: Option<(&'a [u8], &'a [HeaderIdx])>,
        from: usize,
        name: &[u8],
    ) -> Option<Named<'a>> {
        let (buf, headers) = view?;
        let mut found: Option<Named<'a>> = None;
        for (k, h) in headers.get(from..)?.iter().enumerate() {
            if h.name.1 - h.name.0 != name.len() as u32
                || !crate::proto::h1::eq_name_lower(h.name(buf), name)
            {
                continue;
            }
            match found.as_mut() {
                None => {
                    found = Some(Named {
                        idx: from + k,
                        value: h.value(buf),
                        next: None,
                    })
                }
                Some(f) => {
                    f.next = Some(from + k);
                    break;
                }
            }
        }
        found
    }

    /// The `Authorization: Basic` credentials of the request, decoded (`user:password`),
    /// appended to `out`; the position of the colon in what was appended.
    fn basic_auth_into(&self, out: &mut Vec<u8>) -> Option<usize> {
        let req = self.req?;
        let h = req
            .headers
            .iter()
            .find(|h| h.is(req.buf, "authorization"))?;
        let v = h.value(req.buf);
        let sp = v.iter().position(|&c| c == b' ')?;
        if !v[..sp].eq_ignore_ascii_case(b"basic") {
            return None;
        }
        let start = out.len();
        if !crate::rules::hash::base64_decode(v[sp + 1..].trim_ascii(), out) {
            out.truncate(start);
            return None;
        }
        out[start..].iter().position(|&c| c == b':')
    }
}

/// A handshake's facts as the rules engine reads them.
fn ssl_info(h: &Handshake) -> SslInfo<'_> {
    SslInfo {
        sni: h.sni.as_deref().map(str::as_bytes),
        alpn: h.alpn.as_deref(),
        version: h.version,
        cipher: h.cipher,
        key_bits: h.key_bits,
        resumed: h.resumed,
        client_cert: h
            .peer_certs
            .as_deref()
            .and_then(|c| c.first())
            .map(Vec::as_slice),
        peer_chain: h.peer_certs.as_deref(),
        client: h.client.as_deref(),
        frontend_der: h.served.as_deref().map(|c| c.leaf()),
        frontend: h.served.as_deref().and_then(|c| c.info()),
        verify: crate::rules::source::VerifyCodes {
            result: i64::from(h.verify.result),
            crt_err: i64::from(h.verify.crt_err),
            ca_err: i64::from(h.verify.ca_err),
            ca_err_depth: i64::from(h.verify.ca_err_depth),
        },
        hello: h.hello.as_deref(),
    }
}

impl Source for Facts<'_> {
    fn ssl(&self) -> Option<SslInfo<'_>> {
        let h = match self.tls {
            Some(h) => h,
            None => self.client?.as_tls()?.facts(),
        };
        Some(ssl_info(h))
    }
    fn ssl_secret(&self, kind: crate::rules::source::SecretKind) -> Option<&[u8]> {
        let h = match self.tls {
            Some(h) => h,
            None => self.client?.as_tls()?.facts(),
        };
        h.secrets.as_deref()?.get(kind)
    }
    fn ssl_bc(&self) -> Option<SslInfo<'_>> {
        self.server_tls.map(ssl_info)
    }
    fn so_id(&self) -> Option<i64> {
        (self.listener_id != 0).then_some(i64::from(self.listener_id))
    }
    fn fc_rcvd_proxy(&self) -> bool {
        self.proxied.is_some()
    }
    fn pp_tlv(&self, kind: u8) -> Option<&[u8]> {
        let h = self.proxied?;
        match kind {
            0x02 => h.authority.as_deref(),
            0x05 => h.unique_id.as_deref(),
            _ => None,
        }
    }
    fn so_name(&self) -> Option<&str> {
        let i = usize::try_from(self.listener_id).ok()?.checked_sub(1)?;
        let fe = &self.shared.frontends[self.frontend].config;
        fe.binds.get(i)?.name.as_deref()
    }
    fn src(&self) -> Option<SocketAddr> {
        self.peer
    }
    fn dst(&self) -> Option<SocketAddr> {
        *self
            .local
            .get_or_init(|| self.client.and_then(|c| c.local_addr().ok()))
    }
    fn fc_src(&self) -> Option<SocketAddr> {
        self.fc.src
    }
    fn fc_dst(&self) -> Option<SocketAddr> {
        self.fc
            .dst
            .or_else(|| self.client.and_then(|c| c.local_addr().ok()))
    }
    fn first_req(&self) -> Option<bool> {
        self.kept.first_req
    }
    fn method(&self) -> Option<&[u8]> {
        match self.req {
            Some(r) => Some(r.head.method(r.buf)),
            None => self.kept.method,
        }
    }
    fn target(&self) -> Option<&[u8]> {
        self.req.map(|r| &r.buf[r.head.target.clone()])
    }
    fn version(&self) -> Option<&[u8]> {
        let head = self.req?.head;
        Some(match (head.h2, head.minor) {
            (true, _) => b"HTTP/2.0",
            (false, 0) => b"HTTP/1.0",
            (false, _) => b"HTTP/1.1",
        })
    }
    fn http2(&self) -> bool {
        self.req.is_some_and(|r| r.head.h2)
    }
    fn is_local(&self, ip: std::net::IpAddr) -> Option<bool> {
        crate::sys::is_local_address(ip)
    }
    fn req_header_count(&self) -> usize {
        self.req.map_or(0, |r| r.headers.len())
    }
    fn req_header(&self, i: usize) -> Option<(&[u8], &[u8])> {
        Self::header(self.req.map(|r| (r.buf, r.headers)), i)
    }
    fn req_header_named(&self, from: usize, name: &[u8]) -> Option<Named<'_>> {
        Self::header_named(self.req.map(|r| (r.buf, r.headers)), from, name)
    }
    fn req_len(&self) -> Option<usize> {
        match self.req {
            Some(r) => Some(r.received),
            None => self.payload.map(<[u8]>::len),
        }
    }
    fn req_payload(&self) -> Option<&[u8]> {
        self.payload
    }
    fn res_payload(&self) -> Option<&[u8]> {
        self.res_payload
    }
    fn req_body(&self) -> Option<&[u8]> {
        self.req?.body
    }
    fn request_line(&self) -> Option<&[u8]> {
        self.kept.request_line
    }
    fn capture_req(&self, idx: usize) -> Option<&[u8]> {
        self.captured?.get(false, idx)
    }
    fn capture_res(&self, idx: usize) -> Option<&[u8]> {
        self.captured?.get(true, idx)
    }
    fn auth_user(&self, userlist: usize) -> Option<&[u8]> {
        let list = self.shared.userlists.get(userlist)?;
        let mut cred = Vec::new();
        let colon = self.basic_auth_into(&mut cred)?;
        let (user, password) = (&cred[..colon], &cred[colon + 1..]);
        let i = list.user(user)?;
        list.check(user, password)
            .then(|| list.users[i].name.as_bytes())
    }
    fn auth_basic(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.basic_auth_into(out)
    }
    fn user_in_group(&self, userlist: usize, user: &[u8], group: &[u8]) -> bool {
        self.shared
            .userlists
            .get(userlist)
            .is_some_and(|l| l.user_in_group(user, group))
    }
    fn status(&self) -> Option<u16> {
        match self.res {
            Some(r) => Some(r.head.status),
            None => self.kept.status,
        }
    }
    fn res_version(&self) -> Option<&[u8]> {
        Some(if self.res?.head.minor == 0 {
            b"HTTP/1.0"
        } else {
            b"HTTP/1.1"
        })
    }
    fn res_header_count(&self) -> usize {
        self.res.map_or(0, |r| r.headers.len())
    }
    fn res_header(&self, i: usize) -> Option<(&[u8], &[u8])> {
        Self::header(self.res.map(|r| (r.buf, r.headers)), i)
    }
    fn res_header_named(&self, from: usize, name: &[u8]) -> Option<Named<'_>> {
        Self::header_named(self.res.map(|r| (r.buf, r.headers)), from, name)
    }
    fn frontend(&self) -> Option<(usize, &str, i64)> {
        let fe = &self.shared.frontends[self.frontend].config;
        Some((self.frontend, &fe.name, i64::from(fe.id)))
    }
    fn backend(&self) -> Option<(usize, &str, i64)> {
        let i = match self.backend {
            Some(i) => i,
            None => {
                let fe = &self.shared.frontends[self.frontend];
                // Until a backend is chosen the stream's backend is a `listen`'s own half, as
                // HAProxy's stream starts with its frontend as backend.
                let own = fe.own_backend;
                let fe = &fe.config;
                match own {
                    Some(i) => i,
                    // A frontend alone has no backend index (the fetches that would need
                    // one are refused at load, and an index out of range reads as none);
                    // a log line names it as its backend.
                    None if self.kept.frontend_as_backend => {
                        return Some((usize::MAX, &fe.name, i64::from(fe.id)))
                    }
                    None => return None,
                }
            }
        };
        let be = &self.shared.backends[i].config;
        Some((i, &be.name, i64::from(be.id)))
    }
    fn server(&self) -> Option<(&str, i64)> {
        let s = &self.shared.backends[self.backend?].servers[self.server?];
        Some((&s.config.name, i64::from(s.config.id)))
    }
    fn nbsrv(&self, be: usize) -> i64 {
        let Some(b) = self.shared.backends.get(be) else {
            return 0;
        };
        let (active, backup) = b.usable_counts();
        // HAProxy counts the active servers, or the backup ones when no active one is usable.
        (if active > 0 { active } else { backup }) as i64
    }
    fn be_sess_rate(&self, be: usize) -> i64 {
        self.shared
            .backends
            .get(be)
            .map_or(0, |b| i64::from(b.sess_rate()))
    }
    fn be_conn(&self, be: usize) -> i64 {
        let Some(b) = self.shared.backends.get(be) else {
            return 0;
        };
        b.servers.iter().map(|s| i64::from(s.cur_conns.get())).sum()
    }
    fn queue(&self, be: usize) -> i64 {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(b) = self.shared.backends.get(be) else {
            return 0;
        };
        let servers: i64 = b
            .servers
            .iter()
            .map(|s| i64::from(s.queued.load(Relaxed)))
            .sum();
        i64::from(b.queued.load(Relaxed)) + servers
    }
    fn connslots(&self, be: usize) -> i64 {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(b) = self.shared.backends.get(be) else {
            return -1;
        };
        let mut free = 0i64;
        for s in b.servers.iter().filter(|s| s.usable()) {
            let Some(max) = s.maxconn() else {
                return -1;
            };
            free += i64::from(max) - i64::from(s.cur_conns.get());
            free -= i64::from(s.queued.load(Relaxed));
        }
        free
    }
    fn fe_conn(&self, fe: usize) -> i64 {
        self.shared.frontends[fe].limit.current() as i64
    }
    fn srv_conn(&self, be: usize, srv: usize) -> i64 {
        i64::from(self.shared.backends[be].servers[srv].cur_conns.get())
    }
    fn srv_is_up(&self, be: usize, srv: usize) -> bool {
        self.shared.backends[be].servers[srv].usable()
    }
    fn srv_sess_rate(&self, be: usize, srv: usize) -> i64 {
        i64::from(self.shared.backends[be].servers[srv].sess_rate())
    }
    fn figure(&self, f: Figure) -> Option<i64> {
        use std::sync::atomic::Ordering::Relaxed;
        let ms = |t: Option<std::time::Duration>| t.map_or(0, |t| t.as_millis() as i64);
        let shared = self.shared;
        // What a server can still take: -1 without `maxconn` (HAProxy's srv_conn_free).
        let free = |s: &crate::backend::server::ServerState| match s.maxconn() {
            None => -1,
            Some(max) => (i64::from(max) - i64::from(s.cur_conns.get())).max(0),
        };
        Some(match f {
            Figure::FeReqRate(fe) => i64::from(shared.frontends[fe].counters.rate(REQ_RATE)),
            Figure::FeSessRate(fe) => i64::from(shared.frontends[fe].counters.rate(SESS_RATE)),
            Figure::FeClientTimeout => ms(shared.frontends[self.frontend].config.timeouts.client),
            Figure::BeServerTimeout(be) => ms(shared.backends[be].config.timeouts.server),
            Figure::BeTunnelTimeout(be) => ms(shared.backends[be].config.timeouts.tunnel),
            Figure::CurServerTimeout(be) | Figure::CurTunnelTimeout(be) => {
                let server = matches!(f, Figure::CurServerTimeout(_));
                let (set, configured) = if server {
                    (
                        self.kept.timeouts.0,
                        shared.backends[be].config.timeouts.server,
                    )
                } else {
                    (
                        self.kept.timeouts.1,
                        shared.backends[be].config.timeouts.tunnel,
                    )
                };
                let answered = self.res.is_some() || self.res_payload.is_some();
                ms(set.or(configured.filter(|_| answered)))
            }
            Figure::BeConnFree(be) => {
                let mut total = 0;
                for s in shared.backends[be].servers.iter().filter(|s| s.usable()) {
                    match free(s) {
                        -1 => return Some(-1),
                        n => total += n,
                    }
                }
                total
            }
            Figure::SrvConnFree(be, srv) => free(&shared.backends[be].servers[srv]),
            Figure::SrvQueue(be, srv) => {
                i64::from(shared.backends[be].servers[srv].queued.load(Relaxed))
            }
            Figure::SrvWeight(be, srv) => {
                i64::from(shared.backends[be].servers[srv].effective_weight())
            }
            Figure::SrvUweight(be, srv) => {
                i64::from(shared.backends[be].servers[srv].weight.load(Relaxed))
            }
            Figure::SrvIweight(be, srv) => {
                i64::from(shared.backends[be].servers[srv].config.weight)
            }
            Figure::Tcp(t) => {
                let i = match (self.client, self.sock) {
                    (Some(c), _) => c.tcp_info()?,
                    (None, Some(fd)) => crate::sys::tcp_info(fd).ok()?,
                    (None, None) => return None,
                };
                i64::from(match t {
                    TcpFigure::Rtt => i.tcpi_rtt,
                    TcpFigure::RttVar => i.tcpi_rttvar,
                    TcpFigure::Unacked => i.tcpi_unacked,
                    TcpFigure::Sacked => i.tcpi_sacked,
                    TcpFigure::Retrans => i.tcpi_retrans,
                    TcpFigure::Fackets => i.tcpi_fackets,
                    TcpFigure::Lost => i.tcpi_lost,
                    TcpFigure::Reordering => i.tcpi_reordering,
                })
            }
        })
    }
    fn unset_var(&self, scope: Scope, id: usize) {
        self.vars.unset(scope, id);
    }
    fn backend_named(&self, name: &[u8]) -> Option<usize> {
        self.shared
            .backends
            .iter()
            .position(|b| b.config.name.as_bytes() == name)
    }
    fn server_named(&self, be: usize, name: &[u8]) -> Option<usize> {
        self.shared.backends[be]
            .servers
            .live()
            .find(|(_, s)| s.config.name.as_bytes() == name)
            .map(|(i, _)| i)
    }
    fn hostname(&self) -> Option<&str> {
        static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        Some(NAME.get_or_init(crate::sys::hostname))
    }
    fn stopping(&self) -> bool {
        self.shared
            .stopping
            .load(std::sync::atomic::Ordering::Relaxed)
    }
    fn thread(&self) -> i64 {
        crate::base::counter::worker_id() as i64
    }
    fn date_us(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::from(d.subsec_micros()))
    }
    fn default_backend(&self) -> Option<&str> {
        let fe = &self.shared.frontends[self.frontend].config;
        let be = &self.shared.backends[fe.default_backend?].config;
        // A `listen` section's own backend half is not a default backend to HAProxy: the
        // two halves share their rules.
        if std::sync::Arc::ptr_eq(&fe.rules, &be.rules) {
            return None;
        }
        Some(&be.name)
    }
    fn var(&self, scope: Scope, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        self.vars.get(scope, id, out)
    }
    fn set_var(&self, scope: Scope, id: usize, v: Value<'_>) {
        self.vars.set(scope, id, v);
    }
    fn set_var_if(&self, scope: Scope, id: usize, v: Value<'_>, cond: crate::rules::vars::VarCond) {
        self.vars.set_if(scope, id, v, cond);
    }
    fn env(&self, name: &str) -> Option<&[u8]> {
        // The process environment as the configuration left it (`setenv` and friends).
        self.shared.global.env.get(name).map(|v| v.as_bytes())
    }
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }
    fn random(&self) -> u32 {
        crate::base::clock::random_u32()
    }
    fn stick_table(&self, t: usize) -> Option<&crate::stick::Table> {
        self.shared.tables.get(t).map(|t| &**t)
    }
    fn stick_tracked(&self, n: usize) -> Option<&crate::stick::track::Track> {
        self.stick?.get(n)
    }
    fn stick_now(&self) -> u64 {
        crate::base::clock::uptime_ms()
    }
    fn wait_end(&self) -> bool {
        self.wait_over
    }
    fn last_rule(&self) -> Option<(&str, u32)> {
        let r = self.kept.last_rule?;
        let rules = match r.backend {
            None => &self.shared.frontends[self.frontend].config.rules,
            Some(b) => &self.shared.backends.get(b)?.config.rules,
        };
        let span = match r.list {
            RuleList::TcpRequestContent => &rules.tcp_request_content.get(r.index)?.span,
            RuleList::HttpRequest => &rules.http_request.get(r.index)?.span,
            RuleList::HttpResponse => &rules.http_response.get(r.index)?.span,
            RuleList::HttpAfterResponse => &rules.http_after_response.get(r.index)?.span,
            RuleList::TcpResponseContent => &rules.tcp_response_content.get(r.index)?.span,
        };
        Some((&span.file, span.line))
    }
    fn unique_id(&self, out: &mut Vec<u8>) -> bool {
        self.ensure_unique_id();
        match self.kept.unique_id.and_then(UniqueId::get) {
            Some(id) => {
                out.extend_from_slice(&id);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lookup by name finds the first header of that name at or after an index, in any
    /// case, and where the next one is.
    #[test]
    fn header_named_gives_the_next_of_the_name() {
        let lines: &[(&str, &str)] = &[("Host", "a"), ("X-A", "1"), ("x-a", "2"), ("Y", "3")];
        let mut buf = Vec::new();
        let mut headers = Vec::new();
        for (n, v) in lines {
            let start = buf.len();
            buf.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
            let name = start..start + n.len();
            let value = name.end + 2..name.end + 2 + v.len();
            headers.push(HeaderIdx::new(&buf, name, value, start..buf.len()));
        }
        let view = Some((&buf[..], &headers[..]));
        let found = |from, name: &[u8]| Facts::header_named(view, from, name);
        let named = |idx, value: &'static [u8], next| Named { idx, value, next };
        assert_eq!(found(0, b"x-a"), Some(named(1, b"1", Some(2))));
        assert_eq!(found(2, b"x-a"), Some(named(2, b"2", None)));
        assert_eq!(found(3, b"x-a"), None);
        assert_eq!(found(0, b"host"), Some(named(0, b"a", None)));
        assert_eq!(found(0, b"y"), Some(named(3, b"3", None)));
        assert_eq!(found(9, b"y"), None);
        assert_eq!(found(0, b"x-b"), None);
    }
}
