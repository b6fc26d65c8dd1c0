//! The durable log: segment files holding pages and values, the write-ahead log of commit
//! records, checkpoints of the directory, and the manifest. Together they let the engine write
//! only sequentially, commit with two syncs, and recover to exactly the last complete commit.

pub mod checkpoint;
pub mod manifest;
pub mod record;
pub mod recovery;
pub mod segments;
pub mod wal;
