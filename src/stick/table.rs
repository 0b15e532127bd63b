//! One stick table: typed keys, entries holding the configured data types, the `size` bound,
//! expiry, and the reference count of entries that live sessions track.
//!
//! # Policy (as HAProxy 2.6 does it, checked with `set table` and `show table`)
//!
//! - **Full table.** Creating an entry in a table holding `size` entries first evicts a batch
//!   of `size / 256 + 1` unused entries (reference count 0), those whose expiry comes first.
//!   Every access re-arms an entry's expiry (`now + expire`, or `now` without `expire`), so
//!   this is least-recently-used order. Entries in use are never evicted; if none can go, the
//!   entry is not created (the session is not tracked). With `nopurge`, nothing is evicted
//!   and a full table creates nothing. (haproxy 2.6: size 3 holding 127.0.0.1, 10.0.0.1,
//!   10.0.0.2; adding 10.0.0.3 evicted 127.0.0.1, the least recently touched, then adding
//!   10.0.0.4 evicted 10.0.0.1.)
//! - **Expiry.** With `expire`, an unused entry whose expiry is past is gone: [`Table::purge`]
//!   removes such entries (the runtime calls it periodically), and a lookup that finds one
//!   first treats it as absent, so results never depend on when the purge ran. An entry in use
//!   does not expire; releasing it re-arms its expiry (haproxy shows `exp` reset to the full
//!   delay when a tracked connection closes).
//!
//! # Concurrency
//!
//! A table is shared by every worker thread. Entries live in shards chosen by key hash, each
//! a `HashMap` behind its own small mutex that is held only to find, insert or remove an
//! entry (once per tracked session, not per event); counters are atomics in the entry, so
//! counting events, reading rates and re-arming expiry take no lock. Tables of fewer than
//! 4096 entries have fewer shards (one under 128), so small tables evict in exactly HAProxy's
//! global order; large ones evict per shard (HAProxy 3.x shards its tables the same way).
//!
//! Measured with `cargo test --release --lib stick::table -- --ignored --nocapture
//! bench_track` (2 threads, each doing track + 3 adds (count, gauge, rate) + release, 2M
//! times, on a shared 2-CPU VM where other builds ran: figures varied by up to 2x between
//! runs, three runs shown as ns per operation per thread):
//!
//! | keys                   | 64 shards       | 1 shard (one lock)  |
//! |------------------------|-----------------|---------------------|
//! | random among 100k      | 695, 614, 610   | 569, 1079, 414      |
//! | the same key on both   | 409, 349, 166   | 174, 264, 157       |
//!
//! With two threads the lock is not the cost (a cache miss on a 100k-entry map is); the
//! shards are for more threads, where one lock serialises every tracked session. Counting an
//! event on a tracked entry takes no lock at all (an atomic add), so per-request work does
//! not depend on the sharding.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::data::{DataType, Kind, Store};
use super::freq::FreqCtr;
use super::Tick;

/// The type of a table's keys (`stick-table type ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Ip,
    Ipv6,
    Integer,
    /// `string [len N]`: keys are cut to `len` bytes (32 by default).
    String {
        len: usize,
    },
    /// `binary [len N]`: keys are cut or padded with zeros to `len` bytes (32 by default).
    Binary {
        len: usize,
    },
}

/// A key, already in its table's form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Ip([u8; 4]),
    Ipv6([u8; 16]),
    Integer(u32),
    /// String and binary keys.
    Bytes(Box<[u8]>),
}

