//! An application that embeds uiblocks: a small shop back office with its own routes and
//! its own sign-in, which mounts the uiblocks router under `/assist` and gives the
//! agent's blocks a live source written in Rust.
//!
//! - The application's routes: `GET /` and `POST /login` (`{"user": "carol"}` sets the
//!   application's own cookie `shop_session`).
//! - uiblocks under `/assist`: `/assist/api/chats`, `/assist/ui/query`,
//!   `/assist/ui/events`, … (every route of `docs/http-api.md`, behind the prefix).
//! - [`ShopAuth`] is the `Authenticator`: it finds the principal from the cookie the
//!   application already sets, so uiblocks needs no sign-in of its own.
//! - [`Orders`] is a `TypedSource`: its arguments are a serde + garde type, so an agent's
//!   `@Query("shop.orders", {status: "lost"})` is refused with `invalid_query` when the
//!   reply is compiled, and a person's input that breaks the rules (a `limit` over 20) is
//!   refused before the source is asked.
//!
//! Run it with `cargo run -p ui-server --example embed` (it listens on 127.0.0.1:3000, or
//! the port in `PORT`), then for example:
//!
//! ```sh
//! curl -c jar -H 'content-type: application/json' -d '{"user":"carol"}' localhost:3000/login
//! curl -b jar localhost:3000/assist/api/me
//! curl -b jar localhost:3000/assist/api/catalog
//! ```
//!
//! `crates/ui-server/tests/embed.rs` drives [`app`] end to end.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Json, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use ui_core::Value;
use ui_host::{ChatInfo, HostError, TypedAdapter, TypedSource, UiRefusal};
use ui_server::{
    AppState, Authenticator, Principal, ServerConfig, ServerError, SourceInfo, cookie_value, router,
};

/// Where the uiblocks router is mounted.
pub const PREFIX: &str = "/assist";

/// The application's own session cookie.
pub const SHOP_COOKIE: &str = "shop_session";

/// Signed-in sessions the application keeps at most; a sign-in beyond them is refused.
pub const MAX_SESSIONS: usize = 10_000;

/// The application's users: their id and the shop they work for (a uiblocks project).
pub const USERS: &[(&str, &str)] = &[("carol", "north"), ("dave", "south")];

