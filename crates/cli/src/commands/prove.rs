//! `prove`: a path proof, multi-proof or witness of keys against the latest root, as a JSON
//! document (root, claimed values, proof) or as the bare binary encoding. With `--table`, the
//! proof is against that table's root; the JSON document then names the database root and
//! carries a table proof tying the table's root to it.

use super::{gather_keys, Ctx};
use crate::cli::{ProofFormat, ProveArgs};
use crate::error::{CliError, CliResult};
use crate::format::hex;
use crate::output::Outcome;
use crate::proofdoc::{ProofDoc, ProofKind, ProvenEntry, DOC_FORMAT};
use serde_json::json;
use std::io::{IsTerminal as _, Write as _};

/// `prove`.
pub fn prove(ctx: &Ctx, args: &ProveArgs) -> CliResult<Outcome> {
    let db = ctx.open_read_only("prove")?;
    let hasher = db.hasher();
    let mut keys = gather_keys(&args.key, args.from.as_deref(), |t| {
        args.keys.key_format.parse(hasher, t)
    })?;
    keys.sort_unstable();
    keys.dedup();
    if keys.is_empty() {
        return Err(CliError::Usage("no keys to prove".into()));
    }
    let (view, table) = ctx.view(&db)?;
    let (kind, encoded) = match (args.witness, keys.as_slice()) {
        (true, _) => (
            ProofKind::Witness,
            view.witness_in(&table, &keys)?.encode(hasher),
        ),
        (false, [key]) => (
            ProofKind::Path,
            view.path_proof_in(&table, key)?.encode(hasher),
        ),
        (false, _) => (
            ProofKind::Multi,
            view.multi_proof_in(&table, &keys)?.encode(hasher),
        ),
    };
    let values = view.get_many_in(&table, &keys)?;
    let present = values.iter().filter(|v| v.is_some()).count();
    let in_table = table != sprig::Table::default_table();
    // The root a reader trusts: the database root for a table's keys.
    let (root, table_root) = if in_table {
        (view.db_root(), view.table_root(&table)?)
    } else {
        (view.root(), view.root())
    };
    let table_proof = if in_table {
        Some(hex(&view.table_proof(&table, &keys[0])?.encode(hasher)))
    } else {
        None
    };
    let summary = json!({
        "kind": kind.name(), "keys": keys.len(), "present": present, "bytes": encoded.len(),
        "root": hex(&root), "seq": view.seq(), "hasher": hasher.name(),
        "table": table.name(), "table_root": hex(&table_root),
    });
    let bytes = match args.format {
        ProofFormat::Binary => encoded,
        ProofFormat::Json => {
            let doc = ProofDoc {
                format: DOC_FORMAT.to_string(),
                kind,
                hasher: hasher.name().to_string(),
                root: hex(&root),
                seq: Some(view.seq()),
                entries: keys
                    .iter()
                    .zip(&values)
                    .map(|(k, v)| ProvenEntry {
                        key: hex(k),
                        value: v.as_deref().map(hex),
                    })
                    .collect(),
                proof: hex(&encoded),
                table: in_table.then(|| table.name().to_string()),
                table_proof,
            };
            let mut text = serde_json::to_string_pretty(&doc)
                .map_err(|e| CliError::input("proof", e.to_string()))?;
            text.push('\n');
            text.into_bytes()
        }
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, &bytes).map_err(|e| CliError::io("writing", path, e))?;
            let mut doc = summary;
            if let Some(obj) = doc.as_object_mut() {
                obj.insert("out".into(), json!(path));
            }
            Ok(Outcome::ok(
                doc,
                format!(
                    "wrote a {} proof of {} key(s) ({present} present) to {path}: {} bytes\n\
                     root {} (version {})",
                    kind.name(),
                    keys.len(),
                    bytes.len(),
                    hex(&root),
                    view.seq()
                ),
            ))
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            if args.format == ProofFormat::Binary && stdout.is_terminal() {
                return Err(CliError::Usage(
                    "a binary proof would go to the terminal: pass --out FILE or redirect stdout"
                        .into(),
                ));
            }
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .map_err(|e| CliError::io("writing", "stdout", e))?;
            Ok(Outcome::silent())
        }
    }
}
