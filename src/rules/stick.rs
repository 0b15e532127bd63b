//! Stick-table fetches, converters and actions: `sc_*`, `sc0_*`..`sc2_*`, `src_*`,
//! `table_avl`, `table_cnt`, the `table_*` converters and `in_table`, and the compiled forms
//! of `track-sc0|1|2`, `sc-inc-gpc*` and `sc-set-gpt*`.
//!
//! Why a module of its own: the family is a grid (a counter source times a stored data type,
//! more than a hundred names), so its catalogue is generated once from two short lists
//! instead of being spelled out in `fetch.rs`, and its evaluation needs the tables and the
//! session's tracked entries, which only this module asks [`Source`] for.
//!
//! Values follow HAProxy 2.6 (`smp_fetch_sc_*`, `sample_conv_table_*`):
//!
//! - `scN_*` / `sc_*(N)`: the entry slot N tracks (the stream's, else the session's); the
//!   fetch fails when nothing is tracked there. With a table argument, the same key is looked
//!   up in that table instead (absent: 0).
//! - `src_*`: the client address looked up in the table (the proxy's own by default); absent
//!   key: 0. `src_inc_*`, `src_clr_*` and `src_updt_conn_cnt` create the entry.
//! - A data type the table does not store makes the fetch fail when the entry exists (and
//!   gives 0 when it does not), as HAProxy checks the entry first.
//! - `kbytes_*` are the byte counts divided by 1024.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use super::conv::ConvDef;
use super::expr::Expr;
use super::fetch::{Arg, ArgKind, Fetch, FetchDef, F};
use super::sample::{cast, Eval, Sample, SmpType};
use super::source::Source;
use super::{Names, Phases, RuleError};
use crate::stick::data::DataType;
use crate::stick::table::{Entry, Key, KeyType, Table, Value};

/// Which entry a fetch reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// `sc0_*`, `sc1_*`, `sc2_*`.
    Sc(u8),
    /// `sc_*(N, ...)`: the slot is an argument.
    ScArg,
    /// `src_*`: the client address.
    Src,
    /// `table_avl`, `table_cnt`: no entry.
    Table,
}

/// What a fetch or converter does with the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Reads a stored data type (element 0).
    Read(DataType),
    /// Reads element `idx` (an argument) of an array type (`get_gpc`, `gpc_rate`, `get_gpt`).
    ReadIdx(DataType),
    /// A byte count divided by 1024.
    Kbytes(DataType),
    /// Increments a counter and its rate (`inc_gpc0`, `inc_gpc1`; `IncIdx`: `inc_gpc(IDX)`).
    Inc(DataType, DataType),
    IncIdx,
    /// Clears a counter, returning its previous value.
    Clr(DataType),
    ClrIdx,
    /// Sessions tracking the entry.
    Trackers,
    /// Whether the slot is tracked.
    Tracked,
    /// `src_updt_conn_cnt`: creates the entry, counts a connection.
    UpdtConnCnt,
    /// Free entries in the table.
    Avl,
    /// Entries in the table.
    Cnt,
    /// `in_table`: whether the key is present.
    InTable,
    /// `table_expire`: milliseconds before the entry expires.
    Expire,
    /// `table_idle`: milliseconds since the entry was last touched.
    Idle,
}

/// The stick part of a fetch definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchOp {
    pub ctr: Counter,
    pub op: Op,
}

/// Whether an operation takes an array index as its first argument.
fn indexed(op: Op) -> bool {
    matches!(op, Op::ReadIdx(_) | Op::IncIdx | Op::ClrIdx)
}

/// The data-type suffixes of the `sc*_`/`src_`/`table_` families and what they do.
fn suffixes() -> Vec<(&'static str, Op)> {
    use DataType as D;
    vec![
        ("bytes_in_rate", Op::Read(D::BytesInRate)),
        ("bytes_out_rate", Op::Read(D::BytesOutRate)),
        ("conn_cnt", Op::Read(D::ConnCnt)),
        ("conn_cur", Op::Read(D::ConnCur)),
        ("conn_rate", Op::Read(D::ConnRate)),
        ("gpc0_rate", Op::Read(D::Gpc0Rate)),
        ("gpc1_rate", Op::Read(D::Gpc1Rate)),
        ("http_err_cnt", Op::Read(D::HttpErrCnt)),
        ("http_err_rate", Op::Read(D::HttpErrRate)),
        ("http_fail_cnt", Op::Read(D::HttpFailCnt)),
        ("http_fail_rate", Op::Read(D::HttpFailRate)),
        ("http_req_cnt", Op::Read(D::HttpReqCnt)),
        ("http_req_rate", Op::Read(D::HttpReqRate)),
        ("kbytes_in", Op::Kbytes(D::BytesInCnt)),
        ("kbytes_out", Op::Kbytes(D::BytesOutCnt)),
        ("sess_cnt", Op::Read(D::SessCnt)),
        ("sess_rate", Op::Read(D::SessRate)),
        ("trackers", Op::Trackers),
    ]
}

