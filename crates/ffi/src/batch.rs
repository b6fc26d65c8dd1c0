//! Write batches and pending batches: begin, put, delete, upsert, finish (root and witness
//! known), commit, discard; and a batch begun on a pending one (a fork or a chain of
//! unfinalized blocks).

use crate::error::{
    bytes_at, get_many_into, give_buf, guard, key_at, lock, need_out, put_out, str_at, Fail,
    SprigBuf, SprigStatus,
};
use crate::handles::{self, BatchCell, Object, SprigBatch, SprigDb, SprigPending};
use sprig::{Db, WriteBatch};
use std::ffi::c_char;
use std::sync::{Arc, Mutex};

/// What a commit made.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SprigCommitInfo {
    /// The new version's sequence number.
    pub seq: u64,
    /// The default table's new root (the state root, NOMT-compatible).
    pub root: [u8; 32],
    /// The new database root over every table.
    pub db_root: [u8; 32],
}

impl From<&sprig::CommitInfo> for SprigCommitInfo {
    fn from(info: &sprig::CommitInfo) -> SprigCommitInfo {
        SprigCommitInfo {
            seq: info.seq,
            root: info.root,
            db_root: info.db_root,
        }
    }
}

/// Write `info` to `*out` if `out` is not null.
pub(crate) fn put_info(out: *mut SprigCommitInfo, info: &sprig::CommitInfo) -> Result<(), Fail> {
    if out.is_null() {
        return Ok(());
    }
    put_out(out, "info", SprigCommitInfo::from(info))
}

/// Register a batch of `db`; its new handle.
pub(crate) fn new_batch(batch: WriteBatch, db: Db) -> u64 {
    handles::insert(Object::Batch(Arc::new(Mutex::new(Some(batch))), db))
}

/// Begin a batch on the latest version.
///
/// # Safety
/// `batch` points to a writable handle; `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_begin(
    db: SprigDb,
    batch: *mut SprigBatch,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(batch, "batch")?;
        let db = handles::db(db)?;
        put_out(batch, "batch", new_batch(db.begin(), db))
    })
}

/// Begin a batch on a pending (finished, uncommitted) batch: it sees the pending batch's
/// changes; committing it commits the pending one first.
///
/// # Safety
/// As [`sprig_begin`].
#[no_mangle]
pub unsafe extern "C" fn sprig_pending_begin(
    pending: SprigPending,
    batch: *mut SprigBatch,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(batch, "batch")?;
        let (pending, db) = handles::pending(pending)?;
        put_out(batch, "batch", new_batch(pending.begin()?, db))
    })
}

/// Run `f` on the open batch `id` with the table `table` names (null: the default table).
fn with_batch<T>(
    id: SprigBatch,
    table: *const c_char,
    f: impl FnOnce(&mut WriteBatch, &sprig::Table) -> sprig::Result<T>,
) -> Result<T, Fail> {
    let (cell, db): (BatchCell, Db) = handles::batch(id)?;
    let table = match str_at(table, "table")? {
        Some(name) => db.table(name)?,
        None => sprig::Table::default_table(),
    };
    let mut slot = lock(&cell);
    let batch = slot.as_mut().ok_or_else(|| {
        Fail::new(
            SprigStatus::InvalidHandle,
            format!("batch {id} was finished"),
        )
    })?;
    Ok(f(batch, &table)?)
}

/// Set `key` (32 bytes) to the `len` bytes at `value` in `table` (null: the default table).
///
/// # Safety
/// `table` is null or a NUL-terminated string; `key` points to 32 readable bytes; `value` to
/// `len` readable bytes (or null with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn sprig_batch_put(
    batch: SprigBatch,
    table: *const c_char,
    key: *const u8,
    value: *const u8,
    len: usize,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let key = key_at(key, "key")?;
        let value = bytes_at(value, len, "value")?.to_vec();
        with_batch(batch, table, |b, t| b.put_in(t, key, value))
    })
}

/// Combine the `len` bytes at `value` with `key`'s stored value by the table's resolver (or
/// set it, when absent). The table must have a resolver.
///
/// # Safety
/// As [`sprig_batch_put`].
#[no_mangle]
pub unsafe extern "C" fn sprig_batch_upsert(
    batch: SprigBatch,
    table: *const c_char,
    key: *const u8,
    value: *const u8,
    len: usize,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let key = key_at(key, "key")?;
        let value = bytes_at(value, len, "value")?.to_vec();
        with_batch(batch, table, |b, t| b.upsert_in(t, key, value))
    })
}

/// The value of `key` (32 bytes) in `table` (null: the default table) as the batch sees it,
/// its own changes first; the read goes into the batch's witness, as a node's reads of a block
/// must. `*found` says whether it is present, and `*value` receives it (empty when absent;
/// free it with `sprig_buf_free`).
///
/// # Safety
/// `table` is null or a NUL-terminated string; `key` 32 readable bytes; `value` and `found`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_batch_get(
    batch: SprigBatch,
    table: *const c_char,
    key: *const u8,
    value: *mut SprigBuf,
    found: *mut bool,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let key = key_at(key, "key")?;
        need_out(value, "value")?;
        need_out(found, "found")?;
        let got = with_batch(batch, table, |b, t| b.get_in(t, &key))?;
        put_out(found, "found", got.is_some())?;
        put_out(value, "value", give_buf(got.unwrap_or_default()))
    })
}

