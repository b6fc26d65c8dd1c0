//! Results: what one run measured ([`RunResult`]), the summary of a comparison
//! ([`Comparison`]: medians over rounds and ratios Sprig ÷ peer), and their three renderings:
//! a table on the terminal, JSON and Markdown. Nothing here measures anything.

use crate::cli::{EngineArgs, EngineKind, WorkloadKind};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// What one run of one engine measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// The engine.
    pub engine: EngineKind,
    /// The workload.
    pub workload: WorkloadKind,
    /// Entries the database was created with.
    pub entries_created: u64,
    /// Live entries after the run.
    pub entries_after: u64,
    /// The generators' seed.
    pub seed: u64,
    /// Batches run, and the first batch's number (batches done before this run).
    pub batches: u64,
    /// The first batch's number.
    pub first_batch: u64,
    /// Transfers, utxo lookups or mixed transactions per batch.
    pub batch_size: usize,
    /// transfer: fresh target accounts, percent.
    pub fresh_pct: u8,
    /// Key bytes (before hashing to a 32-byte key path) and value bytes.
    pub key_bytes: usize,
    /// Value bytes.
    pub value_bytes: usize,
    /// What throughput counts: transfers, ops (lookups + inserts + deletes) or updates
    /// (mixed transactions × 11 state updates).
    pub unit: String,
    /// Units done.
    pub units: u64,
    /// Wall time of the batches (generation and checks excluded), seconds.
    pub seconds: f64,
    /// Units per second.
    pub units_per_sec: f64,
    /// Batch latency (reads + execution + commit), median, ms.
    pub batch_ms_p50: f64,
    /// Batch latency, 99th percentile, ms.
    pub batch_ms_p99: f64,
    /// The slowest batch, ms (a checkpoint or a compaction shows here before it shows in the
    /// 99th percentile).
    #[serde(default)]
    pub batch_ms_max: Option<f64>,
    /// Mean time a batch spent reading, ms.
    pub read_ms_mean: f64,
    /// Mean time a batch spent committing (root, witness, durable write), ms.
    pub commit_ms_mean: f64,
    /// Of `commit_ms_mean`, the engine's `finish` (pages rebuilt and hashed, root and
    /// witness) and its durable commit (pipelined: the hand-over), mean ms (Sprig).
    #[serde(default)]
    pub finish_ms_mean: Option<f64>,
    #[serde(default)]
    pub durable_ms_mean: Option<f64>,
    /// Of those, each step of Sprig's finish and durable commit, mean ms a batch, by the
    /// name of its `sprig::telemetry::Phase` (`locate`, `rewrite`, `load` (within
    /// `rewrite`), `witness`; `write`, `sync`, `log`, `housekeeping`).
    #[serde(default)]
    pub steps_ms: Option<std::collections::BTreeMap<String, f64>>,
    /// CPU time (every thread of the process) a batch's commit phase used, mean, ms.
    #[serde(default)]
    pub commit_cpu_ms_mean: Option<f64>,
    /// 4 KiB reads per second during the batches' read phases (`/proc/self/io` read_bytes
    /// over the read phases ÷ their time).
    #[serde(default)]
    pub read_phase_reads_per_sec: Option<f64>,
    /// Hash computations a batch's changes need at the least, by Sprig's count (the same for
    /// every engine with this trie: the batches are the same).
    #[serde(default)]
    pub hashes_needed_per_batch: Option<f64>,
    /// Nanoseconds per Merkle node hash on one core of this machine, measured in the run.
    #[serde(default)]
    pub ns_per_hash: Option<f64>,
    /// SSD reads per unit, by the engine's own counters (Sprig).
    pub ssd_reads_per_unit: Option<f64>,
    /// 4 KiB reads per unit by `/proc/self/io` read_bytes (every engine).
    pub read_4k_per_unit: f64,
    /// Bytes written per unit by `/proc/self/io` write_bytes (every engine).
    pub written_bytes_per_unit: f64,
    /// Bytes written per unit by the engine's own counters (Sprig).
    pub engine_written_bytes_per_unit: Option<f64>,
    /// Page versions written per unit by the engine's own counters (Sprig).
    #[serde(default)]
    pub pages_written_per_unit: Option<f64>,
    /// Pages the cleaner copied forward per unit (Sprig).
    #[serde(default)]
    pub cleaner_pages_per_unit: Option<f64>,
    /// Disk use by the engine's own count after the run (Sprig).
    #[serde(default)]
    pub space: Option<crate::engine::SpaceUse>,
    /// Peak RSS of the process, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Seconds the engine took to open its database.
    #[serde(default)]
    pub open_seconds: Option<f64>,
    /// RSS of the process right after the engine opened, before any batch, bytes.
    #[serde(default)]
    pub rss_after_open_bytes: Option<u64>,
    /// Peak RSS of the process up to the end of the open, bytes (transient copies included).
    #[serde(default)]
    pub peak_rss_after_open_bytes: Option<u64>,
    /// Peak memory of the cgroup (RSS + page cache), bytes, when run under a cap.
    pub cgroup_peak_bytes: Option<u64>,
    /// The memory cap, MiB, if any.
    pub mem_cap_mb: Option<u64>,
    /// Bytes the database occupies on disk after the run.
    pub disk_bytes: u64,
    /// Disk bytes per live entry.
    pub disk_bytes_per_entry: f64,
    /// Engine settings.
    pub config: EngineArgs,
    /// The root after the run (hex), if the engine has one.
    pub final_root: Option<String>,
    /// A digest of every batch's root in order (hex), if the engine has roots.
    pub roots_digest: Option<String>,
    /// A digest of every lookup result in order (hex).
    pub reads_digest: String,
    /// What `--check` compared, if it ran.
    pub checked: Option<String>,
    /// The I/O backend the engine really used, where it says (e.g. "io_uring, direct I/O").
    #[serde(default)]
    pub io_backend: Option<String>,
}

