//! Finding UI blocks in a Markdown reply (`language.md` §3).

use memchr::{memchr, memchr2};
use ui_core::text::trim_js;

/// One UI fence found in a reply. Offsets are UTF-8 bytes into the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// Start of the opening fence line.
    pub start: usize,
    /// Start of the block source (just after the opening line).
    pub code_start: usize,
    /// End of the block source (start of the closing line, or the end of the text).
    pub code_end: usize,
    /// End of the closing line including its line feed, or the end of the text.
    pub end: usize,
    /// Whether a closing fence line was found.
    pub closed: bool,
}

/// A fence line: marker char, run length, info (without the line terminator).
fn fence_line(line: &[u8]) -> Option<(u8, usize, &[u8])> {
    let indent = line.iter().take(4).take_while(|&&b| b == b' ').count();
    if indent > ui_core::limits::MAX_FENCE_INDENT {
        return None;
    }
    let rest = &line[indent..];
    let marker = *rest.first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let run = rest.iter().take_while(|&&b| b == marker).count();
    if run < ui_core::limits::MIN_FENCE_RUN {
        return None;
    }
    let info = &rest[run..];
    let info_end = info
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(info.len());
    Some((marker, run, &info[..info_end]))
}

fn info_text(info: &[u8]) -> &str {
    // Lines are split at ASCII bytes, so `info` is always valid UTF-8.
    trim_js(std::str::from_utf8(info).unwrap_or(""))
}

/// Scans `text` for fences and returns the UI fences (info string equal to `language`
/// after trimming), in order. An unclosed UI fence at the end is returned with
/// `closed == false`. Fences nested in another fence are content.
pub fn scan_fences(text: &str, language: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    scan_fences_with(text, language, |f| {
        out.push(f);
        true
    });
    out
}

/// Like [`scan_fences`], calling `visit` for each UI fence as it is found; scanning stops
/// when `visit` returns `false`.
pub fn scan_fences_with(text: &str, language: &str, mut visit: impl FnMut(Fence) -> bool) {
    let b = text.as_bytes();
    // (marker, run, start, code_start, is_ui)
    let mut open: Option<(u8, usize, usize, usize, bool)> = None;
    // Only fence lines change the state, so jump from one possible fence marker to the
    // next instead of walking every line.
    let mut from = 0;
    while let Some(i) = memchr2(b'`', b'~', &b[from..]).map(|i| from + i) {
        let mut start = i;
        while start > 0 && b[start - 1] == b' ' && i - start < 4 {
            start -= 1;
        }
        let at_line_start = start == 0 || b[start - 1] == b'\n';
        if !at_line_start || i - start > ui_core::limits::MAX_FENCE_INDENT {
            // Not a fence line: skip this run of markers.
            let marker = b[i];
            from = i + b[i..].iter().take_while(|&&c| c == marker).count();
            continue;
        }
        let line_end = memchr(b'\n', &b[i..]).map_or(b.len(), |j| i + j + 1);
        let line = &b[start..line_end];
        match open {
            None => {
                if let Some((marker, run, info)) = fence_line(line) {
                    let ui = info_text(info) == language;
                    open = Some((marker, run, start, line_end, ui));
                }
            }
            Some((marker, run, fence_start, code_start, ui)) => {
                if let Some((m, r, info)) = fence_line(line)
                    && m == marker
                    && r >= run
                    && info_text(info).is_empty()
                {
                    open = None;
                    if ui
                        && !visit(Fence {
                            start: fence_start,
                            code_start,
                            code_end: start,
                            end: line_end,
                            closed: true,
                        })
                    {
                        return;
                    }
                }
            }
        }
        from = line_end;
    }
    if let Some((_, _, start, code_start, true)) = open {
        visit(Fence {
            start,
            code_start: code_start.min(b.len()),
            code_end: b.len(),
            end: b.len(),
            closed: false,
        });
    }
}

