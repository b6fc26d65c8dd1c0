//! State files: tables as sequences of state-sync chunks (each with its range proof), written
//! by `sync export` and `snapshot export`, read by `sync verify|import` and `snapshot import`.
//! Streamed both ways (one chunk in memory at a time) and checksummed whole.
//!
//! Format (integers little-endian):
//! - header: magic `SPST`, version `1`, hasher id;
//! - per table: tag `1`, `name_len: u16`, name, `resolver_len: u16` (0: none), resolver,
//!   `root: [u8; 32]`, `entries: u64`; then its chunks, each tag `2`, `len: u32`, the chunk's
//!   encoding (docs/PROOF_FORMAT.md, `SPSC`);
//! - trailer: tag `0xFF`, `db_root: [u8; 32]`, `tables: u32`, then the BLAKE3 hash of every byte
//!   before it (32 bytes), then the end of the file.
//!
//! Nothing in a file is trusted by reading it: chunks are verified against a root the user
//! trusts (or, for a snapshot file without `--root`, against the roots the file states, which
//! must give the database root it states).

use crate::error::{CliError, CliResult};
use sprig_core::{Hasher, KeyPath, Node, SyncChunk};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};

const MAGIC: &[u8; 4] = b"SPST";
const VERSION: u8 = 1;
const TAG_TABLE: u8 = 1;
const TAG_CHUNK: u8 = 2;
const TAG_END: u8 = 0xFF;
/// The largest encoded chunk a file may hold.
const MAX_CHUNK_BYTES: u32 = 1 << 30;

/// A table's header in a state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableHeader {
    /// The table's name.
    pub name: String,
    /// Its resolver, if any.
    pub resolver: Option<String>,
    /// Its root, as the file states it.
    pub root: Node,
    /// Its entries, as the file states it.
    pub entries: u64,
}

/// What a state file holds next.
pub enum Item {
    /// A table starts.
    Table(TableHeader),
    /// A chunk of the current table.
    Chunk(SyncChunk),
    /// The end: the database root the file states, and how many tables it holds. The
    /// checksum was checked.
    End(Node, u32),
}

/// Writes a state file.
pub struct StateWriter {
    out: BufWriter<File>,
    sum: blake3::Hasher,
    hasher: Hasher,
    tables: u32,
    path: String,
}

impl StateWriter {
    /// Create `path` and write the header.
    pub fn create(path: &str, hasher: Hasher) -> CliResult<StateWriter> {
        let file = File::create(path).map_err(|e| CliError::io("creating", path, e))?;
        let mut w = StateWriter {
            out: BufWriter::new(file),
            sum: blake3::Hasher::new(),
            hasher,
            tables: 0,
            path: path.to_string(),
        };
        w.put(&[&MAGIC[..], &[VERSION, hasher.id()]].concat())?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> CliResult<()> {
        self.sum.update(bytes);
        self.out
            .write_all(bytes)
            .map_err(|e| CliError::io("writing", &self.path, e))
    }

    /// Start a table.
    pub fn table(&mut self, t: &TableHeader) -> CliResult<()> {
        let too_long = |what: &str| CliError::input(&t.name, format!("{what} too long"));
        let name_len = u16::try_from(t.name.len()).map_err(|_| too_long("name"))?;
        let resolver = t.resolver.as_deref().unwrap_or("");
        let resolver_len = u16::try_from(resolver.len()).map_err(|_| too_long("resolver"))?;
        let mut b = vec![TAG_TABLE];
        b.extend_from_slice(&name_len.to_le_bytes());
        b.extend_from_slice(t.name.as_bytes());
        b.extend_from_slice(&resolver_len.to_le_bytes());
        b.extend_from_slice(resolver.as_bytes());
        b.extend_from_slice(&t.root);
        b.extend_from_slice(&t.entries.to_le_bytes());
        self.tables += 1;
        self.put(&b)
    }

    /// Append a chunk of the current table; returns its encoded size.
    pub fn chunk(&mut self, c: &SyncChunk) -> CliResult<usize> {
        let bytes = c.encode(self.hasher);
        let len = u32::try_from(bytes.len())
            .ok()
            .filter(|l| *l <= MAX_CHUNK_BYTES)
            .ok_or_else(|| {
                CliError::input(
                    &self.path,
                    "a chunk above 1 GiB: use fewer entries per chunk",
                )
            })?;
        self.put(&[TAG_CHUNK])?;
        self.put(&len.to_le_bytes())?;
        self.put(&bytes)?;
        Ok(bytes.len())
    }

    /// Write the trailer and flush.
    pub fn finish(mut self, db_root: &Node) -> CliResult<()> {
        let mut b = vec![TAG_END];
        b.extend_from_slice(db_root);
        b.extend_from_slice(&self.tables.to_le_bytes());
        self.put(&b)?;
        let sum = *self.sum.finalize().as_bytes();
        self.out
            .write_all(&sum)
            .and_then(|()| self.out.flush())
            .and_then(|()| self.out.get_ref().sync_all())
            .map_err(|e| CliError::io("writing", &self.path, e))
    }
}

/// Reads a state file front to back.
pub struct StateReader {
    input: BufReader<File>,
    sum: blake3::Hasher,
    hasher: Hasher,
    path: String,
    offset: u64,
    done: bool,
}

impl StateReader {
    /// Open `path` and check its header against `hasher`.
    pub fn open(path: &str, hasher: Hasher) -> CliResult<StateReader> {
        let file = File::open(path).map_err(|e| CliError::io("opening", path, e))?;
        let mut r = StateReader {
            input: BufReader::new(file),
            sum: blake3::Hasher::new(),
            hasher,
            path: path.to_string(),
            offset: 0,
            done: false,
        };
        let head = r.take(6, "header")?;
        if head[..4] != MAGIC[..] {
            return Err(r.bad("not a Sprig state file (bad magic bytes)"));
        }
        if head[4] != VERSION {
            return Err(r.bad(&format!("state file version {} is not supported", head[4])));
        }
        if head[5] != hasher.id() {
            return Err(r.bad("made with another hasher than the database's"));
        }
        Ok(r)
    }

