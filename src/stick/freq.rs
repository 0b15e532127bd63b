//! Event rates over a sliding period, as HAProxy's period frequency counters compute them
//! (`conn_rate(10s)`, `http_req_rate(1m)`, `gpc0_rate(P)` ...).
//!
//! A counter keeps three numbers: the start of the current period (`tick`), the events of the
//! current period (`curr`) and those of the previous one (`prev`). Adding rotates first when
//! the current period is over: one period later, `prev` takes `curr`; two or more periods
//! later both are forgotten and the new period starts at the event (so a counter's periods are
//! phased on its first event after a pause, not on the clock). Period starts are even
//! milliseconds, as in HAProxy, whose ticks keep the lowest bit for a lock.
//!
//! Reading at `now`, with `elapsed = now - tick`:
//!
//! ```text
//!   elapsed <  P      rate = curr + prev * (P - elapsed) / P            (integer, rounded down)
//!   P <= elapsed < 2P rate = curr * (2P - elapsed) / P                  (curr is now the past)
//!   elapsed >= 2P     rate = 0
//! ```
//!
//! except that when the current count is 0 and the past one is 0 or 1, the past count is
//! returned as is (HAProxy's guard against a rate of 1 flapping to 0 while waiting for the
//! next event). Figures checked against haproxy 2.6.12 (`conn_rate(10s)` read through `show
//! table` every 500 ms, see the tests): 15 events at t=0..2s read 15 until 10s, then 14 at
//! 10.39s, 12 at 11.39s, 9 at 13.40s, 5 at 16.40s, 1 at 18.90s, 0 from 19.40s; a single event
//! reads 1 until 20s (the flapping guard), then 0.
//!
//! Concurrency: adding is one atomic add when no rotation is due. A rotation is done by the
//! thread that sets the lock bit of `tick` (the others spin for the few instructions it takes);
//! an event racing with a rotation may count in either period, as in HAProxy. Readers retry
//! until they see the same unlocked `tick` before and after reading the counts.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::Tick;

/// `tick` is being rotated by one thread.
const LOCK: u64 = 1 << 63;
/// The counter has never counted: the first event starts a period.
const NEVER: u64 = LOCK - 1;

/// A rate over a period of `P` milliseconds; `P` is given to every call (the table's schema
/// holds it), as HAProxy does, so that a counter costs 16 bytes.
#[derive(Debug)]
pub struct FreqCtr {
    tick: AtomicU64,
    curr: AtomicU32,
    prev: AtomicU32,
}

impl Default for FreqCtr {
    fn default() -> Self {
        FreqCtr::new()
    }
}

impl FreqCtr {
    pub const fn new() -> Self {
        FreqCtr {
            tick: AtomicU64::new(NEVER),
            curr: AtomicU32::new(0),
            prev: AtomicU32::new(0),
        }
    }

