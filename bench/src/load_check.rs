//! The load generator's answer checks (`mcp-bench-load run`): what makes a
//! `tools/call` answer count as a success, for one call and for a JSON-RPC
//! batch of them (`--batch N`, protocol 2025-03-26, the last revision with
//! batches). Kept apart so `load.rs` stays about driving the load.

use serde_json::Value;

use super::load_client::Answer;

/// The body of one POST: a single call, or a batch of `n` calls with ids
/// `first_id .. first_id + n`.
pub fn body(first_id: u64, n: usize, tool: &str, arguments: &str, meta: &str) -> String {
    let one = |id: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}{meta}}}}}"#
        )
    };
    if n <= 1 {
        return one(first_id);
    }
    let items: Vec<String> = (0..n as u64).map(|i| one(first_id + i)).collect();
    format!("[{}]", items.join(","))
}

/// Every element answered: HTTP 200, a result (not `isError`) for each id,
/// and the echoed text when one is expected.
pub fn check(a: &Answer, first_id: u64, n: usize, expect: Option<&str>) -> Result<(), String> {
    if a.status != 200 {
        return Err(format!("HTTP {}: {}", a.status, snippet(a)));
    }
    // Parsed once, not once per element: the client's CPU is on the same
    // cores as what is measured.
    let answers = responses(a);
    for id in first_id..first_id + n.max(1) as u64 {
        let r = answers
            .iter()
            .find(|v| v.get("id").and_then(Value::as_u64) == Some(id) && v.get("method").is_none())
            .ok_or_else(|| format!("no response for id {id}: {}", snippet(a)))?;
        let result = r
            .get("result")
            .ok_or_else(|| format!("error: {}", r.get("error").unwrap_or(r)))?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(format!("isError: {result}"));
        }
        if let Some(want) = expect {
            let got = result.pointer("/content/0/text").and_then(Value::as_str);
            if got != Some(want) {
                return Err(format!("unexpected text: {got:?}"));
            }
        }
    }
    Ok(())
}

/// Every JSON-RPC message in a JSON or SSE body, batches flattened.
fn responses(a: &Answer) -> Vec<Value> {
    let mut out = Vec::new();
    let mut push = |v: Value| match v {
        Value::Array(items) => out.extend(items),
        v => out.push(v),
    };
    if !a.sse {
        if let Ok(v) = serde_json::from_slice(&a.body) {
            push(v);
        }
        return out;
    }
    let text = String::from_utf8_lossy(&a.body);
    for event in text.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if let Ok(v) = serde_json::from_str(&data.join("\n")) {
            push(v);
        }
    }
    out
}

fn snippet(a: &Answer) -> String {
    String::from_utf8_lossy(&a.body[..a.body.len().min(200)]).into_owned()
}
