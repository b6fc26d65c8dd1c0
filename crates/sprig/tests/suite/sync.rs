//! Verifiable state sync between databases: a full sync of a 1M-entry database from chunks
//! reproduces its root; chunks of any size and range match the model; a tampered, truncated,
//! reordered, overlapping or incomplete sequence is refused with nothing imported.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sprig::{Db, Error, Hasher, ImportOptions, KeyPath, Options, SyncChunk, Table};

fn key(i: u64) -> KeyPath {
    Hasher::Blake3.hash_value(&i.to_le_bytes())
}

fn value(i: u64) -> Vec<u8> {
    if i.is_multiple_of(1009) {
        vec![i as u8; 3000]
    } else {
        i.to_le_bytes()[..(i % 8) as usize].to_vec()
    }
}

/// Every chunk of `table` in `db`, `max` entries each.
fn export_all(db: &Db, table: &Table, max: usize) -> Vec<SyncChunk> {
    let view = db.view();
    let mut chunks = Vec::new();
    let mut start = Some([0u8; 32]);
    while let Some(s) = start {
        let c = view.export_range(table, s, None, max).unwrap();
        assert!(c.entries.len() <= max);
        start = c.end;
        chunks.push(c);
    }
    chunks
}

fn fresh() -> Db {
    Db::open_in_memory(Options::default()).unwrap()
}

#[test]
fn a_full_sync_of_a_million_entries_reproduces_the_root() {
    let source = fresh();
    source
        .bulk_load((0..1_000_000u64).map(|i| (key(i), value(i))), &mut |_| {})
        .unwrap();
    let chunks = export_all(&source, &Table::default_table(), 50_000);
    assert_eq!(chunks.len(), 20);
    let proof_bytes: usize = chunks.iter().map(|c| c.proof.len() * 33).sum();
    println!("20 chunks, about {proof_bytes} bytes of proof nodes");
    let target = fresh();
    target
        .import_chunks(
            &Table::default_table(),
            source.root(),
            chunks.into_iter().map(Ok),
            &ImportOptions::default(),
        )
        .unwrap();
    assert_eq!(target.root(), source.root());
    assert_eq!(target.len(), 1_000_000);
}

#[test]
fn chunks_of_any_range_hold_exactly_the_model_entries() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let db = fresh();
    let t = db.create_table("utxo", Default::default()).unwrap();
    let mut b = db.begin();
    let mut model = std::collections::BTreeMap::new();
    for i in 0..20_000u64 {
        b.put_in(&t, key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    db.commit(b.finish().unwrap()).unwrap();
    let view = db.view();
    let root = view.table_root(&t).unwrap();
    for _ in 0..60 {
        let (a, z): (KeyPath, KeyPath) = (rng.gen(), rng.gen());
        let (start, end) = (
            a.min(z),
            if rng.gen_bool(0.2) {
                None
            } else {
                Some(a.max(z))
            },
        );
        if end == Some(start) {
            continue;
        }
        let max = rng.gen_range(1..3000);
        let c = view.export_range(&t, start, end, max).unwrap();
        c.verify(db.hasher(), &root).unwrap();
        let want: Vec<(KeyPath, Vec<u8>)> = model
            .range(start..)
            .filter(|(k, _)| c.end.is_none_or(|e| **k < e))
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        assert_eq!(c.entries, want);
        assert!(c.entries.len() <= max);
        // A chunk cut short ends at the first key it leaves out.
        if c.end != end {
            assert_eq!(c.entries.len(), max);
            assert!(model.contains_key(&c.end.unwrap()));
        }
    }
}

#[test]
fn bad_chunk_sequences_are_refused_with_nothing_imported() {
    let source = fresh();
    source
        .bulk_load((0..30_000u64).map(|i| (key(i), value(i))), &mut |_| {})
        .unwrap();
    let root = source.root();
    let table = Table::default_table();
    let chunks = export_all(&source, &table, 4_000);
    assert!(chunks.len() >= 7);
    let mut bad: Vec<(&str, Vec<SyncChunk>)> = Vec::new();
    let mut x = chunks.clone();
    x[3].entries[10].1.push(0);
    bad.push(("a changed value", x));
    let mut x = chunks.clone();
    x[2].entries.remove(5);
    bad.push(("a dropped entry", x));
    let mut x = chunks.clone();
    let mut fake = x[1].start;
    fake[31] = fake[31].wrapping_add(1); // inside the range, not in the state
    x[1].entries.push((fake, vec![1]));
    x[1].entries.sort();
    bad.push(("an added entry", x));
    let mut x = chunks.clone();
    x.swap(2, 3);
    bad.push(("reordered", x));
    let mut x = chunks.clone();
    x.remove(4);
    bad.push(("a gap", x));
    let mut x = chunks.clone();
    let dup = x[2].clone();
    x.insert(3, dup);
    bad.push(("repeated", x));
    let mut x = chunks.clone();
    x.pop();
    bad.push(("truncated", x));
    let mut x = chunks.clone();
    if let sprig::core::ProofNode::Opaque(h) = &mut x[0].proof[1] {
        h[0] ^= 1;
    } else {
        x[0].proof.push(sprig::core::ProofNode::Terminator);
    }
    bad.push(("a proof node changed", x));
    let target = fresh();
    target.create_table("other", Default::default()).unwrap();
    let before = target.db_root();
    for (what, seq) in bad {
        let r = target.import_chunks(
            &table,
            root,
            seq.into_iter().map(Ok),
            &ImportOptions::default(),
        );
        assert!(
            matches!(r, Err(Error::Proof(_)) | Err(Error::InvalidArgument(_))),
            "{what}: {r:?}"
        );
        assert_eq!(target.db_root(), before, "{what}: something was imported");
        assert_eq!(target.len(), 0, "{what}");
    }
    // A source error stops it too; then the honest sequence goes in.
    let mut with_error: Vec<sprig::Result<SyncChunk>> = chunks.iter().cloned().map(Ok).collect();
    with_error.insert(2, Err(Error::InvalidArgument("the peer went away".into())));
    assert!(target
        .import_chunks(&table, root, with_error, &ImportOptions::default())
        .is_err());
    assert_eq!(target.len(), 0);
    target
        .import_chunks(
            &table,
            root,
            chunks.clone().into_iter().map(Ok),
            &ImportOptions::default(),
        )
        .unwrap();
    assert_eq!(target.root(), root);
    // Into a table that is not empty: refused.
    assert!(matches!(
        target.import_chunks(
            &table,
            root,
            chunks.into_iter().map(Ok),
            &ImportOptions::default()
        ),
        Err(Error::NotEmpty(_))
    ));
}
