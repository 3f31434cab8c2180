//! The gateway's lists: one list asked of every backend at once (as the
//! caller), every page followed, names renamed and conflicts withheld
//! ([`super::names`]), answered as one complete page.
//!
//! A backend's own list change is read here too ([`reread`]): before its
//! callers hear of it, that backend's changed list is read again, so a name
//! it newly serves is checked against the other backends' (withheld and
//! reported when it collides) before anyone lists it. A backend sends its
//! change once per caller's subscription held there, so the change heard
//! a hundred times at once is read once ([`Rereads`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::names::Catalog;
use super::{ask, State};
use crate::jsonrpc::{self, Message, RequestId};
use crate::upstream::{Credential, UpstreamError};

/// Pages of one backend's list followed at most.
const MAX_PAGES: usize = 100;

/// Every page of one list at backend `b`.
async fn all_pages(
    state: &State,
    b: usize,
    id: &RequestId,
    method: &str,
    params: &Value,
    key: &str,
    credential: Option<&Credential>,
) -> Result<(Vec<Value>, Value), String> {
    let mut items = Vec::new();
    let mut params = params.clone();
    if let Some(p) = params.as_object_mut() {
        p.remove("cursor");
    }
    for _ in 0..MAX_PAGES {
        let msg = Message::parse(jsonrpc::request(id, method, &params))
            .map_err(|_| "bad request".to_string())?;
        let mut answer = ask(state, b, msg, credential).await?.to_value();
        let absent = answer.pointer("/error/code").and_then(Value::as_i64)
            == Some(jsonrpc::codes::METHOD_NOT_FOUND);
        if absent && items.is_empty() {
            // A backend without prompts or resources has none to add.
            return Ok((items, json!({})));
        }
        if let Some(error) = answer.get("error") {
            return Err(format!("{method} was refused: {error}"));
        }
        if let Some(Value::Array(page)) = answer
            .pointer_mut(&format!("/result/{key}"))
            .map(Value::take)
        {
            items.extend(page);
        }
        match answer.pointer("/result/nextCursor") {
            Some(c) if !c.is_null() => params["cursor"] = c.clone(),
            _ => {
                let result = answer.get("result").cloned().unwrap_or_default();
                return Ok((items, result));
            }
        }
    }
    Err(format!("{method} ran past {MAX_PAGES} pages"))
}

/// Every backend's list, renamed, conflicts withheld.
pub(super) async fn list(
    state: &Arc<State>,
    id: &RequestId,
    params: &Value,
    catalog: Catalog,
    credential: Option<&Credential>,
) -> Result<Bytes, UpstreamError> {
    let (method, key) = match catalog {
        Catalog::Tools => ("tools/list", "tools"),
        Catalog::Prompts => ("prompts/list", "prompts"),
        Catalog::Templates => ("resources/templates/list", "resourceTemplates"),
    };
    let lists = fan_out(state, id, method, params, key, credential).await?;
    let gateway = state.gateway();
    {
        let mut names = gateway.names.lock().unwrap();
        for (b, items, _) in &lists {
            let listed: Vec<&str> = items
                .iter()
                .filter_map(|i| i.get("name").and_then(Value::as_str))
                .collect();
            names.observe(catalog, *b, &listed);
        }
        if catalog == Catalog::Tools {
            for (b, items, _) in &lists {
                names.scan_shadowing(*b, items);
            }
        }
    }
    gateway.report();
    let names = gateway.names.lock().unwrap();
    let mut merged = Vec::new();
    for (b, items, _) in lists {
        for mut item in items {
            let Some(name) = item.get("name").and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            let exposed = names.exposed(b, &name);
            if names.route(catalog, &exposed) != Ok((b, name)) {
                continue;
            }
            item["name"] = Value::String(exposed);
            if let Some(Value::String(t)) = item.get("uriTemplate") {
                item["uriTemplate"] = Value::String(names.exposed_uri(b, t));
            }
            merged.push(item);
        }
    }
    Ok(list_answer(id, key, merged))
}

