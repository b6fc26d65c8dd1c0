//! Proofs, multi-proofs and witnesses made by `prove` verify offline with `verify`, in JSON and
//! binary; a wrong root, a tampered proof or a wrong claimed value exits 5.

mod common;
use common::{loaded_db, root, sprig};

#[test]
fn json_proofs_verify_against_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    loaded_db(d, "db", 500);
    let r = root(d, "db");
    let cases: [&[&str]; 3] = [
        &["key-1"],
        &["key-1", "key-2", "absent-key"],
        &["--witness", "key-3", "absent-key"],
    ];
    for (i, keys) in cases.iter().enumerate() {
        let out = format!("p{i}.json");
        let mut args = vec!["--db", "db", "prove", "-k", "text", "--out", &out];
        args.extend_from_slice(keys);
        sprig(d, &args).expect(0);
        let run = sprig(d, &["--json", "verify", &out, "--root", &r]).expect(0);
        let doc = run.json();
        assert_eq!(doc["verified"], true);
        let absent = keys.contains(&"absent-key");
        let statuses: Vec<&str> = doc["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses.contains(&"absent"), absent, "{statuses:?}");
        // Against another root: rejected.
        let wrong = format!("{}{}", &r[..63], if r.ends_with('0') { "1" } else { "0" });
        sprig(d, &["verify", &out, "--root", &wrong]).expect(5);
    }
    // A claimed value edited in the document no longer matches.
    let text = std::fs::read_to_string(d.join("p0.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let value = doc["entries"][0]["value"].as_str().unwrap().to_string();
    let edited = text.replace(&value, &"ff".repeat(value.len() / 2));
    std::fs::write(d.join("edited.json"), edited).unwrap();
    sprig(d, &["verify", "edited.json", "--root", &r]).expect(5);
    // A garbage file.
    std::fs::write(d.join("junk"), b"not a proof").unwrap();
    sprig(d, &["verify", "junk", "--root", &r]).expect(5);
}

#[test]
fn binary_proofs_verify_with_keys_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["--db", "db", "init", "--hasher", "keccak256"]).expect(0);
    sprig(d, &["--db", "db", "put", "-k", "text", "alice", "100"]).expect(0);
    sprig(d, &["--db", "db", "put", "-k", "text", "bob", "7"]).expect(0);
    let r = root(d, "db");
    let prove = ["--db", "db", "prove", "-k", "text", "--format", "binary"];
    let mut args = prove.to_vec();
    args.extend_from_slice(&["--out", "a.bin", "alice"]);
    sprig(d, &args).expect(0);
    let check = [
        "verify", "a.bin", "--root", &r, "-k", "text", "--key", "alice", "-v", "text",
    ];
    let mut ok = check.to_vec();
    ok.extend_from_slice(&["--value", "100"]);
    sprig(d, &ok).expect(0);
    let mut bad = check.to_vec();
    bad.extend_from_slice(&["--value", "101"]);
    sprig(d, &bad).expect(5);
    sprig(d, &["verify", "a.bin", "--key", "00"]).expect(2);
    // A witness lists its keys; one flipped byte breaks it.
    let mut args = prove.to_vec();
    args.extend_from_slice(&["--witness", "--out", "w.bin", "alice", "bob", "carol"]);
    sprig(d, &args).expect(0);
    let run = sprig(d, &["--json", "verify", "w.bin", "--root", &r]).expect(0);
    assert_eq!(run.json()["keys"].as_array().unwrap().len(), 3);
    let mut bytes = std::fs::read(d.join("w.bin")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(d.join("w2.bin"), &bytes).unwrap();
    sprig(d, &["verify", "w2.bin", "--root", &r]).expect(5);
}
