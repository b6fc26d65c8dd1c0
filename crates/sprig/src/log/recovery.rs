//! Recovery: from the files of a database to its latest durable state, and a report of
//! everything found on the way.
//!
//! Load the newest checkpoint, replay the commit records after it (one at a time, applying each
//! to the directory without reading a page), and check the result against every other piece of
//! durable state that could disprove it: the checkpoint's own claim of how far the log reached,
//! the rotation records that say where the log continues, and the pages written past what the
//! log accounts for (a page written by a synced commit proves the commit before it was
//! durable). Nothing is cut off or deleted unless it is proven lost or unneeded, and a
//! read-only recovery changes nothing at all.

use crate::state::directory::Arena;
use crate::state::reclaim::Reclaimer;
use crate::state::tables::Tables;
use crate::error::{Error, Result};
use crate::io::{BlockBuf, OpenOptions, ReadRequest, Storage, BLOCK_BYTES};
use crate::log::checkpoint::{parse_checkpoint_file_name, Checkpoint};
use crate::log::manifest::Manifest;
use crate::log::record::{apply_record, CommitRecord};
use crate::log::segments::{
    is_end_marker, parse_segment_file_name, segment_file_name, SegmentTable,
};
use crate::log::wal::{parse_wal_file_name, wal_file_name, ReplayEnd, Wal, FLAG_PRIOR_DURABLE};
use std::collections::VecDeque;
use std::sync::Arc;

/// Blocks read per step while looking at what lies past a segment's recorded fill.
const TAIL_SCAN_BLOCKS: u64 = 256;

/// What a checkpoint of a retained version needs besides its directory: the segment
/// accounting as of that version and where the log continues after it.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub seq: u64,
    pub table: SegmentTable,
    pub wal_id: u32,
    pub wal_end: u64,
}

/// Whether recovery may change files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Cut a proven-lost log tail, delete leftovers, and continue the log.
    ReadWrite,
    /// Change nothing (read-only media, or another process writing).
    ReadOnly,
}

/// A log tail that could not be read and was proven not to hold an acknowledged commit.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use sprig::{Db, Options};
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// db.commit(db.begin().finish()?)?;
/// drop(db);
/// // A crash in the middle of the next commit: a torn record at the end of the log.
/// let files = std::fs::read_dir(dir.path())?.collect::<Result<Vec<_>, _>>()?;
/// let log = files.iter().map(|f| f.path()).find(|p| p.extension().is_some_and(|x| x == "log"));
/// let mut log = std::fs::OpenOptions::new().append(true).open(log.expect("the log"))?;
/// log.write_all(&[0xab; 100])?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let tail = db.recovery().lost_tail.as_ref().expect("the torn record");
/// assert!(tail.cut && tail.bytes == 100);
/// assert_eq!(db.seq(), 1); // every acknowledged commit is there
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostTail {
    /// The log file.
    pub file: String,
    /// Where the unreadable record starts.
    pub offset: u64,
    /// Bytes from there to the end of that file.
    pub bytes: u64,
    /// The unreadable record's sequence number, where one of its headers survived.
    pub seq: Option<u64>,
    /// Commits after it that were written without a sync (`SyncPolicy::Never`) and are lost
    /// with it.
    pub unsynced_after: Vec<u64>,
    /// Later log files that held only such commits (or nothing).
    pub later_files: Vec<String>,
    /// Whether this open cut the tail off (a read-only open never does).
    pub cut: bool,
}

