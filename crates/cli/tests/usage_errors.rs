//! Bad usage, missing databases and missing keys give clear messages and distinct exit codes.

mod common;
use common::{sprig, Run};

#[test]
fn bad_arguments_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["frobnicate"]).expect(2);
    sprig(d, &["get"]).expect(2);
    sprig(d, &["init", "--db", "x", "--hasher", "md5"]).expect(2);
    let run = sprig(d, &["root"]).expect(2);
    assert!(run.stderr.contains("--db"), "{}", run.stderr);
    let run = sprig(d, &["--json", "root"]).expect(2);
    assert_eq!(run.json()["error"]["kind"], "usage");
}

#[test]
fn help_lists_exit_codes_and_examples() {
    let dir = tempfile::tempdir().unwrap();
    let run = sprig(dir.path(), &["--help"]).expect(0);
    assert!(run.stdout.contains("Exit codes"));
    assert!(run.stdout.contains("sprig demo"));
    let run = sprig(dir.path(), &["import", "--help"]).expect(0);
    assert!(run.stdout.contains("Examples"));
}

#[test]
fn missing_and_existing_databases_exit_6() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for cmd in [
        &["root"][..],
        &["stats"],
        &["check"],
        &["get", "-k", "text", "a"],
    ] {
        let args: Vec<&str> = ["--db", "nowhere"].iter().chain(cmd).copied().collect();
        let run = sprig(d, &args).expect(6);
        assert!(run.stderr.contains("no Sprig database"), "{}", run.stderr);
    }
    assert!(
        !d.join("nowhere").exists(),
        "a read command created a database"
    );
    sprig(d, &["--db", "db", "init"]).expect(0);
    let run: Run = sprig(d, &["--db", "db", "--json", "init"]).expect(6);
    assert_eq!(run.json()["error"]["exit_code"], 6);
    std::fs::create_dir(d.join("other")).unwrap();
    std::fs::write(d.join("other/file"), b"x").unwrap();
    sprig(d, &["--db", "other", "init"]).expect(6);
    sprig(d, &["demo", "--path", "other", "--keys", "10"]).expect(6);
    assert!(d.join("other/file").exists());
}

#[test]
fn missing_keys_exit_1_and_bad_keys_exit_5() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["--db", "db", "init"]).expect(0);
    sprig(d, &["--db", "db", "put", "-k", "text", "alice", "100"]).expect(0);
    let run = sprig(d, &["--db", "db", "get", "-k", "text", "alice"]).expect(0);
    assert_eq!(run.stdout.trim(), "100");
    let run = sprig(d, &["--db", "db", "--json", "get", "-k", "text", "bob"]).expect(1);
    assert_eq!(run.json()["entries"][0]["found"], false);
    let run = sprig(d, &["--db", "db", "get", "abcd"]).expect(5);
    assert!(run.stderr.contains("32 bytes"), "{}", run.stderr);
    sprig(
        d,
        &["--db", "db", "put", "-v", "hex", "-k", "text", "a", "xyz"],
    )
    .expect(5);
    sprig(d, &["--db", "db", "delete", "-k", "text", "alice"]).expect(0);
    sprig(d, &["--db", "db", "get", "-k", "text", "alice"]).expect(1);
}
