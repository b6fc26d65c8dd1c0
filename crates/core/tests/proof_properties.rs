//! Property tests of honest proofs: every path proof, multi-proof and witness the reference model
//! builds verifies against the model's root, and what it says about each key is what the model
//! holds; encodings round-trip exactly; a witness applies a block's changes to the same root as
//! the model; keys a proof does not cover, or a witness does not list, give errors.
//!
//! States are drawn around one random base key, each key sharing a random number of leading
//! bits with it, so tries are deep and lopsided as well as shallow. The proptest seed comes from
//! `SPRIG_TEST_SEED` when set (else fresh) and is printed; failures are also saved by proptest
//! under `proptest-regressions/`.

mod common;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed};
use sprig_core::proof::{verify_block, ProofNode};
use sprig_core::trie::{bit_at, set_bit};
use sprig_core::{
    Hasher, KeyPath, LeafData, Lookup, MultiProof, PathProof, ProofError, ReferenceModel, Terminal,
    ValueHash, Witness,
};

fn config(test: &str) -> Config {
    Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(common::seed(test)),
        // Failures are replayed by seed; no need to write files next to the sources from CI.
        failure_persistence: None,
        ..Config::default()
    }
}

/// A key sharing `shared` leading bits with `base`, the rest from `rest`.
fn near(base: &KeyPath, shared: usize, rest: KeyPath) -> KeyPath {
    let mut k = rest;
    common::copy_prefix(&mut k, base, shared);
    k
}

/// A model, some keys to ask about (present, near and random), and a change per asked key.
#[derive(Debug, Clone)]
struct Case {
    model: ReferenceModel,
    queries: Vec<KeyPath>,
    changes: Vec<(KeyPath, Option<Vec<u8>>)>,
    /// More keys, never listed or proved, whose claims must be true or errors.
    others: Vec<KeyPath>,
}

fn hasher() -> impl Strategy<Value = Hasher> {
    prop::sample::select(Hasher::ALL.to_vec())
}

/// How many leading bits a generated key shares with the base: often none or a few, often
/// very many (down to the last bit).
fn shared_bits() -> impl Strategy<Value = usize> {
    prop_oneof![0..=16usize, 0..=256usize, 240..=256usize]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40)
}

fn case() -> impl Strategy<Value = Case> {
    let entries = prop::collection::vec((shared_bits(), any::<KeyPath>(), value()), 0..40);
    let queries = prop::collection::vec(
        (0..3u8, any::<Index>(), shared_bits(), any::<KeyPath>()),
        1..12,
    );
    let changes = prop::collection::vec(prop::option::weighted(0.7, value()), 12);
    let others = prop::collection::vec((shared_bits(), any::<KeyPath>()), 8);
    (
        hasher(),
        any::<KeyPath>(),
        entries,
        queries,
        changes,
        others,
    )
        .prop_map(|(hasher, base, entries, queries, changes, others)| {
            let mut model = ReferenceModel::new(hasher);
            for (shared, rest, v) in entries {
                model.insert(near(&base, shared, rest), v);
            }
            let present: Vec<KeyPath> = model.iter().map(|(k, _)| *k).collect();
            let queries: Vec<KeyPath> = queries
                .into_iter()
                .map(|(kind, index, shared, rest)| match kind {
                    0 if !present.is_empty() => *index.get(&present),
                    1 if !present.is_empty() => near(index.get(&present), shared, rest),
                    _ => near(&base, shared, rest),
                })
                .collect();
            let mut distinct = queries.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let changes = distinct.iter().copied().zip(changes).collect();
            let others = others
                .into_iter()
                .map(|(shared, rest)| near(&base, shared, rest))
                .collect();
            Case {
                model,
                queries,
                changes,
                others,
            }
        })
}

/// Whether a verifier's answer about `key` is an error or the truth.
fn truthful(model: &ReferenceModel, key: &KeyPath, answer: Result<Lookup, ProofError>) -> bool {
    match answer {
        Ok(lookup) => lookup == common::truth(model, key),
        Err(_) => true,
    }
}

/// The positions (path prefix, depth) of the opaque nodes of a multi-proof.
fn opaque_positions(nodes: &[ProofNode]) -> Vec<(KeyPath, usize)> {
    fn walk(
        nodes: &[ProofNode],
        next: &mut usize,
        depth: usize,
        path: &mut KeyPath,
        out: &mut Vec<(KeyPath, usize)>,
    ) {
        let node = nodes[*next];
        *next += 1;
        match node {
            ProofNode::Opaque(_) => out.push((*path, depth)),
            ProofNode::Internal => {
                set_bit(path, depth, false);
                walk(nodes, next, depth + 1, path, out);
                set_bit(path, depth, true);
                walk(nodes, next, depth + 1, path, out);
                set_bit(path, depth, false);
            }
            ProofNode::Terminator | ProofNode::Leaf(_) => {}
        }
    }
    let mut out = Vec::new();
    let mut path = [0u8; 32];
    walk(nodes, &mut 0, 0, &mut path, &mut out);
    out
}