/// What opening a database found and did, beyond loading its state.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use sprig::{Db, Options};
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// db.commit(db.begin().finish()?)?;
/// db.commit(db.begin().finish()?)?;
/// drop(db);
/// let db = Db::open(dir.path(), Options::default())?;
/// let report = db.recovery();
/// assert_eq!((report.checkpoint_seq, report.records_replayed, report.seq), (0, 2, 2));
/// assert!(report.lost_tail.is_none() && report.repaired_records.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The commit of the checkpoint recovery started from.
    pub checkpoint_seq: u64,
    /// Commit records replayed after it.
    pub records_replayed: u64,
    /// The latest commit recovered.
    pub seq: u64,
    /// A lost log tail: a commit in flight at a crash, or unsynced commits lost to a power
    /// loss. Normal after a crash, but reported, never silent.
    pub lost_tail: Option<LostTail>,
    /// Commit records with one damaged copy, read from the other: (file, offset, seq).
    pub repaired_records: Vec<(String, u64, u64)>,
    /// Segment blocks past the fill the log accounts for, up to the end marker the last
    /// commit left there (or the end of the file): written by a commit that never completed
    /// (file, blocks). Reused by later commits. What lies past an end marker (the older
    /// contents of a recycled segment file) is not counted.
    pub unaccounted_blocks: Vec<(String, u64)>,
    /// Files deleted as leftovers (temporary files, superseded checkpoints and logs, segment
    /// files only an incomplete commit wrote).
    pub removed_files: Vec<String>,
}

impl RecoveryReport {
    /// Whether the open found nothing worth telling: no lost tail and no repaired record.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use sprig::{Db, Options};
    /// # use std::io::Write;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = Db::open(dir.path(), Options::default())?;
    /// # db.commit(db.begin().finish()?)?;
    /// # drop(db);
    /// # let files = std::fs::read_dir(dir.path())?.collect::<Result<Vec<_>, _>>()?;
    /// # let is_log = |p: &std::path::PathBuf| p.extension().is_some_and(|x| x == "log");
    /// # let log = files.iter().map(|f| f.path()).find(is_log);
    /// # let mut log = std::fs::OpenOptions::new().append(true).open(log.expect("the log"))?;
    /// # log.write_all(&[0xab; 100])?;
    /// // The database's log ends in a torn record (a crash during a commit).
    /// let db = Db::open(dir.path(), Options::default())?;
    /// assert!(!db.recovery().is_clean());
    /// drop(db);
    /// let db = Db::open(dir.path(), Options::default())?; // the tail was cut off
    /// assert!(db.recovery().is_clean());
    /// # Ok(()) }
    /// ```
    pub fn is_clean(&self) -> bool {
        self.lost_tail.is_none() && self.repaired_records.is_empty()
    }

    /// One sentence per finding, for logs and the command line.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # use sprig::{Db, Options};
    /// # use std::io::Write;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = Db::open(dir.path(), Options::default())?;
    /// # db.commit(db.begin().finish()?)?;
    /// # drop(db);
    /// # let files = std::fs::read_dir(dir.path())?.collect::<Result<Vec<_>, _>>()?;
    /// # let is_log = |p: &std::path::PathBuf| p.extension().is_some_and(|x| x == "log");
    /// # let log = files.iter().map(|f| f.path()).find(is_log);
    /// # let mut log = std::fs::OpenOptions::new().append(true).open(log.expect("the log"))?;
    /// # log.write_all(&[0xab; 100])?;
    /// // The database's log ends in a torn record (a crash during a commit).
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let findings = db.recovery().findings();
    /// assert_eq!(findings.len(), 1);
    /// assert!(findings[0].starts_with("discarded:"), "{}", findings[0]);
    /// # Ok(()) }
    /// ```
    pub fn findings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = &self.lost_tail {
            let what = match t.seq {
                Some(seq) => format!("commit record {seq}"),
                None => "a commit record".to_string(),
            };
            let mut s = format!(
                "{} {what} at offset {} of {} could not be read and was not acknowledged \
                 (a crash during a commit); {} bytes {}",
                if t.cut { "discarded:" } else { "found:" },
                t.offset,
                t.file,
                t.bytes,
                if t.cut { "cut off" } else { "left in place" }
            );
            if !t.unsynced_after.is_empty() {
                s.push_str(&format!(
                    "; with it {} commit(s) written without sync ({}..={}) were lost",
                    t.unsynced_after.len(),
                    t.unsynced_after.first().copied().unwrap_or(0),
                    t.unsynced_after.last().copied().unwrap_or(0)
                ));
            }
            if !t.later_files.is_empty() {
                s.push_str(&format!("; later log files {}", t.later_files.join(", ")));
            }
            out.push(s);
        }
        for (file, offset, seq) in &self.repaired_records {
            out.push(format!(
                "repaired: commit record {seq} at offset {offset} of {file} had a damaged copy \
                 and was read from the other"
            ));
        }
        out
    }
}

