//! The fault-injecting backend: an in-memory directory that keeps what was written apart from
//! what is durable, so that tests can "crash" at any write or sync and see what a power loss
//! would leave behind, and can make any write, sync or read fail.
//!
//! It owns a model of the guarantees a real file system gives and no more:
//! - a write is visible to reads at once, but durable only after a successful
//!   [`StorageFile::sync`] of that file;
//! - a creation, rename or removal is visible at once, but durable only after
//!   [`Storage::sync_dir`]; a file created or renamed and not yet dir-synced may vanish or
//!   revert on a crash, and a removed one may come back;
//! - a failed sync loses the writes it was asked to make durable (as Linux does: the pages are
//!   marked clean), so retrying the sync does not bring them back.
//!
//! Every mutating call (write, set_len, sync, dir sync, create, rename, remove) is one *step*,
//! numbered from 0; a test can crash the storage at any step ([`FaultStorage::set_crash_at`])
//! and then take the image a power loss would leave ([`FaultStorage::crash`]) in one of three
//! [`CrashMode`]s. Writes, syncs, reads and namespace changes are also numbered per class, so
//! that a [`Fault`] can fail the N-th of them, once or from then on. Everything random is drawn
//! from a seed, so a run replays exactly.
//!
//! It never panics: misuse and injected faults are `io::Error`s.

use super::{OpenOptions, Storage, StorageFile, BLOCK_BYTES};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// The unit of a torn write: a write is torn at a multiple of this many bytes.
const SECTOR_BYTES: u64 = 512;

/// What a crash leaves of the data that was written but not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashMode {
    /// Every unsynced write, creation, rename and removal is lost.
    DropUnsynced,
    /// Each unsynced page (4 KiB piece of a write) survives or not at random, and a random
    /// prefix of the unsynced namespace changes survives (file systems journal them in order).
    KeepRandomSubset,
    /// Every unsynced change survives except one unsynced page, which is torn: part new, part
    /// old, cut at a 512-byte sector boundary.
    TearOnePage,
}

impl CrashMode {
    /// Every mode.
    pub const ALL: [CrashMode; 3] = [
        CrashMode::DropUnsynced,
        CrashMode::KeepRandomSubset,
        CrashMode::TearOnePage,
    ];
}

/// A class of operations, each numbered separately for fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// `write_at` and `set_len`.
    Write,
    /// `sync` of a file and `sync_dir`.
    Sync,
    /// `read_at` (each read of a batch counts).
    Read,
    /// Creating, renaming and removing files.
    Namespace,
}

/// How an injected fault fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// `EIO`. A failed sync also loses the writes it should have made durable.
    Eio,
    /// `ENOSPC`: the disk is full.
    Enospc,
    /// A write that stops part-way: its first part reaches the file, then it fails
    /// (`WriteZero`). On other classes, the same as [`FaultKind::Eio`].
    ShortWrite,
}

/// One fault to inject: fail operation number `index` of `class` (counting from 0), and with
/// `persistent`, every later one of that class too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Which operations.
    pub class: OpClass,
    /// The number of the first operation to fail, within its class.
    pub index: u64,
    /// How it fails.
    pub kind: FaultKind,
    /// Fail every later operation of the class as well (a dead disk), not just this one.
    pub persistent: bool,
}

/// What a step did, for messages about crash points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// `write_at`.
    Write,
    /// `set_len`.
    SetLen,
    /// `sync` of a file.
    Sync,
    /// `sync_dir`.
    SyncDir,
    /// A file was created by `open`.
    Create,
    /// `rename`.
    Rename,
    /// `remove`.
    Remove,
}

/// Counters of a [`FaultStorage`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Steps (mutating calls) attempted, including failed ones.
    pub steps: u64,
    /// Writes and set_lens attempted.
    pub writes: u64,
    /// File and directory syncs attempted.
    pub syncs: u64,
    /// Reads attempted.
    pub reads: u64,
    /// Creations, renames and removals attempted.
    pub namespace_ops: u64,
    /// Faults injected (each failed call counts once).
    pub injected: u64,
    /// The step at which the storage crashed, if it did.
    pub crashed_at: Option<u64>,
}

