//! Readers during commits see exactly one committed version: a writer thread commits random
//! batches (inline and value-log values, deletes; automatic checkpoints and cleaning run with
//! them) on a real directory while reader threads take views and read them — single gets,
//! batched gets, proofs, range scans — some holding a view across many commits. Every view
//! must match, root and every value read, the model of the version it says it is; a value
//! from another version, or a root that changes under a view, fails the test.
//!
//! Replay with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite concurrent_readers::`.

use crate::common;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::{Db, Hasher, KeyPath, Options};
use sprig_core::ReferenceModel;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::RwLock;
use std::time::{Duration, Instant};

const COMMITS: u64 = 300;
const READERS: u64 = 3;

fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = if rng.gen_ratio(1, 8) {
        rng.gen_range(1100..6000)
    } else {
        rng.gen_range(0..80)
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

#[test]
fn readers_see_the_old_or_the_new_version_never_a_mix() {
    let seed = common::test_seed("concurrent_readers", 5);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            hasher: Some(Hasher::Blake3),
            page_cache_bytes: 64 << 10,
            segment_bytes: 1 << 20,
            checkpoint_log_bytes: 32 << 10,
            ..Options::default()
        },
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let keys: Arc<Vec<KeyPath>> = Arc::new(
        (0..600)
            .map(|_| {
                let mut k = [0u8; 32];
                rng.fill(&mut k);
                k
            })
            .collect(),
    );
    let states: Arc<RwLock<HashMap<u64, Arc<ReferenceModel>>>> = Arc::new(RwLock::new(
        HashMap::from([(0, Arc::new(ReferenceModel::new(Hasher::Blake3)))]),
    ));
    let done = Arc::new(AtomicBool::new(false));
    let views = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));

    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (db, keys, states, done) = (db.clone(), keys.clone(), states.clone(), done.clone());
            let (views, reads) = (views.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (r + 1));
                while !done.load(Ordering::Acquire) {
                    let view = db.view();
                    let seq = view.seq();
                    let model = states
                        .read()
                        .unwrap()
                        .get(&seq)
                        .cloned()
                        .unwrap_or_else(|| panic!("a view of unknown version {seq}"));
                    assert_eq!(view.root(), model.root(), "root of version {seq}");
                    // Some readers hold their view across many commits.
                    let rounds = if rng.gen_ratio(1, 10) { 20 } else { 1 };
                    for _ in 0..rounds {
                        for _ in 0..8 {
                            let k = keys[rng.gen_range(0..keys.len())];
                            let got = view.get(&k).unwrap();
                            assert_eq!(got.as_deref(), model.get(&k), "value at version {seq}");
                        }
                        let sample: Vec<KeyPath> = (0..16)
                            .map(|_| keys[rng.gen_range(0..keys.len())])
                            .collect();
                        let got = view.get_many(&sample).unwrap();
                        for (k, v) in sample.iter().zip(got) {
                            assert_eq!(v.as_deref(), model.get(k), "batched value at {seq}");
                        }
                        let k = sample[0];
                        view.path_proof(&k)
                            .unwrap()
                            .verify_value(db.hasher(), &model.root(), &k, model.get(&k))
                            .unwrap();
                        let (a, b) = (sample[1].min(sample[2]), sample[1].max(sample[2]));
                        let scanned: Vec<(KeyPath, Vec<u8>)> =
                            view.range(a..b).take(50).map(|e| e.unwrap()).collect();
                        let expected: Vec<(KeyPath, Vec<u8>)> = model
                            .iter()
                            .filter(|(k, _)| **k >= a && **k < b)
                            .take(50)
                            .map(|(k, v)| (*k, v.to_vec()))
                            .collect();
                        assert_eq!(scanned, expected, "range scan at version {seq}");
                        assert_eq!(view.root(), model.root(), "the root changed under a view");
                        reads.fetch_add(26, Ordering::Relaxed);
                        if rounds > 1 {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                    views.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    let started = Instant::now();
    let mut model = ReferenceModel::new(Hasher::Blake3);
    for _ in 0..COMMITS {
        let mut batch = db.begin();
        for _ in 0..rng.gen_range(1..40) {
            let k = keys[rng.gen_range(0..keys.len())];
            if rng.gen_ratio(1, 5) {
                model.remove(&k);
                batch.delete(k);
            } else {
                let v = value(&mut rng);
                model.insert(k, v.clone());
                batch.put(k, v).unwrap();
            }
        }
        let pending = batch.finish().unwrap();
        let seq = pending.base_seq() + 1;
        states.write().unwrap().insert(seq, Arc::new(model.clone()));
        let info = db.commit(pending).unwrap();
        assert_eq!((info.seq, info.root), (seq, model.root()));
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().expect("a reader failed");
    }
    let stats = db.stats();
    println!(
        "concurrency: {COMMITS} commits, {READERS} readers, {} views, {} reads, {} checkpoints, \
         segments deleted {}, in {:?}; failures 0",
        views.load(Ordering::Relaxed),
        reads.load(Ordering::Relaxed),
        stats.checkpoints,
        stats.segments_deleted,
        started.elapsed()
    );
    assert!(views.load(Ordering::Relaxed) > 0);
}
