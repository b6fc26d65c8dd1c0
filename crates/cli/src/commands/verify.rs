//! `verify`: check a proof, multi-proof or witness against a root, offline. Uses only
//! `sprig-core` (and the CLI's parsing helpers, which use only `sprig-core`): no database,
//! no engine — exactly what a light client would run.

use crate::cli::VerifyArgs;
use crate::error::{exit, CliError, CliResult};
use crate::format::{hex, unhex};
use crate::output::Outcome;
use crate::proofdoc::{ProofDoc, ProofKind, DOC_FORMAT};
use serde_json::json;
use sprig_core::proof::encoded_hasher;
use sprig_core::{Hasher, KeyPath, Lookup, MultiProof, Node, PathProof, TableProof, Witness};
use std::io::Read as _;

/// The largest proof file read (a witness of 2^24 keys fits well below).
const MAX_PROOF_FILE_BYTES: u64 = 4 << 30;

/// A key to look up, and the value the user claims for it: `None` for no claim,
/// `Some(None)` for "absent", `Some(Some(v))` for "has value v".
type Claim = (KeyPath, Option<Option<Vec<u8>>>);

/// What is to be verified, whatever the file's form.
struct Task {
    kind: ProofKind,
    hasher: Hasher,
    /// For keys of a table: its name and the database root its root was shown under.
    table: Option<(String, Node)>,
    /// The root the proof is checked against (a table's root, for keys of a table).
    root: Node,
    encoded: Vec<u8>,
    claims: Vec<Claim>,
    note: Option<String>,
}

/// `verify`.
pub fn verify(args: &VerifyArgs) -> CliResult<Outcome> {
    let bytes = read_input(&args.file)?;
    let is_json = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    let task = if is_json {
        from_json(args, &bytes)?
    } else {
        from_binary(args, bytes)?
    };
    check(&task)
}

fn read_input(path: &str) -> CliResult<Vec<u8>> {
    let mut bytes = Vec::new();
    let result = if path == "-" {
        std::io::stdin()
            .take(MAX_PROOF_FILE_BYTES)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_PROOF_FILE_BYTES).read_to_end(&mut bytes))
    };
    result.map_err(|e| CliError::io("reading", path, e))?;
    Ok(bytes)
}

fn parse_root(text: &str, name: &str) -> CliResult<Node> {
    let bytes = unhex(text).map_err(|e| CliError::input(name, e))?;
    Node::try_from(bytes.as_slice())
        .map_err(|_| CliError::input(name, "a root is 32 bytes (64 hex digits)"))
}

fn from_json(args: &VerifyArgs, bytes: &[u8]) -> CliResult<Task> {
    if !args.key.is_empty() || !args.value.is_empty() {
        return Err(CliError::Usage(
            "--key and --value are for binary proofs; a JSON proof names its own keys".into(),
        ));
    }
    let bad = |what: String| CliError::input(&args.file, what);
    let doc: ProofDoc = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    if doc.format != DOC_FORMAT {
        return Err(bad(format!(
            "unknown proof document format {:?}",
            doc.format
        )));
    }
    let hasher = Hasher::from_name(&doc.hasher)
        .ok_or_else(|| bad(format!("unknown hasher {:?}", doc.hasher)))?;
    let (root, note) = match &args.root {
        Some(r) => (parse_root(r, "--root")?, None),
        None => (
            parse_root(&doc.root, &args.file)?,
            Some(
                "checked against the root named in the file; pass --root to check against a \
                 root you trust"
                    .to_string(),
            ),
        ),
    };
    let mut claims: Vec<Claim> = Vec::with_capacity(doc.entries.len());
    for (i, entry) in doc.entries.iter().enumerate() {
        let key_bytes = unhex(&entry.key).map_err(|e| bad(format!("entry {i}: {e}")))?;
        let key = KeyPath::try_from(key_bytes.as_slice())
            .map_err(|_| bad(format!("entry {i}: a key path is 32 bytes")))?;
        let value = match &entry.value {
            Some(v) => Some(unhex(v).map_err(|e| bad(format!("entry {i}: {e}")))?),
            None => None,
        };
        claims.push((key, Some(value)));
    }
    // Keys of a table: its root, shown under the database root, is what the proof is
    // checked against.
    let (root, table) = match (&doc.table, &doc.table_proof) {
        (None, None) => (root, None),
        (Some(name), Some(tp)) => {
            let encoded = unhex(tp).map_err(|e| bad(format!("table_proof: {e}")))?;
            let proof = TableProof::decode(&encoded, hasher)
                .map_err(|e| CliError::Verify(format!("table proof: {e}")))?;
            let first = claims
                .first()
                .map(|(k, _)| *k)
                .ok_or_else(|| bad("a table proof document proves no key".into()))?;
            proof
                .verify(hasher, &root, name, &first)
                .map_err(|e| CliError::Verify(format!("table {name:?} under the root: {e}")))?;
            (proof.table_root, Some((name.clone(), root)))
        }
        _ => return Err(bad("\"table\" and \"table_proof\" come together".into())),
    };
    Ok(Task {
        kind: doc.kind,
        hasher,
        table,
        root,
        encoded: unhex(&doc.proof).map_err(|e| bad(format!("proof: {e}")))?,
        claims,
        note,
    })
}

