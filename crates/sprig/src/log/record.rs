//! Commit records and the directory encoding they share with checkpoints.
//!
//! A commit record says how one commit changed the directory: for each replaced region (a
//! directory position), the new subtree of pages; plus the value records written and freed,
//! and how far each segment written to is now filled. Replaying records on a checkpoint's
//! directory rebuilds the latest directory without reading a single page, and the replayed
//! root must equal the root each record states. A record is applied only once every location,
//! extent, segment id and fill level it names fits the segment geometry.

use crate::codec::{DecodeError, Put, Reader};
use crate::state::directory::{Arena, Directory, NodeId, PageLoc, PageRef, Slot, Subtree};
use crate::log::segments::{
    check_loc, check_segment_id, check_used_blocks, check_value_extent, loc_block, loc_segment,
    SegmentTable,
};
use crate::state::prefix::Prefix;
use sprig_core::trie::{KeyPath, Node, KEY_BITS};
use sprig_core::Hasher;
use std::sync::Arc;

const TAG_EMPTY: u8 = 0;
const TAG_PAGE: u8 = 1;
const TAG_BRANCH: u8 = 2;
const PAGE_REF_BYTES: usize = 1 + 8 + 8 + 32 + 4;

/// Why a directory could not be encoded: it refers to pages not yet written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the directory refers to a page that is not on disk")]
pub struct UnwrittenPage;

/// Append the pre-order encoding of a directory subtree.
pub fn encode_subtree(node: &Subtree, out: &mut Vec<u8>) -> Result<(), UnwrittenPage> {
    let arena = node.arena();
    let mut stack = vec![node_id(node)];
    while let Some(id) = stack.pop() {
        match arena.slot(id) {
            Slot::Empty => out.put_u8(TAG_EMPTY),
            Slot::Page(p) => {
                let PageLoc::Disk(l) = p.loc else {
                    return Err(UnwrittenPage);
                };
                out.put_u8(TAG_PAGE);
                out.put_u64(l);
                out.put_u64(p.checksum);
                out.extend_from_slice(&p.node);
                out.put_u32(p.count);
            }
            Slot::Branch(_, l, r) => {
                out.put_u8(TAG_BRANCH);
                stack.push(r);
                stack.push(l);
            }
        }
    }
    Ok(())
}

/// The id at the top of `node` (borrowed: valid while `node` lives).
fn node_id(node: &Subtree) -> NodeId {
    node.id()
}
/// Decode a subtree rooted at depth `depth` into `arena`, recomputing branch nodes.
pub fn decode_subtree(
    r: &mut Reader<'_>,
    arena: &Arc<Arena>,
    hasher: Hasher,
    depth: usize,
) -> Result<Subtree, DecodeError> {
    match r.u8()? {
        TAG_EMPTY => Ok(Subtree::empty(arena)),
        TAG_PAGE => {
            let loc = r.u64()?;
            let checksum = r.u64()?;
            let node: Node = r.array()?;
            let count = r.u32()?;
            if count == 0 {
                return Err(r.error("page with no entries"));
            }
            Ok(Subtree::page(
                arena,
                &PageRef {
                    loc: PageLoc::Disk(loc),
                    checksum,
                    node,
                    count,
                },
            ))
        }
        TAG_BRANCH => {
            if depth >= KEY_BITS {
                return Err(r.error("directory deeper than 256 bits"));
            }
            let left = decode_subtree(r, arena, hasher, depth + 1)?;
            let right = decode_subtree(r, arena, hasher, depth + 1)?;
            Ok(Subtree::branch(hasher, left, right))
        }
        _ => Err(r.error("unknown directory node tag")),
    }
}

/// The smallest encoding of a subtree node, for bounding counts.
pub const MIN_NODE_BYTES: usize = 1;

/// How one commit changed the database.
#[derive(Debug, Clone)]
pub struct CommitRecord {
    /// The commit's sequence number.
    pub seq: u64,
    /// The state root after the commit.
    pub root: Node,
    /// The number of entries after the commit.
    pub entries: u64,
    /// Replaced regions and their new subtrees (every page on disk).
    pub regions: Vec<(Prefix, Subtree)>,
    /// Value records written: (location, blocks, key).
    pub values_written: Vec<(u64, u32, KeyPath)>,
    /// Locations of value records no longer referenced.
    pub values_freed: Vec<u64>,
    /// For each segment written to: (segment id, blocks used after this commit), in the
    /// order they were filled; the last is the active segment.
    pub segment_heads: Vec<(u32, u32)>,
}

