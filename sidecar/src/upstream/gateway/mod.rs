//! The gateway link: several backend facades, seen by the facade above as
//! one modern (2026-07-28) MCP server.
//!
//! Where it sits: an upstream link kind ([`crate::upstream`]). The whole
//! facade — client transports of both eras, sessions, the gateway's own
//! policy, the output filter, audit — runs above it unchanged, in front of
//! a "server" that is this link. Each backend is another facade's
//! Streamable HTTP endpoint, spoken to statelessly ([`super::http`] in
//! modern mode), so every backend keeps its own policy and the gateway's
//! only adds to it.
//!
//! ```text
//!   request ─┬─ server/discover ............ answered here (the union's capabilities)
//!            ├─ tools|prompts|resources/…list  every backend, each page followed,
//!            │                                 names renamed ([`names`]), conflicts withheld
//!            ├─ tools/call .................. the one backend the name routes to, as its own name
//!            ├─ prompts/get ................. likewise; what the caller may not see refused as unknown ([`unseen`])
//!            ├─ completion/complete ......... the backend its `ref` names ([`complete`])
//!            ├─ resources/read|subscribe …... the backend the URI names (`{backend}+{uri}`, [`unseen`])
//!            ├─ tasks/get|update|cancel ..... the backend the task id names ([`tasks`])
//!            └─ anything else ............... refused (-32601)
//! ```
//!
//! A watcher ([`health`]) asks each backend every few seconds whether it
//! answers and announces a list change when one goes or comes back. A
//! backend's own list changes (tools, prompts, resources) come up on the
//! callers' subscriptions held there ([`listen`]); a prompt or resource
//! change once the gateway has read that backend's list again ([`lists`]).
//!
//! Each request to a backend carries an assertion minted for that backend
//! from the caller the facade authenticated ([`assertion`]), never the
//! caller's token; a backend's answer — a result, or an error with the backend's own code — comes back
//! as it is, under the facade's id.

pub mod assertion;
mod complete;
mod health;
mod listen;
mod lists;
pub mod names;
mod tasks;
#[cfg(test)]
mod test_backend;
mod unseen;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use super::http;
use super::{Credential, HttpTarget, LinkEvent, LinkLimits, LinkMode, UpstreamError};
use crate::jsonrpc::{self, Kind, Message, RequestId};
use names::{Catalog, Conflict, Names, Unroutable};

/// One backend: a facade's Streamable HTTP endpoint.
pub struct Backend {
    pub name: String,
    pub target: HttpTarget,
}

/// Called with the whole conflict list and the conflicts new in it
/// whenever it changes (metrics and audit are the application's: it sets
/// this).
pub type ConflictObserver = Arc<dyn Fn(&[Conflict], &[Conflict]) + Send + Sync>;

/// Where the gateway's backends are and what it knows of their names.
pub struct GatewayTarget {
    pub backends: Vec<Backend>,
    /// Signs each backend's assertions; without it requests carry none.
    pub signer: Option<assertion::Signer>,
    pub(super) names: Mutex<Names>,
    /// Whether each backend answered its last list (`None`: not asked yet).
    pub(super) answering: Mutex<Vec<Option<bool>>>,
    /// Whether each backend serves the tasks extension (`None`: not known).
    pub(super) tasks: Mutex<Vec<Option<bool>>>,
    reported: Mutex<Vec<Conflict>>,
    observer: OnceLock<ConflictObserver>,
}

impl GatewayTarget {
    /// `backends` as `(name, prefix, target)`, prefix `""` for none.
    pub fn new(
        backends: Vec<(String, String, HttpTarget)>,
        signer: Option<assertion::Signer>,
    ) -> Result<GatewayTarget, String> {
        let mut seen = std::collections::BTreeSet::new();
        for (name, _, _) in &backends {
            if !names::valid_backend_name(name) {
                return Err(format!(
                    "backend name {name:?}: use lower-case letters, digits and `-`, starting with a letter"
                ));
            }
            if !seen.insert(name.clone()) {
                return Err(format!("backend {name:?} is given twice"));
            }
        }
        let answering = Mutex::new(vec![None; backends.len()]);
        let tasks = Mutex::new(vec![None; backends.len()]);
        let table = Names::new(
            backends
                .iter()
                .map(|(n, p, _)| (n.clone(), p.clone()))
                .collect(),
        );
        Ok(GatewayTarget {
            backends: backends
                .into_iter()
                .map(|(name, _, target)| Backend { name, target })
                .collect(),
            signer,
            names: Mutex::new(table),
            answering,
            tasks,
            reported: Mutex::new(Vec::new()),
            observer: OnceLock::new(),
        })
    }

