//! `hash-type consistent`: a hash ring holding many points per server, scaled by weight.
//!
//! Unlike [`super::map`], a change to one server (up, down, weight) only adds or removes that
//! server's points, so only the keys that land near them move: when one of N equal servers goes
//! down, about 1/N of the keys move, all of them from that server. This is what caches want.
//!
//! To send a key where HAProxy sends it (`src/lb_chash.c`), the ring is built the same way:
//! - server `s` with weight `w` owns `w × 16` points (`BE_WEIGHT_SCALE`), point `k` sitting at
//!   `avalanche(id(s) × 4096 + k)`, where `id` is the server's numeric id (`id` keyword,
//!   defaulting to its position + 1) — so, as HAProxy's doc says, all load balancers must give
//!   servers the same ids to agree;
//! - a key hashed to `h` goes to the point *closest* to `h` on the ring, looking both ways (the
//!   previous point wins a tie), not merely to the next point clockwise.
//!
//! The avalanche mix is a bijection on 32 bits, so distinct `(id, k)` give distinct points and
//! the ring needs no tie-breaking in practice; points still sort by `(position, server)` so the
//! ring is fully deterministic. With few points per server (weight 1 = 16 points) the shares
//! are lumpy, exactly as in HAProxy; higher weights smooth them.
//!
//! `pick` is a binary search, O(log points), and does not allocate; changes re-sort the ring.

use super::hash::avalanche;
use super::weighted::{ServerSet, ServerSpec};

/// Ring points per unit of weight (HAProxy's `BE_WEIGHT_SCALE`).
pub const POINTS_PER_WEIGHT: u32 = 16;

/// Distance between two servers' point seeds (HAProxy's `SRV_EWGHT_RANGE` = 256 × 16).
const ID_STRIDE: u32 = 4096;

/// One point of the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    /// Position on the 32-bit ring.
    key: u32,
    /// Server index.
    server: u32,
}

/// Consistent hashing over one tier of servers (see the module doc; tiers: [`super::weighted`]).
#[derive(Clone, Debug)]
pub struct ConsistentHash {
    servers: ServerSet,
    /// Points of the usable servers, sorted by position.
    ring: Vec<Point>,
    /// Ring index after which [`ConsistentHash::pick_rr`] resumes.
    rr_next: usize,
}

impl ConsistentHash {
    /// Builds the ring from the server list.
    pub fn new(specs: &[ServerSpec]) -> Self {
        let mut c = ConsistentHash {
            servers: ServerSet::new(specs),
            ring: Vec::new(),
            rr_next: 0,
        };
        for i in 0..c.servers.len() {
            c.push_points(i);
        }
        c.ring.sort_unstable();
        c
    }

    /// The servers' live state.
    pub fn servers(&self) -> &ServerSet {
        &self.servers
    }

    /// Number of points on the ring (0 when no server is usable).
    pub fn ring_len(&self) -> usize {
        self.ring.len()
    }

    /// The server whose point is closest to `hash`. When it is `avoid` (redispatch), the
    /// following points are tried in ring order; `avoid` is returned only when it is the sole
    /// usable server. `None` when no server is usable.
    pub fn pick(&self, hash: u32, avoid: Option<usize>) -> Option<usize> {
        let len = self.ring.len();
        if len == 0 {
            return None;
        }
        let next = self.ring.partition_point(|p| p.key < hash) % len;
        let prev = (next + len - 1) % len;
        let to_prev = hash.wrapping_sub(self.ring[prev].key);
        let to_next = self.ring[next].key.wrapping_sub(hash);
        let start = if to_prev <= to_next { prev } else { next };
        let first = self.ring[start].server as usize;
        if Some(first) != avoid {
            return Some(first);
        }
        (1..len)
            .map(|k| self.ring[(start + k) % len].server as usize)
            .find(|&s| Some(s) != avoid)
            .or(Some(first))
    }

    /// Walks the ring point by point, skipping servers at their `maxconn` and `avoid` (returned
    /// only if nothing else qualifies): HAProxy's fallback when a hashing algorithm finds no
    /// key. `None` when no server is usable or all are full.
    pub fn pick_rr(&mut self, avoid: Option<usize>) -> Option<usize> {
        let len = self.ring.len();
        let mut avoided = None;
        for k in 0..len {
            let at = (self.rr_next + k) % len;
            let s = self.ring[at].server as usize;
            if self.servers.is_full(s) {
                continue;
            }
            if Some(s) == avoid {
                avoided = avoided.or(Some((at, s)));
                continue;
            }
            self.rr_next = at + 1;
            return Some(s);
        }
        let (at, s) = avoided?;
        self.rr_next = at + 1;
        Some(s)
    }

