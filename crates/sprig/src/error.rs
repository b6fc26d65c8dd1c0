//! Sprig's error type. Corruption names the file, the offset and what failed; I/O errors name
//! the operation and the file; bad input is an invalid argument with a sentence saying what is
//! wrong.

use sprig_core::{Hasher, ProofError};
use std::path::PathBuf;

/// The result of every fallible Sprig operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Sprig.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error while {op} {file}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file involved.
        file: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Stored data failed a check: a checksum, a magic number, a structural rule, or a hash.
    #[error("corruption in {file} at offset {offset}: {what}")]
    Corruption {
        /// The file holding the bad data.
        file: String,
        /// The byte offset of the bad data in that file.
        offset: u64,
        /// What failed.
        what: String,
    },
    /// An argument or option is not acceptable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The database exists but was created with another hasher than the one requested.
    #[error("the database uses hasher {stored}, but {requested} was requested")]
    HasherMismatch {
        /// The hasher recorded in the database.
        stored: Hasher,
        /// The hasher in the options.
        requested: Hasher,
    },
    /// No database at the path.
    #[error("no Sprig database at {0}")]
    NotFound(PathBuf),
    /// A database already exists at the path.
    #[error("a Sprig database already exists at {0}")]
    AlreadyExists(PathBuf),
    /// Another process (or handle) has the database open.
    #[error("the database at {0} is locked by another process")]
    Locked(PathBuf),
    /// An earlier write or sync failed; the database refuses writes until it is reopened,
    /// because a failed sync may have lost data that retrying would not restore.
    #[error("the database refuses writes after an earlier write failure ({0}); reopen it")]
    Poisoned(String),
    /// A batch was built on a version that is no longer the latest.
    #[error("the batch was built on version {base}, but the latest version is {head}")]
    Stale {
        /// The version the batch was built on.
        base: u64,
        /// The latest committed version.
        head: u64,
    },
    /// A proof failed to verify.
    #[error("proof error: {0}")]
    Proof(#[from] ProofError),
}

impl Error {
    /// Wrap an I/O error with the operation and file.
    pub fn io(op: &'static str, file: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            op,
            file: file.into(),
            source,
        }
    }

    /// A corruption error.
    pub fn corruption(file: impl Into<String>, offset: u64, what: impl Into<String>) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    /// Whether this is a corruption error.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}
