//! Status codes, the mapping of engine errors onto them, the guard every entry point runs in
//! (pointer checks, panics caught, the message handed out), and the buffers and strings given
//! to the caller with their checked `free` functions.

use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// What a call did. 0 is success; every other value is an error whose message the call hands
/// out through its `err` argument.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SprigStatus {
    /// Success.
    Ok = 0,
    /// An I/O error (a file could not be read, written or synced).
    Io = 1,
    /// Data on disk failed its checks; nothing damaged was returned.
    Corruption = 2,
    /// An argument is malformed or out of range (a key of the wrong length, a bad option).
    InvalidArgument = 3,
    /// No database, table or snapshot of that name.
    NotFound = 4,
    /// A database, table or snapshot of that name exists already.
    AlreadyExists = 5,
    /// Another process has the database open for writing.
    Locked = 6,
    /// The database was opened read-only.
    ReadOnly = 7,
    /// A proof or witness does not verify (or does not decode).
    ProofInvalid = 8,
    /// A required pointer argument is null.
    NullPointer = 9,
    /// A handle that is unknown, closed, freed, consumed, or of another kind.
    InvalidHandle = 10,
    /// A pending batch that can no longer commit: its base is not the latest version, it was
    /// discarded or superseded, or it was committed already.
    Stale = 11,
    /// A panic inside Sprig, caught at the boundary (a bug: please report it).
    Panic = 12,
    /// Any other error; the message says what.
    Other = 13,
}

/// A failed call: its status and message.
pub(crate) struct Fail {
    pub status: SprigStatus,
    pub message: String,
}

impl Fail {
    pub fn new(status: SprigStatus, message: impl Into<String>) -> Fail {
        Fail {
            status,
            message: message.into(),
        }
    }

    pub fn null(what: &str) -> Fail {
        Fail::new(SprigStatus::NullPointer, format!("{what} is null"))
    }
}

impl From<sprig::Error> for Fail {
    fn from(e: sprig::Error) -> Fail {
        use sprig::Error as E;
        let status = match &e {
            E::Io { .. } => SprigStatus::Io,
            E::Corruption { .. } => SprigStatus::Corruption,
            E::InvalidArgument(_)
            | E::ValueTooLarge { .. }
            | E::HasherMismatch { .. }
            | E::UnsupportedFormat { .. }
            | E::NotRetained { .. }
            | E::NoResolver(_)
            | E::ResolverMissing { .. }
            | E::DefaultTable
            | E::Foreign(_)
            | E::NotEmpty(_) => SprigStatus::InvalidArgument,
            E::NotFound(_) | E::NoSuchTable(_) | E::NoSuchSnapshot(_) => SprigStatus::NotFound,
            E::AlreadyExists(_) | E::TableExists(_) | E::SnapshotExists(_) => {
                SprigStatus::AlreadyExists
            }
            E::Locked(_) => SprigStatus::Locked,
            E::ReadOnly => SprigStatus::ReadOnly,
            E::Proof(_) => SprigStatus::ProofInvalid,
            E::Stale { .. }
            | E::Discarded { .. }
            | E::Superseded { .. }
            | E::AlreadyCommitted(_) => SprigStatus::Stale,
            _ => SprigStatus::Other,
        };
        Fail::new(status, e.to_string())
    }
}

impl From<sprig_core::ProofError> for Fail {
    fn from(e: sprig_core::ProofError) -> Fail {
        Fail::new(SprigStatus::ProofInvalid, e.to_string())
    }
}

/// Run an entry point: its panics caught, its failure turned into a status and, when `err` is
/// not null, a message for the caller.
pub(crate) fn guard(err: *mut *mut c_char, f: impl FnOnce() -> Result<(), Fail>) -> SprigStatus {
    let outcome = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        Err(Fail::new(
            SprigStatus::Panic,
            format!("panic inside sprig: {what}"),
        ))
    });
    match outcome {
        Ok(()) => SprigStatus::Ok,
        Err(fail) => {
            if !err.is_null() {
                // SAFETY: `err` is non-null and, per the API contract, points to writable memory.
                unsafe { *err = give_string(&fail.message) };
            }
            fail.status
        }
    }
}

/// Lock a registry, whatever a panic elsewhere left in it (its maps stay consistent: every
/// change is a single insert or remove).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Strings handed out and not yet freed, by address.
static STRINGS: LazyLock<Mutex<HashMap<usize, ()>>> = LazyLock::new(Default::default);

