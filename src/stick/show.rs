//! The runtime API's stick table commands as pure functions over tables: `show table [NAME
//! [data.TYPE OP VALUE]... | [key K]]`, `clear table NAME [key K | data.TYPE OP VALUE...]`,
//! `set table NAME key K [data.TYPE V]...`. Each returns the answer's text, ending with a
//! newline; the stats socket adds the empty line that ends every answer.
//!
//! Output and messages are haproxy 2.6.12's, read on its stats socket:
//!
//! ```text
//! # table: fe, type: ip, size:3, used:1
//! 0x562732297a48: key=127.0.0.1 use=0 exp=29681 server_id=0 gpc0=0 conn_rate(10000)=3
//! ```
//!
//! `show table` alone lists one header per table, the last declared first. Entries print in
//! key order; the first column is the entry's address (any stable hexadecimal id would do);
//! `exp` is the time left in ms (0 for a table without `expire`); arrays print one field per
//! element (`gpc0=0 gpc1=0`, `gpc0_rate(10000)=0 ...`). `used` counts every entry, filtered
//! or not. Filters compare integers (`eq ne le ge lt gt`) and must all hold; a `key` filter
//! wins over data filters. `set table` creates (or touches) the entry before reading its
//! data arguments, so an entry exists even when a later argument is refused, as in HAProxy.

use std::fmt::Write;
use std::sync::Arc;

use super::data::{DataType, Kind};
use super::table::{Entry, Key, KeyType, Table, Value};
use super::Tick;

/// A `data.TYPE OP VALUE` filter.
#[derive(Debug, Clone, Copy)]
struct Filter {
    data: DataType,
    op: Op,
    value: i64,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
}

impl Op {
    fn parse(w: &str) -> Option<Op> {
        Some(match w {
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            "le" => Op::Le,
            "ge" => Op::Ge,
            "lt" => Op::Lt,
            "gt" => Op::Gt,
            _ => return None,
        })
    }

    fn holds(self, a: i128, b: i128) -> bool {
        match self {
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::Le => a <= b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Gt => a > b,
        }
    }
}

/// What follows the table name.
enum Select {
    All,
    Key(Key),
    Data(Vec<Filter>),
}

/// `data.TYPE` names (`data.gpc` is element 0 of an array, as haproxy 2.6 reads it).
fn data_type(word: &str) -> Option<DataType> {
    DataType::from_name(word.strip_prefix("data.")?)
}

const KEY_TYPES: &str = "ip, ipv6, string and integer";

/// Parses the words after the table name.
fn select(table: &Table, args: &[&str], verb: &str) -> Result<Select, String> {
    match args {
        [] => Ok(Select::All),
        ["key"] => Err("Key value expected\n".to_string()),
        ["key", k, ..] => {
            if matches!(table.spec.key, KeyType::Binary { .. }) {
                return Err(format!(
                    "{verb} tables of type other than {KEY_TYPES} is not supported\n"
                ));
            }
            table
                .spec
                .key
                .parse(k)
                .map(Select::Key)
                .ok_or_else(|| "Invalid key\n".to_string())
        }
        _ if args[0].starts_with("data.") => {
            let mut filters = Vec::new();
            for (n, chunk) in args.chunks(3).enumerate() {
                let n = n + 1;
                let data = data_type(chunk[0])
                    .ok_or_else(|| format!("Filter entry #{n}: Unknown data type\n"))?;
                let op = chunk.get(1).and_then(|w| Op::parse(w)).ok_or_else(|| {
                    format!("Filter entry #{n}: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\"\n")
                })?;
                let value = chunk.get(2).and_then(|w| w.parse().ok()).ok_or_else(|| {
                    format!("Filter entry #{n}: Require a valid integer value to compare against\n")
                })?;
                if !table.schema.stores(data) {
                    return Err(format!("Filter entry #{n}: Data type not stored in this table\n"));
                }
                filters.push(Filter { data, op, value });
            }
            Ok(Select::Data(filters))
        }
        _ => Err(
            "Optional argument only supports \"data.<store_data_type>\" <operator> <value> or key <key>\n"
                .to_string(),
        ),
    }
}

