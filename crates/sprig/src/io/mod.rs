//! All disk access: one trait, [`Storage`], over the files of one database directory, with
//! aligned block buffers for direct I/O.
//!
//! Everything the engine stores goes through this trait, so that tests can run on the
//! in-memory backend, fault injection and crash simulation can wrap any backend, and the fast
//! path can use io_uring with many requests in flight. Backends never interpret bytes; they
//! only move them. They must never panic on I/O failure: every failure is an `io::Error`.
//!
//! It also owns the choice of backend for a directory ([`open_directory`]) and the report of
//! what was chosen ([`IoBackendInfo`]): a refusal of io_uring or of direct I/O is never
//! silent. io_uring and `O_DIRECT` are Linux-only and gated so; everything else builds on any
//! target with `std`.

mod fault;
mod memory;
mod posix;
pub(crate) mod spares;
#[cfg(target_os = "linux")]
mod uring;
mod write_thread;

pub use fault::{
    CrashMode, Fault, FaultFile, FaultKind, FaultStats, FaultStorage, OpClass, StepKind,
};
pub use memory::MemoryStorage;
pub use posix::PosixStorage;
#[cfg(target_os = "linux")]
pub use uring::UringStorage;
pub(crate) use write_thread::{WriteJob, WriteThreads, Written, WRITE_THREADS};

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

    /// Append one block's bytes.
    pub fn push_bytes(&mut self, bytes: &[u8; BLOCK_BYTES]) {
        self.blocks.push(Block(*bytes));
    }

    /// An empty buffer with room for `n` blocks.
    pub fn with_capacity(n: usize) -> BlockBuf {
        BlockBuf {
            blocks: Vec::with_capacity(n),
        }
    }

    /// Grow to `n` blocks (the new ones zeroed) or shrink to them, keeping the allocation.
    pub fn resize(&mut self, n: usize) {
        self.blocks.resize(n, bytemuck::Zeroable::zeroed());
    }

    /// Remove every block, keeping the allocation.
    pub fn clear(&mut self) {
        self.blocks.clear();
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
    /// The OS file descriptor, for backends that submit I/O themselves (io_uring).
    #[cfg(unix)]
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
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
    /// Whether files opened with [`OpenOptions::direct`] bypass the OS page cache.
    fn direct_io(&self) -> bool {
        false
    }
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
        self.read_batch_each(requests, &mut |_, _| {})
    }
    /// [`Storage::read_batch`], handing each request's index and filled buffer to `done` as
    /// soon as its read completes (in completion order), so that the caller checks and
    /// decodes one page while the others are still in flight. `done` is called only for
    /// reads that returned every byte asked for; the batch still fails with the first error.
    fn read_batch_each(
        &self,
        requests: &mut [ReadRequest<'_>],
        done: &mut dyn FnMut(usize, &BlockBuf),
    ) -> io::Result<()> {
        for (i, r) in requests.iter_mut().enumerate() {
            r.file.read_at(r.buf.as_bytes_mut(), r.offset)?;
            done(i, &r.buf);
        }
        Ok(())
    }
}

/// Which I/O backend a database asks for ([`crate::Options::io_backend`]).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use sprig::{Db, IoBackend, Options};
/// let dir = tempfile::tempdir()?;
/// let options = Options { io_backend: IoBackend::IoUring, ..Options::default() }; // the default
/// let db = Db::open(dir.path(), options)?;
/// let io = db.io_backend(); // io_uring where the kernel allows it, else posix saying why
/// assert!(io.name == "io_uring" || (io.name == "posix" && io.io_uring_refused.is_some()));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoBackend {
    /// io_uring with many requests in flight where the kernel allows it (Linux), otherwise
    /// [`IoBackend::Posix`]. [`crate::Db::io_backend`] says which one is in use, and why
    /// io_uring was refused.
    #[default]
    IoUring,
    /// io_uring or nothing: opening fails with [`crate::Error::IoUringUnavailable`] where the
    /// kernel refuses it (and off Linux). For tests and deployments that must not silently
    /// run without it.
    IoUringRequired,
    /// Plain positioned reads and writes, one at a time (every platform).
    Posix,
}

impl IoBackend {
    /// The name used in options and command lines.
    ///
    /// ```
    /// use sprig::IoBackend;
    /// assert_eq!(IoBackend::default().name(), "io_uring");
    /// assert_eq!(IoBackend::from_name(IoBackend::Posix.name()), Some(IoBackend::Posix));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::IoUring => "io_uring",
            IoBackend::IoUringRequired => "io_uring-required",
            IoBackend::Posix => "posix",
        }
    }

    /// The backend with the given name.
    ///
    /// ```
    /// use sprig::IoBackend;
    /// assert_eq!(IoBackend::from_name("pread"), Some(IoBackend::Posix)); // an alias
    /// assert_eq!(IoBackend::from_name("io_uring-required"), Some(IoBackend::IoUringRequired));
    /// assert_eq!(IoBackend::from_name("aio"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<IoBackend> {
        match name {
            "io_uring" | "io-uring" | "uring" => Some(IoBackend::IoUring),
            "io_uring-required" | "io-uring-required" => Some(IoBackend::IoUringRequired),
            "posix" | "pread" => Some(IoBackend::Posix),
            _ => None,
        }
    }
}