fn from_binary(args: &VerifyArgs, encoded: Vec<u8>) -> CliResult<Task> {
    let bad = |what: String| CliError::input(&args.file, what);
    let kind = ProofKind::of_encoding(&encoded).ok_or_else(|| {
        bad("neither a JSON proof document nor a binary proof, multi-proof or witness".into())
    })?;
    let hasher = encoded_hasher(&encoded).map_err(|e| bad(e.to_string()))?;
    let root = match &args.root {
        Some(r) => parse_root(r, "--root")?,
        None => {
            return Err(CliError::Usage(
                "a binary proof carries no root: pass --root HEX".into(),
            ))
        }
    };
    if !args.value.is_empty() && args.value.len() != args.key.len() {
        return Err(CliError::Usage(format!(
            "{} --value for {} --key: give one value per key, or none",
            args.value.len(),
            args.key.len()
        )));
    }
    if kind != ProofKind::Witness && args.key.is_empty() {
        return Err(CliError::Usage(format!(
            "a binary {} proof does not list its keys: pass --key",
            kind.name()
        )));
    }
    if kind == ProofKind::Path && args.key.len() != 1 {
        return Err(CliError::Usage(
            "a path proof proves exactly one --key".into(),
        ));
    }
    let mut claims = Vec::with_capacity(args.key.len());
    for (i, text) in args.key.iter().enumerate() {
        let key = args
            .keys
            .key_format
            .parse(hasher, text)
            .map_err(|e| CliError::input("--key", e))?;
        let value = match args.value.get(i) {
            Some(v) => Some(Some(
                args.value_format
                    .parse(v)
                    .map_err(|e| CliError::input("--value", e))?,
            )),
            None => None,
        };
        claims.push((key, value));
    }
    Ok(Task {
        kind,
        hasher,
        table: None,
        root,
        encoded,
        claims,
        note: None,
    })
}

/// Decode and verify, then look every claimed key up in the verified proof.
fn check(task: &Task) -> CliResult<Outcome> {
    let failed = |e: sprig_core::ProofError| CliError::Verify(e.to_string());
    let h = task.hasher;
    let mut lookups: Vec<(KeyPath, Lookup)> = Vec::new();
    match task.kind {
        ProofKind::Path => {
            let proof = PathProof::decode(&task.encoded, h).map_err(failed)?;
            let [(key, _)] = task.claims.as_slice() else {
                return Err(CliError::Verify(format!(
                    "a path proof proves one key, but {} are claimed",
                    task.claims.len()
                )));
            };
            lookups.push((*key, proof.verify(h, &task.root, key).map_err(failed)?));
        }
        ProofKind::Multi => {
            let proof = MultiProof::decode(&task.encoded, h).map_err(failed)?;
            let verified = proof.verify(h, &task.root).map_err(failed)?;
            for (key, _) in &task.claims {
                lookups.push((*key, verified.lookup(key).map_err(failed)?));
            }
        }
        ProofKind::Witness => {
            let witness = Witness::decode(&task.encoded, h).map_err(failed)?;
            let verified = witness.verify(h, &task.root).map_err(failed)?;
            let keys: Vec<KeyPath> = if task.claims.is_empty() {
                verified.keys().to_vec()
            } else {
                task.claims.iter().map(|(k, _)| *k).collect()
            };
            for key in keys {
                lookups.push((key, verified.lookup(&key).map_err(failed)?));
            }
        }
    }
    report(task, &lookups)
}

fn report(task: &Task, lookups: &[(KeyPath, Lookup)]) -> CliResult<Outcome> {
    let mut rows = Vec::with_capacity(lookups.len());
    let mut lines = vec![format!(
        "{} proof hashes to root {} ({})",
        task.kind.name(),
        hex(&task.root),
        task.hasher.name()
    )];
    if let Some((name, db_root)) = &task.table {
        lines.push(format!(
            "  the root of table {name:?}, under database root {}",
            hex(db_root)
        ));
    }
    if let Some(note) = &task.note {
        lines.push(format!("note: {note}"));
    }
    let mut mismatches = 0usize;
    for (i, (key, lookup)) in lookups.iter().enumerate() {
        let claim = task.claims.get(i).and_then(|(_, c)| c.as_ref());
        let matches = claim.map(|value| lookup.matches(task.hasher, value.as_deref()));
        mismatches += usize::from(matches == Some(false));
        let (status, value_hash) = match lookup {
            Lookup::Present(vh) => ("present", Some(hex(vh))),
            Lookup::Absent => ("absent", None),
        };
        rows.push(json!({
            "key": hex(key), "status": status, "value_hash": value_hash, "claim_matches": matches,
        }));
        let verdict = match matches {
            Some(true) => " — matches the claimed value",
            Some(false) => " — DOES NOT match the claimed value",
            None => "",
        };
        lines.push(format!(
            "  {} {status}{}{verdict}",
            hex(key),
            value_hash
                .map(|h| format!(" (value hash {h})"))
                .unwrap_or_default()
        ));
    }
    let ok = mismatches == 0;
    if !ok {
        lines.push(format!(
            "{mismatches} claimed value(s) do not match the proof"
        ));
    }
    let mut outcome = Outcome::ok(
        json!({
            "verified": ok, "kind": task.kind.name(), "hasher": task.hasher.name(),
            "root": hex(&task.root), "note": task.note, "keys": rows,
            "table": task.table.as_ref().map(|(n, _)| n),
            "db_root": task.table.as_ref().map(|(_, r)| hex(r)),
        }),
        lines.join("\n"),
    );
    if !ok {
        outcome.code = exit::INVALID_INPUT;
    }
    Ok(outcome)
}
