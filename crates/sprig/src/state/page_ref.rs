//! What the directory knows of one page: where it is (a disk location or a page held in
//! memory until its commit is durable), its checksum, trie node and entry count.

use crate::state::page::Page;
use sprig_core::trie::Node;
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
