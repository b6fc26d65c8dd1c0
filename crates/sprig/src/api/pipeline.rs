//! The commit pipeline ([`Pipeline`]): each batch begins on the previous finished one while a
//! background thread makes the finished ones durable, in order. A node executes block n+1
//! (its reads, its hashing) while block n's pages are written and synced, which is how NOMT
//! and QMDB overlap I/O with CPU; here it is an API, not a benchmark trick.
//!
//! Ordering and failure: batches are committed in the order submitted, each on the one before
//! it. If a commit fails, the committer stops, every later submit and [`Pipeline::flush`]
//! return that failure, and nothing submitted after it is committed (the overlays built on the
//! failed one are unusable; the database is as the last durable commit left it).

use crate::api::batch::{Pending, WriteBatch};
use crate::api::db::Db;
use crate::error::{Error, Result};
use crate::write::CommitInfo;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

/// What the committer thread has made durable so far, for waiters.
#[derive(Default)]
struct Progress {
    /// The latest durable commit of the pipeline.
    last: Option<CommitInfo>,
    /// Set when the committer stopped on an error (the error itself is the thread's result).
    failed: bool,
}

type Shared = Arc<(Mutex<Progress>, Condvar)>;

/// A commit pipeline over one database (see the module documentation). Start one with
/// [`Db::pipeline`]; call [`Pipeline::flush`] before relying on everything being durable
/// (dropping a pipeline also waits for its commits, but cannot report their errors).
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// let mut pipeline = db.pipeline(2);
/// for block in 0u32..10 {
///     let mut batch = pipeline.begin()?; // sees every block before, durable or not
///     batch.put(db.key_path(&block.to_le_bytes()), b"state".to_vec())?;
///     let pending = batch.finish()?;
///     let _root = pending.root(); // known now; durable soon
///     pipeline.submit(pending)?;
/// }
/// let last = pipeline.flush()?.expect("ten commits");
/// assert_eq!(last.seq, 10);
/// assert_eq!(db.len(), 10);
/// # Ok(()) }
/// ```
pub struct Pipeline {
    db: Db,
    tip: Option<Pending>,
    queue: Option<SyncSender<Pending>>,
    thread: Option<JoinHandle<Result<()>>>,
    depth: usize,
    shared: Shared,
}

impl Db {
    /// A commit pipeline in which at most `depth` finished batches wait for the committer
    /// (at least 1): [`Pipeline::submit`] blocks while that many wait, which bounds the
    /// memory uncommitted overlays hold.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut pipeline = db.pipeline(4); // up to 4 finished batches wait for their commit
    /// let mut batch = pipeline.begin()?;
    /// batch.put([1u8; 32], "v")?;
    /// pipeline.submit(batch.finish()?)?;
    /// pipeline.flush()?;
    /// assert_eq!(db.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn pipeline(&self, depth: usize) -> Pipeline {
        Pipeline {
            db: self.clone(),
            tip: None,
            queue: None,
            thread: None,
            depth: depth.max(1),
            shared: Arc::default(),
        }
    }
}

