//! The public database handle: opening (creation, recovery, read-only opens), the entry points
//! of every operation, and what the database says about itself (stats, recovery report, I/O
//! backend).
//!
//! Data flows one way: API → write paths (`write/`) → state + log → I/O backend. `Db` is
//! `Send + Sync`: any number of threads read through views while one commit runs; commits are
//! serialised by the writer lock, and a view never sees part of a commit because a version is
//! published only after its commit record is durable.

use crate::api::batch::Pending;
use crate::api::batch::WriteBatch;
use crate::api::table::{table_infos, Table, TableInfo, TableOptions};
use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::io::{self, MemoryStorage, Storage};
use crate::log::checkpoint::{parse_checkpoint_file_name, Checkpoint};
use crate::log::manifest::{Manifest, MANIFEST_FILE};
use crate::log::recovery::{recover, Access, RecoveryReport};
use crate::log::segments::{parse_segment_file_name, SegmentTable, Segments};
use crate::log::wal::{parse_wal_file_name, Wal};
use crate::log::writer::Writer;
use crate::log::Log;
use crate::options::Options;
use crate::state::cache::PageCache;
use crate::state::directory::Arena;
use crate::state::tables::Tables;
use crate::state::version::OverlayMemory;
use crate::state::version::Version;
use crate::state::versions::Versions;
use crate::stats::{Counters, Stats};
use crate::write::bulk::BUFFER_BYTES;
use crate::write::catalog::CatalogChange;
use crate::write::cleaner::CleanMode;
use crate::write::engine::Inner;
use crate::write::import::ImportTarget;
use crate::write::{BulkOptions, BulkProgress, BulkReport, CommitInfo, ImportOptions};
use parking_lot::Mutex;
use sprig_core::trie::{KeyPath, Node};
use sprig_core::Hasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A handle on an open database. Cheap to clone; every clone shares the same state.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use sprig::{Db, Options};
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?; // creates it if missing
/// let mut batch = db.begin();
/// batch.put(db.key_path(b"alice"), b"100".to_vec())?;
/// let info = db.commit(batch.finish()?)?; // durable when it returns
/// assert_eq!((info.seq, db.len()), (1, 1));
/// drop(db);
/// let db = Db::open(dir.path(), Options::default())?;
/// assert_eq!(db.root(), info.root);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

/// Take the database directory's lock: an exclusive lock on its `LOCK` file
/// ([`std::fs::File::try_lock`]: `flock` on unix, `LockFileEx` on Windows), held for as long
/// as the returned file is open. Another open of the directory, by this process or another,
/// gets [`Error::Locked`].
fn lock_directory(path: &Path) -> Result<std::fs::File> {
    let lock_path = path.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io("opening", lock_path.display().to_string(), e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(path.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::io("locking", lock_path.display().to_string(), e))
        }
    }
}

/// How many times a read-only open starts over when a writer in another process changed the
/// files under it (deleted a log or checkpoint it was reading, or committed past it).
const READ_ONLY_OPEN_ATTEMPTS: u32 = 5;

