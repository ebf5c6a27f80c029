//! [`UiState`]: the state one block keeps on a page (`language.md` §14).

use indexmap::IndexMap;
use ui_core::{Budget, Clock, Code, Failure, Record, SystemClock, UiLimits, Value};

use crate::block::Block;
use crate::compile::check_action_target;
use crate::expr::{Expr, evaluate};

/// A listener called with the new revision after every change.
pub type Listener = Box<dyn FnMut(u64) + Send>;

/// A handle returned by [`UiState::subscribe`]; pass it to [`UiState::unsubscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subscription(u64);

/// The state of one block on a page: values of its declared variables (defaults until a
/// person edits them) and readings of its queries.
///
/// Every value that enters is copied under a fresh budget with the state's limits, so a
/// value larger than that budget is refused with [`Code::BudgetExceeded`].
pub struct UiState {
    id: String,
    limits: UiLimits,
    defaults: Record,
    values: Record,
    readings: Record,
    signatures: IndexMap<String, String>,
    revision: u64,
    listeners: Vec<(u64, Listener)>,
    next_listener: u64,
    clock: std::sync::Arc<dyn Clock + Send + Sync>,
}

impl std::fmt::Debug for UiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiState")
            .field("id", &self.id)
            .field("values", &self.values)
            .field("readings", &self.readings)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

/// The JSON text that identifies a query definition; a reading is kept only while it is
/// unchanged.
pub(crate) fn query_signature(query: &crate::block::Query) -> String {
    serde_json::to_string(query).unwrap_or_default()
}

fn same_kind(a: &Value, b: &Value) -> bool {
    a.kind() == b.kind()
}

impl UiState {
    /// Uses `clock` for the time budget of every copy this state makes (the system clock by
    /// default; a frozen clock makes results independent of machine load).
    pub fn set_clock(&mut self, clock: std::sync::Arc<dyn Clock + Send + Sync>) {
        self.clock = clock;
    }

    /// A fresh state for `block` (its defaults), copying under `limits`.
    ///
    /// # Errors
    /// [`Code::BudgetExceeded`] when the defaults do not fit the copy budget.
    pub fn new(block: &Block, limits: UiLimits) -> Result<Self, Failure> {
        let mut state = UiState {
            id: String::new(),
            limits,
            defaults: Record::default(),
            values: Record::default(),
            readings: Record::default(),
            signatures: IndexMap::new(),
            revision: 0,
            listeners: Vec::new(),
            next_listener: 0,
            clock: std::sync::Arc::new(SystemClock::new()),
        };
        state.sync(block)?;
        Ok(state)
    }

    /// Copies a value into the state: fresh allocations, so no two paths of the state
    /// share a compound value (identity comparisons stay as in JavaScript).
    fn copy(&self, value: &Value) -> Result<Value, Failure> {
        Budget::new(self.limits, &*self.clock).copy_value_fresh(value)
    }

    /// Copies a record of defaults into the state. Charged as a copy; the values are shared
    /// unless some array or record occurs twice in it (then everything is copied fresh), so
    /// no two paths of the state share a compound value. A compiled block's defaults never
    /// repeat one: every evaluated literal is a new allocation.
    fn copy_record(&self, record: &Record) -> Result<Record, Failure> {
        let whole = Value::record(record.clone());
        let mut budget = Budget::new(self.limits, &*self.clock);
        let copied = if repeats_a_compound(&whole) {
            budget.copy_value_fresh(&whole)?
        } else {
            budget.copy_value(&whole)?
        };
        match copied {
            Value::Record(r) => Ok(std::sync::Arc::unwrap_or_clone(r)),
            _ => Ok(Record::default()),
        }
    }

    /// Follows a recompiled `block` (`sync`): new or changed defaults take effect, edited
    /// values of unchanged defaults are kept, values and readings of declarations that
    /// disappeared or changed are dropped. Does not bump the revision.
    ///
    /// # Errors
    /// [`Code::BudgetExceeded`] when the defaults do not fit the copy budget.
    pub fn sync(&mut self, block: &Block) -> Result<(), Failure> {
        let defaults = self.copy_record(&block.defaults)?;
        let new_id = block.id != self.id;
        if new_id {
            self.values.clear();
            self.readings.clear();
        }
        for (name, default) in &defaults {
            let keep = !new_id && self.defaults.get(name).is_some_and(|old| old == default);
            if !keep || !self.values.contains_key(name) {
                self.values.insert(name.clone(), default.clone());
            }
        }
        self.values.retain(|name, _| defaults.contains_key(name));
        let signatures: IndexMap<String, String> = block
            .queries
            .iter()
            .map(|(name, q)| (name.clone(), query_signature(q)))
            .collect();
        let old = std::mem::take(&mut self.signatures);
        self.readings.retain(|name, _| {
            signatures
                .get(name)
                .is_some_and(|s| old.get(name) == Some(s))
        });
        self.signatures = signatures;
        self.id = block.id.clone();
        self.defaults = defaults;
        Ok(())
    }

    /// The block id the state follows.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The limits every copy of this state is charged against.
    pub fn limits(&self) -> UiLimits {
        self.limits
    }

    /// The declared defaults.
    pub fn defaults(&self) -> &Record {
        &self.defaults
    }

    /// The current values of the declared variables.
    pub fn values(&self) -> &Record {
        &self.values
    }

    /// The query readings held.
    pub fn readings(&self) -> &Record {
        &self.readings
    }

