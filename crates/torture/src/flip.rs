//! Bit-flip torture on a real on-disk database: build a database holding every kind of file
//! (segments with pages and value-log records, a commit log with records after the last
//! checkpoint, checkpoints, the manifest), then over and over flip one random bit in a random
//! region of a copy — a live page, a live value record, anywhere in a segment, the commit log,
//! a checkpoint, the manifest — open the copy and read everything back.
//!
//! Each flip ends as *detected* (the open or a read fails with a typed corruption error),
//! *harmless* (everything read is exactly the committed state: the flip hit bytes nothing
//! live reads, or a commit record repaired from its second copy), or *undetected* (a wrong
//! value, root or proof served without an error). Undetected flips, panics and errors not
//! typed as corruption fail the run.

use crate::error::TortureError;
use crate::verify::compare;
use crate::workload::{db_options, Shape};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::{IoBackend, BLOCK_BYTES};
use sprig::log::checkpoint::{parse_checkpoint_file_name, Checkpoint};
use sprig::log::segments::{loc_offset, loc_segment, parse_segment_file_name, segment_file_name};
use sprig::log::wal::parse_wal_file_name;
use sprig::state::arena::Arena;
use sprig::state::directory::PageLoc;
use sprig::{Db, Hasher, KeyPath, Options};
use sprig_core::ReferenceModel;
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Random batches committed to build the database.
const BUILD_BATCHES: usize = 24;
/// Small commits after the last checkpoint, so the commit log holds records.
const TAIL_COMMITS: usize = 3;
/// Progress is printed at most this often.
const PROGRESS_EVERY_SECS: u64 = 10;

/// Where a flip lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Region {
    /// A page the latest version reads.
    Page,
    /// A value record the latest version reads.
    ValueRecord,
    /// Anywhere in a segment file (live, superseded or unused blocks).
    Segment,
    /// A commit log file.
    CommitLog,
    /// A checkpoint file.
    Checkpoint,
    /// The manifest.
    Manifest,
}

impl Region {
    const ALL: [Region; 6] = [
        Region::Page,
        Region::ValueRecord,
        Region::Segment,
        Region::CommitLog,
        Region::Checkpoint,
        Region::Manifest,
    ];

    fn name(self) -> &'static str {
        match self {
            Region::Page => "page",
            Region::ValueRecord => "value record",
            Region::Segment => "segment (anywhere)",
            Region::CommitLog => "commit log",
            Region::Checkpoint => "checkpoint",
            Region::Manifest => "manifest",
        }
    }
}

/// What a flip run is asked to do.
#[derive(Debug, Clone)]
pub struct FlipConfig {
    /// The work directory.
    pub dir: PathBuf,
    /// The seed.
    pub seed: u64,
    /// Flips to make.
    pub flips: u64,
    /// The workload that builds the database.
    pub shape: Shape,
}

