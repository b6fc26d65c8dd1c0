//! Work spread over the cores: how many this process may use (asked once), an ordered map of a
//! slice over all of them, and two independent computations side by side, for the parts of a
//! batch and a commit that share nothing (rewriting regions, finding values in loaded pages,
//! the witness beside the new directory).

use std::sync::OnceLock;

/// The cores this process may use, asked once (the answer reads files under `/proc` and
/// `/sys` on Linux).
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `f` of every item, in the items' order: on every core when there are at least `min` items
/// (one share per core, the calling thread taking the first), else on the calling thread. A
/// panic in a share is resumed on the calling thread.
pub(crate) fn map_on_cores<T: Sync, R: Send>(
    items: &[T],
    min: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let n = cores();
    if n < 2 || items.len() < min.max(2) {
        return items.iter().map(&f).collect();
    }
    let f = &f;
    let share = items.len().div_ceil(n);
    std::thread::scope(|s| {
        let mut shares = items.chunks(share);
        let first = shares.next().unwrap_or_default();
        let helpers: Vec<_> = shares
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out: Vec<R> = Vec::with_capacity(items.len());
        out.extend(first.iter().map(f));
        for helper in helpers {
            match helper.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// `a()` and `b()`, on two cores when `parallel` and there are two (`a` on a helper thread,
/// `b` on the calling one), else one after the other. A panic in `a` is resumed on the
/// calling thread.
pub(crate) fn both<A: Send, B>(
    parallel: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (A, B) {
    if !parallel || cores() < 2 {
        let a = a();
        return (a, b());
    }
    std::thread::scope(|s| {
        let helper = s.spawn(a);
        let b = b();
        match helper.join() {
            Ok(a) => (a, b),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_keeps_the_order_at_every_size() {
        for n in [0usize, 1, 2, 3, 63, 64, 1000, 4097] {
            let items: Vec<usize> = (0..n).collect();
            for min in [1, 64] {
                let out = map_on_cores(&items, min, |i| i * 3);
                assert_eq!(out, items.iter().map(|i| i * 3).collect::<Vec<_>>(), "{n} {min}");
            }
        }
    }

    #[test]
    fn both_gives_both_results_either_way() {
        for parallel in [false, true] {
            let items: Vec<u64> = (0..100).collect();
            let (a, b) = both(parallel, || items.iter().sum::<u64>(), || items.len());
            assert_eq!((a, b), (4950, 100));
        }
        let caught = std::panic::catch_unwind(|| both(true, || panic!("in a"), || 1));
        assert!(caught.is_err());
    }

    #[test]
    fn a_panic_in_a_share_reaches_the_caller() {
        let items: Vec<usize> = (0..1000).collect();
        let caught = std::panic::catch_unwind(|| {
            map_on_cores(&items, 1, |i| assert!(*i != 999, "the last item"))
        });
        assert!(caught.is_err());
    }
}
