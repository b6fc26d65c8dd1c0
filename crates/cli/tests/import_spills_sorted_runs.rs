//! An import larger than its memory budget (`--memory-mib 8`: 4 MiB for records read) spills
//! sorted runs to temporary files and merges them back with the same meaning as reading the
//! file in order: the last record of a key wins, across runs too (a put overwritten or
//! deleted by a later line, a delete undone by a later put). Into a populated database and into
//! an empty one (the file deletes keys, so one commit, not a bulk load), the result is the same
//! as with the default budget, holds exactly the expected keys, passes `check`, and leaves no
//! file behind in the database directory.

mod common;
use common::{root, sprig};
use std::collections::BTreeMap;
use std::path::Path;

const KEYS: u32 = 40_000;

/// The input, and what it leaves: key → value.
fn input(path: &Path) -> BTreeMap<String, String> {
    let mut text = String::new();
    let mut want = BTreeMap::new();
    let mut line = |key: String, value: Option<String>| {
        match &value {
            Some(v) => text.push_str(&format!("{{\"key\":\"{key}\",\"value\":\"{v}\"}}\n")),
            None => text.push_str(&format!("{{\"key\":\"{key}\",\"value\":null}}\n")),
        }
        match value {
            Some(v) => want.insert(key, v),
            None => want.remove(&key),
        };
    };
    for i in 0..KEYS {
        line(format!("key-{i}"), Some(format!("first-{i}")));
    }
    // Later lines, in later runs: overwrites, deletes, and deletes undone.
    for i in (0..KEYS).step_by(7) {
        line(format!("key-{i}"), Some(format!("second-{i}")));
    }
    for i in (0..KEYS).step_by(11) {
        line(format!("key-{i}"), None);
    }
    for i in (0..KEYS).step_by(33) {
        line(format!("key-{i}"), Some(format!("third-{i}")));
    }
    std::fs::write(path, text).unwrap();
    want
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_import_larger_than_its_budget_gives_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let want = input(&d.join("in.jsonl"));
    // The expected state, bulk loaded from a file of the final values alone.
    let text: String = want
        .iter()
        .map(|(k, v)| format!("{{\"key\":\"{k}\",\"value\":\"{v}\"}}\n"))
        .collect();
    std::fs::write(d.join("final.jsonl"), text).unwrap();
    sprig(d, &["--db", "want", "init"]).expect(0);
    let args = [
        "--db",
        "want",
        "import",
        "-k",
        "text",
        "-v",
        "text",
        "final.jsonl",
    ];
    sprig(d, &args).expect(0);
    let want_root = root(d, "want");

    for (db, populated, budget) in [
        ("small-empty", false, "8"),
        ("small-full", true, "8"),
        ("default-full", true, "256"),
    ] {
        sprig(d, &["--db", db, "init"]).expect(0);
        if populated {
            // Keys the input overwrites and deletes, then deletes again.
            sprig(d, &["--db", db, "put", "-k", "text", "key-11", "old"]).expect(0);
            sprig(d, &["--db", db, "put", "-k", "text", "key-7", "old"]).expect(0);
        }
        let before = files(&d.join(db));
        let args = [
            "--db",
            db,
            "--json",
            "import",
            "-k",
            "text",
            "-v",
            "text",
            "--memory-mib",
            budget,
            "in.jsonl",
        ];
        let out = sprig(d, &args).expect(0).json();
        assert_eq!(out["mode"], "one commit", "{db}: {out}");
        let runs = out["spilled_runs"].as_u64().unwrap();
        assert!((budget == "8") == (runs > 0), "{db}: {out}");
        assert_eq!(out["entries"], want.len(), "{db}: {out}");
        assert_eq!(root(d, db), want_root, "{db}");
        sprig(d, &["--db", db, "check"]).expect(0);
        let run = sprig(
            d,
            &["--db", db, "get", "-k", "text", "key-7", "key-66", "key-14"],
        );
        assert_eq!(
            run.expect(0).stdout.lines().collect::<Vec<_>>().len(),
            3,
            "{db}"
        );
        sprig(d, &["--db", db, "get", "-k", "text", "key-11"]).expect(1);
        // Only the commit's own files changed: no temporary file is left.
        let after = files(&d.join(db));
        assert!(
            after.iter().all(|n| before.contains(n)
                || n.starts_with("seg-")
                || n.starts_with("wal-")
                || n.starts_with("ckpt-")),
            "{db}: {after:?}"
        );
    }
    let bad = ["--db", "want", "import", "--memory-mib", "4", "final.jsonl"];
    sprig(d, &bad).expect(2);
}
