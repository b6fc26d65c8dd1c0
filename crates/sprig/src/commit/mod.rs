//! The commit pipeline. A write batch collects reads and changes on the latest version;
//! `finish` loads every page the batch touches in one round of parallel reads, then, region by
//! region and on every core, proves the pre-state of the touched keys (the witness) and
//! applies the changes in the same pass (splitting full pages), merges sparse regions and
//! computes the new root, all in memory; `commit` writes the new pages and values
//! sequentially, syncs, appends the commit record, syncs, and only then publishes the new
//! version.
//!
//! - `batch`: the write batch and `finish`;
//! - `rewrite`: the per-region work (prove, apply, lay out pages) and merges;
//! - `write`: the durable part (allocation, the record, checkpoints, deleting segments);
//! - `publish`: the one path by which a version becomes durable and visible (also used by
//!   rollback, bulk load and import), and poisoning on failure;
//! - `import`: a sorted stream of changes of any length applied as one commit, region by
//!   region, in bounded memory (it reuses `rewrite` and `write`).

mod batch;
mod import;
pub(crate) mod publish;
mod rewrite;
mod write;

pub use batch::WriteBatch;
pub use import::{ImportOptions, DEFAULT_IMPORT_MEMORY_BYTES, MIN_IMPORT_MEMORY_BYTES};

use crate::cleaner::CleanMode;
use crate::db::Db;
use crate::directory::DirNode;
use crate::error::{Error, Result};
use crate::overlay::Pending;
use crate::prefix::Prefix;
use sprig_core::trie::{KeyPath, Node};
use std::sync::Arc;

/// A change to one key: a new value, or `None` to delete.
pub(crate) type Change = (KeyPath, Option<Vec<u8>>);
/// A replaced region of the directory and its new subtree.
pub(crate) type Region = (Prefix, Arc<DirNode>);

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The new version's sequence number.
    pub seq: u64,
    /// The new state root.
    pub root: Node,
    /// Pages written.
    pub pages_written: u64,
    /// Bytes written to segments and the commit log.
    pub bytes_written: u64,
    /// Pages the cleaner copied forward with this commit.
    pub pages_relocated: u64,
    /// Values the cleaner copied forward with this commit.
    pub values_relocated: u64,
}

impl Db {
    /// Start a batch of reads and changes on the latest version.
    pub fn begin(&self) -> WriteBatch {
        let (head, pin) = self.inner.pinned_head();
        WriteBatch::pinned(self.inner.clone(), head, pin)
    }

    /// Make a finished batch (an overlay) durable and the latest version, committing its
    /// uncommitted ancestor overlays first. Fails with [`Error::Stale`] if another commit
    /// happened since the batch began, and with an error naming the overlay if it was
    /// discarded or superseded.
    pub fn commit(&self, pending: Pending) -> Result<CommitInfo> {
        if !Arc::ptr_eq(&pending.inner, &self.inner) {
            return Err(Error::Foreign("the batch belongs to another database"));
        }
        self.inner.commit(pending, CleanMode::Auto)
    }

    /// Run the cleaner now: copy the live data of sealed segments that are at most half live
    /// forward (a bounded amount per call), so their files can be deleted. Returns what it did,
    /// or `None` if no segment needed cleaning.
    pub fn clean(&self) -> Result<Option<CommitInfo>> {
        if !self.inner.has_cleaning_work() {
            return Ok(None);
        }
        let pending = self.begin().finish()?;
        self.inner.commit(pending, CleanMode::Explicit).map(Some)
    }
}
