//! Multi-proofs: honest proofs verify and apply changes to the model's new root; mutated proofs
//! and raw bytes either fail, or answer lookups and changes exactly as the model does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig_core::MultiProof;
use sprig_fuzz::{changes, mutate, proof_setup, Choices};

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let (h, m, keys) = proof_setup(&mut c);
    let root = m.root();
    let (changes, after) = changes(&mut c, &m, &keys);
    let mut bytes = m.multi_proof(&keys).encode(h);
    let honest =
        MultiProof::decode(&bytes, h).map(|p| p.verify(h, &root).map(|v| v.apply(&changes)));
    assert!(
        matches!(&honest, Ok(Ok(Ok(r))) if *r == after.root()),
        "an honest multi-proof fails: {honest:?}"
    );
    mutate(&mut c, &mut bytes);
    for bytes in [bytes.as_slice(), c.rest()] {
        let Ok(p) = MultiProof::decode(bytes, h) else {
            continue;
        };
        assert_eq!(MultiProof::decode(&p.encode(h), h).ok(), Some(p.clone()));
        let Ok(v) = p.verify(h, &root) else {
            continue;
        };
        for k in &keys {
            if let Ok(lookup) = v.lookup(k) {
                assert!(
                    lookup.matches(h, m.get(k)),
                    "a wrong multi-proof was accepted"
                );
            }
        }
        if let Ok(new_root) = v.apply(&changes) {
            assert_eq!(
                new_root,
                after.root(),
                "a multi-proof gave a wrong new root"
            );
        }
    }
});
