//! Overlays over random fork trees, against the reference model: overlays built on the latest
//! version or on other overlays (blocks on blocks, several children of one parent), read and
//! proved at their own roots, their witnesses checked by the stateless block check; one branch
//! committed (with its uncommitted ancestors), siblings then superseded, discarded overlays and
//! their descendants refused; reopen after every commit matches the committed branch.

use proptest::prelude::*;
use sprig::io::{MemoryStorage, Storage};
use sprig::{Db, Hasher, KeyPath, Options, Pending};
use sprig_core::{ReferenceModel, ValueHash};
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    /// A batch on the latest version (`None`) or on overlay `n % len`.
    Create {
        on: Option<usize>,
        changes: Vec<(usize, Option<Vec<u8>>)>,
        reads: Vec<usize>,
    },
    Read(usize, usize),
    Commit(usize),
    Discard(usize),
    Reopen,
}

const KEYS: usize = 120;

fn key(i: usize) -> KeyPath {
    let mut k = Hasher::Blake3.hash_value(&(i as u64).to_le_bytes());
    if i.is_multiple_of(4) {
        k[..20].copy_from_slice(&[0x33; 20]);
    }
    k
}

fn value() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Some),
        1 => (1100usize..3000).prop_map(|n| Some(vec![7u8; n])),
        2 => Just(None),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (proptest::option::of(any::<usize>()), proptest::collection::vec((0..KEYS, value()), 0..30), proptest::collection::vec(0..KEYS, 0..5))
            .prop_map(|(on, changes, reads)| Op::Create { on, changes, reads }),
        5 => (any::<usize>(), 0..KEYS).prop_map(|(o, k)| Op::Read(o, k)),
        2 => any::<usize>().prop_map(Op::Commit),
        1 => any::<usize>().prop_map(Op::Discard),
        1 => Just(Op::Reopen),
    ]
}

/// What a committed version is, for "does this overlay rest on the latest version".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    /// A version reached by opening the database (or the start).
    Opened(u64),
    /// The version made by committing overlay `n`.
    Overlay(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Live,
    Committed,
    Discarded,
}

struct Slot {
    pending: Pending,
    model: ReferenceModel,
    /// The overlay this one is built on, or the committed version it is built on.
    parent: Result<usize, Identity>,
    seq: u64,
    status: Status,
}

struct World {
    storage: Arc<dyn Storage>,
    db: Db,
    committed: ReferenceModel,
    head: Identity,
    head_seq: u64,
    slots: Vec<Slot>,
}

fn options() -> Options {
    Options {
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 32 << 10,
        ..Options::default()
    }
}

impl World {
    /// Whether overlay `i` can be used (the rule of `Pending`: none discarded up its chain,
    /// none live with a sequence number the database already reached).
    fn usable(&self, mut i: usize) -> bool {
        loop {
            let s = &self.slots[i];
            match s.status {
                Status::Discarded => return false,
                Status::Live if self.head_seq >= s.seq => return false,
                _ => {}
            }
            match s.parent {
                Ok(p) => i = p,
                Err(_) => return true,
            }
        }
    }

    /// The uncommitted chain of overlay `i`, oldest first, and what its bottom rests on.
    fn chain(&self, i: usize) -> (Vec<usize>, Identity) {
        let mut chain = Vec::new();
        let mut at = i;
        loop {
            let s = &self.slots[at];
            if s.status == Status::Committed {
                chain.reverse();
                return (chain, Identity::Overlay(at));
            }
            chain.push(at);
            match s.parent {
                Ok(p) => at = p,
                Err(id) => {
                    chain.reverse();
                    return (chain, id);
                }
            }
        }
    }

