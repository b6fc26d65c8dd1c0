//! Block witnesses: a multi-proof of the pre-state together with the list of keys a block read
//! or wrote. A stateless client verifies it against the old root, checks the values it is given
//! against it, and applies the block's changes to derive the new root.
//!
//! Values themselves are not part of the witness: the trie commits to value hashes, and values
//! travel with the block. [`VerifiedWitness::check_value`] ties a value to the proven state.

use super::{read_hasher, Lookup, MultiProof, VerifiedMultiProof, FORMAT_VERSION};
use crate::codec::{write_count, write_header, Reader};
use crate::error::ProofError;
use crate::hasher::Hasher;
use crate::trie::{KeyPath, Node, ValueHash};
use alloc::vec::Vec;

const MAGIC: &[u8; 4] = b"SPWT";

/// The most keys a decoded witness may list.
pub const MAX_WITNESS_KEYS: u32 = 1 << 24;

/// Proof of the pre-state of every key a block read or wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Witness {
    /// The keys read or written, sorted and distinct.
    pub keys: Vec<KeyPath>,
    /// A multi-proof covering every key in `keys`.
    pub proof: MultiProof,
}

impl Witness {
    /// Check the witness against the pre-state `root`: the proof must hash to it, the keys must
    /// be sorted and distinct, and every key must be covered by the proof.
    pub fn verify(&self, hasher: Hasher, root: &Node) -> Result<VerifiedWitness, ProofError> {
        for pair in self.keys.windows(2) {
            if let [a, b] = pair {
                if a == b {
                    return Err(ProofError::DuplicateKey { key: *a });
                }
                if a > b {
                    return Err(ProofError::Malformed {
                        reason: "witness keys are not sorted",
                    });
                }
            }
        }
        let proof = self.proof.verify(hasher, root)?;
        for key in &self.keys {
            proof.lookup(key)?;
        }
        Ok(VerifiedWitness {
            keys: self.keys.clone(),
            proof,
        })
    }

    /// The versioned binary encoding (see `docs/PROOF_FORMAT.md`).
    pub fn encode(&self, hasher: Hasher) -> Vec<u8> {
        let mut out = Vec::with_capacity(14 + self.keys.len() * 32 + self.proof.nodes.len() * 33);
        write_header(&mut out, MAGIC, FORMAT_VERSION);
        out.push(hasher.id());
        write_count(&mut out, self.keys.len());
        for key in &self.keys {
            out.extend_from_slice(key);
        }
        self.proof.encode_body(&mut out);
        out
    }

    /// Decode a witness made with `hasher`.
    pub fn decode(bytes: &[u8], hasher: Hasher) -> Result<Witness, ProofError> {
        let mut r = Reader::new(bytes);
        r.header(MAGIC, "witness", FORMAT_VERSION)?;
        read_hasher(&mut r, hasher)?;
        let count = r.count("witness key count", MAX_WITNESS_KEYS, 32)?;
        let mut keys = Vec::with_capacity(count);
        for _ in 0..count {
            keys.push(r.array("witness key")?);
        }
        let proof = MultiProof::decode_body(&mut r)?;
        r.finish()?;
        Ok(Witness { keys, proof })
    }
}

/// A witness that verified against its pre-state root.
#[derive(Debug, Clone)]
pub struct VerifiedWitness {
    keys: Vec<KeyPath>,
    proof: VerifiedMultiProof,
}

impl VerifiedWitness {
    /// The pre-state root.
    pub fn root(&self) -> Node {
        self.proof.root()
    }

    /// The keys the witness vouches for.
    pub fn keys(&self) -> &[KeyPath] {
        &self.keys
    }

    fn require_listed(&self, key: &KeyPath) -> Result<(), ProofError> {
        if self.keys.binary_search(key).is_ok() {
            Ok(())
        } else {
            Err(ProofError::NotCovered { key: *key })
        }
    }

    /// The pre-state of a listed key.
    pub fn lookup(&self, key: &KeyPath) -> Result<Lookup, ProofError> {
        self.require_listed(key)?;
        self.proof.lookup(key)
    }

    /// Check that `value` (or its absence) is the pre-state of a listed key.
    pub fn check_value(&self, key: &KeyPath, value: Option<&[u8]>) -> Result<(), ProofError> {
        if self.lookup(key)?.matches(self.proof.hasher(), value) {
            Ok(())
        } else {
            Err(ProofError::ValueMismatch { key: *key })
        }
    }

    /// The post-state root after a block's `changes` (new value hash, or `None` to delete).
    /// Every changed key must be listed in the witness.
    pub fn apply(&self, changes: &[(KeyPath, Option<ValueHash>)]) -> Result<Node, ProofError> {
        for (key, _) in changes {
            self.require_listed(key)?;
        }
        self.proof.apply(changes)
    }
}

/// The block check of a stateless client: verify `witness` against `old_root` and return the
/// root after `changes`.
pub fn verify_block(
    hasher: Hasher,
    old_root: &Node,
    witness: &Witness,
    changes: &[(KeyPath, Option<ValueHash>)],
) -> Result<Node, ProofError> {
    witness.verify(hasher, old_root)?.apply(changes)
}
