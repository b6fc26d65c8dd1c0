//! Process-kill torture: a writer child commits random batches to a real on-disk database and
//! logs each commit before it starts and after it is acknowledged; the parent kills it with
//! SIGKILL at a random moment (or starts it with a failpoint armed so it aborts at an exact
//! step inside a commit, checkpoint or clean), reopens the database, and requires the
//! recovered state to be exactly the last acknowledged commit or the one in flight, value for
//! value. Then it starts the next child on the recovered database.
//!
//! The parent never trusts the child's view: it replays the logged batches into its own
//! reference model and compares roots and values with what the reopened database serves.

use crate::error::TortureError;
use crate::verify::compare;
use crate::workload::{db_options, read_ack_log, AckRecord, Op, Shape};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::failpoint::{FAILPOINTS, FAILPOINT_ENV};
use sprig::{Db, Hasher, KeyPath, Node};
use sprig_core::ReferenceModel;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a child started with a failpoint may run before it is killed anyway.
const FAILPOINT_TIMEOUT_MS: u64 = 3000;
/// How often the parent polls a child that should abort by itself.
const POLL_MS: u64 = 2;
/// Run the engine's full check of every page and value every this many kills.
const FULL_CHECK_EVERY_KILLS: u64 = 10;
/// Absent or present keys read one by one after each recovery.
const PROBE_KEYS: usize = 256;
/// Progress is printed at most this often.
const PROGRESS_EVERY_SECS: u64 = 10;
/// Percent of child steps that write an explicit checkpoint.
const CHECKPOINT_PERCENT: u32 = 2;
/// Percent of child steps that run an explicit clean.
const CLEAN_PERCENT: u32 = 2;

/// What a kill run is asked to do.
#[derive(Debug, Clone)]
pub struct KillConfig {
    /// The work directory (the database is `db/` inside it).
    pub dir: PathBuf,
    /// The master seed.
    pub seed: u64,
    /// Stop after this many kills (SIGKILLs and failpoint aborts).
    pub kills: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The workload.
    pub shape: Shape,
    /// The shortest and longest time a child runs before it is killed, in milliseconds.
    pub run_ms: (u64, u64),
    /// Percent of children started with a failpoint armed.
    pub failpoint_percent: u32,
}

/// The figures of a kill run.
#[derive(Debug, Default)]
pub struct KillSummary {
    /// Children killed with SIGKILL.
    pub sigkills: u64,
    /// Children that aborted at a failpoint, by failpoint.
    pub aborts: BTreeMap<&'static str, u64>,
    /// Children started with a failpoint that was not reached in time (then killed).
    pub failpoints_missed: u64,
    /// Commits the children acknowledged.
    pub acknowledged: u64,
    /// Recoveries that found the commit in flight applied.
    pub in_flight_applied: u64,
    /// Recoveries that found the commit in flight absent.
    pub in_flight_dropped: u64,
    /// Acknowledged commits missing after a recovery.
    pub lost: u64,
    /// Recoveries that served a state other than the acknowledged or in-flight one.
    pub mismatches: u64,
    /// Children that exited on their own (an engine error in the child).
    pub child_failures: u64,
    /// Engine errors in the parent's reopen or reads.
    pub recovery_errors: u64,
    /// Reopen times.
    pub recovery: Vec<Duration>,
    /// The sequence number reached.
    pub seq: u64,
    /// Entries in the final state.
    pub entries: usize,
    /// Wall time.
    pub elapsed: Duration,
}

impl KillSummary {
    /// Kills of any kind.
    pub fn kills(&self) -> u64 {
        self.sigkills + self.aborts.values().sum::<u64>()
    }

    /// Whether the run saw nothing wrong.
    pub fn ok(&self) -> bool {
        self.lost == 0
            && self.mismatches == 0
            && self.child_failures == 0
            && self.recovery_errors == 0
    }

    fn recovery_ms(&self) -> (f64, f64) {
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        let n = self.recovery.len().max(1) as f64;
        let mean = self.recovery.iter().map(ms).sum::<f64>() / n;
        let max = self.recovery.iter().map(ms).fold(0.0, f64::max);
        (mean, max)
    }

