//! The argument memo: the arguments `query_arguments` evaluated for a block revision, query
//! and input and parsed by the query's source, so a cached `ui.query` answer neither
//! evaluates the block nor parses the arguments again.

use std::collections::VecDeque;
use std::sync::Arc;

use foldhash::HashMap;
use ui_core::{Record, Value};

/// How many evaluated query arguments the service remembers (see [`ArgumentMemo`]).
const MAX_MEMOIZED_ARGUMENTS: usize = 256;

/// The parsed arguments of a block revision, query and input, oldest first.
/// `query_arguments` is a pure function of the block, the query name and the input (under
/// the service's fixed limits); a revision names one block content (`host.md` §2.2), whose
/// query names one source of the host's fixed registry; and a source's argument schema
/// parses as a function of its input (`ValueSchema::parse`). So a remembered result is the
/// result evaluating and parsing again would give. Only successes are kept: a failure may
/// be the copy's or the evaluation's wall-time budget, which a retry may pass.
#[derive(Debug, Default)]
pub(super) struct ArgumentMemo {
    args: HashMap<String, Arc<Record>>,
    order: VecDeque<String>,
}

impl ArgumentMemo {
    pub(super) fn get(&self, key: &str) -> Option<Arc<Record>> {
        self.args.get(key).cloned()
    }

    pub(super) fn insert(&mut self, key: String, args: Arc<Record>) {
        if self.args.contains_key(&key) {
            return;
        }
        self.order.push_back(key.clone());
        self.args.insert(key, args);
        while self.args.len() > MAX_MEMOIZED_ARGUMENTS {
            match self.order.pop_front() {
                Some(old) => {
                    self.args.remove(&old);
                }
                None => break,
            }
        }
    }
}

/// A text of `value` in its own key order, with every number by its bits (`-0` and `0`
/// differ) and every key after its length: equal texts ⇔ identical values, as the argument
/// memo needs.
fn exact(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                exact(item, out);
            }
            out.push(']');
        }
        Value::Record(record) => exact_record(record, out),
        Value::Number(n) => {
            out.push('#');
            push_digits(out, n.get().to_bits(), 16);
        }
        scalar => {
            let _ = scalar.write_js_json(out);
        }
    }
}

/// [`exact`] of a record.
fn exact_record(record: &Record, out: &mut String) {
    out.push('{');
    for (key, item) in record {
        push_part(out, key);
        exact(item, out);
        out.push(',');
    }
    out.push('}');
}

/// The memo's key of a block revision, query and input.
pub(super) fn key(revision: &str, block_id: &str, name: &str, values: &Record) -> String {
    let mut k = String::with_capacity(192);
    for part in [revision, block_id, name] {
        push_part(&mut k, part);
    }
    exact_record(values, &mut k);
    k
}

/// Appends `part` after its length, so that the parts of a key never run into each other
/// (whatever characters they hold) and nothing needs escaping.
fn push_part(out: &mut String, part: &str) {
    push_digits(out, part.len() as u64, 10);
    out.push(':');
    out.push_str(part);
}

/// Appends `n` in `radix` (2..=16) without the formatting machinery (keys are built on
/// every request).
fn push_digits(out: &mut String, mut n: u64, radix: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 64];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = DIGITS[(n % radix) as usize];
        n /= radix;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[at..] {
        out.push(char::from(d));
    }
}