    /// Counts `inc` events at `now` over periods of `period` ms; returns the current period's
    /// count after the add.
    pub fn add(&self, period: u32, now: Tick, inc: u32) -> u32 {
        let period = u64::from(period.max(1));
        loop {
            let t = self.tick.load(Ordering::Acquire);
            if t & LOCK != 0 {
                std::hint::spin_loop();
                continue;
            }
            // A thread whose `now` is a little older than the period start counts in it too.
            if t != NEVER && now.saturating_sub(t) < period {
                return self.curr.fetch_add(inc, Ordering::AcqRel).wrapping_add(inc);
            }
            if self
                .tick
                .compare_exchange(t, t | LOCK, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let past = self.curr.swap(0, Ordering::AcqRel);
            let new_tick = if t != NEVER && now - t < 2 * period {
                // Exactly one period went by: it becomes the past.
                self.prev.store(past, Ordering::Release);
                t + period
            } else {
                self.prev.store(0, Ordering::Release);
                now
            };
            self.tick.store(new_tick & !1, Ordering::Release);
            return self.curr.fetch_add(inc, Ordering::AcqRel).wrapping_add(inc);
        }
    }

    /// A consistent `(tick, curr, prev)`.
    fn snapshot(&self) -> (u64, u32, u32) {
        loop {
            let t = self.tick.load(Ordering::Acquire);
            if t & LOCK != 0 {
                std::hint::spin_loop();
                continue;
            }
            let curr = self.curr.load(Ordering::Acquire);
            let prev = self.prev.load(Ordering::Acquire);
            if self.tick.load(Ordering::Acquire) == t {
                return (t, curr, prev);
            }
        }
    }

    /// The rate at `now` over `period` ms, as `read_freq_ctr_period` computes it.
    pub fn read(&self, period: u32, now: Tick) -> u32 {
        let (t, mut curr, mut past) = self.snapshot();
        if t == NEVER {
            return 0;
        }
        let period = u64::from(period.max(1));
        let mut elapsed = now.saturating_sub(t);
        if elapsed >= period {
            elapsed -= period;
            past = if elapsed < period { curr } else { 0 };
            curr = 0;
        }
        if curr == 0 && past <= 1 {
            return past;
        }
        let remain = period.saturating_sub(elapsed);
        let weighted = u64::from(past) * remain / period;
        curr.wrapping_add(weighted as u32)
    }

    /// How many more events may happen at `now` before the rate reaches `freq` (0 when it is
    /// reached), counting `pend` events already pending: HAProxy's `freq_ctr_remain_period`,
    /// which has no flapping guard.
    pub fn remain(&self, period: u32, now: Tick, freq: u32, pend: u32) -> u32 {
        let (t, mut curr, mut past) = self.snapshot();
        if t == NEVER {
            return freq.saturating_sub(pend);
        }
        let period = u64::from(period.max(1));
        let mut elapsed = now.saturating_sub(t);
        if elapsed >= period {
            elapsed -= period;
            past = if elapsed < period { curr } else { 0 };
            curr = 0;
        }
        let remain = period.saturating_sub(elapsed);
        let used = u64::from(curr) + u64::from(past) * remain / period + u64::from(pend);
        u64::from(freq).saturating_sub(used) as u32
    }

    /// Sets the rate to `value` at `now` (`set table ... data.http_req_rate V`): a period
    /// starting now holding `value` events, no past.
    pub fn set(&self, now: Tick, value: u32) {
        self.replace(now & !1, value);
    }

    /// Forgets every event.
    pub fn reset(&self) {
        self.replace(NEVER, 0);
    }

    /// The counter as HAProxy's peers protocol carries it: milliseconds since the current
    /// period started (`u32::MAX` when it never counted), the current and the previous
    /// period's counts.
    pub fn export(&self, now: Tick) -> (u32, u32, u32) {
        let (t, curr, prev) = self.snapshot();
        if t == NEVER {
            return (u32::MAX, 0, 0);
        }
        (
            now.saturating_sub(t).min(u64::from(u32::MAX)) as u32,
            curr,
            prev,
        )
    }

    /// Takes the state a peer sent ([`FreqCtr::export`]'s form) at `now`. A period that
    /// started before this process did starts at its start instead.
    pub fn import(&self, now: Tick, elapsed: u32, curr: u32, prev: u32) {
        if elapsed == u32::MAX && curr == 0 && prev == 0 {
            self.reset();
            return;
        }
        self.replace(now.saturating_sub(u64::from(elapsed)) & !1, curr);
        self.prev.store(prev, Ordering::Release);
    }

    fn replace(&self, tick: u64, value: u32) {
        loop {
            let t = self.tick.load(Ordering::Acquire);
            if t & LOCK != 0 {
                std::hint::spin_loop();
                continue;
            }
            if self
                .tick
                .compare_exchange(t, t | LOCK, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.prev.store(0, Ordering::Release);
                self.curr.store(value, Ordering::Release);
                self.tick.store(tick, Ordering::Release);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u32 = 10_000;

    #[test]
    fn matches_haproxy_conn_rate_figures() {
        // Measured on haproxy 2.6.12 with `conn_rate(10s)`: 10 connections at t=0 (the first
        // one starts the period), 5 more at t=2s, `show table` read every ~500 ms. The reads
        // below are the haproxy figures at the (rounded) times they were taken.
        let c = FreqCtr::new();
        let t0 = 1_000_000;
        c.add(P, t0, 10);
        c.add(P, t0 + 2_000, 5);
        for (at, expected) in [
            (2_305, 15),
            (9_892, 15),
            (10_392, 14),
            (10_893, 13),
            (11_393, 12),
            (12_394, 11),
            (12_895, 10),
            (13_395, 9),
            (14_397, 8),
            (14_897, 7),
            (15_398, 6),
            (16_399, 5),
            (16_900, 4),
            (17_401, 3),
            (18_402, 2),
            (18_903, 1),
            (19_403, 0),
            (22_908, 0),
        ] {
            assert_eq!(c.read(P, t0 + at), expected, "at +{at} ms");
        }
    }

    #[test]
    fn a_single_event_does_not_flap() {
        // haproxy 2.6.12: one connection reads 1 until 20s after it, then 0.
        let c = FreqCtr::new();
        c.add(P, 500, 1);
        assert_eq!(c.read(P, 500 + 9_999), 1);
        assert_eq!(c.read(P, 500 + 15_000), 1);
        assert_eq!(c.read(P, 500 + 19_999), 1);
        assert_eq!(c.read(P, 500 + 20_000), 0);
        // The guard is for reads only: the remaining budget does decay.
        assert_eq!(c.remain(P, 500 + 15_000, 10, 0), 10);
    }

    #[test]
    fn rotation_keeps_one_period_of_history() {
        let c = FreqCtr::new();
        assert_eq!(c.read(P, 0), 0);
        c.add(P, 100, 4); // period [100, 10100)
        c.add(P, 10_100, 2); // next period: prev = 4
        assert_eq!(c.read(P, 10_100), 2 + 4);
        assert_eq!(c.read(P, 15_100), 2 + 2);
        // Two periods without events: both forgotten, the next event starts a period.
        c.add(P, 40_001, 3);
        assert_eq!(c.read(P, 40_001), 3);
        assert_eq!(c.remain(P, 40_001, 10, 1), 6);
        // Period starts are even, as in HAProxy.
        assert_eq!(c.snapshot().0, 40_000);
    }

    #[test]
    fn set_and_reset() {
        let c = FreqCtr::new();
        c.set(1_000, 5);
        assert_eq!(c.read(P, 1_000), 5);
        c.reset();
        assert_eq!(c.read(P, 1_000), 0);
    }

    #[test]
    fn concurrent_adds_are_all_counted() {
        let c = FreqCtr::new();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..20_000u64 {
                        // Every thread crosses the same period boundaries.
                        c.add(P, 1_000 + i, 1);
                    }
                });
            }
        });
        // Events before 11_000 (the first period) went to prev, the rest to curr (one racing
        // with the rotation may land in either).
        let (_, curr, prev) = c.snapshot();
        assert_eq!(u64::from(curr) + u64::from(prev), 80_000);
    }
}