    /// The closing report.
    pub fn print(&self) {
        let (mean, max) = self.recovery_ms();
        println!("summary:");
        println!(
            "  kills {} (SIGKILL {}, failpoint aborts {}, failpoints not reached {})",
            self.kills(),
            self.sigkills,
            self.aborts.values().sum::<u64>(),
            self.failpoints_missed
        );
        for (name, n) in &self.aborts {
            println!("    abort at {name}: {n}");
        }
        println!(
            "  commits acknowledged {}, in flight at the kill: applied {}, dropped {}",
            self.acknowledged, self.in_flight_applied, self.in_flight_dropped
        );
        println!(
            "  lost {}, mismatches {}, child failures {}, recovery errors {}",
            self.lost, self.mismatches, self.child_failures, self.recovery_errors
        );
        println!(
            "  recovery (reopen) time: mean {mean:.1} ms, max {max:.1} ms over {} reopens",
            self.recovery.len()
        );
        println!(
            "  final seq {}, entries {}, elapsed {:.1} s",
            self.seq,
            self.entries,
            self.elapsed.as_secs_f64()
        );
        println!("  result: {}", if self.ok() { "PASS" } else { "FAIL" });
    }
}

/// The parent's knowledge: the acknowledged state.
struct Tracker {
    model: ReferenceModel,
    seq: u64,
}

/// What one child's log says beyond the acknowledged state: the commit it had started.
struct InFlight {
    seq: u64,
    ops: Vec<Op>,
}

fn apply(model: &mut ReferenceModel, ops: &[Op]) {
    model.apply(ops.iter().cloned());
}

impl Tracker {
    /// Fold a child's log into the acknowledged state; returns the commits acknowledged, the
    /// commit in flight, and a protocol problem if the log contradicts itself.
    fn absorb(
        &mut self,
        records: Vec<AckRecord>,
    ) -> (u64, Option<InFlight>, Option<String>, Option<Node>) {
        let mut acked = 0;
        let mut pending: Option<InFlight> = None;
        let mut last_root = None;
        for record in records {
            match record {
                AckRecord::Begin { seq, ops } => {
                    if seq != self.seq + 1 || pending.is_some() {
                        let problem = format!(
                            "the child began commit {seq} while the acknowledged state is {}",
                            self.seq
                        );
                        return (acked, None, Some(problem), last_root);
                    }
                    pending = Some(InFlight { seq, ops });
                }
                AckRecord::Ack { seq, root } => match pending.take() {
                    Some(p) if p.seq == seq => {
                        apply(&mut self.model, &p.ops);
                        self.seq = seq;
                        acked += 1;
                        last_root = Some(root);
                    }
                    _ => {
                        let problem = format!("acknowledgement of {seq} without its begin");
                        return (acked, None, Some(problem), last_root);
                    }
                },
                AckRecord::Cancel { .. } => pending = None,
            }
        }
        (acked, pending, None, last_root)
    }
}

/// How a child ended.
enum Ending {
    Killed,
    Aborted,
    Exited(String),
}

fn spawn_child(
    cfg: &KillConfig,
    db: &Path,
    log: &Path,
    stderr: &Path,
    seed: u64,
    failpoint: Option<&str>,
) -> Result<Child, TortureError> {
    let exe = std::env::current_exe()
        .map_err(|e| TortureError::io("finding this program to re-execute it", e))?;
    let err = std::fs::File::create(stderr)
        .map_err(|e| TortureError::io("creating the child's stderr file", e))?;
    let mut cmd = Command::new(exe);
    cmd.arg("child")
        .arg("--db")
        .arg(db)
        .arg("--log")
        .arg(log)
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--keys")
        .arg(cfg.shape.keys.to_string())
        .arg("--max-batch-ops")
        .arg(cfg.shape.max_batch_ops.to_string())
        .arg("--max-value-bytes")
        .arg(cfg.shape.max_value_bytes.to_string())
        .arg("--big-value-percent")
        .arg(cfg.shape.big_value_percent.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .env_remove(FAILPOINT_ENV);
    if let Some(fp) = failpoint {
        cmd.env(FAILPOINT_ENV, fp);
    }
    cmd.spawn()
        .map_err(|e| TortureError::io("starting the writer child", e))
}

/// Let the child run, then make sure it is dead; says how it ended.
fn end_child(
    child: &mut Child,
    run: Duration,
    expect_abort: bool,
    stderr: &Path,
) -> Result<Ending, TortureError> {
    let deadline = Instant::now() + run;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| TortureError::io("waiting for the child", e))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            // SIGKILL.
            child
                .kill()
                .map_err(|e| TortureError::io("killing the child", e))?;
            break child
                .wait()
                .map_err(|e| TortureError::io("waiting for the child", e))?;
        }
        std::thread::sleep(Duration::from_millis(if expect_abort {
            POLL_MS
        } else {
            1
        }));
    };
    Ok(match status.signal() {
        Some(9) => Ending::Killed,
        Some(6) if expect_abort => Ending::Aborted,
        _ => {
            let text = std::fs::read_to_string(stderr).unwrap_or_default();
            Ending::Exited(format!("{status}: {}", text.trim()))
        }
    })
}

