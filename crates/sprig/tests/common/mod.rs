//! Shared by the crash, I/O-error and bit-flip tests: a small deterministic workload (commits
//! with small, page-splitting and value-log values, deletes, a checkpoint, a reopen, a clean),
//! a runner that stops at the first error and says how far it got, and a full comparison of a
//! database with the reference model (root, every value, scans, proofs, `Db::check`).

#![allow(dead_code)]

pub mod heap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::Storage;
use sprig::{Db, Error, Hasher, KeyPath, Options};
use sprig_core::ReferenceModel;
use std::sync::Arc;

/// The seed of a randomized test: `SPRIG_TEST_SEED` if set, else `default`. Printed, so any
/// failure can be replayed.
pub fn test_seed(name: &str, default: u64) -> u64 {
    let seed = std::env::var("SPRIG_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    println!("{name}: seed {seed} (replay with SPRIG_TEST_SEED={seed})");
    seed
}

/// Options of every test database: small segments and an early checkpoint, so a few commits
/// reach every kind of file and an automatic checkpoint. Checkpoints are written on the
/// committing thread, so that a workload's storage steps come in one order every run (the
/// crash and fault tests number them); [`background_options`] writes them in the background.
pub fn options() -> Options {
    Options {
        hasher: Some(Hasher::Blake3),
        page_cache_bytes: 1 << 20,
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 3 << 10,
        background_checkpoints: false,
        ..Options::default()
    }
}

/// [`options`] with automatic checkpoints written on a background thread.
pub fn background_options() -> Options {
    Options {
        background_checkpoints: true,
        ..options()
    }
}

/// One step of a workload.
#[derive(Debug, Clone)]
pub enum Step {
    /// One batch: puts (`Some`) and deletes (`None`).
    Commit(Vec<(KeyPath, Option<Vec<u8>>)>),
    /// `Db::checkpoint`.
    Checkpoint,
    /// Close and open again.
    Reopen,
    /// `Db::clean`.
    Clean,
}

/// A workload and every key it touches.
#[derive(Debug, Clone)]
pub struct Workload {
    pub steps: Vec<Step>,
    pub keys: Vec<KeyPath>,
}

fn key(rng: &mut ChaCha8Rng) -> KeyPath {
    let mut k = [0u8; 32];
    rng.fill(&mut k);
    k
}

fn value(rng: &mut ChaCha8Rng, large: bool) -> Vec<u8> {
    let len = if large {
        rng.gen_range(1100..9000)
    } else {
        rng.gen_range(0..60)
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// A few commits over `n_keys` keys: inline values that split pages, value-log values,
/// overwrites that leave garbage, deletes, a checkpoint, a reopen and a clean.
pub fn small_workload(seed: u64, n_keys: usize) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut keys: Vec<KeyPath> = (0..n_keys).map(|_| key(&mut rng)).collect();
    // Two keys that differ in the last bit only: a deep split.
    let mut a = key(&mut rng);
    a[31] &= 0xfe;
    let mut b = a;
    b[31] |= 1;
    keys.push(a);
    keys.push(b);
    let batch = |rng: &mut ChaCha8Rng, puts: usize, large: usize, deletes: usize| {
        let mut changes = Vec::new();
        for i in 0..puts + large {
            let k = keys[rng.gen_range(0..keys.len())];
            changes.push((k, Some(value(rng, i >= puts))));
        }
        for _ in 0..deletes {
            changes.push((keys[rng.gen_range(0..keys.len())], None));
        }
        Step::Commit(changes)
    };
    let mut steps = vec![
        batch(&mut rng, n_keys, 0, 0),
        batch(&mut rng, 10, 6, 4),
        Step::Checkpoint,
    ];
    // Fill the first segment with value-log records and open a second one.
    let bulky: Vec<KeyPath> = keys.iter().step_by(3).take(40).copied().collect();
    let mut fill = Vec::new();
    for k in &bulky {
        let mut v = vec![0u8; 24 << 10];
        rng.fill(&mut v[..]);
        fill.push((*k, Some(v)));
    }
    steps.push(Step::Commit(fill));
    steps.push(Step::Reopen);
    // Overwrite them: most of the first segment becomes garbage for the cleaner.
    let mut shrink: Vec<(KeyPath, Option<Vec<u8>>)> = bulky
        .iter()
        .map(|k| (*k, Some(value(&mut rng, false))))
        .collect();
    shrink.truncate(34);
    if let Step::Commit(mut more) = batch(&mut rng, 4, 1, 6) {
        shrink.append(&mut more);
    }
    steps.push(Step::Commit(shrink));
    steps.push(Step::Clean);
    steps.push(batch(&mut rng, 8, 2, 3));
    Workload { steps, keys }
}

/// A committed state: its sequence number and content.
#[derive(Debug, Clone)]
pub struct State {
    pub seq: u64,
    pub model: ReferenceModel,
}

/// How far a run of a workload got.
pub struct Outcome {
    /// The states acknowledged, oldest first (`states[0]` is the empty database), then the
    /// state of the commit in flight, if any.
    pub states: Vec<State>,
    /// Whether a commit (or clean) was under way when the run stopped.
    pub in_flight: bool,
    /// The first error, and what was being done.
    pub error: Option<(&'static str, Error)>,
    /// The database, if open when the run stopped.
    pub db: Option<Db>,
}

impl Outcome {
    /// The last acknowledged state.
    pub fn acked(&self) -> &State {
        acked_and_in_flight(self).0
    }
}

/// Run `workload` on `storage` until it ends or something fails.
pub fn run_workload(storage: &Arc<dyn Storage>, workload: &Workload) -> Outcome {
    run_workload_with(storage, workload, &options())
}

/// [`run_workload`] with other options.
pub fn run_workload_with(
    storage: &Arc<dyn Storage>,
    workload: &Workload,
    options: &Options,
) -> Outcome {
    let empty = State {
        seq: 0,
        model: ReferenceModel::new(Hasher::Blake3),
    };
    let mut out = Outcome {
        states: vec![empty],
        in_flight: false,
        error: None,
        db: None,
    };
    let mut db = match Db::open_with_storage(storage.clone(), options.clone()) {
        Ok(db) => db,
        Err(e) => {
            out.error = Some(("creating", e));
            return out;
        }
    };
    for step in &workload.steps {
        let acked = out.acked().clone();
        match step {
            Step::Commit(changes) => {
                let mut model = acked.model.clone();
                let mut batch = db.begin();
                for (k, v) in changes {
                    match v {
                        Some(v) => {
                            model.insert(*k, v.clone());
                            if let Err(e) = batch.put(*k, v.clone()) {
                                out.error = Some(("putting", e));
                                break;
                            }
                        }
                        None => {
                            model.remove(k);
                            batch.delete(*k);
                        }
                    }
                }
                if out.error.is_some() {
                    break;
                }
                let pending = match batch.finish() {
                    Ok(p) => p,
                    Err(e) => {
                        out.error = Some(("finishing a batch", e));
                        break;
                    }
                };
                assert_eq!(pending.root(), model.root(), "pending root");
                out.in_flight = true;
                match db.commit(pending) {
                    Ok(info) => {
                        assert_eq!(info.root, model.root(), "committed root");
                        assert_eq!(info.seq, acked.seq + 1);
                        out.states.push(State {
                            seq: info.seq,
                            model,
                        });
                        out.in_flight = false;
                    }
                    Err(e) => {
                        // A commit that failed may still be the state after a crash.
                        out.states.push(State {
                            seq: acked.seq + 1,
                            model,
                        });
                        out.error = Some(("committing", e));
                        break;
                    }
                }
            }
            Step::Checkpoint => {
                if let Err(e) = db.checkpoint() {
                    out.error = Some(("checkpointing", e));
                    break;
                }
            }
            Step::Clean => {
                out.in_flight = true;
                match db.clean() {
                    Ok(Some(info)) => {
                        assert_eq!(info.root, acked.model.root(), "clean changed the root");
                        out.states.push(State {
                            seq: info.seq,
                            model: acked.model.clone(),
                        });
                        out.in_flight = false;
                    }
                    Ok(None) => out.in_flight = false,
                    Err(e) => {
                        out.states.push(State {
                            seq: acked.seq + 1,
                            model: acked.model.clone(),
                        });
                        out.error = Some(("cleaning", e));
                        break;
                    }
                }
            }
            Step::Reopen => {
                drop(db);
                db = match Db::open_with_storage(storage.clone(), options.clone()) {
                    Ok(db) => db,
                    Err(e) => {
                        out.error = Some(("reopening", e));
                        return out;
                    }
                };
            }
        }
    }
    out.db = Some(db);
    out
}

/// The acknowledged state and the candidate in flight (if any) of an outcome.
pub fn acked_and_in_flight(out: &Outcome) -> (&State, Option<&State>) {
    let n = out.states.len();
    if out.in_flight {
        (&out.states[n - 2], Some(&out.states[n - 1]))
    } else {
        (&out.states[n - 1], None)
    }
}

/// Compare everything the database holds with `model`: root, count, every key of `keys`
/// (one by one and in one batch), the full scan, proofs, and `Db::check`. Errors (typed) are
/// returned; a difference is returned as `Ok(Some(description))`.
pub fn compare(db: &Db, model: &ReferenceModel, keys: &[KeyPath]) -> Result<Option<String>, Error> {
    let view = db.view();
    if view.root() != model.root() {
        return Ok(Some("root differs".into()));
    }
    if view.len() != model.len() as u64 {
        return Ok(Some(format!(
            "{} entries instead of {}",
            view.len(),
            model.len()
        )));
    }
    for k in keys {
        let got = view.get(k)?;
        if got.as_deref() != model.get(k) {
            return Ok(Some(format!("value of {:02x?} differs", &k[..4])));
        }
    }
    let many = view.get_many(keys)?;
    for (k, got) in keys.iter().zip(many) {
        if got.as_deref() != model.get(k) {
            return Ok(Some(format!("batched value of {:02x?} differs", &k[..4])));
        }
    }
    let mut scanned = Vec::new();
    for item in view.iter() {
        scanned.push(item?);
    }
    let expected: Vec<(KeyPath, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.to_vec())).collect();
    if scanned != expected {
        return Ok(Some("full scan differs".into()));
    }
    for k in keys.iter().step_by(3) {
        let proof = view.path_proof(k)?;
        if proof
            .verify_value(db.hasher(), &model.root(), k, model.get(k))
            .is_err()
        {
            return Ok(Some(format!("proof of {:02x?} does not verify", &k[..4])));
        }
    }
    let witness = view.witness(keys)?;
    match witness.verify(db.hasher(), &model.root()) {
        Ok(verified) => {
            for k in keys {
                if verified.check_value(k, model.get(k)).is_err() {
                    return Ok(Some(format!("witness disagrees on {:02x?}", &k[..4])));
                }
            }
        }
        Err(_) => return Ok(Some("witness does not verify".into())),
    }
    let report = db.check(&mut |_, _| {})?;
    if let Some(problem) = report.problems.into_iter().next() {
        return Err(problem);
    }
    if report.entries != model.len() as u64 {
        return Ok(Some("check counted other entries".into()));
    }
    Ok(None)
}

/// Changes to make after recovery, to check that a recovered database keeps working.
pub fn follow_up_batch(seed: u64, keys: &[KeyPath]) -> Vec<(KeyPath, Option<Vec<u8>>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let mut changes = Vec::new();
    for i in 0..6 {
        let k = keys[rng.gen_range(0..keys.len())];
        changes.push((k, Some(value(&mut rng, i == 0))));
    }
    changes.push((keys[rng.gen_range(0..keys.len())], None));
    changes
}

/// Commit `changes` on `db`; returns the new model.
pub fn commit_changes(
    db: &Db,
    model: &ReferenceModel,
    changes: &[(KeyPath, Option<Vec<u8>>)],
) -> Result<ReferenceModel, Error> {
    let mut model = model.clone();
    let mut batch = db.begin();
    for (k, v) in changes {
        match v {
            Some(v) => {
                model.insert(*k, v.clone());
                batch.put(*k, v.clone())?;
            }
            None => {
                model.remove(k);
                batch.delete(*k);
            }
        }
    }
    db.commit(batch.finish()?)?;
    Ok(model)
}

/// [`compare`] for many keys: root, count, every value of `keys` (in one batch), the full
/// scan, proofs of a sample of about 50 keys and `Db::check` — no per-key model roots and no
/// witness, which cost quadratic time.
pub fn compare_many(
    db: &Db,
    model: &ReferenceModel,
    keys: &[KeyPath],
) -> Result<Option<String>, Error> {
    let view = db.view();
    let root = model.root();
    if view.root() != root {
        return Ok(Some("root differs".into()));
    }
    if view.len() != model.len() as u64 {
        return Ok(Some(format!(
            "{} entries instead of {}",
            view.len(),
            model.len()
        )));
    }
    for (k, got) in keys.iter().zip(view.get_many(keys)?) {
        if got.as_deref() != model.get(k) {
            return Ok(Some(format!("value of {:02x?} differs", &k[..4])));
        }
    }
    let mut scanned = Vec::new();
    for item in view.iter() {
        scanned.push(item?);
    }
    if !scanned
        .iter()
        .map(|(k, v)| (k, v.as_slice()))
        .eq(model.iter())
    {
        return Ok(Some("full scan differs".into()));
    }
    for k in keys.iter().step_by(keys.len() / 50 + 1) {
        let proof = view.path_proof(k)?;
        if proof
            .verify_value(db.hasher(), &root, k, model.get(k))
            .is_err()
        {
            return Ok(Some(format!("proof of {:02x?} does not verify", &k[..4])));
        }
    }
    let report = db.check(&mut |_, _| {})?;
    if let Some(problem) = report.problems.into_iter().next() {
        return Err(problem);
    }
    if report.entries != model.len() as u64 {
        return Ok(Some("check counted other entries".into()));
    }
    Ok(None)
}

/// Fail the test if any crash point failed, printing the first 20 failures.
pub fn assert_no_failures(failures: &[String]) {
    for f in failures.iter().take(20) {
        println!("  {f}");
    }
    assert!(
        failures.is_empty(),
        "{} crash points failed",
        failures.len()
    );
}
