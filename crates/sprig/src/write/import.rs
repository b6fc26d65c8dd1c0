//! Import: apply a sorted stream of changes of any length as ONE commit, in memory bounded by
//! a budget instead of by the number of changes ([`crate::Db::import_sorted`]).
//!
//! A write batch holds every change, and `finish` builds every new page in memory before
//! `commit` writes them: about a page of memory per changed key. An import instead walks the
//! stream in key order, region by region of the latest version's directory. It buffers changes
//! up to the budget; then it reads the pages of the complete regions in one round of parallel
//! reads, rebuilds them with the commit's region rewrite (`rewrite.rs`), writes the new pages
//! and large values to the segments at once (allocated like a commit's, past each segment's
//! recorded fill) and keeps only their directory references. At the end it merges sparse
//! regions as a commit does, syncs the segments, appends one ordinary commit record and
//! publishes the new version like a commit.
//!
//! Atomicity is the commit protocol's: nothing recovery reads changes before the record is
//! durable, so a crash or an error before leaves the previous version, and the blocks written
//! so far are garbage past the recorded fill that the next commit reuses. A failed write or
//! sync poisons the writer as a commit's does; any other failure leaves the database usable.
//! Pages this import wrote must therefore never enter the page cache before the record is
//! durable (their locations may be reused): they are read past it.
//!
//! A region whose buffered changes alone fill half the budget (a large import into a region of
//! one page, or into an empty database) is split by the next key bit into two *virtual*
//! regions, each holding the old page's entries of its half, as often as needed. That gives
//! exactly the pages one rewrite of the whole region would: a region is split only when its
//! new puts alone overflow a page, and then its layout splits at that bit too.

use crate::log::publish::Blocks;
use crate::log::stager::Stager;
use super::rewrite::{merge_sparse_with, page_node, rewrite_regions, RegionWork};
use super::commit::{segment_heads_of, ValueLocs};
use crate::log::segments::value_blocks;
use super::{Change, CommitInfo, Region};
use crate::log::writer::Writer;
use crate::state::version::Version;
use crate::write::engine::Inner;
use crate::state::directory::{Directory, PageLoc, PageRef, Subtree};
use crate::error::{Error, Result};
use crate::io::BLOCK_BYTES;
use crate::log::record::{hex, CommitRecord, Prior, TableChange, UnionChange};
use crate::state::tables::{TableDef, TableId};

/// Where an import goes.
pub(crate) enum ImportTarget {
    /// Into an existing table (not one an incremental union is filling).
    Existing(TableId),
    /// A step of the incremental union filling this table.
    UnionStep(TableId),
    /// Into a new table, created by the import's commit.
    New {
        name: String,
        resolver: Option<String>,
    },
}
use crate::log::segments::{loc_block, loc_segment, SegmentTable};
use crate::options::SyncPolicy;
use crate::state::page::{
    ExternalValue, Page, Stamp, ValueRef, MAX_INLINE_VALUE_BYTES, MAX_VALUE_BYTES, PAGE_BODY_BYTES,
    UNWRITTEN,
};
use crate::state::prefix::Prefix;
use crate::stats::ReadKind;
use sprig_core::trie::{bit_at, KeyPath};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

/// The smallest memory budget an import runs with (a smaller one is raised to this).
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, ImportOptions, Options, MIN_IMPORT_MEMORY_BYTES};
/// let db = Db::open_in_memory(Options::default())?;
/// let tiny = ImportOptions { memory_bytes: 1 }; // runs with MIN_IMPORT_MEMORY_BYTES instead
/// db.import_sorted((1u8..=3).map(|i| Ok(([i; 32], Some(vec![i])))), &tiny)?;
/// assert_eq!((db.len(), MIN_IMPORT_MEMORY_BYTES), (3, 1 << 20));
/// # Ok(()) }
/// ```
pub const MIN_IMPORT_MEMORY_BYTES: u64 = 1 << 20;
/// The default memory budget of an import.
///
/// ```
/// use sprig::{ImportOptions, DEFAULT_IMPORT_MEMORY_BYTES};
/// assert_eq!(ImportOptions::default().memory_bytes, DEFAULT_IMPORT_MEMORY_BYTES);
/// assert_eq!(DEFAULT_IMPORT_MEMORY_BYTES, 128 << 20);
/// ```
pub const DEFAULT_IMPORT_MEMORY_BYTES: u64 = 128 << 20;
/// What one buffered change counts against the budget besides its value: the change itself,
/// its key and value hash in the rewrite, its proof nodes and its entry in the region's list.
const CHANGE_COST_BYTES: usize = 256;
/// What one region of a round counts against the budget: its old page and its new page (each
/// an aligned 4 KiB block behind a reference count: 8 KiB and the allocator's alignment
/// slack), and room for a split.
const REGION_COST_BYTES: usize = 8 * BLOCK_BYTES;

