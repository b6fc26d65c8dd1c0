//! `Db::import_sorted` applies a sorted stream of puts and deletes as one commit and gives
//! exactly the state the reference model gives — root, count, every value, scans, proofs,
//! `Db::check` — and the root the ordinary batch path gives for the same changes, before and
//! after a reopen. Covered: inline and value-log values (overwritten both ways), deletes of
//! present and absent keys, a budget small enough for many rounds and for segments to fill
//! during the import, a region too large for the budget (an import into a database of one page,
//! and into one emptied by deletes: split into virtual regions), and mass deletes that leave
//! sparse regions to merge. A stream out of order, repeating a key, or failing midway changes
//! nothing and leaves the database usable; a stream of deletes of absent keys is an empty
//! commit.
//!
//! Replay a failure with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite import_sorted::`.

use crate::common;

use common::{compare_many, options, test_seed};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::{MemoryStorage, Storage};
use sprig::{Db, Error, Hasher, ImportOptions, KeyPath, MIN_IMPORT_MEMORY_BYTES};
use sprig_core::ReferenceModel;
use std::collections::BTreeMap;
use std::sync::Arc;

type Changes = Vec<(KeyPath, Option<Vec<u8>>)>;

fn small_budget() -> ImportOptions {
    ImportOptions {
        memory_bytes: MIN_IMPORT_MEMORY_BYTES,
    }
}

fn key(rng: &mut ChaCha8Rng) -> KeyPath {
    let mut k = [0u8; 32];
    rng.fill(&mut k);
    k
}

