//! Sample fetches: the catalogue (name, arguments, output type, phases) and their evaluation.
//!
//! Why a catalogue: the config layer needs to know, without evaluating anything, what a fetch
//! takes and returns (to type-check a converter chain), where it can run (a response fetch in
//! `http-request` is a diagnostic), and which names it refers to (a backend in `nbsrv(web)`
//! must exist). Each [`FetchDef`] is one record; compiling a call (`req.hdr(host,-1)`)
//! checks and converts its arguments once (header names lower-cased, backend names resolved to
//! indices), so evaluation does no parsing and no lookup by name.
//!
//! Multi-valued fetches (`req.hdr`, `req.cook`, `res.hdr`, ...) follow HAProxy: in a sample
//! context without an occurrence they return the last value; in an ACL every value is tried
//! until one matches ([`Iter`] resumes where the previous value ended).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::expr::split_call;
use super::hash;
use super::sample::{Bytes, Eval, Sample, SmpType};
use super::source::{Scope, Source, Stored};
use super::{did_you_mean, err, Names, Phases, RuleError};

/// The kind of one fetch argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    Str,
    /// A header name: matched case-insensitively, stored lower-cased.
    Hdr,
    Int,
    Backend,
    /// `backend/server`.
    Server,
    Frontend,
    Userlist,
    /// `scope.name`.
    Var,
    /// The constant of `int()`, `str()`, `ipv4()`...: parsed as the fetch's output type.
    Const,
    /// A stick table (a proxy's name).
    Table,
}

/// Set when a fetch of the `bind`'s own certificate (`ssl_f_*`) is compiled: TLS handshakes
/// then record which certificate they served (none pay for it otherwise).
pub static FRONTEND_CERT_USED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Which fetch a definition is; evaluation dispatches on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum F {
    Src,
    SrcPort,
    Dst,
    DstPort,
    FcSrc,
    FcSrcPort,
    FcDst,
    FcDstPort,
    HttpFirstReq,
    SoId,
    SoName,
    FeName,
    FeId,
    BeName,
    BeId,
    SrvName,
    SrvId,
    Nbsrv,
    BeConn,
    BeSessRate,
    FeConn,
    SrvConn,
    SrvIsUp,
    SrvSessRate,
    Connslots,
    AvgQueue,
    Queue,
    Path,
    Pathq,
    Url,
    UrlIp,
    UrlPort,
    Query,
    UrlParam,
    Method,
    ReqVer,
    Hdr,
    HdrCnt,
    Fhdr,
    FhdrCnt,
    Hdrs,
    HdrIp,
    HdrVal,
    Cook,
    CookCnt,
    CookVal,
    Base,
    Base32,
    Base32Src,
    Url32,
    Url32Src,
    CaptureReqHdr,
    CaptureResHdr,
    CaptureReqMethod,
    CaptureReqUri,
    CaptureReqVer,
    ReqLen,
    ReqPayload,
    ReqPayloadLv,
    ResLen,
    ResPayload,
    ResPayloadLv,
    ReqBody,
    ReqBodyParam,
    ReqBodyLen,
    /// The client's TLS hello, read from the request buffer (see `proto::tls_hello`).
    ReqSslAlpn,
    ReqSslEcExt,
    ReqSslHelloType,
    ReqSslSni,
    ReqSslStExt,
    ReqSslVer,
    ResHdr,
    ResHdrCnt,
    ResFhdr,
    ResFhdrCnt,
    ResCook,
    ResCookCnt,
    Status,
    ResVer,
    SslFc,
    SslFcSni,
    SslFcHasSni,
    SslFcProtocol,
    SslFcCipher,
    SslFcAlpn,
    SslFcIsResumed,
    SslFcUseKeysize,
    SslFcAlgKeysize,
    SslCUsed,
    SslFcHasCrt,
    SslCSDn,
    SslCIDn,
    SslCSerial,
    SslCNotBefore,
    SslCNotAfter,
    SslCVerify,
    SslCErr,
    FcErr,
    SslFcErr,
    FcRcvdProxy,
    FcPpAuthority,
    FcPpUniqueId,
    SslCCaErr,
    SslCCaErrDepth,
    SslCVersion,
    SslCSha1,
    SslCDer,
    SslCSigAlg,
    SslCKeyAlg,
    SslCChainDer,
    SslFSigAlg,
    SslFKeyAlg,
    SslSSDn,
    SslSIDn,
    SslSSerial,
    SslSNotBefore,
    SslSNotAfter,
    SslSVersion,
    SslSSha1,
    SslSDer,
    SslSSigAlg,
    SslSKeyAlg,
    SslSChainDer,
    SslFSDn,
    SslFIDn,
    SslFSerial,
    SslFNotBefore,
    SslFNotAfter,
    SslFVersion,
    SslFSha1,
    SslFDer,
    SslBc,
    SslBcProtocol,
    SslBcCipher,
    SslBcAlpn,
    SslBcIsResumed,
    SslBcKeysize,
    Var,
    Env,
    Rand,
    Date,
    True,
    False,
    Const,
    HttpAuth,
    HttpAuthGroup,
    HttpAuthUser,
    HttpAuthPass,
    ProtoHttp,
    WaitEnd,
    RdpCookieCnt,
    RdpCookie,
    // Stream identity and history (see `stream_fetch`).
    Uuid,
    UniqueId,
    LastRuleFile,
    LastRuleLine,
    // Counters, settings and kernel figures (see `Source::figure`).
    FeReqRate,
    FeSessRate,
    FeDefbe,
    FeClientTimeout,
    BeServerTimeout,
    BeTunnelTimeout,
    CurServerTimeout,
    CurTunnelTimeout,
    BeConnFree,
    SrvConnFree,
    SrvQueue,
    SrvWeight,
    SrvUweight,
    SrvIweight,
    FcRtt,
    FcRttVar,
    FcUnacked,
    FcSacked,
    FcRetrans,
    FcFackets,
    FcLost,
    FcReordering,
    // The process.
    Hostname,
    Nbproc,
    Proc,
    Thread,
    DateUs,
    Stopping,
    // HTTP.
    Baseq,
    HttpAuthType,
    HttpAuthBearer,
    ReqHdrNames,
    ResHdrNames,
    ResHdrIp,
    ResHdrVal,
    ResCookVal,
    ResHdrs,
    CaptureResVer,
    // The ClientHello's lists (`tune.ssl.capture-buffer-size`).
    SslFcCipherlistBin,
    SslFcCipherlistHex,
    SslFcCipherlistStr,
    SslFcCipherlistXxh,
    SslFcExtlistBin,
    SslFcEclistBin,
    SslFcEcformatsBin,
    SslFcProtocolHelloId,
    /// `tune.ssl.keylog on`: the client random and the handshake's secrets.
    SslFcSecret,
    UrlParamVal,
    /// `cookie(NAME)`: the request's `Cookie` in request rules, the response's `Set-Cookie`
    /// in response rules (the deprecated name of `req.cook`/`res.cook`).
    CookieDir,
    /// `payload` and `payload_lv`: `req.` or `res.payload[_lv]` by the rule's direction.
    PayloadDir,
    PayloadLvDir,
    ReqHdrsBin,
    ResHdrsBin,
    SrcIsLocal,
    DstIsLocal,
    FcSrcIsLocal,
    FcDstIsLocal,
    FcHttpMajor,
    ResSslHelloType,
    /// The stick-table families (`sc*_`, `src_`, `table_avl`...), see [`super::stick`].
    Stick,
}

/// One catalogue record.
#[derive(Debug)]
pub struct FetchDef {
    pub name: &'static str,
    pub args: &'static [ArgKind],
    /// How many of `args` are required.
    pub min: usize,
    pub out: SmpType,
    pub phases: Phases,
    /// Whether, in an ACL, each value (each header occurrence) is tried.
    pub multi: bool,
    pub id: F,
    /// For [`F::Stick`]: which entry and what to do with it.
    pub stick: Option<super::stick::FetchOp>,
}

const ALL: Phases = Phases::ALL;
const REQ: Phases = Phases::REQ;
const RES: Phases = Phases::RES;
const REQRES: Phases = Phases(4 | 8);

macro_rules! def {
    ($n:expr, [$($a:ident),*], $min:expr, $out:ident, $ph:expr, $multi:expr, $id:ident) => {
        FetchDef { name: $n, args: &[$(ArgKind::$a),*], min: $min, out: SmpType::$out,
                   phases: $ph, multi: $multi, id: F::$id, stick: None }
    };
}

