//! Commit records and the log around them: raw payloads either fail to decode or re-encode to
//! a record that decodes the same, and applying one to a directory never panics; raw log files
//! replay to records or errors, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::directory::Directory;
use sprig::log::record::{apply_record, CommitRecord};
use sprig::log::segments::SegmentTable;
use sprig::log::wal::{wal_file_name, Wal};
use sprig_fuzz::{hasher, memory_file, Choices};

fn exercise(payload: &[u8], h: sprig::Hasher) {
    let Ok(record) = CommitRecord::decode(payload, h) else {
        return;
    };
    let Ok(encoded) = record.encode() else {
        panic!("a decoded record refers to unwritten pages");
    };
    let again = CommitRecord::decode(&encoded, h).map(|r| r.encode().ok());
    assert_eq!(
        again.ok().flatten(),
        Some(encoded),
        "a record does not round-trip"
    );
    let mut table = SegmentTable::new(256);
    let _ = apply_record(&Directory::empty(h), &mut table, &record);
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    let raw = c.rest();
    exercise(raw, h);
    let storage = memory_file(&wal_file_name(1), raw);
    if let Ok(replay) = Wal::replay(&storage, 1, 0) {
        for r in &replay.records {
            exercise(&r.payload, h);
        }
    }
});
