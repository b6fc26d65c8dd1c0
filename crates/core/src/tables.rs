//! Tables and the root of roots.
//!
//! A database holds several named tables, each its own key space with its own trie and root
//! (the same scheme as a single-table state, so a table's root is NOMT's root for its entries).
//! The *database root* commits to all of them with the same trie scheme once more: one leaf per
//! table, at key path [`table_key`]`(name)` (the name's bytes hashed like any byte key), whose
//! value is the table's 32-byte root. A [`TableProof`] shows a key in a table under the
//! database root: a path proof of the table's root under the database root, composed with a
//! path proof of the key under the table's root.

use crate::codec::{write_header, Reader};
use crate::error::ProofError;
use crate::hasher::Hasher;
use crate::model::ReferenceModel;
use crate::proof::{path_proof_from_entries, Lookup, PathProof, FORMAT_VERSION};
use crate::trie::{root_of, KeyPath, Node, ValueHash};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

/// The name of the table every database has: a database that never creates another table
/// keeps exactly the root it would have without tables.
///
/// ```
/// use sprig_core::{Hasher, TablesModel, DEFAULT_TABLE};
/// let mut db = TablesModel::new(Hasher::Blake3);
/// assert_eq!(db.names().collect::<Vec<_>>(), [DEFAULT_TABLE]); // every database has it
/// db.table_mut(DEFAULT_TABLE).expect("always there").insert([1u8; 32], b"v".to_vec());
/// assert!(!db.drop_table(DEFAULT_TABLE));
/// ```
pub const DEFAULT_TABLE: &str = "default";

/// The longest table name, in bytes.
///
/// ```
/// use sprig_core::{tables::{table_key, MAX_TABLE_NAME_BYTES}, Hasher};
/// assert_eq!(MAX_TABLE_NAME_BYTES, 255); // Sprig refuses longer table names
/// let longest = "t".repeat(MAX_TABLE_NAME_BYTES);
/// assert_eq!(table_key(Hasher::Blake3, &longest), Hasher::Blake3.hash_value(longest.as_bytes()));
/// ```
pub const MAX_TABLE_NAME_BYTES: usize = 255;

const MAGIC: &[u8; 4] = b"SPTP";

/// The key path of table `name`'s leaf in the root of roots.
///
/// ```
/// use sprig_core::{table_key, Hasher, KeyPath};
/// let key: KeyPath = table_key(Hasher::Blake3, "utxo"); // the table's leaf in the root of roots
/// assert_eq!(key, sprig_core::key_path_of(Hasher::Blake3, b"utxo"));
/// ```
pub fn table_key(hasher: Hasher, name: &str) -> KeyPath {
    hasher.hash_value(name.as_bytes())
}

/// The root-of-roots leaves of `tables` (name, table root), sorted by key path.
fn leaves<'a>(
    hasher: Hasher,
    tables: impl IntoIterator<Item = (&'a str, Node)>,
) -> Vec<(KeyPath, ValueHash)> {
    let mut leaves: Vec<(KeyPath, ValueHash)> = tables
        .into_iter()
        .map(|(name, root)| (table_key(hasher, name), hasher.hash_value(&root)))
        .collect();
    leaves.sort_unstable();
    leaves.dedup_by(|a, b| a.0 == b.0);
    leaves
}

/// The database root of tables given as (name, table root); names must be distinct.
///
/// ```
/// use sprig_core::{database_root, Hasher, TablesModel};
/// let mut db = TablesModel::new(Hasher::Blake3);
/// db.create("utxo");
/// let roots = db.names().map(|name| (name, db.table(name).map_or([0u8; 32], |t| t.root())));
/// assert_eq!(database_root(Hasher::Blake3, roots), db.root());
/// ```
pub fn database_root<'a>(
    hasher: Hasher,
    tables: impl IntoIterator<Item = (&'a str, Node)>,
) -> Node {
    root_of(hasher, &leaves(hasher, tables))
}