/// The value the model does not hold for `key`: something else if present, a value if absent.
fn wrong_value(model: &ReferenceModel, key: &KeyPath) -> Option<Vec<u8>> {
    match model.get(key) {
        Some(v) => {
            let mut w = v.to_vec();
            w.push(1);
            Some(w)
        }
        None => Some(Vec::new()),
    }
}

proptest! {
    #![proptest_config(config("proof_properties::path_proofs"))]
    #[test]
    fn path_proofs_verify_and_tell_the_truth(case in case()) {
        let model = &case.model;
        let h = model.hasher();
        let root = model.root();
        for key in &case.queries {
            let proof = model.path_proof(key);
            prop_assert!(proof.siblings.len() <= 256);
            prop_assert_eq!(proof.verify(h, &root, key), Ok(common::truth(model, key)));
            prop_assert_eq!(proof.verify_value(h, &root, key, model.get(key)), Ok(()));
            prop_assert_eq!(
                proof.verify_value(h, &root, key, wrong_value(model, key).as_deref()),
                Err(ProofError::ValueMismatch { key: *key })
            );
            // Deleting the key when present, or asserting absence wrongly, is refused too.
            if model.get(key).is_some() {
                prop_assert!(proof.verify_value(h, &root, key, None).is_err());
            }

            let bytes = proof.encode(h);
            let decoded = PathProof::decode(&bytes, h);
            prop_assert_eq!(decoded.as_ref(), Ok(&proof));
            prop_assert_eq!(decoded.map(|p| p.encode(h)), Ok(bytes.clone()));
            prop_assert_eq!(sprig_core::proof::encoded_hasher(&bytes), Ok(h));
            for other in Hasher::ALL.into_iter().filter(|o| *o != h) {
                prop_assert_eq!(
                    PathProof::decode(&bytes, other),
                    Err(ProofError::HasherMismatch { expected: other.id(), found: h.id() })
                );
            }

            // The same proof asked about any other key: an error, or the truth (a proof
            // covers every key whose path ends at its terminal).
            for other in case.queries.iter().chain(&case.others) {
                prop_assert!(truthful(model, other, proof.verify(h, &root, other)));
            }
        }
    }
}

proptest! {
    #![proptest_config(config("proof_properties::multi_proofs"))]
    #[test]
    fn multi_proofs_verify_and_tell_the_truth(case in case()) {
        let model = &case.model;
        let h = model.hasher();
        let root = model.root();
        let proof = model.multi_proof(&case.queries);

        let bytes = proof.encode(h);
        let decoded = MultiProof::decode(&bytes, h);
        prop_assert_eq!(decoded.as_ref(), Ok(&proof));
        prop_assert_eq!(decoded.map(|p| p.encode(h)), Ok(bytes.clone()));

        let verified = proof.verify(h, &root).expect("honest multi-proof verifies");
        prop_assert_eq!(verified.root(), root);
        for key in &case.queries {
            prop_assert_eq!(verified.lookup(key), Ok(common::truth(model, key)));
        }
        for key in &case.others {
            prop_assert!(truthful(model, key, verified.lookup(key)));
        }
        // Every key whose path enters an opaque subtree is not covered.
        for (prefix, depth) in opaque_positions(&proof.nodes) {
            for rest in case.others.iter().take(2) {
                let key = near(&prefix, depth, *rest);
                prop_assert_eq!(verified.lookup(&key), Err(ProofError::NotCovered { key }));
                prop_assert_eq!(
                    verified.apply(&[(key, None)]),
                    Err(ProofError::NotCovered { key })
                );
            }
        }

        // Applying changes to the proven keys gives the model's next root.
        let hashed = common::hashed_changes(h, &case.changes);
        let mut after = model.clone();
        after.apply(case.changes.clone());
        prop_assert_eq!(verified.apply(&hashed), Ok(after.root()));
        prop_assert_eq!(verified.apply(&[]), Ok(root));

        // Against any other root, it fails.
        prop_assert!(proof.verify(h, &after.root()).is_err() || after.root() == root);
    }
}

