//! Hostile inputs to the verifier: valid path proofs, multi-proofs and witnesses, mutated in
//! their bytes and in their structure, and made-up inputs (absurd depths, huge counts, random
//! bytes, random trees).
//!
//! What must hold:
//! - nothing ever panics (each call runs under `catch_unwind`, so a panic names its mutant);
//! - every mutant of the proof itself (bytes, hashes, tags, counts, structure), and every check
//!   against another root, is rejected with an error;
//! - a mutant that only changes which key is asked about (another key for a path proof or a
//!   lookup, a key of a witness's list) gets either an error or a claim that is true in the
//!   model: a proof covers every key whose path ends at the same terminal. Each structure also
//!   has "another key" cases that must be rejected, and are.
//!
//! Each test prints how many mutants it made and how they fared. Randomized choices print
//! their seed; set `SPRIG_TEST_SEED` to replay.

mod common;

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sprig_core::proof::{verify_block, ProofNode, MAX_MULTIPROOF_NODES, MAX_WITNESS_KEYS};
use sprig_core::trie::{bit_at, root_of, set_bit, KEY_BITS};
use sprig_core::{
    Hasher, KeyPath, LeafData, Lookup, MultiProof, Node, PathProof, ProofError, ReferenceModel,
    Terminal, ValueHash, Witness, TERMINATOR,
};
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Encodings up to this many bits get every bit flipped; longer ones get their first
/// `FLIP_HEAD_BYTES` and last `FLIP_TAIL_BYTES` flipped bit by bit, plus `FLIP_SAMPLE` random
/// bits (each flip of a deep proof costs a re-hash of ~256 levels).
const FULL_FLIP_BITS: usize = 8_192;
const FLIP_HEAD_BYTES: usize = 80;
const FLIP_TAIL_BYTES: usize = 40;
const FLIP_SAMPLE: usize = 2_000;
/// Proofs with more nodes (or siblings) than this get node-by-node mutations at this many
/// random nodes (plus the first and last); smaller ones at every node.
const NODE_SAMPLE: usize = 64;
/// Random byte strings and random trees per structure and hasher.
const RANDOM_INPUTS: usize = 1_500;

// ---------------------------------------------------------------------------------------------
// Bookkeeping.

/// Run `f`, turning a panic into a test failure that names the input.
fn guarded<T>(what: impl Fn() -> String, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => panic!("the verifier panicked on {}", what()),
    }
}

/// Counts of one structure's mutants.
#[derive(Default)]
struct Tally {
    /// Mutants that must be rejected.
    mutants: usize,
    /// Of which rejected (all of them, or the test fails).
    rejected: usize,
    /// Questions about another key (or a changed key list).
    key_swaps: usize,
    /// Of which answered with an error.
    key_swaps_rejected: usize,
    /// Of which answered with a claim true in the model.
    key_swaps_true: usize,
    /// Key swaps constructed so that they must be rejected (counted in `key_swaps` too).
    key_swaps_must_reject: usize,
    /// Honest-equivalent variants (a subtree folded into its hash, keys dropped from a
    /// witness): they must verify and tell the truth.
    variants: usize,
}

impl Tally {
    fn must_reject<T: Debug>(&mut self, what: impl Fn() -> String, outcome: Result<T, ProofError>) {
        self.mutants += 1;
        match outcome {
            Err(e) => {
                // The error's message must not panic either.
                let _ = e.to_string();
                self.rejected += 1;
            }
            Ok(v) => panic!("accepted a mutant: {}: {v:?}", what()),
        }
    }

    /// An answer about `key` that must be an error or the truth.
    fn key_swap(
        &mut self,
        model: &ReferenceModel,
        key: &KeyPath,
        what: impl Fn() -> String,
        outcome: Result<Lookup, ProofError>,
    ) {
        self.key_swaps += 1;
        match outcome {
            Err(_) => self.key_swaps_rejected += 1,
            Ok(lookup) => {
                assert_eq!(
                    lookup,
                    common::truth(model, key),
                    "false claim about another key: {}",
                    what()
                );
                self.key_swaps_true += 1;
            }
        }
    }

    /// A key swap that must be rejected.
    fn key_swap_rejected<T: Debug>(
        &mut self,
        what: impl Fn() -> String,
        outcome: Result<T, ProofError>,
    ) {
        self.key_swaps += 1;
        self.key_swaps_must_reject += 1;
        match outcome {
            Err(_) => self.key_swaps_rejected += 1,
            Ok(v) => panic!("accepted a key that must be rejected: {}: {v:?}", what()),
        }
    }

    fn print(&self, what: &str) {
        println!(
            "{what}: {} mutants, {} rejected, {} accepted; {} other-key questions ({} must-reject), \
             {} rejected, {} true claims, 0 false; {} honest-equivalent variants verified",
            self.mutants,
            self.rejected,
            self.mutants - self.rejected,
            self.key_swaps,
            self.key_swaps_must_reject,
            self.key_swaps_rejected,
            self.key_swaps_true,
            self.variants
        );
        assert_eq!(self.mutants, self.rejected);
        assert_eq!(
            self.key_swaps,
            self.key_swaps_rejected + self.key_swaps_true
        );
    }
}

/// The bit positions of an encoding of `len` bytes to flip.
fn bits_to_flip(rng: &mut impl Rng, len: usize) -> Vec<usize> {
    let total = len * 8;
    if total <= FULL_FLIP_BITS {
        return (0..total).collect();
    }
    let mut bits: Vec<usize> = (0..FLIP_HEAD_BYTES * 8)
        .chain(total - FLIP_TAIL_BYTES * 8..total)
        .collect();
    bits.extend((0..FLIP_SAMPLE).map(|_| rng.gen_range(0..total)));
    bits
}

fn flipped(bytes: &[u8], bit: usize) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[bit / 8] ^= 0x80 >> (bit % 8);
    b
}

/// Extensions of a valid encoding: trailing bytes of every short length, a whole extra node or
/// sibling, and the encoding twice.
fn extensions(rng: &mut impl Rng, bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for n in 1..=40 {
        let mut b = bytes.to_vec();
        b.extend((0..n).map(|_| rng.gen::<u8>()));
        out.push(b);
    }
    for extra in [
        vec![0u8; 32],
        vec![0u8; 33],
        vec![1u8; 33],
        vec![3u8],
        vec![0u8],
    ] {
        let mut b = bytes.to_vec();
        b.extend(extra);
        out.push(b);
    }
    let mut twice = bytes.to_vec();
    twice.extend_from_slice(bytes);
    out.push(twice);
    out
}

