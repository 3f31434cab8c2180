//! Upstream over a unix socket served by `mcp-warden-sidecar bridge`: the
//! bridge starts one server process per connection, so a connection is a
//! session's private server, exactly like a stdio child.

use std::path::Path;

use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::{framed, Link, LinkEvent, LinkLimits, UpstreamError};

pub async fn connect(
    path: &Path,
    limits: &LinkLimits,
) -> Result<(Link, mpsc::Receiver<LinkEvent>), UpstreamError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| UpstreamError::Connect {
            path: path.display().to_string(),
            source,
        })?;
    let (read, write) = stream.into_split();
    let (events_tx, events_rx) = mpsc::channel(limits.queue_depth);
    let (tx, reader) = framed::start(read, write, limits, events_tx.clone());
    tokio::spawn(async move {
        let why = reader
            .await
            .unwrap_or_else(|e| format!("reader failed: {e}"));
        let reason = format!("the bridged MCP server closed the connection ({why})");
        let _ = events_tx.send(LinkEvent::Closed { reason }).await;
    });
    Ok((Link::framed(tx, None), events_rx))
}
