//! `sprig.Batch`, `sprig.Pending` and `sprig.CommitInfo`: changes gathered, applied in memory
//! (root and witness known), committed.

use crate::convert::{bytes, err, error, key_arg, keys_arg};
use crate::db::table_of;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::Mutex;

/// Reads and changes on one version, not yet applied. As a context manager it commits when
/// the block ends normally (its `info` then holds the commit) and is dropped if it raises.
#[pyclass(module = "sprig")]
pub struct Batch {
    /// The batch and its database while it is open; both go once it is finished, committed or
    /// discarded, so a used-up batch does not keep the database open.
    open: Mutex<Option<(sprig::WriteBatch, sprig::Db)>>,
    info: Mutex<Option<CommitInfo>>,
}

impl Batch {
    pub fn new(batch: sprig::WriteBatch, db: sprig::Db) -> Batch {
        Batch {
            open: Mutex::new(Some((batch, db))),
            info: Mutex::new(None),
        }
    }

    /// Run `f` on the open batch with the table `table` names.
    fn with<T>(
        &self,
        table: Option<&str>,
        f: impl FnOnce(&mut sprig::WriteBatch, &sprig::Table) -> sprig::Result<T>,
    ) -> PyResult<T> {
        let mut slot = self
            .open
            .lock()
            .map_err(|_| error("SprigError", "a previous call panicked"))?;
        let (batch, db) = slot
            .as_mut()
            .ok_or_else(|| error("ClosedError", "the batch was finished or discarded"))?;
        let table = table_of(db, table)?;
        f(batch, &table).map_err(err)
    }

    fn take(&self) -> PyResult<(sprig::WriteBatch, sprig::Db)> {
        self.open
            .lock()
            .map_err(|_| error("SprigError", "a previous call panicked"))?
            .take()
            .ok_or_else(|| error("ClosedError", "the batch was finished or discarded"))
    }
}

#[pymethods]
impl Batch {
    /// Set `key` (32 bytes) to `value`.
    #[pyo3(signature = (key, value, table=None))]
    fn put(&self, key: &[u8], value: Vec<u8>, table: Option<&str>) -> PyResult<()> {
        let k = key_arg(key)?;
        self.with(table, |b, t| b.put_in(t, k, value))
    }

    /// Delete `key`.
    #[pyo3(signature = (key, table=None))]
    fn delete(&self, key: &[u8], table: Option<&str>) -> PyResult<()> {
        let k = key_arg(key)?;
        self.with(table, |b, t| b.delete_in(t, k))
    }

    /// Combine `value` with `key`'s stored value by the table's resolver (or set it, when
    /// absent).
    #[pyo3(signature = (key, value, table=None))]
    fn upsert(&self, key: &[u8], value: Vec<u8>, table: Option<&str>) -> PyResult<()> {
        let k = key_arg(key)?;
        self.with(table, |b, t| b.upsert_in(t, k, value))
    }

    /// The value of `key` as this batch sees it (its own changes included); the read goes
    /// into the witness.
    #[pyo3(signature = (key, table=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        table: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let k = key_arg(key)?;
        let v = self.with(table, |b, t| b.get_in(t, &k))?;
        Ok(v.map(|v| bytes(py, &v)))
    }

    /// The values of `keys` as this batch sees them (None where absent), read together (one
    /// round of SSD reads); every read goes into the witness.
    #[pyo3(signature = (keys, table=None))]
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Vec<u8>>,
        table: Option<&str>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let ks = keys_arg(&keys)?;
        // The reads wait for the disk without the interpreter; the batch is locked inside, so
        // a thread holding the interpreter never waits for it.
        let vs = py.allow_threads(|| self.with(table, |b, t| b.get_many_in(t, &ks)))?;
        Ok(vs.into_iter().map(|v| v.map(|v| bytes(py, &v))).collect())
    }

    /// Changes gathered so far.
    fn __len__(&self) -> PyResult<usize> {
        self.with(None, |b, _| Ok(b.len()))
    }

    /// Apply the batch in memory: a `Pending` with the new root and the witness.
    fn finish(&self, py: Python<'_>) -> PyResult<Pending> {
        let (b, db) = self.take()?;
        let p = py.allow_threads(|| b.finish()).map_err(err)?;
        Ok(Pending { pending: p, db })
    }

    /// Drop the batch's changes.
    fn discard(&self) -> PyResult<()> {
        drop(self.take()?);
        Ok(())
    }

    /// The commit made when a `with` block ended, else None.
    #[getter]
    fn info(&self) -> Option<CommitInfo> {
        self.info.lock().ok().and_then(|i| i.clone())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let raised = exc.get_item(0).map(|t| !t.is_none()).unwrap_or(false);
        let open = self.open.lock().map(|b| b.is_some()).unwrap_or(false);
        if raised || !open {
            // An exception: nothing is committed. Finished already: nothing left to do.
            if open {
                self.discard()?;
            }
            return Ok(false);
        }
        let (b, db) = self.take()?;
        let info = py
            .allow_threads(|| b.finish().and_then(|p| db.commit(p)))
            .map_err(err)?;
        if let Ok(mut slot) = self.info.lock() {
            *slot = Some(CommitInfo::from(&info));
        }
        Ok(false)
    }
}

/// A finished batch: its root and witness are known; `Db.commit` makes it durable.
#[pyclass(module = "sprig")]
pub struct Pending {
    pending: sprig::Pending,
    db: sprig::Db,
}

impl Pending {
    pub fn get(&self) -> PyResult<sprig::Pending> {
        Ok(self.pending.clone())
    }
}

#[pymethods]
impl Pending {
    /// The new state root (default table), 32 bytes.
    #[getter]
    fn root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.pending.root())
    }

    /// The new database root over every table.
    #[getter]
    fn db_root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.pending.db_root())
    }

    /// The root it was built on.
    #[getter]
    fn base_root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.pending.base_root())
    }

    /// The sequence number it will have once committed.
    #[getter]
    fn seq(&self) -> u64 {
        self.pending.seq()
    }

    /// The witness of every key it read or wrote (default table) against `base_root`,
    /// encoded (docs/PROOF_FORMAT.md); check it with `sprig.verify_witness`.
    #[getter]
    fn witness<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(bytes(py, &self.pending.witness().encode(self.db.hasher())))
    }

    /// A batch on top of this one (it sees these changes; committing it commits this first).
    fn begin(&self) -> PyResult<Batch> {
        let b = self.pending.begin().map_err(err)?;
        Ok(Batch::new(b, self.db.clone()))
    }

    /// Drop this pending batch and everything built on it.
    fn discard(&self) {
        self.pending.clone().discard();
    }

    /// Whether it has been committed.
    #[getter]
    fn committed(&self) -> bool {
        self.pending.is_committed()
    }
}

/// What a commit made.
#[pyclass(module = "sprig", frozen)]
#[derive(Clone)]
pub struct CommitInfo {
    seq: u64,
    root: sprig::Node,
    db_root: sprig::Node,
}

impl From<&sprig::CommitInfo> for CommitInfo {
    fn from(i: &sprig::CommitInfo) -> CommitInfo {
        CommitInfo {
            seq: i.seq,
            root: i.root,
            db_root: i.db_root,
        }
    }
}

#[pymethods]
impl CommitInfo {
    /// The new version's sequence number.
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// The new state root (default table), 32 bytes.
    #[getter]
    fn root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.root)
    }

    /// The new database root over every table.
    #[getter]
    fn db_root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.db_root)
    }

    fn __repr__(&self) -> String {
        format!(
            "CommitInfo(seq={}, root={})",
            self.seq,
            sprig::hex(&self.root)
        )
    }
}
