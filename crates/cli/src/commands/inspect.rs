//! `stats` and `check`: what a database holds and costs, and a full read of every page and
//! value verified against the directory.

use super::Ctx;
use crate::cli::StatsArgs;
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
    sum_file_bytes(path, entries)
}

/// The size of the listed files. A file gone between the listing and its `stat` (a process
/// writing to the database deletes emptied segments and old logs) holds no bytes any more
/// and counts none; any other failure is an error.
fn sum_file_bytes(
    path: &Path,
    entries: impl IntoIterator<Item = std::io::Result<std::fs::DirEntry>>,
) -> CliResult<u64> {
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io("listing", path.display().to_string(), e))?;
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(CliError::io(
                    "reading",
                    entry.path().display().to_string(),
                    e,
                ))
            }
        };
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
        "retained_bytes": s.retained_bytes,
        "files_bytes": files,
        "space_amplification": s.space_amplification(),
        "total_space_amplification": s.total_space_amplification(),
        "ram_bytes": directory_ram + cache_ram,
        "directory_ram_bytes": directory_ram,
        "directory_ram_bytes_per_entry": if s.entries == 0 { 0.0 } else { directory_ram as f64 / s.entries as f64 },
        "directory_ram_bytes_per_page": if s.pages == 0 { 0.0 } else { directory_ram as f64 / s.pages as f64 },
        "directory_slot_bytes": s.directory_slot_bytes,
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
    let total = f
        .get("total_space_amplification")
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
         retained data        {}\n\
         all files            {}\n\
         space amplification  {amp:.2} ({total:.2} with what old versions hold)\n\
         RAM                  {} (directory {}, {:.1} bytes per entry, {:.1} per page; page cache {})\n\
         I/O backend          {}",
        grouped(n("entries")),
        grouped(n("pages")),
        n("seq"),
        n("retained_versions"),
        s("hasher"),
        s("root"),
        bytes(n("disk_bytes")),
        bytes(n("live_bytes")),
        bytes(n("retained_bytes")),
        bytes(n("files_bytes")),
        bytes(n("ram_bytes")),
        bytes(n("directory_ram_bytes")),
        f.get("directory_ram_bytes_per_entry")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0),
        f.get("directory_ram_bytes_per_page")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0),
        bytes(n("page_cache_bytes")),
        s("io"),
    )
}

/// `stats`.
pub fn stats(ctx: &Ctx, args: &StatsArgs) -> CliResult<Outcome> {
    if args.watch {
        return watch(ctx, args);
    }
    let db = ctx.open_read_only("stats")?;
    let f = figures(&db)?;
    let human = describe(&f);
    Ok(Outcome::ok(f, human))
}

/// `stats --watch`: a reading every `interval` seconds (the database opened read-only each
/// time, so a writer's latest commit is seen), printed as it comes.
fn watch(ctx: &Ctx, args: &StatsArgs) -> CliResult<Outcome> {
    if !args.interval.is_finite() || args.interval < 0.01 || args.interval > 86_400.0 {
        return Err(CliError::Usage(format!(
            "--interval must be between 0.01 and 86400 seconds, not {}",
            args.interval
        )));
    }
    let interval = std::time::Duration::from_secs_f64(args.interval);
    let mut previous: Option<(std::time::Instant, u64, u64, u64)> = None;
    let mut readings = 0u64;
    loop {
        let db = ctx.open_read_only("stats")?;
        let mut f = figures(&db)?;
        drop(db);
        let now = std::time::Instant::now();
        let n = |k: &str| f.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let (seq, entries, disk) = (n("seq"), n("entries"), n("disk_bytes"));
        let rate = previous.map(|(at, s, _, _)| {
            seq.saturating_sub(s) as f64 / now.duration_since(at).as_secs_f64().max(1e-9)
        });
        let grew =
            previous.map(|(_, _, e, d)| (entries as i128 - e as i128, disk as i128 - d as i128));
        let line = if ctx.json {
            f["commits_per_second"] = json!(rate);
            f["entries_delta"] = json!(grew.map(|g| g.0 as i64));
            f["disk_bytes_delta"] = json!(grew.map(|g| g.1 as i64));
            f.to_string()
        } else {
            let amp = f
                .get("space_amplification")
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0);
            let mut line = String::new();
            if readings == 0 {
                line.push_str(&format!(
                    "{:>10} {:>10} {:>14} {:>12} {:>10} {:>10} {:>6}\n",
                    "seq", "commits/s", "entries", "Δentries", "disk", "Δdisk", "amp"
                ));
            }
            let signed = |d: i128, f: &dyn Fn(u64) -> String| {
                let sign = if d < 0 { "-" } else { "+" };
                format!("{sign}{}", f(d.unsigned_abs() as u64))
            };
            line.push_str(&format!(
                "{:>10} {:>10} {:>14} {:>12} {:>10} {:>10} {:>6.2}",
                seq,
                rate.map_or("-".to_string(), |r| format!("{r:.1}")),
                grouped(entries),
                grew.map_or("-".to_string(), |g| signed(g.0, &grouped)),
                bytes(disk),
                grew.map_or("-".to_string(), |g| signed(g.1, &bytes)),
                amp
            ));
            line
        };
        {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            // A closed pipe (`sprig stats --watch | head`) ends the watch.
            if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
                break;
            }
        }
        readings += 1;
        previous = Some((now, seq, entries, disk));
        if args.count.is_some_and(|c| readings >= c) {
            break;
        }
        std::thread::sleep(interval);
    }
    Ok(Outcome::silent())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A file deleted between the listing and its `stat` counts nothing instead of failing
    /// `stats` (it did, with "No such file or directory", while a writer deleted a segment).
    #[test]
    fn a_file_gone_after_the_listing_counts_nothing() {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join("kept"), [0u8; 100]).expect("write");
        std::fs::write(dir.path().join("gone"), [0u8; 4000]).expect("write");
        let listed: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        std::fs::remove_file(dir.path().join("gone")).expect("remove");
        let total = sum_file_bytes(dir.path(), listed).expect("a vanished file is no error");
        assert_eq!(total, 100);
        assert_eq!(files_bytes(dir.path()).expect("sizes"), 100);
    }
}
