//! The page cache: decoded pages by location, bounded, evicting with the CLOCK algorithm.
//! Page locations are never reused for other content, so entries never go stale.

use crate::state::page::Page;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

const SHARDS: usize = 16;
/// The bytes one cached page is counted as.
const PAGE_COST_BYTES: u64 = 4096 + 512;

struct Slot {
    loc: u64,
    page: Arc<Page>,
    referenced: bool,
}

/// The hash of the index's keys, page locations: chosen by the engine, never by a user, so a
/// folded multiply is enough (the default SipHash was a visible share of a commit's CPU).
#[derive(Default)]
struct LocHasher(u64);

impl Hasher for LocHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = mix(self.0 ^ v);
    }
}

/// A page location spread over 64 bits (a folded multiply): picks the shard and hashes the
/// shard's index.
fn mix(loc: u64) -> u64 {
    let product = u128::from(loc) * 0x9e37_79b9_7f4a_7c15;
    (product as u64) ^ ((product >> 64) as u64)
}

#[derive(Default)]
struct Shard {
    slots: Vec<Slot>,
    index: HashMap<u64, usize, BuildHasherDefault<LocHasher>>,
    hand: usize,
}

/// A bounded cache of decoded pages.
pub struct PageCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

impl PageCache {
    /// A cache of about `bytes` bytes (0: no cache).
    pub fn new(bytes: u64) -> PageCache {
        let pages = usize::try_from(bytes / PAGE_COST_BYTES).unwrap_or(usize::MAX);
        PageCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: pages / SHARDS,
        }
    }

    fn shard(&self, loc: u64) -> Option<&Mutex<Shard>> {
        if self.per_shard == 0 {
            return None;
        }
        self.shards.get((mix(loc) >> 32) as usize % SHARDS)
    }

    /// The page at `loc`, if cached.
    pub fn get(&self, loc: u64) -> Option<Arc<Page>> {
        let mut shard = self.shard(loc)?.lock();
        let i = *shard.index.get(&loc)?;
        let slot = shard.slots.get_mut(i)?;
        slot.referenced = true;
        Some(slot.page.clone())
    }

    /// Whether the page at `loc` is cached (without marking it used).
    pub fn contains(&self, loc: u64) -> bool {
        self.shard(loc)
            .is_some_and(|shard| shard.lock().index.contains_key(&loc))
    }

    /// Cache the page at `loc`. Returns the page it evicted, for the caller to drop where it
    /// costs least: the last reference to a page frees its buffer, long allocated, whose
    /// allocator neighbours are cold in the CPU's cache.
    #[must_use = "the evicted page is dropped where the caller chooses"]
    pub fn insert(&self, loc: u64, page: Arc<Page>) -> Option<Arc<Page>> {
        let shard = self.shard(loc)?;
        let mut shard = shard.lock();
        if shard.index.contains_key(&loc) {
            return None;
        }
        if shard.slots.len() < self.per_shard {
            let i = shard.slots.len();
            shard.slots.push(Slot {
                loc,
                page,
                referenced: false,
            });
            shard.index.insert(loc, i);
            return None;
        }
        // CLOCK: sweep, clearing reference bits, until an unreferenced slot is found.
        let n = shard.slots.len();
        loop {
            let hand = shard.hand % n;
            shard.hand = hand + 1;
            let slot = shard.slots.get_mut(hand)?;
            if slot.referenced {
                slot.referenced = false;
                continue;
            }
            let old = std::mem::replace(
                slot,
                Slot {
                    loc,
                    page,
                    referenced: false,
                },
            );
            shard.index.remove(&old.loc);
            shard.index.insert(loc, hand);
            return Some(old.page);
        }
    }

    /// Take the page at `loc` out of the cache, if cached: a commit superseded it, so only old
    /// versions can still read it, and keeping it would push live pages out. Returns it, for
    /// the caller to drop where it costs least (as [`PageCache::insert`]).
    #[must_use = "the page is dropped where the caller chooses"]
    pub fn forget(&self, loc: u64) -> Option<Arc<Page>> {
        let mut shard = self.shard(loc)?.lock();
        let i = shard.index.remove(&loc)?;
        let removed = shard.slots.swap_remove(i);
        if let Some(moved) = shard.slots.get(i).map(|s| s.loc) {
            shard.index.insert(moved, i);
        }
        Some(removed.page)
    }

    /// The number of cached pages.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().slots.len()).sum()
    }

    /// Whether no page is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::prefix::Prefix;

    fn page(seq: u64) -> Arc<Page> {
        Arc::new(Page::build(sprig_core::Hasher::Blake3, Prefix::root(), seq, &[]).unwrap())
    }

    #[test]
    fn bounded_and_returns_what_it_holds() {
        let c = PageCache::new(PAGE_COST_BYTES * 64);
        let mut evicted = Vec::new();
        for i in 0..1000u64 {
            evicted.extend(c.insert(i, page(i)));
            assert_eq!(c.get(i).map(|p| p.seq()), Some(i));
            assert!(c.insert(i, page(i)).is_none(), "a page cached already is not replaced");
        }
        assert!(c.len() <= 64);
        // Every page inserted is either held or handed back evicted, once.
        let mut seen: Vec<u64> = evicted.iter().map(|p| p.seq()).collect();
        seen.extend((0..1000u64).filter(|i| c.get(*i).is_some()));
        seen.sort_unstable();
        assert_eq!(seen, (0..1000u64).collect::<Vec<_>>());
        // Forgetting keeps the index consistent with the slots it moves, and hands the page
        // back once.
        let held: Vec<u64> = (0..1000u64).filter(|i| c.get(*i).is_some()).collect();
        for i in held.iter().step_by(2) {
            assert_eq!(c.forget(*i).map(|p| p.seq()), Some(*i));
            assert!(c.forget(*i).is_none());
        }
        for (n, i) in held.iter().enumerate() {
            assert_eq!(c.get(*i).map(|p| p.seq()), (n % 2 == 1).then_some(*i));
        }
        let off = PageCache::new(0);
        assert!(off.insert(1, page(1)).is_none());
        assert!(off.get(1).is_none());
        assert_eq!(off.len(), 0);
    }
}
