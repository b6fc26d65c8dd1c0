//! Read views: a consistent, read-only view of one version (committed, retained or an
//! overlay), pinned so that no commit deletes what it reads: values, proofs and witnesses.

use crate::api::table::{table_infos, Table, TableInfo};
use crate::error::{Error, Result};
use crate::state::directory::Directory;
use crate::state::prefix::Prefix;
use crate::state::tables::TableId;
use crate::state::version::Version;
use crate::state::versions::Pin;
use crate::stats::ReadKind;
use crate::write::engine::Inner;
use crate::write::read::{in_sorted_runs, RunDone};
use sprig_core::proof::{MultiProof, PathProof};
use sprig_core::tables::{table_root_proof, TableProof};
use sprig_core::trie::{KeyPath, Node};
use sprig_core::{Hasher, Witness};
use std::sync::Arc;

/// The fewest keys a view's lookup streams in sorted runs on every core (see
/// `ReadView::lookup_streamed`); fewer are located, read and answered in one pass.
const LOOKUP_STREAMED_MIN: usize = 2048;

/// A consistent, read-only view of one committed version. Commits that happen after the view
/// was taken never change what it sees.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let key = db.key_path(b"k");
/// let mut batch = db.begin();
/// batch.put(key, b"old".to_vec())?;
/// db.commit(batch.finish()?)?;
/// let view = db.view();
/// let mut batch = db.begin();
/// batch.put(key, b"new".to_vec())?;
/// db.commit(batch.finish()?)?;
/// assert_eq!(view.get(&key)?.as_deref(), Some(&b"old"[..])); // unchanged by the commit
/// let proof = view.path_proof(&key)?; // against view.root()
/// proof.verify_value(db.hasher(), &view.root(), &key, Some(b"old"))?;
/// # Ok(()) }
/// ```
pub struct ReadView {
    pub(crate) inner: Arc<Inner>,
    pub(crate) version: Arc<Version>,
    _pin: Pin,
}

fn sorted_distinct(keys: &[KeyPath]) -> Vec<KeyPath> {
    let mut k = keys.to_vec();
    k.sort_unstable();
    k.dedup();
    k
}

impl Clone for ReadView {
    /// Another view of the same version, with its own pin.
    fn clone(&self) -> ReadView {
        ReadView::of(&self.inner, self.version.clone())
    }
}

impl ReadView {
    /// A view of `version`, pinning the committed version it rests on; for a version that
    /// something already pins (see [`Pin`]).
    pub(crate) fn of(inner: &Arc<Inner>, version: Arc<Version>) -> ReadView {
        let pin = inner.versions.pin(version.committed_base_seq());
        ReadView::pinned(inner, version, pin)
    }

    /// A view of `version`, kept readable by `pin`.
    pub(crate) fn pinned(inner: &Arc<Inner>, version: Arc<Version>, pin: Pin) -> ReadView {
        ReadView {
            _pin: pin,
            inner: inner.clone(),
            version,
        }
    }

    /// The hasher of the database this view reads (its proofs are encoded with it).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::core::PathProof;
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let view = db.view();
    /// let proof = view.path_proof(&[1u8; 32])?;
    /// let bytes = proof.encode(view.hasher()); // for a client that checks it
    /// assert_eq!(PathProof::decode(&bytes, view.hasher())?, proof);
    /// # Ok(()) }
    /// ```
    pub fn hasher(&self) -> Hasher {
        self.inner.hasher
    }

    /// The version's commit sequence number (for an overlay: the one it gets when committed).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// db.commit(db.begin().finish()?)?;
    /// assert_eq!(db.view().seq(), 1);
    /// let pending = db.begin().finish()?;
    /// assert_eq!(pending.view()?.seq(), 2); // an overlay: the number it gets when committed
    /// # Ok(()) }
    /// ```
    pub fn seq(&self) -> u64 {
        self.version.seq
    }

    /// The default table's root (the state root of a database without other tables).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let view = db.view();
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(view.root(), [0u8; 32]); // the view's version: still empty
    /// assert_eq!(db.view().root(), db.root());
    /// # Ok(()) }
    /// ```
    pub fn root(&self) -> Node {
        self.version.tables.default_dir().root_node()
    }

    /// The database root: the root of every table's root (see [`sprig_core::tables`]).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// db.create_table("blocks", TableOptions::default())?;
    /// let info = db.commit(db.begin().finish()?)?;
    /// let view = db.view();
    /// assert_eq!(view.db_root(), info.db_root);
    /// assert_ne!(view.db_root(), view.root()); // two tables: the root of their roots
    /// # Ok(()) }
    /// ```
    pub fn db_root(&self) -> Node {
        self.version.tables.db_root()
    }

