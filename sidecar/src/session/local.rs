//! A legacy client in front of a modern server: what the facade says on the
//! client's behalf, and what it answers itself.
//!
//! The client opened a session with `initialize`; the server has no
//! sessions. So the facade answers the handshake (the server's capabilities
//! from `server/discover`, cut by the policy), keeps what the client said
//! (capabilities, identity) to put in every request's `_meta`, answers
//! `ping` and `logging/setLevel` itself (the level goes in `_meta` too),
//! and holds one `subscriptions/listen` on the server for the session: the
//! list-change notifications the server offers and the resources the
//! client subscribed to, which reach the client's GET stream as legacy
//! notifications. The listen is held as the session's caller with the
//! newest credential the client opened its GET stream with: a gateway
//! upstream holds it no longer than that credential is good, and the GET
//! stream ends with it too, so a client that comes back with a fresh token
//! has the listen held again as that token's caller.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use super::channel::Outbound;
use super::Session;
use crate::era;
use crate::jsonrpc::{self, Kind, Message, RequestId};

/// What the facade keeps of a legacy client's handshake.
#[derive(Default)]
pub(super) struct LegacyClient {
    /// The client's capabilities and identity, as `_meta` of a modern request.
    pub(super) meta: Option<Map<String, Value>>,
    /// The level `logging/setLevel` asked for.
    pub(super) log_level: Option<String>,
    /// Resources the client subscribed to.
    pub(super) subscribed: BTreeSet<String>,
    /// The facade's id of the session's `subscriptions/listen` on the server.
    pub(super) listen: Option<u64>,
    /// Held while the listen is opened again: one at a time, so the last to
    /// run reads the last subscription set.
    pub(super) relisten: Arc<tokio::sync::Mutex<()>>,
    /// Who the listen is held as, when not the session's owner as it
    /// opened the session: the same caller with a newer credential.
    pub(super) caller: Option<Arc<crate::auth::identity::Identity>>,
}

impl LegacyClient {
    pub(super) fn record(&mut self, params: &Value) {
        let capabilities = params
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let info = params
            .get("clientInfo")
            .cloned()
            .unwrap_or_else(|| json!({}));
        self.meta = Some(era::modern_meta(&capabilities, &info));
    }

    /// The `_meta` entries a request to the modern server carries.
    pub(super) fn outgoing_meta(&self) -> Map<String, Value> {
        let mut meta = self
            .meta
            .clone()
            .unwrap_or_else(|| era::modern_meta(&json!({}), &super::channel::client_info()));
        if let Some(level) = &self.log_level {
            meta.insert(era::meta::LOG_LEVEL.into(), json!(level));
        }
        meta
    }
}

/// The answer a legacy client gets to `initialize` in front of a modern
/// server: the version it asked for if the facade serves it, the server's
/// capabilities as the policy leaves them.
pub(crate) fn initialize_result(
    requested: Option<&str>,
    info: &crate::session::context::UpstreamInfo,
) -> Value {
    let version = requested
        .filter(|v| era::LEGACY_VERSIONS.contains(v))
        .unwrap_or(era::LATEST_LEGACY);
    let mut capabilities = crate::session::steps::discover::served_capabilities(&info.capabilities);
    // A legacy client is never offered the tasks extension: its calls
    // cannot carry the per-request declaration a task needs.
    if let Some(caps) = capabilities.as_object_mut() {
        caps.remove("extensions");
    }
    // The facade serves the log level itself (as `_meta` on each request).
    if info.capabilities.get("logging").is_some() {
        capabilities["logging"] = json!({});
    }
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": info.server_info,
    });
    if let Some(instructions) = &info.instructions {
        result["instructions"] = json!(instructions);
    }
    result
}

impl Session {
    /// `logging/setLevel` from a legacy client on a modern server.
    pub(crate) fn set_log_level(&self, level: &str) {
        self.state.lock().unwrap().legacy.log_level = Some(level.to_string());
    }