    fn bad(&self, what: &str) -> CliError {
        CliError::input(&self.path, format!("at byte {}: {what}", self.offset))
    }

    fn take(&mut self, n: usize, what: &str) -> CliResult<Vec<u8>> {
        let mut b = vec![0u8; n];
        self.input.read_exact(&mut b).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.bad(&format!("the file ends inside {what} (truncated)"))
            } else {
                CliError::io("reading", &self.path, e)
            }
        })?;
        self.sum.update(&b);
        self.offset += n as u64;
        Ok(b)
    }

    fn u16(&mut self, what: &str) -> CliResult<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn string(&mut self, what: &str) -> CliResult<String> {
        let n = usize::from(self.u16(what)?);
        String::from_utf8(self.take(n, what)?)
            .map_err(|_| self.bad(&format!("{what} is not UTF-8")))
    }

    fn array32(&mut self, what: &str) -> CliResult<KeyPath> {
        let b = self.take(32, what)?;
        let mut a = [0u8; 32];
        a.copy_from_slice(&b);
        Ok(a)
    }

    /// The next item, or `None` after the end.
    pub fn next_item(&mut self) -> CliResult<Option<Item>> {
        if self.done {
            return Ok(None);
        }
        let tag = self.take(1, "a tag")?[0];
        match tag {
            TAG_TABLE => {
                let name = self.string("a table name")?;
                let resolver = self.string("a resolver name")?;
                let root = self.array32("a table root")?;
                let e = self.take(8, "an entry count")?;
                let mut eb = [0u8; 8];
                eb.copy_from_slice(&e);
                Ok(Some(Item::Table(TableHeader {
                    name,
                    resolver: (!resolver.is_empty()).then_some(resolver),
                    root,
                    entries: u64::from_le_bytes(eb),
                })))
            }
            TAG_CHUNK => {
                let lb = self.take(4, "a chunk length")?;
                let len = u32::from_le_bytes([lb[0], lb[1], lb[2], lb[3]]);
                if len > MAX_CHUNK_BYTES {
                    return Err(self.bad("a chunk longer than 1 GiB"));
                }
                let at = self.offset;
                let bytes = self.take(len as usize, "a chunk")?;
                SyncChunk::decode(&bytes, self.hasher)
                    .map(|c| Some(Item::Chunk(c)))
                    .map_err(|e| CliError::input(&self.path, format!("chunk at byte {at}: {e}")))
            }
            TAG_END => {
                let db_root = self.array32("the database root")?;
                let t = self.take(4, "the table count")?;
                let tables = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
                let expected = *self.sum.finalize().as_bytes();
                let mut stored = [0u8; 32];
                self.input
                    .read_exact(&mut stored)
                    .map_err(|_| self.bad("the file ends inside its checksum (truncated)"))?;
                if stored != expected {
                    return Err(self.bad("checksum mismatch: the file is damaged"));
                }
                let mut rest = [0u8; 1];
                if self
                    .input
                    .read(&mut rest)
                    .map_err(|e| CliError::io("reading", &self.path, e))?
                    != 0
                {
                    return Err(self.bad("bytes after the end of the state file"));
                }
                self.done = true;
                Ok(Some(Item::End(db_root, tables)))
            }
            t => Err(self.bad(&format!("unknown tag {t}"))),
        }
    }
}
