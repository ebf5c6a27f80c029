//! Serving the router on a socket, with a graceful shutdown that ends event streams with
//! `bye shutdown` first.

use std::net::Ipv4Addr;

use axum::serve::ListenerExt as _;
use tokio::net::TcpListener;

use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::routes::router;
use crate::state::AppState;

/// Opens the state for `config` (seeding the demo chats and starting the demo's CI-run
/// writer when `config.demo` is set), binds `127.0.0.1:<config.port>` and serves until Ctrl-C.
///
/// # Errors
/// [`ServerError`] when the state cannot be opened or the socket fails.
pub async fn serve(config: ServerConfig) -> Result<(), ServerError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, config.port)).await?;
    let demo = config.demo;
    let state = AppState::open(config).await?;
    let writer = if demo {
        if let Err(e) = crate::demo::seed_demo(&state).await {
            eprintln!("uiblocks: the demo seed failed: {e:?}");
        }
        Some(crate::demo::spawn_demo_writer(state.clone()))
    } else {
        None
    };
    let served = serve_on(listener, state, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    if let Some(writer) = writer {
        writer.abort();
    }
    served
}

/// Serves the router of `state` on `listener` (every connection with `TCP_NODELAY`) until
/// `shutdown` completes; then event streams say `bye shutdown` and close, open requests
/// finish, and the change feed writes what it holds.
///
/// # Errors
/// [`ServerError::Io`] when the socket fails.
pub async fn serve_on(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let app = router(state.clone());
    let streams = state.clone();
    // Answers and event frames are small writes that should leave at once: without
    // `TCP_NODELAY`, Nagle's algorithm may hold one back until the previous is acked.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            streams.shut_down_streams();
        })
        .await?;
    state.sync().shutdown().await;
    Ok(())
}
