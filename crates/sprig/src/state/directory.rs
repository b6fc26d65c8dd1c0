//! The in-memory directory: every trie node above the leaf pages, and for each page its
//! location, checksum, node and entry count.
//!
//! The directory is a persistent binary tree over trie positions, its nodes held in the
//! database's node store ([`Arena`]: fixed-size slots, 32-bit ids, reference counts): a commit
//! copies only the paths it changes, in one pass over its sorted regions, and shares the rest,
//! so any number of versions can be held at once and a reader pinned to one version never sees
//! another's changes. A version's nodes are freed when the last version holding them goes.
//! Nothing here does I/O; the pages themselves are read by the caller.
//!
//! Invariant kept by the commit pipeline: every branch holds at least two entries, so its node
//! is an internal node, and a key's path through the directory never ends above a page.

pub use crate::state::arena::{Arena, NodeId, Slot};
pub use crate::state::page_ref::{MemoryPage, PageLoc, PageRef};
use crate::state::page::Page;
use crate::state::prefix::Prefix;
use sprig_core::proof::{PathProof, ProofNode, Terminal};
use sprig_core::trie::{bit_at, KeyPath, Node, NodeKind, TERMINATOR};
use sprig_core::Hasher;
use std::sync::Arc;

/// The bits of a key path: no walk goes deeper.
const KEY_BITS: usize = 256;

/// The most keys or regions whose paths a recursive pass over the directory fetches at once,
/// just before it walks them: what they fetch stays in the CPU's nearest caches until used.
const WARM_CHUNK: usize = 64;

/// An owned reference to a subtree of the directory: a page, an empty region, or a branch.
/// Cloning shares it; dropping the last reference frees what only it held.
pub struct Subtree {
    arena: Arc<Arena>,
    id: NodeId,
}

impl Clone for Subtree {
    fn clone(&self) -> Subtree {
        Subtree {
            arena: self.arena.clone(),
            id: self.arena.share(self.id),
        }
    }
}

impl Drop for Subtree {
    fn drop(&mut self) {
        self.arena.release(self.id);
    }
}

impl std::fmt::Debug for Subtree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subtree({:?})", self.id)
    }
}

/// An owned reference to a node that borrows its store instead of holding a handle to it:
/// what a recursive pass over one directory ([`Directory::replace`]) builds. A [`Subtree`]
/// counts itself on the store's shared handle, an atomic every core writes: a pass that made
/// one per node it touched spent more on that one cache line than on the nodes.
struct Held<'a> {
    arena: &'a Arena,
    id: NodeId,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.arena.release(self.id);
    }
}

impl<'a> Held<'a> {
    /// A reference to node `id` of `arena`, shared.
    fn shared(arena: &'a Arena, id: NodeId) -> Held<'a> {
        Held {
            arena,
            id: arena.share(id),
        }
    }

    /// A branch over two nodes of the same store, with its node `known` or computed.
    fn branch(hasher: Hasher, left: Held<'a>, right: Held<'a>, known: Option<Node>) -> Held<'a> {
        assert!(
            std::ptr::eq(left.arena, right.arena),
            "a branch over nodes of two directory stores"
        );
        let arena = left.arena;
        let id = arena.new_branch_known(hasher, left.into_id(), right.into_id(), known);
        Held { arena, id }
    }

    /// Give up this reference without releasing it (its owner is now a parent node or a
    /// directory).
    fn into_id(self) -> NodeId {
        let id = self.id;
        std::mem::forget(self);
        id
    }
}

/// What a subtree is at its top.
#[derive(Debug)]
pub enum Shape {
    /// No entries and no page.
    Empty,
    /// A leaf page.
    Page(PageRef),
    /// Two sub-positions.
    Branch(Subtree, Subtree),
}

impl Subtree {
    /// An empty region.
    pub fn empty(arena: &Arc<Arena>) -> Subtree {
        Subtree {
            arena: arena.clone(),
            id: NodeId::EMPTY,
        }
    }

    /// A page.
    pub fn page(arena: &Arc<Arena>, r: &PageRef) -> Subtree {
        Subtree {
            arena: arena.clone(),
            id: arena.new_page(r),
        }
    }

    /// A branch over two subtrees of the same store, with its node computed.
    pub fn branch(hasher: Hasher, left: Subtree, right: Subtree) -> Subtree {
        assert!(
            Arc::ptr_eq(&left.arena, &right.arena),
            "a branch over subtrees of two directory stores"
        );
        let arena = left.arena.clone();
        let id = arena.new_branch(hasher, left.into_id(), right.into_id());
        Subtree { arena, id }
    }

    /// A reference to node `id` of `arena`, shared.
    fn shared(arena: &Arc<Arena>, id: NodeId) -> Subtree {
        Subtree {
            arena: arena.clone(),
            id: arena.share(id),
        }
    }

    /// Give up this reference without releasing it (its owner is now a parent node).
    fn into_id(mut self) -> NodeId {
        // Dropping what is left releases the empty region (nothing) and the store handle.
        std::mem::replace(&mut self.id, NodeId::EMPTY)
    }

    /// The id at the top (valid while this reference lives).
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The store the subtree lives in.
    pub fn arena(&self) -> &Arc<Arena> {
        &self.arena
    }

    /// The trie node at the top.
    pub fn node(&self) -> Node {
        self.arena.node(self.id)
    }

    /// Whether the pages under the top hold more than `limit` entries in all (a short walk:
    /// it stops once past the limit).
    pub fn holds_more_than(&self, limit: u64) -> bool {
        match self.arena.page_count(self.id) {
            // A page (most regions): its count, without the walk's stack.
            Some(count) => u64::from(count) > limit,
            None => count_exceeds(&self.arena, self.id, limit),
        }
    }

    /// Whether two references are to the same node (shared, not merely equal).
    pub fn is(&self, other: &Subtree) -> bool {
        self.id == other.id && Arc::ptr_eq(&self.arena, &other.arena)
    }

    /// What the subtree is at its top (children shared).
    pub fn shape(&self) -> Shape {
        match self.arena.slot(self.id) {
            Slot::Empty => Shape::Empty,
            Slot::Page(r) => Shape::Page(r),
            Slot::Branch(l, r) => Shape::Branch(
                Subtree::shared(&self.arena, l),
                Subtree::shared(&self.arena, r),
            ),
        }
    }

