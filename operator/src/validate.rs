//! Validate (pure): the checks the API server's schema and CEL rules make,
//! repeated here so `render` (no API server) and an operator running against
//! an older CRD refuse the same specs. A failure is not retried: the server
//! waits for its spec or profile to change.

use std::collections::BTreeSet;

use mcp_warden_crds::remote::{host_port, RemoteServer};
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
    /// Neither a container image nor a remote server, or both.
    #[error("set exactly one of spec.image (a server container) or spec.remote (a server reached over HTTPS)")]
    ImageOrRemote,
    /// A remote server with container fields.
    #[error("spec.remote has no container: command, args, env, secretEnv, port and workspace do not apply")]
    RemoteWithContainer,
    /// A remote URL or token URL that is not a usable https:// URL, or an
    /// auth rule that is not exactly one credential.
    #[error("spec.remote: {0}")]
    Remote(String),
}

impl ValidateError {
    /// The condition reason for this error (CamelCase, stable).
    pub fn reason(&self) -> &'static str {
        match self {
            ValidateError::StdioWithoutCommand
            | ValidateError::HttpPort
            | ValidateError::Replicas(_)
            | ValidateError::ImageOrRemote
            | ValidateError::RemoteWithContainer
            | ValidateError::Remote(_) => "InvalidServerSpec",
            ValidateError::Alias { .. } | ValidateError::DuplicateExposedName(_) => {
                "InvalidToolProfile"
            }
        }
    }
}

/// Check an MCPServer and its ToolProfile; the first problem wins.
pub fn validate(server: &MCPServer, tools: &ToolProfileSpec) -> Result<(), ValidateError> {
    let spec = &server.spec;
    if let Some(remote) = &spec.remote {
        validate_remote(server, remote)?;
    } else if spec.image.is_empty() {
        return Err(ValidateError::ImageOrRemote);
    }
    match spec.transport {
        _ if spec.remote.is_some() => {}
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

/// A remote server: no container fields, https:// URLs with a host, each
/// auth rule exactly one credential (the CRD's CEL rules, repeated).
fn validate_remote(server: &MCPServer, remote: &RemoteServer) -> Result<(), ValidateError> {
    let spec = &server.spec;
    if !spec.image.is_empty() {
        return Err(ValidateError::ImageOrRemote);
    }
    if !spec.command.is_empty()
        || !spec.args.is_empty()
        || !spec.env.is_empty()
        || !spec.secret_env.is_empty()
        || spec.port.is_some()
        || spec.workspace.is_some()
    {
        return Err(ValidateError::RemoteWithContainer);
    }
    let bad = |what: &str, url: &str| {
        ValidateError::Remote(format!(
            "{what} {url:?} must be an https:// URL with a host"
        ))
    };
    if host_port(&remote.url).is_none() {
        return Err(bad("url", &remote.url));
    }
    for url in remote.token_urls() {
        if host_port(&url).is_none() {
            return Err(bad("tokenUrl", &url));
        }
    }
    if let Some(auth) = &remote.auth {
        for (i, rule) in auth.rules.iter().enumerate() {
            let given = [
                rule.token_secret_ref.is_some(),
                rule.client_credentials.is_some(),
                rule.token_exchange.is_some(),
                rule.use_facade == Some(true),
                rule.none == Some(true),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                return Err(ValidateError::Remote(format!(
                    "auth.rules[{i}]: give exactly one of tokenSecretRef, clientCredentials, tokenExchange, useFacade, none"
                )));
            }
            if rule.use_facade == Some(true) && auth.facade.is_none() {
                return Err(ValidateError::Remote(format!(
                    "auth.rules[{i}]: useFacade needs auth.facade"
                )));
            }
        }
        if let Some(f) = &auth.facade {
            if f.token_secret_ref.is_some() == f.client_credentials.is_some() {
                return Err(ValidateError::Remote(
                    "auth.facade: give exactly one of tokenSecretRef, clientCredentials".into(),
                ));
            }
        }
    }
    for cidr in &remote.private_cidrs {
        if cidr.parse::<std::net::IpAddr>().is_ok() || !cidr.contains('/') {
            return Err(ValidateError::Remote(format!(
                "privateCidrs: {cidr:?} must be a CIDR block such as 10.0.0.0/8"
            )));
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

    #[test]
    fn remote_servers_have_no_container_and_https_urls() {
        let none = ToolProfileSpec::default();
        let remote = |extra: &str| {
            server(&format!(
                "{{remote: {{url: 'https://mcp.example.com/mcp'{extra}}}, toolProfileRef: {{name: p}}}}"
            ))
        };
        assert_eq!(validate(&remote(""), &none), Ok(()));
        let mut both = remote("");
        both.spec.image = "img".into();
        assert_eq!(validate(&both, &none), Err(ValidateError::ImageOrRemote));
        assert_eq!(
            validate(&server("{toolProfileRef: {name: p}}"), &none),
            Err(ValidateError::ImageOrRemote)
        );
        let mut with_cmd = remote("");
        with_cmd.spec.command = vec!["x".into()];
        assert_eq!(
            validate(&with_cmd, &none),
            Err(ValidateError::RemoteWithContainer)
        );
        let plain = server("{remote: {url: 'http://mcp.example.com/'}, toolProfileRef: {name: p}}");
        assert!(matches!(
            validate(&plain, &none),
            Err(ValidateError::Remote(_))
        ));
        for bad in [
            ", auth: {rules: [{roles: [admin]}]}",
            ", auth: {rules: [{useFacade: true}]}",
            ", auth: {rules: [{none: true, tokenSecretRef: {name: s, key: k}}]}",
            ", auth: {rules: [{clientCredentials: {tokenUrl: 'http://idp/t', clientId: c, clientSecretRef: {name: s, key: k}}}]}",
            ", privateCidrs: ['10.0.0.1']",
        ] {
            assert!(matches!(validate(&remote(bad), &none), Err(ValidateError::Remote(_))), "{bad}");
        }
        let good = ", auth: {facade: {tokenSecretRef: {name: s, key: k}}, rules: [{roles: [admin], useFacade: true}, {none: true}]}, privateCidrs: [10.0.0.0/8]";
        assert_eq!(validate(&remote(good), &none), Ok(()));
    }
}
