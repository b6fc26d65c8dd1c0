//! The read path every operation uses: pages by region from memory (overlays), the page
//! cache, or the SSD (all misses of a call in one batch of reads, each page checked against
//! its checksum and region), and values from pages or the value log.

use super::cores;
use super::engine::Inner;
use crate::error::{Error, Result};
use crate::log::segments::decode_page_at;
use crate::state::directory::{Directory, PageLoc, PageRef};
use crate::state::page::{ExternalValue, Page, ValueRef, UNWRITTEN};
use crate::state::prefix::Prefix;
use crate::state::tables::TableId;
use crate::state::version::Version;
use crate::stats::ReadKind;
use sprig_core::trie::KeyPath;
use std::sync::Arc;

/// The fewest regions [`Inner::load_pages_with`] spreads over the cores (half of it per share
/// at the least).
pub(crate) const PARALLEL_LOAD_MIN: usize = 256;

/// Loaded pages, by region.
pub type PagesByRegion = crate::state::FastMap<Prefix, Arc<Page>>;

/// The keys of a large lookup that one core locates, reads and answers at a time (see
/// [`in_sorted_runs`]): a few thousand pages, enough reads to keep the SSD's queue full while
/// the other core walks the directory or reads values out of pages, and runs enough for both
/// cores.
pub(crate) const LOOKUP_RUN: usize = 2048;

/// Keys of a lookup sorted, each with its index among the keys asked.
pub(crate) type SortedKeys = [(KeyPath, usize)];

/// `keys` sorted and cut into runs of [`LOOKUP_RUN`], and `f` of each run (with the last key
/// of the run before it), run after run on every core; the results in the runs' order.
///
/// A large lookup done as three steps over all its keys (walk the directory for every key,
/// read every page, find every value) has no read in flight during the first and the last
/// (about a sixth of a read phase at transfer 2^24). In runs, one core's walk and value reads
/// overlap the other's reads; and as runs are key ranges, only a region that straddles two
/// runs has keys in both (see [`plan_run`]).
pub(crate) fn in_sorted_runs<R: Send>(
    keys: &[KeyPath],
    f: impl Fn(&SortedKeys, Option<&KeyPath>) -> R + Sync,
) -> Vec<R> {
    let mut sorted: Vec<(KeyPath, usize)> = keys.iter().copied().zip(0..).collect();
    sorted.sort_unstable_by(|a, b| key_order(&a.0, &b.0));
    let starts: Vec<usize> = (0..sorted.len()).step_by(LOOKUP_RUN).collect();
    let sorted = &sorted;
    cores::map_on_cores(&starts, 2, |start| {
        let run = sorted.get(*start..).unwrap_or_default();
        let run = run.get(..LOOKUP_RUN).unwrap_or(run);
        let before = start
            .checked_sub(1)
            .and_then(|i| sorted.get(i))
            .map(|(k, _)| k);
        f(run, before)
    })
}

/// The order of key paths (bytewise), faster than the arrays' own comparison, which calls
/// `memcmp`: by the first eight bytes as a number, then (rarely, for hashed keys) by the rest.
pub(crate) fn key_order(a: &KeyPath, b: &KeyPath) -> std::cmp::Ordering {
    let head = |k: &KeyPath| k.first_chunk::<8>().map_or(0, |h| u64::from_be_bytes(*h));
    head(a).cmp(&head(b)).then_with(|| a.cmp(b))
}

/// Where the page of one key of a run is (see [`plan_run`]).
pub(crate) enum RunPlace {
    /// Read by this run: its index among the run's reads.
    Read(usize),
    /// Held already under this region (or none there: a region without a page holds no value).
    Held(Prefix),
    /// Read by the run before: the key is answered once every run is done.
    Before,
}

/// What one run of a lookup reads, and where each of its keys' pages is.
#[derive(Default)]
pub(crate) struct RunPlan {
    /// The pages the run reads (or takes from the cache), by region, each once.
    pub wanted: Vec<(Prefix, PageRef)>,
    /// Per key of the run, in its order.
    pub places: Vec<RunPlace>,
    /// Keys located by the run (not `known` before), with their regions; a key of a region the
    /// run before reads is in `deferred` instead.
    pub found: Vec<(KeyPath, Prefix)>,
    /// Keys (by their index among the keys asked) of a region the run before reads.
    pub deferred: Vec<(usize, Prefix)>,
}

