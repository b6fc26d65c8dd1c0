//! Read views: a consistent, read-only view of one version (committed, retained or an
//! overlay), pinned so that no commit deletes what it reads: values, proofs and witnesses.

use crate::error::{Error, Result};
use crate::state::prefix::Prefix;
use crate::state::version::Version;
use crate::state::versions::Pin;
use crate::stats::ReadKind;
use crate::write::engine::Inner;
use sprig_core::proof::{MultiProof, PathProof};
use sprig_core::trie::{KeyPath, Node};
use sprig_core::Witness;
use std::sync::Arc;

/// A consistent, read-only view of one committed version. Commits that happen after the view
/// was taken never change what it sees.
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

    /// The version's commit sequence number (for an overlay: the one it gets when committed).
    pub fn seq(&self) -> u64 {
        self.version.seq
    }

    /// The version's state root.
    pub fn root(&self) -> Node {
        self.version.dir.root_node()
    }

    /// The number of entries in this version.
    pub fn len(&self) -> u64 {
        self.version.dir.len()
    }

    /// Whether this version holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The region (trie position) of the page or empty region holding `key`.
    pub fn region_of(&self, key: &KeyPath) -> Prefix {
        self.version.dir.locate(key).0
    }

    /// The value of `key`: one SSD read unless the page is cached (plus one for a value
    /// stored in the value log).
    pub fn get(&self, key: &KeyPath) -> Result<Option<Vec<u8>>> {
        let (prefix, page) = self.version.dir.locate(key);
        let Some(r) = page else {
            return Ok(None);
        };
        let page = self
            .inner
            .load_pages(&[(prefix, r)], ReadKind::Lookup)?
            .pop()
            .ok_or_else(|| Error::internal("a page asked for was not loaded"))?;
        match page.get(key) {
            Some(v) => self.inner.value_bytes(&self.version, key, v).map(Some),
            None => Ok(None),
        }
    }

    /// The values of many keys, with all their page reads in flight at once.
    pub fn get_many(&self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        let pages = self
            .inner
            .pages_for(&self.version.dir, keys, ReadKind::Lookup)?;
        keys.iter()
            .map(|key| {
                let (prefix, _) = self.version.dir.locate(key);
                match pages.get(&prefix).and_then(|p| p.get(key)) {
                    Some(v) => self.inner.value_bytes(&self.version, key, v).map(Some),
                    None => Ok(None),
                }
            })
            .collect()
    }

    /// A proof of inclusion or exclusion of `key` against this version's root.
    pub fn path_proof(&self, key: &KeyPath) -> Result<PathProof> {
        let pages = self
            .inner
            .pages_for(&self.version.dir, &[*key], ReadKind::Proof)?;
        self.version
            .dir
            .path_proof(key, &|p| pages.get(p).map(|a| a.as_ref()))
            .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))
    }

    /// One proof of many keys, sharing common siblings.
    pub fn multi_proof(&self, keys: &[KeyPath]) -> Result<MultiProof> {
        let keys = sorted_distinct(keys);
        let pages = self
            .inner
            .pages_for(&self.version.dir, &keys, ReadKind::Proof)?;
        let mut nodes = Vec::new();
        let hasher = self.inner.hasher;
        self.version
            .dir
            .prove(
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

    /// A witness of `keys` against this version's root.
    pub fn witness(&self, keys: &[KeyPath]) -> Result<Witness> {
        let keys = sorted_distinct(keys);
        let proof = self.multi_proof(&keys)?;
        Ok(Witness { keys, proof })
    }
}
