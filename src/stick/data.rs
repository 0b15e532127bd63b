//! What a stick table can store: HAProxy's data types, in HAProxy's order (the order `show
//! table` prints them in, whatever the order of the `store` list), and the parsing of one
//! `store` item (`conn_rate(10s)`, `gpc(2)`, `gpc_rate(2,10s)`).

/// A stored data type. The declaration order is HAProxy 2.6's (`STKTABLE_DT_*`), which is the
/// order of the fields of a `show table` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DataType {
    ServerId,
    Gpt0,
    Gpc0,
    Gpc0Rate,
    ConnCnt,
    ConnRate,
    ConnCur,
    SessCnt,
    SessRate,
    HttpReqCnt,
    HttpReqRate,
    HttpErrCnt,
    HttpErrRate,
    BytesInCnt,
    BytesInRate,
    BytesOutCnt,
    BytesOutRate,
    Gpc1,
    Gpc1Rate,
    ServerKey,
    HttpFailCnt,
    HttpFailRate,
    /// `gpt(N)`: an array of tags.
    Gpt,
    /// `gpc(N)`: an array of counters.
    Gpc,
    /// `gpc_rate(N,P)`: an array of rates.
    GpcRate,
}

/// How a data type's value is kept and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An unsigned 32-bit count (wraps as HAProxy's `unsigned int`).
    U32,
    /// An unsigned 64-bit count (`bytes_in_cnt`, `bytes_out_cnt`).
    U64,
    /// A signed 32-bit value (`server_id`).
    S32,
    /// A rate over a period (a [`super::freq::FreqCtr`]).
    Rate,
    /// A string (`server_key`).
    Str,
}

/// The arguments a `store` item takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Args {
    None,
    /// `(PERIOD)`.
    Period,
    /// `(N)`, 1 to 100 elements.
    Array,
    /// `(N,PERIOD)`.
    ArrayPeriod,
}

impl DataType {
    /// Every data type, in HAProxy's order.
    pub const ALL: [DataType; 25] = [
        DataType::ServerId,
        DataType::Gpt0,
        DataType::Gpc0,
        DataType::Gpc0Rate,
        DataType::ConnCnt,
        DataType::ConnRate,
        DataType::ConnCur,
        DataType::SessCnt,
        DataType::SessRate,
        DataType::HttpReqCnt,
        DataType::HttpReqRate,
        DataType::HttpErrCnt,
        DataType::HttpErrRate,
        DataType::BytesInCnt,
        DataType::BytesInRate,
        DataType::BytesOutCnt,
        DataType::BytesOutRate,
        DataType::Gpc1,
        DataType::Gpc1Rate,
        DataType::ServerKey,
        DataType::HttpFailCnt,
        DataType::HttpFailRate,
        DataType::Gpt,
        DataType::Gpc,
        DataType::GpcRate,
    ];

    /// The name in `store` lists, `show table` and `data.TYPE` arguments.
    pub fn name(self) -> &'static str {
        match self {
            DataType::ServerId => "server_id",
            DataType::Gpt0 => "gpt0",
            DataType::Gpc0 => "gpc0",
            DataType::Gpc0Rate => "gpc0_rate",
            DataType::ConnCnt => "conn_cnt",
            DataType::ConnRate => "conn_rate",
            DataType::ConnCur => "conn_cur",
            DataType::SessCnt => "sess_cnt",
            DataType::SessRate => "sess_rate",
            DataType::HttpReqCnt => "http_req_cnt",
            DataType::HttpReqRate => "http_req_rate",
            DataType::HttpErrCnt => "http_err_cnt",
            DataType::HttpErrRate => "http_err_rate",
            DataType::BytesInCnt => "bytes_in_cnt",
            DataType::BytesInRate => "bytes_in_rate",
            DataType::BytesOutCnt => "bytes_out_cnt",
            DataType::BytesOutRate => "bytes_out_rate",
            DataType::Gpc1 => "gpc1",
            DataType::Gpc1Rate => "gpc1_rate",
            DataType::ServerKey => "server_key",
            DataType::HttpFailCnt => "http_fail_cnt",
            DataType::HttpFailRate => "http_fail_rate",
            DataType::Gpt => "gpt",
            DataType::Gpc => "gpc",
            DataType::GpcRate => "gpc_rate",
        }
    }

    /// The data type called `name`. `server_name` is HAProxy 2.6's other name for
    /// `server_key`.
    pub fn from_name(name: &str) -> Option<DataType> {
        if name == "server_name" {
            return Some(DataType::ServerKey);
        }
        DataType::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// The position in HAProxy's order (an index into [`DataType::ALL`]).
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn kind(self) -> Kind {
        match self {
            DataType::ServerId => Kind::S32,
            DataType::BytesInCnt | DataType::BytesOutCnt => Kind::U64,
            DataType::ServerKey => Kind::Str,
            DataType::Gpc0Rate
            | DataType::ConnRate
            | DataType::SessRate
            | DataType::HttpReqRate
            | DataType::HttpErrRate
            | DataType::BytesInRate
            | DataType::BytesOutRate
            | DataType::Gpc1Rate
            | DataType::HttpFailRate
            | DataType::GpcRate => Kind::Rate,
            _ => Kind::U32,
        }
    }

    pub fn args(self) -> Args {
        match self {
            DataType::Gpt | DataType::Gpc => Args::Array,
            DataType::GpcRate => Args::ArrayPeriod,
            d if d.kind() == Kind::Rate => Args::Period,
            _ => Args::None,
        }
    }
}

