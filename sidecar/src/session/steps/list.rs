//! The tools/list path and the server's `notifications/tools/list_changed`.
//!
//! tools/list: forward → collect every upstream page (the facade follows
//! `nextCursor` itself and answers with one complete, filtered page, so a
//! cursor never points into a list the client cannot see) → record each
//! definition in the registry (hash, drift, poisoning) → keep what the
//! policy lets this caller see → rewrite (alias, description, risk prefix,
//! portable schema) → the tool-search meta-tools, beside or instead of the
//! tools (the policy's `toolSearch`, [`super::search`]).
//!
//! list_changed: the channel re-reads the list (re-checking pins and
//! drift) before telling any client, so a changed definition is quarantined
//! before a client can act on it.

use std::sync::Arc;

use bytes::Bytes;
use mcp_warden_crds::policy::ToolSearch;
use mcp_warden_policy::{clean_schema, Decision};
use mcp_warden_telemetry::opentelemetry::KeyValue;
use serde_json::{json, Value};

use super::search;
use crate::gates::output;
use crate::gates::registry::ObservedTool;
use crate::gates::Request;
use crate::jsonrpc::{self, Members, ParamsEdit};
use crate::session::{Forwarded, Session};

impl Session {
    /// Answer one client tools/list (exactly once).
    pub(crate) async fn tools_list(self: Arc<Self>, req: Request) {
        let id = req.id.clone();
        // The client's cursor points into the single page the facade serves:
        // always start from the first upstream page.
        let mut no_cursor = |p: &mut Members| {
            p.remove("cursor");
        };
        let edit: Option<ParamsEdit<'_>> = if req.params().get("cursor").is_some() {
            Some(&mut no_cursor)
        } else {
            None
        };
        let limit = self.app.limits.upstream_wait;
        let answer = match self.forward(&id, &req.msg, edit, limit).await {
            Forwarded::Answer(answer) => answer,
            Forwarded::Failed(reason) => {
                req.span.ended("failed");
                return self.answer_call(&id, list_error(&id, &reason, "upstream_failed"));
            }
            Forwarded::TimedOut(lingering) => {
                req.span.outcome("timeout");
                let text = "the MCP server did not answer tools/list in time; retry";
                self.answer_call(&id, list_error(&id, text, "upstream_timeout"));
                return lingering.settle().await;
            }
            Forwarded::Cancelled(lingering) => return lingering.settle().await,
            Forwarded::Gone => return,
        };
        if answer.is_error {
            req.span.ended("error");
            let ended = output::finish(
                &answer,
                &id,
                "tools/list",
                &req.policy,
                &self.app.metrics,
                |_| {},
            );
            return match ended {
                Ok((bytes, _)) => self.answer_call(&id, bytes),
                Err(r) => self.answer_call(&id, r.to_response(Some(&id))),
            };
        }
        let mut value = answer.to_value();
        let definitions = match self.channel.collect_pages(&mut value).await {
            Ok(defs) => defs,
            Err(text) => {
                req.span.ended("failed");
                return self.answer_call(&id, list_error(&id, &text, "upstream_failed"));
            }
        };
        let policy = req.policy.clone();
        let observed = self
            .app
            .registry
            .observe(definitions, &policy, &self.app.metrics);
        let (role, asks) = (req.role, req.asks());
        let search = policy.doc.tool_search;
        let mut visible: Vec<Value> = observed
            .iter()
            .filter_map(|tool| match policy.compiled.decide_list(tool, role, asks) {
                Decision::Allow(grant) if !search::is_meta(search, grant.exposed_name) => {
                    Some(expose(tool, &grant, policy.doc.clean_schemas))
                }
                _ => None,
            })
            .collect();
        // Tool search: the meta-tools beside the tools, or instead of them.
        match search {
            ToolSearch::Off => {}
            ToolSearch::Alongside => visible.extend(search::definitions()),
            ToolSearch::Only => visible = search::definitions().into(),
        }
        let visible_count = visible.len();
        if let Some(result) = value.get_mut("result").and_then(Value::as_object_mut) {
            result.insert("tools".into(), Value::Array(visible));
            result.remove("nextCursor");
        }
        if req.span.is_recording() {
            req.span.set(vec![KeyValue::new(
                "mcpwarden.tools.visible",
                visible_count as i64,
            )]);
            req.span.ended("ok");
        }
        value["id"] = serde_json::from_str(id.as_json()).expect("ids are JSON");
        self.app
            .metrics
            .observe_request("tools/list", "ok", req.started.elapsed());
        self.answer_call(
            &id,
            Bytes::from(serde_json::to_vec(&value).expect("values serialize")),
        );
    }

    /// Read the whole upstream tool list into the registry (the facade's own
    /// request; nothing reaches the client).
    pub(crate) async fn refresh_tools(&self) {
        self.channel.refresh_tools().await
    }
}

/// A failed tools/list, with a stable reason like every other facade error.
fn list_error(id: &jsonrpc::RequestId, text: &str, reason: &str) -> Bytes {
    jsonrpc::error_response(
        Some(id),
        jsonrpc::codes::INTERNAL_ERROR,
        text,
        Some(json!({ "reason": reason })),
    )
}

/// A tool definition as this caller sees it.
pub(crate) fn expose(
    tool: &ObservedTool,
    grant: &mcp_warden_policy::Grant<'_>,
    clean: bool,
) -> Value {
    let mut def = tool.definition.clone();
    let Some(obj) = def.as_object_mut() else {
        return def;
    };
    obj.insert("name".into(), Value::String(grant.exposed_name.to_string()));
    let description = grant.exposed_description(tool.description());
    if !description.is_empty() {
        obj.insert(
            "description".into(),
            Value::String(description.into_owned()),
        );
    }
    if clean {
        for key in ["inputSchema", "outputSchema"] {
            if let Some(schema) = obj.get(key) {
                let cleaned = clean_schema(schema);
                obj.insert(key.into(), cleaned);
            }
        }
    }
    def
}
