//! Authentication without code: [`AuthConfig`] chooses the demo's sessions, nobody, signed
//! JWTs ([`JwtAuth`]) or a trusted reverse proxy's headers ([`ProxyAuth`]).
//!
//! Every refusal is the same `401 unauthenticated` (the [`Authenticator`] answers `None`);
//! the reason is logged at `debug` without the token or the secret.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::request::Parts;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use crate::auth::{Authenticator, Principal, cookie_value};
use crate::config::Secret;
use crate::error::ServerError;

/// Who may sign in (`auth.mode` of the configuration file).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum AuthConfig {
    /// The demo's cookie sessions when `demo` is set, nobody otherwise (the default).
    #[default]
    Auto,
    /// Nobody: every request is `401`.
    None,
    /// The demo's cookie sessions (`POST /api/login`); needs `demo`.
    Demo,
    /// Signed JWTs.
    Jwt(JwtConfig),
    /// A trusted reverse proxy's headers.
    Proxy(ProxyConfig),
}

/// The signature algorithm of [`JwtConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtAlgorithm {
    /// HMAC-SHA256 with a shared secret.
    Hs256,
    /// RSA PKCS#1 v1.5 with SHA-256.
    Rs256,
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
}

impl JwtAlgorithm {
    /// The names the configuration accepts, as written in a JWT header.
    pub const NAMES: &'static [&'static str] = &["HS256", "RS256", "ES256", "EdDSA"];

    /// The algorithm named `name` (one of [`Self::NAMES`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "HS256" => JwtAlgorithm::Hs256,
            "RS256" => JwtAlgorithm::Rs256,
            "ES256" => JwtAlgorithm::Es256,
            "EdDSA" => JwtAlgorithm::EdDsa,
            _ => return None,
        })
    }

    fn algorithm(self) -> Algorithm {
        match self {
            JwtAlgorithm::Hs256 => Algorithm::HS256,
            JwtAlgorithm::Rs256 => Algorithm::RS256,
            JwtAlgorithm::Es256 => Algorithm::ES256,
            JwtAlgorithm::EdDsa => Algorithm::EdDSA,
        }
    }
}

/// Where the verification key of [`JwtConfig`] comes from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum JwtKey {
    /// The HS256 shared secret (give it through `UIBLOCKS_AUTH_JWT_SECRET`).
    Secret(Secret),
    /// A PEM file holding the public key (RS256, ES256, EdDSA).
    PemFile(PathBuf),
    /// A JWKS file (`{"keys":[…]}`); a token's `kid` picks the key, a token without one
    /// needs a set of one key.
    JwksFile(PathBuf),
}

