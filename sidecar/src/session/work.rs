//! What a client message sets in motion, as a value the transport drives.
//!
//! Where it sits: between a transport and [`Session::client_message`]. The
//! HTTP transport polls a request's work in the same task that waits for its
//! answer (no hand-off to another task for the common call), and moves it
//! into the SSE body when the answer streams. Work is never abandoned: if
//! whoever holds it drops it unfinished (the client went away, the answer
//! was sent before the work wound down), it goes on on a task of its own,
//! so the request still gets its one answer and its bookkeeping ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::Session;
use crate::auth::identity::Identity;
use crate::jsonrpc::Message;

pub struct Work(Option<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Work {
    /// The work of taking `msg` on `stream`; nothing happens until polled.
    pub fn new(session: &Arc<Session>, msg: Message, stream: u64, caller: &Arc<Identity>) -> Work {
        let session = session.clone();
        let caller = caller.clone();
        let work = async move { session.client_message(msg, stream, &caller).await };
        // So does the header's ask for planning mode (always: it is policy).
        let planning = crate::gates::planning::HEADER_ASKS
            .try_with(|b| *b)
            .unwrap_or(false);
        let work = crate::gates::planning::HEADER_ASKS.scope(planning, work);
        // The trace context of the HTTP request that brought it goes with
        // the work, wherever it ends up running (tracing on only).
        if crate::spans::enabled() {
            if let Ok(parent) = crate::spans::HEADER_PARENT.try_with(Clone::clone) {
                return Work(Some(Box::pin(
                    crate::spans::HEADER_PARENT.scope(parent, work),
                )));
            }
        }
        Work(Some(Box::pin(work)))
    }

    pub fn is_done(&self) -> bool {
        self.0.is_none()
    }

    /// Start the work and let it finish in the background. The first step
    /// runs here, so messages handed over one after another reach a queued
    /// link (stdio) in that order.
    pub fn start(mut self) {
        let waker = futures::task::noop_waker();
        let _ = Pin::new(&mut self).poll(&mut Context::from_waker(&waker));
        // Dropped: if unfinished, it is spawned.
    }
}

impl Future for Work {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(fut) = self.0.as_mut() else {
            return Poll::Ready(());
        };
        let polled = fut.as_mut().poll(cx);
        if polled.is_ready() {
            self.0 = None;
        }
        polled
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if let Some(fut) = self.0.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(fut);
                }
                Err(_) => tracing::warn!("request work dropped outside the runtime"),
            }
        }
    }
}
