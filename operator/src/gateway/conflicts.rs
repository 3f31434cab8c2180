//! Conflicts (pure): the names the gateway's facade withholds, as the
//! operator knows them from two sources, merged ([`union`]).
//!
//! Where it sits: between the selection ([`super::resolve`]) and the status
//! ([`super::status`]). [`tool_conflicts`] builds the same name table the
//! facade keeps ([`mcp_warden_policy::gateway_names`], one rule code for
//! both) from each backend's published tool inventory (its `status.tools`)
//! and prefix, with the gateway's `spec.resolve` mapping: tool collisions
//! and confusable spellings, known before any gateway pod runs. The
//! gateway's pods add what only the facade sees ([`super::observe`], their
//! `/gateway` view): shadowing, prompts and resource templates.

use std::collections::{BTreeMap, BTreeSet};

use mcp_warden_crds::mcpgateway::{GatewayConflictStatus, GatewayResolve};
use mcp_warden_policy::gateway_names::{Catalog, ConflictKind, Names};

use super::resolve::Backend;

/// Conflicts listed in status at most (the rest are counted in the
/// condition's message).
pub const MAX_LISTED: usize = 32;

/// The tool-name conflicts among `backends`, in a stable order.
pub fn tool_conflicts(
    backends: &[Backend],
    resolve: &[GatewayResolve],
) -> Vec<GatewayConflictStatus> {
    let mut names = Names::new(
        backends
            .iter()
            .map(|b| (b.name(), b.prefix.clone()))
            .collect(),
    );
    for r in resolve {
        // A mapping to a server that is not a backend is inert, as at the
        // gateway (the operator does not pass it on).
        let _ = names.resolve(&r.name, &r.backend);
    }
    for (i, b) in backends.iter().enumerate() {
        let Some(status) = b.server.status.as_ref() else {
            continue;
        };
        // Every state: a tool hidden from one caller may be another's.
        let listed: Vec<String> = status
            .tools
            .iter()
            .map(|t| t.exposed_as.clone().unwrap_or_else(|| t.name.clone()))
            .collect();
        let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
        names.observe(Catalog::Tools, i, &listed);
    }
    names
        .conflicts()
        .into_iter()
        .map(|c| GatewayConflictStatus {
            kind: c.kind.as_str().into(),
            catalog: c.catalog.as_str().into(),
            names: c.names,
            backends: c.backends,
            detail: None,
            resolved_by: c.resolved.map(|(_, backend)| backend),
            reported_by_gateway: false,
        })
        .collect()
}

/// Where a word of the facade's sorts: its rules' order (collision,
/// confusable, shadowing; tool, prompt, resource template), a word this
/// operator does not know (a newer gateway's) after them.
fn rank(word: &str) -> usize {
    ConflictKind::ALL
        .iter()
        .map(|k| k.as_str())
        .chain(Catalog::ALL.iter().map(|c| c.as_str()))
        .position(|w| w == word)
        .map_or(usize::MAX, |p| p % 3)
}

/// Several lists of conflicts (the inventories', each gateway pod's) as
/// one, without duplicates, sorted by kind, catalog and names. One entry
/// per (kind, catalog, names): its backends and details are the union, it
/// is withheld (no `resolvedBy`) if any list has it withheld, and
/// `reportedByGateway` if any gateway pod reported it.
pub fn union(lists: Vec<Vec<GatewayConflictStatus>>) -> Vec<GatewayConflictStatus> {
    type Key = (usize, String, usize, String, Vec<String>);
    let mut merged: BTreeMap<Key, (GatewayConflictStatus, BTreeSet<String>)> = BTreeMap::new();
    for c in lists.into_iter().flatten() {
        let key = (
            rank(&c.kind),
            c.kind.clone(),
            rank(&c.catalog),
            c.catalog.clone(),
            c.names.clone(),
        );
        let details: BTreeSet<String> = c
            .detail
            .iter()
            .flat_map(|d| d.split(','))
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect();
        match merged.get_mut(&key) {
            None => {
                merged.insert(key, (c, details));
            }
            Some((have, seen)) => {
                let backends: BTreeSet<String> =
                    have.backends.drain(..).chain(c.backends).collect();
                // Each list is within the CRD's bound; their union may not be.
                have.backends = backends.into_iter().take(32).collect();
                if c.resolved_by.is_none() {
                    have.resolved_by = None;
                }
                have.reported_by_gateway |= c.reported_by_gateway;
                seen.extend(details);
            }
        }
    }
    merged
        .into_values()
        .map(|(mut c, details)| {
            c.detail = (!details.is_empty())
                .then(|| details.into_iter().collect::<Vec<_>>().join(","))
                .map(|d| d.chars().take(512).collect());
            c
        })
        .collect()
}

