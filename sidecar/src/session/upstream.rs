//! Facade → server: every request goes out under an id of the facade's own.
//!
//! A client's id never reaches the server: [`Session::forward`] writes the
//! request again under a fresh id (per channel, monotonic) and the server's
//! answer is matched by that id alone. So two client ids a parser reads as
//! one (`"\u0031"` and `"1"`), a client id equal to one of the facade's own
//! requests, or two sessions sharing a server can never cross answers. The
//! client's `_meta.progressToken` is replaced the same way (by the request's
//! facade id), so progress is routed by the facade's id too.
//!
//! The answer always comes back to the pipeline step that forwarded the
//! request, which filters it and answers the client. A request the client
//! no longer waits for stays registered (a late answer is dropped, never
//! routed to anyone) and keeps the step waiting, with its concurrency slot
//! taken, until the server answers it or a bound runs out ([`Lingering`]):
//!
//! - **Cancelled by its client**: the server owes no answer (a receiver of
//!   `notifications/cancelled` should not send one, and the official
//!   TypeScript SDK never does), so silence is no fault. The request is let go, without
//!   touching the server, when the time limit it was sent with runs out
//!   (the tool's call timeout, the request timeout): as long as it could
//!   have run had nobody cancelled it. So a caller cannot start more work
//!   by cancelling than by waiting (the slot counts the cancelled call as
//!   long as an uncancelled one could hold it), and one caller's
//!   cancellation never restarts a process its other calls depend on (nor,
//!   on a modern server, the one every caller shares). What a server does with a request
//!   after it was told to cancel is its own; the facade bounds what a
//!   caller can start, not how a server keeps its word.
//! - **Past its limit**: the limit is the policy's promise that the work
//!   stops, not the caller's choice. The server was told to cancel; if it
//!   has not answered within the cancel grace, its process is replaced, so
//!   a server that ignores cancellation cannot pile up work behind the
//!   budget's back.

use std::sync::Arc;
use std::time::Duration;

/// Rounds of questions one request may take (a server cannot loop the client).
const MAX_INPUT_ROUNDS: usize = 8;

use bytes::Bytes;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::channel::{Channel, Era, Outbound};
use super::Session;
use crate::jsonrpc::{self, Kind, Members, Message, ParamsEdit, RequestId};

/// What became of a forwarded request.
pub(crate) enum Forwarded {
    /// The server's answer (under the facade's id: the step answers the
    /// client under the client's).
    Answer(Message),
    /// It could not be delivered, or the server went away: why.
    Failed(String),
    /// Past its limit: the server was told to cancel it. The step answers
    /// the client, then settles the server's side with [`Lingering::settle`].
    TimedOut(Lingering),
    /// The client cancelled it: nothing is owed; settle the server's side.
    Cancelled(Lingering),
    /// The session ended, or the client cancelled before it was sent.
    Gone,
}

/// A request the client no longer waits for, still on the server.
pub(crate) struct Lingering {
    channel: Arc<Channel>,
    upstream: u64,
    answer: oneshot::Receiver<Result<Message, String>>,
    bound: Bound,
}

/// How long a [`Lingering`] request is waited for, and what follows.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// Past its limit: the cancel grace, then the server is replaced.
    Grace,
    /// Cancelled by its client: until the limit it was sent with, then it
    /// is let go (the server owes no answer).
    Limit(tokio::time::Instant),
}

/// How a [`Lingering`] request ended.
#[derive(Debug, PartialEq)]
enum Settled {
    /// The server answered (or went away): nothing left on it.
    Answered,
    /// A cancelled request's limit ran out unanswered: let go.
    LetGo,
    /// A timed-out request's grace ran out unanswered: replace the server.
    Recycle,
}

/// Wait for `answer` within `bound` (`grace` for [`Bound::Grace`]).
async fn outwait(
    answer: oneshot::Receiver<Result<Message, String>>,
    bound: Bound,
    grace: Duration,
) -> Settled {
    let (until, past) = match bound {
        Bound::Grace => (tokio::time::Instant::now() + grace, Settled::Recycle),
        Bound::Limit(deadline) => (deadline, Settled::LetGo),
    };
    match tokio::time::timeout_at(until, answer).await {
        Ok(_) => Settled::Answered,
        Err(_) => past,
    }
}

