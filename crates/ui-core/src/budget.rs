//! [`Budget`]: the metered work of one compile, evaluation or value copy
//! (`language.md` §19.2), and the [`Clock`] it reads.
//!
//! Every charge happens *before* the work it pays for. The five primitives and their order
//! of checks are normative: boundary cases of the conformance corpus depend on them.

use std::cell::Cell;
use std::time::Instant;

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

/// The monotonic wall clock of this process.
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
pub const CLOCK_CHECK_STEPS: u64 = 32;

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
pub fn check_key(key: &str) -> Result<(), Failure> {
    if is_forbidden_key(key) {
        return Err(Failure::new(
            Code::RefusedAccess,
            format!("The key `{key}` is not allowed."),
        ));
    }
    Ok(())
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
