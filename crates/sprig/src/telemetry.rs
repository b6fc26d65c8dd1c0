//! Metrics and tracing: the name, kind, unit and meaning of every metric the engine records
//! through the [`metrics`] facade, and the handles a database records them with.
//!
//! The engine installs nothing: an embedding node installs a recorder (Prometheus,
//! OpenTelemetry, statsd …) **before opening the database**, and a `tracing` subscriber if it
//! wants spans. Without a recorder every handle is a no-op (one branch per update), and
//! without a subscriber every span is a disabled callsite. Every metric carries the label
//! `db`, set by [`crate::Options::metrics_name`], so several databases in one process stay
//! apart.
//!
//! ```no_run
//! // In the node, once, before opening: any `metrics` recorder, e.g. Prometheus's.
//! // metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
//! sprig::describe_metrics(); // units and help texts, optional
//! let db = sprig::Db::open(
//!     "state",
//!     sprig::Options { metrics_name: "state".into(), ..sprig::Options::default() },
//! )?;
//! # Ok::<(), sprig::Error>(())
//! ```
//! A runnable service that serves `/metrics`: `crates/sprig/examples/prometheus.rs`.
//!
//! Spans (target `sprig`): `sprig.open`, `sprig.finish` (a batch applied in memory: reads and
//! hashing), `sprig.commit` (made durable and published), `sprig.checkpoint`,
//! `sprig.bulk_load`, `sprig.import`, `sprig.rollback`, `sprig.snapshot.save`,
//! `sprig.snapshot.restore`. Events: every recovery finding at open (warn), a writer poisoned
//! by a failed write (error).

use metrics::{Counter, Gauge, Histogram, Unit};
use std::time::Duration;

/// The metric names, each with the kind and unit given in [`CATALOG`].
pub mod names {
    /// Counter: commits (batches, table changes, rollbacks, imports), by `db`.
    pub const COMMITS: &str = "sprig_commits_total";
    /// Histogram, seconds: a commit made durable and published (`Db::commit`, a chain of
    /// overlays counted once), housekeeping included.
    pub const COMMIT_SECONDS: &str = "sprig_commit_seconds";
    /// Histogram, seconds: one phase of a commit, by label `phase`: `write` (allocating and
    /// writing pages and values), `sync` (syncing segments), `log` (appending and syncing the
    /// commit record), `housekeeping` (checkpoints, deleting emptied segments).
    pub const COMMIT_PHASE_SECONDS: &str = "sprig_commit_phase_seconds";
    /// Histogram, seconds: a batch applied in memory (`WriteBatch::finish`: its page reads,
    /// page rebuilds and hashing).
    pub const FINISH_SECONDS: &str = "sprig_finish_seconds";
    /// Histogram, seconds: one step of `WriteBatch::finish` for one table, by label `phase`:
    /// `locate` (the batch's keys sorted, located in the directory and cut into regions; the
    /// pages not in memory loaded too for a batch of few keys or with upserts),
    /// `rewrite` (the regions' pages rebuilt and hashed, the pages not in memory read as they
    /// go), `load` (within `rewrite`, until the last of those pages had arrived), `witness`
    /// (the witness and the new directory, computed side by side).
    pub const FINISH_PHASE_SECONDS: &str = "sprig_finish_phase_seconds";
    /// Counter: SSD reads of pages, by label `kind` (`lookup`, `batch`, `proof`,
    /// `maintenance`; a run of nearby blocks the cleaner reads at once counts as one).
    pub const PAGE_READS: &str = "sprig_page_reads_total";
    /// Counter: page reads served by the page cache.
    pub const CACHE_HITS: &str = "sprig_cache_hits_total";
    /// Counter: values read from the value log (large values).
    pub const VALUE_READS: &str = "sprig_value_reads_total";
    /// Counter, bytes: read from the SSD.
    pub const BYTES_READ: &str = "sprig_read_bytes_total";
    /// Counter, bytes: written to segments, the commit log and checkpoints.
    pub const BYTES_WRITTEN: &str = "sprig_written_bytes_total";
    /// Counter: page versions written.
    pub const PAGES_WRITTEN: &str = "sprig_pages_written_total";
    /// Counter: pages split because they overflowed.
    pub const PAGE_SPLITS: &str = "sprig_page_splits_total";
    /// Counter: sparse sibling pages merged.
    pub const PAGE_MERGES: &str = "sprig_page_merges_total";
    /// Counter: live pages the cleaner copied forward.
    pub const CLEANER_PAGES: &str = "sprig_cleaner_pages_copied_total";
    /// Counter: live values the cleaner copied forward.
    pub const CLEANER_VALUES: &str = "sprig_cleaner_values_copied_total";
    /// Counter: segment files deleted.
    pub const SEGMENTS_DELETED: &str = "sprig_segments_deleted_total";
    /// Counter: checkpoints written.
    pub const CHECKPOINTS: &str = "sprig_checkpoints_total";
    /// Counter: the hash computations finished batches needed at the least (the floor commit
    /// CPU is compared with).
    pub const HASHES_NEEDED: &str = "sprig_hashes_needed_total";
    /// Gauge: the latest commit's sequence number.
    pub const SEQ: &str = "sprig_seq";
    /// Gauge: entries in the latest version, every table.
    pub const ENTRIES: &str = "sprig_entries";
    /// Gauge, bytes: segment space in use (live data and garbage).
    pub const DISK_BYTES: &str = "sprig_disk_bytes";
    /// Gauge, bytes: live pages and values.
    pub const LIVE_BYTES: &str = "sprig_live_bytes";
    /// Gauge, bytes: segment space kept only for older retained or read versions.
    pub const RETAINED_BYTES: &str = "sprig_retained_bytes";
    /// Gauge: disk bytes per live byte, not counting what older versions hold (the figure
    /// `Options::max_space_amplification` bounds).
    pub const SPACE_AMPLIFICATION: &str = "sprig_space_amplification";
    /// Gauge, bytes: memory held by overlays (finished, uncommitted batches).
    pub const OVERLAY_BYTES: &str = "sprig_overlay_bytes";
    /// Gauge: live overlays.
    pub const OVERLAYS: &str = "sprig_overlays";
    /// Gauge: pages in the page cache.
    pub const CACHED_PAGES: &str = "sprig_cached_pages";
    /// Gauge: committed versions retained.
    pub const RETAINED_VERSIONS: &str = "sprig_retained_versions";
}

