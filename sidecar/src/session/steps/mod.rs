//! The steps: what a session does with each client request it has taken
//! in, composed from the gates below ([`crate::gates`]) and the session's
//! own forwarding.
//!
//! The session takes a request (registered, its method looked up in
//! [`crate::gates::methods`], read strictly, the role gate passed) and hands it here with
//! the step the method table names. [`run`] is the one place a step is
//! chosen:
//! - `initialize` → [`handshake`]: capabilities cut to what the facade serves;
//! - `tools/call` → [`call`]: policy → budget → schema → approval →
//!   upstream with timeout → response filter → audit/metrics (the
//!   tool-search meta-tools first, [`search`]);
//! - `tools/list` → [`list`]: all pages → registry (pins, drift,
//!   poisoning) → filter by the same decision → rewrite;
//! - resources, prompts, completion → [`catalog`]: the resource and prompt
//!   rules on what the request names, lists filtered by the same rules;
//! - everything else the table allows (`ping`, `logging/setLevel`) →
//!   [`forward`]: sent on, the answer filtered;
//! - `server/discover` → [`discover`], `subscriptions/listen` →
//!   [`subscriptions`], `tasks/get|update|cancel` → [`task`] (modern
//!   clients);
//! - a legacy client in front of a modern server: its handshake, `ping` and
//!   log level are the facade's own ([`local`]).
//!
//! Every step sends through [`Session::forward`] (the facade's own ids) and
//! answers through [`Session::answer_call`], exactly once. Refusals become
//! JSON-RPC errors only in [`crate::gates::refusal`]; the answers of the server pass
//! [`crate::gates::output`] (redaction, size caps) on every path.

pub mod approval;
pub mod call;
pub mod catalog;
pub mod discover;
pub mod forward;
pub mod handshake;
pub mod held;
pub mod list;
pub mod local;
pub mod search;
pub mod subscriptions;
pub mod task;

use std::sync::Arc;

use crate::gates::methods::Step;
use crate::gates::Request;
use crate::session::Session;

/// Run `step` for `req`; it answers the request exactly once.
pub async fn run(session: Arc<Session>, step: Step, req: Request) {
    // A legacy client in front of a modern server: what that server no
    // longer has, the facade answers.
    if session.legacy_on_modern() && local::answers(&session, &req).await {
        return;
    }
    match step {
        Step::Handshake => handshake::initialize(&session, req).await,
        Step::Forward => forward::plain(&session, req).await,
        Step::ToolCall => search::tool_call(&session, req).await,
        Step::ToolList => session.tools_list(req).await,
        Step::ResourceList
        | Step::TemplateList
        | Step::PromptList
        | Step::Resource
        | Step::Prompt
        | Step::Completion => catalog::run(&session, step, req).await,
        Step::Discover => discover::discover(&session, req).await,
        Step::Listen => subscriptions::listen(&session, req).await,
        Step::Task => task::run(&session, req).await,
    }
}
