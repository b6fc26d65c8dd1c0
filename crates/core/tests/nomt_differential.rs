//! Differential tests against NOMT: the same key-value set must give bit-for-bit the same root
//! in Sprig's reference model as in NOMT, and Sprig's proofs must verify with NOMT's verifier.
//!
//! Three NOMT oracles, from cheapest to most real:
//! - `nomt_core::update::build_trie`, NOMT's root computation, over random sets of 0 to 10,000
//!   keys (log-uniform sizes) and over hand-picked edge cases;
//! - `nomt_core::proof`: Sprig's path proofs fed to NOMT's path-proof verifier, and Sprig's
//!   witness updates replayed through NOMT's path-proof and multi-proof update verifiers;
//! - `nomt`, a real NOMT database on a temporary directory, for the edge cases: its committed
//!   roots and its own path proofs must equal Sprig's.
//!
//! Randomized tests print their seed; set `SPRIG_TEST_SEED` to replay one.

mod common;

use bitvec::prelude::*;
use common::{Shape, NOMT_HASHERS};
use nomt_core::hasher::{Blake3Hasher, NodeHasher, Sha2Hasher, ValueHasher};
use nomt_core::proof::{self as nomt_proof, PathProofTerminal};
use nomt_core::trie_pos::TriePosition;
use rand::Rng;
use sprig_core::proof::path_proof_from_entries;
use sprig_core::{
    Hasher, KeyPath, Lookup, Node, PathProof, ReferenceModel, Terminal, ValueHash, TERMINATOR,
};

/// Random sets per hasher.
const RANDOM_SETS: usize = 1_000;
/// The largest random set.
const MAX_SET_KEYS: usize = 10_000;
/// Keys proved (path proofs) in a random set.
const PROVED_PER_SET: usize = 6;
/// Keys changed through a witness in a random set.
const CHANGED_PER_SET: usize = 6;
/// Proofs cost a pass over the whole set each: sets above this size cross-check their proofs
/// only one time in `LARGE_SET_PROOF_EVERY` (their roots are always compared).
const LARGE_SET_KEYS: usize = 1_000;
const LARGE_SET_PROOF_EVERY: usize = 10;

/// Run `$body` with `$H` naming NOMT's hasher type for Sprig's `$hasher`.
macro_rules! with_nomt_hasher {
    ($hasher:expr, $H:ident => $body:expr) => {
        match $hasher {
            Hasher::Blake3 => {
                type $H = Blake3Hasher;
                $body
            }
            Hasher::Sha256 => {
                type $H = Sha2Hasher;
                $body
            }
            other => panic!("NOMT has no {other} hasher"),
        }
    };
}

/// NOMT's root of a set of (key path, value hash), sorted by key path.
fn nomt_root<H: NodeHasher>(entries: &[(KeyPath, ValueHash)]) -> Node {
    nomt_core::update::build_trie::<H>(0, entries.iter().copied(), |_| {})
}

fn nomt_root_of(hasher: Hasher, entries: &[(KeyPath, ValueHash)]) -> Node {
    with_nomt_hasher!(hasher, H => nomt_root::<H>(entries))
}

fn nomt_value_hash(hasher: Hasher, value: &[u8]) -> ValueHash {
    with_nomt_hasher!(hasher, H => <H as ValueHasher>::hash_value(value))
}

fn nomt_leaf(leaf: &sprig_core::LeafData) -> nomt_core::trie::LeafData {
    nomt_core::trie::LeafData {
        key_path: leaf.key_path,
        value_hash: leaf.value_hash,
    }
}

/// Sprig's path proof of `key` in NOMT's types.
fn to_nomt_path_proof(proof: &PathProof, key: &KeyPath) -> nomt_proof::PathProof {
    let depth = proof.siblings.len();
    let terminal = match &proof.terminal {
        Terminal::Leaf(leaf) => PathProofTerminal::Leaf(nomt_leaf(leaf)),
        Terminal::Empty if depth == 0 => PathProofTerminal::Terminator(TriePosition::new()),
        Terminal::Empty => {
            PathProofTerminal::Terminator(TriePosition::from_path_and_depth(*key, depth as u16))
        }
    };
    nomt_proof::PathProof {
        terminal,
        siblings: proof.siblings.clone(),
    }
}

