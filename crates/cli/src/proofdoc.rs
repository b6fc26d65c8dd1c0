//! The JSON form of a proof, written by `prove` and read by `verify`: the kind of proof, the
//! hasher, the root it was made against, the keys with the values it claims, and the proof's
//! binary encoding (docs/PROOF_FORMAT.md) in hex. Depends only on `sprig-core` and serde.

use serde::{Deserialize, Serialize};

/// The `format` field of every proof document.
pub const DOC_FORMAT: &str = "sprig-proof/1";

/// Which structure a proof is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProofKind {
    /// A path proof of one key (magic `SPPP`).
    Path,
    /// A multi-proof of several keys (magic `SPMP`).
    Multi,
    /// A block witness: keys and a multi-proof (magic `SPWT`).
    Witness,
}

impl ProofKind {
    /// The kind of a binary encoding, from its magic bytes.
    pub fn of_encoding(bytes: &[u8]) -> Option<ProofKind> {
        match bytes.get(..4)? {
            b"SPPP" => Some(ProofKind::Path),
            b"SPMP" => Some(ProofKind::Multi),
            b"SPWT" => Some(ProofKind::Witness),
            _ => None,
        }
    }

    /// The name used in output.
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::Path => "path",
            ProofKind::Multi => "multi",
            ProofKind::Witness => "witness",
        }
    }
}

/// One proven key and the value the document claims for it (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenEntry {
    /// The key path, 64 hex digits.
    pub key: String,
    /// The value in hex, or `null` if the key is absent.
    pub value: Option<String>,
}

/// A proof with its claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofDoc {
    /// Always [`DOC_FORMAT`].
    pub format: String,
    /// The kind of proof.
    pub kind: ProofKind,
    /// The hasher's name.
    pub hasher: String,
    /// The root the proof was made against, 64 hex digits.
    pub root: String,
    /// The commit sequence number of that root, if known.
    #[serde(default)]
    pub seq: Option<u64>,
    /// The proven keys with their values.
    pub entries: Vec<ProvenEntry>,
    /// The binary encoding of the proof, in hex.
    pub proof: String,
    /// For a proof of keys in a table other than the default one: the table's name. `root`
    /// is then the database root, and `proof` is against the table's root, which
    /// `table_proof` ties to the database root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// With `table`: a table proof (magic `SPTP`, in hex) of the first entry's key, whose
    /// table root the proof is checked against once it is shown under the database root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_proof: Option<String>,
}
