//! Sprig's commitment and its verifier.
//!
//! This crate owns the contract between a Sprig database and everyone who checks its state:
//! the node hashers, the binary Merkle trie over 256-bit key paths (bit-for-bit the scheme NOMT
//! uses), path proofs, multi-proofs and block witnesses with their versioned binary encoding,
//! and the verification of all of them against a root. It also holds the [`ReferenceModel`],
//! a plain in-memory map that recomputes everything from scratch: the oracle every test of the
//! engine compares against.
//!
//! It is `no_std` + `alloc`, does no I/O, and never panics on malformed input: every decoder
//! and verifier returns a [`ProofError`].
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![deny(clippy::indexing_slicing)]

extern crate alloc;

mod codec;
mod error;
mod hasher;
pub mod jobs;
mod model;
pub mod proof;
pub mod tables;
pub mod trie;

pub use error::ProofError;
pub use hasher::Hasher;
pub use model::ReferenceModel;
pub use proof::{
    Lookup, MultiProof, PathProof, ProofNode, SyncChunk, SyncVerifier, Terminal,
    VerifiedMultiProof, VerifiedWitness, Witness,
};
pub use tables::{database_root, table_key, TableProof, TablesModel, DEFAULT_TABLE};
pub use trie::{KeyPath, LeafData, Node, NodeKind, ValueHash, TERMINATOR};

/// Hash an arbitrary byte key to a 32-byte key path with the given hasher.
///
/// Callers whose keys are not already uniform 32-byte strings (account addresses, UTXO ids,
/// table keys) use this to obtain a path. It is the value hash of the key bytes, so the same
/// key always lands on the same path for a given hasher.
///
/// ```
/// use sprig_core::{key_path_of, Hasher};
/// let alice = key_path_of(Hasher::Blake3, b"alice");
/// assert_eq!(alice, Hasher::Blake3.hash_value(b"alice")); // the hash of the key's bytes
/// assert_ne!(alice, key_path_of(Hasher::Sha256, b"alice")); // another hasher, another path
/// ```
pub fn key_path_of(hasher: Hasher, key: &[u8]) -> KeyPath {
    hasher.hash_value(key)
}

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctest;
