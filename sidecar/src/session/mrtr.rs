//! Asking a client for input, in either era (multi round-trip requests).
//!
//! Where it sits: between the session's intake and its answers. Three
//! translations, one rule — the policy decides on the request, and a retry
//! is held to the request it continues:
//! - **modern client, modern server**: the server's `input_required` result
//!   passes (filtered like any answer); its `requestState` is sealed inside
//!   one of the facade's ([`seal_answer`]), bound to the caller, the exact
//!   request and an expiry; the retry's is opened ([`Session::open_retry`])
//!   and the server gets its own state back.
//! - **modern client, legacy server**: the server asks with a request in
//!   the middle of a call (elicitation, sampling). The call stays open on
//!   the server; the client gets `input_required` with a sealed state naming
//!   the parked call ([`Session::park`]); its retry's answer goes to the
//!   server as the answer to that request, and the call's result to the
//!   retry ([`Handover`]). A retry that lands on another replica is relayed
//!   to the one holding the call (the state names it, under the MAC).
//! - **legacy client, modern server**: the server's `input_required` is
//!   turned into requests on the client's session, and the request retried
//!   with the answers (`Session::forward`, in `upstream`).
//!
//! The facade's own question — a person's approval of a call a rule marks
//! `check` — is asked the same way of a modern client ([`approval_request`]),
//! and with an elicitation request of a legacy one.

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::channel::Channel;
use super::Session;
use crate::auth::identity::Identity;
use crate::era;
use crate::gates::methods;
use crate::gates::refusal::Refusal;
use crate::jsonrpc::{self, Kind, Message, RequestId};
use crate::request_state::{self, Claims, StateError, StateKind};
use crate::session::context::Context;

/// The `inputResponses` key of the facade's approval question.
pub const APPROVAL_KEY: &str = "mcp-warden/approval";
/// The `inputResponses` key of a legacy server's question.
pub const SERVER_INPUT_KEY: &str = "mcp-warden/server-request";

pub(crate) mod answers;
mod seal;
pub(crate) use seal::{approval_request, seal_answer};

/// A modern client's request that may be answered with `input_required`.
#[derive(Debug, Clone)]
pub(crate) struct Round {
    caller: String,
    request: String,
    /// The capabilities the request declares (what the client can answer).
    capabilities: Value,
    /// What the retry's state said (none on a first try).
    claims: Option<Claims>,
    /// The retry answered the facade's approval question: accepted or not.
    approval: Option<bool>,
    /// The server asked only what the facade answers itself (`roots/list`):
    /// its state and those questions' keys, for the facade's own retry.
    own_retry: Option<(Option<String>, Vec<String>)>,
}

impl Round {
    pub(crate) fn new(caller: &Identity, method: &str, request: &Value) -> Round {
        let params = request.get("params").unwrap_or(&Value::Null);
        Round {
            caller: caller.state_hash(),
            request: request_state::request_hash(method, params),
            capabilities: params
                .get("_meta")
                .and_then(|m| m.get(era::meta::CLIENT_CAPABILITIES))
                .cloned()
                .unwrap_or_else(|| json!({})),
            claims: None,
            approval: None,
            own_retry: None,
        }
    }

    /// Whether a person approved this exact request (now, or in an earlier
    /// round the retry continues).
    pub(crate) fn approval(&self) -> Option<bool> {
        if self.claims.as_ref().is_some_and(|c| c.approved) {
            return Some(true);
        }
        self.approval
    }

    /// The server's own state, to send back in its place.
    pub(crate) fn upstream_state(&self) -> Option<&str> {
        if let Some((state, _)) = &self.own_retry {
            return state.as_deref();
        }
        self.claims.as_ref().and_then(|c| c.upstream.as_deref())
    }

    /// The server's `roots/list` questions the facade answers on this retry.
    pub(crate) fn roots_keys(&self) -> &[String] {
        if let Some((_, keys)) = &self.own_retry {
            return keys;
        }
        self.claims
            .as_ref()
            .map_or(&[], |c| c.roots_keys.as_slice())
    }

    /// Whether the client declared it can answer a request `method`.
    pub(crate) fn can_answer(&self, method: &str) -> bool {
        capability_for(method).is_some_and(|key| self.capabilities.get(key).is_some())
    }
}

/// The client capability a server request needs.
fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// The questions of an `input_required` answer, and the server's state.
pub(super) fn input_required(answer: &Message) -> Option<(Map<String, Value>, Option<String>)> {
    if answer.is_error || !answer.mentions(b"input_required") {
        return None;
    }
    let value = answer.to_value();
    let result = value.get("result")?;
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    let questions = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let state = result
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some((questions, state))
}

