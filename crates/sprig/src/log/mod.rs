//! The durable log: segment files holding pages and values, the write-ahead log of commit
//! records, checkpoints of the directory, the manifest, and recovery. Together they let the
//! engine write only sequentially, commit with two syncs, and recover to exactly the last
//! complete commit.
//!
//! This layer owns every file's lifecycle and the one publish path ([`publish`]): how a new
//! state becomes durable, and how a failure on the way poisons the writer ([`writer`]). It
//! knows the state's data structures (directory, pages) but never the API above it.

pub mod checkpoint;
pub mod manifest;
pub mod publish;
pub mod record;
pub mod recovery;
pub mod segments;
pub mod wal;
pub mod writer;

use crate::io::Storage;
use crate::options::SyncPolicy;
use parking_lot::Mutex;
use segments::Segments;
use std::sync::Arc;
use writer::Writer;

/// The files of one database: where they are, how commits sync, and the writer's state.
pub(crate) struct Log {
    /// The database directory's files.
    pub storage: Arc<dyn Storage>,
    /// Read (and write) access to the segment files.
    pub segments: Segments,
    /// When commits reach the disk.
    pub sync: SyncPolicy,
    /// The single writer's state; its lock serialises commits.
    pub writer: Mutex<Writer>,
}