/// Names of the fetches only (`get_*`, `inc_*`, `clr_*`...), with the counters they exist for.
fn fetch_only() -> Vec<(&'static str, Op, &'static [&'static str])> {
    use DataType as D;
    const ALL: &[&str] = &["sc", "scN", "src"];
    const SC: &[&str] = &["sc", "scN"];
    const ARR: &[&str] = &["sc", "src"];
    vec![
        ("get_gpc0", Op::Read(D::Gpc0), ALL),
        ("get_gpc1", Op::Read(D::Gpc1), ALL),
        ("get_gpt0", Op::Read(D::Gpt0), ALL),
        ("inc_gpc0", Op::Inc(D::Gpc0, D::Gpc0Rate), ALL),
        ("inc_gpc1", Op::Inc(D::Gpc1, D::Gpc1Rate), ALL),
        ("clr_gpc0", Op::Clr(D::Gpc0), ALL),
        ("clr_gpc1", Op::Clr(D::Gpc1), ALL),
        ("get_gpc", Op::ReadIdx(D::Gpc), ARR),
        ("gpc_rate", Op::ReadIdx(D::GpcRate), ARR),
        ("get_gpt", Op::ReadIdx(D::Gpt), ARR),
        ("inc_gpc", Op::IncIdx, ARR),
        ("clr_gpc", Op::ClrIdx, ARR),
        ("tracked", Op::Tracked, SC),
    ]
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

const TABLE_ARG: &[ArgKind] = &[ArgKind::Table];
const SC_ARGS: &[ArgKind] = &[ArgKind::Int, ArgKind::Table];
const IDX_SC_ARGS: &[ArgKind] = &[ArgKind::Int, ArgKind::Int, ArgKind::Table];
const IDX_ARGS: &[ArgKind] = &[ArgKind::Int, ArgKind::Table];

/// Every stick fetch, made once for the process (the names are a grid; see the module doc).
pub fn fetches() -> &'static [FetchDef] {
    static ALL: OnceLock<Vec<FetchDef>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v = Vec::new();
        let mut push = |name: String, args: &'static [ArgKind], min, ctr, op: Op| {
            let out = if op == Op::Tracked {
                SmpType::Bool
            } else {
                SmpType::Sint
            };
            v.push(FetchDef {
                name: leak(name),
                args,
                min,
                out,
                phases: Phases::ALL,
                multi: false,
                id: F::Stick,
                stick: Some(FetchOp { ctr, op }),
            });
        };
        let mut ops: Vec<(&str, Op, &[&str])> = suffixes()
            .into_iter()
            .map(|(s, op)| {
                let who: &[&str] = if op == Op::Trackers {
                    &["sc", "scN"]
                } else {
                    &["sc", "scN", "src"]
                };
                (s, op, who)
            })
            .collect();
        ops.extend(fetch_only());
        ops.push(("updt_conn_cnt", Op::UpdtConnCnt, &["src"]));
        for (suffix, op, who) in ops {
            for w in who {
                match *w {
                    "sc" if indexed(op) => {
                        push(format!("sc_{suffix}"), IDX_SC_ARGS, 2, Counter::ScArg, op)
                    }
                    "sc" => push(format!("sc_{suffix}"), SC_ARGS, 1, Counter::ScArg, op),
                    "scN" => {
                        for n in 0..3u8 {
                            push(format!("sc{n}_{suffix}"), TABLE_ARG, 0, Counter::Sc(n), op);
                        }
                    }
                    _ if indexed(op) => {
                        push(format!("src_{suffix}"), IDX_ARGS, 2, Counter::Src, op)
                    }
                    _ => push(format!("src_{suffix}"), TABLE_ARG, 0, Counter::Src, op),
                }
            }
        }
        push("table_avl".into(), TABLE_ARG, 0, Counter::Table, Op::Avl);
        push("table_cnt".into(), TABLE_ARG, 0, Counter::Table, Op::Cnt);
        v
    })
}

