//! Leaf pages: the 4 KiB unit of storage. A page holds every entry whose key path starts with
//! its prefix, sorted by key path, each with its value inline or a pointer to the value log
//! plus the value's hash. The page's sub-trie is a pure function of its entries, so the page
//! carries everything needed to recompute its node in the trie and to prove any key below it.
//!
//! This module owns the byte layout (see `docs/DESIGN.md`), the decoding of untrusted page
//! bytes (every violation is a [`PageError`], never a panic), page hashing and proofs, and the
//! split of an overfull set of entries into a subtree of pages. It never does I/O.

use crate::io::{Block, BLOCK_BYTES};
use crate::prefix::Prefix;
use sprig_core::proof::{prove_subtrie, ProofNode};
use sprig_core::trie::{subtrie_root, KeyPath, Node, ValueHash};
use sprig_core::Hasher;

/// Magic bytes at the start of every page.
pub const PAGE_MAGIC: [u8; 4] = *b"SPPG";
/// The page layout version.
pub const PAGE_VERSION: u8 = 1;
/// Bytes before the first entry.
pub const PAGE_HEADER_BYTES: usize = 52;
/// Bytes available to entries.
pub const PAGE_BODY_BYTES: usize = BLOCK_BYTES - PAGE_HEADER_BYTES;
/// The largest value stored inside a page; larger values go to the value log.
pub const MAX_INLINE_VALUE_BYTES: usize = 1024;

const KIND_INLINE: u8 = 0;
const KIND_EXTERNAL: u8 = 1;
const ENTRY_KEY_BYTES: usize = 32;
const INLINE_OVERHEAD_BYTES: usize = ENTRY_KEY_BYTES + 1 + 2;
const EXTERNAL_ENTRY_BYTES: usize = ENTRY_KEY_BYTES + 1 + 8 + 8 + 32;

/// Where a value lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Stored in the page.
    Inline(Vec<u8>),
    /// Stored in the value log.
    External(ExternalValue),
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

impl Value {
    /// The bytes this value takes in a page, key included.
    pub fn entry_bytes(&self) -> usize {
        match self {
            Value::Inline(v) => INLINE_OVERHEAD_BYTES + v.len(),
            Value::External(_) => EXTERNAL_ENTRY_BYTES,
        }
    }

    /// `H(value)`.
    pub fn hash(&self, hasher: Hasher) -> ValueHash {
        match self {
            Value::Inline(v) => hasher.hash_value(v),
            Value::External(e) => e.hash,
        }
    }
}

/// One key and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key path.
    pub key: KeyPath,
    /// The value or its pointer.
    pub value: Value,
}

/// Why page bytes were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// The page does not start with the page magic or has an unknown version.
    #[error("not a page (bad magic or version)")]
    BadHeader,
    /// The page belongs to another region than the directory says.
    #[error("page holds region {found} but {expected} was expected")]
    WrongPrefix {
        /// The region the directory expected.
        expected: Prefix,
        /// The region in the page header.
        found: Prefix,
    },
    /// The entry area is inconsistent.
    #[error("malformed page body: {0}")]
    Malformed(&'static str),
}

/// A decoded page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The region of the key space this page holds.
    pub prefix: Prefix,
    /// The commit sequence number that wrote this page version.
    pub seq: u64,
    /// The entries, sorted by key with distinct keys, all under `prefix`.
    pub entries: Vec<Entry>,
}

/// The bytes a set of entries takes in a page body.
pub fn body_bytes(entries: &[Entry]) -> usize {
    entries.iter().map(|e| e.value.entry_bytes()).sum()
}

impl Page {
    /// The page's node in the trie: the root of its entries' sub-trie at its prefix's depth.
    pub fn node(&self, hasher: Hasher) -> Node {
        subtrie_root(hasher, self.prefix.depth(), &self.leaves(hasher))
    }

    /// Every entry as (key path, value hash).
    pub fn leaves(&self, hasher: Hasher) -> Vec<(KeyPath, ValueHash)> {
        self.entries
            .iter()
            .map(|e| (e.key, e.value.hash(hasher)))
            .collect()
    }