fn matches(table: &Table, e: &Entry, filters: &[Filter], now: Tick) -> bool {
    filters.iter().all(|f| {
        let Some(slot) = table.schema.slot(f.data, 0) else {
            return false;
        };
        let v = match e.read(slot, now) {
            Value::Uint(v) => i128::from(v),
            Value::Sint(v) => i128::from(v),
            Value::Str(_) => return false,
        };
        f.op.holds(v, i128::from(f.value))
    })
}

/// The header line of a table.
pub fn header(table: &Table) -> String {
    format!(
        "# table: {}, type: {}, size:{}, used:{}\n",
        table.name,
        table.spec.key.word(),
        table.spec.size,
        table.used()
    )
}

/// One entry line.
pub fn entry_line(table: &Table, e: &Arc<Entry>, now: Tick) -> String {
    let exp = match table.spec.expire {
        Some(_) => e.expire().saturating_sub(now),
        None => 0,
    };
    let mut out = format!(
        "{:p}: key={} use={} exp={}",
        Arc::as_ptr(e),
        table.spec.key.format(e.key()),
        e.refs(),
        exp
    );
    for slot in &table.schema.slots {
        let name = slot.data.name();
        let label = match slot.data {
            DataType::Gpt | DataType::Gpc => format!("{name}{}", slot.index),
            DataType::GpcRate => format!("gpc{}_rate({})", slot.index, slot.period),
            d if d.kind() == Kind::Rate => format!("{name}({})", slot.period),
            _ => name.to_string(),
        };
        let value = match e.read(*slot, now) {
            Value::Uint(v) => v.to_string(),
            Value::Sint(v) => v.to_string(),
            Value::Str(s) => s.map_or_else(|| "-".to_string(), |s| s.to_string()),
        };
        let _ = write!(out, " {label}={value}");
    }
    out.push('\n');
    out
}

fn find<'a>(tables: &'a [Arc<Table>], name: &str) -> Result<&'a Table, String> {
    tables
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.as_ref())
        .ok_or_else(|| "No such table\n".to_string())
}

/// `show table [NAME [filters | key K]]`; `tables` in declaration order.
pub fn show_table(tables: &[Arc<Table>], args: &[&str], now: Tick) -> String {
    // Expired entries go first, so `used:` counts what HAProxy, which removes each entry at
    // its expiry, would count.
    for t in tables {
        t.purge(now);
    }
    let Some(name) = args.first() else {
        return tables.iter().rev().map(|t| header(t)).collect();
    };
    let table = match find(tables, name) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let sel = match select(table, &args[1..], "Showing keys from") {
        Ok(s) => s,
        Err(e) => return e,
    };
    let entries = match &sel {
        Select::Key(k) => table.get(k, now).into_iter().collect(),
        _ => table.entries(now),
    };
    // An entry a session released (and which expired) since the first purge is not listed:
    // purge again so that `used:` does not count it either.
    table.purge(now);
    let mut out = header(table);
    for e in &entries {
        if let Select::Data(f) = &sel {
            if !matches(table, e, f, now) {
                continue;
            }
        }
        out.push_str(&entry_line(table, e, now));
    }
    out
}

/// `clear table NAME [key K | filters]`: removes the matching entries that no session uses.
pub fn clear_table(tables: &[Arc<Table>], args: &[&str], now: Tick) -> String {
    let Some(name) = args.first() else {
        return "Required arguments: <table> \"data.<store_data_type>\" <operator> <value> or <table> key <key>\n".to_string();
    };
    let table = match find(tables, name) {
        Ok(t) => t,
        Err(e) => return e,
    };
    match select(table, &args[1..], "Removing keys from") {
        Ok(Select::All) => {
            table.remove_where(|_| true);
        }
        Ok(Select::Key(k)) => {
            table.remove_where(|e| e.key() == &k);
        }
        Ok(Select::Data(f)) => {
            table.remove_where(|e| matches(table, e, &f, now));
        }
        Err(e) => return e,
    }
    String::new()
}