/// Every fetch Bascule knows, HAProxy's names (aliases included).
pub static FETCHES: &[FetchDef] = &[
    def!("src", [], 0, Addr, ALL, false, Src),
    def!("src_port", [], 0, Sint, ALL, false, SrcPort),
    def!("dst", [], 0, Addr, ALL, false, Dst),
    def!("dst_port", [], 0, Sint, ALL, false, DstPort),
    def!("fc_src", [], 0, Addr, ALL, false, FcSrc),
    def!("fc_src_port", [], 0, Sint, ALL, false, FcSrcPort),
    def!("fc_dst", [], 0, Addr, ALL, false, FcDst),
    def!("fc_dst_port", [], 0, Sint, ALL, false, FcDstPort),
    def!("so_id", [], 0, Sint, ALL, false, SoId),
    def!("so_name", [], 0, Str, ALL, false, SoName),
    def!("fe_name", [], 0, Str, ALL, false, FeName),
    def!("fe_id", [], 0, Sint, ALL, false, FeId),
    def!("be_name", [], 0, Str, REQRES, false, BeName),
    def!("be_id", [], 0, Sint, REQRES, false, BeId),
    def!("srv_name", [], 0, Str, RES, false, SrvName),
    def!("srv_id", [], 0, Sint, RES, false, SrvId),
    def!("nbsrv", [Backend], 0, Sint, ALL, false, Nbsrv),
    def!("be_conn", [Backend], 0, Sint, ALL, false, BeConn),
    def!("be_sess_rate", [Backend], 0, Sint, ALL, false, BeSessRate),
    def!("fe_conn", [Frontend], 0, Sint, ALL, false, FeConn),
    def!("srv_conn", [Server], 1, Sint, ALL, false, SrvConn),
    def!("srv_is_up", [Server], 1, Bool, ALL, false, SrvIsUp),
    def!("srv_sess_rate", [Server], 1, Sint, ALL, false, SrvSessRate),
    def!("connslots", [Backend], 0, Sint, ALL, false, Connslots),
    def!("avg_queue", [Backend], 0, Sint, ALL, false, AvgQueue),
    def!("queue", [Backend], 0, Sint, ALL, false, Queue),
    def!("path", [], 0, Str, REQ, false, Path),
    def!("pathq", [], 0, Str, REQ, false, Pathq),
    def!("url", [], 0, Str, REQ, false, Url),
    def!("url_ip", [], 0, Ipv4, REQ, false, UrlIp),
    def!("url_port", [], 0, Sint, REQ, false, UrlPort),
    def!("query", [], 0, Str, REQ, false, Query),
    def!("url_param", [Str, Str], 0, Str, REQ, true, UrlParam),
    def!("urlp", [Str, Str], 0, Str, REQ, true, UrlParam),
    def!("method", [], 0, Meth, REQRES, false, Method),
    def!("http_first_req", [], 0, Bool, REQRES, false, HttpFirstReq),
    def!("req.ver", [], 0, Str, REQ, false, ReqVer),
    def!("req_ver", [], 0, Str, REQ, false, ReqVer),
    def!("req.hdr", [Hdr, Int], 0, Str, REQ, true, Hdr),
    def!("hdr", [Hdr, Int], 0, Str, REQ, true, Hdr),
    def!("req.hdr_cnt", [Hdr], 0, Sint, REQ, false, HdrCnt),
    def!("hdr_cnt", [Hdr], 0, Sint, REQ, false, HdrCnt),
    def!("req.fhdr", [Hdr, Int], 1, Str, REQ, true, Fhdr),
    def!("req.fhdr_cnt", [Hdr], 0, Sint, REQ, false, FhdrCnt),
    def!("req.hdrs", [], 0, Str, REQ, false, Hdrs),
    def!("req.hdr_ip", [Hdr, Int], 1, Addr, REQ, true, HdrIp),
    def!("hdr_ip", [Hdr, Int], 1, Addr, REQ, true, HdrIp),
    def!("req.hdr_val", [Hdr, Int], 1, Sint, REQ, true, HdrVal),
    def!("hdr_val", [Hdr, Int], 1, Sint, REQ, true, HdrVal),
    def!("req.cook", [Str], 0, Str, REQ, true, Cook),
    def!("cook", [Str], 0, Str, REQ, true, Cook),
    def!("req.cook_cnt", [Str], 0, Sint, REQ, false, CookCnt),
    def!("cook_cnt", [Str], 0, Sint, REQ, false, CookCnt),
    def!("req.cook_val", [Str], 0, Sint, REQ, true, CookVal),
    def!("cook_val", [Str], 0, Sint, REQ, true, CookVal),
    def!("base", [], 0, Str, REQ, false, Base),
    def!("base32", [], 0, Sint, REQ, false, Base32),
    def!("base32+src", [], 0, Bin, REQ, false, Base32Src),
    def!("url32", [], 0, Sint, REQ, false, Url32),
    def!("url32+src", [], 0, Bin, REQ, false, Url32Src),
    def!(
        "capture.req.hdr",
        [Int],
        1,
        Str,
        REQRES,
        false,
        CaptureReqHdr
    ),
    def!("capture.res.hdr", [Int], 1, Str, RES, false, CaptureResHdr),
    def!(
        "capture.req.method",
        [],
        0,
        Str,
        REQRES,
        false,
        CaptureReqMethod
    ),
    def!("capture.req.uri", [], 0, Str, REQRES, false, CaptureReqUri),
    def!("capture.req.ver", [], 0, Str, REQRES, false, CaptureReqVer),
    def!("req.len", [], 0, Sint, REQ, false, ReqLen),
    def!("req_len", [], 0, Sint, REQ, false, ReqLen),
    def!("req.payload", [Int, Int], 2, Bin, REQ, false, ReqPayload),
    def!("res.len", [], 0, Sint, RES, false, ResLen),
    def!("res.payload", [Int, Int], 2, Bin, RES, false, ResPayload),
    def!(
        "res.payload_lv",
        [Int, Int, Str],
        2,
        Bin,
        RES,
        false,
        ResPayloadLv
    ),
    def!(
        "req.payload_lv",
        [Int, Int, Str],
        2,
        Bin,
        REQ,
        false,
        ReqPayloadLv
    ),
    def!("payload", [Int, Int], 2, Bin, REQRES, false, PayloadDir),
    def!(
        "payload_lv",
        [Int, Int, Str],
        2,
        Bin,
        REQRES,
        false,
        PayloadLvDir
    ),
    def!("cookie", [Str], 0, Str, REQRES, true, CookieDir),
    def!("req.hdrs_bin", [], 0, Bin, REQ, false, ReqHdrsBin),
    def!("res.hdrs_bin", [], 0, Bin, RES, false, ResHdrsBin),
    def!("src_is_local", [], 0, Bool, ALL, false, SrcIsLocal),
    def!("dst_is_local", [], 0, Bool, ALL, false, DstIsLocal),
    def!("fc_src_is_local", [], 0, Bool, ALL, false, FcSrcIsLocal),
    def!("fc_dst_is_local", [], 0, Bool, ALL, false, FcDstIsLocal),
    def!("fc_http_major", [], 0, Sint, ALL, false, FcHttpMajor),
    def!(
        "res.ssl_hello_type",
        [],
        0,
        Sint,
        RES,
        false,
        ResSslHelloType
    ),
    def!(
        "rep_ssl_hello_type",
        [],
        0,
        Sint,
        RES,
        false,
        ResSslHelloType
    ),
    def!("req.body", [], 0, Bin, REQ, false, ReqBody),
    def!("req.body_param", [Str], 0, Str, REQ, true, ReqBodyParam),
    def!("req.body_len", [], 0, Sint, REQ, false, ReqBodyLen),
    def!("res.hdr", [Hdr, Int], 0, Str, RES, true, ResHdr),
    def!("shdr", [Hdr, Int], 0, Str, RES, true, ResHdr),
    def!("res.hdr_cnt", [Hdr], 0, Sint, RES, false, ResHdrCnt),
    def!("shdr_cnt", [Hdr], 0, Sint, RES, false, ResHdrCnt),
    def!("res.fhdr", [Hdr, Int], 0, Str, RES, true, ResFhdr),
    def!("res.fhdr_cnt", [Hdr], 0, Sint, RES, false, ResFhdrCnt),
    def!("res.cook", [Str], 0, Str, RES, true, ResCook),
    def!("scook", [Str], 0, Str, RES, true, ResCook),
    def!("res.cook_cnt", [Str], 0, Sint, RES, false, ResCookCnt),
    def!("scook_cnt", [Str], 0, Sint, RES, false, ResCookCnt),
    def!("status", [], 0, Sint, RES, false, Status),
    def!("res.ver", [], 0, Str, RES, false, ResVer),
    def!("resp_ver", [], 0, Str, RES, false, ResVer),
    def!("ssl_fc", [], 0, Bool, ALL, false, SslFc),
    def!("ssl_fc_sni", [], 0, Str, ALL, false, SslFcSni),
    def!("ssl_fc_has_sni", [], 0, Bool, ALL, false, SslFcHasSni),
    def!("ssl_fc_protocol", [], 0, Str, ALL, false, SslFcProtocol),
    def!("ssl_fc_cipher", [], 0, Str, ALL, false, SslFcCipher),
    def!("ssl_fc_alpn", [], 0, Str, ALL, false, SslFcAlpn),
    def!("ssl_fc_is_resumed", [], 0, Bool, ALL, false, SslFcIsResumed),
    def!(
        "ssl_fc_use_keysize",
        [],
        0,
        Sint,
        ALL,
        false,
        SslFcUseKeysize
    ),
    def!(
        "ssl_fc_alg_keysize",
        [],
        0,
        Sint,
        ALL,
        false,
        SslFcAlgKeysize
    ),
    def!("ssl_c_used", [], 0, Bool, ALL, false, SslCUsed),
    def!("ssl_fc_has_crt", [], 0, Bool, ALL, false, SslFcHasCrt),
    def!("ssl_c_s_dn", [Str, Int, Str], 0, Str, ALL, false, SslCSDn),
    def!("ssl_c_i_dn", [Str, Int, Str], 0, Str, ALL, false, SslCIDn),
    def!("ssl_c_serial", [], 0, Bin, ALL, false, SslCSerial),
    def!("ssl_c_notbefore", [], 0, Str, ALL, false, SslCNotBefore),
    def!("ssl_c_notafter", [], 0, Str, ALL, false, SslCNotAfter),
    def!("ssl_c_verify", [], 0, Sint, ALL, false, SslCVerify),
    def!("ssl_c_err", [], 0, Sint, ALL, false, SslCErr),
    def!("fc_err", [], 0, Sint, ALL, false, FcErr),
    def!("fc_rcvd_proxy", [], 0, Bool, ALL, false, FcRcvdProxy),
    def!("fc_pp_authority", [], 0, Str, ALL, false, FcPpAuthority),
    def!("fc_pp_unique_id", [], 0, Str, ALL, false, FcPpUniqueId),
    def!("ssl_fc_err", [], 0, Sint, ALL, false, SslFcErr),
    def!("ssl_c_ca_err", [], 0, Sint, ALL, false, SslCCaErr),
    def!(
        "ssl_c_ca_err_depth",
        [],
        0,
        Sint,
        ALL,
        false,
        SslCCaErrDepth
    ),
    def!("ssl_c_version", [], 0, Sint, ALL, false, SslCVersion),
    def!("ssl_c_sha1", [], 0, Bin, ALL, false, SslCSha1),
    def!("ssl_c_der", [], 0, Bin, ALL, false, SslCDer),
    def!("ssl_c_sig_alg", [], 0, Str, ALL, false, SslCSigAlg),
    def!("ssl_c_key_alg", [], 0, Str, ALL, false, SslCKeyAlg),
    def!("ssl_c_chain_der", [], 0, Bin, ALL, false, SslCChainDer),
    def!("ssl_f_sig_alg", [], 0, Str, ALL, false, SslFSigAlg),
    def!("ssl_f_key_alg", [], 0, Str, ALL, false, SslFKeyAlg),
    // The server's certificate, on the stream's server connection (`server ... ssl`).
    def!("ssl_s_s_dn", [Str, Int, Str], 0, Str, RES, false, SslSSDn),
    def!("ssl_s_i_dn", [Str, Int, Str], 0, Str, RES, false, SslSIDn),
    def!("ssl_s_serial", [], 0, Bin, RES, false, SslSSerial),
    def!("ssl_s_notbefore", [], 0, Str, RES, false, SslSNotBefore),
    def!("ssl_s_notafter", [], 0, Str, RES, false, SslSNotAfter),
    def!("ssl_s_version", [], 0, Sint, RES, false, SslSVersion),
    def!("ssl_s_sha1", [], 0, Bin, RES, false, SslSSha1),
    def!("ssl_s_der", [], 0, Bin, RES, false, SslSDer),
    def!("ssl_s_sig_alg", [], 0, Str, RES, false, SslSSigAlg),
    def!("ssl_s_key_alg", [], 0, Str, RES, false, SslSKeyAlg),
    def!("ssl_s_chain_der", [], 0, Bin, RES, false, SslSChainDer),
    def!("ssl_f_s_dn", [Str, Int, Str], 0, Str, ALL, false, SslFSDn),
    def!("ssl_f_i_dn", [Str, Int, Str], 0, Str, ALL, false, SslFIDn),
    def!("ssl_f_serial", [], 0, Bin, ALL, false, SslFSerial),
    def!("ssl_f_notbefore", [], 0, Str, ALL, false, SslFNotBefore),
    def!("ssl_f_notafter", [], 0, Str, ALL, false, SslFNotAfter),
    def!("ssl_f_version", [], 0, Sint, ALL, false, SslFVersion),
    def!("ssl_f_sha1", [], 0, Bin, ALL, false, SslFSha1),
    def!("ssl_f_der", [], 0, Bin, ALL, false, SslFDer),
    // The server connection's: known once connected, so in response rules and logs.
    def!("ssl_bc", [], 0, Bool, RES, false, SslBc),
    def!("ssl_bc_protocol", [], 0, Str, RES, false, SslBcProtocol),
    def!("ssl_bc_cipher", [], 0, Str, RES, false, SslBcCipher),
    def!("ssl_bc_alpn", [], 0, Str, RES, false, SslBcAlpn),
    def!("ssl_bc_is_resumed", [], 0, Bool, RES, false, SslBcIsResumed),
    def!("ssl_bc_use_keysize", [], 0, Sint, RES, false, SslBcKeysize),
    def!("ssl_bc_alg_keysize", [], 0, Sint, RES, false, SslBcKeysize),
    // The client's TLS hello, before any decryption (HAProxy's `payload.c` names).
    def!("req.ssl_alpn", [], 0, Str, REQ, true, ReqSslAlpn),
    def!("req.ssl_ec_ext", [], 0, Bool, REQ, false, ReqSslEcExt),
    def!(
        "req.ssl_hello_type",
        [],
        0,
        Sint,
        REQ,
        false,
        ReqSslHelloType
    ),
    def!("req.ssl_sni", [], 0, Str, REQ, false, ReqSslSni),
    def!("req.ssl_st_ext", [], 0, Sint, REQ, false, ReqSslStExt),
    def!("req.ssl_ver", [], 0, Sint, REQ, false, ReqSslVer),
    def!(
        "req_ssl_hello_type",
        [],
        0,
        Sint,
        REQ,
        false,
        ReqSslHelloType
    ),
    def!("req_ssl_sni", [], 0, Str, REQ, false, ReqSslSni),
    def!("req_ssl_ver", [], 0, Sint, REQ, false, ReqSslVer),
    def!("var", [Var, Str], 1, Any, ALL, false, Var),
    def!("env", [Str], 1, Str, ALL, false, Env),
    def!("rand", [Int], 0, Sint, ALL, false, Rand),
    def!("date", [Int], 0, Sint, ALL, false, Date),
    def!("always_true", [], 0, Bool, ALL, false, True),
    def!("always_false", [], 0, Bool, ALL, false, False),
    def!("int", [Const], 1, Sint, ALL, false, Const),
    def!("str", [Const], 0, Str, ALL, false, Const),
    def!("bool", [Const], 1, Bool, ALL, false, Const),
    def!("ipv4", [Const], 1, Ipv4, ALL, false, Const),
    def!("ipv6", [Const], 1, Ipv6, ALL, false, Const),
    def!("meth", [Const], 1, Meth, ALL, false, Const),
    def!("bin", [Const], 1, Bin, ALL, false, Const),
    def!("http_auth", [Userlist], 1, Bool, REQ, false, HttpAuth),
    def!(
        "http_auth_group",
        [Userlist],
        1,
        Str,
        REQ,
        false,
        HttpAuthGroup
    ),
    def!("http_auth_user", [], 0, Str, REQ, false, HttpAuthUser),
    def!("http_auth_pass", [], 0, Str, REQ, false, HttpAuthPass),
    def!("req.proto_http", [], 0, Bool, REQ, false, ProtoHttp),
    def!("wait_end", [], 0, Bool, ALL, false, WaitEnd),
    def!(
        "req.rdp_cookie_cnt",
        [Str],
        0,
        Sint,
        REQ,
        false,
        RdpCookieCnt
    ),
    def!("rdp_cookie_cnt", [Str], 0, Sint, REQ, false, RdpCookieCnt),
    def!("req.rdp_cookie", [Str], 0, Str, REQ, false, RdpCookie),
    def!("rdp_cookie", [Str], 0, Str, REQ, false, RdpCookie),
    // --- Stream identity and history: evaluated by `stream_fetch` below. ---
    def!("uuid", [Int], 0, Str, ALL, false, Uuid),
    def!("unique-id", [], 0, Str, REQRES, false, UniqueId),
    def!("last_rule_file", [], 0, Str, ALL, false, LastRuleFile),
    def!("last_rule_line", [], 0, Sint, ALL, false, LastRuleLine),
    // --- Counters and settings of proxies and servers ---
    def!("fe_req_rate", [Frontend], 0, Sint, ALL, false, FeReqRate),
    def!("fe_sess_rate", [Frontend], 0, Sint, ALL, false, FeSessRate),
    def!("fe_defbe", [], 0, Str, ALL, false, FeDefbe),
    def!(
        "fe_client_timeout",
        [],
        0,
        Sint,
        ALL,
        false,
        FeClientTimeout
    ),
    def!(
        "be_server_timeout",
        [],
        0,
        Sint,
        REQRES,
        false,
        BeServerTimeout
    ),
    def!(
        "be_tunnel_timeout",
        [],
        0,
        Sint,
        REQRES,
        false,
        BeTunnelTimeout
    ),
    def!(
        "cur_server_timeout",
        [],
        0,
        Sint,
        REQRES,
        false,
        CurServerTimeout
    ),
    def!(
        "cur_tunnel_timeout",
        [],
        0,
        Sint,
        REQRES,
        false,
        CurTunnelTimeout
    ),
    def!("be_conn_free", [Backend], 0, Sint, ALL, false, BeConnFree),
    def!("srv_conn_free", [Server], 1, Sint, ALL, false, SrvConnFree),
    def!("srv_queue", [Server], 1, Sint, ALL, false, SrvQueue),
    def!("srv_weight", [Server], 1, Sint, ALL, false, SrvWeight),
    def!("srv_uweight", [Server], 1, Sint, ALL, false, SrvUweight),
    def!("srv_iweight", [Server], 1, Sint, ALL, false, SrvIweight),
    // --- The client connection as the kernel sees it (`TCP_INFO`) ---
    def!("fc_rtt", [Str], 0, Sint, ALL, false, FcRtt),
    def!("fc_rttvar", [Str], 0, Sint, ALL, false, FcRttVar),
    def!("fc_unacked", [], 0, Sint, ALL, false, FcUnacked),
    def!("fc_sacked", [], 0, Sint, ALL, false, FcSacked),
    def!("fc_retrans", [], 0, Sint, ALL, false, FcRetrans),
    def!("fc_fackets", [], 0, Sint, ALL, false, FcFackets),
    def!("fc_lost", [], 0, Sint, ALL, false, FcLost),
    def!("fc_reordering", [], 0, Sint, ALL, false, FcReordering),
    // --- The process ---
    def!("hostname", [], 0, Str, ALL, false, Hostname),
    def!("nbproc", [], 0, Sint, ALL, false, Nbproc),
    def!("proc", [], 0, Sint, ALL, false, Proc),
    def!("thread", [], 0, Sint, ALL, false, Thread),
    def!("date_us", [], 0, Sint, ALL, false, DateUs),
    def!("stopping", [], 0, Bool, ALL, false, Stopping),
    // --- HTTP ---
    def!("baseq", [], 0, Str, REQ, false, Baseq),
    def!("http_auth_type", [], 0, Str, REQ, false, HttpAuthType),
    def!(
        "http_auth_bearer",
        [Hdr],
        0,
        Str,
        REQ,
        false,
        HttpAuthBearer
    ),
    def!("req.hdr_names", [Str], 0, Str, REQ, false, ReqHdrNames),
    def!("res.hdr_names", [Str], 0, Str, RES, false, ResHdrNames),
    def!("res.hdr_ip", [Hdr, Int], 1, Addr, RES, true, ResHdrIp),
    def!("shdr_ip", [Hdr, Int], 1, Addr, RES, true, ResHdrIp),
    def!("res.hdr_val", [Hdr, Int], 1, Sint, RES, true, ResHdrVal),
    def!("shdr_val", [Hdr, Int], 1, Sint, RES, true, ResHdrVal),
    def!("res.cook_val", [Str], 0, Sint, RES, true, ResCookVal),
    def!("scook_val", [Str], 0, Sint, RES, true, ResCookVal),
    def!("res.hdrs", [], 0, Str, RES, false, ResHdrs),
    def!("capture.res.ver", [], 0, Str, RES, false, CaptureResVer),
    def!("urlp_val", [Str, Str], 0, Sint, REQ, true, UrlParamVal),
    def!("req_proto_http", [], 0, Bool, REQ, false, ProtoHttp),
    def!(
        "ssl_fc_cipherlist_bin",
        [Int],
        0,
        Bin,
        ALL,
        false,
        SslFcCipherlistBin
    ),
    def!(
        "ssl_fc_cipherlist_hex",
        [Int],
        0,
        Str,
        ALL,
        false,
        SslFcCipherlistHex
    ),
    def!(
        "ssl_fc_cipherlist_xxh",
        [],
        0,
        Sint,
        ALL,
        false,
        SslFcCipherlistXxh
    ),
    def!(
        "ssl_fc_cipherlist_str",
        [Int],
        0,
        Str,
        ALL,
        false,
        SslFcCipherlistStr
    ),
    def!(
        "ssl_fc_extlist_bin",
        [Int],
        0,
        Bin,
        ALL,
        false,
        SslFcExtlistBin
    ),
    def!(
        "ssl_fc_eclist_bin",
        [Int],
        0,
        Bin,
        ALL,
        false,
        SslFcEclistBin
    ),
    def!(
        "ssl_fc_ecformats_bin",
        [],
        0,
        Bin,
        ALL,
        false,
        SslFcEcformatsBin
    ),
    def!("ssl_fc_client_random", [], 0, Bin, ALL, false, SslFcSecret),
    def!(
        "ssl_fc_client_early_traffic_secret",
        [],
        0,
        Str,
        ALL,
        false,
        SslFcSecret
    ),
    def!(
        "ssl_fc_client_handshake_traffic_secret",
        [],
        0,
        Str,
        ALL,
        false,
        SslFcSecret
    ),
    def!(
        "ssl_fc_server_handshake_traffic_secret",
        [],
        0,
        Str,
        ALL,
        false,
        SslFcSecret
    ),
    def!(
        "ssl_fc_client_traffic_secret_0",
        [],
        0,
        Str,
        ALL,
        false,
        SslFcSecret
    ),
    def!(
        "ssl_fc_server_traffic_secret_0",
        [],
        0,
        Str,
        ALL,
        false,
        SslFcSecret
    ),
    def!(
        "ssl_fc_exporter_secret",
        [],
        0,
        Str,
        ALL,
        false,
        SslFcSecret
    ),
    def!(
        "ssl_fc_early_exporter_secret",
        [],
        0,
        Str,
        ALL,
        false,
        SslFcSecret
    ),
    def!(
        "ssl_fc_protocol_hello_id",
        [],
        0,
        Sint,
        ALL,
        false,
        SslFcProtocolHelloId
    ),
];

