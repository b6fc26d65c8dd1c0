//! `sprig.Pipeline`: finished batches committed in order on a background thread, so the next
//! batch is read and finished while the one before is written and synced (`Db.pipeline`).

use crate::batch::{Batch, CommitInfo, Pending};
use crate::convert::{err, error};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Mutex;

/// A commit pipeline of a database. `begin()` starts a batch on the latest submitted one
/// (durable or not), `submit(pending)` queues a finished batch and returns at once (blocking
/// only while `depth` batches wait), `wait_durable(seq)` and `flush()` wait for durability.
/// As a context manager it flushes when the block ends.
#[pyclass(module = "sprig")]
pub struct Pipeline {
    /// The pipeline and its database until it is closed.
    open: Mutex<Option<(sprig::Pipeline, sprig::Db)>>,
}

impl Pipeline {
    pub fn new(pipeline: sprig::Pipeline, db: sprig::Db) -> Pipeline {
        Pipeline {
            open: Mutex::new(Some((pipeline, db))),
        }
    }

    /// Run `f` on the open pipeline without holding the interpreter (it may wait for the
    /// committer).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut sprig::Pipeline, &sprig::Db) -> sprig::Result<T> + Send,
    ) -> PyResult<T> {
        py.allow_threads(|| {
            let mut slot = self
                .open
                .lock()
                .map_err(|_| error("SprigError", "a previous call panicked"))?;
            let (pipeline, db) = slot
                .as_mut()
                .ok_or_else(|| error("ClosedError", "the pipeline is closed"))?;
            f(pipeline, db).map_err(err)
        })
    }
}

#[pymethods]
impl Pipeline {
    /// A batch on the latest submitted batch (durable or not), or on the database's latest
    /// version when none is waiting.
    fn begin(&self, py: Python<'_>) -> PyResult<Batch> {
        let (batch, db) = self.with(py, |p, db| Ok((p.begin()?, db.clone())))?;
        Ok(Batch::new(batch, db))
    }

    /// Queue a finished batch for its commit; it must have begun on this pipeline's latest
    /// batch (`begin()`). Blocks while `depth` batches wait; raises the committer's error if
    /// an earlier commit failed (nothing submitted after it is committed).
    fn submit(&self, py: Python<'_>, pending: &Pending) -> PyResult<()> {
        let p = pending.get()?;
        self.with(py, |pipeline, _| pipeline.submit(p))
    }

    /// Wait until the commit of sequence number `seq` (or a later one) is durable; return
    /// the latest durable commit.
    fn wait_durable(&self, py: Python<'_>, seq: u64) -> PyResult<CommitInfo> {
        let info = self.with(py, |p, _| p.wait_durable(seq))?;
        Ok(CommitInfo::from(&info))
    }

    /// Wait until every submitted batch is durable; return the last commit (None if none was
    /// submitted). The pipeline can be used again afterwards.
    fn flush(&self, py: Python<'_>) -> PyResult<Option<CommitInfo>> {
        let last = self.with(py, |p, _| p.flush())?;
        Ok(last.as_ref().map(CommitInfo::from))
    }

    /// The latest durable commit made through this pipeline, if any.
    #[getter]
    fn last_durable(&self, py: Python<'_>) -> PyResult<Option<CommitInfo>> {
        let last = self.with(py, |p, _| Ok(p.last_durable()))?;
        Ok(last.as_ref().map(CommitInfo::from))
    }

    /// Flush, then close: later calls raise `ClosedError`. Closing again does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let open = py.allow_threads(|| {
            self.open
                .lock()
                .map_err(|_| error("SprigError", "a previous call panicked"))
                .map(|mut slot| slot.take())
        })?;
        match open {
            Some((mut pipeline, _db)) => py
                .allow_threads(move || pipeline.flush())
                .map(|_| ())
                .map_err(err),
            None => Ok(()),
        }
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Flush and close when the block ends, also when it raised (what was submitted is
    /// committed; a batch not submitted is not).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}
