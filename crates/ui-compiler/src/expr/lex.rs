//! Tokens of the expression language (`language.md` §10.1).
//!
//! The lexer runs one token ahead of the parser, exactly as upstream: a lexing error in the
//! token *after* the one being parsed wins over a grammar error in the current one
//! (`(() => 1)` fails on `=`, not on `)`).

use ui_core::text::{is_js_whitespace, utf16_len_of_utf8};
use ui_core::{Budget, Failure};

use super::{incomplete_expression, invalid_expression};

/// One token. Names, numbers and symbols borrow the source; strings are decoded.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token<'s> {
    /// End of input.
    End,
    /// A string literal's decoded value.
    Str(String),
    /// A number literal as written (`1.`, `.5`, `1e3`).
    Num(&'s str),
    /// `[$@]?[A-Za-z_][A-Za-z0-9_]*`.
    Name(&'s str),
    /// An operator or punctuation.
    Sym(&'static str),
}

impl Token<'_> {
    /// The token's text as upstream prints it in messages (a string's decoded value, `""`
    /// for the end).
    pub(super) fn text(&self) -> &str {
        match self {
            Token::End => "",
            Token::Str(value) => value,
            Token::Num(text) | Token::Name(text) => text,
            Token::Sym(symbol) => symbol,
        }
    }

    /// Whether this is the symbol `symbol` (a string token with that value is not).
    pub(super) fn is_sym(&self, symbol: &str) -> bool {
        matches!(self, Token::Sym(s) if *s == symbol)
    }
}

const SYMBOLS_1: [&str; 17] = [
    "(", ")", "[", "]", "{", "}", ",", ".", ":", "!", "+", "*", "/", "%", "<", ">", "-",
];

/// The source and the byte position of the next unread unit.
#[derive(Debug)]
pub(super) struct Lexer<'s> {
    src: &'s str,
    pos: usize,
}

impl<'s> Lexer<'s> {
    pub(super) fn new(src: &'s str) -> Self {
        Lexer { src, pos: 0 }
    }

    /// The byte position of the next unread unit.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// Reads the next token: 1 step, plus 1 step per skipped whitespace unit, plus the
    /// string charges of a string token.
    pub(super) fn read(&mut self, budget: &mut Budget<'_>) -> Result<Token<'s>, Failure> {
        budget.step(1)?;
        // ASCII whitespace first (one step per unit, as below), then W's other members.
        while let Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C) =
            self.src.as_bytes().get(self.pos)
        {
            self.pos += 1;
            budget.step(1)?;
        }
        while let Some(c) = self.src[self.pos..].chars().next() {
            if !is_js_whitespace(c) {
                break;
            }
            // Every character of W is one UTF-16 unit.
            self.pos += c.len_utf8();
            budget.step(1)?;
        }
        let rest = &self.src[self.pos..];
        let bytes = rest.as_bytes();
        let Some(&first) = bytes.first() else {
            return Ok(Token::End);
        };
        if first == b'"' || first == b'\'' {
            return self.string(first, budget);
        }
        if let Some(len) = number_len(bytes) {
            self.pos += len;
            return Ok(Token::Num(&rest[..len]));
        }
        if let Some(len) = name_len(bytes) {
            self.pos += len;
            return Ok(Token::Name(&rest[..len]));
        }
        if let Some(symbol) = symbol(bytes) {
            self.pos += symbol.len();
            return Ok(Token::Sym(symbol));
        }
        let c = rest.chars().next().unwrap_or('\u{FFFD}');
        Err(invalid_expression(format!("Unexpected character {c}.")))
    }

