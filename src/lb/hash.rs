//! Key hashing for `balance source` and `balance uri`, and map-based server choice
//! (`hash-type map-based`, HAProxy's default).
//!
//! Map-based hashing gives each eligible server a share of the hash space equal to its weight and
//! maps `hash % total_weight` into it. The same key therefore lands on the same server for as long
//! as the set of eligible servers and their weights are the same, on every worker, every instance
//! and across restarts; when that set changes, keys move (consistent hashing, which moves fewer,
//! is `hash-type consistent`).

/// The sdbm string hash (HAProxy's default hash function).
pub fn sdbm(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |h, &b| {
        u32::from(b)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

/// Thomas Wang's 32-bit integer mix (HAProxy's `avalanche`), so that keys differing in few bits
/// still spread over the whole space.
pub fn avalanche(mut a: u32) -> u32 {
    a = (a ^ 61) ^ (a >> 16);
    a = a.wrapping_add(a << 3);
    a ^= a >> 4;
    a = a.wrapping_mul(0x27d4_eb2d);
    a ^ (a >> 15)
}

/// Picks the server owning `hash` when each eligible server owns a share of the space equal to
/// its weight (`weight(i)` 0: not eligible).
pub fn map_based(n: usize, hash: u32, weight: impl Fn(usize) -> u32) -> Option<usize> {
    let total: u64 = (0..n).map(|i| u64::from(weight(i))).sum();
    if total == 0 {
        return None;
    }
    let mut slot = u64::from(hash) % total;
    for i in 0..n {
        let w = u64::from(weight(i));
        if slot < w {
            return Some(i);
        }
        slot -= w;
    }
    None
}

/// The part of a request target that `balance uri` hashes: by default the path without its query
/// string (`whole`: with it); `len N` keeps the first N characters, `depth N` the first N
/// directories.
pub fn uri_key(target: &[u8], whole: bool, len: Option<u32>, depth: Option<u32>) -> &[u8] {
    let mut key = if whole {
        target
    } else {
        target.split(|&b| b == b'?').next().unwrap_or(target)
    };
    if let Some(d) = depth {
        let mut slashes = 0;
        if let Some(end) = key.iter().position(|&b| {
            if b == b'/' {
                slashes += 1;
            }
            slashes > d
        }) {
            key = &key[..end];
        }
    }
    if let Some(l) = len {
        key = &key[..key.len().min(l as usize)];
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdbm_known_values() {
        assert_eq!(sdbm(b""), 0);
        assert_eq!(sdbm(b"a"), 97);
        // h("ab") = 'b' + (97 << 6) + (97 << 16) - 97
        assert_eq!(sdbm(b"ab"), 98 + (97 << 6) + (97 << 16) - 97);
    }

    #[test]
    fn map_based_honours_weights_and_is_stable() {
        let w = [3u32, 1];
        let mut counts = [0; 2];
        for k in 0..100_000u32 {
            counts[map_based(2, avalanche(k), |i| w[i]).unwrap()] += 1;
        }
        let share = f64::from(counts[0]) / 100_000.0;
        assert!((0.73..=0.77).contains(&share), "{counts:?}");
        // Same key, same server.
        let k = sdbm(b"/images/logo.png");
        assert_eq!(map_based(2, k, |i| w[i]), map_based(2, k, |i| w[i]));
        assert_eq!(map_based(2, k, |_| 0), None);
    }

    #[test]
    fn uri_keys() {
        let t = b"/a/b/c/d?x=1";
        assert_eq!(uri_key(t, false, None, None), b"/a/b/c/d");
        assert_eq!(uri_key(t, true, None, None), t);
        assert_eq!(uri_key(t, false, None, Some(2)), b"/a/b");
        assert_eq!(uri_key(t, false, Some(3), None), b"/a/");
    }
}
