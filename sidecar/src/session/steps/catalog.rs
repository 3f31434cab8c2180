//! Resources, prompts and completion: the resource and prompt rules on what
//! a request names, and on every entry of a list.
//!
//! Gates, in order: what the request names (`params.uri` of a resource
//! read or (un)subscribe, `params.name` of a prompt, the prompt or resource
//! template `params.ref` completes) is judged by the policy's resource or
//! prompt rules — the same decision that filters the lists — then the
//! request goes on under the facade's id, and the answer passes the output
//! filter (a list keeps only what this caller may use; every string is
//! redacted; an answer over `maxOutputBytes` is refused). Reads, gets and
//! completions write an audit line: the URI's hash, never the URI's or the
//! answer's content.

use std::sync::Arc;

use mcp_warden_crds::Role;
use mcp_warden_policy::{CompiledPolicy, Denial};
use serde_json::Value;

use super::forward::exchange;
use crate::gates::audit;
use crate::gates::methods::Step;
use crate::gates::refusal::Refusal;
use crate::gates::Ended;
use crate::gates::Request;
use crate::session::Session;

pub async fn run(session: &Arc<Session>, step: Step, req: Request) {
    let compiled = &req.policy.compiled;
    let params = req.params();
    let text = |key: &str| params.get(key).and_then(Value::as_str).unwrap_or("");
    let judged = match step {
        Step::Resource => Some(compiled.decide_resource(text("uri"), req.role)),
        Step::Prompt => Some(compiled.decide_prompt(text("name"), req.role)),
        Step::Completion => Some(completion_target(compiled, params, req.role)),
        _ => None,
    };
    if let Some(Err(denial)) = judged {
        let refusal = Refusal::Policy(denial);
        req.span.refused(&refusal);
        session.answer_call(&req.id, refusal.to_response(Some(&req.id)));
        return account(session, &req, step, &Ended::Refused(refusal));
    }
    // A modern server has no resources/subscribe: the session's own
    // subscription there changes instead.
    let method = req.msg.method();
    if session.legacy_on_modern()
        && matches!(method, "resources/subscribe" | "resources/unsubscribe")
    {
        session.legacy_subscribe(text("uri"), method == "resources/subscribe");
        session.answer_call(&req.id, crate::jsonrpc::result_response(&req.id, "{}"));
        let ended = Ended::Answered {
            filtered: Default::default(),
            error: false,
        };
        return account(session, &req, step, &ended);
    }
    let role = req.role;
    let ended = exchange(session, &req, None, |result| {
        filter_list(compiled, step, result, role)
    })
    .await;
    account(session, &req, step, &ended);
}

/// The prompt or resource (template) a completion is for, judged.
fn completion_target(
    compiled: &CompiledPolicy,
    params: &Value,
    role: Option<Role>,
) -> Result<(), Denial> {
    let reference = params.get("ref").unwrap_or(&Value::Null);
    let field = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "ref/prompt" => compiled.decide_prompt(field("name"), role),
        // The URI of a resource, or of a template (`{…}` placeholders).
        "ref/resource" if field("uri").contains('{') => {
            compiled.decide_template(field("uri"), role)
        }
        "ref/resource" => compiled.decide_resource(field("uri"), role),
        _ => Err(Denial::ResourceNotAvailable {
            uri: String::new(),
            reason: "unknown_completion_ref",
        }),
    }
}

/// Keep only the entries this caller may use, by the same decisions that
/// gate the requests naming them.
fn filter_list(compiled: &CompiledPolicy, step: Step, result: &mut Value, role: Option<Role>) {
    let (key, field): (&str, &str) = match step {
        Step::ResourceList => ("resources", "uri"),
        Step::TemplateList => ("resourceTemplates", "uriTemplate"),
        Step::PromptList => ("prompts", "name"),
        _ => return,
    };
    let Some(Value::Array(entries)) = result.get_mut(key) else {
        return;
    };
    entries.retain(|entry| {
        let name = entry.get(field).and_then(Value::as_str).unwrap_or("");
        match step {
            Step::ResourceList => compiled.decide_resource(name, role).is_ok(),
            Step::TemplateList => compiled.decide_template(name, role).is_ok(),
            _ => compiled.decide_prompt(name, role).is_ok(),
        }
    });
}

/// Metrics, and the audit line of reads, gets and completions.
fn account(session: &Session, req: &Request, step: Step, ended: &Ended) {
    session.observe(req.msg.method(), ended.outcome(), req.started);
    if let Ended::Refused(r) = ended {
        session
            .app
            .metrics
            .policy_denials
            .with_label_values(&[r.reason()])
            .inc();
    }
    let event = match (step, req.msg.method()) {
        (Step::Resource, "resources/read") => "resource_read",
        (Step::Resource, "resources/subscribe") => "resource_subscribe",
        (Step::Resource, _) => "resource_unsubscribe",
        (Step::Prompt, _) => "prompt_get",
        (Step::Completion, _) => "completion",
        _ => return,
    };
    audit::request(session.trail(), req, event, ended);
}
