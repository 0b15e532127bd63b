//! Accept pacing: HAProxy's per-second limits on new connections (global `maxconnrate`), new
//! sessions (global `maxsessrate`, frontend `rate-limit sessions`) and new TLS sessions (global
//! `maxsslrate`: `ssl` listeners pause while the full handshakes of the last second reach it).
//!
//! As in HAProxy, a listener over a rate stops accepting until the rate allows one more: the
//! connections wait in the kernel's backlog, none is refused. The rate is HAProxy's one-second
//! frequency counter (`stick::freq::FreqCtr`, the current second plus the previous one weighted
//! by what is left of the current), so after a burst of `N` the next connections come one every
//! `1/N` s as the previous second fades, not all at once when a second ticks. A session is
//! counted when its connection is accepted (Bascule has no step between the two that may drop
//! it yet), so `maxconnrate` and `maxsessrate` pace the same events.
//!
//! Workers share the counters (atomics); two workers that both see room for one more may both
//! accept, as two of HAProxy's threads may.
//!
//! `maxsslrate` counts a full handshake when it completes, as HAProxy counts it, but a
//! handshake takes round trips: a listener that only looked at completed handshakes would take
//! the whole backlog the moment the rate dipped under the limit (none of those handshakes is
//! counted yet), and a burst would go through unpaced. HAProxy caps each accept batch at what
//! the rate has room for; here the handshakes in flight are held against the room
//! ([`Rate::begin`], [`Rate::end`]), so a burst is paced at the rate whichever way it falls
//! against the counter's seconds.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::base::clock;
use crate::stick::freq::FreqCtr;

/// A per-second rate limit.
#[derive(Debug)]
pub struct Rate {
    limit: u32,
    ctr: FreqCtr,
    /// Events begun and not counted yet (handshakes in flight), held against the room.
    pending: AtomicU32,
}

/// The counters' period: one second.
const PERIOD: u32 = 1000;

/// How long to wait before looking again when the events in flight alone fill the rate (they
/// end within a round trip or two).
const PENDING_RETRY_MS: u64 = 5;

impl Rate {
    /// A limit of `limit` events per second; `None` (or 0) means none.
    pub fn new(limit: Option<u32>) -> Option<Rate> {
        limit.filter(|&l| l > 0).map(|limit| Rate {
            limit,
            ctr: FreqCtr::new(),
            pending: AtomicU32::new(0),
        })
    }

    /// How long to wait at `now` (ms) before one more event fits (0: it fits now), the events
    /// in flight counted as done.
    pub fn wait_ms(&self, now: u64) -> u64 {
        let pend = self.pending.load(Ordering::Acquire);
        if self.ctr.remain(PERIOD, now, self.limit, pend) > 0 {
            return 0;
        }
        if pend >= self.limit {
            return PENDING_RETRY_MS;
        }
        // The rate only falls as time passes: the first millisecond with room, by bisection
        // over the next two periods (past them every event is forgotten).
        let (mut lo, mut hi) = (0u64, 2 * u64::from(PERIOD));
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if self.ctr.remain(PERIOD, now + mid, self.limit, pend) > 0 {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }

    /// Counts one event at `now`.
    pub fn count(&self, now: u64) {
        self.ctr.add(PERIOD, now, 1);
    }

    /// An event that will be counted when it completes has begun (a handshake): it holds a
    /// place until [`Rate::end`].
    pub fn begin(&self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
    }

    /// An event begun with [`Rate::begin`] is over, counted at `now` when `counted` (a full
    /// handshake; a resumed or failed one is not). Counted before its place is given back, so
    /// that no look at the room sees it in neither.
    pub fn end(&self, counted: bool, now: u64) {
        if counted {
            self.count(now);
        }
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// The limit, per second.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The rate now.
    pub fn current(&self, now: u64) -> u32 {
        self.ctr.read(PERIOD, now)
    }
}

/// Waits until each of `rates` allows one more event.
pub async fn pace(rates: &[Option<&Rate>]) {
    loop {
        let now = clock::uptime_ms();
        let wait = rates.iter().flatten().map(|r| r.wait_ms(now)).max();
        match wait {
            None | Some(0) => return,
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
    }
}

/// Counts one event in each of `rates`.
pub fn count(rates: &[Option<&Rate>]) {
    let now = clock::uptime_ms();
    for r in rates.iter().flatten() {
        r.count(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_every_period_over_the_limit() {
        let r = Rate::new(Some(20)).unwrap();
        let t0 = 10_000;
        for _ in 0..20 {
            assert_eq!(r.wait_ms(t0), 0);
            r.count(t0);
        }
        // Full until the second is over, then room again as it fades: one per 50 ms.
        let w = r.wait_ms(t0);
        assert!((1000..=1060).contains(&w), "{w}");
        let t1 = t0 + w;
        r.count(t1);
        let w2 = r.wait_ms(t1);
        assert!((40..=60).contains(&w2), "{w2}");
        assert!(Rate::new(Some(0)).is_none() && Rate::new(None).is_none());
        let r = Rate::new(Some(7)).unwrap();
        r.count(5);
        r.count(6);
        assert_eq!((r.current(10), r.limit()), (2, 7));
    }

    #[test]
    fn events_in_flight_hold_their_place_until_they_end() {
        let r = Rate::new(Some(3)).unwrap();
        let t0 = 50_000;
        r.begin();
        r.begin();
        assert_eq!(r.wait_ms(t0), 0);
        r.begin();
        // Three in flight fill a rate of 3: look again soon, not in a second.
        assert_eq!(r.wait_ms(t0), PENDING_RETRY_MS);
        // A resumed one ends uncounted: its place is free at once.
        r.end(false, t0);
        assert_eq!((r.wait_ms(t0), r.current(t0)), (0, 0));
        // Full ones count as they end; one in flight and two counted fill the room until the
        // second fades, and so do three counted once it ends.
        r.end(true, t0);
        r.end(true, t0);
        r.begin();
        let w = r.wait_ms(t0);
        assert!((1000..=1400).contains(&w), "{w}");
        r.end(true, t0);
        assert_eq!(r.current(t0), 3);
        let w = r.wait_ms(t0);
        assert!((1000..=1400).contains(&w), "{w}");
    }
}
