//! The native part of the `sprig` Python package (`sprig._sprig`): a thin layer over the
//! `sprig` crate. Python-side names, docs and the exception classes live in `python/sprig`.

mod batch;
mod convert;
mod db;
mod pipeline;
mod proofs;
mod view;

use pyo3::prelude::*;

#[pymodule]
fn _sprig(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<db::Db>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<batch::Pending>()?;
    m.add_class::<batch::CommitInfo>()?;
    m.add_class::<pipeline::Pipeline>()?;
    m.add_class::<view::View>()?;
    m.add_class::<view::Cursor>()?;
    m.add_function(wrap_pyfunction!(proofs::verify, m)?)?;
    m.add_function(wrap_pyfunction!(proofs::verify_witness, m)?)?;
    m.add_function(wrap_pyfunction!(proofs::key_path, m)?)?;
    Ok(())
}
