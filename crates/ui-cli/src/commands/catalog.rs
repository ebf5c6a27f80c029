//! `uiblocks catalog`: the agent-facing texts.

use std::io::Write as _;

use ui_core::catalog;

use crate::cli::{CatalogArgs, CatalogFormat};

/// The text `format` selects.
pub fn text(format: CatalogFormat, fence_language: &str) -> String {
    match format {
        CatalogFormat::Text => catalog::catalog_text(),
        CatalogFormat::Compact => catalog::compact_catalog(),
        CatalogFormat::Note => catalog::session_note(fence_language),
        CatalogFormat::Reference => catalog::reference_text(fence_language),
    }
}

/// Prints the selected text.
///
/// # Errors
/// When standard output fails.
pub fn run(args: &CatalogArgs) -> anyhow::Result<u8> {
    let text = text(args.format, &args.fence_language);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(stdout)?;
    }
    Ok(0)
}
