//! The commit pipeline: finished batches submitted to it are committed in order on a
//! background thread, so the caller reads and finishes the next batch while the one before is
//! written and synced.

use crate::batch::{new_batch, put_info, take_pending, SprigCommitInfo};
use crate::error::{guard, lock, need_out, put_out, Fail, SprigStatus};
use crate::handles::{self, Object, SprigBatch, SprigDb, SprigPending, SprigPipeline};
use std::ffi::c_char;
use std::sync::{Arc, Mutex};

/// Run `f` on the pipeline `id` (locked: calls on one pipeline take turns).
fn with_pipeline<T>(
    id: SprigPipeline,
    f: impl FnOnce(&mut sprig::Pipeline, &sprig::Db) -> Result<T, Fail>,
) -> Result<T, Fail> {
    let (cell, db) = handles::pipeline(id)?;
    let mut pipeline = lock(&cell);
    f(&mut pipeline, &db)
}

/// A commit pipeline on `db` in which at most `depth` finished batches wait for their commit
/// (at least 1): `sprig_pipeline_submit` blocks while that many wait. Free it with
/// `sprig_pipeline_free`, which first waits for every submitted batch.
///
/// # Safety
/// `pipeline` points to a writable handle; `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_pipeline(
    db: SprigDb,
    depth: usize,
    pipeline: *mut SprigPipeline,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(pipeline, "pipeline")?;
        let db = handles::db(db)?;
        let id = handles::insert(Object::Pipeline(
            Arc::new(Mutex::new(db.pipeline(depth))),
            db,
        ));
        put_out(pipeline, "pipeline", id)
    })
}

/// Begin a batch on the latest batch submitted to the pipeline (durable or not), or on the
/// database's latest version when none is waiting.
///
/// # Safety
/// `batch` points to a writable handle; `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_pipeline_begin(
    pipeline: SprigPipeline,
    batch: *mut SprigBatch,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(batch, "batch")?;
        let (b, db) = with_pipeline(pipeline, |p, db| Ok((p.begin()?, db.clone())))?;
        put_out(batch, "batch", new_batch(b, db))
    })
}

/// Queue a pending batch for its commit and return at once (blocking only while `depth`
/// batches wait). It must have begun on the pipeline's latest batch (`sprig_pipeline_begin`),
/// else `SPRIG_STATUS_INVALID_ARGUMENT`. Fails with the committer's error if an earlier commit
/// failed; nothing submitted after a failed commit is committed. Once the pipeline handle is
/// found valid, the pending handle is consumed whether or not the submit succeeds.
///
/// # Safety
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_pipeline_submit(
    pipeline: SprigPipeline,
    pending: SprigPending,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        // The pipeline is found before the pending handle is consumed.
        let (cell, _) = handles::pipeline(pipeline)?;
        let p = take_pending(pending)?;
        lock(&cell).submit(p)?;
        Ok(())
    })
}

/// Wait until the commit of sequence number `seq` (or a later one) is durable; the latest
/// durable commit into `*info` (if not null). `SPRIG_STATUS_INVALID_ARGUMENT` if `seq` was
/// never submitted to this pipeline.
///
/// # Safety
/// `info` is null or points to a writable `SprigCommitInfo`; `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_pipeline_wait_durable(
    pipeline: SprigPipeline,
    seq: u64,
    info: *mut SprigCommitInfo,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let done = with_pipeline(pipeline, |p, _| Ok(p.wait_durable(seq)?))?;
        put_info(info, &done)
    })
}

/// Wait until every submitted batch is durable. `*committed` (if not null) says whether any
/// batch was committed through the pipeline, and `*info` (if not null) receives the last one.
/// The pipeline can be used again afterwards.
///
/// # Safety
/// `info` is null or points to a writable `SprigCommitInfo`; `committed` is null or writable;
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_pipeline_flush(
    pipeline: SprigPipeline,
    info: *mut SprigCommitInfo,
    committed: *mut bool,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let last = with_pipeline(pipeline, |p, _| Ok(p.flush()?))?;
        if !committed.is_null() {
            put_out(committed, "committed", last.is_some())?;
        }
        match &last {
            Some(done) => put_info(info, done),
            None => Ok(()),
        }
    })
}

/// Wait for every submitted batch, then free the pipeline. The handle is freed whether or not
/// the wait succeeds; its status is the wait's (a failed commit's error).
///
/// # Safety
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_pipeline_free(
    pipeline: SprigPipeline,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let Object::Pipeline(cell, _db) = handles::remove(pipeline, "a pipeline", |o| {
            matches!(o, Object::Pipeline(..))
        })?
        else {
            return Err(Fail::new(SprigStatus::InvalidHandle, "not a pipeline"));
        };
        lock(&cell).flush()?;
        Ok(())
    })
}
