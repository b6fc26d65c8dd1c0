//! Counters of what the engine does: SSD page reads by kind of operation, bytes moved, page
//! splits and merges, cleaner copies, cache hits. Updated with relaxed atomics; read as a
//! [`Stats`] snapshot, which also names the I/O backend in use. Every update is mirrored to
//! the `metrics` facade (see [`crate::telemetry`]).

use crate::telemetry::{Metrics, Phase};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Why a page was read from the SSD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// A lookup through a read view.
    Lookup,
    /// A write batch (its reads, or pages it rewrites).
    Batch,
    /// A proof or witness request through a read view.
    Proof,
    /// The cleaner relocating live data, or a merge of sparse pages.
    Maintenance,
}

/// The live counters.
pub struct Counters {
    lookup_reads: AtomicU64,
    batch_reads: AtomicU64,
    proof_reads: AtomicU64,
    maintenance_reads: AtomicU64,
    value_reads: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    pages_written: AtomicU64,
    page_splits: AtomicU64,
    page_merges: AtomicU64,
    cleaner_pages_copied: AtomicU64,
    cleaner_values_copied: AtomicU64,
    cleaner_pages_read_ahead: AtomicU64,
    segments_deleted: AtomicU64,
    cache_hits: AtomicU64,
    commits: AtomicU64,
    checkpoints: AtomicU64,
    hashes_needed: AtomicU64,
    /// Nanoseconds spent in each [`Phase`], indexed like [`Phase::ALL`].
    phase_nanos: [AtomicU64; Phase::ALL.len()],
    /// The same updates, for the installed metrics recorder.
    pub(crate) metrics: Metrics,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    /// Zeroed counters, mirrored to metrics labelled `db = metrics_name`.
    pub fn new(metrics_name: &str) -> Counters {
        let z = AtomicU64::default;
        Counters {
            lookup_reads: z(),
            batch_reads: z(),
            proof_reads: z(),
            maintenance_reads: z(),
            value_reads: z(),
            bytes_read: z(),
            bytes_written: z(),
            pages_written: z(),
            page_splits: z(),
            page_merges: z(),
            cleaner_pages_copied: z(),
            cleaner_values_copied: z(),
            cleaner_pages_read_ahead: z(),
            segments_deleted: z(),
            cache_hits: z(),
            commits: z(),
            checkpoints: z(),
            hashes_needed: z(),
            phase_nanos: std::array::from_fn(|_| z()),
            metrics: Metrics::new(metrics_name),
        }
    }

    /// Count `n` pages read from the SSD for `kind`.
    pub fn page_reads(&self, kind: ReadKind, n: u64) {
        self.block_reads(kind, n, n);
    }

    /// Count `reads` SSD reads for `kind` that fetched `blocks` blocks in all (runs of
    /// contiguous blocks read at once).
    pub fn block_reads(&self, kind: ReadKind, reads: u64, blocks: u64) {
        let (c, i) = match kind {
            ReadKind::Lookup => (&self.lookup_reads, 0),
            ReadKind::Batch => (&self.batch_reads, 1),
            ReadKind::Proof => (&self.proof_reads, 2),
            ReadKind::Maintenance => (&self.maintenance_reads, 3),
        };
        let bytes = blocks * crate::io::BLOCK_BYTES as u64;
        add(c, reads);
        add(&self.bytes_read, bytes);
        self.metrics.page_reads[i].increment(reads);
        self.metrics.bytes_read.increment(bytes);
    }

    /// Count a value read of `bytes` bytes from the value log.
    pub fn value_read(&self, bytes: u64) {
        add(&self.value_reads, 1);
        add(&self.bytes_read, bytes);
        self.metrics.value_reads.increment(1);
        self.metrics.bytes_read.increment(bytes);
    }

