//! The cleaner: keeps disk use within the configured multiple of the live data by copying the
//! live pages and values of the emptiest segments forward, so those segments can be deleted.
//!
//! Cleaning rides along with a commit: the relocated pages become extra regions of the same
//! commit record (their nodes, and so the root, are unchanged), and relocated value records
//! are patched into the pages that point at them as those pages are written. The work per
//! commit is bounded, so cleaning never stalls a commit for long.

use crate::error::{Error, Result};
use crate::log::record::for_each_replaced_disk_page;
use crate::log::writer::Writer;
use crate::io::BLOCK_BYTES;
use crate::log::segments::{
    check_page_checksum, loc_block, loc_offset, loc_segment, segment_file_name, SegmentTable,
};
use crate::state::directory::{MemoryPage, PageLoc, PageRef, Shape, Subtree};
use crate::state::tables::{TableId, TableRegions, Tables};
use crate::state::page::{Page, ValueRef};
use crate::write::engine::Inner;
use crate::state::prefix::Prefix;
use crate::stats::ReadKind;
use crate::state::FastSet;
use crate::write::cores::map_shares_on_cores;
use sprig_core::trie::KeyPath;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The most segments cleaned by one commit.
const MAX_VICTIMS_PER_COMMIT: usize = 4;
/// The most live blocks copied by one commit (unless a single victim holds more).
const MAX_BLOCKS_PER_COMMIT: u64 = 32 * 1024;
/// An automatic clean moves at most this many live pages per block the commit itself writes
/// (and at least [`MIN_PAGES_PER_COMMIT`]): draining the emptiest segments keeps pace with
/// the garbage a commit makes while they are up to 80 % live, and a victim's pages spread over
/// the next commits instead of stalling one (a victim is drained in steps: it stays the
/// emptiest segment, so the next commit takes it again).
const PAGES_PER_INCOMING_BLOCK: u64 = 4;
/// The fewest regions whose superseded pages are found on every core; for fewer, the cores'
/// hand-over costs more than the walk.
const PARALLEL_SUPERSEDED_MIN: usize = 1024;
/// The fewest live pages an automatic clean may move with one commit.
const MIN_PAGES_PER_COMMIT: u64 = 256;
/// An explicit clean takes segments at most this full.
const EXPLICIT_CLEAN_MAX_LIVE_RATIO: f64 = 0.5;

/// Pages of one segment with at most this many blocks between them are read in one run (the
/// blocks between are read and skipped): on an SSD, a read of a few blocks more costs about
/// what a read of one does, and a victim's live pages lie close together.
const RUN_MAX_SKIPPED_BLOCKS: u32 = 3;
/// The longest run read at once, in blocks.
const RUN_MAX_BLOCKS: u32 = 16;

/// One read of the cleaner's: `blocks` blocks from `start`, holding the pages at
/// `misses[self.misses]`.
struct Run {
    start: u64,
    blocks: u32,
    misses: std::ops::Range<usize>,
}

/// The runs to read `locs` (sorted) in: consecutive locations of one segment with at most
/// [`RUN_MAX_SKIPPED_BLOCKS`] blocks between share a run of at most [`RUN_MAX_BLOCKS`] blocks.
fn runs_of(locs: &[u64]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, l) in locs.iter().enumerate() {
        if let Some(run) = runs.last_mut() {
            let start = u64::from(loc_block(run.start));
            let (end, block) = (start + u64::from(run.blocks), u64::from(loc_block(*l)));
            let joins = loc_segment(*l) == loc_segment(run.start)
                && block >= end
                && block - end <= u64::from(RUN_MAX_SKIPPED_BLOCKS)
                && block - start < u64::from(RUN_MAX_BLOCKS);
            if joins {
                // Below RUN_MAX_BLOCKS, so it fits.
                run.blocks = u32::try_from(block - start + 1).unwrap_or(RUN_MAX_BLOCKS);
                run.misses.end = i + 1;
                continue;
            }
        }
        runs.push(Run {
            start: *l,
            blocks: 1,
            misses: i..i + 1,
        });
    }
    runs
}

