//! Named snapshots: a model test (saves, deletes, opens, restores, interleaved with commits
//! over two tables, cleaning, checkpoints and reopens; every open snapshot compared whole
//! with the state it saved: roots, every entry, proofs, a full page check), the space a
//! snapshot keeps and frees, damage to snapshot files (typed errors, never served), and a
//! power loss at every step of a workload that saves, restores and deletes snapshots.
//!
//! Replay a failure with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite snapshots::`.

use crate::common;

use common::{assert_no_failures, test_seed};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::{CrashMode, FaultStorage, MemoryStorage, Storage};
use sprig::{Db, Error, Hasher, KeyPath, Options, ReadView, TableOptions};
use std::collections::BTreeMap;
use std::sync::Arc;

type Model = [BTreeMap<KeyPath, Vec<u8>>; 2];
const TABLES: [&str; 2] = ["default", "utxo"];

fn options() -> Options {
    Options {
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 64 << 10,
        max_space_amplification: 1.3,
        page_cache_bytes: 1 << 20,
        retained_versions: 2,
        ..Options::default()
    }
}

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

/// Everything `view` says about both tables against `model`, and a full page check.
fn compare(view: &ReadView, model: &Model) -> Result<(), String> {
    for (t, name) in TABLES.iter().enumerate() {
        let table = view.table(name).map_err(|e| e.to_string())?;
        let got: Vec<(KeyPath, Vec<u8>)> = view
            .iter_in(&table)
            .collect::<sprig::Result<_>>()
            .map_err(|e| e.to_string())?;
        let want: Vec<(KeyPath, Vec<u8>)> = model[t].iter().map(|(k, v)| (*k, v.clone())).collect();
        if got != want {
            return Err(format!(
                "{name}: {} entries, expected {}",
                got.len(),
                want.len()
            ));
        }
        let root = view.table_root(&table).map_err(|e| e.to_string())?;
        for k in [key(0), key(7), want.first().map(|e| e.0).unwrap_or([3; 32])] {
            view.path_proof_in(&table, &k)
                .map_err(|e| e.to_string())?
                .verify_value(
                    Hasher::default(),
                    &root,
                    &k,
                    model[t].get(&k).map(|v| v.as_slice()),
                )
                .map_err(|e| format!("{name}: proof: {e}"))?;
        }
    }
    let report = view.check(&mut |_, _| {}).map_err(|e| e.to_string())?;
    if !report.is_clean() {
        return Err(format!("check: {:?}", report.problems));
    }
    Ok(())
}

fn random_batch(db: &Db, rng: &mut ChaCha8Rng, model: &mut Model, n: usize) {
    let mut b = db.begin();
    let utxo = db.table("utxo").unwrap();
    for _ in 0..n {
        let t = rng.gen_range(0..2usize);
        let k = key(rng.gen_range(0..3000));
        let table = if t == 0 {
            sprig::Table::default_table()
        } else {
            utxo.clone()
        };
        if rng.gen_bool(0.2) {
            b.delete_in(&table, k).unwrap();
            model[t].remove(&k);
        } else {
            let len = if rng.gen_bool(0.05) {
                3000
            } else {
                rng.gen_range(0..60)
            };
            let v = vec![rng.gen::<u8>(); len];
            b.put_in(&table, k, v.clone()).unwrap();
            model[t].insert(k, v);
        }
    }
    db.commit(b.finish().unwrap()).unwrap();
}

