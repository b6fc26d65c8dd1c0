//! Helpers shared by Sprig's fuzz targets: a cursor that turns fuzz bytes into choices, a small
//! reference model built from them, byte mutations of valid encodings, and the hostile values
//! structure-aware targets write into the length, location and segment-id fields of valid
//! pages, value records, commit records and checkpoints. Nothing here may panic on any input: a
//! panic is what the fuzzers look for in the code under test.

use sprig::io::{MemoryStorage, OpenOptions, Storage};
use sprig::log::segments::{
    loc, loc_block, loc_segment, MAX_SEGMENT_BLOCKS, MAX_SEGMENT_ID, MAX_VALUE_RECORD_BLOCKS,
    MIN_SEGMENT_BLOCKS,
};
use sprig::state::page::{MAX_INLINE_VALUE_BYTES, PAGE_HEADER_BYTES};
use sprig::MAX_VALUE_BYTES;
use sprig_core::{Hasher, KeyPath, ReferenceModel, ValueHash};

/// Choices drawn from fuzz input; when the input runs out, every choice is zero.
pub struct Choices<'a> {
    bytes: &'a [u8],
}

impl<'a> Choices<'a> {
    /// Draw choices from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Choices<'a> {
        Choices { bytes }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((b, rest)) => {
                self.bytes = rest;
                *b
            }
            None => 0,
        }
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// A yes or no.
    pub fn coin(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            usize::from(self.u16()) % n
        }
    }

    /// The next `n` bytes (fewer at the end of the input).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.bytes.len());
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        head
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(self.bytes.len())
    }
}

/// One of the hashers.
pub fn hasher(c: &mut Choices<'_>) -> Hasher {
    match c.byte() % 3 {
        0 => Hasher::Blake3,
        1 => Hasher::Sha256,
        _ => Hasher::Keccak256,
    }
}

/// Key number `i` of a small universe; odd numbers share a long prefix with their neighbour.
pub fn key(i: u8) -> KeyPath {
    let mut k = Hasher::Blake3.hash_value(&[i & 0xfe]);
    k[31] ^= i & 1;
    k
}

/// A model of up to 16 keys from the small universe, with short values.
pub fn model(c: &mut Choices<'_>, hasher: Hasher) -> ReferenceModel {
    let mut m = ReferenceModel::new(hasher);
    for _ in 0..c.byte() % 16 {
        let k = key(c.byte() % 32);
        let len = usize::from(c.byte() % 8);
        m.insert(k, c.take(len).to_vec());
    }
    m
}

/// Apply up to 4 mutations drawn from `c` to `bytes`: flip a bit, set a byte, truncate, or
/// append. Returns whether anything changed.
pub fn mutate(c: &mut Choices<'_>, bytes: &mut Vec<u8>) -> bool {
    let before = bytes.clone();
    for _ in 0..c.byte() % 5 {
        let at = c.below(bytes.len().max(1));
        match c.byte() % 4 {
            0 => {
                let bit = c.byte() % 8;
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 1 << bit;
                }
            }
            1 => {
                let v = c.byte();
                if let Some(b) = bytes.get_mut(at) {
                    *b = v;
                }
            }
            2 => bytes.truncate(at),
            _ => {
                let n = usize::from(c.byte() % 40);
                bytes.extend_from_slice(c.take(n));
            }
        }
    }
    *bytes != before
}

/// A hasher, a model, and up to 5 distinct sorted keys of the universe to prove.
pub fn proof_setup(c: &mut Choices<'_>) -> (Hasher, ReferenceModel, Vec<KeyPath>) {
    let h = hasher(c);
    let m = model(c, h);
    let mut keys: Vec<KeyPath> = (0..c.byte() % 6).map(|_| key(c.byte() % 32)).collect();
    keys.sort_unstable();
    keys.dedup();
    (h, m, keys)
}

/// Changes to some of `keys` (new value hash, or `None` to delete) and the model after them.
pub fn changes(
    c: &mut Choices<'_>,
    m: &ReferenceModel,
    keys: &[KeyPath],
) -> (Vec<(KeyPath, Option<ValueHash>)>, ReferenceModel) {
    let mut after = m.clone();
    let mut out = Vec::new();
    for k in keys {
        match c.byte() % 3 {
            0 => {
                let v = c.take(4).to_vec();
                out.push((*k, Some(m.hasher().hash_value(&v))));
                after.insert(*k, v);
            }
            1 => {
                out.push((*k, None));
                after.remove(k);
            }
            _ => {}
        }
    }
    (out, after)
}

/// An in-memory directory holding one file `name` with `bytes`.
pub fn memory_file(name: &str, bytes: &[u8]) -> MemoryStorage {
    let storage = MemoryStorage::new();
    let written = storage
        .open(
            name,
            OpenOptions {
                create: true,
                direct: false,
            },
        )
        .and_then(|f| f.write_at(bytes, 0));
    assert!(written.is_ok(), "memory storage refused a write");
    storage
}

