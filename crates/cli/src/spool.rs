//! The records of an import, read from the input once and kept until the engine takes them:
//! in memory up to a budget, then sorted by key path into runs on temporary files, and merged
//! back in key order. The input is never opened twice or rewound, so pipes and FIFOs work.
//!
//! Run files are anonymous (unlinked at creation, `O_TMPFILE` where the kernel has it) in the
//! directory given, the database's: they take disk, not RAM, and vanish when the process ends,
//! whatever way it ends. A run holds its records sorted by key path, equal keys in input order;
//! earlier runs hold earlier input. Merging yields every record in key order (equal keys in
//! input order) or, de-duplicated, the last record of each key — what importing the records one
//! by one would leave.
//!
//! Run layout (ours alone, never kept): per record the 32-byte key path, a tag (`0` delete,
//! `1` put) and for a put the value's length (`u32`, little-endian) and the value.

use crate::error::{CliError, CliResult};
use crate::records::Change;
use sprig_core::KeyPath;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// What one record held in memory counts against the budget besides its value: the key, the
/// vector slot (with room for the vector's growth) and the value's allocation.
const RECORD_COST_BYTES: usize = 128;
/// The read buffer of one run while merging: at least this...
const MIN_RUN_BUFFER_BYTES: usize = 8 << 10;
/// ...and at most this.
const MAX_RUN_BUFFER_BYTES: usize = 1 << 20;
/// The name run files are reported by in errors.
const RUN_NAME: &str = "a temporary import file";
const TAG_DELETE: u8 = 0;
const TAG_PUT: u8 = 1;

/// Records read so far, in memory and in sorted runs.
pub struct Spool {
    dir: PathBuf,
    budget: usize,
    memory: Vec<Change>,
    memory_bytes: usize,
    runs: Vec<File>,
    records: u64,
    deletes: u64,
}

fn run_error(e: std::io::Error) -> CliError {
    CliError::io("using", RUN_NAME, e)
}

impl Spool {
    /// An empty spool holding up to `budget_bytes` of records in memory, spilling runs into
    /// `dir`.
    pub fn new(dir: &Path, budget_bytes: u64) -> Spool {
        Spool {
            dir: dir.to_path_buf(),
            budget: usize::try_from(budget_bytes).unwrap_or(usize::MAX),
            memory: Vec::new(),
            memory_bytes: 0,
            runs: Vec::new(),
            records: 0,
            deletes: 0,
        }
    }

    /// Records held.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Delete records held.
    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    /// Runs spilled to files so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Keep one record.
    pub fn push(&mut self, change: Change) -> CliResult<()> {
        self.records += 1;
        self.deletes += u64::from(change.1.is_none());
        self.memory_bytes += RECORD_COST_BYTES + change.1.as_ref().map_or(0, Vec::len);
        self.memory.push(change);
        if self.memory_bytes > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Write the records in memory, sorted, as a new run.
    fn spill(&mut self) -> CliResult<()> {
        // Stable: equal keys keep their input order.
        self.memory.sort_by_key(|c| c.0);
        let file = tempfile::tempfile_in(&self.dir).map_err(|e| {
            CliError::io(
                "creating a temporary file in",
                self.dir.display().to_string(),
                e,
            )
        })?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        for (key, value) in self.memory.drain(..) {
            out.write_all(&key).map_err(run_error)?;
            match value {
                None => out.write_all(&[TAG_DELETE]).map_err(run_error)?,
                Some(v) => {
                    let len = u32::try_from(v.len())
                        .map_err(|_| CliError::input("import", "a value longer than 4 GiB"))?;
                    out.write_all(&[TAG_PUT]).map_err(run_error)?;
                    out.write_all(&len.to_le_bytes()).map_err(run_error)?;
                    out.write_all(&v).map_err(run_error)?;
                }
            }
        }
        let file = out.into_inner().map_err(|e| run_error(e.into_error()))?;
        self.runs.push(file);
        self.memory_bytes = 0;
        // Give back what the records took: the vector is refilled from empty.
        self.memory = Vec::new();
        Ok(())
    }

    /// Every record in key order; with `dedup`, only the last record of each key. The merge
    /// fails at its end if it met another number of records than were pushed.
    pub fn merge(mut self, dedup: bool) -> CliResult<Merge> {
        self.memory.sort_by_key(|c| c.0);
        let buffer = (self.budget / (2 * self.runs.len().max(1)))
            .clamp(MIN_RUN_BUFFER_BYTES, MAX_RUN_BUFFER_BYTES);
        let mut sources = Vec::with_capacity(self.runs.len() + 1);
        for mut file in self.runs {
            file.seek(SeekFrom::Start(0)).map_err(run_error)?;
            sources.push(Source::Run(BufReader::with_capacity(buffer, file)));
        }
        // The records still in memory came last.
        sources.push(Source::Memory(self.memory.into_iter()));
        let mut merge = Merge {
            heads: Vec::with_capacity(sources.len()),
            sources,
            heap: BinaryHeap::new(),
            dedup,
            expected: self.records,
            consumed: 0,
            checked: false,
        };
        for i in 0..merge.sources.len() {
            merge.heads.push(None);
            merge.advance(i)?;
        }
        Ok(merge)
    }
}

/// Where merged records come from.
enum Source {
    Run(BufReader<File>),
    Memory(std::vec::IntoIter<Change>),
}

impl Source {
    fn next(&mut self) -> CliResult<Option<Change>> {
        match self {
            Source::Memory(records) => Ok(records.next()),
            Source::Run(input) => {
                // A clean end of the run is the only place a read may find nothing.
                if input.fill_buf().map_err(run_error)?.is_empty() {
                    return Ok(None);
                }
                let mut key: KeyPath = [0; 32];
                input.read_exact(&mut key).map_err(run_error)?;
                let mut tag = [0u8; 1];
                input.read_exact(&mut tag).map_err(run_error)?;
                match tag {
                    [TAG_DELETE] => Ok(Some((key, None))),
                    [TAG_PUT] => {
                        let mut len = [0u8; 4];
                        input.read_exact(&mut len).map_err(run_error)?;
                        let len = u64::from(u32::from_le_bytes(len));
                        let mut value = Vec::new();
                        let n = input.take(len).read_to_end(&mut value).map_err(run_error)?;
                        if n as u64 != len {
                            return Err(run_error(std::io::ErrorKind::UnexpectedEof.into()));
                        }
                        Ok(Some((key, Some(value))))
                    }
                    _ => Err(run_error(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "unknown record tag",
                    ))),
                }
            }
        }
    }
}

