//! Bascule: a TCP/HTTP load balancer and reverse proxy that reads HAProxy's configuration.
//!
//! The crate is layered so that each layer only imports the ones below it (see
//! docs/ARCHITECTURE.md for the full picture and docs/LEXICON.md for the vocabulary):
//!
//! 0. vocabulary: [`config::model`] (the typed configuration), `sys` (the only unsafe code);
//! 1. pure logic, no I/O: [`config`] (text to model), [`lb`] (server choice);
//! 2. I/O mechanics: `listener`, `forward`, `backend`;
//! 3. orchestration: `session` (one client connection from accept to close);
//! 4. process: [`cli`], `worker` (thread-per-core runtimes), [`process`] (signals, pidfile,
//!    daemon), and the `bascule` binary.
#![deny(unsafe_code)]

pub mod cli;
pub mod config;
pub mod lb;
pub mod process;

/// What `-v` (and, with build details, `-vv`) prints.
pub fn version_text(verbose: bool) -> String {
    let mut s = format!(
        "Bascule version {} - a load balancer that reads HAProxy's configuration\n",
        env!("CARGO_PKG_VERSION")
    );
    if verbose {
        s.push_str(&format!(
            "Build target: {}-{}\nFeatures: +TCP +THREADS +REUSEPORT -HTTP -TLS -H2 -PROXY_PROTOCOL_RECV\n",
            std::env::consts::ARCH,
            std::env::consts::OS
        ));
    }
    s
}
