//! A load of many pages at once (a batch's or a view's reads of 256 regions or more) goes in
//! shares on every core: every value comes back in its key's place, whichever share read its
//! page, and a corrupt page is reported, never served.

use sprig::{Db, Error, KeyPath, Options};

fn value(k: &KeyPath) -> Vec<u8> {
    k[..8].to_vec()
}

/// A database in `dir` without a page cache: every page of a load is read from the SSD.
fn uncached(dir: &std::path::Path) -> Db {
    let options = Options {
        page_cache_bytes: 0,
        ..Options::default()
    };
    Db::open(dir, options).unwrap()
}

/// Store every key with its `value`, `per_commit` keys a commit.
fn store(db: &Db, keys: &[KeyPath], per_commit: usize) {
    for chunk in keys.chunks(per_commit) {
        let mut b = db.begin();
        for k in chunk {
            b.put(*k, value(k)).unwrap();
        }
        db.commit(b.finish().unwrap()).unwrap();
    }
}

/// What a load of `asked` returns with `stored` (and nothing else) in the database.
fn expected(stored: &[KeyPath], asked: &[KeyPath]) -> Vec<Option<Vec<u8>>> {
    let present: std::collections::HashSet<KeyPath> = stored.iter().copied().collect();
    asked
        .iter()
        .map(|k| present.contains(k).then(|| value(k)))
        .collect()
}

#[test]
fn a_large_load_returns_every_value_in_place_and_reports_corruption() {
    // The build directory's file system, not /tmp (tmpfs refused O_DIRECT before Linux 6.6).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = uncached(dir.path());
    let keys: Vec<KeyPath> = (0..40_000u32)
        .map(|i| db.key_path(&i.to_le_bytes()))
        .collect();
    store(&db, &keys, 10_000);
    // Asked in an order of their own (reversed), with absent keys between.
    let mut asked: Vec<KeyPath> = Vec::new();
    for (i, k) in keys.iter().rev().enumerate() {
        asked.push(*k);
        if i % 50 == 0 {
            asked.push(db.key_path(&[b"absent".as_slice(), &i.to_le_bytes()].concat()));
        }
    }
    let expected = expected(&keys, &asked);

    let before = db.stats().batch_page_reads;
    let mut batch = db.begin();
    let got = batch.get_many(&asked).unwrap();
    let read = db.stats().batch_page_reads - before;
    assert!(
        read >= 512,
        "{read} pages read in one load: too few for two shares of 128 or more"
    );
    // Every key is asked, so every page is read, each once: the load's runs of keys share the
    // pages of regions that straddle them.
    assert_eq!(read, db.stats().pages, "a page read twice, or not at all");
    assert!(
        got == expected,
        "a batch's large load put a value in another key's place"
    );
    drop(batch);
    let before = db.stats().lookup_page_reads;
    let got = db.view().get_many(&asked).unwrap();
    assert_eq!(
        db.stats().lookup_page_reads - before,
        db.stats().pages,
        "a view's load read a page twice, or not at all"
    );
    assert!(
        got == expected,
        "a view's large load put a value in another key's place"
    );

    // Every page block damaged on disk: the load fails with corruption, from any share.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("seg-") {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        for block in bytes.chunks_mut(4096) {
            if let Some(b) = block.get_mut(200) {
                *b ^= 0x40;
            }
        }
        std::fs::write(&path, bytes).unwrap();
    }
    match db.view().get_many(&asked) {
        Err(Error::Corruption { .. }) => {}
        Err(e) => panic!("a damaged page gave another error: {e}"),
        Ok(_) => panic!("damaged pages were served"),
    }
    let mut batch = db.begin();
    assert!(matches!(
        batch.get_many(&asked),
        Err(Error::Corruption { .. })
    ));
}

/// A batch's and a view's large load whose keys fall in a few regions, each holding the keys of
/// several of the load's runs (a key asked many times): every value comes back in its place,
/// and each page is read once.
#[test]
fn a_region_spanning_many_runs_of_a_load_is_read_once() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = uncached(dir.path());
    let keys: Vec<KeyPath> = (0..200u32).map(|i| db.key_path(&i.to_le_bytes())).collect();
    store(&db, &keys, keys.len());
    let pages = db.stats().pages;
    assert!(
        pages >= 2,
        "{pages} pages: the test needs regions beside each other"
    );
    // Each key 60 times, some absent keys between: 12,000 keys over a handful of regions.
    let mut asked: Vec<KeyPath> = Vec::new();
    for round in 0..60u32 {
        for (i, k) in keys.iter().enumerate() {
            asked.push(*k);
            if i % 40 == 0 {
                asked.push(db.key_path(&[b"absent".as_slice(), &round.to_le_bytes()].concat()));
            }
        }
    }
    let expected = expected(&keys, &asked);
    let before = db.stats().batch_page_reads;
    let mut batch = db.begin();
    let got = batch.get_many(&asked).unwrap();
    assert!(got == expected, "a value in another key's place");
    assert_eq!(
        db.stats().batch_page_reads - before,
        pages,
        "a page read twice, or not at all"
    );
    // Asked again: every page is the batch's already, none is read.
    let got = batch.get_many(&asked).unwrap();
    assert!(
        got == expected,
        "a value in another key's place, asked again"
    );
    assert_eq!(
        db.stats().batch_page_reads - before,
        pages,
        "a page read again"
    );
    // A view's load, the same way.
    let before = db.stats().lookup_page_reads;
    let got = db.view().get_many(&asked).unwrap();
    assert!(got == expected, "a view put a value in another key's place");
    assert_eq!(
        db.stats().lookup_page_reads - before,
        pages,
        "a view read a page twice, or not at all"
    );
}