/// Verify Sprig's path proof of `key` with NOMT's verifier and check that NOMT reads the same
/// fact from it as the model holds.
fn check_path_proof_with_nomt<H: NodeHasher>(
    proof: &PathProof,
    key: &KeyPath,
    root: &Node,
    truth: Lookup,
) {
    let nomt = to_nomt_path_proof(proof, key);
    let verified = nomt
        .verify::<H>(key.view_bits::<Msb0>(), *root)
        .unwrap_or_else(|e| panic!("NOMT rejects Sprig's path proof of {key:02x?}: {e:?}"));
    match truth {
        Lookup::Present(value_hash) => {
            let leaf = nomt_core::trie::LeafData {
                key_path: *key,
                value_hash,
            };
            assert_eq!(verified.confirm_value(&leaf).ok(), Some(true));
        }
        Lookup::Absent => {
            assert_eq!(verified.confirm_nonexistence(key).ok(), Some(true));
        }
    }
}

/// Changes as a witness applies them: a new value hash, or `None` to delete.
type Changes = Vec<(KeyPath, Option<ValueHash>)>;

/// The root after `changes` (sorted, distinct keys) computed by NOMT's two update verifiers from
/// Sprig's path proofs of the changed keys; both must agree.
fn nomt_verified_update<H: NodeHasher>(
    entries: &[(KeyPath, ValueHash)],
    root: &Node,
    hasher: Hasher,
    changes: &[(KeyPath, Option<ValueHash>)],
) -> Node {
    // One path per distinct terminal; consecutive sorted keys share a terminal when their
    // proofs end at the same position.
    let mut paths: Vec<(nomt_proof::PathProof, KeyPath, Changes)> = Vec::new();
    for (key, change) in changes {
        let proof = path_proof_from_entries(hasher, entries, key);
        let depth = proof.siblings.len();
        if let Some((last, last_key, ops)) = paths.last_mut() {
            if last.siblings.len() == depth
                && last_key.view_bits::<Msb0>()[..depth] == key.view_bits::<Msb0>()[..depth]
            {
                ops.push((*key, *change));
                continue;
            }
        }
        paths.push((to_nomt_path_proof(&proof, key), *key, vec![(*key, *change)]));
    }

    let updates: Vec<nomt_proof::PathUpdate> = paths
        .iter()
        .map(|(proof, key, ops)| nomt_proof::PathUpdate {
            inner: proof
                .verify::<H>(key.view_bits::<Msb0>(), *root)
                .expect("NOMT verifies Sprig's path proof"),
            ops: ops.clone(),
        })
        .collect();
    let by_paths = nomt_proof::verify_update::<H>(*root, &updates).expect("NOMT path update");

    let multi = nomt_proof::MultiProof::from_path_proofs(
        paths.iter().map(|(proof, _, _)| proof.clone()).collect(),
    );
    let verified = nomt_proof::verify_multi_proof::<H>(&multi, *root)
        .expect("NOMT verifies the multi-proof built from Sprig's path proofs");
    for (key, _) in changes {
        // Every changed key is in scope of the multi-proof.
        verified.confirm_nonexistence(key).expect("key in scope");
    }
    let by_multi = nomt_proof::verify_multi_proof_update::<H>(&verified, changes.to_vec())
        .expect("NOMT multi-proof update");
    assert_eq!(by_paths, by_multi, "NOMT's two update verifiers disagree");
    by_paths
}

