//! The engine's own figures at a given size: SSD reads per lookup and per update with the page
//! cache off, RAM per key beyond the cache, bulk-load and open times, disk bytes per key, and
//! disk use after rounds of random updates with the cleaner running; and what overlays cost:
//! memory per changed key, committing a chain of stacked overlays against plain batches.
//!
//! ```sh
//! cargo run --release -p sprig --example engine_figures -- --log2 20 --dir /path/on/ssd
//! ```
//!
//! Keys are 32-byte paths (BLAKE3 of the key's index), values 8 bytes. These are not
//! comparisons with other engines (that is `sprig-bench`'s job); they check the engine against
//! its own design goals.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::{Db, KeyPath, Options, Pending, Stats};
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Args {
    log2: u32,
    dir: PathBuf,
    lookups: u64,
    batch: u64,
    update_batches: u64,
    rounds: u64,
    round_fraction: u64,
    seed: u64,
    retained: usize,
    segment_mib: u64,
    /// `load` builds the database, `measure` opens and measures it; the default does both,
    /// measuring in a fresh process so RSS shows only what opening costs.
    phase: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        log2: 20,
        dir: PathBuf::from("engine-figures-db"),
        lookups: 100_000,
        batch: 10_000,
        update_batches: 10,
        rounds: 10,
        round_fraction: 16,
        seed: 1,
        retained: Options::default().retained_versions,
        segment_mib: Options::default().segment_bytes >> 20,
        phase: "all".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value (see the module doc)"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--log2" => {
                args.log2 = u32::try_from(number()?)
                    .ok()
                    .filter(|n| (4..=30).contains(n))
                    .ok_or("--log2 must be between 4 and 30")?
            }
            "--dir" => args.dir = PathBuf::from(&value),
            "--lookups" => args.lookups = number()?,
            "--batch" => args.batch = number()?.max(1),
            "--update-batches" => args.update_batches = number()?,
            "--rounds" => args.rounds = number()?,
            "--round-fraction" => args.round_fraction = number()?.max(1),
            "--seed" => args.seed = number()?,
            "--retained" => args.retained = usize::try_from(number()?).unwrap_or(usize::MAX),
            "--segment-mib" => args.segment_mib = number()?,
            "--phase" => args.phase = value.clone(),
            other => {
                return Err(format!(
                    "unknown flag {other}; flags: --log2 --dir --lookups --batch \
                     --update-batches --rounds --round-fraction --seed --retained \
                     --segment-mib --phase"
                ))
            }
        }
    }
    Ok(args)
}

/// The resident set size of this process, from /proc/self/status.
fn rss_bytes() -> u64 {
    status_bytes("VmRSS:")
}