/// One run of a lookup, done ([`Inner::read_run`]).
pub(crate) struct RunDone {
    /// What it located and read, and the keys it left to the run before.
    pub plan: RunPlan,
    /// The pages of `plan.wanted`, in its order.
    pub loaded: Vec<Arc<Page>>,
    /// The value of each key it answered, by the key's index among the keys asked.
    pub answers: Vec<(usize, Option<Vec<u8>>)>,
}

/// Plan one run of [`in_sorted_runs`] over `dir`: locate the keys whose region is not `known`,
/// and list the pages of their regions that are not `held` already, each once; a region that
/// also holds `before` (the last key of the run before) is read by that run (or, if its keys
/// reach further back, by the first run with a key in it), so that no page is read twice.
fn plan_run(
    dir: &Directory,
    run: &SortedKeys,
    before: Option<&KeyPath>,
    known: impl Fn(&KeyPath) -> Option<Prefix>,
    held: impl Fn(&Prefix) -> bool,
) -> Result<RunPlan> {
    let regions: Vec<Option<Prefix>> = run.iter().map(|(k, _)| known(k)).collect();
    let fresh: Vec<KeyPath> = run
        .iter()
        .zip(&regions)
        .filter(|(_, region)| region.is_none())
        .map(|((k, _), _)| *k)
        .collect();
    let mut fresh_located = dir.locate_many(&fresh).into_iter();
    let mut plan = RunPlan {
        places: Vec::with_capacity(run.len()),
        ..RunPlan::default()
    };
    for ((key, i), region) in run.iter().zip(regions) {
        if let Some(prefix) = region {
            plan.places.push(RunPlace::Held(prefix));
            continue;
        }
        let (prefix, page) = fresh_located
            .next()
            .ok_or_else(|| Error::internal("the directory located fewer keys than asked"))?;
        let Some(r) = page.filter(|_| !held(&prefix)) else {
            plan.found.push((*key, prefix));
            plan.places.push(RunPlace::Held(prefix));
            continue;
        };
        if before.is_some_and(|k| prefix.contains(k)) {
            plan.deferred.push((*i, prefix));
            plan.places.push(RunPlace::Before);
            continue;
        }
        plan.found.push((*key, prefix));
        // Sorted keys: the keys of one region are neighbours.
        if plan.wanted.last().is_none_or(|(p, _)| *p != prefix) {
            plan.wanted.push((prefix, r));
        }
        plan.places.push(RunPlace::Read(plan.wanted.len() - 1));
    }
    Ok(plan)
}

impl Inner {
    /// Load the pages of the given regions: from memory, the cache, or the SSD (all misses
    /// read in one batch, and cached).
    pub fn load_pages(
        &self,
        wanted: &[(Prefix, PageRef)],
        kind: ReadKind,
    ) -> Result<Vec<Arc<Page>>> {
        self.load_pages_with(wanted, kind, true)
    }

    /// [`Inner::load_pages`]; pages read from the SSD are cached only with `fill_cache` (an
    /// import reads each page once: caching them would evict what readers use).
    ///
    /// At least [`PARALLEL_LOAD_MIN`] regions are loaded in shares on every core (none
    /// smaller than half of it), each submitting its reads on its own thread's ring and
    /// checking and decoding what it read: reaping, checking and decoding took the committing
    /// thread about 10 µs a page while the other core waited (most of a cold cache's first
    /// batch at transfer 2^20, whose 17,000 reads ran at half of fio's QD32 rate).
    pub fn load_pages_with(
        &self,
        wanted: &[(Prefix, PageRef)],
        kind: ReadKind,
        fill_cache: bool,
    ) -> Result<Vec<Arc<Page>>> {
        let share = if wanted.len() < PARALLEL_LOAD_MIN {
            wanted.len().max(1)
        } else {
            wanted
                .len()
                .div_ceil(cores::cores())
                .max(PARALLEL_LOAD_MIN / 2)
        };
        let shares: Vec<&[(Prefix, PageRef)]> = wanted.chunks(share).collect();
        let mut pages = Vec::with_capacity(wanted.len());
        for loaded in cores::map_on_cores(&shares, 2, |s| self.load_pages_here(s, kind, fill_cache)) {
            pages.extend(loaded?);
        }
        Ok(pages)
    }

