//! `PgConnect` against a PostgreSQL that speaks TLS: each `sslmode` connects, or refuses,
//! as libpq's would, and SCRAM's channel binding holds.
//!
//! Needs `UI_SYNC_PG` (a `host=127.0.0.1 …` connection string of a superuser) and
//! `UI_PG_TLS_ROOT`: the CA file whose certificate the server presents, for the name
//! `localhost` only and `client.pem`/`client.key` beside it for the role `ui_cert`, with
//! `hostssl … ui_cert … cert`, `hostssl … ui_scram … scram-sha-256` and `hostnossl …
//! ui_scram … reject` first in `pg_hba.conf`, and its Unix socket in the directory above
//! the CA's.
//! `cargo xtask ci` starts such a cluster; without the variables these tests say they
//! were skipped and pass.
#![cfg(feature = "postgres")]

use std::path::Path;
use std::time::Duration;

use ui_sync::PgConnect;

/// The cluster's connection string and the CA file, when both are set (and the string
/// names `host=127.0.0.1`, the address the certificate does not name). Otherwise the
/// tests say so and pass: `UI_PG_REQUIRED` asks for a database, not for one that speaks
/// TLS with a known CA (`cargo xtask ci` with an external `UI_SYNC_PG` has none).
fn cluster() -> Option<(String, String)> {
    let conninfo = std::env::var("UI_SYNC_PG").ok().filter(|c| !c.is_empty());
    let root = std::env::var("UI_PG_TLS_ROOT")
        .ok()
        .filter(|r| !r.is_empty());
    match (conninfo, root) {
        (Some(conninfo), Some(root)) if conninfo.contains("host=127.0.0.1") => {
            Some((conninfo, root))
        }
        _ => {
            eprintln!("skipped: needs UI_SYNC_PG (host=127.0.0.1 …) and UI_PG_TLS_ROOT");
            None
        }
    }
}

/// `step` within 10 s, or a panic naming it and `conninfo` (a test never hangs).
async fn bounded<T>(conninfo: &str, step: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| panic!("{step} took over 10 s: {conninfo}"))
}

/// Runs `sql` as the cluster's superuser (without TLS).
async fn as_superuser(conninfo: &str, sql: &str) {
    let admin = PgConnect::parse(&format!("{conninfo} sslmode=disable")).unwrap();
    let (client, connection) = bounded(conninfo, "connecting", admin.connect())
        .await
        .unwrap();
    tokio::spawn(connection);
    bounded(conninfo, sql, client.batch_execute(sql))
        .await
        .unwrap();
}

/// SQL that makes the login role `name` unless it exists.
fn login_role(name: &str) -> String {
    format!(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{name}') THEN \
         CREATE ROLE {name} LOGIN; END IF; END $$;"
    )
}

/// Whether the session `conninfo` opens runs over TLS, or why it could not open.
async fn over_tls(conninfo: &str) -> Result<bool, String> {
    let connect = PgConnect::parse(conninfo).map_err(|e| e.to_string())?;
    let (client, connection) = bounded(conninfo, "connecting", connect.connect())
        .await
        .map_err(|e| format!("{e:?}"))?;
    let driver = tokio::spawn(connection);
    let sql = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
    let row = bounded(conninfo, "the query", client.query_one(sql, &[]))
        .await
        .map_err(|e| e.to_string())?;
    drop(client);
    bounded(conninfo, "closing", driver)
        .await
        .expect("the connection task")
        .expect("a clean end");
    Ok(row.get(0))
}

