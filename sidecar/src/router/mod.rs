//! The router: which upstream link a client's messages go to, and which
//! session a request names.
//!
//! Where it sits: above the session, below the application. A legacy
//! client's session gets a channel of its own (a process, an upstream
//! session) or, in front of a modern server, the one shared hub; a modern
//! caller's requests go through the hub, or (a legacy server) a bridge the
//! facade holds for that caller. In gateway mode the one upstream is the
//! gateway link ([`crate::upstream::gateway`]), a modern server made of
//! several backends: the hub, and the link chooses the backend per request.
//! - [`sessions`]: the table of live sessions, lookup by `Mcp-Session-Id`,
//!   the idle reaper;
//! - [`probe`]: what the server is (its era), which decides the routes.

pub mod probe;
pub mod sessions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::auth::identity::Identity;
use crate::session::channel::{Channel, Era};
use crate::session::context::Context;
use sessions::Sessions;

/// A legacy server's session the facade holds for one modern caller.
pub struct Bridge {
    pub channel: Arc<Channel>,
    pub last_used: std::time::Instant,
}

/// Why a modern caller cannot be served now.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("the MCP server has not answered yet; retry shortly")]
    NotReady,
    #[error("the facade holds {0} server sessions for modern callers, its limit; retry later")]
    TooMany(usize),
}

/// The routes to the server: the session table, a modern server's hub and
/// a legacy server's bridges.
#[derive(Default)]
pub struct Router {
    pub sessions: Sessions,
    /// A modern server's one channel, shared by every caller.
    pub hub: OnceLock<Arc<Channel>>,
    /// Whether a modern server opens legacy sessions too, asked when the
    /// first legacy client comes ([`probe::legacy_sessions`]): then legacy
    /// clients get sessions of their own there, as on a legacy server, so
    /// the server's requests to the client (sampling, elicitation) reach it.
    pub legacy_too: tokio::sync::OnceCell<bool>,
    /// A legacy server's channels for modern clients, one per caller (the
    /// facade made their handshake), by quota key.
    pub bridges: Mutex<HashMap<String, Bridge>>,
}

impl Router {
    /// The channel a modern caller's requests go through: the modern
    /// server's hub, or (a legacy server) this caller's bridge, opened on
    /// first use.
    pub async fn modern_channel(
        &self,
        ctx: &Arc<Context>,
        quota_key: &str,
        caller: &Identity,
    ) -> Result<Arc<Channel>, ChannelError> {
        let info = ctx.upstream_info().await.ok_or(ChannelError::NotReady)?;
        if info.era == Era::Modern {
            return self.hub.get().cloned().ok_or(ChannelError::NotReady);
        }
        // The bridge is this caller's session upstream: the facade's own
        // handshake on it carries the caller's credential.
        let credential = if ctx.has_upstream_credentials() {
            ctx.credential_for(caller).await.ok().flatten()
        } else {
            None
        };
        let mut bridges = self.bridges.lock().unwrap();
        bridges.retain(|_, b| !b.channel.is_closed());
        if let Some(bridge) = bridges.get_mut(quota_key) {
            bridge.last_used = std::time::Instant::now();
            return Ok(bridge.channel.clone());
        }
        let cap = ctx.limits.max_sessions;
        if bridges.len() >= cap {
            // Room from the bridge idle longest, if one is idle at all.
            let idlest = bridges
                .iter()
                .filter(|(_, b)| !b.channel.in_use())
                .min_by_key(|(_, b)| b.last_used)
                .map(|(k, _)| k.clone());
            let Some(evict) = idlest else {
                return Err(ChannelError::TooMany(cap));
            };
            if let Some(old) = bridges.remove(&evict) {
                old.channel.close();
            }
        }
        let name: Arc<str> = format!("bridge:{}", bridges.len() + 1).into();
        let channel = Channel::start_bridge(ctx.clone(), name, credential);
        bridges.insert(
            quota_key.to_string(),
            Bridge {
                channel: channel.clone(),
                last_used: std::time::Instant::now(),
            },
        );
        ctx.metrics.bridges_active.set(bridges.len() as i64);
        Ok(channel)
    }

    /// End the bridges idle past the idle timeout (their servers stop).
    pub fn reap_bridges(&self, ctx: &Context) {
        let idle = ctx.limits.idle_timeout;
        let mut bridges = self.bridges.lock().unwrap();
        bridges.retain(|_, b| {
            let keep =
                !b.channel.is_closed() && (b.channel.in_use() || b.last_used.elapsed() < idle);
            if !keep {
                b.channel.close();
            }
            keep
        });
        ctx.metrics.bridges_active.set(bridges.len() as i64);
    }
}
