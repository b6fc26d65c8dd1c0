//! Work spread over the cores: how many this process may use (asked once), an ordered map of a
//! slice over all of them, two independent computations side by side, and work handed to
//! helper cores piece by piece as it becomes ready, for the parts of a batch and a commit that
//! share nothing (rewriting regions, also while their pages arrive from the SSD; finding values
//! in loaded pages; the witness beside the new directory; a commit's superseded pages beside
//! its staging).
//!
//! The helpers are threads started once for the process (a rayon-core pool, one fewer than the
//! cores: the calling thread is the last), so handing them work costs a wake-up. Starting a
//! thread per batch cost up to 2 ms before it ran whenever the caller's core was busy (the new
//! thread starts on its parent's core). The calling thread always takes a share itself. Calls
//! from several threads (a pipeline's committer and its next batch, several databases) share
//! the helpers: one call's jobs may queue behind another's, but no job waits for work that
//! only a waiting thread would give, so no call waits forever, and the work of one may itself
//! call these functions. A call from a worker of another rayon pool (an application's) runs on
//! its own thread: waiting there would run that pool's queued jobs on its stack, which may
//! want locks it holds.

use parking_lot::{Condvar, Mutex};
use rayon_core::{ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The cores this process may use, asked once (the answer reads files under `/proc` and
/// `/sys` on Linux).
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The helper threads, started on first use; `None` on one core, or if they cannot be started
/// (then everything runs on the calling thread).
fn helpers() -> Option<&'static ThreadPool> {
    static HELPERS: OnceLock<Option<ThreadPool>> = OnceLock::new();
    HELPERS
        .get_or_init(|| {
            let n = cores().saturating_sub(1);
            if n == 0 {
                return None;
            }
            ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("sprig-helper-{i}"))
                .build()
                .ok()
        })
        .as_ref()
}

/// The helpers, if the calling thread may wait for them: not from a worker of another rayon
/// pool (see the module's doc).
fn helpers_here() -> Option<&'static ThreadPool> {
    let pool = helpers()?;
    let foreign = rayon_core::current_thread_index().is_some() && pool.current_thread_index().is_none();
    (!foreign).then_some(pool)
}

/// `f` of every item, in the items' order: on every core when there are at least `min` items
/// (in chunks each core claims as it is free, the calling thread among them), else on the
/// calling thread. A panic is resumed on the calling thread.
pub(crate) fn map_on_cores<T: Sync, R: Send>(
    items: &[T],
    min: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let mut parts = map_shares_on_cores(items, min, |share| share.iter().map(&f).collect());
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    let mut out: Vec<R> = Vec::with_capacity(items.len());
    for part in parts {
        out.extend(part);
    }
    out
}

/// Chunks a parallel map cuts its items into per core: a core that finishes early claims
/// another instead of waiting. With one half per core, the calling thread of a transfer batch's
/// rewrite sat idle 10–20 ms a batch while the helper finished its half.
const CHUNKS_PER_CORE: usize = 8;

/// `f` of consecutive shares of the items, in the items' order: when there are at least `min`
/// items, [`CHUNKS_PER_CORE`] shares per core, which the calling thread and the helpers claim
/// one at a time as each is free (if the helpers are busy with other work, the calling thread
/// runs them all rather than wait); else one share of them all on the calling thread; none for
/// no items. For work whose items share what they produce (one buffer a share instead of one
/// an item). A panic in a share is resumed on the calling thread.
pub(crate) fn map_shares_on_cores<T: Sync, S: Send>(
    items: &[T],
    min: usize,
    f: impl Fn(&[T]) -> S + Sync,
) -> Vec<S> {
    if items.is_empty() {
        return Vec::new();
    }
    let pool = helpers_here().filter(|_| items.len() >= min.max(2));
    let Some(pool) = pool else {
        return vec![f(items)];
    };
    let chunk = items.len().div_ceil(cores() * CHUNKS_PER_CORE);
    let shares: Vec<&[T]> = items.chunks(chunk).collect();
    let done: Vec<Mutex<Option<S>>> = shares.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let claim = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let (Some(share), Some(slot)) = (shares.get(i), done.get(i)) else {
            break;
        };
        let out = f(share);
        if slot.lock().replace(out).is_some() {
            unreachable!("invariant broken: a share claimed twice");
        }
    };
    let claim = &claim;
    pool.in_place_scope(|s| {
        for _ in 1..cores() {
            s.spawn(move |_| claim());
        }
        claim();
    });
    // The scope returns once every spawned claimer has run, or resumes its panic.
    done.into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|| unreachable!("invariant broken: a share did not run"))
        })
        .collect()
}

