//! Union of tables: a new table holding every key of its inputs, equal keys combined by the
//! new table's resolver in input order (left-biased: the first input's value wins when it has
//! none).
//!
//! An immediate union is one commit from a merge of the inputs' sorted scans, streamed
//! through the import path, so memory stays bounded whatever the tables' sizes; the new table
//! is created by that same commit, so a crash leaves either no table or the whole union.
//!
//! An incremental union starts with a commit that reads nothing: it creates the table and
//! freezes the inputs (see [`crate::state::union`]). Lookups in the table are served from
//! the part merged so far and, above it, from the inputs. Each step the caller supplies
//! merges the next keys (at least the asked-for number of input entries, whole keys) into the
//! table with one import commit that also records how far the merge came, so a crash leaves
//! the union at its last step. When every input entry is merged the table is an ordinary one.

use crate::api::db::Db;
use crate::api::table::{Table, TableOptions};
use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::log::record::UnionChange;
use crate::resolve::ResolveFn;
use crate::state::union::UnionState;
use crate::write::catalog::CatalogChange;
use crate::write::engine::Inner;
use crate::write::import::ImportTarget;
use crate::write::{CommitInfo, ImportOptions};
use sprig_core::trie::KeyPath;
use std::cell::Cell;
use std::iter::Peekable;
use std::sync::Arc;

/// What one step of an incremental union did.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, Options, TableOptions};
/// let db = Db::open_in_memory(Options::default())?;
/// let a = db.create_table("a", TableOptions::default())?;
/// let b = db.create_table("b", TableOptions::default())?;
/// let mut batch = db.begin();
/// for i in 1u8..=4 {
///     batch.put_in(if i % 2 == 0 { &a } else { &b }, [i; 32], vec![i])?;
/// }
/// db.commit(batch.finish()?)?;
/// let (both, _) = db.start_union("both", &[&a, &b], TableOptions::default())?;
/// let step = db.supply_union_work(&both, 1)?;
/// assert_eq!((step.merged, step.remaining, step.commit.is_some()), (1, 3, true));
/// while db.supply_union_work(&both, 2)?.remaining > 0 {}
/// let done = db.supply_union_work(&both, 2)?; // nothing left
/// assert_eq!((done.merged, done.remaining, done.commit), (0, 0, None));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnionWork {
    /// Input entries merged by this step.
    pub merged: u64,
    /// Input entries still to merge (0: the union is complete).
    pub remaining: u64,
    /// The step's commit (none when there was nothing to do).
    pub commit: Option<CommitInfo>,
}

/// Combine `value` into what equal keys of earlier inputs gave (`acc`), in input order.
fn combine(
    resolver: Option<&ResolveFn>,
    acc: Option<Vec<u8>>,
    value: Vec<u8>,
    key: &KeyPath,
) -> Result<Vec<u8>> {
    match (acc, resolver) {
        (None, _) => Ok(value),
        (Some(acc), Some(f)) => f(&acc, &value).map_err(|why| {
            Error::InvalidArgument(format!("union of key {}: {why}", crate::codec::hex(key)))
        }),
        (Some(acc), None) => Ok(acc),
    }
}

impl Inner {
    /// The resolver a union into table `table` combines with: none for a table without one,
    /// [`Error::ResolverMissing`] when `resolver` is not registered with this handle.
    fn union_resolver(
        &self,
        table: &str,
        resolver: Option<&str>,
    ) -> Result<Option<Arc<ResolveFn>>> {
        let Some(r) = resolver else {
            return Ok(None);
        };
        self.options
            .resolvers
            .get(r)
            .map(Some)
            .ok_or_else(|| Error::ResolverMissing {
                table: table.to_string(),
                resolver: r.to_string(),
            })
    }
}

/// The sorted merge of several sorted entry streams, equal keys combined.
struct Merge<I: Iterator<Item = Result<(KeyPath, Vec<u8>)>>> {
    inputs: Vec<Peekable<I>>,
    resolver: Option<Arc<ResolveFn>>,
    failed: bool,
    /// Input entries taken so far.
    consumed: u64,
}

