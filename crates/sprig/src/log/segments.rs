//! Segment files: the log-structured home of every page version and every large value.
//!
//! A segment is a file of 4 KiB blocks, written once, front to back. Commits append their pages
//! and value records to the active segment (opening a new one when it fills); nothing is ever
//! overwritten in place. Reads are positioned and authenticated: a page must match the checksum
//! and region the directory holds for it, a value must hash to the hash its page holds.
//!
//! This module owns segment naming, allocation of blocks, the live-data accounting the cleaner
//! chooses victims by, the value-record layout, and the bounds every location, extent and
//! segment id read from disk must respect (a location past what the segment geometry allows is
//! corruption, and no read allocates for a record before it has been found on disk).

use crate::codec::{checksum, Put, Reader, Source};
use crate::error::{Error, Result};
use crate::io::{
    BlockBuf, OpenOptions, ReadRequest, Storage, StorageFile, WriteThreads, BLOCK_BYTES,
};
use crate::io::spares::Spares;
use crate::options::{MAX_SEGMENT_BYTES, MIN_SEGMENT_BYTES};
use crate::log::recycle::Recycler;
use crate::state::page::{ExternalValue, Page, MAX_VALUE_BYTES};
use crate::state::prefix::Prefix;
use crate::state::tables::TableId;
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

/// The first bytes of an end marker block.
const END_MARKER_MAGIC: [u8; 8] = *b"SPRGEND1";

/// The block a commit writes right after its last block in a segment whose file holds older
/// bytes past it (a recycled file, or a commit's torn tail; [`crate::log::recycle`]): it names
/// its own place (segment and block) and carries a checksum of both, so recovery stops looking
/// there for a lost commit's pages instead of reading older contents as if a commit had just
/// written them. The next commit writes over it.
pub fn end_marker_block(segment: u32, block: u32) -> [u8; BLOCK_BYTES] {
    let mut b = [0u8; BLOCK_BYTES];
    let mut head = [0u8; 16];
    head[..8].copy_from_slice(&END_MARKER_MAGIC);
    head[8..12].copy_from_slice(&segment.to_le_bytes());
    head[12..].copy_from_slice(&block.to_le_bytes());
    b[..16].copy_from_slice(&head);
    b[16..24].copy_from_slice(&checksum(&head).to_le_bytes());
    b
}

/// Whether `bytes` (a block read at `block` of `segment`) is the end marker written there.
pub fn is_end_marker(bytes: &[u8], segment: u32, block: u32) -> bool {
    // Most blocks a recovery looks at are pages or values: told apart by the first bytes.
    bytes.starts_with(&END_MARKER_MAGIC) && bytes == end_marker_block(segment, block).as_slice()
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
/// Bytes of a value record's header that its checksum covers: magic, key, length, hash.
const VALUE_HEADER_SUMMED_BYTES: usize = 4 + 32 + 8 + 32;
/// A value record of at most this many blocks is read in one request; of a larger one the
/// first blocks are read, its header checked and its extent found within the file before a
/// buffer of its size is allocated.
const VALUE_READ_AHEAD_BLOCKS: usize = 16;

/// The fewest blocks a segment has.
pub const MIN_SEGMENT_BLOCKS: u32 = (MIN_SEGMENT_BYTES / BLOCK_BYTES as u64) as u32;
/// The most blocks a segment has (one holding a single large value record aside).
pub const MAX_SEGMENT_BLOCKS: u32 = (MAX_SEGMENT_BYTES / BLOCK_BYTES as u64) as u32;
/// The blocks of the largest value record (a value of [`MAX_VALUE_BYTES`]).
pub const MAX_VALUE_RECORD_BLOCKS: u32 =
    (MAX_VALUE_BYTES as u64 + VALUE_HEADER_BYTES as u64).div_ceil(BLOCK_BYTES as u64) as u32;
/// The largest segment id. Ids start at 1 and are never reused; `u32::MAX` stays out of use,
/// so that no location is the never-written sentinel.
pub const MAX_SEGMENT_ID: u32 = u32::MAX - 1;

/// The number of blocks a value record of `len` bytes takes; `None` for a length above
/// [`MAX_VALUE_BYTES`].
pub fn value_record_blocks(len: u64) -> Option<u32> {
    if len > MAX_VALUE_BYTES as u64 {
        return None;
    }
    let blocks = len
        .checked_add(VALUE_HEADER_BYTES as u64)?
        .div_ceil(BLOCK_BYTES as u64);
    u32::try_from(blocks).ok()
}

/// The number of blocks the value record of `value` takes, or [`Error::ValueTooLarge`].
pub fn value_blocks(value: &[u8]) -> Result<u32> {
    let len = u64::try_from(value.len()).unwrap_or(u64::MAX);
    value_record_blocks(len).ok_or(Error::ValueTooLarge {
        len,
        max: MAX_VALUE_BYTES as u64,
    })
}

/// Check a segment size (in blocks) read from disk.
pub fn check_segment_blocks(segment_blocks: u32) -> Result<(), &'static str> {
    if (MIN_SEGMENT_BLOCKS..=MAX_SEGMENT_BLOCKS).contains(&segment_blocks) {
        Ok(())
    } else {
        Err("segment size out of range")
    }
}

/// Check a segment id read from disk.
pub fn check_segment_id(id: u32) -> Result<(), &'static str> {
    if (1..=MAX_SEGMENT_ID).contains(&id) {
        Ok(())
    } else {
        Err("segment id out of range")
    }
}

/// Check where a page or value record read from disk starts, in segments of `segment_blocks`
/// blocks: nothing starts past the end of a segment.
pub fn check_loc(l: u64, segment_blocks: u32) -> Result<(), &'static str> {
    check_segment_id(loc_segment(l))?;
    if loc_block(l) >= segment_blocks {
        return Err("block index beyond the segment size");
    }
    Ok(())
}

/// Check a run of `blocks` blocks starting at `l` (at least one), in segments of
/// `segment_blocks` blocks: it must end within its segment.
pub fn check_span(l: u64, blocks: u32, segment_blocks: u32) -> Result<(), &'static str> {
    check_loc(l, segment_blocks)?;
    match loc_block(l).checked_add(blocks) {
        Some(end) if blocks > 0 && end <= segment_blocks => Ok(()),
        _ => Err("a run of blocks beyond the segment size"),
    }
}

