//! Bascule: a TCP/HTTP load balancer and reverse proxy that reads HAProxy's configuration.
//!
//! The crate is layered so that each layer only imports the ones below it (see
//! docs/ARCHITECTURE.md for the full picture and docs/LEXICON.md for the vocabulary):
//!
//! 0. vocabulary: [`config::model`] (the typed configuration), [`sys`] (the only unsafe code),
//!    [`compat`] (the HAProxy version and features Bascule declares);
//! 1. pure logic, no I/O: [`config`] (text to model), [`lb`] (server choice), [`proto`] (wire
//!    formats);
//! 2. I/O mechanics: [`listener`], [`forward`], [`backend`], [`check`] (health checks), [`pool`]
//!    (per-worker free lists that shrink after a burst);
//! 3. orchestration: [`state`] (what workers share), [`session`] (one TCP client connection
//!    from accept to close), [`http`] (HTTP/1.1 sessions and their transactions);
//! 4. process: [`cli`], [`stats`] (the stats socket: `show stat`), [`worker`] (thread-per-core runtimes),
//!    [`reclaim`] (memory back to the kernel after a burst), [`process`] (signals, pidfile,
//!    daemon), and the `bascule` binary.
#![deny(unsafe_code)]

pub mod atomic_addr;
pub mod backend;
pub mod check;
pub mod cli;
pub mod compat;
pub mod config;
pub mod counter;
pub mod deadline;
pub mod forward;
pub mod http;
pub mod idle;
pub mod lazy;
pub mod lb;
pub mod listener;
pub mod log;
pub mod pipe;
pub mod pool;
pub mod process;
pub mod proto;
pub mod reclaim;
pub mod rules;
pub mod session;
pub mod state;
pub mod stats;
pub mod sys;
pub mod worker;

/// What `-v` (and, with build details, `-vv`) prints; see [`compat`].
pub fn version_text(verbose: bool) -> String {
    compat::version_text(verbose)
}