/// Options of [`crate::Db::import_sorted`].
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, ImportOptions, Options};
/// let db = Db::open_in_memory(Options::default())?;
/// let changes = (0u16..20_000).map(|i| {
///     let mut key = [0u8; 32];
///     key[..2].copy_from_slice(&i.to_be_bytes()); // sorted keys
///     Ok((key, Some(vec![1u8; 100])))
/// });
/// let small = ImportOptions { memory_bytes: 1 << 20 }; // ~2 MB of changes in 1 MiB
/// let info = db.import_sorted(changes, &small)?;
/// assert_eq!((info.seq, db.len()), (1, 20_000)); // still one commit
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// Memory for buffered changes and the pages being rebuilt from them. Default: 128 MiB;
    /// at least [`MIN_IMPORT_MEMORY_BYTES`]. The import also keeps the directory references
    /// of the regions it wrote (about 150 bytes per page written) and, for its commit record,
    /// 44 bytes per large value (above 1 KiB) written and 8 per large value replaced; a region
    /// whose new puts all fit in one page is never split, so a few values much larger than
    /// the budget can exceed it.
    pub memory_bytes: u64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            memory_bytes: DEFAULT_IMPORT_MEMORY_BYTES,
        }
    }
}

impl Inner {
    /// Apply a sorted stream of changes as one commit (see `Db::import_sorted`).
    pub(crate) fn import_sorted<I>(
        &self,
        target: ImportTarget,
        changes: I,
        options: &ImportOptions,
    ) -> Result<CommitInfo>
    where
        I: IntoIterator<Item = Result<(KeyPath, Option<Vec<u8>>)>>,
    {
        self.import_sorted_then(target, changes, options, || Ok(Vec::new()))
    }

    /// [`Inner::import_sorted`], whose commit also records the union changes `unions` gives
    /// once the stream is consumed (a union step says how far it came).
    pub(crate) fn import_sorted_then<I>(
        &self,
        target: ImportTarget,
        changes: I,
        options: &ImportOptions,
        unions: impl FnOnce() -> Result<Vec<UnionChange>>,
    ) -> Result<CommitInfo>
    where
        I: IntoIterator<Item = Result<(KeyPath, Option<Vec<u8>>)>>,
    {
        let inner = self;
        let mut w = inner.log.writer.lock();
        w.begin_write()?;
        let head = inner.head();
        let mut import = Import::new(inner, &w, &head, target, options)?;
        let result = changes
            .into_iter()
            .try_for_each(|change| import.push(change?))
            .and_then(|()| unions())
            .and_then(|unions| import.finish(&mut w, &head, unions));
        // A failed write may have left blocks the disk did not take: poison, as a commit's
        // failed write does. A bad input stream leaves only unreferenced blocks past the
        // recorded fill, and the database usable.
        if let Err(e @ Error::Io { .. }) = &result {
            w.poisoned.get_or_insert_with(|| e.to_string());
        }
        result
    }
}

/// A region of the working directory and the run of buffered changes that falls in it.
struct Unit {
    prefix: Prefix,
    /// The region's page (none for an empty region).
    page: Option<PageRef>,
    changes: Range<usize>,
}

