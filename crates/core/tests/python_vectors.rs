//! The state-root vectors the Python package's tests check its roots against
//! (`bindings/python/tests/vectors.json`) are the reference model's: this test recomputes them
//! and fails if the file differs (`SPRIG_BLESS=1` rewrites it). The Python side builds the same
//! sets through `sprig.Db` and asserts equal roots.
//!
//! A set: `n` keys, key `i` the key path of the 4-byte little-endian `i`; its value
//! `b"value-<i>"`, except every `i % 10 == 3` (empty) and `i == 5` (5,000 bytes of `i % 251`).

use sprig_core::{key_path_of, Hasher, ReferenceModel};

fn value(i: u32) -> Vec<u8> {
    match i {
        5 => (0..5000u32).map(|j| (j % 251) as u8).collect(),
        i if i % 10 == 3 => Vec::new(),
        i => format!("value-{i}").into_bytes(),
    }
}

fn vectors() -> String {
    let mut cases = Vec::new();
    for hasher in Hasher::ALL {
        for n in [0u32, 1, 2, 1000] {
            let mut model = ReferenceModel::new(hasher);
            for i in 0..n {
                model.insert(key_path_of(hasher, &i.to_le_bytes()), value(i));
            }
            let root: String = model.root().iter().map(|b| format!("{b:02x}")).collect();
            cases.push(format!(
                "    {{\"hasher\": \"{}\", \"n\": {n}, \"root\": \"{root}\"}}",
                hasher.name()
            ));
        }
    }
    format!(
        "{{\n  \"about\": \"state roots of the reference model; see crates/core/tests/python_vectors.rs\",\n  \"cases\": [\n{}\n  ]\n}}\n",
        cases.join(",\n")
    )
}

#[test]
fn python_vectors_are_the_reference_models_roots() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bindings/python/tests/vectors.json"
    );
    let want = vectors();
    if std::env::var_os("SPRIG_BLESS").is_some() {
        std::fs::write(path, &want).expect("writing the vectors");
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "bindings/python/tests/vectors.json differs from the reference model: \
         run `SPRIG_BLESS=1 cargo test -p sprig-core --test python_vectors`"
    );
}
