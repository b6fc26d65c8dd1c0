//! `import` and `export`. An import is atomic: into a database that has never been written
//! it is a bulk load, published in one step at its end; otherwise all records are staged in
//! one write batch and committed once. Either way an interrupted or rejected import leaves
//! the database as it was. Export streams a read view in key-path order.

use super::Ctx;
use crate::cli::{ExportArgs, ImportArgs};
use crate::error::{CliError, CliResult};
use crate::format::{grouped, hex, per_second, rate, seconds};
use crate::output::Outcome;
use crate::progress;
use crate::records::{RecordReader, RecordWriter};
use serde_json::json;
use sprig::Db;
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

/// `import`.
pub fn import(ctx: &Ctx, args: &ImportArgs) -> CliResult<Outcome> {
    let db = ctx.open("import")?;
    let hasher = db.hasher();
    let open = || {
        RecordReader::open(
            &args.file,
            args.format,
            hasher,
            args.keys.key_format,
            args.value_format,
        )
    };
    let size = std::fs::metadata(&args.file)
        .map_err(|e| CliError::io("reading", &args.file, e))?
        .len();
    let start = Instant::now();
    let crash = CrashHook::from_env();
    let fresh = db.seq() == 0 && db.is_empty();
    let (mode, records) = if fresh {
        let (records, deletes) = validate(ctx, open()?, size)?;
        if deletes == 0 {
            ("bulk load", bulk(ctx, &db, open()?, records, &crash)?)
        } else {
            ("one batch", staged(ctx, &db, open()?, size, &crash)?)
        }
    } else {
        ("one batch", staged(ctx, &db, open()?, size, &crash)?)
    };
    let elapsed = start.elapsed();
    let root = db.root();
    Ok(Outcome::ok(
        json!({
            "file": args.file, "mode": mode, "records": records, "entries": db.len(),
            "seq": db.seq(), "root": hex(&root), "seconds": elapsed.as_secs_f64(),
            "records_per_second": per_second(records, elapsed),
        }),
        format!(
            "imported {} records from {} ({mode}) in {}, {}\nentries {}, version {}\nroot {}",
            grouped(records),
            args.file,
            seconds(elapsed),
            rate(records, elapsed),
            grouped(db.len()),
            db.seq(),
            hex(&root)
        ),
    ))
}

/// Read the whole input once, checking every record: returns (records, deletes).
fn validate(ctx: &Ctx, mut reader: RecordReader, size: u64) -> CliResult<(u64, u64)> {
    let bar = progress::bar(ctx.progress, size, "checking", true);
    let (mut records, mut deletes) = (0u64, 0u64);
    while let Some((_, value)) = reader.next_change()? {
        records += 1;
        deletes += u64::from(value.is_none());
        if records % PROGRESS_EVERY == 0 {
            bar.set_position(reader.bytes_read());
        }
    }
    bar.finish_and_clear();
    Ok((records, deletes))
}

/// Bulk load a checked input into the empty database.
fn bulk(
    ctx: &Ctx,
    db: &Db,
    mut reader: RecordReader,
    records: u64,
    crash: &CrashHook,
) -> CliResult<u64> {
    let bar = progress::bar(ctx.progress, records, "reading", false);
    let mut fed = 0u64;
    let mut failure: Option<CliError> = None;
    // A record that fails now (the file changed since it was checked) stops the load before
    // anything is published; the real error is kept here and reported.
    let stop = || sprig::Error::InvalidArgument("the import input failed".into());
    let items = std::iter::from_fn(|| match reader.next_change() {
        Ok(Some((key, Some(value)))) => {
            fed += 1;
            crash.record(fed);
            if fed.is_multiple_of(PROGRESS_EVERY) {
                bar.set_position(fed);
            }
            Some(Ok((key, value)))
        }
        Ok(Some((_, None))) => {
            failure = Some(CliError::input("import", "a delete record appeared"));
            Some(Err(stop()))
        }
        Ok(None) => None,
        Err(e) => {
            failure = Some(e);
            Some(Err(stop()))
        }
    });
    let loaded = db.try_bulk_load(items, &mut progress::follow_bulk(&bar));
    bar.finish_and_clear();
    match (loaded, failure) {
        (Ok(_), _) => Ok(records),
        (Err(_), Some(e)) => Err(CliError::input(
            "import",
            format!("{e} (the file changed while it was imported; the database is unchanged)"),
        )),
        (Err(e), None) => Err(e.into()),
    }
}

/// Stage every record in one write batch and commit it once.
fn staged(
    ctx: &Ctx,
    db: &Db,
    mut reader: RecordReader,
    size: u64,
    crash: &CrashHook,
) -> CliResult<u64> {
    let bar = progress::bar(ctx.progress, size, "staging", true);
    let mut batch = db.begin();
    let mut records = 0u64;
    while let Some((key, value)) = reader.next_change()? {
        match value {
            Some(v) => batch.put(key, v)?,
            None => batch.delete(key),
        }
        records += 1;
        crash.record(records);
        if records.is_multiple_of(PROGRESS_EVERY) {
            bar.set_position(reader.bytes_read());
        }
    }
    bar.finish_and_clear();
    let spinner = progress::spinner(ctx.progress, "committing");
    db.commit(batch.finish()?)?;
    spinner.finish_and_clear();
    Ok(records)
}

/// `export`.
pub fn export(ctx: &Ctx, args: &ExportArgs) -> CliResult<Outcome> {
    let db = ctx.open_read_only("export")?;
    let view = db.view();
    let start = Instant::now();
    let mut writer = RecordWriter::create(&args.file, args.format)?;
    let bar = progress::bar(ctx.progress, view.len(), "exporting", false);
    let mut written = 0u64;
    for item in view.iter() {
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
            "file": args.file, "records": records, "seq": view.seq(),
            "root": hex(&view.root()), "seconds": elapsed.as_secs_f64(),
        }),
        format!(
            "exported {} records (key paths and values) of version {} to {} in {}, {}\nroot {}",
            grouped(records),
            view.seq(),
            args.file,
            seconds(elapsed),
            rate(records, elapsed),
            hex(&view.root())
        ),
    ))
}
