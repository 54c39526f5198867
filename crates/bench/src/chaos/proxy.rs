//! A tiny TCP proxy on loopback that can cut or stall every connection it carries, standing in
//! for a flaky network between a device runner and the server. Cutting resets the connections
//! (SO_LINGER 0: the peers see ECONNRESET); stalling stops forwarding bytes while connections
//! stay open, as a black-holed route does.

use crate::error::{Error, Result};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

struct Shared {
    upstream: SocketAddr,
    stalled: watch::Sender<bool>,
    /// Cancelled to cut every connection open now; replaced by a fresh one at each cut.
    generation: Mutex<CancellationToken>,
}

/// A running proxy; stops when dropped.
pub struct Proxy {
    /// Where it listens (127.0.0.1, a free port).
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::io("binding the proxy"))?;
        let addr = listener
            .local_addr()
            .map_err(Error::io("reading the proxy address"))?;
        let shared = Arc::new(Shared {
            upstream,
            stalled: watch::channel(false).0,
            generation: Mutex::new(CancellationToken::new()),
        });
        let accepting = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(carry(client, Arc::clone(&accepting)));
            }
        });
        Ok(Proxy {
            addr,
            shared,
            accept,
        })
    }

    /// Its URL, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Resets every connection open now (new ones are accepted as before).
    pub fn cut(&self) {
        let mut generation = self
            .shared
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        generation.cancel();
        *generation = CancellationToken::new();
    }

    /// Stops (true) or resumes (false) forwarding on every connection, old and new.
    pub fn stall(&self, stalled: bool) {
        self.shared.stalled.send_replace(stalled);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// Carries one connection until either side closes it or it is cut.
async fn carry(client: TcpStream, shared: Arc<Shared>) {
    let cut = shared
        .generation
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let Ok(upstream) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    for stream in [&client, &upstream] {
        let _ = stream.set_nodelay(true);
        // Closing then resets the connection instead of ending it politely. (Deprecated because
        // a non-zero linger blocks the thread on drop; a zero linger does not block.)
        #[allow(deprecated)]
        let _ = stream.set_linger(Some(Duration::ZERO));
    }
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let up = pump(client_read, upstream_write, shared.stalled.subscribe());
    let down = pump(upstream_read, client_write, shared.stalled.subscribe());
    tokio::select! {
        () = cut.cancelled() => {}
        _ = async { tokio::join!(up, down) } => {}
    }
}

/// Copies bytes from `from` to `to`, holding them while the proxy is stalled.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        while *stalled.borrow_and_update() {
            if stalled.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
