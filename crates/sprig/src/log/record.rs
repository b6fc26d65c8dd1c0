//! Commit records and the directory encoding they share with checkpoints.
//!
//! A commit record says how one commit changed the tables: which tables it dropped and
//! created, and for each changed table its replaced regions (directory positions) with their
//! new subtrees of pages, its new root and entry count; plus the value records written and
//! freed, and how far each segment written to is now filled. Replaying records on a
//! checkpoint's tables rebuilds the latest directories without reading a single page, and each
//! replayed root must equal the root the record states. All tables change in one record, so a
//! commit across tables is as atomic as any other. A record is applied only once every location,
//! extent, segment id and fill level it names fits the segment geometry.

use crate::codec::{DecodeError, Put, Reader, Source};
use crate::state::directory::{
    Arena, Directory, DirectoryError, NodeId, PageLoc, PageRef, Slot, Subtree,
};
use crate::log::segments::{
    check_loc, check_segment_id, check_used_blocks, check_value_extent, loc_block, loc_segment,
    MAX_SEGMENT_BLOCKS,
    SegmentTable,
};
use crate::state::page::MAX_PAGE_ENTRIES;
use crate::state::prefix::Prefix;
use crate::state::tables::{CatalogError, TableDef, TableId, Tables, DEFAULT_TABLE_ID};
use crate::state::union::UnionState;
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
pub fn encode_subtree(node: &Subtree, out: &mut impl Put) -> Result<(), UnwrittenPage> {
    encode_subtree_checking(node, out, &mut |_| Ok(()))
}

