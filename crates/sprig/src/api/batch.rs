//! The write batch: reads (with read-your-writes) and changes on one version; `finish`, which
//! turns them into a [`Pending`] overlay with its new root and witness; and `Pending` itself,
//! a finished batch not committed yet, with its own reads and proofs, on which further batches
//! can build (see [`crate::state::version`] for an overlay's life cycle).

use crate::api::table::Table;
use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::resolve::ResolveFn;
use crate::state::directory::{Directory, PageLoc, PageRef};
use crate::state::page::{Page, MAX_INLINE_VALUE_BYTES, MAX_VALUE_BYTES};
use crate::state::prefix::Prefix;
use crate::state::tables::{TableId, DEFAULT_TABLE_ID};
use crate::state::version::Version;
use crate::state::version::{overlay_bytes, proof_buffer, OverlayParts, OverlayState};
use crate::state::versions::Pin;
use crate::state::{FastMap, FastSet};
use crate::stats::ReadKind;
use crate::telemetry::Phase;
use crate::write::cores::{both, map_on_cores};
use crate::write::engine::Inner;
use crate::write::read::{in_sorted_runs, key_order, RunDone};
use crate::write::rewrite::{
    branches_above, merge_sparse, rewrite_regions, rewrite_regions_loading, RegionWork,
    PARALLEL_MIN_REGIONS,
};
use crate::write::{Change, Region};
use sprig_core::proof::ProofNode;
use sprig_core::trie::{KeyPath, Node};
use sprig_core::{MultiProof, Witness};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// A change a batch holds for one key.
#[derive(Clone, Debug)]
enum Op {
    /// Set the value.
    Put(Vec<u8>),
    /// Remove the key.
    Delete,
    /// Combine with the stored value by the table's resolver (or set, when absent).
    Upsert(Vec<u8>),
}

/// Below this many keys, `get_many` finds their values on the calling thread alone.
const GET_MANY_PARALLEL_MIN: usize = 2048;

/// The reads, changes and loaded pages of one table in a batch.
#[derive(Default)]
struct TableBatch {
    /// Hashed, not ordered: `finish` sorts them once.
    changes: FastMap<KeyPath, Op>,
    reads: FastSet<KeyPath>,
    pages: FastMap<Prefix, Arc<Page>>,
    /// The region (in the base version) of every key whose page is loaded, so that a key is
    /// found in the directory once per batch, not at each of its prefetch, get and finish.
    located: FastMap<KeyPath, Prefix>,
}

impl TableBatch {
    /// Whether the batch sets `key` outright (put or delete), so that its stored value is never
    /// shown (an upsert's is: it resolves against it).
    fn overrides(&self, key: &KeyPath) -> bool {
        matches!(self.changes.get(key), Some(Op::Put(_) | Op::Delete))
    }
}

/// A set of reads and changes on one version, not yet applied. Changes to any number of
/// tables commit together, atomically.
///
/// Reads through the batch see its own writes and are recorded in its witness; `finish`
/// applies everything in memory (the new root), `Db::commit` makes it durable.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let (a, b) = (db.key_path(b"a"), db.key_path(b"b"));
/// let mut batch = db.begin();
/// batch.put(a, 5u64.to_le_bytes())?;
/// assert_eq!(batch.get(&a)?, Some(5u64.to_le_bytes().to_vec())); // sees its own write
/// assert_eq!(batch.get(&b)?, None); // a read, proven absent in the witness
/// batch.delete(a);
/// let pending = batch.finish()?;
/// assert_eq!(pending.witness().keys.len(), 2);
/// db.commit(pending)?;
/// assert!(db.is_empty());
/// # Ok(()) }
/// ```
pub struct WriteBatch {
    inner: Arc<Inner>,
    base: Arc<Version>,
    pin: Pin,
    tables: BTreeMap<TableId, TableBatch>,
}

fn check_value_len(len: usize) -> Result<()> {
    if len > MAX_VALUE_BYTES {
        return Err(Error::ValueTooLarge {
            len: len as u64,
            max: MAX_VALUE_BYTES as u64,
        });
    }
    Ok(())
}

impl WriteBatch {
    /// A batch on `base` (a committed version or an overlay) that something already pins
    /// (see [`Pin`]).
    pub(crate) fn on(inner: Arc<Inner>, base: Arc<Version>) -> WriteBatch {
        let pin = inner.versions.pin(base.committed_base_seq());
        WriteBatch::pinned(inner, base, pin)
    }

    /// A batch on `base`, kept readable by `pin`.
    pub(crate) fn pinned(inner: Arc<Inner>, base: Arc<Version>, pin: Pin) -> WriteBatch {
        WriteBatch {
            pin,
            inner,
            base,
            tables: BTreeMap::new(),
        }
    }

    /// The version this batch reads from and builds on.
    pub(crate) fn base(&self) -> &Arc<Version> {
        &self.base
    }

    /// The sequence number of the version this batch builds on.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// db.commit(db.begin().finish()?)?;
    /// let batch = db.begin();
    /// assert_eq!(batch.base_seq(), 1);
    /// # Ok(()) }
    /// ```
    pub fn base_seq(&self) -> u64 {
        self.base.seq
    }

