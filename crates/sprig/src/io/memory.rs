//! The in-memory backend: files are byte vectors in a map. For tests and for databases that
//! need no persistence. Syncs are no-ops; everything written is immediately "durable".

use super::{OpenOptions, Storage, StorageFile};
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// A directory of in-memory files.
#[derive(Default)]
pub struct MemoryStorage {
    files: Mutex<BTreeMap<String, Arc<MemoryFile>>>,
}

impl MemoryStorage {
    /// An empty directory.
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }
}

/// One in-memory file.
#[derive(Default)]
pub struct MemoryFile {
    data: RwLock<Vec<u8>>,
}

fn offset_range(offset: u64, len: usize) -> io::Result<(usize, usize)> {
    let start = usize::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    let end = start
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    Ok((start, end))
}

impl StorageFile for MemoryFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let (start, end) = offset_range(offset, buf.len())?;
        let data = self.data.read();
        let src = data
            .get(start..end)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file"))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let (start, end) = offset_range(offset, bytes.len())?;
        let mut data = self.data.write();
        if data.len() < end {
            data.resize(end, 0);
        }
        if let Some(dst) = data.get_mut(start..end) {
            dst.copy_from_slice(bytes);
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.data.read().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        self.data.write().resize(len, 0);
        Ok(())
    }
}

impl Storage for MemoryStorage {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn open(&self, name: &str, options: OpenOptions) -> io::Result<Arc<dyn StorageFile>> {
        let mut files = self.files.lock();
        if let Some(f) = files.get(name) {
            return Ok(f.clone());
        }
        if !options.create {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no file {name:?}"),
            ));
        }
        let f = Arc::new(MemoryFile::default());
        files.insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match self.files.lock().remove(name) {
            Some(_) => Ok(()),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no file {name:?}"),
            )),
        }
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut files = self.files.lock();
        let f = files
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no file {from:?}")))?;
        files.insert(to.to_string(), f);
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.files.lock().keys().cloned().collect())
    }

    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_read_back_what_was_written() {
        let s = MemoryStorage::new();
        let opts = OpenOptions {
            create: true,
            direct: false,
        };
        let f = s.open("a", opts).unwrap();
        f.write_at(b"hello", 3).unwrap();
        let mut buf = [0u8; 8];
        f.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"\0\0\0hello");
        assert!(f.read_at(&mut buf, 1).is_err());
        s.rename("a", "b").unwrap();
        assert_eq!(s.list().unwrap(), vec!["b".to_string()]);
        assert!(s
            .open(
                "a",
                OpenOptions {
                    create: false,
                    direct: false
                }
            )
            .is_err());
    }
}
