//! The tools/call path: every gate a call passes, in order, in one function.
//!
//! ```text
//! (session: registered, method table, strict read, role gate) → policy
//! (allowlist, role, quarantine, risk, argument rules, sandbox) → budget →
//! input schema → human approval → upstream under the facade's id (with
//! timeout) → response filter (cap, redaction, outputSchema) → audit +
//! metrics
//! ```
//! The first refusal wins and becomes the call's one answer. Order differs
//! from the error-code table's order in two places, deliberately: the sandbox check
//! comes before budgets (a call that can never run should not spend budget)
//! and schema validation comes before approval (never ask a person to
//! approve a call that cannot succeed).

use std::sync::Arc;

use bytes::Bytes;
use mcp_warden_crds::Role;
use mcp_warden_policy::{Decision, Denial};
use mcp_warden_telemetry::opentelemetry::KeyValue;
use serde_json::Value;

use super::forward;
use crate::gates::audit::{self, Record};
use crate::gates::input;
use crate::gates::output::{Filtered, OutputCheck};
use crate::gates::refusal::{Budget, Refusal};
use crate::gates::shared_budget::NotGranted;
use crate::gates::Request;
use crate::jsonrpc::{self, Members, ParamsEdit, RequestId};
use crate::session::{Forwarded, Session};

/// What the audit line and metrics need to know about a call.
#[derive(Default)]
struct Outcome<'a> {
    tool: Option<String>,
    upstream_tool: Option<String>,
    definition_hash: Option<String>,
    role: Option<Role>,
    filtered: Option<Filtered>,
    refusal: Option<&'a Refusal>,
    upstream_error: bool,
    /// The server could not take the call or went away during it.
    failed: bool,
    /// The client cancelled it: no answer was owed.
    cancelled: bool,
    /// A modern client was asked to have a person approve it first.
    asked: bool,
    /// Who approved it out of band.
    approver: Option<String>,
}

impl Outcome<'_> {
    /// The `outcome` label of the call's metrics (and span).
    fn label(&self) -> &'static str {
        match self.refusal {
            Some(_) => "denied",
            None if self.asked => "input_required",
            None if self.cancelled => "cancelled",
            None if self.failed => "failed",
            None if self.upstream_error => "error",
            None => "ok",
        }
    }
}

impl Session {
    /// Run one tools/call through the gates; answers it exactly once.
    pub(crate) async fn tools_call(self: Arc<Self>, req: Request) {
        self.tools_call_as(req, None).await;
    }

