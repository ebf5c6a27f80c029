//! The configuration file (`uiblocks.toml`) and the `UIBLOCKS_*` environment variables:
//! [`load_config`] turns both into a [`ServerConfig`]. Every key and its environment
//! variable are listed in `docs/configuration.md`; the environment wins over the file.
//!
//! Unknown keys, unknown `UIBLOCKS_*` variables and values of the wrong kind are errors
//! that name the key (and the variable).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;
use toml::{Table, Value};
use ui_core::{HostLimits, ReplyLimits, SyncLimits, UiHostLimits, UiLimits};

use crate::config::{ChatLimits, PostgresConfig, Secret, ServerConfig, SourcesConfig};
use crate::metrics::MIN_TOKEN_BYTES;
use crate::signin::{AuthConfig, JwtAlgorithm, JwtConfig, JwtKey, ProxyConfig};

/// A configuration that cannot be used; the message names the key or variable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{path} is not TOML: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A key that is not a setting.
    #[error("unknown key `{key}`{from}")]
    UnknownKey {
        /// The dotted key.
        key: String,
        /// ` (from UIBLOCKS_…)` when it came from the environment.
        from: String,
    },
    /// A value of the wrong kind or out of range.
    #[error("`{key}`{from}: {message}")]
    BadValue {
        /// The dotted key.
        key: String,
        /// ` (from UIBLOCKS_…)` when it came from the environment.
        from: String,
        /// What is wrong.
        message: String,
    },
    /// An environment variable `UIBLOCKS_…` that names no setting.
    #[error("unknown environment variable `{0}`")]
    UnknownVariable(String),
}

/// What a key holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Duration,
    StrList,
    Addr,
    OneOf(&'static [&'static str]),
}

const AUTH_MODES: &[&str] = &["none", "demo", "jwt", "proxy"];

/// The fixed keys (the limit groups' keys are added from their `KEYS`).
const KEYS: &[(&str, Kind)] = &[
    ("server.bind", Kind::Addr),
    ("server.demo", Kind::Bool),
    ("server.origins", Kind::StrList),
    ("server.secure_cookies", Kind::Bool),
    ("database.path", Kind::Str),
    ("database.url", Kind::Str),
    ("database.pool", Kind::Int),
    ("database.timeout", Kind::Duration),
    ("sources.file", Kind::Str),
    ("connections.max", Kind::Int),
    ("connections.header_timeout", Kind::Duration),
    ("connections.body_timeout", Kind::Duration),
    ("connections.idle_timeout", Kind::Duration),
    ("connections.write_timeout", Kind::Duration),
    ("connections.shutdown_spread", Kind::Duration),
    ("connections.drain_timeout", Kind::Duration),
    ("chat.item_text_bytes", Kind::Int),
    ("chat.chat_items", Kind::Int),
    ("chat.page_items", Kind::Int),
    ("chat.page_bytes", Kind::Int),
    ("auth.mode", Kind::OneOf(AUTH_MODES)),
    ("auth.jwt.algorithm", Kind::OneOf(JwtAlgorithm::NAMES)),
    ("auth.jwt.secret", Kind::Str),
    ("auth.jwt.key_file", Kind::Str),
    ("auth.jwt.jwks_file", Kind::Str),
    ("auth.jwt.issuer", Kind::Str),
    ("auth.jwt.audience", Kind::Str),
    ("auth.jwt.leeway", Kind::Duration),
    ("auth.jwt.projects_claim", Kind::Str),
    ("auth.jwt.orgs_claim", Kind::Str),
    ("auth.jwt.cookie", Kind::Str),
    ("auth.proxy.user_header", Kind::Str),
    ("auth.proxy.projects_header", Kind::Str),
    ("auth.proxy.orgs_header", Kind::Str),
    ("auth.proxy.secret_header", Kind::Str),
    ("auth.proxy.secret", Kind::Str),
    ("metrics.enabled", Kind::Bool),
    ("metrics.token", Kind::Str),
];

/// The limit groups: table name and wire keys.
const LIMIT_GROUPS: &[(&str, &[&str])] = &[
    ("sync", SyncLimits::KEYS),
    ("host", HostLimits::KEYS),
    ("ui_host", UiHostLimits::KEYS),
    ("ui", UiLimits::KEYS),
    ("reply", ReplyLimits::KEYS),
];

/// Environment variables with the `UIBLOCKS_` prefix that are not settings (the test
/// suite's snapshot switch).
const OTHER_VARIABLES: &[&str] = &["UIBLOCKS_BLESS"];

