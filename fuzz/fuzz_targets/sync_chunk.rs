//! State-sync chunks: honest chunks verify; mutated chunks and raw bytes either fail to
//! decode, fail to verify, or hold exactly the state's entries of their range; whatever
//! decodes re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig_core::proof::prove_range;
use sprig_core::SyncChunk;
use sprig_fuzz::{key, mutate, proof_setup, Choices};

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let (h, m, _) = proof_setup(&mut c);
    let root = m.root();
    let (a, b) = (key(c.byte() % 32), key(c.byte() % 32));
    let start = a.min(b);
    let end = (a != b && c.byte() % 4 != 0).then_some(a.max(b));
    let in_range = |k: &sprig_core::KeyPath| *k >= start && end.is_none_or(|e| *k < e);
    let entries: Vec<_> = m
        .iter()
        .filter(|(k, _)| in_range(k))
        .map(|(k, v)| (*k, v.to_vec()))
        .collect();
    let honest = SyncChunk {
        start,
        end,
        entries: entries.clone(),
        proof: prove_range(h, &m.leaves(), &start, end.as_ref()),
    };
    assert_eq!(honest.verify(h, &root), Ok(()), "an honest chunk fails");
    let mut bytes = honest.encode(h);
    mutate(&mut c, &mut bytes);
    for bytes in [bytes.as_slice(), c.rest()] {
        if let Ok(chunk) = SyncChunk::decode(bytes, h) {
            assert_eq!(
                SyncChunk::decode(&chunk.encode(h), h).ok(),
                Some(chunk.clone())
            );
            if chunk.verify(h, &root).is_ok() {
                let want: Vec<_> = m
                    .iter()
                    .filter(|(k, _)| *k >= &chunk.start && chunk.end.is_none_or(|e| **k < e))
                    .map(|(k, v)| (*k, v.to_vec()))
                    .collect();
                assert_eq!(chunk.entries, want, "a wrong chunk was accepted");
            }
        }
    }
});
