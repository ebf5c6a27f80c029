//! The command line of `uiblocks`, parsed with clap.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `uiblocks`: compile, check and serve uiblocks replies.
#[derive(Debug, Parser)]
#[command(name = "uiblocks", version, about, long_about = None)]
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compile files as final replies and print every error and warning (exit 1 on errors).
    Check(CheckArgs),
    /// Compile a file and print its blocks as JSON.
    Compile(CompileArgs),
    /// Print the plain-text fallback of a reply.
    Fallback(FallbackArgs),
    /// Print the agent-facing catalog texts.
    Catalog(CatalogArgs),
    /// Print the writing guide for agents (docs/guide.md), with the host's sources when
    /// given; its size goes to standard error.
    Guide(GuideArgs),
    /// Print the JSON Schemas of the wire types (the list when no type is given).
    Schema(SchemaArgs),
    /// Run the JSON-lines driver on standard input and output (`driver.md`).
    Driver(DriverArgs),
    /// Serve the HTTP API (and the demo), on 127.0.0.1:8080 unless configured otherwise.
    #[command(
        after_help = "A bracketed default applies only when neither --config nor a UIBLOCKS_* \
                      variable sets the key; a flag given wins over both."
    )]
    Serve(ServeArgs),
    /// Serve the Model Context Protocol on standard input and output: tools check_reply,
    /// preview_reply and describe_component, resources uiblocks://catalog and
    /// uiblocks://guide, prompt write_ui_block.
    Mcp(McpArgs),
}

/// Arguments of `mcp`.
#[derive(Debug, Clone, Default, Args)]
pub struct McpArgs {
    /// The host's query sources that `check_reply` checks queries against and the guide
    /// (`write_ui_block`, `uiblocks://guide`) lists, as for `check --sources` (a
    /// `sources.toml`, JSON argument schemas by source name, or `{source: {description,
    /// args, result}}`). Without it every `@Query` is `unknown_query`.
    #[arg(long, value_name = "FILE")]
    pub sources: Option<PathBuf>,
}

/// How `check` prints its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum CheckFormat {
    /// Diagnostics like rustc's, with source snippets.
    #[default]
    Human,
    /// One JSON object per file, one per line.
    Json,
}

/// Options shared by the commands that compile a file.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// The fence word that opens a UI block.
    #[arg(long, default_value = ui_core::FENCE_LANGUAGE, value_name = "WORD")]
    pub fence_language: String,
    /// Treat each file as one block body (no fences) instead of a whole reply.
    #[arg(long)]
    pub block: bool,
}

/// Arguments of `check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The files to check (`-`: standard input).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The output format. `json` prints `{file, blocks:[{id, findings:[{severity, code,
    /// message, start, end, line, column, nodeId?, fix?, cause?}]}]}` per file, findings in
    /// source order; `start`/`end` are the wire offsets (UTF-16 units of the block source),
    /// `line`/`column` are 1-based in the file, `fix` is `{start, end, text}`, `cause` the
    /// index of the failure a follow-on diagnostic comes from.
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    pub format: CheckFormat,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Do not print the `ok: …` line on success (findings are still printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// The host's query sources: a `sources.toml` as `uiblocks serve` reads it (argument
    /// schemas, and the result fields that `unknown_column` checks), or a JSON object of
    /// argument schemas by source name (`{"querySchemas": {…}}`, as the driver takes it),
    /// or `{source: {description, args, result}}` (whose result rows serve `unknown_column`).
    /// Without it every `@Query` is `unknown_query`.
    #[arg(long, value_name = "FILE")]
    pub sources: Option<PathBuf>,
    /// Source options.
    #[command(flatten)]
    pub source: SourceArgs,
}

/// Arguments of `driver`.
#[derive(Debug, Clone, Args)]
pub struct DriverArgs {
    /// How long, in microseconds, the driver polls standard input for the next request
    /// before it sleeps; only while the host's requests come that fast, so a host that
    /// pauses costs nothing. 0 turns polling off; at most 10000.
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub watch: u64,
}

