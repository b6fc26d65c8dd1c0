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
use crate::state::directory::{diff, PageRef, Region};
use crate::error::{Error, Result};
use crate::log::record::CommitRecord;
use crate::log::segments::value_record_blocks;
use crate::state::page::ValueRef;
use crate::state::prefix::Prefix;
use crate::stats::ReadKind;
use sprig_core::trie::KeyPath;
use std::collections::BTreeMap;

impl Inner {
    /// Make the retained version `seq` the latest again (see `Db::rollback_to`).
    pub(crate) fn rollback_to(&self, seq: u64) -> Result<CommitInfo> {
        let inner = self;
        let mut w = inner.log.writer.lock();
        w.check_writable()?;
        let head = inner.head();
        let target = inner.versions.retained_version(seq)?;
        if target.seq == head.seq {
            return Ok(CommitInfo {
                seq: head.seq,
                root: head.dir.root_node(),
                pages_written: 0,
                bytes_written: 0,
                pages_relocated: 0,
                values_relocated: 0,
            });
        }
        let regions: Vec<Region> = diff(&head.dir, &target.dir)
            .map_err(|e| Error::internal(format!("comparing versions for a rollback: {e}")))?;

        // Values referenced on one side of the changed regions and not on the other.
        let mut from_pages = Vec::new();
        let mut to_pages = Vec::new();
        for (prefix, subtree) in &regions {
            if let Some(old) = head.dir.node_at(prefix) {
                old.pages_under(*prefix, &mut from_pages);
            }
            subtree.pages_under(*prefix, &mut to_pages);
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
            .map(|(l, (key, len))| {
                let blocks = value_record_blocks(*len)
                    .ok_or_else(|| Error::internal("a value longer than the limit in a page"))?;
                Ok((*l, blocks, *key))
            })
            .collect::<Result<_>>()?;

        let next = head
            .seq
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit sequence numbers exhausted"))?;
        let record = CommitRecord {
            seq: next,
            root: target.dir.root_node(),
            entries: target.dir.len(),
            regions,
            values_written,
            values_freed,
            segment_heads: Vec::new(),
        };
        w.guarded(|w| {
            let published = inner.publish_record(
                w,
                &head,
                &record,
                Blocks::none(),
                inner.versions.next_id(),
            )?;
            inner.counters.commit();
            inner.counters.written(published.log_bytes, 0);
            inner.refresh_emptied(w);
            inner.after_commit(w)?;
            Ok(CommitInfo {
                seq: next,
                root: record.root,
                pages_written: 0,
                bytes_written: published.log_bytes,
                pages_relocated: 0,
                values_relocated: 0,
            })
        })
    }

    /// The value-log records the given pages point at: location → (key, length).
    fn external_values(
        &self,
        pages: &[(Prefix, PageRef)],
    ) -> Result<BTreeMap<u64, (KeyPath, u64)>> {
        let loaded = self.load_pages(pages, ReadKind::Maintenance)?;
        let mut out = BTreeMap::new();
        for page in loaded {
            for e in page.iter() {
                if let ValueRef::External(x) = e.value {
                    out.insert(x.loc, (*e.key, x.len));
                }
            }
        }
        Ok(out)
    }
}
