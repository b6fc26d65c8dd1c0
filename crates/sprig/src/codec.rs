//! Little-endian encoding helpers for the engine's on-disk records, and a reader over untrusted
//! bytes that fails with a [`DecodeError`] (converted to a corruption error naming the file and
//! offset by the caller) instead of ever reading out of bounds.

/// Why bytes could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} at byte {at}")]
pub struct DecodeError {
    /// What was wrong.
    pub what: &'static str,
    /// Where, relative to the start of the decoded structure.
    pub at: usize,
}

/// A cursor over untrusted bytes.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Read `bytes` from the start.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// The current position.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    /// A decode error at the current position.
    pub fn error(&self, what: &'static str) -> DecodeError {
        DecodeError { what, at: self.at }
    }

    /// The next `n` bytes.
    pub fn slice(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(self.error("length overflow"))?;
        let s = self
            .bytes
            .get(self.at..end)
            .ok_or(self.error("truncated"))?;
        self.at = end;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.slice(N)?);
        Ok(out)
    }

    /// A `u8`.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let [b] = self.array()?;
        Ok(b)
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of items of at least `min_item_bytes` each, refused if the rest of the input
    /// cannot hold that many (so no allocation outgrows the input).
    pub fn count(&mut self, min_item_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| self.error("count too large"))?;
        if n > self.remaining() / min_item_bytes.max(1) {
            return Err(self.error("count larger than the input"));
        }
        Ok(n)
    }

    /// Fail unless every byte was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(self.error("trailing bytes"))
        }
    }
}

/// Appending little-endian integers to a byte vector.
pub trait Put {
    /// Append a `u8`.
    fn put_u8(&mut self, v: u8);
    /// Append a little-endian `u16`.
    fn put_u16(&mut self, v: u16);
    /// Append a little-endian `u32`.
    fn put_u32(&mut self, v: u32);
    /// Append a little-endian `u64`.
    fn put_u64(&mut self, v: u64);
    /// Append a count (as `u64`).
    fn put_count(&mut self, n: usize);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_count(&mut self, n: usize) {
        self.put_u64(n as u64);
    }
}

/// The checksum of every record and page: xxh3-64.
pub fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Lowercase hex of bytes, as Sprig prints roots and keys.
///
/// ```
/// # fn main() -> sprig::Result<()> {
/// assert_eq!(sprig::hex(&[0x00, 0xab, 0x10]), "00ab10");
/// let db = sprig::Db::open_in_memory(sprig::Options::default())?;
/// assert_eq!(sprig::hex(&db.root()), "0".repeat(64)); // the empty root
/// # Ok(()) }
/// ```
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}