impl KeyType {
    /// The word of `stick-table type WORD` and of `show table` headers.
    pub fn word(self) -> &'static str {
        match self {
            KeyType::Ip => "ip",
            KeyType::Ipv6 => "ipv6",
            KeyType::Integer => "integer",
            KeyType::String { .. } => "string",
            KeyType::Binary { .. } => "binary",
        }
    }

    /// The key for a client address: IPv4 in an `ip` table (an IPv4-mapped IPv6 address too),
    /// any address in an `ipv6` table (IPv4 mapped), as HAProxy converts `src`.
    pub fn key_from_ip(self, addr: IpAddr) -> Option<Key> {
        match (self, addr) {
            (KeyType::Ip, IpAddr::V4(a)) => Some(Key::Ip(a.octets())),
            (KeyType::Ip, IpAddr::V6(a)) => a.to_ipv4_mapped().map(|a| Key::Ip(a.octets())),
            (KeyType::Ipv6, IpAddr::V4(a)) => Some(Key::Ipv6(a.to_ipv6_mapped().octets())),
            (KeyType::Ipv6, IpAddr::V6(a)) => Some(Key::Ipv6(a.octets())),
            _ => None,
        }
    }

    /// The key for an integer (HAProxy's integer keys are unsigned 32-bit).
    pub fn key_from_int(self, v: i64) -> Option<Key> {
        match self {
            KeyType::Integer => u32::try_from(v).ok().map(Key::Integer),
            _ => None,
        }
    }

    /// The key for bytes: cut to `len` for strings, cut or zero-padded for binary.
    pub fn key_from_bytes(self, b: &[u8]) -> Option<Key> {
        match self {
            KeyType::String { len } => Some(Key::Bytes(b[..b.len().min(len)].into())),
            KeyType::Binary { len } => {
                let mut v = vec![0u8; len];
                let n = b.len().min(len);
                v[..n].copy_from_slice(&b[..n]);
                Some(Key::Bytes(v.into()))
            }
            _ => None,
        }
    }

    /// A key as typed on the runtime API (`key K`); `None` if it is not one of this type.
    /// Binary keys are hexadecimal.
    pub fn parse(self, word: &str) -> Option<Key> {
        match self {
            KeyType::Ip => word.parse::<Ipv4Addr>().ok().map(|a| Key::Ip(a.octets())),
            KeyType::Ipv6 => match word.parse::<Ipv6Addr>() {
                Ok(a) => Some(Key::Ipv6(a.octets())),
                Err(_) => self.key_from_ip(IpAddr::V4(word.parse().ok()?)),
            },
            KeyType::Integer => word.parse::<u32>().ok().map(Key::Integer),
            KeyType::String { .. } => self.key_from_bytes(word.as_bytes()),
            KeyType::Binary { .. } => {
                if word.len() % 2 != 0 || !word.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                let bytes: Vec<u8> = (0..word.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&word[i..i + 2], 16).unwrap_or(0))
                    .collect();
                self.key_from_bytes(&bytes)
            }
        }
    }

    /// A key as `show table` prints it.
    pub fn format(self, key: &Key) -> String {
        match key {
            Key::Ip(o) => Ipv4Addr::from(*o).to_string(),
            Key::Ipv6(o) => Ipv6Addr::from(*o).to_string(),
            Key::Integer(v) => v.to_string(),
            Key::Bytes(b) => match self {
                KeyType::Binary { .. } => b.iter().map(|c| format!("{c:02X}")).collect(),
                _ => String::from_utf8_lossy(b).into_owned(),
            },
        }
    }
}

/// How a `stick-table` line (or a `table` line of a `peers` section) describes a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub key: KeyType,
    /// Most entries held at once.
    pub size: usize,
    /// `expire`, in milliseconds.
    pub expire: Option<u32>,
    /// `nopurge`: a full table creates nothing rather than evicting.
    pub nopurge: bool,
    /// `srvkey addr`: `server_key` holds the server's address (`IP:PORT`) instead of its
    /// name, and `stick` rules find the server by it.
    pub srvkey_addr: bool,
    /// The `store` items, in HAProxy's data type order, without duplicates.
    pub store: Vec<Store>,
}

/// Where one element of a stored data type lives in an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub data: DataType,
    /// The element of an array type (0 otherwise).
    pub index: u8,
    /// The period of a rate, in ms.
    pub period: u32,
    /// Index into the entry's numbers (or rates, for a rate).
    at: usize,
}

/// The layout of an entry, computed once per table from its `store` list.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// Every stored element, in `show table` order.
    pub slots: Vec<Slot>,
    /// For each data type (by [`DataType::index`]), its first slot in `slots`.
    first: [Option<u16>; DataType::ALL.len()],
    numbers: usize,
    rates: usize,
}

impl Schema {
    pub fn new(store: &[Store]) -> Schema {
        let mut s = Schema::default();
        let mut sorted = store.to_vec();
        sorted.sort_by_key(|x| x.data);
        for item in sorted {
            if s.first[item.data.index()].is_some() {
                continue;
            }
            s.first[item.data.index()] = Some(s.slots.len() as u16);
            for index in 0..item.count.max(1) {
                let at = match item.data.kind() {
                    Kind::Rate => {
                        s.rates += 1;
                        s.rates - 1
                    }
                    Kind::Str => 0,
                    _ => {
                        s.numbers += 1;
                        s.numbers - 1
                    }
                };
                s.slots.push(Slot {
                    data: item.data,
                    index,
                    period: item.period,
                    at,
                });
            }
        }
        s
    }

    /// The slot of element `index` of `data`, if the table stores it.
    pub fn slot(&self, data: DataType, index: u8) -> Option<Slot> {
        let first = usize::from(self.first[data.index()]?);
        let slot = *self.slots.get(first + usize::from(index))?;
        (slot.data == data).then_some(slot)
    }

