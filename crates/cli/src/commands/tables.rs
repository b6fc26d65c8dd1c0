//! `table create|list|drop|union|supply|stat`: the catalog of tables. Creating, dropping,
//! unions and their steps are durable commits; listing and describing open the database
//! read-only.

use super::Ctx;
use crate::cli::TableCommand;
use crate::error::CliResult;
use crate::format::hex;
use crate::output::Outcome;
use crate::progress;
use serde_json::json;
use sprig::{TableInfo, TableOptions};

fn describe(t: &TableInfo) -> serde_json::Value {
    json!({
        "name": t.table.name(),
        "id": t.table.id(),
        "resolver": t.resolver,
        "entries": t.entries,
        "root": hex(&t.root),
        "union_debt": t.union_debt,
    })
}

fn line(t: &TableInfo) -> String {
    match t.union_debt {
        Some(debt) => format!(
            "{:<24} incremental union in progress: {debt} input entries to merge              ({} merged entries so far); resolver {}",
            t.table.name(),
            t.entries,
            t.resolver.as_deref().unwrap_or("-"),
        ),
        None => format!(
            "{:<24} {:>12} entries  resolver {:<10} root {}",
            t.table.name(),
            t.entries,
            t.resolver.as_deref().unwrap_or("-"),
            hex(&t.root)
        ),
    }
}

/// Run a `table` subcommand.
pub fn run(ctx: &Ctx, command: &TableCommand) -> CliResult<Outcome> {
    match command {
        TableCommand::Create { name, resolver } => {
            let db = ctx.open("table create")?;
            let table = db.create_table(
                name,
                TableOptions {
                    resolver: resolver.clone(),
                },
            )?;
            let (seq, db_root) = (db.seq(), db.db_root());
            Ok(Outcome::ok(
                json!({"name": table.name(), "id": table.id(), "resolver": resolver,
                       "seq": seq, "db_root": hex(&db_root)}),
                format!(
                    "created table {} (resolver {}); committed as version {seq}\ndatabase root {}",
                    table.name(),
                    resolver.as_deref().unwrap_or("none"),
                    hex(&db_root)
                ),
            ))
        }
        TableCommand::Union {
            name,
            inputs,
            resolver,
            incremental,
        } => {
            let db = ctx.open("table union")?;
            let tables = inputs
                .iter()
                .map(|n| db.table(n))
                .collect::<sprig::Result<Vec<_>>>()?;
            let refs: Vec<&sprig::Table> = tables.iter().collect();
            if *incremental {
                let (table, info) = db.start_union(
                    name,
                    &refs,
                    TableOptions {
                        resolver: resolver.clone(),
                    },
                )?;
                let debt = db.remaining_union_debt(&table)?;
                return Ok(Outcome::ok(
                    json!({"name": table.name(), "inputs": inputs, "union_debt": debt,
                           "seq": info.seq, "db_root": hex(&info.db_root)}),
                    format!(
                        "started table {} as the incremental union of {}; committed as \
                         version {}\n{debt} input entries to merge: run `sprig table supply {}`",
                        table.name(),
                        inputs.join(", "),
                        info.seq,
                        table.name()
                    ),
                ));
            }
            let (table, info) = db.union(
                name,
                &refs,
                TableOptions {
                    resolver: resolver.clone(),
                },
            )?;
            let view = db.view();
            let (entries, root) = (view.len_in(&table)?, view.table_root(&table)?);
            Ok(Outcome::ok(
                json!({"name": table.name(), "inputs": inputs, "entries": entries,
                       "root": hex(&root), "seq": info.seq, "db_root": hex(&info.db_root)}),
                format!(
                    "created table {} as the union of {} ({entries} entries); committed as \
                     version {}\nroot {}\ndatabase root {}",
                    table.name(),
                    inputs.join(", "),
                    info.seq,
                    hex(&root),
                    hex(&info.db_root)
                ),
            ))
        }
        TableCommand::Supply { name, work, step } => {
            let db = ctx.open("table supply")?;
            let table = db.table(name)?;
            let debt = db.remaining_union_debt(&table)?;
            let target = work.unwrap_or(debt).min(debt);
            let bar = progress::bar(ctx.progress, target, "merging", false);
            let (mut merged, mut commits) = (0u64, 0u64);
            while merged < target {
                let w = db.supply_union_work(&table, (*step).max(1).min(target - merged))?;
                merged += w.merged;
                commits += u64::from(w.commit.is_some());
                bar.set_position(merged.min(target));
                if w.remaining == 0 || w.merged == 0 {
                    break;
                }
            }
            bar.finish_and_clear();
            let remaining = db.remaining_union_debt(&table)?;
            let view = db.view();
            let text = if remaining == 0 {
                format!(
                    "merged {merged} input entries in {commits} commit(s); the union is \
                     complete: {} entries, version {}\nroot {}\ndatabase root {}",
                    view.len_in(&table)?,
                    view.seq(),
                    hex(&view.table_root(&table)?),
                    hex(&view.db_root())
                )
            } else {
                format!(
                    "merged {merged} input entries in {commits} commit(s); {remaining} to go \
                     (version {})",
                    view.seq()
                )
            };
            let root = if remaining == 0 {
                Some(hex(&view.table_root(&table)?))
            } else {
                None
            };
            Ok(Outcome::ok(
                json!({"name": name, "merged": merged, "commits": commits,
                       "union_debt": remaining, "root": root, "seq": view.seq(),
                       "db_root": hex(&view.db_root())}),
                text,
            ))
        }
        TableCommand::Drop { name } => {
            let db = ctx.open("table drop")?;
            let info = db.drop_table(name)?;
            Ok(Outcome::ok(
                json!({"dropped": name, "seq": info.seq, "db_root": hex(&info.db_root)}),
                format!(
                    "dropped table {name}; committed as version {}\ndatabase root {}",
                    info.seq,
                    hex(&info.db_root)
                ),
            ))
        }
        TableCommand::List => {
            let db = ctx.open_read_only("table list")?;
            let view = db.view();
            let tables = view.tables();
            let mut text: Vec<String> = tables.iter().map(line).collect();
            text.push(format!(
                "database root {} (version {})",
                hex(&view.db_root()),
                view.seq()
            ));
            Ok(Outcome::ok(
                json!({"seq": view.seq(), "db_root": hex(&view.db_root()),
                       "tables": tables.iter().map(describe).collect::<Vec<_>>()}),
                text.join("\n"),
            ))
        }
        TableCommand::Stat { name } => {
            let db = ctx.open_read_only("table stat")?;
            let view = db.view();
            let table = view.table(name)?;
            let info = view
                .tables()
                .into_iter()
                .find(|t| t.table == table)
                .ok_or_else(|| sprig::Error::NoSuchTable(name.clone()))?;
            Ok(Outcome::ok(describe(&info), line(&info)))
        }
    }
}
