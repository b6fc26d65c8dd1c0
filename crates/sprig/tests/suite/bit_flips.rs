//! Bit flips are detected, repaired or harmless — never served: a small database with every
//! kind of file (segments holding pages and value-log records, commit records in the log, a
//! checkpoint, the manifest) gets one random bit flipped in a random region of a random file;
//! then it is opened and everything is read: every key one by one and in a batch, the full
//! scan, path proofs and a witness against the model's root, and `Db::check`.
//!
//! Each flip must end in one of:
//! - detected: the open or a read fails with a typed corruption error;
//! - repaired: the flip hit a commit record, which is stored twice, and the state is exact;
//! - harmless: the flip hit bytes no live version references (old page versions, padding after
//!   a value, unused blocks), and the state is exact.
//!
//! Anything else fails the test: a wrong value, root or proof without an error, an error not
//! typed as corruption, a panic, or an exact state after a flip in live checked bytes.
//!
//! Replay with `SPRIG_TEST_SEED=<seed> cargo test -p sprig --test suite bit_flips::`.

use crate::common;

use common::{commit_changes, compare, follow_up_batch, options, run_workload, small_workload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::io::{FaultStorage, Storage, BLOCK_BYTES};
use sprig::log::checkpoint::{parse_checkpoint_file_name, Checkpoint};
use sprig::log::recycle::parse_spare_file_name;
use sprig::log::segments::{loc_offset, loc_segment, parse_segment_file_name, segment_file_name};
use sprig::state::directory::PageLoc;
use sprig::{Db, Hasher};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

const FLIPS: u64 = 1000;
const VALUE_HEADER_BYTES: u64 = 128;

fn storage(s: &FaultStorage) -> Arc<dyn Storage> {
    Arc::new(s.clone())
}

/// The byte ranges of each segment file that the latest version reads and checks: its pages
/// (whole blocks) and its value records (header and value, not the padding after).
fn live_ranges(base: &FaultStorage) -> BTreeMap<String, Vec<(u64, u64)>> {
    // A checkpoint of a copy holds the latest directory and every live value record (with a
    // single retained version, checkpoints are of the latest one).
    let copy = base.fork();
    let single = sprig::Options {
        retained_versions: 1,
        ..options()
    };
    let db = Db::open_with_storage(storage(&copy), single).unwrap();
    let seq = db.seq();
    db.checkpoint().unwrap();
    drop(db);
    let names = copy.list().unwrap();
    let newest = names
        .iter()
        .filter_map(|n| parse_checkpoint_file_name(n))
        .max()
        .unwrap();
    assert_eq!(newest, seq);
    let cp = Checkpoint::load(
        &copy,
        seq,
        &sprig::state::arena::Arena::new(),
        Hasher::Blake3,
    )
    .unwrap();
    let mut ranges: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for (_, dir) in cp.tables.dirs() {
        dir.for_each_page(|_, r| {
            if let PageLoc::Disk(l) = r.loc {
                ranges
                    .entry(segment_file_name(loc_segment(l)))
                    .or_default()
                    .push((loc_offset(l), BLOCK_BYTES as u64));
            }
        });
    }
    for l in cp.table.values.keys() {
        let name = segment_file_name(loc_segment(*l));
        let bytes = base.file_bytes(&name).unwrap();
        let at = loc_offset(*l) as usize;
        let len = u64::from_le_bytes(bytes[at + 36..at + 44].try_into().unwrap());
        ranges
            .entry(name)
            .or_default()
            .push((loc_offset(*l), VALUE_HEADER_BYTES + len));
    }
    ranges
}

#[derive(Default)]
struct Tally {
    flips: u64,
    detected: u64,
    repaired: u64,
    harmless: u64,
    undetected: u64,
    by_file: BTreeMap<&'static str, [u64; 3]>,
    failures: Vec<String>,
}

fn kind_of(name: &str) -> &'static str {
    if parse_segment_file_name(name).is_some() {
        "segment"
    } else if parse_spare_file_name(name).is_some() {
        // An emptied segment's file kept for a new segment: nothing reads it.
        "spare segment"
    } else if name.starts_with("wal-") {
        "commit log"
    } else if name.starts_with("ckpt-") {
        "checkpoint"
    } else if name == "MANIFEST" {
        "manifest"
    } else {
        "other"
    }
}