/// The merged records of a [`Spool`], in key order.
pub struct Merge {
    sources: Vec<Source>,
    /// The next record of each source.
    heads: Vec<Option<Change>>,
    /// The keys of the heads, with their source: the smallest first, and of equal keys the
    /// earlier source (earlier input) first.
    heap: BinaryHeap<Reverse<(KeyPath, usize)>>,
    dedup: bool,
    expected: u64,
    consumed: u64,
    checked: bool,
}

impl Merge {
    /// Records taken from the runs so far (repeated keys included).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Load the next record of source `i`.
    fn advance(&mut self, i: usize) -> CliResult<()> {
        let next = match self.sources.get_mut(i) {
            Some(source) => source.next()?,
            None => None,
        };
        if let Some((key, _)) = &next {
            self.heap.push(Reverse((*key, i)));
        }
        if let Some(slot) = self.heads.get_mut(i) {
            *slot = next;
        }
        Ok(())
    }

    /// The record at the top of the heap, its source advanced.
    fn pop(&mut self) -> CliResult<Option<Change>> {
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let record = self.heads.get_mut(i).and_then(Option::take);
        self.advance(i)?;
        self.consumed += 1;
        Ok(record)
    }

    fn next_record(&mut self) -> CliResult<Option<Change>> {
        let Some(mut record) = self.pop()? else {
            if !self.checked && self.consumed != self.expected {
                self.checked = true;
                return Err(CliError::input(
                    "import",
                    format!(
                        "{} records were read but {} came back from the temporary files; \
                         nothing was imported",
                        self.expected, self.consumed
                    ),
                ));
            }
            return Ok(None);
        };
        if self.dedup {
            while self
                .heap
                .peek()
                .is_some_and(|Reverse((key, _))| *key == record.0)
            {
                if let Some(later) = self.pop()? {
                    record = later;
                }
            }
        }
        Ok(Some(record))
    }
}

impl Iterator for Merge {
    type Item = CliResult<Change>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> KeyPath {
        [i; 32]
    }

    /// A spool of `records` with a budget small enough to spill every few records.
    fn spooled(records: &[(u8, Option<u8>)], budget: u64) -> Spool {
        let dir = std::env::temp_dir();
        let mut spool = Spool::new(&dir, budget);
        for (k, v) in records {
            spool.push((key(*k), v.map(|v| vec![v; 3]))).unwrap();
        }
        spool
    }

    fn merged(spool: Spool, dedup: bool) -> Vec<(u8, Option<u8>)> {
        spool
            .merge(dedup)
            .unwrap()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k[0], v.map(|v| v[0]))
            })
            .collect()
    }

    #[test]
    fn merging_keeps_input_order_of_equal_keys_and_the_last_one_wins() {
        let records = [
            (5, Some(1)),
            (3, Some(1)),
            (5, None),
            (9, Some(1)),
            (3, Some(2)),
            (1, Some(1)),
            (5, Some(3)),
            (3, None),
            (7, Some(1)),
        ];
        for budget in [0, 300, 1 << 20] {
            let spool = spooled(&records, budget);
            assert_eq!(spool.records(), 9);
            assert_eq!(spool.deletes(), 2);
            if budget == 0 {
                assert_eq!(spool.runs(), 9, "a run per record");
            }
            assert_eq!(
                merged(spool, false),
                vec![
                    (1, Some(1)),
                    (3, Some(1)),
                    (3, Some(2)),
                    (3, None),
                    (5, Some(1)),
                    (5, None),
                    (5, Some(3)),
                    (7, Some(1)),
                    (9, Some(1)),
                ],
                "budget {budget}"
            );
            let spool = spooled(&records, budget);
            assert_eq!(
                merged(spool, true),
                vec![
                    (1, Some(1)),
                    (3, None),
                    (5, Some(3)),
                    (7, Some(1)),
                    (9, Some(1)),
                ],
                "budget {budget}"
            );
        }
    }

    #[test]
    fn a_merge_that_loses_records_fails_at_its_end() {
        for dedup in [false, true] {
            let mut spool = spooled(&[(1, Some(1)), (2, None), (1, Some(2))], 200);
            spool.records += 1;
            let results: Vec<CliResult<Change>> = spool.merge(dedup).unwrap().collect();
            let last = results.last().expect("an item");
            let err = last
                .as_ref()
                .expect_err("the last item is the error")
                .to_string();
            assert!(err.contains("4 records were read but 3 came back"), "{err}");
            assert!(results[..results.len() - 1].iter().all(Result::is_ok));
        }
    }

    #[test]
    fn an_empty_spool_merges_to_nothing() {
        assert!(merged(spooled(&[], 0), true).is_empty());
    }
}
