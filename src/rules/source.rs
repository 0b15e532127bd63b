//! What an evaluation reads from the runtime: the [`Source`] trait, and [`TestSource`], an
//! owned implementation for tests.
//!
//! Why a trait: the rules engine is pure logic (layer 1) and must not know sessions, buffers or
//! shared server state. The runtime implements `Source` over what it already has (an HTTP/1
//! head kept as offsets into its read buffer, the backends' atomics), so a fetch costs a slice
//! or an atomic load. Headers are read by index (`req_header(i)`), which an array of offsets
//! answers at once and which lets a multi-valued fetch resume where it stopped. Backends,
//! servers, frontends, userlists and variables are named by the indices the config layer gave
//! their names at compile time ([`crate::rules::Names`]); nothing is looked up by name here.
//!
//! Every method has a default (absent, 0 or false) so a runtime can start with the fetches it
//! supports, and a TCP-mode session simply leaves the HTTP ones out.

use std::cell::RefCell;
use std::net::SocketAddr;

use super::sample::Value;

/// A variable's scope, as in `var(txn.name)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Proc,
    Sess,
    Txn,
    Req,
    Res,
    /// A health check's own variables (`http-check set-var(check.NAME)`), which only checks
    /// see.
    Check,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        Some(match s {
            "proc" => Scope::Proc,
            "sess" => Scope::Sess,
            "txn" => Scope::Txn,
            "req" => Scope::Req,
            "res" => Scope::Res,
            "check" => Scope::Check,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Scope::Proc => "proc",
            Scope::Sess => "sess",
            Scope::Txn => "txn",
            Scope::Req => "req",
            Scope::Res => "res",
            Scope::Check => "check",
        }
    }
}

/// A variable's value without its bytes (those are written into the caller's buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    Bool(bool),
    Sint(i64),
    Ipv4(std::net::Ipv4Addr),
    Ipv6(std::net::Ipv6Addr),
    Str,
    Bin,
    Meth,
}

/// What a TLS connection's handshake settled, for the `ssl_fc_*`, `ssl_c_*` and `ssl_bc_*`
/// fetches.
#[derive(Clone, Copy, Debug, Default)]
pub struct SslInfo<'a> {
    pub sni: Option<&'a [u8]>,
    pub alpn: Option<&'a [u8]>,
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: &'static str,
    /// The cipher suite by OpenSSL's name.
    pub cipher: &'static str,
    /// The cipher's key size in bits.
    pub key_bits: u32,
    pub resumed: bool,
    /// The client's certificate (DER), when it sent one.
    pub client_cert: Option<&'a [u8]>,
    /// The whole chain the peer sent (DER, leaf first).
    pub peer_chain: Option<&'a [Vec<u8>]>,
    /// What the `ssl_c_*` fetches read of it.
    pub client: Option<&'a PeerCert>,
    /// The certificate the `bind` presented (DER) and its fields (`ssl_f_*`), when a rule
    /// reads them.
    pub frontend_der: Option<&'a [u8]>,
    pub frontend: Option<&'a PeerCert>,
    /// What verifying the client's certificate found.
    pub verify: VerifyCodes,
    /// The ClientHello's lists, when `tune.ssl.capture-buffer-size` keeps them.
    pub hello: Option<&'a crate::proto::tls_hello::HelloLists>,
}

/// OpenSSL's verification codes of a client certificate (`X509_V_ERR_*`, 0 for none), for
/// `ssl_c_verify` (the result), `ssl_c_err` (the first error about the certificate itself),
/// `ssl_c_ca_err` and `ssl_c_ca_err_depth` (the first about an issuer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyCodes {
    pub result: i64,
    pub crt_err: i64,
    pub ca_err: i64,
    pub ca_err_depth: i64,
}

