//! Connecting to PostgreSQL with the TLS its connection string asks for, read the way
//! libpq reads it: [`PgConnect`].
//!
//! `tokio-postgres` parses connection strings but knows only `sslmode=disable`, `prefer`
//! and `require`, has no `sslrootcert`, and connects without TLS unless it is handed a TLS
//! implementation. The strings operators copy from their database provider say
//! `sslmode=require`, `sslmode=verify-full&sslrootcert=/etc/ssl/rds.pem` or
//! `channel_binding=require`, so the TLS keys are taken out of the string here and honoured
//! with rustls (the `ring` provider, no C library beyond ring's own), and the rest goes to
//! `tokio-postgres` as before.
//!
//! | `sslmode` | TLS | the server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | – |
//! | `allow`, `prefer`, absent | when the server offers it | not checked |
//! | `require` | always | not checked |
//! | `verify-ca` | always | chains to the `sslrootcert` file's CA (required) |
//! | `verify-full` | always | chains to a trusted root and names the host |
//!
//! As in libpq, a `sslrootcert` file makes every mode but `disable` check the chain. The
//! trusted roots are that PEM file, or the system's store: `sslrootcert=system` (which
//! also makes the absent mode `verify-full` and refuses weaker ones, as in libpq 16), and
//! `verify-full` without a `sslrootcert` (where libpq would read `~/.postgresql/root.crt`).
//! `verify-ca` without a file is refused: a chain to any public root, whatever the name,
//! would take a certificate bought for any domain. `sslcert` and `sslkey` (PEM) present a
//! client certificate. Unix sockets never use TLS; `hostaddr` alone names the host by its
//! address. A TLS connection offers `tls-server-end-point` channel binding to SCRAM
//! authentication (so `channel_binding=require` works) for certificates signed with RSA
//! PKCS#1 or ECDSA and SHA-1, -256, -384 or -512.
//!
//! ```
//! use ui_sync::PgConnect;
//!
//! let plain = PgConnect::parse("host=/run/postgresql user=app dbname=app").unwrap();
//! assert_eq!(plain.tls_mode(), "disable (Unix socket)");
//! let url = "postgres://app@db.internal/app?sslmode=require&channel_binding=require";
//! assert_eq!(PgConnect::parse(url).unwrap().tls_mode(), "require");
//! assert!(PgConnect::parse("postgres://app@db/app?sslmode=sometimes").is_err());
//! ```

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use sha2::Digest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use tokio_postgres::{Client, Config, Socket};

/// Why a connection string cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PgConnectError {
    /// `tokio-postgres` refused the string (the TLS keys taken out).
    #[error("not a PostgreSQL connection string: {0}")]
    Syntax(String),
    /// A TLS key is wrong, or a file it names cannot be used.
    #[error("{0}")]
    Tls(String),
}

/// What a `tokio-postgres` error says, with the cause its own `Display` leaves out: the
/// database's message and SQLSTATE (`the database system is shutting down (57P03)`), or the
/// I/O error under it (`error connecting to server: Connection refused (os error 111)`).
pub fn pg_error_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} ({})", d.message(), d.code().code()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// The connection string keys this module takes out of a string before `tokio-postgres`
/// reads the rest.
const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// An open connection's I/O half, as [`PgConnect::connect`] returns it (drive it on a task
/// of its own, as with `tokio_postgres::connect`).
pub type PgConnection = tokio_postgres::Connection<Socket, PgTlsStream<Socket>>;

/// A PostgreSQL connection string read with its TLS settings (see the module docs): the
/// `tokio-postgres` configuration of the rest, and the TLS client that honours them.
/// Cheap to clone.
#[derive(Clone)]
pub struct PgConnect {
    config: Config,
    tls: PgTls,
    mode: &'static str,
    /// The TLS mode the string asked for ([`PgConnect::connect`] holds to it).
    ssl_mode: SslMode,
}

impl std::fmt::Debug for PgConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password: the configuration's own Debug redacts it, but say less.
        f.debug_struct("PgConnect")
            .field("hosts", &self.config.get_hosts())
            .field("tls", &self.mode)
            .finish_non_exhaustive()
    }
}