/// A change to a file not yet durable.
#[derive(Debug, Clone)]
enum FileOp {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

/// One file's content: what reads see, what survives a crash, and what is in between.
#[derive(Debug, Clone, Default)]
struct Inode {
    /// What reads return.
    data: Vec<u8>,
    /// What survives a crash for sure.
    durable: Vec<u8>,
    /// Changes since the last sync, oldest first.
    pending: Vec<FileOp>,
}

/// A change to the directory not yet durable.
#[derive(Debug, Clone)]
enum DirOp {
    Link(String, usize),
    Rename(String, String),
    Unlink(String),
}

#[derive(Debug, Clone)]
struct State {
    rng: u64,
    inodes: Vec<Inode>,
    /// The names reads and opens see.
    names: BTreeMap<String, usize>,
    /// The names that survive a crash for sure.
    durable_names: BTreeMap<String, usize>,
    /// Namespace changes since the last directory sync, oldest first.
    pending_names: Vec<DirOp>,
    stats: FaultStats,
    crash_at: Option<u64>,
    faults: Vec<Fault>,
    trace: Option<Vec<(StepKind, String)>>,
    /// The thread that made each traced step.
    trace_threads: Option<Vec<std::thread::ThreadId>>,
}

/// An in-memory directory that separates written from durable data, crashes on demand and
/// injects I/O errors. Cheap to clone: clones share the same state.
#[derive(Clone)]
pub struct FaultStorage {
    state: Arc<Mutex<State>>,
}

/// A file of a [`FaultStorage`]. It keeps referring to the same file after a rename or
/// removal, like an open file descriptor.
pub struct FaultFile {
    state: Arc<Mutex<State>>,
    inode: usize,
    name: String,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The error a kernel returns for `kind`: the unix error code where there is one, the same
/// error kind elsewhere.
fn os_error(kind: FaultKind) -> io::Error {
    match kind {
        #[cfg(unix)]
        FaultKind::Eio => io::Error::from_raw_os_error(libc::EIO),
        #[cfg(not(unix))]
        FaultKind::Eio => io::Error::other("injected EIO: input/output error"),
        #[cfg(unix)]
        FaultKind::Enospc => io::Error::from_raw_os_error(libc::ENOSPC),
        #[cfg(not(unix))]
        FaultKind::Enospc => io::Error::new(
            io::ErrorKind::StorageFull,
            "injected ENOSPC: no space left on device",
        ),
        FaultKind::ShortWrite => io::Error::new(
            io::ErrorKind::WriteZero,
            "injected short write: the device accepted only part of the data",
        ),
    }
}

fn crashed_error() -> io::Error {
    io::Error::other("simulated crash: the storage is gone")
}

fn to_usize(v: u64) -> io::Result<usize> {
    usize::try_from(v).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))
}

fn write_into(buf: &mut Vec<u8>, offset: u64, data: &[u8]) -> io::Result<()> {
    let start = to_usize(offset)?;
    let end = start
        .checked_add(data.len())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    if buf.len() < end {
        buf.resize(end, 0);
    }
    if let Some(dst) = buf.get_mut(start..end) {
        dst.copy_from_slice(data);
    }
    Ok(())
}