#[tokio::test]
async fn each_sslmode_connects_or_refuses_as_libpq_does() {
    let Some((conninfo, root)) = cluster() else {
        return;
    };
    let by_name = conninfo.replace("host=127.0.0.1", "host=localhost");
    // No sslmode is `prefer`: TLS, since the server offers it.
    assert_eq!(over_tls(&conninfo).await, Ok(true));
    assert_eq!(
        over_tls(&format!("{conninfo} sslmode=disable")).await,
        Ok(false)
    );
    assert_eq!(
        over_tls(&format!("{conninfo} sslmode=require")).await,
        Ok(true)
    );
    let full = format!("sslmode=verify-full sslrootcert={root}");
    assert_eq!(over_tls(&format!("{by_name} {full}")).await, Ok(true));
    // The certificate names `localhost`, not the address: verify-full refuses it there,
    // verify-ca (and require with a root file) only checks the chain.
    let refused = over_tls(&format!("{conninfo} {full}")).await.unwrap_err();
    assert!(refused.contains("NotValidForName"), "{refused}");
    let ca = format!("sslmode=verify-ca sslrootcert={root}");
    assert_eq!(over_tls(&format!("{conninfo} {ca}")).await, Ok(true));
    let require = format!("sslmode=require sslrootcert={root}");
    assert_eq!(over_tls(&format!("{conninfo} {require}")).await, Ok(true));
    // A root file that does not sign the server's certificate: refused, whatever the name.
    let server = Path::new(&root).with_file_name("server.pem");
    let wrong = format!("sslmode=verify-ca sslrootcert={}", server.display());
    let refused = over_tls(&format!("{by_name} {wrong}")).await.unwrap_err();
    assert!(refused.contains("UnknownIssuer"), "{refused}");
}

#[tokio::test]
async fn sockets_and_bare_addresses_connect_whatever_the_mode() {
    // Before: every connection without a host name (a Unix socket, `hostaddr` alone)
    // failed, TLS or not: the TLS connector refused the empty name it is always given.
    let Some((conninfo, root)) = cluster() else {
        return;
    };
    let port = conninfo
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .expect("a port");
    // `cargo xtask ci` puts the cluster's socket beside its `tls` directory.
    let sockets = Path::new(&root).parent().and_then(Path::parent).unwrap();
    let socket = format!(
        "host={} port={port} user=postgres dbname=postgres",
        sockets.display()
    );
    for mode in ["", "sslmode=require", "sslmode=verify-full"] {
        assert_eq!(
            over_tls(&format!("{socket} {mode}")).await,
            Ok(false),
            "{mode}"
        );
    }
    let bare = format!("hostaddr=127.0.0.1 port={port} user=postgres dbname=postgres");
    assert_eq!(
        over_tls(&format!("{bare} sslmode=disable")).await,
        Ok(false)
    );
    assert_eq!(over_tls(&bare).await, Ok(true));
    let ca = format!("sslmode=verify-ca sslrootcert={root}");
    assert_eq!(over_tls(&format!("{bare} {ca}")).await, Ok(true));
    // The certificate names `localhost`, not the address.
    let full = format!("{bare} sslmode=verify-full sslrootcert={root}");
    let refused = over_tls(&full).await.unwrap_err();
    assert!(refused.contains("NotValidForName"), "{refused}");
}

#[tokio::test]
async fn a_client_certificate_signs_in() {
    let Some((conninfo, root)) = cluster() else {
        return;
    };
    as_superuser(&conninfo, &login_role("ui_cert")).await;
    let dir = Path::new(&root).parent().unwrap();
    let cert = format!(
        "sslcert={} sslkey={}",
        dir.join("client.pem").display(),
        dir.join("client.key").display()
    );
    let as_cert = conninfo
        .replace("host=127.0.0.1", "host=localhost")
        .replace("user=postgres", "user=ui_cert");
    let full = format!("{as_cert} sslmode=verify-full sslrootcert={root}");
    // `pg_hba.conf` lets `ui_cert` in with its certificate only (`hostssl … cert`).
    assert_eq!(over_tls(&format!("{full} {cert}")).await, Ok(true));
    assert!(over_tls(&full).await.is_err(), "no certificate, no entry");
}

#[tokio::test]
async fn scram_with_channel_binding_required_signs_in_over_tls() {
    let Some((conninfo, _)) = cluster() else {
        return;
    };
    let role = login_role("ui_scram");
    let password = "SET password_encryption = 'scram-sha-256'; \
                    ALTER ROLE ui_scram PASSWORD 'ui-scram-secret';";
    as_superuser(&conninfo, &format!("{role} {password}")).await;
    let scram = conninfo.replace("user=postgres", "user=ui_scram password=ui-scram-secret");
    assert!(scram.contains("user=ui_scram"), "{conninfo}");
    let bound = format!("{scram} sslmode=require channel_binding=require");
    assert_eq!(over_tls(&bound).await, Ok(true));
    // The role may only sign in over TLS (`hostssl`): without it the server refuses.
    assert!(over_tls(&format!("{scram} sslmode=disable")).await.is_err());
}
