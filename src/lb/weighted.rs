//! The server-state bookkeeping every load-balancing algorithm shares.
//!
//! Each algorithm in [`crate::lb`] is a small pure object built from an immutable server list
//! (practice 8 of STYLE.md, after HAProxy's `struct lbprm`). They all need the same per-server
//! facts: configured weight, whether the server is up (health checks and admin state), its
//! connection count and its `maxconn`. [`ServerSet`] holds those facts once, with the rules that
//! HAProxy applies everywhere (a server is *usable* for new picks only when it is up and its
//! weight is not 0; weight 0 means "drain"), so no algorithm re-implements them.
//!
//! Tiers: every object is built for ONE tier of servers. The caller keeps one object for the
//! active servers and one for the backup servers, and uses the backup object only when the
//! active one has no usable server. Without `option allbackups`, HAProxy sends everything to
//! the first usable backup server: the caller then asks [`ServerSet::first_usable`] of the
//! backup object instead of calling `pick`. With `allbackups` it calls `pick` as usual.
//!
//! Also here: small helpers used by several algorithms (weight-normalised load comparison, GCD,
//! table walking for the redispatch hint), so that they are written once.

/// Largest weight a server may have, as in HAProxy (`weight` accepts 0..=256). Larger values are
/// clamped, so no algorithm can overflow its tables.
pub const MAX_WEIGHT: u32 = 256;

/// One server as the algorithms see it, taken from the backend's resolved server list.
///
/// Positions in the slice given to a constructor are the indices every method uses (`0..n`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// Server name; Maglev keys its permutation on it, so it must be stable across reloads.
    pub name: String,
    /// HAProxy numeric id (`id` keyword, "puid"); 0 means "position + 1", HAProxy's default.
    /// Consistent hashing places its ring points from it; `first` orders servers by it.
    pub id: u32,
    /// Configured weight (0..=256; larger values are clamped). 0 = never picked.
    pub weight: u32,
    /// `maxconn` (0 = unlimited). Only `first`, `leastconn` and `random` look at it.
    pub maxconn: u32,
    /// Up and not disabled when the object is built.
    pub up: bool,
}

impl ServerSpec {
    /// An up server with this name and weight, default id and no `maxconn`.
    pub fn new(name: &str, weight: u32) -> Self {
        ServerSpec {
            name: name.to_string(),
            id: 0,
            weight,
            maxconn: 0,
            up: true,
        }
    }

    /// Sets the HAProxy numeric id.
    pub fn with_id(mut self, id: u32) -> Self {
        self.id = id;
        self
    }

    /// Sets `maxconn` (0 = unlimited).
    pub fn with_maxconn(mut self, maxconn: u32) -> Self {
        self.maxconn = maxconn;
        self
    }

    /// Sets the initial up state.
    pub fn with_up(mut self, up: bool) -> Self {
        self.up = up;
        self
    }
}

/// Per-server state of one slot. Fields are private: only [`ServerSet`] enforces the rules.
#[derive(Clone, Debug)]
struct Slot {
    name: Box<str>,
    id: u32,
    weight: u32,
    maxconn: u32,
    up: bool,
    conns: u32,
}

/// The live state of one tier of servers: weights, up/down, connection counts.
///
/// Every method takes an index; an index out of range is ignored (setters) or reads as an
/// absent, unusable server (getters), so no input can make an algorithm panic.
#[derive(Clone, Debug)]
pub struct ServerSet {
    slots: Vec<Slot>,
}

impl ServerSet {
    /// Builds the set from the resolved server list (weights clamped to [`MAX_WEIGHT`]).
    pub fn new(specs: &[ServerSpec]) -> Self {
        let slots = specs
            .iter()
            .enumerate()
            .map(|(i, s)| Slot {
                name: s.name.clone().into_boxed_str(),
                id: if s.id == 0 {
                    u32::try_from(i + 1).unwrap_or(u32::MAX)
                } else {
                    s.id
                },
                weight: s.weight.min(MAX_WEIGHT),
                maxconn: s.maxconn,
                up: s.up,
                conns: 0,
            })
            .collect();
        ServerSet { slots }
    }

    /// Number of servers in the tier (usable or not).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the tier has no server at all.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Server name, if `i` is in range.
    pub fn name(&self, i: usize) -> Option<&str> {
        self.slots.get(i).map(|s| &*s.name)
    }

    /// Resolved numeric id (never 0), or 0 when `i` is out of range.
    pub fn id(&self, i: usize) -> u32 {
        self.slots.get(i).map_or(0, |s| s.id)
    }

