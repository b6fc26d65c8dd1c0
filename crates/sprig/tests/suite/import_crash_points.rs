//! An import (`Db::import_sorted`) is atomic under power loss: on the fault-injecting storage
//! a database takes one commit, then imports a sorted stream (new keys, overwrites inline and
//! in the value log, deletes) with the smallest budget, so the import writes pages and values
//! over several rounds, fills and opens segments, merges sparse regions and is followed by an
//! automatic checkpoint. The storage "loses power" at every step of the import — each write,
//! sync, directory sync and file creation — in each crash mode; the database reopened from what
//! survived must hold exactly the state before the import or the state after it (root, count,
//! every value, scan, proofs, `Db::check`), and take a new commit that survives a further
//! power loss. A failed write or sync during an import poisons the database like a commit's,
//! and the reopened database holds the state before it.
//!
//! Replay a failure with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite import_crash_points::`.

use crate::common;

use common::{
    assert_no_failures, commit_changes, compare_many, follow_up_batch, options, test_seed,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::{CrashMode, Fault, FaultKind, FaultStorage, OpClass, Storage};
use sprig::{Db, Error, Hasher, ImportOptions, KeyPath, MIN_IMPORT_MEMORY_BYTES};
use sprig_core::ReferenceModel;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

type Changes = Vec<(KeyPath, Option<Vec<u8>>)>;

/// The commit before the import, the import, and every key they touch.
struct Workload {
    base: Changes,
    import: Changes,
    keys: Vec<KeyPath>,
}

fn key(rng: &mut ChaCha8Rng) -> KeyPath {
    let mut k = [0u8; 32];
    rng.fill(&mut k);
    k
}

/// Inline values large enough that a few thousand changes fill the budget several times;
/// one in ten for the value log.
fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = if rng.gen_ratio(1, 10) {
        rng.gen_range(1100..6000)
    } else {
        rng.gen_range(200..900)
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

fn workload(seed: u64) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let base: Changes = (0..400)
        .map(|_| (key(&mut rng), Some(value(&mut rng))))
        .collect();
    let mut import: BTreeMap<KeyPath, Option<Vec<u8>>> = BTreeMap::new();
    // New keys, none in the first 16th of the key space.
    for _ in 0..1600 {
        let mut k = key(&mut rng);
        k[0] |= 0x10;
        import.insert(k, Some(value(&mut rng)));
    }
    // Overwrites and deletes of old keys; every old key in the first 16th is deleted, so its
    // regions empty out and merge.
    for (i, (k, _)) in base.iter().enumerate() {
        if k[0] < 0x10 || i % 4 == 1 {
            import.insert(*k, None);
        } else if i % 4 == 0 {
            import.insert(*k, Some(value(&mut rng)));
        }
    }
    let mut keys: Vec<KeyPath> = base.iter().map(|(k, _)| *k).collect();
    keys.extend(import.keys().copied());
    keys.sort_unstable();
    keys.dedup();
    Workload {
        base,
        import: import.into_iter().collect(),
        keys,
    }
}

fn model_of(changes: &[&Changes]) -> ReferenceModel {
    let mut model = ReferenceModel::new(Hasher::Blake3);
    for c in changes {
        for (k, v) in c.iter() {
            match v {
                Some(v) => model.insert(*k, v.clone()),
                None => model.remove(k),
            };
        }
    }
    model
}

fn budget() -> ImportOptions {
    ImportOptions {
        memory_bytes: MIN_IMPORT_MEMORY_BYTES,
    }
}

fn storage(s: &FaultStorage) -> Arc<dyn Storage> {
    Arc::new(s.clone())
}

/// Create the database and commit the base; `Err` says what failed.
fn prepare(storage: &Arc<dyn Storage>, w: &Workload) -> Result<Db, String> {
    let db = Db::open_with_storage(storage.clone(), options()).map_err(|e| e.to_string())?;
    let empty = ReferenceModel::new(Hasher::Blake3);
    commit_changes(&db, &empty, &w.base).map_err(|e| e.to_string())?;
    Ok(db)
}

fn import(db: &Db, w: &Workload) -> Result<sprig::CommitInfo, Error> {
    db.import_sorted(w.import.iter().cloned().map(Ok), &budget())
}

/// Crash at `step` in `mode`, reopen, check; returns which state survived ("before"/"after").
fn explore(
    seed: u64,
    w: &Workload,
    step: u64,
    mode: CrashMode,
    states: &[(u64, &ReferenceModel); 2],
) -> Result<&'static str, String> {
    let s = FaultStorage::new(seed ^ step);
    s.set_crash_at(Some(step));
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let db = prepare(&storage(&s), w)?;
        Ok::<_, String>(import(&db, w).is_ok())
    }))
    .map_err(|_| "the workload panicked".to_string())??;
    if !s.has_crashed() {
        return Err(format!(
            "the import finished before the crash (succeeded: {outcome})"
        ));
    }
    let image = s.crash(mode, seed.wrapping_mul(31).wrapping_add(step));
    let db = catch_unwind(AssertUnwindSafe(|| {
        Db::open_with_storage(storage(&image), options())
    }))
    .map_err(|_| "opening after the crash panicked".to_string())?
    .map_err(|e| format!("opening after the crash failed: {e}"))?;
    let Some((name, (seq, model))) = ["before", "after"]
        .into_iter()
        .zip(states.iter())
        .find(|(_, (seq, model))| db.seq() == *seq && db.root() == model.root())
    else {
        return Err(format!(
            "reopened at seq {} with a root matching neither the state before the import \
             nor after it",
            db.seq()
        ));
    };
    match compare_many(&db, model, &w.keys) {
        Ok(None) => {}
        Ok(Some(diff)) => return Err(format!("the state {name} the import is a mix: {diff}")),
        Err(e) => return Err(format!("reading after recovery failed: {e}")),
    }
    // The recovered database takes a new commit, which survives a further power loss.
    let changes = follow_up_batch(seed ^ step, &w.keys);
    let next = commit_changes(&db, model, &changes)
        .map_err(|e| format!("committing after recovery failed: {e}"))?;
    drop(db);
    let again = image.crash(CrashMode::DropUnsynced, 0);
    let db = Db::open_with_storage(storage(&again), options())
        .map_err(|e| format!("second reopen failed: {e}"))?;
    if db.seq() != seq + 1 {
        return Err(format!(
            "the commit acknowledged after recovery was lost (seq {})",
            db.seq()
        ));
    }
    match compare_many(&db, &next, &w.keys) {
        Ok(None) => Ok(name),
        Ok(Some(diff)) => Err(format!("after the follow-up commit: {diff}")),
        Err(e) => Err(format!("reading after the follow-up commit failed: {e}")),
    }
}

