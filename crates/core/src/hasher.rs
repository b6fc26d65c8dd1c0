//! The node hashers: how values, leaves and internal nodes become 32-byte hashes.
//!
//! A database picks one hasher when it is created and records its [`Hasher::id`]; every root,
//! proof and witness is only meaningful together with it. Leaf and internal hashes are
//! domain-separated by the most significant bit of the first byte (1 for leaves, 0 for internal
//! nodes), exactly as NOMT does, so that the kind of a node can be read off its hash.

use crate::trie::{KeyPath, Node, NodeKind, ValueHash, TERMINATOR};
use sha2::Digest as _;

/// The hash function behind a trie. Chosen per database, recorded in it, and carried in every
/// encoded proof so that a mismatch is an error instead of a silent failure.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, PathProof, ProofError, ReferenceModel};
/// let state = ReferenceModel::new(Hasher::Sha256);
/// let bytes = state.path_proof(&[1u8; 32]).encode(Hasher::Sha256); // carries the hasher's id
/// PathProof::decode(&bytes, Hasher::Sha256)?;
/// let mismatch = PathProof::decode(&bytes, Hasher::Blake3);
/// assert_eq!(mismatch, Err(ProofError::HasherMismatch { expected: 1, found: 2 }));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Hasher {
    /// BLAKE3 (the default): fast on every CPU, with SIMD.
    #[default]
    Blake3,
    /// SHA-256 (FIPS 180-4); uses the CPU's SHA extensions where present.
    Sha256,
    /// Keccak-256 as used by Ethereum (the original Keccak padding, not SHA3-256).
    Keccak256,
}

impl Hasher {
    /// Every hasher Sprig knows, in id order.
    ///
    /// ```
    /// use sprig_core::Hasher;
    /// assert_eq!(Hasher::ALL.map(Hasher::name), ["blake3", "sha256", "keccak256"]);
    /// assert!(Hasher::ALL.iter().all(|h| Hasher::from_id(h.id()) == Some(*h)));
    /// ```
    pub const ALL: [Hasher; 3] = [Hasher::Blake3, Hasher::Sha256, Hasher::Keccak256];

    /// The one-byte identifier stored in databases and encoded proofs.
    ///
    /// ```
    /// use sprig_core::Hasher;
    /// assert_eq!((Hasher::Blake3.id(), Hasher::Sha256.id(), Hasher::Keccak256.id()), (1, 2, 3));
    /// assert_eq!(Hasher::from_id(Hasher::Sha256.id()), Some(Hasher::Sha256));
    /// ```
    pub const fn id(self) -> u8 {
        match self {
            Hasher::Blake3 => 1,
            Hasher::Sha256 => 2,
            Hasher::Keccak256 => 3,
        }
    }

    /// The hasher with the given identifier, if there is one.
    ///
    /// ```
    /// use sprig_core::Hasher;
    /// assert_eq!(Hasher::from_id(3), Some(Hasher::Keccak256));
    /// assert_eq!(Hasher::from_id(0), None);
    /// ```
    pub const fn from_id(id: u8) -> Option<Hasher> {
        match id {
            1 => Some(Hasher::Blake3),
            2 => Some(Hasher::Sha256),
            3 => Some(Hasher::Keccak256),
            _ => None,
        }
    }