/// One item of a `store` list: a data type, its number of elements (1 unless an array) and
/// its period in milliseconds (rates only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Store {
    pub data: DataType,
    pub count: u8,
    pub period: u32,
}

/// Largest array of `gpt(N)`, `gpc(N)`, `gpc_rate(N,P)`.
pub const MAX_ARRAY: u32 = 100;

/// Parses one `store` item. `period` parses a time word to milliseconds. The error says what
/// is wrong in the words of a configuration message.
pub fn parse_store(
    item: &str,
    period: impl Fn(&str) -> Result<u32, String>,
) -> Result<Store, String> {
    let (name, args) = match item.split_once('(') {
        Some((n, rest)) => match rest.strip_suffix(')') {
            Some(a) => (n, Some(a)),
            None => return Err(format!("store option '{item}': missing ')'")),
        },
        None => (item, None),
    };
    let Some(data) = DataType::from_name(name) else {
        return Err(format!("unknown store option '{name}'"));
    };
    let array = |w: &str| -> Result<u8, String> {
        match w.trim().parse::<u32>() {
            Ok(n) if (1..=MAX_ARRAY).contains(&n) => Ok(n as u8),
            _ => Err(format!(
                "store option '{name}': the array size must be between 1 and {MAX_ARRAY}, got '{w}'"
            )),
        }
    };
    let time = |w: &str| -> Result<u32, String> {
        period(w.trim()).map_err(|e| format!("store option '{name}': {e}"))
    };
    let missing = || {
        let what = match data.args() {
            Args::Period => "a period, as in 'conn_rate(10s)'",
            Args::Array => "an array size, as in 'gpc(2)'",
            _ => "an array size and a period, as in 'gpc_rate(2,10s)'",
        };
        format!("store option '{name}' expects {what}")
    };
    let store = |count, period| Store {
        data,
        count,
        period,
    };
    match (data.args(), args) {
        (Args::None, None) => Ok(store(1, 0)),
        (Args::None, Some(_)) => Err(format!("store option '{name}' takes no argument")),
        (_, None) | (_, Some("")) => Err(missing()),
        (Args::Period, Some(a)) => Ok(store(1, time(a)?)),
        (Args::Array, Some(a)) => Ok(store(array(a)?, 0)),
        (Args::ArrayPeriod, Some(a)) => match a.split_once(',') {
            Some((n, p)) => Ok(store(array(n)?, time(p)?)),
            None => Err(missing()),
        },
    }
}

/// The two families an array data type overrides: `gpc(N)` and `gpc0`/`gpc1` cannot be stored
/// together (nor `gpc_rate` and `gpc0_rate`/`gpc1_rate`, nor `gpt` and `gpt0`), as in HAProxy.
pub fn conflict(a: DataType, b: DataType) -> bool {
    let family = |d| match d {
        DataType::Gpt | DataType::Gpt0 => Some((0, d == DataType::Gpt)),
        DataType::Gpc | DataType::Gpc0 | DataType::Gpc1 => Some((1, d == DataType::Gpc)),
        DataType::GpcRate | DataType::Gpc0Rate | DataType::Gpc1Rate => {
            Some((2, d == DataType::GpcRate))
        }
        _ => None,
    };
    match (family(a), family(b)) {
        (Some((fa, aa)), Some((fb, ab))) => fa == fb && aa != ab,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(w: &str) -> Result<u32, String> {
        match w.strip_suffix('s') {
            Some(n) => n
                .parse::<u32>()
                .map(|n| n * 1000)
                .map_err(|e| e.to_string()),
            None => Err(format!("bad time '{w}'")),
        }
    }

    #[test]
    fn names_round_trip_in_haproxy_order() {
        for (i, d) in DataType::ALL.iter().enumerate() {
            assert_eq!(d.index(), i);
            assert_eq!(DataType::from_name(d.name()), Some(*d));
        }
        assert_eq!(
            DataType::from_name("server_name"),
            Some(DataType::ServerKey)
        );
    }

    #[test]
    fn store_items_parse() {
        let s = |w| parse_store(w, ms);
        assert_eq!(
            s("conn_rate(10s)"),
            Ok(Store {
                data: DataType::ConnRate,
                count: 1,
                period: 10_000
            })
        );
        assert_eq!(s("gpc(2)").unwrap().count, 2);
        let g = s("gpc_rate(3,1s)").unwrap();
        assert_eq!((g.count, g.period), (3, 1_000));
        assert!(s("conn_rate").unwrap_err().contains("expects a period"));
        assert!(s("gpt0(4)").unwrap_err().contains("takes no argument"));
        assert!(s("gpc(101)").unwrap_err().contains("between 1 and 100"));
        assert!(s("gpc_rate(2)")
            .unwrap_err()
            .contains("expects an array size and a period"));
        assert!(s("foo").unwrap_err().contains("unknown store option 'foo'"));
    }

    #[test]
    fn array_types_conflict_with_their_numbered_forms() {
        assert!(conflict(DataType::Gpc, DataType::Gpc0));
        assert!(conflict(DataType::Gpc1Rate, DataType::GpcRate));
        assert!(conflict(DataType::Gpt0, DataType::Gpt));
        assert!(!conflict(DataType::Gpc0, DataType::Gpc1));
        assert!(!conflict(DataType::Gpc, DataType::GpcRate));
    }
}
