//! A prefix tree of IPv4 and IPv6 networks: longest-prefix match in at most 32 (or 128) steps,
//! whatever the number of networks.
//!
//! Why: ACLs such as `src -f blocklist.lst` and `map_ip` hold thousands of networks and are
//! consulted on every request; a list would cost one comparison per network. This is a plain
//! binary trie over the address bits, its nodes in one vector (indices, no pointers): a lookup
//! walks at most the address width and remembers the deepest network seen. IPv4-mapped IPv6
//! addresses are looked up in the IPv4 tree, and IPv4 addresses also match IPv6 networks
//! through their mapped form, as HAProxy's ACLs do.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    child: [u32; 2],
    /// Value index of the network ending here, or NONE.
    val: u32,
}

#[derive(Clone, Debug)]
struct Trie {
    nodes: Vec<Node>,
}

impl Trie {
    fn new() -> Self {
        Trie {
            nodes: vec![Node {
                child: [NONE; 2],
                val: NONE,
            }],
        }
    }

    /// Inserts the network of the `len` high bits of `key` (a `bits`-wide address in the high
    /// bits of a u128). The first value inserted for a network wins.
    fn insert(&mut self, key: u128, len: u32, val: u32) {
        let mut n = 0usize;
        for i in 0..len {
            let bit = ((key >> (127 - i)) & 1) as usize;
            let next = self.nodes[n].child[bit];
            n = if next == NONE {
                self.nodes.push(Node {
                    child: [NONE; 2],
                    val: NONE,
                });
                let id = (self.nodes.len() - 1) as u32;
                self.nodes[n].child[bit] = id;
                id as usize
            } else {
                next as usize
            };
        }
        if self.nodes[n].val == NONE {
            self.nodes[n].val = val;
        }
    }

    /// The value of the longest network containing the `bits` high bits of `key`. The walk
    /// reads the address one 64-bit half at a time, shifting it left: a step costs a few
    /// instructions, where a variable shift of a u128 costs several more (an IPv4 lookup
    /// never leaves the high half).
    fn lookup(&self, key: u128, bits: u32) -> Option<u32> {
        let mut node = &self.nodes[0];
        let mut best = node.val;
        let halves = [
            ((key >> 64) as u64, bits.min(64)),
            (key as u64, bits.saturating_sub(64)),
        ];
        'walk: for (mut word, n) in halves {
            for _ in 0..n {
                let next = node.child[(word >> 63) as usize];
                if next == NONE {
                    break 'walk;
                }
                node = &self.nodes[next as usize];
                if node.val != NONE {
                    best = node.val;
                }
                word <<= 1;
            }
        }
        (best != NONE).then_some(best)
    }

    fn is_empty(&self) -> bool {
        self.nodes.len() == 1 && self.nodes[0].val == NONE
    }
}

/// IPv4 and IPv6 networks with a value index each.
#[derive(Clone, Debug)]
pub struct IpTree {
    v4: Trie,
    v6: Trie,
}

impl Default for IpTree {
    fn default() -> Self {
        Self::new()
    }
}

impl IpTree {
    pub fn new() -> Self {
        IpTree {
            v4: Trie::new(),
            v6: Trie::new(),
        }
    }

    /// Adds `addr/len`.
    pub fn insert(&mut self, addr: IpAddr, len: u32, val: u32) {
        match addr {
            IpAddr::V4(a) => self
                .v4
                .insert((u32::from(a) as u128) << 96, len.min(32), val),
            IpAddr::V6(a) => self.v6.insert(u128::from(a), len.min(128), val),
        }
    }

    /// The value of the longest network containing `addr`.
    pub fn lookup(&self, addr: IpAddr) -> Option<u32> {
        match addr {
            IpAddr::V4(a) => self.lookup_v4(a).or_else(|| {
                if self.v6.is_empty() {
                    None
                } else {
                    self.v6.lookup(u128::from(a.to_ipv6_mapped()), 128)
                }
            }),
            IpAddr::V6(a) => self
                .v6
                .lookup(u128::from(a), 128)
                .or_else(|| self.lookup_v4(a.to_ipv4_mapped()?)),
        }
    }

