//! `uiblocks serve`: [`ui_server::bind`] and [`ui_server::Bound::run`] on a tokio runtime,
//! with the log written to standard error.

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context as _;
use tracing_subscriber::EnvFilter;
use ui_server::{AuthConfig, ConnSetting, DEMO_SOURCES, ServerConfig, SourcesConfig};

use crate::cli::ServeArgs;

/// The server configuration `args` describe: the defaults, then `--config`, then the
/// `UIBLOCKS_*` variables of `env`, then the flags given. With the demo and no sources
/// set anywhere, the demo sources.
///
/// # Errors
/// A configuration error naming the key, or a flag out of its range (`--idle-timeout 0ms`:
/// see [`ServerConfig::check_connections`]).
pub fn config(
    args: &ServeArgs,
    env: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<ServerConfig> {
    let mut config = ui_server::load_config(args.config.as_deref(), env)?;
    if args.demo {
        config.demo = true;
    }
    if let Some(bind) = args.bind {
        config.bind = bind;
    }
    if let Some(port) = args.port {
        config.bind = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    }
    if let Some(db) = &args.db {
        // `--db FILE` names the SQLite file: the server's database is that file.
        config.database.clone_from(db);
        config.postgres = None;
    }
    if let Some(path) = &args.sources {
        config.sources = SourcesConfig::File(path.clone());
    }
    if config.demo && config.sources == SourcesConfig::None {
        config.sources = SourcesConfig::Inline(DEMO_SOURCES.to_owned());
    }
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
        config
            .set_write_timeout(timeout)
            .map_err(|e| anyhow::anyhow!("--write-timeout: {}", e.message()))?;
    }
    if args.secure_cookies {
        config.secure_cookies = true;
    }
    // The file and the variables were checked as they were read: what fails now is a flag.
    config
        .check_connections()
        .map_err(|e| anyhow::anyhow!("{}: {}", flag(e.setting), e.message()))?;
    if config.auth == AuthConfig::Demo && !config.demo {
        anyhow::bail!("auth.mode: `demo` needs server.demo = true or --demo");
    }
    Ok(config)
}

/// The flag that sets `setting`.
fn flag(setting: ConnSetting) -> &'static str {
    match setting {
        ConnSetting::MaxConnections => "--max-connections",
        ConnSetting::HeaderReadTimeout => "--header-timeout",
        ConnSetting::BodyReadTimeout => "--body-timeout",
        ConnSetting::IdleTimeout => "--idle-timeout",
        ConnSetting::WriteTimeout => "--write-timeout",
        ConnSetting::ShutdownSpread => "--shutdown-spread",
        ConnSetting::DrainTimeout => "--drain-timeout",
        _ => setting.key(),
    }
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
    let config = config(
        args,
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
    .context("bad configuration")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let demo = config.demo;
    let database = config.database_label();
    runtime.block_on(async move {
        let bound = ui_server::bind(config).await.context("cannot start")?;
        let addr = bound
            .local_addr()
            .context("cannot read the bound address")?;
        println!(
            "uiblocks: serving{} on http://{addr}/ (database {database}; Ctrl-C stops)",
            if demo { " the demo" } else { "" },
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

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn serve_args(argv: &[&str]) -> ServeArgs {
        let argv = ["uiblocks", "serve"].iter().chain(argv);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Serve(args) => args,
            other => panic!("not serve: {other:?}"),
        }
    }

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn config_of(argv: &[&str], env: &[(&str, &str)]) -> anyhow::Result<ServerConfig> {
        config(&serve_args(argv), vars(env))
    }

    #[test]
    fn demo_authentication_is_satisfied_by_the_demo_flag() {
        let mode = ("UIBLOCKS_AUTH_MODE", "demo");
        let config = config_of(&["--demo"], &[mode]).unwrap();
        assert_eq!((config.auth, config.demo), (AuthConfig::Demo, true));
        let config = config_of(&[], &[mode, ("UIBLOCKS_SERVER_DEMO", "true")]).unwrap();
        assert_eq!(config.auth, AuthConfig::Demo);
        let e = config_of(&[], &[mode]).unwrap_err().to_string();
        assert!(e.contains("auth.mode") && e.contains("--demo"), "{e}");
    }

    #[test]
    fn a_write_timeout_out_of_range_names_the_flag_and_the_range() {
        for given in ["0ms", "5ms"] {
            let e = config_of(&["--write-timeout", given], &[])
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!("--write-timeout: must be from 10ms to 24h; got {given}")
            );
        }
    }
}
