//! The runner channel from the device's side: the lease long-poll, heartbeats, starts and
//! receipt uploads sent as JSON lines on one upgraded connection (`GET /api/v1/runner/channel`),
//! so that the server holds an idle runner without HTTP buffers and a busy one's starts and
//! uploads skip an HTTP request each (see the server's `runner_channel`).
//!
//! The channel opens on first use and again after it closed. Each request is written by its
//! caller, one at a time, so that it leaves without waiting for another task to be scheduled;
//! one task reads the answers and routes each to its request by id. A request that gets no
//! answer in time closes the channel (a stalled connection must not hold the next request
//! too); so does anything unreadable, and a write cut short (half a line would garble the
//! next). A server that does not open a channel (an older one answers 404; a proxy that
//! drops the `Upgrade` header makes it 400) is remembered, and the caller sends its requests
//! as plain HTTP; so is a channel that refuses starts and uploads (an older server's knows
//! only leases and heartbeats), until it is opened again. A request longer than a channel line
//! (a large receipt) is sent as plain HTTP too, and so is one whose answer would be (the server
//! answers `answer_too_long` instead: a lease of calls with large arguments); the channel stays
//! open.

use super::client::{ApiFailure, sorted_failure};
use super::lines::{push_line, read_line, write_lines};
use super::state::lock;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use switchyard_protocol::runner::{
    CHANNEL_MAX_LINE, CHANNEL_PROTOCOL, ChannelAnswer, ChannelCall, ChannelReply, ChannelRequest,
};
use tokio::io::{BufReader, ReadHalf, WriteHalf};
use tokio::sync::{Mutex, oneshot};
use tokio_util::sync::CancellationToken;

/// The channel's read buffer (an answer line is read through it in pieces).
const READ_BUFFER_BYTES: usize = 4 * 1024;

/// Where the answers to requests still waiting go, by request id.
type Waiting = std::sync::Mutex<HashMap<u64, oneshot::Sender<ChannelReply>>>;

/// An open channel: its write half and the requests waiting for answers, shared by the callers
/// (who write) and the task that reads.
#[derive(Clone)]
struct Open {
    /// The connection's write half, taken away when the channel closes.
    writer: Arc<Mutex<Option<WriteHalf<reqwest::Upgraded>>>>,
    waiting: Arc<Waiting>,
    /// Cancelled when the channel is closed, by either side.
    closed: CancellationToken,
}

impl Open {
    /// Writes one request's line. A write that fails, or is cut short because its caller
    /// stopped waiting, closes the channel.
    async fn write(&self, line: &[u8]) -> Result<(), ApiFailure> {
        let mut writer = self.writer.lock().await;
        let Some(stream) = writer.as_mut() else {
            return Err(closed());
        };
        let cut_short = self.closed.clone().drop_guard();
        match write_lines(stream, line).await {
            Ok(()) => {
                cut_short.disarm();
                Ok(())
            }
            Err(error) => {
                tracing::debug!(%error, "the runner channel could not be written; closing it");
                *writer = None;
                Err(closed())
            }
        }
    }
}

/// What is known about the server's channel.
enum Slot {
    /// No channel open (none yet, or the last one closed).
    Closed,
    /// A channel is open.
    Open(Open),
    /// The server has no runner channel: use plain HTTP.
    Unsupported,
}

/// A device runner's channel to its server, shared by the runner client's clones.
pub(super) struct Channel {
    slot: Mutex<Slot>,
    next_id: AtomicU64,
    /// Whether the open channel takes starts and uploads (until one is refused as unknown).
    takes_reports: AtomicBool,
}

impl Channel {
    /// A channel that opens on first use.
    pub(super) fn new() -> Self {
        Self {
            slot: Mutex::new(Slot::Closed),
            next_id: AtomicU64::new(1),
            takes_reports: AtomicBool::new(true),
        }
    }

    /// Whether starts and uploads go on the channel: no channel has refused them since the
    /// last one opened.
    pub(super) fn takes_reports(&self) -> bool {
        self.takes_reports.load(Ordering::Relaxed)
    }

    /// Remembers that the open channel does not take starts and uploads.
    pub(super) fn refuses_reports(&self) {
        if self.takes_reports.swap(false, Ordering::Relaxed) {
            tracing::info!(
                "the server's runner channel does not take starts and receipt uploads; they go \
                 over plain HTTP"
            );
        }
    }

