//! Hashes gathered first and computed together: a computation over a subtree names the nodes
//! it needs ([`HashJobs::leaf`], [`HashJobs::internal`], [`HashJobs::parent`]) as it walks,
//! getting a [`NodeRef`] for each, and [`HashJobs::evaluate`] then computes every one of them,
//! level by level, all the independent hashes of a level at once. For BLAKE3 that means its
//! multi-lane kernel: 16 one-block compressions cost about as much as two done one at a time
//! (~10 ns a hash in lanes of 16, ~23 in lanes of 4, against ~59 alone on the benchmark
//! machine), while a recursive walk that hashes as it returns can only ever do one.
//!
//! Proof nodes that are hashes are placed in their proof as placeholders
//! ([`HashJobs::push_opaque`]) and written by [`HashJobs::fill`] once evaluated, so a walk
//! emits its proof in order without waiting for any hash.
//!
//! Node kinds (empty, leaf, internal) are known without hashing (a leaf job makes a leaf, an
//! internal job an internal node), so the trie's compaction rule ([`crate::trie::parent`])
//! applies while gathering.

use crate::hasher::{labelled, Hasher};
use crate::proof::ProofNode;
use crate::trie::{bit_at, parent_kind, KeyPath, Node, NodeKind, ValueHash, KEY_BITS, TERMINATOR};
use alloc::vec::Vec;

/// A node of a walk: a place in its [`HashJobs`] holding a known node or the result of a job
/// not computed yet, with the node's kind (known without hashing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRef {
    slot: u32,
    kind: NodeKind,
}

impl NodeRef {
    /// The empty subtree (in no set of jobs: it needs no place).
    pub const TERMINATOR: NodeRef = NodeRef {
        slot: u32::MAX,
        kind: NodeKind::Terminator,
    };

    /// The node's kind, known without computing it.
    pub fn kind(self) -> NodeKind {
        self.kind
    }
}

/// One hash to compute: `H(left ‖ right)` of two places, labelled a leaf or an internal node,
/// into its own place.
#[derive(Debug, Clone, Copy)]
struct Job {
    left: u32,
    right: u32,
    out: u32,
    leaf: bool,
}

/// The hashes a walk needs, gathered, then computed level by level (see the module docs).
/// Reusable: [`HashJobs::clear`] keeps its buffers.
#[derive(Debug)]
pub struct HashJobs {
    /// The hasher every job is computed with.
    hasher: Hasher,
    /// Every place: the known nodes and inputs, and each job's node once evaluated.
    values: Vec<Node>,
    /// Each place's height: 0 for a known node, one more than its inputs' for a job's.
    heights: Vec<u32>,
    /// The jobs of each height (from 1).
    levels: Vec<Vec<Job>>,
    /// Proof nodes to write once evaluated: their index in the proof, and their place.
    fills: Vec<(usize, u32)>,
    /// Scratch of [`HashJobs::evaluate`]: the blocks of one call to the hasher.
    blocks: Vec<[u8; 64]>,
}

impl HashJobs {
    /// No jobs, to be computed with `hasher`.
    pub fn new(hasher: Hasher) -> HashJobs {
        HashJobs {
            hasher,
            values: Vec::new(),
            heights: Vec::new(),
            levels: Vec::new(),
            fills: Vec::new(),
            blocks: Vec::new(),
        }
    }

    /// Forget every job and placeholder, keeping the buffers; compute the next ones with
    /// `hasher`.
    pub fn reset(&mut self, hasher: Hasher) {
        self.hasher = hasher;
        self.clear();
    }

    /// The hasher the jobs are computed with.
    pub fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// Forget every job and placeholder, keeping the buffers.
    pub fn clear(&mut self) {
        self.values.clear();
        self.heights.clear();
        for level in &mut self.levels {
            level.clear();
        }
        self.fills.clear();
    }

    fn place(&mut self, node: Node, height: u32) -> u32 {
        // The last number is the terminator's (it has no place): a set never gets that large
        // (a subtree's are gathered at most `EAGER_ENTRIES` entries at a time).
        let slot = u32::try_from(self.values.len()).unwrap_or(u32::MAX);
        debug_assert!(
            slot < u32::MAX,
            "more than 2^32 - 1 places in one set of hash jobs"
        );
        self.values.push(node);
        self.heights.push(height);
        slot
    }

    /// A node known already (a stored one).
    pub fn known(&mut self, node: Node) -> NodeRef {
        match Hasher::node_kind(&node) {
            NodeKind::Terminator => NodeRef::TERMINATOR,
            kind => NodeRef {
                slot: self.place(node, 0),
                kind,
            },
        }
    }

    fn height(&self, node: NodeRef) -> u32 {
        self.heights.get(node.slot as usize).copied().unwrap_or(0)
    }

