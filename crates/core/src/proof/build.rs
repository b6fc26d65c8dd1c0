//! How an honest prover builds proofs from a sorted list of entries.
//!
//! The reference model proves over its whole entry set; the engine uses the same functions on
//! one page's entries below the page's position, and writes the nodes above the pages from its
//! in-memory directory.

use super::{MultiProof, PathProof, ProofNode, Terminal};
use crate::hasher::Hasher;
use crate::jobs::{subtrie_root_in, HashJobs, NodeRef};
use crate::trie::{
    apply_changes, bit_at, subtrie_root, KeyPath, LeafData, Node, ValueHash, KEY_BITS,
};
use alloc::vec::Vec;

/// Append to `out` the pre-order multi-proof nodes of the subtree at `depth` holding `entries`,
/// expanded along the paths of `keys`.
///
/// `entries` must be sorted with distinct keys and `keys` sorted; both must share the position's
/// first `depth` bits. Subtrees that no key enters become opaque hashes.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{proof::prove_subtrie, Hasher, MultiProof, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([1u8; 32], b"a".to_vec());
/// state.insert([2u8; 32], b"b".to_vec());
/// let mut nodes = Vec::new();
/// prove_subtrie(h, 0, &state.leaves(), &[[1u8; 32]], &mut nodes); // from the root down
/// assert_eq!(MultiProof { nodes }, state.multi_proof(&[[1u8; 32]]));
/// # Ok(()) }
/// ```
pub fn prove_subtrie(
    hasher: Hasher,
    depth: usize,
    entries: &[(KeyPath, ValueHash)],
    keys: &[KeyPath],
    out: &mut Vec<ProofNode>,
) {
    if keys.is_empty() {
        out.push(match entries {
            [] => ProofNode::Terminator,
            _ => ProofNode::Opaque(subtrie_root(hasher, depth, entries)),
        });
        return;
    }
    match entries {
        [] => out.push(ProofNode::Terminator),
        [(key_path, value_hash)] => out.push(ProofNode::Leaf(LeafData {
            key_path: *key_path,
            value_hash: *value_hash,
        })),
        _ if depth >= KEY_BITS => out.push(ProofNode::Terminator),
        _ => {
            out.push(ProofNode::Internal);
            let e = entries.partition_point(|(k, _)| !bit_at(k, depth));
            let k = keys.partition_point(|k| !bit_at(k, depth));
            let (el, er) = entries.split_at(e);
            let (kl, kr) = keys.split_at(k);
            prove_subtrie(hasher, depth + 1, el, kl, out);
            prove_subtrie(hasher, depth + 1, er, kr, out);
        }
    }
}

/// Prove `keys` over the subtree at `depth` holding `entries` (as [`prove_subtrie`] does,
/// appending to `out`) and return the subtree's node after `changes` (a new value hash, or
/// `None` to delete), in one pass: every subtree no key enters is hashed once and serves both
/// as the proof's opaque sibling and as the unchanged part of the new subtree.
///
/// `entries`, `keys` and `changes` must be sorted with distinct keys, all under the
/// position's first `depth` bits, and every changed key must be in `keys`.
///
/// ```
/// use sprig_core::{proof::prove_and_update, Hasher, MultiProof, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([1u8; 32], b"a".to_vec());
/// let (keys, changes) = ([[1u8; 32]], [([1u8; 32], Some(h.hash_value(b"b")))]);
/// let mut nodes = Vec::new();
/// let new_root = prove_and_update(h, 0, &state.leaves(), &keys, &changes, &mut nodes);
/// assert_eq!(MultiProof { nodes }, state.multi_proof(&keys)); // the pre-state proof
/// state.insert([1u8; 32], b"b".to_vec());
/// assert_eq!(new_root, state.root()); // and the post-state root, in one pass
/// ```
pub fn prove_and_update(
    hasher: Hasher,
    depth: usize,
    entries: &[(KeyPath, ValueHash)],
    keys: &[KeyPath],
    changes: &[(KeyPath, Option<ValueHash>)],
    out: &mut Vec<ProofNode>,
) -> Node {
    let mut jobs = HashJobs::new(hasher);
    let node = prove_and_update_in(&mut jobs, depth, entries, keys, changes, out);
    jobs.evaluate();
    jobs.fill(out);
    jobs.value(node)
}

