//! Leaf pages: the 4 KiB unit of storage. A page holds every entry whose key path starts with
//! its prefix, sorted by key path, each with its value inline or a pointer to the value log
//! plus the value's hash. The page's sub-trie is a pure function of its entries, so the page
//! carries everything needed to recompute its node in the trie and to prove any key below it.
//!
//! Each page also stores the 16 nodes of its sub-trie four levels below its position (its
//! "buckets"). An update or a proof then hashes only the touched buckets' entries and the four
//! levels above them, instead of every entry of the page; the stored nodes are authenticated
//! with the rest of the page by its checksum, and `check` recomputes them.
//!
//! A decoded [`Page`] is its 4 KiB block plus the offset of each entry: reading entries never
//! allocates. This module owns the byte layout (see `docs/DESIGN.md`), the validation of
//! untrusted page bytes (every violation is a [`PageError`], never a panic), page hashing and
//! proofs, building pages, and the split of an overfull region into a subtree of pages. It
//! never does I/O.

use crate::io::BLOCK_BYTES;
use crate::state::blocks::{BlankBlock, PageBlock};
use crate::state::prefix::Prefix;
use sprig_core::jobs::{subtrie_root_in, HashJobs, NodeRef};
use sprig_core::proof::{path_proof_below, prove_and_update_in, PathProof, ProofNode};
use sprig_core::trie::{
    apply_changes, bit_at, shared_prefix_bits, KeyPath, Node, ValueHash,
    KEY_BITS,
    TERMINATOR,
};
use sprig_core::Hasher;
use std::ops::Range;

/// Magic bytes at the start of every page.
pub const PAGE_MAGIC: [u8; 4] = *b"SPPG";
/// The page layout version.
pub const PAGE_VERSION: u8 = 1;
/// The number of levels below a page's position at which its bucket nodes sit.
pub const BUCKET_BITS: usize = 4;
/// The number of bucket nodes a page stores.
pub const BUCKETS: usize = 1 << BUCKET_BITS;
/// A page's bucket nodes.
pub type Buckets = [Node; BUCKETS];
const BUCKETS_AT: usize = 52;
/// Bytes before the first entry: the fixed header and the bucket nodes.
pub const PAGE_HEADER_BYTES: usize = BUCKETS_AT + BUCKETS * 32;
/// Bytes available to entries.
pub const PAGE_BODY_BYTES: usize = BLOCK_BYTES - PAGE_HEADER_BYTES;
/// The largest value stored inside a page; larger values go to the value log.
pub const MAX_INLINE_VALUE_BYTES: usize = 1024;
/// The largest value Sprig stores (4 GiB − 1).
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// assert_eq!(sprig::MAX_VALUE_BYTES, u32::MAX as usize); // 4 GiB - 1
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut batch = db.begin();
/// batch.put([1u8; 32], vec![0u8; 1 << 20])?; // 1 MiB: well within
/// db.commit(batch.finish()?)?;
/// assert_eq!(db.view().get_ref(&[1u8; 32])?.map(|blob| blob.len), Some(1 << 20));
/// # Ok(()) }
/// ```
pub const MAX_VALUE_BYTES: usize = u32::MAX as usize;
/// The location of a value-log record not written yet: an in-memory page of an overlay points
/// at its new large values this way until the commit that writes them. Never valid on disk.
pub(crate) const UNWRITTEN: u64 = u64::MAX;

const KIND_INLINE: u8 = 0;
const KIND_EXTERNAL: u8 = 1;
const ENTRY_KEY_BYTES: usize = 32;
const INLINE_OVERHEAD_BYTES: usize = ENTRY_KEY_BYTES + 1 + 2;
/// The most entries a page holds (all of them with empty values inline).
pub const MAX_PAGE_ENTRIES: usize = PAGE_BODY_BYTES / INLINE_OVERHEAD_BYTES;
const EXTERNAL_ENTRY_BYTES: usize = ENTRY_KEY_BYTES + 1 + 8 + 8 + 32;
const FLAGS_AT: usize = 5;
const SEQ_AT: usize = 40;
const COUNT_AT: usize = 48;
const USED_AT: usize = 50;

/// Which commit wrote a page version, and how: stored in every page's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// The sequence number of the commit that wrote the page.
    pub seq: u64,
    /// The commit ran with `SyncPolicy::Always`: it began writing only after the commit
    /// before it was durable. A page with this flag therefore proves that the commit before
    /// its own was durable, which recovery checks against the log.
    pub synced: bool,
}

impl From<u64> for Stamp {
    /// A stamp of commit `seq` that claims nothing about durability.
    fn from(seq: u64) -> Stamp {
        Stamp { seq, synced: false }
    }
}

const FLAG_SYNCED_COMMIT: u8 = 1;

/// The stamp of a block that starts like a page (magic, version, known flags), without
/// validating the rest: what recovery uses to see which commit wrote blocks past the end of
/// what the log accounts for.
pub fn peek_stamp(bytes: &[u8]) -> Option<Stamp> {
    let mut r = Cursor { bytes, at: 0 };
    if r.take::<4>().ok()? != PAGE_MAGIC || r.take::<1>().ok()? != [PAGE_VERSION] {
        return None;
    }
    let [flags] = r.take::<1>().ok()?;
    if flags & !FLAG_SYNCED_COMMIT != 0 {
        return None;
    }
    let seq = bytes.get(SEQ_AT..SEQ_AT + 8)?;
    Some(Stamp {
        seq: u64::from_le_bytes(seq.try_into().ok()?),
        synced: flags & FLAG_SYNCED_COMMIT != 0,
    })
}

/// A pointer to a value in the value log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExternalValue {
    /// The value record's location.
    pub loc: u64,
    /// The value's length in bytes.
    pub len: u64,
    /// `H(value)`.
    pub hash: ValueHash,
}

/// A value as stored in a page, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// Stored in the page.
    Inline(&'a [u8]),
    /// Stored in the value log.
    External(ExternalValue),
}

impl ValueRef<'_> {
    /// The bytes this value takes in a page, key included.
    pub fn entry_bytes(&self) -> usize {
        match self {
            ValueRef::Inline(v) => INLINE_OVERHEAD_BYTES + v.len(),
            ValueRef::External(_) => EXTERNAL_ENTRY_BYTES,
        }
    }

    /// `H(value)`.
    pub fn hash(&self, hasher: Hasher) -> ValueHash {
        match self {
            ValueRef::Inline(v) => hasher.hash_value(v),
            ValueRef::External(e) => e.hash,
        }
    }

    /// The value-log pointer, if the value lives there.
    pub fn external(&self) -> Option<ExternalValue> {
        match self {
            ValueRef::Inline(_) => None,
            ValueRef::External(x) => Some(*x),
        }
    }
}

/// One entry of a page, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// The key path.
    pub key: &'a KeyPath,
    /// The value or its pointer.
    pub value: ValueRef<'a>,
}

/// Why page bytes were rejected or a page could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// The page does not start with the page magic or has an unknown version.
    #[error("not a page (bad magic or version)")]
    BadHeader,
    /// The entry area is inconsistent.
    #[error("malformed page body: {0}")]
    Malformed(&'static str),
    /// Entries given to a builder do not fit in one page.
    #[error("entries do not fit in one page")]
    Overflow,
}

/// A decoded, validated page.
#[derive(Clone)]
pub struct Page {
    /// The page's bytes. A plain heap allocation, not a 4 KiB-aligned [`Block`]: pages are
    /// copied into aligned buffers for direct I/O, and an aligned allocation behind a reference
    /// count costs twice its size. Recycled when the page is dropped ([`PageBlock`]).
    bytes: PageBlock,
    prefix: Prefix,
    stamp: Stamp,
    offsets: Vec<u16>,
    /// How many entries point into the value log (most pages: none, and then nothing needs
    /// relocating when the page is written).
    external: u16,
    /// The xxh3 checksum of `bytes`: of a page built in memory, computed where it is built (a
    /// commit's regions are rebuilt on every core) rather than by the committing thread as it
    /// writes the page; of a page read from disk, the one its read checked
    /// ([`Page::decode_checked`], [`Page::decode_summed`]). None for a page decoded from bytes
    /// of unknown checksum, or for one pointing at a value not written yet (rebuilt before it
    /// is written).
    checksum: Option<u64>,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("prefix", &self.prefix)
            .field("stamp", &self.stamp)
            .field("entries", &self.offsets.len())
            .finish()
    }
}