impl CommitRecord {
    /// Encode the record's payload.
    pub fn encode(&self) -> Result<Vec<u8>, UnwrittenPage> {
        let mut out = Vec::with_capacity(64 + self.regions.len() * (35 + PAGE_REF_BYTES));
        out.put_u64(self.seq);
        out.extend_from_slice(&self.root);
        out.put_u64(self.entries);
        out.put_count(self.regions.len());
        for (prefix, subtree) in &self.regions {
            out.put_u16(prefix.len_u16());
            out.extend_from_slice(prefix.bits());
            encode_subtree(subtree, &mut out)?;
        }
        out.put_count(self.values_written.len());
        for (l, blocks, key) in &self.values_written {
            out.put_u64(*l);
            out.put_u32(*blocks);
            out.extend_from_slice(key);
        }
        out.put_count(self.values_freed.len());
        for l in &self.values_freed {
            out.put_u64(*l);
        }
        out.put_count(self.segment_heads.len());
        for (id, used) in &self.segment_heads {
            out.put_u32(*id);
            out.put_u32(*used);
        }
        Ok(out)
    }

    /// Decode a record's payload.
    pub fn decode(
        bytes: &[u8],
        arena: &Arc<Arena>,
        hasher: Hasher,
    ) -> Result<CommitRecord, DecodeError> {
        let mut r = Reader::new(bytes);
        let seq = r.u64()?;
        let root = r.array()?;
        let entries = r.u64()?;
        let n = r.count(2 + 32 + MIN_NODE_BYTES)?;
        let mut regions = Vec::with_capacity(n);
        for _ in 0..n {
            let len = r.u16()?;
            let bits: KeyPath = r.array()?;
            let prefix = Prefix::from_parts(bits, len).ok_or(r.error("invalid region prefix"))?;
            let subtree = decode_subtree(&mut r, arena, hasher, prefix.depth())?;
            regions.push((prefix, subtree));
        }
        let n = r.count(8 + 4 + 32)?;
        let mut values_written = Vec::with_capacity(n);
        for _ in 0..n {
            values_written.push((r.u64()?, r.u32()?, r.array()?));
        }
        let n = r.count(8)?;
        let mut values_freed = Vec::with_capacity(n);
        for _ in 0..n {
            values_freed.push(r.u64()?);
        }
        let n = r.count(8)?;
        let mut segment_heads = Vec::with_capacity(n);
        for _ in 0..n {
            segment_heads.push((r.u32()?, r.u32()?));
        }
        r.finish()?;
        Ok(CommitRecord {
            seq,
            root,
            entries,
            regions,
            values_written,
            values_freed,
            segment_heads,
        })
    }
}

/// Why a record could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The record's regions do not fit the directory.
    #[error(transparent)]
    Directory(#[from] crate::state::directory::DirectoryError),
    /// The resulting root is not the one the record states.
    #[error("replaying the record gives root {found} instead of {stated}")]
    RootMismatch {
        /// The root the record states (hex).
        stated: String,
        /// The root the replay produced (hex).
        found: String,
    },
    /// The resulting entry count is not the one the record states.
    #[error("replaying the record gives {found} entries instead of {stated}")]
    CountMismatch {
        /// The count the record states.
        stated: u64,
        /// The count the replay produced.
        found: u64,
    },
    /// A location, extent, segment id or fill level no commit can have written.
    #[error("{0}")]
    OutOfBounds(String),
}

/// A location for messages.
fn describe(l: u64) -> String {
    format!("segment {} block {}", loc_segment(l), loc_block(l))
}

/// Check the location of every on-disk page under `node` against segments of
/// `segment_blocks` blocks; the error names the first bad one.
pub fn check_subtree_locs(node: &Subtree, segment_blocks: u32) -> Result<(), String> {
    let mut bad = None;
    for_each_disk_page(node, &mut |l| {
        if bad.is_none() {
            if let Err(what) = check_loc(l, segment_blocks) {
                bad = Some(format!("page at {}: {what}", describe(l)));
            }
        }
    });
    bad.map_or(Ok(()), Err)
}

