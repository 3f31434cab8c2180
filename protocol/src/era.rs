//! The two revisions of MCP the facade speaks, and what tells them apart.
//!
//! - **Legacy** (2025-11-25 and earlier): an `initialize` handshake opens a
//!   session (`Mcp-Session-Id` on HTTP); the server may send requests.
//! - **Modern** (2026-07-28): stateless; every request carries its protocol
//!   version, client capabilities and client info in `params._meta`; the
//!   server asks for input through results (`resultType: "input_required"`);
//!   HTTP requests mirror method and name into headers.
//!
//! The facade is dual-era on both sides: a client is modern when its request
//! carries a modern version in `_meta` (it needs no handshake); the server's
//! era is found once, at start, with `server/discover` (see
//! [`crate::probe`]), or set with `--upstream-era`.

use serde_json::{json, Map, Value};

/// The modern revisions the facade serves (newest last).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// The newest modern revision: what the facade speaks to a modern server.
pub const LATEST_MODERN: &str = "2026-07-28";
/// The legacy revisions the facade serves.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The newest legacy revision: what the facade speaks to a legacy server
/// on behalf of a modern client.
pub const LATEST_LEGACY: &str = "2025-11-25";

/// `_meta` keys of the modern revision.
pub mod meta {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// Error codes the modern revision defines.
pub mod codes {
    /// An HTTP header does not match the body, or a required one is missing.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a capability the client did not declare.
    pub const MISSING_CAPABILITY: i64 = -32021;
    /// The requested protocol version is not served.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}

/// Methods whose result is an `InputRequiredResult` when the server needs input.
pub const INPUT_REQUIRED_METHODS: &[&str] = &["tools/call", "resources/read", "prompts/get"];

/// Results that carry caching hints (`ttlMs`, `cacheScope`).
pub const CACHEABLE_METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The protocol version a request states in its `_meta`, if any.
pub fn request_version(request: &Value) -> Option<&str> {
    request
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(meta::PROTOCOL_VERSION))
        .and_then(Value::as_str)
}

pub fn is_modern(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}

/// Every revision the facade serves, for `supported` lists.
pub fn all_versions() -> Vec<&'static str> {
    LEGACY_VERSIONS
        .iter()
        .chain(MODERN_VERSIONS)
        .copied()
        .collect()
}

/// `data` of an UnsupportedProtocolVersion error.
pub fn unsupported_version_data(requested: &str) -> Value {
    json!({ "supported": all_versions(), "requested": requested })
}

/// Decode an HTTP header value that may use the `=?base64?…?=` sentinel.
/// `None`: the sentinel is there but the value does not decode to UTF-8.
pub fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_string()),
    }
}

/// A value as a header carries it: plain when it is safe printable ASCII
/// without leading or trailing space and not itself sentinel-shaped, else
/// in the base64 sentinel.
pub fn encode_header_value(value: &str) -> String {
    use base64::Engine;
    let printable = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel_shaped = value.starts_with("=?base64?") && value.ends_with("?=");
    let safe = printable && !padded && !sentinel_shaped;
    if safe && !value.is_empty() {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// The tasks extension's identifier (2026-07-28: `tasks/get`,
/// `tasks/update`, `tasks/cancel`, task-creating `tools/call`).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Whether a modern request declares the tasks extension in its `_meta`'s
/// client capabilities (negotiation is per request in 2026-07-28).
pub fn declares_tasks(request: &Value) -> bool {
    request
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some_and(|t| !t.is_null())
}

/// The body value `Mcp-Name` mirrors: `params.name` (tools/call,
/// prompts/get), `params.uri` (resources/read) or `params.taskId` (the
/// tasks extension's `tasks/get`, `tasks/update`, `tasks/cancel`).
pub fn mirrored_name<'v>(method: &str, request: &'v Value) -> Option<&'v str> {
    request
        .get("params")
        .and_then(|p| p.get(mirrored_key(method)?))
        .and_then(Value::as_str)
}

/// [`mirrored_name`] read from a request's bytes without making a value of
/// the whole request (its arguments may be large): the members are read as
/// raw text, and a repeated key's last copy counts, as in a value.
pub fn mirrored_name_of(method: &str, request: &[u8]) -> Option<String> {
    type Members<'a> = std::collections::HashMap<String, &'a serde_json::value::RawValue>;
    let key = mirrored_key(method)?;
    let top: Members<'_> = serde_json::from_slice(request).ok()?;
    let params: Members<'_> = serde_json::from_str(top.get("params")?.get()).ok()?;
    serde_json::from_str(params.get(key)?.get()).ok()
}

fn mirrored_key(method: &str) -> Option<&'static str> {
    Some(match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    })
}

/// The `_meta` a request to a modern server carries on behalf of a client
/// that did not send it (a legacy client, or the facade itself).
pub fn modern_meta(capabilities: &Value, client_info: &Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(meta::PROTOCOL_VERSION.into(), json!(LATEST_MODERN));
    m.insert(meta::CLIENT_CAPABILITIES.into(), capabilities.clone());
    m.insert(meta::CLIENT_INFO.into(), client_info.clone());
    m
}

