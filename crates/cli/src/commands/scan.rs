//! `scan`: the entries of a key range, forward or reverse, up to a limit, with the key to
//! continue from.

use super::Ctx;
use crate::cli::ScanArgs;
use crate::error::{CliError, CliResult};
use crate::format::{display_value, hex};
use crate::keys::KeyFormat;
use crate::output::Outcome;
use serde_json::json;
use sprig::{Hasher, KeyPath};
use std::ops::Bound;

/// A range end: a key in `format`, or for key paths also a shorter hex prefix padded with
/// zeros (`80` is the middle of the key space).
fn range_key(format: KeyFormat, hasher: Hasher, text: &str, what: &str) -> CliResult<KeyPath> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    if format == KeyFormat::Path && digits.len() < 64 {
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CliError::input(what, "not hex digits"));
        }
        let padded = format!("{digits:0<64}");
        return format
            .parse(hasher, &padded)
            .map_err(|e| CliError::input(what, e));
    }
    format
        .parse(hasher, text)
        .map_err(|e| CliError::input(what, e))
}

/// `scan`.
pub fn scan(ctx: &Ctx, args: &ScanArgs) -> CliResult<Outcome> {
    let db = ctx.open_read_only("scan")?;
    let hasher = db.hasher();
    let (view, table) = ctx.view(&db)?;
    let format = args.keys.key_format;
    let lo = match &args.from {
        Some(t) => Bound::Included(range_key(format, hasher, t, "--from")?),
        None => Bound::Unbounded,
    };
    let hi = match &args.to {
        Some(t) => Bound::Excluded(range_key(format, hasher, t, "--to")?),
        None => Bound::Unbounded,
    };
    let mut cursor = view.range_in(&table, (lo, hi));
    if args.reverse {
        cursor = cursor.reverse();
    }
    let entries = cursor.next_n(args.limit)?;
    // Where to continue (forward: --from, inclusive; reverse: --to, exclusive, the last key
    // printed), if anything follows.
    let resume = if args.reverse {
        entries.last().map(|(k, _)| *k)
    } else {
        cursor.resume_from()
    };
    let more = cursor.peek_key()?.is_some();
    let next = resume.filter(|_| more);
    let rows: Vec<_> = entries
        .iter()
        .map(|(k, v)| json!({"key": hex(k), "value": hex(v)}))
        .collect();
    let mut lines: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{} {}", hex(k), display_value(v)))
        .collect();
    match next {
        Some(k) if args.reverse => lines.push(format!("(more: continue with --to {})", hex(&k))),
        Some(k) => lines.push(format!("(more: continue with --from {})", hex(&k))),
        None => lines.push(format!("({} entries)", entries.len())),
    }
    Ok(Outcome::ok(
        json!({"seq": view.seq(), "table": table.name(), "snapshot": ctx.snapshot,
               "reverse": args.reverse, "entries": rows, "next": next.map(|k| hex(&k))}),
        lines.join("\n"),
    ))
}
