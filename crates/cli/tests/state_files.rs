//! `snapshot export|import` and `sync export|verify|import`: a round trip reproduces every
//! table and the database root; a truncated file, any flipped byte, or a root that is not the
//! trusted one exits 5 with nothing imported.

mod common;
use common::sprig;

#[test]
fn state_files_round_trip_and_damage_imports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["init", "--db", "a"]).expect(0);
    let a = |args: &[&str]| sprig(d, &[&["--db", "a", "--json"][..], args].concat());
    a(&["table", "create", "utxo", "--resolver", "add-u64"]).expect(0);
    for i in 0..40 {
        a(&["put", "-k", "text", &format!("k{i}"), &format!("value {i}")]).expect(0);
    }
    a(&[
        "-t",
        "utxo",
        "upsert",
        "-k",
        "text",
        "x",
        "-v",
        "hex",
        "0x0100000000000000",
    ])
    .expect(0);
    let saved = a(&["snapshot", "save", "s"]).expect(0).json();
    let db_root = saved["db_root"].as_str().unwrap().to_string();
    a(&["snapshot", "export", "s", "s.spst", "--chunk-entries", "6"]).expect(0);
    let table_root = a(&["root"]).expect(0).json()["root"]
        .as_str()
        .unwrap()
        .to_string();
    a(&["sync", "export", "--out", "t.spst", "--chunk-entries", "9"]).expect(0);

    let pristine = std::fs::read(d.join("s.spst")).unwrap();
    let mut n = 0;
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("truncated".into(), pristine[..pristine.len() - 40].to_vec()),
        (
            "cut in half".into(),
            pristine[..pristine.len() / 2].to_vec(),
        ),
    ];
    for at in (0..pristine.len()).step_by(97) {
        let mut b = pristine.clone();
        b[at] ^= 0x10;
        cases.push((format!("byte {at} flipped"), b));
    }
    for (what, bytes) in cases {
        n += 1;
        let db = format!("bad{n}");
        sprig(d, &["init", "--db", &db]).expect(0);
        std::fs::write(d.join("bad.spst"), &bytes).unwrap();
        let out = sprig(
            d,
            &[
                "--db", &db, "--json", "snapshot", "import", "bad.spst", "--root", &db_root,
            ],
        );
        out.expect(5);
        let tables = sprig(d, &["--db", &db, "--json", "table", "list"])
            .expect(0)
            .json();
        assert_eq!(
            tables["tables"].as_array().unwrap().len(),
            1,
            "{what}: a table was created"
        );
        assert_eq!(
            tables["tables"][0]["entries"], 0,
            "{what}: entries were imported"
        );
    }

    // The honest file: every table back, the same database root.
    sprig(d, &["init", "--db", "b"]).expect(0);
    let b = |args: &[&str]| sprig(d, &[&["--db", "b", "--json"][..], args].concat());
    b(&["snapshot", "import", "s.spst", "--root", &"00".repeat(32)]).expect(5);
    let done = b(&["snapshot", "import", "s.spst", "--root", &db_root])
        .expect(0)
        .json();
    assert_eq!(done["db_root"], db_root.as_str());
    assert_eq!(b(&["root"]).expect(0).json()["db_root"], db_root.as_str());
    let got = b(&["-t", "utxo", "get", "-k", "text", "x"])
        .expect(0)
        .json();
    assert_eq!(got["entries"][0]["value"], "0100000000000000");
    b(&["snapshot", "import", "s.spst"]).expect(2); // not empty any more

    // Sync of one table: verify, then import into another database's table.
    sprig(d, &["init", "--db", "c"]).expect(0);
    let c = |args: &[&str]| sprig(d, &[&["--db", "c", "--json"][..], args].concat());
    c(&["sync", "verify", "t.spst", "--root", &table_root]).expect(0);
    c(&["sync", "verify", "t.spst", "--root", &db_root]).expect(5);
    c(&["sync", "import", "t.spst", "--root", &table_root]).expect(0);
    assert_eq!(c(&["root"]).expect(0).json()["root"], table_root.as_str());
}
