//! Tables against the reference model extended with tables (`sprig_core::TablesModel`):
//! random creates, drops, puts, deletes, upserts (two resolvers) and gets across several
//! tables, interleaved with commits, checkpoints, cleaning, reopens and rollbacks; after every
//! commit every table's root, the database root, every value, every table's scan and table
//! proofs under the database root are compared with the model. Unions, immediate and
//! incremental, join the mix: an incremental union's table serves every lookup from the start,
//! refuses writes, roots, scans and proofs until its steps complete it, and stays out of the
//! database root until then. Plus the API's edges: errors
//! for unknown tables, stale handles, missing resolvers, and the default table's root being
//! the single-table root.

use proptest::prelude::*;
use sprig::io::{MemoryStorage, Storage};
use sprig::{Db, Error, Hasher, KeyPath, Options, Table, TableOptions};
use sprig_core::{TablesModel, DEFAULT_TABLE};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The tables a run may create, with their resolvers (the last two are also union outputs).
const TABLES: [(&str, Option<&str>); 6] = [
    (DEFAULT_TABLE, None),
    ("balances", Some("add-u64")),
    ("logs", Some("concat")),
    ("plain", None),
    ("merged", Some("concat")),
    ("left", None),
];
/// The first table that can be a union's output.
const FIRST_OUTPUT: usize = 4;

/// The incremental unions in progress: by table, the input entries of each key still to
/// merge, in key order.
type Unions = BTreeMap<String, VecDeque<u64>>;

#[derive(Debug, Clone)]
enum Op {
    Create(usize),
    Drop(usize),
    Put(usize, usize, Vec<u8>),
    Delete(usize, usize),
    Upsert(usize, usize, Vec<u8>),
    Get(usize, usize),
    Union {
        out: usize,
        inputs: Vec<usize>,
        incremental: bool,
    },
    Supply(usize, u64),
    Commit,
    Checkpoint,
    Clean,
    Reopen,
    Rollback(u64),
}

fn keys(n: usize) -> Vec<KeyPath> {
    (0..n)
        .map(|i| {
            let mut k = Hasher::Blake3.hash_value(&(i as u64).to_le_bytes());
            if i % 4 == 0 {
                k[..28].copy_from_slice(&[0x5c; 28]);
            }
            k
        })
        .collect()
}

fn value_for(table: usize) -> BoxedStrategy<Vec<u8>> {
    match TABLES[table].1 {
        Some("add-u64") => (0u64..1000).prop_map(|v| v.to_le_bytes().to_vec()).boxed(),
        _ => prop_oneof![
            8 => proptest::collection::vec(any::<u8>(), 0..40),
            1 => (1100usize..3000).prop_map(|n| vec![0x42; n]),
        ]
        .boxed(),
    }
}

fn op_strategy(nkeys: usize) -> impl Strategy<Value = Op> {
    let t = 0..TABLES.len();
    prop_oneof![
        2 => (1..TABLES.len()).prop_map(Op::Create),
        1 => (1..TABLES.len()).prop_map(Op::Drop),
        20 => (t.clone(), 0..nkeys).prop_flat_map(|(t, k)| value_for(t).prop_map(move |v| Op::Put(t, k, v))),
        6 => (t.clone(), 0..nkeys).prop_map(|(t, k)| Op::Delete(t, k)),
        14 => (t.clone(), 0..nkeys).prop_flat_map(|(t, k)| value_for(t).prop_map(move |v| Op::Upsert(t, k, v))),
        6 => (t.clone(), 0..nkeys).prop_map(|(t, k)| Op::Get(t, k)),
        2 => (FIRST_OUTPUT..TABLES.len(), proptest::collection::vec(t, 1..4), any::<bool>())
            .prop_map(|(out, inputs, incremental)| Op::Union { out, inputs, incremental }),
        4 => (FIRST_OUTPUT..TABLES.len(), 1u64..120).prop_map(|(t, n)| Op::Supply(t, n)),
        6 => Just(Op::Commit),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Clean),
        1 => Just(Op::Reopen),
        1 => (0u64..4).prop_map(Op::Rollback),
    ]
}

fn options() -> Options {
    Options {
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 32 << 10,
        page_cache_bytes: 256 << 10,
        retained_versions: 4,
        ..Options::default()
    }
}

fn resolve(table: usize, old: Option<&[u8]>, new: &[u8]) -> Vec<u8> {
    let Some(old) = old else {
        return new.to_vec();
    };
    match TABLES[table].1 {
        Some("add-u64") => {
            let a = u64::from_le_bytes(old.try_into().unwrap());
            let b = u64::from_le_bytes(new.try_into().unwrap());
            a.saturating_add(b).to_le_bytes().to_vec()
        }
        Some("concat") => [old, new].concat(),
        _ => unreachable!("no resolver"),
    }
}

