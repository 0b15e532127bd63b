//! The facts one log line is made of: what a session or transaction did, its timers as HAProxy
//! defines them (`doc/configuration.txt` §8.4), its byte counts, termination state and
//! counters. Filled by the session code at phase boundaries; rendered by [`super::format`].

use std::cell::Cell;
use std::net::SocketAddr;
use std::ops::Range;

use tokio::time::Instant;

pub const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The instants a transaction reached, as the session code records them. A stage never reached
/// stays `None` and its timer logs as -1.
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// The connection was accepted (for a later request on a keep-alive connection: the end of
    /// the previous transaction, as HAProxy counts it).
    pub accept: Instant,
    /// The first byte of the request arrived (HTTP).
    pub request: Option<Instant>,
    /// The request head was complete (HTTP).
    pub headers: Option<Instant>,
    /// A server was chosen (the queue left).
    pub queued: Option<Instant>,
    /// The server connection was established (or taken from the pool).
    pub connected: Option<Instant>,
    /// The response head arrived.
    pub response: Option<Instant>,
}

impl Timeline {
    pub fn new(accept: Instant) -> Self {
        Timeline {
            accept,
            request: None,
            headers: None,
            queued: None,
            connected: None,
            response: None,
        }
    }

    /// The timers at `end`, with the wall clock read once (`now_us`: microseconds since the
    /// epoch at `now`).
    pub fn times(&self, end: Instant, now: Instant, now_us: i64) -> Times {
        // Each instant once as nanoseconds after `accept` (one clock subtraction each), then
        // plain integer arithmetic.
        let off = |i: Instant| i.saturating_duration_since(self.accept).as_nanos() as i64;
        let opt = |i: Option<Instant>| i.map(off);
        let (request, headers) = (opt(self.request), opt(self.headers));
        let (queued, connected, response) =
            (opt(self.queued), opt(self.connected), opt(self.response));
        let (end, now) = (off(end), off(now));
        let ms = |a: i64, b: i64| (b - a).max(0) / 1_000_000;
        let wall = |i: i64| now_us - (now - i).max(0) / 1000;
        let since = |from: Option<i64>, to: Option<i64>| match (from, to) {
            (Some(a), Some(b)) => ms(a, b),
            _ => -1,
        };
        let http_start = headers.or(request);
        let queue_from = if request.is_some() { headers } else { Some(0) };
        let ti = request.map_or(0, |r| ms(0, r));
        Times {
            accept_us: wall(0),
            request_us: wall(request.unwrap_or(0)),
            th: 0,
            ti,
            treq: since(request, headers),
            tw: since(queue_from, queued),
            tc: since(queued, connected),
            tr: since(connected, response),
            ta: ms(request.unwrap_or(0), end),
            tt: ms(0, end),
            td: since(response, Some(end)),
        }
        .fix(http_start.is_some())
    }
}

impl Timeline {
    /// What `show stat` averages of a stream that ended at `end` (HAProxy's
    /// `stream_update_time_stats`), in ms: the time in the queue after the request head
    /// (`qtime`), to connect (`ctime`), to the response head (`rtime`; 0 for a TCP stream,
    /// `http` false) and in all since the stream began (`ttime`). `None` for a stream that
    /// had no server connection or, over HTTP, no response.
    pub fn stat_times(&self, end: Instant, http: bool) -> Option<[u32; 4]> {
        let ms = |i: Instant| {
            let d = i.saturating_duration_since(self.accept).as_millis();
            u32::try_from(d).unwrap_or(u32::MAX)
        };
        let connected = ms(self.connected?);
        let data = if http { ms(self.response?) } else { connected };
        let request = self.headers.map_or(0, ms);
        let queued = self.queued.map_or(connected, ms);
        Some([
            queued.saturating_sub(request),
            connected.saturating_sub(queued),
            data.saturating_sub(connected),
            ms(end),
        ])
    }
}

/// Timers in milliseconds (-1: the stage was not reached) and dates in microseconds since the
/// Unix epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Times {
    pub accept_us: i64,
    pub request_us: i64,
    pub th: i64,
    pub ti: i64,
    /// `TR`: the request head.
    pub treq: i64,
    pub tw: i64,
    pub tc: i64,
    /// `Tr`: the server's response head.
    pub tr: i64,
    pub ta: i64,
    pub tt: i64,
    pub td: i64,
}

