//! A view (or batch) of the latest version pins that version before any commit can delete a
//! segment it reads. `Db::view` used to read the head and register its pin in two steps; a
//! commit that published a newer head and deleted the segments only the old head still used
//! could run in between, and the view's reads then failed (a segment file not found).
//!
//! The test drives that race as hard as it can: one retained version, 1 MiB segments and
//! automatic cleaning at 1.2× space amplification (so most commits delete segments), a writer
//! overwriting keys, and reader threads that take views and batches and read and prove every
//! key of them. Every read must succeed with the value of the version the view says it is.
//! With the `failpoints` feature the readers also sleep inside the window (the pause point
//! `view.pinning`), which made the old code fail within a few commits.
//!
//! Replay with
//! `SPRIG_TEST_SEED=<seed> cargo test -p sprig --features failpoints --test view_pin_race`.

use crate::common;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::{Db, Hasher, KeyPath, Node, Options, SyncPolicy};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

const KEYS: usize = 600;
const COMMITS: u64 = 500;
const READERS: u64 = 3;
/// How long a reader sleeps between reading the head and pinning it (with `failpoints`).
#[cfg(feature = "failpoints")]
const PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// Per version: its root, and for each key the commit that last wrote it (0: absent).
type States = RwLock<HashMap<u64, (Node, Arc<Vec<u64>>)>>;

/// The value key `i` gets from commit `seq`; some go to the value log.
fn value(i: usize, seq: u64) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&(i as u64).to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    let len = if (i as u64 + seq).is_multiple_of(20) {
        16_000
    } else {
        24
    };
    v.resize(len, (seq % 251) as u8);
    v
}

fn expected(written: &[u64], i: usize) -> Option<Vec<u8>> {
    match written[i] {
        0 => None,
        seq => Some(value(i, seq)),
    }
}

/// How a reader reads the latest version.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// `Db::view`: read and prove every key.
    View,
    /// `Db::view_at` of the latest sequence number (which may be gone by then): as a view.
    ViewAt,
    /// `Db::begin`: read every key through the batch.
    Batch,
}

/// Read (and prove) every key of the latest version. Returns whether a version was read (a
/// `view_at` may find its version gone), or what went wrong.
fn read_latest(db: &Db, keys: &[KeyPath], states: &States, via: Via) -> Result<bool, String> {
    let lookup = |seq: u64| {
        states
            .read()
            .unwrap()
            .get(&seq)
            .cloned()
            .ok_or_else(|| format!("a view of unknown version {seq}"))
    };
    if let Via::Batch = via {
        let mut batch = db.begin();
        let seq = batch.base_seq();
        let (_, written) = lookup(seq)?;
        batch
            .prefetch(keys)
            .map_err(|e| format!("batch on version {seq}: {e}"))?;
        for (i, k) in keys.iter().enumerate() {
            let got = batch
                .get(k)
                .map_err(|e| format!("batch on version {seq}: {e}"))?;
            if got != expected(&written, i) {
                return Err(format!("batch on version {seq}: key {i} has a wrong value"));
            }
        }
        return Ok(true);
    }
    let view = match via {
        Via::ViewAt => match db.view_at(db.seq()) {
            Ok(view) => view,
            // A commit made that version too old to be retained: nothing to read.
            Err(sprig::Error::NotRetained { .. }) => return Ok(false),
            Err(e) => return Err(format!("view_at: {e}")),
        },
        _ => db.view(),
    };
    let seq = view.seq();
    let (root, written) = lookup(seq)?;
    if view.root() != root {
        return Err(format!("view of version {seq}: wrong root"));
    }
    let got = view
        .get_many(keys)
        .map_err(|e| format!("view of version {seq}: {e}"))?;
    for (i, v) in got.into_iter().enumerate() {
        if v != expected(&written, i) {
            return Err(format!("view of version {seq}: key {i} has a wrong value"));
        }
    }
    let witness = view
        .witness(keys)
        .map_err(|e| format!("view of version {seq}: proving: {e}"))?;
    let verified = witness
        .verify(db.hasher(), &root)
        .map_err(|e| format!("view of version {seq}: the proof does not verify: {e}"))?;
    for (i, k) in keys.iter().enumerate() {
        verified
            .check_value(k, expected(&written, i).as_deref())
            .map_err(|e| format!("view of version {seq}: proof of key {i}: {e}"))?;
    }
    Ok(true)
}