    /// The lowercase name used in options, files and command lines.
    ///
    /// ```
    /// use sprig_core::Hasher;
    /// assert_eq!(Hasher::Keccak256.name(), "keccak256");
    /// assert_eq!(Hasher::Blake3.to_string(), Hasher::Blake3.name()); // Display prints the name
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Hasher::Blake3 => "blake3",
            Hasher::Sha256 => "sha256",
            Hasher::Keccak256 => "keccak256",
        }
    }

    /// The hasher with the given name (case-insensitive), if there is one.
    ///
    /// ```
    /// use sprig_core::Hasher;
    /// assert_eq!(Hasher::from_name("SHA256"), Some(Hasher::Sha256)); // case-insensitive
    /// assert_eq!(Hasher::from_name("md5"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Hasher> {
        Hasher::ALL
            .into_iter()
            .find(|h| h.name().eq_ignore_ascii_case(name))
    }

    /// Hash an arbitrary byte string: `H(bytes)`.
    ///
    /// ```
    /// use sprig_core::Hasher;
    /// assert_eq!(Hasher::Sha256.hash_value(b"")[..4], [0xe3, 0xb0, 0xc4, 0x42]); // SHA-256("")
    /// assert_eq!(Hasher::Blake3.hash_value(b"")[..4], [0xaf, 0x13, 0x49, 0xb9]); // BLAKE3("")
    /// ```
    pub fn hash_value(self, bytes: &[u8]) -> ValueHash {
        match self {
            Hasher::Blake3 => match blake3_block(bytes) {
                Some(hash) => hash,
                None => *blake3::hash(bytes).as_bytes(),
            },
            Hasher::Sha256 => sha2::Sha256::digest(bytes).into(),
            Hasher::Keccak256 => sha3::Keccak256::digest(bytes).into(),
        }
    }

    /// `H(block)` of each 64-byte block into `out` (as many as both hold), unlabelled: the
    /// hashes of [`crate::jobs::HashJobs`]. BLAKE3 runs them through its multi-lane kernel,
    /// up to 16 at once, each as [`Hasher::hash_block`] computes it.
    pub(crate) fn hash_blocks(self, blocks: &[[u8; 64]], out: &mut [[u8; 32]]) {
        match self {
            Hasher::Blake3 => blake3_blocks(blocks, out),
            _ => {
                for (block, o) in blocks.iter().zip(out.iter_mut()) {
                    *o = self.hash_block(block);
                }
            }
        }
    }

    /// `H(left ‖ right)` with no labelling.
    fn hash_pair(self, left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
        let mut block = [0u8; 64];
        let (l, r) = block.split_at_mut(32);
        l.copy_from_slice(left);
        r.copy_from_slice(right);
        self.hash_block(&block)
    }

    /// `H(block)` of one 64-byte block (a pair's two halves), with no labelling.
    fn hash_block(self, block: &[u8; 64]) -> [u8; 32] {
        match self {
            Hasher::Blake3 => compress_one_block(block, blake3::BLOCK_LEN as u8),
            Hasher::Sha256 => sha2::Sha256::digest(block).into(),
            Hasher::Keccak256 => sha3::Keccak256::digest(block).into(),
        }
    }

    /// The hash of a leaf: `H(key_path ‖ value_hash)` with the most significant bit set.
    ///
    /// ```
    /// use sprig_core::{Hasher, NodeKind, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"v".to_vec());
    /// let leaf = h.hash_leaf(&[1u8; 32], &h.hash_value(b"v"));
    /// assert_eq!(state.root(), leaf); // one entry: the root is its leaf
    /// assert_eq!(Hasher::node_kind(&leaf), NodeKind::Leaf); // the top bit is set
    /// ```
    pub fn hash_leaf(self, key_path: &KeyPath, value_hash: &ValueHash) -> Node {
        labelled(self.hash_pair(key_path, value_hash), true)
    }

    /// The hash of an internal node: `H(left ‖ right)` with the most significant bit cleared.
    ///
    /// This is the raw rule; [`crate::trie::parent`] applies the compaction that decides whether
    /// an internal node exists at all.
    ///
    /// ```
    /// use sprig_core::{Hasher, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let (a, b) = ([0x00u8; 32], [0x80u8; 32]); // they differ in the first bit
    /// let mut state = ReferenceModel::new(h);
    /// state.insert(a, b"a".to_vec());
    /// state.insert(b, b"b".to_vec());
    /// let leaf = |key, value: &[u8]| h.hash_leaf(key, &h.hash_value(value));
    /// assert_eq!(state.root(), h.hash_internal(&leaf(&a, b"a"), &leaf(&b, b"b")));
    /// ```
    pub fn hash_internal(self, left: &Node, right: &Node) -> Node {
        labelled(self.hash_pair(left, right), false)
    }

    /// The kind of node a hash denotes: the terminator is all zeros, leaves have the most
    /// significant bit set, internal nodes have it cleared.
    ///
    /// ```
    /// use sprig_core::{Hasher, NodeKind, TERMINATOR};
    /// let h = Hasher::Blake3;
    /// let leaf = h.hash_leaf(&[1u8; 32], &[2u8; 32]);
    /// assert_eq!(Hasher::node_kind(&TERMINATOR), NodeKind::Terminator);
    /// assert_eq!(Hasher::node_kind(&leaf), NodeKind::Leaf);
    /// assert_eq!(Hasher::node_kind(&h.hash_internal(&leaf, &leaf)), NodeKind::Internal);
    /// ```
    pub fn node_kind(node: &Node) -> NodeKind {
        if node[0] & 0x80 != 0 {
            NodeKind::Leaf
        } else if *node == TERMINATOR {
            NodeKind::Terminator
        } else {
            NodeKind::Internal
        }
    }
}