/// Compare everything the database says about its latest version with the model.
fn check(db: &Db, model: &TablesModel, unions: &Unions, keys: &[KeyPath]) {
    let view = db.view();
    for info in view.tables() {
        let want = unions.get(info.table.name()).map(|g| g.iter().sum::<u64>());
        assert_eq!(info.union_debt, want, "union debt of {}", info.table.name());
        assert_eq!(model.is_pending(info.table.name()), want.is_some());
    }
    assert_eq!(view.db_root(), model.root(), "database root");
    let names: Vec<String> = view
        .tables()
        .iter()
        .map(|t| t.table.name().to_string())
        .collect();
    let mut want: Vec<String> = model.names().map(String::from).collect();
    want.sort();
    let mut got = names.clone();
    got.sort();
    assert_eq!(got, want, "tables");
    assert_eq!(names[0], DEFAULT_TABLE, "the default table comes first");
    for name in model.names() {
        let table = view.table(name).unwrap();
        let m = model.table(name).unwrap();
        if model.is_pending(name) {
            // Lookups only, served from the merged part and the inputs.
            let values = view.get_many_in(&table, keys).unwrap();
            for (k, v) in keys.iter().zip(values) {
                assert_eq!(v.as_deref(), m.get(k), "{name} (union): value of {k:02x?}");
            }
            for k in keys.iter().step_by(7) {
                assert_eq!(view.get_in(&table, k).unwrap().as_deref(), m.get(k));
            }
            macro_rules! pending {
                ($r:expr) => {
                    assert!(matches!($r, Err(Error::UnionInProgress { .. })))
                };
            }
            pending!(view.table_root(&table));
            pending!(view.len_in(&table));
            pending!(view.table_proof(&table, &keys[0]));
            assert!(matches!(
                view.iter_in(&table).next(),
                Some(Err(Error::UnionInProgress { .. }))
            ));
            continue;
        }
        assert_eq!(view.table_root(&table).unwrap(), m.root(), "root of {name}");
        assert_eq!(
            view.len_in(&table).unwrap(),
            m.len() as u64,
            "len of {name}"
        );
        let values = view.get_many_in(&table, keys).unwrap();
        for (k, v) in keys.iter().zip(values) {
            assert_eq!(v.as_deref(), m.get(k), "{name}: value of {k:02x?}");
        }
        let scanned: Vec<(KeyPath, Vec<u8>)> = view.iter_in(&table).map(|r| r.unwrap()).collect();
        let expected: Vec<(KeyPath, Vec<u8>)> = m.iter().map(|(k, v)| (*k, v.to_vec())).collect();
        assert_eq!(scanned, expected, "scan of {name}");
        for k in keys.iter().step_by(5) {
            let proof = view.table_proof(&table, k).unwrap();
            proof
                .verify_value(db.hasher(), &view.db_root(), name, k, m.get(k))
                .unwrap();
            assert_eq!(&proof, &model.table_proof(name, k).unwrap());
        }
    }
    assert_eq!(view.root(), model.table(DEFAULT_TABLE).unwrap().root());
    let report = db.check(&mut |_, _| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

fn run(ops: Vec<Op>) {
    let keys = keys(NKEYS);
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let open = || Db::open_with_storage(storage.clone(), options()).unwrap();
    let mut db = open();
    let hasher = db.hasher();
    let mut committed = TablesModel::new(hasher);
    let mut unions = Unions::new();
    // Committed states of the retained versions, by sequence number.
    let mut history: BTreeMap<u64, (TablesModel, Unions)> = BTreeMap::new();
    history.insert(db.seq(), (committed.clone(), unions.clone()));
    let mut staged = committed.clone();
    let mut batch = db.begin();
    let handle = |db: &Db, t: usize| -> Option<Table> { db.table(TABLES[t].0).ok() };
    macro_rules! commit {
        () => {{
            let pending = std::mem::replace(&mut batch, db.begin()).finish().unwrap();
            assert_eq!(pending.db_root(), staged.root(), "overlay database root");
            let info = db.commit(pending).unwrap();
            assert_eq!(info.db_root, staged.root());
            committed = staged.clone();
            history.insert(info.seq, (committed.clone(), unions.clone()));
            check(&db, &committed, &unions, &keys);
        }};
    }
    // Whether a write went to a table a union is filling (then it must have been refused).
    let refused = |pending: bool, r: Result<(), Error>| {
        if pending {
            assert!(matches!(r, Err(Error::UnionInProgress { .. })), "{r:?}");
        }
        pending
    };
    for op in ops {
        let pending_tables: Vec<bool> = TABLES.iter().map(|(n, _)| staged.is_pending(n)).collect();
        let pending = |t: usize| pending_tables[t];
        match op {
            Op::Create(t) => {
                commit!();
                let (name, resolver) = TABLES[t];
                let r = db.create_table(
                    name,
                    TableOptions {
                        resolver: resolver.map(String::from),
                    },
                );
                if staged.create(name) {
                    r.unwrap();
                    committed = staged.clone();
                    history.insert(db.seq(), (committed.clone(), unions.clone()));
                } else {
                    assert!(matches!(r, Err(Error::TableExists(_))), "{r:?}");
                }
                batch = db.begin();
            }
            Op::Drop(t) => {
                commit!();
                let r = db.drop_table(TABLES[t].0);
                if staged.drop_table(TABLES[t].0) {
                    unions.remove(TABLES[t].0);
                    let info = r.unwrap();
                    assert_eq!(info.db_root, staged.root());
                    committed = staged.clone();
                    history.insert(db.seq(), (committed.clone(), unions.clone()));
                } else {
                    assert!(matches!(r, Err(Error::NoSuchTable(_))), "{r:?}");
                }
                batch = db.begin();
            }
            Op::Put(t, k, v) => match (handle(&db, t), staged.table_mut(TABLES[t].0)) {
                (Some(h), Some(_)) if refused(pending(t), batch.put_in(&h, keys[k], v.clone())) => {
                }
                (Some(_), Some(m)) => {
                    m.insert(keys[k], v);
                }
                (None, None) => {}
                other => panic!("handle and model disagree: {:?}", other.0),
            },
            Op::Delete(t, k) => match (handle(&db, t), staged.table_mut(TABLES[t].0)) {
                (Some(h), Some(_)) if refused(pending(t), batch.delete_in(&h, keys[k])) => {}
                (Some(_), Some(m)) => {
                    m.remove(&keys[k]);
                }
                (None, None) => {}
                other => panic!("handle and model disagree: {:?}", other.0),
            },
            Op::Upsert(t, k, v) => match (handle(&db, t), staged.table_mut(TABLES[t].0)) {
                (Some(h), Some(m)) => {
                    let r = batch.upsert_in(&h, keys[k], v.clone());
                    if pending(t) {
                        assert!(matches!(r, Err(Error::UnionInProgress { .. })), "{r:?}");
                    } else if TABLES[t].1.is_none() {
                        assert!(matches!(r, Err(Error::NoResolver(_))), "{r:?}");
                    } else {
                        r.unwrap();
                        let new = resolve(t, m.get(&keys[k]), &v);
                        m.insert(keys[k], new);
                    }
                }
                (None, None) => {}
                other => panic!("handle and model disagree: {:?}", other.0),
            },
            Op::Get(t, k) => match (handle(&db, t), staged.table(TABLES[t].0)) {
                (Some(h), Some(_)) if staged.is_pending(TABLES[t].0) => {
                    let r = batch.get_in(&h, &keys[k]);
                    assert!(matches!(r, Err(Error::UnionInProgress { .. })), "{r:?}");
                }
                (Some(h), Some(m)) => {
                    let got = batch.get_in(&h, &keys[k]).unwrap();
                    assert_eq!(got.as_deref(), m.get(&keys[k]), "batch get");
                }
                (None, None) => {}
                other => panic!("handle and model disagree: {:?}", other.0),
            },
            Op::Union {
                out,
                inputs,
                incremental,
            } => {
                commit!();
                'op: {
                    let Some(handles) = inputs
                        .iter()
                        .map(|t| handle(&db, *t))
                        .collect::<Option<Vec<Table>>>()
                    else {
                        break 'op;
                    };
                    let refs: Vec<&Table> = handles.iter().collect();
                    let (name, resolver) = TABLES[out];
                    let options = TableOptions {
                        resolver: resolver.map(String::from),
                    };
                    let r = if incremental {
                        db.start_union(name, &refs, options)
                    } else {
                        db.union(name, &refs, options)
                    };
                    if inputs.iter().any(|t| staged.is_pending(TABLES[*t].0)) {
                        assert!(matches!(r, Err(Error::UnionInProgress { .. })), "{r:?}");
                        break 'op;
                    }
                    if staged.table(name).is_some() {
                        assert!(matches!(r, Err(Error::TableExists(_))), "{r:?}");
                        break 'op;
                    }
                    let (_, info) = r.unwrap();
                    // The model's union: every key, values combined in input order, and how many
                    // input entries each key has.
                    let mut content: BTreeMap<KeyPath, (Vec<u8>, u64)> = BTreeMap::new();
                    for t in &inputs {
                        for (k, v) in staged.table(TABLES[*t].0).unwrap().iter() {
                            let e = content.entry(*k).or_insert((Vec::new(), 0));
                            e.0 = if e.1 == 0 {
                                v.to_vec()
                            } else if resolver.is_some() {
                                resolve(out, Some(&e.0), v)
                            } else {
                                e.0.clone()
                            };
                            e.1 += 1;
                        }
                    }
                    staged.create(name);
                    let m = staged.table_mut(name).unwrap();
                    for (k, (v, _)) in &content {
                        m.insert(*k, v.clone());
                    }
                    if incremental && !content.is_empty() {
                        staged.set_pending(name, true);
                        unions.insert(
                            name.to_string(),
                            content.values().map(|(_, n)| *n).collect(),
                        );
                    }
                    committed = staged.clone();
                    assert_eq!(info.db_root, committed.root());
                    history.insert(db.seq(), (committed.clone(), unions.clone()));
                    check(&db, &committed, &unions, &keys);
                }
                batch = db.begin();
            }
            Op::Supply(t, n) => {
                commit!();
                'op: {
                    let Some(h) = handle(&db, t) else {
                        break 'op;
                    };
                    let work = db.supply_union_work(&h, n).unwrap();
                    let Some(groups) = unions.get_mut(TABLES[t].0) else {
                        assert_eq!((work.merged, work.remaining), (0, 0));
                        assert!(work.commit.is_none());
                        break 'op;
                    };
                    let mut merged = 0;
                    while merged < n {
                        let Some(c) = groups.pop_front() else { break };
                        merged += c;
                    }
                    assert_eq!(work.merged, merged, "entries merged by a step");
                    assert_eq!(work.remaining, groups.iter().sum::<u64>(), "union debt");
                    assert_eq!(db.remaining_union_debt(&h).unwrap(), work.remaining);
                    if groups.is_empty() {
                        unions.remove(TABLES[t].0);
                        staged.set_pending(TABLES[t].0, false);
                    }
                    committed = staged.clone();
                    assert_eq!(work.commit.unwrap().db_root, committed.root());
                    history.insert(db.seq(), (committed.clone(), unions.clone()));
                    check(&db, &committed, &unions, &keys);
                }
                batch = db.begin();
            }
            Op::Commit => {
                commit!();
                batch = db.begin();
            }
            Op::Checkpoint => {
                commit!();
                db.checkpoint().unwrap();
                batch = db.begin();
            }
            Op::Clean => {
                commit!();
                db.clean().unwrap();
                check(&db, &committed, &unions, &keys);
                history.insert(db.seq(), (committed.clone(), unions.clone()));
                batch = db.begin();
            }
            Op::Reopen => {
                drop(batch);
                staged = committed.clone();
                drop(db);
                db = open();
                check(&db, &committed, &unions, &keys);
                batch = db.begin();
            }
            Op::Rollback(back) => {
                commit!();
                let target = db.seq().saturating_sub(back);
                match history.get(&target).cloned() {
                    Some((state, u)) if db.versions().iter().any(|(s, _)| *s == target) => {
                        let info = db.rollback_to(target).unwrap();
                        assert_eq!(info.db_root, state.root());
                        committed = state;
                        unions = u;
                        staged = committed.clone();
                        history.insert(db.seq(), (committed.clone(), unions.clone()));
                        check(&db, &committed, &unions, &keys);
                    }
                    _ => {}
                }
                batch = db.begin();
            }
        }
    }
    commit!();
    drop(batch);
    drop(db);
    let db = open();
    check(&db, &committed, &unions, &keys);
}

