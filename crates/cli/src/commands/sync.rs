//! `sync export|verify|import` and `snapshot export|import`: state files of verifiable chunks
//! (see `statefile`). An import reads its file twice: first every chunk is verified (and the
//! checksum), then, only if all is well, the tables are filled, each as one commit.

use super::Ctx;
use crate::cli::SyncCommand;
use crate::error::{CliError, CliResult};
use crate::format::hex;
use crate::output::Outcome;
use crate::statefile::{Item, StateReader, StateWriter, TableHeader};
use serde_json::json;
use sprig::{Db, ImportOptions, Node, ReadView, SyncChunk, SyncVerifier, Table, TableOptions};
use std::time::Instant;

/// Parse a root given on the command line.
pub fn parse_root(text: &str) -> CliResult<Node> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    let bytes = (0..digits.len())
        .step_by(2)
        .map(|i| {
            digits
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>();
    bytes
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| CliError::input("--root", "not 64 hex digits"))
}

/// What an export wrote.
struct Written {
    entries: u64,
    chunks: u64,
    proof_bytes: u64,
    bytes: u64,
}

/// Write `table` of `view` as chunks of `per_chunk` entries.
fn write_table(
    out: &mut StateWriter,
    view: &ReadView,
    table: &Table,
    per_chunk: usize,
    progress: bool,
) -> CliResult<Written> {
    let info = view
        .tables()
        .into_iter()
        .find(|t| t.table.id() == table.id())
        .ok_or_else(|| CliError::Db(sprig::Error::NoSuchTable(table.name().to_string())))?;
    out.table(&TableHeader {
        name: table.name().to_string(),
        resolver: info.resolver.clone(),
        root: info.root,
        entries: info.entries,
    })?;
    let bar = crate::progress::bar(progress, info.entries, table.name(), false);
    let mut w = Written {
        entries: 0,
        chunks: 0,
        proof_bytes: 0,
        bytes: 0,
    };
    let mut start = Some([0u8; 32]);
    while let Some(s) = start {
        let c = view.export_range(table, s, None, per_chunk)?;
        w.entries += c.entries.len() as u64;
        w.chunks += 1;
        w.proof_bytes += c.proof.len() as u64 * 33;
        w.bytes += out.chunk(&c)? as u64 + 5;
        bar.set_position(w.entries);
        start = c.end;
    }
    bar.finish_and_clear();
    Ok(w)
}

/// A verified table of a state file.
struct Verified {
    header: TableHeader,
    entries: u64,
}

/// Read the whole file, verifying every table's chunks against `trusted` (or, without it,
/// the root its header states) and the checksum; returns the tables and the stated database
/// root.
fn verify_file(path: &str, db: &Db, trusted: Option<Node>) -> CliResult<(Vec<Verified>, Node)> {
    let mut r = StateReader::open(path, db.hasher())?;
    let mut tables: Vec<Verified> = Vec::new();
    let mut verifier: Option<SyncVerifier> = None;
    let close = |v: &Option<SyncVerifier>, t: Option<&Verified>| -> CliResult<()> {
        match (v, t) {
            (Some(v), Some(t)) if !v.is_complete() => Err(CliError::input(
                path,
                format!(
                    "table {:?}: the chunks stop before the last key (the next must start at {})",
                    t.header.name,
                    v.next_start().map(|k| hex(&k)).unwrap_or_default()
                ),
            )),
            _ => Ok(()),
        }
    };
    loop {
        match r.next_item()? {
            Some(Item::Table(h)) => {
                close(&verifier, tables.last())?;
                let root = trusted.unwrap_or(h.root);
                if root != h.root {
                    return Err(CliError::Verify(format!(
                        "table {:?} in the file has root {}, not the trusted root {}",
                        h.name,
                        hex(&h.root),
                        hex(&root)
                    )));
                }
                verifier = Some(SyncVerifier::new(db.hasher(), root));
                tables.push(Verified {
                    header: h,
                    entries: 0,
                });
            }
            Some(Item::Chunk(c)) => {
                let (Some(v), Some(t)) = (verifier.as_mut(), tables.last_mut()) else {
                    return Err(CliError::input(path, "a chunk before any table"));
                };
                v.accept(&c).map_err(|e| {
                    CliError::Verify(format!("table {:?}: a chunk fails: {e}", t.header.name))
                })?;
                t.entries += c.entries.len() as u64;
            }
            Some(Item::End(db_root, n)) => {
                close(&verifier, tables.last())?;
                if n as usize != tables.len() {
                    return Err(CliError::input(
                        path,
                        "the table count disagrees with the tables",
                    ));
                }
                return Ok((tables, db_root));
            }
            None => return Err(CliError::input(path, "the file has no end")),
        }
    }
}