/// The `Conflicts` condition: `True` (`NamesWithheld`) while a name is
/// withheld, with how many and of which kinds; else `False`, `Resolved`
/// where every conflict is mapped, or `NoConflicts`.
pub fn condition(conflicts: &[GatewayConflictStatus]) -> (&'static str, &'static str, String) {
    let withheld: Vec<&GatewayConflictStatus> = conflicts
        .iter()
        .filter(|c| c.resolved_by.is_none())
        .collect();
    if !withheld.is_empty() {
        let count = |word: fn(&GatewayConflictStatus) -> &str| {
            let mut n: BTreeMap<(usize, &str), usize> = BTreeMap::new();
            for c in &withheld {
                *n.entry((rank(word(c)), word(c))).or_default() += 1;
            }
            n.into_iter()
                .map(|((_, w), n)| format!("{w} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let listed: Vec<String> = withheld
            .iter()
            .map(|c| {
                format!(
                    "{} {} {} ({})",
                    c.kind,
                    c.catalog,
                    c.names.join("/"),
                    c.backends.join(", ")
                )
            })
            .collect();
        return (
            "True",
            "NamesWithheld",
            format!(
                "the gateway withholds {} name(s) ({}; {}) until a backend stops serving them, a prefix changes, or spec.resolve maps them (never a shadowing one): {}",
                withheld.len(),
                count(|c| c.catalog.as_str()),
                count(|c| c.kind.as_str()),
                listed.join("; ")
            ),
        );
    }
    if conflicts.is_empty() {
        (
            "False",
            "NoConflicts",
            "no name of one backend meets another's, and no gateway pod withholds one".into(),
        )
    } else {
        (
            "False",
            "Resolved",
            format!(
                "{} conflict(s), each served by the backend spec.resolve names",
                conflicts.len()
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::MCPServer;

    fn backend(name: &str, prefix: &str, tools: &[&str]) -> Backend {
        let mut server: MCPServer = serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: {name}, namespace: a}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: p}}}}\n"
        ))
        .unwrap();
        server.status = Some(
            serde_json::from_value(serde_json::json!({"tools": tools
                .iter()
                .map(|t| serde_json::json!({"name": t, "state": "exposed"}))
                .collect::<Vec<_>>()}))
            .unwrap(),
        );
        Backend {
            server,
            prefix: prefix.into(),
        }
    }

    /// The same cases the facade's table is tested with: a collision, a
    /// case-folded look-alike, a look-alike with a Cyrillic `о`, and prefixes that
    /// keep names apart.
    #[test]
    fn the_facades_rules_on_published_inventories() {
        let backends = [
            backend("a", "", &["echo", "read_file", "copy"]),
            backend("b", "", &["echo", "Read_File", "c\u{043e}py", "write"]),
            backend("c", "c__", &["echo"]),
        ];
        let found = tool_conflicts(&backends, &[]);
        let summary: Vec<(String, Vec<String>, Vec<String>)> = found
            .iter()
            .map(|c| (c.kind.clone(), c.names.clone(), c.backends.clone()))
            .collect();
        let ab = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            summary,
            vec![
                ("collision".into(), vec!["echo".into()], ab.clone()),
                (
                    "confusable".into(),
                    vec!["Read_File".into(), "read_file".into()],
                    ab.clone()
                ),
                (
                    "confusable".into(),
                    vec!["copy".into(), "c\u{043e}py".into()],
                    ab.clone()
                ),
            ]
        );
        assert_eq!(condition(&found).1, "NamesWithheld");
        assert!(
            condition(&found).2.contains("collision tool echo (a, b)"),
            "{}",
            condition(&found).2
        );
    }

    #[test]
    fn a_mapping_marks_its_conflict_resolved() {
        let backends = [backend("a", "", &["echo"]), backend("b", "", &["echo"])];
        let map = |backend: &str| GatewayResolve {
            name: "echo".into(),
            backend: backend.into(),
        };
        let found = tool_conflicts(&backends, &[map("b")]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].resolved_by.as_deref(), Some("b"));
        assert_eq!(condition(&found).1, "Resolved");
        // A mapping to a server that is no backend changes nothing.
        let found = tool_conflicts(&backends, &[map("elsewhere")]);
        assert_eq!(found[0].resolved_by, None);
        assert_eq!(
            condition(&tool_conflicts(&backends[..1], &[])).1,
            "NoConflicts"
        );
    }

    #[test]
    fn a_union_stays_within_the_crds_bounds() {
        let entry = |from: usize| GatewayConflictStatus {
            kind: "collision".into(),
            catalog: "tool".into(),
            names: vec!["echo".into()],
            backends: (from..from + 32).map(|i| format!("b{i:03}")).collect(),
            detail: Some("x".repeat(400)),
            ..GatewayConflictStatus::default()
        };
        let one = union(vec![
            vec![entry(0)],
            vec![GatewayConflictStatus {
                detail: Some("y".repeat(400)),
                ..entry(32)
            }],
        ]);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].backends.len(), 32);
        assert_eq!(one[0].detail.as_ref().unwrap().chars().count(), 512);
    }
}
