//! Bulk load: builds a large database from a stream of key-values in one pass, far faster than
//! commits, so benchmarks and imports can create databases of 2^27 entries in minutes.
//!
//! The stream is partitioned by the first byte of the key path into 256 buckets (spilled to
//! temporary files past a memory budget). Regions are then built bucket by bucket: sorted,
//! laid out into pages at a high fill, hashed on worker threads, and written sequentially in
//! key order. Nothing is visible until a checkpoint of the finished directory is durable: a
//! crash during a bulk load leaves the empty database it started from.

use crate::codec::{Reader, Source};
use crate::state::version::Version;
use crate::write::engine::Inner;
use crate::state::arena::Arena;
use crate::state::directory::{Directory, PageLoc, PageRef, Subtree};
use crate::state::tables::{Tables, DEFAULT_TABLE_ID};
use crate::error::{Error, Result};
use crate::io::{BlockBuf, OpenOptions, StorageFile};
use crate::log::segments::{
    encode_value_record, loc_block, loc_offset, loc_segment, segment_file_name, value_blocks,
    SegmentTable,
};
use crate::state::page::{
    ExternalValue, Layout, Page, ValueRef, MAX_INLINE_VALUE_BYTES, MAX_VALUE_BYTES,
    PAGE_BODY_BYTES, UNWRITTEN,
};
use crate::state::prefix::Prefix;
use sprig_core::trie::{KeyPath, Node};
use sprig_core::Hasher;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Key-value bytes buffered in memory before buckets are spilled to disk.
pub(crate) const BUFFER_BYTES: usize = 256 << 20;
/// Regions with at most this many entries are built as one unit (one page or a few).
const SMALL_REGION_ENTRIES: u64 = 64;
/// Pages are filled to this many body bytes, leaving room for later inserts.
const FILL_BYTES: usize = PAGE_BODY_BYTES * 9 / 10;
/// Writes are issued in runs of up to this many bytes.
const WRITE_RUN_BYTES: usize = 8 << 20;
/// Regions built in parallel.
const WORKERS: usize = 2;
/// How often (in items) the partition phase reports progress.
const PROGRESS_EVERY: u64 = 1 << 18;

/// Which phase a bulk load is in.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{BulkPhase, Db, Options};
/// let db = Db::open_in_memory(Options::default())?;
/// let items = (0u32..1000).map(|i| (db.key_path(&i.to_le_bytes()), vec![1u8]));
/// let mut phases = Vec::new();
/// db.bulk_load(items, &mut |progress| phases.push(progress.phase))?;
/// assert_eq!(phases.first(), Some(&BulkPhase::Partition));
/// assert_eq!(phases.last(), Some(&BulkPhase::Build));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkPhase {
    /// Reading the input and partitioning it (total unknown: 0).
    Partition,
    /// Building and writing pages (done and total in entries).
    Build,
}

/// Progress of a bulk load.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{BulkPhase, BulkProgress, Db, Options};
/// let db = Db::open_in_memory(Options::default())?;
/// let items = (0u32..1000).map(|i| (db.key_path(&i.to_le_bytes()), vec![1u8]));
/// let mut last = None;
/// db.bulk_load(items, &mut |progress| last = Some(progress))?;
/// let done = BulkProgress { phase: BulkPhase::Build, done: 1000, total: 1000 };
/// assert_eq!(last, Some(done));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkProgress {
    /// The phase.
    pub phase: BulkPhase,
    /// Entries processed in this phase.
    pub done: u64,
    /// Entries in this phase (0 while partitioning).
    pub total: u64,
}

/// Options of [`crate::Db::bulk_load_with`].
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{BulkOptions, Db, Options};
/// let db = Db::open_in_memory(Options::default())?;
/// let items = (0u32..1000).map(|i| Ok((db.key_path(&i.to_le_bytes()), vec![1u8; 100])));
/// let options = BulkOptions { buffer_bytes: 64 << 10, expected_items: Some(1000) };
/// let report = db.bulk_load_with(items, &options, &mut |_| {})?; // spills past 64 KiB
/// assert_eq!(report.entries, 1000);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkOptions {
    /// Bytes of input buffered in memory before it is spilled to temporary files. Default:
    /// 256 MiB.
    pub buffer_bytes: u64,
    /// The number of items the source holds, when the caller knows it (it counted the records
    /// it read, say): a load that receives another number fails with
    /// [`Error::CountMismatch`] before anything is published.
    pub expected_items: Option<u64>,
}

