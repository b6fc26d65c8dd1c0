//! `table create|list|drop|stat`, `upsert` and `--table` on put, get, delete and root: values
//! land in the table named, roots and the database root are reported, and misuse (an unknown
//! table, an upsert without a resolver, dropping the default table) exits 2 or 5 with the
//! reason.

mod common;
use common::sprig;

#[test]
fn tables_upserts_and_the_table_option() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["init", "--db", "db"]).expect(0);
    let db = ["--db", "db", "--json"];
    let run = |args: &[&str]| sprig(d, &[&db[..], args].concat());
    let created = run(&["table", "create", "balances", "--resolver", "add-u64"]).expect(0);
    assert_eq!(created.json()["resolver"], "add-u64");
    for v in ["0x0500000000000000", "0x0700000000000000"] {
        run(&[
            "-t", "balances", "upsert", "-k", "text", "alice", "-v", "hex", v,
        ])
        .expect(0);
    }
    let got = run(&["-t", "balances", "get", "-k", "text", "alice"]).expect(0);
    assert_eq!(got.json()["entries"][0]["value"], "0c00000000000000");
    // The default table does not hold it.
    run(&["get", "-k", "text", "alice"]).expect(1);
    run(&["put", "-k", "text", "bob", "hi"]).expect(0);
    let list = run(&["table", "list"]).expect(0).json();
    let tables = list["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[0]["name"], "default");
    assert_eq!(tables[1]["entries"], 1);
    let root = run(&["-t", "balances", "root"]).expect(0).json();
    assert_eq!(root["root"], tables[1]["root"]);
    assert_eq!(root["db_root"], list["db_root"]);
    let stat = run(&["table", "stat", "balances"]).expect(0).json();
    assert_eq!(stat["entries"], 1);

    // Misuse.
    let e = run(&["-t", "nope", "get", "-k", "text", "a"])
        .expect(2)
        .json();
    assert!(e["error"]["message"].as_str().unwrap().contains("nope"));
    run(&["upsert", "-k", "text", "bob", "x"]).expect(5);
    run(&["table", "drop", "default"]).expect(2);
    run(&["table", "create", "balances"]).expect(2);
    run(&["table", "create", "x", "--resolver", "unknown"]).expect(2);

    run(&["table", "create", "more", "--resolver", "add-u64"]).expect(0);
    run(&[
        "-t",
        "more",
        "upsert",
        "-k",
        "text",
        "alice",
        "-v",
        "hex",
        "0x0100000000000000",
    ])
    .expect(0);
    let u = run(&[
        "table",
        "union",
        "sum",
        "balances",
        "more",
        "--resolver",
        "add-u64",
    ])
    .expect(0);
    assert_eq!(u.json()["entries"], 1);
    let got = run(&["-t", "sum", "get", "-k", "text", "alice"]).expect(0);
    assert_eq!(got.json()["entries"][0]["value"], "0d00000000000000");
    run(&["table", "union", "bad", "balances", "nope"]).expect(2);

    run(&["-t", "balances", "delete", "-k", "text", "alice"]).expect(0);
    run(&["table", "drop", "balances"]).expect(0);
    let list = run(&["table", "list"]).expect(0).json();
    assert_eq!(list["tables"].as_array().unwrap().len(), 3);
}
