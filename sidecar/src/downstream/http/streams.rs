//! GET (the standalone stream, or a resumed one) and DELETE on `/mcp`, and
//! the SSE body every stream is served with.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

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
use crate::session::stream::{Out, StreamRx};
use crate::session::work::Work;
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
    if let Some(last) = headers.get(LAST_EVENT_HEADER).and_then(|v| v.to_str().ok()) {
        return match session.resume(last) {
            Some((stream, rx)) => sse_response(rx, Some(stream)),
            None => reject(
                &app,
                "unknown_event_id",
                StatusCode::BAD_REQUEST,
                "Bad Request: Last-Event-ID is unknown or no longer buffered; open a new stream",
            ),
        };
    }
    match session.open_standalone() {
        Some((stream, rx)) => sse_response(rx, Some(stream)),
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

pub(super) fn sse(body: SseBody) -> Response<ResponseBody> {
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
