//! The demo's seed: a few chats for `alice` and `bob` whose replies use every component
//! group, and a background writer that adds CI runs through the `ci.runs` write path so
//! the page's live readings change while one watches.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{JsonBody, SYNC_SEQ_HEADER};
use crate::sources::InsertError;
use crate::state::AppState;
use crate::store::{record_all, write_scope};

/// How often the background writer adds a CI run.
pub(crate) const DEMO_WRITE_EVERY: Duration = Duration::from_secs(20);

const STATUS_REPLY: &str = r#"The **web** builds, as of now. Switch the branch to see the other runs.

```ui
$branch = "main"
$runs = @Query("ci.runs", {branch: $branch, limit: 10})
<Summary tone="info" badge="live">CI runs on {$branch}</Summary>
<Segmented value={$branch}><Option value="main">main</Option><Option value="dev">dev</Option></Segmented>
<Stats><Stat label="Runs" value={@Count($runs)}/><Stat label="Failed" value={@Count(@Filter($runs, r, r.status == "failed"))}/></Stats>
<Table rows={$runs}><Column key="name" title="Run"/><Column key="status" title="Status" as="tag"/></Table>
<Callout tone="warning" title="Flaky test">The login test failed twice this week. It is marked <Tag tone="danger">flaky</Tag> and being looked at.</Callout>
<Progress value={7} max={10}>Release checklist</Progress>
<Steps><Step state="done" detail="41 s">Build</Step><Step state="done">Unit tests</Step><Step state="running" detail="e2e">Integration tests</Step><Step state="pending">Deploy</Step><Step state="skipped">Notify</Step></Steps>
<Choices><Choice primary={true} context={"Rerun the failed jobs on " + $branch}>Rerun failed</Choice><Choice>Ignore for now</Choice><Choice disabled={true}>Roll back</Choice></Choices>
```

Runs are read live from `ci.runs`; press **Insert run** in the sidebar to add one.
"#;

const DATA_REPLY: &str = r#"Here is how the week went.

```ui
<Summary tone="info">Build times improved by 12%</Summary>
<Stats><Stat label="Builds" value={42} previous={37}/><Stat label="Pass rate" value={92.5} previous={88} unit="%" tone="success"/><Stat label="Median time" value={4.2} previous={4.8} unit="min" tone="success"/></Stats>
<EntityList><Entry label="Owner">web team</Entry><Entry label="Runner">linux-x64, 8 cores</Entry><Entry label="Cache">warm <Tag tone="success">hit 81%</Tag></Entry></EntityList>
<Table rows={[{job: "build", size: 1048576, took: 41000, at: "2026-11-28T10:00:00Z", ok: "passed"}, {job: "test", size: 20480, took: 183000, at: 1795860041000, ok: "failed"}]}><Column key="job" title="Job"/><Column key="size" title="Artifact" as="bytes"/><Column key="took" title="Duration" as="duration"/><Column key="at" title="Started" as="date"/><Column key="ok" title="Result" as="tag"/></Table>
<Chart kind="bar" data={[{label: "Mon", passed: 8, failed: 1}, {label: "Tue", passed: 6, failed: 2}, {label: "Wed", passed: 9, failed: 0}, {label: "Thu", passed: 7, failed: 1}]}/>
<Chart kind="hbar" unit="min" data={[{label: "build", time: 4.2}, {label: "test", time: 3.1}, {label: "deploy", time: 1.4}]}/>
<Chart kind="stacked" data={[{label: "Mon", passed: 8, failed: 1}, {label: "Tue", passed: 6, failed: 2}, {label: "Wed", passed: 9, failed: 0}]}/>
<Chart kind="line" unit="s" data={[{label: "w1", p50: 240, p90: 410}, {label: "w2", p50: 230, p90: 380}, {label: "w3", p50: 215, p90: 350}, {label: "w4", p50: 205, p90: 330}]}/>
```
"#;

const CONTENT_REPLY: &str = r#"The fix touches two files.