    /// Serve the exposed name `name` from `backend` where it conflicts
    /// (the gateway's explicit mapping, [`Names::resolve`]).
    pub fn resolve(&self, name: &str, backend: &str) -> Result<(), String> {
        self.names.lock().unwrap().resolve(name, backend)
    }

    pub fn set_observer(&self, observer: ConflictObserver) {
        let _ = self.observer.set(observer);
    }

    /// The names withheld now.
    pub fn conflicts(&self) -> Vec<Conflict> {
        self.reported.lock().unwrap().clone()
    }

    /// Each backend's name, how many of its tools route, and whether it
    /// answered its last list (`None`: not asked yet).
    pub fn tool_counts(&self) -> Vec<(String, usize, Option<bool>)> {
        let names = self.names.lock().unwrap();
        let counts = names.routable_counts(Catalog::Tools);
        let answering = self.answering.lock().unwrap().clone();
        self.backends
            .iter()
            .zip(counts)
            .zip(answering)
            .map(|((b, n), up)| (b.name.clone(), n, up))
            .collect()
    }

    /// The canonical id `mcp:{backend}:{tool}` of a tool name a client
    /// sees (`None`: unknown or withheld).
    pub fn canonical_id(&self, exposed: &str) -> Option<String> {
        let names = self.names.lock().unwrap();
        let (b, name) = names.route(Catalog::Tools, exposed).ok()?;
        Some(format!("mcp:{}:{name}", names.backend_name(b)))
    }

    /// The name a client sees for backend `backend`'s tool `tool` (the
    /// inverse of [`GatewayTarget::canonical_id`]).
    pub fn exposed_name(&self, backend: &str, tool: &str) -> Option<String> {
        let b = self.backends.iter().position(|x| x.name == backend)?;
        Some(self.names.lock().unwrap().exposed(b, tool))
    }

    /// Whether a backend is known to serve the tasks extension.
    pub fn serves_tasks(&self) -> bool {
        self.tasks.lock().unwrap().contains(&Some(true))
    }

    /// Whether every backend said whether it serves tasks.
    pub fn knows_tasks(&self) -> bool {
        !self.tasks.lock().unwrap().contains(&None)
    }

    /// Tell the observer when the conflicts changed.
    pub(super) fn report(&self) {
        let now = self.names.lock().unwrap().conflicts();
        let (changed, new) = {
            let mut reported = self.reported.lock().unwrap();
            let changed = *reported != now;
            let new: Vec<Conflict> = now
                .iter()
                .filter(|c| !reported.contains(c))
                .cloned()
                .collect();
            *reported = now.clone();
            (changed, new)
        };
        if changed {
            for c in &new {
                tracing::warn!(
                    kind = c.kind.as_str(),
                    catalog = c.catalog.as_str(),
                    names = ?c.names,
                    backends = ?c.backends,
                    detail = %c.detail,
                    "gateway: names withheld (not resolved by picking a backend)"
                );
            }
            if let Some(observer) = self.observer.get() {
                observer(&now, &new);
            }
        }
    }
}

/// Answers the link is waiting for, by backend and the facade's id.
type Waiters = Mutex<HashMap<(usize, RequestId), oneshot::Sender<Result<Message, String>>>>;

/// One live gateway link: a modern HTTP link per backend.
pub struct State {
    gateway: Arc<GatewayTarget>,
    pub(super) links: Vec<Arc<http::State>>,
    waiters: Arc<Waiters>,
    /// The callers' subscriptions held at the backends, by the facade's id.
    listening: Arc<listen::Live>,
    /// What goes up to the facade (the gateway's own acknowledgements).
    up: mpsc::Sender<LinkEvent>,
    /// When each backend's changed lists were last read again.
    rereads: lists::Rereads,
}

