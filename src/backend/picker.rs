//! Server choice, per worker: the balancer state of one backend ([`Picker`]: one `lb`
//! algorithm per tier, active and backup) and the key hash-based algorithms balance on
//! ([`balance_key`]).
//!
//! Each worker owns its pickers, so picking never contends with another thread; the shared
//! per-server facts (usable, weight, connections) are read from [`ServerState`](super::server::ServerState) at each pick.
//! Round-robin positions are the exception: they come from the backend's shared
//! [`Cursor`](crate::lb::Cursor)s (one atomic per tier), so that consecutive connections meet
//! the servers in turn whichever worker accepted them, as HAProxy's process-wide order does.
//! Below the connector, which calls it; imports only `server`, [`Backend`] and `lb`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Backend;
use crate::config::model::{self, Balance, HashFunction, HashMethod};
use crate::lb::chash::ConsistentHash;
use crate::lb::maglev::Maglev;
use crate::lb::map::MapHash;
use crate::lb::weighted::{ServerSet, ServerSpec};
use crate::lb::Schedule;

/// Per-worker balancer state for one backend: one object per tier (active, backup).
#[derive(Debug)]
pub struct Picker {
    tiers: [Tier; 2],
    /// The backend's [`Backend::generation`] the tiers were built for.
    generation: u64,
}

#[derive(Debug)]
struct Tier {
    /// Indices into `Backend::servers` of the servers in this tier.
    members: Vec<usize>,
    algo: Algo,
}

#[derive(Debug)]
enum Algo {
    /// `roundrobin` (`fixed: None`: the current weights) and `static-rr` (`fixed`: the
    /// configured weights of the tier's members, used while a server is in the order).
    RoundRobin {
        schedule: Schedule,
        fixed: Option<Box<[u32]>>,
    },
    /// Rotating start so that ties are shared.
    LeastConn {
        next: usize,
    },
    First,
    /// Power of `draws` choices; `rng` is this worker's xorshift state.
    Random {
        draws: u32,
        rng: u64,
    },
    /// Hashing of the caller's key into a table; round-robin when there is no key.
    Hashed {
        table: HashTable,
        rr: Schedule,
    },
}

#[derive(Debug)]
enum HashTable {
    Map(MapHash),
    Consistent(ConsistentHash),
    Maglev(Maglev),
}

impl HashTable {
    fn servers(&self) -> &ServerSet {
        match self {
            HashTable::Map(t) => t.servers(),
            HashTable::Consistent(t) => t.servers(),
            HashTable::Maglev(t) => t.servers(),
        }
    }

    /// Brings the table's view of server k up to date with the shared state (cheap when
    /// nothing changed: a comparison per server).
    fn sync(&mut self, k: usize, up: bool, weight: u32) {
        let (was_up, was_w) = (self.servers().is_up(k), self.servers().weight(k));
        if was_up != up {
            match self {
                HashTable::Map(t) => t.set_usable(k, up),
                HashTable::Consistent(t) => t.set_usable(k, up),
                HashTable::Maglev(t) => t.set_usable(k, up),
            }
        }
        if was_w != weight {
            match self {
                HashTable::Map(t) => t.set_weight(k, weight),
                HashTable::Consistent(t) => t.set_weight(k, weight),
                HashTable::Maglev(t) => t.set_weight(k, weight),
            }
        }
    }

    fn pick(&mut self, hash: Option<u32>, avoid: Option<usize>) -> Option<Option<usize>> {
        Some(match (self, hash) {
            (HashTable::Map(t), Some(h)) => t.pick(h, avoid),
            (HashTable::Map(t), None) => t.pick_rr(avoid),
            (HashTable::Consistent(t), Some(h)) => t.pick(h, avoid),
            (HashTable::Consistent(t), None) => t.pick_rr(avoid),
            (HashTable::Maglev(t), Some(h)) => t.pick(h, avoid),
            // No key and no round-robin of its own: the caller falls back.
            (HashTable::Maglev(_), None) => return None,
        })
    }
}