impl PartialEq for Page {
    fn eq(&self, other: &Page) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Page {}

/// The bytes a set of entries takes in a page body.
pub fn body_bytes(entries: &[(KeyPath, ValueRef<'_>)]) -> usize {
    entries.iter().map(|(_, v)| v.entry_bytes()).sum()
}

/// Whether the entries fit in one page.
pub fn fits(entries: &[(KeyPath, ValueRef<'_>)]) -> bool {
    body_bytes(entries) <= PAGE_BODY_BYTES
}

/// The bucket levels of a page at `depth` (fewer than four only at the very bottom of the
/// trie).
fn bucket_bits(depth: usize) -> usize {
    BUCKET_BITS.min(KEY_BITS.saturating_sub(depth))
}

/// A key path ordered as bytes, compared a word at a time: its first eight bytes decide almost
/// every comparison inside a page (whose keys share only the page's prefix), without a call to
/// `memcmp` per probe.
#[derive(PartialEq, Eq)]
struct Ordered<'a>(&'a KeyPath);

impl Ord for Ordered<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let word = |k: &KeyPath| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&k[..8]);
            u64::from_be_bytes(w)
        };
        word(self.0)
            .cmp(&word(other.0))
            .then_with(|| self.0[8..].cmp(&other.0[8..]))
    }
}

impl PartialOrd for Ordered<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The bucket of `key` in a page at `depth`.
fn bucket_of(key: &KeyPath, depth: usize, bits: usize) -> usize {
    (0..bits).fold(0, |b, i| (b << 1) | usize::from(bit_at(key, depth + i)))
}

/// The bucket nodes of a page at `depth` holding `leaves` (sorted); unused slots are the
/// terminator. Every bucket's hashes are computed together ([`HashJobs`]).
pub fn compute_buckets(hasher: Hasher, depth: usize, leaves: &[(KeyPath, ValueHash)]) -> Buckets {
    let bits = bucket_bits(depth);
    with_jobs(hasher, |jobs| {
        let mut refs = [NodeRef::TERMINATOR; BUCKETS];
        let mut rest = leaves;
        for (b, slot) in refs.iter_mut().enumerate().take(1 << bits) {
            let n = rest.partition_point(|(k, _)| bucket_of(k, depth, bits) <= b);
            let (here, after) = rest.split_at(n);
            *slot = subtrie_root_in(jobs, depth + bits, here);
            rest = after;
        }
        jobs.evaluate();
        refs.map(|r| jobs.value(r))
    })
}

/// Run `f` with this thread's reusable [`HashJobs`], emptied, for `hasher` (a new set when
/// it is in use further up the stack): the page walks and bucket computations outside a
/// commit's rewrite, which gathers its own.
pub(crate) fn with_jobs<R>(hasher: Hasher, f: impl FnOnce(&mut HashJobs) -> R) -> R {
    thread_local! {
        static JOBS: std::cell::RefCell<Option<HashJobs>> = const { std::cell::RefCell::new(None) };
    }
    JOBS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let jobs = slot.get_or_insert_with(|| HashJobs::new(hasher));
            jobs.reset(hasher);
            f(jobs)
        }
        Err(_) => f(&mut HashJobs::new(hasher)),
    })
}

/// The node at `level` levels below a page whose buckets sit `bits` levels below it, at
/// position `index` of that level: the fold of the bucket nodes under it (as many hashes as
/// it has internal nodes, none at the bucket level), as jobs.
fn fold_under_in(
    jobs: &mut HashJobs,
    bits: usize,
    buckets: &[NodeRef; BUCKETS],
    level: usize,
    index: usize,
) -> NodeRef {
    if level >= bits {
        return buckets.get(index).copied().unwrap_or(NodeRef::TERMINATOR);
    }
    let l = fold_under_in(jobs, bits, buckets, level + 1, 2 * index);
    let r = fold_under_in(jobs, bits, buckets, level + 1, 2 * index + 1);
    jobs.parent(l, r)
}

/// The node of a page at `depth` with these bucket nodes.
pub fn fold_buckets(hasher: Hasher, depth: usize, buckets: &Buckets) -> Node {
    with_jobs(hasher, |jobs| {
        let buckets = buckets.map(|b| jobs.known(b));
        let node = fold_under_in(jobs, bucket_bits(depth), &buckets, 0, 0);
        jobs.evaluate();
        jobs.value(node)
    })
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn slice(&mut self, n: usize) -> Result<&'a [u8], PageError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(PageError::Malformed("overflow"))?;
        let s = self
            .bytes
            .get(self.at..end)
            .ok_or(PageError::Malformed("truncated"))?;
        self.at = end;
        Ok(s)
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], PageError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.slice(N)?);
        Ok(out)
    }

    /// One entry at the cursor.
    fn entry(&mut self) -> Result<(&'a KeyPath, ValueRef<'a>), PageError> {
        let key: &'a KeyPath = self
            .slice(ENTRY_KEY_BYTES)?
            .try_into()
            .map_err(|_| PageError::Malformed("truncated key"))?;
        let value = match self.take::<1>()? {
            [KIND_INLINE] => {
                let len = usize::from(u16::from_le_bytes(self.take()?));
                if len > MAX_INLINE_VALUE_BYTES {
                    return Err(PageError::Malformed("inline value too long"));
                }
                ValueRef::Inline(self.slice(len)?)
            }
            [KIND_EXTERNAL] => {
                let x = ExternalValue {
                    loc: u64::from_le_bytes(self.take()?),
                    len: u64::from_le_bytes(self.take()?),
                    hash: self.take()?,
                };
                // Values at most MAX_INLINE_VALUE_BYTES long are always stored inline.
                if x.len <= MAX_INLINE_VALUE_BYTES as u64 || x.len > MAX_VALUE_BYTES as u64 {
                    return Err(PageError::Malformed("external value length out of range"));
                }
                ValueRef::External(x)
            }
            _ => return Err(PageError::Malformed("unknown value kind")),
        };
        Ok((key, value))
    }
}

impl Page {
    /// Decode untrusted page bytes (at most one block; shorter input is zero-padded).
    pub fn decode(bytes: &[u8]) -> Result<Page, PageError> {
        // A whole block (what every read returns) is copied once, without zeroing it first.
        let block = match bytes.first_chunk::<BLOCK_BYTES>() {
            Some(whole) => PageBlock::copy_of(whole),
            None => {
                let mut block = PageBlock::zeroed();
                if let Some(dst) = block.get_mut(..bytes.len()) {
                    dst.copy_from_slice(bytes);
                }
                block
            }
        };
        Page::parse(block, false)
    }

    /// [`Page::decode`] of bytes whose checksum is `sum`, checked by the caller (a read
    /// compares every page with the checksum its pointer names): kept with the page, so that
    /// writing it again (the cleaner's moves) does not compute it again.
    pub fn decode_checked(bytes: &[u8], sum: u64) -> Result<Page, PageError> {
        let mut page = Page::decode(bytes)?;
        page.checksum = Some(sum);
        Ok(page)
    }

    /// [`Page::decode`], computing the checksum of the bytes and keeping it with the page: for
    /// a page read before anything names its checksum (the cleaner's reads), which compares it
    /// afterwards.
    pub fn decode_summed(bytes: &[u8]) -> Result<Page, PageError> {
        Page::summed(Page::decode(bytes)?)
    }

    /// [`Page::decode_summed`] of a whole block, copied into memory reserved beforehand
    /// ([`PageBlock::reserve`]): for a thread decoding pages that outlive it.
    pub fn decode_summed_into(
        bytes: &[u8; BLOCK_BYTES],
        blank: BlankBlock,
    ) -> Result<Page, PageError> {
        Page::summed(Page::parse(PageBlock::fill(blank, bytes), false)?)
    }

    /// `page` with the checksum of its bytes kept.
    fn summed(mut page: Page) -> Result<Page, PageError> {
        page.checksum = Some(crate::codec::checksum(&page.bytes[..]));
        Ok(page)
    }

