//! The tables of one version: the catalog (each table's id, name and resolver) and each
//! table's directory, and the database root over them.
//!
//! Every table is its own key space with its own directory and root; all directories of a
//! database share one node store, so a version holding several tables costs what their
//! changed paths cost. The default table (id 0) always exists and cannot be dropped; a
//! database that never creates another table keeps the root it had before tables existed.
//! Table ids are never reused: a dropped table's id stays retired, so a record or a page
//! accounting entry naming it can never be confused with a later table of the same name.

use crate::state::directory::{Arena, Directory, Region};
use crate::state::union::UnionState;
use sprig_core::tables::{database_root, DEFAULT_TABLE, MAX_TABLE_NAME_BYTES};
use sprig_core::trie::Node;
use sprig_core::Hasher;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A table's number: 0 is the default table.
pub type TableId = u32;

/// The default table's id.
pub const DEFAULT_TABLE_ID: TableId = 0;

/// The changed regions of a commit or overlay, by table.
pub type TableRegions = BTreeMap<TableId, Vec<Region>>;

/// A table's durable description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    /// The table's number, unique for the life of the database.
    pub id: TableId,
    /// The table's name.
    pub name: String,
    /// The name of the resolver that combines upserted values, if the table has one.
    pub resolver: Option<String>,
}

/// Why a table or resolver name is not acceptable (checked wherever a name comes in).
fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("a {what} name cannot be empty"));
    }
    if name.len() > MAX_TABLE_NAME_BYTES {
        return Err(format!(
            "a {what} name is at most {MAX_TABLE_NAME_BYTES} bytes ({} given)",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("a {what} name cannot contain control characters"));
    }
    Ok(())
}

impl TableDef {
    /// Why this description is not acceptable for a table other than the default one: its
    /// name or its resolver's name is empty, longer than [`MAX_TABLE_NAME_BYTES`] or holds
    /// control characters. Every description a catalog holds passed it, so every one encodes.
    pub fn check(&self) -> Result<(), String> {
        check_name("table", &self.name)?;
        if let Some(r) = &self.resolver {
            check_name("resolver", r)?;
        }
        Ok(())
    }
}

/// One table of a version.
#[derive(Clone)]
pub struct Table {
    /// Its description.
    pub def: Arc<TableDef>,
    /// Its directory.
    pub dir: Directory,
}

/// Why a change to the catalog is impossible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// A table id the catalog does not hold.
    #[error("no table with id {0}")]
    NoSuchTable(TableId),
    /// A new table's id or name is already taken.
    #[error("table {name:?} (id {id}) conflicts with an existing table")]
    Conflict {
        /// The id.
        id: TableId,
        /// The name.
        name: String,
    },
    /// The default table cannot be created, dropped or renamed.
    #[error("the default table cannot be created or dropped")]
    DefaultTable,
    /// A name that is not acceptable.
    #[error("{0}")]
    BadName(String),
}

/// Every table of one version.
#[derive(Clone)]
pub struct Tables {
    default: Directory,
    others: Arc<BTreeMap<TableId, Table>>,
    /// The id the next created table gets (ids of dropped tables are not reused).
    next_id: TableId,
    /// The incremental unions in progress, by the table they fill.
    unions: Arc<BTreeMap<TableId, Arc<UnionState>>>,
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.defs()).finish()
    }
}

impl Tables {
    /// A database holding only the default table, whose directory is `default`.
    pub fn only_default(default: Directory) -> Tables {
        Tables {
            default,
            others: Arc::new(BTreeMap::new()),
            next_id: 1,
            unions: Arc::new(BTreeMap::new()),
        }
    }

    /// An empty database.
    pub fn empty(arena: &Arc<Arena>, hasher: Hasher) -> Tables {
        Tables::only_default(Directory::empty(arena, hasher))
    }

    /// Tables from their parts (a decoded checkpoint): checks that ids are below `next_id`,
    /// not the default table's, and names distinct and acceptable; and that every union
    /// fills a table other than the default one.
    pub fn from_parts(
        default: Directory,
        others: Vec<Table>,
        next_id: TableId,
        unions: Vec<(TableId, UnionState)>,
    ) -> Result<Tables, CatalogError> {
        let mut t = Tables {
            default,
            others: Arc::new(BTreeMap::new()),
            next_id: next_id.max(1),
            unions: Arc::new(BTreeMap::new()),
        };
        for table in others {
            if table.def.id >= next_id {
                return Err(CatalogError::Conflict {
                    id: table.def.id,
                    name: table.def.name.clone(),
                });
            }
            t = t.with_created((*table.def).clone(), table.dir)?;
        }
        for (id, state) in unions {
            t = t.with_union(id, Some(state))?;
        }
        Ok(t)
    }

