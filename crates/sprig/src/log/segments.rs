//! Segment files: the log-structured home of every page version and every large value.
//!
//! A segment is a file of 4 KiB blocks, written once, front to back. Commits append their pages
//! and value records to the active segment (opening a new one when it fills); nothing is ever
//! overwritten in place. Reads are positioned and authenticated: a page must match the checksum
//! and region the directory holds for it, a value must hash to the hash its page holds.
//!
//! This module owns segment naming, allocation of blocks, the live-data accounting the cleaner
//! chooses victims by, and the value-record layout.

use crate::codec::{checksum, Put, Reader};
use crate::error::{Error, Result};
use crate::io::{BlockBuf, OpenOptions, ReadRequest, Storage, StorageFile, BLOCK_BYTES};
use crate::page::{ExternalValue, Page};
use crate::prefix::Prefix;
use parking_lot::RwLock;
use sprig_core::trie::KeyPath;
use sprig_core::Hasher;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The file name of segment `id`.
pub fn segment_file_name(id: u32) -> String {
    format!("seg-{id:010}.dat")
}

/// Parse a segment file name.
pub fn parse_segment_file_name(name: &str) -> Option<u32> {
    name.strip_prefix("seg-")?
        .strip_suffix(".dat")?
        .parse()
        .ok()
}

/// A location: segment id in the high 32 bits, block index in the low 32 bits.
pub fn loc(segment: u32, block: u32) -> u64 {
    (u64::from(segment) << 32) | u64::from(block)
}

/// The segment of a location.
pub fn loc_segment(loc: u64) -> u32 {
    (loc >> 32) as u32
}

/// The block index of a location.
pub fn loc_block(loc: u64) -> u32 {
    loc as u32
}

/// The byte offset of a location within its segment.
pub fn loc_offset(loc: u64) -> u64 {
    u64::from(loc_block(loc)) * BLOCK_BYTES as u64
}

const VALUE_MAGIC: &[u8; 4] = b"SPVL";
const VALUE_HEADER_BYTES: usize = 128;

/// The number of blocks a value record of `len` bytes takes.
pub fn value_record_blocks(len: u64) -> u64 {
    (len + VALUE_HEADER_BYTES as u64).div_ceil(BLOCK_BYTES as u64)
}

/// Encode a value record: a header naming the key, length and hash, then the value.
pub fn encode_value_record(key: &KeyPath, value: &[u8], hash: &[u8; 32]) -> BlockBuf {
    let mut header = Vec::with_capacity(VALUE_HEADER_BYTES);
    header.extend_from_slice(VALUE_MAGIC);
    header.extend_from_slice(key);
    header.put_u64(value.len() as u64);
    header.extend_from_slice(hash);
    let sum = checksum(&header);
    header.put_u64(sum);
    header.resize(VALUE_HEADER_BYTES, 0);
    let total = VALUE_HEADER_BYTES + value.len();
    let mut buf = BlockBuf::zeroed(total.div_ceil(BLOCK_BYTES));
    let bytes = buf.as_bytes_mut();
    if let Some(dst) = bytes.get_mut(..VALUE_HEADER_BYTES) {
        dst.copy_from_slice(&header);
    }
    if let Some(dst) = bytes.get_mut(VALUE_HEADER_BYTES..total) {
        dst.copy_from_slice(value);
    }
    buf
}

/// Accounting of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentMeta {
    /// Blocks written so far.
    pub used_blocks: u32,
    /// Blocks of live pages (in the latest version).
    pub live_page_blocks: u64,
    /// Blocks of live value records (in the latest version).
    pub live_value_blocks: u64,
}

impl SegmentMeta {
    /// Live blocks of any kind.
    pub fn live_blocks(&self) -> u64 {
        self.live_page_blocks + self.live_value_blocks
    }
}

/// Read access to the segment files, shared by every reader.
pub struct Segments {
    storage: Arc<dyn Storage>,
    files: RwLock<HashMap<u32, Arc<dyn StorageFile>>>,
    hasher: Hasher,
}

