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

pub use build::{path_proof_below, path_proof_from_entries, prove_and_update, prove_subtrie};
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
pub const FORMAT_VERSION: u8 = 1;

/// What a verified proof says about one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The key is in the state with a value of this hash.
    Present(ValueHash),
    /// The key is not in the state.
    Absent,
}

impl Lookup {
    /// Whether `value` (or its absence) is what the proof shows for the key.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminal {
    /// An empty subtree: the key is absent.
    Empty,
    /// A leaf: the key is present if it is the leaf's key, absent otherwise.
    Leaf(LeafData),
}

impl Terminal {
    /// The terminal's node hash.
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
