//! Load-balancing algorithms: small pure objects that choose a server index.
//!
//! An algorithm knows nothing of sockets, threads or clocks. Its caller (`backend`) tells it, at
//! each pick, which servers are eligible and with which effective weight, so that weights can
//! change at run time (they live in atomics shared by all workers) without rebuilding anything,
//! and every worker keeps its own algorithm state, so picking takes no lock.

pub mod hash;
pub mod leastconn;
pub mod roundrobin;

pub use roundrobin::{SmoothRoundRobin, StaticRoundRobin};
