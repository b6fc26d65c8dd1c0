//! Read-only opens: no lock, no change to any file, the last durable commit seen, every
//! write refused with a typed error. Found by an outside tester: every command failed on a
//! read-only mount, and while a writer held the database no other process could even read
//! its root.

use sprig::{Db, Error, Hasher, KeyPath, Options};
use std::collections::BTreeMap;
use std::path::Path;

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

fn options() -> Options {
    Options {
        segment_bytes: 1 << 20,
        ..Options::default()
    }
}

fn commit(db: &Db, range: std::ops::Range<u64>, tag: u8) {
    let mut b = db.begin();
    for i in range {
        b.put(key(i), vec![tag; 40]).unwrap();
    }
    db.commit(b.finish().unwrap()).unwrap();
}

/// Every file of the directory with its bytes and modification time.
fn files(dir: &Path) -> BTreeMap<String, (Vec<u8>, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                (std::fs::read(e.path()).unwrap(), meta.modified().unwrap()),
            )
        })
        .collect()
}

#[test]
fn a_read_only_open_works_while_a_writer_holds_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Db::open(dir.path(), options()).unwrap();
    commit(&writer, 0..100, 1);
    commit(&writer, 100..200, 2);
    // A second writable open is refused: the lock is held.
    assert!(matches!(
        Db::open(dir.path(), options()),
        Err(Error::Locked(_))
    ));
    let reader = Db::open_read_only(dir.path(), options()).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(reader.seq(), 2);
    assert_eq!(reader.root(), writer.root());
    assert_eq!(reader.view().get(&key(150)).unwrap(), Some(vec![2; 40]));
    let proof = reader.view().path_proof(&key(7)).unwrap();
    proof
        .verify_value(reader.hasher(), &reader.root(), &key(7), Some(&[1; 40]))
        .unwrap();
    // The writer goes on; the reader keeps the version it opened, a new reader sees more.
    commit(&writer, 0..10, 3);
    assert_eq!(reader.seq(), 2);
    assert_eq!(reader.view().get(&key(5)).unwrap(), Some(vec![1; 40]));
    let again = Db::open_read_only(dir.path(), options()).unwrap();
    assert_eq!(again.seq(), 3);
    assert_eq!(again.root(), writer.root());
}

#[test]
fn a_read_only_open_changes_no_file_and_refuses_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    commit(&db, 0..300, 1);
    commit(&db, 0..50, 2);
    drop(db);
    // A torn last record, as a crash leaves it: reported, left in place.
    let wal = dir.path().join("wal-0000000001.log");
    let len = std::fs::metadata(&wal).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let before = files(dir.path());

    let db = Db::open_read_only(dir.path(), options()).unwrap();
    assert_eq!(db.seq(), 1);
    let tail = db.recovery().lost_tail.clone().unwrap();
    assert_eq!((tail.seq, tail.cut), (Some(2), false));
    assert_eq!(db.view().get(&key(10)).unwrap(), Some(vec![1; 40]));
    assert_eq!(db.check(&mut |_, _| {}).unwrap().problems.len(), 0);

    let mut b = db.begin();
    b.put(key(1), vec![9]).unwrap();
    let pending = b.finish().unwrap();
    assert!(matches!(db.commit(pending), Err(Error::ReadOnly)));
    assert!(matches!(db.checkpoint(), Err(Error::ReadOnly)));
    assert!(matches!(db.rollback_to(1), Err(Error::ReadOnly)));
    assert!(matches!(db.clean(), Err(Error::ReadOnly) | Ok(None)));
    assert!(matches!(
        db.bulk_load(vec![(key(1), vec![1])], &mut |_| {}),
        Err(Error::ReadOnly)
    ));
    drop(db);
    assert_eq!(files(dir.path()), before, "a read-only open changed files");
    assert!(!dir.path().join("LOCK").exists());

    // A writable open cuts the torn tail and goes on.
    let db = Db::open(dir.path(), options()).unwrap();
    assert!(db.recovery().lost_tail.as_ref().is_some_and(|t| t.cut));
    commit(&db, 0..5, 4);
    assert_eq!(db.seq(), 2);
}

#[test]
fn a_read_only_open_of_nothing_is_not_found_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent");
    assert!(matches!(
        Db::open_read_only(&path, options()),
        Err(Error::NotFound(_))
    ));
    assert!(!path.exists());
    let existing_only = Options {
        create_if_missing: false,
        ..options()
    };
    assert!(matches!(
        Db::open(&path, existing_only),
        Err(Error::NotFound(_))
    ));
    assert!(!path.exists());
    assert!(matches!(
        Db::open_read_only(dir.path(), options()),
        Err(Error::NotFound(_))
    ));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
