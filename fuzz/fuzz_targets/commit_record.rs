//! Commit records and the log around them: raw payloads either fail to decode or re-encode to
//! a record that decodes the same, and applying one to a directory never panics; raw log files
//! replay to records or errors, never a panic. Structure-aware: a valid record with hostile
//! values in its page locations, value-record extents, freed locations, segment ids and fill
//! levels either is refused whole or leaves a segment table whose every location fits the
//! segment geometry, and allocating from that table is a location or an error, never an
//! overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::log::record::{apply_record, for_each_disk_page, CommitRecord};
use sprig::log::segments::{
    check_loc, check_segment_id, check_value_extent, loc, loc_segment, SegmentTable,
    MIN_SEGMENT_BLOCKS,
};
use sprig::log::wal::{wal_file_name, Wal};
use sprig::state::arena::Arena;
use sprig::state::directory::{Directory, PageLoc, PageRef, Subtree};
use sprig::state::prefix::Prefix;
use sprig::state::tables::Tables;
use sprig_fuzz::{
    hasher, hostile_blocks, hostile_loc, hostile_page_loc, hostile_segment, key, memory_file,
    Choices,
};

const SEGMENT_BLOCKS: u32 = MIN_SEGMENT_BLOCKS;

/// After a record applied: every location the table and directory hold fits the geometry,
/// and an allocation is a valid location or an error.
fn check_applied(tables: &Tables, table: &mut SegmentTable, blocks: u32) {
    for (_, dir) in tables.dirs() {
        for_each_disk_page(&dir.tree(), &mut |l| {
            assert!(
                check_loc(l, SEGMENT_BLOCKS).is_ok(),
                "a page at {l:#x} was applied"
            );
        });
    }
    for (l, (n, _, _)) in &table.values {
        assert!(
            check_value_extent(*l, *n, SEGMENT_BLOCKS).is_ok(),
            "a value record at {l:#x} of {n} blocks was applied"
        );
    }
    if let Ok(l) = table.allocate(blocks) {
        assert!(check_segment_id(loc_segment(l)).is_ok(), "allocated {l:#x}");
    }
}

fn exercise(payload: &[u8], h: sprig::Hasher) {
    let arena = Arena::new();
    let Ok(record) = CommitRecord::decode(payload, &arena, h) else {
        return;
    };
    let Ok(encoded) = record.encode() else {
        panic!("a decoded record refers to unwritten pages");
    };
    let again = CommitRecord::decode(&encoded, &arena, h).map(|r| r.encode().ok());
    assert_eq!(
        again.ok().flatten(),
        Some(encoded),
        "a record does not round-trip"
    );
    let mut table = SegmentTable::new(SEGMENT_BLOCKS);
    if let Ok(tables) = apply_record(&Tables::empty(&arena, h), &mut table, &record) {
        check_applied(&tables, &mut table, 1);
    }
}

/// A record of one commit on an empty database with hostile segment fields.
fn hostile_record(c: &mut Choices<'_>, h: sprig::Hasher) {
    let mut node = [3u8; 32];
    node[0] = 0x80;
    let page = PageRef {
        loc: PageLoc::Disk(hostile_page_loc(c, loc(1, 5), SEGMENT_BLOCKS)),
        checksum: 1,
        node,
        count: 1,
    };
    let arena = Arena::new();
    let regions = vec![(Prefix::root(), Subtree::page(&arena, &page))];
    let Ok(dir) = Directory::empty(&arena, h).replace(regions.clone()) else {
        panic!("one page at the root does not make a directory");
    };
    let values_written = (0..c.byte() % 3)
        .map(|i| {
            let l = hostile_loc(c, loc(1, u32::from(i) * 2), SEGMENT_BLOCKS);
            (l, hostile_blocks(c, 2, SEGMENT_BLOCKS), 0, key(i))
        })
        .collect();
    let values_freed = (0..c.byte() % 2)
        .map(|_| hostile_loc(c, loc(1, 9), SEGMENT_BLOCKS))
        .collect();
    let segment_heads = (0..c.byte() % 3)
        .map(|i| {
            let id = hostile_segment(c, u32::from(i) + 1);
            (id, hostile_blocks(c, 12, SEGMENT_BLOCKS))
        })
        .collect();
    let record = CommitRecord {
        values_written,
        values_freed,
        segment_heads,
        ..CommitRecord::default_only(1, dir.root_node(), dir.len(), regions)
    };
    let Ok(encoded) = record.encode() else {
        panic!("a record of pages on disk does not encode");
    };
    exercise(&encoded, h);
    let mut table = SegmentTable::new(SEGMENT_BLOCKS);
    let before = (table.active, table.segments.clone(), table.values.clone());
    match apply_record(&Tables::empty(&arena, h), &mut table, &record) {
        Ok(tables) => {
            let blocks = hostile_blocks(c, 1, SEGMENT_BLOCKS);
            check_applied(&tables, &mut table, blocks);
        }
        Err(_) => assert!(
            (table.active, table.segments.clone(), table.values.clone()) == before,
            "a refused record was partly applied"
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    if c.coin() {
        hostile_record(&mut c, h);
        return;
    }
    let raw = c.rest();
    exercise(raw, h);
    let storage = memory_file(&wal_file_name(1), raw);
    // The log framing around records: any bytes replay one record at a time without a
    // panic, and every record handed out goes through the record decoder too.
    let _ = Wal::replay(&storage, 1, 0, &mut |r| {
        exercise(&r.payload, h);
        Ok(())
    });
});
