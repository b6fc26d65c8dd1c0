//! `sprig.Db`: open or create a database, read the latest state, begin batches, commit,
//! views of the latest and retained versions, tables, snapshots, stats.

use crate::batch::{Batch, CommitInfo, Pending};
use crate::convert::{bytes, err, error, hasher};
use crate::pipeline::Pipeline;
use crate::view::View;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Mutex;

/// A Sprig database. Use it as a context manager, or call `close()`.
#[pyclass(module = "sprig")]
pub struct Db {
    db: Mutex<Option<sprig::Db>>,
}

/// Set `field` to `given`, if given (a keyword argument left at None keeps the default).
fn set<T>(field: &mut T, given: Option<T>) {
    if let Some(v) = given {
        *field = v;
    }
}

/// The engine options from the keyword arguments.
#[allow(clippy::too_many_arguments)]
fn options(
    create: bool,
    cache_bytes: Option<u64>,
    sync: &str,
    retained_versions: Option<usize>,
    hasher_name: Option<&str>,
    io_backend: Option<&str>,
    direct_io: bool,
    metrics_name: Option<String>,
) -> PyResult<sprig::Options> {
    let mut o = sprig::Options {
        create_if_missing: create,
        direct_io,
        ..sprig::Options::default()
    };
    if let Some(c) = cache_bytes {
        o.page_cache_bytes = c;
    }
    o.sync = match sync {
        "always" => sprig::SyncPolicy::Always,
        "never" => sprig::SyncPolicy::Never,
        other => {
            return Err(error(
                "InvalidArgumentError",
                format!("sync must be \"always\" or \"never\", not {other:?}"),
            ))
        }
    };
    if let Some(r) = retained_versions {
        o.retained_versions = r;
    }
    if let Some(h) = hasher_name {
        o.hasher = Some(hasher(h)?);
    }
    if let Some(io) = io_backend {
        o.io_backend = sprig::IoBackend::from_name(io).ok_or_else(|| {
            error(
                "InvalidArgumentError",
                format!("io_backend must be io_uring, io_uring-required or posix, not {io:?}"),
            )
        })?;
    }
    if let Some(n) = metrics_name {
        o.metrics_name = n;
    }
    Ok(o)
}

/// The table `name` names in `db` (None: the default table).
pub fn table_of(db: &sprig::Db, name: Option<&str>) -> PyResult<sprig::Table> {
    match name {
        Some(n) => db.table(n).map_err(err),
        None => Ok(sprig::Table::default_table()),
    }
}

impl Db {
    /// The open database, or `ClosedError`.
    pub fn get_db(&self) -> PyResult<sprig::Db> {
        self.db
            .lock()
            .map_err(|_| error("SprigError", "a previous call panicked"))?
            .clone()
            .ok_or_else(|| error("ClosedError", "the database is closed"))
    }
}

