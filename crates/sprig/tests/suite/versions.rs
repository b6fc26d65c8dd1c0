//! Retained versions: historical reads and proofs, and durable rollback — including across a
//! reopen, with value-log values, after the cleaner ran, and at every crash point of the
//! rollback itself.

use sprig::io::{CrashMode, FaultStorage, MemoryStorage, Storage};
use sprig::{Db, KeyPath, Options};
use sprig_core::ReferenceModel;
use std::sync::Arc;

fn options() -> Options {
    Options {
        retained_versions: 6,
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 16 << 10,
        ..Options::default()
    }
}

fn keys(n: u32) -> Vec<KeyPath> {
    (0..n)
        .map(|i| sprig::Hasher::Blake3.hash_value(&i.to_le_bytes()))
        .collect()
}

/// Commit `rounds` batches; returns the model after each commit, by sequence number.
fn commit_rounds(db: &Db, keys: &[KeyPath], rounds: u64) -> Vec<(u64, ReferenceModel)> {
    let mut model = ReferenceModel::new(db.hasher());
    for (k, v) in db.view().iter().map(|r| r.unwrap()) {
        model.insert(k, v);
    }
    let mut history = Vec::new();
    for round in 0..rounds {
        let mut b = db.begin();
        for (i, k) in keys.iter().enumerate() {
            let i = i as u64;
            match (i + round) % 5 {
                0 => {
                    b.delete(*k);
                    model.remove(k);
                }
                1 => {
                    // A value-log value, rewritten every round.
                    let v = vec![round as u8; 2000 + i as usize];
                    b.put(*k, v.clone()).unwrap();
                    model.insert(*k, v);
                }
                2 => {
                    let v = (i * 1000 + round).to_le_bytes().to_vec();
                    b.put(*k, v.clone()).unwrap();
                    model.insert(*k, v);
                }
                _ => {}
            }
        }
        let info = db.commit(b.finish().unwrap()).unwrap();
        assert_eq!(info.root, model.root());
        history.push((info.seq, model.clone()));
    }
    history
}

fn assert_state(db: &Db, model: &ReferenceModel, keys: &[KeyPath]) {
    let view = db.view();
    assert_eq!(view.root(), model.root());
    assert_eq!(view.len(), model.len() as u64);
    for (k, v) in keys.iter().zip(view.get_many(keys).unwrap()) {
        assert_eq!(v.as_deref(), model.get(k));
    }
    let report = db.check(&mut |_, _| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn historical_versions_read_and_prove_their_own_state() {
    let db = Db::open_in_memory(options()).unwrap();
    let keys = keys(300);
    let history = commit_rounds(&db, &keys, 10);
    let retained: Vec<u64> = db.versions().iter().map(|(s, _)| *s).collect();
    assert_eq!(retained, (5..=10).collect::<Vec<_>>());
    for (seq, model) in &history {
        match db.view_at(*seq) {
            Ok(view) => {
                assert!(retained.contains(seq));
                assert_eq!(view.root(), model.root());
                for k in keys.iter().step_by(7) {
                    assert_eq!(view.get(k).unwrap().as_deref(), model.get(k));
                    view.path_proof(k)
                        .unwrap()
                        .verify_value(db.hasher(), &model.root(), k, model.get(k))
                        .unwrap();
                }
                let w = view.witness(&keys[..40]).unwrap();
                w.verify(db.hasher(), &model.root()).unwrap();
            }
            Err(e) => {
                assert!(!retained.contains(seq));
                assert!(matches!(e, sprig::Error::NotRetained { .. }), "{e}");
            }
        }
    }
}

#[test]
fn rollback_is_a_durable_commit_and_the_database_goes_on() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let db = Db::open_with_storage(storage.clone(), options()).unwrap();
    let keys = keys(400);
    let history = commit_rounds(&db, &keys, 8);
    let (target_seq, target) = history[3].clone();
    db.clean().unwrap();
    let info = db.rollback_to(target_seq).unwrap();
    assert_eq!(info.seq, 9);
    assert_eq!(info.root, target.root());
    assert_state(&db, &target, &keys);
    // Rolling back to the latest version does nothing.
    assert_eq!(db.rollback_to(9).unwrap().seq, 9);
    assert!(db.rollback_to(1).is_err());

    drop(db);
    let db = Db::open_with_storage(storage.clone(), options()).unwrap();
    assert_state(&db, &target, &keys);
    // The versions in between are still readable, and the database takes new commits.
    assert_eq!(
        db.view_at(history[6].0).unwrap().root(),
        history[6].1.root()
    );
    let after = commit_rounds(&db, &keys, 3);
    let (_, last) = after.last().unwrap();
    for _ in 0..3 {
        db.clean().unwrap();
    }
    assert_state(&db, last, &keys);
    drop(db);
    let db = Db::open_with_storage(storage, options()).unwrap();
    assert_state(&db, last, &keys);
}

#[test]
fn a_crash_during_rollback_leaves_the_old_head_or_the_target() {
    let keys = keys(200);
    let sync_options = Options {
        checkpoint_log_bytes: 1 << 30,
        ..options()
    };
    // Count the steps of the rollback on a run without crash.
    let probe = FaultStorage::new(7);
    let (before_steps, models) = {
        let db = Db::open_with_storage(Arc::new(probe.clone()), sync_options.clone()).unwrap();
        let history = commit_rounds(&db, &keys, 5);
        let before = probe.stats().steps;
        db.rollback_to(history[1].0).unwrap();
        (before, history)
    };
    let total = probe.stats().steps;
    assert!(total > before_steps);
    let old_head = models.last().unwrap().1.root();
    let target = models[1].1.root();
    let mut explored = 0;
    for step in before_steps..=total {
        for mode in CrashMode::ALL {
            let s = FaultStorage::new(7);
            let db = Db::open_with_storage(Arc::new(s.clone()), sync_options.clone()).unwrap();
            commit_rounds(&db, &keys, 5);
            s.set_crash_at(Some(step));
            let acked = db.rollback_to(models[1].0).is_ok();
            drop(db);
            let image = s.crash(mode, step);
            let db = Db::open_with_storage(Arc::new(image), sync_options.clone()).unwrap();
            let root = db.root();
            assert!(
                root == target || (root == old_head && !acked),
                "step {step} {mode:?}: root is neither the old head nor the target (acked {acked})"
            );
            let report = db.check(&mut |_, _| {}).unwrap();
            assert!(report.is_clean(), "step {step}: {:?}", report.problems);
            explored += 1;
        }
    }
    println!("rollback crash points explored: {explored}");
    assert!(explored > 0);
}