impl Lingering {
    /// Wait until the server lets go of the request, within its bound: a
    /// cancelled request is let go at its limit; a timed-out one past the
    /// cancel grace gets the server process replaced.
    pub(crate) async fn settle(self) {
        let grace = self.channel.app.limits.cancel_grace;
        match outwait(self.answer, self.bound, grace).await {
            Settled::Answered => {}
            Settled::LetGo => {
                self.channel.unregister(self.upstream);
                tracing::debug!(
                    upstream_id = self.upstream,
                    "a cancelled request reached its time limit unanswered; letting it go"
                );
            }
            Settled::Recycle => {
                self.channel.unregister(self.upstream);
                self.channel.app.metrics.upstream_recycled.inc();
                tracing::warn!(
                    grace_secs = grace.as_secs(),
                    "the MCP server did not stop a request past its time limit; recycling it"
                );
                self.channel.recycle();
            }
        }
    }

    /// Stop waiting without a bound: the server owes no answer. A
    /// subscription it was told to end is over with that (a cancelled
    /// request gets no response), and holds no work a recycle would stop.
    pub(crate) fn release(self) {
        self.channel.unregister(self.upstream);
    }
}

impl Session {
    /// Forward client request `client_id` (taken as `msg`) under a new id of
    /// the facade's own, with `edit` applied to its params, and wait up to
    /// `limit` for the server's answer.
    pub(crate) async fn forward(
        self: &Arc<Self>,
        client_id: &RequestId,
        msg: &Message,
        mut edit: Option<ParamsEdit<'_>>,
        limit: Duration,
    ) -> Forwarded {
        let deadline = tokio::time::Instant::now() + limit;
        let mut answer = self.forward_once(client_id, msg, &mut edit, deadline).await;
        if !crate::era::INPUT_REQUIRED_METHODS.contains(&msg.method()) {
            return answer;
        }
        // A modern server's questions: a legacy client is asked them as
        // requests on its session; a modern client gets them in the answer,
        // but those the facade answers itself (the roots, from the policy)
        // when nothing else is asked. Then the request is sent again with
        // the answers, until it completes.
        for _ in 0..MAX_INPUT_ROUNDS {
            let Forwarded::Answer(reply) = &answer else {
                return answer;
            };
            let Some((questions, state)) = super::mrtr::input_required(reply) else {
                return answer;
            };
            let responses = if self.legacy_on_modern() {
                match self.ask_for_input(client_id, questions, deadline).await {
                    Ok(responses) => responses,
                    Err(why) => return Forwarded::Failed(why),
                }
            } else {
                let Some(keys) = super::mrtr::only_roots(&questions) else {
                    return answer;
                };
                // The answers themselves are set on the way out (`Adjust`).
                self.retry_on_own(client_id, state.clone(), keys);
                serde_json::Map::new()
            };
            let retry = match super::mrtr::retry_with(msg, responses, state) {
                Ok(retry) => retry,
                Err(why) => return Forwarded::Failed(why),
            };
            answer = self
                .forward_once(client_id, &retry, &mut edit, deadline)
                .await;
        }
        Forwarded::Failed(format!(
            "the MCP server asked for input more than {MAX_INPUT_ROUNDS} times for one request"
        ))
    }

