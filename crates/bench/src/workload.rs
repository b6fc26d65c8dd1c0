//! The three workloads and their deterministic generators: which entries `create` loads and
//! which operations each batch of `run` performs, as a function of the seed, the batch number
//! and the persisted workload state only (never of the engine, the clock or the machine).
//!
//! Entries are numbered; entry `i` has a key path and an initial value derived from `i` alone,
//! so a database of N entries is the same for every engine. The live entries always form a
//! range `[lo, hi)`: fresh entries are appended at `hi`, deletes take the oldest at `lo` (their
//! key paths are hashes, so deletes still land uniformly over the key space).

use crate::cli::WorkloadKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sprig::core::{key_path_of, Hasher};
use sprig::KeyPath;

/// Transfers per committed workload in NOMT's benchmark.
pub const TRANSFERS_PER_BATCH: usize = 25_000;
/// Lookups (and inserts, and deletes) per batch in lsm-tree's utxo benchmark.
pub const UTXO_BATCH: usize = 256;
/// Transactions per committed block in the mixed workload.
pub const MIXED_TXS_PER_BLOCK: usize = 1_000;
/// Account values (a u64 balance) in bytes.
pub const TRANSFER_VALUE_BYTES: usize = 8;
/// utxo keys before hashing to a key path, in bytes.
pub const UTXO_KEY_BYTES: usize = 34;
/// utxo values in bytes.
pub const UTXO_VALUE_BYTES: usize = 60;
/// mixed values in bytes.
pub const MIXED_VALUE_BYTES: usize = 32;
/// The balance every account starts with.
const INITIAL_BALANCE: u64 = 1_000_000_000;
/// Reads, updates, creates and deletes of one mixed transaction (QMDB's mix).
const MIXED_READS: usize = 15;
const MIXED_UPDATES: usize = 9;
/// State updates per mixed transaction (updates + create + delete), QMDB's normalisation.
pub const MIXED_UPDATES_PER_TX: u64 = 11;

/// One operation of a batch, applied in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read a key (its result is part of what `--check` compares).
    Read(KeyPath),
    /// Read a balance (absent = 0) and write it back changed by `delta` (a transfer leg).
    Add(KeyPath, i64),
    /// Set a key to a value.
    Put(KeyPath, Vec<u8>),
    /// Remove a key.
    Delete(KeyPath),
}

/// What a database was created with, and how far runs have advanced it. Persisted next to each
/// engine's database, so repeated runs continue the same deterministic sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadState {
    /// The workload the database was created for.
    pub workload: WorkloadKind,
    /// Entries loaded by `create`.
    pub entries: u64,
    /// The seed of every generator.
    pub seed: u64,
    /// The oldest live entry.
    pub lo: u64,
    /// One past the newest entry.
    pub hi: u64,
    /// Batches run so far.
    pub batches_done: u64,
    /// The root after `create` (hex), if the engine has one.
    pub created_root: Option<String>,
}

impl WorkloadState {
    /// The state of a database just created with `entries` entries.
    pub fn new(workload: WorkloadKind, entries: u64, seed: u64) -> Self {
        WorkloadState {
            workload,
            entries,
            seed,
            lo: 0,
            hi: entries,
            batches_done: 0,
            created_root: None,
        }
    }

    /// The live entries now.
    pub fn live(&self) -> u64 {
        self.hi - self.lo
    }
}

/// The parameters of `run` that shape the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunShape {
    /// transfer: the share of target accounts that are fresh, in percent.
    pub fresh_pct: u8,
    /// Transfers, utxo lookups or mixed transactions per batch.
    pub batch: usize,
}

impl WorkloadKind {
    /// The default batch size (see [`RunShape::batch`]).
    pub fn default_batch(self) -> usize {
        match self {
            WorkloadKind::Transfer => TRANSFERS_PER_BATCH,
            WorkloadKind::Utxo => UTXO_BATCH,
            WorkloadKind::Mixed => MIXED_TXS_PER_BLOCK,
        }
    }

    /// The unit throughput is counted in.
    pub fn unit(self) -> &'static str {
        match self {
            WorkloadKind::Transfer => "transfers",
            WorkloadKind::Utxo => "ops",
            WorkloadKind::Mixed => "updates",
        }
    }

    /// Units of throughput per batch: transfers; lookups + inserts + deletes; or transactions
    /// × state updates per transaction (QMDB's normalisation).
    pub fn units_per_batch(self, batch: usize) -> u64 {
        let b = batch as u64;
        match self {
            WorkloadKind::Transfer => b,
            WorkloadKind::Utxo => 3 * b,
            WorkloadKind::Mixed => b * MIXED_UPDATES_PER_TX,
        }
    }

    /// Key bytes before hashing and value bytes.
    pub fn sizes(self) -> (usize, usize) {
        match self {
            WorkloadKind::Transfer => (32, TRANSFER_VALUE_BYTES),
            WorkloadKind::Utxo => (UTXO_KEY_BYTES, UTXO_VALUE_BYTES),
            WorkloadKind::Mixed => (32, MIXED_VALUE_BYTES),
        }
    }
}

