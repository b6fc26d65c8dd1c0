//! Table handles: a named key space of a database (see [`crate::state::tables`]), and what the
//! database says about each table.

use crate::error::{Error, Result};
use crate::state::directory::Directory;
use crate::state::tables::{TableDef, TableId, Tables, DEFAULT_TABLE_ID};
use sprig_core::tables::DEFAULT_TABLE;
use sprig_core::trie::Node;
use std::sync::Arc;

/// A table of a database: pass it to the `_in` methods of batches, views and overlays. Cheap
/// to clone. A handle names one table for its whole life: once the table is dropped, using the
/// handle is [`Error::NoSuchTable`], even if a new table of the same name is created.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, Options, TableOptions};
/// let db = Db::open_in_memory(Options::default())?;
/// let balances = db.create_table("balances", TableOptions::resolver("add-u64"))?;
/// let mut batch = db.begin();
/// batch.upsert_in(&balances, [7u8; 32], 2u64.to_le_bytes())?;
/// batch.upsert_in(&balances, [7u8; 32], 3u64.to_le_bytes())?;
/// batch.put([7u8; 32], b"default table".to_vec())?; // same key, another table
/// db.commit(batch.finish()?)?;
/// let view = db.view();
/// assert_eq!(view.get_in(&balances, &[7u8; 32])?, Some(5u64.to_le_bytes().to_vec()));
/// assert_ne!(view.table_root(&balances)?, view.root());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub(crate) id: TableId,
    pub(crate) name: Arc<str>,
}

impl Table {
    /// The default table, which every database has.
    pub fn default_table() -> Table {
        Table {
            id: DEFAULT_TABLE_ID,
            name: Arc::from(DEFAULT_TABLE),
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table's number (unique for the life of the database; 0 is the default table).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The handle of the table `def` describes.
    pub(crate) fn of(def: &TableDef) -> Table {
        Table {
            id: def.id,
            name: Arc::from(def.name.as_str()),
        }
    }

    /// The table named `name` in `tables`, or [`Error::NoSuchTable`].
    pub(crate) fn named(tables: &Tables, name: &str) -> Result<Table> {
        tables
            .by_name(name)
            .map(|def| Table::of(&def))
            .ok_or_else(|| Error::NoSuchTable(name.to_string()))
    }

    /// This table's directory in `tables`: [`Error::NoSuchTable`] if the version does not
    /// hold it, [`Error::UnionInProgress`] while an incremental union fills it (its directory
    /// holds only the part merged so far).
    pub(crate) fn dir<'a>(&self, tables: &'a Tables) -> Result<&'a Directory> {
        if let Some(u) = tables.union(self.id) {
            return Err(Error::UnionInProgress {
                table: self.name.to_string(),
                remaining: u.remaining(),
            });
        }
        self.any_dir(tables)
    }

    /// This table's directory in `tables`, complete or not.
    pub(crate) fn any_dir<'a>(&self, tables: &'a Tables) -> Result<&'a Directory> {
        tables
            .dir(self.id)
            .ok_or_else(|| Error::NoSuchTable(self.name.to_string()))
    }
}

/// How a table is created.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// The resolver that combines upserted values with stored ones: a built-in
    /// ([`crate::resolve::BUILTIN_RESOLVERS`]) or one registered with
    /// [`crate::Options::resolver`]. `None` (default): upserts into the table are refused.
    pub resolver: Option<String>,
}

impl TableOptions {
    /// Options with resolver `name`.
    pub fn resolver(name: impl Into<String>) -> TableOptions {
        TableOptions {
            resolver: Some(name.into()),
        }
    }
}

/// What a version says about one of its tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    /// The table's handle.
    pub table: Table,
    /// Its resolver's name, if it has one.
    pub resolver: Option<String>,
    /// Its entries.
    pub entries: u64,
    /// Its root.
    pub root: Node,
    /// While an incremental union fills it: the input entries still to merge (`entries` and
    /// `root` are then of the part merged so far, and the table is not in the database root).
    pub union_debt: Option<u64>,
}

/// Every table of `tables`, the default table first.
pub(crate) fn table_infos(tables: &Tables) -> Vec<TableInfo> {
    tables
        .defs()
        .into_iter()
        .filter_map(|def| {
            let dir = tables.dir(def.id)?;
            Some(TableInfo {
                table: Table::of(&def),
                resolver: def.resolver,
                entries: dir.len(),
                root: dir.root_node(),
                union_debt: tables.union(def.id).map(|u| u.remaining()),
            })
        })
        .collect()
}