/// Every key with its kind.
fn all_keys() -> Vec<(String, Kind)> {
    let mut keys: Vec<(String, Kind)> = KEYS.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
    for (group, names) in LIMIT_GROUPS {
        keys.extend(
            names
                .iter()
                .map(|name| (format!("limits.{group}.{name}"), Kind::Int)),
        );
    }
    keys
}

/// The environment variable of `key`: `UIBLOCKS_` and the key upper-cased, dots as `_`
/// (`auth.jwt.secret` → `UIBLOCKS_AUTH_JWT_SECRET`, `limits.sync.writeTimeout` →
/// `UIBLOCKS_LIMITS_SYNC_WRITETIMEOUT`).
pub fn env_name(key: &str) -> String {
    format!("UIBLOCKS_{}", key.replace('.', "_").to_uppercase())
}

/// A duration written as a whole number with a unit: `ms`, `s`, `m` or `h` (`250ms`,
/// `10s`, `2m`, `1h`).
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let wrong = || format!("`{text}` is not a duration such as `250ms`, `10s`, `2m` or `1h`");
    let digits = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(wrong)?;
    let n: u64 = text[..digits].parse().map_err(|_| wrong())?;
    match &text[digits..] {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs).ok_or_else(wrong),
        "h" => n
            .checked_mul(3600)
            .map(Duration::from_secs)
            .ok_or_else(wrong),
        _ => Err(wrong()),
    }
}

/// Reads the configuration: the defaults of [`ServerConfig::new`] (database
/// `uiblocks.db`), then the file `file` if given, then every `UIBLOCKS_*` variable of
/// `env` (the environment wins).
///
/// # Errors
/// [`ConfigError`] naming the key (and variable) that is unknown or wrong.
pub fn load_config(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<ServerConfig, ConfigError> {
    let mut table = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            text.parse::<Table>().map_err(|e| ConfigError::Syntax {
                path: path.to_owned(),
                message: e.message().to_owned(),
            })?
        }
        None => Table::new(),
    };
    let keys = all_keys();
    // The file's keys, checked before the environment is laid over them.
    let mut from_env: IndexMap<String, String> = IndexMap::new();
    check_table(&table, "", &keys, &from_env)?;
    let mut env: Vec<(String, String)> = env
        .into_iter()
        .filter(|(name, _)| name.starts_with("UIBLOCKS_"))
        .filter(|(name, _)| !OTHER_VARIABLES.contains(&name.as_str()))
        .collect();
    env.sort();
    for (name, text) in env {
        let (key, kind) = keys
            .iter()
            .find(|(key, _)| env_name(key) == name)
            .ok_or_else(|| ConfigError::UnknownVariable(name.clone()))?;
        let bad = |message: String| ConfigError::BadValue {
            key: key.clone(),
            from: format!(" (from {name})"),
            message,
        };
        let value = match kind {
            Kind::Int => Value::Integer(
                text.trim()
                    .parse::<i64>()
                    .map_err(|_| bad(format!("`{text}` is not a whole number")))?,
            ),
            Kind::Bool => match text.trim() {
                "true" | "1" => Value::Boolean(true),
                "false" | "0" => Value::Boolean(false),
                _ => return Err(bad(format!("`{text}` is not true or false"))),
            },
            Kind::StrList => Value::Array(
                text.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| Value::String(s.to_owned()))
                    .collect(),
            ),
            Kind::Str | Kind::Duration | Kind::Addr | Kind::OneOf(_) => Value::String(text.clone()),
        };
        insert(&mut table, key, value);
        from_env.insert(key.clone(), name);
    }
    // `database.url` and `database.path` name the same thing: one set in the environment
    // replaces the other set in the file (both in the environment stay an error).
    for (key, other) in [
        ("database.url", "database.path"),
        ("database.path", "database.url"),
    ] {
        if from_env.contains_key(key) && !from_env.contains_key(other) {
            remove(&mut table, other);
        }
    }
    check_table(&table, "", &keys, &from_env)?;
    let file: FileConfig = Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::BadValue {
            key: "(configuration)".into(),
            from: String::new(),
            message: e.message().to_owned(),
        })?;
    file.into_config(&from_env)
}

/// Sets the dotted `key` of `table` to `value`, making the tables on the way.
fn insert(table: &mut Table, key: &str, value: Value) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut at = table;
    for part in parts {
        let entry = at
            .entry(part.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        let Value::Table(next) = entry else { return };
        at = next;
    }
    at.insert(last.to_owned(), value);
}

/// Removes the dotted `key` from `table`, if it is there.
fn remove(table: &mut Table, key: &str) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut at = table;
    for part in parts {
        let Some(Value::Table(next)) = at.get_mut(part) else {
            return;
        };
        at = next;
    }
    at.remove(last);
}

