//! Witnesses for a block and stateless verification: the full node executes a block and
//! hands out the witness of every key it read or wrote; a stateless client that knows only
//! the previous root checks the witness, re-executes the block against it, and computes the
//! new root itself, with `sprig-core` alone.
//!
//! ```sh
//! cargo run -p sprig --example stateless
//! ```

use sprig::{Db, Hasher, KeyPath, Options};
use sprig_core::proof::verify_block;
use sprig_core::Witness;

fn balance(v: Option<&[u8]>) -> u64 {
    v.and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The full node: some state, then a block of transfers.
    let db = Db::open_in_memory(Options::default())?;
    let accounts: Vec<KeyPath> = (0u32..1000)
        .map(|i| db.key_path(&i.to_le_bytes()))
        .collect();
    let mut genesis = db.begin();
    for a in &accounts {
        genesis.put(*a, 1_000u64.to_le_bytes())?;
    }
    let old_root = db.commit(genesis.finish()?)?.root;

    let transfers = [(1usize, 2usize, 300u64), (7, 1, 50), (999, 3, 1_000)];
    let mut block = db.begin();
    for (from, to, amount) in transfers {
        let f = balance(block.get(&accounts[from])?.as_deref());
        let t = balance(block.get(&accounts[to])?.as_deref());
        block.put(accounts[from], (f - amount).to_le_bytes())?;
        block.put(accounts[to], (t + amount).to_le_bytes())?;
    }
    let pending = block.finish()?;
    let wire: Vec<u8> = pending.witness().encode(db.hasher());
    let new_root = db.commit(pending)?.root;
    println!(
        "block witness: {} bytes for {} transfers",
        wire.len(),
        transfers.len()
    );

    // What the node sends besides the witness: the pre-state value of every touched key
    // (the witness proves their hashes, so the values cannot be forged).
    let touched: std::collections::BTreeSet<KeyPath> = transfers
        .iter()
        .flat_map(|(f, t, _)| [accounts[*f], accounts[*t]])
        .collect();
    let view = db.view_at(1)?;
    let pre_state: Vec<(KeyPath, Option<Vec<u8>>)> = touched
        .iter()
        .map(|k| Ok((*k, view.get(k)?)))
        .collect::<sprig::Result<_>>()?;

    // The stateless client: the old root, the block, the witness bytes and the pre-state
    // values. No database.
    let hasher = Hasher::Blake3;
    let witness = Witness::decode(&wire, hasher)?;
    let verified = witness.verify(hasher, &old_root)?;
    let mut balances = std::collections::BTreeMap::new();
    for (k, v) in &pre_state {
        verified.check_value(k, v.as_deref())?; // a forged value fails here
        balances.insert(*k, balance(v.as_deref()));
    }
    for (from, to, amount) in transfers {
        let f = balances.get_mut(&accounts[from]).ok_or("unwitnessed key")?;
        *f = f.checked_sub(amount).ok_or("overdraft")?;
        *balances.get_mut(&accounts[to]).ok_or("unwitnessed key")? += amount;
    }
    let changes: Vec<_> = balances
        .iter()
        .map(|(k, v)| (*k, Some(hasher.hash_value(&v.to_le_bytes()))))
        .collect();
    let computed = verify_block(hasher, &old_root, &witness, &changes)?;
    assert_eq!(computed, new_root);
    println!(
        "stateless client computed the new root {}",
        sprig::hex(&computed)
    );
    Ok(())
}
