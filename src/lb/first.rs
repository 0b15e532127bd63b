//! `balance first`: the usable server with the lowest numeric id that still has a free
//! connection slot gets the connection.
//!
//! The point (HAProxy doc, `balance first`) is to use as few servers as possible so that the
//! others can be powered down off-peak: a server is filled up to its `maxconn` before the next
//! one is used. Weights are ignored, except that weight 0 still means "drain". A server without
//! `maxconn` is never full, so it takes everything once reached. Servers are ordered by their
//! `id` (which defaults to the position + 1), as in HAProxy's `src/lb_fas.c`.
//!
//! `pick` is an O(n) scan in id order, without allocation; the caller reports connections with
//! [`First::take`] and [`First::release`].

use super::weighted::{ServerSet, ServerSpec};

/// `balance first` over one tier of servers (tiers: [`super::weighted`]).
#[derive(Clone, Debug)]
pub struct First {
    servers: ServerSet,
    /// Server indices sorted by id (then position).
    by_id: Vec<usize>,
}

impl First {
    /// Builds the balancer; every server starts with 0 connections.
    pub fn new(specs: &[ServerSpec]) -> Self {
        let servers = ServerSet::new(specs);
        let mut by_id: Vec<usize> = (0..servers.len()).collect();
        by_id.sort_by_key(|&i| (servers.id(i), i));
        First { servers, by_id }
    }

    /// The servers' live state.
    pub fn servers(&self) -> &ServerSet {
        &self.servers
    }

    /// The first usable, not full server in id order. `avoid` (the server that just failed) is
    /// passed over unless it is the only candidate. `None` when no server is usable or all are
    /// at their `maxconn` (the caller then queues).
    pub fn pick(&self, avoid: Option<usize>) -> Option<usize> {
        let mut avoided = None;
        for &i in &self.by_id {
            if !self.servers.is_usable(i) || self.servers.is_full(i) {
                continue;
            }
            if Some(i) == avoid {
                avoided = Some(i);
                continue;
            }
            return Some(i);
        }
        avoided
    }

    /// Marks server `i` up or down (its connection count is kept).
    pub fn set_usable(&mut self, i: usize, usable: bool) {
        self.servers.set_usable(i, usable);
    }

    /// Changes server `i`'s weight; only 0 (drain) matters to this algorithm.
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

    fn three() -> First {
        First::new(&[
            ServerSpec::new("c", 1).with_id(30),
            ServerSpec::new("a", 1).with_id(10).with_maxconn(2),
            ServerSpec::new("b", 5).with_id(20).with_maxconn(1),
        ])
    }

    #[test]
    fn fills_servers_in_id_order() {
        let mut f = three();
        let mut got = Vec::new();
        for _ in 0..5 {
            let i = f.pick(None).unwrap();
            f.take(i);
            got.push(f.servers().name(i).unwrap().to_string());
        }
        assert_eq!(
            got,
            ["a", "a", "b", "c", "c"],
            "a (id 10) then b (20) then c (30)"
        );
        f.release(1);
        assert_eq!(f.pick(None), Some(1), "a has a free slot again");
    }

    #[test]
    fn states_and_avoid() {
        // (server made unusable, avoid, expected) from a fresh `three()`.
        let cases: &[(Option<usize>, Option<usize>, Option<usize>)] = &[
            (None, None, Some(1)),
            (Some(1), None, Some(2)),
            (None, Some(1), Some(2)),
            (Some(2), Some(1), Some(0)),
        ];
        for &(down, avoid, want) in cases {
            let mut f = three();
            if let Some(d) = down {
                f.set_usable(d, false);
            }
            assert_eq!(f.pick(avoid), want, "down={down:?} avoid={avoid:?}");
        }
    }

    #[test]
    fn none_when_nothing_usable_or_all_full() {
        assert_eq!(First::new(&[]).pick(None), None);
        let mut f = First::new(&[ServerSpec::new("a", 1).with_maxconn(1)]);
        assert_eq!(f.pick(Some(0)), Some(0), "avoided but alone");
        f.take(0);
        assert_eq!(f.pick(None), None, "full");
        f.release(0);
        f.set_weight(0, 0);
        assert_eq!(f.pick(None), None, "drained");
        f.take(5);
        f.set_usable(5, true);
    }
}
