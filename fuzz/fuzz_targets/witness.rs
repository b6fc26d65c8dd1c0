//! Witnesses: honest witnesses verify and give the model's post-state root; mutated witnesses
//! and raw bytes either fail, or vouch for exactly the model's values and new root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig_core::Witness;
use sprig_fuzz::{changes, mutate, proof_setup, Choices};

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let (h, m, keys) = proof_setup(&mut c);
    let root = m.root();
    let (changes, after) = changes(&mut c, &m, &keys);
    let mut bytes = m.witness(&keys).encode(h);
    let honest = Witness::decode(&bytes, h).map(|w| w.verify(h, &root).map(|v| v.apply(&changes)));
    assert!(
        matches!(&honest, Ok(Ok(Ok(r))) if *r == after.root()),
        "an honest witness fails: {honest:?}"
    );
    mutate(&mut c, &mut bytes);
    for bytes in [bytes.as_slice(), c.rest()] {
        let Ok(w) = Witness::decode(bytes, h) else {
            continue;
        };
        assert_eq!(Witness::decode(&w.encode(h), h).ok(), Some(w.clone()));
        let Ok(v) = w.verify(h, &root) else {
            continue;
        };
        for k in v.keys() {
            if let Ok(lookup) = v.lookup(k) {
                assert!(lookup.matches(h, m.get(k)), "a wrong witness was accepted");
            }
        }
        if let Ok(new_root) = v.apply(&changes) {
            assert_eq!(new_root, after.root(), "a witness gave a wrong new root");
        }
    }
});