/// The kind of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only goes up.
    Counter,
    /// A current value.
    Gauge,
    /// A distribution of observations.
    Histogram,
}

/// Every metric the engine records: name, kind, unit, description.
pub const CATALOG: &[(&str, MetricKind, Unit, &str)] = {
    use names::*;
    use MetricKind::*;
    &[
        (COMMITS, Counter, Unit::Count, "Commits made durable."),
        (
            COMMIT_SECONDS,
            Histogram,
            Unit::Seconds,
            "Time to make a commit durable and publish it.",
        ),
        (
            COMMIT_PHASE_SECONDS,
            Histogram,
            Unit::Seconds,
            "Time of each commit phase (write, sync, log, housekeeping).",
        ),
        (
            FINISH_SECONDS,
            Histogram,
            Unit::Seconds,
            "Time to apply a batch in memory: reads, page rebuilds, hashing.",
        ),
        (
            FINISH_PHASE_SECONDS,
            Histogram,
            Unit::Seconds,
            "Time of each step of applying a batch in memory (locate, rewrite, load, witness).",
        ),
        (
            PAGE_READS,
            Counter,
            Unit::Count,
            "SSD reads of pages, by kind of operation (a run of nearby blocks read at once counts as one).",
        ),
        (
            CACHE_HITS,
            Counter,
            Unit::Count,
            "Page reads served by the page cache.",
        ),
        (
            VALUE_READS,
            Counter,
            Unit::Count,
            "Values read from the value log.",
        ),
        (BYTES_READ, Counter, Unit::Bytes, "Bytes read from the SSD."),
        (
            BYTES_WRITTEN,
            Counter,
            Unit::Bytes,
            "Bytes written to segments, the commit log and checkpoints.",
        ),
        (
            PAGES_WRITTEN,
            Counter,
            Unit::Count,
            "Page versions written.",
        ),
        (
            PAGE_SPLITS,
            Counter,
            Unit::Count,
            "Pages split because they overflowed.",
        ),
        (
            PAGE_MERGES,
            Counter,
            Unit::Count,
            "Sparse sibling pages merged.",
        ),
        (
            CLEANER_PAGES,
            Counter,
            Unit::Count,
            "Live pages the cleaner copied forward.",
        ),
        (
            CLEANER_VALUES,
            Counter,
            Unit::Count,
            "Live values the cleaner copied forward.",
        ),
        (
            SEGMENTS_DELETED,
            Counter,
            Unit::Count,
            "Segment files deleted.",
        ),
        (CHECKPOINTS, Counter, Unit::Count, "Checkpoints written."),
        (
            HASHES_NEEDED,
            Counter,
            Unit::Count,
            "Hash computations finished batches needed at the least.",
        ),
        (
            SEQ,
            Gauge,
            Unit::Count,
            "The latest commit's sequence number.",
        ),
        (
            ENTRIES,
            Gauge,
            Unit::Count,
            "Entries in the latest version.",
        ),
        (
            DISK_BYTES,
            Gauge,
            Unit::Bytes,
            "Segment space in use, live data and garbage.",
        ),
        (
            LIVE_BYTES,
            Gauge,
            Unit::Bytes,
            "Bytes of live pages and values.",
        ),
        (
            RETAINED_BYTES,
            Gauge,
            Unit::Bytes,
            "Segment space kept only for older retained or read versions.",
        ),
        (
            SPACE_AMPLIFICATION,
            Gauge,
            Unit::Count,
            "Disk bytes per live byte, not counting what older versions hold.",
        ),
        (
            OVERLAY_BYTES,
            Gauge,
            Unit::Bytes,
            "Memory held by finished, uncommitted batches.",
        ),
        (OVERLAYS, Gauge, Unit::Count, "Live overlays."),
        (CACHED_PAGES, Gauge, Unit::Count, "Pages in the page cache."),
        (
            RETAINED_VERSIONS,
            Gauge,
            Unit::Count,
            "Committed versions retained.",
        ),
    ]
};

