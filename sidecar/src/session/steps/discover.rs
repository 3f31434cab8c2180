//! `server/discover`, answered by the facade: the versions it serves, and
//! the server's capabilities, identity and instructions as the policy
//! leaves them (what the facade does not pass through is not advertised:
//! the 2025-11-25 tasks capability, extensions other than tasks,
//! experimental features). The tasks extension is advertised exactly when
//! the server offers it: the facade serves it then (`steps::task`).
//!
//! The same cut applies to the `initialize` result the facade gives a
//! legacy client in front of a modern server. In front of a gateway, the
//! tasks extension is advertised when one of its backends serves it (they
//! say so to callers only: asked as the caller until each has said).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::era;
use crate::gates::Request;
use crate::jsonrpc;
use crate::session::Session;

pub async fn discover(session: &Arc<Session>, req: Request) {
    learn_gateway_tasks(session, &req).await;
    let result = match session.app.upstream.get() {
        Some(info) => {
            let mut capabilities = served_capabilities(&info.capabilities);
            if let crate::upstream::UpstreamTarget::Gateway(_) = &session.app.target {
                set_tasks(&mut capabilities, session.app.upstream_serves_tasks());
            }
            let mut result = json!({
                "resultType": "complete",
                "supportedVersions": era::all_versions(),
                "capabilities": capabilities,
                "_meta": { era::meta::SERVER_INFO: info.server_info },
                // What this caller may use depends on its role: never `public`.
                "ttlMs": 0,
                "cacheScope": "private",
            });
            if let Some(instructions) = &info.instructions {
                result["instructions"] = json!(instructions);
            }
            result
        }
        None => {
            let bytes = jsonrpc::error_response(
                Some(&req.id),
                jsonrpc::codes::INTERNAL_ERROR,
                "the MCP server has not answered yet; retry shortly",
                Some(json!({ "reason": "upstream_failed" })),
            );
            return session.answer_call(&req.id, bytes);
        }
    };
    session.answer_call(
        &req.id,
        jsonrpc::result_response(&req.id, &result.to_string()),
    );
    session.observe("server/discover", "ok", req.started);
}

/// A gateway's backends say whether they serve tasks to callers only (they
/// trust the gateway's assertions, none at the probe): until every backend
/// has said, each caller's `server/discover` asks them, as that caller.
async fn learn_gateway_tasks(session: &Arc<Session>, req: &Request) {
    let app = &session.app;
    let crate::upstream::UpstreamTarget::Gateway(gateway) = &app.target else {
        return;
    };
    if gateway.knows_tasks() {
        return;
    }
    let Some(credential) = app.task_poll_credential(&req.caller).await else {
        return;
    };
    let caps = json!({ "extensions": { era::TASKS_EXTENSION: {} } });
    let params = json!({});
    let asked = session.channel.internal_request_for(
        None,
        "server/discover",
        &params,
        &caps,
        Some(credential),
    );
    if let Err(why) = asked.await {
        tracing::debug!(%why, "gateway: the backends' server/discover");
    }
}

/// `capabilities` offering the tasks extension exactly when `offered`.
fn set_tasks(capabilities: &mut Value, offered: bool) {
    let Some(caps) = capabilities.as_object_mut() else {
        return;
    };
    if offered {
        let ext = caps.entry("extensions").or_insert_with(|| json!({}));
        if let Some(ext) = ext.as_object_mut() {
            ext.insert(era::TASKS_EXTENSION.into(), json!({}));
        }
    } else if let Some(ext) = caps.get_mut("extensions").and_then(Value::as_object_mut) {
        ext.remove(era::TASKS_EXTENSION);
        if ext.is_empty() {
            caps.remove("extensions");
        }
    }
}

/// The server's capabilities, cut to what the facade passes through.
pub fn served_capabilities(server: &Value) -> Value {
    let Some(caps) = server.as_object() else {
        return json!({});
    };
    let mut out = Map::new();
    for (key, value) in caps {
        match key.as_str() {
            "tools" | "prompts" | "completions" | "logging" => {
                out.insert(key.clone(), value.clone());
            }
            "resources" => {
                out.insert(key.clone(), value.clone());
            }
            "extensions" => {
                if let Some(tasks) = value.get(crate::era::TASKS_EXTENSION) {
                    out.insert(
                        key.clone(),
                        json!({ crate::era::TASKS_EXTENSION: tasks.clone() }),
                    );
                }
            }
            // Task-augmented requests of 2025-11-25, extensions and
            // experimental features the facade does not police are not
            // offered.
            _ => {}
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_the_facade_does_not_pass_are_not_advertised() {
        let server = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true},
            "tasks": {"list": {}}, "extensions": {"io.modelcontextprotocol/skills": {}},
            "experimental": {"x": {}}, "prompts": {}});
        let served = served_capabilities(&server);
        assert_eq!(
            served,
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}, "prompts": {}})
        );
    }

    #[test]
    fn a_gateways_tasks_offer_follows_its_backends() {
        let mut caps = json!({"tools": {}});
        set_tasks(&mut caps, true);
        assert_eq!(
            caps,
            json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
        set_tasks(&mut caps, false);
        assert_eq!(caps, json!({"tools": {}}));
    }

    #[test]
    fn the_tasks_extension_is_advertised_when_the_server_offers_it() {
        let server = json!({"tools": {}, "tasks": {"list": {}},
            "extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {}}});
        assert_eq!(
            served_capabilities(&server),
            json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
    }
}
