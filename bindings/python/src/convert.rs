//! Conversions at the boundary: engine errors to the exception classes of `sprig.errors`,
//! 32-byte keys from `bytes`, hasher names, and `bytes` out.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};
use sprig::{Hasher, KeyPath};

/// Raise the class `name` of `sprig.errors` with `message`.
pub fn error(name: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::with_gil(|py| {
        let class = py
            .import("sprig.errors")
            .and_then(|m| m.getattr(name))
            .and_then(|c| c.downcast_into::<PyType>().map_err(PyErr::from));
        match class {
            Ok(class) => PyErr::from_type(class, message),
            Err(e) => e,
        }
    })
}

/// The exception for an engine error.
pub fn err(e: sprig::Error) -> PyErr {
    use sprig::Error as E;
    let class = match &e {
        E::Io { .. } => "IoError",
        E::Corruption { .. } => "CorruptionError",
        E::InvalidArgument(_)
        | E::ValueTooLarge { .. }
        | E::HasherMismatch { .. }
        | E::UnsupportedFormat { .. }
        | E::NotRetained { .. }
        | E::NoResolver(_)
        | E::ResolverMissing { .. }
        | E::DefaultTable
        | E::Foreign(_)
        | E::NotEmpty(_)
        | E::UnionInProgress { .. } => "InvalidArgumentError",
        E::NotFound(_) | E::NoSuchTable(_) | E::NoSuchSnapshot(_) => "NotFoundError",
        E::AlreadyExists(_) | E::TableExists(_) | E::SnapshotExists(_) => "AlreadyExistsError",
        E::Locked(_) => "LockedError",
        E::ReadOnly => "ReadOnlyError",
        E::Proof(_) => "ProofError",
        E::Stale { .. } | E::Discarded { .. } | E::Superseded { .. } | E::AlreadyCommitted(_) => {
            "StaleError"
        }
        _ => "SprigError",
    };
    error(class, e.to_string())
}

/// A 32-byte key path from `bytes`.
pub fn key_arg(bytes: &[u8]) -> PyResult<KeyPath> {
    KeyPath::try_from(bytes).map_err(|_| {
        error(
            "InvalidArgumentError",
            format!(
                "a key must be a 32-byte key path, not {} bytes (hash byte keys with key_path)",
                bytes.len()
            ),
        )
    })
}

/// 32-byte key paths from a list of `bytes` (the first bad one refused).
pub fn keys_arg(keys: &[Vec<u8>]) -> PyResult<Vec<KeyPath>> {
    keys.iter().map(|k| key_arg(k)).collect()
}

/// The hasher named `name` (`blake3`, `sha256`, `keccak256`).
pub fn hasher(name: &str) -> PyResult<Hasher> {
    Hasher::from_name(name).ok_or_else(|| {
        error(
            "InvalidArgumentError",
            format!("unknown hasher {name:?} (blake3, sha256 or keccak256)"),
        )
    })
}

/// `bytes` for Python.
pub fn bytes<'py>(py: Python<'py>, b: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, b)
}