impl Pipeline {
    /// Start a batch on the latest submitted batch (durable or not), or on the database's
    /// latest version when none is pending.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut pipeline = db.pipeline(2);
    /// let mut batch = pipeline.begin()?;
    /// batch.put([1u8; 32], "block 1")?;
    /// pipeline.submit(batch.finish()?)?;
    /// let mut next = pipeline.begin()?; // on block 1, durable or not
    /// assert_eq!(next.base_seq(), 1);
    /// assert_eq!(next.get(&[1u8; 32])?, Some(b"block 1".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn begin(&self) -> Result<WriteBatch> {
        match &self.tip {
            Some(tip) if !tip.is_committed() => tip.begin(),
            _ => Ok(self.db.begin()),
        }
    }

    /// Queue a finished batch for its commit. It must have begun on this pipeline's tip
    /// ([`Pipeline::begin`]); it becomes the new tip at once. Blocks while `depth` batches
    /// wait; fails with the committer's error if an earlier commit failed.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut pipeline = db.pipeline(2);
    /// let stray = db.begin().finish()?; // on version 0
    /// pipeline.submit(pipeline.begin()?.finish()?)?; // block 1
    /// let refused = pipeline.submit(stray); // not on the tip, block 1
    /// assert!(matches!(refused, Err(sprig::Error::InvalidArgument(_))));
    /// assert_eq!(pipeline.flush()?.map(|info| info.seq), Some(1));
    /// # Ok(()) }
    /// ```
    pub fn submit(&mut self, pending: Pending) -> Result<()> {
        self.check_failed()?;
        if let Some(tip) = &self.tip {
            if pending.base_seq() != tip.seq() {
                return Err(Error::InvalidArgument(format!(
                    "a pipelined batch must begin on the pipeline's tip (sequence {}), this one \
                     began on sequence {}",
                    tip.seq(),
                    pending.base_seq()
                )));
            }
        }
        let queue = self.queue()?;
        self.tip = Some(pending.clone());
        if queue.send(pending).is_err() {
            // The committer stopped: its error is the answer.
            return Err(self.stop().err().unwrap_or_else(|| {
                Error::internal("the pipeline's committer stopped without an error")
            }));
        }
        Ok(())
    }

    /// The latest submitted batch, if it is not durable yet or was the last one submitted.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut pipeline = db.pipeline(2);
    /// assert!(pipeline.tip().is_none());
    /// let pending = pipeline.begin()?.finish()?;
    /// let root = pending.root();
    /// pipeline.submit(pending)?;
    /// assert_eq!(pipeline.tip().map(|tip| (tip.seq(), tip.root())), Some((1, root)));
    /// # Ok(()) }
    /// ```
    pub fn tip(&self) -> Option<&Pending> {
        self.tip.as_ref()
    }

    /// The pipeline's latest durable commit, if any.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut pipeline = db.pipeline(2);
    /// assert!(pipeline.last_durable().is_none());
    /// pipeline.submit(pipeline.begin()?.finish()?)?;
    /// pipeline.flush()?;
    /// assert_eq!(pipeline.last_durable().map(|info| info.seq), Some(1));
    /// # Ok(()) }
    /// ```
    pub fn last_durable(&self) -> Option<CommitInfo> {
        self.progress().last.clone()
    }

    /// Wait until the commit of sequence number `seq` is durable (or a later one), and return
    /// the latest durable commit; fails with the committer's error if it stopped before.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut pipeline = db.pipeline(2);
    /// for _ in 0..3 {
    ///     pipeline.submit(pipeline.begin()?.finish()?)?;
    /// }
    /// let durable = pipeline.wait_durable(2)?; // block 2 or later
    /// assert!(durable.seq >= 2 && db.seq() >= 2);
    /// assert!(pipeline.wait_durable(9).is_err()); // never submitted
    /// # Ok(()) }
    /// ```
    pub fn wait_durable(&mut self, seq: u64) -> Result<CommitInfo> {
        let shared = self.shared.clone();
        let (lock, ready) = &*shared;
        let mut p = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(last) = p.last.as_ref().filter(|l| l.seq >= seq) {
                return Ok(last.clone());
            }
            let submitted = self.tip.as_ref().is_some_and(|t| t.seq() >= seq);
            if p.failed || self.thread.is_none() || !submitted {
                break;
            }
            p = ready.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
        drop(p);
        self.stop()?;
        Err(Error::InvalidArgument(format!(
            "sequence {seq} was not submitted to this pipeline"
        )))
    }

    /// Wait until every submitted batch is durable; return the last commit (`None` if none
    /// was submitted) or the error that stopped the committer. The pipeline can be used again
    /// afterwards.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
    /// let mut pipeline = db.pipeline(2);
    /// assert_eq!(pipeline.flush()?, None); // nothing submitted
    /// pipeline.submit(pipeline.begin()?.finish()?)?;
    /// pipeline.submit(pipeline.begin()?.finish()?)?;
    /// let last = pipeline.flush()?.expect("two commits");
    /// assert_eq!((last.seq, db.seq()), (2, 2));
    /// # Ok(()) }
    /// ```
    pub fn flush(&mut self) -> Result<Option<CommitInfo>> {
        self.stop()?;
        Ok(self.last_durable())
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        // A poisoned lock means a waiter panicked while reading; the data is still valid.
        self.shared.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_failed(&mut self) -> Result<()> {
        if self.progress().failed {
            self.stop()?;
        }
        Ok(())
    }

    /// The committer's queue, starting the thread if needed.
    fn queue(&mut self) -> Result<SyncSender<Pending>> {
        if let Some(q) = &self.queue {
            return Ok(q.clone());
        }
        let (queue, batches) = sync_channel::<Pending>(self.depth);
        let db = self.db.clone();
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("sprig-pipeline".into())
            .spawn(move || {
                let (lock, ready) = &*shared;
                for pending in batches {
                    let result = db.commit(pending);
                    let mut p = lock.lock().unwrap_or_else(PoisonError::into_inner);
                    let failed = result.is_err();
                    p.failed = failed;
                    if let Ok(info) = &result {
                        p.last = Some(info.clone());
                    }
                    ready.notify_all();
                    drop(p);
                    result?;
                }
                Ok(())
            })
            .map_err(|e| Error::internal(format!("starting the pipeline's committer: {e}")))?;
        self.thread = Some(thread);
        self.queue = Some(queue.clone());
        Ok(queue)
    }

    /// Close the queue and wait for the committer; its error, if it failed.
    fn stop(&mut self) -> Result<()> {
        drop(self.queue.take());
        let result = match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| Error::internal("the pipeline's committer panicked"))?,
            None => Ok(()),
        };
        if result.is_err() {
            // The overlays built on the failed commit are unusable; start over from the db.
            self.tip = None;
            self.progress().failed = false;
        }
        result
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // Errors cannot be reported here; `flush` reports them.
        let _ = self.stop();
    }
}
