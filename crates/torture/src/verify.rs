//! Reading a database back and comparing it with the model of what it must hold: root, entry
//! count, a full key-order scan, point reads one by one and batched, path proofs against the
//! model's root, and optionally the engine's own full check of every page and value.
//!
//! A typed error from the engine is returned as an error (the caller decides whether it is
//! the expected corruption report); a difference served without an error is returned as
//! `Ok(Some(description))`, the one outcome no torture run may ever see.

use sprig::{Db, KeyPath};
use sprig_core::ReferenceModel;

/// How many of the probe keys get a path proof checked.
const PROOFS_PER_COMPARE: usize = 16;

/// Compare `db` with `model`; `probe` are keys to read one by one (present or absent).
pub fn compare(
    db: &Db,
    model: &ReferenceModel,
    probe: &[KeyPath],
    full_check: bool,
) -> Result<Option<String>, sprig::Error> {
    let view = db.view();
    if view.root() != model.root() {
        return Ok(Some(format!(
            "root at seq {} differs from the model's",
            view.seq()
        )));
    }
    if view.len() != model.len() as u64 {
        return Ok(Some(format!(
            "{} entries instead of {}",
            view.len(),
            model.len()
        )));
    }
    let mut expected = model.iter();
    for item in view.iter() {
        let (key, value) = item?;
        match expected.next() {
            Some((k, v)) if *k == key && v == value.as_slice() => {}
            _ => return Ok(Some(format!("the scan differs at key {}", short_hex(&key)))),
        }
    }
    if expected.next().is_some() {
        return Ok(Some("the scan ended early".into()));
    }
    for key in probe {
        if view.get(key)?.as_deref() != model.get(key) {
            return Ok(Some(format!("the value of {} differs", short_hex(key))));
        }
    }
    for (key, got) in probe.iter().zip(view.get_many(probe)?) {
        if got.as_deref() != model.get(key) {
            return Ok(Some(format!(
                "the batched read of {} differs",
                short_hex(key)
            )));
        }
    }
    let step = (probe.len() / PROOFS_PER_COMPARE).max(1);
    for key in probe.iter().step_by(step) {
        let proof = view.path_proof(key)?;
        if proof
            .verify_value(db.hasher(), &model.root(), key, model.get(key))
            .is_err()
        {
            return Ok(Some(format!(
                "the proof of {} does not verify",
                short_hex(key)
            )));
        }
    }
    if full_check {
        let report = db.check(&mut |_, _| {})?;
        if let Some(problem) = report.problems.into_iter().next() {
            return Err(problem);
        }
        if report.entries != model.len() as u64 {
            return Ok(Some(format!(
                "the full check counted {} entries instead of {}",
                report.entries,
                model.len()
            )));
        }
    }
    Ok(None)
}

/// The first bytes of a key, for messages.
pub fn short_hex(key: &KeyPath) -> String {
    key.iter().take(6).map(|b| format!("{b:02x}")).collect()
}
