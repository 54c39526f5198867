//! The authorization matrix: every route of `/api/v1` and of the inspector, asked by every kind
//! of principal, with the status each must get — and, whenever a request is refused (or only
//! reads), proof that it wrote nothing. A route the server serves without a row here fails the
//! test, by name.
//!
//! The world (`world.rs`) is one workspace, `acme`, seen by: anonymous, `nora` (no member),
//! `bob` (member, no grant), `alice` (workspace admin: created `acme` and profile `main`, so
//! Manage and Share but not Use), `uma`/`mia`/`sam` (members holding exactly Use/Manage/Share on
//! `main`), the installation `owner` (a plain member of `acme`, no grant), the device `laptop`
//! (paired to `main`, approved by `uma`), `old-laptop` (revoked) and `desktop` (a device of the
//! other workspace, `globex`).
//!
//! Rows run in order; within a row, refusals and reads come first, then the requests expected
//! to write. Rows whose successes use something up (revocations, removals, erasure, sign-out)
//! come last and name spare objects, so that earlier rows still find theirs.
//!
//! Before the matrix, every workspace route that names an object is asked in `globex`, where
//! the owner is admin and holds Use, with the id of an `acme` object: each must answer 404 and
//! write nothing.
//!
//! Path parameters are filled from the world (`{ws}` is `acme`, `{call}` a settled call of
//! `uma`'s, …); `{name=other}` fills `{name}` with the world's `other` instead. In bodies,
//! `{me}` is the asking principal's name and `{uuid}` a fresh UUID.

pub(crate) mod principal;
mod routes;
mod snapshot;
mod world;

use crate::harness::*;
use principal::{Principal, Who, form_body, http, sign_in, sign_in_form};
use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONNECTION, CONTENT_TYPE, COOKIE, LOCATION, UPGRADE};
use serde_json::Value;
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Instant;

/// What a request carries.
#[derive(Clone)]
enum Body {
    None,
    Json(Value),
    Form(Vec<(&'static str, &'static str)>),
}

/// One route and what each principal gets, in [`Principal::ALL`] order.
struct Row {
    method: &'static str,
    /// The path as the router spells it, with `{name=other}` where a row fills a parameter from
    /// another of the world's values.
    path: &'static str,
    body: Body,
    expect: [u16; 11],
}

impl Row {
    /// `METHOD /path` as the source routes it.
    fn route(&self) -> String {
        let mut path = String::new();
        let mut rest = self.path;
        while let Some(open) = rest.find('{') {
            let close = open + rest[open..].find('}').unwrap();
            let name = &rest[open + 1..close];
            path.push_str(&rest[..open]);
            write!(path, "{{{}}}", name.split('=').next().unwrap()).unwrap();
            rest = &rest[close + 1..];
        }
        format!("{} {path}{rest}", self.method)
    }

    fn is_web(&self) -> bool {
        !(self.path.starts_with("/api/")
            || self.path.starts_with("/mcp")
            || self.path == "/healthz"
            || self.path == "/readyz")
    }
}

macro_rules! body {
    () => { Body::None };
    (json $($b:tt)*) => { Body::Json(serde_json::json!($($b)*)) };
    (form $($k:literal = $v:literal),*) => { Body::Form(vec![$(($k, $v)),*]) };
}

/// `METHOD "path" [json(…) | form(k = v, …)] => eleven statuses;`
macro_rules! matrix {
    ($($method:ident $path:literal $($kind:ident ($($body:tt)*))? => $($s:literal)+ ;)*) => {
        vec![$(Row {
            method: stringify!($method),
            path: $path,
            body: body!($($kind $($body)*)?),
            expect: [$($s),+],
        }),*]
    };
}