    /// The number of entries below.
    pub fn count(&self) -> u64 {
        count_under(&self.arena, self.id)
    }

    /// Visit every page, in key order.
    pub fn for_each_page(&self, f: &mut dyn FnMut(&PageRef)) {
        walk_pages(&self.arena, self.id, Prefix::root(), &mut |_, _, r| f(&r));
    }

    /// How many pages lie below: a walk of the branches alone, reading no page slot.
    pub fn pages_below(&self) -> u64 {
        let mut n = 0u64;
        let mut stack = vec![self.id];
        while let Some(id) = stack.pop() {
            match self.arena.children(id) {
                Some((l, r)) => stack.extend([r, l]),
                None => n += u64::from(id.is_page()),
            }
        }
        n
    }

    /// Every page below with the id of its slot (valid while this reference lives), in key
    /// order: what a commit moves to disk in place ([`Arena::move_to_disk`]).
    pub fn page_slots(&self) -> Vec<(NodeId, PageRef)> {
        let mut out = Vec::new();
        walk_pages(&self.arena, self.id, Prefix::root(), &mut |id, _, r| out.push((id, r)));
        out
    }

    /// Collect every page (position and reference) of this subtree at `pos`, in key order.
    pub fn pages_under(&self, pos: Prefix, out: &mut Vec<(Prefix, PageRef)>) {
        walk_pages(&self.arena, self.id, pos, &mut |_, p, r| out.push((*p, r)));
    }
}

/// The entries under `id`.
fn count_under(arena: &Arena, id: NodeId) -> u64 {
    tally_under(arena, id).entries
}

/// What a subtree holds: entries and pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    entries: u64,
    pages: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.entries += other.entries;
        self.pages += other.pages;
    }
}

impl Tally {
    /// `self` with `removed` taken out and `added` put in.
    fn replaced(self, removed: Tally, added: Tally) -> Tally {
        Tally {
            entries: self.entries - removed.entries.min(self.entries) + added.entries,
            pages: self.pages - removed.pages.min(self.pages) + added.pages,
        }
    }
}

/// The entries and pages under `id`.
fn tally_under(arena: &Arena, id: NodeId) -> Tally {
    let mut total = Tally::default();
    let mut stack = vec![id];
    while let Some(id) = stack.pop() {
        if let Some(c) = arena.page_count(id) {
            total.entries += u64::from(c);
            total.pages += 1;
        } else if let Some((l, r)) = arena.children(id) {
            stack.push(r);
            stack.push(l);
        }
    }
    total
}

/// Whether the entries under `id` are more than `limit` (stops counting past it).
fn count_exceeds(arena: &Arena, id: NodeId, limit: u64) -> bool {
    let mut total = 0u64;
    let mut stack = vec![id];
    while let Some(id) = stack.pop() {
        if let Some(c) = arena.page_count(id) {
            total += u64::from(c);
            if total > limit {
                return true;
            }
        } else if let Some((l, r)) = arena.children(id) {
            stack.push(r);
            stack.push(l);
        }
    }
    false
}

/// Visit the pages under `id` (at `pos`) in key order.
fn walk_pages(
    arena: &Arena,
    id: NodeId,
    pos: Prefix,
    f: &mut dyn FnMut(NodeId, &Prefix, PageRef),
) {
    let mut stack = vec![(id, pos)];
    while let Some((id, pos)) = stack.pop() {
        match arena.slot(id) {
            Slot::Empty => {}
            Slot::Page(r) => f(id, &pos, r),
            Slot::Branch(l, r) => {
                stack.push((r, pos.child(true)));
                stack.push((l, pos.child(false)));
            }
        }
    }
}

/// Why a directory operation failed: the directory's own invariants were violated, which means
/// the structures it was built from (a checkpoint or commit record) are corrupt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    /// A region to replace lies below a page instead of at a directory position.
    #[error("region {0} lies inside a page")]
    RegionInsidePage(Prefix),
    /// Regions to replace overlap.
    #[error("regions overlap at {0}")]
    Overlap(Prefix),
    /// A branch holds fewer than two entries, so its node is not an internal node.
    #[error("branch at {0} is not an internal node")]
    ThinBranch(Prefix),
    /// A proof needs a page that was not supplied.
    #[error("page at {0} was not loaded")]
    PageMissing(Prefix),
    /// Regions of another directory store.
    #[error("a region from another directory store")]
    ForeignRegion,
}

/// A region of the directory (a position) and a subtree to put there.
pub type Region = (Prefix, Subtree);

/// Appends the multi-proof nodes below one region (a page, or an empty region: `None`), given
/// its position, its page and the keys under it.
pub type RegionProver<'a> = dyn FnMut(&Prefix, Option<&PageRef>, &[KeyPath], &mut Vec<ProofNode>) -> Result<(), DirectoryError>
    + 'a;

/// A version of the directory. Cloning is cheap and shares everything.
pub struct Directory {
    arena: Arc<Arena>,
    hasher: Hasher,
    root: NodeId,
    /// Entries and pages: kept as the directory changes, so neither is a walk to know.
    tally: Tally,
}

impl Clone for Directory {
    fn clone(&self) -> Directory {
        Directory {
            arena: self.arena.clone(),
            hasher: self.hasher,
            root: self.arena.share(self.root),
            tally: self.tally,
        }
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        self.arena.release(self.root);
    }
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("root", &self.root)
            .field("tally", &self.tally)
            .finish()
    }
}

impl Directory {
    /// The directory of an empty database, in `arena`.
    pub fn empty(arena: &Arc<Arena>, hasher: Hasher) -> Directory {
        Directory {
            arena: arena.clone(),
            hasher,
            root: NodeId::EMPTY,
            tally: Tally::default(),
        }
    }

    /// A directory with the given tree.
    pub fn from_root(hasher: Hasher, root: Subtree) -> Directory {
        let tally = tally_under(&root.arena, root.id);
        let arena = root.arena.clone();
        Directory {
            arena,
            hasher,
            root: root.into_id(),
            tally,
        }
    }

