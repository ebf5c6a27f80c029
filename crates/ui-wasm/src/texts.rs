//! The catalog, its agent texts, the limits and the reply checks that need no block.

use serde_json::{Value as Json, json};
use ui_core::catalog::PropKind;
use ui_core::{HostLimits, ReplyLimits, UiHostLimits, UiLimits, catalog};
use wasm_bindgen::prelude::*;

/// The JSON text of the agent-facing texts for the host's fence word:
/// `{catalogText, compactCatalog, sessionNote, referenceText, example}` (`driver.md`,
/// `text`).
#[wasm_bindgen(js_name = catalogTexts)]
pub fn catalog_texts(fence_language: &str) -> String {
    json!({
        "catalogText": catalog::catalog_text(),
        "compactCatalog": catalog::compact_catalog(),
        "sessionNote": catalog::session_note(fence_language),
        "referenceText": catalog::reference_text(fence_language),
        "example": catalog::example(fence_language),
    })
    .to_string()
}

/// The JSON text of the catalog: `{version, components}`, each component with its group,
/// description, props (name, the shape in words, whether required, what happens when
/// absent, and for an enumeration its values), the parent and children it allows, its
/// bound prop, its action prop and its rule between props.
#[wasm_bindgen(js_name = catalogJson)]
pub fn catalog_json() -> String {
    let components: Vec<Json> = catalog::components()
        .iter()
        .map(|c| {
            let props: Vec<Json> = c
                .props()
                .iter()
                .map(|p| {
                    let mut prop = json!({
                        "name": p.name(),
                        "kind": p.kind().to_string(),
                        "required": p.required(),
                    });
                    if let Some(absent) = p.when_absent() {
                        prop["whenAbsent"] = json!(absent);
                    }
                    if let PropKind::Enum(values) = p.kind() {
                        prop["values"] = json!(values);
                    }
                    prop
                })
                .collect();
            json!({
                "name": c.name(),
                "group": c.group().id(),
                "description": c.description(),
                "props": props,
                "parent": c.parent(),
                "children": c.children(),
                "binding": c.binding(),
                "action": c.action(),
                "crossPropRule": c.cross_prop_rule(),
            })
        })
        .collect();
    json!({"version": ui_core::CATALOG_VERSION, "components": components}).to_string()
}

/// The JSON text of every limit group with the spec's values:
/// `{UI_LIMITS, UI_REPLY_LIMITS, UI_HOST_LIMITS, HOST_LIMITS, catalogVersion}`.
#[wasm_bindgen(js_name = limitsJson)]
pub fn limits_json() -> String {
    json!({
        UiLimits::NAME: UiLimits::DEFAULT,
        ReplyLimits::NAME: ReplyLimits::DEFAULT,
        UiHostLimits::NAME: UiHostLimits::DEFAULT,
        HostLimits::NAME: HostLimits::DEFAULT,
        "catalogVersion": ui_core::CATALOG_VERSION,
    })
    .to_string()
}

/// Whether `text` holds a fence of `fence_language` (`hasUiFence`).
#[wasm_bindgen(js_name = hasFence)]
pub fn has_fence(text: &[u8], fence_language: &str) -> bool {
    std::str::from_utf8(text).is_ok_and(|text| ui_compiler::has_fence(text, fence_language))
}

/// Whether `text` may name something the host owns (`mayReferenceHost`).
#[wasm_bindgen(js_name = mayReferenceHost)]
pub fn may_reference_host(text: &[u8]) -> bool {
    std::str::from_utf8(text).is_ok_and(ui_compiler::may_reference_host)
}
