//! The public database handle: opening and recovery, read views pinned to a committed version,
//! and the shared machinery every operation uses to load pages and values.
//!
//! Data flows one way: API → commit pipeline (`commit.rs`) → directory + log → I/O backend.
//! `Db` is `Send + Sync`: any number of threads read through views while one commit runs;
//! commits are serialised by the writer lock, and a view never sees part of a commit because
//! a version is published only after its commit record is durable.

use crate::cache::PageCache;
use crate::directory::{DirNode, Directory, PageLoc, PageRef};
use crate::error::{Error, Result};
use crate::io::{self, MemoryStorage, Storage};
use crate::log::checkpoint::{parse_checkpoint_file_name, Checkpoint};
use crate::log::manifest::{Manifest, MANIFEST_FILE};
use crate::log::recovery::{recover, Access, RecoveryReport, Snapshot};
use crate::log::segments::{decode_page_at, parse_segment_file_name, SegmentTable, Segments};
use crate::log::wal::{parse_wal_file_name, Wal};
use crate::options::Options;
use crate::overlay::{OverlayMemory, OverlayState};
use crate::page::{Page, ValueRef};
use crate::prefix::Prefix;
use crate::stats::{Counters, ReadKind, Stats};
use parking_lot::{Mutex, RwLock};
use sprig_core::proof::{MultiProof, PathProof};
use sprig_core::trie::{KeyPath, Node};
use sprig_core::{Hasher, Witness};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A version of the state: committed, or an overlay of uncommitted changes.
pub(crate) struct Version {
    /// Unique among the versions of this database handle: what a commit checks it builds on.
    pub id: u64,
    /// The commit sequence number (0 for the empty database); for an overlay, the number it
    /// gets when committed.
    pub seq: u64,
    /// The directory of this version.
    pub dir: Directory,
    /// For overlays: what they change and their parent.
    pub overlay: Option<OverlayState>,
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Version")
            .field("id", &self.id)
            .field("seq", &self.seq)
            .field("overlay", &self.overlay.is_some())
            .finish()
    }
}

/// State owned by the single writer.
pub(crate) struct Writer {
    pub table: SegmentTable,
    /// The log appended to; none when the database was opened read-only.
    log: Option<Wal>,
    /// The sequence number of the latest checkpoint file.
    pub checkpoint_seq: u64,
    /// One snapshot per retained version, oldest first (the same versions as
    /// `Inner::retained`): checkpoints are taken of the oldest, so that every retained
    /// version survives a reopen.
    pub history: std::collections::VecDeque<Snapshot>,
    /// Set after a failed write or sync: no more writes until reopened.
    pub poisoned: Option<String>,
    /// Segments with no live data, and the commit after which they became empty.
    pub emptied: BTreeMap<u32, u64>,
    /// Every record appended so far is durable (the log was synced since the last append), so
    /// the next record may claim that every record before it is durable.
    pub log_durable: bool,
}

impl Writer {
    /// Fail unless writes are allowed: the database is not read-only and no earlier write
    /// failure poisoned it.
    pub fn check_writable(&self) -> Result<()> {
        if self.log.is_none() {
            return Err(Error::ReadOnly);
        }
        if let Some(reason) = &self.poisoned {
            return Err(Error::Poisoned(reason.clone()));
        }
        Ok(())
    }

    /// The log, for a writable database.
    pub fn wal(&mut self) -> Result<&mut Wal> {
        self.log.as_mut().ok_or(Error::ReadOnly)
    }

    /// Replace the log (after a rotation or a bulk load); returns the old one.
    pub fn replace_wal(&mut self, wal: Wal) -> Option<Wal> {
        self.log.replace(wal)
    }

    /// Where the log stands: (file id, end of the last record).
    pub fn log_position(&self) -> Result<(u32, u64)> {
        let wal = self.log.as_ref().ok_or(Error::ReadOnly)?;
        Ok((wal.id(), wal.end()))
    }
}