fn apply_op(buf: &mut Vec<u8>, op: &FileOp) {
    match op {
        FileOp::Write { offset, data } => {
            // Offsets were checked when the write was made.
            let _ = write_into(buf, *offset, data);
        }
        FileOp::SetLen(len) => buf.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

fn apply_dir_op(names: &mut BTreeMap<String, usize>, op: &DirOp) {
    match op {
        DirOp::Link(name, inode) => {
            names.insert(name.clone(), *inode);
        }
        DirOp::Rename(from, to) => {
            if let Some(inode) = names.remove(from) {
                names.insert(to.clone(), inode);
            }
        }
        DirOp::Unlink(name) => {
            names.remove(name);
        }
    }
}

/// The 4 KiB-aligned pieces of a write: (offset, bytes).
fn pieces(offset: u64, data: &[u8]) -> Vec<(u64, &[u8])> {
    let block = BLOCK_BYTES as u64;
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let pos = offset + at as u64;
        let room = (block - pos % block) as usize;
        let n = room.min(data.len() - at);
        if let Some(piece) = data.get(at..at + n) {
            out.push((pos, piece));
        }
        at += n;
    }
    out
}

impl State {
    fn random(&mut self) -> u64 {
        splitmix(&mut self.rng)
    }

    fn trace(&mut self, kind: StepKind, name: &str) {
        if let Some(t) = self.trace.as_mut() {
            t.push((kind, name.to_string()));
        }
        if let Some(t) = self.trace_threads.as_mut() {
            t.push(std::thread::current().id());
        }
    }

    /// Count a step; fails if the storage has crashed or crashes now.
    fn step(&mut self, kind: StepKind, name: &str) -> io::Result<()> {
        if self.stats.crashed_at.is_some() {
            return Err(crashed_error());
        }
        let n = self.stats.steps;
        if self.crash_at == Some(n) {
            self.stats.crashed_at = Some(n);
            return Err(crashed_error());
        }
        self.stats.steps += 1;
        self.trace(kind, name);
        Ok(())
    }

    /// Count an operation of `class`; returns the fault to inject, if any.
    fn fault(&mut self, class: OpClass) -> Option<FaultKind> {
        let counter = match class {
            OpClass::Write => &mut self.stats.writes,
            OpClass::Sync => &mut self.stats.syncs,
            OpClass::Read => &mut self.stats.reads,
            OpClass::Namespace => &mut self.stats.namespace_ops,
        };
        let n = *counter;
        *counter += 1;
        let hit = self
            .faults
            .iter()
            .find(|f| f.class == class && (f.index == n || (f.persistent && n > f.index)))
            .map(|f| f.kind);
        if hit.is_some() {
            self.stats.injected += 1;
        }
        hit
    }

    fn inode(&mut self, id: usize) -> io::Result<&mut Inode> {
        self.inodes
            .get_mut(id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    /// The image a power loss leaves now.
    fn crash_image(&mut self, mode: CrashMode, seed: u64) -> State {
        // Which unsynced page is torn, counted over every file's pending pieces.
        let total_pieces: u64 = self
            .inodes
            .iter()
            .flat_map(|i| i.pending.iter())
            .map(|op| match op {
                FileOp::Write { offset, data } => pieces(*offset, data).len() as u64,
                FileOp::SetLen(_) => 0,
            })
            .sum();
        let torn = match mode {
            CrashMode::TearOnePage if total_pieces > 0 => Some(self.random() % total_pieces),
            _ => None,
        };
        let mut piece_no = 0u64;
        let mut inodes = Vec::with_capacity(self.inodes.len());
        for id in 0..self.inodes.len() {
            let (mut content, pending) = match self.inodes.get(id) {
                Some(i) => (i.durable.clone(), i.pending.clone()),
                None => (Vec::new(), Vec::new()),
            };
            for op in &pending {
                match (mode, op) {
                    (CrashMode::DropUnsynced, _) => {}
                    (CrashMode::KeepRandomSubset, FileOp::SetLen(_)) => {
                        if self.random().is_multiple_of(2) {
                            apply_op(&mut content, op);
                        }
                    }
                    (CrashMode::TearOnePage, FileOp::SetLen(_)) => apply_op(&mut content, op),
                    (_, FileOp::Write { offset, data }) => {
                        for (at, piece) in pieces(*offset, data) {
                            let this = piece_no;
                            piece_no += 1;
                            if mode == CrashMode::KeepRandomSubset {
                                if self.random().is_multiple_of(2) {
                                    let _ = write_into(&mut content, at, piece);
                                }
                            } else if torn == Some(this) {
                                self.tear(&mut content, at, piece);
                            } else {
                                let _ = write_into(&mut content, at, piece);
                            }
                        }
                    }
                }
            }
            inodes.push(Inode {
                data: content.clone(),
                durable: content,
                pending: Vec::new(),
            });
        }
        let mut names = self.durable_names.clone();
        let keep = match mode {
            CrashMode::DropUnsynced => 0,
            CrashMode::KeepRandomSubset => {
                let n = self.pending_names.len() as u64 + 1;
                (self.random() % n) as usize
            }
            CrashMode::TearOnePage => self.pending_names.len(),
        };
        for op in self.pending_names.iter().take(keep) {
            apply_dir_op(&mut names, op);
        }
        State {
            rng: seed,
            inodes,
            durable_names: names.clone(),
            names,
            pending_names: Vec::new(),
            stats: FaultStats::default(),
            crash_at: None,
            faults: Vec::new(),
            trace: self.trace.as_ref().map(|_| Vec::new()),
            trace_threads: self.trace_threads.as_ref().map(|_| Vec::new()),
        }
    }

    /// Write `piece` at `at` into `content` torn: only the part before or after a sector
    /// boundary inside it reaches the disk.
    fn tear(&mut self, content: &mut Vec<u8>, at: u64, piece: &[u8]) {
        let len = piece.len() as u64;
        // Cut points: sector boundaries strictly inside the piece, or any byte if none.
        let first = (at / SECTOR_BYTES + 1) * SECTOR_BYTES;
        let cuts: Vec<u64> = (0..)
            .map(|i| first + i * SECTOR_BYTES)
            .take_while(|c| *c < at + len)
            .map(|c| c - at)
            .collect();
        let cut = if cuts.is_empty() {
            if len < 2 {
                // A one-byte write cannot be torn: it is lost.
                return;
            }
            1 + self.random() % (len - 1)
        } else {
            cuts.get((self.random() % cuts.len() as u64) as usize)
                .copied()
                .unwrap_or(len / 2)
        };
        let cut = usize::try_from(cut).unwrap_or(0);
        let (head, tail) = piece.split_at(cut.min(piece.len()));
        if self.random().is_multiple_of(2) {
            let _ = write_into(content, at, head);
        } else {
            let _ = write_into(content, at + head.len() as u64, tail);
        }
    }
}

impl Default for FaultStorage {
    fn default() -> Self {
        FaultStorage::new(0)
    }
}

impl FaultStorage {
    /// An empty directory; `seed` drives every random choice of crashes.
    pub fn new(seed: u64) -> FaultStorage {
        FaultStorage {
            state: Arc::new(Mutex::new(State {
                rng: seed,
                inodes: Vec::new(),
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                pending_names: Vec::new(),
                stats: FaultStats::default(),
                crash_at: None,
                faults: Vec::new(),
                trace: None,
                trace_threads: None,
            })),
        }
    }

    /// Crash when step number `step` is attempted: it and every later step fail, and nothing
    /// they would have changed happens. Reads keep working.
    pub fn set_crash_at(&self, step: Option<u64>) {
        self.state.lock().crash_at = step;
    }

    /// Inject `fault`.
    pub fn add_fault(&self, fault: Fault) {
        self.state.lock().faults.push(fault);
    }

    /// Stop injecting faults.
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Record what each step does (see [`FaultStorage::trace`]).
    pub fn record_trace(&self, on: bool) {
        let mut state = self.state.lock();
        state.trace = on.then(Vec::new);
        state.trace_threads = on.then(Vec::new);
    }

    /// What each step did, by step number, if recording (the file it touched, for renames the
    /// source).
    pub fn trace(&self) -> Vec<(StepKind, String)> {
        self.state.lock().trace.clone().unwrap_or_default()
    }

    /// The thread that made each step of [`FaultStorage::trace`], by step number.
    pub fn trace_threads(&self) -> Vec<std::thread::ThreadId> {
        self.state.lock().trace_threads.clone().unwrap_or_default()
    }

    /// The counters.
    pub fn stats(&self) -> FaultStats {
        self.state.lock().stats.clone()
    }

    /// Whether the storage has crashed (see [`FaultStorage::set_crash_at`]).
    pub fn has_crashed(&self) -> bool {
        self.state.lock().stats.crashed_at.is_some()
    }

    /// Power loss now: this storage fails every later step, and the returned storage holds
    /// what survived, in `mode`, with fresh counters, no faults and everything durable.
    /// `seed` drives the new storage's own later crashes.
    pub fn crash(&self, mode: CrashMode, seed: u64) -> FaultStorage {
        let mut s = self.state.lock();
        let step = s.stats.steps;
        s.stats.crashed_at.get_or_insert(step);
        let image = s.crash_image(mode, seed);
        FaultStorage {
            state: Arc::new(Mutex::new(image)),
        }
    }

    /// An independent copy of what reads see now, all of it durable, with fresh counters and
    /// no faults (for bit-flip tests: one copy per flip).
    pub fn fork(&self) -> FaultStorage {
        let s = self.state.lock();
        let inodes = s
            .inodes
            .iter()
            .map(|i| Inode {
                data: i.data.clone(),
                durable: i.data.clone(),
                pending: Vec::new(),
            })
            .collect();
        FaultStorage {
            state: Arc::new(Mutex::new(State {
                rng: s.rng,
                inodes,
                names: s.names.clone(),
                durable_names: s.names.clone(),
                pending_names: Vec::new(),
                stats: FaultStats::default(),
                crash_at: None,
                faults: Vec::new(),
                trace: None,
                trace_threads: None,
            })),
        }
    }

    /// The content of file `name` as reads see it.
    pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
        let s = self.state.lock();
        let id = *s.names.get(name)?;
        s.inodes.get(id).map(|i| i.data.clone())
    }

    /// Flip bits of file `name` at `offset` (XOR with `mask`), both in what reads see and in
    /// what is durable: the disk itself went bad. Not a step.
    pub fn corrupt(&self, name: &str, offset: u64, mask: u8) -> io::Result<()> {
        let mut s = self.state.lock();
        let id = *s
            .names
            .get(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no file {name:?}")))?;
        let at = to_usize(offset)?;
        let inode = s.inode(id)?;
        for buf in [&mut inode.data, &mut inode.durable] {
            if let Some(b) = buf.get_mut(at) {
                *b ^= mask;
            }
        }
        Ok(())
    }
}

impl StorageFile for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut s = self.state.lock();
        if let Some(kind) = s.fault(OpClass::Read) {
            return Err(os_error(match kind {
                FaultKind::ShortWrite => FaultKind::Eio,
                k => k,
            }));
        }
        let start = to_usize(offset)?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let inode = s.inode(self.inode)?;
        let src = inode
            .data
            .get(start..end)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file"))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step(StepKind::Write, &self.name)?;
        let fault = s.fault(OpClass::Write);
        let data = match fault {
            None => data,
            Some(FaultKind::ShortWrite) => {
                let half = data.len() / 2;
                let keep = if half >= SECTOR_BYTES as usize {
                    half - half % SECTOR_BYTES as usize
                } else {
                    half
                };
                data.get(..keep).unwrap_or_default()
            }
            Some(kind) => return Err(os_error(kind)),
        };
        to_usize(offset)?
            .checked_add(data.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let inode = s.inode(self.inode)?;
        write_into(&mut inode.data, offset, data)?;
        inode.pending.push(FileOp::Write {
            offset,
            data: data.to_vec(),
        });
        match fault {
            Some(kind) => Err(os_error(kind)),
            None => Ok(()),
        }
    }

    fn sync(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step(StepKind::Sync, &self.name)?;
        let fault = s.fault(OpClass::Sync);
        let inode = s.inode(self.inode)?;
        let pending = std::mem::take(&mut inode.pending);
        match fault {
            // The writes are lost for good: a later sync will not write them.
            Some(kind) => Err(os_error(kind)),
            None => {
                for op in &pending {
                    apply_op(&mut inode.durable, op);
                }
                Ok(())
            }
        }
    }

    fn size(&self) -> io::Result<u64> {
        let mut s = self.state.lock();
        Ok(s.inode(self.inode)?.data.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step(StepKind::SetLen, &self.name)?;
        if let Some(kind) = s.fault(OpClass::Write) {
            return Err(os_error(kind));
        }
        let new_len = to_usize(len)?;
        let inode = s.inode(self.inode)?;
        inode.data.resize(new_len, 0);
        inode.pending.push(FileOp::SetLen(len));
        Ok(())
    }
}

fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid file name {name:?}"),
        ));
    }
    Ok(())
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no file {name:?}"))
}