impl Segments {
    /// Segments of `storage`, opened lazily.
    pub fn new(storage: Arc<dyn Storage>, hasher: Hasher) -> Segments {
        Segments {
            storage,
            files: RwLock::new(HashMap::new()),
            hasher,
        }
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The open file of segment `id`, creating it if asked.
    pub fn file(&self, id: u32, create: bool) -> Result<Arc<dyn StorageFile>> {
        if let Some(f) = self.files.read().get(&id) {
            return Ok(f.clone());
        }
        let name = segment_file_name(id);
        let f = self
            .storage
            .open(
                &name,
                OpenOptions {
                    create,
                    direct: true,
                },
            )
            .map_err(|e| Error::io("opening", &name, e))?;
        self.files.write().insert(id, f.clone());
        Ok(f)
    }

    /// Forget (close) segment `id` and delete its file.
    pub fn remove(&self, id: u32) -> Result<()> {
        self.files.write().remove(&id);
        let name = segment_file_name(id);
        self.storage
            .remove(&name)
            .map_err(|e| Error::io("deleting", &name, e))
    }

    /// Read the blocks at the given locations, all in flight at once, unchecked.
    pub fn read_blocks(&self, locs: &[u64]) -> Result<Vec<BlockBuf>> {
        let files: Vec<Arc<dyn StorageFile>> = locs
            .iter()
            .map(|l| self.file(loc_segment(*l), false))
            .collect::<Result<_>>()?;
        let mut requests: Vec<ReadRequest<'_>> = locs
            .iter()
            .zip(files.iter())
            .map(|(l, f)| ReadRequest {
                file: f.as_ref(),
                offset: loc_offset(*l),
                buf: BlockBuf::zeroed(1),
            })
            .collect();
        self.storage.read_batch(&mut requests).map_err(|e| {
            let (file, offset) = match locs {
                [one] => (segment_file_name(loc_segment(*one)), loc_offset(*one)),
                _ => (format!("{} pages in segment files", locs.len()), 0),
            };
            read_error("reading", file, offset, e)
        })?;
        Ok(requests.into_iter().map(|r| r.buf).collect())
    }

    /// Read pages at the given locations, all in flight at once, checking each against its
    /// checksum. Returns the raw blocks in request order.
    pub fn read_pages(&self, wanted: &[(u64, u64, Prefix)]) -> Result<Vec<BlockBuf>> {
        let locs: Vec<u64> = wanted.iter().map(|(l, _, _)| *l).collect();
        let blocks = self.read_blocks(&locs)?;
        for (b, (l, sum, _)) in blocks.iter().zip(wanted.iter()) {
            verify_page_checksum(b.as_bytes(), *l, *sum)?;
        }
        Ok(blocks)
    }

    /// Read and decode one page, checked against its checksum and region.
    pub fn read_page(&self, l: u64, sum: u64, prefix: &Prefix) -> Result<Page> {
        let mut blocks = self.read_pages(&[(l, sum, *prefix)])?;
        let block = blocks.pop().unwrap_or_default();
        decode_page_at(block.as_bytes(), l, prefix)
    }

    /// Read a value from the value log and check it against its pointer.
    pub fn read_value(&self, key: &KeyPath, value: &ExternalValue) -> Result<Vec<u8>> {
        let segment = loc_segment(value.loc);
        let name = segment_file_name(segment);
        let blocks = usize::try_from(value_record_blocks(value.len))
            .map_err(|_| Error::corruption(&name, loc_offset(value.loc), "value too large"))?;
        let file = self.file(segment, false)?;
        let mut requests = [ReadRequest {
            file: file.as_ref(),
            offset: loc_offset(value.loc),
            buf: BlockBuf::zeroed(blocks),
        }];
        self.storage.read_batch(&mut requests).map_err(|e| {
            read_error(
                "reading a value from",
                name.clone(),
                loc_offset(value.loc),
                e,
            )
        })?;
        let [request] = requests;
        let bytes = request.buf.as_bytes();
        let bad = |what: &str| Error::corruption(&name, loc_offset(value.loc), what);
        let mut r = Reader::new(bytes);
        let header_ok = r.array::<4>().ok().as_ref() == Some(VALUE_MAGIC)
            && r.array::<32>().ok().as_ref() == Some(key)
            && r.u64().ok() == Some(value.len)
            && r.array::<32>().ok() == Some(value.hash);
        let body = bytes.get(..4 + 32 + 8 + 32).unwrap_or_default();
        let stored = r.u64().ok();
        if !header_ok || stored != Some(checksum(body)) {
            return Err(bad("value record header does not match its pointer"));
        }
        let len = usize::try_from(value.len).map_err(|_| bad("value too large"))?;
        let data = bytes
            .get(VALUE_HEADER_BYTES..VALUE_HEADER_BYTES + len)
            .ok_or_else(|| bad("value record truncated"))?;
        if self.hasher.hash_value(data) != value.hash {
            return Err(bad("value does not match its hash"));
        }
        Ok(data.to_vec())
    }
}

/// The error of a failed segment read. A read past the end of the file means the file lost its
/// tail or a durable pointer is wrong: corruption of what is on disk, not a failing device.
fn read_error(op: &'static str, file: String, offset: u64, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        Error::corruption(
            file,
            offset,
            format!("data extends past the end of the file ({e})"),
        )
    } else {
        Error::io(op, file, e)
    }
}

