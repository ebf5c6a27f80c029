//! `uiblocks serve`: [`ui_server::bind`] and [`ui_server::Bound::run`] on a tokio runtime,
//! with the log written to standard error.

use anyhow::Context as _;
use tracing_subscriber::EnvFilter;
use ui_server::{DEMO_SOURCES, ServerConfig, SourcesConfig};

use crate::cli::ServeArgs;

/// The server configuration `args` describe: with `--demo` and no `--sources`, the demo
/// sources; the bounds given, the defaults of [`ui_server::limits`] otherwise.
///
/// # Errors
/// When `--write-timeout` is out of the change feed's range.
pub fn config(args: &ServeArgs) -> anyhow::Result<ServerConfig> {
    let mut config = ServerConfig::new(args.db.clone());
    config.demo = args.demo;
    config.port = args.port;
    config.sources = match &args.sources {
        Some(path) => SourcesConfig::File(path.clone()),
        None if args.demo => SourcesConfig::Inline(DEMO_SOURCES.to_owned()),
        None => SourcesConfig::None,
    };
    if let Some(n) = args.max_connections {
        config.max_connections = n;
    }
    let set = |field: &mut std::time::Duration, value: Option<std::time::Duration>| {
        if let Some(value) = value {
            *field = value;
        }
    };
    set(&mut config.header_read_timeout, args.header_timeout);
    set(&mut config.body_read_timeout, args.body_timeout);
    set(&mut config.idle_timeout, args.idle_timeout);
    set(&mut config.shutdown_spread, args.shutdown_spread);
    set(&mut config.drain_timeout, args.drain_timeout);
    if let Some(timeout) = args.write_timeout {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        config.sync_limits = config
            .sync_limits
            .with("writeTimeout", ms)
            .map_err(|e| anyhow::anyhow!("--write-timeout: {e}"))?;
    }
    config.secure_cookies = args.secure_cookies;
    Ok(config)
}

/// Logs to standard error, filtered by `RUST_LOG` (default `info`: the start-up line, one
/// line per request, warnings and errors).
fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    if let Err(e) = installed {
        eprintln!("uiblocks: no log: {e}");
    }
}

/// Binds the port, prints the URL it really listens on (the free port `--port 0`
/// picked), and serves until SIGINT (Ctrl-C) or SIGTERM, then drains (see
/// [`ui_server::serve_on`]). A port that cannot be bound fails before anything is printed.
///
/// # Errors
/// When the runtime cannot start, the port cannot be bound or the state cannot be opened.
pub fn run(args: &ServeArgs) -> anyhow::Result<u8> {
    init_logging();
    let config = config(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let demo = config.demo;
    let database = config.database.clone();
    runtime.block_on(async move {
        let bound = ui_server::bind(config).await.context("cannot start")?;
        let addr = bound
            .local_addr()
            .context("cannot read the bound address")?;
        println!(
            "uiblocks: serving{} on http://{addr}/ (database {}; Ctrl-C stops)",
            if demo { " the demo" } else { "" },
            database.display(),
        );
        tracing::info!(%addr, "listening");
        bound
            .run(ui_server::shutdown_signal())
            .await
            .context("server failed")
    })?;
    // Every task (and with them the database connections) ends with the runtime.
    drop(runtime);
    Ok(0)
}
