//! The app layer: every operation the API offers, with its authorization decided here.
//! Handlers call exactly one function of this module; this module calls the datastore.

mod auth;
mod calls;
mod connections;
mod connectors;
mod names;
mod profiles;
mod results;
mod sessions;
mod views;
mod workspaces;

pub use auth::{Actor, hash_token, new_token};
pub use calls::CompletionRecorded;

/// The view of an authenticated user.
pub fn views_user(actor: &Actor) -> switchyard_protocol::api::UserView {
    views::user(&actor.user)
}

use crate::db::Datastore;
use std::time::Duration;

/// Settings the app layer needs.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// Deadline for tool discovery (initialize + tools/list).
    pub discovery_deadline: Duration,
}

impl Default for AppConfig {
    fn default() -> Self {
        Self { discovery_deadline: Duration::from_secs(20) }
    }
}

/// The app: the datastore plus settings. Shared by handlers and the central runner.
#[derive(Clone, Debug)]
pub struct App {
    db: Datastore,
    config: AppConfig,
}

impl App {
    /// Builds the app over a datastore.
    pub fn new(db: Datastore, config: AppConfig) -> Self {
        Self { db, config }
    }

    /// The datastore.
    pub fn db(&self) -> &Datastore {
        &self.db
    }
}
