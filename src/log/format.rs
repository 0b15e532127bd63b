//! Log formats (`log-format`, `log-format-sd`, `unique-id-format`, and the formats `option
//! httplog`/`tcplog` stand for), compiled once at load into a list of tokens and rendered for
//! each logged session or transaction from a [`Record`] and the stream's [`Source`].
//!
//! Pure logic: no I/O, no clock. The syntax is HAProxy's (`doc/configuration.txt` §8.2.4):
//! `%name` or `%{+Q-X}name` variables, `%[fetch,conv...]` sample expressions, `%%` for a
//! percent sign, and runs of spaces that become one separator. A separator is written only
//! when something was written since the previous one, so a variable that prints nothing (`%hr`
//! without captures) leaves no double space behind.
//!
//! A `%[...]` is a rules-engine expression ([`Expr`]): any fetch and converter chain the
//! engine has, evaluated over the [`Source`] the session builds at log time. What a log line
//! may read is what HAProxy 2.6 lets it read ([`unavailable`]): at the end of a transaction
//! the request and response headers and bodies are gone (the method, the status, captures,
//! variables, addresses, proxy and server names remain); a `unique-id-format` reads the
//! request, before any response or server (the session computes it at its first use, where
//! HAProxy does: `session::facts::UniqueId`). As HAProxy writes them, a
//! sample in a log line is its text up to any NUL byte, `-` when absent or empty (`""` with
//! `+Q`), backslash-escaped with `+E` (`"`, `\`, `]`); `+X` does not change a sample. In a
//! `unique-id-format` an absent sample writes nothing and `+Q` does not apply.

use std::net::SocketAddr;

use super::record::{Record, MONTHS};
use crate::rules::fetch::{ArgKind, FetchDef, F};
use crate::rules::sample::to_bytes;
use crate::rules::{Eval, Expr, Names, Phases, Source};

/// A compiled format.
#[derive(Debug, Default)]
pub struct Format {
    tokens: Vec<Token>,
    uses: u64,
    ctx: Context,
    /// It shows something known only once the transaction is over (see [`Format::waits`]).
    waits: bool,
    /// `option logasap`: `%Tt`, `%Ta`, `%Tu` and `%B` are prefixed with `+` (HAProxy marks them
    /// so whether the line went out early or not).
    asap: bool,
}

#[derive(Debug)]
enum Token {
    Lit(String),
    Sep,
    Var(Var, Flags),
    /// `%[EXPR]`.
    Expr(Box<Expr>, Flags),
}

/// Variable flags: `+Q` quote strings, `+X` hexadecimal addresses and numbers, `+E` escape
/// `"`, `\\` and `]`, `-M` write nothing (not `-`) for an absent sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flags {
    quote: bool,
    hex: bool,
    escape: bool,
    mandatory: bool,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            quote: false,
            hex: false,
            escape: false,
            mandatory: true,
        }
    }
}

/// Where a format is used: what it may refer to, and how its samples are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Context {
    /// A log line (`log-format`, `log-format-sd`), written when the transaction is over:
    /// request headers are gone.
    #[default]
    Log,
    /// `unique-id-format`, computed while the request head is there.
    UniqueId,
}

/// What compiling a format needs to know about the proxy it belongs to.
pub struct Env<'a> {
    /// Backend, server, userlist names and variables, as the rules resolve them.
    pub names: &'a dyn Names,
    /// The proxy's name, for messages.
    pub proxy: &'a str,
    /// The proxy has a frontend side (a backend's `unique-id-format` may read the backend).
    pub has_frontend: bool,
    /// The proxy has a backend side (a backend-wide fetch without argument means it).
    pub has_backend: bool,
    /// The proxy is in HTTP mode.
    pub http: bool,
}

macro_rules! vars {
    ($($name:literal => $v:ident),* $(,)?) => {
        /// A `%` variable.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Var {
            $($v,)*
        }
        const NAMES: &[(&str, Var)] = &[$(($name, Var::$v),)*];
    };
}

vars! {
    "ci" => ClientIp, "cp" => ClientPort, "fi" => FrontendIp, "fp" => FrontendPort,
    "bi" => BackendIp, "bp" => BackendPort, "si" => ServerIp, "sp" => ServerPort,
    "t" => Date, "tr" => ReqDate, "trg" => ReqDateGmt, "trl" => ReqDateLocal,
    "T" => DateGmt, "Tl" => DateLocal, "Ts" => Timestamp, "ms" => Millis,
    "ft" => FrontendTransport, "f" => Frontend, "b" => Backend, "s" => Server,
    "TR" => TimeRequest, "Tw" => TimeQueue, "Tc" => TimeConnect, "Tr" => TimeResponse,
    "Ta" => TimeActive, "Th" => TimeHandshake, "Ti" => TimeIdle, "Tq" => TimeQ,
    "Tt" => TimeTotal, "Td" => TimeData, "Tu" => TimeUser,
    "ST" => Status, "B" => BytesOut, "U" => BytesIn, "CC" => CookieReq, "CS" => CookieRes,
    "ts" => Term, "tsc" => TermCookie, "ac" => ActConn, "fc" => FeConn, "bc" => BeConn,
    "sc" => SrvConn, "rc" => Retries, "sq" => SrvQueue, "bq" => BeQueue,
    "hr" => HdrReq, "hrl" => HdrReqList, "hs" => HdrRes, "hsl" => HdrResList,
    "r" => Request, "HM" => Method, "HU" => Uri, "HP" => Path, "HPO" => PathOnly,
    "HQ" => Query, "HV" => Version, "ID" => UniqueId, "pid" => Pid, "H" => Hostname,
    "rt" => ReqCounter, "lc" => LogCounter, "sslv" => SslVersion, "sslc" => SslCipher,
    // `%o`: only sets the flags of the variables after it.
    "o" => FlagsOnly,
}