/// Checks every key of `table` (under `prefix`) against `keys`.
fn check_table(
    table: &Table,
    prefix: &str,
    keys: &[(String, Kind)],
    from_env: &IndexMap<String, String>,
) -> Result<(), ConfigError> {
    for (name, value) in table {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let from = from_env
            .get(&key)
            .map(|v| format!(" (from {v})"))
            .unwrap_or_default();
        match (keys.iter().find(|(k, _)| *k == key), value) {
            (Some((_, kind)), value) => check_value(&key, &from, *kind, value)?,
            (None, Value::Table(inner))
                if keys.iter().any(|(k, _)| k.starts_with(&format!("{key}."))) =>
            {
                check_table(inner, &key, keys, from_env)?;
            }
            (None, _) => return Err(ConfigError::UnknownKey { key, from }),
        }
    }
    Ok(())
}

fn check_value(key: &str, from: &str, kind: Kind, value: &Value) -> Result<(), ConfigError> {
    let bad = |message: String| ConfigError::BadValue {
        key: key.to_owned(),
        from: from.to_owned(),
        message,
    };
    match (kind, value) {
        (Kind::Str, Value::String(_)) | (Kind::Bool, Value::Boolean(_)) => Ok(()),
        (Kind::Int, Value::Integer(n)) if *n >= 1 => Ok(()),
        (Kind::Int, Value::Integer(n)) => Err(bad(format!("{n} is not a positive number"))),
        (Kind::Duration, Value::String(s)) => parse_duration(s).map(drop).map_err(bad),
        (Kind::Addr, Value::String(s)) => s.parse::<SocketAddr>().map(drop).map_err(|_| {
            bad(format!(
                "`{s}` is not an address such as `127.0.0.1:8080` or `[::]:8080`"
            ))
        }),
        (Kind::OneOf(names), Value::String(s)) if names.contains(&s.as_str()) => Ok(()),
        (Kind::OneOf(names), Value::String(s)) => {
            Err(bad(format!("`{s}` is not one of {}", names.join(", "))))
        }
        (Kind::StrList, Value::Array(items)) if items.iter().all(Value::is_str) => Ok(()),
        (kind, value) => Err(bad(format!(
            "expected {}, found {}",
            match kind {
                Kind::Str | Kind::OneOf(_) => "a string",
                Kind::Int => "a positive whole number",
                Kind::Bool => "true or false",
                Kind::Duration => "a duration such as \"10s\"",
                Kind::StrList => "an array of strings",
                Kind::Addr => "an address such as \"127.0.0.1:8080\"",
            },
            value.type_str()
        ))),
    }
}

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    text.map(|t| parse_duration(&t).map_err(serde::de::Error::custom))
        .transpose()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileConfig {
    server: ServerSection,
    database: DatabaseSection,
    sources: SourcesSection,
    connections: ConnectionsSection,
    chat: ChatSection,
    limits: LimitsSection,
    auth: AuthSection,
    metrics: MetricsSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct MetricsSection {
    enabled: Option<bool>,
    token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ServerSection {
    bind: Option<SocketAddr>,
    demo: Option<bool>,
    origins: Option<Vec<String>>,
    secure_cookies: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct DatabaseSection {
    path: Option<PathBuf>,
    url: Option<String>,
    pool: Option<usize>,
    #[serde(deserialize_with = "duration")]
    timeout: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct SourcesSection {
    file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ConnectionsSection {
    max: Option<usize>,
    #[serde(deserialize_with = "duration")]
    header_timeout: Option<Duration>,
    #[serde(deserialize_with = "duration")]
    body_timeout: Option<Duration>,
    #[serde(deserialize_with = "duration")]
    idle_timeout: Option<Duration>,
    #[serde(deserialize_with = "duration")]
    write_timeout: Option<Duration>,
    #[serde(deserialize_with = "duration")]
    shutdown_spread: Option<Duration>,
    #[serde(deserialize_with = "duration")]
    drain_timeout: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ChatSection {
    item_text_bytes: Option<usize>,
    chat_items: Option<usize>,
    page_items: Option<usize>,
    page_bytes: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct LimitsSection {
    sync: IndexMap<String, u64>,
    host: IndexMap<String, u64>,
    ui_host: IndexMap<String, u64>,
    ui: IndexMap<String, u64>,
    reply: IndexMap<String, u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct AuthSection {
    mode: Option<String>,
    jwt: JwtSection,
    proxy: ProxySection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct JwtSection {
    algorithm: Option<String>,
    secret: Option<String>,
    key_file: Option<PathBuf>,
    jwks_file: Option<PathBuf>,
    issuer: Option<String>,
    audience: Option<String>,
    #[serde(deserialize_with = "duration")]
    leeway: Option<Duration>,
    projects_claim: Option<String>,
    orgs_claim: Option<String>,
    cookie: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ProxySection {
    user_header: Option<String>,
    projects_header: Option<String>,
    orgs_header: Option<String>,
    secret_header: Option<String>,
    secret: Option<String>,
}

impl FileConfig {
    fn into_config(self, from_env: &IndexMap<String, String>) -> Result<ServerConfig, ConfigError> {
        let bad = |key: &str, message: String| ConfigError::BadValue {
            key: key.to_owned(),
            from: from_env
                .get(key)
                .map(|v| format!(" (from {v})"))
                .unwrap_or_default(),
            message,
        };
        let database = self.database;
        let mut config = ServerConfig::new("uiblocks.db");
        match (database.url, database.path) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "database.url",
                    "set database.url or database.path, not both".into(),
                ));
            }
            (None, Some(path)) => config.database = path,
            (None, None) => {}
            (Some(url), None) => {
                if let Some(path) = url.strip_prefix("sqlite://") {
                    if path.is_empty() {
                        return Err(bad("database.url", "`sqlite://` names no file".into()));
                    }
                    config.database = path.into();
                } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                    if let Err(e) = ui_sync::PgConnect::parse(&url) {
                        return Err(bad("database.url", e.to_string()));
                    }
                    config.postgres = Some(PostgresConfig::new(url));
                } else {
                    return Err(bad(
                        "database.url",
                        "must start with sqlite:// or postgres://".into(),
                    ));
                }
            }
        }
        if database.pool.is_some() || database.timeout.is_some() {
            let Some(pg) = config.postgres.as_mut() else {
                let key = if database.pool.is_some() {
                    "database.pool"
                } else {
                    "database.timeout"
                };
                return Err(bad(key, "only for database.url = \"postgres://…\"".into()));
            };
            if let Some(pool) = database.pool {
                if pool == 0 {
                    return Err(bad("database.pool", "must be at least 1".into()));
                }
                pg.pool = pool;
            }
            if let Some(timeout) = database.timeout {
                if timeout.is_zero() {
                    return Err(bad("database.timeout", "must be above 0".into()));
                }
                pg.timeout = timeout;
            }
        }
        let server = self.server;
        if let Some(bind) = server.bind {
            config.bind = bind;
        }
        config.demo = server.demo.unwrap_or(false);
        config.origins = server.origins.unwrap_or_default();
        config.secure_cookies = server.secure_cookies.unwrap_or(false);
        if let Some(file) = self.sources.file {
            config.sources = SourcesConfig::File(file);
        }
        let c = self.connections;
        let set = |field: &mut Duration, value: Option<Duration>| {
            if let Some(value) = value {
                *field = value;
            }
        };
        if let Some(max) = c.max {
            config.max_connections = max;
        }
        set(&mut config.header_read_timeout, c.header_timeout);
        set(&mut config.body_read_timeout, c.body_timeout);
        set(&mut config.idle_timeout, c.idle_timeout);
        set(&mut config.shutdown_spread, c.shutdown_spread);
        set(&mut config.drain_timeout, c.drain_timeout);
        let chat = self.chat;
        let mut chat_limits = ChatLimits::default();
        let set_n = |field: &mut usize, value: Option<usize>| {
            if let Some(value) = value {
                *field = value;
            }
        };
        set_n(&mut chat_limits.item_text_bytes, chat.item_text_bytes);
        set_n(&mut chat_limits.chat_items, chat.chat_items);
        set_n(&mut chat_limits.page_items, chat.page_items);
        set_n(&mut chat_limits.page_bytes, chat.page_bytes);
        config.chat_limits = chat_limits;
        macro_rules! group {
            ($field:ident, $name:literal, $map:expr) => {
                for (key, value) in &$map {
                    config.$field = config
                        .$field
                        .with(key, *value)
                        .map_err(|e| bad(&format!("limits.{}.{key}", $name), e.to_string()))?;
                }
            };
        }
        let limits = self.limits;
        group!(sync_limits, "sync", limits.sync);
        group!(host_limits, "host", limits.host);
        group!(ui_host_limits, "ui_host", limits.ui_host);
        group!(ui_limits, "ui", limits.ui);
        group!(reply_limits, "reply", limits.reply);
        if let Some(timeout) = c.write_timeout {
            config
                .set_write_timeout(timeout)
                .map_err(|e| bad("connections.write_timeout", e.message()))?;
        }
        config
            .check_connections()
            .map_err(|e| bad(e.setting.key(), e.message()))?;
        let auth = self.auth;
        config.auth = match auth.mode.as_deref() {
            None => AuthConfig::Auto,
            Some("none") => AuthConfig::None,
            // Whether the demo is on is known once a command line had its say (`--demo`):
            // `AppState::open` refuses `demo` without it.
            Some("demo") => AuthConfig::Demo,
            Some("jwt") => {
                let jwt = auth.jwt;
                let algorithm = jwt
                    .algorithm
                    .as_deref()
                    .and_then(JwtAlgorithm::from_name)
                    .ok_or_else(|| bad("auth.jwt.algorithm", "is required with jwt".into()))?;
                let key = match (jwt.secret, jwt.key_file, jwt.jwks_file) {
                    (Some(secret), None, None) => JwtKey::Secret(Secret::new(secret)),
                    (None, Some(pem), None) => JwtKey::PemFile(pem),
                    (None, None, Some(jwks)) => JwtKey::JwksFile(jwks),
                    _ => {
                        return Err(bad(
                            "auth.jwt.secret",
                            "give exactly one of auth.jwt.secret, auth.jwt.key_file and \
                             auth.jwt.jwks_file"
                                .into(),
                        ));
                    }
                };
                let mut out = JwtConfig::hs256(String::new());
                out.algorithm = algorithm;
                out.key = key;
                out.issuer = jwt.issuer;
                out.audience = jwt.audience;
                if let Some(leeway) = jwt.leeway {
                    out.leeway = leeway;
                }
                if let Some(claim) = jwt.projects_claim {
                    out.projects_claim = claim;
                }
                if let Some(claim) = jwt.orgs_claim {
                    out.orgs_claim = claim;
                }
                out.cookie = jwt.cookie;
                AuthConfig::Jwt(out)
            }
            Some("proxy") => {
                let proxy = auth.proxy;
                let secret = proxy
                    .secret
                    .ok_or_else(|| bad("auth.proxy.secret", "is required with proxy".into()))?;
                let mut out = ProxyConfig::new(secret);
                if let Some(h) = proxy.user_header {
                    out.user_header = h.to_ascii_lowercase();
                }
                if let Some(h) = proxy.projects_header {
                    out.projects_header = h.to_ascii_lowercase();
                }
                if let Some(h) = proxy.orgs_header {
                    out.orgs_header = h.to_ascii_lowercase();
                }
                if let Some(h) = proxy.secret_header {
                    out.secret_header = h.to_ascii_lowercase();
                }
                AuthConfig::Proxy(out)
            }
            Some(other) => return Err(bad("auth.mode", format!("`{other}` is not a mode"))),
        };
        let metrics = self.metrics;
        if let Some(enabled) = metrics.enabled {
            config.metrics.enabled = enabled;
        }
        if let Some(token) = metrics.token {
            if token.len() < MIN_TOKEN_BYTES {
                return Err(bad(
                    "metrics.token",
                    format!("must be at least {MIN_TOKEN_BYTES} bytes"),
                ));
            }
            config.metrics.token = Some(Secret::new(token));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn file(text: &str) -> tempfile_path::TempFile {
        tempfile_path::TempFile::new(text)
    }

    mod tempfile_path {
        use std::path::PathBuf;
        use std::sync::atomic::{AtomicU32, Ordering};

        pub(super) struct TempFile(pub(super) PathBuf);

        impl TempFile {
            pub(super) fn new(text: &str) -> Self {
                static N: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "uiblocks-settings-{}-{}.toml",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::write(&path, text).unwrap();
                TempFile(path)
            }
        }

        impl Drop for TempFile {
            fn drop(&mut self) {
                std::fs::remove_file(&self.0).ok();
            }
        }
    }

    const FULL: &str = r#"
[server]
bind = "0.0.0.0:9000"
demo = false
origins = ["https://app.example"]
secure_cookies = true

[database]
path = "/var/lib/uiblocks/app.db"

[sources]
file = "sources.toml"

[connections]
max = 500
header_timeout = "5s"
write_timeout = "20s"
drain_timeout = "1m"

[chat]
chat_items = 200

[limits.host]
readSlots = 4

[auth]
mode = "jwt"

[auth.jwt]
algorithm = "EdDSA"
jwks_file = "jwks.json"
issuer = "https://login.example"
audience = "uiblocks"
leeway = "10s"
projects_claim = "teams"
orgs_claim = "tenants"
cookie = "app_token"
"#;

    #[test]
    fn a_file_sets_every_section() {
        let f = file(FULL);
        let config = load_config(Some(&f.0), env(&[])).unwrap();
        assert_eq!(config.bind, "0.0.0.0:9000".parse().unwrap());
        assert_eq!(config.database, PathBuf::from("/var/lib/uiblocks/app.db"));
        assert_eq!(config.sources, SourcesConfig::File("sources.toml".into()));
        assert_eq!(config.origins, ["https://app.example"]);
        assert!(config.secure_cookies && !config.demo);
        assert_eq!(config.max_connections, 500);
        assert_eq!(config.header_read_timeout, Duration::from_secs(5));
        assert_eq!(config.drain_timeout, Duration::from_secs(60));
        assert_eq!(config.sync_limits.write_timeout(), 20_000);
        assert_eq!(config.chat_limits.chat_items, 200);
        assert_eq!(config.host_limits.read_slots(), 4);
        let AuthConfig::Jwt(jwt) = config.auth else {
            panic!("not jwt: {:?}", config.auth)
        };
        assert_eq!(jwt.algorithm, JwtAlgorithm::EdDsa);
        assert_eq!(jwt.key, JwtKey::JwksFile("jwks.json".into()));
        assert_eq!(jwt.audience.as_deref(), Some("uiblocks"));
        assert_eq!(jwt.leeway, Duration::from_secs(10));
        assert_eq!(jwt.projects_claim, "teams");
        assert_eq!(jwt.orgs_claim, "tenants");
        assert_eq!(jwt.cookie.as_deref(), Some("app_token"));
    }

    #[test]
    fn the_environment_names_the_database_over_the_file_whichever_key_each_uses() {
        let f = file("[database]\npath = \"file.db\"\n");
        let config = load_config(
            Some(&f.0),
            env(&[("UIBLOCKS_DATABASE_URL", "sqlite:///srv/env.db")]),
        )
        .unwrap();
        assert_eq!(config.database, PathBuf::from("/srv/env.db"));
        let f = file("[database]\nurl = \"postgres://ui@db/app\"\n");
        let config = load_config(Some(&f.0), env(&[("UIBLOCKS_DATABASE_PATH", "env.db")])).unwrap();
        assert_eq!(config.database, PathBuf::from("env.db"));
        assert_eq!(config.postgres, None);
        // Both in one layer are still a conflict, named with the variable.
        let err = load_config(
            None,
            env(&[
                ("UIBLOCKS_DATABASE_PATH", "env.db"),
                ("UIBLOCKS_DATABASE_URL", "sqlite://other.db"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("not both") && err.contains("UIBLOCKS_DATABASE_URL"),
            "{err}"
        );
    }

    #[test]
    fn the_database_url_names_sqlite_or_postgres() {
        let config = load_config(
            None,
            env(&[("UIBLOCKS_DATABASE_URL", "sqlite:///srv/a.db")]),
        )
        .unwrap();
        assert_eq!(config.database, PathBuf::from("/srv/a.db"));
        assert_eq!(config.postgres, None);
        let f = file(
            "[database]\nurl = \"postgres://ui:pw@db.internal:5433/app\"\npool = 4\ntimeout = \"2s\"\n",
        );
        let config = load_config(Some(&f.0), env(&[])).unwrap();
        let pg = config.postgres.clone().unwrap();
        assert_eq!(pg.url.expose(), "postgres://ui:pw@db.internal:5433/app");
        assert_eq!((pg.pool, pg.timeout), (4, Duration::from_secs(2)));
        assert_eq!(
            config.database_label(),
            "postgres://ui@db.internal:5433/app (TLS prefer)",
            "no password in what is printed"
        );
        // TLS keys are read with the URL: a wrong one stops the start, naming the key.
        for (url, said) in [
            (
                "postgres://ui@db/app?sslmode=sometimes",
                "sslmode: `sometimes` is not one of",
            ),
            (
                "postgres://ui@db/app?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
                "sslrootcert: /nonexistent/ca.pem",
            ),
            (
                "postgres://ui@db/app?sslcert=/c.pem",
                "sslcert and sslkey go together",
            ),
        ] {
            let f = file(&format!("[database]\nurl = \"{url}\"\n"));
            let e = load_config(Some(&f.0), env(&[])).unwrap_err().to_string();
            assert!(e.contains("database.url") && e.contains(said), "{e}");
        }
        let f = file("[database]\nurl = \"postgres://ui@db/app?sslmode=require\"\n");
        let config = load_config(Some(&f.0), env(&[])).unwrap();
        assert_eq!(
            config.database_label(),
            "postgres://ui@db:5432/app (TLS require)"
        );
        assert!(!format!("{config:?}").contains("pw@"));
        // The environment wins over the file.
        let config = load_config(
            Some(&f.0),
            env(&[("UIBLOCKS_DATABASE_URL", "postgresql://other/db")]),
        )
        .unwrap();
        assert_eq!(
            config.postgres.unwrap().url.expose(),
            "postgresql://other/db"
        );
    }

    #[test]
    fn bad_database_settings_are_named() {
        let e = |vars: &[(&str, &str)]| load_config(None, env(vars)).unwrap_err().to_string();
        assert!(e(&[("UIBLOCKS_DATABASE_URL", "mysql://x")]).contains("database.url"));
        assert!(e(&[("UIBLOCKS_DATABASE_URL", "sqlite://")]).contains("database.url"));
        assert!(
            e(&[
                ("UIBLOCKS_DATABASE_URL", "postgres://h/db"),
                ("UIBLOCKS_DATABASE_PATH", "a.db")
            ])
            .contains("database.url")
        );
        assert!(e(&[("UIBLOCKS_DATABASE_POOL", "4")]).contains("database.pool"));
        assert!(
            e(&[
                ("UIBLOCKS_DATABASE_URL", "postgres://h/db"),
                ("UIBLOCKS_DATABASE_POOL", "0")
            ])
            .contains("database.pool")
        );
    }

    #[test]
    fn no_file_and_no_environment_is_the_default() {
        let config = load_config(None, env(&[("HOME", "/root"), ("UIBLOCKS_BLESS", "1")])).unwrap();
        assert_eq!(config, ServerConfig::new("uiblocks.db"));
    }

    #[test]
    fn the_environment_wins_over_the_file() {
        let f = file(FULL);
        let config = load_config(
            Some(&f.0),
            env(&[
                ("UIBLOCKS_SERVER_BIND", "127.0.0.1:0"),
                ("UIBLOCKS_CONNECTIONS_MAX", "7"),
                (
                    "UIBLOCKS_SERVER_ORIGINS",
                    "https://a.example, https://b.example",
                ),
                ("UIBLOCKS_LIMITS_HOST_READSLOTS", "2"),
                ("UIBLOCKS_AUTH_MODE", "proxy"),
                ("UIBLOCKS_AUTH_PROXY_SECRET", "0123456789abcdef0123"),
                ("UIBLOCKS_AUTH_PROXY_ORGS_HEADER", "X-Tenants"),
            ]),
        )
        .unwrap();
        assert_eq!(config.bind, "127.0.0.1:0".parse().unwrap());
        assert_eq!(config.max_connections, 7);
        assert_eq!(config.origins, ["https://a.example", "https://b.example"]);
        assert_eq!(config.host_limits.read_slots(), 2);
        let AuthConfig::Proxy(proxy) = config.auth else {
            panic!("not proxy")
        };
        assert!(proxy.secret.matches(b"0123456789abcdef0123"));
        assert_eq!(proxy.user_header, "x-uiblocks-user");
        assert_eq!(proxy.orgs_header, "x-tenants");
    }

    fn error(text: &str, vars: &[(&str, &str)]) -> String {
        let f = file(text);
        load_config(Some(&f.0), env(vars)).unwrap_err().to_string()
    }

    #[test]
    fn unknown_keys_and_variables_are_named() {
        assert_eq!(
            error("[server]\nbindd = \"x\"\n", &[]),
            "unknown key `server.bindd`"
        );
        assert_eq!(error("colour = 1\n", &[]), "unknown key `colour`");
        assert_eq!(
            error("[limits.sync]\nnoSuchLimit = 3\n", &[]),
            "unknown key `limits.sync.noSuchLimit`"
        );
        assert_eq!(
            error("", &[("UIBLOCKS_SERVER_PORTT", "1")]),
            "unknown environment variable `UIBLOCKS_SERVER_PORTT`"
        );
    }

    #[test]
    fn bad_values_are_named() {
        assert_eq!(
            error("[connections]\nmax = \"many\"\n", &[]),
            "`connections.max`: expected a positive whole number, found string"
        );
        assert_eq!(
            error("[connections]\nidle_timeout = \"10 parsecs\"\n", &[]),
            "`connections.idle_timeout`: `10 parsecs` is not a duration such as `250ms`, \
             `10s`, `2m` or `1h`"
        );
        // 24h, the top of the range the errors name, is written as they write it.
        let f = file("[connections]\nidle_timeout = \"24h\"\n");
        let config = load_config(Some(&f.0), env(&[])).unwrap();
        assert_eq!(config.idle_timeout, Duration::from_secs(24 * 3600));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("h").is_err() && parse_duration("1.5h").is_err());
        assert_eq!(
            error("", &[("UIBLOCKS_CONNECTIONS_MAX", "lots")]),
            "`connections.max` (from UIBLOCKS_CONNECTIONS_MAX): `lots` is not a whole number"
        );
        assert_eq!(
            error("[server]\nbind = \"localhost\"\n", &[]),
            "`server.bind`: `localhost` is not an address such as `127.0.0.1:8080` or \
             `[::]:8080`"
        );
        assert_eq!(
            error("[auth]\nmode = \"ldap\"\n", &[]),
            "`auth.mode`: `ldap` is not one of none, demo, jwt, proxy"
        );
        assert_eq!(
            error("[chat]\npage_items = 0\n", &[]),
            "`chat.page_items`: 0 is not a positive number"
        );
        assert_eq!(
            error("[auth]\nmode = \"proxy\"\n", &[]),
            "`auth.proxy.secret`: is required with proxy"
        );
        assert!(error("[server\n", &[]).contains("is not TOML"));
    }

    #[test]
    fn connection_settings_out_of_range_are_named_with_their_range() {
        assert_eq!(
            error("[connections]\nidle_timeout = \"0ms\"\n", &[]),
            "`connections.idle_timeout`: must be from 10ms to 24h; got 0ms"
        );
        assert_eq!(
            error("", &[("UIBLOCKS_CONNECTIONS_HEADER_TIMEOUT", "0s")]),
            "`connections.header_timeout` (from UIBLOCKS_CONNECTIONS_HEADER_TIMEOUT): must be \
             from 10ms to 24h; got 0ms"
        );
        assert_eq!(
            error("[connections]\nbody_timeout = \"1441m\"\n", &[]),
            "`connections.body_timeout`: must be from 10ms to 24h; got 86460000ms"
        );
        for given in ["5ms", "0ms"] {
            assert_eq!(
                error(
                    &format!("[connections]\nwrite_timeout = \"{given}\"\n"),
                    &[]
                ),
                format!("`connections.write_timeout`: must be from 10ms to 24h; got {given}")
            );
        }
        assert_eq!(
            error("[connections]\ndrain_timeout = \"1500m\"\n", &[]),
            "`connections.drain_timeout`: must be from 0 to 24h; got 90000000ms"
        );
        assert_eq!(
            error("[connections]\nmax = 2000000\n", &[]),
            "`connections.max`: must be from 1 to 1000000; got 2000000"
        );
        // The bounds themselves are allowed; a zero spread or drain is.
        let f = file(
            "[connections]\nmax = 1000000\nidle_timeout = \"10ms\"\n\
             header_timeout = \"1440m\"\nshutdown_spread = \"0s\"\ndrain_timeout = \"0s\"\n",
        );
        let config = load_config(Some(&f.0), env(&[])).unwrap();
        assert_eq!(config.max_connections, 1_000_000);
        assert_eq!(config.idle_timeout, Duration::from_millis(10));
    }

    #[test]
    fn metrics_settings_come_from_the_file_and_the_environment() {
        assert!(ServerConfig::new("x").metrics.enabled);
        let f = file("[metrics]\nenabled = false\n");
        let config = load_config(Some(&f.0), env(&[])).unwrap();
        assert!(!config.metrics.enabled && config.metrics.token.is_none());
        let config = load_config(
            Some(&f.0),
            env(&[
                ("UIBLOCKS_METRICS_ENABLED", "true"),
                ("UIBLOCKS_METRICS_TOKEN", "scraper-token-0123456789"),
            ]),
        )
        .unwrap();
        assert!(config.metrics.enabled);
        assert!(
            config
                .metrics
                .token
                .as_ref()
                .is_some_and(|t| t.matches(b"scraper-token-0123456789"))
        );
        assert!(!format!("{config:?}").contains("scraper-token"));
        assert_eq!(
            error("", &[("UIBLOCKS_METRICS_TOKEN", "short")]),
            "`metrics.token` (from UIBLOCKS_METRICS_TOKEN): must be at least 16 bytes"
        );
        assert_eq!(
            error("[metrics]\nenabled = \"yes\"\n", &[]),
            "`metrics.enabled`: expected true or false, found string"
        );
    }

    #[test]
    fn secrets_are_not_printed() {
        let f = file("[auth]\nmode = \"jwt\"\n[auth.jwt]\nalgorithm = \"HS256\"\n");
        let config = load_config(
            Some(&f.0),
            env(&[(
                "UIBLOCKS_AUTH_JWT_SECRET",
                "very-secret-value-of-32-bytes-or-more",
            )]),
        )
        .unwrap();
        assert!(!format!("{config:?}").contains("very-secret"));
    }
}
