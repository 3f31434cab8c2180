//! `server/discover`, answered by the facade: the versions it serves, and
//! the server's capabilities, identity and instructions as the policy
//! leaves them (what the facade does not pass through is not advertised:
//! the 2025-11-25 tasks capability, extensions other than tasks,
//! experimental features). The tasks extension is advertised exactly when
//! the server offers it: the facade serves it then (`steps::task`).
//!
//! The same cut applies to the `initialize` result the facade gives a
//! legacy client in front of a modern server.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::era;
use crate::gates::Request;
use crate::jsonrpc;
use crate::session::Session;

pub async fn discover(session: &Arc<Session>, req: Request) {
    let result = match session.app.upstream.get() {
        Some(info) => {
            let mut result = json!({
                "resultType": "complete",
                "supportedVersions": era::all_versions(),
                "capabilities": served_capabilities(&info.capabilities),
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
    fn the_tasks_extension_is_advertised_when_the_server_offers_it() {
        let server = json!({"tools": {}, "tasks": {"list": {}},
            "extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {}}});
        assert_eq!(
            served_capabilities(&server),
            json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
    }
}
