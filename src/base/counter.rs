//! A gauge that every worker changes on its data path and that is read rarely: the number of
//! connections open to a server.
//!
//! One shared atomic would be written by every worker for every request that moves to another
//! server (round-robin on keep-alive connections does that each time), and the cache line
//! holding it, with the server's weight and state that every pick reads, would bounce between
//! cores. Instead each worker writes a cache line of its own and readers (balancing by least
//! connections, `maxconn` checks, `show stat`) add the lines up. A server with `maxconn` needs an
//! exact count to check and raise in one step, so its connections use one shared line, as they
//! did before; that is the price of a limit, as in HAProxy.
//!
//! The HTTP request and response counters of `show stat` ([`HttpCounters`]) and its byte counts
//! ([`Bytes`]), and the connection counts and time averages of its backends and servers
//! ([`StreamStats`]), written for every request and read only by the stats socket, are kept the
//! same way.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

thread_local! {
    /// The line this thread writes: 0 for threads that are not workers.
    static LINE: Cell<usize> = const { Cell::new(0) };
}

/// Makes the calling thread, worker number `id` (from 0), write its own line of every gauge.
pub fn enter_worker(id: usize) {
    LINE.with(|l| l.set(id + 1));
}

/// The worker number (from 0) of the calling thread; 0 for threads that are not workers.
pub fn worker_id() -> usize {
    LINE.with(|l| l.get().saturating_sub(1))
}

/// A counter padded to a cache line (128 bytes: adjacent-line prefetching pairs 64-byte lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Line(AtomicU32);

/// A gauge split in one line per worker, summed when read. Counts wrap, so an increment on one
/// line and its decrement on another still sum right.
#[derive(Debug)]
pub struct Gauge {
    lines: Box<[Line]>,
}

impl Gauge {
    /// A gauge at 0 for `workers` workers (plus one line for every other thread).
    pub fn new(workers: usize) -> Self {
        Gauge {
            lines: (0..=workers).map(|_| Line::default()).collect(),
        }
    }

    fn own(&self) -> &AtomicU32 {
        let i = LINE.with(Cell::get);
        &self.lines[i.min(self.lines.len() - 1)].0
    }

    /// Adds one on the calling worker's line.
    pub fn incr(&self) {
        self.own().fetch_add(1, Ordering::Relaxed);
    }

    /// Removes one on the calling worker's line.
    pub fn decr(&self) {
        self.own().fetch_sub(1, Ordering::Relaxed);
    }

    /// Adds one on the shared line if the total stays within `max` (for a limit every worker
    /// must see at once; only use with [`Gauge::decr_shared`]).
    pub fn incr_shared_below(&self, max: u32) -> bool {
        self.lines[0]
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |c| {
                (c < max).then_some(c + 1)
            })
            .is_ok()
    }

    /// Removes one from the shared line.
    pub fn decr_shared(&self) {
        self.lines[0].0.fetch_sub(1, Ordering::AcqRel);
    }

    /// Worker number `worker`'s line alone (what that worker holds of a gauge it only changes
    /// on its own line, such as its idle server connections).
    pub fn line(&self, worker: usize) -> u32 {
        self.lines
            .get(worker + 1)
            .map_or(0, |l| l.0.load(Ordering::Relaxed))
    }

    /// The total.
    pub fn get(&self) -> u32 {
        self.lines
            .iter()
            .fold(0u32, |sum, l| sum.wrapping_add(l.0.load(Ordering::Relaxed)))
    }
}

/// The slots of one worker's [`HttpCounters`] line: requests, then responses by class.
const REQ: usize = 0;

/// One worker's HTTP counts, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct HttpLine([AtomicU64; 7]);

/// A proxy's or a server's HTTP counters as `show stat` shows them: requests (`req_tot`) and
/// responses by class (`hrsp_1xx` to `hrsp_5xx`, `hrsp_other`). Written for every request by
/// whichever worker serves it, so kept as the [`Gauge`] is: one line per worker (relaxed adds
/// on a line no other worker writes), summed when `show stat` reads them. No lock, nothing
/// allocated after construction.
#[derive(Debug)]
pub struct HttpCounters {
    lines: Box<[HttpLine]>,
}

impl HttpCounters {
    /// Counters at 0 for `workers` workers (plus one line for every other thread).
    pub fn new(workers: usize) -> Self {
        HttpCounters {
            lines: (0..=workers).map(|_| HttpLine::default()).collect(),
        }
    }

    fn own(&self) -> (&[AtomicU64; 7], bool) {
        let i = LINE.with(Cell::get).min(self.lines.len() - 1);
        (&self.lines[i].0, i != 0)
    }