/// A result as a modern client gets it: `resultType` always set (a legacy
/// server's results have none: they are complete), and the caching hints
/// on cacheable results. A list the facade filtered for this caller is
/// never `public`. `None`: the message passes as it is (an error, or a
/// result that says all of this already).
pub fn decorate_result(bytes: &[u8], method: &str) -> Option<bytes::Bytes> {
    use crate::jsonrpc::Members;
    use serde_json::value::RawValue;
    let mut top = Members::parse(bytes).ok()?;
    let result = top.get("result")?;
    let mut members = Members::parse(result.get().as_bytes()).ok()?;
    let raw = |v: &str| RawValue::from_string(v.to_string()).expect("literal JSON");
    // A task handle reaches a client only as the facade's own sealed id
    // (bound to the caller; its `tasks/get` passes the facade's gates). One
    // the server made up for a request the facade did not ask a task for,
    // or did not seal, is never passed on.
    if members.get("resultType").map(|t| t.get()) == Some("\"task\"")
        && !members.get("taskId").is_some_and(|t| {
            serde_json::from_str::<String>(t.get())
                .is_ok_and(|t| crate::request_state::StateSeal::is_ours(&t))
        })
    {
        let id = top.get("id").map_or("null", |i| i.get()).to_string();
        let error = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{},"message":"the MCP server answered with a task handle the facade did not ask for","data":{{"reason":"upstream_failed"}}}}}}"#,
            crate::jsonrpc::codes::INTERNAL_ERROR
        );
        return Some(bytes::Bytes::from(error));
    }
    let mut changed = false;
    let complete = match members.get("resultType").map(|t| t.get()) {
        None => {
            members.set("resultType", raw("\"complete\""));
            changed = true;
            true
        }
        Some(t) => t == "\"complete\"",
    };
    if complete && CACHEABLE_METHODS.contains(&method) {
        if members.get("ttlMs").is_none() {
            members.set("ttlMs", raw("0"));
        }
        let filtered_list = method.ends_with("/list");
        if filtered_list || members.get("cacheScope").is_none() {
            members.set("cacheScope", raw("\"private\""));
        }
        changed = true;
    }
    // Written again only when something was added: a modern server's
    // complete answer to a call already says all of it.
    if !changed {
        return None;
    }
    let result = members.to_raw();
    top.set("result", result);
    Some(bytes::Bytes::from(top.to_vec()))
}

/// The `x-mcp-header` annotations of a tool's `inputSchema`: header name
/// part → the chain of `properties` keys to the annotated parameter.
/// `Err` when an annotation breaks the spec's constraints (the tool is then
/// invalid for HTTP clients and must not be listed).
pub fn header_params(input_schema: &Value) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut found = Vec::new();
    collect_header_params(input_schema, &mut Vec::new(), &mut found, true)?;
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in &found {
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header {name:?} is given twice"));
        }
    }
    Ok(found)
}

fn collect_header_params(
    schema: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<(String, Vec<String>)>,
    reachable: bool,
) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Ok(());
    };
    if let Some(name) = obj.get("x-mcp-header") {
        let name = name.as_str().unwrap_or("");
        if !reachable || path.is_empty() {
            return Err(format!(
                "x-mcp-header {name:?} is not on a property reachable through `properties` alone"
            ));
        }
        let token = !name.is_empty() && name.bytes().all(is_tchar);
        if !token {
            return Err(format!(
                "x-mcp-header {name:?} is not an HTTP field-name token"
            ));
        }
        let primitive = match obj.get("type") {
            Some(Value::String(t)) => matches!(t.as_str(), "string" | "integer" | "boolean"),
            _ => false,
        };
        if !primitive {
            return Err(format!(
                "x-mcp-header {name:?} is on a parameter that is not a string, integer or boolean"
            ));
        }
        found.push((name.to_string(), path.clone()));
    }
    for (key, sub) in obj {
        match key.as_str() {
            "properties" => {
                if let Some(props) = sub.as_object() {
                    for (prop, sub) in props {
                        path.push(prop.clone());
                        collect_header_params(sub, path, found, reachable)?;
                        path.pop();
                    }
                }
            }
            // Annotations anywhere else (items, composition, conditionals,
            // definitions) make the definition invalid: walk them unreachable.
            "x-mcp-header" | "type" | "const" | "enum" | "default" | "examples" | "description"
            | "title" => {}
            _ => match sub {
                Value::Object(_) => collect_header_params(sub, path, found, false)?,
                Value::Array(items) => {
                    for item in items {
                        collect_header_params(item, path, found, false)?;
                    }
                }
                _ => {}
            },
        }
    }
    Ok(())
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The `Mcp-Param-*` headers a `tools/call` with `arguments` carries for a
/// tool whose annotations are `params` (absent and null values: no header).
pub fn param_header_values(
    params: &[(String, Vec<String>)],
    arguments: &Value,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, path) in params {
        let mut value = Some(arguments);
        for key in path {
            value = value.and_then(|v| v.get(key));
        }
        let text = match value {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        out.push((
            format!("mcp-param-{}", name.to_ascii_lowercase()),
            encode_header_value(&text),
        ));
    }
    out
}

