//! Giving memory back to the kernel once a burst of connections is over.
//!
//! A session holds a few KiB while it runs: its task (the future, a few KiB), and while a
//! transaction is in flight a read buffer per side and a scratch space for headers. When the
//! burst that started many of them ends, their connections either close or, in HTTP, go idle
//! and are parked with no task and no buffer (see [`crate::net::idle`]). Two things then keep the
//! burst's peak resident:
//!
//! - the worker's free lists ([`crate::base::pool`]): the buffers and scratch spaces the burst's
//!   transactions gave back, up to 256 of each, 4 MiB of buffers at the default `tune.bufsize`;
//! - the allocator: glibc's malloc keeps freed memory for reuse and returns it to the kernel
//!   only from the top of a heap, so pages freed between allocations that live on (the parked
//!   connections' entries) stay resident.
//!
//! So each worker looks every [`PERIOD`]. It frees the entries of its free lists that nobody
//! used since the last look, when they are at least half of a list ([`crate::base::pool::Pool::shrink`]),
//! then asks the allocator to release
//! its free pages (`malloc_trim`; HAProxy calls it too, when it stops or runs short of memory)
//! in either of two cases:
//!
//! - the worker went still after activity: no session task started or ended during the last
//!   period (its sessions are idle, or in steady keep-alive, which allocates nothing), and
//!   since the last trim some did or the free lists let something go. After a burst the
//!   connections park within `http::PARK_AFTER` and the worker goes still, so its memory is
//!   back within a few periods, however the connections arrived (one by one, the ramp leaves
//!   hundreds of tasks ending and scratch spaces unused; at once, it leaves buffers unused
//!   too). The trim runs once, when the worker has little else to do;
//! - the worker stays busy but freed a lot since the last look: the fall of its task count from
//!   its highest point since then ([`TASK_BYTES`] each) and what its free lists let go come to
//!   [`TRIM_MIN`] or more (a burst that ends under steady traffic).
//!
//! Steady traffic frees next to nothing at each look: steady connections-per-request never go
//! still, and steady keep-alive sessions trim at most once, when they have all started.
//! The look is a few comparisons; on the request path nothing changes but one comparison when
//! a free list hands out an entry, and one store when a session task starts or ends.

use std::cell::Cell;
use std::time::Duration;

/// How often a worker looks. After a burst, its free lists are freed within two looks of the
/// connections going idle (the first sees them still in use), and it goes still within one.
pub const PERIOD: Duration = Duration::from_millis(250);

/// The memory a running session task holds, counted for the trim rule: its boxed future (3,016
/// bytes at the last count, see docs/BENCHMARKS.md), rounded up for the task's own header and
/// its socket's reactor registration.
pub const TASK_BYTES: usize = 4096;

/// The freed memory that makes a trim worth it while the worker stays busy (256 tasks): the
/// pages a trim gives back are refaulted when they are used again, and under steady
/// connection-per-request traffic the task count falls from its peak at every look (by 14 to 22
/// with 50 clients, measured).
pub const TRIM_MIN: usize = 1024 * 1024;

/// How far the number of session tasks must fall from its peak for a trim to be worth it on
/// its own, whatever the free lists gave back.
pub const DROP: usize = TRIM_MIN / TASK_BYTES;

/// The number of session tasks a worker runs, the most it ran since the last look, and whether
/// any started or ended.
#[derive(Debug, Default)]
pub struct Tasks {
    live: Cell<usize>,
    peak: Cell<usize>,
    /// A task started or ended since the last look.
    stirred: Cell<bool>,
    /// A task started or ended, or the free lists freed something, since the last trim.
    untrimmed: Cell<bool>,
}

impl Tasks {
    /// A session task starts.
    pub fn start(&self) {
        let n = self.live.get() + 1;
        self.live.set(n);
        if n > self.peak.get() {
            self.peak.set(n);
        }
        self.stirred.set(true);
    }

    /// A session task ends.
    pub fn end(&self) {
        self.live.set(self.live.get() - 1);
        self.stirred.set(true);
    }

    /// The number of session tasks running now.
    pub fn live(&self) -> usize {
        self.live.get()
    }

    /// The look, given the bytes the free lists just let go: whether to trim now (see the
    /// module's documentation). Starts a new period: its peak is the count now.
    pub fn look(&self, pooled: usize) -> bool {
        let (live, peak) = (self.live.get(), self.peak.get());
        self.peak.set(live);
        let stirred = self.stirred.replace(false);
        let untrimmed = self.untrimmed.get() || stirred || pooled > 0;
        let trim = (!stirred && untrimmed) || (peak - live) * TASK_BYTES + pooled >= TRIM_MIN;
        self.untrimmed.set(untrimmed && !trim);
        trim
    }

