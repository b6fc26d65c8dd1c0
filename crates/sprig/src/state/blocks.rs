//! Page blocks: the 4 KiB heap blocks that in-memory pages hold, recycled.
//!
//! A commit builds (or patches) a page for every region it touches. The versions it replaces
//! free as many pages a little later, on the reclaim thread. Through the allocator, each such
//! block costs about a microsecond on each side at transfer's 17,000 pages a batch: upkeep of
//! the allocator's large-chunk bins, frees into another thread's arena, and page faults on
//! memory the allocator had handed back to the system. A dropped [`PageBlock`] is kept here
//! instead, up to a bound, and the next page takes it.
//!
//! The bound is process-wide, as the allocator is. Each database raises it to a sixteenth of
//! its page cache budget when it opens ([`allow`]), never beyond [`MAX_SPARE_BLOCKS`]: 1 MiB for
//! a 16 MiB cache, whose peak RSS at utxo 10M has a 100 MiB target, 32 MiB for transfer's
//! 512 MiB (about half of a batch's 17,000 pages). Kept blocks are memory the process holds
//! between commits, as the allocator's free lists would.

use crate::io::spares::Spares;
use crate::io::BLOCK_BYTES;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};

/// The most blocks kept (64 MiB), whatever the cache budgets.
pub const MAX_SPARE_BLOCKS: usize = 16_384;

/// A kept block.
type Spare = Box<[u8; BLOCK_BYTES]>;

/// Blocks given back, for the next pages (none until a database opens).
static SPARE: Spares<Spare> = Spares::new(0);

/// Let the process keep up to a sixteenth of `cache_bytes` in spare blocks (a database's page
/// cache budget), and never more than [`MAX_SPARE_BLOCKS`]. The bound only grows.
pub fn allow(cache_bytes: u64) {
    SPARE.raise_limit(spare_blocks_for(cache_bytes));
}

/// The spare blocks a page cache budget of `cache_bytes` allows: a sixteenth of it, at most
/// [`MAX_SPARE_BLOCKS`].
fn spare_blocks_for(cache_bytes: u64) -> usize {
    let blocks = usize::try_from(cache_bytes / 16 / BLOCK_BYTES as u64).unwrap_or(usize::MAX);
    blocks.min(MAX_SPARE_BLOCKS)
}

/// One page's 4 KiB block, given back for reuse when dropped.
pub struct PageBlock(ManuallyDrop<Spare>);

/// Memory for one page block, allocated (not written) by the thread that reserved it: a thread
/// that decodes pages which live on after it (the cleaner's read-ahead) fills blocks its
/// caller reserved ([`PageBlock::reserve`], [`PageBlock::fill`]), so that long-lived pages sit
/// in the caller's allocator arena instead of a short-lived thread's (glibc gives each thread
/// an arena of its own; pages of one kept in the cache leave it fragmented: ~60 MiB of peak
/// RSS at transfer 2^24).
pub struct BlankBlock(Box<MaybeUninit<[u8; BLOCK_BYTES]>>);

impl PageBlock {
    /// A block of zeros.
    pub fn zeroed() -> PageBlock {
        PageBlock::zeroed_from(&SPARE)
    }

    /// A block holding a copy of `bytes`.
    pub fn copy_of(bytes: &[u8; BLOCK_BYTES]) -> PageBlock {
        PageBlock::copy_from(&SPARE, bytes)
    }

    /// `n` blocks' memory, allocated on the calling thread and not written (not taken from
    /// the kept blocks, which the calling thread's own pages take next).
    pub fn reserve(n: usize) -> Vec<BlankBlock> {
        (0..n).map(|_| BlankBlock(Box::new_uninit())).collect()
    }

    /// A block holding a copy of `bytes`, in reserved memory.
    pub fn fill(blank: BlankBlock, bytes: &[u8; BLOCK_BYTES]) -> PageBlock {
        PageBlock(ManuallyDrop::new(Box::write(blank.0, *bytes)))
    }

    /// [`PageBlock::zeroed`], taking a kept block from `spares` if there is one.
    fn zeroed_from(spares: &Spares<Spare>) -> PageBlock {
        match spares.take() {
            Some(mut block) => {
                block.fill(0);
                PageBlock(ManuallyDrop::new(block))
            }
            None => PageBlock(ManuallyDrop::new(Box::new([0u8; BLOCK_BYTES]))),
        }
    }

