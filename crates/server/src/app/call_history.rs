//! The calls history of the API (`GET …/calls`): filtered pages of call summaries, newest
//! first, each ending in an opaque cursor for the next.
//!
//! A page is a keyset on `(created_at, id)`: the cursor carries the position of the page's last
//! call, so every call that existed when the first page was read is listed exactly once
//! however many are submitted meanwhile (those land before the first page; a call whose
//! transaction commits after the walk passed its position is not listed). The cursor also
//! carries a digest of the workspace and the filters it was issued under, and a checksum:
//! a garbled or edited cursor, or one passed with other filters, is refused `invalid_cursor`
//! rather than silently starting elsewhere. It carries a position, never authority: every
//! page is authorized and filtered afresh, so a forged cursor shows no more than the filters
//! would.
//!
//! A summary never carries a call's arguments, result or error message (the seed's rule that
//! history never bulk-returns raw results): reading one call under Use shows those.

use super::{Actor, App, views};
use crate::db::{CallFilter, PageFrom};
use crate::error::{AppError, AppResult};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use switchyard_protocol::api::CallList;
use switchyard_protocol::state::ALL_STATES;
use switchyard_protocol::{CallId, CallState, DeviceId, ErrorCode, RunnerRef, UserId, WorkspaceId};
use uuid::Uuid;

/// Calls per page when `limit` is not given.
pub const DEFAULT_HISTORY_PAGE: u32 = 50;
/// The largest `limit`.
pub const MAX_HISTORY_PAGE: u32 = 200;

/// The filters of `GET …/calls` as given (each absent, or the text of its query parameter);
/// [`App::call_history`] checks them.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallHistoryQuery {
    /// A call state (`succeeded`, `unknown`, …).
    pub state: Option<String>,
    /// A tool name.
    pub tool: Option<String>,
    /// A connection's id or name.
    pub connection: Option<String>,
    /// A member's id or name (their own submissions), or `device:<id>`.
    pub submitter: Option<String>,
    /// `central` or `device:<id>`.
    pub placement: Option<String>,
    /// An RFC 3339 time: calls submitted at or after it.
    pub since: Option<String>,
    /// An RFC 3339 time: calls submitted before it.
    pub until: Option<String>,
    /// 1–[`MAX_HISTORY_PAGE`]; [`DEFAULT_HISTORY_PAGE`] when absent.
    pub limit: Option<String>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// What the filters of `GET …/calls` are, for messages that refuse one.
pub const HISTORY_FILTERS: &str = "the filters are `state`, `tool`, `connection`, `submitter`, `placement`, `since`, `until`, `limit` and `cursor`";

fn invalid(message: String) -> AppError {
    AppError::refused(ErrorCode::InvalidFilter, message)
}

fn bad_cursor(why: &str) -> AppError {
    AppError::refused(
        ErrorCode::InvalidCursor,
        format!(
            "`cursor` {why}: pass the `next_cursor` of the page before with the same filters, or leave it out to start from the newest call"
        ),
    )
}