/// [`prove_and_update`] with its hashes gathered into `jobs`: the proof's hashes are
/// placeholders in `out` until `jobs` is evaluated and fills them ([`HashJobs::fill`]), and the
/// new node is `jobs`'s to compute. A caller walking many subtrees evaluates them together.
pub fn prove_and_update_in(
    jobs: &mut HashJobs,
    depth: usize,
    entries: &[(KeyPath, ValueHash)],
    keys: &[KeyPath],
    changes: &[(KeyPath, Option<ValueHash>)],
    out: &mut Vec<ProofNode>,
) -> NodeRef {
    if keys.is_empty() {
        let node = subtrie_root_in(jobs, depth, entries);
        if entries.is_empty() {
            out.push(ProofNode::Terminator);
        } else {
            jobs.push_opaque(out, node);
        }
        return node;
    }
    match entries {
        [] => {
            out.push(ProofNode::Terminator);
            merged_root_in(jobs, depth, entries, changes)
        }
        [(key_path, value_hash)] => {
            out.push(ProofNode::Leaf(LeafData {
                key_path: *key_path,
                value_hash: *value_hash,
            }));
            merged_root_in(jobs, depth, entries, changes)
        }
        _ if depth >= KEY_BITS => {
            out.push(ProofNode::Terminator);
            merged_root_in(jobs, depth, entries, changes)
        }
        _ => {
            out.push(ProofNode::Internal);
            let e = entries.partition_point(|(k, _)| !bit_at(k, depth));
            let k = keys.partition_point(|k| !bit_at(k, depth));
            let c = changes.partition_point(|(k, _)| !bit_at(k, depth));
            let (el, er) = entries.split_at(e);
            let (kl, kr) = keys.split_at(k);
            let (cl, cr) = changes.split_at(c);
            let l = prove_and_update_in(jobs, depth + 1, el, kl, cl, out);
            let r = prove_and_update_in(jobs, depth + 1, er, kr, cr, out);
            jobs.parent(l, r)
        }
    }
}

/// The node at `depth` of `entries` (at most one, or a subtree no key splits) with `changes`
/// merged in, as jobs.
fn merged_root_in(
    jobs: &mut HashJobs,
    depth: usize,
    entries: &[(KeyPath, ValueHash)],
    changes: &[(KeyPath, Option<ValueHash>)],
) -> NodeRef {
    if changes.is_empty() {
        return subtrie_root_in(jobs, depth, entries);
    }
    subtrie_root_in(jobs, depth, &apply_changes(entries, changes))
}

impl MultiProof {
    /// The multi-proof of `keys` over the whole trie holding `entries` (both sorted).
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, MultiProof, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let proof = MultiProof::from_entries(h, &state.leaves(), &[[1u8; 32], [2u8; 32]]);
    /// proof.verify(h, &state.root())?;
    /// # Ok(()) }
    /// ```
    pub fn from_entries(
        hasher: Hasher,
        entries: &[(KeyPath, ValueHash)],
        keys: &[KeyPath],
    ) -> MultiProof {
        let mut nodes = Vec::new();
        prove_subtrie(hasher, 0, entries, keys, &mut nodes);
        MultiProof { nodes }
    }
}

/// The path proof of `key` over the trie holding `entries` (sorted, distinct keys).
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{proof::path_proof_from_entries, Hasher};
/// let h = Hasher::Blake3;
/// let entries = [([1u8; 32], h.hash_value(b"a")), ([2u8; 32], h.hash_value(b"b"))];
/// let root = sprig_core::trie::root_of(h, &entries);
/// let proof = path_proof_from_entries(h, &entries, &[2u8; 32]);
/// proof.verify_value(h, &root, &[2u8; 32], Some(b"b"))?;
/// # Ok(()) }
/// ```
pub fn path_proof_from_entries(
    hasher: Hasher,
    entries: &[(KeyPath, ValueHash)],
    key: &KeyPath,
) -> PathProof {
    path_proof_below(hasher, 0, entries, key)
}

/// The part of `key`'s path proof below depth `depth`, over the subtree at that depth holding
/// `entries` (sorted, distinct, all sharing the position's first `depth` bits, as does `key`).
/// The siblings returned are those at depths `depth + 1` and below; a prover that knows the
/// nodes above (such as the engine's directory) puts its own siblings in front.
///
/// ```
/// use sprig_core::{proof::{path_proof_below, path_proof_from_entries}, Hasher};
/// let h = Hasher::Blake3;
/// let entries = [([0x00u8; 32], h.hash_value(b"a")), ([0x40u8; 32], h.hash_value(b"b"))];
/// let whole = path_proof_from_entries(h, &entries, &[0x00u8; 32]);
/// let below = path_proof_below(h, 1, &entries, &[0x00u8; 32]); // under position "0"
/// assert_eq!(below.siblings, whole.siblings[1..]); // the prover adds the siblings above
/// ```
pub fn path_proof_below(
    hasher: Hasher,
    depth: usize,
    entries: &[(KeyPath, ValueHash)],
    key: &KeyPath,
) -> PathProof {
    let mut siblings = Vec::new();
    let mut here = entries;
    let mut depth = depth;
    loop {
        match here {
            [] => {
                return PathProof {
                    terminal: Terminal::Empty,
                    siblings,
                }
            }
            [(key_path, value_hash)] => {
                return PathProof {
                    terminal: Terminal::Leaf(LeafData {
                        key_path: *key_path,
                        value_hash: *value_hash,
                    }),
                    siblings,
                }
            }
            _ if depth >= KEY_BITS => {
                return PathProof {
                    terminal: Terminal::Empty,
                    siblings,
                }
            }
            _ => {
                let split = here.partition_point(|(k, _)| !bit_at(k, depth));
                let (left, right) = here.split_at(split);
                let (next, other) = if bit_at(key, depth) {
                    (right, left)
                } else {
                    (left, right)
                };
                siblings.push(subtrie_root(hasher, depth + 1, other));
                here = next;
                depth += 1;
            }
        }
    }
}
