//! Versions of the state: a committed version, or an overlay — uncommitted changes on top of a
//! committed version or on top of another overlay.
//!
//! A finished write batch is an overlay (`Pending` in the API): a full version of the state whose
//! changed regions live in memory, with its own root, reads, proofs and witness. Batches can
//! begin on an overlay (block on block), and several overlays can share a parent (forks, like
//! unfinalized chain branches). Committing an overlay commits its uncommitted ancestors first,
//! in order. An overlay is *superseded* once the database has reached its sequence number by
//! another path (a sibling was committed, or a rollback), and *discarded* when asked; using
//! either, or a descendant of either, is an error. Overlay memory is counted against a limit.

use crate::error::{Error, Result};
use crate::io::spares::Spares;
use crate::state::tables::{TableId, TableRegions, Tables};
use parking_lot::{Mutex, RwLock};
use sprig_core::trie::KeyPath;
use sprig_core::{ProofNode, Witness};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// A version of the state: committed, or an overlay of uncommitted changes.
pub(crate) struct Version {
    /// Unique among the versions of this database handle: what a commit checks it builds on.
    pub id: u64,
    /// The commit sequence number (0 for the empty database); for an overlay, the number it
    /// gets when committed.
    pub seq: u64,
    /// The tables of this version.
    pub tables: Tables,
    /// For overlays: what they change and their parent.
    pub overlay: Option<OverlayState>,
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Version")
            .field("id", &self.id)
            .field("seq", &self.seq)
            .field("overlay", &self.overlay.is_some())
            .finish()
    }
}

const LIVE: u8 = 0;
const COMMITTED: u8 = 1;
const DISCARDED: u8 = 2;
/// Being published by the writer: its sequence number may already be the head's, before
/// [`OverlayState::mark_committed`] runs; readers must not see it as superseded meanwhile.
const COMMITTING: u8 = 3;

/// Bytes of overlay memory in use, shared by every overlay of a database, mirrored to two
/// metrics gauges (bytes, overlays).
#[derive(Default)]
pub(crate) struct OverlayMemory {
    bytes: AtomicU64,
    count: AtomicU64,
    gauges: Option<(metrics::Gauge, metrics::Gauge)>,
}

impl OverlayMemory {
    /// Accounting that also moves the gauges `bytes` and `count`.
    pub fn with_gauges(bytes: metrics::Gauge, count: metrics::Gauge) -> OverlayMemory {
        OverlayMemory {
            gauges: Some((bytes, count)),
            ..OverlayMemory::default()
        }
    }

    /// Reserve `bytes` against `limit`, or fail with a sentence saying what to do.
    pub fn charge(self: &Arc<Self>, bytes: u64, limit: u64) -> Result<MemoryCharge> {
        let before = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if before + bytes > limit {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Error::OverlayMemoryLimit {
                limit,
                in_use: before,
                needed: bytes,
            });
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Some((b, c)) = &self.gauges {
            b.increment(bytes as f64);
            c.increment(1.0);
        }
        Ok(MemoryCharge {
            memory: self.clone(),
            bytes,
        })
    }

