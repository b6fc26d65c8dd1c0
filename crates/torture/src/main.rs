//! `sprig-torture`: Sprig's crash-torture tool.
//!
//! - `kill`: a writer child commits random batches to a real database; the parent kills it
//!   with SIGKILL at random moments, or starts it with a failpoint so it aborts at an exact
//!   step inside a commit, checkpoint or clean; after each death it reopens the database and
//!   requires exactly the last acknowledged commit or the one in flight.
//! - `flip`: flips random bits in every kind of file of a real database and requires a typed
//!   corruption error or the exact data, never a wrong value, root or panic.
//! - `child`: the writer child of `kill` (the same binary, re-executed).
//!
//! Every run prints its seed; the same seed replays the same workload and the same choices
//! (kill moments depend on timing, so a replay explores the same kind of run, not the same
//! instants). The exit status is non-zero on any lost commit, mismatch or undetected flip.

mod error;
mod flip;
mod kill;
mod verify;
mod workload;

use clap::{Args, Parser, Subcommand};
use error::TortureError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use workload::Shape;

#[derive(Parser)]
#[command(
    name = "sprig-torture",
    version,
    about = "Crash and corruption torture for Sprig"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Kill a writer at random moments and at failpoints; check every recovery.
    Kill(KillArgs),
    /// Flip random bits in every kind of file; check corruption is detected, never served.
    Flip(FlipArgs),
    /// The writer child of `kill` (not for direct use).
    #[command(hide = true)]
    Child(ChildArgs),
}

#[derive(Args, Clone)]
struct ShapeArgs {
    /// Keys are drawn from this many.
    #[arg(long, default_value_t = 4000)]
    keys: u64,
    /// The most changes in one batch.
    #[arg(long, default_value_t = 64)]
    max_batch_ops: usize,
    /// The largest value in bytes (values above 1,024 bytes go to the value log).
    #[arg(long, default_value_t = 16384)]
    max_value_bytes: usize,
    /// Percent of puts with a value-log value.
    #[arg(long, default_value_t = 10)]
    big_value_percent: u32,
}

impl ShapeArgs {
    fn shape(&self) -> Shape {
        Shape {
            keys: self.keys,
            max_batch_ops: self.max_batch_ops,
            max_value_bytes: self.max_value_bytes,
            big_value_percent: self.big_value_percent,
        }
    }
}

#[derive(Args)]
struct KillArgs {
    /// A new or empty work directory (the database is `db/` inside it). Default: a new
    /// directory in the system's temporary directory, removed after a passing run.
    #[arg(long)]
    db: Option<PathBuf>,
    /// The seed. Default: from the clock (printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop after this many kills.
    #[arg(long)]
    kills: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration_secs: Option<u64>,
    /// The shortest time a child runs before SIGKILL, in milliseconds.
    #[arg(long, default_value_t = 20)]
    min_run_ms: u64,
    /// The longest time a child runs before SIGKILL, in milliseconds.
    #[arg(long, default_value_t = 400)]
    max_run_ms: u64,
    /// Percent of children started with a random failpoint armed.
    #[arg(long, default_value_t = 30)]
    failpoint_percent: u32,
    /// Keep the work directory after a passing run.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    shape: ShapeArgs,
}

#[derive(Args)]
struct FlipArgs {
    /// A new or empty work directory. Default: a new directory in the system's temporary
    /// directory, removed after a passing run.
    #[arg(long)]
    db: Option<PathBuf>,
    /// The seed. Default: from the clock (printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Bits to flip (one per copy of the database).
    #[arg(long, default_value_t = 300)]
    flips: u64,
    /// Keep the work directory after a passing run.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    shape: ShapeArgs,
}

#[derive(Args)]
struct ChildArgs {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    log: PathBuf,
    #[arg(long)]
    seed: u64,
    #[command(flatten)]
    shape: ShapeArgs,
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// The work directory: the one given, or a new one under the temporary directory.
fn work_dir(
    given: Option<PathBuf>,
    mode: &str,
    seed: u64,
) -> Result<(PathBuf, bool), TortureError> {
    let (dir, ours) = match given {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!(
                "sprig-torture-{mode}-{seed}-{}",
                std::process::id()
            )),
            true,
        ),
    };
    let non_empty = std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some());
    if non_empty {
        return Err(TortureError::Usage(format!(
            "{} is not empty: give a new or empty work directory",
            dir.display()
        )));
    }
    Ok((dir, ours))
}

fn finish(ok: bool, dir: &std::path::Path, remove: bool) -> ExitCode {
    if ok && remove {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        println!("work directory kept: {}", dir.display());
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run(cli: Cli) -> Result<ExitCode, TortureError> {
    match cli.command {
        Command::Kill(a) => {
            if a.kills.is_none() && a.duration_secs.is_none() {
                return Err(TortureError::Usage(
                    "say when to stop: --kills N and/or --duration-secs S".into(),
                ));
            }
            let seed = a.seed.unwrap_or_else(clock_seed);
            let (dir, ours) = work_dir(a.db, "kill", seed)?;
            let cfg = kill::KillConfig {
                dir: dir.clone(),
                seed,
                kills: a.kills,
                duration: a.duration_secs.map(Duration::from_secs),
                shape: a.shape.shape(),
                run_ms: (a.min_run_ms, a.max_run_ms),
                failpoint_percent: a.failpoint_percent.min(100),
            };
            let summary = kill::run(&cfg)?;
            summary.print();
            Ok(finish(summary.ok(), &dir, ours && !a.keep))
        }
        Command::Flip(a) => {
            let seed = a.seed.unwrap_or_else(clock_seed);
            let (dir, ours) = work_dir(a.db, "flip", seed)?;
            let cfg = flip::FlipConfig {
                dir: dir.clone(),
                seed,
                flips: a.flips,
                shape: a.shape.shape(),
            };
            let summary = flip::run(&cfg)?;
            summary.print();
            Ok(finish(summary.ok(), &dir, ours && !a.keep))
        }
        Command::Child(a) => {
            kill::child(&a.db, &a.log, a.seed, a.shape.shape())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sprig-torture: {e}");
            ExitCode::from(2)
        }
    }
}