impl State {
    pub(super) fn gateway(&self) -> &GatewayTarget {
        &self.gateway
    }
}

/// A live gateway link: its state, what keeps its backend links open, its events.
type Connected = (Arc<State>, Box<dyn Send + Sync>, mpsc::Receiver<LinkEvent>);

/// Open a link to every backend (nothing connects until the first request).
pub fn connect(
    gateway: &Arc<GatewayTarget>,
    limits: &LinkLimits,
) -> Result<Connected, UpstreamError> {
    let (up, events) = mpsc::channel(limits.queue_depth);
    let waiters: Arc<Waiters> = Arc::default();
    let listening: Arc<listen::Live> = Arc::default();
    let link: Arc<OnceLock<Weak<State>>> = Arc::default();
    let mut links = Vec::new();
    let mut guards = Vec::new();
    for (b, backend) in gateway.backends.iter().enumerate() {
        let mode = LinkMode {
            modern: true,
            ..LinkMode::default()
        };
        let (state, guard, rx) = http::connect(&backend.target, limits, mode)?;
        let pumped = Pumped {
            b,
            up: up.clone(),
            waiters: waiters.clone(),
            listening: listening.clone(),
            link: link.clone(),
        };
        tokio::spawn(pump(rx, pumped));
        links.push(state);
        guards.push(guard);
    }
    let state = Arc::new(State {
        gateway: gateway.clone(),
        links,
        waiters,
        listening,
        up: up.clone(),
        rereads: lists::Rereads::default(),
    });
    let _ = link.set(Arc::downgrade(&state));
    tokio::spawn(health::watch(Arc::downgrade(&state), up));
    Ok((state, Box::new(guards), events))
}

/// What one backend's pump needs: where its messages go, and the link
/// (set once it is built) for the lists it reads again.
struct Pumped {
    b: usize,
    up: mpsc::Sender<LinkEvent>,
    waiters: Arc<Waiters>,
    listening: Arc<listen::Live>,
    link: Arc<OnceLock<Weak<State>>>,
}

/// A backend's messages: answers the link waits for go to their waiter;
/// anything else (progress of a call, a list change) goes up as it came —
/// a prompt or resource list change once that backend's list is read again
/// ([`lists::reread`]), a resource update under the gateway's URI
/// ([`listen::gateway_uri`]). A subscription that one backend drops is not the
/// caller's to lose: it is held again there ([`listen`]), and the facade
/// hears nothing of the drop.
async fn pump(mut rx: mpsc::Receiver<LinkEvent>, p: Pumped) {
    let Pumped {
        b,
        up,
        waiters,
        listening,
        link,
    } = p;
    while let Some(event) = rx.recv().await {
        match event {
            LinkEvent::Message { mut bytes, related } => {
                if let Ok(m) = Message::parse(bytes.clone()) {
                    if let (Kind::Response, Some(id)) = (m.kind, &m.id) {
                        let waiter = waiters.lock().unwrap().remove(&(b, id.clone()));
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(Ok(m));
                            continue;
                        }
                        // A backend ended its part of a subscription the
                        // gateway holds (its assertion expired): held again.
                        if listening.holds(id) {
                            continue;
                        }
                    }
                    let notification = m.kind == Kind::Notification;
                    // The gateway acknowledges each subscription itself, once
                    // ([`listen::hold`]); each backend's would be one more.
                    if notification && m.method() == "notifications/subscriptions/acknowledged" {
                        continue;
                    }
                    if notification && m.method() == "notifications/resources/updated" {
                        let state = link.get().and_then(Weak::upgrade);
                        let names = state.as_ref().map(|s| s.gateway().names.lock().unwrap());
                        if let Some(renamed) = names.and_then(|n| listen::gateway_uri(&n, b, &m)) {
                            bytes = renamed;
                        }
                    }
                    let catalog = match notification {
                        true => lists::changed_catalog(m.method()),
                        false => None,
                    };
                    let state = catalog.and_then(|_| link.get()?.upgrade());
                    if let (Some(catalog), Some(state)) = (catalog, state) {
                        // Read off this pump: the list's answers come through it.
                        let (up, heard) = (up.clone(), std::time::Instant::now());
                        tokio::spawn(async move {
                            lists::reread(&state, b, catalog, heard).await;
                            drop(state);
                            let _ = up.send(LinkEvent::Message { bytes, related }).await;
                        });
                        continue;
                    }
                }
                if up
                    .send(LinkEvent::Message { bytes, related })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            LinkEvent::Failed { id, reason } => {
                let waiter = waiters.lock().unwrap().remove(&(b, id.clone()));
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(Err(reason));
                    }
                    None if listening.holds(&id) => {
                        tracing::debug!(backend = b, %reason, "gateway: a backend dropped a subscription; holding it again");
                    }
                    None => {
                        let _ = up.send(LinkEvent::Failed { id, reason }).await;
                    }
                }
            }
            LinkEvent::Closed { reason } => {
                tracing::warn!(backend = b, %reason, "gateway backend link closed");
            }
        }
    }
}