/// The summary of a comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// The command line that produced it.
    pub command: String,
    /// fio 4 KiB random-read IOPS at queue depth 32 and 1 on the database's disk, same run.
    pub fio_iops: Option<FioIops>,
    /// Whether each engine's files were read once right before each of its runs (equal warmth
    /// in the disk's cache tier; absent in reports made before the option).
    #[serde(default)]
    pub disk_warmed: bool,
    /// Every run, in the order run.
    pub runs: Vec<RunResult>,
    /// Per engine: the run with the median throughput.
    pub medians: Vec<RunResult>,
    /// Per peer: median throughput of the first engine ÷ the peer's.
    pub ratios: Vec<(EngineKind, f64)>,
    /// What the root cross-check found, if asked.
    pub root_check: Option<String>,
}

/// fio's figures.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct FioIops {
    /// Queue depth 32.
    pub qd32: f64,
    /// Queue depth 1.
    pub qd1: f64,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// The rows of the results table (header first).
fn rows(results: &[RunResult], base: Option<&RunResult>, fio: Option<FioIops>) -> Vec<Vec<String>> {
    let unit = results.first().map_or("ops", |r| r.unit.as_str());
    let mut out = vec![vec![
        "engine".to_string(),
        format!("{unit}/s"),
        "ratio".to_string(),
        "per fio IOPS".to_string(),
        "batch p50 ms".to_string(),
        "batch p99 ms".to_string(),
        "batch max ms".to_string(),
        "read ms".to_string(),
        "read-phase reads/s".to_string(),
        "÷ fio QD32".to_string(),
        "commit ms".to_string(),
        "commit CPU ms".to_string(),
        "SSD reads/op".to_string(),
        "4K reads/op (proc)".to_string(),
        "B written/op".to_string(),
        "peak RSS MiB".to_string(),
        "disk B/entry".to_string(),
    ]];
    for r in results {
        let ratio = base.map(|b| b.units_per_sec / r.units_per_sec.max(f64::MIN_POSITIVE));
        let peak = r.peak_rss_bytes.map(mib);
        out.push(vec![
            r.engine.name().to_string(),
            format!("{:.0}", r.units_per_sec),
            opt(ratio, 2),
            opt(fio.map(|f| r.units_per_sec / f.qd32), 3),
            format!("{:.1}", r.batch_ms_p50),
            format!("{:.1}", r.batch_ms_p99),
            opt(r.batch_ms_max, 1),
            format!("{:.1}", r.read_ms_mean),
            opt(r.read_phase_reads_per_sec, 0),
            opt(
                r.read_phase_reads_per_sec
                    .zip(fio)
                    .map(|(reads, f)| reads / f.qd32),
                2,
            ),
            format!("{:.1}", r.commit_ms_mean),
            opt(r.commit_cpu_ms_mean, 1),
            opt(r.ssd_reads_per_unit, 2),
            format!("{:.2}", r.read_4k_per_unit),
            format!("{:.0}", r.written_bytes_per_unit),
            opt(peak, 0),
            format!("{:.1}", r.disk_bytes_per_entry),
        ]);
    }
    out
}

