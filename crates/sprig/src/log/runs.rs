//! Many scattered pages of the segments read at once, in runs: pages a few blocks apart in one
//! read each (the blocks between are read and skipped), in groups of bounded size, each page
//! decoded as its run's read completes. The cleaner's reads (`write::cleaner`) and
//! their read-ahead (`log::read_ahead`) go this way.

use crate::error::{Error, Result};
use crate::io::BLOCK_BYTES;
use crate::log::segments::{loc_block, loc_offset, loc_segment, segment_file_name, Segments};
use crate::state::page::{Page, PageError};

/// Pages of one segment with at most this many blocks between them are read in one run (the
/// blocks between are read and skipped): on an SSD, a read of a few blocks more costs about
/// what a read of one does, and a victim's live pages lie close together.
const RUN_MAX_SKIPPED_BLOCKS: u32 = 3;
/// The longest run read at once, in blocks.
const RUN_MAX_BLOCKS: u32 = 16;

/// One read: `blocks` blocks from `start`, holding the pages at
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

/// The most blocks of runs in flight at once (2 MiB of read buffers): deep
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

/// Read and decode the pages at `locs` (sorted) in runs: live pages a few blocks apart in one
/// read each (the blocks between are read and skipped), each page decoded as its run's read
/// completes, its checksum kept (for the check against the directory and for the write that
/// moves it); at most [`CLEAN_READ_BLOCKS`] of runs in flight at once, so the read buffers
/// stay small beside the pages decoded. Each page's block is decoded by `decode` (which keeps
/// its checksum: [`Page::decode_summed`] or [`Page::decode_summed_into`]); `counted` is told
/// each group's reads and blocks as it completes. A page that does not decode is an error in
/// its place; a failed read fails all.
pub(crate) fn read_pages(
    segments: &Segments,
    locs: &[u64],
    decode: &mut dyn FnMut(&[u8; BLOCK_BYTES]) -> std::result::Result<Page, PageError>,
    counted: &mut dyn FnMut(u64, u64),
) -> Result<Vec<Result<Page>>> {
    let runs = runs_of(locs);
    let mut decoded: Vec<Option<Result<Page>>> = (0..locs.len()).map(|_| None).collect();
    for group in read_groups(&runs) {
        let (group_runs, extents): (&[Run], Vec<(u64, u32)>) = match runs.get(group) {
            Some(g) => (g, g.iter().map(|r| (r.start, r.blocks)).collect()),
            None => return Err(Error::internal("a read group beyond its runs")),
        };
        let blocks = segments.read_spans_each(&extents, &mut |i, buf| {
            let Some(run) = group_runs.get(i) else {
                return;
            };
            for j in run.misses.clone() {
                let (Some(l), Some(slot)) = (locs.get(j), decoded.get_mut(j)) else {
                    continue;
                };
                let at = (loc_block(*l) - loc_block(run.start)) as usize * BLOCK_BYTES;
                let block = buf.as_bytes().get(at..).and_then(|b| b.first_chunk());
                *slot = Some(match block {
                    Some(block) => decode(block).map_err(|e| {
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
        counted(
            extents.len() as u64,
            extents.iter().map(|(_, n)| u64::from(*n)).sum(),
        );
        segments.recycle(blocks);
    }
    decoded
        .into_iter()
        .map(|page| page.ok_or_else(|| Error::internal("a page read was never handed over")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