/// Check a page's bytes against the checksum the directory holds.
pub fn verify_page_checksum(bytes: &[u8], l: u64, expected: u64) -> Result<()> {
    let got = checksum(bytes);
    if got != expected {
        return Err(Error::corruption(
            segment_file_name(loc_segment(l)),
            loc_offset(l),
            format!("page checksum mismatch (expected {expected:016x}, found {got:016x})"),
        ));
    }
    Ok(())
}

/// Decode page bytes read from `l`, which must hold the region `prefix`.
pub fn decode_page_at(bytes: &[u8], l: u64, prefix: &Prefix) -> Result<Page> {
    let page = Page::decode(bytes).map_err(|e| {
        Error::corruption(
            segment_file_name(loc_segment(l)),
            loc_offset(l),
            e.to_string(),
        )
    })?;
    if page.prefix() != prefix {
        return Err(Error::corruption(
            segment_file_name(loc_segment(l)),
            loc_offset(l),
            format!(
                "page holds region {} but {} was expected",
                page.prefix(),
                prefix
            ),
        ));
    }
    Ok(page)
}

/// Block allocation and live-data accounting, owned by the single writer.
#[derive(Debug, Clone, Default)]
pub struct SegmentTable {
    /// Every segment with data, by id.
    pub segments: BTreeMap<u32, SegmentMeta>,
    /// Every live value record: location → (blocks, key). The cleaner relocates values by it.
    pub values: BTreeMap<u64, (u32, KeyPath)>,
    /// The segment new blocks go to.
    pub active: u32,
    /// The size of a segment in blocks.
    pub segment_blocks: u32,
}

impl SegmentTable {
    /// A table with one empty active segment.
    pub fn new(segment_blocks: u32) -> SegmentTable {
        let mut segments = BTreeMap::new();
        segments.insert(1, SegmentMeta::default());
        SegmentTable {
            segments,
            values: BTreeMap::new(),
            active: 1,
            segment_blocks,
        }
    }

    /// Reserve `blocks` contiguous blocks, opening a new segment if the active one cannot
    /// hold them. A record larger than a segment gets a segment of its own.
    pub fn allocate(&mut self, blocks: u32) -> u64 {
        let used = self.segments.get(&self.active).map_or(0, |m| m.used_blocks);
        if used > 0 && u64::from(used) + u64::from(blocks) > u64::from(self.segment_blocks) {
            let next = self
                .segments
                .keys()
                .next_back()
                .map_or(1, |k| k + 1)
                .max(self.active + 1);
            self.active = next;
            self.segments.insert(next, SegmentMeta::default());
        }
        let meta = self.segments.entry(self.active).or_default();
        let start = meta.used_blocks;
        meta.used_blocks = meta.used_blocks.saturating_add(blocks);
        loc(self.active, start)
    }

    /// Count `blocks` live page blocks at `l` (negative to release).
    pub fn add_pages(&mut self, l: u64, delta: i64) {
        let meta = self.segments.entry(loc_segment(l)).or_default();
        meta.live_page_blocks = meta.live_page_blocks.saturating_add_signed(delta);
    }

    /// Record a live value record of `blocks` blocks at `l`, holding `key`'s value.
    pub fn value_written(&mut self, l: u64, blocks: u32, key: KeyPath) {
        if self.values.insert(l, (blocks, key)).is_none() {
            let meta = self.segments.entry(loc_segment(l)).or_default();
            meta.live_value_blocks += u64::from(blocks);
        }
    }