    /// The place of `node`'s input (the terminator, which has none, takes one).
    fn input(&mut self, node: NodeRef) -> u32 {
        if node == NodeRef::TERMINATOR {
            self.place(TERMINATOR, 0)
        } else {
            node.slot
        }
    }

    fn push(&mut self, left: u32, right: u32, height: u32, leaf: bool) -> NodeRef {
        let out = self.place(TERMINATOR, height);
        let job = Job {
            left,
            right,
            out,
            leaf,
        };
        let h = height as usize;
        if self.levels.len() <= h {
            self.levels.resize_with(h + 1, Vec::new);
        }
        if let Some(level) = self.levels.get_mut(h) {
            level.push(job);
        }
        NodeRef {
            slot: out,
            kind: if leaf {
                NodeKind::Leaf
            } else {
                NodeKind::Internal
            },
        }
    }

    /// The leaf node of `key_path` holding a value of hash `value_hash`
    /// ([`Hasher::hash_leaf`]).
    pub fn leaf(&mut self, key_path: &KeyPath, value_hash: &ValueHash) -> NodeRef {
        let k = self.place(*key_path, 0);
        let v = self.place(*value_hash, 0);
        self.push(k, v, 1, true)
    }

    /// The internal node over `left` and `right`, whatever their kinds
    /// ([`Hasher::hash_internal`]).
    pub fn internal(&mut self, left: NodeRef, right: NodeRef) -> NodeRef {
        let height = 1 + self.height(left).max(self.height(right));
        let (l, r) = (self.input(left), self.input(right));
        self.push(l, r, height, false)
    }

    /// The node over children `left` and `right` with the trie's compaction
    /// ([`crate::trie::parent`]): empty over two empty children, the leaf itself over a leaf
    /// and an empty child, else their internal node.
    pub fn parent(&mut self, left: NodeRef, right: NodeRef) -> NodeRef {
        match parent_kind(left.kind, right.kind) {
            NodeKind::Terminator => NodeRef::TERMINATOR,
            NodeKind::Leaf if left.kind == NodeKind::Leaf => left,
            NodeKind::Leaf => right,
            NodeKind::Internal => self.internal(left, right),
        }
    }

    /// Append `node` to `proof` as an opaque node: a placeholder that [`HashJobs::fill`]
    /// writes once the jobs are evaluated (a known node's too: written then as well).
    pub fn push_opaque(&mut self, proof: &mut Vec<ProofNode>, node: NodeRef) {
        self.fills.push((proof.len(), node.slot));
        proof.push(ProofNode::Opaque(TERMINATOR));
    }

    /// Compute every job: all those of one height (whose inputs are known or lower) at once.
    pub fn evaluate(&mut self) {
        let hasher = self.hasher;
        let mut blocks = core::mem::take(&mut self.blocks);
        blocks.resize(LANES, [0u8; 64]);
        let mut out = [[0u8; 32]; LANES];
        for level in &self.levels {
            for chunk in level.chunks(LANES) {
                for (block, job) in blocks.iter_mut().zip(chunk) {
                    let (l, r) = block.split_at_mut(32);
                    l.copy_from_slice(&value(&self.values, job.left));
                    r.copy_from_slice(&value(&self.values, job.right));
                }
                let k = chunk.len();
                hasher.hash_blocks(
                    blocks.get(..k).unwrap_or_default(),
                    out.get_mut(..k).unwrap_or_default(),
                );
                for (job, node) in chunk.iter().zip(out) {
                    // Every job's place is made with it (`push`).
                    if let Some(v) = self.values.get_mut(job.out as usize) {
                        *v = labelled(node, job.leaf);
                    }
                }
            }
        }
        self.blocks = blocks;
    }

    /// The node `node` stands for (after [`HashJobs::evaluate`]).
    ///
    /// A node of another set is a caller's error, asserted in debug builds (release builds
    /// read the terminator for a place beyond the set's).
    pub fn value(&self, node: NodeRef) -> Node {
        value(&self.values, node.slot)
    }

    /// Write the evaluated nodes of the placeholders [`HashJobs::push_opaque`] put in `proof`.
    ///
    /// Filling another proof than the one they were put in is a caller's error, asserted in
    /// debug builds where a placeholder lies beyond its end.
    pub fn fill(&mut self, proof: &mut [ProofNode]) {
        for (at, slot) in self.fills.drain(..) {
            let node = value(&self.values, slot);
            debug_assert!(
                at < proof.len(),
                "a proof placeholder at {at} beyond the proof's {} nodes: filled into another proof",
                proof.len()
            );
            if let Some(p) = proof.get_mut(at) {
                *p = ProofNode::Opaque(node);
            }
        }
    }
}

