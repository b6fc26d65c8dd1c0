//! Keys sharing 240 leading bits make a directory chain about 240 levels deep. Every
//! recursive walk of the directory must work there on a small thread stack (this found a
//! commit path that kept a 4 KiB page buffer in every recursion frame).

use sprig::{Db, KeyPath, Options};
use sprig_core::ReferenceModel;

const STACK_BYTES: usize = 512 << 10;

fn clustered_keys(n: u8) -> Vec<KeyPath> {
    (0..n)
        .map(|i| {
            let mut k = [0xABu8; 32];
            k[30] = i;
            k[31] = i.wrapping_mul(37);
            k
        })
        .collect()
}

#[test]
fn a_240_level_directory_commits_reopens_and_proves_on_a_small_stack() {
    std::thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(|| {
            let storage: std::sync::Arc<dyn sprig::io::Storage> =
                std::sync::Arc::new(sprig::io::MemoryStorage::new());
            let db = Db::open_with_storage(storage.clone(), Options::default()).unwrap();
            let mut model = ReferenceModel::new(db.hasher());
            let keys = clustered_keys(200);
            let mut b = db.begin();
            for k in &keys {
                // 200 values of 100 bytes do not fit one page: the region splits down the
                // shared prefix.
                b.put(*k, vec![k[31]; 100]).unwrap();
                model.insert(*k, vec![k[31]; 100]);
            }
            let pending = b.finish().unwrap();
            assert_eq!(pending.root(), model.root());
            db.commit(pending).unwrap();
            let mut b = db.begin();
            for k in keys.iter().step_by(3) {
                b.delete(*k);
                model.remove(k);
            }
            db.commit(b.finish().unwrap()).unwrap();
            db.checkpoint().unwrap();
            drop(db);
            let db = Db::open_with_storage(storage, Options::default()).unwrap();
            assert_eq!(db.root(), model.root());
            let view = db.view();
            for k in &keys {
                assert_eq!(view.get(k).unwrap().as_deref(), model.get(k));
                view.path_proof(k)
                    .unwrap()
                    .verify_value(db.hasher(), &view.root(), k, model.get(k))
                    .unwrap();
            }
            let w = view.witness(&keys).unwrap();
            w.verify(db.hasher(), &view.root()).unwrap();
        })
        .unwrap()
        .join()
        .unwrap();
}