#[test]
fn snapshots_follow_the_model_through_commits_cleaning_checkpoints_and_reopens() {
    let seed = test_seed("snapshots model", 7);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let mut db = Db::open_with_storage(storage.clone(), options()).unwrap();
    db.create_table("utxo", TableOptions::default()).unwrap();
    let mut model: Model = Default::default();
    let mut saved: BTreeMap<String, (u64, sprig::Node, Model)> = BTreeMap::new();
    let mut restores = 0;
    for step in 0..220 {
        match rng.gen_range(0..100) {
            0..=49 => {
                let n = rng.gen_range(1..200);
                random_batch(&db, &mut rng, &mut model, n)
            }
            50..=59 => {
                let name = format!("s{}", rng.gen_range(0..6));
                match db.save_snapshot(&name) {
                    Ok(info) => {
                        assert!(!saved.contains_key(&name));
                        assert_eq!((info.seq, info.db_root), (db.seq(), db.db_root()));
                        saved.insert(name, (info.seq, info.db_root, model.clone()));
                    }
                    Err(Error::SnapshotExists(n)) => assert!(saved.contains_key(&n)),
                    Err(e) => panic!("save: {e}"),
                }
            }
            60..=66 => {
                let name = format!("s{}", rng.gen_range(0..6));
                match db.delete_snapshot(&name) {
                    Ok(()) => assert!(saved.remove(&name).is_some()),
                    Err(Error::NoSuchSnapshot(_)) => assert!(!saved.contains_key(&name)),
                    Err(e) => panic!("delete: {e}"),
                }
            }
            67..=76 => {
                for (name, (seq, root, m)) in &saved {
                    let view = db.open_snapshot(name).unwrap();
                    assert_eq!((view.seq(), view.db_root()), (*seq, *root));
                    compare(&view, m).unwrap_or_else(|e| panic!("step {step}, {name}: {e}"));
                }
            }
            77..=81 => {
                if let Some((name, (_, root, m))) =
                    saved.iter().nth(rng.gen_range(0..saved.len().max(1)))
                {
                    let info = db.restore_snapshot(name).unwrap();
                    assert_eq!(info.db_root, *root);
                    model = m.clone();
                    restores += 1;
                }
            }
            82..=89 => while db.clean().unwrap().is_some() {},
            90..=94 => db.checkpoint().unwrap(),
            _ => {
                drop(db);
                db = Db::open_with_storage(storage.clone(), options()).unwrap();
            }
        }
        compare(&db.view(), &model).unwrap_or_else(|e| panic!("step {step}, head: {e}"));
        let listed: Vec<String> = db.snapshots().into_iter().map(|s| s.name).collect();
        assert_eq!(listed, saved.keys().cloned().collect::<Vec<_>>());
    }
    assert!(
        restores > 0 && !saved.is_empty(),
        "the run restored nothing"
    );
}

