//! What node software does besides blocks, measured on a Sprig database made by `create`:
//! saving, opening, checking and deleting a named snapshot, and scanning every entry with a
//! cursor (forward and reverse), and state sync (chunks with range proofs exported, then
//! verified and imported into a new database). Each figure is wall time of the real work on the real disk,
//! with the page cache given; nothing is skipped or sampled.

use anyhow::{bail, Result};
use sprig::{Db, Options};
use std::path::PathBuf;
use std::time::Instant;

/// The settings of one run.
#[derive(Debug, clap::Args)]
pub struct StateToolsArgs {
    /// A Sprig database made by `sprig-bench create --engine sprig` (the `--dir` given to
    /// create, or the database directory itself).
    #[arg(long)]
    pub db: PathBuf,
    /// Page cache in MiB.
    #[arg(long, default_value_t = 64)]
    pub cache_mb: u64,
    /// Also read and verify every page of the snapshot (`ReadView::check`).
    #[arg(long)]
    pub check: bool,
    /// Entries per state-sync chunk.
    #[arg(long, default_value_t = 100_000)]
    pub chunk_entries: usize,
}

/// Run and print the figures.
pub fn run(args: &StateToolsArgs) -> Result<()> {
    // The directory given, or the Sprig database `create` made under it.
    let path = [
        args.db.clone(),
        args.db.join("sprig"),
        args.db.join("sprig").join("db"),
    ]
    .into_iter()
    .find(|p| p.join("MANIFEST").exists())
    .unwrap_or_else(|| args.db.clone());
    let start = Instant::now();
    let db = Db::open(
        &path,
        Options {
            page_cache_bytes: args.cache_mb << 20,
            create_if_missing: false,
            ..Options::default()
        },
    )?;
    let entries = db.len();
    println!(
        "open: {entries} entries in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    let name = "bench-state-tools";
    if db.snapshots().iter().any(|s| s.name == name) {
        db.delete_snapshot(name)?;
    }

    let start = Instant::now();
    let info = db.save_snapshot(name)?;
    let save = start.elapsed().as_secs_f64();
    let file_bytes = std::fs::metadata(path.join(format!("snap-{name}.snap")))?.len();
    println!(
        "snapshot save: {save:.3} s ({:.1} bytes per entry on disk, {} bytes)",
        file_bytes as f64 / entries.max(1) as f64,
        file_bytes
    );

    let start = Instant::now();
    let view = db.open_snapshot(name)?;
    println!(
        "snapshot open (reads and checks the file): {:.3} s",
        start.elapsed().as_secs_f64()
    );
    if view.db_root() != info.db_root {
        bail!("the snapshot opened with another root than it was saved with");
    }
    if args.check {
        let start = Instant::now();
        let report = view.check(&mut |_, _| {})?;
        let secs = start.elapsed().as_secs_f64();
        println!(
            "snapshot check: {} pages, {} entries in {secs:.2} s ({:.0} pages/s), clean: {}",
            report.pages,
            report.entries,
            report.pages as f64 / secs,
            report.is_clean()
        );
    }

    for reverse in [false, true] {
        let start = Instant::now();
        let mut cursor = view.iter();
        if reverse {
            cursor = cursor.reverse();
        }
        let mut n = 0u64;
        let mut bytes = 0u64;
        for e in cursor {
            let (_, v) = e?;
            n += 1;
            bytes += v.len() as u64;
        }
        let secs = start.elapsed().as_secs_f64();
        if n != entries {
            bail!("the scan found {n} of {entries} entries");
        }
        println!(
            "cursor scan ({}): {n} entries, {bytes} value bytes in {secs:.2} s = {:.0} entries/s",
            if reverse { "reverse" } else { "forward" },
            n as f64 / secs
        );
    }

    // State sync: every entry as chunks with range proofs, then into a fresh database.
    let table = sprig::Table::default_table();
    let root = view.root();
    let export_all = |sink: &mut dyn FnMut(sprig::SyncChunk) -> Result<()>| -> Result<(u64, u64)> {
        let (mut chunks, mut proof_bytes) = (0u64, 0u64);
        let mut next = Some([0u8; 32]);
        while let Some(s) = next {
            let c = view.export_range(&table, s, None, args.chunk_entries)?;
            chunks += 1;
            proof_bytes += c.encode(db.hasher()).len() as u64
                - c.entries
                    .iter()
                    .map(|(_, v)| 36 + v.len() as u64)
                    .sum::<u64>();
            next = c.end;
            sink(c)?;
        }
        Ok((chunks, proof_bytes))
    };
    let start = Instant::now();
    let mut n = 0u64;
    let (chunks, proof_bytes) = export_all(&mut |c| {
        n += c.entries.len() as u64;
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "sync export: {n} entries in {chunks} chunks of {} in {secs:.2} s = {:.0} entries/s; \
         {:.3} proof bytes per entry",
        args.chunk_entries,
        n as f64 / secs,
        proof_bytes as f64 / n.max(1) as f64
    );
    let target_dir = path.with_file_name("state-tools-sync-target");
    if target_dir.exists() {
        std::fs::remove_dir_all(&target_dir)?;
    }
    let target = Db::create(
        &target_dir,
        Options {
            page_cache_bytes: args.cache_mb << 20,
            ..Options::default()
        },
    )?;
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::sync_channel::<sprig::SyncChunk>(2);
    let imported = std::thread::scope(|s| -> Result<()> {
        let importer = s.spawn(|| {
            target.import_chunks(
                &sprig::Table::default_table(),
                root,
                rx.into_iter().map(Ok),
                &sprig::ImportOptions::default(),
            )
        });
        export_all(&mut |c| {
            tx.send(c)
                .map_err(|_| anyhow::anyhow!("the importer stopped"))
        })?;
        drop(tx);
        importer
            .join()
            .map_err(|_| anyhow::anyhow!("the importer panicked"))??;
        Ok(())
    });
    imported?;
    let secs = start.elapsed().as_secs_f64();
    if target.root() != root {
        bail!("the synced database has another root");
    }
    println!(
        "sync export + verify + import into a new database: {n} entries in {secs:.2} s = {:.0} entries/s (root matches)",
        n as f64 / secs
    );
    drop(target);
    std::fs::remove_dir_all(&target_dir)?;
    drop(view);

    let start = Instant::now();
    db.delete_snapshot(name)?;
    println!("snapshot delete: {:.3} s", start.elapsed().as_secs_f64());
    Ok(())
}
