//! The per-region work of a commit, run on every core: prove the touched keys of a region and
//! compute its new node in one pass, then build the region's new page (or pages, when it
//! overflows and splits); and the merge of sparse regions afterwards. A core walks its regions
//! a group at a time and computes the group's hashes together ([`sprig_core::jobs`]) before
//! building their pages.

use super::{Change, Region};
use crate::write::cores::{as_fed, map_shares_on_cores};
use crate::write::engine::Inner;
use crate::state::directory::{Arena, Directory, MemoryPage, PageLoc, PageRef, Subtree};
use crate::error::{Error, Result};
use crate::state::page::{
    fits, with_jobs, ExternalValue, Layout, Page, Stamp, ValueRef, BUCKETS, MAX_INLINE_VALUE_BYTES,
    PAGE_BODY_BYTES, UNWRITTEN,
};
use crate::state::prefix::Prefix;
use crate::stats::ReadKind;
use crate::telemetry::Phase;
use sprig_core::jobs::{HashJobs, NodeRef};
use sprig_core::proof::{prove_and_update_in, ProofNode};
use sprig_core::trie::{internal_nodes_to_update_in, shared_prefix_bits, KeyPath, Node, ValueHash};
use sprig_core::Hasher;
use std::ops::Range;
use std::sync::Arc;

/// Branches holding at most this many entries are merged into one page when it fits.
const MERGE_MAX_ENTRIES: u64 = 16;
/// Below this many regions a commit's rewrite runs on one thread.
pub(crate) const PARALLEL_MIN_REGIONS: usize = 64;

/// One region a batch touches: its position, its page (if it has one), and the runs of the
/// batch's sorted keys and changes that fall in it.
pub(crate) struct RegionWork {
    pub prefix: Prefix,
    pub page: Option<Arc<Page>>,
    pub keys: Range<usize>,
    pub changes: Range<usize>,
}

/// What became of a region.
pub(crate) struct Rewritten {
    /// The region's new subtree, if it changed.
    pub subtree: Option<Subtree>,
    /// Extra pages created by overflow.
    pub splits: u64,
    /// Value-log records no longer referenced.
    pub freed: Vec<u64>,
    /// Keys whose value, new in an ancestor overlay and not written yet, is no longer
    /// referenced.
    pub freed_unwritten: Vec<KeyPath>,
    /// The hash computations the region's changes need at the least (see
    /// [`crate::Stats::hashes_needed`]), below the region's position.
    pub hashes_needed: u64,
}

/// The multi-proof nodes of every rewritten region's keys below its position (pre-state), in
/// the regions' order: in a few buffers (one per core's share of the regions, when the pages
/// were at hand) rather than one allocation per region, which cost about a microsecond a
/// region to allocate on one core and free on another at transfer's 17,700 regions a batch.
pub(crate) struct RegionProofs {
    buffers: Vec<Vec<ProofNode>>,
    /// Each region's buffer and range in it.
    spans: Vec<(usize, Range<usize>)>,
}

impl RegionProofs {
    /// The nodes of every region together.
    pub fn node_count(&self) -> usize {
        self.buffers.iter().map(Vec::len).sum()
    }

    /// Each region's nodes, in the regions' order.
    pub fn iter(&self) -> impl Iterator<Item = &[ProofNode]> + '_ {
        self.spans.iter().map(|(b, range)| {
            match self.buffers.get(*b).and_then(|buf| buf.get(range.clone())) {
                Some(nodes) => nodes,
                None => unreachable!("invariant broken: a region's proof span outside its buffer"),
            }
        })
    }
}

/// Proof nodes a region adds at first guess: about ten per key in a page (the bucket levels and
/// a few below), up to the keys a page holds (a region without a page may take a whole
/// bulk-sized batch; its proof grows as it needs).
fn proof_guess(work: &RegionWork) -> usize {
    8 + 10 * work.keys.len().min(64)
}