    /// Bytes in use.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Overlays alive.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Memory held by one overlay, released when the overlay is freed.
pub(crate) struct MemoryCharge {
    memory: Arc<OverlayMemory>,
    bytes: u64,
}

impl Drop for MemoryCharge {
    fn drop(&mut self) {
        self.memory.bytes.fetch_sub(self.bytes, Ordering::Relaxed);
        self.memory.count.fetch_sub(1, Ordering::Relaxed);
        if let Some((b, c)) = &self.memory.gauges {
            b.decrement(self.bytes as f64);
            c.decrement(1.0);
        }
    }
}

/// What an overlay changes relative to its parent, and its life cycle.
pub(crate) struct OverlayState {
    /// The version (committed or overlay) this one builds on. Once this overlay is committed
    /// it is replaced by the committed version it was applied on, so a chain of committed
    /// overlays does not stay in memory behind the newest one.
    parent: RwLock<Arc<Version>>,
    /// The committed version at the bottom of the chain when this overlay was made: its pages
    /// may be as old as that version's, so readers pin it.
    base_seq: u64,
    /// What the overlay changes: regions, values, witnesses and counts.
    pub parts: OverlayParts,
    status: AtomicU8,
    /// Where `new_values` went once committed.
    written: Mutex<HashMap<(TableId, KeyPath), u64>>,
    _memory: MemoryCharge,
}

/// The parts of an overlay made by a finished batch.
#[derive(Default)]
pub(crate) struct OverlayParts {
    /// Replaced regions relative to the parent, with in-memory pages, by table.
    pub regions: TableRegions,
    /// Values for the value log, written at commit, by table and key.
    pub new_values: BTreeMap<(TableId, KeyPath), Vec<u8>>,
    /// Committed value records this overlay stops referencing.
    pub freed_values: Vec<u64>,
    /// Ancestors' new values this overlay stops referencing (resolved when committed).
    pub freed_unwritten: Vec<(TableId, KeyPath)>,
    /// The witness of the batch that made this overlay, against the parent's roots, for each
    /// table the batch read or wrote (and always the default table).
    pub witnesses: BTreeMap<TableId, Witness>,
    /// Pages the batch split and merged.
    pub splits: u64,
    pub merges: u64,
    /// Pages the commit will write.
    pub new_pages: u64,
}

/// The proof buffer of a dropped overlay's witness, kept for the next batch's (the largest
/// given back; one, process-wide). A transfer batch's witness is about 600,000 proof nodes,
/// 39 MB: a fresh vector that size is mapped anew by the allocator and faulted in page by page
/// as it is filled (26 ms a batch on this machine's helper core, on the path to the root),
/// then unmapped when the overlay goes. Kept, it is memory the process holds between batches,
/// as much as the last large witness.
static PROOF_BUFFER: Spares<Vec<ProofNode>> = Spares::new(1);

/// An empty buffer for a witness's proof nodes, with room for at least `capacity`: the one a
/// dropped overlay gave back if there is one.
pub(crate) fn proof_buffer(capacity: usize) -> Vec<ProofNode> {
    match PROOF_BUFFER.take() {
        Some(mut buffer) if buffer.capacity() >= capacity => {
            buffer.clear();
            buffer
        }
        // Too small (or none): a new one, rather than one that copies the old as it grows.
        _ => Vec::with_capacity(capacity),
    }
}

impl Drop for OverlayParts {
    /// The largest of the witnesses' proof buffers, and the one kept before, is kept for the
    /// next batch's witness.
    fn drop(&mut self) {
        let largest = self
            .witnesses
            .values_mut()
            .map(|w| std::mem::take(&mut w.proof.nodes))
            .chain(PROOF_BUFFER.take())
            .max_by_key(Vec::capacity);
        if let Some(mut buffer) = largest.filter(|b| b.capacity() > 0) {
            buffer.clear();
            PROOF_BUFFER.keep([buffer]);
        }
    }
}

impl OverlayState {
    pub fn new(parent: Arc<Version>, parts: OverlayParts, memory: MemoryCharge) -> OverlayState {
        OverlayState {
            base_seq: parent.committed_base_seq(),
            parent: RwLock::new(parent),
            parts,
            status: AtomicU8::new(LIVE),
            written: Mutex::new(HashMap::new()),
            _memory: memory,
        }
    }

    pub fn is_committed(&self) -> bool {
        self.status.load(Ordering::Acquire) == COMMITTED
    }

    /// The version this overlay builds on.
    pub fn parent(&self) -> Arc<Version> {
        self.parent.read().clone()
    }

