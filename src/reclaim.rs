//! Giving memory back to the kernel once a burst of connections is over.
//!
//! A session task holds a few KiB while it runs (its future, its buffers). When the burst that
//! started many of them ends, their connections either close or, in HTTP, go idle and are
//! parked with no task and no buffer (see [`crate::idle`]); the memory is freed, but glibc's
//! malloc keeps it for reuse and returns it to the kernel only from the top of a heap. Pages
//! freed between allocations that live on stay resident, so the process would keep its peak
//! RSS for as long as it holds anything, and its idle connections would look several times
//! dearer than they are.
//!
//! So each worker counts its session tasks and, once a period, when the count has fallen well
//! below its highest point since the last look, asks the allocator to release its free pages
//! (`malloc_trim`; HAProxy calls it too, when it stops or runs short of memory). The look is a
//! few comparisons; the trim runs only after a burst has ended, when the worker has time.

use std::cell::Cell;
use std::time::Duration;

/// How often a worker looks at its task count.
pub const PERIOD: Duration = Duration::from_secs(1);

/// How far the number of session tasks must fall from its peak for a trim to be worth it:
/// about a megabyte of futures and buffers.
pub const DROP: usize = 256;

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

    /// Whether the count fell by at least [`DROP`] since the last look, which starts a new
    /// period: its peak is the count now.
    pub fn burst_ended(&self) -> bool {
        let (live, peak) = (self.live.get(), self.peak.get());
        self.peak.set(live);
        peak - live >= DROP
    }
}

/// Looks at `tasks` every [`PERIOD`] and trims the allocator after a burst, forever.
pub async fn run(tasks: &Tasks) {
    loop {
        tokio::time::sleep(PERIOD).await;
        if tasks.burst_ended() {
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