    /// Append the multi-proof nodes of `keys` (sorted, all under this page's prefix) below the
    /// page's position.
    pub fn prove(&self, hasher: Hasher, keys: &[KeyPath], out: &mut Vec<ProofNode>) {
        prove_subtrie(hasher, self.prefix.depth(), &self.leaves(hasher), keys, out);
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &KeyPath) -> Option<&Value> {
        self.entries
            .binary_search_by(|e| e.key.cmp(key))
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|e| &e.value)
    }

    /// Whether the entries fit in one page.
    pub fn fits(entries: &[Entry]) -> bool {
        body_bytes(entries) <= PAGE_BODY_BYTES
    }

    /// Encode into one block. The entries must fit ([`Page::fits`]); entries that do not fit
    /// are a caller bug and are reported as an error rather than written truncated.
    pub fn encode(&self) -> Result<Block, PageError> {
        let mut block = Block([0u8; BLOCK_BYTES]);
        let count = u16::try_from(self.entries.len())
            .map_err(|_| PageError::Malformed("too many entries"))?;
        let used = body_bytes(&self.entries);
        if used > PAGE_BODY_BYTES {
            return Err(PageError::Malformed("entries do not fit in a page"));
        }
        let mut w = Writer {
            buf: &mut block.0,
            at: 0,
        };
        w.put(&PAGE_MAGIC);
        w.put(&[PAGE_VERSION, 0]);
        w.put(&self.prefix.len_u16().to_le_bytes());
        w.put(self.prefix.bits());
        w.put(&self.seq.to_le_bytes());
        w.put(&count.to_le_bytes());
        // `used` is at most PAGE_BODY_BYTES, which fits in u16.
        w.put(&(used as u16).to_le_bytes());
        for e in &self.entries {
            w.put(&e.key);
            match &e.value {
                Value::Inline(v) => {
                    w.put(&[KIND_INLINE]);
                    // Inline values are at most MAX_INLINE_VALUE_BYTES long.
                    w.put(&(v.len() as u16).to_le_bytes());
                    w.put(v);
                }
                Value::External(x) => {
                    w.put(&[KIND_EXTERNAL]);
                    w.put(&x.loc.to_le_bytes());
                    w.put(&x.len.to_le_bytes());
                    w.put(&x.hash);
                }
            }
        }
        Ok(block)
    }

    /// Decode untrusted page bytes, checking every structural rule.
    pub fn decode(bytes: &[u8]) -> Result<Page, PageError> {
        let mut r = Reader { bytes, at: 0 };
        if r.take::<4>()? != PAGE_MAGIC || r.take::<1>()? != [PAGE_VERSION] {
            return Err(PageError::BadHeader);
        }
        let _flags = r.take::<1>()?;
        let prefix_len = u16::from_le_bytes(r.take()?);
        let prefix_bits: KeyPath = r.take()?;
        let prefix = Prefix::from_parts(prefix_bits, prefix_len)
            .ok_or(PageError::Malformed("invalid prefix"))?;
        let seq = u64::from_le_bytes(r.take()?);
        let count = usize::from(u16::from_le_bytes(r.take()?));
        let used = usize::from(u16::from_le_bytes(r.take()?));
        if used > PAGE_BODY_BYTES {
            return Err(PageError::Malformed("used bytes beyond the page"));
        }
        let body_end = PAGE_HEADER_BYTES + used;
        let mut entries: Vec<Entry> = Vec::with_capacity(count.min(PAGE_BODY_BYTES / 35));
        for _ in 0..count {
            let key: KeyPath = r.take()?;
            let value = match r.take::<1>()? {
                [KIND_INLINE] => {
                    let len = usize::from(u16::from_le_bytes(r.take()?));
                    if len > MAX_INLINE_VALUE_BYTES {
                        return Err(PageError::Malformed("inline value too long"));
                    }
                    Value::Inline(r.slice(len)?.to_vec())
                }
                [KIND_EXTERNAL] => Value::External(ExternalValue {
                    loc: u64::from_le_bytes(r.take()?),
                    len: u64::from_le_bytes(r.take()?),
                    hash: r.take()?,
                }),
                _ => return Err(PageError::Malformed("unknown value kind")),
            };
            if r.at > body_end {
                return Err(PageError::Malformed("entries overrun the used bytes"));
            }
            if !prefix.contains(&key) {
                return Err(PageError::Malformed("entry outside the page's prefix"));
            }
            if entries.last().is_some_and(|last| last.key >= key) {
                return Err(PageError::Malformed("entries out of order"));
            }
            entries.push(Entry { key, value });
        }
        if r.at != body_end {
            return Err(PageError::Malformed("used bytes disagree with the entries"));
        }
        Ok(Page {
            prefix,
            seq,
            entries,
        })
    }
}

struct Writer<'a> {
    buf: &'a mut [u8; BLOCK_BYTES],
    at: usize,
}