impl App {
    /// A page of the calls the actor may read (current Use on their profile), newest first,
    /// as summaries, filtered by `query`: see the module documentation.
    pub async fn call_history(
        &self,
        actor: &Actor,
        ws: &str,
        query: CallHistoryQuery,
    ) -> AppResult<CallList> {
        let workspace = self.membership(actor, ws).await?.workspace.id;
        let filter = self.history_filter(workspace, &query).await?;
        let limit = match query.limit.as_deref() {
            None => DEFAULT_HISTORY_PAGE,
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_HISTORY_PAGE).contains(n))
                .ok_or_else(|| {
                    invalid(format!(
                        "`limit` must be a whole number from 1 to {MAX_HISTORY_PAGE}, not `{text}`"
                    ))
                })?,
        };
        let scope = filter_digest(workspace, &filter);
        let from = match query.cursor.as_deref() {
            None => PageFrom::Newest,
            Some(text) => {
                let cursor = Cursor::decode(text)?;
                if cursor.scope != scope {
                    return Err(bad_cursor(
                        "was issued for other filters or another workspace",
                    ));
                }
                PageFrom::Older(cursor.at, cursor.id)
            }
        };
        // One more than asked tells whether another page follows.
        let mut rows = self
            .db
            .call_list_page(
                workspace,
                actor.user.id,
                &filter,
                from,
                i64::from(limit) + 1,
            )
            .await?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next_cursor = rows.last().filter(|_| more).map(|last| {
            Cursor {
                at: last.created_at,
                id: last.id,
                scope,
            }
            .encode()
        });
        Ok(CallList {
            calls: rows.iter().map(views::call_summary).collect(),
            next_cursor,
        })
    }

    /// The filters of `query`, checked and resolved to ids.
    async fn history_filter(
        &self,
        workspace: WorkspaceId,
        query: &CallHistoryQuery,
    ) -> AppResult<CallFilter> {
        let mut filter = CallFilter {
            tool: query.tool.clone(),
            ..CallFilter::default()
        };
        if let Some(text) = &query.state {
            filter.state = Some(text.parse::<CallState>().map_err(|_| {
                let states: Vec<&str> = ALL_STATES.iter().map(|s| s.as_str()).collect();
                invalid(format!(
                    "`state` must be one of {}, not `{text}`",
                    states.join(", ")
                ))
            })?);
        }
        if let Some(key) = &query.connection {
            let found = self
                .db
                .connection_find(workspace, &crate::db::Key::parse(key))
                .await?;
            filter.connection = Some(
                found
                    .ok_or_else(|| {
                        invalid(format!(
                            "`connection`: there is no connection `{key}` in this workspace"
                        ))
                    })?
                    .id,
            );
        }
        if let Some(text) = &query.submitter {
            self.submitter_filter(workspace, text, &mut filter).await?;
        }
        if let Some(text) = &query.placement {
            filter.runner = Some(text.parse::<RunnerRef>().map_err(|_| {
                invalid(format!(
                    "`placement` must be `central` or `device:<device id>`, not `{text}`"
                ))
            })?);
        }
        filter.since = time_filter("since", query.since.as_deref())?;
        filter.until = time_filter("until", query.until.as_deref())?;
        if let (Some(since), Some(until)) = (filter.since, filter.until)
            && since >= until
        {
            return Err(invalid(format!(
                "`since` ({since}) must be before `until` ({until})"
            )));
        }
        Ok(filter)
    }

    /// `submitter`: `device:<id>`, a user id (a former member's too), or a member's name.
    async fn submitter_filter(
        &self,
        workspace: WorkspaceId,
        text: &str,
        filter: &mut CallFilter,
    ) -> AppResult<()> {
        if let Some(device) = text.strip_prefix("device:") {
            let id = Uuid::parse_str(device).map_err(|_| {
                invalid(format!(
                    "`submitter`: `{text}` is not `device:` followed by a device id"
                ))
            })?;
            filter.submitter_device = Some(DeviceId(id));
        } else if let Ok(id) = Uuid::parse_str(text) {
            filter.submitter_user = Some(UserId(id));
        } else {
            let members = self.db.member_list(workspace).await?;
            let member = members.iter().find(|m| m.user_name == text).ok_or_else(|| {
                invalid(format!(
                    "`submitter`: no member of this workspace is named `{text}` (give a user id for a former member, or `device:<id>`)"
                ))
            })?;
            filter.submitter_user = Some(member.user_id);
        }
        Ok(())
    }
}

/// An RFC 3339 time filter.
fn time_filter(name: &str, text: Option<&str>) -> AppResult<Option<DateTime<Utc>>> {
    text.map(|text| {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| {
                invalid(format!(
                    "`{name}` must be an RFC 3339 time such as 2026-12-01T09:30:00Z, not `{text}`"
                ))
            })
    })
    .transpose()
}

/// A digest of the workspace and the resolved filters a cursor is valid for.
fn filter_digest(workspace: WorkspaceId, filter: &CallFilter) -> [u8; 8] {
    let canonical = format!(
        "{workspace}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        filter.state.map(|s| s.as_str()),
        filter.tool,
        filter.connection,
        filter.submitter_user,
        filter.submitter_device,
        filter.runner.map(|r| r.to_string()),
        filter.since.map(|t| t.timestamp_micros()),
        filter.until.map(|t| t.timestamp_micros()),
    );
    first_8(&Sha256::digest(canonical.as_bytes()))
}

fn first_8(bytes: &[u8]) -> [u8; 8] {
    let mut out = [0; 8];
    out.copy_from_slice(&bytes[..8]);
    out
}

