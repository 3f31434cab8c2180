//! Validate (pure): what makes a gateway unbuildable. [`validate_spec`]
//! needs the spec alone and is also the admission webhook's check
//! (`crate::webhook::gateway`); [`check_prefixes`] needs the selected
//! backends and their published tool inventories.
//!
//! `prefix: none` is allowed only where it is shown safe: every backend
//! publishes its tool inventory (`status.tools`, what its facades report)
//! and no two backends' names meet after prefixing. An inventory that is
//! not published yet cannot show it, so the gateway waits
//! (`PrefixNoneUnproven`) instead of guessing; the gateway's facade still
//! withholds, at run time, any name two backends serve.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::Selector;
use mcp_warden_crds::mcpgateway::{GatewayResolve, PREFIX_NONE};
use mcp_warden_crds::MCPGatewaySpec;

use super::resolve::Backend;

/// Why a gateway cannot be built; it waits for a change.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GatewayInvalid {
    /// Two entries name the same server.
    #[error("backend {0:?} is named twice in spec.backends")]
    DuplicateBackend(String),
    /// A selector does not parse.
    #[error("spec.backends[{0}].selector: {1}")]
    InvalidSelector(usize, String),
    /// Two backends get the same prefix: every name would collide.
    #[error("backends {0:?} and {1:?} both have prefix {2:?}: their names would collide")]
    SamePrefix(String, String, String),
    /// The named ToolProfile does not exist.
    #[error("ToolProfile {0:?} not found in the gateway's namespace")]
    ToolProfileNotFound(String),
    /// No server is selected.
    #[error("no MCPServer of the namespace is a backend (named: {0})")]
    NoBackends(String),
    /// `prefix: none` cannot be shown safe yet.
    #[error("backend {backend:?} has prefix none, but {why}: no collision can be ruled out")]
    PrefixNoneUnproven {
        /// The backend with prefix none.
        backend: String,
        /// Which inventory is missing.
        why: String,
    },
    /// `prefix: none` makes two backends serve the same name.
    #[error("with prefix none, backends {0} and {1} both serve tool {2:?}")]
    PrefixCollision(String, String, String),
    /// `expose.ingress` or `expose.httpRoute` without `expose.hosts`.
    #[error("an Ingress or HTTPRoute needs expose.hosts: the names it routes")]
    ExposeWithoutHosts,
    /// `spec.resolve` maps one name twice.
    #[error("spec.resolve maps {0:?} twice")]
    DuplicateMapping(String),
    /// The compiled policy is one the facade would refuse.
    #[error("the gateway's policy: {0}")]
    InvalidPolicy(String),
}

impl GatewayInvalid {
    /// The `Ready=False` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            GatewayInvalid::DuplicateBackend(_) => "DuplicateBackend",
            GatewayInvalid::InvalidSelector(..) => "InvalidSelector",
            GatewayInvalid::SamePrefix(..) | GatewayInvalid::PrefixCollision(..) => {
                "PrefixCollision"
            }
            GatewayInvalid::ToolProfileNotFound(_) => "ToolProfileNotFound",
            GatewayInvalid::NoBackends(_) => "NoBackends",
            GatewayInvalid::PrefixNoneUnproven { .. } => "PrefixNoneUnproven",
            GatewayInvalid::InvalidPolicy(_) => "InvalidPolicy",
            GatewayInvalid::DuplicateMapping(_) => "DuplicateMapping",
            GatewayInvalid::ExposeWithoutHosts => "InvalidGatewaySpec",
        }
    }
}

