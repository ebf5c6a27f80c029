//! `uiblocks check`: compile files as final replies and report every diagnostic, like
//! rustc (with source snippets) or as JSON lines, with a progress bar on standard error
//! when a terminal watches many files go by.
//!
//! Offsets: a node's or diagnostic's range is relative to its block source, which starts
//! at the fence's code start (just after the opening fence line). [`locate`] maps a
//! diagnostic back to a byte range of the file, from [`Diagnostic::bytes`] when present,
//! else from the UTF-16 range (reply-level diagnostics, such as refused blocks, carry
//! reply offsets and no bytes).

use std::io::{IsTerminal as _, Write as _};
use std::ops::Range;
use std::path::Path;

use annotate_snippets::{AnnotationKind, Level, Renderer, Snippet};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value as Json, json};
use ui_compiler::{Block, Fence, scan_fences};
use ui_core::Diagnostic;
use ui_core::text::Utf16Map;

use super::{EXIT_USAGE, compile_text, read_source};
use crate::cli::{CheckArgs, CheckFormat, SourceArgs};

/// A diagnostic placed in its file.
#[derive(Debug, Clone)]
pub struct Located<'d> {
    /// The diagnostic as the compiler reported it.
    pub diagnostic: &'d Diagnostic,
    /// Its byte range in the file.
    pub bytes: Range<usize>,
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column of the start, in characters.
    pub column: usize,
}

/// The result of checking one file.
#[derive(Debug)]
pub struct FileReport {
    /// The file's text.
    pub text: String,
    /// The compiled blocks.
    pub blocks: Vec<std::sync::Arc<Block>>,
    /// The UI fences of the text (empty with `--block`).
    pub fences: Vec<Fence>,
    /// Whether the file was checked as one block body.
    pub block_mode: bool,
}

impl FileReport {
    /// Compiles `text` as a final reply (or one block body).
    pub fn new(text: String, source: &SourceArgs) -> Self {
        let blocks = compile_text(&text, source, true);
        let fences = if source.block {
            Vec::new()
        } else {
            scan_fences(&text, &source.fence_language)
        };
        FileReport {
            text,
            blocks,
            fences,
            block_mode: source.block,
        }
    }

    /// Every diagnostic of block `index`, placed in the file.
    pub fn located(&self, index: usize) -> Vec<Located<'_>> {
        let block = &self.blocks[index];
        let code_start = if self.block_mode {
            Some(0)
        } else {
            self.fences.get(index).map(|f| f.code_start)
        };
        let code_end = if self.block_mode {
            Some(self.text.len())
        } else {
            self.fences.get(index).map(|f| f.code_end)
        };
        block
            .diagnostics
            .iter()
            .map(|d| {
                let bytes = locate(&self.text, code_start.zip(code_end), d);
                let (line, column) = line_column(&self.text, bytes.start);
                Located {
                    diagnostic: d,
                    bytes,
                    line,
                    column,
                }
            })
            .collect()
    }

    /// The number of diagnostics in all blocks.
    pub fn diagnostic_count(&self) -> usize {
        self.blocks.iter().map(|b| b.diagnostics.len()).sum()
    }
}

