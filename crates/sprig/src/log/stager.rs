//! Blocks staged for writing to the segment files: a commit's (or an import's) pages and values
//! are gathered in runs of consecutive blocks, and each full run is written on the database's
//! write threads (`io/write_thread.rs`) while the next is staged, so the SSD's write time
//! overlaps the staging's CPU. A stager dropped unfinished (on an error) first waits for its
//! runs in flight, so no write of it lands after the error is returned.
//!
//! Nothing is synced here; the publish path ([`crate::log::publish`]) syncs what was written.
//! The storage sees the same operations as if every run were written on the caller's thread,
//! in the same order but for the runs in flight together: up to `WRITE_THREADS` (two) runs of
//! one segment are written at once (so two of them may reach the file in either order;
//! neither is synced yet), and the stager waits for every run in flight before any other
//! storage operation of its own (opening a segment file, a write of its own, the end).

use crate::error::{Error, Result};
use crate::io::{BlockBuf, StorageFile, WriteJob, Written, BLOCK_BYTES, WRITE_THREADS};
use crate::log::segments::{
    end_marker_block, loc, loc_block, loc_offset, loc_segment, segment_file_name, SegmentTable,
    Segments,
};
use std::collections::BTreeSet;
use std::sync::mpsc::{channel, Receiver, Sender};

/// Blocks staged for writing: consecutive blocks are gathered in one aligned buffer of at most
/// [`STAGE_BLOCKS`] blocks, handed to the write threads when the buffer is full or the next
/// block is not contiguous, and the last run is written at the end. A commit's extra memory
/// for its writes is at most `1 + WRITE_THREADS` such buffers (the one staged, those in
/// flight), whatever its size; the segments keep two of them for the next stager.
pub(crate) struct Stager<'a> {
    segments: &'a Segments,
    /// The run being staged: its first `used` blocks. It grows (zeroed) only when a run needs
    /// more blocks than it has, so a reused buffer is copied into, never cleared or zeroed.
    buf: BlockBuf,
    used: usize,
    /// Where the staged run starts.
    start: u64,
    /// Bytes handed out for writing so far.
    bytes: u64,
    /// Segments written to.
    touched: BTreeSet<u32>,
    /// Where the write threads report the runs in flight.
    reply: Sender<Written>,
    done: Receiver<Written>,
    /// The segment of each run handed off whose report is not taken yet.
    in_flight: Vec<u32>,
    /// Buffers of runs written, for the next runs.
    spare: Vec<BlockBuf>,
}

/// The largest run staged before it is written (1 MiB).
pub(crate) const STAGE_BLOCKS: usize = 256;

/// What a stager wrote (none of it synced).
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub bytes: u64,
    pub touched: BTreeSet<u32>,
}

