//! The hashing floor a batch reports (`Stats::hashes_needed`) equals the count by its
//! definition over the whole trie: internal nodes on the changed keys' paths in the new state,
//! plus a leaf hash and the value's 64-byte blocks per written key. The engine counts it region
//! by region and over the directory above them; this checks the pieces add up to the whole.

use rand::{Rng, SeedableRng};
use sprig::core::trie::internal_nodes_to_update;
use sprig::{Db, KeyPath, Options};
use std::collections::BTreeMap;

#[test]
fn batches_report_the_hashes_their_changes_need() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut state: BTreeMap<KeyPath, Vec<u8>> = BTreeMap::new();
    let mut fresh = 0u32;
    for round in 0..12 {
        // A first round of 20,000 inserts, then mixes of updates, inserts and deletes of
        // varied sizes (inline and external values).
        let n = if round == 0 {
            20_000
        } else {
            1 + rng.gen_range(0..600)
        };
        let mut changes: BTreeMap<KeyPath, Option<Vec<u8>>> = BTreeMap::new();
        // Every third round only replaces values by values of the same length: the pages
        // are patched in place, and counted without being listed.
        if round % 3 == 2 {
            for _ in 0..n {
                let i = rng.gen_range(0..state.len());
                let (k, v) = state.iter().nth(i).unwrap();
                changes.insert(*k, Some(vec![round as u8; v.len()]));
            }
        }
        for _ in 0..if round % 3 == 2 { 0 } else { n } {
            let roll = rng.gen_range(0..10);
            let key = if roll < 4 || state.is_empty() || round == 0 {
                fresh += 1;
                db.key_path(&fresh.to_le_bytes())
            } else {
                let i = rng.gen_range(0..state.len());
                *state.keys().nth(i).unwrap()
            };
            let value = if roll == 9 && round != 0 {
                None
            } else {
                let len = [0usize, 8, 40, 64, 65, 300, 2000][rng.gen_range(0..7)];
                Some(vec![round as u8; len])
            };
            changes.insert(key, value);
        }
        let before = db.stats().hashes_needed;
        let mut batch = db.begin();
        for (k, v) in &changes {
            match v {
                Some(v) => batch.put(*k, v.clone()).unwrap(),
                None => batch.delete(*k),
            }
        }
        db.commit(batch.finish().unwrap()).unwrap();
        for (k, v) in &changes {
            match v {
                Some(v) => state.insert(*k, v.clone()),
                None => state.remove(k),
            };
        }
        let after: Vec<KeyPath> = state.keys().copied().collect();
        let changed: Vec<KeyPath> = changes.keys().copied().collect();
        let written: u64 = changes
            .values()
            .flatten()
            .map(|v| 1 + v.len().div_ceil(64).max(1) as u64)
            .sum();
        let expected = internal_nodes_to_update(0, &after, &changed) + written;
        assert_eq!(
            db.stats().hashes_needed - before,
            expected,
            "round {round}: {} changes over {} entries",
            changes.len(),
            after.len()
        );
    }
}
