//! An import killed halfway (the crash hook aborts the process) leaves the database as it was,
//! both for a bulk load into an empty database and for a batch into a populated one.

mod common;
use common::{root, sprig, sprig_env, write_text_keys};

const CRASH: &str = "SPRIG_CLI_CRASH_AFTER_RECORDS";

#[test]
fn an_interrupted_bulk_load_leaves_the_database_empty() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["--db", "db", "init"]).expect(0);
    let empty = root(d, "db");
    write_text_keys(&d.join("in.jsonl"), 4000);
    let args = ["--db", "db", "import", "-k", "text", "in.jsonl"];
    let run = sprig_env(d, &args, &[(CRASH, "2000")]);
    assert_ne!(run.code, Some(0), "the crash hook did not fire");
    assert_eq!(root(d, "db"), empty);
    let stats = sprig(d, &["--db", "db", "--json", "stats"])
        .expect(0)
        .json();
    assert_eq!(stats["entries"], 0);
    sprig(d, &["--db", "db", "check"]).expect(0);
    // The import can simply be run again.
    let run = sprig(
        d,
        &["--db", "db", "--json", "import", "-k", "text", "in.jsonl"],
    )
    .expect(0);
    assert_eq!(run.json()["entries"], 4000);
}

#[test]
fn an_interrupted_batch_import_leaves_the_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["--db", "db", "init"]).expect(0);
    sprig(d, &["--db", "db", "put", "-k", "text", "key-1", "old"]).expect(0);
    let before = root(d, "db");
    write_text_keys(&d.join("in.jsonl"), 3000);
    let args = ["--db", "db", "import", "-k", "text", "in.jsonl"];
    let run = sprig_env(d, &args, &[(CRASH, "2999")]);
    assert_ne!(run.code, Some(0), "the crash hook did not fire");
    assert_eq!(root(d, "db"), before);
    let run = sprig(d, &["--db", "db", "get", "-k", "text", "key-1"]).expect(0);
    assert_eq!(run.stdout.trim(), "old");
    let run = sprig(
        d,
        &["--db", "db", "--json", "import", "-k", "text", "in.jsonl"],
    )
    .expect(0);
    assert_eq!(run.json()["entries"], 3000);
}
