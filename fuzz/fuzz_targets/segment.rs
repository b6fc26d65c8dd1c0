//! Segment files: a page read from a block at a location either fails with a corruption error
//! or is a page of the expected region; a value record (valid, then mutated, then placed in
//! the file) either fails with a corruption error or returns exactly the value its pointer's
//! length and hash promise.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::io::BLOCK_BYTES;
use sprig::log::segments::{decode_page_at, encode_value_record, loc, segment_file_name, Segments};
use sprig::page::ExternalValue;
use sprig::prefix::Prefix;
use sprig_fuzz::{hasher, key, memory_file, mutate, Choices};
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    let k = key(c.byte() % 32);
    let len = usize::from(c.u16() % 6000);
    let value = c.take(len).to_vec();
    let hash = h.hash_value(&value);
    let block = u32::from(c.byte() % 4);
    let mut record = encode_value_record(&k, &value, &hash).as_bytes().to_vec();
    mutate(&mut c, &mut record);
    let mut file = c.take(2 * BLOCK_BYTES).to_vec();
    let at = block as usize * BLOCK_BYTES;
    if file.len() < at {
        file.resize(at, 0);
    }
    file.truncate(at);
    file.extend_from_slice(&record);
    // A page read from the start of the file, for a region from the input.
    let bits = sprig_core::Hasher::Blake3.hash_value(&file[..file.len().min(8)]);
    if let Some(prefix) = Prefix::from_parts(bits, c.u16() % 257) {
        let l = loc(1, 0);
        match decode_page_at(&file[..file.len().min(BLOCK_BYTES)], l, &prefix) {
            Ok(page) => assert_eq!(page.prefix(), &prefix),
            Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
        }
    }
    let storage = memory_file(&segment_file_name(1), &file);
    let segments = Segments::new(Arc::new(storage), h);
    let pointer = ExternalValue {
        loc: loc(1, block),
        len: value.len() as u64,
        hash,
    };
    match segments.read_value(&k, &pointer) {
        Ok(v) => assert_eq!(v, value, "a value record served another value"),
        Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
    }
});
