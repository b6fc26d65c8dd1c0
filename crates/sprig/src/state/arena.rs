//! The directory's node store: fixed-size node slots in growing buckets, addressed by 32-bit
//! ids, shared by every version of one database's directory, each slot reference-counted.
//!
//! Four kinds of slot, so that no node carries what it can do without:
//! - a twig is a branch over two pages and holds both pages (100 bytes): each page's trie
//!   node, location, checksum and entry count (48 bytes), and one count of references. Its own
//!   trie node is one hash of the two page nodes, computed when asked for. Nine in ten pages of
//!   a directory of hashed keys sit in twigs; a page in a twig has an id of its own (the twig's
//!   index and side), and a reference to it is a reference to the twig;
//! - a page slot holds a page whose sibling is not a page (52 bytes);
//! - a low branch is a branch of height 2 or 3 over twigs and pages, or of height 1 over a page
//!   and an empty region (12 bytes: its children and references). Its node is not stored
//!   either: it takes at most 7 hashes, computed when asked for, and a commit asks for an
//!   unchanged one's node at most once per changed path beside it;
//! - a branch above those holds its trie node and two child ids (44 bytes).
//!
//! That is about 61 bytes per leaf page of a directory of hashed keys (utxo 10M: 61.4; the page
//! node alone is 32), within the 64 the engine's memory bound allows.
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
//! a page's location, checksum and entry count check a sequence word that every such move
//! bumps, and read again if one ran meanwhile (a seqlock: moves are rare and short, reads
//! many). Counts use release/acquire so that freeing a slot happens after every use of it.

use crate::io::BLOCK_BYTES;
use crate::options::MAX_SEGMENT_BYTES;
use crate::state::page::MAX_PAGE_ENTRIES;
use crate::state::page_ref::{MemoryPage, PageLoc, PageRef};
use parking_lot::Mutex;
use sprig_core::trie::{parent, parent_kind, Node, NodeKind, TERMINATOR};
use sprig_core::Hasher;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The id of a node: its kind in the top three bits, its slot index in the rest; or the empty
/// region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

const KIND_SHIFT: u32 = 29;
const INDEX_MASK: u32 = (1 << KIND_SHIFT) - 1;
/// A branch that stores its node.
const BRANCH: u32 = 0;
/// A twig: a branch over two pages, holding both.
const TWIG: u32 = 1;
/// A page in a slot of its own.
const PAGE: u32 = 2;
/// A page in a twig: index twice the twig's, plus one for the right side.
const INLINE: u32 = 3;
/// A low branch of height 1, 2 or 3: `LOW + height - 1`.
const LOW: u32 = 4;
/// The greatest height of a low branch: its node takes at most `2^LOW_HEIGHT - 1` hashes.
const LOW_HEIGHT: u32 = 3;
const LOW_LAST: u32 = LOW + LOW_HEIGHT - 1;

/// What kind of slot an id names.
enum Kind {
    Empty,
    Branch(u32),
    Twig(u32),
    Page(u32),
    /// The twig's index, and whether it is its right page.
    Inline(u32, bool),
    /// The slot index, and the branch's height.
    Low(u32, u32),
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
        matches!(self.kind(), Kind::Page(_) | Kind::Inline(..))
    }

    fn of(kind: u32, index: u32) -> NodeId {
        assert!(
            index <= INDEX_MASK,
            "the directory holds 2^29 nodes of one kind"
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
            INLINE => Kind::Inline(index >> 1, index & 1 == 1),
            k @ LOW..=LOW_LAST => Kind::Low(index, k - LOW + 1),
            _ => panic!("invariant broken: directory node id {:#x} of no kind", self.0),
        }
    }
}

/// Nodes freed per round when a version's nodes are released (see [`Arena::release`]).
const RELEASE_ROUND: usize = 64;

