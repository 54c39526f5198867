//! The routes the server serves, read from its source: every `.route("…", get(…).post(…))` in
//! `src/http/*.rs` (under `/api/v1`, but for the health checks) and `src/web/*.rs`, and the
//! `.route_service("…"` of `src/mcp/mod.rs` (as POST). The router cannot list its routes, so
//! this is how a route added without a row in the matrix is caught.

use std::collections::BTreeSet;
use std::path::Path;

/// Routes of `src/http/` served outside `/api/v1` (the outer router in `http/mod.rs`, and the
/// OAuth browser routes beside `/mcp`).
const UNNESTED: [&str; 4] = [
    "/healthz",
    "/readyz",
    "/mcp/callback",
    "/mcp/oauth-client.json",
];

/// Method routers axum offers (`axum::routing::{get, post, …}`).
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// Every `METHOD /path` the server's source routes.
pub fn served() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut routes = BTreeSet::new();
    for (dir, prefix) in [("http", "/api/v1"), ("web", "")] {
        let mut files: Vec<_> = std::fs::read_dir(src.join(dir))
            .unwrap_or_else(|e| panic!("reading src/{dir}: {e}"))
            .map(|entry| entry.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (path, methods) in route_calls(&text) {
                let prefix = if UNNESTED.contains(&path.as_str()) {
                    ""
                } else {
                    prefix
                };
                assert!(
                    !methods.is_empty(),
                    "{}: no method found for route {path}",
                    file.display()
                );
                for method in methods {
                    routes.insert(format!("{} {prefix}{path}", method.to_uppercase()));
                }
            }
        }
    }
    // `/mcp` is rmcp's service: every JSON-RPC request is a POST (GET and DELETE act only on a
    // session a POST started).
    let mcp = std::fs::read_to_string(src.join("mcp/mod.rs")).expect("reading src/mcp/mod.rs");
    for path in mcp.split(".route_service(\"").skip(1) {
        let path = path.split('"').next().unwrap_or_default();
        routes.insert(format!("POST {path}"));
    }
    routes
}

/// The path and method names of each `.route(` call in `text`.
fn route_calls(text: &str) -> Vec<(String, Vec<&'static str>)> {
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(".route(") {
        let args = &rest[at + ".route(".len()..];
        let end = closing_paren(args);
        let inside = &args[..end];
        let path = inside
            .split('"')
            .nth(1)
            .unwrap_or_else(|| panic!("a .route( without a path: {inside}"));
        calls.push((path.to_owned(), methods_in(&inside[path.len() + 2..])));
        rest = &args[end..];
    }
    calls
}

/// Where the parenthesis opened just before `text` closes.
fn closing_paren(text: &str) -> usize {
    let mut depth = 1;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced .route( call: {text}")
}

/// The method routers called in a route's handler expression: `get(` and `.post(`, not
/// `sign_in::get(` or `forget(`.
fn methods_in(handlers: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    for (i, _) in handlers.char_indices() {
        let before = handlers[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        for method in METHODS {
            if handlers[i..].starts_with(method) && handlers[i + method.len()..].starts_with('(') {
                found.push(method);
            }
        }
    }
    found
}

#[test]
fn route_calls_are_read_with_every_method() {
    let text = r#"Router::new()
        .route("/a", get(sign_in::form).post(sign_in::submit))
        .route(
            "/b/{x}",
            put(set).get(reconcile::get_it).patch(forget),
        )
        .merge(other())"#;
    assert_eq!(
        route_calls(text),
        [
            ("/a".to_owned(), vec!["get", "post"]),
            ("/b/{x}".to_owned(), vec!["put", "get", "patch"]),
        ]
    );
}