    /// The number of distinct keys changed so far, in every table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// batch.put([1u8; 32], "b")?; // the same key again
    /// batch.delete([2u8; 32]);
    /// assert_eq!(batch.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.tables.values().map(|t| t.changes.len()).sum()
    }

    /// Whether nothing has been changed.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.get(&[1u8; 32])?;
    /// assert!(batch.is_empty()); // a read is not a change
    /// batch.delete([1u8; 32]);
    /// assert!(!batch.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The batch's state of `table`, checked to exist in the base version.
    fn table_mut(&mut self, table: &Table) -> Result<&mut TableBatch> {
        table.dir(&self.base.tables)?;
        Ok(self.tables.entry(table.id).or_default())
    }

    /// The value of `key` in the default table as this batch sees it (its own changes
    /// first). The key is part of the batch's witness.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let (a, b) = ([1u8; 32], [2u8; 32]);
    /// let mut batch = db.begin();
    /// batch.put(a, "stored")?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// assert_eq!(batch.get(&a)?, Some(b"stored".to_vec()));
    /// batch.put(a, "changed")?;
    /// assert_eq!(batch.get(&a)?, Some(b"changed".to_vec())); // its own write first
    /// assert_eq!(batch.get(&b)?, None);
    /// assert_eq!(batch.finish()?.witness().keys, [a, b]); // both reads are in the witness
    /// # Ok(()) }
    /// ```
    pub fn get(&mut self, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        self.get_in(&Table::default_table(), key)
    }

    /// The value of `key` in `table` as this batch sees it (its own changes first, an upsert
    /// resolved against the stored value). The key is part of the batch's witness.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let counters = db.create_table("counters", TableOptions::resolver("add-u64"))?;
    /// let mut batch = db.begin();
    /// batch.put_in(&counters, [1u8; 32], 2u64.to_le_bytes())?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.upsert_in(&counters, [1u8; 32], 3u64.to_le_bytes())?;
    /// let value = batch.get_in(&counters, &[1u8; 32])?; // the upsert, resolved
    /// assert_eq!(value, Some(5u64.to_le_bytes().to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn get_in(&mut self, table: &Table, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        let t = self.table_mut(table)?;
        t.reads.insert(*key);
        let op = t.changes.get(key).cloned();
        let stored = match op {
            Some(Op::Put(_) | Op::Delete) => None,
            Some(Op::Upsert(_)) | None => self.stored(table, key)?,
        };
        self.as_seen(table, key, op, stored)
    }

    /// The values of `keys` in the default table as this batch sees them (see
    /// [`WriteBatch::get`]), in the keys' order: their pages are read all in flight at once
    /// and, for many keys, the values are found on every core. Every key joins the witness.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.put([2u8; 32], "b")?;
    /// let values = batch.get_many(&[[2u8; 32], [3u8; 32], [1u8; 32]])?;
    /// assert_eq!(values, [Some(b"b".to_vec()), None, Some(b"a".to_vec())]);
    /// assert_eq!(batch.finish()?.witness().keys.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn get_many(&mut self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        self.get_many_in(&Table::default_table(), keys)
    }

    /// The values of `keys` in `table` as this batch sees them (see [`WriteBatch::get_in`]),
    /// in the keys' order, their pages read all in flight at once. Every key joins the
    /// witness.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let counters = db.create_table("counters", TableOptions::resolver("add-u64"))?;
    /// let mut batch = db.begin();
    /// batch.put_in(&counters, [1u8; 32], 2u64.to_le_bytes())?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.upsert_in(&counters, [1u8; 32], 3u64.to_le_bytes())?;
    /// let values = batch.get_many_in(&counters, &[[1u8; 32], [9u8; 32]])?;
    /// assert_eq!(values, [Some(5u64.to_le_bytes().to_vec()), None]); // the upsert, resolved
    /// # Ok(()) }
    /// ```
    pub fn get_many_in(&mut self, table: &Table, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        let stored = if keys.len() < GET_MANY_PARALLEL_MIN {
            let located = self.prefetch_located(table, keys)?;
            let t = self.table_mut(table)?;
            t.reads.extend(keys.iter().copied());
            let overridden: Vec<bool> = keys.iter().map(|k| t.overrides(k)).collect();
            keys.iter()
                .zip(&located)
                .zip(overridden)
                .map(|((key, prefix), overridden)| match overridden {
                    true => Ok(None),
                    false => self.value_at(table, prefix, key),
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            self.stored_streamed(table, keys)?
        };
        let t = self.table_mut(table)?;
        let ops: Vec<Option<Op>> = keys.iter().map(|k| t.changes.get(k).cloned()).collect();
        keys.iter()
            .zip(ops)
            .zip(stored)
            .map(|((key, op), stored)| self.as_seen(table, key, op, stored))
            .collect()
    }

    /// The stored values (in the base version) of a large set of `keys`, in their order; none
    /// for a key the batch puts or deletes, whose stored value it never shows. The keys join
    /// the batch's reads (its witness).
    ///
    /// Streamed ([`in_sorted_runs`]): each run of the sorted keys is located (those the batch
    /// has not located before), its pages the batch does not hold read, and its values found,
    /// on one core; a region whose keys straddle runs is read by the first of them, and the
    /// later runs' keys in it are answered from its page once every run is done.
    fn stored_streamed(&mut self, table: &Table, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        self.table_mut(table)?;
        let runs = {
            let this = &*self;
            let dir = table.dir(&this.base.tables)?;
            let t = this
                .tables
                .get(&table.id)
                .ok_or_else(|| Error::internal("a batch's table vanished while reading"))?;
            in_sorted_runs(keys, |run, before| {
                this.inner.read_run(
                    &this.base,
                    table.id,
                    dir,
                    run,
                    before,
                    |k| t.located.get(k).copied(),
                    |p| t.pages.get(p),
                    |k| t.overrides(k),
                    ReadKind::Batch,
                )
            })
        };
        let runs: Vec<RunDone> = runs.into_iter().collect::<Result<_>>()?;
        // Keys of regions a run before theirs read, answered from that run's page.
        let t = self
            .tables
            .get(&table.id)
            .ok_or_else(|| Error::internal("a batch's table vanished while reading"))?;
        let late = self
            .inner
            .answer_deferred(&self.base, table.id, keys, &runs, |k| t.overrides(k))?;
        let mut stored: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let (mut found, mut loaded) = (Vec::new(), Vec::new());
        for run in runs {
            for (i, value) in run.answers {
                let slot = stored
                    .get_mut(i)
                    .ok_or_else(|| Error::internal("an answer for no key"))?;
                *slot = value;
            }
            // A deferred key's region is known too.
            let mut run_found = run.plan.found;
            for (i, prefix) in run.plan.deferred {
                let key = keys
                    .get(i)
                    .ok_or_else(|| Error::internal("a deferred key out of range"))?;
                run_found.push((*key, prefix));
            }
            found.push(run_found);
            loaded.push((run.plan.wanted, run.loaded));
        }
        for (i, value) in late {
            let slot = stored
                .get_mut(i)
                .ok_or_else(|| Error::internal("a deferred answer for no key"))?;
            *slot = value;
        }
        // The batch's maps filled on two cores, each grown once (extending a map a run at a
        // time rehashed it as it grew); every key asked joins the witness.
        let t = self
            .tables
            .get_mut(&table.id)
            .ok_or_else(|| Error::internal("a batch's table vanished while reading"))?;
        let TableBatch {
            located,
            pages,
            reads,
            ..
        } = t;
        both(
            true,
            || {
                located.reserve(found.iter().map(Vec::len).sum());
                located.extend(found.into_iter().flatten());
            },
            || {
                pages.reserve(loaded.iter().map(|(w, _)| w.len()).sum());
                for (wanted, run_pages) in loaded {
                    pages.extend(wanted.into_iter().map(|(p, _)| p).zip(run_pages));
                }
                reads.extend(keys.iter().copied());
            },
        );
        Ok(stored)
    }

    /// A key's value as the batch sees it: its change `op` in the batch (if any) over its
    /// `stored` value in the base version.
    fn as_seen(
        &self,
        table: &Table,
        key: &KeyPath,
        op: Option<Op>,
        stored: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        match op {
            Some(Op::Put(v)) => Ok(Some(v)),
            Some(Op::Delete) => Ok(None),
            Some(Op::Upsert(v)) => match stored {
                Some(old) => resolve(&self.resolver(table)?, table, key, &old, &v).map(Some),
                None => Ok(Some(v)),
            },
            None => Ok(stored),
        }
    }

    /// The value of `key` in `table` in the base version.
    fn stored(&mut self, table: &Table, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        self.prefetch_in(table, &[*key])?;
        self.loaded_value(table, key)
    }

    /// The value of `key` in `table` in the base version, its page already loaded (by a
    /// prefetch, which also recorded the key's region).
    fn loaded_value(&self, table: &Table, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        let prefix = match self.tables.get(&table.id).and_then(|t| t.located.get(key)) {
            Some(prefix) => *prefix,
            None => table.dir(&self.base.tables)?.locate(key).0,
        };
        self.value_at(table, &prefix, key)
    }

    /// The value of `key` in `table` in the base version, from the loaded page of its region
    /// `prefix` (none loaded: the region has no page, so no value).
    fn value_at(&self, table: &Table, prefix: &Prefix, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        let page = self.tables.get(&table.id).and_then(|t| t.pages.get(prefix));
        match page.and_then(|p| p.get(key)) {
            Some(v) => self
                .inner
                .value_bytes(&self.base, table.id, key, v)
                .map(Some),
            None => Ok(None),
        }
    }

    /// The resolver of `table`, from its description in the base version.
    fn resolver(&self, table: &Table) -> Result<Arc<ResolveFn>> {
        let def = self
            .base
            .tables
            .def(table.id)
            .ok_or_else(|| Error::NoSuchTable(table.name.to_string()))?;
        let name = def
            .resolver
            .ok_or_else(|| Error::NoResolver(def.name.clone()))?;
        self.inner
            .options
            .resolvers
            .get(&name)
            .ok_or(Error::ResolverMissing {
                table: def.name,
                resolver: name,
            })
    }

    /// Set `key` to `value` in the default table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let key = db.key_path(b"alice");
    /// let mut batch = db.begin();
    /// batch.put(key, 100u64.to_le_bytes())?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().get(&key)?, Some(100u64.to_le_bytes().to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn put(&mut self, key: KeyPath, value: impl Into<Vec<u8>>) -> Result<()> {
        self.put_in(&Table::default_table(), key, value)
    }

    /// Set `key` to `value` in `table`.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().get_in(&blocks, &[1u8; 32])?, Some(b"block 1".to_vec()));
    /// assert_eq!(db.view().get(&[1u8; 32])?, None); // not in the default table
    /// # Ok(()) }
    /// ```
    pub fn put_in(&mut self, table: &Table, key: KeyPath, value: impl Into<Vec<u8>>) -> Result<()> {
        let value = value.into();
        check_value_len(value.len())?;
        self.table_mut(table)?.changes.insert(key, Op::Put(value));
        Ok(())
    }

    /// Remove `key` from the default table (a no-op if absent).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.delete([1u8; 32]);
    /// batch.delete([2u8; 32]); // absent: nothing to do
    /// db.commit(batch.finish()?)?;
    /// assert!(db.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn delete(&mut self, key: KeyPath) {
        self.tables
            .entry(DEFAULT_TABLE_ID)
            .or_default()
            .changes
            .insert(key, Op::Delete);
    }

    /// Remove `key` from `table` (a no-op if absent).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.delete_in(&blocks, [1u8; 32])?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().len_in(&blocks)?, 0);
    /// # Ok(()) }
    /// ```
    pub fn delete_in(&mut self, table: &Table, key: KeyPath) -> Result<()> {
        self.table_mut(table)?.changes.insert(key, Op::Delete);
        Ok(())
    }

    /// Upsert `value` at `key` in the default table. The default table has no resolver, so
    /// this fails with [`Error::NoResolver`]: upsert into a table created with one
    /// ([`WriteBatch::upsert_in`]).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// let refused = batch.upsert([1u8; 32], 1u64.to_le_bytes());
    /// assert!(matches!(refused, Err(sprig::Error::NoResolver(_))));
    /// # Ok(()) }
    /// ```
    pub fn upsert(&mut self, key: KeyPath, value: impl Into<Vec<u8>>) -> Result<()> {
        self.upsert_in(&Table::default_table(), key, value)
    }

    /// Upsert `value` at `key` in `table`: when the batch is finished, the key holds
    /// `resolve(stored, value)` if it held a value, else `value`, where `resolve` is the
    /// table's resolver (see [`crate::resolve`]). Several upserts of a key in one batch are
    /// combined in order; a put or delete before them is their stored value. No read happens
    /// now: the stored value comes from the page `finish` reads anyway, so an upsert costs what
    /// a put costs. Fails at once if the table has no resolver or this handle lacks it.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let counters = db.create_table("counters", TableOptions::resolver("add-u64"))?;
    /// let mut batch = db.begin();
    /// batch.upsert_in(&counters, [1u8; 32], 2u64.to_le_bytes())?; // absent: set to 2
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.upsert_in(&counters, [1u8; 32], 3u64.to_le_bytes())?; // 2 + 3
    /// batch.upsert_in(&counters, [1u8; 32], 4u64.to_le_bytes())?; // + 4
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().get_in(&counters, &[1u8; 32])?, Some(9u64.to_le_bytes().to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn upsert_in(
        &mut self,
        table: &Table,
        key: KeyPath,
        value: impl Into<Vec<u8>>,
    ) -> Result<()> {
        let value = value.into();
        check_value_len(value.len())?;
        // The table first (absent, or filled by a union), then its resolver.
        self.table_mut(table)?;
        let resolver = self.resolver(table)?;
        let t = self.table_mut(table)?;
        let op = match t.changes.get(&key) {
            None => Op::Upsert(value),
            Some(Op::Delete) => Op::Put(value),
            Some(Op::Put(old)) => Op::Put(resolve(&resolver, table, &key, old, &value)?),
            Some(Op::Upsert(old)) => Op::Upsert(resolve(&resolver, table, &key, old, &value)?),
        };
        t.changes.insert(key, op);
        Ok(())
    }

    /// Read the pages of `keys` in the default table now, all in flight at once, so later
    /// gets and `finish` find them in memory.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options};
    /// let db = Db::open_in_memory(Options { page_cache_bytes: 0, ..Options::default() })?;
    /// let keys: Vec<_> = (0u32..1000).map(|i| db.key_path(&i.to_le_bytes())).collect();
    /// db.bulk_load(keys.iter().map(|k| (*k, b"v".to_vec())), &mut |_| {})?;
    /// let mut batch = db.begin();
    /// batch.prefetch(&keys)?; // every page, in one round of reads
    /// let reads = db.stats().batch_page_reads;
    /// assert!(reads > 0);
    /// for key in &keys {
    ///     assert!(batch.get(key)?.is_some());
    /// }
    /// assert_eq!(db.stats().batch_page_reads, reads); // no read more
    /// # Ok(()) }
    /// ```
    pub fn prefetch(&mut self, keys: &[KeyPath]) -> Result<()> {
        self.prefetch_in(&Table::default_table(), keys)
    }

    /// Read the pages of `keys` in `table` now, all in flight at once.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.prefetch_in(&blocks, &[[1u8; 32], [2u8; 32]])?;
    /// assert_eq!(batch.get_in(&blocks, &[1u8; 32])?, Some(b"block 1".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn prefetch_in(&mut self, table: &Table, keys: &[KeyPath]) -> Result<()> {
        self.prefetch_located(table, keys).map(drop)
    }

    /// [`WriteBatch::prefetch_in`], returning the region (in the base version) of each key.
    fn prefetch_located(&mut self, table: &Table, keys: &[KeyPath]) -> Result<Vec<Prefix>> {
        let (located, wanted, found) = self.locate(table, keys)?;
        let loaded = self.inner.load_pages(&wanted, ReadKind::Batch)?;
        let t = self.tables.entry(table.id).or_default();
        for ((prefix, _), page) in wanted.into_iter().zip(loaded) {
            t.pages.insert(prefix, page);
        }
        // Only now, with their pages loaded, are these keys' regions known to be in memory.
        t.located.reserve(found.len());
        t.located.extend(found);
        Ok(located)
    }

    /// The region (in the base version) of each key; the pages of those regions the batch has
    /// not loaded yet, each once; and the keys located here for the first time, with their
    /// regions.
    #[allow(clippy::type_complexity)]
    fn locate(
        &mut self,
        table: &Table,
        keys: &[KeyPath],
    ) -> Result<(Vec<Prefix>, Vec<(Prefix, PageRef)>, Vec<(KeyPath, Prefix)>)> {
        let dir = table.dir(&self.base.tables)?;
        let t = self.tables.entry(table.id).or_default();
        let mut wanted: Vec<(Prefix, PageRef)> = Vec::new();
        let mut located = Vec::with_capacity(keys.len());
        let mut found = Vec::with_capacity(keys.len());
        let mut queued = FastSet::default();
        // The keys not located yet (and where each goes: its place holds the root until then),
        // found in the directory together (their walks overlap); the others from what the
        // batch located before, in the same pass.
        let mut new: Vec<KeyPath> = Vec::new();
        let mut new_at: Vec<usize> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match t.located.get(key) {
                Some(prefix) => located.push(*prefix),
                None => {
                    located.push(Prefix::root());
                    new.push(*key);
                    new_at.push(i);
                }
            }
        }
        if new.is_empty() {
            return Ok((located, wanted, found));
        }
        // Large sets are cut in chunks located on every core.
        let chunks: Vec<&[KeyPath]> = new.chunks(LOCATE_CHUNK).collect();
        let mut fresh = map_on_cores(&chunks, 2, |chunk| dir.locate_many(chunk))
            .into_iter()
            .flatten();
        for (key, i) in new.iter().zip(new_at) {
            let (prefix, page) = fresh
                .next()
                .ok_or_else(|| Error::internal("the directory located fewer keys than asked"))?;
            let slot = located
                .get_mut(i)
                .ok_or_else(|| Error::internal("a new key's place beyond the keys"))?;
            *slot = prefix;
            found.push((*key, prefix));
            if let Some(r) = page {
                if !t.pages.contains_key(&prefix) && queued.insert(prefix) {
                    wanted.push((prefix, r));
                }
            }
        }
        Ok((located, wanted, found))
    }

    /// Apply the batch in memory: an overlay with the new roots, and the witness of every key
    /// read or written against the base roots, per table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// let pending = batch.finish()?; // the new root, in memory
    /// let root = pending.root();
    /// assert_eq!(db.root(), [0u8; 32]); // the database is unchanged...
    /// pending.witness().verify(db.hasher(), &pending.base_root())?;
    /// assert_eq!(db.commit(pending)?.root, root); // ...until the commit
    /// # Ok(()) }
    /// ```
    pub fn finish(mut self) -> Result<Pending> {
        let _span =
            tracing::debug_span!(target: "sprig", "sprig.finish", base = self.base.seq).entered();
        let started = std::time::Instant::now();
        self.base.check_usable(self.inner.head().seq)?;
        let new_seq = self
            .base
            .seq
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit sequence numbers exhausted"))?;
        let stamp = crate::state::page::Stamp {
            seq: new_seq,
            synced: self.inner.options.sync == crate::options::SyncPolicy::Always,
        };
        // The default table always has a witness, even when the batch does not touch it.
        self.tables.entry(DEFAULT_TABLE_ID).or_default();
        let ids: Vec<TableId> = self.tables.keys().copied().collect();
        let mut tables = self.base.tables.clone();
        let mut parts = OverlayParts::default();
        let mut hashes_needed = 0u64;
        // The cleaner's read-ahead starts (once) as the first large table is rewritten.
        let mut read_ahead = true;
        for id in ids {
            let def = self
                .base
                .tables
                .def(id)
                .ok_or_else(|| Error::internal("a batch holds a table its base lacks"))?;
            let table = Table::of(&def);
            let dir = self.finish_table(
                &table,
                stamp,
                &mut parts,
                &mut hashes_needed,
                &mut read_ahead,
            )?;
            tables = tables
                .with_dir(id, dir)
                .map_err(|e| Error::internal(format!("finishing a batch: {e}")))?;
        }
        self.inner.counters.hashes_needed(hashes_needed);
        for (_, subtree) in parts.regions.values().flatten() {
            parts.new_pages += subtree.pages_below();
        }
        let charge = self.inner.overlay_memory.charge(
            overlay_bytes(parts.new_pages, &parts.new_values),
            self.inner.options.max_overlay_bytes,
        )?;
        let version = Arc::new(Version {
            id: self.inner.versions.next_id(),
            seq: new_seq,
            tables,
            overlay: Some(OverlayState::new(self.base.clone(), parts, charge)),
        });
        self.inner
            .counters
            .metrics
            .finish_seconds
            .record(started.elapsed().as_secs_f64());
        Ok(Pending {
            inner: self.inner,
            version,
            _pin: Arc::new(self.pin),
        })
    }

    /// Apply the batch's changes to one table: its new directory; regions, values, witness
    /// and counts go to `out`, the hashes they need at the least to `hashes_needed`. Starts
    /// the cleaner's read-ahead if the table is large and `read_ahead` (then cleared).
    fn finish_table(
        &mut self,
        table: &Table,
        stamp: crate::state::page::Stamp,
        out: &mut OverlayParts,
        hashes_needed: &mut u64,
        read_ahead: &mut bool,
    ) -> Result<Directory> {
        let located_started = Instant::now();
        let hasher = self.inner.hasher;
        let id = table.id;
        let base_dir = table.dir(&self.base.tables)?.clone();
        let mut touched: Vec<KeyPath> = Vec::new();
        if let Some(t) = self.tables.get(&id) {
            touched.extend(t.changes.keys().copied());
            touched.extend(t.reads.iter().copied());
        }
        let upserts = self
            .tables
            .get(&id)
            .is_some_and(|t| t.changes.values().any(|op| matches!(op, Op::Upsert(_))));
        let ops: Vec<(KeyPath, Op)> = self
            .tables
            .get_mut(&id)
            .map(|t| std::mem::take(&mut t.changes))
            .unwrap_or_default()
            .into_iter()
            .collect();
        // The keys and the changes sorted side by side, on two cores for a large batch.
        let (touched, ops) = both(
            touched.len() >= PARALLEL_MIN_REGIONS,
            move || {
                touched.sort_unstable_by(key_order);
                touched.dedup();
                touched
            },
            move || {
                let mut ops = ops;
                ops.sort_unstable_by(|(a, _), (b, _)| key_order(a, b));
                ops
            },
        );
        // Each key's region, found once (the loads and the cut into regions below use it).
        // Upserts resolve against the stored values, so with any (or few keys) the pages are
        // loaded first; otherwise those still on the SSD are read while the regions whose
        // pages are at hand are rewritten, and each of the others as soon as its page arrives.
        let (located, unloaded) = if upserts || touched.len() < PARALLEL_MIN_REGIONS {
            (self.prefetch_located(table, &touched)?, Vec::new())
        } else {
            let (located, wanted, _) = self.locate(table, &touched)?;
            (located, wanted)
        };
        // Upserts take the stored value from the pages just loaded.
        let mut resolver = None;
        let mut changes: Vec<Change> = Vec::with_capacity(ops.len());
        for (key, op) in ops {
            let value = match op {
                Op::Put(v) => Some(v),
                Op::Delete => None,
                Op::Upsert(v) => match self.loaded_value(table, &key)? {
                    Some(old) => {
                        let f = match &resolver {
                            Some(f) => f,
                            None => resolver.insert(self.resolver(table)?),
                        };
                        Some(resolve(f, table, &key, &old, &v)?)
                    }
                    None => Some(v),
                },
            };
            changes.push((key, value));
        }
        // The batch is done with its pages: the regions take them.
        let mut pages = self
            .tables
            .get_mut(&id)
            .map(|t| std::mem::take(&mut t.pages))
            .unwrap_or_default();

        // Cut the (sorted) keys and changes into runs, one per region they fall in: one pass
        // over each (a region holds a few keys; a binary search of the rest per region cost
        // ~15 prefix comparisons a region, 9 ms a batch at transfer 2^20).
        let mut works: Vec<RegionWork> = Vec::new();
        let mut c = 0usize;
        let mut k = 0usize;
        while let Some(prefix) = located.get(k).copied() {
            let k_end = k + touched[k..]
                .iter()
                .take_while(|key| prefix.contains(key))
                .count();
            let c_end = c + changes[c..]
                .iter()
                .take_while(|(key, _)| prefix.contains(key))
                .count();
            works.push(RegionWork {
                prefix,
                // Taken, not cloned: the batch is done with them (a clone and the map's drop
                // would touch every page's count twice).
                page: pages.remove(&prefix),
                keys: k..k_end,
                changes: c..c_end,
            });
            k = k_end;
            c = c_end;
        }
        self.inner
            .counters
            .phase(Phase::Locate, located_started.elapsed());
        // The rewrite below keeps the cores busy and the SSD idle (but for the pages it loads):
        // the next commit's cleaning reads its pages meanwhile.
        if *read_ahead && works.len() >= PARALLEL_MIN_REGIONS {
            *read_ahead = false;
            let skip: FastSet<u64> = unloaded
                .iter()
                .filter_map(|(_, r)| match r.loc {
                    PageLoc::Disk(l) => Some(l),
                    PageLoc::Memory(_) => None,
                })
                .collect();
            // Each changed region is about one new page (values in the value log, splits and
            // merges aside): the commit's size, which sets what its cleaning moves.
            let incoming = works.iter().filter(|w| !w.changes.is_empty()).count();
            self.inner
                .start_read_ahead(&self.base, incoming as u64, &skip)?;
        }
        let arena = base_dir.arena();
        let rewrite_started = Instant::now();
        let (rewritten, proofs) = if unloaded.is_empty() {
            rewrite_regions(arena, hasher, stamp, &works, &touched, &changes)?
        } else {
            rewrite_regions_loading(
                &self.inner,
                arena,
                stamp,
                &works,
                &unloaded,
                &touched,
                &changes,
            )?
        };

        self.inner
            .counters
            .phase(Phase::Rewrite, rewrite_started.elapsed());
        // The proof nodes below each region, in key order (the order the witness's walk
        // reaches the regions in), and how many there are.
        let below_nodes = proofs.node_count();
        let mut regions: Vec<Region> = Vec::new();
        *hashes_needed += branches_above(
            works
                .iter()
                .zip(&rewritten)
                .filter(|(_, r)| r.subtree.is_some())
                .map(|(w, _)| w.prefix),
        );
        for (work, r) in works.iter().zip(rewritten) {
            *hashes_needed += r.hashes_needed;
            out.freed_values.extend(r.freed);
            out.freed_unwritten
                .extend(r.freed_unwritten.into_iter().map(|k| (id, k)));
            out.splits += r.splits;
            if let Some(subtree) = r.subtree {
                regions.push((work.prefix, subtree));
            }
        }
        for (key, v) in changes {
            if let Some(v) = v.filter(|v| v.len() > MAX_INLINE_VALUE_BYTES) {
                out.new_values.insert((id, key), v);
            }
        }
        // The witness (a walk of the base directory) and the new directory (path copies and
        // merges) need nothing of each other: a large batch computes them on two cores.
        let prove = || -> Result<Vec<ProofNode>> {
            // Above the regions, two nodes (the branch and its sibling) per directory node on
            // the keys' paths: about ten per region at utxo's sparse batches, two at transfer's
            // dense ones (a larger witness grows the vector once). The buffer is the last
            // dropped witness's, warm, when there is one.
            let mut proof = proof_buffer(below_nodes + 16 * works.len());
            let mut next = works.iter().zip(proofs.iter());
            base_dir
                .prove(
                    &touched,
                    &mut |prefix, _, _, out| match next.next() {
                        Some((w, nodes)) if w.prefix == *prefix => {
                            out.extend_from_slice(nodes);
                            Ok(())
                        }
                        _ => Err(crate::state::directory::DirectoryError::PageMissing(
                            *prefix,
                        )),
                    },
                    &mut proof,
                )
                .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
            Ok(proof)
        };
        let inner = &self.inner;
        let witness_started = Instant::now();
        let (proof, merged) = both(works.len() >= PARALLEL_MIN_REGIONS, prove, || {
            merge_sparse(inner, &base_dir, regions, stamp)
        });
        inner
            .counters
            .phase(Phase::Witness, witness_started.elapsed());
        out.witnesses.insert(
            id,
            Witness {
                keys: touched,
                proof: MultiProof { nodes: proof? },
            },
        );
        // The regions' old pages (the last reference to those the cache no longer holds) and
        // their proof buffers are freed off the finishing path: ~14 ms a mixed 2^22 batch.
        self.inner.drop_off_path(works.len(), (works, proofs));
        let (dir, regions, merges) = merged?;
        out.merges += merges;
        if !regions.is_empty() {
            out.regions.insert(id, regions);
        }
        Ok(dir)
    }
}