/// The state recovery found.
pub(crate) struct Recovered {
    /// The last versions replayed, oldest first, ending with the latest.
    pub history: Vec<(Tables, Snapshot)>,
    pub table: SegmentTable,
    /// The log to append to (none for a read-only recovery).
    pub wal: Option<Wal>,
    pub checkpoint_seq: u64,
    pub report: RecoveryReport,
    /// The store of every directory node recovered (the database's, from now on).
    pub arena: Arc<Arena>,
}

/// Where replay stands between log files.
struct Replayed {
    seq: u64,
    tables: Tables,
    table: SegmentTable,
    history: VecDeque<(Tables, Snapshot)>,
    keep: usize,
    records: u64,
    /// Drops the versions replay no longer keeps, beside it.
    reclaimer: Reclaimer,
    /// Where the first replayed record not proven durable starts (log id, offset): the last
    /// record whose flag says every record before it was durable, or the first replayed one
    /// if none says so.
    unproven_from: Option<(u32, u64)>,
}

/// Recover the latest durable state of the database in `storage`, keeping the last `keep`
/// versions for historical reads.
pub(crate) fn recover(
    storage: &dyn Storage,
    manifest: &Manifest,
    keep: usize,
    access: Access,
) -> Result<Recovered> {
    let names = storage
        .list()
        .map_err(|e| Error::io("listing", "the database directory", e))?;
    let checkpoint_seq = names
        .iter()
        .filter_map(|n| parse_checkpoint_file_name(n))
        .max()
        .ok_or_else(|| Error::corruption("<database directory>", 0, "no checkpoint file"))?;
    let arena = Arena::new();
    let cp = Checkpoint::load(storage, checkpoint_seq, &arena, manifest.hasher)?;
    let mut wal_ids: Vec<u32> = names
        .iter()
        .filter_map(|n| parse_wal_file_name(n))
        .filter(|id| *id >= cp.wal_id)
        .collect();
    wal_ids.sort_unstable();
    if wal_ids.first() != Some(&cp.wal_id) {
        return Err(Error::corruption(
            wal_file_name(cp.wal_id),
            0,
            "the commit log the checkpoint refers to is missing",
        ));
    }
    for pair in wal_ids.windows(2) {
        if let [a, b] = pair {
            if *b != a + 1 {
                return Err(Error::corruption(
                    wal_file_name(a + 1),
                    0,
                    format!("commit log {} is missing between {a} and {b}", a + 1),
                ));
            }
        }
    }

    // The checkpoint's directory is held only as the oldest retained version: once `keep`
    // records have replaced it, the nodes the records replaced are freed and their slots
    // reused by the next records (held for the whole replay, every node any record replaced
    // stayed, and the slots for their copies were new: +38 MiB after 200 records at utxo 100M).
    let Checkpoint {
        seq: cp_seq,
        wal_id: cp_wal_id,
        wal_offset: cp_wal_offset,
        durable_seq: cp_durable_seq,
        table: cp_table,
        tables: cp_tables,
    } = cp;
    let mut state = Replayed {
        seq: cp_seq,
        tables: cp_tables.clone(),
        table: cp_table.clone(),
        history: VecDeque::from([(
            cp_tables,
            Snapshot {
                seq: cp_seq,
                table: cp_table,
                wal_id: cp_wal_id,
                wal_end: cp_wal_offset,
            },
        )]),
        keep: keep.max(1),
        records: 0,
        reclaimer: Reclaimer::in_step(),
        unproven_from: None,
    };
    let mut report = RecoveryReport {
        checkpoint_seq,
        ..RecoveryReport::default()
    };
    let mut last = (cp_wal_id, cp_wal_offset);
    let mut lost: Option<(u32, ReplayEnd)> = None;
    for (i, id) in wal_ids.iter().enumerate() {
        let start = if *id == cp_wal_id { cp_wal_offset } else { 0 };
        let end = Wal::replay(storage, *id, start, &mut |rec| state.apply(*id, rec))?;
        for (offset, seq) in &end.repaired {
            report
                .repaired_records
                .push((wal_file_name(*id), *offset, *seq));
        }
        last = (*id, end.end);
        let next = wal_ids.get(i + 1).copied();
        if end.lost.is_some() {
            lost = Some((*id, end));
            break;
        }
        match (end.rotated_to, next) {
            (Some(to), Some(n)) if to == n => {}
            (Some(to), _) => {
                return Err(Error::corruption(
                    wal_file_name(*id),
                    end.end,
                    format!(
                        "the log says it continues in {}, which is missing",
                        wal_file_name(to)
                    ),
                ))
            }
            // A crash between creating the next file and closing this one: the next is empty
            // or holds the commits after the rotation; either way the replay goes on.
            (None, _) => {}
        }
    }

    if let Some((id, end)) = lost {
        report.lost_tail = Some(judge_lost_tail(storage, &wal_ids, id, &end)?);
    }
    report.records_replayed = state.records;
    report.seq = state.seq;
    if cp_durable_seq > state.seq {
        return Err(Error::corruption(
            wal_file_name(last.0),
            last.1,
            format!(
                "the log ends at commit {}, but the checkpoint at commit {} was written when \
                 commit {} was durable: acknowledged commits were lost",
                state.seq, cp_seq, cp_durable_seq
            ),
        ));
    }
    forget_deleted_segments(&names, &mut state.table, access)?;
    report.unaccounted_blocks = check_segment_tails(
        storage,
        &names,
        &state.table,
        state.seq,
        &|seq| match access {
            // Nobody else writes: what the log held is all there is.
            Access::ReadWrite => Ok(false),
            // A writer in another process may have committed since the log was read.
            Access::ReadOnly => log_now_reaches(storage, last.0, seq),
        },
    )?;

    let wal = match access {
        Access::ReadOnly => None,
        Access::ReadWrite => {
            if let Some(t) = report.lost_tail.as_mut() {
                for name in &t.later_files {
                    storage
                        .remove(name)
                        .map_err(|e| Error::io("deleting", name, e))?;
                }
                t.cut = true;
            }
            // Before the reopen, whose sync makes the last file's rewritten bytes durable.
            if let Some(from) = state.unproven_from {
                rewrite_unproven_tail(storage, from, last)?;
            }
            let wal = Wal::reopen(storage, last.0, last.1)?;
            // The names of the files the served state lives in are durable too (a log file
            // created by a rotation that then failed may not be).
            storage
                .sync_dir()
                .map_err(|e| Error::io("syncing", "the database directory", e))?;
            report.removed_files =
                remove_stale_files(storage, &names, checkpoint_seq, cp_wal_id, &state.table);
            Some(wal)
        }
    };
    Ok(Recovered {
        history: state.history.into_iter().collect(),
        table: state.table,
        wal,
        checkpoint_seq,
        report,
        arena,
    })
}

