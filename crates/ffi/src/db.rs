//! Databases: options, open and close, key paths, the latest root and size, tables, stats.

use crate::error::{
    bytes_at, give_buf, guard, need_out, put_out, str_at, Fail, SprigBuf, SprigStatus,
};
use crate::handles::{self, Object, SprigDb};
use std::ffi::c_char;

/// Hasher: whatever the database was made with (BLAKE3 for a new one; for verification,
/// BLAKE3).
pub const SPRIG_HASHER_DEFAULT: u32 = 0;
/// Hasher: BLAKE3.
pub const SPRIG_HASHER_BLAKE3: u32 = 1;
/// Hasher: SHA-256.
pub const SPRIG_HASHER_SHA256: u32 = 2;
/// Hasher: Keccak-256 (Ethereum's).
pub const SPRIG_HASHER_KECCAK256: u32 = 3;

/// How a database is opened. Start from `sprig_options_default` and change what you need.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SprigOptions {
    /// Create the database if the directory holds none (default true).
    pub create_if_missing: bool,
    /// Bytes of decoded pages kept in RAM (default 64 MiB).
    pub page_cache_bytes: u64,
    /// Every commit durable when it returns (default true); false leaves commit records
    /// unsynced (a machine crash may lose the latest commits, never corrupts).
    pub sync_always: bool,
    /// Use io_uring where the kernel allows it (default true), else plain reads.
    pub io_uring: bool,
    /// Bypass the OS page cache with O_DIRECT where the file system allows it (default true).
    pub direct_io: bool,
    /// Committed versions kept for historical reads and rollback (default 4, at least 1).
    pub retained_versions: u32,
    /// The hasher, a `SPRIG_HASHER_*` value (default: whatever is stored; BLAKE3 for a new
    /// database).
    pub hasher: u32,
    /// Segment file size in bytes for a new database, a multiple of 4096 (default 64 MiB).
    pub segment_bytes: u64,
    /// Write a checkpoint once the commit log has grown by this many bytes; it bounds the time
    /// to open (default 64 MiB).
    pub checkpoint_log_bytes: u64,
    /// Write automatic checkpoints on a background thread (default false).
    pub background_checkpoints: bool,
    /// Run the cleaner after commits when disk use passes `max_space_amplification`
    /// (default true).
    pub auto_clean: bool,
    /// The cleaner keeps disk use below this multiple of the live data, not counting what
    /// older retained versions hold (default 2.0, at least 1.2).
    pub max_space_amplification: f64,
    /// Emptied segment files kept for reuse by new segments instead of deleted (default 2).
    pub recycled_segments: u32,
    /// The most memory all finished, uncommitted batches may hold together (default 4 GiB).
    pub max_overlay_bytes: u64,
}

/// The hasher a `SPRIG_HASHER_*` value names (`None` for the default).
pub(crate) fn hasher_of(h: u32) -> Result<Option<sprig::Hasher>, Fail> {
    Ok(match h {
        SPRIG_HASHER_DEFAULT => None,
        SPRIG_HASHER_BLAKE3 => Some(sprig::Hasher::Blake3),
        SPRIG_HASHER_SHA256 => Some(sprig::Hasher::Sha256),
        SPRIG_HASHER_KECCAK256 => Some(sprig::Hasher::Keccak256),
        other => {
            return Err(Fail::new(
                SprigStatus::InvalidArgument,
                format!("unknown hasher {other} (use a SPRIG_HASHER_* value)"),
            ))
        }
    })
}

fn defaults() -> SprigOptions {
    let d = sprig::Options::default();
    SprigOptions {
        create_if_missing: d.create_if_missing,
        page_cache_bytes: d.page_cache_bytes,
        sync_always: d.sync == sprig::SyncPolicy::Always,
        io_uring: d.io_backend != sprig::IoBackend::Posix,
        direct_io: d.direct_io,
        retained_versions: u32::try_from(d.retained_versions).unwrap_or(u32::MAX),
        hasher: SPRIG_HASHER_DEFAULT,
        segment_bytes: d.segment_bytes,
        checkpoint_log_bytes: d.checkpoint_log_bytes,
        background_checkpoints: d.background_checkpoints,
        auto_clean: d.auto_clean,
        max_space_amplification: d.max_space_amplification,
        recycled_segments: u32::try_from(d.recycled_segments).unwrap_or(u32::MAX),
        max_overlay_bytes: d.max_overlay_bytes,
    }
}

