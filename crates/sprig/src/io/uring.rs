//! The io_uring backend (Linux): batched reads are submitted together and kept in flight, up
//! to [`QUEUE_DEPTH`] at a time, so one batch of page reads costs about one SSD latency instead
//! of one latency per page. Everything else (writes, syncs, file management) is the portable
//! backend's: commits write long sequential runs, for which one `pwrite` is already the best.

use super::{BlockBuf, OpenOptions, PosixStorage, ReadRequest, Storage, StorageFile};
use io_uring::{opcode, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::sync::Arc;

/// How many reads one thread keeps in flight. Transfer 2^24's read phase (a batch's reads on
/// both cores, a ring each) read ~88k pages a second at 128 and ~95k at 256, on a disk fio
/// measured at 100k IOPS at QD32 (BENCHMARKS.md, section 0000000000000000000000).
pub const QUEUE_DEPTH: u32 = 256;

thread_local! {
    /// Each thread submits on its own ring: no locks on the read path.
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// The portable backend with reads batched through io_uring.
pub struct UringStorage {
    posix: PosixStorage,
}

impl UringStorage {
    /// Wrap `posix`, if the kernel allows io_uring here; otherwise give it back with the
    /// reason.
    pub fn new(posix: PosixStorage) -> Result<UringStorage, (PosixStorage, io::Error)> {
        match IoUring::new(QUEUE_DEPTH) {
            Ok(_) => Ok(UringStorage { posix }),
            Err(e) => Err((posix, e)),
        }
    }
}

/// Why a batch failed: an ordinary read error, or a failure of the ring itself after which it
/// must not be used again.
enum BatchError {
    Read(io::Error),
    RingBroken(io::Error),
}

fn with_ring(f: impl FnOnce(&mut IoUring) -> Result<(), BatchError>) -> io::Result<()> {
    RING.with(|cell| {
        let taken = cell.borrow_mut().take();
        let mut ring = match taken {
            Some(ring) => ring,
            None => IoUring::new(QUEUE_DEPTH)?,
        };
        match f(&mut ring) {
            Ok(()) => {
                *cell.borrow_mut() = Some(ring);
                Ok(())
            }
            Err(BatchError::Read(e)) => {
                *cell.borrow_mut() = Some(ring);
                Err(e)
            }
            Err(BatchError::RingBroken(e)) => {
                // Reads may still be outstanding on it: keep its memory and file descriptor
                // alive forever rather than risk the kernel writing into reused memory.
                std::mem::forget(ring);
                Err(e)
            }
        }
    })
}

/// Read every request, keeping up to [`QUEUE_DEPTH`] in flight.
///
/// Returns only when no submitted read is outstanding. If the ring itself fails while reads
/// are in flight, their buffers are leaked (never freed while the kernel might write into
/// them) and the thread's ring is discarded.
fn read_all(
    ring: &mut IoUring,
    requests: &mut [ReadRequest<'_>],
    done: &mut dyn FnMut(usize, &BlockBuf),
) -> Result<(), BatchError> {
    let mut next = 0usize;
    // Which requests are in flight, by index (a completion is found in constant time: a scan
    // of a list of 256 per completion cost ~4.5 ms of CPU a transfer 2^24 batch), and how many.
    let mut flying = vec![false; requests.len()];
    let mut in_flight = 0usize;
    let mut first_error: Option<io::Error> = None;
    while next < requests.len() || in_flight > 0 {
        while first_error.is_none() && next < requests.len() && in_flight < QUEUE_DEPTH as usize {
            let Some(request) = requests.get_mut(next) else {
                break;
            };
            let Some(fd) = request.file.raw_fd() else {
                // Not a file of ours: read it synchronously.
                match request
                    .file
                    .read_at(request.buf.as_bytes_mut(), request.offset)
                {
                    Ok(()) => done(next, &request.buf),
                    Err(e) => first_error = Some(e),
                }
                next += 1;
                continue;
            };
            let Ok(len) = u32::try_from(request.buf.len()) else {
                first_error = Some(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "read too large",
                ));
                break;
            };
            let entry =
                opcode::Read::new(types::Fd(fd), request.buf.as_bytes_mut().as_mut_ptr(), len)
                    .offset(request.offset)
                    .build()
                    .user_data(next as u64);
            // SAFETY: the buffer is owned by `requests[next]`, which outlives this call. This
            // function does not return while the read is outstanding: either its completion is
            // reaped below, or (if the ring fails) the buffer is leaked by `abandon`. `len` is
            // the buffer's exact length.
            let pushed = unsafe { ring.submission().push(&entry) };
            if pushed.is_err() {
                break; // Submission queue full: submit what is queued first.
            }
            flying[next] = true; // `next < requests.len()`, the length of `flying`
            in_flight += 1;
            next += 1;
        }
        if in_flight == 0 {
            if first_error.is_some() {
                break;
            }
            continue;
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) => {}
            Err(e) => {
                abandon(requests, &flying);
                return Err(BatchError::RingBroken(e));
            }
        }
        for cqe in ring.completion() {
            let index = usize::try_from(cqe.user_data()).unwrap_or(usize::MAX);
            match flying.get_mut(index) {
                Some(f) if *f => {
                    *f = false;
                    in_flight -= 1;
                }
                // Only reads this call submitted complete on this thread's ring, once each.
                _ => {
                    abandon(requests, &flying);
                    return Err(BatchError::RingBroken(io::Error::other(format!(
                        "a completion for read {index}, which is not in flight"
                    ))));
                }
            }
            let result = cqe.result();
            let expected = requests.get(index).map_or(0, |r| r.buf.len());
            if result < 0 {
                first_error.get_or_insert(io::Error::from_raw_os_error(-result));
            } else if result as usize != expected {
                first_error.get_or_insert(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("short read: {result} of {expected} bytes"),
                ));
            } else if let Some(r) = requests.get(index) {
                // The kernel is done with this buffer; the others may still be in flight.
                done(index, &r.buf);
            }
        }
    }
    match first_error {
        Some(e) => Err(BatchError::Read(e)),
        None => Ok(()),
    }
}

