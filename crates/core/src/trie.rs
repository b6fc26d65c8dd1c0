//! The binary Merkle trie over 256-bit key paths: its types and the rules that give every
//! position its node.
//!
//! A key path is read as 256 bits, most significant bit first. The node at a position (a bit
//! prefix) commits to the entries whose paths start with that prefix:
//! - no entry: the [`TERMINATOR`] (32 zero bytes);
//! - exactly one entry: that entry's leaf hash (a leaf sits at the shallowest position whose
//!   subtree holds only its key, so the same leaf hash moves up until it has a sibling);
//! - two or more: an internal node over the two children.
//!
//! Everything here is a pure function of the entry set; nothing depends on history or on how
//! entries are grouped into pages.

use crate::hasher::Hasher;

/// A 32-byte key path, read as 256 bits, most significant bit first.
pub type KeyPath = [u8; 32];
/// The hash of a value: `H(value)`.
pub type ValueHash = [u8; 32];
/// A trie node: the terminator, a leaf hash or an internal hash.
pub type Node = [u8; 32];

/// The node of an empty subtree at any height.
pub const TERMINATOR: Node = [0u8; 32];

/// The number of bits in a key path, and so the greatest depth of any leaf.
pub const KEY_BITS: usize = 256;

/// What a node hash denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// An empty subtree.
    Terminator,
    /// A subtree holding exactly one entry.
    Leaf,
    /// A subtree holding two or more entries.
    Internal,
}

/// The preimage of a leaf: the entry's full key path and the hash of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeafData {
    /// The entry's key path.
    pub key_path: KeyPath,
    /// `H(value)`.
    pub value_hash: ValueHash,
}

impl LeafData {
    /// The leaf's node hash.
    pub fn hash(&self, hasher: Hasher) -> Node {
        hasher.hash_leaf(&self.key_path, &self.value_hash)
    }
}

/// Bit `depth` of a key path (0 is the most significant bit of the first byte).
///
/// `depth` must be below [`KEY_BITS`]; larger values read as 0.
pub fn bit_at(key: &KeyPath, depth: usize) -> bool {
    key.get(depth / 8)
        .is_some_and(|byte| (byte >> (7 - depth % 8)) & 1 == 1)
}

/// Set bit `depth` of a key path to `value`. Depths of [`KEY_BITS`] and above are ignored.
pub fn set_bit(key: &mut KeyPath, depth: usize, value: bool) {
    if let Some(byte) = key.get_mut(depth / 8) {
        let mask = 0x80u8 >> (depth % 8);
        if value {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// The number of leading bits two key paths share (256 when they are equal).
pub fn shared_prefix_bits(a: &KeyPath, b: &KeyPath) -> usize {
    for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
        let diff = x ^ y;
        if diff != 0 {
            return i * 8 + diff.leading_zeros() as usize;
        }
    }
    KEY_BITS
}

/// Whether the first `bits` bits of `a` and `b` agree.
pub fn same_prefix(a: &KeyPath, b: &KeyPath, bits: usize) -> bool {
    shared_prefix_bits(a, b) >= bits
}

/// The node of a position given its two children's nodes, with compaction: two empty children
/// make an empty node, and a single leaf beside an empty sibling moves up unchanged.
pub fn parent(hasher: Hasher, left: &Node, right: &Node) -> Node {
    match (Hasher::node_kind(left), Hasher::node_kind(right)) {
        (NodeKind::Terminator, NodeKind::Terminator) => TERMINATOR,
        (NodeKind::Leaf, NodeKind::Terminator) => *left,
        (NodeKind::Terminator, NodeKind::Leaf) => *right,
        _ => hasher.hash_internal(left, right),
    }
}

/// The node at depth `depth` of the subtree holding `entries`.
///
/// `entries` must be sorted by key path, have distinct keys, and all share the same first
/// `depth` bits (the position's prefix). This is the definition of the commitment, written as
/// plainly as possible; it recurses at most once per bit of depth.
pub fn subtrie_root(hasher: Hasher, depth: usize, entries: &[(KeyPath, ValueHash)]) -> Node {
    match entries {
        [] => TERMINATOR,
        [(key, value_hash)] => hasher.hash_leaf(key, value_hash),
        _ if depth >= KEY_BITS => {
            // Distinct keys always differ before the last bit; unreachable for valid input.
            TERMINATOR
        }
        _ => {
            let split = entries.partition_point(|(key, _)| !bit_at(key, depth));
            let (left, right) = entries.split_at(split);
            let l = subtrie_root(hasher, depth + 1, left);
            let r = subtrie_root(hasher, depth + 1, right);
            // With two or more entries below, no compaction applies at this position.
            hasher.hash_internal(&l, &r)
        }
    }
}

/// The root of the trie holding `entries` (sorted by key path, distinct keys).
pub fn root_of(hasher: Hasher, entries: &[(KeyPath, ValueHash)]) -> Node {
    subtrie_root(hasher, 0, entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(first: u8) -> KeyPath {
        let mut k = [0u8; 32];
        k[0] = first;
        k
    }

    #[test]
    fn bits_read_most_significant_first() {
        let k = key(0b1010_0000);
        assert!(bit_at(&k, 0));
        assert!(!bit_at(&k, 1));
        assert!(bit_at(&k, 2));
        assert!(!bit_at(&k, 255));
        assert!(!bit_at(&k, 256));
        let mut m = [0u8; 32];
        set_bit(&mut m, 255, true);
        assert_eq!(m[31], 1);
        set_bit(&mut m, 255, false);
        assert_eq!(m, [0u8; 32]);
    }

    #[test]
    fn shared_prefix_counts_equal_leading_bits() {
        assert_eq!(shared_prefix_bits(&key(0), &key(0)), 256);
        assert_eq!(shared_prefix_bits(&key(0x80), &key(0)), 0);
        assert_eq!(shared_prefix_bits(&key(1), &key(0)), 7);
        let mut a = [0u8; 32];
        a[31] = 1;
        assert_eq!(shared_prefix_bits(&a, &[0u8; 32]), 255);
    }

    #[test]
    fn empty_and_single_entry_roots() {
        let h = Hasher::Blake3;
        assert_eq!(root_of(h, &[]), TERMINATOR);
        let e = (key(3), [5u8; 32]);
        assert_eq!(root_of(h, &[e]), h.hash_leaf(&e.0, &e.1));
    }

    #[test]
    fn two_entries_split_at_their_first_difference() {
        let h = Hasher::Sha256;
        let a = (key(0b0000_0000), [1u8; 32]);
        let b = (key(0b0010_0000), [2u8; 32]);
        // They share two bits: the internal node over both sits at depth 2, with two empty
        // siblings above it.
        let la = h.hash_leaf(&a.0, &a.1);
        let lb = h.hash_leaf(&b.0, &b.1);
        let n2 = h.hash_internal(&la, &lb);
        let n1 = h.hash_internal(&n2, &TERMINATOR);
        let n0 = h.hash_internal(&n1, &TERMINATOR);
        assert_eq!(root_of(h, &[a, b]), n0);
        assert_eq!(parent(h, &n1, &TERMINATOR), n0);
        assert_eq!(parent(h, &la, &TERMINATOR), la);
        assert_eq!(parent(h, &TERMINATOR, &TERMINATOR), TERMINATOR);
    }
}
