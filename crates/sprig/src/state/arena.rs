//! The directory's node store: fixed-size node slots in growing buckets, addressed by 32-bit
//! ids, shared by every version of one database's directory, each slot reference-counted.
//!
//! Three kinds of slot, so that no node carries what it can do without:
//! - a page slot holds the page's trie node, location (a disk location, or the page held in
//!   memory), checksum and entry count (56 bytes with its count of references);
//! - a twig slot is a branch over two pages and holds only their ids (12 bytes): its trie node
//!   is one hash of the two page nodes, computed when asked for. About half the branches of a
//!   directory of hashed keys are twigs, and a commit asks for an unchanged twig's node at most
//!   once per changed path beside it;
//! - a branch slot holds its trie node and two child ids (44 bytes).
//!
//! Nothing else is allocated per node: no per-node heap object, pointer or lock. Slots are
//! never moved (buckets only grow), so a reader holding a version reads any node reachable
//! from it without a lock; a slot is reused only once its count reaches zero, when no version
//! can reach it.
//!
//! Fields are stored in relaxed atomics: a slot's contents are written before its id is handed
//! to anyone (through a lock, a channel, or the publication of a version, all of which order
//! the writes before the reads), and never change while the slot is in use, with one
//! exception: a page held in memory is moved in place to where its commit wrote it
//! ([`Arena::move_to_disk`]), so that the committed directory is the overlay's own. Readers of
//! a page slot's location and checksum check a sequence word that every such move bumps, and
//! read again if one ran meanwhile (a seqlock: moves are rare and short, reads many). Counts
//! use release/acquire so that freeing a slot happens after every use of it.

use crate::state::page_ref::{MemoryPage, PageLoc, PageRef};
use parking_lot::Mutex;
use sprig_core::trie::{parent, parent_kind, Node, NodeKind, TERMINATOR};
use sprig_core::Hasher;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The id of a node: its kind in the top two bits (branch, twig, page), its slot index in the
/// rest; or the empty region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

const KIND_SHIFT: u32 = 30;
const INDEX_MASK: u32 = (1 << KIND_SHIFT) - 1;
const BRANCH: u32 = 0;
const TWIG: u32 = 1;
const PAGE: u32 = 2;

/// What kind of slot an id names.
enum Kind {
    Empty,
    Branch(u32),
    Twig(u32),
    Page(u32),
}

impl NodeId {
    /// The empty region: no slot.
    pub const EMPTY: NodeId = NodeId(u32::MAX);

    /// Whether this is the empty region.
    pub fn is_empty(self) -> bool {
        self == NodeId::EMPTY
    }

    /// Whether this is a page.
    pub fn is_page(self) -> bool {
        self.page_index().is_some()
    }

    fn of(kind: u32, index: u32) -> NodeId {
        assert!(
            index <= INDEX_MASK,
            "the directory holds 2^30 nodes of one kind"
        );
        NodeId(kind << KIND_SHIFT | index)
    }

    fn kind(self) -> Kind {
        let index = self.0 & INDEX_MASK;
        match self.0 >> KIND_SHIFT {
            _ if self.is_empty() => Kind::Empty,
            BRANCH => Kind::Branch(index),
            TWIG => Kind::Twig(index),
            PAGE => Kind::Page(index),
            _ => panic!("invariant broken: directory node id {:#x} of no kind", self.0),
        }
    }

    /// The page slot index, if this is a page.
    fn page_index(self) -> Option<u32> {
        match self.kind() {
            Kind::Page(i) => Some(i),
            _ => None,
        }
    }
}

/// Nodes freed per round when a version's nodes are released (see [`Arena::release`]).
const RELEASE_ROUND: usize = 64;

/// The smallest bucket holds this many slots; bucket `b` holds `2^(b + FIRST_BUCKET_BITS)`.
const FIRST_BUCKET_BITS: u32 = 10;
/// Enough buckets for 2^31 slots (ids address 2^30 of each kind).
const BUCKETS: usize = 22;

/// Slots of one kind in buckets of doubling size, with a free list.
struct Slots<const N: usize> {
    buckets: [OnceLock<Box<[[AtomicU32; N]]>>; BUCKETS],
    next: AtomicU32,
    free: Mutex<Vec<u32>>,
    live: AtomicU64,
}

