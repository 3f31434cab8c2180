//! Which MCPServers reference which ConfigMaps and Secrets for content the
//! approval covers (`crate::workload::referenced`: `secretEnv` keys, the
//! ToolProfile's JWKS ConfigMaps), so an edit of one re-reconciles exactly
//! those servers at once instead of at their next periodic look.
//!
//! ```text
//! reconcile: resolve ─▶ Index::record(server, referenced names)
//! metadata watch of ConfigMaps / Secrets (controller.rs) ─▶ Index::servers_using ─▶ reconcile(each)
//! ```
//! The index is filled by each server's reconcile (all of them run at
//! start) and holds names only; the watch behind it is metadata-only, so
//! the operator never holds a Secret's value in a cache.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Mutex,
};

use kube::runtime::reflector::ObjectRef;
use mcp_warden_crds::MCPServer;

use crate::workload::Referenced;

/// The kind of a referenced object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A ConfigMap.
    ConfigMap,
    /// A Secret.
    Secret,
}

/// `(namespace, server)`.
type ServerKey = (String, String);
/// `(kind, name)` of each object a server references.
type Names = BTreeSet<(Kind, String)>;

/// Each server's referenced objects.
#[derive(Debug, Default)]
pub struct Index(Mutex<BTreeMap<ServerKey, Names>>);

impl Index {
    /// Record what one server references now (replacing what it did).
    pub fn record(&self, namespace: &str, server: &str, referenced: &Referenced) {
        let names: Names = referenced
            .secrets
            .iter()
            .map(|(name, _)| (Kind::Secret, name.clone()))
            .chain(
                referenced
                    .config_maps
                    .iter()
                    .map(|(name, _)| (Kind::ConfigMap, name.clone())),
            )
            .collect();
        let mut index = self.0.lock().expect("references lock");
        let key = (namespace.to_string(), server.to_string());
        if names.is_empty() {
            index.remove(&key);
        } else {
            index.insert(key, names);
        }
    }

    /// The servers of `namespace` that reference the object `kind`/`name`.
    pub fn servers_using(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Vec<ObjectRef<MCPServer>> {
        let wanted = (kind, name.to_string());
        self.0
            .lock()
            .expect("references lock")
            .iter()
            .filter(|((ns, _), names)| ns == namespace && names.contains(&wanted))
            .map(|((ns, server), _)| ObjectRef::new(server).within(ns))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn referenced(secrets: &[&str], config_maps: &[&str]) -> Referenced {
        Referenced {
            secrets: secrets
                .iter()
                .map(|s| (s.to_string(), "k".into()))
                .collect(),
            config_maps: config_maps
                .iter()
                .map(|s| (s.to_string(), "k".into()))
                .collect(),
        }
    }

    #[test]
    fn an_object_maps_to_the_servers_of_its_namespace_that_reference_it() {
        let index = Index::default();
        index.record("a", "one", &referenced(&["db"], &["keys"]));
        index.record("a", "two", &referenced(&["db"], &[]));
        index.record("b", "three", &referenced(&["db"], &["keys"]));
        let names =
            |refs: Vec<ObjectRef<MCPServer>>| refs.into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(
            names(index.servers_using(Kind::Secret, "a", "db")),
            ["one", "two"]
        );
        assert_eq!(
            names(index.servers_using(Kind::ConfigMap, "a", "keys")),
            ["one"]
        );
        assert!(
            index.servers_using(Kind::ConfigMap, "a", "db").is_empty(),
            "a Secret is not a ConfigMap"
        );
        // A server that stops referencing it is no longer mapped.
        index.record("a", "one", &referenced(&[], &[]));
        assert_eq!(names(index.servers_using(Kind::Secret, "a", "db")), ["two"]);
        assert!(index.servers_using(Kind::ConfigMap, "a", "keys").is_empty());
    }
}