/// The values of `count` keys (`keys`: `count` × 32 bytes) as the batch sees them, read
/// together (one batch of SSD reads), every read joining the batch's witness: `values[i]` and
/// `found[i]` as in [`sprig_batch_get`]. On failure nothing is written.
///
/// # Safety
/// `keys` points to `count * 32` readable bytes; `values` and `found` to `count` writable
/// elements each.
#[no_mangle]
pub unsafe extern "C" fn sprig_batch_get_many(
    batch: SprigBatch,
    table: *const c_char,
    keys: *const u8,
    count: usize,
    values: *mut SprigBuf,
    found: *mut bool,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        get_many_into(keys, count, values, found, |keys| {
            with_batch(batch, table, |b, t| b.get_many_in(t, keys))
        })
    })
}

/// Delete `key` (32 bytes) from `table` (null: the default table).
///
/// # Safety
/// `table` is null or a NUL-terminated string; `key` points to 32 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sprig_batch_delete(
    batch: SprigBatch,
    table: *const c_char,
    key: *const u8,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let key = key_at(key, "key")?;
        with_batch(batch, table, |b, t| b.delete_in(t, key))
    })
}

/// Apply the batch in memory: `*pending` receives a pending batch whose root and witness are
/// known. The batch handle is consumed (freed) whether or not this succeeds.
///
/// # Safety
/// `pending` points to a writable handle; `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_batch_finish(
    batch: SprigBatch,
    pending: *mut SprigPending,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(pending, "pending")?;
        let Object::Batch(cell, db) =
            handles::remove(batch, "a batch", |o| matches!(o, Object::Batch(..)))?
        else {
            return Err(Fail::new(SprigStatus::InvalidHandle, "not a batch"));
        };
        let taken = lock(&cell).take();
        let b = taken.ok_or_else(|| {
            Fail::new(
                SprigStatus::InvalidHandle,
                format!("batch {batch} was finished"),
            )
        })?;
        let finished = b.finish()?;
        put_out(
            pending,
            "pending",
            handles::insert(Object::Pending(finished, db)),
        )
    })
}

/// Discard a batch that was not finished.
///
/// # Safety
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_batch_free(batch: SprigBatch, err: *mut *mut c_char) -> SprigStatus {
    guard(err, || {
        drop(handles::remove(batch, "a batch", |o| {
            matches!(o, Object::Batch(..))
        })?);
        Ok(())
    })
}

/// The pending batch's new state root (32 bytes) into `out`.
///
/// # Safety
/// `out` points to 32 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn sprig_pending_root(
    pending: SprigPending,
    out: *mut u8,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(out, "out")?;
        let (p, _) = handles::pending(pending)?;
        put_out(out as *mut [u8; 32], "out", p.root())
    })
}

/// The witness of every key the batch read or wrote in the default table, against the root
/// it began on (docs/PROOF_FORMAT.md), into `out`; check it with `sprig_verify_witness`.
///
/// # Safety
/// `out` points to a writable `SprigBuf`.
#[no_mangle]
pub unsafe extern "C" fn sprig_pending_witness(
    pending: SprigPending,
    out: *mut SprigBuf,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(out, "out")?;
        let (p, db) = handles::pending(pending)?;
        put_out(out, "out", give_buf(p.witness().encode(db.hasher())))
    })
}

/// Make the pending batch (and the uncommitted ones it was built on) durable and the latest
/// version. The pending handle is consumed (freed) whether or not this succeeds.
/// `SPRIG_STATUS_STALE` if another commit happened since it began, or a sibling was committed.
///
/// # Safety
/// `info` is null or points to a writable `SprigCommitInfo`.
#[no_mangle]
pub unsafe extern "C" fn sprig_commit(
    db: SprigDb,
    pending: SprigPending,
    info: *mut SprigCommitInfo,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let d = handles::db(db)?;
        let done = d.commit(take_pending(pending)?)?;
        put_info(info, &done)
    })
}

/// Take the pending batch of `id` out of the registry (its handle is consumed).
pub(crate) fn take_pending(id: SprigPending) -> Result<sprig::Pending, Fail> {
    match handles::remove(id, "a pending batch", |o| matches!(o, Object::Pending(..)))? {
        Object::Pending(p, _) => Ok(p),
        _ => Err(Fail::new(SprigStatus::InvalidHandle, "not a pending batch")),
    }
}

/// Free a pending batch handle without committing it. Batches already begun on it keep what
/// they need (committing one of them still commits these changes first); otherwise the
/// changes are dropped.
///
/// # Safety
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_pending_free(
    pending: SprigPending,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        drop(handles::remove(pending, "a pending batch", |o| {
            matches!(o, Object::Pending(..))
        })?);
        Ok(())
    })
}