    /// Run one tools/call through the gates. `held`: the call is one the
    /// facade held as its own task while a person was asked (the key of
    /// that task, and whether the person approved); its answer goes to the
    /// task, and the request `req.id` (the `tasks/update` that carried the
    /// answer) is not answered here.
    pub(crate) async fn tools_call_as(self: Arc<Self>, req: Request, held: Option<(String, bool)>) {
        let id = req.id.clone();
        let app = self.app.clone();
        let policy = req.policy.clone();
        let params = req.params();
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let no_args = Value::Object(Default::default());
        let arguments = params.get("arguments").unwrap_or(&no_args);
        // Serialized once: its size is a budget, its hash goes to the audit line.
        let args_json = serde_json::to_vec(arguments).unwrap_or_default();
        let arg_bytes = args_json.len() as u64;
        let mut outcome = Outcome {
            role: req.role,
            ..Default::default()
        };
        let role = req.role;

        // Know the server's tools before deciding: a client may call without
        // listing first, and what a server lists may depend on what this
        // session's client declared (the facade's own list at start had none).
        // An unknown name lists once per session, so made-up names cannot
        // make the server list again and again.
        let unknown = policy
            .compiled
            .by_exposed(&name)
            .upstream_name()
            .is_some_and(|n| app.registry.get(n).is_none());
        if app.registry.is_empty() || (unknown && self.first_listing()) {
            self.refresh_tools().await;
        }

        let mut lingering = None;
        let result: Result<(Bytes, Filtered), Refusal> = async {
            // A task-augmented call of 2025-11-25 would be fetched with
            // tasks/result, around this filter: not served (the tasks
            // extension's calls carry no `task` param).
            if params.get("task").is_some()
                && self.client_era != crate::session::channel::Era::Modern
            {
                return Err(Refusal::MethodNotAllowed {
                    method: "tools/call with params.task (task-augmented calls)".into(),
                });
            }
            // Policy: allowlist, role, quarantine, planning mode and effect
            // tags, risk ceiling, argument rules, sandbox — one pure decision shared with tools/list.
            let observed = policy
                .compiled
                .by_exposed(&name)
                .upstream_name()
                .and_then(|n| app.registry.get(n));
            let decision = policy
                .compiled
                .decide_call(&name, role, req.asks(), arguments, |_| observed.as_deref());
            let grant = match decision {
                Decision::Allow(grant) => grant,
                Decision::Deny(denial) => return Err(Refusal::Policy(denial)),
            };
            let tool = observed
                .clone()
                .expect("an allowed call has an observed tool");
            outcome.tool = Some(grant.exposed_name.to_string());
            outcome.upstream_tool = Some(grant.upstream_name.to_string());
            outcome.definition_hash = Some(tool.hash.clone());
            if req.span.is_recording() {
                req.span.rename("tools/call", grant.exposed_name);
                req.span.set(vec![
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", grant.exposed_name.to_string()),
                    KeyValue::new("mcpwarden.upstream_tool", grant.upstream_name.to_string()),
                    KeyValue::new("mcpwarden.definition_hash", tool.hash.clone()),
                ]);
                req.span.gate("policy", "pass");
            }

            // A modern client is asked for approval through the call's result
            // and retries with the answer: the asking round spends no budget
            // (and never asks about a call that cannot succeed).
            let round = self.round(&id);
            let elicited = grant
                .approval
                .as_ref()
                .filter(|a| a.channel == mcp_warden_crds::ApprovalChannel::Elicitation);
            // A held call's answer came with the task's update: a no is
            // final, whatever the policy says now.
            if held.as_ref().is_some_and(|(_, approved)| !approved) {
                return Err(Refusal::ApprovalDeclined {
                    tool: grant.exposed_name.to_string(),
                    rule: elicited.map(|a| a.names()).unwrap_or_default(),
                    approver: None,
                });
            }
            if let (Some(approval), Some(round), false) = (elicited, round.as_ref(), held.is_some())
            {
                match round.approval() {
                    Some(true) => {}
                    Some(false) => {
                        return Err(Refusal::ApprovalDeclined {
                            tool: grant.exposed_name.to_string(),
                            rule: approval.names(),
                            approver: None,
                        })
                    }
                    // A client that cannot show a form cannot ask anyone.
                    None if !round.can_answer("elicitation/create") => {
                        return Err(Refusal::Policy(Denial::ApprovalRequired {
                            tool: grant.exposed_name.to_string(),
                            rules: approval.owned_rules(),
                        }))
                    }
                    None => {
                        input::validate(&app.schemas, &tool, grant.exposed_name, arguments)?;
                        let question =
                            super::approval::question(grant.exposed_name, approval, arguments);
                        outcome.asked = true;
                        req.span.gate("approval", "ask");
                        // A caller that may get a task gets one of the
                        // facade's own, holding the call until the answer
                        // (see `steps::held`); it counts as a live task.
                        if super::task::may_make_task(&self, &req) {
                            super::task::check_cap(&self, &req, grant.exposed_name)?;
                            let names = (grant.exposed_name, grant.upstream_name);
                            let bytes = super::held::hold(&self, &req, names, question);
                            return Ok((bytes, Filtered::default()));
                        }
                        let bytes = crate::session::approval_request(&app, round, &id, question);
                        return Ok((bytes, Filtered::default()));
                    }
                }
            }

            // Budget: argument size, session time, call counts, concurrency,
            // rate; then the identity's calls across its sessions (when
            // that refuses, the session's count is given back: a refused
            // call consumes no call). The permit frees the concurrency slots
            // when this step ends: after the server let go of the call, not
            // when the client stopped waiting.
            // A call that may become a task: the identity's running tasks
            // are capped (each also holds a concurrency slot, below).
            // A held call was counted when the facade made its task.
            if held.is_none() {
                super::task::check_cap(&self, &req, grant.exposed_name)?;
            }
            let session_rate = policy.compiled.profile_limits().calls_per_minute;
            let permit = self.budget.admit(
                grant.exposed_name,
                grant.limits,
                session_rate,
                arg_bytes,
                &app.global_calls,
            )?;
            let per_identity = crate::gates::budget::identity_budgets(
                grant.exposed_name,
                grant.limits,
                policy.compiled.profile_limits(),
            );
            if !per_identity.is_empty() {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                // Counted by the identity's owner replica: here, or asked
                // over the relay (an owner that cannot be asked fails the
                // call closed, see `gates::shared_budget`).
                let (taken, asked) = app
                    .identity_budgets
                    .take(&self.quota_key, &per_identity, now)
                    .await;
                if let Some(asked) = asked {
                    app.metrics.identity_budget_ask(asked.label());
                }
                if let Err(not_granted) = taken {
                    self.budget.give_back();
                    let (budget, limit, observed) = match not_granted {
                        NotGranted::Spent { limit, observed } => {
                            (Budget::CallsPerIdentity, limit, Some(observed))
                        }
                        NotGranted::Unavailable(_) => (
                            Budget::IdentityBudgetUnavailable,
                            per_identity[0].1.calls,
                            None,
                        ),
                    };
                    return Err(Refusal::Budget {
                        tool: grant.exposed_name.to_string(),
                        budget,
                        limit,
                        observed,
                    });
                }
            }
            req.span.gate("budget", "pass");

            // Input schema: no coercion, every violation listed.
            input::validate(&app.schemas, &tool, grant.exposed_name, arguments)?;
            req.span.gate("schema", "pass");

            // Approval: an argument rule said `check`; ask the person: at a
            // legacy client, on its session (a modern one was asked above,
            // through the call's result), or out of band on the admin port.
            let asked_already = (round.is_some() || held.is_some())
                && grant
                    .approval
                    .as_ref()
                    .is_some_and(|a| a.channel == mcp_warden_crds::ApprovalChannel::Elicitation);
            if let (Some(approval), false) = (grant.approval.as_ref(), asked_already) {
                outcome.approver = super::approval::ask(
                    &self,
                    req.stream,
                    grant.exposed_name,
                    approval,
                    arguments,
                    &req.caller,
                )
                .await?;
                req.span.gate("approval", "pass");
            }

            // Upstream: under the facade's id, the upstream name (aliases
            // rewritten), bounded in time.
            let upstream =
                (grant.upstream_name != name).then(|| jsonrpc::raw_string(grant.upstream_name));
            // A modern client's 2025-11-25 `task` hint means nothing in its
            // revision (the server decides): it never reaches the server,
            // which could read it as the old task augmentation.
            let drop_hint = params.get("task").is_some();
            // A gateway's planning mode and refused effect tags reach the
            // backend, which judges the tool by its own profile's effect
            // tags (which the gateway cannot see): asking for either only
            // ever takes away.
            let restricts = match (&app.target, role) {
                (crate::upstream::UpstreamTarget::Gateway(_), Some(r)) => {
                    let own = policy.compiled.restriction(r);
                    let asks = mcp_warden_policy::Asks {
                        planning: req.planning || own.planning,
                        denied: req.denied.union(own.denied),
                    };
                    (asks != mcp_warden_policy::Asks::default()).then_some(asks)
                }
                _ => None,
            };
            let mut rename = |p: &mut Members| {
                if let Some(upstream) = &upstream {
                    p.set("name", upstream.clone());
                }
                if drop_hint {
                    p.remove("task");
                }
                if let Some(asks) = restricts {
                    ask_restrictions(p, asks);
                }
            };
            let edit: Option<ParamsEdit<'_>> =
                if upstream.is_some() || drop_hint || restricts.is_some() {
                    Some(&mut rename)
                } else {
                    None
                };
            let timeout = grant.limits.call_timeout;
            let answer = match self.forward(&id, &req.msg, edit, timeout).await {
                Forwarded::Answer(answer) => answer,
                Forwarded::Failed(reason) => {
                    outcome.failed = true;
                    return Ok((forward::upstream_failed(&req, &reason), Filtered::default()));
                }
                Forwarded::TimedOut(l) => {
                    lingering = Some((l, permit));
                    return Err(Refusal::Timeout {
                        tool: grant.exposed_name.to_string(),
                        limit_secs: timeout.as_secs(),
                    });
                }
                Forwarded::Cancelled(l) => {
                    lingering = Some((l, permit));
                    outcome.cancelled = true;
                    return Ok((Bytes::new(), Filtered::default()));
                }
                Forwarded::Gone => {
                    outcome.cancelled = true;
                    return Ok((Bytes::new(), Filtered::default()));
                }
            };
            outcome.upstream_error = answer.is_error;
            req.span.gate("upstream", "pass");
            // A task handle becomes the caller's (the facade's sealed id),
            // and the facade watches it: the task keeps the call's
            // concurrency slots until it ends.
            let names = (grant.exposed_name, grant.upstream_name);
            let (answer, task) = match &held {
                None => super::task::adopt(&self, &req, names, answer),
                Some((key, _)) => {
                    let task = super::held::follow(&self, key, &answer);
                    (answer, task)
                }
            };
            if let Some((key, poll_ms)) = task {
                let watch = crate::session::task_watch::Watch {
                    key,
                    poll_ms,
                    permit: Some(permit),
                    credential: app.task_poll_credential(&req.caller).await,
                };
                crate::session::task_watch::spawn(app.clone(), self.channel.clone(), watch);
            }

            // Response filter: output cap, redaction, outputSchema.
            let check = OutputCheck {
                tool: grant.exposed_name,
                limits: grant.limits,
                redactor: policy.compiled.redactor(),
                schemas: &app.schemas,
                definition: Some(&tool),
            };
            let checked = check.apply(answer, &id);
            if checked.is_ok() {
                req.span.gate("output", "pass");
            }
            checked
        }
        .await;

        // Answer (exactly once), then audit and metrics.
        let refusal;
        if let Some((key, _)) = &held {
            let answer = result.as_ref().map(|(bytes, _)| bytes.clone());
            super::held::finish(&self, key, answer);
        }
        match result {
            Ok((_, filtered)) if held.is_some() => outcome.filtered = Some(filtered),
            Err(r) if held.is_some() => {
                refusal = r;
                outcome.refusal = Some(&refusal);
            }
            Ok((bytes, _)) if outcome.asked => self.answer_input_required(&id, bytes),
            Ok((bytes, filtered)) => {
                if !bytes.is_empty() {
                    self.answer_call(&id, bytes);
                }
                outcome.filtered = Some(filtered);
            }
            Err(r) => {
                refusal = r;
                self.answer_call(&id, refusal.to_response(Some(&id)));
                outcome.refusal = Some(&refusal);
            }
        }
        self.account(&id, &req, &outcome, &name, &args_json);
        match outcome.refusal {
            Some(refusal) => req.span.refused(refusal),
            None => req.span.ended(outcome.label()),
        }
        req.span.end();
        // A call the client no longer waits for keeps its slot until the
        // server lets go of it: cancelled, until its time limit; timed out,
        // until the grace ends and the server is recycled.
        if let Some((lingering, permit)) = lingering {
            lingering.settle().await;
            drop(permit);
        }
    }