/// The specification. Columns: anonymous, non-member, member, workspace admin, Use-only,
/// Manage-only, Share-only, installation owner, device, revoked device, device of another
/// workspace.
fn matrix() -> Vec<Row> {
    matrix! {
    //                                                                  anon non  mem  adm  use  mng  shr  own  dev  rdev odev
    // Health: anyone.
    GET  "/healthz"                                                  => 200  200  200  200  200  200  200  200  200  200  200;
    GET  "/readyz"                                                   => 200  200  200  200  200  200  200  200  200  200  200;
    // The browser's way back from an OAuth consent: no authentication, the flow's state is the
    // capability (none here); and the server's OAuth client metadata document.
    GET  "/mcp/callback"                                             => 400  400  400  400  400  400  400  400  400  400  400;
    GET  "/mcp/oauth-client.json"                                    => 200  200  200  200  200  200  200  200  200  200  200;
    // Users and their own tokens: any user, never a device.
    GET  "/api/v1/me"                                                => 401  200  200  200  200  200  200  200  401  401  401;
    GET  "/api/v1/tokens"                                            => 401  200  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/tokens" json({"name": "t-{me}"})                   => 401  201  201  201  201  201  201  201  401  401  401;
    // `/mcp`: any user's token (an agent's too); a device credential never. Starting a session
    // writes it.
    POST "/mcp" json({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "matrix", "version": "1"}}})
                                                                     => 401  200  200  200  200  200  200  200  401  401  401;
    // Workspaces, members, environments.
    GET  "/api/v1/workspaces"                                        => 401  200  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces" json({"name": "ws-{me}"})              => 401  201  201  201  201  201  201  201  401  401  401;
    GET  "/api/v1/workspaces/{ws}"                                   => 401  404  200  200  200  200  200  200  401  401  401;
    GET  "/api/v1/workspaces/{ws}/members"                           => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/members" json({"user": "newcomer"}) => 401  404  403  201  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/environments"                      => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/environments" json({"name": "env-{me}"}) => 401  404  403  201  403  403  403  403  401  401  401;
    // The audit log: workspace admins and installation owners.
    GET  "/api/v1/workspaces/{ws}/audit"                             => 401  404  403  200  403  403  403  200  401  401  401;
    GET  "/api/v1/workspaces/{ws}/audit/export"                      => 401  404  403  200  403  403  403  200  401  401  401;
    GET  "/api/v1/workspaces/{ws}/audit/verify"                      => 401  404  403  200  403  403  403  200  401  401  401;
    // The installation's own log (connectors, changes outside any workspace): owners only.
    GET  "/api/v1/audit"                                             => 401  403  403  403  403  403  403  200  401  401  401;
    GET  "/api/v1/audit/export"                                      => 401  403  403  403  403  403  403  200  401  401  401;
    GET  "/api/v1/audit/verify"                                      => 401  403  403  403  403  403  403  200  401  401  401;
    // Connectors: installation-wide; the owner manages them.
    GET  "/api/v1/connectors"                                        => 401  200  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/connectors" json({"name": "new-{me}", "transport": "stdio", "command": "/bin/true", "args": []})
                                                                     => 401  403  403  403  403  403  403  201  401  401  401;
    POST "/api/v1/connectors/import" json({"mcpServers": {"imported-api": {"command": "/bin/true", "args": []}}})
                                                                     => 401  403  403  403  403  403  403  201  401  401  401;
    GET  "/api/v1/connectors/{connector}"                            => 401  200  200  200  200  200  200  200  401  401  401;
    PATCH "/api/v1/connectors/{connector}" json({"transport": "stdio", "command": "{fixture_bin}", "args": ["stdio"], "env": []})
                                                                     => 401  403  403  403  403  403  403  200  401  401  401;
    POST "/api/v1/connectors/{connector}/approve" json({})           => 401  403  403  403  403  403  403  200  401  401  401;
    // Connections and tools.
    GET  "/api/v1/workspaces/{ws}/connections"                       => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/connections" json({"name": "conn-{me}", "connector": "fixture-conn"})
                                                                     => 401  404  403  201  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/connections/{connection}"          => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/connections/{connection}/discover" json({})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    // Diagnosing takes what discovery takes: a workspace admin.
    POST "/api/v1/workspaces/{ws}/connections/{connection}/diagnose" json({"timeout_ms": 20000})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/connections/{connection}/tools"    => 401  404  200  200  200  200  200  200  401  401  401;
    // Classifying takes the manage-integrations right: workspace admins and the owner.
    PUT  "/api/v1/workspaces/{ws}/connections/{connection}/tools/{tool}/classification" json({"side_effect": true, "risk": "low"})
                                                                     => 401  404  403  200  403  403  403  200  401  401  401;
    // Credential statuses (references and presence, never a value): workspace admins.
    GET  "/api/v1/workspaces/{ws}/connections/{connection}/credentials"
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    // Credential values: workspace admins, and only on a server with an installation key (the
    // matrix's server has none, so an admin is told so).
    PUT  "/api/v1/workspaces/{ws}/connections/{connection}/credentials/{name=credential_name}" json({"value": "matrix-value"})
                                                                     => 401  404  403  409  403  403  403  403  401  401  401;
    // Revoking every value of a connection: workspace admins.
    POST "/api/v1/workspaces/{ws}/connections/{connection}/credentials/revoke" json({})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    // Auth settings and authorizing: workspace admins (the matrix's server holds no
    // installation key, so an admin is told so).
    PUT  "/api/v1/workspaces/{ws}/connections/{connection}/auth" json({"kind": "token"})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/connections/{connection}/authorize" json({})
                                                                     => 401  404  403  409  403  403  403  403  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/connections/{connection}/prefix-tools" json({"prefix_tools": true})
                                                                     => 401  404  403  200  403  403  403  200  401  401  401;
    // Whether a declarative file owns the connection: workspace admins.
    PUT  "/api/v1/workspaces/{ws}/connections/{connection}/declared" json({"declared": false})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/connections/{connection}/events"   => 401  404  200  200  200  200  200  200  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/connections/{connection}/receipt-policy" json({"tool": "echo", "arguments": {"text": "{{request_id}}"}})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/connections/{connection}/receipt-policy" => 401  404  200  200  200  200  200  200  401  401  401;
    // Profiles and grants.
    GET  "/api/v1/workspaces/{ws}/profiles"                          => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/profiles" json({"name": "p-{me}", "connections": ["fixture"]})
                                                                     => 401  404  403  201  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/profiles/{profile}"                => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/profiles/{profile}/grants" json({"user": "victim", "use": true})
                                                                     => 401  404  403  200  403  403  200  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/profiles/{profile}/grants/revoke" json({"user": "victim", "use": true})
                                                                     => 401  404  403  200  403  403  200  403  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/profiles/{profile}/connections/{connection}/tools" json({"tools": null})
                                                                     => 401  404  403  200  403  200  403  403  401  401  401;
    // Agents: members see them; workspace admins create and configure them.
    GET  "/api/v1/workspaces/{ws}/agents"                            => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/agents" json({"name": "a-{me}"})   => 401  404  403  201  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/agents/{agent}"                    => 401  404  200  200  200  200  200  200  401  401  401;
    GET  "/api/v1/workspaces/{ws}/agents/{agent}/tools"              => 401  404  200  200  200  200  200  200  401  401  401;
    PATCH "/api/v1/workspaces/{ws}/agents/{agent}" json({"defer_all": true})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/agents/{agent}/connections/{connection}" json({"read_only": true})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    // Approvals: people only. `{call}` asked no question, so every member finds none.
    GET  "/api/v1/workspaces/{ws}/approvals"                         => 401  404  200  200  200  200  200  200  401  401  401;
    GET  "/api/v1/workspaces/{ws}/approvals/{call}"                  => 401  404  404  404  404  404  404  404  401  401  401;
    POST "/api/v1/workspaces/{ws}/approvals/{call}/approve" json({}) => 401  404  404  404  404  404  404  404  401  401  401;
    POST "/api/v1/workspaces/{ws}/approvals/{call}/decline" json({"reason": "no"})
                                                                     => 401  404  404  404  404  404  404  404  401  401  401;
    GET  "/api/v1/workspaces/{ws}/profiles/{profile}/approval-policy" => 401  404  200  200  200  200  200  200  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/profiles/{profile}/approval-policy" json({"policy": "default"})
                                                                     => 401  404  403  200  403  200  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/approval-timeout"                  => 401  404  200  200  200  200  200  200  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/approval-timeout" json({"seconds": null})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    // Calls, sessions, operations.
    GET  "/api/v1/workspaces/{ws}/calls"                             => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/calls" json({"request_id": "{uuid}", "profile_id": "main", "connection_id": "fixture", "tool_name": "echo", "arguments": {"text": "x"}, "operation_id": "{operation}"})
                                                                     => 401  404  403  403  201  403  403  403  201  401  404;
    GET  "/api/v1/workspaces/{ws}/calls/{call}"                      => 401  404  403  403  200  403  403  403  404  401  404;
    POST "/api/v1/workspaces/{ws}/calls/{call}/cancel" json({})      => 401  404  403  403  200  403  403  403  401  401  401;
    // Reconcile and resolve are for unknown calls: Use holders get 409 for a settled one.
    POST "/api/v1/workspaces/{ws}/calls/{call}/reconcile" json({"request_id": "{uuid}"})
                                                                     => 401  404  403  403  409  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/calls/{call}/resolve" json({"request_id": "{uuid}", "outcome": "not_applied", "source_version_id": "{evidence}", "explanation": "the matrix"})
                                                                     => 401  404  403  403  409  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/sessions/{session}/release" json({"connection_id": "fixture"})
                                                                     => 401  404  403  403  200  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/operations" json({"environment": "default", "profile": "main", "task": "task of {me}"})
                                                                     => 401  404  403  403  201  403  403  403  201  401  404;
    // Evidence and capture.
    GET  "/api/v1/workspaces/{ws}/capture-policy"                    => 401  404  200  200  200  200  200  200  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/capture-policy" json({"capture_managed_tool_results": false})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/evidence/{evidence}"               => 401  404  403  403  200  403  403  403  401  401  401;
    GET  "/api/v1/workspaces/{ws}/connections/{connection}/capture-exclusions" => 401  404  200  200  200  200  200  200  401  401  401;
    PUT  "/api/v1/workspaces/{ws}/connections/{connection}/capture-exclusions" json({"exclusions": []})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    // Pairing (no authentication: the poll secret proves the device) and devices.
    POST "/api/v1/pairing" json({"device_name": "dev-{me}"})         => 201  201  201  201  201  201  201  201  201  201  201;
    POST "/api/v1/pairing/{pairing}/poll" json({"poll_secret": "{poll_secret}"})
                                                                     => 200  200  200  200  200  200  200  200  200  200  200;
    GET  "/api/v1/workspaces/{ws}/devices"                           => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/devices/approve" json({"code": "{code}", "profile": "main"})
                                                                     => 401  404  403  403  201  403  403  403  401  401  401;
    // The runner API: devices only, each its own.
    POST "/api/v1/runner/lease/acquire" json({"holder": "{holder}"}) => 401  401  401  401  401  401  401  401  200  401  200;
    POST "/api/v1/runner/heartbeat" json({"epoch": "{epoch}", "active": []})
                                                                     => 401  401  401  401  401  401  401  401  200  401  200;
    POST "/api/v1/runner/lease" json({"epoch": "{epoch}", "max": 1, "wait_ms": 0})
                                                                     => 401  401  401  401  401  401  401  401  200  401  200;
    // The upgrade refuses only what is not shaped like a device credential; every request on
    // the channel then checks it (a revoked device's first one answers `device_revoked`).
    GET  "/api/v1/runner/channel"                                    => 401  401  401  401  401  401  401  401  101  101  101;
    // A central call: a device's start is told to abandon it, its completion finds no such call.
    POST "/api/v1/runner/calls/{call}/start" json({"epoch": "{epoch}"}) => 401  401  401  401  401  401  401  401  200  401  200;
    POST "/api/v1/runner/calls/{call}/complete" json({"receipt_id": "{uuid}", "epoch": "{epoch}", "completion": {"outcome": "succeeded", "result": {"content": []}}})
                                                                     => 401  401  401  401  401  401  401  401  404  401  404;
    POST "/api/v1/runner/receipts/check" json({"receipts": []})      => 401  401  401  401  401  401  401  401  200  401  200;
    POST "/api/v1/runner/starts/check" json({"starts": []})          => 401  401  401  401  401  401  401  401  200  401  200;
    POST "/api/v1/runner/events" json({"kind": "session_closed", "connection_id": "{local}", "client_session_id": null, "reason": "idle"})
                                                                     => 401  401  401  401  401  401  401  401  204  401  404;
    POST "/api/v1/runner/auth-state" json({"connection_id": "{local}", "state": "authorized"})
                                                                     => 401  401  401  401  401  401  401  401  204  401  404;
    POST "/api/v1/runner/lease/release" json({"epoch": "{epoch}"})   => 401  401  401  401  401  401  401  401  204  401  204;
    // What uses something up, last: each names a spare.
    POST "/api/v1/workspaces/{ws}/calls/{call=spare_call}/erase" json({})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/devices/{device}/revoke" json({})  => 401  404  403  200  200  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/agents/{agent=spare_agent}/revoke" json({})
                                                                     => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/members/{user}/remove" json({})    => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/api/v1/tokens/{token}/revoke" json({})                    => 401  404  200  404  404  404  404  404  401  401  401;

    // The inspector: users with a session; devices (their credential as a bearer) and anonymous
    // requests are signed out. Pages send the signed-out to the sign-in form (303).
    GET  "/"                                                         => 303  303  303  303  303  303  303  303  303  303  303;
    GET  "/sign-in"                                                  => 200  200  200  200  200  200  200  200  200  200  200;
    GET  "/static/{file}"                                            => 200  200  200  200  200  200  200  200  200  200  200;
    GET  "/workspaces"                                               => 303  200  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}"                                          => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}/connections/{connection}"                 => 303  404  200  200  200  200  200  200  303  303  303;
    POST "/workspaces/{ws}/connections/{connection}/discover" form() => 401  404  403  303  403  403  403  403  401  401  401;
    POST "/workspaces/{ws}/connections/{connection}/diagnose" form() => 401  404  403  200  403  403  403  403  401  401  401;
    // The inspector's masked credential form: as the API's PUT (the matrix's server is not a
    // development one, so an admin is told so).
    POST "/workspaces/{ws}/connections/{connection}/credentials/{name=credential_name}" form("value" = "matrix-value")
                                                                     => 401  404  403  409  403  403  403  403  401  401  401;
    // Classifying from the connection page: the manage-integrations right, as in the API.
    POST "/workspaces/{ws}/connections/{connection}/tools/{tool}/classify" form("effect" = "side-effecting", "risk" = "low")
                                                                     => 401  404  403  303  403  403  403  303  401  401  401;
    // The Approvals page and its stream: any member. `{call}` asked no question, so every
    // member finds none to answer.
    GET  "/workspaces/{ws}/approvals"                                => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}/approvals/events"                         => 303  404  200  200  200  200  200  200  303  303  303;
    POST "/workspaces/{ws}/approvals/{call}/approve" form()          => 401  404  404  404  404  404  404  404  401  401  401;
    POST "/workspaces/{ws}/approvals/{call}/decline" form("reason" = "no")
                                                                     => 401  404  404  404  404  404  404  404  401  401  401;
    GET  "/workspaces/{ws}/profiles"                                 => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}/profiles/{profile}"                       => 303  404  200  200  200  200  200  200  303  303  303;
    // Revoking takes Share or the workspace admin's role (victim, removed by now, holds none).
    POST "/workspaces/{ws}/profiles/{profile}/grants/revoke" form("user" = "victim", "grant" = "use")
                                                                     => 401  404  403  303  403  403  303  403  401  401  401;
    GET  "/workspaces/{ws}/members"                                  => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/tokens"                                                   => 303  200  200  200  200  200  200  200  303  303  303;
    // Any member sees a profile's tools and their forms (as `…/connections/{connection}/tools`
    // in the API); running one takes Use.
    GET  "/workspaces/{ws}/profiles/{profile}/connections/{connection}/tools" => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}/profiles/{profile}/connections/{connection}/tools/{tool}/run"
                                                                     => 303  404  200  200  200  200  200  200  303  303  303;
    POST "/workspaces/{ws}/profiles/{profile}/connections/{connection}/tools/{tool}/run" form("mode" = "raw", "raw" = r#"{"text": "web"}"#, "timeout" = "30", "session" = "web-matrix", "request_id" = "{uuid}", "environment_id" = "{environment}")
                                                                     => 401  404  403  403  303  403  403  403  401  401  401;
    GET  "/workspaces/{ws}/calls"                                    => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}/calls/{call}"                             => 303  404  403  403  200  403  403  403  303  303  303;
    GET  "/workspaces/{ws}/calls/{call}/events"                      => 303  404  403  403  200  403  403  403  303  303  303;
    POST "/workspaces/{ws}/calls/{call}/cancel" form()               => 401  404  403  403  303  403  403  403  401  401  401;
    POST "/workspaces/{ws}/calls/{call}/release" form()              => 401  404  403  403  303  403  403  403  401  401  401;
    // Settling from the inspector, as the API: `{call}` is settled, so Use holders get 409.
    POST "/workspaces/{ws}/calls/{call}/reconcile" form("request_id" = "{uuid}")
                                                                     => 401  404  403  403  409  403  403  403  401  401  401;
    POST "/workspaces/{ws}/calls/{call}/resolve" form("request_id" = "{uuid}", "evidence_id" = "{evidence}", "outcome" = "not_applied", "explanation" = "the matrix")
                                                                     => 401  404  403  403  409  403  403  403  401  401  401;
    GET  "/workspaces/{ws}/calls/{call}/evidence"                    => 303  404  403  403  200  403  403  403  303  303  303;
    // The audit page: workspace admins and installation owners, as the API.
    GET  "/workspaces/{ws}/audit"                                    => 303  404  403  200  403  403  403  200  303  303  303;
    // Agents and the tool list each sees: any member, as the API.
    GET  "/workspaces/{ws}/agents"                                   => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}/agents/{agent}"                           => 303  404  200  200  200  200  200  200  303  303  303;
    GET  "/workspaces/{ws}/devices"                                  => 303  404  200  200  200  200  200  200  303  303  303;
    POST "/workspaces/{ws}/devices/approve" form("code" = "{web_code}", "profile" = "main")
                                                                     => 401  404  403  403  303  403  403  403  401  401  401;
    POST "/workspaces/{ws}/devices/{device=web_device}/revoke" form() => 401  404  403  303  303  403  403  403  401  401  401;
    GET  "/connectors"                                               => 303  200  200  200  200  200  200  200  303  303  303;
    POST "/connectors" form("name" = "web-{me}", "transport" = "stdio", "command" = "/bin/true", "args" = "", "env" = "", "url" = "")
                                                                     => 401  403  403  403  403  403  403  303  401  401  401;
    POST "/connectors/import" form("format" = "json", "document" = r#"{"mcpServers": {"imported-web": {"command": "/bin/true"}}}"#)
                                                                     => 401  403  403  403  403  403  403  200  401  401  401;
    GET  "/connectors/{connector}"                                   => 303  200  200  200  200  200  200  200  303  303  303;
    POST "/connectors/{connector}/approve" form()                    => 401  403  403  403  403  403  403  303  401  401  401;
    // Inspecting looks at an HTTP connector's server: the owner is told a stdio one has none.
    POST "/connectors/{connector}/inspect" form()                    => 401  403  403  403  403  403  403  400  401  401  401;
    // Placements: only the device's owner (uma, Use-only) decides; others' lists are empty.
    GET  "/api/v1/workspaces/{ws}/devices/placements"                => 401  404  200  200  200  200  200  200  401  401  401;
    POST "/api/v1/workspaces/{ws}/devices/{device=device_id}/placements/{connection=local}/accept" json({"spec_digest": "{local_digest}"})
                                                                     => 401  404  403  403  200  403  403  403  401  401  401;
    POST "/workspaces/{ws}/devices/{device=device_id}/placements/{connection=local}/accept" form("spec_digest" = "{local_digest}")
                                                                     => 401  404  403  403  303  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/devices/{device=device_id}/placements/{connection=local}/decline" json({})
                                                                     => 401  404  403  403  200  403  403  403  401  401  401;
    POST "/workspaces/{ws}/devices/{device=device_id}/placements/{connection=local}/decline" form()
                                                                     => 401  404  403  403  303  403  403  403  401  401  401;
    // Retirement, late: a retired object runs nothing, and restoring leaves the connection's
    // tools ungranted. Each is retired, then restored (both idempotent).
    POST "/api/v1/workspaces/{ws}/profiles/{profile}/retire" json({})    => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/profiles/{profile}/restore" json({})   => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/workspaces/{ws}/profiles/{profile}/retire" form()             => 401  404  403  303  403  403  403  403  401  401  401;
    POST "/workspaces/{ws}/profiles/{profile}/restore" form()            => 401  404  403  303  403  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/connections/{connection}/retire" json({})  => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/api/v1/workspaces/{ws}/connections/{connection}/restore" json({}) => 401  404  403  200  403  403  403  403  401  401  401;
    POST "/workspaces/{ws}/connections/{connection}/retire" form()       => 401  404  403  303  403  403  403  403  401  401  401;
    POST "/workspaces/{ws}/connections/{connection}/restore" form()      => 401  404  403  303  403  403  403  403  401  401  401;
    POST "/api/v1/connectors/{connector}/retire" json({})                => 401  403  403  403  403  403  403  200  401  401  401;
    POST "/api/v1/connectors/{connector}/restore" json({})               => 401  403  403  403  403  403  403  200  401  401  401;
    POST "/connectors/{connector}/retire" form()                         => 401  403  403  403  403  403  403  303  401  401  401;
    POST "/connectors/{connector}/restore" form()                        => 401  403  403  403  403  403  403  303  401  401  401;
    // Removal and revocation from the inspector use up spares: a member, a token of bob's.
    POST "/workspaces/{ws}/members/{user=web_member}/remove" form()      => 401  404  403  303  403  403  403  403  401  401  401;
    POST "/tokens/{token=web_token}/revoke" form()                       => 401  404  303  404  404  404  404  404  401  401  401;
    POST "/sign-in" form()                                           => 401  303  303  303  303  303  303  303  401  401  401;
    // Last: it ends the sessions.
    POST "/sign-out" form()                                          => 401  303  303  303  303  303  303  303  401  401  401;
    }
}