const NKEYS: usize = 160;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn tables_match_the_model(ops in proptest::collection::vec(op_strategy(NKEYS), 1..300)) {
        run(ops);
    }
}

/// Enough data in three tables to fill many segments, rewritten until the cleaner relocates
/// pages and large values of every table (it finds each live page's table by its directory);
/// then a rollback across a drop, and a reopen.
#[test]
fn cleaning_moves_every_tables_pages_and_values() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let opts = || Options {
        max_space_amplification: 1.3,
        ..options()
    };
    let db = Db::open_with_storage(storage.clone(), opts()).unwrap();
    let mut model = TablesModel::new(db.hasher());
    let a = db.create_table("a", TableOptions::default()).unwrap();
    let c = db
        .create_table("c", TableOptions::resolver("concat"))
        .unwrap();
    model.create("a");
    model.create("c");
    let d = Table::default_table();
    let keys = keys(600);
    for round in 0..12u8 {
        let mut b = db.begin();
        for (i, k) in keys.iter().enumerate() {
            if !(i + round as usize).is_multiple_of(3) {
                continue;
            }
            let big = i % 40 == 0;
            let v = if big {
                vec![round; 1500]
            } else {
                vec![round; 1 + i % 30]
            };
            for (t, name) in [(&d, DEFAULT_TABLE), (&a, "a")] {
                b.put_in(t, *k, v.clone()).unwrap();
                model.table_mut(name).unwrap().insert(*k, v.clone());
            }
            if i % 7 == 0 {
                b.upsert_in(&c, *k, vec![round]).unwrap();
                let m = model.table_mut("c").unwrap();
                let new = [m.get(k).unwrap_or_default(), &[round][..]].concat();
                m.insert(*k, new);
            }
        }
        db.commit(b.finish().unwrap()).unwrap();
    }
    while db.clean().unwrap().is_some() {}
    let stats = db.stats();
    assert!(
        stats.cleaner_pages_copied > 0,
        "the cleaner moved no page: {stats:?}"
    );
    assert!(
        stats.cleaner_values_copied > 0,
        "the cleaner moved no value: {stats:?}"
    );
    check(&db, &model, &Unions::new(), &keys);
    let seq = db.seq();
    let kept = model.clone();
    db.drop_table("a").unwrap();
    model.drop_table("a");
    check(&db, &model, &Unions::new(), &keys);
    db.rollback_to(seq).unwrap();
    check(&db, &kept, &Unions::new(), &keys);
    drop(db);
    let db = Db::open_with_storage(storage, opts()).unwrap();
    check(&db, &kept, &Unions::new(), &keys);
}