impl Db {
    /// Open the database in directory `path`, creating it if the options allow.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sprig::{Db, Error, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path().join("state"), Options::default())?; // created: it was missing
    /// assert!(db.is_empty());
    /// let no_create = Options { create_if_missing: false, ..Options::default() };
    /// let missing = Db::open(dir.path().join("other"), no_create);
    /// assert!(matches!(missing, Err(Error::NotFound(_))));
    /// # Ok(()) }
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let path = path.as_ref();
        let has_manifest = path.join(MANIFEST_FILE).exists();
        if !has_manifest && !options.create_if_missing {
            if !path.is_dir() {
                return Err(Error::NotFound(path.to_path_buf()));
            }
            let (storage, _) = io::open_directory_read_only(path, options.io_backend, false)?;
            return Err(missing_manifest(storage.as_ref())?
                .unwrap_or_else(|| Error::NotFound(path.to_path_buf())));
        }
        std::fs::create_dir_all(path)
            .map_err(|e| Error::io("creating", path.display().to_string(), e))?;
        let lock = lock_directory(path)?;
        let (storage, io) = io::open_directory(path, options.io_backend, options.direct_io)?;
        Db::open_inner(
            storage,
            io,
            options,
            Some(path.to_path_buf()),
            Some(lock),
            Access::ReadWrite,
        )
    }

    /// Open the database in `path` for reading only: no lock is taken and nothing is written,
    /// so it works on read-only media and while another process has the database open for
    /// writing. It sees the last commit durable when it opened (a later commit by another
    /// process is not seen; open again for it). Every write fails with [`Error::ReadOnly`].
    ///
    /// While another process writes, its cleaner may delete segment files this handle still
    /// reads, or give them to new segments ([`Options::recycled_segments`]): keep read-only
    /// handles short-lived there (a read then fails with an error naming the segment file, the
    /// file missing or its bytes not the page or value expected, never with wrong data).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sprig::{Db, Error, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put(db.key_path(b"k"), b"v".to_vec())?;
    /// db.commit(batch.finish()?)?;
    /// let reader = Db::open_read_only(dir.path(), Options::default())?; // while `db` is open
    /// assert_eq!(reader.view().get(&db.key_path(b"k"))?, Some(b"v".to_vec()));
    /// let refused = reader.commit(reader.begin().finish()?);
    /// assert!(matches!(refused, Err(Error::ReadOnly)));
    /// # Ok(()) }
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let path = path.as_ref();
        if !path.join(MANIFEST_FILE).exists() {
            if !path.is_dir() {
                return Err(Error::NotFound(path.to_path_buf()));
            }
            let (storage, _) = io::open_directory_read_only(path, options.io_backend, false)?;
            return Err(missing_manifest(storage.as_ref())?
                .unwrap_or_else(|| Error::NotFound(path.to_path_buf())));
        }
        let (storage, io) =
            io::open_directory_read_only(path, options.io_backend, options.direct_io)?;
        Db::open_read_only_inner(storage, io, options, Some(path.to_path_buf()))
    }

    /// [`Db::open_read_only`] on any storage backend.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{io::MemoryStorage, Db, Options};
    /// use std::sync::Arc;
    /// let storage = Arc::new(MemoryStorage::new());
    /// let db = Db::open_with_storage(storage.clone(), Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"v".to_vec())?;
    /// db.commit(batch.finish()?)?;
    /// let reader = Db::open_with_storage_read_only(storage, Options::default())?;
    /// assert!(reader.is_read_only());
    /// assert_eq!(reader.view().get(&[1u8; 32])?, Some(b"v".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn open_with_storage_read_only(storage: Arc<dyn Storage>, options: Options) -> Result<Db> {
        options.validate()?;
        let io = io::IoBackendInfo::of(storage.as_ref());
        Db::open_read_only_inner(storage, io, options, None)
    }

    fn open_read_only_inner(
        storage: Arc<dyn Storage>,
        io: io::IoBackendInfo,
        options: Options,
        path: Option<PathBuf>,
    ) -> Result<Db> {
        let options = Options {
            create_if_missing: false,
            ..options
        };
        let mut attempt = 1;
        loop {
            match Db::open_inner(
                storage.clone(),
                io.clone(),
                options.clone(),
                path.clone(),
                None,
                Access::ReadOnly,
            ) {
                Err(e) if attempt < READ_ONLY_OPEN_ATTEMPTS && raced_with_a_writer(&e) => {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => return other,
            }
        }
    }

    /// Create a new database in `path`; fails if one exists there.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sprig::{Db, Error, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::create(dir.path(), Options::default())?;
    /// drop(db);
    /// let again = Db::create(dir.path(), Options::default());
    /// assert!(matches!(again, Err(Error::AlreadyExists(_))));
    /// # Ok(()) }
    /// ```
    pub fn create(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let path = path.as_ref();
        if path.join(MANIFEST_FILE).exists() {
            return Err(Error::AlreadyExists(path.to_path_buf()));
        }
        Db::open(
            path,
            Options {
                create_if_missing: true,
                ..options
            },
        )
    }

    /// A database that lives only in memory.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options};
    /// let db = Db::open_in_memory(Options::default())?;
    /// assert_eq!((db.seq(), db.len(), db.path()), (0, 0, None));
    /// assert_eq!(db.io_backend().name, "memory");
    /// # Ok(()) }
    /// ```
    pub fn open_in_memory(options: Options) -> Result<Db> {
        Db::open_with_storage(Arc::new(MemoryStorage::new()), options)
    }

    /// Open a database on any storage backend (for tests, fault injection and simulation).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{io::MemoryStorage, Db, Options};
    /// use std::sync::Arc;
    /// let storage = Arc::new(MemoryStorage::new());
    /// let db = Db::open_with_storage(storage.clone(), Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"v".to_vec())?;
    /// let info = db.commit(batch.finish()?)?;
    /// drop(db);
    /// let db = Db::open_with_storage(storage, Options::default())?; // the same files again
    /// assert_eq!(db.root(), info.root);
    /// # Ok(()) }
    /// ```
    pub fn open_with_storage(storage: Arc<dyn Storage>, options: Options) -> Result<Db> {
        options.validate()?;
        let io = io::IoBackendInfo::of(storage.as_ref());
        Db::open_inner(storage, io, options, None, None, Access::ReadWrite)
    }

    fn open_inner(
        storage: Arc<dyn Storage>,
        io: io::IoBackendInfo,
        options: Options,
        path: Option<PathBuf>,
        lock: Option<std::fs::File>,
        access: Access,
    ) -> Result<Db> {
        let _span = tracing::info_span!(target: "sprig", "sprig.open", db = %options.metrics_name)
            .entered();
        let manifest = match Manifest::load(storage.as_ref())? {
            Some(m) => {
                if let Some(requested) = options.hasher {
                    if requested != m.hasher {
                        return Err(Error::HasherMismatch {
                            stored: m.hasher,
                            requested,
                        });
                    }
                }
                m
            }
            None => {
                if let Some(e) = missing_manifest(storage.as_ref())? {
                    return Err(e);
                }
                if !options.create_if_missing || access == Access::ReadOnly {
                    return Err(Error::NotFound(path.unwrap_or_default()));
                }
                create_files(storage.as_ref(), &options)?
            }
        };
        let recovered = recover(
            storage.as_ref(),
            &manifest,
            options.retained_versions,
            access,
        )?;
        if recovered.table.segment_blocks != manifest.segment_blocks {
            return Err(Error::corruption(
                crate::log::checkpoint::checkpoint_file_name(recovered.checkpoint_seq),
                0,
                "the checkpoint's segment size is not the manifest's",
            ));
        }
        let mut snapshots = std::collections::VecDeque::new();
        let mut history: Vec<Arc<Version>> = Vec::new();
        for (tables, snapshot) in recovered.history {
            history.push(Arc::new(Version {
                id: history.len() as u64,
                seq: snapshot.seq,
                tables,
                overlay: None,
            }));
            snapshots.push_back(snapshot);
        }
        if history.is_empty() {
            history.push(Arc::new(Version {
                id: 0,
                seq: 0,
                tables: Tables::empty(&recovered.arena, manifest.hasher),
                overlay: None,
            }));
        }
        // A writer must be able to resolve every table's upserts.
        if access == Access::ReadWrite {
            if let Some(latest) = history.last() {
                for def in latest.tables.defs() {
                    if let Some(r) = def.resolver {
                        if options.resolvers.get(&r).is_none() {
                            return Err(Error::ResolverMissing {
                                table: def.name,
                                resolver: r,
                            });
                        }
                    }
                }
            }
        }
        let next_id = history.len() as u64;
        let versions = Versions::new(history, options.retained_versions, next_id)?;
        let (named, damaged) = crate::log::snapshots::load_all(
            storage.as_ref(),
            manifest.hasher,
            manifest.segment_blocks,
        )?;
        let mut writer = Writer::new(
            recovered.table,
            recovered.wal,
            recovered.checkpoint_seq,
            snapshots,
        );
        writer.snapshots = named;
        writer.damaged_snapshots = damaged;
        let counters = Counters::new(&options.metrics_name);
        let overlay_memory = Arc::new(OverlayMemory::with_gauges(
            counters.metrics.overlay_bytes.clone(),
            counters.metrics.overlays.clone(),
        ));
        crate::state::blocks::allow(options.page_cache_bytes);
        let segments = Segments::new(storage.clone(), manifest.hasher, manifest.segment_blocks);
        // A large load reads on every core at once (`write/read.rs`): buffers are kept for up
        // to 8 of them (16 MiB at most); more cores allocate the rest.
        segments.keep_read_buffers_for(crate::write::cores::cores().min(8));
        // A writer keeps emptied segment files for new segments; a reader never deletes any.
        if access == Access::ReadWrite {
            let names = storage
                .list()
                .map_err(|e| Error::io("listing", "the database directory", e))?;
            segments.recycle_up_to(&names, options.recycled_segments);
        }
        let inner = Inner {
            path,
            hasher: manifest.hasher,
            log: Log {
                segments: Arc::new(segments),
                storage,
                sync: options.sync,
                writer: Mutex::new(writer),
                read_ahead: Default::default(),
            },
            cache: PageCache::new(options.page_cache_bytes),
            counters,
            versions,
            overlay_memory,
            recovery: recovered.report,
            options,
            io,
            _lock: lock,
        };
        let db = Db {
            inner: Arc::new(inner),
        };
        {
            let mut w = db.inner.log.writer.lock();
            db.inner.refresh_emptied(&mut w);
            // Segments no version opened here needs (emptied under a longer retention, or
            // before a crash) go now rather than after the next commit.
            if access == Access::ReadWrite {
                db.inner.delete_unneeded_segments(&mut w)?;
            }
            db.inner.record_gauges(&w);
        }
        for finding in db.inner.recovery.findings() {
            tracing::warn!(target: "sprig", db = %db.inner.options.metrics_name, "recovery: {finding}");
        }
        Ok(db)
    }

    /// What opening the database found: a lost log tail (a commit in flight at a crash, or
    /// unsynced commits lost to a power loss), repaired records, leftovers removed. See
    /// [`RecoveryReport::findings`].
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{io::MemoryStorage, Db, Options};
    /// use std::sync::Arc;
    /// let storage = Arc::new(MemoryStorage::new());
    /// let db = Db::open_with_storage(storage.clone(), Options::default())?;
    /// db.commit(db.begin().finish()?)?;
    /// drop(db);
    /// let db = Db::open_with_storage(storage, Options::default())?;
    /// let report = db.recovery();
    /// assert_eq!((report.seq, report.records_replayed), (1, 1));
    /// assert!(report.is_clean() && report.findings().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// Whether the database was opened read-only.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{io::MemoryStorage, Db, Options};
    /// use std::sync::Arc;
    /// let storage = Arc::new(MemoryStorage::new());
    /// let db = Db::open_with_storage(storage.clone(), Options::default())?;
    /// assert!(!db.is_read_only());
    /// let reader = Db::open_with_storage_read_only(storage, Options::default())?;
    /// assert!(reader.is_read_only());
    /// # Ok(()) }
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.inner
            .log
            .writer
            .lock()
            .check_writable()
            .is_err_and(|e| matches!(e, Error::ReadOnly))
    }

    /// The hasher of this database.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Hasher, Options};
    /// let db = Db::open_in_memory(Options::default())?;
    /// assert_eq!(db.hasher(), Hasher::Blake3); // the default
    /// let keccak = Options { hasher: Some(Hasher::Keccak256), ..Options::default() };
    /// assert_eq!(Db::open_in_memory(keccak)?.hasher(), Hasher::Keccak256);
    /// # Ok(()) }
    /// ```
    pub fn hasher(&self) -> Hasher {
        self.inner.hasher
    }

    /// The key path of an arbitrary byte key: its hash with this database's hasher.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let alice = db.key_path(b"alice");
    /// assert_eq!(alice, sprig::core::key_path_of(db.hasher(), b"alice"));
    /// assert_ne!(alice, db.key_path(b"bob"));
    /// # Ok(()) }
    /// ```
    pub fn key_path(&self, key: &[u8]) -> KeyPath {
        sprig_core::key_path_of(self.inner.hasher, key)
    }

    /// The directory the database lives in (none for in-memory databases).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sprig::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// assert_eq!(db.path(), Some(dir.path()));
    /// assert_eq!(Db::open_in_memory(Options::default())?.path(), None);
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The options the database was opened with.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options};
    /// let db = Db::open_in_memory(Options { retained_versions: 8, ..Options::default() })?;
    /// assert_eq!(db.options().retained_versions, 8);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The I/O backend in use, which may not be the one the options asked for: where the
    /// kernel refuses io_uring, [`crate::IoBackend::IoUring`] runs on posix and this says
    /// why; where the file system refuses `O_DIRECT`, I/O is buffered and this says why.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sprig::{Db, IoBackend, Options};
    /// let dir = tempfile::tempdir()?;
    /// let posix = Options { io_backend: IoBackend::Posix, ..Options::default() };
    /// let db = Db::open(dir.path(), posix)?;
    /// let io = db.io_backend();
    /// assert_eq!((io.name, io.io_uring_refused.as_deref()), ("posix", None));
    /// println!("{io}"); // e.g. "posix, direct I/O"
    /// # Ok(()) }
    /// ```
    pub fn io_backend(&self) -> &io::IoBackendInfo {
        &self.inner.io
    }

    /// A read view of the latest committed version.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"v".to_vec())?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// assert_eq!(view.seq(), 1);
    /// assert_eq!(view.get(&[1u8; 32])?, Some(b"v".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> ReadView {
        let (version, pin) = self.inner.versions.pinned_head();
        ReadView::pinned(&self.inner, version, pin)
    }

    /// A read view of a retained committed version (see `Options::retained_versions`).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// for value in ["one", "two"] {
    ///     let mut batch = db.begin();
    ///     batch.put([1u8; 32], value)?;
    ///     db.commit(batch.finish()?)?;
    /// }
    /// assert_eq!(db.view_at(1)?.get(&[1u8; 32])?, Some(b"one".to_vec()));
    /// assert!(matches!(db.view_at(7), Err(sprig::Error::NotRetained { seq: 7, .. })));
    /// # Ok(()) }
    /// ```
    pub fn view_at(&self, seq: u64) -> Result<ReadView> {
        let (version, pin) = self.inner.versions.pinned_version(seq)?;
        Ok(ReadView::pinned(&self.inner, version, pin))
    }

    /// The retained committed versions, oldest first, as (sequence number, root).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let options = sprig::Options { retained_versions: 2, ..sprig::Options::default() };
    /// let db = sprig::Db::open_in_memory(options)?;
    /// for i in 1u8..=3 {
    ///     let mut batch = db.begin();
    ///     batch.put([i; 32], b"v".to_vec())?;
    ///     db.commit(batch.finish()?)?;
    /// }
    /// let seqs: Vec<u64> = db.versions().iter().map(|(seq, _)| *seq).collect();
    /// assert_eq!(seqs, [2, 3]);
    /// assert_eq!(db.versions()[1].1, db.root());
    /// # Ok(()) }
    /// ```
    pub fn versions(&self) -> Vec<(u64, Node)> {
        self.inner.versions.retained_roots()
    }

    /// Start a batch of reads and changes on the latest version.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// assert_eq!(batch.base_seq(), 0);
    /// batch.put([1u8; 32], b"v".to_vec())?;
    /// assert_eq!(db.len(), 0); // not applied until committed
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn begin(&self) -> WriteBatch {
        let (head, pin) = self.inner.versions.pinned_head();
        WriteBatch::pinned(self.inner.clone(), head, pin)
    }

    /// Make a finished batch (an overlay) durable and the latest version, committing its
    /// uncommitted ancestor overlays first. Fails if another commit happened since the batch
    /// began (usually [`Error::Superseded`]: the database reached the batch's sequence number
    /// first; [`Error::Stale`] if its base is otherwise not the latest version), and with an
    /// error naming the overlay if it was discarded.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let (mut a, mut b) = (db.begin(), db.begin()); // both on version 0
    /// a.put([1u8; 32], b"a".to_vec())?;
    /// b.put([2u8; 32], b"b".to_vec())?;
    /// let (a, b) = (a.finish()?, b.finish()?);
    /// let info = db.commit(a)?;
    /// assert_eq!((info.seq, info.root), (1, db.root()));
    /// let stale = db.commit(b); // its base is no longer the latest version
    /// assert!(matches!(stale, Err(sprig::Error::Superseded { .. })));
    /// # Ok(()) }
    /// ```
    pub fn commit(&self, pending: Pending) -> Result<CommitInfo> {
        if !Arc::ptr_eq(&pending.inner, &self.inner) {
            return Err(Error::Foreign("the batch belongs to another database"));
        }
        self.inner.commit(pending.into_version(), CleanMode::Auto)
    }

    /// Run the cleaner now: copy the live data of sealed segments that are at most half live
    /// forward (a bounded amount per call), so their files can be deleted. Returns what it did,
    /// or `None` if no segment needed cleaning.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options};
    /// let options = Options { segment_bytes: 1 << 20, auto_clean: false, ..Options::default() };
    /// let db = Db::open_in_memory(Options { retained_versions: 1, ..options })?;
    /// assert!(db.clean()?.is_none()); // nothing to clean yet
    /// # let keys: Vec<_> = (0u32..6000).map(|i| db.key_path(&i.to_le_bytes())).collect();
    /// # for round in 0..2 {
    /// #     let mut batch = db.begin();
    /// #     for k in keys.iter().filter(|k| round == 0 || k[0] % 4 != 3) {
    /// #         batch.put(*k, vec![round; 500])?;
    /// #     }
    /// #     db.commit(batch.finish()?)?;
    /// # }
    /// // 6,000 keys written, then 3 pages in 4 rewritten: the old segments are 1/4 live
    /// let info = db.clean()?.expect("segments at most half live");
    /// assert!(info.pages_relocated > 0);
    /// # Ok(()) }
    /// ```
    pub fn clean(&self) -> Result<Option<CommitInfo>> {
        if !self.inner.has_cleaning_work() {
            return Ok(None);
        }
        let pending = self.begin().finish()?;
        self.inner
            .commit(pending.into_version(), CleanMode::Explicit)
            .map(Some)
    }

    /// The default table's latest root: the state root of a database without other tables,
    /// bit-for-bit NOMT's.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// assert_eq!(db.root(), [0u8; 32]); // the empty trie
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"v".to_vec())?;
    /// let info = db.commit(batch.finish()?)?;
    /// assert_eq!(db.root(), info.root);
    /// # Ok(()) }
    /// ```
    pub fn root(&self) -> Node {
        self.inner.head().tables.default_dir().root_node()
    }

    /// The latest database root: the root of every table's root (see
    /// [`sprig_core::tables`]).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// db.create_table("accounts", TableOptions::default())?;
    /// let tables = db.tables(); // every table's name and root
    /// let roots = tables.iter().map(|t| (t.table.name(), t.root));
    /// assert_eq!(db.db_root(), sprig::core::database_root(db.hasher(), roots));
    /// # Ok(()) }
    /// ```
    pub fn db_root(&self) -> Node {
        self.inner.head().tables.db_root()
    }

    /// The latest commit's sequence number.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// assert_eq!(db.seq(), 0);
    /// db.commit(db.begin().finish()?)?;
    /// db.commit(db.begin().finish()?)?; // an empty batch is a commit too
    /// assert_eq!(db.seq(), 2);
    /// # Ok(()) }
    /// ```
    pub fn seq(&self) -> u64 {
        self.inner.head().seq
    }

    /// The number of entries in the latest version's default table (O(1)).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"a".to_vec())?;
    /// batch.put([2u8; 32], b"b".to_vec())?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> u64 {
        self.inner.head().tables.default_dir().len()
    }

    /// Whether the latest version holds no entry.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// assert!(db.is_empty());
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"a".to_vec())?;
    /// db.commit(batch.finish()?)?;
    /// assert!(!db.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Write a checkpoint now: of the oldest retained version, so that the next open replays
    /// only the commit records of the retained versions (and every one of them survives).
    /// Returns once it is durable, after waiting for an automatic checkpoint still being
    /// written in the background (see [`crate::Options::background_checkpoints`]), whose
    /// failure it returns.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sprig::{Db, Options};
    /// let dir = tempfile::tempdir()?;
    /// let options = Options { retained_versions: 1, ..Options::default() };
    /// let db = Db::open(dir.path(), options.clone())?;
    /// db.commit(db.begin().finish()?)?;
    /// db.checkpoint()?;
    /// drop(db);
    /// let db = Db::open(dir.path(), options)?;
    /// assert_eq!((db.recovery().checkpoint_seq, db.recovery().records_replayed), (1, 0));
    /// # Ok(()) }
    /// ```
    pub fn checkpoint(&self) -> Result<()> {
        let mut w = self.inner.log.writer.lock();
        self.inner.checkpoint_locked(&mut w, false)
    }

    /// Counters and sizes.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], b"v".to_vec())?;
    /// db.commit(batch.finish()?)?;
    /// let stats = db.stats();
    /// assert_eq!((stats.commits, stats.entries, stats.seq), (1, 1, 1));
    /// assert!(stats.pages_written > 0);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> Stats {
        let mut s = self.inner.counters.snapshot();
        let head = self.inner.head();
        s.entries = head.tables.total_len();
        s.seq = head.seq;
        // Kept by each directory as it changes: no walk of the pages.
        s.pages = head.tables.dirs().map(|(_, dir)| dir.page_count()).sum();
        let arena = head.tables.arena();
        s.directory_bytes = arena.live_bytes();
        s.directory_slot_bytes = arena.slot_bytes();
        s.directory_nodes = {
            let (branches, pages) = arena.live();
            branches + pages
        };
        s.cached_pages = self.inner.cache.len() as u64;
        s.overlay_bytes = self.inner.overlay_memory.bytes();
        s.overlays = self.inner.overlay_memory.count();
        s.retained_versions = self.inner.versions.retained_count() as u64;
        s.io_backend = self.inner.io.clone();
        (s.spare_segment_files, s.segment_files_recycled) =
            self.inner.log.segments.recycled_files();
        let w = self.inner.log.writer.lock();
        s.disk_bytes = w.table.used_blocks() * io::BLOCK_BYTES as u64;
        s.live_bytes = w.table.live_blocks() * io::BLOCK_BYTES as u64;
        s.retained_bytes = w.table.retained_blocks() * io::BLOCK_BYTES as u64;
        s
    }
}

