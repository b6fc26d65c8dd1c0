//! Little-endian encoding helpers for the engine's on-disk records ([`Put`], into a vector or
//! a file a piece at a time: [`StreamWriter`]), and readers over untrusted bytes ([`Source`]:
//! in memory, [`Reader`], or a file a piece at a time, [`StreamReader`]) that fail with a
//! [`DecodeError`] (converted to a corruption error naming the file and offset by the caller)
//! instead of ever reading out of bounds.

/// Why bytes could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} at byte {at}")]
pub struct DecodeError {
    /// What was wrong.
    pub what: &'static str,
    /// Where, relative to the start of the decoded structure.
    pub at: usize,
}

/// Untrusted bytes decoded in order, from a slice ([`Reader`]) or from a file read a piece at a
/// time ([`StreamReader`]): the primitives every decoder is written with.
pub trait Source {
    /// The next `n` bytes (a [`StreamReader`] takes at most [`STREAM_CHUNK`] at once).
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError>;

    /// The current position.
    fn position(&self) -> usize;

    /// Bytes not read yet.
    fn remaining(&self) -> usize;

    /// A decode error at the current position.
    fn error(&self, what: &'static str) -> DecodeError {
        DecodeError {
            what,
            at: self.position(),
        }
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A `u8`.
    fn u8(&mut self) -> Result<u8, DecodeError> {
        let [b] = self.array()?;
        Ok(b)
    }

    /// A little-endian `u16`.
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian `u32`.
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian `u64`.
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of items of at least `min_item_bytes` each, refused if the rest of the input
    /// cannot hold that many (so no allocation outgrows the input).
    fn count(&mut self, min_item_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| self.error("count too large"))?;
        if n > self.remaining() / min_item_bytes.max(1) {
            return Err(self.error("count larger than the input"));
        }
        Ok(n)
    }

    /// Fail unless every byte was read.
    fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(self.error("trailing bytes"))
        }
    }
}

/// A cursor over untrusted bytes in memory.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Read `bytes` from the start.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// The next `n` bytes, borrowed from the input.
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
}

impl Source for Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        // What a decoder takes at once must also work on a stream of the same bytes.
        debug_assert!(n <= STREAM_CHUNK, "a take of {n} bytes, more than a stream reads");
        self.slice(n)
    }

    fn position(&self) -> usize {
        self.at
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }
}

/// How much of a file a [`StreamReader`] reads at once, and the most one `take` may ask for.
pub const STREAM_CHUNK: usize = 1 << 20;

/// A cursor over the first `len` bytes of a file, read [`STREAM_CHUNK`] bytes at a time with
/// `read_at(buffer, offset)`, so decoding a file needs one chunk of memory instead of the file;
/// it keeps the checksum of every byte it has read.
pub struct StreamReader<'a> {
    read_at: &'a mut dyn FnMut(&mut [u8], u64) -> std::io::Result<()>,
    len: usize,
    /// Bytes read from the file and not yet taken: `buf[taken..]` starts at `at`.
    buf: Vec<u8>,
    taken: usize,
    at: usize,
    /// Bytes read from the file so far.
    read: usize,
    hasher: xxhash_rust::xxh3::Xxh3,
    /// The first read that failed (decoding then fails as truncated).
    failed: Option<std::io::Error>,
}

impl<'a> StreamReader<'a> {
    /// Read the first `len` bytes of a file through `read_at`.
    pub fn new(
        len: usize,
        read_at: &'a mut dyn FnMut(&mut [u8], u64) -> std::io::Result<()>,
    ) -> StreamReader<'a> {
        StreamReader {
            read_at,
            len,
            buf: Vec::new(),
            taken: 0,
            at: 0,
            read: 0,
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            failed: None,
        }
    }

    /// Read the next chunk after what is buffered; false once the file is read or a read fails.
    fn fill(&mut self) -> bool {
        let n = STREAM_CHUNK.min(self.len - self.read);
        if n == 0 || self.failed.is_some() {
            return false;
        }
        self.buf.drain(..self.taken);
        self.taken = 0;
        let start = self.buf.len();
        self.buf.resize(start + n, 0);
        match (self.read_at)(&mut self.buf[start..], self.read as u64) {
            Ok(()) => {
                self.hasher.update(&self.buf[start..]);
                self.read += n;
                true
            }
            Err(e) => {
                self.buf.truncate(start);
                self.failed = Some(e);
                false
            }
        }
    }

    /// The checksum ([`checksum`]) of all `len` bytes, reading what decoding left unread; or
    /// the error of a read that failed.
    pub fn checksum(mut self) -> std::io::Result<u64> {
        self.buf.clear();
        self.taken = 0;
        while self.fill() {
            self.buf.clear();
        }
        match self.failed {
            Some(e) => Err(e),
            None => Ok(self.hasher.digest()),
        }
    }
}