/// Every backend's resources, their URIs naming the backend.
pub(super) async fn list_resources(
    state: &Arc<State>,
    id: &RequestId,
    params: &Value,
    credential: Option<&Credential>,
) -> Result<Bytes, UpstreamError> {
    let lists = fan_out(state, id, "resources/list", params, "resources", credential).await?;
    let names = state.gateway().names.lock().unwrap();
    let mut merged = Vec::new();
    for (b, items, _) in lists {
        for mut item in items {
            if let Some(Value::String(uri)) = item.get("uri") {
                item["uri"] = Value::String(names.exposed_uri(b, uri));
                merged.push(item);
            }
        }
    }
    Ok(list_answer(id, "resources", merged))
}

/// Which list a backend's change notification is about (`None`: not a
/// list change the gateway reads again here; a tool change is read again
/// by the facade above, which checks pins and drift first).
pub(super) fn changed_catalog(method: &str) -> Option<Catalog> {
    match method {
        "notifications/prompts/list_changed" => Some(Catalog::Prompts),
        // Templates are the part of the resources the gateway names.
        "notifications/resources/list_changed" => Some(Catalog::Templates),
        _ => None,
    }
}

/// When one backend's list was last read again; held while it is read.
type Turn = Arc<tokio::sync::Mutex<Option<Instant>>>;

/// Each backend's [`Turn`], by catalog: one read at a time of each.
#[derive(Default)]
pub(super) struct Rereads(Mutex<HashMap<(usize, Catalog), Turn>>);

/// Read backend `b`'s `catalog` again as the gateway itself (the listing a
/// backend gives the gateway is of everything it could route to any
/// caller) and remember its names; conflicts it brings are reported. A
/// change `heard` before a read that has since finished began is already
/// read: it waits for that read, and reads nothing itself.
pub(super) async fn reread(state: &Arc<State>, b: usize, catalog: Catalog, heard: Instant) {
    let turn = state
        .rereads
        .0
        .lock()
        .unwrap()
        .entry((b, catalog))
        .or_default()
        .clone();
    let mut last = turn.lock().await;
    if last.is_some_and(|began| began >= heard) {
        return;
    }
    *last = Some(Instant::now());
    let (method, key) = match catalog {
        Catalog::Tools => ("tools/list", "tools"),
        Catalog::Prompts => ("prompts/list", "prompts"),
        Catalog::Templates => ("resources/templates/list", "resourceTemplates"),
    };
    let gateway = state.gateway();
    let itself = gateway
        .signer
        .as_ref()
        .map(|s| Credential::on_behalf_of(s.itself()));
    // An id no caller's request has (the facade's are numbers), one per
    // read: reads of two lists may be in flight at once.
    static READS: AtomicU64 = AtomicU64::new(0);
    let n = READS.fetch_add(1, Ordering::Relaxed);
    let Some(id) = RequestId::from_raw(&format!("\"mcp-warden-gateway-reread-{b}-{n}\"")) else {
        return;
    };
    let info = json!({ "name": "mcp-warden-gateway", "version": env!("CARGO_PKG_VERSION") });
    let params = json!({ "_meta": Value::Object(crate::era::modern_meta(&json!({}), &info)) });
    match all_pages(state, b, &id, method, &params, key, itself.as_ref()).await {
        Ok((items, _)) => {
            let listed: Vec<&str> = items
                .iter()
                .filter_map(|i| i.get("name").and_then(Value::as_str))
                .collect();
            gateway.names.lock().unwrap().observe(catalog, b, &listed);
            gateway.report();
        }
        Err(e) => {
            let name = &gateway.backends[b].name;
            tracing::debug!(backend = %name, error = %e, "gateway: a backend's changed {method} could not be read again");
        }
    }
}

fn list_answer(id: &RequestId, key: &str, items: Vec<Value>) -> Bytes {
    let mut result = Map::new();
    result.insert(key.into(), Value::Array(items));
    jsonrpc::result_response(id, &Value::Object(result).to_string())
}

