//! `balance random[(DRAWS)]`: draw DRAWS servers at random by weight and keep the least loaded
//! ("power of N choices"; DRAWS defaults to 2).
//!
//! One draw honours weights exactly on average; two draws already avoid the most loaded
//! servers and fix most of the unfairness of pure chance (HAProxy doc, `balance random`).
//! HAProxy draws a random point on its consistent-hashing ring; Bascule draws directly from
//! the weights (prefix sums and a binary search), which gives every server exactly its weight
//! share instead of the ring's lumpy one. The comparison between draws is HAProxy's: a new draw
//! replaces the best so far unless the best has strictly fewer connections per unit of weight.
//! If the chosen server is at its `maxconn`, `pick` returns `None` so that the caller queues,
//! as HAProxy does.
//!
//! Randomness: the object owns a small SplitMix64 generator seeded by its creator (e.g. from the
//! thread index and the time at start-up), so the module has no randomness source of its own
//! and tests are reproducible. One object per thread: nothing is shared or locked.
//! `pick` is O(DRAWS × log n) and does not allocate.

use super::weighted::{load_below, ServerSet, ServerSpec};

/// Default number of draws for `balance random`.
pub const DEFAULT_DRAWS: u32 = 2;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, good enough to spread picks.
#[derive(Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Weighted random with DRAWS choices over one tier of servers (tiers: [`super::weighted`]).
#[derive(Clone, Debug)]
pub struct Random {
    servers: ServerSet,
    /// Number of draws per pick (at least 1).
    draws: u32,
    rng: SplitMix64,
    /// `ends[i]` = sum of the usable weights of servers `0..=i`; the last one is the total.
    ends: Vec<u64>,
}

impl Random {
    /// Builds the balancer with `draws` draws per pick (0 is treated as 1) and an RNG seed.
    pub fn new(specs: &[ServerSpec], draws: u32, seed: u64) -> Self {
        let mut r = Random {
            servers: ServerSet::new(specs),
            draws: draws.max(1),
            rng: SplitMix64(seed),
            ends: Vec::new(),
        };
        r.rebuild();
        r
    }

    /// The servers' live state.
    pub fn servers(&self) -> &ServerSet {
        &self.servers
    }

    /// Draws DRAWS servers by weight and returns the least loaded (see the module doc). `avoid`
    /// is left out of the draws unless it is the only usable server. `None` when no server is
    /// usable, or when the chosen server is at its `maxconn` (the caller then queues).
    pub fn pick(&mut self, avoid: Option<usize>) -> Option<usize> {
        let mut best: Option<usize> = None;
        for _ in 0..self.draws {
            let cand = self.draw(avoid)?;
            best = match best {
                Some(b) if b != cand && self.less_loaded(b, cand) => Some(b),
                _ => Some(cand),
            };
        }
        best.filter(|&i| !self.servers.is_full(i))
    }

    /// Marks server `i` up or down.
    pub fn set_usable(&mut self, i: usize, usable: bool) {
        if self.servers.set_usable(i, usable) {
            self.rebuild();
        }
    }

    /// Changes server `i`'s weight (0 = drain).
    pub fn set_weight(&mut self, i: usize, weight: u32) {
        if self.servers.set_weight(i, weight) {
            self.rebuild();
        }
    }

    /// Counts a new connection on `i`.
    pub fn take(&mut self, i: usize) {
        self.servers.take(i);
    }

    /// Counts a closed connection on `i`.
    pub fn release(&mut self, i: usize) {
        self.servers.release(i);
    }

    /// True when `a` has strictly fewer connections per unit of weight than `b`.
    fn less_loaded(&self, a: usize, b: usize) -> bool {
        load_below(
            u64::from(self.servers.conns(a)),
            u64::from(self.servers.weight(a)),
            u64::from(self.servers.conns(b)),
            u64::from(self.servers.weight(b)),
        )
    }

    /// One weighted draw among usable servers, leaving `avoid` out unless it is alone.
    fn draw(&mut self, avoid: Option<usize>) -> Option<usize> {
        let total = self.ends.last().copied().unwrap_or(0);
        if total == 0 {
            return None;
        }
        // The avoided server's range [start, end) is cut out of the draw.
        let (cut_start, cut_len) = match avoid.filter(|&a| self.servers.is_usable(a)) {
            Some(a) => {
                let end = self.ends[a];
                let w = u64::from(self.servers.weight(a));
                (end - w, w)
            }
            None => (0, 0),
        };
        if cut_len == total {
            return avoid;
        }
        let mut r = self.rng.next() % (total - cut_len);
        if cut_len > 0 && r >= cut_start {
            r += cut_len;
        }
        Some(self.ends.partition_point(|&end| end <= r))
    }

