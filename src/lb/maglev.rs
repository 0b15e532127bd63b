//! Maglev hashing (a Bascule extension, not in HAProxy): a 65,537-entry lookup table filled
//! from per-server permutations, after Eisenbud et al., "Maglev: A Fast and Reliable Software
//! Network Load Balancer" (NSDI 2016), §3.4.
//!
//! Why: consistent hashing ([`super::chash`]) keeps keys in place when servers change but its
//! shares are lumpy; map-based hashing ([`super::map`]) is smooth but reshuffles everything.
//! Maglev gets both: near-exact shares and little disruption, with an O(1) lookup.
//!
//! How the table is built:
//! - each server gets a permutation of the table slots, `slot(j) = (offset + j × skip) mod M`,
//!   where `offset` and `skip` come from two different hashes of the server's NAME (`offset`
//!   from CRC-32, `skip` from wt6, both through the avalanche mix). Since M = 65,537 is prime,
//!   any skip in `1..M` visits every slot. Keying on the name, not the position or an id
//!   assigned at run time, lets every Bascule instance and every thread build the identical
//!   table from the same configuration;
//! - the table is filled in rounds; in each round every usable server, taken in NAME order,
//!   claims its next preferred free slot `weight` times (the weighted variant: a server of
//!   weight w gets w turns per round, so its share of slots is w / total weight, up to one
//!   round's worth of rounding). Because the order is by name, the table does not depend on the
//!   order in which servers are declared: the same set of (name, weight, state) always yields
//!   the same name in every slot. (Two servers with the same name, which the configuration
//!   forbids, fall back to declaration order.)
//!
//! Any change (up, down, weight) rebuilds the whole table, O(M) expected work, done outside the
//! request path. `pick` reads one slot and does not allocate.

use super::hash::{avalanche, crc32, wt6};
use super::weighted::{table_lookup, ServerSet, ServerSpec};

/// Number of slots in the lookup table: a prime, about 6,500 slots per server at 10 servers.
pub const TABLE_SIZE: usize = 65_537;

/// Marks a free slot while the table is being filled.
const FREE: u32 = u32::MAX;

/// Maglev hashing over one tier of servers (see the module doc; tiers: [`super::weighted`]).
#[derive(Clone, Debug)]
pub struct Maglev {
    servers: ServerSet,
    /// Server indices sorted by name: the order in which servers take their turns.
    by_name: Vec<usize>,
    /// First preferred slot of each server (from its name).
    offset: Vec<u64>,
    /// Step between preferred slots of each server (from its name), in `1..TABLE_SIZE`.
    skip: Vec<u64>,
    /// Server index of each slot: `TABLE_SIZE` entries, or none when no server is usable.
    table: Vec<u32>,
}

impl Maglev {
    /// Builds the lookup table from the server list.
    pub fn new(specs: &[ServerSpec]) -> Self {
        let m = TABLE_SIZE as u64;
        let mut by_name: Vec<usize> = (0..specs.len()).collect();
        by_name.sort_by(|&a, &b| specs[a].name.cmp(&specs[b].name).then(a.cmp(&b)));
        let offset = specs
            .iter()
            .map(|s| u64::from(avalanche(crc32(s.name.as_bytes()))) % m)
            .collect();
        let skip = specs
            .iter()
            .map(|s| u64::from(avalanche(wt6(s.name.as_bytes()))) % (m - 1) + 1)
            .collect();
        let mut g = Maglev {
            servers: ServerSet::new(specs),
            by_name,
            offset,
            skip,
            table: Vec::new(),
        };
        g.rebuild();
        g
    }

    /// The servers' live state.
    pub fn servers(&self) -> &ServerSet {
        &self.servers
    }