/// Cancel request `id` at whichever backend has it.
pub fn abort(state: &State, id: &RequestId) -> bool {
    state.listening.end(id);
    let mut any = false;
    for (b, link) in state.links.iter().enumerate() {
        any |= http::abort(link, id);
        state.waiters.lock().unwrap().remove(&(b, id.clone()));
    }
    any
}

/// One request to the gateway; its answer comes back from here.
pub async fn send(
    state: &Arc<State>,
    msg: Message,
    credential: Option<&Credential>,
) -> Result<Option<Message>, UpstreamError> {
    // Stateless backends take no client notifications (a cancellation is
    // the stream closing: [`abort`]).
    let (Kind::Request, Some(id)) = (msg.kind, msg.id.clone()) else {
        return Ok(None);
    };
    // Read into a value only where the request's params are looked at here
    // (a routed call reads its own: `routed`).
    let params = || {
        msg.to_value()
            .get_mut("params")
            .map(Value::take)
            .unwrap_or_else(|| json!({}))
    };
    let answer = match msg.method() {
        "server/discover" => {
            tasks::learn(state, &msg, credential).await;
            discover(&id, state.gateway().serves_tasks())
        }
        "tools/list" => lists::list(state, &id, &params(), Catalog::Tools, credential).await?,
        "prompts/list" => lists::list(state, &id, &params(), Catalog::Prompts, credential).await?,
        "resources/templates/list" => {
            lists::list(state, &id, &params(), Catalog::Templates, credential).await?
        }
        "resources/list" => lists::list_resources(state, &id, &params(), credential).await?,
        // A call's answer goes up as the backend wrote it, not read again.
        "tools/call" => {
            return routed(state, &id, &msg, Catalog::Tools, credential)
                .await
                .map(Some)
        }
        // A prompt the backend hides is refused as an absent one ([`unseen`]).
        "prompts/get" => unseen::prompt(state, &id, &msg, credential).await?,
        "completion/complete" => complete::routed(state, &id, &msg, credential).await?,
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            tasks::routed(state, &id, &msg, credential).await?
        }
        "subscriptions/listen" => return listen::hold(state, msg, credential),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            unseen::by_uri(state, &id, &msg, credential).await?
        }
        other => jsonrpc::error_response(
            Some(&id),
            jsonrpc::codes::METHOD_NOT_FOUND,
            &format!("the gateway does not route {other}"),
            None,
        ),
    };
    built(answer).map(Some)
}

/// An answer the gateway wrote, as a message.
fn built(answer: Bytes) -> Result<Message, UpstreamError> {
    Message::parse(answer)
        .map_err(|_| UpstreamError::Refused("the gateway built an invalid answer".into()))
}

/// The gateway as a modern server: the union's capabilities (the tasks
/// extension when a backend serves it).
fn discover(id: &RequestId, tasks: bool) -> Bytes {
    let mut result = json!({
        "supportedVersions": crate::era::MODERN_VERSIONS,
        "capabilities": {
            "tools": { "listChanged": true },
            "prompts": { "listChanged": true },
            "resources": { "listChanged": true, "subscribe": true },
            "completions": {},
        },
        "serverInfo": { "name": "mcp-warden-gateway", "version": env!("CARGO_PKG_VERSION") },
    });
    if tasks {
        result["capabilities"]["extensions"] = json!({ crate::era::TASKS_EXTENSION: {} });
    }
    jsonrpc::result_response(id, &result.to_string())
}