/// The figures of a flip run, per region: detected, harmless, undetected.
#[derive(Debug, Default)]
pub struct FlipSummary {
    /// Outcomes by region.
    pub by_region: BTreeMap<Region, [u64; 3]>,
    /// Flips whose open or reads panicked.
    pub panics: u64,
    /// Flips that ended in an error not typed as corruption.
    pub untyped_errors: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl FlipSummary {
    fn total(&self, i: usize) -> u64 {
        self.by_region.values().map(|c| c[i]).sum()
    }

    /// Flips made.
    pub fn flips(&self) -> u64 {
        self.total(0) + self.total(1) + self.total(2) + self.panics + self.untyped_errors
    }

    /// Whether no flip was served or crashed the reader.
    pub fn ok(&self) -> bool {
        self.total(2) == 0 && self.panics == 0 && self.untyped_errors == 0
    }

    /// The closing report.
    pub fn print(&self) {
        println!("summary:");
        println!(
            "  flips {}: detected {}, harmless {}, undetected {}, panics {}, untyped errors {}",
            self.flips(),
            self.total(0),
            self.total(1),
            self.total(2),
            self.panics,
            self.untyped_errors
        );
        for (region, [d, h, u]) in &self.by_region {
            println!(
                "    {}: detected {d}, harmless {h}, undetected {u}",
                region.name()
            );
        }
        println!("  elapsed {:.1} s", self.elapsed.as_secs_f64());
        println!("  result: {}", if self.ok() { "PASS" } else { "FAIL" });
    }
}

/// Live spans by region: (file, offset, length).
type LiveSpans = BTreeMap<Region, Vec<(String, u64, u64)>>;

/// The database to flip bits in, and what it holds.
struct Base {
    dir: PathBuf,
    model: ReferenceModel,
    seq: u64,
    files: Vec<String>,
    /// Live pages and value records.
    live: LiveSpans,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> TortureError {
    TortureError::io(format!("{what} {}", path.display()), e)
}

fn commit(
    db: &Db,
    model: &mut ReferenceModel,
    ops: Vec<(KeyPath, Option<Vec<u8>>)>,
) -> Result<(), TortureError> {
    let mut batch = db.begin();
    for (key, value) in &ops {
        match value {
            Some(v) => batch.put(*key, v.clone())?,
            None => batch.delete(*key),
        }
    }
    model.apply(ops);
    let info = db.commit(batch.finish()?)?;
    if info.root != model.root() {
        return Err(TortureError::Log(
            "building the flip database: the engine's root differs from the model's".into(),
        ));
    }
    Ok(())
}

/// Build the base database: every key, random batches with value-log values, a checkpoint,
/// a clean, then a few commits left in the log.
fn build(dir: &Path, shape: &Shape, rng: &mut ChaCha8Rng) -> Result<Base, TortureError> {
    let db = Db::create(dir, db_options())?;
    let mut model = ReferenceModel::new(Hasher::Blake3);
    let all: Vec<_> = (0..shape.keys)
        .map(|i| (shape.key(i), Some(shape.value(rng))))
        .collect();
    commit(&db, &mut model, all)?;
    for i in 0..BUILD_BATCHES {
        commit(&db, &mut model, shape.batch(rng))?;
        if i == BUILD_BATCHES / 2 {
            db.checkpoint()?;
        }
    }
    db.clean()?;
    db.checkpoint()?;
    for _ in 0..TAIL_COMMITS {
        let ops = (0..4)
            .map(|_| (shape.random_key(rng), Some(shape.value(rng))))
            .collect();
        commit(&db, &mut model, ops)?;
    }
    let seq = db.seq();
    drop(db);
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| io("listing", dir, e))?
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|n| n != "LOCK")
        .collect();
    files.sort();
    let live = live_regions(dir, seq)?;
    Ok(Base {
        dir: dir.to_path_buf(),
        model,
        seq,
        files,
        live,
    })
}

/// Copy the database at `from` to `to`: hard links for files the open never writes, copies
/// for the commit logs (an open may truncate a torn tail) and for `private`.
fn copy_db(from: &Path, to: &Path, files: &[String], private: &str) -> Result<(), TortureError> {
    if to.exists() {
        std::fs::remove_dir_all(to).map_err(|e| io("removing", to, e))?;
    }
    std::fs::create_dir_all(to).map_err(|e| io("creating", to, e))?;
    for name in files {
        let (src, dst) = (from.join(name), to.join(name));
        if name == private || parse_wal_file_name(name).is_some() {
            std::fs::copy(&src, &dst).map_err(|e| io("copying", &src, e))?;
        } else {
            std::fs::hard_link(&src, &dst).map_err(|e| io("linking", &src, e))?;
        }
    }
    Ok(())
}

