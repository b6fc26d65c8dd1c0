//! What a small commit costs as the number of values in the value log grows: loads N values
//! of 1,100 bytes (above the inline limit, so each is a value record with an entry in the
//! segment table's value index), then times 50 commits of 10 overwrites and reports RSS.
//!
//! ```sh
//! cargo run --release -p sprig --example value_index -- 1000000 /path/on/ssd
//! ```
//!
//! Every retained version keeps its own copy of the value index; with a persistent map they
//! share all but the nodes a commit changed, so a small commit costs the same at 200k values
//! as at 1M. (With a `BTreeMap` copied per commit it cost 10 ms at 200k values and 45 ms at 1M
//! on the project's test machine, and RSS grew with the copies.)

use sprig::{Db, Options};
use std::time::Instant;

/// The process's resident set, MiB (Linux; 0 elsewhere).
fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u32 = match args.next() {
        Some(a) => a.parse().map_err(|e| format!("values: {a:?}: {e}"))?,
        None => 200_000,
    };
    let parent = args.next().unwrap_or_else(|| ".".to_string());
    let dir = tempfile::tempdir_in(&parent)?;
    let db = Db::open(
        dir.path(),
        Options {
            page_cache_bytes: 16 << 20,
            ..Options::default()
        },
    )?;
    let started = Instant::now();
    let mut loaded = 0u32;
    while loaded < n {
        let mut batch = db.begin();
        for k in loaded..(loaded + 20_000).min(n) {
            batch.put(db.key_path(&k.to_le_bytes()), vec![k as u8; 1100])?;
        }
        loaded = (loaded + 20_000).min(n);
        db.commit(batch.finish()?)?;
    }
    println!(
        "{n} values loaded in {:.1} s, RSS {} MiB",
        started.elapsed().as_secs_f64(),
        rss_mib()
    );
    let started = Instant::now();
    for c in 0..50u32 {
        let mut batch = db.begin();
        for i in 0..10u32 {
            batch.put(db.key_path(&(c * 10 + i).to_le_bytes()), vec![1u8; 1100])?;
        }
        db.commit(batch.finish()?)?;
    }
    println!(
        "a commit of 10 overwrites: {:.2} ms (mean of 50), RSS {} MiB",
        started.elapsed().as_secs_f64() * 1e3 / 50.0,
        rss_mib()
    );
    Ok(())
}
