//! The I/O backend a database reports is the one it really uses: `Db::io_backend()` and
//! `Stats::io_backend` name it and say why io_uring or direct I/O was refused; a forced
//! (posix) or required (io_uring) backend is the one in use, down to the `O_DIRECT` flag the
//! kernel reports on the open segment files.

use sprig::io::{PosixStorage, Storage};
use sprig::{Db, Error, IoBackend, KeyPath, Options};
use std::path::Path;

/// A scratch directory in the build directory, not /tmp: tmpfs refused `O_DIRECT` before
/// Linux 6.6, and the file system under the build is the one CI has.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn open(dir: &Path, backend: IoBackend, direct_io: bool) -> sprig::Result<Db> {
    Db::open(
        dir,
        Options {
            io_backend: backend,
            direct_io,
            page_cache_bytes: 0,
            segment_bytes: 1 << 20,
            ..Options::default()
        },
    )
}

fn keys(db: &Db, n: u32) -> Vec<KeyPath> {
    (0..n).map(|i| db.key_path(&i.to_le_bytes())).collect()
}

/// Commits, reads (single and batched) and proofs through the backend; then the same after a
/// reopen with `reopen`.
fn workload(db: Db, reopen: impl Fn() -> Db) {
    let keys = keys(&db, 3_000);
    let value = |k: &KeyPath, len: usize| k.iter().cycle().take(len).copied().collect::<Vec<u8>>();
    for (i, chunk) in keys.chunks(1_000).enumerate() {
        let mut b = db.begin();
        for k in chunk {
            // Some values go to the value log, read with a second I/O.
            b.put(*k, value(k, if i == 1 { 1_500 } else { 40 }))
                .unwrap();
        }
        db.commit(b.finish().unwrap()).unwrap();
    }
    let check = |db: &Db| {
        let view = db.view();
        let got = view.get_many(&keys).unwrap();
        for (n, (k, v)) in keys.iter().zip(got).enumerate() {
            let len = if (1_000..2_000).contains(&n) {
                1_500
            } else {
                40
            };
            assert_eq!(v, Some(value(k, len)));
        }
        for k in keys.iter().step_by(97) {
            let len = view.get(k).unwrap().map_or(0, |v| v.len());
            let proof = view.path_proof(k).unwrap();
            proof
                .verify_value(db.hasher(), &view.root(), k, Some(&value(k, len)))
                .unwrap();
        }
        assert!(db.check(&mut |_, _| {}).unwrap().is_clean());
    };
    check(&db);
    let root = db.root();
    drop(db);
    let db = reopen();
    assert_eq!(db.root(), root);
    check(&db);
}

/// The flags (`O_*`, from /proc/self/fdinfo) of every file of `dir` this process has open, by
/// file name.
#[cfg(target_os = "linux")]
fn open_file_flags(dir: &Path) -> Vec<(String, i32)> {
    let dir = dir.canonicalize().unwrap();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let entry = entry.unwrap();
        // Descriptors of other threads come and go: skip the ones gone meanwhile.
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if target.parent() != Some(dir.as_path()) {
            continue;
        }
        let Ok(info) =
            std::fs::read_to_string(Path::new("/proc/self/fdinfo").join(entry.file_name()))
        else {
            continue;
        };
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| i32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, flags));
    }
    out
}

/// The open segment files of `db` in `dir` have `O_DIRECT` exactly when `direct`; the log
/// never has it. There must be open segment files, or this checks nothing.
#[cfg(target_os = "linux")]
fn assert_segments_direct(db: &Db, dir: &Path, direct: bool) {
    // A read opens the segment files if nothing has yet.
    db.view().get(&db.key_path(b"any")).unwrap();
    let files = open_file_flags(dir);
    let segments: Vec<_> = files
        .iter()
        .filter(|(n, _)| n.starts_with("seg-"))
        .collect();
    assert!(!segments.is_empty(), "no segment file open: {files:?}");
    for (name, flags) in segments {
        assert_eq!(
            flags & libc::O_DIRECT != 0,
            direct,
            "{name}: flags {flags:o}"
        );
    }
    for (name, flags) in files.iter().filter(|(n, _)| n.starts_with("wal-")) {
        assert_eq!(flags & libc::O_DIRECT, 0, "{name}: flags {flags:o}");
    }
}

