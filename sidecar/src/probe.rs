//! Readiness: the facade is ready once the upstream MCP server answers an
//! `initialize` of the facade's own. Retries with backoff until it does.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::jsonrpc::{self, Kind, Message, RequestId};
use crate::upstream::{self, LinkEvent};

pub async fn until_ready(app: Arc<App>) {
    let mut delay = Duration::from_millis(200);
    loop {
        match probe(&app).await {
            Ok(()) => {
                app.ready.store(true, Ordering::Relaxed);
                app.spares.refill();
                tracing::info!(
                    upstream = app.target.kind(),
                    "upstream MCP server answered initialize; ready"
                );
                return;
            }
            Err(e) => tracing::warn!(error = %e, "upstream MCP server not ready yet"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

async fn probe(app: &App) -> Result<(), String> {
    let (link, mut events) = upstream::connect(&app.target, &app.link_limits)
        .await
        .map_err(|e| e.to_string())?;
    let id = RequestId::number(1);
    let params = serde_json::json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": { "name": "mcp-warden-readiness-probe", "version": env!("CARGO_PKG_VERSION") },
    });
    let msg = Message::parse(jsonrpc::request(&id, "initialize", &params))
        .map_err(|_| "probe message")?;
    let verdict = |m: &Message| {
        if m.is_error {
            Err("initialize was refused".to_string())
        } else {
            Ok(())
        }
    };
    let wait = async {
        // An HTTP upstream may answer in the POST's response itself.
        if let Some(answer) = link.send(msg).await.map_err(|e| e.to_string())? {
            return verdict(&answer);
        }
        while let Some(event) = events.recv().await {
            match event {
                LinkEvent::Message { bytes, .. } => {
                    if let Ok(m) = Message::parse(bytes) {
                        if m.kind == Kind::Response && m.id.as_ref() == Some(&id) {
                            return verdict(&m);
                        }
                    }
                }
                LinkEvent::Failed { reason, .. } | LinkEvent::Closed { reason } => {
                    return Err(reason)
                }
            }
        }
        Err("the link closed".to_string())
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .map_err(|_| "no answer to initialize within 60s".to_string())?
}