/// A plain-text table for the terminal.
pub fn table(results: &[RunResult], base: Option<&RunResult>, fio: Option<FioIops>) -> String {
    let rows = rows(results, base, fio);
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, String::len))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &rows {
        for (cell, w) in row.iter().zip(&widths) {
            let _ = write!(out, "{cell:>w$}  ");
        }
        out.push('\n');
    }
    out
}

/// A Markdown table.
fn markdown_table(results: &[RunResult], base: Option<&RunResult>, fio: Option<FioIops>) -> String {
    let rows = rows(results, base, fio);
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let _ = writeln!(out, "| {} |", row.join(" | "));
        if i == 0 {
            let _ = writeln!(out, "|{}", "---|".repeat(row.len()));
        }
    }
    out
}

/// The configuration of a run in one sentence.
pub fn describe(r: &RunResult) -> String {
    let c = &r.config;
    let mut s = format!(
        "{} at {} entries (now {}), {}-byte keys (hashed to 32-byte key paths), {}-byte values, \
         {} batches of {} from batch {} (seed {}), cache {} MiB, direct I/O {}, peer read threads {}",
        r.workload.name(),
        r.entries_created,
        r.entries_after,
        r.key_bytes,
        r.value_bytes,
        r.batches,
        r.batch_size,
        r.first_batch,
        r.seed,
        c.cache_mb,
        if c.direct_io { "on" } else { "off" },
        c.threads,
    );
    if r.workload == WorkloadKind::Transfer {
        let _ = write!(s, ", {} % fresh", r.fresh_pct);
    }
    if c.pipelined {
        s.push_str(", Sprig pipelined");
    }
    let sprig = c.sprig_options_note();
    if !sprig.is_empty() {
        let _ = write!(s, ", Sprig: {sprig}");
    }
    if c.serial_reads {
        s.push_str(", reads one key at a time");
    }
    match r.mem_cap_mb {
        Some(m) => {
            let _ = write!(
                s,
                ", memory cap {m} MiB per engine process (page cache included)"
            );
        }
        None => s.push_str(", no memory cap"),
    }
    s
}

/// Sprig's steps of a batch, mean ms each: `finish`'s, then the durable commit's.
fn steps_detail(steps: &std::collections::BTreeMap<String, f64>) -> String {
    use sprig::telemetry::Phase;
    let ms = |p: Phase| steps.get(p.name()).copied().unwrap_or(0.0);
    format!(
        "finish's steps locate {:.1}, rewrite {:.1} (loading pages {:.1} of it), witness and \
         directory {:.1} ms; the durable commit's write {:.1}, sync {:.1}, log {:.1}, \
         housekeeping {:.1} ms",
        ms(Phase::Locate),
        ms(Phase::Rewrite),
        ms(Phase::Load),
        ms(Phase::Witness),
        ms(Phase::Write),
        ms(Phase::Sync),
        ms(Phase::Log),
        ms(Phase::Housekeeping),
    )
}

/// The engine's own counters per unit, in one sentence, where it keeps them, the I/O backend
/// it used, and what opening it cost.
pub fn engine_detail(r: &RunResult) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(pages) = r.pages_written_per_unit {
        parts.push(format!(
            "{:.2} page versions written per {}, of them {:.2} by the cleaner; {:.0} bytes \
             written per {} by its own count",
            pages,
            r.unit.trim_end_matches('s'),
            r.cleaner_pages_per_unit.unwrap_or(0.0),
            r.engine_written_bytes_per_unit.unwrap_or(0.0),
            r.unit.trim_end_matches('s'),
        ));
    }
    if let (Some(f), Some(d)) = (r.finish_ms_mean, r.durable_ms_mean) {
        // Pipelined, the durable commit runs beside the next batch; the caller only waits to
        // hand the batch over.
        let durable = if r.config.pipelined {
            "the hand-over to the committing thread"
        } else {
            "the durable commit"
        };
        parts.push(format!(
            "of the commit's {:.1} ms a batch, finish {f:.1} ms and {durable} {d:.1} ms",
            r.commit_ms_mean
        ));
    }
    if let Some(steps) = &r.steps_ms {
        parts.push(steps_detail(steps));
    }
    if let Some(io) = &r.io_backend {
        parts.push(format!("I/O backend: {io}"));
    }
    if let Some(space) = &r.space {
        parts.push(format!(
            "space amplification {:.2} ({:.2} with the {:.1} MiB only older retained versions keep)",
            space.amplification(),
            space.total_amplification(),
            space.retained_bytes as f64 / (1u64 << 20) as f64
        ));
    }
    if let Some(f) = floor(r, r) {
        parts.push(f);
    }
    if let (Some(secs), Some(rss)) = (r.open_seconds, r.rss_after_open_bytes) {
        parts.push(format!(
            "opened in {secs:.2} s, RSS right after open {:.0} MiB (peak during open {:.0} MiB)",
            rss as f64 / (1u64 << 20) as f64,
            r.peak_rss_after_open_bytes.unwrap_or(0) as f64 / (1u64 << 20) as f64
        ));
    }
    (!parts.is_empty()).then(|| format!("{}: {}", r.engine.name(), parts.join("; ")))
}

