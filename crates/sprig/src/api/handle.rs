//! Independent writable handles: a state that is read and changed on its own, duplicated in
//! O(1), and made durable when its owner decides (what lsm-tree users know as `duplicate`).
//!
//! A handle is a thin owner of a version: the committed version it started from, or the
//! overlay its last applied batch produced. Applying a batch stacks a new overlay on the
//! handle's state; duplicating shares the state, so two duplicates that then apply different
//! batches are two forks of one parent. Committing a handle commits its chain of overlays.
//! The database has one line of committed history, so once one handle's changes are committed,
//! the others' overlays at the same heights are superseded and refuse further use with a clear
//! error — as every fork does (see `overlay.rs`).

use crate::api::batch::Pending;
use crate::api::batch::WriteBatch;
use crate::api::db::Db;
use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::write::cleaner::CleanMode;
use crate::write::engine::Inner;
use crate::write::CommitInfo;
use sprig_core::Node;
use std::sync::Arc;

/// An independent writable state of a database. Cheap to duplicate; each duplicate changes
/// on its own. Uncommitted changes live in memory (counted against
/// `Options::max_overlay_bytes`) until [`Handle::commit`].
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut speculative = db.handle();
/// let mut other = speculative.duplicate();
/// let mut batch = speculative.begin()?;
/// batch.put([1u8; 32], b"only here".to_vec())?;
/// speculative.apply(batch)?; // in memory, on this handle only
/// assert!(speculative.view()?.get(&[1u8; 32])?.is_some());
/// assert!(other.view()?.get(&[1u8; 32])?.is_none());
/// speculative.commit()?; // now durable and the database's latest version
/// assert_eq!(db.len(), 1);
/// # let _ = other.commit();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Handle {
    inner: Arc<Inner>,
    state: State,
}

#[derive(Clone)]
enum State {
    /// A committed version, pinned.
    Committed(Arc<ReadView>),
    /// The overlay of the last applied batch.
    Overlay(Pending),
}

impl Db {
    /// A writable handle on the latest committed version.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut handle = db.handle();
    /// let mut batch = handle.begin()?;
    /// batch.put([1u8; 32], "v")?;
    /// handle.apply(batch)?;
    /// assert!(db.is_empty()); // in the handle only, until it commits
    /// handle.commit()?;
    /// assert_eq!(db.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn handle(&self) -> Handle {
        Handle {
            inner: self.inner.clone(),
            state: State::Committed(Arc::new(self.view())),
        }
    }
}

impl Handle {
    /// A second handle on the same state; from here on the two change independently.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut left = db.handle();
    /// let mut right = left.duplicate();
    /// let mut batch = left.begin()?;
    /// batch.put([1u8; 32], "left")?;
    /// left.apply(batch)?;
    /// let mut batch = right.begin()?;
    /// batch.put([1u8; 32], "right")?;
    /// right.apply(batch)?;
    /// assert_ne!(left.root(), right.root()); // two forks of one state
    /// left.commit()?;
    /// assert!(matches!(right.commit(), Err(sprig::Error::Superseded { .. })));
    /// # Ok(()) }
    /// ```
    pub fn duplicate(&self) -> Handle {
        self.clone()
    }

    /// The state root of this handle's state.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut handle = db.handle();
    /// assert_eq!(handle.root(), db.root());
    /// let mut batch = handle.begin()?;
    /// batch.put([1u8; 32], "v")?;
    /// let root = handle.apply(batch)?;
    /// assert_eq!(handle.root(), root);
    /// assert_ne!(root, db.root());
    /// # Ok(()) }
    /// ```
    pub fn root(&self) -> Node {
        match &self.state {
            State::Committed(view) => view.root(),
            State::Overlay(pending) => pending.root(),
        }
    }