/// The pages and value records the latest version reads, from a checkpoint of it written to
/// a scratch copy (with one retained version, a checkpoint is of the latest).
fn live_regions(base: &Path, seq: u64) -> Result<LiveSpans, TortureError> {
    let scratch = base.with_extension("live");
    let files: Vec<String> = std::fs::read_dir(base)
        .map_err(|e| io("listing", base, e))?
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|n| n != "LOCK")
        .collect();
    // Checkpointing writes new files only; every existing one is copied to stay safe.
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch).map_err(|e| io("removing", &scratch, e))?;
    }
    std::fs::create_dir_all(&scratch).map_err(|e| io("creating", &scratch, e))?;
    for name in &files {
        std::fs::copy(base.join(name), scratch.join(name))
            .map_err(|e| io("copying", &base.join(name), e))?;
    }
    let single = Options {
        retained_versions: 1,
        ..db_options()
    };
    let db = Db::open(&scratch, single)?;
    db.checkpoint()?;
    drop(db);
    let (storage, _) = sprig::io::open_directory(&scratch, IoBackend::Posix, false)?;
    let newest = storage
        .list()
        .map_err(|e| io("listing", &scratch, e))?
        .iter()
        .filter_map(|n| parse_checkpoint_file_name(n))
        .max();
    if newest != Some(seq) {
        return Err(TortureError::Log(format!(
            "the scratch checkpoint is at {newest:?}, not the latest commit {seq}"
        )));
    }
    let cp = Checkpoint::load(storage.as_ref(), seq, &Arena::new(), Hasher::Blake3)?;
    let mut live = LiveSpans::new();
    for (_, dir) in cp.tables.dirs() {
        dir.for_each_page(|_, r| {
            if let PageLoc::Disk(l) = r.loc {
                live.entry(Region::Page).or_default().push((
                    segment_file_name(loc_segment(l)),
                    loc_offset(l),
                    BLOCK_BYTES as u64,
                ));
            }
        });
    }
    for (l, (blocks, _, _)) in &cp.table.values {
        live.entry(Region::ValueRecord).or_default().push((
            segment_file_name(loc_segment(*l)),
            loc_offset(*l),
            u64::from(*blocks) * BLOCK_BYTES as u64,
        ));
    }
    drop(storage);
    std::fs::remove_dir_all(&scratch).map_err(|e| io("removing", &scratch, e))?;
    Ok(live)
}

impl Base {
    /// Files of one kind with at least one byte.
    fn files_where(&self, kind: impl Fn(&str) -> bool) -> Vec<(String, u64)> {
        self.files
            .iter()
            .filter(|n| kind(n))
            .filter_map(|n| {
                let len = std::fs::metadata(self.dir.join(n)).ok()?.len();
                (len > 0).then(|| (n.clone(), len))
            })
            .collect()
    }

    /// A random place in `region`: (file, byte offset), or `None` if the database has none.
    fn pick(&self, region: Region, rng: &mut ChaCha8Rng) -> Option<(String, u64)> {
        let in_file = |files: Vec<(String, u64)>, rng: &mut ChaCha8Rng| {
            let (name, len) = files.get(rng.gen_range(0..files.len().max(1)))?.clone();
            Some((name, rng.gen_range(0..len)))
        };
        match region {
            Region::Page | Region::ValueRecord => {
                let spans = self.live.get(&region)?;
                let (name, at, len) = spans.get(rng.gen_range(0..spans.len().max(1)))?;
                Some((name.clone(), at + rng.gen_range(0..*len)))
            }
            Region::Segment => in_file(
                self.files_where(|n| parse_segment_file_name(n).is_some()),
                rng,
            ),
            Region::CommitLog => {
                in_file(self.files_where(|n| parse_wal_file_name(n).is_some()), rng)
            }
            Region::Checkpoint => in_file(
                self.files_where(|n| parse_checkpoint_file_name(n).is_some()),
                rng,
            ),
            Region::Manifest => in_file(self.files_where(|n| n == "MANIFEST"), rng),
        }
    }
}

fn flip_bit(path: &Path, offset: u64, bit: u8) -> Result<(), TortureError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| io("opening", path, e))?;
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, offset)
        .map_err(|e| io("reading", path, e))?;
    byte[0] ^= 1 << bit;
    file.write_all_at(&byte, offset)
        .map_err(|e| io("writing", path, e))
}