/// The I/O a database really does: which backend serves it, whether it bypasses the page
/// cache, and why either differs from what the options asked for. See
/// [`crate::Db::io_backend`]; [`crate::Stats::io_backend`] carries the same.
///
/// ```
/// use sprig::IoBackendInfo;
/// let info = IoBackendInfo {
///     name: "posix",
///     io_uring_refused: Some("Operation not permitted".into()),
///     ..IoBackendInfo::default()
/// };
/// assert_eq!(info.to_string(), "posix (io_uring refused: Operation not permitted), buffered I/O");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoBackendInfo {
    /// The backend in use: `"io_uring"`, `"posix"`, `"memory"`, or the [`Storage::kind`] of
    /// the storage given to [`crate::Db::open_with_storage`].
    pub name: &'static str,
    /// io_uring was asked for ([`IoBackend::IoUring`]) and refused: the kernel's error.
    pub io_uring_refused: Option<String>,
    /// Whether segment files bypass the OS page cache (`O_DIRECT`).
    pub direct_io: bool,
    /// Direct I/O was asked for ([`crate::Options::direct_io`]) and refused: why.
    pub direct_io_refused: Option<String>,
}

impl IoBackendInfo {
    /// What a storage handed to [`crate::Db::open_with_storage`] reports of itself.
    ///
    /// ```
    /// use sprig::{io::MemoryStorage, IoBackendInfo};
    /// let info = IoBackendInfo::of(&MemoryStorage::new());
    /// assert_eq!((info.name, info.direct_io), ("memory", false));
    /// ```
    pub fn of(storage: &dyn Storage) -> IoBackendInfo {
        IoBackendInfo {
            name: storage.kind(),
            direct_io: storage.direct_io(),
            ..IoBackendInfo::default()
        }
    }
}

impl std::fmt::Display for IoBackendInfo {
    /// E.g. `io_uring, direct I/O` or
    /// `posix (io_uring refused: ...), buffered I/O (direct I/O refused: ...)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)?;
        if let Some(why) = &self.io_uring_refused {
            write!(f, " (io_uring refused: {why})")?;
        }
        f.write_str(if self.direct_io {
            ", direct I/O"
        } else {
            ", buffered I/O"
        })?;
        if let Some(why) = &self.direct_io_refused {
            write!(f, " (direct I/O refused: {why})")?;
        }
        Ok(())
    }
}

/// Open the storage of a database directory on the real file system with the given backend,
/// and say what it really is: io_uring may be refused by the kernel (an error with
/// [`IoBackend::IoUringRequired`], posix with the reason otherwise), direct I/O by the file
/// system.
pub fn open_directory(
    path: &std::path::Path,
    backend: IoBackend,
    direct: bool,
) -> crate::Result<(Arc<dyn Storage>, IoBackendInfo)> {
    let posix = PosixStorage::open(path, direct)
        .map_err(|e| crate::Error::io("opening", path.display().to_string(), e))?;
    with_backend(posix, backend)
}

/// [`open_directory`] for an existing database directory, for reading only: files are opened
/// without write access and nothing is created, renamed or removed (read-only media work).
pub fn open_directory_read_only(
    path: &std::path::Path,
    backend: IoBackend,
    direct: bool,
) -> crate::Result<(Arc<dyn Storage>, IoBackendInfo)> {
    let posix = PosixStorage::open_read_only(path, direct)
        .map_err(|e| crate::Error::io("opening", path.display().to_string(), e))?;
    with_backend(posix, backend)
}

/// The storage `backend` asks for over `posix`, and what it really is.
fn with_backend(
    posix: PosixStorage,
    backend: IoBackend,
) -> crate::Result<(Arc<dyn Storage>, IoBackendInfo)> {
    let direct_io_refused = posix.direct_io_refused().map(str::to_string);
    let (storage, io_uring_refused) = select_backend(posix, backend, try_io_uring)?;
    let info = IoBackendInfo {
        io_uring_refused,
        direct_io_refused,
        ..IoBackendInfo::of(storage.as_ref())
    };
    Ok((storage, info))
}

/// io_uring over `posix`, or `posix` back with the kernel's refusal.
#[cfg(target_os = "linux")]
fn try_io_uring(posix: PosixStorage) -> Result<Arc<dyn Storage>, (PosixStorage, io::Error)> {
    UringStorage::new(posix).map(|u| Arc::new(u) as Arc<dyn Storage>)
}

