//! The commit pipeline: a write batch collects reads and changes on the latest version;
//! `finish` loads every page the batch touches in one round of parallel reads, proves the
//! pre-state of every touched key (the witness), applies the changes page by page (splitting
//! full pages, merging sparse ones) and computes the new root, all in memory; `commit` writes
//! the new pages and values sequentially, syncs, appends the commit record, syncs, and only
//! then publishes the new version.

use crate::cleaner::CleanMode;
use crate::db::{Db, Inner, Pin, Version, MAX_VALUE_BYTES};
use crate::directory::{DirNode, Directory, PageLoc, PageRef};
use crate::error::{Error, Result};
use crate::io::BlockBuf;
use crate::log::checkpoint::{checkpoint_file_name, Checkpoint};
use crate::log::record::{apply_record, CommitRecord};
use crate::log::segments::{
    encode_value_record, loc_block, loc_offset, loc_segment, segment_file_name, value_record_blocks,
};
use crate::log::wal::{wal_file_name, Wal};
use crate::options::SyncPolicy;
use crate::page::{ExternalValue, Layout, Page, Value, MAX_INLINE_VALUE_BYTES, PAGE_BODY_BYTES};
use crate::prefix::Prefix;
use crate::stats::ReadKind;
use sprig_core::trie::{KeyPath, Node};
use sprig_core::{MultiProof, Witness};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Branches holding at most this many entries are merged into one page when it fits.
const MERGE_MAX_ENTRIES: u64 = 16;
/// The location of a value not yet written (resolved at commit).
const UNWRITTEN: u64 = u64::MAX;

/// A change to one key: a new value, or `None` to delete.
type Change = (KeyPath, Option<Vec<u8>>);
/// A replaced region of the directory and its new subtree.
type Region = (Prefix, Arc<DirNode>);

/// A set of reads and changes on one version, not yet applied.
pub struct WriteBatch {
    inner: Arc<Inner>,
    base: Arc<Version>,
    pin: Pin,
    changes: BTreeMap<KeyPath, Option<Vec<u8>>>,
    reads: BTreeSet<KeyPath>,
    pages: HashMap<Prefix, Arc<Page>>,
}

/// The result of a finished batch: the new root and witness, ready to commit.
pub struct Pending {
    inner: Arc<Inner>,
    base: Arc<Version>,
    _pin: Pin,
    dir: Directory,
    regions: Vec<Region>,
    new_values: BTreeMap<KeyPath, Vec<u8>>,
    freed_values: Vec<u64>,
    witness: Witness,
    splits: u64,
    merges: u64,
    /// Pages the commit will write.
    new_pages: u64,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The new version's sequence number.
    pub seq: u64,
    /// The new state root.
    pub root: Node,
    /// Pages written.
    pub pages_written: u64,
    /// Bytes written to segments and the commit log.
    pub bytes_written: u64,
    /// Pages the cleaner copied forward with this commit.
    pub pages_relocated: u64,
    /// Values the cleaner copied forward with this commit.
    pub values_relocated: u64,
}

impl Db {
    /// Start a batch of reads and changes on the latest version.
    pub fn begin(&self) -> WriteBatch {
        let base = self.inner.head();
        WriteBatch {
            pin: Pin::new(&self.inner, base.seq),
            inner: self.inner.clone(),
            base,
            changes: BTreeMap::new(),
            reads: BTreeSet::new(),
            pages: HashMap::new(),
        }
    }

    /// Make a finished batch durable and the latest version. Fails with [`Error::Stale`] if
    /// another commit happened since the batch began.
    pub fn commit(&self, pending: Pending) -> Result<CommitInfo> {
        if !Arc::ptr_eq(&pending.inner, &self.inner) {
            return Err(Error::InvalidArgument(
                "the batch belongs to another database".into(),
            ));
        }
        self.inner.commit(pending, CleanMode::Auto)
    }

