//! The tool-search meta-tools (the policy's `toolSearch`): `search_tools`
//! answered here, `call_tool` turned into the tools/call it names.
//!
//! Where it sits: in front of the tools/call step ([`super::run`] sends
//! every tools/call through [`tool_call`]). With `toolSearch: off` nothing
//! here happens and the names are ordinary tool names.
//!
//! - `search_tools(query, limit)`: ranks every tool the facade has seen
//!   ([`crate::gates::registry::Registry::search_set`], BM25 in
//!   [`mcp_warden_policy::search`]) and keeps, best first, those the server
//!   lists to this caller now (asked as the caller: a gateway's backends
//!   show each caller its own) and the same decision that filters
//!   `tools/list` lets this caller call (role,
//!   planning mode, effect tags, quarantine, risk, sandbox): a result is
//!   never a tool the caller could not call. Each comes as the caller's
//!   `tools/list` would show it, with its canonical id `mcp:{server}:{tool}`
//!   (in gateway mode the backend and the backend's own name).
//! - `call_tool(id, arguments)`: the id (canonical, or the name the caller
//!   sees) becomes the name of an ordinary tools/call, which then passes
//!   every gate a direct call passes, under the target's name (audit,
//!   metrics, budgets are the target's).
//!
//! While the meta-tools are on, their two names are theirs: a tool of the
//! server with either name is not listed and not callable.

use std::sync::Arc;

use bytes::Bytes;
use mcp_warden_crds::policy::ToolSearch;
use mcp_warden_policy::{Decision, Denial, ObservedTool};
use serde_json::{json, Value};

use crate::gates::input;
use crate::gates::refusal::Refusal;
use crate::gates::Request;
use crate::jsonrpc::Message;
use crate::session::Session;
use crate::upstream::UpstreamTarget;

/// The meta-tool that searches.
pub const SEARCH_TOOLS: &str = "search_tools";
/// The meta-tool that calls by id.
pub const CALL_TOOL: &str = "call_tool";
const DEFAULT_LIMIT: u64 = 5;
const MAX_LIMIT: u64 = 50;

/// The meta-tools' definitions, as `tools/list` shows them.
pub fn definitions() -> [Value; 2] {
    [
        json!({
            "name": SEARCH_TOOLS,
            "title": "Search tools",
            "description": "Find the tools you can call that best match what you want to do, best first (by relevance of their names, titles, descriptions and parameter names). Each result has an `id`, its `name`, `description` and `inputSchema`; call it with call_tool(id, arguments) or by its name.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "What you want to do, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "How many tools at most (default 5)."}
                },
                "required": ["query"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": CALL_TOOL,
            "title": "Call a tool by id",
            "description": "Call a tool that search_tools found, by its `id` (mcp:{server}:{tool}) or its name, with its `arguments`.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1, "maxLength": 512, "description": "The tool's id or name, from search_tools."},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema says."}
                },
                "required": ["id"],
                "additionalProperties": false
            }
        }),
    ]
}

/// Whether `name` is a meta-tool's under `mode`.
pub fn is_meta(mode: ToolSearch, name: &str) -> bool {
    mode != ToolSearch::Off && (name == SEARCH_TOOLS || name == CALL_TOOL)
}

/// Every tools/call comes here first.
pub async fn tool_call(session: &Arc<Session>, req: Request) {
    let mode = req.policy.doc.tool_search;
    let name = req.params().get("name").and_then(Value::as_str);
    match name {
        Some(SEARCH_TOOLS) if mode != ToolSearch::Off => search(session, req).await,
        Some(CALL_TOOL) if mode != ToolSearch::Off => {
            let mut req = req;
            match retarget(session, &mut req) {
                Ok(()) => session.clone().tools_call(req).await,
                Err(refusal) => refuse(session, &req, &refusal),
            }
        }
        _ => session.clone().tools_call(req).await,
    }
}

fn refuse(session: &Session, req: &Request, refusal: &Refusal) {
    req.span.refused(refusal);
    session
        .app
        .metrics
        .observe_request("tools/call", "denied", req.started.elapsed());
    session.answer_call(&req.id, refusal.to_response(Some(&req.id)));
}

/// The meta-tool's arguments, checked against its own schema.
fn arguments(session: &Session, req: &Request, which: usize) -> Result<Value, Refusal> {
    let empty = Value::Object(Default::default());
    let args = req.params().get("arguments").unwrap_or(&empty).clone();
    let [search, call] = definitions();
    let def = if which == 0 { search } else { call };
    let tool = ObservedTool::new(def).expect("meta-tools have names");
    input::validate(&session.app.schemas, &tool, &tool.name, &args)?;
    Ok(args)
}

