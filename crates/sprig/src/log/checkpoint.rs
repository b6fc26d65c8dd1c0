//! Checkpoints: every table's directory and the segment accounting at one commit, written atomically,
//! so that opening a database reads one file and replays only the commit records after it.
//! Decoding checks every segment id, fill level, location and extent against the segment size
//! the checkpoint states.

use crate::codec::{Put, Reader, Source};
use crate::state::directory::{Arena, Directory};
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::log::record::{
    check_subtree_locs, decode_subtree, decode_union_state, encode_union_state, decode_table_def, encode_subtree, encode_table_def,
    for_each_disk_page, hex, MIN_NODE_BYTES,
};
use crate::state::tables::{Table, Tables};
use crate::log::segments::{
    check_segment_blocks, check_segment_id, check_used_blocks, check_value_extent, SegmentMeta,
    SegmentTable,
};
use sprig_core::trie::Node;
use sprig_core::Hasher;
use std::collections::BTreeMap;
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"SPCK";
const VERSION: u8 = 4;
/// The version before incremental unions: read as holding none.
const VERSION_WITHOUT_UNIONS: u8 = 3;

/// The file name of the checkpoint at commit `seq`.
pub fn checkpoint_file_name(seq: u64) -> String {
    format!("ckpt-{seq:020}.ckpt")
}

/// Parse a checkpoint file name.
pub fn parse_checkpoint_file_name(name: &str) -> Option<u64> {
    name.strip_prefix("ckpt-")?
        .strip_suffix(".ckpt")?
        .parse()
        .ok()
}

/// The state at one commit.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The commit the checkpoint holds.
    pub seq: u64,
    /// The WAL file holding the records after `seq`.
    pub wal_id: u32,
    /// Where in that file the record after `seq` starts.
    pub wal_offset: u64,
    /// The latest commit that was durable when the checkpoint was written (at least `seq`):
    /// a log that ends before it has lost acknowledged commits.
    pub durable_seq: u64,
    /// Segment accounting.
    pub table: SegmentTable,
    /// Every table's directory.
    pub tables: Tables,
}