/// The fields of a peer's certificate the `ssl_c_*` fetches return, read once at the handshake.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCert {
    /// Subject and issuer attributes in order, by OpenSSL's short names (`CN`, `O`, `C`...).
    pub subject: Vec<(String, String)>,
    pub issuer: Vec<(String, String)>,
    /// The serial number's magnitude, big-endian.
    pub serial: Vec<u8>,
    /// The validity bounds as HAProxy returns them (`YYMMDDhhmmssZ`; none for a date past 2099).
    pub not_before: Option<String>,
    pub not_after: Option<String>,
    /// The certificate's version (1, 2 or 3).
    pub version: i64,
    /// SHA-1 of the DER certificate.
    pub sha1: Vec<u8>,
    /// The signature and public-key algorithms by OpenSSL's short names (`RSA-SHA256`,
    /// `id-ecPublicKey`).
    pub sig_alg: String,
    pub key_alg: String,
}

/// A header line found by name ([`Source::req_header_named`]): its index, its value, and the
/// index of the next line of the same name (`None`: it is the last one). Knowing the next one
/// in the same pass lets a multi-valued fetch stop after the last value instead of scanning
/// the rest of the head again to find nothing, and `hdr(name)` (the last value) reach the last
/// line in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named<'a> {
    pub idx: usize,
    pub value: &'a [u8],
    pub next: Option<usize>,
}

impl<'a> Named<'a> {
    /// The first line at `from` or after named `name` among those `line(i)` gives (name,
    /// value) until it gives `None`, compared without case.
    pub fn find(
        from: usize,
        name: &[u8],
        line: impl Fn(usize) -> Option<(&'a [u8], &'a [u8])>,
    ) -> Option<Named<'a>> {
        let mut lines = (from..).map_while(|i| Some((i, line(i)?)));
        let (idx, (_, value)) = lines.find(|(_, (n, _))| n.eq_ignore_ascii_case(name))?;
        let next = lines
            .find(|(_, (n, _))| n.eq_ignore_ascii_case(name))
            .map(|(i, _)| i);
        Some(Named { idx, value, next })
    }
}

/// The integers fetches read from counters, settings and the kernel, one [`Source::figure`]
/// for them all. Backends and servers are indices resolved at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// Requests (`fe_req_rate`) and sessions (`fe_sess_rate`) of a frontend over the last
    /// second.
    FeReqRate(usize),
    FeSessRate(usize),
    /// The stream's frontend's `timeout client`, in milliseconds (`fe_client_timeout`).
    FeClientTimeout,
    /// A backend's `timeout server` and `timeout tunnel`, in milliseconds (0: none).
    BeServerTimeout(usize),
    BeTunnelTimeout(usize),
    /// The stream's server and tunnel timeouts (`cur_server_timeout`...): what a `set-timeout`
    /// rule set, else, once there is a response, its backend's; 0 before either, as
    /// haproxy 2.6 answers.
    CurServerTimeout(usize),
    CurTunnelTimeout(usize),
    /// Connections a backend's usable servers can still take (-1: one has no `maxconn`).
    BeConnFree(usize),
    /// Connections a server can still take (-1: no `maxconn`), its queue, and its effective,
    /// user and initial weights.
    SrvConnFree(usize, usize),
    SrvQueue(usize, usize),
    SrvWeight(usize, usize),
    SrvUweight(usize, usize),
    SrvIweight(usize, usize),
    /// What the kernel knows of the client's TCP connection (`TCP_INFO`).
    Tcp(TcpFigure),
}

/// What `tune.ssl.keylog on` keeps of a client's handshake: its client random and its secrets
/// by NSS key log label (the `ssl_fc_client_random` and `ssl_fc_*_secret` fetches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    ClientRandom,
    ClientEarlyTraffic,
    ClientHandshakeTraffic,
    ServerHandshakeTraffic,
    ClientTraffic0,
    ServerTraffic0,
    Exporter,
    EarlyExporter,
}

/// The fields of `TCP_INFO` the `fc_*` fetches return (HAProxy's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpFigure {
    /// Smoothed round trip time and its variance, in microseconds.
    Rtt,
    RttVar,
    Unacked,
    Sacked,
    Retrans,
    Fackets,
    Lost,
    Reordering,
}

