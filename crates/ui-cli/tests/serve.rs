//! `uiblocks serve` as a process: the start-up line with the real port, the request log
//! on standard error, a graceful drain on SIGTERM that leaves no `-wal`/`-shm` file, and a
//! clean failure when the port is taken. Loopback only; every wait is bounded.

#![allow(missing_docs)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_uiblocks"))
}

/// A fresh directory unique to this test process and `name`.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uiblocks-serve-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Kills the server if a test fails before it stopped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
}

/// A connection to `port` with a read timeout.
fn connect(port: u16) -> TcpStream {
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp
}

/// Reads from `tcp` until `needle` arrived (or the connection closed): all of it.
fn read_until(tcp: &mut TcpStream, needle: &str) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&all).contains(needle) {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}

#[test]
fn serve_tells_its_port_logs_requests_and_drains_on_sigterm_leaving_no_wal() {
    let dir = temp_dir("drain");
    let db = dir.join("app.db");
    let child = bin()
        .args(["serve", "--demo", "--port", "0", "--db"])
        .arg(&db)
        .args(["--shutdown-spread", "500ms", "--drain-timeout", "3s"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let stdout = server.0.stdout.take().unwrap();
    let stderr = server.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).ok();
        tx.send(line).ok();
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        BufReader::new(stderr).read_to_string(&mut text).ok();
        text
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a start-up line");
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    assert!(
        port != 0 && line.starts_with("uiblocks: serving the demo"),
        "{line}"
    );

    // Sign in, then open two event streams.
    let mut login = connect(port);
    let body = r#"{"user":"alice"}"#;
    write!(
        login,
        "POST /api/login HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let answer = read_until(&mut login, "\"alice\"");
    let cookie = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("no cookie in {answer}"))
        .to_owned();
    let session = cookie.split_once('=').unwrap().1.to_owned();
    let mut streams: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut tcp = connect(port);
            write!(
                tcp,
                "GET /ui/events HTTP/1.1\r\nhost: 127.0.0.1\r\ncookie: {cookie}\r\n\r\n"
            )
            .unwrap();
            let hello = read_until(&mut tcp, "event: hello");
            assert!(hello.contains("event: hello"), "{hello}");
            tcp
        })
        .collect();

    // SIGTERM: each stream gets `bye shutdown`, the process ends within the bound.
    let termed = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for tcp in &mut streams {
        let rest = read_until(tcp, "\"reason\":\"shutdown\"");
        assert!(rest.contains("event: bye"), "{rest}");
        assert!(rest.contains("\"reason\":\"shutdown\""), "{rest}");
    }
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            termed.elapsed() < Duration::from_secs(10),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = termed.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // The database is closed: its WAL checkpointed and removed.
    assert!(db.exists());
    for suffix in ["-wal", "-shm"] {
        let mut name = db.clone().into_os_string();
        name.push(suffix);
        assert!(!PathBuf::from(&name).exists(), "{name:?} is left behind");
    }

    // The log: one line per request with its fields, and never the session.
    let log = errors.join().unwrap();
    assert!(log.contains("SIGTERM"), "{log}");
    let streams_logged = log
        .lines()
        .filter(|l| {
            l.contains("ui_server::request")
                && l.contains("method=GET")
                && l.contains("route=/ui/events")
                && l.contains("status=200")
                && l.contains("user=alice")
                && l.contains("latency_ms=")
        })
        .count();
    assert_eq!(streams_logged, 2, "{log}");
    assert!(!log.contains(&session), "{log}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn serve_fails_cleanly_when_the_port_is_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = temp_dir("taken");
    let child = bin()
        .args(["serve", "--port", &port, "--db"])
        .arg(dir.join("app.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still running on a taken port"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let mut err = String::new();
    server
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success());
    assert!(!out.contains("serving"), "{out}");
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{err}"
    );
    drop(taken);
    std::fs::remove_dir_all(&dir).ok();
}

/// Starts `uiblocks serve` with `args` and `env`; the first line of standard output.
fn start(args: &[&str], env: &[(&str, &str)]) -> (Running, String) {
    let mut cmd = bin();
    cmd.arg("serve").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let stdout = server.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).ok();
        tx.send(line).ok();
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a start-up line");
    (server, line)
}

#[test]
fn bind_on_port_0_prints_the_real_address_and_the_file_and_environment_configure_it() {
    let dir = temp_dir("bind");
    let db = dir.join("app.db");
    let (mut server, line) = start(
        &[
            "--demo",
            "--bind",
            "127.0.0.1:0",
            "--db",
            db.to_str().unwrap(),
        ],
        &[],
    );
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    assert_ne!(port, 0, "{line}");
    let mut tcp = connect(port);
    write!(
        tcp,
        "GET /api/session HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    assert!(read_until(&mut tcp, "\"user\"").starts_with("HTTP/1.1 200"));
    server.0.kill().unwrap();
    server.0.wait().unwrap();

    // The file says port 1 on loopback; the environment moves it to a free port and
    // names the database; the demo comes from the file.
    let file = dir.join("uiblocks.toml");
    std::fs::write(
        &file,
        "[server]\nbind = \"127.0.0.1:1\"\ndemo = true\n[database]\npath = \"ignored.db\"\n",
    )
    .unwrap();
    let (mut server, line) = start(
        &["--config", file.to_str().unwrap()],
        &[
            ("UIBLOCKS_SERVER_BIND", "127.0.0.1:0"),
            ("UIBLOCKS_DATABASE_PATH", db.to_str().unwrap()),
        ],
    );
    assert!(
        line.starts_with("uiblocks: serving the demo on http://127.0.0.1:"),
        "{line}"
    );
    assert!(line.contains(db.to_str().unwrap()), "{line}");
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_configuration_stops_the_start_naming_the_key() {
    let dir = temp_dir("badconfig");
    let file = dir.join("uiblocks.toml");
    std::fs::write(&file, "[server]\nbind = \"127.0.0.1:0\"\nport = 80\n").unwrap();
    let out = bin()
        .args(["serve", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown key `server.port`"), "{stderr}");
    let out = bin()
        .args(["serve", "--port", "0", "--db"])
        .arg(dir.join("x.db"))
        .env("UIBLOCKS_CONNECTIONS_IDLE_TIMEOUT", "forever")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`connections.idle_timeout` (from UIBLOCKS_CONNECTIONS_IDLE_TIMEOUT)"),
        "{stderr}"
    );
    // A flag out of its range is named as the flag, with the range.
    for (flag, value, message) in [
        (
            "--idle-timeout",
            "0ms",
            "--idle-timeout: must be from 10ms to 24h; got 0ms",
        ),
        (
            "--max-connections",
            "0",
            "--max-connections: must be from 1 to 1000000; got 0",
        ),
    ] {
        let out = bin()
            .args(["serve", "--port", "0", "--db"])
            .arg(dir.join("x.db"))
            .args([flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