proptest! {
    #![proptest_config(config("proof_properties::witnesses"))]
    #[test]
    fn witnesses_verify_and_apply_like_the_model(case in case()) {
        let model = &case.model;
        let h = model.hasher();
        let root = model.root();
        let witness = model.witness(&case.queries);
        prop_assert!(witness.keys.windows(2).all(|w| w[0] < w[1]));

        let bytes = witness.encode(h);
        let decoded = Witness::decode(&bytes, h);
        prop_assert_eq!(decoded.as_ref(), Ok(&witness));
        prop_assert_eq!(decoded.map(|w| w.encode(h)), Ok(bytes.clone()));

        let verified = witness.verify(h, &root).expect("honest witness verifies");
        prop_assert_eq!(verified.root(), root);
        prop_assert_eq!(verified.keys(), &witness.keys[..]);
        for key in &case.queries {
            prop_assert_eq!(verified.lookup(key), Ok(common::truth(model, key)));
            prop_assert_eq!(verified.check_value(key, model.get(key)), Ok(()));
            prop_assert_eq!(
                verified.check_value(key, wrong_value(model, key).as_deref()),
                Err(ProofError::ValueMismatch { key: *key })
            );
        }

        // The block check: the same new root as the model, by both entry points.
        let hashed = common::hashed_changes(h, &case.changes);
        let mut after = model.clone();
        after.apply(case.changes.clone());
        prop_assert_eq!(verified.apply(&hashed), Ok(after.root()));
        prop_assert_eq!(verify_block(h, &root, &witness, &hashed), Ok(after.root()));
        // Order of the changes does not matter.
        let mut reversed = hashed.clone();
        reversed.reverse();
        prop_assert_eq!(verified.apply(&reversed), Ok(after.root()));
        prop_assert_eq!(verified.apply(&[]), Ok(root));

        // Keys the witness does not list: lookups, value checks and changes are refused, even
        // when the proof happens to cover them.
        for key in case.others.iter().filter(|k| witness.keys.binary_search(k).is_err()) {
            let err = Err(ProofError::NotCovered { key: *key });
            prop_assert_eq!(verified.lookup(key), err.clone());
            prop_assert_eq!(verified.check_value(key, model.get(key)), Err(ProofError::NotCovered { key: *key }));
            let mut with_unlisted = hashed.clone();
            with_unlisted.push((*key, Some([7u8; 32])));
            prop_assert_eq!(verified.apply(&with_unlisted), Err(ProofError::NotCovered { key: *key }));
            prop_assert_eq!(
                verify_block(h, &root, &witness, &with_unlisted),
                Err(ProofError::NotCovered { key: *key })
            );
        }
        // The same key twice in one block is refused.
        if let Some((key, _)) = hashed.first() {
            let mut twice = hashed.clone();
            twice.push((*key, None));
            prop_assert_eq!(verified.apply(&twice), Err(ProofError::DuplicateKey { key: *key }));
        }
        // Against another root, the witness is refused.
        if after.root() != root {
            prop_assert!(witness.verify(h, &after.root()).is_err());
            prop_assert!(verify_block(h, &after.root(), &witness, &hashed).is_err());
        }
    }
}

/// Arbitrary (not necessarily honest) structures, for the round trip of the encodings.
fn any_leaf() -> impl Strategy<Value = LeafData> {
    (any::<KeyPath>(), any::<ValueHash>()).prop_map(|(key_path, value_hash)| LeafData {
        key_path,
        value_hash,
    })
}

fn any_path_proof() -> impl Strategy<Value = PathProof> {
    (
        prop::option::of(any_leaf()),
        prop_oneof![
            prop::collection::vec(any::<[u8; 32]>(), 0..8),
            prop::collection::vec(any::<[u8; 32]>(), 250..=256),
        ],
    )
        .prop_map(|(leaf, siblings)| PathProof {
            terminal: leaf.map_or(Terminal::Empty, Terminal::Leaf),
            siblings,
        })
}

fn any_nodes() -> impl Strategy<Value = Vec<ProofNode>> {
    prop::collection::vec(
        prop_oneof![
            Just(ProofNode::Internal),
            Just(ProofNode::Terminator),
            any_leaf().prop_map(ProofNode::Leaf),
            any::<[u8; 32]>().prop_map(ProofNode::Opaque),
        ],
        0..40,
    )
}

proptest! {
    #![proptest_config(config("proof_properties::round_trips"))]
    #[test]
    fn any_structure_round_trips(
        h in hasher(),
        path in any_path_proof(),
        nodes in any_nodes(),
        keys in prop::collection::vec(any::<KeyPath>(), 0..12),
    ) {
        let bytes = path.encode(h);
        prop_assert_eq!(PathProof::decode(&bytes, h), Ok(path));

        let multi = MultiProof { nodes };
        let bytes = multi.encode(h);
        prop_assert_eq!(MultiProof::decode(&bytes, h), Ok(multi.clone()));

        // The encoding keeps the key list as given, sorted or not; verification judges it.
        let witness = Witness { keys, proof: multi };
        let bytes = witness.encode(h);
        prop_assert_eq!(Witness::decode(&bytes, h), Ok(witness));
    }
}

/// A key's bit at every depth of a proof is what lookups follow: a sanity check of the helper
/// that finds opaque positions, on a hand-made proof.
#[test]
fn opaque_positions_follow_the_pre_order() {
    let nodes = [
        ProofNode::Internal,
        ProofNode::Opaque([1; 32]),
        ProofNode::Internal,
        ProofNode::Terminator,
        ProofNode::Opaque([2; 32]),
    ];
    let found = opaque_positions(&nodes);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].1, 1);
    assert!(!bit_at(&found[0].0, 0));
    assert_eq!(found[1].1, 2);
    assert!(bit_at(&found[1].0, 0) && bit_at(&found[1].0, 1));
}
