//! NOMT (the `nomt` crate) behind the [`Engine`] interface, with BLAKE3 so that its roots are
//! Sprig's: one session per batch with a read-write witness, every key warmed up, reads spread
//! over the workload threads, then `finish` with the batch's reads and writes and `commit`.
//! Creation commits the entries in large sorted sessions (NOMT has no bulk load).

use super::{read_parallel, Engine, Load, Writes};
use crate::cli::EngineArgs;
use anyhow::{anyhow, Context, Result};
use nomt::hasher::Blake3Hasher;
use nomt::{KeyReadWrite, Nomt, Session, SessionParams, WitnessMode};
use sprig::{KeyPath, Node};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Entries per session while creating.
const CREATE_SESSION_ENTRIES: usize = 1 << 20;
/// The hash table is sized for this much growth of the entry count over runs.
const GROWTH: f64 = 1.3;
/// Hash-table buckets per expected page (NOMT degrades as its table fills).
const BUCKETS_PER_PAGE: f64 = 1.5;
/// The fewest buckets.
const MIN_BUCKETS: f64 = 16_384.0;
/// NOMT's commit threads (its benchtop's setting on machines of this size).
const COMMIT_CONCURRENCY: usize = 2;

/// The pages NOMT needs for `entries` uniform keys: a page holds six levels of the trie, and a
/// page at depth d exists where its subtree holds at least two leaves.
fn expected_pages(entries: f64) -> f64 {
    (0..=10)
        .map(|layer| {
            let pages = 2f64.powi(6 * layer);
            let lambda = entries / pages;
            pages * (1.0 - (-lambda).exp() * (1.0 + lambda))
        })
        .sum()
}

fn options(path: &Path, args: &EngineArgs, entries: u64) -> nomt::Options {
    let mut o = nomt::Options::new();
    o.path(path);
    o.commit_concurrency(COMMIT_CONCURRENCY);
    o.bitbox_seed([0x5a; 16]);
    let half = usize::try_from((args.cache_mb / 2).max(1)).unwrap_or(usize::MAX);
    o.page_cache_size(half);
    o.leaf_cache_size(half);
    let buckets = (expected_pages(entries as f64 * GROWTH) * BUCKETS_PER_PAGE).max(MIN_BUCKETS);
    o.hashtable_buckets(buckets.min(f64::from(u32::MAX)) as u32);
    o
}

/// Create a NOMT database of `count` entries.
pub fn create(load: Load<'_>) -> Result<Option<Node>> {
    let Load {
        path,
        args,
        count,
        entries,
        progress,
    } = load;
    let db = Nomt::<Blake3Hasher>::open(options(path, args, count))
        .with_context(|| format!("creating a NOMT database in {}", path.display()))?;
    let mut done = 0u64;
    loop {
        let chunk: BTreeMap<KeyPath, Vec<u8>> =
            (&mut *entries).take(CREATE_SESSION_ENTRIES).collect();
        if chunk.is_empty() {
            break;
        }
        done += chunk.len() as u64;
        let session = db.begin_session(SessionParams::default());
        let actuals = chunk
            .into_iter()
            .map(|(k, v)| (k, KeyReadWrite::Write(Some(v))))
            .collect();
        session.finish(actuals)?.commit(&db)?;
        progress.set_position(done);
    }
    Ok(Some(db.root().into_inner()))
}

/// An open NOMT database.
pub struct NomtEngine {
    db: Nomt<Blake3Hasher>,
    session: Option<Session<Blake3Hasher>>,
    /// What the current batch read, for its witness and `finish`.
    read: HashMap<KeyPath, Option<Vec<u8>>, foldhash::fast::RandomState>,
    threads: usize,
}

impl NomtEngine {
    /// Open the database at `path`.
    pub fn open(path: &Path, args: &EngineArgs) -> Result<Self> {
        let db = Nomt::<Blake3Hasher>::open(options(path, args, 0))
            .with_context(|| format!("opening the NOMT database in {}", path.display()))?;
        Ok(NomtEngine {
            db,
            session: None,
            read: HashMap::default(),
            threads: if args.serial_reads { 1 } else { args.threads },
        })
    }

    fn session(&mut self) -> &Session<Blake3Hasher> {
        let db = &self.db;
        self.session.get_or_insert_with(|| {
            db.begin_session(SessionParams::default().witness_mode(WitnessMode::read_write()))
        })
    }
}

impl Engine for NomtEngine {
    fn read(&mut self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        let threads = self.threads;
        let session = self.session();
        for key in keys {
            session.warm_up(*key);
        }
        let values = read_parallel(keys, threads, |chunk| {
            chunk.iter().map(|k| session.read(*k)).collect()
        })?;
        for (k, v) in keys.iter().zip(&values) {
            self.read.insert(*k, v.clone());
        }
        Ok(values)
    }

    fn commit(&mut self, writes: Writes) -> Result<Option<Node>> {
        self.session();
        let session = self
            .session
            .take()
            .ok_or_else(|| anyhow!("no session after starting one"))?;
        for (key, _) in &writes {
            if !self.read.contains_key(key) {
                session.warm_up(*key);
            }
        }
        let mut actuals: BTreeMap<KeyPath, KeyReadWrite> = std::mem::take(&mut self.read)
            .into_iter()
            .map(|(k, v)| (k, KeyReadWrite::Read(v)))
            .collect();
        for (key, value) in writes {
            let rw = match actuals.remove(&key) {
                Some(KeyReadWrite::Read(prior)) => KeyReadWrite::ReadThenWrite(prior, value),
                _ => KeyReadWrite::Write(value),
            };
            actuals.insert(key, rw);
        }
        let mut finished = session.finish(actuals.into_iter().collect())?;
        // The witness is made (and dropped): the benchmark measures its cost, as NOMT's does.
        let _witness = finished.take_witness();
        finished.commit(&self.db)?;
        Ok(Some(self.db.root().into_inner()))
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn counters(&self) -> Option<super::EngineCounters> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_estimate_grows_with_entries() {
        // 2^20 uniform keys fill most pages of the fourth layer (2^18 of them).
        let p = expected_pages((1u64 << 20) as f64);
        assert!(p > 250_000.0 && p < 320_000.0, "{p}");
        assert!(expected_pages((1u64 << 24) as f64) > 10.0 * p);
    }
}