impl Default for BulkOptions {
    fn default() -> Self {
        BulkOptions {
            buffer_bytes: BUFFER_BYTES as u64,
            expected_items: None,
        }
    }
}

/// What a bulk load built.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let items = vec![
///     ([1u8; 32], b"first".to_vec()),
///     ([1u8; 32], b"last".to_vec()), // the same key: the last value wins
///     ([2u8; 32], vec![0u8; 5000]),  // large: in the value log
/// ];
/// let report = db.bulk_load(items, &mut |_| {})?;
/// assert_eq!((report.entries, report.values, report.root), (2, 1, db.root()));
/// assert!(report.pages >= 1 && report.bytes_written > 5000);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Distinct entries loaded (a key given twice counts once: the last value wins).
    pub entries: u64,
    /// Pages written.
    pub pages: u64,
    /// Value-log records written.
    pub values: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// The state root.
    pub root: Node,
}

/// The input, partitioned by first key byte.
struct Buckets<'a> {
    inner: &'a Inner,
    memory: Vec<Vec<u8>>,
    spilled: Vec<u64>,
    files: Vec<Option<Arc<dyn StorageFile>>>,
    counts: Vec<u64>,
    buffered: usize,
    limit: usize,
}

fn spill_name(bucket: usize) -> String {
    format!("bulk-{bucket:03}.tmp")
}

impl<'a> Buckets<'a> {
    fn new(inner: &'a Inner, limit: usize) -> Self {
        Buckets {
            inner,
            memory: vec![Vec::new(); 256],
            spilled: vec![0; 256],
            files: vec![None; 256],
            counts: vec![0; 256],
            buffered: 0,
            limit,
        }
    }

