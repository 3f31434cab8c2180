//! Newline-delimited JSON-RPC over any byte stream (stdio pipes, unix
//! sockets): the framing the MCP stdio transport defines. Every message is
//! written as exactly one line (raw CR/LF inside it become spaces).
//!
//! A writer task drains the link's queue and flushes only when the queue is
//! empty, so bursts share one syscall; a reader task splits lines (bounded in
//! length) and reports them as [`LinkEvent::Message`] without parsing them.
//! Lines are bytes, not text: a line that is not UTF-8 is dropped by the
//! router like any other line that is not JSON-RPC, instead of costing the
//! server its life.

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, FramedRead};

use super::{LinkEvent, LinkLimits};
use crate::jsonrpc::Message;

/// Start the reader and writer tasks. Returns the writer queue; the reader
/// reports to `events` and ends with the reason the stream closed, which the
/// caller turns into the `Closed` event (it may know better, e.g. an exit code).
pub fn start<R, W>(
    reader: R,
    writer: W,
    limits: &LinkLimits,
    events: mpsc::Sender<LinkEvent>,
) -> (mpsc::Sender<Message>, tokio::task::JoinHandle<String>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Message>(limits.queue_depth);
    tokio::spawn(async move {
        let mut out = BufWriter::with_capacity(64 * 1024, writer);
        while let Some(msg) = rx.recv().await {
            if write_line(&mut out, &msg.bytes).await.is_err() {
                return;
            }
            // Drain whatever is already queued before paying for a flush.
            while let Ok(msg) = rx.try_recv() {
                if write_line(&mut out, &msg.bytes).await.is_err() {
                    return;
                }
            }
            if out.flush().await.is_err() {
                return;
            }
        }
        let _ = out.shutdown().await;
    });
    let max = limits.max_message_bytes;
    let reader_task = tokio::spawn(async move {
        let codec = AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max);
        let mut lines = FramedRead::new(reader, codec);
        loop {
            match lines.next().await {
                Some(Ok(line)) => {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let event = LinkEvent::Message {
                        bytes: line,
                        related: None,
                    };
                    if events.send(event).await.is_err() {
                        return "session closed".to_string();
                    }
                }
                Some(Err(AnyDelimiterCodecError::MaxChunkLengthExceeded)) => {
                    return format!("the server sent a message over the {max}-byte limit");
                }
                Some(Err(AnyDelimiterCodecError::Io(e))) => return format!("read error: {e}"),
                None => return "the server closed its output".to_string(),
            }
        }
    });
    (tx, reader_task)
}

/// Every write to the link goes through here, so whatever a message holds it
/// reaches the server as exactly one line ([`crate::framing::one_line`]).
async fn write_line<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    bytes: &[u8],
) -> std::io::Result<()> {
    out.write_all(&crate::framing::one_line(bytes)).await?;
    out.write_all(b"\n").await
}
