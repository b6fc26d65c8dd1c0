//! The cleaner keeps disk use within about twice the live data under rounds of random
//! updates, without changing a single value or the root.

use sprig::{Db, KeyPath, Options, ReadView};
use sprig_core::ReferenceModel;

#[test]
fn disk_use_stays_bounded_under_random_updates() {
    rounds_of_random_updates(1);
}

/// With 4 retained versions and commits that each rewrite most pages, the versions hold
/// twice the live data and more; disk use less what they hold (`Stats::retained_bytes`, which
/// no cleaner can reclaim before they go) stays within the bound, and what they hold goes
/// with them.
#[test]
fn retained_versions_add_what_they_hold_and_no_more() {
    let (dir, db, model) = rounds_of_random_updates(4);
    let s = db.stats();
    assert!(
        s.retained_bytes > s.live_bytes,
        "4 versions of commits that rewrite most pages hold more than the live data: {s:?}"
    );
    assert!(s.total_space_amplification() > s.space_amplification());
    let disk_before = s.disk_bytes;
    drop(db);
    // Reopened keeping only the latest version: what older versions held is released at
    // once, and segments only they needed are deleted by the open.
    let db = Db::open(
        dir.path(),
        Options {
            retained_versions: 1,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(db.root(), model.root());
    let s = db.stats();
    assert_eq!(s.retained_bytes, 0, "{s:?}");
    assert_eq!(s.space_amplification(), s.total_space_amplification());
    assert!(s.segments_deleted > 0, "{s:?}");
    assert!(s.disk_bytes < disk_before, "{s:?}");
    assert!(
        s.disk_bytes <= segment_file_bytes(dir.path()),
        "{} counted, {} in segment files",
        s.disk_bytes,
        segment_file_bytes(dir.path())
    );
    let mut b = db.begin();
    b.put([1; 32], b"one more".to_vec()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    assert_eq!(db.stats().retained_bytes, 0);
}

/// Options with 1 MiB segments (so the cleaner soon has segments to clean), `page_cache_bytes`
/// of page cache and `retained_versions` versions kept.
fn small_segments(page_cache_bytes: u64, retained_versions: usize) -> Options {
    Options {
        segment_bytes: 1 << 20,
        page_cache_bytes,
        retained_versions,
        ..Options::default()
    }
}

/// Ten rounds of four commits of 1,500 random updates to 60,000 keys (most pages rewritten by
/// every commit; some values in the value log), with `retained` versions kept; checks disk use
/// after every round and the values and root at the end, also after a reopen.
fn rounds_of_random_updates(retained: usize) -> (tempfile::TempDir, Db, ReferenceModel) {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments(1 << 20, retained);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let (keys, mut model) = load(&db, 60_000, |i| {
        if i % 997 == 0 {
            vec![7u8; 5000]
        } else {
            (i as u64).to_le_bytes().to_vec()
        }
    });
    let mut state = 1u64;
    for round in 0..10u64 {
        for _ in 0..4 {
            let mut b = db.begin();
            for _ in 0..1500 {
                let r = next(&mut state);
                let k = keys[(r >> 33) as usize % keys.len()];
                let v = if r.is_multiple_of(1000) {
                    vec![round as u8; 3000]
                } else {
                    state.to_le_bytes().to_vec()
                };
                b.put(k, v.clone()).unwrap();
                model.insert(k, v);
            }
            db.commit(b.finish().unwrap()).unwrap();
        }
        let s = db.stats();
        assert!(
            s.space_amplification() <= 2.0,
            "round {round}, {retained} retained: disk {} bytes, {} of them held for retained \
             versions, for {} live ({:.2}x without what is retained, {:.2}x in all)",
            s.disk_bytes,
            s.retained_bytes,
            s.live_bytes,
            s.space_amplification(),
            s.total_space_amplification()
        );
        assert!(
            s.retained_bytes <= s.disk_bytes.saturating_sub(s.live_bytes),
            "{s:?}"
        );
    }
    let s = db.stats();
    assert!(s.cleaner_pages_copied > 0, "the cleaner never ran: {s:?}");
    assert!(s.segments_deleted > 0, "no segment was reclaimed: {s:?}");
    assert_eq!(db.root(), model.root());
    assert_values(&db.view(), &keys, &model);
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.root(), model.root());
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(files < 80, "{files} files left in the database directory");
    (dir, db, model)
}

/// With a page cache that holds the live pages, cleaning costs no SSD read: the pages a
/// commit supersedes are never read to be moved (they are garbage once it is durable), the
/// others come from the cache; and superseded pages leave the cache, so it holds what is live
/// instead of filling with old versions.
#[test]
fn cleaning_reads_nothing_the_cache_holds_or_the_commit_supersedes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_segments(64 << 20, 1)).unwrap();
    let keys = load_keys(&db, 40_000);
    let mut state = 9u64;
    for round in 0..30u64 {
        put_random(&db, &keys, &mut state, 3000, &round.to_le_bytes());
        let s = db.stats();
        assert!(
            s.cached_pages <= s.pages,
            "round {round}: {} pages cached for {} live ones",
            s.cached_pages,
            s.pages
        );
    }
    let s = db.stats();
    assert!(s.cleaner_pages_copied > 0, "the cleaner never ran: {s:?}");
    assert_eq!(s.maintenance_page_reads, 0, "{s:?}");
}

