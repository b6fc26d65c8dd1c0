//! Files of key-value records for `import` and `export`: JSON Lines and a compact binary
//! format, read one record at a time with bounded lengths and every malformation reported
//! with its line or byte offset (never a panic). The input is read front to back exactly once
//! (never reopened or rewound), so it may be a pipe, a FIFO or stdin (`-`).
//!
//! JSON Lines: one object per line, `{"key": "<key>", "value": "<value>"}`; both fields are
//! required, and only an explicit `"value": null` deletes the key. Blank lines are skipped.
//!
//! Binary (all integers little-endian):
//! - header: magic `SPKV`, format version `1`, key kind (`0`: 32-byte key paths, `1`: byte keys
//!   hashed with the database's hasher);
//! - records: tag `1` (put) `key_len: u32`, key, `value_len: u32`, value; or tag `2` (delete)
//!   `key_len: u32`, key;
//! - trailer: tag `0xFF`, `records: u64` (the number of records before it), then the end of the
//!   file. A file cut short anywhere, even between records, is rejected.

use crate::error::{CliError, CliResult};
use crate::format::hex;
use crate::keys::{KeyFormat, ValueFormat};
use clap::ValueEnum;
use sprig_core::{Hasher, KeyPath};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Chain, Cursor, Read, Write};

/// The magic bytes of the binary format.
const MAGIC: &[u8; 4] = b"SPKV";
/// The binary format version this tool reads and writes.
const VERSION: u8 = 1;
const KIND_KEY_PATHS: u8 = 0;
const KIND_BYTE_KEYS: u8 = 1;
const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;
const TAG_END: u8 = 0xFF;
/// The longest byte key a binary file may hold.
pub const MAX_KEY_BYTES: u32 = 64 << 10;
/// The longest value a record may hold (binary or JSON Lines).
pub const MAX_RECORD_VALUE_BYTES: u64 = 256 << 20;
/// The longest line a JSON Lines file may hold (a maximal value in hex, plus the key).
const MAX_LINE_BYTES: u64 = 2 * MAX_RECORD_VALUE_BYTES + 4096;

/// A file format for key-value records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FileFormat {
    /// JSON Lines: `{"key": "...", "value": "..."}` per line.
    Jsonl,
    /// The compact binary format (magic `SPKV`).
    Binary,
}

/// One record: set `key` to the value, or delete it (`None`).
pub type Change = (KeyPath, Option<Vec<u8>>);

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRecord {
    key: String,
    /// Required: a string sets the key, `null` deletes it. A plain `Option` field would read a
    /// missing `"value"` as `None` and so delete the key silently; `deserialize_with` turns
    /// that into a "missing field" error.
    #[serde(deserialize_with = "Option::deserialize")]
    value: Option<String>,
}

/// A JSON error of one line, positioned by column only (the line is the record's own, which
/// the caller names).
fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let what = text.strip_suffix(&position).unwrap_or(&text);
    let hint = if what == "missing field `value`" {
        " (a record needs \"value\": a string, or null to delete the key)"
    } else {
        ""
    };
    format!("{what}{hint} (column {})", e.column())
}

/// An input: its first bytes (read to detect the format), then the rest.
type Input = Chain<Cursor<Vec<u8>>, Box<dyn Read>>;

/// The name of stdin in messages.
pub const STDIN_NAME: &str = "stdin";

/// Reads records from a file, a pipe or stdin, one at a time.
pub struct RecordReader {
    name: String,
    input: BufReader<Input>,
    /// The input's size when it is a regular file (for progress).
    size: Option<u64>,
    format: FileFormat,
    /// Binary files only: keys are byte keys to hash.
    byte_keys: bool,
    hasher: Hasher,
    keys: KeyFormat,
    values: ValueFormat,
    offset: u64,
    line: u64,
    records: u64,
    done: bool,
}