    /// Validate a block as a page. Only a page built in memory (`in_memory`) may point at a
    /// value not written yet.
    fn parse(block: PageBlock, in_memory: bool) -> Result<Page, PageError> {
        let bytes = &block[..];
        let mut r = Cursor { bytes, at: 0 };
        if r.take::<4>()? != PAGE_MAGIC || r.take::<1>()? != [PAGE_VERSION] {
            return Err(PageError::BadHeader);
        }
        let [flags] = r.take::<1>()?;
        if flags & !FLAG_SYNCED_COMMIT != 0 {
            return Err(PageError::Malformed("unknown page flags"));
        }
        let prefix_len = u16::from_le_bytes(r.take()?);
        let prefix_bits: KeyPath = r.take()?;
        let prefix = Prefix::from_parts(prefix_bits, prefix_len)
            .ok_or(PageError::Malformed("invalid prefix"))?;
        let stamp = Stamp {
            seq: u64::from_le_bytes(r.take()?),
            synced: flags & FLAG_SYNCED_COMMIT != 0,
        };
        let count = usize::from(u16::from_le_bytes(r.take()?));
        let used = usize::from(u16::from_le_bytes(r.take()?));
        if used > PAGE_BODY_BYTES {
            return Err(PageError::Malformed("used bytes beyond the page"));
        }
        // The bucket nodes: authenticated by the page checksum, recomputed by `check`.
        r.slice(BUCKETS * 32)?;
        let body_end = PAGE_HEADER_BYTES + used;
        let mut offsets = Vec::with_capacity(count.min(MAX_PAGE_ENTRIES));
        let mut first: Option<&KeyPath> = None;
        let mut last: Option<&KeyPath> = None;
        let mut external = 0u16;
        let mut unwritten = false;
        for _ in 0..count {
            let start = r.at;
            let (key, value) = r.entry()?;
            if let Some(x) = value.external() {
                if !in_memory && x.loc == UNWRITTEN {
                    return Err(PageError::Malformed("value location never written"));
                }
                unwritten |= x.loc == UNWRITTEN;
                external += 1;
            }
            if r.at > body_end {
                return Err(PageError::Malformed("entries overrun the used bytes"));
            }
            if last.is_some_and(|l| l >= key) {
                return Err(PageError::Malformed("entries out of order"));
            }
            first.get_or_insert(key);
            last = Some(key);
            offsets.push(start as u16);
        }
        // The keys under a prefix are one run of the key order: with the entries in strictly
        // increasing order, the first and the last under the prefix put every one under it.
        if [first, last].into_iter().flatten().any(|k| !prefix.contains(k)) {
            return Err(PageError::Malformed("entry outside the page's prefix"));
        }
        if r.at != body_end {
            return Err(PageError::Malformed("used bytes disagree with the entries"));
        }
        // A page pointing at a value not written yet is rebuilt with its location before it is
        // written: its bytes now are never written, nor summed.
        let checksum = (in_memory && !unwritten).then(|| crate::codec::checksum(&block[..]));
        Ok(Page {
            bytes: block,
            prefix,
            stamp,
            offsets,
            external,
            checksum,
        })
    }

    /// The xxh3 checksum of the page's bytes (computed once, where a page built in memory was
    /// built).
    pub fn checksum(&self) -> u64 {
        let sum = self
            .checksum
            .unwrap_or_else(|| crate::codec::checksum(&self.bytes[..]));
        debug_assert_eq!(sum, crate::codec::checksum(&self.bytes[..]));
        sum
    }

    /// The region this page holds.
    pub fn prefix(&self) -> &Prefix {
        &self.prefix
    }

    /// The commit that wrote this page version.
    pub fn seq(&self) -> u64 {
        self.stamp.seq
    }

    /// Which commit wrote this page version, and how.
    pub fn stamp(&self) -> Stamp {
        self.stamp
    }

    /// The encoded page.
    pub fn bytes(&self) -> &[u8; BLOCK_BYTES] {
        &self.bytes
    }

    /// Ask the CPU to bring the page (its bytes and entry offsets) into its cache ahead of a
    /// walk or rewrite of it.
    pub fn prefetch(&self) {
        use crate::state::prefetch::prefetch_span;
        prefetch_span(self.bytes.as_ptr(), BLOCK_BYTES);
        prefetch_span(self.offsets.as_ptr().cast::<u8>(), std::mem::size_of_val(self.offsets.as_slice()));
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether the page holds no entry.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    fn entry_at(&self, offset: u16) -> EntryRef<'_> {
        let mut r = Cursor {
            bytes: &self.bytes[..],
            at: usize::from(offset),
        };
        // Every offset was validated when the page was decoded (or built, then decoded back):
        // an entry that fails here means memory was corrupted, and nothing read from this page
        // can be trusted.
        match r.entry() {
            Ok((key, value)) => EntryRef { key, value },
            Err(e) => panic!(
                "invariant broken: page entry at validated offset {offset} fails to decode: {e}"
            ),
        }
    }

    /// The key of the entry at `offset` (validated when the page was decoded), without
    /// decoding its value: what a search compares.
    fn key_at(&self, offset: u16) -> &KeyPath {
        let at = usize::from(offset);
        match self
            .bytes
            .get(at..at + ENTRY_KEY_BYTES)
            .and_then(|b| <&KeyPath>::try_from(b).ok())
        {
            Some(key) => key,
            None => panic!("invariant broken: page entry at validated offset {offset} is cut"),
        }
    }

    /// Entry `i` (in key order).
    pub fn entry(&self, i: usize) -> Option<EntryRef<'_>> {
        self.offsets.get(i).map(|o| self.entry_at(*o))
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = EntryRef<'_>> + '_ {
        self.offsets.iter().map(|o| self.entry_at(*o))
    }

