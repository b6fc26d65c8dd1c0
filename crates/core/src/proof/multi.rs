//! Multi-proofs: the part of the trie that a set of key paths walks through, with every
//! sibling that the paths share stored once.
//!
//! A multi-proof is a pruned copy of the trie written in pre-order: expanded internal nodes on
//! the keys' paths, the terminals where the paths end (empty subtrees and leaves with their
//! data), and opaque hashes for every subtree no path enters. Verification re-hashes it into a
//! root; the verified copy then answers lookups and can apply a batch of changes to derive the
//! next root, as a stateless client does when it re-executes a block.

use super::{claimed_internal, read_hasher, Lookup, FORMAT_VERSION};
use crate::codec::{write_count, write_header, Reader};
use crate::error::ProofError;
use crate::hasher::Hasher;
use crate::trie::{
    bit_at, parent, same_prefix, set_bit, subtrie_root, KeyPath, LeafData, Node, ValueHash,
    KEY_BITS, TERMINATOR,
};
use alloc::vec::Vec;

const MAGIC: &[u8; 4] = b"SPMP";
const TAG_TERMINATOR: u8 = 0;
const TAG_OPAQUE: u8 = 1;
const TAG_LEAF: u8 = 2;
const TAG_INTERNAL: u8 = 3;

/// The most nodes a decoded multi-proof may hold (about 2 GiB of encoding at most).
///
/// ```
/// use sprig_core::{proof::MAX_MULTIPROOF_NODES, Hasher, MultiProof, ProofError, ReferenceModel};
/// let proof = ReferenceModel::new(Hasher::Blake3).multi_proof(&[[1u8; 32]]);
/// let mut bytes = proof.encode(Hasher::Blake3);
/// bytes[6..10].copy_from_slice(&(MAX_MULTIPROOF_NODES + 1).to_le_bytes()); // the node count
/// let refused = MultiProof::decode(&bytes, Hasher::Blake3);
/// let limit = u64::from(MAX_MULTIPROOF_NODES);
/// assert!(matches!(refused, Err(ProofError::TooLarge { limit: l, .. }) if l == limit));
/// ```
pub const MAX_MULTIPROOF_NODES: u32 = 1 << 26;

/// One node of a multi-proof, in pre-order.
///
/// ```
/// use sprig_core::{Hasher, LeafData, ProofNode, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([0x00u8; 32], b"a".to_vec());
/// state.insert([0x80u8; 32], b"b".to_vec());
/// let proof = state.multi_proof(&[[0x00u8; 32]]); // the root, the key's leaf, its sibling
/// let leaf = LeafData { key_path: [0x00u8; 32], value_hash: h.hash_value(b"a") };
/// let sibling = h.hash_leaf(&[0x80u8; 32], &h.hash_value(b"b"));
/// let expected = [ProofNode::Internal, ProofNode::Leaf(leaf), ProofNode::Opaque(sibling)];
/// assert_eq!(proof.nodes, expected);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofNode {
    /// An internal node on some key's path; its left subtree follows, then its right.
    Internal,
    /// An empty subtree where some key's path ends.
    Terminator,
    /// A leaf where some key's path ends.
    Leaf(LeafData),
    /// The hash of a subtree that no proven path enters (never the terminator).
    Opaque(Node),
}

/// A proof about a set of keys, sharing the siblings their paths have in common.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// for i in 1u8..=8 {
///     state.insert([i; 32], vec![i]);
/// }
/// let keys = [[1u8; 32], [2u8; 32], [3u8; 32]];
/// let multi = state.multi_proof(&keys);
/// let separate: usize = keys.iter().map(|k| state.path_proof(k).encode(h).len()).sum();
/// assert!(multi.encode(h).len() < separate); // shared siblings are stored once
/// multi.verify(h, &state.root())?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiProof {
    /// The pruned trie in pre-order.
    pub nodes: Vec<ProofNode>,
}

