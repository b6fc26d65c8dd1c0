//! Options of a database, with documented defaults, validated when the database is opened.

use crate::error::{Error, Result};
use crate::io::{IoBackend, BLOCK_BYTES};
use crate::resolve::Resolvers;
use sprig_core::Hasher;

/// When commits reach the disk.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, Options, SyncPolicy};
/// assert_eq!(SyncPolicy::default(), SyncPolicy::Always);
/// let bulk = Options { sync: SyncPolicy::Never, ..Options::default() }; // one sync per commit
/// let db = Db::open_in_memory(bulk)?;
/// db.commit(db.begin().finish()?)?;
/// assert_eq!(db.options().sync, SyncPolicy::Never);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// Every commit is durable when `commit` returns (pages synced, then the commit record).
    #[default]
    Always,
    /// Commit records are not synced, so a crash of the machine may lose recent commits (a
    /// crash of the process alone loses nothing); after a power loss the database holds the
    /// state of some earlier commit, never a mix and never corruption. One sync per commit
    /// instead of two: a commit's pages are still synced before its record is written, and
    /// the log is synced before a checkpoint or the deletion of a segment. For bulk work and
    /// benchmarks that say so.
    Never,
}

/// Settings of a database. `Options::default()` is a sensible start for most users; the README's
/// "Choosing options" says when to change what, with measured effects.
///
/// ```
/// use sprig::{Options, SyncPolicy};
/// let options = Options {
///     page_cache_bytes: 256 << 20, // more of the working set in RAM
///     retained_versions: 16,       // reads, proofs and rollback 16 commits back
///     sync: SyncPolicy::Always,    // every commit durable when it returns (the default)
///     metrics_name: "state".into(),
///     ..Options::default()
/// };
/// options.validate().unwrap();
/// assert!(Options { retained_versions: 0, ..Options::default() }.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The hasher. `None` (default): BLAKE3 when creating, whatever is stored when opening.
    /// `Some(h)`: create with `h`, and refuse to open a database made with another hasher.
    pub hasher: Option<Hasher>,
    /// Create the database if the directory holds none. Default: true.
    pub create_if_missing: bool,
    /// Bytes of decoded pages kept in RAM. Default: 64 MiB. 0 turns the cache off.
    pub page_cache_bytes: u64,
    /// How reads are issued. Default: [`IoBackend::IoUring`], which runs on posix where the
    /// kernel refuses io_uring; [`crate::Db::io_backend`] says which is in use, and
    /// [`IoBackend::IoUringRequired`] makes a refusal an error instead.
    pub io_backend: IoBackend,
    /// Bypass the OS page cache for segment files (`O_DIRECT`, Linux) where the file system
    /// allows it; [`crate::Db::io_backend`] says whether it does. Default: true.
    pub direct_io: bool,
    /// When commits are synced. Default: [`SyncPolicy::Always`].
    pub sync: SyncPolicy,
    /// Size of a segment file, fixed at creation. Default: 64 MiB. At least 1 MiB, a multiple
    /// of 4 KiB.
    pub segment_bytes: u64,
    /// Write a checkpoint once the commit log holds this many bytes since the last one; it
    /// bounds the time to open. Default: 64 MiB.
    pub checkpoint_log_bytes: u64,
    /// Write automatic checkpoints on a background thread: the commit that starts one returns
    /// once the log is rotated (a checkpoint of a large directory takes from a tenth of a
    /// second to seconds to write and sync), and the next checkpoint waits for it. The cost is
    /// memory: the checkpoint holds the directory version it writes, so the nodes the commits
    /// made meanwhile replace are freed only when it ends (utxo at 10M entries with a 16 MiB
    /// cache: peak RSS 108–119 MiB in runs crossing a checkpoint, against 95 MiB inline; the
    /// slowest batch 93–175 ms against 196–271 ms). A background checkpoint that fails is
    /// returned by the first writing operation to start after it has ended, before that
    /// operation changes anything, and poisons writing as a failed write does (a database
    /// dropped first only logs it); nothing is lost, the older checkpoint and logs stay until
    /// a checkpoint is durable. [`crate::Db::checkpoint`] always waits, and so does dropping
    /// the database. Default: false.
    pub background_checkpoints: bool,
    /// The cleaner keeps disk use below this multiple of the latest version's live data, not
    /// counting what older retained versions and open readers still hold (which no cleaner can
    /// reclaim before they go; see [`crate::Stats::space_amplification`]). Default: 2.0. At
    /// least 1.2.
    pub max_space_amplification: f64,
    /// Run the cleaner after commits when disk use passes the limit. Default: true.
    pub auto_clean: bool,
    /// Segment files the cleaner empties that are kept (renamed) for new segments instead of
    /// deleted, at most this many at a time. A new segment then overwrites blocks the file
    /// system already holds, which a virtual SSD wrote twice as fast as blocks it had to
    /// allocate (1 MiB direct writes, two in flight: 2.2–2.4 against 1.2–1.3 GB/s on ext4,
    /// which also runs extending direct writes one at a time), and its syncs carry no block
    /// allocations. The cost is disk space: up to this many segment files beyond what the
    /// database holds. Default: 2; 0 deletes emptied segment files at once.
    pub recycled_segments: usize,
    /// Committed versions kept for historical reads, proofs and rollback (the latest
    /// included). Default: 4. At least 1. Their pages stay on disk while retained, so disk use
    /// grows by what the retained commits rewrote.
    pub retained_versions: usize,
    /// The most memory all overlays (finished, uncommitted batches) may hold together.
    /// Default: 4 GiB.
    pub max_overlay_bytes: u64,
    /// Resolvers for upserts, beyond the built-ins (see [`crate::resolve`]); register them
    /// with [`Options::resolver`]. Default: none.
    pub resolvers: Resolvers,
    /// The value of the label `db` on every metric this database records (see
    /// [`crate::telemetry`]), to tell several databases in one process apart. Default:
    /// `"default"`.
    pub metrics_name: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            hasher: None,
            create_if_missing: true,
            page_cache_bytes: 64 << 20,
            io_backend: IoBackend::default(),
            direct_io: true,
            sync: SyncPolicy::default(),
            segment_bytes: 64 << 20,
            checkpoint_log_bytes: 64 << 20,
            background_checkpoints: false,
            max_space_amplification: 2.0,
            auto_clean: true,
            recycled_segments: 2,
            retained_versions: 4,
            max_overlay_bytes: 4 << 30,
            resolvers: Resolvers::default(),
            metrics_name: "default".to_string(),
        }
    }
}