/// There is no io_uring off Linux.
#[cfg(not(target_os = "linux"))]
fn try_io_uring(posix: PosixStorage) -> Result<Arc<dyn Storage>, (PosixStorage, io::Error)> {
    Err((
        posix,
        io::Error::new(io::ErrorKind::Unsupported, "io_uring exists on Linux only"),
    ))
}

/// The storage `backend` asks for, built on `posix` (`try_io_uring` wraps it in io_uring or
/// gives it back with the refusal), and the refusal if io_uring was asked for and is not used.
fn select_backend(
    posix: PosixStorage,
    backend: IoBackend,
    try_io_uring: impl FnOnce(PosixStorage) -> Result<Arc<dyn Storage>, (PosixStorage, io::Error)>,
) -> crate::Result<(Arc<dyn Storage>, Option<String>)> {
    match backend {
        IoBackend::Posix => Ok((Arc::new(posix), None)),
        IoBackend::IoUring => match try_io_uring(posix) {
            Ok(uring) => Ok((uring, None)),
            Err((posix, refused)) => Ok((Arc::new(posix), Some(refused.to_string()))),
        },
        IoBackend::IoUringRequired => match try_io_uring(posix) {
            Ok(uring) => Ok((uring, None)),
            Err((_, source)) => Err(crate::Error::IoUringUnavailable { source }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refuse(posix: PosixStorage) -> Result<Arc<dyn Storage>, (PosixStorage, io::Error)> {
        Err((posix, io::Error::from(io::ErrorKind::PermissionDenied)))
    }

    #[test]
    fn a_resized_buffer_keeps_its_blocks_and_zeroes_the_new_ones() {
        let mut buf = BlockBuf::with_capacity(1);
        buf.push_bytes(&[7u8; BLOCK_BYTES]);
        buf.resize(3);
        assert_eq!(buf.block_count(), 3);
        let all = buf.as_bytes();
        assert!(all[..BLOCK_BYTES].iter().all(|b| *b == 7));
        assert!(all[BLOCK_BYTES..].iter().all(|b| *b == 0));
        // Shrunk and grown again: no stale byte shows in the regrown blocks.
        buf.as_bytes_mut().fill(5);
        buf.resize(1);
        buf.resize(2);
        assert!(buf.as_bytes()[..BLOCK_BYTES].iter().all(|b| *b == 5));
        assert!(buf.as_bytes()[BLOCK_BYTES..].iter().all(|b| *b == 0));
    }

    #[test]
    fn a_refused_io_uring_falls_back_to_posix_with_the_reason_or_fails_if_required() {
        let dir = tempfile::tempdir().unwrap();
        let posix = || PosixStorage::open(dir.path(), false).unwrap();

        let (storage, refused) = select_backend(posix(), IoBackend::IoUring, refuse).unwrap();
        assert_eq!(storage.kind(), "posix");
        let refused = refused.expect("the refusal is reported");
        assert!(refused.contains("permission denied"), "{refused}");

        match select_backend(posix(), IoBackend::IoUringRequired, refuse) {
            Err(crate::Error::IoUringUnavailable { source }) => {
                assert_eq!(source.kind(), io::ErrorKind::PermissionDenied)
            }
            Err(other) => panic!("wrong error: {other}"),
            Ok((storage, _)) => panic!("opened {} although io_uring was refused", storage.kind()),
        }

        // Posix never asks the kernel for io_uring, so it has nothing to report.
        let (storage, refused) = select_backend(posix(), IoBackend::Posix, |_| {
            panic!("posix must not try io_uring")
        })
        .unwrap();
        assert_eq!((storage.kind(), refused), ("posix", None));
    }

    #[test]
    fn backend_names_round_trip() {
        for b in [
            IoBackend::IoUring,
            IoBackend::IoUringRequired,
            IoBackend::Posix,
        ] {
            assert_eq!(IoBackend::from_name(b.name()), Some(b));
        }
        assert_eq!(IoBackend::from_name("aio"), None);
    }

    #[test]
    fn the_description_names_the_backend_and_every_refusal() {
        let info = IoBackendInfo {
            name: "posix",
            io_uring_refused: Some("Operation not permitted (os error 1)".into()),
            direct_io: false,
            direct_io_refused: Some("the file system refuses O_DIRECT".into()),
        };
        assert_eq!(
            info.to_string(),
            "posix (io_uring refused: Operation not permitted (os error 1)), buffered I/O \
             (direct I/O refused: the file system refuses O_DIRECT)"
        );
        let info = IoBackendInfo {
            name: "io_uring",
            direct_io: true,
            ..IoBackendInfo::default()
        };
        assert_eq!(info.to_string(), "io_uring, direct I/O");
    }
}