impl PgConnect {
    /// Reads `conninfo`: a `postgres://` or `postgresql://` URL, or libpq `key=value`
    /// pairs. The trusted roots and client certificate it names are read now.
    ///
    /// # Errors
    /// [`PgConnectError::Syntax`] for what `tokio-postgres` refuses in the string;
    /// [`PgConnectError::Tls`] for an unknown `sslmode`, a file that cannot be read or
    /// holds no certificate or key, `sslcert` without `sslkey` (or the reverse),
    /// `sslrootcert=system` with a mode weaker than `verify-full`, `verify-ca` without a
    /// root file, a system store without roots.
    pub fn parse(conninfo: &str) -> Result<PgConnect, PgConnectError> {
        misplaced_at(conninfo)?;
        let (rest, params) = split_tls_params(conninfo);
        let mut config: Config = rest
            .parse()
            .map_err(|e: tokio_postgres::Error| PgConnectError::Syntax(e.to_string()))?;
        let plan = Plan::of(&params).map_err(PgConnectError::Tls)?;
        if config.get_hosts().is_empty() {
            // `hostaddr` alone: its addresses name the hosts too, so that TLS has a name
            // (an address, checked against the certificate's addresses by verify-full)
            // where `tokio-postgres` would refuse a handshake without one.
            let addrs: Vec<String> = config
                .get_hostaddrs()
                .iter()
                .map(ToString::to_string)
                .collect();
            for addr in addrs {
                config.host(&addr);
            }
        }
        let only_sockets = !config.get_hosts().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|h| !matches!(h, Host::Tcp(_)));
        let (ssl_mode, mode) = if only_sockets {
            (SslMode::Disable, "disable (Unix socket)")
        } else {
            (plan.ssl_mode, plan.name)
        };
        config.ssl_mode(ssl_mode);
        let tls = PgTls::new(&plan, &params).map_err(PgConnectError::Tls)?;
        Ok(PgConnect {
            config,
            tls,
            mode,
            ssl_mode,
        })
    }

    /// The `tokio-postgres` configuration (hosts, user, database, timeouts, and the
    /// `sslmode` it applies).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration, to set timeouts, keepalives or the application name.
    /// Its TLS mode stays the string's: [`PgConnect::connect`] applies it again.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The TLS client, for `CancelToken::cancel_query`.
    pub fn tls(&self) -> PgTls {
        self.tls.clone()
    }

    /// The TLS mode in effect, as `sslmode` words: `disable`, `prefer`, `require`,
    /// `verify-ca` or `verify-full` (`disable (Unix socket)` when every host is a socket).
    pub fn tls_mode(&self) -> &'static str {
        self.mode
    }

    /// Connects: TLS as the string asked, then authentication.
    ///
    /// # Errors
    /// `tokio-postgres`'s error: the server cannot be reached, refuses TLS that `require`
    /// asked for, presents a certificate the mode does not accept, refuses the login.
    pub async fn connect(&self) -> Result<(Client, PgConnection), tokio_postgres::Error> {
        if self.config.get_ssl_mode() == self.ssl_mode {
            return self.config.connect(self.tls.clone()).await;
        }
        let mut config = self.config.clone();
        config.ssl_mode(self.ssl_mode);
        config.connect(self.tls.clone()).await
    }
}

/// The TLS keys of a connection string.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct TlsParams {
    mode: Option<String>,
    root: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

impl TlsParams {
    fn set(&mut self, key: &str, value: String) {
        match key {
            "sslmode" => self.mode = Some(value),
            "sslrootcert" => self.root = Some(value),
            "sslcert" => self.cert = Some(value),
            _ => self.key = Some(value),
        }
    }
}

