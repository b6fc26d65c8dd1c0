//! Sprig: an SSD-optimized, merklized key-value store for blockchain state.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![deny(missing_docs)]

pub mod codec;
pub mod directory;
pub mod error;
pub mod io;
pub mod log;
pub mod page;
pub mod prefix;

pub use error::{Error, Result};