    /// Marks server `i` up or down: adds or removes its points only.
    pub fn set_usable(&mut self, i: usize, usable: bool) {
        if self.servers.set_usable(i, usable) {
            self.refresh(i);
        }
    }

    /// Changes server `i`'s weight (0 = drain): its point count follows, others stay put.
    pub fn set_weight(&mut self, i: usize, weight: u32) {
        if self.servers.set_weight(i, weight) {
            self.refresh(i);
        }
    }

    /// Counts a new connection on `i` (only [`ConsistentHash::pick_rr`] looks at counts).
    pub fn take(&mut self, i: usize) {
        self.servers.take(i);
    }

    /// Counts a closed connection on `i`.
    pub fn release(&mut self, i: usize) {
        self.servers.release(i);
    }

    /// Replaces server `i`'s points by the ones its current state calls for.
    fn refresh(&mut self, i: usize) {
        self.ring.retain(|p| p.server as usize != i);
        self.push_points(i);
        self.ring.sort_unstable();
        if self.rr_next >= self.ring.len() {
            self.rr_next = 0;
        }
    }

    /// Appends (unsorted) the points of server `i` if it is usable.
    fn push_points(&mut self, i: usize) {
        if !self.servers.is_usable(i) {
            return;
        }
        let seed = self.servers.id(i).wrapping_mul(ID_STRIDE);
        let count = self.servers.weight(i) * POINTS_PER_WEIGHT;
        self.ring.extend((0..count).map(|k| Point {
            key: avalanche(seed.wrapping_add(k)),
            server: i as u32,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::hash::{hash, HashFn};

    const KEYS: u32 = 10_000;

    fn specs(weights: &[u32]) -> Vec<ServerSpec> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| ServerSpec::new(&format!("s{}", i + 1), w))
            .collect()
    }

    /// Hash of key number `k`, as `hash-type consistent` hashes by default (sdbm + avalanche).
    fn key(k: u32) -> u32 {
        hash(HashFn::Sdbm, format!("/object/{k}").as_bytes(), true)
    }

    fn assignment(c: &ConsistentHash) -> Vec<Option<usize>> {
        (0..KEYS).map(|k| c.pick(key(k), None)).collect()
    }

    /// Servers chosen by a real HAProxy 2.6.12 (`balance uri`, `hash-type consistent ...`) for
    /// the URIs `/img/0.png` .. `/img/29.png`, as 1-based server numbers.
    #[test]
    fn picks_match_haproxy() {
        /// (function, avalanche, weights, ids (empty = default), expected servers)
        type Case = (HashFn, bool, &'static [u32], &'static [u32], &'static str);
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // hash-type consistent (HAProxy's default function there: sdbm + avalanche)
            (HashFn::Sdbm, true, &[1, 2, 3], &[],
             "2 2 3 2 2 2 2 3 3 2 3 3 1 3 3 2 3 2 3 1 3 3 1 3 2 3 3 3 1 1"),
            // hash-type consistent sdbm
            (HashFn::Sdbm, false, &[1, 2, 3], &[],
             "1 1 1 3 2 3 3 3 1 1 2 3 2 2 3 3 2 1 3 3 3 1 2 3 3 1 3 3 1 3"),
            // hash-type consistent djb2 avalanche, explicit server ids 3 8 12 20
            (HashFn::Djb2, true, &[10, 20, 30, 5], &[3, 8, 12, 20],
             "3 3 2 2 2 4 1 3 1 1 2 3 2 2 2 1 4 1 3 2 2 3 2 2 1 2 2 4 2 3"),
        ];
        for &(f, aval, weights, ids, want) in cases {
            let mut list = specs(weights);
            for (s, &id) in list.iter_mut().zip(ids) {
                s.id = id;
            }
            let c = ConsistentHash::new(&list);
            let got: Vec<String> = (0..30)
                .map(|k| {
                    let h = hash(f, format!("/img/{k}.png").as_bytes(), aval);
                    c.pick(h, None).map_or("-".into(), |s| (s + 1).to_string())
                })
                .collect();
            assert_eq!(
                got.join(" "),
                want,
                "{f:?} avalanche={aval} weights={weights:?}"
            );
        }
    }

    #[test]
    fn removing_one_server_moves_only_its_keys() {
        for n in [3usize, 5, 10] {
            for weight in [1u32, 64] {
                for down in 0..n {
                    let mut c = ConsistentHash::new(&specs(&vec![weight; n]));
                    let before = assignment(&c);
                    c.set_usable(down, false);
                    let after = assignment(&c);
                    let mut moved = 0;
                    for (b, a) in before.iter().zip(&after) {
                        if b != a {
                            assert_eq!(
                                *b,
                                Some(down),
                                "n={n} w={weight}: a key left a live server"
                            );
                            moved += 1;
                        }
                    }
                    c.set_usable(down, true);
                    assert_eq!(assignment(&c), before, "n={n}: back up, same ring");
                    // The 1/N + 2% bound needs enough points per server for shares to be even.
                    if weight >= 64 {
                        let bound = KEYS as f64 * (1.0 / n as f64 + 0.02);
                        assert!(
                            f64::from(moved) <= bound,
                            "n={n} down={down}: moved {moved}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn adding_one_server_moves_keys_only_to_it() {
        for n in [3usize, 5, 10] {
            let mut all = specs(&vec![64; n + 1]);
            all[n].up = false;
            let mut c = ConsistentHash::new(&all);
            let before = assignment(&c);
            c.set_usable(n, true);
            let after = assignment(&c);
            let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
            for (b, a) in before.iter().zip(&after) {
                assert!(
                    b == a || *a == Some(n),
                    "n={n}: a key moved between old servers"
                );
            }
            let bound = KEYS as f64 * (1.0 / (n + 1) as f64 + 0.02);
            assert!(moved as f64 <= bound, "n={n}: moved {moved} > {bound}");
        }
    }

    #[test]
    fn shares_follow_weights() {
        let weights = [32u32, 64, 96, 128];
        let c = ConsistentHash::new(&specs(&weights));
        let mut count = [0u32; 4];
        for k in 0..100_000 {
            count[c.pick(key(k), None).unwrap()] += 1;
        }
        let total: u32 = weights.iter().sum();
        for (i, &got) in count.iter().enumerate() {
            let want = 100_000.0 * f64::from(weights[i]) / f64::from(total);
            let err = (f64::from(got) - want).abs() / want;
            assert!(
                err < 0.10,
                "server {i}: {got} vs {want:.0} ({:.1}%)",
                err * 100.0
            );
        }
    }

    #[test]
    fn weight_change_moves_only_that_servers_points() {
        let mut c = ConsistentHash::new(&specs(&[64, 64, 64]));
        let before = assignment(&c);
        c.set_weight(0, 32);
        assert_eq!(c.ring_len(), (32 + 64 + 64) * 16);
        for (b, a) in before.iter().zip(&assignment(&c)) {
            assert!(
                b == a || *b == Some(0),
                "only keys of the lighter server move"
            );
        }
        c.set_weight(0, 0);
        assert!(
            assignment(&c).iter().all(|s| *s != Some(0)),
            "weight 0 drains"
        );
    }

    #[test]
    fn nothing_usable_gives_none() {
        let cases: &[&[u32]] = &[&[], &[0, 0, 0]];
        for &weights in cases {
            let mut c = ConsistentHash::new(&specs(weights));
            assert_eq!(c.pick(1, None), None);
            assert_eq!(c.pick_rr(Some(0)), None);
        }
        let mut c = ConsistentHash::new(&specs(&[1]));
        c.set_usable(0, false);
        assert_eq!(c.pick(1, Some(0)), None);
        c.set_weight(7, 3);
    }

    #[test]
    fn avoid_goes_to_the_next_server_on_the_ring() {
        let c = ConsistentHash::new(&specs(&[1, 1, 1]));
        for k in 0..1000 {
            let h = key(k);
            let first = c.pick(h, None).unwrap();
            let second = c.pick(h, Some(first)).unwrap();
            assert_ne!(first, second);
            assert_eq!(c.pick(h, Some(first)), Some(second), "deterministic");
        }
        let single = ConsistentHash::new(&specs(&[0, 2]));
        assert_eq!(
            single.pick(5, Some(1)),
            Some(1),
            "alone: the avoided one is returned"
        );
    }

    #[test]
    fn ring_points_depend_on_ids_not_positions() {
        // Same ids in another declaration order: each key reaches the same server name.
        let a = ConsistentHash::new(&[
            ServerSpec::new("x", 2).with_id(1),
            ServerSpec::new("y", 3).with_id(2),
        ]);
        let b = ConsistentHash::new(&[
            ServerSpec::new("y", 3).with_id(2),
            ServerSpec::new("x", 2).with_id(1),
        ]);
        for k in 0..2000 {
            let h = key(k);
            let na = a.servers().name(a.pick(h, None).unwrap());
            let nb = b.servers().name(b.pick(h, None).unwrap());
            assert_eq!(na, nb);
        }
    }

    #[test]
    fn round_robin_fallback_visits_everyone() {
        let mut c = ConsistentHash::new(&specs(&[1, 1, 1]));
        let mut seen = [0u32; 3];
        for _ in 0..48 {
            seen[c.pick_rr(None).unwrap()] += 1;
        }
        assert_eq!(seen, [16, 16, 16]);
    }
}