/// The node at `depth` of the subtree holding `entries`, as jobs: what
/// [`crate::trie::subtrie_root`] computes (which stays the plain definition of the
/// commitment, and the tests' reference for this), with every hash gathered into `jobs`.
pub fn subtrie_root_in(
    jobs: &mut HashJobs,
    depth: usize,
    entries: &[(KeyPath, ValueHash)],
) -> NodeRef {
    match entries {
        [] => NodeRef::TERMINATOR,
        [(key, value_hash)] => jobs.leaf(key, value_hash),
        // Distinct keys always differ before the last bit; unreachable for valid input.
        _ if depth >= KEY_BITS => NodeRef::TERMINATOR,
        // A large subtree (a bulk-sized batch into an empty region) is computed a part at a
        // time: the jobs of all its entries at once would hold ~100 bytes an entry.
        _ if entries.len() > EAGER_ENTRIES => {
            let split = entries.partition_point(|(key, _)| !bit_at(key, depth));
            let (left, right) = entries.split_at(split);
            let h = jobs.hasher;
            let l = subtrie_root_now(h, depth + 1, left);
            let r = subtrie_root_now(h, depth + 1, right);
            let (l, r) = (jobs.known(l), jobs.known(r));
            jobs.internal(l, r)
        }
        _ => {
            let split = entries.partition_point(|(key, _)| !bit_at(key, depth));
            let (left, right) = entries.split_at(split);
            let l = subtrie_root_in(jobs, depth + 1, left);
            let r = subtrie_root_in(jobs, depth + 1, right);
            // With two or more entries below, no compaction applies at this position.
            jobs.internal(l, r)
        }
    }
}

/// [`subtrie_root_in`] computed at once, in jobs of its own.
fn subtrie_root_now(hasher: Hasher, depth: usize, entries: &[(KeyPath, ValueHash)]) -> Node {
    let mut jobs = HashJobs::new(hasher);
    let node = subtrie_root_in(&mut jobs, depth, entries);
    jobs.evaluate();
    jobs.value(node)
}

/// The most entries a subtree's jobs are gathered for at once ([`subtrie_root_in`]).
const EAGER_ENTRIES: usize = 4096;

/// How many hashes [`HashJobs::evaluate`] hands the hasher at once (BLAKE3's widest lanes).
const LANES: usize = 16;

