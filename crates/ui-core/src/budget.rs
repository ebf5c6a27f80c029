//! [`Budget`]: the metered work of one compile, evaluation or value copy
//! (`language.md` §19.2), and the [`Clock`] it reads.
//!
//! Every charge happens *before* the work it pays for. The five primitives and their order
//! of checks are normative: boundary cases of the conformance corpus depend on them.

use std::cell::Cell;
use std::sync::Arc;
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
use std::time::Instant;

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use web_time::Instant;

use crate::code::Code;
use crate::diag::Failure;
use crate::limits::UiLimits;
use crate::text::utf16_len;
use crate::value::{Record, Value, is_forbidden_key};

/// A source of time in milliseconds for budgets and throttles.
///
/// Inject [`FrozenClock`] for deterministic results (the conformance corpus runs with one),
/// [`ManualClock`] to drive time from a test, or [`SystemClock`] in production.
pub trait Clock {
    /// The current time in milliseconds since an arbitrary fixed origin.
    fn now_ms(&self) -> f64;

    /// Whether the clock never advances; budgets then skip reading it.
    fn is_frozen(&self) -> bool {
        false
    }
}

/// A clock that always reads the same time, so wall-clock budgets never fire.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrozenClock(pub f64);

impl Clock for FrozenClock {
    fn now_ms(&self) -> f64 {
        self.0
    }
    fn is_frozen(&self) -> bool {
        true
    }
}

/// The monotonic wall clock of this process. On `wasm32-unknown-unknown`, where
/// `std::time::Instant` traps, it is JavaScript's `performance.now()` (through web-time),
/// which browsers, workers, Node.js and Bun all have.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() * 1000.0
    }
}

/// A clock a test moves by hand.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: Cell<f64>,
}

