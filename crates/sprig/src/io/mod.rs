//! All disk access: one trait, [`Storage`], over the files of one database directory, with
//! aligned block buffers for direct I/O.
//!
//! Everything the engine stores goes through this trait, so that tests can run on the
//! in-memory backend, fault injection and crash simulation can wrap any backend, and the fast
//! path can use io_uring with many requests in flight. Backends never interpret bytes; they
//! only move them. They must never panic on I/O failure: every failure is an `io::Error`.

mod fault;
mod memory;
mod posix;
#[cfg(target_os = "linux")]
mod uring;

pub use fault::{
    CrashMode, Fault, FaultFile, FaultKind, FaultStats, FaultStorage, OpClass, StepKind,
};
pub use memory::MemoryStorage;
pub use posix::PosixStorage;
#[cfg(target_os = "linux")]
pub use uring::UringStorage;

use std::io;
use std::sync::Arc;

/// The unit of every page, record and direct-I/O transfer.
pub const BLOCK_BYTES: usize = 4096;

/// One 4 KiB block, aligned for `O_DIRECT`.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
pub struct Block(pub [u8; BLOCK_BYTES]);

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({:016x})", crate::codec::checksum(&self.0))
    }
}

/// A run of contiguous aligned blocks: the buffer of every read and write.
#[derive(Clone, Default)]
pub struct BlockBuf {
    blocks: Vec<Block>,
}

impl BlockBuf {
    /// `n` zeroed blocks.
    pub fn zeroed(n: usize) -> BlockBuf {
        BlockBuf {
            blocks: vec![Block([0u8; BLOCK_BYTES]); n],
        }
    }

    /// A buffer holding `bytes`, zero-padded to whole blocks.
    pub fn from_bytes(bytes: &[u8]) -> BlockBuf {
        let mut buf = BlockBuf::zeroed(bytes.len().div_ceil(BLOCK_BYTES));
        if let Some(dst) = buf.as_bytes_mut().get_mut(..bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        buf
    }

    /// The number of blocks.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.blocks.len() * BLOCK_BYTES
    }

    /// Whether the buffer holds no block.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.blocks)
    }

    /// The bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }

    /// Append the blocks of `other`.
    pub fn extend_from(&mut self, other: &BlockBuf) {
        self.blocks.extend_from_slice(&other.blocks);
    }

    /// Append one block.
    pub fn push(&mut self, block: &Block) {
        self.blocks.push(*block);
    }
}

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Bypass the OS page cache (`O_DIRECT`): offsets, lengths and buffers must be multiples
    /// of [`BLOCK_BYTES`]. Backends without direct I/O ignore it.
    pub direct: bool,
}

/// An open file of a [`Storage`].
pub trait StorageFile: Send + Sync {
    /// Fill `buf` from `offset`. Reading past the end of the file is an error
    /// (`UnexpectedEof`).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Write all of `data` at `offset`, growing the file if needed.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Make every completed write to this file durable (`fdatasync`).
    fn sync(&self) -> io::Result<()>;
    /// The file's length in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Truncate or extend the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The OS file descriptor, for backends that submit I/O themselves.
    fn raw_fd(&self) -> Option<i32> {
        None
    }
}

/// One read of a batch. The request owns its buffer, so that a backend whose asynchronous
/// reads cannot be accounted for can keep the buffer alive instead of letting it be freed.
pub struct ReadRequest<'a> {
    /// The file to read.
    pub file: &'a dyn StorageFile,
    /// Where to read from.
    pub offset: u64,
    /// Where to read into (its length is the length of the read).
    pub buf: BlockBuf,
}

/// The files of one database directory.
pub trait Storage: Send + Sync {
    /// A short name of the backend, for stats and logs.
    fn kind(&self) -> &'static str;
    /// Open (or create) the file `name` in the database directory.
    fn open(&self, name: &str, options: OpenOptions) -> io::Result<Arc<dyn StorageFile>>;
    /// Delete the file `name`.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Rename `from` to `to`, replacing `to` atomically.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// The names of every file in the directory.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Make creations, removals and renames in the directory durable.
    fn sync_dir(&self) -> io::Result<()>;
    /// Perform many reads; backends with asynchronous I/O keep them all in flight at once.
    /// Fails with the first error met.
    fn read_batch(&self, requests: &mut [ReadRequest<'_>]) -> io::Result<()> {
        for r in requests.iter_mut() {
            r.file.read_at(r.buf.as_bytes_mut(), r.offset)?;
        }
        Ok(())
    }
}

/// Which I/O backend a database uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoBackend {
    /// io_uring with many requests in flight (Linux); falls back to [`IoBackend::Posix`] where
    /// the kernel refuses io_uring.
    #[default]
    IoUring,
    /// Plain positioned reads and writes, one at a time.
    Posix,
}

impl IoBackend {
    /// The name used in options and command lines.
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::IoUring => "io_uring",
            IoBackend::Posix => "posix",
        }
    }

    /// The backend with the given name.
    pub fn from_name(name: &str) -> Option<IoBackend> {
        match name {
            "io_uring" | "io-uring" | "uring" => Some(IoBackend::IoUring),
            "posix" | "pread" => Some(IoBackend::Posix),
            _ => None,
        }
    }
}

/// Open the storage of a database directory on the real file system with the given backend.
pub fn open_directory(
    path: &std::path::Path,
    backend: IoBackend,
    direct: bool,
) -> io::Result<Arc<dyn Storage>> {
    with_backend(PosixStorage::open(path, direct)?, backend)
}

/// Open the storage of an existing database directory for reading only: files are opened
/// without write access and nothing is created, renamed or removed (read-only media work).
pub fn open_directory_read_only(
    path: &std::path::Path,
    backend: IoBackend,
    direct: bool,
) -> io::Result<Arc<dyn Storage>> {
    with_backend(PosixStorage::open_read_only(path, direct)?, backend)
}

fn with_backend(posix: PosixStorage, backend: IoBackend) -> io::Result<Arc<dyn Storage>> {
    match backend {
        IoBackend::Posix => Ok(Arc::new(posix)),
        #[cfg(target_os = "linux")]
        IoBackend::IoUring => match UringStorage::new(posix) {
            Ok(u) => Ok(Arc::new(u)),
            Err((posix, _refused)) => Ok(Arc::new(posix)),
        },
        #[cfg(not(target_os = "linux"))]
        IoBackend::IoUring => Ok(Arc::new(posix)),
    }
}
