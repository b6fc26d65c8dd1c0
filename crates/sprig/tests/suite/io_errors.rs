//! I/O errors surface, poison, and leave a valid database: the small workload runs on the
//! fault-injecting storage with one fault — EIO, ENOSPC or a short write on the N-th write,
//! EIO on the N-th sync (which also loses the data it should have saved), on the N-th read or
//! on the N-th creation, rename or removal — transient or persistent, for every N the workload
//! reaches. Required for every injected fault:
//! - the API returns an `Err` (never a panic, never a silent wrong result), typed as I/O;
//! - after a failed write or sync the database refuses commits with `Error::Poisoned`;
//! - reopening (on the same files, and after a power loss) gives the last acknowledged commit
//!   or the one that failed, exactly, and takes new commits; and what a reopen served survives
//!   a power loss right after it.
//!
//! The one exception by design: a failed removal of an obsolete file (an old log, checkpoint
//! or empty segment) is ignored, as it only costs space; those are counted apart and the
//! state must still be right.
//!
//! Replay with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite io_errors::`.

use crate::common;

use common::{
    acked_and_in_flight, commit_changes, compare, follow_up_batch, options, run_workload,
    small_workload, test_seed, State, Workload,
};
use sprig::io::{CrashMode, Fault, FaultKind, FaultStorage, OpClass, StepKind, Storage};
use sprig::{Db, Error};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

#[derive(Default, Debug)]
struct Tally {
    runs: u64,
    injected: u64,
    surfaced: u64,
    ignored_removals: u64,
    poisoned_checked: u64,
    wrong_results: u64,
    panics: u64,
    failures: Vec<String>,
}

fn storage(s: &FaultStorage) -> Arc<dyn Storage> {
    Arc::new(s.clone())
}

/// Check that `db` holds `acked` or `in_flight` exactly; returns which.
fn check_state(
    db: &Db,
    acked: &State,
    in_flight: Option<&State>,
    workload: &Workload,
) -> Result<State, String> {
    let candidates = std::iter::once(acked).chain(in_flight);
    let Some(st) = candidates
        .into_iter()
        .find(|s| db.seq() == s.seq && db.root() == s.model.root())
    else {
        return Err(format!(
            "reopened at seq {} with a root matching neither commit {} nor the one that failed",
            db.seq(),
            acked.seq
        ));
    };
    match compare(db, &st.model, &workload.keys) {
        Ok(None) => Ok(st.clone()),
        Ok(Some(diff)) => Err(format!("wrong result: {diff}")),
        Err(e) => Err(format!("reading failed: {e}")),
    }
}

/// The storage as `workload` leaves it with `fault` injected, run again from the start (the
/// run is deterministic: the same error at the same step).
fn replay(seed: u64, fault: Fault, workload: &Workload) -> Result<FaultStorage, String> {
    let s = FaultStorage::new(seed);
    s.add_fault(fault);
    let out = catch_unwind(AssertUnwindSafe(|| run_workload(&storage(&s), workload)))
        .map_err(|_| "the workload panicked on replay".to_string())?;
    drop(out);
    Ok(s)
}

