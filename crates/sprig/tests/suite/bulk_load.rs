//! Bulk load builds exactly the state (root, values, proofs) that committing the same items
//! would, for any size, and the database is ordinary afterwards.

use sprig::{Db, KeyPath, Options};
use sprig_core::ReferenceModel;

fn items(n: u32, seed: u32) -> Vec<(KeyPath, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let k = sprig_core::Hasher::Blake3
                .hash_value(&[seed.to_le_bytes(), i.to_le_bytes()].concat());
            let v = match i % 97 {
                0 => vec![],
                1 => vec![0xEE; 1500],
                _ => (u64::from(i) * 31).to_le_bytes().to_vec(),
            };
            (k, v)
        })
        .collect()
}

#[test]
fn bulk_load_matches_the_model_at_every_size() {
    for n in [0u32, 1, 2, 3, 63, 64, 65, 300, 20_000] {
        let items = items(n, n);
        let mut model = ReferenceModel::new(sprig::Hasher::Blake3);
        for (k, v) in &items {
            model.insert(*k, v.clone());
        }
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let report = db.bulk_load(items.clone(), &mut |_| {}).unwrap();
        assert_eq!(report.root, model.root(), "n = {n}");
        assert_eq!(db.root(), model.root());
        assert_eq!(db.len(), n as u64);
        let check = db.check(&mut |_, _| {}).unwrap();
        assert!(check.is_clean(), "{:?}", check.problems);
        drop(db);

        let db = Db::open(dir.path(), Options::default()).unwrap();
        assert_eq!(db.root(), model.root());
        let view = db.view();
        let keys: Vec<KeyPath> = items.iter().map(|(k, _)| *k).collect();
        for (k, v) in keys.iter().zip(view.get_many(&keys).unwrap()) {
            assert_eq!(v.as_deref(), model.get(k));
        }
        for k in keys.iter().step_by(101) {
            view.path_proof(k)
                .unwrap()
                .verify_value(db.hasher(), &view.root(), k, model.get(k))
                .unwrap();
        }
        drop(view);
        // An ordinary database afterwards: commits work and stay equal to the model.
        let mut b = db.begin();
        for (k, _) in items.iter().step_by(3) {
            b.delete(*k);
            model.remove(k);
        }
        let fresh = db.key_path(b"fresh");
        b.put(fresh, b"value".to_vec()).unwrap();
        model.insert(fresh, b"value".to_vec());
        db.commit(b.finish().unwrap()).unwrap();
        assert_eq!(db.root(), model.root(), "n = {n} after a commit");
    }
}

#[test]
fn bulk_load_refuses_a_database_with_data() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut b = db.begin();
    b.put(db.key_path(b"a"), b"1".to_vec()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    let err = db.bulk_load(items(10, 1), &mut |_| {}).unwrap_err();
    assert!(matches!(err, sprig::Error::NotEmpty(_)), "{err}");
}
