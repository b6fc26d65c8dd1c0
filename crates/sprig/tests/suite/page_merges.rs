//! A commit merges the pages of a subtree left with few entries into one page, wherever it is:
//! beside dense regions the same commit rewrites (whose ancestors it does not search for a
//! sparse branch: they hold the dense region's entries too), at the limit of entries a merge
//! takes, and at the root.

use sprig::{Db, KeyPath, Options};
use std::collections::BTreeMap;

fn key(i: u32) -> KeyPath {
    sprig_core::Hasher::Blake3.hash_value(&i.to_le_bytes())
}

/// A database of `n` keys (values of 50 bytes), with the model of its contents.
fn loaded(dir: &std::path::Path, n: u32) -> (Db, BTreeMap<KeyPath, Vec<u8>>) {
    let db = Db::create(dir, Options::default()).unwrap();
    let model: BTreeMap<KeyPath, Vec<u8>> = (0..n).map(|i| (key(i), vec![3u8; 50])).collect();
    db.bulk_load(model.iter().map(|(k, v)| (*k, v.clone())), &mut |_| {})
        .unwrap();
    (db, model)
}

/// The database holds exactly the model, and a full check of it is clean.
fn assert_holds(db: &Db, model: &BTreeMap<KeyPath, Vec<u8>>) {
    let view = db.view();
    assert_eq!(view.len(), model.len() as u64);
    for (k, v) in model {
        assert_eq!(view.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
    let report = db.check(&mut |_, _| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.pages, db.stats().pages);
}

/// Delete every key of the left half (first key bit 0) but `keep` spread over it, and update every
/// key of the right half in the same commit; returns the merges the commit made.
fn thin_left_update_right(keep: usize) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = loaded(dir.path(), 3_000);
    let pages_before = db.stats().pages;
    let merges_before = db.stats().page_merges;
    let left: Vec<KeyPath> = model.keys().filter(|k| k[0] < 0x80).copied().collect();
    let right: Vec<KeyPath> = model.keys().filter(|k| k[0] >= 0x80).copied().collect();
    assert!(left.len() > 1_000 && right.len() > 1_000);
    // The kept keys spread over the half, one every `step`.
    let step = left.len() / keep;
    let mut batch = db.begin();
    for (i, k) in left.iter().enumerate() {
        if i % step != 0 || i / step >= keep {
            batch.delete(*k);
            model.remove(k);
        }
    }
    for k in &right {
        batch.put(*k, vec![4u8; 50]).unwrap();
        model.insert(*k, vec![4u8; 50]);
    }
    db.commit(batch.finish().unwrap()).unwrap();
    assert_holds(&db, &model);
    assert!(db.stats().pages < pages_before);
    (db.stats().page_merges - merges_before, db.stats().pages)
}

#[test]
fn a_thinned_half_merges_into_one_page_beside_a_dense_half() {
    // Ten entries left under the root's left child: one merge, there.
    let (merges, pages) = thin_left_update_right(10);
    assert_eq!(merges, 1);
    // Sixteen is the most a merge takes: still one merge, of the whole half.
    let (merges_16, pages_16) = thin_left_update_right(16);
    assert_eq!(merges_16, 1);
    assert_eq!(pages_16, pages);
    // Seventeen: the half is not merged whole, so it keeps more than one page.
    let (_, pages_17) = thin_left_update_right(17);
    assert!(pages_17 > pages);
    // One key in twelve: every page of the half keeps a few (each changed region holds
    // entries, and each is searched above), and neighbouring pages merge in small groups.
    // After the merges, about every two sibling pages hold more than 16 entries together, so
    // the half's 125 entries take at most about 2 x 125 / 17 pages (the right half's pages
    // are those of the first case but its one merged page).
    let keep = 1_500 / 12;
    let (merges_few, pages_few) = thin_left_update_right(keep);
    let left_pages = pages_few - (pages - 1);
    assert!(merges_few > 0);
    assert!(
        left_pages <= 2 * keep as u64 / 17 + 1,
        "{keep} entries in {left_pages} pages after {merges_few} merges"
    );
}

#[test]
fn a_thinned_database_merges_into_one_page_at_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = loaded(dir.path(), 3_000);
    assert!(db.stats().pages > 20);
    let keys: Vec<KeyPath> = model.keys().copied().collect();
    let mut batch = db.begin();
    for k in keys.iter().skip(12) {
        batch.delete(*k);
        model.remove(k);
    }
    db.commit(batch.finish().unwrap()).unwrap();
    assert_holds(&db, &model);
    assert_eq!(db.stats().pages, 1);
}