/// Everything checked on one state: root equality with NOMT, Sprig's path proofs of `queries`
/// through NOMT's verifier, and `changes` applied through Sprig's witness, NOMT's update
/// verifiers, the model and NOMT's root computation, all four giving one root.
fn check_state(
    model: &ReferenceModel,
    queries: &[KeyPath],
    changes: &[(KeyPath, Option<Vec<u8>>)],
) -> Node {
    let hasher = model.hasher();
    let entries = model.leaves();
    let root = model.root();
    assert_eq!(
        root,
        nomt_root_of(hasher, &entries),
        "root differs from NOMT's ({} keys, {hasher})",
        model.len()
    );

    for key in queries {
        let proof = path_proof_from_entries(hasher, &entries, key);
        let truth = common::truth(model, key);
        assert_eq!(proof.verify(hasher, &root, key), Ok(truth));
        with_nomt_hasher!(hasher, H => check_path_proof_with_nomt::<H>(&proof, key, &root, truth));
    }

    if changes.is_empty() {
        return root;
    }
    let mut changes = changes.to_vec();
    changes.sort_by_key(|c| c.0);
    changes.dedup_by_key(|c| c.0);
    let hashed = common::hashed_changes(hasher, &changes);
    let keys: Vec<KeyPath> = changes.iter().map(|c| c.0).collect();

    let witness = model.witness(&keys);
    let by_witness = witness
        .verify(hasher, &root)
        .and_then(|w| w.apply(&hashed))
        .expect("honest witness applies");
    let by_nomt =
        with_nomt_hasher!(hasher, H => nomt_verified_update::<H>(&entries, &root, hasher, &hashed));

    let mut after = model.clone();
    after.apply(changes);
    let by_model = after.root();
    assert_eq!(
        by_witness, by_model,
        "witness update differs from the model"
    );
    assert_eq!(
        by_nomt, by_model,
        "NOMT's verified update differs from the model"
    );
    assert_eq!(by_model, nomt_root_of(hasher, &after.leaves()));
    by_model
}

/// A log-uniform size in `0..=max`: as many sets of 1–10 keys as of 1,000–10,000.
fn log_uniform_size(rng: &mut impl Rng, max: usize) -> usize {
    let x: f64 = rng.gen_range(0.0..((max + 1) as f64).ln());
    (x.exp() as usize).saturating_sub(1).min(max)
}

fn random_sets(hasher: Hasher, test: &str) {
    let mut rng = common::rng(test);
    let mut keys_total = 0usize;
    let mut largest = 0usize;
    let mut empty = 0usize;
    let mut proofs = 0usize;
    let mut updates = 0usize;
    let started = std::time::Instant::now();
    for case in 0..RANDOM_SETS {
        let shape = Shape::ALL[case % Shape::ALL.len()];
        let size = log_uniform_size(&mut rng, MAX_SET_KEYS);
        let model = common::gen_model(&mut rng, hasher, size, shape);
        let (proved, changed) = if size <= LARGE_SET_KEYS || case % LARGE_SET_PROOF_EVERY == 0 {
            (PROVED_PER_SET, CHANGED_PER_SET)
        } else {
            (0, 0)
        };
        let queries = common::query_keys(&mut rng, &model, proved);
        let change_keys = common::query_keys(&mut rng, &model, changed);
        let changes = common::gen_changes(&mut rng, &change_keys);
        check_state(&model, &queries, &changes);
        keys_total += model.len();
        largest = largest.max(model.len());
        empty += usize::from(model.is_empty());
        proofs += queries.len();
        updates += usize::from(!changes.is_empty());
    }
    println!(
        "{test}: {RANDOM_SETS} random sets ({empty} empty, largest {largest}, {keys_total} keys in \
         all), {proofs} path proofs and {updates} witness updates cross-checked with NOMT in \
         {:.2?}",
        started.elapsed()
    );
}

#[test]
fn random_sets_match_nomt_blake3() {
    random_sets(Hasher::Blake3, "random_sets_match_nomt_blake3");
}

#[test]
fn random_sets_match_nomt_sha256() {
    random_sets(Hasher::Sha256, "random_sets_match_nomt_sha256");
}

#[test]
fn value_hashes_match_nomt() {
    let mut rng = common::rng("value_hashes_match_nomt");
    let mut values: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0xff; 64], vec![7u8; 1 << 20]];
    values.extend((0..200).map(|_| common::gen_value(&mut rng)));
    for hasher in NOMT_HASHERS {
        for v in &values {
            assert_eq!(hasher.hash_value(v), nomt_value_hash(hasher, v));
        }
    }
}

