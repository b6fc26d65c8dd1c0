//! `init`, `put`, `get`, `delete` and `root`: the single-key commands. Each write is one
//! batch committed durably before the command returns.

use super::{gather_keys, Ctx};
use crate::cli::{DeleteArgs, GetArgs, InitArgs, PutArgs};
use crate::error::{exit, CliError, CliResult};
use crate::format::{display_value, hex};
use crate::output::Outcome;
use serde_json::json;
use sprig::{CommitInfo, Db, KeyPath, Options, Table};

/// `init`: create a new database.
pub fn init(ctx: &Ctx, args: &InitArgs) -> CliResult<Outcome> {
    let path = ctx.db_path("init")?;
    if path.exists() && !path.join("MANIFEST").exists() {
        let empty = std::fs::read_dir(path)
            .map_err(|e| CliError::io("reading", path.display().to_string(), e))?
            .next()
            .is_none();
        if !empty {
            return Err(CliError::NotADatabase(path.to_path_buf()));
        }
    }
    let hasher = sprig::Hasher::from(args.hasher);
    let options = Options {
        hasher: Some(hasher),
        segment_bytes: args.segment_mib.saturating_mul(1 << 20),
        ..ctx.options.clone()
    };
    let db = Db::create(path, options)?;
    let root = db.root();
    Ok(Outcome::ok(
        json!({"path": path.display().to_string(), "hasher": hasher.name(), "root": hex(&root)}),
        format!(
            "created an empty database at {} (hasher {})\nroot {}",
            path.display(),
            hasher.name(),
            hex(&root)
        ),
    ))
}

/// Commit one batch of `changes` to `table` and describe the commit.
fn commit_changes(
    db: &Db,
    table: &Table,
    changes: Vec<(KeyPath, Option<Vec<u8>>)>,
) -> CliResult<CommitInfo> {
    let mut batch = db.begin();
    for (key, value) in changes {
        match value {
            Some(v) => batch.put_in(table, key, v)?,
            None => batch.delete_in(table, key)?,
        }
    }
    Ok(db.commit(batch.finish()?)?)
}

/// A commit's outcome: the version, the table's root (the state root for the default table)
/// and, beside another table, the database root.
fn committed(db: &Db, table: &Table, info: &CommitInfo, what: String) -> CliResult<Outcome> {
    let root = db.view().table_root(table)?;
    let mut text = format!(
        "{what}; committed as version {}\nroot {}",
        info.seq,
        hex(&root)
    );
    if table.id() != 0 {
        text = format!(
            "{text} (table {})\ndatabase root {}",
            table.name(),
            hex(&info.db_root)
        );
    }
    Ok(Outcome::ok(
        json!({"seq": info.seq, "table": table.name(), "root": hex(&root),
               "db_root": hex(&info.db_root), "pages_written": info.pages_written}),
        text,
    ))
}

/// The key and value of `put` and `upsert`, parsed.
fn key_and_value(db: &Db, args: &PutArgs) -> CliResult<(KeyPath, Vec<u8>)> {
    let key = args
        .keys
        .key_format
        .parse(db.hasher(), &args.key)
        .map_err(|e| CliError::input("key", e))?;
    let value = args
        .value_format
        .parse(&args.value)
        .map_err(|e| CliError::input("value", e))?;
    Ok((key, value))
}

/// `put`: set one key.
pub fn put(ctx: &Ctx, args: &PutArgs) -> CliResult<Outcome> {
    let db = ctx.open("put")?;
    let (key, value) = key_and_value(&db, args)?;
    let table = ctx.table(&db)?;
    let info = commit_changes(&db, &table, vec![(key, Some(value))])?;
    committed(&db, &table, &info, format!("set {}", hex(&key)))
}

/// `upsert`: combine a value into one key by the table's resolver.
pub fn upsert(ctx: &Ctx, args: &PutArgs) -> CliResult<Outcome> {
    let db = ctx.open("upsert")?;
    let (key, value) = key_and_value(&db, args)?;
    let table = ctx.table(&db)?;
    let mut batch = db.begin();
    batch.upsert_in(&table, key, value)?;
    let info = db.commit(batch.finish()?)?;
    committed(&db, &table, &info, format!("upserted {}", hex(&key)))
}

/// `get`: print values; exit code 1 if any key is missing.
pub fn get(ctx: &Ctx, args: &GetArgs) -> CliResult<Outcome> {
    let db = ctx.open_read_only("get")?;
    let hasher = db.hasher();
    let keys = gather_keys(&args.key, None, |t| args.keys.key_format.parse(hasher, t))?;
    let (view, table) = ctx.view(&db)?;
    let values = view.get_many_in(&table, &keys)?;
    let mut rows = Vec::with_capacity(keys.len());
    let mut lines = Vec::with_capacity(keys.len());
    let mut missing = 0usize;
    for (key, value) in keys.iter().zip(&values) {
        rows.push(json!({
            "key": hex(key),
            "found": value.is_some(),
            "value": value.as_deref().map(hex),
        }));
        let shown = match value {
            Some(v) => display_value(v),
            None => {
                missing += 1;
                "(not found)".to_string()
            }
        };
        lines.push(if keys.len() == 1 {
            shown
        } else {
            format!("{} {shown}", hex(key))
        });
    }
    // A table an incremental union is still filling has no root yet.
    let root = match view.table_root(&table) {
        Ok(root) => Some(hex(&root)),
        Err(sprig::Error::UnionInProgress { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let mut outcome = Outcome::ok(
        json!({"seq": view.seq(), "table": table.name(), "root": root, "entries": rows}),
        lines.join("\n"),
    );
    if missing > 0 {
        outcome.code = exit::NOT_FOUND;
    }
    Ok(outcome)
}

/// `delete`: remove keys (absent keys are not an error).
pub fn delete(ctx: &Ctx, args: &DeleteArgs) -> CliResult<Outcome> {
    let db = ctx.open("delete")?;
    let hasher = db.hasher();
    let keys = gather_keys(&args.key, args.from.as_deref(), |t| {
        args.keys.key_format.parse(hasher, t)
    })?;
    let count = keys.len();
    let table = ctx.table(&db)?;
    let info = commit_changes(&db, &table, keys.into_iter().map(|k| (k, None)).collect())?;
    let mut outcome = committed(&db, &table, &info, format!("deleted {count} key(s)"))?;
    if let Some(doc) = outcome.json.as_object_mut() {
        doc.insert("deleted".into(), json!(count));
    }
    Ok(outcome)
}

/// `root`: the latest root and sequence number.
pub fn root(ctx: &Ctx) -> CliResult<Outcome> {
    let db = ctx.open_read_only("root")?;
    let view = db.view();
    let table = ctx.table(&db)?;
    let (root, seq, db_root) = (view.table_root(&table)?, view.seq(), view.db_root());
    Ok(Outcome::ok(
        json!({"root": hex(&root), "table": table.name(), "db_root": hex(&db_root),
               "seq": seq, "hasher": db.hasher().name()}),
        format!(
            "{}\n(version {seq}, hasher {}, table {}; database root {})",
            hex(&root),
            db.hasher().name(),
            table.name(),
            hex(&db_root)
        ),
    ))
}
