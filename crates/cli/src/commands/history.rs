//! `versions`, `rollback` and `snapshot save|list|open|restore|delete`: the versions a
//! database keeps, retained and named.

use super::Ctx;
use crate::cli::SnapshotCommand;
use crate::error::{exit, CliResult};
use crate::format::hex;
use crate::output::Outcome;
use serde_json::json;
use sprig::SnapshotInfo;

/// `versions`.
pub fn versions(ctx: &Ctx) -> CliResult<Outcome> {
    let db = ctx.open_read_only("versions")?;
    let versions = db.versions();
    let rows: Vec<_> = versions
        .iter()
        .map(|(seq, root)| json!({"seq": seq, "root": hex(root)}))
        .collect();
    let mut lines: Vec<String> = versions
        .iter()
        .map(|(seq, root)| format!("{seq:>10}  {}", hex(root)))
        .collect();
    lines.push(format!(
        "({} retained versions; the last is the latest)",
        versions.len()
    ));
    Ok(Outcome::ok(json!({"versions": rows}), lines.join("\n")))
}

/// `rollback SEQ`.
pub fn rollback(ctx: &Ctx, seq: u64) -> CliResult<Outcome> {
    let db = ctx.open("rollback")?;
    let info = db.rollback_to(seq)?;
    Ok(Outcome::ok(
        json!({"to": seq, "seq": info.seq, "root": hex(&info.root), "db_root": hex(&info.db_root)}),
        format!(
            "rolled back to version {seq}; committed as version {}\nroot {}",
            info.seq,
            hex(&info.root)
        ),
    ))
}

fn describe(s: &SnapshotInfo) -> serde_json::Value {
    json!({"name": s.name, "seq": s.seq, "db_root": hex(&s.db_root),
           "created_unix_secs": s.created_unix_secs, "damaged": s.damaged})
}

fn line(s: &SnapshotInfo) -> String {
    match &s.damaged {
        Some(why) => format!("{:<24} DAMAGED: {why}", s.name),
        None => format!(
            "{:<24} version {:>10}  database root {}",
            s.name,
            s.seq,
            hex(&s.db_root)
        ),
    }
}

/// `snapshot ...`.
pub fn snapshot(ctx: &Ctx, command: &SnapshotCommand) -> CliResult<Outcome> {
    match command {
        SnapshotCommand::Save { name } => {
            let db = ctx.open("snapshot save")?;
            let s = db.save_snapshot(name)?;
            Ok(Outcome::ok(describe(&s), format!("saved {}", line(&s))))
        }
        SnapshotCommand::List => {
            let db = ctx.open_read_only("snapshot list")?;
            let all = db.snapshots();
            let mut lines: Vec<String> = all.iter().map(line).collect();
            lines.push(format!("({} snapshots)", all.len()));
            Ok(Outcome::ok(
                json!({"snapshots": all.iter().map(describe).collect::<Vec<_>>()}),
                lines.join("\n"),
            ))
        }
        SnapshotCommand::Open { name, check } => {
            let db = ctx.open_read_only("snapshot open")?;
            let view = db.open_snapshot(name)?;
            let tables: Vec<_> = view
                .tables()
                .iter()
                .map(
                    |t| json!({"name": t.table.name(), "entries": t.entries, "root": hex(&t.root)}),
                )
                .collect();
            let mut lines = vec![format!(
                "snapshot {name}: version {}, database root {}",
                view.seq(),
                hex(&view.db_root())
            )];
            for t in view.tables() {
                lines.push(format!(
                    "  {:<22} {:>12} entries  root {}",
                    t.table.name(),
                    t.entries,
                    hex(&t.root)
                ));
            }
            let mut doc = json!({"name": name, "seq": view.seq(), "db_root": hex(&view.db_root()),
                                 "tables": tables});
            let mut code = exit::OK;
            if *check {
                let bar = crate::progress::bar(ctx.progress, 0, "checking", false);
                let report = view.check(&mut |done, total| {
                    bar.set_length(total);
                    bar.set_position(done);
                })?;
                bar.finish_and_clear();
                let problems: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
                lines.push(format!(
                    "checked {} pages, {} entries, {} values: {}",
                    report.pages,
                    report.entries,
                    report.values,
                    if problems.is_empty() {
                        "clean".to_string()
                    } else {
                        format!("{} problems", problems.len())
                    }
                ));
                lines.extend(problems.iter().map(|p| format!("  {p}")));
                doc["check"] = json!({"pages": report.pages, "entries": report.entries,
                                      "values": report.values, "problems": problems});
                if !report.is_clean() {
                    code = exit::CORRUPTION;
                }
            }
            let mut outcome = Outcome::ok(doc, lines.join("\n"));
            outcome.code = code;
            Ok(outcome)
        }
        SnapshotCommand::Restore { name } => {
            let db = ctx.open("snapshot restore")?;
            let info = db.restore_snapshot(name)?;
            Ok(Outcome::ok(
                json!({"name": name, "seq": info.seq, "db_root": hex(&info.db_root)}),
                format!(
                    "restored snapshot {name}; committed as version {}\ndatabase root {}",
                    info.seq,
                    hex(&info.db_root)
                ),
            ))
        }
        SnapshotCommand::Export {
            name,
            file,
            chunk_entries,
        } => super::sync::snapshot_export(ctx, name, file, *chunk_entries),
        SnapshotCommand::Import { file, root } => {
            super::sync::snapshot_import(ctx, file, root.as_deref())
        }
        SnapshotCommand::Delete { name } => {
            let db = ctx.open("snapshot delete")?;
            db.delete_snapshot(name)?;
            Ok(Outcome::ok(
                json!({"deleted": name}),
                format!("deleted snapshot {name}"),
            ))
        }
    }
}
