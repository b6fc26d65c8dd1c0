//! The one publish path: how a new state becomes durable, and how a failure on the way poisons
//! the writer; and the housekeeping of the files it leaves (log rotation with a checkpoint,
//! deletion of segments nothing needs).
//!
//! Commits, cleaning (which rides on commits), rollbacks and imports publish a commit record;
//! a bulk load publishes a checkpoint. Nothing else makes a new state durable; the caller
//! makes the directory returned here the latest version. Every publication runs inside
//! `Writer::guarded`: once the writer's state has started to change, any failure leaves it
//! poisoned, so no later commit can build on state that might not match the disk (a failed
//! sync may have dropped data; a record may be durable although publishing it failed).
//! Reopening the database recovers from what is durable.
//!
//! Order of a record's publication, in every sync policy: the blocks it refers to are written
//! and synced (and the directory, when a segment file was created), so that a record on disk
//! always has its pages; then the record is appended (and synced under
//! `SyncPolicy::Always`: the commit is durable there); then it is applied to the latest
//! directory and the result becomes the latest version.

use crate::error::{Error, Result};
use crate::io::Storage;
use crate::log::checkpoint::{checkpoint_file_name, Checkpoint};
use crate::log::record::{apply_record_noting, CommitRecord, EncodeError, Prior};
use crate::log::recovery::Snapshot;
use crate::log::segments::{segment_file_name, SegmentTable};
use crate::log::stager::Staged;
use crate::log::wal::{wal_file_name, Wal, FLAG_PRIOR_DURABLE, FLAG_SYNCED};
use crate::log::writer::Writer;
use crate::log::Log;
use crate::options::SyncPolicy;
use crate::state::tables::Tables;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The blocks a publication makes durable: `staged`, written and not synced; `created` are
/// the segments whose files they created.
pub(crate) struct Blocks<'a> {
    pub staged: Staged,
    pub created: &'a BTreeSet<u32>,
}

impl Blocks<'_> {
    /// No blocks (a rollback).
    pub fn none() -> Blocks<'static> {
        static EMPTY: BTreeSet<u32> = BTreeSet::new();
        Blocks {
            staged: Staged::default(),
            created: &EMPTY,
        }
    }
}

/// What a publication of a record made: the new directory, and the bytes written.
pub(crate) struct Published {
    pub tables: Tables,
    /// The pages the record took out of the latest version (replaced or dropped).
    pub released: Vec<u64>,
    pub data_bytes: u64,
    pub log_bytes: u64,
    /// Time spent syncing the segments written.
    pub sync_took: Duration,
    /// Time spent appending (and syncing) the record.
    pub log_took: Duration,
}

impl Log {
    /// Make `record` durable after the `blocks` it refers to, then apply it to `head` (the
    /// latest directory, of commit `head_seq`) and return the result. Call inside
    /// [`Writer::guarded`].
    pub(crate) fn publish_record(
        &self,
        w: &mut Writer,
        head: &Tables,
        head_seq: u64,
        record: &CommitRecord,
        blocks: Blocks<'_>,
        prior: &Prior,
    ) -> Result<Published> {
        let Blocks { staged, created } = blocks;
        if head_seq.checked_add(1) != Some(record.seq) {
            return Err(Error::internal(format!(
                "publishing commit {} on version {head_seq}",
                record.seq
            )));
        }
        // Pair assertion: what replay checks, checked before anything is written (in the
        // encoding's walk of the record's pages).
        let (payload, checked) = record
            .encode_checked(w.table.segment_blocks)
            .map_err(|e| match e {
                EncodeError::Unwritten(e) => Error::internal(e.to_string()),
                EncodeError::OutOfBounds(e) => {
                    Error::internal(format!("a commit record replay would refuse: {e}"))
                }
            })?;
        prior
            .check(head, record)
            .map_err(|e| Error::internal(format!("a committer's own result: {e}")))?;
        let data_bytes = staged.bytes;
        if !created.is_empty() {
            // Failpoint (feature `failpoints`): a new segment file written, not yet synced.
            failpoint!("commit.segment_created");
        }
        let sync_started = Instant::now();
        self.sync_segments(&staged.touched)?;
        if !created.is_empty() {
            self.storage
                .sync_dir()
                .map_err(|e| Error::io("syncing", "the database directory", e))?;
        }
        // Failpoint (feature `failpoints`): pages durable, no commit record yet.
        failpoint!("commit.pages_synced");
        let sync_took = sync_started.elapsed();
        let log_started = Instant::now();
        let sync = self.sync == SyncPolicy::Always;
        let flags = match (sync, w.log_durable) {
            (true, _) => FLAG_SYNCED | FLAG_PRIOR_DURABLE,
            (false, true) => FLAG_PRIOR_DURABLE,
            (false, false) => 0,
        };
        let log_bytes = w.wal()?.append(record.seq, &payload, flags, sync)?;
        w.log_durable = sync;
        let log_took = log_started.elapsed();
        // Failpoint (feature `failpoints`): the commit is durable but not yet published.
        failpoint!("commit.record_synced");
        let (wal_id, _) = w.log_position()?;
        let mut released = Vec::new();
        let tables = apply_record_noting(head, &mut w.table, checked, prior, &mut |l| {
            released.push(l)
        })
            .map_err(|e| Error::corruption(wal_file_name(wal_id), 0, e.to_string()))?;
        Ok(Published {
            tables,
            released,
            data_bytes,
            log_bytes,
            sync_took,
            log_took,
        })
    }