/// Without a page cache, the pages the cleaner moves are read ahead while each commit's batch
/// is finished (a batch of more than a few regions), not on the commit's path: most pages
/// moved come from the read-ahead, none of it changes a value or the root, and a batch
/// finished but never committed leaves nothing that disturbs the next commit.
#[test]
fn the_cleaner_reads_ahead_while_batches_finish() {
    let (dir, db, keys, mut expected) = uncached(40_000);
    let mut state = 5u64;
    for round in 0..30u64 {
        put_random_round(&db, &keys, &mut state, round, &mut expected);
        if round % 7 == 3 {
            // Finished (its read-ahead started), then dropped.
            let mut b = db.begin();
            for k in keys.iter().step_by(13) {
                b.put(*k, b"never committed".to_vec()).unwrap();
            }
            drop(b.finish().unwrap());
        }
    }
    let s = db.stats();
    assert!(s.cleaner_pages_copied > 0, "the cleaner never ran: {s:?}");
    assert!(
        s.cleaner_pages_read_ahead * 2 > s.cleaner_pages_copied,
        "{} of {} pages moved were read ahead",
        s.cleaner_pages_read_ahead,
        s.cleaner_pages_copied
    );
    assert_eq!(db.root(), expected.root());
    assert_values(&db.view(), &keys, &expected);
    drop(db);
    let db = Db::open(dir.path(), small_segments(0, 1)).unwrap();
    assert_eq!(db.root(), expected.root());
    assert_values(&db.view(), &keys, &expected);
}

/// Without a page cache, the cleaner reads the live pages it moves from the SSD, and reads
/// those close together in one segment with one read each: fewer reads than pages moved, each
/// counted once, with the blocks between counted in the bytes read. Values and root unchanged.
#[test]
fn cleaning_reads_close_pages_together() {
    let (_dir, db, keys, mut expected) = uncached(40_000);
    let mut state = 11u64;
    for round in 0..30u64 {
        put_random_round(&db, &keys, &mut state, round, &mut expected);
    }
    let s = db.stats();
    assert!(s.cleaner_pages_copied > 0, "the cleaner never ran: {s:?}");
    assert!(
        s.maintenance_page_reads < s.cleaner_pages_copied,
        "{} reads for {} pages moved",
        s.maintenance_page_reads,
        s.cleaner_pages_copied
    );
    // No value lives outside its page here: every byte read is a block of a page read.
    assert!(
        s.bytes_read / 4096 > s.page_reads(),
        "the runs' blocks are counted in the bytes read: {s:?}"
    );
    assert_eq!(db.root(), expected.root());
    assert_values(&db.view(), &keys, &expected);
}

