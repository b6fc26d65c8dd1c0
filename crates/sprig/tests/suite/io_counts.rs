//! At steady state, with the page cache off: one SSD page read per lookup and per update, on
//! io_uring (required on Linux: a kernel that refuses it fails these tests) and on posix, each
//! asserted to be the backend in use, with direct I/O on Linux.

use sprig::{Db, IoBackend, KeyPath, Options};

fn keys(db: &Db, n: u32, salt: u32) -> Vec<KeyPath> {
    (0..n)
        .map(|i| db.key_path(&[salt.to_le_bytes(), i.to_le_bytes()].concat()))
        .collect()
}

fn options(backend: IoBackend) -> Options {
    Options {
        page_cache_bytes: 0,
        io_backend: backend,
        ..Options::default()
    }
}

/// Open `dir` with `backend`, and check that it is the backend in use: io_uring must not be
/// refused, and direct I/O must be on where there is direct I/O (Linux).
fn open(dir: &std::path::Path, backend: IoBackend) -> Db {
    let db = match Db::open(dir, options(backend)) {
        Ok(db) => db,
        Err(e) => panic!("opening with {}: {e}", backend.name()),
    };
    let io = db.io_backend();
    let expected = match backend {
        IoBackend::Posix => "posix",
        IoBackend::IoUring | IoBackend::IoUringRequired => "io_uring",
    };
    assert_eq!(io.name, expected, "asked for {}, got {io}", backend.name());
    assert_eq!(io.direct_io, cfg!(target_os = "linux"), "{io}");
    db
}

fn build(backend: IoBackend) -> (tempfile::TempDir, Db, Vec<KeyPath>) {
    // The build directory's file system, not /tmp (tmpfs refused O_DIRECT before Linux 6.6).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = open(dir.path(), backend);
    let present = keys(&db, 20_000, 1);
    for chunk in present.chunks(5_000) {
        let mut b = db.begin();
        for k in chunk {
            b.put(*k, k[..8].to_vec()).unwrap();
        }
        db.commit(b.finish().unwrap()).unwrap();
    }
    (dir, db, present)
}

#[test]
fn one_page_read_per_lookup_and_per_update() {
    // io_uring exists on Linux only.
    let backends: &[IoBackend] = if cfg!(target_os = "linux") {
        &[IoBackend::IoUringRequired, IoBackend::Posix]
    } else {
        &[IoBackend::Posix]
    };
    for &backend in backends {
        let (_dir, db, present) = build(backend);
        let sample: Vec<KeyPath> = present.iter().step_by(97).copied().collect();
        let absent = keys(&db, 200, 2);

        let before = db.stats();
        let view = db.view();
        for k in sample.iter().chain(absent.iter()) {
            let v = view.get(k).unwrap();
            assert_eq!(v.is_some(), sample.contains(k));
        }
        let after = db.stats();
        let lookups = (sample.len() + absent.len()) as u64;
        assert_eq!(after.lookup_page_reads - before.lookup_page_reads, lookups);

        // Updates of keys in distinct pages: one read each, and the batched lookup API too.
        let before = db.stats();
        let got = view.get_many(&sample).unwrap();
        assert!(got.iter().all(Option::is_some));
        let batched = db.stats().lookup_page_reads - before.lookup_page_reads;
        let distinct = sample
            .iter()
            .map(|k| view.region_of(k))
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64;
        assert_eq!(
            batched, distinct,
            "one read per distinct page in a batched lookup"
        );

        let before = db.stats();
        let mut b = db.begin();
        for k in &sample {
            let old = b.get(k).unwrap().unwrap();
            b.put(*k, [old, vec![1]].concat()).unwrap();
        }
        db.commit(b.finish().unwrap()).unwrap();
        let after = db.stats();
        let reads = after.batch_page_reads - before.batch_page_reads;
        let pages_touched = sample
            .iter()
            .map(|k| view.region_of(k))
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64;
        assert_eq!(
            reads, pages_touched,
            "{reads} page reads for updates in {pages_touched} pages ({backend:?})"
        );
        assert_eq!(after.maintenance_page_reads, before.maintenance_page_reads);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn data_survives_reopen_on_disk_with_direct_io() {
    let (dir, db, present) = build(IoBackend::IoUringRequired);
    let root = db.root();
    drop(db);
    let db = open(dir.path(), IoBackend::IoUringRequired);
    assert_eq!(db.root(), root);
    assert_eq!(db.len(), present.len() as u64);
    let view = db.view();
    let before = db.stats();
    for k in present.iter().step_by(101) {
        assert_eq!(view.get(k).unwrap(), Some(k[..8].to_vec()));
    }
    // Read from the SSD, not from memory.
    let reads = db.stats().lookup_page_reads - before.lookup_page_reads;
    assert_eq!(reads, present.iter().step_by(101).count() as u64);
}