/// A value: inline mostly, sometimes for the value log (above 1 KiB).
fn value(rng: &mut ChaCha8Rng, large_percent: u32) -> Vec<u8> {
    let len = if rng.gen_ratio(large_percent, 100) {
        rng.gen_range(1025..5000)
    } else {
        rng.gen_range(0..40)
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// A database on `storage` and the model of its state after committing each of `commits`.
fn build(storage: &Arc<dyn Storage>, commits: &[Changes]) -> (Db, ReferenceModel) {
    let db = Db::open_with_storage(storage.clone(), options()).unwrap();
    let mut model = ReferenceModel::new(Hasher::Blake3);
    for changes in commits {
        let mut batch = db.begin();
        for (k, v) in changes {
            match v {
                Some(v) => {
                    batch.put(*k, v.clone()).unwrap();
                    model.insert(*k, v.clone());
                }
                None => {
                    batch.delete(*k);
                    model.remove(k);
                }
            }
        }
        db.commit(batch.finish().unwrap()).unwrap();
    }
    (db, model)
}

fn assert_same(db: &Db, model: &ReferenceModel, keys: &[KeyPath], what: &str) {
    match compare_many(db, model, keys) {
        Ok(None) => {}
        Ok(Some(diff)) => panic!("{what}: {diff}"),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Import `changes` (sorted here) on a database built by `commits`, and check it against the
/// model and against the batch path on a twin database, before and after a reopen.
fn check_import(what: &str, commits: &[Changes], changes: BTreeMap<KeyPath, Option<Vec<u8>>>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let (db, mut model) = build(&storage, commits);
    let seq = db.seq();
    let mut keys: Vec<KeyPath> = model.iter().map(|(k, _)| *k).collect();
    keys.extend(changes.keys().copied());
    keys.sort_unstable();
    keys.dedup();
    for (k, v) in &changes {
        match v {
            Some(v) => model.insert(*k, v.clone()),
            None => model.remove(k),
        };
    }

    let info = db
        .import_sorted(changes.clone().into_iter().map(Ok), &small_budget())
        .unwrap();
    assert_eq!(info.seq, seq + 1, "{what}: one commit");
    assert_eq!(info.root, model.root(), "{what}: root");
    assert_same(&db, &model, &keys, what);

    // The batch path on a twin database gives the same root.
    let twin_storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let (twin, _) = build(&twin_storage, commits);
    let mut batch = twin.begin();
    for (k, v) in &changes {
        match v {
            Some(v) => batch.put(*k, v.clone()).unwrap(),
            None => batch.delete(*k),
        }
    }
    let batch_info = twin.commit(batch.finish().unwrap()).unwrap();
    assert_eq!(batch_info.root, info.root, "{what}: root of the batch path");
    assert_eq!(twin.len(), db.len(), "{what}: entries of the batch path");

    drop(db);
    let db = Db::open_with_storage(storage, options()).unwrap();
    assert_eq!(db.seq(), seq + 1, "{what}: after reopening");
    assert_same(&db, &model, &keys, &format!("{what}, reopened"));
    println!(
        "{what}: {} changes, {} entries, {} pages written",
        changes.len(),
        db.len(),
        info.pages_written
    );
}

#[test]
fn imports_match_the_model_and_the_batch_path() {
    let seed = test_seed("import_sorted", 20261123);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);

    // A populated database: new keys, overwrites (inline and value-log both ways), deletes of
    // present and absent keys; many rounds of the small budget, segments filling.
    let base: Vec<KeyPath> = (0..4000).map(|_| key(&mut rng)).collect();
    let first: Changes = base
        .iter()
        .map(|k| (*k, Some(value(&mut rng, 10))))
        .collect();
    let second: Changes = base
        .iter()
        .step_by(7)
        .map(|k| (*k, Some(value(&mut rng, 30))))
        .collect();
    let mut changes = BTreeMap::new();
    for _ in 0..6_000 {
        changes.insert(key(&mut rng), Some(value(&mut rng, 5)));
    }
    for k in base.iter().step_by(2) {
        let change = match rng.gen_range(0..4) {
            0 => None,
            1 => Some(value(&mut rng, 100)),
            _ => Some(value(&mut rng, 0)),
        };
        changes.insert(*k, change);
    }
    for _ in 0..500 {
        changes.insert(key(&mut rng), None);
    }
    check_import("populated", &[first, second], changes);

    // A database of one page: its one region takes every change and is split, level after
    // level, into virtual regions holding the page's old entries.
    let page: Changes = (0..40)
        .map(|_| (key(&mut rng), Some(value(&mut rng, 0))))
        .collect();
    let mut changes = BTreeMap::new();
    for _ in 0..8_000 {
        changes.insert(key(&mut rng), Some(value(&mut rng, 3)));
    }
    for (k, _) in page.iter().step_by(4) {
        changes.insert(*k, None);
    }
    check_import("one page", &[page], changes);

    // A database emptied by deletes: the empty root region is split; no-op deletes among puts.
    let gone: Vec<KeyPath> = (0..10).map(|_| key(&mut rng)).collect();
    let put: Changes = gone.iter().map(|k| (*k, Some(vec![9]))).collect();
    let del: Changes = gone.iter().map(|k| (*k, None)).collect();
    let mut changes = BTreeMap::new();
    for i in 0..8_000 {
        let v = if i % 50 == 0 {
            None
        } else {
            Some(value(&mut rng, 3))
        };
        changes.insert(key(&mut rng), v);
    }
    check_import("emptied", &[put, del], changes);

    // Mass deletes: regions empty out and their neighbours merge into sparse pages.
    let base: Vec<KeyPath> = (0..6000).map(|_| key(&mut rng)).collect();
    let fill: Changes = base
        .iter()
        .map(|k| (*k, Some(value(&mut rng, 5))))
        .collect();
    let mut changes: BTreeMap<KeyPath, Option<Vec<u8>>> =
        base.iter().skip(7).map(|k| (*k, None)).collect();
    changes.insert(key(&mut rng), Some(vec![4; 2000]));
    check_import("mass deletes", &[fill], changes);
}

#[test]
fn a_bad_or_failing_stream_changes_nothing_and_the_database_stays_usable() {
    let seed = test_seed("import_sorted failures", 20261124);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let base: Vec<KeyPath> = (0..3000).map(|_| key(&mut rng)).collect();
    let fill: Changes = base
        .iter()
        .map(|k| (*k, Some(value(&mut rng, 10))))
        .collect();
    let (db, model) = build(&storage, &[fill]);
    let (seq, root) = (db.seq(), db.root());
    let unchanged = |db: &Db, what: &str| {
        assert_eq!((db.seq(), db.root()), (seq, root), "{what}");
    };

    let (a, b) = (key(&mut rng), key(&mut rng));
    let (low, high) = (a.min(b), a.max(b));
    let out_of_order = [(high, Some(vec![1])), (low, Some(vec![2]))];
    let err = db
        .import_sorted(out_of_order.into_iter().map(Ok), &small_budget())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    unchanged(&db, "out of order");
    let repeated = [(low, Some(vec![1])), (low, None)];
    let err = db
        .import_sorted(repeated.into_iter().map(Ok), &small_budget())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    unchanged(&db, "a repeated key");

    // Nothing but deletes of absent keys: an empty commit.
    let absent: BTreeMap<KeyPath, Option<Vec<u8>>> =
        (0..100).map(|_| (key(&mut rng), None)).collect();
    let info = db
        .import_sorted(absent.into_iter().map(Ok), &small_budget())
        .unwrap();
    assert_eq!(
        (info.seq, info.root, info.pages_written),
        (seq + 1, root, 0)
    );
    let (seq, root) = (db.seq(), db.root());
    let unchanged = |db: &Db, what: &str| {
        assert_eq!((db.seq(), db.root()), (seq, root), "{what}");
    };

    // A source that fails after several rounds were written (10,000 changes cost about three
    // times the budget; value-log values among them).
    let mut stream: BTreeMap<KeyPath, Option<Vec<u8>>> = BTreeMap::new();
    for _ in 0..12_000 {
        stream.insert(key(&mut rng), Some(value(&mut rng, 5)));
    }
    let items = stream.into_iter().enumerate().map(|(i, change)| {
        if i == 10_000 {
            Err(Error::InvalidArgument("the source failed".into()))
        } else {
            Ok(change)
        }
    });
    let err = db.import_sorted(items, &small_budget()).unwrap_err();
    assert!(err.to_string().contains("the source failed"), "{err}");
    unchanged(&db, "a failing source");

    // Still usable: an import and a commit reuse the blocks the failed import wrote.
    let mut model = model;
    let mut next: BTreeMap<KeyPath, Option<Vec<u8>>> = BTreeMap::new();
    for k in base.iter().step_by(3) {
        next.insert(*k, Some(value(&mut rng, 20)));
    }
    for _ in 0..5000 {
        next.insert(key(&mut rng), Some(value(&mut rng, 5)));
    }
    for (k, v) in &next {
        if let Some(v) = v {
            model.insert(*k, v.clone());
        }
    }
    db.import_sorted(next.clone().into_iter().map(Ok), &small_budget())
        .unwrap();
    let extra = key(&mut rng);
    let mut batch = db.begin();
    batch.put(extra, vec![7; 3000]).unwrap();
    db.commit(batch.finish().unwrap()).unwrap();
    model.insert(extra, vec![7; 3000]);
    let mut keys: Vec<KeyPath> = model.iter().map(|(k, _)| *k).collect();
    keys.push(low);
    assert_same(&db, &model, &keys, "after a failed import");
    drop(db);
    let db = Db::open_with_storage(storage, options()).unwrap();
    assert_eq!(db.seq(), seq + 2);
    assert_same(&db, &model, &keys, "after a failed import, reopened");
}
