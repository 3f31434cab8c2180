//! Downstream stdio: one session whose messages are newline-delimited JSON
//! on the facade's own stdin/stdout, so a desktop client can spawn
//! `mcp-warden-sidecar run --stdio -- <server>` where it would spawn the
//! server. Logs go to stderr; stdout carries protocol only.
//!
//! Lines end at LF, CR or CRLF, as the strictest server splits them, and
//! every message written to stdout is one line ([`crate::framing`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio_util::codec::{AnyDelimiterCodecError, FramedRead};

use crate::app::App;
use crate::jsonrpc;
use crate::pipeline::refusal::Refusal;
use crate::session::work::Work;

/// Serve one client on stdin/stdout until stdin closes and the answers in
/// flight are written.
pub async fn run(app: Arc<App>) -> anyhow::Result<()> {
    // A desktop client that spawns the facade cannot send headers: requests
    // carry `params.auth.token` (seed 004), else the token in
    // MCP_WARDEN_TOKEN, else anonymous if the policy allows it.
    let env_token = std::env::var("MCP_WARDEN_TOKEN").ok();
    let owner = match app.policy.load().auth.authenticate(env_token.as_deref()) {
        Ok(identity) => Arc::new(identity),
        Err(_) => Arc::new(crate::pipeline::identity::Identity::anonymous()),
    };
    let session = app
        .sessions
        .create(&app, owner.clone(), owner.quota_key(None))?;
    // The standalone stream is open-ended: every answer and server message
    // goes to stdout in order.
    let (stream, mut rx) = session
        .open_standalone()
        .expect("a new session has no stream");
    let writer = tokio::spawn(async move {
        let mut out = BufWriter::new(tokio::io::stdout());
        while let Some(item) = rx.recv().await {
            let mut batch = vec![item];
            while let Some(more) = rx.try_recv() {
                batch.push(more);
            }
            for item in batch {
                let line = crate::framing::one_line(&item.bytes);
                if out.write_all(&line).await.is_err() || out.write_all(b"\n").await.is_err() {
                    return;
                }
            }
            if out.flush().await.is_err() {
                return;
            }
        }
    });
    let mut lines = FramedRead::new(
        tokio::io::stdin(),
        crate::framing::lines(app.limits.max_body_bytes),
    );
    while let Some(line) = lines.next().await {
        let line = match line {
            Ok(line) => line,
            Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => {
                let text = format!(
                    "the message is larger than the {}-byte limit",
                    app.limits.max_body_bytes
                );
                session.answer_error(
                    stream,
                    jsonrpc::error_response(None, jsonrpc::codes::INVALID_REQUEST, &text, None),
                );
                continue;
            }
            Err(AnyDelimiterCodecError::Io(e)) => {
                tracing::warn!(error = %e, "stdin read failed");
                break;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match crate::downstream::take(line) {
            Ok((msg, token)) => {
                let token = token.or_else(|| env_token.clone());
                match app.policy.load().auth.authenticate(token.as_deref()) {
                    Ok(caller) => Work::new(&session, msg, stream, &Arc::new(caller)).start(),
                    Err(failure) => {
                        crate::downstream::http::audit_auth_failure(&app, failure);
                        app.metrics
                            .policy_denials
                            .with_label_values(&["auth_required"])
                            .inc();
                        if msg.kind == crate::jsonrpc::Kind::Request {
                            let refusal = Refusal::Auth {
                                hint: "Send a valid token in params.auth.token.",
                            };
                            session.answer_error(stream, refusal.to_response(msg.id.as_ref()));
                        }
                    }
                }
            }
            Err((e, id)) => session.answer_error(
                stream,
                jsonrpc::error_response(id.as_ref(), e.code(), &e.to_string(), None),
            ),
        }
    }
    // stdin closed: give answers in flight a moment, then end the session.
    let deadline = tokio::time::Instant::now() + app.limits.upstream_wait;
    while session.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.sessions.remove(&app, &session.id, "stdin closed");
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    Ok(())
}
