//! Converters: the catalogue (name, arguments, input and output types) and their evaluation.
//!
//! Why one file with one record per converter: the expression compiler type-checks a chain
//! from `input`/`output` alone, and argument errors are reported once, at load, naming the
//! converter. Results follow haproxy 2.6 byte for byte; the tests pin values read from
//! haproxy itself. A converter that makes new bytes writes into the [`Eval`] buffer its input
//! does not use (see `sample.rs`), so a chain allocates nothing once the buffers have grown.
//!
//! Arithmetic converters take an integer or a variable (`add(txn.x)`); a missing variable
//! makes them fail, as in HAProxy. `ltime` asks the [`Source`] for the local UTC offset, so
//! this module reads no time zone file.

use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use regex::bytes::{Regex, RegexBuilder};

use super::expr::split_call;
use super::fetch::{parse_int_arg, parse_var, Arg};
use super::hash::{self, JsonMode};
use super::pattern::Method;
use super::sample::{cast, Bytes, Eval, Sample, SmpType};
use super::source::{Source, Stored};
use super::{did_you_mean, err, Names, RuleError};

/// Which converter a definition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum C {
    Lower,
    Upper,
    Map,
    Ipmask,
    Field,
    Word,
    Regsub,
    Base64,
    B64dec,
    UrlDec,
    UrlEnc,
    Crc32,
    Crc32c,
    Djb2,
    Sdbm,
    Sha1,
    Sha2,
    Digest,
    Hmac,
    SecureMemcmp,
    Wt6,
    Xxh3,
    Xxh32,
    Xxh64,
    Hex,
    Hex2i,
    Json,
    JsonQuery,
    JwtHeaderQuery,
    JwtPayloadQuery,
    JwtVerify,
    CutCrlf,
    Language,
    Htonl,
    UnsetVar,
    Nbsrv,
    SrvQueue,
    Concat,
    Strcmp,
    Iif,
    Length,
    Bool,
    Not,
    Odd,
    Even,
    And,
    Or,
    Xor,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Neg,
    Cpl,
    Ltime,
    Utime,
    HttpDate,
    HostOnly,
    PortOnly,
    Ltrim,
    Rtrim,
    Ub64enc,
    Ub64dec,
    SetVar,
    Bytes,
    Be2dec,
    Be2hex,
    AddItem,
    FixIsValid,
    FixTagValue,
    MqttIsValid,
    MqttFieldValue,
    /// `table_*` and `in_table` (see [`super::stick`]).
    Stick,
}

/// One catalogue record.
#[derive(Debug)]
pub struct ConvDef {
    pub name: &'static str,
    /// Argument count: required, maximum.
    pub min: usize,
    pub max: usize,
    pub input: SmpType,
    /// `None`: the output has the input's type (`set-var`).
    pub output: Option<SmpType>,
    pub id: C,
}

macro_rules! cv {
    ($n:expr, $min:expr, $max:expr, $in:ident, $out:ident, $id:ident) => {
        ConvDef {
            name: $n,
            min: $min,
            max: $max,
            input: SmpType::$in,
            output: Some(SmpType::$out),
            id: C::$id,
        }
    };
}

impl ConvDef {
    /// A stick-table converter's record: any input (cast to the table's key type when
    /// applied), `max` arguments, all required.
    pub(crate) const fn stick(name: &'static str, max: usize, output: SmpType) -> ConvDef {
        ConvDef {
            name,
            min: max,
            max,
            input: SmpType::Any,
            output: Some(output),
            id: C::Stick,
        }
    }
}

/// Every converter Bascule knows, except the `map_*` family (see [`map_def`]).
pub static CONVERTERS: &[ConvDef] = &[
    cv!("lower", 0, 0, Str, Str, Lower),
    cv!("upper", 0, 0, Str, Str, Upper),
    cv!("ipmask", 1, 2, Addr, Addr, Ipmask),
    cv!("field", 2, 3, Str, Str, Field),
    cv!("word", 2, 3, Str, Str, Word),
    cv!("regsub", 2, 3, Str, Str, Regsub),
    cv!("base64", 0, 0, Bin, Str, Base64),
    cv!("b64dec", 0, 0, Str, Bin, B64dec),
    cv!("url_dec", 0, 1, Str, Str, UrlDec),
    cv!("url_enc", 0, 1, Str, Str, UrlEnc),
    cv!("crc32", 0, 1, Bin, Sint, Crc32),
    cv!("crc32c", 0, 1, Bin, Sint, Crc32c),
    cv!("djb2", 0, 1, Bin, Sint, Djb2),
    cv!("sdbm", 0, 1, Bin, Sint, Sdbm),
    cv!("sha1", 0, 0, Bin, Bin, Sha1),
    cv!("sha2", 0, 1, Bin, Bin, Sha2),
    cv!("digest", 1, 1, Bin, Bin, Digest),
    cv!("hmac", 2, 2, Bin, Bin, Hmac),
    cv!("secure_memcmp", 1, 1, Bin, Bool, SecureMemcmp),
    cv!("wt6", 0, 1, Bin, Sint, Wt6),
    cv!("xxh3", 0, 1, Bin, Sint, Xxh3),
    cv!("xxh32", 0, 1, Bin, Sint, Xxh32),
    cv!("xxh64", 0, 1, Bin, Sint, Xxh64),
    cv!("hex", 0, 0, Bin, Str, Hex),
    cv!("hex2i", 0, 0, Str, Sint, Hex2i),
    cv!("json", 0, 1, Str, Str, Json),
    cv!("json_query", 1, 2, Str, Any, JsonQuery),
    cv!("jwt_header_query", 0, 2, Str, Any, JwtHeaderQuery),
    cv!("jwt_payload_query", 0, 2, Str, Any, JwtPayloadQuery),
    cv!("jwt_verify", 2, 2, Str, Sint, JwtVerify),
    cv!("concat", 0, 3, Str, Str, Concat),
    cv!("strcmp", 1, 1, Str, Sint, Strcmp),
    cv!("iif", 2, 2, Bool, Str, Iif),
    cv!("length", 0, 0, Str, Sint, Length),
    cv!("bool", 0, 0, Sint, Bool, Bool),
    cv!("not", 0, 0, Sint, Bool, Not),
    cv!("odd", 0, 0, Sint, Bool, Odd),
    cv!("even", 0, 0, Sint, Bool, Even),
    cv!("and", 1, 1, Sint, Sint, And),
    cv!("or", 1, 1, Sint, Sint, Or),
    cv!("xor", 1, 1, Sint, Sint, Xor),
    cv!("add", 1, 1, Sint, Sint, Add),
    cv!("sub", 1, 1, Sint, Sint, Sub),
    cv!("mul", 1, 1, Sint, Sint, Mul),
    cv!("div", 1, 1, Sint, Sint, Div),
    cv!("mod", 1, 1, Sint, Sint, Mod),
    cv!("neg", 0, 0, Sint, Sint, Neg),
    cv!("cpl", 0, 0, Sint, Sint, Cpl),
    cv!("ltime", 1, 2, Sint, Str, Ltime),
    cv!("utime", 1, 2, Sint, Str, Utime),
    cv!("http_date", 0, 1, Sint, Str, HttpDate),
    cv!("host_only", 0, 0, Str, Str, HostOnly),
    cv!("port_only", 0, 0, Str, Sint, PortOnly),
    cv!("bytes", 1, 2, Bin, Bin, Bytes),
    cv!("fix_is_valid", 0, 0, Bin, Bool, FixIsValid),
    cv!("fix_tag_value", 1, 1, Bin, Bin, FixTagValue),
    cv!("mqtt_is_valid", 0, 0, Bin, Bool, MqttIsValid),
    cv!("mqtt_field_value", 2, 2, Bin, Str, MqttFieldValue),
    cv!("ltrim", 1, 1, Str, Str, Ltrim),
    cv!("rtrim", 1, 1, Str, Str, Rtrim),
    cv!("ub64enc", 0, 0, Bin, Str, Ub64enc),
    cv!("ub64dec", 0, 0, Str, Bin, Ub64dec),
    cv!("be2dec", 2, 3, Bin, Str, Be2dec),
    cv!("be2hex", 0, 3, Bin, Str, Be2hex),
    cv!("add_item", 2, 3, Str, Str, AddItem),
    ConvDef {
        name: "set-var",
        min: 1,
        max: 9,
        input: SmpType::Any,
        output: None,
        id: C::SetVar,
    },
    ConvDef {
        name: "unset-var",
        min: 1,
        max: 1,
        input: SmpType::Any,
        output: None,
        id: C::UnsetVar,
    },
    cv!("cut_crlf", 0, 0, Str, Str, CutCrlf),
    cv!("language", 1, 2, Str, Str, Language),
    cv!("htonl", 0, 0, Sint, Bin, Htonl),
    // A backend (`nbsrv`) or `[backend/]server` (`srv_queue`) named by the sample, looked up
    // by name at each use.
    cv!("nbsrv", 0, 0, Str, Sint, Nbsrv),
    cv!("srv_queue", 0, 0, Str, Sint, SrvQueue),
];

/// Map converter names: `map`, `map_<match>` and `map_<match>_<output>` with match one of
/// str beg sub dir dom end reg regm (reg, with `\1` in values) ip int, output str int ip.
pub fn map_def(name: &str) -> Option<(ConvDef, Method, SmpType)> {
    let rest = name.strip_prefix("map")?;
    let (m, out) = if rest.is_empty() {
        ("str", "str")
    } else {
        let rest = rest.strip_prefix('_')?;
        match rest.split_once('_') {
            Some((m, o)) => (m, o),
            None => (rest, "str"),
        }
    };
    let (method, input) = match m {
        "str" => (Method::Str, SmpType::Str),
        "beg" => (Method::Beg, SmpType::Str),
        "sub" => (Method::Sub, SmpType::Str),
        "dir" => (Method::Dir, SmpType::Str),
        "dom" => (Method::Dom, SmpType::Str),
        "end" => (Method::End, SmpType::Str),
        "reg" | "regm" => (Method::Reg, SmpType::Str),
        "ip" => (Method::Ip, SmpType::Addr),
        "int" => (Method::Int, SmpType::Sint),
        _ => return None,
    };
    let out = match out {
        "str" => SmpType::Str,
        "int" => SmpType::Sint,
        "ip" => SmpType::Addr,
        _ => return None,
    };
    let def = ConvDef {
        name: "map",
        min: 1,
        max: 2,
        input,
        output: Some(out),
        id: C::Map,
    };
    Some((def, method, out))
}