impl<'a> Stager<'a> {
    /// An empty stager writing to `segments`.
    pub fn new(segments: &'a Segments) -> Stager<'a> {
        let (reply, done) = channel();
        Stager {
            segments,
            buf: segments
                .take_stage_buffer()
                .unwrap_or_else(|| BlockBuf::with_capacity(STAGE_BLOCKS)),
            used: 0,
            start: 0,
            bytes: 0,
            touched: BTreeSet::new(),
            reply,
            done,
            in_flight: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Stage `bytes` (whole blocks) for location `loc`.
    pub fn push(&mut self, loc: u64, bytes: &[u8]) -> Result<()> {
        self.touched.insert(loc_segment(loc));
        let blocks = bytes.len() / BLOCK_BYTES;
        if blocks * BLOCK_BYTES != bytes.len() {
            return Err(Error::internal("staging a partial block"));
        }
        let contiguous = self.used > 0
            && loc_segment(self.start) == loc_segment(loc)
            && u64::from(loc_block(self.start)) + self.used as u64 == u64::from(loc_block(loc));
        if !contiguous || self.used + blocks > STAGE_BLOCKS {
            self.hand_off()?;
        }
        if blocks > STAGE_BLOCKS {
            // Larger than the buffer (a big value): written here, from an aligned copy of its
            // own, once the runs in flight are done.
            self.wait_all()?;
            let file = self.segments.file_to_write(loc_segment(loc))?;
            self.bytes += bytes.len() as u64;
            return write_run(&*file, loc, BlockBuf::from_bytes(bytes).as_bytes());
        }
        if self.used == 0 {
            self.start = loc;
        }
        let end = self.used + blocks;
        if end > self.buf.block_count() {
            self.buf
                .resize(end.max(2 * self.buf.block_count()).min(STAGE_BLOCKS));
        }
        self.buf
            .as_bytes_mut()
            .get_mut(self.used * BLOCK_BYTES..end * BLOCK_BYTES)
            .ok_or_else(|| Error::internal("a staged run beyond its buffer"))?
            .copy_from_slice(bytes);
        self.used = end;
        Ok(())
    }

    /// Hand the staged run to the write threads (once a thread is free, and once every run in
    /// flight is done if it begins another segment, whose file may be created), or write it
    /// here if no thread can take it.
    fn hand_off(&mut self) -> Result<()> {
        if self.used == 0 {
            return Ok(());
        }
        let segment = loc_segment(self.start);
        if self.in_flight.iter().any(|s| *s != segment) {
            self.wait_all()?;
        }
        while self.in_flight.len() >= WRITE_THREADS {
            self.wait_one()?;
        }
        let file = self.segments.file_to_write(segment)?;
        let next = self
            .spare
            .pop()
            .or_else(|| self.segments.take_stage_buffer())
            .unwrap_or_else(|| BlockBuf::with_capacity(STAGE_BLOCKS));
        let job = WriteJob {
            file,
            offset: loc_offset(self.start),
            buf: std::mem::replace(&mut self.buf, next),
            len: self.used * BLOCK_BYTES,
            tag: segment,
            reply: self.reply.clone(),
        };
        match self.segments.write_threads().submit(job) {
            Ok(()) => {
                self.in_flight.push(segment);
                self.bytes += (self.used * BLOCK_BYTES) as u64;
                self.used = 0;
                Ok(())
            }
            Err(job) => {
                // No thread: the run goes back in place and is written here.
                let next = std::mem::replace(&mut self.buf, job.buf);
                self.spare.push(next);
                self.write_staged(&*job.file)
            }
        }
    }

    /// Write the staged run to `file` (its segment's) on this thread.
    fn write_staged(&mut self, file: &dyn StorageFile) -> Result<()> {
        let bytes = self
            .buf
            .as_bytes()
            .get(..self.used * BLOCK_BYTES)
            .ok_or_else(|| Error::internal("a staged run beyond its buffer"))?;
        write_run(file, self.start, bytes)?;
        self.bytes += bytes.len() as u64;
        self.used = 0;
        Ok(())
    }

    /// The report of one run in flight (there must be one), taken off the runs in flight.
    fn take_report(&mut self) -> Result<Written> {
        let report = self
            .done
            .recv()
            .map_err(|_| Error::internal("the write threads ended with runs in flight"))?;
        let at = self
            .in_flight
            .iter()
            .position(|s| *s == report.0)
            .ok_or_else(|| Error::internal("a report of a run never handed off"))?;
        self.in_flight.swap_remove(at);
        Ok(report)
    }

    /// Wait for one run in flight (there must be one); its error, if it failed.
    fn wait_one(&mut self) -> Result<()> {
        let (segment, buf, result) = self.take_report()?;
        self.spare.push(buf);
        match result {
            Ok(written) => written.map_err(|e| Error::io("writing", segment_file_name(segment), e)),
            // The storage backend panicked: as if it had on this thread.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Wait for every run in flight; the first error, if any failed.
    fn wait_all(&mut self) -> Result<()> {
        let mut first = Ok(());
        while !self.in_flight.is_empty() {
            let done = self.wait_one();
            if first.is_ok() {
                first = done;
            }
        }
        first
    }

    /// Stage the end marker of [`Stager::finish`], if one is needed.
    fn mark_end(&mut self, table: &SegmentTable) -> Result<()> {
        let segment = table.active;
        if !self.touched.contains(&segment) {
            return Ok(());
        }
        let fill = table.segments.get(&segment).map_or(0, |m| m.used_blocks);
        if fill >= table.segment_blocks {
            return Ok(());
        }
        let end = u64::from(fill) * BLOCK_BYTES as u64;
        let size = self
            .segments
            .file_to_write(segment)?
            .size()
            .map_err(|e| Error::io("reading the size of", segment_file_name(segment), e))?;
        if size <= end {
            return Ok(());
        }
        self.push(loc(segment, fill), &end_marker_block(segment, fill))
    }

    /// The segments staged to so far.
    pub fn touched(&self) -> &BTreeSet<u32> {
        &self.touched
    }

    /// Write what is staged, and wait for every write: everything pushed so far can be read
    /// back from the files.
    pub fn flush(&mut self) -> Result<()> {
        self.wait_all()?;
        if self.used > 0 {
            let file = self.segments.file_to_write(loc_segment(self.start))?;
            self.write_staged(&*file)?;
        }
        Ok(())
    }

    /// Write what is left and wait for every write; what was written, for the publication that
    /// makes it durable. `table` is the segment table after the allocations of what was
    /// staged: if its active segment was written to and its file holds older bytes past the
    /// new fill (a recycled file), an end marker goes right after the fill
    /// ([`end_marker_block`]).
    pub fn finish(mut self, table: &SegmentTable) -> Result<Staged> {
        self.mark_end(table)?;
        self.flush()?;
        // Failpoint (feature `failpoints`): written, not synced.
        failpoint!("commit.pages_written");
        Ok(Staged {
            bytes: self.bytes,
            touched: std::mem::take(&mut self.touched),
        })
    }
}

impl Drop for Stager<'_> {
    /// An unfinished stager (a commit or import that failed) waits for its runs in flight, so
    /// that none lands after the failure is reported (an import's failure may leave the writer
    /// usable, and the next commit reuses the blocks).
    fn drop(&mut self) {
        // Their results (the failure is already on its way) and panics are dropped here.
        while !self.in_flight.is_empty() && self.take_report().is_ok() {}
        // Its buffers serve the next stager (the buffers in flight come back in the reports
        // above, which drop them; on a failure to take a report, none is kept).
        if self.in_flight.is_empty() {
            let buf = std::mem::take(&mut self.buf);
            self.segments
                .keep_stage_buffers(std::iter::once(buf).chain(self.spare.drain(..)));
        }
    }
}

/// Write `bytes` at location `start`.
fn write_run(file: &dyn StorageFile, start: u64, bytes: &[u8]) -> Result<()> {
    file.write_at(bytes, loc_offset(start))
        .map_err(|e| Error::io("writing", segment_file_name(loc_segment(start)), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Fault, FaultKind, FaultStorage, OpClass, StepKind, Storage};
    use crate::log::segments::loc;
    use sprig_core::Hasher;
    use std::sync::Arc;

    /// A segment table whose active segment these tests never write: no end marker.
    fn untouched() -> SegmentTable {
        SegmentTable {
            active: u32::MAX,
            ..SegmentTable::new(256)
        }
    }

    fn segments(storage: &FaultStorage) -> Segments {
        let storage: Arc<dyn Storage> = Arc::new(storage.clone());
        Segments::new(storage, Hasher::Blake3, 1 << 20)
    }

    /// A finished stager's buffers are kept for the next (at most `STAGE_BUFFERS`), so the
    /// next commit does not allocate them, nor zero-fill those grown full-size; a reused
    /// buffer still holds its last run's bytes, and only what is staged again is written.
    #[test]
    fn buffers_serve_the_next_stager_and_write_only_what_it_staged() {
        let storage = FaultStorage::new(3);
        let segs = segments(&storage);
        let mut stager = Stager::new(&segs);
        for b in 0..2 * STAGE_BLOCKS + 10 {
            stager.push(loc(0, b as u32), &[1u8; BLOCK_BYTES]).unwrap();
        }
        stager.finish(&untouched()).unwrap();
        let kept = segs.take_stage_buffer().unwrap();
        assert_eq!(kept.block_count(), STAGE_BLOCKS, "kept full-size");
        segs.keep_stage_buffers([kept]);
        let mut stager = Stager::new(&segs);
        assert_eq!(stager.buf.block_count(), STAGE_BLOCKS, "taken from the kept ones");
        let at = 2 * STAGE_BLOCKS as u32 + 10;
        for b in at..at + 3 {
            stager.push(loc(0, b), &[2u8; BLOCK_BYTES]).unwrap();
        }
        stager.finish(&untouched()).unwrap();
        let file = segs.file(0, false).unwrap();
        assert_eq!(file.size().unwrap(), u64::from(at + 3) * BLOCK_BYTES as u64);
        let mut back = vec![0u8; 3 * BLOCK_BYTES];
        file.read_at(&mut back, u64::from(at) * BLOCK_BYTES as u64).unwrap();
        assert!(back.iter().all(|x| *x == 2));
        // Never more kept than the bound.
        segs.keep_stage_buffers((0..10).map(|_| BlockBuf::zeroed(1)));
        let mut n = 0;
        while segs.take_stage_buffer().is_some() {
            n += 1;
        }
        assert_eq!(n, crate::log::segments::STAGE_BUFFERS);
    }

    /// Every run reaches its place in the file, whether written beside the staging or at the
    /// end; the storage sees one write per run.
    #[test]
    fn runs_are_written_beside_the_staging() {
        let storage = FaultStorage::new(7);
        storage.record_trace(true);
        let segs = segments(&storage);
        let mut stager = Stager::new(&segs);
        // Three full runs and a partial one in segment 0, then one block in segment 1.
        let blocks = 3 * STAGE_BLOCKS + 5;
        for b in 0..blocks {
            let byte = (b % 251) as u8;
            stager.push(loc(0, b as u32), &[byte; BLOCK_BYTES]).unwrap();
        }
        stager.push(loc(1, 0), &[9u8; BLOCK_BYTES]).unwrap();
        let staged = stager.finish(&untouched()).unwrap();
        assert_eq!(staged.bytes, (blocks as u64 + 1) * BLOCK_BYTES as u64);
        assert_eq!(staged.touched, BTreeSet::from([0, 1]));
        let file = segs.file(0, false).unwrap();
        let mut back = vec![0u8; blocks * BLOCK_BYTES];
        file.read_at(&mut back, 0).unwrap();
        for (b, block) in back.chunks(BLOCK_BYTES).enumerate() {
            assert!(block.iter().all(|x| *x == (b % 251) as u8), "block {b}");
        }
        // Which thread wrote each run: the runs handed off (the full ones, and the partial one
        // when segment 1 began) on the write threads, the last (written by `finish`) on this
        // one.
        let me = std::thread::current().id();
        let writers: Vec<bool> = storage
            .trace()
            .into_iter()
            .zip(storage.trace_threads())
            .filter(|((kind, _), _)| *kind == StepKind::Write)
            .map(|(_, thread)| thread == me)
            .collect();
        assert_eq!(writers, [false, false, false, false, true]);
    }

    /// A failed write beside the staging is reported by the stager's next step.
    #[test]
    fn a_failed_run_is_reported() {
        let storage = FaultStorage::new(8);
        storage.add_fault(Fault {
            class: OpClass::Write,
            index: 0,
            kind: FaultKind::Eio,
            persistent: false,
        });
        let segs = segments(&storage);
        let mut stager = Stager::new(&segs);
        let mut failed = None;
        for b in 0..(2 * STAGE_BLOCKS + 1) {
            if let Err(e) = stager.push(loc(0, b as u32), &[1u8; BLOCK_BYTES]) {
                failed = Some(e);
                break;
            }
        }
        let failed = match failed {
            Some(e) => e,
            None => stager.finish(&untouched()).expect_err("the first run's write failed"),
        };
        assert!(failed.to_string().contains("writing"), "{failed}");
    }

    /// Storage whose segment writes take 100 ms each, or panic.
    struct Slow {
        inner: crate::io::MemoryStorage,
        panic: bool,
    }

    struct SlowFile {
        inner: Arc<dyn StorageFile>,
        panic: bool,
    }

    impl StorageFile for SlowFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
            assert!(!self.panic, "the storage backend panics");
            std::thread::sleep(std::time::Duration::from_millis(100));
            self.inner.write_at(data, offset)
        }
        fn sync(&self) -> std::io::Result<()> {
            self.inner.sync()
        }
        fn size(&self) -> std::io::Result<u64> {
            self.inner.size()
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.inner.set_len(len)
        }
    }

    impl Storage for Slow {
        fn kind(&self) -> &'static str {
            "slow"
        }
        fn open(
            &self,
            name: &str,
            options: crate::io::OpenOptions,
        ) -> std::io::Result<Arc<dyn StorageFile>> {
            let inner = self.inner.open(name, options)?;
            Ok(Arc::new(SlowFile {
                inner,
                panic: self.panic,
            }))
        }
        fn remove(&self, name: &str) -> std::io::Result<()> {
            self.inner.remove(name)
        }
        fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
            self.inner.rename(from, to)
        }
        fn list(&self) -> std::io::Result<Vec<String>> {
            self.inner.list()
        }
        fn sync_dir(&self) -> std::io::Result<()> {
            self.inner.sync_dir()
        }
    }

    fn slow_segments(panic: bool) -> Segments {
        let storage: Arc<dyn Storage> = Arc::new(Slow {
            inner: crate::io::MemoryStorage::new(),
            panic,
        });
        Segments::new(storage, Hasher::Blake3, 1 << 20)
    }

    /// A stager dropped unfinished (its commit failed) returns only once its runs in flight
    /// are written: none lands after the failure is reported.
    #[test]
    fn a_dropped_stager_waits_for_its_runs() {
        let segs = slow_segments(false);
        let mut stager = Stager::new(&segs);
        // Two full runs handed off (both in flight), a third staged.
        for b in 0..(2 * STAGE_BLOCKS + 1) {
            stager.push(loc(0, b as u32), &[4u8; BLOCK_BYTES]).unwrap();
        }
        drop(stager);
        let file = segs.file(0, false).unwrap();
        assert_eq!(file.size().unwrap(), (2 * STAGE_BLOCKS * BLOCK_BYTES) as u64);
    }

    /// A panic of the storage backend on a write thread reaches the staging thread (it does
    /// not wait forever for the run's report).
    #[test]
    fn a_backend_panic_on_a_write_thread_reaches_the_stager() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let segs = slow_segments(true);
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut stager = Stager::new(&segs);
                for b in 0..(2 * STAGE_BLOCKS + 1) {
                    let _ = stager.push(loc(0, b as u32), &[4u8; BLOCK_BYTES]);
                }
                let _ = stager.finish(&untouched());
            }));
            let _ = done.send(caught.is_err());
        });
        let panicked = finished.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(panicked, Ok(true), "the backend's panic never reached the stager");
    }

}