    fn push(&mut self, key: &KeyPath, value: &[u8]) -> Result<()> {
        let b = usize::from(key[0]);
        let len = u32::try_from(value.len()).map_err(|_| Error::ValueTooLarge {
            len: value.len() as u64,
            max: MAX_VALUE_BYTES as u64,
        })?;
        if let Some(buf) = self.memory.get_mut(b) {
            buf.extend_from_slice(key);
            buf.extend_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(value);
        }
        if let Some(c) = self.counts.get_mut(b) {
            *c += 1;
        }
        self.buffered += 36 + value.len();
        if self.buffered > self.limit {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        for b in 0..256 {
            let Some(buf) = self.memory.get_mut(b) else {
                continue;
            };
            if buf.is_empty() {
                continue;
            }
            let name = spill_name(b);
            if self.files[b].is_none() {
                let f = self
                    .inner
                    .log
                    .storage
                    .open(
                        &name,
                        OpenOptions {
                            create: true,
                            direct: false,
                        },
                    )
                    .map_err(|e| Error::io("creating", &name, e))?;
                f.set_len(0).map_err(|e| Error::io("creating", &name, e))?;
                self.files[b] = Some(f);
            }
            if let Some(f) = &self.files[b] {
                f.write_at(buf, self.spilled[b])
                    .map_err(|e| Error::io("writing", &name, e))?;
            }
            self.spilled[b] += buf.len() as u64;
            buf.clear();
        }
        self.buffered = 0;
        Ok(())
    }

    /// Every record of a bucket (spilled part first, then memory), as entries.
    fn entries(&self, b: usize) -> Result<Vec<(KeyPath, Vec<u8>)>> {
        let mut bytes = Vec::new();
        if let Some(f) = &self.files[b] {
            let name = spill_name(b);
            let len = usize::try_from(self.spilled[b])
                .map_err(|_| Error::internal("a bulk-load spill file larger than memory"))?;
            bytes.resize(len, 0);
            f.read_at(&mut bytes, 0)
                .map_err(|e| Error::io("reading", &name, e))?;
        }
        let mut out = Vec::with_capacity(usize::try_from(self.counts[b]).unwrap_or(0));
        for part in [&bytes[..], &self.memory[b][..]] {
            let mut r = Reader::new(part);
            while r.remaining() > 0 {
                let bad = |e: crate::codec::DecodeError| {
                    Error::corruption(spill_name(b), e.at as u64, e.what)
                };
                let key: KeyPath = r.array().map_err(bad)?;
                let len = r.u32().map_err(bad)? as usize;
                let value = r.slice(len).map_err(bad)?.to_vec();
                out.push((key, value));
            }
        }
        Ok(out)
    }

    fn remove_files(&self) {
        for (b, f) in self.files.iter().enumerate() {
            if f.is_some() {
                let _ = self.inner.log.storage.remove(&spill_name(b));
            }
        }
    }
}

/// A binary split of the key space whose leaves are numbered parts built elsewhere: how the
/// key space is cut into independently built regions, and how a built region's pages sit.
enum Tree {
    Empty,
    Part(usize),
    Split(Box<Tree>, Box<Tree>),
}

/// The directory subtree of `tree`, taking each part from `parts` (every part exactly once: a
/// part missing or used twice is a bug, never an empty subtree; `what` names the parts).
fn assemble(
    arena: &Arc<Arena>,
    hasher: Hasher,
    tree: &Tree,
    parts: &mut [Option<Subtree>],
    what: &str,
) -> Result<Subtree> {
    Ok(match tree {
        Tree::Empty => Subtree::empty(arena),
        Tree::Part(i) => parts
            .get_mut(*i)
            .and_then(Option::take)
            .ok_or_else(|| Error::internal(format!("bulk load: {what} {i} is missing")))?,
        Tree::Split(l, r) => Subtree::branch(
            hasher,
            assemble(arena, hasher, l, parts, what)?,
            assemble(arena, hasher, r, parts, what)?,
        ),
    })
}

/// One region to build: its position and the buckets it covers.
struct Job {
    prefix: Prefix,
    buckets: std::ops::Range<usize>,
}

fn plan(counts: &[u64], depth: usize, lo: usize, hi: usize, jobs: &mut Vec<Job>) -> Tree {
    let total: u64 = counts.get(lo..hi).map_or(0, |c| c.iter().sum());
    if total == 0 {
        return Tree::Empty;
    }
    if hi - lo == 1 || total <= SMALL_REGION_ENTRIES {
        let mut bits = [0u8; 32];
        bits[0] = lo as u8;
        jobs.push(Job {
            prefix: Prefix::of_key(&bits, depth),
            buckets: lo..hi,
        });
        return Tree::Part(jobs.len() - 1);
    }
    let mid = (lo + hi) / 2;
    Tree::Split(
        Box::new(plan(counts, depth + 1, lo, mid, jobs)),
        Box::new(plan(counts, depth + 1, mid, hi, jobs)),
    )
}

/// A region built in memory: its pages (each with its trie node, value-log pointers not yet
/// resolved) in key order, its shape (where its pages go), and the values that go to the value
/// log.
struct Built {
    shape: Tree,
    pages: Vec<(Page, Node)>,
    big_values: Vec<(KeyPath, Vec<u8>)>,
    entries: u64,
}

fn shape_of(
    hasher: Hasher,
    layout: Layout<'_>,
    seq: u64,
    pages: &mut Vec<(Page, Node)>,
) -> Result<Tree> {
    match layout {
        Layout::Page(_, entries) if entries.is_empty() => Ok(Tree::Empty),
        Layout::Page(prefix, entries) => {
            let page = Page::build(hasher, prefix, seq, &entries)
                .map_err(|e| Error::internal(format!("building a page: {e}")))?;
            let node = page.node(hasher);
            pages.push((page, node));
            Ok(Tree::Part(pages.len() - 1))
        }
        Layout::Split(l, r) => Ok(Tree::Split(
            Box::new(shape_of(hasher, *l, seq, pages)?),
            Box::new(shape_of(hasher, *r, seq, pages)?),
        )),
    }
}

fn build_region(
    hasher: Hasher,
    job: &Job,
    mut items: Vec<(KeyPath, Vec<u8>)>,
    seq: u64,
) -> Result<Built> {
    // Stable sort, then keep the last of equal keys: the last value given wins.
    items.sort_by_key(|(k, _)| *k);
    let mut unique: Vec<(KeyPath, Vec<u8>)> = Vec::with_capacity(items.len());
    let mut iter = items.into_iter().peekable();
    while let Some((key, value)) = iter.next() {
        if iter.peek().is_some_and(|(next, _)| *next == key) {
            continue;
        }
        unique.push((key, value));
    }
    let refs: Vec<(KeyPath, ValueRef<'_>)> = unique
        .iter()
        .map(|(key, value)| {
            let v = if value.len() > MAX_INLINE_VALUE_BYTES {
                ValueRef::External(ExternalValue {
                    loc: UNWRITTEN,
                    len: value.len() as u64,
                    hash: hasher.hash_value(value),
                })
            } else {
                ValueRef::Inline(value)
            };
            (*key, v)
        })
        .collect();
    let layout = Layout::build(job.prefix, refs, FILL_BYTES);
    let mut pages = Vec::new();
    let shape = shape_of(hasher, layout, seq, &mut pages)?;
    let entries = unique.len() as u64;
    let big_values = unique
        .into_iter()
        .filter(|(_, v)| v.len() > MAX_INLINE_VALUE_BYTES)
        .collect();
    Ok(Built {
        shape,
        pages,
        big_values,
        entries,
    })
}

/// Sequential writer of blocks into segments.
struct Output<'a> {
    inner: &'a Inner,
    table: SegmentTable,
    run: Option<(u64, BlockBuf)>,
    touched: BTreeSet<u32>,
    bytes: u64,
    pages: u64,
    values: u64,
}

impl Output<'_> {
    fn write(&mut self, blocks: &BlockBuf) -> Result<u64> {
        let n = u32::try_from(blocks.block_count())
            .map_err(|_| Error::internal("a record of more than 2^32 blocks"))?;
        let l = self.table.allocate(n)?;
        let extends = self.run.as_ref().is_some_and(|(start, buf)| {
            loc_segment(*start) == loc_segment(l)
                && u64::from(loc_block(*start)) + buf.block_count() as u64
                    == u64::from(loc_block(l))
                && buf.len() < WRITE_RUN_BYTES
        });
        if extends {
            if let Some((_, buf)) = self.run.as_mut() {
                buf.extend_from(blocks);
            }
        } else {
            self.flush()?;
            self.run = Some((l, blocks.clone()));
        }
        Ok(l)
    }