/// `a()` and `b()`, on two cores when `parallel` and there are two (`a` on a helper thread,
/// `b` on the calling one), else one after the other. A panic in `a` is resumed on the
/// calling thread (once `b` is done).
pub(crate) fn both<A: Send, B>(
    parallel: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (A, B) {
    let Some(pool) = helpers_here().filter(|_| parallel) else {
        let a = a();
        return (a, b());
    };
    let mut done_a = None;
    let done_b = pool.in_place_scope(|s| {
        s.spawn(|_| done_a = Some(a()));
        b()
    });
    match done_a {
        Some(a) => (a, done_b),
        // The scope returns once the spawned `a` has run, or resumes its panic.
        None => unreachable!("invariant broken: the helper's computation did not run"),
    }
}

/// `a()` offered to a helper core while the calling thread runs `b()`, when `parallel` and
/// there are two cores; if no helper has started `a` by the time `b` is done (they are busy
/// with another call's work, such as a pipeline's next batch), the calling thread runs it
/// itself rather than wait for one. `a` owns what it uses (`'static`): it is handed over
/// without a scope, which would wait for a helper to take it even once it is not needed. A
/// panic in `a` is resumed on the calling thread.
pub(crate) fn beside<A: Send + 'static, B>(
    parallel: bool,
    a: impl FnOnce() -> A + Send + 'static,
    b: impl FnOnce() -> B,
) -> (A, B) {
    let Some(pool) = helpers_here().filter(|_| parallel) else {
        let a = a();
        return (a, b());
    };
    let shared = Arc::new(Offered {
        job: Mutex::new(Some(a)),
        result: Mutex::new(None),
        done: Condvar::new(),
    });
    let theirs = shared.clone();
    pool.spawn(move || {
        let job = theirs.job.lock().take();
        if let Some(f) = job {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            *theirs.result.lock() = Some(result);
            theirs.done.notify_all();
        }
    });
    let done_b = b();
    let mine = shared.job.lock().take();
    let done_a = match mine {
        Some(f) => f(),
        None => {
            let mut result = shared.result.lock();
            let result = loop {
                if let Some(r) = result.take() {
                    break r;
                }
                shared.done.wait(&mut result);
            };
            result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }
    };
    (done_a, done_b)
}

/// A computation [`beside`] offers to the helpers: taken by whoever starts it first.
struct Offered<F, A> {
    job: Mutex<Option<F>>,
    result: Mutex<Option<std::thread::Result<A>>>,
    done: Condvar,
}

