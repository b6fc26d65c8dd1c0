//! A batch's witness reuses the proof buffer of the last dropped overlay's witness: a large
//! witness is a fresh mapping otherwise, faulted in page by page as it is filled (26 ms of a
//! transfer batch of 25,000 transfers, on the path to its root), then unmapped. This file's one
//! test runs alone in its binary: the kept buffer is process-wide.

use sprig::{Db, KeyPath, Options};

fn key(i: u32) -> KeyPath {
    sprig_core::Hasher::Blake3.hash_value(&i.to_le_bytes())
}

#[test]
fn a_witness_reuses_the_buffer_a_dropped_one_gave_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut b = db.begin();
    for i in 0..20_000 {
        b.put(key(i), i.to_le_bytes().to_vec()).unwrap();
    }
    db.commit(b.finish().unwrap()).unwrap();

    let batch = |from: u32, n: u32| {
        let mut b = db.begin();
        for i in from..from + n {
            b.put(key(i * 7 % 20_000), vec![i as u8; 40]).unwrap();
        }
        b.finish().unwrap()
    };
    // A large witness, dropped unused: its buffer is kept.
    let first = batch(0, 5_000);
    let (ptr, capacity) = {
        let nodes = &first.witness().proof.nodes;
        (nodes.as_ptr(), nodes.capacity())
    };
    assert!(
        capacity > 10_000,
        "a witness of 5,000 keys: {capacity} nodes"
    );
    drop(first);

    // A smaller one takes it, and is whole: it verifies and proves what the batch read.
    let second = batch(100, 1_000);
    assert_eq!(
        second.witness().proof.nodes.as_ptr(),
        ptr,
        "the second witness did not take the first one's buffer"
    );
    assert_eq!(second.witness().proof.nodes.capacity(), capacity);
    let verified = second.witness().verify(db.hasher(), &db.root()).unwrap();
    assert_eq!(verified.root(), db.root());

    // While the second lives, a third gets a buffer of its own.
    let third = batch(300, 1_000);
    assert_ne!(third.witness().proof.nodes.as_ptr(), ptr);
    third.witness().verify(db.hasher(), &db.root()).unwrap();
    db.commit(second).unwrap();
    drop(third);
}