/// Whether a header's (decoded) value stands for the body's value: strings
/// exactly, booleans as `true`/`false`, integers numerically.
pub fn header_matches(header: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => header == s,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        Value::Number(n) => match (header.parse::<f64>(), n.as_f64()) {
            (Ok(h), Some(b)) => h == b,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_round_trip_through_the_sentinel() {
        for v in [
            "get_weather",
            "Hello, 世界",
            " padded ",
            "line1\nline2",
            "=?base64?x?=",
            "",
        ] {
            let encoded = encode_header_value(v);
            assert!(
                encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)),
                "{encoded}"
            );
            assert_eq!(decode_header_value(&encoded).as_deref(), Some(v));
        }
        assert_eq!(encode_header_value("us-west1"), "us-west1");
        assert_eq!(decode_header_value("=?base64?!!?="), None);
    }

    #[test]
    fn modern_results_say_their_type_and_filtered_lists_are_private() {
        let d = |text: &str, method| -> Value {
            let out = decorate_result(text.as_bytes(), method);
            serde_json::from_slice(out.as_deref().unwrap_or(text.as_bytes())).unwrap()
        };
        let list = d(
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"cacheScope":"public","ttlMs":5000}}"#,
            "tools/list",
        );
        assert_eq!(list["result"]["resultType"], "complete");
        assert_eq!(list["result"]["cacheScope"], "private");
        assert_eq!(list["result"]["ttlMs"], 5000);
        let read = d(
            r#"{"jsonrpc":"2.0","id":1,"result":{"contents":[]}}"#,
            "resources/read",
        );
        assert_eq!(
            (
                read["result"]["ttlMs"].clone(),
                read["result"]["cacheScope"].clone()
            ),
            (json!(0), json!("private"))
        );
        let call = d(
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            "tools/call",
        );
        assert_eq!(call["result"]["resultType"], "complete");
        assert!(call["result"].get("ttlMs").is_none());
        let asks = d(
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}"#,
            "tools/call",
        );
        assert!(asks["result"].get("ttlMs").is_none());
        assert!(decorate_result(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
            "tools/list"
        )
        .is_none());
        // A result that says its type already, with no hints to add, passes
        // as the server wrote it (not written again).
        for (text, method) in [
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[], "resultType":"complete"}}"#,
                "tools/call",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}"#,
                "tools/list",
            ),
        ] {
            assert!(decorate_result(text.as_bytes(), method).is_none(), "{text}");
        }
        assert!(decorate_result(
            br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}}"#,
            "tools/list"
        )
        .is_some());
    }

    #[test]
    fn header_annotations_follow_the_spec_constraints() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}},
            "query": {"type": "string"}}});
        let params = header_params(&ok).unwrap();
        assert_eq!(
            params,
            vec![
                (
                    "Dry-Run".to_string(),
                    vec!["opts".to_string(), "dry".to_string()]
                ),
                ("Region".to_string(), vec!["region".to_string()])
            ]
        );
        let args = json!({"region": "Hello, 世界", "opts": {"dry": true}});
        assert_eq!(
            param_header_values(&params, &args),
            vec![
                ("mcp-param-dry-run".to_string(), "true".to_string()),
                (
                    "mcp-param-region".to_string(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".to_string()
                )
            ]
        );
        assert!(param_header_values(&params, &json!({"region": null})).is_empty());
        for bad in [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
        ] {
            assert!(header_params(&bad).is_err(), "{bad}");
        }
        assert!(header_matches("42", &json!(42)) && header_matches("42.0", &json!(42)));
        assert!(!header_matches("43", &json!(42)) && !header_matches("True", &json!(true)));
    }

    #[test]
    fn versions_and_names_are_read_from_the_body() {
        let r = json!({"params": {"name": "x", "uri": "file:///a",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        assert_eq!(request_version(&r), Some("2026-07-28"));
        assert!(is_modern("2026-07-28") && !is_modern("2025-11-25"));
        assert_eq!(mirrored_name("tools/call", &r), Some("x"));
        assert_eq!(mirrored_name("resources/read", &r), Some("file:///a"));
        assert_eq!(mirrored_name("tools/list", &r), None);
    }

    #[test]
    fn names_read_from_bytes_are_those_a_value_gives() {
        let bodies = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\"b","arguments":{"name":"no"}}}"#,
            r#"{"params":{"name":"first","name":"last"},"params":{"name":"second params"}}"#,
            r#"{"params":{"uri":"file:///a","taskId":"t-1"}}"#,
            r#"{"params":{"name":7}}"#,
            r#"{"params":[]}"#,
            r#"{"id":1}"#,
            r#"not json"#,
        ];
        for body in bodies {
            let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            for method in [
                "tools/call",
                "prompts/get",
                "resources/read",
                "tasks/get",
                "tools/list",
            ] {
                assert_eq!(
                    mirrored_name_of(method, body.as_bytes()).as_deref(),
                    mirrored_name(method, &value),
                    "{method} {body}"
                );
            }
        }
    }
}