    fn check_view(&self, i: usize, k: usize) {
        let s = &self.slots[i];
        match s.pending.view() {
            Ok(view) => {
                assert!(self.usable(i), "overlay {i} should be unusable");
                let key = key(k);
                assert_eq!(view.root(), s.model.root());
                assert_eq!(view.get(&key).unwrap().as_deref(), s.model.get(&key));
                view.path_proof(&key)
                    .unwrap()
                    .verify_value(Hasher::Blake3, &s.model.root(), &key, s.model.get(&key))
                    .unwrap();
            }
            Err(e) => {
                assert!(!self.usable(i), "overlay {i} refused: {e}");
                assert!(
                    matches!(
                        e,
                        sprig::Error::Discarded { .. } | sprig::Error::Superseded { .. }
                    ),
                    "{e}"
                );
            }
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Create { on, changes, reads } => {
                let parent = match on {
                    Some(n) if !self.slots.is_empty() => Some(n % self.slots.len()),
                    _ => None,
                };
                let (batch, base_model, parent_ref, seq) = match parent {
                    None => (
                        self.db.begin(),
                        self.committed.clone(),
                        Err(self.head),
                        self.head_seq + 1,
                    ),
                    Some(p) => match self.slots[p].pending.begin() {
                        Ok(b) => (b, self.slots[p].model.clone(), Ok(p), self.slots[p].seq + 1),
                        Err(_) => {
                            assert!(!self.usable(p));
                            return;
                        }
                    },
                };
                if let Some(p) = parent {
                    assert!(self.usable(p), "began on unusable overlay {p}");
                }
                let mut batch = batch;
                let mut model = base_model.clone();
                let mut block: Vec<(KeyPath, Option<ValueHash>)> = Vec::new();
                for r in &reads {
                    let got = batch.get(&key(*r)).unwrap();
                    assert_eq!(got.as_deref(), model.get(&key(*r)), "read in a batch");
                }
                for (k, v) in &changes {
                    let k = key(*k);
                    block.retain(|(c, _)| *c != k);
                    block.push((k, v.as_ref().map(|v| Hasher::Blake3.hash_value(v))));
                    match v {
                        Some(v) => {
                            batch.put(k, v.clone()).unwrap();
                            model.insert(k, v.clone());
                        }
                        None => {
                            batch.delete(k);
                            model.remove(&k);
                        }
                    }
                }
                let pending = batch.finish().unwrap();
                assert_eq!(pending.root(), model.root());
                assert_eq!(pending.seq(), seq);
                // The stateless client's block check from the parent's root.
                let derived = sprig_core::proof::verify_block(
                    Hasher::Blake3,
                    &base_model.root(),
                    pending.witness(),
                    &block,
                )
                .unwrap();
                assert_eq!(derived, model.root());
                self.slots.push(Slot {
                    pending,
                    model,
                    parent: parent_ref,
                    seq,
                    status: Status::Live,
                });
            }
            Op::Read(o, k) => {
                if !self.slots.is_empty() {
                    self.check_view(o % self.slots.len(), k);
                }
            }
            Op::Commit(o) => {
                if self.slots.is_empty() {
                    return;
                }
                let i = o % self.slots.len();
                let (chain, rests_on) = self.chain(i);
                let expect_ok = !chain.is_empty()
                    && chain.iter().all(|c| self.usable(*c))
                    && rests_on == self.head;
                let result = self.db.commit(self.slots[i].pending.clone());
                assert_eq!(result.is_ok(), expect_ok, "commit of {i}: {result:?}");
                if let Ok(info) = result {
                    assert_eq!(info.root, self.slots[i].model.root());
                    for c in &chain {
                        self.slots[*c].status = Status::Committed;
                    }
                    self.committed = self.slots[i].model.clone();
                    self.head = Identity::Overlay(i);
                    self.head_seq = info.seq;
                    assert_eq!(self.db.root(), self.committed.root());
                }
            }
            Op::Discard(o) => {
                if !self.slots.is_empty() {
                    let i = o % self.slots.len();
                    self.slots[i].pending.clone().discard();
                    if self.slots[i].status == Status::Live {
                        self.slots[i].status = Status::Discarded;
                    }
                }
            }
            Op::Reopen => {
                self.slots.clear();
                let db = std::mem::replace(
                    &mut self.db,
                    Db::open_in_memory(Options::default()).unwrap(),
                );
                drop(db);
                self.db = Db::open_with_storage(self.storage.clone(), options()).unwrap();
                assert_eq!(self.db.root(), self.committed.root());
                assert_eq!(self.db.seq(), self.head_seq);
                self.head = Identity::Opened(self.head_seq);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
    #[test]
    fn fork_trees_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let db = Db::open_with_storage(storage.clone(), options()).unwrap();
        let mut world = World {
            storage,
            db,
            committed: ReferenceModel::new(Hasher::Blake3),
            head: Identity::Opened(0),
            head_seq: 0,
            slots: Vec::new(),
        };
        for op in ops {
            world.apply(op);
        }
        let stats = world.db.stats();
        prop_assert_eq!(stats.overlays, world.slots.len() as u64);
        world.slots.clear();
        prop_assert_eq!(world.db.stats().overlay_bytes, 0);
        for k in 0..KEYS {
            let value = world.db.view().get(&key(k)).unwrap();
            prop_assert_eq!(value.as_deref(), world.committed.get(&key(k)));
        }
    }
}

/// Committing an overlay whose chain holds a discarded overlay is refused as a whole: not even
/// the usable ancestors at the bottom of the chain are committed (they once were, one by one,
/// until the discarded one failed).
#[test]
fn a_refused_chain_commits_nothing() {
    let db = Db::open_with_storage(Arc::new(MemoryStorage::new()), options()).unwrap();
    let mut a = db.begin();
    a.put(key(0), Vec::new()).unwrap();
    let a = a.finish().unwrap();
    let mut b = a.begin().unwrap();
    b.put(key(1), vec![1]).unwrap();
    let b = b.finish().unwrap();
    b.clone().discard();
    let err = db.commit(b).unwrap_err();
    assert!(matches!(err, sprig::Error::Discarded { .. }), "{err}");
    assert_eq!(db.seq(), 0);
    assert_eq!(db.view().get(&key(0)).unwrap(), None);
    // The ancestor alone is still usable and commits.
    db.commit(a).unwrap();
    assert_eq!(db.view().get(&key(0)).unwrap().as_deref(), Some(&[][..]));
}

/// Once an overlay is committed, the overlays built on it no longer hold its pages in memory:
/// they read them from where the commit wrote them (before, a pipeline of overlays, each
/// built on the previous one, kept every committed ancestor's pages in RAM for as long as the
/// newest overlay lived).
#[test]
fn a_committed_overlays_pages_leave_memory_and_its_children_read_them_from_disk() {
    let db = Db::open_with_storage(
        Arc::new(MemoryStorage::new()),
        Options {
            page_cache_bytes: 0,
            ..options()
        },
    )
    .unwrap();
    let mut base = db.begin();
    for i in 0..KEYS {
        base.put(key(i), vec![i as u8; 20]).unwrap();
    }
    db.commit(base.finish().unwrap()).unwrap();
    // A changes key 0; B changes a key in another page.
    let region = |i: usize| db.view().region_of(&key(i));
    let other = (1..KEYS)
        .find(|i| region(*i) != region(0))
        .expect("the base spans several pages");

    let mut a = db.begin();
    a.put(key(0), vec![0xa0; 30]).unwrap();
    let a = a.finish().unwrap();
    let mut b = a.begin().unwrap();
    b.put(key(other), vec![0xb1; 30]).unwrap();
    let b = b.finish().unwrap();
    let b_view = b.view().unwrap();
    // Before A commits, B serves A's page from memory.
    let reads = db.stats().page_reads();
    assert_eq!(b_view.get(&key(0)).unwrap(), Some(vec![0xa0; 30]));
    assert_eq!(db.stats().page_reads(), reads);

    db.commit(a).unwrap();
    let reads = db.stats().page_reads();
    assert_eq!(b_view.get(&key(0)).unwrap(), Some(vec![0xa0; 30]));
    assert_eq!(
        db.stats().page_reads(),
        reads + 1,
        "the committed overlay's page is read from disk"
    );
    // B's own page is still in memory, and B commits with both changes.
    let reads = db.stats().page_reads();
    assert_eq!(b_view.get(&key(other)).unwrap(), Some(vec![0xb1; 30]));
    assert_eq!(db.stats().page_reads(), reads);
    drop(b_view);
    db.commit(b).unwrap();
    assert_eq!(db.view().get(&key(0)).unwrap(), Some(vec![0xa0; 30]));
    assert_eq!(db.view().get(&key(other)).unwrap(), Some(vec![0xb1; 30]));
}

/// An overlay built on an uncommitted one copies the parent's new page beside its own into
/// their twig (a twig of the directory holds both of its pages). Once both are committed, that
/// copy is on disk where the parent's commit wrote it: a checkpoint writes the directory, and
/// a reopen reads both pages. (A commit moves to disk only the pages of its own directory; the
/// child's copy was left as a page in memory, and the checkpoint refused "a page that is not
/// on disk".)
#[test]
fn a_page_copied_from_an_uncommitted_parent_is_on_disk_once_both_commit() {
    let storage = Arc::new(MemoryStorage::new());
    // One retained version: the checkpoint is of the latest.
    let options = || Options {
        retained_versions: 1,
        ..options()
    };
    let db = Db::open_with_storage(storage.clone(), options()).unwrap();
    let keys: Vec<KeyPath> = (0..600u64)
        .map(|i| Hasher::Blake3.hash_value(&(i + 10_000).to_le_bytes()))
        .collect();
    let mut base = db.begin();
    for k in &keys {
        base.put(*k, vec![1; 20]).unwrap();
    }
    db.commit(base.finish().unwrap()).unwrap();
    // Two keys in sibling pages: a twig's two pages.
    let view = db.view();
    let regions: Vec<_> = keys.iter().map(|k| view.region_of(k)).collect();
    let siblings = |x: &sprig::state::prefix::Prefix, y: &sprig::state::prefix::Prefix| {
        let d = x.depth();
        d > 0
            && y.depth() == d
            && (0..d - 1).all(|i| x.bit(i) == y.bit(i))
            && x.bit(d - 1) != y.bit(d - 1)
    };
    let (a, b) = (0..keys.len())
        .flat_map(|i| (0..keys.len()).map(move |j| (i, j)))
        .find(|(i, j)| siblings(&regions[*i], &regions[*j]))
        .expect("two pages side by side");
    drop(view);

    let mut p = db.begin();
    p.put(keys[a], vec![0xa0; 30]).unwrap();
    let parent = p.finish().unwrap();
    let mut c = parent.begin().unwrap();
    c.put(keys[b], vec![0xb1; 30]).unwrap();
    let child = c.finish().unwrap();
    db.commit(parent).unwrap();
    db.commit(child).unwrap();
    db.checkpoint().unwrap();
    drop(db);
    let db = Db::open_with_storage(storage, options()).unwrap();
    assert_eq!(db.recovery().checkpoint_seq, 3, "{:?}", db.recovery());
    assert_eq!(db.view().get(&keys[a]).unwrap(), Some(vec![0xa0; 30]));
    assert_eq!(db.view().get(&keys[b]).unwrap(), Some(vec![0xb1; 30]));
    assert!(db.check(&mut |_, _| {}).unwrap().is_clean());
}

/// A pipeline — each batch built on the previous, uncommitted one, which is then committed —
/// keeps only the uncommitted overlays alive: committing an overlay cuts its link to the
/// committed ones below (before, the whole chain since the pipeline began stayed in memory
/// behind the newest overlay). Values in the value log, written by a commit while an overlay
/// above still points at them as unwritten, are read from where they were written.
#[test]
fn a_pipeline_of_overlays_keeps_only_the_uncommitted_ones_alive() {
    let db = Db::open_with_storage(Arc::new(MemoryStorage::new()), options()).unwrap();
    let mut model = ReferenceModel::new(Hasher::Blake3);
    let mut base = db.begin();
    for i in 0..KEYS {
        base.put(key(i), vec![i as u8; 20]).unwrap();
        model.insert(key(i), vec![i as u8; 20]);
    }
    db.commit(base.finish().unwrap()).unwrap();

    let value = |step: usize| {
        // Every third value goes to the value log.
        let len = if step.is_multiple_of(3) { 5_000 } else { 24 };
        vec![step as u8; len]
    };
    let mut tip: Option<Pending> = None;
    for step in 0..40 {
        let mut batch = match &tip {
            Some(t) => t.begin().unwrap(),
            None => db.begin(),
        };
        for j in 0..3 {
            let k = key((step * 7 + j * 31) % KEYS);
            batch.put(k, value(step)).unwrap();
            model.insert(k, value(step));
        }
        let next = batch.finish().unwrap();
        if let Some(t) = tip.take() {
            db.commit(t).unwrap();
        }
        let view = next.view().unwrap();
        for i in 0..KEYS {
            assert_eq!(
                view.get(&key(i)).unwrap().as_deref(),
                model.get(&key(i)),
                "step {step}, key {i}"
            );
        }
        assert!(
            db.stats().overlays <= 2,
            "step {step}: {} overlays alive",
            db.stats().overlays
        );
        tip = Some(next);
    }
    if let Some(t) = tip {
        db.commit(t).unwrap();
    }
    assert_eq!(db.root(), model.root());
    assert_eq!(db.stats().overlays, 0);
}

/// Overlays alive together are bounded by `Options::max_overlay_bytes`: the batch that would
/// pass the limit is refused with a typed error, and committing or dropping overlays frees
/// their memory for the next one.
#[test]
fn overlay_memory_limit_is_enforced_and_released() {
    let db = Db::open_in_memory(Options {
        max_overlay_bytes: 64 << 10,
        ..Options::default()
    })
    .unwrap();
    let mut batch = db.begin();
    for i in 0..8 {
        batch.put(key(i), vec![1u8; 8]).unwrap();
    }
    let first = batch.finish().unwrap();
    assert!(db.stats().overlay_bytes > 0);
    // A second overlay that would need as much again passes the limit only if the first is
    // small; keep adding until refused.
    let mut alive = vec![first];
    let err = loop {
        let mut batch = db.begin();
        for i in 0..8 {
            batch
                .put(key(100 + i + 8 * alive.len()), vec![2u8; 8])
                .unwrap();
        }
        match batch.finish() {
            Ok(p) => alive.push(p),
            Err(e) => break e,
        }
        assert!(alive.len() < 1000, "the limit was never reached");
    };
    assert!(
        matches!(err, sprig::Error::OverlayMemoryLimit { limit, .. } if limit == 64 << 10),
        "{err}"
    );
    assert!(db.stats().overlay_bytes <= 64 << 10);
    alive.clear();
    assert_eq!(db.stats().overlay_bytes, 0);
    let mut batch = db.begin();
    batch.put(key(1), vec![3u8; 8]).unwrap();
    db.commit(batch.finish().unwrap()).unwrap();
}
