//! A channel's supervisor: connect, pump the link's events, and on a crash
//! fail every request in flight, back off, restart (within the restart
//! budget) and replay the handshake the channel's session made, so the
//! sessions carry on; a server that will not let go of a cancelled call is
//! recycled the same way.
//!
//! Where it sits: started once per channel by [`super::Channel`]'s
//! constructors; what the link delivers goes to [`super::inbound`].

use std::sync::Arc;

use std::time::Instant;
use tokio::sync::oneshot;

use super::{Channel, Era};
use crate::jsonrpc::{self, Message};
use crate::upstream::{self, Link, LinkEvent};

impl Channel {
    /// Re-run the handshake on a fresh server so the sessions' state
    /// (negotiated version, capabilities) is what their clients believe.
    pub(super) async fn replay_handshake(&self, link: &Link) -> Result<(), String> {
        let (params, initialized) = {
            let st = self.state.lock().unwrap();
            (st.handshake.clone(), st.initialized)
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
            link.send_as(note, self.own_credential().await?.as_ref())
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    pub(super) fn restart_budget_left(&self, restarts: &mut Vec<Instant>) -> bool {
        let window = self.app.limits.restart_window;
        restarts.retain(|t| t.elapsed() < window);
        restarts.len() < self.app.limits.max_restarts as usize
    }

    /// The server cannot be kept up: the sessions that use the channel end
    /// (their clients start over), and the channel with them.
    pub(super) fn give_up(&self, reason: &str) {
        for session in self.listeners() {
            session.close(reason);
        }
        self.close();
    }
}

pub(super) async fn supervise(channel: Arc<Channel>) {
    let app = channel.app.clone();
    let mut restarts: Vec<Instant> = Vec::new();
    let mut backoff = app.limits.restart_backoff_initial;
    let mut first = true;
    loop {
        if channel.is_closed() {
            return;
        }
        let connected = if first && channel.spare {
            app.spares.take().await
        } else {
            let mut mode = app.link_mode(channel.era);
            // A legacy link's GET stream and DELETE carry its caller's credential.
            if channel.era == Era::Legacy {
                mode.credential = channel.credential.lock().unwrap().clone();
            }
            upstream::connect(&app.target, &app.link_limits, &mode).await
        };
        let (link, mut events) = match connected {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(channel = %channel.name, error = %e, "cannot open the upstream link");
                channel.fail_in_flight(&format!("{e}"));
                if !channel.restart_budget_left(&mut restarts) {
                    return channel.give_up(&format!("the MCP server cannot be started: {e}"));
                }
                restarts.push(Instant::now());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(app.limits.restart_backoff_max);
                continue;
            }
        };
        let link = Arc::new(link);
        // Pump events while replaying the handshake: its answer arrives
        // through the same event stream.
        let pump_channel = channel.clone();
        let (closed_tx, closed_rx) = oneshot::channel::<String>();
        let pump = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                match event {
                    LinkEvent::Message { bytes, related } => {
                        pump_channel.server_message(bytes, related).await
                    }
                    LinkEvent::Failed { id, reason } => pump_channel.fail_request(&id, &reason),
                    LinkEvent::Closed { reason } => {
                        let _ = closed_tx.send(reason);
                        return;
                    }
                }
            }
            let _ = closed_tx.send("the upstream link ended".into());
        });
        let mut closed_rx = closed_rx;
        if !first || channel.own_handshake {
            // A server that dies during the replay is a crash like any other:
            // it must count against the restart budget, not stall the sessions.
            let replayed = tokio::select! {
                r = channel.replay_handshake(&link) => r,
                closed = &mut closed_rx => Err(closed.unwrap_or_else(|_| "the upstream link ended".into())),
            };
            if let Err(e) = replayed {
                tracing::warn!(channel = %channel.name, error = %e, "restarted MCP server did not take the handshake");
                pump.abort();
                drop(link);
                app.metrics.upstream_restarts.inc();
                if !channel.restart_budget_left(&mut restarts) {
                    return channel.give_up(&format!("the MCP server keeps failing ({e}); restart budget exhausted, the session is closed"));
                }
                restarts.push(Instant::now());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(app.limits.restart_backoff_max);
                continue;
            }
        }
        first = false;
        channel.state.lock().unwrap().epoch += 1;
        channel.link.send_replace(Some(link.clone()));
        let up_since = Instant::now();
        let mut link_rx = channel.link.subscribe();
        let reason = tokio::select! {
            r = &mut closed_rx => r.unwrap_or_else(|_| "the upstream link ended".into()),
            // The channel closed (its session ended, shutdown): stop pumping.
            _ = link_rx.wait_for(|l| l.is_none()) => { pump.abort(); return; }
            () = channel.recycle.notified() => {
                pump.abort();
                channel.link.send_replace(None);
                drop(link);
                if channel.is_closed() {
                    return;
                }
                channel.fail_in_flight("the MCP server was restarted because it did not stop a cancelled call; retry the request");
                continue;
            }
        };
        channel.link.send_replace(None);
        drop(link);
        if channel.is_closed() {
            return;
        }
        app.metrics.upstream_restarts.inc();
        tracing::warn!(channel = %channel.name, %reason, "upstream MCP server went away; restarting");
        channel.fail_in_flight(&format!(
            "{reason}; the facade is restarting it, retry the request"
        ));
        if !channel.restart_budget_left(&mut restarts) {
            return channel.give_up(&format!(
                "{reason}; restart budget exhausted, the session is closed"
            ));
        }
        restarts.push(Instant::now());
        // A link that stayed up for a whole window earns a fresh backoff.
        if up_since.elapsed() > app.limits.restart_window {
            backoff = app.limits.restart_backoff_initial;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(app.limits.restart_backoff_max);
    }
}