    /// Record that the overlay is durable, with where its values went, now that `committed`
    /// (the version it was applied on, with the same state as its parent) is the version
    /// below it. The parent overlay's value locations are kept (overlays built on this one
    /// may hold pages pointing at its values), then the link to it is cut.
    pub fn mark_committed(
        &self,
        mut written: HashMap<(TableId, KeyPath), u64>,
        committed: Arc<Version>,
    ) {
        let parent = self.parent();
        if let Some(p) = &parent.overlay {
            for (k, l) in p.written.lock().iter() {
                written.entry(*k).or_insert(*l);
            }
        }
        *self.written.lock() = written;
        self.status.store(COMMITTED, Ordering::Release);
        *self.parent.write() = committed;
    }

    /// The writer is about to publish this overlay (under the writer lock, so no sibling can
    /// take its sequence number meanwhile). Fails if it was discarded.
    pub fn begin_commit(&self) -> bool {
        self.status
            .compare_exchange(LIVE, COMMITTING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The publication failed: the overlay is live again (if it was being committed).
    pub fn abort_commit(&self) {
        let _ = self
            .status
            .compare_exchange(COMMITTING, LIVE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Bytes of memory this overlay's changes hold.
    pub fn memory_bytes(&self) -> u64 {
        self._memory.bytes
    }

    /// Discard the overlay (a committed one stays committed).
    pub fn discard(&self) {
        // A committed overlay stays committed: discarding it only drops the handle.
        let _ = self
            .status
            .compare_exchange(LIVE, DISCARDED, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl Version {
    /// Fail if this version is an overlay that can no longer be used: discarded, superseded
    /// (the database reached its sequence number without it), or built on one that is.
    pub(crate) fn check_usable(&self, head_seq: u64) -> Result<()> {
        self.walk_chain(|v, o| match o.status.load(Ordering::Acquire) {
            DISCARDED => Some(Err(Error::Discarded {
                overlay: v.id,
                seq: v.seq,
            })),
            LIVE if head_seq >= v.seq => Some(Err(Error::Superseded {
                overlay: v.id,
                seq: v.seq,
                head: head_seq,
            })),
            _ => None,
        })
        .unwrap_or(Ok(()))
    }

    /// Call `f` on this version and each overlay below it, down to the first committed
    /// version without overlay state; stops at the first `Some`.
    fn walk_chain<T>(&self, mut f: impl FnMut(&Version, &OverlayState) -> Option<T>) -> Option<T> {
        let mut below: Option<Arc<Version>> = None;
        loop {
            let v: &Version = below.as_deref().unwrap_or(self);
            let o = v.overlay.as_ref()?;
            if let Some(found) = f(v, o) {
                return Some(found);
            }
            let parent = o.parent();
            below = Some(parent);
        }
    }

    /// The bytes of a value that an overlay in this version's chain holds for `key` in
    /// `table` and has not written yet.
    pub(crate) fn unwritten_value(&self, table: TableId, key: &KeyPath) -> Option<Vec<u8>> {
        self.walk_chain(|_, o| o.parts.new_values.get(&(table, *key)).cloned())
    }

    /// The sequence number of the committed version at the bottom of this version's chain
    /// (as it was when the overlay was made): the oldest version whose pages it may read.
    pub(crate) fn committed_base_seq(&self) -> u64 {
        self.overlay.as_ref().map_or(self.seq, |o| o.base_seq)
    }

    /// Where a committed ancestor overlay wrote its value for `key` in `table`.
    pub(crate) fn written_value(&self, table: TableId, key: &KeyPath) -> Option<u64> {
        self.walk_chain(|_, o| o.written.lock().get(&(table, *key)).copied())
    }
}

/// The memory an overlay's changes take: its in-memory pages and its new values.
pub(crate) fn overlay_bytes(
    new_pages: u64,
    new_values: &BTreeMap<(TableId, KeyPath), Vec<u8>>,
) -> u64 {
    const PAGE_BYTES: u64 = crate::io::BLOCK_BYTES as u64 + 256;
    new_pages * PAGE_BYTES
        + new_values
            .values()
            .map(|v| v.len() as u64 + 64)
            .sum::<u64>()
}
