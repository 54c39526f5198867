//! A bounded tail of a child's stderr, for diagnostics only.
//!
//! A task drains the pipe continuously (a full pipe would block the child) and keeps the last
//! [`TAIL_LIMIT`] bytes. The tail never goes into call results.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

/// How many trailing bytes a tail keeps.
pub const TAIL_LIMIT: usize = 256 * 1024;

/// The last `limit` bytes written to it.
#[derive(Debug)]
pub struct ByteTail {
    bytes: VecDeque<u8>,
    limit: usize,
}

impl ByteTail {
    /// An empty tail keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            limit,
        }
    }

    /// Appends `chunk`, dropping the oldest bytes beyond the limit.
    pub fn push(&mut self, chunk: &[u8]) {
        let chunk = &chunk[chunk.len().saturating_sub(self.limit)..];
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(self.limit);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }

    /// The kept bytes as text; invalid UTF-8 (including a character cut at the start) becomes
    /// U+FFFD.
    pub fn to_string_lossy(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        let mut bytes = Vec::with_capacity(self.bytes.len());
        bytes.extend_from_slice(front);
        bytes.extend_from_slice(back);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A [`ByteTail`] fed by a background task reading a pipe until EOF.
#[derive(Debug)]
pub struct PipeTail {
    tail: Arc<Mutex<ByteTail>>,
    reader: JoinHandle<()>,
}

impl PipeTail {
    /// Starts draining `pipe` into a tail of [`TAIL_LIMIT`] bytes.
    pub fn spawn(mut pipe: impl AsyncRead + Unpin + Send + 'static) -> Self {
        let tail = Arc::new(Mutex::new(ByteTail::new(TAIL_LIMIT)));
        let sink = Arc::clone(&tail);
        let reader = tokio::spawn(async move {
            let mut buffer = vec![0u8; 8 * 1024];
            // A read error ends the tail like EOF: the child's stderr is diagnostics only.
            while let Ok(read @ 1..) = pipe.read(&mut buffer).await {
                lock(&sink).push(&buffer[..read]);
            }
        });
        Self { tail, reader }
    }

    /// What the pipe has carried so far (its last [`TAIL_LIMIT`] bytes).
    pub fn snapshot(&self) -> String {
        lock(&self.tail).to_string_lossy()
    }

    /// Waits up to `within` for the pipe to reach EOF (the writer has exited), then returns
    /// the tail.
    pub async fn finish(mut self, within: Duration) -> String {
        // Whether the reader finished, timed out or failed, what was read so far is the answer.
        let _ = tokio::time::timeout(within, &mut self.reader).await;
        self.snapshot()
    }
}

impl Drop for PipeTail {
    fn drop(&mut self) {
        // A leftover process of the group could keep the pipe open; nobody reads the tail now.
        self.reader.abort();
    }
}

/// Locks the tail; a panic while holding the lock leaves bytes that are still worth reading.
fn lock(tail: &Mutex<ByteTail>) -> std::sync::MutexGuard<'_, ByteTail> {
    tail.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_below_the_limit() {
        let mut tail = ByteTail::new(8);
        tail.push(b"abc");
        tail.push(b"def");
        assert_eq!(tail.to_string_lossy(), "abcdef");
    }

    #[test]
    fn keeps_only_the_last_bytes_across_pushes() {
        let mut tail = ByteTail::new(8);
        tail.push(b"012345");
        tail.push(b"6789");
        assert_eq!(tail.to_string_lossy(), "23456789");
    }

    #[test]
    fn a_chunk_larger_than_the_limit_keeps_its_end() {
        let mut tail = ByteTail::new(4);
        tail.push(b"ab");
        tail.push(b"0123456789");
        assert_eq!(tail.to_string_lossy(), "6789");
    }

    #[test]
    fn a_character_cut_by_the_limit_becomes_a_replacement() {
        let mut tail = ByteTail::new(2);
        tail.push("xé!".as_bytes()); // 'é' is two bytes; the limit keeps only its second
        assert_eq!(tail.to_string_lossy(), "\u{FFFD}!");
    }

    #[tokio::test]
    async fn pipe_tail_reads_until_eof() {
        let (mut writer, reader) = tokio::io::duplex(64);
        let tail = PipeTail::spawn(reader);
        tokio::io::AsyncWriteExt::write_all(&mut writer, b"line one\nline two\n")
            .await
            .expect("write to the pipe");
        drop(writer);

        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tail.snapshot() != "line one\nline two\n" {
            assert!(tokio::time::Instant::now() < deadline, "tail never filled");
            tokio::task::yield_now().await;
        }
    }
}
