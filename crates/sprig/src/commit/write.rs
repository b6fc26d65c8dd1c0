//! The durable part of a commit: allocate blocks for the new values and pages, write them in
//! sequential runs, sync, append the commit record to the log, sync, publish the new version;
//! then housekeeping (checkpoints, deleting segments no version needs).

use super::CommitInfo;
use crate::cleaner::CleanMode;
use crate::db::{Inner, Version, Writer};
use crate::directory::{DirNode, MemoryPage, PageLoc, PageRef};
use crate::error::{Error, Result};
use crate::io::BlockBuf;
use crate::log::checkpoint::Checkpoint;
use crate::log::record::{apply_record, CommitRecord};
use crate::log::segments::{
    encode_value_record, loc_block, loc_offset, loc_segment, segment_file_name, value_record_blocks,
};
use crate::log::wal::{wal_file_name, Wal};
use crate::options::SyncPolicy;
use crate::overlay::Pending;
use crate::page::{Page, MAX_VALUE_BYTES, UNWRITTEN};
use sprig_core::trie::KeyPath;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Where the value records written by a commit went.
#[derive(Default)]
pub(super) struct ValueLocs {
    /// New values, by key.
    pub(super) new: HashMap<KeyPath, u64>,
    /// Relocated values: old location → new location.
    moved: HashMap<u64, u64>,
    /// The overlay's parent: values its pages inherited from committed ancestor overlays.
    parent: Option<Arc<Version>>,
}

impl ValueLocs {
    /// Where the value for `key` that was not written when its page was built went.
    fn unwritten(&self, key: &KeyPath) -> Option<u64> {
        self.new
            .get(key)
            .copied()
            .or_else(|| self.parent.as_ref().and_then(|p| p.written_value(key)))
    }
}

/// The blocks of a value record.
pub(super) fn value_blocks(value: &[u8]) -> Result<u32> {
    u32::try_from(value_record_blocks(value.len() as u64)).map_err(|_| Error::ValueTooLarge {
        len: value.len() as u64,
        max: MAX_VALUE_BYTES as u64,
    })
}

/// What a commit's page writes produce: each page as written (value pointers resolved), by
/// location; and each in-memory page with its location and checksum, to release once durable.
pub(super) type WrittenPages<'a> = (
    &'a mut Vec<(u64, Arc<Page>)>,
    &'a mut Vec<(Arc<MemoryPage>, u64, u64)>,
);

/// Blocks to write at a location.
pub(super) struct Write {
    pub(super) loc: u64,
    blocks: BlockBuf,
}

impl Write {
    /// The bytes to write.
    pub(super) fn len(&self) -> usize {
        self.blocks.len()
    }
}

impl Inner {
    /// Commit the overlay `pending` and its uncommitted ancestors (oldest first), with
    /// cleaning in `mode`. Returns what the last commit did.
    pub(crate) fn commit(
        self: &Arc<Self>,
        pending: Pending,
        mode: CleanMode,
    ) -> Result<CommitInfo> {
        let mut w = self.writer.lock();
        let mut chain: Vec<Arc<Version>> = Vec::new();
        let mut v = pending.version.clone();
        while let Some(o) = &v.overlay {
            if o.is_committed() {
                break;
            }
            let parent = o.parent();
            chain.push(v);
            v = parent;
        }
        if chain.is_empty() {
            return Err(Error::AlreadyCommitted(pending.version.id));
        }
        // Refuse the whole chain before writing any of it: an unusable overlay anywhere in it,
        // or a bottom that no longer rests on the latest version.
        let head = self.head();
        pending.version.check_usable(head.seq)?;
        if let Some(base) = chain.last().and_then(|v| v.overlay.as_ref()) {
            let parent = base.parent();
            if parent.id != head.id {
                return Err(Error::Stale {
                    base: parent.seq,
                    head: head.seq,
                });
            }
        }
        drop(pending);
        let mut last = None;
        for version in chain.into_iter().rev() {
            last = Some(self.commit_one(&mut w, &version, mode)?);
        }
        last.ok_or_else(|| Error::internal("a commit chain with nothing to commit"))
    }