    /// Current weight (0 when out of range).
    pub fn weight(&self, i: usize) -> u32 {
        self.slots.get(i).map_or(0, |s| s.weight)
    }

    /// Current connection count (0 when out of range).
    pub fn conns(&self, i: usize) -> u32 {
        self.slots.get(i).map_or(0, |s| s.conns)
    }

    /// `maxconn` (0 = unlimited, also when out of range).
    pub fn maxconn(&self, i: usize) -> u32 {
        self.slots.get(i).map_or(0, |s| s.maxconn)
    }

    /// Up and not disabled (ignores the weight).
    pub fn is_up(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(|s| s.up)
    }

    /// May receive new picks: up and weight > 0 (HAProxy's `srv_currently_usable`).
    pub fn is_usable(&self, i: usize) -> bool {
        self.slots.get(i).is_some_and(|s| s.up && s.weight > 0)
    }

    /// Has reached its `maxconn` (never true without a `maxconn`).
    pub fn is_full(&self, i: usize) -> bool {
        self.slots
            .get(i)
            .is_some_and(|s| s.maxconn > 0 && s.conns >= s.maxconn)
    }

    /// Number of usable servers.
    pub fn usable_count(&self) -> usize {
        (0..self.len()).filter(|&i| self.is_usable(i)).count()
    }

    /// Sum of the weights of usable servers.
    pub fn usable_weight(&self) -> u64 {
        (0..self.len())
            .filter(|&i| self.is_usable(i))
            .map(|i| u64::from(self.weight(i)))
            .sum()
    }

    /// First usable server in declaration order: the single backup HAProxy uses when
    /// `option allbackups` is not set.
    pub fn first_usable(&self) -> Option<usize> {
        (0..self.len()).find(|&i| self.is_usable(i))
    }

    /// Marks a server up or down. Returns true when its usability changed, i.e. when the
    /// algorithm must update its structure.
    pub fn set_usable(&mut self, i: usize, up: bool) -> bool {
        let before = self.is_usable(i);
        if let Some(s) = self.slots.get_mut(i) {
            s.up = up;
        }
        before != self.is_usable(i)
    }

    /// Changes a server's weight (clamped to [`MAX_WEIGHT`]; 0 = drain). Returns true when the
    /// weight or the usability changed.
    pub fn set_weight(&mut self, i: usize, weight: u32) -> bool {
        let weight = weight.min(MAX_WEIGHT);
        match self.slots.get_mut(i) {
            Some(s) if s.weight != weight => {
                s.weight = weight;
                true
            }
            _ => false,
        }
    }

    /// Counts one more connection on server `i`.
    pub fn take(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            s.conns = s.conns.saturating_add(1);
        }
    }

    /// Counts one connection less on server `i` (never below 0).
    pub fn release(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            s.conns = s.conns.saturating_sub(1);
        }
    }
}

/// Greatest common divisor; `gcd(0, x) == x`.
pub fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// True when load `a_load / a_weight` is strictly below `b_load / b_weight`, compared without
/// division (cross-multiplied in 64 bits, so no rounding and no overflow). Weights must be > 0.
pub fn load_below(a_load: u64, a_weight: u64, b_load: u64, b_weight: u64) -> bool {
    u128::from(a_load) * u128::from(b_weight) < u128::from(b_load) * u128::from(a_weight)
}

