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

use std::time::Duration;

use crate::base::clock;
use crate::stick::freq::FreqCtr;

/// A per-second rate limit.
#[derive(Debug)]
pub struct Rate {
    limit: u32,
    ctr: FreqCtr,
}

/// The counters' period: one second.
const PERIOD: u32 = 1000;

impl Rate {
    /// A limit of `limit` events per second; `None` (or 0) means none.
    pub fn new(limit: Option<u32>) -> Option<Rate> {
        limit.filter(|&l| l > 0).map(|limit| Rate {
            limit,
            ctr: FreqCtr::new(),
        })
    }

    /// How long to wait at `now` (ms) before one more event fits (0: it fits now).
    pub fn wait_ms(&self, now: u64) -> u64 {
        if self.ctr.remain(PERIOD, now, self.limit, 0) > 0 {
            return 0;
        }
        // The rate only falls as time passes: the first millisecond with room, by bisection
        // over the next two periods (past them every event is forgotten).
        let (mut lo, mut hi) = (0u64, 2 * u64::from(PERIOD));
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if self.ctr.remain(PERIOD, now + mid, self.limit, 0) > 0 {
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
}
