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
use alloc::vec::Vec;

/// A 32-byte key path, read as 256 bits, most significant bit first.
///
/// ```
/// use sprig_core::{key_path_of, trie::bit_at, Hasher, KeyPath};
/// let key: KeyPath = key_path_of(Hasher::Blake3, b"alice"); // 256 bits
/// assert_eq!(bit_at(&key, 0), key[0] >= 0x80); // read most significant bit first
/// ```
pub type KeyPath = [u8; 32];
/// The hash of a value: `H(value)`.
///
/// ```
/// use sprig_core::{Hasher, LeafData, ValueHash};
/// let value_hash: ValueHash = Hasher::Blake3.hash_value(b"100 coins");
/// let leaf = LeafData { key_path: [1u8; 32], value_hash }; // what the trie commits to
/// assert_eq!(leaf.hash(Hasher::Blake3), Hasher::Blake3.hash_leaf(&[1u8; 32], &value_hash));
/// ```
pub type ValueHash = [u8; 32];
/// A trie node: the terminator, a leaf hash or an internal hash.
///
/// ```
/// use sprig_core::{Hasher, Node, NodeKind, ReferenceModel};
/// let mut state = ReferenceModel::new(Hasher::Blake3);
/// state.insert([1u8; 32], b"a".to_vec());
/// state.insert([2u8; 32], b"b".to_vec());
/// let root: Node = state.root();
/// assert_eq!(Hasher::node_kind(&root), NodeKind::Internal); // two entries below
/// ```
pub type Node = [u8; 32];

/// The node of an empty subtree at any height.
///
/// ```
/// use sprig_core::{Hasher, ReferenceModel, TERMINATOR};
/// assert_eq!(ReferenceModel::new(Hasher::Blake3).root(), TERMINATOR); // the empty trie
/// assert_eq!(TERMINATOR, [0u8; 32]);
/// ```
pub const TERMINATOR: Node = [0u8; 32];

/// The number of bits in a key path, and so the greatest depth of any leaf.
///
/// ```
/// use sprig_core::trie::{bit_at, KEY_BITS};
/// assert_eq!(KEY_BITS, 8 * 32);
/// assert!(bit_at(&[0xffu8; 32], KEY_BITS - 1));
/// assert!(!bit_at(&[0xffu8; 32], KEY_BITS)); // past the last bit: 0
/// ```
pub const KEY_BITS: usize = 256;

/// What a node hash denotes.
///
/// ```
/// use sprig_core::{Hasher, NodeKind, ReferenceModel};
/// let mut state = ReferenceModel::new(Hasher::Blake3);
/// let mut kinds = vec![Hasher::node_kind(&state.root())];
/// for i in 1u8..=2 {
///     state.insert([i; 32], vec![i]);
///     kinds.push(Hasher::node_kind(&state.root()));
/// }
/// assert_eq!(kinds, [NodeKind::Terminator, NodeKind::Leaf, NodeKind::Internal]);
/// ```
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
///
/// ```
/// use sprig_core::{Hasher, LeafData, ReferenceModel, Terminal};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([1u8; 32], b"v".to_vec());
/// let leaf = LeafData { key_path: [1u8; 32], value_hash: h.hash_value(b"v") };
/// assert_eq!(state.path_proof(&[1u8; 32]).terminal, Terminal::Leaf(leaf)); // where the path ends
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeafData {
    /// The entry's key path.
    pub key_path: KeyPath,
    /// `H(value)`.
    pub value_hash: ValueHash,
}

impl LeafData {
    /// The leaf's node hash.
    ///
    /// ```
    /// use sprig_core::{Hasher, LeafData, ReferenceModel};
    /// let h = Hasher::Sha256;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"v".to_vec());
    /// let leaf = LeafData { key_path: [1u8; 32], value_hash: h.hash_value(b"v") };
    /// assert_eq!(leaf.hash(h), state.root()); // a lone entry's leaf is the root
    /// ```
    pub fn hash(&self, hasher: Hasher) -> Node {
        hasher.hash_leaf(&self.key_path, &self.value_hash)
    }
}

