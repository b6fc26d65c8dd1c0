//! What users touch: the database handle and its options, read views, write batches,
//! overlays (`Pending`), the commit pipeline, independent writable handles, cursors, named snapshots, the integrity check, and
//! the errors and statistics they report. No I/O of its own: everything goes through the
//! write paths and the log below.

pub(crate) mod batch;
pub(crate) mod blob;
pub(crate) mod check;
pub(crate) mod db;
pub(crate) mod handle;
pub(crate) mod pipeline;
pub(crate) mod scan;
pub(crate) mod snapshot;
pub(crate) mod sync;
pub(crate) mod table;
pub(crate) mod union;
pub(crate) mod view;
