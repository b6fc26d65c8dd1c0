//! Opening a database replays the commits after its checkpoint; the directory it ends with
//! must not cost more RAM than the same directory built by the commits themselves.
//!
//! Before, recovery held the checkpoint's directory for the whole replay: every node any
//! replayed commit replaced stayed, so each commit's path copies took new slots (utxo 100M,
//! 200 commits after the checkpoint: +38 MiB resident after open).

use sprig::{Db, KeyPath, Options};

fn key(i: u32) -> KeyPath {
    sprig_core::Hasher::Blake3.hash_value(&i.to_le_bytes())
}

#[test]
fn replaying_commits_reuses_the_slots_of_the_versions_it_passes() {
    let dir = tempfile::tempdir().unwrap();
    let options = || Options {
        page_cache_bytes: 0,
        retained_versions: 2,
        ..Options::default()
    };
    let db = Db::create(dir.path(), options()).unwrap();
    // A checkpoint of ~10,000 pages (bulk loads end with one), then 60 commits of 100 random
    // updates after it: together they replace most of the checkpoint's paths.
    let items: Vec<(KeyPath, Vec<u8>)> = (0..200_000).map(|i| (key(i), vec![7u8; 60])).collect();
    db.bulk_load(items, &mut |_| {}).unwrap();
    for round in 0..60u32 {
        let mut batch = db.begin();
        for i in 0..100u32 {
            batch
                .put(key(round * 3_331 + i * 7), vec![9u8; 60])
                .unwrap();
        }
        db.commit(batch.finish().unwrap()).unwrap();
    }
    let root = db.root();
    drop(db);

    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.root(), root);
    let s = db.stats();
    let slack = s.directory_slot_bytes as f64 / s.directory_bytes as f64;
    eprintln!(
        "after replay: directory {} KiB live, {} KiB of slots ({slack:.2}x)",
        s.directory_bytes >> 10,
        s.directory_slot_bytes >> 10
    );
    assert!(
        slack < 1.25,
        "replay left {slack:.2}x the directory's live bytes in slots"
    );
}
