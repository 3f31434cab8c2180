//! The tools/call path: every gate a call passes, in order, in one function.
//!
//! ```text
//! parse → identity/role → policy (allowlist, role, quarantine, risk,
//! argument rules, sandbox) → budget → input schema → human approval →
//! upstream (with timeout) → response filter (cap, redaction, outputSchema)
//! → audit + metrics
//! ```
//! The first refusal wins and becomes the call's one answer. Order differs
//! from DESIGN §6's table in two places, deliberately: the sandbox check
//! comes before budgets (a call that can never run should not spend budget)
//! and schema validation comes before approval (never ask a person to
//! approve a call that cannot succeed).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use mcp_warden_crds::Role;
use mcp_warden_policy::{Decision, Denial, SchemaError};
use serde_json::Value;

use super::audit::{self, Record};
use super::identity::Identity;
use super::output::{Filtered, OutputCheck};
use super::refusal::Refusal;
use crate::jsonrpc::{self, Message, RequestId};
use crate::session::Session;

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
}

impl Session {
    /// Run one tools/call through the gates; answers on `stream`, exactly once.
    pub(crate) async fn tools_call(
        self: Arc<Self>,
        msg: Message,
        stream: u64,
        identity: Arc<Identity>,
    ) {
        let started = Instant::now();
        let id = msg.id.clone().expect("requests have ids");
        let app = self.app.clone();
        let policy = app.policy.load_full();
        // Read strictly: a key given twice means different things to
        // different parsers, and the server gets the client's bytes.
        let request = match crate::strict_json::from_slice(&msg.bytes) {
            Ok(request) => request,
            Err(e) => {
                let duplicate = e.to_string().contains("duplicate key");
                let (text, reason) = if duplicate {
                    (
                        format!("Invalid params: {e}; send each key once"),
                        "duplicate_key",
                    )
                } else {
                    (
                        format!("Invalid params: the request cannot be read ({e}); send valid UTF-8 strings"),
                        "unreadable_params",
                    )
                };
                let data = serde_json::json!({ "reason": reason });
                let bytes = jsonrpc::error_response(
                    Some(&id),
                    jsonrpc::codes::INVALID_PARAMS,
                    &text,
                    Some(data),
                );
                return self.answer_call(&id, bytes);
            }
        };
        let params = request.get("params").cloned().unwrap_or(Value::Null);
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
        let mut outcome = Outcome::default();

        // Identity → role: authentication happened in the transport; the role
        // comes from the policy's bindings.
        let role = identity.role(&policy.compiled);
        outcome.role = role;

        // Know the server's tools before deciding (a client may call without
        // listing first).
        if app.registry.is_empty() {
            self.refresh_tools().await;
        }

        let result: Result<(Bytes, Filtered), Refusal> = async {
            // Policy: allowlist, role, quarantine, risk ceiling, argument
            // rules, sandbox — one pure decision shared with tools/list.
            let observed = policy
                .compiled
                .by_exposed(&name)
                .upstream_name()
                .and_then(|n| app.registry.get(n));
            let decision = policy
                .compiled
                .decide_call(&name, role, arguments, |_| observed.as_deref());
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

            // Budget: argument size, session time, call counts, concurrency,
            // rate. The permit frees the concurrency slots on return.
            let session_rate = policy.compiled.profile_limits().calls_per_minute;
            let _permit = self.budget.admit(
                grant.exposed_name,
                grant.limits,
                session_rate,
                arg_bytes,
                &app.global_calls,
            )?;

            // Input schema: no coercion, every violation listed.
            if let Err(e) = app
                .schemas
                .validate_input(&tool.hash, &tool.definition, arguments)
            {
                let violations = match e {
                    SchemaError::Invalid(v) => v,
                    other => vec![mcp_warden_policy::Violation {
                        instance_path: String::new(),
                        keyword: "schema".into(),
                        message: other.to_string(),
                    }],
                };
                return Err(Refusal::Policy(Denial::InvalidParams {
                    tool: grant.exposed_name.to_string(),
                    violations,
                }));
            }

            // Approval: an argument rule said `check`; ask the person.
            if let Some(approval) = grant.approval {
                super::approval::ask(&self, stream, grant.exposed_name, approval, arguments)
                    .await?;
            }

            // Upstream: the upstream name (aliases rewritten), bounded in time.
            let outbound = if grant.upstream_name == name {
                msg.clone()
            } else {
                let upstream = jsonrpc::raw_string(grant.upstream_name);
                jsonrpc::edit_params(&msg, |p| {
                    p.insert("name".into(), upstream);
                })
                .map_err(|why| {
                    let v = mcp_warden_policy::Violation {
                        instance_path: String::new(),
                        keyword: "json".into(),
                        message: why,
                    };
                    Refusal::Policy(Denial::InvalidParams {
                        tool: grant.exposed_name.to_string(),
                        violations: vec![v],
                    })
                })?
            };
            let answer = self
                .forward_and_wait(outbound, grant.limits.call_timeout)
                .await;
            let answer = match answer {
                Ok(Some(answer)) => answer,
                Ok(None) => return Ok((Bytes::new(), Filtered::default())), // answered elsewhere
                Err(()) => {
                    return Err(Refusal::Timeout {
                        tool: grant.exposed_name.to_string(),
                        limit_secs: grant.limits.call_timeout.as_secs(),
                    })
                }
            };
            outcome.upstream_error = answer.is_error;

            // Response filter: output cap, redaction, outputSchema.
            let check = OutputCheck {
                tool: grant.exposed_name,
                limits: grant.limits,
                redactor: policy.compiled.redactor(),
                schemas: &app.schemas,
                definition: Some(&tool),
            };
            check.apply(answer)
        }
        .await;

        // Answer (exactly once), then audit and metrics.
        let refusal;
        match result {
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
        self.account(&id, &identity, &outcome, &name, &args_json, started);
    }

    /// Metrics and the audit line for one call.
    #[allow(clippy::too_many_arguments)]
    fn account(
        &self,
        id: &RequestId,
        identity: &Identity,
        o: &Outcome<'_>,
        requested: &str,
        args_json: &[u8],
        started: Instant,
    ) {
        let app = &self.app;
        let took = started.elapsed();
        // A label only for names the policy or the server vouch for.
        let label = metric_label(&app.policy.load(), o.tool.as_deref(), app.registry.len());
        let (outcome, code) = match (o.refusal, o.upstream_error) {
            (Some(r), _) => ("denied", r.code()),
            (None, true) => ("error", 0),
            (None, false) => ("ok", 0),
        };
        let code_label = if code == 0 {
            "0".to_string()
        } else {
            code.to_string()
        };
        app.metrics
            .tool_calls
            .with_label_values(&[label, outcome, &code_label])
            .inc();
        app.metrics.observe_request(
            "tools/call",
            if outcome == "denied" {
                "denied"
            } else {
                outcome
            },
            took,
        );
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
            call_id: format!("{session}:{}", id.as_json().trim_matches('"')),
            session: session.clone(),
            subject: identity.subject.as_deref(),
            auth: identity.method.as_str(),
            role: o.role.map(mcp_warden_policy::role_name),
            tool: Some(o.tool.as_deref().unwrap_or_else(|| bounded(requested))),
            upstream_tool: o.upstream_tool.as_deref(),
            definition_hash: o.definition_hash.as_deref(),
            args_sha256: Some(audit::sha256_hex(args_json)),
            args_bytes: args_json.len() as u64,
            decision: if o.refusal.is_some() { "deny" } else { "allow" },
            code: o.refusal.map(|r| r.code()),
            reason: o.refusal.map(|r| r.reason()),
            duration_ms: took.as_secs_f64() * 1000.0,
            output_bytes: o.filtered.as_ref().map(|f| f.output_bytes),
            truncated: o.filtered.as_ref().is_some_and(|f| f.truncated),
            redactions: o.filtered.as_ref().map_or(0, Filtered::redaction_total),
        };
        app.audit.write(&record, &app.metrics);
    }
}

/// A caller-chosen name, bounded so an audit line stays small.
fn bounded(name: &str) -> &str {
    let mut end = name.len().min(128);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Tools that may have their own label value: the profile's, or any while
/// the server lists a sane number of tools (it is not trusted to bound them).
const MAX_IMPLICIT_TOOL_LABELS: usize = 256;

fn metric_label<'a>(
    policy: &super::policy::LivePolicy,
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
