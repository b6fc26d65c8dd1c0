//! The cleaner's read-ahead: pages a commit's cleaning will likely move, read and decoded on a
//! thread of their own while the batch before the commit is finished (its rewrite keeps the
//! cores busy and leaves the SSD idle), then handed to the commit instead of read on its path
//! (~100 ms of a transfer 2^24 commit). What to read is the cleaner's choice
//! (`write/cleaner.rs`); this module owns the thread and the hand-over.
//!
//! It changes what is read when, never what is served. A live page's blocks are never written
//! again (segment ids only grow, blocks are only appended; the end marker a commit may leave
//! past its last block is overwritten before anything lives there), so a page read ahead
//! holds the bytes a read at plan time would return, and the cleaner checks it against the directory exactly as
//! it checks its own reads. The one way the bytes at a location can change is the deletion (or
//! recycling) of its segment's file: a read-ahead is started under the writer's lock, and the
//! deletion of segments (`Log::delete_emptied`), under that lock, first waits
//! for it to end.
//!
//! A read-ahead whose read fails hands over nothing, so the cleaner's own read meets (and
//! reports) the failure.

use crate::error::{Error, Result};
use crate::log::runs::read_pages;
use crate::log::segments::Segments;
use crate::state::blocks::{BlankBlock, PageBlock};
use crate::state::page::Page;
use crate::state::FastMap;
use crate::stats::{Counters, ReadKind};
use parking_lot::Mutex;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Pages read ahead, by location, and the reads that fetched them.
struct Fetched {
    pages: FastMap<u64, Result<Page>>,
    reads: u64,
    blocks: u64,
}

/// A read-ahead in flight, or ended and not taken yet.
enum Ahead {
    Reading(JoinHandle<Fetched>),
    Read(Fetched),
}

/// At most one read-ahead, in flight or waiting for its commit.
#[derive(Default)]
pub(crate) struct ReadAhead {
    slot: Mutex<Option<Ahead>>,
}

impl ReadAhead {
    /// Start reading the pages at `locs` (sorted) from `segments` on a thread of its own. The
    /// caller holds the writer's lock and has taken any earlier read-ahead ([`Self::take`]).
    pub fn start(&self, segments: Arc<Segments>, locs: Vec<u64>) -> Result<()> {
        let mut slot = self.slot.lock();
        if slot.is_some() {
            return Err(Error::internal("a read-ahead started over another"));
        }
        // The pages' memory comes from this thread's allocator arena: they live on in the
        // cache long after the reading thread is gone.
        let blanks = PageBlock::reserve(locs.len());
        let spawned = std::thread::Builder::new()
            .name("sprig-ahead".into())
            .spawn(move || fetch(&segments, &locs, blanks));
        match spawned {
            Ok(handle) => *slot = Some(Ahead::Reading(handle)),
            // Without a thread the cleaner reads the pages itself, as it does without a batch.
            Err(e) => tracing::warn!(target: "sprig", "no thread for the cleaner's read-ahead: {e}"),
        }
        Ok(())
    }

    /// Wait for the read-ahead in flight, if any, to end (its pages stay to be taken).
    pub fn wait(&self) -> Result<()> {
        let mut slot = self.slot.lock();
        if let Some(Ahead::Reading(handle)) = slot.take() {
            *slot = Some(Ahead::Read(join(handle)?));
        }
        Ok(())
    }

    /// Wait for the read-ahead, if any, count its reads, and take its pages (an empty map
    /// without one).
    pub fn take(&self, counters: &Counters) -> Result<FastMap<u64, Result<Page>>> {
        let fetched = match self.slot.lock().take() {
            None => return Ok(FastMap::default()),
            Some(Ahead::Reading(handle)) => join(handle)?,
            Some(Ahead::Read(fetched)) => fetched,
        };
        counters.block_reads(ReadKind::Maintenance, fetched.reads, fetched.blocks);
        Ok(fetched.pages)
    }
}

fn join(handle: JoinHandle<Fetched>) -> Result<Fetched> {
    handle
        .join()
        .map_err(|_| Error::internal("the cleaner's read-ahead thread panicked"))
}

/// Read and decode the pages at `locs` (sorted) into `blanks` (one per location); a failed
/// read hands over none.
fn fetch(segments: &Segments, locs: &[u64], mut blanks: Vec<BlankBlock>) -> Fetched {
    let (mut reads, mut blocks) = (0, 0);
    let decoded = read_pages(
        segments,
        locs,
        &mut |block| match blanks.pop() {
            Some(blank) => Page::decode_summed_into(block, blank),
            // A panic here ends the read-ahead with nothing handed over; the commit that
            // takes it fails with an internal error.
            None => panic!("invariant broken: more pages decoded than locations read ahead"),
        },
        &mut |r, b| {
            reads += r;
            blocks += b;
        },
    );
    Fetched {
        pages: match decoded {
            Ok(pages) => locs.iter().copied().zip(pages).collect(),
            Err(_) => FastMap::default(),
        },
        reads,
        blocks,
    }
}