/// The RDP cookie of an RDP connection's first bytes, as haproxy 2.6's `fetch_rdp_cookie_name`
/// reads it: past the TPKT and X.224 headers (11 bytes), `Cookie:`, blanks, then `NAME=` (any
/// name without `name`), the value up to `\r\n`. `Short`: more bytes may decide it.
pub(crate) fn rdp_cookie<'b>(
    buf: &'b [u8],
    name: Option<&[u8]>,
) -> Result<&'b [u8], crate::proto::tls_hello::Fail> {
    use crate::proto::tls_hello::Fail;
    let data = buf.get(11..).filter(|d| d.len() > 7).ok_or(Fail::Short)?;
    if !data[..7].eq_ignore_ascii_case(b"Cookie:") {
        return Err(Fail::No);
    }
    let mut d = &data[7..];
    while let [b' ', rest @ ..] = d {
        d = rest;
    }
    match name {
        Some(name) => {
            if d.len() <= name.len() {
                return Err(Fail::Short);
            }
            if !d[..name.len()].eq_ignore_ascii_case(name) || d[name.len()] != b'=' {
                return Err(Fail::No);
            }
            d = &d[name.len() + 1..];
        }
        None => {
            let eq = d
                .iter()
                .position(|&c| c == b'=' || c == b'\r' || c == b'\n')
                .ok_or(Fail::Short)?;
            if d[eq] != b'=' {
                return Err(Fail::No);
            }
            d = &d[eq + 1..];
        }
    }
    let end = d.iter().position(|&c| c == b'\r').ok_or(Fail::Short)?;
    match d.get(end + 1) {
        None => Err(Fail::Short),
        Some(b'\n') => Ok(&d[..end]),
        Some(_) => Err(Fail::No),
    }
}

/// Whether HAProxy's HTTP/1 parser takes header `name: value` out of the message it keeps: a
/// `Connection` header that says only `close` and `keep-alive` (its other tokens, such as
/// `upgrade`, keep it).
fn htx_drops(name: &[u8], value: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"connection")
        && value.split(|&c| c == b',').all(|t| {
            let t = t.trim_ascii();
            t.is_empty()
                || t.eq_ignore_ascii_case(b"close")
                || t.eq_ignore_ascii_case(b"keep-alive")
        })
}

/// Appends `v` in the variable-length integer encoding of HAProxy's SPOE (`req.hdrs_bin`):
/// below 240 one byte; else the low four bits with the top four set, then groups of seven
/// bits, each but the last with its top bit set.
fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 240 {
        out.push(v as u8);
        return;
    }
    out.push(v as u8 | 240);
    let mut v = (v - 240) >> 4;
    while v >= 128 {
        out.push(v as u8 | 128);
        v = (v - 128) >> 7;
    }
    out.push(v as u8);
}

/// An `Authorization` value's scheme and what follows it, blanks skipped (`Bearer  tok`).
fn auth_scheme(v: &[u8]) -> Option<(&[u8], &[u8])> {
    let sp = v.iter().position(|&c| c == b' ')?;
    let rest = &v[sp..];
    let start = rest.iter().position(|&c| c != b' ').unwrap_or(rest.len());
    Some((&v[..sp], &rest[start..]))
}

/// The catalogue entry named `name`.
pub fn lookup(name: &str) -> Option<&'static FetchDef> {
    FETCHES
        .iter()
        .chain(super::stick::fetches())
        .find(|d| d.name == name)
}

/// A compiled argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Str(Box<[u8]>),
    Int(i64),
    Backend(usize),
    Server(usize, usize),
    Frontend(usize),
    Userlist(usize),
    Var(Scope, usize),
    Bool(bool),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    /// A stick table, by index into the process's tables.
    Table(usize),
}

/// A compiled fetch call.
#[derive(Debug)]
pub struct Fetch {
    pub def: &'static FetchDef,
    pub args: Box<[Option<Arg>]>,
    /// In an ACL, each value is tried: the fetch is multi-valued and no occurrence is given
    /// (`hdr(x,1)` is one value everywhere). Settled at compile time.
    each: bool,
}

impl F {
    /// Whether the fetch reads the request buffer's raw bytes (HAProxy's `SMP_USE_L6REQ`):
    /// such a fetch has no value in an HTTP proxy, nor at log time.
    pub fn reads_l6(self) -> bool {
        matches!(
            self,
            F::ReqLen
                | F::RdpCookieCnt
                | F::RdpCookie
                | F::ReqSslAlpn
                | F::ReqSslEcExt
                | F::ReqSslHelloType
                | F::ReqSslSni
                | F::ReqSslStExt
                | F::ReqSslVer
        )
    }
}

impl Fetch {
    /// Whether a condition on this fetch, which gave the values it gave (`any`: at least one)
    /// and matched none, may still match while `tcp-request content` inspects a request (more
    /// bytes may come): then it is undecided until the inspect delay ends, as with HAProxy's
    /// `SMP_F_MAY_CHANGE`. A fetch without a value is undecided too, unless it knows its
    /// absence is final (a TLS hello fetch over bytes that are not a hello).
    pub fn may_change<S: Source + ?Sized>(&self, src: &S, any: bool) -> bool {
        use crate::proto::tls_hello as hello;
        let short = |r: Result<(), hello::Fail>| r == Err(hello::Fail::Short);
        let id = self.def.id;
        if matches!(id, F::ReqLen | F::ResLen | F::WaitEnd) {
            return true;
        }
        if any {
            return false;
        }
        if !id.reads_l6() {
            return true;
        }
        // No raw bytes (an HTTP proxy): nothing will ever come.
        let Some(buf) = src.req_payload() else {
            return false;
        };
        match id {
            F::ReqSslAlpn => short(hello::alpn(buf, 0).map(drop)),
            F::ReqSslEcExt => short(hello::ec_ext(buf).map(drop)),
            F::ReqSslHelloType => short(hello::hello_type(buf).map(drop)),
            F::ReqSslSni => short(hello::sni(buf).map(drop)),
            F::ReqSslStExt => short(hello::st_ext(buf).map(drop)),
            F::ReqSslVer => short(hello::version(buf).map(drop)),
            F::RdpCookie | F::RdpCookieCnt => short(rdp_cookie(buf, self.str_arg(0)).map(drop)),
            _ => true,
        }
    }
}

/// Parses `scope.name` (as in `var(txn.x)` or `add(txn.x)`).
pub(crate) fn parse_var(s: &str, names: &dyn Names) -> Option<Arg> {
    let (scope, name) = s.split_once('.')?;
    let scope = Scope::parse(scope)?;
    if name.is_empty() {
        return None;
    }
    Some(Arg::Var(scope, names.var(scope, name)))
}

/// Parses a whole decimal integer argument (HAProxy rejects trailing garbage here).
pub(crate) fn parse_int_arg(s: &str) -> Option<i64> {
    s.trim().parse::<i64>().ok()
}

