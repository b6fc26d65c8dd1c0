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
pub mod snapshots;
pub mod wal;
pub mod writer;

use crate::error::{Error, Result};
use crate::io::{OpenOptions, Storage, StorageFile};
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

/// Write the small file `name` atomically: a temporary file written and synced, renamed into
/// place, the directory synced. `failpoints` name the hooks after the write and after the
/// rename (feature `failpoints`), for crash tests of the file's lifecycle.
pub(crate) fn install_file(
    storage: &dyn Storage,
    name: &str,
    bytes: &[u8],
    failpoints: (&'static str, &'static str),
) -> Result<()> {
    install_file_with(storage, name, failpoints, &mut |file, tmp| {
        file.write_at(bytes, 0)
            .map_err(|e| Error::io("writing", tmp, e))
    })
}

/// [`install_file`] with the contents written by `write` (given the temporary file and its
/// name), for files written a piece at a time.
pub(crate) fn install_file_with(
    storage: &dyn Storage,
    name: &str,
    failpoints: (&'static str, &'static str),
    write: &mut dyn FnMut(&dyn StorageFile, &str) -> Result<()>,
) -> Result<()> {
    let _ = failpoints;
    let tmp = format!("{name}.tmp");
    let file = storage
        .open(
            &tmp,
            OpenOptions {
                create: true,
                direct: false,
            },
        )
        .map_err(|e| Error::io("creating", &tmp, e))?;
    file.set_len(0)
        .map_err(|e| Error::io("writing", &tmp, e))?;
    write(file.as_ref(), &tmp)?;
    // Failpoint (feature `failpoints`): the temporary file written, not synced.
    failpoint!(failpoints.0);
    file.sync().map_err(|e| Error::io("writing", &tmp, e))?;
    storage
        .rename(&tmp, name)
        .map_err(|e| Error::io("installing", name, e))?;
    // Failpoint (feature `failpoints`): renamed into place, the directory not synced.
    failpoint!(failpoints.1);
    storage
        .sync_dir()
        .map_err(|e| Error::io("installing", name, e))
}

/// The whole of the small file `name`.
pub(crate) fn read_file(storage: &dyn Storage, name: &str) -> Result<Vec<u8>> {
    read_file_start(storage, name, usize::MAX)
}

/// The first `max` bytes of file `name` (all of it if shorter).
pub(crate) fn read_file_start(storage: &dyn Storage, name: &str, max: usize) -> Result<Vec<u8>> {
    let file = storage
        .open(
            name,
            OpenOptions {
                create: false,
                direct: false,
            },
        )
        .map_err(|e| Error::io("opening", name, e))?;
    let len = file.size().map_err(|e| Error::io("reading", name, e))?;
    let len = usize::try_from(len)
        .map_err(|_| Error::corruption(name, 0, "too large"))?
        .min(max);
    let mut bytes = vec![0u8; len];
    file.read_at(&mut bytes, 0)
        .map_err(|e| Error::io("reading", name, e))?;
    Ok(bytes)
}
