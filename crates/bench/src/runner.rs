//! The two phases: `create` bulk-loads a database and records the workload state beside it;
//! `run` generates batches, drives one engine through them, times them, reads the counters
//! and, with `--check`, replays the same operations on the reference model. The runner owns
//! the meaning of operations; engines only read, write and commit.

use crate::cli::{EngineArgs, EngineKind, RunShapeArgs, WorkloadKind};
use crate::engine::{self, EngineCounters, Layout, Load, Writes};
use crate::report::{quantile, RunResult};
use crate::sys;
use crate::workload::{
    add_balance, add_balance_in, initial_entries, Generator, Op, RunShape, WorkloadState,
};
use anyhow::{bail, ensure, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sprig::core::{Hasher, ReferenceModel};
use sprig::hex;
use sprig::{KeyPath, Node};
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest database `--check` replays on the reference model (it recomputes the root
/// from every entry after each batch).
pub const MODEL_MAX_ENTRIES: u64 = 1 << 17;

fn bar(len: u64, what: &str, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if quiet {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta}) {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar
}

/// Read the workload state of a database.
pub fn load_state(layout: &Layout) -> Result<WorkloadState> {
    let path = layout.state();
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (was the database made with `sprig-bench create`?)",
            path.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn save_state(layout: &Layout, state: &WorkloadState) -> Result<()> {
    let tmp = layout.root.join("state.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(state)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, layout.state()).context("replacing the workload state")
}

/// Create the database of `engine` under `dir`, replacing what is there.
pub fn create(
    engine: EngineKind,
    dir: &Path,
    workload: WorkloadKind,
    entries: u64,
    seed: u64,
    args: &EngineArgs,
) -> Result<WorkloadState> {
    let layout = Layout::new(dir, engine);
    if layout.root.exists() {
        std::fs::remove_dir_all(&layout.root)
            .with_context(|| format!("removing the old {}", layout.root.display()))?;
    }
    std::fs::create_dir_all(&layout.root)
        .with_context(|| format!("creating {}", layout.root.display()))?;
    let progress = bar(entries, &format!("create {}", engine.name()), false);
    let started = Instant::now();
    let mut items = initial_entries(workload, seed, entries);
    let root = engine::create(
        engine,
        Load {
            path: &layout.db(),
            args,
            count: entries,
            entries: &mut items,
            progress: &progress,
        },
    )?;
    progress.finish_with_message(format!("done in {:.1} s", started.elapsed().as_secs_f64()));
    let mut state = WorkloadState::new(workload, entries, seed);
    state.created_root = root.map(|r| hex(&r));
    save_state(&layout, &state)?;
    eprintln!(
        "created {} {} entries for {} in {:.1} s; {:.1} disk bytes per entry; root {}",
        engine.name(),
        entries,
        workload.name(),
        started.elapsed().as_secs_f64(),
        sys::disk_bytes(&layout.db()) as f64 / entries.max(1) as f64,
        state.created_root.as_deref().unwrap_or("(none)")
    );
    Ok(state)
}

/// The harness's maps of key paths: a fast seeded hasher, the same for every engine (the
/// harness's own work is timed with each engine's batches, so it should cost little).
type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// The state a batch executes against: one map holding each key's value, read from the engine
/// at the batch's start or written by the batch since, and whether the batch wrote it. One map
/// (not the values read beside a map of the writes) so that a transfer leg looks its key up
/// once and updates it in place: this work is timed with every engine's batches.
struct BatchState {
    values: Map<KeyPath, (Option<Vec<u8>>, bool)>,
}

impl BatchState {
    /// The state before any write: `keys` hold `values` (in order); room for `more` keys.
    fn read(keys: Vec<KeyPath>, values: Vec<Option<Vec<u8>>>, more: usize) -> BatchState {
        let mut map = Map::with_capacity_and_hasher(keys.len() + more, Default::default());
        map.extend(keys.into_iter().zip(values).map(|(k, v)| (k, (v, false))));
        BatchState { values: map }
    }

    /// The keys written, with their last values, sorted by key.
    fn writes(self) -> Writes {
        let mut writes: Writes = self
            .values
            .into_iter()
            .filter(|(_, (_, written))| *written)
            .map(|(k, (v, _))| (k, v))
            .collect();
        writes.sort_unstable_by_key(|w| w.0);
        writes
    }
}

/// Somewhere operations can run: a batch over an engine, or the reference model.
trait State {
    fn get(&self, key: &KeyPath) -> Option<&[u8]>;
    fn set(&mut self, key: KeyPath, value: Option<Vec<u8>>);

    /// A transfer leg: the balance at `key` (absent: 0) changed by `delta`.
    fn add(&mut self, key: KeyPath, delta: i64) {
        let v = add_balance(self.get(&key), delta);
        self.set(key, Some(v));
    }
}

impl State for BatchState {
    fn get(&self, key: &KeyPath) -> Option<&[u8]> {
        self.values.get(key).and_then(|(v, _)| v.as_deref())
    }

    fn set(&mut self, key: KeyPath, value: Option<Vec<u8>>) {
        self.values.insert(key, (value, true));
    }

    /// One lookup, the balance changed where it lies.
    fn add(&mut self, key: KeyPath, delta: i64) {
        let (value, written) = self.values.entry(key).or_insert((None, false));
        add_balance_in(value, delta);
        *written = true;
    }
}

impl State for ReferenceModel {
    fn get(&self, key: &KeyPath) -> Option<&[u8]> {
        ReferenceModel::get(self, key)
    }

    fn set(&mut self, key: KeyPath, value: Option<Vec<u8>>) {
        match value {
            Some(v) => {
                self.insert(key, v);
            }
            None => {
                self.remove(&key);
            }
        }
    }
}

/// Run `ops` in order on `state`; every `Read` result goes to `log`.
fn execute(ops: &[Op], state: &mut impl State, log: &mut Vec<Option<Vec<u8>>>) {
    for op in ops {
        match op {
            Op::Read(k) => log.push(state.get(k).map(<[u8]>::to_vec)),
            Op::Add(k, delta) => state.add(*k, *delta),
            Op::Put(k, v) => state.set(*k, Some(v.clone())),
            Op::Delete(k) => state.set(*k, None),
        }
    }
}

/// The keys a batch reads before it can execute, each once, in first-use order.
fn keys_read(ops: &[Op]) -> Vec<KeyPath> {
    let mut seen = Set::default();
    ops.iter()
        .filter_map(|op| match op {
            Op::Read(k) | Op::Add(k, _) => Some(*k),
            Op::Put(..) | Op::Delete(_) => None,
        })
        .filter(|k| seen.insert(*k))
        .collect()
}

/// A running digest: each step hashes the previous digest with new bytes.
struct Digest(Node);

impl Digest {
    fn push(&mut self, bytes: &[u8]) {
        let mut buf = Vec::with_capacity(33 + bytes.len());
        buf.extend_from_slice(&self.0);
        buf.extend_from_slice(bytes);
        self.0 = Hasher::Blake3.hash_value(&buf);
    }

    fn push_read(&mut self, value: &Option<Vec<u8>>) {
        match value {
            Some(v) => {
                let mut b = vec![1u8];
                b.extend_from_slice(v);
                self.push(&b);
            }
            None => self.push(&[0]),
        }
    }
}

/// Run `shape.batches` batches of the workload on `engine`'s database under `dir`.
pub fn run(
    engine: EngineKind,
    dir: &Path,
    shape: &RunShapeArgs,
    args: &EngineArgs,
    quiet: bool,
) -> Result<RunResult> {
    let layout = Layout::new(dir, engine);
    let state = load_state(&layout)?;
    let workload = state.workload;
    ensure!(
        !args.pipelined || engine == EngineKind::Sprig,
        "--pipelined is Sprig's mode (stacked overlays); the peers run serially"
    );
    // Opened before the reference model is built, so the RSS figures are the engine's.
    let opening = Instant::now();
    let mut db = engine::open(engine, &layout.db(), args)?;
    let open_seconds = opening.elapsed().as_secs_f64();
    let (rss_after_open_bytes, peak_rss_after_open_bytes) =
        (sys::rss_bytes(), sys::peak_rss_bytes());
    let mut model = if shape.check {
        if state.batches_done != 0 || state.entries > MODEL_MAX_ENTRIES {
            bail!(
                "--check replays on the reference model only a database fresh from `create` \
                 with at most {MODEL_MAX_ENTRIES} entries (this one: {} entries, {} batches \
                 run); for larger ones use `compare --check`, which compares with NOMT's roots",
                state.entries,
                state.batches_done
            );
        }
        let mut m = ReferenceModel::new(Hasher::Blake3);
        for (k, v) in initial_entries(workload, state.seed, state.entries) {
            m.insert(k, v);
        }
        if let Some(created) = &state.created_root {
            ensure!(
                *created == hex(&m.root()),
                "the root after create differs from the reference model's"
            );
        }
        Some(m)
    } else {
        None
    };
    let batch_size = shape.batch_size.unwrap_or(workload.default_batch());
    ensure!(batch_size > 0, "--batch-size must be positive");
    let run_shape = RunShape {
        fresh_pct: shape.fresh,
        batch: batch_size,
    };
    let first_batch = state.batches_done;
    let entries_created = state.entries;
    let seed = state.seed;
    let mut generator = Generator::new(state, run_shape);
    let progress = bar(shape.batches, &format!("run {}", engine.name()), quiet);

    // Zeros where /proc/self/io is unavailable (not Linux): the report then shows 0 reads.
    let io_before = sys::proc_io().unwrap_or_default();
    let counters_before = db.counters();
    let mut batch_ms = Vec::with_capacity(shape.batches as usize);
    let mut read_total = Duration::ZERO;
    let mut commit_total = Duration::ZERO;
    let mut commit_cpu = Duration::ZERO;
    let mut read_phase_bytes = 0u64;
    let mut timed = Duration::ZERO;
    let mut roots = Digest([0; 32]);
    let mut reads = Digest([0; 32]);
    let mut last_root = None;
    let units_per_batch = workload.units_per_batch(batch_size);
    for b in 0..shape.batches {
        let ops = generator.next_batch();
        let keys = keys_read(&ops);
        let io0 = sys::proc_io().unwrap_or_default();
        let t0 = Instant::now();
        let values = db.read(&keys)?;
        let t1 = Instant::now();
        read_phase_bytes += sys::proc_io()
            .unwrap_or_default()
            .read_bytes
            .saturating_sub(io0.read_bytes);
        // Sized up front for the keys it may write without reading them (growing it rehashes
        // every entry again); a transfer leg's key is among those read.
        let blind = ops
            .iter()
            .filter(|op| matches!(op, Op::Put(..) | Op::Delete(_)))
            .count();
        let mut batch = BatchState::read(keys, values, blind);
        let mut log = Vec::new();
        execute(&ops, &mut batch, &mut log);
        let writes = batch.writes();
        let cpu0 = sys::process_cpu();
        let root = db.commit(writes)?;
        let t2 = Instant::now();
        commit_cpu += sys::process_cpu().saturating_sub(cpu0);
        read_total += t1 - t0;
        commit_total += t2 - t1;
        timed += t2 - t0;
        batch_ms.push((t2 - t0).as_secs_f64() * 1e3);
        for v in &log {
            reads.push_read(v);
        }
        if let Some(r) = root {
            roots.push(&r);
            last_root = Some(r);
        }
        if let Some(m) = model.as_mut() {
            let mut expected = Vec::new();
            execute(&ops, m, &mut expected);
            ensure!(
                log == expected,
                "batch {b}: lookups differ from the reference model"
            );
            if let Some(r) = root {
                ensure!(
                    r == m.root(),
                    "batch {b}: root {} differs from the reference model's {}",
                    hex(&r),
                    hex(&m.root())
                );
            }
        }
        progress.inc(1);
        progress.set_message(format!(
            "{:.0} {}/s",
            (b + 1) as f64 * units_per_batch as f64 / timed.as_secs_f64().max(1e-9),
            workload.unit()
        ));
    }
    let t = Instant::now();
    db.flush()?;
    timed += t.elapsed();
    progress.finish();
    let io_after = sys::proc_io().unwrap_or_default();
    let counters_after = db.counters();
    let io_backend = db.io_backend();
    drop(db);
    let new_state = generator.state().clone();
    save_state(&layout, &new_state)?;

    let units = units_per_batch * shape.batches;
    let per_unit = |x: u64| x as f64 / units.max(1) as f64;
    let counted = |field: fn(&EngineCounters) -> u64| {
        counters_before
            .zip(counters_after)
            .map(|(a, b)| per_unit(field(&b) - field(&a)))
    };
    batch_ms.sort_by(f64::total_cmp);
    let disk = sys::disk_bytes(&layout.db());
    let (key_bytes, value_bytes) = workload.sizes();
    let n = shape.batches.max(1) as f64;
    // An engine counter's growth over the run, per batch.
    let per_batch = |field: fn(&EngineCounters) -> u64| {
        counters_before
            .zip(counters_after)
            .map(|(a, b)| (field(&b) - field(&a)) as f64 / n)
    };
    Ok(RunResult {
        engine,
        workload,
        entries_created,
        entries_after: new_state.live(),
        seed,
        batches: shape.batches,
        first_batch,
        batch_size,
        fresh_pct: shape.fresh,
        key_bytes,
        value_bytes,
        unit: workload.unit().to_string(),
        units,
        seconds: timed.as_secs_f64(),
        units_per_sec: units as f64 / timed.as_secs_f64().max(1e-9),
        batch_ms_p50: quantile(&batch_ms, 0.5),
        batch_ms_p99: quantile(&batch_ms, 0.99),
        batch_ms_max: batch_ms.iter().copied().reduce(f64::max),
        read_ms_mean: read_total.as_secs_f64() * 1e3 / n,
        commit_ms_mean: commit_total.as_secs_f64() * 1e3 / n,
        finish_ms_mean: per_batch(|c| c.finish_nanos).map(|ns| ns / 1e6),
        durable_ms_mean: per_batch(|c| c.durable_nanos).map(|ns| ns / 1e6),
        steps_ms: counters_before
            .zip(counters_after)
            .map(|(a, b)| steps_ms(&a.phases, &b.phases, n))
            .filter(|steps| steps.values().any(|ms| *ms > 0.0)),
        commit_cpu_ms_mean: Some(commit_cpu.as_secs_f64() * 1e3 / n),
        read_phase_reads_per_sec: Some(
            read_phase_bytes as f64 / 4096.0 / read_total.as_secs_f64().max(1e-9),
        ),
        hashes_needed_per_batch: per_batch(|c| c.hashes_needed).filter(|h| *h > 0.0),
        ns_per_hash: Some(sys::ns_per_hash()),
        ssd_reads_per_unit: counted(|c| c.ssd_reads),
        read_4k_per_unit: per_unit(io_after.read_bytes - io_before.read_bytes) / 4096.0,
        written_bytes_per_unit: per_unit(io_after.write_bytes - io_before.write_bytes),
        engine_written_bytes_per_unit: counted(|c| c.bytes_written),
        pages_written_per_unit: counted(|c| c.pages_written),
        cleaner_pages_per_unit: counted(|c| c.cleaner_pages),
        space: counters_after.map(|c| c.space),
        peak_rss_bytes: sys::peak_rss_bytes(),
        open_seconds: Some(open_seconds),
        rss_after_open_bytes,
        peak_rss_after_open_bytes,
        cgroup_peak_bytes: None,
        mem_cap_mb: None,
        disk_bytes: disk,
        disk_bytes_per_entry: disk as f64 / new_state.live().max(1) as f64,
        config: args.clone(),
        final_root: last_root.map(|r| hex(&r)),
        roots_digest: last_root.map(|_| hex(&roots.0)),
        reads_digest: hex(&reads.0),
        checked: model.map(|_| {
            format!(
                "every lookup and every root of {} batches equal the reference model's",
                shape.batches
            )
        }),
        io_backend,
    })
}

/// The mean time a batch spent in each of Sprig's steps of finishing and committing it, ms,
/// by step name, from the engine's counts before and after the batches.
fn steps_ms(
    before: &sprig::PhaseTimes,
    after: &sprig::PhaseTimes,
    batches: f64,
) -> std::collections::BTreeMap<String, f64> {
    after
        .iter()
        .map(|(p, took)| {
            let took = took.saturating_sub(before.of(p));
            (p.name().to_string(), took.as_secs_f64() * 1e3 / batches)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch executed on the values read from an engine gives the lookups the reference
    /// model gives, and its writes (only the keys it wrote) carry the model's state: reads
    /// before and after writes, legs on present, absent, malformed and deleted balances, blind
    /// puts and deletes, keys only read.
    #[test]
    fn a_batch_executes_as_the_reference_model_does() {
        let key = |i: u8| [i; 32];
        let mut model = ReferenceModel::new(Hasher::Blake3);
        model.insert(key(1), 10u64.to_le_bytes().to_vec());
        model.insert(key(2), vec![7, 7, 7]);
        model.insert(key(3), 5u64.to_le_bytes().to_vec());
        model.insert(key(8), vec![8]);
        let ops = vec![
            Op::Read(key(8)),
            Op::Read(key(7)),
            Op::Read(key(1)),
            Op::Add(key(1), -4),
            Op::Add(key(1), 1),
            Op::Add(key(2), 3),
            Op::Add(key(4), 6),
            Op::Read(key(4)),
            Op::Delete(key(3)),
            Op::Add(key(3), 2),
            Op::Put(key(5), vec![9]),
            Op::Read(key(5)),
            Op::Delete(key(6)),
            Op::Read(key(2)),
        ];
        let keys = keys_read(&ops);
        let values: Vec<Option<Vec<u8>>> = keys
            .iter()
            .map(|k| model.get(k).map(<[u8]>::to_vec))
            .collect();
        let mut batch = BatchState::read(keys, values, 3);
        let (mut got, mut expected) = (Vec::new(), Vec::new());
        execute(&ops, &mut batch, &mut got);
        let writes = batch.writes();
        execute(&ops, &mut model, &mut expected);
        assert_eq!(got, expected);
        let written: Vec<KeyPath> = writes.iter().map(|w| w.0).collect();
        assert_eq!(written, [1, 2, 3, 4, 5, 6].map(key), "written keys, sorted");
        for (k, v) in writes {
            assert_eq!(v.as_deref(), model.get(&k), "key {}", k[0]);
        }
    }
}