    /// Run the cleaner now: copy the live data of sealed segments that are at most half live
    /// forward (a bounded amount per call), so their files can be deleted. Returns what it did,
    /// or `None` if no segment needed cleaning.
    pub fn clean(&self) -> Result<Option<CommitInfo>> {
        if !self.inner.has_cleaning_work() {
            return Ok(None);
        }
        let pending = self.begin().finish()?;
        self.inner.commit(pending, CleanMode::Explicit).map(Some)
    }
}

impl WriteBatch {
    /// The version this batch reads from and builds on.
    pub fn base_seq(&self) -> u64 {
        self.base.seq
    }

    /// The number of distinct keys changed so far.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// Whether nothing has been changed.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The value of `key` as this batch sees it (its own changes first). The key is part of
    /// the batch's witness.
    pub fn get(&mut self, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        self.reads.insert(*key);
        if let Some(change) = self.changes.get(key) {
            return Ok(change.clone());
        }
        self.prefetch(&[*key])?;
        let (prefix, _) = self.base.dir.locate(key);
        match self.pages.get(&prefix).and_then(|p| p.get(key)) {
            Some(v) => self.inner.value_bytes(key, v).map(Some),
            None => Ok(None),
        }
    }

    /// Set `key` to `value`.
    pub fn put(&mut self, key: KeyPath, value: impl Into<Vec<u8>>) -> Result<()> {
        let value = value.into();
        if value.len() > MAX_VALUE_BYTES {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes is larger than the limit of {MAX_VALUE_BYTES} bytes",
                value.len()
            )));
        }
        self.changes.insert(key, Some(value));
        Ok(())
    }

    /// Remove `key` (a no-op if absent).
    pub fn delete(&mut self, key: KeyPath) {
        self.changes.insert(key, None);
    }

    /// Read the pages of `keys` now, all in flight at once, so later gets and `finish` find
    /// them in memory.
    pub fn prefetch(&mut self, keys: &[KeyPath]) -> Result<()> {
        let mut wanted: Vec<(Prefix, PageRef)> = Vec::new();
        let mut queued = std::collections::HashSet::new();
        for key in keys {
            let (prefix, node) = self.base.dir.locate(key);
            if let DirNode::Page(r) = node.as_ref() {
                if !self.pages.contains_key(&prefix) && queued.insert(prefix) {
                    wanted.push((prefix, r.clone()));
                }
            }
        }
        let loaded = self.inner.load_pages(&wanted, ReadKind::Batch)?;
        for ((prefix, _), page) in wanted.into_iter().zip(loaded) {
            self.pages.insert(prefix, page);
        }
        Ok(())
    }

    /// Apply the batch in memory: the new root, and the witness of every key read or written.
    pub fn finish(mut self) -> Result<Pending> {
        let hasher = self.inner.hasher;
        let touched: Vec<KeyPath> = {
            let mut k: Vec<KeyPath> = self.changes.keys().copied().collect();
            k.extend(self.reads.iter().copied());
            k.sort_unstable();
            k.dedup();
            k
        };
        self.prefetch(&touched)?;
        let base_dir = self.base.dir.clone();

        let mut proof = Vec::new();
        base_dir
            .prove(
                &touched,
                &|p| self.pages.get(p).map(|a| a.as_ref()),
                &mut proof,
            )
            .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
        let witness = Witness {
            keys: touched,
            proof: MultiProof { nodes: proof },
        };

        // Group the changes by the region that holds them.
        let mut by_region: BTreeMap<Prefix, Vec<Change>> = BTreeMap::new();
        for (key, change) in std::mem::take(&mut self.changes) {
            let (prefix, _) = base_dir.locate(&key);
            by_region.entry(prefix).or_default().push((key, change));
        }
        let new_seq = self.base.seq + 1;
        let mut new_values = BTreeMap::new();
        let mut freed_values = Vec::new();
        let mut regions = Vec::with_capacity(by_region.len());
        let mut splits = 0u64;
        for (prefix, changes) in by_region {
            let old = self.pages.get(&prefix);
            let entries = apply_changes(
                hasher,
                old.map(|p| p.entries.as_slice()).unwrap_or_default(),
                changes,
                &mut new_values,
                &mut freed_values,
            );
            let layout = Layout::build(prefix, entries, PAGE_BODY_BYTES);
            let pages = layout.pages().len() as u64;
            splits += pages.saturating_sub(1);
            regions.push((prefix, subtree_of(hasher, layout, new_seq)));
        }
        let (dir, regions, merges) = merge_sparse(&self.inner, &base_dir, regions, new_seq)?;
        let mut new_pages = 0u64;
        for (_, subtree) in &regions {
            crate::log::record::for_each_page_ref(subtree, &mut |_| new_pages += 1);
        }
        Ok(Pending {
            inner: self.inner,
            base: self.base,
            _pin: self.pin,
            dir,
            regions,
            new_values,
            freed_values,
            witness,
            splits,
            merges,
            new_pages,
        })
    }
}

