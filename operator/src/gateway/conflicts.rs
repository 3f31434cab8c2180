//! Conflicts (pure): the names the gateway's facade withholds, as the
//! operator can know them without reaching into the gateway's pods.
//!
//! Where it sits: between the selection ([`super::resolve`]) and the status
//! ([`super::status`]). It builds the same name table the facade keeps
//! ([`mcp_warden_policy::gateway_names`], one rule code for both) from each
//! backend's published tool inventory (its `status.tools`) and prefix, with
//! the gateway's `spec.resolve` mapping. What it cannot see: prompts and
//! resource templates (not published), and shadowing (decided by the
//! facade's poisoning scan over definitions the inventory does not carry);
//! those stay on the gateway's `/gateway` admin view, metric and audit.

use mcp_warden_crds::mcpgateway::{GatewayConflictStatus, GatewayResolve};
use mcp_warden_policy::gateway_names::{Catalog, Names};

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
            names: c.names,
            backends: c.backends,
            resolved_by: c.resolved.map(|(_, backend)| backend),
        })
        .collect()
}

/// The `Conflicts` condition: `True` (`NamesWithheld`) while a name is
/// withheld; else `False`, `Resolved` where every conflict is mapped, or
/// `NoConflicts`.
pub fn condition(conflicts: &[GatewayConflictStatus]) -> (&'static str, &'static str, String) {
    let withheld: Vec<String> = conflicts
        .iter()
        .filter(|c| c.resolved_by.is_none())
        .map(|c| {
            format!(
                "{} {} ({})",
                c.kind,
                c.names.join("/"),
                c.backends.join(", ")
            )
        })
        .collect();
    if !withheld.is_empty() {
        return (
            "True",
            "NamesWithheld",
            format!(
                "the gateway withholds {} name(s) until spec.resolve maps them or a backend stops serving them: {}",
                withheld.len(),
                withheld.join("; ")
            ),
        );
    }
    if conflicts.is_empty() {
        (
            "False",
            "NoConflicts",
            "no tool name of one backend meets another's".into(),
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
            condition(&found).2.contains("collision echo (a, b)"),
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
}
