//! A block's witness over many regions verifies against the base root and gives the block's
//! new root for its changes, equal to the reference model's: with the pages in memory (the
//! regions rewritten in one share per core, their proof nodes kept per share) and with the
//! pages loaded from disk as they arrive (a proof buffer per region), for batches that patch
//! values in place, insert, delete, and write values kept outside the pages.

use sprig::{Db, KeyPath, Options};
use sprig_core::proof::verify_block;
use sprig_core::{Hasher, ReferenceModel, ValueHash};

fn key(i: u32) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

/// The changes of block `round`: a third of the keys get a value of the same length (patched
/// in place), some new keys come in, some go, a few values are too large to stay in a page.
fn block(round: u32, live: u32) -> Vec<(KeyPath, Option<Vec<u8>>)> {
    let mut changes = Vec::new();
    for i in (round..live).step_by(3) {
        changes.push((key(i), Some(vec![(i + round) as u8; 16])));
    }
    for i in 0..400 {
        changes.push((key(100_000 * (round + 1) + i), Some(vec![i as u8; 24])));
    }
    for i in (1..live).step_by(97) {
        changes.push((key(i), None));
    }
    for i in (2..live).step_by(401) {
        changes.push((key(i), Some(vec![round as u8; 3000])));
    }
    // One change a key: the last wins, as in the batch.
    changes.reverse();
    let mut seen = std::collections::HashSet::new();
    changes.retain(|(k, _)| seen.insert(*k));
    changes
}

/// Apply `changes` in a batch, and check its witness against `model` (the base) and the new
/// root against the model after them; commit it.
fn commit_and_check(db: &Db, model: &mut ReferenceModel, changes: &[(KeyPath, Option<Vec<u8>>)]) {
    let mut batch = db.begin();
    for (k, v) in changes {
        match v {
            Some(v) => batch.put(*k, v.clone()).unwrap(),
            None => batch.delete(*k),
        }
    }
    let pending = batch.finish().unwrap();
    let base = model.root();
    for (k, v) in changes {
        match v {
            Some(v) => {
                model.insert(*k, v.clone());
            }
            None => {
                model.remove(k);
            }
        }
    }
    assert_eq!(pending.root(), model.root(), "the block's root");
    let hashed: Vec<(KeyPath, Option<ValueHash>)> = changes
        .iter()
        .map(|(k, v)| (*k, v.as_ref().map(|v| Hasher::Blake3.hash_value(v))))
        .collect();
    let mut sorted = hashed;
    sorted.sort_by_key(|(k, _)| *k);
    assert!(
        pending.witness().keys.len() >= changes.len(),
        "every changed key is in the witness"
    );
    let derived = verify_block(Hasher::Blake3, &base, pending.witness(), &sorted)
        .expect("the witness verifies against the base root");
    assert_eq!(
        derived,
        model.root(),
        "the root the witness gives for the changes"
    );
    db.commit(pending).unwrap();
}

#[test]
fn a_witness_over_many_regions_gives_the_new_root_from_memory_and_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let options = || Options {
        hasher: Some(Hasher::Blake3),
        // Small: after the reopen, most pages a block touches are read from disk.
        page_cache_bytes: 1 << 20,
        ..Options::default()
    };
    let live = 12_000u32;
    let mut model = ReferenceModel::new(Hasher::Blake3);
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let all: Vec<(KeyPath, Option<Vec<u8>>)> = (0..live)
            .map(|i| (key(i), Some(vec![i as u8; 16])))
            .collect();
        commit_and_check(&db, &mut model, &all);
        // The pages the first commit built are still in memory.
        commit_and_check(&db, &mut model, &block(1, live));
        commit_and_check(&db, &mut model, &block(2, live));
    }
    // Reopened with a small cache: the pages come from disk, loaded as the batch finishes.
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.root(), model.root());
    commit_and_check(&db, &mut model, &block(3, live));
    commit_and_check(&db, &mut model, &block(4, live));
    assert!(
        db.stats().page_reads() > 100,
        "the pages were not read from disk"
    );
}