impl Picker {
    pub fn new(backend: &Backend) -> Self {
        // Read first: a server added after this is seen at the next pick.
        let generation = backend.generation.load(Ordering::Acquire);
        let tier = |backup: bool| {
            let members: Vec<usize> = backend
                .servers
                .live()
                .filter(|(_, s)| s.config.backup == backup)
                .map(|(i, _)| i)
                .collect();
            let algo = match &backend.config.balance {
                Balance::RoundRobin => Algo::RoundRobin {
                    schedule: Schedule::new(members.len()),
                    fixed: None,
                },
                Balance::StaticRr => Algo::RoundRobin {
                    schedule: Schedule::new(members.len()),
                    fixed: Some(
                        members
                            .iter()
                            .map(|&i| backend.servers[i].config.weight)
                            .collect(),
                    ),
                },
                Balance::LeastConn => Algo::LeastConn { next: 0 },
                Balance::First => Algo::First,
                Balance::Random { draws } => Algo::Random {
                    draws: *draws,
                    rng: random_seed(),
                },
                Balance::Source
                | Balance::Uri { .. }
                | Balance::UrlParam { .. }
                | Balance::Hdr { .. }
                | Balance::Hash { .. }
                | Balance::RdpCookie { .. } => {
                    let specs: Vec<ServerSpec> = members
                        .iter()
                        .map(|&i| {
                            let c = &backend.servers[i].config;
                            ServerSpec::new(&c.name, c.weight).with_id(c.id)
                        })
                        .collect();
                    let table = match backend.config.hash_type.method {
                        HashMethod::MapBased => HashTable::Map(MapHash::new(&specs)),
                        HashMethod::Consistent => {
                            HashTable::Consistent(ConsistentHash::new(&specs))
                        }
                        HashMethod::Maglev => HashTable::Maglev(Maglev::new(&specs)),
                    };
                    Algo::Hashed {
                        table,
                        rr: Schedule::new(members.len()),
                    }
                }
            };
            Tier { members, algo }
        };
        Picker {
            tiers: [tier(false), tier(true)],
            generation,
        }
    }

    /// Picks a server: active servers first, backup ones only when no active one is usable.
    /// `avoid` is a server that just failed; it is skipped unless it is the only usable one.
    /// `key` is the hash of what the backend balances on (`source`, `uri`), computed by the
    /// caller.
    pub fn pick(
        &mut self,
        backend: &Backend,
        avoid: Option<usize>,
        key: Option<u32>,
    ) -> Option<usize> {
        // The servers changed (`add server`, `del server`): rebuild, the only allocation here,
        // once per change.
        if backend.generation.load(Ordering::Acquire) != self.generation {
            *self = Picker::new(backend);
        }
        for (t, tier) in self.tiers.iter_mut().enumerate() {
            // Without `option allbackups`, HAProxy sends everything to the first usable backup
            // server (in declaration order), the next one only if it fails.
            if t == 1 && !backend.config.options.allbackups {
                let usable = |i: &usize| backend.servers[*i].pick_weight() > 0;
                return tier
                    .members
                    .iter()
                    .copied()
                    .filter(usable)
                    .find(|&i| Some(i) != avoid)
                    .or_else(|| tier.members.iter().copied().find(usable));
            }
            for allow_avoided in [false, true] {
                let members = &tier.members;
                let weight = |k: usize| {
                    let i = members[k];
                    if !allow_avoided && Some(i) == avoid {
                        0
                    } else {
                        backend.servers[i].pick_weight()
                    }
                };
                let conns = |k: usize| backend.servers[members[k]].cur_conns.get();
                let n = members.len();
                let cursor = &backend.rr_cursors[t];
                let in_order = |k: usize| backend.servers[members[k]].schedule_weight();
                let picked = match &mut tier.algo {
                    Algo::RoundRobin { schedule, fixed } => {
                        match fixed {
                            None => schedule.sync(in_order),
                            Some(f) => schedule.sync(|k| if in_order(k) > 0 { f[k] } else { 0 }),
                        }
                        round_robin(schedule, cursor, |k| weight(k) > 0)
                    }
                    Algo::LeastConn { next } => {
                        *next = next.wrapping_add(1);
                        crate::lb::leastconn::least_conn(n, *next % n.max(1), weight, conns)
                    }
                    Algo::First => crate::lb::leastconn::first(
                        n,
                        |k| weight(k) > 0,
                        conns,
                        |k| backend.servers[members[k]].maxconn(),
                    ),
                    Algo::Random { draws, rng } => {
                        crate::lb::random::pick(n, *draws, rng, weight, conns)
                    }
                    Algo::Hashed { table, rr } => {
                        for (k, &i) in members.iter().enumerate() {
                            let s = &backend.servers[i];
                            table.sync(k, s.usable(), s.lb_weight());
                        }
                        let avoid_k = if allow_avoided {
                            None
                        } else {
                            avoid.and_then(|a| members.iter().position(|&i| i == a))
                        };
                        match table.pick(key, avoid_k) {
                            Some(p) => p,
                            None => {
                                rr.sync(in_order);
                                round_robin(rr, cursor, |k| weight(k) > 0)
                            }
                        }
                    }
                };
                if let Some(k) = picked {
                    return Some(members[k]);
                }
                if avoid.is_none() {
                    break;
                }
            }
        }
        None
    }
}