/// The most committed versions that can be retained.
pub const MAX_RETAINED_VERSIONS: usize = 4096;
/// The smallest segment allowed.
pub const MIN_SEGMENT_BYTES: u64 = 1 << 20;
/// The largest segment allowed.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 34;

impl Options {
    /// Check every option, with a sentence naming what is wrong.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options};
    /// Options::default().validate()?;
    /// let tiny = Options { segment_bytes: 4096, ..Options::default() };
    /// let refused = tiny.validate();
    /// assert!(matches!(refused, Err(Error::InvalidArgument(why)) if why.contains("segment")));
    /// assert!(Db::open_in_memory(tiny).is_err()); // opening validates too
    /// # Ok(()) }
    /// ```
    pub fn validate(&self) -> Result<()> {
        let block = BLOCK_BYTES as u64;
        if self.segment_bytes < MIN_SEGMENT_BYTES
            || self.segment_bytes > MAX_SEGMENT_BYTES
            || !self.segment_bytes.is_multiple_of(block)
        {
            return Err(Error::InvalidArgument(format!(
                "segment_bytes must be a multiple of {block} between {MIN_SEGMENT_BYTES} and {MAX_SEGMENT_BYTES}, not {}",
                self.segment_bytes
            )));
        }
        if !self.max_space_amplification.is_finite() || self.max_space_amplification < 1.2 {
            return Err(Error::InvalidArgument(format!(
                "max_space_amplification must be at least 1.2, not {}",
                self.max_space_amplification
            )));
        }
        if self.retained_versions == 0 || self.retained_versions > MAX_RETAINED_VERSIONS {
            return Err(Error::InvalidArgument(format!(
                "retained_versions must be between 1 and {MAX_RETAINED_VERSIONS}, not {}",
                self.retained_versions
            )));
        }
        if self.checkpoint_log_bytes == 0 {
            return Err(Error::InvalidArgument(
                "checkpoint_log_bytes must be positive".into(),
            ));
        }
        Ok(())
    }

    /// Register resolver `name` for tables created with it (see [`crate::resolve`]; it must
    /// be associative). A name of a built-in resolver is replaced by `f` for this handle.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let options = Options::default().resolver("keep-first", |old, _new| Ok(old.to_vec()));
    /// let db = Db::open_in_memory(options)?;
    /// let first_seen = db.create_table("first-seen", TableOptions::resolver("keep-first"))?;
    /// let mut batch = db.begin();
    /// batch.upsert_in(&first_seen, [1u8; 32], "block 7")?;
    /// batch.upsert_in(&first_seen, [1u8; 32], "block 9")?;
    /// assert_eq!(batch.get_in(&first_seen, &[1u8; 32])?, Some(b"block 7".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn resolver(
        mut self,
        name: impl Into<String>,
        f: impl Fn(&[u8], &[u8]) -> std::result::Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> Options {
        self.resolvers.insert(name, std::sync::Arc::new(f));
        self
    }

    /// The segment size in blocks.
    ///
    /// ```
    /// let options = sprig::Options { segment_bytes: 1 << 20, ..sprig::Options::default() };
    /// assert_eq!(options.segment_blocks(), 256); // 4 KiB blocks
    /// ```
    pub fn segment_blocks(&self) -> u32 {
        u32::try_from(self.segment_bytes / BLOCK_BYTES as u64).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        Options::default().validate().unwrap();
        let bad = Options {
            segment_bytes: 1000,
            ..Options::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("segment_bytes"));
        let bad = Options {
            max_space_amplification: 1.0,
            ..Options::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_space_amplification"));
    }
}