/// The most blocks of runs the cleaner has in flight at once (2 MiB of read buffers): deep
/// enough a queue for the device (32 runs of the longest length, more of shorter ones), small
/// beside a commit's pages. Reading a whole clean's runs at once held them all: 12.5 MB of
/// buffers at once at utxo 10M with a 16 MiB page cache, the largest part of its peak RSS.
const CLEAN_READ_BLOCKS: u32 = 512;

/// `runs` split into consecutive groups of at most [`CLEAN_READ_BLOCKS`] blocks (a run is
/// never longer), each read at once.
fn read_groups(runs: &[Run]) -> Vec<std::ops::Range<usize>> {
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let mut blocks = 0u32;
    for (i, run) in runs.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if blocks + run.blocks <= CLEAN_READ_BLOCKS => {
                g.end = i + 1;
                blocks += run.blocks;
            }
            _ => {
                groups.push(i..i + 1);
                blocks = run.blocks;
            }
        }
    }
    groups
}

/// Live data of the victim segments to copy forward with a commit.
#[derive(Default)]
pub(crate) struct Relocation {
    /// Pages to rewrite (in memory, unchanged content), by table and region.
    pub regions: TableRegions,
    /// Value records to rewrite: old location → (table, key, value bytes).
    pub values: BTreeMap<u64, (TableId, KeyPath, Vec<u8>)>,
}

/// How cleaning is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CleanMode {
    /// After a commit, only if disk use is above the limit.
    Auto,
    /// On request: every sealed segment at most half live, within the per-commit bound.
    Explicit,
}

/// Choose victim segments: the emptiest sealed segments that still hold live data, enough
/// that disk use stays within `max_amp` times the live data once `incoming` blocks are
/// written (and the blocks they replace become garbage); beyond the first, no more than
/// `limit` live blocks in all.
///
/// Segments up to `pinned` (read by an incremental union in progress or a named snapshot) are never victims:
/// they cannot be deleted before the union ends, so copying their live data would only add.
fn choose_victims(
    table: &SegmentTable,
    max_amp: f64,
    incoming: u64,
    mode: CleanMode,
    pinned: Option<u32>,
    limit: u64,
) -> Vec<u32> {
    // Segments without live data are about to be deleted: they do not count as used.
    let used: u64 = table
        .segments
        .iter()
        .filter(|(id, m)| **id == table.active || m.live_blocks() > 0)
        .map(|(_, m)| u64::from(m.used_blocks))
        .sum();
    let used = (used + incoming) as f64;
    let live = table.live_blocks() as f64;
    if mode == CleanMode::Auto && used <= max_amp * live {
        return Vec::new();
    }
    let mut candidates: Vec<(u32, u64, u32)> = table
        .segments
        .iter()
        .filter(|(id, m)| **id != table.active && m.live_blocks() > 0 && m.used_blocks > 0)
        .filter(|(id, _)| pinned.is_none_or(|p| **id > p))
        .map(|(id, m)| (*id, m.live_blocks(), m.used_blocks))
        .collect();
    candidates.sort_by_key(|(id, live, _)| (*live, *id));
    let mut victims = Vec::new();
    let mut moved = 0u64;
    let mut remaining_used = used;
    for (id, seg_live, seg_used) in candidates {
        if victims.len() >= MAX_VICTIMS_PER_COMMIT {
            break;
        }
        let ratio = seg_live as f64 / f64::from(seg_used.max(1));
        let wanted = match mode {
            CleanMode::Auto => remaining_used > max_amp * live && ratio < 1.0,
            CleanMode::Explicit => ratio <= EXPLICIT_CLEAN_MAX_LIVE_RATIO,
        };
        if !wanted || (!victims.is_empty() && moved + seg_live > limit) {
            break;
        }
        victims.push(id);
        moved += seg_live;
        remaining_used -= f64::from(seg_used) - seg_live as f64;
    }
    victims
}