/// Make the replayed records not proven durable durable before they are served: write their
/// bytes again where they are and sync. A record whose commit failed at its log sync was never
/// acknowledged, but its bytes can still be read back (the OS keeps pages a failed sync did not
/// write, and a later sync may not write them either); recovery replays it, readers see it,
/// and a power loss after that would take back what they saw. Rewriting costs the tail since
/// the last record that proves the ones before it (usually one record), not the whole log.
/// Files before the last are synced here; the last is synced by [`Wal::reopen`], called next.
fn rewrite_unproven_tail(storage: &dyn Storage, from: (u32, u64), last: (u32, u64)) -> Result<()> {
    for id in from.0..=last.0 {
        let name = wal_file_name(id);
        let file = crate::log::open_existing(storage, &name)?;
        let start = if id == from.0 { from.1 } else { 0 };
        let end = if id == last.0 {
            last.1
        } else {
            file.size().map_err(|e| Error::io("reading", &name, e))?
        };
        let len = usize::try_from(end.saturating_sub(start))
            .map_err(|_| Error::corruption(&name, start, "a log tail larger than memory"))?;
        let mut bytes = vec![0u8; len];
        file.read_at(&mut bytes, start)
            .map_err(|e| Error::io("reading", &name, e))?;
        file.write_at(&bytes, start)
            .map_err(|e| Error::io("rewriting the unproven tail of", &name, e))?;
        if id != last.0 {
            file.sync().map_err(|e| Error::io("syncing", &name, e))?;
        }
    }
    Ok(())
}