/// Keys located together by one core (their walks down the directory go in step).
const LOCATE_CHUNK: usize = 1024;

/// Resolve an upsert of `new` on `old` at `key` of `table`; a refusal is an invalid argument
/// naming the key and table, and a result above [`MAX_VALUE_BYTES`] is
/// [`Error::ValueTooLarge`], as a put of it would be.
fn resolve(
    f: &Arc<ResolveFn>,
    table: &Table,
    key: &KeyPath,
    old: &[u8],
    new: &[u8],
) -> Result<Vec<u8>> {
    let resolved = f(old, new).map_err(|why| {
        Error::InvalidArgument(format!(
            "upsert of key {} in table {:?}: {why}",
            crate::codec::hex(key),
            table.name()
        ))
    })?;
    check_value_len(resolved.len())?;
    Ok(resolved)
}

/// Uncommitted changes: a finished batch, on top of a committed version or another overlay.
/// Cheap to clone; clones are the same overlay.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut batch = db.begin();
/// batch.put([1u8; 32], b"block 1".to_vec())?;
/// let block1 = batch.finish()?; // root and witness known, nothing written yet
/// let mut next = block1.begin()?; // build block 2 on the unfinalized block 1
/// next.put([2u8; 32], b"block 2".to_vec())?;
/// let block2 = next.finish()?;
/// assert_eq!(block2.view()?.len(), 2);
/// assert_eq!(db.len(), 0); // nothing committed yet
/// let info = db.commit(block2)?; // commits block 1, then block 2
/// assert_eq!((info.seq, db.len()), (2, 2));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Pending {
    pub(crate) inner: Arc<Inner>,
    pub(crate) version: Arc<Version>,
    pub(crate) _pin: Arc<Pin>,
}

