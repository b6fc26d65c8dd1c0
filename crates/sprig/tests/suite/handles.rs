//! Independent writable handles: duplicates change independently (each its own values and
//! root, equal to the model's), one commits durably, the other is then refused as superseded.

use sprig::io::{MemoryStorage, Storage};
use sprig::{Db, Hasher, KeyPath, Options};
use sprig_core::ReferenceModel;
use std::sync::Arc;

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

#[test]
fn duplicates_change_independently_and_one_commits() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let db = Db::open_with_storage(storage.clone(), Options::default()).unwrap();
    let mut base = ReferenceModel::new(Hasher::Blake3);
    let mut batch = db.begin();
    for i in 0..100 {
        batch.put(key(i), vec![i as u8]).unwrap();
        base.insert(key(i), vec![i as u8]);
    }
    db.commit(batch.finish().unwrap()).unwrap();

    let mut a = db.handle();
    assert!(!a.has_uncommitted());
    assert_eq!(a.commit().unwrap(), None);
    let mut b = a.duplicate();
    let (mut model_a, mut model_b) = (base.clone(), base.clone());
    // Two rounds each, so each handle stacks overlays.
    for round in 0..2u8 {
        let mut batch = a.begin().unwrap();
        batch.put(key(1), vec![b'a', round]).unwrap();
        batch.delete(key(2));
        model_a.insert(key(1), vec![b'a', round]);
        model_a.remove(&key(2));
        assert_eq!(a.apply(batch).unwrap(), model_a.root());

        let mut batch = b.begin().unwrap();
        batch
            .put(key(1000 + u64::from(round)), vec![b'b'; 3000])
            .unwrap();
        model_b.insert(key(1000 + u64::from(round)), vec![b'b'; 3000]);
        assert_eq!(b.apply(batch).unwrap(), model_b.root());
    }
    // A batch begun on one handle is refused by the other.
    let foreign = a.begin().unwrap();
    assert!(matches!(
        b.apply(foreign).unwrap_err(),
        sprig::Error::Foreign(_)
    ));

    for (handle, model) in [(&a, &model_a), (&b, &model_b)] {
        let view = handle.view().unwrap();
        assert_eq!(view.root(), model.root());
        for k in [key(1), key(2), key(1000), key(1001)] {
            assert_eq!(view.get(&k).unwrap().as_deref(), model.get(&k));
        }
    }
    // The committed state is untouched until a handle commits.
    assert_eq!(db.root(), base.root());

    let info = b.commit().unwrap().unwrap();
    assert_eq!(info.root, model_b.root());
    assert!(!b.has_uncommitted());
    assert_eq!(b.root(), model_b.root());
    // `a`'s overlays are at heights the database reached by `b`'s: superseded.
    let err = a.view().err().unwrap();
    assert!(matches!(err, sprig::Error::Superseded { .. }), "{err}");
    assert!(a.commit().is_err());

    // `b` goes on from its committed state.
    let mut batch = b.begin().unwrap();
    batch.delete(key(1000));
    model_b.remove(&key(1000));
    b.apply(batch).unwrap();
    b.commit().unwrap().unwrap();

    drop((a, b));
    drop(db);
    let db = Db::open_with_storage(storage, Options::default()).unwrap();
    assert_eq!(db.root(), model_b.root());
    assert_eq!(db.view().get(&key(1001)).unwrap(), Some(vec![b'b'; 3000]));
}
