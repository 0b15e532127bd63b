//! Giving memory back to the kernel once a burst of connections is over.
//!
//! A session holds a few KiB while it runs: its task (the future, a few KiB), and while a
//! transaction is in flight a read buffer per side and a scratch space for headers. When the
//! burst that started many of them ends, their connections either close or, in HTTP, go idle
//! and are parked with no task and no buffer (see [`crate::idle`]). Two things then keep the
//! burst's peak resident:
//!
//! - the worker's free lists ([`crate::pool`]): the buffers and scratch spaces the burst's
//!   transactions gave back, up to 256 of each, 4 MiB of buffers at the default `tune.bufsize`;
//! - the allocator: glibc's malloc keeps freed memory for reuse and returns it to the kernel
//!   only from the top of a heap, so pages freed between allocations that live on (the parked
//!   connections' entries) stay resident.
//!
//! So each worker looks every [`PERIOD`]: it frees the entries of its free lists that nobody
//! used since the last look ([`crate::pool::Pool::shrink`]), adds the memory of the session
//! tasks that ended (the fall of its task count from its highest point since the last look,
//! [`TASK_BYTES`] each), and when that comes to [`TRIM_MIN`] or more, asks the allocator to
//! release its free pages (`malloc_trim`; HAProxy calls it too, when it stops or runs short of
//! memory). It does not matter how the connections arrived: one by one, the ramp leaves
//! hundreds of tasks ending and scratch spaces unused; at once, it leaves buffers unused too.
//! The look is a few comparisons; steady traffic frees next to nothing and never trims, and
//! nothing on the request path changes but one comparison when a free list hands out an entry.

use std::cell::Cell;
use std::time::Duration;

/// How often a worker looks. After a burst, its memory is back within two looks of the
/// connections going idle: the first sees the lists still in use, the second frees them.
pub const PERIOD: Duration = Duration::from_millis(250);

/// The memory a running session task holds, counted for the trim rule: its boxed future (3,016
/// bytes at the last count, see docs/BENCHMARKS.md), rounded up for the task's own header and
/// its socket's reactor registration.
pub const TASK_BYTES: usize = 4096;

/// The freed memory that makes a trim worth it: the pages it gives back are refaulted when
/// they are used again, so steady traffic, which frees a little at every look, must not trim.
pub const TRIM_MIN: usize = 256 * 1024;

/// How far the number of session tasks must fall from its peak for a trim to be worth it on
/// its own, whatever the free lists gave back.
pub const DROP: usize = TRIM_MIN / TASK_BYTES;

/// The number of session tasks a worker runs, and the most it ran since the last look.
#[derive(Debug, Default)]
pub struct Tasks {
    live: Cell<usize>,
    peak: Cell<usize>,
}

impl Tasks {
    /// A session task starts.
    pub fn start(&self) {
        let n = self.live.get() + 1;
        self.live.set(n);
        if n > self.peak.get() {
            self.peak.set(n);
        }
    }

    /// A session task ends.
    pub fn end(&self) {
        self.live.set(self.live.get() - 1);
    }

    /// The number of session tasks running now.
    pub fn live(&self) -> usize {
        self.live.get()
    }

    /// The look: whether the memory freed since the last one, the tasks' (their count's fall
    /// from its peak, [`TASK_BYTES`] each) and `pooled` bytes that the free lists let go, comes
    /// to [`TRIM_MIN`]. Starts a new period: its peak is the count now.
    pub fn worth_trimming(&self, pooled: usize) -> bool {
        let (live, peak) = (self.live.get(), self.peak.get());
        self.peak.set(live);
        (peak - live) * TASK_BYTES + pooled >= TRIM_MIN
    }

    /// Whether the count alone fell by at least [`DROP`] since the last look, which starts a
    /// new period.
    pub fn burst_ended(&self) -> bool {
        self.worth_trimming(0)
    }
}

/// Frees what this worker's free lists hold unused; returns the bytes.
fn shrink_pools() -> usize {
    crate::forward::shrink_pool() + crate::http::shrink_scratch()
}

/// Looks at `tasks` and the free lists every [`PERIOD`] and trims the allocator after a burst,
/// forever.
pub async fn run(tasks: &Tasks) {
    loop {
        tokio::time::sleep(PERIOD).await;
        if tasks.worth_trimming(shrink_pools()) {
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
