//! An incremental union in progress: the frozen inputs it merges from, how far the merge into
//! its table has come, and which segments hold the inputs' data.
//!
//! Starting an incremental union reads nothing: its table is created empty and its inputs
//! are frozen as they are in that version (their directories shared copy-on-write, so the
//! inputs stay free to change). Each step merges the next keys of the inputs, in key order,
//! into the table; a key at or below [`UnionState::through`] is in the table, a key above it
//! is still only in the inputs. Once every input entry is merged the state goes and the
//! table is an ordinary one.
//!
//! The frozen inputs' pages and values are not counted as live by the segment accounting;
//! instead every segment up to [`UnionState::pinned_segments`] (the segments that existed when
//! the union started) is neither cleaned nor deleted while the union runs.

use crate::state::prefix::key_after;
use crate::state::directory::Directory;
use sprig_core::trie::KeyPath;

/// The state of one incremental union.
#[derive(Clone)]
pub struct UnionState {
    /// The inputs, in the order their values are combined, frozen at the union's start.
    pub inputs: Vec<Directory>,
    /// The last key merged into the table (none before the first step).
    pub through: Option<KeyPath>,
    /// Input entries merged so far.
    pub consumed: u64,
    /// Segments with ids up to this one may hold the inputs' pages and values.
    pub pinned_segments: u32,
}

impl std::fmt::Debug for UnionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnionState")
            .field("inputs", &self.inputs.len())
            .field("consumed", &self.consumed)
            .field("total", &self.total())
            .field("pinned_segments", &self.pinned_segments)
            .finish()
    }
}

impl UnionState {
    /// A union of `inputs` that has merged nothing yet.
    pub fn start(inputs: Vec<Directory>, pinned_segments: u32) -> UnionState {
        UnionState {
            inputs,
            through: None,
            consumed: 0,
            pinned_segments,
        }
    }

    /// Input entries in all.
    pub fn total(&self) -> u64 {
        self.inputs.iter().map(Directory::len).sum()
    }

    /// Input entries still to merge: the union's remaining debt.
    pub fn remaining(&self) -> u64 {
        self.total().saturating_sub(self.consumed)
    }

    /// Whether every input entry is merged.
    pub fn is_complete(&self) -> bool {
        self.consumed >= self.total()
    }

    /// Whether `key` is merged into the table already (else only the inputs have it).
    pub fn merged(&self, key: &KeyPath) -> bool {
        self.through.is_some_and(|t| *key <= t)
    }

    /// The first key not merged yet (none once the last possible key is merged).
    pub fn next_key(&self) -> Option<KeyPath> {
        match self.through {
            None => Some([0; 32]),
            Some(t) => key_after(&t),
        }
    }

    /// Whether these states are of the same start and have come equally far.
    pub fn same_as(&self, other: &UnionState) -> bool {
        self.through == other.through
            && self.consumed == other.consumed
            && self.pinned_segments == other.pinned_segments
            && self.inputs.len() == other.inputs.len()
            && self
                .inputs
                .iter()
                .zip(&other.inputs)
                .all(|(a, b)| a.root_node() == b.root_node() && a.len() == b.len())
    }
}