    /// The look, counting nothing from the free lists: whether the task count fell by at least
    /// [`DROP`] since the last look, or went still after activity.
    pub fn burst_ended(&self) -> bool {
        self.look(0)
    }
}

/// Frees what this worker's free lists hold unused; returns the bytes.
fn shrink_pools() -> usize {
    crate::net::forward::shrink_pool() + crate::http::shrink_scratch()
}

/// Looks at `tasks` and the free lists every [`PERIOD`] and trims the allocator after a burst,
/// forever.
pub async fn run(tasks: &Tasks) {
    loop {
        tokio::time::sleep(PERIOD).await;
        if tasks.look(shrink_pools()) {
            crate::sys::release_free_memory();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_ends_when_the_count_falls_far_below_its_peak() {
        let t = Tasks::default();
        for _ in 0..DROP + 10 {
            t.start();
        }
        for _ in 0..DROP + 5 {
            t.end();
        }
        assert_eq!(t.live(), 5);
        assert!(t.burst_ended());
        // The next period starts from the count at the last look.
        assert!(!t.burst_ended());
    }

    #[test]
    fn steady_traffic_is_no_burst() {
        let t = Tasks::default();
        for _ in 0..10_000 {
            t.start();
            t.end();
        }
        for _ in 0..DROP {
            t.start();
        }
        assert!(!t.burst_ended());
        for _ in 0..DROP - 1 {
            t.end();
        }
        assert!(
            !t.burst_ended(),
            "a fall smaller than DROP from the new peak"
        );
    }

    /// A worker whose sessions run `f` during one period, with one short session besides (so
    /// that it never goes still): whether its look then trims, the free lists let go `pooled`.
    fn busy_period(t: &Tasks, pooled: usize, f: impl FnOnce(&Tasks)) -> bool {
        t.start();
        t.end();
        f(t);
        t.look(pooled)
    }

    #[test]
    fn a_burst_of_fewer_tasks_than_drop_trims_through_the_free_lists() {
        use crate::base::pool::Pool;
        const BURST: usize = DROP / 2;
        let t = Tasks::default();
        let pool: Pool<Box<[u8]>> = Pool::new(256);
        let shrink = || pool.shrink(|b| b.len());
        // BURST sessions at once, each with two 16 KiB buffers in flight; the look during the
        // burst finds nothing to free.
        let bufs: Vec<Box<[u8]>> = (0..2 * BURST)
            .map(|_| pool.take().unwrap_or_else(|| vec![0u8; 16384].into()))
            .collect();
        assert!(!busy_period(&t, shrink(), |t| (0..BURST).for_each(|_| t.start())));
        // They give their buffers back and park: their tasks alone are not enough...
        for b in bufs {
            pool.put(b);
        }
        assert!(!busy_period(&t, shrink(), |t| (0..BURST).for_each(|_| t.end())));
        // ...but the buffers nobody took for a whole period are, though traffic goes on.
        assert!(busy_period(&t, shrink(), |_| ()));
        assert_eq!(pool.len(), Pool::<Box<[u8]>>::KEEP);
        assert!(!busy_period(&t, shrink(), |_| ()));
    }

    #[test]
    fn a_worker_that_goes_still_after_activity_trims_once() {
        let t = Tasks::default();
        // A few connections, far fewer than DROP, come and park.
        for _ in 0..3 {
            t.start();
        }
        assert!(!t.look(0));
        for _ in 0..3 {
            t.end();
        }
        assert!(!t.look(0), "a task ended during this period");
        assert!(
            t.look(0),
            "still since the last look, active since the last trim"
        );
        assert!(!t.look(0), "nothing happened since the trim");
        assert!(!t.look(0));
    }

    #[test]
    fn steady_traffic_never_trims() {
        let t = Tasks::default();
        for _ in 0..100 {
            assert!(!busy_period(&t, 16384, |t| {
                for _ in 0..50 {
                    t.start();
                    t.end();
                }
            }));
        }
    }

    #[test]
    fn releasing_free_memory_keeps_live_allocations() {
        let v: Vec<Vec<u8>> = (0..1000).map(|i| vec![i as u8; 4096]).collect();
        let kept: Vec<_> = v.into_iter().step_by(2).collect();
        crate::sys::release_free_memory();
        assert!(kept
            .iter()
            .enumerate()
            .all(|(i, b)| b[4095] == (2 * i) as u8));
    }
}