impl Times {
    fn fix(self, _http: bool) -> Self {
        self
    }

    /// `Tq` = Th + Ti + TR.
    pub fn tq(&self) -> i64 {
        if self.treq < 0 {
            -1
        } else {
            self.th + self.ti + self.treq
        }
    }

    /// `Tu` = Tq + Tw + Tc + Tr.
    pub fn tu(&self) -> i64 {
        let parts = [self.tq(), self.tw, self.tc, self.tr];
        if parts.iter().any(|&p| p < 0) {
            -1
        } else {
            parts.iter().sum()
        }
    }
}

/// The connection counts (`%ac/%fc/%bc/%sc`), retries and queue positions of a line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub actconn: u32,
    pub feconn: u32,
    pub beconn: u32,
    pub srvconn: u32,
    pub retries: u32,
    pub redispatched: bool,
    pub srv_queue: u32,
    pub be_queue: u32,
}

/// Captured header values of one transaction, in `capture` order (request ones, then response
/// ones), kept in one reusable buffer.
#[derive(Debug, Default)]
pub struct Captured {
    buf: Vec<u8>,
    req: Vec<Option<Range<usize>>>,
    res: Vec<Option<Range<usize>>>,
}

impl Captured {
    /// Forgets the previous transaction's values and sizes the slots.
    pub fn reset(&mut self, nreq: usize, nres: usize) {
        self.buf.clear();
        self.req.clear();
        self.req.resize(nreq, None);
        self.res.clear();
        self.res.resize(nres, None);
    }

    /// Records slot `k`'s value (at most `len` bytes of it); a later occurrence replaces an
    /// earlier one.
    pub fn set(&mut self, response: bool, k: usize, value: &[u8], len: usize) {
        let v = &value[..value.len().min(len)];
        let start = self.buf.len();
        self.buf.extend_from_slice(v);
        let slots = if response {
            &mut self.res
        } else {
            &mut self.req
        };
        if let Some(slot) = slots.get_mut(k) {
            *slot = Some(start..start + v.len());
        }
    }

    pub fn count(&self, response: bool) -> usize {
        if response {
            self.res.len()
        } else {
            self.req.len()
        }
    }

    pub fn get(&self, response: bool, k: usize) -> Option<&[u8]> {
        let slots = if response { &self.res } else { &self.req };
        slots.get(k)?.clone().map(|r| &self.buf[r])
    }
}

/// Everything one log line may show.
pub struct Record<'a> {
    pub frontend: &'a str,
    /// `None`: no backend was chosen (the frontend's name is shown).
    pub backend: Option<&'a str>,
    /// `None`: no server was reached (`<NOSRV>`).
    pub server: Option<&'a str>,
    /// `None`: a UNIX socket's client, which has no address (`%ci` shows `unix`).
    pub client: Option<SocketAddr>,
    /// The ends that are UNIX sockets, which HAProxy shows as `unix` and a listener id.
    pub unix: UnixEnds,
    /// The address the client connected to (gathered when the format uses it).
    pub local: Option<SocketAddr>,
    /// The local address of the server connection (when the format uses it).
    pub server_local: Option<SocketAddr>,
    pub server_addr: Option<SocketAddr>,
    pub times: Times,
    pub status: Option<u16>,
    /// Bytes sent to the client, headers included.
    pub bytes_out: u64,
    /// Bytes received from the client.
    pub bytes_in: u64,
    /// Termination state: what ended the session, at which stage.
    pub term: [u8; 2],
    /// The cookie persistence letters of `%tsc` (`--` when the backend shows none).
    pub cookie_state: [u8; 2],
    /// `capture cookie`: the request's and the response's cookie (`%CC`, `%CS`).
    pub cookie_req: Option<&'a [u8]>,
    pub cookie_res: Option<&'a [u8]>,
    pub counters: Counters,
    /// The request line; `None` shows `<BADREQ>`.
    pub request: Option<&'a [u8]>,
    pub captures: &'a Captured,
    pub unique_id: Option<&'a [u8]>,
    pub hostname: &'a str,
    pub req_counter: u64,
    pub log_counter: u64,
}