    /// Sends `call` on the channel (opening it with `open` when none is open) and waits up to
    /// `timeout` for its answer. `None` when it is to go as plain HTTP: the server has no
    /// channel, or the request is longer than a channel line.
    pub(super) async fn call<F, Fut>(
        &self,
        call: ChannelCall,
        timeout: Duration,
        open: F,
    ) -> Option<Result<ChannelReply, ApiFailure>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<reqwest::Upgraded>, ApiFailure>>,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut line = Vec::new();
        // Serializing these types cannot fail (string keys, no maps of other keys).
        if push_line(&mut line, &ChannelRequest { id, call }).is_err()
            || line.len() > CHANNEL_MAX_LINE
        {
            return None;
        }
        let channel = match self.open_channel(open).await {
            Ok(Some(channel)) => channel,
            Ok(None) => return None,
            Err(failure) => return Some(Err(failure)),
        };
        let (answer, answered) = oneshot::channel();
        lock(&channel.waiting).insert(id, answer);
        // The reader closes the channel before it drops the waiting answers: a request put
        // down after that sees it closed here.
        if channel.closed.is_cancelled() {
            lock(&channel.waiting).remove(&id);
            return Some(Err(closed()));
        }
        let exchange = async {
            channel.write(&line).await?;
            answered.await.map_err(|_| closed())
        };
        Some(match tokio::time::timeout(timeout, exchange).await {
            Ok(answer) => answer,
            Err(_) => {
                channel.closed.cancel();
                Err(ApiFailure::Unavailable(format!(
                    "no answer on the runner channel within {} s; it was closed",
                    timeout.as_secs()
                )))
            }
        })
    }

    /// The open channel, opened now if there is none. `Ok(None)`: the server has none.
    async fn open_channel<F, Fut>(&self, open: F) -> Result<Option<Open>, ApiFailure>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<reqwest::Upgraded>, ApiFailure>>,
    {
        let mut slot = self.slot.lock().await;
        match &*slot {
            Slot::Open(open) if !open.closed.is_cancelled() => return Ok(Some(open.clone())),
            Slot::Unsupported => return Ok(None),
            Slot::Open(_) | Slot::Closed => {}
        }
        *slot = Slot::Closed;
        let Some(stream) = open().await? else {
            *slot = Slot::Unsupported;
            return Ok(None);
        };
        let (read, write) = tokio::io::split(stream);
        let open = Open {
            writer: Arc::new(Mutex::new(Some(write))),
            waiting: Arc::default(),
            closed: CancellationToken::new(),
        };
        self.takes_reports.store(true, Ordering::Relaxed);
        tracing::info!("opened the runner channel");
        tokio::spawn(read_answers(read, open.clone()));
        *slot = Slot::Open(open.clone());
        Ok(Some(open))
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        if let Slot::Open(open) = self.slot.get_mut() {
            open.closed.cancel();
        }
    }
}

fn closed() -> ApiFailure {
    ApiFailure::Unavailable("the runner channel closed before answering".to_owned())
}

/// Opens a channel with `request` (the `GET /runner/channel` with its credential): the
/// upgraded connection, `None` when the server does not open one, or why not.
pub(super) async fn upgrade(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<Option<reqwest::Upgraded>, ApiFailure> {
    let sent = request
        .header(reqwest::header::CONNECTION, "Upgrade")
        .header(reqwest::header::UPGRADE, CHANNEL_PROTOCOL)
        .send();
    let response = match tokio::time::timeout(timeout, sent).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            return Err(ApiFailure::Unavailable(format!(
                "/runner/channel: {}",
                error.without_url()
            )));
        }
        Err(_) => {
            return Err(ApiFailure::Unavailable(format!(
                "/runner/channel: no answer within {} s",
                timeout.as_secs()
            )));
        }
    };
    match response.status().as_u16() {
        101 => response.upgrade().await.map(Some).map_err(|error| {
            ApiFailure::Unavailable(format!("/runner/channel: {}", error.without_url()))
        }),
        // The credential is refused: so would every request be.
        401 => Err(sorted_failure("channel", response).await),
        // No such route (an older server), or the upgrade did not arrive (a proxy in between
        // drops the `Upgrade` header): the routes themselves still work.
        status @ 400..=499 => {
            tracing::info!(
                status,
                "the server did not open a runner channel; long-polls and heartbeats go over plain HTTP"
            );
            Ok(None)
        }
        _ => Err(sorted_failure("channel", response).await),
    }
}

/// Reads answers until either side closes the channel, and routes each to its request. When
/// it ends, the requests still waiting see their answer channel close, and the connection is
/// dropped.
async fn read_answers(stream: ReadHalf<reqwest::Upgraded>, open: Open) {
    let mut stream = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let mut line = Vec::new();
    loop {
        let read = tokio::select! {
            () = open.closed.cancelled() => break,
            read = read_line(&mut stream, &mut line) => read,
        };
        match read {
            Ok(true) => {}
            Ok(false) => break,
            Err(error) => {
                tracing::warn!(%error, "the runner channel could not be read; closing it");
                break;
            }
        }
        match serde_json::from_slice::<ChannelAnswer>(&line) {
            Ok(ChannelAnswer { id, reply }) => match lock(&open.waiting).remove(&id) {
                // A request that stopped waiting (it timed out) drops its answer.
                Some(answer) => drop(answer.send(reply)),
                None => {
                    tracing::warn!(id, ?reply, "an answer on the runner channel for no request");
                }
            },
            Err(error) => {
                tracing::warn!(%error, "an unreadable answer on the runner channel; closing it");
                break;
            }
        }
        line.clear();
    }
    open.closed.cancel();
    lock(&open.waiting).clear();
    // A write in progress ends (it completes, or its request times out) before this.
    open.writer.lock().await.take();
}
