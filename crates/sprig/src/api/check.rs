//! Full verification of a database: read every page of the latest version from the SSD
//! (bypassing the cache), check its checksum, structure, region, entry count and trie node
//! against the directory, and read and hash every value in the value log. Every problem is
//! collected with the file and offset where it was found.

use crate::api::db::Db;
use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::log::record::hex;
use crate::log::segments::{
    decode_page_at, loc_offset, loc_segment, segment_file_name, verify_page_checksum,
};
use crate::state::directory::{PageLoc, PageRef};
use crate::state::page::ValueRef;
use crate::state::prefix::Prefix;
use crate::stats::ReadKind;

/// Pages checked per batch of reads.
const PAGES_PER_BATCH: usize = 256;

/// What [`Db::check`] found.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut batch = db.begin();
/// batch.put([1u8; 32], "small")?;
/// batch.put([2u8; 32], vec![0u8; 10_000])?; // in the value log
/// db.commit(batch.finish()?)?;
/// let report = db.check(&mut |_, _| {})?;
/// assert_eq!((report.pages, report.entries, report.values), (1, 2, 1));
/// assert!(report.bytes_read >= 10_000 && report.problems.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct CheckReport {
    /// Pages read and checked.
    pub pages: u64,
    /// Entries in those pages.
    pub entries: u64,
    /// Values read from the value log and checked against their hash.
    pub values: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Every problem found, each naming the file and offset.
    pub problems: Vec<Error>,
}

impl CheckReport {
    /// Whether nothing was wrong.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// db.commit(batch.finish()?)?;
    /// let report = db.check(&mut |_, _| {})?;
    /// assert!(report.is_clean(), "{:?}", report.problems);
    /// # Ok(()) }
    /// ```
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Db {
    /// Read and verify every page and value of every table of the latest version (see
    /// [`ReadView::check`]).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let items = (0u32..2000).map(|i| (db.key_path(&i.to_le_bytes()), vec![1u8; 40]));
    /// db.bulk_load(items, &mut |_| {})?;
    /// let mut last = (0, 0);
    /// let report = db.check(&mut |done, total| last = (done, total))?;
    /// assert!(report.is_clean());
    /// assert_eq!(report.entries, 2000);
    /// assert_eq!(last, (report.pages, report.pages)); // (pages done, pages in all)
    /// # Ok(()) }
    /// ```
    pub fn check(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<CheckReport> {
        self.view().check(progress)
    }
}

impl ReadView {
    /// Read and verify every page and value of every table of this view's version (a named
    /// snapshot's too). `progress` is called with (pages done, pages total) after each batch.
    /// I/O errors and corruption are collected in the report, not returned; the call itself
    /// fails only if it cannot proceed at all.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// db.commit(batch.finish()?)?;
    /// db.save_snapshot("block-1")?;
    /// let report = db.open_snapshot("block-1")?.check(&mut |_, _| {})?;
    /// assert!(report.is_clean());
    /// assert_eq!(report.entries, 1);
    /// # Ok(()) }
    /// ```
    pub fn check(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<CheckReport> {
        let view = self;
        let mut total = 0u64;
        for (_, dir) in view.version.tables.dirs() {
            dir.for_each_page(|_, _| total += 1);
        }
        let mut report = CheckReport::default();
        for (_, dir) in view.version.tables.dirs() {
            let mut next = Some([0u8; 32]);
            while let Some(start) = next {
                let pages = dir.pages_from(&start, PAGES_PER_BATCH);
                let Some((last, _)) = pages.last() else {
                    break;
                };
                next = last.next_key();
                self.check_pages(&pages, &mut report);
                progress(report.pages, total);
            }
        }
        Ok(report)
    }

    fn check_pages(&self, pages: &[(Prefix, PageRef)], report: &mut CheckReport) {
        let inner = &self.inner;
        let on_disk: Vec<(Prefix, u64, &PageRef)> = pages
            .iter()
            .filter_map(|(p, r)| match r.loc {
                PageLoc::Disk(l) => Some((*p, l, r)),
                PageLoc::Memory(_) => None,
            })
            .collect();
        let locs: Vec<u64> = on_disk.iter().map(|(_, l, _)| *l).collect();
        let blocks = match inner.log.segments.read_blocks(&locs) {
            Ok(b) => b.into_iter().map(Ok).collect::<Vec<_>>(),
            // Attribute the failure: read the pages one by one.
            Err(_) => locs
                .iter()
                .map(|l| {
                    inner.log.segments.read_blocks(&[*l]).and_then(|mut v| {
                        v.pop()
                            .ok_or_else(|| Error::internal("a block asked for was not read"))
                    })
                })
                .collect(),
        };
        inner
            .counters
            .page_reads(ReadKind::Maintenance, locs.len() as u64);
        for ((prefix, l, r), block) in on_disk.into_iter().zip(blocks) {
            report.pages += 1;
            let block = match block {
                Ok(b) => b,
                Err(e) => {
                    report.problems.push(e);
                    continue;
                }
            };
            report.bytes_read += block.len() as u64;
            let checked = verify_page_checksum(block.as_bytes(), l, r.checksum)
                .and_then(|_| decode_page_at(block.as_bytes(), l, &prefix, r.checksum));
            let page = match checked {
                Ok(p) => p,
                Err(e) => {
                    report.problems.push(e);
                    continue;
                }
            };
            let bad = |what: String| {
                Error::corruption(segment_file_name(loc_segment(l)), loc_offset(l), what)
            };
            if page.len() as u64 != u64::from(r.count) {
                report.problems.push(bad(format!(
                    "page holds {} entries but the directory says {}",
                    page.len(),
                    r.count
                )));
            }
            let buckets = page.computed_buckets(inner.hasher);
            if buckets != page.buckets() {
                report.problems.push(bad(
                    "the page's stored bucket nodes do not match its entries".to_string(),
                ));
            }
            let node = crate::state::page::fold_buckets(inner.hasher, prefix.depth(), &buckets);
            if node != r.node {
                report.problems.push(bad(format!(
                    "page hashes to {} but the directory holds {}",
                    hex(&node),
                    hex(&r.node)
                )));
            }
            report.entries += page.len() as u64;
            for e in page.iter() {
                if let ValueRef::External(x) = e.value {
                    report.values += 1;
                    match inner.log.segments.read_value(e.key, &x) {
                        Ok(v) => report.bytes_read += v.len() as u64,
                        Err(err) => report.problems.push(err),
                    }
                }
            }
        }
    }
}