/// Rewrite every region, spreading them over the available cores.
pub(crate) fn rewrite_regions(
    arena: &Arc<Arena>,
    hasher: Hasher,
    stamp: Stamp,
    works: &[RegionWork],
    keys: &[KeyPath],
    changes: &[Change],
) -> Result<(Vec<Rewritten>, RegionProofs)> {
    let shares = map_shares_on_cores(works, PARALLEL_MIN_REGIONS, |share| {
        // Half the first guess: transfer's regions of two or three keys add about twenty
        // nodes each; a larger share grows the buffer a few times.
        let mut proof: Vec<ProofNode> =
            Vec::with_capacity(share.iter().map(proof_guess).sum::<usize>() / 2);
        let mut done = Vec::with_capacity(share.len());
        let mut jobs = HashJobs::new(hasher);
        // A group of regions walked, their hashes computed together, then their pages made.
        for group in share.chunks(WALK_GROUP) {
            jobs.clear();
            let regions = group.iter().map(|w| (w, w.page.as_ref()));
            let walked = walk_group(&mut jobs, regions, keys, changes, &mut proof);
            for (w, (walk, range)) in group.iter().zip(walked) {
                let r = rewrite_walked(arena, hasher, stamp, w, w.page.as_ref(), changes, walk)?;
                done.push((r, range));
            }
        }
        Ok::<_, Error>((done, proof))
    });
    let mut rewritten = Vec::with_capacity(works.len());
    let mut proofs = RegionProofs {
        buffers: Vec::with_capacity(shares.len()),
        spans: Vec::with_capacity(works.len()),
    };
    for share in shares {
        let (done, buffer) = share?;
        let b = proofs.buffers.len();
        for (r, range) in done {
            rewritten.push(r);
            proofs.spans.push((b, range));
        }
        proofs.buffers.push(buffer);
    }
    Ok((rewritten, proofs))
}

/// Rewrite every region while the pages of `unloaded` load: the regions (of `works`, whose
/// `page` they leave `None`) whose pages are not in memory yet, with where they are, in key
/// order as `works`. Regions whose pages are at hand are rewritten on the other cores at
/// once, the others as soon as their page arrives, while the calling thread keeps the reads
/// in flight and decodes them: the rewrites overlap the reads instead of waiting for the last.
pub(crate) fn rewrite_regions_loading(
    inner: &Inner,
    arena: &Arc<Arena>,
    stamp: Stamp,
    works: &[RegionWork],
    unloaded: &[(Prefix, PageRef)],
    keys: &[KeyPath],
    changes: &[Change],
) -> Result<(Vec<Rewritten>, RegionProofs)> {
    // The region of each page to load: both lists are in key order, so one pass pairs them.
    let mut region_of = Vec::with_capacity(unloaded.len());
    let mut w = 0usize;
    for (prefix, _) in unloaded {
        while works.get(w).is_some_and(|work| work.prefix != *prefix) {
            w += 1;
        }
        if w >= works.len() {
            return Err(Error::internal("a page to load for no region"));
        }
        region_of.push(w);
        w += 1;
    }
    let loaded: Vec<std::sync::OnceLock<Arc<Page>>> =
        works.iter().map(|_| std::sync::OnceLock::new()).collect();
    let (load, rewritten) = as_fed(
        works.len(),
        |ready| {
            let mut next = region_of.iter().peekable();
            for w in 0..works.len() {
                if next.next_if(|p| **p == w).is_none() {
                    ready(w);
                }
            }
            let load_started = std::time::Instant::now();
            let load = inner.load_pages_each(unloaded, ReadKind::Batch, true, &mut |j, page| {
                let w = *region_of
                    .get(j)
                    .ok_or_else(|| Error::internal("a page loaded for no request"))?;
                loaded
                    .get(w)
                    .and_then(|slot| slot.set(page).ok())
                    .ok_or_else(|| Error::internal("a region's page loaded twice"))?;
                ready(w);
                Ok(())
            });
            inner.counters.phase(Phase::Load, load_started.elapsed());
            load
        },
        |w| {
            let work = works.get(w)?;
            let page = loaded.get(w).and_then(|slot| slot.get()).or(work.page.as_ref());
            let mut proof = Vec::with_capacity(proof_guess(work));
            let walked = with_jobs(inner.hasher, |jobs| {
                walk_group(jobs, std::iter::once((work, page)), keys, changes, &mut proof)
            });
            let walk = walked.into_iter().next().map(|(walk, _)| walk)?;
            let r = rewrite_walked(arena, inner.hasher, stamp, work, page, changes, walk);
            Some(r.map(|r| (r, proof)))
        },
    );
    load?;
    // Regions rewritten as their pages arrive, on whichever core is free: a buffer each.
    let mut done = Vec::with_capacity(works.len());
    let mut proofs = RegionProofs {
        buffers: Vec::with_capacity(works.len()),
        spans: Vec::with_capacity(works.len()),
    };
    for r in rewritten {
        let (r, proof) = r
            .flatten()
            .unwrap_or_else(|| Err(Error::internal("a region was not rewritten")))?;
        proofs.spans.push((proofs.buffers.len(), 0..proof.len()));
        proofs.buffers.push(proof);
        done.push(r);
    }
    Ok((done, proofs))
}