async fn search(session: &Arc<Session>, req: Request) {
    let args = match arguments(session, &req, 0) {
        Ok(args) => args,
        Err(refusal) => return refuse(session, &req, &refusal),
    };
    let query = args["query"].as_str().unwrap_or("");
    let limit = args["limit"]
        .as_u64()
        .unwrap_or(DEFAULT_LIMIT)
        .min(MAX_LIMIT) as usize;
    let app = &session.app;
    let listed = match listed_for_caller(session, &req).await {
        Ok(listed) => listed,
        Err(text) => {
            req.span.ended("failed");
            app.metrics
                .observe_request("tools/call", "failed", req.started.elapsed());
            let text = format!("search_tools could not list your tools: {text}");
            let data = json!({ "reason": "upstream_failed" });
            return session.answer_call(
                &req.id,
                crate::jsonrpc::error_response(
                    Some(&req.id),
                    crate::jsonrpc::codes::INTERNAL_ERROR,
                    &text,
                    Some(data),
                ),
            );
        }
    };
    let policy = &req.policy;
    let set = app.registry.search_set();
    let mut found = Vec::with_capacity(limit);
    for (i, score) in set.index.search(query, set.names.len()) {
        if !listed.contains(&set.names[i]) {
            continue;
        }
        let Some(tool) = app.registry.get(&set.names[i]) else {
            continue;
        };
        let Decision::Allow(grant) = policy.compiled.decide_list(&tool, req.role, req.asks())
        else {
            continue;
        };
        if is_meta(policy.doc.tool_search, grant.exposed_name) {
            continue;
        }
        let mut def = super::list::expose(&tool, &grant, policy.doc.clean_schemas);
        if let Some(obj) = def.as_object_mut() {
            obj.insert(
                "id".into(),
                Value::String(canonical_id(session, policy, grant.exposed_name)),
            );
            obj.insert("score".into(), json!((score * 1000.0).round() / 1000.0));
        }
        found.push(def);
        if found.len() == limit {
            break;
        }
    }
    let result = json!({"tools": found});
    let text = serde_json::to_string(&result).expect("values serialize");
    let id: Value = serde_json::from_str(req.id.as_json()).expect("ids are JSON");
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": text}],
        "structuredContent": result,
    }});
    app.metrics
        .observe_request("tools/call", "ok", req.started.elapsed());
    req.span.ended("ok");
    session.answer_call(
        &req.id,
        Bytes::from(serde_json::to_vec(&answer).expect("values serialize")),
    );
}

/// The tools the server lists to this caller, as their names upstream:
/// the search ranks what anyone was shown (the registry), but a gateway's
/// backends, or a server given each caller's own credential, show each
/// caller its own tools, and a server may have dropped one since. So the
/// search asks as the caller, exactly as the caller's own `tools/list`
/// does, and keeps only what that shows.
async fn listed_for_caller(
    session: &Arc<Session>,
    req: &Request,
) -> Result<std::collections::HashSet<String>, String> {
    let mut params = json!({});
    if let Some(meta) = req.params().get("_meta") {
        params["_meta"] = meta.clone();
    }
    let rid: Value = serde_json::from_str(req.id.as_json()).expect("ids are JSON");
    let list = json!({"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": params});
    let msg = Message::parse(Bytes::from(list.to_string())).map_err(|(e, _)| e.to_string())?;
    let limit = session.app.limits.upstream_wait;
    let answer = match session.forward(&req.id, &msg, None, limit).await {
        crate::session::Forwarded::Answer(answer) if !answer.is_error => answer,
        crate::session::Forwarded::Answer(_) => {
            return Err("the MCP server refused tools/list".into())
        }
        crate::session::Forwarded::Failed(reason) => return Err(reason),
        _ => return Err("the MCP server did not answer tools/list in time".into()),
    };
    let mut value = answer.to_value();
    let definitions = session.channel.collect_pages(&mut value).await?;
    let observed = session
        .app
        .registry
        .observe(definitions, &req.policy, &session.app.metrics);
    Ok(observed.iter().map(|t| t.name.clone()).collect())
}

/// `mcp:{server}:{tool}`: in gateway mode the backend and its own name for
/// the tool; else this facade's server (the policy's `server.name`, or
/// `server`) and the name its callers see.
fn canonical_id(
    session: &Session,
    policy: &crate::gates::policy::LivePolicy,
    exposed: &str,
) -> String {
    if let UpstreamTarget::Gateway(g) = &session.app.target {
        if let Some(id) = g.canonical_id(exposed) {
            return id;
        }
    }
    format!("mcp:{}:{exposed}", server_name(policy))
}

fn server_name(policy: &crate::gates::policy::LivePolicy) -> &str {
    policy
        .doc
        .server
        .as_ref()
        .map_or("server", |s| s.name.as_str())
}

/// The name a `call_tool` id stands for (`None`: no tool the caller knows).
fn resolve(
    session: &Session,
    policy: &crate::gates::policy::LivePolicy,
    id: &str,
) -> Option<String> {
    let Some(rest) = id.strip_prefix("mcp:") else {
        return Some(id.to_string());
    };
    let (server, tool) = rest.split_once(':')?;
    if let UpstreamTarget::Gateway(g) = &session.app.target {
        return g.exposed_name(server, tool);
    }
    (server == server_name(policy)).then(|| tool.to_string())
}

/// A `call_tool` request as the tools/call of the tool it names.
fn retarget(session: &Session, req: &mut Request) -> Result<(), Refusal> {
    let args = arguments(session, req, 1)?;
    let id = args["id"].as_str().unwrap_or("");
    let not_available = || {
        Refusal::Policy(Denial::NotAvailable {
            tool: id.to_string(),
        })
    };
    let target = match resolve(session, &req.policy, id) {
        Some(t) if !is_meta(req.policy.doc.tool_search, &t) => t,
        _ => return Err(not_available()),
    };
    let mut params = json!({
        "name": target,
        "arguments": args.get("arguments").cloned().unwrap_or_else(|| json!({})),
    });
    if let Some(meta) = req.params().get("_meta") {
        params["_meta"] = meta.clone();
    }
    let rid: Value = serde_json::from_str(req.id.as_json()).expect("ids are JSON");
    let value = json!({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params});
    let bytes = Bytes::from(serde_json::to_vec(&value).expect("values serialize"));
    match Message::parse(bytes) {
        Ok(msg) => {
            req.msg = msg;
            req.value = value;
            Ok(())
        }
        Err(_) => Err(not_available()),
    }
}