    /// A legacy client on a modern server opened its GET stream as `caller`
    /// (the session's owner): if that credential is good for longer than
    /// the one the listen is held with, the listen is held as it from now on.
    pub(crate) fn listen_as(self: &Arc<Self>, caller: &crate::auth::identity::Identity) {
        if !self.legacy_on_modern() {
            return;
        }
        {
            let mut st = self.state.lock().unwrap();
            let held = st.legacy.caller.as_deref().unwrap_or(&self.owner);
            let newer = match (held.expires_at, caller.expires_at) {
                (Some(held), Some(fresh)) => fresh > held,
                _ => false,
            };
            if !newer {
                return;
            }
            st.legacy.caller = Some(Arc::new(caller.clone()));
        }
        let relisten = self.state.lock().unwrap().legacy.relisten.clone();
        let session = self.clone();
        let deadline = self.app.limits.upstream_wait;
        tokio::spawn(async move {
            let _turn = relisten.lock().await;
            let _ = tokio::time::timeout(deadline, session.legacy_listen()).await;
        });
    }

    /// A legacy client on a modern server (un)subscribed to `uri`: the set
    /// changes now, and the session's listen on the server is opened again
    /// with it in the background — the client's answer never waits on the
    /// server's stream, and the reopening has a deadline of its own.
    pub(crate) fn legacy_subscribe(self: &Arc<Self>, uri: &str, on: bool) {
        let relisten = {
            let mut st = self.state.lock().unwrap();
            if on {
                st.legacy.subscribed.insert(uri.to_string());
            } else {
                st.legacy.subscribed.remove(uri);
            }
            st.legacy.relisten.clone()
        };
        let session = self.clone();
        let deadline = self.app.limits.upstream_wait;
        tokio::spawn(async move {
            let _turn = relisten.lock().await;
            if tokio::time::timeout(deadline, session.legacy_listen())
                .await
                .is_err()
            {
                tracing::warn!(
                    session = %session.id,
                    "the MCP server did not take the new resource subscription in time"
                );
            }
        });
    }

    /// (Re)open the session's `subscriptions/listen` on the modern server:
    /// the list changes the server offers, and the subscribed resources.
    pub(crate) async fn legacy_listen(self: &Arc<Self>) {
        let caps = self
            .app
            .upstream
            .get()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        let offers = |path: &str| caps.pointer(path).and_then(Value::as_bool) == Some(true);
        let (old, filter, meta, caller) = {
            let mut st = self.state.lock().unwrap();
            let mut filter = Map::new();
            for (key, path) in [
                ("toolsListChanged", "/tools/listChanged"),
                ("promptsListChanged", "/prompts/listChanged"),
                ("resourcesListChanged", "/resources/listChanged"),
            ] {
                if offers(path) {
                    filter.insert(key.into(), json!(true));
                }
            }
            if !st.legacy.subscribed.is_empty() {
                let uris: Vec<&String> = st.legacy.subscribed.iter().collect();
                filter.insert("resourceSubscriptions".into(), json!(uris));
            }
            let caller = st
                .legacy
                .caller
                .clone()
                .unwrap_or_else(|| self.owner.clone());
            (
                st.legacy.listen.take(),
                filter,
                st.legacy.outgoing_meta(),
                caller,
            )
        };
        if let Some(n) = old {
            self.channel.unregister(n);
            self.channel.cancel(n, "the subscription changed").await;
        }
        if filter.is_empty() || self.is_closed() {
            return;
        }
        let Ok(credential) = self.upstream_credential(&caller).await else {
            return;
        };
        let n = self.channel.mint();
        // Its answer (the server ended the subscription) is not awaited.
        let (answer, _) = oneshot::channel();
        self.channel.register(
            n,
            Outbound {
                answer,
                session: Arc::downgrade(self),
                client: None,
                cancelled: None,
            },
        );
        let params = json!({ "notifications": filter, "_meta": meta });
        let id = RequestId::number(n);
        let Ok(msg) = Message::parse(jsonrpc::request(&id, "subscriptions/listen", &params)) else {
            return;
        };
        self.state.lock().unwrap().legacy.listen = Some(n);
        if self.channel.send_as(msg, credential).await.is_err() {
            self.channel.unregister(n);
        }
    }
}

/// Whether `msg` is the listen's acknowledgement (a legacy client never
/// hears of it).
pub(super) fn is_acknowledgement(msg: &Message) -> bool {
    msg.kind == Kind::Notification && msg.method() == "notifications/subscriptions/acknowledged"
}
