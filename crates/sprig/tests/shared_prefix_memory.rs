//! Keys that share a long prefix must cost what random keys cost: a caller may pass raw key
//! paths, so a set of keys agreeing on their first 200 bits (all 1s, or all 0s) is a
//! denial-of-service path if page layout copies every entry once per shared level. Found by an
//! outside tester: 100,000 such keys peaked at 1.73 GB in a bulk load (37 MB for random keys),
//! and the batch path behaved the same.
//!
//! The heap is measured by a counting allocator (this file's one test runs alone in its
//! binary, so the peak is this test's).

mod common;

use common::heap::{measure, Counting};
use sprig::{Db, KeyPath, Options};

#[global_allocator]
static ALLOC: Counting = Counting;

const KEYS: u32 = 100_000;
const SHARED_BITS: usize = 200;
/// Random keys need about 20 MB here (the input, pages, directory); a layout that copies the
/// entries per shared level needs gigabytes.
const PEAK_LIMIT_BYTES: usize = 64 << 20;

fn keys(ones: bool) -> Vec<KeyPath> {
    (0..KEYS)
        .map(|i| {
            let mut k = sprig_core::Hasher::Blake3.hash_value(&i.to_le_bytes());
            for b in 0..SHARED_BITS {
                sprig_core::trie::set_bit(&mut k, b, ones);
            }
            k
        })
        .collect()
}

fn options() -> Options {
    Options {
        page_cache_bytes: 0,
        ..Options::default()
    }
}

#[test]
fn keys_sharing_200_bits_load_and_commit_in_bounded_memory() {
    for ones in [true, false] {
        let keys = keys(ones);

        let dir = tempfile::tempdir().unwrap();
        let db = Db::create(dir.path(), options()).unwrap();
        let items: Vec<(KeyPath, Vec<u8>)> = keys.iter().map(|k| (*k, vec![7u8; 8])).collect();
        let (report, peak) = measure(|| db.bulk_load(items, &mut |_| {}).unwrap());
        assert_eq!(report.entries, u64::from(KEYS));
        eprintln!(
            "bulk load, shared bits all {}: heap peak {} KiB",
            u8::from(ones),
            peak >> 10
        );
        assert!(
            peak <= PEAK_LIMIT_BYTES,
            "bulk load of keys sharing {SHARED_BITS} {} bits: heap peak {} MiB",
            u8::from(ones),
            peak >> 20
        );
        let sample = keys[KEYS as usize / 2];
        assert_eq!(db.view().get(&sample).unwrap(), Some(vec![7u8; 8]));
        drop(db);

        let dir = tempfile::tempdir().unwrap();
        let db = Db::create(dir.path(), options()).unwrap();
        let (info, peak) = measure(|| {
            let mut batch = db.begin();
            for k in &keys {
                batch.put(*k, vec![9u8; 8]).unwrap();
            }
            db.commit(batch.finish().unwrap()).unwrap()
        });
        assert_eq!(info.seq, 1);
        eprintln!(
            "one batch, shared bits all {}: heap peak {} KiB",
            u8::from(ones),
            peak >> 10
        );
        assert!(
            peak <= PEAK_LIMIT_BYTES,
            "one batch of keys sharing {SHARED_BITS} {} bits: heap peak {} MiB",
            u8::from(ones),
            peak >> 20
        );
        assert_eq!(db.len(), u64::from(KEYS));
        assert_eq!(db.view().get(&sample).unwrap(), Some(vec![9u8; 8]));
    }
}