/// Merge a page's entries with changes (both sorted by key). Large values become unwritten
/// value-log pointers recorded in `new_values`; replaced or deleted value-log values are
/// recorded in `freed`.
fn apply_changes(
    hasher: sprig_core::Hasher,
    old: &[crate::page::Entry],
    changes: Vec<Change>,
    new_values: &mut BTreeMap<KeyPath, Vec<u8>>,
    freed: &mut Vec<u64>,
) -> Vec<crate::page::Entry> {
    use crate::page::Entry;
    let mut out = Vec::with_capacity(old.len() + changes.len());
    let mut old = old.iter().peekable();
    let free = |e: &Entry, freed: &mut Vec<u64>| {
        if let Value::External(x) = &e.value {
            if x.loc != UNWRITTEN {
                freed.push(x.loc);
            }
        }
    };
    for (key, change) in changes {
        while let Some(e) = old.next_if(|e| e.key < key) {
            out.push(e.clone());
        }
        if let Some(e) = old.next_if(|e| e.key == key) {
            free(e, freed);
        }
        if let Some(v) = change {
            let value = if v.len() > MAX_INLINE_VALUE_BYTES {
                let x = ExternalValue {
                    loc: UNWRITTEN,
                    len: v.len() as u64,
                    hash: hasher.hash_value(&v),
                };
                new_values.insert(key, v);
                Value::External(x)
            } else {
                Value::Inline(v)
            };
            out.push(Entry { key, value });
        }
    }
    out.extend(old.cloned());
    out
}

/// The directory subtree of a layout, with every page in memory.
fn subtree_of(hasher: sprig_core::Hasher, layout: Layout, seq: u64) -> Arc<DirNode> {
    match layout {
        Layout::Page(_, entries) if entries.is_empty() => Arc::new(DirNode::Empty),
        Layout::Page(prefix, entries) => {
            let page = Page {
                prefix,
                seq,
                entries,
            };
            Arc::new(DirNode::Page(PageRef {
                node: page.node(hasher),
                count: page.entries.len() as u32,
                checksum: 0,
                loc: PageLoc::Memory(Arc::new(page)),
            }))
        }
        Layout::Split(l, r) => Arc::new(DirNode::branch(
            hasher,
            subtree_of(hasher, *l, seq),
            subtree_of(hasher, *r, seq),
        )),
    }
}

/// Collect every page of a subtree (position and reference), in key order.
fn pages_under(node: &DirNode, pos: Prefix, out: &mut Vec<(Prefix, PageRef)>) {
    match node {
        DirNode::Empty => {}
        DirNode::Page(r) => out.push((pos, r.clone())),
        DirNode::Branch(b) => {
            pages_under(&b.children()[0], pos.child(false), out);
            pages_under(&b.children()[1], pos.child(true), out);
        }
    }
}

