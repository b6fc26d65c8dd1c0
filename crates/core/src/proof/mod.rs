//! Proofs about the trie: single-key path proofs, multi-proofs over many keys, block witnesses,
//! how honest provers build them, and how verifiers check them.
//!
//! The byte formats are documented in `docs/PROOF_FORMAT.md`. Verification never trusts the
//! input: every structural rule is checked, depth is bounded by 256, and every count is bounded
//! by a named limit and by the input's own length.

mod build;
mod multi;
mod path;
mod sync;
mod witness;

pub use build::{
    path_proof_below, path_proof_from_entries, prove_and_update, prove_and_update_in, prove_subtrie,
};
pub use multi::{MultiProof, ProofNode, VerifiedMultiProof, MAX_MULTIPROOF_NODES};
pub use path::PathProof;
pub use sync::{
    prove_range, range_proof_from_paths, SyncChunk, SyncVerifier, MAX_CHUNK_ENTRIES,
    MAX_RANGE_PROOF_NODES,
};
pub use witness::{verify_block, VerifiedWitness, Witness, MAX_WITNESS_KEYS};

use crate::error::ProofError;
use crate::hasher::Hasher;
use crate::trie::{LeafData, Node, NodeKind, ValueHash};

/// The current version of every proof encoding.
///
/// ```
/// use sprig_core::{proof::FORMAT_VERSION, Hasher, PathProof, ProofError, ReferenceModel};
/// let proof = ReferenceModel::new(Hasher::Blake3).path_proof(&[1u8; 32]);
/// let mut bytes = proof.encode(Hasher::Blake3);
/// assert_eq!(bytes[4], FORMAT_VERSION); // after the four magic bytes
/// bytes[4] = FORMAT_VERSION + 1;
/// let newer = PathProof::decode(&bytes, Hasher::Blake3);
/// assert_eq!(newer, Err(ProofError::UnsupportedVersion { found: FORMAT_VERSION + 1 }));
/// ```
pub const FORMAT_VERSION: u8 = 1;

/// What a verified proof says about one key.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, Lookup, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([1u8; 32], b"a".to_vec());
/// let present = state.path_proof(&[1u8; 32]).verify(h, &state.root(), &[1u8; 32])?;
/// assert_eq!(present, Lookup::Present(h.hash_value(b"a"))); // the value's hash
/// let absent = state.path_proof(&[2u8; 32]).verify(h, &state.root(), &[2u8; 32])?;
/// assert_eq!(absent, Lookup::Absent);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The key is in the state with a value of this hash.
    Present(ValueHash),
    /// The key is not in the state.
    Absent,
}

impl Lookup {
    /// Whether `value` (or its absence) is what the proof shows for the key.
    ///
    /// ```
    /// use sprig_core::{Hasher, Lookup};
    /// let h = Hasher::Blake3;
    /// let lookup = Lookup::Present(h.hash_value(b"a"));
    /// assert!(lookup.matches(h, Some(b"a")));
    /// assert!(!lookup.matches(h, Some(b"b")) && !lookup.matches(h, None));
    /// assert!(Lookup::Absent.matches(h, None));
    /// ```
    pub fn matches(&self, hasher: Hasher, value: Option<&[u8]>) -> bool {
        match (self, value) {
            (Lookup::Absent, None) => true,
            (Lookup::Present(h), Some(v)) => *h == hasher.hash_value(v),
            _ => false,
        }
    }
}

/// Where a key's path ends: in an empty subtree, or at a leaf (the key's own, or another key's
/// whose subtree the key would share).
///
/// ```
/// use sprig_core::{Hasher, ReferenceModel, Terminal};
/// let mut state = ReferenceModel::new(Hasher::Blake3);
/// state.insert([0x80u8; 32], b"a".to_vec());
/// state.insert([0xc0u8; 32], b"b".to_vec());
/// let proof = state.path_proof(&[0x81u8; 32]); // absent, in the subtree of [0x80; 32]'s leaf
/// assert!(matches!(proof.terminal, Terminal::Leaf(leaf) if leaf.key_path == [0x80u8; 32]));
/// let proof = state.path_proof(&[0x00u8; 32]); // absent: the path ends in an empty subtree
/// assert_eq!((proof.terminal, proof.siblings.len()), (Terminal::Empty, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminal {
    /// An empty subtree: the key is absent.
    Empty,
    /// A leaf: the key is present if it is the leaf's key, absent otherwise.
    Leaf(LeafData),
}

impl Terminal {
    /// The terminal's node hash.
    ///
    /// ```
    /// use sprig_core::{Hasher, LeafData, Terminal, TERMINATOR};
    /// let h = Hasher::Blake3;
    /// let leaf = LeafData { key_path: [1u8; 32], value_hash: h.hash_value(b"a") };
    /// assert_eq!(Terminal::Leaf(leaf).node(h), leaf.hash(h));
    /// assert_eq!(Terminal::Empty.node(h), TERMINATOR);
    /// ```
    pub fn node(&self, hasher: Hasher) -> Node {
        match self {
            Terminal::Empty => crate::trie::TERMINATOR,
            Terminal::Leaf(leaf) => leaf.hash(hasher),
        }
    }
}

/// The hash of an internal node that a proof claims to exist, refusing pairs that the trie
/// would have compacted away (an empty subtree beside another empty one or beside a single
/// leaf). Honest proofs never contain such pairs; accepting them would only admit
/// non-canonical encodings of the same facts.
pub(crate) fn claimed_internal(
    hasher: Hasher,
    left: &Node,
    right: &Node,
) -> Result<Node, ProofError> {
    let compactable = matches!(
        (Hasher::node_kind(left), Hasher::node_kind(right)),
        (NodeKind::Terminator, NodeKind::Terminator | NodeKind::Leaf)
            | (NodeKind::Leaf, NodeKind::Terminator)
    );
    if compactable {
        return Err(ProofError::Malformed {
            reason: "internal node over a subtree the trie would have compacted",
        });
    }
    Ok(hasher.hash_internal(left, right))
}

/// Read and check the hasher byte of an encoding against the verifier's hasher.
pub(crate) fn read_hasher(
    reader: &mut crate::codec::Reader<'_>,
    expected: Hasher,
) -> Result<(), ProofError> {
    let id = reader.u8("hasher id")?;
    match Hasher::from_id(id) {
        None => Err(ProofError::UnknownHasher { id }),
        Some(h) if h != expected => Err(ProofError::HasherMismatch {
            expected: expected.id(),
            found: id,
        }),
        Some(_) => Ok(()),
    }
}

/// The hasher an encoded proof, multi-proof or witness says it was made with, without decoding
/// the rest. Tools use it to pick a verifier; verification still checks it.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{proof::encoded_hasher, Hasher, ReferenceModel};
/// let state = ReferenceModel::new(Hasher::Keccak256);
/// let bytes = state.witness(&[[1u8; 32]]).encode(Hasher::Keccak256);
/// assert_eq!(encoded_hasher(&bytes)?, Hasher::Keccak256); // pick the verifier from the bytes
/// # Ok(()) }
/// ```
pub fn encoded_hasher(bytes: &[u8]) -> Result<Hasher, ProofError> {
    let mut reader = crate::codec::Reader::new(bytes);
    let _magic: [u8; 4] = reader.array("magic bytes")?;
    let version = reader.u8("format version")?;
    if version != FORMAT_VERSION {
        return Err(ProofError::UnsupportedVersion { found: version });
    }
    let id = reader.u8("hasher id")?;
    Hasher::from_id(id).ok_or(ProofError::UnknownHasher { id })
}