/// The runtime facts a rule may read. Names (backend, server, frontend, userlist, variable) are
/// indices resolved at compile time. Lifetimes: every slice borrows `self`, so an
/// implementation over a buffer of offsets returns sub-slices of that buffer.
#[allow(unused_variables)]
pub trait Source {
    // --- connection ---
    /// Client address (`src`, `src_port`).
    fn src(&self) -> Option<SocketAddr> {
        None
    }
    /// Address the client connected to (`dst`, `dst_port`).
    fn dst(&self) -> Option<SocketAddr> {
        None
    }
    /// The listener's `name` (`so_name`).
    fn so_name(&self) -> Option<&str> {
        None
    }
    /// The listener's numeric id (`so_id`).
    fn so_id(&self) -> Option<i64> {
        None
    }
    /// The connection's own client address (`fc_src`, `fc_src_port`): the socket's, or a
    /// PROXY header's, as `tcp-request connection set-src` left it; the session's and the
    /// stream's `set-src` change `src` only.
    fn fc_src(&self) -> Option<SocketAddr> {
        self.src()
    }
    /// The connection's own destination address (`fc_dst`, `fc_dst_port`), likewise.
    fn fc_dst(&self) -> Option<SocketAddr> {
        self.dst()
    }
    /// Whether the request is the first one of its connection (`http_first_req`); `None`
    /// where there is no request.
    fn first_req(&self) -> Option<bool> {
        None
    }
    /// Whether the connection began with a PROXY protocol header (`fc_rcvd_proxy`).
    fn fc_rcvd_proxy(&self) -> bool {
        false
    }
    /// A TLV of that header, by its PROXY protocol v2 type: 0x02 `AUTHORITY`
    /// (`fc_pp_authority`), 0x05 `UNIQUE_ID` (`fc_pp_unique_id`).
    fn pp_tlv(&self, kind: u8) -> Option<&[u8]> {
        let _ = kind;
        None
    }
    /// Whether the client connection is TLS (`ssl_fc`).
    fn ssl_fc(&self) -> bool {
        self.ssl().is_some()
    }
    /// The SNI the client sent (`ssl_fc_sni`).
    fn ssl_sni(&self) -> Option<&[u8]> {
        self.ssl()?.sni
    }
    /// What the client connection's TLS handshake settled (`None`: not TLS).
    fn ssl(&self) -> Option<SslInfo<'_>> {
        None
    }
    /// What the server connection's TLS handshake settled (`ssl_bc*`; `None`: no server
    /// connection yet, or not TLS).
    fn ssl_bc(&self) -> Option<SslInfo<'_>> {
        None
    }

    // --- request ---
    /// Method token (`method`), absent in TCP mode.
    fn method(&self) -> Option<&[u8]> {
        None
    }
    /// Request target as sent (`url`; `path`, `query` and the rest are cut from it).
    fn target(&self) -> Option<&[u8]> {
        None
    }
    /// Request version as sent, e.g. `HTTP/1.1` (`req.ver` gives `1.1`).
    fn version(&self) -> Option<&[u8]> {
        None
    }
    /// Number of request header lines.
    fn req_header_count(&self) -> usize {
        0
    }
    /// Request header line `i` (name, value), in order, as sent.
    fn req_header(&self, i: usize) -> Option<(&[u8], &[u8])> {
        None
    }
    /// The first request header line at `from` or after named `name` (lower-case; compared
    /// without case), and where the next one of that name is. A runtime may answer without
    /// building each line's (name, value) pair, as this default does.
    fn req_header_named(&self, from: usize, name: &[u8]) -> Option<Named<'_>> {
        Named::find(from, name, |i| self.req_header(i))
    }
    /// Bytes of the request buffered so far (`req.len`): head and any body read with it.
    fn req_len(&self) -> Option<usize> {
        None
    }
    /// Whether `ip` is one of this host's addresses (`src_is_local`...): `None` when that
    /// cannot be told.
    fn is_local(&self, ip: std::net::IpAddr) -> Option<bool> {
        let _ = ip;
        None
    }
    /// The front connection speaks HTTP/2 (`fc_http_major`).
    fn http2(&self) -> bool {
        false
    }
    /// The raw bytes the client sent so far, from the first (a TCP-mode request under
    /// `tcp-request content` inspection): `req.payload`, `req.payload_lv`, and the `req.ssl_*`
    /// fetches, which read a TLS hello in them. `None` in HTTP mode (HAProxy's layer-6 fetches
    /// see no raw stream there either) and once the request is gone.
    fn req_payload(&self) -> Option<&[u8]> {
        None
    }
    /// The raw bytes the server sent so far (a TCP-mode response under `tcp-response
    /// content` inspection): `res.len`, `res.payload`, `res.payload_lv`.
    fn res_payload(&self) -> Option<&[u8]> {
        None
    }
    /// The request body when it has been buffered (`req.body`, `req.body_param`).
    fn req_body(&self) -> Option<&[u8]> {
        None
    }
    /// The request line as received, kept for the whole transaction (`capture.req.*`).
    fn request_line(&self) -> Option<&[u8]> {
        None
    }
    /// A value captured by `http-request capture` / `capture request header`, by slot.
    fn capture_req(&self, idx: usize) -> Option<&[u8]> {
        None
    }
    /// A response capture slot.
    fn capture_res(&self, idx: usize) -> Option<&[u8]> {
        None
    }
    /// The user name of valid credentials for `userlist`, if the request's Authorization
    /// header carries a user and password that userlist accepts (`http_auth`,
    /// `http_auth_group`). The config layer resolves the userlist; the runtime checks.
    fn auth_user(&self, userlist: usize) -> Option<&[u8]> {
        None
    }
    /// The `Authorization: Basic` credentials as sent, decoded (`user:password`), appended to
    /// `out`; returns the position of the colon in what was appended. No userlist is checked
    /// (`http_auth_user`, `http_auth_pass`).
    fn auth_basic(&self, out: &mut Vec<u8>) -> Option<usize> {
        None
    }
    /// Whether `user` belongs to `group` in `userlist` (for `http_auth_group` patterns).
    fn user_in_group(&self, userlist: usize, user: &[u8], group: &[u8]) -> bool {
        false
    }

    // --- response ---
    fn status(&self) -> Option<u16> {
        None
    }
    /// Response version as sent, e.g. `HTTP/1.1`.
    fn res_version(&self) -> Option<&[u8]> {
        None
    }
    fn res_header_count(&self) -> usize {
        0
    }
    fn res_header(&self, i: usize) -> Option<(&[u8], &[u8])> {
        None
    }
    /// As [`Source::req_header_named`], for the response.
    fn res_header_named(&self, from: usize, name: &[u8]) -> Option<Named<'_>> {
        Named::find(from, name, |i| self.res_header(i))
    }

    // --- proxies and servers (indices from `Names`) ---
    /// The frontend this stream came through: its index, name and numeric id.
    fn frontend(&self) -> Option<(usize, &str, i64)> {
        None
    }
    /// The backend chosen so far (index, name, id).
    fn backend(&self) -> Option<(usize, &str, i64)> {
        None
    }
    /// The server chosen (name, id); set once connected.
    fn server(&self) -> Option<(&str, i64)> {
        None
    }
    /// Usable servers of backend `be` (`nbsrv`).
    fn nbsrv(&self, be: usize) -> i64 {
        0
    }
    /// Current connections on backend `be` (`be_conn`).
    fn be_conn(&self, be: usize) -> i64 {
        0
    }
    /// Sessions per second on `be` over the last second (`be_sess_rate`).
    fn be_sess_rate(&self, be: usize) -> i64 {
        0
    }
    /// Requests queued on `be` and its servers (`queue`).
    fn queue(&self, be: usize) -> i64 {
        0
    }
    /// Free connection and queue slots on `be`, -1 when unlimited (`connslots`; haproxy 2.6
    /// answers -1 for servers without maxconn).
    fn connslots(&self, be: usize) -> i64 {
        -1
    }
    /// Current connections on frontend `fe` (`fe_conn`).
    fn fe_conn(&self, fe: usize) -> i64 {
        0
    }
    /// Current connections on server `srv` of backend `be` (`srv_conn`).
    fn srv_conn(&self, be: usize, srv: usize) -> i64 {
        0
    }
    /// Whether server `srv` of `be` is UP (`srv_is_up`).
    fn srv_is_up(&self, be: usize, srv: usize) -> bool {
        false
    }
    /// Sessions per second on server `srv` of `be` over the last second (`srv_sess_rate`).
    fn srv_sess_rate(&self, be: usize, srv: usize) -> i64 {
        0
    }
    /// A counter, setting or kernel figure read as an integer (see [`Figure`]); `None`
    /// when the stream has none (no backend yet, a UNIX socket's client for `fc_rtt`...).
    fn figure(&self, f: Figure) -> Option<i64> {
        None
    }
    /// A secret of the client connection's handshake (`tune.ssl.keylog on`).
    fn ssl_secret(&self, kind: SecretKind) -> Option<&[u8]> {
        None
    }
    /// The process: the system's host name (`hostname`), the worker thread evaluating
    /// (`thread`, from 0), the wall clock's microseconds within its second (`date_us`).
    fn hostname(&self) -> Option<&str> {
        None
    }
    fn thread(&self) -> i64 {
        0
    }
    /// Whether the process is stopping softly (`stopping`).
    fn stopping(&self) -> bool {
        false
    }
    fn date_us(&self) -> i64 {
        0
    }
    /// The backend named `name`, and server `name` of backend `be`, looked up at run time
    /// (the `nbsrv` and `srv_queue` converters, whose names come from the sample).
    fn backend_named(&self, name: &[u8]) -> Option<usize> {
        None
    }
    fn server_named(&self, be: usize, name: &[u8]) -> Option<usize> {
        None
    }
    /// The name of the frontend's `default_backend` (`fe_defbe`; a `listen` section without
    /// one has none).
    fn default_backend(&self) -> Option<&str> {
        None
    }

    // --- variables, environment, clock, randomness ---
    /// Reads variable `id` of `scope`: its bytes, for a string, binary or method, are appended
    /// to `out` (cleared by the caller).
    fn var(&self, scope: Scope, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        None
    }
    /// Sets a variable (the `set-var` converter). `&self`: the runtime keeps variables in a
    /// cell, which is sound because a stream is evaluated on one thread.
    fn set_var(&self, scope: Scope, id: usize, v: Value<'_>) {}
    /// `set-var(NAME,COND...)`: sets the variable if the conditions hold (the runtime keeps
    /// HAProxy's rules; a source without variables ignores it).
    fn set_var_if(&self, scope: Scope, id: usize, v: Value<'_>, cond: super::vars::VarCond) {
        if cond == super::vars::VarCond::NONE {
            self.set_var(scope, id, v);
        }
    }
    /// Unsets a variable (the `unset-var` converter).
    fn unset_var(&self, scope: Scope, id: usize) {}
    /// An environment variable (`env`), as the process sees it now.
    fn env(&self, name: &str) -> Option<&[u8]> {
        None
    }
    /// Wall clock, seconds since the epoch (`date`).
    fn now(&self) -> i64 {
        0
    }
    /// Offset of local time from UTC at time `t`, in seconds (`ltime`); the runtime asks the
    /// system, tests and UTC hosts answer 0.
    fn utc_offset(&self, t: i64) -> i64 {
        0
    }
    /// A random 32-bit number (`rand`).
    fn random(&self) -> u32 {
        0
    }
    /// Whether the inspect delay has expired (`WAIT_END`).
    fn wait_end(&self) -> bool {
        true
    }

    // --- stream identity and history ---
    /// Appends the transaction's unique id (`unique-id-format`, computed when the request
    /// head is complete) to `out`; false when the frontend has none (`unique-id`).
    fn unique_id(&self, out: &mut Vec<u8>) -> bool {
        false
    }
    /// The file and line of the last final rule that ran (`last_rule_file`,
    /// `last_rule_line`).
    fn last_rule(&self) -> Option<(&str, u32)> {
        None
    }
    // --- stick tables (indices from `Names::table`) ---
    /// The stick table of index `t`.
    fn stick_table(&self, t: usize) -> Option<&crate::stick::Table> {
        None
    }
    /// The entry `track-sc<n>` tracks for this stream (the stream's slot, else the
    /// session's).
    fn stick_tracked(&self, n: usize) -> Option<&crate::stick::track::Track> {
        None
    }
    /// The stick tables' clock: milliseconds on the process clock.
    fn stick_now(&self) -> u64 {
        0
    }
}

