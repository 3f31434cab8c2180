//! GET (the standalone stream, or a resumed one) and DELETE on `/mcp`, and
//! the SSE body every stream is served with.
//!
//! A GET stream is held for as long as the client reads it, but never past
//! the credential it was opened with: at the caller's token's expiry the
//! facade closes it (counted and audited, without content), and the client
//! opens it again with a fresh token (what it missed waits in the stream's
//! replay for a `Last-Event-ID` resume). A static token does not expire.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};

use super::checks::{accepts, check_version, session_of};
use super::reply::{empty, reject};
use super::{ResponseBody, LAST_EVENT_HEADER};
use crate::app::App;
use crate::auth::identity::Identity;
use crate::metrics::{HeldStream, StreamEnd};
use crate::session::stream::{Out, StreamRx};
use crate::session::work::Work;
use crate::session::Session;
use crate::sse;

pub(super) fn get(
    app: Arc<App>,
    req: Request<Incoming>,
    caller: &Identity,
) -> Response<ResponseBody> {
    let headers = req.headers();
    if !accepts(headers, "text/event-stream") {
        return reject(
            &app,
            "not_acceptable",
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: GET must accept text/event-stream",
        );
    }
    let session = match session_of(&app, headers, caller) {
        Ok(Some(session)) => session,
        Ok(None) => {
            return reject(
                &app,
                "missing_session",
                StatusCode::BAD_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            )
        }
        Err(resp) => return resp,
    };
    if let Err(resp) = check_version(&app, headers, &session) {
        return resp;
    }
    let held = |rx: StreamRx, stream: u64| held_response(&session, caller, rx, stream);
    if let Some(last) = headers.get(LAST_EVENT_HEADER).and_then(|v| v.to_str().ok()) {
        return match session.resume(last) {
            Some((stream, rx)) => held(rx, stream),
            None => reject(
                &app,
                "unknown_event_id",
                StatusCode::BAD_REQUEST,
                "Bad Request: Last-Event-ID is unknown or no longer buffered; open a new stream",
            ),
        };
    }
    match session.open_standalone() {
        Some((stream, rx)) => {
            session.listen_as(caller);
            held(rx, stream)
        }
        None => reject(
            &app,
            "stream_conflict",
            StatusCode::CONFLICT,
            "Conflict: this session already has an open GET stream",
        ),
    }
}

pub(super) fn delete(
    app: Arc<App>,
    req: Request<Incoming>,
    caller: &Identity,
) -> Response<ResponseBody> {
    match session_of(&app, req.headers(), caller) {
        Ok(Some(session)) => {
            app.router
                .sessions
                .remove(&app, &session.id, "the client ended the session");
            empty(StatusCode::OK)
        }
        Ok(None) => reject(
            &app,
            "missing_session",
            StatusCode::BAD_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        ),
        Err(resp) => resp,
    }
}

pub(super) fn encode(stream: u64, out: &Out) -> Bytes {
    sse::encode_message(Some(&format!("{stream}-{}", out.seq)), &out.bytes)
}

/// An SSE body fed by a session stream, driving the work that produces it.
pub(super) struct SseBody {
    pub(super) rx: StreamRx,
    pub(super) stream: u64,
    pub(super) pending: std::collections::VecDeque<Bytes>,
    pub(super) work: Option<Work>,
    /// Events carry ids (`<stream>-<seq>`) a client may resume from (legacy).
    pub(super) ids: bool,
    /// Dropped with the body (a modern request is cancelled when its stream closes).
    pub(super) _guard: Option<Box<dyn Send>>,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(work) = self.work.as_mut() {
            if Pin::new(work).poll(cx).is_ready() {
                self.work = None;
            }
        }
        if let Some(chunk) = self.pending.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        let stream = self.stream;
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(out)) if !self.ids => {
                Poll::Ready(Some(Ok(Frame::data(sse::encode_message(None, &out.bytes)))))
            }
            Poll::Ready(Some(out)) => Poll::Ready(Some(Ok(Frame::data(encode(stream, &out))))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

pub(super) fn sse_response(rx: StreamRx, stream: Option<u64>) -> Response<ResponseBody> {
    sse(SseBody {
        rx,
        stream: stream.unwrap_or(0),
        pending: Default::default(),
        work: None,
        ids: true,
        _guard: None,
    })
}

/// A GET stream of `session` for `caller`: it ends when the caller's
/// credential expires (never, for one without an expiry).
fn held_response(
    session: &Arc<Session>,
    caller: &Identity,
    rx: StreamRx,
    stream: u64,
) -> Response<ResponseBody> {
    let body = SseBody {
        rx,
        stream,
        pending: Default::default(),
        work: None,
        ids: true,
        _guard: None,
    };
    let Some(left) = caller.credential_left() else {
        return sse(body);
    };
    let (session, caller, opened) = (session.clone(), caller.clone(), Instant::now());
    sse(UntilExpiry {
        body,
        expiry: Box::pin(tokio::time::sleep(left)),
        on_expiry: Some(Box::new(move || {
            crate::gates::audit::stream_ended(
                session.trail(),
                HeldStream::Get,
                None,
                &caller,
                StreamEnd::CredentialExpired,
                opened,
            )
        })),
    })
}

/// A held stream's body that ends at its caller's credential's expiry.
struct UntilExpiry {
    body: SseBody,
    expiry: Pin<Box<tokio::time::Sleep>>,
    /// Counts and audits the end (once).
    on_expiry: Option<Box<dyn FnOnce() + Send>>,
}

impl Body for UntilExpiry {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // Checked before anything queued is sent: nothing reaches a caller
        // whose token is no longer good.
        if self.expiry.as_mut().poll(cx).is_ready() {
            if let Some(ended) = self.on_expiry.take() {
                ended();
            }
            return Poll::Ready(None);
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }
}

pub(super) fn sse<B>(body: B) -> Response<ResponseBody>
where
    B: Body<Data = Bytes, Error = Infallible> + Send + 'static,
{
    let mut resp = Response::new(body.boxed_unsync());
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies in front (nginx) must pass events on as they come.
    resp.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::stream::{self, Stream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn a_held_stream_ends_at_its_callers_expiry() {
        let (live, rx) = stream::channel(8);
        let mut held = Stream::new(usize::MAX, live);
        let ended = Arc::new(AtomicUsize::new(0));
        let counted = ended.clone();
        let mut body = UntilExpiry {
            body: SseBody {
                rx,
                stream: 1,
                pending: Default::default(),
                work: None,
                ids: true,
                _guard: None,
            },
            expiry: Box::pin(tokio::time::sleep(Duration::from_millis(300))),
            on_expiry: Some(Box::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
            })),
        };
        held.push(Bytes::from_static(br#"{"before":1}"#), false, false);
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(String::from_utf8_lossy(&first).contains("before"));
        tokio::time::sleep(Duration::from_millis(350)).await;
        // Queued, but the caller's token is no longer good: never sent.
        held.push(Bytes::from_static(br#"{"after":1}"#), false, false);
        assert!(body.frame().await.is_none());
        assert!(body.frame().await.is_none());
        assert_eq!(ended.load(Ordering::SeqCst), 1, "counted once");
        // Once the body is gone the stream is not live: a new GET may open.
        drop(body);
        assert!(!held.has_live());
    }
}