/// A compiled converter argument.
#[derive(Debug)]
enum CArg {
    Arg(Arg),
    /// `set-var(NAME,COND...)`'s conditions.
    VarCond(super::vars::VarCond),
    Regex(Regex, bool),
    Map(Arc<super::patfile::LiveMap>),
    Mask4(u32),
    Mask6(u128),
    Json(JsonMode),
    Stick(super::stick::ConvCall),
    Digest(super::digest::Algo),
    Mqtt(super::mqtt::Field),
    /// `jwt_verify`'s algorithm and, for RSA and ECDSA, the key its file held at load.
    Jwt(super::jwt::Alg, Option<Arc<super::jwt::PublicKey>>),
}

/// A compiled converter call.
#[derive(Debug)]
pub struct Conv {
    pub def: &'static ConvDef,
    args: Box<[Option<CArg>]>,
}

/// The shared record of a map signature (input and output types): the set is finite (9
/// match kinds x 3 outputs), so records are made once for the process.
fn map_signature(d: ConvDef) -> &'static ConvDef {
    use std::sync::OnceLock;
    static CACHE: OnceLock<Vec<ConvDef>> = OnceLock::new();
    let all = CACHE.get_or_init(|| {
        let mut v = Vec::new();
        for m in ["str", "beg", "sub", "dir", "dom", "end", "reg", "ip", "int"] {
            for o in ["str", "int", "ip"] {
                v.push(map_def(&format!("map_{m}_{o}")).unwrap().0);
            }
        }
        v
    });
    all.iter()
        .find(|c| c.input == d.input && c.output == d.output)
        .expect("map signature is in the cache")
}

