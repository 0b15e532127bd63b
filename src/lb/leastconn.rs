//! `balance leastconn`: the usable server with the fewest connections for its weight wins;
//! servers that tie take turns.
//!
//! It suits long sessions (LDAP, SQL, WebSocket) where round-robin would pile connections on a
//! slow server. The load measure is HAProxy's (`src/lb_fwlc.c`): a server with `c` connections
//! and weight `w` has key 0 when idle, else `⌊(c + 1) × 256 / w⌋` — i.e. `(c + 1) / w` in
//! HAProxy's fixed point. Idle servers all tie at 0, so under low load every server gets used,
//! not only the heaviest one. Servers at their `maxconn` are skipped.
//!
//! Ties rotate: among the servers with the lowest key, the first one at or after a cursor (in
//! declaration order) wins and the cursor moves past it. `pick` is a single O(n) scan without
//! allocation — fine for the backend sizes HAProxy configurations use; a bucketed structure can
//! replace it behind the same methods if profiles ever say so.
//!
//! The caller reports connections: [`LeastConn::take`] when one is assigned to a server,
//! [`LeastConn::release`] when it ends.

use super::weighted::{ServerSet, ServerSpec};

/// Weighted least-connections over one tier of servers (tiers: [`super::weighted`]).
#[derive(Clone, Debug)]
pub struct LeastConn {
    servers: ServerSet,
    /// Where the scan for ties starts: one past the last server picked.
    cursor: usize,
}

impl LeastConn {
    /// Builds the balancer; every server starts with 0 connections.
    pub fn new(specs: &[ServerSpec]) -> Self {
        LeastConn {
            servers: ServerSet::new(specs),
            cursor: 0,
        }
    }

    /// The servers' live state.
    pub fn servers(&self) -> &ServerSet {
        &self.servers
    }

    /// HAProxy's load key of server `i` (see the module doc); lower is better.
    pub fn load_key(&self, i: usize) -> u64 {
        let c = u64::from(self.servers.conns(i));
        let w = u64::from(self.servers.weight(i)).max(1);
        if c == 0 {
            0
        } else {
            (c + 1) * 256 / w
        }
    }

    /// The least loaded usable server that is not full, rotating among ties. `avoid` (the
    /// server that just failed) is skipped unless it is the only candidate. `None` when no
    /// server is usable or all are at their `maxconn` (the caller then queues).
    pub fn pick(&mut self, avoid: Option<usize>) -> Option<usize> {
        let n = self.servers.len();
        let mut best: Option<(u64, usize)> = None;
        let mut avoided = None;
        for k in 0..n {
            let i = (self.cursor + k) % n;
            if !self.servers.is_usable(i) || self.servers.is_full(i) {
                continue;
            }
            if Some(i) == avoid {
                avoided = Some(i);
                continue;
            }
            let key = self.load_key(i);
            // Strictly lower only: the first one met from the cursor wins a tie.
            if best.map_or(true, |(b, _)| key < b) {
                best = Some((key, i));
            }
        }
        let chosen = best.map(|(_, i)| i).or(avoided)?;
        self.cursor = (chosen + 1) % n;
        Some(chosen)
    }

    /// Marks server `i` up or down (its connection count is kept).
    pub fn set_usable(&mut self, i: usize, usable: bool) {
        self.servers.set_usable(i, usable);
    }

    /// Changes server `i`'s weight (0 = drain: no new picks, connections kept).
    pub fn set_weight(&mut self, i: usize, weight: u32) {
        self.servers.set_weight(i, weight);
    }

    /// Counts a new connection on `i`.
    pub fn take(&mut self, i: usize) {
        self.servers.take(i);
    }

    /// Counts a closed connection on `i`.
    pub fn release(&mut self, i: usize) {
        self.servers.release(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lc(weights: &[u32]) -> LeastConn {
        let specs: Vec<_> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| ServerSpec::new(&format!("s{i}"), w))
            .collect();
        LeastConn::new(&specs)
    }

    #[test]
    fn ties_rotate() {
        let mut b = lc(&[1, 1, 1]);
        let got: Vec<_> = (0..6).map(|_| b.pick(None).unwrap()).collect();
        assert_eq!(
            got,
            [0, 1, 2, 0, 1, 2],
            "idle servers all tie and take turns"
        );
    }

    #[test]
    fn a_busy_server_is_avoided_until_others_catch_up() {
        let mut b = lc(&[1, 1, 1]);
        let first = b.pick(None).unwrap();
        b.take(first);
        let second = b.pick(None).unwrap();
        assert_ne!(second, first);
        b.take(second);
        let third = b.pick(None).unwrap();
        assert!(third != first && third != second);
        b.take(third);
        b.release(second);
        assert_eq!(
            b.pick(None),
            Some(second),
            "the one that finished is now the least loaded"
        );
    }

    #[test]
    fn weights_scale_the_load() {
        // Table: (weights, connections taken, expected pick)
        let cases: &[(&[u32], &[u32], usize)] = &[
            (&[1, 3], &[2, 2], 1), // 3/1 = 768 vs 3/3 = 256
            (&[1, 3], &[1, 5], 0), // 2/1 = 512 vs 6/3 = 512: tie, cursor at 0
            (&[2, 1], &[4, 1], 1), // 5/2 = 640 vs 2/1 = 512
            (&[1, 1], &[0, 4], 0), // idle wins
            (&[5, 1], &[1, 0], 1), // idle (0) beats anything busy
        ];
        for &(weights, conns, want) in cases {
            let mut b = lc(weights);
            for (i, &c) in conns.iter().enumerate() {
                for _ in 0..c {
                    b.take(i);
                }
            }
            let keys: Vec<_> = (0..weights.len()).map(|i| b.load_key(i)).collect();
            let got = b.pick(None);
            assert_eq!(
                got,
                Some(want),
                "weights {weights:?} conns {conns:?} keys {keys:?}"
            );
        }
    }

    #[test]
    fn weighted_spread_under_load() {
        // Keep taking without releasing: connections end up proportional to weights.
        let mut b = lc(&[1, 2, 3, 4]);
        for _ in 0..10_000 {
            let i = b.pick(None).unwrap();
            b.take(i);
        }
        for i in 0..4 {
            let want = 1000.0 * (i + 1) as f64;
            let got = f64::from(b.servers().conns(i));
            assert!(
                (got - want).abs() / want < 0.02,
                "server {i}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn maxconn_down_drain_and_avoid() {
        let mut b = LeastConn::new(&[
            ServerSpec::new("a", 1).with_maxconn(1),
            ServerSpec::new("b", 1),
        ]);
        b.take(0);
        assert_eq!(b.pick(None), Some(1), "a is full");
        assert_eq!(b.pick(Some(1)), Some(1), "b avoided but alone");
        b.set_weight(1, 0);
        assert_eq!(b.pick(None), None, "a full, b drained");
        b.release(0);
        b.set_usable(0, false);
        assert_eq!(b.pick(None), None);
        b.set_usable(0, true);
        assert_eq!(b.pick(Some(0)), Some(0));
        assert_eq!(lc(&[]).pick(None), None);
        b.take(9);
        b.release(9);
    }
}
