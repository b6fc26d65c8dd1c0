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

/// `--table` on import, export, prove and verify: records land in the table named, an export
/// of it round-trips into another table with the same root, and a proof of its keys verifies
/// against the database root (through the table proof it carries) and fails against any other.
#[test]
fn import_export_prove_and_verify_in_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["init", "--db", "db"]).expect(0);
    let db = ["--db", "db", "--json"];
    let run = |args: &[&str]| sprig(d, &[&db[..], args].concat());
    run(&["table", "create", "accounts"]).expect(0);
    run(&["table", "create", "copy"]).expect(0);
    let lines: String = (0..200)
        .map(|i| format!("{{\"key\": \"acct-{i}\", \"value\": \"{i}\"}}\n"))
        .collect();
    std::fs::write(d.join("in.jsonl"), lines).unwrap();
    let imported = run(&[
        "-t",
        "accounts",
        "import",
        "-k",
        "text",
        "--value-format",
        "text",
        "in.jsonl",
    ])
    .expect(0)
    .json();
    assert_eq!(imported["table"], "accounts");
    assert_eq!(imported["entries"], 200);
    // The default table got nothing.
    run(&["get", "-k", "text", "acct-1"]).expect(1);
    run(&["-t", "accounts", "export", "out.jsonl"]).expect(0);
    run(&["-t", "copy", "import", "out.jsonl"]).expect(0);
    let a = run(&["-t", "accounts", "root"]).expect(0).json();
    let c = run(&["-t", "copy", "root"]).expect(0).json();
    assert_eq!(a["root"], c["root"]);
    let db_root = a["db_root"].as_str().unwrap().to_string();

    for keys in [&["acct-7"][..], &["acct-7", "acct-9", "nobody"][..]] {
        let mut args = vec!["-t", "accounts", "prove", "-k", "text", "--out", "p.json"];
        args.extend_from_slice(keys);
        run(&args).expect(0);
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("p.json")).unwrap()).unwrap();
        assert_eq!(doc["table"], "accounts");
        assert_eq!(doc["root"], db_root.as_str());
        let ok = run(&["verify", "p.json", "--root", &db_root])
            .expect(0)
            .json();
        assert_eq!(ok["verified"], true);
        assert_eq!(ok["table"], "accounts");
        // Any other database root fails.
        let other = a["root"].as_str().unwrap();
        run(&["verify", "p.json", "--root", other]).expect(5);
        // A proof naming another table fails too.
        let mut forged = doc.clone();
        forged["table"] = "copy".into();
        std::fs::write(d.join("f.json"), forged.to_string()).unwrap();
        run(&["verify", "f.json", "--root", &db_root]).expect(5);
    }
}

/// `table union --incremental` and `table supply`: the union serves lookups at once, is listed
/// with its debt and without a root, refuses writes, and once supplied to the end has the
/// immediate union's root.
#[test]
fn incremental_union_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["init", "--db", "db"]).expect(0);
    let db = ["--db", "db", "--json"];
    let run = |args: &[&str]| sprig(d, &[&db[..], args].concat());
    for t in ["e1", "e2"] {
        run(&["table", "create", t, "--resolver", "add-u64"]).expect(0);
        for i in 0..30 {
            let key = format!("k{i}");
            run(&[
                "-t",
                t,
                "upsert",
                "-k",
                "text",
                &key,
                "-v",
                "hex",
                "0x0100000000000000",
            ])
            .expect(0);
        }
    }
    run(&["table", "union", "all", "e1", "e2", "--resolver", "add-u64"]).expect(0);
    let started = run(&[
        "table",
        "union",
        "inc",
        "e1",
        "e2",
        "--resolver",
        "add-u64",
        "--incremental",
    ])
    .expect(0)
    .json();
    assert_eq!(started["union_debt"], 60);
    let got = run(&["-t", "inc", "get", "-k", "text", "k3"])
        .expect(0)
        .json();
    assert_eq!(got["entries"][0]["value"], "0200000000000000");
    let stat = run(&["table", "stat", "inc"]).expect(0).json();
    assert_eq!(stat["union_debt"], 60);
    run(&["-t", "inc", "put", "-k", "text", "k3", "x"]).expect(2);
    run(&["-t", "inc", "root"]).expect(2);
    let step = run(&["table", "supply", "inc", "--work", "10", "--step", "4"])
        .expect(0)
        .json();
    assert_eq!(step["union_debt"], 50);
    assert_eq!(step["commits"], 3);
    let done = run(&["table", "supply", "inc"]).expect(0).json();
    assert_eq!(done["union_debt"], 0);
    let all = run(&["-t", "all", "root"]).expect(0).json();
    assert_eq!(done["root"], all["root"]);
    run(&["-t", "inc", "put", "-k", "text", "k3", "x"]).expect(0);
}