/// Check the extent of a value record of `blocks` blocks at `l`, in segments of
/// `segment_blocks` blocks. Allocation puts a record in the active segment if it fits, else at
/// the start of a new one: a record ends within its segment unless it starts one.
pub fn check_value_extent(l: u64, blocks: u32, segment_blocks: u32) -> Result<(), &'static str> {
    check_loc(l, segment_blocks)?;
    if blocks == 0 || blocks > MAX_VALUE_RECORD_BLOCKS {
        return Err("value record size out of range");
    }
    let start = loc_block(l);
    if start > 0 && u64::from(start) + u64::from(blocks) > u64::from(segment_blocks) {
        return Err("value record extends past the end of its segment");
    }
    Ok(())
}

/// Check the fill level of a segment read from disk: within the segment size, or the size of
/// the one value record a segment of its own holds.
pub fn check_used_blocks(used: u32, segment_blocks: u32) -> Result<(), &'static str> {
    if used > segment_blocks.max(MAX_VALUE_RECORD_BLOCKS) {
        return Err("segment fill beyond the segment size");
    }
    Ok(())
}

/// Check a value record's header against the pointer that led to it.
fn check_value_header(
    bytes: &[u8],
    key: &KeyPath,
    value: &ExternalValue,
) -> Result<(), &'static str> {
    let mut r = Reader::new(bytes);
    let fields_ok = r.array::<4>().ok().as_ref() == Some(VALUE_MAGIC)
        && r.array::<32>().ok().as_ref() == Some(key)
        && r.u64().ok() == Some(value.len)
        && r.array::<32>().ok() == Some(value.hash);
    let summed = bytes.get(..VALUE_HEADER_SUMMED_BYTES).unwrap_or_default();
    if !fields_ok || r.u64().ok() != Some(checksum(summed)) {
        return Err("value record header does not match its pointer");
    }
    Ok(())
}

/// The header of a value record for a value of `len` bytes: magic, key, length, hash and
/// their checksum, padded to its fixed size.
pub fn encode_value_header(key: &KeyPath, len: u64, hash: &[u8; 32]) -> Vec<u8> {
    let mut header = Vec::with_capacity(VALUE_HEADER_BYTES);
    header.extend_from_slice(VALUE_MAGIC);
    header.extend_from_slice(key);
    header.put_u64(len);
    header.extend_from_slice(hash);
    let sum = checksum(&header);
    header.put_u64(sum);
    header.resize(VALUE_HEADER_BYTES, 0);
    header
}

/// Encode a value record: a header naming the key, length and hash, then the value.
pub fn encode_value_record(key: &KeyPath, value: &[u8], hash: &[u8; 32]) -> BlockBuf {
    let header = encode_value_header(key, value.len() as u64, hash);
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
    /// The segment size fixed in the manifest: no location read lies beyond it.
    segment_blocks: u32,
    /// Read buffers of one block given back after their pages were decoded, for the next
    /// reads: a fresh aligned block costs an allocation and, often, page faults on memory the
    /// allocator had just returned to the system (5 % of a utxo batch's main thread). At most
    /// [`SPARE_BLOCKS`] for each thread that loads at once ([`Segments::keep_read_buffers_for`]).
    spare: Spares<BlockBuf>,
    /// The threads that write the runs commits and imports stage ([`crate::log::stager`]).
    writes: WriteThreads,
    /// The staging buffers of finished stagers, for the next ones: a fresh 1 MiB buffer costs
    /// an allocation the allocator maps anew, page faults and a zero fill as it grows, every
    /// commit. At most [`STAGE_BUFFERS`].
    stage_buffers: Spares<BlockBuf>,
    /// Emptied segment files kept for new segments ([`crate::log::recycle`]).
    recycler: Recycler,
}

/// The most staging buffers [`Segments`] keeps (1 MiB each): what a commit of up to two runs
/// uses, the common size (utxo at 10M writes 1.2–1.8 MB a commit); a larger one allocates its
/// third buffer. Each kept buffer is RSS the database holds between commits.
pub(crate) const STAGE_BUFFERS: usize = 2;

/// The most read buffers [`Segments`] keeps for reuse for each thread that loads at once (2 MiB
/// of blocks).
const SPARE_BLOCKS: usize = 512;

/// The most pages [`Segments::read_pages_each`] reads in one group: as many as the read
/// buffers kept, twice the io_uring backend's queue depth.
pub(crate) const READ_GROUP_PAGES: usize = SPARE_BLOCKS;

impl Segments {
    /// Segments of `storage`, of `segment_blocks` blocks each, opened lazily.
    pub fn new(storage: Arc<dyn Storage>, hasher: Hasher, segment_blocks: u32) -> Segments {
        Segments {
            storage,
            files: RwLock::new(HashMap::new()),
            hasher,
            segment_blocks,
            spare: Spares::new(SPARE_BLOCKS),
            writes: WriteThreads::new(),
            stage_buffers: Spares::new(STAGE_BUFFERS),
            recycler: Recycler::new(),
        }
    }

    /// Keep up to `limit` emptied segment files for new segments from now on, starting with
    /// the spare files among `names` (the directory's, listed at open); the rest are deleted.
    pub fn recycle_up_to(&self, names: &[String], limit: usize) {
        self.recycler.adopt(self.storage.as_ref(), names, limit);
    }

    /// The emptied segment files kept for new segments now, and how many new segments have
    /// taken one since open.
    pub fn recycled_files(&self) -> (u64, u64) {
        (self.recycler.kept() as u64, self.recycler.reused())
    }

    /// Keep read buffers for `loaders` threads reading at once (a load spread over the cores
    /// reads a group on each): up to 512 each (`SPARE_BLOCKS`), so that the groups after the
    /// first of every thread go through kept buffers, not fresh ones.
    pub fn keep_read_buffers_for(&self, loaders: usize) {
        self.spare.raise_limit(SPARE_BLOCKS.saturating_mul(loaders.max(1)));
    }

    /// A staging buffer a finished stager left, if one is kept.
    pub(crate) fn take_stage_buffer(&self) -> Option<BlockBuf> {
        self.stage_buffers.take()
    }

