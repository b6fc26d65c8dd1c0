//! Path proofs: honest proofs verify; mutated proofs and raw bytes either fail to decode, fail
//! to verify, or show exactly what the state holds; whatever decodes re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig_core::PathProof;
use sprig_fuzz::{key, mutate, proof_setup, Choices};

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let (h, m, keys) = proof_setup(&mut c);
    let root = m.root();
    let k = keys.first().copied().unwrap_or_else(|| key(c.byte() % 32));
    let mut bytes = m.path_proof(&k).encode(h);
    let honest = PathProof::decode(&bytes, h).map(|p| p.verify_value(h, &root, &k, m.get(&k)));
    assert!(
        matches!(honest, Ok(Ok(_))),
        "an honest proof fails: {honest:?}"
    );
    mutate(&mut c, &mut bytes);
    for bytes in [bytes.as_slice(), c.rest()] {
        if let Ok(p) = PathProof::decode(bytes, h) {
            assert_eq!(PathProof::decode(&p.encode(h), h).ok(), Some(p.clone()));
            if let Ok(lookup) = p.verify(h, &root, &k) {
                assert!(lookup.matches(h, m.get(&k)), "a wrong proof was accepted");
            }
        }
    }
});
