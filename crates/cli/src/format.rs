//! Text forms of bytes and quantities: hex (with or without `0x`), byte sizes, rates and
//! durations for human output. Pure functions; nothing here reads or writes.

use std::time::Duration;

/// Lowercase hex of `bytes`, without a prefix (the engine's, as in its error messages).
pub use sprig::hex;

/// Decode hex (an optional `0x` prefix, either case). The error says what is wrong.
pub fn unhex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits in {:?}", shorten(text)));
    }
    digits
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = hex_digit(pair.first().copied());
            let lo = hex_digit(pair.get(1).copied());
            match (hi, lo) {
                (Some(h), Some(l)) => Ok(h << 4 | l),
                _ => Err(format!("not hex: {:?}", shorten(text))),
            }
        })
        .collect()
}

fn hex_digit(c: Option<u8>) -> Option<u8> {
    match c? {
        c @ b'0'..=b'9' => Some(c - b'0'),
        c @ b'a'..=b'f' => Some(c - b'a' + 10),
        c @ b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// At most 40 characters of `text`, for error messages.
pub fn shorten(text: &str) -> String {
    if text.chars().count() <= 40 {
        text.to_string()
    } else {
        let head: String = text.chars().take(37).collect();
        format!("{head}...")
    }
}

/// A value for human eyes: its text if it is printable UTF-8, else `0x` and its hex.
pub fn display_value(value: &[u8]) -> String {
    match std::str::from_utf8(value) {
        Ok(s) if !s.is_empty() && s.chars().all(|c| !c.is_control() || c == '\t') => s.to_string(),
        _ => format!("0x{}", hex(value)),
    }
}

/// A byte count with a binary unit (`1.5 MiB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let name = UNITS.get(unit).copied().unwrap_or("B");
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {name}")
    }
}

/// A count per second (`1,234,567/s`).
pub fn rate(count: u64, elapsed: Duration) -> String {
    format!("{}/s", grouped(per_second(count, elapsed) as u64))
}

/// `count / elapsed` in items per second (0 for a zero duration).
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// An integer with thousands separators (`1,000,000`).
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in seconds with millisecond precision (`1.234 s`).
pub fn seconds(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_digits() {
        assert_eq!(
            unhex(&hex(&[0, 1, 0xab, 0xff])).unwrap(),
            vec![0, 1, 0xab, 0xff]
        );
        assert_eq!(unhex("0xAB").unwrap(), vec![0xab]);
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
        assert!(unhex("é1").is_err());
    }

    #[test]
    fn quantities_read_well() {
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(grouped(999), "999");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(display_value(b"abc"), "abc");
        assert_eq!(display_value(&[0, 1]), "0x0001");
    }
}