/// The matrix's request for one principal.
async fn send(
    http: &reqwest::Client,
    base: &str,
    world: &world::World,
    row: &Row,
    who: &Who,
) -> (u16, String) {
    let fill = |text: &str| world.fill(text, &who.name);
    let method = Method::from_bytes(row.method.as_bytes()).unwrap();
    let mut request = http.request(method, format!("{base}{}", world.fill_path(row.path)));
    let session = who.web.as_ref().filter(|_| row.is_web());
    if let Some(session) = session {
        request = request.header(COOKIE, format!("switchyard_session={}", session.cookie));
    } else if let Some(bearer) = &who.bearer {
        request = request.header(AUTHORIZATION, format!("Bearer {bearer}"));
    }
    if row.path == "/mcp" {
        request = request.header(ACCEPT, "application/json, text/event-stream");
    }
    if row.path.ends_with("/runner/channel") {
        request = request
            .header(CONNECTION, "Upgrade")
            .header(UPGRADE, "switchyard-runner-channel/1");
    }
    match &row.body {
        Body::None => {}
        Body::Json(body) => request = request.json(&world.fill_json(body, &who.name)),
        Body::Form(fields) => {
            let mut fields: Vec<(String, String)> = fields
                .iter()
                .map(|(k, v)| (k.to_string(), fill(v)))
                .collect();
            if row.path == "/sign-in" {
                // The form as the sign-in page hands it out, with the principal's own secret.
                let (cookie, csrf) = sign_in_form(http, base).await;
                request = request.header(COOKIE, format!("switchyard_signin={cookie}"));
                let token = who.bearer.clone().unwrap_or_else(|| "sy_none".into());
                fields.push(("token".into(), token));
                fields.push(("csrf".into(), csrf));
            } else {
                let csrf = session.map_or("no-session".into(), |s| s.csrf.clone());
                fields.push(("csrf".into(), csrf));
            }
            let fields: Vec<(&str, &str)> = fields
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            request = request
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form_body(&fields));
        }
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(LOCATION)
        .map(|l| l.to_str().unwrap().to_owned());
    let streams = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    let detail = if let Some(location) = location {
        format!("-> {location}")
    } else if status == 101 || streams {
        String::new()
    } else {
        let text = response.text().await.unwrap_or_default();
        serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    (status, detail)
}

/// Whether a request must leave the database as it was: every refusal, every read, and every
/// inspector request of a principal with no session.
fn writes_nothing(row: &Row, who: &Who, status: u16) -> bool {
    status >= 400 || row.method == "GET" || (row.is_web() && who.web.is_none())
}

/// The parameters naming one workspace's objects, and the world's values (by id) that name
/// `acme`'s.
const OBJECTS: [(&str, &str); 9] = [
    ("connection", "connection_id"),
    ("agent", "agent_id"),
    ("agent=spare_agent", "agent_id"),
    ("profile", "profile_id"),
    ("call", "call"),
    ("device", "device_id"),
    ("evidence", "evidence"),
    ("call=spare_call", "spare_call"),
    ("device=web_device", "web_device"),
];

/// Every workspace route that names an object, asked in `globex` — where the owner is admin
/// and holds Use on `main` — with the id of an `acme` object: each must look unknown (404)
/// and write nothing. Returns what did not.
async fn foreign_objects(
    http: &reqwest::Client,
    base: &str,
    pool: &PgPool,
    fingerprint: &str,
    world: &world::World,
    rows: &[Row],
) -> String {
    let owner = &world.who[Principal::Owner.index()];
    let mut wrong = String::new();
    for row in rows.iter().filter(|r| r.path.contains("/workspaces/{ws}/")) {
        for (param, key) in OBJECTS {
            let param = format!("{{{param}}}");
            if !row.path.contains(&param) {
                continue;
            }
            let path = row
                .path
                .replace("{ws}", "globex")
                .replace(&param, &world.params[key]);
            let foreign = Row {
                method: row.method,
                path: Box::leak(path.into_boxed_str()),
                body: row.body.clone(),
                expect: row.expect,
            };
            let before = snapshot::take(pool, fingerprint).await;
            let (status, detail) = send(http, base, world, &foreign, owner).await;
            let changed = snapshot::changed(&before, &snapshot::take(pool, fingerprint).await);
            if status != 404 || !changed.is_empty() {
                writeln!(
                    wrong,
                    "{} with acme's {param} in globex: expected 404 writing nothing, got {status} {detail}, wrote {changed:?}",
                    row.route()
                )
                .unwrap();
            }
        }
    }
    wrong
}

#[sqlx::test(migrations = "../../migrations")]
async fn every_route_answers_every_principal_as_the_matrix_says(pool: PgPool) {
    let rows = matrix();

    // A route without a row (or a row without a route) fails first, by name.
    let served = routes::served();
    let specified: BTreeSet<String> = rows.iter().map(Row::route).collect();
    let missing: Vec<_> = served.difference(&specified).collect();
    let stale: Vec<_> = specified.difference(&served).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "the matrix in tests/it/authz/mod.rs must have one row per route\n\
         routes without a row (add one): {missing:#?}\nrows without a route (remove): {stale:#?}"
    );
    assert_eq!(specified.len(), rows.len(), "one row per route");

    let started = Instant::now();
    // The sweeper writes calls to the audit log in the background, which would look like a
    // refused request's write: it writes none while the matrix runs.
    let server = TestServer::start_with(pool.clone(), |config| {
        config.sweeper.audit_lag = std::time::Duration::from_secs(24 * 3600);
    })
    .await;
    let mut world = world::build(&server).await;
    for who in &mut world.who {
        let session = sign_in(&server, who.bearer.as_deref().unwrap_or("sy_none")).await;
        assert_eq!(
            session.is_some(),
            who.is_user,
            "{}: only users sign in to the inspector",
            who.name
        );
        who.web = session;
    }
    // Calls the matrix submits stay queued: nothing runs behind its back.
    hold_central_runner(&pool).await;
    let fingerprint = snapshot::query(&pool).await;

    let http = http();
    let base = format!("http://{}", server.addr);
    let mut wrong = foreign_objects(&http, &base, &pool, &fingerprint, &world, &rows).await;
    let mut before = snapshot::take(&pool, &fingerprint).await;
    let mut actual = String::new();
    for row in &rows {
        let mut got = [0u16; 11];
        let mut details: Vec<String> = vec![String::new(); 11];
        let (reads, writes): (Vec<Principal>, Vec<Principal>) =
            Principal::ALL.into_iter().partition(|p| {
                let who = &world.who[p.index()];
                writes_nothing(row, who, row.expect[p.index()])
            });
        for principal in reads.into_iter().chain(writes) {
            let i = principal.index();
            let who = &world.who[i];
            let (status, detail) = send(&http, &base, &world, row, who).await;
            got[i] = status;
            details[i] = detail;
            let after = snapshot::take(&pool, &fingerprint).await;
            let changed = snapshot::changed(&before, &after);
            if writes_nothing(row, who, status) && !changed.is_empty() {
                writeln!(
                    wrong,
                    "{} as {principal:?} ({}): answered {status} but wrote {changed:?}",
                    row.route(),
                    who.name
                )
                .unwrap();
            }
            before = after;
        }
        let cells: String = got.iter().map(|s| format!("  {s}")).collect();
        writeln!(
            actual,
            "{:4} {:60} =>{cells};",
            row.method,
            format!("\"{}\"", row.path)
        )
        .unwrap();
        if got != row.expect {
            writeln!(wrong, "{}:", row.route()).unwrap();
            for p in Principal::ALL {
                let i = p.index();
                if got[i] != row.expect[i] {
                    writeln!(
                        wrong,
                        "    {p:?}: expected {}, got {} {}",
                        row.expect[i], got[i], details[i]
                    )
                    .unwrap();
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the server does not answer as the matrix says:\n{wrong}\nwhat it answered:\n{actual}"
    );
    eprintln!("the matrix ran in {:?}", started.elapsed());
}
