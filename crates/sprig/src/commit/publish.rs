//! The one publish path: how a new version becomes durable and then visible, and how a failure
//! on the way poisons the writer.
//!
//! Commits, cleaning (which rides on commits) and rollbacks publish a commit record; a bulk
//! load publishes a checkpoint. Nothing else changes the latest version. Every publication
//! runs inside [`Writer::guarded`]: once the writer's state has started to change, any failure
//! leaves it poisoned, so no later commit can build on state that might not match the disk
//! (a failed sync may have dropped data; a record may be durable although publishing it
//! failed). Reopening the database recovers from what is durable.
//!
//! Order of a record's publication, in every sync policy: the blocks it refers to are written
//! and synced (and the directory, when a segment file was created), so that a record on disk
//! always has its pages; then the record is appended (and synced under
//! `SyncPolicy::Always`: the commit is durable there); then it is applied to the latest
//! directory and the result becomes the latest version.

use crate::db::{Inner, Version, Writer};
use crate::directory::Directory;
use crate::error::{Error, Result};
use crate::io::BlockBuf;
use crate::log::checkpoint::{checkpoint_file_name, Checkpoint};
use crate::log::record::{apply_record, CommitRecord};
use crate::log::recovery::Snapshot;
use crate::log::segments::{loc_block, loc_offset, loc_segment, segment_file_name, SegmentTable};
use crate::log::wal::{wal_file_name, Wal, FLAG_PRIOR_DURABLE, FLAG_SYNCED};
use crate::options::SyncPolicy;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Blocks to write at a location.
pub(crate) struct Write {
    pub loc: u64,
    pub blocks: BlockBuf,
}

impl Write {
    /// The bytes to write.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }
}

/// The bytes a publication wrote.
pub(crate) struct Published {
    pub data_bytes: u64,
    pub log_bytes: u64,
}

impl Writer {
    /// Run `f`, which changes the writer's state on the way to a publication: refused unless
    /// writes are allowed, and any failure poisons the writer.
    pub fn guarded<T>(&mut self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let result = f(self);
        if let Err(e) = &result {
            if self.poisoned.is_none() {
                self.poisoned = Some(e.to_string());
            }
        }
        result
    }
}

impl Inner {
    /// Make `record` durable after the blocks it refers to — `writes`, and the segments in
    /// `earlier` that this publication wrote before without syncing (an import) — with
    /// `created` the segments whose files they create; then apply it to `head` and publish the
    /// result as the latest version with id `id`. Call inside [`Writer::guarded`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn publish_record(
        &self,
        w: &mut Writer,
        head: &Version,
        record: &CommitRecord,
        writes: &[Write],
        earlier: &BTreeSet<u32>,
        created: &BTreeSet<u32>,
        id: u64,
    ) -> Result<Published> {
        if head.seq.checked_add(1) != Some(record.seq) {
            return Err(Error::internal(format!(
                "publishing commit {} on version {}",
                record.seq, head.seq
            )));
        }
        let payload = record
            .encode()
            .map_err(|e| Error::internal(e.to_string()))?;
        // Pair assertion: what replay checks, checked before anything is written.
        record
            .check_bounds(w.table.segment_blocks)
            .map_err(|e| Error::internal(format!("a commit record replay would refuse: {e}")))?;
        let (data_bytes, mut touched) = self.write_blocks(writes)?;
        if !created.is_empty() {
            // Failpoint (feature `failpoints`): a new segment file written, not yet synced.
            failpoint!("commit.segment_created");
        }
        touched.extend(earlier.iter().copied());
        self.sync_segments(&touched)?;
        if !created.is_empty() {
            self.storage
                .sync_dir()
                .map_err(|e| Error::io("syncing", "the database directory", e))?;
        }
        // Failpoint (feature `failpoints`): pages durable, no commit record yet.
        failpoint!("commit.pages_synced");
        let sync = self.options.sync == SyncPolicy::Always;
        let flags = match (sync, w.log_durable) {
            (true, _) => FLAG_SYNCED | FLAG_PRIOR_DURABLE,
            (false, true) => FLAG_PRIOR_DURABLE,
            (false, false) => 0,
        };
        let log_bytes = w.wal()?.append(record.seq, &payload, flags, sync)?;
        w.log_durable = sync;
        // Failpoint (feature `failpoints`): the commit is durable but not yet published.
        failpoint!("commit.record_synced");
        let (wal_id, _) = w.log_position()?;
        let dir = apply_record(&head.dir, &mut w.table, record)
            .map_err(|e| Error::corruption(wal_file_name(wal_id), 0, e.to_string()))?;
        let version = Arc::new(Version {
            id,
            seq: record.seq,
            dir,
            overlay: None,
        });
        self.set_head(w, version);
        Ok(Published {
            data_bytes,
            log_bytes,
        })
    }

    /// Publish a whole new state as a checkpoint (a bulk load): its blocks are written; sync
    /// them, start a new log, make the checkpoint of (`seq`, `dir`, `table`) durable, and make
    /// it the only version. Call inside [`Writer::guarded`].
    pub(crate) fn publish_checkpoint(
        &self,
        w: &mut Writer,
        seq: u64,
        dir: Directory,
        table: SegmentTable,
        touched: &BTreeSet<u32>,
    ) -> Result<Arc<Version>> {
        self.sync_segments(touched)?;
        self.storage
            .sync_dir()
            .map_err(|e| Error::io("syncing", "the database directory", e))?;
        let (old_wal, _) = w.log_position()?;
        let new_wal_id = old_wal
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit log ids exhausted"))?;
        let wal = Wal::create(self.storage.as_ref(), new_wal_id)?;
        Checkpoint {
            seq,
            wal_id: new_wal_id,
            wal_offset: 0,
            durable_seq: seq,
            table: table.clone(),
            dir: dir.clone(),
        }
        .store(self.storage.as_ref())?;
        w.replace_wal(wal);
        w.log_durable = true;
        // The old log and checkpoint are superseded; a failure to delete costs space only.
        let _ = self.storage.remove(&wal_file_name(old_wal));
        let _ = self.storage.remove(&checkpoint_file_name(w.checkpoint_seq));
        w.checkpoint_seq = seq;
        w.table = table.clone();
        let version = Arc::new(Version {
            id: self.next_version_id(),
            seq,
            dir,
            overlay: None,
        });
        self.reset_history(
            w,
            version.clone(),
            Snapshot {
                seq,
                table,
                wal_id: new_wal_id,
                wal_end: 0,
            },
        );
        Ok(version)
    }

    /// Sync the given segment files.
    pub(crate) fn sync_segments(&self, segments: &BTreeSet<u32>) -> Result<()> {
        for segment in segments {
            self.segments
                .file(*segment, false)?
                .sync()
                .map_err(|e| Error::io("syncing", segment_file_name(*segment), e))?;
        }
        Ok(())
    }

    /// Write every queued block run (contiguous runs in one call each), without syncing.
    /// Returns the bytes written and the segments written to.
    pub(crate) fn write_blocks(&self, writes: &[Write]) -> Result<(u64, BTreeSet<u32>)> {
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
        // Failpoint (feature `failpoints`): written, not synced.
        failpoint!("commit.pages_written");
        Ok((total, touched))
    }
}
