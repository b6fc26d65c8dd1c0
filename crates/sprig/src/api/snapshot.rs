//! Named durable snapshots: save the latest version of every table under a name (no data
//! copied: the segments it reads are pinned), list and delete them, open one as a read-only
//! view (reads, scans, proofs, a full check), and restore the database to one.
//!
//! The file format and what a snapshot pins are in [`crate::log::snapshots`].

use crate::api::db::Db;
use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::log::snapshots::{self, check_snapshot_name, SnapshotFile, SnapshotHeader};
use crate::state::version::Version;
use crate::write::CommitInfo;
use sprig_core::trie::Node;
use std::sync::Arc;

/// A named snapshot, as listed by [`Db::snapshots`].
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// db.commit(db.begin().finish()?)?;
/// let info = db.save_snapshot("block-1")?;
/// assert_eq!((info.name.as_str(), info.seq, info.db_root), ("block-1", 1, db.db_root()));
/// assert!(info.damaged.is_none());
/// assert_eq!(db.snapshots(), [info]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Its name.
    pub name: String,
    /// The commit it holds (0 if its file is damaged).
    pub seq: u64,
    /// The database root of that commit.
    pub db_root: Node,
    /// When it was saved, seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// Why its file cannot be read, if it cannot: a damaged snapshot cannot be opened or
    /// restored, keeps every segment from being cleaned (what it needs is unknown) and can
    /// only be deleted.
    pub damaged: Option<String>,
}

impl From<&SnapshotHeader> for SnapshotInfo {
    fn from(h: &SnapshotHeader) -> SnapshotInfo {
        SnapshotInfo {
            name: h.name.clone(),
            seq: h.seq,
            db_root: h.db_root,
            created_unix_secs: h.created_unix_secs,
            damaged: None,
        }
    }
}