/// A database that never creates a table has the single-table root: the default table's
/// root is the reference model's root of its entries, and the database root commits to it.
#[test]
fn the_default_table_keeps_the_single_table_root() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut model = sprig_core::ReferenceModel::new(db.hasher());
    let mut b = db.begin();
    for i in 0..500u64 {
        let k = db.key_path(&i.to_le_bytes());
        b.put(k, i.to_be_bytes()).unwrap();
        model.insert(k, i.to_be_bytes().to_vec());
    }
    let info = db.commit(b.finish().unwrap()).unwrap();
    assert_eq!(info.root, model.root());
    assert_eq!(db.root(), model.root());
    assert_eq!(
        info.db_root,
        sprig_core::database_root(db.hasher(), [(DEFAULT_TABLE, model.root())])
    );
    // Creating another table leaves the default table's root alone.
    db.create_table("other", TableOptions::default()).unwrap();
    assert_eq!(db.root(), model.root());
    assert_ne!(db.db_root(), info.db_root);
}

#[test]
fn one_batch_commits_several_tables_atomically_and_witnesses_each() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let a = db.create_table("a", TableOptions::default()).unwrap();
    let counts = db
        .create_table("counts", TableOptions::resolver("add-u64"))
        .unwrap();
    let k = db.key_path(b"k");
    let mut b = db.begin();
    b.put_in(&a, k, b"in a".to_vec()).unwrap();
    b.upsert_in(&counts, k, 5u64.to_le_bytes()).unwrap();
    b.upsert_in(&counts, k, 7u64.to_le_bytes()).unwrap();
    assert_eq!(
        b.get_in(&counts, &k).unwrap(),
        Some(12u64.to_le_bytes().to_vec())
    );
    assert_eq!(b.get(&k).unwrap(), None);
    let p = b.finish().unwrap();
    let w = p.witness_in(&counts).unwrap();
    assert_eq!(w.keys, vec![k]);
    let info = db.commit(p).unwrap();
    let view = db.view();
    assert_eq!(view.get_in(&a, &k).unwrap(), Some(b"in a".to_vec()));
    assert_eq!(view.get(&k).unwrap(), None);
    assert_eq!(info.db_root, view.db_root());
    // Upserts on a stored value resolve against it.
    let mut b = db.begin();
    b.upsert_in(&counts, k, 1u64.to_le_bytes()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    assert_eq!(
        db.view().get_in(&counts, &k).unwrap(),
        Some(13u64.to_le_bytes().to_vec())
    );
    // A malformed upsert is refused with a sentence naming the table.
    let mut b = db.begin();
    let e = b.upsert_in(&counts, k, vec![1, 2, 3]);
    assert!(e.is_ok(), "refused only when resolved: {e:?}");
    let e = b.finish().err().unwrap();
    assert!(
        matches!(e, Error::InvalidArgument(ref s) if s.contains("counts")),
        "{e}"
    );
}

