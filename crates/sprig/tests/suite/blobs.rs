//! Blobs: `get_ref` gives a value's length and hash with no value read; `read_blob` gives any
//! byte range of it, checked against the hash (a damaged value is a corruption error, never
//! served), for values of every size, committed or still in an overlay.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::{FaultStorage, Storage};
use sprig::{Db, Error, Hasher, KeyPath, Options};
use std::sync::Arc;

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

fn value(i: u64) -> Vec<u8> {
    let len = [0usize, 1, 40, 900, 1500, 5000, 100_000][i as usize % 7];
    (0..len).map(|j| (j as u64 * 31 + i) as u8).collect()
}

#[test]
fn refs_cost_no_value_read_and_ranges_match_the_value() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut b = db.begin();
    for i in 0..70 {
        b.put(key(i), value(i)).unwrap();
    }
    db.commit(b.finish().unwrap()).unwrap();
    // One more in an overlay, not yet written.
    let mut b = db.begin();
    b.put(key(1000), value(6)).unwrap();
    let pending = b.finish().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for (view, extra) in [(db.view(), None), (pending.view().unwrap(), Some(1000))] {
        for i in (0..70).chain(extra) {
            let v = if i == 1000 { value(6) } else { value(i) };
            let reads = db.stats().value_reads;
            let r = view.get_ref(&key(i)).unwrap().unwrap();
            assert_eq!(db.stats().value_reads, reads, "get_ref read a value");
            assert_eq!(
                (r.len, r.hash),
                (v.len() as u64, Hasher::Blake3.hash_value(&v))
            );
            assert_eq!(r.is_external(), v.len() > 1024, "{} bytes", v.len());
            assert_eq!(view.read_blob(&r, ..).unwrap(), v);
            for _ in 0..5 {
                let a = rng.gen_range(0..=v.len() + 3) as u64;
                let z = rng.gen_range(0..=v.len() + 3) as u64;
                let s = a.min(v.len() as u64);
                let e = z.clamp(s, v.len() as u64);
                let want = v[s as usize..e as usize].to_vec();
                assert_eq!(
                    view.read_blob(&r, a..z).unwrap(),
                    want,
                    "{a}..{z} of {}",
                    v.len()
                );
            }
        }
        assert_eq!(view.get_ref(&key(5000)).unwrap(), None);
    }
}

#[test]
fn a_damaged_blob_is_a_corruption_error() {
    let storage = FaultStorage::new(1);
    let st: Arc<dyn Storage> = Arc::new(storage.clone());
    let db = Db::open_with_storage(st, Options::default()).unwrap();
    let big = vec![0x5a; 50_000];
    let mut b = db.begin();
    b.put(key(1), big.clone()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    let view = db.view();
    let r = view.get_ref(&key(1)).unwrap().unwrap();
    assert!(r.is_external());
    // Flip one byte in the middle of the value in every segment file holding it.
    let mut flipped = 0;
    for name in storage.list().unwrap() {
        if let Some(bytes) = storage.file_bytes(&name) {
            if let Some(at) = bytes.windows(64).position(|w| w.iter().all(|b| *b == 0x5a)) {
                storage.corrupt(&name, (at + 20_000) as u64, 0x01).unwrap();
                flipped += 1;
            }
        }
    }
    assert!(flipped > 0, "the value was not found on disk");
    match view.read_blob(&r, 0..10) {
        Err(Error::Corruption { .. }) => {}
        other => panic!("a damaged value was not refused: {other:?}"),
    }
}
