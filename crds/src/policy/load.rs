//! Loading a [`FacadePolicy`]: parsing a YAML or JSON document (the
//! operator's ConfigMap or a local file) with errors that name the field, line
//! and column, and the allow-all policy `run` uses when it is given none.

use std::path::Path;

use serde::Deserialize;

use super::{
    access::{DefaultAction, RiskLevel, Role},
    auth::{AnonymousAccess, AuthConfig},
    resources::{PromptPolicy, ResourcePolicy},
    scanning::ScanAction,
    FacadePolicy, SandboxGrant, API_VERSION, KIND,
};

/// Why a policy document could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The document does not parse or has unknown/mistyped fields.
    #[error("invalid policy {path}: {message}")]
    Parse {
        /// The file (or `<inline>`).
        path: String,
        /// What is wrong, with the field path and, for YAML, the line and column.
        message: String,
    },
    /// `apiVersion` or `kind` is not a FacadePolicy.
    #[error("invalid policy {path}: expected apiVersion {API_VERSION} kind {KIND}, found {found}")]
    WrongKind {
        /// The file.
        path: String,
        /// What the document said.
        found: String,
    },
}

impl FacadePolicy {
    /// Parse a YAML (or JSON, a subset of YAML) document. `origin` names the
    /// source in errors.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Self, LoadError> {
        let parse_err = |message: String| LoadError::Parse {
            path: origin.to_string(),
            message,
        };
        // An empty file is an empty (deny-all) policy, not an error.
        let policy: FacadePolicy = if text.trim().is_empty() {
            FacadePolicy::default()
        } else {
            let de = serde_yaml_ng::Deserializer::from_str(text);
            serde_path_to_error_like(de).map_err(parse_err)?
        };
        if policy.api_version != API_VERSION || policy.kind != KIND {
            return Err(LoadError::WrongKind {
                path: origin.to_string(),
                found: format!("{} {}", policy.api_version, policy.kind),
            });
        }
        Ok(policy)
    }

    /// Read and parse a policy file.
    pub fn from_file(path: &Path) -> Result<Self, LoadError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: origin.clone(),
            source,
        })?;
        Self::from_yaml_str(&text, &origin)
    }

    /// A policy that exposes every tool to everyone with the default budgets:
    /// what `run` uses when no `--policy` is given.
    pub fn allow_all() -> Self {
        FacadePolicy {
            default_action: DefaultAction::Allow,
            clean_schemas: false,
            quarantine_on_drift: false,
            poisoning_scan: ScanAction::Warn,
            risk_ceiling: RiskLevel::Critical,
            resources: ResourcePolicy {
                default_action: DefaultAction::Allow,
                rules: Vec::new(),
            },
            prompts: PromptPolicy {
                default_action: DefaultAction::Allow,
                rules: Vec::new(),
            },
            auth: AuthConfig {
                anonymous: Some(AnonymousAccess { role: Role::Admin }),
                ..Default::default()
            },
            sandbox: SandboxGrant {
                write_allowed: true,
            },
            ..Default::default()
        }
    }
}

/// Deserialize and turn serde_yaml_ng's error (which carries the line and
/// column) into one message that also names the field path.
fn serde_path_to_error_like(de: serde_yaml_ng::Deserializer<'_>) -> Result<FacadePolicy, String> {
    FacadePolicy::deserialize(de).map_err(|e| match e.location() {
        Some(loc) => format!(
            "line {}, column {}: {}",
            loc.line(),
            loc.column(),
            strip_location(&e.to_string())
        ),
        None => e.to_string(),
    })
}

fn strip_location(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_document_denies_everything() {
        let p = FacadePolicy::from_yaml_str("", "t").unwrap();
        assert_eq!(p.default_action, DefaultAction::Deny);
        assert!(p.auth.anonymous.is_none());
        assert!(p.redaction.enabled);
        assert!(p.quarantine_on_drift);
    }

    #[test]
    fn default_matches_an_empty_mapping() {
        assert_eq!(
            FacadePolicy::from_yaml_str("{}", "t").unwrap(),
            FacadePolicy::default()
        );
    }

    #[test]
    fn unknown_field_names_line_and_field() {
        let text = "apiVersion: mcpwarden.dev/v1alpha1\nkind: FacadePolicy\ntools:\n  - name: a\n    aliass: b\n";
        let err = FacadePolicy::from_yaml_str(text, "p.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("p.yaml"), "{err}");
        assert!(err.contains("line 5"), "{err}");
        assert!(err.contains("aliass"), "{err}");
    }

    #[test]
    fn wrong_kind_is_rejected() {
        let err = FacadePolicy::from_yaml_str("kind: Pod\n", "p.yaml").unwrap_err();
        assert!(matches!(err, LoadError::WrongKind { .. }));
    }

    #[test]
    fn json_is_accepted() {
        let p = FacadePolicy::from_yaml_str(
            r#"{"defaultAction":"allow","tools":[{"name":"echo","alias":"say"}]}"#,
            "j",
        )
        .unwrap();
        assert_eq!(p.default_action, DefaultAction::Allow);
        assert_eq!(p.tools[0].alias.as_deref(), Some("say"));
    }

    #[test]
    fn allow_all_round_trips() {
        let p = FacadePolicy::allow_all();
        let text = serde_yaml_ng::to_string(&p).unwrap();
        assert_eq!(FacadePolicy::from_yaml_str(&text, "rt").unwrap(), p);
    }
}
