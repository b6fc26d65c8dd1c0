//! Iteration over the entries of a read view in key-path order, reading pages in batches
//! with many reads in flight. Full scans (export, state sync) and ranges build on it.

use crate::api::table::Table;
use crate::api::view::ReadView;
use crate::error::Result;
use crate::state::directory::Directory;
use crate::state::page::Page;
use crate::state::tables::TableId;
use crate::stats::ReadKind;
use sprig_core::trie::KeyPath;
use std::collections::VecDeque;

/// Pages read per batch while scanning.
const PAGES_PER_BATCH: usize = 64;

/// The entries of a view from a start key (inclusive) to an end key (exclusive), in key-path
/// order. Yields an error (and then stops) if a page cannot be read or fails its checks.
pub struct Entries<'v> {
    view: &'v ReadView,
    source: Source,
    next: Option<KeyPath>,
    end: Option<KeyPath>,
    buffer: VecDeque<(std::sync::Arc<Page>, usize)>,
}

/// What a scan reads.
enum Source {
    /// A table of the view.
    Table(Table),
    /// A directory not in the view's tables (a union's frozen input), whose values belong to
    /// table `1`.
    Frozen(Directory, TableId),
}

impl ReadView {
    /// Every entry of the default table, in key-path order.
    pub fn iter(&self) -> Entries<'_> {
        self.range([0u8; 32], None)
    }

    /// Every entry of `table`, in key-path order.
    pub fn iter_in(&self, table: &Table) -> Entries<'_> {
        self.range_in(table, [0u8; 32], None)
    }

    /// The entries of the default table with `start <= key < end` (no end: to the last key),
    /// in key-path order.
    pub fn range(&self, start: KeyPath, end: Option<KeyPath>) -> Entries<'_> {
        self.range_in(&Table::default_table(), start, end)
    }

    /// The entries of `table` with `start <= key < end` (no end: to the last key), in
    /// key-path order. A table this view does not hold yields [`crate::Error::NoSuchTable`].
    pub fn range_in(&self, table: &Table, start: KeyPath, end: Option<KeyPath>) -> Entries<'_> {
        Entries {
            view: self,
            source: Source::Table(table.clone()),
            next: Some(start),
            end,
            buffer: VecDeque::new(),
        }
    }

    /// The entries of `dir` (a directory outside this view's tables whose values belong to
    /// table `table`) from `start` on, in key-path order.
    pub(crate) fn frozen_range(
        &self,
        dir: Directory,
        table: TableId,
        start: KeyPath,
    ) -> Entries<'_> {
        Entries {
            view: self,
            source: Source::Frozen(dir, table),
            next: Some(start),
            end: None,
            buffer: VecDeque::new(),
        }
    }
}

impl Entries<'_> {
    /// Load the next batch of pages into the buffer.
    fn fill(&mut self) -> Result<()> {
        while self.buffer.is_empty() {
            let Some(start) = self.next else {
                return Ok(());
            };
            if self.end.is_some_and(|end| start >= end) {
                self.next = None;
                return Ok(());
            }
            let dir = match &self.source {
                Source::Table(t) => t.dir(&self.view.version.tables)?,
                Source::Frozen(d, _) => d,
            };
            let pages = dir.pages_from(&start, PAGES_PER_BATCH);
            let Some((last, _)) = pages.last() else {
                self.next = None;
                return Ok(());
            };
            self.next = last.next_key();
            let loaded = self.view.inner.load_pages(&pages, ReadKind::Lookup)?;
            for page in loaded {
                for (i, e) in page.iter().enumerate() {
                    if *e.key >= start && self.end.is_none_or(|end| *e.key < end) {
                        self.buffer.push_back((page.clone(), i));
                    }
                }
            }
        }
        Ok(())
    }
}

impl Iterator for Entries<'_> {
    type Item = Result<(KeyPath, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.fill() {
            self.next = None;
            self.buffer.clear();
            return Some(Err(e));
        }
        let (page, i) = self.buffer.pop_front()?;
        let entry = page.entry(i)?;
        let table = match &self.source {
            Source::Table(t) => t.id,
            Source::Frozen(_, id) => *id,
        };
        Some(
            self.view
                .inner
                .value_bytes(&self.view.version, table, entry.key, entry.value)
                .map(|bytes| (*entry.key, bytes)),
        )
    }
}