#[test]
fn unknown_tables_stale_handles_and_missing_resolvers_are_clear_errors() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let options = || Options::default().resolver("keep-left", |a, _| Ok(a.to_vec()));
    let db = Db::open_with_storage(storage.clone(), options()).unwrap();
    assert!(matches!(db.table("nope"), Err(Error::NoSuchTable(_))));
    assert!(matches!(
        db.drop_table(DEFAULT_TABLE),
        Err(Error::DefaultTable)
    ));
    assert!(matches!(
        db.create_table("x", TableOptions::resolver("no-such-resolver")),
        Err(Error::ResolverMissing { .. })
    ));
    assert!(matches!(
        db.create_table("", TableOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    let t = db
        .create_table("t", TableOptions::resolver("keep-left"))
        .unwrap();
    let k = db.key_path(b"k");
    let mut b = db.begin();
    b.put_in(&t, k, b"first".to_vec()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    let mut b = db.begin();
    b.upsert_in(&t, k, b"second".to_vec()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    assert_eq!(db.view().get_in(&t, &k).unwrap(), Some(b"first".to_vec()));
    // Upserts into the default table (no resolver) are refused.
    let mut b = db.begin();
    assert!(matches!(
        b.upsert(k, b"v".to_vec()),
        Err(Error::NoResolver(_))
    ));
    drop(b);
    // A handle of a dropped table stays dead, even when the name is taken again.
    db.drop_table("t").unwrap();
    let mut b = db.begin();
    assert!(matches!(
        b.put_in(&t, k, b"v".to_vec()),
        Err(Error::NoSuchTable(_))
    ));
    drop(b);
    let t2 = db.create_table("t", TableOptions::default()).unwrap();
    assert_ne!(t2, t);
    assert!(matches!(
        db.view().get_in(&t, &k),
        Err(Error::NoSuchTable(_))
    ));
    assert_eq!(db.view().get_in(&t2, &k).unwrap(), None);
    // Roll back to when "t" had the custom resolver, then reopen without registering it.
    let seq_with_resolver = db.seq() - 2;
    db.rollback_to(seq_with_resolver).unwrap();
    assert_eq!(db.view().get_in(&t, &k).unwrap(), Some(b"first".to_vec()));
    drop(db);
    let e = Db::open_with_storage(storage.clone(), Options::default()).err();
    assert!(
        matches!(&e, Some(Error::ResolverMissing { table, resolver }) if table == "t" && resolver == "keep-left"),
        "{e:?}"
    );
    // A read-only open needs no resolver.
    let ro = Db::open_with_storage_read_only(storage.clone(), Options::default()).unwrap();
    assert_eq!(
        ro.view().get_in(&ro.table("t").unwrap(), &k).unwrap(),
        Some(b"first".to_vec())
    );
    drop(ro);
    Db::open_with_storage(storage, options()).unwrap();
}

/// Union: every key of the inputs, equal keys combined by the new table's resolver in input
/// order (left-biased without one); inputs unchanged; the result an ordinary table.
#[test]
fn union_combines_equal_keys_in_input_order() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut model = TablesModel::new(db.hasher());
    let x = db.create_table("x", TableOptions::default()).unwrap();
    let y = db.create_table("y", TableOptions::default()).unwrap();
    model.create("x");
    model.create("y");
    let keys = keys(400);
    let mut b = db.begin();
    for (i, k) in keys.iter().enumerate() {
        let v = if i % 50 == 0 {
            vec![i as u8; 1500]
        } else {
            vec![i as u8; 1 + i % 9]
        };
        if i % 3 != 0 {
            b.put_in(&x, *k, v.clone()).unwrap();
            model.table_mut("x").unwrap().insert(*k, v.clone());
        }
        if i % 2 == 0 {
            let w = [&v[..], b"-y"].concat();
            b.put_in(&y, *k, w.clone()).unwrap();
            model.table_mut("y").unwrap().insert(*k, w);
        }
    }
    db.commit(b.finish().unwrap()).unwrap();
    type Combine = dyn Fn(&[u8], &[u8]) -> Vec<u8>;
    let expect = |combine: &Combine| {
        let mut m = sprig_core::ReferenceModel::new(db.hasher());
        for (k, v) in model.table("x").unwrap().iter() {
            m.insert(*k, v.to_vec());
        }
        for (k, v) in model.table("y").unwrap().iter() {
            let new = match m.get(k) {
                Some(old) => combine(old, v),
                None => v.to_vec(),
            };
            m.insert(*k, new);
        }
        m
    };
    let (left, info) = db
        .union("left", &[&x, &y], TableOptions::default())
        .unwrap();
    let want = expect(&|old, _| old.to_vec());
    assert_eq!(db.view().table_root(&left).unwrap(), want.root());
    assert_eq!(info.db_root, db.db_root());
    let (cat, _) = db
        .union("cat", &[&x, &y], TableOptions::resolver("concat"))
        .unwrap();
    let want_cat = expect(&|old, new| [old, new].concat());
    let view = db.view();
    assert_eq!(view.table_root(&cat).unwrap(), want_cat.root());
    let values = view.get_many_in(&cat, &keys).unwrap();
    for (k, v) in keys.iter().zip(values) {
        assert_eq!(v.as_deref(), want_cat.get(k));
    }
    // Inputs unchanged; the union is an ordinary table (writable, droppable).
    assert_eq!(
        view.table_root(&x).unwrap(),
        model.table("x").unwrap().root()
    );
    let mut b = db.begin();
    b.put_in(&cat, keys[0], b"new".to_vec()).unwrap();
    db.commit(b.finish().unwrap()).unwrap();
    assert!(matches!(
        db.union("cat", &[&x], TableOptions::default()),
        Err(Error::TableExists(_))
    ));
    db.drop_table("x").unwrap();
    assert!(matches!(
        db.union("z", &[&x, &y], TableOptions::default()),
        Err(Error::NoSuchTable(_))
    ));
    // A resolver refusing the inputs fails the union, creating nothing.
    let before = db.tables().len();
    let e = db.union("sum", &[&y, &cat], TableOptions::resolver("add-u64"));
    assert!(matches!(e, Err(Error::InvalidArgument(_))), "{e:?}");
    assert_eq!(db.tables().len(), before);
}

/// An upsert folded into an earlier put or upsert of the same batch is held to the value
/// limit as a put is (before, the folded value was kept unchecked and reached the commit).
#[test]
fn folded_upserts_are_held_to_the_value_limit() {
    // Zeroed and never touched: the allocation costs no memory.
    let options =
        Options::default().resolver("grow", |_, _| Ok(vec![0; sprig::MAX_VALUE_BYTES + 1]));
    let db = Db::open_in_memory(options).unwrap();
    let t = db
        .create_table("t", TableOptions::resolver("grow"))
        .unwrap();
    let k = db.key_path(b"k");
    let mut b = db.begin();
    b.put_in(&t, k, b"v".to_vec()).unwrap();
    let e = b.upsert_in(&t, k, b"w".to_vec());
    assert!(matches!(e, Err(Error::ValueTooLarge { .. })), "{e:?}");
    let mut b = db.begin();
    b.upsert_in(&t, k, b"v".to_vec()).unwrap();
    let e = b.upsert_in(&t, k, b"w".to_vec());
    assert!(matches!(e, Err(Error::ValueTooLarge { .. })), "{e:?}");
}

/// An incremental union while its inputs are rewritten many times over: the segments holding
/// the frozen inputs are neither cleaned nor deleted while it runs (lookups stay right through
/// cleaning, checkpoints and reopens), a rollback across its completion brings it back in
/// progress (its frozen inputs restored whole, and surviving a reopen), and once it completes
/// its table is the union and the pinned space is freed.
#[test]
fn incremental_union_survives_cleaning_reopen_and_rollback() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let opts = || Options {
        max_space_amplification: 1.3,
        ..options()
    };
    let open = || Db::open_with_storage(storage.clone(), opts()).unwrap();
    let mut db = open();
    let a = db.create_table("a", TableOptions::default()).unwrap();
    let b = db.create_table("b", TableOptions::default()).unwrap();
    let keys = keys(600);
    let value = |i: usize, round: u8, side: u8| -> Vec<u8> {
        if i.is_multiple_of(40) {
            vec![round ^ side; 1500]
        } else {
            vec![round, side, i as u8, (i >> 8) as u8]
        }
    };
    let write_round = |db: &Db, round: u8| {
        let mut batch = db.begin();
        for (i, k) in keys.iter().enumerate() {
            if i % 3 != 0 {
                batch.put_in(&a, *k, value(i, round, 1)).unwrap();
            }
            if i % 2 == 0 {
                batch.put_in(&b, *k, value(i, round, 2)).unwrap();
            }
        }
        db.commit(batch.finish().unwrap()).unwrap();
    };
    write_round(&db, 0);
    // The union's content: a's value, then b's appended (resolver concat).
    let mut want = sprig_core::ReferenceModel::new(db.hasher());
    for (i, k) in keys.iter().enumerate() {
        let v = match (i % 3 != 0, i % 2 == 0) {
            (true, true) => [value(i, 0, 1), value(i, 0, 2)].concat(),
            (true, false) => value(i, 0, 1),
            (false, true) => value(i, 0, 2),
            (false, false) => continue,
        };
        want.insert(*k, v);
    }
    let check_lookups = |db: &Db, u: &Table| {
        let got = db.view().get_many_in(u, &keys).unwrap();
        for (k, v) in keys.iter().zip(got) {
            assert_eq!(v.as_deref(), want.get(k));
        }
    };
    let total = 400 + 300;
    let (u, _) = db
        .start_union("u", &[&a, &b], TableOptions::resolver("concat"))
        .unwrap();
    assert_eq!(db.remaining_union_debt(&u).unwrap(), total);
    let step = db.supply_union_work(&u, 150).unwrap();
    assert!(step.merged >= 150 && step.remaining == total - step.merged);
    let disk_at_start = db.stats().disk_bytes;
    // Rewrite both inputs many times: without the pins the cleaner would relocate and delete
    // the segments the frozen inputs read.
    for round in 1..10u8 {
        write_round(&db, round);
        db.clean().unwrap();
        check_lookups(&db, &u);
    }
    assert!(
        db.stats().disk_bytes > disk_at_start,
        "pinned segments are kept"
    );
    db.checkpoint().unwrap();
    drop(db);
    db = open();
    let u = db.table("u").unwrap();
    check_lookups(&db, &u);
    assert!(db.check(&mut |_, _| {}).unwrap().is_clean());

    // Half-way, remember the version; complete; roll back across the completion.
    db.supply_union_work(&u, 200).unwrap();
    let mid = db.seq();
    let mid_debt = db.remaining_union_debt(&u).unwrap();
    let done = db.supply_union_work(&u, u64::MAX).unwrap();
    assert_eq!(done.remaining, 0);
    assert_eq!(db.view().table_root(&u).unwrap(), want.root());
    db.rollback_to(mid).unwrap();
    assert_eq!(db.remaining_union_debt(&u).unwrap(), mid_debt);
    check_lookups(&db, &u);
    drop(db);
    db = open();
    let u = db.table("u").unwrap();
    assert_eq!(db.remaining_union_debt(&u).unwrap(), mid_debt);
    check_lookups(&db, &u);
    // Complete it in small steps; it is an ordinary table afterwards.
    while db.supply_union_work(&u, 64).unwrap().remaining > 0 {}
    let view = db.view();
    assert_eq!(view.table_root(&u).unwrap(), want.root());
    assert_eq!(view.len_in(&u).unwrap(), want.len() as u64);
    drop(view);
    let mut batch = db.begin();
    batch.put_in(&u, keys[1], b"x".to_vec()).unwrap();
    db.commit(batch.finish().unwrap()).unwrap();
    // The pins are gone: once the retained versions that had the union are gone too,
    // cleaning brings disk use back down.
    let pinned_disk = db.stats().disk_bytes;
    for round in 10..16u8 {
        write_round(&db, round);
        db.clean().unwrap();
    }
    let stats = db.stats();
    assert!(
        stats.disk_bytes < pinned_disk,
        "{} bytes on disk, {} while pinned",
        stats.disk_bytes,
        pinned_disk
    );
    assert!(db.check(&mut |_, _| {}).unwrap().is_clean());
}

/// Misuse of incremental unions gets clear errors: writes, roots, proofs and scans of a table
/// being filled; a union whose input is being filled; union work on a dropped table. A union
/// of empty inputs completes at once; dropping a union in progress drops it whole.
#[test]
fn incremental_union_edges_are_clear_errors() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let a = db.create_table("a", TableOptions::default()).unwrap();
    let e = db.create_table("e", TableOptions::default()).unwrap();
    let keys = keys(50);
    let mut batch = db.begin();
    for k in &keys {
        batch.put_in(&a, *k, b"v".to_vec()).unwrap();
    }
    db.commit(batch.finish().unwrap()).unwrap();
    let root_before = db.db_root();
    let (u, info) = db
        .start_union("u", &[&a, &a], TableOptions::default())
        .unwrap();
    // The table is not in the database root while the union runs.
    assert_eq!(info.db_root, root_before);
    let in_progress = |r: Result<(), Error>| {
        assert!(
            matches!(r, Err(Error::UnionInProgress { remaining: 100, .. })),
            "{r:?}"
        )
    };
    let mut batch = db.begin();
    in_progress(batch.put_in(&u, keys[0], b"x".to_vec()));
    in_progress(batch.delete_in(&u, keys[0]));
    in_progress(db.view().table_root(&u).map(|_| ()));
    in_progress(db.view().path_proof_in(&u, &keys[0]).map(|_| ()));
    in_progress(
        db.import_sorted_into(&u, Vec::new(), &sprig::ImportOptions::default())
            .map(|_| ()),
    );
    in_progress(
        db.start_union("v", &[&u], TableOptions::default())
            .map(|_| ()),
    );
    in_progress(db.union("v", &[&u], TableOptions::default()).map(|_| ()));
    // The same input twice: left-biased, each key counted twice.
    assert_eq!(
        db.view().get_in(&u, &keys[3]).unwrap().as_deref(),
        Some(&b"v"[..])
    );
    let step = db.supply_union_work(&u, 1).unwrap();
    assert_eq!((step.merged, step.remaining), (2, 98));
    // Empty inputs: complete at once, an ordinary empty table in the root.
    let (z, _) = db.start_union("z", &[&e], TableOptions::default()).unwrap();
    assert_eq!(db.remaining_union_debt(&z).unwrap(), 0);
    assert_eq!(db.view().len_in(&z).unwrap(), 0);
    // Dropping the table drops the union.
    db.drop_table("u").unwrap();
    assert!(matches!(
        db.supply_union_work(&u, 10),
        Err(Error::NoSuchTable(_))
    ));
    assert!(db.tables().iter().all(|t| t.union_debt.is_none()));
    // A resolver that is not registered.
    assert!(matches!(
        db.start_union("w", &[&a], TableOptions::resolver("nope")),
        Err(Error::ResolverMissing { .. })
    ));
}