#[test]
fn every_bit_flip_is_detected_repaired_or_harmless() {
    let seed = common::test_seed("bit_flips", 3);
    let workload = small_workload(seed, 120);
    let base = FaultStorage::new(seed);
    let out = run_workload(&storage(&base), &workload);
    assert!(out.error.is_none());
    let expected_seq = out.acked().seq + 2;
    let db = out.db.unwrap();
    // Commit records after the last checkpoint, so the log holds some.
    let mut model = out.states.last().unwrap().model.clone();
    for i in 0..2 {
        model = commit_changes(&db, &model, &follow_up_batch(seed + i, &workload.keys)).unwrap();
    }
    drop(db);
    let live = live_ranges(&base);
    let files: Vec<String> = base.list().unwrap();
    let kinds: Vec<&str> = files.iter().map(|f| kind_of(f)).collect();
    for k in ["segment", "commit log", "checkpoint", "manifest"] {
        assert!(kinds.contains(&k), "no {k} file among {files:?}");
    }
    let wal = files.iter().find(|f| f.starts_with("wal-")).unwrap();
    assert!(
        !base.file_bytes(wal).unwrap().is_empty(),
        "the log is empty"
    );

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tally = Tally::default();
    for flip in 0..FLIPS {
        let name = &files[rng.gen_range(0..files.len())];
        let bytes = base.file_bytes(name).unwrap();
        if bytes.is_empty() {
            continue;
        }
        let ranges = live.get(name).cloned().unwrap_or_default();
        // In a segment: a live page, a live value record, or anywhere, a third of the time each.
        let offset = match (kind_of(name), rng.gen_range(0..3)) {
            ("segment", r @ (0 | 1)) if !ranges.is_empty() => {
                let wanted: Vec<&(u64, u64)> = ranges
                    .iter()
                    .filter(|(_, len)| (*len == BLOCK_BYTES as u64) == (r == 0))
                    .collect();
                let pick = if wanted.is_empty() {
                    &ranges[rng.gen_range(0..ranges.len())]
                } else {
                    wanted[rng.gen_range(0..wanted.len())]
                };
                pick.0 + rng.gen_range(0..pick.1)
            }
            _ => rng.gen_range(0..bytes.len() as u64),
        };
        let bit = rng.gen_range(0..8u8);
        let is_live = match kind_of(name) {
            "segment" => ranges
                .iter()
                .any(|(at, len)| offset >= *at && offset < at + len),
            "spare segment" => false,
            _ => true,
        };
        tally.flips += 1;
        let copy = base.fork();
        copy.corrupt(name, offset, 1 << bit).unwrap();
        let what = format!("flip {flip}: bit {bit} of byte {offset} of {name}");
        let result = catch_unwind(AssertUnwindSafe(|| {
            let db = Db::open_with_storage(storage(&copy), options())?;
            if db.root() != model.root() || db.seq() != expected_seq {
                return Ok(Some(format!(
                    "opened at seq {} with another root, without an error",
                    db.seq()
                )));
            }
            compare(&db, &model, &workload.keys)
        }));
        let slot = match kind_of(name) {
            "segment" => 0,
            "commit log" => 1,
            _ => 2,
        };
        let entry = tally.by_file.entry(kind_of(name)).or_default();
        match result {
            Err(_) => tally.failures.push(format!("{what}: panic")),
            Ok(Err(e)) if e.is_corruption() => {
                tally.detected += 1;
                entry[0] += 1;
            }
            Ok(Err(e)) => tally
                .failures
                .push(format!("{what}: an error not typed as corruption: {e}")),
            Ok(Ok(Some(diff))) => {
                tally.undetected += 1;
                tally.failures.push(format!("{what}: undetected: {diff}"));
            }
            Ok(Ok(None)) if slot == 1 => {
                tally.repaired += 1;
                entry[1] += 1;
            }
            Ok(Ok(None)) if !is_live => {
                tally.harmless += 1;
                entry[2] += 1;
            }
            Ok(Ok(None)) => tally.failures.push(format!(
                "{what}: live checked bytes changed but nothing noticed"
            )),
        }
    }
    println!(
        "bit flips: {} flips, detected {}, repaired {}, harmless {}, undetected {}, failures {}",
        tally.flips,
        tally.detected,
        tally.repaired,
        tally.harmless,
        tally.undetected,
        tally.failures.len()
    );
    for (kind, [d, r, h]) in &tally.by_file {
        println!("  {kind}: detected {d}, repaired {r}, harmless {h}");
    }
    for f in tally.failures.iter().take(20) {
        println!("  {f}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} flips failed",
        tally.failures.len()
    );
    assert_eq!(tally.undetected, 0);
    assert_eq!(
        tally.flips,
        tally.detected + tally.repaired + tally.harmless
    );
}
