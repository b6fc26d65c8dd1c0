//! The whole engine under random operations and injected faults: puts, deletes, commits,
//! reopens, checkpoints, cleans, injected I/O errors and power losses, on the fault-injecting
//! backend, checked against the reference model. After every failure or crash the database
//! must reopen to the last acknowledged state or the commit in flight, and serve exactly it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::io::{CrashMode, Fault, FaultKind, FaultStorage, OpClass, Storage};
use sprig::{Db, Hasher, KeyPath, Options};
use sprig_core::ReferenceModel;
use sprig_fuzz::{key, Choices};
use std::sync::Arc;

/// The most operations one input runs.
const MAX_OPS: usize = 48;

fn options() -> Options {
    Options {
        hasher: Some(Hasher::Blake3),
        page_cache_bytes: 1 << 20,
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 8 << 10,
        ..Options::default()
    }
}

fn open(storage: &FaultStorage) -> Db {
    storage.clear_faults();
    let db = Db::open_with_storage(Arc::new(storage.clone()) as Arc<dyn Storage>, options());
    match db {
        Ok(db) => db,
        Err(e) => panic!("a database without faults does not open: {e}"),
    }
}

/// Every key of the universe reads as the model says, or fails with an error (an injected
/// read fault); never a wrong value.
fn check_reads(db: &Db, model: &ReferenceModel) {
    let view = db.view();
    assert_eq!(
        view.root(),
        model.root(),
        "the root differs from the model's"
    );
    for i in 0..32u8 {
        let k: KeyPath = key(i);
        if let Ok(v) = view.get(&k) {
            assert_eq!(v.as_deref(), model.get(&k), "a wrong value was served");
        }
    }
}

/// After a failure: reopen; the state must be the acknowledged one or the one in flight.
fn recover(
    storage: &FaultStorage,
    acked: &mut ReferenceModel,
    in_flight: Option<ReferenceModel>,
) -> Db {
    let db = open(storage);
    match in_flight {
        Some(next) if db.root() == next.root() => *acked = next,
        _ => assert_eq!(
            db.root(),
            acked.root(),
            "recovered neither the acknowledged nor the in-flight state"
        ),
    }
    check_reads(&db, acked);
    db
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let mut storage = FaultStorage::new(u64::from(c.u16()));
    let mut db = open(&storage);
    let mut acked = ReferenceModel::new(Hasher::Blake3);
    let mut next = acked.clone();
    let mut batch = db.begin();
    for _ in 0..MAX_OPS {
        if c.is_empty() {
            break;
        }
        match c.byte() % 10 {
            0..=2 => {
                let k = key(c.byte() % 32);
                let len = match c.byte() % 4 {
                    0 => 1025 + usize::from(c.u16() % 6000),
                    _ => usize::from(c.byte() % 48),
                };
                let v = vec![c.byte(); len];
                if batch.put(k, v.clone()).is_ok() {
                    next.insert(k, v);
                }
            }
            3 => {
                let k = key(c.byte() % 32);
                batch.delete(k);
                next.remove(&k);
            }
            4 | 5 => {
                let done = batch.finish().and_then(|p| db.commit(p));
                match done {
                    Ok(info) => {
                        assert_eq!(info.root, next.root(), "a commit gave another root");
                        acked = next.clone();
                        check_reads(&db, &acked);
                    }
                    Err(_) => {
                        drop(db);
                        db = recover(&storage, &mut acked, Some(next.clone()));
                    }
                }
                next = acked.clone();
                batch = db.begin();
            }
            6 => {
                let class = match c.byte() % 4 {
                    0 => OpClass::Write,
                    1 => OpClass::Sync,
                    2 => OpClass::Read,
                    _ => OpClass::Namespace,
                };
                let kind = match c.byte() % 3 {
                    0 => FaultKind::Eio,
                    1 => FaultKind::Enospc,
                    _ => FaultKind::ShortWrite,
                };
                let stats = storage.stats();
                let done = match class {
                    OpClass::Write => stats.writes,
                    OpClass::Sync => stats.syncs,
                    OpClass::Read => stats.reads,
                    OpClass::Namespace => stats.namespace_ops,
                };
                storage.add_fault(Fault {
                    class,
                    index: done + u64::from(c.byte() % 8),
                    kind,
                    persistent: c.byte() & 3 == 0,
                });
            }
            7 => {
                // Power loss between operations: everything acknowledged survives.
                let mode = CrashMode::ALL[usize::from(c.byte()) % CrashMode::ALL.len()];
                let image = storage.crash(mode, u64::from(c.byte()));
                drop(batch);
                drop(db);
                storage = image;
                db = recover(&storage, &mut acked, None);
                next = acked.clone();
                batch = db.begin();
            }
            8 => {
                let done = if c.byte() & 1 == 0 {
                    db.checkpoint()
                } else {
                    db.clean().map(|_| ())
                };
                if done.is_err() {
                    drop(batch);
                    drop(db);
                    db = recover(&storage, &mut acked, None);
                    next = acked.clone();
                    batch = db.begin();
                }
            }
            _ => {
                drop(batch);
                drop(db);
                db = recover(&storage, &mut acked, None);
                next = acked.clone();
                batch = db.begin();
            }
        }
    }
});