    /// The hasher of every table.
    pub fn hasher(&self) -> Hasher {
        self.default.hasher()
    }

    /// The node store every table's directory lives in.
    pub fn arena(&self) -> &Arc<Arena> {
        self.default.arena()
    }

    /// The default table's directory.
    pub fn default_dir(&self) -> &Directory {
        &self.default
    }

    /// The directory of table `id`.
    pub fn dir(&self, id: TableId) -> Option<&Directory> {
        if id == DEFAULT_TABLE_ID {
            Some(&self.default)
        } else {
            self.others.get(&id).map(|t| &t.dir)
        }
    }

    /// The description of the default table.
    pub fn default_def() -> TableDef {
        TableDef {
            id: DEFAULT_TABLE_ID,
            name: DEFAULT_TABLE.to_string(),
            resolver: None,
        }
    }

    /// The description of table `id`.
    pub fn def(&self, id: TableId) -> Option<TableDef> {
        if id == DEFAULT_TABLE_ID {
            Some(Tables::default_def())
        } else {
            self.others.get(&id).map(|t| (*t.def).clone())
        }
    }

    /// The table named `name`: its description.
    pub fn by_name(&self, name: &str) -> Option<TableDef> {
        if name == DEFAULT_TABLE {
            return Some(Tables::default_def());
        }
        self.others
            .values()
            .find(|t| t.def.name == name)
            .map(|t| (*t.def).clone())
    }

    /// Every table other than the default one, by id.
    pub fn others(&self) -> impl Iterator<Item = &Table> {
        self.others.values()
    }

    /// Every table's id and directory, the default table first.
    pub fn dirs(&self) -> impl Iterator<Item = (TableId, &Directory)> {
        std::iter::once((DEFAULT_TABLE_ID, &self.default))
            .chain(self.others.iter().map(|(id, t)| (*id, &t.dir)))
    }

    /// Every table's description, the default table first.
    pub fn defs(&self) -> Vec<TableDef> {
        std::iter::once(Tables::default_def())
            .chain(self.others.values().map(|t| (*t.def).clone()))
            .collect()
    }

    /// The number of tables (the default one included).
    pub fn count(&self) -> usize {
        1 + self.others.len()
    }

    /// The id the next created table gets.
    pub fn next_id(&self) -> TableId {
        self.next_id
    }

    /// The entries in every table.
    pub fn total_len(&self) -> u64 {
        self.dirs().map(|(_, d)| d.len()).sum()
    }

    /// The database root: the trie of every table's root, keyed by table name.
    pub fn db_root(&self) -> Node {
        let roots = self.roots();
        database_root(self.hasher(), roots.iter().map(|(n, r)| (n.as_str(), *r)))
    }

    /// Every table's name and root, the default table first; a table an incremental union
    /// is still filling has no root yet and is left out (it enters the database root when
    /// the union completes).
    pub fn roots(&self) -> Vec<(String, Node)> {
        std::iter::once((DEFAULT_TABLE.to_string(), self.default.root_node()))
            .chain(
                self.others
                    .values()
                    .filter(|t| !self.unions.contains_key(&t.def.id))
                    .map(|t| (t.def.name.clone(), t.dir.root_node())),
            )
            .collect()
    }

    /// The incremental union filling table `id`, if one is in progress.
    pub fn union(&self, id: TableId) -> Option<&Arc<UnionState>> {
        self.unions.get(&id)
    }

    /// Every incremental union in progress, by the table it fills.
    pub fn unions(&self) -> impl Iterator<Item = (TableId, &Arc<UnionState>)> {
        self.unions.iter().map(|(id, u)| (*id, u))
    }

    /// The highest segment id the inputs of a union in progress may use: segments up to it
    /// must be neither cleaned nor deleted.
    pub fn pinned_segments(&self) -> Option<u32> {
        self.unions.values().map(|u| u.pinned_segments).max()
    }

