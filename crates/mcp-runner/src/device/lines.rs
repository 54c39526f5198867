//! The runner channel's framing, for both of its ends: one JSON value per line, no line longer
//! than [`CHANNEL_MAX_LINE`].

use serde::Serialize;
use std::io;
use switchyard_protocol::runner::CHANNEL_MAX_LINE;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// Reads the next line into `line` (which must be empty), without its newline. `Ok(false)` at
/// the end of the stream; an error for a line longer than [`CHANNEL_MAX_LINE`].
///
/// Cancel-safe: what was read before a cancellation stays in `line`, and calling it again with
/// the same `line` goes on from there.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> io::Result<bool> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(false);
        }
        let (taken, complete) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => {
                line.extend_from_slice(&available[..end]);
                (end + 1, true)
            }
            None => {
                line.extend_from_slice(available);
                (available.len(), false)
            }
        };
        reader.consume(taken);
        if line.len() > CHANNEL_MAX_LINE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a runner channel line is longer than {CHANNEL_MAX_LINE} bytes"),
            ));
        }
        if complete {
            return Ok(true);
        }
    }
}

/// Appends `value` to `buffer` as one line.
pub fn push_line<T: Serialize>(buffer: &mut Vec<u8>, value: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *buffer, value).map_err(io::Error::other)?;
    buffer.push(b'\n');
    Ok(())
}

/// Writes lines made with [`push_line`] and flushes them.
pub async fn write_lines<W: AsyncWrite + Unpin>(writer: &mut W, lines: &[u8]) -> io::Result<()> {
    writer.write_all(lines).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    #[tokio::test]
    async fn lines_are_read_whole_across_small_reads() {
        let (mut client, server) = tokio::io::duplex(8);
        let mut reader = BufReader::with_capacity(4, server);
        let writer = tokio::spawn(async move {
            let mut lines = Vec::new();
            push_line(&mut lines, &serde_json::json!({"id": 1}))?;
            push_line(&mut lines, &"second")?;
            write_lines(&mut client, &lines).await
        });
        let mut line = Vec::new();
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, br#"{"id":1}"#);
        line.clear();
        assert!(read_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, br#""second""#);
        writer.await.unwrap().unwrap();
        line.clear();
        assert!(!read_line(&mut reader, &mut line).await.unwrap());
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_refused() {
        let long = vec![b'x'; CHANNEL_MAX_LINE + 2];
        let mut reader = BufReader::new(&long[..]);
        let mut line = Vec::new();
        let error = read_line(&mut reader, &mut line).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }
}
