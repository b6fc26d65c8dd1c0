//! Sprig behind the [`Engine`] interface: a write batch per benchmark batch, its reads one
//! `get_many` (pages read together through io_uring, values found on every core), `finish`
//! for the root and witness, then `commit`. In
//! pipelined mode the engine's commit pipeline ([`sprig::Pipeline`]) builds the next batch on
//! top of the previous one (a stacked overlay) while its thread makes the previous one
//! durable, in order.
//!
//! A database created with `--sprig-tables 2` holds its keys in two tables (by the parity of a
//! key path's first byte): every batch reads both (one round of reads per table) and commits
//! both in one commit, and the root reported is the database root.

use super::{Engine, EngineCounters, Load, Writes};
use crate::cli::{EngineArgs, SprigIo, SprigSync};
use anyhow::{anyhow, Context, Result};
use sprig::{BulkPhase, Db, ImportOptions, KeyPath, Node, Options, Pipeline, Table, WriteBatch};
use std::path::Path;
use std::time::{Duration, Instant};

/// Finished batches that may wait for the committer in pipelined mode.
const PIPELINE_DEPTH: usize = 2;
/// The second table of a two-table database.
const SECOND_TABLE: &str = "second";

/// Which of `tables` holds `key`.
fn table_of<'t>(tables: &'t [Table], key: &KeyPath) -> &'t Table {
    &tables[usize::from(key[0] & 1) % tables.len()]
}

fn options(args: &EngineArgs) -> Options {
    Options {
        hasher: Some(sprig::Hasher::Blake3),
        page_cache_bytes: args.cache_mb << 20,
        direct_io: args.direct_io,
        sync: match args.sprig_sync {
            SprigSync::Always => sprig::SyncPolicy::Always,
            SprigSync::Never => sprig::SyncPolicy::Never,
        },
        retained_versions: args.sprig_retained,
        segment_bytes: args.sprig_segment_mb << 20,
        io_backend: match args.sprig_io {
            SprigIo::IoUring => sprig::IoBackend::IoUring,
            SprigIo::Posix => sprig::IoBackend::Posix,
        },
        background_checkpoints: args.sprig_background_checkpoints,
        ..Options::default()
    }
}

/// Bulk-load a new Sprig database (with two tables: the default table bulk-loaded, the second
/// one imported in one commit from its sorted entries, held in memory meanwhile).
pub fn create(load: Load<'_>) -> Result<Option<Node>> {
    let db = Db::create(load.path, options(load.args))
        .with_context(|| format!("creating a Sprig database in {}", load.path.display()))?;
    if load.args.sprig_tables == 2 {
        let mut second: Vec<(KeyPath, Vec<u8>)> = Vec::new();
        let first = load.entries.filter_map(|(k, v)| {
            if k[0] & 1 == 1 {
                second.push((k, v));
                None
            } else {
                Some((k, v))
            }
        });
        let report = db.bulk_load(first, &mut |p| load.progress.set_position(p.done))?;
        second.sort_unstable_by_key(|(k, _)| *k);
        let table = db.create_table(SECOND_TABLE, sprig::TableOptions::default())?;
        let n = second.len() as u64;
        db.import_sorted_into(
            &table,
            second.into_iter().map(|(k, v)| Ok((k, Some(v)))),
            &ImportOptions::default(),
        )?;
        anyhow::ensure!(
            report.entries + n == load.count,
            "the load stored {} entries, not the {} generated",
            report.entries + n,
            load.count
        );
        return Ok(Some(db.db_root()));
    }
    let report = db.bulk_load(load.entries, &mut |p| match p.phase {
        BulkPhase::Partition => load.progress.set_position(p.done),
        BulkPhase::Build => {
            load.progress.set_message("building pages");
            load.progress.set_length(p.total);
            load.progress.set_position(p.done);
        }
    })?;
    anyhow::ensure!(
        report.entries == load.count,
        "the bulk load stored {} entries, not the {} generated",
        report.entries,
        load.count
    );
    Ok(Some(report.root))
}

