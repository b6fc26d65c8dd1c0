//! Segment files: a page read from a block at a location either fails with a corruption error
//! or is a page of the expected region; a value record (valid, then changed, then placed in
//! the file) either fails with a corruption error or returns exactly the value its pointer's
//! length and hash promise. The changes are random bytes, hostile values in the pointer's
//! location and length (the fields a page supplies), or a header forged to match a hostile
//! length, checksum and all — the case where only the segment geometry and the file's size
//! stand between a read and an allocation of gigabytes (libFuzzer's malloc limit turns such an
//! allocation into a crash).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::io::BLOCK_BYTES;
use sprig::log::segments::{
    decode_page_at, encode_value_header, encode_value_record, loc, segment_file_name, Segments,
    MIN_SEGMENT_BLOCKS,
};
use sprig::state::page::ExternalValue;
use sprig::state::prefix::Prefix;
use sprig_fuzz::{hasher, hostile_len, hostile_loc, key, memory_file, mutate, Choices};
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    let k = key(c.byte() % 32);
    // Up to 128 KiB: past the read-ahead, so large records are read in two steps.
    let len = usize::from(c.u16()) * 2;
    let mut value = c.take(len.min(64)).to_vec();
    value.resize(len, 0x5a);
    let hash = h.hash_value(&value);
    let block = u32::from(c.byte() % 4);
    let mut record = encode_value_record(&k, &value, &hash).as_bytes().to_vec();
    let mut pointer = ExternalValue {
        loc: loc(1, block),
        len: value.len() as u64,
        hash,
    };
    match c.byte() % 3 {
        0 => {
            mutate(&mut c, &mut record);
        }
        1 => {
            pointer.loc = hostile_loc(&mut c, pointer.loc, MIN_SEGMENT_BLOCKS);
            pointer.len = hostile_len(&mut c, pointer.len);
        }
        _ => {
            pointer.len = hostile_len(&mut c, pointer.len);
            let header = encode_value_header(&k, pointer.len, &hash);
            if let Some(dst) = record.get_mut(..header.len()) {
                dst.copy_from_slice(&header);
            }
            if c.coin() {
                record.truncate(c.below(record.len() + 1));
            }
        }
    }
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
        // A read checks the block against its pointer's checksum before decoding: the block
        // as the read hands it over (zero-padded to a whole block), and its checksum.
        let mut block = file[..file.len().min(BLOCK_BYTES)].to_vec();
        block.resize(BLOCK_BYTES, 0);
        let sum = sprig::codec::checksum(&block);
        match decode_page_at(&block, l, &prefix, sum) {
            Ok(page) => assert_eq!(page.prefix(), &prefix),
            Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
        }
    }
    let storage = memory_file(&segment_file_name(1), &file);
    let segments = Segments::new(Arc::new(storage), h, MIN_SEGMENT_BLOCKS);
    match segments.read_value(&k, &pointer) {
        Ok(v) => assert_eq!(v, value, "a value record served another value"),
        Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
    }
});