#[test]
fn views_and_batches_of_the_head_survive_commits_that_delete_segments() {
    let seed = common::test_seed("view_pin_race", 11);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            hasher: Some(Hasher::Blake3),
            page_cache_bytes: 0,
            segment_bytes: 1 << 20,
            checkpoint_log_bytes: 1 << 20,
            retained_versions: 1,
            auto_clean: true,
            max_space_amplification: 1.2,
            sync: SyncPolicy::Never,
            ..Options::default()
        },
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let keys: Arc<Vec<KeyPath>> = Arc::new(
        (0..KEYS)
            .map(|_| {
                let mut k = [0u8; 32];
                rng.fill(&mut k);
                k
            })
            .collect(),
    );
    let states: Arc<States> = Arc::new(RwLock::new(HashMap::from([(
        0,
        (db.root(), Arc::new(vec![0u64; KEYS])),
    )])));
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));

    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (db, keys, states) = (db.clone(), keys.clone(), states.clone());
            let (done, reads, failures) = (done.clone(), reads.clone(), failures.clone());
            std::thread::spawn(move || {
                #[cfg(feature = "failpoints")]
                sprig::failpoint::pause_here("view.pinning", PAUSE).unwrap();
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (r + 1));
                while !done.load(Ordering::Acquire) {
                    let via = [Via::View, Via::View, Via::ViewAt, Via::Batch][rng.gen_range(0..4)];
                    match read_latest(&db, &keys, &states, via) {
                        Ok(true) => {
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(false) => {}
                        Err(e) => failures.lock().unwrap().push(format!("{via:?}: {e}")),
                    }
                }
            })
        })
        .collect();

    let started = Instant::now();
    let mut written = vec![0u64; KEYS];
    for _ in 0..COMMITS {
        let mut batch = db.begin();
        let seq = batch.base_seq() + 1;
        // The first commit writes every key; later ones overwrite (or delete) an eighth.
        let n = if seq == 1 { KEYS } else { KEYS / 8 };
        for j in 0..n {
            let i = if seq == 1 { j } else { rng.gen_range(0..KEYS) };
            if seq > 1 && rng.gen_ratio(1, 10) {
                batch.delete(keys[i]);
                written[i] = 0;
            } else {
                batch.put(keys[i], value(i, seq)).unwrap();
                written[i] = seq;
            }
        }
        let pending = batch.finish().unwrap();
        states
            .write()
            .unwrap()
            .insert(seq, (pending.root(), Arc::new(written.clone())));
        let info = db.commit(pending).unwrap();
        assert_eq!(info.seq, seq);
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().expect("a reader panicked");
    }
    let stats = db.stats();
    let failures = failures.lock().unwrap();
    println!(
        "view_pin_race: {COMMITS} commits, {READERS} readers, {} views and batches read in \
         full, {} failed; segments deleted {}, cleaner pages copied {}, in {:?}",
        reads.load(Ordering::Relaxed),
        failures.len(),
        stats.segments_deleted,
        stats.cleaner_pages_copied,
        started.elapsed()
    );
    for via in ["View", "ViewAt", "Batch"] {
        let n = failures
            .iter()
            .filter(|f| f.starts_with(&format!("{via}:")))
            .count();
        println!("  failed through {via}: {n}");
    }
    for f in failures.iter().take(5) {
        println!("  {f}");
    }
    assert!(
        stats.segments_deleted >= COMMITS / 10,
        "too few segments deleted to test anything: {}",
        stats.segments_deleted
    );
    assert!(reads.load(Ordering::Relaxed) > 0);
    assert!(failures.is_empty(), "{} reads failed", failures.len());
}
