//! Validate (pure): the checks the API server's schema and CEL rules make,
//! repeated here so `render` (no API server) and an operator running against
//! an older CRD refuse the same specs. A failure is not retried: the server
//! waits for its spec or profile to change.

use std::collections::BTreeSet;

use mcp_warden_crds::{mcpserver::Transport, MCPServer, ToolProfileSpec};

use crate::names::{ADMIN_PORT, FACADE_PORT, MAX_REPLICAS};

/// Why a spec cannot be built. Each variant names a condition reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValidateError {
    /// `transport: stdio` without a `command`.
    #[error("transport stdio needs spec.command: the bridge has to know what to start")]
    StdioWithoutCommand,
    /// `transport: streamable-http` without a usable `port`.
    #[error(
        "transport streamable-http needs spec.port (1-65535, not {FACADE_PORT} or {ADMIN_PORT})"
    )]
    HttpPort,
    /// Replicas outside 0..=10.
    #[error("spec.replicas {0} is out of range (0 to {MAX_REPLICAS})")]
    Replicas(i32),
    /// An alias that is not snake_case.
    #[error("tool {tool}: alias {alias:?} must be snake_case (a-z, 0-9, _; starting with a letter; at most 64)")]
    Alias {
        /// The upstream tool name.
        tool: String,
        /// The offending alias.
        alias: String,
    },
    /// Two tools exposed under one name.
    #[error("two tools would be exposed as {0:?}")]
    DuplicateExposedName(String),
}

impl ValidateError {
    /// The condition reason for this error (CamelCase, stable).
    pub fn reason(&self) -> &'static str {
        match self {
            ValidateError::StdioWithoutCommand
            | ValidateError::HttpPort
            | ValidateError::Replicas(_) => "InvalidServerSpec",
            ValidateError::Alias { .. } | ValidateError::DuplicateExposedName(_) => {
                "InvalidToolProfile"
            }
        }
    }
}

/// Check an MCPServer and its ToolProfile; the first problem wins.
pub fn validate(server: &MCPServer, tools: &ToolProfileSpec) -> Result<(), ValidateError> {
    let spec = &server.spec;
    match spec.transport {
        Transport::Stdio if spec.command.is_empty() => {
            return Err(ValidateError::StdioWithoutCommand)
        }
        Transport::StreamableHttp => match spec.port {
            Some(p) if (1..=65535).contains(&p) && p != FACADE_PORT && p != ADMIN_PORT => {}
            _ => return Err(ValidateError::HttpPort),
        },
        Transport::Stdio => {}
    }
    if !(0..=MAX_REPLICAS).contains(&spec.replicas) {
        return Err(ValidateError::Replicas(spec.replicas));
    }
    let mut exposed = BTreeSet::new();
    for tool in &tools.tools {
        if let Some(alias) = &tool.alias {
            if !is_snake_case(alias) {
                return Err(ValidateError::Alias {
                    tool: tool.name.clone(),
                    alias: alias.clone(),
                });
            }
        }
        let name = tool.alias.as_ref().unwrap_or(&tool.name);
        if !exposed.insert(name.clone()) {
            return Err(ValidateError::DuplicateExposedName(name.clone()));
        }
    }
    Ok(())
}

fn is_snake_case(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('a'..='z'))
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::ToolRule;

    fn server(spec: &str) -> MCPServer {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: s}}\nspec: {spec}\n"
        ))
        .unwrap()
    }

    fn tools(rules: &[(&str, Option<&str>)]) -> ToolProfileSpec {
        let tools = rules
            .iter()
            .map(|(n, a)| ToolRule {
                name: n.to_string(),
                alias: a.map(str::to_string),
                ..Default::default()
            })
            .collect();
        ToolProfileSpec {
            tools,
            ..Default::default()
        }
    }

    #[test]
    fn accepts_valid_specs() {
        let ok = tools(&[("a", Some("b_1")), ("c", None)]);
        assert_eq!(
            validate(
                &server("{image: i, command: [x], toolProfileRef: {name: p}}"),
                &ok
            ),
            Ok(())
        );
        let http = "{image: i, transport: streamable-http, port: 3000, toolProfileRef: {name: p}}";
        assert_eq!(validate(&server(http), &ok), Ok(()));
    }

    #[test]
    fn rejects_each_rule() {
        let none = ToolProfileSpec::default();
        let stdio = server("{image: i, toolProfileRef: {name: p}}");
        assert_eq!(
            validate(&stdio, &none),
            Err(ValidateError::StdioWithoutCommand)
        );
        let http = server("{image: i, transport: streamable-http, toolProfileRef: {name: p}}");
        assert_eq!(validate(&http, &none), Err(ValidateError::HttpPort));
        let clash =
            server("{image: i, transport: streamable-http, port: 8080, toolProfileRef: {name: p}}");
        assert_eq!(validate(&clash, &none), Err(ValidateError::HttpPort));
        let many = server("{image: i, command: [x], replicas: 11, toolProfileRef: {name: p}}");
        assert_eq!(validate(&many, &none), Err(ValidateError::Replicas(11)));
        let three = server("{image: i, command: [x], replicas: 3, toolProfileRef: {name: p}}");
        assert_eq!(validate(&three, &none), Ok(()));
        let ok = server("{image: i, command: [x], toolProfileRef: {name: p}}");
        assert!(matches!(
            validate(&ok, &tools(&[("a", Some("Bad-Name"))])),
            Err(ValidateError::Alias { .. })
        ));
        assert_eq!(
            validate(&ok, &tools(&[("a", Some("x")), ("x", None)])),
            Err(ValidateError::DuplicateExposedName("x".into()))
        );
    }
}