impl Replayed {
    /// Apply one commit record of log file `id`.
    fn apply(&mut self, id: u32, rec: crate::log::wal::WalRecord) -> Result<()> {
        let name = wal_file_name(id);
        let hasher = self.tables.hasher();
        let record = CommitRecord::decode(&rec.payload, self.tables.arena(), hasher)
            .map_err(|e| Error::corruption(&name, rec.offset, format!("bad commit record: {e}")))?;
        let expected = self.seq.checked_add(1).ok_or_else(|| {
            Error::corruption(
                &name,
                rec.offset,
                "a commit record after the last possible one",
            )
        })?;
        if record.seq != expected || rec.seq != record.seq {
            return Err(Error::corruption(
                &name,
                rec.offset,
                format!("commit record {} where {expected} was expected", record.seq),
            ));
        }
        self.tables = apply_record(&self.tables, &mut self.table, &record).map_err(|e| {
            Error::corruption(
                &name,
                rec.offset,
                format!("commit record {}: {e}", record.seq),
            )
        })?;
        self.seq = record.seq;
        self.records += 1;
        if rec.flags & FLAG_PRIOR_DURABLE != 0 || self.unproven_from.is_none() {
            self.unproven_from = Some((id, rec.offset));
        }
        self.history.push_back((
            self.tables.clone(),
            Snapshot {
                seq: self.seq,
                table: self.table.clone(),
                wal_id: id,
                wal_end: rec.end,
            },
        ));
        while self.history.len() > self.keep {
            // Dropping a version releases the nodes only it held: the reclaim thread does it
            // while this one replays the next record, as after a commit.
            if let Some(gone) = self.history.pop_front() {
                self.reclaimer.defer(gone);
            }
        }
        // As after a commit (`Inner::refresh_emptied`): the blocks released by commits up to
        // the oldest version kept are needed by no version recovery returns. Held for the
        // whole replay, they made every record's copy of the table above longer than the last
        // (quadratic in the records replayed) and the space reported after open too large.
        let oldest = self.history.front().map(|(_, s)| s.seq);
        self.table.held.release_up_to(oldest);
        Ok(())
    }
}

/// A lost tail in log `id` is the end of the durable log only if every later log file holds
/// nothing that claims the records before it were durable.
fn judge_lost_tail(
    storage: &dyn Storage,
    wal_ids: &[u32],
    id: u32,
    end: &ReplayEnd,
) -> Result<LostTail> {
    let Some(tail) = &end.lost else {
        return Err(Error::internal("judging a log tail that was not lost"));
    };
    let mut unsynced_after = tail.unsynced_after.clone();
    let mut later_files = Vec::new();
    for later in wal_ids.iter().filter(|l| **l > id) {
        let name = wal_file_name(*later);
        let outcome = Wal::replay(storage, *later, 0, &mut |rec| {
            if rec.flags & FLAG_PRIOR_DURABLE != 0 {
                return Err(Error::corruption(
                    wal_file_name(id),
                    tail.offset,
                    format!(
                        "the commit record at offset {} cannot be read, but record {} in {} \
                         was written after it was durable",
                        tail.offset, rec.seq, name
                    ),
                ));
            }
            unsynced_after.push(rec.seq);
            Ok(())
        })?;
        if outcome.rotated_to.is_some() {
            return Err(Error::corruption(
                &name,
                outcome.end,
                "a log after a lost record was closed by a rotation, which syncs what precedes it",
            ));
        }
        later_files.push(name);
    }
    Ok(LostTail {
        file: wal_file_name(id),
        offset: tail.offset,
        bytes: tail.bytes,
        seq: tail.seq,
        unsynced_after,
        later_files,
        cut: false,
    })
}

