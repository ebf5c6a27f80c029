//! Reconciling an edited field with its authoritative value (`sync.md` §7.8).

use std::fmt;

/// A local, editable copy of an authoritative value: `external` (the latest authoritative
/// value), `base` (the authoritative value when editing began) and `local` (what the field
/// shows). The field is *active* while focused or dirty (`local ≠ base`); while active,
/// external changes never overwrite `local`, they only raise [`EditedField::conflict`].
#[derive(Clone)]
pub struct EditedField<T> {
    external: T,
    base: T,
    local: T,
    focused: bool,
    eq: fn(&T, &T) -> bool,
}

impl<T: fmt::Debug> fmt::Debug for EditedField<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EditedField")
            .field("external", &self.external)
            .field("base", &self.base)
            .field("local", &self.local)
            .field("focused", &self.focused)
            .finish()
    }
}

impl<T: Clone + PartialEq> EditedField<T> {
    /// A clean field showing `value`, compared structurally.
    pub fn new(value: T) -> Self {
        Self::with_eq(value, |a, b| a == b)
    }
}

impl<T: Clone> EditedField<T> {
    /// A clean field showing `value`, compared with the caller's equality.
    pub fn with_eq(value: T, eq: fn(&T, &T) -> bool) -> Self {
        EditedField {
            external: value.clone(),
            base: value.clone(),
            local: value,
            focused: false,
            eq,
        }
    }

    /// What the field shows.
    pub fn local(&self) -> &T {
        &self.local
    }

    /// The latest authoritative value.
    pub fn external(&self) -> &T {
        &self.external
    }

    /// The authoritative value editing started from.
    pub fn base(&self) -> &T {
        &self.base
    }

    /// Whether `local ≠ base`.
    pub fn is_dirty(&self) -> bool {
        !(self.eq)(&self.local, &self.base)
    }

    /// Whether the field is focused or dirty.
    pub fn is_active(&self) -> bool {
        self.focused || self.is_dirty()
    }

    /// Whether the value changed elsewhere while editing (`external ≠ base`), so the UI can
    /// say "changed elsewhere".
    pub fn conflict(&self) -> bool {
        self.is_active() && !(self.eq)(&self.external, &self.base)
    }

    /// A new authoritative value arrived. Returns whether `local` was replaced (the UI
    /// redraws the field). Not active: `local = base = external`. Active: `local` stays.
    /// A value equal to `local` never replaces it (no caret jump) and makes it clean.
    pub fn set_external(&mut self, value: T) -> bool {
        if (self.eq)(&value, &self.external) && (self.eq)(&value, &self.base) {
            return false;
        }
        if (self.eq)(&value, &self.local) {
            self.base = value.clone();
            self.external = value;
            return false;
        }
        self.external = value;
        if self.is_active() {
            return false;
        }
        self.base = self.external.clone();
        self.local = self.external.clone();
        true
    }

    /// The field gained focus.
    pub fn focus(&mut self) {
        self.focused = true;
    }

    /// The user typed: `local = value`.
    pub fn edit(&mut self, value: T) {
        self.local = value;
    }

    /// The field lost focus. Clean: editing ends, `local = base = external` (returns whether
    /// `local` was replaced). Dirty: it stays active.
    pub fn blur(&mut self) -> bool {
        self.focused = false;
        if self.is_dirty() {
            return false;
        }
        self.settle()
    }

    /// Editing ends without saving: `local = base = external`. Returns whether `local` was
    /// replaced.
    pub fn discard(&mut self) -> bool {
        self.focused = false;
        self.settle()
    }

    fn settle(&mut self) -> bool {
        let changed = !(self.eq)(&self.local, &self.external);
        self.base = self.external.clone();
        if changed {
            self.local = self.external.clone();
        }
        changed
    }

    /// The value to save (`local`); send it with `X-UI-Request-Source`.
    pub fn to_save(&self) -> T {
        self.local.clone()
    }

    /// The save of `saved` succeeded: `base = saved` (and the authoritative value is now
    /// `saved`). Editing that went on meanwhile stays dirty.
    pub fn saved(&mut self, saved: T) {
        self.external = saved.clone();
        self.base = saved;
    }
}