    /// [`PageBlock::copy_of`], taking a kept block from `spares` if there is one.
    fn copy_from(spares: &Spares<Spare>, bytes: &[u8; BLOCK_BYTES]) -> PageBlock {
        match spares.take() {
            Some(mut block) => {
                block.copy_from_slice(bytes);
                PageBlock(ManuallyDrop::new(block))
            }
            // Copied once, without zeroing the new allocation first.
            None => PageBlock(ManuallyDrop::new(Box::new(*bytes))),
        }
    }
}

impl Drop for PageBlock {
    fn drop(&mut self) {
        // SAFETY: `self.0` is never used again: this is the block's last use.
        let block = unsafe { ManuallyDrop::take(&mut self.0) };
        SPARE.keep([block]);
    }
}

impl Clone for PageBlock {
    fn clone(&self) -> PageBlock {
        PageBlock::copy_of(self)
    }
}

impl Deref for PageBlock {
    type Target = [u8; BLOCK_BYTES];

    fn deref(&self) -> &[u8; BLOCK_BYTES] {
        &self.0
    }
}

impl DerefMut for PageBlock {
    fn deref_mut(&mut self) -> &mut [u8; BLOCK_BYTES] {
        &mut self.0
    }
}

impl PartialEq for PageBlock {
    fn eq(&self, other: &PageBlock) -> bool {
        self[..] == other[..]
    }
}

impl Eq for PageBlock {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept block is taken again (the same allocation) and holds none of its old bytes:
    /// cleared for a zeroed block, overwritten for a copy. A pool of the test's own, so that
    /// other tests' pages (which share the process-wide one) cannot take the block first.
    #[test]
    fn a_reused_block_is_cleared_or_overwritten() {
        let spares: Spares<Spare> = Spares::new(1);
        let dirty: Spare = Box::new([0xab; BLOCK_BYTES]);
        let at = dirty.as_ptr();
        spares.keep([dirty]);
        let z = PageBlock::zeroed_from(&spares);
        assert_eq!(z.as_ptr(), at, "the kept block was not taken");
        assert!(z.iter().all(|b| *b == 0), "a zeroed block holds old bytes");

        let dirty: Spare = Box::new([0xcd; BLOCK_BYTES]);
        let at = dirty.as_ptr();
        spares.keep([dirty]);
        let c = PageBlock::copy_from(&spares, &[7; BLOCK_BYTES]);
        assert_eq!(c.as_ptr(), at, "the kept block was not taken");
        assert!(c.iter().all(|b| *b == 7), "a copy holds old bytes");
        let d = c.clone();
        assert!(d == c, "a clone differs from its block");
        // Reserved memory holds exactly the bytes it is filled with.
        let mut blanks = PageBlock::reserve(2);
        assert_eq!(blanks.len(), 2);
        let f = PageBlock::fill(blanks.pop().unwrap(), &[9; BLOCK_BYTES]);
        assert!(f.iter().all(|b| *b == 9), "a filled block differs from its bytes");
        // Nothing kept: new blocks, as asked.
        assert!(PageBlock::zeroed_from(&spares).iter().all(|b| *b == 0));
        assert!(PageBlock::copy_from(&spares, &[3; BLOCK_BYTES]).iter().all(|b| *b == 3));
    }

    /// A database's cache budget allows exactly a sixteenth of it in spare blocks, capped; and
    /// the process-wide bound takes it (it only grows, so other tests may have raised it).
    #[test]
    fn a_database_allows_a_sixteenth_of_its_cache_up_to_the_most() {
        assert_eq!(spare_blocks_for(16 << 20), 256);
        assert_eq!(spare_blocks_for(64 << 20), 1024);
        assert_eq!(spare_blocks_for(0), 0);
        assert_eq!(spare_blocks_for(1 << 40), MAX_SPARE_BLOCKS);
        allow(64 << 20);
        assert!(SPARE.limit() >= 1024, "a 64 MiB cache allows 4 MiB of blocks");
        allow(1 << 40);
        assert_eq!(SPARE.limit(), MAX_SPARE_BLOCKS);
    }
}