/// Replace sparse branches on the changed paths by single pages, so that every branch keeps
/// at least two entries (its node stays an internal node) and pages stay reasonably full.
/// Returns the final directory, the final regions relative to `base`, and the merge count.
fn merge_sparse(
    inner: &Inner,
    base: &Directory,
    regions: Vec<Region>,
    seq: u64,
) -> Result<(Directory, Vec<Region>, u64)> {
    let dir = base
        .replace(regions.clone())
        .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
    let mut merged: Vec<Region> = Vec::new();
    for (prefix, _) in &regions {
        if merged.iter().any(|(q, _)| q.covers(prefix)) {
            continue;
        }
        // Ancestors from the root down: the shallowest sparse one that fits wins.
        for depth in 0..=prefix.depth() {
            let q = Prefix::of_key(prefix.bits(), depth);
            let Some(node) = dir.node_at(&q) else { break };
            if !matches!(node.as_ref(), DirNode::Branch(_)) || node.count() > MERGE_MAX_ENTRIES {
                continue;
            }
            let mut refs = Vec::new();
            pages_under(node, q, &mut refs);
            let pages = inner.load_pages(&refs, ReadKind::Maintenance)?;
            let entries: Vec<crate::page::Entry> = pages
                .iter()
                .flat_map(|p| p.entries.iter().cloned())
                .collect();
            if Page::fits(&entries) {
                let layout = Layout::Page(q, entries);
                merged.push((q, subtree_of(inner.hasher, layout, seq)));
                break;
            }
        }
    }
    if merged.is_empty() {
        return Ok((dir, regions, 0));
    }
    let merges = merged.len() as u64;
    let mut final_regions: Vec<Region> = regions
        .into_iter()
        .filter(|(p, _)| !merged.iter().any(|(q, _)| q.covers(p)))
        .collect();
    final_regions.extend(merged);
    let dir = base
        .replace(final_regions.clone())
        .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
    Ok((dir, final_regions, merges))
}

impl Pending {
    /// The state root after this batch.
    pub fn root(&self) -> Node {
        self.dir.root_node()
    }

    /// The state root before this batch.
    pub fn base_root(&self) -> Node {
        self.base.dir.root_node()
    }

    /// The version this batch was built on.
    pub fn base_seq(&self) -> u64 {
        self.base.seq
    }

    /// The number of entries after this batch.
    pub fn len(&self) -> u64 {
        self.dir.len()
    }

    /// Whether the state is empty after this batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The witness of every key the batch read or wrote, against the base root.
    pub fn witness(&self) -> &Witness {
        &self.witness
    }
}

/// Where the value records written by a commit went.
#[derive(Default)]
struct ValueLocs {
    /// New values, by key.
    new: HashMap<KeyPath, u64>,
    /// Relocated values: old location → new location.
    moved: HashMap<u64, u64>,
}

/// The blocks of a value record.
fn value_blocks(value: &[u8]) -> Result<u32> {
    u32::try_from(value_record_blocks(value.len() as u64))
        .map_err(|_| Error::InvalidArgument("value too large".into()))
}

/// Blocks to write at a location.
struct Write {
    loc: u64,
    blocks: BlockBuf,
}

