//! `demo`: the README's main command. Creates a database in its own directory, bulk loads
//! keys with a progress bar, commits a few batches of mixed changes, proves a sample of keys
//! (present and absent) and verifies every proof with `sprig-core`, and prints the root, the
//! throughput and the statistics. It deletes its directory only if that holds a Sprig
//! database (or nothing).

use super::inspect::{describe, figures};
use super::Ctx;
use crate::cli::DemoArgs;
use crate::error::{CliError, CliResult};
use crate::format::{bytes, grouped, hex, per_second, rate, seconds};
use crate::output::Outcome;
use crate::progress;
use serde_json::json;
use sprig::{Db, KeyPath, Options};
use sprig_core::{MultiProof, PathProof};
use std::path::Path;
use std::time::{Duration, Instant};

/// Keys between progress updates while loading.
const PROGRESS_EVERY: u64 = 4096;
/// The largest number of keys the demo loads.
const MAX_DEMO_KEYS: u64 = 1 << 30;

/// A small deterministic generator (SplitMix64): the demo is the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn key_of(db: &Db, i: u64) -> KeyPath {
    db.key_path(format!("demo-key-{i}").as_bytes())
}

/// A 32-byte value naming the key's number and the round that wrote it.
fn value_of(i: u64, round: u64) -> Vec<u8> {
    [i, round, i ^ round, !i]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect()
}

/// Remove the demo directory if it holds a Sprig database; refuse if it holds anything else.
fn clear(path: &Path) -> CliResult<()> {
    if !path.exists() {
        return Ok(());
    }
    let shown = path.display().to_string();
    let is_db = path.join("MANIFEST").exists();
    let is_empty = std::fs::read_dir(path)
        .map_err(|e| CliError::io("listing", &shown, e))?
        .next()
        .is_none();
    if !is_db && !is_empty {
        return Err(CliError::NotADatabase(path.to_path_buf()));
    }
    std::fs::remove_dir_all(path).map_err(|e| CliError::io("removing", shown, e))
}