    /// Make a whole new state durable as a checkpoint (a bulk load): its blocks are written;
    /// sync them, start a new log, make the checkpoint of (`seq`, `dir`, `table`) durable, and
    /// adopt `table`. Returns the snapshot the only retained version now has. Call inside
    /// [`Writer::guarded`].
    pub(crate) fn publish_checkpoint(
        &self,
        w: &mut Writer,
        seq: u64,
        tables: &Tables,
        table: SegmentTable,
        touched: &BTreeSet<u32>,
    ) -> Result<Snapshot> {
        // A checkpoint still being written would delete files by the old numbering.
        w.finish_checkpoint()?;
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
            tables: tables.clone(),
        }
        .store(self.storage.as_ref())?;
        w.replace_wal(wal);
        w.log_durable = true;
        // The old log and checkpoint are superseded; a failure to delete costs space only.
        let _ = self.storage.remove(&wal_file_name(old_wal));
        let _ = self
            .storage
            .remove(&checkpoint_file_name(w.checkpoint_seq));
        w.checkpoint_seq = seq;
        w.table = table.clone();
        let snapshot = Snapshot {
            seq,
            table,
            wal_id: new_wal_id,
            wal_end: 0,
        };
        w.history.clear();
        w.history.push_back(snapshot.clone());
        Ok(snapshot)
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

    /// Start a new commit log and write a checkpoint of the oldest retained version (whose
    /// directory is `oldest`), so a reopen replays every retained version; then delete the
    /// logs and checkpoints older than it. `head_seq` is the latest commit. With
    /// `background`, the checkpoint's file is written and the older files deleted on a
    /// background thread after the log is rotated, and this returns at once.
    ///
    /// Order: a checkpoint still being written is waited for; the new log is created; the
    /// old one is closed by a synced rotation record (which makes every commit so far
    /// durable, in any sync policy, and tells recovery where the log goes on); the checkpoint
    /// is made durable; only then are older files deleted. Until then a reopen recovers from
    /// the older checkpoint and logs, which go on into the new log. A failure poisons the
    /// writer: here, or for a background checkpoint at the start of the first writing
    /// operation after it failed ([`Writer::begin_write`]).
    pub(crate) fn checkpoint(
        &self,
        w: &mut Writer,
        oldest: &Tables,
        head_seq: u64,
        background: bool,
    ) -> Result<()> {
        w.guarded(|w| {
            w.finish_checkpoint()?;
            let snapshot = w
                .history
                .front()
                .cloned()
                .ok_or_else(|| Error::internal("no version to checkpoint"))?;
            let (old_id, _) = w.log_position()?;
            let new_wal_id = old_id
                .checked_add(1)
                .ok_or_else(|| Error::internal("commit log ids exhausted"))?;
            let wal = Wal::create(self.storage.as_ref(), new_wal_id)?;
            // Failpoint (feature `failpoints`): the new log exists, no checkpoint yet.
            failpoint!("checkpoint.wal_rotated");
            w.wal()?.append_rotation(new_wal_id, head_seq)?;
            w.replace_wal(wal);
            w.log_durable = true;
            let checkpoint = Checkpoint {
                seq: snapshot.seq,
                wal_id: snapshot.wal_id,
                wal_offset: snapshot.wal_end,
                durable_seq: head_seq,
                table: snapshot.table,
                tables: oldest.clone(),
            };
            let checkpoint = std::sync::Arc::new(checkpoint);
            if background {
                let (storage, job_checkpoint) = (self.storage.clone(), checkpoint.clone());
                let job = move || store_checkpoint(storage.as_ref(), &job_checkpoint);
                if w.start_checkpoint(Box::new(job))? {
                    return Ok(());
                }
            }
            w.checkpoint_seq = store_checkpoint(self.storage.as_ref(), &checkpoint)?;
            Ok(())
        })
    }

    /// Delete segments that hold no live data, once no version from `oldest_pinned` on (the
    /// oldest one something reads or retains) can need them; `head_seq` is the latest commit.
    /// The commits that emptied them are made durable first (they may not be, under
    /// `SyncPolicy::Never`): a power loss must never bring back a version whose segment is
    /// gone. Returns how many were deleted.
    pub(crate) fn delete_emptied(
        &self,
        w: &mut Writer,
        oldest_pinned: Option<u64>,
        head_seq: u64,
    ) -> Result<u64> {
        let oldest = oldest_pinned.unwrap_or(u64::MAX);
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
        if ready.is_empty() {
            return Ok(0);
        }
        // The cleaner's read-ahead may be reading a segment about to go: it ends first.
        self.read_ahead.wait()?;
        w.make_log_durable()?;
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
        Ok(deleted)
    }
}

/// Make `checkpoint` durable, then delete the logs and checkpoints older than it (a failure to
/// delete costs space only). Returns its sequence number.
fn store_checkpoint(storage: &dyn Storage, checkpoint: &Checkpoint) -> Result<u64> {
    let _span = tracing::debug_span!(target: "sprig", "sprig.checkpoint.store", seq = checkpoint.seq)
        .entered();
    checkpoint.store(storage)?;
    if let Ok(names) = storage.list() {
        for name in names {
            let old = crate::log::wal::parse_wal_file_name(&name)
                .is_some_and(|id| id < checkpoint.wal_id)
                || crate::log::checkpoint::parse_checkpoint_file_name(&name)
                    .is_some_and(|seq| seq < checkpoint.seq);
            if old {
                // Failpoint (feature `failpoints`): old files partly deleted.
                failpoint!("checkpoint.deleting_old");
                let _ = storage.remove(&name);
            }
        }
    }
    Ok(checkpoint.seq)
}