/// A URL whose user name or password holds `/`, `?`, `#` or `@` unencoded: its `@` then
/// comes after the host, and the URL reads as another host and database made of pieces of
/// the password, which messages would print. Refused without repeating any of it.
fn misplaced_at(conninfo: &str) -> Result<(), PgConnectError> {
    let Some(rest) = conninfo
        .strip_prefix("postgres://")
        .or_else(|| conninfo.strip_prefix("postgresql://"))
    else {
        return Ok(());
    };
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (path, query) = rest[host_end..]
        .split_once('?')
        .unwrap_or((&rest[host_end..], ""));
    // A query value may hold an `@` (`application_name=ci@host`); a key never does.
    let in_a_key = query.split('&').any(|part| {
        part.split_once('=')
            .map_or(part, |(key, _)| key)
            .contains('@')
    });
    if path.contains('@') || in_a_key {
        return Err(PgConnectError::Syntax(
            "the URL has an `@` after its host: percent-encode `@`, `/`, `?`, `#` and `:` \
             in the user name and password (`%40`, `%2F`, `%3F`, `%23`, `%3A`)"
                .into(),
        ));
    }
    Ok(())
}

/// `conninfo` without its TLS keys, and their values. A string this cannot take apart is
/// passed on whole, for `tokio-postgres` to say what is wrong with it.
fn split_tls_params(conninfo: &str) -> (String, TlsParams) {
    let split = if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        split_url(conninfo)
    } else {
        split_pairs(conninfo)
    };
    split.unwrap_or_else(|| (conninfo.to_owned(), TlsParams::default()))
}