    /// Keep `bufs` (a finished stager's) for the next stagers, up to [`STAGE_BUFFERS`].
    pub(crate) fn keep_stage_buffers(&self, bufs: impl IntoIterator<Item = BlockBuf>) {
        self.stage_buffers.keep(bufs);
    }

    /// The threads that write staged runs beside their staging.
    pub(crate) fn write_threads(&self) -> &WriteThreads {
        &self.writes
    }

    /// `n` one-block read buffers, reused ones first. A reused one still holds what it read
    /// last, and is not cleared: a read fills all of its buffer or fails, and the buffer of a
    /// failed read is never looked at (the backends hand only whole reads to their callers).
    fn blocks(&self, n: usize) -> Vec<BlockBuf> {
        let mut out = self.spare.take_up_to(n);
        out.resize_with(n, || BlockBuf::zeroed(1));
        out
    }

    /// Give read buffers back for later reads (one-block ones, up to `SPARE_BLOCKS`).
    pub fn recycle(&self, blocks: Vec<BlockBuf>) {
        self.spare
            .keep(blocks.into_iter().filter(|b| b.block_count() == 1));
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The open file of segment `id`, creating it if asked. A segment to read that does not
    /// exist is corruption: a durable pointer names it.
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
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound if !create => {
                    Error::corruption(&name, 0, "the segment file is missing")
                }
                _ => Error::io("opening", &name, e),
            })?;
        self.files.write().insert(id, f.clone());
        Ok(f)
    }

    /// The open file of segment `id` for a commit to write, created if it does not exist: from
    /// a recycled segment file when one is kept ([`crate::log::recycle`]).
    pub fn file_to_write(&self, id: u32) -> Result<Arc<dyn StorageFile>> {
        if !self.files.read().contains_key(&id) {
            self.recycler
                .reuse_for(self.storage.as_ref(), &segment_file_name(id));
        }
        self.file(id, true)
    }

    /// Forget (close) segment `id`, emptied, and delete its file, or keep it for a new segment
    /// ([`crate::log::recycle`]).
    pub fn remove(&self, id: u32) -> Result<()> {
        self.files.write().remove(&id);
        let name = segment_file_name(id);
        self.recycler
            .retire(self.storage.as_ref(), id, &name)
            .map_err(|e| Error::io("deleting", &name, e))
    }

    /// Read the blocks at the given locations, all in flight at once. Only the locations are
    /// checked (against the segment size), not what is read.
    pub fn read_blocks(&self, locs: &[u64]) -> Result<Vec<BlockBuf>> {
        self.read_blocks_each(locs, &mut |_, _| {})
    }

    /// [`Segments::read_blocks`], handing each block (with its index in `locs`) to `done` as
    /// soon as it is read, while the others are still in flight.
    pub fn read_blocks_each(
        &self,
        locs: &[u64],
        done: &mut dyn FnMut(usize, &BlockBuf),
    ) -> Result<Vec<BlockBuf>> {
        let spans: Vec<(u64, u32)> = locs.iter().map(|l| (*l, 1)).collect();
        self.read_spans_each(&spans, done)
    }

    /// Read runs of contiguous blocks, each `(first block's location, blocks)` one read, all
    /// in flight at once, handing each run's buffer (with its index in `spans`) to `done` as
    /// soon as it is read. Only the extents are checked (within their segment), not what is
    /// read.
    pub fn read_spans_each(
        &self,
        spans: &[(u64, u32)],
        done: &mut dyn FnMut(usize, &BlockBuf),
    ) -> Result<Vec<BlockBuf>> {
        let files: Vec<Arc<dyn StorageFile>> = spans
            .iter()
            .map(|(l, n)| {
                check_span(*l, *n, self.segment_blocks).map_err(|what| {
                    Error::corruption(segment_file_name(loc_segment(*l)), loc_offset(*l), what)
                })?;
                self.file(loc_segment(*l), false)
            })
            .collect::<Result<_>>()?;
        let singles = spans.iter().filter(|(_, n)| *n == 1).count();
        let mut spare = self.blocks(singles).into_iter();
        let mut requests: Vec<ReadRequest<'_>> = spans
            .iter()
            .zip(files.iter())
            .map(|((l, n), f)| ReadRequest {
                file: f.as_ref(),
                offset: loc_offset(*l),
                buf: match n {
                    1 => spare.next().unwrap_or_else(|| BlockBuf::zeroed(1)),
                    _ => BlockBuf::zeroed(*n as usize),
                },
            })
            .collect();
        self.storage.read_batch_each(&mut requests, done).map_err(|e| {
            let (file, offset) = match spans {
                [(one, _)] => (segment_file_name(loc_segment(*one)), loc_offset(*one)),
                _ => (format!("{} reads of segment files", spans.len()), 0),
            };
            read_error("reading", file, offset, e)
        })?;
        Ok(requests.into_iter().map(|r| r.buf).collect())
    }

    /// Read pages at the given locations, all in flight at once, checking each against its
    /// checksum. Returns the raw blocks in request order.
    pub fn read_pages(&self, wanted: &[(u64, u64, Prefix)]) -> Result<Vec<BlockBuf>> {
        self.read_pages_checked(wanted, &mut |_, _| Ok(()))
    }

    /// Read pages at the given locations, many in flight at once: each is checked against its
    /// checksum and handed (with its index in `wanted`) to `done` as soon as it is read, so
    /// that decoding it overlaps the reads still in flight. Fails with a read error if any
    /// read failed, else with the first error of a check or of `done` (after which `done` is
    /// not called again).
    ///
    /// `done` copies what it keeps, so the reads go in consecutive groups of at most 512 pages
    /// (`READ_GROUP_PAGES`), each through the buffers the one before gave back: a read of any
    /// size holds no more buffers than the spares kept for it, instead of one fresh aligned
    /// block per page (a cold cache at transfer 2^20 reads 17,000 pages in its first batch,
    /// whose fresh buffers took 134 ms of its 466 ms read phase in allocation and page
    /// faults). A group keeps the backend's queue full until its last reads.
    pub fn read_pages_each(
        &self,
        wanted: &[(u64, u64, Prefix)],
        done: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        for (g, group) in wanted.chunks(READ_GROUP_PAGES).enumerate() {
            let base = g * READ_GROUP_PAGES;
            let blocks = self.read_pages_checked(group, &mut |i, bytes| done(base + i, bytes))?;
            self.recycle(blocks);
        }
        Ok(())
    }

    /// [`Segments::read_pages_each`], returning the raw blocks in request order.
    fn read_pages_checked(
        &self,
        wanted: &[(u64, u64, Prefix)],
        done: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<Vec<BlockBuf>> {
        let locs: Vec<u64> = wanted.iter().map(|(l, _, _)| *l).collect();
        let mut first: Option<Error> = None;
        let blocks = self.read_blocks_each(&locs, &mut |i, block| {
            if first.is_some() {
                return;
            }
            let checked = match wanted.get(i) {
                Some((l, sum, _)) => verify_page_checksum(block.as_bytes(), *l, *sum)
                    .and_then(|()| done(i, block.as_bytes())),
                None => Err(Error::internal("a read completed that was never asked for")),
            };
            first = checked.err();
        })?;
        first.map_or(Ok(blocks), Err)
    }

    /// Read and decode one page, checked against its checksum and region.
    pub fn read_page(&self, l: u64, sum: u64, prefix: &Prefix) -> Result<Page> {
        let mut blocks = self.read_pages(&[(l, sum, *prefix)])?;
        let block = blocks.pop().unwrap_or_default();
        decode_page_at(block.as_bytes(), l, prefix, sum)
    }

    /// Read a value from the value log and check it against its pointer. The pointer comes
    /// from disk: its extent is checked against the segment size, and no buffer larger than
    /// `VALUE_READ_AHEAD_BLOCKS` is allocated before the record's header has matched the
    /// pointer and the record has been found to lie within the file.
    pub fn read_value(&self, key: &KeyPath, value: &ExternalValue) -> Result<Vec<u8>> {
        let segment = loc_segment(value.loc);
        let name = segment_file_name(segment);
        let offset = loc_offset(value.loc);
        let bad = |what: &str| Error::corruption(&name, offset, what);
        let blocks =
            value_record_blocks(value.len).ok_or_else(|| bad("value length out of range"))?;
        check_value_extent(value.loc, blocks, self.segment_blocks).map_err(bad)?;
        let blocks = usize::try_from(blocks).map_err(|_| bad("value too large"))?;
        let file = self.file(segment, false)?;
        let ahead = blocks.min(VALUE_READ_AHEAD_BLOCKS);
        let mut requests = [ReadRequest {
            file: file.as_ref(),
            offset,
            buf: BlockBuf::zeroed(ahead),
        }];
        self.storage
            .read_batch(&mut requests)
            .map_err(|e| read_error("reading a value from", name.clone(), offset, e))?;
        let [request] = requests;
        let mut record = request.buf;
        check_value_header(record.as_bytes(), key, value).map_err(bad)?;
        if blocks > ahead {
            record = self.read_value_rest(file.as_ref(), &name, offset, record, blocks)?;
        }
        let len = usize::try_from(value.len).map_err(|_| bad("value too large"))?;
        let data = VALUE_HEADER_BYTES
            .checked_add(len)
            .and_then(|end| record.as_bytes().get(VALUE_HEADER_BYTES..end))
            .ok_or_else(|| bad("value record truncated"))?;
        if self.hasher.hash_value(data) != value.hash {
            return Err(bad("value does not match its hash"));
        }
        Ok(data.to_vec())
    }

    /// The whole of a value record of `blocks` blocks at `offset` whose first blocks were read
    /// into `ahead` (and its header checked): only if the file holds all of it is the buffer
    /// for it allocated and the rest read.
    fn read_value_rest(
        &self,
        file: &dyn StorageFile,
        name: &str,
        offset: u64,
        ahead: BlockBuf,
        blocks: usize,
    ) -> Result<BlockBuf> {
        let bad = |what: &str| Error::corruption(name, offset, what);
        let end = u64::try_from(blocks)
            .ok()
            .and_then(|b| b.checked_mul(BLOCK_BYTES as u64))
            .and_then(|bytes| bytes.checked_add(offset))
            .ok_or_else(|| bad("value record extent overflows"))?;
        let size = file
            .size()
            .map_err(|e| Error::io("reading the size of", name, e))?;
        if end > size {
            return Err(bad("value record extends past the end of the file"));
        }
        let mut record = BlockBuf::zeroed(blocks);
        let (head, rest) = record
            .as_bytes_mut()
            .split_at_mut_checked(ahead.len())
            .ok_or_else(|| Error::internal("read ahead past the value record"))?;
        head.copy_from_slice(ahead.as_bytes());
        let rest_offset = offset
            .checked_add(ahead.len() as u64)
            .ok_or_else(|| bad("value record extent overflows"))?;
        file.read_at(rest, rest_offset)
            .map_err(|e| read_error("reading a value from", name.to_string(), offset, e))?;
        Ok(record)
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
    check_page_checksum(checksum(bytes), l, expected)
}

/// [`verify_page_checksum`] of a page whose checksum `got` is known.
pub fn check_page_checksum(got: u64, l: u64, expected: u64) -> Result<()> {
    if got != expected {
        return Err(Error::corruption(
            segment_file_name(loc_segment(l)),
            loc_offset(l),
            format!("page checksum mismatch (expected {expected:016x}, found {got:016x})"),
        ));
    }
    Ok(())
}

/// Decode page bytes read from `l`, which must hold the region `prefix`, and whose checksum
/// `sum` the caller has checked ([`verify_page_checksum`]): the page keeps it.
pub fn decode_page_at(bytes: &[u8], l: u64, prefix: &Prefix, sum: u64) -> Result<Page> {
    let page = Page::decode_checked(bytes, sum).map_err(|e| {
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
    /// Every live value record: location → (blocks, table, key). The cleaner relocates values
    /// by it. A persistent map: the copy every retained version keeps shares all but the
    /// nodes a commit changed (a `BTreeMap` was copied whole by every commit, O(values)).
    pub values: ValueIndex,
    /// The segment new blocks go to.
    pub active: u32,
    /// The size of a segment in blocks.
    pub segment_blocks: u32,
    /// Which blocks of each segment hold a live page (one bit per block): what the cleaner
    /// relocates from a victim, found without walking the directory.
    pub live_pages: BTreeMap<u32, Vec<u64>>,
    /// Blocks the latest version no longer uses that older versions may still need (not
    /// stored in checkpoints: the log replayed after one rebuilds them).
    pub held: HeldBlocks,
}

/// The value index of a [`SegmentTable`]: location → (blocks, table, key).
pub type ValueIndex = imbl::OrdMap<u64, (u32, TableId, KeyPath)>;

/// Blocks the latest version no longer uses but older versions may: the blocks commit `seq`
/// replaced or freed are needed by the versions before it, and become garbage once no version
/// older than `seq` is retained or read. Counted so that the space only older versions keep
/// is reported apart ([`SegmentTable::retained_blocks`]): no cleaning can reclaim it early.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldBlocks {
    /// Blocks by the commit that released them, then by segment.
    by_commit: BTreeMap<u64, BTreeMap<u32, u64>>,
    /// The same blocks by segment.
    by_segment: BTreeMap<u32, u64>,
}

impl HeldBlocks {
    /// Count `blocks` blocks at `l`, released by commit `seq`.
    pub fn hold(&mut self, seq: u64, l: u64, blocks: u64) {
        let segment = loc_segment(l);
        *self
            .by_commit
            .entry(seq)
            .or_default()
            .entry(segment)
            .or_default() += blocks;
        *self.by_segment.entry(segment).or_default() += blocks;
    }

    /// Forget the blocks released by commits up to `oldest`, the oldest version still retained
    /// or read (`None`: only the latest is): no version needs them any more.
    pub fn release_up_to(&mut self, oldest: Option<u64>) {
        let oldest = oldest.unwrap_or(u64::MAX);
        while let Some(entry) = self.by_commit.first_entry() {
            if *entry.key() > oldest {
                break;
            }
            for (segment, blocks) in entry.remove() {
                let n = self.by_segment.entry(segment).or_default();
                assert!(
                    *n >= blocks,
                    "invariant broken: segment {segment} holds {n} blocks for old versions, \
                     {blocks} released"
                );
                *n -= blocks;
                if *n == 0 {
                    self.by_segment.remove(&segment);
                }
            }
        }
    }

    /// Held blocks in `segment`.
    pub fn in_segment(&self, segment: u32) -> u64 {
        self.by_segment.get(&segment).copied().unwrap_or(0)
    }

    /// The oldest commit whose released blocks are held.
    #[cfg(test)]
    pub fn oldest_commit(&self) -> Option<u64> {
        self.by_commit.keys().next().copied()
    }
}

impl SegmentTable {
    /// A table with one empty active segment.
    pub fn new(segment_blocks: u32) -> SegmentTable {
        let mut segments = BTreeMap::new();
        segments.insert(1, SegmentMeta::default());
        SegmentTable {
            segments,
            values: ValueIndex::new(),
            active: 1,
            segment_blocks,
            live_pages: BTreeMap::new(),
            held: HeldBlocks::default(),
        }
    }

    /// The highest segment id in use (the active segment's, or a higher one a relocation
    /// wrote).
    pub fn newest_id(&self) -> u32 {
        let newest = self.segments.keys().next_back().copied().unwrap_or(0);
        newest.max(self.active)
    }

    /// Reserve `blocks` contiguous blocks, opening a new segment if the active one cannot
    /// hold them. A record larger than a segment gets a segment of its own. Fails, reserving
    /// nothing, when no segment id is left.
    pub fn allocate(&mut self, blocks: u32) -> Result<u64> {
        let used = self.segments.get(&self.active).map_or(0, |m| m.used_blocks);
        if used > 0 && u64::from(used) + u64::from(blocks) > u64::from(self.segment_blocks) {
            let newest = self.newest_id();
            let next = newest
                .checked_add(1)
                .filter(|id| *id <= MAX_SEGMENT_ID)
                .ok_or(Error::SegmentIdsExhausted { last: newest })?;
            self.active = next;
            self.segments.insert(next, SegmentMeta::default());
        }
        let meta = self.segments.entry(self.active).or_default();
        let start = meta.used_blocks;
        meta.used_blocks = start
            .checked_add(blocks)
            .ok_or_else(|| Error::internal("a segment of more than 2^32 blocks"))?;
        Ok(loc(self.active, start))
    }

    /// Count the page at `l` live (`delta` 1) or no longer live (-1).
    pub fn add_pages(&mut self, l: u64, delta: i64) {
        let segment = loc_segment(l);
        let meta = self.segments.entry(segment).or_default();
        meta.live_page_blocks = meta.live_page_blocks.saturating_add_signed(delta);
        let block = loc_block(l) as usize;
        let bits = self.live_pages.entry(segment).or_default();
        let (word, bit) = (block / 64, block % 64);
        if bits.len() <= word {
            bits.resize(word + 1, 0);
        }
        if let Some(w) = bits.get_mut(word) {
            if delta > 0 {
                *w |= 1 << bit;
            } else {
                *w &= !(1 << bit);
            }
        }
        if meta.live_page_blocks == 0 {
            self.live_pages.remove(&segment);
        }
    }

    /// The locations of the live pages of `segment`, in order.
    pub fn live_page_locs(&self, segment: u32) -> Vec<u64> {
        let Some(bits) = self.live_pages.get(&segment) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, word) in bits.iter().enumerate() {
            let mut w = *word;
            while w != 0 {
                let bit = w.trailing_zeros() as usize;
                w &= w - 1;
                if let Ok(block) = u32::try_from(i * 64 + bit) {
                    out.push(loc(segment, block));
                }
            }
        }
        out
    }

    /// The live value records of `segment`: (location, table, key).
    pub fn live_values_in(&self, segment: u32) -> Vec<(u64, TableId, KeyPath)> {
        let start = loc(segment, 0);
        let end = loc(segment, u32::MAX);
        self.values
            .range(start..=end)
            .map(|(l, (_, table, key))| (*l, *table, *key))
            .collect()
    }

    /// Record a live value record of `blocks` blocks at `l`, holding the value of `key` in
    /// `table`.
    pub fn value_written(&mut self, l: u64, blocks: u32, table: TableId, key: KeyPath) {
        if self.values.insert(l, (blocks, table, key)).is_none() {
            let meta = self.segments.entry(loc_segment(l)).or_default();
            meta.live_value_blocks += u64::from(blocks);
        }
    }

    /// The page at `l` is no longer live as of commit `seq`: older versions may still need it.
    pub fn page_released(&mut self, l: u64, seq: u64) {
        self.add_pages(l, -1);
        self.held.hold(seq, l, 1);
    }

    /// Forget the value record at `l`, freed by commit `seq`: the latest version no longer
    /// refers to it (older versions may).
    pub fn value_freed(&mut self, l: u64, seq: u64) {
        if let Some((blocks, _, _)) = self.values.remove(&l) {
            let meta = self.segments.entry(loc_segment(l)).or_default();
            meta.live_value_blocks = meta.live_value_blocks.saturating_sub(u64::from(blocks));
            self.held.hold(seq, l, u64::from(blocks));
        }
    }

    /// Forget every value record of `table` (a table dropped by commit `seq`).
    pub fn table_values_freed(&mut self, table: TableId, seq: u64) {
        let gone: Vec<u64> = self
            .values
            .iter()
            .filter(|(_, (_, t, _))| *t == table)
            .map(|(l, _)| *l)
            .collect();
        for l in gone {
            self.value_freed(l, seq);
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

    /// Blocks only older retained or read versions keep on disk, which no cleaning can reclaim
    /// before those versions go: the held blocks of segments with live data, and the whole of
    /// segments with no live data left but held blocks (they are deleted once the versions
    /// holding those blocks go).
    ///
    /// Held blocks are counted by the commit that released them, not by location, so a block a
    /// rollback made live again is still among them until that commit's versions go: a
    /// segment's held blocks are capped at its blocks that are not live.
    pub fn retained_blocks(&self) -> u64 {
        self.segments
            .iter()
            .map(|(id, m)| match (m.live_blocks(), self.held.in_segment(*id)) {
                (_, 0) => 0,
                (0, _) if *id != self.active => u64::from(m.used_blocks),
                _ => self.held_in(*id, m),
            })
            .sum()
    }

    /// The blocks of segment `id` (described by `meta`) that only older retained or read
    /// versions keep: its held blocks, capped at its blocks that are not live (see
    /// [`SegmentTable::retained_blocks`]).
    pub fn held_in(&self, id: u32, meta: &SegmentMeta) -> u64 {
        self.held
            .in_segment(id)
            .min(u64::from(meta.used_blocks).saturating_sub(meta.live_blocks()))
    }

    /// The blocks of segment `id` that `Options::max_space_amplification` bounds: those written,
    /// less what only older versions keep ([`SegmentTable::held_in`]).
    pub fn bounded_blocks(&self, id: u32, meta: &SegmentMeta) -> u64 {
        u64::from(meta.used_blocks) - self.held_in(id, meta)
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_core::ValueHash;

    #[test]
    fn the_live_page_index_follows_the_counts() {
        let mut t = SegmentTable::new(1 << 14);
        for b in [0u32, 5, 63, 64, 9000] {
            t.add_pages(loc(2, b), 1);
        }
        t.add_pages(loc(3, 7), 1);
        t.add_pages(loc(2, 5), -1);
        assert_eq!(
            t.live_page_locs(2),
            vec![loc(2, 0), loc(2, 63), loc(2, 64), loc(2, 9000)]
        );
        assert_eq!(t.segments[&2].live_page_blocks, 4);
        t.add_pages(loc(3, 7), -1);
        assert!(t.live_page_locs(3).is_empty());
        assert!(!t.live_pages.contains_key(&3));
        t.value_written(loc(2, 100), 3, 0, [1; 32]);
        t.value_written(loc(3, 1), 1, 0, [2; 32]);
        assert_eq!(t.live_values_in(2), vec![(loc(2, 100), 0, [1; 32])]);
    }

    #[test]
    fn held_blocks_go_with_the_versions_that_need_them() {
        let mut t = SegmentTable::new(100);
        t.segments.insert(2, SegmentMeta::default());
        t.add_pages(loc(1, 0), 1);
        t.add_pages(loc(2, 0), 1);
        t.add_pages(loc(2, 1), 1);
        t.active = 3;
        for id in [1, 2] {
            t.segments.entry(id).or_default().used_blocks = 10;
        }
        // Commit 5 replaces the page in segment 1 (left with nothing live), commit 6 one of
        // segment 2's.
        t.page_released(loc(1, 0), 5);
        t.page_released(loc(2, 0), 6);
        assert_eq!((t.held.in_segment(1), t.held.in_segment(2)), (1, 1));
        // Segment 1 waits whole for the old versions; segment 2 keeps one block for them.
        assert_eq!(t.retained_blocks(), 10 + 1);
        // Version 5 is the oldest retained: commit 5's blocks are garbage, commit 6's are not.
        t.held.release_up_to(Some(5));
        assert_eq!((t.held.in_segment(1), t.held.in_segment(2)), (0, 1));
        assert_eq!(t.retained_blocks(), 1);
        // Only the latest version is left.
        t.held.release_up_to(None);
        assert_eq!(t.retained_blocks(), 0);
    }

    #[test]
    fn allocation_fills_segments_in_order() {
        let mut t = SegmentTable::new(10);
        assert_eq!(t.allocate(4).unwrap(), loc(1, 0));
        assert_eq!(t.allocate(6).unwrap(), loc(1, 4));
        assert_eq!(t.allocate(1).unwrap(), loc(2, 0));
        // Larger than a segment: a segment of its own once the active one has data.
        assert_eq!(t.allocate(25).unwrap(), loc(3, 0));
        assert_eq!(t.allocate(1).unwrap(), loc(4, 0));
        assert_eq!(t.used_blocks(), 4 + 6 + 1 + 25 + 1);
    }

    /// A table whose newest segment has the last id (from a crafted record or checkpoint)
    /// refuses to open another segment; `active + 1` used to overflow (a panic).
    #[test]
    fn allocation_past_the_last_segment_id_is_an_error() {
        for last in [MAX_SEGMENT_ID, u32::MAX] {
            let mut t = SegmentTable::new(10);
            t.active = last;
            t.segments.insert(
                last,
                SegmentMeta {
                    used_blocks: 8,
                    ..SegmentMeta::default()
                },
            );
            assert_eq!(t.allocate(2).unwrap(), loc(last, 8));
            let before = (t.active, t.segments.clone());
            let e = t.allocate(1).unwrap_err();
            assert!(matches!(e, Error::SegmentIdsExhausted { .. }), "{e}");
            assert_eq!(
                (t.active, t.segments.clone()),
                before,
                "a failed allocation reserved"
            );
        }
    }

    /// A length from disk never overflows the record size (`len + 128` used to).
    #[test]
    fn value_record_sizes_are_bounded() {
        assert_eq!(value_record_blocks(0), Some(1));
        assert_eq!(value_record_blocks(4096 - 128), Some(1));
        assert_eq!(value_record_blocks(4096 - 127), Some(2));
        let max = MAX_VALUE_BYTES as u64;
        assert_eq!(value_record_blocks(max), Some(MAX_VALUE_RECORD_BLOCKS));
        assert_eq!(value_record_blocks(max + 1), None);
        assert_eq!(value_record_blocks(u64::MAX), None);
    }

    /// Pointers (from a page) are checked against the segment geometry before anything is
    /// read: another segment than the ones allocated, the unwritten sentinel, a block past the
    /// segment size, a record crossing the end of its segment, an impossible length.
    #[test]
    fn value_pointers_outside_the_segment_geometry_are_corruption() {
        let (segs, key, value, hash, rec) = value_record_fixture();
        let f = segs.file(1, true).unwrap();
        f.write_at(rec.as_bytes(), 0).unwrap();
        let ptr = |loc, len| ExternalValue { loc, len, hash };
        assert_eq!(
            segs.read_value(&key, &ptr(loc(1, 0), 10_000)).unwrap(),
            value
        );
        for (bad, why) in [
            (ptr(loc(0, 0), 10_000), "segment 0"),
            (
                ptr(crate::state::page::UNWRITTEN, 10_000),
                "the unwritten sentinel",
            ),
            (ptr(loc(1, 256), 10_000), "a block past the segment"),
            (
                ptr(loc(1, 254), 10_000),
                "a record crossing the segment end",
            ),
            (ptr(loc(1, 0), u64::MAX), "a length beyond the limit"),
        ] {
            let e = segs.read_value(&key, &bad).unwrap_err();
            assert!(e.is_corruption(), "{why}: {e}");
        }
        let e = segs.read_blocks(&[loc(1, 0), loc(1, 256)]).err();
        assert!(e.is_some_and(|e| e.is_corruption() && e.to_string().contains("beyond")));
        let e = segs.read_blocks(&[loc(0, 3)]).err();
        assert!(e.is_some_and(|e| e.is_corruption()));
        // A run of blocks must end within its segment (256 blocks here), and hold one.
        for (start, blocks) in [(loc(1, 250), 7), (loc(1, 0), 0), (loc(1, 1), u32::MAX)] {
            let e = segs.read_spans_each(&[(start, blocks)], &mut |_, _| {}).err();
            assert!(e.is_some_and(|e| e.is_corruption()), "{start:x} {blocks}");
        }
        assert!(check_span(loc(1, 250), 6, 256).is_ok());
    }

    /// A record larger than the read-ahead is read in two steps: the rest only once the
    /// header matched and the file was found to hold the whole record.
    #[test]
    fn large_value_records_are_checked_against_the_file_before_their_buffer() {
        let (segs, key, _, _, _) = value_record_fixture();
        let f = segs.file(2, true).unwrap();
        // A genuine 100,000-byte record (25 blocks) reads back; without its last block it is
        // corruption.
        let value: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let hash = Hasher::Blake3.hash_value(&value);
        let rec = encode_value_record(&key, &value, &hash);
        assert!(rec.block_count() > VALUE_READ_AHEAD_BLOCKS);
        f.write_at(rec.as_bytes(), 0).unwrap();
        let ptr = ExternalValue {
            loc: loc(2, 0),
            len: value.len() as u64,
            hash,
        };
        assert_eq!(segs.read_value(&key, &ptr).unwrap(), value);
        f.set_len((rec.len() - BLOCK_BYTES) as u64).unwrap();
        let e = segs.read_value(&key, &ptr).unwrap_err();
        assert!(e.is_corruption(), "{e}");
        // A header claiming a 1 GiB value, checksum and all, in a one-block file: refused by
        // the file's size.
        let huge = ExternalValue {
            loc: loc(2, 0),
            len: 1 << 30,
            hash,
        };
        f.set_len(0).unwrap();
        f.write_at(&encode_value_header(&key, huge.len, &hash), 0)
            .unwrap();
        f.set_len(BLOCK_BYTES as u64).unwrap();
        let e = segs.read_value(&key, &huge).unwrap_err();
        assert!(e.to_string().contains("past the end of the file"), "{e}");
    }

    /// Read buffers are reused as they are (not cleared: every read fills its whole buffer),
    /// only one-block ones are kept, and no more than the cap; reads through reused buffers
    /// that held other bytes return what is on disk.
    #[test]
    fn read_buffers_are_reused_and_bounded() {
        let (segs, ..) = value_record_fixture();
        let f = segs.file(1, true).unwrap();
        f.write_at(&[9u8; BLOCK_BYTES * 3], 0).unwrap();
        let dirty = |n: usize| {
            (0..n)
                .map(|_| BlockBuf::from_bytes(&[0xee; BLOCK_BYTES]))
                .collect::<Vec<_>>()
        };
        segs.recycle(dirty(3));
        segs.recycle(vec![BlockBuf::zeroed(2)]);
        assert_eq!(segs.spare.len(), 3, "only one-block buffers are kept");
        let bufs = segs.blocks(5);
        assert_eq!(bufs.len(), 5);
        assert!(bufs.iter().all(|b| b.block_count() == 1));
        let reused = bufs.iter().filter(|b| b.as_bytes() == [0xee; BLOCK_BYTES]).count();
        assert_eq!(reused, 3, "the three spare buffers are handed out first");
        assert_eq!(segs.spare.len(), 0);
        segs.recycle(dirty(SPARE_BLOCKS + 10));
        assert_eq!(segs.spare.len(), SPARE_BLOCKS);
        let blocks = segs.read_blocks(&[loc(1, 0), loc(1, 2)]).unwrap();
        assert!(blocks.iter().all(|b| b.as_bytes() == [9u8; BLOCK_BYTES]));
        assert_eq!(segs.spare.len(), SPARE_BLOCKS - 2);
    }

    /// A read of more pages than one group hands every page to `done` once, under its own
    /// index, with its own bytes, and goes through no more buffers than are kept (before
    /// groups, each of the 1,200 pages had a buffer of its own, all alive until the end).
    #[test]
    fn a_large_page_read_goes_in_groups_through_kept_buffers() {
        let storage: Arc<dyn Storage> = Arc::new(crate::io::MemoryStorage::new());
        let segs = Segments::new(storage, Hasher::Blake3, 1 << 20);
        let n = 2 * READ_GROUP_PAGES + 176;
        let block = |i: usize| -> Vec<u8> {
            (0..BLOCK_BYTES / 4)
                .flat_map(|_| u32::try_from(i).unwrap().to_le_bytes())
                .collect()
        };
        let f = segs.file(1, true).unwrap();
        let all: Vec<u8> = (0..n).flat_map(block).collect();
        f.write_at(&all, 0).unwrap();
        // Asked in reverse order, so that an index off by a group's start names another page.
        let wanted: Vec<(u64, u64, Prefix)> = (0..n)
            .rev()
            .map(|b| {
                let at = loc(1, u32::try_from(b).unwrap());
                (at, checksum(&block(b)), Prefix::root())
            })
            .collect();
        let mut seen = vec![0u32; n];
        let mut buffers = std::collections::HashSet::new();
        segs.read_pages_each(&wanted, &mut |j, bytes| {
            assert_eq!(bytes, &block(n - 1 - j)[..], "request {j} got another page's bytes");
            seen[j] += 1;
            buffers.insert(bytes.as_ptr() as usize);
            Ok(())
        })
        .unwrap();
        assert!(seen.iter().all(|c| *c == 1), "a page not handed over exactly once");
        assert!(
            buffers.len() <= SPARE_BLOCKS,
            "{} buffers for {n} pages: more than the {SPARE_BLOCKS} kept",
            buffers.len()
        );
        assert_eq!(segs.spare.len(), SPARE_BLOCKS.min(n));
    }

    /// Two threads reading at once each go through their own kept buffers once the pool keeps
    /// enough for two: after both have read more than a group, the pool holds both groups'
    /// buffers (with the bound of one thread, the second group's were freed and the next
    /// load of that thread allocated afresh).
    #[test]
    fn read_buffers_are_kept_for_every_loading_thread() {
        let storage: Arc<dyn Storage> = Arc::new(crate::io::MemoryStorage::new());
        let segs = Segments::new(storage, Hasher::Blake3, 1 << 20);
        segs.keep_read_buffers_for(2);
        let n = READ_GROUP_PAGES + 10;
        let f = segs.file(1, true).unwrap();
        f.write_at(&vec![5u8; n * BLOCK_BYTES], 0).unwrap();
        let sum = checksum(&[5u8; BLOCK_BYTES]);
        let wanted: Vec<(u64, u64, Prefix)> = (0..n)
            .map(|b| (loc(1, u32::try_from(b).unwrap()), sum, Prefix::root()))
            .collect();
        // Each thread holds its first group until both have read theirs.
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut first = true;
                    segs.read_pages_each(&wanted, &mut |_, _| {
                        if std::mem::take(&mut first) {
                            barrier.wait();
                        }
                        Ok(())
                    })
                    .unwrap();
                });
            }
        });
        assert_eq!(segs.spare.len(), 2 * SPARE_BLOCKS, "a loading thread's group was freed");
    }

    /// In-memory segments and a 10,000-byte value record: (segments, key, value, hash, record).
    fn value_record_fixture() -> (Segments, KeyPath, Vec<u8>, ValueHash, BlockBuf) {
        let storage: Arc<dyn Storage> = Arc::new(crate::io::MemoryStorage::new());
        let segs = Segments::new(storage, Hasher::Blake3, MIN_SEGMENT_BLOCKS);
        let key = [7u8; 32];
        let value = vec![5u8; 10_000];
        let hash = Hasher::Blake3.hash_value(&value);
        let rec = encode_value_record(&key, &value, &hash);
        (segs, key, value, hash, rec)
    }

    #[test]
    fn value_records_round_trip_and_are_authenticated() {
        let (segs, key, value, hash, rec) = value_record_fixture();
        assert_eq!(
            u32::try_from(rec.block_count()).ok(),
            value_record_blocks(10_000)
        );
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

    fn edge_u32() -> impl proptest::strategy::Strategy<Value = u32> {
        use proptest::prelude::*;
        prop_oneof![
            Just(0),
            Just(1),
            Just(2),
            Just(MIN_SEGMENT_BLOCKS - 1),
            Just(MIN_SEGMENT_BLOCKS),
            Just(MAX_SEGMENT_ID),
            Just(u32::MAX),
            any::<u32>(),
        ]
    }

    fn edge_len() -> impl proptest::strategy::Strategy<Value = u64> {
        use proptest::prelude::*;
        let max = MAX_VALUE_BYTES as u64;
        prop_oneof![
            Just(10_000),
            Just(1025),
            Just(100_000),
            Just(max),
            Just(max + 1),
            Just(u64::MAX),
            any::<u64>(),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        /// The seeded counterpart of the `segment` fuzz target's structure-aware modes (run in
        /// `cargo test`): any location and length in a pointer, with the record's header
        /// forged to match or not, reads the stored value or is corruption; never a panic or
        /// an allocation the file cannot back.
        #[test]
        fn any_value_pointer_reads_the_value_or_is_corruption(
            segment in edge_u32(),
            block in edge_u32(),
            len in edge_len(),
            forge in proptest::bool::ANY,
        ) {
            let (segs, key, value, hash, rec) = value_record_fixture();
            let f = segs.file(1, true).unwrap();
            f.write_at(rec.as_bytes(), loc_offset(loc(1, 2))).unwrap();
            if forge {
                f.write_at(&encode_value_header(&key, len, &hash), loc_offset(loc(1, 2)))
                    .unwrap();
            }
            let ptr = ExternalValue { loc: loc(segment, block), len, hash };
            match segs.read_value(&key, &ptr) {
                Ok(v) => proptest::prop_assert_eq!(v, value),
                Err(e) => proptest::prop_assert!(e.is_corruption(), "{}", e),
            }
        }
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