/// Fills the default table (the proxy's own) of a fetch that needs one, or says there is none.
pub fn default_table(f: &mut Fetch, names: &dyn Names) -> Result<(), RuleError> {
    let Some(op) = f.def.stick else { return Ok(()) };
    let needs = matches!(op.ctr, Counter::Src | Counter::Table);
    let last = f.args.len() - 1;
    if needs && f.args[last].is_none() {
        match names.current_table() {
            Some(t) => f.args[last] = Some(Arg::Table(t)),
            None => {
                return Err(RuleError::new(format!(
                    "fetch method '{}': the proxy has no stick table (declare one with 'stick-table' or name one as the last argument)",
                    f.def.name
                )))
            }
        }
    }
    Ok(())
}

/// An entry borrowed from a session's tracked slot, or looked up in a table.
enum Ent<'a> {
    Ref(&'a Entry),
    Own(Arc<Entry>),
}

impl std::ops::Deref for Ent<'_> {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        match self {
            Ent::Ref(e) => e,
            Ent::Own(e) => e,
        }
    }
}

/// The client address as a key of `t`.
fn src_key<S: Source + ?Sized>(t: &Table, src: &S) -> Option<Key> {
    let ip: IpAddr = src.src()?.ip();
    match t.spec.key {
        KeyType::Ip | KeyType::Ipv6 => t.spec.key.key_from_ip(ip),
        _ => {
            // HAProxy casts the address to the table's type: text for strings, the IPv4
            // number for integers, the address bytes for binary.
            let mut ev = Eval::new();
            let s = match ip {
                IpAddr::V4(a) => Sample::Ipv4(a),
                IpAddr::V6(a) => Sample::Ipv6(a),
            };
            sample_key(t.spec.key, s, &mut ev)
        }
    }
}

/// A sample as a key of type `kt` (HAProxy's `smp_to_stkey`); `None` when it does not cast.
pub fn sample_key(kt: KeyType, s: Sample<'_>, ev: &mut Eval) -> Option<Key> {
    match kt {
        KeyType::Ip => match cast(s, SmpType::Ipv4, ev)? {
            Sample::Ipv4(a) => Some(Key::Ip(a.octets())),
            _ => None,
        },
        KeyType::Ipv6 => match cast(s, SmpType::Ipv6, ev)? {
            Sample::Ipv6(a) => Some(Key::Ipv6(a.octets())),
            _ => None,
        },
        KeyType::Integer => match cast(s, SmpType::Sint, ev)? {
            Sample::Sint(v) => kt.key_from_int(v),
            _ => None,
        },
        KeyType::String { .. } => {
            let c = cast(s, SmpType::Str, ev)?;
            let v = ev.value(c);
            kt.key_from_bytes(v.as_bytes()?)
        }
        KeyType::Binary { .. } => {
            let c = cast(s, SmpType::Bin, ev)?;
            let v = ev.value(c);
            kt.key_from_bytes(v.as_bytes()?)
        }
    }
}

/// The slot of element `idx` of `d` in `t`, with HAProxy 2.6's fallback of the numbered
/// forms on the arrays: `gpc0`/`gpc1` on `gpc[0]`/`gpc[1]`, their rates on `gpc_rate`,
/// `gpt0` on `gpt[0]`, when the table stores the array instead.
pub fn data_slot(t: &Table, d: DataType, idx: u8) -> Option<crate::stick::Slot> {
    use DataType as D;
    t.schema.slot(d, idx).or_else(|| match d {
        D::Gpc0 => t.schema.slot(D::Gpc, 0),
        D::Gpc1 => t.schema.slot(D::Gpc, 1),
        D::Gpc0Rate => t.schema.slot(D::GpcRate, 0),
        D::Gpc1Rate => t.schema.slot(D::GpcRate, 1),
        D::Gpt0 => t.schema.slot(D::Gpt, 0),
        _ => None,
    })
}

fn num(v: Value) -> i64 {
    match v {
        Value::Uint(u) => u as i64,
        Value::Sint(i) => i,
        Value::Str(_) => 0,
    }
}

