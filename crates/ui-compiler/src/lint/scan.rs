//! Lexical scans of a block source for the lints: the declarations (§6), the props of an
//! opening tag (§7.1) and the name tokens of an expression text (§10.1). They never fail and
//! charge no budget: they only place findings, the compile already decided what is valid.

use std::ops::Range;

use ui_core::text::is_js_whitespace;

/// One `$name = value` declaration as written.
#[derive(Debug, Clone)]
pub(crate) struct Declaration<'s> {
    /// The name with its `$`.
    pub(crate) name: &'s str,
    /// Bytes of `$name`.
    pub(crate) name_bytes: Range<usize>,
    /// Bytes of the value text (after `=`, up to the unnested line feed).
    pub(crate) value_bytes: Range<usize>,
    /// Bytes of the whole line(s) to delete to remove it, line feed included.
    pub(crate) line_bytes: Range<usize>,
}

impl Declaration<'_> {
    /// Whether the value declares a query (`@Query(…)`), read from `source`.
    pub(crate) fn is_query(&self, source: &str) -> bool {
        source[self.value_bytes.clone()]
            .trim_start()
            .starts_with("@Query")
    }
}

/// The declarations at the head of `source` (the same recognition as the parser's §6, with
/// no budget): those that have a name and `=`, in source order.
pub(crate) fn declarations(source: &str) -> Vec<Declaration<'_>> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let line_start = at;
        at = skip_ws(source, at);
        if bytes.get(at) != Some(&b'$') {
            return out;
        }
        let name_start = at;
        if !bytes.get(at + 1).is_some_and(|&b| is_name_start(b)) {
            return out;
        }
        let name_end = ident_end(bytes, at + 1);
        let after = skip_ws(source, name_end);
        if bytes.get(after) != Some(&b'=') {
            return out;
        }
        let value_start = after + 1;
        let value_end = value_end(bytes, value_start);
        let line_end = if value_end < bytes.len() {
            value_end + 1
        } else {
            value_end
        };
        // Remove from the start of the declaration's own line.
        let delete_from = source[..name_start]
            .rfind('\n')
            .map_or(0, |i| i + 1)
            .max(line_start);
        out.push(Declaration {
            name: &source[name_start..name_end],
            name_bytes: name_start..name_end,
            value_bytes: value_start..value_end,
            line_bytes: delete_from..line_end,
        });
        at = value_end;
    }
}

/// Where a declaration value starting at `at` ends: the first line feed outside quotes at
/// bracket depth ≤ 0, or the end.
fn value_end(bytes: &[u8], at: usize) -> usize {
    let mut depth = 0i64;
    outside_quotes(bytes, at, |i, b| {
        match b {
            b'[' | b'{' | b'(' => depth += 1,
            b']' | b'}' | b')' => depth -= 1,
            b'\n' if depth <= 0 => return Some(i),
            _ => {}
        }
        None
    })
}

/// Walks `bytes` from `at`, skipping quoted text (`'` or `"`, a backslash escaping the next
/// byte), and hands every other byte to `visit` until it answers where the scan ends; the
/// end of `bytes` when it never does.
fn outside_quotes(
    bytes: &[u8],
    mut at: usize,
    mut visit: impl FnMut(usize, u8) -> Option<usize>,
) -> usize {
    let mut quote: Option<u8> = None;
    while at < bytes.len() {
        let b = bytes[at];
        match quote {
            Some(q) => {
                if b == b'\\' {
                    at += 1;
                } else if b == q {
                    quote = None;
                }
            }
            None if matches!(b, b'\'' | b'"') => quote = Some(b),
            None => {
                if let Some(end) = visit(at, b) {
                    return end;
                }
            }
        }
        at += 1;
    }
    bytes.len()
}

/// Skips the whitespace class W from `at`.
pub(crate) fn skip_ws(source: &str, at: usize) -> usize {
    let rest = &source[at.min(source.len())..];
    let skipped: usize = rest
        .chars()
        .take_while(|c| is_js_whitespace(*c))
        .map(char::len_utf8)
        .sum();
    at + skipped
}

/// Whether `b` may begin a name (`[A-Za-z_]`, §6).
fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// The end of the identifier `[A-Za-z0-9_]*` starting at `at`.
fn ident_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
        at += 1;
    }
    at
}

/// One prop of an opening tag as written.
#[derive(Debug, Clone)]
pub(crate) struct PropText<'s> {
    /// The prop name.
    pub(crate) name: &'s str,
    /// Bytes of the value, quotes or braces included.
    pub(crate) value_bytes: Range<usize>,
}

/// The props of the opening tag that starts at `start` (the `<`), read up to `limit`.
pub(crate) fn tag_props(source: &str, start: usize, limit: usize) -> Vec<PropText<'_>> {
    let limit = limit.min(source.len());
    let bytes = &source.as_bytes()[..limit];
    let mut out = Vec::new();
    if bytes.get(start) != Some(&b'<') {
        return out;
    }
    let mut at = ident_end(bytes, start + 1);
    loop {
        at = skip_ws(&source[..limit], at);
        let name_start = at;
        at = ident_end(bytes, at);
        if at == name_start {
            return out;
        }
        let name_end = at;
        at = skip_ws(&source[..limit], at);
        if bytes.get(at) != Some(&b'=') {
            return out;
        }
        at = skip_ws(&source[..limit], at + 1);
        let value_start = at;
        match bytes.get(at) {
            Some(&q @ (b'"' | b'\'')) => {
                at += 1;
                while at < limit && bytes[at] != q {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
                at = (at + 1).min(limit);
            }
            Some(b'{') => at = balanced_end(bytes, at),
            _ => return out,
        }
        out.push(PropText {
            name: &source[name_start..name_end],
            value_bytes: value_start..at,
        });
    }
}

