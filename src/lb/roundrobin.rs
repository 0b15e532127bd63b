//! Weighted round-robin, two ways.
//!
//! - [`SmoothRoundRobin`] (`balance roundrobin`): each pick adds every eligible server's weight
//!   to its running score, picks the highest score and subtracts the total from it. The sequence
//!   is spread out (weights 3:1 give a a b a, not a a a b), and the weights are read at each pick,
//!   so a weight change takes effect on the next pick with no rebuild.
//! - [`StaticRoundRobin`] (`balance static-rr`): the same spread-out sequence computed once from
//!   the start weights, then walked with an index; cheaper per pick, but weights are fixed.

/// Smooth weighted round-robin state for one worker and one tier of servers.
#[derive(Debug, Clone)]
pub struct SmoothRoundRobin {
    score: Vec<i64>,
}

impl SmoothRoundRobin {
    /// State for `servers` servers, all scores at zero.
    pub fn new(servers: usize) -> Self {
        SmoothRoundRobin {
            score: vec![0; servers],
        }
    }

    /// Picks a server. `weight(i)` is server i's effective weight now, 0 when it is not eligible
    /// (down, disabled, full, drained or to be avoided). Returns `None` when none is eligible.
    pub fn pick(&mut self, mut weight: impl FnMut(usize) -> u32) -> Option<usize> {
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for i in 0..self.score.len() {
            let w = i64::from(weight(i));
            if w == 0 {
                continue;
            }
            self.score[i] += w;
            total += w;
            if best.is_none_or(|b| self.score[i] > self.score[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.score[b] -= total;
        Some(b)
    }
}

/// Static weighted round-robin: a precomputed sequence and a cursor.
#[derive(Debug, Clone)]
pub struct StaticRoundRobin {
    order: Vec<usize>,
    next: usize,
}

impl StaticRoundRobin {
    /// Builds the sequence from the start weights (a server of weight 0 never appears).
    pub fn new(weights: &[u32]) -> Self {
        let total: u32 = weights.iter().sum();
        let mut rr = SmoothRoundRobin::new(weights.len());
        let order = (0..total).filter_map(|_| rr.pick(|i| weights[i])).collect();
        StaticRoundRobin { order, next: 0 }
    }

    /// Picks the next server in the sequence for which `eligible(i)` holds, or `None` after one
    /// full turn without an eligible server.
    pub fn pick(&mut self, mut eligible: impl FnMut(usize) -> bool) -> Option<usize> {
        for _ in 0..self.order.len() {
            let i = self.order[self.next];
            self.next = (self.next + 1) % self.order.len();
            if eligible(i) {
                return Some(i);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(picks: impl Iterator<Item = Option<usize>>, n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        for p in picks {
            c[p.unwrap()] += 1;
        }
        c
    }

    #[test]
    fn smooth_sequence_is_spread_and_exact() {
        let mut rr = SmoothRoundRobin::new(2);
        let w = [3, 1];
        let seq: Vec<_> = (0..8).map(|_| rr.pick(|i| w[i]).unwrap()).collect();
        assert_eq!(seq, [0, 0, 1, 0, 0, 0, 1, 0]);
        let mut rr = SmoothRoundRobin::new(3);
        let w = [5, 3, 2];
        assert_eq!(
            counts((0..1000).map(|_| rr.pick(|i| w[i])), 3),
            [500, 300, 200]
        );
    }

    #[test]
    fn weight_change_applies_without_rebuild() {
        let mut rr = SmoothRoundRobin::new(2);
        let mut w = [1, 1];
        assert_eq!(counts((0..100).map(|_| rr.pick(|i| w[i])), 2), [50, 50]);
        w = [0, 1]; // drain server 0
        assert_eq!(counts((0..10).map(|_| rr.pick(|i| w[i])), 2), [0, 10]);
        w = [3, 1];
        let c = counts((0..400).map(|_| rr.pick(|i| w[i])), 2);
        assert!((298..=302).contains(&c[0]), "{c:?}");
    }

    #[test]
    fn nothing_eligible_is_none() {
        let mut rr = SmoothRoundRobin::new(2);
        assert_eq!(rr.pick(|_| 0), None);
        assert_eq!(SmoothRoundRobin::new(0).pick(|_| 1), None);
        let mut s = StaticRoundRobin::new(&[0, 0]);
        assert_eq!(s.pick(|_| true), None);
        let mut s = StaticRoundRobin::new(&[2, 1]);
        assert_eq!(s.pick(|_| false), None);
    }

    #[test]
    fn static_follows_start_weights_and_skips_ineligible() {
        let mut s = StaticRoundRobin::new(&[3, 1]);
        assert_eq!(counts((0..400).map(|_| s.pick(|_| true)), 2), [300, 100]);
        assert_eq!(counts((0..10).map(|_| s.pick(|i| i == 1)), 2), [0, 10]);
    }
}
