//! Sprig behind the [`Engine`] interface: a write batch per benchmark batch, its reads
//! prefetched together (io_uring), `finish` for the root and witness, then `commit`. In
//! pipelined mode the next batch is built on top of the previous one (a stacked overlay)
//! while a committer thread makes the previous one durable, in order.

use super::{Engine, EngineCounters, Load, Writes};
use crate::cli::EngineArgs;
use anyhow::{anyhow, Context, Result};
use sprig::{BulkPhase, Db, KeyPath, Node, Options, Pending, WriteBatch};
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

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

/// The committer of pipelined mode.
struct Committer {
    queue: SyncSender<Pending>,
    thread: JoinHandle<sprig::Result<()>>,
}

/// An open Sprig database.
pub struct SprigEngine {
    db: Db,
    batch: Option<WriteBatch>,
    prefetch: bool,
    /// Pipelined mode: the latest finished batch, which the next one builds on.
    tip: Option<Pending>,
    committer: Option<Committer>,
    pipelined: bool,
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
            db,
            batch: None,
            prefetch: !args.serial_reads,
            tip: None,
            committer: None,
            pipelined: args.pipelined,
        })
    }

    fn batch(&mut self) -> Result<&mut WriteBatch> {
        if self.batch.is_none() {
            let batch = match &self.tip {
                Some(tip) => tip.begin()?,
                None => self.db.begin(),
            };
            self.batch = Some(batch);
        }
        self.batch
            .as_mut()
            .ok_or_else(|| anyhow!("no batch after starting one"))
    }

    fn committer(&mut self) -> &SyncSender<Pending> {
        let db = self.db.clone();
        &self
            .committer
            .get_or_insert_with(|| {
                let (queue, pending) = sync_channel::<Pending>(PIPELINE_DEPTH);
                let thread = std::thread::spawn(move || {
                    for p in pending {
                        db.commit(p)?;
                    }
                    Ok(())
                });
                Committer { queue, thread }
            })
            .queue
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
        if self.pipelined {
            self.tip = Some(pending.clone());
            if self.committer().send(pending).is_err() {
                // The committer stopped on an error; flush reports it.
                self.flush()?;
                return Err(anyhow!("the committer thread stopped"));
            }
        } else {
            self.db.commit(pending)?;
        }
        Ok(Some(root))
    }

    fn flush(&mut self) -> Result<()> {
        self.tip = None;
        if let Some(c) = self.committer.take() {
            drop(c.queue);
            c.thread
                .join()
                .map_err(|_| anyhow!("the committer thread panicked"))??;
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
