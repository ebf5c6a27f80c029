//! Sources declared in TOML as SQL over the application database ([`TomlSources`]), the
//! host that serves them ([`SqlHost`]), and the demo's link resolver ([`DemoLinks`]).
//!
//! ```toml
//! # Run once when the server opens the database; keep it idempotent.
//! setup = """
//! CREATE TABLE IF NOT EXISTS ci_runs (
//!   id INTEGER PRIMARY KEY, project TEXT NOT NULL, branch TEXT NOT NULL,
//!   name TEXT NOT NULL, status TEXT NOT NULL);
//! """
//!
//! [[source]]
//! name = "ci.runs"
//! description = "CI runs of a branch in the chat's project"
//! # `:name` binds an argument (NULL when absent), `@name` a field of the captured access:
//! # `@user`, `@project`, `@chat`.
//! sql = """SELECT name, status FROM ci_runs WHERE project = @project AND branch = :branch
//!          ORDER BY id DESC LIMIT COALESCE(:limit, 20)"""
//! audience = "project:{project}"   # placeholders: access fields (the default)
//! keys = ["branch:{branch}"]        # placeholders: argument (or row) fields
//! feed = "complete"                 # every change is recorded (default "partial")
//! args = { type = "object", required = ["branch"], additionalProperties = false, properties = { branch = { type = "string", minLength = 1 }, limit = { type = "integer", minimum = 1, maximum = 50 } } }
//!
//! [source.insert]                   # optional write path: POST /api/sources/{name}/rows
//! # `:name` binds a row field, `@user`, `@project`, `@now` (epoch ms) the writer's.
//! sql = "INSERT INTO ci_runs (project, branch, name, status) VALUES (@project, :branch, :name, :status)"
//! args = { type = "object", required = ["branch", "name", "status"], additionalProperties = false, properties = { branch = { type = "string", minLength = 1 }, name = { type = "string" }, status = { type = "string", enum = ["passed", "failed"] } } }
//! ```
//!
//! Readings follow change events (`sync.md` §8): the audience and keys name what a reading
//! depends on, and the write path records exactly those (by the writer's project and the
//! row's fields), in the same transaction as the rows (the change log lives in the same
//! file), so a crash can never commit a row without its event. A read returns its rows as records (column name → value; SQLite integers and reals are
//! numbers, text is a string, NULL is null). At most [`MAX_SOURCE_ROWS`] rows; a
//! statement that is not read-only is refused when the file is loaded.
//!
//! A source may read one of the application's own databases instead: a
//! `[connections.NAME]` (PostgreSQL or SQLite, see [`crate::connections`]) named by
//! `connection = "NAME"`; on PostgreSQL, `notify = "channel"` turns `NOTIFY`s into its change
//! events. The server's database is the default connection: [`TomlSources::install`] takes
//! it. Every key: `docs/configuration.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::types::{Value as SqlValue, ValueRef};
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use ui_core::Value;
use ui_host::{
    ChangeFeed, ChatInfo, FnSource, HostError, JsonSchema, LinkResolver, ReadRequest,
    SourceRegistry, UiHost, UiRefusal,
};
use ui_links::{LinkResolution, LinkTarget};
use ui_sync::{Audience, AudienceKind, ChangeDraft, RequestSource, is_source_name};

use crate::connections::{
    ConnectionDecl, ConnectionSpec, Listened, PgParam, PgPool, PgReadError, Target,
};
use crate::db::{Db, DbError, DbResult, ReadPool};
use crate::error::ServerError;
use crate::limits::MAX_SOURCE_ROWS;

/// The demo's `sources.toml`: CI runs (`ci.runs`) per project and branch with a write
/// path, seeded with a few rows for the projects `web` and `ops`.
pub const DEMO_SOURCES: &str = include_str!("../demo/sources.toml");

/// The name of the server's own database as a connection of
/// [`TomlSources::read_default_from`] (not a name `[connections.NAME]` can take).
pub(crate) const SERVER_CONNECTION: &str = "(server)";

/// Rows one insert request may carry.
pub const MAX_INSERT_ROWS: usize = 100;

/// Access fields a read's SQL may bind with `@name`.
const READ_ACCESS: &[&str] = &["user", "project", "chat"];
/// Writer fields an insert's SQL may bind with `@name`.
const WRITE_ACCESS: &[&str] = &["user", "project", "now"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourcesFile {
    #[serde(default)]
    setup: Option<String>,
    #[serde(default)]
    connections: BTreeMap<String, ConnectionDecl>,
    #[serde(default)]
    recorders: BTreeMap<String, crate::recorders::RecorderDecl>,
    #[serde(default, rename = "source")]
    sources: Vec<SourceDecl>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceDecl {
    name: String,
    #[serde(default)]
    description: Option<String>,
    sql: String,
    args: Json,
    #[serde(default)]
    result: Option<Json>,
    #[serde(default)]
    audience: Option<String>,
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    feed: Option<String>,
    #[serde(default)]
    insert: Option<InsertDecl>,
    #[serde(default)]
    connection: Option<String>,
    #[serde(default)]
    notify: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertDecl {
    sql: String,
    args: Json,
}

/// A `{field}` template: literal text with placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(String),
}

impl Template {
    fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 1..];
            let close = after
                .find('}')
                .ok_or_else(|| format!("`{text}` has an unclosed `{{`"))?;
            let field = &after[..close];
            if field.is_empty() || field.contains('{') {
                return Err(format!("`{text}` has an empty or nested placeholder"));
            }
            parts.push(Part::Field(field.to_owned()));
            rest = &after[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("`{text}` has a `}}` without `{{`"));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Template { parts })
    }

    fn fields(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Field(f) => Some(f.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The text with each placeholder replaced by the field's scalar value; `None` when a
    /// field is missing or not a string, number or boolean.
    fn render(&self, fields: &Map<String, Json>) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Field(f) => push_scalar(&mut out, fields.get(f)?)?,
            }
        }
        Some(out)
    }

    /// [`Template::render`] of a record of values (parsed arguments, captured access),
    /// converting only the fields it names — to the same JSON, so readings and writes
    /// render the same text.
    fn render_record(&self, fields: Option<&ui_core::Record>) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Field(f) => match fields?.get(f)? {
                    Value::String(s) => out.push_str(s),
                    value => push_scalar(&mut out, &Json::from(value))?,
                },
            }
        }
        Some(out)
    }
}

/// Appends the text of a string, number or boolean; `None` for anything else.
fn push_scalar(out: &mut String, value: &Json) -> Option<()> {
    match value {
        Json::String(s) => out.push_str(s),
        Json::Number(n) => out.push_str(&n.to_string()),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        _ => return None,
    }
    Some(())
}

