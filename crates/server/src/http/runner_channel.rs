//! The runner channel (`GET /api/v1/runner/channel`, upgraded to
//! [`CHANNEL_PROTOCOL`]): a device runner's lease long-poll, heartbeats, starts and receipt
//! uploads on one connection, as JSON lines (see `switchyard_protocol::runner::ChannelRequest`).
//!
//! Why it exists: an idle runner spends its life in a long-poll, and an HTTP/1 connection held
//! by hyper keeps an 8 KiB read buffer and an 8 KiB write buffer for all of it — most of what
//! a waiting runner costs the server. Upgraded, the connection leaves hyper, and what the
//! server holds while the runner waits is the socket, a small read buffer and the waiting
//! lease. A busy runner's starts and uploads on the channel skip an HTTP request each, two
//! of the hops a device call makes that a central one does not.
//!
//! Every request is authorized as its HTTP route is: a lease checks the device credential
//! (a revoked device is shut out at its next request), a heartbeat's, a start's and an
//! upload's own statement checks it. The upgrade itself reads nothing: it refuses only what is
//! not shaped like a device credential. At most one lease waits per channel; a new one
//! replaces it. Between leases the channel keeps the runner's lease feed, so a lease that
//! follows one which took every queued call waits for an announcement before it looks. A
//! channel on which nothing arrives for [`IDLE_LIMIT`] (a live runner heartbeats every few
//! seconds) is closed, and so is every channel when the server shuts down: it stops reading,
//! answers what it was asked and closes.
//!
//! No answer is written longer than [`CHANNEL_MAX_LINE`] (the runner would close the channel
//! on it): a longer one is replaced by `answer_too_long`, and the runner asks again over the
//! HTTP route. A lease answer is checked before it is given: its calls (large arguments, or
//! many of them) are queued again first, so nothing is leased that the runner never saw, and
//! the HTTP lease takes them. A heartbeat, start or upload asked again answers the same.

use crate::app::{App, LeaseFeed};
use crate::http::ApiError;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use switchyard_mcp_runner::device::lines::{push_line, read_line};
use switchyard_protocol::ErrorCode;
use switchyard_protocol::runner::{
    CHANNEL_MAX_LINE, CHANNEL_PROTOCOL, ChannelAnswer, ChannelCall, ChannelComplete, ChannelError,
    ChannelReply, ChannelRequest, ChannelStart, Heartbeat, LeaseAnswer, LeaseRequest,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::Instant;

/// A channel that receives nothing for this long is closed.
const IDLE_LIMIT: Duration = Duration::from_secs(90);
/// The channel's read buffer: a request line is about a hundred bytes; longer ones are read
/// through it in pieces.
const READ_BUFFER_BYTES: usize = 512;

/// The most answers a channel holds unsent before it stops reading requests.
const MAX_UNSENT_BYTES: usize = 256 * 1024;
/// The most heartbeats, starts and uploads a channel answers at once before it stops reading
/// requests (a device runs a few calls at once; its outbox holds at most 64).
const MAX_PENDING: usize = 64;

/// A request being answered (a waiting lease, a heartbeat, a start, an upload), boxed: its
/// state lives only while it is pending.
type PendingAnswer = Pin<Box<dyn Future<Output = ChannelAnswer> + Send>>;
/// The waiting lease: its answer, and the feed the next lease follows on with.
type PendingLease = Pin<Box<dyn Future<Output = (ChannelAnswer, Option<LeaseFeed>)> + Send>>;

/// Whether a request asks for the runner channel (`Upgrade: switchyard-runner-channel/1`).
pub(super) fn asks_for_channel(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(CHANNEL_PROTOCOL))
}

/// Answers `101 Switching Protocols` and serves the channel once the connection is handed
/// over. Each request will check `credential`.
pub(super) fn accept(app: App, credential: String, upgrade: OnUpgrade) -> Response {
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => serve(app, credential, TokioIo::new(upgraded)).await,
            Err(error) => tracing::debug!(%error, "a runner channel was not handed over"),
        }
    });
    (
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::CONNECTION, HeaderValue::from_static("upgrade")),
            (header::UPGRADE, HeaderValue::from_static(CHANNEL_PROTOCOL)),
        ],
    )
        .into_response()
}