/// Tables: each its own key space and root, all committed together (see
/// [`sprig_core::tables`] for the database root over them).
impl Db {
    /// Create an empty table `name`, as a commit of its own (overlays built on the previous
    /// version become stale, as after any commit). Its resolver (see [`crate::resolve`]) must
    /// be a built-in or registered with this handle's options.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let accounts = db.create_table("accounts", TableOptions::default())?;
    /// assert_eq!(db.seq(), 1); // a commit of its own
    /// assert_eq!(db.table("accounts")?, accounts);
    /// let again = db.create_table("accounts", TableOptions::default());
    /// assert!(matches!(again, Err(Error::TableExists(_))));
    /// # Ok(()) }
    /// ```
    pub fn create_table(&self, name: &str, options: TableOptions) -> Result<Table> {
        let (_, id) = self.inner.change_catalog(CatalogChange::Create {
            name: name.to_string(),
            resolver: options.resolver,
        })?;
        Ok(Table {
            id,
            name: Arc::from(name),
        })
    }

    /// Drop table `name` and its entries, as a commit of its own. Its space is reclaimed once
    /// no retained version holds it; rolling back to a version before the drop brings it
    /// back. The default table cannot be dropped.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// db.create_table("scratch", TableOptions::default())?;
    /// let info = db.drop_table("scratch")?;
    /// assert_eq!(info.seq, 2);
    /// assert!(matches!(db.table("scratch"), Err(Error::NoSuchTable(_))));
    /// assert!(matches!(db.drop_table("default"), Err(Error::DefaultTable)));
    /// # Ok(()) }
    /// ```
    pub fn drop_table(&self, name: &str) -> Result<CommitInfo> {
        self.inner
            .change_catalog(CatalogChange::Drop {
                name: name.to_string(),
            })
            .map(|(info, _)| info)
    }

