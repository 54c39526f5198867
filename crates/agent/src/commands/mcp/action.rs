//! A call's action routes, `POST …/calls/{call}/{action}`: the one place that names them,
//! builds their body and prints their answer.

use crate::client::{Body, Client, Reply};
use crate::error::CliError;
use crate::output::Output;
use serde::de::DeserializeOwned;

/// What to ask of a call.
pub enum Action {
    /// `cancel`: stop it.
    Cancel,
    /// `erase`: erase its evidence.
    Erase,
    /// `reconcile`, with the file's JSON: run the connection's receipt lookup.
    Reconcile(Vec<u8>),
    /// `resolve`, with the file's JSON: settle it with an outcome and evidence.
    Resolve(Vec<u8>),
}

impl Action {
    /// The last segment of the route and the body to send.
    fn into_parts(self) -> (&'static str, Body) {
        match self {
            // These routes take an empty JSON object.
            Action::Cancel => ("cancel", Body::empty_object()),
            Action::Erase => ("erase", Body::empty_object()),
            Action::Reconcile(json) => ("reconcile", Body::Json(json)),
            Action::Resolve(json) => ("resolve", Body::Json(json)),
        }
    }
}

/// `POST /api/v1/workspaces/{workspace}/calls/{call}/{action}`.
pub async fn post(
    client: &Client,
    workspace: &str,
    call: &str,
    action: Action,
) -> Result<Reply, CliError> {
    let (route, body) = action.into_parts();
    client
        .post(&["workspaces", workspace, "calls", call, route], body)
        .await
}

/// [`post`], then prints the answer: the server's JSON with `--json`, otherwise `human` of it.
pub async fn post_and_print<T: DeserializeOwned>(
    client: &Client,
    out: Output,
    workspace: &str,
    call: &str,
    action: Action,
    human: impl FnOnce(T) -> String,
) -> Result<(), CliError> {
    let reply = post(client, workspace, call, action).await?;
    out.reply(&reply, human)
}