impl Source for StreamReader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.error("truncated"));
        }
        if n > STREAM_CHUNK {
            return Err(self.error("a field longer than a read of the stream"));
        }
        while self.buf.len() - self.taken < n {
            if !self.fill() {
                return Err(self.error("truncated (the file could not be read)"));
            }
        }
        let start = self.taken;
        self.taken += n;
        self.at += n;
        Ok(&self.buf[start..self.taken])
    }

    fn position(&self) -> usize {
        self.at
    }

    fn remaining(&self) -> usize {
        self.len - self.at
    }
}

/// Appending little-endian integers to a byte vector or a stream: an implementation appends
/// bytes, the rest is written with that.
pub trait Put {
    /// Append bytes as they are.
    fn put_bytes(&mut self, b: &[u8]);
    /// Append a `u8`.
    fn put_u8(&mut self, v: u8) {
        self.put_bytes(&[v]);
    }
    /// Append a little-endian `u16`.
    fn put_u16(&mut self, v: u16) {
        self.put_bytes(&v.to_le_bytes());
    }
    /// Append a little-endian `u32`.
    fn put_u32(&mut self, v: u32) {
        self.put_bytes(&v.to_le_bytes());
    }
    /// Append a little-endian `u64`.
    fn put_u64(&mut self, v: u64) {
        self.put_bytes(&v.to_le_bytes());
    }
    /// Append a count (as `u64`).
    fn put_count(&mut self, n: usize) {
        self.put_u64(n as u64);
    }
}

impl Put for Vec<u8> {
    fn put_bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// Appending to a file at increasing offsets through `write_at(bytes, offset)`, [`STREAM_CHUNK`]
/// bytes at a time, keeping the checksum of what was appended: an encoding of any size takes
/// one chunk of memory. The first failed write is kept and every later append ignored.
pub struct StreamWriter<'a> {
    write_at: &'a mut dyn FnMut(&[u8], u64) -> std::io::Result<()>,
    buf: Vec<u8>,
    written: u64,
    hasher: xxhash_rust::xxh3::Xxh3,
    failed: Option<std::io::Error>,
}