impl RecordReader {
    /// Open `path` (`-`: stdin); the format is detected from the first bytes unless given.
    /// `keys` and `values` say how JSON Lines strings are written (binary files say so in
    /// their header).
    pub fn open(
        path: &str,
        format: Option<FileFormat>,
        hasher: Hasher,
        keys: KeyFormat,
        values: ValueFormat,
    ) -> CliResult<RecordReader> {
        let (name, mut source, size): (&str, Box<dyn Read>, Option<u64>) = if path == "-" {
            (STDIN_NAME, Box::new(std::io::stdin().lock()), None)
        } else {
            // A FIFO's open waits for a writer; a pipe (`/dev/stdin`, `<(...)`) opens at once.
            let file = File::open(path).map_err(|e| CliError::io("opening", path, e))?;
            let size = file
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            (path, Box::new(file), size)
        };
        // The first bytes decide the format: read until there are enough of them or the input
        // ends (a pipe may deliver them a few at a time), and keep them for the reader.
        let mut head = Vec::with_capacity(MAGIC.len());
        (&mut source)
            .take(MAGIC.len() as u64)
            .read_to_end(&mut head)
            .map_err(|e| CliError::io("reading", name, e))?;
        let looks_binary = head.starts_with(MAGIC);
        let format = format.unwrap_or(if looks_binary {
            FileFormat::Binary
        } else {
            FileFormat::Jsonl
        });
        let mut reader = RecordReader {
            name: name.to_string(),
            input: BufReader::with_capacity(1 << 20, Cursor::new(head).chain(source)),
            size,
            format,
            byte_keys: false,
            hasher,
            keys,
            values,
            offset: 0,
            line: 0,
            records: 0,
            done: false,
        };
        if format == FileFormat::Binary {
            reader.read_header()?;
        }
        Ok(reader)
    }

