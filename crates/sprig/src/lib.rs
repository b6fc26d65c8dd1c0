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

mod bulk;
mod cache;
mod check;
mod cleaner;
pub mod codec;
mod commit;
mod db;
pub mod directory;
mod error;
mod handle;
pub mod io;
pub mod log;
mod options;
mod overlay;
pub mod page;
pub mod prefix;
mod rollback;
mod scan;
mod stats;

pub use bulk::{BulkOptions, BulkPhase, BulkProgress, BulkReport};
pub use check::CheckReport;
pub use commit::{
    CommitInfo, ImportOptions, WriteBatch, DEFAULT_IMPORT_MEMORY_BYTES, MIN_IMPORT_MEMORY_BYTES,
};
pub use db::{Db, ReadView};
pub use error::{Error, Result};
pub use handle::Handle;
pub use io::{IoBackend, IoBackendInfo};
pub use options::{Options, SyncPolicy};
pub use overlay::Pending;
pub use page::MAX_VALUE_BYTES;
pub use scan::Entries;
pub use sprig_core::{self as core, Hasher, KeyPath, Node};
pub use stats::{ReadKind, Stats};
