//! Trie positions: a bit prefix of a key path. Every page and every directory node sits at
//! one; a position holds exactly the keys that start with its bits.

use sprig_core::trie::{bit_at, same_prefix, set_bit, KeyPath, KEY_BITS};

/// The key path right after `key` in key order, or `None` for the last one.
pub fn key_after(key: &KeyPath) -> Option<KeyPath> {
    let mut k = *key;
    for byte in k.iter_mut().rev() {
        let (b, carry) = byte.overflowing_add(1);
        *byte = b;
        if !carry {
            return Some(k);
        }
    }
    None
}

/// The key path right before `key` in key order, or `None` for the first one.
pub fn key_before(key: &KeyPath) -> Option<KeyPath> {
    let mut k = *key;
    for byte in k.iter_mut().rev() {
        let (b, borrow) = byte.overflowing_sub(1);
        *byte = b;
        if !borrow {
            return Some(k);
        }
    }
    None
}

/// The first `len` bits of a key path; the bits past `len` are always zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    bits: KeyPath,
    len: u16,
}

impl Prefix {
    /// The root position (no bits): the whole key space.
    pub const fn root() -> Prefix {
        Prefix {
            bits: [0u8; 32],
            len: 0,
        }
    }

    /// The position of the first `len` bits of `key` (`len` is capped at 256).
    pub fn of_key(key: &KeyPath, len: usize) -> Prefix {
        let len = len.min(KEY_BITS);
        let mut bits = [0u8; 32];
        for (i, (dst, src)) in bits.iter_mut().zip(key.iter()).enumerate() {
            let start = i * 8;
            if start + 8 <= len {
                *dst = *src;
            } else if start < len {
                *dst = src & (0xffu8 << (8 - (len - start)));
            }
        }
        Prefix {
            bits,
            len: len as u16,
        }
    }

    /// Rebuild a prefix from stored parts, refusing a length above 256 or stray bits past it.
    pub fn from_parts(bits: KeyPath, len: u16) -> Option<Prefix> {
        let p = Prefix::of_key(&bits, usize::from(len));
        (usize::from(len) <= KEY_BITS && p.bits == bits).then_some(p)
    }

    /// The number of bits: the depth of this position in the trie.
    pub fn depth(&self) -> usize {
        usize::from(self.len)
    }

    /// The number of bits as stored.
    pub fn len_u16(&self) -> u16 {
        self.len
    }

    /// Whether this is the root position.
    pub fn is_root(&self) -> bool {
        self.len == 0
    }

    /// Whether the prefix is a whole key path (it cannot be split further).
    pub fn is_full(&self) -> bool {
        self.depth() >= KEY_BITS
    }

    /// The bits, zero past the length.
    pub fn bits(&self) -> &KeyPath {
        &self.bits
    }

    /// Bit `i` of the prefix (`i` below the length).
    pub fn bit(&self, i: usize) -> bool {
        bit_at(&self.bits, i)
    }

    /// The child position on side `right`. The root of a full prefix has no children; asking
    /// for one returns the prefix itself.
    pub fn child(&self, right: bool) -> Prefix {
        if self.is_full() {
            return *self;
        }
        let mut bits = self.bits;
        set_bit(&mut bits, self.depth(), right);
        Prefix {
            bits,
            len: self.len + 1,
        }
    }

    /// The smallest key path after every key of this position, or `None` if no key follows
    /// (the position ends the key space).
    pub fn next_key(&self) -> Option<KeyPath> {
        let mut bits = self.bits;
        let mut depth = self.depth();
        while depth > 0 {
            let i = depth - 1;
            if bit_at(&bits, i) {
                set_bit(&mut bits, i, false);
                depth -= 1;
            } else {
                set_bit(&mut bits, i, true);
                return Some(bits);
            }
        }
        None
    }

    /// The greatest key path before every key of this position, or `None` if no key precedes
    /// it (the position starts the key space).
    pub fn prev_key(&self) -> Option<KeyPath> {
        key_before(&self.bits)
    }

    /// Whether `key` lies in this position's subtree.
    pub fn contains(&self, key: &KeyPath) -> bool {
        same_prefix(&self.bits, key, self.depth())
    }

    /// Whether `other` lies at or below this position.
    pub fn covers(&self, other: &Prefix) -> bool {
        other.len >= self.len && self.contains(&other.bits)
    }
}

impl std::fmt::Display for Prefix {
    /// The bits as a string of 0s and 1s (`<root>` for the root); long prefixes are shown as
    /// hex with the length.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.len == 0 {
            return f.write_str("<root>");
        }
        if self.depth() <= 64 {
            for i in 0..self.depth() {
                f.write_str(if self.bit(i) { "1" } else { "0" })?;
            }
            return Ok(());
        }
        for b in self.bits.iter().take(self.depth().div_ceil(8)) {
            write!(f, "{b:02x}")?;
        }
        write!(f, "/{}", self.len)
    }
}

impl std::fmt::Debug for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prefix({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_after_and_before_step_by_one_and_stop_at_the_ends() {
        let mut k = [0u8; 32];
        k[31] = 0xff;
        let mut next = [0u8; 32];
        next[30] = 1;
        assert_eq!(key_after(&k), Some(next));
        assert_eq!(key_before(&next), Some(k));
        assert_eq!(key_after(&[0xff; 32]), None);
        assert_eq!(key_before(&[0u8; 32]), None);
        let p = Prefix::of_key(&[0x80; 32], 1);
        assert_eq!(p.prev_key(), Some({
            let mut m = [0xff; 32];
            m[0] = 0x7f;
            m
        }));
        assert_eq!(Prefix::root().prev_key(), None);
    }

    #[test]
    fn children_and_containment() {
        let root = Prefix::root();
        let l = root.child(false);
        let r = root.child(true);
        let mut k = [0u8; 32];
        assert!(root.contains(&k) && l.contains(&k) && !r.contains(&k));
        k[0] = 0x80;
        assert!(r.contains(&k) && !l.contains(&k));
        assert!(root.covers(&r) && !l.covers(&r) && r.covers(&r.child(false)));
        assert_eq!(r.to_string(), "1");
        assert_eq!(r.child(false).child(true).to_string(), "101");
    }

    #[test]
    fn next_key_is_the_first_key_after_the_region() {
        assert_eq!(Prefix::root().next_key(), None);
        assert_eq!(Prefix::root().child(true).next_key(), None);
        let mut expected = [0u8; 32];
        expected[0] = 0x80;
        assert_eq!(Prefix::root().child(false).next_key(), Some(expected));
        // 0b011 → 0b100
        let p = Prefix::root().child(false).child(true).child(true);
        expected[0] = 0b1000_0000;
        assert_eq!(p.next_key(), Some(expected));
        let p = Prefix::root().child(false).child(true).child(false);
        expected[0] = 0b0110_0000;
        assert_eq!(p.next_key(), Some(expected));
    }

    #[test]
    fn parts_with_stray_bits_are_refused() {
        let mut bits = [0u8; 32];
        bits[0] = 0b0100_0000;
        assert!(Prefix::from_parts(bits, 1).is_none());
        assert!(Prefix::from_parts(bits, 2).is_some());
        assert!(Prefix::from_parts(bits, 257).is_none());
        let full = Prefix::of_key(&[0xff; 32], 256);
        assert!(full.is_full());
        assert_eq!(Prefix::from_parts([0xff; 32], 256), Some(full));
    }
}
