//! The portable backend: one database directory on the real file system, with positioned
//! reads and writes of whole buffers (`pread`/`pwrite` on unix; elsewhere a seek and a transfer
//! under a lock), and `O_DIRECT` on Linux where the file system accepts it.
//!
//! It owns the choice of direct I/O: when asked for, it is probed once as the directory is
//! opened, and the answer — with the file system's refusal, if any — is what the backend
//! reports and uses for every file; it never falls back silently file by file. It compiles on
//! every target with `std`; only the direct-I/O flag, the raw file descriptor and the directory
//! sync are platform-specific, each behind its own `cfg`. It never interprets bytes.

use super::{OpenOptions, Storage, StorageFile};
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file the direct-I/O probe creates and removes at once. Its name ends in `.tmp`, so
/// that recovery deletes it if a crash ever leaves it behind.
#[cfg(target_os = "linux")]
const DIRECT_IO_PROBE_FILE: &str = "direct-io-probe.tmp";

/// A database directory accessed with positioned reads and writes.
#[derive(Debug)]
pub struct PosixStorage {
    dir: PathBuf,
    /// Whether files opened with [`OpenOptions::direct`] bypass the page cache.
    direct: bool,
    /// Why direct I/O is off although it was asked for.
    direct_refused: Option<String>,
    /// Files open without write access; creating, renaming, removing and syncing fail.
    read_only: bool,
}

impl PosixStorage {
    /// Use the directory at `dir` (created if missing). With `direct`, files opened with
    /// [`OpenOptions::direct`] bypass the page cache if the file system allows it; whether it
    /// does is probed here, once (see [`PosixStorage::direct_io_refused`]).
    pub fn open(dir: &Path, direct: bool) -> io::Result<PosixStorage> {
        fs::create_dir_all(dir)?;
        let direct_refused = if direct { probe_direct(dir)? } else { None };
        Ok(PosixStorage {
            dir: dir.to_path_buf(),
            direct: direct && direct_refused.is_none(),
            direct_refused,
            read_only: false,
        })
    }

    /// Use the existing directory at `dir` for reading only: files open without write
    /// access, and creating, renaming, removing or syncing anything fails (read-only media
    /// work). Direct I/O is probed by opening an existing file of the directory.
    pub fn open_read_only(dir: &Path, direct: bool) -> io::Result<PosixStorage> {
        if !dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is not a directory", dir.display()),
            ));
        }
        let direct_refused = if direct {
            probe_direct_read_only(dir)?
        } else {
            None
        };
        Ok(PosixStorage {
            dir: dir.to_path_buf(),
            direct: direct && direct_refused.is_none(),
            direct_refused,
            read_only: true,
        })
    }

    /// The error for a change asked of a read-only directory.
    fn refuse_if_read_only(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the database directory was opened read-only",
            ));
        }
        Ok(())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Why direct I/O is off although it was asked for: the file system's (or the
    /// platform's) refusal. `None` if it is on, or was not asked for.
    pub fn direct_io_refused(&self) -> Option<&str> {
        self.direct_refused.as_deref()
    }

    fn path_of(&self, name: &str) -> io::Result<PathBuf> {
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid file name {name:?}"),
            ));
        }
        Ok(self.dir.join(name))
    }
}

/// Whether files in `dir` can be opened with `O_DIRECT`: `None` if so, otherwise why not.
/// Opens (creating) [`DIRECT_IO_PROBE_FILE`] with it, then removes the file.
#[cfg(target_os = "linux")]
fn probe_direct(dir: &Path) -> io::Result<Option<String>> {
    let path = dir.join(DIRECT_IO_PROBE_FILE);
    let opened = open_file(&path, true, true, true);
    let removed = fs::remove_file(&path);
    match opened {
        Ok(file) => {
            drop(file);
            removed.map(|()| None)
        }
        // What Linux answers where the file system has no direct I/O (tmpfs before 6.6,
        // some FUSE file systems).
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(Some(format!(
            "the file system at {} refuses O_DIRECT ({e})",
            dir.display()
        ))),
        Err(e) => Err(e),
    }
}

/// Whether files in `dir` can be opened with `O_DIRECT`, without creating anything: opens the
/// first file of the directory read-only with it.
#[cfg(target_os = "linux")]
fn probe_direct_read_only(dir: &Path) -> io::Result<Option<String>> {
    let Some(entry) = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .find(|e| e.file_type().is_ok_and(|t| t.is_file()))
    else {
        return Ok(Some(format!(
            "{} holds no file to probe direct I/O with",
            dir.display()
        )));
    };
    match open_file(&entry.path(), false, false, true) {
        Ok(_) => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(Some(format!(
            "the file system at {} refuses O_DIRECT ({e})",
            dir.display()
        ))),
        Err(e) => Err(e),
    }
}

/// Direct I/O is implemented with Linux's `O_DIRECT` only.
#[cfg(not(target_os = "linux"))]
fn probe_direct_read_only(dir: &Path) -> io::Result<Option<String>> {
    probe_direct(dir)
}

/// Direct I/O is implemented with Linux's `O_DIRECT` only.
#[cfg(not(target_os = "linux"))]
fn probe_direct(_dir: &Path) -> io::Result<Option<String>> {
    Ok(Some(
        "direct I/O (O_DIRECT) is implemented on Linux only".to_string(),
    ))
}

