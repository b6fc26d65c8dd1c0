//! Damage to the commit log, as an outside tester found it and as a disk does it: one bad
//! sector anywhere, both copies of a record, a cut tail, a log truncated to nothing, a deleted
//! log file, a lost manifest. Every case either keeps the newest acknowledged state or refuses
//! to open with a corruption error naming the file — never an older state without a word
//! (the log used to treat a record with both header copies bad as a torn tail without looking
//! past it, and cut the file: `sprig root` answered version 4 of 10, `check` said nothing).

use sprig::io::{FaultStorage, OpenOptions, Storage};
use sprig::{Db, Error, Hasher, KeyPath, Options};
use std::sync::Arc;

const COMMITS: u64 = 10;
const SECTOR: usize = 4096;

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

fn value(i: u64) -> Vec<u8> {
    // Every fourth value goes to the value log.
    if i % 4 == 3 {
        vec![i as u8; 3000]
    } else {
        vec![i as u8; 20]
    }
}

fn options() -> Options {
    Options {
        hasher: Some(Hasher::Blake3),
        segment_bytes: 1 << 20,
        page_cache_bytes: 0,
        ..Options::default()
    }
}

fn dyn_storage(s: &FaultStorage) -> Arc<dyn Storage> {
    Arc::new(s.clone())
}

/// Keys a large commit adds, so that its record spans several sectors.
const BULKY: std::ops::Range<u64> = 1000..9000;

/// A database of `COMMITS` commits of one key each (the seventh also puts the `BULKY` keys,
/// splitting pages: its record spans several sectors); with `rotate`, a checkpoint after the
/// fifth, so the log spans two files.
fn build(rotate: bool) -> FaultStorage {
    let s = FaultStorage::new(7);
    let db = Db::open_with_storage(dyn_storage(&s), options()).unwrap();
    for i in 1..=COMMITS {
        let mut b = db.begin();
        b.put(key(i), value(i)).unwrap();
        if i == 7 {
            for k in BULKY {
                b.put(key(k), value(k)).unwrap();
            }
        }
        db.commit(b.finish().unwrap()).unwrap();
        if rotate && i == 5 {
            db.checkpoint().unwrap();
        }
    }
    s
}

fn log_files(s: &FaultStorage) -> Vec<String> {
    s.list()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("wal-"))
        .collect()
}

fn overwrite(s: &FaultStorage, name: &str, offset: usize, bytes: &[u8]) {
    let f = s
        .open(
            name,
            OpenOptions {
                create: false,
                direct: false,
            },
        )
        .unwrap();
    f.write_at(bytes, offset as u64).unwrap();
    f.sync().unwrap();
}

fn set_len(s: &FaultStorage, name: &str, len: u64) {
    let f = s
        .open(
            name,
            OpenOptions {
                create: false,
                direct: false,
            },
        )
        .unwrap();
    f.set_len(len).unwrap();
    f.sync().unwrap();
}

/// The root of the newest state.
fn newest_root() -> sprig::Node {
    let mut model = sprig_core::ReferenceModel::new(Hasher::Blake3);
    for i in (1..=COMMITS).chain(BULKY) {
        model.insert(key(i), value(i));
    }
    model.root()
}

/// Whether `db` holds exactly the newest state (its root commits to every value; the keys of
/// the last commits are read too).
fn holds_newest(db: &Db, root: &sprig::Node) -> bool {
    db.seq() == COMMITS
        && db.root() == *root
        && (COMMITS - 3..=COMMITS).all(|i| db.view().get(&key(i)).unwrap() == Some(value(i)))
}

#[derive(Default, Debug)]
struct Tally {
    sectors: u64,
    kept: u64,
    refused: u64,
    silently_lost: u64,
}