/// Describe every metric (unit and help text) to the installed recorder; call once after
/// installing it. Optional: recorders work without descriptions.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use metrics_util::debugging::DebuggingRecorder; // any `metrics` recorder
/// let recorder = DebuggingRecorder::new();
/// let snapshotter = recorder.snapshotter();
/// let db = metrics::with_local_recorder(&recorder, || {
///     sprig::describe_metrics(); // before opening
///     sprig::Db::open_in_memory(sprig::Options::default())
/// })?;
/// db.commit(db.begin().finish()?)?;
/// let metrics = snapshotter.snapshot().into_vec();
/// let commits = metrics.iter().find(|(key, ..)| key.key().name() == "sprig_commits_total");
/// let (_, unit, help, _) = commits.expect("recorded");
/// assert_eq!(unit, &Some(metrics::Unit::Count)); // as described
/// assert!(help.is_some());
/// # Ok(()) }
/// ```
pub fn describe_metrics() {
    for (name, kind, unit, help) in CATALOG {
        match kind {
            MetricKind::Counter => metrics::describe_counter!(*name, *unit, *help),
            MetricKind::Gauge => metrics::describe_gauge!(*name, *unit, *help),
            MetricKind::Histogram => metrics::describe_histogram!(*name, *unit, *help),
        }
    }
}

/// A step of finishing a batch, timed into [`names::FINISH_PHASE_SECONDS`], or of committing
/// one, timed into [`names::COMMIT_PHASE_SECONDS`]; each also summed into
/// [`crate::Stats::phase_times`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Finishing: the batch's keys sorted, located in the directory and cut into regions
    /// (for a batch of few keys or with upserts, the pages not in memory loaded too).
    Locate,
    /// Finishing: the regions' pages rebuilt and hashed (reading those not in memory).
    Rewrite,
    /// Finishing, within [`Phase::Rewrite`]: until the last page not in memory had arrived.
    Load,
    /// Finishing: the witness and the new directory, computed side by side.
    Witness,
    /// Committing: allocating and writing pages and values.
    Write,
    /// Committing: syncing the segments written.
    Sync,
    /// Committing: appending (and syncing) the commit record.
    Log,
    /// Committing: checkpoints and deleting emptied segments after a commit.
    Housekeeping,
}

impl Phase {
    /// Every phase, in the order of their histograms and counters.
    pub const ALL: [Phase; 8] = [
        Phase::Locate,
        Phase::Rewrite,
        Phase::Load,
        Phase::Witness,
        Phase::Write,
        Phase::Sync,
        Phase::Log,
        Phase::Housekeeping,
    ];