/// What the spec alone shows (webhook and operator).
pub fn validate_spec(spec: &MCPGatewaySpec) -> Result<(), GatewayInvalid> {
    let mut named = BTreeSet::new();
    let mut prefixes: BTreeMap<String, String> = BTreeMap::new();
    for (i, entry) in spec.backends.iter().enumerate() {
        if let Some(selector) = &entry.selector {
            Selector::try_from(selector.clone())
                .map_err(|e| GatewayInvalid::InvalidSelector(i, e.to_string()))?;
        }
        let Some(name) = &entry.name else { continue };
        if !named.insert(name.clone()) {
            return Err(GatewayInvalid::DuplicateBackend(name.clone()));
        }
        let prefix = match entry.prefix.as_deref() {
            Some(p) if p == PREFIX_NONE => continue,
            Some(p) => p.to_string(),
            None => super::resolve::default_prefix(name),
        };
        if let Some(other) = prefixes.insert(prefix.clone(), name.clone()) {
            return Err(GatewayInvalid::SamePrefix(other, name.clone(), prefix));
        }
    }
    // As for an MCPServer (its CRD rule, kept here for the webhook and for
    // objects the API server stored before the rule existed).
    if let Some(expose) = &spec.expose {
        let routed = expose.ingress.is_some() || expose.http_route.is_some();
        if routed && expose.hosts.is_empty() {
            return Err(GatewayInvalid::ExposeWithoutHosts);
        }
    }
    let mut mapped = BTreeSet::new();
    for r in &spec.resolve {
        if !mapped.insert(r.name.as_str()) {
            return Err(GatewayInvalid::DuplicateMapping(r.name.clone()));
        }
    }
    Ok(())
}

/// Everything that can be checked before anything is written: the spec,
/// the profile it names, the selection and its prefixes.
pub fn check(
    gw: &mcp_warden_crds::MCPGateway,
    profile: Option<&mcp_warden_crds::ToolProfileSpec>,
    selection: &super::resolve::Selection,
) -> Result<(), GatewayInvalid> {
    validate_spec(&gw.spec)?;
    if let (Some(r), None) = (&gw.spec.tool_profile_ref, profile) {
        return Err(GatewayInvalid::ToolProfileNotFound(r.name.clone()));
    }
    if selection.backends.is_empty() {
        let named = if selection.missing.is_empty() {
            "none".to_string()
        } else {
            selection.missing.join(", ")
        };
        return Err(GatewayInvalid::NoBackends(named));
    }
    check_prefixes(&selection.backends, &gw.spec.resolve)
}

/// The names a backend's facades report (exposed, hidden or quarantined:
/// a hidden tool may be another caller's), or `None` when it publishes none.
fn inventory(backend: &Backend) -> Option<BTreeSet<String>> {
    let tools = &backend.server.status.as_ref()?.tools;
    (!tools.is_empty()).then(|| {
        tools
            .iter()
            .map(|t| t.exposed_as.clone().unwrap_or_else(|| t.name.clone()))
            .collect()
    })
}

