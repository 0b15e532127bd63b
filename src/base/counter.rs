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

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

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

#[cfg(test)]
mod tests {
    use super::*;

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