/// Regions walked together before their hashes are computed: enough for BLAKE3's 16 lanes at
/// every level of their walks (a page's walk has a few hashes a level), few enough that
/// their jobs stay in the core's nearer caches.
const WALK_GROUP: usize = 32;

/// What a region's walk leaves for the rest of its rewrite: its changes' value hashes, and its
/// new node and bucket nodes (when it has a page), as jobs not computed yet (`R` a
/// [`NodeRef`]) or computed ([`Node`]).
struct Walked<R = NodeRef> {
    change_hashes: Vec<(KeyPath, Option<ValueHash>)>,
    node: R,
    buckets: Option<[R; BUCKETS]>,
}

impl Walked {
    /// The walk with its nodes computed (once `jobs` is evaluated).
    fn resolve(self, jobs: &HashJobs) -> Walked<Node> {
        Walked {
            change_hashes: self.change_hashes,
            node: jobs.value(self.node),
            buckets: self.buckets.map(|b| b.map(|r| jobs.value(r))),
        }
    }
}

/// Walk one region, whose page (if it has one) is `page`: its keys' multi-proof nodes below
/// its position go to `proof` (hashes as placeholders), its hashes into `jobs`.
fn walk_region(
    jobs: &mut HashJobs,
    work: &RegionWork,
    page: Option<&Arc<Page>>,
    keys: &[KeyPath],
    changes: &[Change],
    proof: &mut Vec<ProofNode>,
) -> Walked {
    let keys = keys.get(work.keys.clone()).unwrap_or_default();
    let changes = changes.get(work.changes.clone()).unwrap_or_default();
    let change_hashes: Vec<(KeyPath, Option<ValueHash>)> = changes
        .iter()
        .map(|(k, v)| (*k, v.as_ref().map(|v| jobs.hasher().hash_value(v))))
        .collect();
    let (node, buckets) = match page {
        Some(page) => {
            let (node, buckets) = page.walk(jobs, keys, &change_hashes, proof);
            (node, Some(buckets))
        }
        None => {
            let node = prove_and_update_in(
                jobs,
                work.prefix.depth(),
                &[],
                keys,
                &change_hashes,
                proof,
            );
            (node, None)
        }
    };
    Walked {
        change_hashes,
        node,
        buckets,
    }
}

/// Walk `regions` (each with its page, if it has one), appending each one's proof nodes to
/// `proof`, then compute all their hashes together in `jobs` (emptied by the caller): each
/// region's walk with its nodes computed, and its proof's range in `proof`.
fn walk_group<'w>(
    jobs: &mut HashJobs,
    regions: impl Iterator<Item = (&'w RegionWork, Option<&'w Arc<Page>>)>,
    keys: &[KeyPath],
    changes: &[Change],
    proof: &mut Vec<ProofNode>,
) -> Vec<(Walked<Node>, Range<usize>)> {
    // Each region's page is prefetched while the one before it is walked: at 2^20 entries
    // a batch's pages are cached in memory, not in the CPU's caches, and a walk's reads of
    // its page's entries otherwise wait on one cache miss after another.
    let mut regions = regions.peekable();
    if let Some((_, Some(page))) = regions.peek() {
        page.prefetch();
    }
    let mut walked: Vec<(Walked, Range<usize>)> = Vec::new();
    while let Some((work, page)) = regions.next() {
        if let Some((_, Some(next))) = regions.peek() {
            next.prefetch();
        }
        let start = proof.len();
        let walk = walk_region(jobs, work, page, keys, changes, proof);
        walked.push((walk, start..proof.len()));
    }
    jobs.evaluate();
    jobs.fill(proof);
    walked
        .into_iter()
        .map(|(walk, range)| (walk.resolve(jobs), range))
        .collect()
}

