//! Power loss at every step of a workload over several tables: tables created and dropped,
//! batches writing three tables at once (inline values, value-log values, upserts), explicit
//! and automatic checkpoints, cleaning. For every step (each write, sync, creation, rename and
//! removal of the fault-injecting storage) and every crash mode, the database reopened from
//! what survived must hold exactly the last acknowledged commit or the one in flight, in every
//! table at once (each table's root and values, the database root, the table list), never a
//! mix; and it must then take a commit that survives a further power loss. An incremental
//! union runs through it too (started, stepped while its inputs change, checkpointed,
//! completed): at every crash point its table serves the union's values, and a union caught
//! in progress completes after recovery to the union's root.
//!
//! Replay a failure with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite table_crash_points::`.

use crate::common;

use common::{assert_no_failures, test_seed};
use sprig::io::{CrashMode, FaultStorage, Storage};
use sprig::{Db, Hasher, KeyPath, Options, Table, TableOptions};
use sprig_core::{TablesModel, DEFAULT_TABLE};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

fn options() -> Options {
    Options {
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 24 << 10,
        max_space_amplification: 1.3,
        page_cache_bytes: 0,
        ..Options::default()
    }
}

fn keys(seed: u64) -> Vec<KeyPath> {
    (0..90u64)
        .map(|i| Hasher::Blake3.hash_value(&(seed ^ i.wrapping_mul(0x9e37)).to_le_bytes()))
        .collect()
}