/// `set table NAME key K [data.TYPE V]...`.
pub fn set_table(tables: &[Arc<Table>], args: &[&str], now: Tick) -> String {
    let Some(name) = args.first() else {
        return "Required arguments: <table> key <key> [data.<store_data_type> <value>]*\n"
            .to_string();
    };
    let table = match find(tables, name) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if args.get(1).is_some_and(|w| w.starts_with("data.")) {
        return "content-based lookup is only supported with the \"show\" and \"clear\" actions\n"
            .to_string();
    }
    if args.get(1).is_some_and(|w| *w != "key") {
        return "Required arguments: <table> key <key> [data.<store_data_type> <value>]*\n"
            .to_string();
    }
    let key = match select(table, &args[1..args.len().min(3)], "Inserting keys into") {
        Ok(Select::Key(k)) => k,
        // `set table NAME` alone: haproxy 2.6 answers nothing (and does nothing).
        Ok(_) => return String::new(),
        Err(e) => return e,
    };
    let Some(e) = table.get_or_create(&key, now, false) else {
        return "Unable to allocate a new entry\n".to_string();
    };
    let mut rest = &args[3.min(args.len())..];
    while let [word, more @ ..] = rest {
        let Some(data) = data_type(word) else {
            return "Unknown data type\n".to_string();
        };
        let Some(slot) = table.schema.slot(data, 0) else {
            return "Data type not stored in this table\n".to_string();
        };
        let Some(v) = more.first().and_then(|w| w.parse::<i64>().ok()) else {
            return "Require a valid integer value to store\n".to_string();
        };
        e.set(slot, now, v);
        rest = &more[1..];
    }
    table.changed(&e);
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stick::data::Store;
    use crate::stick::table::TableSpec;

    fn table(
        name: &str,
        key: KeyType,
        expire: Option<u32>,
        store: &[(DataType, u32)],
    ) -> Arc<Table> {
        Arc::new(Table::new(
            name,
            TableSpec {
                key,
                size: 20,
                expire,
                nopurge: false,
                srvkey_addr: false,
                store: store
                    .iter()
                    .map(|&(data, period)| Store {
                        data,
                        count: 1,
                        period,
                    })
                    .collect(),
            },
        ))
    }

    /// Replaces the address column with `0x`.
    fn scrub(s: &str) -> String {
        s.lines()
            .map(|l| match l.split_once(": key=") {
                Some((_, rest)) if l.starts_with("0x") => format!("0x: key={rest}\n"),
                _ => format!("{l}\n"),
            })
            .collect()
    }

    #[test]
    fn show_set_clear_as_haproxy() {
        let fe = table(
            "fe2",
            KeyType::Ip,
            None,
            &[
                (DataType::HttpReqCnt, 0),
                (DataType::ServerId, 0),
                (DataType::HttpReqRate, 10_000),
            ],
        );
        let ti = table("ti", KeyType::Integer, Some(5_000), &[]);
        let tables = vec![fe.clone(), ti.clone()];
        let now = 1_000;
        let run = |cmd: &str, args: &str| {
            let a: Vec<&str> = args.split_whitespace().collect();
            match cmd {
                "show" => show_table(&tables, &a, now),
                "set" => set_table(&tables, &a, now),
                _ => clear_table(&tables, &a, now),
            }
        };
        assert_eq!(
            run("show", ""),
            "# table: ti, type: integer, size:20, used:0\n# table: fe2, type: ip, size:20, used:0\n"
        );
        assert_eq!(
            run(
                "set",
                "fe2 key 1.2.3.4 data.server_id 7 data.http_req_cnt 9"
            ),
            ""
        );
        assert_eq!(run("set", "fe2 key 1.2.3.8 data.http_req_cnt -3"), "");
        assert_eq!(run("set", "fe2 key 1.2.3.9 data.http_req_rate 5"), "");
        assert_eq!(
            run("set", "fe2 key 1.2.3.7 data.http_req_cnt x"),
            "Require a valid integer value to store\n"
        );
        assert_eq!(
            run("set", "fe2 key 1.2.3.6 data.gpc0 1"),
            "Data type not stored in this table\n"
        );
        assert_eq!(
            run("set", "fe2 key 1.2.3.6 data.foo 1"),
            "Unknown data type\n"
        );
        assert_eq!(
            run("set", "fe2 data.http_req_cnt 3"),
            "content-based lookup is only supported with the \"show\" and \"clear\" actions\n"
        );
        assert_eq!(run("set", "ti key -1"), "Invalid key\n");
        assert_eq!(run("set", "ti key 42"), "");
        assert_eq!(
            scrub(&run("show", "fe2")),
            "# table: fe2, type: ip, size:20, used:5\n\
             0x: key=1.2.3.4 use=0 exp=0 server_id=7 http_req_cnt=9 http_req_rate(10000)=0\n\
             0x: key=1.2.3.6 use=0 exp=0 server_id=0 http_req_cnt=0 http_req_rate(10000)=0\n\
             0x: key=1.2.3.7 use=0 exp=0 server_id=0 http_req_cnt=0 http_req_rate(10000)=0\n\
             0x: key=1.2.3.8 use=0 exp=0 server_id=0 http_req_cnt=4294967293 http_req_rate(10000)=0\n\
             0x: key=1.2.3.9 use=0 exp=0 server_id=0 http_req_cnt=0 http_req_rate(10000)=5\n"
        );
        assert_eq!(
            scrub(&run("show", "ti")),
            "# table: ti, type: integer, size:20, used:1\n0x: key=42 use=0 exp=5000\n"
        );
        assert_eq!(
            scrub(&run("show", "fe2 data.http_req_cnt eq 9 data.server_id gt 5")),
            "# table: fe2, type: ip, size:20, used:5\n0x: key=1.2.3.4 use=0 exp=0 server_id=7 http_req_cnt=9 http_req_rate(10000)=0\n"
        );
        assert_eq!(
            run("show", "fe2 data.http_req_cnt eq x"),
            "Filter entry #1: Require a valid integer value to compare against\n"
        );
        assert_eq!(
            run("show", "fe2 data.gpc(1) gt 1"),
            "Filter entry #1: Unknown data type\n"
        );
        assert_eq!(
            run("show", "fe2 data.http_req_cnt"),
            "Filter entry #1: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\"\n"
        );
        assert_eq!(run("show", "nope"), "No such table\n");
        assert_eq!(run("show", "ti key zz"), "Invalid key\n");
        assert_eq!(run("clear", "fe2 data.http_req_cnt gt 5"), "");
        assert_eq!(run("clear", "fe2 key 1.2.3.6"), "");
        assert_eq!(fe.used(), 2);
        assert_eq!(run("clear", ""), "Required arguments: <table> \"data.<store_data_type>\" <operator> <value> or <table> key <key>\n");
        assert_eq!(run("clear", "fe2"), "");
        assert_eq!(
            run("show", "fe2"),
            "# table: fe2, type: ip, size:20, used:0\n"
        );
    }

    #[test]
    fn arrays_tracked_entries_and_binary_keys_print_as_haproxy() {
        let t = Arc::new(Table::new(
            "fe2",
            TableSpec {
                key: KeyType::Binary { len: 4 },
                size: 10,
                expire: Some(30_000),
                nopurge: false,
                srvkey_addr: false,
                store: vec![
                    Store {
                        data: DataType::GpcRate,
                        count: 2,
                        period: 10_000,
                    },
                    Store {
                        data: DataType::Gpt,
                        count: 2,
                        period: 0,
                    },
                    Store {
                        data: DataType::ServerKey,
                        count: 1,
                        period: 0,
                    },
                ],
            },
        ));
        let k = t.spec.key.parse("0aff").unwrap();
        let tr = t.track(&k, 100).unwrap();
        let tables = vec![t.clone()];
        assert_eq!(
            scrub(&show_table(&tables, &["fe2"], 400)),
            "# table: fe2, type: binary, size:10, used:1\n\
             0x: key=0AFF0000 use=1 exp=29700 server_key=- gpt0=0 gpt1=0 gpc0_rate(10000)=0 gpc1_rate(10000)=0\n"
        );
        assert_eq!(
            set_table(&tables, &["fe2", "key", "0aff"], 400),
            "Inserting keys into tables of type other than ip, ipv6, string and integer is not supported\n"
        );
        // An entry in use survives `clear table`.
        assert_eq!(clear_table(&tables, &["fe2"], 400), "");
        assert_eq!(t.used(), 1);
        t.release(tr, 500);
        assert_eq!(clear_table(&tables, &["fe2"], 600), "");
        assert_eq!(t.used(), 0);
    }
}
