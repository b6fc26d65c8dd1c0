//! The durable part of a commit: allocate blocks for the new values and pages, write them in
//! sequential runs, sync, append the commit record to the log, sync, publish the new version;
//! then housekeeping (checkpoints, deleting segments no version needs).

use super::engine::Inner;
use super::CommitInfo;
use crate::error::{Error, Result};
use crate::log::publish::{Blocks, Published};
use crate::log::stager::Stager;
use crate::log::record::{CommitRecord, Known, Prior, Replaced, TableChange};
use crate::log::segments::{encode_value_record, value_blocks};
use crate::log::writer::Writer;
use crate::state::directory::{Directory, MemoryPage, NodeId, PageLoc, PageRef, Shape, Subtree};
use crate::state::prefix::Prefix;
use crate::write::cores;
use crate::state::page::{Page, UNWRITTEN};
use crate::state::tables::TableId;
use crate::state::version::{OverlayState, Version};
use crate::write::cleaner::CleanMode;
use sprig_core::trie::KeyPath;
use crate::telemetry::Phase;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// The fewest regions whose superseded pages are looked up on another core while the commit
/// writes; for fewer, handing the walk over costs more than it saves.
const PARALLEL_REPLACED_MIN: usize = 64;

/// What a commit's writes produce, for its record and its publication.
struct Staging {
    /// The blocks written, not yet synced.
    staged: crate::log::stager::Staged,
    /// The segments whose files the writes created.
    created: BTreeSet<u32>,
    segment_heads: Vec<(u32, u32)>,
    /// Each page as written, by location.
    written_pages: Vec<(u64, Arc<Page>)>,
    /// The in-memory pages written, to release once durable.
    to_release: Vec<(Arc<MemoryPage>, u64, u64)>,
    locs: ValueLocs,
    values_written: Vec<(u64, u32, TableId, KeyPath)>,
    values_freed: Vec<u64>,
    /// The record's table changes, and what the writer has of each resulting directory.
    tables: Vec<TableChange>,
    known: Vec<(TableId, Known)>,
    /// The overlay's in-memory pages written, to move to disk in place.
    moves: Vec<(NodeId, u64, u64)>,
    /// Relocated regions to put into a result built in place (`known`'s entry at the index),
    /// once its pages are moved: a page placed beside one of them is copied into their twig,
    /// and must be copied from where it was written.
    relocate_in_place: Vec<(usize, Vec<crate::state::directory::Region>)>,
}

/// Where the value records written by a commit went.
#[derive(Default)]
pub(crate) struct ValueLocs {
    /// New values, by table and key.
    pub(crate) new: HashMap<(TableId, KeyPath), u64>,
    /// Relocated values: old location → new location.
    moved: HashMap<u64, u64>,
    /// The overlay's parent: values its pages inherited from committed ancestor overlays.
    parent: Option<Arc<Version>>,
}

impl ValueLocs {
    /// Where the value for `key` in `table` that was not written when its page was built
    /// went.
    fn unwritten(&self, table: TableId, key: &KeyPath) -> Option<u64> {
        self.new
            .get(&(table, *key))
            .copied()
            .or_else(|| self.parent.as_ref().and_then(|p| p.written_value(table, key)))
    }
}

/// What a commit's page writes produce: each page as written (value pointers resolved), by
/// location; and each in-memory page with its location and checksum, to release once durable.
pub(crate) type WrittenPages<'a> = (
    &'a mut Vec<(u64, Arc<Page>)>,
    &'a mut Vec<(Arc<MemoryPage>, u64, u64)>,
);

impl Inner {
    /// Commit the overlay `version` and its uncommitted ancestors (oldest first), with
    /// cleaning in `mode`. Returns what the last commit did.
    pub(crate) fn commit(&self, version: Arc<Version>, mode: CleanMode) -> Result<CommitInfo> {
        let _span = tracing::debug_span!(target: "sprig", "sprig.commit", seq = version.seq).entered();
        let started = Instant::now();
        let mut w = self.log.writer.lock();
        w.begin_write()?;
        let mut chain: Vec<Arc<Version>> = Vec::new();
        let mut v = version.clone();
        while let Some(o) = &v.overlay {
            if o.is_committed() {
                break;
            }
            let parent = o.parent();
            chain.push(v);
            v = parent;
        }
        if chain.is_empty() {
            return Err(Error::AlreadyCommitted(version.id));
        }
        // Refuse the whole chain before writing any of it: an unusable overlay anywhere in it,
        // or a bottom that no longer rests on the latest version.
        let head = self.head();
        version.check_usable(head.seq)?;
        if let Some(base) = chain.last().and_then(|v| v.overlay.as_ref()) {
            let parent = base.parent();
            if parent.id != head.id {
                return Err(Error::Stale {
                    base: parent.seq,
                    head: head.seq,
                });
            }
        }
        drop(version);
        let mut last = None;
        for version in chain.into_iter().rev() {
            last = Some(self.commit_one(&mut w, &version, mode)?);
        }
        let info = last.ok_or_else(|| Error::internal("a commit chain with nothing to commit"))?;
        self.counters
            .metrics
            .commit_seconds
            .record(started.elapsed().as_secs_f64());
        Ok(info)
    }

