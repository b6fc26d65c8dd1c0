//! Writes handed to a thread of their own, so that the thread that stages them goes on while
//! the SSD writes: one thread per database, started with the first write handed to it and
//! ended (after the writes it holds) when the database closes. Each write reports back on the
//! channel its job names, with its buffer, so its sender can reuse the buffer.

use crate::io::{BlockBuf, StorageFile};
use parking_lot::Mutex;
use std::io;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A written buffer and the write's result.
pub type Written = (BlockBuf, io::Result<()>);

/// One write for the thread.
pub struct WriteJob {
    /// The file to write.
    pub file: Arc<dyn StorageFile>,
    /// Where in it.
    pub offset: u64,
    /// What: the first `len` bytes of `buf`.
    pub buf: BlockBuf,
    /// How many bytes of `buf` to write (at most its length).
    pub len: usize,
    /// Where the buffer and the result go.
    pub reply: Sender<Written>,
}

/// The write thread of one database.
#[derive(Default)]
pub struct WriteThread {
    started: Mutex<Option<Started>>,
}

struct Started {
    jobs: Sender<WriteJob>,
    thread: JoinHandle<()>,
}

impl WriteThread {
    /// A write thread not started yet.
    pub fn new() -> WriteThread {
        WriteThread::default()
    }

    /// Hand `job` to the thread, starting it on first use. The job comes back when no thread
    /// can take it (it cannot be started, or it ended): write it on the calling thread.
    pub fn submit(&self, job: WriteJob) -> Result<(), WriteJob> {
        let mut started = self.started.lock();
        if started.is_none() {
            let (jobs, todo) = channel::<WriteJob>();
            let thread = std::thread::Builder::new()
                .name("sprig-writer".into())
                .spawn(move || {
                    for job in todo {
                        let result = match job.buf.as_bytes().get(..job.len) {
                            Some(bytes) => job.file.write_at(bytes, job.offset),
                            None => Err(io::Error::new(
                                io::ErrorKind::InvalidInput,
                                "a write longer than its buffer",
                            )),
                        };
                        // The sender may be gone (a stager dropped unfinished): nothing waits.
                        let _unheard = job.reply.send((job.buf, result));
                    }
                });
            match thread {
                Ok(thread) => *started = Some(Started { jobs, thread }),
                Err(_) => return Err(job),
            }
        }
        match started.as_ref() {
            Some(s) => s.jobs.send(job).map_err(|returned| returned.0),
            None => Err(job),
        }
    }
}

impl Drop for WriteThread {
    fn drop(&mut self) {
        // Closing the channel ends the thread once the writes it holds are done.
        if let Some(Started { jobs, thread }) = self.started.get_mut().take() {
            drop(jobs);
            let _ended = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{MemoryStorage, OpenOptions, Storage};

    #[test]
    fn writes_run_on_the_thread_in_order_and_report_back() {
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
        let writes = WriteThread::new();
        let (reply, done) = channel();
        for i in 0..4u8 {
            // Two blocks of buffer, one written.
            let mut buf = BlockBuf::from_bytes(&[i; 2 * crate::io::BLOCK_BYTES]);
            let job = WriteJob {
                file: file.clone(),
                offset: u64::from(i) * crate::io::BLOCK_BYTES as u64,
                len: crate::io::BLOCK_BYTES,
                buf: std::mem::take(&mut buf),
                reply: reply.clone(),
            };
            assert!(writes.submit(job).is_ok());
        }
        for i in 0..4u8 {
            let (buf, result) = done.recv().unwrap();
            result.unwrap();
            assert_eq!(buf.as_bytes()[0], i, "reports come in submission order");
        }
        assert_eq!(file.size().unwrap(), 4 * crate::io::BLOCK_BYTES as u64);
        let mut back = vec![0u8; 4 * crate::io::BLOCK_BYTES];
        file.read_at(&mut back, 0).unwrap();
        for (i, block) in back.chunks(crate::io::BLOCK_BYTES).enumerate() {
            assert!(block.iter().all(|b| usize::from(*b) == i));
        }
        drop(writes);
    }
}
