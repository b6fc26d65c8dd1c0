//! Pages: a valid page (inline and value-log entries) with input-directed mutations — random
//! byte changes, or hostile values written into the location and length fields of its
//! value-log entries — and raw bytes, either fail to decode with a `PageError` or decode to a
//! page whose every entry reads back, proves, and re-decodes to the same entries. Every
//! value-log pointer of a decoded page then reads, from a segment holding a record for each
//! entry where the page first pointed, exactly that entry's value or fails with a corruption
//! error: never a panic, an overflow or an allocation the segment cannot back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sprig::io::BLOCK_BYTES;
use sprig::log::segments::{
    encode_value_record, loc, segment_file_name, Segments, MIN_SEGMENT_BLOCKS,
};
use sprig::state::page::{ExternalValue, Page, ValueRef, MAX_INLINE_VALUE_BYTES};
use sprig::state::prefix::Prefix;
use sprig::MAX_VALUE_BYTES;
use sprig_core::KeyPath;
use sprig_fuzz::{
    external_value_fields, hasher, hostile_len, hostile_loc, memory_file, model, mutate,
    put_u64_at, Choices,
};
use std::collections::HashMap;
use std::sync::Arc;

fn exercise(page: &Page, h: sprig::Hasher) {
    let items = page.items();
    for (key, value) in &items {
        assert_eq!(
            page.get(key).as_ref(),
            Some(value),
            "an entry does not read back"
        );
        let _ = page.path_proof_below(h, key);
    }
    let _ = page.node(h);
    let _ = page.computed_buckets(h);
    let again = Page::decode(page.bytes()).map(|p| p.items().len());
    assert_eq!(again, Ok(items.len()), "a decoded page does not re-decode");
}

/// Read every value-log value of a decoded page: the value stored for its key, or corruption.
fn read_values(page: &Page, segments: &Segments, values: &HashMap<KeyPath, Vec<u8>>) {
    for (key, value) in page.items() {
        let ValueRef::External(x) = value else {
            continue;
        };
        assert!(
            x.len > MAX_INLINE_VALUE_BYTES as u64 && x.len <= MAX_VALUE_BYTES as u64,
            "decoding let a value length of {} through",
            x.len
        );
        assert_ne!(
            x.loc,
            u64::MAX,
            "decoding let the unwritten sentinel through"
        );
        match segments.read_value(&key, &x) {
            Ok(v) => assert_eq!(Some(&v), values.get(&key), "a pointer read another value"),
            Err(e) => assert!(e.is_corruption(), "not a corruption error: {e}"),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices::new(data);
    let h = hasher(&mut c);
    let m = model(&mut c, h);
    // Some entries live in the value log: one record each, in consecutive blocks of segment 1.
    let mut values: HashMap<KeyPath, Vec<u8>> = HashMap::new();
    let mut segment = Vec::new();
    let mut entries = Vec::new();
    for (k, v) in m.iter() {
        if c.coin() {
            entries.push((*k, ValueRef::Inline(v)));
            continue;
        }
        let mut big = v.to_vec();
        big.resize(MAX_INLINE_VALUE_BYTES + 1 + v.len(), 0xab);
        let hash = h.hash_value(&big);
        let block = u32::try_from(segment.len() / BLOCK_BYTES).unwrap_or(u32::MAX);
        segment.extend_from_slice(encode_value_record(k, &big, &hash).as_bytes());
        let pointer = ExternalValue {
            loc: loc(1, block),
            len: big.len() as u64,
            hash,
        };
        entries.push((*k, ValueRef::External(pointer)));
        values.insert(*k, big);
    }
    let built = Page::build(h, Prefix::root(), u64::from(c.byte()), &entries);
    let Ok(page) = built else {
        panic!("a valid page cannot be built: {built:?}");
    };
    let mut bytes = page.bytes().to_vec();
    if c.coin() {
        mutate(&mut c, &mut bytes);
    } else {
        // Structure-aware: hostile locations and lengths in the value-log entries.
        for (loc_at, len_at) in external_value_fields(&bytes) {
            let field = |at: usize| {
                bytes
                    .get(at..at + 8)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_le_bytes)
            };
            let (l, n) = (field(loc_at), field(len_at));
            let l = hostile_loc(&mut c, l, MIN_SEGMENT_BLOCKS);
            let n = hostile_len(&mut c, n);
            put_u64_at(&mut bytes, loc_at, l);
            put_u64_at(&mut bytes, len_at, n);
        }
    }
    let storage = memory_file(&segment_file_name(1), &segment);
    let segments = Segments::new(Arc::new(storage), h, MIN_SEGMENT_BLOCKS);
    for bytes in [bytes.as_slice(), c.rest()] {
        if let Ok(page) = Page::decode(bytes) {
            exercise(&page, h);
            read_values(&page, &segments, &values);
        }
    }
});