/// Evaluates a stick fetch.
pub fn fetch<'a, S: Source + ?Sized>(f: &'a Fetch, src: &'a S) -> Option<Sample<'a>> {
    let op = f.def.stick?;
    let int = |i: usize| match f.args.get(i) {
        Some(Some(Arg::Int(v))) => Some(*v),
        _ => None,
    };
    let table_arg = match f.args.last() {
        Some(Some(Arg::Table(t))) => Some(*t),
        _ => None,
    };
    let idx = if indexed(op.op) { int(0) } else { None };
    let now = src.stick_now();
    let (table, ent): (&Table, Option<Ent<'_>>) = match op.ctr {
        Counter::Table => {
            let t = src.stick_table(table_arg?)?;
            let used = t.used() as i64;
            return Some(Sample::Sint(match op.op {
                Op::Avl => (t.spec.size as i64 - used).max(0),
                _ => used,
            }));
        }
        Counter::Src => {
            let t = src.stick_table(table_arg?)?;
            let key = src_key(t, src)?;
            let creates = matches!(
                op.op,
                Op::Inc(..) | Op::IncIdx | Op::Clr(_) | Op::ClrIdx | Op::UpdtConnCnt
            );
            let e = if creates {
                t.get_or_create(&key, now, false)
            } else {
                t.get(&key, now)
            };
            (t, e.map(Ent::Own))
        }
        Counter::Sc(_) | Counter::ScArg => {
            let n = match op.ctr {
                Counter::Sc(n) => i64::from(n),
                _ => int(usize::from(indexed(op.op)))?,
            };
            let n = usize::try_from(n).ok()?;
            let tracked = src.stick_tracked(n);
            if op.op == Op::Tracked {
                return Some(Sample::Bool(tracked.is_some()));
            }
            let tracked = tracked?;
            match table_arg {
                Some(t) if t != tracked.table => {
                    let table = src.stick_table(t)?;
                    let e = table.get(tracked.entry.key(), now);
                    (table, e.map(Ent::Own))
                }
                _ => (
                    src.stick_table(tracked.table)?,
                    Some(Ent::Ref(tracked.entry.entry())),
                ),
            }
        }
    };
    apply(op.op, table, ent.as_deref(), idx, now).map(Sample::Sint)
}

/// What an operation gives on an entry of `t` (`None`: the fetch fails).
fn apply(op: Op, t: &Table, e: Option<&Entry>, idx: Option<i64>, now: u64) -> Option<i64> {
    let idx = match idx {
        Some(i) => Some(u8::try_from(i).ok()?),
        None => None,
    };
    if op == Op::InTable {
        return Some(i64::from(e.is_some()));
    }
    let Some(e) = e else {
        return Some(0);
    };
    let slot = |d: DataType| data_slot(t, d, idx.unwrap_or(0));
    Some(match op {
        Op::Read(d) | Op::ReadIdx(d) => num(e.read(slot(d)?, now)),
        Op::Kbytes(d) => num(e.read(slot(d)?, now)) >> 10,
        Op::Inc(_, _) | Op::IncIdx => {
            let (cnt, rate) = match op {
                Op::Inc(c, r) => (c, r),
                _ => (DataType::Gpc, DataType::GpcRate),
            };
            let mut v = 0;
            if let Some(s) = slot(rate) {
                v = e.add(s, now, 1) as i64;
            }
            if let Some(s) = slot(cnt) {
                v = e.add(s, now, 1) as i64;
            }
            v
        }
        Op::Clr(_) | Op::ClrIdx => {
            let d = match op {
                Op::Clr(d) => d,
                _ => DataType::Gpc,
            };
            let s = slot(d)?;
            let v = num(e.read(s, now));
            e.set(s, now, 0);
            v
        }
        Op::Trackers => i64::from(e.refs()),
        Op::UpdtConnCnt => e.add(slot(DataType::ConnCnt)?, now, 1) as i64,
        Op::Tracked | Op::Avl | Op::Cnt | Op::InTable | Op::Expire | Op::Idle => return None,
    })
}

