//! `uiblocks mcp` driven by a real MCP client: rmcp's client over the binary's standard
//! input and output (the Inspector CLI does the same in `cargo xtask ci`).

use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value as Json, json};

/// Every exchange of a test is bounded in time.
const LIMIT: Duration = Duration::from_secs(30);

fn args(value: Json) -> rmcp::model::JsonObject {
    match value {
        Json::Object(map) => map,
        _ => unreachable!("arguments are objects"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_client_lists_and_calls_the_tools() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_uiblocks"));
    command.arg("mcp");
    let transport = TokioChildProcess::new(command).unwrap();
    let client = tokio::time::timeout(LIMIT, ().serve(transport))
        .await
        .expect("initialised in time")
        .unwrap();

    let tools = tokio::time::timeout(LIMIT, client.list_all_tools())
        .await
        .unwrap()
        .unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "check_reply",
            "describe_component",
            "list_sources",
            "preview_reply"
        ]
    );
    // Without --sources there are none, and the answer says to write no @Query.
    let none = tokio::time::timeout(
        LIMIT,
        client.call_tool(CallToolRequestParams::new("list_sources")),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(none.structured_content.unwrap()["sources"], json!([]));

    // check_reply: a lint with a fix and an error, in structured content.
    let reply =
        "Done.\n```ui\n$rows = [1]\n<Summary>{@Count($rowz)}</Summary>\n<Frobnicate/>\n```\n";
    let result = tokio::time::timeout(
        LIMIT,
        client.call_tool(
            CallToolRequestParams::new("check_reply").with_arguments(args(json!({"text": reply}))),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let structured = result.structured_content.clone().unwrap();
    assert_eq!(structured["blocks"], 1);
    assert_eq!(structured["errors"], 1);
    let findings = structured["findings"].as_array().unwrap();
    let codes: Vec<&str> = findings
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "unused_declaration",
            "undeclared_reference",
            "unknown_component"
        ]
    );
    assert_eq!(findings[1]["severity"], "warning");
    assert_eq!(findings[1]["fix"]["text"], "$rows");
    assert_eq!(findings[2]["severity"], "error");
    let text = serde_json::to_value(&result.content).unwrap().to_string();
    assert!(text.contains("warning[undeclared_reference]"), "{text}");
    assert!(text.contains("error[unknown_component]"), "{text}");

    // preview_reply with a sample reading of a query.
    let reply =
        "```ui\n$runs = @Query(\"runs\", {})\n<Summary>{@Count($runs)} runs</Summary>\n```\n";
    let result = tokio::time::timeout(
        LIMIT,
        client.call_tool(
            CallToolRequestParams::new("preview_reply").with_arguments(args(
                json!({"text": reply, "readings": {"$runs": [{"name": "a"}, {"name": "b"}]}}),
            )),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let structured = result.structured_content.unwrap();
    assert_eq!(structured["fallbackText"], "2 runs\n");
    assert!(
        structured["blocks"][0]["outline"]
            .as_str()
            .unwrap()
            .starts_with("Summary\n  \"2\"\n"),
        "{structured}"
    );
    assert_eq!(structured["blocks"][0]["evaluationErrors"], json!([]));

    // describe_component, and an unknown one as a tool error.
    let result = tokio::time::timeout(
        LIMIT,
        client.call_tool(
            CallToolRequestParams::new("describe_component")
                .with_arguments(args(json!({"name": "Slider"}))),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let structured = result.structured_content.unwrap();
    assert_eq!(structured["props"][0]["name"], "value");
    // What leaving out an optional prop means; nothing for a required one.
    assert_eq!(structured["props"][0]["whenAbsent"], Json::Null);
    assert_eq!(structured["props"][3]["name"], "step");
    assert_eq!(
        structured["props"][3]["whenAbsent"],
        "any value in the range"
    );
    let text = serde_json::to_value(&result.content).unwrap().to_string();
    assert!(
        text.contains("step: number > 0 (optional; absent → any value in the range)"),
        "{text}"
    );
    assert!(structured["example"].as_str().unwrap().contains("<Slider"));
    assert_eq!(structured["rule"], "`min < max` and `min <= value <= max`");
    let result = tokio::time::timeout(
        LIMIT,
        client.call_tool(
            CallToolRequestParams::new("describe_component")
                .with_arguments(args(json!({"name": "slider"}))),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(result.is_error, Some(true));

    // Arguments of the wrong shape are a failed call the agent can correct, not a protocol
    // error; an unknown tool stays one.
    for (tool, arguments) in [
        ("check_reply", json!({})),
        ("check_reply", json!({"text": 5})),
        ("check_reply", json!({"text": "x", "final": 1})),
        ("preview_reply", json!({"text": "x", "readings": [1]})),
        ("describe_component", json!({"name": 3})),
    ] {
        let result = tokio::time::timeout(
            LIMIT,
            client.call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments))),
        )
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{tool}: a tool error, not {e}"));
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert_eq!(
            result.structured_content.unwrap()["error"],
            "invalid_arguments"
        );
    }
    let unknown = tokio::time::timeout(
        LIMIT,
        client.call_tool(CallToolRequestParams::new("no_such_tool")),
    )
    .await
    .unwrap();
    assert!(unknown.is_err(), "{unknown:?}");

    // The catalog and guide resources and the prompt.
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources[0].uri, "uiblocks://catalog");
    assert_eq!(resources[1].uri, "uiblocks://guide");
    let guide = client
        .read_resource(ReadResourceRequestParams::new("uiblocks://guide"))
        .await
        .unwrap();
    let guide = match &guide.contents[..] {
        [rmcp::model::ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(guide, ui_cli::commands::guide::text("ui", None));
    let catalog = client
        .read_resource(ReadResourceRequestParams::new("uiblocks://catalog"))
        .await
        .unwrap();
    let catalog = serde_json::to_value(&catalog.contents).unwrap().to_string();
    assert!(catalog.contains("Slider"), "{catalog}");
    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("write_ui_block")
                .with_arguments(args(json!({"task": "the nightly build"}))),
        )
        .await
        .unwrap();
    let prompt = serde_json::to_value(&prompt.messages).unwrap().to_string();
    assert!(prompt.contains("check_reply"), "{prompt}");
    assert!(prompt.contains("the nightly build"), "{prompt}");
    // The prompt is the guide: every component's values, the rules of text.
    assert!(prompt.contains("# Writing uiblocks"), "{prompt}");
    assert!(
        prompt.contains(r#"`state` `\"done\"|\"running\"|\"pending\"|\"failed\"|\"skipped\"`"#),
        "{prompt}"
    );

    tokio::time::timeout(LIMIT, client.cancel())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reply_checks_queries_against_the_hosts_sources() {
    let hosts = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/conformance/hosts.json"
    );
    let reply = "```ui\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n\
                 $bad = @Query(\"ci.runs\", {branch: \"\"})\n\
                 <Summary>{@Count($runs)} {@Count($bad)}</Summary>\n```\n";
    let mut codes_by_server = Vec::new();
    for sources in [None, Some(hosts)] {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_uiblocks"));
        command.arg("mcp");
        if let Some(path) = sources {
            command.args(["--sources", path]);
        }
        let client =
            tokio::time::timeout(LIMIT, ().serve(TokioChildProcess::new(command).unwrap()))
                .await
                .expect("initialised in time")
                .unwrap();
        let result = tokio::time::timeout(
            LIMIT,
            client.call_tool(
                CallToolRequestParams::new("check_reply")
                    .with_arguments(args(json!({"text": reply}))),
            ),
        )
        .await
        .unwrap()
        .unwrap();
        let structured = result.structured_content.unwrap();
        let codes: Vec<String> = structured["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_owned())
            .collect();
        codes_by_server.push(codes);
        client.cancel().await.unwrap();
    }
    // Without sources both queries are unknown; with the host's, only the empty branch fails.
    assert_eq!(codes_by_server[0], ["unknown_query", "unknown_query"]);
    assert_eq!(codes_by_server[1], ["invalid_query"]);
}

/// With `--sources`, the guide resource and the `write_ui_block` prompt list the host's
/// sources, with their descriptions and rows when the file gives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guide_and_the_prompt_list_the_hosts_sources() {
    let sources = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/agent-tasks/sources.json"
    );
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_uiblocks"));
    command.args(["mcp", "--sources", sources]);
    let client = tokio::time::timeout(LIMIT, ().serve(TokioChildProcess::new(command).unwrap()))
        .await
        .expect("initialised in time")
        .unwrap();
    let loaded = ui_cli::commands::check::Sources::load(std::path::Path::new(sources)).unwrap();
    let expected = ui_cli::commands::guide::text("ui", Some(&loaded));
    let guide = tokio::time::timeout(
        LIMIT,
        client.read_resource(ReadResourceRequestParams::new("uiblocks://guide")),
    )
    .await
    .unwrap()
    .unwrap();
    let guide = match &guide.contents[..] {
        [rmcp::model::ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(guide, expected);
    assert!(
        guide.contains("- `metrics.series`: A metric's time series"),
        "{guide}"
    );
    let prompt = tokio::time::timeout(
        LIMIT,
        client.get_prompt(GetPromptRequestParams::new("write_ui_block")),
    )
    .await
    .unwrap()
    .unwrap();
    let messages = serde_json::to_value(&prompt.messages).unwrap();
    assert_eq!(messages.as_array().map(Vec::len), Some(1), "{messages}");
    let text = messages[0]["content"]["text"].as_str().unwrap().to_owned();
    assert!(text.starts_with(&expected), "{text}");
    assert!(text.contains("check_reply"), "{text}");
    let missing = tokio::time::timeout(
        LIMIT,
        client.read_resource(ReadResourceRequestParams::new("uiblocks://nothing")),
    )
    .await
    .unwrap();
    assert!(missing.is_err(), "{missing:?}");
    // list_sources: every source of the file, with its schemas and description.
    let listed = tokio::time::timeout(
        LIMIT,
        client.call_tool(CallToolRequestParams::new("list_sources")),
    )
    .await
    .unwrap()
    .unwrap();
    let listed = listed.structured_content.unwrap();
    let listed = listed["sources"].as_array().unwrap();
    assert_eq!(listed.len(), loaded.entries().len());
    let series = listed
        .iter()
        .find(|s| s["name"] == "metrics.series")
        .expect("metrics.series is listed");
    assert_eq!(series["args"]["type"], "object");
    assert!(series["result"].is_object(), "{series}");
    assert!(series["description"].is_string(), "{series}");
    client.cancel().await.unwrap();
}

/// The errors the check cannot see (an expression in text is judged when the block is
/// evaluated) are in `preview_reply`'s structured answer too, not only in its outline.
#[test]
fn preview_reply_lists_what_the_evaluation_could_not_draw() {
    let reply = "```ui\n$rows = [1, 2]\n<Summary>{@Round(1, 2, 3)}</Summary>\n<Callout tone=\"info\">{$rows.length + 1}</Callout>\n```\n";
    let answer = ui_cli::mcp::preview_reply(reply, &ui_core::Record::default(), false);
    let block = &answer.structured["blocks"][0];
    assert_eq!(block["diagnostics"], 0, "the compile saw nothing: {block}");
    let errors = block["evaluationErrors"].as_array().unwrap();
    assert!(!errors.is_empty(), "{block}");
    for error in errors {
        assert!(
            error["code"].is_string() && error["nodeId"].is_string(),
            "{error}"
        );
    }
}

/// Issue 52: each failure once in `evaluationErrors` (a node drawn as its fallback carries
/// the diagnostic's message), and a live query without a reading said as such, not as an
/// unknown field.
#[test]
fn preview_reply_says_each_failure_once_and_names_a_query_without_a_reading() {
    let reply = "```ui\n$rows = [1, 2]\n<Summary>{@Round(1, 2, 3)}</Summary>\n```\n";
    let answer = ui_cli::mcp::preview_reply(reply, &ui_core::Record::default(), false);
    let errors = answer.structured["blocks"][0]["evaluationErrors"]
        .as_array()
        .unwrap()
        .clone();
    let mut ids: Vec<&str> = errors.iter().filter_map(|e| e["nodeId"].as_str()).collect();
    let before = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), before, "one entry per failure: {errors:?}");
    assert!(
        errors.iter().all(|e| e["message"].is_string()),
        "{errors:?}"
    );

    let live = "```ui\n$incidents = @Query(\"incidents.open\", {})\n<Summary>{@Count($incidents)} open</Summary>\n```\n";
    let answer = ui_cli::mcp::preview_reply(live, &ui_core::Record::default(), false);
    let errors = answer.structured["blocks"][0]["evaluationErrors"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        errors.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no reading yet for `$incidents` (a live query)"))),
        "{errors:?}"
    );
    assert!(
        !answer.text.contains("Unknown own field"),
        "{}",
        answer.text
    );
}