/// Drop from the replayed segment table the segments deleted since the checkpoint: the
/// cleaner deletes a segment once nothing live is left in it and no retained version needs it,
/// and no log record says so, so the checkpoint's table (and the replay) still lists it. Left
/// there, it would count as disk in use until the next commit. A listed segment that still
/// holds live data but has no file is corruption (for a read-only open, a file deleted by a
/// writer in another process since the log was read: reported as not found, and retried).
fn forget_deleted_segments(
    names: &[String],
    table: &mut SegmentTable,
    access: Access,
) -> Result<()> {
    let present: std::collections::BTreeSet<u32> = names
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .collect();
    let missing: Vec<(u32, u64)> = table
        .segments
        .iter()
        .filter(|(id, m)| m.used_blocks > 0 && !present.contains(id))
        .map(|(id, m)| (*id, m.live_blocks()))
        .collect();
    for (id, live) in missing {
        let name = segment_file_name(id);
        if live > 0 || id == table.active {
            return Err(match access {
                Access::ReadWrite => Error::corruption(
                    &name,
                    0,
                    format!(
                        "the segment file is missing, but the log says it holds {live} live \
                         blocks"
                    ),
                ),
                Access::ReadOnly => Error::io(
                    "opening",
                    &name,
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ),
            });
        }
        table.segments.remove(&id);
        table.live_pages.remove(&id);
    }
    Ok(())
}

/// Look at the blocks past each segment's recorded fill (in the segment new blocks go to and in
/// segment files newer than any the log knows), up to the end marker a commit leaves after its
/// last block in a file with older bytes past it (a recycled segment file): a commit that never
/// completed may have written there, but a page of a synced commit two or more past the last
/// recovered one proves that the commit before it was durable, so commit records were lost.
/// Returns the blocks found before the marker (or the end of the file).
///
/// `log_reaches(seq)` says whether the log holds commit `seq` by now (another process may be
/// writing while a read-only open looks).
fn check_segment_tails(
    storage: &dyn Storage,
    names: &[String],
    table: &SegmentTable,
    last_seq: u64,
    log_reaches: &dyn Fn(u64) -> Result<bool>,
) -> Result<Vec<(String, u64)>> {
    let newest = table.segments.keys().next_back().copied().unwrap_or(0);
    let mut ids: Vec<u32> = names
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .filter(|id| *id == table.active || *id > newest)
        .collect();
    ids.sort_unstable();
    let mut found = Vec::new();
    for id in ids {
        let name = segment_file_name(id);
        let fill = table
            .segments
            .get(&id)
            .map_or(0, |m| u64::from(m.used_blocks));
        let file = storage
            .open(
                &name,
                OpenOptions {
                    create: false,
                    direct: true,
                },
            )
            .map_err(|e| Error::io("opening", &name, e))?;
        let blocks = file.size().map_err(|e| Error::io("reading", &name, e))? / BLOCK_BYTES as u64;
        if blocks <= fill {
            continue;
        }
        let mut at = fill;
        let mut marker = None;
        while at < blocks && marker.is_none() {
            let n = TAIL_SCAN_BLOCKS.min(blocks - at);
            let mut requests = [ReadRequest {
                file: file.as_ref(),
                offset: at * BLOCK_BYTES as u64,
                buf: BlockBuf::zeroed(n as usize),
            }];
            storage
                .read_batch(&mut requests)
                .map_err(|e| Error::io("reading", &name, e))?;
            let [request] = requests;
            for (i, block) in request.buf.as_bytes().chunks(BLOCK_BYTES).enumerate() {
                let index = at + i as u64;
                if u32::try_from(index).is_ok_and(|b| is_end_marker(block, id, b)) {
                    marker = Some(index);
                    break;
                }
                let Some(stamp) = crate::state::page::peek_stamp(block) else {
                    continue;
                };
                if stamp.synced
                    && stamp.seq >= last_seq.saturating_add(2)
                    && !log_reaches(stamp.seq - 1)?
                {
                    return Err(Error::corruption(
                        &name,
                        (at + i as u64) * BLOCK_BYTES as u64,
                        format!(
                            "a page written by commit {} lies past the data the log accounts \
                             for, but the log ends at commit {last_seq}: commit {} was \
                             acknowledged and its record is lost",
                            stamp.seq,
                            stamp.seq - 1
                        ),
                    ));
                }
            }
            at += n;
        }
        let end = marker.unwrap_or(blocks);
        if end > fill {
            found.push((name.clone(), end - fill));
        }
    }
    Ok(found)
}

