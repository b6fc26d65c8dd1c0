//! Emptied segment files are kept and renamed into new segments (`Options::recycled_segments`):
//! a new segment then takes a former segment's file (its blocks already allocated), the data
//! written through recycled files reads back after a reopen, the older bytes past a recycled
//! segment's fill are neither counted as a lost commit's blocks nor read as one, and pages of
//! commits whose records were lost are still found there.

use sprig::{Db, Error, Hasher, KeyPath, Options};
use sprig_core::ReferenceModel;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

fn options(recycled: usize) -> Options {
    Options {
        hasher: Some(Hasher::Blake3),
        // Small segments, one retained version: segments fill and empty within a few commits.
        segment_bytes: 1 << 20,
        retained_versions: 1,
        page_cache_bytes: 1 << 20,
        recycled_segments: recycled,
        ..Options::default()
    }
}

/// The segment files (id, inode, size) and the spare files' inodes.
fn files(dir: &Path) -> (Vec<(u32, u64, u64)>, BTreeSet<u64>) {
    let mut segments = Vec::new();
    let mut spares = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let meta = entry.metadata().unwrap();
        if let Some(id) = name
            .strip_prefix("seg-")
            .and_then(|n| n.strip_suffix(".dat"))
        {
            segments.push((id.parse().unwrap(), meta.ino(), meta.len()));
        } else if name.starts_with("spare-") {
            spares.insert(meta.ino());
        }
    }
    segments.sort_unstable();
    (segments, spares)
}

/// Note the spare files' inodes in `spares_seen`; whether the newest segment file is one of
/// them (a recycled file, its older bytes past the fill).
fn newest_is_recycled(dir: &Path, spares_seen: &mut BTreeSet<u64>) -> bool {
    let (segments, spares) = files(dir);
    let recycled = segments
        .last()
        .is_some_and(|(_, ino, _)| spares_seen.contains(ino));
    spares_seen.extend(spares);
    recycled
}

/// Commit `n` batches of updates to the 2,000 keys (every fourth value kept outside the pages)
/// to `db` and `model`, from round `from`; after each, `each(db)`.
fn commit_rounds(
    db: &Db,
    model: &mut ReferenceModel,
    from: u64,
    n: u64,
    each: &mut dyn FnMut(&Db),
) {
    for round in from..from + n {
        let mut batch = db.begin();
        for i in (round % 3..2000).step_by(3) {
            let v = if i % 4 == 3 {
                vec![(i + round) as u8; 3000]
            } else {
                vec![(i + round) as u8; 24]
            };
            batch.put(key(i), v.clone()).unwrap();
            model.insert(key(i), v);
        }
        db.commit(batch.finish().unwrap()).unwrap();
        each(db);
    }
}

/// A new database in a directory of its own, keeping up to `recycled` spare files, and an
/// empty model beside it.
fn fresh(recycled: usize) -> (tempfile::TempDir, ReferenceModel, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(recycled)).unwrap();
    (dir, ReferenceModel::new(Hasher::Blake3), db)
}

fn assert_holds(db: &Db, model: &ReferenceModel) {
    assert_eq!(db.root(), model.root());
    let view = db.view();
    for (k, v) in model.iter() {
        assert_eq!(view.get(k).unwrap().as_deref(), Some(v));
    }
}

