//! A compact JSON writer for the driver's answers (the `speedups` feature).
//!
//! It writes any [`Serialize`] value into a `Vec<u8>` with exactly the bytes
//! `serde_json::to_writer` writes (compact form: the same escapes, `itoa` integers and
//! `zmij` floats, non-finite floats as `null`), only faster: strings are scanned eight
//! bytes at a time for the characters that need an escape and copied in runs, and every
//! write goes straight to the vector instead of through `io::Write`. The property tests
//! below (and the driver's conformance tests) hold it to `serde_json`'s output.

use serde::ser::{self, Impossible, Serialize};

/// Why a value could not be written: only a map key that is not a string or a number.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Error(String);

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Appends the compact JSON of `value` to `out`.
///
/// # Errors
/// When `value`'s `Serialize` fails, or a map key is not a string, a number, a bool or a
/// char (as `serde_json` refuses it).
pub(crate) fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    value.serialize(&mut Writer { out })
}

/// The serializer: the output vector.
struct Writer<'o> {
    out: &'o mut Vec<u8>,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the eight bytes of `word` is below 0x20, `"` or `\`.
#[inline]
fn needs_escape(word: u64) -> bool {
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    // Bytes below 0x20: `b - 0x20` borrows and the byte had no high bit.
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let quote = has_zero(word ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
    (control | quote | backslash) != 0
}

/// Whether `byte` is written escaped.
#[inline]
fn escaped(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Writes `s` as a JSON string with `serde_json`'s escapes.
fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8) {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            if !needs_escape(word) {
                i += 8;
                continue;
            }
        }
        let byte = bytes[i];
        if escaped(byte) {
            out.extend_from_slice(&bytes[start..i]);
            write_escape(out, byte);
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn write_escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

fn write_int(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

fn write_float(out: &mut Vec<u8>, x: impl zmij::Float + Finite) {
    if x.finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(x).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// `is_finite` for both float widths.
trait Finite {
    fn finite(&self) -> bool;
}

impl Finite for f32 {
    fn finite(&self) -> bool {
        self.is_finite()
    }
}

impl Finite for f64 {
    fn finite(&self) -> bool {
        self.is_finite()
    }
}

/// An array or object being written: whether an element was written yet.
struct Compound<'w, 'o> {
    writer: &'w mut Writer<'o>,
    first: bool,
    /// The closing bytes: `]`, `}`, or `]}` / `}}` for an enum variant.
    close: &'static [u8],
}

impl Compound<'_, '_> {
    fn comma(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.writer.out.push(b',');
        }
    }

    fn key(&mut self, key: &str) {
        self.comma();
        write_str(self.writer.out, key);
        self.writer.out.push(b':');
    }

    fn finish(self) {
        self.writer.out.extend_from_slice(self.close);
    }
}

impl<'w, 'o> Writer<'o> {
    fn open(&'w mut self, open: &[u8], close: &'static [u8]) -> Compound<'w, 'o> {
        self.out.extend_from_slice(open);
        Compound {
            writer: self,
            first: true,
            close,
        }
    }

    fn variant_open(&'w mut self, variant: &str, open: u8, close: &'static [u8]) -> Compound<'w, 'o> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        self.out.push(open);
        Compound {
            writer: self,
            first: true,
            close,
        }
    }
}

impl<'w, 'o> ser::Serializer for &'w mut Writer<'o> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'w, 'o>;
    type SerializeTuple = Compound<'w, 'o>;
    type SerializeTupleStruct = Compound<'w, 'o>;
    type SerializeTupleVariant = Compound<'w, 'o>;
    type SerializeMap = Compound<'w, 'o>;
    type SerializeStruct = Compound<'w, 'o>;
    type SerializeStructVariant = Compound<'w, 'o>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        write_int(self.out, v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        write_float(self.out, v);
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        write_float(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        let mut seq = self.open(b"[", b"]");
        for byte in v {
            seq.comma();
            write_int(seq.writer.out, *byte);
        }
        seq.finish();
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Ok(self.variant_open(variant, b'[', b"]}"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Ok(self.open(b"{", b"}"))
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Ok(self.open(b"{", b"}"))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Ok(self.variant_open(variant, b'{', b"}}"))
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.comma();
        key.serialize(KeyWriter {
            out: self.writer.out,
        })?;
        self.writer.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.key(key);
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish();
        Ok(())
    }
}

/// A map key: strings as they are; numbers, bools and chars quoted, as `serde_json` writes
/// them; anything else refused.
struct KeyWriter<'o> {
    out: &'o mut Vec<u8>,
}

fn key_error() -> Error {
    Error("key must be a string".to_owned())
}

impl KeyWriter<'_> {
    fn quoted(self, text: &[u8]) -> Result<(), Error> {
        self.out.push(b'"');
        self.out.extend_from_slice(text);
        self.out.push(b'"');
        Ok(())
    }

    fn int(self, n: impl itoa::Integer) -> Result<(), Error> {
        self.quoted(itoa::Buffer::new().format(n).as_bytes())
    }

    fn float(self, x: impl zmij::Float + Finite) -> Result<(), Error> {
        if !x.finite() {
            return Err(Error("float key must be finite".to_owned()));
        }
        self.quoted(zmij::Buffer::new().format_finite(x).as_bytes())
    }
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted(if v { b"true" } else { b"false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.int(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.float(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.float(v)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_error())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_error())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_error())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value as Json, json};

    fn ours<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out, value).expect("writes");
        out
    }

    fn same<T: Serialize + ?Sized>(value: &T) {
        let theirs = serde_json::to_vec(value).expect("serde_json writes");
        assert_eq!(
            String::from_utf8_lossy(&ours(value)),
            String::from_utf8_lossy(&theirs)
        );
    }

    #[test]
    fn escapes_like_serde_json() {
        for s in [
            "",
            "plain",
            "exactly8",
            "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{0}i\u{1f}j\u{7f}",
            "\"\"\"\"\"\"\"\"\"",
            "long text without escapes but with é, 漢字 and 🙂 in it",
            "1234567\n1234567\"",
        ] {
            same(s);
        }
        for byte in 0u8..128 {
            same(&String::from(char::from(byte)).repeat(9));
        }
    }

    #[test]
    fn shapes_like_serde_json() {
        #[derive(serde::Serialize)]
        enum E {
            Unit,
            New(u8),
            Tuple(u8, String),
            Struct { a: Option<f64>, b: Vec<u8> },
        }
        same(&json!({"a": [1, -2, 3.5, 1e300, null, true, {"x\n": {}}], "b": []}));
        same(&vec![E::Unit, E::New(7), E::Tuple(1, "t".into())]);
        same(&E::Struct {
            a: Some(f64::NAN),
            b: vec![],
        });
        same(&(1u128, -5i128, 'c', 0.1f32, f32::INFINITY, ()));
        same(&std::collections::BTreeMap::from([(1, "one"), (-2, "two")]));
        same(&std::collections::BTreeMap::from([(true, 1)]));
        assert!(write(&mut Vec::new(), &std::collections::BTreeMap::from([((), 1)])).is_err());
    }

    fn json_value() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            any::<i64>().prop_map(Json::from),
            any::<u64>().prop_map(Json::from),
            any::<f64>().prop_map(Json::from),
            any::<String>().prop_map(Json::String),
            "[\\x00-\\x7f]{0,20}".prop_map(Json::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Json::Array),
                prop::collection::vec((any::<String>(), inner), 0..8)
                    .prop_map(|entries| Json::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_json_writes_like_serde_json(value in json_value()) {
            prop_assert_eq!(ours(&value), serde_json::to_vec(&value).unwrap());
        }

        #[test]
        fn any_value_writes_like_serde_json(value in json_value()) {
            let value = ui_core::Value::from(&value);
            prop_assert_eq!(ours(&value), serde_json::to_vec(&value).unwrap());
        }

        #[test]
        fn any_string_writes_like_serde_json(s in any::<String>()) {
            prop_assert_eq!(ours(&s), serde_json::to_vec(&s).unwrap());
        }
    }
}