    /// The server in slot `hash mod 65,537`. When it is `avoid` (redispatch), the following
    /// slots are read until another server shows up; `avoid` is returned only when it is the
    /// sole usable server. `None` when no server is usable.
    pub fn pick(&self, hash: u32, avoid: Option<usize>) -> Option<usize> {
        table_lookup(&self.table, hash as usize % TABLE_SIZE, avoid)
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

    /// Counts a new connection on `i` (Maglev ignores counts; kept for a uniform interface).
    pub fn take(&mut self, i: usize) {
        self.servers.take(i);
    }

    /// Counts a closed connection on `i`.
    pub fn release(&mut self, i: usize) {
        self.servers.release(i);
    }

    /// Number of slots holding server `i` (its share is this / [`TABLE_SIZE`]).
    pub fn slots_of(&self, i: usize) -> usize {
        self.table.iter().filter(|&&s| s as usize == i).count()
    }

    /// Fills the table in rounds (see the module doc).
    fn rebuild(&mut self) {
        self.table.clear();
        if self.servers.usable_count() == 0 {
            return;
        }
        let m = TABLE_SIZE as u64;
        self.table.resize(TABLE_SIZE, FREE);
        let mut taken = vec![0u64; self.servers.len()];
        let mut filled = 0;
        while filled < TABLE_SIZE {
            for &i in &self.by_name {
                if !self.servers.is_usable(i) {
                    continue;
                }
                for _ in 0..self.servers.weight(i) {
                    // The permutation visits every slot once per M steps and a free slot
                    // exists, so this loop ends within M steps.
                    loop {
                        let slot = ((self.offset[i] + taken[i] * self.skip[i]) % m) as usize;
                        taken[i] += 1;
                        if self.table[slot] == FREE {
                            self.table[slot] = i as u32;
                            filled += 1;
                            break;
                        }
                    }
                    if filled == TABLE_SIZE {
                        return;
                    }
                }
            }
        }
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
            .map(|(i, &w)| ServerSpec::new(&format!("app-{i}"), w))
            .collect()
    }

    fn key(k: u32) -> u32 {
        hash(HashFn::Sdbm, format!("client-{k}").as_bytes(), true)
    }

    fn names(g: &Maglev) -> Vec<Option<&str>> {
        (0..TABLE_SIZE as u32)
            .map(|h| g.pick(h, None).and_then(|i| g.servers().name(i)))
            .collect()
    }

    #[test]
    fn same_config_same_table_whatever_the_order() {
        let list = specs(&[1, 2, 3, 1, 5]);
        let mut reversed = list.clone();
        reversed.reverse();
        let a = Maglev::new(&list);
        let b = Maglev::new(&list);
        let c = Maglev::new(&reversed);
        assert_eq!(a.table, b.table, "built twice");
        assert_eq!(names(&a), names(&c), "declared in another order");
    }

    #[test]
    fn removing_or_adding_one_server_moves_about_one_nth() {
        for n in [3usize, 5, 10] {
            for down in 0..n {
                let mut g = Maglev::new(&specs(&vec![1; n]));
                let before: Vec<_> = (0..KEYS).map(|k| g.pick(key(k), None)).collect();
                g.set_usable(down, false);
                let after: Vec<_> = (0..KEYS).map(|k| g.pick(key(k), None)).collect();
                let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
                let bound = KEYS as f64 * (1.0 / n as f64 + 0.02);
                assert!(moved as f64 <= bound, "n={n}, {down} down: {moved} moved");
                // Adding it back is the reverse change: the same keys move back.
                g.set_usable(down, true);
                let back: Vec<_> = (0..KEYS).map(|k| g.pick(key(k), None)).collect();
                assert_eq!(back, before, "n={n}: back up, same table");
            }
        }
    }

    #[test]
    fn shares_follow_weights_within_one_percent() {
        let cases: &[&[u32]] = &[&[1, 1, 1], &[1, 2, 3, 4], &[10, 1], &[256, 7, 33, 1, 1]];
        for &weights in cases {
            let g = Maglev::new(&specs(weights));
            let total: u32 = weights.iter().sum();
            for (i, &w) in weights.iter().enumerate() {
                let want = f64::from(w) / f64::from(total);
                let got = g.slots_of(i) as f64 / TABLE_SIZE as f64;
                assert!(
                    (got - want).abs() < 0.01,
                    "{weights:?} server {i}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn nothing_usable_gives_none_and_drain_works() {
        let cases: &[&[u32]] = &[&[], &[0, 0]];
        for &weights in cases {
            assert_eq!(Maglev::new(&specs(weights)).pick(3, None), None);
        }
        let mut g = Maglev::new(&specs(&[1, 1]));
        g.set_weight(0, 0);
        assert_eq!(g.slots_of(0), 0);
        g.set_usable(1, false);
        assert_eq!(g.pick(3, Some(1)), None);
        g.set_usable(17, true);
    }

    #[test]
    fn avoid_picks_another_server() {
        let g = Maglev::new(&specs(&[1, 1, 1]));
        for k in 0..1000 {
            let first = g.pick(key(k), None).unwrap();
            assert_ne!(g.pick(key(k), Some(first)), Some(first));
        }
        let alone = Maglev::new(&specs(&[3]));
        assert_eq!(alone.pick(1, Some(0)), Some(0));
    }
}