impl Fetch {
    /// Compiles one call, e.g. `req.hdr(host,1)` or `nbsrv(web)`. Names are resolved now.
    pub fn compile(word: &str, names: &dyn Names) -> Result<Fetch, RuleError> {
        let (name, args) = split_call(word)?;
        let Some(def) = lookup(name) else {
            return err(format!(
                "unknown fetch method '{name}'{}",
                did_you_mean(
                    name,
                    FETCHES
                        .iter()
                        .chain(super::stick::fetches())
                        .map(|d| d.name)
                )
            ));
        };
        if def.name.starts_with("ssl_f_") {
            FRONTEND_CERT_USED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Self::with_def(def, &args, names)
    }

    pub(crate) fn with_def(
        def: &'static FetchDef,
        args: &[String],
        names: &dyn Names,
    ) -> Result<Fetch, RuleError> {
        let name = def.name;
        if args.len() < def.min {
            return err(format!(
                "fetch method '{name}' expects at least {} argument(s), got {}",
                def.min,
                args.len()
            ));
        }
        if args.len() > def.args.len() {
            return err(format!(
                "fetch method '{name}' expects at most {} argument(s), got {}",
                def.args.len(),
                args.len()
            ));
        }
        let mut out = Vec::with_capacity(def.args.len());
        for (i, kind) in def.args.iter().enumerate() {
            let Some(a) = args.get(i) else {
                out.push(None);
                continue;
            };
            // An empty optional argument is as if absent (`hdr(,1)` is not allowed anyway).
            if a.is_empty() && i >= def.min && *kind != ArgKind::Const {
                out.push(None);
                continue;
            }
            let bad = |what: &str| {
                err(format!(
                    "fetch method '{name}': argument {} '{a}' is not {what}",
                    i + 1
                ))
            };
            out.push(Some(match kind {
                ArgKind::Str => Arg::Str(crate::config::rawbytes::bytes(a).into()),
                ArgKind::Hdr => Arg::Str(a.to_ascii_lowercase().into_bytes().into()),
                ArgKind::Int => match parse_int_arg(a) {
                    Some(v) => Arg::Int(v),
                    None => return bad("an integer"),
                },
                ArgKind::Backend => match names.backend(a) {
                    Some(b) => Arg::Backend(b),
                    None => {
                        let known = names.backend_names();
                        return err(format!(
                            "unable to find backend '{a}' referenced in arg {} of fetch method '{name}'{}",
                            i + 1,
                            did_you_mean(a, known.iter().map(|s| s.as_str()))
                        ));
                    }
                },
                ArgKind::Server => {
                    let Some((b, s)) = a.split_once('/') else {
                        return bad("a 'backend/server' pair");
                    };
                    let Some(be) = names.backend(b) else {
                        let known = names.backend_names();
                        return err(format!(
                            "unable to find backend '{b}' referenced in arg {} of fetch method '{name}'{}",
                            i + 1,
                            did_you_mean(b, known.iter().map(|s| s.as_str()))
                        ));
                    };
                    let Some(srv) = names.server(be, s) else {
                        let known = names.server_names(be);
                        return err(format!(
                            "unable to find server '{s}' in backend '{b}' referenced in arg {} of fetch method '{name}'{}",
                            i + 1,
                            did_you_mean(s, known.iter().map(|s| s.as_str()))
                        ));
                    };
                    Arg::Server(be, srv)
                }
                ArgKind::Frontend => match names.frontend(a) {
                    Some(f) => Arg::Frontend(f),
                    None => {
                        return err(format!(
                            "unable to find frontend '{a}' referenced in arg {} of fetch method '{name}'",
                            i + 1
                        ))
                    }
                },
                ArgKind::Userlist => match names.userlist(a) {
                    Some(u) => Arg::Userlist(u),
                    None => {
                        return err(format!(
                            "unable to find userlist '{a}' referenced in arg {} of fetch method '{name}'",
                            i + 1
                        ))
                    }
                },
                ArgKind::Table => match names.table(a) {
                    Some(t) => Arg::Table(t),
                    None => {
                        let known = names.table_names();
                        return err(format!(
                            "unable to find table '{a}' referenced in arg {} of fetch method '{name}'{}",
                            i + 1,
                            did_you_mean(a, known.iter().map(|s| s.as_str()))
                        ));
                    }
                },
                ArgKind::Var => match parse_var(a, names) {
                    Some(v) => v,
                    None => return bad("a variable 'scope.name' (scopes: proc, sess, txn, req, res)"),
                },
                ArgKind::Const => match def.out {
                    SmpType::Sint => match parse_int_arg(a) {
                        Some(v) => Arg::Int(v),
                        None => return bad("an integer"),
                    },
                    // `bool(true)`, `bool(false)`, or an integer (HAProxy's smp_check_const_bool).
                    SmpType::Bool => match a.as_str() {
                        "true" => Arg::Bool(true),
                        "false" => Arg::Bool(false),
                        _ => match parse_int_arg(a) {
                            Some(v) => Arg::Bool(v != 0),
                            None => return bad("'true', 'false' or an integer"),
                        },
                    },
                    SmpType::Ipv4 => match a.parse() {
                        Ok(v) => Arg::Ipv4(v),
                        Err(_) => return bad("an IPv4 address"),
                    },
                    SmpType::Ipv6 => match a.parse() {
                        Ok(v) => Arg::Ipv6(v),
                        Err(_) => return bad("an IPv6 address"),
                    },
                    SmpType::Bin => {
                        let h = a.as_bytes();
                        if h.len() % 2 != 0 {
                            return bad("an even number of hex digits");
                        }
                        let mut v = Vec::with_capacity(h.len() / 2);
                        for p in h.chunks(2) {
                            match (hash::hex_val(p[0]), hash::hex_val(p[1])) {
                                (Some(x), Some(y)) => v.push(x << 4 | y),
                                _ => return bad("hex digits"),
                            }
                        }
                        Arg::Str(v.into())
                    }
                    _ => Arg::Str(crate::config::rawbytes::bytes(a).into()),
                },
            }));
        }
        let mut f = Fetch {
            def,
            args: out.into(),
            each: false,
        };
        if let (F::Uuid, Some(v)) = (def.id, f.int_arg(0)) {
            if v != 4 {
                return err(format!(
                    "invalid args in fetch method 'uuid' : Unsupported UUID version: '{v}'"
                ));
            }
        }
        if matches!(def.id, F::FcRtt | F::FcRttVar) {
            if let Some(u) = f.str_arg(0) {
                if u != b"ms" && u != b"us" {
                    return err(format!(
                        "invalid args in fetch method '{name}' : expects 'ms' or 'us', got '{}'",
                        String::from_utf8_lossy(u)
                    ));
                }
            }
        }
        super::stick::default_table(&mut f, names)?;
        let occurrence =
            def.args.get(1) == Some(&ArgKind::Int) && matches!(f.args.get(1), Some(Some(_)));
        f.each = def.multi && !occurrence;
        Ok(f)
    }

    fn str_arg(&self, i: usize) -> Option<&[u8]> {
        match self.args.get(i) {
            Some(Some(Arg::Str(s))) => Some(s),
            _ => None,
        }
    }
    fn int_arg(&self, i: usize) -> Option<i64> {
        match self.args.get(i) {
            Some(Some(Arg::Int(v))) => Some(*v),
            _ => None,
        }
    }
    fn be_arg<S: Source + ?Sized>(&self, src: &S) -> Option<usize> {
        match self.args.first() {
            Some(Some(Arg::Backend(b))) => Some(*b),
            _ => src.backend().map(|b| b.0),
        }
    }

    /// Fetches the next value. With `it.all` false (sample context) this is the one value
    /// HAProxy returns (last occurrence unless one is given); with `it.all` true (ACL) each
    /// call returns the next value of a multi-valued fetch, `None` once exhausted.
    #[inline]
    pub fn fetch<'a, S: Source + ?Sized>(
        &'a self,
        src: &'a S,
        ev: &mut Eval,
        it: &mut Iter,
    ) -> Option<Sample<'a>> {
        if it.done {
            return None;
        }
        // One value unless an ACL iterates a multi-valued fetch without an explicit
        // occurrence (`each`).
        if !(it.all && self.each) {
            it.done = true;
        }
        // The fetches rules use most, here where the caller inlines them; the others behind a
        // call (the whole list is a large function whose entry alone costs more than these).
        match self.def.id {
            F::Src => Some(addr(src.src()?.ip())),
            F::Method => Some(Sample::Meth(Bytes::Ext(src.method()?))),
            F::Path => Some(Sample::str(split_target(src.target()?).path)),
            F::Hdr | F::Fhdr => {
                let full = self.def.id == F::Fhdr;
                Some(Sample::str(self.header(src, false, full, it)?))
            }
            _ => self.fetch_other(src, ev, it),
        }
    }

    /// [`Fetch::fetch`] past the iteration's bookkeeping, for every fetch.
    #[inline(never)]
    fn fetch_other<'a, S: Source + ?Sized>(
        &'a self,
        src: &'a S,
        ev: &mut Eval,
        it: &mut Iter,
    ) -> Option<Sample<'a>> {
        use Sample as S;
        Some(match self.def.id {
            F::Src => addr(src.src()?.ip()),
            F::SrcPort => S::Sint(src.src()?.port() as i64),
            F::Dst => addr(src.dst()?.ip()),
            F::DstPort => S::Sint(src.dst()?.port() as i64),
            F::FcSrc => addr(src.fc_src()?.ip()),
            F::FcSrcPort => S::Sint(src.fc_src()?.port() as i64),
            F::FcDst => addr(src.fc_dst()?.ip()),
            F::FcDstPort => S::Sint(src.fc_dst()?.port() as i64),
            F::SrcIsLocal => S::Bool(src.is_local(src.src()?.ip())?),
            F::DstIsLocal => S::Bool(src.is_local(src.dst()?.ip())?),
            F::FcSrcIsLocal => S::Bool(src.is_local(src.fc_src()?.ip())?),
            F::FcDstIsLocal => S::Bool(src.is_local(src.fc_dst()?.ip())?),
            F::FcHttpMajor => S::Sint(if src.http2() { 2 } else { 1 }),
            F::HttpFirstReq => S::Bool(src.first_req()?),
            F::SoId => S::Sint(src.so_id()?),
            F::SoName => S::str(src.so_name()?.as_bytes()),
            F::FeName => S::str(src.frontend()?.1.as_bytes()),
            F::FeId => S::Sint(src.frontend()?.2),
            F::BeName => S::str(src.backend()?.1.as_bytes()),
            F::BeId => S::Sint(src.backend()?.2),
            F::SrvName => S::str(src.server()?.0.as_bytes()),
            F::SrvId => S::Sint(src.server()?.1),
            F::Nbsrv => S::Sint(src.nbsrv(self.be_arg(src)?)),
            F::BeConn => S::Sint(src.be_conn(self.be_arg(src)?)),
            F::BeSessRate => S::Sint(src.be_sess_rate(self.be_arg(src)?)),
            F::FeConn => {
                let fe = match self.args.first() {
                    Some(Some(Arg::Frontend(f))) => *f,
                    _ => src.frontend()?.0,
                };
                S::Sint(src.fe_conn(fe))
            }
            F::SrvConn | F::SrvIsUp | F::SrvSessRate => {
                let Some(Some(Arg::Server(be, srv))) = self.args.first() else {
                    return None;
                };
                match self.def.id {
                    F::SrvConn => S::Sint(src.srv_conn(*be, *srv)),
                    F::SrvSessRate => S::Sint(src.srv_sess_rate(*be, *srv)),
                    _ => S::Bool(src.srv_is_up(*be, *srv)),
                }
            }
            F::Connslots => S::Sint(src.connslots(self.be_arg(src)?)),
            F::Queue => S::Sint(src.queue(self.be_arg(src)?)),
            F::AvgQueue => {
                let be = self.be_arg(src)?;
                let (q, n) = (src.queue(be), src.nbsrv(be));
                S::Sint(if n > 0 { q / n } else { q })
            }
            F::Path => S::str(split_target(src.target()?).path),
            F::Pathq => S::str(split_target(src.target()?).pathq),
            F::Url => S::str(src.target()?),
            F::UrlIp => match url_host_port(src.target()?)?.0.parse::<Ipv4Addr>() {
                Ok(a) => S::Ipv4(a),
                Err(_) => return None,
            },
            F::UrlPort => S::Sint(url_host_port(src.target()?)?.1),
            F::Query => S::str(split_target(src.target()?).query?),
            F::UrlParam | F::UrlParamVal => {
                // The optional delimiter replaces '?' as the start of the parameters
                // (`urlp(jsessionid,;)`); parameters end at '&' or ';'.
                let t = src.target()?;
                let delim = self
                    .str_arg(1)
                    .and_then(|d| d.first().copied())
                    .unwrap_or(b'?');
                let start = super::pattern::find_either(t, delim, delim)? + 1;
                let v = param(&t[start..], b"&;", self.str_arg(0), it)?;
                if self.def.id == F::UrlParamVal {
                    S::Sint(super::sample::str_to_int(v)?)
                } else {
                    S::str(v)
                }
            }
            F::CaptureResVer => S::str(src.res_version()?),
            F::SslFcCipherlistBin
            | F::SslFcCipherlistHex
            | F::SslFcCipherlistStr
            | F::SslFcExtlistBin
            | F::SslFcEclistBin
            | F::SslFcEcformatsBin => {
                let h = src.ssl()?.hello?;
                let list = match self.def.id {
                    F::SslFcExtlistBin => &h.extensions,
                    F::SslFcEclistBin => &h.groups,
                    F::SslFcEcformatsBin => &h.formats,
                    _ => &h.ciphers,
                };
                // Filter option 1: the GREASE values (RFC 8701) left out.
                let filter = self.def.id != F::SslFcEcformatsBin && self.int_arg(0) == Some(1);
                let (i, out) = ev.out_for(None);
                let grease = |p: &[u8]| {
                    filter && p.len() == 2 && crate::proto::tls_hello::is_grease([p[0], p[1]])
                };
                let hex = self.def.id == F::SslFcCipherlistHex;
                let names = self.def.id == F::SslFcCipherlistStr;
                for pair in list.chunks(2).filter(|p| !grease(p)) {
                    if names {
                        // OpenSSL's names, `UNKNOWN(xxxx)` for a value it has none for.
                        let [a, b] = [pair[0], *pair.get(1).unwrap_or(&0)];
                        if !out.is_empty() {
                            out.push(b',');
                        }
                        let id = u16::from_be_bytes([a, b]);
                        match super::ciphers::name(id) {
                            Some(n) => out.extend_from_slice(n.as_bytes()),
                            None => {
                                use std::io::Write;
                                let _ = write!(out, "UNKNOWN({id:04x})");
                            }
                        }
                        continue;
                    }
                    match hex {
                        true => hash::hex_encode(pair, out),
                        false => out.extend_from_slice(pair),
                    }
                }
                if hex || names {
                    S::Str(Bytes::Buf(i))
                } else {
                    S::Bin(Bytes::Buf(i))
                }
            }
            F::SslFcCipherlistXxh => S::Sint(hash::xxh64(&src.ssl()?.hello?.all_ciphers, 0) as i64),
            F::SslFcProtocolHelloId => S::Sint(i64::from(src.ssl()?.hello?.version)),
            F::SslFcSecret => {
                use super::source::SecretKind as K;
                let kind = match self.def.name {
                    "ssl_fc_client_random" => K::ClientRandom,
                    "ssl_fc_client_early_traffic_secret" => K::ClientEarlyTraffic,
                    "ssl_fc_client_handshake_traffic_secret" => K::ClientHandshakeTraffic,
                    "ssl_fc_server_handshake_traffic_secret" => K::ServerHandshakeTraffic,
                    "ssl_fc_client_traffic_secret_0" => K::ClientTraffic0,
                    "ssl_fc_server_traffic_secret_0" => K::ServerTraffic0,
                    "ssl_fc_exporter_secret" => K::Exporter,
                    _ => K::EarlyExporter,
                };
                let secret = src.ssl_secret(kind)?;
                if kind == K::ClientRandom {
                    return Some(S::Bin(Bytes::Ext(secret)));
                }
                // The secrets as HAProxy gives them: lower-case hex, as a key log line has them.
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let (i, out) = ev.out_for(None);
                for &b in secret {
                    out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
                }
                S::Str(Bytes::Buf(i))
            }
            F::Method => S::Meth(Bytes::Ext(src.method()?)),
            F::ReqVer => S::str(strip_http(src.version()?)),
            F::ResVer => S::str(strip_http(src.res_version()?)),
            F::Hdr | F::Fhdr | F::ResHdr | F::ResFhdr => {
                let res = matches!(self.def.id, F::ResHdr | F::ResFhdr);
                let full = matches!(self.def.id, F::Fhdr | F::ResFhdr);
                S::str(self.header(src, res, full, it)?)
            }
            F::HdrIp | F::ResHdrIp => {
                let v = self.header(src, self.def.id == F::ResHdrIp, false, it)?;
                let v = std::str::from_utf8(v).ok()?;
                match v.parse::<IpAddr>() {
                    Ok(a) => addr(a),
                    // `hdr_ip` also accepts "a.b.c.d:port" (X-Forwarded-For with a port).
                    Err(_) => S::Ipv4(v.rsplit_once(':')?.0.parse().ok()?),
                }
            }
            F::HdrVal | F::ResHdrVal => S::Sint(super::sample::str_to_int(self.header(
                src,
                self.def.id == F::ResHdrVal,
                false,
                it,
            )?)?),
            F::HdrCnt | F::FhdrCnt | F::ResHdrCnt | F::ResFhdrCnt => {
                let res = matches!(self.def.id, F::ResHdrCnt | F::ResFhdrCnt);
                let full = matches!(self.def.id, F::FhdrCnt | F::ResFhdrCnt);
                let mut n = 0;
                let mut c = Iter::all();
                while next_value(src, res, self.str_arg(0), full, &mut c).is_some() {
                    n += 1;
                }
                S::Sint(n)
            }
            F::Hdrs | F::ResHdrs => {
                let res = self.def.id == F::ResHdrs;
                let count = if res {
                    src.res_header_count()
                } else {
                    src.req_header_count()
                };
                let (i, out) = ev.out_for(None);
                for h in 0..count {
                    let (n, v) = if res {
                        src.res_header(h)?
                    } else {
                        src.req_header(h)?
                    };
                    out.extend(n.iter().map(|c| c.to_ascii_lowercase()));
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(v);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
                S::Str(Bytes::Buf(i))
            }
            F::Cook | F::ResCook => S::str(self.cookie(src, self.def.id == F::ResCook, it)?),
            F::CookieDir => S::str(self.cookie(src, src.status().is_some(), it)?),
            F::ReqHdrsBin | F::ResHdrsBin => {
                let res = self.def.id == F::ResHdrsBin;
                let count = if res {
                    src.res_header_count()
                } else {
                    src.req_header_count()
                };
                let (i, out) = ev.out_for(None);
                for h in 0..count {
                    let header = if res {
                        src.res_header(h)
                    } else {
                        src.req_header(h)
                    };
                    let Some((name, value)) = header.filter(|(n, v)| !htx_drops(n, v)) else {
                        continue;
                    };
                    put_varint(out, name.len() as u64);
                    out.extend(name.iter().map(|c| c.to_ascii_lowercase()));
                    put_varint(out, value.len() as u64);
                    out.extend_from_slice(value);
                }
                // The end: an empty name and an empty value.
                out.extend_from_slice(&[0, 0]);
                S::Bin(Bytes::Buf(i))
            }
            F::CookVal | F::ResCookVal => S::Sint(super::sample::str_to_int(self.cookie(
                src,
                self.def.id == F::ResCookVal,
                it,
            )?)?),
            F::CookCnt | F::ResCookCnt => {
                let mut n = 0;
                let mut c = Iter::all();
                while next_cookie(src, self.def.id == F::ResCookCnt, self.str_arg(0), &mut c)
                    .is_some()
                {
                    n += 1;
                }
                S::Sint(n)
            }
            F::Base | F::Url32Src | F::Base32Src | F::Base32 | F::Url32 => {
                let t = src.target()?;
                let parts = split_target(t);
                let tail = if matches!(self.def.id, F::Url32 | F::Url32Src) {
                    parts.pathq
                } else {
                    parts.path
                };
                let mut host = Iter::first();
                let host = next_value(src, false, Some(b"host"), true, &mut host).unwrap_or(b"");
                match self.def.id {
                    F::Base => {
                        let (i, out) = ev.out_for(None);
                        out.extend_from_slice(host);
                        out.extend_from_slice(tail);
                        S::Str(Bytes::Buf(i))
                    }
                    _ => {
                        let mut h = 0u32;
                        for &b in host.iter().chain(tail) {
                            h = (b as u32)
                                .wrapping_add(h << 6)
                                .wrapping_add(h << 16)
                                .wrapping_sub(h);
                        }
                        let h = hash::avalanche(h);
                        if matches!(self.def.id, F::Base32 | F::Url32) {
                            S::Sint(h as i64)
                        } else {
                            let (i, out) = ev.out_for(None);
                            out.extend_from_slice(&h.to_be_bytes());
                            match src.src()?.ip() {
                                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
                            }
                            S::Bin(Bytes::Buf(i))
                        }
                    }
                }
            }
            F::CaptureReqHdr => S::str(src.capture_req(usize::try_from(self.int_arg(0)?).ok()?)?),
            F::CaptureReqMethod | F::CaptureReqUri | F::CaptureReqVer => {
                // The request line's words: method, URI (its path, as HAProxy's
                // `http_parse_path` reads it), version.
                let mut words = src.request_line()?.split(|&c| c == b' ');
                let method = words.next()?;
                let uri = words.next()?;
                match self.def.id {
                    F::CaptureReqMethod => S::str(method),
                    F::CaptureReqUri => S::str(split_target(uri).pathq),
                    _ => S::str(words.next()?),
                }
            }
            F::CaptureResHdr => S::str(src.capture_res(usize::try_from(self.int_arg(0)?).ok()?)?),
            F::ReqLen => S::Sint(src.req_len()? as i64),
            F::ReqPayload => {
                let (at, len) = (self.int_arg(0)?, self.int_arg(1)?);
                S::Bin(Bytes::Ext(payload(src.req_payload()?, at, len)?))
            }
            F::ReqPayloadLv => {
                let p = src.req_payload()?;
                let (at, size) = (self.int_arg(0)?, self.int_arg(1)?);
                S::Bin(Bytes::Ext(payload_lv(p, at, size, self.str_arg(2))?))
            }
            F::PayloadDir | F::PayloadLvDir => {
                let p = match src.res_payload() {
                    Some(p) => p,
                    None => src.req_payload()?,
                };
                let (at, len) = (self.int_arg(0)?, self.int_arg(1)?);
                S::Bin(Bytes::Ext(if self.def.id == F::PayloadDir {
                    payload(p, at, len)?
                } else {
                    payload_lv(p, at, len, self.str_arg(2))?
                }))
            }
            F::ResSslHelloType => {
                S::Sint(crate::proto::tls_hello::hello_type(src.res_payload()?).ok()?)
            }
            F::ResLen => S::Sint(src.res_payload()?.len() as i64),
            F::ResPayload => {
                let (at, len) = (self.int_arg(0)?, self.int_arg(1)?);
                S::Bin(Bytes::Ext(payload(src.res_payload()?, at, len)?))
            }
            F::ResPayloadLv => {
                let p = src.res_payload()?;
                let (at, size) = (self.int_arg(0)?, self.int_arg(1)?);
                S::Bin(Bytes::Ext(payload_lv(p, at, size, self.str_arg(2))?))
            }
            F::ReqBody => S::Bin(Bytes::Ext(src.req_body()?)),
            F::ReqBodyLen => S::Sint(src.req_body()?.len() as i64),
            F::ReqBodyParam => S::str(param(src.req_body()?, b"&", self.str_arg(0), it)?),
            F::Status => S::Sint(src.status()? as i64),
            F::SslFc => S::Bool(src.ssl_fc()),
            F::SslFcSni => S::str(src.ssl_sni()?),
            // Both are false, not absent, on a connection without TLS (as HAProxy's).
            F::SslFcHasSni => S::Bool(src.ssl().is_some_and(|s| s.sni.is_some())),
            F::SslFcProtocol => S::str(src.ssl()?.version.as_bytes()),
            F::SslFcCipher => S::str(src.ssl()?.cipher.as_bytes()),
            F::SslFcAlpn => S::str(src.ssl()?.alpn?),
            F::SslFcIsResumed => S::Bool(src.ssl().is_some_and(|s| s.resumed)),
            F::SslFcUseKeysize | F::SslFcAlgKeysize => S::Sint(i64::from(src.ssl()?.key_bits)),
            F::SslCUsed | F::SslFcHasCrt => S::Bool(src.ssl()?.client_cert.is_some()),
            // What verifying the client's certificate found (OpenSSL's codes; 0: X509_V_OK):
            // a connection is here with errors only if `crt-ignore-err`/`ca-ignore-err`
            // waived them.
            // The connection's error (HAProxy's CO_ER_*) and TLS library error: a connection
            // that failed never reaches a rule or a log format, so a connection here has none.
            F::FcErr => S::Sint(0),
            F::FcRcvdProxy => S::Bool(src.fc_rcvd_proxy()),
            F::FcPpAuthority => S::str(src.pp_tlv(0x02)?),
            F::FcPpUniqueId => S::str(src.pp_tlv(0x05)?),
            F::SslFcErr => {
                src.ssl()?;
                S::Sint(0)
            }
            F::SslCVerify => S::Sint(src.ssl()?.verify.result),
            F::SslCErr => S::Sint(src.ssl()?.verify.crt_err),
            F::SslCCaErr => S::Sint(src.ssl()?.verify.ca_err),
            F::SslCCaErrDepth => S::Sint(src.ssl()?.verify.ca_err_depth),
            F::SslCSDn | F::SslCIDn | F::SslFSDn | F::SslFIDn | F::SslSSDn | F::SslSIDn => {
                let c = self.cert(src)?;
                let name = if matches!(self.def.id, F::SslCSDn | F::SslFSDn | F::SslSSDn) {
                    &c.subject
                } else {
                    &c.issuer
                };
                let (i, out) = ev.out_for(None);
                dn(name, self.str_arg(0), self.int_arg(1), self.str_arg(2), out)?;
                S::Str(Bytes::Buf(i))
            }
            F::SslCSerial | F::SslFSerial | F::SslSSerial => {
                S::Bin(Bytes::Ext(&self.cert(src)?.serial))
            }
            F::SslCNotBefore | F::SslFNotBefore | F::SslSNotBefore => {
                S::str(self.cert(src)?.not_before.as_deref()?.as_bytes())
            }
            F::SslCNotAfter | F::SslFNotAfter | F::SslSNotAfter => {
                S::str(self.cert(src)?.not_after.as_deref()?.as_bytes())
            }
            F::SslCVersion | F::SslFVersion | F::SslSVersion => S::Sint(self.cert(src)?.version),
            F::SslCSha1 | F::SslFSha1 | F::SslSSha1 => S::Bin(Bytes::Ext(&self.cert(src)?.sha1)),
            F::SslCSigAlg | F::SslFSigAlg | F::SslSSigAlg => {
                S::str(self.cert(src)?.sig_alg.as_bytes())
            }
            F::SslCKeyAlg | F::SslFKeyAlg | F::SslSKeyAlg => {
                S::str(self.cert(src)?.key_alg.as_bytes())
            }
            F::SslSDer => S::Bin(Bytes::Ext(src.ssl_bc()?.client_cert?)),
            F::SslCChainDer | F::SslSChainDer => {
                let ssl = if self.def.id == F::SslSChainDer {
                    src.ssl_bc()?
                } else {
                    src.ssl()?
                };
                // OpenSSL's peer chain: a server's includes its certificate, a client's
                // does not.
                let chain = ssl.peer_chain?;
                let skip = usize::from(self.def.id == F::SslCChainDer);
                let (i, out) = ev.out_for(None);
                for c in chain.iter().skip(skip) {
                    out.extend_from_slice(c);
                }
                S::Bin(Bytes::Buf(i))
            }
            F::SslCDer => S::Bin(Bytes::Ext(src.ssl()?.client_cert?)),
            F::SslFDer => S::Bin(Bytes::Ext(src.ssl()?.frontend_der?)),
            F::SslBc => S::Bool(src.ssl_bc().is_some()),
            F::SslBcProtocol => S::str(src.ssl_bc()?.version.as_bytes()),
            F::SslBcCipher => S::str(src.ssl_bc()?.cipher.as_bytes()),
            F::SslBcAlpn => S::str(src.ssl_bc()?.alpn?),
            F::SslBcIsResumed => S::Bool(src.ssl_bc().is_some_and(|s| s.resumed)),
            F::SslBcKeysize => S::Sint(i64::from(src.ssl_bc()?.key_bits)),
            F::ReqSslAlpn
            | F::ReqSslEcExt
            | F::ReqSslHelloType
            | F::ReqSslSni
            | F::ReqSslStExt
            | F::ReqSslVer => return self.hello_fetch(src, it),
            F::Var => {
                let Some(Some(Arg::Var(scope, id))) = self.args.first() else {
                    return None;
                };
                let (i, out) = ev.out_for(None);
                let Some(stored) = src.var(*scope, *id, out) else {
                    // `var(NAME,DEFAULT)`: an unset variable gives the default, as a string.
                    return self.str_arg(1).map(|d| S::Str(Bytes::Ext(d)));
                };
                match stored {
                    Stored::Bool(b) => S::Bool(b),
                    Stored::Sint(v) => S::Sint(v),
                    Stored::Ipv4(a) => S::Ipv4(a),
                    Stored::Ipv6(a) => S::Ipv6(a),
                    Stored::Str => S::Str(Bytes::Buf(i)),
                    Stored::Bin => S::Bin(Bytes::Buf(i)),
                    Stored::Meth => S::Meth(Bytes::Buf(i)),
                }
            }
            F::Env => S::str(src.env(std::str::from_utf8(self.str_arg(0)?).ok()?)?),
            F::Rand => {
                let r = src.random();
                match self.int_arg(0) {
                    Some(range) => S::Sint(((r as u64 * range.max(0) as u64) >> 32) as i64),
                    None => S::Sint(r as i64),
                }
            }
            F::Date => S::Sint(src.now() + self.int_arg(0).unwrap_or(0)),
            F::True => S::Bool(true),
            F::False => S::Bool(false),
            F::Const => match self.args.first()?.as_ref() {
                None => S::str(b""),
                Some(Arg::Int(v)) => S::Sint(*v),
                Some(Arg::Bool(b)) => S::Bool(*b),
                Some(Arg::Ipv4(a)) => S::Ipv4(*a),
                Some(Arg::Ipv6(a)) => S::Ipv6(*a),
                Some(Arg::Str(s)) => match self.def.out {
                    SmpType::Meth => S::Meth(Bytes::Ext(s)),
                    SmpType::Bin => S::Bin(Bytes::Ext(s)),
                    _ => S::str(s),
                },
                _ => return None,
            },
            F::HttpAuth => {
                let Some(Some(Arg::Userlist(u))) = self.args.first() else {
                    return None;
                };
                S::Bool(src.auth_user(*u).is_some())
            }
            F::HttpAuthGroup => {
                let Some(Some(Arg::Userlist(u))) = self.args.first() else {
                    return None;
                };
                S::str(src.auth_user(*u)?)
            }
            F::HttpAuthUser | F::HttpAuthPass => {
                let (i, out) = ev.out_for(None);
                let colon = src.auth_basic(out)?;
                if self.def.id == F::HttpAuthUser {
                    out.truncate(colon);
                } else {
                    out.drain(..=colon);
                }
                S::Str(Bytes::Buf(i))
            }
            // Read from the request buffer: none once the request is gone (at log time).
            F::ProtoHttp => {
                if src.target().is_none() && src.req_len().is_none() {
                    return None;
                }
                S::Bool(src.method().is_some())
            }
            // Until the inspect delay ends, WAIT_END has no value (a condition on it is
            // undecided, so `tcp-request content` waits), as in HAProxy.
            F::WaitEnd => {
                if !src.wait_end() {
                    return None;
                }
                S::Bool(true)
            }
            // The RDP cookie of the connection's first bytes (`Cookie: mstshash=NAME`): its
            // value, or whether there is one (0 or 1, once enough bytes decide it).
            F::RdpCookie => S::str(rdp_cookie(src.req_payload()?, self.str_arg(0)).ok()?),
            F::RdpCookieCnt => match rdp_cookie(src.req_payload()?, self.str_arg(0)) {
                Ok(_) => S::Sint(1),
                Err(crate::proto::tls_hello::Fail::No) => S::Sint(0),
                Err(crate::proto::tls_hello::Fail::Short) => return None,
            },
            F::Uuid | F::UniqueId | F::LastRuleFile | F::LastRuleLine => {
                return self.stream_fetch(src, ev)
            }
            F::Stick => return super::stick::fetch(self, src),
            F::FeReqRate
            | F::FeSessRate
            | F::FeClientTimeout
            | F::BeServerTimeout
            | F::BeTunnelTimeout
            | F::CurServerTimeout
            | F::CurTunnelTimeout
            | F::BeConnFree
            | F::SrvConnFree
            | F::SrvQueue
            | F::SrvWeight
            | F::SrvUweight
            | F::SrvIweight
            | F::FcRtt
            | F::FcRttVar
            | F::FcUnacked
            | F::FcSacked
            | F::FcRetrans
            | F::FcFackets
            | F::FcLost
            | F::FcReordering => S::Sint(self.figure(src)?),
            F::FeDefbe => S::str(src.default_backend()?.as_bytes()),
            F::Hostname => S::str(src.hostname()?.as_bytes()),
            F::Nbproc | F::Proc => S::Sint(1),
            F::Thread => S::Sint(src.thread()),
            F::DateUs => S::Sint(src.date_us()),
            F::Stopping => S::Bool(src.stopping()),
            F::Baseq => {
                let pathq = split_target(src.target()?).pathq;
                let mut host = Iter::first();
                let host = next_value(src, false, Some(b"host"), true, &mut host).unwrap_or(b"");
                let (i, out) = ev.out_for(None);
                out.extend_from_slice(host);
                out.extend_from_slice(pathq);
                S::Str(Bytes::Buf(i))
            }
            F::HttpAuthType | F::HttpAuthBearer => {
                let name = self.str_arg(0).unwrap_or(b"authorization");
                let mut first = Iter::first();
                let v = next_value(src, false, Some(name), true, &mut first)?;
                let (scheme, rest) = auth_scheme(v)?;
                if self.def.id == F::HttpAuthType {
                    // HAProxy names the schemes it parses (Basic, Bearer), by its spelling.
                    return Some(S::str(if scheme.eq_ignore_ascii_case(b"basic") {
                        b"Basic"
                    } else if scheme.eq_ignore_ascii_case(b"bearer") {
                        b"Bearer"
                    } else {
                        return None;
                    }));
                }
                if !scheme.eq_ignore_ascii_case(b"bearer") || rest.is_empty() {
                    return None;
                }
                S::str(rest)
            }
            F::ReqHdrNames | F::ResHdrNames => {
                let res = self.def.id == F::ResHdrNames;
                let delim = self.str_arg(0).unwrap_or(b",");
                let count = if res {
                    src.res_header_count()
                } else {
                    src.req_header_count()
                };
                let (i, out) = ev.out_for(None);
                let start = out.len();
                for h in 0..count {
                    let header = if res {
                        src.res_header(h)
                    } else {
                        src.req_header(h)
                    };
                    let Some((name, value)) = header else {
                        continue;
                    };
                    if htx_drops(name, value) {
                        continue;
                    }
                    if out.len() > start {
                        out.extend_from_slice(delim);
                    }
                    // Names as HAProxy keeps them: lower case.
                    out.extend(name.iter().map(|c| c.to_ascii_lowercase()));
                }
                S::Str(Bytes::Buf(i))
            }
        })
    }

    /// The fetches of [`super::source::Figure`]: counters and settings of proxies and
    /// servers, and the client connection's `TCP_INFO`.
    fn figure<S: Source + ?Sized>(&self, src: &S) -> Option<i64> {
        use super::source::{Figure as G, TcpFigure as T};
        let server = || match self.args.first() {
            Some(Some(Arg::Server(be, srv))) => Some((*be, *srv)),
            _ => None,
        };
        let frontend = || match self.args.first() {
            Some(Some(Arg::Frontend(f))) => Some(*f),
            _ => src.frontend().map(|f| f.0),
        };
        let g = match self.def.id {
            F::FeReqRate => G::FeReqRate(frontend()?),
            F::FeSessRate => G::FeSessRate(frontend()?),
            F::FeClientTimeout => G::FeClientTimeout,
            F::BeServerTimeout => G::BeServerTimeout(src.backend()?.0),
            F::BeTunnelTimeout => G::BeTunnelTimeout(src.backend()?.0),
            F::CurServerTimeout => G::CurServerTimeout(src.backend()?.0),
            F::CurTunnelTimeout => G::CurTunnelTimeout(src.backend()?.0),
            F::BeConnFree => G::BeConnFree(self.be_arg(src)?),
            F::SrvConnFree => G::SrvConnFree(server()?.0, server()?.1),
            F::SrvQueue => G::SrvQueue(server()?.0, server()?.1),
            F::SrvWeight => G::SrvWeight(server()?.0, server()?.1),
            F::SrvUweight => G::SrvUweight(server()?.0, server()?.1),
            F::SrvIweight => G::SrvIweight(server()?.0, server()?.1),
            F::FcRtt | F::FcRttVar => {
                let t = if self.def.id == F::FcRtt {
                    T::Rtt
                } else {
                    T::RttVar
                };
                let us = src.figure(G::Tcp(t))?;
                // Milliseconds unless the argument says `us`, as HAProxy divides.
                return Some(if self.str_arg(0) == Some(b"us") {
                    us
                } else {
                    us / 1000
                });
            }
            F::FcUnacked => G::Tcp(T::Unacked),
            F::FcSacked => G::Tcp(T::Sacked),
            F::FcRetrans => G::Tcp(T::Retrans),
            F::FcFackets => G::Tcp(T::Fackets),
            F::FcLost => G::Tcp(T::Lost),
            F::FcReordering => G::Tcp(T::Reordering),
            _ => return None,
        };
        src.figure(g)
    }

    /// The `req.ssl_*` fetches: the client's TLS hello in the raw bytes it sent so far (a
    /// TCP-mode request; none in HTTP mode, where HAProxy's buffer holds no raw bytes either).
    /// The certificate an `ssl_c_*` (the client's) or `ssl_f_*` (the bind's) fetch reads.
    fn cert<'a, S: Source + ?Sized>(&self, src: &'a S) -> Option<&'a super::source::PeerCert> {
        if matches!(
            self.def.id,
            F::SslSSDn
                | F::SslSIDn
                | F::SslSSerial
                | F::SslSNotBefore
                | F::SslSNotAfter
                | F::SslSVersion
                | F::SslSSha1
                | F::SslSSigAlg
                | F::SslSKeyAlg
        ) {
            return src.ssl_bc()?.client;
        }
        let ssl = src.ssl()?;
        match self.def.id {
            F::SslFSDn
            | F::SslFIDn
            | F::SslFSerial
            | F::SslFNotBefore
            | F::SslFNotAfter
            | F::SslFVersion
            | F::SslFSha1
            | F::SslFSigAlg
            | F::SslFKeyAlg => ssl.frontend,
            _ => ssl.client,
        }
    }

    fn hello_fetch<'a, S: Source + ?Sized>(
        &'a self,
        src: &'a S,
        it: &mut Iter,
    ) -> Option<Sample<'a>> {
        use crate::proto::tls_hello as hello;
        let buf = src.req_payload()?;
        Some(match self.def.id {
            F::ReqSslAlpn => {
                // `it.pos` is where the next name is in the extension (0: the first).
                let (name, next) = hello::alpn(buf, it.pos).ok()?;
                match next {
                    Some(p) => it.pos = p,
                    None => it.done = true,
                }
                Sample::str(name)
            }
            F::ReqSslEcExt => Sample::Bool(hello::ec_ext(buf).ok()?),
            F::ReqSslHelloType => Sample::Sint(hello::hello_type(buf).ok()?),
            F::ReqSslSni => Sample::str(hello::sni(buf).ok()?),
            F::ReqSslStExt => Sample::Sint(hello::st_ext(buf).ok()?),
            F::ReqSslVer => Sample::Sint(hello::version(buf).ok()?),
            _ => return None,
        })
    }

    /// The fetches of a stream's identity and history: `uuid` (a fresh random UUID, version 4
    /// only, as in HAProxy 2.6), `unique-id` (the transaction's `unique-id-format` value),
    /// `last_rule_file` and `last_rule_line` (where the last final rule that ran was written:
    /// `tcp-request content accept|reject`, `http-request allow|deny|redirect|return|...`,
    /// `http-response allow|deny|...`, `http-after-response allow`).
    fn stream_fetch<'a, S: Source + ?Sized>(
        &'a self,
        src: &'a S,
        ev: &mut Eval,
    ) -> Option<Sample<'a>> {
        match self.def.id {
            F::Uuid => {
                let (i, out) = ev.out_for(None);
                let words = [src.random(), src.random(), src.random(), src.random()];
                write_uuid4(out, words);
                Some(Sample::Str(Bytes::Buf(i)))
            }
            F::UniqueId => {
                let (i, out) = ev.out_for(None);
                src.unique_id(out).then_some(Sample::Str(Bytes::Buf(i)))
            }
            F::LastRuleFile => Some(Sample::str(src.last_rule()?.0.as_bytes())),
            F::LastRuleLine => Some(Sample::Sint(i64::from(src.last_rule()?.1))),
            _ => None,
        }
    }

    /// The userlist of `http_auth_group`, for its group patterns.
    pub(crate) fn userlist(&self) -> Option<usize> {
        match self.args.first() {
            Some(Some(Arg::Userlist(u))) => Some(*u),
            _ => None,
        }
    }

    fn header<'a, S: Source + ?Sized>(
        &'a self,
        src: &'a S,
        res: bool,
        full: bool,
        it: &mut Iter,
    ) -> Option<&'a [u8]> {
        let name = self.str_arg(0);
        if it.all && self.each {
            return next_value(src, res, name, full, it);
        }
        let occ = self.int_arg(1);
        match (name, occ.unwrap_or(0)) {
            // The last occurrence, the default: one pass to the last header of the name.
            (Some(name), 0 | -1) => last_value(src, res, name, full),
            _ => nth(occ.unwrap_or(0), |c| next_value(src, res, name, full, c)),
        }
    }

    fn cookie<'a, S: Source + ?Sized>(
        &'a self,
        src: &'a S,
        res: bool,
        it: &mut Iter,
    ) -> Option<&'a [u8]> {
        let name = self.str_arg(0);
        if it.all && self.def.multi {
            return next_cookie(src, res, name, it);
        }
        nth(0, |c| next_cookie(src, res, name, c))
    }
}