/// The engine's options from `o` (null: the defaults).
fn options_of(o: *const SprigOptions) -> Result<sprig::Options, Fail> {
    // SAFETY: null or, per the API contract, a readable `SprigOptions`.
    let o = unsafe { o.as_ref() }.copied().unwrap_or_else(defaults);
    Ok(sprig::Options {
        create_if_missing: o.create_if_missing,
        page_cache_bytes: o.page_cache_bytes,
        sync: if o.sync_always {
            sprig::SyncPolicy::Always
        } else {
            sprig::SyncPolicy::Never
        },
        io_backend: if o.io_uring {
            sprig::IoBackend::IoUring
        } else {
            sprig::IoBackend::Posix
        },
        direct_io: o.direct_io,
        retained_versions: o.retained_versions as usize,
        hasher: hasher_of(o.hasher)?,
        segment_bytes: o.segment_bytes,
        checkpoint_log_bytes: o.checkpoint_log_bytes,
        background_checkpoints: o.background_checkpoints,
        auto_clean: o.auto_clean,
        max_space_amplification: o.max_space_amplification,
        recycled_segments: o.recycled_segments as usize,
        max_overlay_bytes: o.max_overlay_bytes,
        ..sprig::Options::default()
    })
}

/// Fill `*out` with the default options.
///
/// # Safety
/// `out` is null or points to a writable `SprigOptions`.
#[no_mangle]
pub unsafe extern "C" fn sprig_options_default(out: *mut SprigOptions) -> SprigStatus {
    guard(std::ptr::null_mut(), || put_out(out, "out", defaults()))
}

/// Open (or, with `create_if_missing`, create) the database in directory `path`; `options`
/// may be null for the defaults. `*db` receives its handle.
///
/// # Safety
/// Pointers are null or valid: `path` a NUL-terminated string, `options` a readable struct,
/// `db` and `err` writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_open(
    path: *const c_char,
    options: *const SprigOptions,
    db: *mut SprigDb,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let path = str_at(path, "path")?.ok_or_else(|| Fail::null("path"))?;
        need_out(db, "db")?;
        let opened = sprig::Db::open(path, options_of(options)?)?;
        put_out(db, "db", handles::insert(Object::Db(opened)))
    })
}

/// Open a database that lives only in memory.
///
/// # Safety
/// As [`sprig_open`].
#[no_mangle]
pub unsafe extern "C" fn sprig_open_in_memory(
    options: *const SprigOptions,
    db: *mut SprigDb,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(db, "db")?;
        let opened = sprig::Db::open_in_memory(options_of(options)?)?;
        put_out(db, "db", handles::insert(Object::Db(opened)))
    })
}

/// Close a database handle. The database itself closes (its lock released) once its views,
/// batches, pending batches and pipelines are freed too. Closing twice is
/// `SPRIG_STATUS_INVALID_HANDLE`.
///
/// # Safety
/// `err` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_close(db: SprigDb, err: *mut *mut c_char) -> SprigStatus {
    guard(err, || {
        let db = handles::remove(db, "a database", |o| matches!(o, Object::Db(_)))?;
        drop(db);
        Ok(())
    })
}

/// The 32-byte key path of the byte key `key` (`len` bytes): its hash with the database's
/// hasher.
///
/// # Safety
/// `key` points to `len` readable bytes (or is null with `len` 0); `out` to 32 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn sprig_key_path(
    db: SprigDb,
    key: *const u8,
    len: usize,
    out: *mut u8,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let key = bytes_at(key, len, "key")?;
        need_out(out, "out")?;
        let path = handles::db(db)?.key_path(key);
        put_out(out as *mut [u8; 32], "out", path)
    })
}

/// The latest state root (the default table's, NOMT-compatible) into `out` (32 bytes), and
/// the latest commit's sequence number into `seq` (may be null).
///
/// # Safety
/// `out` points to 32 writable bytes; `seq` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_root(
    db: SprigDb,
    out: *mut u8,
    seq: *mut u64,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(out, "out")?;
        let view = handles::db(db)?.view();
        put_out(out as *mut [u8; 32], "out", view.root())?;
        if !seq.is_null() {
            put_out(seq, "seq", view.seq())?;
        }
        Ok(())
    })
}

