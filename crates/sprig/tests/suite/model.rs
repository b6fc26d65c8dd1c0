//! Model-based tests: random sequences of reads, writes, commits, checkpoints and reopens
//! against the reference model, comparing every value, the root, and the witness after every
//! commit. On the in-memory backend, and on the real file system with each I/O backend forced
//! (posix with direct I/O on and off, io_uring required), asserting the backend in use.

use proptest::prelude::*;
use sprig::io::{MemoryStorage, Storage};
use sprig::{Db, Hasher, IoBackend, KeyPath, Options};
use sprig_core::{ReferenceModel, ValueHash};
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, Vec<u8>),
    Delete(usize),
    Get(usize),
    /// Many keys at once (repeats allowed), through `get_many`.
    GetMany(Vec<usize>),
    Commit,
    Checkpoint,
    Clean,
    Reopen,
}

/// A pool of keys: random ones, plus clusters sharing long prefixes (deep tries, page splits
/// far down), plus two keys differing only in the last bit.
fn key_pool(seed: u64, n: usize) -> Vec<KeyPath> {
    let mut keys = Vec::new();
    for i in 0..n {
        let mut k = Hasher::Blake3.hash_value(&(seed, i).0.to_le_bytes());
        k = Hasher::Blake3.hash_value(&[k.as_slice(), &(i as u64).to_le_bytes()].concat());
        if i % 5 == 0 {
            // Share the first 30 bytes with key 0's cluster.
            k[..30].copy_from_slice(&[0xAB; 30]);
        }
        keys.push(k);
    }
    let mut a = [0x11u8; 32];
    a[31] = 0;
    let mut b = a;
    b[31] = 1;
    keys.push(a);
    keys.push(b);
    keys
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 0..48),
        1 => proptest::collection::vec(any::<u8>(), 300..1100),
        1 => (1025usize..6000).prop_map(|n| vec![0x5a; n]),
    ]
}

fn op_strategy(keys: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (0..keys, value_strategy()).prop_map(|(k, v)| Op::Put(k, v)),
        10 => (0..keys).prop_map(Op::Delete),
        8 => (0..keys).prop_map(Op::Get),
        3 => proptest::collection::vec(0..keys, 0..40).prop_map(Op::GetMany),
        6 => Just(Op::Commit),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Clean),
        1 => Just(Op::Reopen),
    ]
}

fn options(hasher: Hasher, cache: u64) -> Options {
    Options {
        hasher: Some(hasher),
        page_cache_bytes: cache,
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 64 << 10,
        ..Options::default()
    }
}

fn check_all(db: &Db, model: &ReferenceModel, keys: &[KeyPath]) {
    let view = db.view();
    assert_eq!(view.root(), model.root(), "root differs from the model");
    assert_eq!(view.len(), model.len() as u64);
    let values = view.get_many(keys).unwrap();
    for (k, v) in keys.iter().zip(values) {
        assert_eq!(v.as_deref(), model.get(k), "value of {k:02x?}");
    }
    let scanned: Vec<(KeyPath, Vec<u8>)> = view.iter().map(|r| r.unwrap()).collect();
    let expected: Vec<(KeyPath, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.to_vec())).collect();
    assert_eq!(scanned, expected, "full scan");
    if let (Some(a), Some(b)) = (keys.first(), keys.get(keys.len() / 2)) {
        let (start, end) = if a < b { (*a, *b) } else { (*b, *a) };
        let ranged: Vec<KeyPath> = view.range(start..end).map(|r| r.unwrap().0).collect();
        let want: Vec<KeyPath> = model
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| *k >= start && *k < end)
            .collect();
        assert_eq!(ranged, want, "range scan");
    }
    let report = db.check(&mut |_, _| {}).unwrap();
    assert!(
        report.is_clean(),
        "check found problems: {:?}",
        report.problems
    );
    assert_eq!(report.entries, model.len() as u64);
    for k in keys.iter().step_by(7) {
        let proof = view.path_proof(k).unwrap();
        proof
            .verify_value(db.hasher(), &view.root(), k, model.get(k))
            .unwrap();
    }
}

/// Where a run's database lives.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// The in-memory backend.
    Memory,
    /// A directory on the real file system, opened with this backend and direct I/O on or off.
    Disk { backend: IoBackend, direct_io: bool },
}

/// A database that can be closed and opened again where it lives.
struct Home {
    options: Options,
    storage: Arc<dyn Storage>,
    disk: Option<(tempfile::TempDir, IoBackend, bool)>,
}

impl Home {
    fn new(place: Place, options: Options) -> Home {
        let disk = match place {
            Place::Memory => None,
            // In the build directory, not /tmp: tmpfs refused O_DIRECT before Linux 6.6.
            Place::Disk { backend, direct_io } => Some((
                tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
                backend,
                direct_io,
            )),
        };
        Home {
            options,
            storage: Arc::new(MemoryStorage::new()),
            disk,
        }
    }

