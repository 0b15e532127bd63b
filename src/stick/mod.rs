//! Stick tables (issue 17): per-key counters and rates shared by every worker thread, as
//! HAProxy's `stick-table` keeps them. Pure logic and atomics: no socket, no thread, no clock
//! (every call takes `now`, in milliseconds, from the caller: the runtime passes
//! [`crate::base::clock::uptime_ms`], tests pass whatever time they want).
//!
//! - [`freq`]: a rate over a sliding period, computed as HAProxy's freq counters do.
//! - [`data`]: the data types a table can store, in HAProxy's order, and `store` items.
//! - [`table`]: keys, entries, the `size` bound (least recently used evicted), expiry, the
//!   reference count of tracked entries, and the sharding that keeps threads apart.
//! - [`show`]: the runtime API's `show table`, `clear table` and `set table`, as pure
//!   functions over tables, in HAProxy's output format.
//!
//! The request path will use it this way (a later step wires it through the rules engine):
//!
//! ```text
//! let slot = table.schema.slot(DataType::HttpReqRate, 0)?;   // once, at load
//! let tracked = table.track(&key, now)?;                     // track-sc0: one shard lock
//! tracked.add(slot, now, 1);                                 // each request: atomics only
//! tracked.read(slot, now)                                    // sc0_http_req_rate
//! table.release(tracked, now);                               // session end: re-arms expiry
//! ```
//!
//! This module sits at the bottom of layer 1: it imports only `base` and `config::diag`-free
//! std code, so that `rules` (fetches) and `config::model` (table definitions) can use it.

pub mod data;
pub mod freq;
pub mod show;
pub mod table;
pub mod track;

pub use data::{DataType, Kind, Store};
pub use table::{Entry, Feed, Key, KeyType, Slot, Table, TableSpec, Tracked, Value};

/// A time in milliseconds on the process clock (any origin; only differences matter).
pub type Tick = u64;

/// Where `now` comes from: the process clock at run time, a hand-driven clock in tests.
pub trait Clock {
    fn now(&self) -> Tick;
}

/// The process clock: milliseconds since the process started.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessClock;

impl Clock for ProcessClock {
    fn now(&self) -> Tick {
        crate::base::clock::uptime_ms()
    }
}

/// A clock that moves only when told (tests, `--explain`-style dry runs).
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicU64);

impl ManualClock {
    pub fn new(start: Tick) -> Self {
        ManualClock(std::sync::atomic::AtomicU64::new(start))
    }

    /// Moves the clock `ms` milliseconds forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Tick {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}
