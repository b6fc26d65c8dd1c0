//! Read views (the latest version or a retained one): get, get_many, path proofs; and proof
//! and witness verification through `sprig-core`, which needs no database.

use crate::db::hasher_of;
use crate::error::{
    bytes_at, get_many_into, give_buf, guard, key_at, need_out, put_out, str_at, Fail, SprigBuf,
    SprigStatus,
};
use crate::handles::{self, Object, SprigDb, SprigView};
use sprig::ReadView;
use std::ffi::c_char;

/// A view of the latest committed version into `*view`; it never changes, whatever is
/// committed later. Free it with `sprig_view_free`.
///
/// # Safety
/// `view` points to a writable handle; `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_view(
    db: SprigDb,
    view: *mut SprigView,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(view, "view")?;
        let v = handles::db(db)?.view();
        put_out(view, "view", handles::insert(Object::View(v)))
    })
}

/// A view of the retained version `seq` (`SPRIG_STATUS_INVALID_ARGUMENT` if it is not
/// retained).
///
/// # Safety
/// As [`sprig_view`].
#[no_mangle]
pub unsafe extern "C" fn sprig_view_at(
    db: SprigDb,
    seq: u64,
    view: *mut SprigView,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(view, "view")?;
        let v = handles::db(db)?.view_at(seq)?;
        put_out(view, "view", handles::insert(Object::View(v)))
    })
}

/// Free a view.
///
/// # Safety
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_view_free(view: SprigView, err: *mut *mut c_char) -> SprigStatus {
    guard(err, || {
        drop(handles::remove(view, "a view", |o| {
            matches!(o, Object::View(_))
        })?);
        Ok(())
    })
}

/// The view's version: its state root (32 bytes) into `root` and sequence number into `seq`
/// (either may be null).
///
/// # Safety
/// `root` is null or 32 writable bytes; `seq` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_view_root(
    view: SprigView,
    root: *mut u8,
    seq: *mut u64,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let v = handles::view(view)?;
        if !root.is_null() {
            put_out(root as *mut [u8; 32], "root", v.root())?;
        }
        if !seq.is_null() {
            put_out(seq, "seq", v.seq())?;
        }
        Ok(())
    })
}

fn table_of(v: &ReadView, table: *const c_char) -> Result<sprig::Table, Fail> {
    Ok(match str_at(table, "table")? {
        Some(name) => v.table(name)?,
        None => sprig::Table::default_table(),
    })
}

/// The value of `key` (32 bytes) in `table` (null: the default table): `*found` says whether
/// it is present, and `*value` receives it (empty when absent; free it with `sprig_buf_free`).
///
/// # Safety
/// `table` is null or a NUL-terminated string; `key` 32 readable bytes; `value` and `found`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_view_get(
    view: SprigView,
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
        let v = handles::view(view)?;
        let got = v.get_in(&table_of(&v, table)?, &key)?;
        put_out(found, "found", got.is_some())?;
        put_out(value, "value", give_buf(got.unwrap_or_default()))
    })
}

/// The values of `count` keys (`keys`: `count` × 32 bytes) read together (one batch of SSD
/// reads): `values[i]` and `found[i]` as in [`sprig_view_get`]. On failure nothing is
/// written.
///
/// # Safety
/// `keys` points to `count * 32` readable bytes; `values` and `found` to `count` writable
/// elements each.
#[no_mangle]
pub unsafe extern "C" fn sprig_view_get_many(
    view: SprigView,
    table: *const c_char,
    keys: *const u8,
    count: usize,
    values: *mut SprigBuf,
    found: *mut bool,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        get_many_into(keys, count, values, found, |keys| {
            let v = handles::view(view)?;
            Ok(v.get_many_in(&table_of(&v, table)?, keys)?)
        })
    })
}

/// A path proof of `key` (32 bytes) in the default table against the view's root: its
/// encoding (docs/PROOF_FORMAT.md) into `proof`. It proves the value, or the absence.
///
/// # Safety
/// `key` 32 readable bytes; `proof` a writable `SprigBuf`.
#[no_mangle]
pub unsafe extern "C" fn sprig_view_prove(
    view: SprigView,
    key: *const u8,
    proof: *mut SprigBuf,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let key = key_at(key, "key")?;
        need_out(proof, "proof")?;
        let v = handles::view(view)?;
        let p = v.path_proof(&key)?;
        put_out(proof, "proof", give_buf(p.encode(v.hasher())))
    })
}

fn hasher_arg(h: u32) -> Result<sprig::Hasher, Fail> {
    Ok(hasher_of(h)?.unwrap_or_default())
}

/// Check an encoded path proof of `key` against `root` (both 32 bytes), with hasher `hasher`
/// (a `SPRIG_HASHER_*` value; `SPRIG_HASHER_DEFAULT` is BLAKE3): that `key` has exactly the `value_len` bytes at
/// `value`, or, with `value` null, that it is absent. `SPRIG_STATUS_OK` if it verifies,
/// `SPRIG_STATUS_PROOF_INVALID` if not. Needs no database.
///
/// # Safety
/// `proof` points to `proof_len` readable bytes; `root` and `key` to 32; `value` is null or
/// points to `value_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sprig_verify_path_proof(
    hasher: u32,
    proof: *const u8,
    proof_len: usize,
    root: *const u8,
    key: *const u8,
    value: *const u8,
    value_len: usize,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let h = hasher_arg(hasher)?;
        let bytes = bytes_at(proof, proof_len, "proof")?;
        let root = key_at(root, "root")?;
        let key = key_at(key, "key")?;
        let value = if value.is_null() {
            None
        } else {
            Some(bytes_at(value, value_len, "value")?)
        };
        let p = sprig_core::PathProof::decode(bytes, h)?;
        p.verify_value(h, &root, &key, value)?;
        Ok(())
    })
}

/// Check an encoded block witness (from `sprig_pending_witness`) against the root it was
/// made on (32 bytes): `SPRIG_STATUS_OK` if every key it lists is proven, else
/// `SPRIG_STATUS_PROOF_INVALID`. `*keys` (may be null) receives how many keys it proves.
///
/// # Safety
/// `witness` points to `len` readable bytes; `root` to 32; `keys` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_verify_witness(
    hasher: u32,
    witness: *const u8,
    len: usize,
    root: *const u8,
    keys: *mut usize,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let h = hasher_arg(hasher)?;
        let bytes = bytes_at(witness, len, "witness")?;
        let root = key_at(root, "root")?;
        let w = sprig_core::Witness::decode(bytes, h)?;
        let verified = w.verify(h, &root)?;
        if !keys.is_null() {
            put_out(keys, "keys", verified.keys().len())?;
        }
        Ok(())
    })
}
