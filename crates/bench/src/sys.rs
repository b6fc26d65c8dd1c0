//! What the benchmark reads from the operating system: this process's I/O counters
//! (`/proc/self/io`), CPU time (every thread's) and peak RSS (`/proc/self/status`), the bytes a directory occupies on
//! disk, and memory cgroups (v2 `memory.max`, or v1 `memory.limit_in_bytes`) that cap a child
//! process's memory, page cache included. Linux only (the disk figure: unix); elsewhere the
//! figures read as absent.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// This process's storage I/O so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcIo {
    /// Bytes this process caused to be read from storage.
    pub read_bytes: u64,
    /// Bytes this process caused to be written to storage.
    pub write_bytes: u64,
}

/// Read `/proc/self/io`: `None` where it is unavailable (not Linux, or a kernel without task
/// I/O accounting).
pub fn proc_io() -> Option<ProcIo> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    parse_proc_io(&std::fs::read_to_string("/proc/self/io").ok()?)
}

/// The counters of a `/proc/<pid>/io` text; `None` unless both are there.
fn parse_proc_io(text: &str) -> Option<ProcIo> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(ProcIo {
        read_bytes: field("read_bytes")?,
        write_bytes: field("write_bytes")?,
    })
}

/// CPU time this process (every thread of it) has used so far, user and system.
pub fn process_cpu() -> std::time::Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_PROCESS_CPUTIME_ID exists on every
    // platform the benchmark builds on (POSIX).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Nanoseconds one Merkle node hash (BLAKE3 of 64 bytes, as the trie computes it) takes on
/// one core of this machine: the best of five timed runs of 200,000 chained hashes.
pub fn ns_per_hash() -> f64 {
    let hasher = sprig::core::Hasher::Blake3;
    let mut best = f64::INFINITY;
    let mut node = [7u8; 32];
    for _ in 0..5 {
        let n = 200_000u32;
        let t = std::time::Instant::now();
        for _ in 0..n {
            node = hasher.hash_internal(&node, &node);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / f64::from(n));
    }
    // Chained, so the optimiser cannot drop the work; the value itself is meaningless.
    std::hint::black_box(node);
    best
}

/// The peak resident set size of this process in bytes (`VmHWM`), if known (Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// The resident set size of this process now in bytes (`VmRSS`), if known (Linux).
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

/// A KiB figure of `/proc/self/status`.
fn status_kib(field: &str) -> Option<u64> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Bytes allocated on disk under `path` (like `du`; preallocated files count in full).
pub fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| disk_bytes(&e.path()))
                    .sum()
            })
            .unwrap_or(0)
    } else {
        allocated_bytes(&meta)
    }
}

/// The bytes a file occupies on disk: its 512-byte blocks on unix, its length elsewhere.
fn allocated_bytes(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        std::os::unix::fs::MetadataExt::blocks(meta) * 512
    }
    #[cfg(not(unix))]
    {
        meta.len()
    }
}

/// A memory cgroup made for one child process; removed when dropped.
pub struct MemoryCap {
    dir: PathBuf,
    /// The file a process id is written to, to move it into the group.
    pub procs: PathBuf,
    /// Which interface: "cgroup v2 memory.max" or "cgroup v1 memory.limit_in_bytes".
    pub kind: &'static str,
}

/// Where this process's memory cgroup is, and whether it is v2.
fn own_memory_cgroup() -> Result<(PathBuf, bool)> {
    let text = std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
    // v1: "N:memory:/path"; v2: "0::/path" with the memory controller enabled.
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        if let (Some(c), Some(p)) = (controllers, path) {
            if c.split(',').any(|c| c == "memory") {
                let base = Path::new("/sys/fs/cgroup/memory").join(p.trim_start_matches('/'));
                if base.is_dir() {
                    return Ok((base, false));
                }
            }
        }
    }
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("0::") {
            let base = Path::new("/sys/fs/cgroup").join(p.trim_start_matches('/'));
            let controllers =
                std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                return Ok((base, true));
            }
        }
    }
    bail!("no memory cgroup controller is available to this process (neither v1 nor v2)")
}

impl MemoryCap {
    /// A new memory cgroup below this process's own, limited to `bytes` (page cache
    /// included).
    pub fn new(name: &str, bytes: u64) -> Result<Self> {
        let (base, v2) = own_memory_cgroup()?;
        let dir = base.join(name);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the memory cgroup {}", dir.display()))?;
        let (limit_file, kind) = if v2 {
            ("memory.max", "cgroup v2 memory.max")
        } else {
            ("memory.limit_in_bytes", "cgroup v1 memory.limit_in_bytes")
        };
        let cap = MemoryCap {
            procs: dir.join("cgroup.procs"),
            dir,
            kind,
        };
        std::fs::write(cap.dir.join(limit_file), bytes.to_string())
            .with_context(|| format!("setting {limit_file} in {}", cap.dir.display()))?;
        if v2 {
            // Without swap the cap must hold; refuse swap where the file exists.
            let _ = std::fs::write(cap.dir.join("memory.swap.max"), "0");
        }
        Ok(cap)
    }

    /// The peak memory the group used (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`).
    pub fn peak_bytes(&self) -> Option<u64> {
        ["memory.max_usage_in_bytes", "memory.peak"]
            .iter()
            .find_map(|f| std::fs::read_to_string(self.dir.join(f)).ok())
            .and_then(|s| s.trim().parse().ok())
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        // Fails while a process is still inside; it is empty once the child has exited.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_io_text_is_parsed_and_a_missing_counter_is_absent() {
        let text = "rchar: 6976\nwchar: 10\nsyscr: 10\nsyscw: 1\nread_bytes: 8192\n\
                    write_bytes: 4096\ncancelled_write_bytes: 512\n";
        assert_eq!(
            parse_proc_io(text),
            Some(ProcIo {
                read_bytes: 8192,
                write_bytes: 4096
            })
        );
        assert_eq!(parse_proc_io("rchar: 1\nread_bytes: 5\n"), None);
        assert_eq!(parse_proc_io("read_bytes: x\nwrite_bytes: 1\n"), None);
        // `cancelled_write_bytes` is not `write_bytes`.
        assert_eq!(
            parse_proc_io("read_bytes: 1\ncancelled_write_bytes: 2\n"),
            None
        );
    }

    /// The figures the benchmark reports are there on Linux, and absent elsewhere.
    #[test]
    fn proc_io_is_available_on_linux() {
        assert_eq!(proc_io().is_some(), cfg!(target_os = "linux"));
    }

    #[test]
    fn peak_rss_covers_memory_this_process_touched() {
        const TOUCHED_BYTES: usize = 64 << 20;
        let touched = std::hint::black_box(vec![1u8; TOUCHED_BYTES]);
        let peak = peak_rss_bytes();
        drop(touched);
        if cfg!(target_os = "linux") {
            let peak = peak.expect("VmHWM in /proc/self/status");
            assert!(peak >= TOUCHED_BYTES as u64, "peak RSS {peak} bytes");
        } else {
            assert_eq!(peak, None);
        }
    }

    #[test]
    fn disk_bytes_counts_every_file_of_a_tree() {
        const FILE_BYTES: usize = 64 << 10;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        // Incompressible bytes, so that no file system stores them in fewer blocks.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..FILE_BYTES)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for name in ["a", "sub/b"] {
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).unwrap();
            std::fs::File::open(&path).unwrap().sync_all().unwrap();
        }
        let total = disk_bytes(dir.path());
        assert!(total >= 2 * FILE_BYTES as u64, "{total} bytes on disk");
        assert_eq!(disk_bytes(&dir.path().join("missing")), 0);
    }
}
