//! The state's data structures, pure and without I/O: trie positions (prefixes), leaf pages
//! (format, validation, hashing, proofs, layout), the in-memory directory above the pages,
//! versions and overlays, and the page cache.

pub mod arena;
pub mod blocks;
pub mod cache;
pub mod directory;
pub mod page;
pub mod page_ref;
pub mod prefetch;
pub mod prefix;
pub mod reclaim;
pub mod tables;
pub mod union;
pub mod version;
pub mod versions;

/// A hash map for a batch's key paths and regions: foldhash, randomly seeded per map, several
/// times faster than the standard library's SipHash on 32-byte keys. Key paths may be chosen
/// by users, so not a fixed hash of some of their bytes (which structured keys would make
/// collide); foldhash claims only minimal resistance to deliberate collisions, and a batch
/// is its builder's own input.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The set of a [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
