//! Cursors: iteration over the entries of a read view in key-path order, forward or reverse,
//! over any key range, reading the pages of a batch together (many reads in flight) and each
//! page once. A cursor owns a pin on its version, so it does not borrow the view it came from;
//! it can seek, hand out batches, and say where to resume. Full scans (export, state sync,
//! unions) and ranges build on it.

use crate::api::table::Table;
use crate::api::view::ReadView;
use crate::error::Result;
use crate::state::directory::Directory;
use crate::state::page::Page;
use crate::state::prefix::{key_after, key_before};
use crate::state::tables::TableId;
use crate::stats::ReadKind;
use sprig_core::trie::KeyPath;
use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Pages read together per batch while scanning: the read-ahead of a cursor.
const PAGES_PER_BATCH: usize = 64;

/// A cursor over the entries of one table of a pinned version with keys in a range, in
/// key-path order (or reverse order, see [`Cursor::reverse`]). An iterator of
/// `Result<(key, value)>`; after an error (a page that cannot be read or fails its checks) it
/// yields nothing more.
///
/// ```
/// # let db = sprig::Db::open_in_memory(sprig::Options::default()).unwrap();
/// let view = db.view();
/// let key = [7u8; 32];
/// let mut cursor = view.range(key..).reverse();
/// let batch = cursor.next_n(100).unwrap();
/// assert!(batch.is_empty());
/// assert_eq!(cursor.resume_from(), None);
/// ```
pub struct Cursor {
    view: ReadView,
    source: Source,
    /// The range, both ends inclusive; `None` for an empty range.
    bounds: Option<(KeyPath, KeyPath)>,
    reverse: bool,
    /// The next key to read pages from (forward: at or after; reverse: at or before), `None`
    /// once the range is read.
    next: Option<KeyPath>,
    /// Entries read but not yet yielded.
    buffer: VecDeque<(Arc<Page>, usize)>,
    /// The key a new cursor would continue from, `None` once every entry was yielded.
    resume: Option<KeyPath>,
    failed: bool,
}

/// What a scan reads.
enum Source {
    /// A table of the view.
    Table(Table),
    /// A directory not in the view's tables (a union's frozen input), whose values belong to
    /// the table with this id.
    Frozen(Directory, TableId),
}

/// The inclusive ends of `range`, or `None` if it holds no key.
fn inclusive(range: &impl RangeBounds<KeyPath>) -> Option<(KeyPath, KeyPath)> {
    let lo = match range.start_bound() {
        Bound::Included(k) => *k,
        Bound::Excluded(k) => key_after(k)?,
        Bound::Unbounded => [0u8; 32],
    };
    let hi = match range.end_bound() {
        Bound::Included(k) => *k,
        Bound::Excluded(k) => key_before(k)?,
        Bound::Unbounded => [0xffu8; 32],
    };
    (lo <= hi).then_some((lo, hi))
}

impl ReadView {
    /// Every entry of the default table, in key-path order.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// # let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// # let mut batch = db.begin();
    /// # for i in 1u8..=3 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # db.commit(batch.finish()?)?;
    /// // The database holds the keys [1; 32], [2; 32] and [3; 32].
    /// let keys = db.view().iter().map(|entry| entry.map(|(key, _)| key));
    /// assert_eq!(keys.collect::<sprig::Result<Vec<_>>>()?, [[1u8; 32], [2u8; 32], [3u8; 32]]);
    /// # Ok(()) }
    /// ```
    pub fn iter(&self) -> Cursor {
        self.range(..)
    }

    /// Every entry of `table`, in key-path order.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// for i in 1u8..=3 {
    ///     batch.put_in(&blocks, [i; 32], vec![i])?;
    /// }
    /// db.commit(batch.finish()?)?;
    /// let entries = db.view().iter_in(&blocks).collect::<sprig::Result<Vec<_>>>()?;
    /// assert_eq!(entries.len(), 3);
    /// assert_eq!(entries[0], ([1u8; 32], vec![1u8]));
    /// # Ok(()) }
    /// ```
    pub fn iter_in(&self, table: &Table) -> Cursor {
        self.range_in(table, ..)
    }

    /// The entries of the default table with keys in `range`, in key-path order.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// # let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// # let mut batch = db.begin();
    /// # for i in 1u8..=3 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # db.commit(batch.finish()?)?;
    /// // The database holds the keys [1; 32], [2; 32] and [3; 32].
    /// let view = db.view();
    /// let from_2 = view.range([2u8; 32]..).collect::<sprig::Result<Vec<_>>>()?;
    /// assert_eq!(from_2, [([2u8; 32], vec![2u8]), ([3u8; 32], vec![3u8])]);
    /// assert_eq!(view.range(..[2u8; 32]).count(), 1); // the end is excluded
    /// # Ok(()) }
    /// ```
    pub fn range(&self, range: impl RangeBounds<KeyPath>) -> Cursor {
        self.range_in(&Table::default_table(), range)
    }

