//! End-to-end tests of the `uiblocks` binary on temporary files.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value as Json;

const OK_REPLY: &str = "Here you go.\n\n```ui\n<Summary>Done</Summary>\n```\n";
const BAD_REPLY: &str = "Intro line.\n\n```ui\n<Summary>Done</Summary>\n<Frobnicate />\n```\n";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_uiblocks"))
}

/// A temporary file unique to this test process and `name`.
fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uiblocks-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

/// The findings of the first block of a `check --format json` of one file.
fn first_block_findings(out: &Output) -> Vec<Json> {
    let v: Json = serde_json::from_str(stdout(out).trim()).unwrap();
    v["blocks"][0]["findings"].as_array().unwrap().clone()
}

/// `uiblocks <args>` running with piped standard input and output, as a driver host runs it.
fn piped(args: &[&str]) -> std::process::Child {
    bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn check_ok_file_exits_0() {
    let path = temp_file("ok.md", OK_REPLY);
    let out = run(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), "ok: 1 file, 1 block, 0 errors, 0 warnings\n");
    let quiet = run(&["check", "--quiet", path.to_str().unwrap()]);
    assert_eq!(quiet.status.code(), Some(0));
    assert_eq!(stderr(&quiet), "");
}

/// A reply whose block compiles clean but has three lints; one of them, the typo `$rowz`,
/// also fails when the block is drawn.
const LINTED_REPLY: &str = "Intro.\n\n```ui\n$rows = [{name: \"a\"}]\n$unused = 1\n\
    <Summary>{@Count($rowz)}</Summary>\n<Table rows={$rows}><Column key=\"nmae\"/></Table>\n```\n";