    /// True when the table stores `data`.
    pub fn stores(&self, data: DataType) -> bool {
        self.first[data.index()].is_some()
    }
}

/// A value read from an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Uint(u64),
    Sint(i64),
    Str(Option<Arc<str>>),
}

/// One entry: its key, what sessions track it, its expiry and its data.
#[derive(Debug)]
pub struct Entry {
    key: Key,
    /// Sessions tracking the entry (`use=` in `show table`); such an entry is never evicted
    /// nor expired.
    refs: AtomicU32,
    /// When the entry expires, in ticks.
    expire: AtomicU64,
    numbers: Box<[AtomicU64]>,
    rates: Box<[FreqCtr]>,
    server_key: arc_swap::ArcSwapOption<String>,
}

impl Entry {
    fn new(key: Key, schema: &Schema, expire: Tick) -> Entry {
        Entry {
            key,
            refs: AtomicU32::new(0),
            expire: AtomicU64::new(expire),
            numbers: (0..schema.numbers).map(|_| AtomicU64::new(0)).collect(),
            rates: (0..schema.rates).map(|_| FreqCtr::new()).collect(),
            server_key: arc_swap::ArcSwapOption::empty(),
        }
    }

    pub fn key(&self) -> &Key {
        &self.key
    }

    /// How many sessions track the entry.
    pub fn refs(&self) -> u32 {
        self.refs.load(Ordering::Acquire)
    }

    /// The tick at which the entry expires (when its table has `expire`).
    pub fn expire(&self) -> Tick {
        self.expire.load(Ordering::Relaxed)
    }

    /// Adds `n` to a counter, or counts `n` events in a rate, at `now`. Returns the counter's
    /// new value (the current period's count for a rate).
    pub fn add(&self, slot: Slot, now: Tick, n: u64) -> u64 {
        match slot.data.kind() {
            Kind::Rate => u64::from(self.rates[slot.at].add(slot.period, now, n as u32)),
            Kind::Str => 0,
            _ => self.numbers[slot.at]
                .fetch_add(n, Ordering::Relaxed)
                .wrapping_add(n),
        }
    }

    /// Takes 1 from a counter that is not already 0 (`conn_cur` when a session ends).
    pub fn decrement(&self, slot: Slot) {
        if matches!(slot.data.kind(), Kind::U32 | Kind::U64 | Kind::S32) {
            let _ = self.numbers[slot.at]
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
        }
    }

    /// Reads one stored element at `now` (rates are read over their period).
    pub fn read(&self, slot: Slot, now: Tick) -> Value {
        match slot.data.kind() {
            Kind::Rate => Value::Uint(u64::from(self.rates[slot.at].read(slot.period, now))),
            Kind::Str => Value::Str(self.server_key.load_full().map(|s| Arc::from(s.as_str()))),
            Kind::U32 => Value::Uint(u64::from(
                self.numbers[slot.at].load(Ordering::Relaxed) as u32
            )),
            Kind::U64 => Value::Uint(self.numbers[slot.at].load(Ordering::Relaxed)),
            Kind::S32 => Value::Sint(i64::from(
                self.numbers[slot.at].load(Ordering::Relaxed) as u32 as i32,
            )),
        }
    }

    /// How many more events a rate allows at `now` before it reaches `limit`.
    pub fn rate_remain(&self, slot: Slot, now: Tick, limit: u32) -> u32 {
        match slot.data.kind() {
            Kind::Rate => self.rates[slot.at].remain(slot.period, now, limit, 0),
            _ => 0,
        }
    }

    /// Sets one element: a number for counters, tags and rates (a rate then holds `v` events
    /// in a period starting at `now`).
    pub fn set(&self, slot: Slot, now: Tick, v: i64) {
        match slot.data.kind() {
            Kind::Rate => self.rates[slot.at].set(now, v as u32),
            Kind::Str => {}
            Kind::U64 => self.numbers[slot.at].store(v as u64, Ordering::Relaxed),
            _ => self.numbers[slot.at].store(u64::from(v as u32), Ordering::Relaxed),
        }
    }

    /// Sets the expiry to `at` (a tracked entry released: `now + expire`).
    pub fn rearm(&self, at: Tick) {
        self.expire.store(at, Ordering::Relaxed);
    }

    /// A rate's state for a peer ([`FreqCtr::export`]); `None` for a slot that is no rate.
    pub fn export_rate(&self, slot: Slot, now: Tick) -> Option<(u32, u32, u32)> {
        (slot.data.kind() == Kind::Rate).then(|| self.rates[slot.at].export(now))
    }

    /// Sets a rate to the state a peer sent ([`FreqCtr::import`]).
    pub fn import_rate(&self, slot: Slot, now: Tick, elapsed: u32, curr: u32, prev: u32) {
        if slot.data.kind() == Kind::Rate {
            self.rates[slot.at].import(now, elapsed, curr, prev);
        }
    }