    /// The node store.
    pub fn arena(&self) -> &Arc<Arena> {
        &self.arena
    }

    /// The hasher.
    pub fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// The state root.
    pub fn root_node(&self) -> Node {
        self.arena.node(self.root)
    }

    /// Whether two directories are the same version (the same root node of the same store),
    /// not merely equal.
    pub fn is(&self, other: &Directory) -> bool {
        self.root == other.root && Arc::ptr_eq(&self.arena, &other.arena)
    }

    /// The whole tree, shared.
    pub fn tree(&self) -> Subtree {
        Subtree::shared(&self.arena, self.root)
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        self.tally.entries
    }

    /// The number of leaf pages.
    pub fn page_count(&self) -> u64 {
        self.tally.pages
    }

    /// Whether the state holds no entry.
    pub fn is_empty(&self) -> bool {
        self.tally.entries == 0
    }

    /// The region holding `key`: its position, and its page (none for an empty region).
    pub fn locate(&self, key: &KeyPath) -> (Prefix, Option<PageRef>) {
        let mut id = self.root;
        let mut depth = 0usize;
        while let Some((l, r)) = self.arena.children(id) {
            id = if bit_at(key, depth) { r } else { l };
            depth += 1;
        }
        (Prefix::of_key(key, depth), self.page_of(id))
    }

    /// The page reference of `id`, if it is a page.
    fn page_of(&self, id: NodeId) -> Option<PageRef> {
        match self.arena.slot(id) {
            Slot::Page(r) => Some(r),
            _ => None,
        }
    }

    /// [`Directory::locate`] for many keys at once: the walks go down in step, each prefetching
    /// its next node, so a batch's cache misses overlap (a walk of one key waits for one miss
    /// per level of the directory below what the CPU caches hold).
    pub fn locate_many(&self, keys: &[KeyPath]) -> Vec<(Prefix, Option<PageRef>)> {
        let ends = self.descend_all(keys.len(), |k, depth| {
            keys.get(k)
                .filter(|_| depth < KEY_BITS)
                .map(|key| bit_at(key, depth))
        });
        keys.iter()
            .zip(ends)
            .map(|(key, (id, depth))| (Prefix::of_key(key, depth), self.page_of(id)))
            .collect()
    }

    /// Bring the nodes on the paths below node `id` (at `depth` bits) to `positions` (sorted,
    /// as [`Directory::replace`] sorts them) into the CPU's cache ahead of a recursive pass
    /// over them such as [`Directory::replace`], whose one-path-at-a-time descent would
    /// otherwise wait for each miss in turn. A hint only: unsorted positions warm less, never
    /// change a result.
    fn warm_positions_from(&self, id: NodeId, depth: usize, positions: &[Prefix]) {
        let _counts = self.warm_with(
            (id, depth),
            positions.len(),
            |k| positions.get(k).map_or(0, Prefix::depth),
            |k, depth| positions.get(k).is_some_and(|p| p.bit(depth)),
        );
    }

    /// [`Directory::warm_positions_from`] over the paths of sorted keys, down to their pages.
    fn warm_keys_from(&self, id: NodeId, depth: usize, keys: &[KeyPath]) {
        let _counts = self.warm_with(
            (id, depth),
            keys.len(),
            |_| KEY_BITS,
            |k, depth| keys.get(k).is_some_and(|key| bit_at(key, depth)),
        );
    }

    /// Walk down level by level from node `start` (at its depth) over `n` sorted targets
    /// (target `k` is `depth_of(k)` bits long, its bits `bit_of(k, depth)`), visiting each node
    /// on their paths once with the range of targets under it, and prefetching both children
    /// of every node of the next level before visiting any. A sibling off the paths whose node
    /// is not stored (a low branch) is hashed from the nodes below it when a pass asks for its
    /// node, so its children are fetched too, a level later, down to nodes that are stored.
    /// Returns the number of nodes on the paths visited (the start aside), and of low
    /// branches below siblings whose children were fetched.
    fn warm_with(
        &self,
        start: (NodeId, usize),
        n: usize,
        depth_of: impl Fn(usize) -> usize,
        bit_of: impl Fn(usize, usize) -> bool,
    ) -> (usize, usize) {
        let mut visited = 0;
        let mut lows = 0;
        let mut level: Vec<(NodeId, usize, std::ops::Range<usize>)> =
            vec![(start.0, start.1, 0..n)];
        let mut next = Vec::new();
        let mut below: Vec<NodeId> = Vec::new();
        let mut next_below: Vec<NodeId> = Vec::new();
        while !level.is_empty() || !below.is_empty() {
            for (id, depth, range) in level.drain(..) {
                let Some((l, r)) = self.arena.children(id) else {
                    continue;
                };
                // Targets ending at this node sort first among those under it.
                let mut start = range.start;
                while start < range.end && depth_of(start) <= depth {
                    start += 1;
                }
                // The first target going right: a binary search, so a node costs the log of
                // its targets, not their number.
                let (mut split, mut hi) = (start, range.end);
                while split < hi {
                    let mid = split + (hi - split) / 2;
                    if bit_of(mid, depth) {
                        hi = mid;
                    } else {
                        split = mid + 1;
                    }
                }
                // A pass over the paths reads both children of each node on them (the
                // sibling's node for the hash, its count to share it): both are fetched.
                if start < range.end {
                    self.arena.prefetch(l);
                    self.arena.prefetch(r);
                }
                if start < split {
                    next.push((l, depth + 1, start..split));
                } else if start < range.end && self.arena.is_low(l) {
                    next_below.push(l);
                }
                if split < range.end {
                    next.push((r, depth + 1, split..range.end));
                } else if start < range.end && self.arena.is_low(r) {
                    next_below.push(r);
                }
            }
            // The children of low siblings fetched a level ago, and theirs in turn.
            lows += below.len();
            for id in below.drain(..) {
                if let Some((l, r)) = self.arena.children(id) {
                    for child in [l, r] {
                        self.arena.prefetch(child);
                        if self.arena.is_low(child) {
                            next_below.push(child);
                        }
                    }
                }
            }
            visited += next.len();
            std::mem::swap(&mut level, &mut next);
            std::mem::swap(&mut below, &mut next_below);
        }
        (visited, lows)
    }

