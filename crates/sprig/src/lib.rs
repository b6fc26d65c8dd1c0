//! Sprig: an SSD-optimized, merklized key-value store for blockchain state.
//!
//! One SSD read per lookup, insert, update or delete: the key space is cut into 4 KiB leaf
//! pages by key-path prefix, the trie above the pages lives in RAM (the directory), and each
//! page carries everything needed to recompute its part of the trie. Writes are
//! log-structured: a commit appends new page versions and syncs, then appends a checksummed
//! commit record and syncs. The state root is bit-for-bit NOMT's for the same key-value set.
//!
//! ```
//! use sprig::{Db, Options};
//! let db = Db::open_in_memory(Options::default()).unwrap();
//! let key = db.key_path(b"alice");
//! let mut batch = db.begin();
//! batch.put(key, 100u64.to_le_bytes()).unwrap();
//! let pending = batch.finish().unwrap();
//! let info = db.commit(pending).unwrap();
//! assert_eq!(db.view().get(&key).unwrap(), Some(100u64.to_le_bytes().to_vec()));
//! let proof = db.view().path_proof(&key).unwrap();
//! proof.verify_value(db.hasher(), &info.root, &key, Some(&100u64.to_le_bytes())).unwrap();
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![deny(missing_docs)]

// First: the `failpoint!` and `pausepoint!` hook macros the modules below use.
#[macro_use]
pub mod failpoint;

// The layers, data flowing down only: api → write → state + log → io (checked by
// `tests/suite/layering.rs`). `codec`, `error`, `options`, `resolve`, `stats` and `telemetry` are
// shared by every layer and use nothing but `io`.
mod api;
mod error;
pub mod io;
mod options;
pub mod resolve;
mod stats;
pub mod telemetry;

/// Declares an engine-internal module: crate-private, or public with the `internals` feature
/// (for the fuzzers, the torture tool and white-box tests), never part of the stable API.
macro_rules! internal {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code)]
        pub(crate) mod $name;
    };
}

internal!(codec);
internal!(log);
internal!(state);
internal!(write);

pub use api::batch::{Pending, WriteBatch};
pub use api::blob::BlobRef;
pub use api::check::CheckReport;
pub use api::db::Db;
pub use api::handle::Handle;
pub use api::pipeline::Pipeline;
pub use api::scan::Cursor;
pub use api::snapshot::SnapshotInfo;
pub use api::table::{Table, TableInfo, TableOptions};
pub use api::union::UnionWork;
pub use api::view::ReadView;
pub use codec::hex;
pub use error::{Error, Result};
pub use io::{IoBackend, IoBackendInfo};
pub use log::recovery::{LostTail, RecoveryReport};
pub use options::{Options, SyncPolicy};
pub use sprig_core::{self as core, Hasher, KeyPath, Node, SyncChunk, SyncVerifier, TableProof};
pub use state::page::MAX_VALUE_BYTES;
pub use stats::{PhaseTimes, ReadKind, Stats};
pub use telemetry::describe_metrics;
pub use write::{
    BulkOptions, BulkPhase, BulkProgress, BulkReport, CommitInfo, ImportOptions,
    DEFAULT_IMPORT_MEMORY_BYTES, MIN_IMPORT_MEMORY_BYTES,
};
