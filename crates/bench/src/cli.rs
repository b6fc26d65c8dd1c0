//! The command line: subcommands `create`, `run`, `compare` and `upsert`, and the settings they share.
//! It only describes arguments; the work is done by `runner` and `compare`.

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Sprig's benchmark tool: NOMT's transfer, lsm-tree's utxo and QMDB's mixed workloads, run
/// on Sprig and side by side with NOMT and RocksDB.
#[derive(Debug, Parser)]
#[command(name = "sprig-bench", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a database of N entries for a workload (bulk load; not timed; reusable).
    Create(CreateArgs),
    /// Run a workload on a database made by `create`.
    Run(RunArgs),
    /// Run engines alternately on the same generated workload, each in its own process (and
    /// memory cgroup if asked), and print the ratios Sprig ÷ peer.
    Compare(CompareArgs),
    /// Sprig's upserts: fresh keys with put vs upsert, present keys with upsert vs
    /// lookup-then-insert (lsm-tree's requirement 6).
    Upsert(crate::upsert::UpsertArgs),
    /// Snapshot save/open/check/delete and cursor scans on a Sprig database made by `create`.
    StateTools(crate::state_tools::StateToolsArgs),
}

/// The workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// NOMT's transfer: two reads and two writes per transfer, 25,000 per commit.
    Transfer,
    /// lsm-tree's utxo: 256 lookups, 256 inserts and 256 deletes per commit.
    Utxo,
    /// QMDB's mix: 15 reads, 9 updates, 1 create, 1 delete per transaction.
    Mixed,
}

impl WorkloadKind {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Transfer => "transfer",
            WorkloadKind::Utxo => "utxo",
            WorkloadKind::Mixed => "mixed",
        }
    }
}

/// The engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Sprig.
    Sprig,
    /// NOMT (the `nomt` crate, BLAKE3), built with feature `nomt`.
    Nomt,
    /// RocksDB (the `rocksdb` crate, no Merkle tree), built with feature `rocksdb`.
    Rocksdb,
}

impl EngineKind {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Sprig => "sprig",
            EngineKind::Nomt => "nomt",
            EngineKind::Rocksdb => "rocksdb",
        }
    }
}

/// How engines are configured (the same budget for every engine).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct EngineArgs {
    /// Cache budget in MiB (Sprig's page cache; NOMT's page + leaf caches split evenly;
    /// RocksDB's block cache).
    #[arg(long, default_value_t = 64)]
    pub cache_mb: u64,
    /// Bypass the OS page cache where the engine can (Sprig segments, RocksDB reads and
    /// compaction; NOMT always uses O_DIRECT).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub direct_io: bool,
    /// Threads the peers read with (NOMT's workload threads, RocksDB's multi_get threads).
    /// Sprig issues a batch's reads together through io_uring from one thread.
    #[arg(long, default_value_t = 8)]
    pub threads: usize,
    /// Sprig only: compute batch n+1 on top of batch n (a stacked overlay) while n commits.
    #[arg(long)]
    pub pipelined: bool,
    /// Read keys one at a time instead of batched (Sprig: no prefetch; peers: one thread).
    #[arg(long)]
    pub serial_reads: bool,
    /// Sprig only, at create: spread the keys over this many tables (1 or 2; with 2, keys
    /// whose path starts with an odd byte go to table `second`), every batch committing both
    /// together. A database made so is run that way; its root is the database root, so it
    /// does not match the peers' (no `--check` against them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub sprig_tables: u8,
    /// Sprig only: when commits reach the disk (`always`: durable when `commit` returns;
    /// `never`: commit records unsynced).
    #[arg(long, value_enum, default_value = "always")]
    #[serde(default)]
    pub sprig_sync: SprigSync,
    /// Sprig only: committed versions retained.
    #[arg(long, default_value_t = 4)]
    #[serde(default = "default_retained")]
    pub sprig_retained: usize,
    /// Sprig only, at create: segment file size in MiB.
    #[arg(long, default_value_t = 64)]
    #[serde(default = "default_segment_mb")]
    pub sprig_segment_mb: u64,
    /// Sprig only: the I/O backend (`io-uring` falls back to posix where refused).
    #[arg(long, value_enum, default_value = "io-uring")]
    #[serde(default)]
    pub sprig_io: SprigIo,
    /// Sprig only: write automatic checkpoints on a background thread
    /// (`Options::background_checkpoints`).
    #[arg(long)]
    #[serde(default)]
    pub sprig_background_checkpoints: bool,
}

fn default_retained() -> usize {
    4
}

fn default_segment_mb() -> u64 {
    64
}

/// Sprig's sync policy on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize)]
pub enum SprigSync {
    /// Every commit durable when it returns.
    #[default]
    Always,
    /// Commit records unsynced.
    Never,
}

/// Sprig's I/O backend on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize)]
pub enum SprigIo {
    /// io_uring where the kernel allows it.
    #[default]
    IoUring,
    /// Plain positioned reads.
    Posix,
}