impl Inner {
    /// Commit `pending`, with cleaning in `mode`.
    pub(crate) fn commit(&self, pending: Pending, mode: CleanMode) -> Result<CommitInfo> {
        let mut w = self.writer.lock();
        if let Some(reason) = &w.poisoned {
            return Err(Error::Poisoned(reason.clone()));
        }
        let head = self.head();
        if head.seq != pending.base.seq {
            return Err(Error::Stale {
                base: pending.base.seq,
                head: head.seq,
            });
        }
        let freed: BTreeSet<u64> = pending.freed_values.iter().copied().collect();
        let relocation = if self.options.auto_clean || mode == CleanMode::Explicit {
            let incoming = pending.new_pages
                + pending
                    .new_values
                    .values()
                    .map(|v| value_record_blocks(v.len() as u64))
                    .sum::<u64>();
            self.plan_relocation(
                &w.table,
                &head.dir,
                &pending.regions,
                &freed,
                incoming,
                mode,
            )?
        } else {
            crate::cleaner::Relocation::default()
        };
        let seq = head.seq + 1;
        // Segments whose files this commit creates: those with nothing written yet, and those
        // its allocations open.
        let existing: BTreeSet<u32> = w
            .table
            .segments
            .iter()
            .filter(|(_, m)| m.used_blocks > 0)
            .map(|(id, _)| *id)
            .collect();
        let mut writes: Vec<Write> = Vec::new();
        let mut written_pages: Vec<(u64, Arc<Page>)> = Vec::new();

        // Value records first: pages point at them.
        let mut locs = ValueLocs::default();
        let mut values_written = Vec::new();
        for (key, value) in &pending.new_values {
            let l = self.queue_value(&mut w.table, &mut writes, key, value)?;
            locs.new.insert(*key, l);
            values_written.push((l, value_blocks(value)?, *key));
        }
        let mut values_freed: Vec<u64> = pending.freed_values.clone();
        for (old, (key, value)) in &relocation.values {
            let l = self.queue_value(&mut w.table, &mut writes, key, value)?;
            locs.moved.insert(*old, l);
            values_written.push((l, value_blocks(value)?, *key));
            values_freed.push(*old);
        }

        // Then every page of the changed and relocated regions, in key order.
        let mut regions = Vec::with_capacity(pending.regions.len() + relocation.regions.len());
        for (prefix, subtree) in pending.regions.iter().chain(relocation.regions.iter()) {
            let node = self.write_subtree(
                subtree,
                seq,
                &locs,
                &mut w.table,
                &mut writes,
                &mut written_pages,
            )?;
            regions.push((*prefix, node));
        }

        let record = CommitRecord {
            seq,
            root: pending.dir.root_node(),
            entries: pending.dir.len(),
            regions,
            values_written,
            values_freed,
            segment_heads: segment_heads(&w.table, &writes),
        };
        let new_segments: BTreeSet<u32> = writes
            .iter()
            .map(|x| loc_segment(x.loc))
            .filter(|id| !existing.contains(id))
            .collect();
        let payload = record
            .encode()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;

        let sync = self.options.sync == SyncPolicy::Always;
        let data_bytes = match self.write_blocks(&writes, &new_segments, sync) {
            Ok(n) => n,
            Err(e) => {
                w.poisoned = Some(e.to_string());
                return Err(e);
            }
        };
        if let Err(e) = w.wal.append(seq, &payload, sync) {
            w.poisoned = Some(e.to_string());
            return Err(e);
        }
        let log_bytes = 2 * payload.len() as u64;
        w.log_bytes_since_checkpoint += log_bytes;

        let dir = apply_record(&head.dir, &mut w.table, &record)
            .map_err(|e| Error::corruption(wal_file_name(w.wal.id()), 0, e.to_string()))?;
        self.set_head(Arc::new(Version { seq, dir }));
        for (l, page) in written_pages.iter() {
            self.cache.insert(*l, page.clone());
        }
        let pages_relocated = relocation.regions.len() as u64;
        let values_relocated = relocation.values.len() as u64;
        self.counters.commit();
        self.counters
            .written(data_bytes + log_bytes, written_pages.len() as u64);
        self.counters.reshaped(pending.splits, pending.merges);
        self.counters.cleaned(pages_relocated, values_relocated, 0);
        // The batch no longer needs its base version: release its pin before deciding which
        // segments can be deleted.
        drop(pending);

        self.refresh_emptied(&mut w);
        self.after_commit(&mut w)?;
        Ok(CommitInfo {
            seq,
            root: record.root,
            pages_written: written_pages.len() as u64,
            bytes_written: data_bytes + log_bytes,
            pages_relocated,
            values_relocated,
        })
    }