/// `hash` (of a pair) labelled as a leaf (most significant bit set) or an internal node
/// (cleared): the one labelling rule of [`Hasher::hash_leaf`], [`Hasher::hash_internal`] and
/// the jobs of [`crate::jobs::HashJobs`].
pub(crate) fn labelled(mut hash: [u8; 32], leaf: bool) -> Node {
    if leaf {
        hash[0] |= 0x80;
    } else {
        hash[0] &= 0x7f;
    }
    hash
}

impl core::fmt::Display for Hasher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// BLAKE3's initial vector (its key words in the unkeyed mode).
const IV: [u32; 8] = [
    0x6A09_E667,
    0xBB67_AE85,
    0x3C6E_F372,
    0xA54F_F53A,
    0x510E_527F,
    0x9B05_688C,
    0x1F83_D9AB,
    0x5BE0_CD19,
];
/// BLAKE3's block flags of a one-block input: the first and last block of its only chunk,
/// which is the root.
const CHUNK_START: u8 = 1;
const CHUNK_END: u8 = 1 << 1;
const ROOT: u8 = 1 << 3;

/// BLAKE3 of `bytes` if they fit in one block (at most 64 bytes: the short values, such as a
/// balance or a byte key, whose hashes a commit recomputes for every entry of a bucket it
/// touches), else `None`. Such an input is one block of one chunk, so its hash is one
/// compression of that block, zero-padded, with its length (counter 0, flags chunk start,
/// chunk end and root) from the initial vector, whose chaining value is the 32-byte hash.
/// Compressed directly through the crate's platform dispatch (the SIMD kernel it detects),
/// this skips the one-shot path's chunk state and its buffer copy: about 60 ns instead of
/// 100 on the benchmark machine. The `blake3` version is pinned exactly because `platform` is
/// outside the crate's documented API; the tests compare this with `blake3::hash` at every
/// length up to a block and on random pairs.
fn blake3_block(bytes: &[u8]) -> Option<[u8; 32]> {
    let len = u8::try_from(bytes.len())
        .ok()
        .filter(|l| usize::from(*l) <= blake3::BLOCK_LEN)?;
    let mut block = [0u8; blake3::BLOCK_LEN];
    block.get_mut(..bytes.len())?.copy_from_slice(bytes);
    Some(compress_one_block(&block, len))
}

/// BLAKE3 of each 64-byte block (as [`Hasher::hash_block`] computes it), through the crate's
/// multi-lane kernel, 16 at a time on AVX-512 (fewer lanes on other CPUs; one at a time where
/// it has none).
fn blake3_blocks(blocks: &[[u8; 64]], out: &mut [[u8; 32]]) {
    const LANES: usize = 16;
    let platform = blake3::platform::Platform::detect();
    for (blocks, out) in blocks.chunks(LANES).zip(out.chunks_mut(LANES)) {
        const NONE: [u8; 64] = [0; 64];
        let mut inputs: [&[u8; 64]; LANES] = [&NONE; LANES];
        for (input, block) in inputs.iter_mut().zip(blocks) {
            *input = block;
        }
        let n = blocks.len().min(out.len());
        platform.hash_many(
            inputs.get(..n).unwrap_or_default(),
            &IV,
            0,
            blake3::IncrementCounter::No,
            ROOT,
            CHUNK_START,
            CHUNK_END,
            out.get_mut(..n).unwrap_or_default().as_flattened_mut(),
        );
    }
}

