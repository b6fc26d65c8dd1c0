//! Verifiable state sync: any node serves its state in chunks ([`ReadView::export_range`]:
//! a range's entries with a range proof built from the two boundary path proofs), and a new node
//! builds a table from chunks of untrusted origin ([`Db::import_chunks`]), each checked against a
//! trusted root before anything is written. The chunk format and its verifier are in
//! `sprig-core` ([`sprig_core::SyncChunk`], [`sprig_core::SyncVerifier`]), usable without this
//! crate.

use crate::api::db::Db;
use crate::api::table::Table;
use crate::api::view::ReadView;
use crate::error::{Error, Result};
use crate::write::{CommitInfo, ImportOptions};
use sprig_core::proof::range_proof_from_paths;
use sprig_core::trie::{KeyPath, Node};
use sprig_core::{SyncChunk, SyncVerifier};

impl ReadView {
    /// A state-sync chunk of `table`: its entries with `start <= key < end` (no end: to the
    /// last key), at most `max_entries` of them, and the range proof against the table's root.
    /// When the range holds more, the chunk ends at the first key it leaves out, which is
    /// where the next chunk starts.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, Table};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let mut batch = db.begin();
    /// for i in 1u8..=10 {
    ///     batch.put([i; 32], vec![i])?;
    /// }
    /// db.commit(batch.finish()?)?;
    /// let view = db.view();
    /// let chunk = view.export_range(&Table::default_table(), [0u8; 32], None, 4)?;
    /// assert_eq!(chunk.entries.len(), 4);
    /// assert_eq!(chunk.end, Some([5u8; 32])); // where the next chunk starts
    /// chunk.verify(db.hasher(), &view.root())?; // what the receiving node checks
    /// # Ok(()) }
    /// ```
    pub fn export_range(
        &self,
        table: &Table,
        start: KeyPath,
        end: Option<KeyPath>,
        max_entries: usize,
    ) -> Result<SyncChunk> {
        if max_entries == 0 {
            return Err(Error::InvalidArgument(
                "a state-sync chunk needs room for at least one entry".into(),
            ));
        }
        if end.is_some_and(|e| e <= start) {
            return Err(Error::InvalidArgument(
                "a state-sync range must end after it starts".into(),
            ));
        }
        let mut cursor = match end {
            Some(e) => self.range_in(table, start..e),
            None => self.range_in(table, start..),
        };
        let entries = cursor.next_n(max_entries)?;
        // Cut short: the chunk ends at the first key left out (its value is not read).
        let end = cursor.peek_key()?.or(end);
        let start_proof = self.path_proof_in(table, &start)?;
        let end_proof = end.map(|e| self.path_proof_in(table, &e)).transpose()?;
        let proof = range_proof_from_paths(
            self.inner.hasher,
            &start,
            &start_proof,
            end.as_ref().zip(end_proof.as_ref()),
        )?;
        Ok(SyncChunk {
            start,
            end,
            entries,
            proof,
        })
    }
}

impl Db {
    /// Fill the empty `table` from state-sync chunks of untrusted origin, as one commit whose
    /// table root is `root`. The chunks must come in order from the first key to the last,
    /// each starting where the previous ended; each is verified against `root`
    /// ([`SyncVerifier`]) before its entries go further. A chunk that fails, a source error, or
    /// chunks that stop before the last key fail the import with nothing published (a rejected
    /// chunk is [`Error::Proof`]). Memory is bounded as in [`Db::import_sorted`].
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, ImportOptions, Options, Table};
    /// let source = Db::open_in_memory(Options::default())?;
    /// # let mut batch = source.begin();
    /// # for i in 1u8..=10 {
    /// #     batch.put([i; 32], vec![i])?;
    /// # }
    /// # source.commit(batch.finish()?)?;
    /// let (view, table) = (source.view(), Table::default_table());
    /// let trusted_root = view.root(); // from a block header, say
    /// let mut chunks = vec![view.export_range(&table, [0u8; 32], None, 4)?];
    /// while let Some(next) = chunks.last().and_then(|chunk| chunk.end) {
    ///     chunks.push(view.export_range(&table, next, None, 4)?);
    /// }
    /// let fresh = Db::open_in_memory(Options::default())?;
    /// let chunks = chunks.into_iter().map(Ok);
    /// fresh.import_chunks(&table, trusted_root, chunks, &ImportOptions::default())?;
    /// assert_eq!((fresh.root(), fresh.len()), (trusted_root, 10));
    /// # Ok(()) }
    /// ```
    pub fn import_chunks<I>(
        &self,
        table: &Table,
        root: Node,
        chunks: I,
        options: &ImportOptions,
    ) -> Result<CommitInfo>
    where
        I: IntoIterator<Item = Result<SyncChunk>>,
    {
        if self.view().len_in(table)? != 0 {
            return Err(Error::NotEmpty("a state-sync import"));
        }
        let mut verifier = SyncVerifier::new(self.hasher(), root);
        let mut chunks = chunks.into_iter();
        let mut current = Vec::new().into_iter();
        let mut done = false;
        let changes = std::iter::from_fn(|| loop {
            if let Some((k, v)) = current.next() {
                return Some(Ok((k, Some(v))));
            }
            if done {
                return None;
            }
            match chunks.next() {
                Some(Ok(chunk)) => {
                    if let Err(e) = verifier.accept(&chunk) {
                        done = true;
                        return Some(Err(e.into()));
                    }
                    current = chunk.entries.into_iter();
                }
                Some(Err(e)) => {
                    done = true;
                    return Some(Err(e));
                }
                None => {
                    done = true;
                    if let Some(next) = verifier.next_start() {
                        return Some(Err(Error::InvalidArgument(format!(
                            "the state-sync chunks stop before the last key: the next chunk \
                             must start at {}",
                            crate::log::record::hex(&next)
                        ))));
                    }
                    return None;
                }
            }
        });
        let info = self.import_sorted_into(table, changes, options)?;
        let got = self.view().table_root(table)?;
        if got != root {
            return Err(Error::internal(format!(
                "verified chunks imported to root {} instead of the trusted root",
                crate::log::record::hex(&got)
            )));
        }
        Ok(info)
    }
}
