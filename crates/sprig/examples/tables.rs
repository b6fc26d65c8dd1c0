//! Tables and upsert: several named tables committed atomically in one batch, each with its
//! own NOMT-compatible root under one database root; upserts combined by a per-table
//! resolver (built-in or your own); a table proof a light client checks against the
//! database root.
//!
//! ```sh
//! cargo run -p sprig --example tables
//! ```

use sprig::{Db, Options, TableOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A custom resolver, registered by name when opening (it must be associative).
    let options = Options::default().resolver("append-log", |old, new| {
        let mut v = old.to_vec();
        v.extend_from_slice(b"|");
        v.extend_from_slice(new);
        Ok(v)
    });
    let db = Db::open_in_memory(options)?;
    let balances = db.create_table("balances", TableOptions::resolver("add-u64"))?;
    let events = db.create_table("events", TableOptions::resolver("append-log"))?;
    let code = db.create_table("code", TableOptions::default())?;

    let alice = db.key_path(b"alice");
    let mut batch = db.begin();
    batch.put_in(&code, alice, b"wasm bytes".to_vec())?;
    batch.upsert_in(&balances, alice, 100u64.to_le_bytes())?; // absent: stored as is
    batch.upsert_in(&balances, alice, 25u64.to_le_bytes())?; // combined: 125
    batch.upsert_in(&events, alice, b"minted".to_vec())?;
    let info = db.commit(batch.finish()?)?; // every table, atomically

    let mut batch = db.begin();
    batch.upsert_in(&balances, alice, 5u64.to_le_bytes())?; // one read of the stored 125
    batch.upsert_in(&events, alice, b"paid".to_vec())?;
    let info2 = db.commit(batch.finish()?)?;

    let view = db.view();
    assert_eq!(
        view.get_in(&balances, &alice)?,
        Some(130u64.to_le_bytes().to_vec())
    );
    assert_eq!(
        view.get_in(&events, &alice)?.as_deref(),
        Some(&b"minted|paid"[..])
    );
    for t in db.tables() {
        println!(
            "table {:<9} resolver {:<10} root {}",
            t.table.name(),
            t.resolver.as_deref().unwrap_or("-"),
            sprig::hex(&view.table_root(&t.table)?)
        );
    }
    println!(
        "database root {} (was {})",
        sprig::hex(&info2.db_root),
        sprig::hex(&info.db_root)
    );

    // A light client holding only the database root checks alice's balance.
    let proof = view.table_proof(&balances, &alice)?;
    proof.verify_value(
        db.hasher(),
        &info2.db_root,
        "balances",
        &alice,
        Some(&130u64.to_le_bytes()),
    )?;
    println!("table proof of alice's balance verified against the database root");

    // Union: a new table of every key of the inputs, keys in several combined by the resolver.
    let more = db.create_table("more-balances", TableOptions::default())?;
    let mut batch = db.begin();
    batch.put_in(&more, alice, 1u64.to_le_bytes())?;
    db.commit(batch.finish()?)?;
    let (total, _) = db.union(
        "total",
        &[&balances, &more],
        TableOptions::resolver("add-u64"),
    )?;
    assert_eq!(
        db.view().get_in(&total, &alice)?,
        Some(131u64.to_le_bytes().to_vec())
    );
    println!("union of balances and more-balances: alice has 131");
    Ok(())
}
