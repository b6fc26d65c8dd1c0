//! Cursors against the model's sorted map: every kind of range bound, forward and reverse,
//! seeks, batches, and resumption from `resume_from` on a new cursor, over databases large
//! enough that a scan crosses many read batches (hundreds of pages), on committed versions and
//! on overlays; a cursor outlives the view it came from and keeps its version.

use proptest::prelude::*;
use sprig::{Db, KeyPath, Options, ReadView};
use std::collections::BTreeMap;
use std::ops::Bound;

fn key(seed: u64, i: u64) -> KeyPath {
    let mut k = sprig::Hasher::Blake3.hash_value(&[seed.to_le_bytes(), i.to_le_bytes()].concat());
    if i.is_multiple_of(7) {
        // Clusters sharing long prefixes: deep pages, boundaries inside them.
        k[..29].copy_from_slice(&[0x42; 29]);
    }
    k
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let n = (i * 37 + round) % 90;
    let mut v = vec![(i % 251) as u8; n as usize];
    if i.is_multiple_of(97) {
        v = vec![round as u8; 5000]; // a value-log value
    }
    v
}

/// A database of `n` entries built in two commits (the second rewrites a third of them and
/// deletes a tenth), and the model.
fn build(seed: u64, n: u64) -> (Db, BTreeMap<KeyPath, Vec<u8>>) {
    let db = Db::open_in_memory(Options {
        page_cache_bytes: 1 << 20,
        ..Options::default()
    })
    .unwrap();
    let mut model = BTreeMap::new();
    let mut b = db.begin();
    for i in 0..n {
        b.put(key(seed, i), value(i, 0)).unwrap();
        model.insert(key(seed, i), value(i, 0));
    }
    db.commit(b.finish().unwrap()).unwrap();
    let mut b = db.begin();
    for i in (0..n).step_by(3) {
        b.put(key(seed, i), value(i, 1)).unwrap();
        model.insert(key(seed, i), value(i, 1));
    }
    for i in (1..n).step_by(10) {
        b.delete(key(seed, i));
        model.remove(&key(seed, i));
    }
    db.commit(b.finish().unwrap()).unwrap();
    (db, model)
}

fn bound(kind: u8, k: KeyPath) -> Bound<KeyPath> {
    match kind % 3 {
        0 => Bound::Included(k),
        1 => Bound::Excluded(k),
        _ => Bound::Unbounded,
    }
}

fn expected(
    model: &BTreeMap<KeyPath, Vec<u8>>,
    lo: Bound<KeyPath>,
    hi: Bound<KeyPath>,
    reverse: bool,
) -> Vec<(KeyPath, Vec<u8>)> {
    // BTreeMap::range panics on an inverted or empty-excluded range; filter instead.
    let inside = |k: &KeyPath| {
        (match lo {
            Bound::Included(a) => *k >= a,
            Bound::Excluded(a) => *k > a,
            Bound::Unbounded => true,
        }) && (match hi {
            Bound::Included(b) => *k <= b,
            Bound::Excluded(b) => *k < b,
            Bound::Unbounded => true,
        })
    };
    let mut v: Vec<_> = model
        .iter()
        .filter(|(k, _)| inside(k))
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    if reverse {
        v.reverse();
    }
    v
}

/// Read a range in batches of `step`, each batch from a fresh cursor resumed where the last
/// one stopped (as a client paging through a server would).
fn read_resumed(
    view: &ReadView,
    lo: Bound<KeyPath>,
    hi: Bound<KeyPath>,
    reverse: bool,
    step: usize,
) -> Vec<(KeyPath, Vec<u8>)> {
    let mut out = Vec::new();
    let mut cursor = view.range((lo, hi));
    if reverse {
        cursor = cursor.reverse();
    }
    loop {
        let batch = cursor.next_n(step).unwrap();
        out.extend(batch.iter().cloned());
        let Some(from) = cursor.resume_from() else {
            break;
        };
        assert!(
            !batch.is_empty() || step == 0,
            "a cursor resumable after an empty batch"
        );
        cursor = if reverse {
            view.range((lo, Bound::Included(from))).reverse()
        } else {
            view.range((Bound::Included(from), hi))
        };
    }
    out
}