/// The state of one import.
struct Import<'a> {
    inner: &'a Inner,
    /// The table imported into.
    table_id: TableId,
    /// The table's description, when the import creates it.
    create: Option<TableDef>,
    /// The latest version's directory of that table: what the commit record's regions
    /// replace.
    base: Directory,
    /// `base` with the regions split so far: where buffered changes are grouped.
    work: Directory,
    /// The commit this import becomes, stamped on every page it writes.
    stamp: Stamp,
    budget: usize,
    /// Buffered changes are applied once they cost more than this.
    drain_at: usize,
    /// Block allocation: the writer's table, adopted only through the commit record.
    table: SegmentTable,
    /// Each segment's fill before the import: blocks at or past it were written by it.
    start_fill: BTreeMap<u32, u32>,
    /// Writes the new pages and values as they are made (not synced until the record).
    stager: Stager<'a>,
    buffer: Vec<Change>,
    /// What `buffer` counts against the budget.
    cost: usize,
    /// The region of the last buffered change.
    last_region: Option<Prefix>,
    last_key: Option<KeyPath>,
    /// Rewritten regions of `work`, their pages on disk, in key order.
    units: Vec<Region>,
    values_written: Vec<(u64, u32, TableId, KeyPath)>,
    values_freed: Vec<u64>,
    splits: u64,
    pages: u64,
}

/// What a buffered change counts against the budget.
fn change_cost(value: &Option<Vec<u8>>) -> usize {
    CHANGE_COST_BYTES + value.as_ref().map_or(0, Vec::len)
}

/// The bytes a put of `value` takes in a page.
fn put_entry_bytes(value: &[u8]) -> usize {
    if value.len() > MAX_INLINE_VALUE_BYTES {
        ValueRef::External(ExternalValue {
            loc: UNWRITTEN,
            len: value.len() as u64,
            hash: [0; 32],
        })
        .entry_bytes()
    } else {
        ValueRef::Inline(value).entry_bytes()
    }
}

