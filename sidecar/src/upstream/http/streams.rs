//! The server's streams on an HTTP link: a POST's answer stream, SSE or a
//! sequence of JSON texts (its
//! events reported with the request's id; resumed with GET and
//! `Last-Event-ID` when the server closes it before answering) and, for a
//! legacy server, the standalone GET stream of messages that belong to no
//! request.
//!
//! Where it sits: under [`super`], which sends the POSTs and hands their
//! streams here; events go out as [`LinkEvent`]s.

use super::*;

/// Send `msg`, a request whose answer is a stream that lasts (a
/// subscription), and return only once that stream has ended, however it
/// ended (answered, failed, cancelled, the server gone): [`post`] returns
/// as soon as a stream starts, so whoever holds a subscription again would
/// otherwise open a second stream at the server beside the live one.
pub async fn hold(
    state: &Arc<State>,
    msg: Message,
    credential: Option<&Credential>,
) -> Result<Option<Message>, UpstreamError> {
    let (ended_tx, ended) = tokio::sync::oneshot::channel::<()>();
    let answer = post_tracked(state, msg, credential, Some(ended_tx)).await;
    // Nothing is ever sent: the exchange's record drops the sender.
    let _ = ended.await;
    answer
}

/// Read a POST's SSE answer until the response arrives, resuming with GET +
/// `Last-Event-ID` if the server closes the stream first.
pub(super) async fn read_post_stream(
    state: Arc<State>,
    msg: Message,
    body: Incoming,
    in_flight: Option<InFlight>,
) {
    let related = msg.id.clone();
    let is_initialize = msg.method() == "initialize";
    let cancel = in_flight
        .as_ref()
        .map_or_else(|| state.cancel.clone(), |f| f.token.clone());
    let mut parser = sse::Parser::new(state.max);
    let mut body = Some(body);
    for resumes in 0..MAX_RESUMES {
        if let Some(b) = body.take() {
            let pumped = pump(
                &state,
                &mut parser,
                b,
                related.clone(),
                is_initialize,
                &cancel,
            )
            .await;
            match pumped {
                Pumped::Answered | Pumped::Cancelled => return,
                Pumped::Failed(reason) => return state.fail(&msg, reason).await,
                Pumped::Ended => {}
            }
        }
        // A modern stream cannot be resumed: it ended without the answer.
        let last = parser.last_event_id.clone().filter(|_| !state.mode.modern);
        let Some(last) = last else {
            return state
                .fail(
                    &msg,
                    "the upstream closed the response stream before answering".into(),
                )
                .await;
        };
        // The first resume is at once: the server closed the stream to poll
        // and may finish the call any moment (an SDK drops a result nobody
        // is attached for). The retry hint paces the resumes after that.
        let delay = match resumes {
            0 => Duration::ZERO,
            _ => Duration::from_millis(parser.retry_ms.unwrap_or(100).min(30_000)),
        };
        tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = cancel.cancelled() => return }
        let req = state
            .request(Method::GET, None, None)
            .header(LAST_EVENT_HEADER, last)
            .body(Full::new(Bytes::new()))
            .expect("request parts are valid");
        match state.exchange(req).await {
            None => return,
            Some(Ok(Exchange { resp, conn })) if resp.status().is_success() => {
                conn.detach();
                body = Some(resp.into_body())
            }
            Some(Ok(Exchange { resp, .. })) => {
                return state
                    .fail(
                        &msg,
                        format!(
                            "resuming the upstream stream failed: HTTP {}",
                            resp.status()
                        ),
                    )
                    .await
            }
            Some(Err(e)) => {
                return state
                    .fail(&msg, format!("resuming the upstream stream failed: {e}"))
                    .await
            }
        }
    }
    state
        .fail(
            &msg,
            "the upstream kept closing the response stream without answering".into(),
        )
        .await
}