/// Where slot `i` is: (bucket, offset).
fn position(i: u32) -> (usize, usize) {
    let j = u64::from(i) + (1 << FIRST_BUCKET_BITS);
    let bucket = (63 - j.leading_zeros()) - FIRST_BUCKET_BITS;
    let offset = j - (1u64 << (bucket + FIRST_BUCKET_BITS));
    (bucket as usize, offset as usize)
}

impl<const N: usize> Slots<N> {
    fn new() -> Slots<N> {
        Slots {
            buckets: std::array::from_fn(|_| OnceLock::new()),
            next: AtomicU32::new(0),
            free: Mutex::new(Vec::new()),
            live: AtomicU64::new(0),
        }
    }

    /// Slot `i`. Ids only come from [`Slots::alloc`]: an id of a slot never handed out is a
    /// broken invariant.
    fn get(&self, i: u32) -> &[AtomicU32; N] {
        let (bucket, offset) = position(i);
        match self
            .buckets
            .get(bucket)
            .and_then(OnceLock::get)
            .and_then(|b| b.get(offset))
        {
            Some(slot) => slot,
            None => panic!("invariant broken: directory slot {i} was never allocated"),
        }
    }

    /// A free slot (its fields to be written by the caller).
    fn alloc(&self) -> u32 {
        self.live.fetch_add(1, Ordering::Relaxed);
        if let Some(i) = self.free.lock().pop() {
            return i;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(i <= INDEX_MASK, "the directory holds 2^30 nodes of one kind");
        let (bucket, _) = position(i);
        if let Some(b) = self.buckets.get(bucket) {
            // Zeroed by the allocator: the operating system maps a big bucket's pages only as
            // slots are first written, so a half-used bucket (half of the last one is the usual
            // case, they double) does not take its whole size in RAM.
            b.get_or_init(|| {
                bytemuck::allocation::zeroed_slice_box(1usize << (bucket as u32 + FIRST_BUCKET_BITS))
            });
        }
        i
    }

    fn release(&self, i: u32) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        self.free.lock().push(i);
    }

    fn load(&self, i: u32, field: usize) -> u32 {
        self.get(i)[field].load(Ordering::Relaxed)
    }

    fn store(&self, i: u32, field: usize, v: u32) {
        self.get(i)[field].store(v, Ordering::Relaxed);
    }

    fn load_node(&self, i: u32) -> Node {
        let slot = self.get(i);
        let mut node = [0u8; 32];
        for (chunk, word) in node.chunks_exact_mut(4).zip(slot.iter()) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        node
    }

    fn store_node(&self, i: u32, node: &Node) {
        let slot = self.get(i);
        for (chunk, word) in node.chunks_exact(4).zip(slot.iter()) {
            let mut b = [0u8; 4];
            b.copy_from_slice(chunk);
            word.store(u32::from_le_bytes(b), Ordering::Relaxed);
        }
    }

    fn load_u64(&self, i: u32, field: usize) -> u64 {
        u64::from(self.load(i, field)) | (u64::from(self.load(i, field + 1)) << 32)
    }

    fn store_u64(&self, i: u32, field: usize, v: u64) {
        self.store(i, field, v as u32);
        self.store(i, field + 1, (v >> 32) as u32);
    }
}

