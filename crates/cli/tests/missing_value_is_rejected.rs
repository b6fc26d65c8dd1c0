//! A JSON Lines record without a `"value"` field is invalid input (exit 5) naming its line, and
//! nothing of the file is imported, into an empty or a populated database; it used to delete
//! its key silently. Only an explicit `"value": null` deletes.

mod common;
use common::{root, sprig};

#[test]
fn a_record_without_a_value_is_rejected_and_nothing_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = "{\"key\":\"a\",\"value\":\"1\"}\n\
                {\"key\":\"c\",\"value\":\"3\"}\n\
                \n\
                {\"key\":\"b\"}\n\
                {\"key\":\"d\",\"value\":\"4\"}\n";
    std::fs::write(d.join("in.jsonl"), text).unwrap();
    // Empty: the bulk-load path; populated: the one-commit path.
    sprig(d, &["--db", "empty", "init"]).expect(0);
    sprig(d, &["--db", "full", "init"]).expect(0);
    sprig(d, &["--db", "full", "put", "-k", "text", "b", "old"]).expect(0);
    for db in ["empty", "full"] {
        let before = root(d, db);
        let args = ["--db", db, "import", "-k", "text", "-v", "text", "in.jsonl"];
        let run = sprig(d, &args).expect(5);
        assert!(run.stderr.contains("line 4"), "{db}: {}", run.stderr);
        assert!(
            run.stderr.contains("missing field `value`"),
            "{db}: {}",
            run.stderr
        );
        assert_eq!(root(d, db), before, "{db}: the database changed");
        let mut json_args = vec!["--json"];
        json_args.extend_from_slice(&args);
        let error = sprig(d, &json_args).expect(5).json();
        assert_eq!(error["error"]["kind"], "invalid_input");
    }
    let run = sprig(d, &["--db", "full", "get", "-k", "text", "b"]).expect(0);
    assert_eq!(run.stdout.trim(), "old");
    sprig(d, &["--db", "full", "get", "-k", "text", "a"]).expect(1);
    let stats = sprig(d, &["--db", "empty", "--json", "stats"])
        .expect(0)
        .json();
    assert_eq!(
        (stats["entries"].as_u64(), stats["seq"].as_u64()),
        (Some(0), Some(0))
    );
}

#[test]
fn an_explicit_null_value_deletes_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["--db", "db", "init"]).expect(0);
    sprig(d, &["--db", "db", "put", "-k", "text", "a", "1"]).expect(0);
    sprig(d, &["--db", "db", "put", "-k", "text", "b", "2"]).expect(0);
    std::fs::write(
        d.join("in.jsonl"),
        "{\"key\":\"b\",\"value\":null}\n{\"key\":\"c\",\"value\":\"3\"}\n",
    )
    .unwrap();
    sprig(
        d,
        &[
            "--db", "db", "import", "-k", "text", "-v", "text", "in.jsonl",
        ],
    )
    .expect(0);
    sprig(d, &["--db", "db", "get", "-k", "text", "b"]).expect(1);
    let run = sprig(d, &["--db", "db", "get", "-k", "text", "a", "c"]).expect(0);
    assert!(
        run.stdout.contains('1') && run.stdout.contains('3'),
        "{}",
        run.stdout
    );
}