/// Which ends of a stream are UNIX sockets: HAProxy's logs show no address for them but the
/// word `unix`, and for the client side the id of the listener that accepted it as its port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnixEnds {
    /// The client came through a UNIX listener with this id: `%fi` shows `unix`, `%fp` the id
    /// (and `%ci`/`%cp` too while no rule set a client address).
    pub listener: Option<u32>,
    /// The server connection is a UNIX socket: `%si`/`%bi` show `unix`, `%sp`/`%bp` 0.
    pub server: bool,
}

#[cfg(test)]
impl<'a> Record<'a> {
    pub fn test(captures: &'a Captured) -> Record<'a> {
        Record {
            frontend: "fe",
            backend: Some("be"),
            server: None,
            client: Some("127.0.0.1:37532".parse().unwrap()),
            unix: UnixEnds::default(),
            local: None,
            server_local: None,
            server_addr: None,
            times: Times::default(),
            status: Some(200),
            bytes_out: 0,
            bytes_in: 0,
            term: *b"--",
            cookie_state: *b"--",
            cookie_req: None,
            cookie_res: None,
            counters: Counters::default(),
            request: Some(b"GET /a?b HTTP/1.1"),
            captures,
            unique_id: None,
            hostname: "h",
            req_counter: 0,
            log_counter: 0,
        }
    }
}

thread_local! {
    /// The last second broken down, local and UTC: log lines come in bursts within a second.
    static LAST: Cell<Option<(i64, bool, crate::sys::LocalTime)>> = const { Cell::new(None) };
}

/// The broken-down time of `secs`, local or UTC, cached per thread for the current second.
pub fn broken_down(secs: i64, local: bool) -> crate::sys::LocalTime {
    if let Some((s, l, tm)) = LAST.with(Cell::get) {
        if s == secs && l == local {
            return tm;
        }
    }
    let tm = if local {
        crate::sys::local_time(secs)
    } else {
        utc(secs)
    };
    LAST.with(|c| c.set(Some((secs, local, tm))));
    tm
}

/// UTC civil time from days since the epoch (Howard Hinnant's algorithm).
fn utc(secs: i64) -> crate::sys::LocalTime {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    crate::sys::LocalTime {
        year,
        month: month - 1,
        day,
        hour: (rem / 3600) as u32,
        min: (rem / 60 % 60) as u32,
        sec: (rem % 60) as u32,
        gmtoff: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_times_are_haproxys_queue_connect_response_and_total() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut tl = Timeline::new(t0);
        tl.headers = Some(at(2));
        tl.queued = Some(at(5));
        tl.connected = Some(at(6));
        assert_eq!(tl.stat_times(at(20), true), None, "no response: no sample");
        assert_eq!(tl.stat_times(at(20), false), Some([3, 1, 0, 20]));
        tl.response = Some(at(16));
        assert_eq!(tl.stat_times(at(20), true), Some([3, 1, 10, 20]));
        tl.connected = None;
        assert_eq!(
            tl.stat_times(at(20), true),
            None,
            "no connection: no sample"
        );
    }

    #[test]
    fn utc_dates() {
        let t = utc(1_795_502_754);
        assert_eq!((t.year, t.month, t.day), (2026, 10, 24));
        assert_eq!((t.hour, t.min, t.sec), (6, 45, 54));
        let t = utc(951_782_400); // 2000-02-29
        assert_eq!((t.year, t.month, t.day), (2000, 1, 29));
    }

    #[test]
    fn captures_keep_the_last_occurrence_cut_to_length() {
        let mut c = Captured::default();
        c.reset(2, 1);
        c.set(false, 0, b"first", 3);
        c.set(false, 0, b"second", 3);
        c.set(true, 0, b"x", 10);
        assert_eq!(c.get(false, 0), Some(&b"sec"[..]));
        assert_eq!(c.get(false, 1), None);
        assert_eq!(c.get(true, 0), Some(&b"x"[..]));
    }
}