/// The keys of `questions` when the facade answers every one itself
/// (`roots/list`, from the policy); `None` when the client must answer some.
pub(super) fn only_roots(questions: &Map<String, Value>) -> Option<Vec<String>> {
    let roots = questions
        .iter()
        .all(|(_, q)| q.get("method").and_then(Value::as_str) == Some("roots/list"));
    (roots && !questions.is_empty()).then(|| questions.keys().cloned().collect())
}

/// The request again, with the client's answers and the server's state.
pub(super) fn retry_with(
    msg: &Message,
    responses: Map<String, Value>,
    state: Option<String>,
) -> Result<Message, String> {
    let responses =
        serde_json::value::to_raw_value(&Value::Object(responses)).expect("values serialize");
    jsonrpc::edit_params(msg, |p| {
        p.set("inputResponses", responses.clone());
        match &state {
            Some(s) => p.set("requestState", jsonrpc::raw_string(s)),
            None => {
                p.remove("requestState");
            }
        }
    })
}

impl Session {
    /// Put a modern server's questions to a legacy client, on the stream of
    /// its request `client`, as requests of the facade's; their results are
    /// the answers (by the server's keys).
    pub(super) async fn ask_for_input(
        &self,
        client: &RequestId,
        questions: Map<String, Value>,
        deadline: tokio::time::Instant,
    ) -> Result<Map<String, Value>, String> {
        let (stream, capabilities) = {
            let st = self.state.lock().unwrap();
            let stream = st
                .pending
                .get(client)
                .map(|p| p.stream)
                .ok_or("the request is no longer waiting")?;
            let capabilities = st
                .legacy
                .meta
                .as_ref()
                .and_then(|m| m.get(era::meta::CLIENT_CAPABILITIES))
                .cloned()
                .unwrap_or_default();
            (stream, capabilities)
        };
        let policy = self.app.policy.load_full();
        let mut answers = Map::new();
        for (key, question) in questions {
            let method = question.get("method").and_then(Value::as_str).unwrap_or("");
            // The server's scope is the policy's, never the client's.
            if method == "roots/list" {
                answers.insert(key, json!({ "roots": self.app.roots() }));
                continue;
            }
            if methods::server_request(method) != Some(true) {
                return Err(format!("the MCP server asked the client for `{method}`, which the facade does not pass to clients"));
            }
            let declared = capability_for(method).is_some_and(|c| capabilities.get(c).is_some());
            if !declared {
                return Err(format!("the MCP server asked the client for `{method}`, which the client did not declare it can answer"));
            }
            let params = question.get("params").cloned().unwrap_or_else(|| json!({}));
            // The server's question passes the output filter like any
            // message of the server's.
            let as_request = jsonrpc::request(&RequestId::number(0), method, &params);
            let params = Message::parse(as_request)
                .ok()
                .and_then(|m| crate::gates::output::filter_params(&m, &policy, &self.app.metrics))
                .ok_or("the MCP server's question is over the size limit")?;
            let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
            let reply = self
                .ask_client(stream, method, params, wait)
                .await
                .map_err(|()| {
                    format!("the client did not answer the server's `{method}` in time")
                })?;
            match reply.get("result") {
                Some(result) => {
                    // Content for the server: the same cap and redaction as
                    // an answer the client sends it as a message.
                    let mut result = result.clone();
                    crate::gates::output::filter_answer_value(
                        &mut result,
                        &policy,
                        &self.app.metrics,
                    )
                    .map_err(|e| e.to_string())?;
                    answers.insert(key, result);
                }
                None => return Err(format!("the client refused the server's `{method}`")),
            }
        }
        Ok(answers)
    }
}

/// Where the answer of a call answered with `input_required` goes: nowhere
/// yet (the client has not retried), or the retry.
#[derive(Clone, Debug, Default)]
pub(crate) struct Handover(Arc<Mutex<Target>>);

#[derive(Debug, Default)]
enum Target {
    #[default]
    Waiting,
    To(Weak<Session>, RequestId),
}

impl Handover {
    /// The call's answer: to the retry, under the retry's id. Before any
    /// retry the client no longer waits: nothing is owed.
    pub(crate) fn deliver(&self, _app: &Context, bytes: Bytes) {
        let target = std::mem::take(&mut *self.0.lock().unwrap());
        if let Target::To(session, id) = target {
            if let Some(session) = session.upgrade() {
                let bytes = jsonrpc::rebuild_bytes(&bytes, Some(&id), None).unwrap_or(bytes);
                session.answer_call(&id, bytes);
            }
        }
    }

    fn set(&self, session: &Arc<Session>, id: &RequestId) {
        *self.0.lock().unwrap() = Target::To(Arc::downgrade(session), id.clone());
    }
}