/// The `table_*` converters and `in_table`.
pub fn converters() -> &'static [(ConvDef, Op)] {
    static ALL: OnceLock<Vec<(ConvDef, Op)>> = OnceLock::new();
    ALL.get_or_init(|| {
        use DataType as D;
        let mut ops = suffixes();
        ops.extend([
            ("gpc0", Op::Read(D::Gpc0)),
            ("gpc1", Op::Read(D::Gpc1)),
            ("gpt0", Op::Read(D::Gpt0)),
            ("server_id", Op::Read(D::ServerId)),
            ("gpc", Op::ReadIdx(D::Gpc)),
            ("gpc_rate", Op::ReadIdx(D::GpcRate)),
            ("gpt", Op::ReadIdx(D::Gpt)),
        ]);
        let mut v: Vec<(ConvDef, Op)> = ops
            .into_iter()
            .map(|(s, op)| {
                let n = if indexed(op) { 2 } else { 1 };
                (
                    ConvDef::stick(leak(format!("table_{s}")), n, SmpType::Sint),
                    op,
                )
            })
            .collect();
        v.push((ConvDef::stick("in_table", 1, SmpType::Bool), Op::InTable));
        v.push((ConvDef::stick("table_expire", 2, SmpType::Sint), Op::Expire));
        v.push((ConvDef::stick("table_idle", 2, SmpType::Sint), Op::Idle));
        v
    })
}

/// A compiled `table_*` converter: the operation, its table and array index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvCall {
    pub op: Op,
    pub table: usize,
    pub idx: Option<i64>,
    /// `table_expire` and `table_idle`: the value for an absent key (none: the converter
    /// fails).
    pub default: Option<i64>,
}

/// Compiles the arguments of a `table_*` converter (`[IDX,]TABLE`).
pub fn compile_conv(
    name: &str,
    op: Op,
    args: &[String],
    names: &dyn Names,
) -> Result<ConvCall, RuleError> {
    if matches!(op, Op::Expire | Op::Idle) {
        if args.is_empty() || args.len() > 2 {
            return Err(RuleError::new(format!(
                "converter '{name}' expects a table and an optional default value, got {} argument(s)",
                args.len()
            )));
        }
        let default = match args.get(1) {
            Some(d) => Some(super::fetch::parse_int_arg(d).ok_or_else(|| {
                RuleError::new(format!(
                    "converter '{name}': argument 2 '{d}' is not an integer"
                ))
            })?),
            None => None,
        };
        let t = &args[0];
        let table = names.table(t).ok_or_else(|| {
            RuleError::new(format!(
                "converter '{name}': unable to find table '{t}'{}",
                super::did_you_mean(t, names.table_names().iter().map(String::as_str))
            ))
        })?;
        return Ok(ConvCall {
            op,
            table,
            idx: None,
            default,
        });
    }
    let want = if indexed(op) { 2 } else { 1 };
    if args.len() != want {
        return Err(RuleError::new(format!(
            "converter '{name}' expects {want} argument(s), got {}",
            args.len()
        )));
    }
    let idx = if indexed(op) {
        Some(
            super::fetch::parse_int_arg(&args[0])
                .filter(|i| (0..100).contains(i))
                .ok_or_else(|| {
                    RuleError::new(format!(
                        "converter '{name}': argument 1 '{}' is not an index from 0 to 99",
                        args[0]
                    ))
                })?,
        )
    } else {
        None
    };
    let t = &args[want - 1];
    let table = names.table(t).ok_or_else(|| {
        RuleError::new(format!(
            "converter '{name}': unable to find table '{t}'{}",
            super::did_you_mean(t, names.table_names().iter().map(String::as_str))
        ))
    })?;
    Ok(ConvCall {
        op,
        table,
        idx,
        default: None,
    })
}

/// Applies a `table_*` converter to `input`.
pub fn convert<'a, S: Source + ?Sized>(
    c: &ConvCall,
    input: Sample<'_>,
    src: &S,
    ev: &mut Eval,
) -> Option<Sample<'a>> {
    let t = src.stick_table(c.table)?;
    let key = sample_key(t.spec.key, input, ev)?;
    let now = src.stick_now();
    let e = t.get(&key, now);
    if matches!(c.op, Op::Expire | Op::Idle) {
        let Some(e) = e else {
            return c.default.map(Sample::Sint);
        };
        // What is left before the entry expires (a table without `expire` keeps entries
        // until evicted: 0 left), and for `table_idle` the part of `expire` already spent.
        let expire = u64::from(t.spec.expire.unwrap_or(0));
        let remain = if t.spec.expire.is_some() {
            e.expire().saturating_sub(now)
        } else {
            0
        };
        let v = if c.op == Op::Expire {
            remain
        } else {
            expire.saturating_sub(remain)
        };
        return Some(Sample::Sint(v as i64));
    }
    let mut v = apply(c.op, t, e.as_deref(), c.idx, now)?;
    if c.op == Op::Trackers && e.is_some() {
        // HAProxy 2.6 reads the count while its own lookup holds a reference.
        v += 1;
    }
    Some(if c.op == Op::InTable {
        Sample::Bool(v != 0)
    } else {
        Sample::Sint(v)
    })
}