    /// Metrics and the audit line for one call.
    fn account(
        &self,
        id: &RequestId,
        req: &Request,
        o: &Outcome<'_>,
        requested: &str,
        args_json: &[u8],
    ) {
        let (identity, started, span) = (&*req.caller, req.started, &req.span);
        let app = &self.app;
        let took = started.elapsed();
        // A label only for names the policy or the server vouch for.
        let label = metric_label(&app.policy.load(), o.tool.as_deref(), app.registry.len());
        let (outcome, code) = (o.label(), o.refusal.map_or(0, Refusal::code));
        let code_label = if code == 0 {
            "0".to_string()
        } else {
            code.to_string()
        };
        app.metrics
            .tool_calls
            .with_label_values(&[label, outcome, &code_label])
            .inc();
        // A cancelled call was counted when the cancellation came in.
        if !o.cancelled {
            app.metrics.observe_request("tools/call", outcome, took);
        }
        if let Some(r) = o.refusal {
            app.metrics
                .policy_denials
                .with_label_values(&[r.reason()])
                .inc();
        }
        if let Some(f) = &o.filtered {
            app.metrics
                .tool_call_duration
                .with_label_values(&[label])
                .observe(took.as_secs_f64());
            app.metrics
                .tool_output_bytes
                .with_label_values(&[label])
                .observe(f.output_bytes as f64);
            for (kind, n) in &f.redactions {
                app.metrics
                    .redactions
                    .with_label_values(&[kind])
                    .inc_by(u64::from(*n));
            }
        }
        if !app.audit.is_on() {
            return;
        }
        let session = audit::hash_session(&self.id);
        let record = Record {
            time: audit::now_rfc3339(),
            event: "tool_call",
            method: Some("tools/call"),
            call_id: format!("{session}:{}", id.as_json().trim_matches('"')),
            session: session.clone(),
            issuer: identity.issuer.as_deref(),
            subject: identity.subject.as_deref(),
            auth: identity.method.as_str(),
            role: o.role.map(mcp_warden_policy::role_name),
            tool: Some(
                o.tool
                    .as_deref()
                    .unwrap_or_else(|| audit::bounded(requested)),
            ),
            upstream_tool: o.upstream_tool.as_deref(),
            prompt: None,
            definition_hash: o.definition_hash.as_deref(),
            args_sha256: Some(audit::sha256_hex(args_json)),
            args_bytes: args_json.len() as u64,
            decision: match (o.refusal.is_some(), o.asked) {
                (true, _) => "deny",
                (false, true) => "ask",
                (false, false) => "allow",
            },
            code: o.refusal.map(|r| r.code()),
            reason: o
                .refusal
                .map(|r| r.reason())
                .or(o.cancelled.then_some("cancelled"))
                .or(o.asked.then_some("approval_requested")),
            duration_ms: took.as_secs_f64() * 1000.0,
            output_bytes: o.filtered.as_ref().map(|f| f.output_bytes),
            truncated: o.filtered.as_ref().is_some_and(|f| f.truncated),
            redactions: o.filtered.as_ref().map_or(0, Filtered::redaction_total),
            approver: o.approver.as_deref().or(match o.refusal {
                Some(Refusal::ApprovalDeclined { approver, .. }) => approver.as_deref(),
                _ => None,
            }),
            finding: match o.refusal {
                Some(Refusal::Policy(Denial::Quarantined { cause, .. })) => cause.detail(),
                _ => None,
            },
            ..Default::default()
        }
        .traced(span);
        app.audit.write(&record, &app.metrics);
    }
}

