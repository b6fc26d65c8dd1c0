//! The write paths and the engine they share. A write batch (`api::batch`) collects reads and
//! changes on a version; `finish` loads every page the batch touches in one round of parallel
//! reads, then, region by region and on every core, proves the pre-state of the touched keys
//! (the witness) and applies the changes in the same pass (`rewrite`: splitting full pages,
//! merging sparse ones), all in memory; `commit` allocates blocks for the new pages and values
//! and publishes them through the log's one publish path.
//!
//! - `engine`: the shared state (`engine::Inner`) and the steps every write ends with;
//! - `read`: the read path (pages and values) every operation uses;
//! - `rewrite`: the per-region work (prove, apply, lay out pages) and merges;
//! - `commit`: a commit's allocation and publication;
//! - `cleaner`: relocation of live data riding on commits;
//! - `import`: a sorted stream of changes of any length applied as one commit, region by
//!   region, in bounded memory;
//! - `bulk`: building a whole database from unsorted input;
//! - `rollback`: a retained version made the latest again;
//! - `catalog`: tables created and dropped.

pub(crate) mod bulk;
pub(crate) mod catalog;
pub(crate) mod cleaner;
pub(crate) mod commit;
pub(crate) mod cores;
pub(crate) mod engine;
pub(crate) mod import;
pub(crate) mod read;
pub(crate) mod rewrite;
pub(crate) mod rollback;

pub use bulk::{BulkOptions, BulkPhase, BulkProgress, BulkReport};
pub use import::{ImportOptions, DEFAULT_IMPORT_MEMORY_BYTES, MIN_IMPORT_MEMORY_BYTES};

use sprig_core::trie::{KeyPath, Node};

pub(crate) use crate::state::directory::Region;

/// A change to one key: a new value, or `None` to delete.
pub(crate) type Change = (KeyPath, Option<Vec<u8>>);

/// What a commit did.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut batch = db.begin();
/// batch.put([1u8; 32], "v")?;
/// let info = db.commit(batch.finish()?)?;
/// assert_eq!((info.seq, info.root, info.db_root), (1, db.root(), db.db_root()));
/// assert!(info.pages_written >= 1 && info.bytes_written >= 4096);
/// assert_eq!((info.pages_relocated, info.values_relocated), (0, 0)); // no cleaning needed
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The new version's sequence number.
    pub seq: u64,
    /// The default table's new root: the state root of a database without other tables,
    /// bit-for-bit NOMT's.
    pub root: Node,
    /// The new database root: the root of roots over every table (see
    /// [`sprig_core::tables`]).
    pub db_root: Node,
    /// Pages written.
    pub pages_written: u64,
    /// Bytes written to segments and the commit log.
    pub bytes_written: u64,
    /// Pages the cleaner copied forward with this commit.
    pub pages_relocated: u64,
    /// Values the cleaner copied forward with this commit.
    pub values_relocated: u64,
}