/// A version 4 UUID from 128 random bits, lower-case as HAProxy writes it
/// (`xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`, `y` one of 8, 9, a, b).
fn write_uuid4(out: &mut Vec<u8>, w: [u32; 4]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hi = u64::from(w[0]) << 32 | u64::from(w[1]);
    let lo = u64::from(w[2]) << 32 | u64::from(w[3]);
    // Version 4 in the 13th digit, the RFC 4122 variant in the 17th.
    let hi = hi & !0xF000 | 0x4000;
    let lo = lo & !(0xC << 60) | (0x8 << 60);
    let v = u128::from(hi) << 64 | u128::from(lo);
    for k in 0..32 {
        if matches!(k, 8 | 12 | 16 | 20) {
            out.push(b'-');
        }
        out.push(HEX[((v >> (124 - 4 * k)) & 15) as usize]);
    }
}

fn addr(a: IpAddr) -> Sample<'static> {
    match a {
        IpAddr::V4(a) => Sample::Ipv4(a),
        IpAddr::V6(a) => Sample::Ipv6(a),
    }
}

/// Position of a resumable iteration over a fetch's values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Iter {
    /// ACL context: iterate every value of a multi-valued fetch.
    pub all: bool,
    pub done: bool,
    /// Header (or parameter) index and offset inside its value.
    pub(crate) idx: usize,
    pub(crate) pos: usize,
}