/// An explicit clean that moves more live pages than the cleaner reads at once (its reads go
/// in groups of at most 512 blocks, so that their buffers stay small) moves every one of
/// them: each group's pages are decoded into their own places, none is lost or swapped, and
/// the values and root are unchanged, also after a reopen.
#[test]
fn a_clean_larger_than_one_read_group_moves_every_page() {
    let dir = tempfile::tempdir().unwrap();
    // No automatic cleaning: the half-live segments the explicit clean below finds are the
    // commits' doing alone, not also a policy's.
    let options = Options {
        segment_bytes: 4 << 20,
        page_cache_bytes: 0,
        auto_clean: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let (keys, mut model) = load(&db, 300_000, |i| (i as u64).to_le_bytes().to_vec());
    // About half the pages rewritten: the loaded segments are left about half live.
    let mut state = 5u64;
    for _ in 0..4 {
        let mut b = db.begin();
        for _ in 0..1000 {
            let r = next(&mut state);
            let k = keys[(r >> 33) as usize % keys.len()];
            b.put(k, r.to_le_bytes().to_vec()).unwrap();
            model.insert(k, r.to_le_bytes().to_vec());
        }
        db.commit(b.finish().unwrap()).unwrap();
    }
    let reads_before = db.stats().bytes_read;
    let info = db.clean().unwrap().expect("half-live segments to clean");
    let read_blocks = (db.stats().bytes_read - reads_before) / 4096;
    assert!(
        info.pages_relocated > 512 && read_blocks > 512,
        "the clean moved {} pages and read {read_blocks} blocks: not more than one group",
        info.pages_relocated
    );
    assert_eq!(db.root(), model.root());
    assert_values(&db.view(), &keys, &model);
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.root(), model.root());
    assert_values(&db.view(), &keys, &model);
}

/// `n` keys, each put with its first 8 bytes as the value, in one commit.
fn load_keys(db: &Db, n: u32) -> Vec<KeyPath> {
    let keys: Vec<KeyPath> = (0..n).map(|i| db.key_path(&i.to_le_bytes())).collect();
    let mut b = db.begin();
    for k in &keys {
        b.put(*k, k[..8].to_vec()).unwrap();
    }
    db.commit(b.finish().unwrap()).unwrap();
    keys
}

/// A commit that writes a few pages moves a bounded number of live pages and values (4 per
/// block it writes, at least 256), however full the victim segments are: a big victim drains
/// over several commits instead of stalling one (before, a commit moved every live page of up
/// to four victims). Disk use stays within the bound give or take a segment while victims
/// drain, and no value or root changes.
#[test]
fn big_victims_drain_over_commits_in_bounded_steps() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        segment_bytes: 16 << 20,
        page_cache_bytes: 4 << 20,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    // One key in 50 holds a value in the value log: victims hold values to move too.
    let (keys, mut model) = load(&db, 200_000, |i| {
        if i % 50 == 0 {
            vec![(i % 251) as u8; 2000]
        } else {
            (i as u64).to_le_bytes().to_vec()
        }
    });
    let mut state = 3u64;
    let (mut in_steps, mut worst_amp) = (0usize, 0f64);
    for _ in 0..600 {
        let mut b = db.begin();
        let mut value_blocks = 0u64;
        for _ in 0..60 {
            let r = next(&mut state);
            let k = keys[(r >> 33) as usize % keys.len()];
            let v = if r.is_multiple_of(10) {
                value_blocks += 1;
                vec![(r >> 8) as u8; 2000]
            } else {
                r.to_le_bytes().to_vec()
            };
            b.put(k, v.clone()).unwrap();
            model.insert(k, v);
        }
        let info = db.commit(b.finish().unwrap()).unwrap();
        // The budget: 4 per block the commit writes for itself (its pages and values).
        let own = info.pages_written - info.pages_relocated + value_blocks;
        let budget = (4 * own).max(256);
        assert!(
            info.pages_relocated <= budget && info.values_relocated <= budget,
            "a commit writing {own} blocks of its own moved more than {budget}: {info:?}"
        );
        in_steps += usize::from(info.pages_relocated > budget / 2);
        worst_amp = worst_amp.max(db.stats().space_amplification());
    }
    let s = db.stats();
    assert!(
        in_steps >= 2,
        "no victim drained in steps ({in_steps} commits moved over half their budget): {s:?}"
    );
    assert!(s.segments_deleted > 0, "no segment was reclaimed: {s:?}");
    assert!(s.cleaner_values_copied > 0, "no value was moved: {s:?}");
    let segment_share = (16u64 << 20) as f64 / s.live_bytes as f64;
    assert!(
        worst_amp <= 2.0 + segment_share,
        "disk use reached {worst_amp:.2}x the live data (a segment is {segment_share:.2}x)"
    );
    assert_eq!(db.root(), model.root());
    assert_values(&db.view(), &keys, &model);
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.root(), model.root());
}