    /// The entries of `table` with keys in `range`, in key-path order. A table this view does
    /// not hold yields [`crate::Error::NoSuchTable`].
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let before = db.view();
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [5u8; 32], "block 5")?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().range_in(&blocks, [4u8; 32]..=[5u8; 32]).count(), 1);
    /// let mut missing = before.range_in(&blocks, ..); // a view from before the table
    /// assert!(matches!(missing.next(), Some(Err(Error::NoSuchTable(_)))));
    /// # Ok(()) }
    /// ```
    pub fn range_in(&self, table: &Table, range: impl RangeBounds<KeyPath>) -> Cursor {
        Cursor::new(
            self.clone(),
            Source::Table(table.clone()),
            inclusive(&range),
        )
    }

    /// The entries of `dir` (a directory outside this view's tables whose values belong to
    /// table `table`) from `start` on, in key-path order.
    pub(crate) fn frozen_range(&self, dir: Directory, table: TableId, start: KeyPath) -> Cursor {
        Cursor::new(
            self.clone(),
            Source::Frozen(dir, table),
            inclusive(&(start..)),
        )
    }
}

impl Cursor {
    fn new(view: ReadView, source: Source, bounds: Option<(KeyPath, KeyPath)>) -> Cursor {
        let mut c = Cursor {
            view,
            source,
            bounds,
            reverse: false,
            next: None,
            buffer: VecDeque::new(),
            resume: None,
            failed: false,
        };
        c.restart();
        c
    }

    /// Go to the start of the range in the cursor's direction.
    fn restart(&mut self) {
        self.buffer.clear();
        self.next = self
            .bounds
            .map(|(lo, hi)| if self.reverse { hi } else { lo });
        self.resume = self.next;
    }

    /// The same range in descending key order, from its last key.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// # let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// # let mut batch = db.begin();
    /// # for i in 1u8..=3 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # db.commit(batch.finish()?)?;
    /// // The database holds the keys [1; 32], [2; 32] and [3; 32].
    /// let mut cursor = db.view().range(..=[2u8; 32]).reverse();
    /// assert_eq!(cursor.next().transpose()?, Some(([2u8; 32], vec![2u8]))); // from the last key
    /// assert_eq!(cursor.next().transpose()?, Some(([1u8; 32], vec![1u8])));
    /// assert!(cursor.next().is_none());
    /// # Ok(()) }
    /// ```
    pub fn reverse(mut self) -> Cursor {
        self.reverse = !self.reverse;
        self.restart();
        self
    }

    /// Whether the cursor runs in descending key order.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let cursor = db.view().iter();
    /// assert!(!cursor.is_reverse());
    /// assert!(cursor.reverse().is_reverse());
    /// # Ok(()) }
    /// ```
    pub fn is_reverse(&self) -> bool {
        self.reverse
    }

    /// Position the cursor at `key`: the next entry is the first with a key at or after it
    /// (reverse: at or before it), within the range.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// # let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// # let mut batch = db.begin();
    /// # for i in 1u8..=3 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # db.commit(batch.finish()?)?;
    /// // The database holds the keys [1; 32], [2; 32] and [3; 32].
    /// let mut cursor = db.view().iter();
    /// cursor.seek(&[2u8; 32]);
    /// assert_eq!(cursor.next().transpose()?.map(|(key, _)| key), Some([2u8; 32]));
    /// let mut reverse = db.view().iter().reverse();
    /// reverse.seek(&[2u8; 32]);
    /// assert_eq!(reverse.next().transpose()?.map(|(key, _)| key), Some([2u8; 32]));
    /// assert_eq!(reverse.next().transpose()?.map(|(key, _)| key), Some([1u8; 32]));
    /// # Ok(()) }
    /// ```
    pub fn seek(&mut self, key: &KeyPath) {
        self.restart();
        if let (Some(next), Some((lo, hi))) = (self.next.as_mut(), self.bounds) {
            *next = if self.reverse {
                (*key).min(hi)
            } else {
                (*key).max(lo)
            };
            if self.reverse && *next < lo || !self.reverse && *next > hi {
                self.next = None;
            }
        }
        self.resume = self.next;
    }