impl Conv {
    /// Compiles one converter call such as `field(2,:)` or `map_beg(file.map,def)`.
    pub fn compile(word: &str, names: &dyn Names) -> Result<Conv, RuleError> {
        let (name, args) = split_call(word)?;
        if let Some((def, method, out)) = map_def(name) {
            return Self::compile_map(name, map_signature(def), method, out, &args, names);
        }
        if let Some((def, op)) = super::stick::converters().iter().find(|d| d.0.name == name) {
            let call = super::stick::compile_conv(name, *op, &args, names)?;
            return Ok(Conv {
                def,
                args: vec![Some(CArg::Stick(call))].into(),
            });
        }
        let Some(def) = CONVERTERS.iter().find(|d| d.name == name) else {
            let all = CONVERTERS
                .iter()
                .chain(super::stick::converters().iter().map(|d| &d.0))
                .map(|d| d.name)
                .chain(["map", "map_str", "map_beg", "map_ip"]);
            return err(format!(
                "unknown converter '{name}'{}",
                did_you_mean(name, all)
            ));
        };
        if args.len() < def.min || args.len() > def.max {
            return err(format!(
                "converter '{name}' expects {} argument(s), got {}",
                if def.min == def.max {
                    def.min.to_string()
                } else {
                    format!("{} to {}", def.min, def.max)
                },
                args.len()
            ));
        }
        let bad = |i: usize, what: &str| -> Result<Conv, RuleError> {
            err(format!(
                "converter '{name}': argument {} '{}' is not {what}",
                i + 1,
                args[i]
            ))
        };
        let int = |i: usize| args.get(i).map(|a| parse_int_arg(a));
        let mut out: Vec<Option<CArg>> = Vec::new();
        match def.id {
            C::And | C::Or | C::Xor | C::Add | C::Sub | C::Mul | C::Div | C::Mod => {
                let a = &args[0];
                match parse_int_arg(a) {
                    Some(v) => out.push(Some(CArg::Arg(Arg::Int(v)))),
                    None => match parse_var(a, names) {
                        Some(v) => out.push(Some(CArg::Arg(v))),
                        None => return bad(0, "an integer or a variable"),
                    },
                }
            }
            // `sha2([BITS])`, `digest(ALG)`, `hmac(ALG,KEY)`: the algorithm is resolved at load;
            // the key is a variable (read as a string and base64-decoded at each use) or
            // base64 decoded now, as haproxy's sample_check_arg_base64 does.
            C::Sha2 => {
                let bits = match int(0) {
                    None => 256,
                    Some(Some(b)) => b,
                    Some(None) => return bad(0, "an integer"),
                };
                match super::digest::Algo::sha2(bits) {
                    Some(a) => out.push(Some(CArg::Digest(a))),
                    None => {
                        return err(format!(
                            "converter 'sha2': unsupported number of bits: '{bits}' (224, 256, 384 or 512)"
                        ))
                    }
                }
            }
            C::Digest | C::Hmac => {
                let Some(a) = super::digest::Algo::by_name(&args[0]) else {
                    return err(format!(
                        "converter '{name}': algorithm '{}' is not a message digest Bascule computes ({})",
                        args[0],
                        super::digest::SUPPORTED
                    ));
                };
                out.push(Some(CArg::Digest(a)));
                if def.id == C::Hmac {
                    let key = &args[1];
                    if let Some(v) = parse_var(key, names) {
                        out.push(Some(CArg::Arg(v)));
                    } else {
                        let mut dec = Vec::new();
                        if key.len() % 4 != 0 || !hash::base64_decode(key.as_bytes(), &mut dec) {
                            return err(format!(
                                "converter 'hmac': failed to parse key '{key}': it must be base64 encoded or a variable"
                            ));
                        }
                        out.push(Some(CArg::Arg(Arg::Str(dec.into()))));
                    }
                }
            }
            C::SecureMemcmp => match parse_var(&args[0], names) {
                Some(v) => out.push(Some(CArg::Arg(v))),
                None => return bad(0, "a variable 'scope.name'"),
            },
            C::Strcmp => match parse_var(&args[0], names) {
                Some(v) => out.push(Some(CArg::Arg(v))),
                None => return bad(0, "a variable 'scope.name'"),
            },
            // `language(LANG[;LANG...][,DEFAULT])`: the languages offered and the default.
            C::Language => {
                for a in &args {
                    let a = crate::config::rawbytes::bytes(a);
                    out.push(Some(CArg::Arg(Arg::Str(a.into()))));
                }
            }
            C::UnsetVar => match parse_var(&args[0], names) {
                Some(v) => out.push(Some(CArg::Arg(v))),
                None => return bad(0, "a variable 'scope.name'"),
            },
            C::SetVar => {
                match parse_var(&args[0], names) {
                    Some(v) => out.push(Some(CArg::Arg(v))),
                    None => return bad(0, "a variable 'scope.name'"),
                }
                let mut cond = super::vars::VarCond::NONE;
                for (i, a) in args.iter().enumerate().skip(1) {
                    if !cond.add(a) {
                        return bad(i, "a condition (ifexists, ifnotexists, ifempty, ifnotempty, ifset, ifnotset, ifgt, iflt)");
                    }
                }
                out.push(Some(CArg::VarCond(cond)));
            }
            // `be2dec(SEP,CHUNK[,TRUNC])`, `be2hex([SEP][,CHUNK][,TRUNC])`: the separator, the
            // chunk size (1 to 8 bytes for be2dec: one unsigned integer each), the truncation.
            C::Be2dec | C::Be2hex => {
                let sep: Box<[u8]> = args
                    .first()
                    .map_or_else(Box::default, |a| crate::config::rawbytes::bytes(a).into());
                let chunk = match int(1) {
                    None => 0,
                    Some(Some(c)) if (0..=i64::from(u16::MAX)).contains(&c) => c,
                    Some(_) => return bad(1, "a chunk size"),
                };
                if def.id == C::Be2dec && !(1..=8).contains(&chunk) {
                    return bad(1, "a chunk size from 1 to 8 bytes");
                }
                let trunc = match int(2) {
                    None => 0,
                    Some(Some(t)) => t,
                    Some(None) => return bad(2, "0 or 1"),
                };
                out.push(Some(CArg::Arg(Arg::Str(sep))));
                out.push(Some(CArg::Arg(Arg::Int(chunk))));
                out.push(Some(CArg::Arg(Arg::Int(trunc))));
            }
            // `fix_tag_value(TAG)`: a tag number or a name haproxy knows, resolved at load.
            C::FixTagValue => match super::fix::tag_id(&args[0]) {
                Some(id) => out.push(Some(CArg::Arg(Arg::Int(i64::from(id))))),
                None => return err(format!("Unknown FIX tag name '{}'", args[0])),
            },
            // `mqtt_field_value(TYPE,FIELD)`: a packet type and a field it has, resolved at
            // load (haproxy's messages).
            C::MqttFieldValue => {
                let Some(packet) = super::mqtt::packet_type(&args[0]) else {
                    return err(format!("Unknown MQTT type '{}'", args[0]));
                };
                let Some(field) = super::mqtt::field(packet, &args[1]) else {
                    return err(format!(
                        "Unknown MQTT field name '{}' for packet type '{}'",
                        args[1], args[0]
                    ));
                };
                out.push(Some(CArg::Arg(Arg::Int(i64::from(packet)))));
                out.push(Some(CArg::Mqtt(field)));
            }
            // `add_item(DELIM[,VAR][,SUFFIX])`: a variable or a suffix is needed.
            C::AddItem => {
                out.push(Some(CArg::Arg(Arg::Str(
                    crate::config::rawbytes::bytes(&args[0]).into(),
                ))));
                match args.get(1).filter(|a| !a.is_empty()) {
                    Some(a) => match parse_var(a, names) {
                        Some(v) => out.push(Some(CArg::Arg(v))),
                        None => return bad(1, "a variable 'scope.name'"),
                    },
                    None if args.get(2).is_none_or(|a| a.is_empty()) => {
                        return err(format!(
                            "converter '{name}': a variable or a suffix is required after the delimiter"
                        ))
                    }
                    None => out.push(None),
                }
                out.push(
                    args.get(2)
                        .map(|a| CArg::Arg(Arg::Str(crate::config::rawbytes::bytes(a).into()))),
                );
            }
            C::Concat => {
                for (i, a) in args.iter().enumerate() {
                    if a.is_empty() {
                        out.push(None);
                    } else if i == 1 {
                        match parse_var(a, names) {
                            Some(v) => out.push(Some(CArg::Arg(v))),
                            None => return bad(1, "a variable 'scope.name'"),
                        }
                    } else {
                        out.push(Some(CArg::Arg(Arg::Str(
                            crate::config::rawbytes::bytes(a).into(),
                        ))));
                    }
                }
            }
            C::Field | C::Word => {
                let Some(Some(idx)) = int(0) else {
                    return bad(0, "an integer");
                };
                if idx == 0 {
                    return bad(0, "a non-zero field index");
                }
                if args[1].is_empty() {
                    return bad(1, "a non-empty set of delimiters");
                }
                out.push(Some(CArg::Arg(Arg::Int(idx))));
                out.push(Some(CArg::Arg(Arg::Str(
                    crate::config::rawbytes::bytes(&args[1]).into(),
                ))));
                match int(2) {
                    None => out.push(Some(CArg::Arg(Arg::Int(1)))),
                    Some(Some(n)) if n >= 0 => out.push(Some(CArg::Arg(Arg::Int(n)))),
                    Some(_) => return bad(2, "a positive count"),
                }
            }
            C::Regsub => {
                let flags = args.get(2).map_or("", |s| s.as_str());
                if let Some(c) = flags.chars().find(|c| !matches!(c, 'g' | 'i')) {
                    return err(format!(
                        "converter 'regsub': invalid regex flag '{c}' (expected g or i)"
                    ));
                }
                let re = RegexBuilder::new(&args[0])
                    .case_insensitive(flags.contains('i'))
                    .unicode(false)
                    .build()
                    .map_err(|e| {
                        RuleError::new(format!(
                            "converter 'regsub': invalid regex '{}': {e}",
                            args[0]
                        ))
                    })?;
                out.push(Some(CArg::Regex(re, flags.contains('g'))));
                out.push(Some(CArg::Arg(Arg::Str(
                    crate::config::rawbytes::bytes(&args[1]).into(),
                ))));
            }
            C::Ipmask => {
                let m4 = &args[0];
                let mask = if let Ok(n) = m4.parse::<u32>() {
                    if n > 32 {
                        return bad(0, "an IPv4 mask (0 to 32 or a.b.c.d)");
                    }
                    if n == 0 {
                        0
                    } else {
                        u32::MAX << (32 - n)
                    }
                } else if let Ok(a) = m4.parse::<Ipv4Addr>() {
                    u32::from(a)
                } else {
                    return bad(0, "an IPv4 mask (0 to 32 or a.b.c.d)");
                };
                out.push(Some(CArg::Mask4(mask)));
                if let Some(m6) = args.get(1) {
                    // A prefix length, or an IPv6 address used as the mask (HAProxy's
                    // `str2mask6`).
                    match (m6.parse::<u32>(), m6.parse::<Ipv6Addr>()) {
                        (Ok(n), _) if n <= 128 => out.push(Some(CArg::Mask6(if n == 0 {
                            0
                        } else {
                            u128::MAX << (128 - n)
                        }))),
                        (_, Ok(a)) => out.push(Some(CArg::Mask6(u128::from(a)))),
                        _ => return bad(1, "an IPv6 mask (0 to 128 or an IPv6 address)"),
                    }
                }
            }
            C::Json => {
                let mode = match args.first().map(|s| s.as_str()) {
                    None | Some("") | Some("ascii") => JsonMode::Ascii,
                    Some("utf8") => JsonMode::Utf8 {
                        strict: true,
                        skip: false,
                    },
                    Some("utf8s") => JsonMode::Utf8 {
                        strict: false,
                        skip: true,
                    },
                    Some("utf8p") => JsonMode::Utf8 {
                        strict: false,
                        skip: false,
                    },
                    Some("utf8ps") => JsonMode::Utf8 {
                        strict: false,
                        skip: true,
                    },
                    Some(_) => return bad(0, "a json mode (ascii, utf8, utf8s, utf8p, utf8ps)"),
                };
                out.push(Some(CArg::Json(mode)));
            }
            // `json_query(PATH[,int])`: the path as written (walked at each evaluation, which
            // allocates nothing), and whether numbers are wanted as integers.
            C::JsonQuery => {
                let int = match args.get(1).map(String::as_str) {
                    None => false,
                    Some("int") => true,
                    Some(_) => return bad(1, "an output type: only 'int' is supported"),
                };
                let path = crate::config::rawbytes::bytes(&args[0]);
                out.push(Some(CArg::Arg(Arg::Str(path.into()))));
                out.push(Some(CArg::Arg(Arg::Bool(int))));
            }
            // `jwt_header_query([PATH[,int]])`: as `json_query` over the decoded part.
            C::JwtHeaderQuery | C::JwtPayloadQuery => {
                let int = match args.get(1).map(String::as_str) {
                    None => false,
                    Some("int") => true,
                    Some(_) => {
                        return err(format!(
                            "invalid args in converter '{name}' : output_type only supports \"int\" as argument"
                        ))
                    }
                };
                match args.first().filter(|p| !p.is_empty()) {
                    Some(p) => {
                        let path = crate::config::rawbytes::bytes(p);
                        out.push(Some(CArg::Arg(Arg::Str(path.into()))));
                    }
                    None => out.push(None),
                }
                out.push(Some(CArg::Arg(Arg::Bool(int))));
            }
            // `jwt_verify(ALG,KEY)`: the algorithm is checked and an RSA or ECDSA key file read
            // now, so that no request waits for the disk.
            C::JwtVerify => {
                if args.iter().any(|a| parse_var(a, names).is_some()) {
                    return err(format!(
                        "invalid args in converter '{name}' : a variable as algorithm or key is not supported by Bascule (name them in the configuration)"
                    ));
                }
                let Some(alg) = super::jwt::Alg::parse(args[0].as_bytes()) else {
                    return err(format!(
                        "invalid args in converter '{name}' : unknown JWT algorithm: {}.",
                        args[0]
                    ));
                };
                let key = alg
                    .uses_key_file()
                    .then(|| Arc::new(super::jwt::PublicKey::load(&args[1])));
                out.push(Some(CArg::Jwt(alg, key)));
                let secret = crate::config::rawbytes::bytes(&args[1]);
                out.push(Some(CArg::Arg(Arg::Str(secret.into()))));
            }
            C::UrlEnc => {
                if args.first().is_some_and(|a| a != "query") {
                    return bad(0, "an encoding type (query)");
                }
            }
            C::Iif => {
                out.push(Some(CArg::Arg(Arg::Str(
                    crate::config::rawbytes::bytes(&args[0]).into(),
                ))));
                out.push(Some(CArg::Arg(Arg::Str(
                    crate::config::rawbytes::bytes(&args[1]).into(),
                ))));
            }
            C::Ltrim | C::Rtrim => {
                out.push(Some(CArg::Arg(Arg::Str(
                    crate::config::rawbytes::bytes(&args[0]).into(),
                ))));
            }
            C::Ltime | C::Utime => {
                out.push(Some(CArg::Arg(Arg::Str(
                    crate::config::rawbytes::bytes(&args[0]).into(),
                ))));
                match int(1) {
                    None => out.push(None),
                    Some(Some(v)) => out.push(Some(CArg::Arg(Arg::Int(v)))),
                    Some(None) => return bad(1, "an integer"),
                }
            }
            _ => {
                // The remaining converters take only optional integers.
                for (i, a) in args.iter().enumerate() {
                    if a.is_empty() {
                        out.push(None);
                        continue;
                    }
                    match int(i) {
                        Some(Some(v)) => out.push(Some(CArg::Arg(Arg::Int(v)))),
                        _ => return bad(i, "an integer"),
                    }
                }
            }
        }
        Ok(Conv {
            def,
            args: out.into(),
        })
    }

    fn compile_map(
        name: &str,
        def: &'static ConvDef,
        method: Method,
        out: SmpType,
        args: &[String],
        names: &dyn Names,
    ) -> Result<Conv, RuleError> {
        if args.is_empty() || args.len() > 2 || args[0].is_empty() {
            return err(format!(
                "converter '{name}' expects a map file and an optional default value"
            ));
        }
        let kind = super::patfile::MapKind {
            method,
            out,
            default: args.get(1).cloned(),
            backrefs: name.starts_with("map_regm"),
        };
        let at = |e: RuleError| RuleError::new(format!("converter '{name}': {}", e.message));
        let (file, entries) = names.pat_file(&args[0], true, true).map_err(at)?;
        let map = super::patfile::LiveMap::new(file, &args[0], kind, &entries).map_err(at)?;
        let map = Arc::new(map);
        names.pat_user(&[file], map.clone());
        Ok(Conv {
            def,
            args: vec![Some(CArg::Map(map))].into(),
        })
    }

    fn int<S: Source + ?Sized>(&self, i: usize, src: &S, ev: &mut Eval) -> Option<i64> {
        match self.args.get(i)? {
            Some(CArg::Arg(Arg::Int(v))) => Some(*v),
            Some(CArg::Arg(Arg::Var(scope, id))) => {
                ev.var.clear();
                match src.var(*scope, *id, &mut ev.var)? {
                    Stored::Sint(v) => Some(v),
                    Stored::Bool(b) => Some(b as i64),
                    Stored::Str | Stored::Bin => super::sample::str_to_int(&ev.var),
                    _ => None,
                }
            }
            _ => None,
        }
    }
    fn str(&self, i: usize) -> Option<&[u8]> {
        match self.args.get(i)? {
            Some(CArg::Arg(Arg::Str(s))) => Some(s),
            _ => None,
        }
    }

