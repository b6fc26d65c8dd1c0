//! A failure anywhere on the publish path — before a commit's record is durable or after it —
//! poisons the writer: every later write is refused until the database is reopened, so no
//! commit can reuse the sequence number of a record that is already on disk. (Found by a code
//! read: a failure after the record was durable, in commit and in rollback, returned an error
//! without poisoning, and the next commit took the same sequence number.)
//!
//! Needs the `failpoints` feature (on when the whole workspace is tested, through the torture
//! tool): a failpoint armed with `arm_error` makes the publish path fail at an exact step.
//! One test per file: failpoints are global to the process.

#![cfg(feature = "failpoints")]

use sprig::io::{FaultStorage, Storage};
use sprig::{Db, Error, Hasher, KeyPath, Options};
use std::sync::Arc;

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

fn put(db: &Db, i: u64) -> sprig::Result<sprig::CommitInfo> {
    let mut b = db.begin();
    b.put(key(i), vec![i as u8; 10])?;
    db.commit(b.finish()?)
}

fn assert_poisoned(db: &Db) {
    assert!(matches!(put(db, 77), Err(Error::Poisoned(_))));
    assert!(matches!(db.rollback_to(db.seq()), Err(Error::Poisoned(_))));
    assert!(matches!(db.checkpoint(), Err(Error::Poisoned(_))));
}

#[test]
fn a_failure_on_the_publish_path_poisons_the_writer_before_and_after_durability() {
    let s = FaultStorage::new(1);
    let storage: Arc<dyn Storage> = Arc::new(s.clone());
    let options = Options::default();
    let db = Db::open_with_storage(storage.clone(), options.clone()).unwrap();
    put(&db, 1).unwrap();
    put(&db, 2).unwrap();

    // After the record is durable: the commit reports the failure, the writer is poisoned,
    // and the reopened database holds the commit (it was durable).
    sprig::failpoint::arm_error("commit.record_synced", 1).unwrap();
    assert!(matches!(put(&db, 3), Err(Error::Internal(_))));
    assert_poisoned(&db);
    drop(db);
    let db = Db::open_with_storage(storage.clone(), options.clone()).unwrap();
    assert_eq!(db.seq(), 3);
    assert_eq!(db.view().get(&key(3)).unwrap(), Some(vec![3; 10]));
    assert_eq!(put(&db, 4).unwrap().seq, 4);

    // The same in a rollback.
    sprig::failpoint::arm_error("commit.record_synced", 1).unwrap();
    assert!(matches!(db.rollback_to(3), Err(Error::Internal(_))));
    assert_poisoned(&db);
    drop(db);
    let db = Db::open_with_storage(storage.clone(), options.clone()).unwrap();
    assert_eq!(db.seq(), 5);
    assert_eq!(
        db.view().get(&key(4)).unwrap(),
        None,
        "the rollback was durable"
    );

    // Before the record: poisoned as well, and the commit is not there after reopening.
    sprig::failpoint::arm_error("commit.pages_synced", 1).unwrap();
    assert!(matches!(put(&db, 6), Err(Error::Internal(_))));
    assert_poisoned(&db);
    drop(db);
    let db = Db::open_with_storage(storage, options).unwrap();
    assert_eq!(db.seq(), 5);
    assert_eq!(put(&db, 6).unwrap().seq, 6);
    sprig::failpoint::disarm();
}