    /// Bytes consumed so far (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// The input's size, when it is a regular file.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// The input's name in messages (`stdin` for `-`).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn bad(&self, what: impl Into<String>) -> CliError {
        let at = match self.format {
            FileFormat::Jsonl => format!("line {}", self.line),
            FileFormat::Binary => format!("byte offset {}", self.offset),
        };
        CliError::input(&self.name, format!("{at}: {}", what.into()))
    }

    fn read_header(&mut self) -> CliResult<()> {
        let magic: [u8; 4] = self.array("magic")?;
        if &magic != MAGIC {
            return Err(self.bad("not a Sprig binary key-value file (bad magic)"));
        }
        let [version, kind] = self.array("header")?;
        if version != VERSION {
            return Err(self.bad(format!("unsupported format version {version}")));
        }
        self.byte_keys = match kind {
            KIND_KEY_PATHS => false,
            KIND_BYTE_KEYS => true,
            _ => return Err(self.bad(format!("unknown key kind {kind}"))),
        };
        Ok(())
    }

    /// The next record, or `None` at a proper end of the input.
    pub fn next_change(&mut self) -> CliResult<Option<Change>> {
        if self.done {
            return Ok(None);
        }
        let next = match self.format {
            FileFormat::Jsonl => self.next_json(),
            FileFormat::Binary => self.next_binary(),
        }?;
        match next {
            Some(_) => self.records += 1,
            None => self.done = true,
        }
        Ok(next)
    }

    fn next_json(&mut self) -> CliResult<Option<Change>> {
        let mut line = Vec::new();
        loop {
            line.clear();
            self.line += 1;
            let n = (&mut self.input)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut line)
                .map_err(|e| CliError::io("reading", &self.name, e))?;
            if n == 0 {
                return Ok(None);
            }
            self.offset += n as u64;
            if n as u64 > MAX_LINE_BYTES {
                return Err(self.bad(format!("line longer than {MAX_LINE_BYTES} bytes")));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let record: JsonRecord =
                serde_json::from_slice(&line).map_err(|e| self.bad(json_error(&e)))?;
            let key = self
                .keys
                .parse(self.hasher, &record.key)
                .map_err(|e| self.bad(e))?;
            let value = match record.value {
                None => None,
                Some(text) => {
                    let bytes = self.values.parse(&text).map_err(|e| self.bad(e))?;
                    if bytes.len() as u64 > MAX_RECORD_VALUE_BYTES {
                        return Err(self.bad("value too long"));
                    }
                    Some(bytes)
                }
            };
            return Ok(Some((key, value)));
        }
    }

    fn next_binary(&mut self) -> CliResult<Option<Change>> {
        let [tag] = self.array("record tag")?;
        match tag {
            TAG_PUT | TAG_DELETE => {
                let key = self.read_key()?;
                let value = if tag == TAG_PUT {
                    let len = u32::from_le_bytes(self.array("value length")?);
                    if u64::from(len) > MAX_RECORD_VALUE_BYTES {
                        return Err(self.bad(format!(
                            "value length {len} is above the limit of {MAX_RECORD_VALUE_BYTES}"
                        )));
                    }
                    Some(self.bytes(u64::from(len), "value")?)
                } else {
                    None
                };
                Ok(Some((key, value)))
            }
            TAG_END => {
                let count = u64::from_le_bytes(self.array("record count")?);
                if count != self.records {
                    return Err(self.bad(format!(
                        "the trailer counts {count} records but the file holds {}",
                        self.records
                    )));
                }
                let mut extra = [0u8; 1];
                let n = self
                    .input
                    .read(&mut extra)
                    .map_err(|e| CliError::io("reading", &self.name, e))?;
                if n != 0 {
                    return Err(self.bad("bytes after the trailer"));
                }
                Ok(None)
            }
            other => Err(self.bad(format!("unknown record tag {other}"))),
        }
    }

    fn read_key(&mut self) -> CliResult<KeyPath> {
        let len = u32::from_le_bytes(self.array("key length")?);
        if self.byte_keys {
            if len > MAX_KEY_BYTES {
                return Err(self.bad(format!(
                    "key length {len} is above the limit of {MAX_KEY_BYTES}"
                )));
            }
            let key = self.bytes(u64::from(len), "key")?;
            Ok(sprig_core::key_path_of(self.hasher, &key))
        } else if len != 32 {
            Err(self.bad(format!("a key path is 32 bytes, not {len}")))
        } else {
            self.array("key path")
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> CliResult<[u8; N]> {
        let mut buf = [0u8; N];
        self.fill(&mut buf, what)?;
        Ok(buf)
    }

    fn bytes(&mut self, len: u64, what: &str) -> CliResult<Vec<u8>> {
        // Read through `take` so a lying length cannot allocate more than the file holds.
        let mut buf = Vec::new();
        let n = (&mut self.input)
            .take(len)
            .read_to_end(&mut buf)
            .map_err(|e| CliError::io("reading", &self.name, e))?;
        if (n as u64) < len {
            return Err(self.bad(format!("file ends inside a {what}")));
        }
        self.offset += len;
        Ok(buf)
    }

    fn fill(&mut self, buf: &mut [u8], what: &str) -> CliResult<()> {
        match self.input.read_exact(buf) {
            Ok(()) => {
                self.offset += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(self.bad(format!("file ends inside a {what}")))
            }
            Err(e) => Err(CliError::io("reading", &self.name, e)),
        }
    }
}

/// Writes records (key paths and values) to a file or stdout.
pub struct RecordWriter {
    name: String,
    out: BufWriter<Box<dyn Write>>,
    format: FileFormat,
    records: u64,
}

impl RecordWriter {
    /// Create `path` (`-`: stdout) and write the header.
    pub fn create(path: &str, format: FileFormat) -> CliResult<RecordWriter> {
        let sink: Box<dyn Write> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(File::create(path).map_err(|e| CliError::io("creating", path, e))?)
        };
        let mut writer = RecordWriter {
            name: path.to_string(),
            out: BufWriter::with_capacity(1 << 20, sink),
            format,
            records: 0,
        };
        if format == FileFormat::Binary {
            writer.put_bytes(&[MAGIC.as_slice(), &[VERSION, KIND_KEY_PATHS]].concat())?;
        }
        Ok(writer)
    }

    /// Write one key-value.
    pub fn write(&mut self, key: &KeyPath, value: &[u8]) -> CliResult<()> {
        match self.format {
            FileFormat::Jsonl => {
                let line = format!(
                    "{{\"key\":\"{}\",\"value\":\"{}\"}}\n",
                    hex(key),
                    hex(value)
                );
                self.put_bytes(line.as_bytes())?;
            }
            FileFormat::Binary => {
                let len = u32::try_from(value.len())
                    .map_err(|_| CliError::input(&self.name, "value longer than 4 GiB"))?;
                self.put_bytes(&[TAG_PUT])?;
                self.put_bytes(&32u32.to_le_bytes())?;
                self.put_bytes(key)?;
                self.put_bytes(&len.to_le_bytes())?;
                self.put_bytes(value)?;
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Write the trailer and flush; returns the number of records written.
    pub fn finish(mut self) -> CliResult<u64> {
        if self.format == FileFormat::Binary {
            let trailer = [[TAG_END].as_slice(), &self.records.to_le_bytes()].concat();
            self.put_bytes(&trailer)?;
        }
        self.out
            .flush()
            .map_err(|e| CliError::io("writing", &self.name, e))?;
        Ok(self.records)
    }

    fn put_bytes(&mut self, bytes: &[u8]) -> CliResult<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| CliError::io("writing", &self.name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> CliResult<Vec<Change>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, bytes).unwrap();
        let mut r = RecordReader::open(
            path.to_str().unwrap(),
            None,
            Hasher::Blake3,
            KeyFormat::Path,
            ValueFormat::Hex,
        )?;
        let mut out = Vec::new();
        while let Some(c) = r.next_change()? {
            out.push(c);
        }
        Ok(out)
    }

    fn written(format: FileFormat, n: u8) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut w = RecordWriter::create(path.to_str().unwrap(), format).unwrap();
        for i in 0..n {
            w.write(&[i; 32], &[i, i]).unwrap();
        }
        assert_eq!(w.finish().unwrap(), u64::from(n));
        std::fs::read(path).unwrap()
    }

    #[test]
    fn both_formats_round_trip() {
        for format in [FileFormat::Jsonl, FileFormat::Binary] {
            let got = read_all(&written(format, 3)).unwrap();
            let want: Vec<Change> = (0..3u8).map(|i| ([i; 32], Some(vec![i, i]))).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn every_truncation_of_a_binary_file_is_rejected() {
        let bytes = written(FileFormat::Binary, 3);
        for len in 0..bytes.len() {
            let cut = bytes.get(..len).unwrap();
            if cut.starts_with(MAGIC) {
                assert!(read_all(cut).is_err(), "accepted a cut at {len}");
            }
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(read_all(&extra).is_err());
    }

    #[test]
    fn hostile_lengths_are_bounded() {
        let mut bytes = [MAGIC.as_slice(), &[VERSION, KIND_BYTE_KEYS, TAG_PUT]].concat();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_all(&bytes).is_err());
        let mut bytes = [MAGIC.as_slice(), &[VERSION, KIND_KEY_PATHS, TAG_PUT]].concat();
        bytes.extend_from_slice(&32u32.to_le_bytes());
        bytes.extend_from_slice(&[0; 32]);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_all(&bytes).is_err());
    }

    #[test]
    fn malformed_json_lines_name_the_line() {
        let err = read_all(b"\n{\"key\":\"00\"}\n").unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(read_all(b"{\"key\":1}").is_err());
        assert!(read_all(b"{\"key\":\"aa\",\"other\":1}").is_err());
        let deleted =
            read_all(format!("{{\"key\":\"{}\",\"value\":null}}", hex(&[1; 32])).as_bytes())
                .unwrap();
        assert_eq!(deleted, vec![([1; 32], None)]);
        // A missing value is an error, never a delete.
        let err = read_all(format!("{{\"key\":\"{}\"}}", hex(&[1; 32])).as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1: missing field `value`"), "{err}");
    }
}
