//! A central connection's credentials on its page: each destination with where its value
//! resolves and whether it is there (`App::connection_credential_list`), and — on a server
//! with an installation key (`--installation-key-file`) — a masked form per destination that
//! sets a value (`App::connection_credential_set`). No page, answer or error shows a value.

use super::WebState;
use super::error::{WebError, WebResult};
use super::page::encode_segment;
use super::session::{CsrfForm, Protected};
use crate::app::Actor;
use crate::error::AppError;
use axum::extract::{Path, State};
use axum::response::Redirect;
use switchyard_protocol::api::{CredentialProvider, CredentialReference, SetCredentialValue};
use switchyard_protocol::credential_status::{CredentialStatusView, CredentialValueState};

/// The Credentials section of a central connection's page.
pub(super) struct CredentialsSection {
    /// One line per destination.
    pub lines: Vec<CredentialLine>,
    /// Whether the masked forms are shown (the server has an installation key).
    pub settable: bool,
    /// Why the statuses could not be read (the server's bindings file is broken); the rest of
    /// the page is shown all the same.
    pub unreadable: Option<String>,
}

/// One destination as the page shows it.
pub(super) struct CredentialLine {
    /// `env` or `header`.
    pub destination: String,
    /// The variable's or header's name.
    pub name: String,
    /// The URL segment of the name.
    pub path: String,
    /// The provider and its entry, or `-` when unbound.
    pub resolves: String,
    /// `unbound`, `present`, `missing` or `unusable` (with its reason).
    pub state: String,
    /// The badge's tone for the state.
    pub tone: &'static str,
    /// Whether the form offers a prefix (headers).
    pub is_header: bool,
}

impl From<&CredentialStatusView> for CredentialLine {
    fn from(status: &CredentialStatusView) -> Self {
        Self {
            destination: status.destination.clone(),
            name: status.name.clone(),
            path: encode_segment(&status.name),
            resolves: status
                .reference
                .as_ref()
                .map_or_else(|| "-".to_owned(), resolves),
            state: match &status.reason {
                Some(reason) => format!("{} ({reason})", status.state.as_str()),
                None => status.state.as_str().to_owned(),
            },
            tone: match status.state {
                CredentialValueState::Present => "ok",
                CredentialValueState::Missing | CredentialValueState::Unusable => "bad",
                CredentialValueState::Unbound => "muted",
            },
            is_header: status.destination == "header",
        }
    }
}

/// Where a reference resolves, as one line: `environment $VAR`, `os_store ACCOUNT`, `secrets_file KEY`.
fn resolves(reference: &CredentialReference) -> String {
    let entry = match reference.provider {
        CredentialProvider::Environment => reference.name.as_deref().map(|n| format!("${n}")),
        CredentialProvider::OsStore => reference.account.clone(),
        CredentialProvider::SecretsFile => reference.key.clone(),
        CredentialProvider::Installation => None,
    };
    format!(
        "{} {}",
        reference.provider.as_str(),
        entry.unwrap_or_default()
    )
}

/// The section for connection `key` when the viewer is a workspace admin and it runs on the
/// central runner; `None` otherwise (a device's values live on the device).
pub(super) async fn section(
    s: &WebState,
    actor: &Actor,
    ws: &str,
    key: &str,
    central: bool,
    is_admin: bool,
) -> WebResult<Option<CredentialsSection>> {
    if !central || !is_admin {
        return Ok(None);
    }
    Ok(Some(
        match s.app.connection_credential_list(actor, ws, key).await {
            Ok(list) => CredentialsSection {
                lines: list.credentials.iter().map(CredentialLine::from).collect(),
                settable: list.values_settable,
                unreadable: None,
            },
            Err(AppError::Refused { message, .. }) => CredentialsSection {
                lines: Vec::new(),
                settable: false,
                unreadable: Some(message),
            },
            Err(other) => return Err(WebError(other)),
        },
    ))
}

/// The masked form of one destination.
#[derive(serde::Deserialize)]
pub(super) struct CredentialForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    value: String,
    /// Text before the value (headers only); empty means none.
    #[serde(default)]
    prefix: String,
}

impl std::fmt::Debug for CredentialForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialForm")
            .field("value", &"<redacted>")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl CsrfForm for CredentialForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// `POST /workspaces/{ws}/connections/{connection}/credentials/{name}`: sets the value (workspace
/// admins, development servers only), then shows the connection again. A refusal shows the
/// app's message, which never holds the value.
pub(super) async fn set(
    State(s): State<WebState>,
    Path((ws, key, name)): Path<(String, String, String)>,
    protected: Protected<CredentialForm>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let form = protected.form;
    let req = SetCredentialValue {
        value: form.value,
        prefix: Some(form.prefix).filter(|prefix| !prefix.is_empty()),
    };
    s.app
        .connection_credential_set(actor, &ws, &key, &name, req)
        .await?;
    let connection = s.app.connection_get(actor, &ws, &key).await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{}/connections/{}?notice=credential-set#credentials-h",
        encode_segment(&ws),
        encode_segment(&connection.name)
    )))
}
