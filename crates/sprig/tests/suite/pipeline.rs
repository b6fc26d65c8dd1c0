//! The commit pipeline: batches built on the previous, uncommitted one while a thread commits
//! them in order give exactly the serial roots and state; a batch not begun on the tip is
//! refused; a failed commit stops the pipeline with that error, nothing after it commits, and
//! the database stays at the last durable commit.

use sprig::io::{Fault, FaultKind, FaultStorage, OpClass, Storage};
use sprig::{Db, Error, KeyPath, Options};
use std::sync::Arc;

fn key(db: &Db, block: u32, i: u32) -> KeyPath {
    db.key_path(&[block.to_le_bytes(), i.to_le_bytes()].concat())
}

/// Block `block`: 200 inserts, and updates and deletes of the previous block's keys.
fn fill(db: &Db, batch: &mut sprig::WriteBatch, block: u32) {
    for i in 0..200 {
        batch
            .put(key(db, block, i), vec![block as u8; 1 + (i as usize % 90)])
            .unwrap();
    }
    if block > 0 {
        for i in (0..200).step_by(3) {
            batch.put(key(db, block - 1, i), vec![0xAB; 40]).unwrap();
        }
        for i in (1..200).step_by(7) {
            batch.delete(key(db, block - 1, i));
        }
    }
}

#[test]
fn pipelined_commits_equal_serial_ones() {
    let serial = Db::open_in_memory(Options::default()).unwrap();
    let mut serial_roots = Vec::new();
    for block in 0..25 {
        let mut b = serial.begin();
        fill(&serial, &mut b, block);
        serial_roots.push(serial.commit(b.finish().unwrap()).unwrap().root);
    }

    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut pipeline = db.pipeline(2);
    let mut roots = Vec::new();
    for block in 0..25 {
        let mut b = pipeline.begin().unwrap();
        // The batch sees the previous block's writes, durable or not.
        if block > 0 {
            assert_eq!(
                b.get(&key(&db, block - 1, 0)).unwrap(),
                Some(vec![(block - 1) as u8; 1])
            );
        }
        fill(&db, &mut b, block);
        let pending = b.finish().unwrap();
        roots.push(pending.root());
        pipeline.submit(pending).unwrap();
        if block == 10 {
            let info = pipeline.wait_durable(5).unwrap();
            assert!(info.seq >= 5);
        }
    }
    let last = pipeline.flush().unwrap().unwrap();
    assert_eq!(roots, serial_roots);
    assert_eq!(last.seq, 25);
    assert_eq!(last.root, serial.root());
    assert_eq!(db.root(), serial.root());
    assert_eq!(db.len(), serial.len());
    // Waiting for a commit that was never submitted is an error, not a hang.
    assert!(matches!(
        pipeline.wait_durable(99),
        Err(Error::InvalidArgument(_))
    ));
    // Usable again after a flush.
    let mut b = pipeline.begin().unwrap();
    b.put(key(&db, 99, 0), b"x".to_vec()).unwrap();
    pipeline.submit(b.finish().unwrap()).unwrap();
    assert_eq!(pipeline.flush().unwrap().unwrap().seq, 26);
}

#[test]
fn a_batch_not_begun_on_the_tip_is_refused() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut pipeline = db.pipeline(4);
    let mut b = pipeline.begin().unwrap();
    b.put(key(&db, 0, 0), b"a".to_vec()).unwrap();
    let first = b.finish().unwrap();
    // Begun before the first was submitted: on the database, not on the tip.
    let mut stray = pipeline.begin().unwrap();
    stray.put(key(&db, 0, 1), b"b".to_vec()).unwrap();
    let stray = stray.finish().unwrap();
    pipeline.submit(first).unwrap();
    match pipeline.submit(stray) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("tip"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(pipeline.flush().unwrap().unwrap().seq, 1);
}

#[test]
fn a_failed_commit_stops_the_pipeline() {
    let storage = FaultStorage::new(1);
    let db = Db::open_with_storage(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        Options::default(),
    )
    .unwrap();
    let mut pipeline = db.pipeline(1);
    let mut durable_root = None;
    let mut failure = None;
    for block in 0..30 {
        if block == 3 {
            // Every sync from now on fails: the disk died.
            storage.add_fault(Fault {
                class: OpClass::Sync,
                index: storage.stats().syncs,
                kind: FaultKind::Eio,
                persistent: true,
            });
        }
        let mut b = match pipeline.begin() {
            Ok(b) => b,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        fill(&db, &mut b, block);
        let pending = b.finish().unwrap();
        if block == 2 {
            pipeline.submit(pending).unwrap();
            durable_root = Some(pipeline.wait_durable(3).unwrap().root);
            continue;
        }
        if let Err(e) = pipeline.submit(pending) {
            failure = Some(e);
            break;
        }
    }
    let failure = failure.or_else(|| pipeline.flush().err());
    let failure = failure.expect("a dead disk must stop the pipeline");
    assert!(matches!(failure, Error::Io { .. }), "{failure:?}");
    // Nothing after the failure committed; later commits are refused (poisoned).
    assert_eq!(db.seq(), 3);
    assert_eq!(Some(db.root()), durable_root);
    assert!(pipeline.flush().is_ok(), "the error is reported once");
    let mut b = pipeline.begin().unwrap();
    b.put(key(&db, 99, 0), b"x".to_vec()).unwrap();
    pipeline.submit(b.finish().unwrap()).unwrap();
    assert!(matches!(pipeline.flush(), Err(Error::Poisoned(_))));
}

/// A batch may begin on an overlay while another thread commits it: the overlay is never
/// reported superseded in the moment between the head moving to its sequence number and the
/// overlay being marked committed (it was, before overlays had a "being committed" state).
#[test]
fn beginning_on_an_overlay_during_its_commit_never_fails() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let db = Db::open_in_memory(Options::default()).unwrap();
    for round in 0..300u32 {
        let mut b = db.begin();
        b.put(key(&db, round, 0), b"v".to_vec()).unwrap();
        let pending = b.finish().unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let pending = pending.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut tries = 0u64;
                while !done.load(Ordering::Acquire) || tries == 0 {
                    if let Err(e) = pending.begin() {
                        return Err(format!("round {round}: {e}"));
                    }
                    tries += 1;
                }
                Ok(tries)
            })
        };
        db.commit(pending).unwrap();
        done.store(true, Ordering::Release);
        reader.join().unwrap().unwrap();
    }
}
