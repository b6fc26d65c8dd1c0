//! Builds a state of 100,000 keys in the reference model, proves and verifies a sample with
//! path proofs, a multi-proof and a block witness, and prints the root and timings.

use sprig_core::{Hasher, KeyPath, ReferenceModel, ValueHash, Witness};
use std::time::Instant;

const KEYS: u32 = 100_000;
const SAMPLE: usize = 1_000;
/// Path proofs re-hash the whole model each (it is the slow, obviously correct oracle), so the
/// demo proves fewer of them one by one than it proves together in the witness.
const PATH_PROOFS: usize = 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hasher = Hasher::default();
    let started = Instant::now();
    let mut model = ReferenceModel::new(hasher);
    for i in 0..KEYS {
        let key = sprig_core::key_path_of(hasher, format!("account-{i}").as_bytes());
        model.insert(key, u64::from(i).to_le_bytes().to_vec());
    }
    let loaded = started.elapsed();

    let started = Instant::now();
    let root = model.root();
    let rooted = started.elapsed();
    println!("state: {} keys, hasher {hasher}", model.len());
    println!("root:  {}", hex(&root));
    println!("load {loaded:.2?}, root from scratch {rooted:.2?}");

    // A sample of present and absent keys.
    let sample: Vec<KeyPath> = (0..SAMPLE as u32)
        .map(|i| sprig_core::key_path_of(hasher, format!("account-{}", i * 197).as_bytes()))
        .collect();

    let started = Instant::now();
    let mut bytes = 0usize;
    for key in &sample[..PATH_PROOFS] {
        let proof = model.path_proof(key);
        let encoded = proof.encode(hasher);
        bytes += encoded.len();
        let decoded = sprig_core::PathProof::decode(&encoded, hasher)?;
        decoded.verify_value(hasher, &root, key, model.get(key))?;
    }
    println!(
        "{PATH_PROOFS} path proofs proved, encoded and verified in {:.2?} ({} bytes each on average)",
        started.elapsed(),
        bytes / PATH_PROOFS
    );

    let started = Instant::now();
    let witness = model.witness(&sample);
    let encoded = witness.encode(hasher);
    let verified = Witness::decode(&encoded, hasher)?.verify(hasher, &root)?;
    for key in &sample {
        verified.check_value(key, model.get(key))?;
    }
    // Re-execute a block: every sampled key gets a new value; the witness derives the new root.
    let changes: Vec<(KeyPath, Option<ValueHash>)> = sample
        .iter()
        .map(|k| (*k, Some(hasher.hash_value(b"new balance"))))
        .collect();
    let new_root = verified.apply(&changes)?;
    model.apply(sample.iter().map(|k| (*k, Some(b"new balance".to_vec()))));
    if new_root != model.root() {
        return Err("witness-derived root differs from the model's".into());
    }
    println!(
        "witness of {SAMPLE} keys: {} bytes ({} per key), verified and applied in {:.2?}",
        encoded.len(),
        encoded.len() / SAMPLE,
        started.elapsed()
    );
    println!("new root: {}", hex(&new_root));
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
