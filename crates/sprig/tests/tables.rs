//! Tables against the reference model extended with tables (`sprig_core::TablesModel`):
//! random creates, drops, puts, deletes, upserts (two resolvers) and gets across several
//! tables, interleaved with commits, checkpoints, cleaning, reopens and rollbacks; after every
//! commit every table's root, the database root, every value, every table's scan and table
//! proofs under the database root are compared with the model. Plus the API's edges: errors
//! for unknown tables, stale handles, missing resolvers, and the default table's root being
//! the single-table root.

use proptest::prelude::*;
use sprig::io::{MemoryStorage, Storage};
use sprig::{Db, Error, Hasher, KeyPath, Options, Table, TableOptions};
use sprig_core::{TablesModel, DEFAULT_TABLE};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The tables a run may create, with their resolvers.
const TABLES: [(&str, Option<&str>); 4] = [
    (DEFAULT_TABLE, None),
    ("balances", Some("add-u64")),
    ("logs", Some("concat")),
    ("plain", None),
];

#[derive(Debug, Clone)]
enum Op {
    Create(usize),
    Drop(usize),
    Put(usize, usize, Vec<u8>),
    Delete(usize, usize),
    Upsert(usize, usize, Vec<u8>),
    Get(usize, usize),
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
        6 => (t, 0..nkeys).prop_map(|(t, k)| Op::Get(t, k)),
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
fn check(db: &Db, model: &TablesModel, keys: &[KeyPath]) {
    let view = db.view();
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
    // Committed states of the retained versions, by sequence number.
    let mut history: BTreeMap<u64, TablesModel> = BTreeMap::new();
    history.insert(db.seq(), committed.clone());
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
            history.insert(info.seq, committed.clone());
            check(&db, &committed, &keys);
        }};
    }
    for op in ops {
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
                    history.insert(db.seq(), committed.clone());
                } else {
                    assert!(matches!(r, Err(Error::TableExists(_))), "{r:?}");
                }
                batch = db.begin();
            }
            Op::Drop(t) => {
                commit!();
                let r = db.drop_table(TABLES[t].0);
                if staged.drop_table(TABLES[t].0) {
                    let info = r.unwrap();
                    assert_eq!(info.db_root, staged.root());
                    committed = staged.clone();
                    history.insert(db.seq(), committed.clone());
                } else {
                    assert!(matches!(r, Err(Error::NoSuchTable(_))), "{r:?}");
                }
                batch = db.begin();
            }
            Op::Put(t, k, v) => match (handle(&db, t), staged.table_mut(TABLES[t].0)) {
                (Some(h), Some(m)) => {
                    batch.put_in(&h, keys[k], v.clone()).unwrap();
                    m.insert(keys[k], v);
                }
                (None, None) => {}
                other => panic!("handle and model disagree: {:?}", other.0),
            },
            Op::Delete(t, k) => match (handle(&db, t), staged.table_mut(TABLES[t].0)) {
                (Some(h), Some(m)) => {
                    batch.delete_in(&h, keys[k]).unwrap();
                    m.remove(&keys[k]);
                }
                (None, None) => {}
                other => panic!("handle and model disagree: {:?}", other.0),
            },
            Op::Upsert(t, k, v) => match (handle(&db, t), staged.table_mut(TABLES[t].0)) {
                (Some(h), Some(m)) => {
                    let r = batch.upsert_in(&h, keys[k], v.clone());
                    if TABLES[t].1.is_none() {
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
                (Some(h), Some(m)) => {
                    let got = batch.get_in(&h, &keys[k]).unwrap();
                    assert_eq!(got.as_deref(), m.get(&keys[k]), "batch get");
                }
                (None, None) => {}
                other => panic!("handle and model disagree: {:?}", other.0),
            },
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
                check(&db, &committed, &keys);
                history.insert(db.seq(), committed.clone());
                batch = db.begin();
            }
            Op::Reopen => {
                drop(batch);
                staged = committed.clone();
                drop(db);
                db = open();
                check(&db, &committed, &keys);
                batch = db.begin();
            }
            Op::Rollback(back) => {
                commit!();
                let target = db.seq().saturating_sub(back);
                match history.get(&target).cloned() {
                    Some(state) if db.versions().iter().any(|(s, _)| *s == target) => {
                        let info = db.rollback_to(target).unwrap();
                        assert_eq!(info.db_root, state.root());
                        committed = state;
                        staged = committed.clone();
                        history.insert(db.seq(), committed.clone());
                        check(&db, &committed, &keys);
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
    check(&db, &committed, &keys);
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
    check(&db, &model, &keys);
    let seq = db.seq();
    let kept = model.clone();
    db.drop_table("a").unwrap();
    model.drop_table("a");
    check(&db, &model, &keys);
    db.rollback_to(seq).unwrap();
    check(&db, &kept, &keys);
    drop(db);
    let db = Db::open_with_storage(storage, opts()).unwrap();
    check(&db, &kept, &keys);
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
