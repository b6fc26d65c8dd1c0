//! `import` and `export`. An import is atomic and reads its input once, so pipes, FIFOs and
//! stdin work: every record is checked and kept in a spool (in memory up to half the budget,
//! the rest in sorted runs on temporary files). Then, into a database that has never been
//! written and with no deletes, the spool feeds a bulk load, published in one step at its end
//! and only if the engine counted exactly the records read; otherwise its merge in key order
//! (the last record of a key wins) is applied as one commit by `Db::import_sorted`, in memory
//! bounded by the other half of the budget. Either way an interrupted or rejected import
//! leaves the database as it was. Export streams a read view in key-path order.

use super::Ctx;
use crate::cli::{ExportArgs, ImportArgs};
use crate::error::{CliError, CliResult};
use crate::format::{grouped, hex, per_second, rate, seconds};
use crate::output::Outcome;
use crate::progress;
use crate::records::{RecordReader, RecordWriter};
use crate::spool::Spool;
use serde_json::json;
use sprig::{BulkOptions, Db, ImportOptions, Table};
use std::path::Path;
use std::time::Instant;

/// Environment variable for tests: abort the process (as a crash would) once this many
/// records have been handed to the engine, before anything is committed.
const CRASH_AFTER_RECORDS_ENV: &str = "SPRIG_CLI_CRASH_AFTER_RECORDS";
/// Records between progress updates.
const PROGRESS_EVERY: u64 = 4096;

/// Aborts the process after a set number of records when the test hook asks for it.
struct CrashHook(Option<u64>);

impl CrashHook {
    fn from_env() -> CrashHook {
        CrashHook(
            std::env::var(CRASH_AFTER_RECORDS_ENV)
                .ok()
                .and_then(|v| v.parse().ok()),
        )
    }

    fn record(&self, records: u64) {
        if self.0 == Some(records) {
            eprintln!("{CRASH_AFTER_RECORDS_ENV}: aborting after {records} records");
            std::process::abort();
        }
    }
}

/// The error a record source hands the engine to stop it; the real error is kept aside and
/// reported instead.
fn stop() -> sprig::Error {
    sprig::Error::InvalidArgument("the import input failed".into())
}

/// `import`.
pub fn import(ctx: &Ctx, args: &ImportArgs) -> CliResult<Outcome> {
    let db = ctx.open("import")?;
    let table = ctx.table(&db)?;
    let dir = ctx.db_path("import")?.to_path_buf();
    let budget = args.memory_mib << 20;
    let mut reader = RecordReader::open(
        &args.file,
        args.format,
        db.hasher(),
        args.keys.key_format,
        args.value_format,
    )?;
    let start = Instant::now();
    let crash = CrashHook::from_env();
    let spool = read(ctx, &mut reader, &dir, budget / 2)?;
    let (records, runs) = (spool.records(), spool.runs());
    // A bulk load builds the whole database: only a fresh one, into its default table.
    let fresh = db.seq() == 0 && db.is_empty() && table == Table::default_table();
    let mode = if fresh && spool.deletes() == 0 {
        bulk(ctx, &db, spool, budget / 2, &crash)?;
        "bulk load"
    } else {
        commit(ctx, &db, &table, spool, budget / 2, &crash)?;
        "one commit"
    };
    let elapsed = start.elapsed();
    let view = db.view();
    let (root, entries) = (view.table_root(&table)?, view.len_in(&table)?);
    Ok(Outcome::ok(
        json!({
            "file": args.file, "mode": mode, "records": records, "spilled_runs": runs,
            "table": table.name(), "entries": entries,
            "seq": view.seq(), "root": hex(&root), "db_root": hex(&view.db_root()),
            "seconds": elapsed.as_secs_f64(),
            "records_per_second": per_second(records, elapsed),
        }),
        format!(
            "imported {} records from {} into table {} ({mode}) in {}, {}\nentries {}, version \
             {}\nroot {}\ndatabase root {}",
            grouped(records),
            reader.name(),
            table.name(),
            seconds(elapsed),
            rate(records, elapsed),
            grouped(entries),
            view.seq(),
            hex(&root),
            hex(&view.db_root())
        ),
    ))
}