    /// One exchange: `msg` under a new id of the facade's, until `deadline`.
    async fn forward_once(
        self: &Arc<Self>,
        client_id: &RequestId,
        msg: &Message,
        edit: &mut Option<ParamsEdit<'_>>,
        deadline: tokio::time::Instant,
    ) -> Forwarded {
        let channel = &self.channel;
        let n = channel.mint();
        let (tx, rx) = oneshot::channel();
        let (cancel_tx, cancel_rx) = oneshot::channel();
        let (progress, caller, trace) = {
            let mut st = self.state.lock().unwrap();
            let Some(p) = st.pending.get_mut(client_id) else {
                return Forwarded::Gone;
            };
            p.upstream = Some(n);
            (
                p.progress_token.is_some(),
                p.caller.clone(),
                p.trace.clone(),
            )
        };
        // Tracing on: a CLIENT span for this exchange, whose context the
        // server is sent in `_meta` (and in headers, over HTTP).
        let span = match &trace {
            Some(cx) => {
                let method = crate::metrics::method_label(msg.method());
                self.app.telemetry.upstream(cx, method, n)
            }
            None => crate::spans::RequestSpan::NONE,
        };
        channel.register(
            n,
            Outbound {
                answer: tx,
                session: Arc::downgrade(self),
                client: Some(client_id.clone()),
                cancelled: Some(cancel_tx),
            },
        );
        let id = RequestId::number(n);
        let mut adjust = self.adjustments(client_id, msg);
        if let Some(cx) = span.context() {
            adjust.trace = mcp_warden_telemetry::carrier::inject(cx);
        }
        let forwarded = self
            .exchange(
                n,
                &id,
                msg,
                (progress, edit, &adjust, &caller),
                (rx, cancel_rx),
                deadline,
            )
            .await;
        span.outcome(match &forwarded {
            Forwarded::Answer(a) if a.is_error => "error",
            Forwarded::Answer(_) => "ok",
            Forwarded::Failed(_) => "failed",
            Forwarded::TimedOut(_) => "timeout",
            Forwarded::Cancelled(_) | Forwarded::Gone => "cancelled",
        });
        forwarded
    }

    /// Send `msg` as request `n` (registered) and wait for its answer.
    #[allow(clippy::type_complexity)]
    async fn exchange(
        self: &Arc<Self>,
        n: u64,
        id: &RequestId,
        msg: &Message,
        (progress, edit, adjust, caller): (
            bool,
            &mut Option<ParamsEdit<'_>>,
            &Adjust,
            &crate::auth::identity::Identity,
        ),
        (mut rx, mut cancel_rx): (
            oneshot::Receiver<Result<Message, String>>,
            oneshot::Receiver<()>,
        ),
        deadline: tokio::time::Instant,
    ) -> Forwarded {
        let channel = &self.channel;
        let bytes = match outgoing(msg, id, progress, edit, adjust) {
            Ok(bytes) => bytes,
            Err(why) => {
                channel.unregister(n);
                return Forwarded::Failed(format!("the request cannot be forwarded: {why}"));
            }
        };
        let out = Message::written(bytes, Kind::Request, Some(id.clone()), msg.method.clone());
        // The limit covers sending too (over HTTP the answer may come back
        // with the send itself), and getting the request's upstream
        // credential: chosen by its caller, now that the policy let it pass.
        let send = async {
            let credential = self.upstream_credential(caller).await?;
            channel.send_as(out, credential).await
        };
        let sent = tokio::time::timeout_at(deadline, send).await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => {
                channel.unregister(n);
                return Forwarded::Failed(reason);
            }
            Err(_) => {
                channel
                    .cancel(n, "mcp-warden: the request exceeded its time limit")
                    .await;
                return Forwarded::TimedOut(self.lingering(n, rx, Bound::Grace));
            }
        }
        tokio::select! {
            answer = &mut rx => match answer {
                Ok(Ok(answer)) => Forwarded::Answer(answer),
                Ok(Err(reason)) => Forwarded::Failed(reason),
                Err(_) => Forwarded::Gone,
            },
            () = tokio::time::sleep_until(deadline) => {
                channel.cancel(n, "mcp-warden: the request exceeded its time limit").await;
                Forwarded::TimedOut(self.lingering(n, rx, Bound::Grace))
            }
            Ok(()) = &mut cancel_rx => {
                // The client's cancellation was passed on when it came in;
                // the request may hold on as long as its limit allowed.
                Forwarded::Cancelled(self.lingering(n, rx, Bound::Limit(deadline)))
            }
        }
    }

    fn lingering(
        self: &Arc<Self>,
        upstream: u64,
        answer: oneshot::Receiver<Result<Message, String>>,
        bound: Bound,
    ) -> Lingering {
        Lingering {
            channel: self.channel.clone(),
            upstream,
            answer,
            bound,
        }
    }

    /// Send a message of the session's (a notification, an answer) on its channel.
    pub(super) async fn send_upstream(&self, msg: Message) -> Result<(), String> {
        self.channel.send(msg).await
    }
}

