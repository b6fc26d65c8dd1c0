//! The in-memory directory: every trie node above the leaf pages, and for each page its
//! location, checksum, node and entry count.
//!
//! The directory is a persistent binary tree over trie positions: a commit copies only the
//! paths it changes and shares the rest, so any number of versions can be held at once and a
//! reader pinned to one version never sees another's changes. Nothing here does I/O; the pages
//! themselves are read by the caller.
//!
//! Invariant kept by the commit pipeline: every branch holds at least two entries, so its node
//! is an internal node, and a key's path through the directory never ends above a page.

use crate::state::page::Page;
use crate::state::prefix::Prefix;
use sprig_core::proof::{PathProof, ProofNode, Terminal};
use sprig_core::trie::{bit_at, parent, KeyPath, Node, NodeKind, TERMINATOR};
use sprig_core::Hasher;
use std::sync::Arc;

/// Where a page version is.
#[derive(Clone, Debug)]
pub enum PageLoc {
    /// In a segment file: segment id in the high 32 bits, block index in the low 32 bits.
    Disk(u64),
    /// Built in memory by a batch or overlay. Once the commit that writes it is durable, the
    /// page is dropped from memory and read from where it was written.
    Memory(Arc<MemoryPage>),
}

/// A page built in memory: held until a commit makes it durable, then released, so that
/// overlays built on a committed one do not keep its pages in RAM.
#[derive(Debug)]
pub struct MemoryPage {
    page: parking_lot::Mutex<Option<Arc<Page>>>,
    written: std::sync::OnceLock<(u64, u64)>,
}

impl MemoryPage {
    /// A page held in memory.
    pub fn new(page: Arc<Page>) -> Arc<MemoryPage> {
        Arc::new(MemoryPage {
            page: parking_lot::Mutex::new(Some(page)),
            written: std::sync::OnceLock::new(),
        })
    }

    /// The page, while it is held in memory.
    pub fn page(&self) -> Option<Arc<Page>> {
        self.page.lock().clone()
    }

    /// Where a durable commit wrote the page, and its checksum, once released.
    pub fn written(&self) -> Option<(u64, u64)> {
        self.written.get().copied()
    }

    /// The page is durable at `loc` with `checksum`: drop it from memory.
    pub fn release(&self, loc: u64, checksum: u64) {
        if self.written.set((loc, checksum)).is_ok() {
            *self.page.lock() = None;
        }
    }
}

/// A page as the directory knows it.
#[derive(Clone, Debug)]
pub struct PageRef {
    /// Where the page is.
    pub loc: PageLoc,
    /// xxh3-64 of the page's 4 KiB: every read is checked against it (0 while in memory).
    pub checksum: u64,
    /// The page's trie node.
    pub node: Node,
    /// The number of entries in the page.
    pub count: u32,
}

/// One position of the directory tree.
#[derive(Debug)]
pub enum DirNode {
    /// No entries and no page.
    Empty,
    /// A leaf page.
    Page(PageRef),
    /// Two sub-positions.
    Branch(Branch),
}

/// An inner position of the directory.
#[derive(Debug)]
pub struct Branch {
    node: Node,
    count: u64,
    children: [Arc<DirNode>; 2],
}

impl Branch {
    /// The two children.
    pub fn children(&self) -> &[Arc<DirNode>; 2] {
        &self.children
    }
}

impl DirNode {
    /// The trie node at this position.
    pub fn node(&self) -> Node {
        match self {
            DirNode::Empty => TERMINATOR,
            DirNode::Page(p) => p.node,
            DirNode::Branch(b) => b.node,
        }
    }

    /// The number of entries below this position.
    pub fn count(&self) -> u64 {
        match self {
            DirNode::Empty => 0,
            DirNode::Page(p) => u64::from(p.count),
            DirNode::Branch(b) => b.count,
        }
    }

    /// A branch over two children, with its node computed.
    pub fn branch(hasher: Hasher, left: Arc<DirNode>, right: Arc<DirNode>) -> DirNode {
        DirNode::Branch(Branch {
            node: parent(hasher, &left.node(), &right.node()),
            count: left.count() + right.count(),
            children: [left, right],
        })
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
}

/// A region of the directory (a position) and a subtree to put there.
pub type Region = (Prefix, Arc<DirNode>);

/// Appends the multi-proof nodes below one region (a page or an empty region), given its
/// position, its directory node and the keys under it.
pub type RegionProver<'a> = dyn FnMut(&Prefix, &DirNode, &[KeyPath], &mut Vec<ProofNode>) -> Result<(), DirectoryError>
    + 'a;

/// A version of the directory. Cloning is cheap and shares everything.
#[derive(Clone, Debug)]
pub struct Directory {
    hasher: Hasher,
    root: Arc<DirNode>,
}

impl Directory {
    /// The directory of an empty database.
    pub fn empty(hasher: Hasher) -> Directory {
        Directory {
            hasher,
            root: Arc::new(DirNode::Empty),
        }
    }