#[test]
fn a_snapshot_keeps_its_segments_and_deleting_it_frees_them() {
    // Two databases take the same rewrites; one holds a snapshot of the first version.
    let (da, db_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let with = Db::open(da.path(), options()).unwrap();
    let without = Db::open(db_dir.path(), options()).unwrap();
    let write_all = |db: &Db, round: u8| {
        let mut b = db.begin();
        for i in 0..6000 {
            b.put(key(i), vec![round; 100]).unwrap();
        }
        db.commit(b.finish().unwrap()).unwrap();
        while db.clean().unwrap().is_some() {}
    };
    for db in [&with, &without] {
        write_all(db, 0);
    }
    with.save_snapshot("base").unwrap();
    for round in 1..8 {
        for db in [&with, &without] {
            write_all(db, round);
        }
    }
    let (held, baseline) = (with.stats().disk_bytes, without.stats().disk_bytes);
    assert!(
        held as f64 > baseline as f64 * 1.4,
        "the snapshot kept nothing: {held} bytes with it, {baseline} without"
    );
    let view = with.open_snapshot("base").unwrap();
    assert_eq!(view.get(&key(5)).unwrap(), Some(vec![0; 100]));
    assert!(view.check(&mut |_, _| {}).unwrap().is_clean());
    drop(view);
    with.delete_snapshot("base").unwrap();
    for round in 8..10 {
        for db in [&with, &without] {
            write_all(db, round);
        }
    }
    let (freed, baseline) = (with.stats().disk_bytes, without.stats().disk_bytes);
    assert!(
        freed as f64 <= baseline as f64 * 1.2,
        "deleting the snapshot freed too little: {held} bytes before, {freed} after \
         ({baseline} without a snapshot)"
    );
    assert!(matches!(
        with.open_snapshot("base"),
        Err(Error::NoSuchSnapshot(_))
    ));
}

#[test]
fn snapshot_names_and_misuse_are_clear_errors() {
    let db = Db::open_in_memory(options()).unwrap();
    for bad in ["", ".hidden", "a/b", "x y", &"n".repeat(65)] {
        assert!(
            matches!(db.save_snapshot(bad), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    db.save_snapshot("ok-1.2_x").unwrap();
    assert!(matches!(
        db.save_snapshot("ok-1.2_x"),
        Err(Error::SnapshotExists(_))
    ));
    assert!(matches!(
        db.delete_snapshot("nope"),
        Err(Error::NoSuchSnapshot(_))
    ));
    assert!(matches!(
        db.restore_snapshot("nope"),
        Err(Error::NoSuchSnapshot(_))
    ));
}

#[test]
fn damage_to_a_snapshot_file_is_a_typed_error_and_never_served() {
    let storage = FaultStorage::new(3);
    let st: Arc<dyn Storage> = Arc::new(storage.clone());
    let db = Db::open_with_storage(st.clone(), options()).unwrap();
    db.create_table("utxo", TableOptions::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut model: Model = Default::default();
    random_batch(&db, &mut rng, &mut model, 400);
    db.save_snapshot("good").unwrap();
    drop(db);
    let file = "snap-good.snap";
    let pristine = storage.file_bytes(file).unwrap();
    let len = pristine.len();
    let mut positions: Vec<usize> = (0..len.min(200)).collect();
    positions.extend((200..len).step_by(len / 150 + 1));
    positions.push(len - 1);
    for at in positions {
        let mask = 1u8 << (at % 8);
        storage.corrupt(file, at as u64, mask).unwrap();
        let db = Db::open_with_storage(st.clone(), options())
            .unwrap_or_else(|e| panic!("flip at {at}: the database does not open: {e}"));
        match db.open_snapshot("good") {
            Err(Error::Corruption { .. }) => {}
            Ok(_) => panic!("flip at {at}: a damaged snapshot was served"),
            Err(e) => panic!("flip at {at}: not a corruption error: {e}"),
        }
        let listed = db.snapshots();
        assert_eq!(listed.len(), 1, "flip at {at}");
        // A damaged header pins everything and can be deleted; the database goes on.
        if listed[0].damaged.is_some() {
            assert!(matches!(
                db.restore_snapshot("good"),
                Err(Error::Corruption { .. })
            ));
        }
        compare(&db.view(), &model).unwrap();
        drop(db);
        storage.corrupt(file, at as u64, mask).unwrap();
    }
    assert_eq!(storage.file_bytes(file).unwrap(), pristine);
    let db = Db::open_with_storage(st, options()).unwrap();
    compare(&db.open_snapshot("good").unwrap(), &model).unwrap();
}

/// One step of the crash workload.
#[derive(Clone, Debug)]
enum Step {
    Batch(u64),
    Save(&'static str),
    Delete(&'static str),
    Restore(&'static str),
    Clean,
    Checkpoint,
}

fn crash_workload() -> Vec<Step> {
    use Step::*;
    vec![
        Batch(1),
        Save("a"),
        Batch(2),
        Batch(3),
        Clean,
        Save("b"),
        Batch(4),
        Checkpoint,
        Delete("a"),
        Batch(5),
        Clean,
        Restore("b"),
        Batch(6),
        Delete("b"),
        Clean,
    ]
}

/// The model after `step`, given the model before and the saved snapshots.
fn apply(model: &mut Model, saved: &mut BTreeMap<&'static str, Model>, step: &Step) {
    match step {
        Step::Batch(round) => {
            let mut rng = ChaCha8Rng::seed_from_u64(*round);
            for _ in 0..150 {
                let t = rng.gen_range(0..2usize);
                let k = key(rng.gen_range(0..400));
                if rng.gen_bool(0.15) {
                    model[t].remove(&k);
                } else {
                    let len = if rng.gen_bool(0.05) {
                        2000
                    } else {
                        rng.gen_range(0..40)
                    };
                    model[t].insert(k, vec![*round as u8; len]);
                }
            }
        }
        Step::Save(name) => {
            saved.insert(name, model.clone());
        }
        Step::Delete(name) => {
            saved.remove(name);
        }
        Step::Restore(name) => *model = saved[name].clone(),
        Step::Clean | Step::Checkpoint => {}
    }
}

fn run_step(db: &Db, step: &Step) -> sprig::Result<()> {
    match step {
        Step::Batch(round) => {
            let mut rng = ChaCha8Rng::seed_from_u64(*round);
            let utxo = db.table("utxo")?;
            let mut b = db.begin();
            for _ in 0..150 {
                let t = rng.gen_range(0..2usize);
                let table = if t == 0 {
                    sprig::Table::default_table()
                } else {
                    utxo.clone()
                };
                let k = key(rng.gen_range(0..400));
                if rng.gen_bool(0.15) {
                    b.delete_in(&table, k)?;
                } else {
                    let len = if rng.gen_bool(0.05) {
                        2000
                    } else {
                        rng.gen_range(0..40)
                    };
                    b.put_in(&table, k, vec![*round as u8; len])?;
                }
            }
            db.commit(b.finish()?).map(|_| ())
        }
        Step::Save(name) => db.save_snapshot(name).map(|_| ()),
        Step::Delete(name) => db.delete_snapshot(name),
        Step::Restore(name) => db.restore_snapshot(name).map(|_| ()),
        Step::Clean => db.clean().map(|_| ()),
        Step::Checkpoint => db.checkpoint(),
    }
}

type State = (Model, BTreeMap<&'static str, Model>);

/// Run the workload; the states acknowledged (after creation and each step) and the one in
/// flight when it stopped.
fn run(storage: &Arc<dyn Storage>, steps: &[Step]) -> (Vec<State>, Option<State>) {
    let mut acked = Vec::new();
    let Ok(db) = Db::open_with_storage(storage.clone(), options()) else {
        return (acked, None);
    };
    if db.create_table("utxo", TableOptions::default()).is_err() {
        return (acked, None);
    }
    let mut state: State = Default::default();
    acked.push(state.clone());
    for step in steps {
        let mut next = state.clone();
        apply(&mut next.0, &mut next.1, step);
        if run_step(&db, step).is_err() {
            return (acked, Some(next));
        }
        state = next;
        acked.push(state.clone());
    }
    (acked, None)
}

fn matches(db: &Db, state: &State) -> Result<(), String> {
    compare(&db.view(), &state.0)?;
    let listed: Vec<String> = db.snapshots().into_iter().map(|s| s.name).collect();
    let want: Vec<String> = state.1.keys().map(|s| s.to_string()).collect();
    if listed != want {
        return Err(format!("snapshots {listed:?}, expected {want:?}"));
    }
    for (name, m) in &state.1 {
        let view = db.open_snapshot(name).map_err(|e| format!("{name}: {e}"))?;
        compare(&view, m).map_err(|e| format!("snapshot {name}: {e}"))?;
    }
    Ok(())
}

fn explore(steps: &[Step], step: u64, mode: CrashMode) -> Result<(), String> {
    let s = FaultStorage::new(step);
    s.set_crash_at(Some(step));
    let st: Arc<dyn Storage> = Arc::new(s.clone());
    let (acked, in_flight) = run(&st, steps);
    drop(st);
    if !s.has_crashed() {
        return Err("the workload finished before the crash point".into());
    }
    let image = s.crash(mode, step);
    let db = Db::open_with_storage(Arc::new(image.clone()), options())
        .map_err(|e| format!("reopening: {e}"))?;
    if db.table("utxo").is_err() {
        // The crash came before the table's creation was acknowledged.
        return if acked.is_empty() {
            Ok(())
        } else {
            Err("table lost".into())
        };
    }
    let last = acked.last().cloned().unwrap_or_default();
    let state = match (matches(&db, &last), in_flight) {
        (Ok(()), _) => last,
        (Err(_), Some(f)) if matches(&db, &f).is_ok() => f,
        (Err(why), _) => return Err(format!("neither acknowledged nor in flight: {why}")),
    };
    // What the snapshots hold survives cleaning after recovery, and another power loss.
    // Every key of both tables rewritten a few times, over several segments, so the cleaner
    // empties the old ones: only the pins keep what the snapshots read.
    let mut model = state.0.clone();
    let utxo = db.table("utxo").map_err(|e| e.to_string())?;
    for round in 0..4u8 {
        let mut b = db.begin();
        for i in 0..400 {
            for (t, table) in [sprig::Table::default_table(), utxo.clone()]
                .iter()
                .enumerate()
            {
                b.put_in(table, key(i), vec![round; 1000])
                    .map_err(|e| e.to_string())?;
                model[t].insert(key(i), vec![round; 1000]);
            }
        }
        db.commit(b.finish().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        while db.clean().map_err(|e| e.to_string())?.is_some() {}
    }
    drop(db);
    let again: Arc<dyn Storage> = Arc::new(image.crash(CrashMode::DropUnsynced, 0));
    let db = Db::open_with_storage(again, options()).map_err(|e| format!("second reopen: {e}"))?;
    matches(&db, &(model, state.1)).map_err(|e| format!("after cleaning and a reopen: {e}"))
}

#[test]
fn every_crash_point_of_saving_restoring_and_deleting_snapshots_recovers() {
    let seed = test_seed("snapshot crash points", 1);
    let steps = crash_workload();
    let reference = FaultStorage::new(seed);
    reference.record_trace(true);
    let st: Arc<dyn Storage> = Arc::new(reference.clone());
    let (acked, stopped) = run(&st, &steps);
    assert!(
        stopped.is_none() && acked.len() == steps.len() + 1,
        "the workload fails without a crash"
    );
    let trace = reference.trace();
    let mut failures = Vec::new();
    for (step, (kind, file)) in trace.iter().enumerate() {
        for mode in CrashMode::ALL {
            if let Err(why) = explore(&steps, step as u64, mode) {
                failures.push(format!("step {step} ({kind:?} {file}), {mode:?}: {why}"));
            }
        }
    }
    println!(
        "{} steps, {} crash points",
        trace.len(),
        trace.len() * CrashMode::ALL.len()
    );
    assert_no_failures(&failures);
}