impl MultiProof {
    /// Check the proof against `root`. On success, the returned value answers lookups and
    /// applies changes.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, Lookup, ProofError, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let proof = state.multi_proof(&[[1u8; 32]]);
    /// let verified = proof.verify(h, &state.root())?;
    /// assert_eq!(verified.lookup(&[1u8; 32])?, Lookup::Present(h.hash_value(b"a")));
    /// assert_eq!(proof.verify(h, &[9u8; 32]).err(), Some(ProofError::RootMismatch));
    /// # Ok(()) }
    /// ```
    pub fn verify(&self, hasher: Hasher, root: &Node) -> Result<VerifiedMultiProof, ProofError> {
        let mut v = VerifiedMultiProof {
            hasher,
            root: *root,
            nodes: self.nodes.clone(),
            hashes: alloc::vec![TERMINATOR; self.nodes.len()],
            right_child: alloc::vec![0u32; self.nodes.len()],
        };
        let mut next = 0usize;
        let mut path = [0u8; 32];
        let computed = v.hash_from(&mut next, 0, &mut path)?;
        if next != v.nodes.len() {
            return Err(ProofError::Malformed {
                reason: "nodes left over after the root's subtree",
            });
        }
        if computed != *root {
            return Err(ProofError::RootMismatch);
        }
        Ok(v)
    }

    /// The versioned binary encoding (see `docs/PROOF_FORMAT.md`).
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, MultiProof, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let proof = state.multi_proof(&[[1u8; 32], [2u8; 32]]);
    /// let bytes = proof.encode(Hasher::Blake3);
    /// assert_eq!(&bytes[..4], b"SPMP"); // see docs/PROOF_FORMAT.md
    /// assert_eq!(MultiProof::decode(&bytes, Hasher::Blake3)?, proof);
    /// # Ok(()) }
    /// ```
    pub fn encode(&self, hasher: Hasher) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + self.nodes.len() * 33);
        write_header(&mut out, MAGIC, FORMAT_VERSION);
        out.push(hasher.id());
        self.encode_body(&mut out);
        out
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        encode_nodes(&self.nodes, out);
    }

    /// Decode a multi-proof made with `hasher`.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, MultiProof, ProofError, ReferenceModel};
    /// let state = ReferenceModel::new(Hasher::Blake3);
    /// let bytes = state.multi_proof(&[[1u8; 32]]).encode(Hasher::Blake3);
    /// assert_eq!(MultiProof::decode(&bytes, Hasher::Blake3)?, state.multi_proof(&[[1u8; 32]]));
    /// let cut = MultiProof::decode(&bytes[..bytes.len() - 1], Hasher::Blake3);
    /// assert!(matches!(cut, Err(ProofError::Truncated { .. })));
    /// # Ok(()) }
    /// ```
    pub fn decode(bytes: &[u8], hasher: Hasher) -> Result<MultiProof, ProofError> {
        let mut r = Reader::new(bytes);
        r.header(MAGIC, "multi-proof", FORMAT_VERSION)?;
        read_hasher(&mut r, hasher)?;
        let proof = Self::decode_body(&mut r)?;
        r.finish()?;
        Ok(proof)
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<MultiProof, ProofError> {
        let nodes = decode_nodes(r, "multi-proof node count", MAX_MULTIPROOF_NODES)?;
        Ok(MultiProof { nodes })
    }
}

/// Append a node count and `nodes` in their encoding (shared by multi-proofs, witnesses and
/// state-sync chunks).
pub(super) fn encode_nodes(nodes: &[ProofNode], out: &mut Vec<u8>) {
    write_count(out, nodes.len());
    for node in nodes {
        match node {
            ProofNode::Internal => out.push(TAG_INTERNAL),
            ProofNode::Terminator => out.push(TAG_TERMINATOR),
            ProofNode::Leaf(leaf) => {
                out.push(TAG_LEAF);
                out.extend_from_slice(&leaf.key_path);
                out.extend_from_slice(&leaf.value_hash);
            }
            ProofNode::Opaque(hash) => {
                out.push(TAG_OPAQUE);
                out.extend_from_slice(hash);
            }
        }
    }
}

/// Read what [`encode_nodes`] wrote, at most `limit` nodes.
pub(super) fn decode_nodes(
    r: &mut Reader<'_>,
    what: &'static str,
    limit: u32,
) -> Result<Vec<ProofNode>, ProofError> {
    let count = r.count(what, limit, 1)?;
    let mut nodes = Vec::with_capacity(count);
    for _ in 0..count {
        let node = match r.u8("node tag")? {
            TAG_INTERNAL => ProofNode::Internal,
            TAG_TERMINATOR => ProofNode::Terminator,
            TAG_LEAF => ProofNode::Leaf(LeafData {
                key_path: r.array("leaf key path")?,
                value_hash: r.array("leaf value hash")?,
            }),
            TAG_OPAQUE => ProofNode::Opaque(r.array("opaque node")?),
            tag => return Err(ProofError::BadTag { tag }),
        };
        nodes.push(node);
    }
    Ok(nodes)
}