    /// Applies the converter to `input`, first cast to the converter's input type.
    pub fn apply<'a, S: Source + ?Sized>(
        &'a self,
        input: Sample<'a>,
        src: &'a S,
        ev: &mut Eval,
    ) -> Option<Sample<'a>> {
        let input = cast(input, self.def.input, ev)?;
        use Sample as S;
        let bytes = |s: Sample<'a>| match s {
            S::Str(b) | S::Bin(b) | S::Meth(b) => Some(b),
            _ => None,
        };
        let int = |s: Sample<'a>| match s {
            S::Sint(v) => Some(v),
            _ => None,
        };
        Some(match self.def.id {
            C::Lower | C::Upper => {
                let (i, o, n) = ev.io(bytes(input)?);
                if self.def.id == C::Lower {
                    hash::push_lower(i, o);
                } else {
                    o.extend(i.iter().map(|c| c.to_ascii_uppercase()));
                }
                S::Str(Bytes::Buf(n))
            }
            C::Map => {
                let Some(Some(CArg::Map(m))) = self.args.first() else {
                    return None;
                };
                m.lookup(input, ev)?
            }
            C::Ipmask => {
                let Some(Some(CArg::Mask4(m4))) = self.args.first() else {
                    return None;
                };
                match input {
                    S::Ipv4(a) => S::Ipv4(Ipv4Addr::from(u32::from(a) & m4)),
                    S::Ipv6(a) => match self.args.get(1) {
                        Some(Some(CArg::Mask6(m6))) => S::Ipv6(Ipv6Addr::from(u128::from(a) & m6)),
                        _ => return None,
                    },
                    _ => return None,
                }
            }
            C::Field | C::Word => {
                let idx = self.int(0, src, ev)?;
                let count = self.int(2, src, ev)?;
                let delims = self.str(1)?;
                let (i, o, n) = ev.io(bytes(input)?);
                let r = if self.def.id == C::Field {
                    field(i, idx, delims, count)?
                } else {
                    word(i, idx, delims, count)?
                };
                o.extend_from_slice(r);
                S::Str(Bytes::Buf(n))
            }
            C::Regsub => {
                let Some(Some(CArg::Regex(re, global))) = self.args.first() else {
                    return None;
                };
                let subst = self.str(1)?;
                let (i, o, n) = ev.io(bytes(input)?);
                regsub(re, *global, subst, i, o);
                S::Str(Bytes::Buf(n))
            }
            C::Base64 | C::Hex | C::UrlEnc => {
                let (i, o, n) = ev.io(bytes(input)?);
                match self.def.id {
                    C::Base64 => hash::base64_encode(i, o),
                    C::Hex => hash::hex_encode(i, o),
                    _ => hash::url_encode(i, o),
                }
                S::Str(Bytes::Buf(n))
            }
            C::B64dec => {
                let (i, o, n) = ev.io(bytes(input)?);
                if !hash::base64_decode(i, o) {
                    return None;
                }
                S::Bin(Bytes::Buf(n))
            }
            C::UrlDec => {
                let plus = self.int(0, src, ev).unwrap_or(0) != 0;
                let (i, o, n) = ev.io(bytes(input)?);
                if !hash::url_decode(i, plus, o) {
                    return None;
                }
                S::Str(Bytes::Buf(n))
            }
            C::Json => {
                let Some(Some(CArg::Json(mode))) = self.args.first() else {
                    return None;
                };
                let (i, o, n) = ev.io(bytes(input)?);
                if !hash::json_escape(i, *mode, o) {
                    return None;
                }
                S::Str(Bytes::Buf(n))
            }
            C::JsonQuery => {
                let path = self.str(0)?;
                let int = matches!(self.args.get(1), Some(Some(CArg::Arg(Arg::Bool(true)))));
                let (i, o, n) = ev.io(bytes(input)?);
                json_sample(i, path, int, o, n)?
            }
            C::JwtHeaderQuery | C::JwtPayloadQuery => {
                let n = usize::from(self.def.id == C::JwtPayloadQuery);
                let int = matches!(self.args.get(1), Some(Some(CArg::Arg(Arg::Bool(true)))));
                // Without a path haproxy 2.6 answers nothing (its JSON query of an empty path).
                let path = self.str(0)?;
                let (i, o, k, vbuf) = ev.io_var(bytes(input)?);
                vbuf.clear();
                if !super::jwt::base64url_decode(super::jwt::part(i, n)?, vbuf) {
                    return None;
                }
                json_sample(vbuf, path, int, o, k)?
            }
            C::JwtVerify => {
                let Some(Some(CArg::Jwt(alg, key))) = self.args.first() else {
                    return None;
                };
                let secret = self.str(1).unwrap_or_default();
                let (i, _, _, vbuf) = ev.io_var(bytes(input)?);
                let v = super::jwt::verify(i, *alg, secret, key.as_deref(), vbuf);
                S::Sint(v as i64)
            }
            C::Crc32 | C::Crc32c | C::Djb2 | C::Sdbm | C::Wt6 => {
                let aval = self.int(0, src, ev).unwrap_or(0) != 0;
                let d = ev.get(bytes(input)?);
                let h = match self.def.id {
                    C::Crc32 => hash::crc32(d),
                    C::Crc32c => hash::crc32c(d),
                    C::Djb2 => hash::djb2(d),
                    C::Sdbm => hash::sdbm(d),
                    _ => hash::wt6(d),
                };
                S::Sint(if aval { hash::avalanche(h) } else { h } as i64)
            }
            C::Sha1 => {
                let (i, o, n) = ev.io(bytes(input)?);
                let sha =
                    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, i);
                o.extend_from_slice(sha.as_ref());
                S::Bin(Bytes::Buf(n))
            }
            C::Sha2 | C::Digest => {
                let Some(Some(CArg::Digest(a))) = self.args.first() else {
                    return None;
                };
                let (i, o, n) = ev.io(bytes(input)?);
                super::digest::digest(*a, i, o);
                S::Bin(Bytes::Buf(n))
            }
            C::Hmac => {
                let Some(Some(CArg::Digest(a))) = self.args.first() else {
                    return None;
                };
                let (i, o, n, vbuf) = ev.io_var(bytes(input)?);
                match self.args.get(1) {
                    Some(Some(CArg::Arg(Arg::Str(key)))) => super::digest::hmac(*a, key, i, o),
                    Some(Some(CArg::Arg(Arg::Var(scope, id)))) => {
                        // The variable as a string, base64-decoded: the decoded key is built in
                        // `o`, then moved out of the way of the result.
                        vbuf.clear();
                        let st = src.var(*scope, *id, vbuf)?;
                        let text_start = o.len();
                        append_stored(st, vbuf, o);
                        vbuf.clear();
                        if !hash::base64_decode(&o[text_start..], vbuf) {
                            return None;
                        }
                        o.truncate(text_start);
                        super::digest::hmac(*a, vbuf, i, o);
                    }
                    _ => return None,
                }
                S::Bin(Bytes::Buf(n))
            }
            C::SecureMemcmp => {
                let Some(Some(CArg::Arg(Arg::Var(scope, id)))) = self.args.first() else {
                    return None;
                };
                let (i, o, _, vbuf) = ev.io_var(bytes(input)?);
                vbuf.clear();
                let st = src.var(*scope, *id, vbuf)?;
                let other: &[u8] = match st {
                    Stored::Str | Stored::Bin | Stored::Meth => vbuf,
                    // haproxy's casts to binary: integers and booleans as 8 bytes in network
                    // order, addresses as their 4 or 16 bytes.
                    Stored::Sint(v) => {
                        o.extend_from_slice(&v.to_be_bytes());
                        o
                    }
                    Stored::Bool(b) => {
                        o.extend_from_slice(&i64::from(b).to_be_bytes());
                        o
                    }
                    Stored::Ipv4(a) => {
                        o.extend_from_slice(&a.octets());
                        o
                    }
                    Stored::Ipv6(a) => {
                        o.extend_from_slice(&a.octets());
                        o
                    }
                };
                S::Bool(constant_time_eq(i, other))
            }
            C::Xxh3 => {
                let seed = self.int(0, src, ev).unwrap_or(0);
                S::Sint(super::xxh3::xxh3_64(ev.get(bytes(input)?), seed as u64) as i64)
            }
            C::Xxh32 => {
                let seed = self.int(0, src, ev).unwrap_or(0);
                S::Sint(hash::xxh32(ev.get(bytes(input)?), seed as u32) as i64)
            }
            C::Xxh64 => {
                let seed = self.int(0, src, ev).unwrap_or(0);
                S::Sint(hash::xxh64(ev.get(bytes(input)?), seed as u64) as i64)
            }
            C::Concat => {
                let pre = self.str(0).unwrap_or(b"");
                let post = self.str(2).unwrap_or(b"");
                let var = match self.args.get(1) {
                    Some(Some(CArg::Arg(Arg::Var(s, id)))) => Some((*s, *id)),
                    _ => None,
                };
                let (i, o, n, vbuf) = ev.io_var(bytes(input)?);
                o.extend_from_slice(i);
                o.extend_from_slice(pre);
                if let Some((scope, id)) = var {
                    vbuf.clear();
                    if let Some(st) = src.var(scope, id, vbuf) {
                        append_stored(st, vbuf, o);
                    }
                }
                o.extend_from_slice(post);
                S::Str(Bytes::Buf(n))
            }
            C::Be2dec | C::Be2hex => {
                let sep = self.str(0).unwrap_or(b"");
                let chunk = self.int(1, src, ev).unwrap_or(0) as usize;
                let trunc = self.int(2, src, ev).unwrap_or(0) != 0;
                let (i, o, n) = ev.io(bytes(input)?);
                // No chunk size: the whole input is one piece.
                let chunk = if chunk == 0 { i.len().max(1) } else { chunk };
                let pieces = i.chunks(chunk).filter(|c| !trunc || c.len() == chunk);
                for (k, piece) in pieces.enumerate() {
                    if k > 0 {
                        o.extend_from_slice(sep);
                    }
                    if self.def.id == C::Be2dec {
                        let v = piece.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
                        push_u64(o, v);
                    } else {
                        hash::hex_encode(piece, o);
                    }
                }
                S::Str(Bytes::Buf(n))
            }
            C::AddItem => {
                let delim = self.str(0).unwrap_or(b"");
                let suffix = self.str(2).unwrap_or(b"");
                let var = match self.args.get(1) {
                    Some(Some(CArg::Arg(Arg::Var(s, id)))) => Some((*s, *id)),
                    _ => None,
                };
                let (i, o, n, vbuf) = ev.io_var(bytes(input)?);
                vbuf.clear();
                let found = var.and_then(|(scope, id)| src.var(scope, id, vbuf));
                o.extend_from_slice(i);
                if !i.is_empty() && (found.is_some() || !suffix.is_empty()) {
                    o.extend_from_slice(delim);
                }
                if let Some(st) = found {
                    append_stored(st, vbuf, o);
                }
                o.extend_from_slice(suffix);
                S::Str(Bytes::Buf(n))
            }
            C::Strcmp => {
                let Some(Some(CArg::Arg(Arg::Var(scope, id)))) = self.args.first() else {
                    return None;
                };
                let (i, o, _, vbuf) = ev.io_var(bytes(input)?);
                vbuf.clear();
                let st = src.var(*scope, *id, vbuf)?;
                let other: &[u8] = if matches!(st, Stored::Str | Stored::Bin | Stored::Meth) {
                    vbuf
                } else {
                    append_stored(st, vbuf, o);
                    o
                };
                let n = i.len().min(other.len());
                let cmp = match i[..n].iter().zip(&other[..n]).find(|(a, b)| a != b) {
                    Some((a, b)) => *a as i64 - *b as i64,
                    None => i.len() as i64 - other.len() as i64,
                };
                S::Sint(cmp)
            }
            C::Iif => {
                let S::Bool(b) = input else { return None };
                S::str(if b { self.str(0)? } else { self.str(1)? })
            }
            C::Length => S::Sint(ev.get(bytes(input)?).len() as i64),
            C::Hex2i => {
                // Hexadecimal digits to an integer (wrapping as HAProxy's shift does); any
                // other character: no value.
                let mut n = 0i64;
                for &c in ev.get(bytes(input)?) {
                    n = n
                        .wrapping_shl(4)
                        .wrapping_add(i64::from((c as char).to_digit(16)?));
                }
                S::Sint(n)
            }
            C::Bool => S::Bool(int(input)? != 0),
            C::Not => S::Bool(int(input)? == 0),
            C::Odd => S::Bool(int(input)? & 1 == 1),
            C::Even => S::Bool(int(input)? & 1 == 0),
            C::Neg => S::Sint(int(input)?.wrapping_neg()),
            C::Cpl => S::Sint(!int(input)?),
            C::And | C::Or | C::Xor | C::Add | C::Sub | C::Mul | C::Div | C::Mod => {
                let a = int(input)?;
                let b = self.int(0, src, ev)?;
                S::Sint(match self.def.id {
                    C::And => a & b,
                    C::Or => a | b,
                    C::Xor => a ^ b,
                    C::Add => a.wrapping_add(b),
                    C::Sub => a.wrapping_sub(b),
                    C::Mul => a.wrapping_mul(b),
                    C::Div if b == 0 => i64::MAX,
                    C::Div => a.wrapping_div(b),
                    C::Mod if b == 0 => 0,
                    _ => a.wrapping_rem(b),
                })
            }
            C::Utime | C::Ltime | C::HttpDate => {
                let t = int(input)?;
                let (fmt, off) = if self.def.id == C::HttpDate {
                    (
                        &b"%a, %d %b %Y %H:%M:%S GMT"[..],
                        self.int(0, src, ev).unwrap_or(0),
                    )
                } else {
                    (self.str(0)?, self.int(1, src, ev).unwrap_or(0))
                };
                let t = t.wrapping_add(off);
                let (n, o) = ev.out_for(None);
                let tz = if self.def.id == C::Ltime {
                    src.utc_offset(t)
                } else {
                    0
                };
                strftime(fmt, t, tz, o);
                S::Str(Bytes::Buf(n))
            }
            C::Ltrim | C::Rtrim => {
                let set = self.str(0)?;
                let (i, o, n) = ev.io(bytes(input)?);
                let keep = |c: &u8| !set.contains(c);
                let r = if self.def.id == C::Ltrim {
                    i.iter().position(keep).map_or(&i[i.len()..], |p| &i[p..])
                } else {
                    i.iter().rposition(keep).map_or(&i[..0], |p| &i[..=p])
                };
                o.extend_from_slice(r);
                S::Str(Bytes::Buf(n))
            }
            C::Ub64enc => {
                // base64url: `-` and `_` for `+` and `/`, no padding.
                let (i, o, n) = ev.io(bytes(input)?);
                hash::base64_encode(i, o);
                while o.last() == Some(&b'=') {
                    o.pop();
                }
                for c in o.iter_mut() {
                    *c = match *c {
                        b'+' => b'-',
                        b'/' => b'_',
                        c => c,
                    };
                }
                S::Str(Bytes::Buf(n))
            }
            C::Ub64dec => {
                let (i, o, n) = ev.io(bytes(input)?);
                if !ub64_decode(i, o) {
                    return None;
                }
                S::Bin(Bytes::Buf(n))
            }
            C::HostOnly => {
                let (i, o, n) = ev.io(bytes(input)?);
                o.extend_from_slice(split_host(i).0);
                S::Str(Bytes::Buf(n))
            }
            C::PortOnly => {
                let port = split_host(ev.get(bytes(input)?)).1;
                S::Sint(port.map_or(Some(0), |p| std::str::from_utf8(p).ok()?.parse().ok())?)
            }
            C::Stick => {
                let Some(Some(CArg::Stick(c))) = self.args.first() else {
                    return None;
                };
                super::stick::convert(c, input, src, ev)?
            }
            // Need more data gives no value: a content rule waits within its inspect delay.
            C::FixIsValid => {
                let b = bytes(input)?;
                match super::fix::validate(ev.get(b)) {
                    super::fix::Validity::Valid => S::Bool(true),
                    super::fix::Validity::Invalid => S::Bool(false),
                    super::fix::Validity::NeedMore => {
                        ev.need_more = true;
                        return None;
                    }
                }
            }
            C::FixTagValue => {
                let tag = u32::try_from(self.int(0, src, ev)?).ok()?;
                let (i, o, n) = ev.io(bytes(input)?);
                match super::fix::tag_value(i, tag) {
                    super::fix::TagValue::Found(v) if !v.is_empty() => o.extend_from_slice(v),
                    // An empty value is "need more data" too in haproxy.
                    super::fix::TagValue::Found(_) | super::fix::TagValue::NeedMore => {
                        ev.need_more = true;
                        return None;
                    }
                    super::fix::TagValue::Invalid => return None,
                }
                S::Bin(Bytes::Buf(n))
            }
            C::MqttIsValid => match super::mqtt::validate(ev.get(bytes(input)?)) {
                super::mqtt::Validity::Valid => S::Bool(true),
                super::mqtt::Validity::Invalid => S::Bool(false),
                super::mqtt::Validity::NeedMore => {
                    ev.need_more = true;
                    return None;
                }
            },
            C::MqttFieldValue => {
                let packet = u8::try_from(self.int(0, src, ev)?).ok()?;
                let Some(Some(CArg::Mqtt(field))) = self.args.get(1) else {
                    return None;
                };
                let (i, o, n) = ev.io(bytes(input)?);
                match super::mqtt::field_value(i, packet, *field) {
                    super::mqtt::FieldValue::Bytes(v) => o.extend_from_slice(v),
                    super::mqtt::FieldValue::Int(v) => {
                        write!(o, "{v}").ok()?;
                    }
                    super::mqtt::FieldValue::NotFound => return None,
                    super::mqtt::FieldValue::NeedMore => {
                        ev.need_more = true;
                        return None;
                    }
                }
                S::Str(Bytes::Buf(n))
            }
            C::Bytes => {
                let off = usize::try_from(self.int(0, src, ev)?).ok()?;
                let len = self.int(1, src, ev);
                let (i, o, n) = ev.io(bytes(input)?);
                let i = i.get(off..).unwrap_or(&[]);
                let take = len.map_or(i.len(), |l| (l.max(0) as usize).min(i.len()));
                o.extend_from_slice(&i[..take]);
                S::Bin(Bytes::Buf(n))
            }
            C::SetVar => {
                let Some(Some(CArg::Arg(Arg::Var(scope, id)))) = self.args.first() else {
                    return None;
                };
                let cond = match self.args.get(1) {
                    Some(Some(CArg::VarCond(c))) => *c,
                    _ => super::vars::VarCond::NONE,
                };
                src.set_var_if(*scope, *id, ev.value(input), cond);
                input
            }
            C::UnsetVar => {
                let Some(Some(CArg::Arg(Arg::Var(scope, id)))) = self.args.first() else {
                    return None;
                };
                src.unset_var(*scope, *id);
                input
            }
            C::Language => {
                let offered = self.str(0).unwrap_or_default();
                let (i, o, n) = ev.io(bytes(input)?);
                match preferred_language(i, offered).or(self.str(1).filter(|d| !d.is_empty())) {
                    Some(lang) => o.extend_from_slice(lang),
                    None => return None,
                }
                S::Str(Bytes::Buf(n))
            }
            C::CutCrlf => {
                let (i, o, n) = ev.io(bytes(input)?);
                let end = i
                    .iter()
                    .position(|&c| c == b'\r' || c == b'\n')
                    .unwrap_or(i.len());
                o.extend_from_slice(&i[..end]);
                S::Str(Bytes::Buf(n))
            }
            C::Htonl => {
                let S::Sint(v) = input else { return None };
                let (i, o) = ev.out_for(None);
                o.extend_from_slice(&(v as u32).to_be_bytes());
                S::Bin(Bytes::Buf(i))
            }
            C::Nbsrv | C::SrvQueue => {
                let name = ev.get(bytes(input)?);
                let (be, srv) = match (self.def.id, name.iter().position(|&c| c == b'/')) {
                    (C::Nbsrv, _) => (src.backend_named(name)?, None),
                    (_, Some(slash)) => {
                        let be = src.backend_named(&name[..slash])?;
                        (be, Some(src.server_named(be, &name[slash + 1..])?))
                    }
                    (_, None) => {
                        let be = src.backend()?.0;
                        (be, Some(src.server_named(be, name)?))
                    }
                };
                match srv {
                    None => S::Sint(src.nbsrv(be)),
                    Some(srv) => S::Sint(src.figure(super::source::Figure::SrvQueue(be, srv))?),
                }
            }
        })
    }
}

