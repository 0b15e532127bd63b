//! Weighted round-robin in one process-wide order (`balance roundrobin` and `balance static-rr`).
//!
//! HAProxy keeps a backend's round-robin state once for the whole process, under a lock, so
//! consecutive connections meet the servers in turn whichever thread accepted them. Here the
//! order is split in two parts so that no lock is needed:
//!
//! - [`Cursor`]: the position in the order, one atomic per backend and tier shared by every
//!   worker (its own cache line); a pick advances it by one.
//! - [`Schedule`]: which server sits at each position, derived from the servers' weights. It
//!   is a pure function of the weights, so each worker keeps its own copy, compares the weights
//!   it was built from with the current ones at each pick (`sync`, one comparison per server)
//!   and rebuilds it in `O(servers + max weight)` when they differ. Two workers that see the
//!   same weights therefore agree on every position.
//!
//! The order is interleaved weighted round-robin: after dividing the weights by their greatest
//! common divisor, round `r` (from 0) holds, in declaration order, every server whose weight is
//! above `r`; the rounds follow each other. Weights 1:1:1 give `a b c`, weights 3:1 give
//! `a b a a`: spread out, exact over one cycle, and a server of weight 0 never appears (so a
//! down server's share goes to all the others, not to its neighbour). The schedule is held as
//! the start position of each round (at most 257 numbers), never as the whole sequence, so a
//! backend of many heavy servers costs no memory and a weight change (a `slowstart` ramp step,
//! `set weight`) costs no long rebuild.
//!
//! `roundrobin` builds the schedule from the servers' current effective weights; `static-rr`
//! from their configured weights (HAProxy ignores weight changes there, but not up/down or a
//! drain to 0). A server that is in the schedule but may not take this connection (full at its
//! `maxconn`, or the one a retry avoids) is skipped by walking on to the next positions, as
//! HAProxy skips it, without moving the shared cursor further.

use std::sync::atomic::{AtomicU64, Ordering};

use super::weighted::{gcd, MAX_WEIGHT};

/// The shared position in a round-robin order: one per backend and tier, on its own cache line
/// (128 bytes: adjacent-line prefetching pairs 64-byte lines) so that advancing it does not
/// disturb the server state every pick reads.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Cursor(AtomicU64);

impl Cursor {
    /// A cursor at position 0: the first pick goes to the first server in the order.
    pub fn new() -> Self {
        Cursor::default()
    }

    /// Takes the next position (every caller gets a different one).
    pub fn advance(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// One worker's copy of the interleaved order of one tier, derived from the weights it was
/// last given.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The weights the schedule was built from, as given (clamped to [`MAX_WEIGHT`]).
    weights: Vec<u32>,
    /// `weights` divided by their greatest common divisor.
    reduced: Vec<u32>,
    /// `starts[r]`: the position at which round `r` starts; the last entry is the cycle length.
    /// Empty when no server has a weight.
    starts: Vec<u64>,
}

impl Schedule {
    /// The schedule of `servers` servers, all of weight 0 (empty) until [`Schedule::sync`].
    pub fn new(servers: usize) -> Self {
        Schedule {
            weights: vec![0; servers],
            reduced: vec![0; servers],
            starts: Vec::with_capacity(MAX_WEIGHT as usize + 1),
        }
    }

    /// Brings the schedule up to date with `weight(i)`, server i's weight now (0: not in the
    /// order). Cheap when nothing changed: one call and one comparison per server.
    pub fn sync(&mut self, mut weight: impl FnMut(usize) -> u32) {
        let mut changed = false;
        for (i, w) in self.weights.iter_mut().enumerate() {
            let now = weight(i).min(MAX_WEIGHT);
            if *w != now {
                *w = now;
                changed = true;
            }
        }
        if changed {
            self.rebuild();
        }
    }

    fn rebuild(&mut self) {
        let g = self.weights.iter().fold(0, |g, &w| gcd(g, w));
        self.starts.clear();
        if g == 0 {
            self.reduced.iter_mut().for_each(|r| *r = 0);
            return;
        }
        let mut max = 0;
        for (r, &w) in self.reduced.iter_mut().zip(&self.weights) {
            *r = w / g;
            max = max.max(*r);
        }
        // How many servers have each reduced weight, then the rounds' sizes from the top.
        let mut of_weight = [0u64; MAX_WEIGHT as usize + 1];
        for &r in &self.reduced {
            of_weight[r as usize] += 1;
        }
        let mut above: u64 = self.reduced.iter().filter(|&&r| r > 0).count() as u64;
        let mut pos = 0;
        for round in 0..max as usize {
            self.starts.push(pos);
            pos += above; // servers whose weight is above `round`
            above -= of_weight[round + 1];
        }
        self.starts.push(pos);
    }