impl<I: Iterator<Item = Result<(KeyPath, Vec<u8>)>>> Iterator for Merge<I> {
    type Item = Result<(KeyPath, Option<Vec<u8>>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        // The smallest key at the head of any input (an error ends the merge with it).
        let mut least: Option<KeyPath> = None;
        for input in &mut self.inputs {
            match input.peek() {
                Some(Ok((k, _))) if least.is_none_or(|l| *k < l) => least = Some(*k),
                Some(Ok(_)) => {}
                Some(Err(_)) => {
                    self.failed = true;
                    return input.next().map(|r| r.map(|(k, v)| (k, Some(v))));
                }
                None => {}
            }
        }
        let key = least?;
        let mut value: Option<Vec<u8>> = None;
        for input in &mut self.inputs {
            if !matches!(input.peek(), Some(Ok((k, _))) if *k == key) {
                continue;
            }
            let Some(Ok((_, v))) = input.next() else {
                continue;
            };
            self.consumed += 1;
            match combine(self.resolver.as_deref(), value.take(), v, &key) {
                Ok(v) => value = Some(v),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        value.map(|v| Ok((key, Some(v))))
    }
}

/// The keys a union step merges: whole keys of a merge until at least `budget` input entries
/// are taken; `progress` says the last key yielded and the entries taken.
struct Step<'p, I: Iterator<Item = Result<(KeyPath, Vec<u8>)>>> {
    merge: Merge<I>,
    budget: u64,
    progress: &'p Cell<(Option<KeyPath>, u64)>,
}

impl<I: Iterator<Item = Result<(KeyPath, Vec<u8>)>>> Iterator for Step<'_, I> {
    type Item = Result<(KeyPath, Option<Vec<u8>>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.merge.consumed >= self.budget {
            return None;
        }
        let item = self.merge.next()?;
        if let Ok((key, _)) = &item {
            self.progress.set((Some(*key), self.merge.consumed));
        }
        Some(item)
    }
}

impl ReadView {
    /// The values of `keys` in `table`, which the incremental union `state` fills: merged keys
    /// from the table, the others from the inputs, combined in input order.
    pub(crate) fn union_get_many(
        &self,
        table: &Table,
        state: &UnionState,
        keys: &[KeyPath],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let dir = table.any_dir(&self.version.tables)?;
        let (merged, pending): (Vec<usize>, Vec<usize>) =
            (0..keys.len()).partition(|i| state.merged(&keys[*i]));
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let merged_keys: Vec<KeyPath> = merged.iter().map(|i| keys[*i]).collect();
        for (i, v) in merged.iter().zip(self.lookup(dir, table.id, &merged_keys)?) {
            out[*i] = v;
        }
        if pending.is_empty() {
            return Ok(out);
        }
        let pending_keys: Vec<KeyPath> = pending.iter().map(|i| keys[*i]).collect();
        let mut resolver: Option<Option<Arc<ResolveFn>>> = None;
        for input in &state.inputs {
            let values = self.lookup(input, table.id, &pending_keys)?;
            for ((i, key), v) in pending.iter().zip(&pending_keys).zip(values) {
                let Some(v) = v else { continue };
                let acc = out[*i].take();
                if acc.is_some() && resolver.is_none() {
                    let def = self
                        .version
                        .tables
                        .def(table.id)
                        .ok_or_else(|| Error::NoSuchTable(table.name().to_string()))?;
                    resolver = Some(
                        self.inner
                            .union_resolver(&def.name, def.resolver.as_deref())?,
                    );
                }
                out[*i] = Some(combine(
                    resolver.as_ref().and_then(|r| r.as_deref()),
                    acc,
                    v,
                    key,
                )?);
            }
        }
        Ok(out)
    }
}

