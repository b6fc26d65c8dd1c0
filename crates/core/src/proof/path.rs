//! Path proofs: the siblings along one key's path, from the root down to where the path ends.

use super::{claimed_internal, read_hasher, Lookup, Terminal, FORMAT_VERSION};
use crate::codec::{write_header, Reader};
use crate::error::ProofError;
use crate::hasher::Hasher;
use crate::trie::{bit_at, same_prefix, KeyPath, LeafData, Node, KEY_BITS};
use alloc::vec::Vec;

const MAGIC: &[u8; 4] = b"SPPP";
const TERMINAL_EMPTY: u8 = 0;
const TERMINAL_LEAF: u8 = 1;

/// A proof of inclusion or exclusion of one key.
///
/// `siblings[i]` is the sibling at depth `i + 1` of the key's path (the child of the depth-`i`
/// node that the path does not take); the terminal sits at depth `siblings.len()`.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, ReferenceModel};
/// let h = Hasher::Blake3;
/// let mut state = ReferenceModel::new(h);
/// state.insert([0x00u8; 32], b"a".to_vec());
/// state.insert([0x80u8; 32], b"b".to_vec());
/// let proof = state.path_proof(&[0x00u8; 32]);
/// assert_eq!(proof.siblings, [h.hash_leaf(&[0x80u8; 32], &h.hash_value(b"b"))]); // depth 1
/// proof.verify_value(h, &state.root(), &[0x00u8; 32], Some(b"a"))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathProof {
    /// Where the key's path ends.
    pub terminal: Terminal,
    /// The siblings from the root down.
    pub siblings: Vec<Node>,
}

impl PathProof {
    /// Check the proof against `root` for `key` and say what it shows.
    ///
    /// Fails if the proof does not hash to `root`, if it is deeper than 256 levels, if its
    /// terminal leaf is not on `key`'s path, or if it contains a non-canonical node.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, Lookup, ProofError, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let proof = state.path_proof(&[1u8; 32]);
    /// let lookup = proof.verify(h, &state.root(), &[1u8; 32])?;
    /// assert_eq!(lookup, Lookup::Present(h.hash_value(b"a")));
    /// assert_eq!(proof.verify(h, &[9u8; 32], &[1u8; 32]), Err(ProofError::RootMismatch));
    /// # Ok(()) }
    /// ```
    pub fn verify(&self, hasher: Hasher, root: &Node, key: &KeyPath) -> Result<Lookup, ProofError> {
        let depth = self.siblings.len();
        if depth > KEY_BITS {
            return Err(ProofError::TooDeep);
        }
        let lookup = match &self.terminal {
            Terminal::Empty => Lookup::Absent,
            Terminal::Leaf(leaf) => {
                if !same_prefix(&leaf.key_path, key, depth) {
                    return Err(ProofError::NotCovered { key: *key });
                }
                if leaf.key_path == *key {
                    Lookup::Present(leaf.value_hash)
                } else {
                    Lookup::Absent
                }
            }
        };
        let mut node = self.terminal.node(hasher);
        for (d, sibling) in self.siblings.iter().enumerate().rev() {
            node = if bit_at(key, d) {
                claimed_internal(hasher, sibling, &node)?
            } else {
                claimed_internal(hasher, &node, sibling)?
            };
        }
        if node != *root {
            return Err(ProofError::RootMismatch);
        }
        Ok(lookup)
    }

    /// Check that the proof shows `key` with exactly `value` (or absent, for `None`).
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ProofError, ReferenceModel};
    /// let h = Hasher::Blake3;
    /// let mut state = ReferenceModel::new(h);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let (root, proof) = (state.root(), state.path_proof(&[1u8; 32]));
    /// proof.verify_value(h, &root, &[1u8; 32], Some(b"a"))?;
    /// let wrong = proof.verify_value(h, &root, &[1u8; 32], None); // it is present
    /// assert_eq!(wrong, Err(ProofError::ValueMismatch { key: [1u8; 32] }));
    /// # Ok(()) }
    /// ```
    pub fn verify_value(
        &self,
        hasher: Hasher,
        root: &Node,
        key: &KeyPath,
        value: Option<&[u8]>,
    ) -> Result<(), ProofError> {
        if self.verify(hasher, root, key)?.matches(hasher, value) {
            Ok(())
        } else {
            Err(ProofError::ValueMismatch { key: *key })
        }
    }

    /// The versioned binary encoding (see `docs/PROOF_FORMAT.md`).
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, PathProof, ReferenceModel};
    /// let mut state = ReferenceModel::new(Hasher::Blake3);
    /// state.insert([1u8; 32], b"a".to_vec());
    /// let proof = state.path_proof(&[1u8; 32]);
    /// let bytes = proof.encode(Hasher::Blake3);
    /// assert_eq!(&bytes[..4], b"SPPP"); // see docs/PROOF_FORMAT.md
    /// assert_eq!(PathProof::decode(&bytes, Hasher::Blake3)?, proof);
    /// # Ok(()) }
    /// ```
    pub fn encode(&self, hasher: Hasher) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 65 + 32 * self.siblings.len());
        write_header(&mut out, MAGIC, FORMAT_VERSION);
        out.push(hasher.id());
        match &self.terminal {
            Terminal::Empty => out.push(TERMINAL_EMPTY),
            Terminal::Leaf(leaf) => {
                out.push(TERMINAL_LEAF);
                out.extend_from_slice(&leaf.key_path);
                out.extend_from_slice(&leaf.value_hash);
            }
        }
        // At most 256 siblings; the decoder rejects anything larger.
        let depth = u16::try_from(self.siblings.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&depth.to_le_bytes());
        for s in &self.siblings {
            out.extend_from_slice(s);
        }
        out
    }

    /// Decode a path proof made with `hasher`.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, PathProof, ProofError, ReferenceModel};
    /// let state = ReferenceModel::new(Hasher::Blake3);
    /// let mut bytes = state.path_proof(&[1u8; 32]).encode(Hasher::Blake3);
    /// assert_eq!(PathProof::decode(&bytes, Hasher::Blake3)?, state.path_proof(&[1u8; 32]));
    /// bytes.push(0);
    /// let long = PathProof::decode(&bytes, Hasher::Blake3);
    /// assert_eq!(long, Err(ProofError::TrailingBytes { count: 1 }));
    /// # Ok(()) }
    /// ```
    pub fn decode(bytes: &[u8], hasher: Hasher) -> Result<PathProof, ProofError> {
        let mut r = Reader::new(bytes);
        r.header(MAGIC, "path proof", FORMAT_VERSION)?;
        read_hasher(&mut r, hasher)?;
        let terminal = match r.u8("terminal tag")? {
            TERMINAL_EMPTY => Terminal::Empty,
            TERMINAL_LEAF => Terminal::Leaf(LeafData {
                key_path: r.array("leaf key path")?,
                value_hash: r.array("leaf value hash")?,
            }),
            tag => return Err(ProofError::BadTag { tag }),
        };
        let depth = usize::from(r.u16("depth")?);
        if depth > KEY_BITS {
            return Err(ProofError::TooDeep);
        }
        let mut siblings = Vec::with_capacity(depth.min(r.remaining() / 32));
        for _ in 0..depth {
            siblings.push(r.array("sibling")?);
        }
        r.finish()?;
        Ok(PathProof { terminal, siblings })
    }
}