    /// Forget the value record at `l`: nothing refers to it any more.
    pub fn value_freed(&mut self, l: u64) {
        if let Some((blocks, _)) = self.values.remove(&l) {
            let meta = self.segments.entry(loc_segment(l)).or_default();
            meta.live_value_blocks = meta.live_value_blocks.saturating_sub(u64::from(blocks));
        }
    }

    /// Blocks written in all segments.
    pub fn used_blocks(&self) -> u64 {
        self.segments
            .values()
            .map(|m| u64::from(m.used_blocks))
            .sum()
    }

    /// Live blocks in all segments.
    pub fn live_blocks(&self) -> u64 {
        self.segments.values().map(SegmentMeta::live_blocks).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_core::ValueHash;

    #[test]
    fn allocation_fills_segments_in_order() {
        let mut t = SegmentTable::new(10);
        assert_eq!(t.allocate(4), loc(1, 0));
        assert_eq!(t.allocate(6), loc(1, 4));
        assert_eq!(t.allocate(1), loc(2, 0));
        // Larger than a segment: a segment of its own once the active one has data.
        assert_eq!(t.allocate(25), loc(3, 0));
        assert_eq!(t.allocate(1), loc(4, 0));
        assert_eq!(t.used_blocks(), 4 + 6 + 1 + 25 + 1);
    }

    /// In-memory segments and a 10,000-byte value record: (segments, key, value, hash, record).
    fn value_record_fixture() -> (Segments, KeyPath, Vec<u8>, ValueHash, BlockBuf) {
        let storage: Arc<dyn Storage> = Arc::new(crate::io::MemoryStorage::new());
        let segs = Segments::new(storage, Hasher::Blake3);
        let key = [7u8; 32];
        let value = vec![5u8; 10_000];
        let hash = Hasher::Blake3.hash_value(&value);
        let rec = encode_value_record(&key, &value, &hash);
        (segs, key, value, hash, rec)
    }

    #[test]
    fn value_records_round_trip_and_are_authenticated() {
        let (segs, key, value, hash, rec) = value_record_fixture();
        assert_eq!(rec.block_count() as u64, value_record_blocks(10_000));
        let f = segs.file(3, true).unwrap();
        f.write_at(rec.as_bytes(), loc_offset(loc(3, 2))).unwrap();
        let ptr = ExternalValue {
            loc: loc(3, 2),
            len: 10_000,
            hash,
        };
        assert_eq!(segs.read_value(&key, &ptr).unwrap(), value);
        let mut bad = ptr;
        bad.hash[0] ^= 1;
        assert!(segs.read_value(&key, &bad).unwrap_err().is_corruption());
        // A flipped data byte is caught by the hash.
        let mut raw = rec.clone();
        raw.as_bytes_mut()[VALUE_HEADER_BYTES + 17] ^= 4;
        f.write_at(raw.as_bytes(), loc_offset(loc(3, 2))).unwrap();
        assert!(segs.read_value(&key, &ptr).unwrap_err().is_corruption());
    }

    /// Found by the `segment` fuzz target: a segment file that lost its tail made reads past
    /// its end fail as I/O errors instead of corruption naming the file and offset.
    #[test]
    fn reads_past_the_end_of_a_segment_are_corruption() {
        let (segs, key, _, hash, rec) = value_record_fixture();
        let f = segs.file(1, true).unwrap();
        // The record's last block is lost.
        let cut = rec.len() - BLOCK_BYTES;
        f.write_at(&rec.as_bytes()[..cut], 0).unwrap();
        let ptr = ExternalValue {
            loc: loc(1, 0),
            len: 10_000,
            hash,
        };
        let e = segs.read_value(&key, &ptr).unwrap_err();
        assert!(e.is_corruption(), "{e}");
        assert!(e.to_string().contains("seg-0000000001.dat"), "{e}");
        // A page beyond the end of the file.
        let e = segs.read_page(loc(1, 7), 0, &Prefix::root()).unwrap_err();
        assert!(e.is_corruption(), "{e}");
        let e = segs.read_blocks(&[loc(1, 0), loc(1, 9)]).err();
        assert!(e.is_some_and(|e| e.is_corruption()));
    }
}