/// One commit of `n` keys (the key paths of 0..n) with `value(i)` at key `i`; the keys and
/// the model holding them.
fn load(db: &Db, n: u32, value: impl Fn(usize) -> Vec<u8>) -> (Vec<KeyPath>, ReferenceModel) {
    let mut model = ReferenceModel::new(db.hasher());
    let keys: Vec<KeyPath> = (0..n).map(|i| db.key_path(&i.to_le_bytes())).collect();
    let mut b = db.begin();
    for (i, k) in keys.iter().enumerate() {
        let v = value(i);
        b.put(*k, v.clone()).unwrap();
        model.insert(*k, v);
    }
    db.commit(b.finish().unwrap()).unwrap();
    (keys, model)
}

/// Every key of `keys` reads in `view` what `model` holds.
fn assert_values(view: &ReadView, keys: &[KeyPath], model: &ReferenceModel) {
    let values = view.get_many(keys).unwrap();
    for (k, v) in keys.iter().zip(values) {
        assert_eq!(v.as_deref(), model.get(k), "key {k:02x?}");
    }
}

/// The next number of a linear congruential sequence (the tests' cheap, seeded randomness).
fn next(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state
}

/// One commit putting `value` at `n` keys drawn from `keys`; the keys put.
fn put_random(db: &Db, keys: &[KeyPath], state: &mut u64, n: usize, value: &[u8]) -> Vec<KeyPath> {
    let mut b = db.begin();
    let mut put = Vec::with_capacity(n);
    for _ in 0..n {
        let k = keys[(next(state) >> 33) as usize % keys.len()];
        b.put(k, value.to_vec()).unwrap();
        put.push(k);
    }
    db.commit(b.finish().unwrap()).unwrap();
    put
}

/// A database of `n` keys (see [`load_keys`]) with 1 MiB segments and no page cache, and the
/// model of its state.
fn uncached(n: u32) -> (tempfile::TempDir, Db, Vec<KeyPath>, ReferenceModel) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_segments(0, 1)).unwrap();
    let keys = load_keys(&db, n);
    let mut model = ReferenceModel::new(db.hasher());
    for k in &keys {
        model.insert(*k, k[..8].to_vec());
    }
    (dir, db, keys, model)
}

/// One commit of 3,000 random updates to `keys`, all set to `round`'s bytes, in `model` too.
fn put_random_round(
    db: &Db,
    keys: &[KeyPath],
    state: &mut u64,
    round: u64,
    model: &mut ReferenceModel,
) {
    let value = round.to_le_bytes();
    for k in put_random(db, keys, state, 3000, &value) {
        model.insert(k, value.to_vec());
    }
}

/// The bytes of the segment files in `dir`.
fn segment_file_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("seg-"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Disk use as reported after a reopen is the segments that exist: segments the cleaner
/// deleted after the last checkpoint are not counted again because the checkpoint's segment
/// table (and the log replayed after it) still lists them. (It did: a database at 1.9x
/// reported 2.7x after a reopen, until its next commit.)
#[test]
fn disk_use_after_a_reopen_counts_only_segments_that_exist() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments(1 << 20, 1);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let keys = load_keys(&db, 30_000);
    db.checkpoint().unwrap();
    let mut state = 5u64;
    for round in 0..12u64 {
        put_random(&db, &keys, &mut state, 2000, &round.to_le_bytes());
    }
    let before = db.stats();
    assert!(
        before.segments_deleted > 0,
        "no segment was reclaimed: {before:?}"
    );
    let root = db.root();
    drop(db);
    let files = segment_file_bytes(dir.path());
    assert!(
        before.disk_bytes <= files,
        "{} > {files}",
        before.disk_bytes
    );

    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.root(), root);
    let after = db.stats();
    assert!(
        after.disk_bytes <= segment_file_bytes(dir.path()),
        "after a reopen: {} bytes counted, {} in segment files ({:.2}x counted, {:.2}x before)",
        after.disk_bytes,
        segment_file_bytes(dir.path()),
        after.space_amplification(),
        before.space_amplification()
    );
    assert_eq!(after.live_bytes, before.live_bytes);
    assert_eq!(after.disk_bytes, before.disk_bytes);
}

