//! Decoded `ui.query` bodies remembered by their bytes, per thread.
//!
//! A page asks for the same reading again and again with the very same body (its cadence
//! re-reads carry the same chat, item, block, revision, query and values; only a
//! change-driven request adds its `seen`), and reading that JSON was the largest part of a
//! cached `ui.query` that is ours (`benches/NOTES.md`). Decoding is a function of the bytes
//! alone, so a body met before answers with the payload decoded then, prepared
//! ([`ui_host::PreparedQuery`]: what the host service derives from the payload alone is
//! worked out once per body too).
//!
//! Each thread keeps its own small table, so a lookup shares no memory with another thread
//! (no lock, no cache line moved between cores). The table is direct-mapped: a body's hash
//! picks one of [`SLOTS`] slots, which holds the last body that fell there; a miss decodes
//! as [`crate::extract`] does and takes the slot. Only bodies up to [`MAX_BODY`] bytes are
//! kept, so a thread holds at most [`SLOTS`] bodies of at most 4 KiB each (256 KiB), each
//! with its payload and what the host service keeps with it (its arguments, and under the
//! store's lease the plan of its read, which shares the chat's info, the access and the
//! feed with the service's own maps). A body that fails to decode is never kept: its error
//! is made again each time. A fixed hash seed lets a client choose bodies that share a
//! slot; all that buys it is decoding as if nothing were remembered.

use std::cell::RefCell;
use std::hash::BuildHasher as _;
use std::sync::Arc;

use ui_host::{PreparedQuery, QueryPayload};

use crate::error::ApiError;
use crate::extract::decode;

/// Slots of a thread's table.
pub(crate) const SLOTS: usize = 64;

/// The longest body kept, in bytes; a longer one is decoded every time.
pub(crate) const MAX_BODY: usize = 4 * 1024;

/// A slot of the table: the last body that fell there, with its payload.
type Slot<P> = Option<(Box<[u8]>, Arc<P>)>;

/// One thread's table of a payload type `P`.
pub(crate) struct Remembered<P> {
    slots: Vec<Slot<P>>,
}

impl<P> Default for Remembered<P> {
    fn default() -> Self {
        Remembered {
            slots: (0..SLOTS).map(|_| None).collect(),
        }
    }
}

impl<P> Remembered<P> {
    /// The payload of `bytes`: the one `make` gave before for the same bytes, else made now
    /// (and kept when the body is short enough). Errors as `make`'s, never kept.
    pub(crate) fn decode(
        &mut self,
        bytes: &[u8],
        make: fn(&[u8]) -> Result<P, ApiError>,
    ) -> Result<Arc<P>, ApiError> {
        if bytes.len() > MAX_BODY {
            return make(bytes).map(Arc::new);
        }
        // The seed is fixed: which slot a body takes needs no secrecy, only spread.
        let slot = (foldhash::fast::FixedState::with_seed(0).hash_one(bytes) as usize) % SLOTS;
        if let Some((kept, payload)) = &self.slots[slot]
            && **kept == *bytes
        {
            return Ok(Arc::clone(payload));
        }
        let payload = Arc::new(make(bytes)?);
        self.slots[slot] = Some((bytes.into(), Arc::clone(&payload)));
        Ok(payload)
    }
}

thread_local! {
    static QUERY_BODIES: RefCell<Remembered<PreparedQuery>> =
        RefCell::new(Remembered::default());
}

/// A `ui.query` body's payload, prepared, remembered by this thread
/// ([`Remembered::decode`]).
pub(crate) fn query_payload(bytes: &[u8]) -> Result<Arc<PreparedQuery>, ApiError> {
    QUERY_BODIES.with_borrow_mut(|table| table.decode(bytes, prepared))
}

/// A `ui.query` body decoded and prepared.
fn prepared(bytes: &[u8]) -> Result<PreparedQuery, ApiError> {
    decode::<QueryPayload>(bytes).map(PreparedQuery::new)
}

#[cfg(test)]
mod tests {
    use super::{MAX_BODY, Remembered, SLOTS, query_payload};
    use crate::error::ApiError;
    use crate::extract::decode;
    use proptest::prelude::*;
    use std::sync::Arc;
    use ui_host::QueryPayload;