/// Create table `name`; `resolver` names the resolver its upserts use (null: none, upserts
/// refused): a built-in (`add-u64`, `add-u128`, `max`, `min`, `concat`, `replace`).
///
/// # Safety
/// `name` and `resolver` are null or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn sprig_create_table(
    db: SprigDb,
    name: *const c_char,
    resolver: *const c_char,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let name = str_at(name, "name")?.ok_or_else(|| Fail::null("name"))?;
        let resolver = str_at(resolver, "resolver")?.map(str::to_string);
        handles::db(db)?.create_table(name, sprig::TableOptions { resolver })?;
        Ok(())
    })
}

/// Drop table `name` and its entries (one durable commit).
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn sprig_drop_table(
    db: SprigDb,
    name: *const c_char,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        let name = str_at(name, "name")?.ok_or_else(|| Fail::null("name"))?;
        handles::db(db)?.drop_table(name)?;
        Ok(())
    })
}

/// The names of the tables, each followed by a newline, into `out` (free it with
/// `sprig_buf_free`). The default table is listed as `default`.
///
/// # Safety
/// `out` points to a writable `SprigBuf`.
#[no_mangle]
pub unsafe extern "C" fn sprig_tables(
    db: SprigDb,
    out: *mut SprigBuf,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(out, "out")?;
        let mut names = String::new();
        for t in handles::db(db)?.tables() {
            names.push_str(t.table.name());
            names.push('\n');
        }
        put_out(out, "out", give_buf(names.into_bytes()))
    })
}

/// What a database holds and has done since it was opened.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SprigStats {
    /// Entries in the latest version, every table.
    pub entries: u64,
    /// The latest commit's sequence number.
    pub seq: u64,
    /// Commits since open.
    pub commits: u64,
    /// Pages read from the SSD, every kind.
    pub page_reads: u64,
    /// Page reads served by the page cache.
    pub cache_hits: u64,
    /// Bytes written to segments, the log and checkpoints since open.
    pub bytes_written: u64,
    /// Segment space in use.
    pub disk_bytes: u64,
    /// Live pages and values.
    pub live_bytes: u64,
    /// Bytes of RAM the directory's nodes take.
    pub directory_bytes: u64,
    /// Memory held by uncommitted batches.
    pub overlay_bytes: u64,
    /// Committed versions retained.
    pub retained_versions: u64,
    /// Segment space kept only for older retained or read versions.
    pub retained_bytes: u64,
}

/// The database's statistics into `*out`.
///
/// # Safety
/// `out` points to a writable `SprigStats`.
#[no_mangle]
pub unsafe extern "C" fn sprig_stats(
    db: SprigDb,
    out: *mut SprigStats,
    err: *mut *mut c_char,
) -> SprigStatus {
    guard(err, || {
        need_out(out, "out")?;
        let s = handles::db(db)?.stats();
        put_out(
            out,
            "out",
            SprigStats {
                entries: s.entries,
                seq: s.seq,
                commits: s.commits,
                page_reads: s.page_reads(),
                cache_hits: s.cache_hits,
                bytes_written: s.bytes_written,
                disk_bytes: s.disk_bytes,
                live_bytes: s.live_bytes,
                directory_bytes: s.directory_bytes,
                overlay_bytes: s.overlay_bytes,
                retained_versions: s.retained_versions,
                retained_bytes: s.retained_bytes,
            },
        )
    })
}

/// What the caller holds now, for leak checks in tests and debugging: open handles (of
/// every kind), buffers and strings not yet freed. Any pointer may be null.
///
/// # Safety
/// Each pointer is null or writable.
#[no_mangle]
pub unsafe extern "C" fn sprig_outstanding(
    handles_open: *mut usize,
    buffers: *mut usize,
    strings: *mut usize,
) -> SprigStatus {
    guard(std::ptr::null_mut(), || {
        let (b, s) = crate::error::outstanding_bytes();
        for (out, n) in [
            (handles_open, handles::open_count()),
            (buffers, b),
            (strings, s),
        ] {
            if !out.is_null() {
                put_out(out, "count", n)?;
            }
        }
        Ok(())
    })
}