    /// The entries as (key, value) pairs, for building new pages from this one.
    pub fn items(&self) -> Vec<(KeyPath, ValueRef<'_>)> {
        self.iter().map(|e| (*e.key, e.value)).collect()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &KeyPath) -> Option<ValueRef<'_>> {
        self.search(key)
            .ok()
            .and_then(|i| self.entry(i))
            .map(|e| e.value)
    }

    /// The index of `key` among the entries (`Ok`), or where it would go (`Err`), as a binary
    /// search would answer.
    ///
    /// Key paths are hashes, spread evenly below the page's prefix, so the key's own bits
    /// predict its index: the search starts there and widens in doubling steps to the nearest
    /// entries on either side, then bisects between them. Most lookups touch one or two cache
    /// lines of the page instead of one per bisection step; keys that are not spread evenly
    /// (paths chosen by a user) cost at most about twice the bisection's probes.
    pub fn search(&self, key: &KeyPath) -> Result<usize, usize> {
        let n = self.offsets.len();
        let at = |i: usize| Ordered(self.key_at(self.offsets[i]));
        let key = &Ordered(key);
        let bisect = |lo: usize, hi: usize| {
            self.offsets[lo..hi]
                .binary_search_by(|o| Ordered(self.key_at(*o)).cmp(key))
                .map(|i| i + lo)
                .map_err(|i| i + lo)
        };
        if n < 8 {
            return bisect(0, n);
        }
        let fraction = bits_from(key.0, self.prefix.depth());
        let guess = ((u128::from(fraction) * n as u128) >> 64) as usize;
        match at(guess).cmp(key) {
            std::cmp::Ordering::Equal => Ok(guess),
            std::cmp::Ordering::Less => {
                // The key lies in (guess, n): find an entry at or above it.
                let (mut lo, mut hi, mut step) = (guess + 1, n, 1usize);
                while let Some(p) = guess.checked_add(step).filter(|p| *p < n) {
                    if at(p) < *key {
                        lo = p + 1;
                        step *= 2;
                    } else {
                        hi = p + 1;
                        break;
                    }
                }
                bisect(lo, hi)
            }
            std::cmp::Ordering::Greater => {
                // The key lies in [0, guess): find an entry at or below it.
                let (mut lo, mut hi, mut step) = (0, guess, 1usize);
                while let Some(p) = guess.checked_sub(step) {
                    if at(p) > *key {
                        hi = p;
                        step *= 2;
                    } else {
                        lo = p;
                        break;
                    }
                }
                bisect(lo, hi)
            }
        }
    }

    /// Every entry as (key path, value hash).
    pub fn leaves(&self, hasher: Hasher) -> Vec<(KeyPath, ValueHash)> {
        self.iter()
            .map(|e| (*e.key, e.value.hash(hasher)))
            .collect()
    }

    /// The stored bucket nodes.
    pub fn buckets(&self) -> Buckets {
        let mut buckets = [TERMINATOR; BUCKETS];
        for (i, b) in buckets.iter_mut().enumerate() {
            let at = BUCKETS_AT + 32 * i;
            if let Some(src) = self.bytes.get(at..at + 32) {
                b.copy_from_slice(src);
            }
        }
        buckets
    }

    /// The page's node in the trie, from its stored bucket nodes.
    pub fn node(&self, hasher: Hasher) -> Node {
        fold_buckets(hasher, self.prefix.depth(), &self.buckets())
    }

    /// The bucket nodes recomputed from the entries (what `check` compares the stored ones
    /// with).
    pub fn computed_buckets(&self, hasher: Hasher) -> Buckets {
        compute_buckets(hasher, self.prefix.depth(), &self.leaves(hasher))
    }

    /// Append the multi-proof nodes of `keys` (sorted, all under this page's prefix) below the
    /// page's position.
    pub fn prove(&self, hasher: Hasher, keys: &[KeyPath], out: &mut Vec<ProofNode>) {
        self.prove_and_update(hasher, keys, &[], out);
    }

    /// Prove `keys` below the page's position (appending to `out`) and compute the page's node
    /// and bucket nodes after `changes` (new value hash, or `None` to delete), hashing only the
    /// touched buckets. Keys and changes are sorted, under the page's prefix, and every
    /// changed key is in `keys`.
    ///
    /// The walk reads the entries where they lie: only the touched buckets' entries are
    /// decoded (their values hashed for their leaves), nothing is listed.
    pub fn prove_and_update(
        &self,
        hasher: Hasher,
        keys: &[KeyPath],
        changes: &[(KeyPath, Option<ValueHash>)],
        out: &mut Vec<ProofNode>,
    ) -> (Node, Buckets) {
        with_jobs(hasher, |jobs| {
            let (node, buckets) = self.walk(jobs, keys, changes, out);
            jobs.evaluate();
            jobs.fill(out);
            (jobs.value(node), buckets.map(|b| jobs.value(b)))
        })
    }

    /// [`Page::prove_and_update`] with its hashes gathered into `jobs`, for a caller that
    /// computes those of many pages together: the proof's hashes are placeholders in `out`
    /// until `jobs` is evaluated and fills them, and the node and bucket nodes are `jobs`'s.
    pub fn walk(
        &self,
        jobs: &mut HashJobs,
        keys: &[KeyPath],
        changes: &[(KeyPath, Option<ValueHash>)],
        out: &mut Vec<ProofNode>,
    ) -> (NodeRef, [NodeRef; BUCKETS]) {
        let depth = self.prefix.depth();
        let mut walk = BucketWalk {
            page: self,
            depth,
            bits: bucket_bits(depth),
            buckets: self.buckets().map(|b| jobs.known(b)),
            jobs,
        };
        let node = walk.visit(0, 0, 0..self.len(), keys, changes, out);
        (node, walk.buckets)
    }

    /// The internal nodes that changing `changed` (sorted, under the page's prefix) hashes at
    /// the least, when the page's entries are the keys after the change (as
    /// [`sprig_core::trie::internal_nodes_to_update`], reading the keys where they lie).
    pub fn internal_nodes_to_update<'k>(
        &self,
        changed: impl IntoIterator<Item = &'k KeyPath>,
    ) -> u64 {
        sprig_core::trie::internal_nodes_to_update_in(
            self.prefix.depth(),
            self.len(),
            |i| self.offsets.get(i).map(|o| self.key_at(*o)),
            changed,
        )
    }

    /// The path proof of `key` below the page's position.
    pub fn path_proof_below(&self, hasher: Hasher, key: &KeyPath) -> PathProof {
        let depth = self.prefix.depth();
        let bits = bucket_bits(depth);
        let items = self.items();
        let mut here: &[(KeyPath, ValueRef<'_>)] = &items;
        // The siblings above the buckets, folded from the stored bucket nodes together.
        let mut siblings = with_jobs(hasher, |jobs| {
            let buckets = self.buckets().map(|b| jobs.known(b));
            let mut refs = Vec::new();
            let mut index = 0usize;
            for level in 0..bits {
                if here.len() <= 1 {
                    break;
                }
                let d = depth + level;
                let split = here.partition_point(|(k, _)| !bit_at(k, d));
                let right = bit_at(key, d);
                let sibling = 2 * index + usize::from(!right);
                refs.push(fold_under_in(jobs, bits, &buckets, level + 1, sibling));
                here = if right {
                    &here[split..]
                } else {
                    &here[..split]
                };
                index = 2 * index + usize::from(right);
            }
            jobs.evaluate();
            refs.into_iter().map(|r| jobs.value(r)).collect::<Vec<Node>>()
        });
        let level = siblings.len();
        let leaves: Vec<(KeyPath, ValueHash)> =
            here.iter().map(|(k, v)| (*k, v.hash(hasher))).collect();
        let below = path_proof_below(hasher, depth + level, &leaves, key);
        siblings.extend(below.siblings);
        PathProof {
            terminal: below.terminal,
            siblings,
        }
    }

    /// Build a page holding `entries` (sorted by key, distinct, all under `prefix`), hashing
    /// every entry for its bucket nodes.
    pub fn build(
        hasher: Hasher,
        prefix: Prefix,
        stamp: impl Into<Stamp>,
        entries: &[(KeyPath, ValueRef<'_>)],
    ) -> Result<Page, PageError> {
        let leaves: Vec<(KeyPath, ValueHash)> =
            entries.iter().map(|(k, v)| (*k, v.hash(hasher))).collect();
        let buckets = compute_buckets(hasher, prefix.depth(), &leaves);
        Page::build_with_buckets(prefix, stamp, entries, &buckets)
    }

    /// Build a page holding `entries` with bucket nodes already known to be theirs.
    pub fn build_with_buckets(
        prefix: Prefix,
        stamp: impl Into<Stamp>,
        entries: &[(KeyPath, ValueRef<'_>)],
        buckets: &Buckets,
    ) -> Result<Page, PageError> {
        let stamp: Stamp = stamp.into();
        let used = body_bytes(entries);
        if used > PAGE_BODY_BYTES {
            return Err(PageError::Overflow);
        }
        let count = u16::try_from(entries.len()).map_err(|_| PageError::Overflow)?;
        let used16 = u16::try_from(used).map_err(|_| PageError::Overflow)?;
        let mut block = PageBlock::zeroed();
        let mut w = Writer {
            buf: &mut block,
            at: 0,
        };
        w.put(&PAGE_MAGIC)?;
        let flags = if stamp.synced { FLAG_SYNCED_COMMIT } else { 0 };
        w.put(&[PAGE_VERSION])?;
        assert_eq!(w.at, FLAGS_AT, "page header layout");
        w.put(&[flags])?;
        w.put(&prefix.len_u16().to_le_bytes())?;
        w.put(prefix.bits())?;
        assert_eq!(w.at, SEQ_AT, "page header layout");
        w.put(&stamp.seq.to_le_bytes())?;
        assert_eq!(w.at, COUNT_AT, "page header layout");
        w.put(&count.to_le_bytes())?;
        assert_eq!(w.at, USED_AT, "page header layout");
        w.put(&used16.to_le_bytes())?;
        assert_eq!(w.at, BUCKETS_AT, "page header layout");
        for b in buckets {
            w.put(b)?;
        }
        let mut offsets = Vec::with_capacity(entries.len());
        let mut last: Option<&KeyPath> = None;
        for (key, value) in entries {
            if !prefix.contains(key) || last.is_some_and(|l| l >= key) {
                return Err(PageError::Malformed(
                    "entries out of order or outside the prefix",
                ));
            }
            last = Some(key);
            offsets.push(u16::try_from(w.at).map_err(|_| PageError::Overflow)?);
            w.put(key)?;
            match value {
                ValueRef::Inline(v) => {
                    let len = u16::try_from(v.len())
                        .ok()
                        .filter(|l| usize::from(*l) <= MAX_INLINE_VALUE_BYTES)
                        .ok_or(PageError::Malformed("inline value too long"))?;
                    w.put(&[KIND_INLINE])?;
                    w.put(&len.to_le_bytes())?;
                    w.put(v)?;
                }
                ValueRef::External(x) => {
                    w.put(&[KIND_EXTERNAL])?;
                    w.put(&x.loc.to_le_bytes())?;
                    w.put(&x.len.to_le_bytes())?;
                    w.put(&x.hash)?;
                }
            }
        }
        // Pair assertion: what was just written must decode to exactly what was meant.
        let page = Page::parse(block, true)?;
        if page.offsets != offsets || page.stamp != stamp || page.prefix != prefix {
            return Err(PageError::Malformed("a built page decodes differently"));
        }
        Ok(page)
    }

    /// This page with the inline values of some of its keys replaced by values of the same
    /// length, and with `stamp` and `buckets` (the bucket nodes of the new entries): the bytes
    /// [`Page::build_with_buckets`] writes for the same entries, made by patching a copy of
    /// the block instead of listing and encoding every entry again. `None` unless every change
    /// is such a replacement (a key of this page holding an inline value of the new value's
    /// length); `changes` are sorted by key.
    pub fn with_values_replaced(
        &self,
        stamp: impl Into<Stamp>,
        changes: &[(KeyPath, &[u8])],
        buckets: &Buckets,
    ) -> Option<Page> {
        let stamp: Stamp = stamp.into();
        // Where each new value goes, all checked before anything is copied.
        let mut at = Vec::with_capacity(changes.len());
        for (key, value) in changes {
            let offset = *self.offsets.get(self.search(key).ok()?)?;
            match self.entry_at(offset).value {
                ValueRef::Inline(old) if old.len() == value.len() => {
                    at.push(usize::from(offset) + INLINE_OVERHEAD_BYTES);
                }
                _ => return None,
            }
        }
        let mut block = self.bytes.clone();
        let flags = if stamp.synced { FLAG_SYNCED_COMMIT } else { 0 };
        *block.get_mut(FLAGS_AT)? = flags;
        block.get_mut(SEQ_AT..COUNT_AT)?.copy_from_slice(&stamp.seq.to_le_bytes());
        for (slot, node) in block
            .get_mut(BUCKETS_AT..PAGE_HEADER_BYTES)?
            .chunks_exact_mut(32)
            .zip(buckets)
        {
            slot.copy_from_slice(node);
        }
        for ((_, value), start) in changes.iter().zip(at) {
            block.get_mut(start..start + value.len())?.copy_from_slice(value);
        }
        let checksum = Some(crate::codec::checksum(&block[..]));
        let page = Page {
            bytes: block,
            prefix: self.prefix,
            stamp,
            offsets: self.offsets.clone(),
            external: self.external,
            checksum,
        };
        // Debug builds (every test): the patched block decodes to the same page.
        debug_assert!(Page::parse(page.bytes.clone(), true).is_ok_and(|p| p == page
            && p.offsets == page.offsets
            && p.stamp == page.stamp));
        Some(page)
    }

    /// A copy of this page with every value-log pointer passed through `relocate`, or `None`
    /// if no pointer changes.
    pub fn with_relocated_values(
        &self,
        mut relocate: impl FnMut(&KeyPath, &ExternalValue) -> Option<u64>,
    ) -> Result<Option<Page>, PageError> {
        if self.external == 0 {
            return Ok(None);
        }
        let mut changed = false;
        let items: Vec<(KeyPath, ValueRef<'_>)> = self
            .iter()
            .map(|e| match e.value {
                ValueRef::External(mut x) => {
                    if let Some(l) = relocate(e.key, &x) {
                        changed |= l != x.loc;
                        x.loc = l;
                    }
                    (*e.key, ValueRef::External(x))
                }
                v => (*e.key, v),
            })
            .collect();
        if !changed {
            return Ok(None);
        }
        Page::build_with_buckets(self.prefix, self.stamp, &items, &self.buckets()).map(Some)
    }
}

/// The 64 bits of `key` from bit `from` on (zeros past the key's end): where the key lies,
/// as a fraction, among all keys below a prefix of `from` bits.
fn bits_from(key: &KeyPath, from: usize) -> u64 {
    let mut wide = [0u8; 16];
    for (i, b) in wide.iter_mut().enumerate() {
        *b = key.get(from / 8 + i).copied().unwrap_or(0);
    }
    ((u128::from_be_bytes(wide) << (from % 8)) >> 64) as u64
}

struct Writer<'a> {
    buf: &'a mut [u8; BLOCK_BYTES],
    at: usize,
}

impl Writer<'_> {
    /// Append `bytes`; callers check sizes first, so an overrun is an error, never dropped.
    fn put(&mut self, bytes: &[u8]) -> Result<(), PageError> {
        let end = self
            .at
            .checked_add(bytes.len())
            .ok_or(PageError::Overflow)?;
        self.buf
            .get_mut(self.at..end)
            .ok_or(PageError::Overflow)?
            .copy_from_slice(bytes);
        self.at = end;
        Ok(())
    }
}

/// The walk of [`Page::prove_and_update`] down the bucket tree.
struct BucketWalk<'p> {
    page: &'p Page,
    depth: usize,
    bits: usize,
    /// The stored bucket nodes, then the new ones of the buckets visited.
    buckets: [NodeRef; BUCKETS],
    /// The walk's hashes, computed together once it is done.
    jobs: &'p mut HashJobs,
}

impl BucketWalk<'_> {
    /// Visit position `index` at `level` levels below the page, holding the page's entries
    /// `entries` (indices in key order).
    fn visit(
        &mut self,
        level: usize,
        index: usize,
        entries: Range<usize>,
        keys: &[KeyPath],
        changes: &[(KeyPath, Option<ValueHash>)],
        out: &mut Vec<ProofNode>,
    ) -> NodeRef {
        let h = self.jobs.hasher();
        let d = self.depth + level;
        if keys.is_empty() {
            // No key enters: the stored node stands, as proof sibling and as new node. Its
            // buckets are unchanged (only visited ones are rewritten), so it is their fold,
            // hashed here: a walk hashes only the siblings of its paths, not the whole tree.
            let node = fold_under_in(self.jobs, self.bits, &self.buckets, level, index);
            if node == NodeRef::TERMINATOR {
                out.push(ProofNode::Terminator);
            } else {
                self.jobs.push_opaque(out, node);
            }
            return node;
        }
        if level == self.bits || entries.len() <= 1 {
            let leaves: Vec<(KeyPath, ValueHash)> = self.page.offsets[entries]
                .iter()
                .map(|o| {
                    let e = self.page.entry_at(*o);
                    (*e.key, e.value.hash(h))
                })
                .collect();
            let node = prove_and_update_in(self.jobs, d, &leaves, keys, changes, out);
            if level == self.bits {
                self.buckets[index] = node;
            } else if !changes.is_empty() {
                self.rebucket(level, index, &leaves, changes);
            }
            return node;
        }
        out.push(ProofNode::Internal);
        let e = entries.start
            + self.page.offsets[entries.clone()]
                .partition_point(|o| !bit_at(self.page.key_at(*o), d));
        let k = keys.partition_point(|k| !bit_at(k, d));
        let c = changes.partition_point(|(k, _)| !bit_at(k, d));
        let l = self.visit(
            level + 1,
            2 * index,
            entries.start..e,
            &keys[..k],
            &changes[..c],
            out,
        );
        let r = self.visit(
            level + 1,
            2 * index + 1,
            e..entries.end,
            &keys[k..],
            &changes[c..],
            out,
        );
        self.jobs.parent(l, r)
    }

    /// Recompute the buckets under position `index` at `level` from its (few) old leaves with
    /// `changes` merged in.
    fn rebucket(
        &mut self,
        level: usize,
        index: usize,
        leaves: &[(KeyPath, ValueHash)],
        changes: &[(KeyPath, Option<ValueHash>)],
    ) {
        let merged = apply_changes(leaves, changes);
        let span = 1usize << (self.bits - level);
        for b in index * span..(index + 1) * span {
            let here: Vec<(KeyPath, ValueHash)> = merged
                .iter()
                .filter(|(k, _)| bucket_of(k, self.depth, self.bits) == b)
                .copied()
                .collect();
            let node = subtrie_root_in(self.jobs, self.depth + self.bits, &here);
            if let Some(slot) = self.buckets.get_mut(b) {
                *slot = node;
            }
        }
    }
}

/// A region of the key space after a change: one page's entries or, when they do not fit,
/// two halves split by the next bit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout<'a> {
    /// One page holding these entries (possibly none).
    Page(Prefix, Vec<(KeyPath, ValueRef<'a>)>),
    /// Two sub-regions.
    Split(Box<Layout<'a>>, Box<Layout<'a>>),
}

impl<'a> Layout<'a> {
    /// Lay out `entries` (sorted, distinct, all under `prefix`) into pages, splitting by the
    /// next bit while a region does not fit into `fill_bytes` (at most a page body).
    ///
    /// Costs O(entries) memory and O(entries + pages × depth) time whatever the keys: sizes
    /// come from prefix sums, sub-regions are slices until they become pages, and a run of
    /// levels where every key goes the same way (keys sharing a long prefix) is crossed in
    /// one step.
    pub fn build(
        prefix: Prefix,
        entries: Vec<(KeyPath, ValueRef<'a>)>,
        fill_bytes: usize,
    ) -> Layout<'a> {
        let limit = fill_bytes.min(PAGE_BODY_BYTES);
        let mut sums = Vec::with_capacity(entries.len() + 1);
        let mut total = 0usize;
        sums.push(0);
        for (_, v) in &entries {
            total += v.entry_bytes();
            sums.push(total);
        }
        if total <= limit || entries.len() <= 1 || prefix.is_full() {
            return Layout::Page(prefix, entries);
        }
        Layout::build_range(prefix, &entries, &sums, limit)
    }

    /// The layout of `entries`, whose sizes are the differences of `sums` (one more item).
    fn build_range(
        prefix: Prefix,
        entries: &[(KeyPath, ValueRef<'a>)],
        sums: &[usize],
        limit: usize,
    ) -> Layout<'a> {
        let bytes = sums.last().copied().unwrap_or(0) - sums.first().copied().unwrap_or(0);
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Layout::Page(prefix, Vec::new());
        };
        if bytes <= limit || entries.len() <= 1 || prefix.is_full() {
            return Layout::Page(prefix, entries.to_vec());
        }
        // Every key agrees on the bits down to where the first and the last differ: the
        // levels in between have all entries on one side and nothing on the other.
        let depth = prefix.depth();
        let split_depth = shared_prefix_bits(&first.0, &last.0).max(depth);
        assert!(
            split_depth < KEY_BITS,
            "distinct sorted keys differ before the last bit"
        );
        let at = Prefix::of_key(&first.0, split_depth);
        let split = entries.partition_point(|(k, _)| !bit_at(k, split_depth));
        let (left, right) = entries.split_at(split);
        let (left_sums, right_sums) = (&sums[..=split], &sums[split..]);
        let mut layout = Layout::Split(
            Box::new(Layout::build_range(at.child(false), left, left_sums, limit)),
            Box::new(Layout::build_range(
                at.child(true),
                right,
                right_sums,
                limit,
            )),
        );
        // Wrap the split in the chain of one-sided levels above it, bottom up.
        for d in (depth..split_depth).rev() {
            let here = Prefix::of_key(&first.0, d);
            let empty = Box::new(Layout::Page(here.child(!bit_at(&first.0, d)), Vec::new()));
            let full = Box::new(layout);
            layout = if bit_at(&first.0, d) {
                Layout::Split(empty, full)
            } else {
                Layout::Split(full, empty)
            };
        }
        layout
    }

    /// The number of pages in the layout.
    pub fn page_count(&self) -> usize {
        match self {
            Layout::Page(..) => 1,
            Layout::Split(l, r) => l.page_count() + r.page_count(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_core::proof::prove_and_update;

    fn key(i: u32) -> KeyPath {
        Hasher::Blake3.hash_value(&i.to_le_bytes())
    }

    fn sorted_values(n: u32, value_len: usize) -> Vec<(KeyPath, Vec<u8>)> {
        let mut e: Vec<(KeyPath, Vec<u8>)> =
            (0..n).map(|i| (key(i), vec![i as u8; value_len])).collect();
        e.sort_by_key(|x| x.0);
        e
    }

    fn refs(values: &[(KeyPath, Vec<u8>)]) -> Vec<(KeyPath, ValueRef<'_>)> {
        values
            .iter()
            .map(|(k, v)| (*k, ValueRef::Inline(v)))
            .collect()
    }

    #[test]
    fn build_decode_round_trip() {
        let values = sorted_values(60, 8);
        let mut items = refs(&values);
        items[3].1 = ValueRef::External(ExternalValue {
            loc: 77,
            len: 1 << 20,
            hash: [9; 32],
        });
        items[5].1 = ValueRef::Inline(&[]);
        let page = Page::build(Hasher::Blake3, Prefix::root(), 42, &items).unwrap();
        let back = Page::decode(page.bytes()).unwrap();
        assert_eq!(back, page);
        assert_eq!(back.items(), items);
        assert_eq!(back.seq(), 42);
        assert_eq!(back.get(&items[3].0), Some(items[3].1));
        assert_eq!(back.get(&[0xff; 32]), None);
    }

    #[test]
    fn relocation_rewrites_only_pages_with_external_values() {
        let values = sorted_values(40, 8);
        let inline = Page::build(Hasher::Blake3, Prefix::root(), 7, &refs(&values)).unwrap();
        // No value-log pointer: nothing to relocate, and the callback is never asked.
        let mut asked = 0;
        let none = inline
            .with_relocated_values(|_, _| {
                asked += 1;
                Some(1)
            })
            .unwrap();
        assert!(none.is_none());
        assert_eq!(asked, 0);

        let mut items = refs(&values);
        for i in [4, 9] {
            items[i].1 = ValueRef::External(ExternalValue {
                loc: 100 + i as u64,
                len: 5000,
                hash: [i as u8; 32],
            });
        }
        let page = Page::build(Hasher::Blake3, Prefix::root(), 7, &items).unwrap();
        // Asked for both pointers; only one moves.
        let mut seen = Vec::new();
        let moved = page
            .with_relocated_values(|k, x| {
                seen.push((*k, x.loc));
                (x.loc == 109).then_some(900)
            })
            .unwrap()
            .expect("a pointer moved");
        assert_eq!(seen, vec![(items[4].0, 104), (items[9].0, 109)]);
        let at = |p: &Page, i: usize| p.get(&items[i].0).and_then(|v| v.external()).map(|x| x.loc);
        assert_eq!((at(&moved, 4), at(&moved, 9)), (Some(104), Some(900)));
        assert_eq!(moved.buckets(), page.buckets());
        // Pointers that stay where they are: no new page.
        assert!(page.with_relocated_values(|_, x| Some(x.loc)).unwrap().is_none());
    }

    #[test]
    fn node_equals_the_model_root_for_the_same_entries() {
        let h = Hasher::Sha256;
        let values = sorted_values(80, 8);
        let page = Page::build(h, Prefix::root(), 1, &refs(&values)).unwrap();
        let mut model = sprig_core::ReferenceModel::new(h);
        for (k, v) in &values {
            model.insert(*k, v.clone());
        }
        assert_eq!(page.node(h), model.root());
        assert_eq!(page.buckets(), page.computed_buckets(h));
    }

    /// A page built or patched in memory carries the checksum of its bytes from where it was
    /// built (the committing thread only reads it); a decoded page carries the one its read
    /// checked, or computed at decoding, and none when decoded plainly.
    #[test]
    fn built_pages_carry_their_checksum() {
        let h = Hasher::Blake3;
        let values = sorted_values(40, 8);
        let page = Page::build(h, Prefix::root(), 1, &refs(&values)).unwrap();
        let sum = crate::codec::checksum(page.bytes());
        assert_eq!((page.checksum, page.checksum()), (Some(sum), sum));
        let changes: Vec<(KeyPath, &[u8])> = vec![(values[3].0, &[9u8; 8][..])];
        let patched = page.with_values_replaced(2, &changes, &page.buckets()).unwrap();
        let patched_sum = crate::codec::checksum(patched.bytes());
        assert_ne!(patched_sum, sum);
        assert_eq!(patched.checksum, Some(patched_sum));
        let decoded = Page::decode(page.bytes()).unwrap();
        assert_eq!((decoded.checksum, decoded.checksum()), (None, sum));
        let checked = Page::decode_checked(page.bytes(), sum).unwrap();
        assert_eq!((checked.checksum, checked.checksum()), (Some(sum), sum));
        let summed = Page::decode_summed(page.bytes()).unwrap();
        assert_eq!((summed.checksum, summed.checksum()), (Some(sum), sum));
        assert!(Page::decode_summed(&[0u8; BLOCK_BYTES]).is_err(), "not a page");
        // Into reserved memory: the same page, summed; refused bytes refused as well.
        let mut blanks = PageBlock::reserve(2);
        let into = Page::decode_summed_into(page.bytes(), blanks.pop().unwrap()).unwrap();
        assert!(into == page && into.offsets == page.offsets && into.stamp == page.stamp);
        assert_eq!((into.checksum, into.checksum()), (Some(sum), sum));
        assert!(Page::decode_summed_into(&[0u8; BLOCK_BYTES], blanks.pop().unwrap()).is_err());

        // A page pointing at a value not written yet is not summed: it is rebuilt with the
        // value's location before it is written, and that page is.
        let mut items = refs(&values);
        items[5].1 = ValueRef::External(ExternalValue {
            loc: UNWRITTEN,
            len: 5000,
            hash: [4; 32],
        });
        let pending = Page::build(h, Prefix::root(), 3, &items).unwrap();
        assert_eq!(pending.checksum, None);
        let placed = pending
            .with_relocated_values(|_, _| Some(77))
            .unwrap()
            .unwrap();
        let placed_sum = crate::codec::checksum(placed.bytes());
        assert_eq!((placed.checksum, placed.checksum()), (Some(placed_sum), placed_sum));
    }

    #[test]
    fn bits_from_reads_the_bits_after_a_prefix() {
        let mut key = [0u8; 32];
        key[0] = 0b1010_0000;
        key[1] = 0xff;
        assert_eq!(bits_from(&key, 0), 0xa0ff_0000_0000_0000);
        assert_eq!(bits_from(&key, 3), 0x07f8_0000_0000_0000);
        assert_eq!(bits_from(&key, 8), 0xff00_0000_0000_0000);
        key[31] = 0x81;
        assert_eq!(bits_from(&key, 248), 0x8100_0000_0000_0000);
        assert_eq!(bits_from(&key, 255), 0x8000_0000_0000_0000);
        assert_eq!(bits_from(&key, 256), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]
        /// The predicted-position search answers exactly what a binary search answers, for
        /// evenly spread keys and for keys bunched together (paths a user chose), present or
        /// not, at any page depth.
        #[test]
        fn search_equals_binary_search(
            seeds in proptest::collection::btree_set(0u32..100_000, 0..110),
            probes in proptest::collection::vec(0u32..100_000, 1..40),
            bunched in proptest::bool::ANY,
            depth in proptest::prop_oneof![0usize..12, 250usize..256],
        ) {
            let prefix_bits = [0xc3u8; 32];
            let prefix = Prefix::of_key(&prefix_bits, depth);
            let key = |i: u32| {
                let mut k = if bunched {
                    // Keys differing only in their last bytes: every one predicts index 0.
                    let mut k = [0u8; 32];
                    k[28..].copy_from_slice(&i.to_be_bytes());
                    k
                } else {
                    Hasher::Blake3.hash_value(&i.to_le_bytes())
                };
                for b in 0..depth { sprig_core::trie::set_bit(&mut k, b, prefix.bit(b)); }
                k
            };
            let mut keys: Vec<KeyPath> = seeds.iter().map(|i| key(*i)).collect();
            keys.sort_unstable();
            keys.dedup();
            let values: Vec<(KeyPath, Vec<u8>)> = keys.iter().map(|k| (*k, vec![1u8])).collect();
            let Ok(page) = Page::build(Hasher::Blake3, prefix, 1, &refs(&values)) else {
                return Ok(()); // more than a page holds at this depth
            };
            for k in keys.iter().copied().chain(probes.iter().map(|i| key(*i))).chain([[0u8; 32], [0xff; 32]]) {
                proptest::prop_assert_eq!(page.search(&k), keys.binary_search(&k));
            }
        }

        /// The word-at-a-time order is the byte order, whichever byte two keys first differ in.
        #[test]
        fn ordered_keys_compare_as_bytes(a in proptest::prelude::any::<[u8; 32]>(), b in proptest::prelude::any::<[u8; 32]>(), same in 0usize..33) {
            let mut b = b;
            b[..same].copy_from_slice(&a[..same]);
            proptest::prop_assert_eq!(Ordered(&a).cmp(&Ordered(&b)), a.cmp(&b));
            proptest::prop_assert_eq!(Ordered(&b).cmp(&Ordered(&a)), b.cmp(&a));
            proptest::prop_assert_eq!(Ordered(&a).cmp(&Ordered(&a)), std::cmp::Ordering::Equal);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]
        /// Patching same-length values gives the very bytes a rebuild of the same entries gives
        /// (stamp, bucket nodes and values), and refuses every other change: a key not in the
        /// page, another length, a value-log pointer.
        #[test]
        fn patched_pages_equal_rebuilt_ones(
            lens in proptest::collection::btree_map(0u16..400, 0usize..40, 1..60),
            replaced in proptest::collection::btree_map(0u16..400, 0u8..255, 0..10),
            synced in proptest::bool::ANY,
            seq in 0u64..1000,
            external in proptest::option::of(0usize..60),
            refuse in 0u8..4,
        ) {
            let h = Hasher::Blake3;
            let key = |i: u16| h.hash_value(&i.to_le_bytes());
            let mut values: Vec<(KeyPath, Vec<u8>)> = lens.iter().map(|(i, n)| (key(*i), vec![*i as u8; *n])).collect();
            values.sort_by_key(|(k, _)| *k);
            let mut items = refs(&values);
            let ext = external.map(|e| e % items.len());
            if let Some(e) = ext {
                items[e].1 = ValueRef::External(ExternalValue { loc: 9, len: 5000, hash: [3; 32] });
            }
            let page = Page::build(h, Prefix::root(), 7, &items).unwrap();
            // Replacements of present inline values, same length, sorted by key.
            let mut new_values: std::collections::BTreeMap<KeyPath, Vec<u8>> = std::collections::BTreeMap::new();
            for (i, b) in &replaced {
                if let Some(n) = lens.get(i) {
                    new_values.insert(key(*i), vec![*b; *n]);
                }
            }
            let stamp = Stamp { seq, synced };
            let mut changes: Vec<(KeyPath, &[u8])> = new_values.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            changes.retain(|(k, _)| ext.is_none_or(|e| items[e].0 != *k));
            let new_items: Vec<(KeyPath, ValueRef<'_>)> = items.iter().map(|(k, v)| match new_values.get(k) {
                Some(nv) if changes.iter().any(|(c, _)| c == k) => (*k, ValueRef::Inline(nv)),
                _ => (*k, *v),
            }).collect();
            let leaves: Vec<(KeyPath, ValueHash)> = new_items.iter().map(|(k, v)| (*k, v.hash(h))).collect();
            let buckets = compute_buckets(h, 0, &leaves);
            let patched = page.with_values_replaced(stamp, &changes, &buckets).unwrap();
            let rebuilt = Page::build_with_buckets(Prefix::root(), stamp, &new_items, &buckets).unwrap();
            proptest::prop_assert_eq!(&patched.bytes()[..], &rebuilt.bytes()[..]);
            proptest::prop_assert_eq!(patched.items(), rebuilt.items());
            proptest::prop_assert_eq!(patched.stamp(), stamp);
            proptest::prop_assert_eq!(patched.node(h), rebuilt.node(h));
            // Changes that are not same-length replacements of inline values.
            let (k0, v0) = (values[0].0, values[0].1.clone());
            let longer = [v0.clone(), vec![1]].concat();
            let absent = key(999);
            let bad: Vec<(KeyPath, &[u8])> = match refuse {
                0 => vec![(k0, longer.as_slice())],
                1 => vec![(absent, v0.as_slice())],
                // 9 bytes: what the pointer's first bytes (location 9) would read as a length.
                2 => match ext { Some(e) => vec![(items[e].0, &[0u8; 9][..])], None => vec![(absent, &[][..])] },
                _ => vec![(k0, &v0[..v0.len().saturating_sub(1)])],
            };
            let same_len = refuse == 3 && v0.is_empty();
            if !same_len {
                proptest::prop_assert!(page.with_values_replaced(stamp, &bad, &buckets).is_none());
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]
        /// Bucketed proofs and updates equal the plain ones over all entries, at any depth.
        #[test]
        fn bucketed_walk_equals_the_plain_one(
            present in proptest::collection::btree_set(0u16..300, 0..90),
            touched in proptest::collection::btree_map(0u16..300, proptest::option::of(0u8..4), 0..12),
            reads in proptest::collection::btree_set(0u16..300, 0..6),
            depth in proptest::prop_oneof![0usize..8, 250usize..256],
        ) {
            let h = Hasher::Blake3;
            let prefix_bits = [0x5au8; 32];
            let key = |i: u16| {
                let mut k = h.hash_value(&i.to_le_bytes());
                // Put every key under the page's prefix.
                let p = Prefix::of_key(&prefix_bits, depth);
                for b in 0..depth { sprig_core::trie::set_bit(&mut k, b, p.bit(b)); }
                k
            };
            let prefix = Prefix::of_key(&prefix_bits, depth);
            let mut model: std::collections::BTreeMap<KeyPath, Vec<u8>> = present.iter().map(|i| (key(*i), vec![*i as u8])).collect();
            let values: Vec<(KeyPath, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
            let page = Page::build(h, prefix, 1, &refs(&values)).unwrap();
            let mut keys: Vec<KeyPath> = touched.keys().chain(reads.iter()).map(|i| key(*i)).collect();
            keys.sort_unstable();
            keys.dedup();
            // Near the bottom of the trie few bits are free and indices can collide on one
            // key: the last change to a key wins, for the walk and for the model alike.
            let by_key: std::collections::BTreeMap<KeyPath, Option<u8>> = touched.iter().map(|(i, v)| (key(*i), *v)).collect();
            let changes: Vec<(KeyPath, Option<ValueHash>)> = by_key.iter().map(|(k, v)| (*k, v.map(|b| h.hash_value(&[b])))).collect();

            let mut bucketed = Vec::new();
            let (node, buckets) = page.prove_and_update(h, &keys, &changes, &mut bucketed);
            let mut plain = Vec::new();
            let plain_node = prove_and_update(h, depth, &page.leaves(h), &keys, &changes, &mut plain);
            proptest::prop_assert_eq!(&bucketed, &plain);
            proptest::prop_assert_eq!(node, plain_node);
            for (k, v) in &by_key {
                match v { Some(b) => { model.insert(*k, vec![*b]); } None => { model.remove(k); } }
            }
            let leaves: Vec<(KeyPath, ValueHash)> = model.iter().map(|(k, v)| (*k, h.hash_value(v))).collect();
            proptest::prop_assert_eq!(buckets, compute_buckets(h, depth, &leaves));
            proptest::prop_assert_eq!(fold_buckets(h, depth, &buckets), node);
            for k in &keys {
                proptest::prop_assert_eq!(page.path_proof_below(h, k), path_proof_below(h, depth, &page.leaves(h), k));
            }
        }
    }

    #[test]
    fn corrupt_pages_are_rejected_without_panic() {
        let values = sorted_values(40, 20);
        let page = Page::build(Hasher::Blake3, Prefix::root(), 1, &refs(&values)).unwrap();
        let used = PAGE_HEADER_BYTES + body_bytes(&refs(&values));
        for byte in 0..used + 8 {
            for bit in 0..8 {
                let mut b = crate::io::Block(*page.bytes());
                b.0[byte] ^= 1 << bit;
                // Either rejected, or still a valid page (e.g. a flipped value byte): never a
                // panic. The directory's checksum catches the rest.
                if let Ok(p) = Page::decode(&b.0) {
                    let _ = p.iter().count();
                }
            }
        }
        assert!(Page::decode(&[0u8; 10]).is_err());
        assert!(Page::decode(&[0u8; BLOCK_BYTES]).is_err());
    }

    /// A page whose first, last, only or a middle entry lies outside its prefix is refused,
    /// whatever the others hold: decoding checks the order of every entry and the prefix at
    /// both ends, which together put every entry under it.
    #[test]
    fn entries_outside_the_prefix_are_refused() {
        // The prefix `10`: keys from 0x80.. up to (not including) 0xc0...
        let prefix = Prefix::of_key(&[0x80; 32], 2);
        let mut values: Vec<(KeyPath, Vec<u8>)> = (0..12u8)
            .map(|i| {
                let mut k = key(u32::from(i));
                k[0] = 0x80 | (k[0] & 0x3f);
                (k, vec![i; 20])
            })
            .collect();
        values.sort_by_key(|x| x.0);
        values.dedup_by_key(|x| x.0);
        let page = Page::build(Hasher::Blake3, prefix, 1, &refs(&values)).unwrap();
        assert!(Page::decode(page.bytes()).is_ok());
        let outside = PageError::Malformed("entry outside the page's prefix");
        let with_key = |i: usize, first_byte: u8| {
            let mut b = crate::io::Block(*page.bytes());
            let at = usize::from(page.offsets[i]);
            b.0[at] = first_byte;
            Page::decode(&b.0)
        };
        let last = page.len() - 1;
        // Below the prefix at the start, above it at the end: still in key order.
        assert_eq!(with_key(0, 0x7f).err(), Some(outside.clone()));
        assert_eq!(with_key(last, 0xc0).err(), Some(outside.clone()));
        // In the middle a key outside the prefix is out of order, on either side.
        for byte in [0x00, 0x7f, 0xc0, 0xff] {
            assert!(with_key(last / 2, byte).is_err(), "middle key {byte:#x} accepted");
        }
        // A page of one entry.
        let one = Page::build(Hasher::Blake3, prefix, 1, &refs(&values[..1])).unwrap();
        let mut b = crate::io::Block(*one.bytes());
        b.0[usize::from(one.offsets[0])] = 0x40;
        assert_eq!(Page::decode(&b.0).err(), Some(outside));
    }

    #[test]
    fn building_refuses_overflow_and_disorder() {
        let values = sorted_values(200, 60);
        assert_eq!(
            Page::build(Hasher::Blake3, Prefix::root(), 1, &refs(&values)),
            Err(PageError::Overflow)
        );
        let mut few = refs(&values[..3]);
        few.swap(0, 1);
        assert!(Page::build(Hasher::Blake3, Prefix::root(), 1, &few).is_err());
    }

    /// The plain definition of a layout: split by the next bit until every region fits.
    fn naive_layout<'a>(
        prefix: Prefix,
        entries: Vec<(KeyPath, ValueRef<'a>)>,
        fill: usize,
    ) -> Layout<'a> {
        if body_bytes(&entries) <= fill || entries.len() <= 1 || prefix.is_full() {
            return Layout::Page(prefix, entries);
        }
        let split = entries.partition_point(|(k, _)| !bit_at(k, prefix.depth()));
        let mut left = entries;
        let right = left.split_off(split);
        Layout::Split(
            Box::new(naive_layout(prefix.child(false), left, fill)),
            Box::new(naive_layout(prefix.child(true), right, fill)),
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]
        /// The fast layout (prefix sums, one-sided levels crossed in one step) is exactly the
        /// plain one, for keys spread out and for keys sharing long prefixes of 0s or 1s.
        #[test]
        fn fast_layout_equals_the_plain_one(
            n in 0u32..400,
            shared in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..250],
            ones in proptest::bool::ANY,
            value_len in 0usize..200,
            depth in 0usize..3,
        ) {
            let mut values: Vec<(KeyPath, Vec<u8>)> = (0..n)
                .map(|i| {
                    let mut k = key(i);
                    for b in 0..shared { sprig_core::trie::set_bit(&mut k, b, ones); }
                    (k, vec![i as u8; value_len])
                })
                .collect();
            values.sort_by_key(|x| x.0);
            values.dedup_by_key(|x| x.0);
            let prefix = match values.first() {
                Some((k, _)) => Prefix::of_key(k, depth.min(shared)),
                None => Prefix::root(),
            };
            let fast = Layout::build(prefix, refs(&values), PAGE_BODY_BYTES);
            let plain = naive_layout(prefix, refs(&values), PAGE_BODY_BYTES);
            proptest::prop_assert_eq!(fast, plain);
        }
    }

    #[test]
    fn layout_splits_until_every_page_fits() {
        let values = sorted_values(400, 60);
        let layout = Layout::build(Prefix::root(), refs(&values), PAGE_BODY_BYTES);
        assert!(layout.page_count() > 1);
        fn collect<'a>(l: &Layout<'a>, out: &mut Vec<(KeyPath, ValueRef<'a>)>) {
            match l {
                Layout::Page(p, e) => {
                    assert!(fits(e));
                    assert!(e.iter().all(|(k, _)| p.contains(k)));
                    out.extend_from_slice(e);
                }
                Layout::Split(a, b) => {
                    collect(a, out);
                    collect(b, out);
                }
            }
        }
        let mut all = Vec::new();
        collect(&layout, &mut all);
        assert_eq!(all, refs(&values));
    }
}