    /// The number of positions in one cycle of the order (0: no server has a weight).
    pub fn cycle(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The server at position `pos` (taken modulo the cycle), or the first one after it for
    /// which `eligible` holds; `None` when no position of a whole cycle is eligible.
    pub fn pick(&self, pos: u64, mut eligible: impl FnMut(usize) -> bool) -> Option<usize> {
        let cycle = self.cycle();
        if cycle == 0 {
            return None;
        }
        let pos = pos % cycle;
        let rounds = self.starts.len() - 1;
        let mut round = self.starts.partition_point(|&s| s <= pos) - 1;
        // The server at `pos`: the k-th (from 0) of the round's members.
        let mut skip = pos - self.starts[round];
        let mut i = 0;
        let in_round = |i: usize, round: usize| self.reduced[i] as usize > round;
        loop {
            if in_round(i, round) {
                if skip == 0 {
                    break;
                }
                skip -= 1;
            }
            i += 1;
        }
        // Walk the order from there, at most one whole cycle.
        for _ in 0..cycle {
            if eligible(i) {
                return Some(i);
            }
            loop {
                i += 1;
                if i == self.reduced.len() {
                    i = 0;
                    round = (round + 1) % rounds;
                }
                if in_round(i, round) {
                    break;
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(weights: &[u32]) -> Schedule {
        let mut s = Schedule::new(weights.len());
        s.sync(|i| weights[i]);
        s
    }

    fn order(s: &Schedule, len: u64) -> Vec<usize> {
        (0..len).map(|p| s.pick(p, |_| true).unwrap()).collect()
    }

    fn counts(s: &Schedule, len: u64, n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        for p in order(s, len) {
            c[p] += 1;
        }
        c
    }

    #[test]
    fn equal_weights_rotate_in_declaration_order() {
        let s = schedule(&[1, 1, 1, 1]);
        assert_eq!(order(&s, 9), [0, 1, 2, 3, 0, 1, 2, 3, 0]);
        // Same weights above 1: the same order (divided by their common divisor).
        let s = schedule(&[100, 100, 100]);
        assert_eq!((s.cycle(), order(&s, 4)), (3, vec![0, 1, 2, 0]));
    }

    #[test]
    fn weights_interleave_and_are_exact_over_a_cycle() {
        let s = schedule(&[3, 1]);
        assert_eq!(order(&s, 8), [0, 1, 0, 0, 0, 1, 0, 0]);
        let s = schedule(&[5, 3, 2]);
        assert_eq!(s.cycle(), 10);
        assert_eq!(order(&s, 10), [0, 1, 2, 0, 1, 2, 0, 1, 0, 0]);
        assert_eq!(counts(&s, 1000, 3), [500, 300, 200]);
        let s = schedule(&[256, 1, 255, 0, 7]);
        assert_eq!(counts(&s, 519, 5), [256, 1, 255, 0, 7]);
    }

    #[test]
    fn weight_zero_leaves_the_order_and_sync_follows_changes() {
        let mut w = [1, 1, 1];
        let mut s = schedule(&w);
        w[1] = 0; // down or drained: its turn goes to no one in particular
        s.sync(|i| w[i]);
        assert_eq!(order(&s, 4), [0, 2, 0, 2]);
        w = [3, 0, 1];
        s.sync(|i| w[i]);
        assert_eq!(counts(&s, 400, 3), [300, 0, 100]);
        s.sync(|_| 0);
        assert_eq!((s.cycle(), s.pick(5, |_| true)), (0, None));
        s.sync(|_| 1000); // clamped, all equal
        assert_eq!(order(&s, 3), [0, 1, 2]);
    }

    #[test]
    fn ineligible_servers_are_skipped_to_the_next_position() {
        let s = schedule(&[1, 1, 1, 1]);
        assert_eq!(s.pick(1, |i| i != 1), Some(2));
        assert_eq!(s.pick(3, |i| i != 3), Some(0), "wraps to the next cycle");
        assert_eq!(s.pick(2, |_| false), None);
        let s = schedule(&[2, 1]);
        assert_eq!(s.pick(1, |i| i == 0), Some(0));
        assert_eq!(s.pick(0, |i| i == 1), Some(1));
        assert_eq!(Schedule::new(0).pick(0, |_| true), None);
    }

    #[test]
    fn a_shared_cursor_gives_one_order_to_several_copies() {
        let w = [2, 1, 1];
        let (a, b) = (schedule(&w), schedule(&w));
        let cursor = Cursor::new();
        let picks: Vec<usize> = (0..8)
            .map(|k| {
                let copy = if k % 3 == 0 { &a } else { &b };
                copy.pick(cursor.advance(), |_| true).unwrap()
            })
            .collect();
        assert_eq!(picks, [0, 1, 2, 0, 0, 1, 2, 0]);
    }
}