    /// Count bytes written to segment files and the log.
    pub fn written(&self, bytes: u64, pages: u64) {
        add(&self.bytes_written, bytes);
        add(&self.pages_written, pages);
        self.metrics.bytes_written.increment(bytes);
        self.metrics.pages_written.increment(pages);
    }

    /// Count page splits and merges.
    pub fn reshaped(&self, splits: u64, merges: u64) {
        add(&self.page_splits, splits);
        add(&self.page_merges, merges);
        self.metrics.page_splits.increment(splits);
        self.metrics.page_merges.increment(merges);
    }

    /// Count data the cleaner copied forward.
    pub fn cleaned(&self, pages: u64, values: u64, segments_deleted: u64) {
        add(&self.cleaner_pages_copied, pages);
        add(&self.cleaner_values_copied, values);
        add(&self.segments_deleted, segments_deleted);
        self.metrics.cleaner_pages.increment(pages);
        self.metrics.cleaner_values.increment(values);
        self.metrics.segments_deleted.increment(segments_deleted);
    }

    /// Count pages the cleaner took from its read-ahead.
    pub fn read_ahead_used(&self, pages: u64) {
        add(&self.cleaner_pages_read_ahead, pages);
    }

    /// Count page-cache hits.
    pub fn cache_hits(&self, n: u64) {
        add(&self.cache_hits, n);
        self.metrics.cache_hits.increment(n);
    }

    /// Count a commit.
    pub fn commit(&self) {
        add(&self.commits, 1);
        self.metrics.commits.increment(1);
    }

    /// Count the hash computations a finished batch needed at the least.
    pub fn hashes_needed(&self, n: u64) {
        add(&self.hashes_needed, n);
        self.metrics.hashes_needed.increment(n);
    }

    /// Count `took` spent in `phase` of finishing or committing a batch.
    pub fn phase(&self, phase: Phase, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        add(&self.phase_nanos[phase.index()], nanos);
        self.metrics.phase(phase, took);
    }

    /// Count a checkpoint.
    pub fn checkpoint(&self) {
        add(&self.checkpoints, 1);
        self.metrics.checkpoints.increment(1);
    }

    /// A snapshot of the counters.
    pub fn snapshot(&self) -> Stats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            lookup_page_reads: g(&self.lookup_reads),
            batch_page_reads: g(&self.batch_reads),
            proof_page_reads: g(&self.proof_reads),
            maintenance_page_reads: g(&self.maintenance_reads),
            value_reads: g(&self.value_reads),
            bytes_read: g(&self.bytes_read),
            bytes_written: g(&self.bytes_written),
            pages_written: g(&self.pages_written),
            page_splits: g(&self.page_splits),
            page_merges: g(&self.page_merges),
            cleaner_pages_copied: g(&self.cleaner_pages_copied),
            cleaner_values_copied: g(&self.cleaner_values_copied),
            cleaner_pages_read_ahead: g(&self.cleaner_pages_read_ahead),
            segments_deleted: g(&self.segments_deleted),
            cache_hits: g(&self.cache_hits),
            commits: g(&self.commits),
            checkpoints: g(&self.checkpoints),
            hashes_needed: g(&self.hashes_needed),
            phase_times: PhaseTimes(std::array::from_fn(|i| {
                Duration::from_nanos(g(&self.phase_nanos[i]))
            })),
            ..Stats::default()
        }
    }
}