    /// The table named `name` in the latest version.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options, Table};
    /// let db = Db::open_in_memory(Options::default())?;
    /// assert_eq!(db.table("default")?, Table::default_table());
    /// assert!(matches!(db.table("nope"), Err(Error::NoSuchTable(_))));
    /// # Ok(()) }
    /// ```
    pub fn table(&self, name: &str) -> Result<Table> {
        Table::named(&self.inner.head().tables, name)
    }

    /// Every table of the latest version, the default table first.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// db.create_table("balances", TableOptions::resolver("add-u64"))?;
    /// let tables = db.tables();
    /// let names: Vec<&str> = tables.iter().map(|t| t.table.name()).collect();
    /// assert_eq!(names, ["default", "balances"]);
    /// assert_eq!(tables[1].resolver.as_deref(), Some("add-u64"));
    /// # Ok(()) }
    /// ```
    pub fn tables(&self) -> Vec<TableInfo> {
        table_infos(&self.inner.head().tables)
    }
}

/// Whole-database writes: bulk loads, imports of sorted streams, rollbacks.
impl Db {
    /// Fill an empty database from `items` (any order; a repeated key keeps its last value),
    /// much faster than commits. The result is durable and visible only when this returns;
    /// a crash before leaves the database empty.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let items = (0u32..1000).map(|i| (db.key_path(&i.to_le_bytes()), i.to_le_bytes().to_vec()));
    /// let report = db.bulk_load(items, &mut |_progress| {})?;
    /// assert_eq!((report.entries, db.len(), db.seq()), (1000, 1000, 1));
    /// assert_eq!(report.root, db.root());
    /// # Ok(()) }
    /// ```
    pub fn bulk_load<I>(
        &self,
        items: I,
        progress: &mut dyn FnMut(BulkProgress),
    ) -> Result<BulkReport>
    where
        I: IntoIterator<Item = (KeyPath, Vec<u8>)>,
    {
        self.inner
            .bulk_load_buffered(items.into_iter().map(Ok), progress, BUFFER_BYTES)
    }