/// A segment id for a field read from disk: `valid`, or one of the edges a bounds check must
/// get right, or any.
pub fn hostile_segment(c: &mut Choices<'_>, valid: u32) -> u32 {
    match c.byte() % 8 {
        0 | 1 => valid,
        2 => 0,
        3 => u32::MAX,
        4 => MAX_SEGMENT_ID,
        5 => valid.wrapping_add(1),
        6 => MAX_SEGMENT_ID - 1,
        _ => c.u32(),
    }
}

/// A block index or a count of blocks for a field read from disk, in segments of
/// `segment_blocks` blocks.
pub fn hostile_blocks(c: &mut Choices<'_>, valid: u32, segment_blocks: u32) -> u32 {
    match c.byte() % 10 {
        0 | 1 => valid,
        2 => 0,
        3 => segment_blocks.wrapping_sub(1),
        4 => segment_blocks,
        5 => MAX_SEGMENT_BLOCKS,
        6 => MAX_VALUE_RECORD_BLOCKS,
        7 => MAX_VALUE_RECORD_BLOCKS.wrapping_add(1),
        8 => u32::MAX,
        _ => c.u32(),
    }
}

/// A location for a field read from disk, in segments of `segment_blocks` blocks.
pub fn hostile_loc(c: &mut Choices<'_>, valid: u64, segment_blocks: u32) -> u64 {
    match c.byte() % 8 {
        0 => valid,
        // The never-written sentinel of in-memory pages.
        1 => u64::MAX,
        2 => c.u64(),
        _ => loc(
            hostile_segment(c, loc_segment(valid)),
            hostile_blocks(c, loc_block(valid), segment_blocks),
        ),
    }
}

/// A hostile location for a page built in memory: as [`hostile_loc`], but never in segment 0,
/// which the directory's node store takes for a page held in memory, nor past the largest
/// segment, whose block-index bits the store uses for the entry count (it asserts both).
/// Decoding refuses either from any file: the raw-bytes paths of the fuzzers and the unit
/// tests that craft them in encoded bytes cover that. A block past `segment_blocks` but within
/// the largest segment stays, as the hostile value it is.
pub fn hostile_page_loc(c: &mut Choices<'_>, valid: u64, segment_blocks: u32) -> u64 {
    let l = hostile_loc(c, valid, segment_blocks);
    let segment = loc_segment(l).max(1);
    let block = loc_block(l).min(MAX_SEGMENT_BLOCKS - 1);
    loc(segment, block)
}

/// A value length for a field read from disk: `valid`, the edges of the inline and value-log
/// ranges, or any.
pub fn hostile_len(c: &mut Choices<'_>, valid: u64) -> u64 {
    let max = MAX_VALUE_BYTES as u64;
    let inline = MAX_INLINE_VALUE_BYTES as u64;
    match c.byte() % 12 {
        0 | 1 => valid,
        2 => 0,
        3 => inline,
        4 => inline + 1,
        5 => max,
        6 => max + 1,
        7 => u64::MAX,
        8 => u64::MAX - 64,
        9 => valid.wrapping_add(u64::from(c.u16())),
        10 => valid.wrapping_sub(u64::from(c.byte())),
        _ => c.u64(),
    }
}

/// A segment size for a field read from disk.
pub fn hostile_segment_blocks(c: &mut Choices<'_>, valid: u32) -> u32 {
    match c.byte() % 6 {
        0 | 1 => valid,
        2 => 0,
        3 => MIN_SEGMENT_BLOCKS - 1,
        4 => MAX_SEGMENT_BLOCKS + 1,
        _ => c.u32(),
    }
}

/// The byte offsets of the location and length fields of every value-log entry of a page
/// (the layout of docs/DESIGN.md: after the header, each entry is its key, a kind byte, then
/// an inline length and value or a location, length and hash). Stops at anything malformed.
pub fn external_value_fields(page: &[u8]) -> Vec<(usize, usize)> {
    let count = page
        .get(48..50)
        .map_or(0, |b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    let mut out = Vec::new();
    let mut at = PAGE_HEADER_BYTES;
    for _ in 0..count {
        let kind_at = at + 32;
        match page.get(kind_at) {
            Some(0) => {
                let Some(len) = page.get(kind_at + 1..kind_at + 3) else {
                    break;
                };
                at = kind_at + 3 + usize::from(u16::from_le_bytes([len[0], len[1]]));
            }
            Some(1) => {
                out.push((kind_at + 1, kind_at + 9));
                at = kind_at + 1 + 8 + 8 + 32;
            }
            _ => break,
        }
    }
    out
}

/// Write `v` little-endian at `at` in `bytes`, if it fits.
pub fn put_u64_at(bytes: &mut [u8], at: usize, v: u64) {
    if let Some(dst) = bytes.get_mut(at..at + 8) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}
