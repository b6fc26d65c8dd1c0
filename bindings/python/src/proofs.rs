//! Verification with `sprig-core` alone (no database): path proofs and block witnesses; and
//! key paths of byte keys.

use crate::convert::{bytes, error, hasher, key_arg};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Whether `proof` (from `View.prove`) shows `key` with exactly `value` (None: absent) under
/// `root`. A proof that does not decode does not show it: False.
#[pyfunction]
#[pyo3(signature = (proof, root, key, value, hasher="blake3"))]
pub fn verify(
    proof: &[u8],
    root: &[u8],
    key: &[u8],
    value: Option<&[u8]>,
    hasher: &str,
) -> PyResult<bool> {
    let h = self::hasher(hasher)?;
    let root = key_arg(root)?;
    let key = key_arg(key)?;
    Ok(sprig_core::PathProof::decode(proof, h)
        .and_then(|p| p.verify_value(h, &root, &key, value))
        .is_ok())
}

/// Check a witness (from `Pending.witness` or `View.witness`) against the root it was made on;
/// returns the keys it proves. Raises `ProofError` if it does not verify.
#[pyfunction]
#[pyo3(signature = (witness, root, hasher="blake3"))]
pub fn verify_witness<'py>(
    py: Python<'py>,
    witness: &[u8],
    root: &[u8],
    hasher: &str,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let h = self::hasher(hasher)?;
    let root = key_arg(root)?;
    let w =
        sprig_core::Witness::decode(witness, h).map_err(|e| error("ProofError", e.to_string()))?;
    let v = w
        .verify(h, &root)
        .map_err(|e| error("ProofError", e.to_string()))?;
    Ok(v.keys().iter().map(|k| bytes(py, k)).collect())
}

/// The 32-byte key path of a byte key with `hasher` (what `Db.key_path` gives).
#[pyfunction]
#[pyo3(signature = (key, hasher="blake3"))]
pub fn key_path<'py>(py: Python<'py>, key: &[u8], hasher: &str) -> PyResult<Bound<'py, PyBytes>> {
    let h = self::hasher(hasher)?;
    Ok(bytes(py, &sprig_core::key_path_of(h, key)))
}