    /// Open the database, and check it runs on the backend asked for.
    fn open(&self) -> Db {
        let Some((dir, backend, direct_io)) = &self.disk else {
            let db = Db::open_with_storage(self.storage.clone(), self.options.clone()).unwrap();
            assert_eq!(db.io_backend().name, "memory");
            return db;
        };
        let options = Options {
            io_backend: *backend,
            direct_io: *direct_io,
            ..self.options.clone()
        };
        let db = Db::open(dir.path(), options).unwrap();
        let io = db.io_backend();
        let name = match backend {
            IoBackend::Posix => "posix",
            IoBackend::IoUring | IoBackend::IoUringRequired => "io_uring",
        };
        assert_eq!(io.name, name, "backend in use: {io}");
        assert_eq!(io.io_uring_refused, None, "backend in use: {io}");
        // Direct I/O is Linux's O_DIRECT; elsewhere it is refused, and says so.
        let direct = *direct_io && cfg!(target_os = "linux");
        assert_eq!(io.direct_io, direct, "backend in use: {io}");
        assert_eq!(
            io.direct_io_refused.is_some(),
            *direct_io && !direct,
            "backend in use: {io}"
        );
        db
    }
}

fn run(ops: Vec<Op>, hasher: Hasher, cache: u64, seed: u64) {
    run_in(Place::Memory, ops, hasher, cache, seed);
}

fn run_in(place: Place, ops: Vec<Op>, hasher: Hasher, cache: u64, seed: u64) {
    let keys = key_pool(seed, 160);
    let home = Home::new(place, options(hasher, cache));
    let mut db = home.open();
    let mut model = ReferenceModel::new(hasher);
    let mut batch = db.begin();
    let mut staged = model.clone();
    let mut changes: Vec<(KeyPath, Option<ValueHash>)> = Vec::new();
    for op in ops {
        match op {
            Op::Put(k, v) => {
                let key = keys[k];
                changes.retain(|(c, _)| *c != key);
                changes.push((key, Some(hasher.hash_value(&v))));
                staged.insert(key, v.clone());
                batch.put(key, v).unwrap();
            }
            Op::Delete(k) => {
                let key = keys[k];
                changes.retain(|(c, _)| *c != key);
                changes.push((key, None));
                staged.remove(&key);
                batch.delete(key);
            }
            Op::Get(k) => {
                let got = batch.get(&keys[k]).unwrap();
                assert_eq!(got.as_deref(), staged.get(&keys[k]), "read-your-writes");
            }
            Op::GetMany(ks) => {
                let asked: Vec<KeyPath> = ks.iter().map(|k| keys[*k]).collect();
                let got = batch.get_many(&asked).unwrap();
                assert_eq!(got.len(), asked.len());
                for (key, value) in asked.iter().zip(&got) {
                    assert_eq!(value.as_deref(), staged.get(key), "read-your-writes, many");
                }
            }
            Op::Commit => {
                let pending = batch.finish().unwrap();
                assert_eq!(pending.root(), staged.root(), "pending root");
                assert_eq!(pending.base_root(), model.root());
                let new_root = sprig_core::proof::verify_block(
                    hasher,
                    &model.root(),
                    pending.witness(),
                    &changes,
                )
                .unwrap();
                assert_eq!(new_root, staged.root(), "witness-derived root");
                db.commit(pending).unwrap();
                model = staged.clone();
                changes.clear();
                check_all(&db, &model, &keys);
                batch = db.begin();
            }
            Op::Checkpoint => {
                drop(batch);
                db.checkpoint().unwrap();
                batch = db.begin();
                staged = model.clone();
                changes.clear();
            }
            Op::Clean => {
                drop(batch);
                db.clean().unwrap();
                check_all(&db, &model, &keys);
                batch = db.begin();
                staged = model.clone();
                changes.clear();
            }
            Op::Reopen => {
                drop(batch);
                drop(db);
                db = home.open();
                check_all(&db, &model, &keys);
                batch = db.begin();
                staged = model.clone();
                changes.clear();
            }
        }
    }
    drop(batch);
    drop(db);
    let db = home.open();
    check_all(&db, &model, &keys);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_the_model_blake3(ops in proptest::collection::vec(op_strategy(162), 1..400), seed in any::<u64>()) {
        run(ops, Hasher::Blake3, 1 << 20, seed);
    }

    #[test]
    fn engine_matches_the_model_sha256_without_cache(ops in proptest::collection::vec(op_strategy(162), 1..300), seed in any::<u64>()) {
        run(ops, Hasher::Sha256, 0, seed);
    }
}

