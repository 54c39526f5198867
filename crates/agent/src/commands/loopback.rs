//! The loopback redirect of an authorization run on this machine (RFC 8252 §7.3): a fresh
//! port on 127.0.0.1 that waits for the browser to come back to `/callback`, and answers it
//! once the authorization is finished, so the person sees how it ended.

use std::time::Duration;
use switchyard_mcp_runner::oauth::authorize::Redirect;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Where the browser comes back, under the loopback port.
const CALLBACK_PATH: &str = "/callback";
/// Longest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// How long one connection may take to send its request head (requests are read one at a
/// time: a silent one must not hold the browser's redirect long).
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// A listening loopback port.
#[derive(Debug)]
pub(crate) struct Loopback {
    listener: TcpListener,
    port: u16,
}

/// The browser's redirect, waiting for its answer.
#[derive(Debug)]
pub(crate) struct Arrived {
    /// What it carried.
    pub(crate) redirect: Redirect,
    stream: TcpStream,
}

impl Loopback {
    /// Listens on a fresh port of 127.0.0.1.
    pub(crate) async fn bind() -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        Ok(Self { listener, port })
    }

    /// The redirect URI to register and send.
    pub(crate) fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    /// Waits for a request to the callback path that `belongs` accepts (it carries the
    /// authorization's state); others are answered 404 or 400 and ignored, so no other local
    /// request can end the authorization.
    pub(crate) async fn arrival(
        &self,
        belongs: impl Fn(&Redirect) -> bool,
    ) -> std::io::Result<Arrived> {
        loop {
            let (mut stream, _) = self.listener.accept().await?;
            let Ok(Ok(Some(target))) =
                tokio::time::timeout(HEAD_TIMEOUT, request_target(&mut stream)).await
            else {
                continue;
            };
            match redirect_of(&target) {
                Some(redirect) if belongs(&redirect) => return Ok(Arrived { redirect, stream }),
                Some(_) => {
                    let _ = respond(
                        &mut stream,
                        400,
                        "Not the authorization this port waits for.",
                    )
                    .await;
                }
                None => {
                    let _ = respond(&mut stream, 404, "Not found.").await;
                }
            }
        }
    }
}

impl Arrived {
    /// Answers the browser: `ok`, and a line for the person to read.
    pub(crate) async fn answer(mut self, ok: bool, text: &str) {
        let status = if ok { 200 } else { 400 };
        // The person's browser may be gone: what matters happened already.
        let _ = respond(&mut self.stream, status, text).await;
    }
}

/// The target of a `GET` request's head (`None`: not a GET, or no head within the bound).
async fn request_target(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut chunk).await?;
        if read == 0 || head.len() + read > MAX_HEAD {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..read]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    Ok(match (words.next(), words.next()) {
        (Some("GET"), Some(target)) => Some(target.to_owned()),
        _ => None,
    })
}

/// The redirect a request target `/callback?…` carries.
fn redirect_of(target: &str) -> Option<Redirect> {
    let url = reqwest::Url::parse(&format!("http://127.0.0.1{target}")).ok()?;
    if url.path() != CALLBACK_PATH {
        return None;
    }
    let mut redirect = Redirect::default();
    for (key, value) in url.query_pairs() {
        let value = Some(value.into_owned());
        match key.as_ref() {
            "code" => redirect.code = value,
            "state" => redirect.state = value,
            "iss" => redirect.iss = value,
            "error" => redirect.error = value,
            _ => {}
        }
    }
    Some(redirect)
}

async fn respond(stream: &mut TcpStream, status: u16, text: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>Switchyard</title><p>{}</p>",
        escape(text)
    );
    let answer = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\n\
         content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(answer.as_bytes()).await?;
    stream.shutdown().await
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callback_carries_code_state_and_issuer() {
        let redirect =
            redirect_of("/callback?code=abc&state=s%201&iss=https%3A%2F%2Fas.example").unwrap();
        assert_eq!(redirect.code.as_deref(), Some("abc"));
        assert_eq!(redirect.state.as_deref(), Some("s 1"));
        assert_eq!(redirect.iss.as_deref(), Some("https://as.example"));
        assert_eq!(redirect.error, None);
        assert!(redirect_of("/favicon.ico").is_none());
    }
}