    /// Commit one overlay whose parent is the latest version.
    fn commit_one(
        &self,
        w: &mut Writer,
        version: &Arc<Version>,
        mode: CleanMode,
    ) -> Result<CommitInfo> {
        w.check_writable()?;
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
        let mut freed: BTreeSet<u64> = pending.parts.freed_values.iter().copied().collect();
        for (table, key) in &pending.parts.freed_unwritten {
            let l = parent
                .written_value(*table, key)
                .ok_or_else(|| Error::internal("an ancestor overlay's value has no location"))?;
            freed.insert(l);
        }
        let relocation = if self.options.auto_clean || mode == CleanMode::Explicit {
            let incoming = pending.parts.new_pages
                + pending
                    .parts.new_values
                    .values()
                    .map(|v| value_blocks(v).map(u64::from))
                    .sum::<Result<u64>>()?;
            self.plan_relocation(
                w,
                &head.tables,
                &pending.parts.regions,
                &freed,
                incoming,
                mode,
            )?
        } else {
            crate::write::cleaner::Relocation::default()
        };
        w.guarded(|w| self.write_and_publish(w, version, &head, &freed, relocation))
    }

    /// The part of a commit that changes the writer's state: allocate blocks for the new
    /// values and pages (and what the cleaner relocates), then publish. Runs guarded: a
    /// failure poisons the writer.
    fn write_and_publish(
        &self,
        w: &mut Writer,
        version: &Arc<Version>,
        head: &Arc<Version>,
        freed: &BTreeSet<u64>,
        relocation: crate::write::cleaner::Relocation,
    ) -> Result<CommitInfo> {
        let Some(pending) = &version.overlay else {
            return Err(Error::internal(
                "committing a version that is not an overlay",
            ));
        };
        let seq = head
            .seq
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit sequence numbers exhausted"))?;
        // Segments whose files this commit creates: those with nothing written yet, and those
        // its allocations open.
        let existing: BTreeSet<u32> = w
            .table
            .segments
            .iter()
            .filter(|(_, m)| m.used_blocks > 0)
            .map(|(id, _)| *id)
            .collect();
        let ids: BTreeSet<TableId> = pending
            .parts
            .regions
            .keys()
            .chain(relocation.regions.keys())
            .copied()
            .collect();
        // The pages the record's regions supersede, found on another core while this one
        // writes (the record's regions of each table: the overlay's, then the relocated).
        let replaced_on: Vec<(TableId, Directory, Vec<Prefix>)> = ids
            .iter()
            .filter_map(|id| {
                let dir = head.tables.dir(*id)?.clone();
                let prefixes: Vec<Prefix> = [&pending.parts.regions, &relocation.regions]
                    .into_iter()
                    .flat_map(|r| r.get(id).into_iter().flatten().map(|(p, _)| *p))
                    .collect();
                Some((*id, dir, prefixes))
            })
            .collect();
        let regions_replaced: usize = replaced_on.iter().map(|(_, _, p)| p.len()).sum();
        let find_replaced = move || -> Vec<Replaced> {
            replaced_on
                .into_iter()
                .map(|(id, dir, prefixes)| Replaced::compute(id, dir, prefixes))
                .collect()
        };
        let write_started = Instant::now();
        let (replaced, staging) = cores::beside(
            regions_replaced >= PARALLEL_REPLACED_MIN,
            find_replaced,
            || self.stage(w, version, pending, head, freed, &relocation, &ids, &existing),
        );
        let staging = staging?;
        self.counters.phase(Phase::Write, write_started.elapsed());
        // From here until `mark_committed` the head may already carry this overlay's
        // sequence number: readers must see it as being committed, not superseded.
        if !pending.begin_commit() {
            return Err(Error::Discarded {
                overlay: version.id,
                seq: version.seq,
            });
        }
        // The overlay's pages are written, not yet durable: the overlay is being committed, and
        // a failure from here on poisons the writer, so no block is reused while it may read
        // them. They go into the cache first, so that readers of the overlay (the pipeline's
        // next batch) find them there while the commit syncs, as they found them in memory.
        let evicted = staging.written_pages
            .iter()
            .filter_map(|(l, page)| self.cache.insert(*l, page.clone()))
            .collect();
        self.drop_pages(evicted);
        version.tables.arena().move_to_disk(&staging.moves);
        // In place, the result is the overlay's directory (its pages now on disk) with the
        // relocated regions put in (their nodes unchanged, so it is its own equal).
        let mut known = staging.known;
        for (i, relocated) in staging.relocate_in_place {
            let Some((_, Known::Built(dir))) = known.get_mut(i) else {
                return Err(Error::internal("relocated regions for a result not built in place"));
            };
            *dir = dir
                .replace_as(relocated, dir)
                .map_err(|e| Error::internal(format!("relocating regions: {e}")))?;
        }
        let record = CommitRecord {
            seq,
            dropped: Vec::new(),
            created: Vec::new(),
            tables: staging.tables,
            values_written: staging.values_written,
            values_freed: staging.values_freed,
            segment_heads: staging.segment_heads,
            unions: Vec::new(),
        };
        let published = self.publish_record(
            w,
            head,
            &record,
            Blocks {
                staged: staging.staged,
                created: &staging.created,
            },
            version.id,
            &Prior {
                known,
                replaced,
            },
        );
        let Published {
            data_bytes,
            log_bytes,
            sync_took,
            log_took,
            ..
        } = published.inspect_err(|_| pending.abort_commit())?;
        self.counters.phase(Phase::Sync, sync_took);
        self.counters.phase(Phase::Log, log_took);
        pending.mark_committed(staging.locs.new, head.clone());
        // Overlays built on this one share these pages: from now on they read them from disk.
        for (page, l, checksum) in staging.to_release {
            page.release(l, checksum);
        }
        let pages_relocated = relocation.regions.values().map(|r| r.len() as u64).sum();
        let values_relocated = relocation.values.len() as u64;
        self.counters.commit();
        self.counters
            .written(data_bytes + log_bytes, staging.written_pages.len() as u64);
        self.counters.reshaped(pending.parts.splits, pending.parts.merges);
        self.counters.cleaned(pages_relocated, values_relocated, 0);

        let written = staging.written_pages.len();
        let pages_written = written as u64;
        // The record, the relocation and the list of pages written hold a commit's worth of
        // allocations: freed on the background thread (~13 ms of the calling thread a
        // transfer 2^24 batch by its drop samples), not on the commit's path.
        self.drop_off_path(written, (record, relocation, staging.written_pages));
        let housekeeping_started = Instant::now();
        self.refresh_emptied(w);
        self.after_commit(w)?;
        self.counters.phase(Phase::Housekeeping, housekeeping_started.elapsed());
        Ok(CommitInfo {
            seq,
            root: version.tables.default_dir().root_node(),
            db_root: version.tables.db_root(),
            pages_written,
            bytes_written: data_bytes + log_bytes,
            pages_relocated,
            values_relocated,
        })
    }