/// Bit `depth` of a key path (0 is the most significant bit of the first byte).
///
/// `depth` must be below [`KEY_BITS`]; larger values read as 0.
///
/// ```
/// use sprig_core::trie::bit_at;
/// let mut key = [0u8; 32];
/// key[0] = 0b1010_0000;
/// assert_eq!([bit_at(&key, 0), bit_at(&key, 1), bit_at(&key, 2)], [true, false, true]);
/// ```
pub fn bit_at(key: &KeyPath, depth: usize) -> bool {
    key.get(depth / 8)
        .is_some_and(|byte| (byte >> (7 - depth % 8)) & 1 == 1)
}

/// Set bit `depth` of a key path to `value`. Depths of [`KEY_BITS`] and above are ignored.
///
/// ```
/// use sprig_core::trie::{bit_at, set_bit};
/// let mut key = [0u8; 32];
/// set_bit(&mut key, 255, true); // the last bit
/// assert_eq!(key[31], 1);
/// assert!(bit_at(&key, 255));
/// ```
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
///
/// ```
/// use sprig_core::trie::shared_prefix_bits;
/// let mut b = [0u8; 32];
/// b[0] = 0b0000_0001;
/// assert_eq!(shared_prefix_bits(&[0u8; 32], &b), 7); // they differ at bit 7
/// assert_eq!(shared_prefix_bits(&b, &b), 256);
/// ```
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
///
/// ```
/// use sprig_core::trie::same_prefix;
/// let (a, mut b) = ([0u8; 32], [0u8; 32]);
/// b[0] = 0b0000_0001;
/// assert!(same_prefix(&a, &b, 7));
/// assert!(!same_prefix(&a, &b, 8));
/// ```
pub fn same_prefix(a: &KeyPath, b: &KeyPath, bits: usize) -> bool {
    shared_prefix_bits(a, b) >= bits
}

/// The node of a position given its two children's nodes, with compaction: two empty children
/// make an empty node, and a single leaf beside an empty sibling moves up unchanged.
///
/// ```
/// use sprig_core::{trie::parent, Hasher, TERMINATOR};
/// let h = Hasher::Blake3;
/// let leaf = h.hash_leaf(&[1u8; 32], &[2u8; 32]);
/// assert_eq!(parent(h, &TERMINATOR, &TERMINATOR), TERMINATOR);
/// assert_eq!(parent(h, &leaf, &TERMINATOR), leaf); // a lone leaf moves up unchanged
/// assert_eq!(parent(h, &leaf, &leaf), h.hash_internal(&leaf, &leaf));
/// ```
pub fn parent(hasher: Hasher, left: &Node, right: &Node) -> Node {
    let (l, r) = (Hasher::node_kind(left), Hasher::node_kind(right));
    match parent_kind(l, r) {
        NodeKind::Terminator => TERMINATOR,
        NodeKind::Leaf if l == NodeKind::Leaf => *left,
        NodeKind::Leaf => *right,
        NodeKind::Internal => hasher.hash_internal(left, right),
    }
}

/// The kind of [`parent`]'s node, from its children's kinds alone (no hashing): empty under
/// two empty children, a leaf for a lone leaf beside an empty sibling, else internal.
///
/// ```
/// use sprig_core::{trie::parent_kind, NodeKind::*};
/// assert_eq!(parent_kind(Terminator, Terminator), Terminator);
/// assert_eq!(parent_kind(Terminator, Leaf), Leaf);
/// assert_eq!(parent_kind(Internal, Terminator), Internal);
/// assert_eq!(parent_kind(Leaf, Leaf), Internal);
/// ```
pub fn parent_kind(left: NodeKind, right: NodeKind) -> NodeKind {
    match (left, right) {
        (NodeKind::Terminator, NodeKind::Terminator) => NodeKind::Terminator,
        (NodeKind::Leaf, NodeKind::Terminator) | (NodeKind::Terminator, NodeKind::Leaf) => {
            NodeKind::Leaf
        }
        _ => NodeKind::Internal,
    }
}

/// The node at depth `depth` of the subtree holding `entries`.
///
/// `entries` must be sorted by key path, have distinct keys, and all share the same first
/// `depth` bits (the position's prefix). This is the definition of the commitment, written as
/// plainly as possible; it recurses at most once per bit of depth.
///
/// ```
/// use sprig_core::{trie::{root_of, subtrie_root}, Hasher};
/// let h = Hasher::Blake3;
/// let (a, b) = (([0x00u8; 32], [1u8; 32]), ([0x40u8; 32], [2u8; 32])); // both start with bit 0
/// let left_child = subtrie_root(h, 1, &[a, b]); // the node at position "0"
/// assert_eq!(root_of(h, &[a, b]), h.hash_internal(&left_child, &sprig_core::TERMINATOR));
/// ```
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

