//! How keys and values are written on the command line and in files. A key is either a
//! 32-byte key path (64 hex digits) or a byte key (hex or text) that is hashed to a path with
//! the database's hasher. Depends only on `sprig-core`, so the offline verifier can use it.

use crate::format::{shorten, unhex};
use clap::ValueEnum;
use sprig_core::{key_path_of, Hasher, KeyPath};

/// How a key is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum KeyFormat {
    /// 64 hex digits: the 32-byte key path itself (what `export` writes).
    #[default]
    Path,
    /// Hex of a byte key of any length, hashed to a key path with the database's hasher.
    Hex,
    /// A UTF-8 text key, hashed to a key path with the database's hasher.
    Text,
}

/// How a value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValueFormat {
    /// The UTF-8 bytes of the text.
    Text,
    /// Hex digits (an optional `0x` prefix).
    Hex,
}

impl KeyFormat {
    /// The key path of `text` written in this format.
    pub fn parse(self, hasher: Hasher, text: &str) -> Result<KeyPath, String> {
        match self {
            KeyFormat::Path => {
                let bytes = unhex(text)?;
                KeyPath::try_from(bytes.as_slice()).map_err(|_| {
                    format!(
                        "a key path is 32 bytes (64 hex digits), not {} bytes: {:?} \
                         (use --key-format text or hex to hash a byte key)",
                        bytes.len(),
                        shorten(text)
                    )
                })
            }
            KeyFormat::Hex => Ok(key_path_of(hasher, &unhex(text)?)),
            KeyFormat::Text => Ok(key_path_of(hasher, text.as_bytes())),
        }
    }
}

impl ValueFormat {
    /// The bytes of `text` written in this format.
    pub fn parse(self, text: &str) -> Result<Vec<u8>, String> {
        match self {
            ValueFormat::Text => Ok(text.as_bytes().to_vec()),
            ValueFormat::Hex => unhex(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_formats() {
        let h = Hasher::Blake3;
        let path = [7u8; 32];
        let hex_path = crate::format::hex(&path);
        assert_eq!(KeyFormat::Path.parse(h, &hex_path).unwrap(), path);
        assert!(KeyFormat::Path.parse(h, "abcd").is_err());
        assert_eq!(
            KeyFormat::Text.parse(h, "alice").unwrap(),
            key_path_of(h, b"alice")
        );
        assert_eq!(
            KeyFormat::Hex.parse(h, "616c696365").unwrap(),
            key_path_of(h, b"alice")
        );
    }
}