fn run_one(
    seed: u64,
    workload: &Workload,
    fault: Fault,
    removal: bool,
    tally: &mut Tally,
) -> Result<(), String> {
    tally.runs += 1;
    let s = FaultStorage::new(seed);
    s.add_fault(fault);
    let out = match catch_unwind(AssertUnwindSafe(|| run_workload(&storage(&s), workload))) {
        Ok(out) => out,
        Err(_) => {
            tally.panics += 1;
            return Err("the workload panicked".into());
        }
    };
    let injected = s.stats().injected;
    if injected == 0 {
        return Ok(());
    }
    tally.injected += 1;
    let (acked, in_flight) = {
        let (a, f) = acked_and_in_flight(&out);
        (a.clone(), f.cloned())
    };
    match &out.error {
        None if removal => {
            tally.ignored_removals += 1;
            // The workload finished: the state must be the last commit.
            let db = out.db.as_ref().ok_or("no database")?;
            return check_state(db, &acked, None, workload).map(|_| ());
        }
        None => {
            tally.wrong_results += 1;
            return Err("the injected error did not surface".into());
        }
        Some((op, e)) => {
            if !matches!(e, Error::Io { .. }) {
                return Err(format!("while {op}, the error is not typed as I/O: {e:?}"));
            }
            tally.surfaced += 1;
        }
    }
    // After a failed write or sync, commits are refused until the database is reopened.
    s.clear_faults();
    if let Some(db) = &out.db {
        if fault.class != OpClass::Read {
            let attempt = commit_changes(db, &acked.model, &follow_up_batch(seed, &workload.keys));
            match attempt {
                Err(Error::Poisoned(_)) => tally.poisoned_checked += 1,
                Err(Error::Stale { .. }) if in_flight.is_some() => {
                    // The failed commit was published after all (it failed afterwards, in a
                    // checkpoint): a batch built before it is stale, and the next is refused.
                    let again = commit_changes(db, &in_flight.as_ref().ok_or("?")?.model, &[]);
                    if !matches!(again, Err(Error::Poisoned(_))) {
                        return Err(format!("commit after the failure: {again:?}"));
                    }
                    tally.poisoned_checked += 1;
                }
                other => {
                    return Err(format!(
                        "a commit after a failed write or sync was not refused: {:?}",
                        other.map(|_| ())
                    ))
                }
            }
        }
    }
    drop(out);
    // Reopen on the same files: a valid state, which takes new commits.
    let db = Db::open_with_storage(storage(&s), options())
        .map_err(|e| format!("reopening after the error failed: {e}"))?;
    let st = check_state(&db, &acked, in_flight.as_ref(), workload).inspect_err(|_| {
        tally.wrong_results += 1;
    })?;
    // A power loss right after that reopen: what it served stays. (A record whose log sync
    // failed can still be read back from what the OS holds; recovery replays it, so it must
    // make it durable before serving it.) The follow-up runs on the image.
    drop(db);
    let image = s.crash(CrashMode::DropUnsynced, seed);
    let db = Db::open_with_storage(storage(&image), options())
        .map_err(|e| format!("reopening after a power loss after the reopen failed: {e}"))?;
    if db.seq() != st.seq || db.root() != st.model.root() {
        tally.wrong_results += 1;
        return Err(format!(
            "a power loss after the reopen took back what it served: commit {}, now {}",
            st.seq,
            db.seq()
        ));
    }
    let model = commit_changes(&db, &st.model, &follow_up_batch(seed, &workload.keys))
        .map_err(|e| format!("committing after reopening failed: {e}"))?;
    if !matches!(compare(&db, &model, &workload.keys), Ok(None)) {
        return Err("wrong state after a commit on the reopened database".into());
    }
    drop(db);
    // Power loss at the moment of the error: also a valid state.
    let s2 = replay(seed, fault, workload)?;
    let image = s2.crash(CrashMode::DropUnsynced, seed);
    let db = Db::open_with_storage(storage(&image), options())
        .map_err(|e| format!("reopening after a power loss failed: {e}"))?;
    check_state(&db, &acked, in_flight.as_ref(), workload)
        .inspect_err(|_| tally.wrong_results += 1)?;
    drop(db);
    // A commit acknowledged after reopening on the same files survives a power loss: the
    // files the reopened database goes on writing to are durable, names included (a log file
    // created by a rotation that failed before syncing the directory was not).
    let s3 = replay(seed, fault, workload)?;
    s3.clear_faults();
    let db = Db::open_with_storage(storage(&s3), options())
        .map_err(|e| format!("reopening after the error failed: {e}"))?;
    let st = check_state(&db, &acked, in_flight.as_ref(), workload)?;
    let model = commit_changes(&db, &st.model, &follow_up_batch(seed, &workload.keys))
        .map_err(|e| format!("committing after reopening failed: {e}"))?;
    drop(db);
    let image = s3.crash(CrashMode::DropUnsynced, seed);
    let db = Db::open_with_storage(storage(&image), options()).map_err(|e| {
        format!("reopening after a power loss after an acknowledged commit failed: {e}")
    })?;
    if db.root() != model.root() {
        tally.wrong_results += 1;
        return Err(format!(
            "a power loss lost the commit acknowledged after the reopen (now at commit {})",
            db.seq()
        ));
    }
    Ok(())
}

#[test]
fn every_injected_io_error_surfaces_and_leaves_a_valid_database() {
    let seed = test_seed("io_errors", 7);
    let workload = small_workload(seed, 120);
    let reference = FaultStorage::new(seed);
    reference.record_trace(true);
    let out = run_workload(&storage(&reference), &workload);
    assert!(out.error.is_none(), "the workload fails without faults");
    drop(out);
    let counts = reference.stats();
    let namespace_kinds: Vec<StepKind> = reference
        .trace()
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| matches!(k, StepKind::Create | StepKind::Rename | StepKind::Remove))
        .collect();
    println!(
        "workload: {} writes, {} syncs, {} reads, {} creations/renames/removals",
        counts.writes, counts.syncs, counts.reads, counts.namespace_ops
    );
    let mut tally = Tally::default();
    let plans: Vec<(OpClass, u64, Vec<FaultKind>)> = vec![
        (
            OpClass::Write,
            counts.writes,
            vec![FaultKind::Eio, FaultKind::Enospc, FaultKind::ShortWrite],
        ),
        (OpClass::Sync, counts.syncs, vec![FaultKind::Eio]),
        (
            OpClass::Namespace,
            counts.namespace_ops,
            vec![FaultKind::Eio],
        ),
        (OpClass::Read, counts.reads, vec![FaultKind::Eio]),
    ];
    for (class, count, kinds) in plans {
        for index in 0..count {
            for kind in &kinds {
                for persistent in [false, true] {
                    let fault = Fault {
                        class,
                        index,
                        kind: *kind,
                        persistent,
                    };
                    let removal = class == OpClass::Namespace
                        && namespace_kinds.get(index as usize) == Some(&StepKind::Remove);
                    if let Err(why) = run_one(seed ^ index, &workload, fault, removal, &mut tally) {
                        tally.failures.push(format!("{fault:?}: {why}"));
                    }
                }
            }
        }
    }
    println!(
        "I/O errors: runs {}, injected {}, surfaced {}, ignored by design (removals of obsolete \
         files) {}, commits refused after a failed write/sync {}, wrong results {}, panics {}, \
         failures {}",
        tally.runs,
        tally.injected,
        tally.surfaced,
        tally.ignored_removals,
        tally.poisoned_checked,
        tally.wrong_results,
        tally.panics,
        tally.failures.len()
    );
    for f in tally.failures.iter().take(20) {
        println!("  {f}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} runs failed",
        tally.failures.len()
    );
    assert_eq!(tally.injected, tally.surfaced + tally.ignored_removals);
}

