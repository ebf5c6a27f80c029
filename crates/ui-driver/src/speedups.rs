//! The driver's fast answer writer, behind the default-on `speedups` feature.
//!
//! serde_json escapes a string one byte at a time and writes it through three `io::Write`
//! calls. A `compile` answer is mostly strings (ids, prop values, every node's fallback and
//! the block's): in the `stats100` benchmark serde_json's string writing was a third of the
//! driver's instructions (callgrind), more than parsing the block. sonic-rs's serializer
//! looks for a byte to escape with SIMD compares, many bytes at a time, and writes straight
//! into the buffer's spare capacity (the figures are in the crate docs and
//! `benches/NOTES.md`).
//!
//! A `compile` answer's blocks are written by hand ([`write_response`]): every key of a
//! block and a node, with its quotes, colon and the comma before it, is one ready-made run
//! of bytes, and an empty `props`, `expressions`, `bindings` or `children` is `{}` or `[]`
//! at once. Through serde each key was a string to scan and three writes: the `stats100`
//! answer has 1,345 keys for 514 string values, and the hand-written skeleton took a fifth
//! of the driver's instructions per request away (callgrind, 1.05 M → 0.84 M). Strings go
//! through sonic-rs's own escaper and every other value (numbers, state, queries,
//! expressions, diagnostics) through its serializer, so only the skeleton is ours.
//!
//! It writes the bytes serde_json writes, which the tests below hold it to (and
//! `tests/conformance.rs`, for every answer of the corpus):
//!
//! - the same escapes: `\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`, the other controls as
//!   `\u00xx` in lower-case hex, everything else (`/`, DEL, non-ASCII) as is;
//! - the same numbers: integers by itoa, floats by zmij (the crates serde_json uses), and
//!   `null` for a float that is not finite;
//! - compact output: no spaces, keys in the order the value gives them (for a block and a
//!   node, the order of their fields, as serde's derive writes them).
//!
//! `cargo build --no-default-features -p ui-driver` leaves it out: the driver then writes with
//! serde_json, and CI lints that build.

use std::io;

use serde::Serialize;
use sonic_rs::format::{CompactFormatter, Formatter as _};
use ui_compiler::{Block, Node};
use ui_core::{PropMap, Value};

use crate::protocol::{Answer, Response};

/// Appends `value` to `buffer` as compact JSON.
pub(crate) fn write_json<T: Serialize + ?Sized>(buffer: &mut Vec<u8>, value: &T) -> io::Result<()> {
    sonic_rs::to_writer(buffer, value).map_err(io::Error::from)
}

