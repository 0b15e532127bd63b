//! Small building blocks that every layer may use (layer 0): values shared between threads
//! without a lock, and per-thread free lists.
//!
//! [`clock`] is the time since the process started; [`counter`] keeps a count on one cache
//! line per worker; [`atomic_addr`] is a socket address every thread reads without a lock;
//! [`pool`] is a per-thread free list that gives memory back after a burst; [`der`] reads one
//! DER element.
//!
//! These modules import nothing from the rest of Bascule (std and external crates only), so
//! that any layer can build on them.

pub mod atomic_addr;
pub mod clock;
pub mod counter;
pub mod der;
pub mod pool;