/// Prefetch the cache lines of one slot (its first and last word: a slot of up to 56 bytes
/// spans at most two lines). A hint only: nothing is read, and it never faults.
fn prefetch_slot<const N: usize>(slot: &[AtomicU32; N]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = slot.as_ptr();
        let last = first.wrapping_add(N.saturating_sub(1));
        // SAFETY: a prefetch is a hint that reads no memory and cannot fault, whatever the
        // address; SSE, which it needs, is part of every x86-64 CPU.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(first.cast::<i8>());
            _mm_prefetch::<_MM_HINT_T0>(last.cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

// Branch slot fields: node (8 words), left, right, count of references.
const B_LEFT: usize = 8;
const B_RIGHT: usize = 9;
const B_REFS: usize = 10;
const BRANCH_WORDS: usize = 11;
// Twig slot fields: left page, right page, count of references.
const T_LEFT: usize = 0;
const T_RIGHT: usize = 1;
const T_REFS: usize = 2;
const TWIG_WORDS: usize = 3;
// Page slot fields: node (8 words), location (2), checksum (2), entry count, references. The
// location is a disk location (segment id, never 0, in the high word) or, with a high word of
// 0, the in-memory page: its index in the arena's page slab plus one.
const P_LOC: usize = 8;
const P_CHECKSUM: usize = 10;
const P_COUNT: usize = 12;
const P_REFS: usize = 13;
const PAGE_WORDS: usize = 14;

/// The slab index of the in-memory page a page slot's stored location names (segment 0, which
/// no disk location uses), or none for a disk location. A stored 0 gives an index past any
/// slab: no page, as for a freed entry.
fn slab_index(stored: u64) -> Option<usize> {
    (stored >> 32 == 0).then(|| (stored as usize).wrapping_sub(1))
}

/// What a node is.
#[derive(Debug, Clone)]
pub enum Slot {
    /// The empty region.
    Empty,
    /// A page.
    Page(PageRef),
    /// A branch (or twig): its children.
    Branch(NodeId, NodeId),
}

/// The node store of one database.
pub struct Arena {
    branches: Slots<BRANCH_WORDS>,
    twigs: Slots<TWIG_WORDS>,
    pages: Slots<PAGE_WORDS>,
    /// The hasher of twig nodes: set by the first branch, the same for every later one.
    hasher: OnceLock<Hasher>,
    /// In-memory pages of overlays, referenced by page slots.
    memory: Mutex<MemoryPages>,
    /// The sequence word of in-place moves of pages to disk: odd while a move is under way,
    /// bumped twice by each (see [`Arena::move_to_disk`]).
    moves: AtomicU64,
}

#[derive(Default)]
struct MemoryPages {
    pages: Vec<Option<Arc<MemoryPage>>>,
    /// Free slab entries, as stored in a slot (index plus one).
    free: Vec<u32>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("branches", &self.branches.live.load(Ordering::Relaxed))
            .field("twigs", &self.twigs.live.load(Ordering::Relaxed))
            .field("pages", &self.pages.live.load(Ordering::Relaxed))
            .finish()
    }
}

impl Arena {
    /// An empty store.
    pub fn new() -> Arc<Arena> {
        Arc::new(Arena {
            branches: Slots::new(),
            twigs: Slots::new(),
            pages: Slots::new(),
            hasher: OnceLock::new(),
            memory: Mutex::new(MemoryPages::default()),
            moves: AtomicU64::new(0),
        })
    }

    /// Live (branches, pages): what the directory holds in memory (twigs count as branches).
    pub fn live(&self) -> (u64, u64) {
        (
            self.branches.live.load(Ordering::Relaxed) + self.twigs.live.load(Ordering::Relaxed),
            self.pages.live.load(Ordering::Relaxed),
        )
    }

    /// The bytes the live nodes take.
    pub fn live_bytes(&self) -> u64 {
        let bytes = |live: &AtomicU64, words: usize| live.load(Ordering::Relaxed) * words as u64 * 4;
        bytes(&self.branches.live, BRANCH_WORDS)
            + bytes(&self.twigs.live, TWIG_WORDS)
            + bytes(&self.pages.live, PAGE_WORDS)
    }

    /// The bytes of every slot handed out at least once, free ones included: what the store
    /// has made resident (free slots are reused before new ones are taken).
    pub fn slot_bytes(&self) -> u64 {
        let bytes = |next: &AtomicU32, words: usize| u64::from(next.load(Ordering::Relaxed)) * words as u64 * 4;
        bytes(&self.branches.next, BRANCH_WORDS)
            + bytes(&self.twigs.next, TWIG_WORDS)
            + bytes(&self.pages.next, PAGE_WORDS)
    }

    /// The trie node of `id` (a twig's is hashed here: one hash).
    pub fn node(&self, id: NodeId) -> Node {
        match id.kind() {
            Kind::Empty => TERMINATOR,
            Kind::Page(i) => self.pages.load_node(i),
            Kind::Branch(i) => self.branches.load_node(i),
            Kind::Twig(i) => {
                let Some(&hasher) = self.hasher.get() else {
                    panic!("invariant broken: a twig in a store that never made a branch");
                };
                let (l, r) = self.twig_children(i);
                parent(hasher, &self.node(l), &self.node(r))
            }
        }
    }

    /// The stored trie node of `id` if it is a branch (not a twig, whose node is not stored).
    pub fn branch_node(&self, id: NodeId) -> Option<Node> {
        match id.kind() {
            Kind::Branch(i) => Some(self.branches.load_node(i)),
            Kind::Empty | Kind::Twig(_) | Kind::Page(_) => None,
        }
    }

    /// The kind of `id`'s trie node, without hashing a twig's.
    pub fn node_kind(&self, id: NodeId) -> NodeKind {
        match id.kind() {
            Kind::Twig(i) => {
                let (l, r) = self.twig_children(i);
                parent_kind(self.node_kind(l), self.node_kind(r))
            }
            _ => Hasher::node_kind(&self.node(id)),
        }
    }

    fn twig_children(&self, i: u32) -> (NodeId, NodeId) {
        (
            NodeId(self.twigs.load(i, T_LEFT)),
            NodeId(self.twigs.load(i, T_RIGHT)),
        )
    }

    fn branch_children(&self, i: u32) -> (NodeId, NodeId) {
        (
            NodeId(self.branches.load(i, B_LEFT)),
            NodeId(self.branches.load(i, B_RIGHT)),
        )
    }

    /// What `id` is.
    pub fn slot(&self, id: NodeId) -> Slot {
        match id.kind() {
            Kind::Empty => Slot::Empty,
            Kind::Page(i) => Slot::Page(self.page_ref(i)),
            Kind::Branch(i) => {
                let (l, r) = self.branch_children(i);
                Slot::Branch(l, r)
            }
            Kind::Twig(i) => {
                let (l, r) = self.twig_children(i);
                Slot::Branch(l, r)
            }
        }
    }

    /// Ask the CPU to bring `id`'s slot into its cache ahead of a read. Walks that follow many
    /// paths at once (one per key or region of a batch) prefetch each path's next node before
    /// reading any of them, so their cache misses overlap instead of coming one after another.
    pub fn prefetch(&self, id: NodeId) {
        match id.kind() {
            Kind::Empty => {}
            Kind::Branch(i) => prefetch_slot(self.branches.get(i)),
            Kind::Twig(i) => prefetch_slot(self.twigs.get(i)),
            Kind::Page(i) => prefetch_slot(self.pages.get(i)),
        }
    }

    /// The children of a branch, if `id` is one.
    pub fn children(&self, id: NodeId) -> Option<(NodeId, NodeId)> {
        match id.kind() {
            Kind::Branch(i) => Some(self.branch_children(i)),
            Kind::Twig(i) => Some(self.twig_children(i)),
            Kind::Empty | Kind::Page(_) => None,
        }
    }

    /// The entry count of a page, if `id` is one.
    pub fn page_count(&self, id: NodeId) -> Option<u32> {
        id.page_index().map(|i| self.pages.load(i, P_COUNT))
    }

    /// Page slot `i` as a reference: its location and checksum read consistently with any
    /// move of the page to disk running meanwhile (read again if one did).
    fn page_ref(&self, i: u32) -> PageRef {
        loop {
            let before = self.moves.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let stored = self.pages.load_u64(i, P_LOC);
            let checksum = self.pages.load_u64(i, P_CHECKSUM);
            let loc = match slab_index(stored) {
                None => Some(PageLoc::Disk(stored)),
                Some(m) => self
                    .memory
                    .lock()
                    .pages
                    .get(m)
                    .and_then(Option::as_ref)
                    .map(|page| PageLoc::Memory(page.clone())),
            };
            // Order the reads above before the second look at the sequence word.
            fence(Ordering::Acquire);
            if self.moves.load(Ordering::Relaxed) != before {
                continue;
            }
            let Some(loc) = loc else {
                panic!("invariant broken: in-memory page {stored} of a live slot is gone");
            };
            return PageRef {
                loc,
                checksum,
                node: self.pages.load_node(i),
                count: self.pages.load(i, P_COUNT),
            };
        }
    }

    /// Move pages held in memory to where their commit wrote them: each `(id, location,
    /// checksum)` names a page slot that holds an in-memory page, which from now on every
    /// version sharing the slot reads at `location` (the same page, its value pointers
    /// resolved). The slab entries of the in-memory pages are freed; holders of a
    /// [`PageRef`] taken before keep the page through its [`MemoryPage`]. Readers that race
    /// with the move read the slot again (see `Arena::page_ref`).
    pub fn move_to_disk(&self, moves: &[(NodeId, u64, u64)]) {
        if moves.is_empty() {
            return;
        }
        // The slab lock also keeps two moves from overlapping.
        let mut memory = self.memory.lock();
        let seq = self.moves.load(Ordering::Relaxed);
        self.moves.store(seq.wrapping_add(1), Ordering::Relaxed);
        // The odd word is seen before any changed field.
        fence(Ordering::Release);
        // Even again when the move ends, also by a panic (a broken invariant below): readers
        // waiting for it would spin for good otherwise.
        struct Done<'a>(&'a AtomicU64, u64);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(self.1, Ordering::Release);
            }
        }
        let _done = Done(&self.moves, seq.wrapping_add(2));
        for &(id, loc, checksum) in moves {
            let Some(i) = id.page_index() else {
                panic!("invariant broken: moving directory node {:#x}, not a page", id.0);
            };
            assert!(
                loc >> 32 != 0,
                "invariant broken: a page moved to segment 0 (ids start at 1)"
            );
            let stored = self.pages.load_u64(i, P_LOC);
            match slab_index(stored).and_then(|m| memory.pages.get_mut(m)) {
                Some(slot @ Some(_)) => *slot = None,
                _ => panic!("invariant broken: moving page slot {i}, which holds no in-memory page"),
            }
            memory.free.push(stored as u32);
            self.pages.store_u64(i, P_CHECKSUM, checksum);
            self.pages.store_u64(i, P_LOC, loc);
        }
    }

    /// A new page node (one reference, the caller's).
    pub fn new_page(&self, r: &PageRef) -> NodeId {
        let loc = match &r.loc {
            PageLoc::Disk(l) => {
                assert!(
                    l >> 32 != 0,
                    "invariant broken: a page location in segment 0 (ids start at 1)"
                );
                *l
            }
            PageLoc::Memory(page) => {
                let mut memory = self.memory.lock();
                let m = match memory.free.pop() {
                    Some(m) => {
                        match memory.pages.get_mut(m as usize - 1) {
                            Some(slot) => *slot = Some(page.clone()),
                            None => panic!("invariant broken: free slab entry {m} out of range"),
                        }
                        m
                    }
                    None => {
                        memory.pages.push(Some(page.clone()));
                        u32::try_from(memory.pages.len())
                            .unwrap_or_else(|_| panic!("2^32 in-memory pages"))
                    }
                };
                u64::from(m)
            }
        };
        let i = self.pages.alloc();
        self.pages.store_node(i, &r.node);
        self.pages.store_u64(i, P_LOC, loc);
        self.pages.store_u64(i, P_CHECKSUM, r.checksum);
        self.pages.store(i, P_COUNT, r.count);
        self.pages.get(i)[P_REFS].store(1, Ordering::Relaxed);
        NodeId::of(PAGE, i)
    }

    /// A new branch node over `left` and `right`, taking over the caller's references to them
    /// (one reference to the branch, the caller's). Over two pages it is a twig, whose node is
    /// not stored; otherwise its node is hashed here.
    pub fn new_branch(&self, hasher: Hasher, left: NodeId, right: NodeId) -> NodeId {
        self.new_branch_known(hasher, left, right, None)
    }

    /// [`Arena::new_branch`] with the branch's trie node already `known` (taken from an equal
    /// tree), so it is not hashed again; checked against the hash in debug builds.
    pub fn new_branch_known(
        &self,
        hasher: Hasher,
        left: NodeId,
        right: NodeId,
        known: Option<Node>,
    ) -> NodeId {
        let set = *self.hasher.get_or_init(|| hasher);
        assert!(
            set == hasher,
            "invariant broken: one directory store with two hashers"
        );
        if left.page_index().is_some() && right.page_index().is_some() {
            let i = self.twigs.alloc();
            self.twigs.store(i, T_LEFT, left.0);
            self.twigs.store(i, T_RIGHT, right.0);
            self.twigs.get(i)[T_REFS].store(1, Ordering::Relaxed);
            return NodeId::of(TWIG, i);
        }
        let node = match known {
            Some(node) => {
                debug_assert_eq!(
                    node,
                    parent(hasher, &self.node(left), &self.node(right)),
                    "a branch node taken from a tree that is not equal"
                );
                node
            }
            None => parent(hasher, &self.node(left), &self.node(right)),
        };
        let i = self.branches.alloc();
        self.branches.store_node(i, &node);
        self.branches.store(i, B_LEFT, left.0);
        self.branches.store(i, B_RIGHT, right.0);
        self.branches.get(i)[B_REFS].store(1, Ordering::Relaxed);
        NodeId::of(BRANCH, i)
    }

    fn refs(&self, id: NodeId) -> Option<&AtomicU32> {
        match id.kind() {
            Kind::Empty => None,
            Kind::Page(i) => Some(&self.pages.get(i)[P_REFS]),
            Kind::Twig(i) => Some(&self.twigs.get(i)[T_REFS]),
            Kind::Branch(i) => Some(&self.branches.get(i)[B_REFS]),
        }
    }

    /// One more reference to `id`.
    pub fn share(&self, id: NodeId) -> NodeId {
        if let Some(refs) = self.refs(id) {
            let before = refs.fetch_add(1, Ordering::Relaxed);
            assert!(before > 0, "invariant broken: sharing a freed directory node");
        }
        id
    }

    /// Drop one reference to `id`; whether it was the last.
    fn release_one(&self, id: NodeId) -> bool {
        let Some(refs) = self.refs(id) else {
            return false;
        };
        let before = refs.fetch_sub(1, Ordering::Release);
        assert!(before > 0, "invariant broken: releasing a freed directory node");
        before == 1
    }

    /// Drop a reference to `id`, freeing it (and what only it held) when it was the last.
    pub fn release(&self, id: NodeId) {
        // Most releases drop a shared reference: they need no list of nodes to free.
        if !self.release_one(id) {
            return;
        }
        // Nodes whose last reference is gone, freed a round of up to `RELEASE_ROUND` at a time:
        // the children of the whole round are prefetched before any count is dropped, so their
        // cache misses overlap (a freed version's nodes are scattered over the store). The
        // stack stays bounded by the directory's depth times the round.
        let mut gone = vec![id];
        let mut children: Vec<NodeId> = Vec::with_capacity(2 * RELEASE_ROUND);
        while !gone.is_empty() {
            // Every use of these nodes happened before this point.
            fence(Ordering::Acquire);
            let round = gone.len().saturating_sub(RELEASE_ROUND);
            for id in gone.drain(round..) {
                match id.kind() {
                    Kind::Empty => {}
                    Kind::Page(i) => {
                        let loc = self.pages.load_u64(i, P_LOC);
                        if let Some(m) = slab_index(loc) {
                            let mut memory = self.memory.lock();
                            if let Some(slot) = memory.pages.get_mut(m) {
                                *slot = None;
                                memory.free.push(loc as u32);
                            }
                        }
                        self.pages.release(i);
                    }
                    Kind::Twig(i) => {
                        let (l, r) = self.twig_children(i);
                        self.twigs.release(i);
                        children.extend([l, r]);
                    }
                    Kind::Branch(i) => {
                        let (l, r) = self.branch_children(i);
                        self.branches.release(i);
                        children.extend([l, r]);
                    }
                }
            }
            for child in &children {
                self.prefetch(*child);
            }
            for child in children.drain(..) {
                if self.release_one(child) {
                    gone.push(child);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_positions_cover_every_index_once() {
        let mut seen = std::collections::HashSet::new();
        for i in (0u32..5000).chain([INDEX_MASK]) {
            let (b, o) = position(i);
            assert!(b < BUCKETS && o < 1 << (b as u32 + FIRST_BUCKET_BITS), "{i}");
            assert!(seen.insert((b, o)), "{i}");
        }
        assert_eq!(position(0), (0, 0));
        assert_eq!(position(1023), (0, 1023));
        assert_eq!(position(1024), (1, 0));
    }

    /// The resident set of this process, KiB (Linux).
    #[cfg(target_os = "linux")]
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// A new bucket takes RAM only for the slots written: buckets double, so the last one is
    /// often mostly unused (it took its whole size while it was filled in one by one).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_new_bucket_takes_ram_only_as_slots_are_written() {
        let slots = Slots::<PAGE_WORDS>::new();
        // The first slot of the 2^24-slot bucket (896 MiB of page slots: far more than the
        // other tests running beside this one allocate).
        let first = (1u32 << 24) - (1 << FIRST_BUCKET_BITS);
        assert_eq!(position(first), (14, 0));
        slots.next.store(first, Ordering::Relaxed);
        let before = rss_kib();
        let i = slots.alloc();
        slots.store(i, P_COUNT, 5);
        let grown = rss_kib().saturating_sub(before);
        assert_eq!(slots.load(i, P_COUNT), 5);
        let bucket_kib = (1u64 << 24) * PAGE_WORDS as u64 * 4 / 1024;
        assert!(
            grown < bucket_kib / 4,
            "one slot written made {grown} KiB resident (the bucket is {bucket_kib} KiB)"
        );
    }

    fn page(n: u8) -> PageRef {
        PageRef {
            loc: PageLoc::Disk(1 << 32 | u64::from(n)),
            checksum: 7,
            node: [n; 32],
            count: 3,
        }
    }

    #[test]
    fn nodes_are_freed_with_their_last_reference_and_reused() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let l = a.new_page(&page(1));
        let r = a.new_page(&page(2));
        let b = a.new_branch(h, l, r);
        assert_eq!(a.live(), (1, 2));
        // A second version shares the left page under a new branch.
        let r2 = a.new_page(&page(3));
        let b2 = a.new_branch(h, a.share(l), r2);
        assert_eq!(a.live(), (2, 3));
        a.release(b);
        assert_eq!(a.live(), (1, 2), "the shared page stays");
        assert!(matches!(a.slot(l), Slot::Page(p) if p.node == [1; 32]));
        a.release(b2);
        assert_eq!(a.live(), (0, 0));
        assert_eq!(a.live_bytes(), 0);
        // Freed slots are reused.
        let again = a.new_page(&page(4));
        assert!(again == l || again == r || again == r2);
        a.release(again);
    }

    /// A branch over two pages is a twig: no node stored, the same node and kind as a branch
    /// that stores it, and a third of the bytes; a branch over anything else stores its node.
    #[test]
    fn twigs_hash_their_node_when_asked() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let mut leaf = page(5);
        leaf.node = h.hash_leaf(&[1; 32], &[2; 32]);
        let mut empty = page(6);
        empty.node = TERMINATOR;
        for (x, y) in [(page(1), page(2)), (leaf.clone(), empty.clone()), (empty.clone(), empty.clone()), (page(3), leaf)] {
            let twig = a.new_branch(h, a.new_page(&x), a.new_page(&y));
            assert_eq!(a.twigs.live.load(Ordering::Relaxed), 1);
            let want = parent(h, &x.node, &y.node);
            assert_eq!(a.node(twig), want);
            assert_eq!(a.node_kind(twig), Hasher::node_kind(&want));
            assert!(matches!(a.slot(twig), Slot::Branch(..)));
            // Above a twig, a branch stores its node.
            let top = a.new_branch(h, twig, NodeId::EMPTY);
            assert_eq!(a.branches.live.load(Ordering::Relaxed), 1);
            assert_eq!(a.node(top), parent(h, &want, &TERMINATOR));
            assert_eq!(a.node_kind(top), Hasher::node_kind(&a.node(top)));
            assert_eq!(a.live_bytes(), 4 * (BRANCH_WORDS + TWIG_WORDS + 2 * PAGE_WORDS) as u64);
            a.release(top);
            assert_eq!(a.live(), (0, 0));
        }
    }

    #[test]
    fn in_memory_pages_are_held_until_their_node_goes() {
        let a = Arena::new();
        let mem = memory_page();
        let id = memory_slot(&a, &mem, 0);
        assert_eq!(Arc::strong_count(&mem), 2);
        assert!(matches!(a.slot(id), Slot::Page(PageRef { loc: PageLoc::Memory(_), .. })));
        a.release(id);
        assert_eq!(Arc::strong_count(&mem), 1);
    }

    fn memory_page() -> Arc<MemoryPage> {
        MemoryPage::new(Arc::new(
            crate::state::page::Page::build(
                sprig_core::Hasher::Blake3,
                crate::state::prefix::Prefix::root(),
                1,
                &[],
            )
            .unwrap(),
        ))
    }

    fn memory_slot(a: &Arena, mem: &Arc<MemoryPage>, count: u32) -> NodeId {
        a.new_page(&PageRef {
            loc: PageLoc::Memory(mem.clone()),
            checksum: 0,
            node: [count as u8; 32],
            count,
        })
    }

    #[test]
    fn a_page_moved_to_disk_is_read_there_and_frees_its_slab_entry() {
        let a = Arena::new();
        let mem = memory_page();
        let id = memory_slot(&a, &mem, 7);
        let held = a.slot(id); // a reference taken before the move keeps the page
        a.move_to_disk(&[(id, 5 << 32 | 9, 0xabc)]);
        match a.slot(id) {
            Slot::Page(r) => {
                assert!(matches!(r.loc, PageLoc::Disk(l) if l == 5 << 32 | 9));
                assert_eq!((r.checksum, r.node, r.count), (0xabc, [7; 32], 7));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Arc::strong_count(&mem), 2, "the slab let go; the earlier reference holds");
        drop(held);
        // The freed slab entry is taken by the next in-memory page.
        let next = memory_slot(&a, &memory_page(), 1);
        assert_eq!(a.memory.lock().pages.len(), 1);
        a.release(next);
        a.release(id);
        assert_eq!(a.live(), (0, 0));
        assert_eq!(Arc::strong_count(&mem), 1);
    }

    /// A move that finds a broken invariant panics, and leaves the sequence word even:
    /// readers go on (they would spin for good on an odd word).
    #[test]
    fn a_move_that_panics_leaves_readers_working() {
        let a = Arena::new();
        let id = memory_slot(&a, &memory_page(), 3);
        let moved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The same slot twice: its second move finds no in-memory page.
            a.move_to_disk(&[(id, 2 << 32, 5), (id, 2 << 32 | 1, 6)]);
        }));
        assert!(moved.is_err());
        assert_eq!(a.moves.load(Ordering::Relaxed) & 1, 0);
        assert!(matches!(a.slot(id), Slot::Page(PageRef { loc: PageLoc::Disk(l), .. }) if l == 2 << 32));
    }

    #[test]
    #[should_panic(expected = "holds no in-memory page")]
    fn only_pages_held_in_memory_move() {
        let a = Arena::new();
        let id = a.new_page(&PageRef {
            loc: PageLoc::Disk(3 << 32),
            checksum: 1,
            node: TERMINATOR,
            count: 0,
        });
        a.move_to_disk(&[(id, 4 << 32, 2)]);
    }

    /// Readers racing with moves never see a location with another's checksum, nor a torn
    /// location: each move writes a checksum derived from its location, and readers check it.
    #[test]
    fn readers_racing_with_moves_see_each_page_whole() {
        let a = Arena::new();
        let rounds = 200u64;
        let per_round = 64u64;
        let stop = std::sync::atomic::AtomicBool::new(false);
        let passes = AtomicU64::new(0);
        let ids: Vec<Vec<NodeId>> = (0..rounds)
            .map(|_| (0..per_round).map(|_| memory_slot(&a, &memory_page(), 1)).collect())
            .collect();
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seen = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for round in &ids {
                        for id in round {
                            if let Slot::Page(r) = a.slot(*id) {
                                if let PageLoc::Disk(l) = r.loc {
                                    assert_eq!(r.checksum, l.rotate_left(17) ^ 0x5bd1, "torn at {l:#x}");
                                    seen += 1;
                                }
                            }
                        }
                    }
                    passes.fetch_add(1, Ordering::Release);
                }
                seen
            });
            for (n, round) in ids.iter().enumerate() {
                // Let the reader go over the slots between moves, as well as during them.
                let start = passes.load(Ordering::Acquire);
                while passes.load(Ordering::Acquire) == start && !reader.is_finished() {
                    std::thread::yield_now();
                }
                let moves: Vec<(NodeId, u64, u64)> = round
                    .iter()
                    .enumerate()
                    // Segment and block both change with each move, so a torn read shows.
                    .map(|(k, id)| {
                        let l = (n as u64 + 1) << 32 | (0xffff_0000 + k as u64);
                        (*id, l, l.rotate_left(17) ^ 0x5bd1)
                    })
                    .collect();
                a.move_to_disk(&moves);
            }
            stop.store(true, Ordering::Relaxed);
            assert!(reader.join().unwrap() > 0);
        });
        for round in ids {
            for id in round {
                a.release(id);
            }
        }
        assert_eq!(a.live(), (0, 0));
    }
}
