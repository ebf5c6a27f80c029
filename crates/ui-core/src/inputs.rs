//! What a person could have set on screen (`host.md` §11–§12): the rules a host relies on
//! before it reads data or sends a message for a person. They work on the evaluated
//! [`View`]; the compiler builds the view and calls them.

use std::collections::BTreeSet;

use crate::code::Code;
use crate::diag::Failure;
use crate::text::{is_js_whitespace, trim_js};
use crate::value::{Record, Value};
use crate::view::{View, ViewAction, ViewNode};

/// The variables a visible input vouches for (`host.md` §11.2): walking the live views, a
/// bound control vouches for its variable when it offers the current value (a Segmented
/// through an error-free `Option` child with that value; a Checklist when every element is
/// the value of an error-free `Item` child; any other control always), and an enabled
/// Button vouches for its target when the value it would set equals the current value.
pub(crate) fn vouched_variables(
    view: &View,
    defaults: &Record,
    values: &Record,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    view.walk_live(&mut |node, _| {
        for binding in node.bindings.values() {
            if offers(node, &binding.value) {
                out.insert(binding.variable.clone());
            }
        }
        if node.is_disabled() {
            return;
        }
        let (target, sets) = match &node.action {
            Some(ViewAction::Set { target, value }) => (target, Some(value)),
            Some(ViewAction::Reset {
                target: Some(target),
            }) => (target, defaults.get(target)),
            _ => return,
        };
        if let (Some(sets), Some(current)) = (sets, values.get(target))
            && sets == current
        {
            out.insert(target.clone());
        }
    });
    out
}

/// Whether a bound control offers `value` (`host.md` §11.2).
fn offers(node: &ViewNode, value: &Value) -> bool {
    let option_values = |kind: &str| -> Vec<&Value> {
        node.children
            .iter()
            .filter(|c| c.kind == kind && c.error.is_none())
            .filter_map(|c| c.props.get("value"))
            .collect()
    };
    match node.kind.as_str() {
        "Segmented" => option_values("Option").contains(&value),
        "Checklist" => {
            let items = option_values("Item");
            value
                .as_array()
                .is_some_and(|checked| checked.iter().all(|v| items.contains(&v)))
        }
        _ => true,
    }
}

/// Refuses with [`Code::InvalidValue`] the first of `changed` that no visible input vouches
/// for.
#[doc(hidden)]
pub fn check_vouched<'a>(
    view: &View,
    defaults: &Record,
    values: &Record,
    changed: impl IntoIterator<Item = &'a str>,
) -> Result<(), Failure> {
    let vouched = vouched_variables(view, defaults, values);
    for name in changed {
        if !vouched.contains(name) {
            return Err(Failure::new(
                Code::InvalidValue,
                format!("No visible control offers the value of `{name}`."),
            ));
        }
    }
    Ok(())
}

/// The visible choice `choice_id` of a view: its label and the context it sends
/// (`host.md` §12.3 steps 5 and 7–8).
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(hidden)]
pub struct ChoiceText {
    /// The Choice's text, whitespace collapsed and trimmed.
    pub label: String,
    /// The evaluated `context` when it is non-blank text, else the label.
    pub context: String,
}

/// Finds the live, enabled `Choice` with evaluated id `choice_id` directly inside a
/// `Choices`, and reads its label and context.
///
/// # Errors
/// [`Code::RefusedChoice`] when there is no such choice, a descendant failed, or the label is
/// empty.
#[doc(hidden)]
pub fn find_choice(view: &View, choice_id: &str) -> Result<ChoiceText, Failure> {
    let refused = |why: &str| Failure::new(Code::RefusedChoice, why.to_owned());
    let mut found = None;
    view.walk_live(&mut |node, parent| {
        if found.is_none()
            && node.id == choice_id
            && node.kind == "Choice"
            && parent.is_some_and(|p| p.kind == "Choices")
            && !node.is_disabled()
        {
            found = Some(node);
        }
    });
    let choice = found.ok_or_else(|| refused("The choice is not a visible, enabled Choice."))?;
    let mut text = String::new();
    let mut failed = false;
    for child in &choice.children {
        child.walk(&mut |n| {
            if n.error.is_some() {
                failed = true;
            } else if n.kind == "$text"
                && let Some(t) = n.props.get("text").and_then(Value::as_str)
            {
                text.push_str(t);
            }
        });
    }
    if failed {
        return Err(refused("A part of the choice's label failed."));
    }
    let label = collapse_whitespace(&text);
    if label.is_empty() {
        return Err(refused("The choice has no label."));
    }
    let context = match choice.props.get("context").and_then(Value::as_str) {
        Some(c) if !trim_js(c).is_empty() => c.to_owned(),
        _ => label.clone(),
    };
    Ok(ChoiceText { label, context })
}

/// Runs of JS whitespace collapsed to one space, then trimmed.
pub(crate) fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in trim_js(text).chars() {
        if is_js_whitespace(c) {
            space = true;
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_collapses_with_the_js_class() {
        assert_eq!(
            collapse_whitespace("  Send \n\t the\u{A0}link  "),
            "Send the link"
        );
        assert_eq!(collapse_whitespace(" \u{FEFF} "), "");
    }
}
