//! Catalog changes: creating and dropping tables, and starting an incremental union, each an
//! ordinary commit whose record names the table (a created table starts empty; a dropped
//! table's pages and values become garbage for the cleaner once no retained version needs
//! them; a union's table is created empty and its inputs frozen, reading nothing). As atomic
//! and durable as any commit.

use crate::error::{Error, Result};
use crate::log::publish::Blocks;
use crate::log::record::{CommitRecord, Prior, UnionChange};
use crate::state::tables::{TableDef, TableId, Tables, DEFAULT_TABLE_ID};
use crate::write::engine::Inner;
use crate::write::CommitInfo;

/// A change to the catalog.
pub(crate) enum CatalogChange {
    /// Create a table with this name and resolver.
    Create {
        name: String,
        resolver: Option<String>,
    },
    /// Drop the table with this name.
    Drop { name: String },
    /// Create a table with this name and resolver, filled by an incremental union of the
    /// tables `inputs` (by id) as they are now.
    StartUnion {
        name: String,
        resolver: Option<String>,
        inputs: Vec<TableId>,
    },
}

impl Inner {
    /// The description of a new table `name` in `tables`: the next id, the name and
    /// resolver name checked, the name free, the resolver registered with this handle.
    pub(crate) fn new_table_def(
        &self,
        tables: &Tables,
        name: String,
        resolver: Option<String>,
    ) -> Result<TableDef> {
        let id = tables.next_id();
        if id == TableId::MAX {
            return Err(Error::internal("table ids exhausted"));
        }
        let def = TableDef { id, name, resolver };
        def.check().map_err(Error::InvalidArgument)?;
        if tables.by_name(&def.name).is_some() {
            return Err(Error::TableExists(def.name));
        }
        if let Some(r) = &def.resolver {
            if self.options.resolvers.get(r).is_none() {
                return Err(Error::ResolverMissing {
                    table: def.name,
                    resolver: r.clone(),
                });
            }
        }
        Ok(def)
    }

    /// Commit a catalog change; returns the commit and the id of the table it concerns.
    pub(crate) fn change_catalog(&self, change: CatalogChange) -> Result<(CommitInfo, TableId)> {
        let mut w = self.log.writer.lock();
        w.begin_write()?;
        let head = self.head();
        let seq = head
            .seq
            .checked_add(1)
            .ok_or_else(|| Error::internal("commit sequence numbers exhausted"))?;
        let mut record = CommitRecord {
            seq,
            dropped: Vec::new(),
            created: Vec::new(),
            tables: Vec::new(),
            values_written: Vec::new(),
            values_freed: Vec::new(),
            segment_heads: Vec::new(),
            unions: Vec::new(),
        };
        let id = match change {
            CatalogChange::Create { name, resolver } => {
                let def = self.new_table_def(&head.tables, name, resolver)?;
                let id = def.id;
                record.created.push(def);
                id
            }
            CatalogChange::Drop { name } => {
                let def = head
                    .tables
                    .by_name(&name)
                    .ok_or(Error::NoSuchTable(name))?;
                if def.id == DEFAULT_TABLE_ID {
                    return Err(Error::DefaultTable);
                }
                record.dropped.push(def.id);
                def.id
            }
            CatalogChange::StartUnion {
                name,
                resolver,
                inputs,
            } => {
                for id in &inputs {
                    let def = head
                        .tables
                        .def(*id)
                        .ok_or_else(|| Error::NoSuchTable(format!("#{id}")))?;
                    if let Some(u) = head.tables.union(*id) {
                        return Err(Error::UnionInProgress {
                            table: def.name,
                            remaining: u.remaining(),
                        });
                    }
                }
                let def = self.new_table_def(&head.tables, name, resolver)?;
                let id = def.id;
                record.created.push(def);
                // Every segment that exists now may hold the inputs' data.
                record.unions.push(UnionChange::Start {
                    table: id,
                    inputs,
                    pinned_segments: w.table.newest_id(),
                });
                id
            }
        };
        w.guarded(|w| {
            let published =
                self.publish_record(
                    w,
                    &head,
                    &record,
                    Blocks::none(),
                    self.versions.next_id(),
                    &Prior::default(),
                )?;
            self.counters.commit();
            self.counters.written(published.log_bytes, 0);
            self.refresh_emptied(w);
            self.after_commit(w)?;
            let head = self.head();
            Ok((
                CommitInfo {
                    seq,
                    root: head.tables.default_dir().root_node(),
                    db_root: head.tables.db_root(),
                    pages_written: 0,
                    bytes_written: published.log_bytes,
                    pages_relocated: 0,
                    values_relocated: 0,
                },
                id,
            ))
        })
    }
}
