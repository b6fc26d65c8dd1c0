//! Checkpoints: raw bytes either fail to decode with a corruption error or give a checkpoint
//! that stores and loads back to the same root, sequence number and log position.
//! Structure-aware: a checkpoint (checksum and all) with hostile values in its segment size,
//! active segment, segment ids, fill levels, value-record extents and page locations either
//! fails to load with a corruption error or holds only what fits the segment geometry, and
//! allocating from its table is a location or an error, never an overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::io::MemoryStorage;
use sprig::log::checkpoint::Checkpoint;
use sprig::log::record::for_each_disk_page;
use sprig::log::segments::{
    check_loc, check_segment_blocks, check_segment_id, check_used_blocks, check_value_extent, loc,
    loc_segment, SegmentMeta, SegmentTable, MIN_SEGMENT_BLOCKS,
};
use sprig::state::arena::Arena;
use sprig::state::directory::{Directory, PageLoc, PageRef, Subtree};
use sprig::state::prefix::Prefix;
use sprig::state::tables::Tables;
use sprig_fuzz::{
    hasher, hostile_blocks, hostile_loc, hostile_page_loc, hostile_segment, hostile_segment_blocks,
    key, Choices,
};

fn raw(bytes: &[u8], h: sprig::Hasher) {
    match Checkpoint::decode("fuzz.ckpt", bytes, &Arena::new(), h) {
        Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
        Ok(cp) => {
            let storage = MemoryStorage::new();
            assert!(
                cp.store(&storage).is_ok(),
                "a decoded checkpoint cannot be stored"
            );
            let back = Checkpoint::load(&storage, cp.seq, &Arena::new(), h);
            let same = back.as_ref().is_ok_and(|b| {
                b.tables.db_root() == cp.tables.db_root()
                    && b.tables.total_len() == cp.tables.total_len()
                    && (b.wal_id, b.wal_offset) == (cp.wal_id, cp.wal_offset)
            });
            assert!(same, "a checkpoint does not round-trip: {:?}", back.err());
        }
    }
}

/// A checkpoint of two pages with hostile segment fields.
fn hostile(c: &mut Choices<'_>, h: sprig::Hasher) {
    let blocks = hostile_segment_blocks(c, MIN_SEGMENT_BLOCKS);
    let mut table = SegmentTable::new(blocks);
    table.active = hostile_segment(c, 1);
    for i in 0..c.byte() % 3 {
        let id = hostile_segment(c, u32::from(i) + 1);
        let meta = SegmentMeta {
            used_blocks: hostile_blocks(c, 10, blocks),
            ..SegmentMeta::default()
        };
        table.segments.insert(id, meta);
    }
    for i in 0..c.byte() % 3 {
        let l = hostile_loc(c, loc(1, 20 + u32::from(i)), blocks);
        table
            .values
            .insert(l, (hostile_blocks(c, 1, blocks), 0, key(i)));
    }
    let arena = Arena::new();
    let mut page = |fill: u8, at: u64| {
        let mut node = [fill; 32];
        node[0] = 0x80;
        Subtree::page(
            &arena,
            &PageRef {
                loc: PageLoc::Disk(hostile_page_loc(c, at, blocks)),
                checksum: 1,
                node,
                count: 1,
            },
        )
    };
    let (left, right) = (page(1, loc(1, 0)), page(2, loc(1, 1)));
    let tree = Subtree::branch(h, left, right);
    let Ok(dir) = Directory::empty(&arena, h).replace(vec![(Prefix::root(), tree)]) else {
        panic!("two pages do not make a directory");
    };
    let cp = Checkpoint {
        seq: 1,
        wal_id: 1,
        wal_offset: 0,
        durable_seq: 1,
        table,
        tables: Tables::only_default(dir),
    };
    let storage = MemoryStorage::new();
    assert!(cp.store(&storage).is_ok(), "a checkpoint cannot be stored");
    match Checkpoint::load(&storage, 1, &Arena::new(), h) {
        Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
        Ok(mut back) => {
            let t = &back.table;
            let sb = t.segment_blocks;
            assert!(check_segment_blocks(sb).is_ok(), "segment size {sb} loaded");
            assert!(
                check_segment_id(t.active).is_ok(),
                "active {} loaded",
                t.active
            );
            for (id, m) in &t.segments {
                assert!(check_segment_id(*id).is_ok(), "segment {id} loaded");
                assert!(check_used_blocks(m.used_blocks, sb).is_ok(), "fill loaded");
            }
            for (l, (n, _, _)) in &t.values {
                assert!(
                    check_value_extent(*l, *n, sb).is_ok(),
                    "value {l:#x} loaded"
                );
            }
            for (_, dir) in back.tables.dirs() {
                for_each_disk_page(&dir.tree(), &mut |l| {
                    assert!(check_loc(l, sb).is_ok(), "a page at {l:#x} loaded");
                });
            }
            let n = hostile_blocks(c, 1, sb);
            if let Ok(l) = back.table.allocate(n) {
                assert!(check_segment_id(loc_segment(l)).is_ok(), "allocated {l:#x}");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    if c.coin() {
        hostile(&mut c, h);
    } else {
        raw(c.rest(), h);
    }
});
