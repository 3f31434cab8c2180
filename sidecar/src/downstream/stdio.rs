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
use crate::auth::identity::Identity;
use crate::gates::refusal::Refusal;
use crate::jsonrpc::{self, Kind, Message};
use crate::session::channel::Era;
use crate::session::stream::StreamRx;
use crate::session::work::Work;
use crate::session::Session;

/// Serve one client on stdin/stdout until stdin closes and the answers in
/// flight are written. The client's first request says its era: `initialize`
/// opens a legacy session; a request with modern `_meta` (or the
/// `server/discover` probe) a modern one, which sends through the modern
/// server's shared channel or this caller's bridge to a legacy server.
pub async fn run(app: Arc<App>) -> anyhow::Result<()> {
    // A desktop client that spawns the facade cannot send headers: requests
    // carry `params.auth.token` (stdio has no headers), else the token in
    // MCP_WARDEN_TOKEN, else anonymous if the policy allows it.
    let env_token = std::env::var("MCP_WARDEN_TOKEN").ok();
    let owner = match app.policy.load().auth.authenticate(env_token.as_deref()) {
        Ok(identity) => Arc::new(identity),
        Err(_) => Arc::new(crate::auth::identity::Identity::anonymous()),
    };
    let mut conn: Option<Conn> = None;
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
                answer(
                    conn.as_ref(),
                    jsonrpc::error_response(None, jsonrpc::codes::INVALID_REQUEST, &text, None),
                )
                .await;
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
        let (msg, token) = match crate::downstream::take(line) {
            Ok(taken) => taken,
            Err((e, id)) => {
                let bytes = jsonrpc::error_response(id.as_ref(), e.code(), &e.to_string(), None);
                answer(conn.as_ref(), bytes).await;
                continue;
            }
        };
        if conn.is_none() {
            match open(&app, &owner, &msg).await {
                Ok(Some(opened)) => conn = Some(opened),
                // A notification before any request: nothing to attach it to.
                Ok(None) => continue,
                Err(text) => {
                    if let Some(id) = &msg.id {
                        let bytes = jsonrpc::error_response(Some(id), -32000, &text, None);
                        answer(None, bytes).await;
                    }
                    continue;
                }
            }
        }
        let Conn {
            session, stream, ..
        } = conn.as_ref().expect("opened above");
        let token = token.or_else(|| env_token.clone());
        match app.policy.load().auth.authenticate(token.as_deref()) {
            Ok(caller) => Work::new(session, msg, *stream, &Arc::new(caller)).start(),
            Err(failure) => {
                crate::downstream::http::audit_auth_failure(&app, failure.clone());
                app.metrics
                    .policy_denials
                    .with_label_values(&["auth_required"])
                    .inc();
                if msg.kind == crate::jsonrpc::Kind::Request {
                    let refusal = match failure {
                        crate::auth::AuthFailure::InsufficientScope(scope) => {
                            Refusal::Scope { scope }
                        }
                        _ => Refusal::Auth {
                            hint: "Send a valid token in params.auth.token.",
                        },
                    };
                    session.answer_error(*stream, refusal.to_response(msg.id.as_ref()));
                }
            }
        }
    }
    let Some(Conn {
        session, writer, ..
    }) = conn
    else {
        return Ok(());
    };
    // stdin closed: give answers in flight a moment, then end the session.
    let deadline = tokio::time::Instant::now() + app.limits.upstream_wait;
    while session.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !app
        .router
        .sessions
        .remove(&app, &session.id, "stdin closed")
    {
        session.close("stdin closed");
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    Ok(())
}

/// The client's session on this connection, and the task writing stdout.
struct Conn {
    session: Arc<Session>,
    stream: u64,
    writer: tokio::task::JoinHandle<()>,
}

/// Open the session the client's first message asks for: modern for a
/// request with modern `_meta` (or `server/discover`), else legacy.
/// `Ok(None)`: a notification, which opens nothing.
async fn open(
    app: &Arc<App>,
    owner: &Arc<Identity>,
    msg: &Message,
) -> Result<Option<Conn>, String> {
    if msg.kind != Kind::Request {
        return Ok(None);
    }
    let modern = msg.method() == "server/discover"
        || (msg.mentions(crate::era::meta::PROTOCOL_VERSION.as_bytes())
            && crate::era::request_version(&msg.to_value()).is_some_and(crate::era::is_modern));
    let session = if modern {
        let quota_key = owner.quota_key(None);
        let channel = app
            .modern_channel(&quota_key, owner)
            .await
            .map_err(|e| e.to_string())?;
        // The audit correlates a modern caller's requests by identity and id.
        let name = owner.state_hash();
        Session::on_channel(
            app.ctx.clone(),
            name.into(),
            owner.clone(),
            quota_key,
            channel,
            Era::Modern,
        )
    } else {
        app.upstream_info()
            .await
            .ok_or("the MCP server has not answered yet; retry shortly")?;
        app.create_session(owner.clone(), owner.quota_key(None))
            .await
            .map_err(|e| e.to_string())?
    };
    // The standalone stream is open-ended: every answer and server message
    // goes to stdout in order.
    let (stream, rx) = session
        .open_standalone()
        .expect("a new session has no stream");
    let writer = tokio::spawn(write_stdout(rx));
    Ok(Some(Conn {
        session,
        stream,
        writer,
    }))
}

/// Answer on the session's stream, or (before there is one) on stdout
/// directly: nothing else writes it then.
async fn answer(conn: Option<&Conn>, bytes: bytes::Bytes) {
    match conn {
        Some(c) => c.session.answer_error(c.stream, bytes),
        None => {
            let mut out = tokio::io::stdout();
            let line = crate::framing::one_line(&bytes);
            let _ = out.write_all(&line).await;
            let _ = out.write_all(b"\n").await;
            let _ = out.flush().await;
        }
    }
}

async fn write_stdout(mut rx: StreamRx) {
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
}
