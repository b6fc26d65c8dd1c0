//! What the benchmark reads from the operating system: this process's I/O counters
//! (`/proc/self/io`) and peak RSS (`/proc/self/status`), the bytes a directory occupies on
//! disk, and memory cgroups (v2 `memory.max`, or v1 `memory.limit_in_bytes`) that cap a child
//! process's memory, page cache included. Linux only; elsewhere the figures read as absent.

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

/// Read `/proc/self/io` (zeros where it is unavailable).
pub fn proc_io() -> ProcIo {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let mut io = ProcIo::default();
    for line in text.lines() {
        let mut parts = line.split(':');
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let value = value.trim().parse().unwrap_or(0);
        match name {
            "read_bytes" => io.read_bytes = value,
            "write_bytes" => io.write_bytes = value,
            _ => {}
        }
    }
    io
}

/// The peak resident set size of this process in bytes (`VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes allocated on disk under `path` (like `du`; preallocated files count in full).
pub fn disk_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
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
        meta.blocks() * 512
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
    fn own_counters_are_readable() {
        assert!(peak_rss_bytes().unwrap_or(1) > 0);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![1u8; 10_000]).unwrap();
        assert!(disk_bytes(dir.path()) >= 8192);
        let _ = proc_io();
    }
}