/// An owned [`Source`] for tests: every fact is a plain field.
#[derive(Debug, Default)]
pub struct TestSource {
    pub src: Option<SocketAddr>,
    pub dst: Option<SocketAddr>,
    pub method: Option<Vec<u8>>,
    pub target: Option<Vec<u8>>,
    pub version: Option<Vec<u8>>,
    pub req_headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub req_body: Option<Vec<u8>>,
    pub req_len: Option<usize>,
    pub req_payload: Option<Vec<u8>>,
    pub captures: Vec<Vec<u8>>,
    pub status: Option<u16>,
    pub res_version: Option<Vec<u8>>,
    pub res_headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub frontend: Option<(usize, String, i64)>,
    pub backend: Option<(usize, String, i64)>,
    pub server: Option<(String, i64)>,
    /// Per backend: usable servers, connections, queue; per server: (conns, up).
    pub backends: Vec<TestBackend>,
    pub fe_conn: Vec<i64>,
    pub env: Vec<(String, Vec<u8>)>,
    pub vars: RefCell<Vec<TestVar>>,
    pub now: i64,
    pub random: u32,
    /// (userlist, user) whose credentials are valid, and the user's groups.
    pub auth: Option<(usize, Vec<u8>, Vec<Vec<u8>>)>,
    pub ssl: bool,
    pub sni: Option<Vec<u8>>,
}

