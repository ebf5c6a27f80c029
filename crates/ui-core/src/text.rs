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

/// JSON text `json` with every lone surrogate escape written as `\ufffd`: a `\uD800`–`\uDBFF`
/// escape not followed at once by a `\uDC00`–`\uDFFF` escape, or a low one not preceded by
/// a high one. Anything else is returned as is (borrowed when nothing changed).
///
/// JavaScript strings may hold half a surrogate pair, for example a reply cut into deltas
/// by UTF-16 units, and `JSON.stringify` writes that half as such an escape; a Rust string
/// cannot hold it, so serde_json refuses the whole text. Read through this first, the half
/// becomes U+REPLACEMENT CHARACTER, as the web's UTF-8 encoder makes it, and keeps its one
/// UTF-16 unit: every offset, range and id counted in the text stays what a JavaScript
/// implementation counts. The escape and its replacement have the same length, so a parse
/// error still names the column of the original text. Escapes that are not four hex digits
/// are left for the parser to refuse.
///
/// ```
/// use ui_core::text::json_lone_surrogates_replaced;
///
/// let half = json_lone_surrogates_replaced(r#"{"text":"a\ud83d"}"#);
/// assert_eq!(half, r#"{"text":"a\ufffd"}"#);
/// let text: serde_json::Value = serde_json::from_str(&half).unwrap();
/// assert_eq!(text["text"], "a\u{fffd}");
/// // A whole pair is kept.
/// let pair = r#"{"text":"\ud83d\ude00"}"#;
/// assert!(matches!(json_lone_surrogates_replaced(pair), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn json_lone_surrogates_replaced(json: &str) -> std::borrow::Cow<'_, str> {
    // Most JSON has no `\u` escape at all: one vectorised search says so (a byte loop
    // cost a `ui.query` body some 1,500 instructions).
    if !json.contains("\\u") {
        return std::borrow::Cow::Borrowed(json);
    }
    let bytes = json.as_bytes();
    // `\u` escapes of the range D800–DFFF at `at`: the code unit, when it is one.
    let surrogate = |at: usize| -> Option<u16> {
        let escape = bytes.get(at..at + 6)?;
        if escape[0] != b'\\' || escape[1] != b'u' {
            return None;
        }
        let unit = escape[2..].iter().try_fold(0u16, |unit, &digit| {
            let digit = char::from(digit).to_digit(16)?;
            Some(unit << 4 | digit as u16)
        })?;
        (0xD800..=0xDFFF).contains(&unit).then_some(unit)
    };
    let mut out: Option<String> = None;
    let mut at = 0;
    // A backslash only ever starts an escape (elsewhere the JSON is invalid anyway), and
    // each escape is stepped over whole, so `\\u` is never read as an escape of `u`.
    while let Some(found) = bytes[at..].iter().position(|&b| b == b'\\') {
        at += found;
        match surrogate(at) {
            Some(0xD800..=0xDBFF) if matches!(surrogate(at + 6), Some(0xDC00..=0xDFFF)) => {
                at += 12;
            }
            Some(_) => {
                // Six ASCII bytes for six ASCII bytes: every offset stays a char boundary.
                out.get_or_insert_with(|| json.to_owned())
                    .replace_range(at..at + 6, r"\ufffd");
                at += 6;
            }
            None => at += 2,
        }
        if at >= bytes.len() {
            break;
        }
    }
    out.map_or(std::borrow::Cow::Borrowed(json), std::borrow::Cow::Owned)
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
    use proptest::prelude::*;

    /// `units` as a JSON string the way `JSON.stringify` writes one: a lone surrogate as a
    /// `\u` escape (hex digits in either case), quotes and backslashes escaped, controls as
    /// `\u` escapes, and any other character as is unless `escaped` asks for its escapes (a
    /// pair then as two).
    fn stringify(units: &[u16], escaped: &[bool], upper: bool) -> String {
        let mut out = String::from("\"");
        for (i, c) in char::decode_utf16(units.iter().copied()).enumerate() {
            let escape = |out: &mut String, unit: u16| {
                let hex = if upper {
                    format!("{unit:04X}")
                } else {
                    format!("{unit:04x}")
                };
                out.push_str("\\u");
                out.push_str(&hex);
            };
            match c {
                Ok('"') => out.push_str("\\\""),
                Ok('\\') => out.push_str("\\\\"),
                Ok(c) if (c as u32) < 0x20 || escaped.get(i).copied().unwrap_or(false) => {
                    let mut buf = [0u16; 2];
                    for &unit in c.encode_utf16(&mut buf).iter() {
                        escape(&mut out, unit);
                    }
                }
                Ok(c) => out.push(c),
                Err(lone) => escape(&mut out, lone.unpaired_surrogate()),
            }
        }
        out.push('"');
        out
    }

    proptest! {
        /// Read through the replacement, any JavaScript string parses to what the web's
        /// UTF-8 encoder makes of it (`from_utf16_lossy`), with its UTF-16 length kept.
        #[test]
        fn lone_surrogates_read_as_replacement_characters(
            units in prop::collection::vec(prop_oneof![
                0x20u16..0x7f, Just(0x5cu16), Just(0x22), 0xd800u16..0xe000, 0xe9u16..0x100,
                Just(0x75), Just(0x0a)], 0..24),
            escaped in prop::collection::vec(any::<bool>(), 24),
            upper in any::<bool>(),
        ) {
            let json = stringify(&units, &escaped, upper);
            let replaced = json_lone_surrogates_replaced(&json);
            prop_assert_eq!(replaced.len(), json.len());
            let text: String = serde_json::from_str(&replaced).expect("valid JSON");
            let lossy = String::from_utf16_lossy(&units);
            prop_assert_eq!(utf16_len(&text), units.len());
            prop_assert_eq!(text, lossy);
        }
    }

    #[test]
    fn json_without_lone_surrogates_is_borrowed() {
        for json in [
            r#"{"a":"\\ud83d"}"#,
            r#"{"a":"\ud83d\ude00","b":"\u00e9\n"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\u+d83"}"#,
            r#"{"a":"x\"}"#,
            "",
        ] {
            assert!(
                matches!(
                    json_lone_surrogates_replaced(json),
                    std::borrow::Cow::Borrowed(_)
                ),
                "{json}"
            );
        }
        assert_eq!(
            json_lone_surrogates_replaced(r#"["\ude00\ud83d","\ud83d\ud83d\ude00","\uDBFF"]"#),
            r#"["\ufffd\ufffd","\ufffd\ud83d\ude00","\ufffd"]"#
        );
    }

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
