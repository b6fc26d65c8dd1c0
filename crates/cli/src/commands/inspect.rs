//! `stats` and `check`: what a database holds and costs, and a full read of every page and
//! value verified against the directory.

use super::Ctx;
use crate::error::{exit, CliError, CliResult};
use crate::format::{bytes, grouped, hex};
use crate::output::Outcome;
use crate::progress;
use serde_json::json;
use sprig::Db;
use std::path::Path;

/// The size of every file in the database directory.
fn files_bytes(path: &Path) -> CliResult<u64> {
    let entries = std::fs::read_dir(path)
        .map_err(|e| CliError::io("listing", path.display().to_string(), e))?;
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io("listing", path.display().to_string(), e))?;
        let meta = entry
            .metadata()
            .map_err(|e| CliError::io("reading", entry.path().display().to_string(), e))?;
        if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}

/// The figures `stats` and `demo` print.
pub fn figures(db: &Db) -> CliResult<serde_json::Value> {
    let s = db.stats();
    let files = match db.path() {
        Some(p) => files_bytes(p)?,
        None => 0,
    };
    let directory_ram = s.directory_bytes;
    let cache_ram = s.cached_pages * sprig::io::BLOCK_BYTES as u64;
    Ok(json!({
        "entries": s.entries,
        "pages": s.pages,
        "seq": s.seq,
        "hasher": db.hasher().name(),
        "root": hex(&db.root()),
        "retained_versions": s.retained_versions,
        "disk_bytes": s.disk_bytes,
        "live_bytes": s.live_bytes,
        "files_bytes": files,
        "space_amplification": s.space_amplification(),
        "ram_bytes": directory_ram + cache_ram,
        "directory_ram_bytes": directory_ram,
        "directory_ram_bytes_per_entry": if s.entries == 0 { 0.0 } else { directory_ram as f64 / s.entries as f64 },
        "page_cache_bytes": cache_ram,
        "io_backend": s.io_backend.name,
        "io_uring_refused": s.io_backend.io_uring_refused,
        "direct_io": s.io_backend.direct_io,
        "direct_io_refused": s.io_backend.direct_io_refused,
        "io": s.io_backend.to_string(),
        "tool_version": env!("CARGO_PKG_VERSION"),
    }))
}

/// Human lines for [`figures`].
pub fn describe(f: &serde_json::Value) -> String {
    let n = |k: &str| f.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let s = |k: &str| f.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
    let amp = f
        .get("space_amplification")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    format!(
        "entries              {}\n\
         pages                {}\n\
         version              {} ({} retained)\n\
         hasher               {}\n\
         root                 {}\n\
         disk (segments)      {}\n\
         live data            {}\n\
         all files            {}\n\
         space amplification  {amp:.2}\n\
         RAM                  {} (directory {}, {:.1} bytes per entry; page cache {})\n\
         I/O backend          {}",
        grouped(n("entries")),
        grouped(n("pages")),
        n("seq"),
        n("retained_versions"),
        s("hasher"),
        s("root"),
        bytes(n("disk_bytes")),
        bytes(n("live_bytes")),
        bytes(n("files_bytes")),
        bytes(n("ram_bytes")),
        bytes(n("directory_ram_bytes")),
        f.get("directory_ram_bytes_per_entry")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0),
        bytes(n("page_cache_bytes")),
        s("io"),
    )
}

/// `stats`.
pub fn stats(ctx: &Ctx) -> CliResult<Outcome> {
    let db = ctx.open_read_only("stats")?;
    let f = figures(&db)?;
    let human = describe(&f);
    Ok(Outcome::ok(f, human))
}

/// `check`: exit code 3 if anything is damaged.
pub fn check(ctx: &Ctx) -> CliResult<Outcome> {
    let db = ctx.open_read_only("check")?;
    let bar = progress::bar(ctx.progress, 0, "checking", false);
    let report = db.check(&mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();
    let problems: Vec<serde_json::Value> = report
        .problems
        .iter()
        .map(|p| match p {
            sprig::Error::Corruption { file, offset, what } => json!({
                "kind": "corruption", "file": file, "offset": offset, "what": what,
            }),
            other => json!({"kind": "error", "what": other.to_string()}),
        })
        .collect();
    let mut lines = vec![format!(
        "checked {} pages, {} entries, {} values, {} read",
        grouped(report.pages),
        grouped(report.entries),
        grouped(report.values),
        bytes(report.bytes_read)
    )];
    for p in &report.problems {
        lines.push(format!("  {p}"));
    }
    // What the open found in the log: a lost tail (a commit in flight at a crash, or unsynced
    // commits lost to a power loss) is not damage to the data, but it is never silent.
    let recovery = db.recovery();
    let warnings = recovery.findings();
    for w in &warnings {
        lines.push(format!("  warning: {w}"));
    }
    let lost_tail = recovery.lost_tail.as_ref().map(|t| {
        json!({
            "file": t.file, "offset": t.offset, "bytes": t.bytes, "seq": t.seq,
            "unsynced_after": t.unsynced_after, "later_files": t.later_files,
        })
    });
    let repaired: Vec<serde_json::Value> = recovery
        .repaired_records
        .iter()
        .map(|(file, offset, seq)| json!({"file": file, "offset": offset, "seq": seq}))
        .collect();
    let doc = json!({
        "clean": report.is_clean(), "pages": report.pages, "entries": report.entries,
        "values": report.values, "bytes_read": report.bytes_read, "problems": problems,
        "seq": db.seq(),
        "log": {"lost_tail": lost_tail, "repaired_records": repaired, "warnings": warnings},
    });
    if report.is_clean() {
        lines.push(format!(
            "no problems found{}",
            match warnings.len() {
                0 => String::new(),
                n => format!(" in the data ({n} warning(s) about the log above)"),
            }
        ));
    } else {
        lines.push(format!("{} problem(s) found", report.problems.len()));
    }
    let mut outcome = Outcome::ok(doc, lines.join("\n"));
    if !report.is_clean() {
        outcome.code = exit::CORRUPTION;
    }
    Ok(outcome)
}
