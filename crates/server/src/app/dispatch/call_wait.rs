//! Reading a call while waiting for it to settle: `GET …/calls/{call}?wait_ms=N` answers as
//! soon as the call is terminal or `unknown`, or once N ms (at most 25 s) have passed — so a
//! caller learns a result the moment it is recorded, without polling. A submission may wait
//! the same way (`POST …/calls?wait_ms=N`), so that a new call's outcome takes one request.
//!
//! A runner's recorded completion is announced on `switchyard_settled` once it committed (at
//! once in the recording process, through PostgreSQL to the others: [`super::notices`]), and
//! every replica's wake-up feed passes it to the readers waiting there. Other ways a call
//! settles (the sweeper, cancellation, resolution) do not notify: a waiting reader looks again
//! every second, so they cost it at most that. Every look is an ordinary read, authorized
//! afresh — except the answer to a completion recorded in the same process: the statement
//! that recorded it read the call and its lineage, and the waiting request (authorized when
//! it began, and for this call) answers with that, without a read of its own.

use super::wakeups::SettledWaiter;
use crate::app::App;
use crate::app::principal::Principal;
use crate::error::AppResult;
use std::time::Duration;
use switchyard_protocol::CallState;
use switchyard_protocol::api::CallView;
use tokio::time::Instant;

/// The longest a read waits.
pub const MAX_CALL_WAIT: Duration = Duration::from_secs(25);
/// A waiting read looks again at least this often.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Whether a call has settled: terminal, or `unknown` (what `mcp call --wait` waits for).
pub fn is_settled(state: CallState) -> bool {
    state.is_terminal() || state == CallState::Unknown
}

impl App {
    /// [`App::call_get_as`], waiting up to `wait` (capped at [`MAX_CALL_WAIT`]) for the call to
    /// settle.
    pub async fn call_wait_as(
        &self,
        principal: &Principal,
        ws: &str,
        call: &str,
        wait: Duration,
    ) -> AppResult<CallView> {
        let id = crate::app::sessions::parse_call_id(call)?;
        let deadline = Instant::now() + wait.min(MAX_CALL_WAIT);
        // Subscribed before the first read: a completion recorded in between still wakes it.
        let waiter = self.dispatch.announcer.local.settled_waiter(id);
        let view = self.call_get_as(principal, ws, call).await?;
        if is_settled(view.state) || Instant::now() >= deadline {
            return Ok(view);
        }
        self.call_wait_with(principal, ws, call, waiter, deadline)
            .await
    }

    /// Waits on `waiter` (subscribed before the call was last seen unsettled) until the call
    /// settles or `deadline` passes, then answers the call as read then (or as recorded, when
    /// its completion was recorded in this process).
    pub(crate) async fn call_wait_with(
        &self,
        principal: &Principal,
        ws: &str,
        call: &str,
        mut waiter: SettledWaiter,
        deadline: Instant,
    ) -> AppResult<CallView> {
        loop {
            let next_look = (Instant::now() + LOOK_AGAIN).min(deadline);
            if let Some(recorded) = waiter.wait(next_look).await {
                // Usually this reader's alone: taken, not copied.
                let recorded = std::sync::Arc::unwrap_or_clone(recorded);
                return self.call_view_with(&recorded.call, recorded.lineage).await;
            }
            let view = self.call_get_as(principal, ws, call).await?;
            if is_settled(view.state) || Instant::now() >= deadline {
                return Ok(view);
            }
        }
    }
}