#[test]
fn a_crash_at_any_step_of_an_import_leaves_the_state_before_or_after_it() {
    let seed = test_seed("import_crash_points", 20261125);
    let w = workload(seed);
    let before = model_of(&[&w.base]);
    let after = model_of(&[&w.base, &w.import]);
    // A run without a crash: the steps the import takes.
    let reference = FaultStorage::new(seed);
    let db = prepare(&storage(&reference), &w).unwrap();
    let first = reference.stats().steps;
    let before_stats = db.stats();
    let info = import(&db, &w).unwrap();
    assert_eq!(info.root, after.root());
    let last = reference.stats().steps;
    let stats = db.stats();
    assert!(
        stats.page_merges > before_stats.page_merges
            && stats.checkpoints > before_stats.checkpoints,
        "the import merges sparse regions and is followed by a checkpoint: {stats:?}"
    );
    drop(db);
    let states = [(1, &before), (2, &after)];
    let (mut explored, mut survived) = (0u64, BTreeMap::<&str, u64>::new());
    let mut failures = Vec::new();
    for step in first..last {
        for mode in CrashMode::ALL {
            explored += 1;
            match explore(seed, &w, step, mode, &states) {
                Ok(name) => *survived.entry(name).or_default() += 1,
                Err(why) => failures.push(format!("step {step}, {mode:?}: {why}")),
            }
        }
    }
    println!(
        "import steps {first}..{last}: crash points explored {explored}, states recovered \
         {survived:?}, failures {}",
        failures.len()
    );
    assert_no_failures(&failures);
    assert!(
        survived.contains_key("before") && survived.contains_key("after"),
        "crashes recovered both states"
    );
}

#[test]
fn a_failed_write_or_sync_during_an_import_poisons_and_changes_nothing() {
    let seed = test_seed("import_crash_points io", 20261126);
    let w = workload(seed);
    let before = model_of(&[&w.base]);
    let reference = FaultStorage::new(seed);
    let db = prepare(&storage(&reference), &w).unwrap();
    let stats = reference.stats();
    import(&db, &w).unwrap();
    let end = reference.stats();
    drop(db);
    // The first and a middle write of the import, and its first sync.
    let faults = [
        (OpClass::Write, stats.writes),
        (OpClass::Write, (stats.writes + end.writes) / 2),
        (OpClass::Sync, stats.syncs),
    ];
    for (class, index) in faults {
        let s = FaultStorage::new(seed);
        let db = prepare(&storage(&s), &w).unwrap();
        s.add_fault(Fault {
            class,
            index,
            kind: FaultKind::Eio,
            persistent: false,
        });
        let err = import(&db, &w).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{class:?} {index}: {err}");
        assert_eq!(
            (db.seq(), db.root()),
            (1, before.root()),
            "{class:?} {index}"
        );
        let again = db.import_sorted(std::iter::empty(), &budget()).unwrap_err();
        assert!(
            matches!(again, Error::Poisoned(_)),
            "{class:?} {index}: {again}"
        );
        drop(db);
        s.clear_faults();
        let db = Db::open_with_storage(storage(&s), options()).unwrap();
        assert_eq!(db.seq(), 1, "{class:?} {index}");
        assert_eq!(
            compare_many(&db, &before, &w.keys).unwrap(),
            None,
            "{class:?} {index}"
        );
    }
}
