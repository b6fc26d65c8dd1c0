//! The state only the single writer changes: block allocation and live-data accounting (the
//! segment table), the log being appended to, the log positions of the retained versions
//! (what a checkpoint of each needs), segments waiting to be deleted, and whether an earlier
//! failure poisoned writing.
//!
//! It lives behind `Log`'s writer lock. Everything that changes it on the way
//! to a publication runs inside `Writer::guarded`, the one place a failure poisons writing.

use crate::error::{Error, Result};
use crate::log::recovery::Snapshot;
use crate::log::snapshots::SnapshotHeader;
use crate::state::tables::Tables;
use crate::log::segments::SegmentTable;
use crate::log::wal::Wal;
use std::collections::{BTreeMap, VecDeque};

/// State owned by the single writer.
pub(crate) struct Writer {
    pub table: SegmentTable,
    /// The log appended to; none when the database was opened read-only.
    log: Option<Wal>,
    /// The sequence number of the latest checkpoint file.
    pub checkpoint_seq: u64,
    /// One snapshot per retained version, oldest first (the same versions as the retained
    /// versions of [`crate::state::versions::Versions`]): checkpoints are taken of the oldest,
    /// so that every retained version survives a reopen.
    pub history: VecDeque<Snapshot>,
    /// Set after a failed write or sync: no more writes until reopened.
    pub poisoned: Option<String>,
    /// Segments with no live data, and the commit after which they became empty.
    pub emptied: BTreeMap<u32, u64>,
    /// Every record appended so far is durable (the log was synced since the last append), so
    /// the next record may claim that every record before it is durable.
    pub log_durable: bool,
    /// The named snapshots, by name.
    pub snapshots: BTreeMap<String, SnapshotHeader>,
    /// Snapshot files whose header could not be read, with the reason: each pins every
    /// segment (what it needs is unknown) until deleted.
    pub damaged_snapshots: BTreeMap<String, String>,
    /// The checkpoint being written on a background thread, if any.
    checkpointing: Checkpointing,
}

/// What a background checkpoint returns: the sequence number of the checkpoint it made
/// durable.
pub(crate) type CheckpointJob = Box<dyn FnOnce() -> Result<u64> + Send>;

/// A checkpoint written on a background thread (its file, then the deletion of the logs and
/// checkpoints it supersedes). At most one runs: the writer waits for it before starting
/// another, before anything else replaces files (a bulk load), and when it is dropped.
#[derive(Default)]
struct Checkpointing(Option<std::thread::JoinHandle<Result<u64>>>);

impl Checkpointing {
    /// Wait for the checkpoint, if one runs: the sequence number it made durable.
    fn join(&mut self) -> Result<Option<u64>> {
        match self.0.take() {
            None => Ok(None),
            Some(handle) => match handle.join() {
                Ok(result) => result.map(Some),
                Err(_) => Err(Error::internal("the checkpoint thread panicked")),
            },
        }
    }
}

impl Drop for Checkpointing {
    fn drop(&mut self) {
        // Nothing is lost when it failed: the older checkpoint and logs it would have replaced
        // are still there, and the next open recovers from them.
        if let Err(e) = self.join() {
            tracing::error!(target: "sprig", "a background checkpoint failed: {e}");
        }
    }
}

impl Writer {
    /// The writer after an open: `log` is none for a read-only database.
    pub fn new(
        table: SegmentTable,
        log: Option<Wal>,
        checkpoint_seq: u64,
        history: VecDeque<Snapshot>,
    ) -> Writer {
        Writer {
            table,
            log,
            checkpoint_seq,
            history,
            poisoned: None,
            emptied: BTreeMap::new(),
            log_durable: true,
            snapshots: BTreeMap::new(),
            damaged_snapshots: BTreeMap::new(),
            checkpointing: Checkpointing::default(),
        }
    }

    /// Run `job` (a checkpoint) on a background thread: false if the thread could not be
    /// started (the caller writes the checkpoint itself). Fails if one runs already (the
    /// caller waits for it first: [`Writer::finish_checkpoint`]).
    pub fn start_checkpoint(&mut self, job: CheckpointJob) -> Result<bool> {
        if self.checkpointing.0.is_some() {
            return Err(Error::internal("a checkpoint started while another runs"));
        }
        match std::thread::Builder::new()
            .name("sprig-checkpoint".into())
            .spawn(job)
        {
            Ok(handle) => {
                self.checkpointing.0 = Some(handle);
                Ok(true)
            }
            Err(e) => {
                tracing::warn!(target: "sprig", "no checkpoint thread ({e}): checkpointing inline");
                Ok(false)
            }
        }
    }