    /// Commit one overlay whose parent is the latest version.
    fn commit_one(
        self: &Arc<Self>,
        w: &mut Writer,
        version: &Arc<Version>,
        mode: CleanMode,
    ) -> Result<CommitInfo> {
        if let Some(reason) = &w.poisoned {
            return Err(Error::Poisoned(reason.clone()));
        }
        let head = self.head();
        let Some(pending) = &version.overlay else {
            return Err(Error::internal(
                "committing a version that is not an overlay",
            ));
        };
        version.check_usable(head.seq)?;
        let parent = pending.parent();
        if parent.id != head.id {
            return Err(Error::Stale {
                base: parent.seq,
                head: head.seq,
            });
        }
        let mut freed: BTreeSet<u64> = pending.freed_values.iter().copied().collect();
        for key in &pending.freed_unwritten {
            let l = parent
                .written_value(key)
                .ok_or_else(|| Error::internal("an ancestor overlay's value has no location"))?;
            freed.insert(l);
        }
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
        // In-memory pages this commit writes: released from memory once it is durable.
        let mut to_release: Vec<(Arc<MemoryPage>, u64, u64)> = Vec::new();

        // Value records first: pages point at them.
        let mut locs = ValueLocs {
            parent: Some(parent.clone()),
            ..ValueLocs::default()
        };
        let mut values_written = Vec::new();
        for (key, value) in &pending.new_values {
            let l = self.queue_value(&mut w.table, &mut writes, key, value)?;
            locs.new.insert(*key, l);
            values_written.push((l, value_blocks(value)?, *key));
        }
        let mut values_freed: Vec<u64> = freed.iter().copied().collect();
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
                &locs,
                &mut w.table,
                &mut writes,
                &mut (&mut written_pages, &mut to_release),
            )?;
            regions.push((*prefix, node));
        }
        let entries = version.dir.len();

        let record = CommitRecord {
            seq,
            root: version.dir.root_node(),
            entries,
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
            .map_err(|e| Error::internal(e.to_string()))?;

        let sync = self.options.sync == SyncPolicy::Always;
        let data_bytes = match self.write_blocks(&writes, &new_segments, sync) {
            Ok(n) => n,
            Err(e) => {
                w.poisoned = Some(e.to_string());
                return Err(e);
            }
        };
        // Failpoint (feature `failpoints`): pages durable, no commit record yet.
        failpoint!("commit.pages_synced");
        if let Err(e) = w.wal.append(seq, &payload, sync) {
            w.poisoned = Some(e.to_string());
            return Err(e);
        }
        // Failpoint (feature `failpoints`): the commit is durable but not yet published.
        failpoint!("commit.record_synced");
        let log_bytes = 2 * payload.len() as u64;

        let dir = apply_record(&head.dir, &mut w.table, &record)
            .map_err(|e| Error::corruption(wal_file_name(w.wal.id()), 0, e.to_string()))?;
        pending.mark_committed(locs.new.clone(), head.clone());
        self.set_head(
            w,
            Arc::new(Version {
                id: version.id,
                seq,
                dir,
                overlay: None,
            }),
        );
        for (l, page) in written_pages.iter() {
            self.cache.insert(*l, page.clone());
        }
        // Overlays built on this one share these pages: from now on they read them from disk.
        for (page, l, checksum) in to_release {
            page.release(l, checksum);
        }
        let pages_relocated = relocation.regions.len() as u64;
        let values_relocated = relocation.values.len() as u64;
        self.counters.commit();
        self.counters
            .written(data_bytes + log_bytes, written_pages.len() as u64);
        self.counters.reshaped(pending.splits, pending.merges);
        self.counters.cleaned(pages_relocated, values_relocated, 0);

        self.refresh_emptied(w);
        self.after_commit(w)?;
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
    pub(super) fn queue_value(
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
    /// Recurses once per directory level (up to 256): the frame must stay small, so pages are
    /// handled in [`Inner::write_page`].
    pub(super) fn write_subtree(
        &self,
        node: &Arc<DirNode>,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        writes: &mut Vec<Write>,
        written: &mut WrittenPages<'_>,
    ) -> Result<Arc<DirNode>> {
        match node.as_ref() {
            DirNode::Empty => Ok(node.clone()),
            DirNode::Page(r) => {
                let on_disk = |l: u64, checksum: u64| {
                    Arc::new(DirNode::Page(PageRef {
                        loc: PageLoc::Disk(l),
                        checksum,
                        node: r.node,
                        count: r.count,
                    }))
                };
                match &r.loc {
                    PageLoc::Memory(m) => match (m.page(), m.written()) {
                        (Some(page), _) => {
                            let (l, checksum) =
                                self.write_page(&page, locs, table, writes, written.0)?;
                            written.1.push((m.clone(), l, checksum));
                            Ok(on_disk(l, checksum))
                        }
                        // Written and released by an earlier commit of the chain.
                        (None, Some((l, checksum))) => Ok(on_disk(l, checksum)),
                        (None, None) => Err(Error::internal(
                            "an in-memory page was released before it was written",
                        )),
                    },
                    PageLoc::Disk(_) => Ok(node.clone()),
                }
            }
            DirNode::Branch(b) => {
                let [l, r] = b.children();
                let l = self.write_subtree(l, locs, table, writes, written)?;
                let r = self.write_subtree(r, locs, table, writes, written)?;
                Ok(Arc::new(DirNode::branch(self.hasher, l, r)))
            }
        }
    }

    /// Resolve one in-memory page's value pointers (new and relocated values), allocate its
    /// block and queue the write. Returns its location and checksum.
    #[inline(never)]
    fn write_page(
        &self,
        page: &Arc<Page>,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        writes: &mut Vec<Write>,
        written: &mut Vec<(u64, Arc<Page>)>,
    ) -> Result<(u64, u64)> {
        let mut unresolved = false;
        let patched = page
            .with_relocated_values(|key, x| {
                let to = if x.loc == UNWRITTEN {
                    locs.unwritten(key)
                } else {
                    locs.moved.get(&x.loc).copied()
                };
                unresolved |= x.loc == UNWRITTEN && to.is_none();
                to
            })
            .map_err(|e| Error::internal(format!("rebuilding a page: {e}")))?;
        if unresolved {
            return Err(Error::internal("a new value has no location"));
        }
        let page = match patched {
            Some(p) => Arc::new(p),
            None => page.clone(),
        };
        let checksum = crate::codec::checksum(&page.block().0);
        let l = table.allocate(1);
        let mut buf = BlockBuf::default();
        buf.push(page.block());
        writes.push(Write {
            loc: l,
            blocks: buf,
        });
        written.push((l, page));
        Ok((l, checksum))
    }

    /// Write every queued block run (contiguous runs in one call each) and sync each segment
    /// written to, and the directory if segment files were created. Returns the bytes written.
    pub(super) fn write_blocks(
        &self,
        writes: &[Write],
        created: &BTreeSet<u32>,
        sync: bool,
    ) -> Result<u64> {
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
        // Failpoints (feature `failpoints`): written, not synced; a new segment file unsynced.
        failpoint!("commit.pages_written");
        if !created.is_empty() {
            failpoint!("commit.segment_created");
        }
        if sync {
            self.sync_segments(&touched, !created.is_empty())?;
        }
        Ok(total)
    }

    /// Sync each of the segments `touched`, then the directory if segment files were created.
    pub(super) fn sync_segments(&self, touched: &BTreeSet<u32>, created: bool) -> Result<()> {
        for segment in touched {
            self.segments
                .file(*segment, false)?
                .sync()
                .map_err(|e| Error::io("syncing", segment_file_name(*segment), e))?;
        }
        if created {
            self.storage
                .sync_dir()
                .map_err(|e| Error::io("syncing", "the database directory", e))?;
        }
        Ok(())
    }

    /// Housekeeping after a commit: checkpoint when the log has grown, delete segments no
    /// version needs any more.
    pub(crate) fn after_commit(&self, w: &mut crate::db::Writer) -> Result<()> {
        if w.wal.end() >= self.options.checkpoint_log_bytes {
            self.checkpoint_locked(w)?;
        }
        self.delete_emptied(w);
        Ok(())
    }

    /// Start a new commit log and write a checkpoint of the oldest retained version (so a
    /// reopen replays every retained version), then delete the logs and checkpoints older
    /// than it.
    pub(crate) fn checkpoint_locked(&self, w: &mut crate::db::Writer) -> Result<()> {
        if let Some(reason) = &w.poisoned {
            return Err(Error::Poisoned(reason.clone()));
        }
        let snapshot = w
            .history
            .front()
            .cloned()
            .ok_or_else(|| Error::internal("no version to checkpoint"))?;
        let version = self.retained_version(snapshot.seq)?;
        let new_wal_id = w.wal.id() + 1;
        let result = Wal::create(self.storage.as_ref(), new_wal_id).and_then(|wal| {
            // Failpoint (feature `failpoints`): the new log exists, no checkpoint yet.
            failpoint!("checkpoint.wal_rotated");
            Checkpoint {
                seq: snapshot.seq,
                wal_id: snapshot.wal_id,
                wal_offset: snapshot.wal_end,
                table: snapshot.table.clone(),
                dir: version.dir.clone(),
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
        w.wal = wal;
        w.checkpoint_seq = snapshot.seq;
        self.counters.checkpoint();
        // Older logs and checkpoints are no longer needed; a failure to delete costs space only.
        if let Ok(names) = self.storage.list() {
            for name in names {
                let old = crate::log::wal::parse_wal_file_name(&name)
                    .is_some_and(|id| id < snapshot.wal_id)
                    || crate::log::checkpoint::parse_checkpoint_file_name(&name)
                        .is_some_and(|seq| seq < snapshot.seq);
                if old {
                    // Failpoint (feature `failpoints`): old files partly deleted.
                    failpoint!("checkpoint.deleting_old");
                    let _ = self.storage.remove(&name);
                }
            }
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
            // Failpoint (feature `failpoints`): emptied segments partly deleted.
            failpoint!("cleaner.deleting_segment");
            if self.segments.remove(id).is_ok() {
                deleted += 1;
            }
        }
        self.counters.cleaned(0, 0, deleted);
    }
}

/// For every segment written to, its fill after the writes, in allocation order.
fn segment_heads(table: &crate::log::segments::SegmentTable, writes: &[Write]) -> Vec<(u32, u32)> {
    let ids: BTreeSet<u32> = writes.iter().map(|w| loc_segment(w.loc)).collect();
    segment_heads_of(table, &ids)
}

/// The fill of each segment of `ids`, in allocation order (segment ids grow as segments fill).
pub(super) fn segment_heads_of(
    table: &crate::log::segments::SegmentTable,
    ids: &BTreeSet<u32>,
) -> Vec<(u32, u32)> {
    ids.iter()
        .map(|id| (*id, table.segments.get(id).map_or(0, |m| m.used_blocks)))
        .collect()
}
