//! RocksDB (the `rocksdb` crate) behind the [`Engine`] interface: the flat key-value store
//! users would pick instead, with no Merkle tree, no root and no witness. Reads are
//! `multi_get` spread over the read threads; a commit is one write batch, synced (as Sprig and
//! NOMT make every commit durable). Creation writes without the WAL, then flushes and compacts
//! into a steady LSM tree.

use super::{read_parallel, Engine, EngineCounters, Load, Writes};
use crate::cli::EngineArgs;
use anyhow::{Context, Result};
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteBatch, WriteOptions, DB};
use sprig::{KeyPath, Node};
use std::path::Path;

/// Entries per write batch while creating.
const CREATE_BATCH_ENTRIES: usize = 100_000;
/// Bloom filter bits per key (RocksDB's usual setting).
const BLOOM_BITS_PER_KEY: f64 = 10.0;
/// Background flush and compaction threads (the machine has two cores).
const BACKGROUND_JOBS: i32 = 2;

fn options(args: &EngineArgs, create: bool) -> Result<Options> {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&Cache::new_lru_cache(
        usize::try_from(args.cache_mb << 20).unwrap_or(usize::MAX),
    )?);
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
    let mut o = Options::default();
    o.create_if_missing(create);
    o.set_block_based_table_factory(&table);
    o.set_compression_type(DBCompressionType::None);
    o.set_max_background_jobs(BACKGROUND_JOBS);
    o.set_use_direct_reads(args.direct_io);
    o.set_use_direct_io_for_flush_and_compaction(args.direct_io);
    Ok(o)
}

/// Create a RocksDB database.
pub fn create(load: Load<'_>) -> Result<Option<Node>> {
    let db = DB::open(&options(load.args, true)?, load.path)
        .with_context(|| format!("creating a RocksDB database in {}", load.path.display()))?;
    let mut unlogged = WriteOptions::default();
    unlogged.disable_wal(true);
    let mut done = 0u64;
    loop {
        let mut batch = WriteBatch::default();
        for (k, v) in (&mut *load.entries).take(CREATE_BATCH_ENTRIES) {
            batch.put(k, v);
        }
        if batch.is_empty() {
            break;
        }
        done += batch.len() as u64;
        db.write_opt(batch, &unlogged)?;
        load.progress.set_position(done);
    }
    load.progress.set_message("flushing and compacting");
    db.flush()?;
    db.compact_range(None::<&[u8]>, None::<&[u8]>);
    Ok(None)
}

/// An open RocksDB database.
pub struct RocksEngine {
    db: DB,
    threads: usize,
    synced: WriteOptions,
}

impl RocksEngine {
    /// Open the database at `path`.
    pub fn open(path: &Path, args: &EngineArgs) -> Result<Self> {
        let db = DB::open(&options(args, false)?, path)
            .with_context(|| format!("opening the RocksDB database in {}", path.display()))?;
        let mut synced = WriteOptions::default();
        synced.set_sync(true);
        Ok(RocksEngine {
            db,
            threads: if args.serial_reads { 1 } else { args.threads },
            synced,
        })
    }
}

impl Engine for RocksEngine {
    fn read(&mut self, keys: &[KeyPath]) -> Result<Vec<Option<Vec<u8>>>> {
        let db = &self.db;
        read_parallel(keys, self.threads, |chunk| {
            db.multi_get(chunk)
                .into_iter()
                .map(|r| r.map_err(anyhow::Error::from))
                .collect()
        })
    }

    fn commit(&mut self, writes: Writes) -> Result<Option<Node>> {
        let mut batch = WriteBatch::default();
        for (key, value) in writes {
            match value {
                Some(v) => batch.put(key, v),
                None => batch.delete(key),
            }
        }
        self.db.write_opt(batch, &self.synced)?;
        Ok(None)
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn counters(&self) -> Option<EngineCounters> {
        None
    }
}