impl Iter {
    /// Sample context: one value.
    pub fn first() -> Iter {
        Iter::default()
    }
    /// ACL context: every value.
    pub fn all() -> Iter {
        Iter {
            all: true,
            ..Iter::default()
        }
    }
}

/// The `occ`-th value of a sequence HAProxy's way: > 0 from the first, < 0 from the last, 0 the
/// last.
fn nth<'a>(occ: i64, mut next: impl FnMut(&mut Iter) -> Option<&'a [u8]>) -> Option<&'a [u8]> {
    let mut c = Iter::all();
    if occ > 0 {
        let mut n = 0;
        while let Some(v) = next(&mut c) {
            n += 1;
            if n == occ {
                return Some(v);
            }
        }
        return None;
    }
    if occ == 0 || occ == -1 {
        let mut last = None;
        while let Some(v) = next(&mut c) {
            last = Some(v);
        }
        return last;
    }
    let mut total = 0;
    while next(&mut c).is_some() {
        total += 1;
    }
    let want = total + occ + 1;
    if want < 1 {
        return None;
    }
    nth(want, next)
}

/// `v` without its leading and trailing spaces and tabs. Most values have none: when both
/// ends are above a space (neither is a space or a tab), `v` is returned at once.
fn trim(mut v: &[u8]) -> &[u8] {
    if let (Some(&a), Some(&z)) = (v.first(), v.last()) {
        if a > b' ' && z > b' ' {
            return v;
        }
    }
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// The last value of header `name` (lower-case), what `hdr(name)` gives outside an ACL: the
/// last header of that name found in one pass, then its last comma-separated value (`full`:
/// the whole value), as [`nth`] over [`next_value`] would give it.
fn last_value<'a, S: Source + ?Sized>(
    src: &'a S,
    res: bool,
    name: &[u8],
    full: bool,
) -> Option<&'a [u8]> {
    let named = |from| {
        if res {
            src.res_header_named(from, name)
        } else {
            src.req_header_named(from, name)
        }
    };
    let mut h = named(0)?;
    while let Some(next) = h.next {
        h = named(next)?;
    }
    let (i, v) = (h.idx, h.value);
    if full {
        return Some(trim(v));
    }
    // Most values have one element: no comma nor quote, looked for 8 bytes at a time.
    if super::pattern::find_either(v, b',', b'"').is_none() {
        return Some(trim(v));
    }
    // Several elements (a quoted comma is not a separator): the values of that header in
    // order, the last kept.
    let mut it = Iter {
        all: true,
        done: false,
        idx: i,
        pos: 0,
    };
    let mut out = None;
    while let Some(x) = next_value(src, res, Some(name), false, &mut it) {
        out = Some(x);
    }
    out
}

