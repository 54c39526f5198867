//! Who is asking, and what they may touch. Tokens are random, shown once and stored as hashes.
//! Membership and grants are read at the moment of each request, never cached.

use super::App;
use crate::db::{Key, ProfileRow, UserRow, WorkspaceRow};
use crate::error::{AppError, AppResult};
use sha2::{Digest, Sha256};
use switchyard_protocol::ErrorCode;

/// Prefix of every personal API token, so a leaked one is easy to recognise.
const TOKEN_PREFIX: &str = "sy_";

/// A new random personal API token (`sy_` + 64 hex digits).
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{TOKEN_PREFIX}{hex}"))
}

/// The stored form of a token.
pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// An authenticated user.
#[derive(Clone, Debug)]
pub struct Actor {
    /// The user.
    pub user: UserRow,
}

/// A workspace the actor belongs to, with the actor's role in it.
#[derive(Clone, Debug)]
pub(crate) struct Membership {
    pub workspace: WorkspaceRow,
    pub is_admin: bool,
}

impl Membership {
    /// Refuses (`forbidden`) unless the actor is a workspace admin.
    pub(crate) fn require_admin(&self) -> AppResult<()> {
        if self.is_admin {
            return Ok(());
        }
        Err(AppError::refused(
            ErrorCode::Forbidden,
            format!(
                "you must be an admin of workspace `{}` to do this",
                self.workspace.name
            ),
        ))
    }
}

impl App {
    /// Authenticates a bearer token. A device credential is refused: users' endpoints are not
    /// a device's (see [`App::authenticate_principal`] for those both may call).
    pub async fn authenticate(&self, token: &str) -> AppResult<Actor> {
        if token.starts_with(super::principal::DEVICE_CREDENTIAL_PREFIX) {
            return Err(AppError::refused(
                ErrorCode::Unauthenticated,
                "a device credential cannot be used here (only on the runner API and for a device's own calls and operations); use a personal API token",
            ));
        }
        let hash = hash_token(token);
        match self.db.user_by_token_hash(&hash).await? {
            Some(user) => Ok(Actor { user }),
            // Only on a refusal: say why an agent's token does not work here.
            None if self.db.mcp_principal_by_token_hash(&hash).await?.is_some() => {
                Err(AppError::refused(
                    ErrorCode::Unauthenticated,
                    "an agent token is accepted on /mcp only; use a personal API token here",
                ))
            }
            None => Err(AppError::refused(
                ErrorCode::Unauthenticated,
                "the API token is not valid; create one with `switchyard-server admin create-user`",
            )),
        }
    }

    /// The workspace named by `key` if the actor is a member; unknown and foreign workspaces
    /// look the same (404).
    pub(crate) async fn membership(&self, actor: &Actor, key: &str) -> AppResult<Membership> {
        match self
            .db
            .workspace_find_for_member(&Key::parse(key), actor.user.id)
            .await?
        {
            Some((workspace, role)) => Ok(Membership {
                workspace,
                is_admin: role == "admin",
            }),
            None => Err(not_a_member(key)),
        }
    }

    /// Like [`App::membership`], and the actor must be a workspace admin.
    pub(crate) async fn admin_membership(&self, actor: &Actor, key: &str) -> AppResult<Membership> {
        let membership = self.membership(actor, key).await?;
        membership.require_admin()?;
        Ok(membership)
    }

    /// Like [`App::membership`], and the actor must hold the manage-integrations right: a
    /// workspace admin, or the installation owner (a member of the workspace).
    pub(crate) async fn integrations_membership(
        &self,
        actor: &Actor,
        key: &str,
    ) -> AppResult<Membership> {
        let membership = self.membership(actor, key).await?;
        if !membership.is_admin && !actor.user.is_owner {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "you must be an admin of workspace `{}` (or the installation owner) to do this",
                    membership.workspace.name
                ),
            ));
        }
        Ok(membership)
    }

    /// Refuses unless the actor is an installation owner.
    pub(crate) fn require_owner(&self, actor: &Actor) -> AppResult<()> {
        if actor.user.is_owner {
            Ok(())
        } else {
            Err(AppError::refused(
                ErrorCode::Forbidden,
                "only an installation owner may manage connectors",
            ))
        }
    }

    /// Refuses unless the actor holds Use on the profile right now.
    pub(crate) async fn require_use(&self, actor: &Actor, profile: &ProfileRow) -> AppResult<()> {
        require_user_use(
            self.db.grants_of(profile.id, actor.user.id).await?.use_,
            profile,
        )
    }

    /// A person by id or name; an agent is refused here (`switchyard agent …` manages agents).
    pub(crate) async fn find_user(&self, key: &str) -> AppResult<UserRow> {
        let user = self.db.user_find(&Key::parse(key)).await?.ok_or_else(|| {
            AppError::refused(ErrorCode::UserNotFound, format!("no user `{key}`"))
        })?;
        if user.kind == switchyard_protocol::agents::PrincipalKind::Agent {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "`{}` is an agent, not a person: manage it with `switchyard agent …` (grants: `profile grant --agent`)",
                    user.name
                ),
            ));
        }
        Ok(user)
    }

    /// Creates a user and returns it with its first token (shown once).
    pub async fn user_create(&self, name: &str, is_owner: bool) -> AppResult<(UserRow, String)> {
        super::names::validate_name("user", name)?;
        let token = new_token().map_err(|e| AppError::Internal(format!("no randomness: {e}")))?;
        let user = self
            .db
            .user_create(name, is_owner, &hash_token(&token))
            .await
            .map_err(|e| already_exists(e, "user", name))?;
        Ok((user, token))
    }
}

/// The answer to a user asking for a workspace they are not a member of (or that does not
/// exist: the two look the same).
pub(crate) fn not_a_member(key: &str) -> AppError {
    AppError::refused(
        ErrorCode::WorkspaceNotFound,
        format!("no workspace `{key}` that you are a member of"),
    )
}

/// Refuses unless a user holds Use on the profile; `holds_use` was read at this request.
pub(crate) fn require_user_use(holds_use: bool, profile: &ProfileRow) -> AppResult<()> {
    if holds_use {
        Ok(())
    } else {
        Err(AppError::refused(
            ErrorCode::Forbidden,
            format!(
                "you need the Use grant on profile `{}`; ask someone with Share on it (`switchyard profile grant … --use`)",
                profile.name
            ),
        ))
    }
}

/// Maps a unique violation to `already_exists`; other errors pass through.
pub(crate) fn already_exists(error: sqlx::Error, kind: &str, name: &str) -> AppError {
    if crate::db::is_unique_violation(&error) {
        AppError::refused(
            ErrorCode::AlreadyExists,
            format!("a {kind} named `{name}` already exists"),
        )
    } else {
        AppError::Database(error)
    }
}