/// Read errors while reading a healthy database surface from every read API, and nothing is
/// poisoned: once the disk answers again, the same reads give the right answers.
#[test]
fn read_errors_surface_from_every_read_api() {
    let seed = test_seed("io_errors (reads)", 11);
    let workload = small_workload(seed, 120);
    let base = FaultStorage::new(seed);
    let out = run_workload(&storage(&base), &workload);
    assert!(out.error.is_none());
    let model = out.acked().model.clone();
    drop(out);
    let no_cache = || sprig::Options {
        page_cache_bytes: 0,
        ..options()
    };
    // Count the reads of one full comparison.
    let probe = base.fork();
    let db = Db::open_with_storage(storage(&probe), no_cache()).unwrap();
    let opened = probe.stats().reads;
    assert!(matches!(compare(&db, &model, &workload.keys), Ok(None)));
    let reads = probe.stats().reads - opened;
    drop(db);
    let (mut injected, mut surfaced, mut retried) = (0u64, 0u64, 0u64);
    for index in (0..reads).step_by((reads as usize / 100).max(1)) {
        for persistent in [false, true] {
            let s = base.fork();
            let db = Db::open_with_storage(storage(&s), no_cache()).unwrap();
            s.add_fault(Fault {
                class: OpClass::Read,
                index: opened + index,
                kind: FaultKind::Eio,
                persistent,
            });
            let result = catch_unwind(AssertUnwindSafe(|| compare(&db, &model, &workload.keys)))
                .unwrap_or_else(|_| panic!("reading panicked with a read error at read {index}"));
            if s.stats().injected == 0 {
                continue;
            }
            injected += 1;
            match result {
                Err(Error::Io { .. }) => surfaced += 1,
                // `Db::check` reads a failed batch again page by page: a transient error is
                // absorbed and the result is exact.
                Ok(None) if !persistent => retried += 1,
                other => {
                    panic!("read error at read {index} (persistent: {persistent}) gave {other:?}")
                }
            }
            // Not poisoned: once the disk answers again, the same reads succeed, and commits
            // work.
            s.clear_faults();
            assert!(matches!(compare(&db, &model, &workload.keys), Ok(None)));
            commit_changes(&db, &model, &follow_up_batch(seed, &workload.keys)).unwrap();
        }
    }
    println!(
        "read errors while reading: injected {injected}, surfaced {surfaced}, absorbed by a \
         retry with an exact result {retried}"
    );
    assert!(injected > 0);
    assert_eq!(injected, surfaced + retried);
}

/// A checkpoint that fails while creating its new log file leaves the file there, its name not
/// yet durable; the reopened database continues the log in it. A commit acknowledged after
/// that must survive a power loss, so the open makes the names it goes on with durable. (Found
/// by the `db_ops` fuzz target.)
#[test]
fn a_log_file_left_by_a_failed_rotation_is_durable_before_commits_go_into_it() {
    // No automatic checkpoint: its new log file would make every name durable.
    let options = || sprig::Options {
        checkpoint_log_bytes: 1 << 20,
        ..options()
    };
    let s = FaultStorage::new(11);
    let db = Db::open_with_storage(storage(&s), options()).unwrap();
    let mut batch = db.begin();
    batch.put([1u8; 32], "one").unwrap();
    db.commit(batch.finish().unwrap()).unwrap();
    // The next write is the new log file's first (its length set to 0, before its sync and
    // the directory's).
    s.add_fault(Fault {
        class: OpClass::Write,
        index: s.stats().writes,
        kind: FaultKind::Eio,
        persistent: false,
    });
    assert!(
        db.checkpoint().is_err(),
        "the injected fault must fail the checkpoint"
    );
    drop(db);
    s.clear_faults();
    let db = Db::open_with_storage(storage(&s), options()).unwrap();
    let mut batch = db.begin();
    batch.put([2u8; 32], "two").unwrap();
    let acknowledged = db.commit(batch.finish().unwrap()).unwrap();
    drop(db);
    let image = s.crash(CrashMode::DropUnsynced, 11);
    let db = Db::open_with_storage(storage(&image), options()).unwrap();
    assert_eq!(
        (db.seq(), db.root()),
        (acknowledged.seq, acknowledged.root),
        "a power loss took back an acknowledged commit"
    );
}
