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
///
/// ```
/// use sprig_core::{proof::MAX_WITNESS_KEYS, Hasher, ProofError, ReferenceModel, Witness};
/// let state = ReferenceModel::new(Hasher::Blake3);
/// let mut bytes = state.witness(&[[1u8; 32]]).encode(Hasher::Blake3);
/// bytes[6..10].copy_from_slice(&(MAX_WITNESS_KEYS + 1).to_le_bytes()); // the key count
/// let refused = Witness::decode(&bytes, Hasher::Blake3);
/// let limit = u64::from(MAX_WITNESS_KEYS);
/// assert!(matches!(refused, Err(ProofError::TooLarge { limit: l, .. }) if l == limit));
/// ```
pub const MAX_WITNESS_KEYS: u32 = 1 << 24;

/// Proof of the pre-state of every key a block read or wrote.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([1u8; 32], 100u64.to_le_bytes().to_vec());
/// let (old_root, witness) = (state.root(), state.witness(&[[1u8; 32], [2u8; 32]]));
/// // A stateless client: check the reads, then derive the new root from the writes.
/// let verified = witness.verify(h, &old_root)?;
/// verified.check_value(&[1u8; 32], Some(&100u64.to_le_bytes()))?;
/// let new_root = verified.apply(&[([2u8; 32], Some(h.hash_value(b"new")))])?;
/// state.insert([2u8; 32], b"new".to_vec());
/// assert_eq!(new_root, state.root());
/// # Ok(()) }
/// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ProofError, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let mut witness = state.witness(&[[1u8; 32], [2u8; 32]]);
    /// witness.verify(Hasher::Blake3, &state.root())?;
    /// witness.keys.reverse(); // keys must be sorted
    /// let unsorted = witness.verify(Hasher::Blake3, &state.root());
    /// assert!(matches!(unsorted, Err(ProofError::Malformed { .. })));
    /// # Ok(()) }
    /// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel, Witness};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let witness = state.witness(&[[1u8; 32]]);
    /// let bytes = witness.encode(Hasher::Blake3); // sent along with the block
    /// assert_eq!(&bytes[..4], b"SPWT");
    /// assert_eq!(Witness::decode(&bytes, Hasher::Blake3)?, witness);
    /// # Ok(()) }
    /// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ProofError, ReferenceModel, Witness};
    /// let state = ReferenceModel::new(Hasher::Blake3);
    /// let bytes = state.witness(&[[1u8; 32]]).encode(Hasher::Blake3);
    /// assert_eq!(Witness::decode(&bytes, Hasher::Blake3)?.keys, [[1u8; 32]]);
    /// let other = Witness::decode(b"SPPP\x01", Hasher::Blake3); // not a witness
    /// assert_eq!(other, Err(ProofError::BadMagic { expected: "witness" }));
    /// # Ok(()) }
    /// ```
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
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, ReferenceModel};
/// let mut state = ReferenceModel::new(Hasher::Blake3);
/// state.insert([1u8; 32], b"a".to_vec());
/// let verified = state.witness(&[[1u8; 32]]).verify(Hasher::Blake3, &state.root())?;
/// assert_eq!((verified.root(), verified.keys()), (state.root(), &[[1u8; 32]][..]));
/// verified.check_value(&[1u8; 32], Some(b"a"))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct VerifiedWitness {
    keys: Vec<KeyPath>,
    proof: VerifiedMultiProof,
}

impl VerifiedWitness {
    /// The pre-state root.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let verified = state.witness(&[[1u8; 32]]).verify(Hasher::Blake3, &state.root())?;
    /// assert_eq!(verified.root(), state.root()); // the pre-state root
    /// # Ok(()) }
    /// ```
    pub fn root(&self) -> Node {
        self.proof.root()
    }

    /// The keys the witness vouches for.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let state = ReferenceModel::new(Hasher::Blake3);
    /// let witness = state.witness(&[[2u8; 32], [1u8; 32], [2u8; 32]]);
    /// let verified = witness.verify(Hasher::Blake3, &state.root())?;
    /// assert_eq!(verified.keys(), [[1u8; 32], [2u8; 32]]);
    /// # Ok(()) }
    /// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, Lookup, ProofError, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let verified = state.witness(&[[2u8; 32]]).verify(Hasher::Blake3, &state.root())?;
    /// assert_eq!(verified.lookup(&[2u8; 32])?, Lookup::Absent);
    /// let unlisted = verified.lookup(&[1u8; 32]); // a key the block did not declare
    /// assert_eq!(unlisted, Err(ProofError::NotCovered { key: [1u8; 32] }));
    /// # Ok(()) }
    /// ```
    pub fn lookup(&self, key: &KeyPath) -> Result<Lookup, ProofError> {
        self.require_listed(key)?;
        self.proof.lookup(key)
    }

    /// Check that `value` (or its absence) is the pre-state of a listed key.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ProofError, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let verified = state.witness(&[[1u8; 32]]).verify(Hasher::Blake3, &state.root())?;
    /// verified.check_value(&[1u8; 32], Some(b"a"))?; // the value that came with the block
    /// let lie = verified.check_value(&[1u8; 32], Some(b"b"));
    /// assert_eq!(lie, Err(ProofError::ValueMismatch { key: [1u8; 32] }));
    /// # Ok(()) }
    /// ```
    pub fn check_value(&self, key: &KeyPath, value: Option<&[u8]>) -> Result<(), ProofError> {
        if self.lookup(key)?.matches(self.proof.hasher(), value) {
            Ok(())
        } else {
            Err(ProofError::ValueMismatch { key: *key })
        }
    }

    /// The post-state root after a block's `changes` (new value hash, or `None` to delete).
    /// Every changed key must be listed in the witness.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ProofError, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let verified = state.witness(&[[1u8; 32]]).verify(h, &state.root())?;
    /// assert_eq!(verified.apply(&[([1u8; 32], None)])?, sprig_core::TERMINATOR); // all deleted
    /// let undeclared = verified.apply(&[([2u8; 32], None)]);
    /// assert_eq!(undeclared, Err(ProofError::NotCovered { key: [2u8; 32] }));
    /// # Ok(()) }
    /// ```
    pub fn apply(&self, changes: &[(KeyPath, Option<ValueHash>)]) -> Result<Node, ProofError> {
        for (key, _) in changes {
            self.require_listed(key)?;
        }
        self.proof.apply(changes)
    }
}

/// The block check of a stateless client: verify `witness` against `old_root` and return the
/// root after `changes`.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{proof::verify_block, Hasher, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([1u8; 32], b"a".to_vec());
/// let (old_root, witness) = (state.root(), state.witness(&[[1u8; 32]]));
/// let changes = [([1u8; 32], Some(h.hash_value(b"b")))];
/// state.insert([1u8; 32], b"b".to_vec());
/// assert_eq!(verify_block(h, &old_root, &witness, &changes)?, state.root());
/// # Ok(()) }
/// ```
pub fn verify_block(
    hasher: Hasher,
    old_root: &Node,
    witness: &Witness,
    changes: &[(KeyPath, Option<ValueHash>)],
) -> Result<Node, ProofError> {
    witness.verify(hasher, old_root)?.apply(changes)
}