/// New segments take emptied segments' files (at most two kept at a time), the data reads back
/// after a reopen, and a clean reopen counts no unaccounted blocks even when the segment new
/// blocks go to is a recycled file holding older bytes past its fill.
#[test]
fn new_segments_take_emptied_files_and_a_clean_reopen_finds_nothing_unaccounted() {
    let (dir, mut model, db) = fresh(2);
    let mut spare_inodes = BTreeSet::new();
    let mut reused = 0usize;
    let mut newest_recycled = false;
    commit_rounds(&db, &mut model, 0, 60, &mut |_| {
        let (segments, spares) = files(dir.path());
        assert!(spares.len() <= 2, "{} spare files kept", spares.len());
        reused += segments
            .iter()
            .filter(|(_, ino, _)| spare_inodes.contains(ino))
            .count();
        newest_recycled = segments
            .last()
            .is_some_and(|(_, ino, _)| spare_inodes.contains(ino));
        spare_inodes.extend(spares);
    });
    assert!(reused > 0, "no new segment took a kept file");
    let stats = db.stats();
    assert!(
        stats.segment_files_recycled > 0,
        "the stats count no recycled file"
    );
    assert!(stats.spare_segment_files <= 2);
    // Until the segment new blocks go to is a recycled file (its older bytes past the fill).
    let mut more = 0;
    while !newest_recycled {
        more += 1;
        assert!(more < 200, "the newest segment never was a recycled file");
        commit_rounds(&db, &mut model, 60 + more, 1, &mut |_| {
            newest_recycled = newest_is_recycled(dir.path(), &mut spare_inodes);
        });
    }
    assert_holds(&db, &model);
    drop(db);

    let db = Db::open(dir.path(), options(2)).unwrap();
    assert!(db.recovery().is_clean());
    assert_eq!(
        db.recovery().unaccounted_blocks,
        Vec::<(String, u64)>::new(),
        "a recycled segment's older bytes counted as a lost commit's"
    );
    assert_holds(&db, &model);
    // And it goes on writing through them.
    commit_rounds(&db, &mut model, 1000, 10, &mut |_| {});
    drop(db);
    let db = Db::open(dir.path(), options(2)).unwrap();
    assert!(db.recovery().unaccounted_blocks.is_empty());
    assert_holds(&db, &model);
}

/// With `recycled_segments: 0` no file is kept: emptied segment files are deleted.
#[test]
fn with_recycling_off_no_file_is_kept() {
    let (dir, mut model, db) = fresh(0);
    let mut seen = 0usize;
    commit_rounds(&db, &mut model, 0, 40, &mut |db| {
        let (segments, spares) = files(dir.path());
        assert!(spares.is_empty(), "a spare file with recycling off");
        assert_eq!(db.stats().segment_files_recycled, 0);
        seen = seen.max(segments.last().map_or(0, |s| s.0 as usize));
    });
    assert!(seen > 5, "too few segments ({seen}) for any to be emptied");
    assert_holds(&db, &model);
}

/// Commit records lost from the log are still found through the pages their commits wrote
/// into a recycled segment (before the end marker the last of them left), and the open
/// refuses: the log is cut back to where it was two commits earlier.
#[test]
fn lost_records_are_found_in_a_recycled_segment() {
    let (dir, mut model, db) = fresh(2);
    let mut spare_inodes = BTreeSet::new();
    let mut round = 0;
    let logs = |dir: &Path| -> Vec<(String, u64)> {
        let mut l: Vec<(String, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().starts_with("wal-"))
            .map(|e| {
                (
                    e.file_name().into_string().unwrap(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
        l.sort();
        l
    };
    loop {
        round += 1;
        assert!(round < 300, "the newest segment never was a recycled file");
        let mut recycled = false;
        commit_rounds(&db, &mut model, round, 1, &mut |_| {
            recycled = newest_is_recycled(dir.path(), &mut spare_inodes);
        });
        if !recycled {
            continue;
        }
        // Two more commits, if they stay in this segment and log file.
        let before = logs(dir.path());
        let (segments, _) = files(dir.path());
        let newest = segments.last().map(|s| s.0);
        for i in 0..2u64 {
            let mut batch = db.begin();
            let v = vec![i as u8 + 1; 24];
            batch.put(key(7_000_000 + i), v.clone()).unwrap();
            model.insert(key(7_000_000 + i), v);
            db.commit(batch.finish().unwrap()).unwrap();
        }
        let (after, _) = files(dir.path());
        if logs(dir.path()).len() != before.len() || after.last().map(|s| s.0) != newest {
            continue;
        }
        let (name, len) = before.last().cloned().unwrap();
        drop(db);
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(&name))
            .unwrap()
            .set_len(len)
            .unwrap();
        match Db::open(dir.path(), options(2)) {
            Err(Error::Corruption { what, .. }) => {
                assert!(what.contains("record is lost"), "{what}");
            }
            Err(e) => panic!("refused, but not as lost records: {e}"),
            Ok(_) => panic!("opened with two commit records lost"),
        }
        return;
    }
}
