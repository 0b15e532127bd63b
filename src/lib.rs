//! Bascule: a TCP/HTTP load balancer and reverse proxy that reads HAProxy's configuration.
//!
//! The crate is layered so that each layer only imports the ones below it (see
//! docs/ARCHITECTURE.md for the full picture, tests/layering.rs for the check, and
//! docs/LEXICON.md for the vocabulary):
//!
//! 0. vocabulary: [`sys`] (the only unsafe code), [`compat`] (the HAProxy version and features
//!    Bascule declares), [`base`] (the process clock, per-worker counters, a lock-free address,
//!    free lists), [`config::model`] (the typed configuration);
//! 1. pure logic, no I/O: [`config`] (text to model), [`lb`] (server choice), [`proto`] (wire
//!    formats), [`log::format`] (log lines), [`tls`] (certificates and their selection, loaded
//!    with the configuration);
//! 2. I/O mechanics: [`log`] (sending log lines), [`net`] (sockets, timers, forwarding),
//!    [`backend`] (server state, picking, connecting, health checks);
//! 3. orchestration: [`state`] (what workers share), [`session`] (what sessions share, and a
//!    TCP client connection from accept to close), [`http`] (HTTP/1.1 sessions and their
//!    transactions);
//! 4. process: [`cli`], [`runtime`] (worker threads, the process, the stats socket, memory back
//!    to the kernel after a burst), and the `bascule` binary.
#![deny(unsafe_code)]

pub mod backend;
pub mod base;
pub mod cli;
pub mod compat;
pub mod config;
pub mod http;
pub mod lb;
pub mod log;
pub mod net;
pub mod peers;
pub mod proto;
pub mod rules;
pub mod runtime;
pub mod session;
pub mod state;
pub mod stats;
pub mod stick;
pub mod sys;
pub mod tls;

/// What `-v` (and, with build details, `-vv`) prints; see [`compat`].
pub fn version_text(verbose: bool) -> String {
    compat::version_text(verbose)
}
