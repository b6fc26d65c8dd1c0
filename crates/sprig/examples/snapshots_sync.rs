//! Named snapshots, cursors and state sync: save a durable snapshot that copies no data,
//! scan it with a cursor, export its default table as verifiable chunks, and fill a fresh
//! database from those chunks, checking every chunk against the trusted root.
//!
//! ```sh
//! cargo run -p sprig --example snapshots_sync
//! ```

use sprig::{Db, ImportOptions, Options, Table};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    let mut batch = db.begin();
    for i in 0u32..10_000 {
        batch.put(db.key_path(&i.to_le_bytes()), i.to_le_bytes())?;
    }
    db.commit(batch.finish()?)?;

    // A named snapshot: durable, survives reopen and later commits, copies nothing.
    let snap = db.save_snapshot("block-100")?;
    println!("snapshot {} at version {}", snap.name, snap.seq);
    let mut batch = db.begin();
    batch.delete(db.key_path(&0u32.to_le_bytes()));
    db.commit(batch.finish()?)?;

    // Cursors over a snapshot: any range, forward or reverse, in key-path order.
    let view = db.open_snapshot("block-100")?;
    let first: Vec<_> = view.iter().take(3).collect::<sprig::Result<_>>()?;
    let last = view.iter().reverse().next().transpose()?;
    println!(
        "snapshot holds {} entries; first key {}, last key {}",
        view.len(),
        sprig::hex(&first[0].0),
        sprig::hex(&last.ok_or("empty")?.0)
    );

    // State sync: chunks of at most 1,000 entries, each with a range proof.
    let table = Table::default_table();
    let trusted_root = view.root(); // e.g. from a block header
    let mut chunks = Vec::new();
    let mut start = [0u8; 32];
    loop {
        let chunk = view.export_range(&table, start, None, 1_000)?;
        let next = chunk.end;
        chunks.push(chunk);
        match next {
            Some(end) => start = end,
            None => break,
        }
    }
    println!("exported {} chunks", chunks.len());

    // A new node fills an empty database; a chunk that fails its proof stops the import and
    // nothing is published.
    let fresh = Db::open_in_memory(Options::default())?;
    let info = fresh.import_chunks(
        &table,
        trusted_root,
        chunks.into_iter().map(Ok),
        &ImportOptions::default(),
    )?;
    assert_eq!(info.root, trusted_root);
    assert_eq!(fresh.len(), 10_000);
    println!(
        "synced {} entries, root {}",
        fresh.len(),
        sprig::hex(&info.root)
    );

    // Restore makes the snapshot the latest version again (one commit, no copying).
    db.restore_snapshot("block-100")?;
    assert_eq!(db.len(), 10_000);
    Ok(())
}
