//! The reference model: a plain ordered map from key path to value that recomputes the root and
//! every proof from scratch. It is slow on purpose and obviously correct; every test of the
//! engine compares against it.

use crate::hasher::Hasher;
use crate::proof::{path_proof_from_entries, MultiProof, PathProof, Witness};
use crate::trie::{root_of, KeyPath, Node, ValueHash};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// An in-memory key-value state with a Merkle root computed from scratch.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, ReferenceModel};
/// let mut state = ReferenceModel::new(Hasher::Blake3);
/// state.insert([1u8; 32], b"a".to_vec());
/// state.insert([2u8; 32], b"b".to_vec());
/// let (root, proof) = (state.root(), state.path_proof(&[2u8; 32])); // from scratch, every time
/// proof.verify_value(Hasher::Blake3, &root, &[2u8; 32], Some(b"b"))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReferenceModel {
    hasher: Hasher,
    entries: BTreeMap<KeyPath, Vec<u8>>,
}

impl ReferenceModel {
    /// An empty state committed with `hasher`.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel, TERMINATOR};
    /// let state = ReferenceModel::new(Hasher::Keccak256);
    /// assert!(state.is_empty());
    /// assert_eq!(state.root(), TERMINATOR);
    /// ```
    pub fn new(hasher: Hasher) -> Self {
        ReferenceModel {
            hasher,
            entries: BTreeMap::new(),
        }
    }

    /// The hasher of this state.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// assert_eq!(ReferenceModel::new(Hasher::Sha256).hasher(), Hasher::Sha256);
    /// ```
    pub fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// The number of entries.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// state.insert([1u8; 32], b"b".to_vec()); // the same key
    /// assert_eq!(state.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the state holds no entry.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// assert!(state.is_empty());
    /// state.insert([1u8; 32], b"a".to_vec());
    /// assert!(!state.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `key`, if present.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// assert_eq!(state.get(&[1u8; 32]), Some(&b"a"[..]));
    /// assert_eq!(state.get(&[2u8; 32]), None);
    /// ```
    pub fn get(&self, key: &KeyPath) -> Option<&[u8]> {
        self.entries.get(key).map(Vec::as_slice)
    }

    /// Set `key` to `value`; returns the previous value.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// assert_eq!(state.insert([1u8; 32], b"a".to_vec()), None);
    /// assert_eq!(state.insert([1u8; 32], b"b".to_vec()), Some(b"a".to_vec())); // the old value
    /// ```
    pub fn insert(&mut self, key: KeyPath, value: Vec<u8>) -> Option<Vec<u8>> {
        self.entries.insert(key, value)
    }

    /// Remove `key`; returns the previous value.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// assert_eq!(state.remove(&[1u8; 32]), Some(b"a".to_vec()));
    /// assert_eq!(state.remove(&[1u8; 32]), None);
    /// ```
    pub fn remove(&mut self, key: &KeyPath) -> Option<Vec<u8>> {
        self.entries.remove(key)
    }

    /// Apply a batch of changes in order: `Some(value)` sets, `None` deletes.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// state.apply([([1u8; 32], None), ([2u8; 32], Some(b"b".to_vec()))]); // a block's changes
    /// assert_eq!(state.iter().collect::<Vec<_>>(), [(&[2u8; 32], &b"b"[..])]);
    /// ```
    pub fn apply<I>(&mut self, changes: I)
    where
        I: IntoIterator<Item = (KeyPath, Option<Vec<u8>>)>,
    {
        for (key, value) in changes {
            match value {
                Some(v) => {
                    self.entries.insert(key, v);
                }
                None => {
                    self.entries.remove(&key);
                }
            }
        }
    }

    /// The entries in key-path order.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([2u8; 32], b"b".to_vec());
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let keys: Vec<u8> = state.iter().map(|(key, _)| key[0]).collect();
    /// assert_eq!(keys, [1, 2]); // in key-path order
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&KeyPath, &[u8])> {
        self.entries.iter().map(|(k, v)| (k, v.as_slice()))
    }

    /// Every entry as (key path, value hash), in key-path order.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// assert_eq!(state.leaves(), [([1u8; 32], Hasher::Blake3.hash_value(b"a"))]);
    /// ```
    pub fn leaves(&self) -> Vec<(KeyPath, ValueHash)> {
        self.entries
            .iter()
            .map(|(k, v)| (*k, self.hasher.hash_value(v)))
            .collect()
    }

    /// The state root, recomputed from every entry.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let root = state.root();
    /// state.insert([1u8; 32], b"b".to_vec());
    /// assert_ne!(state.root(), root); // every value is committed to
    /// ```
    pub fn root(&self) -> Node {
        root_of(self.hasher, &self.leaves())
    }

    /// A proof of inclusion or exclusion of `key`.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let absent = state.path_proof(&[2u8; 32]); // a proof of exclusion
    /// absent.verify_value(Hasher::Blake3, &state.root(), &[2u8; 32], None)?;
    /// # Ok(()) }
    /// ```
    pub fn path_proof(&self, key: &KeyPath) -> PathProof {
        path_proof_from_entries(self.hasher, &self.leaves(), key)
    }

    /// A multi-proof of `keys` (any order; repeats allowed).
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, Lookup, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let proof = state.multi_proof(&[[2u8; 32], [1u8; 32]]); // any order
    /// let verified = proof.verify(Hasher::Blake3, &state.root())?;
    /// assert_eq!(verified.lookup(&[2u8; 32])?, Lookup::Absent);
    /// # Ok(()) }
    /// ```
    pub fn multi_proof(&self, keys: &[KeyPath]) -> MultiProof {
        MultiProof::from_entries(self.hasher, &self.leaves(), &sorted_distinct(keys))
    }

    /// A witness of the current state for a block that reads or writes `keys`.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let witness = state.witness(&[[1u8; 32], [2u8; 32]]); // what a block reads or writes
    /// assert_eq!(witness.keys, [[1u8; 32], [2u8; 32]]);
    /// witness.verify(Hasher::Blake3, &state.root())?.check_value(&[1u8; 32], Some(b"a"))?;
    /// # Ok(()) }
    /// ```
    pub fn witness(&self, keys: &[KeyPath]) -> Witness {
        let keys = sorted_distinct(keys);
        Witness {
            proof: MultiProof::from_entries(self.hasher, &self.leaves(), &keys),
            keys,
        }
    }
}

fn sorted_distinct(keys: &[KeyPath]) -> Vec<KeyPath> {
    let mut keys = keys.to_vec();
    keys.sort_unstable();
    keys.dedup();
    keys
}
