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
pub mod read_ahead;
pub mod record;
pub mod recovery;
pub mod recycle;
pub mod runs;
pub mod segments;
pub mod snapshots;
pub mod stager;
pub mod wal;
pub mod writer;

use crate::error::{Error, Result};
use crate::codec::{StreamReader, StreamWriter};
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
    /// Read (and write) access to the segment files (shared with the cleaner's read-ahead).
    pub segments: Arc<Segments>,
    /// When commits reach the disk.
    pub sync: SyncPolicy,
    /// The single writer's state; its lock serialises commits.
    pub writer: Mutex<Writer>,
    /// The cleaner's read-ahead for the next commit (started and taken under the writer's
    /// lock).
    pub read_ahead: read_ahead::ReadAhead,
}

/// Write file `name` atomically: a temporary file written by `write` (given the file and its
/// name) and synced, renamed into place, the directory synced. `failpoints` name the hooks
/// after the write and after the rename (feature `failpoints`), for crash tests of the file's
/// lifecycle.
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
    let written = file
        .set_len(0)
        .map_err(|e| Error::io("writing", &tmp, e))
        .and_then(|()| write(file.as_ref(), &tmp));
    if let Err(e) = written {
        // Nothing refers to the temporary file; the next read-write open would delete it.
        let _ = storage.remove(&tmp);
        return Err(e);
    }
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

/// Write file `name` atomically ([`install_file_with`]) as `head` followed by a body that
/// `encode` appends a piece at a time, then the body's checksum: no copy of the body is held
/// in memory whatever its size.
pub(crate) fn install_streamed(
    storage: &dyn Storage,
    name: &str,
    failpoints: (&'static str, &'static str),
    head: &[u8],
    encode: &mut dyn FnMut(&mut StreamWriter<'_>) -> Result<()>,
) -> Result<()> {
    install_file_with(storage, name, failpoints, &mut |file, tmp| {
        let io = |e| Error::io("writing", tmp, e);
        file.write_at(head, 0).map_err(io)?;
        let start = head.len() as u64;
        let mut append = |b: &[u8], at: u64| file.write_at(b, start + at);
        let mut w = StreamWriter::new(&mut append);
        encode(&mut w)?;
        let (len, sum) = w.finish().map_err(io)?;
        file.write_at(&sum.to_le_bytes(), start + len).map_err(io)
    })
}

/// Decode the body of file `name` (from byte `start` to the checksum in its last 8 bytes) a
/// piece at a time with `decode`, as [`install_streamed`] wrote it. The checksum is checked
/// over the whole body whatever decoding found, and a mismatch is reported first; `kind`
/// names the file in errors ("checkpoint", "snapshot"). A damaged file is decoded in full
/// before its checksum rejects it: what it builds is at most what a sound file of its size
/// builds, and is dropped.
pub(crate) fn decode_streamed<T>(
    file: &dyn StorageFile,
    name: &str,
    kind: &str,
    start: u64,
    decode: impl FnOnce(&mut StreamReader<'_>) -> Result<T>,
) -> Result<T> {
    let len = file.size().map_err(|e| Error::io("reading", name, e))?;
    let end = len
        .checked_sub(8)
        .filter(|end| *end >= start)
        .ok_or_else(|| Error::corruption(name, start, format!("{kind} truncated")))?;
    let body_len = usize::try_from(end - start)
        .map_err(|_| Error::corruption(name, start, format!("{kind} too large")))?;
    let mut tail = [0u8; 8];
    file.read_at(&mut tail, end)
        .map_err(|e| Error::io("reading", name, e))?;
    let mut read = |buf: &mut [u8], at: u64| file.read_at(buf, start + at);
    let mut r = StreamReader::new(body_len, &mut read);
    let decoded = decode(&mut r);
    let sum = r.checksum().map_err(|e| Error::io("reading", name, e))?;
    if sum != u64::from_le_bytes(tail) {
        return Err(Error::corruption(name, end, format!("{kind} checksum mismatch")));
    }
    decoded
}

/// The body of the whole file `bytes` (named `name`) — from byte `start` to the checksum in
/// its last 8 bytes, as [`install_streamed`] wrote it — once the checksum matches: what
/// [`decode_streamed`] checks, for a file already in memory.
pub(crate) fn checked_body<'b>(name: &str, kind: &str, bytes: &'b [u8], start: usize) -> Result<&'b [u8]> {
    let end = bytes
        .len()
        .checked_sub(8)
        .filter(|end| *end >= start)
        .ok_or_else(|| Error::corruption(name, start as u64, format!("{kind} truncated")))?;
    let (body, tail) = bytes.split_at(end);
    let stored = tail
        .try_into()
        .map(u64::from_le_bytes)
        .map_err(|_| Error::corruption(name, end as u64, format!("{kind} truncated")))?;
    let body = body
        .get(start..)
        .ok_or_else(|| Error::corruption(name, start as u64, format!("{kind} truncated")))?;
    if crate::codec::checksum(body) != stored {
        return Err(Error::corruption(name, end as u64, format!("{kind} checksum mismatch")));
    }
    Ok(body)
}

/// Open the existing file `name` for reading.
pub(crate) fn open_existing(storage: &dyn Storage, name: &str) -> Result<Arc<dyn StorageFile>> {
    storage
        .open(
            name,
            OpenOptions {
                create: false,
                direct: false,
            },
        )
        .map_err(|e| Error::io("opening", name, e))
}

/// The first `max` bytes of file `name` (all of it if shorter).
pub(crate) fn read_file_start(storage: &dyn Storage, name: &str, max: usize) -> Result<Vec<u8>> {
    read_start(open_existing(storage, name)?.as_ref(), name, max)
}

/// The first `max` bytes of the open file `name` (all of it if shorter).
pub(crate) fn read_start(file: &dyn StorageFile, name: &str, max: usize) -> Result<Vec<u8>> {
    let len = file.size().map_err(|e| Error::io("reading", name, e))?;
    let len = usize::try_from(len)
        .map_err(|_| Error::corruption(name, 0, "too large"))?
        .min(max);
    let mut bytes = vec![0u8; len];
    file.read_at(&mut bytes, 0)
        .map_err(|e| Error::io("reading", name, e))?;
    Ok(bytes)
}