/// What the engine has done since the database was opened, and its current size.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut batch = db.begin();
/// batch.put([1u8; 32], b"v".to_vec())?;
/// db.commit(batch.finish()?)?;
/// let s = db.stats();
/// assert_eq!((s.commits, s.entries, s.seq), (1, 1, 1));
/// assert!(s.space_amplification() >= 1.0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Pages read from the SSD by lookups.
    pub lookup_page_reads: u64,
    /// Pages read from the SSD by write batches.
    pub batch_page_reads: u64,
    /// Pages read from the SSD for proofs and witnesses of read views.
    pub proof_page_reads: u64,
    /// SSD reads of pages by the cleaner and by merges (a run of nearby blocks the cleaner
    /// reads at once counts as one; [`Stats::bytes_read`] counts every block).
    pub maintenance_page_reads: u64,
    /// Values read from the value log.
    pub value_reads: u64,
    /// Bytes read from the SSD.
    pub bytes_read: u64,
    /// Bytes written to segments, the commit log and checkpoints.
    pub bytes_written: u64,
    /// Page versions written.
    pub pages_written: u64,
    /// Pages split because they overflowed.
    pub page_splits: u64,
    /// Sparse sibling pages merged.
    pub page_merges: u64,
    /// Live pages the cleaner copied forward.
    pub cleaner_pages_copied: u64,
    /// Live values the cleaner copied forward.
    pub cleaner_values_copied: u64,
    /// Pages the cleaner copied forward that it had read ahead, while their commit's batch was
    /// being finished, instead of on the commit's path (their reads count in
    /// [`Stats::maintenance_page_reads`], as do those of pages read ahead and not needed).
    pub cleaner_pages_read_ahead: u64,
    /// Segment files deleted after cleaning.
    pub segments_deleted: u64,
    /// Page reads served by the page cache.
    pub cache_hits: u64,
    /// Pages in the page cache now.
    pub cached_pages: u64,
    /// Commits since open.
    pub commits: u64,
    /// Checkpoints started since open (a background one counts when it starts).
    pub checkpoints: u64,
    /// Hash computations the finished batches needed at the least, the floor their CPU is
    /// compared with: internal nodes on the changed keys' paths
    /// ([`sprig_core::trie::internal_nodes_to_update`], directory levels included), one leaf
    /// hash per written key and its value's 64-byte hash blocks.
    pub hashes_needed: u64,
    /// Entries in the latest version (O(1)).
    pub entries: u64,
    /// Leaf pages in the latest version.
    pub pages: u64,
    /// Bytes of RAM the directory's nodes take, across every version held (the latest,
    /// retained ones, overlays and open read views share what they have in common).
    pub directory_bytes: u64,
    /// Directory nodes held (branches and pages), across every version held.
    pub directory_nodes: u64,
    /// Bytes of the directory's node slots in use or free for reuse: the RAM the node store
    /// has taken, at least `directory_bytes`.
    pub directory_slot_bytes: u64,
    /// Bytes of segment files written (live and garbage).
    pub disk_bytes: u64,
    /// Emptied segment files kept for new segments now ([`crate::Options::recycled_segments`]):
    /// disk space beyond `disk_bytes`, a segment each at most.
    pub spare_segment_files: u64,
    /// New segments since open that took a kept file instead of a new one.
    pub segment_files_recycled: u64,
    /// Bytes of the latest version's pages and values.
    pub live_bytes: u64,
    /// Bytes of segment files kept only for older versions still retained or read: pages and
    /// values the latest version no longer uses but those versions do, and segments with
    /// nothing live left that wait for those versions to go (no cleaning can reclaim them
    /// sooner).
    pub retained_bytes: u64,
    /// The latest commit's sequence number.
    pub seq: u64,
    /// Bytes held by live overlays (uncommitted changes).
    pub overlay_bytes: u64,
    /// Live overlays.
    pub overlays: u64,
    /// Committed versions retained for historical reads and rollback.
    pub retained_versions: u64,
    /// The I/O backend in use (see [`crate::Db::io_backend`]).
    pub io_backend: crate::io::IoBackendInfo,
    /// Time spent in each step of finishing and committing batches since open.
    pub phase_times: PhaseTimes,
}

