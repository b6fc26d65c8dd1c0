//! The one error type of decoding and verification. Every way a proof, a witness or its bytes
//! can be wrong has a variant here; nothing in this crate panics on bad input.

use crate::trie::KeyPath;

/// Why a proof, witness or encoding was rejected.
///
/// ```
/// use sprig_core::{Hasher, ProofError, ReferenceModel};
/// let mut state = ReferenceModel::new(Hasher::Blake3);
/// state.insert([1u8; 32], b"v".to_vec());
/// let proof = state.path_proof(&[1u8; 32]);
/// let forged = proof.verify_value(Hasher::Blake3, &state.root(), &[1u8; 32], Some(b"w"));
/// assert_eq!(forged, Err(ProofError::ValueMismatch { key: [1u8; 32] }));
/// let stale = proof.verify(Hasher::Blake3, &[7u8; 32], &[1u8; 32]);
/// assert_eq!(stale, Err(ProofError::RootMismatch));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProofError {
    /// The input ended before the structure was complete.
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// Bytes remain after the structure ended.
    TrailingBytes {
        /// How many bytes were left over.
        count: usize,
    },
    /// The magic bytes do not name the expected structure.
    BadMagic {
        /// What was expected.
        expected: &'static str,
    },
    /// The format version is not one this verifier reads.
    UnsupportedVersion {
        /// The version found.
        found: u8,
    },
    /// The hasher byte names no known hasher.
    UnknownHasher {
        /// The byte found.
        id: u8,
    },
    /// The proof was made with another hasher than the verifier's.
    HasherMismatch {
        /// The verifier's hasher id.
        expected: u8,
        /// The proof's hasher id.
        found: u8,
    },
    /// A node tag is not one of the defined tags.
    BadTag {
        /// The tag found.
        tag: u8,
    },
    /// A count or length is above its limit or above what the remaining input can hold.
    TooLarge {
        /// What was counted.
        what: &'static str,
        /// The count found.
        found: u64,
        /// The greatest count allowed here.
        limit: u64,
    },
    /// The proof goes deeper than a 256-bit path allows.
    TooDeep,
    /// A non-canonical form: an opaque node holding the terminator, a leaf off its own path,
    /// unsorted or repeated keys, and the like.
    Malformed {
        /// What is wrong.
        reason: &'static str,
    },
    /// The proof's nodes hash to another root than the one it is checked against.
    RootMismatch,
    /// The proof does not reach far enough down the key's path to say anything about it.
    NotCovered {
        /// The key.
        key: KeyPath,
    },
    /// The proof shows another value (or none) for the key than the one claimed.
    ValueMismatch {
        /// The key.
        key: KeyPath,
    },
    /// A state-sync chunk does not start where the previous one ended.
    ChunkOutOfOrder {
        /// Where the next chunk must start.
        expected: KeyPath,
        /// Where this one starts.
        found: KeyPath,
    },
    /// A change or lookup names the same key twice.
    DuplicateKey {
        /// The key.
        key: KeyPath,
    },
}

impl core::fmt::Display for ProofError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProofError::Truncated { what } => write!(f, "input ends inside {what}"),
            ProofError::TrailingBytes { count } => {
                write!(f, "{count} unexpected bytes after the end of the structure")
            }
            ProofError::BadMagic { expected } => write!(f, "not a {expected} (bad magic bytes)"),
            ProofError::UnsupportedVersion { found } => {
                write!(
                    f,
                    "format version {found} is not supported by this verifier"
                )
            }
            ProofError::UnknownHasher { id } => write!(f, "unknown hasher id {id}"),
            ProofError::HasherMismatch { expected, found } => write!(
                f,
                "proof made with hasher id {found}, but the verifier uses hasher id {expected}"
            ),
            ProofError::BadTag { tag } => write!(f, "unknown node tag {tag}"),
            ProofError::TooLarge { what, found, limit } => {
                write!(f, "{what} is {found}, above the limit of {limit}")
            }
            ProofError::TooDeep => write!(f, "proof is deeper than 256 bits"),
            ProofError::Malformed { reason } => write!(f, "malformed proof: {reason}"),
            ProofError::RootMismatch => write!(f, "proof does not hash to the expected root"),
            ProofError::NotCovered { key } => {
                write!(f, "proof does not cover key ")?;
                write_hex(f, key)
            }
            ProofError::ValueMismatch { key } => {
                write!(f, "proof shows another value for key ")?;
                write_hex(f, key)
            }
            ProofError::ChunkOutOfOrder { expected, found } => {
                write!(f, "chunk starts at ")?;
                write_hex(f, found)?;
                write!(f, " but the next chunk must start at ")?;
                write_hex(f, expected)
            }
            ProofError::DuplicateKey { key } => {
                write!(f, "key appears twice: ")?;
                write_hex(f, key)
            }
        }
    }
}

fn write_hex(f: &mut core::fmt::Formatter<'_>, bytes: &[u8]) -> core::fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

#[cfg(feature = "std")]
impl std::error::Error for ProofError {}
