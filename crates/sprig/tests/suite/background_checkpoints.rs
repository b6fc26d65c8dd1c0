//! Automatic checkpoints written on a background thread (`Options::background_checkpoints`):
//! commits go on while a checkpoint's file is still being written; a checkpoint that fails
//! surfaces (at the start of the next commit, or at `Db::checkpoint`), poisons writing and
//! loses nothing.
//!
//! The storage here is the in-memory one behind a gate that holds (or fails) the rename that
//! installs a checkpoint file, so the test decides when the background checkpoint ends.

use parking_lot::{Condvar, Mutex};
use sprig::io::{MemoryStorage, OpenOptions, Storage, StorageFile};
use sprig::{Db, Error, Hasher, KeyPath, Options};
use sprig_core::ReferenceModel;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the gate does to the rename that installs a checkpoint file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Let it through.
    Pass,
    /// Hold it until the mode changes (at most `HOLD_LIMIT`, then fail it).
    Hold,
    /// Fail it with `EIO`.
    Fail,
}

const HOLD_LIMIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct GateState {
    mode: Option<Mode>,
    holding: bool,
    failed: u64,
}

struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn new(mode: Mode) -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::new(GateState {
                mode: Some(mode),
                ..GateState::default()
            }),
            changed: Condvar::new(),
        })
    }

    fn set(&self, mode: Mode) {
        self.state.lock().mode = Some(mode);
        self.changed.notify_all();
    }

    fn holding(&self) -> bool {
        self.state.lock().holding
    }

    fn failed(&self) -> u64 {
        self.state.lock().failed
    }

    /// The rename of a checkpoint file arrives.
    fn pass(&self) -> io::Result<()> {
        let deadline = Instant::now() + HOLD_LIMIT;
        let mut s = self.state.lock();
        loop {
            match s.mode {
                Some(Mode::Pass) | None => {
                    s.holding = false;
                    return Ok(());
                }
                Some(Mode::Fail) => {
                    s.holding = false;
                    s.failed += 1;
                    return Err(io::Error::other("injected EIO"));
                }
                Some(Mode::Hold) => {
                    s.holding = true;
                    self.changed.notify_all();
                    if self.changed.wait_until(&mut s, deadline).timed_out() {
                        s.holding = false;
                        return Err(io::Error::other("held longer than the test allows"));
                    }
                }
            }
        }
    }

    /// Wait until `cond` holds (or fail the test after a while).
    fn wait_for(&self, what: &str, cond: impl Fn(&GateState) -> bool) {
        let deadline = Instant::now() + HOLD_LIMIT;
        let mut s = self.state.lock();
        while !cond(&s) {
            assert!(
                !self.changed.wait_until(&mut s, deadline).timed_out() || cond(&s),
                "timed out waiting for {what}"
            );
        }
    }
}

/// In-memory storage whose checkpoint installs pass through a gate.
struct Gated {
    inner: MemoryStorage,
    gate: Arc<Gate>,
}

impl Storage for Gated {
    fn kind(&self) -> &'static str {
        "gated memory"
    }
    fn open(&self, name: &str, options: OpenOptions) -> io::Result<Arc<dyn StorageFile>> {
        self.inner.open(name, options)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        if to.starts_with("ckpt-") {
            let passed = self.gate.pass();
            // Tell a waiter that the checkpoint went through (or failed).
            self.gate.changed.notify_all();
            passed?;
        }
        self.inner.rename(from, to)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()
    }
}

fn options() -> Options {
    Options {
        hasher: Some(Hasher::Blake3),
        // A checkpoint after some commits, and none again for the few commits after it.
        checkpoint_log_bytes: 64 << 10,
        background_checkpoints: true,
        ..Options::default()
    }
}