impl Db {
    /// Create table `name` as the union of `inputs` (as of the latest version): every key of
    /// any input, with the values of a key present in several inputs combined in input order
    /// by the resolver of `options` (see [`crate::resolve`]), or the first input's value when
    /// there is none. One durable commit creates and fills the table; the inputs are
    /// unchanged, and the result is an ordinary table.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let a = db.create_table("a", TableOptions::default())?;
    /// let b = db.create_table("b", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&a, [1u8; 32], "a1")?;
    /// batch.put_in(&a, [2u8; 32], "a2")?;
    /// batch.put_in(&b, [2u8; 32], "b2")?;
    /// db.commit(batch.finish()?)?;
    /// let (both, _) = db.union("both", &[&a, &b], TableOptions::resolver("concat"))?;
    /// let view = db.view(); // an ordinary table at once
    /// assert_eq!(view.get_in(&both, &[1u8; 32])?, Some(b"a1".to_vec()));
    /// assert_eq!(view.get_in(&both, &[2u8; 32])?, Some(b"a2b2".to_vec())); // combined
    /// # Ok(()) }
    /// ```
    pub fn union(
        &self,
        name: &str,
        inputs: &[&Table],
        options: TableOptions,
    ) -> Result<(Table, CommitInfo)> {
        let resolver = self
            .inner
            .union_resolver(name, options.resolver.as_deref())?;
        let view = self.view();
        for t in inputs {
            view.len_in(t)?;
        }
        let merge = Merge {
            inputs: inputs.iter().map(|t| view.iter_in(t).peekable()).collect(),
            resolver,
            failed: false,
            consumed: 0,
        };
        let info = self.inner.import_sorted(
            ImportTarget::New {
                name: name.to_string(),
                resolver: options.resolver,
            },
            merge,
            &ImportOptions::default(),
        )?;
        Ok((self.table(name)?, info))
    }

    /// Start an incremental union: create table `name` as the union of `inputs` (as they are
    /// in the latest version; they stay free to change) without reading anything. The table
    /// serves lookups at once ([`ReadView::get_in`] consults the inputs for keys not merged
    /// yet); it takes no writes, has no root and is left out of the database root until the
    /// union completes (else [`Error::UnionInProgress`]). Drive it with
    /// [`Db::supply_union_work`]. While it runs, the segments holding the inputs' data are
    /// neither cleaned nor deleted, so disk use can grow past the space bound.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Error, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let a = db.create_table("a", TableOptions::default())?;
    /// let b = db.create_table("b", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&a, [2u8; 32], "a2")?;
    /// batch.put_in(&b, [2u8; 32], "b2")?;
    /// db.commit(batch.finish()?)?;
    /// let (both, _) = db.start_union("both", &[&a, &b], TableOptions::resolver("concat"))?;
    /// assert_eq!(db.view().get_in(&both, &[2u8; 32])?, Some(b"a2b2".to_vec())); // from the inputs
    /// assert!(matches!(db.view().table_root(&both), Err(Error::UnionInProgress { .. })));
    /// db.supply_union_work(&both, 10)?; // merges everything: an ordinary table now
    /// assert_eq!(db.view().len_in(&both)?, 1);
    /// # Ok(()) }
    /// ```
    pub fn start_union(
        &self,
        name: &str,
        inputs: &[&Table],
        options: TableOptions,
    ) -> Result<(Table, CommitInfo)> {
        let (info, id) = self.inner.change_catalog(CatalogChange::StartUnion {
            name: name.to_string(),
            resolver: options.resolver,
            inputs: inputs.iter().map(|t| t.id).collect(),
        })?;
        Ok((
            Table {
                id,
                name: Arc::from(name),
            },
            info,
        ))
    }

