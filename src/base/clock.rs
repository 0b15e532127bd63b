//! The process clock: time since the process started, for what HAProxy reports in seconds or
//! milliseconds since start (`lastchg`, `Uptime_sec`, the end of an outlier ejection).
//!
//! One instant, set once ([`mark_start`]) and read by every thread without a lock. It lives
//! here, at the bottom, because both the server state and the stats socket read it.

use std::sync::OnceLock;
use std::time::Instant;

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Marks the process start (for `lastchg` and `Uptime_sec`).
pub fn mark_start() {
    STARTED.get_or_init(Instant::now);
}

/// Milliseconds since [`mark_start`].
pub fn uptime_ms() -> u64 {
    STARTED.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Seconds since [`mark_start`].
pub fn uptime_secs() -> u64 {
    STARTED.get_or_init(Instant::now).elapsed().as_secs()
}