impl Writer<'_> {
    /// Callers check sizes before writing; an overrun is dropped rather than panicking.
    fn put(&mut self, bytes: &[u8]) {
        let end = self.at + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.at..end) {
            dst.copy_from_slice(bytes);
        }
        self.at = end;
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
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
}

/// A region of the key space after a change: either one page or, when the entries do not fit,
/// two halves split by the next bit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One page holding these entries (possibly none).
    Page(Prefix, Vec<Entry>),
    /// Two sub-regions.
    Split(Box<Layout>, Box<Layout>),
}

impl Layout {
    /// Lay out `entries` (sorted, distinct, all under `prefix`) into pages, splitting by the
    /// next bit while a region does not fit into `fill_bytes` (at most a page body).
    pub fn build(prefix: Prefix, entries: Vec<Entry>, fill_bytes: usize) -> Layout {
        let limit = fill_bytes.min(PAGE_BODY_BYTES);
        if body_bytes(&entries) <= limit || entries.len() <= 1 || prefix.is_full() {
            return Layout::Page(prefix, entries);
        }
        let depth = prefix.depth();
        let split = entries.partition_point(|e| !sprig_core::trie::bit_at(&e.key, depth));
        let mut left = entries;
        let right = left.split_off(split);
        Layout::Split(
            Box::new(Layout::build(prefix.child(false), left, fill_bytes)),
            Box::new(Layout::build(prefix.child(true), right, fill_bytes)),
        )
    }

    /// Visit every page of the layout in key order.
    pub fn pages(&self) -> Vec<(&Prefix, &[Entry])> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<(&'a Prefix, &'a [Entry])>) {
        match self {
            Layout::Page(p, e) => out.push((p, e)),
            Layout::Split(l, r) => {
                l.collect(out);
                r.collect(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> KeyPath {
        Hasher::Blake3.hash_value(&i.to_le_bytes())
    }

    fn sorted_entries(n: u32, value_len: usize) -> Vec<Entry> {
        let mut e: Vec<Entry> = (0..n)
            .map(|i| Entry {
                key: key(i),
                value: Value::Inline(vec![i as u8; value_len]),
            })
            .collect();
        e.sort_by_key(|x| x.key);
        e
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut entries = sorted_entries(60, 8);
        entries[3].value = Value::External(ExternalValue {
            loc: 77,
            len: 1 << 20,
            hash: [9; 32],
        });
        entries[5].value = Value::Inline(vec![]);
        let page = Page {
            prefix: Prefix::root(),
            seq: 42,
            entries,
        };
        let block = page.encode().unwrap();
        assert_eq!(Page::decode(&block.0).unwrap(), page);
    }

    #[test]
    fn node_equals_the_model_root_for_the_same_entries() {
        let h = Hasher::Sha256;
        let entries = sorted_entries(80, 8);
        let page = Page {
            prefix: Prefix::root(),
            seq: 1,
            entries: entries.clone(),
        };
        let mut model = sprig_core::ReferenceModel::new(h);
        for e in &entries {
            if let Value::Inline(v) = &e.value {
                model.insert(e.key, v.clone());
            }
        }
        assert_eq!(page.node(h), model.root());
    }

    #[test]
    fn corrupt_pages_are_rejected_without_panic() {
        let page = Page {
            prefix: Prefix::root(),
            seq: 1,
            entries: sorted_entries(40, 20),
        };
        let block = page.encode().unwrap();
        for byte in 0..(PAGE_HEADER_BYTES + body_bytes(&page.entries) + 8) {
            for bit in 0..8 {
                let mut b = block;
                b.0[byte] ^= 1 << bit;
                // Either rejected, or decodes to something else that is still a valid page
                // (e.g. a flipped value byte): never a panic. The directory's checksum catches
                // the rest.
                let _ = Page::decode(&b.0);
            }
        }
        assert!(Page::decode(&[0u8; 10]).is_err());
        assert!(Page::decode(&[0u8; BLOCK_BYTES]).is_err());
    }

    #[test]
    fn layout_splits_until_every_page_fits() {
        let entries = sorted_entries(400, 60);
        let layout = Layout::build(Prefix::root(), entries.clone(), PAGE_BODY_BYTES);
        let pages = layout.pages();
        assert!(pages.len() > 1);
        let mut all = Vec::new();
        for (p, e) in &pages {
            assert!(Page::fits(e));
            assert!(e.iter().all(|x| p.contains(&x.key)));
            all.extend_from_slice(e);
        }
        assert_eq!(all, entries);
    }
}