/// The next server of a round-robin order: the shared cursor moves only when the order has a
/// server, so an empty tier (all down) does not shift the order the others see.
fn round_robin(
    schedule: &Schedule,
    cursor: &crate::lb::Cursor,
    eligible: impl FnMut(usize) -> bool,
) -> Option<usize> {
    if schedule.cycle() == 0 {
        return None;
    }
    schedule.pick(cursor.advance(), eligible)
}

/// A distinct non-zero seed for each worker's random balancer.
fn random_seed() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ SEQ.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)) | 1
}

/// The hash of `sample` with the backend's `hash-type` function (and `avalanche`): the key of
/// `balance hash EXPR` (the expression's value as binary) and of `balance rdp-cookie`.
pub fn sample_key(config: &model::Backend, sample: &[u8]) -> u32 {
    let t = config.hash_type;
    crate::lb::hash::hash(hash_fn(t.function), sample, t.avalanche)
}

fn hash_fn(f: HashFunction) -> crate::lb::hash::HashFn {
    use crate::lb::hash::HashFn;
    match f {
        HashFunction::Sdbm => HashFn::Sdbm,
        HashFunction::Djb2 => HashFn::Djb2,
        HashFunction::Wt6 => HashFn::Wt6,
        HashFunction::Crc32 => HashFn::Crc32,
        HashFunction::None => HashFn::None,
    }
}

/// The hash a backend balances on, as HAProxy computes it: `balance source` folds the client
/// address (with `avalanche` if set); `balance uri` hashes the chosen part of the request target
/// with the `hash-type` function. `None` for other algorithms, or a target with no such part.
/// `header(name)` gives a request header's value (HTTP mode).
pub fn balance_key<'r>(
    config: &model::Backend,
    client: Option<std::net::IpAddr>,
    target: Option<&'r [u8]>,
    header: impl Fn(&str) -> Option<&'r [u8]>,
) -> Option<u32> {
    use crate::lb::{hash, key};
    let t = config.hash_type;
    let f = hash_fn(t.function);
    let k = match &config.balance {
        // A UNIX socket's client has no address: no key, the picker goes round (as HAProxy
        // falls back to round robin).
        Balance::Source => return client.map(|c| key::source_hash(c, t.avalanche)),
        Balance::Uri {
            whole,
            path_only,
            len,
            depth,
        } => {
            let opts = key::UriOptions {
                whole: *whole,
                path_only: *path_only,
                len: len.map_or(0, |l| l as usize),
                depth: depth.map_or(0, |d| d as usize),
            };
            key::uri_key(target?, &opts)?
        }
        Balance::UrlParam { name } => key::url_param(target?, name.as_bytes())?,
        Balance::Hdr {
            name,
            use_domain_only,
        } => {
            let v = header(name)?;
            if *use_domain_only {
                key::domain_only(v)
            } else {
                v
            }
        }
        _ => return None,
    };
    Some(hash::hash(f, k, t.avalanche))
}