    /// Whether `server_key` is `name` (read without copying it).
    pub fn server_key_is(&self, name: &str) -> bool {
        self.server_key.load().as_deref().is_some_and(|k| k == name)
    }

    /// Sets `server_key`.
    pub fn set_server_key(&self, v: Option<&str>) {
        self.server_key.store(v.map(|s| Arc::new(s.to_string())));
    }
}

/// An entry a session tracks (`track-sc*`): it holds one reference, so the entry is neither
/// evicted nor expired while the session lives. Give it back with [`Table::release`], which
/// re-arms the expiry as HAProxy does when a session ends (dropping it only drops the
/// reference).
#[derive(Debug)]
pub struct Tracked {
    entry: Arc<Entry>,
}

impl Tracked {
    pub fn entry(&self) -> &Entry {
        &self.entry
    }
}

impl std::ops::Deref for Tracked {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        &self.entry
    }
}

/// One more reference to the same entry (an HTTP/2 stream shares its connection's).
impl Clone for Tracked {
    fn clone(&self) -> Self {
        self.entry.refs.fetch_add(1, Ordering::AcqRel);
        Tracked {
            entry: Arc::clone(&self.entry),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.entry.refs.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One shard, on its own cache lines so that two threads on two shards do not share one.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Shard {
    map: Mutex<HashMap<Key, Arc<Entry>>>,
}

/// Locks a shard. The lock is held for one hash map operation (or a purge/eviction scan of
/// that shard), never across an event count; see the module doc for the measurements.
#[allow(clippy::disallowed_methods)] // sharded, short, once per tracked session: measured in the module doc
fn lock(shard: &Shard) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Entry>>> {
    shard.map.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a replicated table announces the entries that changed here, for the peers
/// sessions to send ([`crate::peers`]): a bounded broadcast of keys, each with the table's
/// place in its `peers` section. A session that falls behind sends the whole table again.
/// Only tables of a `peers` section with remote peers have one; sending costs nothing while
/// no session listens.
#[derive(Debug, Clone)]
pub struct Feed {
    tx: tokio::sync::broadcast::Sender<(u16, Key)>,
    index: u16,
}

impl Feed {
    /// The feed of a section's table number `index`, on the section's channel `tx`.
    pub fn new(tx: tokio::sync::broadcast::Sender<(u16, Key)>, index: u16) -> Feed {
        Feed { tx, index }
    }

    /// Announces that the entry of `key` changed.
    pub fn notify(&self, key: &Key) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send((self.index, key.clone()));
        }
    }
}

/// A stick table, shared by every worker thread.
#[derive(Debug)]
pub struct Table {
    /// The name `show table` prints: the proxy's, or `PEERS/NAME` for a table of a `peers`
    /// section.
    pub name: String,
    pub spec: TableSpec,
    pub schema: Schema,
    shards: Box<[Shard]>,
    hasher: std::hash::RandomState,
    used: AtomicUsize,
    /// Set when the table is replicated to peers.
    pub feed: Option<Feed>,
}

impl Table {
    /// A table with a number of shards fitted to its size (see the module doc).
    pub fn new(name: &str, spec: TableSpec) -> Table {
        let shards = (spec.size / 64).next_power_of_two().clamp(1, 64);
        Table::with_shards(name, spec, shards)
    }

    /// A table with `shards` shards (a power of two), for measurements.
    pub fn with_shards(name: &str, spec: TableSpec, shards: usize) -> Table {
        let shards = shards.next_power_of_two().max(1);
        Table {
            name: name.to_string(),
            schema: Schema::new(&spec.store),
            spec,
            shards: (0..shards).map(|_| Shard::default()).collect(),
            hasher: std::hash::RandomState::new(),
            used: AtomicUsize::new(0),
            feed: None,
        }
    }

    /// The table, replicated through `feed`.
    pub fn with_feed(mut self, feed: Feed) -> Table {
        self.feed = Some(feed);
        self
    }

    /// Announces a change of `e` to the peers, if the table is replicated.
    pub fn changed(&self, e: &Entry) {
        if let Some(f) = &self.feed {
            f.notify(&e.key);
        }
    }

    /// Entries in the table (`used:` in `show table`).
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn shard_of(&self, key: &Key) -> usize {
        (self.hasher.hash_one(key) >> 32) as usize & (self.shards.len() - 1)
    }

    /// The expiry an access at `now` arms.
    fn expiry(&self, now: Tick) -> Tick {
        now + u64::from(self.spec.expire.unwrap_or(0))
    }

    fn expired(&self, e: &Entry, now: Tick) -> bool {
        self.spec.expire.is_some() && e.refs() == 0 && e.expire() <= now
    }

    /// Re-arms an entry's expiry for an access at `now` (and announces it to the peers, as
    /// HAProxy's `stktable_touch_local` does).
    pub fn touch(&self, e: &Entry, now: Tick) {
        e.expire.store(self.expiry(now), Ordering::Relaxed);
        self.changed(e);
    }

    /// Tracks the entry of `key` for a session, creating it if needed (evicting as the module
    /// doc says when the table is full). `None` when the table is full and nothing can go.
    pub fn track(&self, key: &Key, now: Tick) -> Option<Tracked> {
        let entry = self.get_or_create(key, now, true)?;
        Some(Tracked { entry })
    }

    /// Gives back a tracked entry at `now`, re-arming its expiry.
    pub fn release(&self, t: Tracked, now: Tick) {
        self.touch(&t.entry, now);
        drop(t);
    }

    /// The entry of `key` if present (not expired), without tracking nor touching it (what
    /// `table_*` converters and `sc_get_*`-style reads need).
    pub fn get(&self, key: &Key, now: Tick) -> Option<Arc<Entry>> {
        let map = lock(&self.shards[self.shard_of(key)]);
        map.get(key).filter(|e| !self.expired(e, now)).cloned()
    }

    /// The entry of `key`, created if needed and touched (`set table`, `sc_inc_gpc0` on an
    /// untracked key). `None` when the table is full and nothing can go.
    pub fn get_or_create(&self, key: &Key, now: Tick, take_ref: bool) -> Option<Arc<Entry>> {
        self.entry_for(key, now, take_ref, true)
    }

    /// The entry of `key` for an update a peer sent: created if needed, its expiry re-armed,
    /// not announced back to the peers (HAProxy's `stktable_touch_remote`).
    pub fn learn(&self, key: &Key, now: Tick) -> Option<Arc<Entry>> {
        self.entry_for(key, now, false, false)
    }

    fn access(&self, e: &Entry, now: Tick, local: bool) {
        if local {
            self.touch(e, now);
        } else {
            e.expire.store(self.expiry(now), Ordering::Relaxed);
        }
    }

    fn entry_for(&self, key: &Key, now: Tick, take_ref: bool, local: bool) -> Option<Arc<Entry>> {
        let si = self.shard_of(key);
        {
            let mut map = lock(&self.shards[si]);
            if let Some(e) = map.get(key) {
                if !self.expired(e, now) {
                    if take_ref {
                        e.refs.fetch_add(1, Ordering::AcqRel);
                    }
                    self.access(e, now, local);
                    return Some(e.clone());
                }
                map.remove(key);
                self.used.fetch_sub(1, Ordering::Relaxed);
            }
            if self.reserve() || (!self.spec.nopurge && self.evict(&mut map, now) && self.reserve())
            {
                let e = self.insert(&mut map, key, now, take_ref);
                drop(map);
                if local {
                    self.changed(&e);
                }
                return Some(e);
            }
        }
        if self.spec.nopurge {
            return None;
        }
        // This shard had nothing to give: try the others, one lock at a time.
        for (i, shard) in self.shards.iter().enumerate() {
            if i != si && self.evict(&mut lock(shard), now) {
                break;
            }
        }
        let mut map = lock(&self.shards[si]);
        if let Some(e) = map.get(key) {
            if take_ref {
                e.refs.fetch_add(1, Ordering::AcqRel);
            }
            self.access(e, now, local);
            return Some(e.clone());
        }
        let e = self
            .reserve()
            .then(|| self.insert(&mut map, key, now, take_ref))?;
        drop(map);
        if local {
            self.changed(&e);
        }
        Some(e)
    }

    /// Takes a place for a new entry if the table is not full.
    fn reserve(&self) -> bool {
        if self.used.fetch_add(1, Ordering::AcqRel) < self.spec.size {
            return true;
        }
        self.used.fetch_sub(1, Ordering::AcqRel);
        false
    }

    fn insert(
        &self,
        map: &mut HashMap<Key, Arc<Entry>>,
        key: &Key,
        now: Tick,
        take_ref: bool,
    ) -> Arc<Entry> {
        let e = Arc::new(Entry::new(key.clone(), &self.schema, self.expiry(now)));
        if take_ref {
            e.refs.store(1, Ordering::Release);
        }
        map.insert(key.clone(), e.clone());
        e
    }

    /// Evicts from one shard up to HAProxy's batch (`size / 256 + 1`) of unused entries,
    /// expired ones and then those expiring first. True if at least one went.
    fn evict(&self, map: &mut HashMap<Key, Arc<Entry>>, now: Tick) -> bool {
        let batch = self.spec.size / 256 + 1;
        let mut unused: Vec<(Tick, Key)> = map
            .values()
            .filter(|e| e.refs() == 0)
            .map(|e| (e.expire(), e.key.clone()))
            .collect();
        if unused.is_empty() {
            return false;
        }
        let _ = now;
        if unused.len() > batch {
            unused.select_nth_unstable(batch - 1);
            unused.truncate(batch);
        }
        for (_, k) in &unused {
            map.remove(k);
        }
        self.used.fetch_sub(unused.len(), Ordering::AcqRel);
        true
    }

    /// Removes the unused entries whose expiry is past; returns how many went. The runtime
    /// calls it periodically (each shard is locked in turn, for one pass over it).
    pub fn purge(&self, now: Tick) -> usize {
        if self.spec.expire.is_none() {
            return 0;
        }
        self.remove_where(|e| self.expired(e, now))
    }

    /// Removes the unused entries for which `pred` holds (`clear table`); entries in use stay,
    /// as in HAProxy. Returns how many went.
    pub fn remove_where(&self, pred: impl Fn(&Entry) -> bool) -> usize {
        let mut gone = 0;
        for shard in self.shards.iter() {
            let mut map = lock(shard);
            let before = map.len();
            map.retain(|_, e| e.refs() > 0 || !pred(e));
            gone += before - map.len();
        }
        self.used.fetch_sub(gone, Ordering::AcqRel);
        gone
    }

    /// Every live entry at `now`, in key order (the order of `show table`).
    pub fn entries(&self, now: Tick) -> Vec<Arc<Entry>> {
        let mut all: Vec<Arc<Entry>> = Vec::new();
        for shard in self.shards.iter() {
            all.extend(
                lock(shard)
                    .values()
                    .filter(|e| !self.expired(e, now))
                    .cloned(),
            );
        }
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(size: usize, expire: Option<u32>, store: &[Store]) -> TableSpec {
        TableSpec {
            key: KeyType::Ip,
            size,
            expire,
            nopurge: false,
            srvkey_addr: false,
            store: store.to_vec(),
        }
    }

    fn st(data: DataType, count: u8, period: u32) -> Store {
        Store {
            data,
            count,
            period,
        }
    }

    fn ip(s: &str) -> Key {
        KeyType::Ip.parse(s).unwrap()
    }

    fn keys(t: &Table, now: Tick) -> Vec<String> {
        t.entries(now)
            .iter()
            .map(|e| t.spec.key.format(e.key()))
            .collect()
    }

    #[test]
    fn full_table_evicts_the_least_recently_touched_as_haproxy() {
        // haproxy 2.6 (size 3, expire 30s): 127.0.0.1 (touched first), 10.0.0.1, 10.0.0.2;
        // adding 10.0.0.3 evicts 127.0.0.1, adding 10.0.0.4 then evicts 10.0.0.1.
        let t = Table::new("fe", spec(3, Some(30_000), &[]));
        for (i, k) in ["127.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
            .iter()
            .enumerate()
        {
            t.get_or_create(&ip(k), 1_000 + 50 * i as u64, false)
                .unwrap();
        }
        assert_eq!(t.used(), 3);
        assert_eq!(keys(&t, 2_000), ["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
        // Without expire, the same order (expiry is the last access).
        let t = Table::new("b", spec(2, None, &[]));
        t.get_or_create(&ip("1.1.1.1"), 10, false);
        t.get_or_create(&ip("2.2.2.2"), 20, false);
        t.get_or_create(&ip("1.1.1.1"), 30, false); // touched again: 2.2.2.2 is older
        t.get_or_create(&ip("3.3.3.3"), 40, false);
        assert_eq!(keys(&t, 50), ["1.1.1.1", "3.3.3.3"]);
    }

    #[test]
    fn entries_in_use_are_never_evicted_and_nopurge_creates_nothing() {
        let t = Table::new("b", spec(2, None, &[]));
        let a = t.track(&ip("1.1.1.1"), 1).unwrap();
        let b = t.track(&ip("2.2.2.2"), 2).unwrap();
        assert!(
            t.track(&ip("3.3.3.3"), 3).is_none(),
            "both entries are in use"
        );
        t.release(a, 4);
        let c = t.track(&ip("3.3.3.3"), 5).unwrap();
        assert_eq!(keys(&t, 6), ["2.2.2.2", "3.3.3.3"]);
        assert_eq!((b.refs(), c.refs()), (1, 1));
        let mut s = spec(1, None, &[]);
        s.nopurge = true;
        let t = Table::new("n", s);
        assert!(t.get_or_create(&ip("1.1.1.1"), 1, false).is_some());
        assert!(t.get_or_create(&ip("2.2.2.2"), 2, false).is_none());
        assert_eq!(keys(&t, 3), ["1.1.1.1"]);
    }

    #[test]
    fn large_tables_evict_a_batch() {
        let t = Table::new("big", spec(1024, None, &[]));
        for i in 0..1024u32 {
            t.get_or_create(&Key::Integer(i), u64::from(i), false)
                .unwrap();
        }
        assert_eq!(t.used(), 1024);
        t.get_or_create(&Key::Integer(5000), 5000, false).unwrap();
        // One batch (1024/256 + 1 = 5) left the shard of the new key.
        assert!(t.used() <= 1024 && t.used() > 1024 - 5, "{}", t.used());
    }

    #[test]
    fn expiry_with_a_test_clock() {
        let t = Table::new("fe", spec(10, Some(10_000), &[st(DataType::ConnCnt, 1, 0)]));
        let cnt = t.schema.slot(DataType::ConnCnt, 0).unwrap();
        let e = t.get_or_create(&ip("1.2.3.4"), 1_000, false).unwrap();
        e.add(cnt, 1_000, 1);
        assert!(t.get(&ip("1.2.3.4"), 10_999).is_some());
        // Expired but not purged yet: lookups already ignore it, a new access starts afresh.
        assert!(t.get(&ip("1.2.3.4"), 11_000).is_none());
        let fresh = t.get_or_create(&ip("1.2.3.4"), 11_000, false).unwrap();
        assert_eq!(fresh.read(cnt, 11_000), Value::Uint(0));
        // A tracked entry does not expire; releasing it re-arms the delay.
        let tr = t.track(&ip("5.5.5.5"), 12_000).unwrap();
        assert_eq!(t.purge(30_000), 1); // 1.2.3.4 went
        assert_eq!(t.used(), 1);
        t.release(tr, 30_000);
        assert_eq!(t.purge(39_999), 0);
        assert_eq!(t.purge(40_000), 1);
        assert_eq!(t.used(), 0);
        // nopurge does not keep entries from expiring.
        let mut s = spec(10, Some(1), &[]);
        s.nopurge = true;
        let t = Table::new("n", s);
        t.get_or_create(&ip("1.1.1.1"), 1, false);
        assert_eq!(t.purge(2), 1);
    }

    #[test]
    fn every_data_type_counts_reads_and_sets() {
        let store: Vec<Store> = DataType::ALL
            .iter()
            .filter(|d| !matches!(d, DataType::Gpc | DataType::Gpt | DataType::GpcRate))
            .map(|&d| {
                let period = if d.kind() == Kind::Rate { 10_000 } else { 0 };
                st(d, 1, period)
            })
            .collect();
        let t = Table::new("all", spec(10, None, &store));
        let e = t.get_or_create(&ip("1.1.1.1"), 100, false).unwrap();
        for s in t.schema.slots.clone() {
            e.add(s, 100, 2);
            e.add(s, 200, 3);
            let got = e.read(s, 300);
            match s.data.kind() {
                Kind::Str => assert_eq!(got, Value::Str(None)),
                Kind::S32 => assert_eq!(got, Value::Sint(5), "{:?}", s.data),
                _ => assert_eq!(got, Value::Uint(5), "{:?}", s.data),
            }
            if s.data.kind() == Kind::Rate {
                // Half a period after the first period ended: half the events.
                assert_eq!(e.read(s, 100 + 15_000), Value::Uint(2), "{:?}", s.data);
                assert_eq!(e.read(s, 100 + 20_000), Value::Uint(0), "{:?}", s.data);
            }
            e.set(s, 400, -3);
            let want = match s.data.kind() {
                Kind::Str => Value::Str(None),
                Kind::S32 => Value::Sint(-3),
                Kind::U64 => Value::Uint((-3i64) as u64),
                _ => Value::Uint(4_294_967_293),
            };
            assert_eq!(e.read(s, 400), want, "{:?}", s.data);
        }
        let cur = t.schema.slot(DataType::ConnCur, 0).unwrap();
        e.set(cur, 0, 1);
        e.decrement(cur);
        e.decrement(cur);
        assert_eq!(e.read(cur, 0), Value::Uint(0));
        let sk = t.schema.slot(DataType::ServerKey, 0).unwrap();
        e.set_server_key(Some("s1"));
        assert_eq!(e.read(sk, 0), Value::Str(Some("s1".into())));
    }

    #[test]
    fn arrays_have_one_slot_per_element() {
        let t = Table::new(
            "a",
            spec(
                1,
                None,
                &[st(DataType::GpcRate, 2, 1_000), st(DataType::Gpc, 3, 0)],
            ),
        );
        let names: Vec<_> = t
            .schema
            .slots
            .iter()
            .map(|s| (s.data.name(), s.index))
            .collect();
        assert_eq!(
            names,
            [
                ("gpc", 0),
                ("gpc", 1),
                ("gpc", 2),
                ("gpc_rate", 0),
                ("gpc_rate", 1)
            ]
        );
        assert!(t.schema.slot(DataType::Gpc, 3).is_none());
        let e = t.get_or_create(&ip("1.1.1.1"), 0, false).unwrap();
        e.add(t.schema.slot(DataType::Gpc, 2).unwrap(), 0, 7);
        assert_eq!(
            e.read(t.schema.slot(DataType::Gpc, 2).unwrap(), 0),
            Value::Uint(7)
        );
        assert_eq!(
            e.read(t.schema.slot(DataType::Gpc, 1).unwrap(), 0),
            Value::Uint(0)
        );
    }

    #[test]
    fn keys_take_their_table_form() {
        let s = KeyType::String { len: 8 };
        assert_eq!(s.format(&s.parse("abcdefghijkl").unwrap()), "abcdefgh");
        let b = KeyType::Binary { len: 4 };
        assert_eq!(b.format(&b.parse("0aff").unwrap()), "0AFF0000");
        assert!(b.parse("0af").is_none());
        assert_eq!(
            KeyType::Integer.parse("4294967295"),
            Some(Key::Integer(u32::MAX))
        );
        assert!(KeyType::Integer.parse("4294967296").is_none());
        assert!(KeyType::Integer.parse("-1").is_none());
        let v6 = KeyType::Ipv6;
        assert_eq!(v6.format(&v6.parse("::1").unwrap()), "::1");
        assert_eq!(v6.format(&v6.parse("1.2.3.4").unwrap()), "::ffff:1.2.3.4");
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(KeyType::Ip.key_from_ip(mapped), Some(ip("10.0.0.1")));
        assert_eq!(KeyType::Ip.key_from_ip("::1".parse().unwrap()), None);
    }

    #[test]
    fn threads_share_a_table() {
        let t = Table::new(
            "fe",
            spec(
                1 << 16,
                Some(60_000),
                &[
                    st(DataType::HttpReqCnt, 1, 0),
                    st(DataType::HttpReqRate, 1, 10_000),
                ],
            ),
        );
        let cnt = t.schema.slot(DataType::HttpReqCnt, 0).unwrap();
        std::thread::scope(|s| {
            for th in 0..4u32 {
                let t = &t;
                s.spawn(move || {
                    for i in 0..5_000u32 {
                        let key = Key::Integer(i % 100 + th % 2);
                        let tr = t.track(&key, 1_000).unwrap();
                        tr.add(cnt, 1_000, 1);
                        t.release(tr, 1_000);
                    }
                });
            }
        });
        let total: u64 = t
            .entries(1_000)
            .iter()
            .map(|e| match e.read(cnt, 1_000) {
                Value::Uint(v) => v,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 20_000);
        assert_eq!(t.used(), 101);
        assert!(t.entries(1_000).iter().all(|e| e.refs() == 0));
    }

    /// The measurement quoted in the module doc: 2 threads, track + 3 adds + release.
    /// `cargo test --release --lib stick::table -- --ignored --nocapture bench_track`
    #[test]
    #[ignore]
    fn bench_track() {
        let store = [
            st(DataType::ConnCnt, 1, 0),
            st(DataType::ConnCur, 1, 0),
            st(DataType::ConnRate, 1, 10_000),
        ];
        const OPS: u64 = 2_000_000;
        for shards in [64, 1] {
            for same in [false, true] {
                let t = Table::with_shards("b", spec(200_000, Some(60_000), &store), shards);
                let slots: Vec<Slot> = t.schema.slots.clone();
                let start = std::time::Instant::now();
                std::thread::scope(|s| {
                    for th in 0..2u64 {
                        let t = &t;
                        let slots = &slots;
                        s.spawn(move || {
                            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ th;
                            for i in 0..OPS {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                let k = if same { 7 } else { (x % 100_000) as u32 };
                                let now = 1_000 + i / 1000;
                                let tr = t.track(&Key::Integer(k), now).unwrap();
                                for s in slots {
                                    tr.add(*s, now, 1);
                                }
                                t.release(tr, now);
                            }
                        });
                    }
                });
                let ns = start.elapsed().as_nanos() as f64 / OPS as f64;
                println!(
                    "BENCH shards={shards:>2} keys={:<6} {ns:.0} ns per track+3 adds+release per thread ({:.1} M/s total)",
                    if same { "same" } else { "random" },
                    2.0 * 1e3 / ns
                );
            }
        }
    }
}