/// What `json_query` (and the JWT queries, over a decoded part) answers for `path` in `doc`:
/// a string unescaped into `o` (buffer `n`), a number as an integer with `int` or as `%g`
/// text, a boolean; nothing for other values.
fn json_sample<'a>(
    doc: &[u8],
    path: &[u8],
    int: bool,
    o: &mut Vec<u8>,
    n: u8,
) -> Option<Sample<'a>> {
    use super::json::{self, Found};
    Some(match json::query(doc, path)? {
        Found::Str(raw) => {
            if !json::unescape(raw, o) {
                return None;
            }
            Sample::Str(Bytes::Buf(n))
        }
        Found::Num(num) if int => Sample::Sint(json::to_int(num)?),
        Found::Num(num) => {
            json::write_g(o, std::str::from_utf8(num).ok()?.parse().ok()?);
            Sample::Str(Bytes::Buf(n))
        }
        Found::Bool(b) => Sample::Bool(b),
        Found::Other => return None,
    })
}

/// The language of `offered` (`fr;en;de`) that an `Accept-Language` value prefers, as haproxy
/// 2.6's `language` converter reads it: the highest q-value wins (the first of equals), a
/// language range of the header matches an offered tag it equals or is a prefix of up to a
/// `-` (`fr-FR` matches `fr`), q=0 refuses, a malformed q-value reads as far as it goes.
fn preferred_language<'o>(header: &[u8], offered: &'o [u8]) -> Option<&'o [u8]> {
    let (mut at, end) = (0, header.len());
    let (mut best, mut best_q) = (None, 0);
    let space = |c: u8| c.is_ascii_whitespace();
    let skip_spaces = |at: &mut usize| {
        while *at < end && space(header[*at]) {
            *at += 1;
        }
    };
    loop {
        skip_spaces(&mut at);
        if at >= end {
            break;
        }
        let token_start = at;
        while at < end && !matches!(header[at], b';' | b',') && !space(header[at]) {
            at += 1;
        }
        let token = &header[token_start..at];
        let matched = (!token.is_empty())
            .then(|| {
                offered
                    .split(|&c| c == b';')
                    .find(|tag| language_range_matches(token, tag))
            })
            .flatten();
        if let Some(tag) = matched {
            let q = q_after(header, &mut at);
            if q > best_q {
                best = Some(tag);
                if q >= 1000 {
                    break;
                }
                best_q = q;
            }
        }
        // On to the next comma.
        while at < end && header[at] != b',' {
            at += 1;
        }
        if at >= end {
            break;
        }
        at += 1;
    }
    best
}

