//! `docs/http-api.md` against the router: every route of [`ROUTES`] (which builds the
//! router) has a heading in the page and every heading is a route; every [`ErrorCode`] has
//! a row with its status and every row is a code with that status; the router answers
//! each listed route and refuses the other method; the README links the page and only
//! files inside the repository.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use axum::http::{Method, StatusCode};
use common::App;
use ui_server::{ErrorCode, ROUTES, RouteMethod};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn doc() -> String {
    std::fs::read_to_string(repo().join("docs/http-api.md")).unwrap()
}

/// The `### \`METHOD /path\`` headings of the page.
fn documented_routes(doc: &str) -> BTreeSet<(String, String)> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
        .filter_map(|h| {
            let (method, path) = h.split_once(' ')?;
            Some((method.to_owned(), path.to_owned()))
        })
        .collect()
}

/// The `| \`code\` | status | … |` rows of the page.
fn documented_codes(doc: &str) -> Vec<(String, u16)> {
    doc.lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix("| `")?.split('|');
            let code = cells.next()?.trim().strip_suffix('`')?;
            let status = cells.next()?.trim().parse().ok()?;
            Some((code.to_owned(), status))
        })
        .collect()
}

#[test]
fn every_route_is_documented_and_every_documented_route_exists() {
    let documented = documented_routes(&doc());
    let routes: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.method.as_str().to_owned(), r.path.to_owned()))
        .collect();
    assert_eq!(routes.len(), ROUTES.len(), "a route is listed twice");
    let undocumented: Vec<_> = routes.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&routes).collect();
    assert!(
        undocumented.is_empty(),
        "routes missing from docs/http-api.md: {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "docs/http-api.md documents routes the router does not serve: {unknown:?}"
    );
}

#[test]
fn every_error_code_is_documented_with_its_status() {
    let rows = documented_codes(&doc());
    for code in ErrorCode::ALL {
        let row = rows.iter().find(|(c, _)| c == code.as_str());
        assert_eq!(
            row.map(|(_, s)| *s),
            Some(code.status().as_u16()),
            "`{code}` needs a row `| `{code}` | {} |` in docs/http-api.md",
            code.status().as_u16()
        );
    }
    for (text, status) in &rows {
        let code = ErrorCode::parse(text)
            .unwrap_or_else(|| panic!("docs/http-api.md lists `{text}`, which is no code"));
        assert_eq!(code.status().as_u16(), *status, "the status of `{text}`");
    }
    // The interpreter codes of `host.md` §14.4 are all there too, and `/ui/view`'s
    // `refused_action`.
    let failures = rows
        .iter()
        .filter(|(c, _)| matches!(ErrorCode::parse(c), Some(ErrorCode::Failure(_))))
        .count();
    assert_eq!(failures, 11);
}

fn method(m: RouteMethod) -> Method {
    match m {
        RouteMethod::Get => Method::GET,
        RouteMethod::Post => Method::POST,
        other => panic!("a method this test does not know: {other:?}"),
    }
}

fn concrete(path: &str) -> String {
    path.replace("{chat}", "c1")
        .replace("{item}", "i1")
        .replace("{name}", "n1")
}

#[tokio::test]
async fn the_router_serves_exactly_the_listed_routes() {
    let app = App::new().await;
    for route in ROUTES {
        let path = concrete(route.path);
        let a = app.call(method(route.method), &path, None, None).await;
        assert_ne!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{route:?}: {a:?}");
        assert_ne!(
            a.body["error"]["message"], "No such route.",
            "{route:?}: {a:?}"
        );
        // The other method is refused unless the path lists it too.
        let other = match route.method {
            RouteMethod::Get => RouteMethod::Post,
            _ => RouteMethod::Get,
        };
        if !ROUTES
            .iter()
            .any(|r| r.path == route.path && r.method == other)
        {
            let a = app.call(method(other), &path, None, None).await;
            assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{route:?}: {a:?}");
            assert_eq!(a.code(), "method-not-allowed");
        }
    }
    let a = app.call(Method::GET, "/api/nothing", None, None).await;
    assert_eq!((a.status, a.code()), (StatusCode::NOT_FOUND, "not-found"));
    app.state.sync().shutdown().await;

    // Without the demo, its routes are not served.
    let dir = common::TempDir::new("http-api");
    let mut config = common::config(&dir);
    config.demo = false;
    let app = App::with_config(config, dir).await;
    for route in ROUTES.iter().filter(|r| r.demo_only) {
        let a = app.call(method(route.method), route.path, None, None).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{route:?}: {a:?}");
    }
    app.state.sync().shutdown().await;
}

#[test]
fn the_readme_links_the_reference_and_nothing_outside_the_repository() {
    let root = repo();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.contains("](docs/http-api.md)"));
    assert!(
        !readme.contains("../"),
        "the README names a path outside the repository"
    );
    let canonical_root = root.canonicalize().unwrap();
    for (file, text) in [("README.md", readme), ("docs/http-api.md", doc())] {
        let dir = root.join(file).parent().unwrap().to_path_buf();
        for target in text.split("](").skip(1).filter_map(|t| t.split(')').next()) {
            assert!(
                !target.starts_with("http://") && !target.starts_with("https://"),
                "{file} sends readers outside the repository: {target}"
            );
            let path = target.split('#').next().unwrap();
            if path.is_empty() {
                continue;
            }
            let resolved = dir
                .join(path)
                .canonicalize()
                .unwrap_or_else(|e| panic!("{file} links `{target}`, which does not exist: {e}"));
            assert!(
                resolved.starts_with(&canonical_root),
                "{file} links `{target}`, outside the repository"
            );
        }
    }
}
