//! First steps: open a database, commit a batch, read, prove and verify, reopen.
//!
//! ```sh
//! cargo run -p sprig --example basic
//! ```

use sprig::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;

    // Byte keys hash to 32-byte key paths with the database's hasher (BLAKE3 by default).
    let alice = db.key_path(b"alice");
    let bob = db.key_path(b"bob");

    // A batch: changes in memory; `finish` gives the new root and a witness, `commit` makes
    // it durable (synced) and the latest version.
    let mut batch = db.begin();
    batch.put(alice, 100u64.to_le_bytes())?;
    batch.put(bob, 50u64.to_le_bytes())?;
    let pending = batch.finish()?;
    println!("new root {}", sprig::hex(&pending.root()));
    let info = db.commit(pending)?;
    println!(
        "committed version {} with root {}",
        info.seq,
        sprig::hex(&info.root)
    );

    // Reads go through a view: a consistent version that never blocks a writer.
    let view = db.view();
    assert_eq!(view.get(&alice)?, Some(100u64.to_le_bytes().to_vec()));
    assert_eq!(view.get(&db.key_path(b"carol"))?, None);

    // Proofs of inclusion and exclusion, checked with sprig-core alone (`no_std`).
    let proof = view.path_proof(&alice)?;
    let bytes = proof.encode(db.hasher());
    let decoded = sprig_core::PathProof::decode(&bytes, db.hasher())?;
    decoded.verify_value(db.hasher(), &info.root, &alice, Some(&100u64.to_le_bytes()))?;
    let carol = db.key_path(b"carol");
    view.path_proof(&carol)?
        .verify_value(db.hasher(), &info.root, &carol, None)?;
    println!(
        "proof of alice: {} bytes, verified; carol proven absent",
        bytes.len()
    );

    // Delete, then reopen: the same state and root come back from disk.
    let mut batch = db.begin();
    batch.delete(bob);
    let info = db.commit(batch.finish()?)?;
    drop((view, db));
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.root(), info.root);
    assert_eq!(db.len(), 1);
    println!(
        "reopened at version {}: {} entry, root {}",
        db.seq(),
        db.len(),
        sprig::hex(&db.root())
    );
    Ok(())
}
