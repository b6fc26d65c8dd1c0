//! Blobs: a value's length and hash without its bytes ([`ReadView::get_ref`], one page read,
//! no value read), and its bytes later, whole or a byte range ([`ReadView::read_blob`]),
//! checked against the hash. A node replaying blocks can look at what a large value is and
//! skip reading it.

use crate::api::table::Table;
use crate::api::view::ReadView;
use crate::error::Result;
use crate::state::page::{ExternalValue, ValueRef};
use crate::state::tables::TableId;
use sprig_core::trie::{KeyPath, ValueHash};
use std::ops::{Bound, RangeBounds};

/// Where a value is, with its length and hash: what [`ReadView::get_ref`] returns. Valid for
/// reads through the view it came from (or a clone of it).
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut batch = db.begin();
/// batch.put([1u8; 32], vec![9u8; 100_000])?; // a large value: kept out of the page
/// db.commit(batch.finish()?)?;
/// let view = db.view();
/// let blob = view.get_ref(&[1u8; 32])?.expect("present");
/// assert!(blob.is_external());
/// assert_eq!(blob.len, 100_000);
/// assert_eq!(view.read_blob(&blob, 10..20)?, vec![9u8; 10]); // a slice, checked
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobRef {
    /// The key.
    pub key: KeyPath,
    /// The value's length in bytes.
    pub len: u64,
    /// The value's hash (the one in the trie's leaf).
    pub hash: ValueHash,
    table: TableId,
    stored: Stored,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stored {
    /// Small values live in their page: read with it.
    Inline(Vec<u8>),
    /// Large values live in the value log.
    External(ExternalValue),
}

impl BlobRef {
    /// Whether the value lives outside its page (in the value log): only such values cost a
    /// read of their own.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], vec![0u8; 100])?;
    /// batch.put([2u8; 32], vec![0u8; 100_000])?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// assert!(!view.get_ref(&[1u8; 32])?.expect("present").is_external()); // in its page
    /// assert!(view.get_ref(&[2u8; 32])?.expect("present").is_external()); // in the value log
    /// # Ok(()) }
    /// ```
    pub fn is_external(&self) -> bool {
        matches!(self.stored, Stored::External(_))
    }
}

impl ReadView {
    /// The length and hash of `key`'s value in the default table, without reading the value
    /// (see [`ReadView::get_ref_in`]).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "hello")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let blob = view.get_ref(&[1u8; 32])?.expect("present");
    /// assert_eq!((blob.len, blob.hash), (5, db.hasher().hash_value(b"hello")));
    /// assert_eq!(view.get_ref(&[2u8; 32])?, None);
    /// # Ok(()) }
    /// ```
    pub fn get_ref(&self, key: &KeyPath) -> Result<Option<BlobRef>> {
        self.get_ref_in(&Table::default_table(), key)
    }

    /// The length and hash of `key`'s value in `table`: one page read, no value read.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], vec![7u8; 50_000])?;
    /// db.commit(batch.finish()?)?;
    /// let blob = db.view().get_ref_in(&blocks, &[1u8; 32])?.expect("present");
    /// assert_eq!(blob.len, 50_000); // known without reading the value
    /// # Ok(()) }
    /// ```
    pub fn get_ref_in(&self, table: &Table, key: &KeyPath) -> Result<Option<BlobRef>> {
        let Some(page) = self.page_holding(table, key)? else {
            return Ok(None);
        };
        Ok(page.get(key).map(|v| {
            let (len, stored) = match v {
                ValueRef::Inline(bytes) => (bytes.len() as u64, Stored::Inline(bytes.to_vec())),
                ValueRef::External(x) => (x.len, Stored::External(x)),
            };
            BlobRef {
                key: *key,
                len,
                hash: v.hash(self.inner.hasher),
                table: table.id,
                stored,
            }
        }))
    }

    /// The bytes of `blob` within `range` (byte offsets into the value; clamped to its
    /// length), checked against the value's hash: a value that does not match is
    /// [`crate::Error::Corruption`]. The check needs the whole value, so a value-log value is read
    /// whole even for a small range.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "hello")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let blob = view.get_ref(&[1u8; 32])?.expect("present");
    /// assert_eq!(view.read_blob(&blob, ..)?, b"hello");
    /// assert_eq!(view.read_blob(&blob, 1..3)?, b"el");
    /// assert_eq!(view.read_blob(&blob, 3..100)?, b"lo"); // clamped to the value
    /// # Ok(()) }
    /// ```
    pub fn read_blob(&self, blob: &BlobRef, range: impl RangeBounds<u64>) -> Result<Vec<u8>> {
        let bytes = match &blob.stored {
            Stored::Inline(bytes) => bytes.clone(),
            Stored::External(x) => self.inner.value_bytes(
                &self.version,
                blob.table,
                &blob.key,
                ValueRef::External(*x),
            )?,
        };
        let len = bytes.len() as u64;
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .min(len);
        let end = match range.end_bound() {
            Bound::Included(e) => e.saturating_add(1),
            Bound::Excluded(e) => *e,
            Bound::Unbounded => len,
        }
        .clamp(start, len);
        // Usize-sized: the value is in memory.
        Ok(bytes[start as usize..end as usize].to_vec())
    }
}