/// A multi-proof that hashed to the expected root.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([1u8; 32], b"a".to_vec());
/// let verified = state.multi_proof(&[[1u8; 32]]).verify(h, &state.root())?;
/// assert_eq!((verified.root(), verified.hasher()), (state.root(), h));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct VerifiedMultiProof {
    hasher: Hasher,
    root: Node,
    nodes: Vec<ProofNode>,
    /// The node hash of every entry of `nodes`.
    hashes: Vec<Node>,
    /// For internal nodes, the index of the right child; 0 elsewhere.
    right_child: Vec<u32>,
}

impl VerifiedMultiProof {
    /// The root the proof was verified against.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let verified = state.multi_proof(&[[1u8; 32]]).verify(Hasher::Blake3, &state.root())?;
    /// assert_eq!(verified.root(), state.root());
    /// # Ok(()) }
    /// ```
    pub fn root(&self) -> Node {
        self.root
    }

    /// The hasher the proof was verified with.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let state = ReferenceModel::new(Hasher::Sha256);
    /// let verified = state.multi_proof(&[[1u8; 32]]).verify(Hasher::Sha256, &state.root())?;
    /// assert_eq!(verified.hasher(), Hasher::Sha256);
    /// # Ok(()) }
    /// ```
    pub fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// Hash the subtree starting at `*next` (at `depth`, reached by `path`), recording node
    /// hashes and right-child indices. Recursion is bounded by the 256-bit depth limit.
    fn hash_from(
        &mut self,
        next: &mut usize,
        depth: usize,
        path: &mut KeyPath,
    ) -> Result<Node, ProofError> {
        let index = *next;
        let node = *self.nodes.get(index).ok_or(ProofError::Malformed {
            reason: "the tree ends before every internal node has two children",
        })?;
        *next += 1;
        let hash = match node {
            ProofNode::Terminator => TERMINATOR,
            ProofNode::Opaque(hash) => {
                if hash == TERMINATOR {
                    return Err(ProofError::Malformed {
                        reason: "opaque node holding the terminator",
                    });
                }
                hash
            }
            ProofNode::Leaf(leaf) => {
                if !same_prefix(&leaf.key_path, path, depth) {
                    return Err(ProofError::Malformed {
                        reason: "leaf is not on its own key path",
                    });
                }
                leaf.hash(self.hasher)
            }
            ProofNode::Internal => {
                if depth >= KEY_BITS {
                    return Err(ProofError::TooDeep);
                }
                set_bit(path, depth, false);
                let left = self.hash_from(next, depth + 1, path)?;
                let right_index = u32::try_from(*next).map_err(|_| ProofError::TooLarge {
                    what: "multi-proof node count",
                    found: *next as u64,
                    limit: u64::from(MAX_MULTIPROOF_NODES),
                })?;
                set_bit(path, depth, true);
                let right = self.hash_from(next, depth + 1, path)?;
                set_bit(path, depth, false);
                if let Some(slot) = self.right_child.get_mut(index) {
                    *slot = right_index;
                }
                claimed_internal(self.hasher, &left, &right)?
            }
        };
        if let Some(slot) = self.hashes.get_mut(index) {
            *slot = hash;
        }
        Ok(hash)
    }

