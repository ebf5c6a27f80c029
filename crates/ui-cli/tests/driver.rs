//! The driver's answers where `driver.md` is more precise than the corpus shows: stream
//! summaries list top-level nodes only, `links` passes on only the readings of declared
//! queries, `args` answers an undeclared `name` with `invalid_query`, the query fallback
//! keeps the default limits, and half a surrogate pair counts one UTF-16 unit, as in the
//! host's own string.

use serde_json::{Value as Json, json};
use ui_cli::driver::handle;

fn schemas() -> Json {
    json!({
        "ci.runs": {
            "type": "object",
            "properties": {"branch": {"type": "string", "minLength": 1}},
            "required": ["branch"],
            "additionalProperties": false
        }
    })
}

fn request(op: &str, text: &str, extra: Json) -> Json {
    let mut r = json!({"op": op, "text": text, "querySchemas": schemas()});
    for (k, v) in extra.as_object().expect("an object") {
        r[k] = v.clone();
    }
    r
}

fn ok(response: Json) -> Json {
    assert_eq!(response["ok"], true, "{response:#}");
    response
}

/// The ids of every node of a compiled block, depth first, and of its top-level nodes.
fn ids(block: &Json) -> (Vec<String>, Vec<String>) {
    fn walk(node: &Json, out: &mut Vec<String>) {
        out.push(node["id"].as_str().unwrap().to_owned());
        for child in node["children"].as_array().unwrap() {
            walk(child, out);
        }
    }
    let mut all = Vec::new();
    let mut top = Vec::new();
    for node in block["nodes"].as_array().unwrap() {
        top.push(node["id"].as_str().unwrap().to_owned());
        walk(node, &mut all);
    }
    (all, top)
}