// --- persistence: `stick match|on|store-request|store-response` ---

/// Which `stick` rule a backend line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickKind {
    /// `stick match`: look the key up, go to the server it names.
    Match,
    /// `stick on`: match, then store.
    On,
    /// `stick store-request`: store the key with the server chosen.
    StoreRequest,
    /// `stick store-response`: the same, the key fetched from the response.
    StoreResponse,
}

impl StickKind {
    pub fn matches(self) -> bool {
        matches!(self, StickKind::Match | StickKind::On)
    }
    pub fn stores_request(self) -> bool {
        matches!(self, StickKind::On | StickKind::StoreRequest)
    }
}

/// A compiled `stick` line: what it does, its key expression and its table.
#[derive(Debug)]
pub struct StickRule {
    pub kind: StickKind,
    pub key: Expr,
    pub table: usize,
}

/// The server an entry names, among `servers` as (server key, id): the one whose key
/// (its name, or its address with `srvkey addr`) is the entry's `server_key`, else the one
/// whose id is its `server_id` (HAProxy 2.6 looks the key up first).
pub fn stuck_server<K: AsRef<str>>(
    e: &Entry,
    t: &Table,
    servers: impl Iterator<Item = (K, u32)> + Clone,
    now: u64,
) -> Option<usize> {
    if t.schema.stores(DataType::ServerKey) {
        if let Some(i) = servers
            .clone()
            .position(|(k, _)| e.server_key_is(k.as_ref()))
        {
            return Some(i);
        }
    }
    let s = t.schema.slot(DataType::ServerId, 0)?;
    let id = num(e.read(s, now));
    servers.clone().position(|(_, i)| i64::from(i) == id)
}

/// Stores a server for `key` in `t` (creating the entry; `server_id` and `server_key`),
/// re-arming the entry's expiry, as HAProxy does when a stream's stick stores commit.
pub fn store_server(t: &Table, key: &Key, name: &str, id: u32, now: u64) {
    let Some(e) = t.get_or_create(key, now, false) else {
        return;
    };
    if let Some(s) = t.schema.slot(DataType::ServerId, 0) {
        e.set(s, now, i64::from(id));
    }
    if t.schema.stores(DataType::ServerKey) && !e.server_key_is(name) {
        e.set_server_key(Some(name));
    }
    t.changed(&e);
}

// --- actions ---

/// `track-sc0|1|2 KEY [table T]`.
#[derive(Debug)]
pub struct TrackSc {
    pub slot: u8,
    pub key: Expr,
    pub table: usize,
}

/// `sc-inc-gpc0(N)`, `sc-inc-gpc1(N)`, `sc-inc-gpc(IDX,N)`, `sc-set-gpt0(N) VALUE`,
/// `sc-set-gpt(IDX,N) VALUE`.
#[derive(Debug)]
pub enum ScAction {
    Inc {
        slot: u8,
        cnt: DataType,
        rate: DataType,
        idx: u8,
    },
    SetGpt {
        slot: u8,
        data: DataType,
        idx: u8,
        value: GptValue,
    },
}

/// The value of `sc-set-gpt*`: an integer or a sample expression.
#[derive(Debug)]
pub enum GptValue {
    Int(i64),
    Expr(Expr),
}

/// Parses `track-scN` into N; `None` for another action.
pub fn track_slot(action: &str) -> Option<Result<u8, RuleError>> {
    let n = action.strip_prefix("track-sc")?;
    Some(match n.parse::<u8>() {
        Ok(v) if (v as usize) < crate::stick::track::SLOTS => Ok(v),
        _ => Err(RuleError::new(format!(
            "'{action}': track-sc number exceeding 2 (only track-sc0, track-sc1 and track-sc2 exist)"
        ))),
    })
}