impl Pending {
    /// The default table's root after this overlay (the state root of a database without
    /// other tables).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// let pending = batch.finish()?;
    /// let root = pending.root(); // known before the commit
    /// assert_eq!(db.commit(pending)?.root, root);
    /// # Ok(()) }
    /// ```
    pub fn root(&self) -> Node {
        self.version.tables.default_dir().root_node()
    }

    /// The database root after this overlay: the root of every table's root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// let pending = batch.finish()?;
    /// let db_root = pending.db_root();
    /// assert_ne!(db_root, db.db_root());
    /// assert_eq!(db.commit(pending)?.db_root, db_root);
    /// # Ok(()) }
    /// ```
    pub fn db_root(&self) -> Node {
        self.version.tables.db_root()
    }

    /// `table`'s root after this overlay.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// let pending = batch.finish()?;
    /// let root = pending.table_root(&blocks)?;
    /// assert_eq!(pending.root(), [0u8; 32]); // the default table is still empty
    /// db.commit(pending)?;
    /// assert_eq!(db.view().table_root(&blocks)?, root);
    /// # Ok(()) }
    /// ```
    pub fn table_root(&self, table: &Table) -> Result<Node> {
        Ok(table.dir(&self.version.tables)?.root_node())
    }

    /// The default table's root in the version this overlay builds on.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.put([2u8; 32], "b")?;
    /// let pending = batch.finish()?;
    /// assert_eq!(pending.base_root(), db.root()); // the root the witness is against
    /// assert_ne!(pending.root(), pending.base_root());
    /// # Ok(()) }
    /// ```
    pub fn base_root(&self) -> Node {
        self.state()
            .map_or([0; 32], |o| o.parent().tables.default_dir().root_node())
    }