/// `entries` (sorted by key, each key once) with `changes` (sorted, each key once; `None`
/// removes) applied: sorted, each key once.
///
/// ```
/// use sprig_core::trie::apply_changes;
/// let entries = [([1u8; 32], [10u8; 32]), ([2u8; 32], [20u8; 32])];
/// let changes = [([1u8; 32], None), ([3u8; 32], Some([30u8; 32]))]; // delete 1, add 3
/// let after = apply_changes(&entries, &changes);
/// assert_eq!(after, [([2u8; 32], [20u8; 32]), ([3u8; 32], [30u8; 32])]);
/// ```
pub fn apply_changes(
    entries: &[(KeyPath, ValueHash)],
    changes: &[(KeyPath, Option<ValueHash>)],
) -> Vec<(KeyPath, ValueHash)> {
    let mut merged = Vec::with_capacity(entries.len() + changes.len());
    let mut old = entries.iter().peekable();
    for (key, change) in changes {
        while let Some(e) = old.next_if(|e| e.0 < *key) {
            merged.push(*e);
        }
        old.next_if(|e| e.0 == *key);
        if let Some(v) = change {
            merged.push((*key, *v));
        }
    }
    merged.extend(old.copied());
    merged
}

/// The root of the trie holding `entries` (sorted by key path, distinct keys).
///
/// ```
/// use sprig_core::{trie::root_of, Hasher, ReferenceModel};
/// let mut state = ReferenceModel::new(Hasher::Blake3);
/// state.insert([1u8; 32], b"a".to_vec());
/// state.insert([2u8; 32], b"b".to_vec());
/// assert_eq!(root_of(Hasher::Blake3, &state.leaves()), state.root());
/// ```
pub fn root_of(hasher: Hasher, entries: &[(KeyPath, ValueHash)]) -> Node {
    subtrie_root(hasher, 0, entries)
}

/// The internal nodes a change must hash at the least, below depth `depth`: those on the
/// paths of the `changed` keys in the trie holding `after` (both sorted, distinct, all sharing
/// their first `depth` bits).
///
/// An internal node exists where two or more entries share a prefix, and its hash changes
/// when an entry below it is written or deleted, so no update can do with fewer. Leaf and
/// value hashes of the written entries come on top (one each per written key). A changed key
/// that is absent from `after` was deleted: the nodes on its path that still have two entries
/// below are the ones to hash again. This is the floor a commit's hashing is compared with.
///
/// ```
/// use sprig_core::trie::internal_nodes_to_update;
/// let (a, b, c) = ([0x00u8; 32], [0x40u8; 32], [0x80u8; 32]); // a and b share their first bit
/// // Writing a rehashes the root and the node over a and b; c sits alone below the root.
/// assert_eq!(internal_nodes_to_update(0, &[a, b, c], &[a]), 2);
/// assert_eq!(internal_nodes_to_update(0, &[a, b, c], &[c]), 1);
/// assert_eq!(internal_nodes_to_update(0, &[a, b, c], &[a, b]), 2); // shared nodes count once
/// ```
pub fn internal_nodes_to_update(depth: usize, after: &[KeyPath], changed: &[KeyPath]) -> u64 {
    internal_nodes_to_update_in(depth, after.len(), |i| after.get(i), changed.iter())
}

