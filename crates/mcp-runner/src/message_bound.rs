//! The bound on one message read from an MCP server, kept while it is read: a server that
//! answers with more than [`MAX_MCP_MESSAGE_BYTES`] ends its session instead of filling the
//! runner's memory.
//!
//! Over stdio a message is a line: [`BoundedLines`] counts the bytes since the last newline as
//! they come out of the child's stdout and fails the read once a line is longer than the
//! bound, which ends the session; over streamable HTTP rmcp's transport enforces the same bound
//! on a JSON body and on one SSE event, through [`WatchedHttp`], which sees it refuse one.
//! Either way [`Overflow`] records that the bound was
//! crossed, so the calls waiting on the session end as `answer_too_large`, not as a transport
//! that closed for no reason.
//!
//! The bound is well above the 1 MiB a result is kept at (the server cuts a longer one): an
//! `echo` of 1 MiB of arguments answers about twice that.

use crate::endpoints::{EndpointError, EndpointGuard};
use futures::TryStreamExt;
use futures::stream::{BoxStream, StreamExt};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, ReadBuf};

/// The longest message (a stdio line, an HTTP JSON body, an SSE event) read from an MCP server.
pub const MAX_MCP_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Whether a session's server sent a message longer than its bound; shared by the reader that
/// found it and the session that reports it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Overflow(Arc<AtomicBool>);

impl Overflow {
    /// Records that the bound was crossed.
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the bound was crossed.
    pub(crate) fn happened(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What a call whose session ended on an oversized message is told.
pub(crate) fn overflow_message() -> String {
    format!(
        "the MCP server sent a message longer than {} MiB; the runner stopped reading it and \
         ended the session, so the answer is not known",
        MAX_MCP_MESSAGE_BYTES / (1024 * 1024)
    )
}

/// A reader of newline-delimited messages that fails once a line is longer than `limit`
/// bytes (its newline not counted), recording it in its [`Overflow`]; every read after that
/// fails too. It never passes on more than `limit` bytes past the last newline: a read that
/// crosses the bound fails instead.
#[derive(Debug)]
pub(crate) struct BoundedLines<R> {
    inner: R,
    limit: usize,
    /// Bytes since the last newline.
    line: usize,
    overflow: Overflow,
}

impl<R> BoundedLines<R> {
    /// Reads `inner`, reporting an oversized line to `overflow`.
    pub(crate) fn new(inner: R, limit: usize, overflow: Overflow) -> Self {
        Self {
            inner,
            limit,
            line: 0,
            overflow,
        }
    }

    fn refused(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "an MCP message is longer than {} bytes; stopped reading",
                self.limit
            ),
        )
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.overflow.happened() {
            return Poll::Ready(Err(this.refused()));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let mut segments = buf.filled()[before..].split(|&byte| byte == b'\n');
        // The first segment continues the current line; each later one starts a new line.
        let mut line = this.line + segments.next().map_or(0, <[u8]>::len);
        let mut longest = line;
        for segment in segments {
            line = segment.len();
            longest = longest.max(line);
        }
        // Refused with an error, the bytes just read are not passed on.
        if longest > this.limit {
            this.overflow.set();
            return Poll::Ready(Err(this.refused()));
        }
        this.line = line;
        Ok(()).into()
    }
}

/// How many redirects an HTTP session follows for one request (as rmcp's own client).
const MAX_REDIRECTS: usize = 10;

/// The streamable HTTP client of a session: rmcp's reqwest client, built as rmcp builds its
/// own, that records in an [`Overflow`] a JSON body or an SSE event the transport refused for
/// its size (rmcp then ends the session, telling the waiting requests only that it closed).
#[derive(Clone, Debug)]
pub(crate) struct WatchedHttp {
    inner: reqwest::Client,
    overflow: Overflow,
    /// The last redirect the guard refused (rmcp reports the failed request only as text).
    refused: Arc<Mutex<Option<EndpointError>>>,
}

impl WatchedHttp {
    /// A client reporting to `overflow`: no idle connections kept (rmcp's choice, against
    /// delayed-ACK stalls), same-origin 307 and 308 redirects followed, nothing else. It
    /// connects only to addresses `guard` admits: names resolve through its resolver, a
    /// redirect to a refused address fails, and no proxy is used (a proxy would resolve and
    /// connect where the guard cannot see).
    pub(crate) fn new(overflow: Overflow, guard: &EndpointGuard) -> reqwest::Result<Self> {
        let refused = Arc::default();
        let inner = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .no_proxy()
            .dns_resolver(guard.resolver())
            .redirect(same_origin_redirects(guard.clone(), Arc::clone(&refused)))
            .build()?;
        Ok(Self {
            inner,
            overflow,
            refused,
        })
    }

    /// The last redirect the guard refused, if any.
    pub(crate) fn refused_redirect(&self) -> Option<EndpointError> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn watch_post(
        &self,
        posted: Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        match posted {
            Err(error @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                self.overflow.set();
                Err(error)
            }
            Ok(StreamableHttpPostResponse::Sse(events, session)) => Ok(
                StreamableHttpPostResponse::Sse(self.watch_events(events), session),
            ),
            other => other,
        }
    }

    fn watch_events(
        &self,
        events: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let overflow = self.overflow.clone();
        events
            .inspect_err(move |error| {
                // rmcp's event-size error is not public: known by its wording.
                if error.to_string().contains("exceeded the maximum size") {
                    overflow.set();
                }
            })
            .boxed()
    }
}

/// Only same-origin 307 and 308 redirects keep a POST's body and its headers on the server
/// they were meant for; any other is answered as it is. A redirect to an address `guard`
/// refuses fails the request, whatever its kind.
fn same_origin_redirects(
    guard: EndpointGuard,
    refusals: Arc<Mutex<Option<EndpointError>>>,
) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if let Some(refused) = guard.redirect_refusal(attempt.url()) {
            *refusals.lock().unwrap_or_else(PoisonError::into_inner) = Some(refused.clone());
            return attempt.error(refused);
        }
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

impl StreamableHttpClient for WatchedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let posted = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.watch_post(posted)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let posted = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.watch_post(posted)
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let events = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.watch_events(events))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let events = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.watch_events(events))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

    #[tokio::test]
    async fn lines_within_the_bound_pass_through_whole() {
        let input = b"{\"a\":1}\n0123456789\n\nxyz\n".to_vec();
        let overflow = Overflow::default();
        let mut reader =
            BufReader::with_capacity(3, BoundedLines::new(&input[..], 10, overflow.clone()));
        let mut all = Vec::new();
        reader.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, input);
        assert!(!overflow.happened());
    }

    #[tokio::test]
    async fn a_line_over_the_bound_fails_the_read_before_it_is_passed_on() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 64));
        input.push(b'\n');
        let overflow = Overflow::default();
        let mut reader =
            BufReader::with_capacity(8, BoundedLines::new(&input[..], 16, overflow.clone()));
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        assert_eq!(line, "short\n");
        line.clear();
        let error = reader.read_line(&mut line).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(overflow.happened());
        assert!(
            line.len() <= 17,
            "passed on {} bytes of the long line",
            line.len()
        );
        // It stays refused.
        assert!(reader.read_line(&mut line).await.is_err());
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_bound_is_read() {
        let mut input = vec![b'y'; 16];
        input.push(b'\n');
        let overflow = Overflow::default();
        let mut reader = BufReader::new(BoundedLines::new(&input[..], 16, overflow.clone()));
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line).await.unwrap();
        assert_eq!(line, input);
        assert!(!overflow.happened());
    }
}
