//! The upstream tools as the facade has seen them, for the whole life of the
//! process: definition hash, the hash first seen (drift detection), poisoning
//! findings (each with its reason, `kind/detail`) and quarantine state. Fed
//! by every upstream tools/list answer;
//! read by every tools/call; served as JSON on the admin port (`/tools`) so
//! the operator can publish it in `MCPServer.status.tools`. `listed` says
//! whether a whole list has been read yet (the operator waits for it rather
//! than publish an empty inventory). It also keeps the tool-search index
//! over every definition ([`Registry::search_set`]), rebuilt only when a
//! name or a definition changed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use mcp_warden_policy::poison;
use mcp_warden_policy::{Decision, Finding};
use serde_json::{json, Value};

use super::policy::LivePolicy;
use crate::metrics::Metrics;

pub use mcp_warden_policy::ObservedTool;

struct Entry {
    tool: Arc<ObservedTool>,
    first_seen: String,
    findings: Vec<Finding>,
}

/// A definition MCP says clients must reject: `x-mcp-header` annotations
/// that break the spec's constraints (the facade, a client of the server,
/// neither lists nor calls it; other tools stay usable).
fn invalid_definition(tool: &ObservedTool) -> Option<mcp_warden_policy::Quarantine> {
    let schema = tool.definition.get("inputSchema")?;
    match crate::era::header_params(schema) {
        Ok(_) => None,
        Err(why) => {
            tracing::warn!(tool = %tool.name, %why, "tool definition rejected: invalid x-mcp-header annotation");
            Some(mcp_warden_policy::Quarantine::InvalidDefinition)
        }
    }
}

#[derive(Default)]
pub struct Registry {
    tools: RwLock<HashMap<String, Entry>>,
    listed: AtomicBool,
    /// Bumped whenever a name is new or a definition changed.
    generation: AtomicU64,
    search: Mutex<Option<(u64, Arc<SearchSet>)>>,
}

/// Every definition the registry holds, indexed for tool search: position
/// `i` of a result is upstream tool `names[i]` (look it up again for its
/// live quarantine state).
pub struct SearchSet {
    pub index: mcp_warden_policy::search::ToolIndex,
    pub names: Vec<String>,
}

impl Registry {
    pub fn get(&self, upstream_name: &str) -> Option<Arc<ObservedTool>> {
        self.tools
            .read()
            .unwrap()
            .get(upstream_name)
            .map(|e| e.tool.clone())
    }

    pub fn len(&self) -> usize {
        self.tools.read().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.read().unwrap().is_empty()
    }