/// `kind:{template}`: the audience of a source's data.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AudienceTemplate {
    kind: AudienceKind,
    id: Template,
}

impl AudienceTemplate {
    fn parse(text: &str) -> Result<Self, String> {
        let (kind, id) = text
            .split_once(':')
            .ok_or_else(|| format!("audience `{text}` is not `kind:id`"))?;
        let kind = match AudienceKind::parse(kind) {
            Some(k @ (AudienceKind::User | AudienceKind::Org | AudienceKind::Project)) => k,
            _ => {
                return Err(format!(
                    "audience `{text}`: the kind must be user, org or project"
                ));
            }
        };
        Ok(AudienceTemplate {
            kind,
            id: Template::parse(id)?,
        })
    }

    fn render(&self, access: &Map<String, Json>) -> Option<Audience> {
        self.audience(self.id.render(access))
    }

    /// [`AudienceTemplate::render`] of a captured access value.
    fn render_value(&self, access: &Value) -> Option<Audience> {
        self.audience(self.id.render_record(access.as_record()))
    }

    fn audience(&self, id: Option<String>) -> Option<Audience> {
        let id = id.filter(|id| !id.is_empty())?;
        Some(Audience {
            kind: self.kind,
            id: id.into(),
        })
    }
}

/// What [`TomlSources::install`] checks of one source: name, read SQL, argument names,
/// and the insert SQL with its row fields.
type StatementCheck = (
    String,
    String,
    BTreeSet<String>,
    Option<(String, BTreeSet<String>)>,
);

/// One declared source, checked.
#[derive(Debug)]
struct SourceDef {
    name: String,
    description: Option<String>,
    sql: String,
    args: Json,
    result: Json,
    /// The `@name` parameters of the read.
    access_params: Vec<String>,
    audience: AudienceTemplate,
    keys: Vec<Template>,
    /// Whether every change of the data is recorded (`feed = "complete"`).
    complete: bool,
    insert: Option<InsertDef>,
    /// The named connection it reads (`None`: the server's database).
    connection: Option<String>,
    /// The PostgreSQL channel whose notifications are its change events.
    notify: Option<String>,
    /// On PostgreSQL: the statement run and its parameters in order (set by `install`).
    pg: Option<PgStatement>,
}

/// What a PostgreSQL source runs: the numbered SQL wrapped to return JSON rows, and the
/// `:name` / `@name` of each `$n`.
#[derive(Debug, Clone)]
struct PgStatement {
    sql: String,
    params: Vec<String>,
}

#[derive(Debug)]
struct InsertDef {
    sql: String,
    args: Json,
}