    /// These tables with the union filling table `id` set to `state` (none: no union, and a
    /// complete one is no union either).
    pub fn with_union(
        &self,
        id: TableId,
        state: Option<UnionState>,
    ) -> Result<Tables, CatalogError> {
        if id == DEFAULT_TABLE_ID {
            return Err(CatalogError::DefaultTable);
        }
        if !self.others.contains_key(&id) {
            return Err(CatalogError::NoSuchTable(id));
        }
        let mut unions = (*self.unions).clone();
        match state {
            Some(s) if !s.is_complete() => unions.insert(id, Arc::new(s)),
            _ => unions.remove(&id),
        };
        Ok(Tables {
            unions: Arc::new(unions),
            ..self.clone()
        })
    }

    /// These tables with table `id`'s directory replaced by `dir`.
    pub fn with_dir(&self, id: TableId, dir: Directory) -> Result<Tables, CatalogError> {
        if id == DEFAULT_TABLE_ID {
            return Ok(Tables {
                default: dir,
                ..self.clone()
            });
        }
        let mut others = (*self.others).clone();
        let t = others.get_mut(&id).ok_or(CatalogError::NoSuchTable(id))?;
        t.dir = dir;
        Ok(Tables {
            others: Arc::new(others),
            ..self.clone()
        })
    }

    /// These tables and a new one, `def`, with directory `dir`.
    pub fn with_created(&self, def: TableDef, dir: Directory) -> Result<Tables, CatalogError> {
        if def.id == DEFAULT_TABLE_ID || def.name == DEFAULT_TABLE {
            return Err(CatalogError::DefaultTable);
        }
        def.check().map_err(CatalogError::BadName)?;
        if self.others.contains_key(&def.id) || self.by_name(&def.name).is_some() {
            return Err(CatalogError::Conflict {
                id: def.id,
                name: def.name,
            });
        }
        let mut others = (*self.others).clone();
        let next_id = self.next_id.max(def.id.saturating_add(1));
        others.insert(
            def.id,
            Table {
                def: Arc::new(def),
                dir,
            },
        );
        Ok(Tables {
            default: self.default.clone(),
            others: Arc::new(others),
            next_id,
            unions: self.unions.clone(),
        })
    }

    /// These tables without table `id` (and its union, if one is in progress); returns the
    /// dropped table too.
    pub fn without(&self, id: TableId) -> Result<(Tables, Table), CatalogError> {
        if id == DEFAULT_TABLE_ID {
            return Err(CatalogError::DefaultTable);
        }
        let mut others = (*self.others).clone();
        let gone = others.remove(&id).ok_or(CatalogError::NoSuchTable(id))?;
        let mut unions = (*self.unions).clone();
        unions.remove(&id);
        Ok((
            Tables {
                default: self.default.clone(),
                others: Arc::new(others),
                next_id: self.next_id,
                unions: Arc::new(unions),
            },
            gone,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_keeps_ids_unique_and_the_default_table() {
        let arena = Arena::new();
        let h = Hasher::Blake3;
        let t = Tables::empty(&arena, h);
        let def = |id, name: &str| TableDef {
            id,
            name: name.into(),
            resolver: None,
        };
        let empty = || Directory::empty(&arena, h);
        let t = t.with_created(def(1, "a"), empty()).unwrap();
        assert!(t.with_created(def(1, "b"), empty()).is_err());
        assert!(t.with_created(def(2, "a"), empty()).is_err());
        assert!(t.with_created(def(2, DEFAULT_TABLE), empty()).is_err());
        assert!(t.with_created(def(2, ""), empty()).is_err());
        assert!(t.with_created(def(2, "x\n"), empty()).is_err());
        assert!(t.without(DEFAULT_TABLE_ID).is_err());
        let (t2, gone) = t.without(1).unwrap();
        assert_eq!(gone.def.name, "a");
        // Dropping does not give the id back.
        assert_eq!(t2.next_id(), 2);
        assert_eq!(t2.count(), 1);
        assert_eq!(t.count(), 2);
        // The database root of a database with only the default table is the root of roots
        // over it, and a new empty table changes it.
        assert_ne!(t.db_root(), t2.db_root());
        assert_eq!(
            t2.db_root(),
            database_root(h, [(DEFAULT_TABLE, t2.default_dir().root_node())])
        );
    }
}