    /// Allocate and queue the record of one value; returns its location.
    fn queue_value(
        &self,
        table: &mut crate::log::segments::SegmentTable,
        writes: &mut Vec<Write>,
        key: &KeyPath,
        value: &[u8],
    ) -> Result<u64> {
        let l = table.allocate(value_blocks(value)?);
        let hash = self.hasher.hash_value(value);
        writes.push(Write {
            loc: l,
            blocks: encode_value_record(key, value, &hash),
        });
        Ok(l)
    }

    /// Assign disk locations to the in-memory pages of a subtree and queue their writes.
    ///
    /// Recurses once per directory level (up to 256): the frame must stay small, so the page
    /// itself is encoded in [`Inner::write_page`].
    fn write_subtree(
        &self,
        node: &Arc<DirNode>,
        seq: u64,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        writes: &mut Vec<Write>,
        written: &mut Vec<(u64, Arc<Page>)>,
    ) -> Result<Arc<DirNode>> {
        match node.as_ref() {
            DirNode::Empty => Ok(node.clone()),
            DirNode::Page(r) => match &r.loc {
                PageLoc::Memory(page) => {
                    let (l, checksum) = self.write_page(page, seq, locs, table, writes, written)?;
                    Ok(Arc::new(DirNode::Page(PageRef {
                        loc: PageLoc::Disk(l),
                        checksum,
                        node: r.node,
                        count: r.count,
                    })))
                }
                PageLoc::Disk(_) => Ok(node.clone()),
            },
            DirNode::Branch(b) => {
                let [l, r] = b.children();
                let l = self.write_subtree(l, seq, locs, table, writes, written)?;
                let r = self.write_subtree(r, seq, locs, table, writes, written)?;
                Ok(Arc::new(DirNode::branch(self.hasher, l, r)))
            }
        }
    }

    /// Encode one in-memory page with its value pointers resolved, allocate its block and
    /// queue the write. Returns its location and checksum.
    #[inline(never)]
    fn write_page(
        &self,
        page: &Page,
        seq: u64,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        writes: &mut Vec<Write>,
        written: &mut Vec<(u64, Arc<Page>)>,
    ) -> Result<(u64, u64)> {
        let mut page = page.clone();
        page.seq = seq;
        for e in &mut page.entries {
            if let Value::External(x) = &mut e.value {
                if x.loc == UNWRITTEN {
                    x.loc = *locs
                        .new
                        .get(&e.key)
                        .ok_or_else(|| Error::InvalidArgument("value without a location".into()))?;
                } else if let Some(moved) = locs.moved.get(&x.loc) {
                    x.loc = *moved;
                }
            }
        }
        let block = page
            .encode()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let checksum = crate::codec::checksum(&block.0);
        let l = table.allocate(1);
        let mut buf = BlockBuf::default();
        buf.push(&block);
        writes.push(Write {
            loc: l,
            blocks: buf,
        });
        written.push((l, Arc::new(page)));
        Ok((l, checksum))
    }

    /// Write every queued block run (contiguous runs in one call each) and sync each segment
    /// written to, and the directory if segment files were created. Returns the bytes written.
    fn write_blocks(&self, writes: &[Write], created: &BTreeSet<u32>, sync: bool) -> Result<u64> {
        let mut order: Vec<&Write> = writes.iter().collect();
        order.sort_by_key(|w| w.loc);
        let mut total = 0u64;
        let mut touched = BTreeSet::new();
        let mut run: Option<(u64, BlockBuf)> = None;
        let flush = |run: &mut Option<(u64, BlockBuf)>, total: &mut u64| -> Result<()> {
            if let Some((start, buf)) = run.take() {
                let segment = loc_segment(start);
                let file = self.segments.file(segment, true)?;
                file.write_at(buf.as_bytes(), loc_offset(start))
                    .map_err(|e| Error::io("writing", segment_file_name(segment), e))?;
                *total += buf.len() as u64;
            }
            Ok(())
        };
        for w in order {
            touched.insert(loc_segment(w.loc));
            let extends = run.as_ref().is_some_and(|(start, buf)| {
                loc_segment(*start) == loc_segment(w.loc)
                    && u64::from(loc_block(*start)) + buf.block_count() as u64
                        == u64::from(loc_block(w.loc))
            });
            if extends {
                if let Some((_, buf)) = run.as_mut() {
                    buf.extend_from(&w.blocks);
                }
            } else {
                flush(&mut run, &mut total)?;
                run = Some((w.loc, w.blocks.clone()));
            }
        }
        flush(&mut run, &mut total)?;
        if sync {
            for segment in &touched {
                self.segments
                    .file(*segment, false)?
                    .sync()
                    .map_err(|e| Error::io("syncing", segment_file_name(*segment), e))?;
            }
            if !created.is_empty() {
                self.storage
                    .sync_dir()
                    .map_err(|e| Error::io("syncing", "the database directory", e))?;
            }
        }
        Ok(total)
    }

