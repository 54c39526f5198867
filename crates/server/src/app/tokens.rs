//! Personal API tokens: a user creates, lists and revokes their own; an operator revokes
//! anyone's from the server's command line (`switchyard-server admin revoke-token`). A token
//! revoked or expired is refused at its next request, and its web sessions end with it.

use super::auth::{hash_token, new_token};
use super::names::validate_name;
use super::{Actor, App, Audit, views};
use crate::error::{AppError, AppResult};
use serde_json::json;
use std::time::Duration;
use switchyard_protocol::api::{CreateToken, CreatedToken, TokenView};
use switchyard_protocol::{ErrorCode, TokenId};

/// Longest accepted `expires_in_seconds`: ten years.
const MAX_EXPIRES_IN: u64 = 10 * 366 * 24 * 3600;

impl App {
    /// Creates a token for the actor. Its secret is in the answer and nowhere else.
    pub async fn token_create(&self, actor: &Actor, req: CreateToken) -> AppResult<CreatedToken> {
        validate_name("token", &req.name)?;
        let expires_in = match req.expires_in_seconds {
            None => None,
            Some(seconds @ 1..=MAX_EXPIRES_IN) => Some(Duration::from_secs(seconds)),
            Some(seconds) => {
                return Err(AppError::refused(
                    ErrorCode::InvalidRequest,
                    format!(
                        "`expires_in_seconds` {seconds} is out of range: give 1–{MAX_EXPIRES_IN}, or leave it out for a token that works until revoked"
                    ),
                ));
            }
        };
        let secret = new_token().map_err(|e| AppError::Internal(format!("no randomness: {e}")))?;
        let row = self
            .db
            .token_create(actor.user.id, &req.name, &hash_token(&secret), expires_in)
            .await?;
        // The secret never goes in: the entry names the token and its expiry.
        self.audit(
            Audit::by(actor, "token.created")
                .object("token", Some(row.id.0), &row.name)
                .after(json!({"user": actor.user.name, "expires_at": row.expires_at})),
        )
        .await;
        Ok(CreatedToken {
            token: views::token(&row),
            secret,
        })
    }

    /// The actor's tokens, revoked and expired ones included.
    pub async fn token_list(&self, actor: &Actor) -> AppResult<Vec<TokenView>> {
        Ok(self
            .db
            .token_list(actor.user.id)
            .await?
            .iter()
            .map(views::token)
            .collect())
    }

    /// Revokes one of the actor's tokens (the one in use included) and ends its web
    /// sessions. Revoking a revoked token answers it as it is.
    pub async fn token_revoke(&self, actor: &Actor, token: &str) -> AppResult<TokenView> {
        let id = parse_token_id(token)?;
        let revoked = self
            .db
            .token_revoke(actor.user.id, Some(id), Some(actor.user.id))
            .await?;
        let row = revoked.first().ok_or_else(|| token_not_found(token))?;
        self.audit(
            Audit::by(actor, "token.revoked")
                .object("token", Some(row.id.0), &row.name)
                .after(json!({"user": actor.user.name, "revoked_at": row.revoked_at})),
        )
        .await;
        Ok(views::token(row))
    }

    /// Revokes a user's token, or with `token` `None` every unrevoked token of theirs, on the
    /// operator's authority (the server's command line: no user is named as the revoker).
    pub async fn token_revoke_as_operator(
        &self,
        user: &str,
        token: Option<&str>,
    ) -> AppResult<Vec<TokenView>> {
        let user = self.find_user(user).await?;
        let id = token.map(parse_token_id).transpose()?;
        let revoked = self.db.token_revoke(user.id, id, None).await?;
        for row in &revoked {
            self.audit(
                Audit::by_system("operator", "token.revoked")
                    .object("token", Some(row.id.0), &row.name)
                    .after(json!({"user": user.name, "revoked_at": row.revoked_at})),
            )
            .await;
        }
        match (token, revoked.is_empty()) {
            (Some(token), true) => Err(token_not_found(token)),
            _ => Ok(revoked.iter().map(views::token).collect()),
        }
    }
}

fn parse_token_id(token: &str) -> AppResult<TokenId> {
    token.parse().map_err(|_| token_not_found(token))
}

fn token_not_found(token: &str) -> AppError {
    AppError::refused(
        ErrorCode::TokenNotFound,
        format!("no token `{token}` of yours; `switchyard token list` shows their ids"),
    )
}
