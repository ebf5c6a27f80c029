//! `uiblocks serve`: [`ui_server::serve`] on a tokio runtime.

use anyhow::Context as _;
use ui_server::{DEMO_SOURCES, ServerConfig, SourcesConfig};

use crate::cli::ServeArgs;

/// The server configuration `args` describe: with `--demo` and no `--sources`, the demo
/// sources.
pub fn config(args: &ServeArgs) -> ServerConfig {
    let mut config = ServerConfig::new(args.db.clone());
    config.demo = args.demo;
    config.port = args.port;
    config.sources = match &args.sources {
        Some(path) => SourcesConfig::File(path.clone()),
        None if args.demo => SourcesConfig::Inline(DEMO_SOURCES.to_owned()),
        None => SourcesConfig::None,
    };
    config
}

/// Prints the URL and runs [`ui_server::serve`] (which binds `127.0.0.1:<port>`, and
/// seeds the demo with `--demo`) until Ctrl-C.
///
/// # Errors
/// When the runtime cannot start, the port cannot be bound or the state cannot be opened.
pub fn run(args: &ServeArgs) -> anyhow::Result<u8> {
    let config = config(args);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let url = if config.port == 0 {
        "127.0.0.1 (a free port)".to_owned()
    } else {
        format!("http://127.0.0.1:{}/", config.port)
    };
    println!(
        "uiblocks: serving{} on {url} (database {}; Ctrl-C stops)",
        if config.demo { " the demo" } else { "" },
        config.database.display(),
    );
    runtime
        .block_on(ui_server::serve(config))
        .context("server failed")?;
    Ok(0)
}
