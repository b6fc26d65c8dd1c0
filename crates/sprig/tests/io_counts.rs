//! At steady state, with the page cache off: one SSD page read per lookup and per update.

use sprig::{Db, IoBackend, KeyPath, Options};

fn keys(db: &Db, n: u32, salt: u32) -> Vec<KeyPath> {
    (0..n)
        .map(|i| db.key_path(&[salt.to_le_bytes(), i.to_le_bytes()].concat()))
        .collect()
}

fn build(backend: IoBackend) -> (tempfile::TempDir, Db, Vec<KeyPath>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            page_cache_bytes: 0,
            io_backend: backend,
            ..Options::default()
        },
    )
    .unwrap();
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
    for backend in [IoBackend::IoUring, IoBackend::Posix] {
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

#[test]
fn data_survives_reopen_on_disk_with_direct_io() {
    let (dir, db, present) = build(IoBackend::IoUring);
    let root = db.root();
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.root(), root);
    assert_eq!(db.len(), present.len() as u64);
    let view = db.view();
    for k in present.iter().step_by(101) {
        assert_eq!(view.get(k).unwrap(), Some(k[..8].to_vec()));
    }
    // A second handle on the same directory is refused while the first is open.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(sprig::Error::Locked(_))
    ));
}
