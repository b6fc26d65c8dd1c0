//! An import's memory is bounded by its budget, not by its number of changes: 300,000 small
//! changes (75,000 updates, 225,000 inserts) imported into a database of 75,000 entries with
//! an 8 MiB budget peaked at 10 MiB of heap (limit: 24 MiB), while one write batch of the same
//! changes (what `sprig import` used before) peaked at 104 MiB, growing with the number of
//! changes (it holds every change and every new page until it commits); the test measures
//! both.
//!
//! The heap is measured by a counting allocator (this file's one test runs alone in its
//! binary, so the peaks are this test's).

mod common;

use common::heap::{measure, Counting};
use sprig::{Db, ImportOptions, KeyPath, Options};

#[global_allocator]
static ALLOC: Counting = Counting;

/// Changes imported.
const CHANGES: u64 = 300_000;
/// The import's budget.
const BUDGET_BYTES: u64 = 8 << 20;
/// The bound the import must stay under: the budget, the directory references of the ~4,000
/// pages it writes and its commit record.
const IMPORT_PEAK_LIMIT_BYTES: usize = 24 << 20;
/// What one batch of the same changes needs at least (it needed 104 MiB): the comparison shows
/// what the budget saves.
const BATCH_PEAK_FLOOR_BYTES: usize = 64 << 20;

/// The `i`-th key: keys in increasing order, spread evenly over the key space.
fn key(i: u64) -> KeyPath {
    let mut k = sprig_core::Hasher::Blake3.hash_value(&i.to_le_bytes());
    k[..8].copy_from_slice(&(i * (u64::MAX / CHANGES)).to_be_bytes());
    k
}

fn value(i: u64, round: u64) -> Vec<u8> {
    (i ^ round).to_le_bytes().to_vec()
}

fn options() -> Options {
    Options {
        page_cache_bytes: 0,
        ..Options::default()
    }
}

/// A database holding every fourth key.
fn populated(dir: &std::path::Path) -> Db {
    let db = Db::create(dir, options()).unwrap();
    let items = (0..CHANGES).step_by(4).map(|i| (key(i), value(i, 0)));
    db.bulk_load(items, &mut |_| {}).unwrap();
    // A commit, so the import is not the database's first version.
    let mut batch = db.begin();
    batch.put(key(1), vec![1]).unwrap();
    db.commit(batch.finish().unwrap()).unwrap();
    db
}

#[test]
fn an_import_stays_within_its_budget_where_a_batch_grows_with_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path());
    let changes = (0..CHANGES).map(|i| Ok((key(i), Some(value(i, 1)))));
    let budget = ImportOptions {
        memory_bytes: BUDGET_BYTES,
    };
    let (info, peak) = measure(|| db.import_sorted(changes, &budget).unwrap());
    eprintln!(
        "import of {CHANGES} changes with a {} MiB budget: heap peak {} MiB, {} pages written",
        BUDGET_BYTES >> 20,
        peak >> 20,
        info.pages_written
    );
    assert_eq!(db.len(), CHANGES);
    assert_eq!(db.view().get(&key(4)).unwrap(), Some(value(4, 1)));
    assert!(
        peak <= IMPORT_PEAK_LIMIT_BYTES,
        "the import peaked at {} MiB of heap",
        peak >> 20
    );
    let import_root = info.root;
    drop(db);

    // The same changes in one batch, on the same database.
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path());
    let (info, peak) = measure(|| {
        let mut batch = db.begin();
        for i in 0..CHANGES {
            batch.put(key(i), value(i, 1)).unwrap();
        }
        db.commit(batch.finish().unwrap()).unwrap()
    });
    eprintln!(
        "one batch of the same changes: heap peak {} MiB",
        peak >> 20
    );
    assert_eq!(info.root, import_root);
    assert!(
        peak >= BATCH_PEAK_FLOOR_BYTES,
        "the batch peaked at only {} MiB: the comparison no longer shows anything",
        peak >> 20
    );
}