/// Appends `response` to `buffer` as compact JSON: a `compile` answer with its blocks
/// written by hand (the module docs say why), any other answer through [`write_json`].
pub(crate) fn write_response(buffer: &mut Vec<u8>, response: &Response<'_>) -> io::Result<()> {
    let Ok(Answer::Compile {
        blocks,
        fallback_text,
    }) = &response.result
    else {
        return write_json(buffer, response);
    };
    // The keys and their order are `Response`'s `Serialize`.
    buffer.extend_from_slice(br#"{"op":"#);
    write_json(buffer, response.op)?;
    if let Some(tag) = response.tag {
        buffer.extend_from_slice(br#","tag":"#);
        write_json(buffer, tag)?;
    }
    buffer.extend_from_slice(br#","ok":true,"blocks":"#);
    write_blocks(buffer, blocks)?;
    buffer.extend_from_slice(br#","fallbackText":"#);
    string(buffer, fallback_text)?;
    buffer.push(b'}');
    Ok(())
}

/// `blocks` as a JSON array of blocks, as serde's derive writes them.
pub(crate) fn write_blocks<B: AsRef<Block>>(buffer: &mut Vec<u8>, blocks: &[B]) -> io::Result<()> {
    write_array(buffer, blocks, |buffer, block| {
        write_block(buffer, block.as_ref())
    })
}

/// A block as serde's derive writes it: its fields in order, `revision` only when set.
/// Every field is named, so a field added to [`Block`] stops the build here.
fn write_block(buffer: &mut Vec<u8>, block: &Block) -> io::Result<()> {
    let Block {
        id,
        catalog_version,
        revision,
        start,
        end,
        complete,
        defaults,
        queries,
        nodes,
        diagnostics,
        fallback,
    } = block;
    buffer.extend_from_slice(br#"{"id":"#);
    string(buffer, id)?;
    buffer.extend_from_slice(br#","catalogVersion":"#);
    CompactFormatter.write_u32(buffer, *catalog_version)?;
    if let Some(revision) = revision {
        buffer.extend_from_slice(br#","revision":"#);
        string(buffer, revision)?;
    }
    buffer.extend_from_slice(br#","start":"#);
    CompactFormatter.write_u32(buffer, *start)?;
    buffer.extend_from_slice(br#","end":"#);
    CompactFormatter.write_u32(buffer, *end)?;
    buffer.extend_from_slice(br#","complete":"#);
    CompactFormatter.write_bool(buffer, *complete)?;
    buffer.extend_from_slice(br#","defaults":"#);
    write_json(buffer, defaults)?;
    buffer.extend_from_slice(br#","queries":"#);
    write_json(buffer, queries)?;
    buffer.extend_from_slice(br#","nodes":"#);
    write_array(buffer, nodes, write_node)?;
    buffer.extend_from_slice(br#","diagnostics":"#);
    write_json(buffer, diagnostics)?;
    buffer.extend_from_slice(br#","fallback":"#);
    string(buffer, fallback)?;
    buffer.push(b'}');
    Ok(())
}

/// `items` as a JSON array, each written by `write`.
fn write_array<T>(
    buffer: &mut Vec<u8>,
    items: &[T],
    write: impl Fn(&mut Vec<u8>, &T) -> io::Result<()>,
) -> io::Result<()> {
    buffer.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            buffer.push(b',');
        }
        write(buffer, item)?;
    }
    buffer.push(b']');
    Ok(())
}

/// A node as serde's derive writes it: its fields in order, `error` only when set, and
/// not its byte range (`#[serde(skip)]`). Every field is named, so a field added to
/// [`Node`] stops the build here.
fn write_node(buffer: &mut Vec<u8>, node: &Node) -> io::Result<()> {
    let Node {
        id,
        kind,
        props,
        expressions,
        bindings,
        children,
        complete,
        fallback,
        error,
        start,
        end,
        bytes: _,
    } = node;
    buffer.extend_from_slice(br#"{"id":"#);
    string(buffer, id)?;
    buffer.extend_from_slice(br#","type":"#);
    string(buffer, kind)?;
    buffer.extend_from_slice(br#","props":"#);
    write_props(buffer, props)?;
    buffer.extend_from_slice(br#","expressions":"#);
    if expressions.is_empty() {
        buffer.extend_from_slice(b"{}");
    } else {
        write_json(buffer, expressions)?;
    }
    buffer.extend_from_slice(br#","bindings":"#);
    if bindings.is_empty() {
        buffer.extend_from_slice(b"{}");
    } else {
        write_json(buffer, bindings)?;
    }
    buffer.extend_from_slice(br#","children":"#);
    write_array(buffer, children, write_node)?;
    buffer.extend_from_slice(br#","complete":"#);
    CompactFormatter.write_bool(buffer, *complete)?;
    buffer.extend_from_slice(br#","fallback":"#);
    string(buffer, fallback)?;
    if let Some(code) = error {
        buffer.extend_from_slice(br#","error":"#);
        string(buffer, code.as_str())?;
    }
    buffer.extend_from_slice(br#","start":"#);
    CompactFormatter.write_u32(buffer, *start)?;
    buffer.extend_from_slice(br#","end":"#);
    CompactFormatter.write_u32(buffer, *end)?;
    buffer.push(b'}');
    Ok(())
}

/// Constant props: text and flags written here (most props are), other values through
/// their own `Serialize`.
fn write_props(buffer: &mut Vec<u8>, props: &PropMap<Value>) -> io::Result<()> {
    buffer.push(b'{');
    for (i, (key, value)) in props.iter().enumerate() {
        if i > 0 {
            buffer.push(b',');
        }
        string(buffer, key)?;
        buffer.push(b':');
        match value {
            Value::String(s) => string(buffer, s)?,
            Value::Bool(b) => CompactFormatter.write_bool(buffer, *b)?,
            other => write_json(buffer, other)?,
        }
    }
    buffer.push(b'}');
    Ok(())
}

/// A JSON string with its quotes, escaped by sonic-rs.
fn string(buffer: &mut Vec<u8>, s: &str) -> io::Result<()> {
    CompactFormatter.write_string_fast(buffer, s, true)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, Value as Json};
    use ui_core::{Number, Record, Value};

    use super::*;

    /// Both writers' bytes for `value`.
    fn both<T: Serialize + ?Sized>(value: &T) -> (String, String) {
        let mut fast = Vec::new();
        write_json(&mut fast, value).expect("sonic-rs writes");
        let plain = serde_json::to_vec(value).expect("serde_json writes");
        (
            String::from_utf8(fast).expect("UTF-8"),
            String::from_utf8(plain).expect("UTF-8"),
        )
    }

    /// Strings rich in what a writer may get wrong: every control character, quotes,
    /// backslashes, `/`, DEL, multi-byte characters (U+2028 among them), at any offset and
    /// in runs longer than a vector.
    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => "[a-zA-Z0-9 .:-]{0,40}",
            2 => (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap_or('?').to_string()),
            1 => Just("\"".to_owned()),
            1 => Just("\\".to_owned()),
            1 => Just("/\u{7f}".to_owned()),
            1 => Just("é\u{2028}\u{2029}€𝄞".to_owned()),
            1 => any::<String>(),
        ];
        proptest::collection::vec(piece, 0..8).prop_map(|pieces| pieces.concat())
    }

    /// Floats of every kind: bit patterns (subnormals, huge, tiny, non-finite) and the
    /// ordinary decimals of data.
    fn float() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            (-1e6f64..1e6).prop_map(|x| (x * 1000.0).round() / 1000.0),
            Just(0.1 + 0.2),
            Just(1e21),
            Just(-0.0),
            Just(f64::MIN_POSITIVE / 4.0),
        ]
    }

    /// `serde_json` values: what the driver's small answers are built from.
    fn json() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            any::<i64>().prop_map(Json::from),
            any::<u64>().prop_map(Json::from),
            float().prop_map(Json::from),
            text().prop_map(Json::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
                proptest::collection::vec((text(), inner), 0..6)
                    .prop_map(|entries| Json::Object(entries.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    /// `ui_core` values: what compiled blocks hold (props, defaults, readings).
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            float().prop_map(|x| Number::new(x).map_or(Value::Null, Value::from)),
            any::<i32>().prop_map(Value::from),
            text().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::vec((text(), inner), 0..6)
                    .prop_map(|entries| Value::from(entries.into_iter().collect::<Record>())),
            ]
        })
    }

    /// Replies with blocks whose props, text and declarations carry `text()`, followed by
    /// pieces of block that give nodes every field a node and a block can have (constant
    /// props of every kind, expressions, bindings, children, errors, queries, diagnostics),
    /// cut anywhere, so that incomplete nodes and blocks come too.
    fn reply() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("<Switch label=\"On\" value={$on}/>"),
            Just("<Slider label=\"N\" min={0} max={10} step={0.5} value={$n}/>"),
            Just("<Segmented value={$tab}><Option value=\"a\">A</Option></Segmented>"),
            Just("<Table rows={$rows}><Column key=\"name\" title=\"Name\"/></Table>"),
            Just("<Chart kind=\"bar\" data={[{x: 1, y: 2.5}]} x=\"x\" y={[\"y\"]}/>"),
            Just("<Show when={$on}><Summary>shown</Summary></Show>"),
            Just("<Each items={$rows} as=\"row\"><Stat label={$row.name} value={1}/></Each>"),
            Just("<Stat label=\"x\" value=\"not a number\"/>"),
            Just("<Nope a=\"b\"/>"),
            Just("<Summary>unclosed"),
            Just("<Button label=\"Go\" action={@Set($n, 3)}/>"),
            Just("<Steps><Step title=\"a\" state=\"done\"/></Steps>"),
            Just("<File path=\"src/main.rs\" line={3}/>"),
            Just("</Stats>"),
            Just("{$missing}"),
            Just(
                "<Choices><Choice primary={true} disabled={false} context=\"c\">Yes</Choice></Choices>"
            ),
            Just("<Show when={false}><Tag>t</Tag></Show>"),
            Just("<Checklist value={$picked}><Item value={null}>none</Item></Checklist>"),
        ];
        (
            text(),
            text(),
            text(),
            float(),
            proptest::collection::vec(piece, 0..6),
            0usize..400,
        )
            .prop_map(|(label, body, prose, x, pieces, cut)| {
                let quoted = serde_json::to_string(&label).unwrap_or_default();
                let mut reply = format!(
                    "{prose}\n```ui\n$x = {x:?}\n$s = {quoted}\n$on = true\n$n = 2\n\
                     $tab = \"a\"\n$picked = []\n$rows = @Query(\"ci.runs\", {{branch: $tab}})\n\
                     <Summary>{body}</Summary>\n\
                     <Stats><Stat label={quoted} value={{$x}} unit=\"ms\"/></Stats>\n\
                     <Callout tone=\"info\">{body} {{$s}}</Callout>\n{}\n```\n{prose}",
                    pieces.concat()
                );
                if cut < reply.len() {
                    let mut at = reply.len() - cut;
                    while !reply.is_char_boundary(at) {
                        at -= 1;
                    }
                    reply.truncate(at);
                }
                reply
            })
    }

    /// Both writers' bytes for a driver answer: [`write_response`] and serde_json.
    fn both_answers(response: &Response<'_>) -> (String, String) {
        let mut fast = Vec::new();
        write_response(&mut fast, response).expect("the hand writer writes");
        let plain = serde_json::to_vec(response).expect("serde_json writes");
        (
            String::from_utf8(fast).expect("UTF-8"),
            String::from_utf8(plain).expect("UTF-8"),
        )
    }

    #[test]
    fn writes_a_hosts_revision_and_a_tag_as_serde_json_does() {
        let request = serde_json::json!({
            "op": "compile", "tag": {"n": [1, "two"]}, "final": true,
            "text": "```ui\n<Summary>a</Summary>\n```\n```ui\n<Nope/>\n```",
        });
        let mut response = crate::protocol::respond(&request);
        let Ok(Answer::Compile { blocks, .. }) = &mut response.result else {
            panic!("a compile answer");
        };
        assert_eq!(blocks.len(), 2);
        let mut block = (*blocks[0]).clone();
        block.revision = Some("r\"1".to_owned());
        blocks[0] = std::sync::Arc::new(block);
        let (fast, plain) = both_answers(&response);
        assert!(fast.contains(r#""revision":"r\"1""#), "{fast}");
        assert!(fast.contains(r#""tag":{"n":[1,"two"]}"#), "{fast}");
        assert!(fast.contains(r#""error":""#), "{fast}");
        assert_eq!(fast, plain);
    }

    #[test]
    fn writes_what_serde_json_writes_at_the_edges() {
        let controls: String = (0u8..0x20).map(char::from).collect();
        for s in [
            "",
            "\"",
            "\\",
            "a\"b\\c",
            &controls,
            "\u{7f}/</script>",
            "é\u{2028}𝄞",
            &"x".repeat(100),
            &format!("{}\n{}", "y".repeat(31), "z".repeat(33)),
        ] {
            let (fast, plain) = both(s);
            assert_eq!(fast, plain, "{s:?}");
        }
        for x in [
            0.0,
            -0.0,
            1.5,
            1e21,
            1e-7,
            f64::MAX,
            f64::NAN,
            f64::INFINITY,
        ] {
            let (fast, plain) = both(&x);
            assert_eq!(fast, plain, "{x:?}");
        }
    }

    proptest! {
        #[test]
        fn writes_serde_json_values_as_serde_json_does(v in json()) {
            let (fast, plain) = both(&v);
            prop_assert_eq!(fast, plain);
        }

        #[test]
        fn writes_ui_values_as_serde_json_does(v in value()) {
            let (fast, plain) = both(&v);
            prop_assert_eq!(fast, plain);
        }

        /// Whole answers of every operation that carries compiled blocks, through the
        /// driver's own `respond`.
        #[test]
        fn writes_driver_answers_as_serde_json_does(text in reply(), step in 1usize..40) {
            for op in ["compile", "stream", "evaluate", "text", "fallback", "links"] {
                let request = serde_json::json!({
                    "op": op, "text": text, "step": step, "final": step % 2 == 0,
                });
                let response = crate::protocol::respond(&request);
                let (fast, plain) = both_answers(&response);
                prop_assert_eq!(fast, plain, "{}", op);
            }
        }
    }
}
