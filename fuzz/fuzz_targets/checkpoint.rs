//! Checkpoints: raw bytes either fail to decode with a corruption error or give a checkpoint
//! that stores and loads back to the same root, sequence number and log position.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::io::MemoryStorage;
use sprig::log::checkpoint::Checkpoint;
use sprig_fuzz::{hasher, Choices};

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    let raw = c.rest();
    match Checkpoint::decode("fuzz.ckpt", raw, h) {
        Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
        Ok(cp) => {
            let storage = MemoryStorage::new();
            assert!(
                cp.store(&storage).is_ok(),
                "a decoded checkpoint cannot be stored"
            );
            let back = Checkpoint::load(&storage, cp.seq, h);
            let same = back.as_ref().is_ok_and(|b| {
                b.dir.root_node() == cp.dir.root_node()
                    && b.dir.len() == cp.dir.len()
                    && (b.wal_id, b.wal_offset) == (cp.wal_id, cp.wal_offset)
            });
            assert!(same, "a checkpoint does not round-trip: {:?}", back.err());
        }
    }
});