#[test]
fn check_prints_lints_as_warnings_with_fixes_and_what_drawing_finds() {
    let path = temp_file("lints.md", LINTED_REPLY);
    let out = run(&["check", path.to_str().unwrap()]);
    // The typo reads a name the block does not have: drawing the Summary fails.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    // In source order, each with its help.
    let order: Vec<usize> = [
        "warning[unused_declaration]",
        "error[refused_access]: When the block is first drawn",
        "warning[undeclared_reference]",
        "help: replace with `$rows`",
        "warning[unknown_column]",
        "help: replace with `name`",
    ]
    .iter()
    .map(|s| text.find(s).unwrap_or_else(|| panic!("{s} in {text}")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(text.contains("help: remove it"), "{text}");
    assert!(text.contains("lints.md:6:18"), "{text}");
    assert_eq!(
        stderr(&out),
        "failed: 1 file, 1 block, 1 error, 3 warnings; 1 file with findings\n"
    );
    // Without the typo the lints alone are warnings: exit 0, and --deny-warnings fails.
    let fixed = temp_file("lints-fixed.md", &LINTED_REPLY.replace("$rowz", "$rows"));
    let out = run(&["check", fixed.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stderr(&out), "ok: 1 file, 1 block, 0 errors, 2 warnings\n");
    let denied = run(&["check", "--deny-warnings", fixed.to_str().unwrap()]);
    assert_eq!(denied.status.code(), Some(1));
    assert!(
        stderr(&denied).contains("2 warnings"),
        "{}",
        stderr(&denied)
    );
}

#[test]
fn check_json_findings_have_severity_fix_and_cause() {
    let reply = "```ui\n<Summary>{$nope}</Summary>\n<Stats bad=>x\n<Stat label=\"a\" value={1}/>\n</Stats>\n```\n";
    let path = temp_file("json-findings.md", reply);
    let out = run(&["check", "--format", "json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let findings = first_block_findings(&out);
    let codes: Vec<&str> = findings
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "undeclared_reference",
            "invalid_prop",
            "invalid_parent",
            "unmatched_tag"
        ]
    );
    assert_eq!(findings[0]["severity"], "warning");
    assert!(findings[0].get("fix").is_none(), "no name close enough");
    assert_eq!(findings[1]["severity"], "error");
    assert!(findings[1].get("cause").is_none());
    assert_eq!(findings[2]["cause"], 1);
    assert_eq!(findings[3]["cause"], 1);
}

#[test]
fn check_shows_follow_on_errors_as_notes_and_points_at_the_stop_token() {
    let reply = "```ui\n<Stats bad=>x\n<Stat label=\"a\" value={1}/>\n</Stats>\n<Tag>{$a + * 2}</Tag>\n```\n";
    let path = temp_file("notes.md", reply);
    let out = run(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert_eq!(text.matches("error[").count(), 2, "{text}");
    assert!(text.contains("note: [unmatched_tag]"), "{text}");
    assert!(text.contains("note: [invalid_parent]"), "{text}");
    // The expression error points at `*` (line 5, column 12), not at the braces.
    assert!(text.contains("notes.md:5:12"), "{text}");
    // `$a` is read by the broken expression and declared nowhere: a warning of its own.
    assert!(text.contains("warning[undeclared_reference]"), "{text}");
    // The notes are no errors of their own.
    assert!(
        stderr(&out).starts_with("failed: 1 file, 1 block, 2 errors (+2 notes), 1 warning"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_notes_follow_a_failed_tag_only_up_to_its_closing_tag() {
    // The tag fails on an expression error in a prop, whose underline moves to the stop
    // token; its closing tag and the child before it are still notes under it. The `<Stat>`
    // and `</Stats>` after that closing tag are errors of their own.
    let reply = "```ui\n<Stats tone={1 + }>\n<Stat label=\"a\" value={1}/>\n</Stats>\n\
                 <Summary>Between</Summary>\n<Stat label=\"b\" value={2}/>\n</Stats>\n```\n";
    let path = temp_file("owned.md", reply);
    let out = run(&["check", "--format", "json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let findings = first_block_findings(&out);
    let shape: Vec<(&str, Option<u64>, u64)> = findings
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap(),
                f["cause"].as_u64(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("invalid_expression", None, 2),
            ("invalid_parent", Some(0), 3),
            ("unmatched_tag", Some(0), 4),
            ("invalid_parent", None, 6),
            ("unmatched_tag", None, 7),
        ]
    );
    let human = run(&["check", path.to_str().unwrap()]);
    assert_eq!(stdout(&human).matches("error[").count(), 3);
    assert!(stderr(&human).starts_with("failed: 1 file, 1 block, 3 errors (+2 notes), 0 warnings"));
}

#[test]
fn check_orders_an_expression_error_where_its_braces_begin() {
    // The warning for `$nope` lies inside the braces, before the stop token `*`: the error
    // about the braces still comes first, and `start` grows along the list.
    let path = temp_file("order.md", "```ui\n<Summary>{$nope + * 2}</Summary>\n```\n");
    let out = run(&["check", "--format", "json", path.to_str().unwrap()]);
    let findings = first_block_findings(&out);
    let order: Vec<(&str, u64, u64)> = findings
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap(),
                f["start"].as_u64().unwrap(),
                f["column"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("invalid_expression", 9, 19),
            ("undeclared_reference", 10, 11)
        ]
    );
}

#[test]
fn check_underlines_the_stop_token_past_a_brace_in_a_string() {
    // `{"}" + }`: the `}` in the string closes nothing; parsing stops at the last `}`.
    let path = temp_file("brace.md", "```ui\n<Summary>{\"}\" + }</Summary>\n```\n");
    let out = run(&["check", path.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(text.contains("brace.md:2:17"), "{text}");
}

#[test]
fn check_bad_file_exits_1_with_snippet() {
    let path = temp_file("bad.md", BAD_REPLY);
    let out = run(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("error[unknown_component]"), "{text}");
    // The unknown tag is on line 5 of the file, column 1.
    assert!(text.contains("bad.md:5:1"), "{text}");
    assert!(text.contains("<Frobnicate />"), "{text}");
    assert!(text.contains('^'), "{text}");
}

#[test]
fn check_json_has_lines_and_columns() {
    let bad = temp_file("bad-json.md", BAD_REPLY);
    let ok = temp_file("ok-json.md", OK_REPLY);
    let out = run(&[
        "check",
        "--format",
        "json",
        bad.to_str().unwrap(),
        ok.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Json> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let block = &lines[0]["blocks"][0];
    assert!(block["id"].as_str().unwrap().contains(":ui:"));
    let d = &block["findings"][0];
    assert_eq!(d["code"], "unknown_component");
    assert_eq!(d["line"], 5);
    assert_eq!(d["column"], 1);
    assert!(d["start"].is_u64() && d["end"].is_u64());
    assert!(d["nodeId"].is_string());
    assert_eq!(lines[1]["blocks"][0]["findings"], Json::Array(vec![]));
}

#[test]
fn check_block_mode_and_non_ascii_columns() {
    let path = temp_file("block.ui", "<Summary>héllo ✓</Summary>\n  <Nope />\n");
    let out = run(&[
        "check",
        "--block",
        "--format",
        "json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: Json = serde_json::from_str(stdout(&out).trim()).unwrap();
    let d = &v["blocks"][0]["findings"][0];
    assert_eq!(d["line"], 2);
    assert_eq!(d["column"], 3);
}

#[test]
fn a_reader_that_stopped_reading_ends_the_command_quietly() {
    // `uiblocks schema UiBlock | head -1`, with `head` gone before the first write: the
    // write fails (Rust ignores SIGPIPE) and the command ends as a filter does.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = bin()
        .args(["schema", "UiBlock"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(stderr(&out), "");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_taken_port_is_said_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let db = temp_file("taken-port.db", "");
    std::fs::remove_file(&db).unwrap();
    let out = run(&[
        "serve",
        "--demo",
        "--bind",
        &addr,
        "--db",
        db.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("uiblocks: error:"))
        .unwrap_or_default();
    assert!(line.contains(&format!("cannot listen on {addr}")), "{err}");
    assert_eq!(line.matches("in use").count(), 1, "{line}");
}

#[test]
fn check_reads_standard_input_as_dash() {
    let mut child = bin()
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(BAD_REPLY.as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("<stdin>:5:1"), "{}", stdout(&out));
}

#[test]
fn check_missing_file_exits_2() {
    let out = run(&["check", "/nonexistent/uiblocks/file.md"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read"));
}

#[test]
fn compile_prints_blocks_json() {
    let path = temp_file("compile.md", OK_REPLY);
    let out = run(&["compile", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: Json = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["blocks"].as_array().unwrap().len(), 1);
    assert_eq!(v["blocks"][0]["nodes"][0]["type"], "Summary");
    assert_eq!(v["blocks"][0]["complete"], true);

    let open = temp_file("open.md", "```ui\n<Summary>Do");
    let out = run(&["compile", "--no-final", open.to_str().unwrap()]);
    let v: Json = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["blocks"][0]["complete"], false);
}

#[test]
fn fallback_prints_text() {
    let path = temp_file("fallback.md", "```ui\n<Summary>Done</Summary>\n```\n");
    let out = run(&["fallback", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "Done\n");
}

#[test]
fn catalog_texts() {
    for (format, expected) in [
        ("text", ui_core::catalog::catalog_text()),
        ("compact", ui_core::catalog::compact_catalog()),
        ("note", ui_core::catalog::session_note("ui")),
        ("reference", ui_core::catalog::reference_text("ui")),
    ] {
        let out = run(&["catalog", "--format", format]);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(stdout(&out).trim_end(), expected.trim_end(), "{format}");
    }
    let out = run(&["catalog", "--format", "note", "--fence-language", "widget"]);
    assert!(stdout(&out).contains("widget"));
}

#[test]
fn schema_lists_and_prints() {
    let out = run(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let first = stdout(&out).lines().next().unwrap().to_owned();
    let out = run(&["schema", &first]);
    assert_eq!(out.status.code(), Some(0));
    let _: Json = serde_json::from_str(&stdout(&out)).unwrap();
    let out = run(&["schema", "NoSuchType"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_for_every_subcommand() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    for sub in [
        "check", "compile", "fallback", "catalog", "schema", "driver", "serve",
    ] {
        assert!(stdout(&out).contains(sub), "{sub}");
        let out = run(&[sub, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{sub}");
        assert!(stdout(&out).contains("Usage: uiblocks"), "{sub}");
    }
    let out = run(&["serve", "--help"]);
    for flag in ["--demo", "--port", "--db", "--sources"] {
        assert!(stdout(&out).contains(flag), "{flag}");
    }
}

#[test]
fn unknown_subcommand_exits_2() {
    let out = run(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn driver_answers_compile() {
    let mut child = piped(&["driver"]);
    let request = serde_json::json!({"op": "compile", "text": OK_REPLY});
    {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{request}").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: Json = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["fallbackText"], "Here you go.\n\nDone\n");
}

/// A host that sends each request after reading the previous answer gets every answer, in
/// order, whether the driver polls its input before sleeping (the default, `--watch`) or
/// not (`--watch 0`), and whether the next request comes at once or after a pause longer
/// than the polling window.
#[test]
fn driver_answers_requests_one_after_another_with_and_without_watching() {
    use std::io::BufRead as _;
    for args in [&["driver"][..], &["driver", "--watch", "0"]] {
        let mut child = piped(args);
        let mut stdin = child.stdin.take().unwrap();
        let mut answers = std::io::BufReader::new(child.stdout.take().unwrap());
        for i in 0..6_u64 {
            if i % 2 == 1 {
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            let request =
                serde_json::json!({"op": "expression", "text": format!("{i} + 1"), "tag": i});
            writeln!(stdin, "{request}").unwrap();
            let mut line = String::new();
            answers.read_line(&mut line).unwrap();
            let v: Json = serde_json::from_str(&line).unwrap();
            assert_eq!(
                (v["tag"].as_u64(), v["value"].as_u64()),
                (Some(i), Some(i + 1)),
                "{args:?}: {line}"
            );
        }
        drop(stdin);
        assert!(child.wait().unwrap().success(), "{args:?}");
    }
    let help = run(&["driver", "--help"]);
    assert!(stdout(&help).contains("--watch"));
    let unbounded = run(&["driver", "--watch", "10001"]);
    assert_eq!(unbounded.status.code(), Some(2), "the window is bounded");
    // Standard input closed altogether reads as an empty input (Rust's runtime opens
    // /dev/null in its place): no answers, success.
    let closed = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" driver <&-"#)
        .arg(bin().get_program())
        .output()
        .unwrap();
    assert_eq!(closed.status.code(), Some(0), "{closed:?}");
    assert!(closed.stdout.is_empty());
}

/// The README's driver example: its request line, sent to the driver, gets the answer the
/// README shows.
#[test]
fn the_readmes_driver_example_answers_as_shown() {
    use std::io::BufRead as _;
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let example = readme
        .split("````sh\n")
        .nth(1)
        .and_then(|rest| rest.split("````").next())
        .expect("the README's driver example");
    let request = example
        .lines()
        .find_map(|l| l.strip_prefix("printf '%s\\n' '"))
        .and_then(|l| l.split("' \\").next())
        .expect("the example's request line");
    assert!(example.contains("-- driver"), "{example}");
    let mut child = piped(&["driver"]);
    writeln!(child.stdin.take().unwrap(), "{request}").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let v: Json = serde_json::from_str(&line).unwrap();
    assert_eq!(v["ok"], true, "{line}");
    assert_eq!(v["blocks"][0]["id"], "reply:ui:0");
    assert_eq!(v["fallbackText"], "Done\n");
    assert!(example.contains(r#""fallbackText":"Done\n""#), "{example}");
}

/// Twelve files named after `tag` (the eighth with a diagnostic): more than the progress
/// bar's threshold.
fn many_files(tag: &str) -> Vec<PathBuf> {
    (0..12)
        .map(|i| {
            let text = if i == 7 { BAD_REPLY } else { OK_REPLY };
            temp_file(&format!("{tag}-{i:02}.md"), text)
        })
        .collect()
}

#[test]
fn check_many_files_as_json_without_a_terminal_prints_clean_lines_and_no_progress() {
    let files = many_files("many-piped");
    let mut args = vec!["check", "--format", "json"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    // The test's stdout and stderr are pipes: no progress bar, no terminal codes.
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "nothing but errors goes to stderr");
    let text = stdout(&out);
    assert!(!text.contains(['\r', '\x1b']), "{text:?}");
    let lines: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), files.len());
    for (line, file) in lines.iter().zip(&files) {
        assert_eq!(line["file"], file.to_str().unwrap());
    }
    assert_eq!(
        lines[7]["blocks"][0]["findings"][0]["code"],
        "unknown_component"
    );
}

/// `script` (util-linux) gives the command a terminal; its stdout is redirected to a file
/// inside that terminal, so only stderr is on the terminal.
#[test]
fn check_many_files_draws_the_progress_bar_on_a_terminal_stderr_only() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` to run the binary on a terminal");
        return;
    }
    let files = many_files("many-tty");
    let json = temp_file("many-tty.json", "");
    let mut command = format!("'{}' check --format json", env!("CARGO_BIN_EXE_uiblocks"));
    for f in &files {
        command.push_str(&format!(" '{}'", f.display()));
    }
    command.push_str(&format!(" > '{}'", json.display()));
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        // Without `TERM` (or with `TERM=dumb`) the terminal cannot redraw a line: no bar.
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The terminal saw the bar (and its clearing); the JSON file saw only the reports.
    let screen = stdout(&out);
    assert!(screen.contains("checking ["), "{screen:?}");
    assert!(screen.contains("/12"), "{screen:?}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains(['\r', '\x1b']), "{text:?}");
    let lines: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), files.len());
}

#[test]
fn check_few_files_never_draw_a_bar() {
    assert_eq!(ui_cli::commands::check::PROGRESS_MIN_FILES, 8);
    assert!(ui_cli::commands::check::progress_bar(7).is_hidden());
}

#[test]
fn check_points_a_querys_diagnostic_at_its_declaration() {
    let hosts = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/conformance/hosts.json"
    );
    let reply = temp_file(
        "queries.md",
        "Runs:\n```ui\n$a = 1\n$runs = @Query(\"ci.run\", {branch: \"main\"})\n\
         $b = @Query(\"ci.runs\", {branch: 5})\n<Summary>{@Count($runs)} {@Count($b)} {$a}</Summary>\n```\n",
    );
    let out = run(&["check", "--sources", hosts, reply.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // The wire gives both the whole block; each is shown at its own declaration.
    assert!(
        text.contains("error[unknown_query]: The query source `ci.run` is not registered. Did you mean `ci.runs`?\n --> ")
            && text.contains("queries.md:4:1\n  |\n4 | $runs = @Query(\"ci.run\""),
        "{text}"
    );
    assert!(
        text.contains("queries.md:5:1\n  |\n5 | $b = @Query(\"ci.runs\", {branch: 5})"),
        "{text}"
    );
    // JSON keeps the wire's offsets and gives the declaration's line.
    let json_findings = |file: &std::path::Path| {
        first_block_findings(&run(&[
            "check",
            "--format",
            "json",
            "--sources",
            hosts,
            file.to_str().unwrap(),
        ]))
    };
    let findings = json_findings(&reply);
    let lines: Vec<(u64, u64)> = findings
        .iter()
        .map(|f| (f["start"].as_u64().unwrap(), f["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(lines, [(0, 4), (0, 5)], "{findings:?}");
    // A valid and an invalid query of one source: which one failed cannot be told from
    // the diagnostic, so the whole block stays underlined.
    let both = temp_file(
        "two-queries.md",
        "```ui\n$ok = @Query(\"ci.runs\", {branch: \"main\"})\n$bad = @Query(\"ci.runs\", {branch: 5})\n\
         <Summary>{@Count($ok)} {@Count($bad)}</Summary>\n```\n",
    );
    let findings = json_findings(&both);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["line"], 2, "{findings:?}");
}

#[test]
fn check_registers_the_hosts_sources() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/conformance");
    let reply = format!("{corpus}/ok-02-ci-live-runs.md");
    // Without the host's sources every query is unknown.
    let bare = run(&["check", "--format", "json", &reply]);
    assert!(stdout(&bare).contains("unknown_query"), "{}", stdout(&bare));
    // The corpus's hosts.json (argument schemas by source, as the driver takes them): the
    // README's example of `check --sources`.
    let hosts = format!("{corpus}/hosts.json");
    let out = run(&["check", "--sources", &hosts, &reply]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    // A sources.toml as the server reads it: arguments checked, result fields linted.
    let toml = temp_file(
        "sources.toml",
        r#"
[[source]]
name = "ci.runs"
sql = "SELECT name, status FROM ci_runs WHERE branch = :branch"
args = { type = "object", required = ["branch"], properties = { branch = { type = "string", minLength = 1 } } }
result = { type = "array", items = { type = "object", properties = { name = { type = "string" }, status = { type = "string" } } } }
"#,
    );
    let block = temp_file(
        "rows.md",
        "```ui\n$runs = @Query(\"ci.runs\", {branch: \"main\"})\n\
         $bad = @Query(\"ci.runs\", {branch: \"\"})\n\
         <Table rows={$runs}><Column key=\"stauts\"/></Table>\n<Summary>{@Count($bad)}</Summary>\n```\n",
    );
    let out = run(&[
        "check",
        "--format",
        "json",
        "--sources",
        toml.to_str().unwrap(),
        block.to_str().unwrap(),
    ]);
    let findings = first_block_findings(&out);
    let codes: Vec<&str> = findings
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["invalid_query", "unknown_column"], "{findings:?}");
    assert_eq!(findings[1]["fix"]["text"], "status");
    // A file that is not a sources file is a usage error, named; JSON sources are checked
    // as sources.toml's `args` are: an object schema each, of types the subset knows; a
    // misspelled wrapper is named.
    for (name, json, says) in [
        ("broken.toml", "[[source]]\nname = 1\n", "broken.toml"),
        (
            "bad-sources.json",
            r#"{"ci.runs": 5}"#,
            "\"type\": \"object\"",
        ),
        (
            "bad-sources.json",
            r#"{"ci.runs": {"type": "objekt"}}"#,
            "\"type\": \"object\"",
        ),
        (
            "bad-sources.json",
            r#"{"ci.runs": {"type": "object", "properties": {"branch": {"type": "strng"}}}}"#,
            "unsupported schema type",
        ),
        (
            "bad-sources.json",
            r#"{"querySchema": {"ci.runs": {"type": "object"}}}"#,
            "spelled `querySchemas`",
        ),
    ] {
        let file = temp_file(name, json);
        let out = run(&[
            "check",
            "--sources",
            file.to_str().unwrap(),
            block.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{json}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{json}: {}", stderr(&out));
    }
}

/// Issue 52: a finding and its fix carry offsets into the checked file (UTF-16 units and
/// bytes), so an agent applies a fix to the reply it sent, not to the block body the wire
/// offsets count from. Text before the fence (with a character outside the BMP, two UTF-16
/// units and four bytes) makes the three kinds of offset differ.
#[test]
fn check_json_places_findings_and_fixes_in_the_file() {
    let reply =
        "Rollout 🚀 today.\n\n```ui\n$rows = [{name: \"a\"}]\n<Summary>{$rowz}</Summary>\n```\n";
    let path = temp_file("file-offsets.md", reply);
    let out = run(&["check", "--format", "json", path.to_str().unwrap()]);
    let findings = first_block_findings(&out);
    let typo = findings
        .iter()
        .find(|f| f["code"] == "undeclared_reference")
        .expect("the typo is found");
    let file = &typo["file"];
    let (start8, end8) = (
        file["startUtf8"].as_u64().unwrap() as usize,
        file["endUtf8"].as_u64().unwrap() as usize,
    );
    assert_eq!(&reply[start8..end8], "$rowz");
    let units: Vec<u16> = reply.encode_utf16().collect();
    let (start16, end16) = (
        file["start"].as_u64().unwrap() as usize,
        file["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(String::from_utf16(&units[start16..end16]).unwrap(), "$rowz");
    // The wire offsets count from the block body; the file's from the reply's start.
    assert_ne!(typo["start"], file["start"]);
    // The fix applied through its file offsets gives the corrected reply.
    let fix = &typo["fix"];
    assert_eq!(fix["text"], "$rows");
    let at = fix["file"]["startUtf8"].as_u64().unwrap() as usize;
    let to = fix["file"]["endUtf8"].as_u64().unwrap() as usize;
    let fixed = format!(
        "{}{}{}",
        &reply[..at],
        fix["text"].as_str().unwrap(),
        &reply[to..]
    );
    assert_eq!(fixed, reply.replace("$rowz", "$rows"));
    let at16 = fix["file"]["start"].as_u64().unwrap() as usize;
    let to16 = fix["file"]["end"].as_u64().unwrap() as usize;
    let mut fixed16: Vec<u16> = units[..at16].to_vec();
    fixed16.extend("$rows".encode_utf16());
    fixed16.extend_from_slice(&units[to16..]);
    assert_eq!(String::from_utf16(&fixed16).unwrap(), fixed);
}

/// Issue 52: `check` draws each block as it starts, so a block that compiles clean but
/// fails when drawn (an array shown as text) is an error; a node that reads a live query,
/// which has no reading yet, is not judged.
#[test]
fn check_reports_what_drawing_the_block_finds() {
    let broken =
        "```ui\n$tags = [\"a\", \"b\"]\n<Summary>Tags</Summary>\n<Tag>{$tags}</Tag>\n```\n";
    let path = temp_file("drawn-broken.md", broken);
    let out = run(&["check", "--format", "json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let findings = first_block_findings(&out);
    let drawn: Vec<&Json> = findings
        .iter()
        .filter(|f| {
            f["message"]
                .as_str()
                .unwrap()
                .starts_with("When the block is first drawn")
        })
        .collect();
    assert_eq!(drawn.len(), 1, "{findings:?}");
    assert_eq!(drawn[0]["severity"], "error");
    assert_eq!(drawn[0]["code"], "invalid_value");
    let at = drawn[0]["file"]["startUtf8"].as_u64().unwrap() as usize;
    assert!(broken[at..].starts_with("{$tags}"), "{}", &broken[at..]);

    let sources = temp_file(
        "drawn-sources.json",
        r#"{"querySchemas": {"ci.runs": {"type": "object"}}}"#,
    );
    let live = "```ui\n$runs = @Query(\"ci.runs\", {})\n<Summary>Runs</Summary>\n<Tag>{$runs[0].title}</Tag>\n```\n";
    let path = temp_file("drawn-live.md", live);
    let out = run(&[
        "check",
        "--sources",
        sources.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}