/// The ring failed with reads outstanding: leak their buffers so the kernel can never write
/// into freed memory. The caller discards the ring.
fn abandon(requests: &mut [ReadRequest<'_>], flying: &[bool]) {
    for (r, _) in requests.iter_mut().zip(flying).filter(|(_, f)| **f) {
        std::mem::forget(std::mem::take(&mut r.buf));
    }
}

impl Storage for UringStorage {
    fn kind(&self) -> &'static str {
        "io_uring"
    }

    fn direct_io(&self) -> bool {
        self.posix.direct_io()
    }

    fn open(&self, name: &str, options: OpenOptions) -> io::Result<Arc<dyn StorageFile>> {
        self.posix.open(name, options)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.posix.remove(name)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.posix.rename(from, to)
    }

    fn list(&self) -> io::Result<Vec<String>> {
        self.posix.list()
    }

    fn sync_dir(&self) -> io::Result<()> {
        self.posix.sync_dir()
    }

    fn read_batch_each(
        &self,
        requests: &mut [ReadRequest<'_>],
        done: &mut dyn FnMut(usize, &BlockBuf),
    ) -> io::Result<()> {
        match requests {
            [] => Ok(()),
            [one] => {
                one.file.read_at(one.buf.as_bytes_mut(), one.offset)?;
                done(0, &one.buf);
                Ok(())
            }
            _ => with_ring(|ring| read_all(ring, requests, done)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::BLOCK_BYTES;

    #[test]
    fn batched_reads_return_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let posix = PosixStorage::open(dir.path(), true).unwrap();
        // This test's subject is io_uring: a kernel that refuses it fails the test.
        let storage = match UringStorage::new(posix) {
            Ok(storage) => storage,
            Err((_, e)) => panic!("the kernel refuses io_uring ({e}); this test needs it"),
        };
        let f = storage
            .open(
                "data",
                OpenOptions {
                    create: true,
                    direct: true,
                },
            )
            .unwrap();
        let mut all = BlockBuf::zeroed(300);
        for (i, chunk) in all.as_bytes_mut().chunks_mut(BLOCK_BYTES).enumerate() {
            chunk.fill((i % 251) as u8);
        }
        f.write_at(all.as_bytes(), 0).unwrap();
        let mut requests: Vec<ReadRequest<'_>> = (0..300)
            .rev()
            .map(|i| ReadRequest {
                file: f.as_ref(),
                offset: (i * BLOCK_BYTES) as u64,
                buf: BlockBuf::zeroed(1),
            })
            .collect();
        // Every completed read is handed over once, already filled, as it completes.
        let mut seen = vec![0u32; requests.len()];
        storage
            .read_batch_each(&mut requests, &mut |j, buf| {
                let i = 299 - j;
                assert!(buf.as_bytes().iter().all(|&x| x == (i % 251) as u8), "{j}");
                seen[j] += 1;
            })
            .unwrap();
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
        for r in &requests {
            let i = r.offset as usize / BLOCK_BYTES;
            assert!(r.buf.as_bytes().iter().all(|&x| x == (i % 251) as u8));
        }
        // A read past the end fails, and the batch reports it.
        let mut requests = vec![
            ReadRequest {
                file: f.as_ref(),
                offset: 0,
                buf: BlockBuf::zeroed(1),
            },
            ReadRequest {
                file: f.as_ref(),
                offset: (400 * BLOCK_BYTES) as u64,
                buf: BlockBuf::zeroed(1),
            },
        ];
        let mut seen = Vec::new();
        let result = storage.read_batch_each(&mut requests, &mut |j, _| seen.push(j));
        assert!(result.is_err());
        assert_eq!(seen, vec![0], "only the read that succeeded is handed over");
    }
}