    /// What the proof shows about `key`, or [`ProofError::NotCovered`] if the key's path leaves
    /// the proven part of the trie.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, Lookup, ProofError, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([0x00u8; 32], b"a".to_vec());
    /// state.insert([0x80u8; 32], b"b".to_vec());
    /// let verified = state.multi_proof(&[[0x00u8; 32]]).verify(h, &state.root())?;
    /// assert!(verified.lookup(&[0x00u8; 32])?.matches(h, Some(b"a")));
    /// let outside = verified.lookup(&[0x80u8; 32]); // behind an opaque sibling
    /// assert_eq!(outside, Err(ProofError::NotCovered { key: [0x80u8; 32] }));
    /// # Ok(()) }
    /// ```
    pub fn lookup(&self, key: &KeyPath) -> Result<Lookup, ProofError> {
        let mut index = 0usize;
        for depth in 0..=KEY_BITS {
            match self.nodes.get(index) {
                Some(ProofNode::Internal) => {
                    index = if bit_at(key, depth) {
                        self.right_child.get(index).map_or(0, |&i| i as usize)
                    } else {
                        index + 1
                    };
                }
                Some(ProofNode::Terminator) => return Ok(Lookup::Absent),
                Some(ProofNode::Leaf(leaf)) => {
                    return Ok(if leaf.key_path == *key {
                        Lookup::Present(leaf.value_hash)
                    } else {
                        Lookup::Absent
                    })
                }
                Some(ProofNode::Opaque(_)) | None => break,
            }
        }
        Err(ProofError::NotCovered { key: *key })
    }

    /// The root after applying `changes` (a new value hash, or `None` to delete) to the proven
    /// state. Every changed key must be covered by the proof; keys must be distinct.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let verified = state.multi_proof(&[[1u8; 32], [2u8; 32]]).verify(h, &state.root())?;
    /// let new_root = verified.apply(&[([1u8; 32], None), ([2u8; 32], Some(h.hash_value(b"b")))])?;
    /// state.apply([([1u8; 32], None), ([2u8; 32], Some(b"b".to_vec()))]);
    /// assert_eq!(new_root, state.root()); // computed from the proof alone
    /// # Ok(()) }
    /// ```
    pub fn apply(&self, changes: &[(KeyPath, Option<ValueHash>)]) -> Result<Node, ProofError> {
        let mut sorted: Vec<(KeyPath, Option<ValueHash>)> = changes.to_vec();
        sorted.sort_unstable_by_key(|c| c.0);
        for pair in sorted.windows(2) {
            if let [a, b] = pair {
                if a.0 == b.0 {
                    return Err(ProofError::DuplicateKey { key: a.0 });
                }
            }
        }
        if self.nodes.is_empty() {
            return Err(ProofError::Malformed {
                reason: "empty multi-proof",
            });
        }
        self.apply_at(0, 0, &sorted)
    }

    fn apply_at(
        &self,
        index: usize,
        depth: usize,
        changes: &[(KeyPath, Option<ValueHash>)],
    ) -> Result<Node, ProofError> {
        let unchanged = || self.hashes.get(index).copied().unwrap_or(TERMINATOR);
        let Some(first) = changes.first() else {
            return Ok(unchanged());
        };
        match self.nodes.get(index) {
            Some(ProofNode::Internal) => {
                let split = changes.partition_point(|(k, _)| !bit_at(k, depth));
                let (left, right) = changes.split_at(split);
                let right_index = self.right_child.get(index).map_or(0, |&i| i as usize);
                let l = self.apply_at(index + 1, depth + 1, left)?;
                let r = self.apply_at(right_index, depth + 1, right)?;
                Ok(parent(self.hasher, &l, &r))
            }
            Some(ProofNode::Terminator) => Ok(self.rebuild(depth, None, changes)),
            Some(ProofNode::Leaf(leaf)) => Ok(self.rebuild(depth, Some(leaf), changes)),
            Some(ProofNode::Opaque(_)) | None => Err(ProofError::NotCovered { key: first.0 }),
        }
    }

    /// The subtree at `depth` holding `existing` (if any) with `changes` applied.
    fn rebuild(
        &self,
        depth: usize,
        existing: Option<&LeafData>,
        changes: &[(KeyPath, Option<ValueHash>)],
    ) -> Node {
        let mut entries: Vec<(KeyPath, ValueHash)> = Vec::with_capacity(changes.len() + 1);
        let mut pending = existing.copied();
        for (key, value) in changes {
            if let Some(leaf) = pending {
                if leaf.key_path < *key {
                    entries.push((leaf.key_path, leaf.value_hash));
                    pending = None;
                } else if leaf.key_path == *key {
                    pending = None;
                }
            }
            if let Some(v) = value {
                entries.push((*key, *v));
            }
        }
        if let Some(leaf) = pending {
            entries.push((leaf.key_path, leaf.value_hash));
        }
        subtrie_root(self.hasher, depth, &entries)
    }
}