/// Read a POST's answer written as a stream of JSON texts (see
/// [`JsonStream`]) until the response arrives or the server ends it.
pub(super) async fn read_json_stream(
    state: Arc<State>,
    msg: Message,
    body: Incoming,
    in_flight: Option<InFlight>,
) {
    let cancel = in_flight
        .as_ref()
        .map_or_else(|| state.cancel.clone(), |f| f.token.clone());
    let mut texts = JsonStream::new(state.max);
    match pump(&state, &mut texts, body, msg.id.clone(), false, &cancel).await {
        Pumped::Answered | Pumped::Cancelled => {}
        Pumped::Failed(reason) => state.fail(&msg, reason).await,
        Pumped::Ended => {
            state
                .fail(
                    &msg,
                    "the upstream ended the stream before answering".into(),
                )
                .await
        }
    }
}

enum Pumped {
    Answered,
    Ended,
    Cancelled,
    Failed(String),
}

/// What splits a streamed body into messages: SSE events or JSON texts.
trait Frames {
    fn frames(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, String>;
}

impl Frames for sse::Parser {
    fn frames(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, String> {
        let events = self.feed(chunk).map_err(|e| e.to_string())?;
        Ok(events
            .into_iter()
            .filter(|ev| !ev.data.is_empty())
            .map(|ev| Bytes::from(ev.data))
            .collect())
    }
}

impl Frames for JsonStream {
    fn frames(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, String> {
        self.feed(chunk).map_err(|e| e.to_string())
    }
}

async fn pump(
    state: &State,
    parser: &mut impl Frames,
    mut body: Incoming,
    related: Option<RequestId>,
    is_initialize: bool,
    cancel: &CancellationToken,
) -> Pumped {
    loop {
        let frame = tokio::select! {
            f = body.frame() => f,
            _ = cancel.cancelled() => return Pumped::Cancelled,
        };
        let chunk = match frame {
            None => return Pumped::Ended,
            Some(Err(_)) => return Pumped::Ended,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
        };
        let messages = match parser.frames(&chunk) {
            Ok(messages) => messages,
            Err(e) => return Pumped::Failed(e),
        };
        let mut answered = false;
        for bytes in messages {
            if related.is_some() {
                if let Ok(m) = Message::parse(bytes.clone()) {
                    if m.kind == Kind::Response && m.id == related {
                        if is_initialize {
                            remember_version(state, &m);
                        }
                        answered = true;
                    }
                }
            }
            state
                .report(LinkEvent::Message {
                    bytes,
                    related: related.clone(),
                })
                .await;
        }
        if answered {
            return Pumped::Answered;
        }
    }
}

/// The standalone GET stream: server requests and notifications not tied to a
/// client request. Reconnects (with `Last-Event-ID`) while the link lives.
pub(super) async fn get_stream(state: Arc<State>, attached: tokio::sync::oneshot::Sender<()>) {
    let mut attached = Some(attached);
    let mut parser = sse::Parser::new(state.max);
    let mut failures = 0u32;
    while !state.cancel.is_cancelled() && failures < 5 {
        let mut req = state.request(Method::GET, None, None);
        if let Some(last) = parser.last_event_id.clone() {
            req = req.header(LAST_EVENT_HEADER, last);
        }
        let req = req
            .body(Full::new(Bytes::new()))
            .expect("request parts are valid");
        match state.exchange(req).await {
            None => return,
            Some(Ok(Exchange { resp, .. })) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                return
            }
            Some(Ok(Exchange { resp, .. })) if resp.status() == StatusCode::NOT_FOUND => {
                let reason =
                    "the upstream MCP server no longer knows this session (HTTP 404)".to_string();
                return state.report(LinkEvent::Closed { reason }).await;
            }
            Some(Ok(Exchange { resp, conn })) if resp.status().is_success() => {
                failures = 0;
                conn.detach();
                if let Some(tx) = attached.take() {
                    let _ = tx.send(());
                }
                let cancel = state.cancel.clone();
                if let Pumped::Cancelled =
                    pump(&state, &mut parser, resp.into_body(), None, false, &cancel).await
                {
                    return;
                }
            }
            _ => failures += 1,
        }
        let delay = Duration::from_millis(
            parser
                .retry_ms
                .unwrap_or(500 << failures.min(4))
                .min(30_000),
        );
        tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = state.cancel.cancelled() => return }
    }
}