/// Hand out `s` as a NUL-terminated string the caller frees with [`sprig_string_free`].
fn give_string(s: &str) -> *mut c_char {
    let c = CString::new(s.replace('\0', "?")).unwrap_or_default();
    let p = c.into_raw();
    lock(&STRINGS).insert(p as usize, ());
    p
}

/// Free a message Sprig handed out. Null is allowed (nothing to do); a pointer Sprig did not
/// hand out, or one freed already, is `SPRIG_STATUS_INVALID_HANDLE` and is left alone.
///
/// # Safety
/// `s` is null or a pointer; Sprig only dereferences it if it handed it out and it is live.
#[no_mangle]
pub unsafe extern "C" fn sprig_string_free(s: *mut c_char) -> SprigStatus {
    guard(std::ptr::null_mut(), || {
        if s.is_null() {
            return Ok(());
        }
        if lock(&STRINGS).remove(&(s as usize)).is_none() {
            return Err(Fail::new(
                SprigStatus::InvalidHandle,
                "not a string sprig handed out, or freed already",
            ));
        }
        // SAFETY: the address was produced by `CString::into_raw` and is freed once.
        drop(unsafe { CString::from_raw(s) });
        Ok(())
    })
}

/// Bytes handed to the caller: `len` bytes at `data` (null when `len` is 0). Free with
/// [`sprig_buf_free`].
#[repr(C)]
#[derive(Debug)]
pub struct SprigBuf {
    /// The bytes (null for none).
    pub data: *mut u8,
    /// How many.
    pub len: usize,
}

/// Buffers handed out and not yet freed: address → length.
static BUFFERS: LazyLock<Mutex<HashMap<usize, usize>>> = LazyLock::new(Default::default);

/// Hand `bytes` to the caller as a [`SprigBuf`].
pub(crate) fn give_buf(bytes: Vec<u8>) -> SprigBuf {
    if bytes.is_empty() {
        return SprigBuf {
            data: std::ptr::null_mut(),
            len: 0,
        };
    }
    let len = bytes.len();
    let data = Box::into_raw(bytes.into_boxed_slice()) as *mut u8;
    lock(&BUFFERS).insert(data as usize, len);
    SprigBuf { data, len }
}

/// Free the bytes of `buf` and set it to empty. An empty buffer is fine (nothing to do); bytes
/// Sprig did not hand out, or freed already, are `SPRIG_STATUS_INVALID_HANDLE` and left alone.
///
/// # Safety
/// `buf` is null or points to a `SprigBuf` the caller may write.
#[no_mangle]
pub unsafe extern "C" fn sprig_buf_free(buf: *mut SprigBuf) -> SprigStatus {
    guard(std::ptr::null_mut(), || {
        // SAFETY: checked for null; the caller owns the struct.
        let buf = unsafe { buf.as_mut() }.ok_or_else(|| Fail::null("buf"))?;
        if buf.data.is_null() {
            buf.len = 0;
            return Ok(());
        }
        let Some(len) = lock(&BUFFERS).remove(&(buf.data as usize)) else {
            return Err(Fail::new(
                SprigStatus::InvalidHandle,
                "not a buffer sprig handed out, or freed already",
            ));
        };
        // SAFETY: the address and length are those `give_buf` produced, freed once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf.data, len)) });
        buf.data = std::ptr::null_mut();
        buf.len = 0;
        Ok(())
    })
}

/// How many buffers and strings are handed out and not freed.
pub(crate) fn outstanding_bytes() -> (usize, usize) {
    (lock(&BUFFERS).len(), lock(&STRINGS).len())
}

/// Write `value` through the out-pointer `out`, named `what` in the error.
pub(crate) fn put_out<T>(out: *mut T, what: &str, value: T) -> Result<(), Fail> {
    if out.is_null() {
        return Err(Fail::null(what));
    }
    // SAFETY: non-null; per the API contract it points to writable memory for a `T`.
    unsafe { out.write(value) };
    Ok(())
}

/// Check an out-pointer before any work is done (so a failed call changes nothing).
pub(crate) fn need_out<T>(out: *mut T, what: &str) -> Result<(), Fail> {
    if out.is_null() {
        Err(Fail::null(what))
    } else {
        Ok(())
    }
}

