//! Byte-level reading and writing for the proof formats: little-endian integers, fixed arrays,
//! and a reader that can only fail with an error, never read out of bounds.

use crate::error::ProofError;
use alloc::vec::Vec;

/// A cursor over untrusted bytes.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProofError> {
        if self.bytes.len() < n {
            return Err(ProofError::Truncated { what });
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, ProofError> {
        let [b] = self.array::<1>(what)?;
        Ok(b)
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, ProofError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, ProofError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProofError> {
        self.take(n, what)
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], ProofError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// Check the magic bytes and the format version.
    pub(crate) fn header(
        &mut self,
        magic: &[u8; 4],
        expected: &'static str,
        version: u8,
    ) -> Result<(), ProofError> {
        let found: [u8; 4] = self.array(expected)?;
        if &found != magic {
            return Err(ProofError::BadMagic { expected });
        }
        let v = self.u8("format version")?;
        if v != version {
            return Err(ProofError::UnsupportedVersion { found: v });
        }
        Ok(())
    }

    /// A count of items of at least `min_item_bytes` each, checked against a limit and against
    /// what the remaining input could possibly hold, so no allocation outgrows the input.
    pub(crate) fn count(
        &mut self,
        what: &'static str,
        limit: u32,
        min_item_bytes: usize,
    ) -> Result<usize, ProofError> {
        let n = self.u32(what)?;
        if n > limit {
            return Err(ProofError::TooLarge {
                what,
                found: u64::from(n),
                limit: u64::from(limit),
            });
        }
        let n = n as usize;
        let fits = self.remaining() / min_item_bytes.max(1);
        if n > fits {
            return Err(ProofError::Truncated { what });
        }
        Ok(n)
    }

    pub(crate) fn finish(self) -> Result<(), ProofError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(ProofError::TrailingBytes {
                count: self.bytes.len(),
            })
        }
    }
}

/// Append the magic bytes and format version.
pub(crate) fn write_header(out: &mut Vec<u8>, magic: &[u8; 4], version: u8) {
    out.extend_from_slice(magic);
    out.push(version);
}

/// Append a count as a little-endian `u32`. Counts come from in-memory structures whose limits
/// are far below `u32::MAX`; saturating keeps the encoder total anyway, and the decoder rejects
/// the result.
pub(crate) fn write_count(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}