impl Checkpoint {
    /// The whole file in memory (tests; [`Checkpoint::store`] streams it).
    #[cfg(test)]
    fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(128 + self.tables.total_len() as usize);
        self.encode_body(&mut out)?;
        let sum = crate::codec::checksum(&out);
        out.put_u64(sum);
        Ok(out)
    }

    /// Append the body: everything but the checksum that ends the file.
    fn encode_body(&self, out: &mut impl Put) -> Result<()> {
        out.put_bytes(MAGIC);
        out.put_u8(VERSION);
        out.put_u8(self.tables.hasher().id());
        out.put_u64(self.seq);
        out.put_u32(self.wal_id);
        out.put_u64(self.wal_offset);
        out.put_u64(self.durable_seq);
        out.put_u32(self.table.active);
        out.put_u32(self.table.segment_blocks);
        out.put_count(self.table.segments.len());
        for (id, meta) in &self.table.segments {
            out.put_u32(*id);
            out.put_u32(meta.used_blocks);
        }
        out.put_count(self.table.values.len());
        for (l, (blocks, table, key)) in &self.table.values {
            out.put_u64(*l);
            out.put_u32(*blocks);
            out.put_u32(*table);
            out.put_bytes(key);
        }
        encode_tables(&self.tables, out)
    }

    /// Decode the bytes of checkpoint file `name` (public for the fuzzers); every check
    /// failure is `Error::Corruption` naming `name`.
    pub fn decode(
        name: &str,
        bytes: &[u8],
        arena: &Arc<Arena>,
        hasher: Hasher,
    ) -> Result<Checkpoint> {
        let body = crate::log::checked_body(name, "checkpoint", bytes, 0)?;
        Checkpoint::decode_body(name, &mut Reader::new(body), arena, hasher)
    }

    /// Decode a checkpoint's body (all but its checksum) from `r`.
    fn decode_body(
        name: &str,
        r: &mut impl Source,
        arena: &Arc<Arena>,
        hasher: Hasher,
    ) -> Result<Checkpoint> {
        let bad = |at: usize, what: &str| Error::corruption(name, at as u64, what);
        let de = |e: crate::codec::DecodeError| bad(e.at, e.what);
        if &r.array::<4>().map_err(de)? != MAGIC {
            return Err(bad(0, "not a checkpoint (bad magic)"));
        }
        let version = r.u8().map_err(de)?;
        if version != VERSION && version != VERSION_WITHOUT_UNIONS {
            return Err(bad(4, "checkpoint of an unknown version"));
        }
        let id = r.u8().map_err(de)?;
        if id != hasher.id() {
            return Err(bad(
                5,
                "checkpoint made with another hasher than the database's",
            ));
        }
        let seq = r.u64().map_err(de)?;
        let wal_id = r.u32().map_err(de)?;
        let wal_offset = r.u64().map_err(de)?;
        let durable_seq = r.u64().map_err(de)?;
        if durable_seq < seq {
            return Err(bad(
                0,
                "checkpoint claims fewer durable commits than it holds",
            ));
        }
        let at = r.position();
        let active = r.u32().map_err(de)?;
        check_segment_id(active).map_err(|what| bad(at, what))?;
        let at = r.position();
        let segment_blocks = r.u32().map_err(de)?;
        check_segment_blocks(segment_blocks).map_err(|what| bad(at, what))?;
        let n = r.count(8).map_err(de)?;
        let mut segments = BTreeMap::new();
        for _ in 0..n {
            let at = r.position();
            let id = r.u32().map_err(de)?;
            let used_blocks = r.u32().map_err(de)?;
            check_segment_id(id)
                .and_then(|()| check_used_blocks(used_blocks, segment_blocks))
                .map_err(|what| bad(at, what))?;
            segments.insert(
                id,
                SegmentMeta {
                    used_blocks,
                    ..SegmentMeta::default()
                },
            );
        }
        let n = r.count(8 + 4 + 4 + 32).map_err(de)?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.position();
            let (l, blocks) = (r.u64().map_err(de)?, r.u32().map_err(de)?);
            check_value_extent(l, blocks, segment_blocks).map_err(|what| bad(at, what))?;
            values.push((l, blocks, r.u32().map_err(de)?, r.array().map_err(de)?));
        }
        let tables = decode_tables(r, arena, hasher, segment_blocks, version == VERSION, &bad)?;
        r.finish().map_err(de)?;
        if values
            .iter()
            .any(|(_, _, t, _)| tables.dir(*t).is_none())
        {
            return Err(bad(0, "checkpoint holds a value record of no table"));
        }
        let mut table = SegmentTable {
            segments,
            values: Default::default(),
            active,
            segment_blocks,
            live_pages: BTreeMap::new(),
            held: Default::default(),
        };
        for (_, dir) in tables.dirs() {
            for_each_disk_page(&dir.tree(), &mut |l| table.add_pages(l, 1));
        }
        for (l, blocks, t, key) in values {
            table.value_written(l, blocks, t, key);
        }
        Ok(Checkpoint {
            seq,
            wal_id,
            wal_offset,
            durable_seq,
            table,
            tables,
        })
    }

    /// Write the checkpoint atomically (temporary file, sync, rename, directory sync), a
    /// piece at a time: no copy of the whole file is held in memory.
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        crate::log::install_streamed(
            storage,
            &checkpoint_file_name(self.seq),
            ("checkpoint.tmp_written", "checkpoint.renamed"),
            &[],
            &mut |w| self.encode_body(w),
        )
    }

    /// Load the checkpoint with sequence number `seq`, reading its file a piece at a time (the
    /// directory is built as the file is read: no copy of the file is held). The checksum is
    /// checked over the whole file whatever decoding found, and a mismatch is reported first.
    pub fn load(
        storage: &dyn Storage,
        seq: u64,
        arena: &Arc<Arena>,
        hasher: Hasher,
    ) -> Result<Checkpoint> {
        let name = checkpoint_file_name(seq);
        let file = crate::log::open_existing(storage, &name)?;
        let cp = crate::log::decode_streamed(file.as_ref(), &name, "checkpoint", 0, |r| {
            Checkpoint::decode_body(&name, r, arena, hasher)
        })?;
        if cp.seq != seq {
            return Err(Error::corruption(
                &name,
                0,
                "checkpoint holds another commit than its name says",
            ));
        }
        Ok(cp)
    }
}