pub(crate) struct Inner {
    pub path: Option<PathBuf>,
    pub options: Options,
    pub hasher: Hasher,
    pub storage: Arc<dyn Storage>,
    /// What `storage` really is (see [`Db::io_backend`]).
    pub io: io::IoBackendInfo,
    pub segments: Segments,
    pub cache: PageCache,
    pub counters: Counters,
    head: RwLock<Arc<Version>>,
    pub writer: Mutex<Writer>,
    pins: Mutex<BTreeMap<u64, usize>>,
    /// The last committed versions kept for historical reads and rollback, oldest first.
    /// Their pages count as pinned (see [`Inner::oldest_pinned`]).
    pub retained: Mutex<std::collections::VecDeque<Arc<Version>>>,
    next_id: std::sync::atomic::AtomicU64,
    pub overlay_memory: Arc<OverlayMemory>,
    /// What opening the database found.
    pub recovery: RecoveryReport,
    _lock: Option<std::fs::File>,
}

/// A handle on an open database. Cheap to clone; every clone shares the same state.
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

/// Keeps a version's pages from being deleted while something reads it.
///
/// A pin must be registered while the version cannot lose its last protection: a version
/// read from the head or the retained list is pinned under that lock
/// ([`Inner::pinned_head`], [`Inner::pinned_version`]); [`Pin::new`] alone is for versions
/// something already pins (an overlay, a view, a batch).
pub(crate) struct Pin {
    inner: Arc<Inner>,
    seq: u64,
}

