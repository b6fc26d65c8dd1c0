//! The write-ahead log of commit records: their byte layout, appending them, and reading them
//! back one at a time.
//!
//! One record per commit, appended after the commit's pages are on disk; in
//! `SyncPolicy::Always` a commit is acknowledged only once its record is synced. Every record
//! is written twice, and laid out so that **no 4 KiB sector holds both copies of anything**: a
//! record is two copies, each starting on a sector boundary — a header (which names the
//! record's sequence number, its own offset, the payload's length and checksum, and which copy
//! it is) followed by the payload, zero-padded to a whole sector. One lost or damaged sector
//! therefore takes at most one copy of one record, which is read from the other copy.
//!
//! Headers sit only at sector boundaries, so the replay can always look past a damaged record
//! for valid ones. A record that cannot be read is:
//! - a **torn tail** when no valid record follows it anywhere in the file (the commit was in
//!   flight: it is reported, and only a writable open may cut it off);
//! - an **unsynced tail** when the records after it were all written without a sync and none
//!   of them states that the records before it were durable (`SyncPolicy::Never` after a power
//!   loss: reported, and those records are discarded with it);
//! - **corruption** otherwise: a later record states that everything before it was durable, so
//!   the damaged record was acknowledged. Nothing is cut off then.
//!
//! Reading never holds more than one record in memory, and every length is checked against
//! the file's size before anything is allocated.

use crate::codec::{checksum, Put, Reader, Source};
use crate::error::{Error, Result};
use crate::io::{OpenOptions, Storage, StorageFile, BLOCK_BYTES};
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"SPWR";
const VERSION: u8 = 3;
/// The unit records are aligned to: a record copy never shares a sector with another.
pub const SECTOR_BYTES: u64 = BLOCK_BYTES as u64;
const HEADER_BODY_BYTES: usize = 4 + 1 + 1 + 1 + 1 + 8 + 8 + 8 + 8;
const HEADER_BYTES: usize = HEADER_BODY_BYTES + 8;
/// The largest payload a record may hold; a header claiming more is corruption.
pub const MAX_PAYLOAD_BYTES: u64 = 1 << 30;
/// Bytes read per step while looking for the next valid header past a damaged record.
const SCAN_CHUNK_BYTES: u64 = 1 << 20;

const KIND_COMMIT: u8 = 0;
const KIND_ROTATE: u8 = 1;

/// Record flag: the record was synced before its commit was acknowledged
/// (`SyncPolicy::Always`).
pub const FLAG_SYNCED: u8 = 1;
/// Record flag: every record before this one (in this file and earlier ones) was durable
/// before this one was written. Set on every record in `SyncPolicy::Always`, and in
/// `SyncPolicy::Never` on the first record after each sync of the log (open, rotation).
pub const FLAG_PRIOR_DURABLE: u8 = 2;
const KNOWN_FLAGS: u8 = FLAG_SYNCED | FLAG_PRIOR_DURABLE;

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

/// The bytes one copy of a record with a payload of `len` bytes takes.
fn copy_bytes(len: u64) -> u64 {
    (HEADER_BYTES as u64 + len).div_ceil(SECTOR_BYTES) * SECTOR_BYTES
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    copy: u8,
    kind: u8,
    flags: u8,
    seq: u64,
    /// Where the record (its first copy) starts in the file.
    offset: u64,
    len: u64,
    sum: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut h = Vec::with_capacity(HEADER_BYTES);
        h.extend_from_slice(MAGIC);
        h.put_u8(VERSION);
        h.put_u8(self.copy);
        h.put_u8(self.kind);
        h.put_u8(self.flags);
        h.put_u64(self.seq);
        h.put_u64(self.offset);
        h.put_u64(self.len);
        h.put_u64(self.sum);
        let sum = checksum(&h);
        h.put_u64(sum);
        let mut out = [0u8; HEADER_BYTES];
        out.copy_from_slice(&h);
        out
    }

    /// A header from the start of `bytes`, if it is one: magic, version, checksum and every
    /// field in range.
    fn parse(bytes: &[u8]) -> Option<Header> {
        let body = bytes.get(..HEADER_BODY_BYTES)?;
        let mut r = Reader::new(bytes);
        if &r.array::<4>().ok()? != MAGIC || r.u8().ok()? != VERSION {
            return None;
        }
        let h = Header {
            copy: r.u8().ok()?,
            kind: r.u8().ok()?,
            flags: r.u8().ok()?,
            seq: r.u64().ok()?,
            offset: r.u64().ok()?,
            len: r.u64().ok()?,
            sum: r.u64().ok()?,
        };
        let stored = r.u64().ok()?;
        let sane = checksum(body) == stored
            && h.copy <= 1
            && h.kind <= KIND_ROTATE
            && h.flags & !KNOWN_FLAGS == 0
            && h.offset.is_multiple_of(SECTOR_BYTES);
        sane.then_some(h)
    }

    /// Where this copy sits in the file.
    fn position(&self) -> u64 {
        self.offset + u64::from(self.copy) * copy_bytes(self.len)
    }

    /// Whether two copies describe the same record.
    fn same_record(&self, other: &Header) -> bool {
        (
            self.kind,
            self.flags,
            self.seq,
            self.offset,
            self.len,
            self.sum,
        ) == (
            other.kind,
            other.flags,
            other.seq,
            other.offset,
            other.len,
            other.sum,
        )
    }
}