/// Whether `text` has a line that opens a fence with `language` (`uiHasFence`, §3.7): a
/// cheap test that ignores nesting; only spaces and tabs may surround the language.
///
/// It answers as the reference's regular expression
/// `` ^ {0,3}(`{3,}|~{3,})[ \t]*LANG[ \t]*\r?$ `` (multiline, `LANG` literal) does, for every
/// `language`: the marker run may give characters back to a language that begins with the
/// marker (a line of four backticks opens a fence of the language `` ` ``), a language may
/// begin or end with spaces or tabs, and a language that holds a line terminator reads on
/// across it.
pub fn has_fence(text: &str, language: &str) -> bool {
    // JS multiline `^` matches at the start and after LF, CR, U+2028 and U+2029; `$` before them
    // and at the end.
    let is_break = |c: char| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}');
    let ends_line = |rest: &str| rest.chars().next().is_none_or(is_break);
    let mut line_starts = std::iter::once(0).chain(
        text.char_indices()
            .filter(|&(_, c)| is_break(c))
            .map(|(i, c)| i + c.len_utf8()),
    );
    line_starts.any(|start| {
        let line = &text[start..];
        let indent = line.bytes().take(4).take_while(|&c| c == b' ').count();
        if indent > 3 {
            return false;
        }
        let rest = &line[indent..];
        let Some(marker) = rest.bytes().next().filter(|&c| c == b'`' || c == b'~') else {
            return false;
        };
        let run = rest.bytes().take_while(|&c| c == marker).count();
        // Every run length from 3 up: `[ \t]*LANG[ \t]*` then the end of a line. A shorter
        // run leaves marker characters, which only the language itself can take.
        (3..=run).any(|taken| {
            let after = &rest[taken..];
            let blank = |from: usize| {
                from + after.as_bytes()[from..]
                    .iter()
                    .take_while(|&&c| c == b' ' || c == b'\t')
                    .count()
            };
            let lead = if taken < run { 0 } else { blank(0) };
            (0..=lead).any(|skip| {
                if !after[skip..].starts_with(language) {
                    return false;
                }
                // The blanks after the language: the leading run's end when the language ends
                // inside it (so a long run is read once), else counted from there.
                let end = skip + language.len();
                ends_line(&after[if end <= lead { lead } else { blank(end) }..])
            })
        })
    })
}

/// Whether `text` may name something the host owns (`uiMayReferenceHost`, §3.7): it holds
/// `@Query` or a `<File`, `<Diff`, `<Commit` or `<Node` tag.
pub fn may_reference_host(text: &str) -> bool {
    if text.contains("@Query") {
        return true;
    }
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr(b'<', &b[from..]) {
        let at = from + i + 1;
        for name in ["File", "Diff", "Commit", "Node"] {
            if b[at..].starts_with(name.as_bytes()) {
                let next = b.get(at + name.len());
                if !next.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
                    return true;
                }
            }
        }
        from = at;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources<'a>(text: &'a str, lang: &str) -> Vec<(&'a str, bool)> {
        scan_fences(text, lang)
            .into_iter()
            .map(|f| (&text[f.code_start..f.code_end], f.closed))
            .collect()
    }

    #[test]
    fn backticks_tildes_and_indentation() {
        assert_eq!(sources("```ui\na\n```\n", "ui"), [("a\n", true)]);
        assert_eq!(sources("~~~~ ui \na\n~~~~~\n", "ui"), [("a\n", true)]);
        assert_eq!(sources("   ```ui\na\n   ```", "ui"), [("a\n", true)]);
        assert!(sources("    ```ui\na\n```\n", "ui").is_empty());
        assert!(sources("```UI\na\n```\n", "ui").is_empty());
        assert!(sources("```ui extra\na\n```\n", "ui").is_empty());
        // A shorter or different closing run is content.
        assert_eq!(
            sources("````ui\n```\n~~~~\n````\n", "ui"),
            [("```\n~~~~\n", true)]
        );
    }

    #[test]
    fn nested_fences_are_content_and_unclosed_fences_stream() {
        assert!(sources("````md\n```ui\nx\n```\n````\n", "ui").is_empty());
        assert_eq!(sources("```ui\n<Summary>", "ui"), [("<Summary>", false)]);
        assert_eq!(sources("text\n```ui", "ui"), [("", false)]);
        assert_eq!(sources("```widget\nx\n```", "widget"), [("x\n", true)]);
        // CRLF: the CR belongs to the line; a closing line may end in CR.
        assert_eq!(sources("```ui\r\nx\r\n```\r\n", "ui"), [("x\r\n", true)]);
    }

    #[test]
    fn cheap_tests() {
        assert!(has_fence("x\n```ui\n", "ui"));
        assert!(has_fence("foo\r```ui\n", "ui"));
        assert!(has_fence("  ~~~ \tui\t", "ui"));
        assert!(!has_fence("```ui extra", "ui"));
        // The reference's regular expression, for languages that begin or end with what
        // surrounds them (found by comparing the `text` operation with the reference).
        assert!(has_fence("````", "`"));
        assert!(has_fence("~~~~   ", "~"));
        assert!(has_fence("x\r``````", "```"));
        assert!(has_fence("~~~ui ", "ui "));
        assert!(has_fence("```  ui", " ui"));
        assert!(!has_fence("```ui", " ui"));
        assert!(has_fence("```a\nb", "a\nb"));
        assert!(!has_fence("```", "`"));
        assert!(!has_fence("```ui", "~ui"));
        assert!(!has_fence("    ```ui", "ui"));
        assert!(may_reference_host("<File path=\"a\"/>"));
        assert!(may_reference_host("$q = @Query(\"a\", {})"));
        assert!(!may_reference_host("<Nodes/>"));
        assert!(may_reference_host("<Node id=\"x\"/>"));
        assert!(!may_reference_host("plain"));
    }
}