/// RFC 4647 basic filtering as haproxy's `http_language_range_match`: `range` (from the
/// header) matches `tag` when they are equal, or when `tag` ends where `range` has a `-`.
fn language_range_matches(range: &[u8], tag: &[u8]) -> bool {
    let mut t = 0;
    for &r in range {
        if r == b'-' && t == tag.len() {
            return true;
        }
        if t == tag.len() || r != tag[t] {
            return false;
        }
        t += 1;
    }
    t == tag.len()
}

/// The q-value after a language range at `at` (`;q=0.8`), in thousandths: 1000 when there is
/// none or it is not where expected, as haproxy reads it in best effort.
fn q_after(h: &[u8], at: &mut usize) -> i64 {
    let skip = |at: &mut usize| {
        while *at < h.len() && h[*at].is_ascii_whitespace() {
            *at += 1;
        }
    };
    skip(at);
    if *at >= h.len() || h[*at] != b';' {
        return 1000;
    }
    *at += 1;
    skip(at);
    if *at >= h.len() || h[*at] != b'q' {
        return 1000;
    }
    *at += 1;
    skip(at);
    if *at >= h.len() || h[*at] != b'=' {
        return 1000;
    }
    *at += 1;
    skip(at);
    // haproxy's http_parse_qvalue: a digit, then '.', then up to three digits.
    let digit = |i: usize| {
        h.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| i64::from(c - b'0'))
    };
    let mut i = *at;
    let Some(units) = digit(i) else { return 1000 };
    let mut q = units * 1000;
    i += 1;
    if h.get(i) == Some(&b'.') {
        i += 1;
        for scale in [100, 10, 1] {
            match digit(i) {
                Some(d) => {
                    q += d * scale;
                    i += 1;
                }
                None => break,
            }
        }
    }
    *at = i;
    q.min(1000)
}

/// Appends `v` in decimal.
fn push_u64(o: &mut Vec<u8>, v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = v;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    o.extend_from_slice(&digits[i..]);
}

/// Appends a variable's value as text.
/// Whether `a` and `b` are equal, in a time that depends only on their length when the
/// lengths are the same (CRYPTO_memcmp's contract, which `secure_memcmp` promises).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

fn append_stored(st: Stored, bytes: &[u8], o: &mut Vec<u8>) {
    let _ = match st {
        Stored::Str | Stored::Bin | Stored::Meth => {
            o.extend_from_slice(bytes);
            Ok(())
        }
        Stored::Bool(b) => write!(o, "{}", b as u8),
        Stored::Sint(v) => write!(o, "{v}"),
        Stored::Ipv4(a) => write!(o, "{a}"),
        Stored::Ipv6(a) => write!(o, "{a}"),
    };
}

/// `host_only` / `port_only`: a Host value cut at its port (`[v6]:port` understood).
fn split_host(h: &[u8]) -> (&[u8], Option<&[u8]>) {
    if h.first() == Some(&b'[') {
        if let Some(end) = h.iter().position(|&c| c == b']') {
            let rest = &h[end + 1..];
            return (&h[..=end], rest.strip_prefix(b":"));
        }
    }
    match h.iter().rposition(|&c| c == b':') {
        Some(p) if !h[..p].contains(&b':') => (&h[..p], Some(&h[p + 1..])),
        _ => (h, None),
    }
}

/// `field(idx,delims,count)`: fields split at any delimiter byte, 1-based, negative from the
/// end; `count` fields joined with their delimiters, 0 meaning to the end.
fn field<'i>(s: &'i [u8], idx: i64, delims: &[u8], count: i64) -> Option<&'i [u8]> {
    let bounds = |k: i64| -> Option<(usize, usize)> {
        // k-th field (1-based) as a byte range.
        let mut start = 0;
        let mut n = 1;
        for (i, c) in s.iter().enumerate() {
            if delims.contains(c) {
                if n == k {
                    return Some((start, i));
                }
                n += 1;
                start = i + 1;
            }
        }
        (n == k).then_some((start, s.len()))
    };
    let total = 1 + s.iter().filter(|c| delims.contains(c)).count() as i64;
    let (first, last) = if idx > 0 {
        let last = if count == 0 {
            total
        } else {
            (idx + count - 1).min(total)
        };
        (idx, last)
    } else {
        let last = total + idx + 1;
        let first = if count == 0 {
            1
        } else {
            (last - count + 1).max(1)
        };
        (first, last)
    };
    // A field that does not exist is no sample (HAProxy 2.6; `word` gives an empty string).
    if first < 1 || first > total || last < first {
        return None;
    }
    let (a, _) = bounds(first)?;
    let (_, b) = bounds(last)?;
    Some(&s[a..b])
}

/// `word(idx,delims,count)`: like `field` but runs of delimiters count as one and leading or
/// trailing delimiters are ignored.
fn word<'i>(s: &'i [u8], idx: i64, delims: &[u8], count: i64) -> Option<&'i [u8]> {
    // Word ranges, without allocating: walk twice when counting from the end.
    let words = || {
        let mut i = 0;
        std::iter::from_fn(move || {
            while i < s.len() && delims.contains(&s[i]) {
                i += 1;
            }
            if i >= s.len() {
                return None;
            }
            let st = i;
            while i < s.len() && !delims.contains(&s[i]) {
                i += 1;
            }
            Some((st, i))
        })
    };
    let total = words().count() as i64;
    let (first, last) = if idx > 0 {
        (
            idx,
            if count == 0 {
                total
            } else {
                (idx + count - 1).min(total)
            },
        )
    } else {
        let last = total + idx + 1;
        (
            if count == 0 {
                1
            } else {
                (last - count + 1).max(1)
            },
            last,
        )
    };
    if first < 1 || first > total || last < first {
        return Some(&[]);
    }
    let a = words().nth(first as usize - 1)?.0;
    let b = words().nth(last as usize - 1)?.1;
    Some(&s[a..b])
}