impl CommitRecord {
    /// Check everything the record says about segments against segments of `segment_blocks`
    /// blocks: what replay refuses, so a commit checks it before writing the record.
    pub fn check_bounds(&self, segment_blocks: u32) -> Result<(), ApplyError> {
        for (_, subtree) in &self.regions {
            check_subtree_locs(subtree, segment_blocks).map_err(ApplyError::OutOfBounds)?;
        }
        let bad = |kind: &str, l: u64, what: &str| {
            ApplyError::OutOfBounds(format!("{kind} at {}: {what}", describe(l)))
        };
        for (l, n, _) in &self.values_written {
            check_value_extent(*l, *n, segment_blocks)
                .map_err(|what| bad("value record", *l, what))?;
        }
        for l in &self.values_freed {
            check_loc(*l, segment_blocks).map_err(|what| bad("freed value record", *l, what))?;
        }
        // Segments are filled in id order.
        let mut after = None;
        for (id, used) in &self.segment_heads {
            let head = |what: &str| ApplyError::OutOfBounds(format!("segment {id} head: {what}"));
            check_segment_id(*id).map_err(head)?;
            check_used_blocks(*used, segment_blocks).map_err(head)?;
            if after.is_some_and(|a| *id <= a) {
                return Err(head("segment heads out of order"));
            }
            after = Some(*id);
        }
        Ok(())
    }
}

/// Apply a record to a directory and its segment accounting: the one transition shared by
/// commit and recovery. Returns the new directory; on an error nothing was applied.
pub fn apply_record(
    dir: &Directory,
    table: &mut SegmentTable,
    record: &CommitRecord,
) -> Result<Directory, ApplyError> {
    record.check_bounds(table.segment_blocks)?;
    let next = dir.replace(record.regions.clone())?;
    if next.root_node() != record.root {
        return Err(ApplyError::RootMismatch {
            stated: hex(&record.root),
            found: hex(&next.root_node()),
        });
    }
    if next.len() != record.entries {
        return Err(ApplyError::CountMismatch {
            stated: record.entries,
            found: next.len(),
        });
    }
    for_each_replaced_disk_page(dir, record.regions.iter().map(|(p, _)| p), &mut |l| {
        table.add_pages(l, -1)
    });
    for (_, subtree) in &record.regions {
        for_each_disk_page(subtree, &mut |l| table.add_pages(l, 1));
    }
    for l in &record.values_freed {
        table.value_freed(*l);
    }
    for (l, blocks, key) in &record.values_written {
        table.value_written(*l, *blocks, *key);
    }
    for (id, used) in &record.segment_heads {
        let meta = table.segments.entry(*id).or_default();
        meta.used_blocks = meta.used_blocks.max(*used);
        table.active = *id;
    }
    Ok(next)
}

/// Visit every page under `node`.
pub fn for_each_page_ref(node: &Subtree, f: &mut dyn FnMut(&PageRef)) {
    node.for_each_page(f);
}

/// Call `f` with the location of every on-disk page of `dir` that replacing the regions at
/// `prefixes` supersedes.
pub fn for_each_replaced_disk_page<'a>(
    dir: &Directory,
    prefixes: impl IntoIterator<Item = &'a Prefix>,
    f: &mut dyn FnMut(u64),
) {
    for prefix in prefixes {
        if let Some(old) = dir.node_at(prefix) {
            for_each_disk_page(&old, f);
        }
    }
}

/// Visit the location of every on-disk page under `node`.
pub fn for_each_disk_page(node: &Subtree, f: &mut dyn FnMut(u64)) {
    for_each_page_ref(node, &mut |p| {
        if let PageLoc::Disk(l) = p.loc {
            f(l);
        }
    });
}