/// Next value of header `name` (lower-case; `None`: any header). Unless `full`, values are
/// split on commas outside double quotes, as HAProxy's `hdr()` does. After the last value of
/// the last header of that name, `it` is done: the next call returns `None` at once.
pub(crate) fn next_value<'a, S: Source + ?Sized>(
    src: &'a S,
    res: bool,
    name: Option<&[u8]>,
    full: bool,
    it: &mut Iter,
) -> Option<&'a [u8]> {
    if it.done {
        return None;
    }
    // The header at `it.idx` or after, and where the one after it is (`None`: no other).
    let (v, next) = match (name, res) {
        (Some(want), _) => {
            let h = if res {
                src.res_header_named(it.idx, want)?
            } else {
                src.req_header_named(it.idx, want)?
            };
            if h.idx != it.idx {
                it.idx = h.idx;
                it.pos = 0;
            }
            (h.value, h.next)
        }
        (None, true) => (src.res_header(it.idx)?.1, Some(it.idx + 1)),
        (None, false) => (src.req_header(it.idx)?.1, Some(it.idx + 1)),
    };
    let (start, end) = if full {
        (0, v.len())
    } else {
        // (`it.pos` is within the value: set here, over the same head.)
        let start = it.pos.min(v.len());
        (start, start + value_end(&v[start..]))
    };
    it.pos = end + 1;
    if it.pos > v.len() {
        // The header's last value: on to the next header of the name, if any.
        match next {
            Some(n) => it.idx = n,
            None => it.done = true,
        }
        it.pos = 0;
    }
    Some(trim(&v[start..end]))
}

/// The end of the first comma-separated value of `v`: the first comma outside double quotes,
/// or the length. Most values have no quote: the bytes are looked at 8 at a time until a comma
/// or a quote, and one by one only after a quote.
fn value_end(v: &[u8]) -> usize {
    let stop = super::pattern::find_either(v, b',', b'"');
    match stop {
        None => v.len(),
        Some(p) if v[p] == b',' => p,
        Some(p) => {
            let mut quoted = false;
            v[p..]
                .iter()
                .position(|&c| {
                    if c == b'"' {
                        quoted = !quoted;
                    }
                    c == b',' && !quoted
                })
                .map_or(v.len(), |e| p + e)
        }
    }
}

/// Next value of cookie `name` (`None`: any cookie) in `Cookie` (request) or `Set-Cookie`
/// (response) headers.
fn next_cookie<'a, S: Source + ?Sized>(
    src: &'a S,
    res: bool,
    name: Option<&[u8]>,
    it: &mut Iter,
) -> Option<&'a [u8]> {
    let hname: &[u8] = if res { b"set-cookie" } else { b"cookie" };
    loop {
        let h = if res {
            src.res_header_named(it.idx, hname)?
        } else {
            src.req_header_named(it.idx, hname)?
        };
        if h.idx != it.idx {
            it.idx = h.idx;
            it.pos = 0;
        }
        let v = h.value;
        if it.pos >= v.len() {
            it.idx = h.next?;
            it.pos = 0;
            continue;
        }
        let rest = &v[it.pos..];
        let end = rest.iter().position(|&c| c == b';').unwrap_or(rest.len());
        let start = it.pos;
        // A Set-Cookie header holds one cookie: its attributes are not cookies.
        it.pos = if res { v.len() } else { it.pos + end + 1 };
        let item = trim(&v[start..start + end]);
        let (k, val) = match item.iter().position(|&c| c == b'=') {
            Some(e) => (trim(&item[..e]), trim(&item[e + 1..])),
            None => (item, &item[item.len()..]),
        };
        if k.is_empty() {
            continue;
        }
        if name.is_none_or(|want| want.is_empty() || k == want) {
            return Some(val);
        }
    }
}

/// Next value of parameter `name` (`None`: the first parameter) in `a=1&b=2`.
fn param<'a>(s: &'a [u8], seps: &[u8], name: Option<&[u8]>, it: &mut Iter) -> Option<&'a [u8]> {
    while it.pos <= s.len() {
        let rest = &s[it.pos..];
        // One or two separators (the usual `&;`): looked for eight bytes at a time.
        let end = match *seps {
            [a] => super::pattern::find_either(rest, a, a),
            [a, b] => super::pattern::find_either(rest, a, b),
            _ => rest.iter().position(|c| seps.contains(c)),
        }
        .unwrap_or(rest.len());
        let item = &rest[..end];
        it.pos += end + 1;
        let (k, v) = match super::pattern::find_either(item, b'=', b'=') {
            Some(e) => (&item[..e], &item[e + 1..]),
            None => (item, &item[item.len()..]),
        };
        if name.is_none_or(|want| k == want) {
            return Some(v);
        }
    }
    None
}

/// `HTTP/1.1` -> `1.1`.
fn strip_http(v: &[u8]) -> &[u8] {
    v.strip_prefix(b"HTTP/").unwrap_or(v)
}

/// A request target cut into the pieces fetches return.
pub(crate) struct Target<'a> {
    /// From the first `/` after the authority (or the whole origin-form target) to `?`.
    pub path: &'a [u8],
    /// Path and query.
    pub pathq: &'a [u8],
    pub query: Option<&'a [u8]>,
}

pub(crate) fn split_target(t: &[u8]) -> Target<'_> {
    let mut from = 0;
    // An origin-form target (the usual one) has no scheme: no "://" to look for.
    let scheme_end = match t.first() {
        Some(b'/') => None,
        _ => t.windows(3).position(|w| w == b"://"),
    };
    if let Some(p) = scheme_end {
        if t[..p]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(c))
        {
            let a = p + 3;
            from = t[a..]
                .iter()
                .position(|&c| c == b'/')
                .map_or(t.len(), |s| a + s);
        }
    }
    let pathq = &t[from..];
    // Eight bytes at a time: fetches on the path split the target once each.
    match super::pattern::find_either(pathq, b'?', b'?') {
        Some(q) => Target {
            path: &pathq[..q],
            pathq,
            query: Some(&pathq[q + 1..]),
        },
        None => Target {
            path: pathq,
            pathq,
            query: None,
        },
    }
}

/// Host and port of an absolute-form target (`url_ip`, `url_port`); the port defaults to 80.
fn url_host_port(t: &[u8]) -> Option<(&str, i64)> {
    let t = std::str::from_utf8(t).ok()?;
    let (_, rest) = t.split_once("://")?;
    let auth = rest.split(['/', '?']).next()?;
    let auth = auth.rsplit_once('@').map_or(auth, |a| a.1);
    match auth.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => Some((h, p.parse().ok()?)),
        _ => Some((auth, 80)),
    }
}

/// A distinguished name as `ssl_c_s_dn`/`ssl_c_i_dn` return it: the whole name in OpenSSL's
/// one-line form (`/C=FR/O=x/CN=y`) or, with `rfc2253` as the format, in LDAP's reversed form
/// (`CN=y,O=x,C=FR`); with an entry (`CN`), the value of its `occ`-th occurrence (from 1; negative
/// counts from the end; the last by default).
fn dn(
    attrs: &[(String, String)],
    entry: Option<&[u8]>,
    occ: Option<i64>,
    format: Option<&[u8]>,
    out: &mut Vec<u8>,
) -> Option<()> {
    match entry.filter(|e| !e.is_empty()) {
        Some(entry) => {
            let found: Vec<&String> = attrs
                .iter()
                .filter(|(k, _)| k.as_bytes().eq_ignore_ascii_case(entry))
                .map(|(_, v)| v)
                .collect();
            let occ = occ.unwrap_or(-1);
            let i = if occ > 0 {
                usize::try_from(occ - 1).ok()?
            } else if occ < 0 {
                found.len().checked_sub(usize::try_from(-occ).ok()?)?
            } else {
                return None;
            };
            out.extend_from_slice(found.get(i)?.as_bytes());
        }
        None if format == Some(b"rfc2253") => {
            for (n, (k, v)) in attrs.iter().rev().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(k.as_bytes());
                out.push(b'=');
                for (j, c) in v.bytes().enumerate() {
                    let edge =
                        (j == 0 && matches!(c, b' ' | b'#')) || (j + 1 == v.len() && c == b' ');
                    if edge || matches!(c, b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';') {
                        out.push(b'\\');
                    }
                    out.push(c);
                }
            }
        }
        None => {
            for (k, v) in attrs {
                out.push(b'/');
                out.extend_from_slice(k.as_bytes());
                out.push(b'=');
                out.extend_from_slice(v.as_bytes());
            }
        }
    }
    (!out.is_empty()).then_some(())
}

