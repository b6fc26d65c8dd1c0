//! Writes handed to threads of their own, so that the thread that stages them goes on while
//! the SSD writes: [`WRITE_THREADS`] threads per database, started with the first write handed
//! to them and ended (after the writes they hold) when the database closes, so that that many
//! writes can be in flight (a virtual SSD wrote 1 MiB runs at 1.4 GB/s one at a time and
//! 2.7 GB/s two at a time, fio, O_DIRECT). Each write reports back on the channel its job
//! names, with its buffer and tag, so its sender can reuse the buffer.

use crate::io::{BlockBuf, StorageFile};
use parking_lot::Mutex;
use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How many writes of one database can be in flight.
pub const WRITE_THREADS: usize = 2;

/// A write's tag, its buffer and its result; `Err` with the panic's payload if the storage
/// backend panicked while writing (the sender resumes it, as if it had written itself).
pub type Written = (u32, BlockBuf, std::thread::Result<io::Result<()>>);

/// One write for the threads.
pub struct WriteJob {
    /// The file to write.
    pub file: Arc<dyn StorageFile>,
    /// Where in it.
    pub offset: u64,
    /// What: the first `len` bytes of `buf`.
    pub buf: BlockBuf,
    /// How many bytes of `buf` to write (at most its length).
    pub len: usize,
    /// Given back with the result (the sender's name for the write).
    pub tag: u32,
    /// Where the tag, the buffer and the result go.
    pub reply: Sender<Written>,
}

/// The write threads of one database.
#[derive(Default)]
pub struct WriteThreads {
    state: Mutex<Threads>,
}

/// Whether the threads run.
#[derive(Default)]
enum Threads {
    /// Not asked for yet.
    #[default]
    NotStarted,
    /// Taking jobs from the queue.
    Running {
        jobs: Sender<WriteJob>,
        threads: Vec<JoinHandle<()>>,
    },
    /// None could be started: writes go back to their senders.
    Refused,
}

impl WriteThreads {
    /// Write threads not started yet.
    pub fn new() -> WriteThreads {
        WriteThreads::default()
    }

    /// Hand `job` to the threads, starting them on first use. The job comes back when no
    /// thread can take it (none can be started, or they ended): write it on the calling thread.
    pub fn submit(&self, job: WriteJob) -> Result<(), WriteJob> {
        let mut state = self.state.lock();
        if matches!(*state, Threads::NotStarted) {
            *state = start();
        }
        match &*state {
            Threads::Running { jobs, .. } => jobs.send(job).map_err(|returned| returned.0),
            Threads::NotStarted | Threads::Refused => Err(job),
        }
    }
}

/// Start the threads on one queue; refused if none starts.
fn start() -> Threads {
    let (jobs, todo) = channel::<WriteJob>();
    let todo = Arc::new(Mutex::new(todo));
    let threads: Vec<JoinHandle<()>> = (0..WRITE_THREADS)
        .filter_map(|i| {
            let todo = todo.clone();
            std::thread::Builder::new()
                .name(format!("sprig-writer-{i}"))
                .spawn(move || write_jobs(&todo))
                .ok()
        })
        .collect();
    if threads.is_empty() {
        Threads::Refused
    } else {
        Threads::Running { jobs, threads }
    }
}

/// A write thread's loop: take the next job (one thread at a time waits on the queue), write
/// it, report; until the queue closes.
fn write_jobs(todo: &Mutex<Receiver<WriteJob>>) {
    loop {
        let next = todo.lock().recv();
        let Ok(job) = next else {
            return;
        };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            match job.buf.as_bytes().get(..job.len) {
                Some(bytes) => job.file.write_at(bytes, job.offset),
                None => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a write longer than its buffer",
                )),
            }
        }));
        // A stager waits for its reports, even when dropped; if its channel is gone all the
        // same, nobody is left to tell.
        let _unheard = job.reply.send((job.tag, job.buf, result));
    }
}

impl Drop for WriteThreads {
    fn drop(&mut self) {
        // Closing the queue ends the threads once the writes they hold are done.
        if let Threads::Running { jobs, threads } = std::mem::take(self.state.get_mut()) {
            drop(jobs);
            for thread in threads {
                let _ended = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{MemoryStorage, OpenOptions, Storage};

    #[test]
    fn writes_run_on_the_threads_and_report_back() {
        let storage = MemoryStorage::new();
        let file = storage
            .open(
                "f",
                OpenOptions {
                    create: true,
                    direct: false,
                },
            )
            .unwrap();
        let writes = WriteThreads::new();
        let (reply, done) = channel();
        for i in 0..4u8 {
            // Two blocks of buffer, one written.
            let mut buf = BlockBuf::from_bytes(&[i; 2 * crate::io::BLOCK_BYTES]);
            let job = WriteJob {
                file: file.clone(),
                offset: u64::from(i) * crate::io::BLOCK_BYTES as u64,
                len: crate::io::BLOCK_BYTES,
                tag: u32::from(i),
                buf: std::mem::take(&mut buf),
                reply: reply.clone(),
            };
            assert!(writes.submit(job).is_ok());
        }
        // Each report names its write (they may come in any order).
        let mut tags = Vec::new();
        for _ in 0..4u8 {
            let (tag, buf, result) = done.recv().unwrap();
            result.unwrap().unwrap();
            assert_eq!(u32::from(buf.as_bytes()[0]), tag);
            tags.push(tag);
        }
        tags.sort_unstable();
        assert_eq!(tags, [0, 1, 2, 3]);
        assert_eq!(file.size().unwrap(), 4 * crate::io::BLOCK_BYTES as u64);
        let mut back = vec![0u8; 4 * crate::io::BLOCK_BYTES];
        file.read_at(&mut back, 0).unwrap();
        for (i, block) in back.chunks(crate::io::BLOCK_BYTES).enumerate() {
            assert!(block.iter().all(|b| usize::from(*b) == i));
        }
        drop(writes);
    }
}
