//! `hash-type map-based` (HAProxy's default): a static table where each usable server appears
//! as many times as its weight, and a key's hash picks entry `hash % table length`.
//!
//! It is the smoothest way to spread hashed keys by weight, but it is static: any change of the
//! usable set or of a weight rebuilds the table, and most keys then move to another server
//! (HAProxy documents exactly this; `hash-type consistent` exists to avoid it). To send a key
//! where HAProxy sends it, the table is laid out the way HAProxy's `recalc_server_map` lays it
//! out: weights are divided by their greatest common divisor, then slots are handed out one at
//! a time to the server with the highest accumulated score (declaration order breaks ties), so
//! servers are interleaved rather than grouped. The tests compare picks with a real HAProxy.
//!
//! The same table, walked with a cursor, gives HAProxy's round-robin fallback for hashing
//! algorithms whose key is missing (`url_param` absent, empty `hdr`...): [`MapHash::pick_rr`].
//! Cost: rebuilding is O(table length × servers), as in HAProxy; `pick` is O(1) and does not
//! allocate.

use super::weighted::{gcd, table_lookup, ServerSet, ServerSpec, MAX_WEIGHT};

/// Map-based hashing over one tier of servers (see the module doc; tiers: [`super::weighted`]).
#[derive(Clone, Debug)]
pub struct MapHash {
    servers: ServerSet,
    /// Divisor applied to every weight before it sizes the table (HAProxy's `wmult`): the GCD of
    /// the configured weights, fixed at build time like HAProxy's.
    weight_gcd: u32,
    /// Server index of each slot; length = sum of the reduced weights of the usable servers.
    table: Vec<u32>,
    /// Next slot for [`MapHash::pick_rr`].
    rr_next: usize,
}

impl MapHash {
    /// Builds the table for `specs`, dividing weights by the GCD of their non-zero weights.
    ///
    /// HAProxy computes that GCD over all servers of the backend, active and backup: when the
    /// tiers are built separately, use [`MapHash::with_weight_gcd`] with the backend-wide GCD
    /// to reproduce HAProxy's table exactly.
    pub fn new(specs: &[ServerSpec]) -> Self {
        let g = specs
            .iter()
            .fold(0, |g, s| gcd(g, s.weight.min(MAX_WEIGHT)));
        Self::with_weight_gcd(specs, g)
    }

    /// Builds the table with an explicit weight divisor (0 is treated as 1).
    pub fn with_weight_gcd(specs: &[ServerSpec], weight_gcd: u32) -> Self {
        let mut m = MapHash {
            servers: ServerSet::new(specs),
            weight_gcd: weight_gcd.max(1),
            table: Vec::new(),
            rr_next: 0,
        };
        m.rebuild();
        m
    }

    /// The servers' live state.
    pub fn servers(&self) -> &ServerSet {
        &self.servers
    }

    /// Table length (0 when no server is usable).
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// The server for a key hashed to `hash`: entry `hash % table length`. When that entry is
    /// `avoid` (the server that just failed, on redispatch), the next entry naming another
    /// server is used; `avoid` is returned only when it is the sole usable server. `None` when
    /// no server is usable.
    pub fn pick(&self, hash: u32, avoid: Option<usize>) -> Option<usize> {
        let len = self.table.len();
        if len == 0 {
            return None;
        }
        table_lookup(&self.table, hash as usize % len, avoid)
    }

    /// Round-robin over the table, skipping servers at their `maxconn` and `avoid` (returned
    /// only if nothing else qualifies): HAProxy's fallback when a hashing algorithm finds no
    /// key. `None` when no server is usable or all are full.
    pub fn pick_rr(&mut self, avoid: Option<usize>) -> Option<usize> {
        let len = self.table.len();
        let mut avoided = None;
        for k in 0..len {
            let slot = (self.rr_next + k) % len;
            let s = self.table[slot] as usize;
            if self.servers.is_full(s) {
                continue;
            }
            if Some(s) == avoid {
                avoided = avoided.or(Some((slot, s)));
                continue;
            }
            self.rr_next = slot + 1;
            return Some(s);
        }
        let (slot, s) = avoided?;
        self.rr_next = slot + 1;
        Some(s)
    }

    /// Marks server `i` up or down; rebuilds the table when its usability changed.
    pub fn set_usable(&mut self, i: usize, usable: bool) {
        if self.servers.set_usable(i, usable) {
            self.rebuild();
        }
    }

    /// Changes server `i`'s weight (0 = drain); rebuilds the table when it changed.
    pub fn set_weight(&mut self, i: usize, weight: u32) {
        if self.servers.set_weight(i, weight) {
            self.rebuild();
        }
    }

    /// Counts a new connection on `i` (only [`MapHash::pick_rr`] looks at counts).
    pub fn take(&mut self, i: usize) {
        self.servers.take(i);
    }

    /// Counts a closed connection on `i`.
    pub fn release(&mut self, i: usize) {
        self.servers.release(i);
    }

    /// Reduced weight: the weight divided by the build-time GCD, rounded up so that a weight
    /// changed at run time to a non-multiple still counts.
    fn reduced_weight(&self, i: usize) -> u32 {
        if !self.servers.is_usable(i) {
            return 0;
        }
        self.servers.weight(i).div_ceil(self.weight_gcd)
    }