    /// Walk from the root toward `n` targets at once, one level per round for every walk still
    /// going; `step(k, depth)` says which child target `k` takes at `depth` (right or left), if
    /// it goes on there (`None`: it stops). Returns where each walk stopped: at its target's
    /// depth, or at a page or an empty region above it.
    fn descend_all(
        &self,
        n: usize,
        step: impl Fn(usize, usize) -> Option<bool>,
    ) -> Vec<(NodeId, usize)> {
        let mut at: Vec<(NodeId, usize)> = vec![(self.root, 0); n];
        let mut going: Vec<usize> = (0..n).collect();
        while !going.is_empty() {
            going.retain(|&k| {
                let Some(&(id, depth)) = at.get(k) else {
                    return false;
                };
                let (Some(right), Some((l, r))) = (step(k, depth), self.arena.children(id)) else {
                    return false;
                };
                let next = if right { r } else { l };
                self.arena.prefetch(next);
                if let Some(slot) = at.get_mut(k) {
                    *slot = (next, depth + 1);
                }
                true
            });
        }
        at
    }

    /// The node id at `pos`, if `pos` is a position of the directory (not inside a page).
    fn id_at(&self, pos: &Prefix) -> Option<NodeId> {
        let mut id = self.root;
        for depth in 0..pos.depth() {
            let (l, r) = self.arena.children(id)?;
            id = if pos.bit(depth) { r } else { l };
        }
        Some(id)
    }

    /// [`Directory::node_at`] for many positions, their walks going down together (each
    /// level's next nodes prefetched before any is read, as in [`Directory::locate_many`]), so
    /// the cache misses of a batch of positions overlap.
    pub fn nodes_at(&self, positions: &[Prefix]) -> Vec<Option<Subtree>> {
        self.ids_at(positions)
            .into_iter()
            .map(|id| id.map(|id| Subtree::shared(&self.arena, id)))
            .collect()
    }

    /// The node at each of `positions` that is a position of the directory, their walks
    /// going down together (see [`Directory::nodes_at`]); ids valid while `self` lives.
    fn ids_at(&self, positions: &[Prefix]) -> Vec<Option<NodeId>> {
        let ends = self.descend_all(positions.len(), |k, depth| {
            positions
                .get(k)
                .filter(|p| depth < p.depth())
                .map(|p| p.bit(depth))
        });
        positions
            .iter()
            .zip(ends)
            .map(|(p, (id, depth))| (depth == p.depth()).then_some(id))
            .collect()
    }

    /// Visit every page under each of `positions` (sorted, as [`Directory::nodes_at`] takes
    /// them) that is a position of the directory, position by position, each in key order:
    /// [`Directory::nodes_at`] and a walk of each node found, without taking a reference to
    /// any node (a reference is an atomic add on a count other cores write too).
    pub fn for_each_page_at(&self, positions: &[Prefix], f: &mut dyn FnMut(&PageRef)) {
        for (p, id) in positions.iter().zip(self.ids_at(positions)) {
            if let Some(id) = id {
                walk_pages(&self.arena, id, *p, &mut |_, _, r| f(&r));
            }
        }
    }

    /// The subtree at `pos`, if `pos` is a position of the directory (not inside a page).
    pub fn node_at(&self, pos: &Prefix) -> Option<Subtree> {
        self.id_at(pos).map(|id| Subtree::shared(&self.arena, id))
    }

    /// The branches on the path from the root to `pos` (inclusive) holding at most `limit`
    /// entries, shallowest first: candidates to merge into one page.
    pub fn sparse_branches_above(&self, pos: &Prefix, limit: u64) -> Vec<(Prefix, Subtree)> {
        // The branches on the path, root first.
        let mut path = Vec::new();
        let mut id = self.root;
        for depth in 0..=pos.depth() {
            let Some((l, r)) = self.arena.children(id) else {
                break;
            };
            path.push((depth, id));
            if depth == pos.depth() {
                break;
            }
            id = if pos.bit(depth) { r } else { l };
        }
        // A branch holds every entry of the branches below it on the path, so the sparse ones
        // are the deepest few: test from the bottom up and stop at the first that is not
        // (its count is found after a short walk, where a walk from the root down would count
        // a big subtree at every level).
        let mut out = Vec::new();
        for &(depth, id) in path.iter().rev() {
            if count_exceeds(&self.arena, id, limit) {
                break;
            }
            let at = Prefix::of_key(pos.bits(), depth);
            out.push((at, Subtree::shared(&self.arena, id)));
        }
        out.reverse();
        out
    }

    /// A new version with each region (position, new subtree) replaced, in one pass down the
    /// tree. Regions must be disjoint and sit at positions of this directory (at a page, an
    /// empty region or a branch), never inside a page.
    pub fn replace(&self, regions: Vec<Region>) -> Result<Directory, DirectoryError> {
        Ok(self.replace_known(regions, None)?.0)
    }

    /// [`Directory::replace`], also giving the regions back (in key order) as the new
    /// directory holds them: a page placed beside another page is its twig's from then on
    /// (the twig holds both), not the page slot it was given as.
    pub fn replace_placed(
        &self,
        regions: Vec<Region>,
    ) -> Result<(Directory, Vec<Region>), DirectoryError> {
        let (dir, prefixes, placed) = self.replace_known(regions, None)?;
        let regions = prefixes
            .into_iter()
            .zip(placed)
            .map(|(p, id)| (p, Subtree::shared(&dir.arena, id)))
            .collect();
        Ok((dir, regions))
    }

    /// [`Directory::replace`] whose result is known to equal `equal` (a directory of the same
    /// store with the same entries at the same positions, its pages possibly elsewhere: the
    /// overlay a commit wrote): the new branches take their nodes from it instead of hashing
    /// them again (checked in debug builds).
    pub fn replace_as(
        &self,
        regions: Vec<Region>,
        equal: &Directory,
    ) -> Result<Directory, DirectoryError> {
        if !Arc::ptr_eq(&equal.arena, &self.arena) {
            return Err(DirectoryError::ForeignRegion);
        }
        Ok(self.replace_known(regions, Some(equal.root))?.0)
    }

