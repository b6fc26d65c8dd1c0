//! Rollback: make a retained committed version the latest again, durably.
//!
//! A rollback is an ordinary commit: its record replaces every region where the latest
//! directory differs from the target's by the target's subtree (whose pages are still on
//! disk, pinned by the retained version), and moves the value-log accounting back. It is as
//! atomic and durable as any commit, and it gets the next sequence number; the versions in
//! between stay readable while retained.

use crate::log::publish::Blocks;
use crate::write::CommitInfo;
use crate::write::engine::Inner;
use crate::log::writer::Writer;
use crate::state::version::Version;
use crate::state::directory::{diff, Directory, PageRef, Region};
use crate::state::tables::{TableDef, TableId};
use crate::error::{Error, Result};
use crate::log::record::{CommitRecord, Known, Prior, TableChange, UnionChange};
use crate::log::segments::value_record_blocks;
use crate::state::page::ValueRef;
use crate::state::prefix::Prefix;
use crate::stats::ReadKind;
use sprig_core::trie::KeyPath;
use std::collections::BTreeMap;

impl Inner {
    /// Make the retained version `seq` the latest again (see `Db::rollback_to`).
    pub(crate) fn rollback_to(&self, seq: u64) -> Result<CommitInfo> {
        let mut w = self.log.writer.lock();
        w.begin_write()?;
        let target = self.versions.retained_version(seq)?;
        self.make_latest(&mut w, &target)
    }

    /// Make `target` (a retained version, or a named snapshot's, whose pages something pins)
    /// the latest version, durably, as a new commit.
    pub(crate) fn make_latest(&self, w: &mut Writer, target: &Version) -> Result<CommitInfo> {
        let inner = self;
        let head = inner.head();
        if target.seq == head.seq {
            return Ok(CommitInfo {
                seq: head.seq,
                root: head.tables.default_dir().root_node(),
                db_root: head.tables.db_root(),
                pages_written: 0,
                bytes_written: 0,
                pages_relocated: 0,
                values_relocated: 0,
            });
        }
        // Tables the target does not have are dropped; tables only the target has are created
        // again (with their old ids: ids are never reused, so none is taken) and filled.
        let dropped: Vec<TableId> = head
            .tables
            .dirs()
            .map(|(id, _)| id)
            .filter(|id| target.tables.dir(*id).is_none())
            .collect();
        let mut created: Vec<TableDef> = Vec::new();
        let mut tables: Vec<TableChange> = Vec::new();
        let mut from_pages = Vec::new();
        let mut to_pages = Vec::new();
        let empty = Directory::empty(head.tables.arena(), self.hasher);
        for (id, to) in target.tables.dirs() {
            let from = match head.tables.dir(id) {
                Some(d) => d,
                None => {
                    created.push(
                        target
                            .tables
                            .def(id)
                            .ok_or_else(|| Error::internal("a table without a description"))?,
                    );
                    &empty
                }
            };
            let regions: Vec<Region> = diff(from, to).map_err(|e| {
                Error::internal(format!("comparing versions for a rollback: {e}"))
            })?;
            if regions.is_empty() {
                continue;
            }
            // Values referenced on one side of the changed regions and not on the other.
            for (prefix, subtree) in &regions {
                let mut before = Vec::new();
                if let Some(old) = from.node_at(prefix) {
                    old.pages_under(*prefix, &mut before);
                }
                from_pages.extend(before.into_iter().map(|p| (id, p)));
                let mut after = Vec::new();
                subtree.pages_under(*prefix, &mut after);
                to_pages.extend(after.into_iter().map(|p| (id, p)));
            }
            tables.push(TableChange {
                table: id,
                root: to.root_node(),
                entries: to.len(),
                regions,
            });
        }
        let from = self.external_values(&from_pages)?;
        let to = self.external_values(&to_pages)?;
        let values_freed: Vec<u64> = from
            .keys()
            .filter(|l| !to.contains_key(l))
            .copied()
            .collect();
        let values_written = to
            .iter()
            .filter(|(l, _)| !from.contains_key(l))
            .map(|(l, (table, key, len))| {
                let blocks = value_record_blocks(*len)
                    .ok_or_else(|| Error::internal("a value longer than the limit in a page"))?;
                Ok((*l, blocks, *table, *key))
            })
            .collect::<Result<_>>()?;

        // Unions: the target's state wherever it differs (its frozen inputs' pages are still
        // on disk: the retained target pins their segments).
        let mut unions = Vec::new();
        for (id, state) in target.tables.unions() {
            if !head.tables.union(id).is_some_and(|h| h.same_as(state)) {
                unions.push(UnionChange::Set {
                    table: id,
                    state: (**state).clone(),
                });
            }
        }
        for (id, _) in head.tables.unions() {
            if target.tables.union(id).is_none() && target.tables.dir(id).is_some() {
                unions.push(UnionChange::Clear { table: id });
            }
        }

        let next = head
            .seq
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit sequence numbers exhausted"))?;
        let record = CommitRecord {
            seq: next,
            dropped,
            created,
            tables,
            values_written,
            values_freed,
            segment_heads: Vec::new(),
            unions,
        };
        // The result is the target's directories (regions from `diff` to them).
        let known: Vec<(TableId, Known)> = record
            .tables
            .iter()
            .filter_map(|t| {
                let dir = target.tables.dir(t.table)?;
                Some((t.table, Known::Equal(dir.clone())))
            })
            .collect();
        w.guarded(|w| {
            let published = inner.publish_record(
                w,
                &head,
                &record,
                Blocks::none(),
                inner.versions.next_id(),
                &Prior {
                    known,
                    replaced: Vec::new(),
                },
            )?;
            inner.counters.commit();
            inner.counters.written(published.log_bytes, 0);
            inner.refresh_emptied(w);
            inner.after_commit(w)?;
            Ok(CommitInfo {
                seq: next,
                root: target.tables.default_dir().root_node(),
                db_root: target.tables.db_root(),
                pages_written: 0,
                bytes_written: published.log_bytes,
                pages_relocated: 0,
                values_relocated: 0,
            })
        })
    }

    /// The value-log records the given pages (of the given tables) point at: location →
    /// (table, key, length).
    fn external_values(
        &self,
        pages: &[(TableId, (Prefix, PageRef))],
    ) -> Result<BTreeMap<u64, (TableId, KeyPath, u64)>> {
        let refs: Vec<(Prefix, PageRef)> = pages.iter().map(|(_, r)| r.clone()).collect();
        let loaded = self.load_pages(&refs, ReadKind::Maintenance)?;
        let mut out = BTreeMap::new();
        for ((table, _), page) in pages.iter().zip(loaded) {
            for e in page.iter() {
                if let ValueRef::External(x) = e.value {
                    out.insert(x.loc, (*table, *e.key, x.len));
                }
            }
        }
        Ok(out)
    }
}