    /// Allocate blocks for the new values and pages of the overlay `version` (whose overlay
    /// state is `pending`; and what the cleaner relocates) and queue their writes: the values
    /// first (pages point at them), then every page of the changed and relocated regions,
    /// table by table (`ids`), in key order. `existing` are the segments written before.
    #[allow(clippy::too_many_arguments)]
    fn stage(
        &self,
        w: &mut Writer,
        version: &Arc<Version>,
        pending: &OverlayState,
        head: &Arc<Version>,
        freed: &BTreeSet<u64>,
        relocation: &crate::write::cleaner::Relocation,
        ids: &BTreeSet<TableId>,
        existing: &BTreeSet<u32>,
    ) -> Result<Staging> {
        let parent = pending.parent();
        let mut stager = Stager::new(&self.log.segments);
        let mut written_pages: Vec<(u64, Arc<Page>)> = Vec::new();
        // In-memory pages this commit writes: released from memory once it is durable.
        let mut to_release: Vec<(Arc<MemoryPage>, u64, u64)> = Vec::new();

        // Value records first: pages point at them.
        let mut locs = ValueLocs {
            parent: Some(parent.clone()),
            ..ValueLocs::default()
        };
        let mut values_written = Vec::new();
        for ((table, key), value) in &pending.parts.new_values {
            let l = self.queue_value(&mut w.table, &mut stager, key, value)?;
            locs.new.insert((*table, *key), l);
            values_written.push((l, value_blocks(value)?, *table, *key));
        }
        let mut values_freed: Vec<u64> = freed.iter().copied().collect();
        for (old, (table, key, value)) in &relocation.values {
            let l = self.queue_value(&mut w.table, &mut stager, key, value)?;
            locs.moved.insert(*old, l);
            values_written.push((l, value_blocks(value)?, *table, *key));
            values_freed.push(*old);
        }

        // Then every page of the changed and relocated regions, table by table, in key order.
        // The record's table changes, and what the writer has of each resulting directory.
        let mut tables: Vec<TableChange> = Vec::new();
        let mut known: Vec<(TableId, Known)> = Vec::new();
        // The overlay's in-memory pages written, to move to disk in place.
        let mut moves: Vec<(NodeId, u64, u64)> = Vec::new();
        let mut relocate_in_place = Vec::new();
        for &id in ids {
            let dir = version
                .tables
                .dir(id)
                .ok_or_else(|| Error::internal("a commit changes a table its version lacks"))?;
            // The overlay's directory becomes the committed one when it was built on the
            // latest version's: then the overlay's pages move to disk in place, and no second
            // copy of its changed paths is made. (It was built on another when the parent
            // overlay's commit relocated pages: then the result is computed from the record.)
            let in_place = matches!(
                (parent.tables.dir(id), head.tables.dir(id)),
                (Some(p), Some(h)) if p.is(h)
            );
            let mut written = (&mut written_pages, &mut to_release);
            let mut regions = Vec::new();
            for (prefix, subtree) in pending.parts.regions.get(&id).into_iter().flatten() {
                let node = if in_place {
                    // Moved in place, the region's pages must be the directory's own (a page
                    // beside another is its twig's): `merge_sparse` takes them from it.
                    debug_assert!(
                        dir.node_at(prefix).is_some_and(|n| n.is(subtree)),
                        "a changed region that is not its directory's node"
                    );
                    self.write_in_place(
                        id,
                        subtree,
                        &locs,
                        &mut w.table,
                        &mut stager,
                        &mut written,
                        &mut moves,
                    )?;
                    subtree.clone()
                } else {
                    self.write_subtree(id, subtree, &locs, &mut w.table, &mut stager, &mut written)?
                };
                regions.push((*prefix, node));
            }
            let mut relocated = Vec::new();
            for (prefix, subtree) in relocation.regions.get(&id).into_iter().flatten() {
                let node =
                    self.write_subtree(id, subtree, &locs, &mut w.table, &mut stager, &mut written)?;
                relocated.push((*prefix, node));
            }
            // In place, the result is the overlay's directory, with the relocated regions put
            // in once its pages are moved (see `write_and_publish`); else the overlay's
            // directory equals the result.
            if in_place && !relocated.is_empty() {
                relocate_in_place.push((known.len(), relocated.clone()));
            }
            known.push((
                id,
                match in_place {
                    false => Known::Equal(dir.clone()),
                    true => Known::Built(dir.clone()),
                },
            ));
            regions.extend(relocated);
            tables.push(TableChange {
                table: id,
                root: dir.root_node(),
                entries: dir.len(),
                regions,
            });
        }
        let segment_heads = segment_heads_of(&w.table, stager.touched());
        let created: BTreeSet<u32> = stager
            .touched()
            .iter()
            .filter(|id| !existing.contains(id))
            .copied()
            .collect();
        let staged = stager.finish(&w.table)?;
        Ok(Staging {
            staged,
            created,
            segment_heads,
            written_pages,
            to_release,
            locs,
            values_written,
            values_freed,
            tables,
            known,
            moves,
            relocate_in_place,
        })
    }