/// Run the kill torture.
pub fn run(cfg: &KillConfig) -> Result<KillSummary, TortureError> {
    cfg.shape.validate()?;
    if cfg.run_ms.0 > cfg.run_ms.1 {
        return Err(TortureError::Usage(
            "the shortest run is longer than the longest".into(),
        ));
    }
    let db_dir = cfg.dir.join("db");
    if db_dir.exists() {
        return Err(TortureError::Usage(format!(
            "{} already exists: give a new work directory",
            db_dir.display()
        )));
    }
    std::fs::create_dir_all(&cfg.dir)
        .map_err(|e| TortureError::io("creating the work directory", e))?;
    let log = cfg.dir.join("ack.log");
    let stderr = cfg.dir.join("child.stderr");
    println!(
        "kill torture: seed {} (replay with --seed {}), work directory {}",
        cfg.seed,
        cfg.seed,
        cfg.dir.display()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut tracker = Tracker {
        model: ReferenceModel::new(Hasher::Blake3),
        seq: 0,
    };
    drop(Db::create(&db_dir, db_options())?);
    let mut summary = KillSummary::default();
    let started = Instant::now();
    let mut last_progress = Instant::now();
    loop {
        let kills = summary.kills();
        if cfg.kills.is_some_and(|k| kills >= k)
            || cfg.duration.is_some_and(|d| started.elapsed() >= d)
        {
            break;
        }
        let child_seed: u64 = rng.gen();
        let failpoint = (rng.gen_range(0..100) < cfg.failpoint_percent).then(|| {
            let name = *FAILPOINTS
                .choose(&mut rng)
                .unwrap_or(&"commit.pages_synced");
            // Commit steps happen every commit; the others every few dozen commits.
            let max = if name.starts_with("commit.") || name.starts_with("wal.") {
                40
            } else {
                3
            };
            (name, rng.gen_range(1..=max))
        });
        let run = match failpoint {
            Some(_) => Duration::from_millis(FAILPOINT_TIMEOUT_MS),
            None => Duration::from_millis(rng.gen_range(cfg.run_ms.0..=cfg.run_ms.1)),
        };
        let spec = failpoint.map(|(name, count)| format!("{name}:{count}"));
        let _ = std::fs::remove_file(&log);
        let mut child = spawn_child(cfg, &db_dir, &log, &stderr, child_seed, spec.as_deref())?;
        let ending = end_child(&mut child, run, failpoint.is_some(), &stderr)?;
        match (&ending, failpoint) {
            (Ending::Killed, Some(_)) => {
                summary.sigkills += 1;
                summary.failpoints_missed += 1;
            }
            (Ending::Killed, None) => summary.sigkills += 1,
            (Ending::Aborted, Some((name, _))) => *summary.aborts.entry(name).or_default() += 1,
            (Ending::Aborted, None) => {}
            (Ending::Exited(how), _) => {
                summary.child_failures += 1;
                println!("FAIL: the writer child (seed {child_seed}) exited: {how}");
            }
        }
        let (acked, in_flight, problem, child_root) = tracker.absorb(read_ack_log(&log)?);
        summary.acknowledged += acked;
        let context = format!(
            "kill {} (child seed {child_seed}, failpoint {})",
            summary.kills(),
            spec.as_deref().unwrap_or("none")
        );
        if let Some(problem) = problem {
            summary.mismatches += 1;
            println!("FAIL: {context}: {problem}");
        }
        let acked_root = tracker.model.root();
        if child_root.is_some_and(|r| r != acked_root) {
            summary.mismatches += 1;
            println!("FAIL: {context}: the engine acknowledged a root the model does not give");
        }
        let full = summary.kills() % FULL_CHECK_EVERY_KILLS == 0;
        recover_and_check(
            &db_dir,
            &mut tracker,
            in_flight,
            &mut rng,
            cfg,
            full,
            &context,
            &mut summary,
        );
        if last_progress.elapsed() >= Duration::from_secs(PROGRESS_EVERY_SECS) {
            last_progress = Instant::now();
            let (mean, max) = summary.recovery_ms();
            println!(
                "[{:>6.1} s] kills {}, acknowledged {}, seq {}, entries {}, lost {}, mismatches {}, recovery mean {mean:.1} ms max {max:.1} ms",
                started.elapsed().as_secs_f64(),
                summary.kills(),
                summary.acknowledged,
                tracker.seq,
                tracker.model.len(),
                summary.lost,
                summary.mismatches
            );
        }
        if !summary.ok() {
            break;
        }
    }
    // A last full check of the final state.
    let final_context = "final check".to_string();
    recover_and_check(
        &db_dir,
        &mut tracker,
        None,
        &mut rng,
        cfg,
        true,
        &final_context,
        &mut summary,
    );
    let _ = std::fs::remove_file(&log);
    summary.seq = tracker.seq;
    summary.entries = tracker.model.len();
    summary.elapsed = started.elapsed();
    Ok(summary)
}

/// Reopen the database, time it, and require the acknowledged state or the one in flight.
#[allow(clippy::too_many_arguments)]
fn recover_and_check(
    db_dir: &Path,
    tracker: &mut Tracker,
    in_flight: Option<InFlight>,
    rng: &mut ChaCha8Rng,
    cfg: &KillConfig,
    full: bool,
    context: &str,
    summary: &mut KillSummary,
) {
    let t = Instant::now();
    let db = match Db::open(db_dir, db_options()) {
        Ok(db) => db,
        Err(e) => {
            summary.recovery_errors += 1;
            println!("FAIL: {context}: reopening: {e}");
            return;
        }
    };
    summary.recovery.push(t.elapsed());
    let seq = db.seq();
    if seq < tracker.seq {
        summary.lost += tracker.seq - seq;
        println!(
            "FAIL: {context}: recovered seq {seq}, but {} was acknowledged",
            tracker.seq
        );
        return;
    }
    match in_flight {
        Some(f) if seq == f.seq => {
            let mut next = tracker.model.clone();
            apply(&mut next, &f.ops);
            if db.root() != next.root() {
                summary.mismatches += 1;
                println!("FAIL: {context}: recovered seq {seq} with a root that is not the commit in flight");
                return;
            }
            tracker.model = next;
            tracker.seq = seq;
            summary.in_flight_applied += 1;
        }
        Some(_) if seq == tracker.seq => summary.in_flight_dropped += 1,
        _ if seq == tracker.seq => {}
        _ => {
            summary.mismatches += 1;
            println!(
                "FAIL: {context}: recovered seq {seq}, neither the acknowledged {} nor the one in flight",
                tracker.seq
            );
            return;
        }
    }
    let probe: Vec<KeyPath> = (0..PROBE_KEYS).map(|_| cfg.shape.random_key(rng)).collect();
    match compare(&db, &tracker.model, &probe, full) {
        Ok(None) => {}
        Ok(Some(diff)) => {
            summary.mismatches += 1;
            println!("FAIL: {context}: {diff}");
        }
        Err(e) => {
            summary.recovery_errors += 1;
            println!("FAIL: {context}: reading the recovered database: {e}");
        }
    }
}

/// The writer child: open the database and commit random batches until killed, logging each
/// commit before it starts and after it returns. Returns only on an engine error.
pub fn child(db_dir: &Path, log: &Path, seed: u64, shape: Shape) -> Result<(), TortureError> {
    shape.validate()?;
    let parent = std::os::unix::process::parent_id();
    let db = Db::open(db_dir, db_options())?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| TortureError::io("opening the acknowledgement log", e))?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // An orphan (its parent gone) stops instead of writing forever.
    while std::os::unix::process::parent_id() == parent {
        let roll = rng.gen_range(0..100);
        if roll < CHECKPOINT_PERCENT {
            db.checkpoint()?;
            continue;
        }
        let seq = db.seq() + 1;
        if roll < CHECKPOINT_PERCENT + CLEAN_PERCENT {
            AckRecord::Begin {
                seq,
                ops: Vec::new(),
            }
            .append(&mut log)?;
            match db.clean()? {
                Some(info) => AckRecord::Ack {
                    seq: info.seq,
                    root: info.root,
                },
                None => AckRecord::Cancel { seq },
            }
            .append(&mut log)?;
            continue;
        }
        let ops = shape.batch(&mut rng);
        AckRecord::Begin {
            seq,
            ops: ops.clone(),
        }
        .append(&mut log)?;
        let mut batch = db.begin();
        for (key, value) in ops {
            match value {
                Some(v) => batch.put(key, v)?,
                None => batch.delete(key),
            }
        }
        let info = db.commit(batch.finish()?)?;
        AckRecord::Ack {
            seq: info.seq,
            root: info.root,
        }
        .append(&mut log)?;
    }
    Ok(())
}