/// Key `i`: spread over the key space (splitmix64 of `i`, four times).
fn key(i: u64) -> KeyPath {
    let mut k = [0u8; 32];
    let mut x = i;
    for chunk in k.chunks_exact_mut(8) {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    k
}

/// Commit 8 puts (keys from `*next` on), noted in `model` whether the commit succeeds or not
/// (a failed commit may still be durable).
fn commit(db: &Db, model: &mut ReferenceModel, next: &mut u64) -> sprig::Result<u64> {
    let mut batch = db.begin();
    for _ in 0..8 {
        let (k, v) = (key(*next), next.to_le_bytes().repeat(4));
        *next += 1;
        model.insert(k, v.clone());
        batch.put(k, v)?;
    }
    Ok(db.commit(batch.finish()?)?.seq)
}

/// Commit until one starts an automatic checkpoint; returns the last sequence number.
fn commit_until_a_checkpoint(db: &Db, model: &mut ReferenceModel, next: &mut u64) -> u64 {
    let before = db.stats().checkpoints;
    for _ in 0..500 {
        let seq = commit(db, model, next).unwrap();
        if db.stats().checkpoints > before {
            return seq;
        }
    }
    panic!("no automatic checkpoint in 500 commits");
}

/// A new database on gated in-memory storage, the gate set to `mode` once the database's
/// first checkpoint (written by its creation) is installed.
fn open_gated(mode: Mode) -> (Arc<Gate>, Arc<dyn Storage>, Db) {
    let gate = Gate::new(Mode::Pass);
    let storage: Arc<dyn Storage> = Arc::new(Gated {
        inner: MemoryStorage::new(),
        gate: gate.clone(),
    });
    let db = Db::open_with_storage(storage.clone(), options()).unwrap();
    gate.set(mode);
    (gate, storage, db)
}

/// A commit on `db` (which would follow `model`, keys from `next`) is refused as poisoned.
fn assert_poisoned(db: &Db, model: &ReferenceModel, mut next: u64) {
    let again = commit(db, &mut model.clone(), &mut next);
    assert!(
        matches!(again, Err(Error::Poisoned(_))),
        "{:?}",
        again.map(|_| ())
    );
}

fn assert_state(db: &Db, seq: u64, model: &ReferenceModel) {
    assert_eq!(db.seq(), seq);
    assert_eq!(db.root(), model.root());
    assert_eq!(db.len(), model.len() as u64);
}

#[test]
fn commits_go_on_while_a_checkpoint_is_being_written() {
    let (gate, storage, db) = open_gated(Mode::Hold);
    let (mut model, mut next) = (ReferenceModel::new(Hasher::Blake3), 0u64);
    let started = commit_until_a_checkpoint(&db, &mut model, &mut next);
    // The checkpoint's file is written and waits at the gate to be installed ...
    gate.wait_for("the checkpoint to reach its rename", |s| s.holding);
    // ... while commits go on and are read back.
    let mut seq = started;
    for _ in 0..3 {
        seq = commit(&db, &mut model, &mut next).unwrap();
    }
    assert!(gate.holding(), "the commits waited for the checkpoint");
    assert_state(&db, seq, &model);
    assert_eq!(db.stats().checkpoints, 1);
    // Once installed, `Db::checkpoint` (which waits for it) writes the next one.
    gate.set(Mode::Pass);
    db.checkpoint().unwrap();
    drop(db);
    let db = Db::open_with_storage(storage, options()).unwrap();
    assert_state(&db, seq, &model);
    assert!(db.recovery().checkpoint_seq > 0);
    assert_eq!(gate.failed(), 0);
}

#[test]
fn a_failed_background_checkpoint_poisons_the_next_commit_and_loses_nothing() {
    let (gate, storage, db) = open_gated(Mode::Fail);
    let (mut model, mut next) = (ReferenceModel::new(Hasher::Blake3), 0u64);
    let mut acked = commit_until_a_checkpoint(&db, &mut model, &mut next);
    gate.wait_for("the checkpoint to fail", |s| s.failed > 0);
    // Its failure surfaces at the start of the first commit that finds the thread done (the
    // thread may still be returning for a commit or two), and that commit changes nothing.
    let deadline = Instant::now() + HOLD_LIMIT;
    let failed = loop {
        let mut tried = model.clone();
        match commit(&db, &mut tried, &mut next) {
            Ok(seq) => {
                (acked, model) = (seq, tried);
                assert!(
                    Instant::now() < deadline,
                    "the failed checkpoint never surfaced"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => break e,
        }
    };
    match failed {
        Error::Io { file, .. } => assert!(file.starts_with("ckpt-"), "{file}"),
        other => panic!("the failed checkpoint did not surface as itself: {other:?}"),
    }
    assert_state(&db, acked, &model);
    assert_poisoned(&db, &model, next);
    drop(db);
    gate.set(Mode::Pass);
    // The older checkpoint and logs were kept: the reopened database holds every acknowledged
    // commit and takes new ones.
    let db = Db::open_with_storage(storage, options()).unwrap();
    assert_state(&db, acked, &model);
    let seq = commit(&db, &mut model, &mut next).unwrap();
    assert_state(&db, seq, &model);
}

#[test]
fn an_explicit_checkpoint_returns_the_failure_of_a_background_one() {
    let (gate, storage, db) = open_gated(Mode::Fail);
    let (mut model, mut next) = (ReferenceModel::new(Hasher::Blake3), 0u64);
    let acked = commit_until_a_checkpoint(&db, &mut model, &mut next);
    gate.wait_for("the checkpoint to fail", |s| s.failed > 0);
    gate.set(Mode::Pass);
    let failed = db.checkpoint();
    assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
    assert_poisoned(&db, &model, next);
    drop(db);
    let db = Db::open_with_storage(storage, options()).unwrap();
    assert_state(&db, acked, &model);
}