    /// Adds one to `slot` of the calling thread's line. A worker's line has one writer, the
    /// worker: a plain load and store, without the locked instruction an atomic add costs on
    /// every request. The line of the other threads may have several: an atomic add there.
    fn add(&self, slot: usize) {
        let (line, own) = self.own();
        let c = &line[slot];
        if own {
            c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        } else {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts one request.
    pub fn count_req(&self) {
        self.add(REQ);
    }

    /// Counts one response of `status` in its class, as HAProxy files it (`status / 100`,
    /// outside 1..=5 in "other").
    pub fn count_rsp(&self, status: u16) {
        let n = usize::from(status / 100);
        // Slots 1 to 5: 1xx to 5xx; slot 6: any other status.
        let slot = if (1..=5).contains(&n) { n } else { 6 };
        self.add(slot);
    }

    fn sum(&self, slot: usize) -> u64 {
        self.lines
            .iter()
            .map(|l| l.0[slot].load(Ordering::Relaxed))
            .sum()
    }

    /// `hrsp_1xx` ... `hrsp_5xx`, then `hrsp_other`, in `show stat`'s order.
    pub fn responses(&self) -> [u64; 6] {
        [1, 2, 3, 4, 5, 6].map(|slot| self.sum(slot))
    }

    /// `req_tot`.
    pub fn requests(&self) -> u64 {
        self.sum(REQ)
    }
}

/// One worker's byte counts, on a cache line of its own: in, then out.
#[derive(Debug, Default)]
#[repr(align(128))]
struct BytesLine([AtomicU64; 2]);

/// The bytes a proxy or a server carried, as `show stat` shows them (`bin`: from clients,
/// `bout`: to clients; HAProxy's `bytes_in`/`bytes_out`, counted as its logs count `%U`/`%B`).
/// Added at the end of each transaction (HTTP) or session (TCP) by the worker that served it,
/// one line per worker as [`HttpCounters`], summed when read.
#[derive(Debug)]
pub struct Bytes {
    lines: Box<[BytesLine]>,
}

impl Bytes {
    /// Counts at 0 for `workers` workers (plus one line for every other thread).
    pub fn new(workers: usize) -> Self {
        Bytes {
            lines: (0..=workers).map(|_| BytesLine::default()).collect(),
        }
    }

    /// Adds `bytes_in` and `bytes_out` on the calling thread's line (a plain load and store on
    /// a worker's own line, an atomic add on the shared one, as [`HttpCounters`]).
    pub fn add(&self, bytes_in: u64, bytes_out: u64) {
        let i = LINE.with(Cell::get).min(self.lines.len() - 1);
        let line = &self.lines[i].0;
        for (c, n) in line.iter().zip([bytes_in, bytes_out]) {
            if i != 0 {
                c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            } else {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// `bin` and `bout`.
    pub fn get(&self) -> (u64, u64) {
        self.lines.iter().fold((0, 0), |(i, o), l| {
            (
                i + l.0[0].load(Ordering::Relaxed),
                o + l.0[1].load(Ordering::Relaxed),
            )
        })
    }
}

/// Samples of a sliding average ([`StreamStats`]): HAProxy's `TIME_STATS_SAMPLES`.
const TIME_SAMPLES: u64 = 1024;

/// The slots of one worker's [`StreamStats`] line: connections established and reused, time
/// samples taken, then the four sliding sums and the four maxima (queue, connect, response,
/// total).
const CONNECT: usize = 0;
const REUSE: usize = 1;
const SAMPLES: usize = 2;
const SUMS: usize = 3;
const MAXES: usize = 7;

/// One worker's [`StreamStats`], on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct StreamLine([AtomicU64; 11]);

/// What a backend's or a server's streams did with their server connections, for `show stat`:
/// connections established (`connect`) and reused (`reuse`), and the sliding averages over the
/// last 1024 streams (`qtime`, `ctime`, `rtime`, `ttime`, in ms) with the highest values seen
/// (`qtime_max`...), as HAProxy's `stream_update_time_stats` keeps them (`swrate_add_dynamic`:
/// a plain sum until 1024 samples, then a sliding one). Written for every stream, so kept as
/// [`HttpCounters`]: one line per worker, each worker its own sliding window, the averages
/// combined when read (with one worker, HAProxy's figure exactly).
#[derive(Debug)]
pub struct StreamStats {
    lines: Box<[StreamLine]>,
}

impl StreamStats {
    /// Counts at 0 for `workers` workers (plus one line for every other thread).
    pub fn new(workers: usize) -> Self {
        StreamStats {
            lines: (0..=workers).map(|_| StreamLine::default()).collect(),
        }
    }

    /// The calling thread's line, and whether it is a worker's own (one writer: a plain load
    /// and store) rather than the line shared by the other threads (atomic updates).
    fn own(&self) -> (&[AtomicU64; 11], bool) {
        let i = LINE.with(Cell::get).min(self.lines.len() - 1);
        (&self.lines[i].0, i != 0)
    }

    fn update(c: &AtomicU64, own: bool, f: impl Fn(u64) -> u64) {
        if own {
            c.store(f(c.load(Ordering::Relaxed)), Ordering::Relaxed);
        } else {
            let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(f(v)));
        }
    }

    /// A server connection for a stream: a new one (`connect`) or one reused (`reuse`).
    pub fn count_connection(&self, reused: bool) {
        let (line, own) = self.own();
        Self::update(&line[usize::from(reused) + CONNECT], own, |v| v + 1);
    }

    /// One stream's queue, connect, response and total times, in ms.
    pub fn add_times(&self, times: [u32; 4]) {
        let (line, own) = self.own();
        let n = line[SAMPLES].load(Ordering::Relaxed);
        Self::update(&line[SAMPLES], own, |v| v + 1);
        for (k, t) in times.into_iter().enumerate() {
            let t = u64::from(t);
            Self::update(&line[SUMS + k], own, |sum| {
                // HAProxy's `swrate_add_dynamic`: the oldest sample's share leaves once the
                // window is full.
                let out = if n >= TIME_SAMPLES {
                    sum.div_ceil(TIME_SAMPLES)
                } else {
                    0
                };
                sum - out + t
            });
            if t > line[MAXES + k].load(Ordering::Relaxed) {
                Self::update(&line[MAXES + k], own, |m| m.max(t));
            }
        }
    }

    fn sum(&self, slot: usize) -> u64 {
        self.lines
            .iter()
            .map(|l| l.0[slot].load(Ordering::Relaxed))
            .sum()
    }

    /// `connect` and `reuse`.
    pub fn connections(&self) -> (u64, u64) {
        (self.sum(CONNECT), self.sum(REUSE))
    }

    /// `qtime`, `ctime`, `rtime` and `ttime`: the sliding sums over the samples they hold
    /// (HAProxy's `swrate_avg`, rounded up), 0 before any.
    pub fn averages(&self) -> [u64; 4] {
        let window: u64 = self
            .lines
            .iter()
            .map(|l| l.0[SAMPLES].load(Ordering::Relaxed).min(TIME_SAMPLES))
            .sum();
        [0, 1, 2, 3].map(|k| self.sum(SUMS + k).div_ceil(window.max(1)))
    }

    /// `qtime_max`, `ctime_max`, `rtime_max` and `ttime_max`.
    pub fn maxima(&self) -> [u64; 4] {
        [0, 1, 2, 3].map(|k| {
            self.lines
                .iter()
                .map(|l| l.0[MAXES + k].load(Ordering::Relaxed))
                .max()
                .unwrap_or(0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_filed_by_class_as_haproxy_does() {
        let c = std::sync::Arc::new(HttpCounters::new(2));
        for s in [100, 200, 204, 301, 404, 503, 600, 99] {
            c.count_rsp(s);
        }
        c.count_req();
        let c1 = std::sync::Arc::clone(&c);
        std::thread::spawn(move || {
            enter_worker(1);
            c1.count_req();
            c1.count_rsp(200);
        })
        .join()
        .unwrap();
        assert_eq!(c.responses(), [1, 3, 1, 1, 1, 2]);
        assert_eq!(c.requests(), 2);
    }

    #[test]
    fn lines_sum_even_when_a_count_moves_between_threads() {
        let g = std::sync::Arc::new(Gauge::new(2));
        let g1 = std::sync::Arc::clone(&g);
        std::thread::spawn(move || {
            enter_worker(0);
            g1.incr();
            g1.incr();
        })
        .join()
        .unwrap();
        let g2 = std::sync::Arc::clone(&g);
        std::thread::spawn(move || {
            enter_worker(1);
            g2.decr();
        })
        .join()
        .unwrap();
        assert_eq!(g.get(), 1);
    }

    #[test]
    fn shared_line_enforces_a_limit() {
        let g = Gauge::new(2);
        assert!(g.incr_shared_below(2));
        assert!(g.incr_shared_below(2));
        assert!(!g.incr_shared_below(2));
        g.decr_shared();
        assert_eq!(g.get(), 1);
    }

    #[test]
    fn lines_are_a_cache_line_apart() {
        assert_eq!(std::mem::size_of::<Line>(), 128);
    }

    #[test]
    fn time_averages_slide_over_the_last_1024_samples_as_haproxy_swrate() {
        let s = StreamStats::new(1);
        s.add_times([1, 2, 3, 4]);
        s.add_times([2, 2, 3, 10]);
        assert_eq!(s.averages(), [2, 2, 3, 7]);
        assert_eq!(s.maxima(), [2, 2, 3, 10]);
        for _ in 0..5000 {
            s.add_times([0, 0, 0, 8]);
        }
        assert_eq!(s.averages(), [0, 0, 0, 8]);
        s.count_connection(false);
        s.count_connection(true);
        s.count_connection(true);
        assert_eq!(s.connections(), (1, 2));
    }
}
