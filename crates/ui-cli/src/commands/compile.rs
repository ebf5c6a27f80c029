//! `uiblocks compile` and `uiblocks fallback`.

use std::io::Write as _;

use serde_json::{Value as Json, json};

use super::{compile_text, read_source};
use crate::cli::{CompileArgs, FallbackArgs};

/// Prints `{"blocks": [...], "fallbackText": ...}` for the file, pretty-printed.
///
/// # Errors
/// When the file cannot be read or standard output fails.
pub fn run_compile(args: &CompileArgs) -> anyhow::Result<u8> {
    let text = read_source(&args.file)?;
    let blocks = compile_text(&text, &args.source, args.final_reply(), None);
    let fallback = if args.source.block {
        blocks
            .first()
            .map(|b| b.fallback.clone())
            .unwrap_or_default()
    } else {
        ui_fallback::fallback_text(&text, &blocks)
    };
    let out = json!({
        "blocks": blocks
            .iter()
            .map(|b| serde_json::to_value(&**b))
            .collect::<Result<Vec<Json>, _>>()?,
        "fallbackText": fallback,
    });
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &out)?;
    writeln!(stdout)?;
    Ok(0)
}

/// Prints the reply's plain-text fallback (a block's own fallback with `--block`).
///
/// # Errors
/// When the file cannot be read or standard output fails.
pub fn run_fallback(args: &FallbackArgs) -> anyhow::Result<u8> {
    let text = read_source(&args.file)?;
    let blocks = compile_text(&text, &args.source, true, None);
    let fallback = if args.source.block {
        blocks
            .first()
            .map(|b| b.fallback.clone())
            .unwrap_or_default()
    } else {
        ui_fallback::fallback_text(&text, &blocks)
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(fallback.as_bytes())?;
    if !fallback.is_empty() && !fallback.ends_with('\n') {
        writeln!(stdout)?;
    }
    Ok(0)
}
