//! The write batch: reads (with read-your-writes) and changes on one version; `finish`, which
//! turns them into a [`Pending`] overlay with its new root and witness; and `Pending` itself,
//! a finished batch not committed yet, with its own reads and proofs, on which further batches
//! can build (see [`crate::state::version`] for an overlay's life cycle).

use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::state::directory::PageRef;
use crate::state::page::{Page, MAX_INLINE_VALUE_BYTES, MAX_VALUE_BYTES};
use crate::state::prefix::Prefix;
use crate::state::version::Version;
use crate::state::version::{overlay_bytes, OverlayParts, OverlayState};
use crate::state::versions::Pin;
use crate::stats::ReadKind;
use crate::write::engine::Inner;
use crate::write::rewrite::{branches_above, merge_sparse, rewrite_regions, RegionWork};
use crate::write::{Change, Region};
use sprig_core::trie::{KeyPath, Node};
use sprig_core::{MultiProof, Witness};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// A set of reads and changes on one version, not yet applied.
pub struct WriteBatch {
    inner: Arc<Inner>,
    base: Arc<Version>,
    pin: Pin,
    changes: BTreeMap<KeyPath, Option<Vec<u8>>>,
    reads: BTreeSet<KeyPath>,
    pages: HashMap<Prefix, Arc<Page>>,
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
            changes: BTreeMap::new(),
            reads: BTreeSet::new(),
            pages: HashMap::new(),
        }
    }

    /// The version this batch reads from and builds on.
    pub(crate) fn base(&self) -> &Arc<Version> {
        &self.base
    }

    /// The sequence number of the version this batch builds on.
    pub fn base_seq(&self) -> u64 {
        self.base.seq
    }

    /// The number of distinct keys changed so far.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// Whether nothing has been changed.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The value of `key` as this batch sees it (its own changes first). The key is part of
    /// the batch's witness.
    pub fn get(&mut self, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        self.reads.insert(*key);
        if let Some(change) = self.changes.get(key) {
            return Ok(change.clone());
        }
        self.prefetch(&[*key])?;
        let (prefix, _) = self.base.dir.locate(key);
        match self.pages.get(&prefix).and_then(|p| p.get(key)) {
            Some(v) => self.inner.value_bytes(&self.base, key, v).map(Some),
            None => Ok(None),
        }
    }

    /// Set `key` to `value`.
    pub fn put(&mut self, key: KeyPath, value: impl Into<Vec<u8>>) -> Result<()> {
        let value = value.into();
        if value.len() > MAX_VALUE_BYTES {
            return Err(Error::ValueTooLarge {
                len: value.len() as u64,
                max: MAX_VALUE_BYTES as u64,
            });
        }
        self.changes.insert(key, Some(value));
        Ok(())
    }

    /// Remove `key` (a no-op if absent).
    pub fn delete(&mut self, key: KeyPath) {
        self.changes.insert(key, None);
    }

    /// Read the pages of `keys` now, all in flight at once, so later gets and `finish` find
    /// them in memory.
    pub fn prefetch(&mut self, keys: &[KeyPath]) -> Result<()> {
        let mut wanted: Vec<(Prefix, PageRef)> = Vec::new();
        let mut queued = HashSet::new();
        for key in keys {
            let (prefix, page) = self.base.dir.locate(key);
            if let Some(r) = page {
                if !self.pages.contains_key(&prefix) && queued.insert(prefix) {
                    wanted.push((prefix, r));
                }
            }
        }
        let loaded = self.inner.load_pages(&wanted, ReadKind::Batch)?;
        for ((prefix, _), page) in wanted.into_iter().zip(loaded) {
            self.pages.insert(prefix, page);
        }
        Ok(())
    }

    /// Apply the batch in memory: an overlay with the new root, and the witness of every key
    /// read or written against the base root.
    pub fn finish(mut self) -> Result<Pending> {
        self.base.check_usable(self.inner.head().seq)?;
        let hasher = self.inner.hasher;
        let touched: Vec<KeyPath> = {
            let mut k: Vec<KeyPath> = self.changes.keys().copied().collect();
            k.extend(self.reads.iter().copied());
            k.sort_unstable();
            k.dedup();
            k
        };
        self.prefetch(&touched)?;
        let base_dir = self.base.dir.clone();
        let changes: Vec<Change> = std::mem::take(&mut self.changes).into_iter().collect();

        // Cut the (sorted) keys and changes into runs, one per region they fall in.
        let mut works: Vec<RegionWork> = Vec::new();
        let mut c = 0usize;
        let mut k = 0usize;
        while k < touched.len() {
            let (prefix, _) = base_dir.locate(&touched[k]);
            let k_end = k + touched[k..].partition_point(|key| prefix.contains(key));
            let c_end = c + changes[c..].partition_point(|(key, _)| prefix.contains(key));
            works.push(RegionWork {
                prefix,
                page: self.pages.get(&prefix).cloned(),
                keys: k..k_end,
                changes: c..c_end,
            });
            k = k_end;
            c = c_end;
        }
        let new_seq = self
            .base
            .seq
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit sequence numbers exhausted"))?;
        let stamp = crate::state::page::Stamp {
            seq: new_seq,
            synced: self.inner.options.sync == crate::options::SyncPolicy::Always,
        };
        let rewritten =
            rewrite_regions(base_dir.arena(), hasher, stamp, &works, &touched, &changes)?;

        let by_prefix: HashMap<Prefix, usize> = works
            .iter()
            .enumerate()
            .map(|(i, w)| (w.prefix, i))
            .collect();
        let mut proof = Vec::new();
        base_dir
            .prove(
                &touched,
                &mut |prefix, _, _, out| {
                    if let Some(r) = by_prefix.get(prefix).and_then(|i| rewritten.get(*i)) {
                        out.extend_from_slice(&r.proof);
                        Ok(())
                    } else {
                        Err(crate::state::directory::DirectoryError::PageMissing(
                            *prefix,
                        ))
                    }
                },
                &mut proof,
            )
            .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
        let witness = Witness {
            keys: touched,
            proof: MultiProof { nodes: proof },
        };

        let mut regions: Vec<Region> = Vec::new();
        let mut freed_values = Vec::new();
        let mut freed_unwritten = Vec::new();
        let mut splits = 0u64;
        let mut hashes_needed = branches_above(
            works
                .iter()
                .zip(&rewritten)
                .filter(|(_, r)| r.subtree.is_some())
                .map(|(w, _)| w.prefix),
        );
        for (work, r) in works.iter().zip(rewritten) {
            hashes_needed += r.hashes_needed;
            freed_values.extend(r.freed);
            freed_unwritten.extend(r.freed_unwritten);
            splits += r.splits;
            if let Some(subtree) = r.subtree {
                regions.push((work.prefix, subtree));
            }
        }
        let new_values: BTreeMap<KeyPath, Vec<u8>> = changes
            .into_iter()
            .filter_map(|(key, v)| {
                v.filter(|v| v.len() > MAX_INLINE_VALUE_BYTES)
                    .map(|v| (key, v))
            })
            .collect();
        let (dir, regions, merges) = merge_sparse(&self.inner, &base_dir, regions, stamp)?;
        self.inner.counters.hashes_needed(hashes_needed);
        let mut new_pages = 0u64;
        for (_, subtree) in &regions {
            crate::log::record::for_each_page_ref(subtree, &mut |_| new_pages += 1);
        }
        let charge = self.inner.overlay_memory.charge(
            overlay_bytes(new_pages, &new_values),
            self.inner.options.max_overlay_bytes,
        )?;
        let parts = OverlayParts {
            regions,
            new_values,
            freed_values,
            freed_unwritten,
            witness,
            splits,
            merges,
            new_pages,
        };
        let version = Arc::new(Version {
            id: self.inner.versions.next_id(),
            seq: new_seq,
            dir,
            overlay: Some(OverlayState::new(self.base.clone(), parts, charge)),
        });
        Ok(Pending {
            inner: self.inner,
            version,
            _pin: Arc::new(self.pin),
        })
    }
}