    fn flush(&mut self) -> Result<()> {
        if let Some((start, buf)) = self.run.take() {
            let segment = loc_segment(start);
            self.touched.insert(segment);
            let file = self.inner.log.segments.file(segment, true)?;
            file.write_at(buf.as_bytes(), loc_offset(start))
                .map_err(|e| Error::io("writing", segment_file_name(segment), e))?;
            self.bytes += buf.len() as u64;
        }
        Ok(())
    }

    /// Write a built region; returns its directory subtree.
    fn region(&mut self, arena: &Arc<Arena>, built: Built) -> Result<Subtree> {
        let hasher = self.inner.hasher;
        let mut locs = std::collections::HashMap::new();
        for (key, value) in &built.big_values {
            let rec = encode_value_record(key, value, &hasher.hash_value(value));
            let l = self.write(&rec)?;
            let blocks = value_blocks(value)?;
            self.table.value_written(l, blocks, DEFAULT_TABLE_ID, *key);
            locs.insert(*key, l);
            self.values += 1;
        }
        let mut written: Vec<Option<Subtree>> = Vec::with_capacity(built.pages.len());
        for (page, node) in built.pages {
            let page = match page
                .with_relocated_values(|key, _| locs.get(key).copied())
                .map_err(|e| Error::internal(format!("rebuilding a page: {e}")))?
            {
                Some(p) => p,
                None => page,
            };
            let checksum = page.checksum();
            let mut buf = BlockBuf::default();
            buf.push_bytes(page.bytes());
            let l = self.write(&buf)?;
            self.table.add_pages(l, 1);
            self.pages += 1;
            written.push(Some(Subtree::page(
                arena,
                &PageRef {
                    loc: PageLoc::Disk(l),
                    checksum,
                    node,
                    count: page.len() as u32,
                },
            )));
        }
        assemble(arena, hasher, &built.shape, &mut written, "page of a region")
    }
}

/// Read the input into the buckets; returns how many items it held.
fn partition<I>(
    buckets: &mut Buckets<'_>,
    items: I,
    progress: &mut dyn FnMut(BulkProgress),
) -> Result<u64>
where
    I: IntoIterator<Item = Result<(KeyPath, Vec<u8>)>>,
{
    let mut seen = 0u64;
    for item in items {
        let (key, value) = item?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(Error::ValueTooLarge {
                len: value.len() as u64,
                max: MAX_VALUE_BYTES as u64,
            });
        }
        buckets.push(&key, &value)?;
        seen += 1;
        if seen.is_multiple_of(PROGRESS_EVERY) {
            progress(BulkProgress {
                phase: BulkPhase::Partition,
                done: seen,
                total: 0,
            });
        }
    }
    progress(BulkProgress {
        phase: BulkPhase::Partition,
        done: seen,
        total: seen,
    });
    Ok(seen)
}

