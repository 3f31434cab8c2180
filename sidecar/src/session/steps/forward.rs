//! The shared tail of every step but tools/call: send the request on under
//! the facade's id, wait (bounded), and answer the client with the server's
//! answer through the output filter, or with the error that says what
//! happened. The [`plain`] step is just that (`ping`, `logging/setLevel`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::gates::output;
use crate::gates::refusal::Refusal;
use crate::gates::{Ended, Request};
use crate::jsonrpc::{self, codes, ParamsEdit};
use crate::session::{Forwarded, Session};

/// `ping`, `logging/setLevel`: forwarded as they are.
pub async fn plain(session: &Arc<Session>, req: Request) {
    let ended = exchange(session, &req, None, |_| {}).await;
    session.observe(req.msg.method(), ended.outcome(), req.started);
}

/// Forward `req` (params edited by `edit`), and answer it with the server's
/// answer, its `result` reshaped by `shape` and filtered. Waits up to the
/// request timeout; after a timeout or a cancellation it waits (bounded)
/// for the server to let go before returning.
pub async fn exchange(
    session: &Arc<Session>,
    req: &Request,
    edit: Option<ParamsEdit<'_>>,
    shape: impl FnOnce(&mut Value),
) -> Ended {
    let ended = exchange_inner(session, req, edit, shape).await;
    match &ended {
        Ended::Refused(refusal) => req.span.refused(refusal),
        other => req.span.ended(other.outcome()),
    }
    ended
}

async fn exchange_inner(
    session: &Arc<Session>,
    req: &Request,
    edit: Option<ParamsEdit<'_>>,
    shape: impl FnOnce(&mut Value),
) -> Ended {
    let limit = session.app.limits.request_timeout;
    match session.forward(&req.id, &req.msg, edit, limit).await {
        Forwarded::Answer(answer) => {
            let what = req.msg.method();
            let metrics = &session.app.metrics;
            match output::finish(&answer, &req.id, what, &req.policy, metrics, shape) {
                Ok((bytes, filtered)) => {
                    session.answer_call(&req.id, bytes);
                    Ended::Answered {
                        filtered,
                        error: answer.is_error,
                    }
                }
                Err(refusal) => {
                    session.answer_call(&req.id, refusal.to_response(Some(&req.id)));
                    Ended::Refused(refusal)
                }
            }
        }
        Forwarded::Failed(reason) => {
            session.answer_call(&req.id, upstream_failed(req, &reason));
            Ended::Failed
        }
        Forwarded::TimedOut(lingering) => {
            let refusal = timed_out(req.msg.method(), limit);
            session.answer_call(&req.id, refusal.to_response(Some(&req.id)));
            lingering.settle().await;
            Ended::Refused(refusal)
        }
        Forwarded::Cancelled(lingering) => {
            lingering.settle().await;
            Ended::Unanswered
        }
        Forwarded::Gone => Ended::Unanswered,
    }
}

/// The error of a request the server could not take or did not survive.
pub fn upstream_failed(req: &Request, reason: &str) -> bytes::Bytes {
    jsonrpc::error_response(
        Some(&req.id),
        codes::INTERNAL_ERROR,
        reason,
        Some(json!({ "reason": "upstream_failed" })),
    )
}

fn timed_out(method: &str, limit: Duration) -> Refusal {
    Refusal::RequestTimeout {
        method: crate::metrics::method_label(method),
        limit_secs: limit.as_secs(),
    }
}