/// An open Sprig database.
pub struct SprigEngine {
    db: Db,
    /// The tables the keys are spread over (the default table alone, or it and a second).
    tables: Vec<Table>,
    batch: Option<WriteBatch>,
    prefetch: bool,
    /// Pipelined mode's commit pipeline.
    pipeline: Option<Pipeline>,
    /// Time spent in `finish` and in the durable commit (or the pipeline's hand-over).
    finish_time: Duration,
    durable_time: Duration,
}

impl SprigEngine {
    /// Open the database at `path`.
    pub fn open(path: &Path, args: &EngineArgs) -> Result<Self> {
        let db = Db::open(
            path,
            Options {
                create_if_missing: false,
                ..options(args)
            },
        )
        .with_context(|| format!("opening the Sprig database in {}", path.display()))?;
        let mut tables = vec![Table::default_table()];
        if let Ok(t) = db.table(SECOND_TABLE) {
            tables.push(t);
        }
        Ok(SprigEngine {
            tables,
            batch: None,
            prefetch: !args.serial_reads,
            pipeline: args.pipelined.then(|| db.pipeline(PIPELINE_DEPTH)),
            db,
            finish_time: Duration::ZERO,
            durable_time: Duration::ZERO,
        })
    }

    fn batch(&mut self) -> Result<&mut WriteBatch> {
        if self.batch.is_none() {
            let batch = match &self.pipeline {
                Some(p) => p.begin()?,
                None => self.db.begin(),
            };
            self.batch = Some(batch);
        }
        self.batch
            .as_mut()
            .ok_or_else(|| anyhow!("no batch after starting one"))
    }
}

impl Engine for SprigEngine {
    fn read(&mut self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        let prefetch = self.prefetch;
        let tables = self.tables.clone();
        let batch = self.batch()?;
        if !prefetch {
            return keys
                .iter()
                .map(|key| Ok(batch.get_in(table_of(&tables, key), key)?))
                .collect();
        }
        // One get_many per table (all its page reads in flight at once), answers put back in
        // the keys' order.
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for t in &tables {
            let (at, mine): (Vec<usize>, Vec<KeyPath>) = keys
                .iter()
                .enumerate()
                .filter(|(_, k)| table_of(&tables, k) == t)
                .map(|(i, k)| (i, *k))
                .unzip();
            for (i, value) in at.into_iter().zip(batch.get_many_in(t, &mine)?) {
                out[i] = value; // `i` is an index of `keys`, the length of `out`
            }
        }
        Ok(out)
    }

    fn commit(&mut self, writes: Writes) -> Result<Option<Node>> {
        let mut batch = match self.batch.take() {
            Some(b) => b,
            None => {
                self.batch()?;
                self.batch
                    .take()
                    .ok_or_else(|| anyhow!("no batch after starting one"))?
            }
        };
        for (key, value) in writes {
            let t = table_of(&self.tables, &key);
            match value {
                Some(v) => batch.put_in(t, key, v)?,
                None => batch.delete_in(t, key)?,
            }
        }
        let started = Instant::now();
        let pending = batch.finish()?;
        let finished = Instant::now();
        self.finish_time += finished - started;
        let root = if self.tables.len() > 1 {
            pending.db_root()
        } else {
            pending.root()
        };
        match &mut self.pipeline {
            Some(p) => p.submit(pending)?,
            None => {
                self.db.commit(pending)?;
            }
        }
        self.durable_time += finished.elapsed();
        Ok(Some(root))
    }

    fn flush(&mut self) -> Result<()> {
        if let Some(p) = &mut self.pipeline {
            p.flush()?;
        }
        Ok(())
    }

    fn io_backend(&self) -> Option<String> {
        Some(self.db.io_backend().to_string())
    }

    fn counters(&self) -> Option<EngineCounters> {
        let s = self.db.stats();
        Some(EngineCounters {
            ssd_reads: s.page_reads() + s.value_reads,
            bytes_written: s.bytes_written,
            pages_written: s.pages_written,
            cleaner_pages: s.cleaner_pages_copied,
            hashes_needed: s.hashes_needed,
            space: super::SpaceUse {
                disk_bytes: s.disk_bytes,
                live_bytes: s.live_bytes,
                retained_bytes: s.retained_bytes,
            },
            finish_nanos: self.finish_time.as_nanos() as u64,
            durable_nanos: self.durable_time.as_nanos() as u64,
            phases: s.phase_times,
        })
    }
}