    fn body(chat: &str, values: &str) -> String {
        format!(
            r#"{{"chatId":"{chat}","itemId":"i","blockId":"b","revision":"r","query":"$runs","values":{values}}}"#
        )
    }

    /// `bytes` as the route decodes them.
    fn payload(bytes: &[u8]) -> Result<QueryPayload, ApiError> {
        decode(bytes)
    }

    #[test]
    fn a_query_body_met_before_answers_with_the_payload_prepared_then() {
        let text = body("c-prepared", r#"{"$b":"x"}"#);
        let first = query_payload(text.as_bytes()).expect("a payload");
        let again = query_payload(text.as_bytes()).expect("a payload");
        assert!(Arc::ptr_eq(&first, &again), "prepared once");
        assert_eq!(first.payload(), &payload(text.as_bytes()).expect("decodes"));
        let bad = br#"{"chatId":"c1"}"#;
        assert_eq!(
            format!("{:?}", query_payload(bad).expect_err("missing fields")),
            format!("{:?}", payload(bad).expect_err("missing fields"))
        );
    }

    #[test]
    fn the_same_bytes_answer_with_the_payload_decoded_first() {
        let mut table = Remembered::<QueryPayload>::default();
        let text = body("c1", "{}");
        let first = table.decode(text.as_bytes(), payload).expect("a payload");
        let again = table.decode(text.as_bytes(), payload).expect("a payload");
        assert!(Arc::ptr_eq(&first, &again), "decoded once");
        assert_eq!(
            *first,
            decode::<QueryPayload>(text.as_bytes()).expect("decodes")
        );
    }

    #[test]
    fn other_bytes_are_decoded_and_errors_are_never_kept() {
        let mut table = Remembered::<QueryPayload>::default();
        let a = table
            .decode(body("c1", "{}").as_bytes(), payload)
            .expect("a payload");
        let b = table
            .decode(body("c1", r#"{"$branch":"dev"}"#).as_bytes(), payload)
            .expect("a payload");
        assert_ne!(a, b);
        let bad = br#"{"chatId":"c1"}"#;
        let error = table.decode(bad, payload).expect_err("missing fields");
        assert_eq!(
            format!("{error:?}"),
            format!(
                "{:?}",
                decode::<QueryPayload>(bad).expect_err("missing fields")
            )
        );
        assert!(table.slots.iter().flatten().all(|(kept, _)| **kept != *bad));
    }

    #[test]
    fn a_long_body_is_decoded_every_time_and_the_table_stays_bounded() {
        let mut table = Remembered::<QueryPayload>::default();
        let long = body(&"c".repeat(MAX_BODY), "{}");
        let first = table.decode(long.as_bytes(), payload).expect("a payload");
        let again = table.decode(long.as_bytes(), payload).expect("a payload");
        assert!(!Arc::ptr_eq(&first, &again), "not kept");
        assert_eq!(first, again);
        for i in 0..10 * SLOTS {
            table
                .decode(body(&format!("c{i}"), "{}").as_bytes(), payload)
                .expect("a payload");
        }
        assert_eq!(table.slots.len(), SLOTS);
        assert!(
            table
                .slots
                .iter()
                .flatten()
                .all(|(kept, _)| kept.len() <= MAX_BODY)
        );
    }

    proptest! {
        /// Whatever bodies came before, the answer is what decoding the bytes gives.
        #[test]
        fn answers_as_decoding_does(
            bodies in proptest::collection::vec(
                (0..40_usize, prop::sample::select(vec!["{}", r#"{"$b":"x"}"#, "[]", "1"]), any::<bool>()),
                1..200,
            )
        ) {
            let mut table = Remembered::<QueryPayload>::default();
            for (chat, values, cut) in bodies {
                let mut text = body(&format!("c{chat}"), values);
                if cut {
                    text.truncate(text.len() - 1);
                }
                let got = table.decode(text.as_bytes(), payload).map(|p| (*p).clone());
                let want = decode::<QueryPayload>(text.as_bytes());
                prop_assert_eq!(format!("{got:?}"), format!("{want:?}"));
            }
        }
    }
}