    /// The sequence number of the version this overlay builds on.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// db.commit(db.begin().finish()?)?;
    /// let block2 = db.begin().finish()?;
    /// let block3 = block2.begin()?.finish()?; // on the uncommitted block 2
    /// assert_eq!((block2.base_seq(), block3.base_seq()), (1, 2));
    /// # Ok(()) }
    /// ```
    pub fn base_seq(&self) -> u64 {
        self.version.seq.saturating_sub(1)
    }

    /// The sequence number this overlay gets when committed.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let pending = db.begin().finish()?;
    /// assert_eq!(pending.seq(), 1);
    /// assert_eq!(db.commit(pending)?.seq, 1);
    /// # Ok(()) }
    /// ```
    pub fn seq(&self) -> u64 {
        self.version.seq
    }

    /// The number of entries in this overlay's default table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// batch.put([2u8; 32], "b")?;
    /// let pending = batch.finish()?;
    /// assert_eq!((pending.len(), db.len()), (2, 0));
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> u64 {
        self.version.tables.default_dir().len()
    }

    /// Whether this overlay's state is empty.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// let pending = batch.finish()?;
    /// assert!(!pending.is_empty());
    /// let mut batch = pending.begin()?;
    /// batch.delete([1u8; 32]);
    /// assert!(batch.finish()?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The witness of every key of the default table the batch read or wrote, against the
    /// base root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let (a, b) = ([1u8; 32], [2u8; 32]);
    /// let mut batch = db.begin();
    /// batch.put(a, "old")?;
    /// db.commit(batch.finish()?)?;
    /// let mut batch = db.begin();
    /// batch.get(&a)?;
    /// batch.put(b, "new")?;
    /// let pending = batch.finish()?;
    /// // What a stateless client checks: the reads, then the new root.
    /// let witness = pending.witness().verify(db.hasher(), &pending.base_root())?;
    /// witness.check_value(&a, Some(b"old"))?;
    /// let new_root = witness.apply(&[(b, Some(db.hasher().hash_value(b"new")))])?;
    /// assert_eq!(new_root, pending.root());
    /// # Ok(()) }
    /// ```
    pub fn witness(&self) -> &Witness {
        /// Every `Pending` is made by `finish` and so has overlay state with the default
        /// table's witness; this never shows.
        static NONE: Witness = Witness {
            keys: Vec::new(),
            proof: sprig_core::MultiProof { nodes: Vec::new() },
        };
        self.state()
            .and_then(|o| o.parts.witnesses.get(&DEFAULT_TABLE_ID))
            .unwrap_or(&NONE)
    }

