//! Overlays and forks: finished batches that are not yet committed can be read, built on and
//! proven against; competing forks of the same parent stay apart until one is committed.
//!
//! ```sh
//! cargo run -p sprig --example forks
//! ```

use sprig::{Db, Error, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open_in_memory(Options::default())?;
    let counter = db.key_path(b"counter");
    let mut batch = db.begin();
    batch.put(counter, 1u64.to_le_bytes())?;
    db.commit(batch.finish()?)?;

    // Two blocks proposed on the same parent: each is an overlay with its own root.
    let mut a = db.begin();
    a.put(counter, 2u64.to_le_bytes())?;
    let fork_a = a.finish()?;
    let mut b = db.begin();
    b.put(counter, 20u64.to_le_bytes())?;
    let fork_b = b.finish()?;
    assert_ne!(fork_a.root(), fork_b.root());

    // A child block on fork A, before A is committed: it sees A's writes.
    let mut child = fork_a.begin()?;
    assert_eq!(child.get(&counter)?, Some(2u64.to_le_bytes().to_vec()));
    child.put(db.key_path(b"child"), b"on top of A".to_vec())?;
    let fork_a_child = child.finish()?;

    // The latest committed version is untouched by any of them.
    assert_eq!(db.view().get(&counter)?, Some(1u64.to_le_bytes().to_vec()));
    println!(
        "fork A {} / fork B {} / A's child {}",
        sprig::hex(&fork_a.root()),
        sprig::hex(&fork_b.root()),
        sprig::hex(&fork_a_child.root())
    );

    // Fork A's child is finalized: committing it commits A first, in order.
    let info = db.commit(fork_a_child)?;
    assert_eq!(info.seq, 3);
    assert_eq!(db.view().get(&counter)?, Some(2u64.to_le_bytes().to_vec()));

    // Fork B's sibling was committed in its place: B is refused, never merged.
    match db.commit(fork_b) {
        Err(e @ Error::Superseded { .. }) => println!("fork B refused: {e}"),
        other => return Err(format!("fork B should be superseded, got {other:?}").into()),
    }

    // Retained versions: read the past, or roll back to it durably.
    let past = db.view_at(1)?;
    assert_eq!(past.get(&counter)?, Some(1u64.to_le_bytes().to_vec()));
    let rolled = db.rollback_to(1)?;
    println!("rolled back to version 1's state as version {}", rolled.seq);
    assert_eq!(db.view().get(&counter)?, Some(1u64.to_le_bytes().to_vec()));
    Ok(())
}