impl Inner {
    /// `Db::try_bulk_load` with `buffer_bytes` of input held in memory before spilling.
    pub(crate) fn bulk_load_buffered<I>(
        &self,
        items: I,
        progress: &mut dyn FnMut(BulkProgress),
        buffer_bytes: usize,
    ) -> Result<BulkReport>
    where
        I: IntoIterator<Item = Result<(KeyPath, Vec<u8>)>>,
    {
        self.bulk_load_checked(items, progress, buffer_bytes, None)
    }

    /// The bulk load: partition `items`, check their number against `expected`, build,
    /// publish.
    pub(crate) fn bulk_load_checked<I>(
        &self,
        items: I,
        progress: &mut dyn FnMut(BulkProgress),
        buffer_bytes: usize,
        expected: Option<u64>,
    ) -> Result<BulkReport>
    where
        I: IntoIterator<Item = Result<(KeyPath, Vec<u8>)>>,
    {
        let inner = self;
        let mut w = inner.log.writer.lock();
        w.begin_write()?;
        let head = inner.head();
        if head.seq != 0 || head.tables.total_len() != 0 || head.tables.count() != 1 {
            return Err(Error::NotEmpty("a bulk load"));
        }
        let mut buckets = Buckets::new(inner, buffer_bytes);
        // Partitioning only fills spill files: a failure there leaves the database as it was.
        // Building writes segment blocks: from there on a failure poisons the writer.
        let partitioned =
            partition(&mut buckets, items, progress).and_then(|seen| match expected {
                Some(expected) if expected != seen => Err(Error::CountMismatch {
                    expected,
                    received: seen,
                }),
                _ => Ok(seen),
            });
        let result = partitioned.and_then(|seen| {
            w.guarded(|w| self.build_and_publish(w, &mut buckets, seen, progress))
        });
        buckets.remove_files();
        result
    }