/// The application's sessions: cookie token → (user, session id). The session id, not
/// the secret token, is what uiblocks sees (it counts streams and polls per session).
#[derive(Debug, Default)]
pub struct Sessions(Mutex<HashMap<String, (&'static str, String)>>);

impl Sessions {
    /// Signs `user` in: the cookie token, or `None` for an unknown user or when full.
    pub fn sign_in(&self, user: &str) -> Option<String> {
        let (id, _) = USERS.iter().find(|(id, _)| *id == user)?;
        let mut sessions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= MAX_SESSIONS {
            return None;
        }
        let token = uuid::Uuid::new_v4().simple().to_string();
        let session = uuid::Uuid::new_v4().simple().to_string();
        sessions.insert(token.clone(), (id, session));
        Some(token)
    }

    /// The user and session id of a cookie token.
    fn get(&self, token: &str) -> Option<(&'static str, String)> {
        let sessions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.get(token).cloned()
    }
}

/// uiblocks' view of the application's sign-in: the `shop_session` cookie.
#[derive(Debug)]
pub struct ShopAuth(pub Arc<Sessions>);

#[async_trait]
impl Authenticator for ShopAuth {
    async fn principal(&self, parts: &Parts) -> Option<Principal> {
        let (user, session) = self.0.get(cookie_value(parts, SHOP_COOKIE)?)?;
        let shop = USERS.iter().find(|(id, _)| *id == user)?.1;
        Some(Principal::new(user, vec![shop.to_owned()], session))
    }
}

/// The arguments of `shop.orders`: serde gives the shape, garde the rules. The compiler
/// checks an agent's literal arguments against them, and every read checks the
/// arguments a person's input produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, garde::Validate)]
#[serde(deny_unknown_fields)]
pub struct OrdersArgs {
    /// `open`, `shipped` or `returned`.
    #[garde(custom(order_status))]
    pub status: String,
    /// How many orders, 1 to 20 (10 when absent).
    #[garde(range(min = 1, max = 20))]
    #[serde(default = "default_limit")]
    pub limit: u32,
}

fn default_limit() -> u32 {
    10
}

fn order_status(value: &str, _: &()) -> garde::Result {
    match value {
        "open" | "shipped" | "returned" => Ok(()),
        _ => Err(garde::Error::new("must be `open`, `shipped` or `returned`")),
    }
}

/// One order, as blocks receive it; the result is checked against these rules too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, garde::Validate)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    /// The order number.
    #[garde(length(min = 1, max = 32))]
    pub id: String,
    /// The customer's name.
    #[garde(length(min = 1, max = 200))]
    pub customer: String,
    /// The order's status.
    #[garde(custom(order_status))]
    pub status: String,
    /// The total in cents.
    #[garde(skip)]
    pub total_cents: u64,
}

/// The application's orders, by shop: the data `shop.orders` reads (an application would
/// query its own database here, with the cancellation token stopping the query).
#[derive(Debug, Clone)]
pub struct Orders(pub Arc<Vec<(&'static str, Order)>>);

impl Orders {
    /// A few orders of both shops.
    pub fn sample() -> Self {
        let order = |shop, id: &str, customer: &str, status: &str, total_cents| {
            (
                shop,
                Order {
                    id: id.into(),
                    customer: customer.into(),
                    status: status.into(),
                    total_cents,
                },
            )
        };
        Orders(Arc::new(vec![
            order("north", "N-1001", "Ada", "open", 4_200),
            order("north", "N-1002", "Grace", "open", 1_950),
            order("north", "N-1003", "Edsger", "shipped", 12_000),
            order("south", "S-2001", "Barbara", "open", 800),
        ]))
    }

    /// The catalog entry agents see: the same rules as JSON Schema.
    pub fn info() -> SourceInfo {
        SourceInfo {
            name: "shop.orders".into(),
            description: Some("Orders of the chat's shop, newest first.".into()),
            args: serde_json::json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["status"],
                "properties": {
                    "status": {"type": "string", "enum": ["open", "shipped", "returned"]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20}
                }
            }),
            writable: false,
        }
    }
}

/// The shop a read may see: the project uiblocks captured when the reply was written.
fn shop_of(access: &Value) -> Result<&str, HostError> {
    access
        .as_record()
        .and_then(|a| a.get("project"))
        .and_then(Value::as_str)
        .ok_or_else(|| UiRefusal::new("outside-project", "The chat belongs to no shop.").into())
}

#[async_trait]
impl TypedSource for Orders {
    type Args = OrdersArgs;
    type Output = Vec<Order>;

    async fn authorize(
        &self,
        _: &ChatInfo,
        access: &Value,
        _: &OrdersArgs,
    ) -> Result<(), HostError> {
        shop_of(access).map(|_| ())
    }

    async fn read(
        &self,
        _: &ChatInfo,
        access: &Value,
        args: OrdersArgs,
        _: CancellationToken,
    ) -> Result<Vec<Order>, HostError> {
        let shop = shop_of(access)?;
        Ok(self
            .0
            .iter()
            .filter(|(s, o)| *s == shop && o.status == args.status)
            .map(|(_, o)| o.clone())
            .take(args.limit as usize)
            .collect())
    }
}

#[derive(Deserialize)]
struct LoginBody {
    user: String,
}

async fn home() -> &'static str {
    "The shop's back office. The assistant's API is under /assist.\n"
}

async fn login(State(sessions): State<Arc<Sessions>>, Json(body): Json<LoginBody>) -> Response {
    match sessions.sign_in(&body.user) {
        Some(token) => (
            [(
                header::SET_COOKIE,
                format!("{SHOP_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"),
            )],
            StatusCode::NO_CONTENT,
        )
            .into_response(),
        None => StatusCode::UNAUTHORIZED.into_response(),
    }
}

/// The whole application: its own routes, and uiblocks under [`PREFIX`] with
/// [`ShopAuth`] and the `shop.orders` source, on the database file `database`.
///
/// # Errors
/// What opening the uiblocks state answers.
pub async fn app(database: &Path) -> Result<(Router, AppState), ServerError> {
    let sessions = Arc::new(Sessions::default());
    let state = AppState::builder(ServerConfig::new(database))
        .authenticator(Arc::new(ShopAuth(Arc::clone(&sessions))))
        .source(Orders::info(), TypedAdapter::new(Orders::sample()))
        .open()
        .await?;
    let app = Router::new()
        .route("/", get(home))
        .route("/login", post(login))
        .with_state(sessions)
        .nest(PREFIX, router(state.clone()));
    Ok((app, state))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join("uiblocks-embed-example");
    std::fs::create_dir_all(&dir)?;
    let (app, state) = app(&dir.join("shop.db")).await?;
    let port: u16 = std::env::var("PORT").map_or(Ok(3000), |p| p.parse())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}/", listener.local_addr()?);
    // `axum::serve` has no connection cap and no header, body or idle timeouts: put the
    // application behind the limits it already uses (a proxy, tower layers). uiblocks'
    // own `ui_server::serve_on` serves the bare router with them.
    let streams = state.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            ui_server::shutdown_signal().await;
            // Open event streams say `bye shutdown` and close, so the server can stop.
            streams.shut_down_streams();
        })
        .await?;
    state.sync().shutdown().await;
    Ok(())
}