/// A state with shallow keys, a cluster of keys sharing 200 to 255 leading bits (paths down to
/// depth 256), and two keys that differ only in the last bit.
struct Fixture {
    hasher: Hasher,
    model: ReferenceModel,
    root: Node,
    /// Roots the proofs must not verify against.
    other_roots: Vec<Node>,
    /// Keys to prove: present and absent, shallow and deep.
    queries: Vec<KeyPath>,
    /// Keys to ask proofs about that were made for other keys.
    others: Vec<KeyPath>,
}

fn fixture(rng: &mut impl Rng, hasher: Hasher) -> Fixture {
    let mut model = ReferenceModel::new(hasher);
    for _ in 0..48 {
        model.insert(rng.gen(), common::gen_value(rng));
    }
    let base: KeyPath = rng.gen();
    for shared in [200, 200, 210, 230, 240, 250, 252, 254, 255] {
        model.insert(common::key_near(rng, &base, shared), common::gen_value(rng));
    }
    model.insert(base, b"base".to_vec());
    model.insert(common::flip_bit(&base, 255), b"twin".to_vec());
    let root = model.root();

    let present: Vec<KeyPath> = model.iter().map(|(k, _)| *k).collect();
    let mut queries = vec![
        present[0],
        present[present.len() / 2],
        base,
        common::flip_bit(&base, 255),
        common::key_near(rng, &base, 220),  // absent, deep
        common::flip_bit(&present[3], 200), // absent, next to a leaf
        rng.gen(),
        rng.gen(),
    ];
    queries.sort_unstable();
    queries.dedup();

    let mut others = present.clone();
    others.extend(present.iter().map(|k| common::flip_bit(k, 255)));
    others.extend(present.iter().map(|k| common::key_near(rng, k, 8)));
    others.extend((0..16).map(|_| rng.gen::<KeyPath>()));
    for q in &queries {
        for bit in [0, 1, 7, 100, 254, 255] {
            others.push(common::flip_bit(q, bit));
        }
    }

    let mut changed = model.clone();
    changed.insert(present[1], b"changed".to_vec());
    let mut removed = model.clone();
    removed.remove(&base);
    let mut other_roots = vec![
        changed.root(),
        removed.root(),
        ReferenceModel::new(hasher).root(),
        rng.gen(),
        common::gen_model(rng, hasher, 30, common::Shape::Uniform).root(),
    ];
    for bit in [0, 1, 2, 8, 128, 255] {
        other_roots.push(common::flip_bit(&root, bit));
    }
    assert!(!other_roots.contains(&root));
    Fixture {
        hasher,
        model,
        root,
        other_roots,
        queries,
        others,
    }
}

/// The node hash of a pre-order tree hashed without any canonical check (internal nodes are
/// `H(left ‖ right)` whatever their children), or `None` if the nodes do not form exactly one
/// tree of depth at most 256. A verifier must accept a tree against this root only if the tree
/// is canonical.
fn raw_root(h: Hasher, nodes: &[ProofNode]) -> Option<Node> {
    fn go(h: Hasher, nodes: &[ProofNode], next: &mut usize, depth: usize) -> Option<Node> {
        let node = *nodes.get(*next)?;
        *next += 1;
        match node {
            ProofNode::Terminator => Some(TERMINATOR),
            ProofNode::Opaque(n) => Some(n),
            ProofNode::Leaf(l) => Some(l.hash(h)),
            ProofNode::Internal if depth >= KEY_BITS => None,
            ProofNode::Internal => {
                let l = go(h, nodes, next, depth + 1)?;
                let r = go(h, nodes, next, depth + 1)?;
                Some(h.hash_internal(&l, &r))
            }
        }
    }
    let mut next = 0;
    let root = go(h, nodes, &mut next, 0)?;
    (next == nodes.len()).then_some(root)
}

/// The index one past the subtree starting at `i`.
fn subtree_end(nodes: &[ProofNode], i: usize) -> usize {
    let mut need = 1usize;
    let mut j = i;
    while need > 0 {
        need = match nodes[j] {
            ProofNode::Internal => need + 1,
            _ => need - 1,
        };
        j += 1;
    }
    j
}