    /// The new directory, the regions' positions in key order, and the id each region's
    /// subtree has in the new directory (borrowed from it).
    fn replace_known(
        &self,
        mut regions: Vec<Region>,
        known: Option<NodeId>,
    ) -> Result<(Directory, Vec<Prefix>, Vec<NodeId>), DirectoryError> {
        if regions.iter().any(|(_, s)| !Arc::ptr_eq(&s.arena, &self.arena)) {
            return Err(DirectoryError::ForeignRegion);
        }
        regions.sort_by(|a, b| {
            a.0.bits()
                .cmp(b.0.bits())
                .then(a.0.depth().cmp(&b.0.depth()))
        });
        for pair in regions.windows(2) {
            if let [a, b] = pair {
                if a.0.covers(&b.0) || b.0.covers(&a.0) {
                    return Err(DirectoryError::Overlap(b.0));
                }
            }
        }
        let mut removed = Tally::default();
        let mut added = Tally::default();
        let mut slots: Vec<Option<Subtree>> = Vec::with_capacity(regions.len());
        let mut prefixes = Vec::with_capacity(regions.len());
        for (p, s) in regions {
            added += tally_under(&s.arena, s.id);
            prefixes.push(p);
            slots.push(Some(s));
        }
        let known = known.unwrap_or(NodeId::EMPTY);
        let mut placed = vec![NodeId::EMPTY; prefixes.len()];
        let root = self.replace_at(
            (self.root, known),
            0,
            &prefixes,
            (&mut slots, &mut placed),
            &mut removed,
            true,
        )?;
        let dir = Directory {
            arena: self.arena.clone(),
            hasher: self.hasher,
            root: root.into_id(),
            tally: self.tally.replaced(removed, added),
        };
        Ok((dir, prefixes, placed))
    }