    /// A directory with the given tree.
    pub fn from_root(hasher: Hasher, root: Arc<DirNode>) -> Directory {
        Directory { hasher, root }
    }

    /// The hasher.
    pub fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// The state root.
    pub fn root_node(&self) -> Node {
        self.root.node()
    }

    /// The tree.
    pub fn tree(&self) -> &Arc<DirNode> {
        &self.root
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        self.root.count()
    }

    /// Whether the state holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The region holding `key`: its position and its node (a page or an empty region).
    pub fn locate(&self, key: &KeyPath) -> (Prefix, &Arc<DirNode>) {
        let mut node = &self.root;
        let mut depth = 0usize;
        while let DirNode::Branch(b) = node.as_ref() {
            let right = bit_at(key, depth);
            node = &b.children[usize::from(right)];
            depth += 1;
        }
        (Prefix::of_key(key, depth), node)
    }

    /// A new version with each region (position, new subtree) replaced. Regions must be
    /// disjoint and sit at positions of this directory (at a page, an empty region or a
    /// branch), never inside a page.
    pub fn replace(
        &self,
        mut regions: Vec<(Prefix, Arc<DirNode>)>,
    ) -> Result<Directory, DirectoryError> {
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
        let root = replace_at(self.hasher, &self.root, Prefix::root(), &regions)?;
        Ok(Directory {
            hasher: self.hasher,
            root,
        })
    }

    /// Visit every page in key order with its position.
    pub fn for_each_page(&self, mut f: impl FnMut(&Prefix, &PageRef)) {
        fn walk(node: &DirNode, pos: Prefix, f: &mut dyn FnMut(&Prefix, &PageRef)) {
            match node {
                DirNode::Empty => {}
                DirNode::Page(p) => f(&pos, p),
                DirNode::Branch(b) => {
                    walk(&b.children[0], pos.child(false), f);
                    walk(&b.children[1], pos.child(true), f);
                }
            }
        }
        walk(&self.root, Prefix::root(), &mut f);
    }