#[test]
fn full_scans_cross_many_read_batches_both_ways() {
    let (db, model) = build(1, 30_000);
    let view = db.view();
    assert!(
        db.stats().pages > 200,
        "too few pages to cross read batches"
    );
    let forward: Vec<_> = view.iter().map(|e| e.unwrap()).collect();
    assert_eq!(
        forward,
        expected(&model, Bound::Unbounded, Bound::Unbounded, false)
    );
    let reverse: Vec<_> = view.iter().reverse().map(|e| e.unwrap()).collect();
    assert_eq!(
        reverse,
        expected(&model, Bound::Unbounded, Bound::Unbounded, true)
    );
}

#[test]
fn a_cursor_outlives_its_view_and_keeps_its_version() {
    let (db, model) = build(2, 3_000);
    let mut cursor = {
        let view = db.view();
        view.iter()
    };
    let first = cursor.next_n(10).unwrap();
    // Rewrite everything and clean: the cursor still reads the version it pinned.
    let mut b = db.begin();
    for k in model.keys() {
        b.delete(*k);
    }
    db.commit(b.finish().unwrap()).unwrap();
    while db.clean().unwrap().is_some() {}
    let rest: Vec<_> = cursor.map(|e| e.unwrap()).collect();
    let all: Vec<_> = first.into_iter().chain(rest).collect();
    assert_eq!(
        all,
        expected(&model, Bound::Unbounded, Bound::Unbounded, false)
    );
    assert_eq!(db.view().iter().count(), 0);
}

#[test]
fn cursors_on_an_overlay_see_its_changes() {
    let (db, mut model) = build(3, 2_000);
    let mut b = db.begin();
    for i in 5_000..5_300u64 {
        b.put(key(3, i), value(i, 2)).unwrap();
        model.insert(key(3, i), value(i, 2));
    }
    let first = *model.keys().next().unwrap();
    b.delete(first);
    model.remove(&first);
    let pending = b.finish().unwrap();
    let view = pending.view().unwrap();
    let got: Vec<_> = view.iter().reverse().map(|e| e.unwrap()).collect();
    assert_eq!(
        got,
        expected(&model, Bound::Unbounded, Bound::Unbounded, true)
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn ranges_seeks_and_resumption_match_the_model(
        seed in 0u64..4,
        n in prop_oneof![Just(0u64), 1u64..40, 2_000u64..6_000],
        ends in proptest::collection::vec((any::<u8>(), any::<u64>(), any::<bool>()), 6),
        reverse in any::<bool>(),
        step in 1usize..700,
    ) {
        let (db, model) = build(seed, n);
        let view = db.view();
        let keys: Vec<KeyPath> = model.keys().copied().collect();
        // Bounds on existing keys, next to them, or anywhere.
        let pick = |(kind, r, exact): (u8, u64, bool)| {
            let k = if exact && !keys.is_empty() {
                keys[(r % keys.len() as u64) as usize]
            } else {
                key(99, r)
            };
            bound(kind, k)
        };
        for pair in ends.chunks(2) {
            let (lo, hi) = (pick(pair[0]), pick(pair[1]));
            let want = expected(&model, lo, hi, reverse);
            let mut cursor = view.range((lo, hi));
            if reverse {
                cursor = cursor.reverse();
            }
            let got: Vec<_> = cursor.map(|e| e.unwrap()).collect();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(&read_resumed(&view, lo, hi, reverse, step), &want);
            // Seek to a point inside: the rest from there on.
            if let Some((k, _)) = want.get(want.len() / 2) {
                let mut cursor = view.range((lo, hi));
                if reverse {
                    cursor = cursor.reverse();
                }
                cursor.seek(k);
                let rest = cursor.next_n(usize::MAX).unwrap();
                prop_assert_eq!(&rest[..], &want[want.len() / 2..]);
            }
        }
    }
}