/// Position (path prefix, depth) of every node of a pre-order tree.
fn positions(nodes: &[ProofNode]) -> Vec<(KeyPath, usize)> {
    fn go(
        nodes: &[ProofNode],
        next: &mut usize,
        depth: usize,
        path: &mut KeyPath,
        out: &mut Vec<(KeyPath, usize)>,
    ) {
        let node = nodes[*next];
        *next += 1;
        out.push((*path, depth));
        if node == ProofNode::Internal {
            set_bit(path, depth, false);
            go(nodes, next, depth + 1, path, out);
            set_bit(path, depth, true);
            go(nodes, next, depth + 1, path, out);
            set_bit(path, depth, false);
        }
    }
    let mut out = Vec::new();
    go(nodes, &mut 0, 0, &mut [0u8; 32], &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// Path proofs.

fn path_outcome(h: Hasher, root: &Node, key: &KeyPath, bytes: &[u8]) -> Result<Lookup, ProofError> {
    guarded(
        || format!("path proof bytes {bytes:02x?} for key {key:02x?}"),
        || PathProof::decode(bytes, h).and_then(|p| p.verify(h, root, key)),
    )
}

fn verify_path(
    h: Hasher,
    root: &Node,
    key: &KeyPath,
    proof: &PathProof,
) -> Result<Lookup, ProofError> {
    guarded(
        || format!("path proof {proof:?} for key {key:02x?}"),
        || proof.verify(h, root, key),
    )
}

fn hostile_path_proofs(rng: &mut ChaCha8Rng, fx: &Fixture, t: &mut Tally) {
    let h = fx.hasher;
    let root = &fx.root;
    let mut saw_leaf = false;
    let mut saw_empty = false;
    let mut deepest = 0;
    for key in &fx.queries {
        let proof = fx.model.path_proof(key);
        assert_eq!(
            verify_path(h, root, key, &proof),
            Ok(common::truth(&fx.model, key))
        );
        saw_leaf |= matches!(proof.terminal, Terminal::Leaf(_));
        saw_empty |= proof.terminal == Terminal::Empty;
        deepest = deepest.max(proof.siblings.len());
        let bytes = proof.encode(h);

        // Bytes: every bit (or a large sample), every truncation, extensions.
        for bit in bits_to_flip(rng, bytes.len()) {
            let m = flipped(&bytes, bit);
            t.must_reject(
                || format!("bit {bit} flipped"),
                path_outcome(h, root, key, &m),
            );
        }
        for len in 0..bytes.len() {
            t.must_reject(
                || format!("truncated to {len}"),
                guarded(
                    || format!("truncated to {len}"),
                    || PathProof::decode(&bytes[..len], h),
                ),
            );
        }
        for m in extensions(rng, &bytes) {
            t.must_reject(
                || format!("extended to {}", m.len()),
                guarded(|| "extended".into(), || PathProof::decode(&m, h)),
            );
        }
        // Another hasher's verifier.
        for other in Hasher::ALL.into_iter().filter(|o| *o != h) {
            t.must_reject(|| "other hasher".into(), PathProof::decode(&bytes, other));
        }

        // Structure: reorder, replace, drop and add siblings; change the terminal.
        let n = proof.siblings.len();
        let mut mutants: Vec<(String, PathProof)> = Vec::new();
        for i in 0..n.saturating_sub(1) {
            if proof.siblings[i] != proof.siblings[i + 1] {
                let mut m = proof.clone();
                m.siblings.swap(i, i + 1);
                mutants.push((format!("siblings {i} and {} swapped", i + 1), m));
            }
        }
        for _ in 0..40.min(n * n) {
            let (i, j) = (rng.gen_range(0..n), rng.gen_range(0..n));
            if proof.siblings[i] != proof.siblings[j] {
                let mut m = proof.clone();
                m.siblings.swap(i, j);
                mutants.push((format!("siblings {i} and {j} swapped"), m));
            }
        }
        if n > 1 {
            let mut m = proof.clone();
            m.siblings.reverse();
            mutants.push(("siblings reversed".into(), m));
            let mut m = proof.clone();
            m.siblings.shuffle(rng);
            if m != proof {
                mutants.push(("siblings shuffled".into(), m));
            }
        }
        let sampled: Vec<usize> = if n <= NODE_SAMPLE {
            (0..n).collect()
        } else {
            (0..NODE_SAMPLE)
                .map(|_| rng.gen_range(0..n))
                .chain([0, n - 1])
                .collect()
        };
        for i in sampled {
            let s = proof.siblings[i];
            for (what, replacement) in [
                ("terminator", TERMINATOR),
                ("random", rng.gen::<Node>()),
                ("kind bit flipped", common::flip_bit(&s, 0)),
                ("last bit flipped", common::flip_bit(&s, 255)),
            ] {
                if replacement != s {
                    let mut m = proof.clone();
                    m.siblings[i] = replacement;
                    mutants.push((format!("sibling {i} replaced by {what}"), m));
                }
            }
        }
        if n > 0 {
            let mut m = proof.clone();
            m.siblings.remove(0);
            mutants.push(("first sibling dropped".into(), m));
            let mut m = proof.clone();
            m.siblings.pop();
            mutants.push(("last sibling dropped".into(), m));
        }
        for extra in [TERMINATOR, rng.gen()] {
            let mut m = proof.clone();
            m.siblings.push(extra);
            mutants.push(("sibling added at the bottom".into(), m));
            let mut m = proof.clone();
            m.siblings.insert(0, extra);
            mutants.push(("sibling added at the top".into(), m));
        }
        let some_leaf = LeafData {
            key_path: *fx.model.iter().next().expect("fixture has keys").0,
            value_hash: [9; 32],
        };
        match proof.terminal {
            Terminal::Empty => {
                for (what, leaf) in [
                    // Forge the key's presence, or another key's leaf, where the path is empty.
                    (
                        "forged leaf for the key",
                        LeafData {
                            key_path: *key,
                            value_hash: [1; 32],
                        },
                    ),
                    ("another leaf", some_leaf),
                ] {
                    let mut m = proof.clone();
                    m.terminal = Terminal::Leaf(leaf);
                    mutants.push((format!("empty terminal replaced by {what}"), m));
                }
            }
            Terminal::Leaf(leaf) => {
                let mut m = proof.clone();
                m.terminal = Terminal::Empty;
                mutants.push(("leaf terminal emptied".into(), m));
                let mut m = proof.clone();
                m.terminal = Terminal::Leaf(LeafData {
                    value_hash: common::flip_bit(&leaf.value_hash, 9),
                    ..leaf
                });
                mutants.push(("leaf value hash changed".into(), m));
                let mut m = proof.clone();
                m.terminal = Terminal::Leaf(LeafData {
                    key_path: *key,
                    ..leaf
                });
                if m != proof {
                    mutants.push(("leaf key replaced by the asked key".into(), m));
                }
                let mut m = proof.clone();
                m.terminal = Terminal::Leaf(LeafData {
                    key_path: common::flip_bit(&leaf.key_path, 255),
                    ..leaf
                });
                mutants.push(("leaf key's last bit flipped".into(), m));
            }
        }
        for (what, m) in &mutants {
            t.must_reject(|| what.clone(), verify_path(h, root, key, m));
            // Through the encoding too.
            t.must_reject(
                || format!("{what}, encoded"),
                path_outcome(h, root, key, &m.encode(h)),
            );
        }

        // Other roots.
        for other in &fx.other_roots {
            t.must_reject(|| "another root".into(), verify_path(h, other, key, &proof));
        }

        // Other keys: an error or the truth.
        for other in &fx.others {
            t.key_swap(
                &fx.model,
                other,
                || format!("proof of {key:02x?} asked about {other:02x?}"),
                verify_path(h, root, other, &proof),
            );
        }
        // Keys that leave the proven path above its terminal must be rejected.
        for bit in [0, n / 2, n.saturating_sub(1)] {
            if bit < n {
                let other = common::flip_bit(key, bit);
                t.key_swap_rejected(
                    || format!("key with bit {bit} of {n} flipped"),
                    verify_path(h, root, &other, &proof),
                );
            }
        }
    }
    assert!(
        saw_leaf && saw_empty,
        "fixture proves both kinds of terminal"
    );
    assert!(deepest >= 250, "fixture has a deep proof ({deepest})");

    // Absurd depths and made-up bytes.
    let key = fx.queries[0];
    for depth in [257usize, 300, 1000, 5000] {
        let m = PathProof {
            terminal: Terminal::Empty,
            siblings: vec![[7u8; 32]; depth],
        };
        t.must_reject(
            || format!("{depth} siblings"),
            verify_path(h, root, &key, &m),
        );
        t.must_reject(
            || format!("{depth} siblings, encoded"),
            path_outcome(h, root, &key, &m.encode(h)),
        );
    }
    let m = PathProof {
        terminal: Terminal::Empty,
        siblings: (0..256).map(|_| rng.gen()).collect(),
    };
    t.must_reject(
        || "256 random siblings".into(),
        path_outcome(h, root, &key, &m.encode(h)),
    );
    let header = &fx.model.path_proof(&key).encode(h)[..6];
    for depth in [256u16, 257, 300, u16::MAX] {
        let mut b = header.to_vec();
        b.push(0);
        b.extend_from_slice(&depth.to_le_bytes());
        b.extend_from_slice(&[5u8; 64]);
        t.must_reject(
            || format!("depth {depth} in a tiny input"),
            path_outcome(h, root, &key, &b),
        );
    }
    for i in 0..RANDOM_INPUTS {
        let len = rng.gen_range(0..600);
        let mut b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if i % 2 == 0 {
            // A valid header and a plausible body, to get past the first checks.
            let depth = rng.gen_range(0..=260u16);
            let tag = rng.gen_range(0..3u8);
            b = header.to_vec();
            b.push(tag);
            if tag == 1 {
                b.extend((0..64).map(|_| rng.gen::<u8>()));
            }
            b.extend_from_slice(&depth.to_le_bytes());
            b.extend((0..32 * depth as usize).map(|_| rng.gen::<u8>()));
        }
        let key: KeyPath = rng.gen();
        t.must_reject(
            || format!("random bytes {b:02x?}"),
            path_outcome(h, root, &key, &b),
        );
    }
}

#[test]
fn hostile_path_proofs_are_rejected() {
    let mut rng = common::rng("hostile_path_proofs_are_rejected");
    for h in Hasher::ALL {
        let fx = fixture(&mut rng, h);
        let mut t = Tally::default();
        hostile_path_proofs(&mut rng, &fx, &mut t);
        t.print(&format!("path proofs ({h})"));
    }
}

// ---------------------------------------------------------------------------------------------
// Multi-proofs.

fn multi_outcome(h: Hasher, root: &Node, bytes: &[u8]) -> Result<(), ProofError> {
    guarded(
        || format!("multi-proof bytes {bytes:02x?}"),
        || {
            MultiProof::decode(bytes, h)
                .and_then(|p| p.verify(h, root))
                .map(|_| ())
        },
    )
}

fn verify_multi(h: Hasher, root: &Node, nodes: &[ProofNode]) -> Result<(), ProofError> {
    guarded(
        || format!("multi-proof {nodes:?}"),
        || {
            MultiProof {
                nodes: nodes.to_vec(),
            }
            .verify(h, root)
            .map(|_| ())
        },
    )
}

/// Node-level mutants of a valid pre-order tree, each of which must be rejected.
fn node_mutants(rng: &mut impl Rng, nodes: &[ProofNode]) -> Vec<(String, Vec<ProofNode>)> {
    let n = nodes.len();
    let mut out: Vec<(String, Vec<ProofNode>)> = Vec::new();
    let mut push = |what: String, m: Vec<ProofNode>| {
        if m != nodes {
            out.push((what, m));
        }
    };
    for i in 0..n.saturating_sub(1).min(NODE_SAMPLE) {
        let mut m = nodes.to_vec();
        m.swap(i, i + 1);
        push(format!("nodes {i} and {} swapped", i + 1), m);
    }
    for _ in 0..40 {
        let (i, j) = (rng.gen_range(0..n), rng.gen_range(0..n));
        let mut m = nodes.to_vec();
        m.swap(i, j);
        push(format!("nodes {i} and {j} swapped"), m);
    }
    let mut m = nodes.to_vec();
    m.reverse();
    push("nodes reversed".into(), m);
    let mut sample: Vec<usize> = if n <= NODE_SAMPLE {
        (0..n).collect()
    } else {
        let mut s: Vec<usize> = (0..NODE_SAMPLE).map(|_| rng.gen_range(0..n)).collect();
        s.extend([0, n - 1]);
        s
    };
    sample.sort_unstable();
    sample.dedup();
    for i in sample {
        let mut m = nodes.to_vec();
        m.remove(i);
        push(format!("node {i} removed"), m);
        let mut m = nodes.to_vec();
        m.insert(i, nodes[i]);
        push(format!("node {i} duplicated"), m);
        let replacements = [
            ProofNode::Internal,
            ProofNode::Terminator,
            ProofNode::Opaque(TERMINATOR),
            ProofNode::Opaque(rng.gen()),
            ProofNode::Leaf(LeafData {
                key_path: rng.gen(),
                value_hash: rng.gen(),
            }),
        ];
        for r in replacements {
            let mut m = nodes.to_vec();
            m[i] = r;
            push(format!("node {i} replaced by {r:?}"), m);
        }
        match nodes[i] {
            ProofNode::Leaf(leaf) => {
                let mut m = nodes.to_vec();
                m[i] = ProofNode::Leaf(LeafData {
                    value_hash: common::flip_bit(&leaf.value_hash, 3),
                    ..leaf
                });
                push(format!("leaf {i}'s value hash changed"), m);
                let mut m = nodes.to_vec();
                m[i] = ProofNode::Leaf(LeafData {
                    key_path: common::flip_bit(&leaf.key_path, 255),
                    ..leaf
                });
                push(format!("leaf {i}'s key changed"), m);
                // A leaf where the trie has another leaf's position for it: off its path.
                let mut m = nodes.to_vec();
                m[i] = ProofNode::Leaf(LeafData {
                    key_path: common::flip_bit(&leaf.key_path, 0),
                    ..leaf
                });
                push(format!("leaf {i} moved off its path"), m);
            }
            ProofNode::Opaque(hash) => {
                for bit in [0, 1, 255] {
                    let mut m = nodes.to_vec();
                    m[i] = ProofNode::Opaque(common::flip_bit(&hash, bit));
                    push(format!("opaque {i}'s bit {bit} flipped"), m);
                }
            }
            ProofNode::Internal => {
                // Swap the two subtrees.
                let l_end = subtree_end(nodes, i + 1);
                let r_end = subtree_end(nodes, l_end);
                let mut m = nodes[..=i].to_vec();
                m.extend_from_slice(&nodes[l_end..r_end]);
                m.extend_from_slice(&nodes[i + 1..l_end]);
                m.extend_from_slice(&nodes[r_end..]);
                push(format!("subtrees of internal {i} swapped"), m);
                // Expand below where the proof ends: an internal node over the subtree and
                // an empty sibling.
                let mut m = nodes[..i].to_vec();
                m.push(ProofNode::Internal);
                m.extend_from_slice(&nodes[i..r_end]);
                m.push(ProofNode::Terminator);
                m.extend_from_slice(&nodes[r_end..]);
                push(format!("internal {i} pushed one level down"), m);
            }
            ProofNode::Terminator => {}
        }
    }
    // Whole-proof changes: an extra root level, and the proof twice.
    let mut m = vec![ProofNode::Internal];
    m.extend_from_slice(nodes);
    m.push(ProofNode::Opaque(rng.gen()));
    push("extra level above the root".into(), m);
    let mut m = nodes.to_vec();
    m.extend_from_slice(nodes);
    push("nodes twice".into(), m);
    out
}

fn hostile_multi_proofs(rng: &mut ChaCha8Rng, fx: &Fixture, t: &mut Tally) {
    let h = fx.hasher;
    let root = &fx.root;
    let all: Vec<KeyPath> = fx.model.iter().map(|(k, _)| *k).collect();
    let key_sets: Vec<Vec<KeyPath>> = vec![
        vec![],
        vec![fx.queries[0]],
        fx.queries.clone(),
        all.iter().step_by(3).copied().collect(),
    ];
    for keys in &key_sets {
        let proof = fx.model.multi_proof(keys);
        let verified = proof.verify(h, root).expect("honest multi-proof");
        for k in keys {
            assert_eq!(verified.lookup(k), Ok(common::truth(&fx.model, k)));
        }
        let bytes = proof.encode(h);
        let nodes = &proof.nodes;

        for bit in bits_to_flip(rng, bytes.len()) {
            t.must_reject(
                || format!("bit {bit} flipped"),
                multi_outcome(h, root, &flipped(&bytes, bit)),
            );
        }
        for len in 0..bytes.len() {
            t.must_reject(
                || format!("truncated to {len}"),
                guarded(
                    || format!("truncated to {len}"),
                    || MultiProof::decode(&bytes[..len], h),
                ),
            );
        }
        for m in extensions(rng, &bytes) {
            t.must_reject(
                || "extended".into(),
                guarded(|| "extended".into(), || MultiProof::decode(&m, h)),
            );
        }
        for other in Hasher::ALL.into_iter().filter(|o| *o != h) {
            t.must_reject(|| "other hasher".into(), MultiProof::decode(&bytes, other));
        }
        for (what, m) in node_mutants(rng, nodes) {
            t.must_reject(|| what.clone(), verify_multi(h, root, &m));
            let enc = MultiProof { nodes: m }.encode(h);
            t.must_reject(|| format!("{what}, encoded"), multi_outcome(h, root, &enc));
        }
        for other in &fx.other_roots {
            t.must_reject(|| "another root".into(), verify_multi(h, other, nodes));
        }

        // Honest-equivalent: fold any non-empty subtree into its hash. The proof still verifies
        // and what it still says is true; keys below the fold are no longer covered.
        let pos = positions(nodes);
        for i in 0..nodes.len() {
            if nodes[i] == ProofNode::Terminator {
                continue;
            }
            let end = subtree_end(nodes, i);
            let hash = raw_root(h, &nodes[i..end]).expect("subtree");
            let mut m = nodes[..i].to_vec();
            m.push(ProofNode::Opaque(hash));
            m.extend_from_slice(&nodes[end..]);
            let v = guarded(
                || format!("folded {i}"),
                || MultiProof { nodes: m.clone() }.verify(h, root),
            )
            .unwrap_or_else(|e| panic!("folding subtree {i} into its hash: {e}"));
            t.variants += 1;
            for k in keys.iter().chain(&fx.others) {
                t.key_swap(
                    &fx.model,
                    k,
                    || format!("lookup in proof folded at {i}"),
                    v.lookup(k),
                );
            }
            let (prefix, depth) = pos[i];
            let below = common::key_near(rng, &prefix, depth);
            t.key_swap_rejected(|| format!("key below the fold at {i}"), v.lookup(&below));
        }

        // Other keys: errors or the truth; keys into opaque subtrees: not covered, and changes
        // to them refused.
        for k in &fx.others {
            t.key_swap(
                &fx.model,
                k,
                || format!("lookup of {k:02x?}"),
                verified.lookup(k),
            );
        }
        for (i, (prefix, depth)) in pos.iter().enumerate() {
            if let ProofNode::Opaque(_) = nodes[i] {
                let k = common::key_near(rng, prefix, *depth);
                t.key_swap_rejected(|| format!("key into opaque {i}"), verified.lookup(&k));
                t.key_swap_rejected(
                    || format!("change into opaque {i}"),
                    verified.apply(&[(k, Some([1; 32]))]),
                );
            }
        }
    }

    // Absurd shapes: internal nodes nested 300 deep (left spine with opaque or empty right
    // children, and the other way round), counts far beyond the input.
    for (what, nodes) in deep_spines(rng, 300) {
        t.must_reject(|| what.clone(), verify_multi(h, root, &nodes));
        let enc = MultiProof { nodes }.encode(h);
        t.must_reject(|| format!("{what}, encoded"), multi_outcome(h, root, &enc));
    }
    let header = &MultiProof::default().encode(h)[..6];
    for count in [
        u32::MAX,
        MAX_MULTIPROOF_NODES + 1,
        MAX_MULTIPROOF_NODES,
        1 << 20,
        100,
        2,
    ] {
        for body in [vec![], vec![0u8], vec![3u8; 16], vec![0u8; 64]] {
            let mut b = header.to_vec();
            b.extend_from_slice(&count.to_le_bytes());
            b.extend_from_slice(&body);
            t.must_reject(
                || format!("count {count} with {} bytes", body.len()),
                multi_outcome(h, root, &b),
            );
        }
    }
    let many_terminators = vec![ProofNode::Terminator; 100_000];
    t.must_reject(
        || "100,000 terminators".into(),
        verify_multi(h, root, &many_terminators),
    );

    // Random bytes, and random bytes made of valid tags.
    for i in 0..RANDOM_INPUTS {
        let b: Vec<u8> = if i % 2 == 0 {
            (0..rng.gen_range(0..400)).map(|_| rng.gen()).collect()
        } else {
            let nodes: Vec<ProofNode> = (0..rng.gen_range(0..30))
                .map(|_| random_node(rng))
                .collect();
            MultiProof { nodes }.encode(h)
        };
        t.must_reject(
            || format!("random bytes {b:02x?}"),
            multi_outcome(h, root, &b),
        );
    }
}

/// Trees of internal nodes nested `depth` deep.
fn deep_spines(rng: &mut impl Rng, depth: usize) -> Vec<(String, Vec<ProofNode>)> {
    let mut out = Vec::new();
    // Left spine: all internal nodes first, then the bottom pair, then each level's right child.
    for (what, right) in [
        ("opaque", ProofNode::Opaque(rng.gen())),
        ("terminator", ProofNode::Terminator),
    ] {
        let mut nodes = vec![ProofNode::Internal; depth];
        nodes.push(ProofNode::Opaque(rng.gen()));
        nodes.extend(std::iter::repeat_n(right, depth));
        out.push((
            format!("left spine {depth} deep, {what} right children"),
            nodes,
        ));
    }
    // Right spine: each internal node's left child first.
    let mut nodes = Vec::new();
    for _ in 0..depth {
        nodes.push(ProofNode::Internal);
        nodes.push(ProofNode::Opaque(rng.gen()));
    }
    nodes.push(ProofNode::Terminator);
    out.push((format!("right spine {depth} deep"), nodes));
    // Exactly 256 deep down one key's path, ending at that key's leaf: structurally sound, so
    // only the root can reject it.
    out.push(("256-deep path".into(), path_256_deep(rng).0));
    out
}

/// A proof of one key whose leaf sits at depth 256 under 256 internal nodes with random
/// siblings, and the key.
fn path_256_deep(rng: &mut impl Rng) -> (Vec<ProofNode>, KeyPath) {
    let key: KeyPath = rng.gen();
    let mut nodes = Vec::new();
    let mut right_siblings = Vec::new();
    for d in 0..KEY_BITS {
        nodes.push(ProofNode::Internal);
        let sibling = ProofNode::Opaque(rng.gen());
        if bit_at(&key, d) {
            // The path goes right: the left sibling comes first in pre-order.
            nodes.push(sibling);
        } else {
            right_siblings.push(sibling);
        }
    }
    nodes.push(ProofNode::Leaf(LeafData {
        key_path: key,
        value_hash: rng.gen(),
    }));
    while let Some(s) = right_siblings.pop() {
        nodes.push(s);
    }
    (nodes, key)
}

fn random_node(rng: &mut impl Rng) -> ProofNode {
    match rng.gen_range(0..4) {
        0 => ProofNode::Internal,
        1 => ProofNode::Terminator,
        2 => ProofNode::Leaf(LeafData {
            key_path: rng.gen(),
            value_hash: rng.gen(),
        }),
        _ => ProofNode::Opaque(rng.gen()),
    }
}

#[test]
fn hostile_multi_proofs_are_rejected() {
    let mut rng = common::rng("hostile_multi_proofs_are_rejected");
    for h in Hasher::ALL {
        let fx = fixture(&mut rng, h);
        let mut t = Tally::default();
        hostile_multi_proofs(&mut rng, &fx, &mut t);
        t.print(&format!("multi-proofs ({h})"));
    }
}

// ---------------------------------------------------------------------------------------------
// Witnesses.

/// Decode and verify a witness; if it verifies, check everything it says about its listed keys
/// against the model, and that applying a change to each gives the model's new root. Returns
/// whether it verified.
fn witness_truthful(
    rng: &mut impl Rng,
    fx: &Fixture,
    what: &dyn Fn() -> String,
    bytes: &[u8],
) -> Result<(), ProofError> {
    let h = fx.hasher;
    let verified = guarded(what, || {
        Witness::decode(bytes, h).and_then(|w| w.verify(h, &fx.root))
    })?;
    for k in verified.keys() {
        assert_eq!(
            verified.lookup(k),
            Ok(common::truth(&fx.model, k)),
            "{}",
            what()
        );
    }
    let changes = common::gen_changes(rng, verified.keys());
    let mut after = fx.model.clone();
    after.apply(changes.clone());
    let applied = guarded(what, || {
        verified.apply(&common::hashed_changes(h, &changes))
    });
    assert_eq!(applied, Ok(after.root()), "{}", what());
    Ok(())
}

fn witness_outcome(h: Hasher, root: &Node, bytes: &[u8]) -> Result<(), ProofError> {
    guarded(
        || format!("witness bytes {bytes:02x?}"),
        || {
            Witness::decode(bytes, h)
                .and_then(|w| w.verify(h, root))
                .map(|_| ())
        },
    )
}

fn verify_witness(h: Hasher, root: &Node, w: &Witness) -> Result<(), ProofError> {
    guarded(
        || format!("witness {w:?}"),
        || w.verify(h, root).map(|_| ()),
    )
}

/// Where the key list of an encoded witness lies.
const WITNESS_KEYS_AT: usize = 10;

fn hostile_witnesses(rng: &mut ChaCha8Rng, fx: &Fixture, t: &mut Tally) {
    let h = fx.hasher;
    let root = &fx.root;
    let all: Vec<KeyPath> = fx.model.iter().map(|(k, _)| *k).collect();
    let key_sets: Vec<Vec<KeyPath>> = vec![
        vec![],
        vec![fx.queries[1]],
        fx.queries.clone(),
        all.iter().step_by(4).copied().collect(),
    ];
    for keys in &key_sets {
        let witness = fx.model.witness(keys);
        assert!(witness_truthful(rng, fx, &|| "honest".into(), &witness.encode(h)).is_ok());
        let bytes = witness.encode(h);
        let keys_end = WITNESS_KEYS_AT + 32 * witness.keys.len();

        for bit in bits_to_flip(rng, bytes.len()) {
            let m = flipped(&bytes, bit);
            let what = || format!("witness bit {bit} flipped");
            if (WITNESS_KEYS_AT * 8..keys_end * 8).contains(&bit) {
                // A changed key: an error, or a witness whose every claim is true.
                t.key_swaps += 1;
                match witness_truthful(rng, fx, &what, &m) {
                    Ok(()) => t.key_swaps_true += 1,
                    Err(_) => t.key_swaps_rejected += 1,
                }
            } else {
                t.must_reject(what, witness_outcome(h, root, &m));
            }
        }
        for len in 0..bytes.len() {
            t.must_reject(
                || format!("truncated to {len}"),
                guarded(
                    || format!("truncated to {len}"),
                    || Witness::decode(&bytes[..len], h),
                ),
            );
        }
        for m in extensions(rng, &bytes) {
            t.must_reject(
                || "extended".into(),
                guarded(|| "extended".into(), || Witness::decode(&m, h)),
            );
        }
        for other in Hasher::ALL.into_iter().filter(|o| *o != h) {
            t.must_reject(|| "other hasher".into(), Witness::decode(&bytes, other));
        }
        for (what, nodes) in node_mutants(rng, &witness.proof.nodes) {
            let m = Witness {
                keys: witness.keys.clone(),
                proof: MultiProof { nodes },
            };
            t.must_reject(|| what.clone(), verify_witness(h, root, &m));
            t.must_reject(
                || format!("{what}, encoded"),
                witness_outcome(h, root, &m.encode(h)),
            );
        }
        for other in &fx.other_roots {
            t.must_reject(|| "another root".into(), verify_witness(h, other, &witness));
        }

        // The key list: reordered, repeated keys are refused.
        let n = witness.keys.len();
        if n >= 2 {
            for i in 0..n - 1 {
                let mut m = witness.clone();
                m.keys.swap(i, i + 1);
                t.must_reject(
                    || format!("keys {i} and {} swapped", i + 1),
                    verify_witness(h, root, &m),
                );
            }
            let mut m = witness.clone();
            m.keys.reverse();
            t.must_reject(|| "keys reversed".into(), verify_witness(h, root, &m));
        }
        for i in 0..n {
            let mut m = witness.clone();
            m.keys.insert(i, witness.keys[i]);
            t.must_reject(|| format!("key {i} repeated"), verify_witness(h, root, &m));
        }

        // Other keys in the list: an error or a truthful witness; keys into opaque subtrees
        // must be refused. Dropping keys gives a smaller, honest witness.
        for (i, other) in fx.others.iter().enumerate() {
            let mut m = witness.clone();
            match m.keys.binary_search(other) {
                Ok(_) => continue,
                Err(at) => m.keys.insert(at, *other),
            }
            if i % 2 == 1 && n > 0 {
                // Swap it in for an existing key instead.
                let drop = m.keys.iter().position(|k| k != other).expect("another key");
                m.keys.remove(drop);
            }
            t.key_swaps += 1;
            match witness_truthful(
                rng,
                fx,
                &|| format!("witness listing {other:02x?}"),
                &m.encode(h),
            ) {
                Ok(()) => t.key_swaps_true += 1,
                Err(_) => t.key_swaps_rejected += 1,
            }
        }
        let pos = positions(&witness.proof.nodes);
        for (i, (prefix, depth)) in pos.iter().enumerate() {
            if let ProofNode::Opaque(_) = witness.proof.nodes[i] {
                let k = common::key_near(rng, prefix, *depth);
                let mut m = witness.clone();
                let at = m.keys.binary_search(&k).unwrap_err();
                m.keys.insert(at, k);
                t.key_swap_rejected(
                    || format!("listed key into opaque {i}"),
                    verify_witness(h, root, &m),
                );
            }
        }
        for i in 0..n {
            let mut m = witness.clone();
            m.keys.remove(i);
            assert!(
                witness_truthful(rng, fx, &|| format!("key {i} dropped"), &m.encode(h)).is_ok()
            );
            t.variants += 1;
        }

        // Changes to unlisted keys, repeated changes.
        let verified = witness.verify(h, root).expect("honest witness");
        for other in fx
            .others
            .iter()
            .filter(|k| witness.keys.binary_search(k).is_err())
            .take(20)
        {
            t.key_swap_rejected(
                || "change to an unlisted key".into(),
                verified.apply(&[(*other, None)]),
            );
            t.key_swap_rejected(
                || "lookup of an unlisted key".into(),
                verified.lookup(other),
            );
            t.key_swap_rejected(
                || "block with an unlisted key".into(),
                verify_block(h, root, &witness, &[(*other, Some([2; 32]))]),
            );
        }
        if let Some(k) = witness.keys.first() {
            t.must_reject(
                || "repeated change".into(),
                verified.apply(&[(*k, None), (*k, Some([3; 32]))]),
            );
        }
    }

    // Absurd counts and made-up bytes.
    let header = &Witness::default().encode(h)[..6];
    for count in [u32::MAX, MAX_WITNESS_KEYS + 1, MAX_WITNESS_KEYS, 1 << 20, 3] {
        for body in [vec![], vec![0u8; 32], vec![0xffu8; 100]] {
            let mut b = header.to_vec();
            b.extend_from_slice(&count.to_le_bytes());
            b.extend_from_slice(&body);
            t.must_reject(
                || format!("key count {count}"),
                witness_outcome(h, root, &b),
            );
        }
    }
    for node_count in [u32::MAX, MAX_MULTIPROOF_NODES + 1, 1 << 25] {
        let mut b = header.to_vec();
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&node_count.to_le_bytes());
        b.push(0);
        t.must_reject(
            || format!("node count {node_count}"),
            witness_outcome(h, root, &b),
        );
    }
    for (what, nodes) in deep_spines(rng, 300) {
        let w = Witness {
            keys: vec![[0u8; 32]],
            proof: MultiProof { nodes },
        };
        t.must_reject(|| what.clone(), verify_witness(h, root, &w));
    }
    for i in 0..RANDOM_INPUTS {
        let b: Vec<u8> = if i % 2 == 0 {
            (0..rng.gen_range(0..400)).map(|_| rng.gen()).collect()
        } else {
            let mut keys: Vec<KeyPath> = (0..rng.gen_range(0..4)).map(|_| rng.gen()).collect();
            keys.sort_unstable();
            let nodes: Vec<ProofNode> = (0..rng.gen_range(0..30))
                .map(|_| random_node(rng))
                .collect();
            Witness {
                keys,
                proof: MultiProof { nodes },
            }
            .encode(h)
        };
        t.must_reject(
            || format!("random witness bytes {b:02x?}"),
            witness_outcome(h, root, &b),
        );
    }
}

#[test]
fn hostile_witnesses_are_rejected() {
    let mut rng = common::rng("hostile_witnesses_are_rejected");
    for h in Hasher::ALL {
        let fx = fixture(&mut rng, h);
        let mut t = Tally::default();
        hostile_witnesses(&mut rng, &fx, &mut t);
        t.print(&format!("witnesses ({h})"));
    }
}

// ---------------------------------------------------------------------------------------------
// Random trees: the verifier against itself.

/// A random tree whose leaves lie on their own paths, so that many are canonical.
fn random_tree(
    rng: &mut impl Rng,
    depth: usize,
    path: &mut KeyPath,
    opaque: bool,
    budget: &mut usize,
    out: &mut Vec<ProofNode>,
) {
    let internal_odds = if *budget == 0 || depth >= KEY_BITS {
        0.0
    } else {
        0.55
    };
    if rng.gen_bool(internal_odds) {
        *budget -= 1;
        out.push(ProofNode::Internal);
        set_bit(path, depth, false);
        random_tree(rng, depth + 1, path, opaque, budget, out);
        set_bit(path, depth, true);
        random_tree(rng, depth + 1, path, opaque, budget, out);
        set_bit(path, depth, false);
        return;
    }
    let choice = rng.gen_range(0..if opaque { 3 } else { 2 });
    out.push(match choice {
        0 => ProofNode::Terminator,
        1 => ProofNode::Leaf(LeafData {
            key_path: common::key_near(rng, path, depth),
            value_hash: rng.gen(),
        }),
        _ => ProofNode::Opaque(rng.gen()),
    });
}

fn leaves_of(nodes: &[ProofNode]) -> Vec<(KeyPath, ValueHash)> {
    let mut leaves: Vec<(KeyPath, ValueHash)> = nodes
        .iter()
        .filter_map(|n| match n {
            ProofNode::Leaf(l) => Some((l.key_path, l.value_hash)),
            _ => None,
        })
        .collect();
    leaves.sort_unstable();
    leaves
}

/// Random trees, checked against their own hash: a tree the verifier accepts must be canonical
/// (without opaque nodes, it is then the whole trie of its leaves, so its root is their root,
/// and applying changes matches recomputing from scratch); with opaque nodes, applying each
/// key's current value must change nothing. Rejections are counted, never required.
#[test]
fn random_trees_verify_only_when_canonical() {
    let mut rng = common::rng("random_trees_verify_only_when_canonical");
    let mut accepted = 0;
    let mut rejected = 0;
    for i in 0..4 * RANDOM_INPUTS {
        let h = Hasher::ALL[i % 3];
        let opaque = i % 2 == 1;
        let mut nodes = Vec::new();
        let mut budget = rng.gen_range(0..40);
        random_tree(&mut rng, 0, &mut [0u8; 32], opaque, &mut budget, &mut nodes);
        let root = raw_root(h, &nodes).expect("a whole tree");
        let Ok(v) = guarded(
            || format!("tree {nodes:?}"),
            || {
                MultiProof {
                    nodes: nodes.clone(),
                }
                .verify(h, &root)
            },
        ) else {
            rejected += 1;
            continue;
        };
        accepted += 1;
        let leaves = leaves_of(&nodes);
        let mut probes: Vec<KeyPath> = leaves.iter().map(|l| l.0).collect();
        probes.extend(leaves.iter().map(|l| common::flip_bit(&l.0, 255)));
        probes.extend((0..8).map(|_| rng.gen::<KeyPath>()));
        probes.sort_unstable();
        probes.dedup();
        let covered: Vec<(KeyPath, Lookup)> = probes
            .iter()
            .filter_map(|k| v.lookup(k).ok().map(|l| (*k, l)))
            .collect();
        // Re-applying what the proof shows changes nothing.
        let same: Vec<(KeyPath, Option<ValueHash>)> = covered
            .iter()
            .map(|(k, l)| {
                (
                    *k,
                    match l {
                        Lookup::Present(v) => Some(*v),
                        Lookup::Absent => None,
                    },
                )
            })
            .collect();
        assert_eq!(
            v.apply(&same),
            Ok(root),
            "no-op changes moved the root of {nodes:?}"
        );
        if !opaque {
            assert_eq!(
                root_of(h, &leaves),
                root,
                "accepted a non-canonical tree {nodes:?}"
            );
            for k in &probes {
                let truth = match leaves.binary_search_by_key(k, |l| l.0) {
                    Ok(at) => Lookup::Present(leaves[at].1),
                    Err(_) => Lookup::Absent,
                };
                assert_eq!(v.lookup(k), Ok(truth));
            }
            let changes: Vec<(KeyPath, Option<ValueHash>)> = probes
                .iter()
                .map(|k| {
                    (
                        *k,
                        if rng.gen_bool(0.4) {
                            None
                        } else {
                            Some(rng.gen())
                        },
                    )
                })
                .collect();
            let mut after: std::collections::BTreeMap<KeyPath, ValueHash> =
                leaves.iter().copied().collect();
            for (k, c) in &changes {
                match c {
                    Some(v) => after.insert(*k, *v),
                    None => after.remove(k),
                };
            }
            let after: Vec<(KeyPath, ValueHash)> = after.into_iter().collect();
            assert_eq!(
                v.apply(&changes),
                Ok(root_of(h, &after)),
                "apply on {nodes:?}"
            );
        }
    }
    println!("random trees: {accepted} canonical ones verified and checked, {rejected} rejected");
    assert!(
        accepted > 100 && rejected > 100,
        "both outcomes are exercised"
    );
}

/// A proof 256 levels deep, with its leaf at the bottom, verifies against its own root and
/// proves its key; one level more is refused.
#[test]
fn proofs_256_deep_verify_and_257_do_not() {
    let mut rng = common::rng("proofs_256_deep_verify_and_257_do_not");
    for h in Hasher::ALL {
        let (nodes, key) = path_256_deep(&mut rng);
        let root = raw_root(h, &nodes).expect("a whole tree");
        let v = MultiProof {
            nodes: nodes.clone(),
        }
        .verify(h, &root)
        .expect("256 deep verifies");
        assert!(matches!(v.lookup(&key), Ok(Lookup::Present(_))));
        assert_eq!(v.apply(&[(key, None)]).map(|r| r != root), Ok(true));
        let mut deeper = vec![ProofNode::Internal];
        deeper.extend(nodes);
        deeper.push(ProofNode::Opaque(rng.gen()));
        assert_eq!(
            MultiProof { nodes: deeper }.verify(h, &root).err(),
            Some(ProofError::TooDeep)
        );
    }
}
