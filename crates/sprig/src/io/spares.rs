//! Spares: buffers given back for reuse, kept up to a bound — the page blocks of
//! `state::blocks`, the witness proof buffer of `state::version`, and the read and staging
//! buffers of `log::segments` — so a hot path takes a warm buffer instead of a fresh allocation
//! (and the page faults that often come with it).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Values kept for reuse, at most [`Spares::limit`] of them.
pub(crate) struct Spares<T> {
    items: Mutex<Vec<T>>,
    limit: AtomicUsize,
}

impl<T> Spares<T> {
    /// None kept yet, at most `limit`.
    pub const fn new(limit: usize) -> Spares<T> {
        Spares {
            items: Mutex::new(Vec::new()),
            limit: AtomicUsize::new(limit),
        }
    }

    /// A kept value, if any (the last one given back).
    pub fn take(&self) -> Option<T> {
        self.items.lock().pop()
    }

    /// Up to `n` kept values.
    pub fn take_up_to(&self, n: usize) -> Vec<T> {
        let mut items = self.items.lock();
        let keep = items.len().saturating_sub(n);
        items.split_off(keep)
    }

    /// Keep `values` while there is room; the rest are dropped, outside the lock.
    pub fn keep(&self, values: impl IntoIterator<Item = T>) {
        let mut values = values.into_iter();
        {
            let mut items = self.items.lock();
            let room = self.limit().saturating_sub(items.len());
            items.extend(values.by_ref().take(room));
        }
        drop(values);
    }

    /// How many may be kept.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Let at least `limit` be kept (the bound only grows).
    pub fn raise_limit(&self, limit: usize) {
        self.limit.fetch_max(limit, Ordering::Relaxed);
    }

    /// How many are kept now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_kept_up_to_the_bound_and_taken_last_first() {
        let s = Spares::new(3);
        s.keep([1, 2]);
        s.keep([3, 4, 5]);
        assert_eq!(s.len(), 3, "kept beyond the bound");
        assert_eq!(s.take(), Some(3));
        assert_eq!(s.take_up_to(5), vec![1, 2]);
        assert_eq!(s.take(), None);
        s.raise_limit(5);
        s.raise_limit(2);
        assert_eq!(s.limit(), 5, "the bound shrank");
        s.keep(0..10);
        assert_eq!(s.len(), 5);
    }
}