/// Open the copy and read everything; `Ok(None)` when exact.
fn read_back(dir: &Path, base: &Base, probe: &[KeyPath]) -> Result<Option<String>, sprig::Error> {
    let db = Db::open(dir, db_options())?;
    if db.seq() != base.seq || db.root() != base.model.root() {
        return Ok(Some(format!(
            "opened at seq {} (expected {}) with root differing: {}",
            db.seq(),
            base.seq,
            db.root() != base.model.root()
        )));
    }
    compare(&db, &base.model, probe, true)
}

/// Run the bit-flip torture.
pub fn run(cfg: &FlipConfig) -> Result<FlipSummary, TortureError> {
    cfg.shape.validate()?;
    let base_dir = cfg.dir.join("flip-base");
    if base_dir.exists() {
        return Err(TortureError::Usage(format!(
            "{} already exists: give a new work directory",
            base_dir.display()
        )));
    }
    std::fs::create_dir_all(&cfg.dir).map_err(|e| io("creating", &cfg.dir, e))?;
    println!(
        "bit-flip torture: seed {} (replay with --seed {}), work directory {}",
        cfg.seed,
        cfg.seed,
        cfg.dir.display()
    );
    let started = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let base = build(&base_dir, &cfg.shape, &mut rng)?;
    println!(
        "  database: seq {}, {} entries, files: {}",
        base.seq,
        base.model.len(),
        base.files.join(" ")
    );
    let regions: Vec<Region> = Region::ALL
        .into_iter()
        .filter(|r| base.pick(*r, &mut rng.clone()).is_some())
        .collect();
    if regions.len() != Region::ALL.len() {
        return Err(TortureError::Log(format!(
            "the database lacks some kinds of region: has only {:?}",
            regions
        )));
    }
    let probe: Vec<KeyPath> = (0..cfg.shape.keys).map(|i| cfg.shape.key(i)).collect();
    let scratch = cfg.dir.join("flip");
    let mut summary = FlipSummary::default();
    let mut last_progress = Instant::now();
    for n in 0..cfg.flips {
        if last_progress.elapsed() >= Duration::from_secs(PROGRESS_EVERY_SECS) {
            last_progress = Instant::now();
            println!(
                "[{:>6.1} s] flips {n}, detected {}, harmless {}, undetected {}",
                started.elapsed().as_secs_f64(),
                summary.total(0),
                summary.total(1),
                summary.total(2)
            );
        }
        let region = regions[rng.gen_range(0..regions.len())];
        let Some((name, offset)) = base.pick(region, &mut rng) else {
            continue;
        };
        let bit = rng.gen_range(0..8u8);
        copy_db(&base.dir, &scratch, &base.files, &name)?;
        flip_bit(&scratch.join(&name), offset, bit)?;
        let what = format!(
            "flip {n}: bit {bit} of byte {offset} of {name} ({})",
            region.name()
        );
        let outcome = catch_unwind(AssertUnwindSafe(|| read_back(&scratch, &base, &probe)));
        let counts = summary.by_region.entry(region).or_default();
        match outcome {
            Err(_) => {
                summary.panics += 1;
                println!("FAIL: {what}: panic");
            }
            Ok(Err(e)) if e.is_corruption() => counts[0] += 1,
            Ok(Err(e)) => {
                summary.untyped_errors += 1;
                println!("FAIL: {what}: an error not typed as corruption: {e}");
            }
            Ok(Ok(None)) => counts[1] += 1,
            Ok(Ok(Some(diff))) => {
                counts[2] += 1;
                println!("FAIL: {what}: undetected: {diff}");
            }
        }
    }
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch).map_err(|e| io("removing", &scratch, e))?;
    }
    // The base itself must still be intact: no flip leaked into it through a link.
    if let Some(diff) = read_back(&base.dir, &base, &probe)? {
        return Err(TortureError::Log(format!(
            "the base database changed: {diff}"
        )));
    }
    summary.elapsed = started.elapsed();
    Ok(summary)
}