/// `regsub`: replaces the first (or, with `g`, every) match; `\0`..`\9` in `subst` insert
/// capture groups (that path allocates the regex crate's capture slots per call).
fn regsub(re: &Regex, global: bool, subst: &[u8], input: &[u8], out: &mut Vec<u8>) {
    let mut last = 0;
    // Without back-references, plain matches do (capture groups would allocate).
    if !subst
        .windows(2)
        .any(|w| w[0] == b'\\' && w[1].is_ascii_digit())
    {
        for m in re.find_iter(input) {
            out.extend_from_slice(&input[last..m.start()]);
            out.extend_from_slice(subst);
            last = m.end();
            if !global {
                break;
            }
        }
        out.extend_from_slice(&input[last..]);
        return;
    }
    for caps in re.captures_iter(input) {
        let m = caps.get(0).expect("group 0");
        out.extend_from_slice(&input[last..m.start()]);
        let mut i = 0;
        while i < subst.len() {
            if subst[i] == b'\\' && i + 1 < subst.len() && subst[i + 1].is_ascii_digit() {
                if let Some(g) = caps.get((subst[i + 1] - b'0') as usize) {
                    out.extend_from_slice(g.as_bytes());
                }
                i += 2;
            } else {
                out.push(subst[i]);
                i += 1;
            }
        }
        last = m.end();
        if !global {
            break;
        }
    }
    out.extend_from_slice(&input[last..]);
}

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const DAYS_LONG: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const MONTHS_LONG: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// Days since 1970-01-01 of a civil date (inverse of [`civil`]).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A strftime subset (the conversions HAProxy users put in `ltime`/`utime` formats) for time
/// `t` shifted by `tz` seconds; `%z` prints `tz`.
pub fn strftime(fmt: &[u8], t: i64, tz: i64, o: &mut Vec<u8>) {
    let lt = t + tz;
    let days = lt.div_euclid(86_400);
    let secs = lt.rem_euclid(86_400);
    let (y, mo, d) = civil(days);
    let (h, mi, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let wday = (days + 4).rem_euclid(7) as usize;
    let yday = days - days_from_civil(y, 1, 1);
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' || i + 1 == fmt.len() {
            o.push(fmt[i]);
            i += 1;
            continue;
        }
        let _ = match fmt[i + 1] {
            b'Y' => write!(o, "{y}"),
            b'y' => write!(o, "{:02}", y.rem_euclid(100)),
            b'C' => write!(o, "{:02}", y.div_euclid(100)),
            b'm' => write!(o, "{mo:02}"),
            b'd' => write!(o, "{d:02}"),
            b'e' => write!(o, "{d:2}"),
            b'H' => write!(o, "{h:02}"),
            b'I' => write!(o, "{:02}", if h % 12 == 0 { 12 } else { h % 12 }),
            b'p' => write!(o, "{}", if h < 12 { "AM" } else { "PM" }),
            b'M' => write!(o, "{mi:02}"),
            b'S' => write!(o, "{s:02}"),
            b'j' => write!(o, "{:03}", yday + 1),
            b'a' => write!(o, "{}", DAYS[wday]),
            b'A' => write!(o, "{}", DAYS_LONG[wday]),
            b'b' | b'h' => write!(o, "{}", MONTHS[mo as usize - 1]),
            b'B' => write!(o, "{}", MONTHS_LONG[mo as usize - 1]),
            b'u' => write!(o, "{}", if wday == 0 { 7 } else { wday }),
            b'w' => write!(o, "{wday}"),
            b's' => write!(o, "{t}"),
            b'T' => write!(o, "{h:02}:{mi:02}:{s:02}"),
            b'R' => write!(o, "{h:02}:{mi:02}"),
            b'D' => write!(o, "{mo:02}/{d:02}/{:02}", y.rem_euclid(100)),
            b'F' => write!(o, "{y}-{mo:02}-{d:02}"),
            b'z' => write!(
                o,
                "{}{:02}{:02}",
                if tz < 0 { '-' } else { '+' },
                tz.abs() / 3600,
                tz.abs() / 60 % 60
            ),
            b'Z' => write!(o, "{}", if tz == 0 { "UTC" } else { "" }),
            b'n' => o.write_all(b"\n"),
            b't' => o.write_all(b"\t"),
            b'%' => write!(o, "%"),
            c => write!(o, "%{}", c as char),
        };
        i += 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::expr::Expr;
    use crate::rules::sample::to_bytes;
    use crate::rules::source::TestSource;
    use crate::rules::NameTable;

    fn run(expr: &str, src: &TestSource, names: &NameTable) -> Option<String> {
        let e = Expr::compile(expr, names).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let mut ev = Eval::new();
        let s = e.eval(src, &mut ev)?;
        let b = to_bytes(s, &mut ev)?;
        Some(String::from_utf8_lossy(ev.get(b)).into_owned())
    }

    /// Each expected value was read from haproxy 2.6.12 (`http-request set-var(txn.r) EXPR`,
    /// then `http-after-response set-header r %[var(txn.r)]`) for this request.
    #[test]
    fn converters_match_haproxy() {
        let names = NameTable::default();
        let src = TestSource::get(
            "/p/a.html?q=1",
            &[("Host", "www.example.com:8080"), ("X", "a, b"), ("X", "c")],
        );
        src.set_var(
            crate::rules::Scope::Txn,
            names.var(crate::rules::Scope::Txn, "v"),
            crate::rules::Value::Str(b"VAL"),
        );
        src.set_var(
            crate::rules::Scope::Txn,
            names.var(crate::rules::Scope::Txn, "vi"),
            crate::rules::Value::Sint(4),
        );
        src.set_var(
            crate::rules::Scope::Txn,
            names.var(crate::rules::Scope::Txn, "k"),
            crate::rules::Value::Str(b"a2V5"),
        );
        let cases: &[(&str, Option<&str>)] = &[
            ("str(abc),crc32", Some("891568578")),
            ("str(1f90),hex2i", Some("8080")),
            ("str(7F000001),hex2i", Some("2130706433")),
            ("str(12g),hex2i", None),
            // digest, sha2, hmac, secure_memcmp: haproxy 2.6.12's answers.
            (
                "str(abc),digest(md5),hex",
                Some("900150983CD24FB0D6963F7D28E17F72"),
            ),
            (
                "str(abc),sha2,hex",
                Some("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"),
            ),
            (
                "str(abc),sha2(384),hex",
                Some("CB00753F45A35E8BB5A03D699AC65007272C32AB0EDED1631A8B605A43FF5BED8086072BA1E7CC2358BAECA134C825A7"),
            ),
            (
                "str(abc),digest(SHA3-256),hex",
                Some("3A985DA74FE225B2045C172D6BD390BD855F086E3E9D525B46BFE24511431532"),
            ),
            (
                "str(abc),hmac(sha256,a2V5),hex",
                Some("9C196E32DC0175F86F4B1CB89289D6619DE6BEE699E4C378E68309ED97A1A6AB"),
            ),
            (
                "str(abc),hmac(md5,txn.k),hex",
                Some("D2FE98063F876B03193AFB49B4979591"),
            ),
            (
                "str(abc),hmac(sha512-256,),hex",
                Some("784CAC6AAFEFD5517029BAE0CD223D58111DC37F390D982FAE2A0548B5AA67EA"),
            ),
            // "VAL" is not base64: no result.
            ("str(abc),hmac(sha1,txn.v),hex", None),
            ("str(abc),secure_memcmp(txn.v)", Some("0")),
            ("str(VAL),secure_memcmp(txn.v)", Some("1")),
            ("int(4),secure_memcmp(txn.vi)", Some("1")),
            ("str(VAL),secure_memcmp(txn.nope)", None),
            // Issue 16: haproxy 2.6.12's answers.
            (
                "str(abc),sha1,hex",
                Some("A9993E364706816ABA3E25717850C26C9CD0D89D"),
            ),
            (
                "str(),sha1,hex",
                Some("DA39A3EE5E6B4B0D3255BFEF95601890AFD80709"),
            ),
            ("str(abc),crc32c", Some("910901175")),
            ("str(abc),crc32c(1)", Some("1285784220")),
            ("str(abc),xxh3", Some("8696274497037089104")),
            ("str(abc),xxh3(-5)", Some("-6165315974102190573")),
            ("str(),xxh3", Some("3244421341483603138")),
            // be2dec, be2hex, add_item: haproxy 2.6's answers in reg-tests converter/*.vtc.
            (
                "str(0123456789),be2dec(:,1)",
                Some("48:49:50:51:52:53:54:55:56:57"),
            ),
            (
                "str(0123456789),be2dec(-,3)",
                Some("3158322-3355701-3553080-57"),
            ),
            (
                "str(0123456789),be2dec(::,3,1)",
                Some("3158322::3355701::3553080"),
            ),
            ("str(),be2dec(:,1)", Some("")),
            ("str(0123456789),be2hex,lower", Some("30313233343536373839")),
            (
                "str(0123456789),be2hex(--,3),lower",
                Some("303132--333435--363738--39"),
            ),
            (
                "str(0123456789),be2hex(.,3,1),lower",
                Some("303132.333435.363738"),
            ),
            ("str(in),add_item(',',txn.v,_s_)", Some("in,VAL_s_")),
            ("str(),add_item(',',txn.v,_s_)", Some("VAL_s_")),
            ("str(in),add_item(',',,_s_)", Some("in,_s_")),
            ("str(in),add_item(',',txn.nope)", Some("in")),
            ("str(abc),crc32(1)", Some("930845320")),
            ("str(abc),djb2(1)", Some("2235766107")),
            ("str(abc),sdbm(1)", Some("659243622")),
            ("str(abc),wt6(1)", Some("266135527")),
            ("str(abc),xxh32(1)", Some("2856167679")),
            ("str(abc),xxh64", Some("4952883123889572249")),
            ("str(abc),xxh64(1)", Some("-4708009277469325048")),
            ("str(abcd),base64", Some("YWJjZA==")),
            ("str(YWJjZA==),b64dec", Some("abcd")),
            ("str(abc),hex", Some("616263")),
            ("base32,hex", Some("000000006E6B160B")),
            ("src,ipmask(24)", Some("127.0.0.0")),
            ("int(5),neg", Some("-5")),
            ("int(5),cpl", Some("-6")),
            ("int(5),div(0)", Some("9223372036854775807")),
            ("int(5),mod(0)", Some("0")),
            ("int(-7),div(2)", Some("-3")),
            ("int(-7),mod(2)", Some("-1")),
            ("str(12abc),add(1)", Some("13")),
            ("str(abc),add(1)", Some("1")),
            ("str( 12),add(1)", Some("1")),
            ("str(a:b:c:d),field(2,:)", Some("b")),
            ("str(a:b:c:d),field(2,:,2)", Some("b:c")),
            ("str(a:b:c:d),field(-1,:)", Some("d")),
            ("str(a:b:c:d),field(2,:,0)", Some("b:c:d")),
            ("str(abcdefg),field(2,bd)", Some("c")),
            ("str(::a::b),word(2,:)", Some("b")),
            ("str(::a::b),word(-1,:)", Some("b")),
            ("str(a b c),word(2, )", Some("b")),
            ("str(abcd),length", Some("4")),
            ("bool(1),iif(y,n)", Some("y")),
            ("int(3),bool", Some("1")),
            ("int(0),not", Some("1")),
            ("bool(1),not", Some("0")),
            ("str(yes),bool", Some("0")),
            ("str(),bool", None),
            ("req.hdr(host),host_only", Some("www.example.com")),
            ("req.hdr(host),port_only", Some("8080")),
            ("int(0),http_date", Some("Thu, 01 Jan 1970 00:00:00 GMT")),
            (
                "int(0),http_date(3600)",
                Some("Thu, 01 Jan 1970 01:00:00 GMT"),
            ),
            (
                "int(0),utime(%Y-%m-%d %H:%M:%S)",
                Some("1970-01-01 00:00:00"),
            ),
            ("str(AbC),lower", Some("abc")),
            ("str(AbC),upper", Some("ABC")),
            ("int(12),ipmask(32)", Some("0.0.0.12")),
            ("str(1.2.3.4),ipmask(16)", Some("1.2.0.0")),
            ("ipv6(2001:db8::1),ipmask(24,64)", Some("2001:db8::")),
            // An IPv6 address as the mask.
            (
                "ipv6(2001:db8:c001:c01a:ffff:ffff:20:ffff),ipmask(24,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00)",
                Some("2001:db8:c001:c01a:ffff:ffff:20:ff00"),
            ),
            ("str(aa),ipmask(8)", None),
            ("bool(0),add(3)", Some("3")),
            ("int(7),and(3)", Some("3")),
            ("int(7),or(8)", Some("15")),
            ("int(7),xor(1)", Some("6")),
            ("int(7),mul(3)", Some("21")),
            ("int(7),sub(10)", Some("-3")),
            ("str(3),mul(txn.vi)", Some("12")),
            ("str(3),add(txn.nope)", None),
            ("meth(FOO),lower", Some("foo")),
            ("str(abc),strcmp(txn.v)", Some("11")),
            ("str(xx),strcmp(txn.nope)", None),
            ("str(x),concat(<,txn.v,>)", Some("x<VAL>")),
            ("str(x),concat(a,txn.nope,b)", Some("xab")),
            ("str(x),set-var(txn.v),concat(<,txn.v,>)", Some("x<x>")),
            ("str(hello),regsub(l,L)", Some("heLlo")),
            ("str(hello),regsub(l,L,g)", Some("heLLo")),
            ("str(hello),regsub(L,X,gi)", Some("heXXo")),
            ("str(hello),regsub(\"(l+)o\",<\\1>)", Some("he<ll>")),
            ("str(a%20b%2Fc+d),url_dec", Some("a b/c+d")),
            ("str(a%ZZ),url_dec", None),
            ("str(a b),url_enc(query)", Some("a%20b")),
            ("str(a\\\"b),json", Some("a\\\"b")),
        ];
        for (e, want) in cases {
            assert_eq!(run(e, &src, &names).as_deref(), *want, "{e}");
        }
    }

    /// Same maps and expected values as the haproxy 2.6 run (comments, blank lines, first
    /// match in file order for `map_beg`, longest prefix for `map_ip`).
    #[test]
    fn maps_match_haproxy() {
        let dir = std::env::temp_dir().join(format!("bascule-maps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        };
        let m = file("m.map", "# comment\nabc  val1\nab   val2\n\nzz*  val3\n");
        let ip = file(
            "ip.map",
            "127.0.0.0/8 local\n10.0.0.0/8 ten\n127.0.0.1/32 host\n",
        );
        let int = file("int.map", "5 five\n6 six\n");
        let dom = file("dom.map", "example.com dom\n");
        let si = file("si.map", "ab 12\n");
        let names = NameTable::default();
        let src = TestSource::get("/", &[]);
        let cases = [
            (format!("str(abc),map_str({m},def)"), Some("val1")),
            (format!("str(abcd),map_beg({m},def)"), Some("val1")),
            (format!("str(zzz),map({m},def)"), Some("def")),
            (format!("str(zzz),map({m})"), None),
            (format!("src,map_ip({ip},def)"), Some("host")),
            (format!("str(10.1.1.1),map_ip({ip},def)"), Some("ten")),
            (format!("int(5),map_int({int},def)"), Some("five")),
            (
                format!("str(www.example.com),map_dom({dom},def)"),
                Some("dom"),
            ),
            (format!("str(zz*),map_reg({m},def)"), Some("val3")),
            (format!("str(ab),map_str_int({si},7)"), Some("12")),
            (format!("str(ac),map_str_int({si},7)"), Some("7")),
        ];
        for (e, want) in cases {
            assert_eq!(run(&e, &src, &names).as_deref(), want, "{e}");
        }
        let e = Expr::compile(&format!("str(x),map_int_int({m})"), &names).unwrap_err();
        assert!(e.message.ends_with("m.map:2: 'abc' is not a number"), "{e}");
        let e = Expr::compile(&format!("str(x),map_str_int({m})"), &names).unwrap_err();
        assert!(
            e.message
                .ends_with("m.map:2: map value 'val1' is not an integer"),
            "{e}"
        );
        let e = Expr::compile("str(x),map(/nonexistent.map)", &names).unwrap_err();
        assert!(e.message.contains("failed to open pattern file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn strftime_fields() {
        let mut o = Vec::new();
        strftime(b"%a %d %b %Y %T %j %z", 1_700_000_000, 0, &mut o);
        assert_eq!(o, b"Tue 14 Nov 2023 22:13:20 318 +0000");
        o.clear();
        strftime(b"%F %H", 0, 3600, &mut o);
        assert_eq!(o, b"1970-01-01 01");
    }

    #[test]
    fn converter_errors() {
        let names = NameTable::default();
        let e = Expr::compile("path,field(x,:)", &names).unwrap_err();
        assert!(e.message.contains("converter 'field'"), "{e}");
        let e = Expr::compile("path,regsub((,x)", &names).unwrap_err();
        assert!(e.message.contains("invalid regex"), "{e}");
        let e = Expr::compile("path,add(foo)", &names).unwrap_err();
        assert!(e.message.contains("an integer or a variable"), "{e}");
        let e = Expr::compile("path,lower(1)", &names).unwrap_err();
        assert!(e.message.contains("expects 0 argument"), "{e}");
        let e = Expr::compile("path,digest(ripemd160)", &names).unwrap_err();
        assert!(
            e.message.contains("'ripemd160' is not a message digest"),
            "{e}"
        );
        let e = Expr::compile("path,sha2(100)", &names).unwrap_err();
        assert!(e.message.contains("unsupported number of bits"), "{e}");
        let e = Expr::compile("path,hmac(sha1,abc)", &names).unwrap_err();
        assert!(e.message.contains("base64 encoded or a variable"), "{e}");
        let e = Expr::compile("path,secure_memcmp(x)", &names).unwrap_err();
        assert!(e.message.contains("a variable"), "{e}");
        let e = Expr::compile("path,mqtt_field_value(connected,flags)", &names).unwrap_err();
        assert!(e.message.contains("Unknown MQTT type 'connected'"), "{e}");
        let e = Expr::compile("path,mqtt_field_value(connect,18)", &names).unwrap_err();
        assert!(
            e.message
                .contains("Unknown MQTT field name '18' for packet type 'connect'"),
            "{e}"
        );
    }

    /// The MQTT converters over a whole CONNACK, a CONNECT cut short and a PINGREQ.
    #[test]
    fn mqtt_converters() {
        let names = NameTable::default();
        let src = TestSource::get("/", &[]);
        let eval = |expr: &str| {
            let e = Expr::compile(expr, &names).unwrap_or_else(|e| panic!("{expr}: {e}"));
            let mut ev = Eval::new();
            let v = e.eval(&src, &mut ev).and_then(|s| to_bytes(s, &mut ev));
            let v = v.map(|b| String::from_utf8_lossy(ev.get(b)).into_owned());
            (v, ev.need_more)
        };
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("bin(20020105),mqtt_is_valid", Some("1"), false),
            (
                "bin(20020105),mqtt_field_value(connack,reason_code)",
                Some("5"),
                false,
            ),
            (
                "bin(20020105),mqtt_field_value(2,protocol_version)",
                Some("4"),
                false,
            ),
            // The right packet, a field it does not carry: final.
            ("bin(20020105),mqtt_field_value(connack,17)", None, false),
            ("bin(20020105),mqtt_field_value(connect,flags)", None, false),
            ("bin(d000),mqtt_is_valid", Some("0"), false),
            // Incomplete: no value, more may come.
            ("bin(101a00044d51),mqtt_is_valid", None, true),
            (
                "bin(101a00044d51),mqtt_field_value(connect,flags)",
                None,
                true,
            ),
        ];
        for (expr, want, more) in cases {
            assert_eq!(eval(expr), (want.map(str::to_string), *more), "{expr}");
        }
    }
}

/// base64url (`-` and `_`, padding optional) decoded into `out`; false on a bad character or
/// length.
fn ub64_decode(data: &[u8], out: &mut Vec<u8>) -> bool {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        } as u32)
    };
    let data = data
        .strip_suffix(b"==")
        .or_else(|| data.strip_suffix(b"="))
        .unwrap_or(data);
    if data.len() % 4 == 1 {
        return false;
    }
    for q in data.chunks(4) {
        let mut n = 0u32;
        for &c in q {
            match val(c) {
                Some(v) => n = n << 6 | v,
                None => return false,
            }
        }
        n <<= 6 * (4 - q.len()) as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..q.len() - 1]);
    }
    true
}

#[cfg(test)]
mod ub64_tests {
    use super::*;

    #[test]
    fn base64url_round_trips() {
        let mut out = Vec::new();
        assert!(ub64_decode(b"aGVsbG8-Pz8_", &mut out));
        assert_eq!(out, b"hello>???");
        out.clear();
        assert!(ub64_decode(b"YQ", &mut out));
        assert_eq!(out, b"a");
        out.clear();
        assert!(ub64_decode(b"YWI", &mut out));
        assert_eq!(out, b"ab");
        out.clear();
        assert!(!ub64_decode(b"Y", &mut out));
    }
}
