//! Crash simulation while a chain of stacked overlays is committed: a base batch is
//! committed, three batches are stacked as overlays on it (a block on a block on a block),
//! and the top is committed, which commits the whole chain, one version per link. Power is
//! lost at every step of the run, in each crash mode; the reopened database must hold exactly
//! one of the versions — the acknowledged base or a prefix of the chain with every link
//! complete — never a mix, and never less than what was acknowledged.
//!
//! Replay a failure with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite chain_crash_points::`.

use crate::common;

use common::{assert_no_failures, compare, options, test_seed, State};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::{CrashMode, FaultStorage, Storage};
use sprig::{Db, KeyPath, Pending};
use sprig_core::{Hasher, ReferenceModel};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

type Changes = Vec<(KeyPath, Option<Vec<u8>>)>;

/// The base batch and the three stacked batches, over `keys`.
fn batches(seed: u64, keys: &[KeyPath]) -> (Changes, Vec<Changes>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let value = |rng: &mut ChaCha8Rng| {
        // Mostly inline values, some in the value log.
        let len = if rng.gen_bool(0.2) { 3000 } else { 12 };
        (0..len).map(|_| rng.gen()).collect::<Vec<u8>>()
    };
    let base = keys.iter().map(|k| (*k, Some(value(&mut rng)))).collect();
    let links = (0..3)
        .map(|_| {
            (0..30)
                .map(|_| {
                    let k = keys[rng.gen_range(0..keys.len())];
                    let v = if rng.gen_bool(0.25) {
                        None
                    } else {
                        Some(value(&mut rng))
                    };
                    (k, v)
                })
                .collect()
        })
        .collect();
    (base, links)
}

fn apply(model: &mut ReferenceModel, changes: &Changes) {
    for (k, v) in changes {
        match v {
            Some(v) => model.insert(*k, v.clone()),
            None => model.remove(k),
        };
    }
}

/// Finish `changes` into an overlay on `on` (the head if `None`).
fn stack(db: &Db, on: Option<&Pending>, changes: &Changes) -> sprig::Result<Pending> {
    let mut batch = match on {
        Some(p) => p.begin()?,
        None => db.begin(),
    };
    for (k, v) in changes {
        match v {
            Some(v) => batch.put(*k, v.clone())?,
            None => batch.delete(*k),
        }
    }
    batch.finish()
}

/// Run the workload; returns the acknowledged seq (0 if the base commit was not
/// acknowledged). Every error after a crash is expected.
fn run(storage: Arc<dyn Storage>, base: &Changes, links: &[Changes]) -> u64 {
    let Ok(db) = Db::open_with_storage(storage, options()) else {
        return 0;
    };
    let Ok(p) = stack(&db, None, base) else {
        return 0;
    };
    let Ok(info) = db.commit(p) else { return 0 };
    let mut acked = info.seq;
    let mut top: Option<Pending> = None;
    for changes in links {
        match stack(&db, top.as_ref(), changes) {
            Ok(p) => top = Some(p),
            Err(_) => return acked,
        }
    }
    if let Some(top) = top {
        if let Ok(info) = db.commit(top) {
            acked = info.seq;
        }
    }
    acked
}

#[test]
fn a_crash_while_a_chain_commits_leaves_a_complete_prefix_of_it() {
    let seed = test_seed("chain_crash_points", 20261123);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let keys: Vec<KeyPath> = (0..60)
        .map(|_| {
            let mut k = [0u8; 32];
            rng.fill(&mut k);
            k
        })
        .collect();
    let (base, links) = batches(seed, &keys);
    // The states the database may hold: empty, the base, then each link of the chain.
    let mut states = vec![State {
        seq: 0,
        model: ReferenceModel::new(Hasher::Blake3),
    }];
    for changes in std::iter::once(&base).chain(links.iter()) {
        let mut model = states[states.len() - 1].model.clone();
        apply(&mut model, changes);
        states.push(State {
            seq: states.len() as u64,
            model,
        });
    }

    let reference = FaultStorage::new(seed);
    reference.record_trace(true);
    assert_eq!(run(Arc::new(reference.clone()), &base, &links), 4);
    let steps = reference.trace().len() as u64;

    let mut failures = Vec::new();
    let mut seen = [0u64; 5];
    for step in 0..steps {
        for mode in CrashMode::ALL {
            let s = FaultStorage::new(seed ^ step);
            s.set_crash_at(Some(step));
            let acked = catch_unwind(AssertUnwindSafe(|| run(Arc::new(s.clone()), &base, &links)))
                .unwrap_or_else(|_| panic!("step {step}: the workload panicked"));
            let image: Arc<dyn Storage> = Arc::new(s.crash(mode, seed.wrapping_add(step)));
            let db = match Db::open_with_storage(image, options()) {
                Ok(db) => db,
                Err(e) => {
                    failures.push(format!("step {step} {mode:?}: reopen failed: {e}"));
                    continue;
                }
            };
            let Some(state) = states.iter().find(|st| st.seq == db.seq()) else {
                failures.push(format!("step {step} {mode:?}: seq {}", db.seq()));
                continue;
            };
            if db.seq() < acked {
                failures.push(format!(
                    "step {step} {mode:?}: acknowledged seq {acked} lost (reopened at {})",
                    db.seq()
                ));
            }
            match compare(&db, &state.model, &keys) {
                Ok(None) => seen[state.seq as usize] += 1,
                Ok(Some(diff)) => {
                    failures.push(format!("step {step} {mode:?}: seq {}: {diff}", db.seq()))
                }
                Err(e) => failures.push(format!("step {step} {mode:?}: reading failed: {e}")),
            }
        }
    }
    println!(
        "{steps} steps × {} modes; recovered at seq 0..=4: {seen:?}; failures: {}",
        CrashMode::ALL.len(),
        failures.len()
    );
    assert_no_failures(&failures);
    // Crashes inside the chain commit recovered intermediate links too.
    assert!(seen[2] > 0 && seen[4] > 0, "{seen:?}");
}