    fn lookup_v4(&self, a: Ipv4Addr) -> Option<u32> {
        self.v4.lookup((u32::from(a) as u128) << 96, 32)
    }

    /// Number of nodes (for tests and memory estimates).
    pub fn nodes(&self) -> usize {
        self.v4.nodes.len() + self.v6.nodes.len()
    }
}

/// Parses a network as HAProxy's ACLs accept it: `a.b.c.d`, `a.b.c.d/len`,
/// `a.b.c.d/m.m.m.m`, `ipv6`, `ipv6/len`. A host without mask is /32 or /128.
pub fn parse_net(s: &str) -> Option<(IpAddr, u32)> {
    let (a, m) = match s.split_once('/') {
        Some((a, m)) => (a, Some(m)),
        None => (s, None),
    };
    if let Ok(v4) = a.parse::<Ipv4Addr>() {
        let len = match m {
            None => 32,
            Some(m) => match m.parse::<u32>() {
                Ok(l) if l <= 32 => l,
                Ok(_) => return None,
                Err(_) => {
                    let mask = u32::from(m.parse::<Ipv4Addr>().ok()?);
                    // Only contiguous masks make a prefix.
                    if mask.leading_ones() + mask.trailing_zeros() != 32 {
                        return None;
                    }
                    mask.leading_ones()
                }
            },
        };
        return Some((IpAddr::V4(v4), len));
    }
    let v6 = a.parse::<Ipv6Addr>().ok()?;
    let len = match m {
        None => 128,
        Some(m) => match m.parse::<u32>() {
            Ok(l) if l <= 128 => l,
            _ => return None,
        },
    };
    Some((IpAddr::V6(v6), len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = IpTree::new();
        t.insert(ip("10.0.0.0"), 8, 1);
        t.insert(ip("10.1.0.0"), 16, 2);
        t.insert(ip("2001:db8::"), 32, 3);
        assert_eq!(t.lookup(ip("10.1.2.3")), Some(2));
        assert_eq!(t.lookup(ip("10.2.2.3")), Some(1));
        assert_eq!(t.lookup(ip("11.0.0.1")), None);
        assert_eq!(t.lookup(ip("2001:db8::5")), Some(3));
        assert_eq!(t.lookup(ip("::ffff:10.1.0.1")), Some(2));
    }

    #[test]
    fn v4_matches_mapped_v6_network() {
        let mut t = IpTree::new();
        t.insert(ip("::ffff:192.168.0.0"), 112, 7);
        assert_eq!(t.lookup(ip("192.168.3.4")), Some(7));
    }

    #[test]
    fn ten_thousand_networks() {
        let mut t = IpTree::new();
        for i in 0..10_000u32 {
            t.insert(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i << 8))), 24, i);
            t.insert(
                IpAddr::V6(Ipv6Addr::from(0x2001_0db8u128 << 96 | (i as u128) << 64)),
                64,
                i,
            );
        }
        assert_eq!(t.lookup(ip("10.0.39.15")), Some(39));
        assert_eq!(t.lookup(ip("10.39.15.1")), Some(0x270f));
        assert_eq!(t.lookup(ip("2001:db8:0:1234::1")), Some(0x1234));
        assert_eq!(t.lookup(ip("11.0.0.0")), None);
        // Memory stays bounded: at most one node per bit of each network.
        assert!(t.nodes() < 10_000 * (24 + 64));
    }

    #[test]
    fn parse_networks() {
        assert_eq!(parse_net("10.0.0.0/8"), Some((ip("10.0.0.0"), 8)));
        assert_eq!(
            parse_net("10.0.0.0/255.255.0.0"),
            Some((ip("10.0.0.0"), 16))
        );
        assert_eq!(parse_net("::1"), Some((ip("::1"), 128)));
        assert_eq!(parse_net("10.0.0.0/255.0.255.0"), None);
        assert_eq!(parse_net("foo.bar"), None);
    }
}