    /// Lays the table out like HAProxy: for each slot, every usable server adds its reduced
    /// weight to its score; the first server with the highest `(score + total) / total` wins the
    /// slot and pays `total`. Over a full pass each server wins exactly its weight in slots,
    /// spread evenly, and the first declared server gets slot 0.
    fn rebuild(&mut self) {
        let n = self.servers.len();
        let weights: Vec<i64> = (0..n).map(|i| i64::from(self.reduced_weight(i))).collect();
        let total: i64 = weights.iter().sum();
        let mut score = vec![0i64; n];
        self.table.clear();
        for _ in 0..total {
            let mut best: Option<(usize, i64)> = None;
            for (i, &w) in weights.iter().enumerate() {
                if w == 0 {
                    continue;
                }
                if total == 1 {
                    best = Some((i, 0));
                    break;
                }
                score[i] += w;
                let v = (score[i] + total) / total;
                if best.is_none_or(|(_, max)| v > max) {
                    best = Some((i, v));
                }
            }
            if let Some((i, _)) = best {
                score[i] -= total;
                self.table.push(i as u32);
            }
        }
        if self.rr_next >= self.table.len() {
            self.rr_next = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(weights: &[u32]) -> Vec<ServerSpec> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| ServerSpec::new(&format!("s{}", i + 1), w))
            .collect()
    }

    fn table(m: &MapHash) -> Vec<usize> {
        (0..m.table_len() as u32)
            .map(|h| m.pick(h, None).unwrap_or(usize::MAX))
            .collect()
    }

    #[test]
    fn table_layout_interleaves_like_haproxy() {
        // (weights, table HAProxy 2.6 builds): observed by sending `balance uri` requests whose
        // sdbm hash hits each slot in turn to a real HAProxy and noting the server that answered.
        let cases: &[(&[u32], &[usize])] = &[
            (&[1, 1, 1], &[0, 1, 2]),
            (&[2, 4, 6], &[0, 2, 1, 2, 1, 2]),
            (&[1, 2], &[0, 1, 1]),
            (&[3, 1], &[0, 0, 0, 1]),
            (&[0, 5], &[1]),
        ];
        for &(weights, want) in cases {
            let m = MapHash::new(&specs(weights));
            assert_eq!(table(&m), want, "weights {weights:?}");
        }
    }

    /// Servers chosen by a real HAProxy 2.6.12 (`balance uri`, `hash-type map-based`, weights
    /// 10 20 30 5) for the URIs `/img/0.png` .. `/img/29.png`, as 1-based server numbers.
    #[test]
    fn picks_match_haproxy() {
        let want = "4 3 3 3 2 2 1 1 2 2 3 2 1 1 2 2 3 3 3 3 4 3 3 3 2 2 1 1 2 2";
        let m = MapHash::new(&specs(&[10, 20, 30, 5]));
        let got: Vec<String> = (0..30)
            .map(|k| {
                let h = crate::lb::hash::sdbm(format!("/img/{k}.png").as_bytes());
                m.pick(h, None).map_or("-".into(), |s| (s + 1).to_string())
            })
            .collect();
        assert_eq!(got.join(" "), want);
    }

    #[test]
    fn nothing_usable_gives_none() {
        let cases: &[&[u32]] = &[&[], &[0, 0]];
        for &weights in cases {
            let mut m = MapHash::new(&specs(weights));
            assert_eq!(m.pick(7, None), None, "{weights:?}");
            assert_eq!(m.pick_rr(None), None, "{weights:?}");
        }
        let mut m = MapHash::new(&specs(&[1, 1]));
        m.set_usable(0, false);
        m.set_usable(1, false);
        assert_eq!(m.pick(7, Some(1)), None);
        m.set_usable(99, true);
        m.set_weight(99, 3);
    }

    #[test]
    fn weights_are_honoured() {
        let m = MapHash::new(&specs(&[1, 2, 3, 4]));
        let mut count = [0u32; 4];
        for key in 0..100_000u32 {
            let h = crate::lb::hash::hash(crate::lb::hash::HashFn::Sdbm, &key.to_be_bytes(), true);
            count[m.pick(h, None).unwrap()] += 1;
        }
        for (i, &c) in count.iter().enumerate() {
            let want = 100_000.0 * (i + 1) as f64 / 10.0;
            assert!(
                (c as f64 - want).abs() < 0.02 * 100_000.0,
                "server {i}: {c} vs {want}"
            );
        }
    }

    #[test]
    fn down_server_is_removed_and_affinity_is_stable() {
        let mut m = MapHash::new(&specs(&[1, 1, 1]));
        let before: Vec<_> = (0..1000).map(|h| m.pick(h, None)).collect();
        m.set_usable(1, false);
        for h in 0..1000 {
            assert_ne!(m.pick(h, None), Some(1));
        }
        m.set_usable(1, true);
        let after: Vec<_> = (0..1000).map(|h| m.pick(h, None)).collect();
        assert_eq!(before, after, "same inputs, same table");
    }

    #[test]
    fn avoid_moves_to_another_server_unless_alone() {
        let mut m = MapHash::new(&specs(&[1, 1]));
        assert_eq!(m.pick(0, None), Some(0));
        assert_eq!(m.pick(0, Some(0)), Some(1));
        m.set_weight(1, 0);
        assert_eq!(
            m.pick(0, Some(0)),
            Some(0),
            "drained peer: the avoided one is all we have"
        );
    }

    #[test]
    fn round_robin_fallback_skips_full_and_avoided() {
        let mut m = MapHash::new(&[
            ServerSpec::new("a", 1).with_maxconn(1),
            ServerSpec::new("b", 1),
            ServerSpec::new("c", 1),
        ]);
        let got: Vec<_> = (0..4).map(|_| m.pick_rr(None)).collect();
        assert_eq!(got, [Some(0), Some(1), Some(2), Some(0)]);
        m.take(0);
        let got: Vec<_> = (0..3).map(|_| m.pick_rr(Some(1))).collect();
        assert_eq!(got, [Some(2), Some(2), Some(2)]);
        m.set_usable(2, false);
        assert_eq!(m.pick_rr(Some(1)), Some(1), "only the avoided one is left");
    }
}
