//! `auth.mode = "jwt"` and `"proxy"` on the in-process router: good tokens sign in, expired,
//! not-yet-valid, wrongly signed, wrong-audience, wrong-issuer and claim-less tokens are
//! `401 unauthenticated`, and no token reaches the log. The proxy's headers count only
//! with the shared secret.

#![allow(missing_docs)]

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value as Json, json};
use ui_server::{AuthConfig, JwtAlgorithm, JwtConfig, JwtKey, ProxyConfig};

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

/// Every log line of this test binary (debug level), captured once for all tests.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        captured
    })
}

fn log_text() -> String {
    String::from_utf8_lossy(&log().0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
}

fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

async fn app_with(auth: AuthConfig) -> App {
    log();
    let dir = TempDir::new("signin");
    let mut config = config(&dir);
    config.auth = auth;
    App::with_config(config, dir).await
}

/// `GET /api/me` with `headers`.
async fn me(app: &App, headers: &[(&str, &str)]) -> Answer {
    let mut req = Request::get("/api/me");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    app.send(req.body(Body::empty()).unwrap()).await
}

fn hs256(claims: &Json, secret: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn claims() -> Json {
    json!({
        "sub": "carol",
        "projects": ["web"],
        "aud": "uiblocks",
        "iss": "https://login.example",
        "exp": now() + 600,
    })
}

fn with(mut claims: Json, key: &str, value: Json) -> Json {
    claims[key] = value;
    claims
}

fn without(mut claims: Json, key: &str) -> Json {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

fn jwt_config() -> JwtConfig {
    let mut config = JwtConfig::hs256(SECRET);
    config.audience = Some("uiblocks".into());
    config.issuer = Some("https://login.example".into());
    config.leeway = Duration::from_secs(5);
    config.cookie = Some("app_token".into());
    config
}

fn assert_refused(answer: &Answer, what: &str) {
    assert_eq!(
        answer.status,
        StatusCode::UNAUTHORIZED,
        "{what}: {answer:?}"
    );
    assert_eq!(answer.code(), "unauthenticated", "{what}");
}

#[tokio::test]
async fn hs256_tokens_sign_in_and_bad_ones_are_401_without_reaching_the_log() {
    let app = app_with(AuthConfig::Jwt(jwt_config())).await;
    let good = hs256(&claims(), SECRET);
    let bearer = format!("Bearer {good}");
    let ok = me(&app, &[("authorization", &bearer)]).await;
    assert_eq!(ok.status, StatusCode::OK, "{ok:?}");
    assert_eq!(ok.body["userId"], "carol");
    assert_eq!(ok.body["projects"], json!(["web"]));
    assert_eq!(
        ok.body.get("orgs"),
        None,
        "no orgs claim: in no organisation"
    );
    let in_orgs = hs256(&with(claims(), "orgs", json!(["acme", "globex"])), SECRET);
    let ok = me(&app, &[("authorization", &format!("Bearer {in_orgs}"))]).await;
    assert_eq!(ok.body["orgs"], json!(["acme", "globex"]), "{ok:?}");
    // The same token in the named cookie.
    let cookie = format!("other=1; app_token={good}");
    let ok = me(&app, &[("cookie", &cookie)]).await;
    assert_eq!(ok.body["userId"], "carol");
    // The demo's login is not mounted: JWT is the only way in.
    let login = app
        .call(
            axum::http::Method::POST,
            "/api/login",
            None,
            Some(json!({"user": "alice"})),
        )
        .await;
    assert_ne!(login.status, StatusCode::OK);

    let bad = [
        (
            "expired",
            hs256(&with(claims(), "exp", json!(now() - 60)), SECRET),
        ),
        (
            "not yet valid",
            hs256(&with(claims(), "nbf", json!(now() + 60)), SECRET),
        ),
        (
            "wrong signature",
            hs256(&claims(), "another-secret-of-at-least-32-bytes!!"),
        ),
        (
            "wrong audience",
            hs256(&with(claims(), "aud", json!("billing")), SECRET),
        ),
        (
            "wrong issuer",
            hs256(
                &with(claims(), "iss", json!("https://evil.example")),
                SECRET,
            ),
        ),
        ("no sub", hs256(&without(claims(), "sub"), SECRET)),
        ("no projects", hs256(&without(claims(), "projects"), SECRET)),
        (
            "orgs not a list",
            hs256(&with(claims(), "orgs", json!("acme")), SECRET),
        ),
        (
            "orgs holding a number",
            hs256(&with(claims(), "orgs", json!(["acme", 7])), SECRET),
        ),
        ("no exp", hs256(&without(claims(), "exp"), SECRET)),
        ("no aud", hs256(&without(claims(), "aud"), SECRET)),
        ("garbage", "not.a.token".to_owned()),
    ];
    for (what, token) in &bad {
        let answer = me(&app, &[("authorization", &format!("Bearer {token}"))]).await;
        assert_refused(&answer, what);
    }
    // Within the leeway an expired token still counts.
    let late = hs256(&with(claims(), "exp", json!(now() - 2)), SECRET);
    let ok = me(&app, &[("authorization", &format!("Bearer {late}"))]).await;
    assert_eq!(ok.status, StatusCode::OK, "within leeway");
    assert_refused(&me(&app, &[]).await, "no token");

    let text = log_text();
    assert!(text.contains("token refused"), "{text}");
    for (what, token) in &bad {
        let signature = token.rsplit('.').next().unwrap();
        assert!(
            signature.len() < 20 || !text.contains(signature),
            "{what} logged: {text}"
        );
    }
    assert!(!text.contains(good.rsplit('.').next().unwrap()));
}

fn ed25519_token(claims: &Json, kid: Option<&str>) -> String {
    let pem = std::fs::read(fixture("jwt-ed25519-private.pem")).unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, &EncodingKey::from_ed_pem(&pem).unwrap()).unwrap()
}

#[tokio::test]
async fn eddsa_tokens_verify_with_a_pem_file_and_a_jwks_file() {
    for key in [
        JwtKey::PemFile(fixture("jwt-ed25519-public.pem")),
        JwtKey::JwksFile(fixture("jwt-ed25519.jwks.json")),
    ] {
        let mut config = jwt_config();
        config.algorithm = JwtAlgorithm::EdDsa;
        config.key = key.clone();
        config.projects_claim = "teams".into();
        config.orgs_claim = "tenants".into();
        let app = app_with(AuthConfig::Jwt(config)).await;
        let claims = with(claims(), "teams", json!(["ops", "web"]));
        let claims = with(claims, "tenants", json!(["acme"]));
        let token = ed25519_token(&claims, Some("test-1"));
        let ok = me(&app, &[("authorization", &format!("Bearer {token}"))]).await;
        assert_eq!(ok.status, StatusCode::OK, "{key:?}: {ok:?}");
        assert_eq!(ok.body["projects"], json!(["ops", "web"]));
        assert_eq!(ok.body["orgs"], json!(["acme"]));
        // An HS256 token is refused by an EdDSA server, whatever its secret.
        let hs = hs256(&claims, SECRET);
        assert_refused(
            &me(&app, &[("authorization", &format!("Bearer {hs}"))]).await,
            "algorithm confusion",
        );
        // Tampered claims break the signature.
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let other = ed25519_token(&with(claims.clone(), "sub", json!("mallory")), None);
        parts[1] = other.split('.').nth(1).unwrap().to_owned();
        assert_refused(
            &me(
                &app,
                &[("authorization", &format!("Bearer {}", parts.join(".")))],
            )
            .await,
            "tampered",
        );
        let expired = ed25519_token(
            &with(claims.clone(), "exp", json!(now() - 60)),
            Some("test-1"),
        );
        assert_refused(
            &me(&app, &[("authorization", &format!("Bearer {expired}"))]).await,
            "expired",
        );
    }
    // A kid the JWKS file does not hold.
    let mut config = jwt_config();
    config.algorithm = JwtAlgorithm::EdDsa;
    config.key = JwtKey::JwksFile(fixture("jwt-ed25519.jwks.json"));
    let app = app_with(AuthConfig::Jwt(config)).await;
    let token = ed25519_token(&claims(), Some("rotated-away"));
    assert_refused(
        &me(&app, &[("authorization", &format!("Bearer {token}"))]).await,
        "unknown kid",
    );
}

#[tokio::test]
async fn a_short_secret_or_a_missing_key_file_stops_the_start() {
    let dir = TempDir::new("signin-bad");
    let mut config = config(&dir);
    config.auth = AuthConfig::Jwt(JwtConfig::hs256("short"));
    let err = ui_server::AppState::open(config.clone()).await.unwrap_err();
    assert!(err.to_string().contains("auth.jwt.secret"), "{err}");
    let mut jwt = jwt_config();
    jwt.algorithm = JwtAlgorithm::Rs256;
    jwt.key = JwtKey::PemFile(dir.0.join("missing.pem"));
    config.auth = AuthConfig::Jwt(jwt);
    let err = ui_server::AppState::open(config).await.unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");
}

#[tokio::test]
async fn the_proxy_headers_count_only_with_the_shared_secret() {
    let secret = "proxy-secret-0123456789";
    let app = app_with(AuthConfig::Proxy(ProxyConfig::new(secret))).await;
    let ok = me(
        &app,
        &[
            ("x-uiblocks-user", "dave"),
            ("x-uiblocks-projects", "web, ops"),
            ("x-uiblocks-orgs", "acme,, globex "),
            ("x-uiblocks-proxy-secret", secret),
        ],
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK, "{ok:?}");
    assert_eq!(ok.body["userId"], "dave");
    assert_eq!(ok.body["projects"], json!(["web", "ops"]));
    assert_eq!(ok.body["orgs"], json!(["acme", "globex"]));
    // No projects or orgs header: signed in, in no project and no organisation.
    let ok = me(
        &app,
        &[
            ("x-uiblocks-user", "dave"),
            ("x-uiblocks-proxy-secret", secret),
        ],
    )
    .await;
    assert_eq!(ok.body["projects"], json!([]));
    assert_eq!(ok.body.get("orgs"), None);
    for (what, headers) in [
        ("no secret", vec![("x-uiblocks-user", "dave")]),
        (
            "wrong secret",
            vec![
                ("x-uiblocks-user", "dave"),
                ("x-uiblocks-proxy-secret", "proxy-secret-0123456780"),
            ],
        ),
        (
            "a prefix of the secret",
            vec![
                ("x-uiblocks-user", "dave"),
                ("x-uiblocks-proxy-secret", "proxy-secret"),
            ],
        ),
        ("no user", vec![("x-uiblocks-proxy-secret", secret)]),
    ] {
        assert_refused(&me(&app, &headers).await, what);
    }
}

/// `sync.md` §5.1: the audience set holds `org:<id>` for each of the principal's
/// organisations, so an event of an organisation's data reaches its members' feeds and no
/// one else's.
#[tokio::test]
async fn an_orgs_events_reach_its_members_and_nobody_else() {
    let secret = "proxy-secret-0123456789";
    let app = app_with(AuthConfig::Proxy(ProxyConfig::new(secret))).await;
    let poll = |user: &'static str, orgs: &'static str, cursor: String| {
        let app = &app;
        async move {
            let req = Request::get(format!("/ui/poll?cursor={cursor}"))
                .header("x-uiblocks-user", user)
                .header("x-uiblocks-orgs", orgs)
                .header("x-uiblocks-proxy-secret", secret)
                .body(Body::empty())
                .unwrap();
            let answer = app.send(req).await;
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            answer.body
        }
    };
    let start = poll("dave", "acme", String::new()).await["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let record = |org: &str| ui_sync::ChangeDraft {
        source: "ci.runs".into(),
        audience: Some(ui_sync::Audience::org(org)),
        key: Some("branch:main".into()),
        rs: None,
    };
    let mut seqs = Vec::new();
    for org in ["acme", "globex"] {
        seqs.push(
            app.state
                .sync()
                .record_and_wait(record(org))
                .await
                .unwrap()
                .seq
                .0,
        );
    }
    let seen = |body: Json| -> Vec<u64> {
        assert_eq!(body["reset"], Json::Null, "{body}");
        body["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(seen(poll("dave", "acme", start.clone()).await), [seqs[0]]);
    assert_eq!(seen(poll("erin", "globex", start.clone()).await), [seqs[1]]);
    assert_eq!(
        seen(poll("frank", "globex, acme", start.clone()).await),
        seqs
    );
    assert_eq!(seen(poll("gina", "", start).await), [0_u64; 0]);
}

#[tokio::test]
async fn health_and_readiness_answer_without_signing_in() {
    let app = app_with(AuthConfig::None).await;
    let health = me_path(&app, "/healthz").await;
    assert_eq!(
        (health.status, health.body.as_str()),
        (StatusCode::OK, Some("ok\n"))
    );
    let ready = me_path(&app, "/readyz").await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (StatusCode::OK, Some("ready\n"))
    );
    assert_refused(&me(&app, &[]).await, "nobody signs in with mode none");
}

async fn me_path(app: &App, path: &str) -> Answer {
    app.send(Request::get(path).body(Body::empty()).unwrap())
        .await
}

/// A host's authenticator that never answers (a session store that hangs).
struct Hanging;

#[async_trait::async_trait]
impl ui_server::Authenticator for Hanging {
    async fn principal(&self, _: &axum::http::request::Parts) -> Option<ui_server::Principal> {
        std::future::pending().await
    }
}

#[tokio::test(start_paused = true)]
async fn an_authenticator_that_never_answers_is_503_after_the_auth_timeout() {
    log();
    let dir = TempDir::new("signin");
    let state = ui_server::AppState::builder(config(&dir))
        .authenticator(Arc::new(Hanging))
        .open()
        .await
        .unwrap();
    let app = App {
        router: ui_server::router(state.clone()),
        state,
        dir,
    };
    let started = tokio::time::Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(60), me(&app, &[]))
        .await
        .expect("the request is answered");
    assert_eq!(
        (answer.status, answer.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{answer:?}"
    );
    assert_eq!(answer.header("retry-after"), Some("5"));
    assert!(started.elapsed() >= ui_server::limits::AUTH_TIMEOUT);
    assert!(started.elapsed() < ui_server::limits::AUTH_TIMEOUT + Duration::from_secs(1));
    assert!(log_text().contains("the authenticator did not answer in time"));
}
