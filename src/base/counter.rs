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
//! Also the HTTP request and response counters of `show stat` ([`HttpCounters`]), which only
//! grow and are read by the stats socket: relaxed atomic adds, as HAProxy keeps them.

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

    /// The total.
    pub fn get(&self) -> u32 {
        self.lines
            .iter()
            .fold(0u32, |sum, l| sum.wrapping_add(l.0.load(Ordering::Relaxed)))
    }
}

/// A proxy's or a server's HTTP counters as `show stat` shows them: requests (`req_tot`) and
/// responses by class (`hrsp_1xx` to `hrsp_5xx`, `hrsp_other`). Relaxed atomic adds, as
/// HAProxy's `_HA_ATOMIC_INC` on its `p.http` counters: one add per request and per response,
/// no lock, nothing allocated.
#[derive(Debug, Default)]
pub struct HttpCounters {
    pub req: AtomicU64,
    /// Indexed by the status' hundreds, 1 to 5; 0 for any other status.
    pub rsp: [AtomicU64; 6],
}

impl HttpCounters {
    /// Counts one request.
    pub fn count_req(&self) {
        self.req.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one response of `status` in its class, as HAProxy files it (`status / 100`,
    /// outside 1..=5 in "other").
    pub fn count_rsp(&self, status: u16) {
        let n = usize::from(status / 100);
        let n = if (1..=5).contains(&n) { n } else { 0 };
        self.rsp[n].fetch_add(1, Ordering::Relaxed);
    }

    /// `hrsp_1xx` ... `hrsp_5xx`, then `hrsp_other`, in `show stat`'s order.
    pub fn responses(&self) -> [u64; 6] {
        let r = |i: usize| self.rsp[i].load(Ordering::Relaxed);
        [r(1), r(2), r(3), r(4), r(5), r(0)]
    }

    /// `req_tot`.
    pub fn requests(&self) -> u64 {
        self.req.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_filed_by_class_as_haproxy_does() {
        let c = HttpCounters::default();
        for s in [100, 200, 204, 301, 404, 503, 600, 99] {
            c.count_rsp(s);
        }
        c.count_req();
        assert_eq!(c.responses(), [1, 2, 1, 1, 1, 2]);
        assert_eq!(c.requests(), 1);
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
