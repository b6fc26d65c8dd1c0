//! What the directory costs in RAM: a few bytes per entry for the latest version, versions
//! retained for history sharing what they have in common, and every byte returned when the
//! database is closed.
//!
//! Before the node store (`state/arena.rs`), each page cost ~190 bytes of heap objects; and a
//! first version of the store leaked it whole on close (a forgotten handle kept it alive).
//! The heap is measured by a counting allocator (this file's one test runs alone in its
//! binary).

mod common;

use common::heap::{current, Counting};
use sprig::{Db, KeyPath, Options};

#[global_allocator]
static ALLOC: Counting = Counting;

const ENTRIES: u32 = 200_000;
/// A page (48 bytes in a twig) and its share of the branches (~13 bytes) per page of ~24
/// UTXO-sized entries: about 2.6 bytes per entry.
const DIRECTORY_BYTES_PER_ENTRY: f64 = 4.0;
/// The engine's memory bound for the directory, whatever the value size.
const DIRECTORY_BYTES_PER_PAGE: f64 = 64.0;

fn key(i: u32) -> KeyPath {
    sprig_core::Hasher::Blake3.hash_value(&i.to_le_bytes())
}

#[test]
fn the_directory_costs_a_few_bytes_per_entry_and_is_freed_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let before = current();
    let options = Options {
        page_cache_bytes: 0,
        retained_versions: 8,
        ..Options::default()
    };
    let db = Db::create(dir.path(), options).unwrap();
    let items: Vec<(KeyPath, Vec<u8>)> = (0..ENTRIES).map(|i| (key(i), vec![7u8; 60])).collect();
    db.bulk_load(items, &mut |_| {}).unwrap();
    let loaded = db.stats();
    let per_entry = loaded.directory_bytes as f64 / f64::from(ENTRIES);
    eprintln!(
        "{} pages, directory {} KiB: {per_entry:.2} bytes per entry",
        loaded.pages,
        loaded.directory_bytes >> 10
    );
    assert!(
        per_entry <= DIRECTORY_BYTES_PER_ENTRY,
        "directory: {per_entry:.2} bytes per entry"
    );
    // 85.6 with the node store before twigs held their pages and low branches their nodes.
    let per_page = loaded.directory_bytes as f64 / loaded.pages as f64;
    assert!(
        per_page <= DIRECTORY_BYTES_PER_PAGE,
        "directory: {per_page:.1} bytes per leaf page"
    );

    // Sixteen commits of 100 random updates with 8 versions retained: the retained versions
    // share all but the paths their commits changed (~100 pages and ~700 branches of ~17,000
    // nodes each).
    for round in 0..16u32 {
        let mut batch = db.begin();
        for i in 0..100u32 {
            batch
                .put(key(round * 7_919 + i * 13), vec![9u8; 60])
                .unwrap();
        }
        db.commit(batch.finish().unwrap()).unwrap();
    }
    let after = db.stats();
    assert_eq!(after.retained_versions, 8);
    let growth = after.directory_bytes as f64 / loaded.directory_bytes as f64;
    eprintln!(
        "8 retained versions: directory {} KiB ({growth:.2}x the latest alone)",
        after.directory_bytes >> 10
    );
    // Unshared, 8 versions would take 8x; each costs ~5% more here (a changed page's twig
    // sibling is copied into the new twig).
    assert!(growth < 1.8, "retained versions do not share: {growth:.2}x");

    drop(db);
    // The background reclaimer may still be dropping what it was handed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while current() > before + (1 << 20) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left = current().saturating_sub(before);
    assert!(
        left <= 1 << 20,
        "{} KiB still allocated after the database was closed",
        left >> 10
    );
}