/// A 32-byte hash of a tag, a number and a salt (BLAKE3, as everything else here).
fn hash_of(tag: &[u8; 4], i: u64, salt: u64) -> [u8; 32] {
    let mut buf = [0u8; 20];
    buf[..4].copy_from_slice(tag);
    buf[4..12].copy_from_slice(&i.to_le_bytes());
    buf[12..].copy_from_slice(&salt.to_le_bytes());
    key_path_of(Hasher::Blake3, &buf)
}

/// The key path of entry `i`.
pub fn key_of(workload: WorkloadKind, seed: u64, i: u64) -> KeyPath {
    match workload {
        WorkloadKind::Transfer => hash_of(b"acct", i, seed),
        WorkloadKind::Mixed => hash_of(b"mixd", i, seed),
        WorkloadKind::Utxo => {
            // A uniformly spread 34-byte key (a transaction id and an output index), hashed
            // to its key path as a user of a Merkle store would.
            let mut raw = [0u8; UTXO_KEY_BYTES];
            raw[..32].copy_from_slice(&hash_of(b"utxo", i, seed));
            raw[32..].copy_from_slice(&((i % 65_536) as u16).to_le_bytes());
            key_path_of(Hasher::Blake3, &raw)
        }
    }
}

/// A value of `len` bytes derived from `(tag, i, salt)`.
fn value_bytes(tag: &[u8; 4], i: u64, salt: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut round = 0u64;
    while out.len() < len {
        let h = hash_of(tag, i, salt ^ round.rotate_left(32));
        let take = (len - out.len()).min(h.len());
        out.extend_from_slice(&h[..take]);
        round += 1;
    }
    out
}

/// The value entry `i` is created with.
pub fn initial_value(workload: WorkloadKind, seed: u64, i: u64) -> Vec<u8> {
    match workload {
        WorkloadKind::Transfer => INITIAL_BALANCE.to_le_bytes().to_vec(),
        WorkloadKind::Utxo => value_bytes(b"uval", i, seed, UTXO_VALUE_BYTES),
        WorkloadKind::Mixed => value_bytes(b"mval", i, seed, MIXED_VALUE_BYTES),
    }
}

/// Every entry of a new database, in entry order.
pub fn initial_entries(
    workload: WorkloadKind,
    seed: u64,
    entries: u64,
) -> impl Iterator<Item = (KeyPath, Vec<u8>)> {
    (0..entries).map(move |i| (key_of(workload, seed, i), initial_value(workload, seed, i)))
}

/// The generator of batches for one run.
pub struct Generator {
    state: WorkloadState,
    shape: RunShape,
}

impl Generator {
    /// A generator continuing from `state`.
    pub fn new(state: WorkloadState, shape: RunShape) -> Self {
        Generator { state, shape }
    }

    /// The state after the batches generated so far.
    pub fn state(&self) -> &WorkloadState {
        &self.state
    }

