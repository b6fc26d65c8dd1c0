//! Sprig's error type. Corruption names the file, the offset and what failed; I/O errors name
//! the operation and the file; misuse of the API has a variant of its own per case, so callers
//! (and tests) match on variants, never on text; bad input is an invalid argument with a
//! sentence saying what is wrong; a broken internal invariant is [`Error::Internal`] (a bug in
//! Sprig, never the caller's fault).

use sprig_core::{Hasher, ProofError};
use std::path::PathBuf;

/// The result of every fallible Sprig operation.
///
/// ```
/// use sprig::{Db, Options, Result};
/// fn entries(db: &Db) -> Result<usize> {
///     let mut n = 0;
///     for entry in db.view().iter() {
///         entry?; // a page that cannot be read is an error
///         n += 1;
///     }
///     Ok(n)
/// }
/// # fn main() -> Result<()> {
/// assert_eq!(entries(&Db::open_in_memory(Options::default())?)?, 0);
/// # Ok(()) }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Sprig.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, Error, Options};
/// let db = Db::open_in_memory(Options::default())?;
/// match db.view_at(5) {
///     Err(Error::NotRetained { seq, .. }) => assert_eq!(seq, 5), // a variant per case
///     other => panic!("expected NotRetained, got {:?}", other.map(|_| ())),
/// }
/// match db.table("accounts") {
///     Err(e) => assert_eq!(e.to_string(), r#"no table named "accounts""#),
///     Ok(_) => panic!("no such table yet"),
/// }
/// # Ok(()) }
/// ```
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
    /// A value is larger than Sprig stores.
    #[error("a value of {len} bytes is larger than the limit of {max} bytes")]
    ValueTooLarge {
        /// The value's length.
        len: u64,
        /// The largest value stored ([`crate::MAX_VALUE_BYTES`]).
        max: u64,
    },
    /// The database exists but was created with another hasher than the one requested.
    #[error("the database uses hasher {stored}, but {requested} was requested")]
    HasherMismatch {
        /// The hasher recorded in the database.
        stored: Hasher,
        /// The hasher in the options.
        requested: Hasher,
    },
    /// The database was written in an on-disk format this build does not read.
    #[error("the database has format version {found}; this build reads version {supported}")]
    UnsupportedFormat {
        /// The version found on disk.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
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
    /// io_uring was required ([`crate::IoBackend::IoUringRequired`]) and is not available:
    /// the kernel refused it (a seccomp filter, `kernel.io_uring_disabled`, an old kernel), or
    /// this is not Linux.
    #[error("io_uring is required but unavailable: {source}")]
    IoUringUnavailable {
        /// The kernel's refusal.
        #[source]
        source: std::io::Error,
    },
    /// Every segment id has been used (ids are never reused): no segment can be added.
    #[error("no segment id is left after {last}: the database cannot grow")]
    SegmentIdsExhausted {
        /// The newest segment id.
        last: u32,
    },
    /// The database was opened read-only and a write was asked for.
    #[error("the database was opened read-only")]
    ReadOnly,
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
    /// The overlay (or one below it) was discarded.
    #[error("overlay {overlay} (version {seq}) was discarded")]
    Discarded {
        /// The overlay's id.
        overlay: u64,
        /// The sequence number it would have had.
        seq: u64,
    },
    /// The database reached the overlay's sequence number by another path (a sibling was
    /// committed, or a rollback), so the overlay (or one below it) can no longer be used.
    #[error("overlay {overlay} (version {seq}) was superseded: the database is at version {head}")]
    Superseded {
        /// The overlay's id.
        overlay: u64,
        /// The sequence number it would have had.
        seq: u64,
        /// The latest committed version.
        head: u64,
    },
    /// The overlay was committed already.
    #[error("overlay {0} was already committed")]
    AlreadyCommitted(u64),
    /// The overlays alive together would hold more memory than `Options::max_overlay_bytes`.
    #[error(
        "overlay memory limit of {limit} bytes reached ({in_use} in use, {needed} more needed): \
         commit or drop overlays, or raise Options::max_overlay_bytes"
    )]
    OverlayMemoryLimit {
        /// The limit.
        limit: u64,
        /// Bytes held by live overlays.
        in_use: u64,
        /// Bytes the new overlay needs.
        needed: u64,
    },
    /// A committed version was asked for that is not retained.
    #[error("version {seq} is not retained (retained versions: {retained})")]
    NotRetained {
        /// The version asked for.
        seq: u64,
        /// The retained range, e.g. "4 to 7".
        retained: String,
    },
    /// A batch, overlay or handle was used with a database or handle it does not belong to.
    #[error("{0}")]
    Foreign(&'static str),
    /// A source held another number of items than its caller said it would (a bulk load
    /// given [`crate::BulkOptions::expected_items`]); nothing was published.
    #[error("the source held {received} items where {expected} were expected; nothing was loaded")]
    CountMismatch {
        /// The number the caller gave.
        expected: u64,
        /// The number the source held.
        received: u64,
    },
    /// The operation needs a new, empty database.
    #[error("{0} needs a new, empty database")]
    NotEmpty(&'static str),
    /// No table of that name exists (or a table handle names a dropped table).
    #[error("no table named {0:?}")]
    NoSuchTable(String),
    /// The table is being filled by an incremental union: until it completes it serves
    /// lookups only (no writes, root, proofs or scans), and it cannot be a union's input.
    #[error(
        "table {table:?} is being filled by an incremental union ({remaining} input entries \
         to merge): supply union work until it completes"
    )]
    UnionInProgress {
        /// The table.
        table: String,
        /// The input entries still to merge.
        remaining: u64,
    },
    /// No named snapshot of that name exists.
    #[error("no snapshot named {0:?}")]
    NoSuchSnapshot(String),
    /// A named snapshot of that name exists already.
    #[error("a snapshot named {0:?} exists already: delete it first or pick another name")]
    SnapshotExists(String),
    /// A table of that name exists already.
    #[error("a table named {0:?} exists already")]
    TableExists(String),
    /// The default table cannot be dropped.
    #[error("the default table cannot be dropped")]
    DefaultTable,
    /// A table's resolver is not registered with this handle (see
    /// [`crate::Options::resolver`]), so its upserts cannot be resolved.
    #[error(
        "table {table:?} combines upserts with resolver {resolver:?}, which is not registered: \
         open the database with Options::resolver({resolver:?}, ...)"
    )]
    ResolverMissing {
        /// The table.
        table: String,
        /// The resolver's name.
        resolver: String,
    },
    /// An upsert into a table created without a resolver.
    #[error("table {0:?} has no resolver: create it with one to upsert into it")]
    NoResolver(String),
    /// A proof failed to verify.
    #[error("proof error: {0}")]
    Proof(#[from] ProofError),
    /// An internal invariant of Sprig broke: a bug, reported instead of continuing with
    /// state that cannot be trusted.
    #[error("internal error (a bug in Sprig, please report it): {0}")]
    Internal(String),
}