#[test]
fn forced_posix_is_in_use_with_direct_io_on_and_off() {
    for direct in [true, false] {
        let dir = scratch();
        let db = open(dir.path(), IoBackend::Posix, direct).unwrap();
        let io = db.io_backend().clone();
        assert_eq!(io.name, "posix", "{io}");
        assert_eq!(
            io.io_uring_refused, None,
            "posix never asks for io_uring: {io}"
        );
        let expect_direct = direct && cfg!(target_os = "linux");
        assert_eq!(io.direct_io, expect_direct, "{io}");
        assert_eq!(
            io.direct_io_refused.is_some(),
            direct && !expect_direct,
            "{io}"
        );
        assert_eq!(db.stats().io_backend, io);
        workload(db, || {
            let db = open(dir.path(), IoBackend::Posix, direct).unwrap();
            assert_eq!(*db.io_backend(), io);
            #[cfg(target_os = "linux")]
            assert_segments_direct(&db, dir.path(), direct);
            db
        });
    }
}

#[cfg(target_os = "linux")]
#[test]
fn required_io_uring_is_in_use() {
    let dir = scratch();
    // This test's subject is io_uring: a kernel that refuses it fails here, with its reason.
    let db = match open(dir.path(), IoBackend::IoUringRequired, true) {
        Ok(db) => db,
        Err(e) => panic!("io_uring is unavailable on this machine: {e}"),
    };
    let io = db.io_backend().clone();
    assert_eq!(io.name, "io_uring", "{io}");
    assert_eq!(
        (io.io_uring_refused.as_deref(), io.direct_io),
        (None, true),
        "{io}"
    );
    assert_eq!(db.stats().io_backend, io);
    workload(db, || {
        let db = open(dir.path(), IoBackend::IoUringRequired, true).unwrap();
        assert_eq!(*db.io_backend(), io);
        assert_segments_direct(&db, dir.path(), true);
        db
    });
}

#[cfg(not(target_os = "linux"))]
#[test]
fn required_io_uring_fails_to_open_off_linux() {
    let dir = scratch();
    assert!(matches!(
        open(dir.path(), IoBackend::IoUringRequired, true),
        Err(Error::IoUringUnavailable { .. })
    ));
}

/// The default asks for io_uring and says whether it got it: what it reports agrees with
/// what a database that requires io_uring gets on the same machine.
#[test]
fn the_default_backend_reports_io_uring_or_why_it_was_refused() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let io = db.io_backend().clone();
    assert_eq!(db.stats().io_backend, io);
    let required = scratch();
    match open(required.path(), IoBackend::IoUringRequired, true) {
        Ok(_) => {
            assert_eq!(io.name, "io_uring", "{io}");
            assert_eq!(io.io_uring_refused, None, "{io}");
        }
        Err(Error::IoUringUnavailable { source }) => {
            assert_eq!(io.name, "posix", "{io}");
            assert_eq!(io.io_uring_refused, Some(source.to_string()), "{io}");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn in_memory_databases_report_the_memory_backend() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let io = db.io_backend();
    assert_eq!(
        (io.name, io.direct_io, &io.io_uring_refused),
        ("memory", false, &None)
    );
    assert_eq!(db.stats().io_backend, *io);
    assert_eq!(io.to_string(), "memory, buffered I/O");
}

/// Direct I/O is probed once, when the directory is opened, with a file that does not stay.
#[test]
fn the_direct_io_probe_leaves_nothing_behind() {
    let dir = scratch();
    let storage = PosixStorage::open(dir.path(), true).unwrap();
    assert_eq!(storage.direct_io(), cfg!(target_os = "linux"));
    assert_eq!(
        storage.direct_io_refused().is_some(),
        !cfg!(target_os = "linux")
    );
    assert_eq!(storage.list().unwrap(), Vec::<String>::new());
}