/// The URL form: the TLS keys of the query string.
fn split_url(url: &str) -> Option<(String, TlsParams)> {
    let Some((base, query)) = url.split_once('?') else {
        return Some((url.to_owned(), TlsParams::default()));
    };
    let mut params = TlsParams::default();
    let mut kept = Vec::new();
    for part in query.split('&') {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        let key = percent_decode(key)?;
        if TLS_KEYS.contains(&key.as_str()) {
            params.set(&key, percent_decode(value)?);
        } else {
            kept.push(part);
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Some((rest, params))
}

/// `%XX` escapes decoded (the URL form's keys and values); `None` for a broken escape or
/// text that is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The `key=value` form: pairs separated by whitespace, a value in single quotes or not,
/// `\` escaping the next character.
fn split_pairs(conninfo: &str) -> Option<(String, TlsParams)> {
    let text = conninfo.as_bytes();
    let mut params = TlsParams::default();
    let mut kept: Vec<&str> = Vec::new();
    let mut i = 0;
    let skip_space = |mut i: usize| {
        while i < text.len() && text[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_space(i);
        if i == text.len() {
            break;
        }
        let start = i;
        while i < text.len() && text[i] != b'=' && !text[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &conninfo[start..i];
        i = skip_space(i);
        if text.get(i) != Some(&b'=') || key.is_empty() {
            return None;
        }
        i = skip_space(i + 1);
        let mut value = Vec::new();
        let quoted = text.get(i) == Some(&b'\'');
        if quoted {
            i += 1;
        }
        loop {
            match text.get(i) {
                None if quoted => return None,
                None => break,
                Some(b'\'') if quoted => {
                    i += 1;
                    break;
                }
                Some(c) if !quoted && c.is_ascii_whitespace() => break,
                Some(b'\\') => {
                    value.push(*text.get(i + 1)?);
                    i += 2;
                }
                Some(c) => {
                    value.push(*c);
                    i += 1;
                }
            }
        }
        if TLS_KEYS.contains(&key) {
            params.set(key, String::from_utf8(value).ok()?);
        } else {
            kept.push(&conninfo[start..i]);
        }
    }
    Some((kept.join(" "), params))
}

/// How far a mode checks the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Encryption only: any certificate (its handshake signature still checked).
    Nothing,
    /// The chain to a trusted root, whatever name it holds.
    Chain,
    /// The chain and the host's name.
    Full,
}

/// What an `sslmode` (with `sslrootcert`) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    ssl_mode: SslMode,
    check: Check,
    name: &'static str,
}

impl Plan {
    fn of(params: &TlsParams) -> Result<Plan, String> {
        let system = params.root.as_deref() == Some("system");
        let file = params.root.is_some() && !system;
        let plan = |ssl_mode, check, name| Plan {
            ssl_mode,
            check,
            name,
        };
        let chosen = match params.mode.as_deref() {
            None if system => plan(SslMode::Require, Check::Full, "verify-full"),
            // As libpq: a root file makes every mode check the chain.
            None | Some("prefer" | "allow") if file => {
                plan(SslMode::Prefer, Check::Chain, "prefer (verify-ca)")
            }
            None | Some("prefer" | "allow") => plan(SslMode::Prefer, Check::Nothing, "prefer"),
            Some("disable") => plan(SslMode::Disable, Check::Nothing, "disable"),
            Some("require" | "verify-ca") if file => {
                plan(SslMode::Require, Check::Chain, "verify-ca")
            }
            Some("require") => plan(SslMode::Require, Check::Nothing, "require"),
            // A chain to any public root, whatever the name, would take any certificate
            // bought for any domain: verify-ca needs the roots of this database's CA.
            Some("verify-ca") => {
                return Err(
                    "sslmode=verify-ca needs sslrootcert naming the CA file of the database's \
                     certificates (or use verify-full)"
                        .into(),
                );
            }
            Some("verify-full") => plan(SslMode::Require, Check::Full, "verify-full"),
            Some(other) => {
                return Err(format!(
                    "sslmode: `{other}` is not one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
                ));
            }
        };
        if system && chosen.check != Check::Full {
            return Err(format!(
                "sslrootcert=system needs sslmode=verify-full (or no sslmode), not {}",
                params.mode.as_deref().unwrap_or("prefer")
            ));
        }
        if params.cert.is_some() != params.key.is_some() {
            return Err("sslcert and sslkey go together: name both files or neither".into());
        }
        Ok(chosen)
    }
}

/// The TLS client of a [`PgConnect`]: a `tokio_postgres::tls::MakeTlsConnect` over rustls.
/// Cheap to clone.
#[derive(Clone)]
pub struct PgTls {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTls").finish_non_exhaustive()
    }
}

impl PgTls {
    fn new(plan: &Plan, params: &TlsParams) -> Result<PgTls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = match plan.check {
            Check::Nothing => None,
            Check::Chain | Check::Full => {
                let roots = Arc::new(roots(params.root.as_deref())?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| format!("sslrootcert: {e}"))?;
                Some(webpki)
            }
        };
        let verifier: Arc<dyn ServerCertVerifier> = match chain {
            Some(webpki) if plan.check == Check::Full => webpki,
            chain => Arc::new(Lenient {
                chain,
                provider: provider.clone(),
            }),
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&params.cert, &params.key) {
            (Some(cert), Some(key)) => {
                let chain = certificates(cert, "sslcert")?;
                let key =
                    PrivateKeyDer::from_pem_file(key).map_err(|e| format!("sslkey: {key}: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("sslcert and sslkey: {e}"))?
            }
            _ => builder.with_no_client_auth(),
        };
        let mut config = config;
        // PostgreSQL 17's direct TLS (`sslnegotiation=direct`) needs it; older servers
        // ignore it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(PgTls {
            config: Arc::new(config),
        })
    }
}

/// The certificates of the PEM file at `path` (at least one); `key` names the setting in
/// messages.
fn certificates(path: &str, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("{key}: {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{key}: {path} holds no PEM certificate"));
    }
    Ok(certs)
}

/// The trusted roots: the PEM file `root` names, or the system's store.
fn roots(root: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match root {
        Some(path) if path != "system" => {
            let (added, _) = store.add_parsable_certificates(certificates(path, "sslrootcert")?);
            if added == 0 {
                return Err(format!(
                    "sslrootcert: {path} holds no usable CA certificate"
                ));
            }
        }
        _ => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default();
                return Err(format!(
                    "the system's store holds no trusted root{why}: name a PEM file with \
                     sslrootcert"
                ));
            }
        }
    }
    Ok(store)
}

