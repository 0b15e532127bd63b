//! Log formats (`log-format`, `log-format-sd`, `unique-id-format`, and the formats `option
//! httplog`/`tcplog` stand for), compiled once at load into a list of tokens and rendered for
//! each logged session or transaction from a [`Record`].
//!
//! Pure logic: no I/O, no clock. The syntax is HAProxy's (`doc/configuration.txt` §8.2.4):
//! `%name` or `%{+Q-X}name` variables, `%[fetch]` samples, `%%` for a percent sign, and runs of
//! spaces that become one separator. A separator is written only when something was written
//! since the previous one, so a variable that prints nothing (`%hr` without captures) leaves no
//! double space behind.

use std::net::SocketAddr;

use super::record::{Record, MONTHS};

/// A compiled format.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Format {
    tokens: Vec<Token>,
    uses: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Lit(String),
    Sep,
    Var(Var, Flags),
}

/// Variable flags: `+Q` quote strings, `+X` hexadecimal addresses and numbers, `+E` escape
/// `"`, `\` and `]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Flags {
    quote: bool,
    hex: bool,
    escape: bool,
}

/// Where a format is used: what it may refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A log line, written when the transaction is over: request headers are gone.
    Log,
    /// `unique-id-format`, computed when the request head is there.
    UniqueId,
}

/// The sample fetches a format may use (`%[...]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    Src,
    Dst,
    SrcPort,
    DstPort,
    FeName,
    BeName,
    /// `req.hdr(NAME)`: the last occurrence of a request header (`unique-id-format` only).
    ReqHdr(String),
}

macro_rules! vars {
    ($($name:literal => $v:ident),* $(,)?) => {
        /// A `%` variable.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Var {
            $($v,)*
            Fetch(Fetch),
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
    "rt" => ReqCounter, "lc" => LogCounter,
    // `%o`: only sets the flags of the variables after it.
    "o" => FlagsOnly,
}

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

impl Format {
    /// Compiles `text` for use in `ctx`. The error names what is wrong.
    pub fn compile(text: &str, ctx: Context) -> Result<Format, String> {
        let mut tokens = Vec::new();
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
                if tokens.last() != Some(&Token::Sep) {
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
                parse_flags(&text[i + 1..i + end], &mut flags)?;
                i += end + 1;
            }
            if b.get(i) == Some(&b'[') {
                let end = text[i..]
                    .find(']')
                    .ok_or_else(|| format!("missing ']' after '%[' in '{text}'"))?;
                let fetch = parse_fetch(&text[i + 1..i + end], ctx)?;
                i += end + 1;
                flush(&mut lit, &mut tokens);
                tokens.push(Token::Var(Var::Fetch(fetch), flags));
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
            flush(&mut lit, &mut tokens);
            if *var == Var::FlagsOnly {
                defaults = flags;
                continue;
            }
            tokens.push(Token::Var(var.clone(), flags));
        }
        flush(&mut lit, &mut tokens);
        let mut uses = 0;
        for t in &tokens {
            if let Token::Var(v, _) = t {
                uses |= match v {
                    Var::FrontendIp
                    | Var::FrontendPort
                    | Var::Fetch(Fetch::Dst | Fetch::DstPort) => uses::LOCAL_ADDR,
                    Var::BackendIp | Var::BackendPort => uses::SERVER_LOCAL,
                    Var::BeConn => uses::BE_CONN,
                    Var::ReqCounter => uses::REQ_COUNTER,
                    Var::LogCounter => uses::LOG_COUNTER,
                    Var::UniqueId => uses::UNIQUE_ID,
                    _ => 0,
                };
            }
        }
        Ok(Format { tokens, uses })
    }

    /// Whether the format needs what [`uses`] names.
    pub fn uses(&self, what: u64) -> bool {
        self.uses & what != 0
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Appends the line for `rec` to `out`.
    pub fn render(&self, rec: &Record<'_>, out: &mut Vec<u8>) {
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
                    render_var(v, *f, rec, out);
                    if out.len() != before {
                        last_sep = false;
                    }
                }
            }
        }
    }
}

fn parse_flags(s: &str, flags: &mut Flags) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let on = match b[i] {
            b'+' => true,
            b'-' => false,
            b',' => {
                i += 1;
                continue;
            }
            _ => {
                return Err(format!(
                    "bad format flags '{{{s}}}': expected +FLAG or -FLAG"
                ))
            }
        };
        let start = i + 1;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_alphanumeric() {
            end += 1;
        }
        match &s[start..end] {
            "Q" => flags.quote = on,
            "X" => flags.hex = on,
            "E" => flags.escape = on,
            other => return Err(format!("unknown format flag '{other}' in '{{{s}}}'")),
        }
        i = end;
    }
    Ok(())
}