/// Tools that may have their own label value: the profile's, or any while
/// the server lists a sane number of tools (it is not trusted to bound them).
const MAX_IMPLICIT_TOOL_LABELS: usize = 256;

fn metric_label<'a>(
    policy: &crate::gates::policy::LivePolicy,
    tool: Option<&'a str>,
    upstream_tools: usize,
) -> &'a str {
    match tool {
        None => "unknown",
        Some(t) if policy.compiled.tools().iter().any(|r| r.exposed == t) => t,
        Some(t) if upstream_tools <= MAX_IMPLICIT_TOOL_LABELS => t,
        Some(_) => "other",
    }
}

/// `_meta` asking the server (a gateway's backend facade) for planning mode
/// and to refuse effect tags.
fn ask_restrictions(params: &mut Members<'_>, asks: mcp_warden_policy::Asks) {
    let mut meta = params
        .get("_meta")
        .and_then(|m| serde_json::from_str::<serde_json::Map<String, Value>>(m.get()).ok())
        .unwrap_or_default();
    if asks.planning {
        meta.insert(
            crate::gates::planning::META_KEY.into(),
            Value::String("planning".into()),
        );
    }
    let denied = asks.denied.tags();
    if !denied.is_empty() {
        meta.insert(
            crate::gates::planning::DENY_META_KEY.into(),
            serde_json::to_value(denied).expect("tags serialize"),
        );
    }
    let raw = serde_json::value::to_raw_value(&meta).expect("values serialize");
    params.set("_meta", raw);
}
