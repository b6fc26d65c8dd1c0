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
    fn load_pages_here(
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
                let (i, (l, _, prefix)) = misses
                    .get(j)
                    .ok_or_else(|| Error::internal("a page read that was never asked for"))?;
                let page = Arc::new(decode_page_at(bytes, *l, prefix)?);
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