/// [`internal_nodes_to_update`] over `len` sorted keys read through `get` (e.g. a page's
/// entries where they lie, without listing them; `None` from `len` on), for the sorted
/// `changed` keys.
pub fn internal_nodes_to_update_in<'a, 'k>(
    depth: usize,
    len: usize,
    get: impl Fn(usize) -> Option<&'a KeyPath>,
    changed: impl IntoIterator<Item = &'k KeyPath>,
) -> u64 {
    let lcp = |i: usize, j: usize| match (get(i), get(j)) {
        (Some(a), Some(b)) => Some(shared_prefix_bits(a, b)),
        _ => None,
    };
    let mut total = 0u64;
    let mut previous: Option<&KeyPath> = None;
    for key in changed {
        // The first of the sorted keys not below `key` (a bisection, as a slice's
        // `partition_point`).
        let (mut lo, mut hi) = (0usize, len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if get(mid).is_some_and(|k| k < key) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let at = lo;
        let with = |j: usize| get(j).map(|k| shared_prefix_bits(k, key));
        // The deepest position on `key`'s path with two or more entries below.
        let deepest = if get(at) == Some(key) {
            let before = at.checked_sub(1).and_then(with);
            before.max(with(at + 1))
        } else {
            let before = at.checked_sub(1).and_then(with);
            let after_ = with(at);
            let pair_before = at
                .checked_sub(2)
                .and_then(|i| lcp(i, i + 1))
                .zip(before)
                .map(|(a, b)| a.min(b));
            let pair_after = lcp(at, at + 1).zip(after_).map(|(a, b)| a.min(b));
            let straddle = before.zip(after_).map(|(a, b)| a.min(b));
            pair_before.max(pair_after).max(straddle)
        };
        let Some(deepest) = deepest.filter(|d| *d >= depth) else {
            previous = Some(key);
            continue;
        };
        let mut here = (deepest - depth + 1) as u64;
        if let Some(p) = previous {
            let shared = shared_prefix_bits(p, key).min(deepest);
            if shared >= depth {
                here -= (shared - depth + 1) as u64;
            }
        }
        total += here;
        previous = Some(key);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind `parent_kind` names is the kind of the node `parent` makes, for every pair.
    #[test]
    fn parent_kind_is_the_kind_of_the_parent() {
        let h = Hasher::Blake3;
        let leaf = h.hash_leaf(&[1u8; 32], &[2u8; 32]);
        let internal = h.hash_internal(&leaf, &leaf);
        for l in [TERMINATOR, leaf, internal] {
            for r in [TERMINATOR, leaf, internal] {
                let kinds = parent_kind(Hasher::node_kind(&l), Hasher::node_kind(&r));
                assert_eq!(kinds, Hasher::node_kind(&parent(h, &l, &r)));
            }
        }
    }

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

    /// The floor by its definition: every position on a changed key's path with two or more
    /// entries of `after` below it, collected in a set.
    fn internal_nodes_by_definition(depth: usize, after: &[KeyPath], changed: &[KeyPath]) -> u64 {
        let mut positions = std::collections::BTreeSet::new();
        for key in changed {
            for j in depth..KEY_BITS {
                let below = after.iter().filter(|k| same_prefix(k, key, j)).count();
                if below >= 2 {
                    let mut p = *key;
                    for b in j..KEY_BITS {
                        set_bit(&mut p, b, false);
                    }
                    positions.insert((j, p));
                }
            }
        }
        positions.len() as u64
    }

    proptest::proptest! {
        #[test]
        fn internal_nodes_to_update_counts_the_changed_paths(
            present in proptest::collection::btree_set(0u16..512, 0..40),
            changed in proptest::collection::btree_set(0u16..512, 0..12),
            depth in 0usize..3,
        ) {
            // Keys under a fixed 3-bit prefix, differing in the next 9 bits and then at
            // random further down so that paths get long.
            let make = |i: u16| {
                let mut k = [0u8; 32];
                let x = (0b101u32 << 29) | (u32::from(i) << 20) | (u32::from(i).wrapping_mul(2_654_435_761) >> 12);
                k[..4].copy_from_slice(&x.to_be_bytes());
                k[31] = i as u8;
                k
            };
            // Half the changed keys are written (present after), half deleted.
            let mut after: Vec<KeyPath> = present.iter().map(|&i| make(i)).collect();
            for (n, &c) in changed.iter().enumerate() {
                if n % 2 == 0 {
                    after.push(make(c));
                } else {
                    after.retain(|k| *k != make(c));
                }
            }
            after.sort_unstable();
            after.dedup();
            let changed: Vec<KeyPath> = changed.iter().map(|&i| make(i)).collect();
            proptest::prop_assert_eq!(
                internal_nodes_to_update(depth, &after, &changed),
                internal_nodes_by_definition(depth, &after, &changed)
            );
        }
    }
}
