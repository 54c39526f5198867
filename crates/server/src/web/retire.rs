//! The inspector's Retire and Restore buttons: CSRF-protected forms that retire or restore a
//! connector (installation owners), a connection or a profile (workspace admins), then show
//! the object again with a notice. The app layer decides who may.

use super::WebState;
use super::error::WebResult;
use super::page::encode_segment;
use super::session::{CsrfOnly, Protected};
use axum::extract::{Path, State};
use axum::response::Redirect;

/// Where to go after `retired` (true) or restored (false) the object at `page`.
fn back(page: &str, retired: bool) -> Redirect {
    let notice = if retired { "retired" } else { "restored" };
    Redirect::to(&format!("{page}?notice={notice}"))
}

/// `POST /connectors/{connector}/retire`.
pub(super) async fn connector_retire(
    State(s): State<WebState>,
    Path(key): Path<String>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let c = s.app.connector_retire(actor, &key).await?;
    Ok(back(
        &format!("/connectors/{}", encode_segment(&c.name)),
        true,
    ))
}

/// `POST /connectors/{connector}/restore`.
pub(super) async fn connector_restore(
    State(s): State<WebState>,
    Path(key): Path<String>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let c = s.app.connector_restore(actor, &key).await?;
    Ok(back(
        &format!("/connectors/{}", encode_segment(&c.name)),
        false,
    ))
}

/// `POST /workspaces/{ws}/connections/{connection}/retire`.
pub(super) async fn connection_retire(
    State(s): State<WebState>,
    Path((ws, key)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let c = s.app.connection_retire(actor, &ws, &key).await?;
    Ok(back(&connection_page(&ws, &c.name), true))
}

/// `POST /workspaces/{ws}/connections/{connection}/restore`.
pub(super) async fn connection_restore(
    State(s): State<WebState>,
    Path((ws, key)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let c = s.app.connection_restore(actor, &ws, &key).await?;
    Ok(back(&connection_page(&ws, &c.name), false))
}

/// `POST /workspaces/{ws}/profiles/{profile}/retire`.
pub(super) async fn profile_retire(
    State(s): State<WebState>,
    Path((ws, key)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let p = s.app.profile_retire(actor, &ws, &key).await?;
    Ok(back(&profile_page(&ws, &p.name), true))
}

/// `POST /workspaces/{ws}/profiles/{profile}/restore`.
pub(super) async fn profile_restore(
    State(s): State<WebState>,
    Path((ws, key)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let p = s.app.profile_restore(actor, &ws, &key).await?;
    Ok(back(&profile_page(&ws, &p.name), false))
}

fn connection_page(ws: &str, name: &str) -> String {
    format!(
        "/workspaces/{}/connections/{}",
        encode_segment(ws),
        encode_segment(name)
    )
}

fn profile_page(ws: &str, name: &str) -> String {
    format!(
        "/workspaces/{}/profiles/{}",
        encode_segment(ws),
        encode_segment(name)
    )
}