/// Ask backend `b`, as `credential`'s caller, and wait for its answer.
pub(super) async fn ask(
    state: &State,
    b: usize,
    msg: Message,
    credential: Option<&Credential>,
) -> Result<Message, String> {
    // Each backend hears of the caller through an assertion minted for it
    // alone; a caller the facade could not name (anonymous) sends none.
    let gateway = state.gateway();
    let minted = match (credential.and_then(Credential::principal), &gateway.signer) {
        (Some(who), Some(signer)) => {
            let until = credential.and_then(Credential::caller_expires_at);
            Some(signer.mint(who, &gateway.backends[b].name, until)?)
        }
        (Some(_), None) | (None, _) => None,
    };
    let id = msg.id.clone().expect("requests have ids");
    let (tx, rx) = oneshot::channel();
    state.waiters.lock().unwrap().insert((b, id.clone()), tx);
    let sent = http::post(&state.links[b], msg, minted.as_ref()).await;
    match sent {
        Ok(Some(answer)) => {
            state.waiters.lock().unwrap().remove(&(b, id));
            Ok(answer)
        }
        Ok(None) => rx
            .await
            .unwrap_or_else(|_| Err("the request was cancelled".into())),
        Err(e) => {
            state.waiters.lock().unwrap().remove(&(b, id));
            Err(e.to_string())
        }
    }
}

/// `msg` with its params replaced.
fn with_params(msg: &Message, params: &Value) -> Result<Message, String> {
    let id = msg.id.clone().expect("requests have ids");
    Message::parse(jsonrpc::request(&id, msg.method(), params)).map_err(|_| "bad request".into())
}

/// A request's params (an empty object when it has none) and its string
/// parameter `key` (empty when absent or not a string).
fn param_str(msg: &Message, key: &str) -> (Value, String) {
    let params = msg
        .to_value()
        .get("params")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let value = params
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    (params, value)
}

/// A call: to the backend its name routes to, as its own name. The
/// request goes on as the caller's facade wrote it when the backend knows
/// the name as exposed (no prefix), and the answer comes back as the
/// backend wrote it unless it is a task handle to rename.
async fn routed(
    state: &Arc<State>,
    id: &RequestId,
    msg: &Message,
    catalog: Catalog,
    credential: Option<&Credential>,
) -> Result<Message, UpstreamError> {
    let (mut params, exposed) = param_str(msg, "name");
    let gateway = state.gateway();
    let route = gateway.names.lock().unwrap().route(catalog, &exposed);
    let (b, name) = match route {
        Ok(route) => route,
        Err(why) => return built(unroutable(id, &exposed, why)),
    };
    let out = if name == exposed {
        msg.clone()
    } else {
        params["name"] = Value::String(name);
        with_params(msg, &params).map_err(UpstreamError::Refused)?
    };
    let answer = ask(state, b, out, credential).await.map_err(|e| {
        UpstreamError::Refused(format!("backend {}: {e}", gateway.backends[b].name))
    })?;
    match catalog {
        Catalog::Tools => match tasks::adopt_handle(state, b, &answer) {
            Some(renamed) => built(renamed),
            None => Ok(answer),
        },
        _ => Ok(answer),
    }
}

/// A name no backend may answer for. The facade's own policy normally
/// refuses it first (a name it never listed is unknown to its registry).
fn unroutable(id: &RequestId, name: &str, why: Unroutable) -> Bytes {
    let (text, reason) = match why {
        Unroutable::Unknown => (
            format!("no backend of the gateway serves {name:?}; list again"),
            "gateway_unknown_name",
        ),
        Unroutable::Withheld(kind) => (
            format!(
                "{name:?} is withheld by the gateway ({}): it could be confused with another backend's",
                kind.as_str()
            ),
            "gateway_name_withheld",
        ),
    };
    jsonrpc::error_response(
        Some(id),
        jsonrpc::codes::INVALID_PARAMS,
        &text,
        Some(json!({ "reason": reason })),
    )
}