fn parse_fetch(s: &str, ctx: Context) -> Result<Fetch, String> {
    let mut parts = s.split(',');
    let fetch = parts.next().unwrap_or("").trim();
    if let Some(conv) = parts.next() {
        return Err(format!(
            "'%[{s}]': converter '{}' is not supported yet in formats",
            conv.split('(').next().unwrap_or(conv)
        ));
    }
    let (name, arg) = match fetch.split_once('(') {
        Some((n, rest)) => (
            n,
            Some(
                rest.strip_suffix(')')
                    .ok_or_else(|| format!("'%[{s}]': missing ')'"))?,
            ),
        ),
        None => (fetch, None),
    };
    let f = match (name, arg) {
        ("src", None) => Fetch::Src,
        ("dst", None) => Fetch::Dst,
        ("src_port", None) => Fetch::SrcPort,
        ("dst_port", None) => Fetch::DstPort,
        ("fe_name", None) => Fetch::FeName,
        ("be_name", None) => Fetch::BeName,
        ("req.hdr" | "hdr", Some(h)) if !h.is_empty() && !h.contains(',') => {
            if ctx == Context::Log {
                return Err(format!(
                    "sample fetch <{fetch}> may not be reliably used here because it needs 'HTTP request headers' which is not available here (capture the header with 'capture request header' and use %hr)"
                ));
            }
            Fetch::ReqHdr(h.to_ascii_lowercase())
        }
        _ => {
            return Err(format!(
                "'%[{s}]': sample fetch '{name}' is not supported yet in formats (supported: src, dst, src_port, dst_port, fe_name, be_name, req.hdr(NAME) in unique-id-format)"
            ))
        }
    };
    Ok(f)
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

fn render_var(v: &Var, f: Flags, rec: &Record<'_>, out: &mut Vec<u8>) {
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
        Var::FrontendTransport | Var::Frontend | Var::Fetch(Fetch::FeName) => {
            text(out, rec.frontend.as_bytes(), f, plain)
        }
        Var::Backend | Var::Fetch(Fetch::BeName) => text(
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
            let Some(line) = rec.request else {
                return opt_text(out, None, f, plain);
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
        Var::Fetch(Fetch::Src) => ip(out, rec.client, f),
        Var::Fetch(Fetch::Dst) => ip(out, rec.local, f),
        Var::Fetch(Fetch::SrcPort) => port(out, rec.client, f),
        Var::Fetch(Fetch::DstPort) => port(out, rec.local, f),
        Var::Fetch(Fetch::ReqHdr(name)) => {
            let v = rec.header.and_then(|h| h(name));
            opt_text(out, v, f, plain)
        }
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

    #[test]
    fn default_formats_compile() {
        for f in [TCPLOG_FORMAT, HTTPLOG_FORMAT, HTTPLOG_CLF_FORMAT] {
            Format::compile(f, Context::Log).unwrap();
        }
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Format::compile("%foo", Context::Log).unwrap_err();
        assert!(e.contains("%foo"), "{e}");
        let e = Format::compile("%[req.hdr(host)]", Context::Log).unwrap_err();
        assert!(e.contains("HTTP request headers"), "{e}");
        assert!(Format::compile("%[req.hdr(host)]", Context::UniqueId).is_ok());
        let e = Format::compile("%[src,ipmask(24)]", Context::Log).unwrap_err();
        assert!(e.contains("ipmask"), "{e}");
        let e = Format::compile("%[ssl_fc]", Context::Log).unwrap_err();
        assert!(e.contains("ssl_fc"), "{e}");
        assert!(Format::compile("%{+Z}r", Context::Log).is_err());
    }

    #[test]
    fn separators_collapse_after_empty_variables() {
        let f = Format::compile("a  %hr %hs %{+Q}r %%", Context::Log).unwrap();
        let caps = super::super::record::Captured::default();
        let rec = Record::test(&caps);
        let mut out = Vec::new();
        f.render(&rec, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "a \"GET /a?b HTTP/1.1\" %");
    }

    #[test]
    fn request_parts_and_flags() {
        let caps = super::super::record::Captured::default();
        let rec = Record::test(&caps);
        let f = Format::compile(
            "%HM %HU %HP %HQ %HV %{+X}ci:%{+X}cp %{+Q}b %{+Q}o %s %ST %CC",
            Context::Log,
        )
        .unwrap();
        let mut out = Vec::new();
        f.render(&rec, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a?b /a ?b HTTP/1.1 7F000001:929C \"be\" \"<NOSRV>\" 200 \"\""
        );
    }

    #[test]
    fn unix_socket_ends_show_as_haproxy_shows_them() {
        let caps = super::super::record::Captured::default();
        let f = Format::compile(
            "%ci:%cp %fi:%fp %si:%sp %bi:%bp %[src] %[dst] %{+Q}ci",
            Context::Log,
        )
        .unwrap();
        let mut rec = Record::test(&caps);
        rec.client = None;
        rec.unix = super::super::record::UnixEnds {
            listener: Some(3),
            server: true,
        };
        let mut out = Vec::new();
        f.render(&rec, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "unix:3 unix:3 unix:0 unix:0 - - \"unix\""
        );
        // A rule gave the client an address (`set-src`): it shows; the listener side stays.
        rec.client = Some("10.0.0.1:0".parse().unwrap());
        rec.unix.server = false;
        let mut out = Vec::new();
        f.render(&rec, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "10.0.0.1:0 unix:3 -:- -:- 10.0.0.1 - \"10.0.0.1\""
        );
    }
}