/// A variable of a [`TestSource`]: scope, id, bytes, value.
pub type TestVar = (Scope, usize, Vec<u8>, Stored);

/// Live facts of one backend in a [`TestSource`].
#[derive(Debug, Default, Clone)]
pub struct TestBackend {
    pub nbsrv: i64,
    pub conn: i64,
    pub queue: i64,
    pub sess_rate: i64,
    pub connslots: i64,
    /// Per server: current connections, UP, sessions per second.
    pub servers: Vec<(i64, bool, i64)>,
}

impl TestSource {
    /// A GET of `target` over HTTP/1.1 from 127.0.0.1:40000 to 127.0.0.1:80 with `headers`.
    pub fn get(target: &str, headers: &[(&str, &str)]) -> Self {
        TestSource {
            src: Some("127.0.0.1:40000".parse().unwrap()),
            dst: Some("127.0.0.1:80".parse().unwrap()),
            method: Some(b"GET".to_vec()),
            target: Some(target.as_bytes().to_vec()),
            version: Some(b"HTTP/1.1".to_vec()),
            req_headers: headers
                .iter()
                .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            ..Default::default()
        }
    }
}

impl Source for TestSource {
    fn src(&self) -> Option<SocketAddr> {
        self.src
    }
    fn dst(&self) -> Option<SocketAddr> {
        self.dst
    }
    fn ssl(&self) -> Option<SslInfo<'_>> {
        self.ssl.then(|| SslInfo {
            sni: self.sni.as_deref(),
            version: "TLSv1.3",
            cipher: "TLS_AES_128_GCM_SHA256",
            key_bits: 128,
            ..Default::default()
        })
    }
    fn method(&self) -> Option<&[u8]> {
        self.method.as_deref()
    }
    fn target(&self) -> Option<&[u8]> {
        self.target.as_deref()
    }
    fn version(&self) -> Option<&[u8]> {
        self.version.as_deref()
    }
    fn req_header_count(&self) -> usize {
        self.req_headers.len()
    }
    fn req_header(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.req_headers
            .get(i)
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
    }
    fn req_len(&self) -> Option<usize> {
        self.req_len
    }
    fn req_payload(&self) -> Option<&[u8]> {
        self.req_payload.as_deref()
    }
    fn req_body(&self) -> Option<&[u8]> {
        self.req_body.as_deref()
    }
    fn capture_req(&self, idx: usize) -> Option<&[u8]> {
        self.captures.get(idx).map(|v| v.as_slice())
    }
    fn auth_user(&self, userlist: usize) -> Option<&[u8]> {
        match &self.auth {
            Some((ul, user, _)) if *ul == userlist => Some(user),
            _ => None,
        }
    }
    fn user_in_group(&self, userlist: usize, user: &[u8], group: &[u8]) -> bool {
        matches!(&self.auth, Some((ul, u, groups)) if *ul == userlist && u == user
            && groups.iter().any(|g| g == group))
    }
    fn status(&self) -> Option<u16> {
        self.status
    }
    fn res_version(&self) -> Option<&[u8]> {
        self.res_version.as_deref()
    }
    fn res_header_count(&self) -> usize {
        self.res_headers.len()
    }
    fn res_header(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.res_headers
            .get(i)
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
    }
    fn frontend(&self) -> Option<(usize, &str, i64)> {
        self.frontend
            .as_ref()
            .map(|(i, n, id)| (*i, n.as_str(), *id))
    }
    fn backend(&self) -> Option<(usize, &str, i64)> {
        self.backend
            .as_ref()
            .map(|(i, n, id)| (*i, n.as_str(), *id))
    }
    fn server(&self) -> Option<(&str, i64)> {
        self.server.as_ref().map(|(n, id)| (n.as_str(), *id))
    }
    fn nbsrv(&self, be: usize) -> i64 {
        self.backends.get(be).map_or(0, |b| b.nbsrv)
    }
    fn be_conn(&self, be: usize) -> i64 {
        self.backends.get(be).map_or(0, |b| b.conn)
    }
    fn be_sess_rate(&self, be: usize) -> i64 {
        self.backends.get(be).map_or(0, |b| b.sess_rate)
    }
    fn queue(&self, be: usize) -> i64 {
        self.backends.get(be).map_or(0, |b| b.queue)
    }
    fn connslots(&self, be: usize) -> i64 {
        self.backends.get(be).map_or(-1, |b| b.connslots)
    }
    fn fe_conn(&self, fe: usize) -> i64 {
        self.fe_conn.get(fe).copied().unwrap_or(0)
    }
    fn srv_conn(&self, be: usize, srv: usize) -> i64 {
        self.backends
            .get(be)
            .and_then(|b| b.servers.get(srv))
            .map_or(0, |s| s.0)
    }
    fn srv_is_up(&self, be: usize, srv: usize) -> bool {
        self.backends
            .get(be)
            .and_then(|b| b.servers.get(srv))
            .is_some_and(|s| s.1)
    }
    fn srv_sess_rate(&self, be: usize, srv: usize) -> i64 {
        self.backends
            .get(be)
            .and_then(|b| b.servers.get(srv))
            .map_or(0, |s| s.2)
    }
    fn var(&self, scope: Scope, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        let vars = self.vars.borrow();
        let (_, _, bytes, st) = vars.iter().find(|v| v.0 == scope && v.1 == id)?;
        out.extend_from_slice(bytes);
        Some(*st)
    }
    fn set_var(&self, scope: Scope, id: usize, v: Value<'_>) {
        let (bytes, st) = match v {
            Value::Bool(b) => (vec![], Stored::Bool(b)),
            Value::Sint(i) => (vec![], Stored::Sint(i)),
            Value::Ipv4(a) => (vec![], Stored::Ipv4(a)),
            Value::Ipv6(a) => (vec![], Stored::Ipv6(a)),
            Value::Str(b) => (b.to_vec(), Stored::Str),
            Value::Bin(b) => (b.to_vec(), Stored::Bin),
            Value::Meth(b) => (b.to_vec(), Stored::Meth),
        };
        let mut vars = self.vars.borrow_mut();
        vars.retain(|v| !(v.0 == scope && v.1 == id));
        vars.push((scope, id, bytes, st));
    }
    fn env(&self, name: &str) -> Option<&[u8]> {
        self.env
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
    fn now(&self) -> i64 {
        self.now
    }
    fn random(&self) -> u32 {
        self.random
    }
}
