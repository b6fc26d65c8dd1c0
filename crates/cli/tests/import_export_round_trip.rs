//! Export and re-import in both formats reproduce the root; bad input files are rejected
//! with the place of the error and change nothing.

mod common;
use common::{loaded_db, root, sprig, write_text_keys};

#[test]
fn both_formats_round_trip_to_the_same_root() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    loaded_db(d, "src", 3000);
    sprig(d, &["--db", "src", "delete", "-k", "text", "key-7"]).expect(0);
    let want = root(d, "src");
    for (format, file) in [("jsonl", "out.jsonl"), ("binary", "out.bin")] {
        sprig(d, &["--db", "src", "export", "--format", format, file]).expect(0);
        let copy = format!("copy-{format}");
        sprig(d, &["--db", &copy, "init"]).expect(0);
        let run = sprig(d, &["--db", &copy, "--json", "import", file]).expect(0);
        assert_eq!(run.json()["records"], 2999);
        assert_eq!(root(d, &copy), want);
    }
    // Into a database that already has commits: one commit, same result.
    sprig(d, &["--db", "batch", "init"]).expect(0);
    sprig(d, &["--db", "batch", "put", "-k", "text", "key-7", "x"]).expect(0);
    sprig(d, &["--db", "batch", "delete", "-k", "text", "key-7"]).expect(0);
    let run = sprig(d, &["--db", "batch", "--json", "import", "out.bin"]).expect(0);
    assert_eq!(run.json()["mode"], "one commit");
    assert_eq!(root(d, "batch"), want);
    let run = sprig(d, &["--db", "src", "export", "-"]).expect(0);
    assert_eq!(run.stdout.lines().count(), 2999);
}

#[test]
fn bad_input_files_are_rejected_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    loaded_db(d, "db", 100);
    let before = root(d, "db");
    let input = d.join("bad.jsonl");
    write_text_keys(&input, 50);
    let mut text = std::fs::read_to_string(&input).unwrap();
    text.push_str("{\"key\":\"key-x\",\"value\":\"zz\"}\n");
    std::fs::write(&input, text).unwrap();
    let run = sprig(d, &["--db", "db", "import", "-k", "text", "bad.jsonl"]).expect(5);
    assert!(run.stderr.contains("line 51"), "{}", run.stderr);
    assert_eq!(root(d, "db"), before);
    // A binary file cut short.
    sprig(
        d,
        &["--db", "db", "export", "--format", "binary", "all.bin"],
    )
    .expect(0);
    let bytes = std::fs::read(d.join("all.bin")).unwrap();
    std::fs::write(d.join("cut.bin"), &bytes[..bytes.len() - 3]).unwrap();
    sprig(d, &["--db", "fresh", "init"]).expect(0);
    let run = sprig(d, &["--db", "fresh", "import", "cut.bin"]).expect(5);
    assert!(run.stderr.contains("byte offset"), "{}", run.stderr);
    let stats = sprig(d, &["--db", "fresh", "--json", "stats"])
        .expect(0)
        .json();
    assert_eq!(stats["entries"], 0);
    assert_eq!(stats["seq"], 0);
    sprig(d, &["--db", "db", "import", "missing.jsonl"]).expect(4);
}