/// What the request needs besides its id when it crosses eras.
#[derive(Default)]
pub(super) struct Adjust {
    /// `_meta` entries the server must see (a legacy client's, in front of
    /// a modern server: version, capabilities, identity, log level).
    add_meta: Option<serde_json::Map<String, serde_json::Value>>,
    /// Drop the modern `_meta` entries and the retry fields (a modern
    /// client's request to a legacy server).
    to_legacy: bool,
    /// The retry's `requestState`: the server's own back in its place
    /// (`Some(None)`: none to send).
    request_state: Option<Option<String>>,
    /// A modern retry's `inputResponses` as the server gets them
    /// ([`super::mrtr::answers`]): `Ok(None)` none, `Err` over the cap.
    input_responses: Option<Result<Option<Box<RawValue>>, String>>,
    /// Fit the client's capabilities in `_meta` for the server (`Some`:
    /// whether to offer `roots`): `roots` only as the policy has them,
    /// whatever the client declared; the tasks extension only if
    /// `keep_tasks`.
    fit_caps: Option<bool>,
    /// The client's tasks extension reaches the server: a modern client
    /// declared it on a request the facade serves tasks for (`tools/call`,
    /// `tasks/*`) and the server offers it. Anywhere else a task handle
    /// would escape the facade's binding, so the server must answer itself.
    keep_tasks: bool,
    /// The trace context the server is sent (`traceparent`, `tracestate`):
    /// the facade's span for the exchange, when tracing is on.
    trace: Vec<(&'static str, String)>,
}

impl Adjust {
    fn is_noop(&self) -> bool {
        self.add_meta.is_none()
            && !self.to_legacy
            && self.request_state.is_none()
            && self.input_responses.is_none()
            && self.fit_caps.is_none()
            && self.trace.is_empty()
    }
}

/// The `_meta` keys of the modern revision a legacy server must not be sent.
const MODERN_META: &[&str] = &[
    crate::era::meta::PROTOCOL_VERSION,
    crate::era::meta::CLIENT_INFO,
    crate::era::meta::CLIENT_CAPABILITIES,
    crate::era::meta::LOG_LEVEL,
];

impl Session {
    /// How `msg` must change to cross from this client's era to the server's.
    fn adjustments(&self, client_id: &RequestId, msg: &Message) -> Adjust {
        match (self.client_era, self.channel.era) {
            (Era::Legacy, Era::Legacy) => Adjust::default(),
            (Era::Legacy, Era::Modern) => Adjust {
                add_meta: Some(self.state.lock().unwrap().legacy.outgoing_meta()),
                ..Adjust::default()
            },
            (Era::Modern, Era::Legacy) => Adjust {
                to_legacy: true,
                ..Adjust::default()
            },
            (Era::Modern, Era::Modern) => {
                // The client's capabilities, as the server may hear them.
                let fit_caps = fit_caps(msg, self.app.has_roots());
                let keep_tasks = fit_caps.is_some()
                    && super::steps::task::TASK_METHODS.contains(&msg.method())
                    && self.app.upstream_serves_tasks();
                if !msg.mentions(b"requestState") && !msg.mentions(b"inputResponses") {
                    return Adjust {
                        fit_caps,
                        keep_tasks,
                        ..Adjust::default()
                    };
                }
                let round = self.round(client_id);
                // The answers as the server may read them (a task's update is
                // rebuilt by its own step).
                let input_responses = crate::era::INPUT_REQUIRED_METHODS
                    .contains(&msg.method())
                    .then(|| {
                        let value = msg.to_value();
                        let given = value.pointer("/params/inputResponses");
                        let roots = serde_json::json!({ "roots": self.app.roots() });
                        let roots_keys = round.as_ref().map_or(&[][..], |r| r.roots_keys());
                        let policy = self.app.policy.load();
                        super::mrtr::answers::forwarded(
                            given,
                            roots_keys,
                            &roots,
                            &policy,
                            &self.app.metrics,
                        )
                        .map(|answers| {
                            answers.map(|a| {
                                serde_json::value::to_raw_value(&a).expect("values serialize")
                            })
                        })
                        .map_err(|e| e.to_string())
                    });
                Adjust {
                    request_state: Some(
                        round
                            .as_ref()
                            .and_then(|r| r.upstream_state().map(str::to_string)),
                    ),
                    input_responses,
                    fit_caps,
                    keep_tasks,
                    ..Adjust::default()
                }
            }
        }
    }
}

/// The request as the server gets it: the facade's id, the progress token
/// (when the client asked for progress) replaced by that id, `edit` applied,
/// and what crossing eras needs ([`Adjust`]).
fn outgoing(
    msg: &Message,
    id: &RequestId,
    progress: bool,
    edit: &mut Option<ParamsEdit<'_>>,
    adjust: &Adjust,
) -> Result<Bytes, String> {
    if !progress && edit.is_none() && adjust.is_noop() {
        return jsonrpc::with_id(msg, id);
    }
    let mut failed = None;
    let mut apply = |params: &mut Members<'_>| {
        if let Some(edit) = edit.as_mut() {
            edit(params);
        }
        if let Some(state) = &adjust.request_state {
            match state {
                Some(s) => params.set("requestState", jsonrpc::raw_string(s)),
                None => {
                    params.remove("requestState");
                }
            }
        }
        if adjust.to_legacy {
            params.remove("requestState");
            params.remove("inputResponses");
        }
        match &adjust.input_responses {
            Some(Ok(Some(answers))) => params.set("inputResponses", answers.clone()),
            Some(Ok(None)) => {
                params.remove("inputResponses");
            }
            Some(Err(why)) => failed = Some(why.clone()),
            None => {}
        }
        if let Some(offer_roots) = adjust.fit_caps {
            fit_meta_capabilities(params, offer_roots, adjust.keep_tasks);
        }
        let touch_meta =
            progress || adjust.add_meta.is_some() || adjust.to_legacy || !adjust.trace.is_empty();
        if !touch_meta {
            return;
        }
        let meta_raw = params.get("_meta").map(|m| m.get().to_string());
        let meta = meta_raw
            .as_deref()
            .map(|m| Members::parse(m.as_bytes()))
            .transpose();
        match meta {
            Ok(meta) => {
                let mut meta = meta.unwrap_or_default();
                if progress {
                    let token =
                        RawValue::from_string(id.as_json().to_string()).expect("an id is JSON");
                    meta.set("progressToken", token);
                }
                if let Some(add) = &adjust.add_meta {
                    for (k, v) in add {
                        let raw = serde_json::value::to_raw_value(v).expect("values serialize");
                        meta.set(k, raw);
                    }
                }
                for (k, v) in &adjust.trace {
                    meta.set(k, jsonrpc::raw_string(v));
                }
                if adjust.to_legacy {
                    for k in MODERN_META {
                        meta.remove(k);
                    }
                }
                if meta.is_empty() {
                    params.remove("_meta");
                } else {
                    params.set("_meta", meta.to_raw());
                }
            }
            Err(e) => failed = Some(e),
        }
    };
    let bytes = jsonrpc::rebuild(msg, Some(id), Some(&mut apply))?;
    match failed {
        Some(e) => Err(e),
        None => Ok(bytes),
    }
}

