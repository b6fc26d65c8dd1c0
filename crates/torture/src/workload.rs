//! The workload every torture mode runs: the database options, the key universe, random
//! batches with small values and value-log values, and the acknowledgement log through which a
//! writer child tells its parent what it committed.
//!
//! The acknowledgement log is an append-only file of records `[u32 length][body]`. Before a
//! commit starts the child appends `Begin` (the sequence number it expects and the whole
//! batch); when the commit returns it appends `Ack` (sequence number and root); an explicit
//! clean that finds nothing to do appends `Cancel`. Each record is handed to the kernel in one
//! buffer before the next step, so a SIGKILL or abort of the child never loses a record the
//! child finished writing (the page cache outlives the process; this tool does not simulate a
//! machine crash, which is the fault-injecting backend's job). A record cut short at the end
//! was being written when the child died: the commit it announces never started.

use crate::error::TortureError;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sprig::{Hasher, KeyPath, Node, Options};
use std::io::Write;
use std::path::Path;

/// Values above this many bytes go to the value log (the engine's inline limit).
pub const INLINE_VALUE_MAX_BYTES: usize = 1024;
/// The largest value a torture workload writes.
pub const MAX_VALUE_BYTES_LIMIT: usize = 1 << 20;
/// The largest batch a torture workload commits.
pub const MAX_BATCH_OPS_LIMIT: usize = 10_000;
/// The largest acknowledgement record accepted when reading a log back.
const MAX_RECORD_BYTES: usize = 1 << 30;

const TAG_BEGIN: u8 = 1;
const TAG_ACK: u8 = 2;
const TAG_CANCEL: u8 = 3;
const OP_DELETE: u8 = 0;
const OP_PUT: u8 = 1;

/// The options of every database the tool makes: small segments and early checkpoints, so
/// a short run rotates segments and logs, writes checkpoints and cleans; checkpoints are
/// written on a background thread, so kills also land while one runs beside the commits.
pub fn db_options() -> Options {
    Options {
        hasher: Some(Hasher::Blake3),
        page_cache_bytes: 8 << 20,
        segment_bytes: 1 << 20,
        checkpoint_log_bytes: 256 << 10,
        background_checkpoints: true,
        ..Options::default()
    }
}

/// One change of a batch: a put (`Some`) or a delete (`None`).
pub type Op = (KeyPath, Option<Vec<u8>>);

/// The shape of a workload.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Keys are drawn from this many.
    pub keys: u64,
    /// The most changes in one batch.
    pub max_batch_ops: usize,
    /// The largest value, in bytes.
    pub max_value_bytes: usize,
    /// Percent of puts whose value goes to the value log (above 1,024 bytes).
    pub big_value_percent: u32,
}

impl Shape {
    /// Refuse shapes the workload cannot produce.
    pub fn validate(&self) -> Result<(), TortureError> {
        if self.keys == 0 || self.max_batch_ops == 0 || self.max_batch_ops > MAX_BATCH_OPS_LIMIT {
            return Err(TortureError::Usage(format!(
                "need at least one key and a batch size between 1 and {MAX_BATCH_OPS_LIMIT}"
            )));
        }
        if self.max_value_bytes > MAX_VALUE_BYTES_LIMIT {
            return Err(TortureError::Usage(format!(
                "values are at most {MAX_VALUE_BYTES_LIMIT} bytes"
            )));
        }
        if self.big_value_percent > 100 {
            return Err(TortureError::Usage(
                "big-value percent is at most 100".into(),
            ));
        }
        Ok(())
    }

    /// Key number `i` of the universe. Every 64th key differs from the one before it in the
    /// last bit only, so pages split down to the deepest levels.
    pub fn key(&self, i: u64) -> KeyPath {
        if i % 64 == 63 {
            let mut k = Hasher::Blake3.hash_value(&(i - 1).to_le_bytes());
            k[31] ^= 1;
            k
        } else {
            Hasher::Blake3.hash_value(&i.to_le_bytes())
        }
    }

    /// A random key of the universe.
    pub fn random_key(&self, rng: &mut ChaCha8Rng) -> KeyPath {
        self.key(rng.gen_range(0..self.keys))
    }

    /// A random value: small and inline, or (`big_value_percent` of the time) for the value
    /// log.
    pub fn value(&self, rng: &mut ChaCha8Rng) -> Vec<u8> {
        let big = self.max_value_bytes > INLINE_VALUE_MAX_BYTES
            && rng.gen_range(0..100) < self.big_value_percent;
        let len = if big {
            rng.gen_range(INLINE_VALUE_MAX_BYTES + 1..=self.max_value_bytes)
        } else {
            rng.gen_range(0..=self.max_value_bytes.min(128))
        };
        let mut v = vec![0u8; len];
        rng.fill(&mut v[..]);
        v
    }

    /// A random batch: mostly puts, some deletes.
    pub fn batch(&self, rng: &mut ChaCha8Rng) -> Vec<Op> {
        let n = rng.gen_range(1..=self.max_batch_ops);
        (0..n)
            .map(|_| {
                let key = self.random_key(rng);
                if rng.gen_range(0..100) < 20 {
                    (key, None)
                } else {
                    (key, Some(self.value(rng)))
                }
            })
            .collect()
    }
}