    /// Wait for the background checkpoint, if one runs, and adopt it. Call inside
    /// [`Writer::guarded`]: its failure poisons, as a failed write does.
    pub fn finish_checkpoint(&mut self) -> Result<()> {
        if let Some(seq) = self.checkpointing.join()? {
            self.checkpoint_seq = seq;
        }
        Ok(())
    }

    /// Fail unless writes are allowed ([`Writer::check_writable`]), after taking in a
    /// background checkpoint that has finished: its failure poisons here, at the start of the
    /// first writing operation after it, which then has changed nothing.
    pub fn begin_write(&mut self) -> Result<()> {
        self.check_writable()?;
        if self.checkpointing.0.as_ref().is_some_and(|h| h.is_finished()) {
            self.guarded(|w| w.finish_checkpoint())?;
        }
        Ok(())
    }

    /// The highest segment id that must be neither cleaned nor deleted (every one up to it is
    /// kept): what the incremental unions of `head` read, and what the named snapshots hold.
    pub fn pinned_segments(&self, head: &Tables) -> Option<u32> {
        let snapshots = if self.damaged_snapshots.is_empty() {
            self.snapshots.values().map(|s| s.pinned_segments).max()
        } else {
            Some(u32::MAX)
        };
        head.pinned_segments().max(snapshots)
    }

    /// Sync the log unless every record appended is durable already (a failure poisons).
    pub fn make_log_durable(&mut self) -> Result<()> {
        if !self.log_durable {
            self.guarded(|w| w.wal()?.sync())?;
            self.log_durable = true;
        }
        Ok(())
    }

    /// Fail unless writes are allowed: the database is not read-only and no earlier write
    /// failure poisoned it.
    pub fn check_writable(&self) -> Result<()> {
        if self.log.is_none() {
            return Err(Error::ReadOnly);
        }
        if let Some(reason) = &self.poisoned {
            return Err(Error::Poisoned(reason.clone()));
        }
        Ok(())
    }

    /// Run `f`, which changes the writer's state on the way to a publication: refused unless
    /// writes are allowed, and any failure poisons the writer.
    pub fn guarded<T>(&mut self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let result = f(self);
        if let Err(e) = &result {
            if self.poisoned.is_none() {
                tracing::error!(target: "sprig", "writer poisoned, writes refused until reopened: {e}");
                self.poisoned = Some(e.to_string());
            }
        }
        result
    }

    /// The log, for a writable database.
    pub fn wal(&mut self) -> Result<&mut Wal> {
        self.log.as_mut().ok_or(Error::ReadOnly)
    }

    /// Replace the log (after a rotation or a bulk load); returns the old one.
    pub fn replace_wal(&mut self, wal: Wal) -> Option<Wal> {
        self.log.replace(wal)
    }

    /// Where the log stands: (file id, end of the last record).
    pub fn log_position(&self) -> Result<(u32, u64)> {
        let wal = self.log.as_ref().ok_or(Error::ReadOnly)?;
        Ok((wal.id(), wal.end()))
    }

    /// Remember the log position and accounting of a version just published; only the last
    /// `keep` are kept.
    pub fn remember(&mut self, seq: u64, keep: usize) {
        // Only a writable database publishes versions, so its log has a position.
        let (wal_id, wal_end) = self.log_position().unwrap_or_default();
        self.history.push_back(Snapshot {
            seq,
            table: self.table.clone(),
            wal_id,
            wal_end,
        });
        while self.history.len() > keep.max(1) {
            self.history.pop_front();
        }
    }

    /// Note which segments hold no live data (as of commit `head_seq`), so they can be
    /// deleted once no reader needs them. Segments up to `pinned` (those an incremental union
    /// in progress may read its inputs from) are not: they count as emptied only from the
    /// first commit that no longer pins them.
    pub fn refresh_emptied(&mut self, head_seq: u64, pinned: Option<u32>) {
        let active = self.table.active;
        let table = &self.table;
        let is_pinned = |id: u32| pinned.is_some_and(|p| id <= p);
        // A segment live again (a rollback) or pinned again is no longer waiting to be
        // deleted.
        self.emptied.retain(|id, _| {
            !is_pinned(*id) && table.segments.get(id).is_some_and(|m| m.live_blocks() == 0)
        });
        for (id, meta) in &self.table.segments {
            if *id != active && meta.live_blocks() == 0 && !is_pinned(*id) {
                self.emptied.entry(*id).or_insert(head_seq);
            }
        }
    }
}