/// How [`JwtAuth`] checks tokens.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JwtConfig {
    /// The one accepted algorithm (a token naming another is refused).
    pub algorithm: JwtAlgorithm,
    /// The verification key.
    pub key: JwtKey,
    /// The required `iss`, if any.
    pub issuer: Option<String>,
    /// The required `aud` (one of the token's), if any.
    pub audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`. Default 30 s.
    pub leeway: Duration,
    /// The claim holding the user's projects: an array of strings. Default `projects`.
    pub projects_claim: String,
    /// The claim holding the user's organisations: an array of strings; a token without it
    /// is in no organisation. Default `orgs`.
    pub orgs_claim: String,
    /// A cookie that may carry the token instead of `Authorization: Bearer`.
    pub cookie: Option<String>,
}

impl JwtConfig {
    /// HS256 with `secret`, no issuer or audience, 30 s leeway, claims `projects` and `orgs`,
    /// no cookie.
    pub fn hs256(secret: impl Into<String>) -> Self {
        JwtConfig {
            algorithm: JwtAlgorithm::Hs256,
            key: JwtKey::Secret(Secret::new(secret)),
            issuer: None,
            audience: None,
            leeway: Duration::from_secs(30),
            projects_claim: "projects".into(),
            orgs_claim: "orgs".into(),
            cookie: None,
        }
    }
}

/// How [`ProxyAuth`] reads the proxy's headers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The header naming the user. Default `x-uiblocks-user`.
    pub user_header: String,
    /// The header listing the user's projects, comma-separated. Default
    /// `x-uiblocks-projects`.
    pub projects_header: String,
    /// The header listing the user's organisations, comma-separated; absent, the user is in
    /// none. Default `x-uiblocks-orgs`.
    pub orgs_header: String,
    /// The header carrying the shared secret. Default `x-uiblocks-proxy-secret`.
    pub secret_header: String,
    /// The shared secret (give it through `UIBLOCKS_AUTH_PROXY_SECRET`).
    pub secret: Secret,
}

impl ProxyConfig {
    /// The default header names with `secret`.
    pub fn new(secret: impl Into<String>) -> Self {
        ProxyConfig {
            user_header: "x-uiblocks-user".into(),
            projects_header: "x-uiblocks-projects".into(),
            orgs_header: "x-uiblocks-orgs".into(),
            secret_header: "x-uiblocks-proxy-secret".into(),
            secret: Secret::new(secret),
        }
    }
}

/// Signed JWTs from `Authorization: Bearer <token>` or a named cookie. The signature, `exp`
/// (required), `nbf`, `iss` and `aud` are checked; the user is `sub`, the projects are the
/// configured claim (both required), the organisations the configured claim (optional), the
/// session is `jti` when present, else the user.
///
/// A token's projects and organisations are fixed when it is signed, so
/// [`Authenticator::refresh`] answers `None`: an open event stream keeps the memberships of
/// the token it was opened with until it reconnects with a newer token (an `audience-changed` event does not widen or narrow
/// it). Short-lived tokens bound how long a removed member keeps reading.
pub struct JwtAuth {
    keys: Keys,
    validation: Validation,
    projects_claim: String,
    orgs_claim: String,
    cookie: Option<String>,
}

enum Keys {
    One(DecodingKey),
    Set(Vec<(Option<String>, DecodingKey)>),
}

impl std::fmt::Debug for JwtAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuth")
            .field("projects_claim", &self.projects_claim)
            .field("orgs_claim", &self.orgs_claim)
            .field("cookie", &self.cookie)
            .finish_non_exhaustive()
    }
}

impl JwtAuth {
    /// Loads the key `config` names.
    ///
    /// # Errors
    /// [`ServerError::Config`] when the key file cannot be read or holds no usable key.
    pub fn new(config: &JwtConfig) -> Result<Self, ServerError> {
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            ServerError::Config(format!("auth.jwt: {what}: {e}"))
        };
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| bad(&format!("cannot read {}", path.display()), &e))
        };
        let alg = config.algorithm;
        let keys = match &config.key {
            JwtKey::Secret(secret) => {
                if alg != JwtAlgorithm::Hs256 {
                    return Err(ServerError::Config(
                        "auth.jwt.secret: only HS256 uses a secret; give key_file or jwks_file"
                            .into(),
                    ));
                }
                if secret.expose().len() < 32 {
                    return Err(ServerError::Config(
                        "auth.jwt.secret: at least 32 bytes are needed".into(),
                    ));
                }
                Keys::One(
                    DecodingKey::from_secret(secret.expose().as_bytes())
                        .map_err(|e| bad("secret", &e))?,
                )
            }
            JwtKey::PemFile(path) => {
                let pem = read(path)?;
                let key = match alg {
                    JwtAlgorithm::Hs256 => {
                        return Err(ServerError::Config(
                            "auth.jwt.key_file: HS256 uses auth.jwt.secret".into(),
                        ));
                    }
                    JwtAlgorithm::Rs256 => DecodingKey::from_rsa_pem(&pem),
                    JwtAlgorithm::Es256 => DecodingKey::from_ec_pem(&pem),
                    JwtAlgorithm::EdDsa => DecodingKey::from_ed_pem(&pem),
                };
                Keys::One(key.map_err(|e| bad("key_file", &e))?)
            }
            JwtKey::JwksFile(path) => {
                let set: JwkSet =
                    serde_json::from_slice(&read(path)?).map_err(|e| bad("jwks_file", &e))?;
                let mut keys = Vec::new();
                for jwk in &set.keys {
                    let key = DecodingKey::from_jwk(jwk).map_err(|e| bad("jwks_file", &e))?;
                    keys.push((jwk.common.key_id.clone(), key));
                }
                if keys.is_empty() {
                    return Err(ServerError::Config("auth.jwt.jwks_file: no keys".into()));
                }
                Keys::Set(keys)
            }
        };
        let mut validation = Validation::new(alg.algorithm());
        validation.leeway = config.leeway.as_secs();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.required_spec_claims = HashSet::from(["exp".to_owned(), "sub".to_owned()]);
        match &config.audience {
            Some(aud) => validation.set_audience(&[aud]),
            None => validation.validate_aud = false,
        }
        if let Some(iss) = &config.issuer {
            validation.set_issuer(&[iss]);
            validation.required_spec_claims.insert("iss".into());
        }
        if config.audience.is_some() {
            validation.required_spec_claims.insert("aud".into());
        }
        Ok(JwtAuth {
            keys,
            validation,
            projects_claim: config.projects_claim.clone(),
            orgs_claim: config.orgs_claim.clone(),
            cookie: config.cookie.clone(),
        })
    }

    /// The token of the request: the bearer token, else the cookie.
    fn token<'a>(&self, parts: &'a Parts) -> Option<&'a str> {
        let bearer = crate::auth::bearer_token(&parts.headers);
        bearer.or_else(|| {
            self.cookie
                .as_deref()
                .and_then(|name| cookie_value(parts, name))
        })
    }

    /// The principal `token` proves, or why not (no token text in it).
    fn verify(&self, token: &str) -> Result<Principal, String> {
        let key = match &self.keys {
            Keys::One(key) => key,
            Keys::Set(keys) => {
                let kid = jsonwebtoken::decode_header(token)
                    .map_err(|e| e.to_string())?
                    .kid;
                match (kid, keys.as_slice()) {
                    (None, [(_, key)]) => key,
                    (None, _) => return Err("no kid and several keys".into()),
                    (Some(kid), _) => keys
                        .iter()
                        .find(|(id, _)| id.as_deref() == Some(kid.as_str()))
                        .map(|(_, key)| key)
                        .ok_or("unknown kid")?,
                }
            }
        };
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            token,
            key,
            &self.validation,
        )
        .map_err(|e| e.to_string())?;
        let claims = data.claims;
        let user_id = claims
            .get("sub")
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .ok_or("no sub")?
            .to_owned();
        let projects = strings(&claims, &self.projects_claim)?
            .ok_or_else(|| format!("no {} claim", self.projects_claim))?;
        let orgs = strings(&claims, &self.orgs_claim)?.unwrap_or_default();
        let session = match claims.get("jti").and_then(|v| v.as_str()) {
            Some(jti) => format!("jwt:{jti}"),
            None => format!("jwt-user:{user_id}"),
        };
        Ok(Principal {
            user_id,
            orgs,
            projects,
            session,
        })
    }
}

/// The claim `name` as a list of strings: `None` when the token has no such claim, an error
/// when it holds anything but an array of strings.
fn strings(
    claims: &serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> Result<Option<Vec<String>>, String> {
    let Some(value) = claims.get(name) else {
        return Ok(None);
    };
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|p| p.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .map(Some)
        .ok_or_else(|| format!("{name} is not an array of strings"))
}

#[async_trait]
impl Authenticator for JwtAuth {
    async fn principal(&self, parts: &Parts) -> Option<Principal> {
        let token = self.token(parts)?;
        match self.verify(token) {
            Ok(principal) => Some(principal),
            Err(reason) => {
                tracing::debug!(%reason, "token refused");
                None
            }
        }
    }
}

/// A trusted reverse proxy signs users in: it sets the user, projects and organisations
/// headers and the shared secret header; a request without the right secret (compared in
/// constant time) is `401`, whatever else it carries. The session is the user. The memberships come with
/// every request, so [`Authenticator::refresh`] answers `None` (a stream keeps the
/// memberships it was opened with until it reconnects).
#[derive(Debug)]
pub struct ProxyAuth {
    config: ProxyConfig,
}

impl ProxyAuth {
    /// An authenticator for `config`.
    ///
    /// # Errors
    /// [`ServerError::Config`] for an empty secret.
    pub fn new(config: &ProxyConfig) -> Result<Self, ServerError> {
        if config.secret.expose().len() < 16 {
            return Err(ServerError::Config(
                "auth.proxy.secret: at least 16 bytes are needed".into(),
            ));
        }
        Ok(ProxyAuth {
            config: config.clone(),
        })
    }
}

#[async_trait]
impl Authenticator for ProxyAuth {
    async fn principal(&self, parts: &Parts) -> Option<Principal> {
        let header = |name: &str| parts.headers.get(name).map(|v| v.as_bytes());
        let secret = header(&self.config.secret_header).unwrap_or_default();
        if !self.config.secret.matches(secret) {
            tracing::debug!("proxy secret missing or wrong");
            return None;
        }
        let user_id = std::str::from_utf8(header(&self.config.user_header)?)
            .ok()?
            .trim();
        if user_id.is_empty() {
            return None;
        }
        let list = |name: &str| -> Option<Vec<String>> {
            match header(name) {
                Some(v) => Some(
                    std::str::from_utf8(v)
                        .ok()?
                        .split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned)
                        .collect(),
                ),
                None => Some(Vec::new()),
            }
        };
        let projects = list(&self.config.projects_header)?;
        let orgs = list(&self.config.orgs_header)?;
        Some(Principal {
            user_id: user_id.to_owned(),
            orgs,
            projects,
            session: format!("proxy-user:{user_id}"),
        })
    }
}