/// A proof of table `name`'s root under the database root of `tables`.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{database_root, table_key, tables::table_root_proof, Hasher};
/// let h = Hasher::Blake3;
/// let tables = [("default", [0u8; 32]), ("utxo", [7u8; 32])]; // (name, table root)
/// let proof = table_root_proof(h, tables, "utxo");
/// proof.verify_value(h, &database_root(h, tables), &table_key(h, "utxo"), Some(&[7u8; 32]))?;
/// # Ok(()) }
/// ```
pub fn table_root_proof<'a>(
    hasher: Hasher,
    tables: impl IntoIterator<Item = (&'a str, Node)>,
    name: &str,
) -> PathProof {
    path_proof_from_entries(hasher, &leaves(hasher, tables), &table_key(hasher, name))
}

/// A key's inclusion or exclusion in a table, under the database root.
///
/// ```
/// # fn main() -> Result<(), sprig_core::ProofError> {
/// use sprig_core::{Hasher, TablesModel};
/// let h = Hasher::Blake3;
/// let mut db = TablesModel::new(h);
/// db.create("utxo");
/// db.table_mut("utxo").expect("created").insert([1u8; 32], b"coin".to_vec());
/// let proof = db.table_proof("utxo", &[1u8; 32]).expect("a table");
/// // One proof against the one database root: the table under it, the key under the table.
/// proof.verify_value(h, &db.root(), "utxo", &[1u8; 32], Some(b"coin"))?;
/// assert_eq!(proof.table_root, db.table("utxo").expect("created").root());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProof {
    /// The table's root when the proof was made.
    pub table_root: Node,
    /// The table's root (its leaf at [`table_key`]) under the database root.
    pub table: PathProof,
    /// The key under the table's root.
    pub key: PathProof,
}

impl TableProof {
    /// Check the proof against `db_root` for `key` in table `name` and say what it shows.
    /// Fails if the table's root is not under `db_root` (an absent table included) or the key
    /// proof does not hash to the table's root.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, Lookup, TablesModel};
    /// let h = Hasher::Blake3;
    /// let mut db = TablesModel::new(h);
    /// db.create("utxo");
    /// let proof = db.table_proof("utxo", &[1u8; 32]).expect("a table");
    /// assert_eq!(proof.verify(h, &db.root(), "utxo", &[1u8; 32])?, Lookup::Absent);
    /// assert!(proof.verify(h, &db.root(), "default", &[1u8; 32]).is_err()); // another table
    /// # Ok(()) }
    /// ```
    pub fn verify(
        &self,
        hasher: Hasher,
        db_root: &Node,
        name: &str,
        key: &KeyPath,
    ) -> Result<Lookup, ProofError> {
        self.table.verify_value(
            hasher,
            db_root,
            &table_key(hasher, name),
            Some(&self.table_root),
        )?;
        self.key.verify(hasher, &self.table_root, key)
    }

    /// Check that the proof shows `key` in table `name` with exactly `value` (or absent, for
    /// `None`) under `db_root`.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ProofError, TablesModel};
    /// let h = Hasher::Blake3;
    /// let mut db = TablesModel::new(h);
    /// db.create("utxo");
    /// db.table_mut("utxo").expect("created").insert([1u8; 32], b"coin".to_vec());
    /// let proof = db.table_proof("utxo", &[1u8; 32]).expect("a table");
    /// proof.verify_value(h, &db.root(), "utxo", &[1u8; 32], Some(b"coin"))?;
    /// let spent = proof.verify_value(h, &db.root(), "utxo", &[1u8; 32], None);
    /// assert_eq!(spent, Err(ProofError::ValueMismatch { key: [1u8; 32] }));
    /// # Ok(()) }
    /// ```
    pub fn verify_value(
        &self,
        hasher: Hasher,
        db_root: &Node,
        name: &str,
        key: &KeyPath,
        value: Option<&[u8]>,
    ) -> Result<(), ProofError> {
        if self
            .verify(hasher, db_root, name, key)?
            .matches(hasher, value)
        {
            Ok(())
        } else {
            Err(ProofError::ValueMismatch { key: *key })
        }
    }