type Listed = Vec<(usize, Vec<Value>, Value)>;

/// One list at every backend at once. A backend that cannot answer adds
/// nothing (its names are not offered); all failing is an error.
async fn fan_out(
    state: &Arc<State>,
    id: &RequestId,
    method: &str,
    params: &Value,
    key: &str,
    credential: Option<&Credential>,
) -> Result<Listed, UpstreamError> {
    let asks = (0..state.links.len()).map(|b| async move {
        (
            b,
            all_pages(state, b, id, method, params, key, credential).await,
        )
    });
    let mut lists = Vec::new();
    let mut failures = Vec::new();
    for (b, answer) in futures::future::join_all(asks).await {
        state.gateway().answering.lock().unwrap()[b] = Some(answer.is_ok());
        match answer {
            Ok((items, result)) => lists.push((b, items, result)),
            Err(e) => {
                let name = &state.gateway().backends[b].name;
                tracing::warn!(backend = %name, error = %e, "gateway: a backend's {method} failed; its names are left out");
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    if lists.is_empty() && !failures.is_empty() {
        return Err(UpstreamError::Refused(failures.join("; ")));
    }
    Ok(lists)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::gateway::test_backend;
    use crate::upstream::LinkLimits;
    use std::sync::atomic::AtomicUsize;

    /// A backend answering `prompts/list` with no prompts, counting the
    /// lists it is asked for; anything else is refused.
    async fn backend_counting_lists() -> (u16, Arc<AtomicUsize>) {
        use tokio::io::AsyncWriteExt;
        let lists = Arc::new(AtomicUsize::new(0));
        let counted = lists.clone();
        let port = test_backend::serve(move |asked, mut conn| {
            let counted = counted.clone();
            async move {
                let reply = if asked["method"] == "prompts/list" {
                    counted.fetch_add(1, Ordering::SeqCst);
                    // Slow enough that the changes heard meanwhile queue.
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
                        "result": {"prompts": [], "resultType": "complete"}})
                    .to_string();
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}", answer.len())
                } else {
                    test_backend::REFUSED.to_string()
                };
                let _ = conn.write_all(reply.as_bytes()).await;
            }
        })
        .await;
        (port, lists)
    }

    #[tokio::test]
    async fn a_change_heard_once_per_subscriber_is_read_once() {
        let (port, lists) = backend_counting_lists().await;
        let gateway = test_backend::gateway_at(port, "fx", "fx__");
        let (state, _guards, _events) =
            crate::upstream::gateway::connect(&gateway, &LinkLimits::default()).unwrap();
        // One change, sent on each of twenty callers' subscriptions.
        let heard = Instant::now();
        let reads = (0..20).map(|_| reread(&state, 0, Catalog::Prompts, heard));
        futures::future::join_all(reads).await;
        assert_eq!(lists.load(Ordering::SeqCst), 1);
        // A change heard after that read began is read again.
        reread(&state, 0, Catalog::Prompts, Instant::now()).await;
        assert_eq!(lists.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_prompt_or_resource_change_is_read_again_here_a_tool_change_above() {
        assert_eq!(
            changed_catalog("notifications/prompts/list_changed"),
            Some(Catalog::Prompts)
        );
        assert_eq!(
            changed_catalog("notifications/resources/list_changed"),
            Some(Catalog::Templates)
        );
        assert_eq!(changed_catalog("notifications/tools/list_changed"), None);
        assert_eq!(changed_catalog("notifications/resources/updated"), None);
        assert_eq!(changed_catalog("notifications/message"), None);
    }

    #[test]
    fn the_gateway_offers_every_list_change() {
        let id = RequestId::number(1);
        let answer: Value = serde_json::from_slice(&super::super::discover(&id, false)).unwrap();
        for list in ["tools", "prompts", "resources"] {
            let offered = answer.pointer(&format!("/result/capabilities/{list}/listChanged"));
            assert_eq!(offered, Some(&json!(true)), "{list}: {answer}");
        }
    }
}