/// The node at `slot`: the terminator for [`NodeRef::TERMINATOR`]'s, which has no place.
fn value(values: &[Node], slot: u32) -> Node {
    debug_assert!(
        slot == NodeRef::TERMINATOR.slot || (slot as usize) < values.len(),
        "node place {slot} beyond this set of hash jobs' {}: a node of another set",
        values.len()
    );
    values.get(slot as usize).copied().unwrap_or(TERMINATOR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trie::{parent, subtrie_root};
    use proptest::prelude::Strategy;

    /// A subtree too large to gather at once (computed a part at a time) is the definition's
    /// node too.
    #[test]
    fn a_large_subtree_is_the_definitions_node() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut keys = alloc::collections::BTreeSet::new();
        while keys.len() < 3 * EAGER_ENTRIES {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut k = [0u8; 32];
            for (i, b) in k.iter_mut().enumerate() {
                *b = (x >> (8 * (i % 8))) as u8 ^ i as u8;
            }
            keys.insert(k);
        }
        let entries: Vec<(KeyPath, ValueHash)> =
            keys.into_iter().map(|k| (k, [k[0]; 32])).collect();
        let h = Hasher::Blake3;
        let mut jobs = HashJobs::new(h);
        let node = subtrie_root_in(&mut jobs, 0, &entries);
        jobs.evaluate();
        assert_eq!(jobs.value(node), subtrie_root(h, 0, &entries));
        assert!(
            jobs.values.len() < 16,
            "the large subtree was gathered at once"
        );
    }

    /// A node of another set of jobs is asserted against (debug builds), not read as some
    /// node of this one.
    #[test]
    #[should_panic(expected = "a node of another set")]
    fn a_node_of_another_set_is_refused() {
        let mut big = HashJobs::new(Hasher::Blake3);
        let mut node = NodeRef::TERMINATOR;
        for i in 0..4u8 {
            node = big.leaf(&[i; 32], &[i; 32]);
        }
        let small = HashJobs::new(Hasher::Blake3);
        let _ = small.value(node);
    }

    /// Placeholders filled into a proof shorter than the one they were put in are asserted
    /// against (debug builds).
    #[test]
    #[should_panic(expected = "filled into another proof")]
    fn placeholders_fill_only_their_proof() {
        let mut jobs = HashJobs::new(Hasher::Blake3);
        let leaf = jobs.leaf(&[1; 32], &[2; 32]);
        let mut proof = vec![ProofNode::Internal];
        jobs.push_opaque(&mut proof, leaf);
        jobs.evaluate();
        jobs.fill(&mut [ProofNode::Internal]);
    }

    proptest::proptest! {
        /// The subtree's node gathered as jobs is the definition's, whatever the entries
        /// (keys sharing long prefixes included) and the depth they sit at.
        #[test]
        fn a_subtree_as_jobs_is_the_definitions_node(
            keys in proptest::collection::btree_set(
                proptest::prelude::any::<[u8; 2]>().prop_map(|p| {
                    let mut k = [0x0fu8; 32];
                    k[0] = 0x80 | (p[0] & 0x1f);
                    k[31] = p[1];
                    k
                }),
                0..40,
            ),
            h in proptest::sample::select(Hasher::ALL.to_vec()),
        ) {
            let entries: Vec<(KeyPath, ValueHash)> =
                keys.into_iter().map(|k| (k, [k[31]; 32])).collect();
            let mut jobs = HashJobs::new(h);
            let node = subtrie_root_in(&mut jobs, 1, &entries);
            jobs.evaluate();
            proptest::prop_assert_eq!(jobs.value(node), subtrie_root(h, 1, &entries));
        }
    }

    /// Jobs compute what hashing as one goes computes: leaves, internal nodes and the
    /// compaction, over a few levels, for every hasher; proof placeholders get their nodes.
    #[test]
    fn jobs_compute_what_direct_hashing_computes() {
        for h in Hasher::ALL {
            let mut jobs = HashJobs::new(h);
            let leaves: Vec<(KeyPath, ValueHash)> =
                (0..37u8).map(|i| ([i; 32], [i ^ 0x5a; 32])).collect();
            let direct: Vec<Node> = leaves.iter().map(|(k, v)| h.hash_leaf(k, v)).collect();
            let refs: Vec<NodeRef> = leaves.iter().map(|(k, v)| jobs.leaf(k, v)).collect();
            // Pairs, then pairs of pairs (an odd one out beside the terminator).
            let mut d_level = direct.clone();
            let mut r_level = refs.clone();
            let mut proof = Vec::new();
            while d_level.len() > 1 {
                let d_next: Vec<Node> = d_level
                    .chunks(2)
                    .map(|c| match c {
                        [l, r] => parent(h, l, r),
                        [l] => parent(h, l, &TERMINATOR),
                        _ => TERMINATOR,
                    })
                    .collect();
                let r_next: Vec<NodeRef> = r_level
                    .chunks(2)
                    .map(|c| match c {
                        [l, r] => jobs.parent(*l, *r),
                        [l] => jobs.parent(*l, NodeRef::TERMINATOR),
                        _ => NodeRef::TERMINATOR,
                    })
                    .collect();
                if let Some(first) = r_next.first() {
                    jobs.push_opaque(&mut proof, *first);
                }
                d_level = d_next;
                r_level = r_next;
            }
            let (Some(&top), Some(&top_ref)) = (d_level.first(), r_level.first()) else {
                panic!("no top node");
            };
            let stored = jobs.known(top);
            let forced = jobs.internal(top_ref, NodeRef::TERMINATOR);
            let both = jobs.internal(stored, forced);
            jobs.evaluate();
            assert_eq!(jobs.value(top_ref), top, "{h}");
            let f = h.hash_internal(&top, &TERMINATOR);
            assert_eq!(jobs.value(forced), f, "{h}");
            assert_eq!(jobs.value(both), h.hash_internal(&top, &f), "{h}");
            for (r, d) in refs.iter().zip(&direct) {
                assert_eq!(jobs.value(*r), *d, "{h}");
            }
            jobs.fill(&mut proof);
            assert!(proof
                .iter()
                .all(|p| matches!(p, ProofNode::Opaque(n) if *n != TERMINATOR)));
            // A lone leaf beside an empty subtree is the leaf itself; two empties are empty.
            let (Some(&first), Some(&first_node)) = (refs.first(), direct.first()) else {
                panic!("no leaves");
            };
            assert_eq!(jobs.parent(first, NodeRef::TERMINATOR), first);
            assert_eq!(first.kind(), NodeKind::Leaf);
            assert_eq!(forced.kind(), NodeKind::Internal);
            assert_eq!(NodeRef::TERMINATOR.kind(), NodeKind::Terminator);
            assert_eq!(jobs.value(first), first_node);
            assert_eq!(
                jobs.parent(NodeRef::TERMINATOR, NodeRef::TERMINATOR),
                NodeRef::TERMINATOR
            );
            jobs.clear();
            jobs.evaluate();
        }
    }
}