impl<'a> Import<'a> {
    fn new(
        inner: &'a Inner,
        w: &Writer,
        head: &Version,
        target: ImportTarget,
        options: &ImportOptions,
    ) -> Result<Import<'a>> {
        let (table_id, create, dir) = match target {
            ImportTarget::Existing(id) | ImportTarget::UnionStep(id) => {
                let filling = matches!(target, ImportTarget::UnionStep(_));
                if let Some(u) = head.tables.union(id) {
                    if !filling {
                        return Err(Error::UnionInProgress {
                            table: head.tables.def(id).map(|d| d.name).unwrap_or_default(),
                            remaining: u.remaining(),
                        });
                    }
                }
                let dir = head
                    .tables
                    .dir(id)
                    .ok_or(Error::NoSuchTable(format!("#{id}")))?
                    .clone();
                (id, None, dir)
            }
            ImportTarget::New { name, resolver } => {
                let def = inner.new_table_def(&head.tables, name, resolver)?;
                let dir = Directory::empty(head.tables.arena(), inner.hasher);
                (def.id, Some(def), dir)
            }
        };
        let budget = options.memory_bytes.max(MIN_IMPORT_MEMORY_BYTES);
        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
        let seq = head
            .seq
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit sequence numbers exhausted"))?;
        Ok(Import {
            inner,
            table_id,
            create,
            base: dir.clone(),
            work: dir,
            stamp: Stamp {
                seq,
                synced: inner.options.sync == SyncPolicy::Always,
            },
            budget,
            drain_at: budget,
            table: w.table.clone(),
            start_fill: w
                .table
                .segments
                .iter()
                .map(|(id, m)| (*id, m.used_blocks))
                .collect(),
            stager: Stager::new(&inner.log.segments),
            buffer: Vec::new(),
            cost: 0,
            last_region: None,
            last_key: None,
            units: Vec::new(),
            values_written: Vec::new(),
            values_freed: Vec::new(),
            splits: 0,
            pages: 0,
        })
    }

    /// Buffer one change; apply the buffered ones when they reach the budget.
    fn push(&mut self, (key, value): Change) -> Result<()> {
        if self.last_key.is_some_and(|last| key <= last) {
            return Err(Error::InvalidArgument(format!(
                "import: key {} does not come after the key before it (changes must be sorted \
                 by key path, each key once)",
                hex(&key)
            )));
        }
        if let Some(v) = &value {
            if v.len() > MAX_VALUE_BYTES {
                return Err(Error::ValueTooLarge {
                    len: v.len() as u64,
                    max: MAX_VALUE_BYTES as u64,
                });
            }
        }
        self.last_key = Some(key);
        let (region, _) = self.work.locate(&key);
        if self.last_region != Some(region) {
            self.cost += REGION_COST_BYTES;
            self.last_region = Some(region);
        }
        self.cost += change_cost(&value);
        self.buffer.push((key, value));
        if self.cost > self.drain_at {
            self.drain(false)?;
        }
        Ok(())
    }

    /// Apply the buffered changes of every complete region (all of them at the `end`); split
    /// the region still open while it alone holds more than half the budget.
    fn drain(&mut self, end: bool) -> Result<()> {
        loop {
            let units = self.cut_units();
            let complete = if end {
                units.len()
            } else {
                units.len().saturating_sub(1)
            };
            if let Some(upto) = units.get(..complete).and_then(|u| u.last()) {
                let changes: Vec<Change> = self.buffer.drain(..upto.changes.end).collect();
                self.apply(units.get(..complete).unwrap_or_default(), changes)?;
            }
            self.recount();
            if end || self.cost <= self.budget / 2 || !self.split_open_region()? {
                break;
            }
        }
        // A region that could not be split lets the buffer grow: amortize the next look.
        self.drain_at = self.budget.max(2 * self.cost);
        Ok(())
    }

    /// The buffered changes grouped by the region of `work` they fall in, in key order.
    fn cut_units(&self) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut i = 0;
        while let Some((key, _)) = self.buffer.get(i) {
            let (prefix, page) = self.work.locate(key);
            let rest = self.buffer.get(i..).unwrap_or_default();
            let end = i + rest.partition_point(|(k, _)| prefix.contains(k));
            units.push(Unit {
                prefix,
                page,
                changes: i..end,
            });
            i = end;
        }
        units
    }

    /// Recompute what the buffer costs and the region of its last change.
    fn recount(&mut self) {
        self.cost = 0;
        self.last_region = None;
        for (key, value) in &self.buffer {
            let (region, _) = self.work.locate(key);
            if self.last_region != Some(region) {
                self.cost += REGION_COST_BYTES;
                self.last_region = Some(region);
            }
            self.cost += change_cost(value);
        }
    }

    /// Rewrite the regions `units` with `changes` (the buffered changes of exactly those
    /// regions, in order) and write their pages and new large values.
    fn apply(&mut self, units: &[Unit], changes: Vec<Change>) -> Result<()> {
        let inner = self.inner;
        let wanted: Vec<(Prefix, PageRef)> = units
            .iter()
            .filter_map(|u| u.page.as_ref().map(|r| (u.prefix, r.clone())))
            .collect();
        let mut pages = inner
            .load_pages_with(&wanted, ReadKind::Batch, false)?
            .into_iter();

        // Deletes of absent keys change nothing: drop them, and regions left unchanged.
        let mut kept: Vec<Change> = Vec::with_capacity(changes.len());
        let mut works = Vec::new();
        let mut changes = changes.into_iter();
        for unit in units {
            let page = match unit.page {
                Some(_) => Some(
                    pages
                        .next()
                        .ok_or_else(|| Error::internal("a page asked for was not loaded"))?,
                ),
                None => None,
            };
            let start = kept.len();
            for (key, value) in changes.by_ref().take(unit.changes.len()) {
                if value.is_some() || page.as_ref().is_some_and(|p| p.get(&key).is_some()) {
                    kept.push((key, value));
                }
            }
            if kept.len() > start {
                works.push(RegionWork {
                    prefix: unit.prefix,
                    page,
                    keys: start..kept.len(),
                    changes: start..kept.len(),
                });
            }
        }
        drop(pages);
        let keys: Vec<KeyPath> = kept.iter().map(|(k, _)| *k).collect();
        // An import proves nothing: the regions' proof nodes are dropped.
        let (rewritten, _) = rewrite_regions(self.base.arena(), inner.hasher, self.stamp, &works, &keys, &kept)?;
        // The old pages are no longer needed.
        let prefixes: Vec<Prefix> = works.iter().map(|w| w.prefix).collect();
        drop((keys, works));

        // Value records first (the pages point at them), then the pages, in key order. New
        // pages are self-contained, so the changes go once their large values are queued.
        let mut locs = ValueLocs::default();
        for (key, value) in &kept {
            if let Some(v) = value.as_ref().filter(|v| v.len() > MAX_INLINE_VALUE_BYTES) {
                let l = inner.queue_value(&mut self.table, &mut self.stager, key, v)?;
                locs.new.insert((self.table_id, *key), l);
                self.values_written
                    .push((l, value_blocks(v)?, self.table_id, *key));
            }
        }
        drop(kept);
        let mut written = Vec::new();
        let mut in_memory = Vec::new();
        for (prefix, r) in prefixes.into_iter().zip(rewritten) {
            if !r.freed_unwritten.is_empty() {
                return Err(Error::internal(
                    "an import replaced a value that was never written",
                ));
            }
            self.values_freed.extend(r.freed);
            self.splits += r.splits;
            let subtree = r
                .subtree
                .ok_or_else(|| Error::internal("a region with changes was not rewritten"))?;
            let node = inner.write_subtree(
                self.table_id,
                &subtree,
                &locs,
                &mut self.table,
                &mut self.stager,
                &mut (&mut written, &mut in_memory),
            )?;
            self.units.push((prefix, node));
            // The region's pages are staged as blocks: free them.
            self.pages += written.len() as u64;
            written.clear();
            in_memory.clear();
        }
        // The pages of this round go to disk now: merging sparse regions at the end reads
        // them back from there.
        self.stager.flush()
    }

    /// The buffer holds the changes of one open region, more than half the budget. Drop its
    /// deletes of absent keys; if its puts still overflow a page, split it by the next bit
    /// into two virtual regions holding the old page's entries of each half. Returns whether
    /// the buffer changed (shrank, or its region was split).
    fn split_open_region(&mut self) -> Result<bool> {
        let Some((first, _)) = self.buffer.first() else {
            return Ok(false);
        };
        let (prefix, r) = self.work.locate(first);
        let page = match r {
            Some(r) => self
                .inner
                .load_pages_with(&[(prefix, r)], ReadKind::Batch, false)?
                .pop(),
            None => None,
        };
        let before = self.buffer.len();
        self.buffer
            .retain(|(k, v)| v.is_some() || page.as_ref().is_some_and(|p| p.get(k).is_some()));
        if self.buffer.len() < before {
            self.recount();
            if self.cost <= self.budget / 2 {
                return Ok(true);
            }
        }
        let put_bytes: usize = self
            .buffer
            .iter()
            .filter_map(|(_, v)| v.as_deref().map(put_entry_bytes))
            .sum();
        // Puts that fit in one page are a few very large values: the region's new content
        // may fit one page, so it cannot be split.
        if put_bytes <= PAGE_BODY_BYTES || prefix.is_full() {
            return Ok(self.buffer.len() < before);
        }
        let hasher = self.inner.hasher;
        let depth = prefix.depth();
        let items = page.as_ref().map(|p| p.items()).unwrap_or_default();
        let (left, right) = items.split_at(items.partition_point(|(k, _)| !bit_at(k, depth)));
        let arena = self.base.arena().clone();
        let half = |at: Prefix, items: &[(KeyPath, ValueRef<'_>)]| -> Result<Subtree> {
            if items.is_empty() {
                return Ok(Subtree::empty(&arena));
            }
            let page = Page::build(hasher, at, self.stamp, items)
                .map_err(|e| Error::internal(format!("splitting a page for an import: {e}")))?;
            let node = page.node(hasher);
            Ok(page_node(&arena, page, node))
        };
        let branch = Subtree::branch(
            hasher,
            half(prefix.child(false), left)?,
            half(prefix.child(true), right)?,
        );
        self.work = self
            .work
            .replace(vec![(prefix, branch)])
            .map_err(|e| Error::internal(format!("splitting an import region: {e}")))?;
        Ok(true)
    }

    /// Read pages for a merge of sparse regions: those this import wrote past the page cache.
    fn load_for_merge(&self, refs: &[(Prefix, PageRef)]) -> Result<Vec<Arc<Page>>> {
        let mut out = Vec::with_capacity(refs.len());
        for (prefix, r) in refs {
            match r.loc {
                PageLoc::Disk(l) if self.wrote(l) => {
                    let page = self.inner.log.segments.read_page(l, r.checksum, prefix)?;
                    self.inner.counters.page_reads(ReadKind::Maintenance, 1);
                    out.push(Arc::new(page));
                }
                _ => out.extend(
                    self.inner
                        .load_pages(&[(*prefix, r.clone())], ReadKind::Maintenance)?,
                ),
            }
        }
        Ok(out)
    }

    /// Whether this import wrote the block at `l`.
    fn wrote(&self, l: u64) -> bool {
        loc_block(l) >= self.start_fill.get(&loc_segment(l)).copied().unwrap_or(0)
    }

    /// Apply what is left, merge sparse regions, make everything durable with one commit
    /// record and publish the new version.
    fn finish(
        &mut self,
        w: &mut Writer,
        head: &Arc<Version>,
        unions: Vec<UnionChange>,
    ) -> Result<CommitInfo> {
        let inner = self.inner;
        self.drain(true)?;

        // Each region of the base the import rewrote, with its new subtree: the split ones
        // assembled from their parts (parts left unchanged keep their virtual pages).
        let units = std::mem::take(&mut self.units);
        let mut rewritten: Vec<Prefix> = Vec::new();
        for (unit, _) in &units {
            let (region, _) = self.base.locate(unit.bits());
            if rewritten.last() != Some(&region) {
                rewritten.push(region);
            }
        }
        let assembled = self
            .work
            .replace(units)
            .map_err(|e| Error::internal(format!("assembling an import: {e}")))?;
        let regions: Vec<Region> = rewritten
            .into_iter()
            .map(|p| {
                assembled
                    .node_at(&p)
                    .map(|n| (p, n))
                    .ok_or_else(|| Error::internal("an imported region is not in the directory"))
            })
            .collect::<Result<_>>()?;
        drop(assembled);
        let mut load = |refs: &[(Prefix, PageRef)]| self.load_for_merge(refs);
        let (dir, regions, merges) =
            merge_sparse_with(inner.hasher, &self.base, regions, self.stamp, &mut load)?;

        // Pages still in memory: merged ones, and unchanged parts of split regions.
        let mut written = Vec::new();
        let mut in_memory = Vec::new();
        let mut record_regions = Vec::with_capacity(regions.len());
        for (prefix, subtree) in &regions {
            let node = inner.write_subtree(
                self.table_id,
                subtree,
                &ValueLocs::default(),
                &mut self.table,
                &mut self.stager,
                &mut (&mut written, &mut in_memory),
            )?;
            record_regions.push((*prefix, node));
        }
        self.pages += written.len() as u64;
        drop((regions, written, in_memory));

        let record = CommitRecord {
            seq: self.stamp.seq,
            dropped: Vec::new(),
            created: self.create.iter().cloned().collect(),
            tables: vec![TableChange {
                table: self.table_id,
                root: dir.root_node(),
                entries: dir.len(),
                regions: record_regions,
            }],
            values_written: std::mem::take(&mut self.values_written),
            values_freed: std::mem::take(&mut self.values_freed),
            segment_heads: segment_heads_of(&self.table, self.stager.touched()),
            unions,
        };
        // Segment files this import created: those empty before it.
        let created: BTreeSet<u32> = self
            .stager
            .touched()
            .iter()
            .filter(|id| self.start_fill.get(id).copied().unwrap_or(0) == 0)
            .copied()
            .collect();
        let stager = std::mem::replace(&mut self.stager, Stager::new(&inner.log.segments));
        let staged = stager.finish(&self.table)?;
        let data_bytes = staged.bytes;
        // Durable and published through the one publish path, as a commit is.
        let log_bytes = w.guarded(|w| {
            inner
                .publish_record(
                    w,
                    head,
                    &record,
                    Blocks {
                        staged,
                        created: &created,
                    },
                    inner.versions.next_id(),
                    &Prior::default(),
                )
                .map(|p| p.log_bytes)
        })?;
        inner.counters.commit();
        inner.counters.written(data_bytes + log_bytes, self.pages);
        inner.counters.reshaped(self.splits, merges);
        inner.refresh_emptied(w);
        inner.after_commit(w)?;
        let tables_after = &inner.head().tables;
        Ok(CommitInfo {
            seq: self.stamp.seq,
            root: tables_after.default_dir().root_node(),
            db_root: tables_after.db_root(),
            pages_written: self.pages,
            bytes_written: data_bytes + log_bytes,
            pages_relocated: 0,
            values_relocated: 0,
        })
    }
}