/// The figure: damage each sector of a multi-record log in turn (zeros and garbage);
/// every case either keeps the newest state or refuses to open with a corruption error.
#[test]
fn one_damaged_sector_anywhere_in_the_log_never_loses_a_commit_silently() {
    let mut tally = Tally::default();
    let root = newest_root();
    for rotate in [false, true] {
        let base = build(rotate);
        for name in log_files(&base) {
            let len = base.file_bytes(&name).unwrap().len();
            assert_eq!(len % SECTOR, 0, "{name} is not sector-aligned");
            for sector in 0..len / SECTOR {
                for fill in [0u8, 0xa5] {
                    tally.sectors += 1;
                    let image = base.fork();
                    overwrite(&image, &name, sector * SECTOR, &[fill; SECTOR]);
                    let damaged = image.file_bytes(&name).unwrap();
                    match Db::open_with_storage(dyn_storage(&image), options()) {
                        Ok(db) if holds_newest(&db, &root) => tally.kept += 1,
                        Ok(db) => {
                            tally.silently_lost += 1;
                            eprintln!(
                                "{name} sector {sector} fill {fill:#x}: opened at seq {}",
                                db.seq()
                            );
                        }
                        Err(e) => {
                            assert!(e.is_corruption(), "{name} sector {sector}: {e}");
                            assert_eq!(
                                image.file_bytes(&name).unwrap(),
                                damaged,
                                "a refused open changed the log"
                            );
                            tally.refused += 1;
                        }
                    }
                }
            }
        }
    }
    println!(
        "log sectors damaged: {}, newest state kept: {}, refused with corruption: {}, \
         silently lost: {}",
        tally.sectors, tally.kept, tally.refused, tally.silently_lost
    );
    assert_eq!(tally.silently_lost, 0, "{tally:?}");
    // One sector holds at most one copy of anything: every case is repaired.
    assert_eq!(tally.kept, tally.sectors, "{tally:?}");
}

/// The reported case: both copies of a record in the middle of the log gone. Opening refuses
/// with a corruption error naming the log and the record's offset, and cuts nothing.
#[test]
fn a_record_lost_in_the_middle_refuses_to_open_and_nothing_is_cut() {
    let base = build(false);
    let name = "wal-0000000001.log";
    // Records 1 to 6 are two sectors each: record 5 is sectors 8 and 9.
    let before = base.file_bytes(name).unwrap();
    overwrite(&base, name, 8 * SECTOR, &[0u8; 2 * SECTOR]);
    let damaged = base.file_bytes(name).unwrap();
    assert_eq!(damaged.len(), before.len());
    for read_only in [false, true] {
        let e = if read_only {
            Db::open_with_storage_read_only(dyn_storage(&base), options()).err()
        } else {
            Db::open_with_storage(dyn_storage(&base), options()).err()
        }
        .expect("the open must fail");
        match &e {
            Error::Corruption { file, offset, .. } => {
                assert_eq!(file, name);
                assert_eq!(*offset, 8 * SECTOR as u64);
            }
            other => panic!("not corruption: {other}"),
        }
        assert_eq!(
            base.file_bytes(name).unwrap(),
            damaged,
            "the log was changed"
        );
    }
}

/// A cut tail (a crash while the last record was written) is normal, but reported: which
/// record, how many bytes; a read-only open leaves it, a writable open cuts it.
#[test]
fn a_cut_tail_is_reported_with_its_record_and_size() {
    let base = build(false);
    let name = "wal-0000000001.log";
    let len = base.file_bytes(name).unwrap().len() as u64;
    set_len(&base, name, len - 5);

    let ro = Db::open_with_storage_read_only(dyn_storage(&base), options()).unwrap();
    assert_eq!(ro.seq(), COMMITS - 1);
    let tail = ro.recovery().lost_tail.clone().expect("a lost tail");
    assert_eq!(tail.seq, Some(COMMITS));
    // Records 8 to 10 are two sectors each.
    assert_eq!(tail.offset, len - 2 * SECTOR as u64);
    assert_eq!(tail.bytes, 2 * SECTOR as u64 - 5);
    assert!(!tail.cut);
    assert!(!ro.recovery().findings().is_empty());
    drop(ro);
    assert_eq!(base.file_bytes(name).unwrap().len() as u64, len - 5);

    let db = Db::open_with_storage(dyn_storage(&base), options()).unwrap();
    assert_eq!(db.seq(), COMMITS - 1);
    assert!(db.recovery().lost_tail.as_ref().is_some_and(|t| t.cut));
    assert_eq!(
        base.file_bytes(name).unwrap().len() as u64,
        len - 2 * SECTOR as u64
    );
    // The database goes on from there.
    let mut b = db.begin();
    b.put(key(99), b"after".to_vec()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    drop(db);
    let db = Db::open_with_storage(dyn_storage(&base), options()).unwrap();
    assert_eq!(db.seq(), COMMITS);
    assert!(db.recovery().is_clean());
}

/// A log truncated to nothing: pages of synced commits past the segments' recorded fill
/// prove that commit records were lost.
#[test]
fn a_log_cut_to_nothing_is_corruption() {
    let base = build(false);
    set_len(&base, "wal-0000000001.log", 0);
    let e = Db::open_with_storage(dyn_storage(&base), options())
        .err()
        .expect("the open must fail");
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("seg-"), "{e}");
    let e = Db::open_with_storage_read_only(dyn_storage(&base), options())
        .err()
        .expect("the read-only open must fail too");
    assert!(e.is_corruption(), "{e}");
}