/// One commit record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// The commit sequence number.
    pub seq: u64,
    /// The record's flags ([`FLAG_SYNCED`], [`FLAG_PRIOR_DURABLE`]).
    pub flags: u8,
    /// The record's payload.
    pub payload: Vec<u8>,
    /// Where the record starts in its file.
    pub offset: u64,
    /// Where the record ends (the next one starts) in its file.
    pub end: u64,
}

/// A record that cannot be read and is not followed by anything that proves it was durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostTail {
    /// Where the unreadable record starts.
    pub offset: u64,
    /// Bytes from there to the end of the file.
    pub bytes: u64,
    /// The unreadable record's sequence number, where one of its headers survived.
    pub seq: Option<u64>,
    /// Valid records after it, all written without a sync (discarded with it), as their
    /// sequence numbers.
    pub unsynced_after: Vec<u64>,
}

/// What replaying one WAL file found.
#[derive(Debug, Clone, Default)]
pub struct ReplayEnd {
    /// Where the last good record ends: new records are appended here.
    pub end: u64,
    /// The file's length.
    pub file_bytes: u64,
    /// The record that could not be read at `end`, if any (see the module docs).
    pub lost: Option<LostTail>,
    /// Records with one damaged copy, read from the other: (offset, sequence number).
    pub repaired: Vec<(u64, u64)>,
    /// The file the log continues in, if this one was closed by a rotation.
    pub rotated_to: Option<u32>,
}

/// An open WAL file being appended to.
pub struct Wal {
    file: Arc<dyn StorageFile>,
    id: u32,
    end: u64,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("id", &self.id)
            .field("end", &self.end)
            .finish()
    }
}

fn open_file(storage: &dyn Storage, name: &str, create: bool) -> Result<Arc<dyn StorageFile>> {
    storage
        .open(
            name,
            OpenOptions {
                create,
                direct: false,
            },
        )
        .map_err(|e| Error::io(if create { "creating" } else { "opening" }, name, e))
}

/// Both copies of a record, ready to write at `offset`.
fn encode_record(offset: u64, kind: u8, flags: u8, seq: u64, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u64;
    let span = copy_bytes(len) as usize;
    let mut bytes = vec![0u8; 2 * span];
    for copy in 0..2u8 {
        let header = Header {
            copy,
            kind,
            flags,
            seq,
            offset,
            len,
            sum: checksum(payload),
        };
        let at = usize::from(copy) * span;
        bytes[at..at + HEADER_BYTES].copy_from_slice(&header.encode());
        bytes[at + HEADER_BYTES..at + HEADER_BYTES + payload.len()].copy_from_slice(payload);
    }
    bytes
}

impl Wal {
    /// Start a new, empty WAL file (durably: the file and its directory entry are synced).
    pub fn create(storage: &dyn Storage, id: u32) -> Result<Wal> {
        let name = wal_file_name(id);
        let file = open_file(storage, &name, true)?;
        file.set_len(0)
            .and_then(|_| file.sync())
            .map_err(|e| Error::io("creating", &name, e))?;
        storage
            .sync_dir()
            .map_err(|e| Error::io("syncing directory for", &name, e))?;
        Ok(Wal { file, id, end: 0 })
    }

