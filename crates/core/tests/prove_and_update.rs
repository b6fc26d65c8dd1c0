//! `prove_and_update` gives exactly the multi-proof `prove_subtrie` gives and exactly the root
//! the model computes after the changes.

use proptest::prelude::*;
use sprig_core::proof::{prove_and_update, prove_subtrie};
use sprig_core::trie::root_of;
use sprig_core::{Hasher, KeyPath, ReferenceModel, ValueHash};

fn key(i: u16, clustered: bool) -> KeyPath {
    let mut k = Hasher::Blake3.hash_value(&i.to_le_bytes());
    if clustered {
        k[..29].copy_from_slice(&[0x42; 29]);
    }
    k
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn one_pass_equals_prove_then_apply(
        present in proptest::collection::btree_set(0u16..400, 0..120),
        touched in proptest::collection::btree_map(0u16..400, proptest::option::of(any::<u8>()), 0..40),
        reads in proptest::collection::btree_set(0u16..400, 0..20),
        clustered in any::<bool>(),
    ) {
        let h = Hasher::Sha256;
        let mut model = ReferenceModel::new(h);
        for i in &present {
            model.insert(key(*i, clustered), vec![*i as u8; 3]);
        }
        let entries = model.leaves();
        let mut keys: Vec<KeyPath> = touched.keys().chain(reads.iter()).map(|i| key(*i, clustered)).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut changes: Vec<(KeyPath, Option<ValueHash>)> = touched
            .iter()
            .map(|(i, v)| (key(*i, clustered), v.map(|b| h.hash_value(&[b]))))
            .collect();
        changes.sort_unstable_by_key(|c| c.0);

        let mut one_pass = Vec::new();
        let new_root = prove_and_update(h, 0, &entries, &keys, &changes, &mut one_pass);
        let mut proof = Vec::new();
        prove_subtrie(h, 0, &entries, &keys, &mut proof);
        prop_assert_eq!(&one_pass, &proof);

        for (i, v) in &touched {
            match v {
                Some(b) => { model.insert(key(*i, clustered), vec![*b]); }
                None => { model.remove(&key(*i, clustered)); }
            }
        }
        prop_assert_eq!(new_root, model.root());
        prop_assert_eq!(new_root, root_of(h, &model.leaves()));
    }
}
