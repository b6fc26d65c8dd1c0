//! lsm-tree's performance requirement 6, on Sprig: inserting N fresh keys with `put` vs with
//! `upsert`, and combining values of present keys with `upsert` vs lookup-then-insert
//! (`get` then `put` in the same batch). Each phase runs on its own database on the real disk
//! (O_DIRECT where the file system allows), with the page cache given, in one process; the
//! figures are operations per second and the ratios between them.

use anyhow::Result;
use sprig::{Db, Options, SyncPolicy, TableOptions};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The settings of one run.
#[derive(Debug, clap::Args)]
pub struct UpsertArgs {
    /// A scratch directory (its `upsert-*` subdirectories are replaced).
    #[arg(long)]
    pub dir: PathBuf,
    /// Keys inserted, then combined.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Operations per committed batch.
    #[arg(long, default_value_t = 10_000)]
    pub batch: u64,
    /// Rounds of combining every key.
    #[arg(long, default_value_t = 2)]
    pub rounds: u64,
    /// Page cache in MiB.
    #[arg(long, default_value_t = 16)]
    pub cache_mb: u64,
}

fn key(db: &Db, i: u64) -> sprig::KeyPath {
    db.key_path(&i.to_le_bytes())
}

fn open(dir: &Path, name: &str, cache_mb: u64) -> Result<(Db, sprig::Table)> {
    let path = dir.join(format!("upsert-{name}"));
    if path.exists() {
        std::fs::remove_dir_all(&path)?;
    }
    let db = Db::create(
        &path,
        Options {
            page_cache_bytes: cache_mb << 20,
            sync: SyncPolicy::Always,
            ..Options::default()
        },
    )?;
    let t = db.create_table("counts", TableOptions::resolver("add-u64"))?;
    Ok((db, t))
}

/// Run `op` on every key in batches of `batch`, committing each; returns ops per second.
fn phase(
    db: &Db,
    keys: u64,
    batch: u64,
    label: &str,
    op: &mut dyn FnMut(&mut sprig::WriteBatch, sprig::KeyPath) -> sprig::Result<()>,
) -> Result<f64> {
    let start = Instant::now();
    let mut i = 0;
    while i < keys {
        let mut b = db.begin();
        let end = (i + batch).min(keys);
        for j in i..end {
            // Spread the keys of a batch over the key space, as blocks touch accounts.
            let k = key(db, j.wrapping_mul(0x9E37_79B9) % keys);
            op(&mut b, k)?;
        }
        db.commit(b.finish()?)?;
        i = end;
    }
    let secs = start.elapsed().as_secs_f64();
    let rate = keys as f64 / secs;
    eprintln!("{label}: {keys} ops in {secs:.2} s = {rate:.0} ops/s");
    Ok(rate)
}

/// Run the four phases and print the figures.
pub fn run(a: &UpsertArgs) -> Result<()> {
    std::fs::create_dir_all(&a.dir)?;
    let one = 1u64.to_le_bytes();
    let (db_put, t) = open(&a.dir, "put", a.cache_mb)?;
    let insert = phase(&db_put, a.keys, a.batch, "insert with put", &mut |b, k| {
        b.put_in(&t, k, one)
    })?;
    let (db_up, u) = open(&a.dir, "upsert", a.cache_mb)?;
    let insert_upsert = phase(
        &db_up,
        a.keys,
        a.batch,
        "insert with upsert",
        &mut |b, k| b.upsert_in(&u, k, one),
    )?;
    let mut combine_upsert = 0.0;
    let mut combine_lookup = 0.0;
    for round in 0..a.rounds {
        combine_upsert += phase(
            &db_up,
            a.keys,
            a.batch,
            &format!("round {round}: combine with upsert"),
            &mut |b, k| b.upsert_in(&u, k, one),
        )?;
        combine_lookup += phase(
            &db_put,
            a.keys,
            a.batch,
            &format!("round {round}: combine with get then put"),
            &mut |b, k| {
                let old = b.get_in(&t, &k)?.unwrap_or_default();
                let n = u64::from_le_bytes(old.as_slice().try_into().unwrap_or([0; 8]));
                b.put_in(&t, k, (n + 1).to_le_bytes())
            },
        )?;
    }
    let rounds = a.rounds.max(1) as f64;
    let (combine_upsert, combine_lookup) = (combine_upsert / rounds, combine_lookup / rounds);
    // Both databases hold the same state: every key counted 1 + rounds times.
    anyhow::ensure!(
        db_put.view().table_root(&t)? == db_up.view().table_root(&u)?,
        "upsert and lookup-then-insert gave different roots"
    );
    println!(
        "keys {}, batch {}, cache {} MiB, {} rounds (roots equal)",
        a.keys, a.batch, a.cache_mb, a.rounds
    );
    println!("| phase | ops/s |\n|---|---|");
    println!("| insert fresh keys with put | {insert:.0} |");
    println!("| insert fresh keys with upsert | {insert_upsert:.0} |");
    println!("| combine present keys with upsert | {combine_upsert:.0} |");
    println!("| combine present keys with get then put | {combine_lookup:.0} |");
    println!(
        "upsert ÷ put on fresh keys: {:.2}; upsert ÷ lookup-then-insert on present keys: {:.2}",
        insert_upsert / insert,
        combine_upsert / combine_lookup
    );
    Ok(())
}