/// Arguments of `compile`.
#[derive(Debug, Clone, Args)]
pub struct CompileArgs {
    /// The reply (or block, with `--block`) to compile (`-`: standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Compile as the final reply (the default).
    #[arg(long = "final", overrides_with = "no_final")]
    pub is_final: bool,
    /// Compile as a streaming preview: unclosed fences stay incomplete.
    #[arg(long = "no-final", overrides_with = "is_final")]
    pub no_final: bool,
    /// Source options.
    #[command(flatten)]
    pub source: SourceArgs,
}

impl CompileArgs {
    /// Whether to compile as the final reply.
    pub fn final_reply(&self) -> bool {
        !self.no_final
    }
}

/// Arguments of `fallback`.
#[derive(Debug, Clone, Args)]
pub struct FallbackArgs {
    /// The reply (or block, with `--block`; `-`: standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Source options.
    #[command(flatten)]
    pub source: SourceArgs,
}

/// Which catalog text to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum CatalogFormat {
    /// The full catalog text.
    #[default]
    Text,
    /// The compact catalog.
    Compact,
    /// The session note for the agent's system prompt.
    Note,
    /// The language reference for the agent.
    Reference,
}

/// Arguments of `catalog`.
#[derive(Debug, Clone, Args)]
pub struct CatalogArgs {
    /// Which text to print.
    #[arg(long, value_enum, default_value_t = CatalogFormat::Text)]
    pub format: CatalogFormat,
    /// The fence word the texts mention (note and reference).
    #[arg(long, default_value = ui_core::FENCE_LANGUAGE, value_name = "WORD")]
    pub fence_language: String,
}

/// Arguments of `guide`.
#[derive(Debug, Clone, Args)]
pub struct GuideArgs {
    /// The host's query sources to list, with their arguments (and, when the file gives
    /// them, descriptions and result rows): a `sources.toml`, JSON argument schemas by
    /// source name, or `{source: {description, args, result}}`.
    #[arg(long, value_name = "FILE")]
    pub sources: Option<PathBuf>,
    /// The fence word the guide and its examples use.
    #[arg(long, default_value = ui_core::FENCE_LANGUAGE, value_name = "WORD")]
    pub fence_language: String,
}

/// Arguments of `schema`.
#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// The wire type; without it the type names are listed.
    #[arg(value_name = "TYPE")]
    pub type_name: Option<String>,
}

/// Arguments of `serve`. Settings come from the defaults, then `--config`, then the
/// `UIBLOCKS_*` environment variables, then these flags (each flag wins when given).
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// A configuration file (`uiblocks.toml`; every key in docs/configuration.md).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve the demo: cookie sessions for `alice` and `bob`, the demo sources and links.
    #[arg(long)]
    pub demo: bool,
    /// The address to listen on, e.g. `0.0.0.0:8080` or `[::1]:0` [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR", conflicts_with = "port")]
    pub bind: Option<SocketAddr>,
    /// The port on 127.0.0.1 (0 picks a free one); short for `--bind 127.0.0.1:PORT`.
    #[arg(long)]
    pub port: Option<u16>,
    /// The SQLite database (created when missing) [default: uiblocks.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// A `sources.toml` declaring the SQL sources (default with `--demo`: the demo's).
    #[arg(long, value_name = "FILE")]
    pub sources: Option<PathBuf>,
    /// Open connections at most; more are answered 503 at once [default: 11000].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Longest wait for a request head after its first byte (`500ms`, `10s`, `1m`)
    /// [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub header_timeout: Option<Duration>,
    /// Longest wait for a request body after its head [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub body_timeout: Option<Duration>,
    /// Longest wait of a kept-alive connection for its next request [default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// Longest socket write without progress before the connection closes (the change
    /// feed's `writeTimeout`) [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub write_timeout: Option<Duration>,
    /// Over how long a shutdown spreads the event streams' `bye` [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub shutdown_spread: Option<Duration>,
    /// Longest graceful shutdown before open connections are dropped [default: 15s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub drain_timeout: Option<Duration>,
    /// The server is reached over HTTPS (behind a TLS proxy): session cookies are `Secure`.
    #[arg(long)]
    pub secure_cookies: bool,
}

/// A duration written as a whole number with a unit: `ms`, `s`, `m` or `h` (`250ms`,
/// `10s`, `2m`, `1h`); [`ui_server::parse_duration`].
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    ui_server::parse_duration(text)
}