    /// Reads a string after its opening quote: 1 step per loop iteration (one UTF-16 unit
    /// or one escape, the closing quote included), then `string(value)`.
    fn string(&mut self, quote: u8, budget: &mut Budget<'_>) -> Result<Token<'s>, Failure> {
        self.pos += 1;
        let mut value = String::new();
        loop {
            // A run of plain characters at once: its steps are its UTF-16 units, as if
            // charged one by one (a budget fails at the same total either way).
            let rest = &self.src.as_bytes()[self.pos..];
            let run = memchr::memchr2(quote, b'\\', rest).unwrap_or(rest.len());
            if run > 0 {
                let plain = &self.src[self.pos..self.pos + run];
                budget.step(utf16_len_of_utf8(plain.as_bytes()) as u64)?;
                if value.is_empty() {
                    value.reserve(run);
                }
                value.push_str(plain);
                self.pos += run;
            }
            let Some(c) = self.src[self.pos..].chars().next() else {
                return Err(incomplete_expression("The string is not closed."));
            };
            // Upstream loops over UTF-16 units: a non-BMP character is two iterations.
            budget.step(c.len_utf16() as u64)?;
            self.pos += c.len_utf8();
            if c == char::from(quote) {
                break;
            }
            if c != '\\' {
                value.push(c);
                continue;
            }
            let Some(escape) = self.src[self.pos..].chars().next() else {
                return Err(invalid_expression("Invalid string escape."));
            };
            self.pos += escape.len_utf8();
            let decoded = match escape {
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'b' => '\u{8}',
                'f' => '\u{C}',
                '\\' | '"' | '\'' | '/' => escape,
                'u' => self.unicode_escape(budget)?,
                _ => return Err(invalid_expression("Invalid string escape.")),
            };
            value.push(decoded);
        }
        budget.string(&value)?;
        Ok(Token::Str(value))
    }

    /// Decodes the four hex digits after `\u`. A high surrogate must be followed at once by
    /// a `\u` escape of a low surrogate (the next loop iteration upstream, charged 1 step);
    /// the pair becomes one character. A lone surrogate fails `invalid_expression`.
    fn unicode_escape(&mut self, budget: &mut Budget<'_>) -> Result<char, Failure> {
        let bad = || invalid_expression("Invalid Unicode escape.");
        let unit = hex4(&self.src.as_bytes()[self.pos..]).ok_or_else(bad)?;
        self.pos += 4;
        match unit {
            0xD800..=0xDBFF => {
                let rest = &self.src.as_bytes()[self.pos..];
                let low = rest
                    .strip_prefix(b"\\u")
                    .and_then(hex4)
                    .filter(|low| (0xDC00..=0xDFFF).contains(low))
                    .ok_or_else(|| invalid_expression("Invalid Unicode escape: lone surrogate."))?;
                budget.step(1)?;
                self.pos += 6;
                let scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                char::from_u32(scalar).ok_or_else(bad)
            }
            0xDC00..=0xDFFF => Err(invalid_expression(
                "Invalid Unicode escape: lone surrogate.",
            )),
            _ => char::from_u32(unit).ok_or_else(bad),
        }
    }
}

/// Four ASCII hex digits at the start of `bytes`.
pub(crate) fn hex4(bytes: &[u8]) -> Option<u32> {
    let digits = bytes.get(..4)?;
    digits.iter().try_fold(0u32, |acc, &b| {
        let d = char::from(b).to_digit(16)?;
        Some(acc * 16 + d)
    })
}

fn digits_len(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

/// `^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?`
pub(crate) fn number_len(bytes: &[u8]) -> Option<usize> {
    let int = digits_len(bytes);
    let mut len = if int > 0 {
        if bytes.get(int) == Some(&b'.') {
            int + 1 + digits_len(&bytes[int + 1..])
        } else {
            int
        }
    } else if bytes.first() == Some(&b'.') {
        let frac = digits_len(&bytes[1..]);
        if frac == 0 {
            return None;
        }
        1 + frac
    } else {
        return None;
    };
    if matches!(bytes.get(len), Some(b'e' | b'E')) {
        let mut at = len + 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let exp = digits_len(&bytes[at.min(bytes.len())..]);
        if exp > 0 {
            len = at + exp;
        }
    }
    Some(len)
}

/// `^[$@]?[A-Za-z_][A-Za-z0-9_]*`
pub(crate) fn name_len(bytes: &[u8]) -> Option<usize> {
    let sigil = usize::from(matches!(bytes.first(), Some(b'$' | b'@')));
    let head = *bytes.get(sigil)?;
    if !(head.is_ascii_alphabetic() || head == b'_') {
        return None;
    }
    let tail = bytes[sigil + 1..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    Some(sigil + 1 + tail)
}

/// The longest symbol at the start of `bytes`.
fn symbol(bytes: &[u8]) -> Option<&'static str> {
    let &first = bytes.first()?;
    let second = bytes.get(1).copied();
    let third = bytes.get(2).copied();
    // The longest match first, as the ordered lists say.
    let symbol = match (first, second, third) {
        (b'=', Some(b'='), Some(b'=')) => "===",
        (b'!', Some(b'='), Some(b'=')) => "!==",
        (b'=', Some(b'='), _) => "==",
        (b'!', Some(b'='), _) => "!=",
        (b'<', Some(b'='), _) => "<=",
        (b'>', Some(b'='), _) => ">=",
        (b'&', Some(b'&'), _) => "&&",
        (b'|', Some(b'|'), _) => "||",
        _ => return SYMBOLS_1.iter().copied().find(|s| s.as_bytes()[0] == first),
    };
    Some(symbol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_shapes() {
        assert_eq!(number_len(b"1."), Some(2));
        assert_eq!(number_len(b".5x"), Some(2));
        assert_eq!(number_len(b"1e3"), Some(3));
        assert_eq!(number_len(b"1e+"), Some(1));
        assert_eq!(number_len(b"1.2.3"), Some(3));
        assert_eq!(number_len(b"."), None);
        assert_eq!(number_len(b"e1"), None);
        assert_eq!(number_len(b"01"), Some(2));
    }

    #[test]
    fn name_and_symbol_shapes() {
        assert_eq!(name_len(b"$a_1+"), Some(4));
        assert_eq!(name_len(b"$"), None);
        assert_eq!(name_len(b"@1"), None);
        assert_eq!(symbol(b"!==x"), Some("!=="));
        assert_eq!(symbol(b"!x"), Some("!"));
        assert_eq!(symbol(b"="), None);
        assert_eq!(symbol(b"&"), None);
    }

    #[test]
    fn symbol_is_the_longest_listed_prefix() {
        let listed: Vec<&str> = ["===", "!==", "==", "!=", "<=", ">=", "&&", "||"]
            .into_iter()
            .chain(SYMBOLS_1)
            .collect();
        let alphabet = b"=!<>&|()[]{},.:+*/%-a ";
        for &a in alphabet {
            for &b in alphabet {
                for &c in alphabet {
                    let input = [a, b, c];
                    for len in 1..=3 {
                        let bytes = &input[..len];
                        let model = listed
                            .iter()
                            .copied()
                            .find(|s| bytes.starts_with(s.as_bytes()));
                        assert_eq!(symbol(bytes), model, "{:?}", std::str::from_utf8(bytes));
                    }
                }
            }
        }
    }
}