/// Uncommitted changes: a finished batch, on top of a committed version or another overlay.
/// Cheap to clone; clones are the same overlay.
#[derive(Clone)]
pub struct Pending {
    pub(crate) inner: Arc<Inner>,
    pub(crate) version: Arc<Version>,
    pub(crate) _pin: Arc<Pin>,
}

impl Pending {
    /// The state root after this overlay.
    pub fn root(&self) -> Node {
        self.version.dir.root_node()
    }

    /// The state root of the version this overlay builds on.
    pub fn base_root(&self) -> Node {
        self.state().map_or([0; 32], |o| o.parent().dir.root_node())
    }

    /// The sequence number of the version this overlay builds on.
    pub fn base_seq(&self) -> u64 {
        self.version.seq.saturating_sub(1)
    }

    /// The sequence number this overlay gets when committed.
    pub fn seq(&self) -> u64 {
        self.version.seq
    }

    /// The number of entries in this overlay's state.
    pub fn len(&self) -> u64 {
        self.version.dir.len()
    }

    /// Whether this overlay's state is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The witness of every key the batch read or wrote, against the base root.
    pub fn witness(&self) -> &Witness {
        /// Every `Pending` is made by `finish` and so has overlay state; this never shows.
        static NONE: Witness = Witness {
            keys: Vec::new(),
            proof: sprig_core::MultiProof { nodes: Vec::new() },
        };
        self.state().map_or(&NONE, |o| &o.witness)
    }

    /// Whether this overlay has been committed.
    pub fn is_committed(&self) -> bool {
        self.state().is_some_and(OverlayState::is_committed)
    }

    pub(crate) fn state(&self) -> Option<&OverlayState> {
        self.version.overlay.as_ref()
    }

    /// A read view of this overlay's state: values, proofs and witnesses against its root.
    pub fn view(&self) -> Result<ReadView> {
        self.version.check_usable(self.inner.head().seq)?;
        Ok(ReadView::of(&self.inner, self.version.clone()))
    }

    /// Fail if this overlay was discarded or superseded.
    pub fn check(&self) -> Result<()> {
        self.version.check_usable(self.inner.head().seq)
    }

    /// Start a batch on top of this overlay (a block on this block, or a fork when several
    /// batches start on the same overlay).
    pub fn begin(&self) -> Result<WriteBatch> {
        self.version.check_usable(self.inner.head().seq)?;
        Ok(WriteBatch::on(self.inner.clone(), self.version.clone()))
    }

    /// Drop this overlay: it and every overlay built on it can no longer be read or committed.
    /// A committed overlay is unaffected.
    pub fn discard(self) {
        if let Some(o) = self.state() {
            o.discard();
        }
    }

    /// Bytes of memory this overlay's changes hold (pages and values).
    pub fn memory_bytes(&self) -> u64 {
        self.state().map_or(0, OverlayState::memory_bytes)
    }

    /// The overlay's version, giving up this handle's pin (a commit takes over).
    pub(crate) fn into_version(self) -> Arc<Version> {
        self.version
    }
}