/// The peak resident set size of this process so far.
fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// A size in kB from /proc/self/status, in bytes (Linux; 0 elsewhere).
fn status_bytes(field: &str) -> u64 {
    if !cfg!(target_os = "linux") {
        return 0;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Bytes of files under `dir`.
fn disk_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn key(db: &Db, i: u64) -> KeyPath {
    db.key_path(&i.to_le_bytes())
}

fn options(args: &Args) -> Options {
    Options {
        page_cache_bytes: 0,
        direct_io: true,
        retained_versions: args.retained,
        segment_bytes: args.segment_mib << 20,
        ..Options::default()
    }
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// Runs `batches` committed batches of `batch` random updates of existing keys; returns the
/// stats difference and the time taken.
fn update_batches(
    db: &Db,
    rng: &mut ChaCha8Rng,
    n: u64,
    batch: u64,
    batches: u64,
) -> Result<(Stats, Duration), sprig::Error> {
    let before = db.stats();
    let started = Instant::now();
    for _ in 0..batches {
        let keys: Vec<KeyPath> = (0..batch).map(|_| key(db, rng.gen_range(0..n))).collect();
        let mut w = db.begin();
        w.prefetch(&keys)?;
        for k in keys {
            w.put(k, rng.gen::<u64>().to_le_bytes())?;
        }
        db.commit(w.finish()?)?;
    }
    Ok((diff(&db.stats(), &before), started.elapsed()))
}

/// Random updates of existing keys, finished into an overlay on `base` (the head if `None`).
fn finished_batch(
    db: &Db,
    base: Option<&Pending>,
    rng: &mut ChaCha8Rng,
    n: u64,
    batch: u64,
) -> Result<Pending, sprig::Error> {
    let keys: Vec<KeyPath> = (0..batch).map(|_| key(db, rng.gen_range(0..n))).collect();
    let mut w = match base {
        Some(p) => p.begin()?,
        None => db.begin(),
    };
    w.prefetch(&keys)?;
    for k in keys {
        w.put(k, rng.gen::<u64>().to_le_bytes())?;
    }
    w.finish()
}

/// Overlay memory per changed key, and the cost of committing a chain of stacked overlays
/// against committing the same number of plain batches one after another.
fn overlay_costs(db: &Db, rng: &mut ChaCha8Rng, n: u64, batch: u64) -> Outcome {
    const CHAIN: u64 = 4;
    let one = finished_batch(db, None, rng, n, batch)?;
    println!(
        "overlay memory: {:.0} bytes per changed key (batch of {batch} random updates, {} bytes)",
        one.memory_bytes() as f64 / batch as f64,
        one.memory_bytes()
    );
    one.discard();

    let before = db.stats();
    let started = Instant::now();
    for _ in 0..CHAIN {
        db.commit(finished_batch(db, None, rng, n, batch)?)?;
    }
    let plain = started.elapsed();
    let plain_written = diff(&db.stats(), &before).bytes_written;

    let before = db.stats();
    let started = Instant::now();
    let mut top = finished_batch(db, None, rng, n, batch)?;
    for _ in 1..CHAIN {
        top = finished_batch(db, Some(&top), rng, n, batch)?;
    }
    let built = started.elapsed();
    let memory = top.memory_bytes();
    let started = Instant::now();
    db.commit(top)?;
    let committed = started.elapsed();
    let chain_written = diff(&db.stats(), &before).bytes_written;
    println!(
        "{CHAIN} batches of {batch}: plain (finish + commit each) {:.2} s, {:.1} MiB written; \
         stacked overlays {:.2} s to build + {:.2} s to commit the chain, {:.1} MiB written \
         (top overlay holds {:.1} MiB)",
        plain.as_secs_f64(),
        plain_written as f64 / (1 << 20) as f64,
        built.as_secs_f64(),
        committed.as_secs_f64(),
        chain_written as f64 / (1 << 20) as f64,
        memory as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// The counters this example reads, as differences between two snapshots.
fn diff(after: &Stats, before: &Stats) -> Stats {
    Stats {
        lookup_page_reads: after.lookup_page_reads - before.lookup_page_reads,
        batch_page_reads: after.batch_page_reads - before.batch_page_reads,
        bytes_written: after.bytes_written - before.bytes_written,
        ..Stats::default()
    }
}

type Outcome = Result<(), Box<dyn std::error::Error>>;

fn main() -> Outcome {
    let args = parse_args()?;
    match args.phase.as_str() {
        "load" => load(&args),
        "measure" => measure(&args),
        "all" => {
            load(&args)?;
            let status = std::process::Command::new(std::env::current_exe()?)
                .args(std::env::args().skip(1))
                .args(["--phase", "measure"])
                .status()?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("the measuring process failed: {status}").into())
            }
        }
        other => Err(format!("--phase {other}: expected all, load or measure").into()),
    }
}

fn load(args: &Args) -> Outcome {
    let n = 1u64 << args.log2;
    if args.dir.exists() {
        std::fs::remove_dir_all(&args.dir)?;
    }
    println!(
        "engine figures: 2^{} = {n} keys (32-byte paths, 8-byte values), page cache off, \
         direct I/O, {} retained versions, {} MiB segments, dir {}, seed {}",
        args.log2,
        args.retained,
        args.segment_mib,
        args.dir.display(),
        args.seed
    );
    {
        let db = Db::create(&args.dir, options(args))?;
        let started = Instant::now();
        let items = (0..n).map(|i| (key(&db, i), i.to_le_bytes().to_vec()));
        let report = db.bulk_load(items, &mut |_| {})?;
        let took = started.elapsed();
        println!(
            "bulk load: {:.2} s ({:.0} keys/s), {} pages, {:.1} keys/page",
            took.as_secs_f64(),
            rate(n, took),
            report.pages,
            n as f64 / report.pages.max(1) as f64
        );
    }
    let on_disk = disk_bytes(&args.dir);
    println!(
        "disk after load: {:.1} MiB, {:.1} bytes/key",
        on_disk as f64 / (1 << 20) as f64,
        on_disk as f64 / n as f64
    );
    Ok(())
}

fn measure(args: &Args) -> Outcome {
    let n = 1u64 << args.log2;
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    // Open, cold: the RSS growth is the directory (the trie above the pages) and the
    // engine's fixed structures; the page cache is off.
    let rss_before = rss_bytes();
    let started = Instant::now();
    let db = Db::open(&args.dir, options(args))?;
    let open = started.elapsed();
    let rss_open = rss_bytes().saturating_sub(rss_before);
    println!(
        "open: {:.1} ms; RSS growth {:.1} MiB = {:.2} bytes/key",
        open.as_secs_f64() * 1e3,
        rss_open as f64 / (1 << 20) as f64,
        rss_open as f64 / n as f64
    );

    // Lookups of present keys, one at a time (queue depth 1) and in batches (deep queue).
    let before = db.stats();
    let view = db.view();
    let started = Instant::now();
    for _ in 0..args.lookups / 10 {
        let k = key(&db, rng.gen_range(0..n));
        if view.get(&k)?.is_none() {
            return Err("a loaded key is missing".into());
        }
    }
    let serial = started.elapsed();
    let single = diff(&db.stats(), &before);
    let keys: Vec<KeyPath> = (0..args.lookups)
        .map(|_| key(&db, rng.gen_range(0..n)))
        .collect();
    let before = db.stats();
    let started = Instant::now();
    for chunk in keys.chunks(4096) {
        if view.get_many(chunk)?.iter().any(Option::is_none) {
            return Err("a loaded key is missing".into());
        }
    }
    let batched = started.elapsed();
    let many = diff(&db.stats(), &before);
    drop(view);
    println!(
        "lookups: {:.3} SSD reads/lookup one at a time ({:.0}/s), {:.3} in batches of 4096 ({:.0}/s)",
        single.lookup_page_reads as f64 / (args.lookups / 10).max(1) as f64,
        rate(args.lookups / 10, serial),
        many.lookup_page_reads as f64 / args.lookups.max(1) as f64,
        rate(args.lookups, batched)
    );

    // Updates of existing keys in committed batches.
    let (updates, took) = update_batches(&db, &mut rng, n, args.batch, args.update_batches)?;
    let count = args.batch * args.update_batches;
    println!(
        "updates: {:.3} SSD reads/update (batches of {}), {:.0} bytes written/update, \
         {:.0} updates/s with a durable commit per batch; peak RSS so far {:.1} MiB",
        updates.batch_page_reads as f64 / count.max(1) as f64,
        args.batch,
        updates.bytes_written as f64 / count.max(1) as f64,
        rate(count, took),
        peak_rss_bytes() as f64 / (1 << 20) as f64
    );

    overlay_costs(&db, &mut rng, n, args.batch)?;

    // Rounds of random updates with the cleaner running.
    let per_round = (n / args.round_fraction).max(args.batch);
    let batches = per_round.div_ceil(args.batch);
    let started = Instant::now();
    for round in 1..=args.rounds {
        update_batches(&db, &mut rng, n, args.batch, batches)?;
        let s = db.stats();
        println!(
            "round {round}: {} updates; disk {:.1} MiB, live {:.1} MiB, amplification {:.2} \
             (directory files {:.1} MiB); cleaner copied {} pages",
            batches * args.batch,
            s.disk_bytes as f64 / (1 << 20) as f64,
            s.live_bytes as f64 / (1 << 20) as f64,
            s.space_amplification(),
            disk_bytes(&args.dir) as f64 / (1 << 20) as f64,
            s.cleaner_pages_copied
        );
    }
    let s = db.stats();
    println!(
        "after {} rounds ({:.1} s): space amplification {:.2}, {:.1} disk bytes/key, RSS now {:.1} MiB, peak {:.1} MiB",
        args.rounds,
        started.elapsed().as_secs_f64(),
        s.space_amplification(),
        disk_bytes(&args.dir) as f64 / n as f64,
        rss_bytes() as f64 / (1 << 20) as f64,
        peak_rss_bytes() as f64 / (1 << 20) as f64
    );
    Ok(())
}