impl Error {
    /// Wrap an I/O error with the operation and file.
    ///
    /// ```
    /// use sprig::Error;
    /// let eof = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
    /// let e = Error::io("reading", "segment-0000000001", eof);
    /// assert!(matches!(&e, Error::Io { op: "reading", .. }));
    /// assert!(e.to_string().starts_with("I/O error while reading segment-0000000001"));
    /// ```
    pub fn io(op: &'static str, file: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            op,
            file: file.into(),
            source,
        }
    }

    /// A corruption error.
    ///
    /// ```
    /// use sprig::Error;
    /// let e = Error::corruption("MANIFEST", 12, "bad magic");
    /// assert!(e.is_corruption());
    /// assert_eq!(e.to_string(), "corruption in MANIFEST at offset 12: bad magic");
    /// ```
    pub fn corruption(file: impl Into<String>, offset: u64, what: impl Into<String>) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    /// A broken internal invariant.
    ///
    /// ```
    /// use sprig::Error;
    /// let e = Error::internal("a page asked for was not loaded");
    /// assert!(matches!(&e, Error::Internal(_)));
    /// assert!(e.to_string().contains("a bug in Sprig"));
    /// ```
    pub fn internal(what: impl Into<String>) -> Error {
        Error::Internal(what.into())
    }

    /// Whether this is a corruption error.
    ///
    /// ```
    /// use sprig::Error;
    /// assert!(Error::corruption("wal-0000000001.log", 4096, "checksum mismatch").is_corruption());
    /// assert!(!Error::InvalidArgument("not a key".into()).is_corruption());
    /// ```
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}
