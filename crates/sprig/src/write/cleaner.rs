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
use crate::log::runs::read_pages;
use crate::log::segments::{check_page_checksum, loc_offset, loc_segment, segment_file_name, SegmentTable};
use crate::state::directory::{MemoryPage, PageLoc, PageRef, Shape, Subtree};
use crate::state::tables::{TableId, TableRegions, Tables};
use crate::state::page::{Page, ValueRef};
use crate::state::version::Version;
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

/// What one commit of `incoming` blocks moves at most: victims are chosen up to it, and their
/// live pages and values taken up to it (a victim left with live data is taken up again by the
/// next commit: it stays the emptiest).
fn budget(mode: CleanMode, incoming: u64) -> u64 {
    match mode {
        CleanMode::Auto => incoming
            .saturating_mul(PAGES_PER_INCOMING_BLOCK)
            .max(MIN_PAGES_PER_COMMIT),
        CleanMode::Explicit => u64::MAX,
    }
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
    // Segments without live data are about to be deleted: they do not count as used. Nor do
    // the blocks only older retained versions (or readers) keep: the bound leaves them out
    // (`Options::max_space_amplification`), and no copying reclaims them before those
    // versions go. Counted, they had the cleaner hold the rest to about 1.5 times the live
    // data at transfer 2^24 (four retained versions keep ~0.5 of it), copying pages it need
    // not have.
    let used: u64 = table
        .segments
        .iter()
        .filter(|(id, m)| **id == table.active || m.live_blocks() > 0)
        .map(|(id, m)| table.bounded_blocks(*id, m))
        .sum();
    let used = (used + incoming) as f64;
    let live = table.live_blocks() as f64;
    if mode == CleanMode::Auto && used <= max_amp * live {
        return Vec::new();
    }
    // (id, live blocks, blocks written, blocks counted as used).
    let mut candidates: Vec<(u32, u64, u32, u64)> = table
        .segments
        .iter()
        .filter(|(id, m)| **id != table.active && m.live_blocks() > 0 && m.used_blocks > 0)
        .filter(|(id, _)| pinned.is_none_or(|p| **id > p))
        .map(|(id, m)| (*id, m.live_blocks(), m.used_blocks, table.bounded_blocks(*id, m)))
        .collect();
    candidates.sort_by_key(|(id, live, _, _)| (*live, *id));
    let mut victims = Vec::new();
    let mut moved = 0u64;
    let mut remaining_used = used;
    for (id, seg_live, seg_written, seg_used) in candidates {
        if victims.len() >= MAX_VICTIMS_PER_COMMIT {
            break;
        }
        match mode {
            CleanMode::Auto if remaining_used <= max_amp * live => break,
            // A victim whose only garbage older versions keep frees nothing by being copied
            // now (held garbage can leave a segment with few live blocks so).
            CleanMode::Auto if seg_live >= seg_used => continue,
            // An explicit clean also empties segments for when those versions go.
            CleanMode::Explicit
                if seg_live as f64 / f64::from(seg_written) > EXPLICIT_CLEAN_MAX_LIVE_RATIO =>
            {
                break
            }
            _ => {}
        }
        if !victims.is_empty() && moved + seg_live > limit {
            break;
        }
        victims.push(id);
        moved += seg_live;
        remaining_used -= seg_used as f64 - seg_live as f64;
    }
    victims
}

impl Inner {
    /// Whether an explicit clean would find a segment to clean.
    pub(crate) fn has_cleaning_work(&self) -> bool {
        let w = self.log.writer.lock();
        let mode = CleanMode::Explicit;
        !self
            .victims(&w, &self.head().tables, 0, mode, budget(mode, 0))
            .is_empty()
    }

    /// The segments a commit writing `incoming` blocks cleans (see [`choose_victims`]).
    fn victims(
        &self,
        w: &Writer,
        head: &Tables,
        incoming: u64,
        mode: CleanMode,
        budget: u64,
    ) -> Vec<u32> {
        choose_victims(
            &w.table,
            self.options.max_space_amplification,
            incoming,
            mode,
            w.pinned_segments(head),
            budget.min(MAX_BLOCKS_PER_COMMIT),
        )
    }