/// Time spent in each step of finishing batches (`WriteBatch::finish`) and committing them
/// (`Db::commit`, or a pipeline's committer) since the database was opened, by [`Phase`]
/// (whose variants say what each step covers), summed over batches (a table's steps, for a
/// batch of several tables). A step run on several cores counts its wall time once. Also
/// recorded into the `sprig_finish_phase_seconds` and `sprig_commit_phase_seconds` histograms
/// (see [`crate::telemetry`]).
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::telemetry::Phase;
/// let dir = tempfile::tempdir().unwrap();
/// let db = sprig::Db::open(dir.path(), sprig::Options::default())?;
/// let mut batch = db.begin();
/// batch.put([1u8; 32], "v")?;
/// db.commit(batch.finish()?)?;
/// let t = db.stats().phase_times;
/// assert!(t.of(Phase::Rewrite) > std::time::Duration::ZERO); // its page built and hashed
/// assert!(t.of(Phase::Write) > std::time::Duration::ZERO); // and written
/// assert_eq!(t.iter().count(), Phase::ALL.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseTimes([Duration; Phase::ALL.len()]);

impl PhaseTimes {
    /// The time spent in `phase`.
    pub fn of(&self, phase: Phase) -> Duration {
        self.0[phase.index()]
    }

    /// Every phase with its time, in the order of [`Phase::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = (Phase, Duration)> + '_ {
        Phase::ALL.iter().map(|p| (*p, self.of(*p)))
    }
}

impl Stats {
    /// SSD page reads of every kind.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options};
    /// let db = Db::open_in_memory(Options { page_cache_bytes: 0, ..Options::default() })?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// db.commit(batch.finish()?)?;
    /// let before = db.stats();
    /// db.view().get(&[1u8; 32])?;
    /// let after = db.stats();
    /// assert_eq!(after.page_reads(), before.page_reads() + 1); // one SSD read per lookup
    /// assert_eq!(after.lookup_page_reads, before.lookup_page_reads + 1);
    /// # Ok(()) }
    /// ```
    pub fn page_reads(&self) -> u64 {
        self.lookup_page_reads
            + self.batch_page_reads
            + self.proof_page_reads
            + self.maintenance_page_reads
    }

    /// Disk bytes per live byte of the latest version, not counting what older retained
    /// versions and readers still hold ([`Stats::retained_bytes`], which no cleaning can
    /// reclaim before they go): what the cleaner keeps within
    /// [`crate::Options::max_space_amplification`].
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options};
    /// let db = Db::open_in_memory(Options { retained_versions: 1, ..Options::default() })?;
    /// assert_eq!(db.stats().space_amplification(), 1.0); // nothing stored yet
    /// for value in ["one", "two"] {
    ///     let mut batch = db.begin();
    ///     batch.put([1u8; 32], value)?;
    ///     db.commit(batch.finish()?)?;
    /// }
    /// assert!(db.stats().space_amplification() > 1.0); // the first page version is garbage
    /// # Ok(()) }
    /// ```
    pub fn space_amplification(&self) -> f64 {
        amplification(
            self.disk_bytes.saturating_sub(self.retained_bytes),
            self.live_bytes,
        )
    }

    /// Disk bytes per live byte of the latest version, counting everything: above
    /// [`Stats::space_amplification`] by what retained versions hold.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options};
    /// let db = Db::open_in_memory(Options { retained_versions: 4, ..Options::default() })?;
    /// for value in ["one", "two", "three"] {
    ///     let mut batch = db.begin();
    ///     batch.put([1u8; 32], value)?;
    ///     db.commit(batch.finish()?)?;
    /// }
    /// let s = db.stats();
    /// assert!(s.retained_bytes > 0); // the older versions' pages
    /// assert!(s.total_space_amplification() > s.space_amplification());
    /// # Ok(()) }
    /// ```
    pub fn total_space_amplification(&self) -> f64 {
        amplification(self.disk_bytes, self.live_bytes)
    }
}

/// Disk bytes per live byte (1.0 for an empty database): the space amplification figures of
/// [`Stats`] and of the metrics gauge.
pub(crate) fn amplification(disk: u64, live: u64) -> f64 {
    if live == 0 {
        1.0
    } else {
        disk as f64 / live as f64
    }
}
