//! The life of a session's upstream link: connect, pump server messages into
//! the router, and on a crash answer what was in flight, back off, restart,
//! and replay the client's handshake so the session carries on. A server
//! that would not let go of a cancelled call is recycled the same way (at
//! once, and without spending the restart budget: it did not crash).

use std::sync::Arc;
use std::time::Instant;

use super::Session;
use crate::jsonrpc::{self, Message};
use crate::upstream::{self, Link, LinkEvent};

impl Session {
    fn restart_budget_left(&self, restarts: &mut Vec<Instant>) -> bool {
        let window = self.app.limits.restart_window;
        restarts.retain(|t| t.elapsed() < window);
        restarts.len() < self.app.limits.max_restarts as usize
    }

    /// Re-run the client's handshake on a fresh server so the session's state
    /// (negotiated version, capabilities) is what the client believes it is.
    async fn replay_handshake(&self, link: &Link) -> Result<(), String> {
        let (params, initialized) = {
            let st = self.state.lock().unwrap();
            (st.initialize.clone(), st.initialized)
        };
        let Some(params) = params else { return Ok(()) };
        let answer = self
            .internal_request(Some(link), "initialize", &params)
            .await?;
        if answer.is_error {
            return Err("the restarted MCP server refused the session's initialize".into());
        }
        if initialized {
            let note = jsonrpc::notification("notifications/initialized", &serde_json::json!({}));
            let note = Message::parse(note).map_err(|_| "internal notification".to_string())?;
            link.send(note).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

pub(super) async fn run(session: Arc<Session>) {
    let mut restarts: Vec<Instant> = Vec::new();
    let mut backoff = session.app.limits.restart_backoff_initial;
    let mut first = true;
    loop {
        if session.is_closed() {
            return;
        }
        let connected = if first {
            session.app.spares.take().await
        } else {
            upstream::connect(&session.app.target, &session.app.link_limits).await
        };
        let (link, mut events) = match connected {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "cannot open the upstream link");
                session.fail_in_flight(&format!("{e}"));
                if !session.restart_budget_left(&mut restarts) {
                    return session.close(&format!("the MCP server cannot be started: {e}"));
                }
                restarts.push(Instant::now());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(session.app.limits.restart_backoff_max);
                continue;
            }
        };
        let link = Arc::new(link);
        // Pump events while replaying the handshake: its answer arrives
        // through the same event stream.
        let pump_session = session.clone();
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<String>();
        let pump = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                match event {
                    LinkEvent::Message { bytes, related } => {
                        pump_session.server_message(bytes, related).await
                    }
                    LinkEvent::Failed { id, reason } => pump_session.fail_request(&id, &reason),
                    LinkEvent::Closed { reason } => {
                        let _ = closed_tx.send(reason);
                        return;
                    }
                }
            }
            let _ = closed_tx.send("the upstream link ended".into());
        });
        let mut closed_rx = closed_rx;
        if !first {
            // A server that dies during the replay is a crash like any other:
            // it must count against the restart budget, not stall the session.
            let replayed = tokio::select! {
                r = session.replay_handshake(&link) => r,
                closed = &mut closed_rx => Err(closed.unwrap_or_else(|_| "the upstream link ended".into())),
            };
            if let Err(e) = replayed {
                tracing::warn!(session = %session.id, error = %e, "restarted MCP server did not take the handshake");
                pump.abort();
                drop(link);
                session.app.metrics.upstream_restarts.inc();
                if !session.restart_budget_left(&mut restarts) {
                    return session.close(&format!("the MCP server keeps failing ({e}); restart budget exhausted, the session is closed"));
                }
                restarts.push(Instant::now());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(session.app.limits.restart_backoff_max);
                continue;
            }
        }
        first = false;
        session.state.lock().unwrap().epoch += 1;
        session.link.send_replace(Some(link.clone()));
        let up_since = Instant::now();
        let mut link_rx = session.link.subscribe();
        let reason = tokio::select! {
            r = &mut closed_rx => r.unwrap_or_else(|_| "the upstream link ended".into()),
            // The session closed (DELETE, idle, shutdown): stop pumping.
            _ = link_rx.wait_for(|l| l.is_none()) => { pump.abort(); return; }
            () = session.recycle.notified() => {
                pump.abort();
                session.link.send_replace(None);
                drop(link);
                if session.is_closed() {
                    return;
                }
                session.fail_in_flight("the MCP server was restarted because it did not stop a cancelled call; retry the request");
                continue;
            }
        };
        session.link.send_replace(None);
        drop(link);
        if session.is_closed() {
            return;
        }
        session.app.metrics.upstream_restarts.inc();
        tracing::warn!(session = %session.id, %reason, "upstream MCP server went away; restarting");
        session.fail_in_flight(&format!(
            "{reason}; the facade is restarting it, retry the request"
        ));
        if !session.restart_budget_left(&mut restarts) {
            return session.close(&format!(
                "{reason}; restart budget exhausted, the session is closed"
            ));
        }
        restarts.push(Instant::now());
        // A link that stayed up for a whole window earns a fresh backoff.
        if up_since.elapsed() > session.app.limits.restart_window {
            backoff = session.app.limits.restart_backoff_initial;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(session.app.limits.restart_backoff_max);
    }
}