fn properties(schema: &Json) -> BTreeSet<String> {
    schema
        .get("properties")
        .and_then(Json::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn object_schema(name: &str, what: &str, schema: &Json) -> Result<(), String> {
    JsonSchema::new(schema).map_err(|e| format!("source `{name}`: {what}: {e}"))?;
    if schema.get("type").and_then(Json::as_str) != Some("object") {
        return Err(format!(
            "source `{name}`: {what} must be a schema of `type = \"object\"`"
        ));
    }
    Ok(())
}

/// The sources of a `sources.toml`: parsed and checked (names, schemas, templates) by
/// [`TomlSources::parse`]; their statements are checked against the database when the
/// server opens it.
#[derive(Debug, Clone, Default)]
pub struct TomlSources {
    setup: Option<String>,
    sources: Vec<Arc<SourceDef>>,
    connections: Vec<ConnectionSpec>,
    /// The open named connections (after `install`).
    pools: Option<Arc<Pools>>,
    /// The services that may record change events (`POST /ui/changes`).
    recorders: Vec<Arc<crate::recorders::Recorder>>,
}

/// The open named connections. Dropping the last handle stops their `LISTEN` tasks.
#[derive(Debug, Default)]
struct Pools {
    sqlite: BTreeMap<String, Arc<ReadPool>>,
    pg: BTreeMap<String, Arc<PgPool>>,
    /// The host's read timeout: PostgreSQL's `statement_timeout` of every read.
    read_timeout: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for Pools {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Where one source reads.
#[derive(Clone)]
enum Reader {
    Server(Db),
    Sqlite(Arc<ReadPool>),
    Postgres(Arc<PgPool>, std::time::Duration),
}

impl TomlSources {
    /// No sources.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses and checks the TOML text.
    ///
    /// # Errors
    /// [`ServerError::Config`] naming the first problem: TOML syntax, an unknown key, a bad
    /// source name, a duplicate, a schema outside the subset, a bad template.
    pub fn parse(text: &str) -> Result<Self, ServerError> {
        let file: SourcesFile =
            toml::from_str(text).map_err(|e| ServerError::Config(format!("sources: {e}")))?;
        let mut connections = Vec::new();
        for (name, decl) in file.connections {
            connections.push(ConnectionSpec::check(&name, decl).map_err(ServerError::Config)?);
        }
        let mut seen = BTreeSet::new();
        let mut sources = Vec::new();
        for decl in file.sources {
            let def = Self::check(decl, &connections).map_err(ServerError::Config)?;
            if !seen.insert(def.name.clone()) {
                return Err(ServerError::Config(format!(
                    "source `{}` is declared twice",
                    def.name
                )));
            }
            sources.push(Arc::new(def));
        }
        let mut recorders = Vec::new();
        for (name, decl) in file.recorders {
            recorders.push(
                crate::recorders::Recorder::check(&name, decl, &seen)
                    .map_err(ServerError::Config)?,
            );
        }
        Ok(TomlSources {
            setup: file.setup,
            sources,
            connections,
            pools: None,
            recorders,
        })
    }

    /// Reads and parses the file at `path`.
    ///
    /// # Errors
    /// [`ServerError::Io`] when it cannot be read; as [`TomlSources::parse`].
    pub fn load(path: &Path) -> Result<Self, ServerError> {
        Self::parse(&std::fs::read_to_string(path)?)
    }

    fn check(decl: SourceDecl, connections: &[ConnectionSpec]) -> Result<SourceDef, String> {
        let name = decl.name;
        let spec = match &decl.connection {
            None => None,
            Some(c) => Some(connections.iter().find(|s| &s.name == c).ok_or_else(|| {
                format!("source `{name}`: connection `{c}` is not declared in [connections]")
            })?),
        };
        if spec.is_some() && decl.insert.is_some() {
            return Err(format!(
                "source `{name}`: insert: the write path writes the server's database only; \
                 a source on a named connection is read-only"
            ));
        }
        if let Some(channel) = &decl.notify {
            // Without a connection the source reads the server's database: whether that is
            // PostgreSQL is known at `install`.
            if spec.is_some_and(|spec| !spec.is_postgres()) {
                return Err(format!(
                    "source `{name}`: notify needs a PostgreSQL connection (`connection = \"…\"`)"
                ));
            }
            if channel.is_empty() || channel.len() > 63 || channel.contains('\0') {
                return Err(format!(
                    "source `{name}`: notify: a channel name is 1-63 bytes"
                ));
            }
        }
        if !is_source_name(&name) || name.starts_with("host.") {
            return Err(format!(
                "`{name}` is not a source name (1-128 of [a-z0-9._-], not `host.*`)"
            ));
        }
        object_schema(&name, "args", &decl.args)?;
        let result = decl.result.unwrap_or_else(|| Json::Object(Map::new()));
        JsonSchema::new(&result).map_err(|e| format!("source `{name}`: result: {e}"))?;
        let audience =
            AudienceTemplate::parse(decl.audience.as_deref().unwrap_or("project:{project}"))
                .map_err(|e| format!("source `{name}`: {e}"))?;
        for field in audience.id.fields() {
            if !READ_ACCESS.contains(&field) {
                return Err(format!(
                    "source `{name}`: the audience may name only {READ_ACCESS:?}, not `{field}`"
                ));
            }
        }
        let keys = decl
            .keys
            .iter()
            .map(|k| Template::parse(k).map_err(|e| format!("source `{name}`: key {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let arg_names = properties(&decl.args);
        for field in keys.iter().flat_map(Template::fields) {
            if !arg_names.contains(field) {
                return Err(format!(
                    "source `{name}`: key field `{field}` is not an argument"
                ));
            }
        }
        let complete = match decl.feed.as_deref() {
            None | Some("partial") => false,
            Some("complete") => true,
            Some(other) => {
                return Err(format!(
                    "source `{name}`: feed must be \"partial\" or \"complete\", not `{other}`"
                ));
            }
        };
        let insert = match decl.insert {
            None => None,
            Some(insert) => {
                object_schema(&name, "insert.args", &insert.args)?;
                let row_names = properties(&insert.args);
                for field in keys.iter().flat_map(Template::fields) {
                    if !row_names.contains(field) {
                        return Err(format!(
                            "source `{name}`: key field `{field}` is not a field of insert.args"
                        ));
                    }
                }
                Some(InsertDef {
                    sql: insert.sql,
                    args: insert.args,
                })
            }
        };
        Ok(SourceDef {
            name,
            description: decl.description,
            sql: decl.sql,
            args: decl.args,
            result,
            access_params: Vec::new(),
            audience,
            keys,
            complete,
            insert,
            connection: decl.connection,
            notify: decl.notify,
            pg: None,
        })
    }

    /// The services that may record change events over HTTP (`[recorders.NAME]`).
    pub(crate) fn recorders(&self) -> &[Arc<crate::recorders::Recorder>] {
        &self.recorders
    }

    /// The source names, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.sources.iter().map(|s| s.name.as_str())
    }

    /// Makes the sources that name no connection read through `url` (`postgres://…` or
    /// `sqlite://…`), as a connection of their own named [`SERVER_CONNECTION`], instead of
    /// the SQLite [`Db`] given to [`TomlSources::install`]: the glue for a server whose own
    /// database is PostgreSQL. `setup` and the write paths stay with the server's store.
    /// Call before `install`.
    ///
    /// # Errors
    /// [`ServerError::Config`] for a bad URL.
    pub(crate) fn read_default_from(&mut self, url: &str) -> Result<(), ServerError> {
        if self.sources.iter().all(|def| def.connection.is_some()) {
            return Ok(());
        }
        let spec = ConnectionSpec::server(SERVER_CONNECTION, url).map_err(ServerError::Config)?;
        for def in &mut self.sources {
            if def.connection.is_none()
                && let Some(def) = Arc::get_mut(def)
            {
                def.connection = Some(SERVER_CONNECTION.to_owned());
            }
        }
        self.connections.retain(|c| c.name != SERVER_CONNECTION);
        self.connections.push(spec);
        Ok(())
    }

    /// Opens the named connections, runs `setup` on the server's SQLite database `db` (the
    /// default connection) and checks every statement against its database: reads must be
    /// read-only queries, inserts must not be, and every parameter must name an argument
    /// (`:x`) or an access field (`@x`). `read_timeout` (the host's) becomes PostgreSQL's
    /// `statement_timeout`. Without `db` (the server's database is PostgreSQL and
    /// [`TomlSources::read_default_from`] gave every source a connection), `setup` and
    /// write paths are refused: they belong to the SQLite store.
    pub(crate) async fn install(
        &mut self,
        db: Option<&Db>,
        read_timeout: std::time::Duration,
    ) -> Result<(), ServerError> {
        let Some(db) = db else {
            self.check_without_server_db()?;
            self.pools = Some(Arc::new(self.open_connections(read_timeout).await?));
            return self.check_connected().await;
        };
        if let Some(def) = self
            .sources
            .iter()
            .find(|def| def.connection.is_none() && def.notify.is_some())
        {
            return Err(ServerError::Config(format!(
                "source `{}`: notify needs a PostgreSQL connection: name one \
                 (`connection = \"…\"`), or run the server on PostgreSQL (`database.url`)",
                def.name
            )));
        }
        let pools = self.open_connections(read_timeout).await?;
        let setup = self.setup.clone();
        let defs: Vec<StatementCheck> = self
            .sources
            .iter()
            .filter(|s| s.connection.is_none())
            .map(|s| {
                (
                    s.name.clone(),
                    s.sql.clone(),
                    properties(&s.args),
                    s.insert
                        .as_ref()
                        .map(|i| (i.sql.clone(), properties(&i.args))),
                )
            })
            .collect();
        let server_access = db
            .write(move |conn| {
                if let Some(setup) = setup {
                    conn.execute_batch(&setup)
                        .map_err(|e| DbError(format!("setup: {e}")))?;
                }
                let mut out = Vec::new();
                for (name, sql, args, insert) in defs {
                    out.push(check_sqlite(conn, &name, &sql, &args, insert)?);
                }
                Ok(out)
            })
            .await
            .map_err(|e| ServerError::Config(e.0))?;
        let mut server_access = server_access.into_iter();
        for def in &mut self.sources {
            if def.connection.is_none()
                && let Some(def) = Arc::get_mut(def)
            {
                def.access_params = server_access.next().unwrap_or_default();
            }
        }
        self.pools = Some(Arc::new(pools));
        self.check_connected().await
    }

    /// Without the server's SQLite database: every source names a connection, and there
    /// is no `setup` or write path.
    fn check_without_server_db(&self) -> Result<(), ServerError> {
        if self.setup.is_some() {
            return Err(ServerError::Config(
                "setup: runs on the server's SQLite database; with database.url = \
                 \"postgres://…\" create the tables in your own migrations"
                    .into(),
            ));
        }
        for def in &self.sources {
            if def.insert.is_some() {
                return Err(ServerError::Config(format!(
                    "source `{}`: insert: write paths go through the server's SQLite store; \
                     with database.url = \"postgres://…\" write through your application \
                     and record the change (POST /ui/changes or a NOTIFY channel)",
                    def.name
                )));
            }
            if def.connection.is_none() {
                return Err(ServerError::Config(format!(
                    "source `{}`: names no connection and the server has no SQLite database",
                    def.name
                )));
            }
        }
        Ok(())
    }

    /// Checks the statements of the sources that name a connection against it (after the
    /// pools are open).
    async fn check_connected(&mut self) -> Result<(), ServerError> {
        let Some(pools) = self.pools.clone() else {
            return Ok(());
        };
        for def in &mut self.sources {
            let Some(def) = Arc::get_mut(def) else {
                continue;
            };
            let Some(c) = def.connection.clone() else {
                continue;
            };
            if let Some(pool) = pools.sqlite.get(&c) {
                let (name, sql, args) = (def.name.clone(), def.sql.clone(), properties(&def.args));
                def.access_params = pool
                    .read(None, move |conn| {
                        check_sqlite(conn, &name, &sql, &args, None)
                    })
                    .await
                    .map_err(|e| ServerError::Config(e.0))?;
            } else if let Some(pool) = pools.pg.get(&c) {
                let (statement, access) = check_pg(pool, def).await?;
                def.access_params = access;
                def.pg = Some(statement);
            }
        }
        Ok(())
    }

    /// Opens every `[connections.NAME]` (one connection each, so a bad path, host or
    /// password fails the start naming the key).
    async fn open_connections(
        &self,
        read_timeout: std::time::Duration,
    ) -> Result<Pools, ServerError> {
        let mut pools = Pools::default();
        pools.read_timeout = read_timeout;
        for spec in &self.connections {
            let fail = |e: String| {
                ServerError::Config(format!("connections.{}: cannot connect: {e}", spec.name))
            };
            match &spec.target {
                Target::Sqlite(path) => {
                    let pool = ReadPool::open(path.clone(), spec.pool)
                        .await
                        .map_err(|e| fail(format!("{}: {e}", path.display())))?;
                    pools.sqlite.insert(spec.name.clone(), pool);
                }
                Target::Postgres(_) => {
                    let pool = PgPool::open(spec).await.map_err(fail)?;
                    pools.pg.insert(spec.name.clone(), pool);
                }
            }
        }
        Ok(pools)
    }

    /// Starts one `LISTEN` task per PostgreSQL connection that a source names a `notify`
    /// channel of: each notification records a change event of the source into `sync`
    /// (docs/configuration.md). The tasks end with the server. Call after
    /// [`TomlSources::install`].
    pub(crate) fn listen(&self, sync: &ui_sync::SyncService) {
        let Some(pools) = &self.pools else {
            return;
        };
        for spec in &self.connections {
            let listened: Vec<Listened> = self
                .sources
                .iter()
                .filter(|s| s.connection.as_deref() == Some(spec.name.as_str()))
                .filter_map(|s| {
                    Some(Listened {
                        channel: s.notify.clone()?,
                        source: s.name.clone(),
                        fixed_audience: s.audience.render(&Map::new()),
                    })
                })
                .collect();
            if !listened.is_empty() {
                crate::connections::spawn_listener(
                    spec,
                    listened,
                    sync.clone(),
                    pools.stop.clone(),
                );
            }
        }
    }

    /// Registers one [`FnSource`] per declared source, reading from `db` (the server's
    /// SQLite database) or its named connection.
    pub(crate) fn registry(&self, db: Option<&Db>) -> Result<SourceRegistry, ServerError> {
        let mut registry = SourceRegistry::new();
        for def in &self.sources {
            let reader = match (&def.connection, &self.pools) {
                (None, _) => Reader::Server(db.cloned().ok_or_else(|| {
                    ServerError::Config(format!(
                        "source `{}`: names no connection and the server has no SQLite database",
                        def.name
                    ))
                })?),
                (Some(c), Some(pools)) => {
                    if let Some(pool) = pools.sqlite.get(c) {
                        Reader::Sqlite(Arc::clone(pool))
                    } else if let Some(pool) = pools.pg.get(c) {
                        Reader::Postgres(Arc::clone(pool), pools.read_timeout)
                    } else {
                        return Err(ServerError::Config(format!(
                            "source `{}`: connection `{c}` is not open",
                            def.name
                        )));
                    }
                }
                (Some(c), None) => {
                    return Err(ServerError::Config(format!(
                        "source `{}`: connection `{c}` is not open (install first)",
                        def.name
                    )));
                }
            };
            let d = Arc::clone(def);
            let check_def = Arc::clone(def);
            let source = FnSource::from_json_schemas(&def.args, &def.result, move |request| {
                let (d, reader) = (Arc::clone(&d), reader.clone());
                async move { read(&reader, &d, request).await }
            })
            .map_err(|e| ServerError::Config(format!("source `{}`: {e}", def.name)))?
            .with_authorize_check(move |_, access, _| authorize(&check_def, access))
            .with_changes(Feed(Arc::clone(def)));
            registry.register(def.name.clone(), source);
        }
        Ok(registry)
    }

    /// The field names of the rows `name` answers, as its `result` schema lists them (the
    /// `properties` of its `items`), or `None` when the source is not declared or its result
    /// schema names no fields. `uiblocks check --sources` lints Table columns with them.
    pub fn result_fields(&self, name: &str) -> Option<Vec<String>> {
        let source = self.sources.iter().find(|s| s.name == name)?;
        let properties = source.result.get("items")?.get("properties")?.as_object()?;
        Some(properties.keys().cloned().collect())
    }

    /// The JSON Schema of the result `name` answers (its rows), or `None` when the source
    /// is not declared; `{}` when its declaration gives none. For the agent's guide.
    pub fn result_schema(&self, name: &str) -> Option<&Json> {
        self.get(name).map(|s| &s.result)
    }

    /// The argument schema of each source, for the agent's prompt.
    pub fn schemas(&self) -> Vec<SourceInfo> {
        self.sources
            .iter()
            .map(|s| SourceInfo {
                name: s.name.clone(),
                description: s.description.clone(),
                args: s.args.clone(),
                writable: s.insert.is_some(),
            })
            .collect()
    }

    fn get(&self, name: &str) -> Option<&Arc<SourceDef>> {
        self.sources.iter().find(|s| s.name == name)
    }

    /// The write path of the source `name`: checks each row against `insert.args`, runs
    /// the insert for every row in one transaction together with the change events (one
    /// per distinct key, audience from the writer's `user` and `project`) when the change
    /// log lives in the same database (the outbox), and returns their cursor; otherwise
    /// returns the drafts for the caller to record after the commit.
    pub(crate) async fn insert(
        &self,
        store: &crate::store::SqliteUiStore,
        name: &str,
        writer: &Map<String, Json>,
        rows: Vec<Map<String, Json>>,
        rs: Option<RequestSource>,
    ) -> Result<InsertOutcome, InsertError> {
        let def = self.get(name).ok_or(InsertError::UnknownSource)?;
        let insert = def.insert.as_ref().ok_or(InsertError::NotWritable)?;
        if rows.is_empty() || rows.len() > MAX_INSERT_ROWS {
            return Err(InsertError::Invalid(format!(
                "send 1 to {MAX_INSERT_ROWS} rows"
            )));
        }
        for (i, row) in rows.iter().enumerate() {
            let value = Value::from(&Json::Object(row.clone()));
            ui_host::check_json_schema(&insert.args, &value, &format!("rows[{i}]"))
                .map_err(InsertError::Invalid)?;
        }
        let audience = def
            .audience
            .render(writer)
            .ok_or_else(|| InsertError::Invalid("the writer has no audience".into()))?;
        let mut drafts: Vec<ChangeDraft> = Vec::new();
        for row in &rows {
            let mut keys: Vec<Option<String>> = def.keys.iter().map(|k| k.render(row)).collect();
            if keys.is_empty() || keys.iter().any(Option::is_none) {
                // A key that cannot be named: the whole source changed.
                keys = vec![None];
            }
            for key in keys {
                let draft = ChangeDraft {
                    source: def.name.clone(),
                    audience: Some(audience.clone()),
                    key,
                    rs: rs.clone(),
                };
                if !drafts.contains(&draft) {
                    drafts.push(draft);
                }
            }
        }
        // The outbox: with the change log in this database, the events are appended in the
        // rows' own transaction, so a kill between the two cannot lose them. Without a log
        // here the caller records the drafts after the commit (at least once).
        let outbox = match store.feed() {
            Some(feed) => Some((
                feed.clone(),
                drafts
                    .iter()
                    .map(|d| feed.prepare(d.clone()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| InsertError::Invalid(e.to_string()))?,
            )),
            None => None,
        };
        let events = outbox.as_ref().map(|(_, rows)| rows.clone());
        let (sql, writer, count) = (insert.sql.clone(), writer.clone(), rows.len());
        let seqs = store
            .transaction(move |tx| {
                let mut stmt = tx.prepare_cached(&sql)?;
                for row in &rows {
                    bind_all(&mut stmt, row, &writer)?;
                    stmt.raw_execute()?;
                }
                match &events {
                    Some(events) => ui_sync::SqliteStore::append_in(tx, OUTBOX_WRITER, events)
                        .map_err(|e| DbError(e.to_string())),
                    None => Ok(Vec::new()),
                }
            })
            .await
            .map_err(|e| InsertError::Database(e.0))?;
        let Some((feed, _)) = outbox else {
            return Ok(InsertOutcome {
                rows: count,
                cursor: None,
                drafts,
            });
        };
        feed.appended();
        Ok(InsertOutcome {
            rows: count,
            cursor: seqs.into_iter().max().map(|seq| ui_sync::Cursor {
                epoch: feed.epoch(),
                seq,
            }),
            drafts: Vec::new(),
        })
    }
}

/// What a source offers the agent: its name, description and argument schema.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceInfo {
    /// The name agents write in `@Query("…")`.
    pub name: String,
    /// What it reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub args: Json,
    /// Whether rows can be written through `POST /api/sources/{name}/rows`.
    pub writable: bool,
}

/// The `writer` column of events appended by the outbox of a source's write path.
const OUTBOX_WRITER: &str = "outbox";

/// The rows written, the cursor of the events appended with them, and the change events
/// still to record (only when the change log is not in the server's database).
#[derive(Debug, Clone)]
pub(crate) struct InsertOutcome {
    pub(crate) rows: usize,
    pub(crate) cursor: Option<ui_sync::Cursor>,
    pub(crate) drafts: Vec<ChangeDraft>,
}

/// Why an insert failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InsertError {
    UnknownSource,
    NotWritable,
    Invalid(String),
    Database(String),
}

/// The change feed of a TOML source (`sync.md` §8.1): the audience from the captured
/// access, the keys from the arguments (a key that cannot be named makes the reading
/// depend on the whole source).
struct Feed(Arc<SourceDef>);

impl ChangeFeed for Feed {
    fn audience(&self, _args: &ui_core::Record, access: &Value) -> Option<String> {
        self.0.audience.render_value(access).map(|a| a.to_string())
    }

    fn keys(&self, args: &ui_core::Record) -> Vec<String> {
        let keys: Option<Vec<String>> = self
            .0
            .keys
            .iter()
            .map(|k| k.render_record(Some(args)))
            .collect();
        keys.unwrap_or_default()
    }

    fn complete(&self) -> bool {
        self.0.complete
    }
}

fn check_params(
    name: &str,
    what: &str,
    stmt: &rusqlite::Statement<'_>,
    fields: &BTreeSet<String>,
    access: &[&str],
) -> DbResult<Vec<String>> {
    let mut used = Vec::new();
    for i in 1..=stmt.parameter_count() {
        let Some(param) = stmt.parameter_name(i) else {
            return Err(DbError(format!(
                "source `{name}`: {what}: use named parameters (`:name`, `@name`), not `?`"
            )));
        };
        let (prefix, field) = param.split_at(1);
        match prefix {
            ":" if fields.contains(field) => {}
            "@" if access.contains(&field) => used.push(field.to_owned()),
            ":" => {
                return Err(DbError(format!(
                    "source `{name}`: {what}: `{param}` is not a declared field"
                )));
            }
            _ => {
                return Err(DbError(format!(
                    "source `{name}`: {what}: `{param}` is not one of {}",
                    access
                        .iter()
                        .map(|a| format!("@{a}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
    }
    Ok(used)
}

fn sql_value(json: Option<&Json>) -> SqlValue {
    match json {
        None | Some(Json::Null) => SqlValue::Null,
        Some(Json::Bool(b)) => SqlValue::Integer(i64::from(*b)),
        Some(Json::Number(n)) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(0.0)),
        },
        Some(Json::String(s)) => SqlValue::Text(s.clone()),
        Some(other) => SqlValue::Text(other.to_string()),
    }
}

/// Binds every named parameter: `:x` from `fields`, `@x` from `access`.
fn bind_all(
    stmt: &mut rusqlite::Statement<'_>,
    fields: &Map<String, Json>,
    access: &Map<String, Json>,
) -> rusqlite::Result<()> {
    for i in 1..=stmt.parameter_count() {
        let value = match stmt.parameter_name(i) {
            Some(p) if p.starts_with('@') => sql_value(access.get(&p[1..])),
            Some(p) => sql_value(fields.get(&p[1..])),
            None => SqlValue::Null,
        };
        stmt.raw_bind_parameter(i, value)?;
    }
    Ok(())
}

fn json_of(value: ValueRef<'_>) -> Result<Json, String> {
    Ok(match value {
        ValueRef::Null => Json::Null,
        ValueRef::Integer(i) => Json::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number),
        ValueRef::Text(t) => Json::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(_) => return Err("a source cannot return BLOB columns".to_owned()),
    })
}

fn access_map(access: &Value) -> Map<String, Json> {
    match Json::from(access) {
        Json::Object(m) => m,
        _ => Map::new(),
    }
}

/// Every `@field` the read binds must be a string of the captured access.
fn authorize(def: &SourceDef, access: &Value) -> Result<(), HostError> {
    let access = access.as_record();
    for field in &def.access_params {
        if access
            .and_then(|a| a.get(field))
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(UiRefusal::new(
                "access-unavailable",
                format!("The captured access has no `{field}`."),
            )
            .into());
        }
    }
    Ok(())
}

/// Checks a read (and an insert) of a source on a SQLite connection; the read's `@name`
/// parameters.
fn check_sqlite(
    conn: &rusqlite::Connection,
    name: &str,
    sql: &str,
    args: &BTreeSet<String>,
    insert: Option<(String, BTreeSet<String>)>,
) -> DbResult<Vec<String>> {
    let stmt = conn
        .prepare(sql)
        .map_err(|e| DbError(format!("source `{name}`: sql: {e}")))?;
    if !stmt.readonly() {
        return Err(DbError(format!(
            "source `{name}`: sql must be read-only (a SELECT)"
        )));
    }
    let access = check_params(name, "sql", &stmt, args, READ_ACCESS)?;
    if let Some((sql, fields)) = insert {
        let stmt = conn
            .prepare(&sql)
            .map_err(|e| DbError(format!("source `{name}`: insert.sql: {e}")))?;
        if stmt.readonly() {
            return Err(DbError(format!("source `{name}`: insert.sql must write")));
        }
        check_params(name, "insert.sql", &stmt, &fields, WRITE_ACCESS)?;
    }
    Ok(access)
}

/// Checks a read of a source on PostgreSQL: a query, every parameter declared and of a
/// type that can be bound. Its statement and its `@name` parameters.
async fn check_pg(
    pool: &Arc<PgPool>,
    def: &SourceDef,
) -> Result<(PgStatement, Vec<String>), ServerError> {
    let name = &def.name;
    let fail = |e: String| ServerError::Config(format!("source `{name}`: sql: {e}"));
    if !crate::connections::looks_like_query(&def.sql) {
        return Err(fail(
            "must be a query (SELECT, WITH, VALUES or TABLE)".into(),
        ));
    }
    let (numbered, params) = crate::connections::number_params(&def.sql).map_err(fail)?;
    let args = properties(&def.args);
    let mut access = Vec::new();
    for param in &params {
        let (prefix, field) = param.split_at(1);
        match prefix {
            ":" if args.contains(field) => {}
            "@" if READ_ACCESS.contains(&field) => access.push(field.to_owned()),
            ":" => return Err(fail(format!("`{param}` is not a declared field"))),
            _ => {
                return Err(fail(format!(
                    "`{param}` is not one of @user, @project, @chat"
                )));
            }
        }
    }
    let sql = crate::connections::json_rows_sql(&numbered);
    let types = pool.param_types(&sql).await.map_err(fail)?;
    for (param, ty) in params.iter().zip(&types) {
        if !crate::connections::param_type_supported(ty) {
            return Err(fail(format!(
                "`{param}` has type {ty}, which cannot be bound; cast it in the SQL \
                 (`{param}::text::{ty}`)"
            )));
        }
    }
    Ok((PgStatement { sql, params }, access))
}

/// Runs a source's SQL on a SQLite connection: its rows as records.
fn sqlite_rows(
    conn: &rusqlite::Connection,
    sql: &str,
    args: &Map<String, Json>,
    access: &Map<String, Json>,
) -> DbResult<Json> {
    let mut stmt = conn.prepare_cached(sql)?;
    bind_all(&mut stmt, args, access)?;
    let names: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        if out.len() == MAX_SOURCE_ROWS {
            return Err(DbError(format!(
                "The source returned more than {MAX_SOURCE_ROWS} rows."
            )));
        }
        let mut record = Map::new();
        for (i, name) in names.iter().enumerate() {
            record.insert(name.clone(), json_of(row.get_ref(i)?).map_err(DbError)?);
        }
        out.push(Json::Object(record));
    }
    Ok(Json::Array(out))
}

async fn read(
    reader: &Reader,
    def: &Arc<SourceDef>,
    request: ReadRequest,
) -> Result<Value, HostError> {
    let args = match Json::from(&Value::record(request.args)) {
        Json::Object(m) => m,
        _ => Map::new(),
    };
    let access = access_map(&request.access);
    let rows = match reader {
        Reader::Server(db) => {
            let sql = def.sql.clone();
            db.read_source(request.cancel, move |conn| {
                sqlite_rows(conn, &sql, &args, &access)
            })
            .await
            .map_err(|e| HostError::message(e.0))?
        }
        Reader::Sqlite(pool) => {
            let sql = def.sql.clone();
            pool.read(Some(request.cancel), move |conn| {
                sqlite_rows(conn, &sql, &args, &access)
            })
            .await
            .map_err(|e| HostError::message(e.0))?
        }
        Reader::Postgres(pool, timeout) => {
            let statement = def
                .pg
                .as_ref()
                .ok_or_else(|| HostError::message("The source was not installed."))?;
            let params: Vec<PgParam<'_>> = statement
                .params
                .iter()
                .map(|p| {
                    let (prefix, field) = p.split_at(1);
                    PgParam(if prefix == "@" {
                        access.get(field)
                    } else {
                        args.get(field)
                    })
                })
                .collect();
            let rows = pool
                .read_json(
                    &statement.sql,
                    &params,
                    *timeout,
                    MAX_SOURCE_ROWS,
                    &request.cancel,
                )
                .await
                .map_err(|e| match e {
                    PgReadError::TimedOut => HostError::from(UiRefusal::new(
                        ui_core::HostCode::TimedOut.as_str(),
                        "The source did not answer in time.",
                    )),
                    e => HostError::message(e.to_string()),
                })?;
            Json::Array(rows)
        }
    };
    Ok(Value::from(&rows))
}

/// The host of the server: the captured access of a reply is its chat's owner and project
/// (`{"user", "project", "chat"}`), the sources are the TOML ones, links go to the
/// configured resolver.
pub struct SqlHost {
    sources: SourceRegistry,
    links: Option<Arc<dyn LinkResolver>>,
}

impl std::fmt::Debug for SqlHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlHost")
            .field("sources", &self.sources)
            .field("links", &self.links.is_some())
            .finish()
    }
}

impl SqlHost {
    pub(crate) fn new(sources: SourceRegistry, links: Option<Arc<dyn LinkResolver>>) -> Self {
        SqlHost { sources, links }
    }
}

#[async_trait]
impl UiHost for SqlHost {
    async fn capture(&self, info: &ChatInfo) -> Result<Value, HostError> {
        let data = info.data.as_record();
        let field = |name: &str| {
            data.and_then(|d| d.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| HostError::message(format!("The chat has no {name}.")))
        };
        let mut access = ui_core::Record::default();
        access.insert("user".into(), Value::from(field("owner")?));
        access.insert("project".into(), Value::from(field("project")?));
        access.insert("chat".into(), Value::from(info.chat_id.as_str()));
        Ok(Value::record(access))
    }

    fn sources(&self) -> &SourceRegistry {
        &self.sources
    }

    fn links(&self) -> Option<&dyn LinkResolver> {
        self.links.as_deref()
    }
}

/// The demo's links: a relative `File` or `Diff` path inside the project, and any
/// `Commit`, become chips labelled with the path or the short hash; absolute paths and
/// paths with `..` stay plain (`outside-project`); `Node` targets are unknown
/// (`target-unavailable`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoLinks;

#[async_trait]
impl LinkResolver for DemoLinks {
    async fn link(
        &self,
        _: &ChatInfo,
        access: &Value,
        target: &LinkTarget,
    ) -> Result<Json, HostError> {
        let project = access
            .as_record()
            .and_then(|a| a.get("project"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut chip = LinkResolution::chip(target.clone());
        match target {
            LinkTarget::File { path, .. } | LinkTarget::Diff { path } => {
                if path.starts_with('/') || path.split(['/', '\\']).any(|s| s == "..") {
                    return Err(UiRefusal::new(
                        "outside-project",
                        "The path lies outside the project.",
                    )
                    .into());
                }
                chip.label = Some(path.clone());
                chip.relative_path = Some(path.clone());
            }
            LinkTarget::Commit { sha } => {
                chip.label = Some(sha.chars().take(7).collect());
            }
            LinkTarget::Node { .. } => {
                return Err(UiRefusal::new("target-unavailable", "No such node.").into());
            }
        }
        chip.project_id = project;
        serde_json::to_value(chip).map_err(|e| HostError::message(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_and_refuse_junk() {
        let t = Template::parse("branch:{branch}").unwrap();
        let mut m = Map::new();
        m.insert("branch".into(), Json::from("main"));
        assert_eq!(t.render(&m).as_deref(), Some("branch:main"));
        assert_eq!(t.render(&Map::new()), None);
        assert!(Template::parse("a{").is_err());
        assert!(Template::parse("a{}").is_err());
        assert!(Template::parse("a}").is_err());
        assert!(AudienceTemplate::parse("global:{x}").is_err());
        assert!(AudienceTemplate::parse("project").is_err());
    }

    #[test]
    fn records_render_as_their_json_does() {
        // Readings render keys from parsed arguments, writes from the rows' JSON: the
        // same fields must give the same text.
        let json: Map<String, Json> = serde_json::from_str(
            r#"{"s": "main", "i": 5, "f": 2.5, "b": true, "n": null, "o": {"x": 1}}"#,
        )
        .unwrap();
        let value = Value::from(&Json::Object(json.clone()));
        for text in [
            "k:{s}",
            "{i}/{f}",
            "{b}",
            "{n}",
            "{o}",
            "{missing}",
            "plain",
        ] {
            let t = Template::parse(text).unwrap();
            assert_eq!(
                t.render_record(value.as_record()),
                t.render(&json),
                "{text}"
            );
        }
        let audience = AudienceTemplate::parse("project:{s}").unwrap();
        assert_eq!(audience.render_value(&value), audience.render(&json));
        assert_eq!(audience.render_value(&Value::from("x")), None);
    }

    #[test]
    fn declarations_are_checked() {
        let bad = |toml: &str| TomlSources::parse(toml).unwrap_err().to_string();
        assert!(
            bad("[[source]]\nname = \"CI\"\nsql = \"SELECT 1\"\nargs = { type = \"object\" }")
                .contains("not a source name")
        );
        assert!(
            bad("[[source]]\nname = \"a\"\nsql = \"SELECT 1\"\nargs = { type = \"string\" }")
                .contains("must be a schema of `type = \"object\"`")
        );
        assert!(bad("[[source]]\nname = \"a\"\nsql = \"SELECT 1\"\nargs = { type = \"object\" }\nkeys = [\"k:{x}\"]").contains("not an argument"));
        assert!(bad("[[source]]\nname = \"a\"\nsql = \"SELECT 1\"\nargs = { type = \"object\" }\naudience = \"project:{branch}\"").contains("audience"));
        assert!(bad("[[source]]\nname = \"a\"\nsql = \"SELECT 1\"\nargs = { type = \"object\" }\nextra = 1").contains("unknown field"));
        assert!(bad("[[source]]\nname = \"a\"\nsql = \"SELECT 1\"\nargs = { type = \"object\" }\n[[source]]\nname = \"a\"\nsql = \"SELECT 1\"\nargs = { type = \"object\" }").contains("twice"));
    }

    #[test]
    fn connections_are_checked_at_start_up() {
        let bad = |toml: &str| TomlSources::parse(toml).unwrap_err().to_string();
        let source = "[[source]]\nname = \"a\"\nsql = \"SELECT 1\"\nargs = { type = \"object\" }\n";
        let e = bad(&format!("{source}connection = \"nope\""));
        assert!(
            e.contains("source `a`: connection `nope` is not declared"),
            "{e}"
        );
        let e = bad("[connections.app]\nurl = \"mysql://h/db\"");
        assert!(e.contains("connections.app.url:"), "{e}");
        let e = bad("[connections.app]\nurl = \"sqlite:///x.db\"\nsize = 3");
        assert!(e.contains("unknown field `size`"), "{e}");
        let e = bad("[connections.app]\nurl_env = \"UI_SERVER_TEST_NO_SUCH_VARIABLE\"");
        assert!(e.contains("connections.app.url_env:"), "{e}");
        let side = "[connections.side]\nurl = \"sqlite:///x.db\"\n";
        let e = bad(&format!(
            "{side}{source}connection = \"side\"\nnotify = \"c\""
        ));
        assert!(e.contains("notify needs a PostgreSQL connection"), "{e}");
        let e = bad(&format!(
            "{side}{source}connection = \"side\"\n[source.insert]\nsql = \"INSERT INTO t VALUES (1)\"\nargs = {{ type = \"object\" }}"
        ));
        assert!(e.contains("source `a`: insert:"), "{e}");
        let ok = TomlSources::parse(&format!("{side}{source}connection = \"side\"")).unwrap();
        assert_eq!(ok.names().collect::<Vec<_>>(), ["a"]);
    }

    #[tokio::test]
    async fn a_write_on_a_named_sqlite_connection_is_refused_at_start_up() {
        let dir = temp_dir("named-write");
        let side = dir.join("side.db");
        rusqlite::Connection::open(&side)
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER)")
            .unwrap();
        let db = Db::open(&dir.join("app.db"), crate::store::SCHEMA, 2)
            .await
            .unwrap();
        let toml = format!(
            "[connections.side]\nurl = \"sqlite://{}\"\n[[source]]\nname = \"a\"\n\
             sql = \"DELETE FROM t RETURNING x\"\nargs = {{ type = \"object\" }}\nconnection = \"side\"",
            side.display()
        );
        let mut sources = TomlSources::parse(&toml).unwrap();
        let e = sources
            .install(Some(&db), std::time::Duration::from_secs(8))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("source `a`: sql must be read-only"), "{e}");
        let missing = format!(
            "[connections.gone]\nurl = \"sqlite://{}\"",
            dir.join("missing.db").display()
        );
        let e = TomlSources::parse(&missing)
            .unwrap()
            .install(Some(&db), std::time::Duration::from_secs(8))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("connections.gone: cannot connect"), "{e}");
        // Nothing listens on port 1 of loopback: the start fails naming the connection.
        let e = TomlSources::parse(
            "[connections.app]\nurl = \"postgres://u@127.0.0.1:1/db\"\nconnect_timeout_ms = 2000",
        )
        .unwrap()
        .install(Some(&db), std::time::Duration::from_secs(8))
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains("connections.app: cannot connect"), "{e}");
        // A source without a connection reads the server's database: `notify` is for
        // PostgreSQL, so it is refused on SQLite (`tests/pg_sources.rs` listens on it on
        // PostgreSQL).
        let e = TomlSources::parse(
            "[[source]]\nname = \"a\"\nsql = \"SELECT 1 AS x\"\nargs = { type = \"object\" }\n\
             notify = \"runs\"",
        )
        .unwrap()
        .install(Some(&db), std::time::Duration::from_secs(8))
        .await
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("source `a`: notify needs a PostgreSQL connection"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn the_default_connection_can_be_a_url() {
        let dir = temp_dir("default-url");
        let path = dir.join("app.db");
        let db = Db::open(&path, crate::store::SCHEMA, 2).await.unwrap();
        let toml = "setup = \"CREATE TABLE IF NOT EXISTS t (x INTEGER); DELETE FROM t; INSERT INTO t VALUES (7);\"\n\
                    [[source]]\nname = \"t\"\nsql = \"SELECT x FROM t\"\nargs = { type = \"object\" }";
        let mut sources = TomlSources::parse(toml).unwrap();
        assert!(sources.read_default_from("mysql://x").is_err());
        sources
            .read_default_from(&format!("sqlite://{}", path.display()))
            .unwrap();
        sources
            .install(Some(&db), std::time::Duration::from_secs(8))
            .await
            .unwrap();
        let registry = sources.registry(Some(&db)).unwrap();
        let got = registry
            .get("t")
            .unwrap()
            .read(ReadRequest {
                info: Arc::new(ChatInfo::default()),
                args: ui_core::Record::default(),
                access: Arc::new(Value::Null),
                cancel: tokio_util::sync::CancellationToken::new(),
            })
            .await
            .unwrap();
        assert_eq!(got.to_js_json(), r#"[{"x":7}]"#);
        std::fs::remove_dir_all(&dir).ok();
    }

    async fn counting_source(dir: &std::path::Path) -> SourceRegistry {
        let cte = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < :n)";
        let args = "args = { type = \"object\", properties = { n = { type = \"integer\" } } }";
        let toml = format!(
            "[[source]]\nname = \"count\"\nsql = \"{cte} SELECT x FROM c\"\n{args}\n\
             [[source]]\nname = \"spin\"\nsql = \"{cte} SELECT max(x) AS x FROM c\"\n{args}\n"
        );
        let db = Db::open(&dir.join("app.db"), crate::store::SCHEMA, 4)
            .await
            .unwrap();
        let mut sources = TomlSources::parse(&toml).unwrap();
        sources
            .install(Some(&db), std::time::Duration::from_secs(8))
            .await
            .unwrap();
        sources.registry(Some(&db)).unwrap()
    }

    fn request(n: i64, cancel: tokio_util::sync::CancellationToken) -> ReadRequest {
        let mut args = ui_core::Record::default();
        args.insert("n".into(), Value::from(&Json::from(n)));
        ReadRequest {
            info: Arc::new(ChatInfo::default()),
            args,
            access: Arc::new(Value::Null),
            cancel,
        }
    }

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ui-server-unit-{tag}-{}-{}",
            std::process::id(),
            crate::store::new_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn a_read_returns_at_most_the_row_limit() {
        let dir = temp_dir("rows");
        let registry = counting_source(&dir).await;
        let source = registry.get("count").unwrap();
        let token = tokio_util::sync::CancellationToken::new;
        let at = source
            .read(request(MAX_SOURCE_ROWS as i64, token()))
            .await
            .unwrap();
        assert_eq!(at.as_array().unwrap().len(), MAX_SOURCE_ROWS);
        assert_eq!(at.as_array().unwrap()[0].to_js_json(), r#"{"x":1}"#);
        let over = source
            .read(request(MAX_SOURCE_ROWS as i64 + 1, token()))
            .await
            .unwrap_err();
        assert!(over.reason().contains("more than"), "{over}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_read_is_interrupted() {
        let dir = temp_dir("cancel");
        let registry = counting_source(&dir).await;
        let source = registry.get("spin").unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        let fire = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            fire.cancel();
        });
        // Counting to 2⁶³ would take ages; the interrupt ends it.
        let started = std::time::Instant::now();
        let e = source.read(request(i64::MAX, cancel)).await.unwrap_err();
        assert!(e.reason().contains("interrupt"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // The connection serves the next read normally.
        let token = tokio_util::sync::CancellationToken::new();
        for _ in 0..crate::limits::DB_READERS + 1 {
            assert!(source.read(request(3, token.clone())).await.is_ok());
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
