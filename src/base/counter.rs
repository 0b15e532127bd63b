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
//! ([`Bytes`]), written for every request and read only by the stats socket, are kept the same
//! way.

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
}
