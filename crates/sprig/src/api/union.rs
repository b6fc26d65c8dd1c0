//! Union of tables: a new table holding every key of its inputs, equal keys combined by the
//! new table's resolver in input order (left-biased: the first input's value wins when it has
//! none). Built as one commit from a merge of the inputs' sorted scans, streamed through the
//! import path, so memory stays bounded whatever the tables' sizes; the new table is created
//! by that same commit, so a crash leaves either no table or the whole union.

use crate::api::db::Db;
use crate::api::table::{Table, TableOptions};
use crate::error::{Error, Result};
use crate::resolve::ResolveFn;
use crate::write::import::ImportTarget;
use crate::write::{CommitInfo, ImportOptions};
use sprig_core::trie::KeyPath;
use std::iter::Peekable;
use std::sync::Arc;

/// The sorted merge of several sorted entry streams, equal keys combined.
struct Merge<I: Iterator<Item = Result<(KeyPath, Vec<u8>)>>> {
    inputs: Vec<Peekable<I>>,
    resolver: Option<Arc<ResolveFn>>,
    failed: bool,
}

impl<I: Iterator<Item = Result<(KeyPath, Vec<u8>)>>> Iterator for Merge<I> {
    type Item = Result<(KeyPath, Option<Vec<u8>>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        // The smallest key at the head of any input (an error ends the merge with it).
        let mut least: Option<KeyPath> = None;
        for input in &mut self.inputs {
            match input.peek() {
                Some(Ok((k, _))) if least.is_none_or(|l| *k < l) => least = Some(*k),
                Some(Ok(_)) => {}
                Some(Err(_)) => {
                    self.failed = true;
                    return input.next().map(|r| r.map(|(k, v)| (k, Some(v))));
                }
                None => {}
            }
        }
        let key = least?;
        let mut value: Option<Vec<u8>> = None;
        for input in &mut self.inputs {
            if !matches!(input.peek(), Some(Ok((k, _))) if *k == key) {
                continue;
            }
            let Some(Ok((_, v))) = input.next() else {
                continue;
            };
            value = Some(match (value, &self.resolver) {
                (None, _) => v,
                (Some(acc), Some(f)) => match f(&acc, &v) {
                    Ok(r) => r,
                    Err(why) => {
                        self.failed = true;
                        return Some(Err(Error::InvalidArgument(format!(
                            "union of key {}: {why}",
                            crate::codec::hex(&key)
                        ))));
                    }
                },
                (Some(acc), None) => acc,
            });
        }
        value.map(|v| Ok((key, Some(v))))
    }
}

impl Db {
    /// Create table `name` as the union of `inputs` (as of the latest version): every key of
    /// any input, with the values of a key present in several inputs combined in input order
    /// by the resolver of `options` (see [`crate::resolve`]), or the first input's value when
    /// there is none. One durable commit creates and fills the table; the inputs are
    /// unchanged, and the result is an ordinary table.
    pub fn union(
        &self,
        name: &str,
        inputs: &[&Table],
        options: TableOptions,
    ) -> Result<(Table, CommitInfo)> {
        let resolver =
            match &options.resolver {
                Some(r) => Some(self.inner.options.resolvers.get(r).ok_or_else(|| {
                    Error::ResolverMissing {
                        table: name.to_string(),
                        resolver: r.clone(),
                    }
                })?),
                None => None,
            };
        let view = self.view();
        for t in inputs {
            view.len_in(t)?;
        }
        let merge = Merge {
            inputs: inputs.iter().map(|t| view.iter_in(t).peekable()).collect(),
            resolver,
            failed: false,
        };
        let info = self.inner.import_sorted(
            ImportTarget::New {
                name: name.to_string(),
                resolver: options.resolver,
            },
            merge,
            &ImportOptions::default(),
        )?;
        Ok((self.table(name)?, info))
    }
}