/// Serves one channel until the runner closes it, it idles past [`IDLE_LIMIT`], it sends a
/// line that cannot be read, or the server shuts down.
///
/// Nothing here waits on one thing while another holds a resource: the waiting lease and the
/// requests being answered may each hold a database connection, so they are polled side by
/// side with reading and writing, and answers are written as the socket takes them. No line
/// is read while [`MAX_PENDING`] requests are being answered or [`MAX_UNSENT_BYTES`] of
/// answers wait to be sent: a runner that sends faster than it reads slows itself down.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(app: App, credential: String, stream: S) {
    let (read, mut write) = tokio::io::split(stream);
    let mut read = BufReader::with_capacity(READ_BUFFER_BYTES, read);
    let stopping = app.stopping().clone();
    let idle = tokio::time::sleep(IDLE_LIMIT);
    tokio::pin!(idle);
    let mut line = Vec::new();
    // The waiting lease and its request's id, the feed of the runner's leases when none
    // waits (see `LeaseFeed`), the other requests being answered.
    let mut lease: Option<(u64, PendingLease)> = None;
    let mut feed: Option<LeaseFeed> = None;
    let mut pending: FuturesUnordered<PendingAnswer> = FuturesUnordered::new();
    // Answers not yet taken by the socket, and whether the channel is to close once they are.
    let mut unsent: Vec<u8> = Vec::new();
    let mut closing = false;
    loop {
        let answer = tokio::select! {
            // Waiting leases answer (with no calls) when the server stops; then it closes.
            () = stopping.cancelled(), if lease.is_none() && pending.is_empty() && unsent.is_empty() => return,
            () = &mut idle => return,
            written = write.write(&unsent), if !unsent.is_empty() => {
                match written {
                    Ok(0) | Err(_) => return,
                    Ok(n) => drop(unsent.drain(..n)),
                }
                if unsent.is_empty() {
                    if closing {
                        return;
                    }
                    unsent.shrink_to(READ_BUFFER_BYTES);
                }
                continue;
            }
            (answer, kept) = async { lease.as_mut().expect("guarded by is_some").1.as_mut().await }, if lease.is_some() => {
                lease = None;
                feed = kept;
                answer
            }
            Some(answer) = pending.next(), if !pending.is_empty() => answer,
            read = read_line(&mut read, &mut line), if !closing
                && !stopping.is_cancelled()
                && pending.len() < MAX_PENDING
                && unsent.len() < MAX_UNSENT_BYTES =>
            {
                let request = match read {
                    Ok(true) => parse(&line),
                    Ok(false) => return,
                    // Too long, or the connection failed: answered if it still can be, then
                    // the channel closes.
                    Err(error) => {
                        closing = true;
                        Err(refused(0, ErrorCode::InvalidRequest, error.to_string()))
                    }
                };
                idle.as_mut().reset(Instant::now() + IDLE_LIMIT);
                line.clear();
                // A long line (a heartbeat with many active calls, a receipt) is not kept
                // for the idle time.
                line.shrink_to(READ_BUFFER_BYTES);
                match request {
                    Err(refusal) => refusal,
                    Ok(ChannelRequest { id, call: ChannelCall::Lease(req) }) => {
                        // A replaced lease takes the feed with it: the next one looks at once.
                        let leasing = leased(app.clone(), credential.clone(), id, req, feed.take());
                        match lease.replace((id, Box::pin(leasing))) {
                            // The replaced lease is answered with no calls.
                            Some((replaced, _)) => ChannelAnswer {
                                id: replaced,
                                reply: ChannelReply::Lease(LeaseAnswer::default()),
                            },
                            None => continue,
                        }
                    }
                    Ok(ChannelRequest { id, call }) => {
                        let (app, credential) = (app.clone(), credential.clone());
                        pending.push(match call {
                            ChannelCall::Heartbeat(beat) => {
                                Box::pin(heartbeat(app, credential, id, beat))
                            }
                            ChannelCall::Start(req) => Box::pin(started(app, credential, id, req)),
                            ChannelCall::Complete(req) => {
                                Box::pin(completed(app, credential, id, req))
                            }
                            // Taken by the arm above.
                            ChannelCall::Lease(_) => continue,
                        });
                        continue;
                    }
                }
            }
        };
        push_answer(&mut unsent, &answer);
    }
}