    /// Continue appending to WAL file `id` at `end`, which replay found to be the end of the
    /// last good record. Bytes after it must have been proven lost by the replay (a torn or
    /// unsynced tail): they are cut off. The file is synced, so every record before `end` is
    /// durable before a new one is written.
    pub fn reopen(storage: &dyn Storage, id: u32, end: u64) -> Result<Wal> {
        let name = wal_file_name(id);
        let file = open_file(storage, &name, false)?;
        let len = file.size().map_err(|e| Error::io("reading", &name, e))?;
        if len < end {
            return Err(Error::corruption(
                &name,
                len,
                format!("the log ends at byte {len}, before the last record's end at {end}"),
            ));
        }
        if len != end {
            file.set_len(end)
                .map_err(|e| Error::io("cutting the lost tail of", &name, e))?;
        }
        file.sync().map_err(|e| Error::io("syncing", &name, e))?;
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

    /// Append a commit record (both copies) and, with `sync`, make it durable before
    /// returning. Returns the bytes written.
    pub fn append(&mut self, seq: u64, payload: &[u8], flags: u8, sync: bool) -> Result<u64> {
        if payload.len() as u64 > MAX_PAYLOAD_BYTES {
            return Err(Error::internal(format!(
                "a commit record of {} bytes is larger than the log allows ({MAX_PAYLOAD_BYTES})",
                payload.len()
            )));
        }
        self.write(KIND_COMMIT, flags, seq, payload, sync)
    }

    /// Close this file for good: make every record in it durable, then append a record
    /// saying the log continues in file `next` (which can then truthfully claim that
    /// everything before it is durable), and sync it. `last_seq` is the last commit in this
    /// file (or before it).
    pub fn append_rotation(&mut self, next: u32, last_seq: u64) -> Result<u64> {
        self.sync()?;
        self.write(
            KIND_ROTATE,
            FLAG_SYNCED | FLAG_PRIOR_DURABLE,
            last_seq,
            &next.to_le_bytes(),
            true,
        )
    }

    /// Make every record appended so far durable.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync()
            .map_err(|e| Error::io("syncing", wal_file_name(self.id), e))
    }

    fn write(&mut self, kind: u8, flags: u8, seq: u64, payload: &[u8], sync: bool) -> Result<u64> {
        let bytes = encode_record(self.end, kind, flags, seq, payload);
        let name = wal_file_name(self.id);
        self.file
            .write_at(&bytes, self.end)
            .map_err(|e| Error::io("appending a commit record to", &name, e))?;
        // Failpoint (feature `failpoints`): the record written, not yet synced.
        failpoint!("wal.record_written");
        if sync {
            self.sync()?;
        }
        self.end += bytes.len() as u64;
        Ok(bytes.len() as u64)
    }

    /// Read WAL file `id` from `start`, one record at a time: `visit` gets every good commit
    /// record in order (and may fail the replay). Never changes the file.
    pub fn replay(
        storage: &dyn Storage,
        id: u32,
        start: u64,
        visit: &mut dyn FnMut(WalRecord) -> Result<()>,
    ) -> Result<ReplayEnd> {
        let name = wal_file_name(id);
        let file = open_file(storage, &name, false)?;
        let len = file.size().map_err(|e| Error::io("reading", &name, e))?;
        if start > len || !start.is_multiple_of(SECTOR_BYTES) {
            return Err(Error::corruption(
                &name,
                len,
                format!(
                    "the checkpoint says the log continues at byte {start}, but the file has {len} bytes"
                ),
            ));
        }
        let reader = FileReader {
            file: file.as_ref(),
            name: &name,
            len,
        };
        reader.replay(start, visit)
    }
}

/// Positioned reads of one WAL file, each bounded by its size.
struct FileReader<'a> {
    file: &'a dyn StorageFile,
    name: &'a str,
    len: u64,
}

/// What one record position holds.
enum Slot {
    /// A good record (and whether one copy had to be skipped).
    Good {
        header: Header,
        payload: Vec<u8>,
        repaired: bool,
    },
    /// A record that cannot be read; its sequence number if a header survived.
    Bad { seq: Option<u64> },
}