    /// The revision: bumped by every change.
    pub fn snapshot(&self) -> u64 {
        self.revision
    }

    /// A copy of the values overlaid with the readings: what expressions read.
    ///
    /// # Errors
    /// [`Code::BudgetExceeded`] when the state does not fit the copy budget.
    pub fn scope(&self) -> Result<Record, Failure> {
        let mut all = self.values.clone();
        for (name, reading) in &self.readings {
            all.insert(name.clone(), reading.clone());
        }
        // Charged like a copy; the values are shared (the state holds them immutably and
        // already keeps distinct allocations per path).
        Budget::new(self.limits, &*self.clock).charge_record(&all)?;
        Ok(all)
    }

    fn changed(&mut self) {
        self.revision += 1;
        let revision = self.revision;
        for (_, listener) in &mut self.listeners {
            listener(revision);
        }
    }

    /// Sets a declared variable, as a person's edit does.
    ///
    /// # Errors
    /// [`Code::RefusedBinding`] for a name that is not a declared variable,
    /// [`Code::InvalidValue`] when the value's kind differs from the default's,
    /// [`Code::BudgetExceeded`] or [`Code::RefusedAccess`] from the copy.
    pub fn set(&mut self, name: &str, value: &Value) -> Result<(), Failure> {
        let Some(default) = self.defaults.get(name) else {
            return Err(Failure::new(
                Code::RefusedBinding,
                format!("`{name}` is not a declared variable of this block."),
            ));
        };
        let kind = default.kind();
        let value = self.copy(value)?;
        if !same_kind(&value, default) {
            return Err(Failure::new(
                Code::InvalidValue,
                format!("`{name}` holds a {kind}, not a {}.", value.kind()),
            ));
        }
        self.values.insert(name.to_owned(), value);
        self.changed();
        Ok(())
    }

    /// Stores a reading of the query `name` of `block` (`setQuery`).
    ///
    /// # Errors
    /// [`Code::RefusedQuery`] when `block` is not the block this state follows, does not
    /// declare `name` as a query, or its definition changed; copy failures as in
    /// [`UiState::set`].
    pub fn set_query(&mut self, name: &str, value: &Value, block: &Block) -> Result<(), Failure> {
        let refused = || {
            Failure::new(
                Code::RefusedQuery,
                format!("`{name}` is not a current query of this block."),
            )
        };
        if block.id != self.id {
            return Err(refused());
        }
        let Some(query) = block.queries.get(name) else {
            return Err(refused());
        };
        if self.signatures.get(name) != Some(&query_signature(query)) {
            return Err(refused());
        }
        let value = self.copy(value)?;
        self.readings.insert(name.to_owned(), value);
        self.changed();
        Ok(())
    }

    /// Runs a state action (`@Set($x, value)`, `@Reset($x)`, `@Reset()`). Unlike a Button,
    /// `run` accepts a computed `@Set` value (`@Set($n, $n + 1)`).
    ///
    /// # Errors
    /// [`Code::RefusedAction`] for anything but those three forms, [`Code::RefusedBinding`]
    /// when the target is not a declared variable, and evaluation or [`UiState::set`]
    /// failures.
    pub fn run(&mut self, action: &Expr) -> Result<(), Failure> {
        check_action_target(action, &|n| self.defaults.contains_key(n))?;
        let Expr::Call { name, args } = action else {
            return Ok(());
        };
        match (name.as_str(), args.as_slice()) {
            ("Reset", []) => self.reset_all(),
            ("Reset", [target]) => {
                let target = target.as_reference().unwrap_or_default().to_owned();
                let default = self.defaults[&target].clone();
                self.set(&target, &default)
            }
            (_, [target, value]) => {
                let target = target.as_reference().unwrap_or_default().to_owned();
                let scope = self.scope()?;
                let mut budget = Budget::new(self.limits, &*self.clock);
                let next = evaluate(value, &scope, &mut budget)?;
                self.set(&target, &next)
            }
            _ => Err(Failure::new(Code::RefusedAction, "Not a state action.")),
        }
    }

    /// Puts every variable back to its default (`@Reset()`); readings are kept.
    ///
    /// # Errors
    /// [`Code::BudgetExceeded`] when the defaults do not fit the copy budget.
    pub fn reset_all(&mut self) -> Result<(), Failure> {
        self.values = self.copy_record(&self.defaults)?;
        self.changed();
        Ok(())
    }

    /// Calls `listener` with the new revision after every change.
    pub fn subscribe(&mut self, listener: Listener) -> Subscription {
        self.next_listener += 1;
        self.listeners.push((self.next_listener, listener));
        Subscription(self.next_listener)
    }

    /// Stops calling the listener of `subscription`.
    pub fn unsubscribe(&mut self, subscription: Subscription) {
        self.listeners.retain(|(id, _)| *id != subscription.0);
    }
}

/// Whether some array or record allocation occurs more than once inside `value`.
fn repeats_a_compound(value: &Value) -> bool {
    type Seen = std::collections::HashSet<usize, ui_core::RecordHasher>;
    fn walk(value: &Value, seen: &mut Seen) -> bool {
        match value {
            Value::Array(items) => {
                !seen.insert(std::sync::Arc::as_ptr(items) as usize)
                    || items.iter().any(|item| walk(item, seen))
            }
            Value::Record(record) => {
                !seen.insert(std::sync::Arc::as_ptr(record) as usize)
                    || record.values().any(|item| walk(item, seen))
            }
            _ => false,
        }
    }
    walk(value, &mut Seen::default())
}