/// The variables a TCP-mode proxy may not use (HAProxy 2.6's `PR_MODE_HTTP` ones).
const HTTP_ONLY: &[Var] = &[
    Var::CookieReq,
    Var::CookieRes,
    Var::TimeActive,
    Var::TimeIdle,
    Var::TimeQ,
    Var::TimeResponse,
    Var::TimeRequest,
    Var::Method,
    Var::Path,
    Var::PathOnly,
    Var::Query,
    Var::Uri,
    Var::Version,
    Var::Request,
    Var::ReqDate,
    Var::ReqDateGmt,
    Var::ReqDateLocal,
];

/// What a format needs from its caller beyond the always-known facts (each costs a system
/// call or a shared counter, so it is gathered only when used).
pub mod uses {
    pub const LOCAL_ADDR: u64 = 1;
    pub const SERVER_LOCAL: u64 = 2;
    pub const BE_CONN: u64 = 4;
    pub const REQ_COUNTER: u64 = 8;
    pub const LOG_COUNTER: u64 = 16;
    pub const UNIQUE_ID: u64 = 32;
}

/// Why a fetch cannot be used in a format of `ctx`: the data it needs, named as HAProxy 2.6
/// names it ("... because it needs 'HTTP request headers' which is not available here").
/// `None`: usable. Checked against `haproxy -c` for every fetch of the catalogue.
pub fn unavailable(def: &FetchDef, ctx: Context) -> Option<&'static str> {
    // What HAProxy reads from the request or response buffer (layer 6).
    let buffer = def.id.reads_l6();
    match ctx {
        Context::Log => {
            if buffer {
                return Some("request buffer");
            }
            // Kept for the log: the method and status, captures, the chosen backend and
            // server (and its connection's TLS facts), the unique id.
            let kept = matches!(
                def.id,
                F::SslBc
                    | F::SslBcProtocol
                    | F::SslBcCipher
                    | F::SslBcAlpn
                    | F::SslBcIsResumed
                    | F::SslBcKeysize
                    | F::SslSSDn
                    | F::SslSIDn
                    | F::SslSSerial
                    | F::SslSNotBefore
                    | F::SslSNotAfter
                    | F::SslSVersion
                    | F::SslSSha1
                    | F::SslSDer
                    | F::SslSSigAlg
                    | F::SslSKeyAlg
                    | F::SslSChainDer
                    | F::Method
                    | F::Status
                    | F::CaptureReqHdr
                    | F::CaptureResHdr
                    | F::BeName
                    | F::BeId
                    | F::SrvName
                    | F::SrvId
                    | F::ProtoHttp
                    | F::UniqueId
            );
            if kept || def.phases.contains(Phases::CONN) {
                None
            } else if def.phases.contains(Phases::REQ) {
                Some("HTTP request headers")
            } else {
                Some("HTTP response headers")
            }
        }
        Context::UniqueId => match def.id {
            F::BeName | F::BeId => Some("backend"),
            F::SrvName | F::SrvId => Some("server"),
            F::Status | F::CaptureResHdr => Some("HTTP response"),
            _ if def.phases.contains(Phases::REQ) => None,
            _ => Some("HTTP response headers"),
        },
    }
}