impl ManualClock {
    /// A clock reading `start` milliseconds.
    pub fn new(start: f64) -> Self {
        ManualClock {
            now: Cell::new(start),
        }
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance(&self, ms: f64) {
        self.now.set(self.now.get() + ms);
    }

    /// Sets the clock to `ms` milliseconds.
    pub fn set(&self, ms: f64) {
        self.now.set(ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> f64 {
        self.now.get()
    }
}

/// How often (in steps) a budget with a running clock reads it. Reading the clock at every
/// step would cost more than the work it meters; a frozen clock is never read.
pub(crate) const CLOCK_CHECK_STEPS: u64 = 32;

/// Metered work under one set of [`UiLimits`].
///
/// ```
/// use ui_core::{Budget, Code, FrozenClock, UiLimits};
///
/// let limits = UiLimits::DEFAULT.with("steps", 10).unwrap();
/// let mut budget = Budget::new(limits, &FrozenClock(0.0));
/// budget.step(10).unwrap();
/// assert_eq!(budget.step(1).unwrap_err().code, Code::BudgetExceeded);
/// ```
#[derive(Clone)]
pub struct Budget<'c> {
    limits: UiLimits,
    steps: u64,
    iterations: u64,
    nodes: u64,
    started: f64,
    clock: &'c dyn Clock,
    frozen: bool,
    /// What copying each large compound value charges, found by one walk: later copies of
    /// the same value (the same allocation, kept alive here) charge it in one go.
    tallies: Vec<(Value, Tally)>,
}

/// What [`Budget::charge_value`] charges for one value, from its root at depth 0.
#[derive(Debug, Clone, Copy)]
struct Tally {
    /// `depth` calls: one per value in the tree.
    values: u64,
    /// Array items and record entries: one iteration each.
    items: u64,
    /// UTF-16 units of all strings.
    units: u64,
    /// The longest string, in UTF-16 units.
    longest: u64,
    /// Levels below the root.
    height: u64,
    /// Whether some record key is forbidden.
    forbidden: bool,
}

/// Compound values with fewer values than this are walked at every copy.
const TALLY_MIN_VALUES: u64 = 64;

/// Tallies kept by one budget; past it the oldest is dropped.
const TALLY_SLOTS: usize = 8;

impl Tally {
    fn of(value: &Value) -> Tally {
        let mut tally = Tally {
            values: 0,
            items: 0,
            units: 0,
            longest: 0,
            height: 0,
            forbidden: false,
        };
        tally.add(value, 0);
        tally
    }

    fn add(&mut self, value: &Value, d: u64) {
        self.values += 1;
        self.height = self.height.max(d);
        match value {
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
            Value::String(s) => {
                let units = utf16_len(s) as u64;
                self.units += units;
                self.longest = self.longest.max(units);
            }
            Value::Array(items) => {
                self.items += items.len() as u64;
                for item in items.iter() {
                    self.add(item, d + 1);
                }
            }
            Value::Record(record) => {
                self.items += record.len() as u64;
                for (key, item) in record.iter() {
                    self.forbidden |= is_forbidden_key(key);
                    self.add(item, d + 1);
                }
            }
        }
    }
}

impl std::fmt::Debug for Budget<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("limits", &self.limits)
            .field("steps", &self.steps)
            .field("iterations", &self.iterations)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

fn exceeded(what: &str) -> Failure {
    Failure::new(
        Code::BudgetExceeded,
        format!("The block exceeded its {what} budget."),
    )
}

impl<'c> Budget<'c> {
    /// A fresh budget; its time starts now on `clock`.
    pub fn new(limits: UiLimits, clock: &'c dyn Clock) -> Self {
        Budget {
            limits,
            steps: 0,
            iterations: 0,
            nodes: 0,
            started: clock.now_ms(),
            clock,
            frozen: clock.is_frozen(),
            tallies: Vec::new(),
        }
    }

    /// The limits this budget enforces.
    #[inline]
    pub fn limits(&self) -> &UiLimits {
        &self.limits
    }

    /// The clock this budget reads.
    #[inline]
    pub fn clock(&self) -> &'c dyn Clock {
        self.clock
    }

    /// Steps used so far.
    #[inline]
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Iterations used so far.
    #[inline]
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    /// Nodes used so far.
    #[inline]
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Charges `n` steps: fails ("work budget") when the steps exceed the limit or the time
    /// since the budget started exceeds `milliseconds`.
    #[inline]
    pub fn step(&mut self, n: u64) -> Result<(), Failure> {
        let before = self.steps;
        self.steps += n;
        if self.steps > self.limits.steps() {
            return Err(exceeded("work"));
        }
        if !self.frozen && (before / CLOCK_CHECK_STEPS != self.steps / CLOCK_CHECK_STEPS) {
            self.check_time()?;
        }
        Ok(())
    }

    /// Replays, as one lump, the charges of work that an earlier run did without failing
    /// and whose results are being reused: adds `steps`, `iterations` and `nodes` when every
    /// counter stays within its limit and returns `Ok(true)`; otherwise charges nothing and
    /// returns `Ok(false)`, and the caller must redo the work charge by charge to fail at
    /// the exact point and with the exact message a fresh run would.
    ///
    /// Counters only grow and every check is `counter > limit`, so when the lump fits, no
    /// check inside the replayed work could have failed (its depth checks do not read the
    /// counters). Reads the clock as [`Budget::step`] does; `Err` is a time failure only.
    #[inline]
    pub fn replay(&mut self, steps: u64, iterations: u64, nodes: u64) -> Result<bool, Failure> {
        let fits = |used: u64, more: u64, limit: u64| {
            used.checked_add(more).is_some_and(|total| total <= limit)
        };
        if !(fits(self.steps, steps, self.limits.steps())
            && fits(self.iterations, iterations, self.limits.iterations())
            && fits(self.nodes, nodes, self.limits.nodes()))
        {
            return Ok(false);
        }
        let before = self.steps;
        self.steps += steps;
        self.iterations += iterations;
        self.nodes += nodes;
        if !self.frozen && (before / CLOCK_CHECK_STEPS != self.steps / CLOCK_CHECK_STEPS) {
            self.check_time()?;
        }
        Ok(true)
    }

    /// Reads the clock now and fails ("work budget") when the time is up.
    pub fn check_time(&self) -> Result<(), Failure> {
        if self.frozen {
            return Ok(());
        }
        let elapsed = self.clock.now_ms() - self.started;
        if elapsed > self.limits.milliseconds() as f64 {
            return Err(exceeded("work"));
        }
        Ok(())
    }

    /// Charges `n` iterations, then `n` steps; fails ("iteration budget") when the
    /// iterations exceed the limit.
    #[inline]
    pub fn iteration(&mut self, n: u64) -> Result<(), Failure> {
        self.iterations += n;
        self.step(n)?;
        if self.iterations > self.limits.iterations() {
            return Err(exceeded("iteration"));
        }
        Ok(())
    }

    /// Charges one node and one step; fails ("node budget") when the nodes exceed the
    /// limit.
    #[inline]
    pub fn node(&mut self) -> Result<(), Failure> {
        self.nodes += 1;
        self.step(1)?;
        if self.nodes > self.limits.nodes() {
            return Err(exceeded("node"));
        }
        Ok(())
    }

    /// Charges one step for a nesting level `d`; fails ("nesting budget") when `d` exceeds
    /// the depth limit.
    #[inline]
    pub fn depth(&mut self, d: u64) -> Result<(), Failure> {
        self.step(1)?;
        if d > self.limits.depth() {
            return Err(exceeded("nesting"));
        }
        Ok(())
    }

    /// Charges a string of `units` UTF-16 units: that many steps; fails ("string budget")
    /// when it is longer than `stringLength`.
    #[inline]
    pub fn string_units(&mut self, units: u64) -> Result<(), Failure> {
        self.step(units)?;
        if units > self.limits.string_length() {
            return Err(exceeded("string"));
        }
        Ok(())
    }

    /// Charges the string `s` (see [`Budget::string_units`]).
    #[inline]
    pub fn string(&mut self, s: &str) -> Result<(), Failure> {
        self.string_units(utf16_len(s) as u64)
    }

    /// Copies a value into the interpreter (`copyUiValue`, `language.md` §10.8): `depth`
    /// per nesting level, one iteration per array item and record key, `string` per string,
    /// and [`Code::RefusedAccess`] for a forbidden record key.
    ///
    /// Values are immutable, so the copy shares the value's allocations: only the charges
    /// and checks are made. Identity comparisons stay exact because every store of values
    /// (state, readings) keeps distinct allocations per path ([`Budget::copy_value_fresh`]).
    pub fn copy_value(&mut self, value: &Value) -> Result<Value, Failure> {
        self.charge_value(value, 0)?;
        Ok(value.clone())
    }

    /// Charges the copy of a record of variables (the boundary copy of one evaluation)
    /// without building it: the record at depth 0, its values at depth 1.
    pub fn charge_record(&mut self, record: &Record) -> Result<(), Failure> {
        self.depth(0)?;
        for (key, item) in record {
            self.iteration(1)?;
            check_key(key)?;
            self.charge_value(item, 1)?;
        }
        Ok(())
    }

    /// Like [`Budget::copy_value`], but the copy is a fresh allocation at every level, so
    /// no array or record of it is identical (`===`) to one of `value`. Stores of state use
    /// it, so that two paths never share a compound value.
    pub fn copy_value_fresh(&mut self, value: &Value) -> Result<Value, Failure> {
        self.charge_value(value, 0)?;
        Ok(fresh(value))
    }

    fn charge_value(&mut self, value: &Value, d: u64) -> Result<(), Failure> {
        if let Some(tally) = self.tally(value)
            && self.charge_tally(&tally, d)?
        {
            return Ok(());
        }
        self.walk_value(value, d)
    }

    /// The tally of a large array or record, from the memo or a new walk.
    fn tally(&mut self, value: &Value) -> Option<Tally> {
        let same = |kept: &Value| match (kept, value) {
            (Value::Array(a), Value::Array(b)) => Arc::ptr_eq(a, b),
            (Value::Record(a), Value::Record(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let large = match value {
            Value::Array(items) => items.len() as u64 * 2 >= TALLY_MIN_VALUES,
            Value::Record(record) => record.len() as u64 * 2 >= TALLY_MIN_VALUES,
            _ => false,
        };
        if !large {
            return None;
        }
        if let Some((_, tally)) = self.tallies.iter().find(|(kept, _)| same(kept)) {
            return Some(*tally);
        }
        let tally = Tally::of(value);
        if self.tallies.len() == TALLY_SLOTS {
            self.tallies.remove(0);
        }
        // Keeping the value keeps its allocation, so no other value can take its address.
        self.tallies.push((value.clone(), tally));
        Some(tally)
    }

    /// Charges a whole tally at depth `d` when no check of the walk could fail on the way:
    /// the counters only grow and every check compares a counter (or the depth, or one
    /// string's length) with its limit, so a walk fails iff its end state is over a limit.
    /// `Ok(false)`, charging nothing, when the walk must run to fail where it fails.
    fn charge_tally(&mut self, tally: &Tally, d: u64) -> Result<bool, Failure> {
        let structural = !tally.forbidden
            && d + tally.height <= self.limits.depth()
            && tally.longest <= self.limits.string_length();
        if !structural {
            return Ok(false);
        }
        self.replay(tally.values + tally.items + tally.units, tally.items, 0)
    }

    fn walk_value(&mut self, value: &Value, d: u64) -> Result<(), Failure> {
        self.depth(d)?;
        match value {
            Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                for item in items.iter() {
                    self.iteration(1)?;
                    self.charge_value(item, d + 1)?;
                }
                Ok(())
            }
            Value::Record(record) => {
                for (key, item) in record.iter() {
                    self.iteration(1)?;
                    check_key(key)?;
                    self.charge_value(item, d + 1)?;
                }
                Ok(())
            }
        }
    }
}

/// A deep copy with new allocations for every array and record.
fn fresh(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::array(items.iter().map(fresh).collect()),
        Value::Record(record) => Value::record(
            record
                .iter()
                .map(|(k, v)| (k.clone(), fresh(v)))
                .collect::<Record>(),
        ),
        other => other.clone(),
    }
}

/// Refuses a forbidden record key with [`Code::RefusedAccess`] (`safeKey`).
#[inline]
pub fn check_key(key: &str) -> Result<(), Failure> {
    if is_forbidden_key(key) {
        return Err(refused_key(key));
    }
    Ok(())
}

#[cold]
fn refused_key(key: &str) -> Failure {
    Failure::new(
        Code::RefusedAccess,
        format!("The key `{key}` is not allowed."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limits: UiLimits) -> Budget<'static> {
        static CLOCK: FrozenClock = FrozenClock(0.0);
        Budget::new(limits, &CLOCK)
    }

    fn message_of(r: Result<(), Failure>) -> String {
        let f = r.unwrap_err();
        assert_eq!(f.code, Code::BudgetExceeded);
        f.message.into()
    }

    #[test]
    fn steps_at_and_past_the_limit() {
        let mut b = budget(UiLimits::DEFAULT);
        b.step(20_000).unwrap();
        assert!(message_of(b.step(1)).contains("work budget"));
    }

    #[test]
    fn iterations_at_and_past_the_limit() {
        let mut b = budget(UiLimits::DEFAULT);
        b.iteration(2_000).unwrap();
        assert!(message_of(b.iteration(1)).contains("iteration budget"));
        assert_eq!(b.steps(), 2_001);
    }

    #[test]
    fn nodes_at_and_past_the_limit() {
        let mut b = budget(UiLimits::DEFAULT);
        for _ in 0..512 {
            b.node().unwrap();
        }
        assert!(message_of(b.node()).contains("node budget"));
    }

    #[test]
    fn depth_at_and_past_the_limit() {
        let mut b = budget(UiLimits::DEFAULT);
        b.depth(32).unwrap();
        assert!(message_of(b.depth(33)).contains("nesting budget"));
    }

    #[test]
    fn strings_at_and_past_the_limit() {
        let mut b = budget(UiLimits::DEFAULT);
        b.string_units(16_384).unwrap();
        assert!(message_of(b.string_units(16_385)).contains("work budget"));
        let mut b = budget(UiLimits::DEFAULT.with("steps", 100_000).unwrap());
        assert!(message_of(b.string_units(16_385)).contains("string budget"));
        let mut b = budget(UiLimits::DEFAULT);
        b.string("é🐇").unwrap();
        assert_eq!(b.steps(), 3);
    }

    #[test]
    fn time_limit_reads_an_injected_clock() {
        let clock = ManualClock::new(100.0);
        let mut b = Budget::new(UiLimits::DEFAULT, &clock);
        b.step(CLOCK_CHECK_STEPS).unwrap();
        clock.advance(30.0);
        b.check_time().unwrap();
        b.step(CLOCK_CHECK_STEPS).unwrap();
        clock.advance(1.0);
        assert!(b.step(CLOCK_CHECK_STEPS).is_err());
        // A frozen clock never fires.
        let mut f = budget(UiLimits::DEFAULT);
        f.step(19_999).unwrap();
        f.check_time().unwrap();
    }

    #[test]
    fn replay_adds_a_lump_only_when_it_fits() {
        let limits = UiLimits::DEFAULT
            .with("steps", 100)
            .and_then(|l| l.with("iterations", 10))
            .and_then(|l| l.with("nodes", 5))
            .unwrap();
        let mut b = budget(limits);
        b.step(40).unwrap();
        assert!(b.replay(60, 10, 5).unwrap());
        assert_eq!((b.steps(), b.iterations(), b.nodes()), (100, 10, 5));
        let mut b = budget(limits);
        assert!(!b.replay(101, 0, 0).unwrap());
        assert!(!b.replay(0, 11, 0).unwrap());
        assert!(!b.replay(0, 0, 6).unwrap());
        assert!(!b.replay(u64::MAX, 0, 0).unwrap());
        assert_eq!((b.steps(), b.iterations(), b.nodes()), (0, 0, 0));
        // A replay reads a running clock like a step does.
        let clock = ManualClock::new(0.0);
        let mut b = Budget::new(UiLimits::DEFAULT, &clock);
        clock.advance(31.0);
        assert!(b.replay(CLOCK_CHECK_STEPS, 0, 0).is_err());
    }

    #[test]
    fn copy_charges_the_cost_model() {
        let v = Value::from_json_str(r#"{"a": [1, "xy"], "b": null}"#).unwrap();
        let mut b = budget(UiLimits::DEFAULT);
        let copy = b.copy_value(&v).unwrap();
        assert_eq!(copy, v);
        assert!(copy.identical(&v));
        let mut fresh_budget = budget(UiLimits::DEFAULT);
        let fresh = fresh_budget.copy_value_fresh(&v).unwrap();
        assert_eq!(fresh, v);
        assert!(!fresh.identical(&v));
        assert_eq!(fresh_budget.steps(), 5 + 4 + 2);
        // depth: record(1) + a(1) + 1(1) + "xy"(1) + b(1) = 5 depth steps;
        // iterations: 2 keys + 2 items = 4 (4 steps); string "xy" = 2 steps.
        assert_eq!(b.iterations(), 4);
        assert_eq!(b.steps(), 5 + 4 + 2);
    }

    #[test]
    fn copy_refuses_forbidden_keys_and_deep_values() {
        let v = Value::from_json_str(r#"{"x": {"__proto__": 1}}"#).unwrap();
        let mut b = budget(UiLimits::DEFAULT);
        assert_eq!(b.copy_value(&v).unwrap_err().code, Code::RefusedAccess);

        let mut deep = Value::Null;
        for _ in 0..32 {
            deep = Value::array(vec![deep]);
        }
        budget(UiLimits::DEFAULT).copy_value(&deep).unwrap();
        let deeper = Value::array(vec![deep]);
        let err = budget(UiLimits::DEFAULT).copy_value(&deeper).unwrap_err();
        assert_eq!(err.code, Code::BudgetExceeded);
    }
}

#[cfg(test)]
mod tally_tests {
    use proptest::prelude::*;

    use super::*;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0..1000u32).prop_map(|n| Value::number(f64::from(n)).unwrap()),
            "[a-z😀]{0,6}".prop_map(|s| Value::from(s.as_str())),
        ];
        leaf.prop_recursive(4, 400, 48, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..48).prop_map(Value::array),
                prop::collection::vec(
                    (
                        prop_oneof![
                            8 => "[a-z]{1,3}",
                            1 => Just("constructor".to_owned())
                        ],
                        inner
                    ),
                    0..40
                )
                .prop_map(|entries| Value::record(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Charging through the memo of tallies (with its lump and its fallback) gives what
        /// walking every value gives: the same result, and the same counters after a pass.
        #[test]
        fn tallies_charge_as_the_walk(
            value in value(),
            d in 0u64..3,
            steps in 1u64..4000,
            iterations in 1u64..2000,
            depth in 1u64..6,
            string_length in 1u64..8,
        ) {
            let limits = UiLimits::DEFAULT
                .with("steps", steps).unwrap()
                .with("iterations", iterations).unwrap()
                .with("depth", depth).unwrap()
                .with("stringLength", string_length).unwrap();
            let clock = FrozenClock(0.0);
            let mut memo = Budget::new(limits, &clock);
            let mut walk = Budget::new(limits, &clock);
            // Twice: the second copy of the same allocation charges from the memo.
            for _ in 0..2 {
                let a = memo.charge_value(&value, d);
                let b = walk.walk_value_only(&value, d);
                prop_assert_eq!(&a, &b);
                if a.is_err() {
                    break;
                }
                prop_assert_eq!(
                    (memo.steps, memo.iterations, memo.nodes),
                    (walk.steps, walk.iterations, walk.nodes)
                );
            }
        }
    }

    impl Budget<'_> {
        /// The walk without the memo at any level.
        fn walk_value_only(&mut self, value: &Value, d: u64) -> Result<(), Failure> {
            self.depth(d)?;
            match value {
                Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
                Value::String(s) => self.string(s),
                Value::Array(items) => {
                    for item in items.iter() {
                        self.iteration(1)?;
                        self.walk_value_only(item, d + 1)?;
                    }
                    Ok(())
                }
                Value::Record(record) => {
                    for (key, item) in record.iter() {
                        self.iteration(1)?;
                        check_key(key)?;
                        self.walk_value_only(item, d + 1)?;
                    }
                    Ok(())
                }
            }
        }
    }
}