/// Append every table of `tables` (descriptions, roots, entry counts, directories) and their
/// union states: the part of a checkpoint that a named snapshot stores too.
pub(crate) fn encode_tables(tables: &Tables, out: &mut impl Put) -> Result<()> {
    out.put_u32(tables.next_id());
    out.put_count(tables.count());
    for (id, dir) in tables.dirs() {
        let def = tables
            .def(id)
            .ok_or_else(|| Error::internal("a table without a description"))?;
        encode_table_def(&def, out);
        out.put_bytes(&dir.root_node());
        out.put_u64(dir.len());
        encode_subtree(&dir.tree(), out).map_err(|e| {
            Error::internal(format!("cannot save an unwritten version: {e}"))
        })?;
    }
    let unions: Vec<_> = tables.unions().collect();
    out.put_count(unions.len());
    for (id, state) in unions {
        out.put_u32(id);
        encode_union_state(state, out).map_err(|e| {
            Error::internal(format!("cannot save an unwritten version: {e}"))
        })?;
    }
    Ok(())
}

/// Decode what [`encode_tables`] wrote (`with_unions`: whether union states follow), checking
/// every location against `segment_blocks`, each directory against its stated root and entry
/// count, and that the default table comes first; `bad` names where a check failed.
pub(crate) fn decode_tables(
    r: &mut impl Source,
    arena: &Arc<Arena>,
    hasher: Hasher,
    segment_blocks: u32,
    with_unions: bool,
    bad: &dyn Fn(usize, &str) -> Error,
) -> Result<Tables> {
    let de = |e: crate::codec::DecodeError| bad(e.at, e.what);
    let next_id = r.u32().map_err(de)?;
    let n = r.count(4 + 2 + 1 + 32 + 8 + MIN_NODE_BYTES).map_err(de)?;
    let mut default = None;
    let mut others = Vec::new();
    for i in 0..n {
        let at = r.position();
        let def = decode_table_def(r).map_err(de)?;
        let root: Node = r.array().map_err(de)?;
        let entries = r.u64().map_err(de)?;
        let tree = decode_subtree(r, arena, hasher, 0).map_err(de)?;
        check_subtree_locs(&tree, segment_blocks).map_err(|what| bad(at, &what))?;
        let dir = Directory::from_root(hasher, tree);
        if dir.root_node() != root {
            return Err(bad(
                at,
                &format!(
                    "stored directory of table {:?} hashes to {} but states root {}",
                    def.name,
                    hex(&dir.root_node()),
                    hex(&root)
                ),
            ));
        }
        if dir.len() != entries {
            return Err(bad(
                at,
                "stored entry count disagrees with its directory",
            ));
        }
        if i == 0 {
            if def != Tables::default_def() {
                return Err(bad(at, "stored tables do not start with the default table"));
            }
            default = Some(dir);
        } else {
            others.push(Table {
                def: Arc::new(def),
                dir,
            });
        }
    }
    let mut unions = Vec::new();
    if with_unions {
        let n = r.count(4 + 4 + 1 + 8 + 4).map_err(de)?;
        for _ in 0..n {
            let at = r.position();
            let id = r.u32().map_err(de)?;
            let state = decode_union_state(r, arena, hasher).map_err(de)?;
            for dir in &state.inputs {
                check_subtree_locs(&dir.tree(), segment_blocks)
                    .map_err(|what| bad(at, &what))?;
            }
            unions.push((id, state));
        }
    }
    let default = default.ok_or_else(|| bad(0, "stored tables hold no default table"))?;
    Tables::from_parts(default, others, next_id, unions).map_err(|e| bad(0, &e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::checksum;
    use crate::state::directory::{PageLoc, PageRef, Subtree};
    use crate::io::MemoryStorage;
    use crate::log::segments::loc;
    use crate::state::prefix::Prefix;
    use sprig_core::trie::KeyPath;

    fn sample(hasher: Hasher) -> Checkpoint {
        sample_at(hasher, [loc(2, 0), loc(1, 2), loc(1, 3)])
    }

    /// A checkpoint of three pages at `locs`.
    fn sample_at(hasher: Hasher, locs: [u64; 3]) -> Checkpoint {
        let arena = Arena::new();
        let page = |l: u64, count: u32, fill: u8| {
            let mut node = [fill; 32];
            node[0] = if count == 1 { 0x80 } else { 0x10 };
            Subtree::page(
                &arena,
                &PageRef {
                    loc: PageLoc::Disk(l),
                    checksum: l * 7,
                    node,
                    count,
                },
            )
        };
        let dir = Directory::empty(&arena, hasher)
            .replace(vec![(
                Prefix::root(),
                Subtree::branch(
                    hasher,
                    page(locs[0], 5, 1),
                    Subtree::branch(hasher, page(locs[1], 1, 2), page(locs[2], 9, 3)),
                ),
            )])
            .unwrap();
        Checkpoint {
            seq: 12,
            wal_id: 3,
            wal_offset: 999,
            durable_seq: 14,
            table: SegmentTable::new(256),
            tables: Tables::only_default(dir),
        }
    }

    #[test]
    fn round_trip_and_bit_flips_are_caught() {
        let h = Hasher::Blake3;
        let s = MemoryStorage::new();
        let cp = sample(h);
        cp.store(&s).unwrap();
        let back = Checkpoint::load(&s, 12, &Arena::new(), h).unwrap();
        assert_eq!(
            back.tables.default_dir().root_node(),
            cp.tables.default_dir().root_node()
        );
        assert_eq!(back.tables.default_dir().len(), 15);
        assert_eq!(back.wal_offset, 999);
        assert_eq!(back.table.segments[&1].live_page_blocks, 2);
        assert_eq!(back.table.segments[&2].live_page_blocks, 1);
        let bytes = cp.encode().unwrap();
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(Checkpoint::decode("c", &b, &Arena::new(), h).is_err(), "bit {i}");
        }
        assert!(Checkpoint::load(&s, 12, &Arena::new(), Hasher::Sha256).is_err());
    }

    /// A checkpoint larger than one read of the stream is written and loaded piece by piece
    /// to the same directory, and a flipped bit in a later piece is still a checksum mismatch.
    #[test]
    fn a_checkpoint_larger_than_a_read_loads_in_pieces() {
        fn build(arena: &Arc<Arena>, h: Hasher, depth: u32, i: u64) -> Subtree {
            if depth == 15 {
                let mut node = [7u8; 32];
                node[0] = 0x10;
                node[1..9].copy_from_slice(&i.to_le_bytes());
                return Subtree::page(
                    arena,
                    &PageRef {
                        loc: PageLoc::Disk(loc(1 + (i / 200) as u32, (i % 200) as u32)),
                        checksum: i,
                        node,
                        count: 3,
                    },
                );
            }
            Subtree::branch(h, build(arena, h, depth + 1, 2 * i), build(arena, h, depth + 1, 2 * i + 1))
        }
        let h = Hasher::Blake3;
        let arena = Arena::new();
        let dir = Directory::from_root(h, build(&arena, h, 0, 0));
        let cp = Checkpoint {
            seq: 5,
            wal_id: 1,
            wal_offset: 0,
            durable_seq: 5,
            table: SegmentTable::new(256),
            tables: Tables::only_default(dir),
        };
        let s = MemoryStorage::new();
        cp.store(&s).unwrap();
        let name = checkpoint_file_name(5);
        let file = s
            .open(&name, crate::io::OpenOptions { create: false, direct: false })
            .unwrap();
        let len = file.size().unwrap() as usize;
        assert!(len > 3 * crate::codec::STREAM_CHUNK / 2, "{len} bytes");
        // Written a piece at a time, the file holds what the encoding in memory holds.
        let mut whole = vec![0u8; len];
        file.read_at(&mut whole, 0).unwrap();
        assert!(whole == cp.encode().unwrap(), "the streamed file differs");
        let back = Checkpoint::load(&s, 5, &Arena::new(), h).unwrap();
        assert_eq!(back.tables.default_dir().root_node(), cp.tables.default_dir().root_node());
        assert_eq!(back.tables.default_dir().len(), 3 << 15);
        assert_eq!(back.table.segments[&1].live_page_blocks, 200);
        // One bit flipped in the second piece.
        let at = crate::codec::STREAM_CHUNK as u64 + 1000;
        let mut b = [0u8; 1];
        file.read_at(&mut b, at).unwrap();
        file.write_at(&[b[0] ^ 4], at).unwrap();
        let e = Checkpoint::load(&s, 5, &Arena::new(), h).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains("checksum mismatch"), "{e}");
    }

    /// A checkpoint whose checksum is right but whose table or directory names what no commit
    /// writes: decoding it is corruption (before, a segment id of `u32::MAX` overflowed the
    /// next allocation, and pages past a segment were served from whatever lay there).
    #[test]
    fn impossible_segments_and_locations_are_corruption() {
        let h = Hasher::Blake3;
        let filled = |used_blocks| SegmentMeta {
            used_blocks,
            ..SegmentMeta::default()
        };
        let key: KeyPath = [9u8; 32];
        type Craft = Box<dyn Fn(&mut Checkpoint)>;
        let cases: Vec<(&str, Craft)> = vec![
            ("segment size 0", Box::new(|c| c.table.segment_blocks = 0)),
            (
                "segment size 2^31",
                Box::new(|c| c.table.segment_blocks = 1 << 31),
            ),
            ("active segment 0", Box::new(|c| c.table.active = 0)),
            (
                "active segment u32::MAX",
                Box::new(|c| c.table.active = u32::MAX),
            ),
            (
                "segment id u32::MAX",
                Box::new(move |c| {
                    c.table.segments.insert(u32::MAX, filled(1));
                }),
            ),
            (
                "segment filled past its size",
                Box::new(move |c| {
                    c.table.segments.insert(3, filled(u32::MAX));
                }),
            ),
            (
                "value record in segment 0",
                Box::new(move |c| {
                    c.table.values.insert(loc(0, 4), (1, 0, key));
                }),
            ),
            (
                "value record crossing its segment's end",
                Box::new(move |c| {
                    c.table.values.insert(loc(1, 250), (7, 0, key));
                }),
            ),
            (
                "value record of 0 blocks",
                Box::new(move |c| {
                    c.table.values.insert(loc(1, 20), (0, 0, key));
                }),
            ),
            (
                "page past its segment",
                Box::new(move |c| *c = sample_at(h, [loc(2, 0), loc(1, 256), loc(1, 3)])),
            ),
        ];
        assert!(Checkpoint::decode("c", &sample(h).encode().unwrap(), &Arena::new(), h).is_ok());
        for (what, craft) in cases {
            let mut cp = sample(h);
            craft(&mut cp);
            let e = Checkpoint::decode("c", &cp.encode().unwrap(), &Arena::new(), h).err();
            assert!(
                e.as_ref().is_some_and(Error::is_corruption),
                "{what}: {e:?}"
            );
        }
        // A page in segment 0, crafted in the bytes: the node store cannot hold one in memory
        // (it takes segment 0 for a page held in memory).
        let mut bytes = sample_at(h, [loc(2, 0), loc(1, 77), loc(1, 3)]).encode().unwrap();
        let body = bytes.len() - 8;
        let at = bytes[..body]
            .windows(8)
            .position(|w| w == loc(1, 77).to_le_bytes())
            .unwrap();
        let original = bytes.clone();
        bytes[at..at + 8].copy_from_slice(&loc(0, 77).to_le_bytes());
        let sum = checksum(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum.to_le_bytes());
        let e = Checkpoint::decode("c", &bytes, &Arena::new(), h).err();
        assert!(
            e.as_ref().is_some_and(|e| e.is_corruption() && e.to_string().contains("segment 0")),
            "{e:?}"
        );
        // So are a page past the largest segment and one with more entries than a page holds
        // (the node store keeps the count in the block index's unused bits).
        let craft = |at: usize, with: &[u8]| {
            let mut b = original.clone();
            b[at..at + with.len()].copy_from_slice(with);
            let sum = checksum(&b[..body]);
            b[body..].copy_from_slice(&sum.to_le_bytes());
            Checkpoint::decode("c", &b, &Arena::new(), h).err()
        };
        let max_blocks = crate::log::segments::MAX_SEGMENT_BLOCKS;
        let e = craft(at, &loc(1, max_blocks).to_le_bytes());
        assert!(
            e.as_ref().is_some_and(|e| e.is_corruption() && e.to_string().contains("past the largest segment")),
            "{e:?}"
        );
        let too_many = crate::state::page::MAX_PAGE_ENTRIES as u32 + 1;
        let e = craft(at + 8 + 8 + 32, &too_many.to_le_bytes());
        assert!(
            e.as_ref().is_some_and(|e| e.is_corruption() && e.to_string().contains("more entries")),
            "{e:?}"
        );
    }
}