    /// The witness of every key of `table` the batch read or wrote, against the table's root
    /// in the base version; `None` if the batch did not touch the table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let (blocks, other) = (
    ///     db.create_table("blocks", TableOptions::default())?,
    ///     db.create_table("other", TableOptions::default())?,
    /// );
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// let pending = batch.finish()?;
    /// let witness = pending.witness_in(&blocks).expect("the batch wrote to it");
    /// witness.verify(db.hasher(), &db.view().table_root(&blocks)?)?;
    /// assert!(pending.witness_in(&other).is_none());
    /// # Ok(()) }
    /// ```
    pub fn witness_in(&self, table: &Table) -> Option<&Witness> {
        self.state().and_then(|o| o.parts.witnesses.get(&table.id))
    }

    /// Whether this overlay has been committed.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let pending = db.begin().finish()?;
    /// assert!(!pending.is_committed());
    /// db.commit(pending.clone())?; // clones are the same overlay
    /// assert!(pending.is_committed());
    /// # Ok(()) }
    /// ```
    pub fn is_committed(&self) -> bool {
        self.state().is_some_and(OverlayState::is_committed)
    }

    pub(crate) fn state(&self) -> Option<&OverlayState> {
        self.version.overlay.as_ref()
    }

    /// A read view of this overlay's state: values, proofs and witnesses against its root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// let pending = batch.finish()?;
    /// let view = pending.view()?; // the uncommitted state
    /// assert_eq!(view.get(&[1u8; 32])?, Some(b"v".to_vec()));
    /// let proof = view.path_proof(&[1u8; 32])?; // against the overlay's root
    /// proof.verify_value(db.hasher(), &pending.root(), &[1u8; 32], Some(b"v"))?;
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> Result<ReadView> {
        self.version.check_usable(self.inner.head().seq)?;
        Ok(ReadView::of(&self.inner, self.version.clone()))
    }