/// The end (after the closing `}`) of the balanced body whose `{` is at `at` (§7.6).
pub(crate) fn balanced_end(bytes: &[u8], at: usize) -> usize {
    let mut depth = 0usize;
    outside_quotes(bytes, at, |i, b| {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        None
    })
}

/// The name tokens in `source[range]` read as variables (`$rows`, `row`), with their byte
/// ranges: outside string literals, not after `.` (a member key), not before `:` (a record
/// key) or a lone `=` (a prop name), and not helper names (`@Count`).
pub(crate) fn reference_tokens(source: &str, range: Range<usize>) -> Vec<(Range<usize>, &str)> {
    let end = range.end.min(source.len());
    let bytes = &source.as_bytes()[..end];
    let mut out = Vec::new();
    let mut at = range.start;
    let mut previous: Option<u8> = None;
    while at < end {
        let b = bytes[at];
        if b == b'"' || b == b'\'' {
            at += 1;
            while at < end && bytes[at] != b {
                at += if bytes[at] == b'\\' { 2 } else { 1 };
            }
            at += 1;
            previous = Some(b);
            continue;
        }
        if b == b'$' && !bytes.get(at + 1).is_some_and(|&c| is_name_start(c)) {
            // A `$` that begins no name (`${`, `$1`) reads nothing.
            at += 1;
            previous = Some(b);
            continue;
        }
        if b == b'$' || b == b'@' || is_name_start(b) {
            let token_start = at;
            let token_end = ident_end(bytes, at + 1);
            let after = skip_ws(&source[..end], token_end);
            let next = bytes.get(after).copied();
            let next2 = bytes.get(after + 1).copied();
            let is_key = next == Some(b':') || (next == Some(b'=') && next2 != Some(b'='));
            if b != b'@' && previous != Some(b'.') && !is_key {
                out.push((token_start..token_end, &source[token_start..token_end]));
            }
            at = token_end;
            previous = Some(b'a');
            continue;
        }
        if b.is_ascii_digit() {
            // A number (possibly `1.5e3`): skip it whole so `.5` is not a member key.
            while at < end && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'.') {
                at += 1;
            }
            previous = Some(b'0');
            continue;
        }
        if !b.is_ascii_whitespace() {
            previous = Some(b);
        }
        at += 1;
    }
    out
}

/// The byte ranges in `source[range]` of the name token `name` where it is read as a
/// variable (see [`reference_tokens`]).
pub(crate) fn name_tokens(source: &str, range: Range<usize>, name: &str) -> Vec<Range<usize>> {
    reference_tokens(source, range)
        .into_iter()
        .filter(|(_, token)| *token == name)
        .map(|(at, _)| at)
        .collect()
}

/// The Levenshtein distance between `a` and `b` (in characters), or `None` when it is
/// above `max`.
pub(crate) fn edit_distance(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    let distance = row[b.len()];
    (distance <= max).then_some(distance)
}

/// The candidate closest to `name` within edit distance `max` (ties: the first in order).
pub(crate) fn closest<'c>(
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
    max: usize,
) -> Option<&'c str> {
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        if candidate == name {
            continue;
        }
        if let Some(d) = edit_distance(name, candidate, max)
            && best.is_none_or(|(b, _)| d < b)
        {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_with_multiline_values() {
        let src = "$a = 1\n  $rows = [\n {x: 1}\n]\n$q = @Query(\"runs\", {n: $a})\n<Summary/>";
        let decls = declarations(src);
        let names: Vec<&str> = decls.iter().map(|d| d.name).collect();
        assert_eq!(names, ["$a", "$rows", "$q"]);
        // A name begins with a letter or `_` (§6): `$1st` ends the declarations.
        let names: Vec<&str> = declarations("$_a = 1\n$1st = 2\n")
            .iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["$_a"]);
        assert_eq!(&src[decls[1].value_bytes.clone()], " [\n {x: 1}\n]");
        assert_eq!(
            &src[decls[1].line_bytes.clone()],
            "  $rows = [\n {x: 1}\n]\n"
        );
    }

    #[test]
    fn props_of_a_tag() {
        let src = r#"<Table rows={@Filter($r, t, t.x == "}")} title='a\'b'><Column/>"#;
        let props = tag_props(src, 0, src.len());
        assert_eq!(props.len(), 2);
        assert_eq!(
            &src[props[0].value_bytes.clone()],
            r#"{@Filter($r, t, t.x == "}")}"#
        );
        assert_eq!(&src[props[1].value_bytes.clone()], r"'a\'b'");
    }

    #[test]
    fn name_tokens_skip_strings_keys_and_members() {
        let src = r#"{@Filter($t, t, t.t && "t" == {t: t}.t)}"#;
        let found = name_tokens(src, 0..src.len(), "t");
        let starts: Vec<usize> = found.iter().map(|r| r.start).collect();
        assert_eq!(starts, [13, 16, 34]);
        let tokens: Vec<&str> = reference_tokens("`a ${1}` + $1 + $b", 0..18)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(tokens, ["a", "$b"]);
    }

    #[test]
    fn distances() {
        assert_eq!(edit_distance("$count", "$cuont", 2), Some(2));
        assert_eq!(edit_distance("$a", "$abcd", 2), None);
        assert_eq!(closest("$rowz", ["$rows", "$row"], 2), Some("$rows"));
        assert_eq!(closest("$zzz", ["$rows"], 2), None);
        // Within two edits is within two edits, however short the name.
        assert_eq!(closest("$b", ["$a"], 2), Some("$a"));
        assert_eq!(closest("$no", ["$on"], 2), Some("$on"));
        assert_eq!(closest("$ab", ["$ac"], 2), Some("$ac"));
    }
}