impl Db {
    /// Save the latest version of every table as snapshot `name`, durably. Copies no data:
    /// it writes the version's directories to a small file and keeps the segments it reads
    /// from being cleaned until it is deleted. Fails with [`Error::SnapshotExists`] if the
    /// name is taken, [`Error::InvalidArgument`] for a name that is not 1–64 ASCII letters,
    /// digits, `.`, `_` or `-`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = sprig::Db::open(dir.path(), sprig::Options::default()).unwrap();
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"before".to_vec()).unwrap();
    /// db.commit(batch.finish().unwrap()).unwrap();
    /// db.save_snapshot("block-100").unwrap();
    ///
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"after".to_vec()).unwrap();
    /// db.commit(batch.finish().unwrap()).unwrap();
    ///
    /// let old = db.open_snapshot("block-100").unwrap();
    /// assert_eq!(old.get(&[1u8; 32]).unwrap().as_deref(), Some(&b"before"[..]));
    /// db.restore_snapshot("block-100").unwrap();
    /// assert_eq!(db.view().get(&[1u8; 32]).unwrap().as_deref(), Some(&b"before"[..]));
    /// ```
    pub fn save_snapshot(&self, name: &str) -> Result<SnapshotInfo> {
        let _span = tracing::info_span!(target: "sprig", "sprig.snapshot.save", name).entered();
        check_snapshot_name(name)?;
        let inner = &self.inner;
        let mut w = inner.log.writer.lock();
        w.begin_write()?;
        if w.snapshots.contains_key(name) || w.damaged_snapshots.contains_key(name) {
            return Err(Error::SnapshotExists(name.to_string()));
        }
        let head = inner.head();
        // The version must survive a power loss before a snapshot can name it.
        w.make_log_durable()?;
        let header = SnapshotHeader {
            name: name.to_string(),
            seq: head.seq,
            created_unix_secs: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            db_root: head.tables.db_root(),
            pinned_segments: w.table.newest_id(),
        };
        SnapshotFile {
            header: header.clone(),
            tables: head.tables.clone(),
        }
        .store(inner.log.storage.as_ref(), w.table.segment_blocks)?;
        let info = SnapshotInfo::from(&header);
        w.snapshots.insert(name.to_string(), header);
        inner.refresh_emptied(&mut w);
        Ok(info)
    }

    /// Every named snapshot, by name.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// db.save_snapshot("b")?;
    /// db.commit(db.begin().finish()?)?;
    /// db.save_snapshot("a")?;
    /// let names: Vec<String> = db.snapshots().into_iter().map(|s| s.name).collect();
    /// assert_eq!(names, ["a", "b"]); // by name
    /// assert_eq!(db.snapshots()[1].seq, 0);
    /// # Ok(()) }
    /// ```
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        let w = self.inner.log.writer.lock();
        let mut out: Vec<SnapshotInfo> = w.snapshots.values().map(SnapshotInfo::from).collect();
        out.extend(w.damaged_snapshots.iter().map(|(name, why)| SnapshotInfo {
            name: name.clone(),
            seq: 0,
            db_root: [0u8; 32],
            created_unix_secs: 0,
            damaged: Some(why.clone()),
        }));
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Delete snapshot `name` (a damaged one too), durably; the segments only it kept become
    /// free for the cleaner. Views opened on it stay readable until dropped.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options};
    /// let db = Db::open_in_memory(Options::default())?;
    /// db.save_snapshot("old")?;
    /// let view = db.open_snapshot("old")?;
    /// db.delete_snapshot("old")?;
    /// assert!(db.snapshots().is_empty());
    /// assert!(view.is_empty()); // a view opened before stays readable
    /// assert!(matches!(db.delete_snapshot("old"), Err(Error::NoSuchSnapshot(_))));
    /// # Ok(()) }
    /// ```
    pub fn delete_snapshot(&self, name: &str) -> Result<()> {
        check_snapshot_name(name)?;
        let inner = &self.inner;
        let mut w = inner.log.writer.lock();
        w.begin_write()?;
        if !w.snapshots.contains_key(name) && !w.damaged_snapshots.contains_key(name) {
            return Err(Error::NoSuchSnapshot(name.to_string()));
        }
        snapshots::remove(inner.log.storage.as_ref(), name)?;
        w.snapshots.remove(name);
        w.damaged_snapshots.remove(name);
        inner.refresh_emptied(&mut w);
        inner.after_commit(&mut w)
    }

    /// A read-only view of snapshot `name`: lookups, scans, proofs and witnesses against the
    /// snapshot's roots, and [`ReadView::check`] to read and verify every page. Opening reads
    /// and checks the whole snapshot file (checksums, every directory against its root, the
    /// database root against the header): damage is [`Error::Corruption`].
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options};
    /// let db = Db::open_in_memory(Options::default())?;
    /// db.save_snapshot("genesis")?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// db.commit(batch.finish()?)?;
    /// let genesis = db.open_snapshot("genesis")?;
    /// assert_eq!((genesis.seq(), genesis.get(&[1u8; 32])?), (0, None));
    /// assert!(genesis.check(&mut |_, _| {})?.is_clean());
    /// assert!(matches!(db.open_snapshot("nope"), Err(Error::NoSuchSnapshot(_))));
    /// # Ok(()) }
    /// ```
    pub fn open_snapshot(&self, name: &str) -> Result<ReadView> {
        check_snapshot_name(name)?;
        let inner = &self.inner;
        let (header, pin, segment_blocks) = {
            let w = inner.log.writer.lock();
            if let Some(why) = w.damaged_snapshots.get(name) {
                return Err(Error::corruption(
                    snapshots::snapshot_file_name(name),
                    0,
                    why,
                ));
            }
            let header = w
                .snapshots
                .get(name)
                .cloned()
                .ok_or_else(|| Error::NoSuchSnapshot(name.to_string()))?;
            // Pinned under the writer lock: a deletion after this cannot free what the view
            // reads.
            let pin = inner.versions.pin(header.seq);
            (header, pin, w.table.segment_blocks)
        };
        let head = inner.head();
        let file = SnapshotFile::load(
            inner.log.storage.as_ref(),
            name,
            head.tables.arena(),
            inner.hasher,
            segment_blocks,
        )
        .map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::NoSuchSnapshot(name.to_string())
            }
            e => e,
        })?;
        if file.header != header {
            return Err(Error::corruption(
                snapshots::snapshot_file_name(name),
                0,
                "snapshot file changed since the database was opened",
            ));
        }
        let version = Arc::new(Version {
            id: inner.versions.next_id(),
            seq: header.seq,
            tables: file.tables,
            overlay: None,
        });
        Ok(ReadView::pinned(inner, version, pin))
    }

    /// Make snapshot `name` the latest version again, durably, as a new commit (like
    /// [`Db::rollback_to`], for any snapshot however old): every table as it was, tables
    /// created since dropped, tables dropped since back. Copies no data. The snapshot stays.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// db.save_snapshot("before")?;
    /// db.create_table("blocks", TableOptions::default())?;
    /// let info = db.restore_snapshot("before")?;
    /// assert_eq!(info.seq, 2); // a new commit
    /// assert_eq!(db.tables().len(), 1); // the table created since is gone
    /// assert_eq!(db.snapshots().len(), 1); // the snapshot stays
    /// # Ok(()) }
    /// ```
    pub fn restore_snapshot(&self, name: &str) -> Result<CommitInfo> {
        let _span = tracing::info_span!(target: "sprig", "sprig.snapshot.restore", name).entered();
        let view = self.open_snapshot(name)?;
        let mut w = self.inner.log.writer.lock();
        w.begin_write()?;
        if !w.snapshots.contains_key(name) {
            return Err(Error::NoSuchSnapshot(name.to_string()));
        }
        self.inner.make_latest(&mut w, &view.version)
    }
}