/// The 32-byte key path at `p`.
pub(crate) fn key_at(p: *const u8, what: &str) -> Result<[u8; 32], Fail> {
    if p.is_null() {
        return Err(Fail::null(what));
    }
    let mut key = [0u8; 32];
    // SAFETY: non-null; per the API contract it points to 32 readable bytes.
    unsafe { std::ptr::copy_nonoverlapping(p, key.as_mut_ptr(), 32) };
    Ok(key)
}

/// The `len` bytes at `p` (null allowed when `len` is 0).
pub(crate) fn bytes_at<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Fail::null(what));
    }
    // SAFETY: non-null; per the API contract it points to `len` readable bytes that outlive
    // the call.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// The `count` 32-byte keys at `keys`, answered by `read` (one value or none per key, in
/// order) into `values[i]` and `found[i]`: the body of every `get_many` call. On failure
/// nothing is written.
pub(crate) fn get_many_into(
    keys: *const u8,
    count: usize,
    values: *mut SprigBuf,
    found: *mut bool,
    read: impl FnOnce(&[[u8; 32]]) -> Result<Vec<Option<Vec<u8>>>, Fail>,
) -> Result<(), Fail> {
    let bytes = count
        .checked_mul(32)
        .ok_or_else(|| Fail::new(SprigStatus::InvalidArgument, "count is too large"))?;
    let flat = bytes_at(keys, bytes, "keys")?;
    if count > 0 {
        need_out(values, "values")?;
        need_out(found, "found")?;
    }
    let keys: Vec<[u8; 32]> = flat
        .chunks_exact(32)
        .map(|c| {
            let mut k = [0u8; 32];
            k.copy_from_slice(c);
            k
        })
        .collect();
    let got = read(&keys)?;
    if got.len() != count {
        return Err(Fail::new(
            SprigStatus::Other,
            format!("an internal error: {} answers to {count} keys", got.len()),
        ));
    }
    for (i, value) in got.into_iter().enumerate() {
        // SAFETY: `values` and `found` hold `count` elements (checked non-null above), and
        // `i < count`.
        unsafe {
            found.add(i).write(value.is_some());
            values.add(i).write(give_buf(value.unwrap_or_default()));
        }
    }
    Ok(())
}

/// The NUL-terminated UTF-8 string at `p`, or `None` for null.
pub(crate) fn str_at<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>, Fail> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null; per the API contract a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map(Some).map_err(|_| {
        Fail::new(
            SprigStatus::InvalidArgument,
            format!("{what} is not valid UTF-8"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_and_strings_are_freed_once_and_unknown_ones_refused() {
        let mut b = give_buf(vec![1, 2, 3]);
        let mut copy = SprigBuf {
            data: b.data,
            len: b.len,
        };
        assert_eq!(unsafe { sprig_buf_free(&mut b) }, SprigStatus::Ok);
        assert!(b.data.is_null());
        assert_eq!(
            unsafe { sprig_buf_free(&mut b) },
            SprigStatus::Ok,
            "empty: nothing to do"
        );
        assert_eq!(
            unsafe { sprig_buf_free(&mut copy) },
            SprigStatus::InvalidHandle
        );
        let mut empty = give_buf(Vec::new());
        assert_eq!(unsafe { sprig_buf_free(&mut empty) }, SprigStatus::Ok);
        assert_eq!(
            unsafe { sprig_buf_free(std::ptr::null_mut()) },
            SprigStatus::NullPointer
        );

        let s = give_string("boom");
        assert_eq!(unsafe { sprig_string_free(s) }, SprigStatus::Ok);
        assert_eq!(unsafe { sprig_string_free(s) }, SprigStatus::InvalidHandle);
        assert_eq!(
            unsafe { sprig_string_free(std::ptr::null_mut()) },
            SprigStatus::Ok
        );
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let mut msg: *mut c_char = std::ptr::null_mut();
        let status = guard(&mut msg, || panic!("deliberate"));
        assert_eq!(status, SprigStatus::Panic);
        let text = unsafe { CStr::from_ptr(msg) }.to_str().unwrap().to_string();
        assert!(text.contains("deliberate"), "{text}");
        assert_eq!(unsafe { sprig_string_free(msg) }, SprigStatus::Ok);
    }
}