/// The chunks of the table the reader is at, until the next table or the end.
struct TableChunks<'a> {
    reader: &'a mut StateReader,
    pending: &'a mut Option<Item>,
}

impl Iterator for TableChunks<'_> {
    type Item = sprig::Result<SyncChunk>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pending.is_some() {
            return None;
        }
        match self.reader.next_item() {
            Ok(Some(Item::Chunk(c))) => Some(Ok(c)),
            Ok(other) => {
                *self.pending = other;
                None
            }
            Err(e) => Some(Err(sprig::Error::InvalidArgument(e.to_string()))),
        }
    }
}

/// Fill `db` from a verified file: each table (created if missing, with its resolver; or
/// `into`, for a file of one table) as one commit of its chunks, each checked again against
/// its root.
fn import_file(
    db: &Db,
    path: &str,
    tables: &[Verified],
    into: Option<&Table>,
    progress: bool,
) -> CliResult<()> {
    let mut r = StateReader::open(path, db.hasher())?;
    let mut pending: Option<Item> = r.next_item()?;
    for t in tables {
        let Some(Item::Table(h)) = pending.take() else {
            return Err(CliError::input(
                path,
                "the file changed while being imported",
            ));
        };
        if h != t.header {
            return Err(CliError::input(
                path,
                "the file changed while being imported",
            ));
        }
        let table = match into
            .map(|t| Ok(t.clone()))
            .unwrap_or_else(|| db.table(&h.name))
        {
            Ok(t) => t,
            Err(sprig::Error::NoSuchTable(_)) => db.create_table(
                &h.name,
                TableOptions {
                    resolver: h.resolver.clone(),
                },
            )?,
            Err(e) => return Err(e.into()),
        };
        let spinner = crate::progress::spinner(progress, &format!("importing {}", h.name));
        let chunks = TableChunks {
            reader: &mut r,
            pending: &mut pending,
        };
        db.import_chunks(&table, h.root, chunks, &ImportOptions::default())?;
        spinner.finish_and_clear();
    }
    Ok(())
}

/// `sync ...`.
pub fn sync(ctx: &Ctx, command: &SyncCommand) -> CliResult<Outcome> {
    match command {
        SyncCommand::Export { out, chunk_entries } => {
            let db = ctx.open_read_only("sync export")?;
            let (view, table) = ctx.view(&db)?;
            let start = Instant::now();
            let mut w = StateWriter::create(out, db.hasher())?;
            let written = write_table(&mut w, &view, &table, *chunk_entries, ctx.progress)?;
            w.finish(&view.db_root())?;
            Ok(exported(out, &written, start, &view.table_root(&table)?))
        }
        SyncCommand::Verify { file, root } => {
            let db = ctx.open_read_only("sync verify")?;
            let trusted = parse_root(root)?;
            let start = Instant::now();
            let (tables, _) = verify_file(file, &db, Some(trusted))?;
            let [t] = tables.as_slice() else {
                return Err(CliError::input(file, "a sync file holds one table"));
            };
            Ok(Outcome::ok(
                json!({"file": file, "table": t.header.name, "entries": t.entries,
                       "root": hex(&trusted), "verified": true}),
                format!(
                    "verified {} entries of table {} against root {} in {:.2} s: complete",
                    t.entries,
                    t.header.name,
                    hex(&trusted),
                    start.elapsed().as_secs_f64()
                ),
            ))
        }
        SyncCommand::Import { file, root } => {
            let db = ctx.open("sync import")?;
            let trusted = parse_root(root)?;
            let table = ctx.table(&db)?;
            let start = Instant::now();
            let (tables, _) = verify_file(file, &db, Some(trusted))?;
            let [t] = tables.as_slice() else {
                return Err(CliError::input(file, "a sync file holds one table"));
            };
            let entries = t.entries;
            // Into --table, whatever the file calls it.
            import_file(&db, file, &tables, Some(&table), ctx.progress)?;
            Ok(Outcome::ok(
                json!({"file": file, "table": table.name(), "entries": entries,
                       "root": hex(&trusted), "seq": db.seq()}),
                format!(
                    "imported {entries} verified entries into table {} in {:.2} s; root {}",
                    table.name(),
                    start.elapsed().as_secs_f64(),
                    hex(&trusted)
                ),
            ))
        }
    }
}