#[test]
fn stream_summaries_list_the_top_level_nodes_in_order() {
    let texts = [
        // Nested children at several depths, text between top-level tags.
        "Intro\n```ui\n<Stats><Stat label=\"A\" value={1}/><Stat label=\"B\" value={2}/></Stats>\nand {1 + 1}\n<Tabs><Tab title=\"x\"><Summary>in <Tag>t</Tag></Summary></Tab></Tabs>\n```\n",
        // Two blocks, one still streaming at most prefixes, one tag never closed.
        "```ui\n<Summary>one</Summary>\n```\nMiddle.\n```ui\n<Steps><Step state=\"done\">a</Step>\n<Callout tone=\"info\">b",
        // Only top-level text and expressions.
        "```ui\n$n = 3\nplain {$n} text\n```\n",
    ];
    let mut nested = 0;
    for text in texts {
        let response = ok(handle(&request("stream", text, json!({"step": 7}))));
        // The final summaries equal the final compile's top-level ids exactly.
        let compiled = ok(handle(&request("compile", text, json!({}))));
        for (summary, block) in response["final"]
            .as_array()
            .unwrap()
            .iter()
            .zip(compiled["blocks"].as_array().unwrap())
        {
            let (all, top) = ids(block);
            let listed: Vec<String> = summary["nodeIds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(listed, top, "{text:?}");
            nested += all.len() - top.len();
        }
    }
    assert!(
        nested > 5,
        "the replies have children that must not be listed"
    );
}

#[test]
fn stream_prefix_summaries_equal_the_top_level_of_each_prefix() {
    let text = "```ui\n<Stats><Stat label=\"A\" value={1}/></Stats>\n<Sections><Section title=\"S\">x</Section></Sections>\n```\n";
    let response = ok(handle(&request("stream", text, json!({"step": 5}))));
    for prefix in response["prefixes"].as_array().unwrap() {
        let length = prefix["length"].as_u64().unwrap() as usize;
        // ASCII only: UTF-16 units are bytes.
        let compiled = ok(handle(&request(
            "compile",
            &text[..length],
            json!({"final": false}),
        )));
        for (summary, block) in prefix["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .zip(compiled["blocks"].as_array().unwrap())
        {
            let (_, top) = ids(block);
            assert_eq!(summary["nodeIds"], json!(top), "prefix of {length}");
        }
    }
}

const LINKED: &str = "```ui\n$path = \"src/a.rs\"\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n<File path={$path}>a</File>\n<Show when={@Count($runs) > 0}><Commit sha=\"0123456789abcdef0123456789abcdef01234567\">c</Commit></Show>\n```\n";

#[test]
fn links_drop_readings_of_undeclared_names() {
    // Stray readings (a state variable, an unknown name) are dropped: the targets are those
    // of the declared readings alone.
    let plain = ok(handle(&request(
        "links",
        LINKED,
        json!({"queries": {"$runs": [1]}}),
    )));
    for queries in [
        json!({"$runs": [1], "$path": "elsewhere.rs"}),
        json!({"$runs": [1], "$nope": 5}),
        json!({"$runs": [1], "$path": 1, "$other": {"a": 1}}),
    ] {
        let with_stray = ok(handle(&request(
            "links",
            LINKED,
            json!({"queries": queries}),
        )));
        assert_eq!(with_stray["blocks"], plain["blocks"], "{queries}");
    }
    let targets = &plain["blocks"][0]["targets"];
    assert_eq!(targets.as_object().unwrap().len(), 2, "{targets}");
    // Per block, too.
    let per_block = ok(handle(&request(
        "links",
        LINKED,
        json!({"perBlock": true, "queries": {"0": {"$runs": [1], "$x": 2}}}),
    )));
    assert_eq!(per_block["blocks"], plain["blocks"]);
}

#[test]
fn links_refuse_an_input_naming_a_query_as_args_does() {
    for input in [
        json!({"$runs": [1]}),
        json!({"$runs": []}),
        json!({"$path": "src/a.rs", "$runs": [1, 2]}),
    ] {
        let links = ok(handle(&request(
            "links",
            LINKED,
            json!({"input": input, "queries": {"$runs": [1], "$stray": 1}}),
        )));
        assert_eq!(
            links["blocks"][0]["error"]["code"], "refused_binding",
            "{links:#}"
        );
        let args = ok(handle(&request("args", LINKED, json!({"input": input}))));
        assert_eq!(
            args["blocks"][0]["validated"]["error"]["code"], "refused_binding",
            "{args:#}"
        );
        assert_eq!(
            args["blocks"][0]["args"]["$runs"]["error"]["code"],
            "refused_binding"
        );
    }
}

/// `evalLimits` bounds evaluate, links, args and choice (`driver.md`); the `fallback`
/// operation's query fallback runs under the default limits, as upstream's
/// `uiQueryFallback`, which takes none.
#[test]
fn the_query_fallback_keeps_the_default_limits() {
    let tight = json!({"queries": {"$runs": [1, 2, 3]}, "evalLimits": {"iterations": 2}});
    let evaluated = ok(handle(&request("evaluate", LINKED, tight.clone())));
    let refused = &evaluated["blocks"][0]["applied"][0];
    assert_eq!(refused["error"]["code"], "budget_exceeded", "{evaluated}");
    let fallback = ok(handle(&request("fallback", LINKED, tight)));
    let block = &fallback["blocks"][0];
    assert_eq!(block.get("queryFallbackError"), None, "{block}");
    assert!(
        block["queryFallback"].as_str().unwrap().contains('a'),
        "{block}"
    );
}

#[test]
fn args_answer_an_undeclared_name_with_invalid_query() {
    for name in ["$nope", "$path", "runs", ""] {
        let args = ok(handle(&request("args", LINKED, json!({"name": name}))));
        let entry = &args["blocks"][0]["args"];
        assert_eq!(entry.as_object().unwrap().len(), 1, "{entry}");
        assert_eq!(
            entry[name]["error"]["code"], "invalid_query",
            "{name}: {entry}"
        );
    }
    // A declared name still answers its value; no name answers every declared query.
    let args = ok(handle(&request("args", LINKED, json!({"name": "$runs"}))));
    assert_eq!(
        args["blocks"][0]["args"]["$runs"]["value"],
        json!({"branch": "main"})
    );
    let args = ok(handle(&request("args", LINKED, json!({}))));
    assert_eq!(
        args["blocks"][0]["args"].as_object().unwrap().len(),
        1,
        "{args}"
    );
    // A block without queries answers the undeclared name too.
    let args = ok(handle(&request(
        "args",
        "```ui\n<Summary>x</Summary>\n```\n",
        json!({"name": "$runs"}),
    )));
    assert_eq!(
        args["blocks"][0]["args"]["$runs"]["error"]["code"],
        "invalid_query"
    );
}

/// Counts the `write` and `flush` calls the driver makes on its output.
#[derive(Default)]
struct Counting {
    bytes: Vec<u8>,
    writes: usize,
    flushes: usize,
}

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writes += 1;
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.flushes += 1;
        Ok(())
    }
}

