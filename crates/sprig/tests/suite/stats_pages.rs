//! `Stats::pages` is kept as the directory changes (it was a walk of every page per call):
//! it must equal the pages a full check reads, through splits, merges, a second table, a
//! checkpoint and a reopen.

use sprig::{Db, KeyPath, Options, TableOptions};

fn key(i: u32) -> KeyPath {
    sprig_core::Hasher::Blake3.hash_value(&i.to_le_bytes())
}

fn pages_read_by_check(db: &Db) -> u64 {
    let report = db.check(&mut |_, _| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    report.pages
}

#[test]
fn the_page_count_is_what_a_check_reads() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        checkpoint_log_bytes: 64 << 10,
        ..Options::default()
    };
    let db = Db::create(dir.path(), options.clone()).unwrap();
    db.bulk_load((0..6_000u32).map(|i| (key(i), vec![3u8; 50])), &mut |_| {})
        .unwrap();
    assert_eq!(db.stats().pages, pages_read_by_check(&db));
    let blocks = db.create_table("blocks", TableOptions::default()).unwrap();
    for round in 0..12u32 {
        let mut batch = db.begin();
        // Inserts split pages; deleting a run of keys empties and merges them.
        for i in 0..400u32 {
            batch
                .put(key(10_000 + round * 400 + i), vec![5u8; 70])
                .unwrap();
            batch
                .put_in(&blocks, key(round * 400 + i), vec![1u8; 30])
                .unwrap();
        }
        for i in (round * 500)..(round * 500 + 450) {
            batch.delete(key(i));
        }
        db.commit(batch.finish().unwrap()).unwrap();
        assert_eq!(db.stats().pages, pages_read_by_check(&db), "round {round}");
    }
    let before = db.stats().pages;
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.stats().pages, before);
    assert_eq!(db.stats().pages, pages_read_by_check(&db));
}
