//! Load-balancing algorithms: small pure objects and functions that choose a server index.
//!
//! An algorithm knows nothing of sockets, threads or clocks. Two shapes live here:
//! - weight-reading algorithms ([`roundrobin`], [`leastconn`]): the caller passes, at each pick,
//!   each server's effective weight and connection count (read from atomics shared by all
//!   workers), so a weight change applies on the next pick; round-robin also takes the next
//!   position from a [`Cursor`] shared by every worker, so the order is the process's, as in
//!   HAProxy;
//! - table algorithms for hashing ([`map`], [`chash`], [`maglev`]), built from a server list
//!   ([`weighted`]) and told about up/down and weight changes (`set_usable`, `set_weight`), after
//!   HAProxy's `struct lbprm`. Keys come from [`key`] and are hashed with [`hash`], so that a
//!   key lands on the server HAProxy would pick.
//!
//! Every worker keeps its own objects, so picking takes no lock (a round-robin [`Cursor`] is one
//! atomic).

pub mod chash;
pub mod hash;
pub mod key;
pub mod leastconn;
pub mod maglev;
pub mod map;
pub mod random;
pub mod roundrobin;
pub mod weighted;

pub use roundrobin::{Cursor, Schedule};