/// One step of the workload.
#[derive(Clone, Debug)]
enum Step {
    Create(&'static str, Option<&'static str>),
    Drop(&'static str),
    /// A batch: (table, key index, put value or upsert value).
    Batch(Vec<(&'static str, usize, Change)>),
    Checkpoint,
    Clean,
    /// A new table: the union of two, left-biased.
    Union(&'static str, &'static str, &'static str),
    /// An incremental union of two, left-biased.
    StartUnion(&'static str, &'static str, &'static str),
    /// A step of an incremental union (`u64::MAX`: to completion).
    Supply(&'static str, u64),
}

#[derive(Clone, Debug)]
enum Change {
    Put(Vec<u8>),
    Delete,
    Upsert(Vec<u8>),
}

fn workload(seed: u64) -> Vec<Step> {
    let mut steps = vec![
        Step::Create("utxo", None),
        Step::Create("stake", Some("add-u64")),
    ];
    for round in 0..7u64 {
        let mut batch = Vec::new();
        for i in 0..90usize {
            let r =
                (seed.wrapping_add(round * 131 + i as u64)).wrapping_mul(0x2545F4914F6CDD1D) >> 40;
            match r % 6 {
                0 => batch.push((
                    DEFAULT_TABLE,
                    i,
                    Change::Put(vec![round as u8; 1 + (r % 50) as usize]),
                )),
                1 => batch.push((
                    "utxo",
                    i,
                    Change::Put(vec![i as u8; if r.is_multiple_of(11) { 1800 } else { 20 }]),
                )),
                2 => batch.push(("stake", i, Change::Upsert((r % 100).to_le_bytes().to_vec()))),
                3 if round > 2 => batch.push(("utxo", i, Change::Delete)),
                _ => {}
            }
        }
        if round >= 5 {
            batch.retain(|(t, _, _)| *t != "utxo");
            for i in 0..20usize {
                batch.push(("rewards", i, Change::Upsert(vec![round as u8])));
            }
        }
        steps.push(Step::Batch(batch));
        match round {
            1 => steps.push(Step::Checkpoint),
            4 => {
                steps.push(Step::Drop("utxo"));
                steps.push(Step::Create("rewards", Some("concat")));
            }
            5 => {
                steps.push(Step::Clean);
                steps.push(Step::StartUnion("inc", "stake", "rewards"));
                steps.push(Step::Supply("inc", 10));
            }
            6 => {
                steps.push(Step::Supply("inc", 10));
                steps.push(Step::Checkpoint);
                steps.push(Step::Union("merged", "stake", "rewards"));
                steps.push(Step::Supply("inc", u64::MAX));
            }
            _ => {}
        }
    }
    steps
}

/// The states the workload acknowledged, in order, and the one in flight when it stopped.
struct Run {
    acked: Vec<(u64, TablesModel)>,
    in_flight: Option<(u64, TablesModel)>,
    error: Option<String>,
}

fn apply(model: &mut TablesModel, step: &Step, keys: &[KeyPath]) {
    match step {
        Step::Create(name, _) => {
            model.create(name);
        }
        Step::Drop(name) => {
            model.drop_table(name);
        }
        Step::Batch(changes) => {
            for (table, k, c) in changes {
                let m = model.table_mut(table).unwrap();
                match c {
                    Change::Put(v) => {
                        m.insert(keys[*k], v.clone());
                    }
                    Change::Delete => {
                        m.remove(&keys[*k]);
                    }
                    Change::Upsert(v) => {
                        let new = match (m.get(&keys[*k]), *table) {
                            (None, _) => v.clone(),
                            (Some(old), "stake") => u64::from_le_bytes(old.try_into().unwrap())
                                .saturating_add(u64::from_le_bytes(
                                    v.as_slice().try_into().unwrap(),
                                ))
                                .to_le_bytes()
                                .to_vec(),
                            (Some(old), _) => [old, v.as_slice()].concat(),
                        };
                        m.insert(keys[*k], new);
                    }
                }
            }
        }
        Step::Checkpoint | Step::Clean => {}
        // A step changes no value a lookup sees; the last one completes the union.
        Step::Supply(name, n) => {
            if *n == u64::MAX {
                model.set_pending(name, false);
            }
        }
        Step::Union(name, a, b) | Step::StartUnion(name, a, b) => {
            let mut entries: Vec<(KeyPath, Vec<u8>)> = Vec::new();
            for input in [b, a] {
                entries.extend(
                    model
                        .table(input)
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (*k, v.to_vec())),
                );
            }
            model.create(name);
            let m = model.table_mut(name).unwrap();
            for (k, v) in entries {
                m.insert(k, v);
            }
            if matches!(step, Step::StartUnion(..)) && !m.is_empty() {
                model.set_pending(name, true);
            }
        }
    }
}

fn run_step(db: &Db, step: &Step, keys: &[KeyPath]) -> sprig::Result<()> {
    match step {
        Step::Create(name, resolver) => db
            .create_table(
                name,
                TableOptions {
                    resolver: resolver.map(String::from),
                },
            )
            .map(|_| ()),
        Step::Drop(name) => db.drop_table(name).map(|_| ()),
        Step::Batch(changes) => {
            let mut b = db.begin();
            for (table, k, c) in changes {
                let t = db.table(table)?;
                match c {
                    Change::Put(v) => b.put_in(&t, keys[*k], v.clone())?,
                    Change::Delete => b.delete_in(&t, keys[*k])?,
                    Change::Upsert(v) => b.upsert_in(&t, keys[*k], v.clone())?,
                }
            }
            db.commit(b.finish()?).map(|_| ())
        }
        Step::Checkpoint => db.checkpoint(),
        Step::Union(name, a, b) => db
            .union(
                name,
                &[&db.table(a)?, &db.table(b)?],
                TableOptions::default(),
            )
            .map(|_| ()),
        Step::StartUnion(name, a, b) => db
            .start_union(
                name,
                &[&db.table(a)?, &db.table(b)?],
                TableOptions::default(),
            )
            .map(|_| ()),
        Step::Supply(name, n) => {
            let w = db.supply_union_work(&db.table(name)?, *n)?;
            assert_eq!(w.remaining == 0, *n == u64::MAX, "{w:?}");
            Ok(())
        }
        Step::Clean => db.clean().map(|_| ()),
    }
}

fn run(storage: &Arc<dyn Storage>, steps: &[Step], keys: &[KeyPath]) -> Run {
    let mut out = Run {
        acked: Vec::new(),
        in_flight: None,
        error: None,
    };
    let db = match Db::open_with_storage(storage.clone(), options()) {
        Ok(db) => db,
        Err(e) => {
            out.error = Some(format!("create: {e}"));
            return out;
        }
    };
    let mut model = TablesModel::new(db.hasher());
    out.acked.push((db.seq(), model.clone()));
    for step in steps {
        let mut next = model.clone();
        apply(&mut next, step, keys);
        let changes_state = !matches!(step, Step::Checkpoint | Step::Clean);
        let seq = db.seq() + u64::from(changes_state);
        out.in_flight = Some((seq, next.clone()));
        if let Err(e) = run_step(&db, step, keys) {
            out.error = Some(format!("{step:?}: {e}"));
            return out;
        }
        model = next;
        // A clean commits too, without changing any table.
        out.acked.push((db.seq(), model.clone()));
        out.in_flight = None;
    }
    out
}

/// Everything the database says against the model; a description of the first difference.
fn compare(db: &Db, model: &TablesModel, keys: &[KeyPath]) -> Result<(), String> {
    let view = db.view();
    if view.db_root() != model.root() {
        return Err("database root differs".into());
    }
    let mut names: Vec<String> = view
        .tables()
        .iter()
        .map(|t| t.table.name().to_string())
        .collect();
    names.sort();
    let mut want: Vec<String> = model.names().map(String::from).collect();
    want.sort();
    if names != want {
        return Err(format!("tables {names:?}, expected {want:?}"));
    }
    for name in model.names() {
        let t: Table = view.table(name).map_err(|e| e.to_string())?;
        let m = model.table(name).unwrap();
        let values = view.get_many_in(&t, keys).map_err(|e| e.to_string())?;
        for (k, v) in keys.iter().zip(values) {
            if v.as_deref() != m.get(k) {
                return Err(format!("{name}: value of {k:02x?} differs"));
            }
        }
        let debt = db.remaining_union_debt(&t).map_err(|e| e.to_string())?;
        if model.is_pending(name) != (debt > 0) {
            return Err(format!("{name}: union debt {debt}"));
        }
        if model.is_pending(name) {
            continue;
        }
        if view.table_root(&t).map_err(|e| e.to_string())? != m.root() {
            return Err(format!("root of {name} differs"));
        }
        let scanned = view.iter_in(&t).count();
        if scanned != m.len() {
            return Err(format!(
                "{name}: scan found {scanned} of {} entries",
                m.len()
            ));
        }
    }
    let report = db.check(&mut |_, _| {}).map_err(|e| e.to_string())?;
    if !report.is_clean() {
        return Err(format!("check: {:?}", report.problems));
    }
    Ok(())
}

fn explore(
    seed: u64,
    steps: &[Step],
    keys: &[KeyPath],
    step: u64,
    mode: CrashMode,
) -> Result<bool, String> {
    let s = FaultStorage::new(seed ^ step);
    s.set_crash_at(Some(step));
    let st: Arc<dyn Storage> = Arc::new(s.clone());
    let out = catch_unwind(AssertUnwindSafe(|| run(&st, steps, keys)))
        .map_err(|_| "the workload panicked".to_string())?;
    drop(st);
    if !s.has_crashed() {
        return Err("the workload finished before the crash point".into());
    }
    let image = s.crash(mode, seed.wrapping_mul(31).wrapping_add(step));
    let storage: Arc<dyn Storage> = Arc::new(image.clone());
    let db = match catch_unwind(AssertUnwindSafe(|| {
        Db::open_with_storage(storage.clone(), options())
    })) {
        Err(_) => return Err("opening after the crash panicked".into()),
        Ok(Err(e)) => return Err(format!("opening after the crash failed: {e}")),
        Ok(Ok(db)) => db,
    };
    // A crash before the database's creation finished leaves none: the open creates it.
    let empty = (0, TablesModel::new(db.hasher()));
    let (acked_seq, acked) = out.acked.last().unwrap_or(&empty);
    let matches = |(seq, m): &(u64, TablesModel)| db.seq() == *seq && db.db_root() == m.root();
    let (state, in_flight) = if matches(&(*acked_seq, acked.clone())) {
        (acked.clone(), false)
    } else if let Some(f) = out.in_flight.as_ref().filter(|f| matches(f)) {
        (f.1.clone(), true)
    } else {
        return Err(format!(
            "reopened at seq {} with database root matching neither acknowledged seq {} nor \
             the one in flight ({:?})",
            db.seq(),
            acked_seq,
            out.error
        ));
    };
    compare(&db, &state, keys)?;
    // A follow-up commit across two tables survives a further power loss.
    let mut next = state.clone();
    let mut b = db.begin();
    for (i, k) in keys.iter().enumerate().take(10) {
        b.put(*k, vec![0xee; i]).map_err(|e| e.to_string())?;
        next.table_mut(DEFAULT_TABLE)
            .unwrap()
            .insert(*k, vec![0xee; i]);
    }
    if let Ok(t) = db.table("stake") {
        b.upsert_in(&t, keys[0], 1u64.to_le_bytes().to_vec())
            .map_err(|e| e.to_string())?;
        apply(
            &mut next,
            &Step::Batch(vec![(
                "stake",
                0,
                Change::Upsert(1u64.to_le_bytes().to_vec()),
            )]),
            keys,
        );
    }
    let mut seq = db.seq();
    db.commit(b.finish().map_err(|e| e.to_string())?)
        .map_err(|e| format!("committing after recovery failed: {e}"))?;
    // A union caught in progress completes from where recovery left it.
    if next.is_pending("inc") {
        let t = db.table("inc").map_err(|e| e.to_string())?;
        db.supply_union_work(&t, u64::MAX)
            .map_err(|e| format!("completing the union after recovery: {e}"))?;
        next.set_pending("inc", false);
        seq += 1;
    }
    drop(db);
    let again: Arc<dyn Storage> = Arc::new(image.crash(CrashMode::DropUnsynced, 0));
    let db = Db::open_with_storage(again, options()).map_err(|e| format!("second reopen: {e}"))?;
    if db.seq() != seq + 1 {
        return Err(format!("the follow-up commit was lost (seq {})", db.seq()));
    }
    compare(&db, &next, keys).map_err(|e| format!("after the follow-up commit: {e}"))?;
    Ok(in_flight)
}

#[test]
fn every_crash_point_of_a_multi_table_workload_recovers_one_committed_version() {
    let seed = test_seed("table_crash_points", 20261123);
    for seed in [seed, seed.wrapping_add(1)] {
        explore_all(seed);
    }
}

fn explore_all(seed: u64) {
    let keys = keys(seed);
    let steps = workload(seed);
    let reference = FaultStorage::new(seed);
    reference.record_trace(true);
    let st: Arc<dyn Storage> = Arc::new(reference.clone());
    let out = run(&st, &steps, &keys);
    assert_eq!(out.error, None, "the workload fails without a crash");
    assert!(out.acked.len() > steps.len(), "every step acknowledged");
    let trace = reference.trace();
    let mut failures = Vec::new();
    let mut in_flight_recovered = 0;
    let mut explored = 0;
    for (step, (kind, file)) in trace.iter().enumerate() {
        for mode in CrashMode::ALL {
            explored += 1;
            match explore(seed, &steps, &keys, step as u64, mode) {
                Ok(true) => in_flight_recovered += 1,
                Ok(false) => {}
                Err(why) => failures.push(format!(
                    "seed {seed}, step {step} ({kind:?} {file}), {mode:?}: {why}"
                )),
            }
        }
    }
    println!(
        "{} steps, {explored} crash points, in-flight commit recovered {in_flight_recovered} times, {} failures",
        trace.len(),
        failures.len()
    );
    assert_no_failures(&failures);
}
