//! Helpers shared by Sprig's fuzz targets: a cursor that turns fuzz bytes into choices, a small
//! reference model built from them, and byte mutations of valid encodings. Nothing here may
//! panic on any input: a panic is what the fuzzers look for in the code under test.

use sprig::io::{MemoryStorage, OpenOptions, Storage};
use sprig_core::{Hasher, KeyPath, ReferenceModel, ValueHash};

/// Choices drawn from fuzz input; when the input runs out, every choice is zero.
pub struct Choices<'a> {
    bytes: &'a [u8],
}

impl<'a> Choices<'a> {
    /// Draw choices from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Choices<'a> {
        Choices { bytes }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((b, rest)) => {
                self.bytes = rest;
                *b
            }
            None => 0,
        }
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            usize::from(self.u16()) % n
        }
    }

    /// The next `n` bytes (fewer at the end of the input).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.bytes.len());
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        head
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(self.bytes.len())
    }
}

/// One of the hashers.
pub fn hasher(c: &mut Choices<'_>) -> Hasher {
    match c.byte() % 3 {
        0 => Hasher::Blake3,
        1 => Hasher::Sha256,
        _ => Hasher::Keccak256,
    }
}

/// Key number `i` of a small universe; odd numbers share a long prefix with their neighbour.
pub fn key(i: u8) -> KeyPath {
    let mut k = Hasher::Blake3.hash_value(&[i & 0xfe]);
    k[31] ^= i & 1;
    k
}

/// A model of up to 16 keys from the small universe, with short values.
pub fn model(c: &mut Choices<'_>, hasher: Hasher) -> ReferenceModel {
    let mut m = ReferenceModel::new(hasher);
    for _ in 0..c.byte() % 16 {
        let k = key(c.byte() % 32);
        let len = usize::from(c.byte() % 8);
        m.insert(k, c.take(len).to_vec());
    }
    m
}

/// Apply up to 4 mutations drawn from `c` to `bytes`: flip a bit, set a byte, truncate, or
/// append. Returns whether anything changed.
pub fn mutate(c: &mut Choices<'_>, bytes: &mut Vec<u8>) -> bool {
    let before = bytes.clone();
    for _ in 0..c.byte() % 5 {
        let at = c.below(bytes.len().max(1));
        match c.byte() % 4 {
            0 => {
                let bit = c.byte() % 8;
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 1 << bit;
                }
            }
            1 => {
                let v = c.byte();
                if let Some(b) = bytes.get_mut(at) {
                    *b = v;
                }
            }
            2 => bytes.truncate(at),
            _ => {
                let n = usize::from(c.byte() % 40);
                bytes.extend_from_slice(c.take(n));
            }
        }
    }
    *bytes != before
}

/// A hasher, a model, and up to 5 distinct sorted keys of the universe to prove.
pub fn proof_setup(c: &mut Choices<'_>) -> (Hasher, ReferenceModel, Vec<KeyPath>) {
    let h = hasher(c);
    let m = model(c, h);
    let mut keys: Vec<KeyPath> = (0..c.byte() % 6).map(|_| key(c.byte() % 32)).collect();
    keys.sort_unstable();
    keys.dedup();
    (h, m, keys)
}

/// Changes to some of `keys` (new value hash, or `None` to delete) and the model after them.
pub fn changes(
    c: &mut Choices<'_>,
    m: &ReferenceModel,
    keys: &[KeyPath],
) -> (Vec<(KeyPath, Option<ValueHash>)>, ReferenceModel) {
    let mut after = m.clone();
    let mut out = Vec::new();
    for k in keys {
        match c.byte() % 3 {
            0 => {
                let v = c.take(4).to_vec();
                out.push((*k, Some(m.hasher().hash_value(&v))));
                after.insert(*k, v);
            }
            1 => {
                out.push((*k, None));
                after.remove(k);
            }
            _ => {}
        }
    }
    (out, after)
}

/// An in-memory directory holding one file `name` with `bytes`.
pub fn memory_file(name: &str, bytes: &[u8]) -> MemoryStorage {
    let storage = MemoryStorage::new();
    let written = storage
        .open(
            name,
            OpenOptions {
                create: true,
                direct: false,
            },
        )
        .and_then(|f| f.write_at(bytes, 0));
    assert!(written.is_ok(), "memory storage refused a write");
    storage
}
