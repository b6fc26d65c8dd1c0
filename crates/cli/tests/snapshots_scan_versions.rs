//! `snapshot save|list|open|restore|delete`, `--snapshot` on reads, `scan` (ranges, reverse,
//! paging by `next`), `versions` and `rollback`: results agree with what was written, and
//! misuse (an unknown snapshot, a taken name, a bad name) exits with the documented code.

mod common;
use common::sprig;

#[test]
fn snapshots_scans_versions_and_rollback_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["init", "--db", "db"]).expect(0);
    let db = ["--db", "db", "--json"];
    let run = |args: &[&str]| sprig(d, &[&db[..], args].concat());
    for i in 0..30 {
        run(&["put", "-k", "text", &format!("k{i}"), &format!("v{i}")]).expect(0);
    }
    let saved = run(&["snapshot", "save", "s1"]).expect(0).json();
    run(&["put", "-k", "text", "k1", "changed"]).expect(0);
    run(&["snapshot", "save", "s1"]).expect(2);
    run(&["snapshot", "save", "bad/name"]).expect(5);
    let list = run(&["snapshot", "list"]).expect(0).json();
    assert_eq!(list["snapshots"][0]["name"], "s1");
    assert_eq!(list["snapshots"][0]["db_root"], saved["db_root"]);

    // Reads from the snapshot see the old value; the latest version the new one.
    let old = run(&["--snapshot", "s1", "get", "-k", "text", "k1"])
        .expect(0)
        .json();
    assert_eq!(old["entries"][0]["value"], "7631");
    let new = run(&["get", "-k", "text", "k1"]).expect(0).json();
    assert_eq!(new["entries"][0]["value"], "6368616e676564");
    let opened = run(&["snapshot", "open", "s1", "--check"]).expect(0).json();
    assert!(opened["check"]["problems"].as_array().unwrap().is_empty());
    assert_eq!(opened["check"]["entries"], 30);

    // Paging through every entry, forward and reverse, visits each once in order.
    for reverse in [false, true] {
        let mut seen: Vec<String> = Vec::new();
        let mut bound: Option<String> = None;
        loop {
            let mut args = vec!["scan", "--limit", "7"];
            if reverse {
                args.push("--reverse");
            }
            if let Some(b) = &bound {
                args.extend([if reverse { "--to" } else { "--from" }, b.as_str()]);
            }
            let page = run(&args).expect(0).json();
            for e in page["entries"].as_array().unwrap() {
                seen.push(e["key"].as_str().unwrap().to_string());
            }
            match page["next"].as_str() {
                Some(n) => bound = Some(n.to_string()),
                None => break,
            }
        }
        let mut sorted = seen.clone();
        sorted.sort();
        if reverse {
            sorted.reverse();
        }
        assert_eq!(seen.len(), 30, "reverse {reverse}");
        assert_eq!(seen, sorted, "reverse {reverse}");
    }
    // A prefix bound: nothing below 80.., all at or above.
    let upper = run(&["scan", "--from", "80", "--limit", "100"])
        .expect(0)
        .json();
    assert!(upper["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["key"].as_str().unwrap() >= "80"));

    // Restore, versions, rollback.
    let restored = run(&["snapshot", "restore", "s1"]).expect(0).json();
    assert_eq!(restored["db_root"], saved["db_root"]);
    let versions = run(&["versions"]).expect(0).json();
    let seqs: Vec<u64> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["seq"].as_u64().unwrap())
        .collect();
    let before_restore = seqs[seqs.len() - 2];
    run(&["rollback", &before_restore.to_string()]).expect(0);
    let back = run(&["get", "-k", "text", "k1"]).expect(0).json();
    assert_eq!(back["entries"][0]["value"], "6368616e676564");
    run(&["rollback", "0"]).expect(2);

    run(&["snapshot", "delete", "s1"]).expect(0);
    run(&["snapshot", "open", "s1"]).expect(1);
    run(&["--snapshot", "s1", "get", "-k", "text", "k1"]).expect(1);
}