// The same on disk, with the page cache off so that every page read reaches the backend.
// Fewer cases: every commit is synced.
proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_the_model_on_posix_with_direct_io(ops in proptest::collection::vec(op_strategy(162), 1..300), seed in any::<u64>()) {
        let place = Place::Disk { backend: IoBackend::Posix, direct_io: true };
        run_in(place, ops, Hasher::Blake3, 0, seed);
    }

    #[test]
    fn engine_matches_the_model_on_posix_with_buffered_io(ops in proptest::collection::vec(op_strategy(162), 1..300), seed in any::<u64>()) {
        let place = Place::Disk { backend: IoBackend::Posix, direct_io: false };
        run_in(place, ops, Hasher::Keccak256, 0, seed);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn engine_matches_the_model_on_io_uring(ops in proptest::collection::vec(op_strategy(162), 1..300), seed in any::<u64>()) {
        let place = Place::Disk { backend: IoBackend::IoUringRequired, direct_io: true };
        run_in(place, ops, Hasher::Blake3, 0, seed);
    }
}

/// A `get_many` large enough to be spread over every core answers what one `get` per key
/// answers, for keys stored, absent, put, deleted, upserted (resolved), large (in the value
/// log) and repeated.
#[test]
fn get_many_on_every_core_equals_one_get_per_key() {
    use sprig::TableOptions;
    let db = Db::open_in_memory(Options {
        page_cache_bytes: 0,
        ..Options::default()
    })
    .unwrap();
    let key = |i: u64| db.key_path(&i.to_le_bytes());
    let value = |i: u64| {
        if i.is_multiple_of(97) {
            vec![i as u8; 1500] // in the value log
        } else {
            i.to_le_bytes().to_vec()
        }
    };
    let stored: Vec<(KeyPath, Vec<u8>)> = (0..6000).map(|i| (key(i), value(i))).collect();
    db.bulk_load(stored.iter().cloned(), &mut |_| {}).unwrap();
    let counters = db
        .create_table("counters", TableOptions::resolver("add-u64"))
        .unwrap();
    let mut batch = db.begin();
    for i in 0..3000u64 {
        batch.put_in(&counters, key(i), i.to_le_bytes()).unwrap();
    }
    db.commit(batch.finish().unwrap()).unwrap();

    let mut batch = db.begin();
    for i in (0..6000u64).step_by(7) {
        batch.put(key(i), b"changed".to_vec()).unwrap();
    }
    for i in (3..6000u64).step_by(11) {
        batch.delete(key(i));
    }
    for i in (0..4000u64).step_by(5) {
        batch
            .upsert_in(&counters, key(i), 1u64.to_le_bytes())
            .unwrap();
    }
    // Present, absent (6000..9000) and every key twice.
    let asked: Vec<KeyPath> = (0..9000u64).chain(0..9000).map(key).collect();
    for table in [sprig::Table::default_table(), counters.clone()] {
        let many = batch.get_many_in(&table, &asked).unwrap();
        let one: Vec<Option<Vec<u8>>> = asked
            .iter()
            .map(|k| batch.get_in(&table, k).unwrap())
            .collect();
        assert_eq!(many.len(), asked.len());
        assert!(
            many == one,
            "get_many disagrees with get in table {}",
            table.name()
        );
        assert!(many.iter().filter(|v| v.is_some()).count() > 2000);
    }
    // Keys the batch has located already (asked above) between keys it has not (absent ones,
    // whose regions' pages it holds).
    let fresh_db = |i: u64| db.key_path(&(i + 1_000_000).to_le_bytes());
    let mixed: Vec<KeyPath> = (0..9000u64).flat_map(|i| [key(i), fresh_db(i)]).collect();
    let many = batch.get_many(&mixed).unwrap();
    let one: Vec<Option<Vec<u8>>> = mixed.iter().map(|k| batch.get(k).unwrap()).collect();
    assert!(
        many == one,
        "get_many disagrees with get over known and new keys"
    );
    // Keys the batch put are answered from the batch: their stored values (here in the value
    // log) are not read.
    let overwritten: Vec<KeyPath> = (0..6000u64)
        .filter(|i| i.is_multiple_of(97) && i.is_multiple_of(7))
        .map(key)
        .collect();
    let before = db.stats().value_reads;
    let got = batch.get_many(&overwritten).unwrap();
    assert!(got.iter().all(|v| v.as_deref() == Some(&b"changed"[..])));
    assert_eq!(
        db.stats().value_reads,
        before,
        "values read for keys the batch put"
    );
    // Every key asked joined the witness.
    let pending = batch.finish().unwrap();
    assert_eq!(pending.witness().keys.len(), 18000);
}
