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

/// A random number for `rand()` and the like: xorshift64* per thread, seeded from the clock
/// and the thread (not for secrets).
pub fn random_u32() -> u32 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let here = &t as *const u64 as u64;
            (t ^ here.rotate_left(32)) | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    })
}