pub use crate::codec::hex;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::segments::{loc, SegmentMeta, MAX_SEGMENT_ID};
    use crate::state::page::UNWRITTEN;
    use std::collections::BTreeMap;

    const SEGMENT_BLOCKS: u32 = 256;

    /// A record of one commit on an empty database: one page at `page`, one value record of 3
    /// blocks at `value`, filling segment 1 to 12 blocks.
    fn record(arena: &Arc<Arena>, page: u64, value: u64) -> CommitRecord {
        let hasher = Hasher::Blake3;
        let mut node = [4u8; 32];
        node[0] = 0x80;
        let regions = vec![(
            Prefix::root(),
            Subtree::page(
                arena,
                &PageRef {
                    loc: PageLoc::Disk(page),
                    checksum: 1,
                    node,
                    count: 1,
                },
            ),
        )];
        let dir = Directory::empty(arena, hasher)
            .replace(regions.clone())
            .unwrap();
        CommitRecord {
            seq: 1,
            root: dir.root_node(),
            entries: dir.len(),
            regions,
            values_written: vec![(value, 3, [1u8; 32])],
            values_freed: Vec::new(),
            segment_heads: vec![(1, 12)],
        }
    }

    type Accounting = (
        u32,
        BTreeMap<u32, SegmentMeta>,
        BTreeMap<u64, (u32, KeyPath)>,
    );

    fn accounting(t: &SegmentTable) -> Accounting {
        (t.active, t.segments.clone(), t.values.clone())
    }

    /// Every location, extent, segment id and fill level of a record is checked before any of
    /// it is applied. Before, a head naming segment `u32::MAX` became the active segment and
    /// the next allocation overflowed `active + 1`; a page or value past its segment, or in
    /// segment 0, was accepted and read from wherever it pointed.
    #[test]
    fn records_naming_impossible_segments_or_locations_are_refused_whole() {
        let arena = Arena::new();
        let empty = Directory::empty(&arena, Hasher::Blake3);
        let record = |page, value| record(&arena, page, value);
        let mut table = SegmentTable::new(SEGMENT_BLOCKS);
        let good = record(loc(1, 11), loc(1, 8));
        assert!(apply_record(&empty, &mut table, &good).is_ok());
        assert_eq!(table.segments[&1].used_blocks, 12);

        let crafted: Vec<(&str, CommitRecord)> = vec![
            ("page in segment 0", record(loc(0, 11), loc(1, 8))),
            (
                "page at the unwritten sentinel",
                record(UNWRITTEN, loc(1, 8)),
            ),
            (
                "page past its segment",
                record(loc(1, SEGMENT_BLOCKS), loc(1, 8)),
            ),
            ("value in segment 0", record(loc(1, 11), loc(0, 8))),
            (
                "value crossing its segment's end",
                record(loc(1, 11), loc(1, 254)),
            ),
            (
                "value in segment u32::MAX",
                record(loc(1, 11), loc(u32::MAX, 0)),
            ),
            ("value of 0 blocks", {
                let mut r = good.clone();
                r.values_written[0].1 = 0;
                r
            }),
            ("freed value in segment 0", {
                let mut r = good.clone();
                r.values_freed.push(loc(0, 1));
                r
            }),
            ("head of segment u32::MAX", {
                let mut r = good.clone();
                r.segment_heads.push((u32::MAX, 1));
                r
            }),
            ("head of segment 0", {
                let mut r = good.clone();
                r.segment_heads.insert(0, (0, 1));
                r
            }),
            ("head filled past the segment", {
                let mut r = good.clone();
                r.segment_heads[0].1 = u32::MAX;
                r
            }),
            ("heads out of order", {
                let mut r = good.clone();
                r.segment_heads = vec![(2, 1), (1, 12)];
                r
            }),
        ];
        for (what, bad) in crafted {
            let mut table = SegmentTable::new(SEGMENT_BLOCKS);
            let before = accounting(&table);
            let e = apply_record(&empty, &mut table, &bad).err();
            assert!(
                matches!(e, Some(ApplyError::OutOfBounds(_))),
                "{what}: {e:?}"
            );
            assert_eq!(accounting(&table), before, "{what}: partly applied");
        }

        // The last usable segment id is accepted; the segment after it is an error, not an
        // overflow.
        let mut r = good.clone();
        r.segment_heads.push((MAX_SEGMENT_ID, SEGMENT_BLOCKS));
        let mut table = SegmentTable::new(SEGMENT_BLOCKS);
        apply_record(&empty, &mut table, &r).unwrap();
        assert_eq!(table.active, MAX_SEGMENT_ID);
        let e = table.allocate(1).unwrap_err();
        assert!(
            matches!(e, crate::error::Error::SegmentIdsExhausted { .. }),
            "{e}"
        );
    }
}
