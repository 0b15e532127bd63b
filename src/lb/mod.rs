//! Server choice: the pure load-balancing algorithms (layer 1, no I/O, no clock, no threads).
//!
//! Each algorithm is a small object built from an immutable server list (one tier: active or
//! backup), after HAProxy's `struct lbprm` and `src/lb_*.c`: `pick` (with a redispatch hint),
//! `set_usable`, `set_weight`, and `take`/`release` where connection counts matter. Callers hash
//! keys with [`hash`] after extracting them with [`key`]. See [`weighted`] for the shared rules.
pub mod chash;
pub mod first;
pub mod hash;
pub mod key;
pub mod leastconn;
pub mod maglev;
pub mod map;
pub mod random;
pub mod weighted;