    /// The versioned binary encoding (see `docs/PROOF_FORMAT.md`): magic `SPTP`, version,
    /// hasher id, the table root, then the two path proofs, each as a u32 length and its own
    /// encoding.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, TableProof, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// db.create("utxo");
    /// let proof = db.table_proof("utxo", &[1u8; 32]).expect("a table");
    /// let bytes = proof.encode(Hasher::Blake3);
    /// assert_eq!(&bytes[..4], b"SPTP");
    /// assert_eq!(TableProof::decode(&bytes, Hasher::Blake3)?, proof);
    /// # Ok(()) }
    /// ```
    pub fn encode(&self, hasher: Hasher) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, MAGIC, FORMAT_VERSION);
        out.push(hasher.id());
        out.extend_from_slice(&self.table_root);
        for proof in [&self.table, &self.key] {
            let bytes = proof.encode(hasher);
            // A path proof is at most 256 siblings: its length always fits.
            let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&bytes);
        }
        out
    }

    /// Decode a table proof made with `hasher`.
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, ProofError, TableProof, TablesModel};
    /// let db = TablesModel::new(Hasher::Sha256);
    /// let bytes = db.table_proof("default", &[1u8; 32]).expect("a table").encode(Hasher::Sha256);
    /// let proof = TableProof::decode(&bytes, Hasher::Sha256)?;
    /// proof.verify_value(Hasher::Sha256, &db.root(), "default", &[1u8; 32], None)?;
    /// let wrong = TableProof::decode(&bytes, Hasher::Blake3);
    /// assert!(matches!(wrong, Err(ProofError::HasherMismatch { .. })));
    /// # Ok(()) }
    /// ```
    pub fn decode(bytes: &[u8], hasher: Hasher) -> Result<TableProof, ProofError> {
        let mut r = Reader::new(bytes);
        r.header(MAGIC, "table proof", FORMAT_VERSION)?;
        crate::proof::read_hasher(&mut r, hasher)?;
        let table_root = r.array("table root")?;
        let mut proofs = [None, None];
        for slot in proofs.iter_mut() {
            let len = r.u32("path proof length")? as usize;
            if len > r.remaining() {
                return Err(ProofError::Truncated { what: "path proof" });
            }
            let part = r.bytes(len, "path proof")?;
            *slot = Some(PathProof::decode(part, hasher)?);
        }
        r.finish()?;
        let [Some(table), Some(key)] = proofs else {
            return Err(ProofError::Truncated { what: "path proof" });
        };
        Ok(TableProof {
            table_root,
            table,
            key,
        })
    }
}

/// The reference model of a database with tables: a [`ReferenceModel`] per table name, every
/// root recomputed from scratch. The default table always exists. A table can be marked
/// pending (an incremental union still filling it): it holds its whole content but is left
/// out of the database root until marked complete.
///
/// ```
/// use sprig_core::{Hasher, ReferenceModel, TablesModel};
/// let h = Hasher::Blake3;
/// let mut db = TablesModel::new(h);
/// assert_eq!(db.root(), sprig_core::database_root(h, [("default", [0u8; 32])]));
/// db.create("utxo");
/// db.table_mut("utxo").expect("created").insert([1u8; 32], b"coin".to_vec());
/// let mut utxo = ReferenceModel::new(h);
/// utxo.insert([1u8; 32], b"coin".to_vec());
/// let roots = [("default", [0u8; 32]), ("utxo", utxo.root())];
/// assert_eq!(db.root(), sprig_core::database_root(h, roots));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablesModel {
    hasher: Hasher,
    tables: BTreeMap<String, ReferenceModel>,
    pending: BTreeSet<String>,
}