    /// Start reading ahead (`log::read_ahead`) the pages the cleaning of a commit of
    /// about `incoming` new pages would read, if that commit follows a batch on `base` (the
    /// latest version), cleaning runs automatically, and no commit is under way (the writer's
    /// lock is free). `skip` are locations the batch loads itself (pages its commit
    /// supersedes: never moved).
    pub(crate) fn start_read_ahead(
        &self,
        base: &Version,
        incoming: u64,
        skip: &FastSet<u64>,
    ) -> Result<()> {
        if !self.options.auto_clean {
            return Ok(());
        }
        let Some(w) = self.log.writer.try_lock() else {
            return Ok(());
        };
        let head = self.head();
        if head.id != base.id || w.check_writable().is_err() {
            return Ok(());
        }
        // One at a time: an earlier one nobody took (its batch was never committed) goes.
        drop(self.log.read_ahead.take(&self.counters)?);
        let mut locs = self.pages_to_clean(&w, &head.tables, incoming, skip);
        if locs.is_empty() {
            return Ok(());
        }
        locs.sort_unstable();
        // Started before the writer's lock is let go: a deletion of segments, which takes that
        // lock, finds it and waits for it.
        self.log
            .read_ahead
            .start(Arc::clone(&self.log.segments), locs)
    }

    /// The locations of the pages an automatic clean with a commit of `incoming` blocks would
    /// read from the SSD now, in the order the plan takes them: its victims' live pages, up to
    /// its budget, that the cache does not hold, except those in `skip` (the commit's own
    /// regions, which it supersedes).
    fn pages_to_clean(
        &self,
        w: &Writer,
        head: &Tables,
        incoming: u64,
        skip: &FastSet<u64>,
    ) -> Vec<u64> {
        let budget = budget(CleanMode::Auto, incoming);
        let victims = self.victims(w, head, incoming, CleanMode::Auto, budget);
        let budget_items = usize::try_from(budget).unwrap_or(usize::MAX);
        victims
            .iter()
            .flat_map(|v| w.table.live_page_locs(*v))
            .filter(|l| !skip.contains(l))
            .take(budget_items)
            .filter(|l| !self.cache.contains(*l))
            .collect()
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
        // Pages read ahead while the batch was finished (none without), taken even when
        // nothing is cleaned now: a read-ahead in flight ends before the commit goes on.
        let mut ahead = self.log.read_ahead.take(&self.counters)?;
        let budget = budget(mode, incoming);
        let victims = self.victims(w, head, incoming, mode, budget);
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
        let mut read_ahead = 0u64;
        for l in victims
            .iter()
            .flat_map(|v| table.live_page_locs(*v))
            .filter(|l| !superseded.contains(l))
            .take(budget_items)
        {
            if let Some(page) = ahead.remove(&l) {
                pages.push((l, Arc::new(page?)));
                read_ahead += 1;
                continue;
            }
            match self.cache.get(l) {
                Some(page) => pages.push((l, page)),
                None => misses.push(l),
            }
        }
        // Pages read ahead that the commit does not move (its estimate was off) are dropped.
        drop(ahead);
        self.counters.read_ahead_used(read_ahead);
        let taken = pages.len() + misses.len();
        misses.sort_unstable();
        let decoded = read_pages(
            &self.log.segments,
            &misses,
            &mut |block| Page::decode_summed(block),
            &mut |reads, blocks| {
                self.counters
                    .block_reads(ReadKind::Maintenance, reads, blocks)
            },
        )?;
        for (l, page) in misses.iter().zip(decoded) {
            let page = page?;
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

    /// Blocks only older retained versions keep are left out of the bound, as
    /// `Options::max_space_amplification` says: they neither call for cleaning nor make a
    /// segment worth copying, since copying cannot reclaim them before those versions go.
    #[test]
    fn blocks_older_versions_keep_are_not_cleaned_for() {
        use crate::log::segments::loc;
        // 400 used, 150 live: 2.67x counting everything; but 165 of the 250 garbage blocks
        // are held by older versions, so 235 used against 2x150: nothing to do.
        let mut t = table(&[(1, 100, 35), (2, 100, 40), (3, 100, 40), (4, 100, 35)], 1);
        for (id, held) in [(2, 50), (3, 50), (4, 65)] {
            t.held.hold(7, loc(id, 0), held);
        }
        assert!(choose_victims(&t, 2.0, 0, CleanMode::Auto, None, MAX_BLOCKS_PER_COMMIT).is_empty());
        // Over the bound without them (1.57x here, 1.5 the limit): segment 4, the emptiest,
        // is passed over (all its garbage held: copying it frees nothing now) for the next
        // emptiest that frees space, and only as many as the bound needs.
        assert_eq!(choose_victims(&t, 1.5, 0, CleanMode::Auto, None, MAX_BLOCKS_PER_COMMIT), vec![2]);
        // Held blocks beyond a segment's garbage (a rollback made some live again) count no
        // more than its garbage.
        let mut t = table(&[(1, 100, 10), (2, 100, 90)], 1);
        t.held.hold(7, loc(2, 0), 50);
        assert_eq!(t.held_in(2, &t.segments[&2]), 10);
    }
}