impl Storage for FaultStorage {
    fn kind(&self) -> &'static str {
        "fault"
    }

    fn open(&self, name: &str, options: OpenOptions) -> io::Result<Arc<dyn StorageFile>> {
        check_name(name)?;
        let mut s = self.state.lock();
        let inode = match s.names.get(name) {
            Some(id) => *id,
            None => {
                if !options.create {
                    return Err(not_found(name));
                }
                s.step(StepKind::Create, name)?;
                if let Some(kind) = s.fault(OpClass::Namespace) {
                    return Err(os_error(kind));
                }
                let id = s.inodes.len();
                s.inodes.push(Inode::default());
                s.names.insert(name.to_string(), id);
                s.pending_names.push(DirOp::Link(name.to_string(), id));
                id
            }
        };
        Ok(Arc::new(FaultFile {
            state: self.state.clone(),
            inode,
            name: name.to_string(),
        }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut s = self.state.lock();
        if !s.names.contains_key(name) {
            return Err(not_found(name));
        }
        s.step(StepKind::Remove, name)?;
        if let Some(kind) = s.fault(OpClass::Namespace) {
            return Err(os_error(kind));
        }
        s.names.remove(name);
        s.pending_names.push(DirOp::Unlink(name.to_string()));
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_name(to)?;
        let mut s = self.state.lock();
        if !s.names.contains_key(from) {
            return Err(not_found(from));
        }
        s.step(StepKind::Rename, from)?;
        if let Some(kind) = s.fault(OpClass::Namespace) {
            return Err(os_error(kind));
        }
        if let Some(id) = s.names.remove(from) {
            s.names.insert(to.to_string(), id);
        }
        s.pending_names
            .push(DirOp::Rename(from.to_string(), to.to_string()));
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.state.lock().names.keys().cloned().collect())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        s.step(StepKind::SyncDir, "<directory>")?;
        if let Some(kind) = s.fault(OpClass::Sync) {
            return Err(os_error(kind));
        }
        s.durable_names = s.names.clone();
        s.pending_names.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREATE: OpenOptions = OpenOptions {
        create: true,
        direct: false,
    };

    fn read_all(s: &FaultStorage, name: &str) -> Option<Vec<u8>> {
        s.file_bytes(name)
    }

    #[test]
    fn unsynced_writes_are_visible_but_not_durable() {
        let s = FaultStorage::new(1);
        let f = s.open("a", CREATE).unwrap();
        s.sync_dir().unwrap();
        f.write_at(b"durable", 0).unwrap();
        f.sync().unwrap();
        f.write_at(b"DURABLE!", 0).unwrap();
        let mut buf = [0u8; 8];
        f.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"DURABLE!");
        let after = s.crash(CrashMode::DropUnsynced, 2);
        assert_eq!(read_all(&after, "a").unwrap(), b"durable");
        // The crashed storage refuses further changes.
        assert!(f.write_at(b"x", 0).is_err());
        let torn = {
            let s = FaultStorage::new(3);
            let f = s.open("a", CREATE).unwrap();
            s.sync_dir().unwrap();
            f.write_at(&[1u8; 8192], 0).unwrap();
            f.sync().unwrap();
            f.write_at(&[2u8; 4096], 0).unwrap();
            s.crash(CrashMode::TearOnePage, 4)
        };
        let bytes = read_all(&torn, "a").unwrap();
        assert_eq!(bytes.len(), 8192);
        let new = bytes[..4096].iter().filter(|b| **b == 2).count();
        assert!(
            new > 0 && new < 4096 && new % 512 == 0,
            "torn: {new} new bytes"
        );
        assert!(bytes[4096..].iter().all(|b| *b == 1));
    }

    #[test]
    fn random_subsets_keep_whole_pages_and_replay_by_seed() {
        let image = |seed: u64| {
            let s = FaultStorage::new(seed);
            let f = s.open("a", CREATE).unwrap();
            s.sync_dir().unwrap();
            for i in 0..16u8 {
                f.write_at(&[i + 1; 4096], u64::from(i) * 4096).unwrap();
            }
            read_all(&s.crash(CrashMode::KeepRandomSubset, 0), "a").unwrap()
        };
        let a = image(7);
        assert_eq!(a, image(7), "same seed, same image");
        let kept: Vec<bool> = (0..16)
            .map(|i| {
                let page = a.get(i * 4096..(i + 1) * 4096);
                let whole = page.is_some_and(|p| p.iter().all(|b| *b == i as u8 + 1));
                let none = page.is_none_or(|p| p.iter().all(|b| *b == 0));
                assert!(whole || none, "page {i} is neither kept nor dropped");
                whole
            })
            .collect();
        assert!(kept.iter().any(|k| *k) && kept.iter().any(|k| !*k));
        assert!((0..20).any(|seed| image(seed) != a));
    }

    #[test]
    fn namespace_changes_need_a_directory_sync() {
        let s = FaultStorage::new(5);
        let f = s.open("old", CREATE).unwrap();
        f.write_at(b"x", 0).unwrap();
        f.sync().unwrap();
        s.sync_dir().unwrap();
        let g = s.open("new.tmp", CREATE).unwrap();
        g.write_at(b"y", 0).unwrap();
        g.sync().unwrap();
        s.rename("new.tmp", "new").unwrap();
        s.remove("old").unwrap();
        let lost = s.crash(CrashMode::DropUnsynced, 0);
        assert_eq!(lost.list().unwrap(), vec!["old".to_string()]);
        let s2 = FaultStorage::new(5);
        let f = s2.open("a", CREATE).unwrap();
        f.write_at(b"1", 0).unwrap();
        f.sync().unwrap();
        s2.sync_dir().unwrap();
        s2.rename("a", "b").unwrap();
        s2.sync_dir().unwrap();
        // The handle still reaches the renamed file.
        f.write_at(b"2", 0).unwrap();
        f.sync().unwrap();
        let kept = s2.crash(CrashMode::DropUnsynced, 0);
        assert_eq!(kept.list().unwrap(), vec!["b".to_string()]);
        assert_eq!(read_all(&kept, "b").unwrap(), b"2");
    }

    #[test]
    fn crash_points_stop_every_later_step() {
        let s = FaultStorage::new(0);
        s.record_trace(true);
        s.set_crash_at(Some(3));
        let f = s.open("a", CREATE).unwrap(); // step 0
        s.sync_dir().unwrap(); // 1
        f.write_at(b"abc", 0).unwrap(); // 2
        assert!(f.sync().is_err()); // 3: crash
        assert!(f.write_at(b"d", 3).is_err());
        assert!(s.has_crashed());
        assert_eq!(s.stats().crashed_at, Some(3));
        assert_eq!(s.stats().steps, 3);
        assert_eq!(
            s.trace().iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            vec![StepKind::Create, StepKind::SyncDir, StepKind::Write]
        );
        let after = s.crash(CrashMode::DropUnsynced, 0);
        assert_eq!(read_all(&after, "a").unwrap(), b"");
    }

    #[test]
    fn injected_faults_fail_the_chosen_calls() {
        let s = FaultStorage::new(0);
        let f = s.open("a", CREATE).unwrap();
        s.add_fault(Fault {
            class: OpClass::Write,
            index: 1,
            kind: FaultKind::Enospc,
            persistent: false,
        });
        s.add_fault(Fault {
            class: OpClass::Read,
            index: 0,
            kind: FaultKind::Eio,
            persistent: true,
        });
        f.write_at(b"one", 0).unwrap();
        let e = f.write_at(b"two", 3).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        f.write_at(b"three", 3).unwrap();
        let mut buf = [0u8; 3];
        assert!(f.read_at(&mut buf, 0).is_err());
        assert!(f.read_at(&mut buf, 0).is_err());
        assert_eq!(s.stats().injected, 3);
        s.clear_faults();
        f.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"one");

        // A short write leaves its first part, then fails.
        let s = FaultStorage::new(0);
        let f = s.open("a", CREATE).unwrap();
        s.add_fault(Fault {
            class: OpClass::Write,
            index: 0,
            kind: FaultKind::ShortWrite,
            persistent: false,
        });
        assert!(f.write_at(&[9u8; 4096], 0).is_err());
        assert_eq!(f.size().unwrap(), 2048);
    }

    #[test]
    fn a_failed_sync_loses_the_writes_for_good() {
        let s = FaultStorage::new(0);
        let f = s.open("a", CREATE).unwrap();
        s.sync_dir().unwrap();
        s.add_fault(Fault {
            class: OpClass::Sync,
            index: 1,
            kind: FaultKind::Eio,
            persistent: false,
        });
        f.write_at(b"lost", 0).unwrap();
        assert!(f.sync().is_err());
        // The retry "succeeds" but the data it should have saved was dropped.
        f.sync().unwrap();
        let mut buf = [0u8; 4];
        f.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"lost");
        let after = s.crash(CrashMode::TearOnePage, 0);
        assert_eq!(read_all(&after, "a").unwrap(), b"");
    }

    #[test]
    fn forks_and_corruption() {
        let s = FaultStorage::new(0);
        let f = s.open("a", CREATE).unwrap();
        f.write_at(&[0u8; 4], 0).unwrap();
        let copy = s.fork();
        copy.corrupt("a", 2, 0x10).unwrap();
        assert_eq!(read_all(&copy, "a").unwrap(), vec![0, 0, 0x10, 0]);
        assert_eq!(read_all(&s, "a").unwrap(), vec![0; 4]);
        // A fork is durable as it stands.
        let after = copy.crash(CrashMode::DropUnsynced, 0);
        assert_eq!(read_all(&after, "a").unwrap(), vec![0, 0, 0x10, 0]);
    }
}