    /// The input entries an incremental union into `table` still has to merge (0 for a table
    /// no union is filling).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let a = db.create_table("a", TableOptions::default())?;
    /// let b = db.create_table("b", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&a, [1u8; 32], "a1")?;
    /// batch.put_in(&b, [2u8; 32], "b2")?;
    /// db.commit(batch.finish()?)?;
    /// let (both, _) = db.start_union("both", &[&a, &b], TableOptions::default())?;
    /// assert_eq!(db.remaining_union_debt(&both)?, 2); // input entries
    /// db.supply_union_work(&both, 1)?;
    /// assert_eq!(db.remaining_union_debt(&both)?, 1);
    /// assert_eq!(db.remaining_union_debt(&a)?, 0); // no union fills it
    /// # Ok(()) }
    /// ```
    pub fn remaining_union_debt(&self, table: &Table) -> Result<u64> {
        let head = self.inner.head();
        table.any_dir(&head.tables)?;
        Ok(head.tables.union(table.id).map_or(0, |u| u.remaining()))
    }

    /// Do at least `work` input entries of the incremental union into `table` (whole keys:
    /// all inputs' entries of the last key merged are taken together) with one durable
    /// commit; the union completes with the step that merges its last entry. A table no union
    /// fills has nothing to do. Memory is bounded as an import's, whatever `work` is.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let a = db.create_table("a", TableOptions::default())?;
    /// let b = db.create_table("b", TableOptions::default())?;
    /// let mut batch = db.begin();
    /// batch.put_in(&a, [1u8; 32], "a1")?;
    /// batch.put_in(&a, [2u8; 32], "a2")?;
    /// batch.put_in(&b, [2u8; 32], "b2")?;
    /// db.commit(batch.finish()?)?;
    /// let (both, _) = db.start_union("both", &[&a, &b], TableOptions::default())?;
    /// let step = db.supply_union_work(&both, 2)?; // [1; 32], then both entries of [2; 32]
    /// assert_eq!((step.merged, step.remaining), (3, 0));
    /// assert_eq!(db.view().get_in(&both, &[2u8; 32])?, Some(b"a2".to_vec())); // the first input's
    /// # Ok(()) }
    /// ```
    pub fn supply_union_work(&self, table: &Table, work: u64) -> Result<UnionWork> {
        let view = self.view();
        table.any_dir(&view.version.tables)?;
        let Some(state) = view.version.tables.union(table.id).cloned() else {
            return Ok(UnionWork {
                merged: 0,
                remaining: 0,
                commit: None,
            });
        };
        if work == 0 {
            return Ok(UnionWork {
                merged: 0,
                remaining: state.remaining(),
                commit: None,
            });
        }
        let def = view
            .version
            .tables
            .def(table.id)
            .ok_or_else(|| Error::NoSuchTable(table.name().to_string()))?;
        let start = state
            .next_key()
            .ok_or_else(|| Error::internal("a union past the last key is not complete"))?;
        let merge = Merge {
            inputs: state
                .inputs
                .iter()
                .map(|d| view.frozen_range(d.clone(), table.id, start).peekable())
                .collect(),
            resolver: self
                .inner
                .union_resolver(&def.name, def.resolver.as_deref())?,
            failed: false,
            consumed: 0,
        };
        let progress = Cell::new((None, 0u64));
        let step = Step {
            merge,
            budget: work,
            progress: &progress,
        };
        let info = self.inner.import_sorted_then(
            ImportTarget::UnionStep(table.id),
            step,
            &ImportOptions::default(),
            || {
                // Under the writer's lock: the union must still be where this step began.
                let head = self.inner.head();
                if !head
                    .tables
                    .union(table.id)
                    .is_some_and(|u| u.same_as(&state))
                {
                    return Err(Error::Stale {
                        base: view.seq(),
                        head: head.seq,
                    });
                }
                let (through, merged) = progress.get();
                let through = through.ok_or_else(|| {
                    Error::internal("a union with entries left found none to merge")
                })?;
                Ok(vec![UnionChange::Progress {
                    table: table.id,
                    through,
                    consumed: state.consumed + merged,
                }])
            },
        )?;
        let (_, merged) = progress.get();
        Ok(UnionWork {
            merged,
            remaining: state.remaining().saturating_sub(merged),
            commit: Some(info),
        })
    }
}
