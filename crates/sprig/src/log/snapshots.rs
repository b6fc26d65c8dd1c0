//! Named snapshot files: one durable, named version of every table, kept apart from the
//! retained history, and what it pins.
//!
//! A snapshot copies no data. Segments are immutable until the cleaner empties and deletes
//! them, so a snapshot only has to keep them: its file records the highest segment id that
//! existed when it was saved, and no segment up to that id is cleaned or deleted while the
//! snapshot exists (the same pin an incremental union uses). The file holds the directories of
//! every table (the encoding a checkpoint uses) behind a small header with its own checksum,
//! so opening a database reads only headers, and opening a snapshot checks everything: both
//! checksums, every directory against its stated root, the database root against the header.
//!
//! Written atomically (temporary file, sync, rename, directory sync) after the version it
//! holds is durable; deleted by removing the file and syncing the directory, before the pin
//! goes. A crash at any step leaves either the whole snapshot or none.

use crate::codec::{checksum, Put, Reader, Source};
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::log::checkpoint::{decode_tables, encode_tables};
use crate::log::segments::check_segment_blocks;
use crate::state::directory::Arena;
use crate::state::tables::Tables;
use sprig_core::trie::Node;
use sprig_core::Hasher;
use std::collections::BTreeMap;
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"SPSN";
const VERSION: u8 = 1;
/// The longest snapshot name, in bytes.
pub const MAX_SNAPSHOT_NAME_BYTES: usize = 64;
/// The most bytes a header takes (magic, version, hasher, segment size, name, fields,
/// checksum).
const MAX_HEADER_BYTES: usize = 4 + 1 + 1 + 4 + 1 + MAX_SNAPSHOT_NAME_BYTES + 8 + 8 + 32 + 4 + 8;

/// The file name of snapshot `name`.
pub fn snapshot_file_name(name: &str) -> String {
    format!("snap-{name}.snap")
}

/// The snapshot name of a file name, if it names a snapshot file.
pub fn parse_snapshot_file_name(file: &str) -> Option<&str> {
    let name = file.strip_prefix("snap-")?.strip_suffix(".snap")?;
    check_snapshot_name(name).ok().map(|()| name)
}

/// Refuse a name that is empty, longer than [`MAX_SNAPSHOT_NAME_BYTES`], starts with a dot,
/// or holds anything but ASCII letters, digits, `.`, `_` and `-` (names become file names).
pub fn check_snapshot_name(name: &str) -> Result<()> {
    let fits = !name.is_empty()
        && name.len() <= MAX_SNAPSHOT_NAME_BYTES
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if fits {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "snapshot name {name:?}: use 1 to {MAX_SNAPSHOT_NAME_BYTES} ASCII letters, digits, \
             '.', '_' or '-', not starting with '.'"
        )))
    }
}

/// What a snapshot's header says: enough to list it and to pin what it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The snapshot's name.
    pub name: String,
    /// The commit it holds.
    pub seq: u64,
    /// When it was saved, seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// The database root of that commit.
    pub db_root: Node,
    /// Every segment up to this id is kept while the snapshot exists.
    pub pinned_segments: u32,
}

/// A whole snapshot: its header and every table.
pub struct SnapshotFile {
    /// The header.
    pub header: SnapshotHeader,
    /// Every table of the commit.
    pub tables: Tables,
}

fn encode_header(h: &SnapshotHeader, hasher: Hasher, segment_blocks: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_HEADER_BYTES);
    out.extend_from_slice(MAGIC);
    out.put_u8(VERSION);
    out.put_u8(hasher.id());
    out.put_u32(segment_blocks);
    // The name is checked to fit a byte when saved.
    out.put_u8(h.name.len() as u8);
    out.extend_from_slice(h.name.as_bytes());
    out.put_u64(h.seq);
    out.put_u64(h.created_unix_secs);
    out.extend_from_slice(&h.db_root);
    out.put_u32(h.pinned_segments);
    let sum = checksum(&out);
    out.put_u64(sum);
    out
}

/// Decode a header from the start of `bytes` (the file `file`), checking its checksum, hasher
/// and segment size; returns it and where the body starts.
fn decode_header(
    file: &str,
    bytes: &[u8],
    hasher: Hasher,
    segment_blocks: u32,
) -> Result<(SnapshotHeader, usize)> {
    let bad = |at: usize, what: &str| Error::corruption(file, at as u64, what);
    let de = |e: crate::codec::DecodeError| bad(e.at, e.what);
    let mut r = Reader::new(bytes);
    if &r.array::<4>().map_err(de)? != MAGIC {
        return Err(bad(0, "not a snapshot (bad magic)"));
    }
    if r.u8().map_err(de)? != VERSION {
        return Err(bad(4, "snapshot of an unknown version"));
    }
    if r.u8().map_err(de)? != hasher.id() {
        return Err(bad(5, "snapshot made with another hasher than the database's"));
    }
    let stored_blocks = r.u32().map_err(de)?;
    check_segment_blocks(stored_blocks).map_err(|what| bad(6, what))?;
    let len = usize::from(r.u8().map_err(de)?);
    let at = r.position();
    let name = r.slice(len).map_err(de)?;
    let name = std::str::from_utf8(name)
        .ok()
        .filter(|n| check_snapshot_name(n).is_ok())
        .ok_or_else(|| bad(at, "snapshot name is not a valid name"))?
        .to_string();
    let seq = r.u64().map_err(de)?;
    let created_unix_secs = r.u64().map_err(de)?;
    let db_root = r.array().map_err(de)?;
    let pinned_segments = r.u32().map_err(de)?;
    let end = r.position();
    let stored = r.u64().map_err(de)?;
    if checksum(&bytes[..end]) != stored {
        return Err(bad(end, "snapshot header checksum mismatch"));
    }
    if stored_blocks != segment_blocks {
        return Err(bad(6, "snapshot of another segment size than the database's"));
    }
    let header = SnapshotHeader {
        name,
        seq,
        created_unix_secs,
        db_root,
        pinned_segments,
    };
    Ok((header, r.position()))
}