/// `f` of every index `feed` hands out (each at most once, all below `n`), run on the other
/// cores while `feed` runs on the calling thread, which, once `feed` returns, runs those no
/// helper has started yet: for work that becomes ready piece by piece, such as regions whose
/// pages arrive from the SSD. Returns `feed`'s result and each index's `f` (`None` for an
/// index never handed out). On one core every `f` runs on the calling thread after `feed`. A
/// panic in a helper is resumed on the calling thread; an index handed out twice is a broken
/// invariant (a panic).
///
/// Each index is a job of its own that whoever starts it first (a helper, or the calling
/// thread at the end) claims: no helper waits for the feeding.
pub(crate) fn as_fed<X, R: Send>(
    n: usize,
    feed: impl FnOnce(&mut dyn FnMut(usize)) -> X,
    f: impl Fn(usize) -> R + Sync,
) -> (X, Vec<Option<R>>) {
    let mut fed = vec![false; n];
    let mut check = |i: usize| match fed.get_mut(i) {
        Some(seen @ false) => *seen = true,
        Some(true) => panic!("invariant broken: index {i} handed out twice"),
        None => panic!("invariant broken: index {i} handed out of {n}"),
    };
    let out: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let claimed: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    // Run index `i` unless someone has.
    let run = |i: usize| {
        if let (Some(claim), Some(slot)) = (claimed.get(i), out.get(i)) {
            if !claim.swap(true, Ordering::AcqRel) {
                *slot.lock() = Some(f(i));
            }
        }
    };
    let run = &run;
    let x = match helpers_here() {
        None => {
            let mut ready = Vec::new();
            let x = feed(&mut |i| {
                check(i);
                ready.push(i);
            });
            ready.into_iter().for_each(run);
            x
        }
        Some(pool) => pool.in_place_scope(|s| {
            let mut ready = Vec::new();
            let x = feed(&mut |i| {
                check(i);
                ready.push(i);
                s.spawn(move |_| run(i));
            });
            // Fed: the calling thread takes what no helper has started, the last fed first
            // (the helpers take the first).
            ready.into_iter().rev().for_each(run);
            x
        }),
    };
    (x, out.into_iter().map(Mutex::into_inner).collect())
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

    /// Shares cover the items once, in order, `CHUNKS_PER_CORE` per core at most (one below
    /// `min`).
    #[test]
    fn shares_cover_the_items_in_order() {
        for n in [0usize, 1, 2, 3, 63, 64, 1000] {
            let items: Vec<usize> = (0..n).collect();
            for min in [1, 64] {
                let shares = map_shares_on_cores(&items, min, |s| s.to_vec());
                assert!(
                    shares.len() <= cores().max(1) * CHUNKS_PER_CORE,
                    "{n} {min}: {} shares",
                    shares.len()
                );
                if n < min.max(2) {
                    assert!(shares.len() <= 1, "{n} {min}: split below the minimum");
                }
                assert!(shares.iter().all(|s| !s.is_empty()), "{n} {min}: an empty share");
                assert_eq!(shares.concat(), items, "{n} {min}");
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

    /// `beside` gives both results and resumes a panic of `a`; with every helper busy, the
    /// calling thread runs `a` itself once `b` is done instead of waiting for a helper (before,
    /// `both` waited for one to take it).
    #[test]
    fn beside_runs_the_offered_work_itself_when_the_helpers_are_busy() {
        for parallel in [false, true] {
            let items: Vec<u64> = (0..100).collect();
            let (a, b) = beside(parallel, move || items.iter().sum::<u64>(), || 7);
            assert_eq!((a, b), (4950, 7));
        }
        let caught = std::panic::catch_unwind(|| beside(true, || panic!("in a"), || 1));
        assert!(caught.is_err());

        let pool = helpers().expect("this test needs a helper thread (two or more cores)");
        let threads = pool.current_num_threads();
        let release = Arc::new(AtomicBool::new(false));
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..threads {
            let (release, started) = (release.clone(), started.clone());
            pool.spawn(move || {
                started.fetch_add(1, Ordering::SeqCst);
                // Busy until released, or for 5 s (so a `beside` that waits for a helper ends,
                // and fails the assertions below, instead of hanging).
                let busy_until = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while !release.load(Ordering::SeqCst) && std::time::Instant::now() < busy_until {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            });
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while started.load(Ordering::SeqCst) < threads {
            assert!(std::time::Instant::now() < deadline, "the helpers never became busy");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let here = std::thread::current().id();
        let asked = std::time::Instant::now();
        let (ran_on, ()) = beside(true, || std::thread::current().id(), || {});
        let took = asked.elapsed();
        release.store(true, Ordering::SeqCst);
        assert_eq!(ran_on, here, "run on the calling thread, not on a helper");
        assert!(took < std::time::Duration::from_secs(2), "waited {took:?} for a helper");
    }

    #[test]
    fn fed_work_runs_each_index_once_whatever_the_order() {
        for n in [0usize, 1, 2, 100, 1000] {
            // Handed out in a scrambled order, some not at all, with pauses between.
            let order: Vec<usize> = (0..n).map(|i| (i * 7919) % n.max(1)).collect();
            let skipped = |i: usize| i % 10 == 3;
            let (fed, out) = as_fed(
                n,
                |push| {
                    let mut count = 0;
                    for &i in order.iter().filter(|i| !skipped(**i)) {
                        if i % 97 == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        push(i);
                        count += 1;
                    }
                    count
                },
                |i| i * 3,
            );
            assert_eq!(fed, (0..n).filter(|i| !skipped(*i)).count(), "{n}");
            for (i, r) in out.iter().enumerate() {
                assert_eq!(*r, (!skipped(i)).then_some(i * 3), "{n}: index {i}");
            }
        }
    }

    #[test]
    fn a_panic_while_feeding_or_in_fed_work_reaches_the_caller() {
        let feeding = std::panic::catch_unwind(|| {
            as_fed(
                10,
                |push| {
                    push(1);
                    panic!("while feeding")
                },
                |i| i,
            )
        });
        assert!(feeding.is_err());
        let working = std::panic::catch_unwind(|| {
            as_fed(
                10,
                |push| (0..10).for_each(push),
                |i| assert!(i != 7, "index 7"),
            )
        });
        assert!(working.is_err());
        let twice = std::panic::catch_unwind(|| as_fed(3, |push| (0..4).for_each(|i| push(i % 3)), |i| i));
        assert!(twice.is_err());
    }

    /// Calls from several threads at once, and calls made from inside the work (also from the
    /// feeding), all finish: no helper waits for work that only a waiting thread would give.
    #[test]
    fn calls_from_several_threads_and_nested_calls_finish() {
        // Run beside a deadline: a deadlock fails the test instead of hanging it.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            several_threads_and_nested_calls();
            let _ = done.send(());
        });
        assert!(
            finished.recv_timeout(std::time::Duration::from_secs(120)).is_ok(),
            "the calls did not finish within 120 s (a deadlock) or one panicked"
        );
    }

    fn several_threads_and_nested_calls() {
        let items: Vec<usize> = (0..100).collect();
        let sum = |i: usize| map_on_cores(&items, 1, |x| x + i).iter().sum::<usize>();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let (fed, out) = as_fed(
                        200,
                        |push| {
                            (0..200).for_each(|i| {
                                if i % 50 == 0 {
                                    let (a, b) = both(true, || sum(0), || sum(1));
                                    assert_eq!((a, b), (4950, 5050));
                                }
                                push(i);
                            });
                            200
                        },
                        sum,
                    );
                    assert_eq!(fed, 200);
                    for (i, r) in out.into_iter().enumerate() {
                        assert_eq!(r, Some(4950 + 100 * i));
                    }
                });
            }
        });
    }

    /// Called from a worker of another rayon pool, everything runs on that thread (and gives
    /// the same results).
    #[test]
    fn a_worker_of_another_pool_runs_the_work_itself() {
        let other = rayon_core::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (threads, out) = other.install(|| {
            let me = std::thread::current().id();
            let items: Vec<usize> = (0..1000).collect();
            let out = map_on_cores(&items, 1, |i| (std::thread::current().id(), i * 2));
            let (a, b) = both(true, || std::thread::current().id(), || 0);
            let all_here = out.iter().all(|(t, _)| *t == me) && a == me && b == 0;
            (all_here, out.into_iter().map(|(_, v)| v).collect::<Vec<_>>())
        });
        assert!(threads, "work left the other pool's worker");
        assert_eq!(out, (0..1000).map(|i| i * 2).collect::<Vec<_>>());
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