    /// The search index over every definition, built on first use after a
    /// change (building is the cost: ~40 ms at 1,000 tools; a search is
    /// well under a millisecond).
    pub fn search_set(&self) -> Arc<SearchSet> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((g, set)) = self.search.lock().unwrap().as_ref() {
            if *g == generation {
                return set.clone();
            }
        }
        let (names, definitions): (Vec<String>, Vec<Value>) = {
            let map = self.tools.read().unwrap();
            let mut all: Vec<(&String, &Entry)> = map.iter().collect();
            all.sort_by(|a, b| a.0.cmp(b.0));
            all.into_iter()
                .map(|(n, e)| (n.clone(), e.tool.definition.clone()))
                .unzip()
        };
        let set = Arc::new(SearchSet {
            index: mcp_warden_policy::search::ToolIndex::build(&definitions),
            names,
        });
        *self.search.lock().unwrap() = Some((generation, set.clone()));
        set
    }

    /// A server with no tools to list: the inventory is complete as it is.
    pub fn mark_listed(&self) {
        self.listed.store(true, Ordering::Relaxed);
    }

    /// Record a complete upstream tool list and return it as observed, in
    /// upstream order, with quarantine decided under `policy`.
    pub fn observe(
        &self,
        definitions: Vec<Value>,
        policy: &LivePolicy,
        metrics: &Metrics,
    ) -> Vec<Arc<ObservedTool>> {
        let names: Vec<String> = definitions
            .iter()
            .filter_map(|d| d.get("name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut map = self.tools.write().unwrap();
        self.listed.store(true, Ordering::Relaxed);
        let mut out = Vec::with_capacity(definitions.len());
        for def in definitions {
            let Some(mut tool) = ObservedTool::new(def) else {
                continue;
            };
            if map.get(&tool.name).is_none_or(|e| e.tool.hash != tool.hash) {
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            let (first_seen, findings) = match map.get(&tool.name) {
                Some(e) if e.tool.hash == tool.hash => (e.first_seen.clone(), e.findings.clone()),
                Some(e) => (e.first_seen.clone(), scan(&tool, &names, policy)),
                None => (tool.hash.clone(), scan(&tool, &names, policy)),
            };
            let before = map.get(&tool.name).and_then(|e| e.tool.quarantine);
            tool.quarantine = policy
                .compiled
                .assess(&tool, Some(&first_seen), &findings)
                .or_else(|| invalid_definition(&tool));
            if tool.quarantine.is_some() && before.is_none() {
                tracing::warn!(tool = %tool.name, hash = %tool.hash, reason = tool.quarantine.map(|q| q.reason()), finding = tool.quarantine.and_then(|q| q.detail()), "tool quarantined");
            }
            for f in &findings {
                if tool.quarantine.is_none() {
                    tracing::warn!(tool = %tool.name, finding = %f.reason(), location = %f.location, "poisoning scan finding (warn only)");
                }
            }
            let tool = Arc::new(tool);
            out.push(tool.clone());
            map.insert(
                tool.name.clone(),
                Entry {
                    tool,
                    first_seen,
                    findings,
                },
            );
        }
        drop(map);
        self.publish_metrics(policy, metrics);
        out
    }

    /// Re-decide quarantine for every known tool (after a policy reload: a
    /// new pin releases a tool).
    pub fn reassess(&self, policy: &LivePolicy, metrics: &Metrics) {
        let mut map = self.tools.write().unwrap();
        for e in map.values_mut() {
            let mut tool = (*e.tool).clone();
            tool.quarantine = policy
                .compiled
                .assess(&tool, Some(&e.first_seen), &e.findings)
                .or_else(|| invalid_definition(&tool));
            e.tool = Arc::new(tool);
        }
        drop(map);
        self.publish_metrics(policy, metrics);
    }

    fn publish_metrics(&self, policy: &LivePolicy, metrics: &Metrics) {
        let (mut exposed, mut hidden, mut quarantined) = (0, 0, 0);
        for e in self.tools.read().unwrap().values() {
            if e.tool.quarantine.is_some() {
                quarantined += 1;
            } else if policy
                .compiled
                .decide_list(&e.tool, Some(mcp_warden_crds::Role::Admin), false)
                .is_allow()
            {
                exposed += 1;
            } else {
                hidden += 1;
            }
        }
        metrics.tools.with_label_values(&["exposed"]).set(exposed);
        metrics.tools.with_label_values(&["hidden"]).set(hidden);
        metrics
            .tools
            .with_label_values(&["quarantined"])
            .set(quarantined);
    }

    /// Every upstream tool with its hash, state and reason, sorted by name.
    pub fn snapshot(&self, policy: &LivePolicy) -> Value {
        let map = self.tools.read().unwrap();
        let mut names: Vec<&String> = map.keys().collect();
        names.sort();
        let tools: Vec<Value> = names
            .into_iter()
            .map(|name| {
                let e = &map[name];
                let (state, reason, exposed_as) = match e.tool.quarantine {
                    Some(q) => ("quarantined", Some(q.reason()), None),
                    None => match policy.compiled.decide_list(&e.tool, Some(mcp_warden_crds::Role::Admin), false) {
                        Decision::Allow(g) => ("exposed", None, Some(g.exposed_name.to_string())),
                        Decision::Deny(d) => ("hidden", Some(d.reason()), None),
                    },
                };
                json!({
                    "name": name,
                    "exposedAs": exposed_as,
                    "hash": e.tool.hash,
                    "firstSeenHash": e.first_seen,
                    "state": state,
                    "reason": reason,
                    "risk": mcp_warden_policy::risk_name(e.tool.inferred.risk),
                    // For a poisoned definition, the finding that quarantined it.
                    "finding": e.tool.quarantine.and_then(|q| q.detail()),
                    "findings": e.findings.iter().map(|f| json!({"kind": f.kind.as_str(), "detail": f.detail, "location": f.location})).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "tools": tools,
            "listed": self.listed.load(Ordering::Relaxed),
            "policy": policy.source_digest,
        })
    }
}

fn scan(tool: &ObservedTool, names: &[&str], policy: &LivePolicy) -> Vec<Finding> {
    if policy.doc.poisoning_scan == mcp_warden_crds::ScanAction::Off {
        return Vec::new();
    }
    poison::scan(&tool.definition, names)
}