/// The check of `prefer` and `require` without roots ([`Check::Nothing`]: any
/// certificate, libpq's meaning of those modes: encryption, not authentication) and of
/// `verify-ca` ([`Check::Chain`]: the chain must reach a trusted root, whatever name the
/// certificate holds). Either way the handshake's signatures are checked against the
/// certificate. `verify-full` is rustls's own [`WebPkiServerVerifier`].
#[derive(Debug)]
struct Lenient {
    /// The chain's verifier, for [`Check::Chain`].
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = std::convert::Infallible;

    /// `tokio-postgres` asks for a connector for every connection, TLS or not, with an
    /// empty host for a Unix socket or a bare `hostaddr`: a name that is not one fails
    /// only if a handshake is attempted.
    fn make_tls_connect(&mut self, host: &str) -> Result<PgTlsConnect, Self::Error> {
        Ok(PgTlsConnect {
            config: self.config.clone(),
            name: ServerName::try_from(host.to_owned()).ok(),
        })
    }
}

/// One TLS handshake to one host (made by [`PgTls`]).
pub struct PgTlsConnect {
    config: Arc<ClientConfig>,
    /// `None`: no host name (a Unix socket, where the server never offers TLS).
    name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for PgTlsConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTlsConnect")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<S> TlsConnect<S> for PgTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<PgTlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            let name = self.name.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "TLS needs the server's host name or address",
                )
            })?;
            let tls = connector.connect(name, stream).await?;
            Ok(PgTlsStream(Box::new(tls)))
        })
    }
}

/// A TLS connection to PostgreSQL.
pub struct PgTlsStream<S>(Box<tokio_rustls::client::TlsStream<S>>);

impl<S> std::fmt::Debug for PgTlsStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTlsStream").finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for PgTlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref();
        session
            .peer_certificates()
            .and_then(<[_]>::first)
            .and_then(|cert| server_end_point(cert))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PgTlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PgTlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// RFC 5929's `tls-server-end-point` of a DER certificate: its hash with the hash of its
/// signature algorithm (SHA-256, -384, -512), SHA-256 for MD5 and SHA-1. `None` for other
/// algorithms (SHA-224, RSA-PSS, Ed25519): SCRAM then runs without channel binding.
fn server_end_point(cert: &[u8]) -> Option<Vec<u8>> {
    const RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01];
    const ECDSA_SHA1: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x01];
    const ECDSA_SHA2: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03];
    let oid = signature_algorithm(cert)?;
    let hash = if let Some(rest) = oid.strip_prefix(RSA) {
        match rest {
            // MD5 and SHA-1 with SHA-256; SHA-224 (0x0E) would need SHA-224: none.
            [0x04 | 0x05 | 0x0B] => 256,
            [0x0C] => 384,
            [0x0D] => 512,
            _ => return None,
        }
    } else if oid == ECDSA_SHA1 {
        256
    } else if let Some(rest) = oid.strip_prefix(ECDSA_SHA2) {
        match rest {
            // 0x01 is ecdsa-with-SHA224: none (see above).
            [0x02] => 256,
            [0x03] => 384,
            [0x04] => 512,
            _ => return None,
        }
    } else {
        return None;
    };
    Some(match hash {
        256 => sha2::Sha256::digest(cert).to_vec(),
        384 => sha2::Sha384::digest(cert).to_vec(),
        _ => sha2::Sha512::digest(cert).to_vec(),
    })
}

/// The OID (content bytes) of a certificate's outer `signatureAlgorithm`:
/// `Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm AlgorithmIdentifier, … }`.
fn signature_algorithm(cert: &[u8]) -> Option<&[u8]> {
    let (tag, body, _) = der(cert)?;
    if tag != 0x30 {
        return None;
    }
    let (_, _, after_tbs) = der(body)?;
    let (tag, algorithm, _) = der(after_tbs)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, oid, _) = der(algorithm)?;
    (tag == 0x06).then_some(oid)
}