/// Read every record of the input, once, checking each, into a spool holding up to `budget`
/// bytes in memory and the rest in temporary files in `dir`.
fn read(ctx: &Ctx, reader: &mut RecordReader, dir: &Path, budget: u64) -> CliResult<Spool> {
    let size = reader.size();
    let bar = match size {
        Some(size) => progress::bar(ctx.progress, size, "reading", true),
        None => progress::spinner(ctx.progress, "reading"),
    };
    let mut spool = Spool::new(dir, budget);
    while let Some(change) = reader.next_change()? {
        spool.push(change)?;
        if spool.records().is_multiple_of(PROGRESS_EVERY) {
            bar.set_position(size.map_or(spool.records(), |_| reader.bytes_read()));
        }
    }
    bar.finish_and_clear();
    Ok(spool)
}

/// Bulk load the spooled records (puts only) into the empty database, with `buffer` bytes of
/// the engine's partition buffer; the load must count exactly the records read.
fn bulk(ctx: &Ctx, db: &Db, spool: Spool, buffer: u64, crash: &CrashHook) -> CliResult<()> {
    let records = spool.records();
    let bar = progress::bar(ctx.progress, records, "loading", false);
    let mut merge = spool.merge(false)?;
    let mut fed = 0u64;
    let mut failure: Option<CliError> = None;
    let items = std::iter::from_fn(|| match merge.next()? {
        Ok((key, Some(value))) => {
            fed += 1;
            crash.record(fed);
            if fed.is_multiple_of(PROGRESS_EVERY) {
                bar.set_position(fed);
            }
            Some(Ok((key, value)))
        }
        Ok((_, None)) => {
            failure = Some(CliError::Db(sprig::Error::internal(
                "a delete record in a bulk load",
            )));
            Some(Err(stop()))
        }
        Err(e) => {
            failure = Some(e);
            Some(Err(stop()))
        }
    });
    let options = BulkOptions {
        buffer_bytes: buffer,
        expected_items: Some(records),
    };
    let loaded = db.bulk_load_with(items, &options, &mut progress::follow_bulk(&bar));
    bar.finish_and_clear();
    match (loaded, failure) {
        (Ok(_), _) => Ok(()),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(e.into()),
    }
}

/// Apply the spooled records as one commit: their merge in key order, the last record of
/// each key, in `budget` bytes of the engine's memory.
fn commit(
    ctx: &Ctx,
    db: &Db,
    table: &Table,
    spool: Spool,
    budget: u64,
    crash: &CrashHook,
) -> CliResult<()> {
    let bar = progress::bar(ctx.progress, spool.records(), "importing", false);
    let mut merge = spool.merge(true)?;
    let mut fed = 0u64;
    let mut failure: Option<CliError> = None;
    let changes = std::iter::from_fn(|| match merge.next()? {
        Ok(change) => {
            fed += 1;
            crash.record(fed);
            if fed.is_multiple_of(PROGRESS_EVERY) {
                bar.set_position(merge.consumed());
            }
            Some(Ok(change))
        }
        Err(e) => {
            failure = Some(e);
            Some(Err(stop()))
        }
    });
    let options = ImportOptions {
        memory_bytes: budget,
    };
    let committed = db.import_sorted_into(table, changes, &options);
    bar.finish_and_clear();
    match (committed, failure) {
        (Ok(_), _) => Ok(()),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(e.into()),
    }
}

/// `export`.
pub fn export(ctx: &Ctx, args: &ExportArgs) -> CliResult<Outcome> {
    let db = ctx.open_read_only("export")?;
    let (view, table) = ctx.view(&db)?;
    let (root, entries) = (view.table_root(&table)?, view.len_in(&table)?);
    let start = Instant::now();
    let mut writer = RecordWriter::create(&args.file, args.format)?;
    let bar = progress::bar(ctx.progress, entries, "exporting", false);
    let mut written = 0u64;
    for item in view.iter_in(&table) {
        let (key, value) = item?;
        writer.write(&key, &value)?;
        written += 1;
        if written.is_multiple_of(PROGRESS_EVERY) {
            bar.set_position(written);
        }
    }
    let records = writer.finish()?;
    bar.finish_and_clear();
    if args.file == "-" {
        // The records are the output; a summary would mix with them.
        return Ok(Outcome::silent());
    }
    let elapsed = start.elapsed();
    Ok(Outcome::ok(
        json!({
            "file": args.file, "records": records, "seq": view.seq(), "table": table.name(),
            "root": hex(&root), "seconds": elapsed.as_secs_f64(),
        }),
        format!(
            "exported {} records (key paths and values) of table {} at version {} to {} in \
             {}, {}\nroot {}",
            grouped(records),
            table.name(),
            view.seq(),
            args.file,
            seconds(elapsed),
            rate(records, elapsed),
            hex(&root)
        ),
    ))
}