    /// Recomputes the prefix sums after a state or weight change.
    fn rebuild(&mut self) {
        let mut sum = 0u64;
        self.ends.clear();
        for i in 0..self.servers.len() {
            if self.servers.is_usable(i) {
                sum += u64::from(self.servers.weight(i));
            }
            self.ends.push(sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PICKS: u32 = 100_000;

    fn random(weights: &[u32], draws: u32) -> Random {
        let specs: Vec<_> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| ServerSpec::new(&format!("s{i}"), w))
            .collect();
        Random::new(&specs, draws, 0x5eed)
    }

    fn shares(r: &mut Random, avoid: Option<usize>) -> Vec<f64> {
        let mut count = vec![0u32; r.servers().len()];
        for _ in 0..PICKS {
            count[r.pick(avoid).unwrap()] += 1;
        }
        count
            .iter()
            .map(|&c| f64::from(c) / f64::from(PICKS))
            .collect()
    }

    #[test]
    fn one_draw_honours_weights_within_two_percent() {
        let cases: &[&[u32]] = &[&[1, 1], &[1, 2, 3, 4], &[10, 0, 30], &[256, 1]];
        for &weights in cases {
            let mut r = random(weights, 1);
            let total: u32 = weights.iter().sum();
            for (i, got) in shares(&mut r, None).into_iter().enumerate() {
                let want = f64::from(weights[i]) / f64::from(total);
                assert!(
                    (got - want).abs() < 0.02,
                    "{weights:?} server {i}: {got} vs {want}"
                );
                if want > 0.05 {
                    assert!(
                        (got - want).abs() / want < 0.02,
                        "{weights:?} {i}: relative"
                    );
                }
            }
        }
    }

    #[test]
    fn two_draws_favour_the_less_loaded_server() {
        // Server 0 is busy: with one draw it still gets 1/3, with two only when both draws
        // land on it (1/9).
        let cases: &[(u32, f64, f64)] = &[(1, 0.30, 0.37), (2, 0.09, 0.13)];
        for &(draws, low, high) in cases {
            let mut r = random(&[1, 1, 1], draws);
            for _ in 0..10 {
                r.take(0);
            }
            let got = shares(&mut r, None)[0];
            assert!(
                low < got && got < high,
                "draws={draws}: busy server got {got}"
            );
        }
    }

    #[test]
    fn avoid_is_left_out_of_the_draw() {
        let mut r = random(&[1, 2, 1], 1);
        let s = shares(&mut r, Some(1));
        assert_eq!(s[1], 0.0);
        assert!(
            (s[0] - 0.5).abs() < 0.02 && (s[2] - 0.5).abs() < 0.02,
            "{s:?}"
        );
        let mut alone = random(&[0, 3], 2);
        assert_eq!(alone.pick(Some(1)), Some(1));
    }

    #[test]
    fn changes_and_empty_cases() {
        assert_eq!(random(&[], 2).pick(None), None);
        assert_eq!(random(&[0, 0], 2).pick(None), None);
        let mut r = random(&[1, 1], 0);
        r.set_usable(0, false);
        assert!((0..100).all(|_| r.pick(None) == Some(1)));
        r.set_weight(1, 0);
        assert_eq!(r.pick(Some(1)), None);
        r.set_weight(1, 2);
        r.set_usable(0, true);
        let s = shares(&mut r, None);
        assert!((s[0] - 1.0 / 3.0).abs() < 0.02, "{s:?}");
        r.set_usable(9, true);
        r.take(9);
    }

    #[test]
    fn full_server_means_queue() {
        let mut r = Random::new(&[ServerSpec::new("a", 1).with_maxconn(1)], 2, 1);
        assert_eq!(r.pick(None), Some(0));
        r.take(0);
        assert_eq!(r.pick(None), None);
        r.release(0);
        assert_eq!(r.pick(None), Some(0));
    }

    #[test]
    fn same_seed_same_sequence() {
        let mut a = random(&[1, 2, 3], 2);
        let mut b = random(&[1, 2, 3], 2);
        let sa: Vec<_> = (0..100).map(|_| a.pick(None)).collect();
        let sb: Vec<_> = (0..100).map(|_| b.pick(None)).collect();
        assert_eq!(sa, sb);
    }
}