/// The rest of a region's rewrite once its walk's hashes are computed: its new
/// page or pages.
fn rewrite_walked(
    arena: &Arc<Arena>,
    hasher: Hasher,
    stamp: Stamp,
    work: &RegionWork,
    page: Option<&Arc<Page>>,
    changes: &[Change],
    walked: Walked<Node>,
) -> Result<Rewritten> {
    let changes = changes.get(work.changes.clone()).unwrap_or_default();
    let Walked {
        change_hashes,
        node,
        buckets,
    } = walked;
    if changes.is_empty() {
        return Ok(Rewritten {
            subtree: None,
            splits: 0,
            freed: Vec::new(),
            freed_unwritten: Vec::new(),
            hashes_needed: 0,
        });
    }

    // Every change replaces an inline value by one of the same length (balances, counters):
    // the page is patched, not listed, merged and encoded again.
    if let (Some(page), Some(b)) = (page, &buckets) {
        // A region's page is at the region's position (checked when it was decoded).
        debug_assert_eq!(page.prefix(), &work.prefix);
        let replacements: Option<Vec<(KeyPath, &[u8])>> = changes
            .iter()
            .map(|(k, v)| v.as_deref().map(|v| (*k, v)))
            .collect();
        let patched = replacements.and_then(|r| page.with_values_replaced(stamp, &r, b));
        if let Some(patched) = patched {
            // Debug builds only, as below.
            debug_assert_eq!(patched.node(hasher), node);
            return Ok(Rewritten {
                subtree: Some(page_node(arena, patched, node)),
                splits: 0,
                freed: Vec::new(),
                freed_unwritten: Vec::new(),
                // The same keys before and after: the page's.
                hashes_needed: page.internal_nodes_to_update(changes.iter().map(|(k, _)| k))
                    + hashes_written(changes),
            });
        }
    }
    // The page's entries, listed for the merge with the changes.
    let old_items = page.map(|p| p.items()).unwrap_or_default();

    // The region's new entries: old ones merged with the changes.
    let mut items: Vec<(KeyPath, ValueRef<'_>)> =
        Vec::with_capacity(old_items.len() + changes.len());
    let mut freed = Vec::new();
    let mut freed_unwritten = Vec::new();
    let mut old = old_items.into_iter().peekable();
    for ((key, change), (_, hash)) in changes.iter().zip(&change_hashes) {
        while let Some(e) = old.next_if(|e| e.0 < *key) {
            items.push(e);
        }
        if let Some((_, v)) = old.next_if(|e| e.0 == *key) {
            match v.external() {
                Some(x) if x.loc == UNWRITTEN => freed_unwritten.push(*key),
                Some(x) => freed.push(x.loc),
                None => {}
            }
        }
        if let (Some(value), Some(hash)) = (change, hash) {
            let v = if value.len() > MAX_INLINE_VALUE_BYTES {
                ValueRef::External(ExternalValue {
                    loc: UNWRITTEN,
                    len: value.len() as u64,
                    hash: *hash,
                })
            } else {
                ValueRef::Inline(value)
            };
            items.push((*key, v));
        }
    }
    items.extend(old);
    let hashes_needed = hashes_needed(work.prefix, &items, changes);

    let (subtree, splits) = if items.is_empty() {
        (Subtree::empty(arena), 0)
    } else if fits(&items) {
        let page = match &buckets {
            // Same position, so the walk's new bucket nodes are this page's.
            Some(b) => Page::build_with_buckets(work.prefix, stamp, &items, b),
            None => Page::build(hasher, work.prefix, stamp, &items),
        }
        .map_err(|e| Error::internal(format!("building a page: {e}")))?;
        // Debug builds only: folding the buckets again costs as many hashes as the update
        // itself; the property tests of `Page::prove_and_update` cover the equivalence.
        debug_assert_eq!(page.node(hasher), node);
        (page_node(arena, page, node), 0)
    } else {
        let layout = Layout::build(work.prefix, items, PAGE_BODY_BYTES);
        let splits = layout.page_count() as u64 - 1;
        let subtree = subtree_of(arena, hasher, layout, stamp)?;
        if subtree.node() != node {
            return Err(Error::internal(format!(
                "split region {} hashes differently from its entries",
                work.prefix
            )));
        }
        (subtree, splits)
    };
    Ok(Rewritten {
        subtree: Some(subtree),
        splits,
        freed,
        freed_unwritten,
        hashes_needed,
    })
}

/// The hashes `changes` need at the least below `prefix`, whose entries are now `items`:
/// the internal nodes on their paths, and [`hashes_written`].
fn hashes_needed(prefix: Prefix, items: &[(KeyPath, ValueRef<'_>)], changes: &[Change]) -> u64 {
    let internal = internal_nodes_to_update_in(
        prefix.depth(),
        items.len(),
        |i| items.get(i).map(|(k, _)| k),
        changes.iter().map(|(k, _)| k),
    );
    internal + hashes_written(changes)
}

/// A leaf hash and the value's hash blocks (64 bytes each) per written key.
fn hashes_written(changes: &[Change]) -> u64 {
    changes
        .iter()
        .filter_map(|(_, v)| v.as_ref())
        .map(|v| 1 + v.len().div_ceil(64).max(1) as u64)
        .sum()
}

/// The directory levels above the changed regions (sorted, disjoint): the branches on their
/// paths from the root, each counted once.
pub(crate) fn branches_above(prefixes: impl IntoIterator<Item = Prefix>) -> u64 {
    let mut total = 0u64;
    let mut previous: Option<Prefix> = None;
    for p in prefixes {
        // Positions 0..=lcp are on both paths (the regions are disjoint, so lcp is above both).
        let shared = previous.map_or(0, |q| {
            (shared_prefix_bits(q.bits(), p.bits()) + 1)
                .min(q.depth())
                .min(p.depth())
        });
        total += (p.depth() - shared) as u64;
        previous = Some(p);
    }
    total
}

/// A directory node for an in-memory page whose trie node is known.
pub(crate) fn page_node(arena: &Arc<Arena>, page: Page, node: Node) -> Subtree {
    Subtree::page(
        arena,
        &PageRef {
            node,
            count: page.len() as u32,
            checksum: 0,
            loc: PageLoc::Memory(MemoryPage::new(Arc::new(page))),
        },
    )
}

/// The directory subtree of a layout, with every page built in memory.
fn subtree_of(
    arena: &Arc<Arena>,
    hasher: Hasher,
    layout: Layout<'_>,
    stamp: Stamp,
) -> Result<Subtree> {
    match layout {
        Layout::Page(_, entries) if entries.is_empty() => Ok(Subtree::empty(arena)),
        Layout::Page(prefix, entries) => {
            let page = Page::build(hasher, prefix, stamp, &entries)
                .map_err(|e| Error::internal(format!("building a page: {e}")))?;
            let node = page.node(hasher);
            Ok(page_node(arena, page, node))
        }
        Layout::Split(l, r) => Ok(Subtree::branch(
            hasher,
            subtree_of(arena, hasher, *l, stamp)?,
            subtree_of(arena, hasher, *r, stamp)?,
        )),
    }
}

/// Replace sparse branches on the changed paths by single pages, so that every branch keeps
/// at least two entries (its node stays an internal node) and pages stay reasonably full.
/// Returns the final directory, the final regions relative to `base`, and the merge count.
pub(crate) fn merge_sparse(
    inner: &Inner,
    base: &Directory,
    regions: Vec<Region>,
    stamp: Stamp,
) -> Result<(Directory, Vec<Region>, u64)> {
    let mut load = |refs: &[(Prefix, PageRef)]| inner.load_pages(refs, ReadKind::Maintenance);
    merge_sparse_with(inner.hasher, base, regions, stamp, &mut load)
}

/// Loads the pages of the given regions, in order.
pub(crate) type PageLoader<'a> = dyn FnMut(&[(Prefix, PageRef)]) -> Result<Vec<Arc<Page>>> + 'a;

/// [`merge_sparse`] reading the pages under sparse branches with `load`.
pub(crate) fn merge_sparse_with(
    hasher: Hasher,
    base: &Directory,
    regions: Vec<Region>,
    stamp: Stamp,
    load: &mut PageLoader<'_>,
) -> Result<(Directory, Vec<Region>, u64)> {
    // The regions go into the directory whole (a page just built moves into its twig rather
    // than being copied there), and come back as the directory holds them: the nodes a commit
    // in place moves to disk.
    let (dir, regions) = base
        .replace_placed(regions)
        .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
    let mut merged: Vec<Region> = Vec::new();
    for (prefix, subtree) in &regions {
        // Every branch above a region holds the region's entries too: above a region of more
        // entries than a merge takes, none is sparse, and the walk down to it is skipped.
        if subtree.holds_more_than(MERGE_MAX_ENTRIES)
            || merged.iter().any(|(q, _)| q.covers(prefix))
        {
            continue;
        }
        // Ancestors from the root down: the shallowest sparse one that fits wins.
        for (q, node) in dir.sparse_branches_above(prefix, MERGE_MAX_ENTRIES) {
            let mut refs = Vec::new();
            node.pages_under(q, &mut refs);
            let pages = load(&refs)?;
            let items: Vec<(KeyPath, ValueRef<'_>)> =
                pages.iter().flat_map(|p| p.items()).collect();
            if fits(&items) {
                merged.push((q, subtree_of(base.arena(), hasher, Layout::Page(q, items), stamp)?));
                break;
            }
        }
    }
    if merged.is_empty() {
        return Ok((dir, regions, 0));
    }
    let merges = merged.len() as u64;
    let mut final_regions: Vec<Region> = regions
        .into_iter()
        .filter(|(p, _)| !merged.iter().any(|(q, _)| q.covers(p)))
        .collect();
    final_regions.extend(merged);
    let (dir, regions) = base
        .replace_placed(final_regions)
        .map_err(|e| Error::corruption("<directory>", 0, e.to_string()))?;
    Ok((dir, regions, merges))
}