    /// [`Inner::load_pages_with`] on the calling thread.
    pub(crate) fn load_pages_here(
        &self,
        wanted: &[(Prefix, PageRef)],
        kind: ReadKind,
        fill_cache: bool,
    ) -> Result<Vec<Arc<Page>>> {
        let mut out: Vec<Option<Arc<Page>>> = vec![None; wanted.len()];
        self.load_pages_each(wanted, kind, fill_cache, &mut |i, page| {
            let slot = out
                .get_mut(i)
                .ok_or_else(|| Error::internal("a page loaded for no request"))?;
            *slot = Some(page);
            Ok(())
        })?;
        out.into_iter()
            .map(|p| p.ok_or_else(|| Error::internal("a page asked for was not loaded")))
            .collect()
    }

    /// Load the pages of the given regions as [`Inner::load_pages_with`] does, handing each
    /// (with its index in `wanted`) to `loaded` as soon as it is in memory: those in memory or
    /// the cache first, then each read from the SSD as it arrives, while the rest are in
    /// flight. Fails with the first error of a read, a check or `loaded`.
    pub fn load_pages_each(
        &self,
        wanted: &[(Prefix, PageRef)],
        kind: ReadKind,
        fill_cache: bool,
        loaded: &mut dyn FnMut(usize, Arc<Page>) -> Result<()>,
    ) -> Result<()> {
        let mut misses = Vec::new();
        let mut hits = 0u64;
        for (i, (prefix, r)) in wanted.iter().enumerate() {
            match &r.loc {
                PageLoc::Memory(m) => match (m.page(), m.written()) {
                    (Some(p), _) => loaded(i, p)?,
                    (None, Some((l, checksum))) => match self.cache.get(l) {
                        Some(p) => {
                            hits += 1;
                            loaded(i, p)?;
                        }
                        None => misses.push((i, (l, checksum, *prefix))),
                    },
                    (None, None) => {
                        return Err(Error::internal(
                            "an in-memory page was released before it was written",
                        ))
                    }
                },
                PageLoc::Disk(l) => match self.cache.get(*l) {
                    Some(p) => {
                        hits += 1;
                        loaded(i, p)?;
                    }
                    None => misses.push((i, (*l, r.checksum, *prefix))),
                },
            }
        }
        self.counters.cache_hits(hits);
        if !misses.is_empty() {
            let requests: Vec<(u64, u64, Prefix)> = misses.iter().map(|(_, r)| *r).collect();
            // Each page is decoded as soon as it arrives, while the rest are in flight.
            let mut evicted = Vec::new();
            self.log.segments.read_pages_each(&requests, &mut |j, bytes| {
                let (i, (l, sum, prefix)) = misses
                    .get(j)
                    .ok_or_else(|| Error::internal("a page read that was never asked for"))?;
                // `read_pages_each` checked the page against `sum`.
                let page = Arc::new(decode_page_at(bytes, *l, prefix, *sum)?);
                if fill_cache {
                    evicted.extend(self.cache.insert(*l, page.clone()));
                }
                loaded(*i, page)
            })?;
            self.drop_pages(evicted);
            self.counters.page_reads(kind, requests.len() as u64);
        }
        Ok(())
    }

    /// The bytes of a value of table `table` as seen from `version` (whose overlays may hold
    /// values not written yet).
    pub fn value_bytes(
        &self,
        version: &Version,
        table: TableId,
        key: &KeyPath,
        value: ValueRef<'_>,
    ) -> Result<Vec<u8>> {
        match value {
            ValueRef::Inline(v) => Ok(v.to_vec()),
            ValueRef::External(x) if x.loc == UNWRITTEN => {
                if let Some(bytes) = version.unwritten_value(table, key) {
                    return Ok(bytes);
                }
                // Held by an overlay that has been committed since: read it from where its
                // commit wrote it.
                let loc = version
                    .written_value(table, key)
                    .ok_or_else(|| Error::internal("an overlay value has no location"))?;
                self.counters.value_read(x.len);
                self.log
                    .segments
                    .read_value(key, &ExternalValue { loc, ..x })
            }
            ValueRef::External(x) => {
                self.counters.value_read(x.len);
                self.log.segments.read_value(key, &x)
            }
        }
    }

