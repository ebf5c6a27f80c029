//! `docs/language.md` stays true: its generated sections are what the catalog and the code
//! produce today (`UIBLOCKS_BLESS=1 cargo test -p ui-cli --test docs` rewrites them), every
//! ```ui example in it passes the checker's logic without an error or a warning, and every
//! diagnostic code is documented.

use std::path::PathBuf;

use ui_cli::cli::SourceArgs;
use ui_cli::commands::check::{FileReport, Severity};
use ui_compiler::scan_fences;
use ui_core::Code;

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/language.md")
}

fn read_doc() -> String {
    std::fs::read_to_string(doc_path()).unwrap()
}

#[test]
fn generated_sections_match_the_catalog() {
    let text = read_doc();
    let fresh = ui_cli::docs::regenerate(&text);
    if std::env::var_os("UIBLOCKS_BLESS").is_some() {
        std::fs::write(doc_path(), &fresh).unwrap();
        return;
    }
    for (name, content) in ui_cli::docs::sections() {
        let marker = format!("<!-- generated:{name} -->\n{content}<!-- end generated:{name} -->");
        assert!(
            text.contains(&marker),
            "docs/language.md: the generated section `{name}` is out of date; run \
             `UIBLOCKS_BLESS=1 cargo test -p ui-cli --test docs`"
        );
    }
    assert_eq!(text, fresh);
}

#[test]
fn every_example_checks_clean() {
    let text = read_doc();
    let fences = scan_fences(&text, "ui");
    // The generated reference holds one example per component, plus the hand-written ones.
    assert!(fences.len() >= 36 + 10, "{} examples", fences.len());
    let args = SourceArgs {
        fence_language: "ui".to_owned(),
        block: true,
    };
    for fence in fences {
        let body = text[fence.code_start..fence.code_end].to_owned();
        let report = FileReport::new(body.clone(), &args);
        let findings = report.findings(0);
        let shown: Vec<String> = findings
            .iter()
            .filter(|f| f.severity == Severity::Error || f.severity == Severity::Warning)
            .map(|f| format!("{}[{}] {}", f.severity.as_str(), f.code, f.message))
            .collect();
        // Queries need a host: only `unknown_query` may remain, and only for `@Query` lines.
        let unexpected: Vec<&String> = shown
            .iter()
            .filter(|s| !s.starts_with("error[unknown_query]"))
            .collect();
        assert!(unexpected.is_empty(), "{body}\n{unexpected:#?}");
    }
}

#[test]
fn every_diagnostic_code_is_documented() {
    let text = read_doc();
    for code in Code::ALL {
        assert!(
            text.contains(&format!("| `{}` |", code.as_str())),
            "{} is missing from the code table",
            code.as_str()
        );
    }
}