    /// Up to `limit` pages in key order, starting with the region that holds `start`.
    pub fn pages_from(&self, start: &KeyPath, limit: usize) -> Vec<(Prefix, PageRef)> {
        fn walk(
            node: &DirNode,
            pos: Prefix,
            start: Option<&KeyPath>,
            limit: usize,
            out: &mut Vec<(Prefix, PageRef)>,
        ) {
            if out.len() >= limit {
                return;
            }
            match node {
                DirNode::Empty => {}
                DirNode::Page(r) => out.push((pos, r.clone())),
                DirNode::Branch(b) => {
                    let d = pos.depth();
                    match start {
                        Some(k) if bit_at(k, d) => {
                            walk(&b.children[1], pos.child(true), Some(k), limit, out)
                        }
                        _ => {
                            walk(&b.children[0], pos.child(false), start, limit, out);
                            walk(&b.children[1], pos.child(true), None, limit, out);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, Prefix::root(), Some(start), limit, &mut out);
        out
    }

    /// The node at `pos`, if `pos` is a position of the directory (not inside a page).
    pub fn node_at(&self, pos: &Prefix) -> Option<&Arc<DirNode>> {
        let mut node = &self.root;
        for depth in 0..pos.depth() {
            match node.as_ref() {
                DirNode::Branch(b) => node = &b.children[usize::from(pos.bit(depth))],
                _ => return None,
            }
        }
        Some(node)
    }

    /// The path proof of `key`: siblings from the directory down to the key's region, then from
    /// the page (supplied by `page`) down to the terminal.
    pub fn path_proof<'p>(
        &self,
        key: &KeyPath,
        page: &dyn Fn(&Prefix) -> Option<&'p Page>,
    ) -> Result<PathProof, DirectoryError> {
        let mut siblings = Vec::new();
        let mut node = &self.root;
        let mut depth = 0usize;
        while let DirNode::Branch(b) = node.as_ref() {
            if Hasher::node_kind(&b.node) != NodeKind::Internal {
                return Err(DirectoryError::ThinBranch(Prefix::of_key(key, depth)));
            }
            let right = bit_at(key, depth);
            siblings.push(b.children[usize::from(!right)].node());
            node = &b.children[usize::from(right)];
            depth += 1;
        }
        let pos = Prefix::of_key(key, depth);
        let terminal = match node.as_ref() {
            DirNode::Page(_) => {
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
    /// reach (given its position, its node and the keys under it).
    pub fn prove(
        &self,
        keys: &[KeyPath],
        region: &mut RegionProver<'_>,
        out: &mut Vec<ProofNode>,
    ) -> Result<(), DirectoryError> {
        prove_at(&self.root, Prefix::root(), keys, region, out)
    }
}

/// Collect every page of a subtree at `pos` (position and reference), in key order.
pub fn pages_under(node: &DirNode, pos: Prefix, out: &mut Vec<(Prefix, PageRef)>) {
    match node {
        DirNode::Empty => {}
        DirNode::Page(r) => out.push((pos, r.clone())),
        DirNode::Branch(b) => {
            pages_under(&b.children[0], pos.child(false), out);
            pages_under(&b.children[1], pos.child(true), out);
        }
    }
}

/// The regions where `to` differs from `from`: each the highest position below which the two
/// trees differ and at which one of them is a page or an empty region, with `to`'s subtree.
/// Shared subtrees are skipped without being walked.
pub fn diff(
    from: &Arc<DirNode>,
    to: &Arc<DirNode>,
    pos: Prefix,
    out: &mut Vec<(Prefix, Arc<DirNode>)>,
) {
    if Arc::ptr_eq(from, to) {
        return;
    }
    match (from.as_ref(), to.as_ref()) {
        (DirNode::Branch(a), DirNode::Branch(b)) => {
            diff(&a.children[0], &b.children[0], pos.child(false), out);
            diff(&a.children[1], &b.children[1], pos.child(true), out);
        }
        (DirNode::Empty, DirNode::Empty) => {}
        (DirNode::Page(a), DirNode::Page(b)) if matches!((&a.loc, &b.loc), (PageLoc::Disk(x), PageLoc::Disk(y)) if x == y) =>
            {}
        _ => out.push((pos, to.clone())),
    }
}

fn replace_at(
    hasher: Hasher,
    node: &Arc<DirNode>,
    pos: Prefix,
    regions: &[(Prefix, Arc<DirNode>)],
) -> Result<Arc<DirNode>, DirectoryError> {
    match regions {
        [] => return Ok(node.clone()),
        [(p, subtree)] if *p == pos => return Ok(subtree.clone()),
        _ => {}
    }
    let DirNode::Branch(b) = node.as_ref() else {
        let first = regions.first().map_or(pos, |r| r.0);
        return Err(DirectoryError::RegionInsidePage(first));
    };
    if regions.iter().any(|(p, _)| *p == pos) {
        return Err(DirectoryError::Overlap(pos));
    }
    let depth = pos.depth();
    let split = regions.partition_point(|(p, _)| !p.bit(depth));
    let (left, right) = regions.split_at(split);
    let l = replace_at(hasher, &b.children[0], pos.child(false), left)?;
    let r = replace_at(hasher, &b.children[1], pos.child(true), right)?;
    Ok(Arc::new(DirNode::branch(hasher, l, r)))
}

fn prove_at(
    node: &DirNode,
    pos: Prefix,
    keys: &[KeyPath],
    region: &mut RegionProver<'_>,
    out: &mut Vec<ProofNode>,
) -> Result<(), DirectoryError> {
    if keys.is_empty() {
        let n = node.node();
        out.push(if n == TERMINATOR {
            ProofNode::Terminator
        } else {
            ProofNode::Opaque(n)
        });
        return Ok(());
    }
    match node {
        DirNode::Empty | DirNode::Page(_) => region(&pos, node, keys, out)?,
        DirNode::Branch(b) => {
            if Hasher::node_kind(&b.node) != NodeKind::Internal {
                return Err(DirectoryError::ThinBranch(pos));
            }
            out.push(ProofNode::Internal);
            let depth = pos.depth();
            let split = keys.partition_point(|k| !bit_at(k, depth));
            let (kl, kr) = keys.split_at(split);
            prove_at(&b.children[0], pos.child(false), kl, region, out)?;
            prove_at(&b.children[1], pos.child(true), kr, region, out)?;
        }
    }
    Ok(())
}