/// Appends `answer` to `unsent` as one line, or `answer_too_long` under its id when its line
/// would be longer than [`CHANNEL_MAX_LINE`].
fn push_answer(unsent: &mut Vec<u8>, answer: &ChannelAnswer) {
    let start = unsent.len();
    // Serializing these types cannot fail (string keys, no maps of other keys).
    let _ = push_line(unsent, answer);
    if unsent.len() - start > CHANNEL_MAX_LINE {
        unsent.truncate(start);
        let _ = push_line(unsent, &too_long(answer.id));
    }
}

/// The answer to a request whose answer does not fit on a line.
fn too_long(id: u64) -> ChannelAnswer {
    refused(
        id,
        ErrorCode::AnswerTooLong,
        format!(
            "the answer is longer than a runner channel line ({} KiB); ask over the HTTP route",
            CHANNEL_MAX_LINE / 1024
        ),
    )
}

/// The length of `answer`'s line, counted without building it.
fn line_length(answer: &ChannelAnswer) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(1);
    // Serializing these types cannot fail (string keys, no maps of other keys).
    let _ = serde_json::to_writer(&mut count, answer);
    count.0
}

/// Reads one request line; what cannot be read is answered `invalid_request` (under the id,
/// when there is one to read).
fn parse(line: &[u8]) -> Result<ChannelRequest, ChannelAnswer> {
    serde_json::from_slice(line).map_err(|error| {
        #[derive(serde::Deserialize)]
        struct Id {
            id: u64,
        }
        let id = serde_json::from_slice::<Id>(line).map_or(0, |i| i.id);
        refused(
            id,
            ErrorCode::InvalidRequest,
            format!("a runner channel request must be {{\"id\": N, \"lease\", \"heartbeat\", \"start\" or \"complete\": {{…}}}}: {error}"),
        )
    })
}

/// A lease, as `POST /runner/lease` answers it, through `feed` (the one the last lease on
/// this channel left), which it hands back for the next.
async fn leased(
    app: App,
    credential: String,
    id: u64,
    req: LeaseRequest,
    mut feed: Option<LeaseFeed>,
) -> (ChannelAnswer, Option<LeaseFeed>) {
    let leased = async {
        let device = Box::pin(app.authenticate_device(&credential)).await?;
        let leased = app.runner_lease_fed(&device, req, &mut feed).await?;
        Ok((device, leased))
    };
    let answer = match leased.await {
        Ok((device, leased)) => {
            let answer = ChannelAnswer {
                id,
                reply: ChannelReply::Lease(leased),
            };
            if line_length(&answer) <= CHANNEL_MAX_LINE {
                answer
            } else {
                if let ChannelReply::Lease(leased) = answer.reply {
                    app.runner_lease_withdraw(&device, &leased.calls).await;
                }
                too_long(id)
            }
        }
        Err(error) => reply(id, Err(error)),
    };
    (answer, feed)
}

/// A heartbeat, as `POST /runner/heartbeat` answers it.
async fn heartbeat(app: App, credential: String, id: u64, beat: Heartbeat) -> ChannelAnswer {
    let answer = app.runner_heartbeat(&credential, beat).await;
    reply(id, answer.map(ChannelReply::Heartbeat))
}

/// A start, as `POST /runner/calls/{call}/start` answers it.
async fn started(app: App, credential: String, id: u64, req: ChannelStart) -> ChannelAnswer {
    let call = req.call.to_string();
    let answer = app.runner_start(&credential, &call, req.start).await;
    reply(id, answer.map(ChannelReply::Start))
}

/// A receipt upload, as `POST /runner/calls/{call}/complete` answers it.
async fn completed(app: App, credential: String, id: u64, req: ChannelComplete) -> ChannelAnswer {
    let call = req.call.to_string();
    let answer = app.runner_complete(&credential, &call, req.receipt).await;
    reply(id, answer.map(ChannelReply::Complete))
}

fn reply(id: u64, result: crate::error::AppResult<ChannelReply>) -> ChannelAnswer {
    let reply = result.unwrap_or_else(|error| {
        let (status, code, message) = ApiError(error).public();
        ChannelReply::Error(ChannelError {
            status: status.as_u16(),
            code: code.as_str().to_owned(),
            message,
        })
    });
    ChannelAnswer { id, reply }
}

fn refused(id: u64, code: ErrorCode, message: String) -> ChannelAnswer {
    reply(id, Err(crate::error::AppError::refused(code, message)))
}