impl SnapshotFile {
    /// Write the snapshot atomically under its name, its tables a piece at a time (no copy of
    /// the file is held in memory).
    pub fn store(&self, storage: &dyn Storage, segment_blocks: u32) -> Result<()> {
        check_snapshot_name(&self.header.name)?;
        let header = encode_header(&self.header, self.tables.hasher(), segment_blocks);
        crate::log::install_streamed(
            storage,
            &snapshot_file_name(&self.header.name),
            ("snapshot.tmp_written", "snapshot.renamed"),
            &header,
            &mut |w| encode_tables(&self.tables, w),
        )
    }

    /// Decode a whole snapshot file (public for the fuzzers); every check failure is
    /// [`Error::Corruption`] naming `file`.
    pub fn decode(
        file: &str,
        bytes: &[u8],
        arena: &Arc<Arena>,
        hasher: Hasher,
        segment_blocks: u32,
    ) -> Result<SnapshotFile> {
        let (header, body_start) = decode_header(file, bytes, hasher, segment_blocks)?;
        let body = crate::log::checked_body(file, "snapshot", bytes, body_start)?;
        let tables = decode_body(file, &mut Reader::new(body), body_start, arena, hasher, segment_blocks)?;
        check_root(file, &header, &tables)?;
        Ok(SnapshotFile { header, tables })
    }

    /// Load and check the whole snapshot `name`, reading its file a piece at a time (the
    /// directory is built as the file is read: no copy of the file is held).
    pub fn load(
        storage: &dyn Storage,
        name: &str,
        arena: &Arc<Arena>,
        hasher: Hasher,
        segment_blocks: u32,
    ) -> Result<SnapshotFile> {
        let file = snapshot_file_name(name);
        // Header and body from one open file (a snapshot deleted and saved again under the
        // same name between two opens would mix two files).
        let f = crate::log::open_existing(storage, &file)?;
        let head = crate::log::read_start(f.as_ref(), &file, MAX_HEADER_BYTES)?;
        let (header, body_start) = decode_header(&file, &head, hasher, segment_blocks)?;
        if header.name != name {
            return Err(Error::corruption(
                &file,
                0,
                "snapshot holds another name than its file's",
            ));
        }
        let tables = crate::log::decode_streamed(f.as_ref(), &file, "snapshot", body_start as u64, |r| {
            decode_body(&file, r, body_start, arena, hasher, segment_blocks)
        })?;
        check_root(&file, &header, &tables)?;
        Ok(SnapshotFile { header, tables })
    }
}

/// Decode a snapshot's tables from `r`, which starts at byte `body_start` of file `file`.
fn decode_body(
    file: &str,
    r: &mut impl Source,
    body_start: usize,
    arena: &Arc<Arena>,
    hasher: Hasher,
    segment_blocks: u32,
) -> Result<Tables> {
    let bad = |at: usize, what: &str| Error::corruption(file, (body_start + at) as u64, what);
    let tables = decode_tables(r, arena, hasher, segment_blocks, true, &bad)?;
    r.finish()
        .map_err(|e| bad(e.at, "bytes after the snapshot's tables"))?;
    Ok(tables)
}

/// The tables must hash to the database root the header states.
fn check_root(file: &str, header: &SnapshotHeader, tables: &Tables) -> Result<()> {
    if tables.db_root() != header.db_root {
        return Err(Error::corruption(
            file,
            0,
            "snapshot tables hash to another database root than its header states",
        ));
    }
    Ok(())
}

/// The header of snapshot file `file` (read from its start only).
pub fn load_header(
    storage: &dyn Storage,
    file: &str,
    hasher: Hasher,
    segment_blocks: u32,
) -> Result<SnapshotHeader> {
    let bytes = crate::log::read_file_start(storage, file, MAX_HEADER_BYTES)?;
    let (header, _) = decode_header(file, &bytes, hasher, segment_blocks)?;
    if parse_snapshot_file_name(file) != Some(header.name.as_str()) {
        return Err(Error::corruption(
            file,
            0,
            "snapshot holds another name than its file's",
        ));
    }
    Ok(header)
}

/// Delete snapshot `name`'s file durably.
pub fn remove(storage: &dyn Storage, name: &str) -> Result<()> {
    let file = snapshot_file_name(name);
    // Failpoint (feature `failpoints`): a snapshot about to be deleted.
    failpoint!("snapshot.deleting");
    storage
        .remove(&file)
        .and_then(|()| storage.sync_dir())
        .map_err(|e| Error::io("deleting", &file, e))
}

/// The named snapshots a database directory holds (their headers, by name), and the snapshot
/// files whose header cannot be read, with the reason.
pub type FoundSnapshots = (BTreeMap<String, SnapshotHeader>, BTreeMap<String, String>);

/// Read the header of every snapshot file in `storage`.
pub fn load_all(storage: &dyn Storage, hasher: Hasher, segment_blocks: u32) -> Result<FoundSnapshots> {
    let names = storage
        .list()
        .map_err(|e| Error::io("listing", "the database directory", e))?;
    let mut found = BTreeMap::new();
    let mut damaged = BTreeMap::new();
    for file in names {
        let Some(name) = parse_snapshot_file_name(&file) else {
            continue;
        };
        match load_header(storage, &file, hasher, segment_blocks) {
            Ok(h) => {
                found.insert(name.to_string(), h);
            }
            Err(e) => {
                damaged.insert(name.to_string(), e.to_string());
            }
        }
    }
    Ok((found, damaged))
}