/// One DER element at the start of `bytes`: its tag, its content and what follows it.
fn der(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = bytes.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7F);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |len, b| (len << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(mode: Option<&str>, root: Option<&str>) -> TlsParams {
        TlsParams {
            mode: mode.map(str::to_owned),
            root: root.map(str::to_owned),
            ..TlsParams::default()
        }
    }

    #[test]
    fn the_tls_keys_leave_a_url_and_the_rest_stays_as_written() {
        let (rest, p) = split_tls_params(
            "postgres://u:p%40ss@db.example.com:6432/app?application_name=x&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fssl%2Fca.pem&channel_binding=require",
        );
        assert_eq!(
            rest,
            "postgres://u:p%40ss@db.example.com:6432/app?application_name=x&channel_binding=require"
        );
        assert_eq!(p.mode.as_deref(), Some("verify-full"));
        assert_eq!(p.root.as_deref(), Some("/etc/ssl/ca.pem"));
        let (rest, p) = split_tls_params("postgresql://db/app?sslmode=require");
        assert_eq!(
            (rest.as_str(), p.mode.as_deref()),
            ("postgresql://db/app", Some("require"))
        );
        let (rest, p) = split_tls_params("postgres://db/app");
        assert_eq!(
            (rest.as_str(), p),
            ("postgres://db/app", TlsParams::default())
        );
    }

    #[test]
    fn the_tls_keys_leave_key_value_pairs_with_quotes_and_escapes() {
        let (rest, p) = split_tls_params(
            "host=db user = app password='it\\'s' sslmode = verify-ca \
             sslrootcert='/etc/my certs/ca.pem' sslcert=/c\\ d.pem sslkey=k.pem dbname=app",
        );
        assert_eq!(rest, "host=db user = app password='it\\'s' dbname=app");
        assert_eq!(p.mode.as_deref(), Some("verify-ca"));
        assert_eq!(p.root.as_deref(), Some("/etc/my certs/ca.pem"));
        assert_eq!(p.cert.as_deref(), Some("/c d.pem"));
        assert_eq!(p.key.as_deref(), Some("k.pem"));
        // What this cannot read goes on whole, for tokio-postgres to name the fault.
        let (rest, p) = split_tls_params("host=db sslmode='verify-full");
        assert_eq!(
            (rest.as_str(), p),
            ("host=db sslmode='verify-full", TlsParams::default())
        );
    }

    #[test]
    fn a_password_with_url_delimiters_is_refused_without_a_piece_of_it() {
        for url in [
            "postgres://ub2:p@zq/w:rd#1@127.0.0.1:5432/uiblocks",
            "postgres://u:pa/zq@db/app",
            "postgresql://u:p?zq@db/app",
            "postgres://u:p#zq@db/app",
        ] {
            let e = PgConnect::parse(url).unwrap_err().to_string();
            assert!(e.contains("percent-encode"), "{url}: {e}");
            assert!(!e.contains("zq"), "{url}: {e}");
        }
        let named = "postgres://u@db/app?application_name=ci@host&sslmode=disable";
        let c = PgConnect::parse(named).unwrap();
        assert_eq!(c.config().get_application_name(), Some("ci@host"));
        let encoded = "postgres://ub2:p%40zq%2Fw%3Ard%231@127.0.0.1:5432/uiblocks";
        let c = PgConnect::parse(encoded).unwrap();
        assert_eq!(c.config().get_password(), Some(&b"p@zq/w:rd#1"[..]));
        assert_eq!(c.config().get_dbname(), Some("uiblocks"));
    }

    #[test]
    fn each_mode_means_what_it_means_to_libpq() {
        let plan = |mode, root| Plan::of(&params(mode, root));
        let of = |mode, root| {
            let p = plan(mode, root).unwrap();
            (p.ssl_mode, p.check, p.name)
        };
        use Check::*;
        assert_eq!(of(None, None), (SslMode::Prefer, Nothing, "prefer"));
        assert_eq!(
            of(Some("allow"), None),
            (SslMode::Prefer, Nothing, "prefer")
        );
        assert_eq!(
            of(Some("disable"), None),
            (SslMode::Disable, Nothing, "disable")
        );
        assert_eq!(
            of(Some("require"), None),
            (SslMode::Require, Nothing, "require")
        );
        assert_eq!(
            of(Some("require"), Some("/ca.pem")),
            (SslMode::Require, Chain, "verify-ca")
        );
        assert_eq!(
            of(Some("verify-ca"), Some("/ca.pem")),
            (SslMode::Require, Chain, "verify-ca")
        );
        assert_eq!(
            of(None, Some("/ca.pem")),
            (SslMode::Prefer, Chain, "prefer (verify-ca)")
        );
        assert_eq!(
            of(Some("verify-full"), None),
            (SslMode::Require, Full, "verify-full")
        );
        assert_eq!(
            of(None, Some("system")),
            (SslMode::Require, Full, "verify-full")
        );
        let err = |mode, root| plan(mode, root).unwrap_err();
        assert!(err(Some("require"), Some("system")).contains("needs sslmode=verify-full"));
        assert!(err(Some("verify-ca"), Some("system")).contains("needs sslrootcert naming"));
        assert!(err(Some("always"), None).contains("`always` is not one of"));
        assert!(err(Some("verify-ca"), None).contains("needs sslrootcert"));
        let half = TlsParams {
            cert: Some("c.pem".into()),
            ..TlsParams::default()
        };
        assert!(Plan::of(&half).unwrap_err().contains("go together"));
    }

    #[test]
    fn unix_sockets_never_use_tls_and_tcp_hosts_follow_the_mode() {
        let socket = PgConnect::parse("host=/run/postgresql sslmode=require user=u").unwrap();
        assert_eq!(socket.config().get_ssl_mode(), SslMode::Disable);
        assert_eq!(socket.tls_mode(), "disable (Unix socket)");
        let tcp = PgConnect::parse("host=127.0.0.1 sslmode=require user=u").unwrap();
        assert_eq!(tcp.config().get_ssl_mode(), SslMode::Require);
        let default = PgConnect::parse("postgres://u@localhost/app").unwrap();
        assert_eq!(default.config().get_ssl_mode(), SslMode::Prefer);
        assert!(
            PgConnect::parse("host=db sslmode=verify-full sslrootcert=/nonexistent/ca.pem")
                .unwrap_err()
                .to_string()
                .contains("sslrootcert: /nonexistent/ca.pem")
        );
    }

    #[test]
    fn the_end_point_hash_follows_the_signature_algorithm() {
        // A minimal DER shape: SEQUENCE { SEQUENCE {} (tbs), SEQUENCE { OID } }.
        let cert = |oid: &[u8]| {
            let mut alg = vec![0x06, u8::try_from(oid.len()).unwrap()];
            alg.extend_from_slice(oid);
            let mut body = vec![0x30, 0x00, 0x30, u8::try_from(alg.len()).unwrap()];
            body.extend(alg);
            let mut der = vec![0x30, u8::try_from(body.len()).unwrap()];
            der.extend(body);
            der
        };
        let rsa = |last| cert(&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, last]);
        let ecdsa = |last| cert(&[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, last]);
        let len = |der: Vec<u8>| server_end_point(&der).map(|h| h.len());
        assert_eq!(len(rsa(0x0B)), Some(32)); // sha256WithRSAEncryption
        assert_eq!(len(rsa(0x05)), Some(32)); // SHA-1 is hashed with SHA-256
        assert_eq!(len(rsa(0x0C)), Some(48));
        assert_eq!(len(rsa(0x0D)), Some(64));
        assert_eq!(len(ecdsa(0x02)), Some(32));
        assert_eq!(len(ecdsa(0x03)), Some(48));
        assert_eq!(len(rsa(0x0A)), None); // RSA-PSS
        assert_eq!(len(rsa(0x0E)), None); // sha224WithRSAEncryption
        assert_eq!(len(ecdsa(0x01)), None); // ecdsa-with-SHA224
        assert_eq!(len(cert(&[0x2B, 0x65, 0x70])), None); // Ed25519
        let rsa256 = rsa(0x0B);
        assert_eq!(
            server_end_point(&rsa256),
            Some(sha2::Sha256::digest(&rsa256).to_vec())
        );
        assert_eq!(server_end_point(&rsa256[..rsa256.len() - 1]), None);
        assert_eq!(server_end_point(&[]), None);
    }
}