#[test]
fn each_answer_is_one_write_and_one_flush_and_equals_handle() {
    let big = format!(
        "```ui\n<Stats>{}</Stats>\n```\n",
        "<Stat label=\"Runs\" value={12} unit=\"x\"/>".repeat(100)
    );
    let requests = [
        request("compile", &big, json!({"tag": 1})),
        request("stream", &big, json!({"step": 16})),
        request("evaluate", &big, json!({})),
        json!({"op": "nope", "tag": "t"}),
        request("links", LINKED, json!({"queries": {"$runs": [1]}})),
    ];
    let input: String = requests
        .iter()
        .map(|r| format!("{r}\n"))
        .chain(["not json\n".to_owned(), "\n".to_owned()])
        .collect();
    let mut out = Counting::default();
    ui_cli::driver::run(input.as_bytes(), &mut out).unwrap();
    assert_eq!(out.writes, 6, "one write per answer");
    assert_eq!(out.flushes, 6, "one flush per answer");
    let text = String::from_utf8(out.bytes).unwrap();
    let lines: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    for (line, request) in lines.iter().zip(&requests) {
        assert_eq!(*line, handle(request));
    }
    assert!(
        text.len() > 64 * 1024,
        "answers larger than the buffer's first size"
    );
    assert_eq!(lines[5]["error"]["code"], "driver:bad_json");
    assert_eq!(lines[3]["error"]["code"], "driver:unknown_op");
    assert_eq!(lines[0]["tag"], 1);
}

/// A JavaScript host's string may hold half a surrogate pair, which `JSON.stringify` writes
/// as a lone `\u` escape, and a `stream` prefix counted in UTF-16 units may end inside a
/// pair. Each half reads as U+FFFD, one unit like the half, so every offset and id is the one
/// the reference gives for the same string (checked against it: block 5..39, node 0..23,
/// and a 17-unit prefix whose block ends at 17); only the half itself is shown as U+FFFD.
#[test]
fn half_a_surrogate_pair_counts_one_unit() {
    let line = r#"{"op":"compile","text":"Hi \ud83d\n```ui\n<Summary>a\udc00 b</Summary>\n```\n"}"#;
    let response = ok(ui_cli::driver::handle_line(line));
    assert_eq!(response["fallbackText"], "Hi \u{fffd}\na\u{fffd} b\n");
    let block = &response["blocks"][0];
    assert_eq!(
        (&block["id"], &block["start"], &block["end"]),
        (&json!("reply:ui:5"), &json!(5), &json!(39))
    );
    let node = &block["nodes"][0];
    assert_eq!((&node["start"], &node["end"]), (&json!(0), &json!(23)));

    let text = "```ui\n<Summary>x\u{1f600} y</Summary>\n```\n";
    let response = ok(handle(&request("stream", text, json!({"step": 17}))));
    let prefix = &response["prefixes"][0];
    assert_eq!(prefix["length"], 17);
    assert_eq!(prefix["blocks"][0]["end"], 17, "{prefix}");
    assert_eq!(prefix["blocks"][0]["fallback"], "x\u{fffd}");
    assert_eq!(response["prefixes"][1]["blocks"][0]["end"], 34);
}