impl Inner {
    /// Whether an explicit clean would find a segment to clean.
    pub(crate) fn has_cleaning_work(&self) -> bool {
        let w = self.log.writer.lock();
        !choose_victims(
            &w.table,
            self.options.max_space_amplification,
            0,
            CleanMode::Explicit,
            w.pinned_segments(&self.head().tables),
            MAX_BLOCKS_PER_COMMIT,
        )
        .is_empty()
    }

    /// Plan the relocation of the live data of victim segments, skipping what the commit
    /// already rewrites (`regions`) or frees (`freed`).
    pub(crate) fn plan_relocation(
        &self,
        w: &Writer,
        head: &Tables,
        regions: &TableRegions,
        freed: &BTreeSet<u64>,
        incoming: u64,
        mode: CleanMode,
    ) -> Result<Relocation> {
        let table = &w.table;
        // What one commit moves at most: victims are chosen up to it, and their live pages
        // and values taken up to it (a victim left with live data is taken up again by the
        // next commit: it stays the emptiest).
        let budget = match mode {
            CleanMode::Auto => incoming
                .saturating_mul(PAGES_PER_INCOMING_BLOCK)
                .max(MIN_PAGES_PER_COMMIT),
            CleanMode::Explicit => u64::MAX,
        };
        let victims = choose_victims(
            table,
            self.options.max_space_amplification,
            incoming,
            mode,
            w.pinned_segments(head),
            budget.min(MAX_BLOCKS_PER_COMMIT),
        );
        if victims.is_empty() {
            return Ok(Relocation::default());
        }
        // Whether the commit itself rewrites the region: regions are disjoint, so the only one
        // that can cover a position is the last one starting at or before it.
        let mut starts: BTreeMap<TableId, Vec<Prefix>> = BTreeMap::new();
        for (id, rs) in regions {
            let mut s: Vec<Prefix> = rs.iter().map(|(p, _)| *p).collect();
            s.sort_by(|a, b| a.bits().cmp(b.bits()).then(a.depth().cmp(&b.depth())));
            starts.insert(*id, s);
        }
        let covered = |id: TableId, p: &Prefix| {
            starts.get(&id).is_some_and(|starts| {
                let i = starts.partition_point(|r| r.bits() <= p.bits());
                i > 0 && starts.get(i - 1).is_some_and(|r| r.covers(p))
            })
        };

        // The pages this commit supersedes (the old pages of the regions it rewrites): live
        // now, garbage once it is durable, so never worth moving. Found on every core for a
        // large commit (a descent of the directory to each region: ~36 ms of the calling
        // thread a transfer batch at 2^24).
        let mut superseded: FastSet<u64> = FastSet::default();
        for (id, rs) in regions {
            if let Some(dir) = head.dir(*id) {
                let prefixes: Vec<Prefix> = rs.iter().map(|(p, _)| *p).collect();
                let found = map_shares_on_cores(&prefixes, PARALLEL_SUPERSEDED_MIN, |share| {
                    let mut locs = Vec::new();
                    for_each_replaced_disk_page(dir, share, &mut |l| locs.push(l));
                    locs
                });
                superseded.reserve(found.iter().map(Vec::len).sum());
                superseded.extend(found.into_iter().flatten());
            }
        }
        // Pages to rewrite: the other live pages of the victims (from the segment table's
        // index, no walk of the directory), from the page cache or the SSD, checked against
        // the directory...
        let mut wanted: BTreeMap<(TableId, Prefix), (PageRef, Arc<Page>)> = BTreeMap::new();
        let mut pages: Vec<(u64, Arc<Page>)> = Vec::new();
        let mut misses: Vec<u64> = Vec::new();
        let budget_items = usize::try_from(budget).unwrap_or(usize::MAX);
        for l in victims
            .iter()
            .flat_map(|v| table.live_page_locs(*v))
            .filter(|l| !superseded.contains(l))
            .take(budget_items)
        {
            match self.cache.get(l) {
                Some(page) => pages.push((l, page)),
                None => misses.push(l),
            }
        }
        let taken = pages.len() + misses.len();
        // Read in runs: live pages a few blocks apart in one read each (the blocks between are
        // read and skipped), each page decoded as its run's read completes; at most
        // `CLEAN_READ_BLOCKS` of runs in flight at once, so the read buffers a clean holds stay
        // small beside the pages it decodes.
        misses.sort_unstable();
        let runs = runs_of(&misses);
        let mut decoded: Vec<Option<Result<Page>>> = (0..misses.len()).map(|_| None).collect();
        for group in read_groups(&runs) {
            let (group_runs, extents): (&[Run], Vec<(u64, u32)>) = match runs.get(group) {
                Some(g) => (g, g.iter().map(|r| (r.start, r.blocks)).collect()),
                None => return Err(Error::internal("a read group beyond the cleaner's runs")),
            };
            let blocks = self.log.segments.read_spans_each(&extents, &mut |i, buf| {
                let Some(run) = group_runs.get(i) else {
                    return;
                };
                for j in run.misses.clone() {
                    let (Some(l), Some(slot)) = (misses.get(j), decoded.get_mut(j)) else {
                        continue;
                    };
                    let at = (loc_block(*l) - loc_block(run.start)) as usize * BLOCK_BYTES;
                    *slot = Some(match buf.as_bytes().get(at..at + BLOCK_BYTES) {
                        // Its checksum kept, for the check against the directory below and
                        // for the write that moves it.
                        Some(block) => Page::decode_summed(block).map_err(|e| {
                            Error::corruption(
                                segment_file_name(loc_segment(*l)),
                                loc_offset(*l),
                                e.to_string(),
                            )
                        }),
                        None => Err(Error::internal("a page outside the run read for it")),
                    });
                }
            })?;
            self.counters.block_reads(
                ReadKind::Maintenance,
                extents.len() as u64,
                extents.iter().map(|(_, n)| u64::from(*n)).sum(),
            );
            self.log.segments.recycle(blocks);
        }
        for (l, page) in misses.iter().zip(decoded) {
            let page = page.ok_or_else(|| Error::internal("a page read was never handed over"))??;
            pages.push((*l, Arc::new(page)));
        }
        // The table whose directory holds each page where it is (locations are unique, so at
        // most one does): every table's nodes at the pages' regions, found in one descent.
        let prefixes: Vec<Prefix> = pages.iter().map(|(_, page)| *page.prefix()).collect();
        let mut owners: Vec<Option<(TableId, PageRef)>> = vec![None; pages.len()];
        for (id, dir) in head.dirs() {
            for ((owner, node), (l, _)) in owners
                .iter_mut()
                .zip(dir.nodes_at(&prefixes))
                .zip(&pages)
            {
                if let Some(Shape::Page(r)) = node.map(|n| n.shape()) {
                    if matches!(r.loc, PageLoc::Disk(x) if x == *l) {
                        *owner = Some((id, r));
                    }
                }
            }
        }
        for ((l, page), owner) in pages.into_iter().zip(owners) {
            let name = || segment_file_name(loc_segment(l));
            let prefix = *page.prefix();
            let (id, r) = match owner {
                Some(found) => found,
                None => {
                    return Err(Error::corruption(
                        name(),
                        loc_offset(l),
                        format!(
                            "the segment table counts a live page here, but the directory \
                             holds no page of region {prefix} at this location"
                        ),
                    ))
                }
            };
            check_page_checksum(page.checksum(), l, r.checksum)?;
            if !covered(id, &prefix) {
                wanted.insert((id, prefix), (r, page));
            }
        }
        // ...and the pages pointing at live values of the victims, as many values as the
        // pages left of the budget (each value is one read, its page at most one more).
        let values: Vec<(u64, TableId, KeyPath)> = victims
            .iter()
            .flat_map(|v| table.live_values_in(*v))
            .filter(|(l, _, _)| !freed.contains(l))
            .take(budget_items.saturating_sub(taken))
            .collect();
        let mut extra: BTreeMap<(TableId, Prefix), PageRef> = BTreeMap::new();
        for (_, id, key) in &values {
            let Some(dir) = head.dir(*id) else {
                continue;
            };
            if let (prefix, Some(r)) = dir.locate(key) {
                if !covered(*id, &prefix) && !wanted.contains_key(&(*id, prefix)) {
                    extra.insert((*id, prefix), r);
                }
            }
        }
        let extra: Vec<((TableId, Prefix), PageRef)> = extra.into_iter().collect();
        let refs: Vec<(Prefix, PageRef)> = extra.iter().map(|((_, p), r)| (*p, r.clone())).collect();
        let pages = self.load_pages(&refs, ReadKind::Maintenance)?;
        for ((key, r), page) in extra.into_iter().zip(pages) {
            wanted.insert(key, (r, page));
        }
        let mut relocation = Relocation::default();
        let mut by_region: BTreeMap<(TableId, Prefix), Arc<Page>> = BTreeMap::new();
        for ((id, prefix), (r, page)) in wanted {
            let moved = PageRef {
                loc: PageLoc::Memory(MemoryPage::new(page.clone())),
                checksum: 0,
                node: r.node,
                count: r.count,
            };
            relocation
                .regions
                .entry(id)
                .or_default()
                .push((prefix, Subtree::page(head.arena(), &moved)));
            by_region.insert((id, prefix), page);
        }

        // The bytes of every value to move, checked against the pointer in its page.
        for (l, id, key) in values {
            let Some(dir) = head.dir(id) else {
                continue;
            };
            let (prefix, r) = dir.locate(&key);
            let page = match by_region.get(&(id, prefix)) {
                Some(p) => p.clone(),
                None => {
                    // The page is rewritten by the commit itself: read the pointer from the
                    // committed version.
                    let Some(r) = r else {
                        continue;
                    };
                    match self
                        .load_pages(&[(prefix, r)], ReadKind::Maintenance)?
                        .pop()
                    {
                        Some(p) => p,
                        None => continue,
                    }
                }
            };
            if let Some(ValueRef::External(x)) = page.get(&key) {
                if x.loc == l {
                    let bytes = self.log.segments.read_value(&key, &x)?;
                    self.counters.value_read(x.len);
                    relocation.values.insert(l, (id, key, bytes));
                }
            }
        }
        // Failpoint (feature `failpoints`): relocation read and planned, nothing written.
        failpoint!("cleaner.planned");
        Ok(relocation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::segments::SegmentMeta;

    fn table(segments: &[(u32, u32, u64)], active: u32) -> SegmentTable {
        let mut t = SegmentTable::new(100);
        t.segments.clear();
        for (id, used, live) in segments {
            t.segments.insert(
                *id,
                SegmentMeta {
                    used_blocks: *used,
                    live_page_blocks: *live,
                    live_value_blocks: 0,
                },
            );
        }
        t.active = active;
        t
    }

    /// Live pages close together in one segment are read in one run; a page too far from the
    /// run's end, in another segment, or past the longest run starts a new one.
    #[test]
    fn close_pages_of_a_segment_are_read_in_runs() {
        use crate::log::segments::loc;
        let locs = [
            loc(1, 0),
            loc(1, 1),
            loc(1, 5), // 3 blocks skipped: joins
            loc(1, 10), // 4 skipped: a new run
            loc(2, 11), // another segment
            loc(2, 14),
            loc(2, 18),
            loc(2, 22),
            loc(2, 26), // the run 11..=26 is 16 blocks: joins
            loc(2, 27), // 17 blocks: a new run
        ];
        let runs: Vec<(u64, u32, std::ops::Range<usize>)> = runs_of(&locs)
            .into_iter()
            .map(|r| (r.start, r.blocks, r.misses))
            .collect();
        assert_eq!(
            runs,
            vec![
                (loc(1, 0), 6, 0..3),
                (loc(1, 10), 1, 3..4),
                (loc(2, 11), 16, 4..9),
                (loc(2, 27), 1, 9..10),
            ]
        );
        assert!(runs_of(&[]).is_empty());
    }

    /// A clean's runs are read in groups of at most `CLEAN_READ_BLOCKS` blocks, in order,
    /// every run in exactly one group.
    #[test]
    fn runs_are_read_in_groups_of_bounded_blocks() {
        let run = |blocks: u32| Run {
            start: 0,
            blocks,
            misses: 0..1,
        };
        // 100 runs of 16 blocks, then 3 of one: 1,603 blocks.
        let runs: Vec<Run> = (0..100).map(|_| run(16)).chain((0..3).map(|_| run(1))).collect();
        let groups = read_groups(&runs);
        assert_eq!(groups, vec![0..32, 32..64, 64..96, 96..103]);
        for g in &groups {
            let blocks: u32 = runs[g.clone()].iter().map(|r| r.blocks).sum();
            assert!(blocks <= CLEAN_READ_BLOCKS, "{g:?}: {blocks} blocks");
        }
        // A group is never empty; none for no runs.
        assert_eq!(read_groups(&[run(RUN_MAX_BLOCKS)]), vec![0..1]);
        assert!(read_groups(&[]).is_empty());
    }

    #[test]
    fn victims_are_the_emptiest_sealed_segments_and_only_when_needed() {
        // 400 used, 300 live: below 2x, nothing to do automatically.
        let t = table(&[(1, 100, 90), (2, 100, 80), (3, 100, 70), (4, 100, 60)], 4);
        assert!(choose_victims(&t, 2.0, 0, CleanMode::Auto, None, MAX_BLOCKS_PER_COMMIT).is_empty());
        // 400 used, 130 live: above 2x; the emptiest sealed segment first, never the active.
        let t = table(&[(1, 100, 10), (2, 100, 50), (3, 100, 40), (4, 100, 30)], 1);
        assert_eq!(choose_victims(&t, 2.0, 0, CleanMode::Auto, None, MAX_BLOCKS_PER_COMMIT), vec![4, 3, 2]);
        // Segments already empty are about to be deleted: they need no cleaning.
        let t = table(&[(1, 100, 10), (2, 100, 95), (3, 100, 95), (4, 100, 0)], 1);
        assert!(choose_victims(&t, 1.5, 0, CleanMode::Auto, None, MAX_BLOCKS_PER_COMMIT).is_empty());
        // Only as much as needed to get back under the limit.
        let t = table(&[(1, 100, 10), (2, 100, 40), (3, 100, 45), (4, 100, 50)], 1);
        assert_eq!(choose_victims(&t, 2.0, 0, CleanMode::Auto, None, MAX_BLOCKS_PER_COMMIT), vec![2, 3]);
        // Explicit: everything at most half live.
        let t = table(&[(1, 100, 10), (2, 100, 50), (3, 100, 90), (4, 100, 30)], 3);
        assert_eq!(
            choose_victims(&t, 2.0, 0, CleanMode::Explicit, None, MAX_BLOCKS_PER_COMMIT),
            vec![1, 4, 2]
        );
        // Beyond the first victim, no more live blocks than the limit: the commit's budget.
        let t = table(&[(1, 100, 10), (2, 100, 50), (3, 100, 40), (4, 100, 30)], 1);
        assert_eq!(choose_victims(&t, 2.0, 0, CleanMode::Auto, None, 70), vec![4, 3]);
        assert_eq!(choose_victims(&t, 2.0, 0, CleanMode::Auto, None, 10), vec![4]);
    }
}