    /// Housekeeping after a commit: checkpoint when the log has grown, delete segments no
    /// version needs any more.
    fn after_commit(&self, w: &mut crate::db::Writer) -> Result<()> {
        if w.log_bytes_since_checkpoint >= self.options.checkpoint_log_bytes {
            self.checkpoint_locked(w)?;
        }
        self.delete_emptied(w);
        Ok(())
    }

    /// Write a checkpoint of the latest version and start a new commit log.
    pub(crate) fn checkpoint_locked(&self, w: &mut crate::db::Writer) -> Result<()> {
        if let Some(reason) = &w.poisoned {
            return Err(Error::Poisoned(reason.clone()));
        }
        let head = self.head();
        let new_wal_id = w.wal.id() + 1;
        let result = Wal::create(self.storage.as_ref(), new_wal_id).and_then(|wal| {
            Checkpoint {
                seq: head.seq,
                wal_id: new_wal_id,
                wal_offset: 0,
                table: w.table.clone(),
                dir: head.dir.clone(),
            }
            .store(self.storage.as_ref())?;
            Ok(wal)
        });
        let wal = match result {
            Ok(wal) => wal,
            Err(e) => {
                w.poisoned = Some(e.to_string());
                return Err(e);
            }
        };
        let old_wal = std::mem::replace(&mut w.wal, wal);
        let old_checkpoint = w.checkpoint_seq;
        w.checkpoint_seq = head.seq;
        w.log_bytes_since_checkpoint = 0;
        self.counters.checkpoint();
        // The old log and checkpoint are no longer needed; a failure to delete costs space only.
        let _ = self.storage.remove(&wal_file_name(old_wal.id()));
        if old_checkpoint != head.seq {
            let _ = self.storage.remove(&checkpoint_file_name(old_checkpoint));
        }
        Ok(())
    }

    /// Delete segments that hold no live data, once no pinned version can need them.
    pub(crate) fn delete_emptied(&self, w: &mut crate::db::Writer) {
        let oldest = self.oldest_pinned().unwrap_or(u64::MAX);
        let head_seq = self.head().seq;
        let ready: Vec<u32> = w
            .emptied
            .iter()
            .filter(|(id, since)| {
                oldest >= **since
                    && **since <= head_seq
                    && w.table
                        .segments
                        .get(id)
                        .is_some_and(|m| m.live_blocks() == 0)
                    && **id != w.table.active
            })
            .map(|(id, _)| *id)
            .collect();
        let mut deleted = 0;
        for id in ready {
            w.emptied.remove(&id);
            w.table.segments.remove(&id);
            if self.segments.remove(id).is_ok() {
                deleted += 1;
            }
        }
        self.counters.cleaned(0, 0, deleted);
    }
}

/// For every segment written to, its fill after the writes, in allocation order.
fn segment_heads(table: &crate::log::segments::SegmentTable, writes: &[Write]) -> Vec<(u32, u32)> {
    let mut ids: Vec<u32> = writes.iter().map(|w| loc_segment(w.loc)).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter()
        .map(|id| (id, table.segments.get(&id).map_or(0, |m| m.used_blocks)))
        .collect()
}
