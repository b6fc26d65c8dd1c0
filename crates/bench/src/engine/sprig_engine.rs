//! Sprig behind the [`Engine`] interface: a write batch per benchmark batch, its reads
//! prefetched together (io_uring), `finish` for the root and witness, then `commit`. In
//! pipelined mode the engine's commit pipeline ([`sprig::Pipeline`]) builds the next batch on
//! top of the previous one (a stacked overlay) while its thread makes the previous one
//! durable, in order.

use super::{Engine, EngineCounters, Load, Writes};
use crate::cli::EngineArgs;
use anyhow::{anyhow, Context, Result};
use sprig::{BulkPhase, Db, KeyPath, Node, Options, Pipeline, WriteBatch};
use std::path::Path;

/// Finished batches that may wait for the committer in pipelined mode.
const PIPELINE_DEPTH: usize = 2;

fn options(args: &EngineArgs) -> Options {
    Options {
        hasher: Some(sprig::Hasher::Blake3),
        page_cache_bytes: args.cache_mb << 20,
        direct_io: args.direct_io,
        ..Options::default()
    }
}

/// Bulk-load a new Sprig database.
pub fn create(load: Load<'_>) -> Result<Option<Node>> {
    let db = Db::create(load.path, options(load.args))
        .with_context(|| format!("creating a Sprig database in {}", load.path.display()))?;
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
    batch: Option<WriteBatch>,
    prefetch: bool,
    /// Pipelined mode's commit pipeline.
    pipeline: Option<Pipeline>,
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
        Ok(SprigEngine {
            batch: None,
            prefetch: !args.serial_reads,
            pipeline: args.pipelined.then(|| db.pipeline(PIPELINE_DEPTH)),
            db,
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
        let batch = self.batch()?;
        if prefetch {
            batch.prefetch(keys)?;
        }
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            out.push(batch.get(key)?);
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
            match value {
                Some(v) => batch.put(key, v)?,
                None => batch.delete(key),
            }
        }
        let pending = batch.finish()?;
        let root = pending.root();
        match &mut self.pipeline {
            Some(p) => p.submit(pending)?,
            None => {
                self.db.commit(pending)?;
            }
        }
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
        })
    }
}
