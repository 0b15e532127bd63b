//! `stick-table type ip|ipv6|integer|string [len N]|binary [len N] size N [expire T]
//! [nopurge] [peers NAME] [srvkey name|addr] [store DATA,...]` in a frontend, backend or
//! listen (not `defaults`, as in HAProxy). The table is named after its proxy; a second
//! `stick-table` line in one proxy is an error (HAProxy: the name conflicts). Messages follow
//! haproxy 2.6's checks (`haproxy -c`): unknown type, missing type or size (`size 0` is
//! missing), `len` only after `string`/`binary`, unknown `store` items (with a did-you-mean),
//! missing or unexpected arguments, arrays of 1 to 100 elements, `gpc(N)` with
//! `gpc0`/`gpc1` (and the `gpt`, `gpc_rate` cases), a `store` item given twice (warned and
//! ignored).

use super::{Ctx, Problem, ProxyDraft};
use crate::config::diag::{suggest, Span};
use crate::stick::data::{conflict, parse_store, DataType};
use crate::stick::{KeyType, TableSpec};

/// A `stick-table` line as read: its table and where it was declared.
#[derive(Debug, Clone)]
pub struct TableLine {
    pub spec: TableSpec,
    /// `peers NAME`: the `peers` section that would replicate the table.
    pub peers: Option<String>,
    pub span: Span,
}

/// Default `len` of binary keys, and haproxy's default key size for strings: 32 bytes, the
/// NUL included, so 31 characters (an explicit `len N` gives N characters).
const DEFAULT_LEN: usize = 32;

const ARGS: &[&str] = &[
    "type", "len", "size", "expire", "nopurge", "peers", "srvkey", "store",
];

/// Parses the words of a table definition (after `stick-table`, or after `table NAME` in a
/// `peers` section). Warnings go to `ctx`.
pub fn parse_spec(ctx: &mut Ctx<'_>, start: usize) -> Result<(TableSpec, Option<String>), Problem> {
    let mut key: Option<KeyType> = None;
    let mut size = 0usize;
    let mut expire = None;
    let mut nopurge = false;
    let mut srvkey_addr = false;
    let mut peers = None;
    let mut store: Vec<crate::stick::Store> = Vec::new();
    let mut i = start;
    while let Some(w) = ctx.arg(i) {
        let w = w.to_string();
        let val = |ctx: &Ctx<'_>| -> Result<String, Problem> {
            ctx.arg(i + 1)
                .map(str::to_string)
                .ok_or_else(|| Problem::from(format!("'{w}' expects a value")))
        };
        match w.as_str() {
            "type" => {
                let t = val(ctx)?;
                key = Some(match t.as_str() {
                    "ip" => KeyType::Ip,
                    "ipv6" => KeyType::Ipv6,
                    "integer" => KeyType::Integer,
                    "string" => KeyType::String {
                        len: DEFAULT_LEN - 1,
                    },
                    "binary" => KeyType::Binary { len: DEFAULT_LEN },
                    other => {
                        let hint = suggest(other, ["ip", "ipv6", "integer", "string", "binary"]);
                        return Err(Problem::with_hint(
                            format!("unknown type '{other}' (expected ip, ipv6, integer, string or binary)"),
                            hint,
                        ));
                    }
                });
                i += 2;
            }
            "len" => {
                let n = val(ctx)?;
                let n: usize = match n.parse() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return Err(
                            format!("'len' expects a positive number of bytes, got '{n}'").into(),
                        )
                    }
                };
                key = match key {
                    Some(KeyType::String { .. }) => Some(KeyType::String { len: n }),
                    Some(KeyType::Binary { .. }) => Some(KeyType::Binary { len: n }),
                    _ => {
                        return Err("'len' applies only to 'type string' and 'type binary', and comes after the type".into())
                    }
                };
                i += 2;
            }
            "size" => {
                let s = val(ctx)?;
                size = crate::config::values::size(&s)
                    .map_err(|e| Problem::from(format!("'size': {e}")))?
                    .try_into()
                    .unwrap_or(usize::MAX);
                i += 2;
            }
            "expire" => {
                let t = val(ctx)?;
                let d = crate::config::values::timer(&t)
                    .map_err(|e| Problem::from(format!("'expire': {e}")))?;
                expire = Some(d.as_millis() as u32);
                i += 2;
            }
            "nopurge" => {
                nopurge = true;
                i += 1;
            }
            "peers" => {
                peers = Some(val(ctx)?);
                i += 2;
            }
            "srvkey" => {
                let v = val(ctx)?;
                if v != "name" && v != "addr" {
                    return Err(format!("'srvkey' expects 'name' or 'addr', got '{v}'").into());
                }
                srvkey_addr = v == "addr";
                i += 2;
            }
            "store" => {
                let list = val(ctx)?;
                for item in split_store(&list).filter(|s| !s.is_empty()) {
                    let s = parse_store(item, |p| {
                        crate::config::values::timer(p)
                            .map(|d| d.as_millis() as u32)
                            .map_err(|e| e.to_string())
                    })
                    .map_err(|e| {
                        let name = item.split('(').next().unwrap_or(item);
                        let hint = if DataType::from_name(name).is_none() {
                            suggest(name, DataType::ALL.iter().map(|d| d.name()))
                        } else {
                            None
                        };
                        Problem::with_hint(e, hint)
                    })?;
                    if let Some(other) = store.iter().find(|o| conflict(o.data, s.data)) {
                        return Err(format!(
                            "store options '{}' and '{}' cannot be stored in one table ('{}' replaces the numbered forms)",
                            other.data.name(),
                            s.data.name(),
                            if matches!(s.data, DataType::Gpc | DataType::Gpt | DataType::GpcRate) { s.data.name() } else { other.data.name() }
                        )
                        .into());
                    }
                    if store.iter().any(|o| o.data == s.data) {
                        ctx.warn(format!(
                            "stick-table: store option '{}' is already enabled; this one is ignored",
                            s.data.name()
                        ));
                        continue;
                    }
                    store.push(s);
                }
                i += 2;
            }
            other => {
                let hint = suggest(other, ARGS.iter().copied());
                return Err(Problem::with_hint(
                    format!("unknown argument '{other}' (expected type, len, size, expire, nopurge, peers, srvkey or store)"),
                    hint,
                ));
            }
        }
    }
    let Some(key) = key else {
        return Err("missing 'type' (ip, ipv6, integer, string or binary)".into());
    };
    if size == 0 {
        return Err(
            "missing 'size' (the most entries the table holds, such as 'size 100k')".into(),
        );
    }
    store.sort_by_key(|s| s.data);
    Ok((
        TableSpec {
            key,
            size,
            expire,
            nopurge,
            srvkey_addr,
            store,
        },
        peers,
    ))
}

/// `stick-table ...` in a proxy.
pub fn stick_table(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if let Some(first) = &p.stick_table {
        return Err(format!(
            "stick-table: a {} has one table, named after it; '{}' is already declared at {}",
            ctx.kind.word(),
            p.name,
            first.span
        )
        .into());
    }
    let (spec, peers) = parse_spec(ctx, 1)
        .map_err(|e| Problem::with_hint(format!("stick-table: {}", e.message), e.hint))?;
    p.stick_table = Some(TableLine {
        spec,
        peers,
        span: ctx.span.clone(),
    });
    Ok(())
}

/// Splits a `store` list at the commas that are not inside parentheses (`gpc_rate(2,1h)` is
/// one item).
fn split_store(list: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0i32;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth <= 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items.into_iter()
}