/// The byte range in `text` of `diagnostic`, whose block source is `text[code]` (`None`
/// when the block's fence is unknown). Diagnostics with [`Diagnostic::bytes`] are relative
/// to the block source; the others carry UTF-16 offsets of the whole text (reply-level
/// diagnostics). The range is clamped to `text` and to character boundaries.
pub fn locate(text: &str, code: Option<(usize, usize)>, diagnostic: &Diagnostic) -> Range<usize> {
    let (start, end) = match (diagnostic.bytes, code) {
        (Some(b), Some((code_start, _))) => {
            (code_start + b.start as usize, code_start + b.end as usize)
        }
        _ => {
            let map = Utf16Map::new(text);
            (
                map.byte(diagnostic.range.start as usize),
                map.byte(diagnostic.range.end as usize),
            )
        }
    };
    let floor = |mut i: usize| {
        i = i.min(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(start);
    let mut end = floor(end).max(start);
    // A range ending with its line's terminator is shown up to the terminator.
    while end > start + 1 && matches!(text.as_bytes()[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    start..end
}

/// The 1-based line and column (in characters) of byte offset `at` of `text`.
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Renders the diagnostics of `report` like rustc, for the file shown as `path`.
pub fn render_human(report: &FileReport, path: &str, renderer: &Renderer) -> String {
    let mut out = String::new();
    for index in 0..report.blocks.len() {
        for located in report.located(index) {
            let d = located.diagnostic;
            let group = Level::ERROR
                .primary_title(d.message.as_str())
                .id(d.code.as_str())
                .element(
                    Snippet::source(report.text.as_str())
                        .path(path)
                        .annotation(AnnotationKind::Primary.span(located.bytes.clone())),
                );
            out.push_str(&renderer.render(&[group]));
            out.push_str("\n\n");
        }
    }
    out
}

/// The JSON report of one file: `{file, blocks:[{id, diagnostics:[{code, message, start,
/// end, line, column, nodeId}]}]}`.
pub fn render_json(report: &FileReport, path: &str) -> Json {
    let blocks: Vec<Json> = (0..report.blocks.len())
        .map(|index| {
            let diagnostics: Vec<Json> = report
                .located(index)
                .into_iter()
                .map(|l| {
                    let d = l.diagnostic;
                    json!({
                        "code": d.code.as_str(),
                        "message": d.message,
                        "start": d.range.start,
                        "end": d.range.end,
                        "line": l.line,
                        "column": l.column,
                        "nodeId": d.node_id,
                    })
                })
                .collect();
            json!({"id": report.blocks[index].id, "diagnostics": diagnostics})
        })
        .collect();
    json!({"file": path, "blocks": blocks})
}

/// Files from which `check` shows a progress bar (when standard error is a terminal).
pub const PROGRESS_MIN_FILES: usize = 8;

/// The progress bar of a `check` of `total` files: drawn on standard error, and only when
/// that is a terminal that can redraw a line (`TERM` set and not `dumb`) and there are at
/// least [`PROGRESS_MIN_FILES`] files; otherwise hidden (every call on it does nothing).
/// Standard output never sees it, so `--format json` stays one JSON object per line.
pub fn progress_bar(total: usize) -> ProgressBar {
    if total < PROGRESS_MIN_FILES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("checking [{bar:30}] {pos}/{len} {elapsed} {wide_msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Checks every file: exit status 1 when any diagnostic was found, 2 when a file could not
/// be read, 0 otherwise. With many files and a terminal on standard error, a progress bar
/// ([`progress_bar`]) is drawn there; it is cleared while anything else is printed.
///
/// # Errors
/// When standard output fails.
pub fn run(args: &CheckArgs) -> anyhow::Result<u8> {
    let stdout = std::io::stdout();
    let on_screen = stdout.is_terminal();
    let renderer = if on_screen {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let total = args.files.len();
    let bar = progress_bar(total);
    let mut diagnostics = 0usize;
    let mut failed_files = 0usize;
    let mut unreadable = 0usize;
    for path in &args.files {
        let shown = path.display().to_string();
        bar.set_message(shown.clone());
        let output = check_one(path, &shown, args, &renderer);
        let mut write = || -> std::io::Result<()> {
            let mut out = stdout.lock();
            match &output {
                Ok((count, text)) => {
                    diagnostics += count;
                    failed_files += usize::from(*count > 0);
                    out.write_all(text.as_bytes())?;
                }
                Err(e) => {
                    unreadable += 1;
                    if args.format == CheckFormat::Json {
                        let line = json!({"file": shown, "error": format!("{e:#}")});
                        writeln!(out, "{line}")?;
                    }
                    eprintln!("uiblocks: error: {e:#}");
                }
            }
            out.flush()
        };
        // What reaches the terminal the bar is on is written with the bar taken off it.
        if on_screen || output.is_err() {
            bar.suspend(write)?;
        } else {
            write()?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if args.format == CheckFormat::Human && diagnostics > 0 {
        eprintln!(
            "uiblocks: {diagnostics} diagnostic{} in {failed_files} of {total} file{}",
            if diagnostics == 1 { "" } else { "s" },
            if total == 1 { "" } else { "s" },
        );
    }
    Ok(if unreadable > 0 {
        EXIT_USAGE
    } else {
        u8::from(diagnostics > 0)
    })
}

/// Checks one file: its diagnostic count and the text to print.
fn check_one(
    path: &Path,
    shown: &str,
    args: &CheckArgs,
    renderer: &Renderer,
) -> anyhow::Result<(usize, String)> {
    let text = read_source(path)?;
    let report = FileReport::new(text, &args.source);
    let rendered = match args.format {
        CheckFormat::Human => render_human(&report, shown, renderer),
        CheckFormat::Json => format!("{}\n", render_json(&report, shown)),
    };
    Ok((report.diagnostic_count(), rendered))
}
