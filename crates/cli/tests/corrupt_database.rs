//! A damaged segment file is found by `check` (file and offset, exit 3) and refused by reads;
//! a healthy database, including the demo's, checks clean.

mod common;
use common::{loaded_db, sprig};

#[test]
fn check_reports_damaged_pages_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    loaded_db(d, "db", 2000);
    let run = sprig(d, &["--db", "db", "--json", "check"]).expect(0);
    assert_eq!(run.json()["clean"], true);
    let segment = std::fs::read_dir(d.join("db"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .expect("a segment file");
    let mut bytes = std::fs::read(&segment).unwrap();
    for page in 0..4 {
        bytes[page * 4096 + 700] ^= 0x5a;
    }
    std::fs::write(&segment, &bytes).unwrap();
    let run = sprig(d, &["--db", "db", "--json", "check"]).expect(3);
    let doc = run.json();
    assert_eq!(doc["clean"], false);
    let problem = &doc["problems"][0];
    assert!(
        problem["file"].as_str().unwrap().starts_with("seg-"),
        "{problem}"
    );
    assert!(problem["offset"].is_u64(), "{problem}");
    let run = sprig(d, &["--db", "db", "check"]).expect(3);
    assert!(run.stdout.contains("offset"), "{}", run.stdout);
    let run = sprig(d, &["--db", "db", "export", "out.jsonl"]).expect(3);
    assert!(run.stderr.contains("corruption"), "{}", run.stderr);
}

#[test]
fn a_small_demo_runs_and_checks_clean() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = [
        "--json",
        "demo",
        "--path",
        "demo",
        "--keys",
        "3000",
        "--batches",
        "2",
    ];
    let mut args = args.to_vec();
    args.extend_from_slice(&["--batch-size", "200", "--samples", "20"]);
    let doc = sprig(d, &args).expect(0).json();
    assert_eq!(doc["proofs_verified"], 22);
    assert_eq!(doc["seq"], 3);
    let stats = sprig(d, &["--db", "demo", "--json", "stats"])
        .expect(0)
        .json();
    assert_eq!(stats["root"], doc["root"]);
    sprig(d, &["--db", "demo", "check"]).expect(0);
    // Running it again replaces the old demo database.
    sprig(d, &args).expect(0);
}