/// Where the next page starts, and the filters it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    /// The last listed call's `created_at` (PostgreSQL keeps microseconds).
    at: DateTime<Utc>,
    /// The last listed call.
    id: CallId,
    /// [`filter_digest`] of the page.
    scope: [u8; 8],
}

/// The text every cursor starts with; a new layout takes a new one.
const CURSOR_PREFIX: &str = "c1.";
/// Bytes of a cursor's body: time (8), id (16), scope (8), checksum (8).
const CURSOR_LEN: usize = 40;

impl Cursor {
    fn body(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(CURSOR_LEN);
        body.extend_from_slice(&self.at.timestamp_micros().to_be_bytes());
        body.extend_from_slice(self.id.0.as_bytes());
        body.extend_from_slice(&self.scope);
        body
    }

    fn checksum(body: &[u8]) -> [u8; 8] {
        let mut hash = Sha256::new();
        hash.update(b"switchyard calls cursor v1\0");
        hash.update(body);
        first_8(&hash.finalize())
    }

    /// The opaque text handed to clients.
    fn encode(&self) -> String {
        let mut body = self.body();
        let check = Self::checksum(&body);
        body.extend_from_slice(&check);
        format!("{CURSOR_PREFIX}{}", URL_SAFE_NO_PAD.encode(body))
    }

    /// A cursor this server issued, or `invalid_cursor`.
    fn decode(text: &str) -> AppResult<Cursor> {
        let garbled = || bad_cursor("is not one this server issued (garbled or edited)");
        let body = text
            .strip_prefix(CURSOR_PREFIX)
            .and_then(|b64| URL_SAFE_NO_PAD.decode(b64).ok())
            .filter(|body| body.len() == CURSOR_LEN)
            .ok_or_else(garbled)?;
        let (content, check) = body.split_at(CURSOR_LEN - 8);
        if Self::checksum(content) != check {
            return Err(garbled());
        }
        let micros = i64::from_be_bytes(content[..8].try_into().map_err(|_| garbled())?);
        let id = Uuid::from_slice(&content[8..24]).map_err(|_| garbled())?;
        Ok(Cursor {
            at: DateTime::from_timestamp_micros(micros).ok_or_else(garbled)?,
            id: CallId(id),
            scope: first_8(&content[24..32]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor() -> Cursor {
        Cursor {
            at: DateTime::from_timestamp_micros(1_780_000_000_123_456).unwrap(),
            id: CallId(Uuid::from_u128(0x0192_f0c4_7d4e_7a10_9c1e_3f1a_2b3c_4d5e)),
            scope: [1, 2, 3, 4, 5, 6, 7, 8],
        }
    }

    #[test]
    fn a_cursor_reads_back_as_it_was_written() {
        let text = cursor().encode();
        assert!(text.starts_with(CURSOR_PREFIX), "{text}");
        assert_eq!(Cursor::decode(&text).unwrap(), cursor());
    }

    #[test]
    fn every_one_character_edit_of_a_cursor_is_refused() {
        let text = cursor().encode();
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        for at in CURSOR_PREFIX.len()..text.len() {
            for replacement in alphabet.chars() {
                let mut edited = text.clone();
                edited.replace_range(at..=at, &replacement.to_string());
                if edited == text {
                    continue;
                }
                // The last character's low bits are padding that decodes to the same bytes.
                match Cursor::decode(&edited) {
                    Err(_) => {}
                    Ok(decoded) => assert_eq!(decoded, cursor(), "{edited} decoded otherwise"),
                }
            }
        }
    }

    #[test]
    fn garbage_is_refused() {
        for text in ["", "c1.", "c2.AAAA", "hello", "c1.!!!!", &"c1.".repeat(40)] {
            assert!(Cursor::decode(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn filters_change_the_scope() {
        let ws = WorkspaceId(Uuid::from_u128(7));
        let none = filter_digest(ws, &CallFilter::default());
        let failed = filter_digest(
            ws,
            &CallFilter {
                state: Some(CallState::Failed),
                ..CallFilter::default()
            },
        );
        let other_ws = filter_digest(WorkspaceId(Uuid::from_u128(8)), &CallFilter::default());
        assert_ne!(none, failed);
        assert_ne!(none, other_ws);
        assert_eq!(none, filter_digest(ws, &CallFilter::default()));
    }
}