    /// The operations of the next batch; advances the state.
    pub fn next_batch(&mut self) -> Vec<Op> {
        let s = &self.state;
        let mut rng = ChaCha8Rng::seed_from_u64(
            s.seed ^ (s.batches_done.wrapping_add(1)).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        let ops = match s.workload {
            WorkloadKind::Transfer => self.transfers(&mut rng),
            WorkloadKind::Utxo => self.utxo(&mut rng),
            WorkloadKind::Mixed => self.mixed(&mut rng),
        };
        self.state.batches_done += 1;
        ops
    }

    fn random_live(&self, rng: &mut ChaCha8Rng) -> KeyPath {
        let s = &self.state;
        key_of(s.workload, s.seed, rng.gen_range(s.lo..s.hi))
    }

    fn fresh(&mut self) -> (u64, KeyPath) {
        let i = self.state.hi;
        self.state.hi += 1;
        (i, key_of(self.state.workload, self.state.seed, i))
    }

    fn oldest(&mut self) -> KeyPath {
        let i = self.state.lo;
        self.state.lo += 1;
        key_of(self.state.workload, self.state.seed, i)
    }

    /// NOMT's transfer: debit a random account, credit a random or (with the fresh share) a
    /// new one.
    fn transfers(&mut self, rng: &mut ChaCha8Rng) -> Vec<Op> {
        let mut ops = Vec::with_capacity(2 * self.shape.batch);
        for _ in 0..self.shape.batch {
            let amount = rng.gen_range(1..=100i64);
            let from = self.random_live(rng);
            let to = if rng.gen_range(0..100u8) < self.shape.fresh_pct {
                self.fresh().1
            } else {
                self.random_live(rng)
            };
            ops.push(Op::Add(from, -amount));
            ops.push(Op::Add(to, amount));
        }
        ops
    }

    /// lsm-tree's utxo batch: lookups of present keys, then inserts of fresh keys and deletes
    /// of present ones.
    fn utxo(&mut self, rng: &mut ChaCha8Rng) -> Vec<Op> {
        let n = self.shape.batch;
        let mut ops = Vec::with_capacity(3 * n);
        for _ in 0..n {
            ops.push(Op::Read(self.random_live(rng)));
        }
        for _ in 0..n {
            let (i, key) = self.fresh();
            ops.push(Op::Put(
                key,
                value_bytes(b"unew", i, self.state.seed, UTXO_VALUE_BYTES),
            ));
            if self.state.live() > 1 {
                ops.push(Op::Delete(self.oldest()));
            }
        }
        ops
    }

    /// QMDB's transaction mix: 15 reads, 9 updates, 1 create, 1 delete.
    fn mixed(&mut self, rng: &mut ChaCha8Rng) -> Vec<Op> {
        let per_tx = MIXED_READS + MIXED_UPDATES + 2;
        let mut ops = Vec::with_capacity(per_tx * self.shape.batch);
        for _ in 0..self.shape.batch {
            for _ in 0..MIXED_READS {
                ops.push(Op::Read(self.random_live(rng)));
            }
            for _ in 0..MIXED_UPDATES {
                let key = self.random_live(rng);
                let mut value = vec![0u8; MIXED_VALUE_BYTES];
                rng.fill(&mut value[..]);
                ops.push(Op::Put(key, value));
            }
            let (i, key) = self.fresh();
            ops.push(Op::Put(
                key,
                value_bytes(b"mnew", i, self.state.seed, MIXED_VALUE_BYTES),
            ));
            if self.state.live() > 1 {
                ops.push(Op::Delete(self.oldest()));
            }
        }
        ops
    }
}

/// Decode a balance (absent or malformed: 0) and apply a transfer leg.
pub fn add_balance(current: Option<&[u8]>, delta: i64) -> Vec<u8> {
    balance_after(current, delta).to_vec()
}

/// [`add_balance`] in place: a balance of eight bytes is overwritten, anything else replaced.
pub fn add_balance_in(value: &mut Option<Vec<u8>>, delta: i64) {
    let after = balance_after(value.as_deref(), delta);
    match value {
        Some(v) if v.len() == after.len() => v.copy_from_slice(&after),
        _ => *value = Some(after.to_vec()),
    }
}

fn balance_after(current: Option<&[u8]>, delta: i64) -> [u8; 8] {
    let balance = current
        .and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0);
    balance.wrapping_add_signed(delta).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_balance_changed_in_place_equals_a_new_one() {
        for current in [
            None,
            Some(vec![]),
            Some(vec![1, 2, 3]),
            Some(5u64.to_le_bytes().to_vec()),
        ] {
            for delta in [-7i64, 0, 9] {
                let mut value = current.clone();
                add_balance_in(&mut value, delta);
                assert_eq!(value, Some(add_balance(current.as_deref(), delta)));
            }
        }
    }

    #[test]
    fn batches_are_a_function_of_seed_and_state() {
        let state = WorkloadState::new(WorkloadKind::Mixed, 1000, 7);
        let shape = RunShape {
            fresh_pct: 0,
            batch: 10,
        };
        let mut a = Generator::new(state.clone(), shape);
        let mut b = Generator::new(state, shape);
        assert_eq!(a.next_batch(), b.next_batch());
        let second = a.next_batch();
        // A generator resumed from the persisted state continues the same sequence.
        let mut c = Generator::new(b.state().clone(), shape);
        assert_eq!(c.next_batch(), second);
        assert_eq!(a.state(), c.state());
        assert_eq!(a.state().live(), 1000);
    }

    #[test]
    fn utxo_batches_keep_the_live_count() {
        let state = WorkloadState::new(WorkloadKind::Utxo, 5000, 1);
        let shape = RunShape {
            fresh_pct: 0,
            batch: UTXO_BATCH,
        };
        let mut g = Generator::new(state, shape);
        let ops = g.next_batch();
        assert_eq!(ops.len(), 3 * UTXO_BATCH);
        assert_eq!(g.state().live(), 5000);
    }

    #[test]
    fn balances_wrap_instead_of_failing() {
        assert_eq!(add_balance(None, 5), 5u64.to_le_bytes().to_vec());
        assert_eq!(
            add_balance(Some(&[1, 2]), -1),
            u64::MAX.to_le_bytes().to_vec()
        );
    }
}