impl FileReader<'_> {
    fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let fits = offset.checked_add(len).is_some_and(|end| end <= self.len);
        let n = usize::try_from(len).ok().filter(|_| fits).ok_or_else(|| {
            Error::internal(format!(
                "a log read of {len} bytes at {offset} past the end"
            ))
        })?;
        let mut buf = vec![0u8; n];
        self.file
            .read_at(&mut buf, offset)
            .map_err(|e| Error::io("reading", self.name, e))?;
        Ok(buf)
    }

    /// The header of the copy at `at`, if one is there.
    fn header_at(&self, at: u64) -> Result<Option<Header>> {
        if at + SECTOR_BYTES > self.len {
            return Ok(None);
        }
        Ok(Header::parse(&self.read(at, HEADER_BYTES as u64)?).filter(|h| h.position() == at))
    }

    /// The payload of the copy described by `h`, if it is all in the file and checks out.
    fn payload_of(&self, h: &Header) -> Result<Option<Vec<u8>>> {
        let span = copy_bytes(h.len);
        if h.len > MAX_PAYLOAD_BYTES || h.offset + 2 * span > self.len {
            return Ok(None);
        }
        let payload = self.read(h.position() + HEADER_BYTES as u64, h.len)?;
        Ok((checksum(&payload) == h.sum).then_some(payload))
    }

    /// The record at `at`: read from whichever copy is good.
    fn slot(&self, at: u64) -> Result<Slot> {
        let first = self.header_at(at)?.filter(|h| h.copy == 0);
        // The second copy's header: found through the first, or, if the first header is lost,
        // as the next valid header (it must say it belongs to the record at `at`).
        let second = match &first {
            Some(h) => self
                .header_at(at + copy_bytes(h.len))?
                .filter(|b| b.copy == 1 && b.same_record(h)),
            None => self
                .next_header(at + SECTOR_BYTES)?
                .map(|(_, h)| h)
                .filter(|h| h.copy == 1 && h.offset == at),
        };
        for (i, h) in [first, second].iter().enumerate() {
            if let Some(h) = h {
                if let Some(payload) = self.payload_of(h)? {
                    let other_good = match (i, &second) {
                        (0, Some(b)) => self.payload_of(b)?.is_some(),
                        _ => false,
                    };
                    return Ok(Slot::Good {
                        header: *h,
                        payload,
                        repaired: !other_good,
                    });
                }
            }
        }
        Ok(Slot::Bad {
            seq: first.or(second).map(|h| h.seq),
        })
    }

    /// The first valid header at a sector boundary at or after `from`.
    fn next_header(&self, from: u64) -> Result<Option<(u64, Header)>> {
        let mut at = from.div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
        while at + SECTOR_BYTES <= self.len {
            let chunk = SCAN_CHUNK_BYTES.min((self.len - at) / SECTOR_BYTES * SECTOR_BYTES);
            let bytes = self.read(at, chunk)?;
            for (i, sector) in bytes.chunks(SECTOR_BYTES as usize).enumerate() {
                let pos = at + i as u64 * SECTOR_BYTES;
                if let Some(h) = Header::parse(sector).filter(|h| h.position() == pos) {
                    return Ok(Some((pos, h)));
                }
            }
            at += chunk;
        }
        Ok(None)
    }

    /// Judge an unreadable record at `at` by what follows it (see the module docs).
    fn lost_tail(&self, at: u64, seq: Option<u64>) -> Result<LostTail> {
        let mut unsynced_after = Vec::new();
        let mut from = at + SECTOR_BYTES;
        while let Some((pos, h)) = self.next_header(from)? {
            from = pos + SECTOR_BYTES;
            if h.offset <= at {
                // The damaged record's own second copy.
                continue;
            }
            if h.flags & FLAG_PRIOR_DURABLE != 0 {
                return Err(Error::corruption(
                    self.name,
                    at,
                    format!(
                        "the commit record at offset {at} cannot be read (both copies are \
                         damaged), but record {} at offset {} was written after it was durable",
                        h.seq, h.offset
                    ),
                ));
            }
            if h.copy == 0 && h.kind == KIND_COMMIT {
                unsynced_after.push(h.seq);
            }
        }
        Ok(LostTail {
            offset: at,
            bytes: self.len - at,
            seq,
            unsynced_after,
        })
    }

    fn replay(
        &self,
        start: u64,
        visit: &mut dyn FnMut(WalRecord) -> Result<()>,
    ) -> Result<ReplayEnd> {
        let mut out = ReplayEnd {
            end: start,
            file_bytes: self.len,
            ..ReplayEnd::default()
        };
        let mut last_seq: Option<u64> = None;
        while out.end < self.len {
            let at = out.end;
            if out.rotated_to.is_some() {
                return Err(Error::corruption(
                    self.name,
                    at,
                    "data after the record that closed this log",
                ));
            }
            let (header, payload, repaired) = match self.slot(at)? {
                Slot::Good {
                    header,
                    payload,
                    repaired,
                } => (header, payload, repaired),
                Slot::Bad { seq } => {
                    out.lost = Some(self.lost_tail(at, seq)?);
                    break;
                }
            };
            let end = at + 2 * copy_bytes(header.len);
            if repaired {
                out.repaired.push((at, header.seq));
            }
            match header.kind {
                KIND_ROTATE => {
                    let next = <[u8; 4]>::try_from(payload.as_slice())
                        .map(u32::from_le_bytes)
                        .map_err(|_| {
                            Error::corruption(self.name, at, "malformed log rotation record")
                        })?;
                    out.rotated_to = Some(next);
                }
                _ => {
                    if let Some(prev) = last_seq {
                        if prev.checked_add(1) != Some(header.seq) {
                            return Err(Error::corruption(
                                self.name,
                                at,
                                format!("commit record {} follows record {prev}", header.seq),
                            ));
                        }
                    }
                    last_seq = Some(header.seq);
                    visit(WalRecord {
                        seq: header.seq,
                        flags: header.flags,
                        payload,
                        offset: at,
                        end,
                    })?;
                }
            }
            out.end = end;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemoryStorage;

    fn file_bytes(s: &MemoryStorage, id: u32) -> Vec<u8> {
        let f = open_file(s, &wal_file_name(id), false).unwrap();
        let mut bytes = vec![0u8; f.size().unwrap() as usize];
        f.read_at(&mut bytes, 0).unwrap();
        bytes
    }

    fn put_bytes(s: &MemoryStorage, id: u32, bytes: &[u8]) {
        let f = open_file(s, &wal_file_name(id), false).unwrap();
        f.set_len(0).unwrap();
        f.write_at(bytes, 0).unwrap();
    }

    /// Records of 100, 5,000 (spanning sectors) and 300 bytes, then `more` small ones.
    fn write_records(s: &MemoryStorage, flags: u8, more: u64) -> Vec<Vec<u8>> {
        let mut wal = Wal::create(s, 1).unwrap();
        let mut payloads = vec![vec![1u8; 100], vec![2u8; 5000], vec![3u8; 300]];
        for i in 0..more {
            payloads.push(vec![4 + i as u8; 50]);
        }
        for (i, p) in payloads.iter().enumerate() {
            wal.append(i as u64 + 1, p, flags, true).unwrap();
        }
        payloads
    }

    fn replay_all(s: &MemoryStorage) -> Result<(Vec<WalRecord>, ReplayEnd)> {
        let mut records = Vec::new();
        let end = Wal::replay(s, 1, 0, &mut |r| {
            records.push(r);
            Ok(())
        })?;
        Ok((records, end))
    }

    #[test]
    fn records_read_back_in_order_and_aligned() {
        let s = MemoryStorage::new();
        let payloads = write_records(&s, FLAG_SYNCED | FLAG_PRIOR_DURABLE, 0);
        let (records, end) = replay_all(&s).unwrap();
        assert_eq!(records.len(), 3);
        for (r, p) in records.iter().zip(&payloads) {
            assert_eq!(&r.payload, p);
            assert_eq!(r.offset % SECTOR_BYTES, 0);
        }
        // 2 sectors + 4 sectors + 2 sectors.
        assert_eq!(end.end, 8 * SECTOR_BYTES);
        assert_eq!(end.end, file_bytes(&s, 1).len() as u64);
        assert!(end.lost.is_none() && end.repaired.is_empty());
    }

    /// Every sector of a multi-record log damaged in turn, with zeros and with garbage: the
    /// replay either reads every record (from the other copy) or, where the damage is the
    /// tail, reports it; never drops a record silently.
    #[test]
    fn any_one_damaged_sector_is_repaired() {
        let s = MemoryStorage::new();
        let payloads = write_records(&s, FLAG_SYNCED | FLAG_PRIOR_DURABLE, 3);
        let good = file_bytes(&s, 1);
        let sectors = good.len() / SECTOR_BYTES as usize;
        for sector in 0..sectors {
            for fill in [0u8, 0x5a] {
                let mut b = good.clone();
                let range = sector * SECTOR_BYTES as usize..(sector + 1) * SECTOR_BYTES as usize;
                b[range].fill(fill);
                put_bytes(&s, 1, &b);
                let (records, end) = replay_all(&s).unwrap();
                assert_eq!(records.len(), payloads.len(), "sector {sector} fill {fill}");
                assert!(end.lost.is_none(), "sector {sector}");
                assert_eq!(end.repaired.len(), 1, "sector {sector}");
            }
        }
    }

    #[test]
    fn a_record_lost_in_the_middle_is_corruption_and_a_lost_tail_is_reported() {
        let s = MemoryStorage::new();
        write_records(&s, FLAG_SYNCED | FLAG_PRIOR_DURABLE, 2);
        let good = file_bytes(&s, 1);
        // Both copies of record 2 (sectors 2..6) gone.
        let mut b = good.clone();
        b[2 * SECTOR_BYTES as usize..6 * SECTOR_BYTES as usize].fill(0);
        put_bytes(&s, 1, &b);
        let e = replay_all(&s).unwrap_err();
        assert!(
            e.is_corruption() && e.to_string().contains("offset 8192"),
            "{e}"
        );
        // The last record (5, sectors 10..12) gone: a torn tail, reported with its size.
        let mut b = good.clone();
        b[10 * SECTOR_BYTES as usize..].fill(0);
        put_bytes(&s, 1, &b);
        let (records, end) = replay_all(&s).unwrap();
        assert_eq!(records.len(), 4);
        let lost = end.lost.unwrap();
        assert_eq!(
            (lost.offset, lost.bytes, lost.seq),
            (10 * SECTOR_BYTES, 2 * SECTOR_BYTES, None)
        );
        // Cut at every byte inside the last record: torn, the first four kept.
        for cut in (10 * SECTOR_BYTES as usize + 1..good.len()).step_by(509) {
            put_bytes(&s, 1, &good[..cut]);
            let (records, end) = replay_all(&s).unwrap();
            assert_eq!(records.len(), 4, "cut at {cut}");
            assert_eq!(end.end, 10 * SECTOR_BYTES);
            assert!(end.lost.is_some());
        }
    }

    #[test]
    fn an_unsynced_tail_is_discarded_and_reported() {
        let s = MemoryStorage::new();
        // Records written without sync and without a durability claim after the first.
        let mut wal = Wal::create(&s, 1).unwrap();
        wal.append(1, &[1; 10], FLAG_PRIOR_DURABLE, false).unwrap();
        for seq in 2..=5 {
            wal.append(seq, &[seq as u8; 10], 0, false).unwrap();
        }
        let mut b = file_bytes(&s, 1);
        // Record 3 (sectors 4..6) lost, as a power loss might.
        b[4 * SECTOR_BYTES as usize..6 * SECTOR_BYTES as usize].fill(0);
        put_bytes(&s, 1, &b);
        let (records, end) = replay_all(&s).unwrap();
        assert_eq!(records.len(), 2);
        let lost = end.lost.unwrap();
        assert_eq!(lost.unsynced_after, vec![4, 5]);
        assert_eq!(lost.offset, 4 * SECTOR_BYTES);
    }

    #[test]
    fn reopen_cuts_only_after_the_end_it_is_given() {
        let s = MemoryStorage::new();
        write_records(&s, FLAG_SYNCED | FLAG_PRIOR_DURABLE, 0);
        let bytes = file_bytes(&s, 1);
        put_bytes(&s, 1, &bytes[..bytes.len() - 100]);
        let (_, end) = replay_all(&s).unwrap();
        let mut wal = Wal::reopen(&s, 1, end.end).unwrap();
        assert_eq!(file_bytes(&s, 1).len() as u64, end.end);
        wal.append(3, &[9; 20], FLAG_SYNCED | FLAG_PRIOR_DURABLE, true)
            .unwrap();
        let (records, end) = replay_all(&s).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].payload, vec![9; 20]);
        assert!(end.lost.is_none());
        // A shorter file than the end asked for is corruption, not an extension.
        assert!(Wal::reopen(&s, 1, end.end + SECTOR_BYTES)
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn rotation_closes_a_file() {
        let s = MemoryStorage::new();
        let mut wal = Wal::create(&s, 1).unwrap();
        wal.append(1, &[1; 10], FLAG_PRIOR_DURABLE | FLAG_SYNCED, true)
            .unwrap();
        wal.append_rotation(2, 1).unwrap();
        let (records, end) = replay_all(&s).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(end.rotated_to, Some(2));
        // Anything after the rotation record is corruption.
        wal.append(2, &[2; 10], FLAG_PRIOR_DURABLE | FLAG_SYNCED, true)
            .unwrap();
        assert!(replay_all(&s).unwrap_err().is_corruption());
    }
}