    /// [`Db::bulk_load`] from a source that can fail (a file being parsed, say): the first
    /// error stops the load before anything is published, leaves the database empty and
    /// usable, and is returned.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let garbled = Error::InvalidArgument("line 2 is garbled".into());
    /// let bad = vec![Ok(([1u8; 32], b"a".to_vec())), Err(garbled)];
    /// assert!(db.try_bulk_load(bad, &mut |_| {}).is_err());
    /// assert!(db.is_empty()); // nothing published, and the database is still usable
    /// let good = vec![Ok(([1u8; 32], b"a".to_vec()))];
    /// assert_eq!(db.try_bulk_load(good, &mut |_| {})?.entries, 1);
    /// # Ok(()) }
    /// ```
    pub fn try_bulk_load<I>(
        &self,
        items: I,
        progress: &mut dyn FnMut(BulkProgress),
    ) -> Result<BulkReport>
    where
        I: IntoIterator<Item = Result<(KeyPath, Vec<u8>)>>,
    {
        self.inner.bulk_load_buffered(items, progress, BUFFER_BYTES)
    }

    /// [`Db::try_bulk_load`] with options: the input buffer, and the number of items the
    /// source must hold.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{BulkOptions, Db, Error, Options};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let items = || (1u8..=2).map(|i| Ok(([i; 32], vec![i])));
    /// let three = BulkOptions { expected_items: Some(3), ..BulkOptions::default() };
    /// let short = db.bulk_load_with(items(), &three, &mut |_| {});
    /// assert!(matches!(short, Err(Error::CountMismatch { expected: 3, received: 2 })));
    /// let two = BulkOptions { expected_items: Some(2), ..BulkOptions::default() };
    /// assert_eq!(db.bulk_load_with(items(), &two, &mut |_| {})?.entries, 2);
    /// # Ok(()) }
    /// ```
    pub fn bulk_load_with<I>(
        &self,
        items: I,
        options: &BulkOptions,
        progress: &mut dyn FnMut(BulkProgress),
    ) -> Result<BulkReport>
    where
        I: IntoIterator<Item = Result<(KeyPath, Vec<u8>)>>,
    {
        let _span = tracing::info_span!(target: "sprig", "sprig.bulk_load").entered();
        let buffer_bytes = usize::try_from(options.buffer_bytes).unwrap_or(usize::MAX);
        self.inner
            .bulk_load_checked(items, progress, buffer_bytes, options.expected_items)
    }