    /// The subtree at the position of `depth` bits that node `id` of this directory holds,
    /// with `regions` (sorted, disjoint, under that position) put in place; `slots` holds their
    /// subtrees, taken as they are placed, and gets the id each has where it was placed (a page
    /// becomes one of its twig's when its sibling is a page too). The position itself is not
    /// passed down: a region under it is at it exactly when it is `depth` bits long. `known` is
    /// the node at the same position of a tree equal to the result, if there is one
    /// (`NodeId::EMPTY` otherwise).
    fn replace_at<'a>(
        &'a self,
        (id, known): (NodeId, NodeId),
        depth: usize,
        regions: &[Prefix],
        slots: (&mut [Option<Subtree>], &mut [NodeId]),
        removed: &mut Tally,
        cold: bool,
    ) -> Result<Held<'a>, DirectoryError> {
        let arena: &Arena = &self.arena;
        let (slots, placed) = slots;
        // As in `prove_at`: the paths below are fetched just before they are walked.
        let cold = if cold && !regions.is_empty() && regions.len() <= WARM_CHUNK {
            self.warm_positions_from(id, depth, regions);
            false
        } else {
            cold
        };
        match regions {
            [] => return Ok(Held::shared(arena, id)),
            [p] if p.depth() == depth => {
                *removed += tally_under(arena, id);
                // `replace` checked that every region's subtree lives in this store.
                return match (slots.first_mut().and_then(Option::take), placed.first_mut()) {
                    (Some(s), Some(at)) => {
                        *at = s.id;
                        Ok(Held {
                            arena,
                            id: s.into_id(),
                        })
                    }
                    _ => Err(DirectoryError::Overlap(*p)),
                };
            }
            _ => {}
        }
        let Some((left, right)) = arena.children(id) else {
            let first = regions.first().copied().unwrap_or_else(Prefix::root);
            return Err(DirectoryError::RegionInsidePage(first));
        };
        // Sorted by bits then depth, a region at this position itself would come first.
        if let Some(p) = regions.first().filter(|p| p.depth() == depth) {
            return Err(DirectoryError::Overlap(*p));
        }
        let split = regions.partition_point(|p| !p.bit(depth));
        let (lr, rr) = regions.split_at(split);
        let (ls, rs) = slots.split_at_mut(split);
        let (lp, rp) = placed.split_at_mut(split);
        let (known_left, known_right) = arena
            .children(known)
            .unwrap_or((NodeId::EMPTY, NodeId::EMPTY));
        let mut below = |ids, regions: &[Prefix], slots: (&mut [Option<Subtree>], &mut [NodeId])| {
            self.replace_at(ids, depth + 1, regions, slots, removed, cold)
        };
        let l = below((left, known_left), lr, (ls, &mut *lp))?;
        let r = below((right, known_right), rr, (rs, &mut *rp))?;
        let branch = Held::branch(self.hasher, l, r, arena.branch_node(known));
        // A region placed just below is where the branch holds it (its twig's, for a page).
        // Only then are the branch's children read again.
        let just_below = |regions: &[Prefix]| matches!(regions, [p] if p.depth() == depth + 1);
        if just_below(lr) || just_below(rr) {
            let (l, r) = arena.branch_children(branch.id);
            for (regions, placed, id) in [(lr, lp, l), (rr, rp, r)] {
                if let (true, [at]) = (just_below(regions), placed) {
                    *at = id;
                }
            }
        }
        Ok(branch)
    }

    /// Visit every page in key order with its position.
    pub fn for_each_page(&self, mut f: impl FnMut(&Prefix, &PageRef)) {
        walk_pages(&self.arena, self.root, Prefix::root(), &mut |_, p, r| f(p, &r));
    }

    /// Up to `limit` leaf regions in key order, from the one holding `start` on.
    pub fn pages_from(&self, start: &KeyPath, limit: usize) -> Vec<(Prefix, PageRef)> {
        self.walk_pages(start, limit, false)
    }

    /// Up to `limit` leaf regions in descending key order, from the one holding `last` down
    /// (the mirror of [`Directory::pages_from`]).
    pub fn pages_back_from(&self, last: &KeyPath, limit: usize) -> Vec<(Prefix, PageRef)> {
        self.walk_pages(last, limit, true)
    }

    /// Depth-first in key order (descending with `reverse`) from the region holding `from`:
    /// the stack holds subtrees still to visit, the far side first; `bounded` marks the
    /// subtrees on `from`'s path, whose near side is skipped.
    fn walk_pages(&self, from: &KeyPath, limit: usize, reverse: bool) -> Vec<(Prefix, PageRef)> {
        let mut out = Vec::new();
        let mut stack: Vec<(NodeId, Prefix, bool)> = vec![(self.root, Prefix::root(), true)];
        while let Some((id, pos, bounded)) = stack.pop() {
            if out.len() >= limit {
                break;
            }
            match self.arena.slot(id) {
                Slot::Empty => {}
                Slot::Page(r) => out.push((pos, r)),
                Slot::Branch(l, r) => {
                    // Children in visiting order: (near, far).
                    let (near, far) = if reverse {
                        ((r, pos.child(true)), (l, pos.child(false)))
                    } else {
                        ((l, pos.child(false)), (r, pos.child(true)))
                    };
                    // On `from`'s path, the near child holds only keys before `from` (after,
                    // in reverse) when `from` goes to the far side.
                    let from_far = bit_at(from, pos.depth()) != reverse;
                    if bounded && from_far {
                        stack.push((far.0, far.1, true));
                    } else {
                        stack.push((far.0, far.1, false));
                        stack.push((near.0, near.1, bounded));
                    }
                }
            }
        }
        out
    }

    /// The path proof of `key`: siblings from the directory down to the key's region, then from
    /// the page (supplied by `page`) down to the terminal.
    pub fn path_proof<'p>(
        &self,
        key: &KeyPath,
        page: &dyn Fn(&Prefix) -> Option<&'p Page>,
    ) -> Result<PathProof, DirectoryError> {
        let mut siblings = Vec::new();
        let mut id = self.root;
        let mut depth = 0usize;
        while let Some((l, r)) = self.arena.children(id) {
            if self.arena.node_kind(id) != NodeKind::Internal {
                return Err(DirectoryError::ThinBranch(Prefix::of_key(key, depth)));
            }
            let right = bit_at(key, depth);
            siblings.push(self.arena.node(if right { l } else { r }));
            id = if right { r } else { l };
            depth += 1;
        }
        let pos = Prefix::of_key(key, depth);
        let terminal = match self.arena.slot(id) {
            Slot::Page(_) => {
                let p = page(&pos).ok_or(DirectoryError::PageMissing(pos))?;
                let below = p.path_proof_below(self.hasher, key);
                siblings.extend(below.siblings);
                below.terminal
            }
            _ => Terminal::Empty,
        };
        Ok(PathProof { terminal, siblings })
    }

    /// Append the multi-proof nodes of `keys` (sorted, distinct): the directory supplies the
    /// upper part, and `region` appends the nodes below each page or empty region that keys
    /// reach (given its position, its page and the keys under it).
    pub fn prove(
        &self,
        keys: &[KeyPath],
        region: &mut RegionProver<'_>,
        out: &mut Vec<ProofNode>,
    ) -> Result<(), DirectoryError> {
        self.prove_at(self.root, Prefix::root(), keys, region, out, true)
    }

    fn prove_at(
        &self,
        id: NodeId,
        pos: Prefix,
        keys: &[KeyPath],
        region: &mut RegionProver<'_>,
        out: &mut Vec<ProofNode>,
        cold: bool,
    ) -> Result<(), DirectoryError> {
        // `cold`: no walk above fetched this subtree's paths. They are fetched together just
        // before this walk needs them, once few enough keys are left that what they fetch
        // stays in the CPU's nearest caches (fetched all at once, a large batch's paths would
        // be evicted again before the walk reached most of them).
        let cold = if cold && !keys.is_empty() && keys.len() <= WARM_CHUNK {
            self.warm_keys_from(id, pos.depth(), keys);
            false
        } else {
            cold
        };
        if keys.is_empty() {
            let n = self.arena.node(id);
            out.push(if n == TERMINATOR {
                ProofNode::Terminator
            } else {
                ProofNode::Opaque(n)
            });
            return Ok(());
        }
        match self.arena.slot(id) {
            Slot::Empty => region(&pos, None, keys, out)?,
            Slot::Page(r) => region(&pos, Some(&r), keys, out)?,
            Slot::Branch(l, r) => {
                if self.arena.node_kind(id) != NodeKind::Internal {
                    return Err(DirectoryError::ThinBranch(pos));
                }
                out.push(ProofNode::Internal);
                let depth = pos.depth();
                let split = keys.partition_point(|k| !bit_at(k, depth));
                let (kl, kr) = keys.split_at(split);
                self.prove_at(l, pos.child(false), kl, region, out, cold)?;
                self.prove_at(r, pos.child(true), kr, region, out, cold)?;
            }
        }
        Ok(())
    }
}