/// The hashing floor of `counted`'s batches (its count of the hashes they need × ns per hash
/// measured in `r`'s run), and `r`'s commit CPU as a multiple of it.
pub fn floor(r: &RunResult, counted: &RunResult) -> Option<String> {
    let hashes = counted.hashes_needed_per_batch?;
    let ns = r.ns_per_hash?;
    let cpu = r.commit_cpu_ms_mean?;
    let floor_ms = hashes * ns / 1e6;
    Some(format!(
        "commit CPU {cpu:.1} ms per batch = {:.1}× the hashing floor ({hashes:.0} hashes a \
         batch needs × {ns:.0} ns per hash = {floor_ms:.1} ms)",
        cpu / floor_ms.max(1e-9)
    ))
}

/// The Markdown report of a single run.
pub fn run_markdown(r: &RunResult) -> String {
    let mut s = format!("Configuration: {}.\n\n", describe(r));
    s.push_str(&markdown_table(std::slice::from_ref(r), None, None));
    if let Some(d) = engine_detail(r) {
        let _ = writeln!(s, "\n{d}.");
    }
    if let Some(c) = &r.checked {
        let _ = writeln!(s, "\nCheck: {c}.");
    }
    s
}

/// The Markdown report of a comparison.
pub fn comparison_markdown(c: &Comparison) -> String {
    let mut s = format!("Command: `{}`\n\n", c.command);
    if let Some(first) = c.medians.first() {
        let _ = writeln!(s, "Configuration: {}.\n", describe(first));
    }
    if let Some(f) = c.fio_iops {
        let _ = writeln!(
            s,
            "fio 4 KiB random reads (O_DIRECT, io_uring) in the same session: {:.0} IOPS at \
             queue depth 32, {:.0} at depth 1.\n",
            f.qd32, f.qd1
        );
    }
    if c.disk_warmed {
        let _ = writeln!(
            s,
            "Each engine's database files were read once (sequentially, O_DIRECT) right before \
             each of its runs: every engine's data equally warm in the disk's cache tier.\n"
        );
    }
    let rounds = c.runs.len() / c.medians.len().max(1);
    let _ = writeln!(
        s,
        "Medians over {rounds} rounds (ratio = first engine ÷ this one):\n"
    );
    s.push_str(&markdown_table(&c.medians, c.medians.first(), c.fio_iops));
    for d in c.medians.iter().filter_map(engine_detail) {
        let _ = writeln!(s, "\n{d}.");
    }
    // The peers with the same trie need the same hashes (same batches): Sprig's count.
    if let Some(counted) = c
        .medians
        .iter()
        .find(|r| r.hashes_needed_per_batch.is_some())
    {
        for r in c
            .medians
            .iter()
            .filter(|r| r.hashes_needed_per_batch.is_none() && r.final_root.is_some())
        {
            if let Some(f) = floor(r, counted) {
                let _ = writeln!(s, "\n{}: {f}.", r.engine.name());
            }
        }
    }
    if let Some(check) = &c.root_check {
        let _ = writeln!(s, "\nCheck: {check}.");
    }
    let _ = writeln!(s, "\nEvery round:\n");
    s.push_str(&markdown_table(&c.runs, None, c.fio_iops));
    s
}

/// Write `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Write `text` to `path`.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The median of `values` by `key` (the lower one of an even count, so that two rounds never
/// report the faster run), if any.
pub fn median_by<T: Clone>(values: &[T], key: impl Fn(&T) -> f64) -> Option<T> {
    let mut v: Vec<&T> = values.iter().collect();
    v.sort_by(|a, b| key(a).total_cmp(&key(b)));
    v.get(v.len().saturating_sub(1) / 2).map(|t| (*t).clone())
}

/// The value at quantile `q` (0..=1) of sorted `values` (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_medians() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(median_by(&[3.0, 1.0, 2.0], |x| *x), Some(2.0));
        assert_eq!(median_by(&[3.0, 1.0], |x| *x), Some(1.0));
    }
}