impl<'a> StreamWriter<'a> {
    /// Append from offset 0 through `write_at`.
    pub fn new(write_at: &'a mut dyn FnMut(&[u8], u64) -> std::io::Result<()>) -> StreamWriter<'a> {
        StreamWriter {
            write_at,
            buf: Vec::with_capacity(STREAM_CHUNK),
            written: 0,
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            failed: None,
        }
    }

    fn flush(&mut self) {
        if self.failed.is_none() && !self.buf.is_empty() {
            match (self.write_at)(&self.buf, self.written) {
                Ok(()) => {
                    self.hasher.update(&self.buf);
                    self.written += self.buf.len() as u64;
                }
                Err(e) => self.failed = Some(e),
            }
        }
        self.buf.clear();
    }

    /// Write what is buffered; the number of bytes written and their checksum
    /// ([`checksum`]), or the first write's error.
    pub fn finish(mut self) -> std::io::Result<(u64, u64)> {
        self.flush();
        match self.failed {
            Some(e) => Err(e),
            None => Ok((self.written, self.hasher.digest())),
        }
    }
}

impl Put for StreamWriter<'_> {
    fn put_bytes(&mut self, b: &[u8]) {
        if self.buf.len() + b.len() > STREAM_CHUNK {
            self.flush();
        }
        if self.failed.is_none() {
            self.buf.extend_from_slice(b);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of `n` records (a u8, a u64, a 5-byte array and a u32): 18 bytes each, so records
    /// straddle the stream's chunk boundaries.
    fn records(n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            out.put_u8(i as u8);
            out.put_u64(i as u64 * 0x9e37_79b9);
            out.extend_from_slice(&[i as u8 ^ 0x5a; 5]);
            out.put_u32(i as u32);
        }
        out
    }

    type Record = (u8, u64, [u8; 5], u32);

    fn decode_all(r: &mut impl Source, n: usize) -> Result<Vec<Record>, DecodeError> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push((r.u8()?, r.u64()?, r.array()?, r.u32()?));
        }
        r.finish()?;
        Ok(out)
    }

    /// A stream read in chunks decodes what the same bytes in memory decode, across chunk
    /// boundaries, reads each byte of the file once, and checksums all of it even when
    /// decoding stops early.
    #[test]
    fn a_stream_decodes_like_a_slice_and_checksums_the_whole() {
        let n = STREAM_CHUNK * 2 / 18 + 77;
        let bytes = records(n);
        let mut read = 0usize;
        let mut counted = |buf: &mut [u8], at| {
            read += buf.len();
            buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let mut s = StreamReader::new(bytes.len(), &mut counted);
        assert_eq!(decode_all(&mut s, n), decode_all(&mut Reader::new(&bytes), n));
        assert_eq!(s.checksum().unwrap(), checksum(&bytes));
        assert_eq!(read, bytes.len());
        // Stopping after a few records still checksums everything.
        let mut copy = |buf: &mut [u8], at| {
            buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let mut s = StreamReader::new(bytes.len(), &mut copy);
        assert!(decode_all(&mut s, 3).is_err(), "trailing bytes");
        assert_eq!(s.checksum().unwrap(), checksum(&bytes));
        // Past the end is truncation at the right place.
        let mut s = StreamReader::new(10, &mut copy);
        assert_eq!(s.take(9).map(<[u8]>::len), Ok(9));
        assert_eq!(s.take(2).unwrap_err(), DecodeError { what: "truncated", at: 9 });
    }

    /// A stream writer appends exactly what a vector would hold, in chunks at increasing
    /// offsets, with the checksum of the whole; a failed write is returned, not dropped.
    #[test]
    fn a_stream_writer_writes_what_a_vector_holds() {
        let bytes = records(STREAM_CHUNK * 2 / 18 + 5);
        let mut file = Vec::new();
        let mut append = |b: &[u8], at| {
            assert_eq!(at as usize, file.len(), "appends in order");
            assert!(b.len() <= STREAM_CHUNK);
            file.extend_from_slice(b);
            Ok(())
        };
        let mut w = StreamWriter::new(&mut append);
        for piece in bytes.chunks(18) {
            w.put_bytes(piece);
        }
        assert_eq!(w.finish().unwrap(), (bytes.len() as u64, checksum(&bytes)));
        assert_eq!(file, bytes);
        let mut full = |_: &[u8], _| Err(std::io::Error::other("disk full"));
        let mut w = StreamWriter::new(&mut full);
        w.put_bytes(&bytes);
        w.put_u64(1);
        assert_eq!(w.finish().unwrap_err().to_string(), "disk full");
    }

    /// A read that fails ends decoding with an error, and the checksum reports the I/O error
    /// instead of a digest of bytes never read.
    #[test]
    fn a_failed_read_is_an_error_not_a_digest() {
        let bytes = records(STREAM_CHUNK / 18 * 3);
        let mut first_only = |buf: &mut [u8], at| {
            if at > 0 {
                return Err(std::io::Error::other("bad sector"));
            }
            buf.copy_from_slice(&bytes[..buf.len()]);
            Ok(())
        };
        let mut s = StreamReader::new(bytes.len(), &mut first_only);
        let e = decode_all(&mut s, bytes.len() / 18).unwrap_err();
        assert!(e.at <= STREAM_CHUNK, "{e:?}");
        assert_eq!(s.checksum().unwrap_err().to_string(), "bad sector");
    }
}
