//! `sprig.View` and `sprig.Cursor`: a consistent read-only version (the latest, a retained
//! one, or a snapshot): get, get_many, iteration over any range forward or reverse, proofs.

use crate::convert::{bytes, err, error, key_arg, keys_arg};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Mutex;

/// A consistent, read-only view of one committed version; later commits never change what
/// it sees. Iterating it yields (key, value) pairs in key-path order.
#[pyclass(module = "sprig")]
pub struct View {
    view: sprig::ReadView,
}

impl View {
    pub fn new(view: sprig::ReadView) -> View {
        View { view }
    }

    fn table(&self, name: Option<&str>) -> PyResult<sprig::Table> {
        match name {
            Some(n) => self.view.table(n).map_err(err),
            None => Ok(sprig::Table::default_table()),
        }
    }
}

#[pymethods]
impl View {
    /// The version's sequence number.
    #[getter]
    fn seq(&self) -> u64 {
        self.view.seq()
    }

    /// The version's state root (default table), 32 bytes.
    #[getter]
    fn root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.view.root())
    }

    /// The version's database root over every table.
    #[getter]
    fn db_root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes(py, &self.view.db_root())
    }

    /// The root of table `name`.
    fn table_root<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let t = self.table(Some(name))?;
        Ok(bytes(py, &self.view.table_root(&t).map_err(err)?))
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.view.len()).unwrap_or(usize::MAX)
    }

    /// The value of `key` (32 bytes), or None.
    #[pyo3(signature = (key, table=None))]
    pub fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        table: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let k = key_arg(key)?;
        let t = self.table(table)?;
        let v = py.allow_threads(|| self.view.get_in(&t, &k)).map_err(err)?;
        Ok(v.map(|v| bytes(py, &v)))
    }

    /// The values of `keys` (None where absent), read together (one batch of SSD reads).
    #[pyo3(signature = (keys, table=None))]
    pub fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Vec<u8>>,
        table: Option<&str>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let ks = keys_arg(&keys)?;
        let t = self.table(table)?;
        let vs = py
            .allow_threads(|| self.view.get_many_in(&t, &ks))
            .map_err(err)?;
        Ok(vs.into_iter().map(|v| v.map(|v| bytes(py, &v))).collect())
    }

    /// A cursor over `start <= key < end` (None: unbounded) of `table`, in key-path order or
    /// `reverse`d.
    #[pyo3(signature = (start=None, end=None, reverse=false, table=None))]
    fn range(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        reverse: bool,
        table: Option<&str>,
    ) -> PyResult<Cursor> {
        use std::ops::Bound as B;
        let lo = match start {
            Some(s) => B::Included(key_arg(s)?),
            None => B::Unbounded,
        };
        let hi = match end {
            Some(e) => B::Excluded(key_arg(e)?),
            None => B::Unbounded,
        };
        let t = self.table(table)?;
        let mut c = self.view.range_in(&t, (lo, hi));
        if reverse {
            c = c.reverse();
        }
        Ok(Cursor {
            cursor: Mutex::new(c),
        })
    }

    fn __iter__(&self) -> PyResult<Cursor> {
        self.range(None, None, false, None)
    }

    /// A path proof of `key` against this view's root (default table): it proves the value
    /// or the absence. Check it with `sprig.verify`.
    fn prove<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let k = key_arg(key)?;
        let p = py.allow_threads(|| self.view.path_proof(&k)).map_err(err)?;
        Ok(bytes(py, &p.encode(self.view.hasher())))
    }

    /// The witness of `keys` against this view's root (default table), encoded.
    fn witness<'py>(&self, py: Python<'py>, keys: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyBytes>> {
        let ks = keys_arg(&keys)?;
        let w = py.allow_threads(|| self.view.witness(&ks)).map_err(err)?;
        Ok(bytes(py, &w.encode(self.view.hasher())))
    }
}

/// An iterator over (key, value) pairs of a view's range.
#[pyclass(module = "sprig")]
pub struct Cursor {
    cursor: Mutex<sprig::Cursor>,
}

#[pymethods]
impl Cursor {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let mut c = self
            .cursor
            .lock()
            .map_err(|_| error("SprigError", "a previous call panicked"))?;
        match c.next() {
            None => Ok(None),
            Some(Err(e)) => Err(err(e)),
            Some(Ok((k, v))) => Ok(Some((bytes(py, &k), bytes(py, &v)))),
        }
    }

    /// Move to `key`: the next item is the first at or after it (before it, in reverse).
    fn seek(&self, key: &[u8]) -> PyResult<()> {
        let k = key_arg(key)?;
        self.cursor
            .lock()
            .map_err(|_| error("SprigError", "a previous call panicked"))?
            .seek(&k);
        Ok(())
    }
}