/// Whether the log holds commit `seq` now (or a newer one), having ended in file `replayed`
/// when it was read: for a read-only open that finds pages of commits past the log it
/// replayed, while a writer may be committing.
fn log_now_reaches(storage: &dyn Storage, replayed: u32, seq: u64) -> Result<bool> {
    let names = storage
        .list()
        .map_err(|e| Error::io("listing", "the database directory", e))?;
    let Some(newest) = names.iter().filter_map(|n| parse_wal_file_name(n)).max() else {
        return Ok(false);
    };
    if newest > replayed {
        return Ok(true);
    }
    let mut reached = false;
    match Wal::replay(storage, newest, 0, &mut |rec| {
        reached |= rec.seq >= seq;
        Ok(())
    }) {
        Ok(_) => Ok(reached),
        // Superseded while being read: the writer has moved on.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e),
    }
}

/// Delete leftovers: temporary files, older checkpoints and logs, and segment files created
/// by a commit that never completed. Failures are ignored: a leftover costs only space.
/// Returns the names deleted.
fn remove_stale_files(
    storage: &dyn Storage,
    names: &[String],
    checkpoint_seq: u64,
    wal_id: u32,
    table: &SegmentTable,
) -> Vec<String> {
    let newest_segment = table.segments.keys().next_back().copied().unwrap_or(0);
    let mut removed = Vec::new();
    for name in names {
        let stale = name.ends_with(".tmp")
            || parse_checkpoint_file_name(name).is_some_and(|s| s < checkpoint_seq)
            || parse_wal_file_name(name).is_some_and(|id| id < wal_id)
            || parse_segment_file_name(name).is_some_and(|id| id > newest_segment);
        if stale && storage.remove(name).is_ok() {
            removed.push(name.clone());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemoryStorage;
    use crate::{Db, Options};
    use std::sync::Arc;

    /// Replay forgets the blocks released by commits up to the oldest version it keeps as it
    /// passes them, as each commit does. Before, it held every replayed commit's blocks to the
    /// end and copied them all into each record's retained version (a cost quadratic in the
    /// records replayed: a tenth of the replay of a full log at utxo 10M).
    #[test]
    fn replay_holds_only_the_blocks_the_versions_it_keeps_need() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let options = || Options {
            page_cache_bytes: 0,
            retained_versions: 4,
            ..Options::default()
        };
        let db = Db::open_with_storage(storage.clone(), options()).unwrap();
        let key = |i: u32| crate::Hasher::Blake3.hash_value(&i.to_le_bytes());
        for round in 0..30u32 {
            let mut batch = db.begin();
            for i in 0..300u32 {
                batch.put(key(round * 101 + i), vec![round as u8; 60]).unwrap();
            }
            db.commit(batch.finish().unwrap()).unwrap();
        }
        drop(db);

        let manifest = Manifest::load(storage.as_ref()).unwrap().unwrap();
        let recovered = recover(storage.as_ref(), &manifest, 4, Access::ReadOnly).unwrap();
        assert_eq!(recovered.report.records_replayed, 30);
        let oldest_kept = recovered.history.first().map(|(_, s)| s.seq).unwrap();
        assert_eq!(oldest_kept, 27);
        let held = |t: &SegmentTable| t.held.oldest_commit();
        assert!(
            held(&recovered.table).is_some_and(|c| c > oldest_kept),
            "held blocks of commit {:?}, the oldest version kept is {oldest_kept}",
            held(&recovered.table)
        );
        for (_, snapshot) in &recovered.history {
            assert!(
                held(&snapshot.table).is_none_or(|c| c + 4 >= snapshot.seq),
                "version {} holds the blocks of commit {:?}",
                snapshot.seq,
                held(&snapshot.table)
            );
        }
    }
}
