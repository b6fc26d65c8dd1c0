//! The portable backend: one database directory on the real file system, plain positioned
//! reads and writes (`pread`/`pwrite`), optionally with `O_DIRECT`.

use super::{OpenOptions, Storage, StorageFile};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A database directory accessed with positioned reads and writes.
#[derive(Debug)]
pub struct PosixStorage {
    dir: PathBuf,
    direct: bool,
    read_only: bool,
}

impl PosixStorage {
    /// Use the directory at `dir` (created if missing). With `direct`, files opened with
    /// [`OpenOptions::direct`] bypass the page cache where the file system allows it.
    pub fn open(dir: &Path, direct: bool) -> io::Result<PosixStorage> {
        fs::create_dir_all(dir)?;
        Ok(PosixStorage {
            dir: dir.to_path_buf(),
            direct,
            read_only: false,
        })
    }

    /// Use the existing directory at `dir` for reading only: files open without write
    /// access, and creating, renaming, removing or syncing anything fails.
    pub fn open_read_only(dir: &Path, direct: bool) -> io::Result<PosixStorage> {
        if !dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(PosixStorage {
            dir: dir.to_path_buf(),
            direct,
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

    fn path_of(&self, name: &str) -> io::Result<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid file name {name:?}"),
            ));
        }
        Ok(self.dir.join(name))
    }
}

/// A file opened by [`PosixStorage`].
#[derive(Debug)]
pub struct PosixFile {
    file: File,
}

impl StorageFile for PosixFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(data, offset)
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

    fn raw_fd(&self) -> Option<i32> {
        use std::os::fd::AsRawFd;
        Some(self.file.as_raw_fd())
    }
}

fn open_file(path: &Path, create: bool, write: bool, direct: bool) -> io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.read(true).write(write).create(create);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

impl Storage for PosixStorage {
    fn kind(&self) -> &'static str {
        "posix"
    }

    fn open(&self, name: &str, options: OpenOptions) -> io::Result<Arc<dyn StorageFile>> {
        let path = self.path_of(name)?;
        if options.create {
            self.refuse_if_read_only()?;
        }
        let direct = self.direct && options.direct;
        let write = !self.read_only;
        let file = match open_file(&path, options.create, write, direct) {
            // Some file systems (tmpfs) refuse O_DIRECT: fall back to buffered I/O.
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
                open_file(&path, options.create, write, false)?
            }
            other => other?,
        };
        Ok(Arc::new(PosixFile { file }))
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
            if entry.file_type()?.is_file() {
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
        File::open(&self.dir)?.sync_all()
    }
}
