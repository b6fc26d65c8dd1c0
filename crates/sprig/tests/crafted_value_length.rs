//! A value length read from disk cannot make a read allocate more than the disk holds. The
//! database is crafted the way only a deliberate forger (or a bug) could: a page whose entry
//! claims a value of `len` bytes, the value record's header rewritten to match (checksum and
//! all), and the checkpoint's directory given the crafted page's checksum, so every check that
//! comes before the read passes. The segment holds the small record and 40 more blocks after
//! it. Reading the key must be a corruption error naming the segment, with the heap barely
//! moving. Before, the read allocated the whole claimed record first (4 GiB for
//! `MAX_VALUE_BYTES`).
//!
//! The heap is measured by a counting allocator (this file's one test runs alone in its
//! binary, so the peak is this test's).

mod common;

use common::heap::{measure, Counting};
use sprig::io::{MemoryStorage, OpenOptions, Storage};
use sprig::log::checkpoint::{parse_checkpoint_file_name, Checkpoint};
use sprig::log::segments::{
    encode_value_header, loc_offset, loc_segment, segment_file_name, Segments,
};
use sprig::state::arena::Arena;
use sprig::state::directory::{PageLoc, PageRef, Subtree};
use sprig::state::page::{ExternalValue, Page, ValueRef};
use sprig::{Db, Hasher, Options, MAX_VALUE_BYTES};
use std::sync::Arc;

#[global_allocator]
static ALLOC: Counting = Counting;

/// A read of a small value needs a few blocks; a read that trusts the length needs `len`.
const PEAK_LIMIT_BYTES: usize = 1 << 20;

fn options() -> Options {
    Options {
        hasher: Some(Hasher::Blake3),
        page_cache_bytes: 0,
        retained_versions: 1,
        ..Options::default()
    }
}

/// A database holding a 2,000-byte value followed by 40 others, then crafted so that the first
/// one's page and value record claim `len` bytes. Returns the storage and the key.
fn crafted(len: u64) -> (Arc<MemoryStorage>, sprig::KeyPath) {
    let storage = Arc::new(MemoryStorage::new());
    let db = Db::open_with_storage(storage.clone(), options()).unwrap();
    let key = db.key_path(b"big");
    let mut batch = db.begin();
    batch.put(key, vec![7u8; 2_000]).unwrap();
    db.commit(batch.finish().unwrap()).unwrap();
    let mut batch = db.begin();
    for i in 0..40u32 {
        batch
            .put(db.key_path(&i.to_le_bytes()), vec![8u8; 2_000])
            .unwrap();
    }
    db.commit(batch.finish().unwrap()).unwrap();
    db.checkpoint().unwrap();
    drop(db);

    let names = storage.list().unwrap();
    let seq = names
        .iter()
        .filter_map(|n| parse_checkpoint_file_name(n))
        .max()
        .unwrap();
    let mut cp = Checkpoint::load(storage.as_ref(), seq, &Arena::new(), Hasher::Blake3).unwrap();
    let (prefix, r) = cp.tables.default_dir().locate(&key);
    let Some(r) = r else {
        panic!("no page holds the key");
    };
    let PageLoc::Disk(page_loc) = r.loc else {
        panic!("the page is not on disk");
    };
    let segments = Segments::new(storage.clone(), Hasher::Blake3, options().segment_blocks());
    let page = segments.read_page(page_loc, r.checksum, &prefix).unwrap();
    let Some(ValueRef::External(x)) = page.get(&key) else {
        panic!("the value is not in the value log");
    };

    // The value record's header claims `len` bytes, with a matching checksum.
    let value_file = storage
        .open(
            &segment_file_name(loc_segment(x.loc)),
            OpenOptions {
                create: false,
                direct: false,
            },
        )
        .unwrap();
    value_file
        .write_at(&encode_value_header(&key, len, &x.hash), loc_offset(x.loc))
        .unwrap();
    // The page claims it too (its trie node commits to the hash only, so the root is unchanged).
    let claimed = ExternalValue { len, ..x };
    let rebuilt = Page::build(
        Hasher::Blake3,
        *page.prefix(),
        page.seq(),
        &[(key, ValueRef::External(claimed))],
    )
    .unwrap();
    let page_file = storage
        .open(
            &segment_file_name(loc_segment(page_loc)),
            OpenOptions {
                create: false,
                direct: false,
            },
        )
        .unwrap();
    page_file
        .write_at(rebuilt.bytes(), loc_offset(page_loc))
        .unwrap();
    // And the checkpoint's directory holds the crafted page's checksum.
    let crafted_ref = Subtree::page(
        cp.tables.arena(),
        &PageRef {
            checksum: sprig::codec::checksum(rebuilt.bytes()),
            ..r.clone()
        },
    );
    let root = cp.tables.default_dir().root_node();
    let dir = cp
        .tables
        .default_dir()
        .replace(vec![(prefix, crafted_ref)])
        .unwrap();
    assert_eq!(dir.root_node(), root);
    cp.tables = cp.tables.with_dir(0, dir).unwrap();
    cp.store(storage.as_ref()).unwrap();
    (storage, key)
}

#[test]
fn a_crafted_value_length_is_corruption_without_allocating_it() {
    for len in [64 << 20, MAX_VALUE_BYTES as u64] {
        let (storage, key) = crafted(len);
        let db = Db::open_with_storage(storage, options()).unwrap();
        let view = db.view();
        let (got, peak) = measure(|| view.get(&key));
        let e = got.expect_err("a crafted length was served");
        assert!(e.is_corruption(), "len {len}: {e}");
        assert!(
            e.to_string()
                .contains("seg-0000000001.dat at offset 0: value record extends past"),
            "len {len}: {e}"
        );
        println!("crafted value length {len}: {e}; heap peak {peak} bytes");
        assert!(
            peak < PEAK_LIMIT_BYTES,
            "len {len}: the read allocated {peak} bytes"
        );
        // The same through a batch.
        let mut batch = db.begin();
        let (got, peak) = measure(|| batch.get(&key));
        assert!(got.is_err_and(|e| e.is_corruption()), "len {len}: batch");
        assert!(
            peak < PEAK_LIMIT_BYTES,
            "len {len}: a batch read {peak} bytes"
        );
    }
}
