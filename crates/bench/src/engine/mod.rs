//! The engine interface the runner drives, and where each engine's database lives. Engines
//! see only key paths, values and commits; what the operations mean (transfers, utxo batches)
//! stays in the runner and the workload generators, so every engine gets the same work.

use crate::cli::{EngineArgs, EngineKind};
use anyhow::{bail, Result};
use indicatif::ProgressBar;
use sprig::{KeyPath, Node};
use std::path::{Path, PathBuf};

#[cfg(feature = "nomt")]
mod nomt;
#[cfg(feature = "rocksdb")]
mod rocks;
mod sprig_engine;

/// The changes of one commit: sorted by key, each key once; `None` deletes.
pub type Writes = Vec<(KeyPath, Option<Vec<u8>>)>;

/// Counters an engine keeps of its own I/O, when it has any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Reads from the SSD (pages and values).
    pub ssd_reads: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Page versions written.
    pub pages_written: u64,
    /// Pages the cleaner copied forward.
    pub cleaner_pages: u64,
    /// Hash computations the batches' changes needed at the least (the hashing floor).
    pub hashes_needed: u64,
    /// Disk use as the engine counts it.
    pub space: SpaceUse,
    /// Nanoseconds spent in the engine's `finish` (a batch's pages rebuilt and hashed, its
    /// root and witness) and in its durable commit (or, pipelined, waiting to hand it over).
    pub finish_nanos: u64,
    pub durable_nanos: u64,
    /// Time in each step of finishing and committing batches (Sprig's own count, summed).
    pub phases: sprig::PhaseTimes,
}

/// Disk use as the engine counts it (Sprig: segment space, the latest version's live data,
/// and what only older retained versions keep).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpaceUse {
    pub disk_bytes: u64,
    pub live_bytes: u64,
    pub retained_bytes: u64,
}

impl SpaceUse {
    /// The engine's own figures (as `sprig::Stats` computes them).
    fn stats(&self) -> sprig::Stats {
        sprig::Stats {
            disk_bytes: self.disk_bytes,
            live_bytes: self.live_bytes,
            retained_bytes: self.retained_bytes,
            ..sprig::Stats::default()
        }
    }

    /// Disk per live byte, not counting what older versions keep (what the cleaner bounds).
    pub fn amplification(&self) -> f64 {
        self.stats().space_amplification()
    }

    /// Disk per live byte, everything counted.
    pub fn total_amplification(&self) -> f64 {
        self.stats().total_space_amplification()
    }
}

/// One database, driven batch by batch: `read` (any number of times), then `commit`.
pub trait Engine {
    /// The values of `keys` as the current batch sees them (the batch starts at the first
    /// call). Reads count towards the batch's witness where the engine makes one.
    fn read(&mut self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>>;
    /// Apply `writes` as one commit (with a witness where the engine makes one) and return
    /// the new root, if the engine has one. A pipelined engine may still be writing it.
    fn commit(&mut self, writes: Writes) -> Result<Option<Node>>;
    /// Wait until every commit is durable.
    fn flush(&mut self) -> Result<()>;
    /// The engine's own I/O counters, if it keeps any.
    fn counters(&self) -> Option<EngineCounters>;
    /// The I/O backend the engine really uses, where it says (Sprig: `Db::io_backend()`).
    fn io_backend(&self) -> Option<String> {
        None
    }
}

/// Where an engine's database and the workload state live inside the benchmark directory.
pub struct Layout {
    /// `<dir>/<engine>`.
    pub root: PathBuf,
}

impl Layout {
    /// The layout of `engine` under `dir`.
    pub fn new(dir: &Path, engine: EngineKind) -> Self {
        Layout {
            root: dir.join(engine.name()),
        }
    }

    /// The engine's own files.
    pub fn db(&self) -> PathBuf {
        self.root.join("db")
    }

    /// The persisted workload state.
    pub fn state(&self) -> PathBuf {
        self.root.join("state.json")
    }
}

/// What a bulk load needs: where, with which settings, and the entries with their count.
pub struct Load<'a> {
    /// The engine's database directory.
    pub path: &'a Path,
    /// Engine settings.
    pub args: &'a EngineArgs,
    /// How many entries `entries` yields.
    pub count: u64,
    /// The entries.
    pub entries: &'a mut dyn Iterator<Item = (KeyPath, Vec<u8>)>,
    /// Where progress goes.
    pub progress: &'a ProgressBar,
}

/// Bulk-load a new database of `kind`; returns the root.
pub fn create(kind: EngineKind, load: Load<'_>) -> Result<Option<Node>> {
    match kind {
        EngineKind::Sprig => sprig_engine::create(load),
        #[cfg(feature = "nomt")]
        EngineKind::Nomt => nomt::create(load),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => rocks::create(load),
        #[allow(unreachable_patterns)]
        other => {
            bail!(
                "engine {} is not built in: rebuild with `--features {0}`",
                other.name()
            )
        }
    }
}

/// Open the database at `path`.
pub fn open(kind: EngineKind, path: &Path, args: &EngineArgs) -> Result<Box<dyn Engine>> {
    match kind {
        EngineKind::Sprig => Ok(Box::new(sprig_engine::SprigEngine::open(path, args)?)),
        #[cfg(feature = "nomt")]
        EngineKind::Nomt => Ok(Box::new(nomt::NomtEngine::open(path, args)?)),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => Ok(Box::new(rocks::RocksEngine::open(path, args)?)),
        #[allow(unreachable_patterns)]
        other => bail!(
            "engine {} is not built in: rebuild with `--features {0}`",
            other.name()
        ),
    }
}

/// Read `keys` on up to `threads` threads, each reading a contiguous share with `read_one`;
/// the results are in the order of `keys`. For the peers, which read synchronously.
#[cfg(any(feature = "nomt", feature = "rocksdb"))]
pub fn read_parallel<F>(
    keys: &[KeyPath],
    threads: usize,
    read_one: F,
) -> Result<Vec<Option<Vec<u8>>>>
where
    F: Fn(&[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> + Sync,
{
    let threads = threads.max(1);
    if threads == 1 || keys.len() < 2 * threads {
        return read_one(keys);
    }
    let share = keys.len().div_ceil(threads);
    let parts: Vec<Result<Vec<Option<Vec<u8>>>>> = std::thread::scope(|s| {
        let handles: Vec<_> = keys
            .chunks(share)
            .map(|chunk| s.spawn(|| read_one(chunk)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a read thread panicked")))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(keys.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}
