//! The registry of which versions are visible: the latest committed version (the head), the
//! retained ones (historical reads and rollback), and the pins that readers, batches and
//! overlays hold on the committed versions whose pages they read.
//!
//! Pure in-memory bookkeeping: it never does I/O. The writer publishes a new head here only
//! after the commit that made it is durable; whoever deletes files asks
//! `Versions::oldest_pinned` first.

use crate::error::{Error, Result};
use crate::state::reclaim::Reclaimer;
use crate::state::version::Version;
use parking_lot::{Mutex, RwLock};
use sprig_core::trie::Node;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many readers pin each committed version (by sequence number).
type PinTable = Mutex<BTreeMap<u64, usize>>;

/// The head, the retained versions and the pins.
pub(crate) struct Versions {
    head: RwLock<Arc<Version>>,
    pins: Arc<PinTable>,
    /// The last committed versions kept for historical reads and rollback, oldest first.
    /// Their pages count as pinned (see [`Versions::oldest_pinned`]).
    retained: Mutex<VecDeque<Arc<Version>>>,
    /// How many committed versions are retained (at least 1: the head).
    limit: usize,
    next_id: AtomicU64,
    /// Drops versions no longer retained, off the commit path.
    reclaimer: Reclaimer,
}

/// Keeps a version's pages from being deleted while something reads it.
///
/// A pin must be registered while the version cannot lose its last protection: a version
/// read from the head or the retained list is pinned under that lock
/// ([`Versions::pinned_head`], [`Versions::pinned_version`]); [`Versions::pin`] alone is for
/// versions something already pins (an overlay, a view, a batch).
pub(crate) struct Pin {
    pins: Arc<PinTable>,
    seq: u64,
}

impl Drop for Pin {
    fn drop(&mut self) {
        let mut pins = self.pins.lock();
        if let Some(n) = pins.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                pins.remove(&self.seq);
            }
        }
    }
}

impl Versions {
    /// The registry after an open: `history` holds the retained versions oldest first, the
    /// last of them the head; `next_id` is the next version id to hand out.
    pub fn new(mut history: Vec<Arc<Version>>, limit: usize, next_id: u64) -> Result<Versions> {
        let limit = limit.max(1);
        while history.len() > limit {
            history.remove(0);
        }
        let head = history
            .last()
            .cloned()
            .ok_or_else(|| Error::internal("no version to open the database at"))?;
        Ok(Versions {
            head: RwLock::new(head),
            pins: Arc::new(Mutex::new(BTreeMap::new())),
            retained: Mutex::new(history.into_iter().collect()),
            limit,
            next_id: AtomicU64::new(next_id),
            reclaimer: Reclaimer::new(),
        })
    }

    /// The latest committed version.
    pub fn head(&self) -> Arc<Version> {
        self.head.read().clone()
    }

    /// Make `version` (just made durable) the latest and retain it, dropping the oldest
    /// retained version past the limit.
    pub fn publish(&self, version: Arc<Version>) {
        *self.head.write() = version.clone();
        let mut retained = self.retained.lock();
        retained.push_back(version);
        while retained.len() > self.limit {
            if let Some(old) = retained.pop_front() {
                self.reclaimer.defer(old);
            }
        }
    }

    /// Drop `value` on the background thread (see [`Reclaimer`]): what holds many pages or
    /// nodes whose freeing would cost the caller's path.
    pub fn drop_later<T: Send + 'static>(&self, value: T) {
        self.reclaimer.defer(value);
    }

    /// Forget every retained version: `version` is the latest and the only one (after a bulk
    /// load, which rewrites the whole database).
    pub fn reset(&self, version: Arc<Version>) {
        *self.head.write() = version.clone();
        let mut retained = self.retained.lock();
        let old: Vec<Arc<Version>> = retained.drain(..).collect();
        self.reclaimer.defer(old);
        retained.push_back(version);
    }

    /// A retained committed version.
    pub fn retained_version(&self, seq: u64) -> Result<Arc<Version>> {
        find_retained(&self.retained.lock(), seq)
    }

    /// The retained versions, oldest first, as (sequence number, root).
    pub fn retained_roots(&self) -> Vec<(u64, Node)> {
        self.retained
            .lock()
            .iter()
            .map(|v| (v.seq, v.tables.default_dir().root_node()))
            .collect()
    }

    /// How many versions are retained.
    pub fn retained_count(&self) -> usize {
        self.retained.lock().len()
    }

    /// Pin committed version `seq` for a version something already pins.
    pub fn pin(&self, seq: u64) -> Pin {
        *self.pins.lock().entry(seq).or_default() += 1;
        Pin {
            pins: self.pins.clone(),
            seq,
        }
    }

    /// The latest committed version, pinned. The head is read and the pin registered under the
    /// head's lock; a commit publishes its new head under that lock before it deletes segments
    /// the old head needed ([`Versions::oldest_pinned`] is read after), so either that commit
    /// sees this pin or this reads the head it published.
    pub fn pinned_head(&self) -> (Arc<Version>, Pin) {
        let head = self.head.read();
        // Pause point (feature `failpoints`): inside the window a commit must not get into.
        pausepoint!("view.pinning");
        let pin = self.pin(head.committed_base_seq());
        (head.clone(), pin)
    }

    /// A retained committed version, pinned under the lock of the retained list (a commit
    /// drops a version from the list before it can delete the segments only it needed).
    pub fn pinned_version(&self, seq: u64) -> Result<(Arc<Version>, Pin)> {
        let retained = self.retained.lock();
        let version = find_retained(&retained, seq)?;
        // Pause point (feature `failpoints`): inside the window a commit must not get into.
        pausepoint!("view.pinning");
        let pin = self.pin(version.committed_base_seq());
        Ok((version, pin))
    }

    /// A fresh version id.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The oldest version some reader, batch or overlay still uses, or that is retained.
    pub fn oldest_pinned(&self) -> Option<u64> {
        let pinned = self.pins.lock().keys().next().copied();
        let retained = self.retained.lock().front().map(|v| v.seq);
        match (pinned, retained) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The retained version `seq`, or the error naming the retained range.
fn find_retained(retained: &VecDeque<Arc<Version>>, seq: u64) -> Result<Arc<Version>> {
    retained
        .iter()
        .find(|v| v.seq == seq)
        .cloned()
        .ok_or_else(|| {
            let range = match (retained.front(), retained.back()) {
                (Some(a), Some(b)) => format!("{} to {}", a.seq, b.seq),
                _ => "none".into(),
            };
            Error::NotRetained {
                seq,
                retained: range,
            }
        })
}