```ui
<Summary>The session cookie was not renewed</Summary>
<Tabs><Tab title="Cause">The renewal ran before the <File path="src/auth.rs" line={148}/> check; see <Commit sha="0123abcd"/>.</Tab><Tab title="Fix"><CodeBlock language="rs">if session.expires_at < now {
    session.renew(now);
}</CodeBlock></Tab><Tab title="Screens"><Image attachment="img-1" alt="Login screen">Before the fix</Image></Tab></Tabs>
<Sections><Section title="Changed files"><Diff path="src/auth.rs">renewal moved up</Diff><File path="src/app.rs" line={3}>caller</File><Node id="svc-auth">the auth service</Node></Section><Section title="Not touched"><File path="../secret.pem">a key outside the project</File></Section></Sections>
<Sources><Source title="RFC 6265: HTTP State Management" url="https://www.rfc-editor.org/rfc/rfc6265"/><Source title="MDN: Set-Cookie" url="https://developer.mozilla.org/docs/Web/HTTP/Headers/Set-Cookie"/></Sources>
<Widget size="big">An unknown component falls back to its text.</Widget>
<Callout tone="loud">A callout with a bad tone is drawn as its fallback.</Callout>
```
"#;

const INPUTS_REPLY: &str = r#"Pick what to release.

```ui
$done = ["build"]
$verbose = false
$shards = 4
$mode = "all"
<Checklist value={$done}><Item value="build">Build passes</Item><Item value="notes">Release notes written</Item><Item value="tag">Version tagged</Item></Checklist>
<Switch value={$verbose}>Show warnings</Switch>
<Show when={$verbose}><Callout tone="info" title="Warnings">3 deprecations in the build log.</Callout></Show>
<Slider value={$shards} min={1} max={16} step={1} unit="shards">Test shards</Slider>
<Segmented value={$mode}><Option value="all">All</Option><Option value="failed">Only failed</Option></Segmented>
<Button action={@Set($mode, "all")} disabled={$mode == "all"}>Show all</Button>
<Button action={@Reset()}>Reset</Button>
<EntityList><Each items={$done} as="d"><Entry label="Checked">{d}</Entry></Each></EntityList>
<Summary>Checked: {@Count($done)} of 3 · test shards: {$shards} · mode: {$mode}</Summary>
<Choices><Choice primary={true} context={"Release with test shards set to " + $shards}>Release</Choice><Choice>Wait</Choice></Choices>
```
"#;

/// One block holding all 36 components of the catalog at once (checked by
/// `uiblocks check crates/ui-server/demo/every-component.md`), so that the browser test's
/// accessibility and keyboard checks cover every component.
const EVERY_COMPONENT_REPLY: &str = include_str!("../demo/every-component.md");

const OPS_REPLY: &str = r#"The **ops** deploys:

```ui
$branch = "main"
$runs = @Query("ci.runs", {branch: $branch})
<Summary tone="neutral">Deploys on {$branch}: {@Count($runs)}</Summary>
<Table rows={$runs}><Column key="name" title="Deploy"/><Column key="status" title="Status" as="tag"/></Table>
```
"#;

async fn chat(
    state: &AppState,
    owner: &str,
    project: &str,
    title: &str,
    turns: &[(&str, &str)],
) -> Result<(), ApiError> {
    let (chat, drafts) = write_scope(None, state.store().create_chat(owner, project, title)).await;
    let chat = chat?;
    // A failed event is logged by `record_all`; the seeded rows stand.
    record_all(state.sync(), drafts).await;
    for (question, reply) in turns {
        let (done, drafts) = write_scope(None, async {
            state.post_message(&chat.id, question).await?;
            let item = state.start_reply(&chat.id, "").await?;
            state
                .finish_reply(&chat.id, &item.id, Some((*reply).to_owned()), true)
                .await
        })
        .await;
        done?;
        record_all(state.sync(), drafts).await;
    }
    Ok(())
}

/// Seeds the demo chats once: when `alice` has no chat yet, she gets a chat about the
/// builds (live `ci.runs`, status, data), one about a fix (structure, content, links,
/// inputs) and one showing every component of the catalog in a single block; `bob` gets
/// one about the ops deploys.
///
/// # Errors
/// What storing the chats answers.
pub async fn seed_demo(state: &AppState) -> Result<(), ApiError> {
    if !state.store().chats_of("alice").await?.is_empty() {
        return Ok(());
    }
    chat(
        state,
        "alice",
        "web",
        "How are the builds?",
        &[
            ("How are the web builds doing?", STATUS_REPLY),
            ("And over the week?", DATA_REPLY),
        ],
    )
    .await?;
    chat(
        state,
        "alice",
        "web",
        "Release",
        &[
            ("Why were people signed out?", CONTENT_REPLY),
            ("What is left before the release?", INPUTS_REPLY),
        ],
    )
    .await?;
    chat(
        state,
        "alice",
        "web",
        "Every component",
        &[("Show me every component.", EVERY_COMPONENT_REPLY)],
    )
    .await?;
    chat(
        state,
        "bob",
        "ops",
        "Deploys",
        &[("Show me the ops deploys.", OPS_REPLY)],
    )
    .await
}

