//! `balance random[(DRAWS)]`: weighted random choice with the power of N choices.
//!
//! Each pick draws `draws` servers at random in proportion to their weights and keeps the least
//! loaded of them (fewest connections per unit of weight). With 2 draws (the default) the load
//! evens out far better than one purely random draw, without any shared state between workers.
//! The random source is a per-worker xorshift state passed in by the caller.

/// Advances a xorshift64* state and returns the next value (never stuck at 0 when seeded
/// non-zero).
pub fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// One server drawn in proportion to `weight(i)` (0: not eligible), from the random value `r`.
pub fn weighted_draw(n: usize, r: u64, weight: impl Fn(usize) -> u32) -> Option<usize> {
    let total: u64 = (0..n).map(|i| u64::from(weight(i))).sum();
    if total == 0 {
        return None;
    }
    let mut slot = r % total;
    for i in 0..n {
        let w = u64::from(weight(i));
        if slot < w {
            return Some(i);
        }
        slot -= w;
    }
    None
}

/// Draws `draws` servers and keeps the least loaded (`(conns + 1) / weight`, smallest first).
pub fn pick(
    n: usize,
    draws: u32,
    state: &mut u64,
    weight: impl Fn(usize) -> u32,
    conns: impl Fn(usize) -> u32,
) -> Option<usize> {
    let mut best: Option<(usize, u64, u64)> = None;
    for _ in 0..draws.max(1) {
        let i = weighted_draw(n, next(state), &weight)?;
        let (c, w) = (u64::from(conns(i)) + 1, u64::from(weight(i)));
        if best.is_none_or(|(_, bc, bw)| c * bw < bc * w) {
            best = Some((i, c, w));
        }
    }
    best.map(|(i, _, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_draw_follows_weights_within_2_percent() {
        let w = [3u32, 1];
        let mut s = 0x9e37_79b9_7f4a_7c15;
        let mut counts = [0u32; 2];
        for _ in 0..100_000 {
            counts[pick(2, 1, &mut s, |i| w[i], |_| 0).unwrap()] += 1;
        }
        let share = f64::from(counts[0]) / 100_000.0;
        assert!((0.73..=0.77).contains(&share), "{counts:?}");
    }

    #[test]
    fn two_draws_avoid_the_loaded_server() {
        let conns = [10u32, 0];
        let mut s = 42;
        let mut busy = 0;
        for _ in 0..10_000 {
            if pick(2, 2, &mut s, |_| 1, |i| conns[i]) == Some(0) {
                busy += 1;
            }
        }
        // The busy server wins only when both draws hit it: about 1/4 of the time.
        assert!((2_000..3_000).contains(&busy), "{busy}");
        assert_eq!(pick(2, 2, &mut s, |_| 0, |_| 0), None);
    }
}