    /// Build the pages of the partitioned input, write them and publish the new version.
    fn build_and_publish(
        &self,
        w: &mut crate::log::writer::Writer,
        buckets: &mut Buckets<'_>,
        seen: u64,
        progress: &mut dyn FnMut(BulkProgress),
    ) -> Result<BulkReport> {
        let inner = self;
        let mut jobs = Vec::new();
        let plan = plan(&buckets.counts, 0, 0, 256, &mut jobs);
        let seq = 1u64;
        let mut out = Output {
            inner,
            table: w.table.clone(),
            run: None,
            touched: BTreeSet::new(),
            bytes: 0,
            pages: 0,
            values: 0,
        };
        let arena = inner.head().tables.arena().clone();
        let mut subtrees: Vec<Option<Subtree>> = vec![None; jobs.len()];
        let mut entries = 0u64;
        // Items read back from the buckets: every item partitioned, once.
        let mut read_back = 0u64;
        for (chunk_index, chunk) in jobs.chunks(WORKERS).enumerate() {
            let loaded: Vec<Vec<(KeyPath, Vec<u8>)>> = chunk
                .iter()
                .map(|job| {
                    let mut all = Vec::new();
                    for b in job.buckets.clone() {
                        all.extend(buckets.entries(b)?);
                    }
                    Ok(all)
                })
                .collect::<Result<_>>()?;
            read_back += loaded.iter().map(|items| items.len() as u64).sum::<u64>();
            let hasher = inner.hasher;
            let built: Vec<Built> = std::thread::scope(|s| {
                let handles: Vec<_> = chunk
                    .iter()
                    .zip(loaded)
                    .map(|(job, items)| s.spawn(move || build_region(hasher, job, items, seq)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .map_err(|_| Error::internal("a bulk-load worker panicked"))?
                    })
                    .collect::<Result<_>>()
            })?;
            for (i, b) in built.into_iter().enumerate() {
                entries += b.entries;
                let node = out.region(&arena, b)?;
                if let Some(slot) = subtrees.get_mut(chunk_index * WORKERS + i) {
                    *slot = Some(node);
                }
            }
            progress(BulkProgress {
                phase: BulkPhase::Build,
                done: entries,
                total: seen,
            });
        }
        out.flush()?;
        if read_back != seen {
            return Err(Error::internal(format!(
                "bulk load: {read_back} items read back from the partitions of {seen}"
            )));
        }

        let root = assemble(&arena, inner.hasher, &plan, &mut subtrees, "region")?;
        drop(subtrees);
        let tables = Tables::only_default(Directory::from_root(inner.hasher, root));

        // Durable data first, then the checkpoint that makes it the database.
        let root = tables.default_dir().root_node();
        let snapshot = inner
            .log
            .publish_checkpoint(w, seq, &tables, out.table, &out.touched)?;
        let version = Arc::new(Version {
            id: inner.versions.next_id(),
            seq,
            tables,
            overlay: None,
        });
        inner.reset_history(w, version, snapshot);
        inner.counters.written(out.bytes, out.pages);
        inner.counters.checkpoint();
        Ok(BulkReport {
            entries,
            pages: out.pages,
            values: out.values,
            bytes_written: out.bytes,
            root,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};

    #[test]
    fn a_failing_source_publishes_nothing_and_leaves_the_database_usable() {
        let db = Db::open_in_memory(Options::default()).unwrap();
        let items = (0..5_000u32).map(|i| {
            if i == 4_000 {
                Err(Error::InvalidArgument("record 4000 is malformed".into()))
            } else {
                Ok((Hasher::Blake3.hash_value(&i.to_le_bytes()), vec![1u8; 40]))
            }
        });
        let err = db
            .inner
            .bulk_load_buffered(items, &mut |_| {}, 10_000)
            .unwrap_err();
        assert!(err.to_string().contains("record 4000"), "{err}");
        assert_eq!((db.seq(), db.len()), (0, 0));
        assert!(
            db.inner
                .log
                .storage
                .list()
                .unwrap()
                .iter()
                .all(|n| !n.ends_with(".tmp")),
            "spill files are removed"
        );
        // Not poisoned: a good load succeeds afterwards.
        let good = (0..100u32).map(|i| (Hasher::Blake3.hash_value(&i.to_le_bytes()), vec![2u8]));
        assert_eq!(db.bulk_load(good, &mut |_| {}).unwrap().entries, 100);
    }

    #[test]
    fn a_source_of_another_length_than_expected_publishes_nothing() {
        let db = Db::open_in_memory(Options::default()).unwrap();
        let items =
            || (0..300u32).map(|i| Ok((Hasher::Blake3.hash_value(&i.to_le_bytes()), vec![1])));
        for expected in [299, 301, 0] {
            let options = BulkOptions {
                buffer_bytes: 1_000,
                expected_items: Some(expected),
            };
            let err = db
                .bulk_load_with(items(), &options, &mut |_| {})
                .unwrap_err();
            assert!(
                matches!(err, Error::CountMismatch { expected: e, received: 300 } if e == expected),
                "{err}"
            );
            assert_eq!((db.seq(), db.len()), (0, 0));
        }
        let options = BulkOptions {
            expected_items: Some(300),
            ..BulkOptions::default()
        };
        let report = db.bulk_load_with(items(), &options, &mut |_| {}).unwrap();
        assert_eq!((report.entries, db.len()), (300, 300));
    }

    #[test]
    fn spilled_buckets_give_the_same_database() {
        let items: Vec<(KeyPath, Vec<u8>)> = (0..5_000u32)
            .map(|i| {
                let k = Hasher::Blake3.hash_value(&(i % 4_000).to_le_bytes());
                let v = if i % 700 == 0 {
                    vec![3u8; 2_000]
                } else {
                    i.to_le_bytes().to_vec()
                };
                (k, v)
            })
            .collect();
        let spilled = Db::open_in_memory(Options::default()).unwrap();
        let report = spilled
            .inner
            .bulk_load_buffered(items.clone().into_iter().map(Ok), &mut |_| {}, 10_000)
            .unwrap();
        let in_memory = Db::open_in_memory(Options::default()).unwrap();
        let again = in_memory.bulk_load(items, &mut |_| {}).unwrap();
        assert_eq!(report.root, again.root);
        assert_eq!(report.entries, 4_000);
        assert!(spilled
            .inner
            .log
            .storage
            .list()
            .unwrap()
            .iter()
            .all(|n| !n.ends_with(".tmp")));
    }
}