/// The smallest bucket holds this many slots; bucket `b` holds `2^(b + FIRST_BUCKET_BITS)`.
const FIRST_BUCKET_BITS: u32 = 10;
/// Enough buckets for 2^30 slots (ids address 2^29 of each kind).
const BUCKETS: usize = 21;

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

    /// A free slot (its fields to be written by the caller), at most `max`.
    fn alloc(&self, max: u32) -> u32 {
        self.live.fetch_add(1, Ordering::Relaxed);
        if let Some(i) = self.free.lock().pop() {
            return i;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(i <= max, "the directory holds {max} + 1 nodes of one kind");
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

    /// Give back the slots `ids` (freed together: one turn of the free list's lock, which the
    /// committing thread's allocations take too, instead of one per slot).
    fn release_all(&self, ids: &mut Vec<u32>) {
        if ids.is_empty() {
            return;
        }
        self.live.fetch_sub(ids.len() as u64, Ordering::Relaxed);
        self.free.lock().append(ids);
    }
}

fn load(words: &[AtomicU32], at: usize) -> u32 {
    match words.get(at) {
        Some(w) => w.load(Ordering::Relaxed),
        None => panic!("invariant broken: directory slot field {at} past its slot"),
    }
}

fn store(words: &[AtomicU32], at: usize, v: u32) {
    match words.get(at) {
        Some(w) => w.store(v, Ordering::Relaxed),
        None => panic!("invariant broken: directory slot field {at} past its slot"),
    }
}

/// The trie node in the first eight words of `words`.
fn load_node(words: &[AtomicU32]) -> Node {
    let mut node = [0u8; 32];
    for (chunk, word) in node.chunks_exact_mut(4).zip(words.iter()) {
        chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
    node
}

fn store_node(words: &[AtomicU32], node: &Node) {
    for (chunk, word) in node.chunks_exact(4).zip(words.iter()) {
        let mut b = [0u8; 4];
        b.copy_from_slice(chunk);
        word.store(u32::from_le_bytes(b), Ordering::Relaxed);
    }
}

fn load_u64(words: &[AtomicU32], at: usize) -> u64 {
    u64::from(load(words, at)) | (u64::from(load(words, at + 1)) << 32)
}

fn store_u64(words: &[AtomicU32], at: usize, v: u64) {
    store(words, at, v as u32);
    store(words, at + 1, (v >> 32) as u32);
}

/// Prefetch the cache lines of `words` (one slot, or one page of a twig).
fn prefetch_words(words: &[AtomicU32]) {
    crate::state::prefetch::prefetch_span(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words));
}

// A page's fields (in a page slot, or either half of a twig): node (8 words), stored location
// (2), checksum word (2). See `PageWords`.
const PF_LOC: usize = 8;
const PF_SUM: usize = 10;
const PAGE_FIELDS: usize = 12;
// Branch slot fields: node (8 words), left, right, count of references.
const B_LEFT: usize = 8;
const B_RIGHT: usize = 9;
const B_REFS: usize = 10;
const BRANCH_WORDS: usize = 11;
// Low branch slot fields: left, right, count of references.
const L_LEFT: usize = 0;
const L_RIGHT: usize = 1;
const L_REFS: usize = 2;
const LOW_WORDS: usize = 3;
// Page slot fields: the page, count of references.
const P_REFS: usize = PAGE_FIELDS;
const PAGE_WORDS: usize = PAGE_FIELDS + 1;
// Twig slot fields: left page, right page, count of references.
const T_REFS: usize = 2 * PAGE_FIELDS;
const TWIG_WORDS: usize = 2 * PAGE_FIELDS + 1;

/// Bits of the block index in a stored disk location: segments hold at most 2^22 blocks.
const LOC_BLOCK_BITS: u32 = 22;
/// Bits of the entry count, above the block index in a stored disk location.
const COUNT_BITS: u32 = 10;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const _: () = assert!(MAX_SEGMENT_BYTES / BLOCK_BYTES as u64 <= 1 << LOC_BLOCK_BITS);
const _: () = assert!((MAX_PAGE_ENTRIES as u64) <= COUNT_MASK);
const _: () = assert!(LOC_BLOCK_BITS + COUNT_BITS == 32);

/// A page's location, checksum and entry count as stored in two 64-bit words:
/// - on disk: the location (segment id, never 0, in the high 32 bits) with the entry count in
///   the bits of the block index no segment uses, and the checksum;
/// - in memory (segment 0): the page's index in the arena's slab plus one, and the entry
///   count in place of the checksum (always 0 for a page in memory).
#[derive(Clone, Copy)]
struct PageWords {
    loc: u64,
    sum: u64,
}

impl PageWords {
    fn disk(loc: u64, checksum: u64, count: u32) -> PageWords {
        assert!(
            loc >> 32 != 0,
            "invariant broken: a page location in segment 0 (ids start at 1)"
        );
        assert!(
            loc as u32 >> LOC_BLOCK_BITS == 0,
            "invariant broken: a page location past the largest segment"
        );
        PageWords {
            loc: loc | (u64::from(count) & COUNT_MASK) << LOC_BLOCK_BITS,
            sum: checksum,
        }
    }

    fn memory(slab: u32, count: u32) -> PageWords {
        PageWords {
            loc: u64::from(slab),
            sum: u64::from(count),
        }
    }

    /// The slab index of a page in memory, or none for one on disk. A stored 0 gives an index
    /// past any slab: no page, as for a freed entry.
    fn slab_index(self) -> Option<usize> {
        (self.loc >> 32 == 0).then(|| (self.loc as usize).wrapping_sub(1))
    }

    /// (disk location, checksum), if on disk.
    fn on_disk(self) -> Option<(u64, u64)> {
        (self.loc >> 32 != 0).then_some((self.loc & !(COUNT_MASK << LOC_BLOCK_BITS), self.sum))
    }

    fn count(self) -> u32 {
        match self.on_disk() {
            Some(_) => (self.loc >> LOC_BLOCK_BITS & COUNT_MASK) as u32,
            None => self.sum as u32,
        }
    }

    fn load(words: &[AtomicU32]) -> PageWords {
        PageWords {
            loc: load_u64(words, PF_LOC),
            sum: load_u64(words, PF_SUM),
        }
    }

    fn store(self, words: &[AtomicU32]) {
        store_u64(words, PF_SUM, self.sum);
        store_u64(words, PF_LOC, self.loc);
    }
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
    lows: Slots<LOW_WORDS>,
    twigs: Slots<TWIG_WORDS>,
    pages: Slots<PAGE_WORDS>,
    /// The hasher of unstored nodes: set by the first branch, the same for every later one.
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

impl MemoryPages {
    /// A slab entry for `page` (as stored: index plus one).
    fn hold(&mut self, page: Arc<MemoryPage>) -> u32 {
        match self.free.pop() {
            Some(m) => {
                match self.pages.get_mut(m as usize - 1) {
                    Some(slot) => *slot = Some(page),
                    None => panic!("invariant broken: free slab entry {m} out of range"),
                }
                m
            }
            None => {
                self.pages.push(Some(page));
                u32::try_from(self.pages.len()).unwrap_or_else(|_| panic!("2^32 in-memory pages"))
            }
        }
    }

    /// Free the slab entry of a page with stored `words`, if it is in memory.
    fn let_go(&mut self, words: PageWords) {
        if let Some(m) = words.slab_index() {
            if let Some(slot) = self.pages.get_mut(m) {
                *slot = None;
                self.free.push(words.loc as u32);
            }
        }
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("branches", &self.branches.live.load(Ordering::Relaxed))
            .field("lows", &self.lows.live.load(Ordering::Relaxed))
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
            lows: Slots::new(),
            twigs: Slots::new(),
            pages: Slots::new(),
            hasher: OnceLock::new(),
            memory: Mutex::new(MemoryPages::default()),
            moves: AtomicU64::new(0),
        })
    }

    /// Live (branches, pages): what the directory holds in memory (twigs and low branches
    /// count as branches, and a twig's pages as pages).
    pub fn live(&self) -> (u64, u64) {
        let live = |l: &AtomicU64| l.load(Ordering::Relaxed);
        let twigs = live(&self.twigs.live);
        (
            live(&self.branches.live) + live(&self.lows.live) + twigs,
            live(&self.pages.live) + 2 * twigs,
        )
    }

    /// The bytes the live nodes take.
    pub fn live_bytes(&self) -> u64 {
        let bytes = |live: &AtomicU64, words: usize| live.load(Ordering::Relaxed) * words as u64 * 4;
        bytes(&self.branches.live, BRANCH_WORDS)
            + bytes(&self.lows.live, LOW_WORDS)
            + bytes(&self.twigs.live, TWIG_WORDS)
            + bytes(&self.pages.live, PAGE_WORDS)
    }

    /// The bytes of every slot handed out at least once, free ones included: what the store
    /// has made resident (free slots are reused before new ones are taken).
    pub fn slot_bytes(&self) -> u64 {
        let bytes = |next: &AtomicU32, words: usize| u64::from(next.load(Ordering::Relaxed)) * words as u64 * 4;
        bytes(&self.branches.next, BRANCH_WORDS)
            + bytes(&self.lows.next, LOW_WORDS)
            + bytes(&self.twigs.next, TWIG_WORDS)
            + bytes(&self.pages.next, PAGE_WORDS)
    }

    fn hasher(&self) -> Hasher {
        match self.hasher.get() {
            Some(&h) => h,
            None => panic!("invariant broken: an unstored node in a store that never made a branch"),
        }
    }

    /// The trie node of `id` (a twig's and a low branch's are hashed here: at most
    /// `2^LOW_HEIGHT - 1` hashes).
    pub fn node(&self, id: NodeId) -> Node {
        match id.kind() {
            Kind::Empty => TERMINATOR,
            Kind::Branch(i) => load_node(self.branches.get(i)),
            Kind::Page(_) | Kind::Inline(..) => load_node(self.page_fields(id)),
            Kind::Twig(_) | Kind::Low(..) => {
                let (l, r) = self.branch_children(id);
                parent(self.hasher(), &self.node(l), &self.node(r))
            }
        }
    }

    /// The stored trie node of `id` if it is a branch that stores it.
    pub fn branch_node(&self, id: NodeId) -> Option<Node> {
        match id.kind() {
            Kind::Branch(i) => Some(load_node(self.branches.get(i))),
            _ => None,
        }
    }

    /// The kind of `id`'s trie node, without hashing an unstored one.
    pub fn node_kind(&self, id: NodeId) -> NodeKind {
        match (id.kind(), self.children(id)) {
            (Kind::Twig(_) | Kind::Low(..), Some((l, r))) => {
                parent_kind(self.node_kind(l), self.node_kind(r))
            }
            _ => Hasher::node_kind(&self.node(id)),
        }
    }

    /// Whether `id` is a low branch: its node is not stored but hashed from its children's,
    /// which sit in slots of their own (a twig holds its pages in its own slot).
    pub fn is_low(&self, id: NodeId) -> bool {
        matches!(id.kind(), Kind::Low(..))
    }

    /// The height of `id` as far as low branches go: 0 for a page or an empty region, more
    /// than [`LOW_HEIGHT`] for a branch that stores its node.
    fn height(&self, id: NodeId) -> u32 {
        match id.kind() {
            Kind::Empty | Kind::Page(_) | Kind::Inline(..) => 0,
            Kind::Twig(_) => 1,
            Kind::Low(_, h) => h,
            Kind::Branch(_) => LOW_HEIGHT + 1,
        }
    }

    /// The fields of page `id` (its own slot's, or its half of a twig's).
    fn page_fields(&self, id: NodeId) -> &[AtomicU32] {
        let fields = match id.kind() {
            Kind::Page(i) => self.pages.get(i).get(..PAGE_FIELDS),
            Kind::Inline(t, right) => {
                let at = usize::from(right) * PAGE_FIELDS;
                self.twigs.get(t).get(at..at + PAGE_FIELDS)
            }
            _ => None,
        };
        match fields {
            Some(f) => f,
            None => panic!("invariant broken: directory node {:#x} is not a page", id.0),
        }
    }

    /// What `id` is.
    pub fn slot(&self, id: NodeId) -> Slot {
        match id.kind() {
            Kind::Empty => Slot::Empty,
            Kind::Page(_) | Kind::Inline(..) => Slot::Page(self.page_ref(id)),
            Kind::Branch(_) | Kind::Low(..) | Kind::Twig(_) => {
                let (l, r) = self.branch_children(id);
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
            Kind::Branch(i) => prefetch_words(self.branches.get(i)),
            Kind::Low(i, _) => prefetch_words(self.lows.get(i)),
            Kind::Twig(t) => prefetch_words(self.twigs.get(t)),
            Kind::Page(_) | Kind::Inline(..) => prefetch_words(self.page_fields(id)),
        }
    }

    /// The children of a branch, if `id` is one.
    pub fn children(&self, id: NodeId) -> Option<(NodeId, NodeId)> {
        match id.kind() {
            Kind::Branch(i) => {
                let s = self.branches.get(i);
                Some((NodeId(load(s, B_LEFT)), NodeId(load(s, B_RIGHT))))
            }
            Kind::Low(i, _) => {
                let s = self.lows.get(i);
                Some((NodeId(load(s, L_LEFT)), NodeId(load(s, L_RIGHT))))
            }
            Kind::Twig(t) => Some((NodeId::of(INLINE, 2 * t), NodeId::of(INLINE, 2 * t + 1))),
            Kind::Empty | Kind::Page(_) | Kind::Inline(..) => None,
        }
    }

    /// The children of `id`, which is a branch, a low branch or a twig (a broken invariant
    /// otherwise).
    pub fn branch_children(&self, id: NodeId) -> (NodeId, NodeId) {
        match self.children(id) {
            Some(children) => children,
            None => panic!("invariant broken: directory node {:#x} is not a branch", id.0),
        }
    }

    /// The entry count of a page, if `id` is one.
    pub fn page_count(&self, id: NodeId) -> Option<u32> {
        id.is_page()
            .then(|| self.read_moving(self.page_fields(id), |w| Some(w.count())))
    }

    /// `f` of the stored location words of a page with `fields`, read consistently with any
    /// move of pages to disk running meanwhile: read again if one ran, or if `f` found the
    /// words inconsistent (none: a slab entry a move freed).
    fn read_moving<T>(&self, fields: &[AtomicU32], f: impl Fn(PageWords) -> Option<T>) -> T {
        loop {
            let before = self.moves.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let got = f(PageWords::load(fields));
            // Order the reads above before the second look at the sequence word.
            fence(Ordering::Acquire);
            if self.moves.load(Ordering::Relaxed) != before {
                continue;
            }
            match got {
                Some(t) => return t,
                None => panic!("invariant broken: in-memory page of a live slot is gone"),
            }
        }
    }

    /// Page `id` as a reference: its location, checksum and count read consistently with any
    /// move of the page to disk running meanwhile (read again if one did).
    ///
    /// A page in memory whose commit is durable is on disk where that commit wrote it, also
    /// when this slot was not moved there: a copy of it in a twig another overlay made (a
    /// commit moves the pages of its own directory only).
    fn page_ref(&self, id: NodeId) -> PageRef {
        let fields = self.page_fields(id);
        let (loc, checksum, count) = self.read_moving(fields, |w| {
            let (loc, checksum) = match (w.on_disk(), w.slab_index()) {
                (Some((l, sum)), _) => (PageLoc::Disk(l), sum),
                (None, Some(m)) => {
                    let page = self.memory.lock().pages.get(m)?.as_ref()?.clone();
                    match page.written() {
                        Some((l, sum)) => (PageLoc::Disk(l), sum),
                        None => (PageLoc::Memory(page), 0),
                    }
                }
                (None, None) => return None,
            };
            Some((loc, checksum, w.count()))
        });
        PageRef {
            loc,
            checksum,
            node: load_node(fields),
            count,
        }
    }

    /// Move pages held in memory to where their commit wrote them: each `(id, location,
    /// checksum)` names a page that is held in memory, which from now on every version sharing
    /// its slot reads at `location` (the same page, its value pointers resolved). The slab
    /// entries of the in-memory pages are freed; holders of a [`PageRef`] taken before keep
    /// the page through its [`MemoryPage`]. Readers that race with the move read the slot
    /// again (see `Arena::read_moving`).
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
            if !id.is_page() {
                panic!("invariant broken: moving directory node {:#x}, not a page", id.0);
            }
            let fields = self.page_fields(id);
            let stored = PageWords::load(fields);
            match stored.slab_index().and_then(|m| memory.pages.get(m)) {
                Some(Some(_)) => memory.let_go(stored),
                _ => panic!("invariant broken: moving page {:#x}, which holds no in-memory page", id.0),
            }
            PageWords::disk(loc, checksum, stored.count()).store(fields);
        }
    }

    /// Write page `r` into `fields` (a new slot's, not yet handed out).
    fn write_page(&self, fields: &[AtomicU32], r: &PageRef) {
        assert!(
            r.count as usize <= MAX_PAGE_ENTRIES,
            "invariant broken: a page of {} entries",
            r.count
        );
        let words = match &r.loc {
            PageLoc::Disk(l) => PageWords::disk(*l, r.checksum, r.count),
            PageLoc::Memory(page) => {
                assert!(
                    r.checksum == 0,
                    "invariant broken: a page in memory with a checksum"
                );
                PageWords::memory(self.memory.lock().hold(page.clone()), r.count)
            }
        };
        store_node(fields, &r.node);
        words.store(fields);
    }

    /// A new page node (one reference, the caller's).
    pub fn new_page(&self, r: &PageRef) -> NodeId {
        let i = self.pages.alloc(INDEX_MASK);
        let slot = self.pages.get(i);
        self.write_page(&slot[..PAGE_FIELDS], r);
        slot[P_REFS].store(1, Ordering::Relaxed);
        NodeId::of(PAGE, i)
    }

    /// A new branch node over `left` and `right`, taking over the caller's references to them
    /// (one reference to the branch, the caller's). Over two pages it is a twig, which holds
    /// them; low in the tree it is a low branch; in both its node is not stored. Otherwise its
    /// node is hashed here.
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
        if left.is_page() && right.is_page() {
            return self.new_twig(left, right);
        }
        let height = 1 + self.height(left).max(self.height(right));
        if height <= LOW_HEIGHT {
            let i = self.lows.alloc(INDEX_MASK);
            let s = self.lows.get(i);
            store(s, L_LEFT, left.0);
            store(s, L_RIGHT, right.0);
            s[L_REFS].store(1, Ordering::Relaxed);
            return NodeId::of(LOW + height - 1, i);
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
        let i = self.branches.alloc(INDEX_MASK);
        let s = self.branches.get(i);
        store_node(s, &node);
        store(s, B_LEFT, left.0);
        store(s, B_RIGHT, right.0);
        s[B_REFS].store(1, Ordering::Relaxed);
        NodeId::of(BRANCH, i)
    }

    /// A twig over pages `left` and `right`, taking over the caller's references to them. The
    /// two pages of one twig, in its order, are that twig; others are copied into a new one.
    fn new_twig(&self, left: NodeId, right: NodeId) -> NodeId {
        if let (Kind::Inline(a, false), Kind::Inline(b, true)) = (left.kind(), right.kind()) {
            if a == b {
                // Two references to the twig become one.
                self.release(right);
                return NodeId::of(TWIG, a);
            }
        }
        let t = self.twigs.alloc(INDEX_MASK >> 1);
        let slot = self.twigs.get(t);
        for (side, page) in [left, right].into_iter().enumerate() {
            let at = side * PAGE_FIELDS;
            let to = &slot[at..at + PAGE_FIELDS];
            match page.kind() {
                // A page slot only the caller holds (a page just built) moves into the twig
                // whole, its slab entry with it: no other reference can see it go.
                Kind::Page(i) if self.pages.get(i)[P_REFS].load(Ordering::Acquire) == 1 => {
                    for (to, from) in to.iter().zip(self.pages.get(i).iter()) {
                        to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    self.pages.release(i);
                }
                _ => {
                    self.write_page(to, &self.page_ref(page));
                    self.release(page);
                }
            }
        }
        slot[T_REFS].store(1, Ordering::Relaxed);
        NodeId::of(TWIG, t)
    }

    fn refs(&self, id: NodeId) -> Option<&AtomicU32> {
        match id.kind() {
            Kind::Empty => None,
            Kind::Page(i) => Some(&self.pages.get(i)[P_REFS]),
            Kind::Twig(t) | Kind::Inline(t, _) => Some(&self.twigs.get(t)[T_REFS]),
            Kind::Low(i, _) => Some(&self.lows.get(i)[L_REFS]),
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
        // The round's freed slots of each kind, given back together at its end (allocated
        // only for the kinds a release frees).
        let [mut pages, mut twigs, mut lows, mut branches]: [Vec<u32>; 4] = Default::default();
        while !gone.is_empty() {
            // Every use of these nodes happened before this point.
            fence(Ordering::Acquire);
            let round = gone.len().saturating_sub(RELEASE_ROUND);
            for id in gone.drain(round..) {
                match id.kind() {
                    Kind::Empty => {}
                    Kind::Page(i) => {
                        let words = PageWords::load(&self.pages.get(i)[..PAGE_FIELDS]);
                        if words.slab_index().is_some() {
                            self.memory.lock().let_go(words);
                        }
                        pages.push(i);
                    }
                    // The last reference to a page of a twig was the last to the twig.
                    Kind::Twig(t) | Kind::Inline(t, _) => {
                        let slot = self.twigs.get(t);
                        let (l, r) = (PageWords::load(slot), PageWords::load(&slot[PAGE_FIELDS..]));
                        if l.slab_index().is_some() || r.slab_index().is_some() {
                            let mut memory = self.memory.lock();
                            memory.let_go(l);
                            memory.let_go(r);
                        }
                        twigs.push(t);
                    }
                    Kind::Low(i, _) => {
                        let (l, r) = self.branch_children(id);
                        children.extend([l, r]);
                        lows.push(i);
                    }
                    Kind::Branch(i) => {
                        let (l, r) = self.branch_children(id);
                        children.extend([l, r]);
                        branches.push(i);
                    }
                }
            }
            self.pages.release_all(&mut pages);
            self.twigs.release_all(&mut twigs);
            self.lows.release_all(&mut lows);
            self.branches.release_all(&mut branches);
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
        let slots = Slots::<TWIG_WORDS>::new();
        // The first slot of the 2^23-slot bucket (800 MiB of twig slots: far more than the
        // other tests running beside this one allocate).
        let first = (1u32 << 23) - (1 << FIRST_BUCKET_BITS);
        assert_eq!(position(first), (13, 0));
        slots.next.store(first, Ordering::Relaxed);
        let before = rss_kib();
        let i = slots.alloc(INDEX_MASK);
        store(slots.get(i), T_REFS, 5);
        let grown = rss_kib().saturating_sub(before);
        assert_eq!(load(slots.get(i), T_REFS), 5);
        let bucket_kib = (1u64 << 23) * TWIG_WORDS as u64 * 4 / 1024;
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

    fn same_page(a: &PageRef, b: &PageRef) -> bool {
        let loc = |r: &PageRef| match &r.loc {
            PageLoc::Disk(l) => Some(*l),
            PageLoc::Memory(_) => None,
        };
        (loc(a), a.checksum, a.node, a.count) == (loc(b), b.checksum, b.node, b.count)
    }

    #[test]
    fn nodes_are_freed_with_their_last_reference_and_reused() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let b = a.new_branch(h, a.new_page(&page(1)), a.new_page(&page(2)));
        // The two page slots went into the twig.
        assert_eq!(a.live(), (1, 2));
        assert_eq!(a.pages.live.load(Ordering::Relaxed), 0);
        // A second version shares the left page under a new branch.
        let (l, _) = a.children(b).unwrap();
        let b2 = a.new_branch(h, a.share(l), a.new_page(&page(3)));
        assert_eq!(a.live(), (2, 4));
        a.release(b);
        assert_eq!(a.live(), (1, 2));
        let (l2, r2) = a.children(b2).unwrap();
        assert!(matches!(a.slot(l2), Slot::Page(p) if same_page(&p, &page(1))));
        assert!(matches!(a.slot(r2), Slot::Page(p) if same_page(&p, &page(3))));
        a.release(b2);
        assert_eq!(a.live(), (0, 0));
        assert_eq!(a.live_bytes(), 0);
        // Freed slots are reused.
        let again = a.new_branch(h, a.new_page(&page(4)), a.new_page(&page(5)));
        assert_eq!(a.twigs.next.load(Ordering::Relaxed), 2);
        a.release(again);
    }

    /// The two pages of a twig put back together in its order are that twig, not a copy; in
    /// the other order, or beside another page, they are copied.
    #[test]
    fn a_twig_rebuilt_from_its_own_pages_is_itself() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let t = a.new_branch(h, a.new_page(&page(1)), a.new_page(&page(2)));
        let (l, r) = a.children(t).unwrap();
        assert_eq!(a.new_branch(h, a.share(l), a.share(r)), t);
        assert_eq!(a.refs(t).unwrap().load(Ordering::Relaxed), 2);
        let swapped = a.new_branch(h, a.share(r), a.share(l));
        assert_ne!(swapped, t);
        assert_eq!(a.node(swapped), parent(h, &[2; 32], &[1; 32]));
        a.release(t);
        a.release(swapped);
        a.release(t);
        assert_eq!(a.live(), (0, 0));
    }

    /// The tree of `n` pages (a power of two) numbered from `first`, built bottom up.
    fn balanced(a: &Arena, h: Hasher, first: u8, n: u8) -> NodeId {
        if n == 1 {
            return a.new_page(&page(first));
        }
        let l = balanced(a, h, first, n / 2);
        let r = balanced(a, h, first + n / 2, n / 2);
        a.new_branch(h, l, r)
    }

    /// The node of that tree, hashed from scratch.
    fn balanced_node(h: Hasher, first: u8, n: u8) -> Node {
        if n == 1 {
            return [first; 32];
        }
        let l = balanced_node(h, first, n / 2);
        parent(h, &l, &balanced_node(h, first + n / 2, n / 2))
    }

    /// Twigs and branches of height 2 and 3 store no node; the branches above them do. Every
    /// node is the one hashed from scratch, whether stored or not.
    #[test]
    fn low_nodes_are_hashed_when_asked() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let top = balanced(&a, h, 1, 32);
        let count = |l: &AtomicU64| l.load(Ordering::Relaxed);
        assert_eq!(count(&a.twigs.live), 16);
        assert_eq!(count(&a.lows.live), 8 + 4);
        assert_eq!(count(&a.branches.live), 2 + 1);
        assert_eq!(count(&a.pages.live), 0);
        assert_eq!(a.live(), (31, 32));
        assert_eq!(a.live_bytes(), 4 * (16 * TWIG_WORDS + 12 * LOW_WORDS + 3 * BRANCH_WORDS) as u64);
        // Each node, walked down the leftmost path of every subtree size.
        let mut id = top;
        for n in [32u8, 16, 8, 4, 2] {
            assert_eq!(a.node(id), balanced_node(h, 1, n), "{n} pages");
            assert_eq!(a.node_kind(id), Hasher::node_kind(&a.node(id)));
            assert_eq!(a.branch_node(id).is_some(), n >= 16, "{n} pages");
            assert!(matches!(a.slot(id), Slot::Branch(..)));
            id = a.children(id).unwrap().0;
        }
        assert!(matches!(a.slot(id), Slot::Page(p) if same_page(&p, &page(1))));
        a.release(top);
        assert_eq!(a.live(), (0, 0));
        assert_eq!(a.live_bytes(), 0);
    }

    /// A branch over a page and an empty region is low (height 1), and one over it and a
    /// page stores nothing either; its node is the terminator-padded one.
    #[test]
    fn branches_beside_empty_regions_are_low_too() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let one = a.new_branch(h, a.new_page(&page(1)), NodeId::EMPTY);
        let two = a.new_branch(h, one, a.new_page(&page(2)));
        assert_eq!(a.lows.live.load(Ordering::Relaxed), 2);
        assert_eq!(a.pages.live.load(Ordering::Relaxed), 2, "pages beside no page keep a slot");
        let want = parent(h, &parent(h, &[1; 32], &TERMINATOR), &[2; 32]);
        assert_eq!(a.node(two), want);
        a.release(two);
        assert_eq!(a.live(), (0, 0));
    }

    /// Locations and entry counts share a word: every count a page can hold, at the last
    /// block of the largest segment and in the last segment id, comes back whole.
    #[test]
    fn locations_and_counts_come_back_whole() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let last_block = (MAX_SEGMENT_BYTES / BLOCK_BYTES as u64 - 1) as u32;
        for count in [0, 1, 57, MAX_PAGE_ENTRIES as u32] {
            for (segment, block) in [(1u32, 0u32), (u32::MAX - 1, last_block), (7, 12345)] {
                let loc = u64::from(segment) << 32 | u64::from(block);
                let r = PageRef {
                    loc: PageLoc::Disk(loc),
                    checksum: u64::MAX - u64::from(count),
                    node: [9; 32],
                    count,
                };
                let alone = a.new_page(&r);
                assert!(matches!(a.slot(alone), Slot::Page(p) if same_page(&p, &r)));
                assert_eq!(a.page_count(alone), Some(count));
                let twig = a.new_branch(h, a.new_page(&page(1)), alone);
                let (_, inline) = a.children(twig).unwrap();
                assert!(matches!(a.slot(inline), Slot::Page(p) if same_page(&p, &r)));
                assert_eq!(a.page_count(inline), Some(count));
                a.release(twig);
            }
        }
        assert_eq!(a.live(), (0, 0));
    }

    #[test]
    #[should_panic(expected = "past the largest segment")]
    fn a_location_past_the_largest_segment_is_refused() {
        let a = Arena::new();
        let blocks = MAX_SEGMENT_BYTES / BLOCK_BYTES as u64;
        let mut r = page(1);
        r.loc = PageLoc::Disk(1 << 32 | blocks);
        a.new_page(&r);
    }

    #[test]
    fn in_memory_pages_are_held_until_their_node_goes() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let mem = memory_page();
        let id = memory_slot(&a, &mem, 0);
        assert_eq!(Arc::strong_count(&mem), 2);
        assert!(matches!(a.slot(id), Slot::Page(PageRef { loc: PageLoc::Memory(_), .. })));
        // Page slots only the caller holds move into a twig with their slab entries.
        let twig = a.new_branch(h, id, memory_slot(&a, &mem, 1));
        assert_eq!(Arc::strong_count(&mem), 3);
        let slab = |a: &Arena| {
            let m = a.memory.lock();
            (m.pages.len(), m.free.len())
        };
        assert_eq!(slab(&a), (2, 0));
        assert_eq!(a.pages.live.load(Ordering::Relaxed), 0);
        // A page held elsewhere too is copied: a slab entry of its own.
        let shared = memory_slot(&a, &mem, 2);
        let copy = a.new_branch(h, a.share(shared), memory_slot(&a, &mem, 3));
        assert_eq!(Arc::strong_count(&mem), 6);
        assert_eq!(slab(&a), (5, 0));
        a.release(twig);
        a.release(copy);
        a.release(shared);
        assert_eq!(Arc::strong_count(&mem), 1);
        assert_eq!(slab(&a), (5, 5));
        assert_eq!(a.live(), (0, 0));
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
        let h = Hasher::Blake3;
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
        // A page of a twig moves in its half of the twig.
        let twig = a.new_branch(h, memory_slot(&a, &mem, 4), a.new_page(&page(2)));
        let (l, r) = a.children(twig).unwrap();
        a.move_to_disk(&[(l, 6 << 32 | 3, 0xdef)]);
        assert!(matches!(a.slot(l), Slot::Page(p) if matches!(p.loc, PageLoc::Disk(x) if x == 6 << 32 | 3) && (p.checksum, p.count) == (0xdef, 4)));
        assert!(matches!(a.slot(r), Slot::Page(p) if same_page(&p, &page(2))));
        a.release(twig);
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

    /// Readers racing with moves never see a location with another's checksum or count, nor
    /// a torn location: each move writes a checksum derived from its location, the count is
    /// the page's, and readers check both. Half the pages are in twigs.
    #[test]
    fn readers_racing_with_moves_see_each_page_whole() {
        let h = Hasher::Blake3;
        let a = Arena::new();
        let rounds = 200u64;
        let per_round = 64u64;
        let stop = std::sync::atomic::AtomicBool::new(false);
        let passes = AtomicU64::new(0);
        let mut held = Vec::new();
        let ids: Vec<Vec<NodeId>> = (0..rounds)
            .map(|_| {
                let mut round = Vec::new();
                for k in 0..per_round / 4 {
                    let count = k as u32 % 100;
                    round.push(memory_slot(&a, &memory_page(), count));
                    round.push(memory_slot(&a, &memory_page(), count));
                    let twig = a.new_branch(
                        h,
                        memory_slot(&a, &memory_page(), count),
                        memory_slot(&a, &memory_page(), count),
                    );
                    let (l, r) = a.children(twig).unwrap();
                    round.extend([l, r]);
                    held.push(twig);
                }
                round
            })
            .collect();
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seen = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for round in &ids {
                        for (k, id) in round.iter().enumerate() {
                            if let Slot::Page(r) = a.slot(*id) {
                                assert_eq!(r.count, (k / 4) as u32 % 100);
                                assert_eq!(a.page_count(*id), Some(r.count));
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
                        let l = (n as u64 + 1) << 32 | (0x3f_0000 + (n as u64) * 64 + k as u64);
                        (*id, l, l.rotate_left(17) ^ 0x5bd1)
                    })
                    .collect();
                a.move_to_disk(&moves);
            }
            stop.store(true, Ordering::Relaxed);
            assert!(reader.join().unwrap() > 0);
        });
        for twig in held {
            a.release(twig);
        }
        for round in ids {
            for (k, id) in round.into_iter().enumerate() {
                if k % 4 < 2 {
                    a.release(id);
                }
            }
        }
        assert_eq!(a.live(), (0, 0));
    }
}