    /// The phase's `phase` label.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Locate => "locate",
            Phase::Rewrite => "rewrite",
            Phase::Load => "load",
            Phase::Witness => "witness",
            Phase::Write => "write",
            Phase::Sync => "sync",
            Phase::Log => "log",
            Phase::Housekeeping => "housekeeping",
        }
    }

    /// Whether the phase is one of finishing a batch (else of committing one).
    pub const fn of_finish(self) -> bool {
        matches!(
            self,
            Phase::Locate | Phase::Rewrite | Phase::Load | Phase::Witness
        )
    }

    /// The phase's place in [`Phase::ALL`].
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

/// The handles one database records with, registered once at open with its `db` label.
pub(crate) struct Metrics {
    pub commits: Counter,
    pub commit_seconds: Histogram,
    phases: [Histogram; Phase::ALL.len()],
    pub finish_seconds: Histogram,
    /// Indexed like [`crate::ReadKind`]: lookup, batch, proof, maintenance.
    pub page_reads: [Counter; 4],
    pub cache_hits: Counter,
    pub value_reads: Counter,
    pub bytes_read: Counter,
    pub bytes_written: Counter,
    pub pages_written: Counter,
    pub page_splits: Counter,
    pub page_merges: Counter,
    pub cleaner_pages: Counter,
    pub cleaner_values: Counter,
    pub segments_deleted: Counter,
    pub checkpoints: Counter,
    pub hashes_needed: Counter,
    pub seq: Gauge,
    pub entries: Gauge,
    pub disk_bytes: Gauge,
    pub live_bytes: Gauge,
    pub retained_bytes: Gauge,
    pub space_amplification: Gauge,
    pub overlay_bytes: Gauge,
    pub overlays: Gauge,
    pub cached_pages: Gauge,
    pub retained_versions: Gauge,
}

impl Metrics {
    /// Register every handle with the recorder installed now, labelled `db = name`.
    pub(crate) fn new(name: &str) -> Metrics {
        use names::*;
        let c = |n: &'static str| metrics::counter!(n, "db" => name.to_string());
        let g = |n: &'static str| metrics::gauge!(n, "db" => name.to_string());
        let phase = |p: Phase| {
            let metric = if p.of_finish() {
                FINISH_PHASE_SECONDS
            } else {
                COMMIT_PHASE_SECONDS
            };
            metrics::histogram!(metric, "db" => name.to_string(), "phase" => p.name())
        };
        let reads =
            |k: &'static str| metrics::counter!(PAGE_READS, "db" => name.to_string(), "kind" => k);
        Metrics {
            commits: c(COMMITS),
            commit_seconds: metrics::histogram!(COMMIT_SECONDS, "db" => name.to_string()),
            phases: Phase::ALL.map(phase),
            finish_seconds: metrics::histogram!(FINISH_SECONDS, "db" => name.to_string()),
            page_reads: [
                reads("lookup"),
                reads("batch"),
                reads("proof"),
                reads("maintenance"),
            ],
            cache_hits: c(CACHE_HITS),
            value_reads: c(VALUE_READS),
            bytes_read: c(BYTES_READ),
            bytes_written: c(BYTES_WRITTEN),
            pages_written: c(PAGES_WRITTEN),
            page_splits: c(PAGE_SPLITS),
            page_merges: c(PAGE_MERGES),
            cleaner_pages: c(CLEANER_PAGES),
            cleaner_values: c(CLEANER_VALUES),
            segments_deleted: c(SEGMENTS_DELETED),
            checkpoints: c(CHECKPOINTS),
            hashes_needed: c(HASHES_NEEDED),
            seq: g(SEQ),
            entries: g(ENTRIES),
            disk_bytes: g(DISK_BYTES),
            live_bytes: g(LIVE_BYTES),
            retained_bytes: g(RETAINED_BYTES),
            space_amplification: g(SPACE_AMPLIFICATION),
            overlay_bytes: g(OVERLAY_BYTES),
            overlays: g(OVERLAYS),
            cached_pages: g(CACHED_PAGES),
            retained_versions: g(RETAINED_VERSIONS),
        }
    }

    /// Record how long a phase of finishing or committing a batch took.
    pub(crate) fn phase(&self, phase: Phase, took: Duration) {
        self.phases[phase.index()].record(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each phase's index is its place in `Phase::ALL` (histograms and counters are indexed
    /// by it), each has its own label, and the finish's phases come first.
    #[test]
    fn phases_are_indexed_in_order_with_distinct_labels() {
        for (i, p) in Phase::ALL.iter().enumerate() {
            assert_eq!(p.index(), i, "{p:?}");
            assert_eq!(p.of_finish(), i < 4, "{p:?}");
        }
        let mut names: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Phase::ALL.len());
    }
}
