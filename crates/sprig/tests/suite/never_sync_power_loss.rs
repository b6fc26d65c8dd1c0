//! Power loss under `SyncPolicy::Never` at every step of a workload (commits with inline,
//! page-splitting and value-log values, deletes, checkpoints, a reopen, cleaning that deletes
//! segments), in each crash mode of the fault-injecting storage: commits may be lost (nothing
//! waited for them to reach the disk), but the reopened database must hold exactly the state
//! of some commit of the run — never corruption, never a mix — and keep working.
//!
//! Found by an outside tester: `Never` made a checkpoint durable (and deleted older logs)
//! while the segments it pointed at were never synced, so a power loss left a database whose
//! pages were gone.
//!
//! Replay a failure with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite never_sync_power_loss::`.

use crate::common;

use common::{commit_changes, compare, follow_up_batch, small_workload, test_seed, State};
use sprig::io::{CrashMode, FaultStorage, Storage};
use sprig::{Db, Options, SyncPolicy};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

fn options() -> Options {
    Options {
        sync: SyncPolicy::Never,
        ..common::options()
    }
}

fn storage(s: &FaultStorage) -> Arc<dyn Storage> {
    Arc::new(s.clone())
}

#[derive(Default)]
struct Tally {
    explored: u64,
    latest_kept: u64,
    older_kept: u64,
    failures: Vec<String>,
}

fn explore(
    seed: u64,
    workload: &common::Workload,
    step: u64,
    mode: CrashMode,
    tally: &mut Tally,
) -> Result<(), String> {
    let s = FaultStorage::new(seed ^ step);
    s.set_crash_at(Some(step));
    let out = catch_unwind(AssertUnwindSafe(|| {
        common::run_workload_with(&storage(&s), workload, &options())
    }))
    .map_err(|_| "the workload panicked".to_string())?;
    if !s.has_crashed() {
        return Err("the workload finished before the crash point".into());
    }
    let states: Vec<State> = out.states.clone();
    drop(out);
    let image = s.crash(mode, seed.wrapping_mul(31).wrapping_add(step));
    let db = catch_unwind(AssertUnwindSafe(|| {
        Db::open_with_storage(storage(&image), options())
    }))
    .map_err(|_| "opening after the power loss panicked".to_string())?
    .map_err(|e| format!("opening after the power loss failed: {e}"))?;
    let Some(recovered) = states
        .iter()
        .find(|st| st.seq == db.seq() && st.model.root() == db.root())
        .cloned()
    else {
        return Err(format!(
            "reopened at seq {} with a root matching no commit of the run",
            db.seq()
        ));
    };
    if states.last().is_some_and(|l| l.seq == recovered.seq) {
        tally.latest_kept += 1;
    } else {
        tally.older_kept += 1;
    }
    match catch_unwind(AssertUnwindSafe(|| {
        compare(&db, &recovered.model, &workload.keys)
    })) {
        Ok(Ok(None)) => {}
        Ok(Ok(Some(diff))) => return Err(format!("state at seq {}: {diff}", recovered.seq)),
        Ok(Err(e)) => return Err(format!("reading after recovery failed: {e}")),
        Err(_) => return Err("reading after recovery panicked".into()),
    }
    // It keeps working: a new commit, made durable by a checkpoint, survives another loss.
    let changes = follow_up_batch(seed ^ step, &workload.keys);
    let model = commit_changes(&db, &recovered.model, &changes)
        .map_err(|e| format!("committing after recovery failed: {e}"))?;
    db.checkpoint()
        .map_err(|e| format!("checkpoint after recovery failed: {e}"))?;
    drop(db);
    let again = image.crash(CrashMode::DropUnsynced, 0);
    let db = Db::open_with_storage(storage(&again), options())
        .map_err(|e| format!("second reopen failed: {e}"))?;
    if db.seq() != recovered.seq + 1 {
        return Err(format!(
            "the commit made durable by a checkpoint was lost (seq {} after reopening)",
            db.seq()
        ));
    }
    match compare(&db, &model, &workload.keys) {
        Ok(None) => Ok(()),
        Ok(Some(diff)) => Err(format!("after the follow-up commit: {diff}")),
        Err(e) => Err(format!("reading after the follow-up commit failed: {e}")),
    }
}

#[test]
fn power_loss_without_sync_keeps_some_commit_never_corruption() {
    let seed = test_seed("never_sync_power_loss", 20261123);
    let mut tally = Tally::default();
    for s in [seed, seed.wrapping_add(1)] {
        let workload = small_workload(s, 120);
        let reference = FaultStorage::new(s);
        reference.record_trace(true);
        let out = common::run_workload_with(&storage(&reference), &workload, &options());
        if let Some((op, e)) = &out.error {
            panic!("the workload fails without a crash, while {op}: {e}");
        }
        drop(out);
        let trace = reference.trace();
        for (step, (kind, file)) in trace.iter().enumerate() {
            for mode in CrashMode::ALL {
                tally.explored += 1;
                if let Err(why) = explore(s, &workload, step as u64, mode, &mut tally) {
                    tally.failures.push(format!(
                        "seed {s}, power loss at step {step} ({kind:?} {file}), {mode:?}: {why}"
                    ));
                }
            }
        }
    }
    println!(
        "power losses explored: {}, latest commit kept: {}, an older commit kept: {}, \
         failures: {}",
        tally.explored,
        tally.latest_kept,
        tally.older_kept,
        tally.failures.len()
    );
    for f in tally.failures.iter().take(20) {
        println!("  {f}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} power losses failed",
        tally.failures.len()
    );
}