impl EngineArgs {
    /// Sprig's settings that differ from the engine's defaults, for reports ("" if none).
    pub fn sprig_options_note(&self) -> String {
        let mut v = Vec::new();
        if self.sprig_sync == SprigSync::Never {
            v.push("sync never".to_string());
        }
        if self.sprig_retained != default_retained() {
            v.push(format!("{} retained versions", self.sprig_retained));
        }
        if self.sprig_segment_mb != default_segment_mb() {
            v.push(format!("{} MiB segments", self.sprig_segment_mb));
        }
        if self.sprig_io == SprigIo::Posix {
            v.push("posix I/O".to_string());
        }
        if self.sprig_background_checkpoints {
            v.push("background checkpoints".to_string());
        }
        v.join(", ")
    }
}

/// Arguments of `create`.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// The workload the database is for.
    #[arg(long, value_enum)]
    pub workload: WorkloadKind,
    /// Entries to load (accepts 2^k).
    #[arg(long, value_parser = parse_count)]
    pub entries: u64,
    /// The engine.
    #[arg(long, value_enum, default_value = "sprig")]
    pub engine: EngineKind,
    /// The directory holding one sub-directory per engine.
    #[arg(long)]
    pub dir: PathBuf,
    /// The seed of every generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Engine settings.
    #[command(flatten)]
    pub engine_args: EngineArgs,
}

/// What shapes a run (shared by `run` and `compare`).
#[derive(Debug, Clone, Args)]
pub struct RunShapeArgs {
    /// Batches (committed workloads) to run.
    #[arg(long, default_value_t = 20)]
    pub batches: u64,
    /// Transfers, utxo lookups or mixed transactions per batch (default: the workload's).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// transfer: share of target accounts that are fresh, in percent (0, 50, 100).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub fresh: u8,
    /// Compare lookups and roots with the reference model (small N; needs a database fresh
    /// from `create`), and in `compare` also every root with NOMT's.
    #[arg(long)]
    pub check: bool,
}

/// Where results go besides the terminal.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the results as Markdown here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// What `run` and `compare` share.
#[derive(Debug, Clone, Args)]
pub struct RunCommon {
    /// The run's shape.
    #[command(flatten)]
    pub shape: RunShapeArgs,
    /// Engine settings.
    #[command(flatten)]
    pub engine_args: EngineArgs,
    /// Result files.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Arguments of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The engine.
    #[arg(long, value_enum, default_value = "sprig")]
    pub engine: EngineKind,
    /// The directory given to `create`.
    #[arg(long)]
    pub dir: PathBuf,
    /// The run's shape, engine settings and result files.
    #[command(flatten)]
    pub common: RunCommon,
    /// No progress bar (for machine use).
    #[arg(long)]
    pub quiet: bool,
}

/// Arguments of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The workload.
    #[arg(long, value_enum)]
    pub workload: WorkloadKind,
    /// Entries (used with --create, and checked against existing databases).
    #[arg(long, value_parser = parse_count)]
    pub entries: u64,
    /// Engines, comma-separated; the first is the one the ratios are of.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "sprig,nomt,rocksdb"
    )]
    pub engines: Vec<EngineKind>,
    /// The directory holding one sub-directory per engine.
    #[arg(long)]
    pub dir: PathBuf,
    /// Create the databases first (replacing what is there).
    #[arg(long)]
    pub create: bool,
    /// The seed of every generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds; each round runs every engine once (in rotating order) on the same batches.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Cap each engine process's memory, page cache included (a memory cgroup), in MiB.
    #[arg(long)]
    pub mem_cap_mb: Option<u64>,
    /// Run fio's 4 KiB random-read test on the database's disk first and report ops ÷ IOPS.
    #[arg(long)]
    pub fio: bool,
    /// Read every file of an engine's database once (sequentially, O_DIRECT) right before each
    /// of its runs, so every engine starts with its data equally warm in the disk's cache tier
    /// (virtual disks read recently touched data several times faster; BENCHMARKS.md, 00).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub warm_disk: bool,
    /// The run's shape, engine settings and result files.
    #[command(flatten)]
    pub common: RunCommon,
}

/// Parse a count: a number, or `2^k`.
fn parse_count(s: &str) -> Result<u64, String> {
    let s = s.trim().replace('_', "");
    if let Some(exp) = s.strip_prefix("2^") {
        let k: u32 = exp
            .parse()
            .map_err(|e| format!("bad exponent {exp:?}: {e}"))?;
        return 1u64
            .checked_shl(k)
            .filter(|_| k < 64)
            .ok_or_else(|| format!("2^{k} does not fit in 64 bits"));
    }
    s.parse().map_err(|e| format!("bad count {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accept_powers_of_two() {
        assert_eq!(parse_count("2^20"), Ok(1 << 20));
        assert_eq!(parse_count("10_000_000"), Ok(10_000_000));
        assert!(parse_count("2^64").is_err());
        assert!(parse_count("x").is_err());
    }
}