    /// Allocate and queue the record of one value; returns its location.
    pub(crate) fn queue_value(
        &self,
        table: &mut crate::log::segments::SegmentTable,
        stager: &mut Stager<'_>,
        key: &KeyPath,
        value: &[u8],
    ) -> Result<u64> {
        let l = table.allocate(value_blocks(value)?)?;
        let hash = self.hasher.hash_value(value);
        stager.push(l, encode_value_record(key, value, &hash).as_bytes())?;
        Ok(l)
    }

    /// Assign disk locations to the in-memory pages of a subtree and queue their writes.
    ///
    /// Recurses once per directory level (up to 256): the frame must stay small, so pages are
    /// handled in [`Inner::write_page`].
    pub(crate) fn write_subtree(
        &self,
        table_id: TableId,
        node: &Subtree,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        stager: &mut Stager<'_>,
        written: &mut WrittenPages<'_>,
    ) -> Result<Subtree> {
        match node.shape() {
            Shape::Empty => Ok(node.clone()),
            Shape::Page(r) => match &r.loc {
                PageLoc::Memory(m) => {
                    let (l, checksum) =
                        self.write_memory_page(table_id, m, locs, table, stager, written)?;
                    Ok(Subtree::page(
                        node.arena(),
                        &PageRef {
                            loc: PageLoc::Disk(l),
                            checksum,
                            node: r.node,
                            count: r.count,
                        },
                    ))
                }
                PageLoc::Disk(_) => Ok(node.clone()),
            },
            Shape::Branch(l, r) => {
                let l = self.write_subtree(table_id, &l, locs, table, stager, written)?;
                let r = self.write_subtree(table_id, &r, locs, table, stager, written)?;
                Ok(Subtree::branch(self.hasher, l, r))
            }
        }
    }