/// A call on a legacy server that waits for a modern client's answer.
pub struct Parked {
    /// The session that sent the call (its step still waits for the answer).
    _session: Arc<Session>,
    channel: Arc<Channel>,
    epoch: u64,
    /// The server's id of its question.
    server_id: RequestId,
    /// The facade's id of the call on the server.
    upstream: u64,
    handover: Handover,
    expires: Instant,
}

impl Context {
    /// Forget parked calls whose client never came back, and stop them on
    /// the server.
    pub fn sweep_parked(&self) {
        let now = Instant::now();
        let expired: Vec<Parked> = {
            let mut parked = self.parked.lock().unwrap();
            let keys: Vec<String> = parked
                .iter()
                .filter(|(_, p)| p.expires <= now)
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| parked.remove(k)).collect()
        };
        for p in expired {
            if p.channel.client_cancelled(p.upstream) {
                let channel = p.channel.clone();
                tokio::spawn(async move {
                    channel
                        .cancel(
                            p.upstream,
                            "mcp-warden: the client did not answer the server's question in time",
                        )
                        .await
                });
            }
        }
    }
}

/// What a retry's state asks of the intake.
pub(crate) enum Retry {
    /// Not a retry (or a retry the step handles: its round is recorded).
    Step,
    /// The retry continued a parked call: its answer will come from there.
    Resumed,
}

impl Session {
    /// The facade answers the server's questions of request `id` itself
    /// (see [`Round`]): its next exchange carries `state` and those answers.
    pub(crate) fn retry_on_own(&self, id: &RequestId, state: Option<String>, keys: Vec<String>) {
        if let Some(round) = self
            .state
            .lock()
            .unwrap()
            .pending
            .get_mut(id)
            .and_then(|p| p.mrtr.as_mut())
        {
            round.own_retry = Some((state, keys));
        }
    }

    /// A modern client's request that may be answered with `input_required`:
    /// record its round, and open the state it retries with. A retry of a
    /// parked call continues it here.
    pub(crate) async fn open_retry(
        self: &Arc<Self>,
        id: &RequestId,
        caller: &Identity,
        method: &str,
        request: &Value,
    ) -> Result<Retry, Refusal> {
        let mut round = Round::new(caller, method, request);
        let params = request.get("params").unwrap_or(&Value::Null);
        let state = params.get("requestState");
        let claims = match state {
            None | Some(Value::Null) => None,
            Some(Value::String(state)) => Some(
                self.app
                    .state_seal
                    .open(state, &round.caller, &round.request)
                    .map_err(Refusal::RequestState)?,
            ),
            Some(_) => return Err(Refusal::RequestState(StateError::Tampered)),
        };
        // A state that carries an approval (the facade's own question, or a
        // modern server's after an approval) runs its call once: the retry
        // spends it on the replica that issued it (the modern POST relays it
        // there), and a replay is refused. A parked call is continued once
        // by taking it from the table instead.
        if let Some(c) = claims.as_ref().filter(|c| c.carries_approval()) {
            if c.owner
                .as_deref()
                .is_some_and(|o| Some(o) != self.app.session_ids.me())
            {
                return Err(Refusal::RequestState(StateError::OtherReplica));
            }
            self.app
                .spent_states
                .spend(c)
                .map_err(Refusal::RequestState)?;
        }
        let responses = params.get("inputResponses");
        match claims {
            Some(c) if c.kind == StateKind::Parked => {
                return self
                    .resume_parked(id, &c, responses)
                    .await
                    .map(|()| Retry::Resumed);
            }
            Some(c) if c.kind == StateKind::Approval => {
                let answer = responses.and_then(|r| r.get(APPROVAL_KEY));
                let accepted = answer.is_some_and(|a| {
                    a.get("action").and_then(Value::as_str) == Some("accept")
                        && a.pointer("/content/approve").and_then(Value::as_bool) == Some(true)
                });
                round.approval = Some(accepted);
                round.claims = Some(c);
            }
            other => round.claims = other,
        }
        if let Some(p) = self.state.lock().unwrap().pending.get_mut(id) {
            p.mrtr = Some(round);
        }
        Ok(Retry::Step)
    }

    /// The round of request `id`, if it is a modern client's.
    pub(crate) fn round(&self, id: &RequestId) -> Option<Round> {
        self.state
            .lock()
            .unwrap()
            .pending
            .get(id)
            .and_then(|p| p.mrtr.clone())
    }

    /// Answer `id` with a question of the facade's own (its state is sealed
    /// already).
    pub(crate) fn answer_input_required(&self, id: &RequestId, bytes: Bytes) {
        if let Some(p) = self.state.lock().unwrap().pending.get_mut(id) {
            p.mrtr = None;
        }
        self.answer_call(id, bytes);
    }