    /// One run of [`in_sorted_runs`] over `dir`, on the calling thread: planned
    /// ([`plan_run`]: `known` regions of keys, pages `held` already by region), its pages
    /// read (as `kind`), and the values of its keys in table `table` as seen from `version`,
    /// except those `skip` says not to answer and those of a region the run before reads.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_run<'h>(
        &self,
        version: &Version,
        table: TableId,
        dir: &Directory,
        run: &SortedKeys,
        before: Option<&KeyPath>,
        known: impl Fn(&KeyPath) -> Option<Prefix>,
        held: impl Fn(&Prefix) -> Option<&'h Arc<Page>>,
        skip: impl Fn(&KeyPath) -> bool,
        kind: ReadKind,
    ) -> Result<RunDone> {
        let plan = plan_run(dir, run, before, known, |p| held(p).is_some())?;
        let loaded = self.load_pages_here(&plan.wanted, kind, true)?;
        let mut answers = Vec::with_capacity(run.len());
        for ((key, i), place) in run.iter().zip(&plan.places) {
            let page = match place {
                RunPlace::Before => continue,
                _ if skip(key) => continue,
                RunPlace::Read(at) => loaded.get(*at),
                RunPlace::Held(prefix) => held(prefix),
            };
            let value = match page.and_then(|p| p.get(key)) {
                Some(v) => Some(self.value_bytes(version, table, key, v)?),
                None => None,
            };
            answers.push((*i, value));
        }
        Ok(RunDone {
            plan,
            loaded,
            answers,
        })
    }

    /// The values of the keys every run of one lookup left to a run before its own
    /// (`RunPlan::deferred`), by their index among `keys`, as [`Inner::read_run`] would have
    /// answered them: a deferred region is the last one that run read (its keys come last in
    /// it), or, for a region whose keys fill whole runs, the last of the first run with a key
    /// in it. None for a key `skip` says not to answer.
    pub(crate) fn answer_deferred(
        &self,
        version: &Version,
        table: TableId,
        keys: &[KeyPath],
        runs: &[RunDone],
        skip: impl Fn(&KeyPath) -> bool,
    ) -> Result<Vec<(usize, Option<Vec<u8>>)>> {
        let mut answers = Vec::new();
        for (r, done) in runs.iter().enumerate() {
            for (i, prefix) in &done.plan.deferred {
                let key = keys
                    .get(*i)
                    .ok_or_else(|| Error::internal("a deferred answer for no key"))?;
                if skip(key) {
                    continue;
                }
                let page = runs
                    .get(..r)
                    .unwrap_or_default()
                    .iter()
                    .rev()
                    .find_map(|d| match d.plan.wanted.last() {
                        Some((q, _)) if q == prefix => d.loaded.last(),
                        _ => None,
                    })
                    .ok_or_else(|| Error::internal("no run read a deferred key's page"))?;
                let value = match page.get(key) {
                    Some(v) => Some(self.value_bytes(version, table, key, v)?),
                    None => None,
                };
                answers.push((*i, value));
            }
        }
        Ok(answers)
    }

    /// The pages (by region) holding `keys` in `dir`, loaded; and each key's region, in the
    /// order of `keys` (the keys are found in the directory together, their walks overlapping).
    pub fn pages_for(
        &self,
        dir: &Directory,
        keys: &[KeyPath],
        kind: ReadKind,
    ) -> Result<(PagesByRegion, Vec<Prefix>)> {
        let located = dir.locate_many(keys);
        let mut wanted: Vec<(Prefix, PageRef)> = Vec::new();
        let mut seen = crate::state::FastSet::default();
        let mut regions = Vec::with_capacity(located.len());
        for (prefix, page) in located {
            regions.push(prefix);
            if let Some(r) = page {
                if seen.insert(prefix) {
                    wanted.push((prefix, r));
                }
            }
        }
        let pages = self.load_pages(&wanted, kind)?;
        Ok((wanted.into_iter().map(|(p, _)| p).zip(pages).collect(), regions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key_order` is the bytewise order: equal to the arrays' own comparison, also for keys
    /// that share their first eight bytes or differ only in the last bit.
    #[test]
    fn key_order_is_the_bytewise_order() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut keys: Vec<KeyPath> = Vec::new();
        for i in 0..3000u64 {
            let mut k = [0u8; 32];
            for chunk in k.chunks_mut(8) {
                chunk.copy_from_slice(&next().to_le_bytes());
            }
            match i % 3 {
                // A shared head: the rest decides.
                0 => k[..8].copy_from_slice(&[0xab; 8]),
                // Only the last bit differs from the previous key.
                1 => {
                    if let Some(prev) = keys.last() {
                        k = *prev;
                        k[31] ^= 1;
                    }
                }
                _ => {}
            }
            keys.push(k);
        }
        for a in keys.iter().take(200) {
            for b in &keys {
                assert_eq!(key_order(a, b), a.cmp(b));
            }
        }
        let mut ours = keys.clone();
        ours.sort_unstable_by(key_order);
        keys.sort_unstable();
        assert_eq!(ours, keys);
    }
}
