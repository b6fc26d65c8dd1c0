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

    /// Cache the page at `loc`.
    pub fn insert(&self, loc: u64, page: Arc<Page>) {
        let Some(shard) = self.shard(loc) else {
            return;
        };
        let mut shard = shard.lock();
        if shard.index.contains_key(&loc) {
            return;
        }
        if shard.slots.len() < self.per_shard {
            let i = shard.slots.len();
            shard.slots.push(Slot {
                loc,
                page,
                referenced: false,
            });
            shard.index.insert(loc, i);
            return;
        }
        // CLOCK: sweep, clearing reference bits, until an unreferenced slot is found.
        let n = shard.slots.len();
        loop {
            let hand = shard.hand % n;
            shard.hand = hand + 1;
            let Some(slot) = shard.slots.get_mut(hand) else {
                return;
            };
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
            // The evicted page is freed after the lock is let go.
            drop(shard);
            drop(old);
            return;
        }
    }

    /// Drop the page at `loc`, if cached: a commit superseded it, so only old versions can
    /// still read it, and keeping it would push live pages out.
    pub fn forget(&self, loc: u64) {
        let Some(shard) = self.shard(loc) else {
            return;
        };
        let mut shard = shard.lock();
        let Some(i) = shard.index.remove(&loc) else {
            return;
        };
        let removed = shard.slots.swap_remove(i);
        if let Some(moved) = shard.slots.get(i).map(|s| s.loc) {
            shard.index.insert(moved, i);
        }
        drop(shard);
        drop(removed);
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
        for i in 0..1000u64 {
            c.insert(i, page(i));
            assert_eq!(c.get(i).map(|p| p.seq()), Some(i));
        }
        assert!(c.len() <= 64);
        // Forgetting keeps the index consistent with the slots it moves.
        let held: Vec<u64> = (0..1000u64).filter(|i| c.get(*i).is_some()).collect();
        for i in held.iter().step_by(2) {
            c.forget(*i);
            c.forget(*i);
        }
        for (n, i) in held.iter().enumerate() {
            assert_eq!(c.get(*i).map(|p| p.seq()), (n % 2 == 1).then_some(*i));
        }
        let off = PageCache::new(0);
        off.insert(1, page(1));
        assert!(off.get(1).is_none());
        assert_eq!(off.len(), 0);
    }
}