/// One record of the acknowledgement log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckRecord {
    /// A commit is about to start: the sequence number it will get and its changes (empty
    /// for an explicit clean).
    Begin {
        /// The expected sequence number.
        seq: u64,
        /// The changes, in order.
        ops: Vec<Op>,
    },
    /// The commit returned successfully.
    Ack {
        /// Its sequence number.
        seq: u64,
        /// The root it returned.
        root: Node,
    },
    /// The announced commit did not happen (a clean with nothing to do).
    Cancel {
        /// The announced sequence number.
        seq: u64,
    },
}

impl AckRecord {
    /// The record framed for the log.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        match self {
            AckRecord::Begin { seq, ops } => {
                body.push(TAG_BEGIN);
                body.extend_from_slice(&seq.to_le_bytes());
                body.extend_from_slice(&(ops.len() as u32).to_le_bytes());
                for (key, value) in ops {
                    body.extend_from_slice(key);
                    match value {
                        None => body.push(OP_DELETE),
                        Some(v) => {
                            body.push(OP_PUT);
                            body.extend_from_slice(&(v.len() as u32).to_le_bytes());
                            body.extend_from_slice(v);
                        }
                    }
                }
            }
            AckRecord::Ack { seq, root } => {
                body.push(TAG_ACK);
                body.extend_from_slice(&seq.to_le_bytes());
                body.extend_from_slice(root);
            }
            AckRecord::Cancel { seq } => {
                body.push(TAG_CANCEL);
                body.extend_from_slice(&seq.to_le_bytes());
            }
        }
        let mut out = (body.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Append the record to the log in one write.
    pub fn append(&self, log: &mut std::fs::File) -> Result<(), TortureError> {
        log.write_all(&self.encode())
            .map_err(|e| TortureError::io("appending to the acknowledgement log", e))
    }
}

/// A little-endian cursor over a log body.
struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TortureError> {
        if n > self.bytes.len() {
            return Err(TortureError::Log("record body too short".into()));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TortureError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u64(&mut self) -> Result<u64, TortureError> {
        self.array().map(u64::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32, TortureError> {
        self.array().map(u32::from_le_bytes)
    }
}

fn decode_body(body: &[u8]) -> Result<AckRecord, TortureError> {
    let mut c = Cursor { bytes: body };
    let tag = c.array::<1>()?[0];
    let seq = c.u64()?;
    let record = match tag {
        TAG_BEGIN => {
            let n = c.u32()? as usize;
            let mut ops = Vec::with_capacity(n.min(MAX_BATCH_OPS_LIMIT));
            for _ in 0..n {
                let key = c.array::<32>()?;
                match c.array::<1>()?[0] {
                    OP_DELETE => ops.push((key, None)),
                    OP_PUT => {
                        let len = c.u32()? as usize;
                        ops.push((key, Some(c.take(len)?.to_vec())));
                    }
                    other => return Err(TortureError::Log(format!("unknown op {other}"))),
                }
            }
            AckRecord::Begin { seq, ops }
        }
        TAG_ACK => AckRecord::Ack {
            seq,
            root: c.array()?,
        },
        TAG_CANCEL => AckRecord::Cancel { seq },
        other => return Err(TortureError::Log(format!("unknown record tag {other}"))),
    };
    if !c.bytes.is_empty() {
        return Err(TortureError::Log("trailing bytes in a record".into()));
    }
    Ok(record)
}

/// Every complete record of the log at `path`; a record cut short at the end is dropped (the
/// child died writing it). A missing file has no records.
pub fn read_ack_log(path: &Path) -> Result<Vec<AckRecord>, TortureError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TortureError::io("reading the acknowledgement log", e)),
    };
    let mut records = Vec::new();
    let mut rest = bytes.as_slice();
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        if len > MAX_RECORD_BYTES {
            return Err(TortureError::Log(format!("record of {len} bytes")));
        }
        let Some(body) = tail.get(..len) else {
            break;
        };
        records.push(decode_body(body)?);
        rest = &tail[len..];
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn records_round_trip_and_a_cut_tail_is_dropped() {
        let shape = Shape {
            keys: 100,
            max_batch_ops: 20,
            max_value_bytes: 5000,
            big_value_percent: 50,
        };
        shape.validate().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let records = vec![
            AckRecord::Begin {
                seq: 1,
                ops: shape.batch(&mut rng),
            },
            AckRecord::Ack {
                seq: 1,
                root: [9; 32],
            },
            AckRecord::Begin {
                seq: 2,
                ops: Vec::new(),
            },
            AckRecord::Cancel { seq: 2 },
        ];
        let mut bytes = Vec::new();
        for r in &records {
            bytes.extend_from_slice(&r.encode());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ack.log");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_ack_log(&path).unwrap(), records);
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(read_ack_log(&path).unwrap(), records[..3]);
        assert!(read_ack_log(&dir.path().join("missing"))
            .unwrap()
            .is_empty());
    }
}