/// [`Adjust::fit_caps`] for a modern client's request: `None` when it
/// declares no capabilities, or when fitting them cannot change it. That
/// takes offering `roots`, or taking out a `roots`, `tasks` or tasks
/// extension member, whose key the bytes then mention (however spelled:
/// [`Message::mentions`] counts escapes). Most modern requests declare
/// neither, and are then sent without being written again.
fn fit_caps(msg: &Message, offer_roots: bool) -> Option<bool> {
    let may_change = offer_roots || msg.mentions(b"tasks") || msg.mentions(b"roots");
    (may_change && msg.mentions(crate::era::meta::CLIENT_CAPABILITIES.as_bytes()))
        .then_some(offer_roots)
}

/// Fit `_meta`'s client capabilities for the server
/// ([`crate::session::context::fit_capabilities`]).
fn fit_meta_capabilities(params: &mut Members<'_>, offer_roots: bool, keep_tasks: bool) {
    let Some(meta) = params.get("_meta") else {
        return;
    };
    let Ok(mut meta) = serde_json::from_str::<serde_json::Value>(meta.get()) else {
        return;
    };
    let Some(caps) = meta
        .pointer_mut("/io.modelcontextprotocol~1clientCapabilities")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    let before = caps.clone();
    crate::session::context::fit_capabilities(caps, offer_roots, keep_tasks);
    if *caps != before {
        let raw = serde_json::value::to_raw_value(&meta).expect("values serialize");
        params.set("_meta", raw);
    }
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