fn exported(out: &str, w: &Written, start: Instant, root: &Node) -> Outcome {
    let secs = start.elapsed().as_secs_f64();
    let per_entry = w.proof_bytes as f64 / w.entries.max(1) as f64;
    Outcome::ok(
        json!({"file": out, "entries": w.entries, "chunks": w.chunks, "bytes": w.bytes,
               "proof_bytes": w.proof_bytes, "root": hex(root), "seconds": secs}),
        format!(
            "wrote {} entries in {} chunks to {out} ({} bytes, {per_entry:.2} proof bytes per \
             entry) in {secs:.2} s; root {}",
            w.entries,
            w.chunks,
            w.bytes,
            hex(root)
        ),
    )
}

/// `snapshot export NAME FILE`: every table of the snapshot.
pub fn snapshot_export(ctx: &Ctx, name: &str, out: &str, per_chunk: usize) -> CliResult<Outcome> {
    let db = ctx.open_read_only("snapshot export")?;
    let view = db.open_snapshot(name)?;
    let start = Instant::now();
    let mut w = StateWriter::create(out, db.hasher())?;
    let mut total = Written {
        entries: 0,
        chunks: 0,
        proof_bytes: 0,
        bytes: 0,
    };
    for t in view.tables() {
        let one = write_table(&mut w, &view, &t.table, per_chunk, ctx.progress)?;
        total.entries += one.entries;
        total.chunks += one.chunks;
        total.proof_bytes += one.proof_bytes;
        total.bytes += one.bytes;
    }
    w.finish(&view.db_root())?;
    let mut outcome = exported(out, &total, start, &view.db_root());
    outcome.json["snapshot"] = json!(name);
    Ok(outcome)
}

/// `snapshot import FILE [--root R]`: every table into an empty database.
pub fn snapshot_import(ctx: &Ctx, file: &str, root: Option<&str>) -> CliResult<Outcome> {
    let db = ctx.open("snapshot import")?;
    if db.tables().len() > 1 || !db.is_empty() {
        return Err(CliError::Db(sprig::Error::NotEmpty("a snapshot import")));
    }
    let start = Instant::now();
    let (tables, stated) = verify_file(file, &db, None)?;
    let computed = sprig_core::database_root(
        db.hasher(),
        tables
            .iter()
            .map(|t| (t.header.name.as_str(), t.header.root)),
    );
    if computed != stated {
        return Err(CliError::Verify(format!(
            "the file's tables give database root {}, not the {} it states",
            hex(&computed),
            hex(&stated)
        )));
    }
    let mut warning = None;
    match root.map(parse_root).transpose()? {
        Some(trusted) if trusted != stated => {
            return Err(CliError::Verify(format!(
                "the file holds database root {}, not the trusted root {}",
                hex(&stated),
                hex(&trusted)
            )))
        }
        Some(_) => {}
        None => {
            warning =
                Some("no --root given: the file is consistent, but its root is only what it says");
            eprintln!("warning: {}", warning.unwrap_or_default());
        }
    }
    import_file(&db, file, &tables, None, ctx.progress)?;
    if db.db_root() != stated {
        return Err(CliError::Verify(format!(
            "imported to database root {}, not {}",
            hex(&db.db_root()),
            hex(&stated)
        )));
    }
    let entries: u64 = tables.iter().map(|t| t.entries).sum();
    Ok(Outcome::ok(
        json!({"file": file, "tables": tables.len(), "entries": entries,
               "db_root": hex(&stated), "warning": warning}),
        format!(
            "imported {} tables, {entries} verified entries in {:.2} s; database root {}",
            tables.len(),
            start.elapsed().as_secs_f64(),
            hex(&stated)
        ),
    ))
}
