//! A socket address that one thread may change while others read it, without a lock: a server's
//! address, which `set server BE/SRV addr` changes at run time and every worker reads at each
//! new connection.
//!
//! It is a sequence lock over atomics: the address is encoded in three 64-bit words, and a
//! version counter is odd while a write is under way. A reader loads the counter, the words,
//! then the counter again, and starts over if a write overlapped (writes are rare: an operator's
//! command). Reading writes no shared cache line, so workers connecting at the same time do not
//! contend. Writers are serialised by a compare-and-swap on the counter.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A `SocketAddr` readable and writable from any thread (IPv6 flow info is not kept).
#[derive(Debug)]
pub struct AtomicSocketAddr {
    seq: AtomicU64,
    words: [AtomicU64; 3],
}

/// Word 2 layout: port in bits 0-15, bit 16 set for IPv6, scope id in bits 32-63.
const V6: u64 = 1 << 16;

fn encode(a: SocketAddr) -> [u64; 3] {
    match a {
        SocketAddr::V4(v4) => [0, u64::from(u32::from(*v4.ip())), u64::from(v4.port())],
        SocketAddr::V6(v6) => {
            let ip = u128::from(*v6.ip());
            [
                (ip >> 64) as u64,
                ip as u64,
                u64::from(v6.port()) | V6 | (u64::from(v6.scope_id()) << 32),
            ]
        }
    }
}

fn decode(w: [u64; 3]) -> SocketAddr {
    let port = w[2] as u16;
    if w[2] & V6 != 0 {
        let ip = Ipv6Addr::from((u128::from(w[0]) << 64) | u128::from(w[1]));
        SocketAddr::V6(SocketAddrV6::new(ip, port, 0, (w[2] >> 32) as u32))
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::from(w[1] as u32)), port)
    }
}

impl AtomicSocketAddr {
    pub fn new(a: SocketAddr) -> Self {
        let w = encode(a);
        AtomicSocketAddr {
            seq: AtomicU64::new(0),
            words: [
                AtomicU64::new(w[0]),
                AtomicU64::new(w[1]),
                AtomicU64::new(w[2]),
            ],
        }
    }

    /// The address as last stored (never a mix of two stores).
    pub fn load(&self) -> SocketAddr {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let w = [
                self.words[0].load(Ordering::Relaxed),
                self.words[1].load(Ordering::Relaxed),
                self.words[2].load(Ordering::Relaxed),
            ];
            // The word loads must complete before the counter is read again.
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return decode(w);
            }
        }
    }

    /// Replaces the address; returns the previous one.
    pub fn store(&self, a: SocketAddr) -> SocketAddr {
        // Take the write side: move the counter from even to odd.
        let mut cur = self.seq.load(Ordering::Relaxed);
        loop {
            if cur & 1 == 1 {
                std::hint::spin_loop();
                cur = self.seq.load(Ordering::Relaxed);
                continue;
            }
            match self
                .seq
                .compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        // The odd counter must be visible before any word changes.
        fence(Ordering::Release);
        let old = decode([
            self.words[0].load(Ordering::Relaxed),
            self.words[1].load(Ordering::Relaxed),
            self.words[2].load(Ordering::Relaxed),
        ]);
        for (slot, v) in self.words.iter().zip(encode(a)) {
            slot.store(v, Ordering::Relaxed);
        }
        self.seq.store(cur + 2, Ordering::Release);
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn round_trips_v4_and_v6() {
        let cases = [
            "127.0.0.1:80",
            "0.0.0.0:0",
            "255.255.255.255:65535",
            "[::1]:8080",
            "[fe80::1%7]:443",
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
            "[::ffff:10.0.0.1]:1",
        ];
        let a = AtomicSocketAddr::new("10.0.0.1:1".parse().unwrap());
        for c in cases {
            let want: SocketAddr = c.parse().unwrap();
            let before = a.load();
            assert_eq!(a.store(want), before);
            assert_eq!(a.load(), want, "{c}");
        }
    }

    /// Readers racing a writer that alternates two addresses only ever see one of the two.
    #[test]
    fn readers_never_see_a_torn_address() {
        let x: SocketAddr = "[1:2:3:4:5:6:7:8]:1111".parse().unwrap();
        let y: SocketAddr = "192.168.1.2:2222".parse().unwrap();
        let a = Arc::new(AtomicSocketAddr::new(x));
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (a, stop, reads) = (Arc::clone(&a), Arc::clone(&stop), Arc::clone(&reads));
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let got = a.load();
                        assert!(got == x || got == y, "torn read: {got}");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // Write until the readers have read plenty while writes went on (bounded in time).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut i = 0u64;
        while reads.load(Ordering::Relaxed) < 50_000 && std::time::Instant::now() < deadline {
            a.store(if i % 2 == 0 { y } else { x });
            i += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
    }
}