/// A file opened by [`PosixStorage`].
#[derive(Debug)]
pub struct PosixFile {
    file: File,
    /// Without positioned I/O a read or write is a seek then a transfer: one at a time.
    #[cfg(not(unix))]
    turn: parking_lot::Mutex<()>,
}

impl PosixFile {
    fn new(file: File) -> PosixFile {
        PosixFile {
            file,
            #[cfg(not(unix))]
            turn: parking_lot::Mutex::new(()),
        }
    }
}

/// Fill `buf` from `offset` with a seek and a read: for targets whose `std` has no positioned
/// I/O. The caller makes sure no other seek of `file` runs meanwhile. Compiled on every
/// target, so that its tests run on Linux too.
#[cfg_attr(unix, allow(dead_code))]
fn seek_read_exact_at(mut file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

/// Write all of `data` at `offset` with a seek and a write; see [`seek_read_exact_at`].
#[cfg_attr(unix, allow(dead_code))]
fn seek_write_all_at(mut file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(data)
}

impl StorageFile for PosixFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        #[cfg(unix)]
        {
            std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
        }
        #[cfg(not(unix))]
        {
            let _turn = self.turn.lock();
            seek_read_exact_at(&self.file, buf, offset)
        }
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        #[cfg(unix)]
        {
            std::os::unix::fs::FileExt::write_all_at(&self.file, data, offset)
        }
        #[cfg(not(unix))]
        {
            let _turn = self.turn.lock();
            seek_write_all_at(&self.file, data, offset)
        }
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    #[cfg(unix)]
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.file.as_raw_fd())
    }
}

fn open_file(path: &Path, create: bool, write: bool, direct: bool) -> io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.read(true).write(write).create(create);
    #[cfg(target_os = "linux")]
    if direct {
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_DIRECT);
    }
    // Elsewhere `direct` is never set: `probe_direct` refuses it.
    #[cfg(not(target_os = "linux"))]
    let _ = direct;
    options.open(path)
}

impl Storage for PosixStorage {
    fn kind(&self) -> &'static str {
        "posix"
    }

    fn direct_io(&self) -> bool {
        self.direct
    }

    fn open(&self, name: &str, options: OpenOptions) -> io::Result<Arc<dyn StorageFile>> {
        let path = self.path_of(name)?;
        if options.create {
            self.refuse_if_read_only()?;
        }
        let file = open_file(
            &path,
            options.create,
            !self.read_only,
            self.direct && options.direct,
        )?;
        Ok(Arc::new(PosixFile::new(file)))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.refuse_if_read_only()?;
        fs::remove_file(self.path_of(name)?)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.refuse_if_read_only()?;
        fs::rename(self.path_of(from)?, self.path_of(to)?)
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if is_listed_file(entry.file_type())? {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn sync_dir(&self) -> io::Result<()> {
        self.refuse_if_read_only()?;
        #[cfg(unix)]
        {
            File::open(&self.dir)?.sync_all()
        }
        // Elsewhere (Windows) a directory cannot be opened as a file to flush it; creations
        // and renames are as durable as the file system's own journal makes them.
        #[cfg(not(unix))]
        {
            Ok(())
        }
    }
}

/// Whether a directory entry of this type is a file to list. Where the directory listing does
/// not carry the type, it is looked up by name, and a file deleted in between (by a writer in
/// another process, while a reader opens) is no longer there: not listed, not an error.
fn is_listed_file(file_type: io::Result<fs::FileType>) -> io::Result<bool> {
    match file_type {
        Ok(t) => Ok(t.is_file()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file gone between the listing and the look at its type is left out; other failures
    /// still fail the listing; only files are listed.
    #[test]
    fn a_file_deleted_while_listing_is_left_out() {
        let gone = io::Error::from(io::ErrorKind::NotFound);
        assert!(!is_listed_file(Err(gone)).unwrap());
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(is_listed_file(Err(denied)).is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let types =
            |name: &str| std::fs::symlink_metadata(dir.path().join(name)).map(|m| m.file_type());
        assert!(is_listed_file(types("f")).unwrap());
        assert!(!is_listed_file(types("d")).unwrap());
        assert!(!is_listed_file(types("missing")).unwrap());
    }

    #[test]
    fn the_seeking_fallback_reads_and_writes_at_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let file = open_file(&dir.path().join("f"), true, true, false).unwrap();
        seek_write_all_at(&file, b"world", 6).unwrap();
        seek_write_all_at(&file, b"hello ", 0).unwrap();
        let mut buf = [0u8; 5];
        seek_read_exact_at(&file, &mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        let mut all = [0u8; 11];
        seek_read_exact_at(&file, &mut all, 0).unwrap();
        assert_eq!(&all, b"hello world");
        let past = seek_read_exact_at(&file, &mut buf, 8).unwrap_err();
        assert_eq!(past.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn direct_io_off_is_reported_off_and_leaves_no_probe() {
        let dir = tempfile::tempdir().unwrap();
        let s = PosixStorage::open(dir.path(), false).unwrap();
        assert!(!s.direct_io());
        assert_eq!(s.direct_io_refused(), None);
        assert!(s.list().unwrap().is_empty());
    }
}