/// One edge case: batches of changes applied in order, the state checked after each.
struct EdgeCase {
    name: &'static str,
    batches: Vec<Vec<(KeyPath, Option<Vec<u8>>)>>,
}

fn key_with_last_byte(prefix_byte: u8, last: u8) -> KeyPath {
    let mut k = [prefix_byte; 32];
    k[31] = last;
    k
}

fn puts(keys: &[KeyPath], value: &[u8]) -> Vec<(KeyPath, Option<Vec<u8>>)> {
    keys.iter().map(|k| (*k, Some(value.to_vec()))).collect()
}

fn edge_cases(rng: &mut impl Rng) -> Vec<EdgeCase> {
    let base: KeyPath = rng.gen();
    let mut deep = Vec::new();
    // Keys sharing 200, 230, 250 and 255 leading bits with one base (and so with each other).
    for shared in [200usize, 201, 230, 250, 255] {
        for _ in 0..3 {
            deep.push(common::key_near(rng, &base, shared));
        }
    }
    deep.push(base);
    deep.push(common::flip_bit(&base, 255));
    deep.sort_unstable();
    deep.dedup();

    let mut some: Vec<KeyPath> = (0..40).map(|_| common::random_key(rng)).collect();
    some.extend(deep.iter().take(6));
    let big: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 31 % 251) as u8).collect();

    vec![
        EdgeCase {
            name: "empty",
            batches: vec![vec![]],
        },
        EdgeCase {
            name: "one key",
            batches: vec![puts(&[rng.gen()], b"only")],
        },
        EdgeCase {
            name: "two keys differing only in the last bit",
            batches: vec![puts(
                &[
                    key_with_last_byte(0x5a, 0b1010_1010),
                    key_with_last_byte(0x5a, 0b1010_1011),
                ],
                b"twin",
            )],
        },
        EdgeCase {
            name: "keys sharing 200+ leading bits",
            batches: vec![
                puts(&deep, b"deep"),
                // A few shallow neighbours too, then drop half the deep keys.
                puts(&[rng.gen(), rng.gen()], b"shallow"),
                deep.iter().step_by(2).map(|k| (*k, None)).collect(),
            ],
        },
        EdgeCase {
            name: "extreme keys (all zeros, all ones)",
            batches: vec![puts(
                &[[0u8; 32], [0xff; 32], key_with_last_byte(0, 1)],
                b"x",
            )],
        },
        EdgeCase {
            name: "insert then delete back to empty",
            batches: vec![
                puts(&some, b"v"),
                some.iter().step_by(2).map(|k| (*k, None)).collect(),
                some.iter().skip(1).step_by(2).map(|k| (*k, None)).collect(),
            ],
        },
        EdgeCase {
            name: "values of 0 bytes and of 1 MiB",
            batches: vec![
                vec![
                    (key_with_last_byte(1, 0), Some(vec![])),
                    (key_with_last_byte(2, 0), Some(big.clone())),
                    (key_with_last_byte(2, 1), Some(vec![])),
                ],
                vec![(key_with_last_byte(1, 0), Some(big.clone()))],
                vec![(key_with_last_byte(2, 0), Some(vec![]))],
            ],
        },
    ]
}

/// The keys an edge case proves after each batch: every key it ever touched, a near miss of
/// each, and a few random ones.
fn edge_queries(rng: &mut impl Rng, case: &EdgeCase) -> Vec<KeyPath> {
    let mut keys: Vec<KeyPath> = case.batches.iter().flatten().map(|c| c.0).collect();
    let near: Vec<KeyPath> = keys.iter().map(|k| common::flip_bit(k, 255)).collect();
    keys.extend(near);
    keys.extend((0..4).map(|_| common::random_key(rng)));
    keys.sort_unstable();
    keys.dedup();
    keys
}