impl Format {
    /// Compiles `text` for use in `ctx`. The error names what is wrong; the warnings are
    /// HAProxy's (a layer-6 fetch in an HTTP `unique-id-format`).
    pub fn compile(
        text: &str,
        ctx: Context,
        env: &Env<'_>,
    ) -> Result<(Format, Vec<String>), String> {
        let mut tokens = Vec::new();
        let mut warnings = Vec::new();
        let mut lit = String::new();
        let mut defaults = Flags::default();
        let b = text.as_bytes();
        let mut i = 0;
        let flush = |lit: &mut String, tokens: &mut Vec<Token>| {
            if !lit.is_empty() {
                tokens.push(Token::Lit(std::mem::take(lit)));
            }
        };
        while i < b.len() {
            let c = b[i];
            if c == b' ' {
                flush(&mut lit, &mut tokens);
                if !matches!(tokens.last(), Some(Token::Sep)) {
                    tokens.push(Token::Sep);
                }
                i += 1;
                continue;
            }
            if c != b'%' {
                let start = i;
                while i < b.len() && b[i] != b'%' && b[i] != b' ' {
                    i += 1;
                }
                lit.push_str(&text[start..i]);
                continue;
            }
            i += 1;
            if b.get(i) == Some(&b'%') {
                lit.push('%');
                i += 1;
                continue;
            }
            let mut flags = defaults;
            if b.get(i) == Some(&b'{') {
                let end = text[i..]
                    .find('}')
                    .ok_or_else(|| format!("missing '}}' after '%{{' in '{text}'"))?;
                parse_flags(&text[i + 1..i + end], &mut flags, &mut warnings);
                i += end + 1;
            }
            if b.get(i) == Some(&b'[') {
                let end = crate::rules::lf::closing_bracket(&b[i..])
                    .ok_or_else(|| format!("missing ']' after '%[' in '{text}'"))?;
                let inner = &text[i + 1..i + end];
                let expr = compile_expr(inner, ctx, env, &mut warnings)?;
                i += end + 1;
                flush(&mut lit, &mut tokens);
                tokens.push(Token::Expr(Box::new(expr), flags));
                continue;
            }
            let start = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let name = &text[start..i];
            if name.is_empty() {
                return Err(format!(
                    "a variable name is expected after '%' in '{text}' (write '%%' for a percent sign)"
                ));
            }
            let Some((_, var)) = NAMES.iter().find(|(n, _)| *n == name) else {
                return Err(format!("no such format variable '%{name}'"));
            };
            if !env.http && HTTP_ONLY.contains(var) {
                return Err(format!(
                    "format variable '{name}' is reserved for HTTP mode"
                ));
            }
            flush(&mut lit, &mut tokens);
            if *var == Var::FlagsOnly {
                defaults = flags;
                continue;
            }
            tokens.push(Token::Var(*var, flags));
        }
        flush(&mut lit, &mut tokens);
        let mut uses = 0;
        for t in &tokens {
            uses |= match t {
                Token::Var(Var::FrontendIp | Var::FrontendPort, _) => uses::LOCAL_ADDR,
                Token::Var(Var::BackendIp | Var::BackendPort, _) => uses::SERVER_LOCAL,
                Token::Var(Var::BeConn, _) => uses::BE_CONN,
                Token::Var(Var::ReqCounter, _) => uses::REQ_COUNTER,
                Token::Var(Var::LogCounter, _) => uses::LOG_COUNTER,
                Token::Var(Var::UniqueId, _) => uses::UNIQUE_ID,
                Token::Expr(e, _) if matches!(e.fetch.def.id, F::Dst | F::DstPort) => {
                    uses::LOCAL_ADDR
                }
                _ => 0,
            };
        }
        // The variables HAProxy waits for the end of the transaction to log (its `LW_BYTES`
        // and `LW_RESP`): timers, byte counts, status, termination state, counters, queues.
        let waits = tokens.iter().any(|t| {
            use Var::*;
            matches!(
                t,
                Token::Var(
                    BytesOut
                        | BytesIn
                        | UniqueId
                        | Status
                        | TimeActive
                        | TimeConnect
                        | TimeData
                        | TimeHandshake
                        | TimeIdle
                        | TimeQ
                        | TimeResponse
                        | TimeRequest
                        | TimeTotal
                        | TimeUser
                        | TimeQueue
                        | ActConn
                        | BeConn
                        | BeQueue
                        | FeConn
                        | Retries
                        | SrvConn
                        | SrvQueue
                        | Term,
                    _
                )
            )
        });
        Ok((
            Format {
                tokens,
                uses,
                ctx,
                waits,
                asap: false,
            },
            warnings,
        ))
    }

    /// Marks the format of a proxy with `option logasap` (see [`Format`]'s `asap`).
    pub fn set_asap(&mut self) {
        self.asap = true;
    }

    /// Whether the format shows something known only once the transaction is over. HAProxy
    /// writes a line that needs none of it as soon as the response head has gone out, while
    /// the server's response is still in its buffer: only then does its `%[status]` have a
    /// value (the status the server sent, after `http-response` rules; none for a response
    /// HAProxy made itself). Bascule writes every line at the end and reproduces that.
    pub fn waits(&self) -> bool {
        self.waits
    }

