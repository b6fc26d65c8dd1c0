//! Equal disk warmth for every engine: the virtual disks this benchmark runs on keep a cache
//! tier below the guest, in which data written or read recently reads several times faster
//! than data left alone while tens of GB of other data were written (BENCHMARKS.md, section 00:
//! 75–80k IOPS against 8–16k on the same files). An engine whose database was created first,
//! or was idle while the others ran, would otherwise be measured on a slower disk. Before each
//! engine's run, `compare` reads every file of its database once, sequentially and with
//! O_DIRECT (so the operating system's page cache, which the engines' fair cache sizes are about,
//! is left as it was): each engine then starts with all of its data equally warm.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes per read: large sequential reads, aligned for O_DIRECT.
const CHUNK: usize = 1 << 20;
/// O_DIRECT's alignment of buffers, offsets and lengths.
const ALIGN: usize = 4096;

/// What warming a database read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Warmed {
    /// Files read.
    pub files: u64,
    /// Bytes read.
    pub bytes: u64,
    /// How long it took.
    pub took: Duration,
}

/// Read every regular file under `dir` (recursively) once, with O_DIRECT.
pub fn warm(dir: &Path) -> Result<Warmed> {
    let started = Instant::now();
    let mut buf = vec![0u8; CHUNK + ALIGN];
    let skip = buf.as_ptr().align_offset(ALIGN);
    let aligned = buf
        .get_mut(skip..skip + CHUNK)
        .context("an aligned read buffer")?;
    let mut out = Warmed {
        files: 0,
        bytes: 0,
        took: Duration::ZERO,
    };
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let entry = entry.with_context(|| format!("listing {}", d.display()))?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                out.bytes += read_direct(&entry.path(), aligned)?;
                out.files += 1;
            }
        }
    }
    out.took = started.elapsed();
    Ok(out)
}

/// Read one file to its end through `buf` (aligned, [`CHUNK`] bytes); returns its length.
fn read_direct(path: &Path, buf: &mut [u8]) -> Result<u64> {
    let mut file = open_direct(path)?;
    let len = file.metadata()?.len();
    let mut total = 0u64;
    // Up to the length at open: a file an engine grows meanwhile is not chased.
    while total < len {
        let n = file
            .read(buf)
            .with_context(|| format!("reading {} at {total}", path.display()))?;
        if n == 0 {
            break; // shortened since
        }
        total += n as u64;
    }
    Ok(total)
}

#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => Ok(f),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => bail!(
            "{}: the file system refuses O_DIRECT, so the disk cannot be warmed without \
             filling the page cache; pass --warm-disk false",
            path.display()
        ),
        Err(e) => Err(e).with_context(|| format!("opening {}", path.display())),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_direct(path: &Path) -> Result<std::fs::File> {
    bail!(
        "{}: warming the disk needs O_DIRECT (Linux); pass --warm-disk false",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte of every file, nested directories included, is read once, whatever the
    /// files' lengths (a tail shorter than a block, an empty file, several chunks).
    #[test]
    fn every_file_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = [0usize, 1, 4095, 4096, 4097, CHUNK, CHUNK + 12345, 3 * CHUNK];
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        for (i, n) in sizes.iter().enumerate() {
            let sub = ["", "a", "a/b"][i % 3];
            let bytes: Vec<u8> = (0..*n).map(|j| (j % 251) as u8).collect();
            std::fs::write(dir.path().join(sub).join(format!("f{i}")), bytes).unwrap();
        }
        let w = warm(dir.path()).unwrap();
        assert_eq!(w.files, sizes.len() as u64);
        assert_eq!(w.bytes, sizes.iter().sum::<usize>() as u64);
        assert!(warm(&dir.path().join("missing")).is_err());
    }
}