    /// Up to `n` entries (fewer only at the end of the range).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// # let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// # let mut batch = db.begin();
    /// # for i in 1u8..=3 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # db.commit(batch.finish()?)?;
    /// // The database holds the keys [1; 32], [2; 32] and [3; 32].
    /// let mut cursor = db.view().iter();
    /// assert_eq!(cursor.next_n(2)?.len(), 2);
    /// assert_eq!(cursor.next_n(2)?, [([3u8; 32], vec![3u8])]); // fewer: the end of the range
    /// assert!(cursor.next_n(2)?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn next_n(&mut self, n: usize) -> Result<Vec<(KeyPath, Vec<u8>)>> {
        let mut out = Vec::with_capacity(n.min(4096));
        while out.len() < n {
            match self.next() {
                Some(item) => out.push(item?),
                None => break,
            }
        }
        Ok(out)
    }

    /// The key of the entry the cursor yields next, without reading its value (reading its
    /// page if need be); `None` at the end of the range.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// # let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// # let mut batch = db.begin();
    /// # for i in 1u8..=3 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # db.commit(batch.finish()?)?;
    /// // The database holds the keys [1; 32], [2; 32] and [3; 32].
    /// let mut cursor = db.view().iter();
    /// assert_eq!(cursor.peek_key()?, Some([1u8; 32]));
    /// assert_eq!(cursor.next().transpose()?.map(|(key, _)| key), Some([1u8; 32]));
    /// cursor.seek(&[4u8; 32]);
    /// assert_eq!(cursor.peek_key()?, None); // the end of the range
    /// # Ok(()) }
    /// ```
    pub fn peek_key(&mut self) -> Result<Option<KeyPath>> {
        if self.failed {
            return Ok(None);
        }
        self.fill_or_stop()?;
        Ok(self
            .buffer
            .front()
            .and_then(|(page, i)| page.entry(*i))
            .map(|e| *e.key))
    }

    /// The key to continue from: a cursor on the same version over the range from this key
    /// on (reverse: up to and including it) yields exactly what this one has not yielded yet.
    /// `None` once every entry of the range was yielded.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// # let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// # let mut batch = db.begin();
    /// # for i in 1u8..=3 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # db.commit(batch.finish()?)?;
    /// // The database holds the keys [1; 32], [2; 32] and [3; 32].
    /// let view = db.view();
    /// let mut cursor = view.iter();
    /// cursor.next_n(2)?; // a page of results handed out; the rest later
    /// let resume = cursor.resume_from().expect("one entry left");
    /// let rest = view.range(resume..).collect::<sprig::Result<Vec<_>>>()?;
    /// assert_eq!(rest, [([3u8; 32], vec![3u8])]);
    /// cursor.next_n(10)?;
    /// assert_eq!(cursor.resume_from(), None);
    /// # Ok(()) }
    /// ```
    pub fn resume_from(&self) -> Option<KeyPath> {
        self.resume
    }

    /// The view the cursor reads.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let cursor = db.view().iter(); // the cursor keeps the version readable
    /// db.commit(db.begin().finish()?)?;
    /// assert_eq!((cursor.view().seq(), db.seq()), (0, 1));
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> &ReadView {
        &self.view
    }

    /// [`Cursor::fill`]; after an error the cursor yields nothing more.
    fn fill_or_stop(&mut self) -> Result<()> {
        let filled = self.fill();
        if filled.is_err() {
            self.failed = true;
            self.buffer.clear();
        }
        filled
    }

    /// Load the next batch of pages into the buffer.
    fn fill(&mut self) -> Result<()> {
        while self.buffer.is_empty() {
            let (Some(from), Some((lo, hi))) = (self.next, self.bounds) else {
                return Ok(());
            };
            let dir = match &self.source {
                Source::Table(t) => t.dir(&self.view.version.tables)?,
                Source::Frozen(d, _) => d,
            };
            let pages = if self.reverse {
                dir.pages_back_from(&from, PAGES_PER_BATCH)
            } else {
                dir.pages_from(&from, PAGES_PER_BATCH)
            };
            let Some((last, _)) = pages.last() else {
                self.next = None;
                return Ok(());
            };
            self.next = if self.reverse {
                last.prev_key().filter(|k| *k >= lo)
            } else {
                last.next_key().filter(|k| *k <= hi)
            };
            let (lo, hi) = if self.reverse { (lo, from) } else { (from, hi) };
            let loaded = self.view.inner.load_pages(&pages, ReadKind::Lookup)?;
            for page in loaded {
                let n = page.len();
                let inside =
                    |i: &usize| page.entry(*i).is_some_and(|e| *e.key >= lo && *e.key <= hi);
                let take = |i: usize| (page.clone(), i);
                if self.reverse {
                    self.buffer.extend((0..n).rev().filter(inside).map(take));
                } else {
                    self.buffer.extend((0..n).filter(inside).map(take));
                }
            }
        }
        Ok(())
    }
}

impl Iterator for Cursor {
    type Item = Result<(KeyPath, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if let Err(e) = self.fill_or_stop() {
            return Some(Err(e));
        }
        let Some((page, i)) = self.buffer.pop_front() else {
            self.resume = None;
            return None;
        };
        let entry = page.entry(i)?;
        let table = match &self.source {
            Source::Table(t) => t.id,
            Source::Frozen(_, id) => *id,
        };
        let item = self
            .view
            .inner
            .value_bytes(&self.view.version, table, entry.key, entry.value)
            .map(|bytes| (*entry.key, bytes));
        match &item {
            Ok((key, _)) => {
                self.resume = if self.reverse {
                    key_before(key).filter(|k| self.bounds.is_some_and(|(lo, _)| *k >= lo))
                } else {
                    key_after(key).filter(|k| self.bounds.is_some_and(|(_, hi)| *k <= hi))
                };
            }
            Err(_) => {
                self.failed = true;
                self.buffer.clear();
            }
        }
        Some(item)
    }
}