/// After a rollback the target's pages are live again: what older versions keep is the
/// rolled-back version's data, not those pages a second time (the commit that had replaced
/// them counted them as held for older versions, and a rollback cannot say which of the held
/// blocks it brought back).
#[test]
fn a_rollback_does_not_count_live_pages_as_retained() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        segment_bytes: 1 << 20,
        retained_versions: 4,
        auto_clean: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let keys: Vec<KeyPath> = (0..20_000u32)
        .map(|i| db.key_path(&i.to_le_bytes()))
        .collect();
    let commit_all = |round: u8| {
        let mut b = db.begin();
        for k in &keys {
            b.put(*k, vec![round; 16]).unwrap();
        }
        db.commit(b.finish().unwrap()).unwrap().seq
    };
    let first = commit_all(1);
    let first_root = db.root();
    commit_all(2);
    let before = db.stats();
    db.rollback_to(first).unwrap();
    assert_eq!(db.root(), first_root);
    let s = db.stats();
    assert!(
        s.retained_bytes <= s.disk_bytes.saturating_sub(s.live_bytes),
        "retained {} of {} on disk with {} live; before the rollback {before:?}",
        s.retained_bytes,
        s.disk_bytes,
        s.live_bytes
    );
    assert!(
        s.retained_bytes >= before.live_bytes / 2,
        "the rolled-back version's pages are retained: {s:?}"
    );
}

/// A chain of stacked overlays commits right while the cleaner relocates pages in each of its
/// commits. The first commit of the chain moves its overlay's pages to disk in place and
/// relocates others; the overlays above it were built on its pre-relocation directory, so
/// their commits compute their result from the record instead of taking their own directory
/// (which still points at the relocated pages' old places, soon reused). Views of the
/// overlays taken before the commit read right through it, and the database after a reopen.
#[test]
fn stacked_overlays_commit_over_a_parent_whose_commit_relocated_pages() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        segment_bytes: 1 << 20,
        page_cache_bytes: 1 << 20,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let (keys, mut model) = load(&db, 30_000, |i| (i as u64).to_le_bytes().to_vec());
    let mut state = 7u64;
    let mut random_batch = |model: &mut ReferenceModel, b: &mut sprig::WriteBatch| {
        for _ in 0..1000 {
            let r = next(&mut state);
            let k = keys[(r >> 33) as usize % keys.len()];
            let v = r.to_le_bytes().to_vec();
            b.put(k, v.clone()).unwrap();
            model.insert(k, v);
        }
    };
    // Enough garbage that every commit from here on has victims to relocate.
    for _ in 0..12 {
        let mut b = db.begin();
        random_batch(&mut model, &mut b);
        db.commit(b.finish().unwrap()).unwrap();
    }
    let copied_before = db.stats().cleaner_pages_copied;
    for round in 0..4 {
        let mut a = db.begin();
        random_batch(&mut model, &mut a);
        let a = a.finish().unwrap();
        let mut b = a.begin().unwrap();
        random_batch(&mut model, &mut b);
        let b = b.finish().unwrap();
        let mut c = b.begin().unwrap();
        random_batch(&mut model, &mut c);
        let c = c.finish().unwrap();
        let c_view = c.view().unwrap();
        let info = db.commit(c).unwrap();
        assert_eq!(info.root, model.root(), "round {round}");
        assert_values(&c_view, &keys, &model);
    }
    assert!(
        db.stats().cleaner_pages_copied > copied_before,
        "the cleaner relocated nothing during the chains"
    );
    assert_values(&db.view(), &keys, &model);
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.root(), model.root());
    assert_values(&db.view(), &keys, &model);
}