    /// Whether the format needs what [`uses`] names.
    pub fn uses(&self, what: u64) -> bool {
        self.uses & what != 0
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Appends the line for `rec` to `out`; `%[...]` samples are read from `src`, with `ev`
    /// as the evaluations' scratch space.
    pub fn render(&self, rec: &Record<'_>, src: &dyn Source, ev: &mut Eval, out: &mut Vec<u8>) {
        let mut last_sep = true;
        for t in &self.tokens {
            match t {
                Token::Lit(s) => {
                    out.extend_from_slice(s.as_bytes());
                    last_sep = false;
                }
                Token::Sep => {
                    if !last_sep {
                        out.push(b' ');
                        last_sep = true;
                    }
                }
                Token::Var(v, f) => {
                    let before = out.len();
                    match v {
                        // What the client connection is: `fe~` over TLS, as HAProxy writes it.
                        Var::FrontendTransport if src.ssl_fc() => {
                            if f.quote || f.escape {
                                let name = format!("{}~", rec.frontend);
                                text(out, name.as_bytes(), *f, plain);
                            } else {
                                out.extend_from_slice(rec.frontend.as_bytes());
                                out.push(b'~');
                            }
                        }
                        Var::SslVersion => {
                            let ssl = src.ssl();
                            opt_text(out, ssl.map(|s| s.version.as_bytes()), *f, plain)
                        }
                        Var::SslCipher => {
                            let ssl = src.ssl();
                            opt_text(out, ssl.map(|s| s.cipher.as_bytes()), *f, plain)
                        }
                        Var::TimeTotal | Var::TimeActive | Var::TimeUser | Var::BytesOut
                            if self.asap =>
                        {
                            out.push(b'+');
                            render_var(*v, *f, rec, out)
                        }
                        _ => render_var(*v, *f, rec, out),
                    }
                    if out.len() != before {
                        last_sep = false;
                    }
                }
                Token::Expr(e, f) => {
                    let before = out.len();
                    self.sample(e, *f, src, ev, out);
                    if out.len() != before {
                        last_sep = false;
                    }
                }
            }
        }
    }

    /// Writes the value of `%[EXPR]` as HAProxy does (see the module doc).
    fn sample(&self, e: &Expr, f: Flags, src: &dyn Source, ev: &mut Eval, out: &mut Vec<u8>) {
        let v = e.eval(src, ev).and_then(|s| to_bytes(s, ev));
        let v = v.map(|b| {
            let v = ev.get(b);
            // HAProxy copies C strings: a NUL byte ends the value.
            &v[..v.iter().position(|&c| c == 0).unwrap_or(v.len())]
        });
        let v = v.filter(|v| !v.is_empty());
        let quote = f.quote && self.ctx == Context::Log;
        match v {
            Some(v) => {
                if quote {
                    out.push(b'"');
                }
                if f.escape {
                    for &c in v {
                        if matches!(c, b'"' | b'\\' | b']') {
                            out.push(b'\\');
                        }
                        out.push(c);
                    }
                } else {
                    out.extend_from_slice(v);
                }
                if quote {
                    out.push(b'"');
                }
            }
            None if self.ctx == Context::UniqueId => {}
            None if quote => out.extend_from_slice(b"\"\""),
            None if !f.mandatory => {}
            None => out.push(b'-'),
        }
    }
}

/// Compiles the `EXPR` of a `%[EXPR]` and checks that what it reads exists where the format
/// is used.
fn compile_expr(
    inner: &str,
    ctx: Context,
    env: &Env<'_>,
    warnings: &mut Vec<String>,
) -> Result<Expr, String> {
    let expr = Expr::compile(inner, env.names).map_err(|e| {
        format!(
            "failed to parse sample expression <{inner}> : {}",
            e.message
        )
    })?;
    let def = expr.fetch.def;
    // A backend's `unique-id-format` is checked where its request rules run: the backend is
    // known there.
    let what = unavailable(def, ctx).filter(|w| env.has_frontend || *w != "backend");
    if let Some(what) = what {
        let hint = if what == "HTTP request headers" && ctx == Context::Log {
            " (capture the header with 'capture request header' and use %hr)"
        } else {
            ""
        };
        return Err(format!(
            "sample fetch <{inner}> may not be reliably used here because it needs '{what}' which is not available here{hint}"
        ));
    }
    // `nbsrv`, `be_conn`, `queue`... without a backend name mean the proxy's own backend.
    if !env.has_backend
        && def.args.first() == Some(&ArgKind::Backend)
        && expr.fetch.args.first().is_some_and(Option::is_none)
    {
        let kind = match ctx {
            Context::Log => "log-format",
            Context::UniqueId => "unique-id-format",
        };
        return Err(format!(
            "proxy '{p}', referenced in arg 1 of sample fetch keyword '{}' in {kind} string in proxy '{p}', has not backend capability",
            def.name,
            p = env.proxy
        ));
    }
    if ctx == Context::UniqueId && env.http && def.id.reads_l6() {
        warnings.push(format!(
            "L6 sample fetch <{inner}> ignored in HTTP log-format string"
        ));
    }
    Ok(expr)
}

/// Reads `+FLAG`/`-FLAG` words separated by commas. As HAProxy 2.6 does, a word it does not
/// know is ignored (with a warning here).
fn parse_flags(s: &str, flags: &mut Flags, warnings: &mut Vec<String>) {
    for word in s.split(',').filter(|w| !w.is_empty()) {
        let (on, name) = match word.as_bytes()[0] {
            b'+' => (true, &word[1..]),
            b'-' => (false, &word[1..]),
            _ => (false, word),
        };
        let sign = matches!(word.as_bytes()[0], b'+' | b'-');
        match (sign, name) {
            (true, "Q") => flags.quote = on,
            (true, "X") => flags.hex = on,
            (true, "E") => flags.escape = on,
            (true, "M") => flags.mandatory = on,
            _ => warnings.push(format!(
                "format flag '{word}' in '%{{{s}}}' is ignored (flags are +Q, +X, +E, +M or their - forms)"
            )),
        }
    }
}

/// Bytes that HAProxy writes as `#XX` in request lines.
fn url_escaped(c: u8) -> bool {
    !(32..127).contains(&c) || c == b'"' || c == b'#'
}

/// Bytes that HAProxy writes as `#XX` in captured headers.
fn hdr_escaped(c: u8) -> bool {
    url_escaped(c) || matches!(c, b'{' | b'|' | b'}')
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Writes `s`: encoded by `enc` (`#XX`), backslash-escaped with `+E`, quoted with `+Q`.
fn text(out: &mut Vec<u8>, s: &[u8], f: Flags, enc: impl Fn(u8) -> bool) {
    if !f.quote && !f.escape && !s.iter().any(|&c| enc(c)) {
        // Nearly always: nothing to encode, one copy.
        out.extend_from_slice(s);
        return;
    }
    if f.quote {
        out.push(b'"');
    }
    for &c in s {
        if enc(c) {
            out.extend_from_slice(&[b'#', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        } else if f.escape && matches!(c, b'"' | b'\\' | b']') {
            out.extend_from_slice(&[b'\\', c]);
        } else {
            out.push(c);
        }
    }
    if f.quote {
        out.push(b'"');
    }
}

fn plain(_: u8) -> bool {
    false
}

/// A string value; absent shows as `-` (`""` when quoted).
fn opt_text(out: &mut Vec<u8>, s: Option<&[u8]>, f: Flags, enc: impl Fn(u8) -> bool) {
    match s {
        Some(s) if !s.is_empty() => text(out, s, f, enc),
        _ if f.quote => out.extend_from_slice(b"\"\""),
        _ => out.push(b'-'),
    }
}

pub(crate) fn num(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    let v = n.unsigned_abs();
    // Timers, counters and statuses are mostly short: their digits go out without a loop.
    if v < 10 {
        out.push(b'0' + v as u8);
        return;
    }
    if v < 100 {
        out.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8]);
        return;
    }
    if v < 1000 {
        three(out, v as u32);
        return;
    }
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// `n` in three digits, zero-padded (milliseconds).
pub(crate) fn three(out: &mut Vec<u8>, n: u32) {
    let n = n % 1000;
    out.extend_from_slice(&[
        b'0' + (n / 100) as u8,
        b'0' + (n / 10 % 10) as u8,
        b'0' + (n % 10) as u8,
    ]);
}

/// `n` in upper-case hexadecimal, zero-padded to `width` digits.
fn hex(out: &mut Vec<u8>, n: u64, width: usize) {
    let digits = (64 - n.leading_zeros() as usize)
        .div_ceil(4)
        .clamp(width.max(1), 16);
    for i in (0..digits).rev() {
        out.push(HEX[((n >> (4 * i)) & 15) as usize]);
    }
}

/// The address of a UNIX socket's end, as HAProxy logs it.
fn unix_word(out: &mut Vec<u8>, f: Flags) {
    if f.quote {
        out.extend_from_slice(b"\"unix\"");
    } else {
        out.extend_from_slice(b"unix");
    }
}

fn ip(out: &mut Vec<u8>, a: Option<SocketAddr>, f: Flags) {
    match a {
        None => out.push(b'-'),
        Some(a) if f.hex => match a.ip() {
            std::net::IpAddr::V4(v4) => hex(out, u64::from(u32::from(v4)), 8),
            std::net::IpAddr::V6(v6) => {
                for seg in v6.segments() {
                    hex(out, u64::from(seg), 4);
                }
            }
        },
        Some(a) => {
            if f.quote {
                out.push(b'"');
            }
            match a.ip() {
                // Written digit by digit: no formatter, no allocation.
                std::net::IpAddr::V4(v4) => {
                    for (i, o) in v4.octets().into_iter().enumerate() {
                        if i > 0 {
                            out.push(b'.');
                        }
                        num(out, i64::from(o));
                    }
                }
                std::net::IpAddr::V6(v6) => {
                    let _ = std::io::Write::write_fmt(out, format_args!("{v6}"));
                }
            }
            if f.quote {
                out.push(b'"');
            }
        }
    }
}

fn port(out: &mut Vec<u8>, a: Option<SocketAddr>, f: Flags) {
    match a {
        None => out.push(b'-'),
        Some(a) if f.hex => hex(out, u64::from(a.port()), 4),
        Some(a) => num(out, i64::from(a.port())),
    }
}

/// A date for a format variable of an action value: `%t` (local, with milliseconds), `%T`
/// (`gmt`: GMT with its offset) or `%Tl` (local with its offset).
pub fn write_date(out: &mut Vec<u8>, unix_us: i64, gmt: bool, local_offset: bool) {
    if gmt {
        date(out, unix_us, false, false, true);
    } else if local_offset {
        date(out, unix_us, true, false, true);
    } else {
        date(out, unix_us, true, true, false);
    }
}

/// `dd/Mmm/yyyy:HH:MM:SS` then `.mmm` (ms) or ` +hhmm` (offset) as asked.
fn date(out: &mut Vec<u8>, unix_us: i64, local: bool, millis: bool, offset: bool) {
    let secs = unix_us.div_euclid(1_000_000);
    let tm = super::record::broken_down(secs, local);
    let two = |out: &mut Vec<u8>, v: u32| {
        out.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8])
    };
    two(out, tm.day);
    out.push(b'/');
    out.extend_from_slice(MONTHS[tm.month as usize].as_bytes());
    out.push(b'/');
    num(out, i64::from(tm.year));
    out.push(b':');
    two(out, tm.hour);
    out.push(b':');
    two(out, tm.min);
    out.push(b':');
    two(out, tm.sec);
    if millis {
        let ms = (unix_us.rem_euclid(1_000_000) / 1000) as u32;
        out.extend_from_slice(&[b'.', b'0' + (ms / 100) as u8]);
        two(out, ms % 100);
    }
    if offset {
        let off = tm.gmtoff;
        out.extend_from_slice(if off < 0 { b" -" } else { b" +" });
        let m = (off.unsigned_abs() / 60) as u32;
        two(out, m / 60);
        two(out, m % 60);
    }
}

fn captures(out: &mut Vec<u8>, rec: &Record<'_>, response: bool, list: bool, f: Flags) {
    let caps = rec.captures;
    let n = caps.count(response);
    if n == 0 {
        return;
    }
    if !list {
        if f.quote {
            out.push(b'"');
        }
        out.push(b'{');
    }
    for k in 0..n {
        let v = caps.get(response, k);
        if list {
            if k > 0 {
                out.push(b' ');
            }
            opt_text(out, v, f, hdr_escaped);
        } else {
            if k > 0 {
                out.push(b'|');
            }
            if let Some(v) = v {
                text(out, v, Flags { quote: false, ..f }, hdr_escaped);
            }
        }
    }
    if !list {
        out.push(b'}');
        if f.quote {
            out.push(b'"');
        }
    }
}

/// The request line split as `METHOD TARGET VERSION`.
fn request_parts(line: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let mut it = line.splitn(3, |&c| c == b' ');
    let m = it.next().unwrap_or(b"");
    let u = it.next().unwrap_or(b"");
    let v = it.next().unwrap_or(b"");
    (m, u, v)
}

fn render_var(v: Var, f: Flags, rec: &Record<'_>, out: &mut Vec<u8>) {
    let t = &rec.times;
    match v {
        // A UNIX socket's end shows as HAProxy shows it: `unix`, and the listener's id or 0
        // as its port.
        Var::ClientIp => match (rec.client, rec.unix.listener) {
            (None, Some(_)) => unix_word(out, f),
            (client, _) => ip(out, client, f),
        },
        Var::FrontendIp => match rec.unix.listener {
            Some(_) => unix_word(out, f),
            None => ip(out, rec.local, f),
        },
        Var::ClientPort => match (rec.client, rec.unix.listener) {
            (None, Some(id)) => num(out, i64::from(id)),
            (client, _) => port(out, client, f),
        },
        Var::FrontendPort => match rec.unix.listener {
            Some(id) => num(out, i64::from(id)),
            None => port(out, rec.local, f),
        },
        Var::BackendIp | Var::ServerIp if rec.unix.server => unix_word(out, f),
        Var::BackendPort | Var::ServerPort if rec.unix.server => num(out, 0),
        Var::BackendIp => ip(out, rec.server_local, f),
        Var::BackendPort => port(out, rec.server_local, f),
        Var::ServerIp => ip(out, rec.server_addr, f),
        Var::ServerPort => port(out, rec.server_addr, f),
        Var::Date => date(out, t.accept_us, true, true, false),
        Var::ReqDate => date(out, t.request_us, true, true, false),
        Var::ReqDateGmt => date(out, t.request_us, false, false, true),
        Var::ReqDateLocal => date(out, t.request_us, true, false, true),
        Var::DateGmt => date(out, t.accept_us, false, false, true),
        Var::DateLocal => date(out, t.accept_us, true, false, true),
        Var::Timestamp => {
            let s = t.accept_us.div_euclid(1_000_000);
            if f.hex {
                hex(out, s as u64, 8)
            } else {
                num(out, s)
            }
        }
        Var::Millis => {
            let ms = t.accept_us.rem_euclid(1_000_000) / 1000;
            three(out, ms as u32);
        }
        Var::FrontendTransport | Var::Frontend => text(out, rec.frontend.as_bytes(), f, plain),
        Var::Backend => text(
            out,
            rec.backend.unwrap_or(rec.frontend).as_bytes(),
            f,
            plain,
        ),
        Var::Server => text(out, rec.server.unwrap_or("<NOSRV>").as_bytes(), f, plain),
        Var::TimeRequest => num(out, t.treq),
        Var::TimeQueue => num(out, t.tw),
        Var::TimeConnect => num(out, t.tc),
        Var::TimeResponse => num(out, t.tr),
        Var::TimeActive => num(out, t.ta),
        Var::TimeHandshake => num(out, t.th),
        Var::TimeIdle => num(out, t.ti),
        Var::TimeQ => num(out, t.tq()),
        Var::TimeTotal => num(out, t.tt),
        Var::TimeData => num(out, t.td),
        Var::TimeUser => num(out, t.tu()),
        Var::Status => num(out, rec.status.map_or(-1, i64::from)),
        Var::BytesOut => num(out, rec.bytes_out as i64),
        Var::BytesIn => num(out, rec.bytes_in as i64),
        Var::CookieReq => opt_text(out, rec.cookie_req, f, plain),
        Var::CookieRes => opt_text(out, rec.cookie_res, f, plain),
        Var::Term => out.extend_from_slice(&rec.term),
        Var::TermCookie => {
            out.extend_from_slice(&rec.term);
            out.extend_from_slice(&rec.cookie_state);
        }
        Var::ActConn => num(out, i64::from(rec.counters.actconn)),
        Var::FeConn => num(out, i64::from(rec.counters.feconn)),
        Var::BeConn => num(out, i64::from(rec.counters.beconn)),
        Var::SrvConn => num(out, i64::from(rec.counters.srvconn)),
        Var::Retries => {
            if rec.counters.redispatched {
                out.push(b'+');
            }
            num(out, i64::from(rec.counters.retries))
        }
        Var::SrvQueue => num(out, i64::from(rec.counters.srv_queue)),
        Var::BeQueue => num(out, i64::from(rec.counters.be_queue)),
        Var::HdrReq => captures(out, rec, false, false, f),
        Var::HdrReqList => captures(out, rec, false, true, f),
        Var::HdrRes => captures(out, rec, true, false, f),
        Var::HdrResList => captures(out, rec, true, true, f),
        Var::Request => match rec.request {
            Some(r) => text(out, r, f, url_escaped),
            None => text(out, b"<BADREQ>", f, plain),
        },
        Var::Method | Var::Uri | Var::Path | Var::PathOnly | Var::Query | Var::Version => {
            // No request line (a bad or missing request, a TCP stream): HAProxy writes
            // `<BADREQ>` for each of them too.
            let Some(line) = rec.request else {
                return text(out, b"<BADREQ>", f, plain);
            };
            let (m, u, ver) = request_parts(line);
            let path = u.split(|&c| c == b'?').next().unwrap_or(b"");
            let value: &[u8] = match v {
                Var::Method => m,
                Var::Uri => u,
                Var::Path => path,
                Var::PathOnly => {
                    // Without scheme and authority.
                    match path.windows(3).position(|w| w == b"://") {
                        Some(p) => {
                            let rest = &path[p + 3..];
                            let slash = rest.iter().position(|&c| c == b'/').unwrap_or(rest.len());
                            &rest[slash..]
                        }
                        None => path,
                    }
                }
                Var::Query => match u.iter().position(|&c| c == b'?') {
                    Some(q) => &u[q..],
                    // HAProxy writes nothing (not '-') for a request without a query.
                    None => return text(out, b"", f, url_escaped),
                },
                _ => ver,
            };
            opt_text(out, Some(value), f, url_escaped)
        }
        Var::UniqueId => opt_text(out, rec.unique_id, f, plain),
        // Read from the stream's TLS state by `Format::render`; none here.
        Var::SslVersion | Var::SslCipher => opt_text(out, None, f, plain),
        Var::Pid => {
            if f.hex {
                hex(out, u64::from(std::process::id()), 4)
            } else {
                num(out, i64::from(std::process::id()))
            }
        }
        Var::Hostname => text(out, rec.hostname.as_bytes(), f, plain),
        Var::ReqCounter => {
            if f.hex {
                hex(out, rec.req_counter, 4)
            } else {
                num(out, rec.req_counter as i64)
            }
        }
        Var::LogCounter => num(out, rec.log_counter as i64),
        Var::FlagsOnly => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{HTTPLOG_CLF_FORMAT, HTTPLOG_FORMAT, TCPLOG_FORMAT};

    #[test]
    fn numbers_as_formatting_would_write_them() {
        for (n, width) in [
            (0u64, 4usize),
            (0x1f, 4),
            (0x7f000001, 8),
            (0x12345, 4),
            (u64::MAX, 8),
        ] {
            let mut out = Vec::new();
            hex(&mut out, n, width);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{n:0width$X}"));
        }
        for n in [0u32, 7, 42, 999] {
            let mut out = Vec::new();
            three(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{n:03}"));
        }
        for a in ["127.0.0.1:1", "[::1]:2", "10.200.3.255:3"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut out = Vec::new();
            ip(&mut out, Some(a), Flags::default());
            assert_eq!(String::from_utf8(out).unwrap(), a.ip().to_string());
        }
    }

    fn env(names: &crate::rules::NameTable) -> Env<'_> {
        Env {
            names,
            proxy: "fe",
            has_frontend: true,
            has_backend: false,
            http: true,
        }
    }

    fn compile(text: &str, ctx: Context) -> Result<Format, String> {
        let names = crate::rules::NameTable::default();
        Format::compile(text, ctx, &env(&names)).map(|(f, _)| f)
    }

    fn render(f: &Format, src: &crate::rules::TestSource) -> String {
        let caps = super::super::record::Captured::default();
        let rec = Record::test(&caps);
        let mut out = Vec::new();
        f.render(&rec, src, &mut Eval::new(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn default_formats_compile() {
        for f in [TCPLOG_FORMAT, HTTPLOG_FORMAT, HTTPLOG_CLF_FORMAT] {
            compile(f, Context::Log).unwrap();
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let e = compile("%foo", Context::Log).unwrap_err();
        assert!(e.contains("%foo"), "{e}");
        let e = compile("%[req.hdr(host)]", Context::Log).unwrap_err();
        assert!(e.contains("'HTTP request headers'"), "{e}");
        let e = compile("%[res.hdr(x)]", Context::Log).unwrap_err();
        assert!(e.contains("'HTTP response headers'"), "{e}");
        let e = compile("%[req.len]", Context::Log).unwrap_err();
        assert!(e.contains("'request buffer'"), "{e}");
        assert!(compile("%[req.hdr(host),lower]", Context::UniqueId).is_ok());
        let e = compile("%[be_name]", Context::UniqueId).unwrap_err();
        assert!(e.contains("'backend'"), "{e}");
        let e = compile("%[status]", Context::UniqueId).unwrap_err();
        assert!(e.contains("'HTTP response'"), "{e}");
        let e = compile("%[nosuch]", Context::Log).unwrap_err();
        assert!(e.contains("unknown fetch method 'nosuch'"), "{e}");
        assert!(compile("%[var(txn.x)]", Context::UniqueId).is_ok());
        let names = crate::rules::NameTable::default();
        let tcp = Env {
            http: false,
            ..env(&names)
        };
        let e = Format::compile("%r", Context::Log, &tcp).unwrap_err();
        assert_eq!(e, "format variable 'r' is reserved for HTTP mode");
        assert!(Format::compile(TCPLOG_FORMAT, Context::Log, &tcp).is_ok());
        assert!(Format::compile("%ID %ST %[method]", Context::Log, &tcp).is_ok());
        let e = compile("%[nbsrv]", Context::Log).unwrap_err();
        assert!(e.contains("has not backend capability"), "{e}");
        let names = crate::rules::NameTable::default();
        let (_, w) = Format::compile("%{+Z}r %{Q}r", Context::Log, &env(&names)).unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        // What a log line may read, as haproxy 2.6 -c says.
        for ok in [
            "%[src,ipmask(24)]",
            "%[var(txn.x),lower,base64]",
            "%[method] %[status] %[capture.req.hdr(0)] %[capture.res.hdr(0)]",
            "%[be_name] %[srv_name] %[uuid] %[unique-id] %[fe_name,upper]",
        ] {
            compile(ok, Context::Log).unwrap();
        }
    }

    #[test]
    fn samples_print_as_haproxy_prints_them() {
        let mut src = crate::rules::TestSource::get("/", &[("x-foo", "He\"l]l\\o")]);
        src.method = Some(b"GET".to_vec());
        src.status = Some(200);
        let f = compile(
            "a=%[src] b=%{+Q}[src] d=%[str()] e=%{+Q}[str()] f=%[method] h=%{+X}[status] \
             n=%[bin(4100)] o=%[bin(0041)] q=%{+Q}[int(3)] v=%{+E}[str(x)] %[int(-5)] \
             m=%{-M}[str()] mq=%{+Q,-M}[str()]",
            Context::Log,
        )
        .unwrap();
        assert_eq!(
            render(&f, &src),
            "a=127.0.0.1 b=\"127.0.0.1\" d=- e=\"\" f=GET h=200 n=A o=- q=\"3\" v=x -5 m= mq=\"\""
        );
        let f = compile(
            "%[req.hdr(x-foo)]-%{+E}[req.hdr(x-foo)]-%{+Q}[str()]-%{+Q}[src]",
            Context::UniqueId,
        )
        .unwrap();
        assert_eq!(render(&f, &src), "He\"l]l\\o-He\\\"l\\]l\\\\o--127.0.0.1");
    }

    #[test]
    fn separators_collapse_after_empty_variables() {
        let f = compile("a  %hr %hs %{+Q}r %%", Context::Log).unwrap();
        assert_eq!(
            render(&f, &crate::rules::TestSource::default()),
            "a \"GET /a?b HTTP/1.1\" %"
        );
    }

    #[test]
    fn request_parts_and_flags() {
        let f = compile(
            "%HM %HU %HP %HQ %HV %{+X}ci:%{+X}cp %{+Q}b %{+Q}o %s %ST %CC",
            Context::Log,
        )
        .unwrap();
        assert_eq!(
            render(&f, &crate::rules::TestSource::default()),
            "GET /a?b /a ?b HTTP/1.1 7F000001:929C \"be\" \"<NOSRV>\" 200 \"\""
        );
    }

    #[test]
    fn unix_socket_ends_show_as_haproxy_shows_them() {
        let caps = super::super::record::Captured::default();
        let f = compile("%ci:%cp %fi:%fp %si:%sp %bi:%bp %{+Q}ci", Context::Log).unwrap();
        let mut rec = Record::test(&caps);
        rec.client = None;
        rec.unix = super::super::record::UnixEnds {
            listener: Some(3),
            server: true,
        };
        let src = crate::rules::TestSource::default();
        let mut out = Vec::new();
        f.render(&rec, &src, &mut Eval::new(), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "unix:3 unix:3 unix:0 unix:0 \"unix\""
        );
        // A rule gave the client an address (`set-src`): it shows; the listener side stays.
        rec.client = Some("10.0.0.1:0".parse().unwrap());
        rec.unix.server = false;
        let mut out = Vec::new();
        f.render(&rec, &src, &mut Eval::new(), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "10.0.0.1:0 unix:3 -:- -:- \"10.0.0.1\""
        );
    }
}