    /// Fail if this overlay was discarded or superseded.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let pending = db.begin().finish()?;
    /// pending.check()?;
    /// pending.clone().discard();
    /// assert!(matches!(pending.check(), Err(sprig::Error::Discarded { .. })));
    /// # Ok(()) }
    /// ```
    pub fn check(&self) -> Result<()> {
        self.version.check_usable(self.inner.head().seq)
    }

    /// Start a batch on top of this overlay (a block on this block, or a fork when several
    /// batches start on the same overlay).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "block 1")?;
    /// let block1 = batch.finish()?;
    /// let (mut a, mut b) = (block1.begin()?, block1.begin()?); // two forks of block 1
    /// a.put([2u8; 32], "fork a")?;
    /// b.put([2u8; 32], "fork b")?;
    /// let (fork_a, fork_b) = (a.finish()?, b.finish()?);
    /// assert_eq!(fork_a.view()?.get(&[1u8; 32])?, Some(b"block 1".to_vec()));
    /// db.commit(fork_a)?; // block 1, then fork a
    /// assert!(matches!(fork_b.check(), Err(sprig::Error::Superseded { .. })));
    /// # Ok(()) }
    /// ```
    pub fn begin(&self) -> Result<WriteBatch> {
        self.version.check_usable(self.inner.head().seq)?;
        Ok(WriteBatch::on(self.inner.clone(), self.version.clone()))
    }

    /// Drop this overlay: it and every overlay built on it can no longer be read or committed.
    /// A committed overlay is unaffected.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let block1 = db.begin().finish()?;
    /// let block2 = block1.begin()?.finish()?;
    /// block1.discard();
    /// assert!(matches!(db.commit(block2), Err(sprig::Error::Discarded { .. })));
    /// assert_eq!(db.seq(), 0);
    /// # Ok(()) }
    /// ```
    pub fn discard(self) {
        if let Some(o) = self.state() {
            o.discard();
        }
    }

    /// Bytes of memory this overlay's changes hold (pages and values).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], vec![0u8; 10_000])?;
    /// let pending = batch.finish()?;
    /// assert!(pending.memory_bytes() >= 10_000);
    /// assert_eq!(db.stats().overlay_bytes, pending.memory_bytes()); // the only overlay
    /// # Ok(()) }
    /// ```
    pub fn memory_bytes(&self) -> u64 {
        self.state().map_or(0, OverlayState::memory_bytes)
    }

    /// The overlay's version, giving up this handle's pin (a commit takes over).
    pub(crate) fn into_version(self) -> Arc<Version> {
        self.version
    }
}