    /// Apply `changes` — sorted by key path, each key at most once; a value sets the key,
    /// `None` deletes it — to the latest version as ONE commit, with memory bounded by
    /// `options.memory_bytes` whatever the number of changes (a [`WriteBatch`] holds about a
    /// page per changed key until it commits).
    ///
    /// Atomic like a commit: the new version is durable and published when this returns, and
    /// an error or a crash before leaves the previous one. The first error of `changes` stops
    /// the import and is returned; so are keys out of order or repeated
    /// ([`Error::InvalidArgument`]) and values above [`crate::MAX_VALUE_BYTES`]. No witness is
    /// made and the cleaner does not run. The writer is held throughout: other commits wait
    /// (so `changes` must not commit to this database itself), and overlays built on the
    /// previous version become stale.
    ///
    /// [`WriteBatch`]: crate::WriteBatch
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, ImportOptions, Options};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let (a, b) = ([1u8; 32], [2u8; 32]);
    /// let changes = vec![Ok((a, Some(b"x".to_vec()))), Ok((b, Some(b"y".to_vec())))];
    /// let info = db.import_sorted(changes, &ImportOptions::default())?;
    /// assert_eq!((info.seq, db.len()), (1, 2));
    /// db.import_sorted(vec![Ok((a, None))], &ImportOptions::default())?; // a deletion
    /// assert_eq!(db.view().get(&a)?, None);
    /// let unsorted = vec![Ok((b, None)), Ok((a, None))];
    /// let refused = db.import_sorted(unsorted, &ImportOptions::default());
    /// assert!(matches!(refused, Err(Error::InvalidArgument(_))));
    /// # Ok(()) }
    /// ```
    pub fn import_sorted<I>(&self, changes: I, options: &ImportOptions) -> Result<CommitInfo>
    where
        I: IntoIterator<Item = Result<(KeyPath, Option<Vec<u8>>)>>,
    {
        self.import_sorted_into(&Table::default_table(), changes, options)
    }

    /// [`Db::import_sorted`] into `table`.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, ImportOptions, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let utxo = db.create_table("utxo", TableOptions::default())?;
    /// let changes = (1u8..=3).map(|i| Ok(([i; 32], Some(vec![i]))));
    /// db.import_sorted_into(&utxo, changes, &ImportOptions::default())?;
    /// assert_eq!(db.view().len_in(&utxo)?, 3);
    /// assert!(db.is_empty()); // the default table is untouched
    /// # Ok(()) }
    /// ```
    pub fn import_sorted_into<I>(
        &self,
        table: &Table,
        changes: I,
        options: &ImportOptions,
    ) -> Result<CommitInfo>
    where
        I: IntoIterator<Item = Result<(KeyPath, Option<Vec<u8>>)>>,
    {
        let _span =
            tracing::info_span!(target: "sprig", "sprig.import", table = table.name()).entered();
        table.dir(&self.inner.head().tables)?;
        self.inner
            .import_sorted(ImportTarget::Existing(table.id), changes, options)
    }

    /// Make the retained version `seq` the latest again, durably, as a new commit. Fails if
    /// `seq` is not retained (see `Options::retained_versions`). Rolling back to the latest
    /// version does nothing.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// for value in ["one", "two"] {
    ///     let mut batch = db.begin();
    ///     batch.put([1u8; 32], value)?;
    ///     db.commit(batch.finish()?)?;
    /// }
    /// let info = db.rollback_to(1)?;
    /// assert_eq!(info.seq, 3); // a new commit, with version 1's state
    /// assert_eq!(db.view().get(&[1u8; 32])?, Some(b"one".to_vec()));
    /// assert!(matches!(db.rollback_to(9), Err(sprig::Error::NotRetained { .. })));
    /// # Ok(()) }
    /// ```
    pub fn rollback_to(&self, seq: u64) -> Result<CommitInfo> {
        let _span = tracing::info_span!(target: "sprig", "sprig.rollback", seq).entered();
        self.inner.rollback_to(seq)
    }
}