#[test]
fn edge_cases_match_nomt_core() {
    let mut rng = common::rng("edge_cases_match_nomt_core");
    let mut checked = 0;
    for hasher in NOMT_HASHERS {
        for case in edge_cases(&mut rng) {
            let queries = edge_queries(&mut rng, &case);
            let mut model = ReferenceModel::new(hasher);
            for batch in &case.batches {
                // Check the batch as a witness update of the state before it, then apply it.
                check_state(&model, &queries, batch);
                model.apply(batch.clone());
                check_state(&model, &queries, &[]);
                checked += 1;
            }
            if case.name == "empty" || case.name.contains("back to empty") {
                assert_eq!(model.root(), TERMINATOR, "{}", case.name);
            }
        }
    }
    println!("edge_cases_match_nomt_core: {checked} states checked");
}

/// The real NOMT database: open on a temporary directory, commit each batch of an edge case,
/// and compare its root and its own path proofs with Sprig's.
fn edge_cases_in_nomt_db<T: nomt::HashAlgorithm>(hasher: Hasher, rng: &mut impl Rng) -> usize {
    let mut commits = 0;
    for case in edge_cases(rng) {
        let queries = edge_queries(rng, &case);
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut options = nomt::Options::new();
        options.path(dir.path().join("nomt"));
        options.commit_concurrency(1);
        options.io_workers(1);
        options.hashtable_buckets(4096);
        let db = nomt::Nomt::<T>::open(options).expect("open NOMT");
        let mut model = ReferenceModel::new(hasher);
        for batch in &case.batches {
            let mut batch = batch.clone();
            batch.sort_by_key(|c| c.0);
            let session = db.begin_session(nomt::SessionParams::default());
            let actuals = batch
                .iter()
                .map(|(k, v)| (*k, nomt::KeyReadWrite::Write(v.clone())))
                .collect();
            let finished = session.finish(actuals).expect("NOMT session");
            finished.commit(&db).expect("NOMT commit");
            model.apply(batch);
            commits += 1;

            let root = model.root();
            assert_eq!(
                db.root().into_inner(),
                root,
                "{}: root differs from NOMT's",
                case.name
            );
            let session = db.begin_session(nomt::SessionParams::default());
            for key in &queries {
                let theirs = session.prove(*key).expect("NOMT proof");
                let ours = model.path_proof(key);
                assert_eq!(
                    theirs.siblings, ours.siblings,
                    "{}: NOMT's siblings for {key:02x?} differ from Sprig's",
                    case.name
                );
                match (&theirs.terminal, &ours.terminal) {
                    (PathProofTerminal::Leaf(a), Terminal::Leaf(b)) => {
                        assert_eq!((a.key_path, a.value_hash), (b.key_path, b.value_hash));
                    }
                    (PathProofTerminal::Terminator(_), Terminal::Empty) => {}
                    (a, b) => panic!("{}: NOMT ends at {a:?}, Sprig at {b:?}", case.name),
                }
                // And NOMT's own proof, read back into Sprig's types, verifies with Sprig.
                let back = PathProof {
                    terminal: match &theirs.terminal {
                        PathProofTerminal::Leaf(l) => Terminal::Leaf(sprig_core::LeafData {
                            key_path: l.key_path,
                            value_hash: l.value_hash,
                        }),
                        PathProofTerminal::Terminator(_) => Terminal::Empty,
                    },
                    siblings: theirs.siblings.clone(),
                };
                assert_eq!(
                    back.verify(hasher, &root, key),
                    Ok(common::truth(&model, key))
                );
            }
            for (key, value) in model.iter() {
                assert_eq!(
                    session.read(*key).expect("NOMT read").as_deref(),
                    Some(value)
                );
            }
        }
    }
    commits
}

#[test]
fn edge_cases_match_a_nomt_database() {
    let mut rng = common::rng("edge_cases_match_a_nomt_database");
    let blake3 = edge_cases_in_nomt_db::<Blake3Hasher>(Hasher::Blake3, &mut rng);
    let sha256 = edge_cases_in_nomt_db::<Sha2Hasher>(Hasher::Sha256, &mut rng);
    println!("edge_cases_match_a_nomt_database: {blake3} + {sha256} NOMT commits compared");
}