/// `req.payload(OFFSET,LENGTH)`: `LENGTH` bytes at `OFFSET` of what the request buffered (0:
/// all from `OFFSET`). Nothing while too few bytes are in: a condition on it then waits for
/// more (`acl::AclTerm::eval`), as HAProxy's "may change".
fn payload(p: &[u8], at: i64, len: i64) -> Option<&[u8]> {
    let at = usize::try_from(at).ok()?;
    let len = usize::try_from(len).ok()?;
    if len == 0 {
        return p.get(at..);
    }
    p.get(at..at.checked_add(len)?)
}

/// `req.payload_lv(OFFSET1,LENGTH[,OFFSET2])`: a block whose size is the big-endian integer of
/// `LENGTH` bytes (1 to 4) at `OFFSET1`, starting right after it, or at `OFFSET2` (`+N`/`-N`:
/// relative to right after it).
fn payload_lv<'a>(p: &'a [u8], at: i64, size: i64, off2: Option<&[u8]>) -> Option<&'a [u8]> {
    let field = payload(p, at, size).filter(|f| (1..=4).contains(&f.len()))?;
    let n = field.iter().fold(0usize, |n, &b| n << 8 | usize::from(b));
    let after = i64::try_from(usize::try_from(at).ok()? + field.len()).ok()?;
    let start = match off2 {
        None | Some(b"") => after,
        Some(o) => {
            let v: i64 = std::str::from_utf8(o).ok()?.parse().ok()?;
            if matches!(o[0], b'+' | b'-') {
                after.checked_add(v)?
            } else {
                v
            }
        }
    };
    if n == 0 {
        return None;
    }
    payload(p, start, i64::try_from(n).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::sample::Value;
    use crate::rules::source::{TestBackend, TestSource};
    use crate::rules::NameTable;

    /// The last occurrence found in one pass answers as the general occurrence walk does,
    /// for commas, quotes, empty values and repeated headers.
    #[test]
    fn last_value_is_the_last_occurrence() {
        let sets: &[&[(&str, &str)]] = &[
            &[("X", "a")],
            &[("X", "a, b ,c")],
            &[("X", "a,")],
            &[("X", "")],
            &[("X", "a"), ("Y", "q"), ("x", "b, c")],
            &[("X", "\"a,b\", c"), ("X", "d, \"e,f\"")],
            &[("X", "a, \"b")],
            &[("Y", "a")],
            &[],
        ];
        for hs in sets {
            let src = TestSource::get("/", hs);
            for full in [false, true] {
                let want = nth(0, |c| next_value(&src, false, Some(b"x"), full, c));
                let got = last_value(&src, false, b"x", full);
                assert_eq!(got, want, "{hs:?} full={full}");
            }
        }
    }

    fn names() -> NameTable {
        NameTable {
            backends: vec![("web".into(), vec!["s1".into(), "s2".into()])],
            userlists: vec!["admins".into()],
            ..Default::default()
        }
    }

    fn req() -> TestSource {
        let mut s = TestSource::get(
            "/p/a.html?q=1&r=two;x",
            &[
                ("Host", "www.example.com:8080"),
                ("X", "a, b"),
                ("x", "c"),
                ("Cookie", "a=1; b=2"),
                ("cookie", "a=3"),
            ],
        );
        s.backends = vec![TestBackend {
            nbsrv: 2,
            connslots: -1,
            servers: vec![(3, true, 7), (0, false, 0)],
            ..Default::default()
        }];
        s
    }

    fn one(word: &str, src: &TestSource) -> Option<String> {
        let f = Fetch::compile(word, &names()).unwrap();
        let mut ev = Eval::new();
        let s = f.fetch(src, &mut ev, &mut Iter::first())?;
        let b = super::super::sample::to_bytes(s, &mut ev)?;
        Some(String::from_utf8_lossy(ev.get(b)).into_owned())
    }

    // Expected values from haproxy 2.6 with the same request (see hash.rs tests for how).
    #[test]
    fn trim_drops_spaces_and_tabs_only() {
        for (v, want) in [
            ("", ""),
            (" ", ""),
            ("a", "a"),
            (" \ta b\t ", "a b"),
            ("\x0ca\x0c", "\x0ca\x0c"),
            ("\x01 a", "\x01 a"),
            ("a \x01", "a \x01"),
            ("\u{e9}", "\u{e9}"),
        ] {
            assert_eq!(trim(v.as_bytes()), want.as_bytes(), "{v:?}");
        }
    }

    #[test]
    fn values_end_at_the_first_comma_outside_quotes() {
        for (v, want) in [
            ("", 0),
            ("abc", 3),
            ("a,b", 1),
            (",", 0),
            ("fr-FR,fr;q=0.9,en;q=0.5", 5),
            ("0123456789abcdef,x", 16),
            ("01234567,", 8),
            ("\"a,b\",c", 5),
            ("0123456789\"a,b\"", 15),
            ("abc\"def", 7),
            ("x\"a,b\"y\"c,d\",e", 12),
        ] {
            assert_eq!(value_end(v.as_bytes()), want, "{v}");
        }
    }

    #[test]
    fn request_fetches_match_haproxy() {
        let r = req();
        let cases = [
            ("req.hdr(x)", Some("c")),
            ("req.hdr(x,-1)", Some("c")),
            ("req.hdr(x,2)", Some("b")),
            ("req.hdr(x,0)", Some("c")),
            ("req.hdr(x,-2)", Some("b")),
            ("req.hdr(x,5)", None),
            ("hdr(X,1)", Some("a")),
            ("req.fhdr(x)", Some("c")),
            ("req.fhdr(x,1)", Some("a, b")),
            ("req.hdr_cnt(x)", Some("3")),
            ("req.fhdr_cnt(x)", Some("2")),
            ("req.cook(a)", Some("3")),
            ("req.cook(b)", Some("2")),
            ("req.cook_cnt(a)", Some("2")),
            ("req.cook_cnt", Some("3")),
            ("url_param(q)", Some("1")),
            ("url_param(r)", Some("two")),
            ("urlp(q,;)", None),
            ("query", Some("q=1&r=two;x")),
            ("pathq", Some("/p/a.html?q=1&r=two;x")),
            ("path", Some("/p/a.html")),
            ("url", Some("/p/a.html?q=1&r=two;x")),
            ("req.ver", Some("1.1")),
            ("method", Some("GET")),
            ("base", Some("www.example.com:8080/p/a.html")),
            ("base32", Some("1852511755")),
            ("src", Some("127.0.0.1")),
            ("dst_port", Some("80")),
            ("url_ip", None),
            ("nbsrv(web)", Some("2")),
            ("connslots(web)", Some("-1")),
            ("srv_is_up(web/s1)", Some("1")),
            ("srv_conn(web/s1)", Some("3")),
            ("srv_sess_rate(web/s1)", Some("7")),
            ("int(-3)", Some("-3")),
            ("str(abc)", Some("abc")),
            ("always_true", Some("1")),
            ("ssl_fc", Some("0")),
        ];
        for (w, want) in cases {
            assert_eq!(one(w, &r).as_deref(), want, "{w}");
        }
    }

    #[test]
    fn hdrs_and_url32() {
        let r = TestSource::get("/p/a.html?q=1", &[("Host", "www.example.com"), ("X", "y")]);
        assert_eq!(
            one("req.hdrs", &r).unwrap(),
            "host: www.example.com\r\nx: y\r\n\r\n"
        );
        assert_eq!(one("url32", &r).unwrap(), "2824215434");
        let f = Fetch::compile("base32+src", &names()).unwrap();
        let mut ev = Eval::new();
        let s = f.fetch(&r, &mut ev, &mut Iter::first()).unwrap();
        assert_eq!(
            ev.value(s),
            Value::Bin(&[0xD5, 0x22, 0x33, 0x92, 127, 0, 0, 1])
        );
    }

    #[test]
    fn absolute_target() {
        let r = TestSource::get("http://10.0.0.1:8080/x/y?z", &[]);
        assert_eq!(one("path", &r).unwrap(), "/x/y");
        assert_eq!(one("url_ip", &r).unwrap(), "10.0.0.1");
        assert_eq!(one("url_port", &r).unwrap(), "8080");
        assert_eq!(one("query", &r).unwrap(), "z");
    }

    #[test]
    fn acl_iteration_over_values() {
        let r = req();
        let f = Fetch::compile("hdr(x)", &names()).unwrap();
        let mut ev = Eval::new();
        let mut it = Iter::all();
        let mut got = vec![];
        while let Some(s) = f.fetch(&r, &mut ev, &mut it) {
            got.push(
                String::from_utf8_lossy(ev.get(match s {
                    Sample::Str(b) => b,
                    _ => unreachable!(),
                }))
                .into_owned(),
            );
        }
        assert_eq!(got, ["a", "b", "c"]);
    }

    /// The last value of the last header of the name ends an ACL's iteration: the next call
    /// does not look at the head again.
    #[test]
    fn the_last_value_ends_the_iteration() {
        let r = req();
        let mut it = Iter::all();
        let mut values = vec![];
        while let Some(v) = next_value(&r, false, Some(b"x"), false, &mut it) {
            values.push(v);
            assert_eq!(it.done, values.len() == 3, "{values:?}");
        }
        assert_eq!(values, [&b"a"[..], b"b", b"c"]);
        let mut it = Iter::all();
        let named = |it: &mut Iter| next_cookie(&r, false, Some(b"a"), it);
        assert_eq!(named(&mut it), Some(&b"1"[..]));
        assert_eq!(named(&mut it), Some(&b"3"[..]));
        assert_eq!(named(&mut it), None);
        let src = TestSource::get("/", &[("X", "a"), ("Y", "b"), ("x", "c")]);
        assert_eq!(
            src.req_header_named(0, b"x").map(|h| (h.idx, h.next)),
            Some((0, Some(2)))
        );
    }

    #[test]
    fn compile_errors_name_the_problem() {
        let n = names();
        let e = Fetch::compile("nbsrv(wbe)", &n).unwrap_err();
        assert!(e.message.contains("unable to find backend 'wbe'"), "{e}");
        assert!(e.message.contains("did you mean 'web'"), "{e}");
        let e = Fetch::compile("srv_is_up(web/s3)", &n).unwrap_err();
        assert!(e.message.contains("server 's3'"), "{e}");
        let e = Fetch::compile("pth", &n).unwrap_err();
        assert!(e.message.contains("unknown fetch method 'pth'"), "{e}");
        assert!(e.message.contains("did you mean 'path'"), "{e}");
        let e = Fetch::compile("req.hdr(x,abc)", &n).unwrap_err();
        assert!(e.message.contains("not an integer"), "{e}");
        let e = Fetch::compile("srv_conn", &n).unwrap_err();
        assert!(e.message.contains("at least 1"), "{e}");
        let e = Fetch::compile("var(foo)", &n).unwrap_err();
        assert!(e.message.contains("scope.name"), "{e}");
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;
    use crate::rules::{NameTable, TestSource};

    #[test]
    fn uuid_is_a_version_4_uuid() {
        let mut out = Vec::new();
        write_uuid4(&mut out, [u32::MAX; 4]);
        assert_eq!(out, b"ffffffff-ffff-4fff-bfff-ffffffffffff");
        out.clear();
        write_uuid4(&mut out, [0; 4]);
        assert_eq!(out, b"00000000-0000-4000-8000-000000000000");
        let names = NameTable::default();
        assert!(Fetch::compile("uuid(4)", &names).is_ok());
        let e = Fetch::compile("uuid(3)", &names).unwrap_err().message;
        assert!(e.contains("Unsupported UUID version: '3'"), "{e}");
    }

    #[test]
    fn identity_fetches_are_absent_without_a_stream() {
        let names = NameTable::default();
        let src = TestSource::default();
        let mut ev = Eval::new();
        for f in ["unique-id", "last_rule_file", "last_rule_line"] {
            let f = Fetch::compile(f, &names).unwrap();
            assert!(f.fetch(&src, &mut ev, &mut Iter::first()).is_none());
        }
    }

    #[test]
    fn payload_blocks() {
        let p = b"\x00\x03abcdef";
        assert_eq!(payload(p, 2, 3), Some(&b"abc"[..]));
        assert_eq!(payload(p, 5, 0), Some(&b"def"[..]));
        assert_eq!(payload(p, 6, 4), None);
        assert_eq!(payload(p, -1, 1), None);
        assert_eq!(payload_lv(p, 0, 2, None), Some(&b"abc"[..]));
        assert_eq!(payload_lv(p, 0, 2, Some(b"+1")), Some(&b"bcd"[..]));
        assert_eq!(payload_lv(p, 0, 2, Some(b"5")), Some(&b"def"[..]));
        assert_eq!(payload_lv(p, 0, 1, None), None);
        assert_eq!(payload_lv(p, 0, 5, None), None);
    }
}
