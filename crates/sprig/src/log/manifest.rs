//! The manifest: the one small file that says "this directory is a Sprig database", with the
//! format version and the settings fixed at creation (hasher, segment size). Written once,
//! atomically (temporary file, sync, rename, directory sync), and checksummed.

use crate::codec::{checksum, Put, Reader, Source};
use crate::error::{Error, Result};
use crate::io::{OpenOptions, Storage};
use sprig_core::Hasher;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "MANIFEST";
const MAGIC: &[u8; 8] = b"SPRIGDB\0";
/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 2;
const BODY_BYTES: usize = 8 + 4 + 1 + 4 + 8;

/// The settings fixed when a database is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Manifest {
    /// The hasher of every root and proof.
    pub hasher: Hasher,
    /// The size of a segment file in 4 KiB blocks.
    pub segment_blocks: u32,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_secs: u64,
}

impl Manifest {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(BODY_BYTES + 8);
        out.extend_from_slice(MAGIC);
        out.put_u32(FORMAT_VERSION);
        out.put_u8(self.hasher.id());
        out.put_u32(self.segment_blocks);
        out.put_u64(self.created_unix_secs);
        let sum = checksum(&out);
        out.put_u64(sum);
        out
    }

    /// Decode the manifest's bytes (public for the fuzzers).
    pub fn decode(bytes: &[u8]) -> Result<Manifest> {
        let bad = |what: &str| Error::corruption(MANIFEST_FILE, 0, what);
        let body = bytes
            .get(..BODY_BYTES)
            .ok_or_else(|| bad("manifest is truncated"))?;
        let mut r = Reader::new(bytes);
        if &r.array::<8>().map_err(|_| bad("truncated"))? != MAGIC {
            return Err(bad("not a Sprig manifest (bad magic)"));
        }
        let version = r.u32().map_err(|_| bad("truncated"))?;
        let stored_sum = bytes
            .get(BODY_BYTES..BODY_BYTES + 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| bad("manifest is truncated"))?;
        if checksum(body) != stored_sum {
            return Err(bad("manifest checksum mismatch"));
        }
        if version != FORMAT_VERSION {
            return Err(Error::UnsupportedFormat {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let id = r.u8().map_err(|_| bad("truncated"))?;
        let hasher = Hasher::from_id(id).ok_or_else(|| bad("unknown hasher id"))?;
        let segment_blocks = r.u32().map_err(|_| bad("truncated"))?;
        let created_unix_secs = r.u64().map_err(|_| bad("truncated"))?;
        crate::log::segments::check_segment_blocks(segment_blocks).map_err(bad)?;
        Ok(Manifest {
            hasher,
            segment_blocks,
            created_unix_secs,
        })
    }

    /// Read the manifest, or `None` if the directory has none.
    pub fn load(storage: &dyn Storage) -> Result<Option<Manifest>> {
        let names = storage
            .list()
            .map_err(|e| Error::io("listing", "the database directory", e))?;
        if !names.iter().any(|n| n == MANIFEST_FILE) {
            return Ok(None);
        }
        let file = storage
            .open(
                MANIFEST_FILE,
                OpenOptions {
                    create: false,
                    direct: false,
                },
            )
            .map_err(|e| Error::io("opening", MANIFEST_FILE, e))?;
        let len = file
            .size()
            .map_err(|e| Error::io("reading", MANIFEST_FILE, e))?;
        let len = usize::try_from(len.min(4096)).unwrap_or(4096);
        let mut bytes = vec![0u8; len];
        file.read_at(&mut bytes, 0)
            .map_err(|e| Error::io("reading", MANIFEST_FILE, e))?;
        Manifest::decode(&bytes).map(Some)
    }

    /// Write the manifest atomically.
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        let tmp = "MANIFEST.tmp";
        let file = storage
            .open(
                tmp,
                OpenOptions {
                    create: true,
                    direct: false,
                },
            )
            .map_err(|e| Error::io("creating", tmp, e))?;
        let bytes = self.encode();
        file.set_len(0)
            .and_then(|_| file.write_at(&bytes, 0))
            .and_then(|_| file.sync())
            .map_err(|e| Error::io("writing", tmp, e))?;
        storage
            .rename(tmp, MANIFEST_FILE)
            .and_then(|_| storage.sync_dir())
            .map_err(|e| Error::io("installing", MANIFEST_FILE, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemoryStorage;

    #[test]
    fn round_trip_and_every_bit_flip_is_caught() {
        let s = MemoryStorage::new();
        let m = Manifest {
            hasher: Hasher::Sha256,
            segment_blocks: 4096,
            created_unix_secs: 1_700_000_000,
        };
        assert_eq!(Manifest::load(&s).unwrap(), None);
        m.store(&s).unwrap();
        assert_eq!(Manifest::load(&s).unwrap(), Some(m));
        let bytes = m.encode();
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(Manifest::decode(&b).is_err(), "flip of bit {i} not caught");
        }
    }
}