/// Starts a task that inserts one CI run every `DEMO_WRITE_EVERY` (20 s) through the
/// `ci.runs` write path (for `web`, alternating `main` and `dev`), recorded as change
/// events like any write. Does nothing when the source has no write path; a failed write
/// is logged and the next round writes again.
pub fn spawn_demo_writer(state: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n: u64 = 0;
        loop {
            tokio::time::sleep(DEMO_WRITE_EVERY).await;
            n += 1;
            let mut writer = Map::new();
            writer.insert("user".into(), Json::from("demo"));
            writer.insert("project".into(), Json::from("web"));
            writer.insert("now".into(), Json::from(state.clock().now_ms()));
            let mut row = Map::new();
            let branch = if n.is_multiple_of(2) { "dev" } else { "main" };
            row.insert("branch".into(), Json::from(branch));
            row.insert("name".into(), Json::from(format!("web build {}", n + 2)));
            let status = if n.is_multiple_of(3) {
                "failed"
            } else {
                "passed"
            };
            row.insert("status".into(), Json::from(status));
            match state
                .sources()
                .insert(state.store(), "ci.runs", &writer, vec![row], None)
                .await
            {
                Ok(outcome) => {
                    // Empty when the events were appended with the rows (the outbox).
                    record_all(state.sync(), outcome.drafts).await;
                }
                // No write path: nothing to do, ever.
                Err(InsertError::UnknownSource | InsertError::NotWritable) => return,
                // A failed write is logged; the next round writes again.
                Err(e) => tracing::warn!(error = ?e, "the demo writer's insert failed"),
            }
        }
    })
}

/// `POST /api/demo/members` (demo only): adds a demo user to a project or removes them.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberBody {
    /// `alice` or `bob`.
    pub user: String,
    /// The project (1–64 characters of `[A-Za-z0-9._-]`).
    pub project: String,
    /// `true` to add the user to the project, `false` to remove them.
    pub member: bool,
}

/// The answer of `POST /api/demo/members`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemberChanged {
    /// Whether the membership changed (adding a member twice changes nothing).
    pub changed: bool,
    /// The cursor of the `audience-changed` event recorded for the user: the user's open
    /// streams apply the new membership to every row after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

fn project_name(p: &str) -> bool {
    (1..=64).contains(&p.len())
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `POST /api/demo/members`: the demo's membership admin, so the page and the tests can
/// show a removed member's streams stop delivering the project's events. Any signed-in
/// demo user may call it (it is a demo). The change is applied, then recorded as an
/// `audience-changed` event for the user ([`AppState::membership_changed`]).
pub(crate) async fn set_member(
    State(state): State<AppState>,
    _principal: Principal,
    JsonBody(body): JsonBody<MemberBody>,
) -> Result<Response, ApiError> {
    let demo = state
        .demo()
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "No such route."))?;
    if !project_name(&body.project) {
        return Err(ApiError::bad_request(
            "A project is 1 to 64 characters of letters, digits, `.`, `_` and `-`.",
        ));
    }
    let changed = demo
        .set_member(&body.user, &body.project, body.member)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "No such demo user."))?;
    let cursor = if changed {
        Some(
            state
                .membership_changed(&body.user)
                .await
                .map_err(|e| ApiError::internal(format!("The change feed failed: {e}")))?,
        )
    } else {
        None
    };
    let answer = MemberChanged {
        changed,
        cursor: cursor.as_ref().map(ToString::to_string),
    };
    let text = serde_json::to_string(&answer)
        .map_err(|e| ApiError::internal(format!("The answer failed: {e}")))?;
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response();
    if let Some(c) = cursor
        && let Ok(value) = HeaderValue::from_str(&c.to_string())
    {
        response.headers_mut().insert(SYNC_SEQ_HEADER, value);
    }
    Ok(response)
}