/// Write the files of a new, empty database: log, checkpoint, then the manifest last (its
/// presence is what makes the directory a database).
fn create_files(storage: &dyn Storage, options: &Options) -> Result<Manifest> {
    let hasher = options.hasher.unwrap_or_default();
    let manifest = Manifest {
        hasher,
        segment_blocks: options.segment_blocks(),
        created_unix_secs: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    Wal::create(storage, 1)?;
    Checkpoint {
        seq: 0,
        wal_id: 1,
        wal_offset: 0,
        durable_seq: 0,
        table: SegmentTable::new(manifest.segment_blocks),
        tables: Tables::empty(&Arena::new(), hasher),
    }
    .store(storage)?;
    manifest.store(storage)?;
    Ok(manifest)
}

/// The error for a directory that holds a database's files but no manifest (deleted or lost):
/// corruption, never "no database here" (which would invite creating a new one over it).
///
/// The manifest is written last when a database is created, so the empty first log and
/// checkpoint alone are a creation that never finished: no database, created anew over them.
/// Anything a database only has once it was used (a segment, a later checkpoint or log, a
/// record in the first log) means the manifest was lost.
fn missing_manifest(storage: &dyn Storage) -> Result<Option<Error>> {
    let names = match storage.list() {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("listing", "the database directory", e)),
    };
    let mut ours = 0usize;
    for name in &names {
        let used = match (
            parse_checkpoint_file_name(name),
            parse_wal_file_name(name),
            parse_segment_file_name(name),
        ) {
            (Some(seq), _, _) => seq > 0,
            (_, Some(1), _) => {
                let file = storage
                    .open(
                        name,
                        io::OpenOptions {
                            create: false,
                            direct: false,
                        },
                    )
                    .map_err(|e| Error::io("opening", name, e))?;
                file.size().map_err(|e| Error::io("reading", name, e))? > 0
            }
            (_, Some(_), _) | (_, _, Some(_)) => true,
            _ => false,
        };
        ours += usize::from(used);
    }
    Ok((ours > 0).then(|| {
        Error::corruption(
            MANIFEST_FILE,
            0,
            format!(
                "the manifest is missing, but the directory holds {ours} files of a Sprig                  database (logs, checkpoints, segments): it was deleted or lost"
            ),
        )
    }))
}

/// Whether a failed read-only open may have raced with a writer in another process: a file
/// it listed was deleted (a log or checkpoint superseded) before it was read.
fn raced_with_a_writer(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}
