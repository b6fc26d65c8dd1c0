//! The state's data structures, pure and without I/O: trie positions (prefixes), leaf pages
//! (format, validation, hashing, proofs, layout), the in-memory directory above the pages,
//! versions and overlays, and the page cache.

pub mod arena;
pub mod cache;
pub mod directory;
pub mod page;
pub mod page_ref;
pub mod prefix;
pub mod reclaim;
pub mod tables;
pub mod union;
pub mod version;
pub mod versions;
