//! Per-worker free lists of reusable memory (forwarding buffers, header scratch spaces) that
//! give back, after a burst, what the burst left in them.
//!
//! A worker keeps the buffers its ended transactions gave back, so that the next one allocates
//! nothing. How many it keeps follows the most transactions it ran at once: after a burst of
//! 250 clients, 500 buffers of 16 KiB have come back and the list holds its bound of them,
//! 4 MiB, for connections that now idle and need none. So each list notes the fewest entries it
//! held since the last look (its low-water mark): entries that stayed in it through a whole
//! period between two looks were needed by nobody, and [`Pool::shrink`], called from the
//! worker's periodic look (`runtime::reclaim`), frees them (down to a few, [`Pool::KEEP`])
//! when they are at least half of the list: what a burst leaves behind, not the ups and downs
//! of steady traffic, which would allocate them again at its next peak. Under steady load
//! nothing is freed; the cost on the hot path is one comparison when an entry is taken.

use std::cell::{Cell, RefCell};

/// A bounded free list of `T`, for one thread.
pub struct Pool<T> {
    items: RefCell<Vec<T>>,
    /// The fewest items held since the last [`Pool::shrink`].
    low: Cell<usize>,
    max: usize,
}

impl<T> Pool<T> {
    /// Entries a shrink leaves in the list, so that a short connection after a quiet moment
    /// still allocates nothing.
    pub const KEEP: usize = 8;

    /// An empty list that keeps at most `max` entries.
    pub const fn new(max: usize) -> Self {
        Pool {
            items: RefCell::new(Vec::new()),
            low: Cell::new(0),
            max,
        }
    }

    /// Takes the most recently given entry, if `fits` accepts it.
    pub fn take_if(&self, fits: impl FnOnce(&T) -> bool) -> Option<T> {
        let mut items = self.items.borrow_mut();
        let item = match items.last() {
            Some(t) if fits(t) => items.pop(),
            _ => return None,
        };
        if items.len() < self.low.get() {
            self.low.set(items.len());
        }
        item
    }

    /// Takes the most recently given entry.
    pub fn take(&self) -> Option<T> {
        self.take_if(|_| true)
    }

    /// Gives an entry back; past the bound it is dropped.
    pub fn put(&self, item: T) {
        let mut items = self.items.borrow_mut();
        if items.len() < self.max {
            items.push(item);
        }
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.items.borrow().len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frees the entries that stayed in the list since the last call, when they are at least
    /// half of it (keeping [`Pool::KEEP`]), and starts a new period. Returns the bytes freed, as
    /// `size` counts them per entry.
    pub fn shrink(&self, size: impl Fn(&T) -> usize) -> usize {
        let surplus: Vec<T> = {
            let mut items = self.items.borrow_mut();
            let unused = self.low.get().min(items.len());
            // A burst's leftovers are most of the list; steady traffic's ups and downs leave
            // fewer unused from one period to the next, and freeing those would only make the
            // next peak allocate them again.
            let free = if 2 * unused >= items.len() {
                unused.min(items.len().saturating_sub(Self::KEEP))
            } else {
                0
            };
            // The oldest entries, at the bottom: the top is what the next take reuses.
            let gone = items.drain(..free).collect();
            let kept = items.len().max(Self::KEEP);
            if items.capacity() > 2 * kept {
                items.shrink_to(kept);
            }
            self.low.set(items.len());
            gone
        };
        surplus.iter().map(size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: usize = Pool::<()>::KEEP;

    #[test]
    fn entries_unused_for_a_whole_period_are_freed() {
        let p = Pool::new(256);
        // A burst: 300 in use at once, then all given back (the bound keeps 256).
        let taken: Vec<Vec<u8>> = (0..300)
            .map(|_| p.take().unwrap_or_else(|| vec![0; 100]))
            .collect();
        for b in taken {
            p.put(b);
        }
        assert_eq!(p.len(), 256);
        // The look during the burst saw an empty list: nothing to free yet.
        assert_eq!(p.shrink(Vec::len), 0);
        assert_eq!(p.len(), 256);
        // A whole period untouched: all but KEEP go.
        assert_eq!(p.shrink(Vec::len), (256 - KEEP) * 100);
        assert_eq!(p.len(), KEEP);
        assert_eq!(p.shrink(Vec::len), 0);
    }

    #[test]
    fn entries_in_use_during_the_period_stay() {
        let p = Pool::new(256);
        for _ in 0..100 {
            p.put(vec![0u8; 10]);
        }
        p.shrink(Vec::len);
        // Steady traffic: up to 60 out at once, so 40 were not needed in this period; but the
        // next may need them.
        let use_some = |n| {
            for _ in 0..5 {
                let out: Vec<_> = (0..n).map(|_| p.take().unwrap()).collect();
                for b in out {
                    p.put(b);
                }
            }
        };
        use_some(60);
        assert_eq!(p.shrink(Vec::len), 0);
        assert_eq!(p.len(), 100);
        // Traffic falls to 30 at once: the 70 others go.
        use_some(30);
        assert_eq!(p.shrink(Vec::len), 70 * 10);
        assert_eq!(p.len(), 30);
        use_some(30);
        assert_eq!(p.shrink(Vec::len), 0);
    }

    #[test]
    fn take_if_leaves_entries_that_do_not_fit() {
        let p = Pool::new(4);
        p.put(vec![0u8; 10]);
        assert!(p.take_if(|b| b.len() == 20).is_none());
        assert_eq!(p.len(), 1);
        assert_eq!(p.take_if(|b| b.len() == 10).map(|b| b.len()), Some(10));
        assert!(p.is_empty());
    }

    #[test]
    fn the_bound_holds() {
        let p = Pool::new(2);
        for _ in 0..5 {
            p.put(1u8);
        }
        assert_eq!(p.len(), 2);
    }
}
