//! The reference model: a plain ordered map from key path to value that recomputes the root and
//! every proof from scratch. It is slow on purpose and obviously correct; every test of the
//! engine compares against it.

use crate::hasher::Hasher;
use crate::proof::{path_proof_from_entries, MultiProof, PathProof, Witness};
use crate::trie::{root_of, KeyPath, Node, ValueHash};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// An in-memory key-value state with a Merkle root computed from scratch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReferenceModel {
    hasher: Hasher,
    entries: BTreeMap<KeyPath, Vec<u8>>,
}

impl ReferenceModel {
    /// An empty state committed with `hasher`.
    pub fn new(hasher: Hasher) -> Self {
        ReferenceModel {
            hasher,
            entries: BTreeMap::new(),
        }
    }

    /// The hasher of this state.
    pub fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the state holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &KeyPath) -> Option<&[u8]> {
        self.entries.get(key).map(Vec::as_slice)
    }

    /// Set `key` to `value`; returns the previous value.
    pub fn insert(&mut self, key: KeyPath, value: Vec<u8>) -> Option<Vec<u8>> {
        self.entries.insert(key, value)
    }

    /// Remove `key`; returns the previous value.
    pub fn remove(&mut self, key: &KeyPath) -> Option<Vec<u8>> {
        self.entries.remove(key)
    }

    /// Apply a batch of changes in order: `Some(value)` sets, `None` deletes.
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
    pub fn iter(&self) -> impl Iterator<Item = (&KeyPath, &[u8])> {
        self.entries.iter().map(|(k, v)| (k, v.as_slice()))
    }

    /// Every entry as (key path, value hash), in key-path order.
    pub fn leaves(&self) -> Vec<(KeyPath, ValueHash)> {
        self.entries
            .iter()
            .map(|(k, v)| (*k, self.hasher.hash_value(v)))
            .collect()
    }

    /// The state root, recomputed from every entry.
    pub fn root(&self) -> Node {
        root_of(self.hasher, &self.leaves())
    }

    /// A proof of inclusion or exclusion of `key`.
    pub fn path_proof(&self, key: &KeyPath) -> PathProof {
        path_proof_from_entries(self.hasher, &self.leaves(), key)
    }

    /// A multi-proof of `keys` (any order; repeats allowed).
    pub fn multi_proof(&self, keys: &[KeyPath]) -> MultiProof {
        MultiProof::from_entries(self.hasher, &self.leaves(), &sorted_distinct(keys))
    }

    /// A witness of the current state for a block that reads or writes `keys`.
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