#[pymethods]
impl Db {
    /// Open the database in directory `path`, creating it if missing (unless `create=False`).
    /// `sync`: "always" (every commit durable when it returns) or "never"; `hasher`:
    /// "blake3" (default for a new database), "sha256" or "keccak256"; `io_backend`:
    /// "io_uring" (default), "io_uring-required" or "posix". The rest tune the engine (the
    /// Rust `Options` of the same names; None keeps its default): `segment_bytes` (a new
    /// database's segment file size), `checkpoint_log_bytes`, `background_checkpoints`,
    /// `auto_clean`, `max_space_amplification`, `recycled_segments`, `max_overlay_bytes`.
    /// Values the engine refuses raise `InvalidArgumentError`.
    #[new]
    #[pyo3(signature = (path, *, create=true, cache_bytes=None, sync="always", retained_versions=None, hasher=None, io_backend=None, direct_io=true, metrics_name=None, segment_bytes=None, checkpoint_log_bytes=None, background_checkpoints=None, auto_clean=None, max_space_amplification=None, recycled_segments=None, max_overlay_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        create: bool,
        cache_bytes: Option<u64>,
        sync: &str,
        retained_versions: Option<usize>,
        hasher: Option<&str>,
        io_backend: Option<&str>,
        direct_io: bool,
        metrics_name: Option<String>,
        segment_bytes: Option<u64>,
        checkpoint_log_bytes: Option<u64>,
        background_checkpoints: Option<bool>,
        auto_clean: Option<bool>,
        max_space_amplification: Option<f64>,
        recycled_segments: Option<usize>,
        max_overlay_bytes: Option<u64>,
    ) -> PyResult<Db> {
        let mut o = options(
            create,
            cache_bytes,
            sync,
            retained_versions,
            hasher,
            io_backend,
            direct_io,
            metrics_name,
        )?;
        set(&mut o.segment_bytes, segment_bytes);
        set(&mut o.checkpoint_log_bytes, checkpoint_log_bytes);
        set(&mut o.background_checkpoints, background_checkpoints);
        set(&mut o.auto_clean, auto_clean);
        set(&mut o.max_space_amplification, max_space_amplification);
        set(&mut o.recycled_segments, recycled_segments);
        set(&mut o.max_overlay_bytes, max_overlay_bytes);
        let db = py.allow_threads(|| sprig::Db::open(path, o)).map_err(err)?;
        Ok(Db {
            db: Mutex::new(Some(db)),
        })
    }

    /// A database that lives only in memory. The keyword arguments are `Db`'s that apply
    /// without a disk: `cache_bytes`, `retained_versions`, `hasher`, `metrics_name` and
    /// `max_overlay_bytes` (the memory all finished, uncommitted batches may hold together).
    #[staticmethod]
    #[pyo3(signature = (*, cache_bytes=None, retained_versions=None, hasher=None, metrics_name=None, max_overlay_bytes=None))]
    fn in_memory(
        cache_bytes: Option<u64>,
        retained_versions: Option<usize>,
        hasher: Option<&str>,
        metrics_name: Option<String>,
        max_overlay_bytes: Option<u64>,
    ) -> PyResult<Db> {
        let mut o = options(
            true,
            cache_bytes,
            "always",
            retained_versions,
            hasher,
            None,
            true,
            metrics_name,
        )?;
        set(&mut o.max_overlay_bytes, max_overlay_bytes);
        let db = sprig::Db::open_in_memory(o).map_err(err)?;
        Ok(Db {
            db: Mutex::new(Some(db)),
        })
    }

    /// Close the database. Views, batches and pending batches still alive keep it open until
    /// they are gone; every later call on this object raises `ClosedError`.
    fn close(&self) -> PyResult<()> {
        let taken = self
            .db
            .lock()
            .map_err(|_| error("SprigError", "a previous call panicked"))?
            .take();
        drop(taken);
        Ok(())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }

    /// Whether the database is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.db.lock().map(|d| d.is_none()).unwrap_or(true)
    }

    /// The 32-byte key path of a byte key (its hash with the database's hasher).
    fn key_path<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        Ok(bytes(py, &self.get_db()?.key_path(key)))
    }

    /// The name of the database's hasher.
    #[getter]
    fn hasher(&self) -> PyResult<&'static str> {
        Ok(self.get_db()?.hasher().name())
    }

    /// The latest state root (the default table's; NOMT-compatible), 32 bytes.
    #[getter]
    fn root<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(bytes(py, &self.get_db()?.root()))
    }

    /// The latest database root over every table, 32 bytes.
    #[getter]
    fn db_root<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(bytes(py, &self.get_db()?.db_root()))
    }

    /// The latest commit's sequence number.
    #[getter]
    fn seq(&self) -> PyResult<u64> {
        Ok(self.get_db()?.seq())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(usize::try_from(self.get_db()?.len()).unwrap_or(usize::MAX))
    }

    /// The value of `key` in the latest version (of `table`), or None.
    #[pyo3(signature = (key, table=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        table: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.view()?.get(py, key, table)
    }

    /// The values of `keys` (None where absent), read together.
    #[pyo3(signature = (keys, table=None))]
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Vec<u8>>,
        table: Option<&str>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        self.view()?.get_many(py, keys, table)
    }

    /// A batch on the latest version. As a context manager it commits when the block ends
    /// (and is dropped if the block raises).
    fn batch(&self) -> PyResult<Batch> {
        let db = self.get_db()?;
        Ok(Batch::new(db.begin(), db))
    }

    /// The same as `batch()`.
    fn begin(&self) -> PyResult<Batch> {
        self.batch()
    }

    /// A commit pipeline: batches submitted to it are committed in order on a background
    /// thread while the next one is read and finished; at most `depth` finished batches wait
    /// for their commit.
    #[pyo3(signature = (depth=4))]
    fn pipeline(&self, depth: usize) -> PyResult<Pipeline> {
        let db = self.get_db()?;
        Ok(Pipeline::new(db.pipeline(depth), db))
    }

    /// Make a pending batch (and the uncommitted ones under it) durable and the latest
    /// version.
    fn commit(&self, py: Python<'_>, pending: &Pending) -> PyResult<CommitInfo> {
        let db = self.get_db()?;
        let p = pending.get()?;
        let info = py.allow_threads(|| db.commit(p)).map_err(err)?;
        Ok(CommitInfo::from(&info))
    }

    /// A view of the latest committed version.
    fn view(&self) -> PyResult<View> {
        Ok(View::new(self.get_db()?.view()))
    }

    /// A view of the retained version `seq`.
    fn view_at(&self, seq: u64) -> PyResult<View> {
        Ok(View::new(self.get_db()?.view_at(seq).map_err(err)?))
    }

    /// The retained versions, oldest first, as (seq, root).
    fn versions<'py>(&self, py: Python<'py>) -> PyResult<Vec<(u64, Bound<'py, PyBytes>)>> {
        Ok(self
            .get_db()?
            .versions()
            .into_iter()
            .map(|(s, r)| (s, bytes(py, &r)))
            .collect())
    }

    /// Make the retained version `seq` the latest again (one durable commit).
    fn rollback_to(&self, py: Python<'_>, seq: u64) -> PyResult<CommitInfo> {
        let db = self.get_db()?;
        let info = py.allow_threads(|| db.rollback_to(seq)).map_err(err)?;
        Ok(CommitInfo::from(&info))
    }

    /// Create table `name`; `resolver` names how its upserts combine values: "add-u64",
    /// "add-u128", "max", "min", "concat" or "replace" (None: upserts refused).
    #[pyo3(signature = (name, resolver=None))]
    fn create_table(&self, name: &str, resolver: Option<String>) -> PyResult<()> {
        self.get_db()?
            .create_table(name, sprig::TableOptions { resolver })
            .map_err(err)?;
        Ok(())
    }

    /// Drop table `name` and its entries (one durable commit).
    fn drop_table(&self, name: &str) -> PyResult<()> {
        self.get_db()?.drop_table(name).map_err(err)?;
        Ok(())
    }

    /// The tables as {name: resolver or None}.
    fn tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for t in self.get_db()?.tables() {
            d.set_item(t.table.name(), t.resolver)?;
        }
        Ok(d)
    }

    /// Save the latest version of every table as snapshot `name` (durable, copies no data).
    fn save_snapshot<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let info = self.get_db()?.save_snapshot(name).map_err(err)?;
        snapshot_dict(py, &info)
    }

    /// The snapshots, as dicts (name, seq, db_root, created_unix_secs, damaged).
    fn snapshots<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.get_db()?
            .snapshots()
            .iter()
            .map(|s| snapshot_dict(py, s))
            .collect()
    }

    /// A read-only view of snapshot `name`.
    fn open_snapshot(&self, name: &str) -> PyResult<View> {
        Ok(View::new(self.get_db()?.open_snapshot(name).map_err(err)?))
    }

    /// Make snapshot `name` the latest version again (one durable commit).
    fn restore_snapshot(&self, py: Python<'_>, name: &str) -> PyResult<CommitInfo> {
        let db = self.get_db()?;
        let info = py
            .allow_threads(|| db.restore_snapshot(name))
            .map_err(err)?;
        Ok(CommitInfo::from(&info))
    }

    /// Delete snapshot `name`.
    fn delete_snapshot(&self, name: &str) -> PyResult<()> {
        self.get_db()?.delete_snapshot(name).map_err(err)
    }

    /// Write a checkpoint now (bounds the time to open).
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.get_db()?;
        py.allow_threads(|| db.checkpoint()).map_err(err)
    }

    /// Counters and sizes, as a dict; `phase_seconds` holds the seconds spent in each step of
    /// finishing and committing batches since open (`sprig::PhaseTimes`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.get_db()?.stats();
        let d = PyDict::new(py);
        for (k, v) in [
            ("entries", s.entries),
            ("pages", s.pages),
            ("seq", s.seq),
            ("commits", s.commits),
            ("page_reads", s.page_reads()),
            ("lookup_page_reads", s.lookup_page_reads),
            ("batch_page_reads", s.batch_page_reads),
            ("cache_hits", s.cache_hits),
            ("bytes_read", s.bytes_read),
            ("bytes_written", s.bytes_written),
            ("pages_written", s.pages_written),
            ("disk_bytes", s.disk_bytes),
            ("live_bytes", s.live_bytes),
            ("retained_bytes", s.retained_bytes),
            ("directory_bytes", s.directory_bytes),
            ("overlay_bytes", s.overlay_bytes),
            ("retained_versions", s.retained_versions),
        ] {
            d.set_item(k, v)?;
        }
        d.set_item("space_amplification", s.space_amplification())?;
        d.set_item("io_backend", s.io_backend.name)?;
        // Seconds in each step of finishing and committing batches since open.
        let phases = PyDict::new(py);
        for (p, took) in s.phase_times.iter() {
            phases.set_item(p.name(), took.as_secs_f64())?;
        }
        d.set_item("phase_seconds", phases)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        match self.get_db() {
            Ok(db) => format!(
                "sprig.Db({:?}, seq={}, entries={})",
                db.path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "<memory>".into()),
                db.seq(),
                db.len()
            ),
            Err(_) => "sprig.Db(<closed>)".to_string(),
        }
    }
}

fn snapshot_dict<'py>(py: Python<'py>, s: &sprig::SnapshotInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &s.name)?;
    d.set_item("seq", s.seq)?;
    d.set_item("db_root", bytes(py, &s.db_root))?;
    d.set_item("created_unix_secs", s.created_unix_secs)?;
    d.set_item("damaged", s.damaged.clone())?;
    Ok(d)
}
