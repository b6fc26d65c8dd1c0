//! Sprig's C ABI: a thin layer over the `sprig` crate for callers in C, C++, Go (cgo), Haskell
//! and anything else that speaks C.
//!
//! Rules every function follows (the header, `include/sprig.h`, repeats them):
//! - Every function returns a [`SprigStatus`]; `SPRIG_STATUS_OK` (0) is success. On failure,
//!   if `err` is not null, `*err` receives a message the caller frees with
//!   [`sprig_string_free`].
//! - Databases, views, batches, pending batches and pipelines are opaque 64-bit handles, never
//!   reused: a handle used after it was closed, freed or consumed gets
//!   `SPRIG_STATUS_INVALID_HANDLE` (so does freeing one twice), never undefined behaviour.
//! - Every pointer argument is checked: null where a value is needed is
//!   `SPRIG_STATUS_NULL_POINTER`. Keys are 32-byte key paths (`sprig_key_path` hashes byte
//!   keys); a table argument is a NUL-terminated name, or null for the default table.
//! - Bytes handed out (values, proofs, witnesses) come in a [`SprigBuf`] the caller frees with
//!   [`sprig_buf_free`].
//! - No panic crosses the boundary: one is caught and returned as `SPRIG_STATUS_PANIC`.
//! - Enumerated arguments are plain integers (`SPRIG_HASHER_*`), checked: an unknown value
//!   is `SPRIG_STATUS_INVALID_ARGUMENT`, never an invalid Rust enum.
//! - Handles may be used from any thread; one batch must not be used by two threads at once
//!   (it is locked, so they take turns).

mod batch;
mod db;
mod error;
mod handles;
mod pipeline;
mod view;

pub use batch::*;
pub use db::*;
pub use error::{sprig_buf_free, sprig_string_free, SprigBuf, SprigStatus};
pub use handles::{SprigBatch, SprigDb, SprigPending, SprigPipeline, SprigView};
pub use pipeline::*;
pub use view::*;