/// Parses the name of an `sc-inc-*` / `sc-set-*` action: (slot, counter, rate, index,
/// is-set). `None` for another action.
#[allow(clippy::type_complexity)]
pub fn sc_action_name(
    action: &str,
) -> Option<Result<(u8, DataType, DataType, u8, bool), RuleError>> {
    let (base, args) = match action.split_once('(') {
        Some((b, rest)) => (b, rest.strip_suffix(')')),
        None => (action, None),
    };
    use DataType as D;
    let (cnt, rate, set, arity) = match base {
        "sc-inc-gpc0" => (D::Gpc0, D::Gpc0Rate, false, 1),
        "sc-inc-gpc1" => (D::Gpc1, D::Gpc1Rate, false, 1),
        "sc-inc-gpc" => (D::Gpc, D::GpcRate, false, 2),
        "sc-set-gpt0" => (D::Gpt0, D::Gpt0, true, 1),
        "sc-set-gpt" => (D::Gpt, D::Gpt, true, 2),
        _ => return None,
    };
    let bad = |what: &str| Some(Err(RuleError::new(format!("'{action}': {what}"))));
    let Some(args) = args else {
        return bad(if arity == 1 {
            "expects a stick counter number in parentheses, as in '(0)'"
        } else {
            "expects an index and a stick counter number in parentheses, as in '(0,1)'"
        });
    };
    let parts: Vec<&str> = args.split(',').map(str::trim).collect();
    if parts.len() != arity {
        return bad(&format!("expects {arity} argument(s) in parentheses"));
    }
    let idx = if arity == 2 {
        match parts[0].parse::<u8>() {
            Ok(i) if i < 100 => i,
            _ => return bad(&format!("invalid index '{}' (0 to 99)", parts[0])),
        }
    } else {
        0
    };
    let slot = match parts[arity - 1].parse::<u8>() {
        Ok(n) if (n as usize) < crate::stick::track::SLOTS => n,
        _ => {
            return bad(&format!(
                "invalid stick counter '{}' (0, 1 or 2)",
                parts[arity - 1]
            ))
        }
    };
    Some(Ok((slot, cnt, rate, idx, set)))
}

