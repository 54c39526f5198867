//! The inspector's open event streams (a call's, the Approvals page's), counted per web
//! session and capped: each holds a waiting read, so one session cannot open them without
//! bound.

use crate::error::AppError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use switchyard_protocol::ErrorCode;

/// The streams open per session.
#[derive(Debug)]
pub(super) struct OpenStreams {
    max: usize,
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream's place; given back when dropped (the stream ended or its client left).
#[derive(Debug)]
pub(super) struct StreamSlot {
    streams: Arc<OpenStreams>,
    session: String,
}

impl OpenStreams {
    /// At most `max` streams per session.
    pub(super) fn new(max: usize) -> Self {
        Self {
            max,
            open: Mutex::default(),
        }
    }

    /// A place for one more stream of `session`, or `None` when it has `max` open.
    pub(super) fn take(self: &Arc<Self>, session: &str) -> Option<StreamSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(session.to_owned()).or_default();
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(StreamSlot {
            streams: Arc::clone(self),
            session: session.to_owned(),
        })
    }

    /// [`Self::take`] for a live view's route: refused `too_many_streams` when `session` has
    /// `max` open.
    pub(super) fn slot_for(self: &Arc<Self>, session: &str) -> Result<StreamSlot, AppError> {
        self.take(session).ok_or_else(|| {
            AppError::refused(
                ErrorCode::TooManyStreams,
                "this session has as many live views (calls, approvals) open as it may; close one and reload",
            )
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .streams
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.session) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_holds_at_most_max_streams_and_gets_them_back() {
        let streams = Arc::new(OpenStreams::new(2));
        let first = streams.take("a").expect("one");
        let second = streams.take("a").expect("two");
        assert!(streams.take("a").is_none(), "a third is refused");
        assert!(streams.take("b").is_some(), "another session has its own");
        drop(first);
        let again = streams.take("a").expect("a place came back");
        drop((second, again));
        assert!(
            streams.open.lock().unwrap().is_empty(),
            "nothing left behind"
        );
    }
}