/// The BLAKE3 hash of an input that is this one block, the first `len` bytes of `block` (the
/// rest zero).
fn compress_one_block(block: &[u8; blake3::BLOCK_LEN], len: u8) -> [u8; 32] {
    let mut cv = IV;
    blake3::platform::Platform::detect().compress_in_place(
        &mut cv,
        block,
        len,
        0,
        CHUNK_START | CHUNK_END | ROOT,
    );
    let mut out = [0u8; 32];
    for (bytes, word) in out.chunks_exact_mut(4).zip(cv) {
        bytes.copy_from_slice(&word.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for h in Hasher::ALL {
            assert_eq!(Hasher::from_id(h.id()), Some(h));
            assert_eq!(Hasher::from_name(h.name()), Some(h));
            assert_eq!(Hasher::from_name(&h.name().to_uppercase()), Some(h));
        }
        assert_eq!(Hasher::from_id(0), None);
        assert_eq!(Hasher::from_id(4), None);
        assert_eq!(Hasher::from_name("md5"), None);
    }

    #[test]
    fn known_answers() {
        // Published test vectors for the empty string.
        assert_eq!(
            Hasher::Blake3.hash_value(b"")[..4],
            [0xaf, 0x13, 0x49, 0xb9]
        );
        assert_eq!(
            Hasher::Sha256.hash_value(b"")[..4],
            [0xe3, 0xb0, 0xc4, 0x42]
        );
        assert_eq!(
            Hasher::Keccak256.hash_value(b"")[..4],
            [0xc5, 0xd2, 0x46, 0x01]
        );
    }

    #[test]
    fn labels_separate_leaves_from_internal_nodes() {
        for h in Hasher::ALL {
            let a = [7u8; 32];
            let b = [9u8; 32];
            let leaf = h.hash_leaf(&a, &b);
            let internal = h.hash_internal(&a, &b);
            assert_eq!(Hasher::node_kind(&leaf), NodeKind::Leaf);
            assert_eq!(Hasher::node_kind(&internal), NodeKind::Internal);
            assert_eq!(leaf[1..], internal[1..]);
            assert_eq!(Hasher::node_kind(&TERMINATOR), NodeKind::Terminator);
        }
    }

    /// A value of one block or less, hashed by one direct compression, is its BLAKE3 hash at
    /// every length from empty to a full block (and longer values take the one-shot path).
    #[test]
    fn a_short_value_compressed_directly_is_its_blake3_hash() {
        let bytes: alloc::vec::Vec<u8> = (0..=200u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for len in 0..=bytes.len() {
            let value = bytes.get(..len).unwrap_or_default();
            let expected = blake3::hash(value);
            assert_eq!(
                &Hasher::Blake3.hash_value(value),
                expected.as_bytes(),
                "{len} bytes"
            );
            assert_eq!(blake3_block(value).is_some(), len <= 64, "{len} bytes");
        }
    }

    proptest::proptest! {
        /// A short value compressed directly is its BLAKE3 hash, whatever its bytes.
        #[test]
        fn any_short_value_compressed_directly_is_its_blake3_hash(
            value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..=64),
        ) {
            let expected = blake3::hash(&value);
            proptest::prop_assert_eq!(blake3_block(&value), Some(*expected.as_bytes()));
        }

        /// The direct compression of a pair is BLAKE3 of its 64 bytes, as the one-shot hash
        /// computes it.
        #[test]
        fn a_pair_compressed_directly_is_its_blake3_hash(
            left in proptest::prelude::any::<[u8; 32]>(),
            right in proptest::prelude::any::<[u8; 32]>(),
        ) {
            let mut bytes = [0u8; 64];
            bytes[..32].copy_from_slice(&left);
            bytes[32..].copy_from_slice(&right);
            let expected = blake3::hash(&bytes);
            proptest::prop_assert_eq!(&Hasher::Blake3.hash_pair(&left, &right), expected.as_bytes());
        }
    }
}