    /// Write the in-memory pages of a subtree of the overlay being committed, noting for each
    /// its slot, location and checksum in `moves` (to move it to disk in place); pages on disk
    /// already stay as they are.
    #[allow(clippy::too_many_arguments)]
    fn write_in_place(
        &self,
        table_id: TableId,
        node: &Subtree,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        stager: &mut Stager<'_>,
        written: &mut WrittenPages<'_>,
        moves: &mut Vec<(NodeId, u64, u64)>,
    ) -> Result<()> {
        for (id, r) in node.page_slots() {
            if let PageLoc::Memory(m) = &r.loc {
                let (l, checksum) =
                    self.write_memory_page(table_id, m, locs, table, stager, written)?;
                moves.push((id, l, checksum));
            }
        }
        Ok(())
    }

    /// Where an in-memory page goes: written now (its location and checksum noted in
    /// `written`, to release it from memory once durable), or where an earlier commit of the
    /// chain wrote it.
    fn write_memory_page(
        &self,
        table_id: TableId,
        m: &Arc<MemoryPage>,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        stager: &mut Stager<'_>,
        written: &mut WrittenPages<'_>,
    ) -> Result<(u64, u64)> {
        match (m.page(), m.written()) {
            (Some(page), _) => {
                let (l, checksum) =
                    self.write_page(table_id, &page, locs, table, stager, written.0)?;
                written.1.push((m.clone(), l, checksum));
                Ok((l, checksum))
            }
            // Written and released by an earlier commit of the chain.
            (None, Some(at)) => Ok(at),
            (None, None) => Err(Error::internal(
                "an in-memory page was released before it was written",
            )),
        }
    }

    /// Resolve one in-memory page's value pointers (new and relocated values), allocate its
    /// block and queue the write. Returns its location and checksum.
    #[inline(never)]
    fn write_page(
        &self,
        table_id: TableId,
        page: &Arc<Page>,
        locs: &ValueLocs,
        table: &mut crate::log::segments::SegmentTable,
        stager: &mut Stager<'_>,
        written: &mut Vec<(u64, Arc<Page>)>,
    ) -> Result<(u64, u64)> {
        let mut unresolved = false;
        let patched = page
            .with_relocated_values(|key, x| {
                let to = if x.loc == UNWRITTEN {
                    locs.unwritten(table_id, key)
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
        let checksum = page.checksum();
        let l = table.allocate(1)?;
        stager.push(l, page.bytes())?;
        written.push((l, page));
        Ok((l, checksum))
    }
}

/// The fill of each segment of `ids`, in allocation order (segment ids grow as segments fill).
pub(crate) fn segment_heads_of(
    table: &crate::log::segments::SegmentTable,
    ids: &BTreeSet<u32>,
) -> Vec<(u32, u32)> {
    ids.iter()
        .map(|id| (*id, table.segments.get(id).map_or(0, |m| m.used_blocks)))
        .collect()
}