/// Runs an `sc-*` action on the entry slot `slot` tracks (nothing when none is tracked).
pub fn run_sc(a: &ScAction, src: &dyn Source, ev: &mut Eval) {
    let slot = match a {
        ScAction::Inc { slot, .. } | ScAction::SetGpt { slot, .. } => *slot,
    };
    let Some(tr) = src.stick_tracked(usize::from(slot)) else {
        return;
    };
    let Some(t) = src.stick_table(tr.table) else {
        return;
    };
    let now = src.stick_now();
    let e = tr.entry.entry();
    match a {
        ScAction::Inc { cnt, rate, idx, .. } => {
            if let Some(s) = data_slot(t, *rate, *idx) {
                e.add(s, now, 1);
            }
            if let Some(s) = data_slot(t, *cnt, *idx) {
                e.add(s, now, 1);
            }
        }
        ScAction::SetGpt {
            data, idx, value, ..
        } => {
            let Some(s) = data_slot(t, *data, *idx) else {
                return;
            };
            let v = match value {
                GptValue::Int(v) => *v,
                GptValue::Expr(x) => match x.eval(src, ev) {
                    Some(smp) => match super::sample::to_int(smp, ev) {
                        Some(v) => v,
                        None => return,
                    },
                    None => return,
                },
            };
            e.set(s, now, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_has_the_families() {
        let names: Vec<&str> = fetches().iter().map(|d| d.name).collect();
        for n in [
            "sc0_http_req_rate",
            "sc2_kbytes_out",
            "sc_conn_cur",
            "sc_get_gpc",
            "src_conn_rate",
            "src_updt_conn_cnt",
            "sc1_tracked",
            "table_avl",
        ] {
            assert!(names.contains(&n), "{n}");
        }
        for n in ["sc0_get_gpc", "src_tracked", "sc3_conn_cur", "src_trackers"] {
            assert!(!names.contains(&n), "{n}");
        }
    }

    use crate::stick::data::Store;
    use crate::stick::table::TableSpec;
    use crate::stick::track::{Level, Trackers};

    /// A source with one table (index 0, "t") and the session's trackers.
    struct S {
        t: Arc<Table>,
        tr: Trackers,
    }

    impl Source for S {
        fn src(&self) -> Option<std::net::SocketAddr> {
            Some("10.0.0.1:4000".parse().unwrap())
        }
        fn stick_table(&self, t: usize) -> Option<&Table> {
            (t == 0).then_some(&*self.t)
        }
        fn stick_tracked(&self, n: usize) -> Option<&crate::stick::track::Track> {
            self.tr.get(n)
        }
        fn stick_now(&self) -> u64 {
            1000
        }
    }

    fn source(store: &[DataType]) -> S {
        let spec = TableSpec {
            key: KeyType::Ip,
            size: 4,
            expire: None,
            nopurge: false,
            srvkey_addr: false,
            store: store
                .iter()
                .map(|&data| Store {
                    data,
                    count: 1,
                    period: 1000,
                })
                .collect(),
        };
        S {
            t: Arc::new(Table::new("t", spec)),
            tr: Trackers::new(),
        }
    }

    fn names() -> super::super::NameTable {
        let n = super::super::NameTable {
            tables: vec!["t".into()],
            ..Default::default()
        };
        n.current_table.set(Some(0));
        n
    }

    fn eval(s: &S, expr: &str) -> Option<String> {
        let e = Expr::compile(expr, &names()).unwrap();
        let mut ev = Eval::new();
        let v = e.eval(s, &mut ev)?;
        Some(match ev.value(v) {
            super::super::Value::Sint(i) => i.to_string(),
            super::super::Value::Bool(b) => b.to_string(),
            other => format!("{other:?}"),
        })
    }

    #[test]
    fn values_as_haproxy_gives_them() {
        let s = source(&[DataType::Gpc0, DataType::HttpReqCnt]);
        // Nothing tracked: scN fetches fail, sc_tracked says false.
        assert_eq!(eval(&s, "sc0_get_gpc0"), None);
        assert_eq!(eval(&s, "sc0_tracked").as_deref(), Some("false"));
        // An absent key reads 0, whatever the data type.
        assert_eq!(eval(&s, "src_get_gpc0").as_deref(), Some("0"));
        assert_eq!(eval(&s, "src_conn_cur").as_deref(), Some("0"));
        assert_eq!(eval(&s, "table_cnt").as_deref(), Some("0"));
        // src_inc_gpc0 creates the entry.
        assert_eq!(eval(&s, "src_inc_gpc0").as_deref(), Some("1"));
        assert_eq!(eval(&s, "src_inc_gpc0").as_deref(), Some("2"));
        assert_eq!(eval(&s, "table_cnt").as_deref(), Some("1"));
        assert_eq!(eval(&s, "table_avl").as_deref(), Some("3"));
        // Present entry, data type not stored: the fetch fails.
        assert_eq!(eval(&s, "src_conn_cur"), None);
        // Tracked: sc0 reads the entry.
        let key = Key::Ip([10, 0, 0, 1]);
        let e = s.t.track(&key, 1000).unwrap();
        s.tr.set(0, Level::Stream, 0, &s.t, e, 1000);
        assert_eq!(eval(&s, "sc0_get_gpc0").as_deref(), Some("2"));
        assert_eq!(eval(&s, "sc_clr_gpc0(0)").as_deref(), Some("2"));
        assert_eq!(eval(&s, "sc0_get_gpc0").as_deref(), Some("0"));
        assert_eq!(eval(&s, "sc0_trackers").as_deref(), Some("1"));
        assert_eq!(eval(&s, "sc_tracked(0)").as_deref(), Some("true"));
        assert_eq!(eval(&s, "sc_get_gpc0(3)"), None);
        assert_eq!(eval(&s, "src,table_http_req_cnt(t)").as_deref(), Some("0"));
        assert_eq!(eval(&s, "src,in_table(t)").as_deref(), Some("true"));
        assert_eq!(
            eval(&s, "str(10.0.0.2),in_table(t)").as_deref(),
            Some("false")
        );
        // HAProxy 2.6 counts its own lookup in table_trackers.
        assert_eq!(eval(&s, "src,table_trackers(t)").as_deref(), Some("2"));
        // No `expire`: nothing left, nothing idle; an absent key takes the default.
        assert_eq!(eval(&s, "src,table_expire(t)").as_deref(), Some("0"));
        assert_eq!(
            eval(&s, "str(10.0.0.9),table_idle(t,-1)").as_deref(),
            Some("-1")
        );
        assert_eq!(eval(&s, "str(10.0.0.9),table_expire(t)"), None);
    }

    #[test]
    fn action_names() {
        assert_eq!(track_slot("track-sc2").unwrap().unwrap(), 2);
        assert!(track_slot("track-sc3").unwrap().is_err());
        assert!(track_slot("deny").is_none());
        let (slot, cnt, _, idx, set) = sc_action_name("sc-inc-gpc(3,1)").unwrap().unwrap();
        assert_eq!((slot, cnt, idx, set), (1, DataType::Gpc, 3, false));
        assert!(sc_action_name("sc-inc-gpc0").unwrap().is_err());
        assert!(sc_action_name("sc-set-gpt0(5)").unwrap().is_err());
    }
}
