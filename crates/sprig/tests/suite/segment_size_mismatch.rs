//! The segment size is fixed in the manifest; a checkpoint (checksum and all) stating another
//! one is corruption when the database opens. Before, the checkpoint's size silently decided
//! where new blocks went and the bounds every location was checked against.

use sprig::io::MemoryStorage;
use sprig::log::checkpoint::{parse_checkpoint_file_name, Checkpoint};
use sprig::{Db, Hasher, Options};
use std::sync::Arc;

#[test]
fn a_checkpoint_with_another_segment_size_than_the_manifest_is_corruption() {
    let storage = Arc::new(MemoryStorage::new());
    let options = Options {
        hasher: Some(Hasher::Blake3),
        segment_bytes: 1 << 20,
        ..Options::default()
    };
    let db = Db::open_with_storage(storage.clone(), options.clone()).unwrap();
    let mut batch = db.begin();
    batch.put(db.key_path(b"k"), b"v".to_vec()).unwrap();
    db.commit(batch.finish().unwrap()).unwrap();
    db.checkpoint().unwrap();
    drop(db);

    let seq = sprig::io::Storage::list(storage.as_ref())
        .unwrap()
        .iter()
        .filter_map(|n| parse_checkpoint_file_name(n))
        .max()
        .unwrap();
    let mut cp = Checkpoint::load(
        storage.as_ref(),
        seq,
        &sprig::state::arena::Arena::new(),
        Hasher::Blake3,
    )
    .unwrap();
    // A size the checkpoint decoder accepts on its own, but not the manifest's.
    cp.table.segment_blocks *= 2;
    cp.store(storage.as_ref()).unwrap();
    let e = Db::open_with_storage(storage, options).err().unwrap();
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("segment size"), "{e}");
}