/// The regions where `to` differs from `from` (two versions of one store): each the highest
/// position below which the two trees differ and at which one of them is a page or an empty
/// region, with `to`'s subtree. Shared subtrees are skipped without being walked.
pub fn diff(from: &Directory, to: &Directory) -> Result<Vec<Region>, DirectoryError> {
    if !Arc::ptr_eq(&from.arena, &to.arena) {
        return Err(DirectoryError::ForeignRegion);
    }
    let arena = &to.arena;
    let mut out = Vec::new();
    let mut stack = vec![(from.root, to.root, Prefix::root())];
    while let Some((a, b, pos)) = stack.pop() {
        if a == b {
            continue;
        }
        match (arena.slot(a), arena.slot(b)) {
            (Slot::Branch(al, ar), Slot::Branch(bl, br)) => {
                stack.push((ar, br, pos.child(true)));
                stack.push((al, bl, pos.child(false)));
            }
            (Slot::Empty, Slot::Empty) => {}
            (Slot::Page(x), Slot::Page(y))
                if matches!((&x.loc, &y.loc), (PageLoc::Disk(p), PageLoc::Disk(q)) if p == q) => {}
            _ => out.push((pos, Subtree::shared(arena, b))),
        }
    }
    out.sort_by(|a, b| a.0.bits().cmp(b.0.bits()).then(a.0.depth().cmp(&b.0.depth())));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The model of a directory: the leaf at each region (a page number, or an empty region).
    type Model = BTreeMap<Prefix, Option<u32>>;

    fn page_ref(n: u32) -> PageRef {
        let mut node = [0u8; 32];
        node[..4].copy_from_slice(&n.to_le_bytes());
        node[4] = 0x5a;
        PageRef {
            loc: PageLoc::Disk(1 << 32 | u64::from(n)),
            checksum: u64::from(n) * 3,
            node,
            count: n % 7 + 2,
        }
    }

    /// The subtree of the model's leaves under `pos` (all of them are under it), built from
    /// scratch.
    fn build(arena: &Arc<Arena>, h: Hasher, pos: Prefix, leaves: &[(Prefix, Option<u32>)]) -> Subtree {
        match leaves {
            [(p, leaf)] if *p == pos => match leaf {
                Some(n) => Subtree::page(arena, &page_ref(*n)),
                None => Subtree::empty(arena),
            },
            _ => {
                let split = leaves.partition_point(|(p, _)| !p.bit(pos.depth()));
                let (l, r) = leaves.split_at(split);
                Subtree::branch(
                    h,
                    build(arena, h, pos.child(false), l),
                    build(arena, h, pos.child(true), r),
                )
            }
        }
    }

    fn sorted(model: &Model) -> Vec<(Prefix, Option<u32>)> {
        let mut v: Vec<_> = model.iter().map(|(p, l)| (*p, *l)).collect();
        v.sort_by(|a, b| a.0.bits().cmp(b.0.bits()).then(a.0.depth().cmp(&b.0.depth())));
        v
    }

    fn entries(model: &Model) -> u64 {
        model.values().flatten().map(|n| u64::from(page_ref(*n).count)).sum()
    }

    /// One replacement: at the `pick`-th region (or the branch above it, going `up` levels),
    /// put `shape` (0: empty, 1: a page, 2: two pages, 3: a page and an empty region).
    fn replacement(
        model: &Model,
        pick: usize,
        up: usize,
        shape: u8,
        next: &mut u32,
    ) -> (Prefix, Vec<(Prefix, Option<u32>)>) {
        let regions = sorted(model);
        let (at, _) = regions[pick % regions.len()];
        let pos = Prefix::of_key(at.bits(), at.depth().saturating_sub(up % 3));
        let mut page = || {
            *next += 1;
            Some(*next)
        };
        let parts = match shape % 4 {
            0 => vec![(pos, None)],
            1 => vec![(pos, page())],
            2 => vec![(pos.child(false), page()), (pos.child(true), page())],
            _ => vec![(pos.child(false), page()), (pos.child(true), None)],
        };
        (pos, parts)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Replacing regions, one pass over several at a time, gives the tree built from
        /// scratch of the same regions: same root, count, pages, lookups; versions differ by
        /// exactly what `diff` finds; and every node is freed with the last version.
        #[test]
        fn replace_matches_a_tree_built_from_scratch(
            steps in proptest::collection::vec(
                proptest::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 1..4),
                1..24,
            ),
            keys in proptest::collection::vec(any::<[u8; 32]>(), 8),
        ) {
            let h = Hasher::Blake3;
            let arena = Arena::new();
            let mut model: Model = BTreeMap::from([(Prefix::root(), None)]);
            let mut versions = vec![(Directory::empty(&arena, h), model.clone())];
            let mut next = 0u32;
            for step in steps {
                let mut regions: Vec<Region> = Vec::new();
                let mut taken: Vec<Prefix> = Vec::new();
                let mut after = model.clone();
                for (pick, up, shape) in step {
                    let (pos, parts) = replacement(&model, pick, up, shape, &mut next);
                    if taken.iter().any(|t| t.covers(&pos) || pos.covers(t)) {
                        continue;
                    }
                    taken.push(pos);
                    after.retain(|p, _| !pos.covers(p));
                    after.extend(parts.iter().copied());
                    regions.push((pos, build(&arena, h, pos, &parts)));
                }
                let dir = versions.last().map(|(d, _)| d.replace(regions)).unwrap().unwrap();
                model = after;
                let scratch = Arena::new();
                let expected = build(&scratch, h, Prefix::root(), &sorted(&model));
                prop_assert_eq!(dir.root_node(), expected.node());
                prop_assert_eq!(dir.len(), entries(&model));
                let mut pages = Vec::new();
                dir.for_each_page(|p, r| pages.push((*p, r.loc.clone())));
                let want: Vec<Prefix> = sorted(&model).into_iter().filter(|(_, l)| l.is_some()).map(|(p, _)| p).collect();
                prop_assert_eq!(pages.iter().map(|(p, _)| *p).collect::<Vec<_>>(), want);
                prop_assert_eq!(dir.page_count(), pages.len() as u64);
                prop_assert_eq!(dir.tree().pages_below(), pages.len() as u64);
                for key in &keys {
                    let (pos, page) = dir.locate(key);
                    let leaf = model.iter().find(|(p, _)| p.contains(key)).map(|(p, l)| (*p, *l));
                    prop_assert_eq!(Some(pos), leaf.map(|(p, _)| p));
                    let loc = page.map(|r| match r.loc { PageLoc::Disk(l) => l, PageLoc::Memory(_) => u64::MAX } & 0xffff_ffff);
                    prop_assert_eq!(loc, leaf.and_then(|(_, l)| l).map(u64::from));
                }
                // All keys found together (walks in step) are found where one walk each finds
                // them: the model's region bits too, so pages at every depth are reached.
                let mut many: Vec<KeyPath> = keys.clone();
                many.extend(model.keys().map(|p| *p.bits()));
                let seen = |(pos, page): (Prefix, Option<PageRef>)| (pos, page.map(|r| (r.checksum, r.count, r.node)));
                let together: Vec<_> = dir.locate_many(&many).into_iter().map(seen).collect();
                let alone: Vec<_> = many.iter().map(|k| seen(dir.locate(k))).collect();
                prop_assert_eq!(together, alone);
                // Nodes found together are the ones found one walk each: at every region, at
                // the branches above them, and below pages (none there).
                let mut positions: Vec<Prefix> = Vec::new();
                for p in model.keys() {
                    positions.extend((0..=p.depth()).map(|d| Prefix::of_key(p.bits(), d)));
                    positions.push(p.child(true));
                }
                let ids = |nodes: Vec<Option<Subtree>>| -> Vec<Option<NodeId>> { nodes.into_iter().map(|n| n.map(|n| n.id())).collect() };
                let alone = ids(positions.iter().map(|p| dir.node_at(p)).collect());
                prop_assert!(alone.iter().any(Option::is_none) || model.len() == 1);
                prop_assert_eq!(ids(dir.nodes_at(&positions)), alone);
                // The pages under them, visited in the same descent, are the walks of the
                // nodes found.
                let at = |r: &PageRef| match r.loc { PageLoc::Disk(l) => l, PageLoc::Memory(_) => u64::MAX };
                let mut visited = Vec::new();
                dir.for_each_page_at(&positions, &mut |r| visited.push(at(r)));
                let mut walked = Vec::new();
                for node in dir.nodes_at(&positions).into_iter().flatten() {
                    node.for_each_page(&mut |r| walked.push(at(r)));
                }
                prop_assert!(!walked.is_empty() || entries(&model) == 0);
                prop_assert_eq!(visited, walked);
                // Warming visits each node on the paths once: to the keys' pages (keys sorted),
                // and to the regions.
                let mut sorted_keys = keys.clone();
                sorted_keys.sort();
                let on_paths = |ends: &mut dyn Iterator<Item = (KeyPath, usize)>| -> usize {
                    let mut nodes = std::collections::BTreeSet::new();
                    for (bits, end) in ends {
                        nodes.extend((1..=end).map(|d| Prefix::of_key(&bits, d)));
                    }
                    nodes.len()
                };
                let (visited, lows) = dir.warm_with((dir.root, 0), sorted_keys.len(), |_| KEY_BITS, |k, d| bit_at(&sorted_keys[k], d));
                prop_assert_eq!(visited, on_paths(&mut sorted_keys.iter().map(|k| (*k, dir.locate(k).0.depth()))));
                // ... and fetches below each sibling off the paths that is a low branch, through
                // every low branch under it: the nodes a pass hashes the sibling's node from.
                let arena = &dir.arena;
                fn low_chain(arena: &Arena, id: NodeId) -> usize {
                    match arena.children(id) {
                        Some((l, r)) if arena.is_low(id) => 1 + low_chain(arena, l) + low_chain(arena, r),
                        _ => 0,
                    }
                }
                let mut on: std::collections::BTreeSet<Prefix> = std::collections::BTreeSet::new();
                for k in &sorted_keys {
                    on.extend((0..dir.locate(k).0.depth()).map(|d| Prefix::of_key(k, d)));
                }
                let siblings = on.iter().flat_map(|p| [p.child(false), p.child(true)]).filter(|c| !on.contains(c) && !sorted_keys.iter().any(|k| c.contains(k)));
                let want: usize = siblings.filter_map(|c| dir.id_at(&c)).map(|id| low_chain(arena, id)).sum();
                prop_assert_eq!(lows, want);
                let positions: Vec<Prefix> = sorted(&model).into_iter().map(|(p, _)| p).collect();
                let (visited, _) = dir.warm_with((dir.root, 0), positions.len(), |k| positions[k].depth(), |k, d| positions[k].bit(d));
                prop_assert_eq!(visited, on_paths(&mut positions.iter().map(|p| (*p.bits(), p.depth()))));
                // The sparse branches above each region: the ancestors holding at most
                // `limit` entries, shallowest first.
                for limit in [2u64, 9, 16] {
                    for (pos, _) in sorted(&model) {
                        let got: Vec<Prefix> = dir.sparse_branches_above(&pos, limit).into_iter().map(|(p, _)| p).collect();
                        let under = |q: &Prefix| -> u64 {
                            model.iter().filter(|(p, _)| q.covers(p)).map(|(_, l)| l.map_or(0, |n| u64::from(page_ref(n).count))).sum()
                        };
                        let want: Vec<Prefix> = (0..pos.depth()).map(|d| Prefix::of_key(pos.bits(), d)).filter(|q| under(q) <= limit).collect();
                        prop_assert_eq!(got, want);
                    }
                }
                versions.push((dir, model.clone()));
            }
            // Any two versions differ by what `diff` finds.
            for (i, j) in [(0, versions.len() - 1), (versions.len() / 2, versions.len() - 1), (versions.len() - 1, 0)] {
                let (from, to) = (&versions[i].0, &versions[j].0);
                let regions = diff(from, to).unwrap();
                let rebuilt = from.replace(regions.clone()).unwrap();
                prop_assert_eq!(rebuilt.root_node(), to.root_node());
                prop_assert_eq!(rebuilt.len(), to.len());
                // Taking the nodes of the equal tree instead of hashing (each checked against
                // the hash in debug builds, as tests run) builds the same tree.
                let taken = from.replace_as(regions, to).unwrap();
                prop_assert_eq!(taken.root_node(), to.root_node());
                prop_assert_eq!(taken.len(), to.len());
            }
            drop(versions);
            prop_assert_eq!(arena.live(), (0, 0));
            prop_assert_eq!(Arc::strong_count(&arena), 1);
        }
    }

    /// Replacing a region inside a page, overlapping regions, or a region of another store is
    /// an error, not a panic or a silently wrong tree.
    #[test]
    fn bad_regions_are_refused() {
        let h = Hasher::Blake3;
        let arena = Arena::new();
        let dir = Directory::empty(&arena, h)
            .replace(vec![(Prefix::root(), Subtree::page(&arena, &page_ref(1)))])
            .unwrap();
        let inside = Prefix::root().child(true);
        let e = dir.replace(vec![(inside, Subtree::empty(&arena))]).unwrap_err();
        assert_eq!(e, DirectoryError::RegionInsidePage(inside));
        let e = dir
            .replace(vec![
                (Prefix::root(), Subtree::empty(&arena)),
                (inside, Subtree::empty(&arena)),
            ])
            .unwrap_err();
        assert!(matches!(e, DirectoryError::Overlap(_)), "{e:?}");
        let other = Arena::new();
        let e = dir
            .replace(vec![(Prefix::root(), Subtree::page(&other, &page_ref(2)))])
            .unwrap_err();
        assert_eq!(e, DirectoryError::ForeignRegion);
        drop(dir);
        assert_eq!(arena.live(), (0, 0));
        assert_eq!(other.live(), (0, 0));
    }
}
