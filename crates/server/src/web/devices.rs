//! Devices of a workspace: approve a pairing code (binding the device to a profile the
//! approver holds Use on), list them, revoke one; and, for the owner of a device, the
//! connections placed on it, to accept or decline.

use super::WebState;
use super::error::WebResult;
use super::page::{Chrome, NoticeQuery, html, when};
use super::session::{CsrfForm, CsrfOnly, Protected, SignedIn};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{Html, Redirect};
use std::collections::HashMap;
use switchyard_protocol::api::{
    AcceptPlacement, ApproveDevice, ConnectorSpec, PlacementState, SpecDigest,
};

struct DeviceRow {
    id: String,
    name: String,
    runner: String,
    profile: String,
    approved_by: String,
    paired: String,
    last_seen: String,
    revoked: Option<String>,
}

/// A connection placed on one of the viewer's devices.
struct PlacementRow {
    device_id: String,
    device: String,
    connection: String,
    connector: String,
    /// The command line or URL it would run.
    runs: String,
    digest: String,
    state: &'static str,
    /// Whether it waits for the owner's decision (pending, spec changed, declined).
    waiting: bool,
}

struct ProfileChoice {
    name: String,
    usable: bool,
}

#[derive(Template)]
#[template(path = "devices.html")]
struct DevicesPage {
    chrome: Chrome,
    ws: String,
    devices: Vec<DeviceRow>,
    placements: Vec<PlacementRow>,
    profiles: Vec<ProfileChoice>,
}

/// `GET /workspaces/{ws}/devices`.
pub(super) async fn list(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let profiles = s.app.profile_list(actor, &ws).await?;
    let profile_names: HashMap<String, String> = profiles
        .iter()
        .map(|p| (p.id.to_string(), p.name.clone()))
        .collect();
    let members: HashMap<String, String> = s
        .app
        .member_list(actor, &ws)
        .await?
        .into_iter()
        .map(|m| (m.user_id.to_string(), m.user_name))
        .collect();
    let devices = s.app.device_list(actor, &ws).await?;
    let placements = s.app.placement_list(actor, &ws).await?;
    html(&DevicesPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "devices")
            .with_notice(q.notice.as_deref()),
        ws: workspace.name,
        devices: devices
            .into_iter()
            .map(|d| DeviceRow {
                id: d.id.to_string(),
                profile: profile_names
                    .get(&d.profile_id.to_string())
                    .cloned()
                    .unwrap_or_else(|| d.profile_id.to_string()),
                approved_by: members
                    .get(&d.approved_by.to_string())
                    .cloned()
                    .unwrap_or_else(|| d.approved_by.to_string()),
                paired: when(&d.created_at),
                last_seen: d
                    .last_seen_at
                    .as_ref()
                    .map(when)
                    .unwrap_or_else(|| "never".to_owned()),
                revoked: d.revoked_at.as_ref().map(when),
                name: d.name,
                runner: d.runner,
            })
            .collect(),
        placements: placements
            .into_iter()
            .map(|p| PlacementRow {
                device_id: p.device_id.to_string(),
                device: p.device_name,
                connection: p.connection_name,
                connector: p.connector_name,
                runs: runs(&p.spec),
                digest: p.spec_digest.0,
                state: match p.state {
                    PlacementState::Pending => "pending",
                    PlacementState::Accepted => "accepted",
                    PlacementState::SpecChanged => "spec changed",
                    PlacementState::Declined => "declined",
                },
                waiting: p.state != PlacementState::Accepted,
            })
            .collect(),
        profiles: profiles
            .iter()
            .map(|p| ProfileChoice {
                name: p.name.clone(),
                usable: p
                    .grants
                    .iter()
                    .any(|g| g.user_id == actor.user.id && g.use_),
            })
            .collect(),
    })
}

/// The approval form.
#[derive(serde::Deserialize)]
pub(super) struct ApproveForm {
    #[serde(default)]
    csrf: String,
    code: String,
    profile: String,
}

impl CsrfForm for ApproveForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// `POST /workspaces/{ws}/devices/approve`.
pub(super) async fn approve(
    State(s): State<WebState>,
    Path(ws): Path<String>,
    protected: Protected<ApproveForm>,
) -> WebResult<Redirect> {
    let form = protected.form;
    let request = ApproveDevice {
        code: form.code.trim().to_owned(),
        profile: form.profile,
    };
    s.app
        .device_approve(&protected.signed_in.session.actor, &ws, request)
        .await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{ws}/devices?notice=approved"
    )))
}

/// `POST /workspaces/{ws}/devices/{device}/revoke`.
pub(super) async fn revoke(
    State(s): State<WebState>,
    Path((ws, device)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    s.app
        .device_revoke(&protected.signed_in.session.actor, &ws, &device)
        .await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{ws}/devices?notice=revoked"
    )))
}

/// The command line or URL a spec runs, as its owner reads it.
fn runs(spec: &ConnectorSpec) -> String {
    match spec {
        ConnectorSpec::Stdio { command, args, .. } => std::iter::once(command.as_str())
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        ConnectorSpec::Http { url } => url.clone(),
    }
}

/// The accept form: the digest of the spec the owner was shown.
#[derive(serde::Deserialize)]
pub(super) struct AcceptForm {
    #[serde(default)]
    csrf: String,
    spec_digest: String,
}

impl CsrfForm for AcceptForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// `POST /workspaces/{ws}/devices/{device}/placements/{connection}/accept`.
pub(super) async fn accept(
    State(s): State<WebState>,
    Path((ws, device, connection)): Path<(String, String, String)>,
    protected: Protected<AcceptForm>,
) -> WebResult<Redirect> {
    let request = AcceptPlacement {
        spec_digest: SpecDigest(protected.form.spec_digest),
    };
    s.app
        .placement_accept(
            &protected.signed_in.session.actor,
            &ws,
            (&device, &connection),
            request,
        )
        .await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{ws}/devices?notice=placement-accepted"
    )))
}

/// `POST /workspaces/{ws}/devices/{device}/placements/{connection}/decline`.
pub(super) async fn decline(
    State(s): State<WebState>,
    Path((ws, device, connection)): Path<(String, String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    s.app
        .placement_decline(
            &protected.signed_in.session.actor,
            &ws,
            (&device, &connection),
        )
        .await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{ws}/devices?notice=placement-declined"
    )))
}