    /// Whether the handle holds changes that are not committed.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut handle = db.handle();
    /// assert!(!handle.has_uncommitted());
    /// let batch = handle.begin()?;
    /// handle.apply(batch)?;
    /// assert!(handle.has_uncommitted());
    /// handle.commit()?;
    /// assert!(!handle.has_uncommitted());
    /// # Ok(()) }
    /// ```
    pub fn has_uncommitted(&self) -> bool {
        matches!(&self.state, State::Overlay(p) if !p.is_committed())
    }

    /// A read view of this handle's state (values, proofs, witnesses, scans).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut handle = db.handle();
    /// let mut batch = handle.begin()?;
    /// batch.put([1u8; 32], "v")?;
    /// handle.apply(batch)?;
    /// let view = handle.view()?;
    /// assert_eq!(view.get(&[1u8; 32])?, Some(b"v".to_vec()));
    /// assert_eq!(view.root(), handle.root());
    /// # Ok(()) }
    /// ```
    pub fn view(&self) -> Result<ReadView> {
        match &self.state {
            State::Committed(view) => Ok(ReadView::of(&self.inner, view.version.clone())),
            State::Overlay(pending) => pending.view(),
        }
    }

    /// Start a batch on this handle's state; [`Handle::apply`] makes it the handle's state.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut handle = db.handle();
    /// let mut batch = handle.begin()?;
    /// batch.put([1u8; 32], "v")?;
    /// handle.apply(batch)?;
    /// let mut next = handle.begin()?; // on the applied batch, not on the database
    /// assert_eq!(next.base_seq(), 1);
    /// assert_eq!(next.get(&[1u8; 32])?, Some(b"v".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn begin(&self) -> Result<WriteBatch> {
        match &self.state {
            State::Committed(view) => Ok(WriteBatch::on(self.inner.clone(), view.version.clone())),
            State::Overlay(pending) => pending.begin(),
        }
    }

    /// Finish a batch begun on this handle and make its result the handle's state (in memory;
    /// durable only after [`Handle::commit`]). Returns the new root.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut handle = db.handle();
    /// let mut batch = handle.begin()?;
    /// batch.put([1u8; 32], "v")?;
    /// let root = handle.apply(batch)?;
    /// assert_eq!(root, handle.root());
    /// let stray = db.begin(); // not begun on the handle's state
    /// assert!(matches!(handle.apply(stray), Err(sprig::Error::Foreign(_))));
    /// # Ok(()) }
    /// ```
    pub fn apply(&mut self, batch: WriteBatch) -> Result<Node> {
        let base = match &self.state {
            State::Committed(view) => &view.version,
            State::Overlay(pending) => &pending.version,
        };
        if !Arc::ptr_eq(batch.base(), base) {
            return Err(Error::Foreign(
                "the batch was not begun on this handle's state",
            ));
        }
        let pending = batch.finish()?;
        let root = pending.root();
        self.state = State::Overlay(pending);
        Ok(root)
    }

    /// Make this handle's changes durable: commit its chain of uncommitted overlays. Returns
    /// `None` if there was nothing to commit. Afterwards the handle rests on the committed
    /// version and its memory is released.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut handle = db.handle();
    /// assert!(handle.commit()?.is_none()); // nothing to commit
    /// for i in 1u8..=2 {
    ///     let mut batch = handle.begin()?;
    ///     batch.put([i; 32], "v")?;
    ///     handle.apply(batch)?;
    /// }
    /// let info = handle.commit()?.expect("two batches applied");
    /// assert_eq!((info.seq, db.len()), (2, 2));
    /// # Ok(()) }
    /// ```
    pub fn commit(&mut self) -> Result<Option<CommitInfo>> {
        let State::Overlay(pending) = &self.state else {
            return Ok(None);
        };
        if pending.is_committed() {
            return Ok(None);
        }
        let info = self
            .inner
            .commit(pending.clone().into_version(), CleanMode::Auto)?;
        // Rest on the committed version, if still retained, instead of the overlay's pages.
        if let Ok((version, pin)) = self.inner.versions.pinned_version(info.seq) {
            self.state = State::Committed(Arc::new(ReadView::pinned(&self.inner, version, pin)));
        }
        Ok(Some(info))
    }
}
