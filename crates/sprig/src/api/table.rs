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
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, Table};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let default = Table::default_table();
    /// assert_eq!((default.name(), default.id()), ("default", 0));
    /// let mut batch = db.begin();
    /// batch.put_in(&default, [1u8; 32], "v")?; // the same as `batch.put`
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().get(&[1u8; 32])?, Some(b"v".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn default_table() -> Table {
        Table {
            id: DEFAULT_TABLE_ID,
            name: Arc::from(DEFAULT_TABLE),
        }
    }

    /// The table's name.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let blocks = db.create_table("blocks", TableOptions::default())?;
    /// assert_eq!(blocks.name(), "blocks");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table's number (unique for the life of the database; 0 is the default table).
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let db = Db::open_in_memory(Options::default())?;
    /// let first = db.create_table("t", TableOptions::default())?;
    /// db.drop_table("t")?;
    /// let second = db.create_table("t", TableOptions::default())?;
    /// assert_ne!(first.id(), second.id()); // the same name, another table
    /// assert_ne!(first, second);
    /// # Ok(()) }
    /// ```
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
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, Error, Options, TableOptions};
/// let db = Db::open_in_memory(Options::default())?;
/// let plain = db.create_table("plain", TableOptions::default())?; // no resolver
/// let highest = db.create_table("highest", TableOptions { resolver: Some("max".into()) })?;
/// let mut batch = db.begin();
/// assert!(matches!(batch.upsert_in(&plain, [1u8; 32], "v"), Err(Error::NoResolver(_))));
/// batch.upsert_in(&highest, [1u8; 32], "b")?;
/// batch.upsert_in(&highest, [1u8; 32], "a")?;
/// assert_eq!(batch.get_in(&highest, &[1u8; 32])?, Some(b"b".to_vec()));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// The resolver that combines upserted values with stored ones: a built-in
    /// ([`crate::resolve::BUILTIN_RESOLVERS`]) or one registered with
    /// [`crate::Options::resolver`]. `None` (default): upserts into the table are refused.
    pub resolver: Option<String>,
}

impl TableOptions {
    /// Options with resolver `name`.
    ///
    /// ```
    /// # fn main() -> sprig::Result<()> {
    /// use sprig::{Db, Options, TableOptions};
    /// let xor = |old: &[u8], new: &[u8]| Ok(old.iter().zip(new).map(|(a, b)| a ^ b).collect());
    /// let db = Db::open_in_memory(Options::default().resolver("xor", xor))?;
    /// let parity = db.create_table("parity", TableOptions::resolver("xor"))?;
    /// let mut batch = db.begin();
    /// batch.upsert_in(&parity, [1u8; 32], [0b1100u8])?;
    /// batch.upsert_in(&parity, [1u8; 32], [0b1010u8])?;
    /// db.commit(batch.finish()?)?;
    /// assert_eq!(db.view().get_in(&parity, &[1u8; 32])?, Some(vec![0b0110u8]));
    /// # Ok(()) }
    /// ```
    pub fn resolver(name: impl Into<String>) -> TableOptions {
        TableOptions {
            resolver: Some(name.into()),
        }
    }
}

/// What a version says about one of its tables.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// use sprig::{Db, Options, TableOptions};
/// let db = Db::open_in_memory(Options::default())?;
/// let balances = db.create_table("balances", TableOptions::resolver("add-u64"))?;
/// let mut batch = db.begin();
/// batch.put_in(&balances, [1u8; 32], 5u64.to_le_bytes())?;
/// db.commit(batch.finish()?)?;
/// let info = &db.tables()[1];
/// assert_eq!((&info.table, info.resolver.as_deref()), (&balances, Some("add-u64")));
/// assert_eq!((info.entries, info.union_debt), (1, None));
/// assert_eq!(info.root, db.view().table_root(&balances)?);
/// # Ok(()) }
/// ```
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