    /// A legacy server asked a modern client's request `client` something
    /// (`params` filtered): answer the request with `input_required`, and
    /// keep the call open on the server for the retry. `false`: the request
    /// cannot ask (the client did not declare it can answer, or it is gone).
    pub(super) fn park(
        self: &Arc<Self>,
        channel: &Arc<Channel>,
        client: &RequestId,
        msg: &Message,
        params: Value,
    ) -> bool {
        let server_id = msg.id.clone().expect("requests have ids");
        let mut st = self.state.lock().unwrap();
        let Some(p) = st.pending.get(client) else {
            return false;
        };
        let (Some(round), Some(upstream)) = (p.mrtr.clone(), p.upstream) else {
            return false;
        };
        if !round.can_answer(msg.method()) {
            return false;
        }
        let p = st.pending.remove(client).expect("looked up above");
        let mut key = [0u8; 16];
        getrandom::fill(&mut key).expect("the OS random source is available");
        let park = hex::encode(key);
        let claims = Claims {
            kind: StateKind::Parked,
            caller: round.caller.clone(),
            request: round.request.clone(),
            exp: self.app.state_seal.expiry(),
            approved: round.approval() == Some(true),
            upstream: None,
            park: Some(park.clone()),
            owner: self.app.session_ids.me().map(str::to_string),
            // The parked call itself is continued once (see `resume_parked`).
            nonce: None,
            roots_keys: Vec::new(),
            task: None,
            tool: None,
        };
        let mut question = Map::new();
        question.insert("method".into(), json!(msg.method()));
        if !params.is_null() {
            question.insert("params".into(), params);
        }
        let result = json!({
            "resultType": "input_required",
            "inputRequests": { SERVER_INPUT_KEY: question },
            "requestState": self.app.state_seal.seal(&claims),
        });
        let handover = Handover::default();
        st.handovers.insert(client.clone(), handover.clone());
        super::push(
            &mut st,
            p.stream,
            jsonrpc::result_response(client, &result.to_string()),
            true,
        );
        drop(st);
        self.pending_gone.notify_waiters();
        self.app.parked.lock().unwrap().insert(
            park,
            Parked {
                _session: self.clone(),
                channel: channel.clone(),
                epoch: channel.epoch(),
                server_id,
                upstream,
                handover,
                expires: Instant::now() + self.app.state_seal.lifetime,
            },
        );
        true
    }

    /// A retry of a parked call: the client's answer goes to the server as
    /// the answer to its question, and the call's result to this request.
    async fn resume_parked(
        self: &Arc<Self>,
        id: &RequestId,
        claims: &Claims,
        responses: Option<&Value>,
    ) -> Result<(), Refusal> {
        if claims.owner.as_deref() != self.app.session_ids.me() {
            return Err(Refusal::RequestState(StateError::OtherReplica));
        }
        let key = claims.park.as_deref().unwrap_or("");
        let mut answer = responses
            .and_then(|r| r.get(SERVER_INPUT_KEY))
            .cloned()
            .ok_or(Refusal::MissingInput {
                key: SERVER_INPUT_KEY,
            })?;
        let parked = self
            .app
            .parked
            .lock()
            .unwrap()
            .remove(key)
            .ok_or(Refusal::RequestState(StateError::Consumed))?;
        let Parked {
            _session: _,
            channel,
            epoch,
            server_id,
            upstream,
            handover,
            ..
        } = parked;
        if !Arc::ptr_eq(&channel, &self.channel) || channel.epoch() != epoch {
            return Err(Refusal::RequestState(StateError::Consumed));
        }
        // Content for the server: the same cap and redaction as an answer
        // a legacy client sends it as a message. Over the cap, the server
        // is told the client's answer did not pass.
        let policy = self.app.policy.load();
        let reply = match crate::gates::output::filter_answer_value(
            &mut answer,
            &policy,
            &self.app.metrics,
        ) {
            Ok(()) => jsonrpc::result_response(&server_id, &answer.to_string()),
            Err(e) => {
                self.app.metrics.dropped("client_response");
                jsonrpc::error_response(
                    Some(&server_id),
                    jsonrpc::codes::INTERNAL_ERROR,
                    &e.to_string(),
                    None,
                )
            }
        };
        handover.set(self, id);
        channel.repoint(upstream, self, id);
        if let Some(p) = self.state.lock().unwrap().pending.get_mut(id) {
            p.upstream = Some(upstream);
        }
        let msg = Message::written(reply, Kind::Response, Some(server_id), None);
        if let Err(reason) = channel.send(msg).await {
            tracing::warn!(%reason, "could not pass a client's answer to the MCP server");
        }
        Ok(())
    }
}
