//! The write-ahead log of commit records.
//!
//! One record per commit, appended and synced after the commit's pages are durable; a commit
//! is acknowledged only once its record is. Every record is written twice (two headers, two
//! payload copies) so that one flipped bit anywhere in a durable record is corrected from the
//! other copy instead of being mistaken for a torn write. A record whose copies are all bad is
//! a torn write if it is the last in the file (the commit was in flight; it is discarded and
//! the file truncated), and corruption anywhere else.

use crate::codec::{checksum, Put, Reader};
use crate::error::{Error, Result};
use crate::io::{OpenOptions, Storage, StorageFile};
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"SPWR";
const VERSION: u8 = 1;
const HEADER_BYTES: usize = HEADER_BODY_BYTES + 8;
const HEADER_BODY_BYTES: usize = 4 + 1 + 3 + 8 + 8 + 8;

/// The file name of WAL file `id`.
pub fn wal_file_name(id: u32) -> String {
    format!("wal-{id:010}.log")
}

/// Parse a WAL file name.
pub fn parse_wal_file_name(name: &str) -> Option<u32> {
    name.strip_prefix("wal-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// The commit sequence number.
    pub seq: u64,
    /// The record's payload.
    pub payload: Vec<u8>,
    /// Where the record starts in its file.
    pub offset: u64,
    /// Where the record ends (the next one starts) in its file.
    pub end: u64,
}

/// What replaying a WAL file found.
#[derive(Debug, Default)]
pub struct Replay {
    /// The complete records, in order.
    pub records: Vec<WalRecord>,
    /// Where the last complete record ends: new records are appended here.
    pub end: u64,
    /// Bytes after `end` that belonged to a torn record and were discarded.
    pub torn_bytes: u64,
    /// Records that had one bad copy and were read from the other.
    pub repaired: u64,
}

/// An open WAL file being appended to.
pub struct Wal {
    file: Arc<dyn StorageFile>,
    id: u32,
    end: u64,
}

fn header(seq: u64, payload: &[u8]) -> [u8; HEADER_BYTES] {
    let mut h = Vec::with_capacity(HEADER_BYTES);
    h.extend_from_slice(MAGIC);
    h.put_u8(VERSION);
    h.extend_from_slice(&[0u8; 3]);
    h.put_u64(seq);
    h.put_u64(payload.len() as u64);
    h.put_u64(checksum(payload));
    let sum = checksum(&h);
    h.put_u64(sum);
    let mut out = [0u8; HEADER_BYTES];
    if let Some(dst) = out.get_mut(..h.len()) {
        dst.copy_from_slice(&h);
    }
    out
}

struct Header {
    seq: u64,
    len: u64,
    sum: u64,
}

fn parse_header(bytes: &[u8]) -> Option<Header> {
    let body = bytes.get(..HEADER_BODY_BYTES)?;
    let mut r = Reader::new(bytes);
    if &r.array::<4>().ok()? != MAGIC || r.u8().ok()? != VERSION {
        return None;
    }
    r.slice(3).ok()?;
    let seq = r.u64().ok()?;
    let len = r.u64().ok()?;
    let sum = r.u64().ok()?;
    let stored = r.u64().ok()?;
    (checksum(body) == stored).then_some(Header { seq, len, sum })
}

impl Wal {
    /// Start a new, empty WAL file.
    pub fn create(storage: &dyn Storage, id: u32) -> Result<Wal> {
        let name = wal_file_name(id);
        let file = storage
            .open(
                &name,
                OpenOptions {
                    create: true,
                    direct: false,
                },
            )
            .map_err(|e| Error::io("creating", &name, e))?;
        file.set_len(0)
            .and_then(|_| file.sync())
            .map_err(|e| Error::io("creating", &name, e))?;
        storage
            .sync_dir()
            .map_err(|e| Error::io("syncing directory for", &name, e))?;
        Ok(Wal { file, id, end: 0 })
    }

    /// Continue appending to WAL file `id` at `end` (as found by [`Wal::replay`]), dropping
    /// any torn bytes after it.
    pub fn reopen(storage: &dyn Storage, id: u32, end: u64) -> Result<Wal> {
        let name = wal_file_name(id);
        let file = storage
            .open(
                &name,
                OpenOptions {
                    create: false,
                    direct: false,
                },
            )
            .map_err(|e| Error::io("opening", &name, e))?;
        let len = file.size().map_err(|e| Error::io("reading", &name, e))?;
        if len != end {
            file.set_len(end)
                .and_then(|_| file.sync())
                .map_err(|e| Error::io("truncating the torn tail of", &name, e))?;
        }
        Ok(Wal { file, id, end })
    }

    /// The file id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The end of the last record.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Append a record (both copies) and, with `sync`, make it durable before returning.
    pub fn append(&mut self, seq: u64, payload: &[u8], sync: bool) -> Result<()> {
        let h = header(seq, payload);
        let mut bytes = Vec::with_capacity(2 * HEADER_BYTES + 2 * payload.len());
        bytes.extend_from_slice(&h);
        bytes.extend_from_slice(&h);
        bytes.extend_from_slice(payload);
        bytes.extend_from_slice(payload);
        let name = wal_file_name(self.id);
        self.file
            .write_at(&bytes, self.end)
            .map_err(|e| Error::io("appending a commit record to", &name, e))?;
        // Failpoint (feature `failpoints`): the record written, not yet synced.
        failpoint!("wal.record_written");
        if sync {
            self.file
                .sync()
                .map_err(|e| Error::io("syncing", &name, e))?;
        }
        self.end += bytes.len() as u64;
        Ok(())
    }

    /// Read every complete record of WAL file `id` from `start`.
    pub fn replay(storage: &dyn Storage, id: u32, start: u64) -> Result<Replay> {
        let name = wal_file_name(id);
        let file = storage
            .open(
                &name,
                OpenOptions {
                    create: false,
                    direct: false,
                },
            )
            .map_err(|e| Error::io("opening", &name, e))?;
        let len = file.size().map_err(|e| Error::io("reading", &name, e))?;
        if start > len {
            return Err(Error::corruption(
                &name,
                len,
                format!("the checkpoint says the log continues at byte {start}, but the file has {len} bytes"),
            ));
        }
        let size = usize::try_from(len - start)
            .map_err(|_| Error::corruption(&name, start, "log file too large"))?;
        let mut bytes = vec![0u8; size];
        file.read_at(&mut bytes, start)
            .map_err(|e| Error::io("reading", &name, e))?;
        parse_records(&name, &bytes, start)
    }
}

fn parse_records(name: &str, bytes: &[u8], base: u64) -> Result<Replay> {
    let mut replay = Replay {
        end: base,
        ..Replay::default()
    };
    let mut at = 0usize;
    let mut last_seq: Option<u64> = None;
    while at < bytes.len() {
        let offset = base + at as u64;
        let torn = |replay: &mut Replay| {
            replay.torn_bytes = (bytes.len() - at) as u64;
        };
        let Some(headers) = bytes.get(at..at + 2 * HEADER_BYTES) else {
            torn(&mut replay);
            break;
        };
        let a = parse_header(headers.get(..HEADER_BYTES).unwrap_or_default());
        let b = parse_header(headers.get(HEADER_BYTES..).unwrap_or_default());
        let h = match (a, b) {
            (None, None) => {
                torn(&mut replay);
                break;
            }
            (Some(a), Some(b)) if (a.seq, a.len, a.sum) != (b.seq, b.len, b.sum) => {
                return Err(Error::corruption(
                    name,
                    offset,
                    "the two header copies of a commit record disagree",
                ));
            }
            (Some(h), _) | (None, Some(h)) => h,
        };
        let len = usize::try_from(h.len).unwrap_or(usize::MAX);
        let start = at + 2 * HEADER_BYTES;
        let end = len
            .checked_mul(2)
            .and_then(|l| l.checked_add(start))
            .unwrap_or(usize::MAX);
        if end > bytes.len() {
            torn(&mut replay);
            break;
        }
        let first = bytes.get(start..start + len).unwrap_or_default();
        let second = bytes.get(start + len..end).unwrap_or_default();
        let payload = if checksum(first) == h.sum {
            if checksum(second) != h.sum || a_or_b_missing(headers) {
                replay.repaired += 1;
            }
            first
        } else if checksum(second) == h.sum {
            replay.repaired += 1;
            second
        } else if end == bytes.len() {
            torn(&mut replay);
            break;
        } else {
            return Err(Error::corruption(
                name,
                offset,
                "both copies of a commit record fail their checksum",
            ));
        };
        if let Some(prev) = last_seq {
            if h.seq != prev + 1 {
                return Err(Error::corruption(
                    name,
                    offset,
                    format!("commit record {} follows record {prev}", h.seq),
                ));
            }
        }
        last_seq = Some(h.seq);
        replay.records.push(WalRecord {
            seq: h.seq,
            payload: payload.to_vec(),
            offset,
            end: base + end as u64,
        });
        at = end;
        replay.end = base + at as u64;
    }
    Ok(replay)
}

/// Whether one of the two header copies is bad (the record was read from the other).
fn a_or_b_missing(headers: &[u8]) -> bool {
    parse_header(headers.get(..HEADER_BYTES).unwrap_or_default()).is_none()
        || parse_header(headers.get(HEADER_BYTES..).unwrap_or_default()).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemoryStorage;

    fn write_three(s: &MemoryStorage) -> Vec<u8> {
        let mut wal = Wal::create(s, 1).unwrap();
        for seq in 1..=3u64 {
            wal.append(seq, &vec![seq as u8; 100 * seq as usize], true)
                .unwrap();
        }
        let f = s
            .open(
                &wal_file_name(1),
                OpenOptions {
                    create: false,
                    direct: false,
                },
            )
            .unwrap();
        let mut bytes = vec![0u8; f.size().unwrap() as usize];
        f.read_at(&mut bytes, 0).unwrap();
        bytes
    }

    #[test]
    fn records_read_back_in_order() {
        let s = MemoryStorage::new();
        let bytes = write_three(&s);
        let r = Wal::replay(&s, 1, 0).unwrap();
        assert_eq!(r.records.len(), 3);
        assert_eq!(r.end, bytes.len() as u64);
        assert_eq!(r.records[2].payload, vec![3u8; 300]);
        assert_eq!(r.repaired, 0);
    }

    #[test]
    fn every_single_bit_flip_is_repaired() {
        let s = MemoryStorage::new();
        let bytes = write_three(&s);
        for i in (0..bytes.len() * 8).step_by(7) {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            let r = parse_records("wal", &b, 0).unwrap();
            assert_eq!(r.records.len(), 3, "bit {i}");
            assert_eq!(r.records[2].payload, vec![3u8; 300]);
            assert_eq!(r.repaired, 1, "bit {i}");
        }
    }

    #[test]
    fn torn_tails_are_discarded_and_middle_damage_is_corruption() {
        let s = MemoryStorage::new();
        let bytes = write_three(&s);
        let two = parse_records("wal", &bytes, 0).unwrap().records[2].offset as usize;
        for cut in two..bytes.len() {
            let r = parse_records("wal", &bytes[..cut], 0).unwrap();
            assert_eq!(r.records.len(), 2, "cut at {cut}");
            assert_eq!(r.end, two as u64);
        }
        // Both payload copies of the first record damaged: not a tail, so corruption.
        let mut b = bytes.clone();
        b[2 * HEADER_BYTES] ^= 1;
        b[2 * HEADER_BYTES + 100] ^= 1;
        assert!(parse_records("wal", &b, 0).unwrap_err().is_corruption());
    }
}