impl Pin {
    pub fn new(inner: &Arc<Inner>, seq: u64) -> Pin {
        *inner.pins.lock().entry(seq).or_default() += 1;
        Pin {
            inner: inner.clone(),
            seq,
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        let mut pins = self.inner.pins.lock();
        if let Some(n) = pins.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                pins.remove(&self.seq);
            }
        }
    }
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
    /// reads: keep read-only handles short-lived there (a read then fails with an I/O error,
    /// never with wrong data).
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
    pub fn open_in_memory(options: Options) -> Result<Db> {
        Db::open_with_storage(Arc::new(MemoryStorage::new()), options)
    }

    /// Open a database on any storage backend (for tests, fault injection and simulation).
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
        let next_id = std::sync::atomic::AtomicU64::new(1);
        let mut snapshots = std::collections::VecDeque::new();
        let mut history: Vec<Arc<Version>> = Vec::new();
        for (dir, snapshot) in recovered.history {
            history.push(Arc::new(Version {
                id: next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                seq: snapshot.seq,
                dir,
                overlay: None,
            }));
            snapshots.push_back(snapshot);
        }
        let head = history.pop().unwrap_or_else(|| {
            Arc::new(Version {
                id: 0,
                seq: 0,
                dir: Directory::empty(manifest.hasher),
                overlay: None,
            })
        });
        let inner = Inner {
            path,
            hasher: manifest.hasher,
            segments: Segments::new(storage.clone(), manifest.hasher, manifest.segment_blocks),
            cache: PageCache::new(options.page_cache_bytes),
            counters: Counters::default(),
            head: RwLock::new(head.clone()),
            writer: Mutex::new(Writer {
                table: recovered.table,
                log: recovered.wal,
                checkpoint_seq: recovered.checkpoint_seq,
                history: snapshots,
                poisoned: None,
                emptied: BTreeMap::new(),
                log_durable: true,
            }),
            pins: Mutex::new(BTreeMap::new()),
            retained: Mutex::new(std::collections::VecDeque::new()),
            next_id,
            overlay_memory: Arc::new(OverlayMemory::default()),
            recovery: recovered.report,
            options,
            storage,
            io,
            _lock: lock,
        };
        let db = Db {
            inner: Arc::new(inner),
        };
        history.push(head);
        for v in history {
            db.inner.retain(v);
        }
        db.inner.refresh_emptied(&mut db.inner.writer.lock());
        Ok(db)
    }

    /// What opening the database found: a lost log tail (a commit in flight at a crash, or
    /// unsynced commits lost to a power loss), repaired records, leftovers removed. See
    /// [`RecoveryReport::findings`].
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// Whether the database was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.inner
            .writer
            .lock()
            .check_writable()
            .is_err_and(|e| matches!(e, Error::ReadOnly))
    }

    /// The hasher of this database.
    pub fn hasher(&self) -> Hasher {
        self.inner.hasher
    }

    /// The key path of an arbitrary byte key: its hash with this database's hasher.
    pub fn key_path(&self, key: &[u8]) -> KeyPath {
        sprig_core::key_path_of(self.inner.hasher, key)
    }

    /// The directory the database lives in (none for in-memory databases).
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The I/O backend in use, which may not be the one the options asked for: where the
    /// kernel refuses io_uring, [`crate::IoBackend::IoUring`] runs on posix and this says
    /// why; where the file system refuses `O_DIRECT`, I/O is buffered and this says why.
    pub fn io_backend(&self) -> &io::IoBackendInfo {
        &self.inner.io
    }

    /// A read view of the latest committed version.
    pub fn view(&self) -> ReadView {
        let (version, pin) = self.inner.pinned_head();
        ReadView::pinned(&self.inner, version, pin)
    }

    /// A read view of a retained committed version (see `Options::retained_versions`).
    pub fn view_at(&self, seq: u64) -> Result<ReadView> {
        let (version, pin) = self.inner.pinned_version(seq)?;
        Ok(ReadView::pinned(&self.inner, version, pin))
    }

    /// The retained committed versions, oldest first, as (sequence number, root).
    pub fn versions(&self) -> Vec<(u64, Node)> {
        self.inner
            .retained
            .lock()
            .iter()
            .map(|v| (v.seq, v.dir.root_node()))
            .collect()
    }

    /// The latest state root.
    pub fn root(&self) -> Node {
        self.inner.head().dir.root_node()
    }

    /// The latest commit's sequence number.
    pub fn seq(&self) -> u64 {
        self.inner.head().seq
    }

    /// The number of entries in the latest version (O(1)).
    pub fn len(&self) -> u64 {
        self.inner.head().dir.len()
    }

    /// Whether the latest version holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Write a checkpoint now: of the oldest retained version, so that the next open replays
    /// only the commit records of the retained versions (and every one of them survives).
    pub fn checkpoint(&self) -> Result<()> {
        let mut w = self.inner.writer.lock();
        self.inner.checkpoint_locked(&mut w)
    }

    /// Counters and sizes.
    pub fn stats(&self) -> Stats {
        let mut s = self.inner.counters.snapshot();
        let head = self.inner.head();
        s.entries = head.dir.len();
        s.seq = head.seq;
        let mut pages = 0u64;
        head.dir.for_each_page(|_, _| pages += 1);
        s.pages = pages;
        s.cached_pages = self.inner.cache.len() as u64;
        s.overlay_bytes = self.inner.overlay_memory.bytes();
        s.overlays = self.inner.overlay_memory.count();
        s.retained_versions = self.inner.retained.lock().len() as u64;
        s.io_backend = self.inner.io.clone();
        let w = self.inner.writer.lock();
        s.disk_bytes = w.table.used_blocks() * io::BLOCK_BYTES as u64;
        s.live_bytes = w.table.live_blocks() * io::BLOCK_BYTES as u64;
        s
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
        dir: Directory::empty(hasher),
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

impl Inner {
    /// The latest committed version.
    pub fn head(&self) -> Arc<Version> {
        self.head.read().clone()
    }

    /// Publish a new latest version (just made durable by the writer `w`) and retain it.
    pub fn set_head(&self, w: &mut Writer, version: Arc<Version>) {
        // Only a writable database publishes versions, so its log has a position.
        let (wal_id, wal_end) = w.log_position().unwrap_or_default();
        w.history.push_back(Snapshot {
            seq: version.seq,
            table: w.table.clone(),
            wal_id,
            wal_end,
        });
        while w.history.len() > self.options.retained_versions.max(1) {
            w.history.pop_front();
        }
        *self.head.write() = version.clone();
        self.retain(version);
    }

    /// Forget every retained version but `version`, the new latest, whose checkpoint is
    /// `snapshot` (after a bulk load, which rewrites the whole database).
    pub fn reset_history(&self, w: &mut Writer, version: Arc<Version>, snapshot: Snapshot) {
        w.history.clear();
        w.history.push_back(snapshot);
        *self.head.write() = version.clone();
        let mut retained = self.retained.lock();
        retained.clear();
        retained.push_back(version);
    }

    /// Keep a committed version for historical reads, dropping the oldest past the limit.
    fn retain(&self, version: Arc<Version>) {
        let mut retained = self.retained.lock();
        retained.push_back(version);
        while retained.len() > self.options.retained_versions.max(1) {
            retained.pop_front();
        }
    }

    /// A retained committed version.
    pub fn retained_version(&self, seq: u64) -> Result<Arc<Version>> {
        find_retained(&self.retained.lock(), seq)
    }

    /// The latest committed version, pinned. The head is read and the pin registered under the
    /// head's lock; a commit publishes its new head under that lock before it deletes segments
    /// the old head needed ([`Inner::oldest_pinned`] is read after), so either that commit
    /// sees this pin or this reads the head it published.
    pub fn pinned_head(self: &Arc<Self>) -> (Arc<Version>, Pin) {
        let head = self.head.read();
        // Pause point (feature `failpoints`): inside the window a commit must not get into.
        pausepoint!("view.pinning");
        let pin = Pin::new(self, head.committed_base_seq());
        (head.clone(), pin)
    }

    /// A retained committed version, pinned under the lock of the retained list (a commit
    /// drops a version from the list before it can delete the segments only it needed).
    pub fn pinned_version(self: &Arc<Self>, seq: u64) -> Result<(Arc<Version>, Pin)> {
        let retained = self.retained.lock();
        let version = find_retained(&retained, seq)?;
        // Pause point (feature `failpoints`): inside the window a commit must not get into.
        pausepoint!("view.pinning");
        let pin = Pin::new(self, version.committed_base_seq());
        Ok((version, pin))
    }

    /// A fresh version id.
    pub fn next_version_id(&self) -> u64 {
        self.next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The oldest version some reader, batch or overlay still uses, or that is retained.
    pub fn oldest_pinned(&self) -> Option<u64> {
        let pinned = self.pins.lock().keys().next().copied();
        let retained = self.retained.lock().front().map(|v| v.seq);
        match (pinned, retained) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Note which segments hold no live data, so they can be deleted once no reader needs
    /// them.
    pub fn refresh_emptied(&self, w: &mut Writer) {
        let head_seq = self.head().seq;
        let active = w.table.active;
        let table = &w.table;
        // A segment live again (a rollback) is no longer waiting to be deleted.
        w.emptied
            .retain(|id, _| table.segments.get(id).is_some_and(|m| m.live_blocks() == 0));
        for (id, meta) in &w.table.segments {
            if *id != active && meta.live_blocks() == 0 {
                w.emptied.entry(*id).or_insert(head_seq);
            }
        }
    }

    /// Load the pages of the given regions: from memory, the cache, or the SSD (all misses
    /// read in one batch, and cached).
    pub fn load_pages(
        &self,
        wanted: &[(Prefix, PageRef)],
        kind: ReadKind,
    ) -> Result<Vec<Arc<Page>>> {
        self.load_pages_with(wanted, kind, true)
    }

    /// [`Inner::load_pages`]; pages read from the SSD are cached only with `fill_cache` (an
    /// import reads each page once: caching them would evict what readers use).
    pub fn load_pages_with(
        &self,
        wanted: &[(Prefix, PageRef)],
        kind: ReadKind,
        fill_cache: bool,
    ) -> Result<Vec<Arc<Page>>> {
        let mut out: Vec<Option<Arc<Page>>> = vec![None; wanted.len()];
        let mut misses = Vec::new();
        let mut hits = 0u64;
        for (i, (prefix, r)) in wanted.iter().enumerate() {
            match &r.loc {
                PageLoc::Memory(m) => match (m.page(), m.written()) {
                    (Some(p), _) => out[i] = Some(p),
                    (None, Some((l, checksum))) => match self.cache.get(l) {
                        Some(p) => {
                            hits += 1;
                            out[i] = Some(p);
                        }
                        None => misses.push((i, (l, checksum, *prefix))),
                    },
                    (None, None) => {
                        return Err(Error::internal(
                            "an in-memory page was released before it was written",
                        ))
                    }
                },
                PageLoc::Disk(l) => match self.cache.get(*l) {
                    Some(p) => {
                        hits += 1;
                        out[i] = Some(p);
                    }
                    None => misses.push((i, (*l, r.checksum, *prefix))),
                },
            }
        }
        self.counters.cache_hits(hits);
        if !misses.is_empty() {
            let requests: Vec<(u64, u64, Prefix)> = misses.iter().map(|(_, r)| *r).collect();
            let blocks = self.segments.read_pages(&requests)?;
            self.counters.page_reads(kind, blocks.len() as u64);
            for ((i, (l, _, prefix)), block) in misses.iter().zip(blocks.iter()) {
                let page = Arc::new(decode_page_at(block.as_bytes(), *l, prefix)?);
                if fill_cache {
                    self.cache.insert(*l, page.clone());
                }
                out[*i] = Some(page);
            }
        }
        out.into_iter()
            .map(|p| p.ok_or_else(|| Error::internal("a page asked for was not loaded")))
            .collect()
    }

    /// The bytes of a value as seen from `version` (whose overlays may hold values not
    /// written yet).
    pub fn value_bytes(
        &self,
        version: &Version,
        key: &KeyPath,
        value: ValueRef<'_>,
    ) -> Result<Vec<u8>> {
        match value {
            ValueRef::Inline(v) => Ok(v.to_vec()),
            ValueRef::External(x) if x.loc == crate::page::UNWRITTEN => {
                if let Some(bytes) = version.unwritten_value(key) {
                    return Ok(bytes);
                }
                // Held by an overlay that has been committed since: read it from where its
                // commit wrote it.
                let loc = version
                    .written_value(key)
                    .ok_or_else(|| Error::internal("an overlay value has no location"))?;
                self.counters.value_read(x.len);
                self.segments
                    .read_value(key, &crate::page::ExternalValue { loc, ..x })
            }
            ValueRef::External(x) => {
                self.counters.value_read(x.len);
                self.segments.read_value(key, &x)
            }
        }
    }

    /// The pages (by region) holding `keys` in `dir`, loaded.
    pub fn pages_for(
        &self,
        dir: &Directory,
        keys: &[KeyPath],
        kind: ReadKind,
    ) -> Result<HashMap<Prefix, Arc<Page>>> {
        let mut wanted: Vec<(Prefix, PageRef)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for key in keys {
            let (prefix, node) = dir.locate(key);
            if let DirNode::Page(r) = node.as_ref() {
                if seen.insert(prefix) {
                    wanted.push((prefix, r.clone()));
                }
            }
        }
        let pages = self.load_pages(&wanted, kind)?;
        Ok(wanted.into_iter().map(|(p, _)| p).zip(pages).collect())
    }
}

/// The retained version `seq`, or the error naming the retained range.
fn find_retained(
    retained: &std::collections::VecDeque<Arc<Version>>,
    seq: u64,
) -> Result<Arc<Version>> {
    retained
        .iter()
        .find(|v| v.seq == seq)
        .cloned()
        .ok_or_else(|| {
            let range = match (retained.front(), retained.back()) {
                (Some(a), Some(b)) => format!("{} to {}", a.seq, b.seq),
                _ => "none".into(),
            };
            Error::NotRetained {
                seq,
                retained: range,
            }
        })
}

/// A consistent, read-only view of one committed version. Commits that happen after the view
/// was taken never change what it sees.
pub struct ReadView {
    pub(crate) inner: Arc<Inner>,
    pub(crate) version: Arc<Version>,
    _pin: Pin,
}

fn sorted_distinct(keys: &[KeyPath]) -> Vec<KeyPath> {
    let mut k = keys.to_vec();
    k.sort_unstable();
    k.dedup();
    k
}

impl ReadView {
    /// A view of `version`, pinning the committed version it rests on; for a version that
    /// something already pins (see [`Pin`]).
    pub(crate) fn of(inner: &Arc<Inner>, version: Arc<Version>) -> ReadView {
        let pin = Pin::new(inner, version.committed_base_seq());
        ReadView::pinned(inner, version, pin)
    }

    /// A view of `version`, kept readable by `pin`.
    pub(crate) fn pinned(inner: &Arc<Inner>, version: Arc<Version>, pin: Pin) -> ReadView {
        ReadView {
            _pin: pin,
            inner: inner.clone(),
            version,
        }
    }

    /// The version's commit sequence number (for an overlay: the one it gets when committed).
    pub fn seq(&self) -> u64 {
        self.version.seq
    }

    /// The version's state root.
    pub fn root(&self) -> Node {
        self.version.dir.root_node()
    }

    /// The number of entries in this version.
    pub fn len(&self) -> u64 {
        self.version.dir.len()
    }

    /// Whether this version holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The region (trie position) of the page or empty region holding `key`.
    pub fn region_of(&self, key: &KeyPath) -> Prefix {
        self.version.dir.locate(key).0
    }

    /// The value of `key`: one SSD read unless the page is cached (plus one for a value
    /// stored in the value log).
    pub fn get(&self, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        let (prefix, node) = self.version.dir.locate(key);
        let DirNode::Page(r) = node.as_ref() else {
            return Ok(None);
        };
        let page = self
            .inner
            .load_pages(&[(prefix, r.clone())], ReadKind::Lookup)?
            .pop()
            .ok_or_else(|| Error::internal("a page asked for was not loaded"))?;
        match page.get(key) {
            Some(v) => self.inner.value_bytes(&self.version, key, v).map(Some),
            None => Ok(None),
        }
    }

    /// The values of many keys, with all their page reads in flight at once.
    pub fn get_many(&self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        let pages = self
            .inner
            .pages_for(&self.version.dir, keys, ReadKind::Lookup)?;
        keys.iter()
            .map(|key| {
                let (prefix, _) = self.version.dir.locate(key);
                match pages.get(&prefix).and_then(|p| p.get(key)) {
                    Some(v) => self.inner.value_bytes(&self.version, key, v).map(Some),
                    None => Ok(None),
                }
            })
            .collect()
    }

    /// A proof of inclusion or exclusion of `key` against this version's root.
    pub fn path_proof(&self, key: &KeyPath) -> Result<PathProof> {
        let pages = self
            .inner
            .pages_for(&self.version.dir, &[*key], ReadKind::Proof)?;
        self.version
            .dir
            .path_proof(key, &|p| pages.get(p).map(|a| a.as_ref()))
            .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))
    }

    /// One proof of many keys, sharing common siblings.
    pub fn multi_proof(&self, keys: &[KeyPath]) -> Result<MultiProof> {
        let keys = sorted_distinct(keys);
        let pages = self
            .inner
            .pages_for(&self.version.dir, &keys, ReadKind::Proof)?;
        let mut nodes = Vec::new();
        let hasher = self.inner.hasher;
        self.version
            .dir
            .prove(
                &keys,
                &mut |prefix, node, keys, out| match node {
                    DirNode::Page(_) => {
                        let page = pages
                            .get(prefix)
                            .ok_or(crate::directory::DirectoryError::PageMissing(*prefix))?;
                        page.prove(hasher, keys, out);
                        Ok(())
                    }
                    _ => {
                        out.push(sprig_core::ProofNode::Terminator);
                        Ok(())
                    }
                },
                &mut nodes,
            )
            .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
        Ok(MultiProof { nodes })
    }

    /// A witness of `keys` against this version's root.
    pub fn witness(&self, keys: &[KeyPath]) -> Result<Witness> {
        let keys = sorted_distinct(keys);
        let proof = self.multi_proof(&keys)?;
        Ok(Witness { keys, proof })
    }
}
