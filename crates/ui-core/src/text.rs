//! JavaScript-compatible text helpers: the whitespace class, `trim`, UTF-16 lengths and
//! truncation, and conversion between UTF-8 byte offsets and UTF-16 offsets.
//!
//! Everything a person or another implementation can observe counts UTF-16 code units
//! (`language.md` §2), while Rust slices strings by byte. These helpers keep the two apart.

/// Whether `c` belongs to the ECMAScript `\s` class (what JS `trim()` strips), the
/// whitespace class W of `language.md` §2.3.
///
/// Differs from [`char::is_whitespace`]: U+0085 is not in the class, U+FEFF is.
#[inline]
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{D}'
            | ' '
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

/// `s` without leading and trailing JS whitespace (JS `String.prototype.trim`).
#[inline]
pub fn trim_js(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// Whether `s` is empty or holds only JS whitespace.
#[inline]
#[doc(hidden)]
pub fn is_blank(s: &str) -> bool {
    s.chars().all(is_js_whitespace)
}

/// Writes `n` in decimal (what `format!("{n}")` writes, without the formatting machinery).
pub(crate) fn write_decimal<W: std::fmt::Write>(out: &mut W, mut n: u64) -> std::fmt::Result {
    // Two digits per division, from a table of the pairs "00" to "99".
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    digits[at..]
        .iter()
        .try_for_each(|&d| out.write_char(char::from(d)))
}

/// `write_decimal` into a `String`, which cannot fail.
#[doc(hidden)]
pub fn push_decimal(out: &mut String, n: u64) {
    let _ = write_decimal(out, n);
}

/// Length of `s` in UTF-16 code units (JS `string.length`).
#[inline]
pub fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

/// UTF-16 units of the UTF-8 bytes `bytes` (which may start or end inside a character:
/// a leading byte counts for its whole character, continuation bytes count nothing).
#[inline]
#[doc(hidden)]
pub fn utf16_len_of_utf8(bytes: &[u8]) -> usize {
    if bytes.is_ascii() {
        return bytes.len();
    }
    bytes
        .iter()
        .map(|&b| match b {
            0x00..=0x7F | 0xC0..=0xEF => 1,
            0xF0..=0xFF => 2,
            _ => 0,
        })
        .sum()
}

/// The longest prefix of `s` whose UTF-16 length is at most `max_units`, never splitting a
/// character (so a surrogate pair that would be cut is dropped whole).
pub fn truncate_utf16(s: &str, max_units: usize) -> &str {
    if s.len() <= max_units {
        // Every char needs at least as many bytes as UTF-16 units.
        return s;
    }
    let mut units = 0usize;
    for (i, c) in s.char_indices() {
        let next = units + c.len_utf16();
        if next > max_units {
            return &s[..i];
        }
        units = next;
    }
    s
}

/// Converts UTF-8 byte offsets of one string to UTF-16 offsets and back.
///
/// ASCII text needs no table: both offsets are equal. Otherwise a sparse table of the
/// non-ASCII characters is built once, so each conversion is a binary search.
#[derive(Debug, Clone, Default)]
pub struct Utf16Map {
    marks: Vec<Mark>,
}

/// One non-ASCII character: where it starts in bytes and in UTF-16 units, and its widths.
#[derive(Debug, Clone, Copy)]
struct Mark {
    byte: u32,
    unit: u32,
    byte_len: u8,
    unit_len: u8,
}

impl Utf16Map {
    /// Builds the map for `s`.
    pub fn new(s: &str) -> Self {
        let mut marks = Vec::new();
        if !s.is_ascii() {
            let mut units = 0u32;
            for (i, c) in s.char_indices() {
                if !c.is_ascii() {
                    marks.push(Mark {
                        byte: i as u32,
                        unit: units,
                        byte_len: c.len_utf8() as u8,
                        unit_len: c.len_utf16() as u8,
                    });
                }
                units += c.len_utf16() as u32;
            }
        }
        Utf16Map { marks }
    }

    /// Whether the string was pure ASCII (both offsets always agree).
    pub fn is_identity(&self) -> bool {
        self.marks.is_empty()
    }

    /// The UTF-16 offset of byte offset `byte`; an offset inside a character maps to the
    /// start of that character.
    pub fn utf16(&self, byte: usize) -> usize {
        let byte = byte as u32;
        let idx = self.marks.partition_point(|m| m.byte < byte);
        let Some(m) = idx.checked_sub(1).map(|i| self.marks[i]) else {
            return byte as usize;
        };
        let end = m.byte + u32::from(m.byte_len);
        if byte >= end {
            (m.unit + u32::from(m.unit_len) + (byte - end)) as usize
        } else {
            m.unit as usize
        }
    }

    /// The byte offset of UTF-16 offset `units`; an offset inside a surrogate pair maps to
    /// the start of that character.
    pub fn byte(&self, units: usize) -> usize {
        let units = units as u32;
        let idx = self.marks.partition_point(|m| m.unit < units);
        let Some(m) = idx.checked_sub(1).map(|i| self.marks[i]) else {
            return units as usize;
        };
        let end = m.unit + u32::from(m.unit_len);
        if units >= end {
            (m.byte + u32::from(m.byte_len) + (units - end)) as usize
        } else {
            m.byte as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_what_format_writes() {
        let powers = (0..20).map(|k| 10u64.pow(k));
        let edges = powers.flat_map(|p| [p - 1, p, p + 1, p.saturating_mul(3).saturating_add(7)]);
        for n in edges.chain([0, 42, 1_234_567_890, u64::MAX]) {
            let mut out = String::from("x");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }

    #[test]
    fn whitespace_class_matches_js() {
        for c in [
            '\t', '\n', '\u{B}', '\u{C}', '\r', ' ', '\u{A0}', '\u{FEFF}', '\u{3000}',
        ] {
            assert!(is_js_whitespace(c), "{c:?}");
        }
        assert!(!is_js_whitespace('\u{85}'));
        assert!(!is_js_whitespace('a'));
        assert_eq!(trim_js("\u{FEFF} x \u{A0}"), "x");
    }

    #[test]
    fn utf16_lengths_and_truncation() {
        assert_eq!(utf16_len("é🐇"), 3);
        assert_eq!(utf16_len_of_utf8("aé🐇".as_bytes()), 4);
        assert_eq!(truncate_utf16("a🐇b", 2), "a");
        assert_eq!(truncate_utf16("a🐇b", 3), "a🐇");
        assert_eq!(truncate_utf16("abc", 5), "abc");
        assert_eq!(truncate_utf16("ééé", 2), "éé");
    }

    #[test]
    fn offsets_round_trip() {
        let s = "aé🐇b\r\nü";
        let map = Utf16Map::new(s);
        let mut units = 0;
        for (i, c) in s.char_indices() {
            assert_eq!(map.utf16(i), units, "byte {i}");
            assert_eq!(map.byte(units), i, "units {units}");
            units += c.len_utf16();
        }
        assert_eq!(map.utf16(s.len()), units);
        assert_eq!(map.byte(units), s.len());
        // Inside the surrogate pair of 🐇 (units 2..4) maps to its start.
        assert_eq!(map.byte(3), 3);
        let ascii = Utf16Map::new("plain");
        assert!(ascii.is_identity());
        assert_eq!(ascii.utf16(3), 3);
    }
}