    /// `table`'s root in this version.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// assert_ne!(view.table_root(&blocks)?, [0u8; 32]);
    /// assert_eq!(view.root(), [0u8; 32]); // the default table is empty
    /// # Ok(()) }
    /// ```
    pub fn table_root(&self, table: &Table) -> Result<Node> {
        Ok(table.dir(&self.version.tables)?.root_node())
    }

    /// Every table of this version, the default table first.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let before = db.view();
    /// db.create_table("blocks", TableOptions::default())?;
    /// assert_eq!(before.tables().len(), 1); // the default table only
    /// let names: Vec<String> = db.view().tables().iter().map(|t| t.table.name().into()).collect();
    /// assert_eq!(names, ["default", "blocks"]);
    /// # Ok(()) }
    /// ```
    pub fn tables(&self) -> Vec<TableInfo> {
        table_infos(&self.version.tables)
    }

    /// The table named `name` in this version.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let before = db.view();
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// assert_eq!(db.view().table("blocks")?, blocks);
    /// assert!(matches!(before.table("blocks"), Err(Error::NoSuchTable(_))));
    /// # Ok(()) }
    /// ```
    pub fn table(&self, name: &str) -> Result<Table> {
        Table::named(&self.version.tables, name)
    }

    /// The number of entries in this version's default table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// batch.put([2u8; 32], "b")?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> u64 {
        self.version.tables.default_dir().len()
    }

    /// The number of entries in `table`.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!((db.view().len_in(&blocks)?, db.view().len()), (1, 0));
    /// # Ok(()) }
    /// ```
    pub fn len_in(&self, table: &Table) -> Result<u64> {
        Ok(table.dir(&self.version.tables)?.len())
    }

    /// Whether this version's default table holds no entry.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let empty = db.view();
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// db.commit(batch.finish()?)?;
    /// assert!(empty.is_empty() && !db.view().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The region (trie position) of the page or empty region holding `key` in the default
    /// table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let key = db.key_path(b"k");
    /// assert_eq!(db.view().region_of(&key).depth(), 0); // empty: one region, every key
    /// let items = (0u32..5000).map(|i| (db.key_path(&i.to_le_bytes()), vec![1u8; 32]));
    /// db.bulk_load(items, &mut |_| {})?;
    /// let region = db.view().region_of(&key);
    /// assert!(region.depth() > 0 && region.contains(&key)); // one page of many
    /// # Ok(()) }
    /// ```
    pub fn region_of(&self, key: &KeyPath) -> Prefix {
        self.version.tables.default_dir().locate(key).0
    }

    /// The value of `key` in the default table: one SSD read unless the page is cached (plus
    /// one for a value stored in the value log).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "v")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// assert_eq!(view.get(&[1u8; 32])?, Some(b"v".to_vec()));
    /// assert_eq!(view.get(&[2u8; 32])?, None);
    /// # Ok(()) }
    /// ```
    pub fn get(&self, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        self.get_in(&Table::default_table(), key)
    }

    /// The value of `key` in `table`. While an incremental union fills the table, a key it
    /// has not merged yet is looked up in its inputs (one read per input) and combined.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// assert_eq!(view.get_in(&blocks, &[1u8; 32])?, Some(b"block 1".to_vec()));
    /// assert_eq!(view.get(&[1u8; 32])?, None); // another table
    /// # Ok(()) }
    /// ```
    pub fn get_in(&self, table: &Table, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        if self.version.tables.union(table.id).is_some() {
            return Ok(self.get_many_in(table, &[*key])?.pop().flatten());
        }
        let Some(page) = self.page_holding(table, key)? else {
            return Ok(None);
        };
        match page.get(key) {
            Some(v) => self
                .inner
                .value_bytes(&self.version, table.id, key, v)
                .map(Some),
            None => Ok(None),
        }
    }

    /// The page of `table` whose region holds `key` (one read, or the cache), if any.
    pub(crate) fn page_holding(
        &self,
        table: &Table,
        key: &KeyPath,
    ) -> Result<Option<Arc<crate::state::page::Page>>> {
        let dir = table.dir(&self.version.tables)?;
        let (prefix, page) = dir.locate(key);
        let Some(r) = page else {
            return Ok(None);
        };
        self.inner
            .load_pages(&[(prefix, r)], ReadKind::Lookup)?
            .pop()
            .map(Some)
            .ok_or_else(|| Error::internal("a page asked for was not loaded"))
    }

    /// The values of many keys of the default table, with all their page reads in flight at
    /// once.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// batch.put([3u8; 32], "c")?;
    /// db.commit(batch.finish()?)?;
    /// let values = db.view().get_many(&[[3u8; 32], [2u8; 32], [1u8; 32]])?; // in the keys' order
    /// assert_eq!(values, [Some(b"c".to_vec()), None, Some(b"a".to_vec())]);
    /// # Ok(()) }
    /// ```
    pub fn get_many(&self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        self.get_many_in(&Table::default_table(), keys)
    }

    /// The values of many keys of `table`, with all their page reads in flight at once (see
    /// [`ReadView::get_in`] for a table an incremental union fills).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let values = db.view().get_many_in(&blocks, &[[1u8; 32], [2u8; 32]])?;
    /// assert_eq!(values, [Some(b"block 1".to_vec()), None]);
    /// # Ok(()) }
    /// ```
    pub fn get_many_in(&self, table: &Table, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        if let Some(u) = self.version.tables.union(table.id) {
            return self.union_get_many(table, u, keys);
        }
        self.lookup(table.dir(&self.version.tables)?, table.id, keys)
    }

    /// The values of `keys` in `dir`, whose values belong to table `table`; a large set
    /// streamed (see [`ReadView::lookup_streamed`]).
    pub(crate) fn lookup(
        &self,
        dir: &Directory,
        table: TableId,
        keys: &[KeyPath],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        if keys.len() >= LOOKUP_STREAMED_MIN {
            return self.lookup_streamed(dir, table, keys);
        }
        let (pages, regions) = self.inner.pages_for(dir, keys, ReadKind::Lookup)?;
        keys.iter()
            .zip(&regions)
            .map(
                |(key, prefix)| match pages.get(prefix).and_then(|p| p.get(key)) {
                    Some(v) => self
                        .inner
                        .value_bytes(&self.version, table, key, v)
                        .map(Some),
                    None => Ok(None),
                },
            )
            .collect()
    }

    /// [`ReadView::lookup`] of many keys, in sorted runs on every core ([`in_sorted_runs`]):
    /// each run located, its pages read and its values found on one core, so one core's
    /// directory walk and value reads overlap the other's SSD reads. A key of a region a run
    /// before its own reads is answered from that run's page once every run is done.
    fn lookup_streamed(
        &self,
        dir: &Directory,
        table: TableId,
        keys: &[KeyPath],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let runs = in_sorted_runs(keys, |run, before| {
            self.inner.read_run(
                &self.version,
                table,
                dir,
                run,
                before,
                |_| None,
                |_| None,
                |_| false,
                ReadKind::Lookup,
            )
        });
        let runs: Vec<RunDone> = runs.into_iter().collect::<Result<_>>()?;
        let late = self
            .inner
            .answer_deferred(&self.version, table, keys, &runs, |_| false)?;
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for (i, value) in runs.into_iter().flat_map(|d| d.answers).chain(late) {
            let slot = out
                .get_mut(i)
                .ok_or_else(|| Error::internal("an answer for no key"))?;
            *slot = value;
        }
        Ok(out)
    }

    /// A proof of inclusion or exclusion of `key` against the default table's root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let (a, b) = ([1u8; 32], [2u8; 32]);
    /// let mut batch = db.begin();
    /// batch.put(a, "v")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// view.path_proof(&a)?.verify_value(db.hasher(), &view.root(), &a, Some(b"v"))?;
    /// view.path_proof(&b)?.verify_value(db.hasher(), &view.root(), &b, None)?; // b is absent
    /// # Ok(()) }
    /// ```
    pub fn path_proof(&self, key: &KeyPath) -> Result<PathProof> {
        self.path_proof_in(&Table::default_table(), key)
    }

    /// A proof of inclusion or exclusion of `key` against `table`'s root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let proof = view.path_proof_in(&blocks, &[1u8; 32])?;
    /// proof.verify_value(db.hasher(), &view.table_root(&blocks)?, &[1u8; 32], Some(b"block 1"))?;
    /// # Ok(()) }
    /// ```
    pub fn path_proof_in(&self, table: &Table, key: &KeyPath) -> Result<PathProof> {
        let dir = table.dir(&self.version.tables)?;
        let (pages, _) = self.inner.pages_for(dir, &[*key], ReadKind::Proof)?;
        dir.path_proof(key, &|p| pages.get(p).map(|a| a.as_ref()))
            .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))
    }

    /// A proof of `key` in `table` against the database root ([`ReadView::db_root`]): the
    /// table's root under the database root, and the key under the table's root. Check it with
    /// [`TableProof::verify`] (in `sprig-core`).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let proof = view.table_proof(&blocks, &[1u8; 32])?; // checked against the one db root
    /// proof.verify_value(db.hasher(), &view.db_root(), "blocks", &[1u8; 32], Some(b"block 1"))?;
    /// # Ok(()) }
    /// ```
    pub fn table_proof(&self, table: &Table, key: &KeyPath) -> Result<TableProof> {
        let key_proof = self.path_proof_in(table, key)?;
        let roots = self.version.tables.roots();
        Ok(TableProof {
            table_root: table.dir(&self.version.tables)?.root_node(),
            table: table_root_proof(
                self.inner.hasher,
                roots.iter().map(|(n, r)| (n.as_str(), *r)),
                table.name(),
            ),
            key: key_proof,
        })
    }

    /// One proof of many keys of the default table, sharing common siblings.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::core::Lookup;
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut batch = db.begin();
    /// batch.put([1u8; 32], "a")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let proof = view.multi_proof(&[[1u8; 32], [2u8; 32]])?;
    /// let verified = proof.verify(db.hasher(), &view.root())?;
    /// assert!(matches!(verified.lookup(&[1u8; 32])?, Lookup::Present(_)));
    /// assert_eq!(verified.lookup(&[2u8; 32])?, Lookup::Absent);
    /// # Ok(()) }
    /// ```
    pub fn multi_proof(&self, keys: &[KeyPath]) -> Result<MultiProof> {
        self.multi_proof_in(&Table::default_table(), keys)
    }

    /// One proof of many keys of `table`, sharing common siblings.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{core::Lookup, Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let proof = view.multi_proof_in(&blocks, &[[1u8; 32], [2u8; 32]])?;
    /// let verified = proof.verify(db.hasher(), &view.table_root(&blocks)?)?;
    /// assert_eq!(verified.lookup(&[2u8; 32])?, Lookup::Absent);
    /// # Ok(()) }
    /// ```
    pub fn multi_proof_in(&self, table: &Table, keys: &[KeyPath]) -> Result<MultiProof> {
        let dir = table.dir(&self.version.tables)?;
        let keys = sorted_distinct(keys);
        let (pages, _) = self.inner.pages_for(dir, &keys, ReadKind::Proof)?;
        let mut nodes = Vec::new();
        let hasher = self.inner.hasher;
        dir.prove(
            &keys,
            &mut |prefix, page_ref, keys, out| match page_ref {
                Some(_) => {
                    let page = pages.get(prefix).ok_or(
                        crate::state::directory::DirectoryError::PageMissing(*prefix),
                    )?;
                    page.prove(hasher, keys, out);
                    Ok(())
                }
                None => {
                    out.push(sprig_core::ProofNode::Terminator);
                    Ok(())
                }
            },
            &mut nodes,
        )
        .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
        Ok(MultiProof { nodes })
    }

    /// A witness of `keys` of the default table against its root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let (a, b) = ([1u8; 32], [2u8; 32]);
    /// let mut batch = db.begin();
    /// batch.put(a, "v")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let witness = view.witness(&[b, a, b])?;
    /// assert_eq!(witness.keys, [a, b]); // sorted and distinct
    /// let verified = witness.verify(db.hasher(), &view.root())?;
    /// verified.check_value(&a, Some(b"v"))?;
    /// verified.check_value(&b, None)?;
    /// # Ok(()) }
    /// ```
    pub fn witness(&self, keys: &[KeyPath]) -> Result<Witness> {
        self.witness_in(&Table::default_table(), keys)
    }

    /// A witness of `keys` of `table` against the table's root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&blocks, [1u8; 32], "block 1")?;
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let witness = view.witness_in(&blocks, &[[1u8; 32]])?;
    /// let verified = witness.verify(db.hasher(), &view.table_root(&blocks)?)?;
    /// verified.check_value(&[1u8; 32], Some(b"block 1"))?;
    /// # Ok(()) }
    /// ```
    pub fn witness_in(&self, table: &Table, keys: &[KeyPath]) -> Result<Witness> {
        let keys = sorted_distinct(keys);
        let proof = self.multi_proof_in(table, &keys)?;
        Ok(Witness { keys, proof })
    }
}
