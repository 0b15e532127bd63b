//! Weighted least connections (`balance leastconn`) and `balance first`.
//!
//! Both read each server's current connection count (shared by all workers, in atomics) at pick
//! time, so they need no state of their own beyond a rotating start index that spreads ties.

/// Picks the eligible server with the fewest connections per unit of weight:
/// the smallest `(conns + 1) / weight`. Among equals, the first at or after `start` in rotation
/// wins, so a caller that advances `start` on each pick shares ties round-robin.
/// `weight(i)` is 0 for a server that is not eligible.
pub fn least_conn(
    n: usize,
    start: usize,
    weight: impl Fn(usize) -> u32,
    conns: impl Fn(usize) -> u32,
) -> Option<usize> {
    let mut best: Option<(usize, u64, u64)> = None; // (index, conns + 1, weight)
    for k in 0..n {
        let i = (start + k) % n;
        let w = u64::from(weight(i));
        if w == 0 {
            continue;
        }
        let c = u64::from(conns(i)) + 1;
        // c / w < bc / bw  <=>  c * bw < bc * w (no division, no float).
        if best.is_none_or(|(_, bc, bw)| c * bw < bc * w) {
            best = Some((i, c, w));
        }
    }
    best.map(|(i, _, _)| i)
}

/// `balance first`: the first eligible server (in declaration order) that is below its
/// `maxconn` (`None`: no limit, so the first eligible one).
pub fn first(
    n: usize,
    eligible: impl Fn(usize) -> bool,
    conns: impl Fn(usize) -> u32,
    maxconn: impl Fn(usize) -> Option<u32>,
) -> Option<usize> {
    (0..n).find(|&i| eligible(i) && maxconn(i).is_none_or(|m| conns(i) < m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_loaded_wins_and_ties_rotate() {
        let conns = [3, 1, 1];
        let w = [1, 1, 1];
        assert_eq!(least_conn(3, 0, |i| w[i], |i| conns[i]), Some(1));
        assert_eq!(least_conn(3, 2, |i| w[i], |i| conns[i]), Some(2));
        // Weight 3 with 5 conns ((5+1)/3 = 2) beats weight 1 with 2 conns ((2+1)/1 = 3).
        let conns = [5, 2];
        let w = [3, 1];
        assert_eq!(least_conn(2, 1, |i| w[i], |i| conns[i]), Some(0));
        assert_eq!(least_conn(2, 0, |_| 0, |_| 0), None);
    }

    #[test]
    fn least_conn_spreads_a_growing_load_by_weight() {
        let w = [2u32, 1];
        let mut conns = [0u32; 2];
        for k in 0..300 {
            let i = least_conn(2, k, |i| w[i], |i| conns[i]).unwrap();
            conns[i] += 1;
        }
        assert!((199..=201).contains(&conns[0]), "{conns:?}");
    }

    #[test]
    fn first_fills_servers_in_order() {
        let conns = [2, 0, 0];
        let max = [Some(2), Some(2), None];
        assert_eq!(first(3, |_| true, |i| conns[i], |i| max[i]), Some(1));
        assert_eq!(first(3, |i| i == 2, |i| conns[i], |i| max[i]), Some(2));
        assert_eq!(first(3, |_| false, |i| conns[i], |i| max[i]), None);
    }
}