/// The selected backends' prefixes: no two equal, and `none` only where
/// every backend's inventory shows that no name meets another — or that
/// the name is mapped (`spec.resolve`) to one of the backends serving it.
pub fn check_prefixes(
    backends: &[Backend],
    resolve: &[GatewayResolve],
) -> Result<(), GatewayInvalid> {
    let mut seen: BTreeMap<&str, String> = BTreeMap::new();
    for b in backends.iter().filter(|b| !b.prefix.is_empty()) {
        if let Some(other) = seen.insert(b.prefix.as_str(), b.name()) {
            return Err(GatewayInvalid::SamePrefix(
                other,
                b.name(),
                b.prefix.clone(),
            ));
        }
    }
    let Some(unprefixed) = backends.iter().find(|b| b.prefix.is_empty()) else {
        return Ok(());
    };
    let mut served: BTreeMap<String, String> = BTreeMap::new();
    for b in backends {
        let names = inventory(b).ok_or_else(|| GatewayInvalid::PrefixNoneUnproven {
            backend: unprefixed.name(),
            why: format!("MCPServer {:?} publishes no tool inventory yet", b.name()),
        })?;
        for name in names {
            let full = format!("{}{name}", b.prefix);
            if let Some(other) = served.insert(full.clone(), b.name()) {
                let mapped = resolve
                    .iter()
                    .any(|r| r.name == full && (r.backend == other || r.backend == b.name()));
                if mapped {
                    continue;
                }
                return Err(GatewayInvalid::PrefixCollision(other, b.name(), full));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::MCPServer;

    fn spec(backends: &str) -> MCPGatewaySpec {
        serde_yaml_ng::from_str(&format!("backends: {backends}")).unwrap()
    }

    fn backend(name: &str, prefix: &str, tools: &[&str]) -> Backend {
        let mut server: MCPServer = serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: {name}, namespace: a}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: p}}}}\n"
        ))
        .unwrap();
        if !tools.is_empty() {
            server.status = Some(
                serde_json::from_value(serde_json::json!({"tools": tools
                    .iter()
                    .map(|t| serde_json::json!({"name": t, "state": "exposed"}))
                    .collect::<Vec<_>>()}))
                .unwrap(),
            );
        }
        Backend {
            server,
            prefix: prefix.into(),
        }
    }

    #[test]
    fn the_spec_alone_refuses_duplicates_equal_prefixes_and_bad_selectors() {
        assert_eq!(validate_spec(&spec("[{name: git}, {name: fs}]")), Ok(()));
        assert_eq!(
            validate_spec(&spec("[{name: git}, {name: git, prefix: x_}]")),
            Err(GatewayInvalid::DuplicateBackend("git".into()))
        );
        assert_eq!(
            validate_spec(&spec("[{name: git, prefix: fs__}, {name: fs}]")).map_err(|e| e.reason()),
            Err("PrefixCollision")
        );
        // two backends with none are left to the inventories
        assert_eq!(
            validate_spec(&spec(
                "[{name: git, prefix: none}, {name: fs, prefix: none}]"
            )),
            Ok(())
        );
        let mut mapped = spec("[{name: git}, {name: fs}]");
        mapped.resolve =
            serde_yaml_ng::from_str("[{name: status, backend: git}, {name: status, backend: fs}]")
                .unwrap();
        assert_eq!(
            validate_spec(&mapped),
            Err(GatewayInvalid::DuplicateMapping("status".into()))
        );
        mapped.resolve.pop();
        assert_eq!(validate_spec(&mapped), Ok(()));
        let mut routed = spec("[{name: git}]");
        routed.expose =
            serde_yaml_ng::from_str("{httpRoute: {parentRefs: [{name: public}]}}").unwrap();
        assert_eq!(
            validate_spec(&routed),
            Err(GatewayInvalid::ExposeWithoutHosts)
        );
        routed.expose = serde_yaml_ng::from_str("{ingress: {}}").unwrap();
        assert_eq!(
            validate_spec(&routed).map_err(|e| e.reason()),
            Err("InvalidGatewaySpec")
        );
        routed.expose.as_mut().unwrap().hosts = vec!["tools.example.com".into()];
        assert_eq!(validate_spec(&routed), Ok(()));
        let bad = "[{selector: {matchExpressions: [{key: team, operator: Bogus, values: [x]}]}}]";
        assert_eq!(
            validate_spec(&spec(bad)).map_err(|e| e.reason()),
            Err("InvalidSelector")
        );
    }

    #[test]
    fn prefix_none_needs_every_inventory_and_no_meeting_names() {
        let prefixed = [
            backend("git", "git__", &["status"]),
            backend("fs", "fs__", &[]),
        ];
        assert_eq!(
            check_prefixes(&prefixed, &[]),
            Ok(()),
            "no none: nothing to prove"
        );
        let unproven = [backend("git", "", &["status"]), backend("fs", "fs__", &[])];
        let err = check_prefixes(&unproven, &[]).unwrap_err();
        assert_eq!(err.reason(), "PrefixNoneUnproven");
        assert!(
            err.to_string()
                .contains("\"fs\" publishes no tool inventory"),
            "{err}"
        );
        let clean = [
            backend("git", "", &["status"]),
            backend("fs", "fs__", &["read"]),
        ];
        assert_eq!(check_prefixes(&clean, &[]), Ok(()));
        let clash = [
            backend("git", "", &["fs__read"]),
            backend("fs", "fs__", &["read"]),
        ];
        assert_eq!(
            check_prefixes(&clash, &[]),
            Err(GatewayInvalid::PrefixCollision(
                "git".into(),
                "fs".into(),
                "fs__read".into()
            ))
        );
        let both_none = [backend("a", "", &["x"]), backend("b", "", &["x"])];
        assert_eq!(
            check_prefixes(&both_none, &[]).unwrap_err().reason(),
            "PrefixCollision"
        );
        // A name the gateway's mapping serves from one of the two is allowed;
        // a mapping to a third server proves nothing.
        let map = |backend: &str| GatewayResolve {
            name: "x".into(),
            backend: backend.into(),
        };
        assert_eq!(check_prefixes(&both_none, &[map("b")]), Ok(()));
        assert_eq!(
            check_prefixes(&both_none, &[map("c")])
                .unwrap_err()
                .reason(),
            "PrefixCollision"
        );
    }
}