/// Why a record could not be encoded together with the check of its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// It refers to a page not yet written.
    #[error(transparent)]
    Unwritten(#[from] UnwrittenPage),
    /// Something it says about segments no commit can have written (as
    /// [`CommitRecord::check_bounds`] finds it).
    #[error(transparent)]
    OutOfBounds(#[from] ApplyError),
}

/// [`encode_subtree`], passing the location of every page encoded to `check`: one walk of
/// the subtree for both.
fn encode_subtree_checking<E: From<UnwrittenPage>>(
    node: &Subtree,
    out: &mut impl Put,
    check: &mut dyn FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    let arena = node.arena();
    let mut stack = vec![node_id(node)];
    while let Some(id) = stack.pop() {
        match arena.slot(id) {
            Slot::Empty => out.put_u8(TAG_EMPTY),
            Slot::Page(p) => {
                let PageLoc::Disk(l) = p.loc else {
                    return Err(UnwrittenPage.into());
                };
                check(l)?;
                out.put_u8(TAG_PAGE);
                out.put_u64(l);
                out.put_u64(p.checksum);
                out.put_bytes(&p.node);
                out.put_u32(p.count);
            }
            Slot::Branch(l, r) => {
                out.put_u8(TAG_BRANCH);
                // Both children fetched at once: the right one's miss overlaps the left's
                // (a twig's two pages, a page beside a branch) instead of following it.
                arena.prefetch(r);
                arena.prefetch(l);
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
    r: &mut impl Source,
    arena: &Arc<Arena>,
    hasher: Hasher,
    depth: usize,
) -> Result<Subtree, DecodeError> {
    match r.u8()? {
        TAG_EMPTY => Ok(Subtree::empty(arena)),
        TAG_PAGE => {
            let loc = r.u64()?;
            // Segment ids start at 1; the node store takes a location in segment 0 for a page
            // held in memory, so it must never see one from disk.
            if loc >> 32 == 0 {
                return Err(r.error("page in segment 0"));
            }
            // Nor one past the largest segment: the node store keeps the entry count in the
            // bits of the block index no segment uses.
            if loc_block(loc) >= MAX_SEGMENT_BLOCKS {
                return Err(r.error("page past the largest segment"));
            }
            let checksum = r.u64()?;
            let node: Node = r.array()?;
            let count = r.u32()?;
            if count == 0 {
                return Err(r.error("page with no entries"));
            }
            if count as usize > MAX_PAGE_ENTRIES {
                return Err(r.error("page with more entries than a page holds"));
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

/// How one commit changed one table.
#[derive(Debug, Clone)]
pub struct TableChange {
    /// The table.
    pub table: TableId,
    /// The table's root after the commit.
    pub root: Node,
    /// The number of entries in the table after the commit.
    pub entries: u64,
    /// Replaced regions and their new subtrees (every page on disk).
    pub regions: Vec<(Prefix, Subtree)>,
}

/// How one commit changed the database.
#[derive(Debug, Clone)]
pub struct CommitRecord {
    /// The commit's sequence number.
    pub seq: u64,
    /// Tables dropped by the commit (applied first).
    pub dropped: Vec<TableId>,
    /// Tables created by the commit, empty (applied next; `tables` may fill them).
    pub created: Vec<TableDef>,
    /// Each changed table's new regions, root and entry count.
    pub tables: Vec<TableChange>,
    /// Value records written: (location, blocks, table, key).
    pub values_written: Vec<(u64, u32, TableId, KeyPath)>,
    /// Locations of value records no longer referenced.
    pub values_freed: Vec<u64>,
    /// For each segment written to: (segment id, blocks used after this commit), in the
    /// order they were filled; the last is the active segment.
    pub segment_heads: Vec<(u32, u32)>,
    /// Incremental unions started, advanced, restored or ended (applied after the table
    /// changes; a start freezes its inputs as they are before the record).
    pub unions: Vec<UnionChange>,
}

/// How a commit changes an incremental union.
#[derive(Debug, Clone)]
pub enum UnionChange {
    /// A union into `table` (created by the same record, empty) of the tables `inputs` as
    /// they are before the record; the segments up to `pinned_segments` hold their data.
    Start {
        /// The table the union fills.
        table: TableId,
        /// The input tables, in the order their values are combined.
        inputs: Vec<TableId>,
        /// The highest segment id the inputs' data may be in.
        pinned_segments: u32,
    },
    /// The union into `table` has merged every key up to `through`, `consumed` input entries
    /// in all (a union with every entry consumed is complete and ends).
    Progress {
        /// The table the union fills.
        table: TableId,
        /// The last key merged.
        through: KeyPath,
        /// Input entries merged so far.
        consumed: u64,
    },
    /// The union into `table` is `state` (a rollback to a version where it was in progress).
    Set {
        /// The table the union fills.
        table: TableId,
        /// Its whole state.
        state: UnionState,
    },
    /// No union fills `table` any more (a rollback to a version where it was complete).
    Clear {
        /// The table.
        table: TableId,
    },
}

const UNION_START: u8 = 1;
const UNION_PROGRESS: u8 = 2;
const UNION_SET: u8 = 3;
const UNION_CLEAR: u8 = 4;

/// Append a union's state: its pinned segments, progress and frozen inputs (each input's
/// root, entry count and directory).
pub fn encode_union_state(state: &UnionState, out: &mut impl Put) -> Result<(), UnwrittenPage> {
    out.put_u32(state.pinned_segments);
    match &state.through {
        None => out.put_u8(0),
        Some(k) => {
            out.put_u8(1);
            out.put_bytes(k);
        }
    }
    out.put_u64(state.consumed);
    out.put_count(state.inputs.len());
    for dir in &state.inputs {
        out.put_bytes(&dir.root_node());
        out.put_u64(dir.len());
        encode_subtree(&dir.tree(), out)?;
    }
    Ok(())
}

/// Read a union's state written by [`encode_union_state`]: every input's directory must hash
/// to its stated root and hold its stated entry count, and no more entries be merged than the
/// inputs hold.
pub fn decode_union_state(
    r: &mut impl Source,
    arena: &Arc<Arena>,
    hasher: Hasher,
) -> Result<UnionState, DecodeError> {
    let pinned_segments = r.u32()?;
    let through = match r.u8()? {
        0 => None,
        1 => Some(r.array()?),
        _ => return Err(r.error("unknown union progress tag")),
    };
    let consumed = r.u64()?;
    let n = r.count(32 + 8 + MIN_NODE_BYTES)?;
    let mut inputs = Vec::with_capacity(n);
    for _ in 0..n {
        let root: Node = r.array()?;
        let len = r.u64()?;
        let dir = Directory::from_root(hasher, decode_subtree(r, arena, hasher, 0)?);
        if dir.root_node() != root {
            return Err(r.error("a union input's directory does not hash to its stated root"));
        }
        if dir.len() != len {
            return Err(r.error("a union input's entry count disagrees with its directory"));
        }
        inputs.push(dir);
    }
    let mut state = UnionState::start(inputs, pinned_segments);
    if consumed > state.total() || through.is_none() != (consumed == 0) {
        return Err(r.error("a union's progress does not fit its inputs"));
    }
    state.through = through;
    state.consumed = consumed;
    Ok(state)
}

impl UnionChange {
    /// The table the change concerns.
    pub fn table(&self) -> TableId {
        match self {
            UnionChange::Start { table, .. }
            | UnionChange::Progress { table, .. }
            | UnionChange::Set { table, .. }
            | UnionChange::Clear { table } => *table,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), UnwrittenPage> {
        out.put_u32(self.table());
        match self {
            UnionChange::Start {
                inputs,
                pinned_segments,
                ..
            } => {
                out.put_u8(UNION_START);
                out.put_u32(*pinned_segments);
                out.put_count(inputs.len());
                for id in inputs {
                    out.put_u32(*id);
                }
            }
            UnionChange::Progress {
                through, consumed, ..
            } => {
                out.put_u8(UNION_PROGRESS);
                out.extend_from_slice(through);
                out.put_u64(*consumed);
            }
            UnionChange::Set { state, .. } => {
                out.put_u8(UNION_SET);
                encode_union_state(state, out)?;
            }
            UnionChange::Clear { .. } => out.put_u8(UNION_CLEAR),
        }
        Ok(())
    }

    fn decode(
        r: &mut Reader<'_>,
        arena: &Arc<Arena>,
        hasher: Hasher,
    ) -> Result<UnionChange, DecodeError> {
        let table = r.u32()?;
        Ok(match r.u8()? {
            UNION_START => {
                let pinned_segments = r.u32()?;
                let n = r.count(4)?;
                let mut inputs = Vec::with_capacity(n);
                for _ in 0..n {
                    inputs.push(r.u32()?);
                }
                UnionChange::Start {
                    table,
                    inputs,
                    pinned_segments,
                }
            }
            UNION_PROGRESS => UnionChange::Progress {
                table,
                through: r.array()?,
                consumed: r.u64()?,
            },
            UNION_SET => UnionChange::Set {
                table,
                state: decode_union_state(r, arena, hasher)?,
            },
            UNION_CLEAR => UnionChange::Clear { table },
            _ => return Err(r.error("unknown union change")),
        })
    }
}

/// Append a name: every name a catalog holds passed [`TableDef::check`] (at most
/// `MAX_TABLE_NAME_BYTES` bytes), so its length always fits the u16 before it.
fn put_str(out: &mut impl Put, s: &str) {
    let len = u16::try_from(s.len());
    assert!(len.is_ok(), "a name of {} bytes passed the catalog's checks", s.len());
    out.put_u16(len.unwrap_or(u16::MAX));
    out.put_bytes(s.as_bytes());
}

/// Read a string written by [`put_str`].
fn read_str(r: &mut impl Source) -> Result<String, DecodeError> {
    let len = usize::from(r.u16()?);
    let bytes = r.take(len)?.to_vec();
    String::from_utf8(bytes).map_err(|_| r.error("a name that is not UTF-8"))
}

/// Append a table description.
pub fn encode_table_def(def: &TableDef, out: &mut impl Put) {
    out.put_u32(def.id);
    put_str(out, &def.name);
    match &def.resolver {
        None => out.put_u8(0),
        Some(name) => {
            out.put_u8(1);
            put_str(out, name);
        }
    }
}

/// Read a table description written by [`encode_table_def`].
pub fn decode_table_def(r: &mut impl Source) -> Result<TableDef, DecodeError> {
    let id = r.u32()?;
    let name = read_str(r)?;
    let resolver = match r.u8()? {
        0 => None,
        1 => Some(read_str(r)?),
        _ => return Err(r.error("unknown resolver tag")),
    };
    Ok(TableDef { id, name, resolver })
}

impl CommitRecord {
    /// A record that changes only the default table.
    pub fn default_only(
        seq: u64,
        root: Node,
        entries: u64,
        regions: Vec<(Prefix, Subtree)>,
    ) -> CommitRecord {
        CommitRecord {
            seq,
            dropped: Vec::new(),
            created: Vec::new(),
            tables: vec![TableChange {
                table: DEFAULT_TABLE_ID,
                root,
                entries,
                regions,
            }],
            values_written: Vec::new(),
            values_freed: Vec::new(),
            segment_heads: Vec::new(),
            unions: Vec::new(),
        }
    }

    /// Every replaced region, with its table.
    pub fn regions(&self) -> impl Iterator<Item = (TableId, &Prefix, &Subtree)> {
        self.tables
            .iter()
            .flat_map(|t| t.regions.iter().map(move |(p, s)| (t.table, p, s)))
    }

    /// Encode the record's payload.
    pub fn encode(&self) -> Result<Vec<u8>, UnwrittenPage> {
        self.encode_with(&mut |_| Ok(()))
    }

    /// Encode the record's payload and check its bounds against segments of `segment_blocks`
    /// blocks, as [`CommitRecord::check_bounds`] does, in the same walk of its regions: what
    /// a commit does before writing the record (one walk of a commit's pages fewer).
    pub fn encode_checked(
        &self,
        segment_blocks: u32,
    ) -> Result<(Vec<u8>, Checked<'_>), EncodeError> {
        let payload = self.encode_with(&mut |l| {
            check_loc(l, segment_blocks).map_err(|what| {
                EncodeError::OutOfBounds(ApplyError::OutOfBounds(page_out_of_bounds(l, what)))
            })
        })?;
        let checked = self.check_bounds_beside_regions(segment_blocks)?;
        Ok((payload, checked))
    }

    /// The payload, passing every page location of the regions to `check` on the way.
    fn encode_with<E: From<UnwrittenPage>>(
        &self,
        check: &mut dyn FnMut(u64) -> Result<(), E>,
    ) -> Result<Vec<u8>, E> {
        let regions: usize = self.tables.iter().map(|t| t.regions.len()).sum();
        let mut out = Vec::with_capacity(64 + regions * (35 + PAGE_REF_BYTES));
        out.put_u64(self.seq);
        out.put_count(self.dropped.len());
        for id in &self.dropped {
            out.put_u32(*id);
        }
        out.put_count(self.created.len());
        for def in &self.created {
            encode_table_def(def, &mut out);
        }
        out.put_count(self.tables.len());
        for t in &self.tables {
            out.put_u32(t.table);
            out.extend_from_slice(&t.root);
            out.put_u64(t.entries);
            out.put_count(t.regions.len());
            for (prefix, subtree) in &t.regions {
                out.put_u16(prefix.len_u16());
                out.extend_from_slice(prefix.bits());
                encode_subtree_checking(subtree, &mut out, check)?;
            }
        }
        out.put_count(self.values_written.len());
        for (l, blocks, table, key) in &self.values_written {
            out.put_u64(*l);
            out.put_u32(*blocks);
            out.put_u32(*table);
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
        // The union section is left out when empty, so records without unions keep the
        // layout of WAL version 3.
        if !self.unions.is_empty() {
            out.put_count(self.unions.len());
            for u in &self.unions {
                u.encode(&mut out)?;
            }
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
        let n = r.count(4)?;
        let mut dropped = Vec::with_capacity(n);
        for _ in 0..n {
            dropped.push(r.u32()?);
        }
        let n = r.count(4 + 2 + 1)?;
        let mut created = Vec::with_capacity(n);
        for _ in 0..n {
            created.push(decode_table_def(&mut r)?);
        }
        let n = r.count(4 + 32 + 8 + 4)?;
        let mut tables = Vec::with_capacity(n);
        for _ in 0..n {
            let table = r.u32()?;
            let root = r.array()?;
            let entries = r.u64()?;
            let m = r.count(2 + 32 + MIN_NODE_BYTES)?;
            let mut regions = Vec::with_capacity(m);
            for _ in 0..m {
                let len = r.u16()?;
                let bits: KeyPath = r.array()?;
                let prefix =
                    Prefix::from_parts(bits, len).ok_or(r.error("invalid region prefix"))?;
                let subtree = decode_subtree(&mut r, arena, hasher, prefix.depth())?;
                regions.push((prefix, subtree));
            }
            tables.push(TableChange {
                table,
                root,
                entries,
                regions,
            });
        }
        let n = r.count(8 + 4 + 4 + 32)?;
        let mut values_written = Vec::with_capacity(n);
        for _ in 0..n {
            values_written.push((r.u64()?, r.u32()?, r.u32()?, r.array()?));
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
        let mut unions = Vec::new();
        if r.remaining() > 0 {
            let n = r.count(4 + 1)?;
            if n == 0 {
                return Err(r.error("an empty union section"));
            }
            for _ in 0..n {
                unions.push(UnionChange::decode(&mut r, arena, hasher)?);
            }
        }
        r.finish()?;
        Ok(CommitRecord {
            seq,
            dropped,
            created,
            tables,
            values_written,
            values_freed,
            segment_heads,
            unions,
        })
    }
}

/// Why a record could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The record's regions do not fit the directory.
    #[error(transparent)]
    Directory(#[from] crate::state::directory::DirectoryError),
    /// The record's table changes do not fit the catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A table is changed twice, or changed and dropped, by one record.
    #[error("the record changes table {0} twice")]
    TableTwice(TableId),
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
    /// What a committer computed ahead for a table's change ([`Replaced`]) was computed on
    /// another directory or for other regions: a bug of the committer, caught before the
    /// accounting changes.
    #[error("the pages replaced in table {0} were computed for another change")]
    KnownMismatch(TableId),
    /// A location, extent, segment id or fill level no commit can have written.
    #[error("{0}")]
    OutOfBounds(String),
    /// A union change that does not fit the unions and tables it applies to.
    #[error("union of table {table}: {what}")]
    Union {
        /// The table the union fills.
        table: TableId,
        /// What does not fit.
        what: &'static str,
    },
}

/// A location for messages.
fn describe(l: u64) -> String {
    format!("segment {} block {}", loc_segment(l), loc_block(l))
}

/// What is wrong with the page location `l`, for messages.
fn page_out_of_bounds(l: u64, what: &str) -> String {
    format!("page at {}: {what}", describe(l))
}

/// Check the location of every on-disk page under `node` against segments of
/// `segment_blocks` blocks; the error names the first bad one.
pub fn check_subtree_locs(node: &Subtree, segment_blocks: u32) -> Result<(), String> {
    let mut bad = None;
    for_each_disk_page(node, &mut |l| {
        if bad.is_none() {
            if let Err(what) = check_loc(l, segment_blocks) {
                bad = Some(page_out_of_bounds(l, what));
            }
        }
    });
    bad.map_or(Ok(()), Err)
}

/// A record whose bounds were checked against segments of a size ([`CommitRecord::check_bounds`],
/// [`CommitRecord::encode_checked`]): what [`apply_record_noting`] takes, so that it need not
/// walk every page of the record again.
#[derive(Clone, Copy)]
pub struct Checked<'r> {
    record: &'r CommitRecord,
    segment_blocks: u32,
}

impl CommitRecord {
    /// Check everything the record says about segments against segments of `segment_blocks`
    /// blocks: what replay refuses, so a commit checks it before writing the record.
    pub fn check_bounds(&self, segment_blocks: u32) -> Result<Checked<'_>, ApplyError> {
        for (_, _, subtree) in self.regions() {
            check_subtree_locs(subtree, segment_blocks).map_err(ApplyError::OutOfBounds)?;
        }
        self.check_bounds_beside_regions(segment_blocks)
    }

    /// [`CommitRecord::check_bounds`] for all but the pages of the regions, which the caller
    /// has checked.
    fn check_bounds_beside_regions(&self, segment_blocks: u32) -> Result<Checked<'_>, ApplyError> {
        for u in &self.unions {
            match u {
                UnionChange::Set { state, .. } => {
                    for dir in &state.inputs {
                        check_subtree_locs(&dir.tree(), segment_blocks)
                            .map_err(ApplyError::OutOfBounds)?;
                    }
                    check_segment_id(state.pinned_segments).map_err(|what| {
                        ApplyError::OutOfBounds(format!("union pinned segments: {what}"))
                    })?;
                }
                UnionChange::Start {
                    pinned_segments, ..
                } => check_segment_id(*pinned_segments).map_err(|what| {
                    ApplyError::OutOfBounds(format!("union pinned segments: {what}"))
                })?,
                UnionChange::Progress { .. } | UnionChange::Clear { .. } => {}
            }
        }
        let bad = |kind: &str, l: u64, what: &str| {
            ApplyError::OutOfBounds(format!("{kind} at {}: {what}", describe(l)))
        };
        for (l, n, _, _) in &self.values_written {
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
        Ok(Checked {
            record: self,
            segment_blocks,
        })
    }
}

/// Apply a record to the tables and their segment accounting: the one transition shared by
/// commit and recovery. Returns the new tables; on an error nothing was applied.
pub fn apply_record(
    tables: &Tables,
    table: &mut SegmentTable,
    record: &CommitRecord,
) -> Result<Tables, ApplyError> {
    let checked = record.check_bounds(table.segment_blocks)?;
    apply_record_noting(tables, table, checked, &Prior::default(), &mut |_| {})
}

/// What a committer already holds of a record's resulting directory, for one table.
pub enum Known {
    /// A directory equal to the result (the same entries at the same positions, its pages
    /// possibly elsewhere): the replaced paths take their nodes from it instead of hashing
    /// them again ([`Directory::replace_as`]).
    Equal(Directory),
    /// The result itself, built by the committer (the overlay it wrote, its pages moved in
    /// place to where they were written): taken as it is, and checked like a computed one
    /// against the record's root and entry count (in debug builds also against the
    /// replacement computed from the record).
    Built(Directory),
}

/// What a committer already holds of a record's result, for [`apply_record_noting`] to take
/// instead of computing it again (nothing, on replay).
#[derive(Default)]
pub struct Prior {
    /// The resulting directories it has, by table.
    pub known: Vec<(TableId, Known)>,
    /// The pages the record's regions supersede, by table.
    pub replaced: Vec<Replaced>,
}

impl Prior {
    /// Whether what the committer computed ahead fits `record` on `head` (the latest tables):
    /// every [`Replaced`] is for a table the record changes, on its latest directory, for
    /// exactly its regions; and a record that drops or creates tables carries none. Checked
    /// before the record is written, so a committer's bug fails the commit before it is
    /// durable (the replay checks it again).
    pub fn check(&self, head: &Tables, record: &CommitRecord) -> Result<(), ApplyError> {
        for r in &self.replaced {
            let change = record.tables.iter().find(|t| t.table == r.table);
            let fits = match (change, head.dir(r.table)) {
                (Some(t), Some(before)) => {
                    record.dropped.is_empty()
                        && record.created.is_empty()
                        && r.for_change(before, t).is_ok()
                }
                _ => false,
            };
            if !fits {
                return Err(ApplyError::KnownMismatch(r.table));
            }
        }
        Ok(())
    }
}

/// The on-disk pages that replacing the regions at `prefixes` of `on` (a table's latest
/// directory) supersedes, computed by a committer before the record is published (on another
/// core, while it writes pages), for [`apply_record_noting`] to take instead of walking the
/// directory again.
pub struct Replaced {
    /// The table whose regions these are.
    pub table: TableId,
    on: Directory,
    prefixes: Vec<Prefix>,
    locs: Vec<u64>,
}

impl Replaced {
    /// Walk `on` for the pages the regions at `prefixes` of `table` supersede.
    pub fn compute(table: TableId, on: Directory, prefixes: Vec<Prefix>) -> Replaced {
        let mut locs = Vec::new();
        for_each_replaced_disk_page(&on, &prefixes, &mut |l| locs.push(l));
        Replaced {
            table,
            on,
            prefixes,
            locs,
        }
    }

    /// The pages, if they were computed for exactly these regions of `before`.
    fn for_change(&self, before: &Directory, change: &TableChange) -> Result<&[u64], ApplyError> {
        let same_regions = self.prefixes.len() == change.regions.len()
            && self
                .prefixes
                .iter()
                .zip(&change.regions)
                .all(|(p, (q, _))| p == q);
        if self.on.is(before) && same_regions {
            Ok(&self.locs)
        } else {
            Err(ApplyError::KnownMismatch(change.table))
        }
    }
}

/// [`apply_record`], telling `released` the location of every page the record takes out of
/// the latest version (the pages of dropped tables and of replaced regions), as the accounting
/// releases it: what no new reader needs in a cache. Called only once the whole result has
/// been computed and checked. `prior` holds what the committer already has of the result's
/// directories and of the pages they replace (empty on replay).
pub fn apply_record_noting(
    tables: &Tables,
    table: &mut SegmentTable,
    record: Checked<'_>,
    prior: &Prior,
    released: &mut dyn FnMut(u64),
) -> Result<Tables, ApplyError> {
    let Prior { known, replaced } = prior;
    if record.segment_blocks != table.segment_blocks {
        return Err(ApplyError::OutOfBounds(format!(
            "a record checked against segments of {} blocks applied to segments of {}",
            record.segment_blocks, table.segment_blocks
        )));
    }
    let record = record.record;
    // Compute the whole result before touching the accounting.
    let mut next = tables.clone();
    let mut dropped = Vec::new();
    for id in &record.dropped {
        let (rest, gone) = next.without(*id)?;
        next = rest;
        dropped.push(gone);
    }
    for def in &record.created {
        let empty = Directory::empty(tables.arena(), tables.hasher());
        next = next.with_created(def.clone(), empty)?;
    }
    let mut changed: Vec<(TableId, Directory)> = Vec::new();
    for t in &record.tables {
        if changed.iter().any(|(id, _)| *id == t.table) {
            return Err(ApplyError::TableTwice(t.table));
        }
        let dir = next
            .dir(t.table)
            .ok_or(CatalogError::NoSuchTable(t.table))?;
        let after = match known.iter().find(|(id, _)| *id == t.table).map(|(_, k)| k) {
            Some(Known::Equal(equal)) => dir.replace_as(t.regions.clone(), equal)?,
            Some(Known::Built(built)) => {
                if !Arc::ptr_eq(built.arena(), dir.arena()) {
                    return Err(DirectoryError::ForeignRegion.into());
                }
                #[cfg(debug_assertions)]
                check_built(dir, &t.regions, built)?;
                built.clone()
            }
            None => dir.replace(t.regions.clone())?,
        };
        if after.root_node() != t.root {
            return Err(ApplyError::RootMismatch {
                stated: hex(&t.root),
                found: hex(&after.root_node()),
            });
        }
        if after.len() != t.entries {
            return Err(ApplyError::CountMismatch {
                stated: t.entries,
                found: after.len(),
            });
        }
        changed.push((t.table, after));
    }
    // The union changes are checked (and applied to `next`) before the accounting changes.
    let changed_ids: Vec<TableId> = changed.iter().map(|(id, _)| *id).collect();
    next = apply_unions(tables, next, &record.unions, &changed_ids)?;
    // The replaced pages a committer computed ahead, checked to be for these changes (in debug
    // builds also against the walk), before anything changes.
    let mut ahead: Vec<Option<&[u64]>> = Vec::with_capacity(record.tables.len());
    for t in &record.tables {
        ahead.push(match (replaced.iter().find(|r| r.table == t.table), next.dir(t.table)) {
            (Some(r), Some(before)) => {
                let locs = r.for_change(before, t)?;
                #[cfg(debug_assertions)]
                {
                    let mut walked = Vec::new();
                    let prefixes: Vec<Prefix> = t.regions.iter().map(|(p, _)| *p).collect();
                    for_each_replaced_disk_page(before, &prefixes, &mut |l| walked.push(l));
                    assert_eq!(locs, &walked[..], "replaced pages computed ahead differ");
                }
                Some(locs)
            }
            _ => None,
        });
    }
    // Accounting: the pages of dropped tables and of replaced regions go, the new ones come.
    for gone in &dropped {
        for_each_disk_page(&gone.dir.tree(), &mut |l| {
            table.page_released(l, record.seq);
            released(l);
        });
        table.table_values_freed(gone.def.id, record.seq);
    }
    for (t, ahead) in record.tables.iter().zip(ahead) {
        if let Some(before) = next.dir(t.table) {
            let mut release = |l| {
                table.page_released(l, record.seq);
                released(l);
            };
            match ahead {
                Some(locs) => locs.iter().for_each(|l| release(*l)),
                None => {
                    let prefixes: Vec<Prefix> = t.regions.iter().map(|(p, _)| *p).collect();
                    for_each_replaced_disk_page(before, &prefixes, &mut release)
                }
            }
        }
        for (_, subtree) in &t.regions {
            for_each_disk_page(subtree, &mut |l| table.add_pages(l, 1));
        }
    }
    for (id, dir) in changed {
        next = next.with_dir(id, dir)?;
    }
    for l in &record.values_freed {
        table.value_freed(*l, record.seq);
    }
    for (l, blocks, t, key) in &record.values_written {
        table.value_written(*l, *blocks, *t, *key);
    }
    for (id, used) in &record.segment_heads {
        let meta = table.segments.entry(*id).or_default();
        meta.used_blocks = meta.used_blocks.max(*used);
        table.active = *id;
    }
    Ok(next)
}

/// Debug builds: a directory a committer built as a record's result is the one the record
/// gives when replayed: the same root, and the same pages (locations and checksums) at every
/// replaced region.
#[cfg(debug_assertions)]
fn check_built(
    dir: &Directory,
    regions: &[crate::state::directory::Region],
    built: &Directory) -> Result<(), ApplyError> {
    let replayed = dir.replace(regions.to_vec())?;
    assert_eq!(replayed.root_node(), built.root_node(), "a built result with another root");
    assert_eq!(replayed.len(), built.len(), "a built result with another entry count");
    let pages = |d: &Directory, p: &Prefix| {
        let mut out = Vec::new();
        if let Some(node) = d.node_at(p) {
            node.pages_under(*p, &mut out);
        }
        out.into_iter()
            .map(|(q, r)| (q, r.checksum, r.node, disk_loc(&r)))
            .collect::<Vec<_>>()
    };
    for (p, _) in regions {
        assert!(
            pages(&replayed, p) == pages(built, p),
            "a built result whose pages at {p} differ from the record's"
        );
    }
    Ok(())
}

/// Where a page is on disk, if it is there.
#[cfg(debug_assertions)]
fn disk_loc(r: &PageRef) -> Option<u64> {
    match r.loc {
        PageLoc::Disk(l) => Some(l),
        PageLoc::Memory(_) => None,
    }
}

/// Apply a record's union changes to `next` (the tables after its drops and creations; the
/// record's changed tables are `changed`); a start freezes its inputs as they are in `before`.
fn apply_unions(
    before: &Tables,
    mut next: Tables,
    changes: &[UnionChange],
    changed: &[TableId],
) -> Result<Tables, ApplyError> {
    for change in changes {
        let table = change.table();
        let bad = |what| ApplyError::Union { table, what };
        let state = match change {
            UnionChange::Start {
                inputs,
                pinned_segments,
                ..
            } => {
                if next.union(table).is_some() {
                    return Err(bad("a union into a table a union fills already"));
                }
                if next.dir(table).is_none_or(|d| !d.is_empty())
                    || before.dir(table).is_some()
                    || changed.contains(&table)
                {
                    return Err(bad("a union into a table the same record did not create"));
                }
                let mut dirs = Vec::with_capacity(inputs.len());
                for id in inputs {
                    if before.union(*id).is_some() {
                        return Err(bad("an input a union is still filling"));
                    }
                    dirs.push(
                        before
                            .dir(*id)
                            .ok_or(bad("an input the version does not hold"))?
                            .clone(),
                    );
                }
                Some(UnionState::start(dirs, *pinned_segments))
            }
            UnionChange::Progress {
                through, consumed, ..
            } => {
                let old = next.union(table).ok_or(bad("progress of no union"))?;
                if *consumed > old.total() || *consumed <= old.consumed {
                    return Err(bad("progress that does not fit the union"));
                }
                if old.through.is_some_and(|t| *through <= t) {
                    return Err(bad("progress that goes back"));
                }
                let mut state = (**old).clone();
                state.through = Some(*through);
                state.consumed = *consumed;
                Some(state)
            }
            UnionChange::Set { state, .. } => Some(state.clone()),
            UnionChange::Clear { .. } => None,
        };
        next = next.with_union(table, state)?;
    }
    Ok(next)
}

/// Call `f` with the location of every on-disk page of `dir` that replacing the regions at
/// `prefixes` supersedes.
pub fn for_each_replaced_disk_page(dir: &Directory, prefixes: &[Prefix], f: &mut dyn FnMut(u64)) {
    dir.for_each_page_at(prefixes, &mut |p| {
        if let PageLoc::Disk(l) = p.loc {
            f(l);
        }
    });
}

/// Visit the location of every on-disk page under `node`.
pub fn for_each_disk_page(node: &Subtree, f: &mut dyn FnMut(u64)) {
    node.for_each_page(&mut |p| {
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
            values_written: vec![(value, 3, DEFAULT_TABLE_ID, [1u8; 32])],
            segment_heads: vec![(1, 12)],
            ..CommitRecord::default_only(1, dir.root_node(), dir.len(), regions)
        }
    }

    type Accounting = (
        u32,
        BTreeMap<u32, SegmentMeta>,
        crate::log::segments::ValueIndex,
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
        let empty = Tables::empty(&arena, Hasher::Blake3);
        let record = |page, value| record(&arena, page, value);
        let mut table = SegmentTable::new(SEGMENT_BLOCKS);
        let good = record(loc(1, 11), loc(1, 8));
        assert!(apply_record(&empty, &mut table, &good).is_ok());
        assert_eq!(table.segments[&1].used_blocks, 12);

        let crafted: Vec<(&str, CommitRecord)> = vec![
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
            // A commit's check before writing (in the encoding's walk) refuses it too.
            let e = bad.encode_checked(SEGMENT_BLOCKS).err();
            assert!(
                matches!(e, Some(EncodeError::OutOfBounds(ApplyError::OutOfBounds(_)))),
                "{what}, encoded: {e:?}"
            );
        }
        // What a commit encodes with the check is the plain encoding, and a record checked
        // against one segment size is refused for another.
        let (payload, checked) = good.encode_checked(SEGMENT_BLOCKS).unwrap();
        assert_eq!(payload, good.encode().unwrap());
        let mut other = SegmentTable::new(SEGMENT_BLOCKS * 2);
        let e = apply_record_noting(&empty, &mut other, checked, &Prior::default(), &mut |_| {});
        assert!(matches!(e, Err(ApplyError::OutOfBounds(_))), "{:?}", e.err());

        // A page in segment 0 is refused while decoding (the directory's node store cannot
        // hold one: it takes segment 0 for a page held in memory).
        let bytes = good.encode().unwrap();
        let at = bytes
            .windows(8)
            .position(|w| w == loc(1, 11).to_le_bytes())
            .unwrap();
        let mut crafted = bytes.clone();
        crafted[at..at + 8].copy_from_slice(&loc(0, 11).to_le_bytes());
        let e = CommitRecord::decode(&crafted, &arena, Hasher::Blake3).unwrap_err();
        assert!(e.to_string().contains("segment 0"), "{e}");
        // So are a page past the largest segment and one with more entries than a page holds
        // (the node store keeps the count in the block index's unused bits).
        for past in [loc(1, MAX_SEGMENT_BLOCKS), UNWRITTEN] {
            let mut crafted = bytes.clone();
            crafted[at..at + 8].copy_from_slice(&past.to_le_bytes());
            let e = CommitRecord::decode(&crafted, &arena, Hasher::Blake3).unwrap_err();
            assert!(e.to_string().contains("past the largest segment"), "{e}");
        }
        let mut crafted = bytes.clone();
        let count_at = at + 8 + 8 + 32;
        crafted[count_at..count_at + 4].copy_from_slice(&(MAX_PAGE_ENTRIES as u32 + 1).to_le_bytes());
        let e = CommitRecord::decode(&crafted, &arena, Hasher::Blake3).unwrap_err();
        assert!(e.to_string().contains("more entries than a page holds"), "{e}");

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

    /// The pages a committer found its regions supersede, computed ahead on another core, are
    /// taken only for the change they were computed for: computed on another directory or for
    /// other regions, they are refused before the accounting changes (in debug builds, taken
    /// ones are also checked against the walk).
    #[test]
    fn replaced_pages_computed_ahead_fit_only_their_change() {
        let arena = Arena::new();
        let empty = Tables::empty(&arena, Hasher::Blake3);
        let mut table = SegmentTable::new(SEGMENT_BLOCKS);
        let first = apply_record(&empty, &mut table, &record(&arena, loc(1, 11), loc(1, 8))).unwrap();
        let before = first.dir(DEFAULT_TABLE_ID).unwrap().clone();
        let mut second = record(&arena, loc(1, 13), loc(1, 8));
        second.seq = 2;
        second.values_written.clear();
        second.segment_heads = vec![(1, 14)];
        let apply = |replaced: Replaced, table: &mut SegmentTable| {
            let prior = Prior {
                known: Vec::new(),
                replaced: vec![replaced],
            };
            let mut released = Vec::new();
            let checked = second.check_bounds(table.segment_blocks).unwrap();
            apply_record_noting(&first, table, checked, &prior, &mut |l| released.push(l))
                .map(|_| released)
        };
        let mut t = table.clone();
        let right = Replaced::compute(DEFAULT_TABLE_ID, before.clone(), vec![Prefix::root()]);
        assert_eq!(apply(right, &mut t).unwrap(), vec![loc(1, 11)]);
        assert_eq!(t.live_page_locs(1), vec![loc(1, 13)]);

        // Checked before the record is written, too: the same refusals, and one for a table
        // the record does not change.
        let prior = |r: Replaced| Prior {
            known: Vec::new(),
            replaced: vec![r],
        };
        let right = Replaced::compute(DEFAULT_TABLE_ID, before.clone(), vec![Prefix::root()]);
        assert!(prior(right).check(&first, &second).is_ok());
        let elsewhere = Replaced::compute(7, before.clone(), vec![Prefix::root()]);
        assert!(matches!(
            prior(elsewhere).check(&first, &second),
            Err(ApplyError::KnownMismatch(7))
        ));
        let stale = Replaced::compute(DEFAULT_TABLE_ID, before.clone(), Vec::new());
        assert!(prior(stale).check(&first, &second).is_err());

        let other_dir = empty.dir(DEFAULT_TABLE_ID).unwrap().clone();
        for wrong in [
            Replaced::compute(DEFAULT_TABLE_ID, other_dir, vec![Prefix::root()]),
            Replaced::compute(DEFAULT_TABLE_ID, before.clone(), Vec::new()),
        ] {
            let mut t = table.clone();
            let e = apply(wrong, &mut t).unwrap_err();
            assert!(matches!(e, ApplyError::KnownMismatch(DEFAULT_TABLE_ID)), "{e}");
            assert_eq!(accounting(&t), accounting(&table), "nothing applied");
        }
    }

    /// Union changes: a start freezes its inputs (reading nothing), encodes and decodes
    /// unchanged, and progress, restores and ends apply in order; a change that does not fit
    /// (progress of no union or going back, a start into a table the record did not create, an
    /// input being filled) is refused with nothing applied.
    #[test]
    fn union_changes_round_trip_and_misfits_are_refused_whole() {
        let arena = Arena::new();
        let h = Hasher::Blake3;
        let mut table = SegmentTable::new(SEGMENT_BLOCKS);
        // Table 0 gets one page (one entry).
        let base = apply_record(
            &Tables::empty(&arena, h),
            &mut table,
            &record(&arena, loc(1, 5), loc(1, 0)),
        )
        .unwrap();
        let def = |id, name: &str| TableDef {
            id,
            name: name.into(),
            resolver: None,
        };
        let start = CommitRecord {
            seq: 2,
            created: vec![def(1, "u")],
            unions: vec![UnionChange::Start {
                table: 1,
                inputs: vec![0, 0],
                pinned_segments: 1,
            }],
            ..CommitRecord::default_only(2, [0; 32], 0, Vec::new())
        };
        let start = CommitRecord {
            tables: Vec::new(),
            ..start
        };
        let bytes = start.encode().unwrap();
        let decoded = CommitRecord::decode(&bytes, &arena, h).unwrap();
        assert_eq!(decoded.encode().unwrap(), bytes);
        let t = apply_record(&base, &mut table, &decoded).unwrap();
        let u = t.union(1).unwrap();
        assert_eq!((u.total(), u.consumed, u.pinned_segments), (2, 0, 1));
        assert_eq!(t.pinned_segments(), Some(1));
        // The table is out of the database root while the union runs.
        assert_eq!(t.db_root(), base.db_root());

        let refused = |tables: &Tables, unions: Vec<UnionChange>, created: Vec<TableDef>| {
            let mut copy = table.clone();
            let before = accounting(&copy);
            let r = CommitRecord {
                created,
                unions,
                tables: Vec::new(),
                ..CommitRecord::default_only(3, [0; 32], 0, Vec::new())
            };
            let bytes = r.encode().unwrap();
            let r = CommitRecord::decode(&bytes, &arena, h).unwrap();
            assert!(apply_record(tables, &mut copy, &r).is_err());
            assert_eq!(accounting(&copy), before, "a refused record was partly applied");
        };
        let progress = |through: u8, consumed| UnionChange::Progress {
            table: 1,
            through: [through; 32],
            consumed,
        };
        refused(&t, vec![progress(1, 3)], Vec::new());
        refused(&base, vec![progress(1, 1)], Vec::new());
        refused(
            &t,
            vec![UnionChange::Start {
                table: 0,
                inputs: vec![],
                pinned_segments: 1,
            }],
            Vec::new(),
        );
        refused(
            &t,
            vec![UnionChange::Start {
                table: 2,
                inputs: vec![1],
                pinned_segments: 1,
            }],
            vec![def(2, "v")],
        );
        // Progress, then going back is refused; completing ends the union.
        let step = |tables: &Tables, change: UnionChange| {
            let r = CommitRecord {
                unions: vec![change],
                tables: Vec::new(),
                ..CommitRecord::default_only(3, [0; 32], 0, Vec::new())
            };
            apply_record(tables, &mut table.clone(), &r)
        };
        let t2 = step(&t, progress(9, 1)).unwrap();
        assert_eq!(t2.union(1).unwrap().through, Some([9; 32]));
        assert!(step(&t2, progress(8, 2)).is_err());
        let done = step(&t2, progress(10, 2)).unwrap();
        assert!(done.union(1).is_none() && done.pinned_segments().is_none());
        assert_ne!(done.db_root(), base.db_root());
        // A restore brings the whole state back, through its encoding.
        let set = CommitRecord {
            unions: vec![UnionChange::Set {
                table: 1,
                state: (**t2.union(1).unwrap()).clone(),
            }],
            tables: Vec::new(),
            ..CommitRecord::default_only(4, [0; 32], 0, Vec::new())
        };
        let set = CommitRecord::decode(&set.encode().unwrap(), &arena, h).unwrap();
        let back = apply_record(&done, &mut table.clone(), &set).unwrap();
        assert!(back.union(1).unwrap().same_as(t2.union(1).unwrap()));
        let clear = step(&back, UnionChange::Clear { table: 1 }).unwrap();
        assert!(clear.union(1).is_none());
    }
}