/// Reads a lookup table (map-based hashing, Maglev) at `start`, honouring the redispatch hint:
/// when the entry there is `avoid`, walks forward to the first entry naming another server.
/// The avoided server is returned only when the table holds nothing else (HAProxy treats
/// "avoid" as a preference, never as a ban). `None` only for an empty table. No allocation.
pub fn table_lookup(table: &[u32], start: usize, avoid: Option<usize>) -> Option<usize> {
    let len = table.len();
    if len == 0 {
        return None;
    }
    let start = start % len;
    let first = table[start] as usize;
    if Some(first) != avoid {
        return Some(first);
    }
    (1..len)
        .map(|k| table[(start + k) % len] as usize)
        .find(|&s| Some(s) != avoid)
        .or(Some(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> ServerSet {
        ServerSet::new(&[
            ServerSpec::new("a", 1),
            ServerSpec::new("b", 0),
            ServerSpec::new("c", 1000).with_id(7).with_maxconn(2),
            ServerSpec::new("d", 3).with_up(false),
        ])
    }

    #[test]
    fn usability_follows_up_and_weight() {
        let s = set();
        let got: Vec<bool> = (0..5).map(|i| s.is_usable(i)).collect();
        assert_eq!(got, [true, false, true, false, false]);
        assert_eq!(s.weight(2), MAX_WEIGHT, "weight is clamped");
        assert_eq!((s.id(0), s.id(2), s.id(9)), (1, 7, 0));
        assert_eq!(s.usable_weight(), 1 + 256);
        assert_eq!(s.first_usable(), Some(0));
    }

    #[test]
    fn setters_report_changes_and_ignore_bad_indices() {
        let mut s = set();
        assert!(
            s.set_usable(3, true),
            "down -> up with weight 3 becomes usable"
        );
        assert!(!s.set_usable(3, true), "no change the second time");
        assert!(!s.set_usable(1, true), "weight 0 stays unusable");
        assert!(s.set_weight(1, 5));
        assert!(s.is_usable(1));
        assert!(!s.set_weight(42, 5));
        assert!(!s.set_usable(42, false));
        s.take(42);
        s.release(42);
    }

    #[test]
    fn connection_counts_saturate_and_maxconn_fills() {
        let mut s = set();
        s.release(2);
        assert_eq!(s.conns(2), 0);
        s.take(2);
        assert!(!s.is_full(2));
        s.take(2);
        assert!(s.is_full(2));
        s.take(0);
        assert!(!s.is_full(0), "no maxconn: never full");
    }

    #[test]
    fn helpers() {
        let cases = [(0, 5, 5), (12, 18, 6), (7, 13, 1), (0, 0, 0)];
        for (a, b, want) in cases {
            assert_eq!(gcd(a, b), want, "gcd({a}, {b})");
        }
        assert!(load_below(1, 2, 1, 1));
        assert!(!load_below(2, 2, 1, 1));
        let table = [0u32, 0, 1, 2];
        assert_eq!(table_lookup(&table, 0, Some(0)), Some(1));
        assert_eq!(table_lookup(&table, 7, Some(2)), Some(0));
        assert_eq!(table_lookup(&[3, 3], 1, Some(3)), Some(3));
        assert_eq!(table_lookup(&[], 1, None), None);
    }

    /// Every table algorithm, driven by the same random sequence of state changes (including
    /// out-of-range indices, weight 0 and weights above the maximum), must obey the shared
    /// rules: never panic; pick only usable servers; return `None` exactly when no server is
    /// usable (no `maxconn` here, so nothing is ever full); return the avoided server only
    /// when it is the sole usable one.
    #[test]
    fn every_algorithm_obeys_the_shared_rules() {
        use crate::lb::{chash::ConsistentHash, maglev::Maglev, map::MapHash};
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for n in [0usize, 1, 2, 5] {
            let specs: Vec<_> = (0..n)
                .map(|i| ServerSpec::new(&format!("s{i}"), (i as u32 % 3) * 2))
                .collect();
            let mut model = ServerSet::new(&specs);
            let mut map = MapHash::new(&specs);
            let mut ring = ConsistentHash::new(&specs);
            let mut maglev = Maglev::new(&specs);
            for step in 0..300 {
                let i = next(n as u64 + 2) as usize;
                match next(4) {
                    0 => {
                        let up = next(2) == 0;
                        model.set_usable(i, up);
                        map.set_usable(i, up);
                        ring.set_usable(i, up);
                        maglev.set_usable(i, up);
                    }
                    1 => {
                        let w = [0, 1, 3, 300][next(4) as usize];
                        model.set_weight(i, w);
                        map.set_weight(i, w);
                        ring.set_weight(i, w);
                        maglev.set_weight(i, w);
                    }
                    2 => {
                        map.take(i);
                        ring.take(i);
                        maglev.take(i);
                    }
                    _ => {
                        map.release(i);
                        ring.release(i);
                        maglev.release(i);
                    }
                }
                let avoid = [None, Some(i)][next(2) as usize];
                let h = next(1 << 32) as u32;
                let picks = [
                    ("map", map.pick(h, avoid)),
                    ("map rr", map.pick_rr(avoid)),
                    ("chash", ring.pick(h, avoid)),
                    ("chash rr", ring.pick_rr(avoid)),
                    ("maglev", maglev.pick(h, avoid)),
                ];
                let usable = model.usable_count();
                for (name, got) in picks {
                    let ctx = format!("n={n} step={step} {name} avoid={avoid:?} got={got:?}");
                    assert_eq!(got.is_some(), usable > 0, "{ctx}: usable={usable}");
                    if let Some(s) = got {
                        assert!(model.is_usable(s), "{ctx}: picked an unusable server");
                        if Some(s) == avoid {
                            assert_eq!(usable, 1, "{ctx}: avoided server picked with others");
                        }
                    }
                }
            }
        }
    }
}
