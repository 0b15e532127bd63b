//! The process at run time (layer 4, the top): worker threads and their event loops
//! ([`worker`]), signals, pidfile, daemon mode and taking over from an older process
//! ([`process`]), the stats socket with HAProxy's runtime API ([`stats`]), and giving memory
//! back after a burst ([`reclaim`]).
//!
//! Only this layer creates threads and runtimes and starts the long-lived tasks (health checks,
//! stats sockets, log flushers). It may import every layer below; nothing below may import it:
//! a lower module that needs something from here gets it as an argument.

pub mod process;
pub mod reclaim;
pub mod stats;
pub mod worker;