/// A checkpoint records the latest durable commit when it was written: a log that ends
/// before it lost acknowledged commits, even when those commits wrote no page (rollbacks).
#[test]
fn a_log_shorter_than_the_checkpoint_says_is_corruption() {
    let s = FaultStorage::new(3);
    let db = Db::open_with_storage(dyn_storage(&s), options()).unwrap();
    for i in 1..=6 {
        let mut b = db.begin();
        b.put(key(i), value(i)).unwrap();
        db.commit(b.finish().unwrap()).unwrap();
    }
    // Commits 7, 8, 9 write only records.
    for target in [5, 6, 7] {
        db.rollback_to(target).unwrap();
    }
    assert_eq!(db.seq(), 9);
    db.checkpoint().unwrap();
    drop(db);
    // The checkpoint holds the oldest retained version (6) and says 9 was durable.
    let name = "wal-0000000001.log";
    let bytes = s.file_bytes(name).unwrap();
    // Cut the log right after record 6 (records are two sectors each).
    set_len(&s, name, 6 * 2 * SECTOR as u64);
    assert!(s.file_bytes(name).unwrap().len() < bytes.len());
    let e = Db::open_with_storage(dyn_storage(&s), options())
        .err()
        .expect("the open must fail");
    assert!(
        e.is_corruption() && e.to_string().contains("durable"),
        "{e}"
    );
}

/// A log file that a rotation record says continues the log must be there.
#[test]
fn a_deleted_log_file_after_a_rotation_is_corruption() {
    let base = build(true);
    let files = log_files(&base);
    let newest = files.last().unwrap().clone();
    assert!(files.len() >= 2, "{files:?}");
    base.remove(&newest).unwrap();
    let e = Db::open_with_storage(dyn_storage(&base), options())
        .err()
        .expect("the open must fail");
    assert!(e.is_corruption(), "{e}");
}

/// A lost manifest beside a used database is corruption, not "no database here" (which would
/// invite creating a new one over it); a creation that stopped before writing its manifest is
/// no database and is created anew.
#[test]
fn a_missing_manifest_is_corruption_unless_the_creation_never_finished() {
    let base = build(false);
    base.remove("MANIFEST").unwrap();
    for create in [false, true] {
        let e = Db::open_with_storage(
            dyn_storage(&base),
            Options {
                create_if_missing: create,
                ..options()
            },
        )
        .err()
        .expect("the open must fail");
        assert!(
            matches!(&e, Error::Corruption { file, .. } if file == "MANIFEST"),
            "{e}"
        );
    }

    // A creation cut before the manifest: only the empty first log and checkpoint exist.
    let fresh = FaultStorage::new(1);
    drop(Db::open_with_storage(dyn_storage(&fresh), options()).unwrap());
    fresh.remove("MANIFEST").unwrap();
    assert!(matches!(
        Db::open_with_storage(
            dyn_storage(&fresh),
            Options {
                create_if_missing: false,
                ..options()
            }
        ),
        Err(Error::NotFound(_))
    ));
    let db = Db::open_with_storage(dyn_storage(&fresh), options()).unwrap();
    assert_eq!(db.seq(), 0);
}

/// A segment file that still holds live pages, deleted: the open says which file is missing
/// and that the log counts live data in it (before, the open succeeded and the first read of
/// one of its pages failed).
#[test]
fn a_missing_segment_with_live_data_is_corruption() {
    let base = build(false);
    let segment = base
        .list()
        .unwrap()
        .into_iter()
        .find(|n| n.starts_with("seg-"))
        .expect("a segment file");
    base.remove(&segment).unwrap();
    let e = Db::open_with_storage(dyn_storage(&base), options())
        .err()
        .expect("the open must fail");
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains(&segment), "{e}");
    assert!(e.to_string().contains("live"), "{e}");
    let e = Db::open_with_storage_read_only(dyn_storage(&base), options())
        .err()
        .expect("the read-only open must fail too");
    assert!(e.to_string().contains(&segment), "{e}");
}
