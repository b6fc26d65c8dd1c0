//! The engine's shared state, split by owner: the files and the single writer's state (the
//! log layer's [`Log`]), the visible versions and pins ([`Versions`]), the page cache, the
//! counters and the overlay memory budget; and the steps every write path ends with —
//! publishing a durable version and the housekeeping after it.
//!
//! Nothing here does I/O of its own: durable work is the log layer's, reading is
//! [`super::read`]'s.

use crate::error::{Error, Result};
use crate::io::IoBackendInfo;
use crate::log::publish::{Blocks, Published};
use crate::log::record::CommitRecord;
use crate::log::recovery::{RecoveryReport, Snapshot};
use crate::log::writer::Writer;
use crate::log::Log;
use crate::options::Options;
use crate::state::cache::PageCache;
use crate::state::version::OverlayMemory;
use crate::state::version::Version;
use crate::state::versions::Versions;
use crate::stats::Counters;
use sprig_core::Hasher;
use std::path::PathBuf;
use std::sync::Arc;

/// Pages dropped together from this many on go to the background thread ([`Inner::drop_pages`]).
const DROP_LATER_PAGES: usize = 16;

/// Everything an open database shares between its handles, views, batches and overlays.
pub(crate) struct Inner {
    /// The database directory (none in memory).
    pub path: Option<PathBuf>,
    pub options: Options,
    pub hasher: Hasher,
    /// What the storage really is (see `Db::io_backend`).
    pub io: IoBackendInfo,
    /// The files and the writer's state.
    pub log: Log,
    pub cache: PageCache,
    pub counters: Counters,
    /// The latest, retained and pinned versions.
    pub versions: Versions,
    pub overlay_memory: Arc<OverlayMemory>,
    /// What opening the database found.
    pub recovery: RecoveryReport,
    /// The directory lock, held while the database is open for writing.
    pub _lock: Option<std::fs::File>,
}

impl Inner {
    /// The latest committed version.
    pub fn head(&self) -> Arc<Version> {
        self.versions.head()
    }

    /// Make `version`, just made durable by the writer `w`, the latest, and retain it with its
    /// log position.
    pub fn set_head(&self, w: &mut Writer, version: Arc<Version>) {
        w.remember(version.seq, self.options.retained_versions);
        self.versions.publish(version);
    }

    /// Make `version` the only version, whose checkpoint is `snapshot` (after a bulk load,
    /// which rewrites the whole database).
    pub fn reset_history(&self, w: &mut Writer, version: Arc<Version>, snapshot: Snapshot) {
        w.history.clear();
        w.history.push_back(snapshot);
        self.versions.reset(version);
    }

    /// Publish `record` on top of `head` through the log's one publish path, and make the
    /// result the latest version, with id `id`. `prior` holds what the caller already has of
    /// the result (see [`crate::log::record::apply_record_noting`]). Call inside
    /// [`Writer::guarded`].
    pub fn publish_record(
        &self,
        w: &mut Writer,
        head: &Version,
        record: &CommitRecord,
        blocks: Blocks<'_>,
        id: u64,
        prior: &crate::log::record::Prior,
    ) -> Result<Published> {
        let published = self
            .log
            .publish_record(w, &head.tables, head.seq, record, blocks, prior)?;
        let version = Arc::new(Version {
            id,
            seq: record.seq,
            tables: published.tables.clone(),
            overlay: None,
        });
        self.set_head(w, version);
        // The pages the record replaced are garbage for every new reader: out of the cache,
        // so they do not push live pages out (old versions read them from the SSD).
        let forgotten: Vec<Arc<crate::state::page::Page>> = published
            .released
            .iter()
            .filter_map(|l| self.cache.forget(*l))
            .collect();
        self.drop_pages(forgotten);
        Ok(published)
    }

    /// Drop pages taken out of the cache: many (a commit's) on the background thread, a few
    /// here (a channel send costs more than they do).
    pub fn drop_pages(&self, pages: Vec<Arc<crate::state::page::Page>>) {
        self.drop_off_path(pages.len(), pages);
    }

    /// Drop `value`, which holds `pages` pages (or as many other allocations), on the
    /// background thread if they are many, else here.
    pub fn drop_off_path<T: Send + 'static>(&self, pages: usize, value: T) {
        if pages >= DROP_LATER_PAGES {
            self.versions.drop_later(value);
        }
    }

    /// Housekeeping after a commit: checkpoint when the log has grown, delete segments no
    /// version needs any more.
    pub fn after_commit(&self, w: &mut Writer) -> Result<()> {
        if w.log_position()?.1 >= self.options.checkpoint_log_bytes {
            self.checkpoint_locked(w, self.options.background_checkpoints)?;
        }
        self.delete_unneeded_segments(w)?;
        self.record_gauges(w);
        Ok(())
    }

    /// Delete the emptied segments no retained or read version needs (see
    /// [`crate::log::Log::delete_emptied`]), and count them.
    pub fn delete_unneeded_segments(&self, w: &mut Writer) -> Result<()> {
        let deleted =
            self.log
                .delete_emptied(w, self.versions.oldest_pinned(), self.head().seq)?;
        self.counters.cleaned(0, 0, deleted);
        Ok(())
    }

    /// Set the size gauges of [`crate::telemetry`] to what the latest version holds (a pass
    /// over the segment table, no I/O).
    pub fn record_gauges(&self, w: &Writer) {
        let m = &self.counters.metrics;
        let head = self.head();
        let block = crate::io::BLOCK_BYTES as f64;
        let (used, live, retained) = (
            w.table.used_blocks(),
            w.table.live_blocks(),
            w.table.retained_blocks(),
        );
        m.seq.set(head.seq as f64);
        m.entries.set(head.tables.total_len() as f64);
        m.disk_bytes.set(used as f64 * block);
        m.live_bytes.set(live as f64 * block);
        m.retained_bytes.set(retained as f64 * block);
        m.space_amplification
            .set(crate::stats::amplification(used.saturating_sub(retained), live));
        m.cached_pages.set(self.cache.len() as f64);
        m.retained_versions
            .set(self.versions.retained_count() as f64);
    }

    /// Checkpoint the oldest retained version and rotate the log (see
    /// [`Log::checkpoint`]), the checkpoint's file written on a background thread with
    /// `background`.
    pub fn checkpoint_locked(&self, w: &mut Writer, background: bool) -> Result<()> {
        let _span = tracing::debug_span!(target: "sprig", "sprig.checkpoint").entered();
        w.check_writable()?;
        let seq = w
            .history
            .front()
            .map(|s| s.seq)
            .ok_or_else(|| Error::internal("no version to checkpoint"))?;
        let oldest = self.versions.retained_version(seq)?;
        self.log
            .checkpoint(w, &oldest.tables, self.head().seq, background)?;
        self.counters.checkpoint();
        Ok(())
    }

    /// Note which segments hold no live data as of the latest version, and forget the held
    /// blocks no retained or read version needs any more.
    pub fn refresh_emptied(&self, w: &mut Writer) {
        w.table.held.release_up_to(self.versions.oldest_pinned());
        let head = self.head();
        let pinned = w.pinned_segments(&head.tables);
        w.refresh_emptied(head.seq, pinned);
    }
}