/// Peak resident memory of this process, from /proc (Linux; unknown elsewhere), in bytes.
fn peak_rss_bytes() -> Option<u64> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `demo`.
pub fn demo(ctx: &Ctx, args: &DemoArgs) -> CliResult<Outcome> {
    if args.keys == 0 || args.keys > MAX_DEMO_KEYS {
        return Err(CliError::Usage(format!(
            "--keys must be between 1 and {MAX_DEMO_KEYS}"
        )));
    }
    let mut lines = Vec::new();
    let mut say = |line: String| {
        if ctx.progress {
            eprintln!("{line}");
        }
        lines.push(line);
    };
    clear(&args.path)?;
    let options = Options {
        hasher: Some(args.hasher.into()),
        ..ctx.options.clone()
    };
    let db = Db::create(&args.path, options)?;
    let hasher = db.hasher();
    say(format!(
        "demo database at {} (hasher {})",
        args.path.display(),
        hasher.name()
    ));

    // 1. Bulk load.
    let start = Instant::now();
    let bar = progress::bar(ctx.progress, args.keys, "loading", false);
    let feed = bar.clone();
    let items = (0..args.keys).map(|i| {
        if i % PROGRESS_EVERY == 0 {
            feed.set_position(i);
        }
        (key_of(&db, i), value_of(i, 0))
    });
    let loaded = db.bulk_load(items, &mut progress::follow_bulk(&bar))?;
    bar.finish_and_clear();
    let load_time = start.elapsed();
    say(format!(
        "loaded {} keys in {} ({}), {} written",
        grouped(loaded.entries),
        seconds(load_time),
        rate(loaded.entries, load_time),
        bytes(loaded.bytes_written)
    ));

    // 2. Committed batches: 70% updates, 20% inserts, 10% deletes.
    let mut rng = SplitMix(0x5EED);
    let mut next_key = args.keys;
    let mut batch_time = Duration::ZERO;
    let mut slowest = Duration::ZERO;
    let bar = progress::bar(ctx.progress, args.batches, "batches", false);
    for round in 1..=args.batches {
        let begun = Instant::now();
        let mut batch = db.begin();
        for _ in 0..args.batch_size {
            let roll = rng.below(10);
            if roll < 7 {
                let i = rng.below(next_key);
                batch.put(key_of(&db, i), value_of(i, round))?;
            } else if roll < 9 {
                batch.put(key_of(&db, next_key), value_of(next_key, round))?;
                next_key += 1;
            } else {
                batch.delete(key_of(&db, rng.below(next_key)));
            }
        }
        let info = db.commit(batch.finish()?)?;
        let took = begun.elapsed();
        batch_time += took;
        slowest = slowest.max(took);
        bar.inc(1);
        bar.set_message(format!("v{}", info.seq));
    }
    bar.finish_and_clear();
    let changes = args.batches * args.batch_size;
    if args.batches > 0 {
        say(format!(
            "committed {} batches of {} changes in {} ({} changes, slowest commit {})",
            args.batches,
            grouped(args.batch_size),
            seconds(batch_time),
            rate(changes, batch_time),
            seconds(slowest)
        ));
    }

    // 3. Prove and verify a sample, present and absent keys, with sprig-core alone.
    let start = Instant::now();
    let view = db.view();
    let root = view.root();
    let mut sample: Vec<KeyPath> = (0..args.samples)
        .map(|_| key_of(&db, rng.below(next_key)))
        .collect();
    sample.extend((0..args.samples.div_ceil(10)).map(|i| key_of(&db, u64::MAX - i)));
    let values = view.get_many(&sample)?;
    let present = values.iter().filter(|v| v.is_some()).count();
    let refused = |e: sprig_core::ProofError| CliError::Verify(e.to_string());
    for (key, value) in sample.iter().zip(&values) {
        let encoded = view.path_proof(key)?.encode(hasher);
        PathProof::decode(&encoded, hasher)
            .map_err(refused)?
            .verify_value(hasher, &root, key, value.as_deref())
            .map_err(refused)?;
    }
    let encoded = view.multi_proof(&sample)?.encode(hasher);
    let verified = MultiProof::decode(&encoded, hasher)
        .map_err(refused)?
        .verify(hasher, &root)
        .map_err(refused)?;
    for (key, value) in sample.iter().zip(&values) {
        if !verified
            .lookup(key)
            .map_err(refused)?
            .matches(hasher, value.as_deref())
        {
            return Err(CliError::Verify(format!(
                "the multi-proof disagrees with the database about {}",
                hex(key)
            )));
        }
    }
    let prove_time = start.elapsed();
    say(format!(
        "proved and verified {} keys ({present} present, {} absent) one by one and in one \
         multi-proof of {} bytes, in {}",
        sample.len(),
        sample.len() - present,
        grouped(encoded.len() as u64),
        seconds(prove_time)
    ));

    // 4. Root and statistics.
    let mut f = figures(&db)?;
    let rss = peak_rss_bytes();
    let stats_text = describe(&f);
    if let Some(obj) = f.as_object_mut() {
        obj.insert("path".into(), json!(args.path.display().to_string()));
        obj.insert("load_seconds".into(), json!(load_time.as_secs_f64()));
        obj.insert(
            "load_keys_per_second".into(),
            json!(per_second(loaded.entries, load_time)),
        );
        obj.insert("batches".into(), json!(args.batches));
        obj.insert("batch_size".into(), json!(args.batch_size));
        obj.insert("batch_seconds".into(), json!(batch_time.as_secs_f64()));
        obj.insert(
            "batch_changes_per_second".into(),
            json!(per_second(changes, batch_time)),
        );
        obj.insert(
            "slowest_commit_seconds".into(),
            json!(slowest.as_secs_f64()),
        );
        obj.insert("proofs_verified".into(), json!(sample.len()));
        obj.insert("prove_seconds".into(), json!(prove_time.as_secs_f64()));
        obj.insert("peak_rss_bytes".into(), json!(rss));
    }
    lines.push(format!("root {}", hex(&root)));
    lines.push(stats_text);
    if let Some(rss) = rss {
        lines.push(format!("peak RSS             {}", bytes(rss)));
    }
    let human = if ctx.progress {
        // The step lines went to stderr as they happened; stdout gets the summary.
        lines.split_off(
            lines
                .len()
                .saturating_sub(if rss.is_some() { 3 } else { 2 }),
        )
    } else {
        lines
    };
    Ok(Outcome::ok(f, human.join("\n")))
}
