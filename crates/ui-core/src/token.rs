//! Change tokens (`sync.md` §2): the opaque names of a source's scope and keys in the
//! change log. The change feed makes them; the host service keeps them with each reading
//! and asks the feed which changes name them, so both use this one type.

use std::fmt;

/// A 16-byte opaque token, written as 32 lowercase hex characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(pub [u8; 16]);

impl Token {
    /// The 32 hex characters.
    #[inline]
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(32);
        for b in self.0 {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 0xf)]));
        }
        out
    }

    /// Parses 32 hex characters, either case.
    #[inline]
    pub fn from_hex(s: &str) -> Option<Token> {
        let digits: &[u8; 32] = s.as_bytes().try_into().ok()?;
        let mut out = [0u8; 16];
        // Every digit's value ORed together: a byte that is no digit (`NOT_HEX`) sets the
        // high nibble, which no digit does. No branch per digit: the log's rows and every
        // event a page's client reads carry tokens as hex.
        let mut seen = 0u8;
        for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let (high, low) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
            seen |= high | low;
            *byte = high << 4 | low;
        }
        (seen & 0xf0 == 0).then_some(Token(out))
    }
}

/// [`HEX`]'s mark of a byte that is no hex digit.
const NOT_HEX: u8 = 0xff;

/// The value of every byte as a hex digit (`sync.md` §2: tokens are 32 hex characters),
/// either case; [`NOT_HEX`] for the others.
const HEX: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// The byte of two hex digits.
#[cfg(test)]
fn hex_pair(high: u8, low: u8) -> Option<u8> {
    let (high, low) = (HEX[usize::from(high)], HEX[usize::from(low)]);
    ((high | low) < 16).then_some(high << 4 | low)
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_print_as_lowercase_hex_and_parse_back() {
        let token = Token([
            0x00, 0x01, 0x0f, 0x10, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff, 0x12, 0x34, 0x56, 0x78,
            0x9a, 0xbc,
        ]);
        let hex = token.to_hex();
        assert_eq!(hex, "00010f107f80abcdefff123456789abc");
        assert_eq!(Token::from_hex(&hex), Some(token));
    }

    #[test]
    fn hex_pairs_read_two_hex_digits_and_nothing_else() {
        // Every pair of bytes, against `u8::from_str_radix` on the pairs of hex digits (it
        // would also take a sign, `+f`, which is no hex).
        for high in 0..=u8::MAX {
            for low in 0..=u8::MAX {
                let pair = [high, low];
                let reference = pair
                    .iter()
                    .all(u8::is_ascii_hexdigit)
                    .then(|| std::str::from_utf8(&pair).ok())
                    .flatten()
                    .and_then(|text| u8::from_str_radix(text, 16).ok());
                assert_eq!(hex_pair(high, low), reference, "{pair:?}");
            }
        }
        assert_eq!(Token::from_hex(&"+f".repeat(16)), None);
        assert_eq!(Token::from_hex(&"AB".repeat(16)), Some(Token([0xab; 16])));
        assert_eq!(Token::from_hex(&"0g".repeat(16)), None);
        assert_eq!(Token::from_hex(&"00".repeat(15)), None);
        assert_eq!(Token::from_hex(&format!("{}é", "00".repeat(15))), None);
        // `from_hex` reads every pair as `hex_pair` does, at every position.
        for high in 0..0x80u8 {
            for low in 0..0x80u8 {
                let pair = String::from_utf8(vec![high, low]).expect("ASCII");
                for at in 0..16 {
                    let text = format!("{}{pair}{}", "a0".repeat(at), "0a".repeat(15 - at));
                    let parsed = Token::from_hex(&text).map(|t| t.0[at]);
                    assert_eq!(parsed, hex_pair(high, low), "{text:?}");
                }
            }
        }
    }
}