impl TablesModel {
    /// A database with only the (empty) default table.
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel, TERMINATOR};
    /// let db = TablesModel::new(Hasher::Blake3);
    /// assert_eq!(db.names().count(), 1);
    /// assert_eq!(db.table("default").map(|t| t.root()), Some(TERMINATOR));
    /// ```
    pub fn new(hasher: Hasher) -> TablesModel {
        let mut tables = BTreeMap::new();
        tables.insert(String::from(DEFAULT_TABLE), ReferenceModel::new(hasher));
        TablesModel {
            hasher,
            tables,
            pending: BTreeSet::new(),
        }
    }

    /// Mark table `name` pending or complete (returns false if there is no such table).
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// db.create("union");
    /// let with_it = db.root();
    /// assert!(db.set_pending("union", true)); // an incremental union is filling it
    /// assert_ne!(db.root(), with_it); // left out of the database root
    /// assert!(db.table_proof("union", &[1u8; 32]).is_none());
    /// assert!(!db.set_pending("nope", true));
    /// ```
    pub fn set_pending(&mut self, name: &str, pending: bool) -> bool {
        if !self.tables.contains_key(name) || name == DEFAULT_TABLE {
            return false;
        }
        if pending {
            self.pending.insert(String::from(name));
        } else {
            self.pending.remove(name);
        }
        true
    }

    /// Whether table `name` is pending.
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// db.create("union");
    /// db.set_pending("union", true);
    /// assert!(db.is_pending("union"));
    /// db.set_pending("union", false); // the union completed
    /// assert!(!db.is_pending("union"));
    /// ```
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending.contains(name)
    }

    /// The roots the database root is over: every table that is not pending.
    fn complete_roots(&self) -> impl Iterator<Item = (&str, Node)> {
        self.tables
            .iter()
            .filter(|(n, _)| !self.pending.contains(*n))
            .map(|(n, t)| (n.as_str(), t.root()))
    }

    /// The table `name`, if it exists.
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// db.create("utxo");
    /// assert!(db.table("utxo").is_some_and(|t| t.is_empty()));
    /// assert!(db.table("nope").is_none());
    /// ```
    pub fn table(&self, name: &str) -> Option<&ReferenceModel> {
        self.tables.get(name)
    }

    /// The table `name` to change, if it exists.
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// db.create("utxo");
    /// let before = db.root();
    /// db.table_mut("utxo").expect("created").insert([1u8; 32], b"coin".to_vec());
    /// assert_ne!(db.root(), before);
    /// ```
    pub fn table_mut(&mut self, name: &str) -> Option<&mut ReferenceModel> {
        self.tables.get_mut(name)
    }

    /// Create an empty table `name` (returns false if it exists).
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// assert!(db.create("utxo"));
    /// assert!(!db.create("utxo")); // it exists
    /// ```
    pub fn create(&mut self, name: &str) -> bool {
        if self.tables.contains_key(name) {
            return false;
        }
        self.tables
            .insert(String::from(name), ReferenceModel::new(self.hasher));
        true
    }

    /// Drop table `name` (returns false if it does not exist or is the default table).
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// let empty = db.root();
    /// db.create("scratch");
    /// assert!(db.drop_table("scratch"));
    /// assert_eq!(db.root(), empty);
    /// assert!(!db.drop_table("scratch") && !db.drop_table("default"));
    /// ```
    pub fn drop_table(&mut self, name: &str) -> bool {
        self.pending.remove(name);
        name != DEFAULT_TABLE && self.tables.remove(name).is_some()
    }

    /// Every table's name, in order.
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// db.create("utxo");
    /// db.create("accounts");
    /// assert_eq!(db.names().collect::<Vec<_>>(), ["accounts", "default", "utxo"]); // by name
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    /// The database root (over the tables that are not pending).
    ///
    /// ```
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// let before = db.root();
    /// db.create("utxo"); // an empty table adds a leaf to the root of roots
    /// assert_ne!(db.root(), before);
    /// ```
    pub fn root(&self) -> Node {
        database_root(self.hasher, self.complete_roots())
    }

    /// A proof of `key` in table `name` under [`TablesModel::root`] (`None` if there is no
    /// such table, or it is pending).
    ///
    /// ```
    /// # fn main() -> Result<(), sprig_core::ProofError> {
    /// use sprig_core::{Hasher, TablesModel};
    /// let mut db = TablesModel::new(Hasher::Blake3);
    /// db.create("utxo");
    /// db.table_mut("utxo").expect("created").insert([1u8; 32], b"coin".to_vec());
    /// let proof = db.table_proof("utxo", &[1u8; 32]).expect("a table");
    /// proof.verify_value(Hasher::Blake3, &db.root(), "utxo", &[1u8; 32], Some(b"coin"))?;
    /// assert!(db.table_proof("nope", &[1u8; 32]).is_none());
    /// # Ok(()) }
    /// ```
    pub fn table_proof(&self, name: &str, key: &KeyPath) -> Option<TableProof> {
        if self.pending.contains(name) {
            return None;
        }
        let table = self.tables.get(name)?;
        Some(TableProof {
            table_root: table.root(),
            table: table_root_proof(self.hasher, self.complete_roots(), name),
            key: table.path_proof(key),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> KeyPath {
        let mut k = [0u8; 32];
        k[0] = i.wrapping_mul(37);
        k[31] = i;
        k
    }

    #[test]
    fn table_proofs_verify_and_every_tampering_fails() {
        for hasher in [Hasher::Blake3, Hasher::Sha256] {
            let mut m = TablesModel::new(hasher);
            assert!(m.create("utxo"));
            assert!(!m.create("utxo"));
            for i in 0..20u8 {
                m.table_mut("utxo")
                    .unwrap()
                    .insert(key(i), alloc::vec![i; 3]);
                m.table_mut(DEFAULT_TABLE)
                    .unwrap()
                    .insert(key(i + 100), alloc::vec![i]);
            }
            let root = m.root();
            let p = m.table_proof("utxo", &key(4)).unwrap();
            p.verify_value(hasher, &root, "utxo", &key(4), Some(&[4, 4, 4]))
                .unwrap();
            // The same key is absent from the default table.
            let d = m.table_proof(DEFAULT_TABLE, &key(4)).unwrap();
            assert_eq!(
                d.verify(hasher, &root, DEFAULT_TABLE, &key(4)).unwrap(),
                Lookup::Absent
            );
            // Wrong table name, wrong value, wrong root: all rejected.
            assert!(p.verify(hasher, &root, DEFAULT_TABLE, &key(4)).is_err());
            assert!(p
                .verify_value(hasher, &root, "utxo", &key(4), Some(&[4, 4]))
                .is_err());
            assert!(p.verify(hasher, &[7; 32], "utxo", &key(4)).is_err());
            // A proof whose table root was swapped for another table's fails.
            let mut swapped = p.clone();
            swapped.table_root = d.table_root;
            assert!(swapped.verify(hasher, &root, "utxo", &key(4)).is_err());
            // Round trip, and every flipped bit of the encoding is an error or another proof
            // that fails to verify.
            let bytes = p.encode(hasher);
            assert_eq!(TableProof::decode(&bytes, hasher).unwrap(), p);
            for i in 0..bytes.len() * 8 {
                let mut b = bytes.clone();
                if let Some(byte) = b.get_mut(i / 8) {
                    *byte ^= 1 << (i % 8);
                }
                if let Ok(q) = TableProof::decode(&b, hasher) {
                    assert!(
                        q.verify_value(hasher, &root, "utxo", &key(4), Some(&[4, 4, 4]))
                            .is_err(),
                        "bit {i}"
                    );
                }
            }
            for len in 0..bytes.len() {
                assert!(TableProof::decode(bytes.get(..len).unwrap(), hasher).is_err());
            }
            // A dropped table is absent from the root.
            assert!(m.drop_table("utxo"));
            assert!(!m.drop_table(DEFAULT_TABLE));
            assert!(p.verify(hasher, &m.root(), "utxo", &key(4)).is_err());
        }
    }

    #[test]
    fn the_database_root_is_the_trie_of_table_roots() {
        let h = Hasher::Blake3;
        let mut model = ReferenceModel::new(h);
        let roots = [("a", [1u8; 32]), ("b", [0u8; 32]), ("c", [9u8; 32])];
        for (name, root) in roots {
            model.insert(table_key(h, name), root.to_vec());
        }
        assert_eq!(database_root(h, roots), model.root());
    }
}
